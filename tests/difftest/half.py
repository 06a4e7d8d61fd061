"""half.py — 16-bit floats (f16, bf16) in the tester: programs, rounding, data files.

The guide's semantics (docs/guide.md, "16-bit floats"): a 16-bit value is stored in its format
and computed on in f32; every value an op of a 16-bit dtype produces is rounded once to nearest
even; PyTorch's promotion (f16 with bf16 is f32, a 16-bit float with f32 is f32, with an integer
or a literal it stays 16-bit). The reference here rounds each node of a 16-bit dtype to its
format after computing it in float64 (or float32 for the conditioning reference): rounding at
node boundaries, from the documented semantics, not from ragjit's code.

`halve` turns a generated program's f32 inputs into 16-bit ones (the generator itself only
speaks f32/f64) and works the dtypes out again forward, by promotion; a program where that would
give a matrix product, a norm or an attention of mixed float dtypes (PyTorch refuses those) is
left as it was.
"""
import numpy as np

HALVES = ("f16", "bf16")
EPS = {"f16": 2.0**-10, "bf16": 2.0**-7}
MAX = {"f16": 65504.0, "bf16": float(np.finfo(np.float32).max) * (1 - 2.0**-9)}
SAME_FLOATS = ("matmul", "linear", "layer_norm", "rms_norm", "sdpa")  # PyTorch wants one dtype


def round_to(a, dt):
    """a (any float array) rounded to nearest even in dt, returned as float64 values."""
    a = np.asarray(a, dtype=np.float64)
    if dt == "f16":
        with np.errstate(all="ignore"):
            return a.astype(np.float16).astype(np.float64)
    with np.errstate(all="ignore"):
        bits = np.atleast_1d(a.astype(np.float32)).view(np.uint32).astype(np.uint64)
    one = np.uint64(1)
    bits = (bits + np.uint64(0x7FFF) + ((bits >> np.uint64(16)) & one)) & np.uint64(0xFFFF0000)
    out = bits.astype(np.uint32).view(np.float32).astype(np.float64).reshape(a.shape)
    return np.where(np.isnan(a), np.nan, out)


def to_file(a, dt):
    """An input's values as the .npy array ragjit reads: <f2, or bf16's bits as V2."""
    if dt == "f16":
        return np.asarray(a, dtype=np.float16)
    bits = (np.asarray(round_to(a, "bf16"), dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return bits.view(np.dtype("V2"))


def from_file(a):
    """An output read back (np.float16 or bf16's V2 bits) as float64."""
    if a.dtype == np.float16:
        return a.astype(np.float64)
    bits = np.frombuffer(a.tobytes(), dtype=np.uint16).astype(np.uint32) << 16
    return bits.view(np.float32).astype(np.float64).reshape(a.shape)


def is_half_file(a):
    return a.dtype == np.float16 or (a.dtype.kind == "V" and a.dtype.itemsize == 2)


def promote_floats(dts):
    """PyTorch's promotion among float dtypes, 16-bit ones included."""
    out = None
    for d in dts:
        if out is None or out == d:
            out = d
        elif "f64" in (out, d):
            out = "f64"
        else:  # f16 with bf16, or a 16-bit float with f32
            out = "f32"
    return out


def halve(prog, rng):
    """Makes some f32 inputs 16-bit (one format a program, now and then both) and works the
    dtypes out again; returns the format(s) used, or None where the program stays as it was."""
    mixed = rng.random() < 0.2
    one = "bf16" if rng.random() < 0.5 else "f16"
    saved = [(n, n.dtype, dict(n.attrs)) for n in prog.inputs + prog.stmts]
    for n in prog.inputs:
        if n.dtype == "f32":
            n.dtype = (("f16", "bf16")[int(rng.integers(2))]) if mixed else one
    for n in prog.stmts:
        retype(n)
    if any(n.op in SAME_FLOATS and len({a.dtype for a in n.args if a.dtype in FLOATS_ALL and not a.is_lit()}) > 1
           for n in prog.stmts) or not any(n.dtype in HALVES for n in prog.inputs):
        for n, dt, attrs in saved:
            n.dtype, n.attrs = dt, attrs
        return None
    return sorted({n.dtype for n in prog.inputs + prog.stmts if n.dtype in HALVES})


FLOATS_ALL = ("f16", "bf16", "f32", "f64")


def retype(n):
    """n's dtype (and the dtype its operands meet in) from its operands' new dtypes. Only what
    was f32 can change: f64, integers and bools stay; an f32 made from no float tensor (a
    literal's or a constant's default dtype) stays f32; a cast or constant to f32 follows the
    program's format where its operand is 16-bit."""
    floats = [a.dtype for a in n.args if not a.is_lit() and a.dtype in FLOATS_ALL]
    if n.op == "cast":
        if n.attrs.get("to") == "f32" and floats and floats[0] in HALVES:
            n.attrs["to"] = floats[0]
            n.dtype = floats[0]
        return
    if n.op in ("arange", "full", "zeros", "ones"):
        return
    if "cdt" in n.attrs and n.attrs["cdt"] == "f32" and floats:
        n.attrs["cdt"] = promote_floats(floats)
    if n.dtype == "f32" and floats:  # an index or a condition is never a float: the rest promote
        n.dtype = promote_floats(floats)
