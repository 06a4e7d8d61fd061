#!/usr/bin/python3
"""attention_heads_numpy.py — fused attention per head against an independent NumPy float64 reference.

Programs as PyTorch code writes them: q, k and v are heads split from one projection's rows
(x.narrow(-1, ...).view(B, j1, H, E).transpose(1, 2): views ragjit's kernels read in place),
and the attention is the explicit softmax(f(q @ kᵀ)) @ v that the compiler fuses or
scaled_dot_product_attention by name: soft-capping with tanh, ALiBi-like per-head slopes, a
causal mask, a boolean mask with fully masked rows (NaN written out, 0 for SDPA), GQA (Hkv = H/2),
f32, f64, and f16 and bf16 (storage: q, k, v widened to f32, the scores and each op of f rounded
once to the format as PyTorch rounds each op's result, the weights kept in f32 as a fused
kernel keeps them, the output rounded once; the reference rounds at the same points). Each runs on lengths with empty items, items of length 1 and one long item among
short ones, on the CPU with the default BLAS, with ragjit's own sgemm (RAGJIT_BLAS=off) and
with no GEMM at all (RAGJIT_BLAS=loops), and on OpenCL (PoCL). The reference is written here
from PyTorch's documented semantics, item by item in float64, not from ragjit's interpreter.
It also checks the template each CPU run uses: both products by the GEMM (attention_lib)
where one serves the dtype, else attention_rows.

  attention_heads_numpy.py RAGJIT        exit 0 iff every case passed (OpenCL skipped without a device)
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attention_numpy import causal, compare, run_and_compare, softmax_rows  # noqa: E402  (the 3-D test's helpers)
from half_numpy import rnd, to_file_array  # noqa: E402  (the 16-bit formats' rounding and files)

H, HKV, E, DV = 4, 2, 16, 8

HEAD = """ragged j1 : B
input x : {t}[B, j1, {c}]
q = x.narrow(-1, 0, {qe}).view(B, j1, {h}, {e}).transpose(1, 2)
k = x.narrow(-1, {qe}, {ke}).view(B, j1, {hk}, {e}).transpose(1, 2)
v = x.narrow(-1, {kve}, {ve}).view(B, j1, {hk}, {dv}).transpose(1, 2)
"""

CASES = []


def case(name, body, hk=H, extra="", dtype="f32"):
    def deco(ref):
        head = HEAD.format(t=dtype, c=H * E + hk * (E + DV), qe=H * E, ke=hk * E, kve=H * E + hk * E, ve=hk * DV,
                           h=H, hk=hk, e=E, dv=DV)
        CASES.append((name, head + extra + body + "output out\n", hk, dtype, ref))
        return ref
    return deco


@case("softcap", "s = 30.0 * tanh(q @ k.transpose(-2, -1) * 0.25 / 30.0)\nout = softmax(s, dim=-1) @ v\n")
def _(q, k, v, x):
    return softmax_rows(30.0 * np.tanh(q @ k.transpose(0, 2, 1) * 0.25 / 30.0), False) @ v


@case("alibi_causal", "pos = positions(j1)\n"
      "bias = ((pos.unsqueeze(1) - pos.unsqueeze(2)) * 1.0).unsqueeze(1) * slopes\n"
      "s = q @ k.transpose(-2, -1) * 0.25 + bias\n"
      "s = where((pos.unsqueeze(2) >= pos.unsqueeze(1)).unsqueeze(1), s, -inf)\n"
      "out = softmax(s, dim=-1) @ v\n", extra="input slopes : f32[%d, 1, 1]\n" % H)
def _(q, k, v, x):
    n = q.shape[1]
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    s = q @ k.transpose(0, 2, 1) * 0.25 + (j - i)[None] * x["slopes"]
    return softmax_rows(np.where(causal(n)[None], s, -np.inf), False) @ v


@case("explicit_masked_nan", "s = where(mb.unsqueeze(1), q @ k.transpose(-2, -1), -inf)\n"
      "out = softmax(s, dim=-1) @ v\n", extra="input mb : bool[B, j1, j1]\n")
def _(q, k, v, x):
    return softmax_rows(np.where(x["mb"][None], q @ k.transpose(0, 2, 1), -np.inf), False) @ v


@case("sdpa_mask_safe", "out = scaled_dot_product_attention(q, k, v, attn_mask=mb.unsqueeze(1), scale=0.3)\n",
      extra="input mb : bool[B, j1, j1]\n")
def _(q, k, v, x):
    return softmax_rows(np.where(x["mb"][None], q @ k.transpose(0, 2, 1) * 0.3, -np.inf), True) @ v


@case("sdpa_causal_gqa", "out = scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)\n", hk=HKV)
def _(q, k, v, x):
    k, v = np.repeat(k, H // HKV, axis=0), np.repeat(v, H // HKV, axis=0)
    s = np.where(causal(q.shape[1])[None], q @ k.transpose(0, 2, 1) / np.sqrt(E), -np.inf)
    return softmax_rows(s, True) @ v


@case("sdpa_gqa_f64", "out = scaled_dot_product_attention(q, k, v, enable_gqa=True)\n", hk=HKV, dtype="f64")
def _(q, k, v, x):
    k, v = np.repeat(k, H // HKV, axis=0), np.repeat(v, H // HKV, axis=0)
    return softmax_rows(q @ k.transpose(0, 2, 1) / np.sqrt(E), True) @ v


@case("explicit_softcap_f64", "s = 5.0 * tanh(q @ k.transpose(-2, -1) / 5.0)\nout = softmax(s, dim=-1) @ v\n",
      dtype="f64")
def _(q, k, v, x):
    return softmax_rows(5.0 * np.tanh(q @ k.transpose(0, 2, 1) / 5.0), False) @ v


# 16-bit: the reference gets the inputs in the format and R, the rounding to it
@case("softcap_bf16", "s = 30.0 * tanh(q @ k.transpose(-2, -1) * 0.25 / 30.0)\nout = softmax(s, dim=-1) @ v\n",
      dtype="bf16")
def _(q, k, v, x, R=None):
    s = R(30.0 * R(np.tanh(R(R(R(q @ k.transpose(0, 2, 1)) * 0.25) / 30.0))))
    return softmax_rows(s, False) @ v


@case("sdpa_causal_gqa_f16", "out = scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)\n",
      hk=HKV, dtype="f16")
def _(q, k, v, x, R=None):
    k, v = np.repeat(k, H // HKV, axis=0), np.repeat(v, H // HKV, axis=0)
    s = np.where(causal(q.shape[1])[None], R(R(q @ k.transpose(0, 2, 1)) * 0.25), -np.inf)
    return softmax_rows(s, True) @ v


@case("sdpa_mask_safe_bf16", "out = scaled_dot_product_attention(q, k, v, attn_mask=mb.unsqueeze(1), scale=0.3)\n",
      extra="input mb : bool[B, j1, j1]\n", dtype="bf16")
def _(q, k, v, x, R=None):
    s = R(R(q @ k.transpose(0, 2, 1)) * np.float64(np.float32(0.3)))
    return softmax_rows(np.where(x["mb"][None], s, -np.inf), True) @ v


HALF = ("f16", "bf16")
# atol, rtol by dtype: 16-bit outputs within two units of their last place (2^-10 relative for
# f16, 2^-7 for bf16), as the scores' roundings may land on the other side of a tie
TOL = {"f32": (1e-4, 2e-4), "f64": (1e-12, 1e-10), "f16": (2.0 ** -12, 2.0 ** -9), "bf16": (2.0 ** -9, 2.0 ** -6)}

LENGTHS = {
    "empty_and_one": [0, 1, 5, 0, 3, 1, 0],
    "mid": [47, 65, 127, 128, 7, 100],  # across head_gemm's blocks and its 128-key limit
    "one_long": [3, 400, 2, 0, 5, 1],
}

# CPU runs: (name, environment, the template expected for f32 and for f64)
CPU_RUNS = [("cpu", {}, "attention_lib", "attention_lib"),
            ("cpu-own-sgemm", {"RAGJIT_BLAS": "off"}, "attention_lib", "attention_rows"),
            ("cpu-loops", {"RAGJIT_BLAS": "loops"}, "attention_rows", "attention_rows")]


def write_data(d, lens, hk, dtype, text, rng):
    os.makedirs(d, exist_ok=True)
    off = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    rows, sq = int(off[-1]), int(sum(n * n for n in lens))
    x = {"x": rng.uniform(-2, 2, (rows, H * E + hk * (E + DV))).astype(np.float64 if dtype == "f64" else np.float32)}
    if dtype in HALF:  # the values the format holds; written as its file
        x["x"] = rnd(x["x"], dtype)
    if "input mb" in text:  # random, and one row of each item entirely masked
        m = rng.uniform(0, 1, sq) < 0.6
        start = 0
        for n in lens:
            if n > 1:
                m[start:start + n * n].reshape(n, n)[n // 2, :] = False
            start += n * n
        x["mb"] = m
    if "input slopes" in text:
        x["slopes"] = -rng.uniform(0.1, 1, (H, 1, 1)).astype(np.float32)
    for name, a in x.items():
        np.save(os.path.join(d, name + ".npy"), to_file_array(a, dtype) if name == "x" and dtype in HALF else a)
    np.save(os.path.join(d, "j1.npy"), off)
    return x, off


def reference(ref, x, off, lens, hk, dtype):
    outs, sq = [], 0
    for b, n in enumerate(lens):
        xb = x["x"][off[b]:off[b + 1]].astype(np.float64)
        q = xb[:, :H * E].reshape(n, H, E).transpose(1, 0, 2)
        k = xb[:, H * E:H * E + hk * E].reshape(n, hk, E).transpose(1, 0, 2)
        v = xb[:, H * E + hk * E:].reshape(n, hk, DV).transpose(1, 0, 2)
        extra = {}
        if "mb" in x:
            extra["mb"] = x["mb"][sq:sq + n * n].reshape(n, n)
        if "slopes" in x:
            extra["slopes"] = x["slopes"].astype(np.float64)
        sq += n * n
        if dtype in HALF:
            o = ref(q, k, v, extra, R=lambda a: rnd(a, dtype)) if n else np.zeros((H, 0, DV))
            outs.append(rnd(o, dtype).transpose(1, 0, 2))
        else:
            outs.append(ref(q, k, v, extra).transpose(1, 0, 2) if n else np.zeros((0, H, DV)))
    return np.concatenate(outs)


def main():
    ragjit = sys.argv[1]
    rng = np.random.default_rng(3505)
    failed = passed = skipped = 0
    with tempfile.TemporaryDirectory() as work:
        for name, text, hk, dtype, ref in CASES:
            prog = os.path.join(work, name + ".rj")
            with open(prog, "w") as f:
                f.write(text)
            runs = [(t, env, f64 if dtype == "f64" else f32) for t, env, f32, f64 in CPU_RUNS]
            for run_name, env, tmpl in runs:
                loops = subprocess.run([ragjit, "emit", prog, "--stage", "loops"], capture_output=True, text=True,
                                       env=dict(os.environ, **env))
                if loops.returncode or "template: " + tmpl not in loops.stdout or ": temp" in loops.stdout:
                    print(f"FAIL {name} {run_name}: the loops dump does not show one {tmpl} kernel without "
                          f"temporaries\n{loops.stdout[:3000]}{loops.stderr}")
                    failed += 1
            for pat, lens in LENGTHS.items():
                d = os.path.join(work, f"{name}-{pat}")
                x, off = write_data(d, lens, hk, dtype, text, rng)
                want = reference(ref, x, off, lens, hk, dtype)
                for run_name, env, _ in runs + [("opencl", {}, None)]:
                    target = "opencl" if run_name == "opencl" else "cpu"
                    atol, rtol = TOL[dtype]
                    verdict = run_and_compare(ragjit, prog, d, run_name, target, env,
                                              lambda got: compare(got, want, atol, rtol))
                    if verdict:
                        print(f"FAIL {name} {pat} {run_name}: {verdict}")
                    passed += verdict is None
                    skipped += verdict == ""
                    failed += bool(verdict)
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
