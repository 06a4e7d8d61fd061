#!/usr/bin/python3
"""attention_simt_numpy.py — the SIMT tiled attention's wide heads, mask bounds and 16-bit storage
against an independent NumPy float64 reference, on OpenCL (PoCL).

lower/attention_simt.c keeps a query row's q and O in registers; past 128 words a row is split
across 2 threads (head dims up to 128 in f32), a mask of positions (causal, sliding window,
masked_fill) bounds the key tiles a query tile walks (lower/keyrange.c), and f16/bf16 inputs are
widened into f32 tiles. Each case here checks that the loops dump shows that kernel, with the
note the template writes (the split, the mask's bounds), and runs it on lengths with empty
items, an item of length 1 and one item long enough for many query and key tiles (cross
attention: queries and keys of their own lengths, including queries without keys).

The reference is written here from PyTorch's semantics, item by item in float64. For 16-bit
storage it rounds where ragjit's graph stores a 16-bit value (the product, the scaled scores,
the output), as PyTorch on the CPU does, and the tolerance is a few units in the last place of
the format: the kernel sums q · k in f32 in another order, so a score may round the other way.

  attention_simt_numpy.py RAGJIT        exit 0 iff every case passed (skipped without OpenCL)
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attention_numpy import softmax_rows  # noqa: E402
from half_numpy import from_file_array, rnd, to_file_array, ulp  # noqa: E402

H = 2
CASES = []


def case(name, dtype, e, body, note, cross=False):
    def deco(ref):
        c = H * e
        head = "ragged j1 : B\n" + ("ragged j2 : B\n" if cross else "")
        kv = "j2" if cross else "j1"
        head += (f"input xq : {dtype}[B, j1, {c}]\ninput xk : {dtype}[B, {kv}, {c}]\ninput xv : {dtype}[B, {kv}, {c}]\n"
                 f"q = xq.view(B, j1, {H}, {e}).transpose(1, 2)\nk = xk.view(B, {kv}, {H}, {e}).transpose(1, 2)\n"
                 f"v = xv.view(B, {kv}, {H}, {e}).transpose(1, 2)\npi = positions(j1)\npj = positions({kv})\n")
        CASES.append((name, dtype, e, head + body + "output out\n", note, cross, ref))
        return ref
    return deco


def tril(nq, nk, window=None):
    i, j = np.meshgrid(np.arange(nq), np.arange(nk), indexing="ij")
    keep = j <= i
    return keep if window is None else keep & (i - j < window)


def scores(q, k, scale, fmt):
    """q kᵀ times scale, rounded where the graph stores a 16-bit value."""
    if fmt is None:
        return q @ k.transpose(0, 2, 1) * scale
    return rnd(rnd(q @ k.transpose(0, 2, 1), fmt) * scale, fmt)


@case("sdpa_causal_d128_f32", "f32", 128, "out = scaled_dot_product_attention(q, k, v, is_causal=True)\n",
      ["a row over 2 threads", "keys j <= i only"])
def _(q, k, v, fmt):
    return softmax_rows(np.where(tril(q.shape[1], k.shape[1])[None], scores(q, k, 128 ** -0.5, fmt), -np.inf),
                        True) @ v


@case("window_d64_f32", "f32", 64, "keep = (pi.unsqueeze(2) >= pj.unsqueeze(1)) & (pi.unsqueeze(2) - pj.unsqueeze(1) < 7)\n"
      "out = softmax(where(keep.unsqueeze(1), q @ k.transpose(-2, -1) * 0.125, -inf), dim=-1) @ v\n",
      ["keys j >= i - 6", "keys j <= i only"])
def _(q, k, v, fmt):
    keep = tril(q.shape[1], k.shape[1], 7)[None]
    return softmax_rows(np.where(keep, scores(q, k, 0.125, fmt), -np.inf), False) @ v


@case("cross_causal_d128_f32", "f32", 128, "out = scaled_dot_product_attention(q, k, v, is_causal=True)\n",
      ["a row over 2 threads", "keys j <= i only"], cross=True)
def _(q, k, v, fmt):
    return softmax_rows(np.where(tril(q.shape[1], k.shape[1])[None], scores(q, k, 128 ** -0.5, fmt), -np.inf),
                        True) @ v


@case("masked_fill_causal_d64_f16", "f16", 64,
      "s = (q @ k.transpose(-2, -1) * 0.125).masked_fill((pj.unsqueeze(1) > pi.unsqueeze(2)).unsqueeze(1), -inf)\n"
      "out = softmax(s, dim=-1) @ v\n", ["keys j <= i only"])
def _(q, k, v, fmt):
    return softmax_rows(np.where(tril(q.shape[1], k.shape[1])[None], scores(q, k, 0.125, fmt), -np.inf), False) @ v


@case("sdpa_causal_d128_bf16", "bf16", 128, "out = scaled_dot_product_attention(q, k, v, is_causal=True)\n",
      ["a row over 2 threads", "keys j <= i only"])
def _(q, k, v, fmt):
    return softmax_rows(np.where(tril(q.shape[1], k.shape[1])[None], scores(q, k, 128 ** -0.5, fmt), -np.inf),
                        True) @ v


LENS_Q = [0, 1, 150, 5, 0, 70]
LENS_K = [3, 1, 90, 0, 2, 200]  # cross attention: fewer and more keys than queries, none


def save(d, name, a, fmt):
    np.save(os.path.join(d, name + ".npy"), a.astype(np.float32) if fmt is None else to_file_array(a, fmt))


def main():
    ragjit = sys.argv[1]
    rng = np.random.default_rng(3552)
    failed = passed = skipped = 0
    with tempfile.TemporaryDirectory() as work:
        for name, dtype, e, text, notes, cross, ref in CASES:
            fmt = None if dtype == "f32" else dtype
            prog = os.path.join(work, name + ".rj")
            with open(prog, "w") as f:
                f.write(text)
            loops = subprocess.run([ragjit, "emit", prog, "--stage", "loops", "--target", "opencl"],
                                   capture_output=True, text=True)
            want_lines = ["template: attention_flash_simt"] + notes
            if loops.returncode or any(w not in loops.stdout for w in want_lines):
                print(f"FAIL {name}: the loops dump lacks one of {want_lines}\n{loops.stdout[:1500]}{loops.stderr}")
                failed += 1
                continue
            d = os.path.join(work, name)
            os.makedirs(d)
            lq, lk = LENS_Q, LENS_K if cross else LENS_Q
            offq = np.concatenate([[0], np.cumsum(lq)]).astype(np.int64)
            offk = np.concatenate([[0], np.cumsum(lk)]).astype(np.int64)
            x = {"xq": rng.uniform(-1, 1, (offq[-1], H * e)), "xk": rng.uniform(-1, 1, (offk[-1], H * e)),
                 "xv": rng.uniform(-1, 1, (offk[-1], H * e))}
            if fmt:  # the values the 16-bit files hold
                x = {n: rnd(a, fmt) for n, a in x.items()}
            else:
                x = {n: a.astype(np.float32).astype(np.float64) for n, a in x.items()}
            for n, a in x.items():
                save(d, n, a, fmt)
            np.save(os.path.join(d, "j1.npy"), offq)
            if cross:
                np.save(os.path.join(d, "j2.npy"), offk)
            outs = []
            for b in range(len(lq)):
                q = x["xq"][offq[b]:offq[b + 1]].reshape(lq[b], H, e).transpose(1, 0, 2)
                k = x["xk"][offk[b]:offk[b + 1]].reshape(lk[b], H, e).transpose(1, 0, 2)
                v = x["xv"][offk[b]:offk[b + 1]].reshape(lk[b], H, e).transpose(1, 0, 2)
                o = ref(q, k, v, fmt) if lq[b] and lk[b] else np.zeros((H, lq[b], e))
                outs.append(o.transpose(1, 0, 2).reshape(lq[b], H * e))
            want = np.concatenate(outs)
            if fmt:
                want = rnd(want, fmt)
            out = os.path.join(d, "out")
            r = subprocess.run([ragjit, "run", prog, "--data", d, "--out", out, "--target", "opencl"],
                               capture_output=True, text=True, timeout=900)
            if r.returncode and "device" in r.stderr.lower():
                skipped += 1
                continue
            if r.returncode:
                print(f"FAIL {name}: ragjit run: {r.stderr.strip()}")
                failed += 1
                continue
            got = np.load(os.path.join(out, "out.npy"))
            got = from_file_array(got, fmt).reshape(want.shape) if fmt else got.astype(np.float64).reshape(want.shape)
            tol = 2e-5 + 1e-4 * np.abs(want) if fmt is None else 4 * ulp(want, fmt) + 4 * ulp(1.0 / 64, fmt)
            err = np.abs(got - want)
            bad = ~(err <= tol)
            if bad.any():
                i = np.argmax(np.where(np.isnan(err), np.inf, err - tol))
                print(f"FAIL {name}: {bad.sum()} of {bad.size} elements off, e.g. {got.flat[i]!r} for {want.flat[i]!r}")
                failed += 1
            else:
                print(f"ok {name}: max error {err.max():.3g}" + (f" ({(err / ulp(want, fmt)).max():.2f} ulp)" if fmt else ""))
                passed += 1
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
