#!/usr/bin/env python3
"""ragjit from Python without a compiled extension: ctypes over libragjit.so, data through DLPack.

A jagged batch goes in as two DLPack tensors (packed values and int64 offsets, the layout of
PyTorch's nested jagged tensors), the program runs, and the output comes back as a DLPack
tensor that the framework takes over without a copy. With PyTorch installed this runs on its
nested jagged tensors (on the GPU when there is one, with the CUDA target) and compares with
PyTorch; otherwise on NumPy arrays on the CPU, compared with NumPy.

    python3 examples/dlpack.py [path/to/libragjit.so.0]

Without an argument it takes $RAGJIT_LIB, else the library of the build next to this file
(build/libragjit.so.0 in the repository, as ./build.sh makes it), else an installed one
(libragjit.so.0 where the loader finds it). A PyTorch without the jagged layout (before 2.1,
such as Debian 12's python3-torch 1.13) is passed over for NumPy, saying so.

Exit status 0: the results agree; 1: they do not (or ragjit failed); 2: bad usage, or no
libragjit found; 77: neither PyTorch nor NumPy is importable.
"""
import ctypes
import os
import sys

c_int64_p = ctypes.POINTER(ctypes.c_int64)


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", c_int64_p), ("strides", c_int64_p),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor)))]

KDL_CPU, KDL_CUDA = 1, 2
RJ_TARGET_CPU, RJ_TARGET_CUDA = 1, 2

PROGRAM = b"""
ragged j : B
input x : f32[B, j, 8]
input w : f32[8]
y = softmax(x * w, dim=1)
output y
"""


def load(path):
    lib = ctypes.CDLL(path)
    p, i, i64, s = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_char_p
    sigs = {
        "rj_ctx_new": (p, [p, p]), "rj_ctx_free": (None, [p]), "rj_ctx_error": (s, [p]),
        "rj_graph_parse": (p, [p, s, s]), "rj_graph_free": (None, [p]),
        "rj_graph_find": (i, [p, s]), "rj_program_new": (p, [p, i]), "rj_program_free": (None, [p]),
        "rj_bind_new": (p, [p]), "rj_bind_free": (None, [p]), "rj_program_run": (i, [p, p]),
        "rj_bind_dlpack": (i, [p, i, p, p]),
        "rj_bind_export_dlpack": (i, [p, i, ctypes.POINTER(ctypes.POINTER(DLManagedTensor)),
                                      ctypes.POINTER(ctypes.POINTER(DLManagedTensor))]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    del i64
    return lib


class Capsule:
    """Hands a DLManagedTensor to a framework's from_dlpack: the legacy "dltensor" capsule."""

    def __init__(self, mt, device):
        new = ctypes.pythonapi.PyCapsule_New
        new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        self.capsule = new(ctypes.cast(mt, ctypes.c_void_p), b"dltensor", None)
        self.device = device

    def __dlpack__(self, stream=None, **kw):
        return self.capsule

    def __dlpack_device__(self):
        return self.device


def dltensor(data_ptr, device, code, bits, shape):
    shp = (ctypes.c_int64 * len(shape))(*shape)
    t = DLTensor(data_ptr, DLDevice(*device), len(shape), DLDataType(code, bits, 1), shp, None, 0)
    return t, shp  # keep the shape array alive with the tensor


def run(lib, target, xv, off, w, device):
    """Runs PROGRAM on values xv (data pointer, shape), offsets and weights; returns the output's
    values and offsets as DLManagedTensor pointers."""
    ctx = lib.rj_ctx_new(None, None)
    g = lib.rj_graph_parse(ctx, PROGRAM, b"softmax.rj")
    p = lib.rj_program_new(g, target)
    if not p:
        raise RuntimeError(lib.rj_ctx_error(ctx).decode())
    b = lib.rj_bind_new(p)
    tx, sx = dltensor(xv[0], device, 2, 32, xv[1])
    to, so = dltensor(off[0], device, 0, 64, off[1])
    tw, sw = dltensor(w[0], device, 2, 32, w[1])
    for st in (lib.rj_bind_dlpack(b, lib.rj_graph_find(g, b"x"), ctypes.byref(tx), ctypes.byref(to)),
               lib.rj_bind_dlpack(b, lib.rj_graph_find(g, b"w"), ctypes.byref(tw), None),
               lib.rj_program_run(p, b)):
        if st:
            raise RuntimeError(lib.rj_ctx_error(ctx).decode())
    mv, mo = ctypes.POINTER(DLManagedTensor)(), ctypes.POINTER(DLManagedTensor)()
    if lib.rj_bind_export_dlpack(b, lib.rj_graph_find(g, b"y"), ctypes.byref(mv), ctypes.byref(mo)):
        raise RuntimeError(lib.rj_ctx_error(ctx).decode())
    # the exported tensors keep what they need alive: everything else can go
    lib.rj_bind_free(b)
    lib.rj_program_free(p)
    lib.rj_graph_free(g)
    lib.rj_ctx_free(ctx)
    return mv, mo


def with_torch(lib, torch):
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    target, dl_dev = (RJ_TARGET_CUDA, (KDL_CUDA, 0)) if dev == "cuda" else (RJ_TARGET_CPU, (KDL_CPU, 0))
    gen = torch.Generator().manual_seed(3)
    parts = [torch.randn(n, 8, generator=gen) for n in (3, 0, 5, 1, 7)]
    nt = torch.nested.nested_tensor(parts, layout=torch.jagged).to(dev)
    w = torch.linspace(0.5, 2.0, 8).to(dev)
    values, offsets = nt.values().contiguous(), nt.offsets().to(torch.int64).contiguous()
    mv, mo = run(lib, target, (values.data_ptr(), list(values.shape)), (offsets.data_ptr(), [offsets.numel()]),
                 (w.data_ptr(), [8]), dl_dev)
    yv = torch.utils.dlpack.from_dlpack(Capsule(mv, dl_dev).capsule)
    yo = torch.utils.dlpack.from_dlpack(Capsule(mo, dl_dev).capsule)
    got = torch.nested.nested_tensor_from_jagged(yv, yo)
    want = torch.softmax(nt * w, dim=1)
    err = max((a - b).abs().max().item() if a.numel() else 0.0 for a, b in zip(got.unbind(), want.unbind()))
    print("PyTorch %s: nested jagged tensor of %d items through DLPack; max |ragjit - torch| = %.3g"
          % (dev, len(parts), err))
    return err < 1e-5


def with_numpy(lib, np):
    rng = np.random.default_rng(3)
    lens = [3, 0, 5, 1, 7]
    off = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    x = rng.standard_normal((int(off[-1]), 8)).astype(np.float32)
    w = np.linspace(0.5, 2.0, 8).astype(np.float32)
    mv, mo = run(lib, RJ_TARGET_CPU, (x.ctypes.data, list(x.shape)), (off.ctypes.data, [off.size]),
                 (w.ctypes.data, [8]), (KDL_CPU, 0))
    y = np.from_dlpack(Capsule(mv, (KDL_CPU, 0)))
    yo = np.from_dlpack(Capsule(mo, (KDL_CPU, 0)))
    err = 0.0
    for b in range(len(lens)):
        z = x[off[b]:off[b + 1]] * w
        if len(z):
            e = np.exp(z - z.max(axis=0))
            err = max(err, float(np.abs(y[yo[b]:yo[b + 1]] - e / e.sum(axis=0)).max()))
    print("NumPy %s on the CPU: %d items through DLPack (values %s, offsets %s); max |ragjit - numpy| = %.3g"
          % (np.__version__, len(lens), y.shape, list(yo), err))
    return err < 1e-5


def find_library():
    """The library to load: the argument, $RAGJIT_LIB, the repository's build, an installed one."""
    if len(sys.argv) > 2 or (len(sys.argv) == 2 and sys.argv[1].startswith("-")):
        raise UsageError("python3 examples/dlpack.py [path/to/libragjit.so.0]")
    if len(sys.argv) == 2:
        return sys.argv[1]
    if os.environ.get("RAGJIT_LIB"):
        return os.environ["RAGJIT_LIB"]
    built = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "libragjit.so.0")
    return os.path.normpath(built) if os.path.exists(built) else "libragjit.so.0"


class UsageError(Exception):
    pass


def torch_with_jagged():
    """PyTorch when it is importable and has the jagged layout, else None (saying why)."""
    try:
        import torch
    except ImportError:
        return None
    if not (hasattr(torch, "jagged") and hasattr(getattr(torch, "nested", None), "nested_tensor_from_jagged")):
        print("PyTorch %s has no jagged layout (torch.jagged, PyTorch 2.1 or later): using NumPy instead"
              % getattr(torch, "__version__", "?"))
        return None
    return torch


def main():
    try:
        path = find_library()
        lib = load(path)
    except UsageError as e:
        print("usage: %s" % e, file=sys.stderr)
        return 2
    except OSError as e:
        print("dlpack.py: cannot load %s (%s). Build ragjit first (./build.sh demo makes "
              "build/libragjit.so.0), or give the library's path as the argument or in RAGJIT_LIB"
              % (path, e), file=sys.stderr)
        return 2
    try:
        torch = torch_with_jagged()
        if torch is not None:
            return 0 if with_torch(lib, torch) else 1
        try:
            import numpy as np
        except ImportError:
            print("neither PyTorch nor NumPy is importable by %s: skipping" % sys.executable)
            return 77
        if not hasattr(np, "from_dlpack"):
            print("NumPy %s has no from_dlpack (1.22 or later): skipping" % np.__version__)
            return 77
        return 0 if with_numpy(lib, np) else 1
    except RuntimeError as e:  # ragjit's own message
        print("dlpack.py: ragjit failed: %s" % e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
