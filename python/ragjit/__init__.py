"""ragjit: a JIT compiler for ragged (jagged) tensor expressions, from Python.

    import numpy as np, ragjit
    prog = ragjit.compile('''
        ragged j1 : B
        input x : f32[B, j1, 8]
        y = softmax(x, dim=1)
        output y
    ''')
    x = ragjit.Jagged(np.random.rand(10, 8).astype(np.float32), offsets=[0, 3, 3, 10])
    y = prog(x=x)          # a ragjit.Jagged over the same offsets

PyTorch tensors work the same way: a nested jagged tensor (``layout=torch.jagged``) in, one
out over the same offsets tensor; dense tensors in, tensors out; nothing copied. And
``ragjit.torch.op(prog)`` (``import ragjit.torch``; it needs PyTorch) makes the program a
``torch.library`` custom operator that ``torch.compile(fullgraph=True)`` keeps in its graph.

See :func:`compile`, :class:`Program`, :class:`Jagged`, :class:`Context` and the exceptions
(:class:`Error` and one subclass per ragjit status). The C library is loaded through ctypes
(``ragjit._lib`` says where it is looked for); :func:`blas_info` says which BLAS it uses."""
from ._core import Context, Jagged, Program, compile, default_context
from ._lib import blas_info
from ._errors import (ArgumentError, BatchError, CompileError, DtypeError, Error, FileError,
                      GraphError, IndexRangeError, InternalError, NoDeviceError, NoMemoryError,
                      OffsetsEndError, OffsetsOrderError, OffsetsStartError, PadLengthError,
                      ParseError, SameError, ShapeError, SizeError, SizeOverflowError,
                      UnboundError, UnsupportedError)

__version__ = "0.1.0"

__all__ = [
    "compile", "Program", "Jagged", "Context", "default_context", "blas_info",
    "Error", "NoMemoryError", "ArgumentError", "GraphError", "ShapeError", "DtypeError",
    "UnsupportedError", "UnboundError", "SizeError", "BatchError", "OffsetsStartError",
    "OffsetsOrderError", "OffsetsEndError", "SameError", "SizeOverflowError", "PadLengthError",
    "ParseError", "FileError", "CompileError", "NoDeviceError", "InternalError", "IndexRangeError",
]
