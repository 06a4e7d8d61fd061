#!/usr/bin/env python3
"""cross_numpy.py — two ragged classes ([B, j1, j2]: queries of j1, keys and values of j2, cross
attention) against NumPy in float64, item by item, from PyTorch's documented semantics — not
from ragjit's interpreter.

Programs in the text format are run by `ragjit run` on every target that runs here (the
reference interpreter, the CPU with and without a BLAS, OpenCL on PoCL), on lengths where the
two classes differ item by item: items with no queries, items with no keys, one long item of
each class, and both classes as views with holes. What is checked:

  - the explicit product q @ kᵀ ([B, j1, j2], stored as each item's len1 x len2 block), softmax
    over the keys, p @ v, positions of both classes, reductions over either ragged dim;
  - fused attention, found (softmax(where(mask, q kᵀ, -inf)) @ v: a fully masked row is NaN as
    softmax gives, an item without keys 0 as an empty p @ v gives) and by name
    (scaled_dot_product_attention: causal top-left as PyTorch's ones(L, S).tril(0), a bool mask,
    a fully masked row 0);
  - heads [B, H, j1, j2]: per-(item, head) products, SDPA with a [B, 1, j1, j2] mask and GQA.

A reduction over an empty dim gives the reduction's identity (a max over no queries is -inf;
PyTorch raises there). Usage: cross_numpy.py RAGJIT [TARGET ...]; exit 77 without NumPy.
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("numpy is not importable by %s: skipping" % sys.executable)
    sys.exit(77)

import attention_numpy  # noqa: E402  (beside this file)

E, DV, H, D = 16, 8, 4, 8

HEAD = """ragged j1 : B
ragged j2 : B
input q : f32[B, j1, 16]
input k : f32[B, j2, 16]
input v : f32[B, j2, 8]
input mb : bool[B, j1, j2]
"""

PLAIN = HEAD + """s = q @ k.transpose(1, 2) * 0.25
p = softmax(s, dim=2)
o = p @ v
pi = positions(j1)
pj = positions(j2)
d = where(pi.unsqueeze(2) >= pj.unsqueeze(1), s, -1.0) + (pj.unsqueeze(1) - pi.unsqueeze(2)) * 0.1
r2 = sum(s, dim=2)
r1 = max(s, dim=1)
c = s - max(s, dim=2, keepdim=True)
n = where(mb, s, 0.0) * 2.0
cs = softmax(s, dim=1)
mc = mean(s, dim=1)
output s, p, o, d, r2, r1, c, n, cs, mc
"""

# one program an output: a product read by two attentions would be computed once, unfused
FUSED = {"f": "f = softmax(where(mb, q @ k.transpose(1, 2) * 0.25, -inf), dim=-1) @ v\n",
         "a": "a = scaled_dot_product_attention(q, k, v)\n",
         "c": "c = scaled_dot_product_attention(q, k, v, is_causal=True)\n",
         "m": "m = scaled_dot_product_attention(q, k, v, attn_mask=mb, scale=0.3)\n"}

HEADS = """ragged j1 : B
ragged j2 : B
input x : f32[B, j1, 32]
input y : f32[B, j2, 32]
input wq : f32[32, 32]
input wkv : f32[64, 32]
input mb : bool[B, j1, j2]
q = linear(x, wq).view(B, j1, 4, 8).transpose(1, 2)
k, v = linear(y, wkv).split(32, dim=-1)
k = k.view(B, j2, 4, 8).transpose(1, 2)
v = v.view(B, j2, 4, 8).transpose(1, 2)
p = softmax(q @ k.transpose(-2, -1) * 0.35, dim=-1)
o = p @ v
oc = scaled_dot_product_attention(q, k, v, is_causal=True)
om = scaled_dot_product_attention(q, k, v, attn_mask=mb.unsqueeze(1))
og = scaled_dot_product_attention(q, k.narrow(1, 0, 2), v.narrow(1, 2, 2), enable_gqa=True)
output p, o, oc, om, og
"""

# (len1, len2) per item; `holes` stores both classes as views with holes
LENGTHS = {
    "mixed": ([0, 3, 5, 1, 2, 4, 2], [2, 0, 7, 1, 5, 3, 0]),
    "one_long": ([2, 150, 1, 0, 3], [5, 3, 260, 2, 0]),
    "holes": ([1, 0, 4, 6, 2], [3, 2, 0, 5, 7]),
}


def softmax_rows(s, safe):
    """Softmax over the last dim; safe: PyTorch's SDPA (a row of -inf gives 0)."""
    if s.shape[-1] == 0:
        return s.copy()
    m = s.max(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", over="ignore"):
        p = np.exp(s - m)
        p = p / p.sum(axis=-1, keepdims=True)
    if safe:
        p = np.where(np.isneginf(m), 0.0, p)
    return p


def sdpa(q, k, v, mask=None, scale=None, causal=False):
    """F.scaled_dot_product_attention on one item: q [..., L, E], k, v [..., S, .]; GQA by
    repeat_interleave of the kv heads; causal is top-left (ones(L, S).tril(0))."""
    if q.ndim == 3 and k.shape[0] != q.shape[0]:
        k, v = np.repeat(k, q.shape[0] // k.shape[0], axis=0), np.repeat(v, q.shape[0] // v.shape[0], axis=0)
    L, S = q.shape[-2], k.shape[-2]
    s = q @ np.swapaxes(k, -1, -2) * (1 / np.sqrt(q.shape[-1]) if scale is None else scale)
    if causal:
        mask = np.tril(np.ones((L, S), dtype=bool))
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    return softmax_rows(s, True) @ v


def ref_plain(q, k, v, mb):
    s = q @ k.T * 0.25
    p = softmax_rows(s, False)
    i, j = np.arange(len(q))[:, None], np.arange(len(k))[None, :]
    ident = np.full(len(k), -np.inf)
    return {"s": s.reshape(-1), "p": p.reshape(-1), "o": p @ v,
            "d": (np.where(i >= j, s, -1.0) + (j - i) * 0.1).reshape(-1), "r2": s.sum(axis=1),
            "r1": s.max(axis=0) if len(q) else ident,
            "c": (s - (s.max(axis=1, keepdims=True) if len(k) else 0)).reshape(-1),
            "n": (np.where(mb, s, 0.0) * 2.0).reshape(-1), "cs": softmax_rows(s.T, False).T.reshape(-1),
            "mc": s.mean(axis=0) if len(q) else np.full(len(k), np.nan)}


def ref_fused(q, k, v, mb):
    f = softmax_rows(np.where(mb, q @ k.T * 0.25, -np.inf), False) @ v
    return {"f": f, "a": sdpa(q, k, v), "c": sdpa(q, k, v, causal=True), "m": sdpa(q, k, v, mb, 0.3)}


def ref_heads(x, y, wq, wkv, mb):
    q = (x @ wq.T).reshape(len(x), H, D).transpose(1, 0, 2)
    kv = y @ wkv.T
    k = kv[:, :32].reshape(len(y), H, D).transpose(1, 0, 2)
    v = kv[:, 32:].reshape(len(y), H, D).transpose(1, 0, 2)
    p = softmax_rows(q @ k.transpose(0, 2, 1) * 0.35, False)  # [H, L, S]
    back = lambda a: a.transpose(1, 0, 2)  # noqa: E731  [H, L, D] -> rows of [H, D]
    return {"p": p.transpose(1, 2, 0).reshape(-1, H), "o": back(p @ v), "oc": back(sdpa(q, k, v, causal=True)),
            "om": back(sdpa(q, k, v, mb[None])), "og": back(sdpa(q, k[:2], v[2:4]))}


def stored(rng, lens, inner, holes):
    """Values of a jagged tensor (packed, or with a gap of two garbage rows after each item) and
    the offsets (and lengths) that address them; returns (file array, per-item views)."""
    off, rows, items = [], 0, []
    for n in lens:
        off.append(rows)
        rows += n + (2 if holes else 0)
    a = rng.uniform(-2, 2, (rows,) + inner).astype(np.float32)
    items = [a[o:o + n].astype(np.float64) for o, n in zip(off, lens)]
    off.append(rows)
    return a, np.array(off, dtype=np.int64), items


def write(d, name, a):
    np.save(os.path.join(d, name + ".npy"), a)


def make_data(d, prog, lens1, lens2, holes, rng):
    os.makedirs(d, exist_ok=True)
    for sym, lens in (("j1", lens1), ("j2", lens2)):
        off = np.concatenate([[0], np.cumsum([n + (2 if holes else 0) for n in lens])]).astype(np.int64)
        write(d, sym, off)
        if holes:
            write(d, sym + ".lengths", np.array(lens, dtype=np.int64))
    blocks = [rng.uniform(0, 1, (n1, n2)) < 0.7 for n1, n2 in zip(lens1, lens2)]
    for b in blocks:
        if b.shape[0] > 1 and b.shape[1] > 0:
            b[b.shape[0] // 2, :] = False  # a fully masked query row
    flat = np.concatenate([b.reshape(-1) for b in blocks]) if blocks else np.zeros(0, bool)
    items = []
    if prog is HEADS:
        xa, _, xs = stored(rng, lens1, (32,), holes)
        ya, _, ys = stored(rng, lens2, (32,), holes)
        wq = rng.uniform(-0.3, 0.3, (32, 32)).astype(np.float32)
        wkv = rng.uniform(-0.3, 0.3, (64, 32)).astype(np.float32)
        for name, a in (("x", xa), ("y", ya), ("wq", wq), ("wkv", wkv), ("mb", flat)):
            write(d, name, a)
        for b in range(len(lens1)):
            items.append((xs[b], ys[b], wq.astype(np.float64), wkv.astype(np.float64), blocks[b]))
        return items
    qa, _, qs = stored(rng, lens1, (E,), holes)
    ka, _, ks = stored(rng, lens2, (E,), holes)
    va, _, vs = stored(rng, lens2, (DV,), holes)
    for name, a in (("q", qa), ("k", ka), ("v", va), ("mb", flat)):
        write(d, name, a)
    return [(qs[b], ks[b], vs[b], blocks[b]) for b in range(len(lens1))]


def compare(got, want):
    """attention_numpy's comparison (NaN where NaN is due, a relative tolerance), where the
    reductions' identities also make infinities due."""
    if got.shape != want.shape:
        return f"shape {got.shape}, want {want.shape}"
    inf = np.isinf(want)
    if (got[inf] != want[inf]).any():
        return "infinities differ"
    return attention_numpy.compare(np.where(inf, 0.0, got), np.where(inf, 0.0, want))


def programs():
    """(name, text, reference, heads data?, fused?) for every program."""
    yield "plain", PLAIN, ref_plain, False, False
    for out, stmt in FUSED.items():
        yield "fused_" + out, HEAD + stmt + "output %s\n" % out, ref_fused, False, True
    yield "heads", HEADS, ref_heads, True, False


def run_case(ragjit, targets, work, pname, path, ref, heads, rng):
    """Every length pattern on every target; returns (passed, failed, skipped)."""
    passed = failed = skipped = 0
    with open(path) as f:
        outs = [o.strip() for o in f.read().split("output ")[-1].split(",")]
    for pat, (lens1, lens2) in LENGTHS.items():
        d = os.path.join(work, f"{pname}-{pat}")
        items = make_data(d, HEADS if heads else PLAIN, lens1, lens2, pat == "holes", rng)
        per = [ref(*it) for it in items]
        want = {name: np.concatenate([p[name] for p in per]) for name in outs}
        for target in targets:
            out = os.path.join(d, "out-" + target)
            env = dict(os.environ)
            if target == "cpu-no-blas":
                env["RAGJIT_BLAS"] = "off"
            r = subprocess.run([ragjit, "run", path, "--data", d, "--out", out, "--target",
                                target.replace("-no-blas", "")], capture_output=True, text=True, timeout=600, env=env)
            if r.returncode and target == "opencl" and "device" in r.stderr.lower():
                skipped += 1
                continue
            if r.returncode:
                print(f"FAIL {pname} {pat} {target}: ragjit run: {r.stderr.strip()}")
                failed += 1
                continue
            for name, w in want.items():
                msg = compare(np.load(os.path.join(out, name + ".npy")).astype(np.float64), w)
                if msg:
                    print(f"FAIL {pname} {pat} {target} {name}: {msg}")
                    failed += 1
                else:
                    passed += 1
    return passed, failed, skipped


def main():
    ragjit = sys.argv[1]
    targets = sys.argv[2:] or ["reference", "cpu", "cpu-no-blas", "opencl"]
    rng = np.random.default_rng(4)
    total = [0, 0, 0]
    with tempfile.TemporaryDirectory() as work:
        for pname, text, ref, heads, fused in programs():
            path = os.path.join(work, pname + ".rj")
            with open(path, "w") as f:
                f.write(text)
            if fused:  # one fused kernel, no [B, j1, j2] temporary
                loops = subprocess.run([ragjit, "emit", path, "--stage", "loops"], capture_output=True, text=True)
                if loops.returncode or "template: attention_" not in loops.stdout or ": temp" in loops.stdout:
                    print(f"FAIL {pname}: the loops dump does not show fused attention without temporaries\n"
                          f"{loops.stdout[:2000]}{loops.stderr}")
                    total[1] += 1
            for i, n in enumerate(run_case(ragjit, targets, work, pname, path, ref, heads, rng)):
                total[i] += n
    print(f"{total[0]} passed, {total[1]} failed, {total[2]} skipped")
    return 1 if total[1] else 0


if __name__ == "__main__":
    sys.exit(main())
