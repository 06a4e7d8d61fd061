#!/usr/bin/python3
"""attention_numpy.py — fused attention against an independent NumPy float64 reference.

Each case is a program in the text format (the explicit softmax(f(q @ kᵀ)) @ v that the
compiler fuses, or scaled_dot_product_attention by name), run by `ragjit run` on the CPU and
on OpenCL (PoCL), on lengths with empty items, items of length 1 and one long item among short
ones. The reference is written here from PyTorch's documented semantics, item by item in
float64 — not from ragjit's interpreter: softmax written out makes a fully masked row NaN,
scaled_dot_product_attention makes it 0 (PyTorch's safe softmax). It also checks that the
fused kernel is what runs: `ragjit emit --stage loops` names the template (on the CPU
attention_lib with a GEMM, else attention_rows; on OpenCL attention_flash_simt, the
FlashAttention-2 form) and lays out no temporary (no [B, j1, j1] score block).

  attention_numpy.py RAGJIT        exit 0 iff every case passed (OpenCL skipped without a device)
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

HEAD = "ragged j1 : B\ninput q : f32[B, j1, {e}]\ninput k : f32[B, j1, {e}]\ninput v : f32[B, j1, {dv}]\n"

# name, body, E, Dv, extra inputs, reference f(q, k, v, extra) per item -> out
CASES = []


def case(name, body, e=16, dv=8, extra="", lens=None):
    def deco(ref):
        CASES.append((name, HEAD.format(e=e, dv=dv) + extra + body + "output out\n", e, dv, ref, lens))
        return ref
    return deco


def softmax_rows(s, safe):
    """softmax over the last axis (of [n, n] scores, or [H, n, n] per head)."""
    m = s.max(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", over="ignore"):
        p = np.exp(s - m)
        p = p / p.sum(axis=-1, keepdims=True)
    if safe:  # PyTorch's _safe_softmax: a row of -inf gives 0
        p[np.broadcast_to(np.isneginf(m), p.shape)] = 0.0
    return p


def causal(n):
    return np.tril(np.ones((n, n), dtype=bool))


@case("explicit", "s = q @ k.transpose(1, 2) / 8.0\np = softmax(s, dim=2)\nout = p @ v\n", e=64, dv=64)
def _(q, k, v, x, b):
    return softmax_rows(q @ k.T / 8.0, False) @ v


@case("explicit_causal_ninf",
      "s = q @ k.transpose(1, 2) * 0.25\npos = positions(j1)\n"
      "s2 = where(pos.unsqueeze(2) >= pos.unsqueeze(1), s, -inf)\nout = softmax(s2, dim=-1) @ v\n")
def _(q, k, v, x, b):
    s = np.where(causal(len(q)), q @ k.T * 0.25, -np.inf)
    return softmax_rows(s, False) @ v


@case("explicit_fully_masked_nan", "s = where(mb, q @ k.transpose(1, 2), -inf)\nout = softmax(s, dim=2) @ v\n",
      extra="input mb : bool[B, j1, j1]\n")
def _(q, k, v, x, b):
    return softmax_rows(np.where(x["mb"], q @ k.T, -np.inf), False) @ v


@case("softcap", "s = 30.0 * tanh(q @ k.transpose(1, 2) * 0.25 / 30.0)\nout = softmax(s, dim=2) @ v\n")
def _(q, k, v, x, b):
    return softmax_rows(30.0 * np.tanh(q @ k.T * 0.25 / 30.0), False) @ v


@case("alibi", "pos = positions(j1)\nbias = (pos.unsqueeze(1) - pos.unsqueeze(2)) * 0.5\n"
      "s = q @ k.transpose(1, 2) * 0.25 + where(pos.unsqueeze(1) <= pos.unsqueeze(2), bias, -inf)\n"
      "out = softmax(s, dim=2) @ v\n")
def _(q, k, v, x, b):
    n = len(q)
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    s = q @ k.T * 0.25 + np.where(j <= i, (j - i) * 0.5, -np.inf)
    return softmax_rows(s, False) @ v


@case("sdpa_default", "out = scaled_dot_product_attention(q, k, v)\n")
def _(q, k, v, x, b):
    return softmax_rows(q @ k.T / np.sqrt(q.shape[1]), True) @ v


@case("sdpa_causal", "out = scaled_dot_product_attention(q, k, v, is_causal=True)\n")
def _(q, k, v, x, b):
    s = np.where(causal(len(q)), q @ k.T / 4.0, -np.inf)
    return softmax_rows(s, True) @ v


@case("sdpa_bool_mask_scale", "out = scaled_dot_product_attention(q, k, v, attn_mask=mb, scale=0.3)\n",
      extra="input mb : bool[B, j1, j1]\n")
def _(q, k, v, x, b):
    return softmax_rows(np.where(x["mb"], q @ k.T * 0.3, -np.inf), True) @ v


@case("sdpa_float_mask", "out = scaled_dot_product_attention(q, k, v, attn_mask=mf)\n",
      extra="input mf : f32[B, j1, j1]\n")
def _(q, k, v, x, b):
    return softmax_rows(q @ k.T / 4.0 + x["mf"], True) @ v


@case("sdpa_key_mask", "keep = positions(j1).unsqueeze(1) < 3\n"
      "out = scaled_dot_product_attention(q, k, v, attn_mask=keep)\n")
def _(q, k, v, x, b):
    n = len(q)
    keep = np.broadcast_to(np.arange(n)[None, :] < 3, (n, n))
    return softmax_rows(np.where(keep, q @ k.T / 4.0, -np.inf), True) @ v


LENGTHS = {
    "empty_and_one": [0, 1, 5, 0, 3, 1, 0],
    "one_long": [3, 700, 2, 0, 5, 1],
    # over 2048 rows: the runtime's pieces exceed 64 rows, so on a SIMT target a block walks
    # several query tiles (the last one partial) of an item split into many blocks, each over
    # 40 key tiles
    "split_tiles": [2500, 0, 1, 700],
}


def write_data(d, lens, e, dv, text, rng):
    os.makedirs(d, exist_ok=True)
    off = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    rows, sq = int(off[-1]), int(sum(n * n for n in lens))
    x = {"q": rng.uniform(-2, 2, (rows, e)).astype(np.float32),
         "k": rng.uniform(-2, 2, (rows, e)).astype(np.float32),
         "v": rng.uniform(-2, 2, (rows, dv)).astype(np.float32)}
    if "input mb" in text:  # some rows entirely masked
        m = rng.uniform(0, 1, sq) < 0.6
        start = 0
        for n in lens:
            blk = m[start:start + n * n].reshape(n, n)
            if n > 1:
                blk[n // 2, :] = False
            start += n * n
        x["mb"] = m
    if "input mf" in text:
        x["mf"] = np.where(rng.uniform(0, 1, sq) < 0.2, -np.inf, rng.uniform(-1, 1, sq)).astype(np.float32)
    for name, a in x.items():
        np.save(os.path.join(d, name + ".npy"), a)
    np.save(os.path.join(d, "j1.npy"), off)
    return x, off


def reference(ref, x, off, lens):
    outs = []
    sq = 0
    for b, n in enumerate(lens):
        r0, r1 = off[b], off[b + 1]
        q, k, v = (x[c][r0:r1].astype(np.float64) for c in "qkv")
        extra = {name: a[sq:sq + n * n].reshape(n, n).astype(np.float64 if a.dtype != bool else bool)
                 for name, a in x.items() if name in ("mb", "mf")}
        sq += n * n
        outs.append(ref(q, k, v, extra, b) if n else np.zeros((0, v.shape[1])))
    return np.concatenate(outs)


def compare(got, want, atol=2e-5, rtol=2e-4):
    if got.shape != want.shape:
        return f"shape {got.shape}, want {want.shape}"
    nan_w, nan_g = np.isnan(want), np.isnan(got)
    if (nan_w != nan_g).any():
        i = np.argwhere(nan_w != nan_g)[0]
        return f"NaN mismatch at {tuple(i)}: got {got[tuple(i)]}, want {want[tuple(i)]}"
    ok = ~nan_w
    err = np.abs(got[ok] - want[ok])
    tol = atol + rtol * np.abs(want[ok])
    if (err > tol).any():
        i = np.argmax(err - tol)
        return f"max error {err[i]:.3g} (want {want[ok][i]:.6g}, got {got[ok][i]:.6g})"
    return None


def run_and_compare(ragjit, prog, d, run_name, target, env, check):
    """Runs prog on data d into d/out-RUN_NAME; None if check(out) passes, "" if skipped (no
    OpenCL device), else what failed."""
    out = os.path.join(d, "out-" + run_name)
    r = subprocess.run([ragjit, "run", prog, "--data", d, "--out", out, "--target", target],
                       capture_output=True, text=True, timeout=600, env=dict(os.environ, **env))
    if r.returncode and target == "opencl" and "device" in r.stderr.lower():
        return ""
    if r.returncode:
        return "ragjit run: " + r.stderr.strip()
    got = np.load(os.path.join(out, "out.npy"))
    if got.dtype.kind == "V" and got.dtype.itemsize == 2:  # bf16 (as ml_dtypes writes it): the top of an f32
        got = (got.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    return check(got.astype(np.float64))


def main():
    ragjit = sys.argv[1]
    rng = np.random.default_rng(35)
    failed = passed = skipped = 0
    with tempfile.TemporaryDirectory() as work:
        for name, text, e, dv, ref, _ in CASES:
            prog = os.path.join(work, name + ".rj")
            with open(prog, "w") as f:
                f.write(text)
            # on OpenCL (a SIMT target) the FlashAttention-2 form: key tiles in local memory
            for target, tmpl in (("cpu", "template: attention_"), ("opencl", "template: attention_flash_simt")):
                loops = subprocess.run([ragjit, "emit", prog, "--stage", "loops", "--target", target],
                                       capture_output=True, text=True)
                if loops.returncode or tmpl not in loops.stdout or ": temp" in loops.stdout:
                    print(f"FAIL {name} {target}: the loops dump does not show one fused attention kernel "
                          f"without temporaries\n{loops.stdout[:2000]}{loops.stderr}")
                    failed += 1
            for pat, lens in LENGTHS.items():
                d = os.path.join(work, f"{name}-{pat}")
                x, off = write_data(d, lens, e, dv, text, rng)
                want = reference(ref, x, off, lens)
                for target in ("cpu", "opencl"):
                    verdict = run_and_compare(ragjit, prog, d, target, target, {}, lambda got: compare(got, want))
                    if verdict:
                        print(f"FAIL {name} {pat} {target}: {verdict}")
                    passed += verdict is None
                    skipped += verdict == ""
                    failed += bool(verdict)
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
