"""Finding and loading libragjit, and the ctypes signatures of the C calls the package uses.

The library is looked for, in order:

1. ``$RAGJIT_LIB``, a path to a ``libragjit`` shared library;
2. inside the installed package (``pip install .`` puts ``libragjit.so`` there; an editable
   install finds it in its build directory through :mod:`importlib.resources`);
3. the build tree of a source checkout (``build/libragjit.so.0`` beside ``python/``, as
   ``./build.sh`` makes it), so the package runs from ``python/`` without installing;
4. the system loader (``libragjit.so.0``, e.g. after ``meson install``).

Before loading it, :func:`choose_blas` may point ``RAGJIT_BLAS`` at the OpenBLAS of the
scipy-openblas32 wheel, where the system has no fast BLAS (libragjit reads the variable when it
first multiplies matrices).
"""
from __future__ import annotations

import ctypes
import importlib.resources
import importlib.util
import os
from pathlib import Path
from typing import List, Optional

c_void_p = ctypes.c_void_p
c_int = ctypes.c_int
c_int64 = ctypes.c_int64
c_char_p = ctypes.c_char_p
c_int64_p = ctypes.POINTER(ctypes.c_int64)

RJ_MAX_RANK = 8
RJ_DIM_NONE = -(2**63)

# rj_dim_kind
DIM_CONST, DIM_DENSE, DIM_RAGGED, DIM_MAXLEN = 0, 1, 2, 3


class TensorInfo(ctypes.Structure):
    """rj_tensor_info."""

    _fields_ = [
        ("dtype", c_int),
        ("rank", c_int),
        ("ragged_dim", c_int),
        ("shape", c_int64 * RJ_MAX_RANK),
        ("values", c_void_p),
        ("rows", c_int64),
        ("offsets", c_int64_p),
        ("lengths", c_int64_p),
        ("ragged_dims", c_int),
    ]


class DimInfo(ctypes.Structure):
    """rj_dim_info."""

    _fields_ = [
        ("kind", c_int),
        ("name", c_char_p),
        ("parent", c_int64),
        ("same", c_int64),
        ("used", ctypes.c_bool),
    ]


# name: (restype, argtypes)
_SIGNATURES = {
    "rj_status_str": (c_char_p, [c_int]),
    "rj_ctx_new": (c_void_p, [c_void_p, c_void_p]),
    "rj_ctx_free": (None, [c_void_p]),
    "rj_ctx_error": (c_char_p, [c_void_p]),
    "rj_ctx_status": (c_int, [c_void_p]),
    "rj_ctx_set_threads": (c_int, [c_void_p, c_int]),
    "rj_ctx_set_memory_limit": (c_int, [c_void_p, c_int64]),
    "rj_ctx_set_cache_dir": (c_int, [c_void_p, c_char_p]),
    "rj_string_free": (None, [c_void_p, c_void_p]),
    "rj_graph_parse": (c_void_p, [c_void_p, c_char_p, c_char_p]),
    "rj_graph_free": (None, [c_void_p]),
    "rj_graph_warnings": (c_char_p, [c_void_p]),
    "rj_graph_input_count": (c_int, [c_void_p]),
    "rj_graph_input_at": (ctypes.c_int32, [c_void_p, c_int]),
    "rj_graph_input_name": (c_char_p, [c_void_p, c_int]),
    "rj_graph_input_used": (ctypes.c_bool, [c_void_p, c_int]),
    "rj_graph_output_count": (c_int, [c_void_p]),
    "rj_graph_output_at": (ctypes.c_int32, [c_void_p, c_int]),
    "rj_graph_output_name": (c_char_p, [c_void_p, c_int]),
    "rj_graph_dim_count": (c_int, [c_void_p]),
    "rj_graph_dim_at": (c_int64, [c_void_p, c_int]),
    "rj_dim_get_info": (c_int, [c_void_p, c_int64, ctypes.POINTER(DimInfo)]),
    "rj_node_dtype": (c_int, [c_void_p, ctypes.c_int32]),
    "rj_node_shape": (c_int, [c_void_p, ctypes.c_int32, c_int64_p]),
    "rj_node_type_str": (c_void_p, [c_void_p, ctypes.c_int32]),
    "rj_program_new": (c_void_p, [c_void_p, c_int]),
    "rj_program_free": (None, [c_void_p]),
    "rj_program_dump": (c_void_p, [c_void_p, c_char_p]),
    "rj_bind_new": (c_void_p, [c_void_p]),
    "rj_bind_free": (None, [c_void_p]),
    "rj_bind_size": (c_int, [c_void_p, c_int64, c_int64]),
    "rj_bind_offsets": (c_int, [c_void_p, c_int64, c_int64, c_void_p, c_void_p]),
    "rj_bind_input": (c_int, [c_void_p, ctypes.c_int32, c_void_p, c_int64]),
    "rj_bind_output": (c_int, [c_void_p, ctypes.c_int32, c_void_p, c_int64]),
    "rj_bind_output_numel": (c_int, [c_void_p, ctypes.c_int32, c_int64_p]),
    "rj_program_run": (c_int, [c_void_p, c_void_p]),
    "rj_bind_prepare": (c_int, [c_void_p]),
    "rj_bind_result": (c_void_p, [c_void_p, ctypes.c_int32]),
    "rj_tensor_get_info": (c_int, [c_void_p, ctypes.POINTER(TensorInfo)]),
    "rj_bind_input_device": (c_int, [c_void_p, ctypes.c_int32, ctypes.c_uint64, c_int64]),
    "rj_bind_output_device": (c_int, [c_void_p, ctypes.c_int32, ctypes.c_uint64, c_int64]),
    "rj_bind_offsets_device": (c_int, [c_void_p, c_int64, c_int64, ctypes.c_uint64, ctypes.c_uint64]),
    "rj_bind_stream": (c_int, [c_void_p, c_void_p]),
    "rj_bind_wait": (c_int, [c_void_p]),
    "rj_bind_stats": (c_int, [c_void_p, c_void_p]),
    "rj_bind_constant": (c_int, [c_void_p, ctypes.c_int32, ctypes.c_bool]),
    "rj_blas_info": (c_char_p, []),
}


# the functions module _fastcall calls, in the order it takes their addresses
_FASTCALL_FNS = ("rj_bind_new", "rj_bind_free", "rj_bind_offsets", "rj_bind_input", "rj_bind_output",
                 "rj_program_run")

# What libragjit looks for first (src/util/blas.c): with one of these the system has a fast BLAS.
_SYSTEM_BLAS = ("libopenblas.so.0", "libmkl_rt.so.2", "libmkl_rt.so", "libblis.so.4", "libblis.so.3",
                "libflexiblas.so.3")


def _wheel_openblas() -> Optional[str]:
    """The OpenBLAS of PyPI's scipy-openblas32 wheel (a dependency of the package), if installed."""
    spec = importlib.util.find_spec("scipy_openblas32")
    if spec is None or not spec.submodule_search_locations:
        return None
    for d in spec.submodule_search_locations:
        libs = sorted((Path(d) / "lib").glob("libscipy_openblas*.so*"))
        if libs:
            return str(libs[0])
    return None


def _loads(name: str) -> bool:
    try:
        ctypes.CDLL(name)
        return True
    except OSError:
        return False


def choose_blas(environ: "os._Environ[str] | dict", loads=_loads, wheel=_wheel_openblas) -> Optional[str]:
    """The BLAS to point libragjit at through RAGJIT_BLAS, or None to leave its own search be.

    libragjit uses the system's OpenBLAS (or MKL, BLIS, FlexiBLAS) where there is one, and
    never the slow reference BLAS unless asked; with none of them it multiplies with its own
    kernel. So where none loads and the scipy-openblas32 wheel is installed, its OpenBLAS is
    chosen. RAGJIT_BLAS set by the user is left as it is."""
    if environ.get("RAGJIT_BLAS"):
        return None
    if any(loads(n) for n in _SYSTEM_BLAS):
        return None
    return wheel()


def _candidates() -> List[str]:
    found: List[str] = []
    env = os.environ.get("RAGJIT_LIB")
    if env:
        return [env]
    try:
        pkg = importlib.resources.files(__package__ or "ragjit")
        for name in ("libragjit.so", "libragjit.so.0"):
            p = pkg / name
            if p.is_file():
                found.append(str(p))
    except (ModuleNotFoundError, TypeError, OSError):  # pragma: no cover - odd importers
        pass
    root = Path(__file__).resolve().parent.parent.parent
    built = root / "build" / "libragjit.so.0"
    if (root / "meson.build").is_file() and built.is_file():
        found.append(str(built))
    found.append("libragjit.so.0")
    return found


def load() -> ctypes.CDLL:
    """Loads libragjit (see the module's docstring for where it looks) and declares the C
    signatures. Raises OSError naming every place tried when none loads."""
    tried = []
    lib: Optional[ctypes.CDLL] = None
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
            break
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    if lib is None:
        raise OSError("ragjit: cannot load libragjit; tried: " + "; ".join(tried)
                      + ". Install the package with `pip install .`, build the repository "
                      "(./build.sh demo) or set RAGJIT_LIB to the library's path")
    for name, (res, args) in _SIGNATURES.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    return lib


_blas = choose_blas(os.environ)
if _blas:  # read by libragjit when it first multiplies (getenv: os.environ sets the C env)
    os.environ["RAGJIT_BLAS"] = _blas
LIB = load()
_ADDRESSES = tuple(ctypes.cast(getattr(LIB, n), c_void_p).value for n in _FASTCALL_FNS)


def load_fastcall() -> Optional[object]:
    """The package's C helper for planned calls (module ragjit._fastcall, built where Python's
    headers were found), or None: then calls go through ctypes alone. It is the installed
    package's, else the one built beside the libragjit that was loaded (a build tree, for the
    package run from a checkout or with RAGJIT_LIB). RAGJIT_FASTCALL=0 leaves it out."""
    if os.environ.get("RAGJIT_FASTCALL", "1") == "0":
        return None
    try:
        from . import _fastcall  # type: ignore[attr-defined]
        return _fastcall
    except ImportError:
        pass
    import importlib.machinery
    name = getattr(LIB, "_name", "") or ""
    if os.sep not in name:
        return None
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = os.path.join(os.path.dirname(os.path.abspath(name)), "_fastcall" + suffix)
        if os.path.isfile(path):
            spec = importlib.util.spec_from_file_location((__package__ or "ragjit") + "._fastcall", path)
            if spec is None or spec.loader is None:  # pragma: no cover
                return None
            mod = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(mod)
            except ImportError:  # built for another interpreter
                return None
            return mod
    return None


def fastcall_addresses() -> tuple:
    """The addresses of the C functions _fastcall calls, in its order: those ctypes loaded, so
    the helper and the package share one libragjit (taken when it was loaded: a test may
    replace LIB's attributes since)."""
    return _ADDRESSES


def blas_info() -> str:
    """Which BLAS serves ragjit's matrix products on the CPU, or why none does
    ("OpenBLAS 0.3.21 ... (libopenblas.so.0)", "none: ..."): rj_blas_info."""
    return (LIB.rj_blas_info() or b"").decode("utf-8", "replace")


def take_string(ctx: Optional[int], ptr: Optional[int]) -> Optional[str]:
    """A string ragjit allocated, decoded and freed (None for NULL)."""
    if not ptr:
        return None
    try:
        return ctypes.string_at(ptr).decode("utf-8", "replace")
    finally:
        LIB.rj_string_free(ctx, ptr)
