"""Jagged arrays over NumPy memory, and the NumPy helpers of binding: taking an array without a
copy where ragjit can read it in place, and allocating outputs on 64 bytes as ragjit's own
buffers are (so a kernel's aligned loads hold for memory Python gave it)."""
from __future__ import annotations

import ctypes
import math
from typing import Any, List, Optional

import numpy as np

from ._errors import DtypeError, ShapeError, UnsupportedError

__all__ = ["Jagged"]

_ALIGN = 64  # ragjit's own buffers start on 64 bytes: Python-allocated outputs do too


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
    def _wrap(cls, values: np.ndarray, offsets: Any, lengths: Any, ragged_dims: int) -> "Jagged":
        """A Jagged over arrays already checked (a run's output): no conversions."""
        j = object.__new__(cls)
        j.values, j.offsets, j.lengths, j.ragged_dims = values, offsets, lengths, ragged_dims
        return j

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


_addressof = ctypes.addressof
_char_at = ctypes.c_char.from_buffer


def _ptr(a: np.ndarray) -> int:
    """The address of a C-contiguous array's data. Through ctypes' buffer protocol, three
    times as fast as a.ctypes.data, which is the fallback for what it refuses (read-only or
    empty arrays)."""
    try:
        return _addressof(_char_at(a))
    except (TypeError, ValueError, BufferError):
        return a.ctypes.data


def _contiguous(a: np.ndarray) -> np.ndarray:
    """a itself when ragjit can read it in place, else a C-ordered aligned copy."""
    f = a.flags
    if f.c_contiguous and f.aligned and a.dtype.isnative:
        return a
    return np.ascontiguousarray(a)


_LARGE = 64 << 10  # bytes: from here on an output starts half a page past a page, as ragjit's


def _aligned_empty(numel: int, dtype: np.dtype) -> np.ndarray:
    """An output's buffer placed as ragjit places its own (src/util/mem.c): on 64 bytes, and a
    large one half a page past a page, so that a kernel's loads of a NumPy input (16 bytes past
    a page) never wait on its stores to the output (4K aliasing: 64 bytes past a page, bf16
    relu(x * w + b) took 1.9x as long on an AMD Zen 4)."""
    nbytes = numel * dtype.itemsize
    large = nbytes >= _LARGE
    raw = np.empty(nbytes + _ALIGN + (4096 if large else 0), dtype=np.uint8)
    skip = (-_ptr(raw)) % _ALIGN
    if large:
        skip += (2048 - (_ptr(raw) + skip)) % 4096
    return raw[skip:skip + nbytes].view(dtype)



def _same_layout(a: Jagged, b: Jagged) -> bool:
    if a.offsets.shape != b.offsets.shape or not np.array_equal(a.offsets, b.offsets):
        return False
    if (a.lengths is None) != (b.lengths is None):
        return False
    return a.lengths is None or b.lengths is None or np.array_equal(a.lengths, b.lengths)


Jagged.__module__ = "ragjit"
