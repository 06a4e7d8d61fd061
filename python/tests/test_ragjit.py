"""The ragjit package against NumPy: float64 references written from the documented semantics
(docs/guide.md), on packed jagged arrays, views with holes, dense arrays and every dtype;
errors with their status and message; inputs and outputs bound without copies."""
import os
import platform
import threading

import numpy as np
import pytest

import ragjit
from ragjit import _core

LENS = [3, 0, 5, 1, 7]


def offsets_of(lens):
    return np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)


def jagged(rng, lens, inner, dtype=np.float32):
    off = offsets_of(lens)
    return ragjit.Jagged(rng.standard_normal((int(off[-1]),) + inner).astype(dtype), off)


def close(got, want, tol):
    got = np.asarray(got, dtype=np.float64)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)


def softmax64(a, axis):
    a = a.astype(np.float64)
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.fixture
def rng():
    return np.random.default_rng(37)


def test_softmax_over_the_ragged_dim(ctx, rng):
    prog = ctx.compile("""
ragged j1 : B
input x : f32[B, j1, 8]
input w : f32[8]
y = softmax(x * w, dim=1)
output y
""")
    x = jagged(rng, LENS, (8,))
    w = np.linspace(0.5, 2.0, 8).astype(np.float32)
    y = prog(x=x, w=w)
    assert isinstance(y, ragjit.Jagged)
    assert y.values.dtype == np.float32 and y.values.shape == x.values.shape
    assert y.offsets is x.offsets and y.lengths is None
    for got, item in zip(y.unbind(), x.unbind()):
        if len(item):
            close(got, softmax64(item.astype(np.float64) * w, axis=0), 1e-5)


def test_sum_mean_max_and_empty_items(ctx, rng):
    prog = ctx.compile("""
ragged j1 : B
input x : f32[B, j1, 16]
s = x.sum(dim=1)
m = x.mean(dim=1)
mx = x.max(dim=1)
output s, m, mx
""")
    x = jagged(rng, LENS, (16,))
    out = prog.run(x=x)
    assert list(out) == ["s", "m", "mx"]  # output order
    items = [i.astype(np.float64) for i in x.unbind()]
    close(out["s"], np.stack([i.sum(0) for i in items]), 1e-5)
    with np.errstate(invalid="ignore"):
        close(out["m"], np.stack([i.mean(0) if len(i) else np.full(16, np.nan) for i in items]), 1e-5)
    close(out["mx"], np.stack([i.max(0) if len(i) else np.full(16, -np.inf) for i in items]), 0)
    # an empty item: sum 0 (+0.0), mean NaN, max -inf
    assert (out["s"][1] == 0).all() and np.isnan(out["m"][1]).all() and np.isneginf(out["mx"][1]).all()
    # __call__: a tuple in output order
    s, m, mx = prog(x=x)
    np.testing.assert_array_equal(s, out["s"])


def test_layer_norm(ctx, rng):
    prog = ctx.compile("""
ragged j1 : B
input x : f32[B, j1, 32]
input g : f32[32]
input b : f32[32]
y = layer_norm(x, 32, g, b, eps=1e-5)
output y
""")
    x = jagged(rng, LENS, (32,))
    g = rng.standard_normal(32).astype(np.float32)
    b = rng.standard_normal(32).astype(np.float32)
    y = prog(x=x, g=g, b=b)
    v = x.values.astype(np.float64)
    mu = v.mean(1, keepdims=True)
    var = ((v - mu) ** 2).mean(1, keepdims=True)
    close(y.values, (v - mu) / np.sqrt(var + 1e-5) * g + b, 1e-4)


def test_embedding_bag(ctx, rng):
    prog = ctx.compile("""
ragged j1 : B
input table : f32[V, 64]
input ids : i64[B, j1]
bag = embedding(table, ids).sum(dim=1)
output bag
""")
    V = 50
    table = rng.standard_normal((V, 64)).astype(np.float32)
    off = offsets_of(LENS)
    ids = ragjit.Jagged(rng.integers(0, V, int(off[-1])).astype(np.int64), off)
    bag = prog(table=table, ids=ids)
    assert bag.shape == (len(LENS), 64)
    want = np.stack([table[i].astype(np.float64).sum(0) for i in ids.unbind()])
    close(bag, want, 1e-5)
    # an id out of range: IndexRangeError naming the input and the position
    bad = ids.values.copy()
    bad[int(off[2]) + 1] = V
    with pytest.raises(ragjit.IndexRangeError) as e:
        prog(table=table, ids=ragjit.Jagged(bad, off))
    assert e.value.status == 21
    assert "the index at [2, 1] of input ids is %d, out of range [0, %d)" % (V, V) in str(e.value)


def test_view_with_holes(ctx, rng):
    """A padded (B, L, D) buffer read as a view with holes (torch.nested.narrow's layout): the
    output keeps the holes and the input's offsets and lengths."""
    prog = ctx.compile("""
ragged j1 : B
input x : f32[B, j1, 4]
y = softmax(x, dim=1) * 2.0
s = x.sum(dim=1)
output y, s
""")
    B, L = len(LENS), max(LENS)
    padded = rng.standard_normal((B, L, 4)).astype(np.float32)
    lengths = np.array(LENS, dtype=np.int64)
    x = ragjit.Jagged(padded.reshape(B * L, 4), np.arange(B + 1, dtype=np.int64) * L, lengths)
    y, s = prog(x=x)
    assert y.offsets is x.offsets and y.lengths is x.lengths
    for b, n in enumerate(LENS):
        item = padded[b, :n].astype(np.float64)
        close(s[b], item.sum(0), 1e-5)
        if n:
            close(y.unbind()[b], softmax64(item, 0) * 2, 1e-5)
    close(x.to_padded()[:, :L], np.where(np.arange(L)[None, :, None] < lengths[:, None, None], padded, 0), 0)


def test_pad_length_as_a_size(ctx, rng):
    prog = ctx.compile("""
ragged j1 : B
input x : f64[B, j1, 2]
p = pad(x, value=-1.0, len=L)
output p
""")
    x = jagged(rng, LENS, (2,), np.float64)
    p = prog(x=x, L=9)
    assert p.shape == (len(LENS), 9, 2) and p.dtype == np.float64
    np.testing.assert_array_equal(p, x.to_padded(-1.0, 9))
    with pytest.raises(ragjit.PadLengthError) as e:
        prog(x=x, L=4)
    assert e.value.status == 15


def test_dtypes(ctx, rng):
    prog = ctx.compile("""
ragged j1 : B
input a : i32[B, j1]
input f : f64[N]
input m : bool[N]
pos = a > 0
total = a.sum(dim=1)
twice = a * 2
scaled = where(m, f * 0.5, f)
output pos, total, twice, scaled
""")
    off = offsets_of(LENS)
    a = ragjit.Jagged(rng.integers(-5, 5, int(off[-1])).astype(np.int32), off)
    f = rng.standard_normal(6)
    m = np.array([True, False, True, True, False, False])
    pos, total, twice, scaled = prog(a=a, f=f, m=m)
    assert pos.values.dtype == np.bool_ and total.dtype == np.int64 and twice.values.dtype == np.int32
    assert scaled.dtype == np.float64
    np.testing.assert_array_equal(pos.values, a.values > 0)
    np.testing.assert_array_equal(total, [int(i.sum()) for i in a.unbind()])
    np.testing.assert_array_equal(twice.values, a.values * 2)
    np.testing.assert_array_equal(scaled, np.where(m, f * 0.5, f))
    # Python lists are converted; an array of another dtype is refused (no silent copy)
    _, _, _, s2 = prog(a=a, f=f.tolist(), m=m.tolist())
    np.testing.assert_array_equal(s2, scaled)
    with pytest.raises(ragjit.DtypeError) as e:
        prog(a=a, f=f.astype(np.float32), m=m)
    assert e.value.status == 5 and "input f : f64[N]" in str(e.value) and "float32" in str(e.value)
    with pytest.raises(ragjit.DtypeError):
        prog(a=ragjit.Jagged(a.values.astype(np.int64), off), f=f, m=m)


def test_errors_carry_status_and_message(ctx, rng):
    with pytest.raises(ragjit.ParseError) as e:
        ctx.compile("input x : f32[N]\ny = frobnicate(x)\noutput y\n", filename="bad.rj")
    assert e.value.status == 16 and e.value.status_name == "parse"
    assert "bad.rj:2:5: unknown function 'frobnicate'" in str(e.value)
    assert isinstance(e.value, ragjit.Error) and e.value.message == str(e.value)
    with pytest.raises(ragjit.ShapeError) as e:
        ctx.compile("ragged j1 : B\nragged j2 : B\ninput x : f32[B, j1]\ninput y : f32[B, j2]\n"
                    "z = x + y\noutput z\n")
    assert e.value.status == 4
    prog = ctx.compile("ragged j1 : B\ninput x : f32[B, j1, 4]\ny = x * 2.0\noutput y\n")
    off = offsets_of(LENS)
    vals = np.zeros((int(off[-1]), 4), np.float32)
    with pytest.raises(ragjit.OffsetsEndError) as e:  # the last offset is not the row count
        prog(x=ragjit.Jagged(vals[:-1], off))
    assert e.value.status == 12 and "j1" in str(e.value)
    bad = off.copy()
    bad[2], bad[3] = bad[3], bad[2]
    with pytest.raises(ragjit.OffsetsOrderError) as e:
        prog(x=ragjit.Jagged(vals, bad))
    assert e.value.status == 11
    with pytest.raises(ragjit.ShapeError) as e:  # inner dim 4 given 5
        prog(x=ragjit.Jagged(np.zeros((int(off[-1]), 5), np.float32), off))
    assert "input x : f32[B, j1, 4]" in str(e.value)
    with pytest.raises(ragjit.UnboundError):
        prog()
    with pytest.raises(ragjit.ArgumentError):
        prog(x=ragjit.Jagged(vals, off), nosuch=1)
    with pytest.raises(ragjit.ShapeError):
        prog(x=vals)  # dense given for a jagged input
    with pytest.raises(ragjit.ArgumentError):
        ctx.compile("input x : f32[N]\noutput x\n", target="tpu")
    with pytest.raises(ragjit.Error) as e:
        prog.dump("no-such-stage")
    assert e.value.status != 0 and str(e.value)


def test_sizes_must_agree(ctx):
    prog = ctx.compile("input a : f32[N]\ninput b : f32[N]\nc = a + b\noutput c\n")
    with pytest.raises(ragjit.SizeError) as e:
        prog(a=np.zeros(3, np.float32), b=np.zeros(4, np.float32))
    assert "N is 3 for input a but 4 for input b" in str(e.value)
    prog2 = ctx.compile("ragged j1 : B\ninput x : f32[B, j1]\ninput y : f32[B, j1]\nz = x + y\noutput z\n")
    x = ragjit.Jagged(np.zeros(3, np.float32), [0, 1, 3])
    with pytest.raises(ragjit.ShapeError):
        prog2(x=x, y=ragjit.Jagged(np.zeros(3, np.float32), [0, 2, 3]))
    z = prog2(x=x, y=ragjit.Jagged(np.ones(3, np.float32), [0, 1, 3]))  # equal offsets: fine
    np.testing.assert_array_equal(z.values, np.ones(3))


def test_zero_copy(ctx, rng, monkeypatch):
    """Contiguous inputs are bound by their data pointers, outputs are NumPy memory that ragjit
    writes in place, and a jagged output shares its input's offsets."""
    prog = ctx.compile("""
ragged j1 : B
input x : f32[B, j1, 8]
input w : f32[8]
y = relu(x * w)
s = y.sum(dim=1)
output y, s
""")
    bound, outs = {}, {}
    lib = _core.LIB
    real_in, real_out = lib.rj_bind_input, lib.rj_bind_output

    def bind_input(b, node, data, numel):
        bound[node] = data
        return real_in(b, node, data, numel)

    def bind_output(b, node, data, cap):
        outs[node] = data
        return real_out(b, node, data, cap)

    monkeypatch.setattr(lib, "rj_bind_input", bind_input)
    monkeypatch.setattr(lib, "rj_bind_output", bind_output)
    x = jagged(rng, LENS, (8,))
    w = rng.standard_normal(8).astype(np.float32)
    y, s = prog(x=x, w=w)
    nodes = {p.name: p.node for p in prog.inputs + prog.outputs}
    assert bound[nodes["x"]] == x.values.ctypes.data
    assert bound[nodes["w"]] == w.ctypes.data
    assert outs[nodes["y"]] == y.values.ctypes.data and outs[nodes["s"]] == s.ctypes.data
    # outputs of 4 KiB or more start on 64 bytes, as ragjit's own do
    big = ragjit.Jagged(np.ones((300, 8), np.float32), [0, 100, 300])
    yb, _ = prog(x=big, w=w)
    assert yb.values.ctypes.data % 64 == 0
    # from 64 KiB on, half a page past a page (4K aliasing against NumPy's inputs: _jagged.py)
    huge = ragjit.Jagged(np.ones((3000, 8), np.float32), [0, 1000, 3000])
    yh, _ = prog(x=huge, w=w)
    assert yh.values.ctypes.data % 4096 == 2048
    close(yh.values, np.maximum(huge.values.astype(np.float64) * w, 0), 1e-6)
    assert y.offsets is x.offsets
    close(y.values, np.maximum(x.values.astype(np.float64) * w, 0), 1e-6)
    # a non-contiguous input is copied (and still right)
    xs = np.asarray(rng.standard_normal((int(x.offsets[-1]), 16)), np.float32)[:, ::2]
    y2, _ = prog(x=ragjit.Jagged(xs, x.offsets), w=w)
    assert bound[nodes["x"]] != xs.ctypes.data
    close(y2.values, np.maximum(xs.astype(np.float64) * w, 0), 1e-6)


def test_dump_stages(ctx):
    prog = ctx.compile("ragged j1 : B\ninput x : f32[B, j1, 8]\ny = softmax(relu(x), dim=1)\noutput y\n")
    assert "input x : f32[B, j1, 8]" in prog.dump("graph")
    assert "kernel" in prog.dump("fused")
    assert "define" in prog.dump("llvm")
    assert "__kernel" in prog.dump("opencl")


def test_reference_target_and_threads(rng):
    src = "ragged j1 : B\ninput x : f64[B, j1, 32]\ny = log_softmax(x, dim=1)\nm = y.max(dim=1)\noutput y, m\n"
    x = jagged(rng, [40, 0, 130, 7, 300, 1], (32,), np.float64)
    ref = ragjit.compile(src, target="reference")(x=x)
    one = ragjit.compile(src, threads=1)(x=x)
    two = ragjit.compile(src, threads=2)
    assert two.context.threads == 2
    for got in (one, two(x=x)):
        close(got[0].values, ref[0].values, 1e-12)
        close(got[1], ref[1], 1e-12)
    # one program on several threads at once, each run with its own binding
    errors = []

    def worker():
        try:
            for _ in range(5):
                close(two(x=x)[1], ref[1], 1e-12)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_context_settings(tmp_path, rng):
    c = ragjit.Context(threads=1, memory_limit=1 << 30, cache_dir=tmp_path)
    assert (c.threads, c.memory_limit, c.cache_dir) == (1, 1 << 30, str(tmp_path))
    prog = c.compile("ragged j1 : B\ninput x : f32[B, j1, 8]\ny = pad(x, value=0.0)\noutput y\n")
    x = jagged(rng, LENS, (8,))
    np.testing.assert_array_equal(prog(x=x), x.to_padded())
    assert any(tmp_path.rglob("*")), "the kernel cache wrote nothing"
    # the limit counts what ragjit allocates (outputs bound from Python do not count): the
    # reference interpreter's intermediate x * 2.0 of 4000 x 8 floats needs more than 1 KiB
    c.memory_limit = 1024
    ref = c.compile("ragged j1 : B\ninput x : f32[B, j1, 8]\ny = (x * 2.0).sum(dim=1)\noutput y\n",
                    target="reference")
    with pytest.raises(ragjit.SizeError) as e:
        ref(x=ragjit.Jagged(np.zeros((4000, 8), np.float32), [0, 4000]))
    assert e.value.status == 8 and str(e.value)
    with pytest.raises(TypeError):
        ragjit.compile("input x : f32[N]\noutput x\n", threads=1, context=c)


def test_jagged_helpers():
    j = ragjit.Jagged.from_list([np.ones((2, 3)), np.zeros((0, 3)), np.full((1, 3), 2.0)], np.float32)
    assert j.batch == len(j) == 3 and j.offsets.tolist() == [0, 2, 2, 3]
    assert j.values.dtype == np.float32 and j.values.shape == (3, 3)
    assert j.to_padded(-1.0).shape == (3, 2, 3)
    j32 = ragjit.Jagged(np.zeros(3), np.array([0, 1, 3], np.int32))
    assert j32.offsets.dtype == np.int64
    with pytest.raises(ragjit.ShapeError):
        ragjit.Jagged(np.zeros(3), [0, 1, 3], lengths=[1])
    with pytest.raises(ragjit.DtypeError):
        ragjit.Jagged(np.zeros(3), [0.0, 1.5, 3.0])
    assert "offsets=[0, 2, 2, 3]" in repr(j)


def test_program_introspection(ctx):
    prog = ctx.compile("ragged j1 : B\ninput x : f32[B, j1, 8]\ninput unused : f32[4]\n"
                       "y = x * 2.0\noutput y\n")
    assert prog.input_names == ["x", "unused"] and prog.output_names == ["y"]
    assert any("unused" in w for w in prog.warnings)
    assert "ragjit.Program cpu" in repr(prog)
    x = ragjit.Jagged(np.ones((2, 8), np.float32), [0, 2])
    np.testing.assert_array_equal(prog(x=x).values, 2 * np.ones((2, 8)))  # unused needs no data


class DLPackOnly:
    """An array known only through the DLPack protocol, as a CPU PyTorch tensor offers it."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kw):
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


class FakeNested:
    """The surface of a PyTorch nested jagged tensor that ragjit reads."""

    is_nested = True

    def __init__(self, values, offsets, lengths=None, ragged_idx=1):
        self._v, self._o, self._l, self._ragged_idx = values, offsets, lengths, ragged_idx

    def values(self):
        return DLPackOnly(self._v)

    def offsets(self):
        return DLPackOnly(self._o)

    def lengths(self):
        return None if self._l is None else DLPackOnly(self._l)


def test_dlpack_and_nested_inputs(ctx, rng, monkeypatch):
    """Objects of the DLPack protocol (CPU PyTorch tensors) and nested jagged tensors are read
    in place through np.from_dlpack."""
    prog = ctx.compile("ragged j1 : B\ninput x : f32[B, j1, 4]\ninput w : f32[4]\n"
                       "y = softmax(x * w, dim=1)\ns = y.sum(dim=1)\noutput y, s\n")
    bound = {}
    real_in = _core.LIB.rj_bind_input

    def bind_input(b, node, data, numel):
        bound[node] = data
        return real_in(b, node, data, numel)

    monkeypatch.setattr(_core.LIB, "rj_bind_input", bind_input)
    x = jagged(rng, LENS, (4,))
    w = rng.standard_normal(4).astype(np.float32)
    want_y, want_s = prog(x=x, w=w)
    y, s = prog(x=FakeNested(x.values, x.offsets), w=DLPackOnly(w))
    nodes = {p.name: p.node for p in prog.inputs}
    assert bound[nodes["x"]] == x.values.ctypes.data and bound[nodes["w"]] == w.ctypes.data
    np.testing.assert_array_equal(y.values, want_y.values)
    np.testing.assert_array_equal(y.offsets, x.offsets)
    np.testing.assert_array_equal(s, want_s)
    # a view with holes (torch.nested.narrow) keeps its lengths
    lengths = np.array([2, 0, 3, 1, 4], np.int64)
    y2, s2 = prog(x=FakeNested(x.values, x.offsets, lengths), w=w)
    np.testing.assert_array_equal(y2.lengths, lengths)
    for b, n in enumerate(lengths):
        if n:
            item = x.values[x.offsets[b]:x.offsets[b] + n].astype(np.float64)
            close(y2.unbind()[b], softmax64(item * w, 0), 1e-5)
    close(s2[lengths > 0], np.ones((4, 4)), 1e-5)  # each softmax column sums to 1
    assert (s2[1] == 0).all()
    with pytest.raises(ragjit.UnsupportedError):
        prog(x=FakeNested(x.values, x.offsets, ragged_idx=2), w=w)
    with pytest.raises(ragjit.DtypeError):
        prog(x=x, w=DLPackOnly(w.astype(np.float64)))


def test_context_and_programs_freed_in_any_order():
    """A cycle holding a context and its programs is finalized in any order by the garbage
    collector: the context is freed after its last program (a crash at exit before)."""
    import gc
    for _ in range(3):
        c = ragjit.Context(cache_dir="off")
        progs = [c.compile("input x : f32[N]\ny = x * %d.0\noutput y\n" % i) for i in range(3)]
        cycle = {"ctx": c, "progs": progs}
        cycle["self"] = cycle
        c.cycle = cycle  # Context has a __dict__: the cycle runs through it
        del c, progs, cycle
        gc.collect()
    np.testing.assert_array_equal(ragjit.compile("input x : f32[N]\ny = x + 1.0\noutput y\n")(
        x=np.zeros(2, np.float32)), [1, 1])


def test_two_ragged_dims(ctx, rng):
    """matmul(q, k^T) per item: an output [B, j1, j1], each item a len x len block."""
    prog = ctx.compile("ragged j1 : B\ninput q : f32[B, j1, 4]\ninput k : f32[B, j1, 4]\n"
                       "s = matmul(q, transpose(k, 1, 2))\np = softmax(s, dim=2)\noutput s, p\n")
    q, k = jagged(rng, LENS, (4,)), jagged(rng, LENS, (4,))
    k.offsets = q.offsets
    s, p = prog(q=q, k=k)
    assert s.ragged_dims == 2 and s.values.shape == (sum(n * n for n in LENS),)
    assert s.item_lengths().tolist() == LENS
    for a, pa, qi, ki in zip(s.unbind(), p.unbind(), q.unbind(), k.unbind()):
        want = qi.astype(np.float64) @ ki.astype(np.float64).T
        close(a, want, 1e-5)
        if len(qi):
            close(pa, softmax64(want, 1), 1e-5)
    padded = s.to_padded()
    assert padded.shape == (len(LENS), max(LENS), max(LENS))
    close(padded[4, :7, :7], s.unbind()[4].astype(np.float64), 0)


def test_opencl_target(ctx, rng):
    """The OpenCL target (PoCL on the CPU, as ./build.sh installs it) through the same calls;
    skipped where there is no OpenCL device."""
    src = "ragged j1 : B\ninput x : f32[B, j1, 8]\ny = softmax(x, dim=1)\nm = x.sum(dim=1)\noutput y, m\n"
    try:
        prog = ctx.compile(src, target="opencl")
    except ragjit.NoDeviceError as e:
        assert e.status == 19 and str(e)
        pytest.skip("no OpenCL device: %s" % e)
    x = jagged(rng, LENS, (8,))
    y, m = prog(x=x)
    ref_y, ref_m = ctx.compile(src, target="reference")(x=x)
    close(y.values, ref_y.values.astype(np.float64), 1e-5)
    close(m, ref_m.astype(np.float64), 1e-5)


def test_blas_choice(rng):
    """The package points libragjit at the scipy-openblas32 wheel's OpenBLAS only where the
    system has no fast BLAS and the user set none; that OpenBLAS (whose symbols carry the
    prefix scipy_) then serves matrix products."""
    from ragjit import _lib
    wheel = lambda: "/wheel/libscipy_openblas.so"  # noqa: E731
    assert _lib.choose_blas({}, loads=lambda n: False, wheel=wheel) == "/wheel/libscipy_openblas.so"
    assert _lib.choose_blas({}, loads=lambda n: n == "libopenblas.so.0", wheel=wheel) is None
    assert _lib.choose_blas({"RAGJIT_BLAS": "off"}, loads=lambda n: False, wheel=wheel) is None
    assert _lib.choose_blas({}, loads=lambda n: False, wheel=lambda: None) is None
    info = ragjit.blas_info()
    assert info and not info.startswith("none: only the reference"), info
    path = _lib._wheel_openblas()
    if path is None:
        pytest.skip("the scipy-openblas32 wheel is not installed")
    import subprocess
    import sys
    code = ("import numpy as np, ragjit\n"
            "p = ragjit.compile('input a : f32[M, 64]\\ninput w : f32[64, 32]\\ny = matmul(a, w)\\noutput y\\n')\n"
            "a = np.random.default_rng(1).standard_normal((300, 64)).astype(np.float32)\n"
            "w = np.random.default_rng(2).standard_normal((64, 32)).astype(np.float32)\n"
            "y = p(a=a, w=w)\n"
            "assert np.allclose(y, a.astype(np.float64) @ w, rtol=1e-4, atol=1e-4)\n"
            "print(ragjit.blas_info())\n")
    env = dict(os.environ, RAGJIT_BLAS=path)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("OpenBLAS") and path in out.stdout, out.stdout


def test_f16_and_bf16(ctx, rng):
    """f16 is NumPy's float16; bf16 is ml_dtypes.bfloat16 where installed, else 2-byte 'V2'
    items holding the bits. Each op computes in f32 and rounds its result once."""
    prog = ctx.compile("""
ragged j1 : B
input x : f16[B, j1, 4]
input y : bf16[B, j1, 4]
a = x * 3.0 + 1.0
b = sum(y, dim=1)
output a, b
""")
    off = np.array([0, 2, 2, 5], dtype=np.int64)
    xv = rng.uniform(-2, 2, (5, 4)).astype(np.float16)
    y32 = rng.uniform(-2, 2, (5, 4)).astype(np.float32)
    bits = (y32.view(np.uint32) >> 16).astype(np.uint16)  # truncated: exact bf16 values
    bf = ragjit._program._DTYPES[6]
    yv = bits.view(bf) if bf.kind == "V" else bits.view(np.uint16).view(bf)
    a, b = prog(x=ragjit.Jagged(xv, off), y=ragjit.Jagged(yv, off))
    assert a.values.dtype == np.float16
    want = ((xv.astype(np.float32) * np.float32(3.0)).astype(np.float16).astype(np.float32) + 1).astype(np.float16)
    np.testing.assert_array_equal(a.values, want)
    assert b.dtype == bf
    got = (np.ascontiguousarray(b).view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    y = (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    for i in range(3):
        exact = y[off[i]:off[i + 1]].sum(axis=0)
        assert np.all(np.abs(got[i] - exact) <= np.abs(exact) * 2.0 ** -8 + 1e-30)


def test_prepare(ctx, rng):
    """Program.prepare binds and makes a run's memory ready without running: errors as a call
    gives them, nothing computed, and the calls after it (same names and order) match NumPy,
    on the prepared sizes and on larger ones."""
    p = ctx.compile("ragged j1 : B\ninput x : f32[B, j1, 8]\ninput w : f32[8]\n"
                    "s = softmax(x * w, dim=1)\noutput s\n")
    w = rng.standard_normal(8).astype(np.float32)
    x = jagged(rng, LENS, (8,))
    assert p.prepare(x=x, w=w) is None
    with pytest.raises(ragjit.DtypeError):
        p.prepare(x=x, w=w.astype(np.float64))
    for lens in (LENS, [40, 2, 0, 33]):
        x = jagged(rng, lens, (8,))
        got = p(x=x, w=w)
        want = np.concatenate([softmax64(x.values[a:b] * w, 0)
                               for a, b in zip(x.offsets[:-1], x.offsets[1:]) if b > a])
        close(got.values, want, 1e-5)


CONST_SRC = ("ragged j1 : B\ninput x : f32[B, j1, 64]\ninput w : f32[96, 64]\ninput b : f32[96]\n"
             "y = gelu(linear(x, w, b))\noutput y\n")


def linear_gelu64(x, w, b):
    h = x.astype(np.float64) @ w.astype(np.float64).T + b
    return 0.5 * h * (1.0 + np.vectorize(__import__("math").erf)(h / np.sqrt(2.0)))


def test_constants_same_results_and_new_contents(ctx, rng):
    """Weights promised constant (constants=): the same bits as without the promise over many
    calls; another array for a weight, or constants_changed() after a change in place, gives
    the new results (a kept packing that is not dropped fails here)."""
    plain = ctx.compile(CONST_SRC)
    const = ctx.compile(CONST_SRC, constants=["w", "b"])
    assert const.constants == ["w", "b"] and plain.constants == []
    lens = [700, 0, 900, 1500]  # several chunks of rows: w is packed once for all of them
    w = rng.standard_normal((96, 64)).astype(np.float32)
    b = rng.standard_normal(96).astype(np.float32)
    for _ in range(3):
        x = jagged(rng, lens, (64,))
        want = plain(x=x, w=w, b=b)
        got = const(x=x, w=w, b=b)
        assert np.array_equal(want.values, got.values)
        close(got.values, linear_gelu64(x.values, w, b), 2e-5)
    # another array (a copy with new contents): bound again, packed again
    w2 = (w * -0.5).astype(np.float32)
    x = jagged(rng, lens, (64,))
    assert np.array_equal(const(x=x, w=w2, b=b).values, plain(x=x, w=w2, b=b).values)
    # the same array changed in place: constants_changed() says so
    w2 += 1.0
    const.constants_changed()
    assert np.array_equal(const(x=x, w=w2, b=b).values, plain(x=x, w=w2, b=b).values)


def test_constants_kept_until_changed(ctx, rng):
    """The promise is what makes the packing stay: changed in place without constants_changed()
    (the promise broken) the calls go on with the kept weights, which shows they were kept."""
    const = ctx.compile(CONST_SRC, constants=["w"])
    lens = [1200, 1300, 1500]
    w = rng.standard_normal((96, 64)).astype(np.float32)
    b = np.zeros(96, np.float32)
    x = jagged(rng, lens, (64,))
    first = const(x=x, w=w, b=b).values.copy()
    w *= 2.0
    stale = const(x=x, w=w, b=b).values
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("ragjit's sgemm may run its portable kernel here, which packs nothing")
    assert np.array_equal(first, stale)
    const.constants_changed()
    assert not np.array_equal(const(x=x, w=w, b=b).values, first)


def test_constants_packed_by_prepare(ctx, rng):
    """prepare() packs the weights promised constant (rj_bind_prepare): changed in place after
    it (the promise broken), the first call still computes with the weights prepare() saw."""
    const = ctx.compile(CONST_SRC, constants=["w"])
    plain = ctx.compile(CONST_SRC)
    lens = [1200, 1300, 1500]
    w = rng.standard_normal((96, 64)).astype(np.float32)
    b = np.zeros(96, np.float32)
    x = jagged(rng, lens, (64,))
    want = plain(x=x, w=w, b=b).values.copy()
    const.prepare(x=x, w=w, b=b)
    w *= 2.0
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("ragjit's sgemm may run its portable kernel here, which packs nothing")
    assert np.array_equal(const(x=x, w=w, b=b).values, want)


def test_constants_errors(ctx):
    with pytest.raises(ragjit.ArgumentError) as e:
        ctx.compile(CONST_SRC, constants=["nosuch"])
    assert "constants: 'nosuch' is not an input of the program" in str(e.value)
    with pytest.raises(ragjit.ArgumentError) as e:
        ctx.compile(CONST_SRC, constants=["B"])
    assert "'B' is a size of the program, not an input" in str(e.value)
    with pytest.raises(ragjit.ArgumentError):
        ragjit.compile(CONST_SRC, constants=["j1"])
    assert ragjit.compile(CONST_SRC, constants="w").constants == ["w"]
