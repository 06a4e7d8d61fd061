#!/usr/bin/env python3
"""pipeline_check.py - does an LLVM pass pipeline keep run times while it cuts compile times?

The speed regression suite for changes to the CPU backend's optimisation pipeline (jit.c):
every example program and the bench workloads W1..W6 are compiled and timed under the default
(A) and under a candidate (B). For a candidate that is a setting (a pipeline in
RAGJIT_LLVM_PASSES, or any VAR=VALUE read when a context compiles) both run in one process,
`ragjit bench --ab`: two contexts, runs alternating in pairs milliseconds apart, B writing into
A's output memory. On a machine whose bandwidth drifts by 2x from second to second this is the
measurement that can tell 3% apart: identical code measured 0.98-1.01 there, where runs in
alternating processes put identical code up to 14% apart. For two builds (--baseline) the
processes alternate instead. Per program it prints the median over rounds of B's run time
over A's, and of the compile times; a run-time ratio above 1 + TOLERANCE fails the check (exit
status 1).

    bench/pipeline_check.py RAGJIT [--candidate PIPELINE | --candidate-env VAR=VALUE |
                                    --baseline RAGJIT_A] [--rounds N] [--pairs N] [--tolerance 0.03]

RAGJIT is the command (build/tools/ragjit); without --candidate, B is the pipeline the
guide documents as the fast one; --candidate-env runs B with the default pipeline and one
environment setting instead (RAGJIT_LLVM_UNROLL=0, say); --baseline compares two builds, both
with their defaults: A is RAGJIT_A (a build of the commit before a change), B is RAGJIT.
--pairs: runs of each per round with --ab (default 100). Run from the source directory. The
persistent kernel cache is off for both (RAGJIT_CACHE_DIR=off): compile times are compiles.
"""
import glob
import os
import re
import statistics
import subprocess
import sys
import tempfile

FAST = ("always-inline,function(sroa,early-cse<memssa>,instcombine,simplifycfg,"
        "loop-mssa(loop-rotate,licm,simple-loop-unswitch<nontrivial>),simplifycfg,instcombine,"
        "loop(loop-idiom,indvars,loop-deletion),gvn,loop-vectorize,instcombine,simplifycfg,"
        "loop-unroll<O3>,instcombine,loop-mssa(licm),simplifycfg),globaldce")

WORKLOADS = {  # name: (body, uses the weights w and b)
    "W1": ("y = relu(x * w + b)", True),
    "W2": ("y = softmax(x, dim=1)", False),
    "W3": ("y = unpad(pad(x, 0.0) * 2.0 + 1.0, j1)", False),
    "W4": ("y = sum(x, dim=1)", False),
    "W5": ("y = layer_norm(x, 256, w, b)", True),
    "W6": ("y = pad(x, 0.0)", False),
}


def workload_files(tmp):
    files = []
    for name, (body, weights) in WORKLOADS.items():
        path = os.path.join(tmp, name + ".rj")
        with open(path, "w") as f:
            f.write("ragged j1 : B\ninput x : f32[B, j1, 256]\n")
            if weights:
                f.write("input w : f32[256]\ninput b : f32[256]\n")
            f.write(body + "\noutput y\n")
        files.append((path, "B=256,maxlen=1024,minlen=1,seed=7"))
    return files


def measure(ragjit, program, spec, passes, extra=None):
    env = dict(os.environ, RAGJIT_CACHE_DIR="off")
    if passes:
        env["RAGJIT_LLVM_PASSES"] = passes
    else:
        env.pop("RAGJIT_LLVM_PASSES", None)
    if extra:
        env[extra[0]] = extra[1]
    out = subprocess.run([ragjit, "bench", program, "--random", spec, "--reps", "15"],
                         env=env, capture_output=True, text=True)
    m = re.search(r"compile ([0-9.]+) ms; run median ([0-9.]+) ms", out.stdout)
    if out.returncode or not m:
        sys.exit("pipeline_check: %s failed: %s%s" % (program, out.stdout, out.stderr))
    return float(m.group(1)), float(m.group(2))


def measure_ab(ragjit, program, spec, setting, pairs):
    """One round of `ragjit bench --ab`: compile and run ms of A, of B, the median B/A of the pairs."""
    env = dict(os.environ, RAGJIT_CACHE_DIR="off")
    out = subprocess.run([ragjit, "bench", program, "--random", spec, "--reps", str(pairs), "--ab", setting],
                         env=env, capture_output=True, text=True)
    a = re.search(r"A: compile ([0-9.]+) ms; run median ([0-9.]+) ms", out.stdout)
    b = re.search(r"\): compile ([0-9.]+) ms; run median ([0-9.]+) ms", out.stdout)
    r = re.search(r"B/A: median of [0-9]+ pairs ([0-9.]+)", out.stdout)
    if out.returncode or not (a and b and r):
        sys.exit("pipeline_check: %s failed: %s%s" % (program, out.stdout, out.stderr))
    return [float(x) for x in (a.group(1), a.group(2), b.group(1), b.group(2), r.group(1))]


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit(__doc__)
    ragjit, candidate, rounds, tol, extra, pairs = args[0], FAST, 5, 0.03, None, 100
    baseline = ragjit
    i = 1
    while i < len(args):
        if args[i] == "--candidate":
            candidate = args[i + 1]
        elif args[i] == "--candidate-env" and "=" in args[i + 1]:
            extra, candidate = tuple(args[i + 1].split("=", 1)), None
        elif args[i] == "--baseline":
            baseline, candidate = args[i + 1], None
        elif args[i] == "--rounds":
            rounds = int(args[i + 1])
        elif args[i] == "--tolerance":
            tol = float(args[i + 1])
        elif args[i] == "--pairs":
            pairs = int(args[i + 1])
        else:
            sys.exit(__doc__)
        i += 2
    with tempfile.TemporaryDirectory() as tmp:
        programs = workload_files(tmp)
        programs += [(p, "B=64,maxlen=512,seed=3,V=1000") for p in sorted(glob.glob("examples/*.rj"))]
        print("%-32s %10s %10s %9s %10s %10s %9s" % ("program", "run A ms", "run B ms", "B/A",
                                                      "compile A", "compile B", "B/A"))
        worst, ca, cb = 0.0, [], []
        for program, spec in programs:
            ra, rb, ka, kb, ratios = [], [], [], [], []
            setting = None  # --baseline: two builds, alternating processes
            if baseline == ragjit:
                setting = "=".join(extra) if extra else "RAGJIT_LLVM_PASSES=" + candidate
            for _ in range(rounds):
                if setting:  # one process, pairs of runs
                    k, r, kk, rr, q = measure_ab(ragjit, program, spec, setting, pairs)
                    ka.append(k), ra.append(r), kb.append(kk), rb.append(rr), ratios.append(q)
                    continue
                k, r = measure(baseline, program, spec, None)
                ka.append(k), ra.append(r)
                k, r = measure(ragjit, program, spec, candidate, extra)
                kb.append(k), rb.append(r)
                ratios.append(r / ra[-1])
            ratio = statistics.median(ratios)
            kratio = statistics.median(b / a for a, b in zip(ka, kb))
            worst = max(worst, ratio)
            ca.append(statistics.median(ka)), cb.append(statistics.median(kb))
            flag = "  SLOWER" if ratio > 1 + tol else ""
            print("%-32s %10.3f %10.3f %9.3f %10.1f %10.1f %9.2f%s" % (
                os.path.basename(program), statistics.median(ra), statistics.median(rb), ratio,
                ca[-1], cb[-1], kratio, flag))
        print("compile: median %.1f ms (A) vs %.1f ms (B); worst run-time ratio B/A %.3f" % (
            statistics.median(ca), statistics.median(cb), worst))
        return 1 if worst > 1 + tol else 0


if __name__ == "__main__":
    sys.exit(main())
