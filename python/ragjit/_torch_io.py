"""PyTorch tensors in and out of a run: dense tensors, nested jagged tensors, CPU and CUDA.

Imported by module _program only once a torch tensor is among a call's inputs, so the package
never needs PyTorch otherwise. Tensors are read and written in place through data_ptr(): a
contiguous input is never copied, outputs are torch.empty buffers that ragjit fills (PyTorch's
CPU allocator aligns them on 64 bytes, as ragjit's own buffers are), and a jagged output is a
nested jagged tensor over its symbol's offsets tensor, the input's own object, so PyTorch sees
one ragged size for both (an NJT's ragged size is tied to its offsets tensor).

Building a nested tensor costs more than a small run does (about 20 us in PyTorch 2.15 for
NestedTensor(values, offsets), most of it the SymInt arithmetic of its size and strides), and
an output over the same offsets and inner shape as an input NJT has that input's very size and
strides. So such an output is made by the steps NestedTensor's constructor takes, with the
input's size and strides. Those steps are PyTorch's internals: the first output made this way
is compared with one from the constructor (type, attributes, size, strides), and if they
differ in any way, as a later PyTorch may make them, the constructor is used from then on.

CUDA tensors are bound as device memory (rj_bind_*_device) for the CUDA target, which then
runs on PyTorch's current stream, and the outputs are CUDA tensors; a CUDA tensor given to a
program of another target is an error, not a silent copy.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import torch

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
    bind = LIB.rj_bind_input_device if dev else LIB.rj_bind_input
    prog.context._check(bind(b, port.node, x.data_ptr(), x.numel()))


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
    same offsets and lengths whose values have the same inner shape and strides, whose size
    and strides are then taken (see the module's essay)."""
    global _fast_ok
    if _NT is None:  # pragma: no cover
        return torch.nested.nested_tensor_from_jagged(values, offsets, lengths)
    if like is not None and _fast_ok is not False and type(like) is _NT and \
            like._offsets is offsets and like._lengths is lengths and like._ragged_idx == 1 and \
            like._values.stride() == values.stride() and like._values.shape[1:] == values.shape[1:]:
        out = _fast(values, offsets, lengths, like)
        if _fast_ok is None:
            _fast_ok = _same_as_constructor(out, values, offsets, lengths, like)
            if not _fast_ok:
                return _NT(values, offsets, lengths=lengths, _metadata_cache=like._metadata_cache)
        return out
    cache = like._metadata_cache if like is not None and getattr(like, "_offsets", None) is offsets \
        else None
    return _NT(values, offsets, lengths=lengths, _metadata_cache=cache)


_KEYS = None


def _fast(values: Any, offsets: Any, lengths: Any, like: Any) -> Any:
    """NestedTensor.__new__ and __init__'s steps, with like's size and strides."""
    global _KEYS
    if _KEYS is None:
        ks = torch._C.DispatchKeySet(torch._C.DispatchKey.NestedTensor)
        _KEYS = ks.add(torch._C.DispatchKey.AutogradNestedTensor)
    size, strides = like._size, like._strides
    # the storage's size: values.nbytes when values spans its buffer (as a run's output does
    # on this path), which saves making a Python storage object for the new buffer
    nbytes = values.nbytes if values.storage_offset() == 0 and values.is_contiguous() \
        else values.untyped_storage().size()
    r = torch.Tensor._make_wrapper_subclass(
        _NT, size, strides, 0, torch.contiguous_format, values.dtype, torch.jagged,
        values.device, False, False, "sizes", False, True, _KEYS, storage_size=nbytes)
    r._ragged_idx = 1
    r._size = size
    r._strides = strides
    r._values = values
    r._offsets = offsets
    r._lengths = lengths
    r._metadata_cache = like._metadata_cache
    r._dynamo_propagated_dynamic_indices = {1}
    values._dynamo_propagated_dynamic_indices = {0}
    return r


def _same_as_constructor(out: Any, values: Any, offsets: Any, lengths: Any, like: Any) -> bool:
    try:
        ref = _NT(values, offsets, lengths=lengths, _metadata_cache=like._metadata_cache)
        return (type(ref) is type(out) and set(vars(ref)) == set(vars(out))
                and ref.shape == out.shape and ref.stride() == out.stride()
                and ref._size == out._size and ref._strides == out._strides
                and ref.dtype == out.dtype and ref.device == out.device
                and ref.requires_grad == out.requires_grad)
    except Exception:  # pragma: no cover - a PyTorch whose internals moved
        return False


def from_jagged(j: Jagged) -> Any:
    """A ragjit.Jagged (host memory) as a nested jagged tensor, without a copy."""
    if j.ragged_dims != 1:
        raise ShapeError("ragjit: a Jagged with two ragged dims has no nested tensor form")
    return njt(torch.from_numpy(j.values), torch.from_numpy(j.offsets),
               None if j.lengths is None else torch.from_numpy(j.lengths))
