#!/usr/bin/env python3
"""overhead.py - what a call from Python costs over the C run, beside a PyTorch NJT eager op.

The tiny program of issue 37 (B = 8 items of 2 rows, 16 rows of 16 f32 in all, relu) is run
four ways in one process, interleaved round by round so that a busy machine slows each alike:

  C run         rj_program_run on a binding made once (one ctypes call: the C run itself)
  C rebind+run  rj_bind_offsets, rj_bind_input, rj_bind_output, rj_program_run: what a C
                caller does for each new batch (four ctypes calls; a rebound binding is
                checked again by the run)
  NumPy call    prog(x=ragjit.Jagged(...)): NumPy in, ragjit.Jagged out
  NJT call      prog(x=nt): a PyTorch nested jagged tensor in, one out (needs PyTorch)
  torch op      torch.relu(nt): one PyTorch NJT eager op on the same tensor (needs PyTorch)

Each figure is the best, over --rounds rounds, of a round's mean over --calls calls, in
microseconds (the best round is the one least disturbed by other processes), and the
overheads are the calls' figures less the C runs'. Time is the process's CPU time (all its
threads; --clock wall for the wall clock): on a machine shared with other work the wall clock
also counts the time the process waits for a core, which is no cost of the call. The library is the installed package's
(or RAGJIT_LIB's); the persistent kernel cache is off.

    python/bench/overhead.py [--rounds 15] [--calls 2000] [--threads 1] [--clock cpu|wall]
"""
import argparse
import os
import sys
import time

os.environ.setdefault("RAGJIT_CACHE_DIR", "off")

import numpy as np  # noqa: E402

import ragjit  # noqa: E402
from ragjit import _lib  # noqa: E402

SOURCE = "ragged j1 : B\ninput x : f32[B, j1, 16]\ny = relu(x)\noutput y\n"


CLOCK = time.process_time


def mean_us(fn, calls):
    t = CLOCK()
    for _ in range(calls):
        fn()
    return (CLOCK() - t) / calls * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    a = ap.parse_args()
    global CLOCK
    CLOCK = time.process_time if a.clock == "cpu" else time.perf_counter
    prog = ragjit.compile(SOURCE, threads=a.threads)
    rng = np.random.default_rng(0)
    values = rng.standard_normal((16, 16)).astype(np.float32)
    offsets = np.arange(0, 17, 2, dtype=np.int64)
    x = ragjit.Jagged(values, offsets)

    lib, node = _lib.LIB, prog.inputs[0].node
    b = lib.rj_bind_new(prog._prog)
    out = np.empty_like(values)
    assert lib.rj_bind_offsets(b, prog.inputs[0].sym, 8, offsets.ctypes.data, None) == 0
    assert lib.rj_bind_input(b, node, values.ctypes.data, values.size) == 0
    assert lib.rj_bind_output(b, prog.outputs[0].node, out.ctypes.data, out.size) == 0
    run, p = lib.rj_program_run, prog._prog
    sym, onode = prog.inputs[0].sym, prog.outputs[0].node
    op, vp, outp = offsets.ctypes.data, values.ctypes.data, out.ctypes.data

    def rebind_run():
        lib.rj_bind_offsets(b, sym, 8, op, None)
        lib.rj_bind_input(b, node, vp, values.size)
        lib.rj_bind_output(b, onode, outp, out.size)
        return run(p, b)

    cases = {"C run": lambda: run(p, b), "C rebind+run": rebind_run, "NumPy call": lambda: prog(x=x)}
    try:
        import torch
    except ImportError:
        torch = None
        print("PyTorch is not installed: the NJT call and the torch op are left out")
    if torch is not None:
        torch.set_num_threads(a.threads)
        nt = torch.nested.nested_tensor_from_jagged(torch.from_numpy(values), torch.from_numpy(offsets))
        y = prog(x=nt)
        assert torch.equal(y.values(), torch.relu(nt).values()) and y.offsets() is nt.offsets()
        cases["NJT call"] = lambda: prog(x=nt)
        cases["torch op"] = lambda: torch.relu(nt)
    best = {k: float("inf") for k in cases}
    for fn in cases.values():
        mean_us(fn, a.calls // 10 + 1)  # warm-up
    for _ in range(a.rounds):
        for k, fn in cases.items():
            best[k] = min(best[k], mean_us(fn, a.calls))
    lib.rj_bind_free(b)
    c, cr = best["C run"], best["C rebind+run"]
    print("ragjit %s, PyTorch %s, %d thread(s); best of %d rounds of %d calls, us per call (%s time)"
          % (ragjit.__version__, torch.__version__ if torch else "-", a.threads, a.rounds, a.calls,
             "CPU" if a.clock == "cpu" else "wall"))
    for k, v in best.items():
        extra = ""
        if k.endswith("call"):
            extra = "   over the C run: %6.2f us, over C rebind+run: %6.2f us" % (v - c, v - cr)
        print("  %-13s %8.2f us%s" % (k, v, extra))
    return 0


if __name__ == "__main__":
    sys.exit(main())
