"""ref.py — the reference: a program evaluated in NumPy, item by item, from the documented
semantics (docs/guide.md, DESIGN.md §1-2), never from ragjit's interpreter or its C code.

A value is held as a Val: for an itemised tensor (jagged [B, j1, ...], per-item blocks
[B, j1, j1, ...], rows of columns [B, 1, j1, ...], tensors per head [B, H, j1, D] in
PyTorch's dim order) a list of B NumPy arrays, item b's array having its real length len_b
where the shape says j1 (per head: [H, len_b, D]; where it says j2, the second class's
len2_b: [B, j1, j2] items are len1_b x len2_b blocks); for a dense tensor one array. A padded
tensor is dense: pad builds it exactly as DESIGN.md §2 defines it (rows past len_b hold the
value), so every op on it has plain dense semantics with no special case.

The same evaluation runs at two precisions: ft=float64 (the reference proper) and ft=float32
(inputs rounded to f32, every float op in f32). The difference between them measures how
ill-conditioned each result is; check.py turns it into a tolerance. Integers are held in
int64 and wrapped to 32 bits after every i32 op (two's complement, as the guide says); bools
as NumPy bools.
"""
import math

import numpy as np

from .model import FLOATS, HEADED, INTS, category, kind, is_pad

IMIN = {"i32": -2**31, "i64": -2**63}
IMAX = {"i32": 2**31 - 1, "i64": 2**63 - 1}
_erfc_obj = np.frompyfunc(math.erfc, 1, 1)


def _erfc(x):
    """math.erfc elementwise, an array whatever x's rank (frompyfunc gives a 0-d input a Python
    float: gelu of a full reduction, difftest seed 90633)."""
    return np.asarray(_erfc_obj(x), dtype=np.float64)


class Val:
    def __init__(self, kind, dtype, data):
        self.kind, self.dtype, self.data = kind, dtype, data

    @property
    def itemised(self):
        return self.kind in ("jagged", "pair", "rowcol", "jT", "jagged2", "cpair", "rowcol2") + HEADED


class Env:
    """What a run binds: B, the lengths, named sizes, and the float type to compute in."""

    def __init__(self, lens, sizes, ft, lens2=None, hidden_v=False):
        self.lens, self.sizes, self.ft, self.B = list(lens), dict(sizes), ft, len(lens)
        self.lens2 = list(lens2) if lens2 is not None else list(lens)  # the second class j2's lengths
        # the GPU tiles' reading of a mask (the guide, "Masks bound the key tiles"): a key an
        # attention row weighs by 0 may not be read, so its v adds 0 even where it is inf or NaN
        self.hidden_v = hidden_v

    def dim(self, d):
        if isinstance(d, int):
            return d
        if d == "B":
            return self.B
        if is_pad(d):
            if d[1] == "max":
                return max(self.lens, default=0)
            return d[1] if isinstance(d[1], int) else self.sizes[d[1]]
        return self.sizes[d]


# ---- dtype conversions ------------------------------------------------------------------------

def wrap(dt, a):
    a = np.asarray(a, dtype=np.int64)
    if dt == "i32":
        a = ((a + 2**31) & 0xFFFFFFFF) - 2**31
    return a


def convert(a, src, dst, ft):
    """cast semantics: float -> int truncates toward zero and saturates, NaN gives 0; int -> i32
    wraps; anything -> bool is != 0."""
    a = np.asarray(a)
    if dst == "bool":
        return a != 0
    if dst in FLOATS:  # an f32 tensor holds f32 values, whatever precision computes the rest
        return (a.astype(np.float32) if src == "f32" else a).astype(ft)
    if src in FLOATS:
        with np.errstate(all="ignore"):
            t = np.trunc(a.astype(np.float64))
            t = np.where(np.isnan(t), 0.0, t)
            out = np.clip(t, -2.0**63, 2.0**63 - 1024).astype(np.int64)
        lo, hi = IMIN[dst], IMAX[dst]
        return np.where(t >= float(hi), hi, np.where(t <= float(lo), lo, out)).astype(np.int64)
    return wrap(dst, a.astype(np.int64))


def float_of(v, dt, ft):
    """A number as an op or a tensor of float dtype dt holds it: an f32 (or 16-bit) one its f32
    value (the guide: `x * 0.1` multiplies by 0.1f), an f64 one its double."""
    return ft(np.float32(v)) if dt != "f64" else ft(v)


def lit_value(node, dt, ft):
    """A literal as the op of dtype dt takes it."""
    v = node.attrs["value"]
    if dt in FLOATS:
        return float_of(v, dt, ft)
    if dt == "bool":
        return bool(v)
    return np.int64(int(v))  # integer literals that fit: ragjit refuses the rest


def fill_value(v, dt, ft):
    """pad's and masked_fill's value in dtype dt (an integer one truncated toward zero). It
    becomes an element, so an f32 tensor's is the f32 value (difftest seed 110543: the sum of six
    pad values of -1e30 taken as doubles, then cos, was another f32 than ragjit's correct one);
    a 16-bit one is rounded where the op's value is (evaluate)."""
    if dt in FLOATS:
        return float_of(v, dt, ft)
    if dt == "bool":
        return bool(v)
    return np.int64(math.trunc(v))


# ---- elementwise --------------------------------------------------------------------------------

def ipow(a, e, dt):
    a, e = np.broadcast_arrays(np.asarray(a, np.int64), np.asarray(e, np.int64))
    res, base, ex = np.ones_like(a), a.copy(), np.abs(e)
    with np.errstate(all="ignore"):
        for _ in range(64):
            res = np.where(ex & 1, res * base, res)
            base, ex = base * base, ex >> 1
    neg = np.where(a == 1, 1, np.where(a == -1, np.where(e % 2 == 0, 1, -1), 0))
    return wrap(dt, np.where(e < 0, neg, res))


def unary(op, a, ft, dt):
    if op == "neg":
        return -a if dt in FLOATS else wrap(dt, -a)
    if op == "abs":
        return np.abs(a) if dt in FLOATS else wrap(dt, np.abs(a))
    if op == "sgn":  # PyTorch's sign(NaN) is 0 (its comparisons-based kernel), not NumPy's NaN
        return np.where(np.isnan(a), 0, np.sign(a)) if dt in FLOATS else np.sign(a)
    if op == "relu":
        return np.maximum(a, 0) if dt in FLOATS else np.maximum(a, 0)
    if op == "logical_not":
        return ~a.astype(bool)
    one = ft(1)
    f = {"sigmoid": lambda x: one / (one + np.exp(-x)),
         "silu": lambda x: x / (one + np.exp(-x)),
         "tanh": np.tanh, "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos,
         "rsqrt": lambda x: one / np.sqrt(x),
         # PyTorch's formulas, written so that the far negative tail keeps its tiny values
         # (1 + erf(t) = erfc(-t), (1 + tanh(z)) / 2 = sigmoid(2z)) instead of rounding to 0
         "gelu": lambda x: x * ft(0.5) * _erfc(-x.astype(np.float64) / math.sqrt(2)).astype(ft),
         "gelu_tanh": lambda x: x / (one + np.exp(ft(-2 * math.sqrt(2 / math.pi)) * (x + ft(0.044715) * x * x * x))),
         }[op]
    return f(np.asarray(a, ft))


# A float tensor to a literal power of one of these is PyTorch's kernel for it (its CPU and CUDA
# pow take 0.5 as sqrt, -0.5 as rsqrt, -1 as reciprocal, 2, 3 and -2 as products), with those
# ops' special values: (-inf) ** 0.5 is NaN, not C pow's inf (the guide, `pow`).
POW_LITERALS = {1.0: lambda x: x, 2.0: lambda x: x * x, 3.0: lambda x: x * x * x, 0.5: np.sqrt,
                -1.0: lambda x: 1 / x, -0.5: lambda x: 1 / np.sqrt(x), -2.0: lambda x: 1 / (x * x)}


def binary(op, a, b, dt, ft):
    if op in ("eq", "ne", "lt", "le", "gt", "ge"):
        return {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
                "gt": np.greater, "ge": np.greater_equal}[op](a, b)
    if op in ("logical_and", "logical_or"):
        f = np.logical_and if op == "logical_and" else np.logical_or
        return f(np.asarray(a, bool), np.asarray(b, bool))
    if dt == "bool":
        return {"add": np.logical_or, "mul": np.logical_and, "maximum": np.logical_or,
                "minimum": np.logical_and}[op](a, b)
    if op == "pow" and dt in INTS:
        return ipow(a, b, dt)
    f = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
         "maximum": np.maximum, "minimum": np.minimum, "pow": np.power}[op]
    r = f(a, b)
    return r if dt in FLOATS else wrap(dt, r)


# ---- per-item plumbing ----------------------------------------------------------------------------

def item_of(v, b, rank):
    """Operand v's part of item b, for a result of the given rank that is itemised."""
    if not isinstance(v, Val):
        return v  # a literal
    if v.kind == "jT":  # x.transpose(1, 2) of [B, j1, 1] (or j2): a row of columns
        return np.swapaxes(v.data[b], 0, 1)
    if v.itemised:
        return v.data[b]
    a = v.data
    if a.ndim == rank:
        return a[b] if a.shape[0] != 1 else a[0]
    return a


def per_item(result_kind, dtype, vals, rank, env, f):
    if result_kind == "dense":
        return Val("dense", dtype, f(*[v.data if isinstance(v, Val) else v for v in vals]))
    return Val(result_kind, dtype, [f(*[item_of(v, b, rank) for v in vals]) for b in range(env.B)])


def map_val(v, f, dtype=None, kind_=None):
    dtype = dtype or v.dtype
    if v.itemised:
        return Val(kind_ or v.kind, dtype, [f(x) for x in v.data])
    return Val(kind_ or v.kind, dtype, f(v.data))


# ---- reductions, softmax, norms ------------------------------------------------------------------

def reduce(op, a, ax, keep, dt, ft):
    n = a.shape[ax]
    with np.errstate(all="ignore"):
        if op in ("sum", "prod"):
            if dt in FLOATS:
                r = (np.sum if op == "sum" else np.prod)(a.astype(ft), axis=ax)
            else:
                r = (np.sum if op == "sum" else np.prod)(a.astype(np.int64), axis=ax)
        elif op == "mean":
            r = np.sum(a.astype(ft), axis=ax) / ft(n) if n else np.full(np.delete(a.shape, ax), np.nan, ft)
        elif dt == "bool":
            r = (np.any if op == "max" else np.all)(a, axis=ax)
        else:
            init = (-np.inf if op == "max" else np.inf) if dt in FLOATS else (IMIN[dt] if op == "max" else IMAX[dt])
            r = (np.max if op == "max" else np.min)(a, axis=ax, initial=init)
    return np.expand_dims(r, ax) if keep else r


def softmax(op, a, ax, ft):
    a = np.asarray(a, ft)
    if a.shape[ax] == 0:
        return a
    with np.errstate(all="ignore"):
        m = np.max(a, axis=ax, keepdims=True)
        s = np.sum(np.exp(a - m), axis=ax, keepdims=True)
        return np.exp(a - m) / s if op == "softmax" else a - m - np.log(s)


def norm(op, a, k, w, b, eps, ft):
    a = np.asarray(a, ft)
    axes = tuple(range(a.ndim - k, a.ndim))
    with np.errstate(all="ignore"):
        if op == "layer_norm":
            mu = np.mean(a, axis=axes, keepdims=True)
            var = np.mean((a - mu) ** 2, axis=axes, keepdims=True)
            r = (a - mu) / np.sqrt(var + ft(eps))
        else:
            r = a / np.sqrt(np.mean(a * a, axis=axes, keepdims=True) + ft(eps))
    if w is not None:
        r = r * np.asarray(w, ft)
    if b is not None:
        r = r + np.asarray(b, ft)
    return r
