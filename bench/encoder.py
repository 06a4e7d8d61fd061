#!/usr/bin/env python3
"""encoder.py - a 6-layer MiniLM-shaped sentence encoder, ragjit against PyTorch, same run.

The model is examples/encoder.rj (hidden 384, 12 heads of 32, FFN 1536, GELU, post-LayerNorm,
mean pooling, L2 normalisation; one `def` per layer, weights stacked [6, ...]) on random
weights, and the same model in PyTorch as its code reads (F.linear, SDPA with a key-padding
mask, layer_norm, gelu, masked mean pooling, F.normalize). Sentence lengths are drawn like real
short text: a log-normal with median ~35 tokens and a long tail, clipped to 8..200.

Printed, for --sentences sentences in batches of --batch (2 threads by default):
  compile   cold (a fresh process, an empty kernel cache) and cached (a fresh process, the
            cache warm), each the time of ragjit.compile, the median of three processes
  first run in a fresh process (the cache warm), the first call on the first batch against the
            median of --reps + 2 later calls on the same batch (after the 4 calls that may still
            make copies of the weights, whose slowest is printed too): wall and CPU time (every
            thread's), page faults, and their ratios, of the median of --first-procs processes
            (and the range of the ratio over them); once as a user calls it, once after
            prog.prepare() on that batch (rj_bind_prepare: the run's memory and threads made
            ready and the weights packed before the first call), both with the weights bound
            once (constants=: packed by prepare() or else a quarter each by the first four
            calls, reused by the later ones); and once without the promise (every call packs
            them)
  run       ragjit on jagged batches; PyTorch padded to each batch's longest sentence; PyTorch
            sorted by length into batches (the whole set sorted once, then cut): total seconds
            for all sentences, median of --reps passes (every contestant's passes in turn), and
            the ratios
  memory    ragjit's planned temporaries (`ragjit bench`'s rj_bind_stats) of a batch of --batch
            long sentences, for the whole model and for its first layer alone, and their ratio
With --busy only ragjit runs: all batches on 1 and on 2 threads in alternation, first quiet and
then with a child process spinning on the last processor this process may use (issue 36: a
runtime shares its cores); printed as medians and the 2-thread median over the 1-thread one.
The outputs are compared with PyTorch's (max abs error) before timing.

The weights and biases are bound once, as a model runtime does: the program is compiled with
constants=[every weight] (rj_bind_constant), so their products' packed weights are made by a
binding's first call and kept. The run line also times the same program without the promise
(every call packs every layer's weights again), passes interleaved with the promised ones in the
same process: wall and CPU time (every thread's), and the ratio.

With --dtype bf16 the same model runs in bf16 on both sides (ragjit's program with bf16 types,
its products by AMX tiles or AVX512-BF16 where the CPU has them; PyTorch's weights and batches
in bf16), the first-run lines left out, and ragjit's f32 program timed in the same run beside
its bf16 one. PyTorch's passes are timed only if the first batch says they fit --torch-budget
seconds (its bf16 kernels on CPUs without AMX take minutes a pass); else the line says so.

    RAGJIT_LIB=build/libragjit.so python bench/encoder.py [--threads 2] [--sentences 512]
        [--batch 32] [--reps 3] [--busy] [--dtype f32|bf16]
"""
import argparse
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
sys.path.insert(0, os.path.join(ROOT, "python"))
L, E, H, D, F = 6, 384, 12, 32, 1536
# Calls after the first that may still make copies of the constant weights (without prepare(),
# a binding's first four calls make a quarter of them each: src/runtime/cpu_gemm.c, CONST_RUNS):
# "later" calls are the ones after these; the slowest of these is printed beside them.
SETTLING = 4


def weights(rng):
    w = {"w_qkv": (L, 3 * E, E), "b_qkv": (L, 3 * E), "w_o": (L, E, E), "b_o": (L, E), "ln1_w": (L, E),
         "ln1_b": (L, E), "w_1": (L, F, E), "b_1": (L, F), "w_2": (L, E, F), "b_2": (L, E), "ln2_w": (L, E),
         "ln2_b": (L, E)}
    out = {}
    for k, shape in w.items():
        if k.startswith("ln") and k.endswith("_w"):
            out[k] = (1 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
        elif k.startswith("b") or k.endswith("_b"):
            out[k] = (0.02 * rng.standard_normal(shape)).astype(np.float32)
        else:
            out[k] = (rng.standard_normal(shape) / math.sqrt(shape[-1])).astype(np.float32)
    return out


def torch_model(torch, w, dtype=None):
    Fn = torch.nn.functional
    tw = {k: torch.from_numpy(v).to(dtype or torch.float32) for k, v in w.items()}

    def run(x, lens):  # x [b, T, E] padded, lens [b]
        b, T, _ = x.shape
        keep = torch.arange(T)[None, :] < lens[:, None]          # [b, T]
        mask = keep[:, None, None, :]                             # [b, 1, 1, T]
        h = x
        for i in range(L):
            q, k, v = Fn.linear(h, tw["w_qkv"][i], tw["b_qkv"][i]).split(E, dim=-1)
            q, k, v = (t.view(b, T, H, D).transpose(1, 2) for t in (q, k, v))
            a = Fn.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            a = Fn.linear(a.transpose(1, 2).reshape(b, T, E), tw["w_o"][i], tw["b_o"][i])
            h = Fn.layer_norm(h + a, (E,), tw["ln1_w"][i], tw["ln1_b"][i])
            f = Fn.linear(Fn.gelu(Fn.linear(h, tw["w_1"][i], tw["b_1"][i])), tw["w_2"][i], tw["b_2"][i])
            h = Fn.layer_norm(h + f, (E,), tw["ln2_w"][i], tw["ln2_b"][i])
        e = (h * keep[..., None]).sum(1) / lens[:, None]
        return Fn.normalize(e, dim=-1)
    return run


def compile_time(cache, threads):
    code = ("import time, ragjit, numpy as np\n"
            "t = time.perf_counter()\n"
            "p = ragjit.compile(open(%r).read(), threads=%d)\n"
            "print(time.perf_counter() - t)\n") % (os.path.join(ROOT, "examples", "encoder.rj"), threads)
    env = dict(os.environ, RAGJIT_CACHE_DIR=cache, PYTHONPATH=os.path.join(ROOT, "python"))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if r.returncode:
        sys.exit("compile failed: " + r.stderr)
    return float(r.stdout.split()[-1])


def first_run_child(a):
    """--first-child: in this fresh process, the first call on batch 0 and the later ones on it."""
    import resource
    import ragjit
    rng = np.random.default_rng(35)
    lens = np.clip(np.round(np.exp(rng.normal(math.log(35), 0.6, a.sentences))), 8, 200).astype(np.int64)
    w = weights(rng)
    xs = [(0.5 * rng.standard_normal((n, E))).astype(np.float32) for n in lens]
    prog = ragjit.compile(open(os.path.join(ROOT, "examples", "encoder.rj")).read(), threads=a.threads,
                          constants=[] if a.no_constants else list(w))
    idx = range(min(a.batch, a.sentences))
    off = np.concatenate([[0], np.cumsum(lens[idx])]).astype(np.int64)
    x = ragjit.Jagged(np.concatenate([xs[i] for i in idx]), off)
    if a.prepare:
        prog.prepare(x=x, **w)
    out = []
    for _ in range(1 + SETTLING + a.reps + 2):
        f0, c0, t0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.process_time(), time.perf_counter()
        prog(x=x, **w)
        out.append((time.perf_counter() - t0, time.process_time() - c0,
                    resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0))
    later = out[1 + SETTLING:]
    print(out[0][0], statistics.median(t for t, _, _ in later), out[0][1], statistics.median(c for _, c, _ in later),
          out[0][2], max(f for _, _, f in later), max(t for t, _, _ in out[1:1 + SETTLING]))


def first_run(a, prepare, constants=True):
    """first_run_child's numbers, from a fresh process."""
    args = [sys.executable, os.path.abspath(__file__), "--first-child", "--threads", str(a.threads), "--sentences",
            str(a.sentences), "--batch", str(a.batch), "--reps", str(a.reps)] + (["--prepare"] if prepare else []) + \
           ([] if constants else ["--no-constants"])
    r = subprocess.run(args, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python")))
    if r.returncode:
        sys.exit("first run failed: " + r.stderr)
    return [float(v) for v in r.stdout.split()[-7:]]


def print_load(when):
    """The load average beside the figures: above the processor count, only same-run ratios mean much."""
    l1, l5, l15 = os.getloadavg()
    print("load average %s: %.2f %.2f %.2f on %d processors%s" % (when, l1, l5, l15, os.cpu_count(),
          " (LOADED: read only the same-run ratios)" if l1 > os.cpu_count() + 0.5 else ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sentences", type=int, default=512)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--busy", action="store_true")
    ap.add_argument("--dtype", choices=("f32", "bf16"), default="f32",
                    help="bf16: the model in bf16 (ragjit's program with bf16 types, PyTorch's in bf16)")
    ap.add_argument("--torch-budget", type=float, default=600,
                    help="seconds PyTorch's timed passes may take in all, estimated from one batch; "
                         "above it they are left out and the run line says so (PyTorch bf16 on a CPU "
                         "without AMX or AVX512-BF16 kernels takes minutes a pass)")
    ap.add_argument("--first-procs", type=int, default=5,
                    help="fresh processes for each kind of first run (the median process is printed)")
    ap.add_argument("--first-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--prepare", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--no-constants", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.first_child:
        return first_run_child(a)
    if a.busy:
        return busy(a)
    import torch
    import ragjit
    torch.set_num_threads(a.threads)
    rng = np.random.default_rng(35)
    lens = np.clip(np.round(np.exp(rng.normal(math.log(35), 0.6, a.sentences))), 8, 200).astype(np.int64)
    w = weights(rng)
    xs = [(0.5 * rng.standard_normal((n, E))).astype(np.float32) for n in lens]
    # the median of three fresh processes each: one process is one sample of a noisy machine
    # (a lone cold compile once took 0.93 s where five others took 0.26-0.29)
    colds, warms = [], []
    for _ in range(3):
        with tempfile.TemporaryDirectory() as cache:
            colds.append(compile_time(cache, a.threads))
            warms.append(compile_time(cache, a.threads))
    cold, warm = sorted(colds)[1], sorted(warms)[1]
    bf16 = a.dtype == "bf16"
    # each kind of first run in --first-procs fresh processes, alternating: one process's first
    # call is one sample of a noisy machine
    firsts = {p: [] for p in ("fresh", "prepare", "packed")} if not bf16 else {}
    for _ in range(a.first_procs):
        for p in firsts:
            firsts[p].append(first_run(a, p == "prepare", p != "packed"))
    src = open(os.path.join(ROOT, "examples", "encoder.rj")).read()
    tdt = torch.bfloat16 if bf16 else torch.float32
    w_np = w
    if bf16:  # the same program in bf16; the weights and the batches as PyTorch bf16 tensors
        src = src.replace("f32[", "bf16[")
        w = {k: torch.from_numpy(v).to(tdt) for k, v in w_np.items()}
    prog = ragjit.compile(src, threads=a.threads, constants=list(w))  # weights bound once
    # bf16: the f32 program too, in the same run (the model's bf16/f32 ratio, issue 38)
    prog32 = ragjit.compile(open(os.path.join(ROOT, "examples", "encoder.rj")).read(), threads=a.threads,
                            constants=list(w_np)) if bf16 else None
    repack = ragjit.compile(src, threads=a.threads)  # the same, packing the weights in every call
    model = torch_model(torch, w_np, tdt)
    batches = [list(range(s, min(s + a.batch, a.sentences))) for s in range(0, a.sentences, a.batch)]
    order = np.argsort(lens, kind="stable")
    sorted_batches = [list(order[s:s + a.batch]) for s in range(0, a.sentences, a.batch)]

    def ragjit_batch(idx, p=prog):
        off = np.concatenate([[0], np.cumsum(lens[idx])]).astype(np.int64)
        vals = np.concatenate([xs[i] for i in idx])
        if bf16:  # a nested jagged tensor (NumPy has no bf16 without ml_dtypes)
            out = p(x=torch.nested.nested_tensor_from_jagged(torch.from_numpy(vals).to(tdt), torch.from_numpy(off)), **w)
            return out.float().numpy()
        return p(x=ragjit.Jagged(vals, off), **w)

    def repack_batch(idx):
        return ragjit_batch(idx, repack)

    def f32_batch(idx):
        off = np.concatenate([[0], np.cumsum(lens[idx])]).astype(np.int64)
        return prog32(x=ragjit.Jagged(np.concatenate([xs[i] for i in idx]), off), **w_np)

    def torch_batch(idx):
        T = int(lens[idx].max())
        x = torch.zeros(len(idx), T, E, dtype=tdt)
        for r, i in enumerate(idx):
            x[r, :lens[i]] = torch.from_numpy(xs[i]).to(tdt)
        return model(x, torch.from_numpy(lens[idx]))

    with torch.inference_mode():
        t_one = time.perf_counter()
        ref = torch_batch(batches[0]).float().numpy()
        t_one = time.perf_counter() - t_one
        err = np.abs(np.asarray(ragjit_batch(batches[0])) - ref).max()
        # PyTorch's timed passes, estimated from that batch (padded and sorted passes, --reps each)
        torch_est = t_one * len(batches) * 2 * a.reps
        same = all(np.array_equal(ragjit_batch(i), repack_batch(i)) for i in batches[:2])
        timings, cpu = {}, {}
        ours = [("ragjit", ragjit_batch, batches), ("repack", repack_batch, batches)]
        if bf16:
            ours.append(("f32", f32_batch, batches))
        theirs = [("padded", torch_batch, batches), ("sorted", torch_batch, sorted_batches)]
        for name, fn, bs in ours:  # warm: every binding's first call packs
            for idx in bs:
                fn(idx)
        # every contestant's passes interleaved, pass by pass, so that a machine whose speed
        # drifts over the minutes of the run (a shared host's does) moves them all alike
        group = ours + (theirs if torch_est <= a.torch_budget else [])
        ts = {name: [] for name, _, _ in group}
        cs = {name: [] for name, _, _ in group}
        for _ in range(a.reps):
            for name, fn, bs in group:
                c, t = time.process_time(), time.perf_counter()
                for idx in bs:
                    fn(idx)
                ts[name].append(time.perf_counter() - t)
                cs[name].append(time.process_time() - c)
        for name in ts:
            timings[name], cpu[name] = statistics.median(ts[name]), statistics.median(cs[name])
    print("encoder (6 layers, hidden %d, %d heads of %d, FFN %d, %s), %d sentences (median %d tokens, max %d, %d in "
          "all), batches of %d, %d threads, torch %s" % (E, H, D, F, a.dtype, a.sentences, int(np.median(lens)),
                                                       lens.max(), lens.sum(), a.batch, a.threads, torch.__version__))
    print("BLAS: %s" % ragjit.blas_info())
    if bf16:
        print("first runs: measured in f32 (bench/encoder.py without --dtype)")
    print("max |ragjit - PyTorch| on the first batch: %.2g" % err)
    print("compile: cold %.3f s, cached %.3f s (medians of 3 fresh processes; cold %s)"
          % (cold, warm, ", ".join("%.3f" % c for c in colds)))
    what = {"fresh": " (fresh process)", "prepare": " after prepare()",
            "packed": " (fresh process, no constants=: weights packed in every call)"}
    for p, samples in firsts.items():
        # the process whose wall-time ratio is the median, and the range over the processes
        ratios = sorted(t1 / t2 for t1, t2, _, _, _, _, _ in samples)
        t1, t2, c1, c2, f1, f2, ts = min(samples, key=lambda v: abs(v[0] / v[1] - statistics.median(ratios)))
        settle = sorted(v[6] / v[1] for v in samples)
        print("first run%s: %.1f ms against %.1f ms later on the same batch (first/later %.2f, %.2f-%.2f over %d "
              "processes); CPU %.1f against %.1f ms (%.2f); %d page faults against %d; the slowest of calls 2-%d "
              "%.1f ms (%.2f, %.2f-%.2f)"
              % (what[p], 1e3 * t1, 1e3 * t2, t1 / t2, ratios[0], ratios[-1], len(ratios), 1e3 * c1, 1e3 * c2,
                 c1 / c2, f1, f2, 1 + SETTLING, 1e3 * ts, ts / t2, settle[0], settle[-1]))
    if "padded" in timings:
        print("run, all batches: ragjit %.3f s, PyTorch padded %.3f s (%.2fx), PyTorch length-sorted %.3f s (%.2fx)"
              % (timings["ragjit"], timings["padded"], timings["padded"] / timings["ragjit"], timings["sorted"],
                 timings["sorted"] / timings["ragjit"]))
    else:
        print("run, all batches: ragjit %.3f s; PyTorch not timed: its first batch took %.1f s, so its passes "
              "would take about %.0f s, over --torch-budget %.0f" % (timings["ragjit"], t_one, torch_est, a.torch_budget))
    if bf16:
        print("ragjit f32 (the same model and batches, same run): %.3f s, CPU %.3f s; f32/bf16 %.2f wall, %.2f CPU"
              % (timings["f32"], cpu["f32"], timings["f32"] / timings["ragjit"], cpu["f32"] / cpu["ragjit"]))
    print("weights bound once (constants=): %.3f s, CPU %.3f s; packed in every call: %.3f s, CPU %.3f s; "
          "ratio %.3f wall, %.3f CPU; same bits: %s" % (timings["ragjit"], cpu["ragjit"], timings["repack"],
                                                        cpu["repack"], timings["repack"] / timings["ragjit"],
                                                        cpu["repack"] / cpu["ragjit"], same))
    memory_line(a.batch)


def ragjit_cli():
    """The ragjit command beside the library in use (RAGJIT_LIB's build), else the default build's."""
    lib = os.environ.get("RAGJIT_LIB")
    for path in ([os.path.join(os.path.dirname(lib), "tools", "ragjit")] if lib else []) + \
            [os.path.join(ROOT, "build", "tools", "ragjit")]:
        if os.access(path, os.X_OK):
            return path
    return None


def memory_line(batch):
    """The planned temporaries (ragjit bench's rj_bind_stats) of the whole model and of its first
    layer alone (encoder.rj cut after the first call), on one batch of the largest sentences."""
    cli = ragjit_cli()
    if not cli:
        print("memory: not measured (no ragjit command beside the library; build tools/ragjit)")
        return
    text = open(os.path.join(ROOT, "examples", "encoder.rj")).read()
    cut = text.index("\n", text.index("h = layer(x,")) + 1
    sizes = []
    with tempfile.TemporaryDirectory() as d:
        for name, src in (("model", text), ("layer", text[:cut] + "output h\n")):
            path = os.path.join(d, name + ".rj")
            with open(path, "w") as f:
                f.write(src)
            r = subprocess.run([cli, "bench", path, "--random", "B=%d,minlen=150,maxlen=200,seed=1" % batch,
                                "--reps", "1"], capture_output=True, text=True, env=dict(os.environ, RAGJIT_CACHE_DIR="off"))
            m = re.search(r"temporaries\s+([0-9.]+) MB", r.stdout)
            if r.returncode or not m:
                print("memory: ragjit bench failed: " + (r.stderr.strip() or r.stdout[-300:]))
                return
            sizes.append(float(m.group(1)))
    print("memory: planned temporaries of a batch of %d sentences of 150-200 tokens: %.1f MB for the whole model, "
          "%.1f MB for one layer alone (%.2fx)" % (batch, sizes[0], sizes[1], sizes[0] / sizes[1]))


def busy(a):
    """ragjit alone, 1 against 2 threads, quiet and with one processor kept busy by a child."""
    import ragjit
    rng = np.random.default_rng(35)
    lens = np.clip(np.round(np.exp(rng.normal(math.log(35), 0.6, a.sentences))), 8, 200).astype(np.int64)
    w = weights(rng)
    xs = [(0.5 * rng.standard_normal((n, E))).astype(np.float32) for n in lens]
    src = open(os.path.join(ROOT, "examples", "encoder.rj")).read()
    progs = {t: ragjit.compile(src, threads=t, constants=list(w)) for t in (1, 2)}
    batches = [list(range(s, min(s + a.batch, a.sentences))) for s in range(0, a.sentences, a.batch)]
    feeds = []
    for idx in batches:
        off = np.concatenate([[0], np.cumsum(lens[idx])]).astype(np.int64)
        feeds.append(ragjit.Jagged(np.concatenate([xs[i] for i in idx]), off))

    def one_pass(t):
        t0 = time.perf_counter()
        for x in feeds:
            progs[t](x=x, **w)
        return time.perf_counter() - t0

    for t in (1, 2):
        one_pass(t)  # compile on first use, first touch
    cpu = sorted(os.sched_getaffinity(0))[-1]
    spin = "import os; os.sched_setaffinity(0, {%d})\nwhile True: pass" % cpu
    print("encoder, %d sentences in batches of %d, %d passes a phase (median, s):" % (a.sentences, a.batch, a.reps))
    for phase in ("quiet", "busy"):
        child = subprocess.Popen([sys.executable, "-c", spin]) if phase == "busy" else None
        try:
            ts = {1: [], 2: []}
            for _ in range(a.reps):
                for t in (1, 2):
                    ts[t].append(one_pass(t))
        finally:
            if child:
                child.kill()
                child.wait()
        m1, m2 = statistics.median(ts[1]), statistics.median(ts[2])
        print("  %-5s 1 thread %.3f, 2 threads %.3f: 2/1 = %.2f" % (phase, m1, m2, m2 / m1))


if __name__ == "__main__":
    child = "--first-child" in sys.argv  # its last line is numbers for first_run to read
    if not child:
        print_load("before")
    main()
    if not child:
        print_load("after")
