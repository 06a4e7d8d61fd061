#!/usr/bin/python3
"""difftest.py — an independent differential tester for ragjit's CPU and OpenCL targets.

ragjit's own random tests compare the JIT with ragjit's own interpreter, so a misreading of
the semantics that both share goes unseen. This tester compares `ragjit run` with a
reference written here in NumPy, in float64, item by item, from the documented semantics
(docs/guide.md, DESIGN.md §1-2) — never with `--target reference` and never from ragjit's C
code. PyTorch's documented semantics win where the guide is silent.

Per seed it generates a random program over every op family of the text format (tests/
difftest/gen.py; about a third of them also split a value into attention heads, [B, H, j1, D],
and work on it per head: gen_heads.py; about one in eight is instead cross attention over two
ragged classes, queries of j1 and keys of j2 with lengths of their own: gen_cross.py), a lengths pattern and data, packed or as a view with holes with garbage
in the holes (data.py), writes PROG.rj and a data directory of .npy files, runs
`ragjit run PROG --data D --out O --target cpu|opencl|cuda` (CPU with --threads 1 and 2, which
must also agree bit for bit), and judges every output against the reference with a
tolerance that tells ill-conditioning from error (check.py). Some seeds instead feed ragjit
invalid programs or bad data, which must be refused with exit 1 or 2 and a message
(invalid.py). A crash, a timeout, a missing output, a refusal of a valid program or a wrong
element is a failure: the case is printed (seed, program, data sizes, worst element),
saved under --keep DIR, and shrunk to a small reproducer (shrink.py).

  difftest.py RAGJIT                       CI mode: a fixed range of seeds, about 3 minutes
  difftest.py RAGJIT --campaign N --seed S N programs per target from seed S
  options: --targets cpu,opencl[,cuda]  --keep DIR  --no-shrink  --timeout SEC  --half-share P

Exit status 0 iff nothing failed; the last line is `N passed, N failed[, N skipped]`.
"""
import argparse
import os
import shutil
import sys
import tempfile
import time
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from difftest import check, data, gen, gen_cross, half, invalid  # noqa: E402
from difftest.model import HEADED  # noqa: E402
from difftest.shrink import Shrinker  # noqa: E402

CI_SEEDS = {"cpu": 200, "opencl": 18, "cuda": 18}  # programs per target in CI mode (OpenCL: heads compile more kernels)
CI_INVALID = {"cpu": 26, "opencl": 4, "cuda": 4}   # invalid cases (26: every template once)
OPS = [o for o in gen.OPS if o not in gen.PSEUDO]
HALF_SHARE = 0.15  # programs whose f32 inputs become f16/bf16 (difftest/half.py)


class Tally:
    def __init__(self):
        self.passed = self.failed = self.skipped = 0
        self.coverage, self.patterns, self.reproducers = {}, {}, []

    def count_program(self, prog, pattern, holes):
        for n in prog.stmts:
            op = n.op
            self.coverage[op] = self.coverage.get(op, 0) + 1
        if any(n.kind in HEADED for n in prog.stmts):  # programs with tensors per head
            self.coverage["(heads)"] = self.coverage.get("(heads)", 0) + 1
            if any(n.kind in HEADED for n in prog.outputs):
                self.coverage["(heads out)"] = self.coverage.get("(heads out)", 0) + 1
        for h in half.HALVES:
            if any(n.dtype == h for n in prog.inputs):
                self.coverage[f"({h})"] = self.coverage.get(f"({h})", 0) + 1
        if gen_cross.is_cross(prog):  # two ragged classes
            self.coverage["(cross)"] = self.coverage.get("(cross)", 0) + 1
            pattern = "cross"
        key = f"{pattern}/{'holes' if holes else 'packed'}"
        self.patterns[key] = self.patterns.get(key, 0) + 1


def maybe_halve(prog, seed, share):
    """Some programs' f32 inputs made 16-bit (streams of their own, as crng's)."""
    if np.random.default_rng([seed, 3]).random() < (HALF_SHARE if share is None else share):
        half.halve(prog, np.random.default_rng([seed, 4]))


def case_of(seed, usage, half_share=None):
    """The program and data of one seed (deterministic)."""
    rng = np.random.default_rng(seed)
    pattern = data.PATTERNS[seed % len(data.PATTERNS)]
    lens = data.lengths(pattern, rng)
    holes = (seed // len(data.PATTERNS)) % 2 == 1
    crng = np.random.default_rng([seed, 2])  # its own stream: the other seeds' cases stay as they were
    if crng.random() < gen_cross.SHARE:  # two ragged classes: j2 with lengths of its own pattern
        pattern2 = data.PATTERNS[int(crng.integers(len(data.PATTERNS)))]
        prog = gen_cross.generate(seed, usage)
        maybe_halve(prog, seed, half_share)
        dat = data.make(prog, lens, holes, rng, special=rng.random() < 0.1,
                        lens2=data.lengths2(pattern2, len(lens), crng))
        return prog, dat, f"{pattern}+{pattern2}"
    prog = gen.generate(seed, max(lens, default=0), usage)
    maybe_halve(prog, seed, half_share)
    dat = data.make(prog, lens, holes, rng, special=rng.random() < 0.1)
    return prog, dat, pattern


def shape_of(v):
    """An input's shape, or for per-item blocks (a list) their count and elements."""
    if isinstance(v, list):
        return f"{len(v)} items, {sum(int(np.size(a)) for a in v)} elements"
    return np.shape(v)


def describe(prog, dat):
    sizes = ", ".join(f"{n.name}: {shape_of(dat.values[n.name])}" for n in prog.inputs)
    two = f", lengths of j2 {dat.lens2}" + (f" (gaps {dat.gaps2})" if dat.holes else "") if dat.lens2 is not None else ""
    return (f"B = {len(dat.lens)}, lengths {dat.lens}{two}, {'view with holes (gaps ' + str(dat.gaps) + ')' if dat.holes else 'packed'}"
            f", sizes {dat.sizes}; inputs {sizes}")


def report(args, tally, seed, target, threads, prog, dat, f, work):
    label = f"seed {seed} target {target}" + (f" threads {threads}" if threads else "")
    print(f"FAIL {label}: {f.kind}: {f.msg}")
    print("  data: " + describe(prog, dat))
    print("  program:\n" + "".join("    " + line + "\n" for line in prog.text().splitlines()))
    keep = os.path.join(args.keep, f"seed{seed}-{target}") if args.keep else None
    if keep:
        shutil.rmtree(keep, ignore_errors=True)
        shutil.copytree(work, os.path.join(keep, "original"), ignore=shutil.ignore_patterns("out"))
    if args.no_shrink or f.kind == "tester":
        return
    sh = Shrinker(args.ragjit, target, threads, os.path.join(work, "shrink"), f.kind)
    sp, sd = sh.shrink(prog, dat)
    try:
        check.run_case(args.ragjit, sp, sd, target, threads, os.path.join(work, "shrink"))
        msg = "(the shrunk case passed when rerun)"
    except check.Failure as g:
        msg = g.msg
    except Exception as e:  # noqa: BLE001
        msg = f"(reference error {e!r})"
    print(f"  shrunk in {sh.runs} runs to: {describe(sp, sd)}\n    {msg}")
    print("".join("    " + line + "\n" for line in sp.text().splitlines()))
    tally.reproducers.append((label, sp.text(), describe(sp, sd), msg))
    if keep:
        shutil.copytree(os.path.join(work, "shrink"), os.path.join(keep, "shrunk"),
                        ignore=shutil.ignore_patterns("out"), dirs_exist_ok=True)


def run_seed(args, tally, seed, target, usage, work):
    try:
        prog, dat, pattern = case_of(seed, usage, args.half_share)
    except Exception:  # noqa: BLE001
        tally.failed += 1
        print(f"FAIL seed {seed}: the generator failed\n{traceback.format_exc()}")
        return
    tally.count_program(prog, pattern, dat.holes)
    try:
        refs = check.references(prog, dat, target)
    except Exception:  # noqa: BLE001
        tally.failed += 1
        print(f"FAIL seed {seed}: the reference failed (a tester bug)\n{prog.text()}{traceback.format_exc()}")
        return
    outs = {}
    for threads in ([1, 2] if target == "cpu" else [0]):
        try:
            outs[threads] = check.run_case(args.ragjit, prog, dat, target, threads, work, args.timeout, refs)
        except check.Failure as f:
            tally.failed += 1
            report(args, tally, seed, target, threads, prog, dat, f, work)
            return
    if target == "cpu":
        for name in outs[1]:
            if outs[1][name].tobytes() != outs[2][name].tobytes():
                tally.failed += 1
                print(f"FAIL seed {seed} target cpu: output {name} differs between 1 and 2 threads\n{prog.text()}")
                return
    tally.passed += 1


def run_invalid(args, tally, seed, target, work):
    label, text, bad, rng = invalid.case(seed)
    d = None
    if bad:
        d = os.path.join(work, "baddata")
        shutil.rmtree(d, ignore_errors=True)
        invalid.write_bad_data(bad, d, rng)
    err = invalid.run_one(args.ragjit, text, work, target, d, args.timeout)
    tally.coverage["(invalid)"] = tally.coverage.get("(invalid)", 0) + 1
    if err:
        tally.failed += 1
        print(f"FAIL invalid seed {seed} target {target}: {label}: {err}\n{text}")
        tally.reproducers.append((f"invalid seed {seed} {target}", text, bad or "--random B=3,maxlen=4", err))
    else:
        tally.passed += 1


def probe_device(ragjit, work, target):
    import subprocess
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "probe.rj")
    with open(path, "w") as f:
        f.write("ragged j1 : B\ninput x : f32[B, j1, 2]\ny = x + 1.0\noutput y\n")
    p = subprocess.run([ragjit, "run", path, "--random", "B=2,maxlen=3", "--out", os.path.join(work, "po"),
                        "--target", target], capture_output=True, text=True, timeout=300)
    return None if p.returncode == 0 else (p.stderr.strip() or f"exit {p.returncode}")


def summary(tally, elapsed):
    print(f"\ncoverage ({len([o for o in OPS if tally.coverage.get(o)])} of {len(OPS)} ops reached; "
          f"statements per op):")
    items = sorted(tally.coverage.items())
    print("  " + ", ".join(f"{k} {v}" for k, v in items))
    missing = [o for o in OPS if not tally.coverage.get(o)]
    if missing:
        print("  not reached: " + ", ".join(missing))
    print("  length patterns/layouts: " + ", ".join(f"{k} {v}" for k, v in sorted(tally.patterns.items())))
    print(f"  {elapsed:.0f} s")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ragjit")
    ap.add_argument("--campaign", type=int, default=0, help="programs per target (default: CI mode)")
    ap.add_argument("--seed", type=int, default=0, help="first seed of a campaign")
    ap.add_argument("--targets", default="cpu,opencl")
    ap.add_argument("--keep", help="save failing cases here")
    ap.add_argument("--no-shrink", action="store_true")
    ap.add_argument("--half-share", type=float, help="share of programs made 16-bit (default %.2f)" % HALF_SHARE)
    ap.add_argument("--timeout", type=int, default=120, help="seconds per ragjit run")
    args = ap.parse_args()
    args.ragjit = os.path.abspath(args.ragjit)
    tally, t0 = Tally(), time.time()
    work_root = tempfile.mkdtemp(prefix="difftest-")
    usage = {}
    try:
        for target in args.targets.split(","):
            work = os.path.join(work_root, target)
            if target not in CI_SEEDS:
                print(f"difftest: --targets takes cpu, opencl and cuda, not '{target}'")
                return 2
            if target != "cpu":
                why = probe_device(args.ragjit, work, target)
                if why:
                    n = args.campaign or CI_SEEDS[target]
                    print(f"skipping the {target} target ({n} programs): {why}")
                    tally.skipped += n
                    continue
            n = args.campaign or CI_SEEDS[target]
            first = args.seed if args.campaign else 0
            for seed in range(first, first + n):
                run_seed(args, tally, seed, target, usage, work)
            for seed in range(first, first + (n // 6 if args.campaign else CI_INVALID[target])):
                run_invalid(args, tally, seed, target, work)
            print(f"{target}: {n} programs done, {time.time() - t0:.0f} s", flush=True)
    finally:
        shutil.rmtree(work_root, ignore_errors=True)
    summary(tally, time.time() - t0)
    if tally.reproducers:
        print(f"\n{len(tally.reproducers)} reproducer(s) above")
    tail = f", {tally.skipped} skipped" if tally.skipped else ""
    print(f"{tally.passed} passed, {tally.failed} failed{tail}")
    return 0 if tally.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
