"""A stand-in for a PyTorch without the jagged layout (Debian 12's python3-torch 1.13): what
examples/dlpack.py must pass over for NumPy (tests/meson.build, example-dlpack-old-torch)."""
__version__ = "1.13.1"
