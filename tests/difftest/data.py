"""data.py — lengths patterns, input data, and the data directory `ragjit run --data` reads.

Every length pattern that has found bugs: all items empty, some empty, B = 1, one item 100 to
1000 times longer than the rest, uniform, random. Inputs are kept item by item (the real rows
only) so that shrinking can drop items and cut rows. They are written packed, or as a view
with holes: offsets with gaps before and between the items, garbage in the gaps (NaN for
floats, a huge value for integers and indices, True for bools), and the lengths in
<sym>.lengths.npy, so that any read of a hole shows in the result or as an index error. A program of two ragged
classes (gen_cross.py) has a second lengths list lens2 of the same B (drawn from its own pattern,
so that items without queries meet items without keys) and, with holes, its own gaps.
"""
import os

import numpy as np

from . import half
from .model import FLOATS, is_pad, kind

PATTERNS = ["empty", "some_empty", "b1", "long", "uniform", "random"]
# 16-bit values are held as float32 here (of the format's values) and converted on writing
NP = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64, "bool": np.bool_,
      "f16": np.float32, "bf16": np.float32}
GARBAGE = {"f32": np.nan, "f64": np.nan, "i32": 987654321, "i64": 10**15, "bool": True, "f16": np.nan,
           "bf16": np.nan}


def lengths(pattern, rng):
    if pattern == "empty":
        return [0] * int(rng.integers(1, 5))
    if pattern == "b1":
        return [int(rng.integers(0, 10))]
    if pattern == "uniform":
        return [int(rng.integers(1, 9))] * int(rng.integers(2, 7))
    if pattern == "long":
        lens = [int(x) for x in rng.integers(0, 3, int(rng.integers(2, 6)))]
        lens[int(rng.integers(len(lens)))] = int(rng.integers(100, 400))
        return lens
    lens = [int(x) for x in rng.integers(0, 13, int(rng.integers(2, 7)))]
    if pattern == "some_empty":
        for b in rng.choice(len(lens), size=max(1, len(lens) // 2), replace=False):
            lens[b] = 0
    return lens


def lengths2(pattern, B, rng):
    """The second class's lengths for a batch of B items."""
    lens = lengths(pattern, rng)
    return [lens[b % len(lens)] if lens else 0 for b in range(B)]


class Data:
    """One run's data: lengths, named sizes, each input's values, the layout; lens2 and gaps2
    for the second ragged class j2 (None without one)."""

    def __init__(self, lens, sizes, values, holes, gaps, lens2=None, gaps2=None):
        self.lens, self.sizes, self.values, self.holes, self.gaps = lens, sizes, values, holes, gaps
        self.lens2, self.gaps2 = lens2, gaps2


def resolve_sizes(prog_sizes, lens):
    out = {}
    for k, v in prog_sizes.items():
        out[k] = max(lens, default=0) + v[1] if isinstance(v, tuple) else v
    return out


def dims_of(shape, sizes, B, item_len=None):
    out = []
    for d in shape:
        if d == "B":
            out.append(B)
        elif d == "j1":
            out.append(item_len)
        elif is_pad(d):  # a dense input over a pad length (gen.b_densepad)
            out.append(sizes[d[1]] if isinstance(d[1], str) else d[1])
        else:
            out.append(sizes[d] if isinstance(d, str) else d)
    return out


def random_values(dtype, shape, rng, bound=None, special=False):
    if bound is not None:
        hi = max(int(bound), 1)
        return rng.integers(0, hi, size=shape).astype(NP[dtype])
    if dtype in FLOATS:
        a = rng.uniform(-2, 2, size=shape).astype(np.float32).astype(NP[dtype])
        if dtype in half.HALVES:
            a = half.round_to(a, dtype).astype(np.float32)
        if special and a.size and rng.random() < 0.5:
            flat = a.reshape(-1)
            for _ in range(int(rng.integers(1, 3))):
                flat[int(rng.integers(flat.size))] = rng.choice([np.inf, -np.inf, np.nan])
        return a
    if dtype == "bool":
        return rng.random(size=shape) < 0.5
    return rng.integers(-10, 11, size=shape).astype(NP[dtype])


def item_shape(k, l1, l2):
    """An item's leading dims for an itemised input kind."""
    return {"pair": [l1, l1], "cpair": [l1, l2], "jagged2": [l2]}.get(k, [l1])


def make(prog, lens, holes, rng, special=False, lens2=None):
    sizes = resolve_sizes(prog.sizes, lens)
    B, values = len(lens), {}
    for n in prog.inputs:
        bound = n.attrs.get("bound")
        bound = sizes.get(bound, bound) if isinstance(bound, str) and bound != "j1" else bound
        k = kind(n.shape)
        if k == "dense":
            values[n.name] = random_values(n.dtype, dims_of(n.shape, sizes, B), rng, bound, special)
            continue
        rows = []
        for b, l in enumerate(lens):
            shape = item_shape(k, l, lens2[b] if lens2 else l)
            shape += dims_of(n.shape[1 + len(shape):], sizes, B)
            rows.append(random_values(n.dtype, shape, rng, l if bound == "j1" else bound, special))
        values[n.name] = rows
    gaps = [int(g) for g in rng.integers(0, 4, len(lens) + 1)] if holes else None
    gaps2 = [int(g) for g in rng.integers(0, 4, len(lens) + 1)] if holes and lens2 is not None else None
    return Data(list(lens), sizes, values, holes, gaps, None if lens2 is None else list(lens2), gaps2)


def packed_with_holes(items, gaps, dtype):
    """Items' rows placed after gaps of garbage; the offsets of each item's first row."""
    inner = items[0].shape[1:] if items else ()
    parts, offsets, at = [], [], 0
    for b, x in enumerate(items):
        parts.append(np.full((gaps[b],) + inner, GARBAGE[dtype], dtype=NP[dtype]))
        at += gaps[b]
        offsets.append(at)
        parts.append(x)
        at += len(x)
    offsets.append(at)
    return (np.concatenate(parts) if parts else None), offsets


def write(prog, data, d):
    """The data directory for `ragjit run --data d`."""
    os.makedirs(d, exist_ok=True)
    lens = data.lens
    packed = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    offsets = packed
    for n in prog.inputs:
        k, v = kind(n.shape), data.values[n.name]
        if k == "dense":
            np.save(os.path.join(d, n.name + ".npy"), on_file(v, n.dtype))
            continue
        inner = dims_of(n.shape[3 if k in ("pair", "cpair") else 2:], data.sizes, len(lens))
        empty = np.zeros([0] + inner, dtype=NP[n.dtype])
        if k in ("pair", "cpair"):
            arr = np.concatenate([x.reshape([-1] + inner) for x in v] + [empty])
        elif k == "jagged2":
            arr = packed_with_holes(v, data.gaps2, n.dtype)[0] if data.holes else np.concatenate(list(v) + [empty])
            arr = empty if arr is None else arr
        elif data.holes:
            arr, offs = packed_with_holes(v, data.gaps, n.dtype)
            arr = empty if arr is None else arr
            offsets = np.array(offs, dtype=np.int64)
        else:
            arr = np.concatenate(list(v) + [empty])
        np.save(os.path.join(d, n.name + ".npy"), on_file(arr, n.dtype))
    if data.holes:
        if not any(kind(n.shape) == "jagged" for n in prog.inputs):
            offsets = np.array(packed_with_holes([np.zeros((l, 1)) for l in lens], data.gaps, "f64")[1], np.int64)
        np.save(os.path.join(d, "j1.lengths.npy"), np.array(lens, dtype=np.int64))
    np.save(os.path.join(d, "j1.npy"), np.asarray(offsets, dtype=np.int64))
    if data.lens2 is not None:
        write_j2(data, d)
    for name, v in data.sizes.items():
        if name == "L":
            np.save(os.path.join(d, "L.npy"), np.array(v, dtype=np.int64))


def on_file(a, dtype):
    return half.to_file(a, dtype) if dtype in half.HALVES else a


def write_j2(data, d):
    """The second class's offsets (its own gaps with holes) and, with holes, its lengths."""
    lens2 = data.lens2
    if data.holes:
        offs = packed_with_holes([np.zeros((l, 1)) for l in lens2], data.gaps2, "f64")[1]
        np.save(os.path.join(d, "j2.lengths.npy"), np.array(lens2, dtype=np.int64))
    else:
        offs = np.concatenate([[0], np.cumsum(lens2)])
    np.save(os.path.join(d, "j2.npy"), np.asarray(offs, dtype=np.int64))


def shrink(prog, data, keep, new_lens):
    """The same data with only the items in keep, item i cut to new_lens[i] rows."""
    values = {}
    for n in prog.inputs:
        k, v = kind(n.shape), data.values[n.name]
        if k == "dense":
            values[n.name] = v[keep] if n.shape and n.shape[0] == "B" else v
            continue
        out = []
        for i, l in zip(keep, new_lens):
            x = v[i][:l, :l] if k == "pair" else v[i][:l] if k != "jagged2" else v[i]
            if n.attrs.get("bound") == "j1" and l:
                x = np.minimum(x, l - 1)
            out.append(x)
        values[n.name] = out
    gaps = [data.gaps[i] for i in keep] + [data.gaps[-1]] if data.holes else None
    sizes = dict(data.sizes)
    if "L" in sizes:
        sizes["L"] = max(sizes["L"] - max(data.lens, default=0) + max(new_lens, default=0), 0)
    lens2 = [data.lens2[i] for i in keep] if data.lens2 is not None else None
    gaps2 = [data.gaps2[i] for i in keep] + [data.gaps2[-1]] if data.gaps2 else None
    return Data(list(new_lens), sizes, values, data.holes, gaps, lens2, gaps2)
