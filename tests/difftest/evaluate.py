"""evaluate.py — runs a Program on the reference (ref.py), op by op, item by item.

One function per op family; `evaluate` walks the statements in order and returns every
output flattened the way `ragjit run` writes it: a jagged output as its packed rows, a
[B, j1, j1, ...] output as its items' len_b x len_b blocks one after the other, a tensor per
head in its canonical order (flatten), a dense output whole. Tensors per head are items in
PyTorch's dim order ([H, len_b, D]), so every op on them is the NumPy op on the item's axis
(dim - 1), as for any itemised tensor.
"""
import numpy as np

from . import half, ref
from .model import FLOATS, HEADED, RAGGED, kind
from .ref import Val


def axis(node_rank, d):
    return d + node_rank if d < 0 else d


def ev_elementwise(n, vals, env):
    ft = env.ft
    op, dt = n.op, n.dtype
    cdt = n.attrs.get("cdt", dt)  # the dtype the operands meet in (comparisons: promoted)
    ops = []
    for a, v in zip(n.args, vals):
        if a.is_lit():
            ops.append(ref.lit_value(a, cdt, ft))
        else:
            ops.append(map_conv(v, cdt, ft))
    rank = len(n.shape)
    if len(ops) == 1:
        f = lambda x: ref.unary(op, x, ft, cdt)
    elif op == "where":
        f = lambda c, x, y: np.where(c, x, y)
    elif op == "masked_fill":
        fv = ref.fill_value(n.attrs["value"], dt, ft)
        f = lambda x, m: np.where(m, fv, x)
    elif op == "pow" and cdt in FLOATS and n.args[1].is_lit() and float(ops[1]) in ref.POW_LITERALS:
        f = lambda x, y, p=ref.POW_LITERALS[float(ops[1])]: p(x)
    else:
        f = lambda x, y: ref.binary(op, x, y, cdt, ft)
    if op == "where":  # the condition stays bool
        ops[0] = vals[0]
    if op == "masked_fill":
        ops[1] = vals[1]
    with np.errstate(all="ignore"):
        r = ref.per_item(kind(n.shape), dt, ops, rank, env, f)
    if dt in FLOATS:
        return ref.map_val(r, lambda x: np.asarray(x, ft))
    return r


def map_conv(v, dst, ft):
    if v.dtype == dst and not (dst in FLOATS):
        return v
    return ref.map_val(v, lambda x: ref.convert(x, v.dtype, dst, ft), dtype=dst)


def ev_cast(n, vals, env):
    return map_conv(vals[0], n.attrs["to"], env.ft) if vals[0].dtype != n.attrs["to"] else vals[0]


def ev_reduce(n, vals, env):
    v, d, keep = vals[0], axis(len(n.args[0].shape), n.attrs["dim"]), n.attrs.get("keepdim", False)
    dt_in = v.dtype if n.op != "mean" else n.dtype
    src = map_conv(v, dt_in, env.ft) if n.op == "mean" else v
    f = lambda a, ax: ref.reduce(n.op, a, ax, keep, dt_in, env.ft)
    if not v.itemised:
        return Val("dense", n.dtype, f(src.data, d))
    if v.kind in ("jagged", "jagged2") and d == 1:
        parts = [f(x, 0) for x in src.data]
        return Val("dense", n.dtype, stack(parts, n, env))
    return Val(kind(n.shape), n.dtype, [f(x, d - 1) for x in src.data])


def stack(parts, n, env):
    """Items' results as one dense [B, ...] array (an empty batch included)."""
    if parts:
        return np.stack(parts)
    shape = [env.dim(d) if not isinstance(d, str) or d not in RAGGED else 0 for d in n.shape]
    return np.zeros(shape, dtype=parts_dtype(n, env))


def parts_dtype(n, env):
    return env.ft if n.dtype in FLOATS else bool if n.dtype == "bool" else np.int64


def ev_softmax(n, vals, env):
    v, d = vals[0], axis(len(n.shape), n.attrs["dim"])
    if not v.itemised:
        return Val("dense", n.dtype, ref.softmax(n.op, v.data, d, env.ft))
    return Val(v.kind, n.dtype, [ref.softmax(n.op, x, d - 1, env.ft) for x in v.data])


def ev_norm(n, vals, env):
    k = len(n.attrs["nshape"])
    w = vals[1].data if len(vals) > 1 else None
    b = vals[2].data if len(vals) > 2 else None
    eps = n.attrs.get("eps")
    if eps is None:
        # rms_norm: the eps of the type it computes in (f32 for 16-bit: PyTorch's opmath type)
        eps = 1e-5 if n.op == "layer_norm" else float(np.finfo(np.float64 if n.dtype == "f64" else np.float32).eps)
    return ref.map_val(vals[0], lambda x: ref.norm(n.op, x, k, w, b, eps, env.ft), dtype=n.dtype)


def ev_pad(n, vals, env):
    v, L = vals[0], env.dim(n.shape[1])
    fv = ref.fill_value(n.attrs["value"], n.dtype, env.ft)
    inner = [env.dim(d) for d in n.shape[3 if v.kind == "pair" else 2:]]
    dt = parts_dtype(n, env)
    out = np.full([env.B, L] + ([L] if v.kind == "pair" else []) + inner, fv, dtype=dt)
    for b, x in enumerate(v.data):
        if v.kind == "pair":
            out[b, :x.shape[0], :x.shape[1]] = x
        else:
            out[b, :x.shape[0]] = x
    return Val("dense", n.dtype, out)


def ev_unpad(n, vals, env):
    p = vals[0].data
    if n.attrs.get("pair"):
        return Val("pair", n.dtype, [p[b, :l, :l] for b, l in enumerate(env.lens)])
    return Val("jagged", n.dtype, [p[b, :l] for b, l in enumerate(env.lens)])


def ev_matmul(n, vals, env):
    ft = env.ft
    a, b = (ref.map_val(v, lambda x: np.asarray(x, ft)) for v in vals[:2])
    if n.op == "linear":
        w = b.data.T
        bias = vals[2].data.astype(ft) if len(vals) > 2 else 0
        return ref.map_val(a, lambda x: x @ w + bias, dtype=n.dtype)
    if a.kind == "jT":  # x.transpose(1, 2) @ y: dense [B, K, N]
        parts = [x.T @ y for x, y in zip(a.data, b.data)]
        return Val("dense", n.dtype, stack(parts, n, env).astype(ft))
    if b.kind == "jT":  # q @ k.transpose(1, 2): per-item blocks
        return Val(kind(n.shape), n.dtype, [x @ y.T for x, y in zip(a.data, b.data)])
    if a.itemised and b.itemised:  # p @ v; per head (NumPy's matmul batches over H): q @ kT, p @ v
        if n.args[0].op == "softmax":  # an explicit attention, which may run fused
            return Val(kind(n.shape), n.dtype, [weigh(x, y, env) for x, y in zip(a.data, b.data)])
        return Val(kind(n.shape), n.dtype, [x @ y for x, y in zip(a.data, b.data)])
    return ref.map_val(a, lambda x: x @ b.data, dtype=n.dtype)


def ev_index(n, vals, env):
    op = n.op
    if op == "positions":
        sym = n.attrs.get("sym", "j1")
        return Val(kind(n.shape), "i64", [np.arange(l, dtype=np.int64) for l in (env.lens2 if sym == "j2" else env.lens)])
    if op == "embedding":
        table, ids = vals
        return ref.map_val(ids, lambda i: table.data[i], dtype=n.dtype, kind_=kind(n.shape))
    x, idx = vals
    d = axis(len(n.args[0].shape), n.attrs["dim"])
    if op == "index_select":
        if x.itemised:
            return ref.map_val(x, lambda a: np.take(a, idx.data, axis=d - 1))
        return Val("dense", n.dtype, np.take(x.data, idx.data, axis=d))
    if x.itemised:  # gather / take_along_dim, per item
        return Val(x.kind, n.dtype, [np.take_along_axis(a, i, axis=d - 1) for a, i in zip(x.data, idx.data)])
    return Val("dense", n.dtype, np.take_along_axis(x.data, idx.data, axis=d))


def resolve(to, env, inner_total):
    dims = [env.dim(d) for d in to]
    if -1 in dims:
        known = int(np.prod([d for d in dims if d != -1]))
        dims[dims.index(-1)] = inner_total // known if known else 0
    return dims


def ev_view(n, vals, env):
    v, op = vals[0], n.op
    if op in ("reshape", "view"):
        if v.itemised:
            to, inner = n.attrs["to"][2:], int(np.prod([env.dim(d) for d in n.args[0].shape[2:]]))
            return ref.map_val(v, lambda x: x.reshape([x.shape[0]] + resolve(to, env, inner)))
        return Val("dense", n.dtype, v.data.reshape(resolve(n.attrs["to"], env, v.data.size)))
    if op == "unsqueeze":
        d = n.attrs["dim"]
        d = d + len(n.shape) if d < 0 else d
        if v.itemised:
            return ref.map_val(v, lambda x: np.expand_dims(x, d - 1), kind_=kind(n.shape))
        return Val("dense", n.dtype, np.expand_dims(v.data, d))
    if op == "squeeze":
        d = axis(len(n.args[0].shape), n.attrs["dim"])
        if n.args[0].shape[d] != 1:
            return v
        if v.itemised:
            return ref.map_val(v, lambda x: np.squeeze(x, d - 1), kind_=kind(n.shape))
        return Val("dense", n.dtype, np.squeeze(v.data, d))
    if op == "narrow":  # a dense dim: of every item (its axis k - 1) or of the array
        k, a, b = n.attrs["dim"], n.attrs["start"], n.attrs["start"] + n.attrs["length"]
        if v.itemised:
            return ref.map_val(v, lambda x: np.take(x, np.arange(a, b), axis=k - 1))
        return Val("dense", n.dtype, np.take(v.data, np.arange(a, b), axis=k))
    rank = len(n.shape)  # transpose
    d0, d1 = axis(rank, n.attrs["d0"]), axis(rank, n.attrs["d1"])
    if v.kind in ("jagged", "jagged2") and rank == 3:
        return Val("jT", n.dtype, v.data)
    if v.itemised:  # of two dims after B: the items' axes (a head split or merge changes the kind)
        return ref.map_val(v, lambda x: np.swapaxes(x, d0 - 1, d1 - 1), kind_=kind(n.shape))
    return Val("dense", n.dtype, np.swapaxes(v.data, d0, d1))


def ev_cat(n, vals, env):
    """cat along a dense dim (stack: each operand given a new dim there first), every operand
    converted to the promoted dtype."""
    rank = len(n.shape)
    d = axis(rank, n.attrs["dim"])
    parts = [map_conv(v, n.dtype, env.ft) if v.dtype != n.dtype else v for v in vals]
    join = (lambda xs, ax: np.stack(xs, axis=ax)) if n.op == "stack" else (
        lambda xs, ax: np.concatenate(xs, axis=ax))
    if parts[0].itemised:
        return Val(kind(n.shape), n.dtype, [join([p.data[b] for p in parts], d - 1) for b in range(env.B)])
    return Val("dense", n.dtype, join([p.data for p in parts], d))


def ev_shape(n, vals, env):
    """permute: the dims moved; flatten, unflatten: the same elements in C order, re-shaped."""
    v = vals[0]
    if n.op == "permute":
        perm = [axis(len(n.shape), p) for p in n.attrs["perm"]]
        if v.itemised:
            return ref.map_val(v, lambda x: np.transpose(x, [p - 1 for p in perm[1:]]), kind_=kind(n.shape))
        return Val("dense", n.dtype, np.transpose(v.data, perm))
    if v.itemised:
        return ref.map_val(v, lambda x: x.reshape([x.shape[0]] + [env.dim(d) for d in n.shape[2:]]))
    return Val("dense", n.dtype, v.data.reshape([env.dim(d) for d in n.shape]))


def ev_const(n, vals, env):
    """arange, full, zeros, ones: dense values of the node's shape and dtype."""
    shape = [env.dim(d) for d in n.shape]
    if n.op == "arange":
        a = np.arange(shape[0], dtype=np.int64)
        return map_conv(Val("dense", "i64", a), n.dtype, env.ft) if n.dtype != "i64" else Val("dense", "i64", a)
    v = n.attrs.get("value", 0 if n.op == "zeros" else 1)
    src = "f64" if isinstance(v, float) else "bool" if isinstance(v, bool) else "i64"
    a = np.full(shape, v, dtype=np.float64 if src == "f64" else bool if src == "bool" else np.int64)
    return map_conv(Val("dense", src, a), n.dtype, env.ft) if n.dtype != src else Val("dense", src, a)


def weigh(p, z, env):
    """p @ z for attention weights p and values z; with env.hidden_v a key weighed by 0 adds 0
    whatever its value (no 0 * inf), as a kernel that does not read it."""
    if not env.hidden_v or np.all(np.isfinite(z)):
        return p @ z
    out = np.empty(p.shape[:-1] + z.shape[-1:], dtype=np.result_type(p, z))
    for i0 in range(0, p.shape[-2], 32):  # rows in blocks: the terms are [.., rows, S, C]
        pb = p[..., i0:i0 + 32, :, None]
        out[..., i0:i0 + 32, :] = np.where(pb == 0, 0, pb * z[..., None, :, :]).sum(axis=-2)
    return out


def safe_softmax(s, ft):
    """PyTorch's SDPA softmax over the last dim: a row of -inf (fully masked) gives 0, not NaN."""
    if s.shape[-1] == 0:
        return s
    p = ref.softmax("softmax", s, s.ndim - 1, ft)
    return np.where(np.isneginf(np.max(s, axis=-1, keepdims=True)), ft(0), p)


def ev_sdpa(n, vals, env):
    """scaled_dot_product_attention(q, k, v, attn_mask, is_causal, scale) per item, PyTorch's
    semantics: scale None is 1/sqrt(E); causal is top-left (ones(L, S).tril(0)); a bool mask
    keeps where True, a float one is added; an item without keys gives 0 (an empty sum), and so
    does a fully masked row, whatever NaN its values hold (the guide's safe softmax); with
    enable_gqa the key/value heads repeated (repeat_interleave) to the query heads."""
    ft = env.ft
    q, k, v = (ref.map_val(x, lambda a: np.asarray(a, ft)) for x in vals[:3])
    mask = vals[3] if len(vals) > 3 else None
    E = n.args[0].shape[-1]
    scale = ft(n.attrs["scale"]) if n.attrs.get("scale") is not None else ft(1 / np.sqrt(E))
    out = []
    for b in range(env.B):
        x, y, z = q.data[b], k.data[b], v.data[b]
        if n.attrs.get("gqa"):  # PyTorch's enable_gqa: key/value head h serves query heads h*g .. h*g+g-1
            g = x.shape[0] // y.shape[0]
            y, z = np.repeat(y, g, axis=0), np.repeat(z, g, axis=0)
        r16 = (lambda a: np.asarray(half.round_to(a, n.dtype), ft)) if n.dtype in half.HALVES else (lambda a: a)
        # in 16-bit the scores are values of ops, rounded as such (the guide): q kᵀ, the scaling
        s = r16(r16(x @ np.swapaxes(y, -1, -2)) * scale)
        L, S = x.shape[-2], y.shape[-2]
        if n.attrs.get("causal"):
            s = np.where(np.tril(np.ones((L, S), dtype=bool)), s, ft(-np.inf))
        if mask is not None:
            m = mask.data[b]  # itemised: [B, j1, j2], [B, 1, j2], per head [B, 1, j1, j2]
            s = np.where(m, s, ft(-np.inf)) if mask.dtype == "bool" else r16(s + np.asarray(m, ft))
        o = weigh(safe_softmax(s, ft), z, env)
        if s.shape[-1]:  # a fully masked row is 0 (the guide), even where a value it weighs by 0 is NaN
            o = np.where(np.isneginf(np.max(s, axis=-1, keepdims=True)), ft(0), o)
        out.append(np.asarray(o, ft))
    return Val(kind(n.shape), n.dtype, out)


def ev_clamp(n, vals, env):
    """PyTorch's clamp: at least min, then at most max, NaN in the input or a bound kept."""
    ft, cdt = env.ft, n.attrs["cdt"]
    ops = [ref.lit_value(a, cdt, ft) if a.is_lit() else map_conv(v, cdt, ft) for a, v in zip(n.args, vals)]

    def f(x, *bounds):
        it = iter(bounds)
        if n.attrs["lo"]:
            x = np.maximum(x, next(it))
        if n.attrs["hi"]:
            x = np.minimum(x, next(it))
        return x
    r = ref.per_item(kind(n.shape), n.dtype, ops, len(n.shape), env, f)
    return ref.map_val(r, lambda x: np.asarray(x, ft)) if n.dtype in FLOATS else r


def ev_leaky_relu(n, vals, env):
    ft = env.ft
    sl = n.attrs.get("slope")
    slope = ref.float_of(0.01 if sl is None else sl, n.dtype, ft)
    return ref.map_val(vals[0], lambda x: np.where(np.asarray(x, ft) > 0, np.asarray(x, ft), np.asarray(x, ft) * slope))


def ev_act(n, vals, env):
    """square ... softsign, PyTorch's formulas in the result's dtype (docs/guide.md)."""
    ft, fn, dt = env.ft, n.attrs["fn"], n.dtype
    v = map_conv(vals[0], dt, ft)
    b = n.attrs.get("bounds") or (-1, 1)
    num = (lambda c: ref.float_of(c, dt, ft)) if dt in FLOATS else (lambda c: np.int64(c))

    def f(x):
        if fn == "square":
            return x * x
        if fn == "reciprocal":
            return ft(1) / x
        if fn == "softsign":
            return x / (ft(1) + np.abs(x))
        if fn in ("relu6", "hardtanh"):
            lo, hi = (num(0), num(6)) if fn == "relu6" else (num(b[0]), num(b[1]))
            return np.minimum(np.maximum(x, lo), hi)
        h = np.minimum(np.maximum(x + ft(3), ft(0)), ft(6))
        return h / ft(6) if fn == "hardsigmoid" else x * h / ft(6)
    return ref.map_val(v, lambda x: np.asarray(f(x), ft) if dt in FLOATS else f(x))


def lse(x, axes, keep):
    """PyTorch's logsumexp: the maximum taken as 0 where it is infinite; an empty line -inf."""
    m = np.max(x, axis=axes, keepdims=True, initial=-np.inf)
    m = np.where(np.isinf(m), 0, m)
    r = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
    return r if keep else np.squeeze(r, axis=axes)


def normalized(x, axes, p, eps, ft):
    """PyTorch's F.normalize: x / max(||x||_p over axes, eps)."""
    a = np.abs(x)
    if p == 2:
        nrm = np.sqrt(np.sum(x * x, axis=axes, keepdims=True))
    elif p == 1:
        nrm = np.sum(a, axis=axes, keepdims=True)
    elif np.isinf(p):
        nrm = np.max(a, axis=axes, keepdims=True, initial=-np.inf)
    else:
        nrm = np.sum(a ** p, axis=axes, keepdims=True) ** (1 / p)
    return x / np.maximum(nrm, ft(eps))


def ev_reduce_like(n, vals, env):
    """logsumexp and normalize, over one dim or several, item by item where the tensor is itemised
    (a reduction over the ragged dim of a jagged tensor gives a dense [B, ...] one)."""
    ft, ds = env.ft, n.attrs["dims"]
    v = ref.map_val(vals[0], lambda x: np.asarray(x, ft), dtype=n.dtype)
    if n.op == "logsumexp":
        keep = n.attrs.get("keepdim", False)
        f = lambda x, axes: lse(x, axes, keep)
    else:
        p = 2.0 if n.attrs.get("p") is None else float(n.attrs["p"])
        eps = ref.float_of(1e-12 if n.attrs.get("eps") is None else n.attrs["eps"], n.dtype, ft)
        f = lambda x, axes: normalized(x, axes, p, eps, ft)
    if not v.itemised:
        return Val("dense", n.dtype, f(v.data, tuple(ds)))
    parts = [f(x, tuple(d - 1 for d in ds)) for x in v.data]
    if n.op == "logsumexp" and 1 in ds:
        return Val("dense", n.dtype, stack(parts, n, env))
    return Val(kind(n.shape), n.dtype, parts)


SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def ev_expfn(n, vals, env):
    """log1p ... mish from their definitions in PyTorch's documentation, NumPy's log1p and expm1."""
    ft, fn = env.ft, n.attrs["fn"]
    v = map_conv(vals[0], n.dtype, ft)
    get = lambda k, d: ft(d if n.attrs.get(k) is None else n.attrs[k])

    def softplus(x, beta, threshold):
        bx = x * beta
        return np.where(bx > threshold, x, np.log1p(np.exp(bx)) / beta)

    def f(x):
        with np.errstate(all="ignore"):
            if fn == "log1p":
                return np.log1p(x)
            if fn == "expm1":
                return np.expm1(x)
            if fn == "softplus":
                return softplus(x, get("beta", 1.0), get("threshold", 20.0))
            if fn == "mish":
                return x * np.tanh(softplus(x, ft(1), ft(20)))
            alpha = ft(SELU_ALPHA) if fn == "selu" else get("alpha", 1.0)
            y = np.where(x > 0, x, alpha * np.expm1(x / alpha if fn == "celu" else x))
            return ft(SELU_SCALE) * y if fn == "selu" else y
    return ref.map_val(v, lambda x: np.asarray(f(np.asarray(x, ft)), ft))


def stat_of(fn, x, axes, keep, corr, ft):
    """var, std (PyTorch's: sum((x - mean)^2) / max(N - correction, 0)) or a reduction over axes."""
    cnt = int(np.prod([x.shape[a] for a in axes])) if axes else 1
    with np.errstate(all="ignore"):
        if fn in ("var", "std"):
            m = np.sum(x, axis=axes, keepdims=True) / ft(cnt)
            r = np.sum((x - m) ** 2, axis=axes, keepdims=keep) / ft(max(cnt - corr, 0))
            return np.sqrt(r) if fn == "std" else r
        if fn == "mean":
            return np.sum(x, axis=axes, keepdims=keep) / ft(cnt)
        if fn in ("sum", "prod"):
            return (np.sum if fn == "sum" else np.prod)(x, axis=axes, keepdims=keep)
        return (np.max if fn == "max" else np.min)(x, axis=axes, keepdims=keep, initial=-np.inf if fn == "max" else np.inf)


def ev_stat(n, vals, env):
    """var and std over dims, and reductions over the batch and ragged dims at once: all the
    rows of every item together, then the other dims named."""
    ft, ds, fn, keep = env.ft, n.attrs["dims"], n.attrs["fn"], n.attrs.get("keepdim", False)
    corr = n.attrs.get("correction")
    corr = corr if corr is not None else (0 if n.attrs.get("unbiased") is False else 1)
    v = ref.map_val(vals[0], lambda x: np.asarray(x, ft), dtype=n.dtype)
    if not v.itemised:
        return Val("dense", n.dtype, np.asarray(stat_of(fn, v.data, tuple(ds), keep, corr, ft), ft))
    if 0 in ds:  # every row of every item: one array of rows, whose axis 0 is both B and j1
        tail = [env.dim(d) for d in n.args[0].shape[2:]]
        rows = np.concatenate(v.data, axis=0) if v.data else np.zeros([0] + tail, ft)
        r = np.asarray(stat_of(fn, rows, (0,) + tuple(d - 1 for d in ds if d >= 2), keep, corr, ft), ft)
        return Val("dense", n.dtype, r[np.newaxis] if keep else r)
    parts = [np.asarray(stat_of(fn, x, tuple(d - 1 for d in ds), keep, corr, ft), ft) for x in v.data]
    if 1 in ds:
        return Val("dense", n.dtype, stack(parts, n, env))
    return Val(kind(n.shape), n.dtype, parts)


def porting_of(n, x, y, ft):
    """One item's (or a dense tensor's) value of a "porting" function, from PyTorch's
    documentation in NumPy: the dims count from the item's first (the ragged dim is axis 0)."""
    fn, at = n.attrs["fn"], n.attrs
    with np.errstate(all="ignore"):
        if fn in ("tril", "triu"):
            return (np.tril if fn == "tril" else np.triu)(x, at["k"]) if x.size else x
        if fn == "logaddexp":
            return np.logaddexp(x, y)
        if fn == "glu":
            h = x.shape[-1] // 2
            return x[..., :h] / (1 + np.exp(-x[..., h:]))
        if fn == "logsigmoid":
            return -np.logaddexp(ft(0), -x)
        if fn in ("softshrink", "hardshrink"):
            lam = ft(0.5 if at.get("l") is None else at["l"])
            if fn == "hardshrink":
                return np.where((x >= -lam) & (x <= lam), ft(0), x)
            return np.where(x > lam, x - lam, np.where(x < -lam, x + lam, x * ft(0)))
        if fn == "threshold":
            return np.where(x <= ft(at["th"]), ft(at["val"]), x)
    raise AssertionError(fn)


def ev_porting(n, vals, env):
    """flip, tril/triu, logaddexp, glu, norm, logsigmoid, the shrinks, threshold, expand_as:
    item by item (a jagged tensor's dims shift by one: its ragged dim is each item's axis 0)."""
    ft, fn, at = env.ft, n.attrs["fn"], n.attrs
    v = vals[0]
    if fn == "expand_as":  # [B, j1, 1] to [B, j1, D]
        return Val(vals[1].kind, n.dtype, [np.broadcast_to(np.asarray(a, ft), np.shape(b)).copy()
                                           for a, b in zip(v.data, vals[1].data)])
    v = map_conv(v, n.dtype, ft) if n.dtype in FLOATS else v
    shift = 1 if v.itemised else 0
    if fn == "flip":
        return ref.map_val(v, lambda x: np.flip(np.asarray(x), [d - shift for d in at["dims"]]).copy())
    if fn == "norm":
        p = at.get("p")
        p = 2.0 if p is None else float(p)
        d, keep = at["dim"] - shift, at["keepdim"]

        def nrm(x):
            a = np.abs(np.asarray(x, ft))
            with np.errstate(all="ignore"):
                if p == np.inf:  # an empty item: 0 (the guide; PyTorch refuses)
                    return np.max(a, axis=d, keepdims=keep, initial=ft(0))
                if p == -np.inf:  # an empty item: inf
                    return np.min(a, axis=d, keepdims=keep, initial=ft(np.inf))
                if p == 0:
                    return np.sum(a != 0, axis=d, keepdims=keep).astype(ft)
                return np.sum(a ** ft(p), axis=d, keepdims=keep) ** ft(1 / p)
        if v.itemised and at["dim"] == 1:
            return Val("dense", n.dtype, stack([np.asarray(nrm(x), ft) for x in v.data], n, env))
        return ref.map_val(v, lambda x: np.asarray(nrm(x), ft))
    if fn == "logaddexp":
        w = map_conv(vals[1], n.dtype, ft)
        if not v.itemised:
            return Val(v.kind, n.dtype, np.asarray(porting_of(n, np.asarray(v.data, ft), np.asarray(w.data, ft), ft), ft))
        return Val(v.kind, n.dtype, [np.asarray(porting_of(n, np.asarray(a, ft), np.asarray(b, ft), ft), ft)
                                     for a, b in zip(v.data, w.data)])
    return ref.map_val(v, lambda x: np.asarray(porting_of(n, np.asarray(x), None, ft)))


def argmax_of(fn, x, axis, keep):
    """numpy's argmax / argmin (the first extreme; NaN counts as one, as in PyTorch) along axis
    (None: of the flattened array); -1 along an empty axis (the guide: PyTorch refuses one)."""
    if axis is None:
        r = np.asarray(-1 if x.size == 0 else (np.argmax if fn == "argmax" else np.argmin)(x), np.int64)
        return r.reshape([1] * x.ndim) if keep else r
    if x.shape[axis] == 0:
        shape = [1 if k == axis else s for k, s in enumerate(x.shape)] if keep else \
            [s for k, s in enumerate(x.shape) if k != axis]
        return np.full(shape, -1, np.int64)
    return np.asarray((np.argmax if fn == "argmax" else np.argmin)(x, axis=axis, keepdims=keep), np.int64)


def ev_argmax(n, vals, env):
    """argmax and argmin, item by item over a jagged tensor's dims (its ragged dim gives a
    dense [B, ...]), or of a dense tensor."""
    fn, keep, v = n.attrs["fn"], n.attrs.get("keepdim", False), vals[0]
    if not v.itemised:
        return Val("dense", "i64", argmax_of(fn, np.asarray(v.data), None if n.attrs.get("all") else n.attrs["dim"], keep))
    d = n.attrs["dim"]
    parts = [argmax_of(fn, np.asarray(x), d - 1, keep) for x in v.data]
    if kind(n.shape) == "dense":  # over the ragged dim of a jagged tensor: [B, ...]
        return Val("dense", "i64", stack(parts, n, env))
    return Val(kind(n.shape), "i64", parts)


FAMILY = {"porting": ev_porting, "argmax": ev_argmax, "sdpa": ev_sdpa, "expfn": ev_expfn, "stat": ev_stat, "clamp": ev_clamp, "act": ev_act, "leaky_relu": ev_leaky_relu, "logsumexp": ev_reduce_like,
          "normalize": ev_reduce_like}
for _ops, _f in [
        (("neg", "abs", "sgn", "relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh", "exp", "log", "sqrt",
          "rsqrt", "sin", "cos", "logical_not", "add", "sub", "mul", "div", "pow", "maximum", "minimum",
          "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "where", "masked_fill"), ev_elementwise),
        (("cast",), ev_cast), (("sum", "mean", "max", "min", "prod"), ev_reduce),
        (("softmax", "log_softmax"), ev_softmax), (("layer_norm", "rms_norm"), ev_norm),
        (("pad",), ev_pad), (("unpad",), ev_unpad), (("matmul", "linear"), ev_matmul),
        (("embedding", "gather", "take_along_dim", "index_select", "positions"), ev_index),
        (("reshape", "view", "unsqueeze", "squeeze", "transpose", "narrow"), ev_view), (("cat", "stack"), ev_cat),
        (("permute", "flatten", "unflatten"), ev_shape), (("arange", "full", "zeros", "ones"), ev_const)]:
    for _o in _ops:
        FAMILY[_o] = _f


def input_val(node, data, env):
    """An input as the reference holds it: items (real rows only) or a dense array."""
    k, d = kind(node.shape), data[node.name]
    conv = (lambda a: np.asarray(a, env.ft)) if node.dtype in FLOATS else (
        (lambda a: np.asarray(a, bool)) if node.dtype == "bool" else (lambda a: np.asarray(a, np.int64)))
    if k == "dense":
        return Val("dense", node.dtype, conv(d))
    return Val(k, node.dtype, [conv(x) for x in d])


def flatten(v, n, env):
    """What `ragjit run` writes for output node n. A tensor per head is written in its
    canonical order (the guide's "Heads"): the batch dim, the ragged dims, then the other dims
    in order: [B, H, j1, D] and [B, H, D, j1] as rows of [H, D], [B, H, j1, j1] as len_b^2 rows
    of [H]."""
    if not v.itemised:
        return np.asarray(v.data)
    if v.kind in HEADED:
        dims = n.shape[1:]
        js = [k for k, d in enumerate(dims) if d in RAGGED]
        rest = [k for k, d in enumerate(dims) if d not in RAGGED]
        inner = [env.dim(dims[k]) for k in rest]
        rows = [np.transpose(x, js + rest).reshape([int(np.prod([x.shape[k] for k in js]))] + inner)
                for x in v.data]
        return np.concatenate(rows) if rows else np.zeros([0] + inner, dtype=parts_dtype(n, env))
    inner = [env.dim(d) for d in n.shape[3 if v.kind in ("pair", "cpair") else 2:]]
    # the rows of an item: the product of its dims before `inner` (not -1: it fails on 0 columns)
    rows = [x.reshape([int(np.prod(x.shape[:x.ndim - len(inner)]))] + inner) for x in v.data]
    return np.concatenate(rows) if rows else np.zeros([0] + inner, dtype=parts_dtype(n, env))


def attention_weights(prog):
    """The 16-bit softmax nodes that are the left operand of a matrix product: the explicit
    attention `softmax(f(q @ kT)) @ v`, which ragjit may fuse; the fused kernel keeps the
    weights in f32 and never rounds them (docs/guide.md, 16-bit floats), so a reference that
    leaves their rounding out is the fused form's."""
    return {id(a) for n in prog.stmts if n.op == "matmul" for a in n.args[:1]
            if a.op == "softmax" and a.dtype in half.HALVES}


# Ops whose value is a sum of terms: computed in another order, such a value moves by ulps of
# the sum of its terms' magnitudes, not of its own (a sum that cancels to exactly 0 moves too).
SUMS = ("sum", "mean", "matmul", "linear")


def magnitude(n, args, env):
    """For a SUMS op: the same op over its arguments' magnitudes (the scale its rounding moves
    it by); None for any other op."""
    if n.op not in SUMS or n.dtype not in FLOATS:
        return None
    absolute = [ref.map_val(a, np.abs) if isinstance(a, Val) and a.dtype != "bool" else a for a in args]
    return FAMILY[n.op](n, absolute, env)


def evaluate(prog, data, env, unrounded=frozenset(), moved=None):
    """Every output of prog in env's float type; the nodes in `unrounded` (ids) keep their
    16-bit value unrounded (attention_weights). moved(dtype, array, scale): each f32 or f64
    op's value moved as its rounding might move it (check.input_spread), and each 16-bit op's
    value as computing it in f32 might before it is rounded to its format; scale is the
    magnitude of a SUMS op's terms (or None); or moved is None."""
    vals = {}
    for n in prog.inputs:
        vals[id(n)] = input_val(n, data, env)
    with np.errstate(all="ignore"):  # NaN and infinities in the data are meant
        for n in prog.stmts:
            args = [vals.get(id(a)) for a in n.args]
            v = FAMILY[n.op](n, args, env)
            stored16 = n.dtype in half.HALVES and id(n) not in unrounded  # stored in its format
            if moved and (stored16 or n.dtype in ("f32", "f64")):
                m = magnitude(n, args, env)
                if m is None:
                    v = ref.map_val(v, lambda x, dt=n.dtype: moved(dt, x, None))
                elif v.itemised:
                    v = Val(v.kind, v.dtype, [moved(n.dtype, x, s) for x, s in zip(v.data, m.data)])
                else:
                    v = Val(v.kind, v.dtype, moved(n.dtype, v.data, m.data))
            if stored16:
                v = ref.map_val(v, lambda x, dt=n.dtype: np.asarray(half.round_to(x, dt), env.ft))
            vals[id(n)] = v
    return {n.name: flatten(vals[id(n)], n, env) for n in prog.outputs}
