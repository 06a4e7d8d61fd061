"""Compiled programs and their runs: Python arrays bound to a program's inputs and outputs.

A call from Python is a handful of C calls (bind the offsets, the inputs and the outputs, run,
read the results' shapes), so what it costs is Python's own work around them, and the way to
keep that small is to do once per program what does not depend on the data. Each program
keeps a plan of every input and output, made when it is compiled (the dtype, the ragged
symbol, the inner dims split into constants and named sizes), and a few bindings per set of
argument names, reused by later calls with their ctypes out-parameters (a warm binding keeps
its run memory too, so a warm run allocates nothing in C). A binding is reused only by calls
naming the same arguments: everything it had bound is then bound again, so nothing of an
earlier call can leak into a later one.

Python checks only what the C side cannot see, because it is given pointers and element
counts: dtypes, the rank and the constant dims of every array, and named sizes that two inputs
disagree on (for a message naming both). Offsets, lengths, batch sizes, indices and memory are
checked by rj_program_run, whose message the exception carries.

PyTorch tensors on the CPU get one more step: a call that repeats the argument names of a
call that went this general way takes a plan made for them (_torch_io.Plan), whose inline
checks fall back here on anything it did not plan. Where the package's C helper was built
(module _fastcall), __call__ hands the call to the plan's C twin first, which returns
NotImplemented for what it does not take.

Every kind of array goes through the same steps: an input becomes a pointer, a shape and, for
a jagged input, the pointers of its offsets (and lengths). NumPy arrays and ragjit.Jagged are
read through their buffers, PyTorch tensors (dense or nested jagged, on the CPU or, for the
CUDA target, on the GPU) by module _torch_io, imported once a torch tensor is seen, and any
other DLPack producer through np.from_dlpack. Outputs come back as the inputs' kind: PyTorch
tensors (a nested jagged tensor over the input's offsets) when any input was one, else NumPy
(a ragjit.Jagged over the input's offsets arrays).

Inputs named constant (a model's weights) are promised to every binding (rj_bind_constant), and
a binding binds one again only when a call gives other memory for it, holding the array it
bound so that its memory cannot be reused under it: the weights its products packed in its
first run are then kept for the next ones, which a binding that rebinds everything would drop.
"""
from __future__ import annotations

import ctypes
import sys
import threading
from typing import TYPE_CHECKING, Any, Dict, FrozenSet, Iterable, List, Optional, Tuple

import numpy as np

from . import _lib
from ._errors import ArgumentError, DtypeError, ShapeError, SizeError, UnboundError, UnsupportedError
from ._jagged import Jagged, _aligned_empty, _as_numpy, _contiguous, _ptr, _same_layout
from ._lib import LIB

if TYPE_CHECKING:  # pragma: no cover
    from ._core import Context

_TARGETS = {"reference": 0, "cpu": 1, "cuda": 2, "opencl": 3}

def _bf16_dtype() -> np.dtype:
    """NumPy has no bf16: ml_dtypes' bfloat16 where it is installed (what JAX and PyTorch users
    meet), else 2-byte opaque items ('V2', as ml_dtypes' arrays are saved in .npy files), which
    a user views as np.uint16 bits."""
    try:
        import ml_dtypes  # type: ignore
        return np.dtype(ml_dtypes.bfloat16)
    except ImportError:
        return np.dtype("V2")


# rj_dtype, in enum order: bool, i32, i64, f32, f64, f16, bf16
_DTYPES = [np.dtype(np.bool_), np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.float32),
           np.dtype(np.float64), np.dtype(np.float16), _bf16_dtype()]
_POOL = 2  # warm bindings kept per set of argument names (more only for concurrent calls)
_MISSING = object()

_life_lock = threading.Lock()


def _free_context_if_done(life: List[Any]) -> None:
    """Frees a context once it is finalized and its last program is gone (life is
    [rj_ctx pointer, programs alive, context finalized], shared by the context and its
    programs, so a garbage-collected cycle holding both frees them in any order)."""
    with _life_lock:
        if not (life[2] and life[1] == 0 and life[0]):
            return
        ptr, life[0] = life[0], None
    if LIB is not None:
        LIB.rj_ctx_free(ptr)


class _Port:
    """An input or output of a program, as planned once: name, node, dtype, dims, and for a
    jagged one its ragged symbol, batch symbol and inner dims."""

    __slots__ = ("name", "node", "dtype", "code", "dims", "used", "type_str", "sym", "bsym",
                 "inner", "fixed", "inner_n", "nragged", "who", "who_offsets")

    def __init__(self, name: str, node: int, code: int, dims: Tuple[int, ...], used: bool,
                 type_str: str, kinds: Dict[int, Tuple[int, str, int]]) -> None:
        self.name, self.node, self.code, self.dims = name, node, code, dims
        self.dtype = _DTYPES[code]
        self.used, self.type_str = used, type_str
        self.who, self.who_offsets = "input " + name, "the offsets of input " + name
        rag = [i for i, d in enumerate(dims) if kinds.get(d, (None,))[0] == _lib.DIM_RAGGED]
        self.nragged = len(rag)
        self.sym = dims[1] if rag[:1] == [1] else None
        self.bsym = dims[0] if dims else None
        # what the array's shape must be: a jagged input's values are (rows, inner...)
        self.inner = dims[2:] if rag else dims
        self.fixed = self.inner if all(d >= 0 for d in self.inner) else None
        self.inner_n = 0  # elements of a row of a jagged port's values, when all constant
        if self.fixed is not None and rag:
            self.inner_n = 1
            for d in self.fixed:
                self.inner_n *= d


class _Binding:
    """An rj_bind with its out-parameters and the state of a call (_Run), reused across
    calls: a call from Python then allocates few objects, and so rarely wakes the garbage
    collector, whose passes are long once PyTorch is imported."""

    __slots__ = ("ptr", "numel", "numel_ref", "info", "info_ref", "run", "last")

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr
        self.last: Optional[List[int]] = None  # what a Plan bound last (_torch_io.Plan.call)
        self.run = _Run()
        self.numel = ctypes.c_int64()
        self.numel_ref = ctypes.byref(self.numel)
        self.info = _lib.TensorInfo()
        self.info_ref = ctypes.byref(self.info)


class _Run:
    """What one call gathers while binding: named sizes, each ragged symbol's source (for the
    outputs' offsets and for comparing inputs over one symbol), what must stay alive, and
    whether outputs are PyTorch tensors (and on which device)."""

    __slots__ = ("sizes", "ragged", "like", "keep", "torch", "device", "raw", "consts")

    def __init__(self) -> None:
        self.sizes: Dict[int, Tuple[int, str]] = {}
        # ragged symbol -> (input name, offsets, lengths, offsets pointer, rows of the values);
        # offsets and lengths are NumPy arrays or PyTorch tensors, as the input gave them
        self.ragged: Dict[int, Tuple[str, Any, Any, int, int]] = {}
        self.like: Dict[int, Any] = {}  # ragged symbol -> the nested tensor that bound it
        self.keep: List[Any] = []
        self.torch = False
        self.device: Any = None  # a torch.device for device-resident (CUDA) runs
        self.raw = False  # jagged outputs as their values alone (a custom operator's results)
        # per constant input's node: (address, numel, array) last bound on this binding; kept
        # across calls (clear leaves it), so the array stays alive while it is bound
        self.consts: Dict[int, Tuple[int, int, Any]] = {}

    def clear(self) -> None:
        self.sizes.clear()
        self.ragged.clear()
        self.like.clear()
        self.keep.clear()
        self.torch = False
        self.device = None
        self.raw = False


class Program:
    """A compiled ragjit program. Call it with its inputs as keyword arguments:

    - a dense input: a NumPy array or a PyTorch tensor of the input's dtype and shape (Python
      lists and scalars are converted; any other object of the DLPack protocol in host memory
      is read through ``np.from_dlpack``, without a copy);
    - a jagged input ``T[B, j, inner...]``: a :class:`Jagged` whose values have shape
      ``(rows, inner...)``, or a PyTorch nested jagged tensor (``torch.nested`` with
      ``layout=torch.jagged``; a view with holes keeps its lengths); every input over the same
      ragged symbol must have equal offsets (and lengths);
    - a named dense size that no input determines (a pad length ``L``): an ``int``.

    Inputs of the program's dtype, C-contiguous, are read in place (zero-copy); other layouts
    are copied; an array of another dtype is a :class:`ragjit.DtypeError` (no silent
    conversion). Outputs are allocated in Python and written in place by ragjit. With any
    PyTorch tensor among the inputs they are PyTorch tensors: a dense output a tensor, a jagged
    one a nested jagged tensor over its symbol's offsets (the input's offsets tensor itself,
    so PyTorch sees the same ragged size). Otherwise a dense output is an ``ndarray`` and a
    jagged one a :class:`Jagged` sharing its symbol's offsets and lengths arrays. An output
    with two ragged dims ``[B, j, j, ...]`` is always a :class:`Jagged` (``ragged_dims=2``).

    For the ``"cuda"`` target, CUDA tensors are used where they are (nothing is copied) and
    the run is queued on PyTorch's current stream; outputs are CUDA tensors.

    ``prog.run(**inputs)`` returns a dict of every output, in the program's output order;
    ``prog(**inputs)`` returns the output itself for a program of one output, else a tuple in
    output order. One program may run on many threads at once.

    ``constants`` names inputs whose contents do not change from one call to the next, as a
    model's weights and biases: pass the same arrays (or tensors) in every call. ragjit then
    packs the weights of their matrix products once per binding, a quarter in each of its
    first calls (all of them in :meth:`prepare`), and keeps them (rj_bind_constant): a
    call that gives the same memory (address and size) as the last call on a binding does not
    bind it again, and the program holds the array so that its
    memory is not reused while it is bound. A call that gives another array for a constant
    binds it, and its products are packed again. After changing a constant's contents in
    place, call :meth:`constants_changed` (otherwise calls may go on with the old weights).
    Results are the same bits with and without constants; only the time differs."""

    def __init__(self, context: "Context", source: str, target: str = "cpu",
                 filename: str = "<string>", constants: Iterable[str] = ()) -> None:
        if target not in _TARGETS:
            raise ArgumentError("ragjit: unknown target %r (one of %s)" % (target, ", ".join(_TARGETS)))
        self.context = context
        self.target = target
        self.source = source
        self._graph: Optional[int] = None
        self._prog: Optional[int] = None
        self._pools: Dict[Tuple[str, ...], List[_Binding]] = {}
        # per set of argument names: a torch Plan, False where none applies, absent: not yet
        self._plans: Dict[Tuple[str, ...], Any] = {}
        self._fast: Any = None  # the C helper's planned call, once a plan has one
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
        self._dims: Dict[int, Tuple[int, str, int]] = {}  # dim -> (kind, name, parent)
        for i in range(LIB.rj_graph_dim_count(g)):
            d = LIB.rj_graph_dim_at(g, i)
            info = _lib.DimInfo()
            if LIB.rj_dim_get_info(g, d, ctypes.byref(info)) == 0:
                self._dims[d] = (info.kind, (info.name or b"").decode(), info.parent)
        self.inputs: List[_Port] = [
            self._port(LIB.rj_graph_input_at(g, i), LIB.rj_graph_input_name(g, i).decode(),
                       bool(LIB.rj_graph_input_used(g, i)))
            for i in range(LIB.rj_graph_input_count(g))]
        self.outputs: List[_Port] = [
            self._port(LIB.rj_graph_output_at(g, i), LIB.rj_graph_output_name(g, i).decode(), True)
            for i in range(LIB.rj_graph_output_count(g))]
        self._out_names = [p.name for p in self.outputs]
        self._size_names = {name: d for d, (kind, name, _) in self._dims.items()
                            if kind == _lib.DIM_DENSE and name}
        self._accepted = frozenset(p.name for p in self.inputs) | frozenset(
            name for _, name, _ in self._dims.values() if name)
        self._parent = {d: parent for d, (kind, _, parent) in self._dims.items()
                        if kind == _lib.DIM_RAGGED}
        self._parents = frozenset(self._parent.values())
        self._const_nodes: FrozenSet[int] = self._constant_nodes(constants)

    def _constant_nodes(self, constants: Iterable[str]) -> FrozenSet[int]:
        if isinstance(constants, str):
            constants = [constants]
        nodes = []
        by_name = {p.name: p.node for p in self.inputs}
        for name in constants:
            if name not in by_name:
                what = "a size of the program, not an input" if name in self._accepted else \
                    "not an input of the program"
                raise ArgumentError("ragjit: constants: %r is %s (inputs: %s)"
                                    % (name, what, ", ".join(self.input_names)))
            nodes.append(by_name[name])
        return frozenset(nodes)

    @property
    def constants(self) -> List[str]:
        """The inputs promised constant (``constants=``), in declaration order."""
        return [p.name for p in self.inputs if p.node in self._const_nodes]

    def constants_changed(self) -> None:
        """Says that the contents of constant inputs changed in place: the next call of every
        binding packs their weights again (rj_bind_constant renewed). Call it while no call of
        the program is running."""
        for pool in self._pools.values():
            for bnd in pool:
                for node in self._const_nodes:
                    self.context._check(LIB.rj_bind_constant(bnd.ptr, node, True))

    def _same_const(self, r: _Run, port: _Port, ptr: int, n: int, arr: Any) -> bool:
        """For a constant input: whether (ptr, n) is what this binding bound last (then nothing
        is bound); otherwise it is recorded, with arr, for the caller to bind."""
        last = r.consts.get(port.node)
        if last is not None and last[0] == ptr and last[1] == n:
            return True
        r.consts[port.node] = (ptr, n, arr)
        return False

    def _port(self, node: int, name: str, used: bool) -> _Port:
        g = self._graph
        dims = (ctypes.c_int64 * _lib.RJ_MAX_RANK)()
        rank = LIB.rj_node_shape(g, node, dims)
        ts = _lib.take_string(self.context._ptr, LIB.rj_node_type_str(g, node)) or "?"
        return _Port(name, node, LIB.rj_node_dtype(g, node), tuple(dims[:rank]), used, ts, self._dims)

    @property
    def input_names(self) -> List[str]:
        """The inputs' names, in declaration order."""
        return [p.name for p in self.inputs]

    @property
    def output_names(self) -> List[str]:
        """The outputs' names, in declaration order."""
        return list(self._out_names)

    def dim_kind(self, d: int) -> Optional[int]:
        """The kind of a symbolic dim of the program (``_lib.DIM_*``), None for a constant."""
        return self._dims.get(d, (None,))[0]

    def dim_name(self, d: int) -> str:
        """A symbolic dim's name (``"B"``, ``"j1"``), or the constant as text."""
        return self._dims[d][1] if d in self._dims else str(d)

    def dump(self, stage: str = "fused") -> str:
        """The text of a compilation stage: "graph", "opt", "fused", "loops", "llvm",
        "llvm-opt", "asm", "cuda", "ptx", "opencl" or "dot" (docs/guide.md, section 5)."""
        ptr = LIB.rj_program_dump(self._prog, stage.encode())
        if not ptr:
            raise self.context._error()
        return _lib.take_string(self.context._ptr, ptr) or ""

    def __call__(self, **inputs: Any) -> Any:
        fast = self._fast
        if fast is not None:  # the planned call in C (_torch_io._caller)
            outs = fast(inputs)
            if outs is not NotImplemented:
                return outs
        outs = self._run(inputs)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def run(self, **inputs: Any) -> Dict[str, Any]:
        """Runs the program on ``inputs`` (see the class) and returns ``{output name: value}``
        in output order."""
        return dict(zip(self._out_names, self._run(inputs)))

    def prepare(self, **inputs: Any) -> None:
        """Gets the program ready for calls like ``prog(**inputs)`` without running it, so that
        the first of them is as fast as the later ones: checks the inputs as a call would, then
        (rj_bind_prepare) allocates the memory of a run of their sizes, touches every page of it,
        starts the worker threads and packs the weights promised constant (``constants=``).
        Later calls with the same argument names, in the same order, and inputs no larger use
        that memory; larger ones grow it. Optional: a call does whatever was not done."""
        self._run(inputs, prepare=True)

    # ---- a run --------------------------------------------------------------------------

    def _run(self, inputs: Dict[str, Any], raw: bool = False, prepare: bool = False) -> List[Any]:
        """The outputs in order; raw: a jagged output as its values alone; prepare: bind and
        prepare (rj_bind_prepare) instead of running, no outputs."""
        key = tuple(inputs)
        pool = self._pools.get(key)
        if pool is None:
            if not self._accepted.issuperset(key):
                bad = sorted(set(key) - self._accepted)
                raise ArgumentError("ragjit: %r is neither an input nor a size of the program "
                                    "(inputs: %s)" % (bad[0], ", ".join(sorted(self.input_names))))
            pool = self._pools.setdefault(key, [])
        try:
            bnd = pool.pop()
        except IndexError:
            p = LIB.rj_bind_new(self._prog)
            if not p:
                raise self.context._error()
            bnd = _Binding(p)
            for node in self._const_nodes:
                if LIB.rj_bind_constant(p, node, True):
                    LIB.rj_bind_free(p)
                    raise self.context._error()
        plan = self._plans.get(key)
        if plan and not raw and not prepare:
            try:
                outs = plan.call(bnd, inputs)
            except BaseException:
                LIB.rj_bind_free(bnd.ptr)
                raise
            if outs is not None:
                if len(pool) < _POOL:
                    pool.append(bnd)
                else:
                    LIB.rj_bind_free(bnd.ptr)
                return outs
        r = bnd.run
        r.raw = raw
        bnd.last = None  # the general path binds everything
        ok = False
        try:
            outs = self._bind_and_run(bnd, inputs, r, prepare)
            if plan is None and r.torch and r.device is None and not raw and not prepare:
                plan = self._plans[key] = _torch_io().plan(self, key)
                if plan and self._fast is None:
                    self._fast = plan.fast
            ok = True
            return outs
        finally:
            device = r.device
            r.clear()
            # a device run may still be queued: its binding is freed once it is done
            if ok and device is None and len(pool) < _POOL:
                pool.append(bnd)
            else:
                if device is not None:
                    LIB.rj_bind_wait(bnd.ptr)
                LIB.rj_bind_free(bnd.ptr)

    def _bind_and_run(self, bnd: _Binding, inputs: Dict[str, Any], r: _Run,
                      prepare: bool = False) -> List[Any]:
        b = bnd.ptr
        check = self.context._check
        for port in self.inputs:
            x = inputs.get(port.name, _MISSING)
            if x is _MISSING:
                if port.used:
                    raise UnboundError("ragjit: input %s : %s is missing" % (port.name, port.type_str))
                continue
            if port.sym is None:
                self._bind_dense(b, port, x, r)
            else:
                self._bind_jagged(b, port, x, r)
        for name, d in self._size_names.items():
            if name in inputs:
                self._note_size(r.sizes, d, int(inputs[name]), "argument " + name)
        for d, (value, _) in r.sizes.items():
            if d in self._parents and any(self._parent[s] == d for s in r.ragged):
                continue  # B comes from the offsets
            check(LIB.rj_bind_size(b, d, value))
        # outputs: sized from the plan where it gives their shape (no rj_bind_output_numel,
        # which checks the bindings as a run would, a second time)
        empty = _torch_io().empty if r.torch else _numpy_empty
        bind = LIB.rj_bind_output if r.device is None else LIB.rj_bind_output_device
        bufs = []
        for port in self.outputs:
            shape = self._out_shape(port, r)
            if shape is None:
                check(LIB.rj_bind_output_numel(b, port.node, bnd.numel_ref))
                n = bnd.numel.value
            else:
                n = 1
                for d in shape:
                    n *= d
            buf, ptr = empty(n, shape, port, r)
            check(bind(b, port.node, ptr, n))
            bufs.append((buf, shape))
        if prepare:  # the next call binds every output again: none is left pointing here
            check(LIB.rj_bind_prepare(b))
            return []
        check(LIB.rj_program_run(self._prog, b))
        return [self._result(bnd, port, buf, shape, r) for port, (buf, shape) in zip(self.outputs, bufs)]

    def _out_shape(self, port: _Port, r: _Run) -> Optional[Tuple[int, ...]]:
        """An output's shape (a jagged output's values': rows, inner...) from its dims and what
        the inputs bound, or None where only the run can tell (a pad length max(j), two ragged
        dims, a named inner dim). A jagged output has the rows of the values of the input that
        bound its symbol, as PyTorch's ops on an NJT keep them: over a view with holes, the
        rows in holes and after the last item are left as allocated."""
        if port.sym is None:
            if port.fixed is not None:
                return port.fixed
            shape = []
            for d in port.dims:
                if d < 0:
                    v = r.sizes.get(d)
                    if v is None:
                        return None
                    d = v[0]
                shape.append(d)
            return tuple(shape)
        if port.nragged == 1 and port.inner_n:
            src = r.ragged.get(port.sym)
            if src is not None:  # the rows of the input's values (a view's spare rows too)
                return (src[4],) + port.fixed
        return None

    def _note_size(self, sizes: Dict[int, Tuple[int, str]], d: int, value: int, who: str) -> None:
        old = sizes.get(d)
        if old is None:
            sizes[d] = (value, who)
        elif old[0] != value:
            raise SizeError("ragjit: %s is %d for %s but %d for %s"
                            % (self._dims[d][1], old[0], old[1], value, who))

    def _check_dims(self, port: _Port, shape: Tuple[int, ...], sizes: Dict[int, Tuple[int, str]],
                    what: str) -> None:
        """shape (a dense array's, or a jagged input's values without the rows) against the
        port's dims: constants must match, named sizes are noted (and must agree)."""
        dims = port.inner
        if len(dims) != len(shape):
            if port.sym is not None:
                raise ShapeError("ragjit: input %s : %s needs values of %d dims, got shape %s"
                                 % (port.name, port.type_str, len(dims) + 1, (-1,) + tuple(shape)))
            raise ShapeError("ragjit: input %s : %s needs %s of %d dims, got shape %s"
                             % (port.name, port.type_str, what, len(dims), tuple(shape)))
        for want, got in zip(dims, shape):
            if want >= 0:
                if want != got:
                    raise ShapeError("ragjit: input %s : %s: %s has shape %s"
                                     % (port.name, port.type_str, what, tuple(shape)))
            elif self._dims.get(want, (None,))[0] == _lib.DIM_DENSE:
                self._note_size(sizes, want, int(got), port.who)

    def _bind_dense(self, b: int, port: _Port, x: Any, r: _Run) -> None:
        if type(x) is not np.ndarray:
            if isinstance(x, Jagged) or _is_nested(x):
                raise ShapeError("ragjit: input %s : %s is dense, got a jagged array"
                                 % (port.name, port.type_str))
            torch = sys.modules.get("torch")
            if torch is not None and isinstance(x, torch.Tensor):
                _torch_io().bind_dense(self, b, port, x, r)
                return
        arr = self._convert(port, x)
        if arr.shape != port.fixed:
            self._check_dims(port, arr.shape, r.sizes, "an array")
        r.keep.append(arr)
        ptr = _ptr(arr)
        if port.node in self._const_nodes and self._same_const(r, port, ptr, arr.size, arr):
            return
        self.context._check(LIB.rj_bind_input(b, port.node, ptr, arr.size))

    def _bind_jagged(self, b: int, port: _Port, x: Any, r: _Run) -> None:
        if type(x) is not Jagged:
            torch = sys.modules.get("torch")
            if torch is not None:
                if isinstance(x, torch.Tensor):
                    _torch_io().bind_jagged(self, b, port, x, r)
                    return
                if type(x) is _torch_io().Parts:
                    _torch_io().bind_parts(self, b, port, None, x.values, x.offsets, x.lengths, r)
                    return
            if _is_nested(x):
                x = _from_nested(x, port)
            else:
                raise ShapeError("ragjit: input %s : %s is jagged: give a ragjit.Jagged(values, "
                                 "offsets) or a nested jagged tensor" % (port.name, port.type_str))
        if port.nragged != 1:
            raise UnsupportedError("ragjit: input %s : %s: only inputs T[B, j, ...] (one ragged "
                                   "dim, dim 1) are bound from Python yet" % (port.name, port.type_str))
        vals = self._convert(port, x.values)
        if vals.shape[1:] != port.fixed:  # equal: then the rank is right too
            self._check_dims(port, vals.shape[1:], r.sizes, "values (rows, inner...)")
        self._bind_offsets(b, port, r, x.offsets, x.lengths, _ptr(x.offsets),
                           0 if x.lengths is None else _ptr(x.lengths), x.offsets.size - 1,
                           vals.shape[0])
        r.keep.append(vals)
        self.context._check(LIB.rj_bind_input(b, port.node, _ptr(vals), vals.size))

    def _bind_offsets(self, b: int, port: _Port, r: _Run, offsets: Any, lengths: Any,
                      off_ptr: int, len_ptr: int, batch: int, rows: int, device: bool = False) -> None:
        """Binds a ragged symbol's offsets (and lengths) the first time an input over it is
        seen; a later input over it must have the same ones. rows: the input's values' rows."""
        sym = port.sym
        prev = r.ragged.get(sym)
        if prev is None:
            r.ragged[sym] = (port.name, offsets, lengths, off_ptr, rows)
            self._note_size(r.sizes, port.bsym, batch, port.who_offsets)
            if device:
                self.context._check(LIB.rj_bind_offsets_device(b, sym, batch, off_ptr, len_ptr))
            else:
                self.context._check(LIB.rj_bind_offsets(b, sym, batch, off_ptr, len_ptr or None))
        elif not (prev[1] is offsets and prev[2] is lengths) and \
                not _layout_equal(prev[1], prev[2], offsets, lengths):
            raise ShapeError("ragjit: inputs %s and %s are both over %s but have different "
                             "offsets or lengths" % (prev[0], port.name, self._dims[sym][1]))

    def _convert(self, port: _Port, x: Any) -> np.ndarray:
        if type(x) is np.ndarray and x.dtype is port.dtype:
            f = x.flags
            if f.c_contiguous and f.aligned:  # the common case, in place
                return x
        if type(x) is not np.ndarray and hasattr(x, "__dlpack__"):
            x = _as_numpy(x, "input %s" % port.name)
        if isinstance(x, np.ndarray):
            if x.dtype != port.dtype:
                raise DtypeError("ragjit: input %s : %s is given %s values (convert them, e.g. "
                                 "x.astype(np.%s))" % (port.name, port.type_str, x.dtype, port.dtype))
            return _contiguous(x)
        arr = np.asarray(x)
        if arr.size and not np.can_cast(arr.dtype, port.dtype, "same_kind"):
            raise DtypeError("ragjit: input %s : %s cannot take %s values"
                             % (port.name, port.type_str, arr.dtype))
        return np.ascontiguousarray(arr, dtype=port.dtype)

    def _result(self, bnd: _Binding, port: _Port, buf: Any, shape: Optional[Tuple[int, ...]],
                r: _Run) -> Any:
        """An output from its buffer: of the shape planned (_out_shape), else of the shape the
        run's result tensor gives (rj_tensor_get_info)."""
        if shape is None:
            return self._result_info(bnd, port, buf, r)
        values = buf  # allocated in its shape
        if port.sym is None or r.raw:
            return values
        src = r.ragged[port.sym]
        if r.torch:
            return _torch_io().jagged_result(values, src[1], src[2], 1, port, r.like.get(port.sym))
        return Jagged._wrap(values, src[1], src[2], 1)

    def _result_info(self, bnd: _Binding, port: _Port, buf: Any, r: _Run) -> Any:
        self.context._check(LIB.rj_tensor_get_info(LIB.rj_bind_result(bnd.ptr, port.node), bnd.info_ref))
        info = bnd.info
        shape = tuple(info.shape[:info.rank])
        if info.ragged_dim < 0:
            n = 1
            for s in shape:
                n *= s
            return buf[:n].reshape(shape)
        nd = 2 if info.ragged_dims == 2 else 1
        inner = shape[1 + nd:]
        rows = int(info.rows)
        n = rows
        for s in inner:
            n *= s
        values = buf[:n].reshape((rows,) + inner)
        if r.raw:
            return values
        src = r.ragged.get(port.dims[1])
        if src is not None and (r.device is not None or
                                (info.offsets and ctypes.addressof(info.offsets.contents) == src[3])):
            offsets, lengths = src[1], src[2]
        else:
            batch = shape[0]
            offsets = np.ctypeslib.as_array(info.offsets, (batch + 1,)).copy()
            lengths = np.ctypeslib.as_array(info.lengths, (batch,)).copy() if info.lengths else None
        if r.torch:
            return _torch_io().jagged_result(values, offsets, lengths, nd, port, r.like.get(port.dims[1]))
        return Jagged(values, offsets, lengths, ragged_dims=nd)

    def __del__(self) -> None:
        life = getattr(self, "_life", None)
        if life is None or LIB is None:
            return
        fast, self._fast = getattr(self, "_fast", None), None
        if fast is not None:  # its bindings, before the program
            fast.close()
        for pool in getattr(self, "_pools", {}).values():
            while pool:
                LIB.rj_bind_free(pool.pop().ptr)
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


_torch_module: Any = None


def _torch_io() -> Any:
    """Module _torch_io, imported on first use (it imports PyTorch)."""
    global _torch_module
    if _torch_module is None:
        from . import _torch_io as m
        _torch_module = m
    return _torch_module


_SMALL = 4096  # bytes: an output below this is not worth aligning on 64 (see _numpy_empty)


def _numpy_empty(n: int, shape: Any, port: _Port, r: _Run) -> Tuple[np.ndarray, int]:
    """A NumPy buffer for an output, of its shape when the plan gives it, and its address.
    ragjit's own outputs start on 64 bytes (whole cache lines for its streaming stores), and
    so do these, except small ones: NumPy's own allocation (16 bytes) is then a third of the
    cost, and a few cache lines gain nothing from it."""
    if shape is not None and n * port.dtype.itemsize < _SMALL:
        buf = np.empty(shape, port.dtype)
    else:
        buf = _aligned_empty(n, port.dtype)
        if shape is not None:
            buf = buf.reshape(shape)
    return buf, _ptr(buf)


def _is_nested(x: Any) -> bool:
    """Whether x looks like a nested jagged tensor: values() and offsets() methods, is_nested."""
    return bool(getattr(x, "is_nested", False)) and callable(getattr(x, "values", None)) \
        and callable(getattr(x, "offsets", None))


def _from_nested(x: Any, port: _Port) -> Jagged:
    """A Jagged over the memory of an object with a nested jagged tensor's surface (values(),
    offsets(), lengths() of DLPack producers in host memory), without a copy."""
    if getattr(x, "_ragged_idx", 1) != 1:
        raise UnsupportedError("ragjit: input %s : %s: a nested tensor whose ragged dim is not "
                               "dim 1 (transposed) is not taken" % (port.name, port.type_str))
    lengths_fn = getattr(x, "lengths", None)
    lengths = lengths_fn() if callable(lengths_fn) else None
    what = "input %s" % port.name
    return Jagged(_as_numpy(x.values(), what), _as_numpy(x.offsets(), what),
                  None if lengths is None else _as_numpy(lengths, what))


def _host(a: Any) -> Optional[np.ndarray]:
    if a is None or isinstance(a, np.ndarray):
        return a
    return np.asarray(a.cpu()) if hasattr(a, "cpu") else np.asarray(a)


def _layout_equal(off_a: Any, len_a: Any, off_b: Any, len_b: Any) -> bool:
    """Whether two offsets/lengths pairs (NumPy arrays or PyTorch tensors) are equal."""
    return _same_layout(Jagged(np.empty(0), _host(off_a), _host(len_a)),
                        Jagged(np.empty(0), _host(off_b), _host(len_b)))


Program.__module__ = "ragjit"
