#!/usr/bin/python3
"""mha_block_numpy.py — a whole attention block on the CPU's GEMM paths, against NumPy float64.

The block as PyTorch code writes it (CoRa's MHA module with a scale and a residual): one QKV
projection with bias, the heads split as views, scaled_dot_product_attention, the head merge
a.transpose(1, 2).flatten(2) and the output projection with bias plus the residual. What it
pins down:

  - the output projection reads the attention's result in place (the head merge is the same
    bytes as [B, j1, H·D]): the loops dump must show its GEMM taking A from the attention's
    buffer and no prologue kernel (gemm_lib.c: x_source);
  - the attention runs both products by a GEMM (attention_lib; on a CPU with a BLAS, its
    products by ragjit's own sgemm, runtime/cpu_gemm.c: run_attention), and its scores are
    seen as the product times 1/sqrt(D), whose weights the runtime computes itself where the
    CPU has AVX-512 (util/head_softmax.c) — the results below check those weights;
  - the epilogues' streaming stores, the QKV rows' included (a run with RAGJIT_NT_BYTES=0);
  - the projections' chunks of rows (an even number of equal chunks, cpu_gemm.c:
    gemm_even_chunks) give the same bits on 1 and 2 threads: enough rows for several chunks
    on any L2, with empty items, items of length 1 and long ones; and shorter products ("mid",
    "one_long": one chunk on one thread) cut finer on 2 threads (cpu_gemm.c: rows_fine).

Each case runs with the default BLAS and with ragjit's own sgemm (RAGJIT_BLAS=off). The
reference is written here from PyTorch's documented semantics, item by item in float64.

  mha_block_numpy.py RAGJIT        exit 0 iff every case passed
"""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

C, H, D = 64, 4, 16  # hidden, heads, head size

PROGRAM = f"""ragged j1 : B
input x : f32[B, j1, {C}]
input w_qkv : f32[{3 * C}, {C}]
input b_qkv : f32[{3 * C}]
input w_o : f32[{C}, {C}]
input b_o : f32[{C}]
q, k, v = linear(x, w_qkv, b_qkv).split({C}, dim=-1)
q = q.view(B, j1, {H}, {D}).transpose(1, 2)
k = k.view(B, j1, {H}, {D}).transpose(1, 2)
v = v.view(B, j1, {H}, {D}).transpose(1, 2)
a = scaled_dot_product_attention(q, k, v)
out = x + linear(a.transpose(1, 2).flatten(2), w_o, b_o)
output out
"""

# rows: ~9,000 in the first pattern (more than two chunks of the QKV projection's rows on an
# L2 of up to 4 MiB), a few in the others
LENGTHS = {
    "many": [0, 1, 300, 7, 0, 260] + [140 + (37 * i) % 160 for i in range(40)] + [1, 0, 299],
    "short": [0, 1, 5, 0, 3, 1, 13, 0, 2, 9],
    # MNLI-like: short items by head_gemm (6-row blocks, 16-column vectors, 64-column blocks,
    # every head one unit) beside the first items of 128 keys by the BLAS
    "mid": [47, 65, 0, 127, 128, 16, 17, 6, 7, 100, 33, 64],
    "one_long": [3, 513, 2, 0, 5, 1],
}

# "stream": every store of the projections' epilogues non-temporal (the QKV rows the attention
# reads back and the output; cpu_gemm.c streams past RAGJIT_NT_BYTES)
RUNS = [("blas", {}), ("own-sgemm", {"RAGJIT_BLAS": "off"}), ("stream", {"RAGJIT_NT_BYTES": "0"})]


def reference(x, w, off):
    outs = []
    for b in range(len(off) - 1):
        xb = x[off[b]:off[b + 1]].astype(np.float64)
        n = len(xb)
        qkv = xb @ w["w_qkv"].astype(np.float64).T + w["b_qkv"]
        q, k, v = (qkv[:, i * C:(i + 1) * C].reshape(n, H, D).transpose(1, 0, 2) for i in range(3))
        s = q @ k.transpose(0, 2, 1) / np.sqrt(D)
        if n:
            s = s - s.max(axis=-1, keepdims=True)
        p = np.exp(s)
        p = p / np.maximum(p.sum(axis=-1, keepdims=True), 1e-300)
        a = (p @ v).transpose(1, 0, 2).reshape(n, C)
        outs.append(xb + a @ w["w_o"].astype(np.float64).T + w["b_o"])
    return np.concatenate(outs)


def check_plan(ragjit, prog, env):
    """None if the loops dump shows the paths this test is about, else what it shows instead."""
    r = subprocess.run([ragjit, "emit", prog, "--stage", "loops"], capture_output=True, text=True,
                       env=dict(os.environ, **env))
    if r.returncode:
        return "ragjit emit: " + r.stderr.strip()
    dump = r.stdout
    m = re.search(r"^buffer (\d+): temp \d+ \(a\)", dump, re.M)
    if not m:
        return "no temporary buffer for the attention's result a\n" + dump[:3000]
    if "template: attention_lib" not in dump:
        return "the attention is not attention_lib\n" + dump[:3000]
    if "F = the scores times 0.25:" not in dump:  # 1/sqrt(D): the runtime's own softmax may serve
        return "the attention's scores are not seen as the product times 1/sqrt(D)\n" + dump[:3000]
    if "prologue" in dump:
        return "a GEMM still copies its rows through a prologue kernel\n" + dump[:3000]
    if f"A the rows of buffer {m.group(1)};" not in dump:
        return f"the output projection does not read buffer {m.group(1)} (a) in place\n" + dump[:3000]
    return None


def main():
    ragjit = sys.argv[1]
    rng = np.random.default_rng(3536)
    failed = passed = 0
    w = {"w_qkv": rng.uniform(-1, 1, (3 * C, C)) / np.sqrt(C), "b_qkv": rng.uniform(-0.1, 0.1, 3 * C),
         "w_o": rng.uniform(-1, 1, (C, C)) / np.sqrt(C), "b_o": rng.uniform(-0.1, 0.1, C)}
    w = {k: a.astype(np.float32) for k, a in w.items()}
    with tempfile.TemporaryDirectory() as work:
        prog = os.path.join(work, "mha.rj")
        with open(prog, "w") as f:
            f.write(PROGRAM)
        for run_name, env in RUNS:
            verdict = check_plan(ragjit, prog, env)
            if verdict:
                print(f"FAIL plan {run_name}: {verdict}")
            failed += bool(verdict)
            passed += not verdict
        for pat, lens in LENGTHS.items():
            d = os.path.join(work, pat)
            os.makedirs(d)
            off = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
            x = rng.uniform(-1, 1, (int(off[-1]), C)).astype(np.float32)
            np.save(os.path.join(d, "x.npy"), x)
            np.save(os.path.join(d, "j1.npy"), off)
            for name, a in w.items():
                np.save(os.path.join(d, name + ".npy"), a)
            want = reference(x, w, off)
            for run_name, env in RUNS:
                got = {}
                for threads in (1, 2):
                    out = os.path.join(d, f"out-{run_name}-{threads}")
                    r = subprocess.run([ragjit, "run", prog, "--data", d, "--out", out, "--threads", str(threads)],
                                       capture_output=True, text=True, timeout=600, env=dict(os.environ, **env))
                    if r.returncode:
                        print(f"FAIL {pat} {run_name} {threads} threads: ragjit run: {r.stderr.strip()}")
                        failed += 1
                        continue
                    got[threads] = np.load(os.path.join(out, "out.npy"))
                    err = np.abs(got[threads].astype(np.float64) - want)
                    bad = err > 1e-4 + 2e-4 * np.abs(want)
                    if got[threads].shape != want.shape or bad.any():
                        print(f"FAIL {pat} {run_name} {threads} threads: shape {got[threads].shape} against "
                              f"{want.shape}, max |error| {err.max() if err.size else 0:g}")
                        failed += 1
                    else:
                        passed += 1
                if len(got) == 2 and not np.array_equal(got[1], got[2]):
                    print(f"FAIL {pat} {run_name}: 1 and 2 threads give different bits")
                    failed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
