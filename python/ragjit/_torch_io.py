"""PyTorch tensors in and out of a run: dense tensors, nested jagged tensors, CPU and CUDA.

Imported by module _program only once a torch tensor is among a call's inputs, so the package
never needs PyTorch otherwise. Tensors are read and written in place through data_ptr(): a
contiguous input is never copied, outputs are torch.empty buffers that ragjit fills (PyTorch's
CPU allocator aligns them on 64 bytes, as ragjit's own buffers are), and a jagged output is a
nested jagged tensor over its symbol's offsets tensor, the input's own object, so PyTorch sees
one ragged size for both (an NJT's ragged size is tied to its offsets tensor).

Building a nested tensor costs more than a small run does (about 20 us in PyTorch 2.15 for
NestedTensor(values, offsets), most of it the SymInt arithmetic of its size and strides), and
an output over an input NJT's offsets has that input's ragged size. So such an output is made
by the steps of NestedTensor.__new__ with the size and strides the constructor would compute
from the input's (its own when the inner shape and strides are the input values'), then
NestedTensor.__init__ itself. __new__'s steps are PyTorch's internals: the first output made
this way is compared with one from the constructor (type, attributes, size, strides, storage),
and if they differ in any way, as a later PyTorch may make them, the constructor is used from
then on. What is left, _make_wrapper_subclass with symbolic sizes, is about 5 us: PyTorch calls
back into Python for the nested int a dozen times.

Calls with CPU tensors that repeat a call's argument names take a Plan (below): the checks and
binds of this module and of Program._bind_and_run, planned once, without their dispatch on
kinds; anything unplanned goes the general way. A Plan is done in C by module _fastcall where
it was built (python/ragjit/_fastcall.c: the same steps, 5 to 7 us less a call, most of what
is left being the output NJT's construction here); Plan.call is its fallback and twin, and
the tests run both.

CUDA tensors are bound as device memory (rj_bind_*_device) for the CUDA target, which then
runs on PyTorch's current stream, and the outputs are CUDA tensors; a CUDA tensor given to a
program of another target is an error, not a silent copy.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Optional, Tuple

import torch

from . import _lib
from ._errors import DtypeError, ShapeError, UnsupportedError
from ._jagged import Jagged
from ._lib import LIB

if TYPE_CHECKING:  # pragma: no cover
    from ._program import Program, _Port, _Run

# rj_dtype -> torch dtype, in enum order: bool, i32, i64, f32, f64
TORCH_DTYPES = [torch.bool, torch.int32, torch.int64, torch.float32, torch.float64, torch.float16,
                torch.bfloat16]  # rj_dtype's order
_CODES = {t: i for i, t in enumerate(TORCH_DTYPES)}

try:  # PyTorch's nested jagged tensor class (the NJT of torch.nested, layout=torch.jagged)
    from torch.nested._internal.nested_tensor import NestedTensor as _NT
except ImportError:  # pragma: no cover - a PyTorch without it has no jagged layout either
    _NT = None

_fast_ok: Optional[bool] = None  # None: not yet checked against the constructor


class Parts:
    """A jagged input as separate tensors (values, offsets), as a custom operator gets it."""

    __slots__ = ("values", "offsets", "lengths")

    def __init__(self, values: Any, offsets: Any = None, lengths: Any = None) -> None:
        self.values, self.offsets, self.lengths = values, offsets, lengths


def _check_dtype(port: "_Port", t: Any) -> None:
    if _CODES.get(t.dtype) != port.code:
        raise DtypeError("ragjit: input %s : %s is given %s values (convert them, e.g. x.to(%s))"
                         % (port.name, port.type_str, t.dtype, TORCH_DTYPES[port.code]))


def _on_device(prog: "Program", b: int, port: "_Port", t: Any, r: "_Run") -> bool:
    """Whether t is bound as device memory; checks that the program can take it there."""
    r.torch = True
    if t.is_cpu:
        return False
    dev = t.device
    if prog.target != "cuda" or dev.type != "cuda":
        raise UnsupportedError("ragjit: input %s : %s is on %s, and the program's target is %s "
                               "(move it with .cpu(), or compile for target=\"cuda\")"
                               % (port.name, port.type_str, dev, prog.target))
    if dev.index not in (None, 0):
        raise UnsupportedError("ragjit: input %s is on %s: ragjit runs on CUDA device 0"
                               % (port.name, dev))
    if r.device is None:
        r.device = dev
        prog.context._check(LIB.rj_bind_stream(b, torch.cuda.current_stream(dev).cuda_stream))
    return True


def bind_dense(prog: "Program", b: int, port: "_Port", x: Any, r: "_Run") -> None:
    _check_dtype(port, x)
    dev = _on_device(prog, b, port, x, r)
    if not x.is_contiguous():
        x = x.contiguous()
    if x.shape != port.fixed:
        prog._check_dims(port, tuple(x.shape), r.sizes, "an array")
    r.keep.append(x)
    p, n = x.data_ptr(), x.numel()
    if port.node in prog._const_nodes and prog._same_const(r, port, p, n, x):
        return
    bind = LIB.rj_bind_input_device if dev else LIB.rj_bind_input
    prog.context._check(bind(b, port.node, p, n))


def bind_jagged(prog: "Program", b: int, port: "_Port", x: Any, r: "_Run") -> None:
    # type(x) first: an attribute of a nested tensor (is_nested, layout) costs a
    # __torch_function__ dispatch, several microseconds
    if type(x) is not _NT and not x.is_nested:
        raise ShapeError("ragjit: input %s : %s is jagged: give a nested jagged tensor or a "
                         "ragjit.Jagged(values, offsets), got a dense tensor of shape %s"
                         % (port.name, port.type_str, tuple(x.shape)))
    if type(x) is not _NT and x.layout is not torch.jagged:
        raise UnsupportedError("ragjit: input %s : %s: a nested tensor of layout %s; ragjit "
                               "takes layout=torch.jagged" % (port.name, port.type_str, x.layout))
    if getattr(x, "_ragged_idx", 1) != 1:
        raise UnsupportedError("ragjit: input %s : %s: a nested tensor whose ragged dim is not "
                               "dim 1 (transposed) is not taken" % (port.name, port.type_str))
    if port.nragged != 1:
        raise UnsupportedError("ragjit: input %s : %s: only inputs T[B, j, ...] (one ragged "
                               "dim, dim 1) are bound from Python yet" % (port.name, port.type_str))
    values = getattr(x, "_values", None)
    offsets = getattr(x, "_offsets", None)
    if values is None or offsets is None:  # pragma: no cover - another NJT implementation
        values, offsets = x.values(), x.offsets()
    lengths = getattr(x, "_lengths", None)
    bind_parts(prog, b, port, x, values, offsets, lengths, r)


def bind_parts(prog: "Program", b: int, port: "_Port", x: Any, values: Any, offsets: Any,
               lengths: Any, r: "_Run") -> None:
    """Binds a jagged input from its tensors; x is the nested tensor they came from, if any."""
    if _CODES.get(values.dtype) != port.code:
        _check_dtype(port, values)
    r.torch = True
    dev = False if values.is_cpu else _on_device(prog, b, port, values, r)
    _check_layout(port, values, offsets, lengths)
    if not values.is_contiguous():
        values = values.contiguous()
    if values.shape[1:] != port.fixed:  # equal: then the rank is right too
        prog._check_dims(port, tuple(values.shape[1:]), r.sizes, "values (rows, inner...)")
    off64 = offsets if offsets.dtype is torch.int64 and offsets.is_contiguous() \
        else offsets.to(torch.int64).contiguous()
    len64 = None
    if lengths is not None:
        len64 = lengths if lengths.dtype is torch.int64 and lengths.is_contiguous() \
            else lengths.to(torch.int64).contiguous()
    r.keep.append((values, off64, len64))
    if x is not None and port.sym not in r.ragged:
        r.like[port.sym] = x
    prog._bind_offsets(b, port, r, offsets, lengths, off64.data_ptr(),
                       0 if len64 is None else len64.data_ptr(), offsets.shape[0] - 1,
                       values.shape[0], dev)
    bind = LIB.rj_bind_input_device if dev else LIB.rj_bind_input
    prog.context._check(bind(b, port.node, values.data_ptr(), values.numel()))


def _check_layout(port: "_Port", values: Any, offsets: Any, lengths: Any) -> None:
    """What ragjit would read past the end of, or on the wrong device, if it were wrong (an NJT
    is built right; a custom operator's separate tensors may not be)."""
    what = None
    if values.dim() < 1:
        what = "values of 0 dims"
    elif offsets is None or offsets.dim() != 1 or offsets.shape[0] < 1:
        what = "offsets of shape %s (B + 1 entries wanted)" % (
            None if offsets is None else tuple(offsets.shape),)
    elif lengths is not None and (lengths.dim() != 1 or lengths.shape[0] != offsets.shape[0] - 1):
        what = "lengths of shape %s for %d offsets (B entries wanted)" % (
            tuple(lengths.shape), offsets.shape[0])
    elif offsets.device != values.device or (lengths is not None and lengths.device != values.device):
        what = "values on %s, offsets on %s%s" % (
            values.device, offsets.device, "" if lengths is None else ", lengths on %s" % lengths.device)
    elif offsets.is_floating_point() or (lengths is not None and lengths.is_floating_point()):
        what = "offsets or lengths that are not integers"
    if what is not None:
        raise ShapeError("ragjit: input %s : %s is given %s" % (port.name, port.type_str, what))


def empty(n: int, shape: Any, port: "_Port", r: "_Run") -> Any:
    """A torch.empty buffer for an output, on the inputs' device, and its address: of the
    output's shape when the plan gives it, else of n elements."""
    buf = torch.empty(n if shape is None else shape, dtype=TORCH_DTYPES[port.code], device=r.device)
    return buf, buf.data_ptr()


def jagged_result(values: Any, offsets: Any, lengths: Any, nd: int, port: "_Port",
                  like: Any) -> Any:
    """A jagged output as a nested jagged tensor over offsets (the input's offsets tensor when
    its symbol came from one); one with two ragged dims, which no NJT represents, as a
    ragjit.Jagged over the same memory (host memory only)."""
    if nd == 2:
        if values.device.type != "cpu":
            raise UnsupportedError("ragjit: output %s : %s has two ragged dims, which a nested "
                                   "tensor cannot hold, and is on %s" % (port.name, port.type_str,
                                                                         values.device))
        return Jagged(values, offsets, lengths, ragged_dims=2)
    if not isinstance(offsets, torch.Tensor):
        offsets = torch.from_numpy(offsets)
        lengths = None if lengths is None else torch.from_numpy(lengths)
    return njt(values, offsets, lengths, like)


def njt(values: Any, offsets: Any, lengths: Any = None, like: Any = None) -> Any:
    """A nested jagged tensor over values and offsets (and lengths); like: an NJT over the
    same offsets and lengths, whose ragged size the new one shares (see the module's essay)."""
    global _fast_ok
    if _NT is None:  # pragma: no cover
        return torch.nested.nested_tensor_from_jagged(values, offsets, lengths)
    if like is not None and _fast_ok is not False and type(like) is _NT and \
            like._offsets is offsets and like._lengths is lengths and like._ragged_idx == 1 and \
            values.dim() >= 1:
        size, strides = shape_like(values, like)
        out = _fast(values, values.untyped_storage().nbytes(), offsets, lengths, like, size, strides)
        if _fast_ok is None:
            _fast_ok = _same_as_constructor(out, values, offsets, lengths, like)
            if not _fast_ok:
                return _NT(values, offsets, lengths=lengths, _metadata_cache=like._metadata_cache)
        return out
    cache = like._metadata_cache if like is not None and getattr(like, "_offsets", None) is offsets \
        else None
    return _NT(values, offsets, lengths=lengths, _metadata_cache=cache)


def shape_like(values: Any, like: Any) -> Tuple[Any, Any]:
    """The size and strides of an NJT over values with like's ragged size (the constructor's
    formula: the ragged dim's stride is the ragged size times the rows' stride); like's own
    when values has its values' inner shape and strides, as an output of an input's shape."""
    st = values.stride()
    if st == like._values.stride() and values.shape[1:] == like._values.shape[1:]:
        return like._size, like._strides
    j = like._size[1]
    return (like._size[0], j, *values.shape[1:]), (j * st[0], *st)


_KEYS = None


def _keys() -> Any:
    """The dispatch keys of an NJT beyond its wrapper's (as NestedTensor.__new__ adds them)."""
    global _KEYS
    if _KEYS is None:
        ks = torch._C.DispatchKeySet(torch._C.DispatchKey.NestedTensor)
        _KEYS = ks.add(torch._C.DispatchKey.AutogradNestedTensor)
    return _KEYS


def _wrapper_args(dtype: Any) -> Tuple[Any, ...]:
    """_fast's arguments of _make_wrapper_subclass for CPU values of dtype, with None for the
    size and strides (for module _fastcall, which makes NJTs as _fast does)."""
    return (_NT, None, None, 0, torch.contiguous_format, dtype, torch.jagged, torch.device("cpu"),
            False, False, "sizes", False, True, _keys())


def _fast(values: Any, nbytes: int, offsets: Any, lengths: Any, like: Any, size: Any,
          strides: Any) -> Any:
    """NestedTensor.__new__'s steps with the given size and strides (nbytes: the size of
    values' storage), then NestedTensor.__init__'s: its assignments where __init__ has nothing
    to mark dynamic (_init_needed: a third of the cost), else __init__ itself. The cache is
    like's, which __init__ would replace by a new dict only while it is empty: what is cached
    there (max and min lengths) depends on the offsets and lengths alone, which the two
    share. Module _fastcall does the same steps in C."""
    r = torch.Tensor._make_wrapper_subclass(
        _NT, size, strides, 0, torch.contiguous_format, values.dtype, torch.jagged,
        values.device, False, False, "sizes", False, True, _keys(), storage_size=nbytes)
    r._ragged_idx = 1
    r._size = size
    r._strides = strides
    cache = like._metadata_cache
    if cache and _init_needed(cache):
        _init(r, values, offsets, lengths=lengths, _metadata_cache=cache)
        return r
    r._values = values
    r._offsets = offsets
    r._lengths = lengths
    r._metadata_cache = cache
    r._dynamo_propagated_dynamic_indices = {1}
    values._dynamo_propagated_dynamic_indices = {0}
    return r


_init = _NT.__init__ if _NT is not None else None


def _init_needed(cache: Any) -> bool:
    """Whether NestedTensor.__init__ does more with a metadata cache than _fast's assignments:
    it marks the cached max and min lengths dynamic for torch.compile, once per tensor (a
    tensor whose dim 0 is marked already is left as it is). _fastcall.c's init_needed is its
    twin."""
    for key in ("max_seqlen", "min_seqlen"):
        t = cache.get(key)
        if t is not None and 0 not in getattr(t, "_dynamo_dynamic_indices", ()):
            return True
    return False


def _same_as_constructor(out: Any, values: Any, offsets: Any, lengths: Any, like: Any) -> bool:
    try:
        ref = _NT(values, offsets, lengths=lengths, _metadata_cache=like._metadata_cache)
        return (type(ref) is type(out) and set(vars(ref)) == set(vars(out))
                and ref.shape == out.shape and ref.stride() == out.stride()
                and ref._size == out._size and ref._strides == out._strides
                and ref.dtype == out.dtype and ref.device == out.device
                and ref.requires_grad == out.requires_grad
                and ref.untyped_storage().nbytes() == out.untyped_storage().nbytes())
    except Exception:  # pragma: no cover - a PyTorch whose internals moved
        return False


def from_jagged(j: Jagged) -> Any:
    """A ragjit.Jagged (host memory) as a nested jagged tensor, without a copy."""
    if j.ragged_dims != 1:
        raise ShapeError("ragjit: a Jagged with two ragged dims has no nested tensor form")
    return njt(torch.from_numpy(j.values), torch.from_numpy(j.offsets),
               None if j.lengths is None else torch.from_numpy(j.lengths))



class Plan:
    """A call of a program with CPU tensors, planned once per set of argument names: what the
    general path (Program._bind_and_run) checks and binds, less its dispatch on the kind of
    each argument, its dicts of sizes and symbols and its messages.

    A plan is made after a call of those names went the general way with CPU tensors, for a
    program whose shapes it tells alone: every input given; each jagged one T[B, j, inner]
    and each jagged output over an input's symbol with constant inner dims; each dense input
    of constant shape, each dense output of constants and batch sizes; no named size but
    batch sizes. A call takes it when every
    argument is what was planned: a nested jagged tensor (packed, or a view with holes) or a
    dense tensor, on the CPU, of the port's dtype, contiguous, of the port's shape, with
    int64 offsets (and lengths); inputs over one symbol with the same offsets and lengths
    objects, inputs over two symbols of one batch size with equal batches. Anything else, or
    a status from a bind, returns None before the run, and the general path binds everything
    again and raises its error with its message; what the run refuses (the offsets' contents)
    raises from here, as it would there.

    Nothing is copied, and what it builds is what the general path builds: outputs from
    torch.empty, a jagged one with the rows of its symbol's input values, as an NJT over that
    input's offsets and lengths with its ragged size. An input bound at the same address and
    size as last time on the same binding is not bound again (a binding records pointers and
    every run checks the data they point to), so a model's weights cost nothing after their
    first call.
    """

    __slots__ = ("prog", "ins", "outs", "shapes", "check", "fast", "consts")

    def __init__(self, prog: "Program", ins: List[Any], outs: List[Any]) -> None:
        self.prog = prog._prog
        # ins: (name, node, torch dtype, shape (a jagged input's values' inner shape), ragged
        # symbol or None, index of the earlier input over the symbol or None, index of the
        # earlier input over the symbol's batch size or None)
        self.ins = ins
        # outs: (node, torch dtype, shape (a jagged output's inner shape), index of the input
        # over its symbol or None, whether it is shaped like that input's values, the dims of
        # a dense one that are batch sizes: (position, index of an input over one of its
        # symbols))
        self.outs = outs
        # per jagged output, the size and strides of the last one made: (ragged size, size,
        # strides)
        self.shapes: List[Any] = [(None, None, None)] * len(outs)
        self.check = prog.context._check
        # the inputs promised constant: the binding holds the tensor last bound for each
        self.consts = prog._const_nodes
        # the same call in C (module _fastcall), where it was built: Program.__call__ takes it;
        # not with constants, whose tensors it would not hold while they are bound
        self.fast = None if self.consts else _caller(prog, self)

    def call(self, bnd: Any, inputs: Any) -> Optional[List[Any]]:  # long: one pass, on purpose
        """The outputs, or None where the call is not what was planned (nothing has run).
        An input or offsets at the address and size bound last on this binding is not bound
        again: a binding records pointers, and every run checks what they hold."""
        lib, b = LIB, bnd.ptr
        last = bnd.last  # per input: values' address and numel, offsets', batch, lengths'
        if last is None:
            last = bnd.last = [0, -1, 0, -1, 0] * len(self.ins)
        xs: List[Any] = []
        vals: List[Any] = []
        i = 0
        for name, node, dtype, shape, sym, same, batch in self.ins:
            x = inputs[name]
            if sym is None:
                if type(x) not in _DENSE or x.shape != shape:
                    return None
                v = x
            else:
                if type(x) is not _NT or x._ragged_idx != 1:
                    return None
                v, off, ln = x._values, x._offsets, x._lengths
                if v.shape[1:] != shape:
                    return None
                if same is not None:
                    if off is not xs[same]._offsets or ln is not xs[same]._lengths:
                        return None
                else:
                    if off.dtype is not torch.int64 or not off.is_cpu or not off.is_contiguous():
                        return None
                    n = off.shape[0] - 1
                    if batch is not None and n != xs[batch]._offsets.shape[0] - 1:
                        return None
                    lp = 0
                    if ln is not None:
                        if ln.dtype is not torch.int64 or not ln.is_cpu or \
                                not ln.is_contiguous() or ln.shape != (n,):
                            return None
                        lp = ln.data_ptr()
                    p = off.data_ptr()
                    if p != last[i + 2] or n != last[i + 3] or lp != last[i + 4]:
                        if lib.rj_bind_offsets(b, sym, n, p, lp or None):
                            return None
                        last[i + 2], last[i + 3], last[i + 4] = p, n, lp
            if v.dtype is not dtype or not v.is_cpu or not v.is_contiguous():
                return None
            p, n = v.data_ptr(), v.numel()
            if p != last[i] or n != last[i + 1]:
                if node in self.consts and bnd.run.consts.get(node, (0, -1))[:2] == (p, n):
                    pass  # bound by the general path: its packed weights stay
                elif lib.rj_bind_input(b, node, p, n):
                    return None
                if node in self.consts:
                    bnd.run.consts[node] = (p, n, v)
                last[i], last[i + 1] = p, n
            xs.append(x)
            vals.append(v)
            i += 5
        bufs = []
        for node, dtype, shape, src, like, fill in self.outs:
            if fill:  # a dense output over batch sizes: those of the inputs' offsets
                shape = list(shape)
                for pos, k in fill:
                    shape[pos] = xs[k]._offsets.shape[0] - 1
            if src is None:
                buf = torch.empty(shape, dtype=dtype)
            elif like:
                buf = torch.empty_like(vals[src])
            else:
                buf = torch.empty((vals[src].shape[0],) + shape, dtype=dtype)
            if lib.rj_bind_output(b, node, buf.data_ptr(), buf.numel()):
                return None
            bufs.append(buf)
        st = lib.rj_program_run(self.prog, b)
        if st:
            self.check(st)
        i = 0
        for out in self.outs:
            src = out[3]
            if src is not None:
                x, v = xs[src], bufs[i]
                shape = self.shapes[i]
                if shape[0] is x._size[1] and _fast_ok:
                    bufs[i] = _fast(v, v.nbytes, x._offsets, x._lengths, x, shape[1], shape[2])
                else:
                    bufs[i] = self._njt(i, v, x)
            i += 1
        return bufs

    def _njt(self, i: int, values: Any, like: Any) -> Any:
        """Output i as an NJT over like's offsets, and its size and strides kept for the next
        over the same ragged size (an input NJT's, so most often the same)."""
        if not _fast_ok:  # unchecked yet, or PyTorch's internals differ: the general way
            return njt(values, like._offsets, like._lengths, like)
        size, strides = shape_like(values, like)
        self.shapes[i] = (like._size[1], size, strides)
        return _fast(values, values.nbytes, like._offsets, like._lengths, like, size, strides)


_DENSE = (torch.Tensor, torch.nn.Parameter)
_fastcall: Any = _lib.load_fastcall()
_MAX_PORTS = 32  # _fastcall.c's MAX_PORTS


def _caller(prog: "Program", p: "Plan") -> Any:
    """A _fastcall.Caller doing what p.call does, or None where the helper is not there."""
    if _fastcall is None or len(p.ins) > _MAX_PORTS or len(p.outs) > _MAX_PORTS:
        return None
    env = (globals(), _NT, _DENSE, torch.int64, torch.empty, torch.empty_like,
           torch.Tensor._make_wrapper_subclass, _init, p._njt, p.check)
    outs = [o + (_wrapper_args(o[1]) if o[3] is not None else None,) for o in p.outs]
    try:
        return _fastcall.Caller(prog._prog, _lib.fastcall_addresses(), list(p.ins), outs, p.shapes,
                                env)
    except (TypeError, ValueError, OverflowError):  # a plan it cannot hold: Plan.call does it
        return None


def plan(prog: "Program", key: Any) -> Any:
    """A Plan for calls of prog with the argument names key, or False where the program's
    shapes need the general path (see Plan)."""
    if prog.target == "cuda" or set(key) != {p.name for p in prog.inputs}:
        return False
    if any(d not in prog._parents for d in prog._size_names.values()):
        return False
    ins: List[Any] = []
    first: dict = {}   # ragged symbol -> index of the first input over it
    batch: dict = {}   # batch size -> index of the first input over one of its symbols
    for port in prog.inputs:
        if port.fixed is None or (port.sym is not None and port.nragged != 1):
            return False
        same = bat = None
        if port.sym is not None:
            same = first.get(port.sym)
            if same is None:
                first[port.sym] = len(ins)
                bat = batch.get(port.bsym)
                if bat is None:
                    batch[port.bsym] = len(ins)
        ins.append((port.name, port.node, TORCH_DTYPES[port.code], port.fixed, port.sym, same, bat))
    outs: List[Any] = []
    for port in prog.outputs:
        src = None
        shape = port.fixed
        fill = ()
        if port.sym is not None:
            src = first.get(port.sym)
            if port.nragged != 1 or not port.inner_n or src is None:
                return False
        elif shape is None:  # batch sizes among the dims: from the offsets of an input
            fill = tuple((pos, batch.get(d)) for pos, d in enumerate(port.dims) if d < 0)
            if any(k is None for _, k in fill):
                return False
            shape = tuple(max(d, 0) for d in port.dims)
        like = src is not None and ins[src][2] is TORCH_DTYPES[port.code] and \
            ins[src][3] == port.fixed
        outs.append((port.node, TORCH_DTYPES[port.code], shape, src, like, fill))
    return Plan(prog, ins, outs)
