#!/usr/bin/env python3
"""Example programs run on data written by NumPy, and their outputs load back in NumPy with
the right shapes and values (computed here with NumPy). Exit 77 (skipped) without NumPy."""
import math
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("numpy is not importable by %s: skipping" % sys.executable)
    sys.exit(77)

ragjit, src = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(7)
lens = [3, 0, 5, 1, 7]
off = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)


def run(prog, data, out, *extra):
    r = subprocess.run([ragjit, "run", os.path.join(src, "examples", prog), "--data", data,
                        "--out", out, *extra], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("ragjit run %s failed (%d): %s" % (prog, r.returncode, r.stderr))


def close(name, got, want, tol=2e-5):
    if got.shape != want.shape:
        sys.exit("%s: shape %s, expected %s" % (name, got.shape, want.shape))
    with np.errstate(invalid="ignore"):  # -inf - -inf in empty items' max
        err = np.nanmax(np.abs(got.astype(np.float64) - want)) if got.size else 0.0
    if not (np.isnan(got) == np.isnan(want)).all() or err > tol * max(1.0, np.nanmax(np.abs(want)) if want.size else 1):
        sys.exit("%s: max error %g" % (name, err))
    print("%-10s %-14s ok (max error %.2g)" % (name, str(got.shape), err))


with tempfile.TemporaryDirectory() as tmp:
    data, out = os.path.join(tmp, "in"), os.path.join(tmp, "out")
    os.makedirs(data)
    # reductions.rj: x f32[B, j1, 32]
    x = rng.standard_normal((off[-1], 32)).astype(np.float32)
    np.save(os.path.join(data, "x.npy"), x)
    np.save(os.path.join(data, "j1.npy"), off)
    run("reductions.rj", data, out)
    items = [x[off[b]:off[b + 1]].astype(np.float64) for b in range(len(lens))]
    o = np.load(os.path.join(out, "j1.npy"))
    assert o.dtype == np.int64 and (o == off).all(), o
    close("total", np.load(os.path.join(out, "total.npy")), np.stack([i.sum(0) for i in items]))
    with np.errstate(invalid="ignore"):
        close("avg", np.load(os.path.join(out, "avg.npy")),
              np.stack([i.mean(0) if len(i) else np.full(32, np.nan) for i in items]))
    close("peak", np.load(os.path.join(out, "peak.npy")),
          np.stack([i.max(0) if len(i) else np.full(32, -np.inf) for i in items]))
    close("rownorm", np.load(os.path.join(out, "rownorm.npy")), np.sqrt((x.astype(np.float64) ** 2).sum(1)))
    # pad_unpad.rj: the padded output comes back as a dense (B, max_len, 16) array
    data2, out2 = os.path.join(tmp, "in2"), os.path.join(tmp, "out2")
    os.makedirs(data2)
    x2 = rng.standard_normal((off[-1], 16)).astype(np.float32)
    np.save(os.path.join(data2, "x.npy"), x2)
    np.save(os.path.join(data2, "j1.npy"), off)
    run("pad_unpad.rj", data2, out2)
    L = max(lens)
    padded = np.zeros((len(lens), L, 16))
    for b in range(len(lens)):
        padded[b, :lens[b]] = 3.0 * x2[off[b]:off[b + 1]]
    close("padded", np.load(os.path.join(out2, "padded.npy")), padded)
    close("y", np.load(os.path.join(out2, "y.npy")), np.maximum(x2.astype(np.float64) * 2 - 1, 0))
    s = np.stack([x2[off[b]:off[b + 1]].astype(np.float64).sum(0) + (L - lens[b]) * 0.5 for b in range(len(lens))])
    close("s", np.load(os.path.join(out2, "s.npy")), s)
    # embedding_bag.rj: table f32[V, 64], ids i64[B, j1] -> sum and mean of each item's rows
    data3, out3 = os.path.join(tmp, "in3"), os.path.join(tmp, "out3")
    os.makedirs(data3)
    V = 50
    table = rng.standard_normal((V, 64)).astype(np.float32)
    ids = rng.integers(0, V, off[-1]).astype(np.int64)
    np.save(os.path.join(data3, "table.npy"), table)
    np.save(os.path.join(data3, "ids.npy"), ids)
    np.save(os.path.join(data3, "j1.npy"), off)
    run("embedding_bag.rj", data3, out3)
    rows = [table[ids[off[b]:off[b + 1]]].astype(np.float64) for b in range(len(lens))]
    close("bag", np.load(os.path.join(out3, "bag.npy")), np.stack([r.sum(0) for r in rows]))
    with np.errstate(invalid="ignore"):
        close("bag avg", np.load(os.path.join(out3, "avg.npy")),
              np.stack([r.mean(0) if len(r) else np.full(64, np.nan) for r in rows]))
    # ... and an id out of range fails the run, naming the input, the item and the row
    bad = ids.copy()
    bad[off[2] + 1] = V
    np.save(os.path.join(data3, "ids.npy"), bad)
    r = subprocess.run([ragjit, "run", os.path.join(src, "examples", "embedding_bag.rj"), "--data", data3,
                        "--out", out3], capture_output=True, text=True)
    want = "embedding: the index at [2, 1] of input ids is %d, out of range [0, %d)" % (V, V)
    if r.returncode != 2 or want not in r.stderr:  # bad input
        sys.exit("an id out of range: exit %d, %r (expected %r)" % (r.returncode, r.stderr, want))
    print("%-10s %-14s ok (%s)" % ("bad id", "", want))
    # nll.rj: log-likelihood of a target class per row under log_softmax over the classes
    data4, out4 = os.path.join(tmp, "in4"), os.path.join(tmp, "out4")
    os.makedirs(data4)
    C = 11
    logits = rng.standard_normal((off[-1], C)).astype(np.float32) * 3
    target = rng.integers(0, C, off[-1]).astype(np.int64)
    np.save(os.path.join(data4, "logits.npy"), logits)
    np.save(os.path.join(data4, "target.npy"), target)
    np.save(os.path.join(data4, "j1.npy"), off)
    run("nll.rj", data4, out4)
    lg = logits.astype(np.float64)
    m = lg.max(1, keepdims=True)
    logp = lg - m - np.log(np.exp(lg - m).sum(1, keepdims=True))
    picked = np.take_along_axis(logp, target[:, None], axis=1)[:, 0]
    close("picked", np.load(os.path.join(out4, "picked.npy")), picked)
    with np.errstate(invalid="ignore"):
        close("loss", np.load(os.path.join(out4, "loss.npy")),
              np.array([-picked[off[b]:off[b + 1]].mean() if lens[b] else np.nan for b in range(len(lens))]))
print("numpy interop ok")
