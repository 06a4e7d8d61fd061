"""Contexts, jagged arrays, compiled programs."""
from __future__ import annotations

import ctypes
import math
import os
import threading
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

from . import _lib
from ._errors import (ArgumentError, DtypeError, Error, ShapeError, SizeError, UnboundError,
                      UnsupportedError, error_for)
from ._lib import LIB

__all__ = ["Context", "Jagged", "Program", "compile", "default_context"]

_TARGETS = {"reference": 0, "cpu": 1, "cuda": 2, "opencl": 3}
# rj_dtype, in enum order: bool, i32, i64, f32, f64
_DTYPES = [np.dtype(np.bool_), np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.float32),
           np.dtype(np.float64)]
_ALIGN = 64  # ragjit's own buffers start on 64 bytes: Python-allocated outputs do too


class Context:
    """A ragjit context: the settings shared by the programs compiled in it, and its program
    cache (the same source compiled twice in one context compiles once).

    ``threads``: worker threads of CPU programs (``None`` or 0: one per available processor);
    ``memory_limit``: the most bytes one run may allocate (``None`` or 0: half the physical
    memory); ``cache_dir``: the persistent kernel cache (``None``: ``$RAGJIT_CACHE_DIR``, else
    ``~/.cache/ragjit``; ``"off"`` turns it off). A context may be shared by threads."""

    def __init__(self, threads: Optional[int] = None, memory_limit: Optional[int] = None,
                 cache_dir: Optional[Union[str, os.PathLike]] = None) -> None:
        self._ptr: Optional[int] = LIB.rj_ctx_new(None, None)
        if not self._ptr:
            raise error_for(1, "ragjit: cannot create a context (out of memory)")
        # [rj_ctx pointer, programs alive, context finalized]: shared with the programs, so the
        # context is freed after the last of them even when the garbage collector finalizes a
        # cycle holding both in any order (all finalizers of a cycle run before any is cleared)
        self._life: List[Any] = [self._ptr, 0, False]
        self._threads = 0
        self._memory_limit = 0
        self._cache_dir: Optional[str] = None
        if threads is not None:
            self.threads = threads
        if memory_limit is not None:
            self.memory_limit = memory_limit
        if cache_dir is not None:
            self.cache_dir = os.fspath(cache_dir)

    def _check(self, status: int) -> None:
        if status != 0:
            raise self._error(status)

    def _error(self, status: Optional[int] = None) -> Error:
        if status is None:
            status = LIB.rj_ctx_status(self._ptr)
        msg = (LIB.rj_ctx_error(self._ptr) or b"").decode("utf-8", "replace")
        if not msg:
            msg = (LIB.rj_status_str(status) or b"ragjit error").decode()
        return error_for(status, msg)

    @property
    def threads(self) -> int:
        """Worker threads of CPU programs; 0: one per available processor."""
        return self._threads

    @threads.setter
    def threads(self, n: Optional[int]) -> None:
        n = 0 if n is None else int(n)
        self._check(LIB.rj_ctx_set_threads(self._ptr, n))
        self._threads = n

    @property
    def memory_limit(self) -> int:
        """The most bytes one run may allocate; 0: the default (half the physical memory)."""
        return self._memory_limit

    @memory_limit.setter
    def memory_limit(self, nbytes: Optional[int]) -> None:
        nbytes = 0 if nbytes is None else int(nbytes)
        self._check(LIB.rj_ctx_set_memory_limit(self._ptr, nbytes))
        self._memory_limit = nbytes

    @property
    def cache_dir(self) -> Optional[str]:
        """The persistent kernel cache's directory as set (None: the default; "off": none)."""
        return self._cache_dir

    @cache_dir.setter
    def cache_dir(self, path: Optional[Union[str, os.PathLike]]) -> None:
        arg = None if path is None else os.fsencode(path)
        self._check(LIB.rj_ctx_set_cache_dir(self._ptr, arg))
        self._cache_dir = None if path is None else os.fsdecode(path)

    def compile(self, source: str, target: str = "cpu", filename: str = "<string>") -> "Program":
        """Compiles a program in ragjit's text format (docs/guide.md) for ``target``:
        ``"cpu"`` (LLVM), ``"reference"`` (the interpreter), ``"opencl"`` or ``"cuda"``."""
        return Program(self, source, target, filename)

    def __del__(self) -> None:
        life = getattr(self, "_life", None)
        if life is not None:
            life[2] = True
            _free_context_if_done(life)


_life_lock = threading.Lock()


def _free_context_if_done(life: List[Any]) -> None:
    with _life_lock:
        if not (life[2] and life[1] == 0 and life[0]):
            return
        ptr, life[0] = life[0], None
    if LIB is not None:
        LIB.rj_ctx_free(ptr)


_default_lock = threading.Lock()
_default: Optional[Context] = None
_by_threads: Dict[int, Context] = {}


def default_context() -> Context:
    """The module's context, made on first use; its settings are the module-level settings
    (``ragjit.default_context().threads = 4``)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Context()
        return _default


def _context_for_threads(threads: int) -> Context:
    with _default_lock:
        ctx = _by_threads.get(threads)
        if ctx is None:
            ctx = _by_threads[threads] = Context(threads=threads)
        return ctx


def compile(source: str, target: str = "cpu", threads: Optional[int] = None,
            context: Optional[Context] = None, filename: str = "<string>") -> "Program":
    """Compiles ``source`` (ragjit's text format) for ``target`` and returns a
    :class:`Program`.

    ``threads`` runs the program with that many CPU worker threads (programs compiled with the
    same ``threads`` share a context); ``context`` gives a :class:`Context` of your own
    (``threads`` must then be left out). Raises a :class:`ragjit.Error` subclass
    (``ParseError``, ``ShapeError``, ...) with ragjit's message when the program is wrong."""
    if context is not None and threads is not None:
        raise TypeError("ragjit.compile: give threads or context, not both")
    if context is None:
        context = default_context() if threads is None else _context_for_threads(int(threads))
    return Program(context, source, target, filename)


class Jagged:
    """A jagged array in PyTorch's ``torch.jagged`` layout, over NumPy arrays.

    ``values``: the items' rows packed one after the other, shape ``(rows, inner...)``;
    ``offsets``: int64, ``B + 1`` entries, item ``b`` is rows ``offsets[b] .. offsets[b+1]``;
    ``lengths``: optional int64, ``B`` entries, for a view with holes (item ``b`` is rows
    ``offsets[b] .. offsets[b] + lengths[b]``, as ``torch.nested.narrow`` makes).

    Nothing is copied: the arrays are kept as given (int32 offsets or lengths are converted).
    ``ragged_dims`` is 2 for an output with two ragged dims ``[B, j, j, ...]``: item ``b`` is
    then a block of ``len_b * len_b`` rows starting at row ``offsets[b]``."""

    __slots__ = ("values", "offsets", "lengths", "ragged_dims")

    def __init__(self, values: Any, offsets: Any, lengths: Any = None, ragged_dims: int = 1) -> None:
        self.values: np.ndarray = _as_numpy(values, "Jagged values")
        self.offsets: np.ndarray = _index_array(offsets, "offsets")
        self.lengths: Optional[np.ndarray] = None if lengths is None else _index_array(lengths, "lengths")
        self.ragged_dims = ragged_dims
        if self.offsets.ndim != 1 or self.offsets.size < 1:
            raise ShapeError("Jagged: offsets must be 1-D with B + 1 entries, got shape %s"
                             % (self.offsets.shape,))
        if self.lengths is not None and self.lengths.shape != (self.offsets.size - 1,):
            raise ShapeError("Jagged: lengths must have B = %d entries, got shape %s"
                             % (self.offsets.size - 1, self.lengths.shape))
        if self.values.ndim < 1:
            raise ShapeError("Jagged: values must have at least one dim (the rows)")

    @classmethod
    def from_list(cls, items: List[Any], dtype: Any = None) -> "Jagged":
        """A packed jagged array from a list of arrays of shape ``(len_b, inner...)``
        (copied), like ``torch.nested.nested_tensor(items, layout=torch.jagged)``."""
        arrs = [np.asarray(a, dtype=dtype) for a in items]
        if not arrs:
            raise ShapeError("Jagged.from_list: no items")
        lens = [a.shape[0] for a in arrs]
        offsets = np.zeros(len(arrs) + 1, dtype=np.int64)
        np.cumsum(lens, out=offsets[1:])
        return cls(np.concatenate(arrs, axis=0), offsets)

    @property
    def batch(self) -> int:
        """B, the number of items."""
        return int(self.offsets.size - 1)

    def __len__(self) -> int:
        return self.batch

    def item_lengths(self) -> np.ndarray:
        """Each item's length ``len_b``: ``lengths``, or the differences of ``offsets`` (their
        square roots when ``ragged_dims`` is 2: item ``b`` then has ``len_b * len_b`` rows)."""
        if self.lengths is not None:
            return self.lengths
        d = np.diff(self.offsets)
        if self.ragged_dims == 2:
            return np.array([math.isqrt(int(n)) for n in d], dtype=np.int64)
        return d

    def unbind(self) -> List[np.ndarray]:
        """The items as views into ``values``: item ``b`` of shape ``(len_b, inner...)`` (of
        shape ``(len_b, len_b, inner...)`` when ``ragged_dims`` is 2)."""
        lens = self.item_lengths()
        out = []
        for b in range(self.batch):
            start, n = int(self.offsets[b]), int(lens[b])
            if self.ragged_dims == 2:
                out.append(self.values[start:start + n * n].reshape((n, n) + self.values.shape[1:]))
            else:
                out.append(self.values[start:start + n])
        return out

    def to_padded(self, value: float = 0.0, length: Optional[int] = None) -> np.ndarray:
        """A new dense ``(B, L, inner...)`` array (``(B, L, L, inner...)`` when
        ``ragged_dims`` is 2), ``value`` beyond each item (L: ``length`` or the longest item)."""
        items = self.unbind()
        L = max([len(i) for i in items], default=0) if length is None else int(length)
        lead = (L,) * self.ragged_dims
        out = np.full((self.batch,) + lead + self.values.shape[1:], value, dtype=self.values.dtype)
        for b, it in enumerate(items):
            out[(b,) + (slice(0, len(it)),) * self.ragged_dims] = it
        return out

    def __repr__(self) -> str:
        return "Jagged(values=%s %s, offsets=%s%s)" % (
            self.values.dtype, self.values.shape, self.offsets.tolist(),
            "" if self.lengths is None else ", lengths=%s" % self.lengths.tolist())


def _as_numpy(x: Any, what: str) -> np.ndarray:
    """x as a NumPy array without a copy where it can be had: an ndarray as it is, an object of
    the DLPack protocol (a CPU PyTorch tensor, ...) through np.from_dlpack, else np.asarray."""
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "__dlpack__"):
        try:
            return np.from_dlpack(x)
        except (BufferError, RuntimeError, TypeError, ValueError) as e:
            raise UnsupportedError("ragjit: %s: NumPy cannot read it through DLPack (%s); only "
                                   "host memory of the dtypes bool, int32, int64, float32 and "
                                   "float64 is taken" % (what, e)) from e
    return np.asarray(x)


def _index_array(a: Any, what: str) -> np.ndarray:
    arr = _as_numpy(a, what)
    if arr.dtype == np.int64 and arr.flags.c_contiguous and arr.dtype.isnative:
        return arr
    if arr.dtype.kind not in "iu" and arr.size:
        raise DtypeError("Jagged: %s must be integers, got %s" % (what, arr.dtype))
    return np.ascontiguousarray(arr, dtype=np.int64)


def _ptr(a: np.ndarray) -> int:
    return a.ctypes.data


def _contiguous(a: np.ndarray) -> np.ndarray:
    """a itself when ragjit can read it in place, else a C-ordered aligned copy."""
    if a.flags.c_contiguous and a.flags.aligned and a.dtype.isnative:
        return a
    return np.ascontiguousarray(a)


def _aligned_empty(numel: int, dtype: np.dtype) -> np.ndarray:
    raw = np.empty(numel * dtype.itemsize + _ALIGN, dtype=np.uint8)
    skip = (-raw.ctypes.data) % _ALIGN
    return raw[skip:skip + numel * dtype.itemsize].view(dtype)


class _Port:
    """An input or output of a program: name, node, dtype, dims."""

    __slots__ = ("name", "node", "dtype", "dims", "used", "type_str")

    def __init__(self, name: str, node: int, dtype: np.dtype, dims: Tuple[int, ...],
                 used: bool, type_str: str) -> None:
        self.name, self.node, self.dtype, self.dims = name, node, dtype, dims
        self.used, self.type_str = used, type_str


class Program:
    """A compiled ragjit program. Call it with its inputs as keyword arguments:

    - a dense input: a NumPy array of the input's dtype and shape (Python lists and scalars
      are converted; an object of the DLPack protocol in host memory, such as a CPU PyTorch
      tensor, is read through ``np.from_dlpack``, without a copy);
    - a jagged input ``T[B, j, inner...]``: a :class:`Jagged` whose values have shape
      ``(rows, inner...)``, or a nested jagged tensor in host memory (``values()``,
      ``offsets()``, ``lengths()``: PyTorch's ``torch.jagged`` layout), read without a copy;
      every input over the same ragged symbol must have equal offsets (and lengths);
    - a named dense size that no input determines (a pad length ``L``): an ``int``.

    Inputs of the program's dtype, C-contiguous, are read in place (zero-copy); other layouts
    are copied; an array of another dtype is a :class:`ragjit.DtypeError` (no silent
    conversion). Outputs are allocated by NumPy and written in place by ragjit: a dense
    output is an ``ndarray``, a jagged one a :class:`Jagged` whose offsets (and lengths) are
    those of its symbol's input (the same array objects, as a nested tensor shares offsets).

    ``prog.run(**inputs)`` returns a dict of every output, in the program's output order;
    ``prog(**inputs)`` returns the output itself for a program of one output, else a tuple in
    output order. One program may run on many threads at once."""

    def __init__(self, context: Context, source: str, target: str = "cpu",
                 filename: str = "<string>") -> None:
        if target not in _TARGETS:
            raise ArgumentError("ragjit: unknown target %r (one of %s)" % (target, ", ".join(_TARGETS)))
        self.context = context
        self.target = target
        self.source = source
        self._graph: Optional[int] = None
        self._prog: Optional[int] = None
        self._life: Optional[List[Any]] = context._life
        with _life_lock:
            context._life[1] += 1
        ctx = context._ptr
        g = LIB.rj_graph_parse(ctx, source.encode("utf-8"), filename.encode("utf-8"))
        if not g:
            raise context._error()
        self._graph = g
        w = LIB.rj_graph_warnings(g)
        self.warnings: List[str] = w.decode().splitlines() if w else []
        p = LIB.rj_program_new(g, _TARGETS[target])
        if not p:
            raise context._error()
        self._prog = p
        self.inputs: List[_Port] = [
            self._port(LIB.rj_graph_input_at(g, i), LIB.rj_graph_input_name(g, i).decode(),
                       bool(LIB.rj_graph_input_used(g, i)))
            for i in range(LIB.rj_graph_input_count(g))]
        self.outputs: List[_Port] = [
            self._port(LIB.rj_graph_output_at(g, i), LIB.rj_graph_output_name(g, i).decode(), True)
            for i in range(LIB.rj_graph_output_count(g))]
        self._dims: Dict[int, Tuple[int, str, int]] = {}  # dim -> (kind, name, parent)
        for i in range(LIB.rj_graph_dim_count(g)):
            d = LIB.rj_graph_dim_at(g, i)
            info = _lib.DimInfo()
            if LIB.rj_dim_get_info(g, d, ctypes.byref(info)) == 0:
                self._dims[d] = (info.kind, (info.name or b"").decode(), info.parent)

    def _port(self, node: int, name: str, used: bool) -> _Port:
        g = self._graph
        dims = (ctypes.c_int64 * _lib.RJ_MAX_RANK)()
        rank = LIB.rj_node_shape(g, node, dims)
        ts = _lib.take_string(self.context._ptr, LIB.rj_node_type_str(g, node)) or "?"
        return _Port(name, node, _DTYPES[LIB.rj_node_dtype(g, node)], tuple(dims[:rank]), used, ts)

    @property
    def input_names(self) -> List[str]:
        """The inputs' names, in declaration order."""
        return [p.name for p in self.inputs]

    @property
    def output_names(self) -> List[str]:
        """The outputs' names, in declaration order."""
        return [p.name for p in self.outputs]

    def dump(self, stage: str = "fused") -> str:
        """The text of a compilation stage: "graph", "opt", "fused", "loops", "llvm",
        "llvm-opt", "asm", "cuda", "ptx", "opencl" or "dot" (docs/guide.md, section 5)."""
        ptr = LIB.rj_program_dump(self._prog, stage.encode())
        if not ptr:
            raise self.context._error()
        return _lib.take_string(self.context._ptr, ptr) or ""

    def __call__(self, **inputs: Any) -> Any:
        out = self.run(**inputs)
        vals = tuple(out.values())
        return vals[0] if len(vals) == 1 else vals

    def run(self, **inputs: Any) -> Dict[str, Any]:
        """Runs the program on ``inputs`` (see the class) and returns ``{output name: value}``
        in output order."""
        ctx = self.context
        keep: List[Any] = []            # what must stay alive until the run ends
        sizes: Dict[int, Tuple[int, str]] = {}   # dense symbol -> (value, who set it)
        ragged: Dict[int, Tuple[Jagged, str]] = {}
        names = {p.name for p in self.inputs}
        for key in inputs:
            if key not in names and not any(n == key for _, n, _ in self._dims.values()):
                raise ArgumentError("ragjit: %r is neither an input nor a size of the program "
                                    "(inputs: %s)" % (key, ", ".join(sorted(names))))
        b = LIB.rj_bind_new(self._prog)
        if not b:
            raise ctx._error()
        try:
            for port in self.inputs:
                if port.name not in inputs:
                    if port.used:
                        raise UnboundError("ragjit: input %s : %s is missing" % (port.name, port.type_str))
                    continue
                self._bind_input(b, port, inputs[port.name], keep, sizes, ragged)
            for d, (kind, name, parent) in self._dims.items():
                if kind == _lib.DIM_DENSE and name in inputs:
                    self._note_size(sizes, d, int(inputs[name]), "argument %s" % name)
            parents = {parent for kind, _, parent in self._dims.values() if kind == _lib.DIM_RAGGED}
            for d, (value, _) in sizes.items():
                if d in parents and any(self._dims[r][2] == d for r in ragged):
                    continue  # B comes from the offsets
                ctx._check(LIB.rj_bind_size(b, d, value))
            results = []
            for port in self.outputs:
                n = ctypes.c_int64()
                ctx._check(LIB.rj_bind_output_numel(b, port.node, ctypes.byref(n)))
                buf = _aligned_empty(n.value, port.dtype)
                ctx._check(LIB.rj_bind_output(b, port.node, _ptr(buf), n.value))
                results.append(buf)
            ctx._check(LIB.rj_program_run(self._prog, b))
            return {port.name: self._result(b, port, buf, ragged)
                    for port, buf in zip(self.outputs, results)}
        finally:
            LIB.rj_bind_free(b)
            del keep

    def _note_size(self, sizes: Dict[int, Tuple[int, str]], d: int, value: int, who: str) -> None:
        old = sizes.get(d)
        if old is not None and old[0] != value:
            raise SizeError("ragjit: %s is %d for %s but %d for %s"
                            % (self._dims[d][1], old[0], old[1], value, who))
        sizes.setdefault(d, (value, who))

    def _check_dims(self, port: _Port, dims: Tuple[int, ...], shape: Tuple[int, ...],
                    sizes: Dict[int, Tuple[int, str]], what: str) -> None:
        if len(dims) != len(shape):
            raise ShapeError("ragjit: input %s : %s needs %s of %d dims, got shape %s"
                             % (port.name, port.type_str, what, len(dims), shape))
        for want, got in zip(dims, shape):
            if want >= 0:
                if want != got:
                    raise ShapeError("ragjit: input %s : %s: %s has shape %s"
                                     % (port.name, port.type_str, what, shape))
            elif self._dims.get(want, (None,))[0] == _lib.DIM_DENSE:
                self._note_size(sizes, want, got, "input %s" % port.name)

    def _convert(self, port: _Port, x: Any) -> np.ndarray:
        if hasattr(x, "__dlpack__") and not isinstance(x, np.ndarray):
            x = _as_numpy(x, "input %s" % port.name)
        if isinstance(x, np.ndarray):
            if x.dtype != port.dtype:
                raise DtypeError("ragjit: input %s : %s is given %s values (convert them, e.g. "
                                 "x.astype(np.%s))" % (port.name, port.type_str, x.dtype, port.dtype),
                                 )
            return _contiguous(x)
        arr = np.asarray(x)
        if arr.size and not np.can_cast(arr.dtype, port.dtype, "same_kind"):
            raise DtypeError("ragjit: input %s : %s cannot take %s values"
                             % (port.name, port.type_str, arr.dtype))
        return np.ascontiguousarray(arr, dtype=port.dtype)

    def _bind_input(self, b: int, port: _Port, x: Any, keep: List[Any],
                    sizes: Dict[int, Tuple[int, str]], ragged: Dict[int, Tuple[Jagged, str]]) -> None:
        ctx = self.context
        rdims = [i for i, d in enumerate(port.dims) if self._dims.get(d, (None,))[0] == _lib.DIM_RAGGED]
        if not rdims:
            if isinstance(x, Jagged):
                raise ShapeError("ragjit: input %s : %s is dense, got a Jagged" % (port.name, port.type_str))
            arr = self._convert(port, x)
            self._check_dims(port, port.dims, arr.shape, sizes, "an array")
            keep.append(arr)
            ctx._check(LIB.rj_bind_input(b, port.node, _ptr(arr), arr.size))
            return
        if not isinstance(x, Jagged) and _is_nested(x):
            x = _from_nested(x, port)
        if not isinstance(x, Jagged):
            raise ShapeError("ragjit: input %s : %s is jagged: give a ragjit.Jagged(values, offsets)"
                             % (port.name, port.type_str))
        if rdims != [1] or len(port.dims) < 2:
            raise UnsupportedError("ragjit: input %s : %s: only inputs T[B, j, ...] (one ragged "
                                   "dim, dim 1) are bound from Python yet" % (port.name, port.type_str))
        sym = port.dims[1]
        vals = self._convert(port, x.values)
        self._check_dims(port, port.dims[2:], vals.shape[1:], sizes, "values (rows, inner...)")
        if vals.ndim != len(port.dims) - 1:
            raise ShapeError("ragjit: input %s : %s needs values of %d dims, got shape %s"
                             % (port.name, port.type_str, len(port.dims) - 1, vals.shape))
        prev = ragged.get(sym)
        if prev is None:
            ragged[sym] = (x, port.name)
            self._note_size(sizes, port.dims[0], x.batch, "the offsets of input %s" % port.name)
            lengths = x.lengths
            ctx._check(LIB.rj_bind_offsets(b, sym, x.batch, _ptr(x.offsets),
                                           None if lengths is None else _ptr(lengths)))
        elif prev[0] is not x and not _same_layout(prev[0], x):
            raise ShapeError("ragjit: inputs %s and %s are both over %s but have different "
                             "offsets or lengths" % (prev[1], port.name, self._dims[sym][1]))
        keep.append(vals)
        ctx._check(LIB.rj_bind_input(b, port.node, _ptr(vals), vals.size))

    def _result(self, b: int, port: _Port, buf: np.ndarray,
                ragged: Dict[int, Tuple[Jagged, str]]) -> Any:
        t = LIB.rj_bind_result(b, port.node)
        info = _lib.TensorInfo()
        self.context._check(LIB.rj_tensor_get_info(t, ctypes.byref(info)))
        shape = tuple(info.shape[:info.rank])
        if info.ragged_dim < 0:
            return buf[:int(np.prod(shape, dtype=np.int64))].reshape(shape)
        nd = 2 if info.ragged_dims == 2 else 1
        inner = shape[1 + nd:]
        rows = int(info.rows)
        values = buf[:rows * int(np.prod(inner, dtype=np.int64))].reshape((rows,) + inner)
        batch = shape[0]
        src = ragged.get(port.dims[1])
        if src is not None and info.offsets and ctypes.addressof(info.offsets.contents) == _ptr(src[0].offsets):
            offsets, lengths = src[0].offsets, src[0].lengths
        else:
            offsets = np.ctypeslib.as_array(info.offsets, (batch + 1,)).copy()
            lengths = np.ctypeslib.as_array(info.lengths, (batch,)).copy() if info.lengths else None
        return Jagged(values, offsets, lengths, ragged_dims=nd)

    def __del__(self) -> None:
        life = getattr(self, "_life", None)
        if life is None or LIB is None:
            return
        p, self._prog = getattr(self, "_prog", None), None
        if p:
            LIB.rj_program_free(p)
        g, self._graph = getattr(self, "_graph", None), None
        if g:
            LIB.rj_graph_free(g)
        self._life = None
        with _life_lock:
            life[1] -= 1
        _free_context_if_done(life)

    def __repr__(self) -> str:
        ins = ", ".join("%s : %s" % (p.name, p.type_str) for p in self.inputs)
        outs = ", ".join("%s : %s" % (p.name, p.type_str) for p in self.outputs)
        return "<ragjit.Program %s (%s) -> (%s)>" % (self.target, ins, outs)


def _is_nested(x: Any) -> bool:
    """Whether x looks like a nested jagged tensor: values() and offsets() methods, is_nested."""
    return bool(getattr(x, "is_nested", False)) and callable(getattr(x, "values", None)) \
        and callable(getattr(x, "offsets", None))


def _from_nested(x: Any, port: _Port) -> Jagged:
    """A Jagged over the memory of a nested jagged tensor (PyTorch's torch.jagged layout:
    values(), offsets(), lengths()), without a copy where the memory is host memory."""
    if getattr(x, "_ragged_idx", 1) != 1:
        raise UnsupportedError("ragjit: input %s : %s: a nested tensor whose ragged dim is not "
                               "dim 1 (transposed) is not taken" % (port.name, port.type_str))
    lengths_fn = getattr(x, "lengths", None)
    lengths = lengths_fn() if callable(lengths_fn) else None
    what = "input %s" % port.name
    return Jagged(_as_numpy(x.values(), what), _as_numpy(x.offsets(), what),
                  None if lengths is None else _as_numpy(lengths, what))


def _same_layout(a: Jagged, b: Jagged) -> bool:
    if a.offsets.shape != b.offsets.shape or not np.array_equal(a.offsets, b.offsets):
        return False
    if (a.lengths is None) != (b.lengths is None):
        return False
    return a.lengths is None or b.lengths is None or np.array_equal(a.lengths, b.lengths)



for _cls in (Context, Jagged, Program):
    _cls.__module__ = "ragjit"
