#!/usr/bin/env python3
"""cora_mha.py - the multi-head attention module of the CoRa paper, ragjit against PyTorch.

The module (CoRa, MLSys 2022, its MHA benchmark): hidden 512, 8 heads of 64, a QKV projection
with bias, attention without a scale, the head merge and an output projection with bias. Run
on batches of 32, 64 and 128 sentences whose lengths are drawn to match the published
statistics of four datasets (min / mean / max and p10 / p50 / p90):

  RACE     80 / 364 / 512   210 / 374 / 502
  SQuAD v2 39 / 192 / 384   119 / 177 / 289
  MNLI      9 /  43 / 128    21 /  41 /  69
  CoLA      6 /  13 /  37     8 /  12 /  19

Lengths are drawn from the piecewise-linear quantile function through those five points
(a fixed seed). Three contestants, same data, same thread count, one process:

  ragjit   the module as PyTorch code reads it (bench/cora_mha.rj): packed rows, no padding,
           scaled_dot_product_attention fused where this build has it
  padded   PyTorch padded to the batch's longest item, F.scaled_dot_product_attention with a
           key-padding mask (its CPU flash kernel where it applies)
  sorted   PyTorch sorted by length and split into micro-batches, each padded to its own
           longest item: the best of micro-batch sizes 2, 4, 8, 16, 32 (the baseline that
           tied CoRa itself in the paper)

Prints ms per batch (median of --reps after a warm-up), the ratios, and their geomean.
Needs PyTorch and NumPy (a measurement, not a test):

    RAGJIT_LIB=build/src/libragjit.so python bench/cora_mha.py [--threads 2] [--reps 5]
        [--sets race,squad,mnli,cola] [--batches 32,64,128] [--check]
"""
import argparse
import math
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

STATS = {  # min, p10, p50, p90, max (mean for the record)
    "race": (80, 210, 374, 502, 512, 364),
    "squad": (39, 119, 177, 289, 384, 192),
    "mnli": (9, 21, 41, 69, 128, 43),
    "cola": (6, 8, 12, 19, 37, 13),
}
E, H, D = 512, 8, 64


def lengths(name, n, rng):
    lo, p10, p50, p90, hi, _ = STATS[name]
    u = rng.random(n)
    return np.round(np.interp(u, [0, 0.1, 0.5, 0.9, 1.0], [lo, p10, p50, p90, hi])).astype(np.int64)


def median_ms(fn, reps):
    fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return 1e3 * statistics.median(ts)


def torch_module(torch, w):
    F = torch.nn.functional

    def mha(x, mask):  # x [b, L, E]; mask [b, 1, 1, L] bool (True: a real key) or None
        b, L, _ = x.shape
        qkv = F.linear(x, w["w_qkv"], w["b_qkv"])
        q, k, v = qkv.split(E, dim=-1)
        q, k, v = (t.view(b, L, H, D).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1.0)
        return F.linear(a.transpose(1, 2).reshape(b, L, E), w["w_o"], w["b_o"])
    return mha


def padded_batch(torch, xs):
    L = max(len(x) for x in xs)
    xp = torch.zeros(len(xs), L, E)
    mask = torch.zeros(len(xs), 1, 1, L, dtype=torch.bool)
    for i, x in enumerate(xs):
        xp[i, :len(x)] = x
        mask[i, :, :, :len(x)] = True
    return xp, mask


def print_load(when):
    """The load average beside the figures: above the processor count, only same-run ratios mean much."""
    l1, l5, l15 = os.getloadavg()
    print("load average %s: %.2f %.2f %.2f on %d processors%s" % (when, l1, l5, l15, os.cpu_count(),
          " (LOADED: read only the same-run ratios)" if l1 > os.cpu_count() + 0.5 else ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--sets", default="race,squad,mnli,cola")
    ap.add_argument("--batches", default="32,64,128")
    ap.add_argument("--check", action="store_true", help="compare ragjit's output with PyTorch's")
    ap.add_argument("--program", default=os.path.join(HERE, "cora_mha.rj"))
    a = ap.parse_args()
    import torch
    import ragjit
    torch.set_num_threads(a.threads)
    rng = np.random.default_rng(2022)
    w = {"w_qkv": rng.standard_normal((3 * E, E)) / math.sqrt(E), "b_qkv": rng.standard_normal(3 * E) * 0.1,
         "w_o": rng.standard_normal((E, E)) / math.sqrt(E), "b_o": rng.standard_normal(E) * 0.1}
    w = {k: v.astype(np.float32) for k, v in w.items()}
    tw = {k: torch.from_numpy(v) for k, v in w.items()}
    mha = torch_module(torch, tw)
    prog = ragjit.compile(open(a.program).read(), threads=a.threads, filename=a.program)
    print("CoRa MHA (hidden %d, %d heads of %d), %d threads, torch %s, median of %d" %
          (E, H, D, a.threads, torch.__version__, a.reps))
    print("%-6s %4s %7s | %9s %9s %9s %5s | %7s %7s" % ("set", "B", "tokens", "ragjit", "padded", "sorted", "mb",
                                                        "vs pad", "vs sort"))
    r_pad, r_best = [], []
    with torch.inference_mode():
        for name in a.sets.split(","):
            for B in (int(b) for b in a.batches.split(",")):
                lens = lengths(name, B, rng)
                off = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
                x = (rng.standard_normal((off[-1], E)) * 0.5).astype(np.float32)
                xt = torch.from_numpy(x)
                xs = [xt[off[i]:off[i + 1]] for i in range(B)]
                jx = ragjit.Jagged(x, off)
                run_rj = lambda: prog(x=jx, **w)
                t_rj = median_ms(run_rj, a.reps)
                xp, mask = padded_batch(torch, xs)
                t_pad = median_ms(lambda: mha(xp, mask), a.reps)
                order = np.argsort(lens, kind="stable")
                best, best_mb = math.inf, 0
                for mb in (2, 4, 8, 16, 32):
                    groups = [padded_batch(torch, [xs[i] for i in order[s:s + mb]]) for s in range(0, B, mb)]
                    t = median_ms(lambda: [mha(g, m) for g, m in groups], a.reps)
                    if t < best:
                        best, best_mb = t, mb
                if a.check:
                    y = run_rj()
                    yv = np.asarray(y.values if hasattr(y, "values") else y)
                    ref = mha(xp, mask)
                    refv = torch.cat([ref[i, :lens[i]] for i in range(B)]).numpy()
                    err = np.abs(yv - refv).max() / max(1.0, np.abs(refv).max())
                    if err > 1e-4:
                        sys.exit("%s B=%d: ragjit differs from PyTorch by %g (relative)" % (name, B, err))
                r_pad.append(t_pad / t_rj)
                r_best.append(best / t_rj)
                print("%-6s %4d %7d | %9.2f %9.2f %9.2f %5d | %6.2fx %6.2fx" %
                      (name, B, off[-1], t_rj, t_pad, best, best_mb, t_pad / t_rj, best / t_rj))
    g = lambda r: math.exp(sum(math.log(v) for v in r) / len(r))
    print("geomean: %.2fx over padded, %.2fx over sorted micro-batches (slowest cell %.2fx)" %
          (g(r_pad), g(r_best), min(r_best)))


if __name__ == "__main__":
    print_load("before")
    main()
    print_load("after")
