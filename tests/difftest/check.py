"""check.py — runs one case on ragjit and judges every output against the reference.

A case is (program, data, target, threads). `ragjit run` must exit 0 within the time limit
and write every output; each output must have the reference's shape and dtype; and each
element must be accepted:

- integers and bools exactly (equal to the float64 reference, or to the float32 one: a float
  computed in f32 may fall on the other side of a comparison or a truncation; in a program
  that casts f32 to an integer, within C ulps of f32 of the reference: a large f32 value
  cast to an integer is only as exact as the float);
- NaN where the reference has NaN, an infinity where it has the same infinity (again either
  reference: an f32 intermediate may overflow where float64 does not);
- otherwise |got - ref64| <= C * |ref32 - ref64| + ULPS * eps * |ref64| + ROW_ULPS * eps *
  max|ref64 over the row| + ATOL, where ref32
  is the same reference computed in float32. The first term is the result's own
  conditioning: rounding the inputs and every step to f32 moves it that much, so a
  compensated or reordered f32 computation may land anywhere within a small multiple of it
  (C = 16 covers the guide's bound on sums, "block length + 2 ulps of the sum of
  magnitudes", against NumPy's pairwise f32 sums). The second covers the guide's few-ulp
  functions (exp, tanh, erf: 2.5 ulp) chained a few times; the third, 4 ulps of the largest
  value of the element's row, what cancellation inside a row (layer_norm's x - mean) leaves
  on its small values; signed zeros are equal.

A program with 16-bit values (half.py) is judged against references that round every 16-bit
node to its format (ref64 and ref32 both), with its coarsest format's ulps in place of f32's
and no more than one of them: C * |ref32 - ref64| + ULPS16 * eps * |ref64| + ROW_ULPS16 * eps *
max|ref64 over the row| (ULPS16 = ROW_ULPS16 = 1). ragjit computes in f32 and rounds at the same
points, so it lands on the reference's rounding but where a sum in another order crosses a
rounding tie; an extra rounding or a lost one (linear's bias added to a rounded product) moves
far more elements than that. A store that overflows to infinity is accepted within an ulp of
the format's largest value. An explicit attention in 16-bit (`softmax(...) @ v`) may run fused,
and the fused kernel keeps the softmax's weights in f32 (the guide), so its output may instead
match a reference that leaves the weights of some of the attentions unrounded (one may run
fused and the next not: references' alternatives), with the same tolerance. On a GPU-shaped
target (OpenCL) an attention whose mask bounds the key tiles does not read the keys its rows
cannot see (the guide's one difference), so an inf or NaN in such a key's v row leaves them
finite where the reference's 0 * inf is NaN: such an output may match the reference whose
weights of 0 add 0 (another alternative; the CPU must match the first).

Both references round every op's value to its dtype alike, so |ref32 - ref64| does not see how
those roundings move a result that amplifies them (exp of scores near 20, then a cancelling sum:
an attention whose output is 1/50 of its terms' magnitudes). An f32 or f64 element that fails
is judged once more with the spread of ref64 over PERTURB runs whose f32 and f64 inputs are
moved as its conditioning (the same C times it): rounding the inputs to their format moves the
result that much, so a computation in another order may too. A wrong result is many times that
spread; a well-conditioned one gets nothing from it. The inputs move to other values of their
format, 1 or 2 ulps either way at random (MOVES), and the spread is scaled to half an ulp: a
move of half an ulp is rounded to even, half the time back, where the reference reads an input
as f32 again (mean, cast), and moves of one size with random signs cancel where two inputs
dominate (difftest seed 87291: a row divided by its mean, six values whose sum is 1/860 of
their magnitudes; the spread was 0.002 where ragjit's order of summation moved the result by
0.054, and is 0.085 now). For an f64 program ref32 is no measure where f32's errors happen to
cancel (seed 89811: a quotient by a cancelling dot product of six terms, the f32 reference 42
f32 ulps off, ragjit 950 f64 ulps off, 2e-13). In the same runs every f32 and f64 op's value is
moved by as many ulps of its format: a sum or product of many terms rounds in another order on
each target, and an op after it that amplifies (cos of a dot product of 346 terms, seed 120303)
moves by more than the inputs alone move it. A sum's value (evaluate.SUMS: sum, mean and the
products) moves by ulps of the sum of its terms' magnitudes rather than of its own: summed in
another order it moves that much, and a sum that cancels to exactly 0 in both references is no
exception (seed 400005: a layer_norm's row divided by its own sum, 0 in NumPy's order and
1e-16 in ragjit's). An element that these moves turn from a number into an infinity or NaN, or
the other way, or whose tolerance then spans 0 while ragjit's value is not finite, is
undetermined by its inputs (a quotient by that sum): any value is accepted there.

A 16-bit program's element that fails is judged once more the same way, with its 16-bit ops'
values moved by 2 or 4 ulps of f32 before they are rounded to their format (the spread, where
larger than |ref32 - ref64|): ragjit computes each in f32, a few f32 ulps from the exact value,
so a value that close to a rounding tie may round the other way, which both references miss
where they agree. Seed 151125: an f16 layer_norm's element 1.7 f32 ulps below a tie (ragjit
rounded it up, one f16 ulp), divided into, normalised again and multiplied into a dot product of
seven terms that cancel to 1/48 of their magnitudes: 8 f16 ulps at the output.

For an f64 output ref32 overstates the conditioning by 2^29 unless the program computes
in f32 somewhere; the term is scaled by eps(f64)/eps(f32) when no value of the program is f32.
Where some value is f32, every float output gets f32's eps and atol: an f32 result cast to f64
carries f32's few-ulp errors into the f64 output.
"""
import itertools
import os
import shutil
import subprocess

import numpy as np

from . import data as datamod
from . import half
from .evaluate import attention_weights, evaluate
from .model import FLOATS
from .ref import Env

C, ULPS, ROW_ULPS = 16.0, 64.0, 4.0
PERTURB, MOVES = 8, np.array([-2.0, -1.0, 1.0, 2.0])
HALF_OP_ULPS = 2.0  # a 16-bit op's f32 value moves by twice MOVES: layer_norm's, softmax's errors
ULPS16, ROW_ULPS16 = 1.0, 1.0
EPS = {"f32": 2.0**-23, "f64": 2.0**-52, "f16": 2.0**-10, "bf16": 2.0**-7}
ATOL = {"f32": 1e-6, "f64": 1e-13, "f16": 2.0**-20, "bf16": 2.0**-20}
NP_OUT = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64, "bool": np.bool_}


class Failure(Exception):
    """kind: crash, timeout, refused, missing, shape, mismatch, threads."""

    def __init__(self, kind, msg, worst=None):
        super().__init__(msg)
        self.kind, self.msg, self.worst = kind, msg, worst


class Alternatives:
    """The reference pairs an output may match instead (references): each one evaluated when a
    judge first asks for it, and kept; most cases never need them."""

    def __init__(self, specs, make):
        self.specs, self.make, self.pairs = specs, make, {}

    def __bool__(self):
        return bool(self.specs)

    def __iter__(self):
        for spec in self.specs:
            if spec not in self.pairs:
                self.pairs[spec] = self.make(*spec)
            yield self.pairs[spec]


ATTENTION_SUBSETS = 4  # attentions up to which every mix of fused and unfused is an alternative


def references(prog, data, target="cpu"):
    """(r64, r32, alternatives): the references in float64 and float32, and the pairs an output
    may match instead: for a 16-bit program with explicit attentions (softmax @ v) the pairs
    that leave the weights of some of them unrounded, as the fused kernel computes them
    (evaluate.attention_weights): ragjit fuses one attention and not another where, say, the
    second's scores are an output too (seed 180425), so every mix is one, up to
    ATTENTION_SUBSETS attentions (beyond, all of them unrounded); on a GPU-shaped target, for a
    program with an attention, the pairs whose hidden keys' values add 0 (Env.hidden_v: the
    tiles bounded by a mask do not read them, the guide's one difference), with each of those
    mixes too."""
    def pair(w, hidden):
        return tuple(evaluate(prog, data.values, Env(data.lens, data.sizes, ft, data.lens2, hidden), w)
                     for ft in (np.float64, np.float32))
    w = sorted(attention_weights(prog))
    if len(w) <= ATTENTION_SUBSETS:
        mixes = [frozenset(c) for k in range(1, len(w) + 1) for c in itertools.combinations(w, k)]
    else:
        mixes = [frozenset(w)]
    specs = [(m, False) for m in mixes]
    if target != "cpu" and any(n.op in ("sdpa", "softmax") for n in prog.stmts):
        specs += [(m, True) for m in [frozenset()] + mixes]
    r64, r32 = pair(frozenset(), False)
    return r64, r32, Alternatives(specs, pair)


def half_of(prog):
    """The coarsest 16-bit format of the program, or None."""
    dts = {n.dtype for n in prog.inputs + prog.stmts}
    return "bf16" if "bf16" in dts else "f16" if "f16" in dts else None


def run_ragjit(ragjit, prog_path, data_dir, out_dir, target, threads, timeout):
    shutil.rmtree(out_dir, ignore_errors=True)
    cmd = [ragjit, "run", prog_path, "--data", data_dir, "--out", out_dir, "--target", target]
    if threads:
        cmd += ["--threads", str(threads)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Failure("timeout", f"ragjit run --target {target} took over {timeout} s")
    if p.returncode < 0:
        raise Failure("crash", f"ragjit run --target {target} died of signal {-p.returncode}: {p.stderr.strip()[-400:]}")
    if p.returncode != 0:
        raise Failure("refused", f"ragjit run --target {target} exited {p.returncode}: {p.stderr.strip()[-400:]}")
    return p


def row_max(r64, shape):
    """The largest finite magnitude along each row (the last dim), per element: a value that
    comes out of cancelling terms of a row (x - mean, a normalised value near 0) may carry an
    error of a few ulps of the row's scale, whatever its own size."""
    a = np.abs(np.asarray(r64, dtype=np.float64)).reshape(shape)
    a = np.where(np.isfinite(a), a, 0.0)
    if a.ndim == 0 or a.size == 0:
        return a.reshape(-1)
    return np.broadcast_to(a.max(axis=-1, keepdims=True), a.shape).reshape(-1)


def judge(name, got, r64, r32, dtype, f32_program, float_casts=False, h=None, spread=None):
    """Raises Failure for the worst unaccepted element of one output (h: the program's coarsest
    16-bit format; spread: input_spread's conditioning, which then stands for |r32 - r64|)."""
    if dtype in half.HALVES:
        if not half.is_half_file(got) or (dtype == "f16") != (got.dtype == np.float16):
            raise Failure("shape", f"output {name}: dtype {got.dtype}, expected {dtype}")
        got = half.from_file(got)
    elif got.dtype != NP_OUT[dtype]:
        raise Failure("shape", f"output {name}: dtype {got.dtype}, expected {dtype}")
    if got.shape != r64.shape:
        raise Failure("shape", f"output {name}: shape {got.shape}, expected {r64.shape}")
    g = got.astype(np.float64).reshape(-1)
    a = np.asarray(r64).astype(NP_OUT.get(dtype, np.float64)).astype(np.float64).reshape(-1)
    b = np.asarray(r32).astype(NP_OUT.get(dtype, np.float64)).astype(np.float64).reshape(-1)
    if dtype not in FLOATS:
        if dtype in ("i64",):  # exact beyond 2^53: compare as integers
            gi, ai, bi = got.reshape(-1), np.asarray(r64).astype(np.int64).reshape(-1), np.asarray(r32).astype(np.int64).reshape(-1)
            bad = (gi != ai) & (gi != bi)
        else:
            bad = (g != a) & (g != b)
        if float_casts:  # a large f32 value cast to an integer is as exact as the float was
            bad &= ~(np.abs(g - a) <= C * EPS[h or "f32"] * np.abs(a))
        err = bad.astype(np.float64)
    else:
        with np.errstate(all="ignore"):
            same = (g == a) | (g == b) | (np.isnan(g) & (np.isnan(a) | np.isnan(b)))
            prec = "f32" if f32_program else dtype  # f32 values cast to f64 keep f32's errors
            scale = 1.0 if prec == "f32" else EPS["f64"] / EPS["f32"]
            if h:
                cond = np.abs(b - a)
                if spread is not None:  # a 16-bit op's rounding flipped where both references agree
                    cond = np.fmax(cond, np.asarray(spread, np.float64).reshape(-1))
                tol = (C * cond + ULPS16 * EPS[h] * np.abs(a)
                       + ROW_ULPS16 * EPS[h] * row_max(r64, got.shape) + ATOL[h])
                big = (1 - 2 * EPS[h]) * half.MAX[h]  # a store that overflows on one side of a tie
                same |= (np.isinf(g) & (np.abs(a) >= big) & (np.sign(g) == np.sign(a))) | (
                    np.isinf(a) & (np.abs(g) >= big) & (np.sign(g) == np.sign(a)))
            else:
                cond = scale * np.abs(b - a) if spread is None else np.asarray(spread, np.float64).reshape(-1)
                tol = (C * cond + ULPS * EPS[prec] * np.abs(a)
                       + ROW_ULPS * EPS[prec] * row_max(r64, got.shape) + ATOL[prec])
            tol = np.where(np.isnan(tol), np.inf, tol)
            if spread is not None:  # whether it is a number at all, or its sign, turns on the
                # rounding of the inputs (a quotient by a sum that cancels to about 0): any value
                same |= np.isinf(cond) | (~np.isfinite(g) & np.isfinite(a) & (C * cond >= np.abs(a)))
            finite = np.isfinite(g) & np.isfinite(a)
            err = np.where(same, 0.0, np.where(finite, np.abs(g - a) / tol, np.inf))
            bad = err > 1.0
    if bad.any():
        i = int(np.argmax(np.where(bad, err, -1)))
        idx = np.unravel_index(i, got.shape) if got.shape else ()
        worst = (tuple(int(x) for x in idx), got.reshape(-1)[i].item(), np.asarray(r64).reshape(-1)[i].item(),
                 np.asarray(r32).reshape(-1)[i].item())
        raise Failure("mismatch", f"output {name}: {int(bad.sum())} of {bad.size} elements wrong; worst at "
                      f"{worst[0]}: got {worst[1]!r}, expected {worst[2]!r} (f32 reference {worst[3]!r})", worst)


def casts_f32_to_int(prog):
    return any(n.op == "cast" and n.args[0].dtype in ("f32",) + half.HALVES and n.attrs["to"] in ("i32", "i64") for n in prog.stmts)


def uses_f32(prog):
    return any(n.dtype == "f32" for n in prog.inputs + prog.stmts)


def input_spread(prog, dat, r64):
    """Per output, the largest move of ref64 over PERTURB runs with every f32 and f64 input moved
    by MOVES ulps of its format (a fixed seed), and every op's value (op_moved), per half an ulp
    of move."""
    rng = np.random.default_rng(12345)
    fmt = {n.name: NP_OUT[n.dtype] for n in prog.inputs if n.dtype in ("f32", "f64")}
    out = {name: np.zeros(np.shape(v)) for name, v in r64.items()}

    def moved(v, t):
        a = np.asarray(v, dtype=t)
        step = np.spacing(np.abs(a)).astype(np.float64)
        return a.astype(np.float64) + rng.choice(MOVES, a.shape) * step

    def op_moved(dt, x, scale):  # an op's value, by MOVES ulps of its format (relative: an ulp
        a = np.asarray(x, dtype=np.float64)  # at the top of its binade, the smallest it is), of
        eps = EPS["f32"] * HALF_OP_ULPS if dt in half.HALVES else EPS[dt]  # f32 for a 16-bit op
        if scale is None:  # (before it is rounded to its format); a sum's by ulps of its terms'
            scale = a  # magnitudes (evaluate.SUMS: a sum that cancels to 0 moves too)
        step = rng.choice(MOVES, a.shape) * (eps / 2)
        return a + step * np.broadcast_to(np.abs(np.asarray(scale, dtype=np.float64)), a.shape)

    for _ in range(PERTURB):
        vals = {}
        for name, v in dat.values.items():
            if name not in fmt:
                vals[name] = v
            elif isinstance(v, list):
                vals[name] = [moved(x, fmt[name]) for x in v]
            else:
                vals[name] = moved(v, fmt[name])
        env = Env(dat.lens, dat.sizes, np.float64, dat.lens2, False)
        with np.errstate(all="ignore"):
            r = evaluate(prog, vals, env, frozenset(), moved=op_moved)
        for name in out:
            got, want = (np.asarray(x, dtype=np.float64) for x in (r[name], r64[name]))
            d = np.abs(got - want)
            out[name] = np.fmax(out[name], np.where(np.isfinite(d), d, 0.0))
            # finite on one side, inf or NaN on the other: the rounding of the inputs decides
            # whether the element is a number at all (a quotient by a sum that cancels to 0)
            flip = np.isfinite(got) != np.isfinite(want)
            out[name] = np.where(flip | (np.isnan(got) != np.isnan(want)), np.inf, out[name])
    return {name: d / (2 * np.mean(np.abs(MOVES))) for name, d in out.items()}


def run_case(ragjit, prog, dat, target, threads, work, timeout=60, refs=None):
    """One case; raises Failure. Returns the outputs read back (for the threads comparison)."""
    os.makedirs(work, exist_ok=True)
    prog_path, ddir, odir = (os.path.join(work, x) for x in ("prog.rj", "data", "out"))
    with open(prog_path, "w") as f:
        f.write(prog.text())
    shutil.rmtree(ddir, ignore_errors=True)
    datamod.write(prog, dat, ddir)
    r64, r32, alts = refs or references(prog, dat, target)
    h = half_of(prog)
    spread = {}
    run_ragjit(ragjit, prog_path, ddir, odir, target, threads, timeout)
    outs = {}
    for n in prog.outputs:
        path = os.path.join(odir, n.name + ".npy")
        if not os.path.exists(path):
            raise Failure("missing", f"output {n.name}: {path} was not written")
        outs[n.name] = np.load(path)
        try:
            judge(n.name, outs[n.name], r64[n.name], r32[n.name], n.dtype, uses_f32(prog), casts_f32_to_int(prog),
                  h)
        except Failure as e:  # an attention's output as the guide allows it (references)
            if e.kind != "mismatch":
                raise
            if n.dtype in FLOATS:  # within the inputs' own rounding, and the ops' (above)?
                if not spread:
                    spread.update(input_spread(prog, dat, r64))
                try:
                    judge(n.name, outs[n.name], r64[n.name], r32[n.name], n.dtype, uses_f32(prog),
                          casts_f32_to_int(prog), h, spread=spread[n.name])
                    continue
                except Failure:
                    pass
            if not alts:
                raise
            for a64, a32 in alts:
                try:
                    judge(n.name, outs[n.name], a64[n.name], a32[n.name], n.dtype, uses_f32(prog),
                          casts_f32_to_int(prog), h)
                    break
                except Failure:
                    continue
            else:
                raise e from None
    return outs
