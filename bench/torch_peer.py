#!/usr/bin/env python3
"""torch_peer.py - ragjit against PyTorch's nested jagged tensors, on the same data, in one run.

The product's claim is a speed-up over what a PyTorch user writes for the same ragged
computation. This script measures it on the machine at hand: for each of bench/'s workloads
W1..W6 (B items of lengths uniform in 1..maxlen, D = 256, f32) it runs `ragjit bench` on
generated data, saved with --save-data, then loads that very data into PyTorch and times
what a PyTorch user would write:

  W1 relu(x * w + b)        torch.relu(x * w + b) on the nested tensor
  W2 softmax(x, dim=1)      torch.softmax(x, dim=1) (over the ragged dim)
  W3 unpad(pad(x)*2+1, j1)  to_padded_tensor(0), the dense ops, then the valid rows picked
                            out by a mask made once ahead (x.values()'s layout)
  W4 sum(x, dim=1)          x.sum(dim=1) (over the ragged dim)
  W5 layer_norm(x, D, w, b) torch.nn.functional.layer_norm
  W6 pad(x, 0)              x.to_padded_tensor(0.0)

x is torch.nested.nested_tensor_from_jagged(values, offsets): the same packed values and
int64 offsets as ragjit's. Each side's median of --reps runs after a warm-up; on the CPU
both use --threads threads (torch.set_num_threads), on CUDA ragjit's time is its kernels' by
the device's timers (`ragjit bench --target cuda`, host data: copies are timed apart) and
PyTorch's the op's on device-resident tensors by CUDA events. With --compile, PyTorch's
torch.compile of each op is timed too (its compile time is not counted). GB/s count every
input read once and every output written once, the same bytes for both.

    bench/torch_peer.py RAGJIT [--device cpu|cuda] [--B 256] [--maxlen 1024] [--threads N]
                               [--reps 20] [--only W1,W2] [--compile]

RAGJIT is the command (build/tools/ragjit). Needs PyTorch (not one of ragjit's dependencies:
this is a measurement, not a test); NumPy is not needed. The persistent kernel cache is off.
Prints one line per workload: ragjit's and PyTorch's time, GB/s, and PyTorch's time over
ragjit's (above 1: ragjit is faster).
"""
import ast
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pipeline_check import WORKLOADS, workload_files  # noqa: E402  name: (ragjit body, uses w and b)

D = 256


def load_npy(torch, path):
    """A .npy file of ragjit's (little-endian f4 or i8, C order) as a tensor, without NumPy."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        sys.exit("torch_peer: %s is not a .npy file" % path)
    major = data[6]
    hl = int.from_bytes(data[8:10] if major == 1 else data[8:12], "little")
    start = (10 if major == 1 else 12) + hl
    head = ast.literal_eval(data[10 if major == 1 else 12:start].decode("latin1"))
    dtypes = {"<f4": torch.float32, "<i8": torch.int64, "<f8": torch.float64, "<i4": torch.int32}
    if head["descr"] not in dtypes or head["fortran_order"]:
        sys.exit("torch_peer: %s: unsupported layout %s" % (path, head))
    t = torch.frombuffer(bytearray(data[start:]), dtype=dtypes[head["descr"]])
    return t.reshape(head["shape"]) if head["shape"] else t.reshape(())


def ragjit_time(ragjit, program, spec, args, data_dir):
    env = dict(os.environ, RAGJIT_CACHE_DIR="off")
    cmd = [ragjit, "bench", program, "--random", spec, "--reps", str(args["reps"]), "--save-data", data_dir]
    if args["device"] == "cuda":
        cmd += ["--target", "cuda"]
    else:
        cmd += ["--threads", str(args["threads"])]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    pat = r"kernels\s+([0-9.]+) ms median" if args["device"] == "cuda" else r"run median ([0-9.]+) ms"
    m = re.search(pat, out.stdout)
    if out.returncode or not m:
        sys.exit("torch_peer: %s failed:\n%s%s" % (" ".join(cmd), out.stdout, out.stderr))
    return float(m.group(1)) * 1e-3


def torch_ops(torch, name, x, w, b, mask):
    """The PyTorch user's program for workload name, as a function of no arguments."""
    F = torch.nn.functional
    if name == "W1":
        return lambda: torch.relu(x * w + b)
    if name == "W2":
        return lambda: torch.softmax(x, dim=1)
    if name == "W3":
        return lambda: (x.to_padded_tensor(0.0) * 2.0 + 1.0)[mask]
    if name == "W4":
        return lambda: x.sum(dim=1)
    if name == "W5":
        return lambda: F.layer_norm(x, (D,), w, b)
    return lambda: x.to_padded_tensor(0.0)


def torch_time(torch, fn, reps, cuda):
    fn()  # warm-up (and, compiled, the compile)
    times = []
    for _ in range(reps):
        if cuda:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e) * 1e-3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def out_bytes(y):
    if getattr(y, "is_nested", False):
        return y.values().numel() * y.values().element_size()
    return y.numel() * y.element_size()


def main():
    argv = sys.argv[1:]
    if not argv or argv[0].startswith("-"):
        sys.exit(__doc__)
    ragjit = argv[0]
    args = {"device": "cpu", "B": 256, "maxlen": 1024, "threads": os.cpu_count(), "reps": 20,
            "only": None, "compile": False}
    i = 1
    while i < len(argv):
        a = argv[i]
        if a == "--compile":
            args["compile"] = True
            i += 1
            continue
        if i + 1 >= len(argv) or a[2:] not in args:
            sys.exit(__doc__)
        v = argv[i + 1]
        args[a[2:]] = v if a in ("--device", "--only") else int(v)
        i += 2
    if args["device"] not in ("cpu", "cuda"):
        sys.exit("torch_peer: --device is cpu or cuda")
    try:
        import torch
    except ImportError:
        sys.exit("torch_peer: PyTorch is not installed (python3 -c 'import torch' fails)")
    cuda = args["device"] == "cuda"
    if cuda and not torch.cuda.is_available():
        sys.exit("torch_peer: PyTorch sees no CUDA device")
    if not cuda:
        torch.set_num_threads(args["threads"])
    dev = torch.device(args["device"])
    names = [n for n in WORKLOADS if not args["only"] or n in args["only"].split(",")]
    spec = "B=%d,minlen=1,maxlen=%d,seed=7" % (args["B"], args["maxlen"])
    print("ragjit %s against PyTorch %s nested jagged tensors on %s: B=%d, lengths 1..%d, D=%d, f32%s, "
          "median of %d" % (ragjit, torch.__version__, args["device"], args["B"], args["maxlen"], D,
                            "" if cuda else ", %d threads" % args["threads"], args["reps"]))
    head = "%-30.30s %11s %9s %11s %9s %9s" % ("workload", "ragjit ms", "GB/s", "torch ms", "GB/s", "torch/rj")
    if args["compile"]:
        head += " %13s %9s" % ("compiled ms", "comp/rj")
    print(head)
    with tempfile.TemporaryDirectory() as tmp:
        workload_files(tmp)
        for name in names:
            body, weights = WORKLOADS[name]
            prog = os.path.join(tmp, name + ".rj")
            data = os.path.join(tmp, name)
            rj = ragjit_time(ragjit, prog, spec, args, data)
            vals = load_npy(torch, os.path.join(data, "x.npy")).to(dev)
            offs = load_npy(torch, os.path.join(data, "j1.npy")).to(dev)
            w = load_npy(torch, os.path.join(data, "w.npy")).to(dev) if weights else None
            b = load_npy(torch, os.path.join(data, "b.npy")).to(dev) if weights else None
            lens = offs[1:] - offs[:-1]
            L = int(lens.max()) if lens.numel() else 0
            # the lengths' bounds given, as a user who knows them would (without them PyTorch
            # pads to the total row count)
            x = torch.nested.nested_tensor_from_jagged(vals, offs, min_seqlen=int(lens.min()), max_seqlen=L)
            mask = torch.arange(L, device=dev)[None, :] < lens[:, None]
            fn = torch_ops(torch, name, x, w, b, mask)
            with torch.no_grad():
                y = fn()
                nbytes = vals.numel() * 4 + (2 * D * 4 if weights else 0) + out_bytes(y)
                tt = torch_time(torch, fn, args["reps"], cuda)
                line = "%-30.30s %11.3f %9.2f %11.3f %9.2f %9.2f" % (
                    name + " " + body[4:], rj * 1e3, nbytes / rj * 1e-9, tt * 1e3, nbytes / tt * 1e-9, tt / rj)
                if args["compile"]:
                    try:
                        tc = torch_time(torch, torch.compile(fn), args["reps"], cuda)
                        line += " %13.3f %9.2f" % (tc * 1e3, tc / rj)
                    except Exception as e:  # torch.compile may not support an op of nested tensors
                        line += "  compile failed: %s" % str(e).splitlines()[0][:60]
            print(line, flush=True)


if __name__ == "__main__":
    main()
