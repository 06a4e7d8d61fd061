#!/usr/bin/env python3
"""overhead.py - what a call from Python costs over the C run, beside PyTorch's own eager ops.

The tiny program of issue 37 (relu over B = 8 items of 2 rows, 16 rows of 16 f32) and its
dense twin (relu over a 16 x 16 tensor) are called every way in one process:

  C run            rj_program_run on a binding made once (one ctypes call: the C run itself)
  C rebind+run     rj_bind_offsets, rj_bind_input, rj_bind_output, rj_program_run: what a C
                   caller does for each new batch
  NumPy call       prog(x=ragjit.Jagged(...)): NumPy in, ragjit.Jagged out
  NJT call         prog(x=nt): a PyTorch nested jagged tensor in, one out (the same nt), by
                   the package's C helper (ragjit._fastcall), where it was built
  NJT call, 2 NJTs prog(x=nt) with two NJTs in turn (another buffer each call: bound again)
  NJT call, ctypes the same call on a program planned without the C helper (_torch_io.Plan
                   through ctypes: what calls cost where the helper is not built)
  dense torch call prog(x=t) on the dense program: a torch tensor in, one out
  torch NJT relu   torch.relu(nt), and torch NJT x+1, torch NJT softmax (over the ragged
                   dim, dim=1): PyTorch's eager ops on the same NJT
  torch dense relu torch.relu(t)

Every case is timed in blocks of --block calls, the cases taking turns block by block for
--blocks rounds, and the figure is the median block over its calls, in microseconds (the 10th
percentile beside it). The clock is the calling thread's CPU time (--clock thread, the
default; with one thread ragjit and PyTorch run their work on it), which leaves out the waits
for a core on a machine shared with other work; --clock wall takes the wall clock, whose
median also leaves out the blocks that waited, while fewer than half of them do. The
library is the installed package's (or RAGJIT_LIB's); the persistent kernel cache is off;
PyTorch and ragjit run on --threads threads.

    python/bench/overhead.py [--blocks 40] [--block 200] [--threads 1] [--clock thread|wall]
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
DENSE = "input x : f32[16, 16]\ny = relu(x)\noutput y\n"


def c_cases(prog, values, offsets):
    """The C baselines on a binding of their own, and the binding (to free)."""
    lib, node, onode = _lib.LIB, prog.inputs[0].node, prog.outputs[0].node
    b = lib.rj_bind_new(prog._prog)
    out = np.empty_like(values)
    sym = prog.inputs[0].sym
    op, vp, outp = offsets.ctypes.data, values.ctypes.data, out.ctypes.data
    assert lib.rj_bind_offsets(b, sym, 8, op, None) == 0
    assert lib.rj_bind_input(b, node, vp, values.size) == 0
    assert lib.rj_bind_output(b, onode, outp, out.size) == 0
    run, p = lib.rj_program_run, prog._prog

    def rebind_run():
        lib.rj_bind_offsets(b, sym, 8, op, None)
        lib.rj_bind_input(b, node, vp, values.size)
        lib.rj_bind_output(b, onode, outp, out.size)
        return run(p, b)

    return {"C run": lambda: run(p, b), "C rebind+run": rebind_run}, b


def torch_cases(prog, dense, values, offsets, threads):
    import torch
    from ragjit import _torch_io
    torch.set_num_threads(threads)
    nt = torch.nested.nested_tensor_from_jagged(torch.from_numpy(values), torch.from_numpy(offsets))
    nt2 = torch.nested.nested_tensor_from_jagged(torch.from_numpy(values.copy()), nt.offsets())
    t = torch.from_numpy(values.copy())
    y = prog(x=nt)
    assert torch.equal(y.values(), torch.relu(nt).values()) and y.offsets() is nt.offsets()
    assert torch.equal(dense(x=t), torch.relu(t))
    pair = [nt, nt2]
    helper, _torch_io._fastcall = _torch_io._fastcall, None  # planned without the C helper
    slow = ragjit.compile(SOURCE, threads=threads)
    slow(x=nt)
    slow(x=nt)
    _torch_io._fastcall = helper
    assert slow._fast is None and (prog._fast is not None) == (helper is not None)

    def alternate():
        pair.reverse()
        return prog(x=pair[0])

    return {"NJT call": lambda: prog(x=nt), "NJT call, 2 NJTs": alternate,
            "NJT call, ctypes": lambda: slow(x=nt),
            "dense torch call": lambda: dense(x=t), "torch NJT relu": lambda: torch.relu(nt),
            "torch NJT x+1": lambda: nt + 1, "torch NJT softmax": lambda: torch.softmax(nt, dim=1),
            "torch dense relu": lambda: torch.relu(t)}


def measure(cases, blocks, block, clock):
    times = {k: [] for k in cases}
    for fn in cases.values():  # warm-up: the first calls plan, compile and allocate
        for _ in range(200):
            fn()
    rng = range(block)
    for _ in range(blocks):
        for k, fn in cases.items():
            t = clock()
            for _ in rng:
                fn()
            times[k].append((clock() - t) / block / 1000)
    return {k: (float(np.median(v)), float(np.percentile(v, 10))) for k, v in times.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--blocks", type=int, default=40)
    ap.add_argument("--block", type=int, default=200)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--clock", choices=["thread", "wall"], default="thread")
    a = ap.parse_args()
    prog = ragjit.compile(SOURCE, threads=a.threads)
    dense = ragjit.compile(DENSE, threads=a.threads)
    rng = np.random.default_rng(0)
    values = rng.standard_normal((16, 16)).astype(np.float32)
    offsets = np.arange(0, 17, 2, dtype=np.int64)
    x = ragjit.Jagged(values, offsets)
    cases, b = c_cases(prog, values, offsets)
    cases["NumPy call"] = lambda: prog(x=x)
    try:
        import torch
    except ImportError:
        torch = None
        print("PyTorch is not installed: the torch cases are left out")
    if torch is not None:
        cases.update(torch_cases(prog, dense, values, offsets, a.threads))
    clock = time.thread_time_ns if a.clock == "thread" else time.perf_counter_ns
    res = measure(cases, a.blocks, a.block, clock)
    _lib.LIB.rj_bind_free(b)
    c = res["C run"][0]
    print("ragjit %s (C helper: %s), PyTorch %s, %d thread(s), load average %.1f; median (10th "
          "percentile) of %d blocks of %d calls, %s, us per call"
          % (ragjit.__version__, "yes" if _lib.load_fastcall() else "no",
             torch.__version__ if torch else "-", a.threads, os.getloadavg()[0], a.blocks, a.block,
             "thread CPU time" if a.clock == "thread" else "wall clock"))
    for k, (med, p10) in res.items():
        extra = "   over the C run: %6.2f" % (med - c) if "call" in k else ""
        print("  %-18s %7.2f (%6.2f)%s" % (k, med, p10, extra))
    return 0


if __name__ == "__main__":
    sys.exit(main())
