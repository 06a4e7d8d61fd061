#!/usr/bin/python3
"""half_numpy.py — f16 and bf16 programs against an independent NumPy float64 reference.

ragjit's 16-bit semantics (docs/guide.md, "16-bit floats") are PyTorch's on the CPU: loads widen
to f32, each op computes in f32 and rounds its result once to the tensor's format (nearest even),
reductions, softmax statistics and norms accumulate in f32, a literal is an f32 value. The
reference here is written from that description, not from ragjit's C: every op in float64 on
the widened inputs, its result rounded to f32 and then to the 16-bit format (bf16's rounding
written with uint32 bit operations, f16's by NumPy's float16). Each program runs with `ragjit
run` on the CPU (also as compiled for a CPU without F16C and without AVX512-BF16), on OpenCL (PoCL; skipped without a
device), on CUDA (skipped without a GPU) and on the reference interpreter,
on lengths with empty items, items of length 1 and one long item; inputs hold the formats' edge
values (subnormals, the largest finite value, values that overflow to inf when stored, NaN, -0).
Data goes in as .npy: f16 as '<f2', bf16 as ml_dtypes writes it ('<V2' 2-byte items, read back
by NumPy as '|V2'), so the file conventions are tested too.

Matrix products shaped for the library GEMM (a linear layer with bias, x @ M, an inline x, a
weight's slice, per-item x xᵀ and p x) are checked apart (run_gemm), on the CPU with the BLAS
and with ragjit's own sgemm: within 2 ulp plus the bound of an f32 accumulation's error.

Exact ops (+, *, max, relu, pad, casts) must match bit for bit (NaN as NaN); ops through f32
maths or sums may differ by one unit in the last place of the 16-bit format where the f32
result lies within an f32 rounding of a tie.

  half_numpy.py RAGJIT [--measure]   exit 0 iff every case passed; --measure prints, per case,
                                     how many results differ from the reference and by how much
"""
import math
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

LENS = [3, 0, 1, 130, 0, 2, 17]
MEASURE = []  # filled with one line per case and target under --measure


# ---- the formats ------------------------------------------------------------------------------

def bf16_bits(x):
    """float64 -> f32 -> bf16 bits, nearest even; NaN stays a quiet NaN."""
    u = np.atleast_1d(np.asarray(x, dtype=np.float64)).astype(np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF
    nan = np.isnan(np.atleast_1d(np.asarray(x, dtype=np.float64)))
    r[nan] = ((u[nan] >> 16) | 0x40) & 0xFFFF
    return r.astype(np.uint16)


def bf16_value(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def rnd(x, fmt):
    """x rounded as a 16-bit result: to f32, then to the format; back as float64."""
    with np.errstate(over="ignore", invalid="ignore"):
        x32 = np.asarray(x, dtype=np.float64).astype(np.float32)
        if fmt == "f16":
            return x32.astype(np.float16).astype(np.float64)
    return bf16_value(bf16_bits(x32))


def to_file_array(x, fmt):
    if fmt == "f16":
        return np.asarray(x, dtype=np.float64).astype(np.float32).astype(np.float16)
    return bf16_bits(x).view("V2")


def from_file_array(a, fmt):
    if a.dtype == np.float16:
        assert fmt == "f16", a.dtype
        return a.astype(np.float64)
    assert fmt == "bf16" and a.dtype.kind == "V" and a.dtype.itemsize == 2, a.dtype
    return bf16_value(a.view(np.uint16))


def ulp(x, fmt):
    """The spacing of the format at |x| (its subnormal spacing below the normal range)."""
    mant, emin = (10, -14) if fmt == "f16" else (7, -126)
    e = np.floor(np.log2(np.maximum(np.abs(x), 2.0 ** emin)))
    return 2.0 ** (e - mant)


# ---- cases ------------------------------------------------------------------------------------

def edge_values(fmt, n, rng):
    """n values: random ones in [-4, 4), with the format's edges at the front."""
    big = 65504.0 if fmt == "f16" else float(bf16_value(np.array([0x7F7F], dtype=np.uint16))[0])
    sub = 2.0 ** -24 if fmt == "f16" else 2.0 ** -133
    edges = [big, -big, sub, -sub, 3 * sub, 0.0, -0.0, np.nan, np.inf, -np.inf, 1.0, -2.5]
    v = rng.uniform(-4, 4, n)
    k = min(n, len(edges))
    v[:k] = edges[:k]
    return rnd(v, fmt)


def softmax(x):
    if x.shape[0] == 0:
        return x
    m = x.max(axis=0, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=0, keepdims=True)


def layer_norm(x, eps=1e-5):
    if x.shape[0] == 0:
        return x
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps)


# name, program body (after the header), reference(x, w, fmt) -> per-item outputs, exact?, edges?
CASES = [
    ("chain", "h = relu(x * w + 0.5)\n",
     lambda x, w, f: rnd(np.maximum(rnd(rnd(x * w, f) + 0.5, f), 0), f), True, True),
    ("neg_scale", "h = -x * 2.0\n", lambda x, w, f: rnd(rnd(-x, f) * 2.0, f), True, True),
    # x * 2^k (k >= 0) of a bf16 value is exact and its rounding left out (lower/kit.c); x * 0.5
    # is not (subnormals lose their last bit), and the next * 2.0 is again
    ("scale_add", "h = x * 2.0 + 1.0\n", lambda x, w, f: rnd(rnd(x * 2.0, f) + 1.0, f), True, True),
    ("scale_half", "h = x * 0.5 * -4.0\n", lambda x, w, f: rnd(rnd(x * 0.5, f) * -4.0, f), True, True),
    # a choice on the sign of a rounded value: with AVX512-BF16 the store tests its bits
    ("where_pos", "h = where(x * w > 0.0, x * w, -x)\n",
     lambda x, w, f: np.where(rnd(x * w, f) > 0, rnd(x * w, f), rnd(-x, f)), True, True),
    ("literal_f32", "h = x * 0.1\n", lambda x, w, f: rnd(x * np.float64(np.float32(0.1)), f), True, True),
    ("maximum_div", "h = maximum(x, w) / 3.0\n",
     lambda x, w, f: rnd(np.where(np.isnan(x) | np.isnan(w), np.nan, np.maximum(x, w)) / np.float64(np.float32(3.0)), f),
     True, True),
    ("exp_tanh", "h = exp(x) + tanh(x)\n", lambda x, w, f: rnd(rnd(np.exp(x), f) + rnd(np.tanh(x), f), f), False, False),
    ("gelu", "h = gelu(x)\n",
     lambda x, w, f: rnd(0.5 * x * (1 + np.vectorize(math.erf, otypes=[np.float64])(x / np.sqrt(2))), f), False, False),
    ("sum_rows", "h = sum(x, dim=1)\n", lambda x, w, f: rnd(x.sum(axis=0), f), False, False),
    ("mean_rows", "h = mean(x, dim=1)\n", lambda x, w, f: rnd(x.mean(axis=0) if len(x) else np.full(x.shape[1:], np.nan), f), False, False),
    ("max_rows", "h = max(x, dim=1)\n", lambda x, w, f: x.max(axis=0) if len(x) else np.full(x.shape[1:], -np.inf), True, False),
    ("softmax_rows", "h = softmax(x, dim=1)\n", lambda x, w, f: rnd(softmax(x), f), False, False),
    ("softmax_cols", "h = softmax(x * w, dim=2)\n", lambda x, w, f: rnd(softmax(rnd(x * w, f).T).T, f), False, False),
    ("layer_norm", "h = layer_norm(x, {D})\n", lambda x, w, f: rnd(layer_norm(x), f), False, False),
    # weight and bias in f32 inside the op, the result rounded once (w read from its f32 copy
    # on a CPU: ir/widen16.c)
    ("layer_norm_wb", "h = layer_norm(x, {D}, w, w)\n", lambda x, w, f: rnd(layer_norm(x) * w + w, f), False, False),
    ("matmul", "h = x @ m\n", None, False, False),
    # PyTorch's addmm: product and bias summed in f32, rounded once (not the product first)
    # (n is m transposed: the weight an input, which the CPU widens once and gives to the GEMM)
    ("linear_bias", "h = linear(x, n, w.narrow(0, 0, 8))\n", None, False, False),
    ("pad", "h = pad(x, value=0.1)\n", None, True, True),
    # fused attention: the scores are values of ops (rounded), the weights, sums and O are f32
    # and the result is rounded once (the guide)
    ("attention", "h = softmax(x @ x.transpose(1, 2) * 0.25, dim=-1) @ x\n", None, False, False),
    ("cast_i32", "h = cast(x * 4.0, \"i32\")\n", None, True, False),
]


def write_npy(path, a, descr=None):
    """np.save, or with the header's descr as given (ml_dtypes' bf16 files say '<V2')."""
    if descr is None:
        np.save(path, a)
        return
    with open(path, "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, {"descr": descr, "fortran_order": False, "shape": a.shape})
        fh.write(np.ascontiguousarray(a).tobytes())


def program(fmt, D):
    """Every case in one program (one compile per target): case i's body with its value named
    h<i>, reading x (edge values) or y (random values), rows of D."""
    text = ("ragged j1 : B\ninput x : {f}[B, j1, {D}]\ninput y : {f}[B, j1, {D}]\ninput w : {f}[{D}]\n"
            "input m : {f}[{D}, 8]\ninput n : {f}[8, {D}]\n").format(f=fmt, D=D)
    for i, (name, body, ref, exact, edges) in enumerate(CASES):
        body = re.sub(r"\bh\b", "h%d" % i, body).replace("{D}", str(D))
        text += body if edges else re.sub(r"\bx\b", "y", body)
    return text + "output " + ", ".join("h%d" % i for i in range(len(CASES))) + "\n"


def check_case(i, fmt, target, got, inputs, failures):
    name, body, ref, exact, edges = CASES[i]
    x, y, w, m, off = inputs
    x = x if edges else y
    D = x.shape[1]
    if name == "cast_i32":
        assert got.dtype == np.int32, got.dtype
        with np.errstate(invalid="ignore"):
            want = np.trunc(rnd(x * 4.0, fmt))
        want = np.where(np.isnan(want), 0, np.clip(want, -2**31, 2**31 - 1)).astype(np.int64)
        if not np.array_equal(got.astype(np.int64), want):
            failures.append("%s/%s/%s: casts differ" % (name, fmt, target))
            return "fail"
        return "ok"
    gotv = from_file_array(got, fmt)
    wants = []
    for b in range(len(LENS)):
        xb = x[off[b]:off[b + 1]]
        if name == "matmul":
            wants.append(rnd(xb @ m, fmt))
        elif name == "attention":
            sc = rnd(rnd(xb @ xb.T, fmt) * np.float64(np.float32(0.25)), fmt)
            p = np.exp(sc - sc.max(axis=-1, keepdims=True)) if len(xb) else sc
            wants.append(rnd((p / p.sum(axis=-1, keepdims=True)) @ xb, fmt))
        elif name == "linear_bias":
            wants.append(rnd(xb @ m + w[:8], fmt))
        elif name == "pad":
            p = np.full((max(LENS), D), np.ravel(rnd(0.1, fmt))[0])
            p[:len(xb)] = xb
            wants.append(p[None])
        else:
            with np.errstate(all="ignore"):
                wants.append(np.asarray(ref(xb, w, fmt)))
    want = np.concatenate([wv.reshape((-1,) + wv.shape[-1:]) if wv.ndim > 1 else wv[None] for wv in wants])
    gotv = gotv.reshape(want.shape)
    same = (gotv == want) & (np.signbit(gotv) == np.signbit(want)) | (np.isnan(gotv) & np.isnan(want))
    if MEASURE:
        fin = np.isfinite(want) & np.isfinite(gotv)
        with np.errstate(invalid="ignore"):
            ulps = np.abs(gotv - want)[fin] / ulp(want[fin], fmt)
        MEASURE.append("%-13s %-5s %-11s %7d elements, %6.3f%% not the reference's rounding, at most %.0f ulp" %
                       (name, fmt, target, same.size, 100.0 * (~same).sum() / max(same.size, 1), ulps.max() if ulps.size else 0))
    if name == "attention" and target == "reference":  # unfused: scores and weights rounded
        with np.errstate(invalid="ignore"):
            same |= np.abs(gotv - want) <= 8 * ulp(want, fmt) + 2 * ulp(np.abs(want).max(), fmt)
    if name in ("linear_bias", "attention") and (~same).sum() > max(1, same.size // 100):
        # a sum in f32 lands on the other side of a rounding tie only now and then; a rounding
        # of the product before the bias moves a good part of the elements
        failures.append("%s/%s/%s: %d of %d elements are not the reference's rounding" %
                        (name, fmt, target, int((~same).sum()), same.size))
        return "fail"
    if not exact:
        with np.errstate(invalid="ignore"):
            same |= np.abs(gotv - want) <= ulp(want, fmt)
    if not same.all():
        k = int(np.argmin(same.reshape(-1)))
        failures.append("%s/%s/%s: %d of %d elements differ, first at %d: %r, reference %r" %
                        (name, fmt, target, int((~same).sum()), same.size, k, gotv.reshape(-1)[k], want.reshape(-1)[k]))
        return "fail"
    return "ok"


def run_format(ragjit, fmt, d, rng, failures, counts):
    # bf16 rows of 48: 32 lanes a step on AVX-512, so stores narrow two registers at once
    # (vcvtne2ps2bf16) and a masked tail step follows
    D = 48 if fmt == "bf16" else 16
    rows = sum(LENS)
    x = edge_values(fmt, rows * D, rng).reshape(rows, D)
    y = rnd(rng.uniform(-3, 3, (rows, D)), fmt)
    w = rnd(rng.uniform(-2, 2, D), fmt)
    m = rnd(rng.uniform(-1, 1, (D, 8)), fmt)
    off = np.concatenate([[0], np.cumsum(LENS)]).astype(np.int64)
    prog = os.path.join(d, fmt + ".rj")
    with open(prog, "w") as fh:
        fh.write(program(fmt, D))
    data = os.path.join(d, "data-" + fmt)
    os.makedirs(data, exist_ok=True)
    # bf16: x and y through NumPy's own '|V2' writer, w as ml_dtypes writes it ('<V2'): both read
    for name, a in (("x", x), ("y", y), ("m", m), ("n", np.ascontiguousarray(m.T))):
        write_npy(os.path.join(data, name + ".npy"), to_file_array(a, fmt))
    write_npy(os.path.join(data, "w.npy"), to_file_array(w, fmt), "<V2" if fmt == "bf16" else None)
    np.save(os.path.join(data, "j1.npy"), off)
    # linear's 16-bit weight is widened once, written, and read by the product (the GEMM's path),
    # except where bf16 products take their operands as they are (AMX tiles, a BLAS's sbgemm):
    # then the product reads n itself and nothing widens it
    r = subprocess.run([ragjit, "emit", prog, "--stage", "fused"], capture_output=True, text=True)
    loops = subprocess.run([ragjit, "emit", prog, "--stage", "loops"], capture_output=True, text=True).stdout
    direct = fmt == "bf16" and "by the BLAS's sbgemm" in loops
    # a 16-bit vector every row reads (w) is widened once a call into an f32 copy (ir/widen16.c)
    if "local thread f32 w_f32[" not in loops:
        failures.append("%s: w is not read from an f32 copy in the CPU's loops" % fmt)
    if re.search(r"local thread f32 [xy]_f32\[", loops):  # ragged: its size is not a constant
        failures.append("%s: the ragged x or y was given an f32 copy" % fmt)
    widened = re.search(r'= cast\(n, dtype="f32"\)  \(written', r.stdout)
    if direct == bool(widened):
        failures.append("%s: linear's weight n is %s into a buffer of its own:\n%s"
                        % (fmt, "widened" if widened else "not widened", r.stdout + r.stderr))
    # cpu-nof16c: the CPU's code for a machine without F16C (integer f16 conversions);
    # cpu-nobf16: without AVX512-BF16 (integer bf16 rounding; on a CPU with it, plain "cpu"
    # narrows with vcvtne2ps2bf16); cpu-nof16c-scalar: without F16C and without the vectoriser
    # (on an AVX-512 CPU the maths library once asked for vscalefps there, which LLVM, having
    # dropped AVX-512 with F16C, could not select: the process ended)
    for target in ("cpu", "cpu-nof16c", "cpu-nof16c-scalar", "cpu-nobf16", "reference", "opencl", "cuda"):
        out = os.path.join(d, "out-%s-%s" % (fmt, target))
        env = dict(os.environ, RAGJIT_LLVM_NO_F16C="1") if target.startswith("cpu-nof16c") else None
        env = dict(env, RAGJIT_LLVM_VECTOR="0") if target == "cpu-nof16c-scalar" else env
        env = dict(os.environ, RAGJIT_LLVM_NO_BF16="1") if target == "cpu-nobf16" else env
        r = subprocess.run([ragjit, "run", prog, "--data", data, "--out", out, "--target", target.split("-")[0]],
                           capture_output=True, text=True, env=env)
        if r.returncode:
            if target in ("opencl", "cuda") and "device" in r.stderr.lower():
                counts["skip"] += len(CASES)
                continue
            failures.append("%s/%s: ragjit run failed: %s" % (fmt, target, r.stderr.strip()))
            counts["fail"] += len(CASES)
            continue
        for i in range(len(CASES)):
            got = np.load(os.path.join(out, "h%d.npy" % i))
            counts[check_case(i, fmt, target, got, (x, y, w, m, off), failures)] += 1


# ---- matrix products by the GEMM (lower/gemm_lib.c: 16-bit operands widened for sgemm) ---------

GEMM_K, GEMM_N = 64, 40
GEMM = """ragged j1 : B
input x : {f}[B, j1, 64]
input W : {f}[48, 64]
input bias : {f}[48]
input M : {f}[64, 40]
input s : {f}[64]
g0 = relu(linear(x, W, bias))
g1 = x @ M
g2 = relu(x * s + 0.5) @ M
g3 = linear(x, W.narrow(0, 8, 24))
g4 = x @ x.transpose(1, 2)
g5 = (g4 * 0.125) @ x
output g0, g1, g2, g3, g4, g5
"""


def gemm_refs(x, W, bias, M, s, off, f):
    """Per output, the float64 reference rounded as ragjit rounds (each op's result once) and
    the bound of an f32 accumulation's error (K * 2^-24 * sum |a||b|) per element."""
    out = {k: ([], []) for k in ("g0", "g1", "g2", "g3", "g4", "g5")}
    eps = 2.0 ** -24

    def add(k, want, bound):
        out[k][0].append(want.reshape(-1))
        out[k][1].append(bound.reshape(-1))

    for b in range(len(off) - 1):
        xb = x[off[b]:off[b + 1]]
        K = xb.shape[1]
        # linear's bias meets the product in f32, one rounding (PyTorch's addmm; the guide)
        add("g0", np.maximum(rnd(xb @ W.T + bias, f), 0), K * eps * (np.abs(xb) @ np.abs(W.T)))
        add("g1", rnd(xb @ M, f), K * eps * (np.abs(xb) @ np.abs(M)))
        a = np.maximum(rnd(rnd(xb * s, f) + 0.5, f), 0)
        add("g2", rnd(a @ M, f), K * eps * (np.abs(a) @ np.abs(M)))
        w3 = W[8:32]
        add("g3", rnd(xb @ w3.T, f), K * eps * (np.abs(xb) @ np.abs(w3.T)))
        p = rnd(xb @ xb.T, f)
        add("g4", p, K * eps * (np.abs(xb) @ np.abs(xb.T)))
        p8 = rnd(p * 0.125, f)
        add("g5", rnd(p8 @ xb, f), max(len(xb), 1) * eps * (np.abs(p8) @ np.abs(xb)))
    return {k: (np.concatenate(w), np.concatenate(e)) for k, (w, e) in out.items()}


def run_gemm(ragjit, fmt, d, rng, failures, counts):
    """The GEMM-shaped products of GEMM on the CPU (the BLAS, ragjit's own sgemm) and the
    interpreter: every one through the library GEMM (the loops dump says so), each stored value
    within 2 ulp of the reference plus the f32 accumulation's error bound (the order of the
    sums differs from NumPy's)."""
    lens = [3, 0, 1, 530, 0, 2, 17, 40]
    off = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    rows = int(off[-1])
    x = rnd(rng.uniform(-2, 2, (rows, 64)), fmt)
    W = rnd(rng.uniform(-1, 1, (48, 64)), fmt)
    bias = rnd(rng.uniform(-1, 1, 48), fmt)
    M = rnd(rng.uniform(-1, 1, (64, 40)), fmt)
    s = rnd(rng.uniform(-1, 1, 64), fmt)
    prog = os.path.join(d, "gemm-" + fmt + ".rj")
    with open(prog, "w") as fh:
        fh.write(GEMM.format(f=fmt))
    data = os.path.join(d, "gemm-data-" + fmt)
    os.makedirs(data, exist_ok=True)
    for name, a in (("x", x), ("W", W), ("bias", bias), ("M", M), ("s", s)):
        write_npy(os.path.join(data, name + ".npy"), to_file_array(a, fmt))
    np.save(os.path.join(data, "j1.npy"), off)
    refs = gemm_refs(x, W, bias, M, s, off, fmt)
    # cpu: the host's BLAS, bf16 by AMX tiles where the CPU has them (util/amx.c), else by
    # AVX512-BF16 where it has that (util/bf16dot.c); cpu-widened: the BLAS's sgemm on widened
    # operands; cpu-own-sgemm: ragjit's own sgemm, widened; cpu-own-amx: ragjit's own sgemm and
    # own sbgemm (AMX, or AVX512-BF16); cpu-own-dot: AVX512-BF16 even where AMX serves
    own = {"RAGJIT_AMX": "0", "RAGJIT_AVX512BF16": "0"}
    runs = [("cpu", {}), ("cpu-widened", own), ("cpu-own-sgemm", dict(own, RAGJIT_BLAS="off")),
            ("cpu-own-amx", {"RAGJIT_BLAS": "off"}), ("cpu-own-dot", {"RAGJIT_BLAS": "off", "RAGJIT_AMX": "0"}),
            ("reference", {}), ("cuda", {})]  # cuda: ragjit's device product kernels (skipped without a GPU)
    if os.environ.get("RAGJIT_TEST_SBGEMM"):  # a stand-in BLAS with sbgemm (tests/fake_sbgemm.c)
        runs.append(("cpu-sbgemm", {"RAGJIT_BLAS": os.environ["RAGJIT_TEST_SBGEMM"]}))
    for target, env in runs:
        env = dict(os.environ, **env)
        if target not in ("reference", "cuda"):
            r = subprocess.run([ragjit, "emit", prog, "--stage", "loops"], capture_output=True, text=True, env=env)
            n = r.stdout.count("template: gemm_lib")
            how = "by the BLAS's sbgemm" if target == "cpu-sbgemm" and fmt == "bf16" else "widened to f32"
            if target in ("cpu", "cpu-own-amx", "cpu-own-dot") and fmt == "bf16" and "by the BLAS's sbgemm" in r.stdout:
                how = "by the BLAS's sbgemm"  # the host's BLAS has one, or the CPU has AMX or AVX512-BF16
            if r.returncode or n != 6 or how not in r.stdout:
                failures.append("gemm/%s/%s: %d of 6 products by the library GEMM, not all %s: %s" %
                                (fmt, target, n, how, r.stderr.strip()))
        out = os.path.join(d, "gemm-out-%s-%s" % (fmt, target))
        r = subprocess.run([ragjit, "run", prog, "--data", data, "--out", out, "--target", target.split("-")[0]],
                           capture_output=True, text=True, env=env)
        if r.returncode and target == "cuda" and "device" in r.stderr.lower():
            counts["skip"] += len(refs)
            continue
        if r.returncode:
            failures.append("gemm/%s/%s: ragjit run failed: %s" % (fmt, target, r.stderr.strip()))
            counts["fail"] += len(refs)
            continue
        for name, (want, bound) in refs.items():
            got = from_file_array(np.load(os.path.join(out, name + ".npy")), fmt).reshape(-1)
            tol = 2 * ulp(want, fmt) + bound
            bad = ~(np.abs(got - want) <= tol) if got.shape == want.shape else np.ones(1, bool)
            if MEASURE and got.shape == want.shape:
                MEASURE.append("gemm %-8s %-5s %-13s %7d elements, %6.3f%% not the reference's rounding, at most %.0f ulp"
                               % (name, fmt, target, got.size, 100.0 * (got != want).mean(),
                                  (np.abs(got - want) / ulp(want, fmt)).max()))
            if bad.any():
                k = int(np.argmax(bad))
                failures.append("gemm %s/%s/%s: %d of %d elements differ, first at %d: %r, reference %r" %
                                (name, fmt, target, int(bad.sum()), bad.size, k,
                                 got[k] if got.shape == want.shape else got.shape, want[k]))
            counts["fail" if bad.any() else "ok"] += 1


# ---- f32 bit patterns to bf16 (every NaN kind, subnormals, ties, overflow) -------------------

BITS = """ragged j1 : B
input a : f32[B, j1, 48]
input h : bf16[B, j1, 48]
c0 = a.cast("bf16")
c1 = relu(a.cast("bf16"))
c2 = a.cast("bf16") * 3.0
c3 = h * 0.5 * 3.0
output c0, c1, c2, c3
"""


def run_bits(ragjit, d, rng, failures, counts):
    """f32 inputs of any bits, rounded to bf16 as stored (c0: AVX512-BF16's conversion where
    the CPU has it), under relu (c1: the sign tested on the bits) and inside a chain (c2: the
    integer rounding, then * 3.0; c3: bf16 inputs of the same bits' top halves, rounded inside
    a chain where the lanes are in even/odd order), each against bf16_bits of the f32 value, bit
    for bit: NaNs
    quiet with their sign and payload's top bits, subnormals kept."""
    special = [0x00000001, 0x80000001, 0x007FFFFF, 0x807FFFFF, 0x00008000, 0x00018000, 0x007F8000,
               0x007FC000, 0x7F800001, 0xFF800001, 0x7FBFFFFF, 0xFFBFFFFF, 0x7FC00000, 0xFFC00001,
               0x7FFFFFFF, 0xFFFFFFFF, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F7F8000, 0x7F7F7FFF, 0, 0x80000000,
               0x7F800000, 0xFF800000, 0x3F808000, 0x3F818000]
    n = sum(LENS) * 48
    u = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    u[:len(special)] = special
    k = min(1000, n - 100)  # subnormals and the smallest normals, either sign
    u[100:100 + k] = (rng.integers(0, 1 << 24, k, dtype=np.uint64) | (rng.integers(0, 2, k, dtype=np.uint64) << 31)).astype(np.uint32)
    f = u.view(np.float32)
    prog, data = os.path.join(d, "bits.rj"), os.path.join(d, "data-bits")
    os.makedirs(data, exist_ok=True)
    with open(prog, "w") as fh:
        fh.write(BITS)
    np.save(os.path.join(data, "a.npy"), f.reshape(-1, 48))
    hb = (u >> 16).astype(np.uint16)
    write_npy(os.path.join(data, "h.npy"), hb.reshape(-1, 48).view("V2"), "<V2")
    np.save(os.path.join(data, "j1.npy"), np.concatenate([[0], np.cumsum(LENS)]).astype(np.int64))
    with np.errstate(invalid="ignore", over="ignore"):  # signalling NaNs become quiet ones
        h = bf16_bits(f.astype(np.float64))
        v = bf16_value(h)
        relu = np.where(v < 0, 0.0, v)
        hv = bf16_value(hb)
        want = {"c0": h, "c1": bf16_bits(relu), "c2": bf16_bits(v * 3.0),
                "c3": bf16_bits(bf16_value(bf16_bits(hv * 0.5)) * 3.0)}
    for target in ("cpu", "cpu-nobf16", "reference"):
        env = dict(os.environ, RAGJIT_LLVM_NO_BF16="1") if target == "cpu-nobf16" else None
        out = os.path.join(d, "out-bits-" + target)
        r = subprocess.run([ragjit, "run", prog, "--data", data, "--out", out, "--target", target.split("-")[0]],
                           capture_output=True, text=True, env=env)
        if r.returncode:
            failures.append("bits/%s: ragjit run failed: %s" % (target, r.stderr.strip()))
            counts["fail"] += len(want)
            continue
        for name, w in want.items():
            got = np.load(os.path.join(out, name + ".npy")).view(np.uint16).reshape(-1)
            bad = np.nonzero(got != w)[0]
            if len(bad):
                i = bad[0]
                failures.append("bits %s/%s: %d of %d differ, first f32 0x%08X: got 0x%04X, want 0x%04X"
                                % (name, target, len(bad), n, u[i], got[i], w[i]))
            counts["fail" if len(bad) else "ok"] += 1


def lanes_program(fmt, widths):
    """Per width D: an elementwise chain, reductions across the lanes (exact max, sum, softmax)
    and f32 operands (a product with an f32 output; a loop of 16-bit loads with an f32 load or an
    f32 store among them, which the CPU shuffles into the 16-bit lanes' order), each its own
    output, rows of D."""
    text = "ragged j1 : B\n"
    for D in widths:
        text += "input x%d : %s[B, j1, %d]\ninput w%d : %s[%d]\ninput c%d : f32[%d]\n" % (D, fmt, D, D, fmt, D, D, D)
        text += ("a{D} = relu(x{D} * w{D} + 0.5)\ns{D} = sum(x{D}, dim=2)\nmx{D} = max(x{D}, dim=2)\n"
                 "m{D} = x{D} * c{D}\nsm{D} = softmax(x{D} * w{D}, dim=2)\n"
                 "mb{D} = cast(x{D} * w{D} + c{D}, \"{f}\")\nmf{D} = x{D} * w{D} + cast(x{D}, \"f32\")\n").format(D=D, f=fmt)
    outs = ["%s%d" % (o, D) for D in widths for o in ("a", "s", "mx", "m", "sm", "mb", "mf")]
    return text + "output " + ", ".join(outs) + "\n"


def run_lanes(ragjit, fmt, d, rng, failures, counts):
    """Rows of every width 1..33 (a step is 32 lanes of bf16 on AVX-512, 16 or 32 of f16), so
    that each tail length is met, in loops whose lanes the CPU may keep in even/odd order
    (half.c): a lane order or tail mask wrong shows as values in the wrong place."""
    widths = list(range(1, 34))
    off = np.concatenate([[0], np.cumsum(LENS)]).astype(np.int64)
    rows = int(off[-1])
    data = os.path.join(d, "data-lanes-" + fmt)
    os.makedirs(data, exist_ok=True)
    np.save(os.path.join(data, "j1.npy"), off)
    inputs = {}
    for D in widths:
        x = rnd(rng.uniform(-3, 3, (rows, D)), fmt)
        w = rnd(rng.uniform(-2, 2, D), fmt)
        c = rng.uniform(-2, 2, D).astype(np.float32).astype(np.float64)
        inputs[D] = (x, w, c)
        write_npy(os.path.join(data, "x%d.npy" % D), to_file_array(x, fmt))
        write_npy(os.path.join(data, "w%d.npy" % D), to_file_array(w, fmt))
        np.save(os.path.join(data, "c%d.npy" % D), c.astype(np.float32))
    prog = os.path.join(d, "lanes-%s.rj" % fmt)
    with open(prog, "w") as fh:
        fh.write(lanes_program(fmt, widths))
    for target in ("cpu", "cpu-nobf16", "reference"):
        env = dict(os.environ, RAGJIT_LLVM_NO_BF16="1") if target == "cpu-nobf16" else None
        out = os.path.join(d, "out-lanes-%s-%s" % (fmt, target))
        r = subprocess.run([ragjit, "run", prog, "--data", data, "--out", out, "--target", target.split("-")[0]],
                           capture_output=True, text=True, env=env)
        if r.returncode:
            failures.append("lanes %s/%s: ragjit run failed: %s" % (fmt, target, r.stderr.strip()))
            counts["fail"] += 1
            continue
        for D in widths:
            x, w, c = inputs[D]
            with np.errstate(all="ignore"):
                xw = rnd(x * w, fmt)
                e = np.exp(xw - xw.max(axis=1, keepdims=True))
                want = {"a": (rnd(np.maximum(rnd(xw + 0.5, fmt), 0), fmt), True),
                        "s": (rnd(x.sum(axis=1), fmt), False), "mx": (x.max(axis=1), True),
                        "m": ((x * c).astype(np.float32).astype(np.float64), True),
                        "sm": (rnd(e / e.sum(axis=1, keepdims=True), fmt), False),
                        "mb": (rnd(xw + c, fmt), True), "mf": ((xw + x).astype(np.float32).astype(np.float64), True)}
            for o, (wv, exact) in want.items():
                got = np.load(os.path.join(out, "%s%d.npy" % (o, D)))
                gotv = got.astype(np.float64) if o in ("m", "mf") else from_file_array(got, fmt)
                gotv = gotv.reshape(wv.shape)
                same = gotv == wv
                if not exact:
                    same |= np.abs(gotv - wv) <= ulp(wv, fmt)
                if not same.all():
                    k = int(np.argmin(same.reshape(-1)))
                    failures.append("lanes %s%d/%s/%s: %d of %d differ, first at %d: %r, reference %r" %
                                    (o, D, fmt, target, int((~same).sum()), same.size, k, gotv.reshape(-1)[k], wv.reshape(-1)[k]))
                counts["ok" if same.all() else "fail"] += 1


def promotion(ragjit, d, failures):
    """bf16 + f16 is f32; a 16-bit tensor with f32 is f32; mean keeps bf16 (emit --stage graph)."""
    prog = os.path.join(d, "prom.rj")
    with open(prog, "w") as fh:
        fh.write("ragged j1 : B\ninput a : bf16[B, j1, 4]\ninput b : f16[B, j1, 4]\ninput c : f32[4]\n"
                 "s = a + b\nt = a * c\nu = mean(a, dim=1)\nv = a * 2\noutput s, t, u, v\n")
    r = subprocess.run([ragjit, "emit", prog, "--stage", "graph"], capture_output=True, text=True)
    text = r.stdout
    for name, want in (("s", "f32[B, j1, 4]"), ("t", "f32[B, j1, 4]"), ("u", "bf16[B, 4]"), ("v", "bf16[B, j1, 4]")):
        if not any(line.startswith(name + " = ") and line.rstrip().endswith("# " + want) for line in text.splitlines()):
            failures.append("promotion: %s should be %s:\n%s%s" % (name, want, text, r.stderr))


def stacked_weight(ragjit, fmt, d, failures, counts):
    """linear with a bias over a layer's slice of a stacked 16-bit weight (w[1] of [3, N, K], as a
    model's layers are written) is a library product where operands are widened (f16 always, bf16
    without AMX or AVX512-BF16): the slice's cast is written once and the GEMM reads it. It was
    left to the JIT's loop template (the bf16 encoder ran 50x slower), a template the library's
    products never fall back to silently. Then checked against the interpreter."""
    prog = os.path.join(d, "stacked-%s.rj" % fmt)
    with open(prog, "w") as fh:
        fh.write("ragged j1 : B\ninput x : {f}[B, j1, 40]\ninput w : {f}[3, 24, 40]\ninput b : {f}[3, 24]\n"
                 "y = gelu(linear(x, w[1], b[1]))\noutput y\n".format(f=fmt))
    env = dict(os.environ, RAGJIT_AMX="0", RAGJIT_AVX512BF16="0")
    r = subprocess.run([ragjit, "emit", prog, "--stage", "loops"], capture_output=True, text=True, env=env)
    if r.returncode or "template: gemm_lib" not in r.stdout or "template: matmul" in r.stdout:
        failures.append("stacked/%s: linear over a slice of a stacked weight is not a library product:\n%s"
                        % (fmt, r.stdout + r.stderr))
        counts["fail"] += 1
        return
    r = subprocess.run([ragjit, "check", prog, "--random", "B=5,maxlen=40,seed=3"], capture_output=True, text=True,
                       env=env)
    if r.returncode:
        failures.append("stacked/%s: ragjit check failed:\n%s" % (fmt, r.stdout + r.stderr))
        counts["fail"] += 1
        return
    counts["ok"] += 1


def main():
    ragjit = sys.argv[1]
    if "--measure" in sys.argv:
        MEASURE.append("accuracy against NumPy float64 rounded per op (ulp of the reference's format):")
    failures = []
    rng = np.random.default_rng(38)
    counts = {"ok": 0, "fail": 0, "skip": 0}
    with tempfile.TemporaryDirectory() as d:
        promotion(ragjit, d, failures)
        run_bits(ragjit, d, rng, failures, counts)
        for fmt in ("bf16", "f16"):
            run_format(ragjit, fmt, d, rng, failures, counts)
            run_lanes(ragjit, fmt, d, rng, failures, counts)
            run_gemm(ragjit, fmt, d, rng, failures, counts)
            stacked_weight(ragjit, fmt, d, failures, counts)
    for line in MEASURE:
        print(line)
    for f in failures:
        print("FAIL", f)
    print("half_numpy: %(ok)d ok, %(fail)d failed, %(skip)d skipped" % counts)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
