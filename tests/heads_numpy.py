#!/usr/bin/env python3
"""Heads ([B, H, j, D], as PyTorch's jagged layout has them) against NumPy in float64, item by
item, from PyTorch's documented semantics: programs written as PyTorch code reads (QKV
projection, split, view + transpose(1, 2), q @ k.transpose(-2, -1), softmax, @ v, transpose
back, flatten, output projection), run on every target that runs here. An output per head
comes back as stored: [B, H, j, D] as rows of [H, D], [B, H, j, j] as len_b^2 rows of [H].
Usage: heads_numpy.py RAGJIT [TARGET ...]. Exit 77 (skipped) without NumPy."""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("numpy is not importable by %s: skipping" % sys.executable)
    sys.exit(77)

ragjit = sys.argv[1]
targets = sys.argv[2:] or ["reference", "cpu", "opencl"]
H, D = 4, 8
E = H * D

MHA = """
ragged j1 : B
input x : f32[B, j1, %(E)d]
input w_qkv : f32[%(E3)d, %(E)d]
input b_qkv : f32[%(E3)d]
input w_o : f32[%(E)d, %(E)d]
input slopes : f32[%(H)d, 1, 1]
qkv = linear(x, w_qkv, b_qkv)
q, k, v = qkv.split(%(E)d, dim=-1)
q = q.view(B, j1, %(H)d, %(D)d).transpose(1, 2)
k = k.view(B, j1, %(H)d, %(D)d).transpose(1, 2)
v = v.unflatten(-1, [%(H)d, %(D)d]).transpose(1, 2)
s = q @ k.transpose(-2, -1) * %(scale)r + slopes
s = 5.0 * tanh(s / 5.0)
p = softmax(s, dim=-1)
o = p @ v
y = linear(o.transpose(1, 2).flatten(2), w_o)
output y, p, o
""" % {"E": E, "E3": 3 * E, "H": H, "D": D, "scale": 1 / np.sqrt(D)}

# reductions, norms, narrow and softmax over the query dim of tensors per head
MISC = """
ragged j1 : B
input x : f32[B, j1, %(E)d]
q = x.view(B, j1, %(H)d, %(D)d).transpose(1, 2)
qn = rms_norm(q, %(D)d, eps=1e-6)
s = qn @ q.transpose(-2, -1)
cs = softmax(s, dim=2)
m = sum(s, dim=-1, keepdim=True)
h = q.narrow(-1, 2, 4) * 2.0 + 1.0
z = (cs.transpose(-2, -1) @ q).transpose(1, 2)
t = softmax((qn @ q.transpose(-2, -1)).transpose(-2, -1), dim=-1) @ q
output cs, m, h, z, t
""" % {"E": E, "H": H, "D": D}


# the fused kernel: the explicit pattern (no weights written) and scaled_dot_product_attention
# per head: causal, a bool mask broadcast over the heads, GQA
FUSED = """
ragged j1 : B
input x : f32[B, j1, %(E)d]
input w_qkv : f32[%(E3)d, %(E)d]
input b_qkv : f32[%(E3)d]
input w_o : f32[%(E)d, %(E)d]
input slopes : f32[%(H)d, 1, 1]
q, k, v = linear(x, w_qkv, b_qkv).split(%(E)d, dim=-1)
q = q.view(B, j1, %(H)d, %(D)d).transpose(1, 2)
k = k.view(B, j1, %(H)d, %(D)d).transpose(1, 2)
v = v.view(B, j1, %(H)d, %(D)d).transpose(1, 2)
f = softmax(5.0 * tanh((q @ k.transpose(-2, -1) * %(scale)r + slopes) / 5.0), dim=-1) @ v
c = scaled_dot_product_attention(q, k, v, is_causal=True)
pos = positions(j1)
keep = (pos.unsqueeze(2) - pos.unsqueeze(1) < 3).unsqueeze(1)
m = scaled_dot_product_attention(q, k, v, attn_mask=keep, scale=0.5)
kv = k.narrow(1, 0, 2)
g = scaled_dot_product_attention(q, kv, v.narrow(1, 2, 2), enable_gqa=True)
yf = linear(f.transpose(1, 2).flatten(2), w_o)
output yf, c, m, g
""" % {"E": E, "E3": 3 * E, "H": H, "D": D, "scale": 1 / np.sqrt(D)}


def sdpa(q, k, v, mask=None, scale=None):
    """PyTorch's F.scaled_dot_product_attention on one item: q [H, L, E], k, v [Hkv, L, .]; mask
    [L, L] bool (True: takes part); a fully masked row gives 0."""
    H_, L = q.shape[0], q.shape[1]
    rep = H_ // k.shape[0]
    k, v = np.repeat(k, rep, axis=0), np.repeat(v, rep, axis=0)
    s = q @ k.transpose(0, 2, 1) * (1 / np.sqrt(q.shape[-1]) if scale is None else scale)
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    if L == 0:
        return q[..., :v.shape[-1]] * 0
    mx = s.max(-1, keepdims=True)
    e = np.where(np.isfinite(mx), np.exp(s - np.where(np.isfinite(mx), mx, 0)), 0)
    den = e.sum(-1, keepdims=True)
    return np.where(den > 0, e / np.where(den > 0, den, 1), 0) @ v


def ref_fused(x, off, w_qkv, b_qkv, w_o, slopes):
    out = {k: [] for k in ("yf", "c", "m", "g")}
    for b in range(len(off) - 1):
        xb = x[off[b]:off[b + 1]]
        L = len(xb)
        qkv = xb @ w_qkv.T + b_qkv
        q, k, v = (qkv[:, i * E:(i + 1) * E].reshape(L, H, D).transpose(1, 0, 2) for i in range(3))
        s = 5.0 * np.tanh((q @ k.transpose(0, 2, 1) / np.sqrt(D) + slopes) / 5.0)
        f = softmax(s, -1) @ v
        out["yf"].append(f.transpose(1, 0, 2).reshape(L, E) @ w_o.T)
        i, j = np.arange(L)[:, None], np.arange(L)[None, :]
        out["c"].append(sdpa(q, k, v, j <= i).transpose(1, 0, 2))
        out["m"].append(sdpa(q, k, v, (i - j) < 3, 0.5).transpose(1, 0, 2))
        out["g"].append(sdpa(q, k[:2], v[2:4]).transpose(1, 0, 2))
    return {k: np.concatenate(v) for k, v in out.items()}


def softmax(a, axis):
    if a.size == 0:
        return a
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def ref_mha(x, off, w_qkv, b_qkv, w_o, slopes):
    ys, ps, os_ = [], [], []
    for b in range(len(off) - 1):
        xb = x[off[b]:off[b + 1]]
        L = len(xb)
        qkv = xb @ w_qkv.T + b_qkv
        q, k, v = (qkv[:, i * E:(i + 1) * E].reshape(L, H, D).transpose(1, 0, 2) for i in range(3))
        s = q @ k.transpose(0, 2, 1) / np.sqrt(D) + slopes
        s = 5.0 * np.tanh(s / 5.0)
        p = softmax(s, -1)
        o = p @ v                                             # [H, L, D]
        ys.append(o.transpose(1, 0, 2).reshape(L, E) @ w_o.T)
        ps.append(p.transpose(1, 2, 0).reshape(L * L, H))     # stored: len^2 rows of [H]
        os_.append(o.transpose(1, 0, 2))                      # stored: rows of [H, D]
    return {"y": np.concatenate(ys), "p": np.concatenate(ps), "o": np.concatenate(os_)}


def ref_misc(x, off):
    out = {k: [] for k in ("cs", "m", "h", "z", "t")}
    for b in range(len(off) - 1):
        xb = x[off[b]:off[b + 1]]
        L = len(xb)
        q = xb.reshape(L, H, D).transpose(1, 0, 2)            # [H, L, D]
        qn = q / np.sqrt((q * q).mean(-1, keepdims=True) + 1e-6)
        s = qn @ q.transpose(0, 2, 1)
        cs = softmax(s, 1)
        out["cs"].append(cs.transpose(1, 2, 0).reshape(L * L, H))
        out["m"].append(s.sum(-1, keepdims=True).transpose(1, 0, 2))
        out["h"].append((q[:, :, 2:6] * 2.0 + 1.0).transpose(1, 0, 2))
        out["z"].append(cs.transpose(0, 2, 1) @ q)
        out["z"][-1] = out["z"][-1].transpose(1, 0, 2)
        out["t"].append((softmax(s.transpose(0, 2, 1), -1) @ q).transpose(1, 0, 2))  # not fusable: a view of the product
    return {k: np.concatenate(v) for k, v in out.items()}


def run(prog, data, out, target):
    path = os.path.join(data, "prog.rj")
    with open(path, "w") as f:
        f.write(prog)
    r = subprocess.run([ragjit, "run", path, "--data", data, "--out", out, "--target", target],
                       capture_output=True, text=True)
    if r.returncode != 0:
        if target == "opencl" and "no OpenCL" in r.stderr:
            print("opencl: no device here, skipped (%s)" % r.stderr.strip())
            return False
        sys.exit("ragjit run (%s) failed (%d): %s" % (target, r.returncode, r.stderr))
    return True


def close(what, got, want, tol=3e-5):
    if got.shape != want.shape:
        sys.exit("%s: shape %s, expected %s" % (what, got.shape, want.shape))
    err = np.abs(got.astype(np.float64) - want).max() if got.size else 0.0
    scale = max(1.0, np.abs(want).max() if want.size else 1.0)
    if not np.isfinite(got).all() or err > tol * scale:
        sys.exit("%s: max error %g (scale %g)" % (what, err, scale))
    print("%-22s %-14s ok (max error %.2g)" % (what, str(got.shape), err))


# the explicit pattern per head is found and fused: one attention kernel, no per-head products
EXPLICIT = """
ragged j1 : B
input x : f32[B, j1, %(E)d]
q = x.view(B, j1, %(H)d, %(D)d).transpose(1, 2)
y = softmax(q @ q.transpose(-2, -1) * 0.5, dim=-1) @ q
output y
""" % {"E": E, "H": H, "D": D}
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "explicit.rj")
    with open(path, "w") as f:
        f.write(EXPLICIT)
    # on the CPU both products by the BLAS (attention_lib: ragjit's own sgemm where none is
    # installed, RAGJIT_BLAS=loops leaves the dot products to attention_rows); on a SIMT
    # target the FlashAttention-2 form (key tiles in shared memory) lowers it
    cpu_tmpl = "attention_rows" if os.environ.get("RAGJIT_BLAS") == "loops" else "attention_lib"
    for t, tmpl in (("cpu", cpu_tmpl), ("opencl", "attention_flash_simt")):
        r = subprocess.run([ragjit, "emit", path, "--stage", "loops", "--target", t], capture_output=True, text=True)
        if r.returncode != 0 or "template: " + tmpl not in r.stdout or "head_matmul" in r.stdout:
            sys.exit("the explicit attention per head is not fused on %s:\n%s%s" % (t, r.stdout, r.stderr))
    print("explicit attention per head: fused on cpu and opencl")
    # refused by name at compile time (difftest's reproducers): a reduction over the heads or over
    # the query dim of the scores with keepdim=True
    for body in ("y = q - q.mean(1, keepdim=True)", "y = (q @ q.transpose(-2, -1)).sum(2, keepdim=True)"):
        with open(path, "w") as f:
            f.write("ragged j1 : B\ninput x : f32[B, j1, %d]\nq = x.view(B, j1, %d, %d).transpose(1, 2)\n%s\n"
                    "output y\n" % (E, H, D, body))
        r = subprocess.run([ragjit, "run", path, "--random", "B=2,maxlen=3", "--out", os.path.join(tmp, "o")],
                           capture_output=True, text=True)
        if r.returncode != 1 or "from a jagged tensor per head: this version cannot compute it" not in r.stderr:
            sys.exit("%s: expected a refusal by name, got %d: %s" % (body, r.returncode, r.stderr))
    print("keepdim reductions over the heads and the query dim: refused by name")

rng = np.random.default_rng(11)
cases = [[3, 0, 7, 1, 12, 5, 1, 40], [0], [1, 1], [70, 2, 0, 33]]
with tempfile.TemporaryDirectory() as tmp:
    for ci, lens in enumerate(cases):
        off = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        x = rng.standard_normal((off[-1], E)).astype(np.float32)
        w_qkv = (rng.standard_normal((3 * E, E)) / np.sqrt(E)).astype(np.float32)
        b_qkv = rng.standard_normal(3 * E).astype(np.float32) * 0.1
        w_o = (rng.standard_normal((E, E)) / np.sqrt(E)).astype(np.float32)
        slopes = -rng.random((H, 1, 1)).astype(np.float32)
        data = os.path.join(tmp, "in%d" % ci)
        os.makedirs(data)
        for name, a in (("x", x), ("w_qkv", w_qkv), ("b_qkv", b_qkv), ("w_o", w_o), ("slopes", slopes), ("j1", off)):
            np.save(os.path.join(data, name + ".npy"), a)
        f64 = lambda a: a.astype(np.float64)
        refs = [(MHA, ref_mha(f64(x), off, f64(w_qkv), f64(b_qkv), f64(w_o), f64(slopes))),
                (MISC, ref_misc(f64(x), off)),
                (FUSED, ref_fused(f64(x), off, f64(w_qkv), f64(b_qkv), f64(w_o), f64(slopes)))]
        for pi, (prog, ref) in enumerate(refs):
            for t in targets:
                out = os.path.join(tmp, "out%d_%d_%s" % (ci, pi, t))
                if not run(prog, data, out, t):
                    continue
                for name, want in ref.items():
                    close("%s %s %s" % (lens if len(lens) < 5 else "case%d" % ci, t, name),
                          np.load(os.path.join(out, name + ".npy")), want)
print("heads: all ok")
