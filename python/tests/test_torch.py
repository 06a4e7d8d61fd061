"""The ragjit package with PyTorch: nested jagged tensors (NJT) in and out, dense tensors,
views with holes, dtypes, errors, zero-copy by data pointers, and ragjit.torch.op under
torch.compile(fullgraph=True). References are PyTorch's own ops on the same NJTs and NumPy in
float64. Skipped as a whole, with the reason, where PyTorch is not installed (./build.sh's
Python stage installs it)."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")

import ragjit  # noqa: E402
import ragjit.torch  # noqa: E402
import ragjit._torch_io  # noqa: E402
from ragjit import _core  # noqa: E402

LENS = [3, 0, 5, 1, 7]


def njt(lens, inner, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    offsets = torch.tensor(np.concatenate([[0], np.cumsum(lens)]), dtype=torch.int64)
    values = torch.randn((int(offsets[-1]),) + inner, generator=g, dtype=torch.float64).to(dtype)
    return torch.nested.nested_tensor_from_jagged(values, offsets)


def close(got, want, tol):
    got = np.asarray(got.detach().cpu(), dtype=np.float64) if torch.is_tensor(got) else got
    want = np.asarray(want.detach().cpu(), dtype=np.float64) if torch.is_tensor(want) else want
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)


class _Seen(dict):
    """{"in": {node: address}, "out": {node: address}}, with what the C helper bound (its
    trace) added on each look."""

    def __init__(self):
        super().__init__({"in": {}, "out": {}})
        self.trace = []

    def __getitem__(self, kind):
        for what, node, ptr in self.trace:
            if what in self:
                dict.__getitem__(self, what)[node] = ptr
        self.trace.clear()
        return dict.__getitem__(self, kind)


@pytest.fixture
def bound(monkeypatch):
    """The pointers bound to inputs and outputs, by node: through ctypes, and by the C helper
    of planned calls (module _fastcall, where it was built)."""
    seen = _Seen()
    lib = _core.LIB
    real_in, real_out = lib.rj_bind_input, lib.rj_bind_output

    def bind_input(b, node, data, numel):
        seen["in"][node] = data
        return real_in(b, node, data, numel)

    def bind_output(b, node, data, cap):
        seen["out"][node] = data
        return real_out(b, node, data, cap)

    monkeypatch.setattr(lib, "rj_bind_input", bind_input)
    monkeypatch.setattr(lib, "rj_bind_output", bind_output)
    fastcall = ragjit._torch_io._fastcall
    if fastcall is not None:
        fastcall.set_trace(seen.trace)
    yield seen
    if fastcall is not None:
        fastcall.set_trace(None)


@pytest.fixture(params=["C", "ctypes"])
def planned(request, monkeypatch):
    """Planned calls made by the C helper (module _fastcall), or by Plan.call through ctypes
    (the helper left out, as where it was not built)."""
    if request.param == "ctypes":
        monkeypatch.setattr(ragjit._torch_io, "_fastcall", None)
    elif ragjit._torch_io._fastcall is None:
        pytest.skip("the C helper ragjit._fastcall was not built (no Python headers) or "
                    "RAGJIT_FASTCALL=0: planned calls go through ctypes")
    return request.param


SOFTMAX = """
ragged j1 : B
input x : f32[B, j1, 8]
input w : f32[8]
y = softmax(x * w, dim=1)
s = y.sum(dim=1)
output y, s
"""


def test_njt_in_njt_out_zero_copy(ctx, bound):
    prog = ctx.compile(SOFTMAX)
    x = njt(LENS, (8,))
    w = torch.linspace(0.5, 2.0, 8)
    y, s = prog(x=x, w=w)
    assert type(y) is type(x) and y.is_nested and y.layout == torch.jagged
    assert y.offsets() is x.offsets() and y.shape == x.shape  # the same ragged size j1
    assert y.dtype == torch.float32 and isinstance(s, torch.Tensor) and s.shape == (len(LENS), 8)
    want = torch.softmax(x.to(torch.float64) * w.to(torch.float64), dim=1)  # PyTorch on the NJT
    close(y.values(), want.values(), 1e-5)
    for item, got in zip(x.unbind(), y.unbind()):  # NumPy, item by item
        if len(item):
            a = item.numpy().astype(np.float64) * w.numpy()
            e = np.exp(a - a.max(0))
            close(got, e / e.sum(0), 1e-5)
    close(s[np.array(LENS) > 0], torch.ones(4, 8), 1e-5)
    nodes = {p.name: p.node for p in prog.inputs + prog.outputs}
    assert bound["in"][nodes["x"]] == x.values().data_ptr()
    assert bound["in"][nodes["w"]] == w.data_ptr()
    assert bound["out"][nodes["y"]] == y.values().data_ptr()
    assert bound["out"][nodes["s"]] == s.data_ptr()
    assert y.values().data_ptr() % 64 == 0
    # an NJT op on ragjit's output works as on PyTorch's own
    close((y * 2).values(), want.values() * 2, 1e-5)
    # several calls: fresh outputs each time
    y2, _ = prog(x=x, w=w)
    assert y2.values().data_ptr() != y.values().data_ptr()
    torch.testing.assert_close(y2.values(), y.values(), rtol=0, atol=0)


def test_dense_torch_in_torch_out_embedding_bag(ctx):
    prog = ctx.compile("""
ragged j1 : B
input table : f32[V, 16]
input ids : i64[B, j1]
bag = embedding(table, ids).sum(dim=1)
output bag
""")
    g = torch.Generator().manual_seed(1)
    table = torch.randn(30, 16, generator=g)
    offsets = torch.tensor([0, 3, 3, 8, 9], dtype=torch.int64)
    ids = torch.nested.nested_tensor_from_jagged(torch.randint(0, 30, (9,), generator=g), offsets)
    bag = prog(table=table, ids=ids)
    assert isinstance(bag, torch.Tensor) and not bag.is_nested and bag.shape == (4, 16)
    want = torch.nn.functional.embedding_bag(ids.values(), table.double(), offsets[:-1], mode="sum")
    close(bag, want, 1e-5)
    # a dense output only: a plain tensor of the program's shape for a dense input too
    p2 = ctx.compile("input a : f64[N, 3]\nb = a * 2.0 + 1.0\noutput b\n")
    a = torch.arange(12, dtype=torch.float64).reshape(4, 3)
    close(p2(a=a), a * 2 + 1, 0)


def test_view_with_holes(ctx):
    """torch.nested.narrow's view keeps its lengths: the output has the input's offsets and
    lengths, and each item is computed over its first lengths[b] rows only."""
    prog = ctx.compile("ragged j1 : B\ninput x : f32[B, j1, 4]\ny = softmax(x, dim=1)\n"
                       "s = x.sum(dim=1)\noutput y, s\n")
    B, L = 4, 6
    padded = torch.randn(B, L, 4, generator=torch.Generator().manual_seed(2))
    lengths = torch.tensor([2, 0, 6, 3])
    view = torch.nested.narrow(padded, 1, torch.zeros(B, dtype=torch.int64), lengths, layout=torch.jagged)
    assert view._lengths is not None
    y, s = prog(x=view)
    assert y.offsets() is view.offsets() and y.lengths() is view.lengths()
    for b, n in enumerate(lengths.tolist()):
        item = padded[b, :n].double()
        close(s[b], item.sum(0), 1e-5)
        if n:
            close(y.values()[int(view.offsets()[b]):][:n], torch.softmax(item, 0), 1e-5)


def test_dtypes_and_errors(ctx):
    prog = ctx.compile("ragged j1 : B\ninput a : i32[B, j1]\ninput f : f64[N]\ninput m : bool[N]\n"
                       "t = a.sum(dim=1)\nd = where(m, f * 0.5, f)\noutput t, d\n")
    a = njt(LENS, (), torch.int32)
    a = torch.nested.nested_tensor_from_jagged((a.values() * 3).to(torch.int32), a.offsets())
    f = torch.randn(5, dtype=torch.float64)
    m = torch.tensor([True, False, True, False, True])
    t, d = prog(a=a, f=f, m=m)
    assert t.dtype == torch.int64 and d.dtype == torch.float64
    assert t.tolist() == [int(i.sum()) for i in a.unbind()]
    close(d, torch.where(m, f * 0.5, f), 0)
    with pytest.raises(ragjit.DtypeError) as e:
        prog(a=a, f=f.float(), m=m)
    assert "input f : f64[N]" in str(e.value) and "torch.float32" in str(e.value)
    with pytest.raises(ragjit.SizeError) as e:
        prog(a=a, f=f, m=m[:4])
    assert "N is 5 for input f but 4 for input m" in str(e.value)
    with pytest.raises(ragjit.ShapeError):  # a dense tensor for a jagged input
        prog(a=a.values(), f=f, m=m)
    with pytest.raises(ragjit.ShapeError):  # a nested tensor for a dense input
        prog(a=a, f=a, m=m)
    # device memory the program's target cannot use: an error naming it, not a crash
    with pytest.raises(ragjit.UnsupportedError) as e:
        prog(a=a, f=f.to("meta"), m=m)
    assert "input f" in str(e.value) and "meta" in str(e.value)
    # offsets that do not fit the values: ragjit's own check, through the same exceptions
    bad = torch.nested.nested_tensor_from_jagged(torch.zeros(9, dtype=torch.int32),
                                                 torch.tensor([0, 4, 2, 9]))
    with pytest.raises(ragjit.OffsetsOrderError):
        prog(a=bad, f=f, m=m)


def test_non_contiguous_and_mixed_inputs(ctx, bound):
    prog = ctx.compile(SOFTMAX)
    x = njt(LENS, (16,))
    xs = torch.nested.nested_tensor_from_jagged(x.values()[:, ::2], x.offsets())
    w = torch.ones(16)[::2]
    y, _ = prog(x=xs, w=w)
    node_x = prog.inputs[0].node
    assert bound["in"][node_x] != xs.values().data_ptr()  # copied, and still right
    close(y.values(), torch.softmax(xs.double(), dim=1).values(), 1e-5)
    # a ragjit.Jagged (NumPy) with a torch tensor: PyTorch outputs, the NumPy offsets shared
    xj = ragjit.Jagged(x.values()[:, :8].contiguous().numpy(), x.offsets().numpy())
    y2, s2 = prog(x=xj, w=torch.ones(8))
    assert y2.is_nested and isinstance(s2, torch.Tensor)
    assert np.shares_memory(y2.offsets().numpy(), xj.offsets)
    for item, got in zip(xj.unbind(), y2.unbind()):
        if len(item):
            e = np.exp(item.astype(np.float64) - item.max(0))
            close(got, e / e.sum(0), 1e-5)


def test_two_ragged_dims_output_is_a_jagged(ctx):
    prog = ctx.compile("ragged j1 : B\ninput q : f32[B, j1, 4]\ns = matmul(q, transpose(q, 1, 2))\n"
                       "output s\n")
    q = njt(LENS, (4,))
    s = prog(q=q)
    assert isinstance(s, ragjit.Jagged) and s.ragged_dims == 2
    for got, item in zip(s.unbind(), q.unbind()):
        it = item.double().numpy()
        close(got, it @ it.T, 1e-5)


# ---- ragjit.torch.op ------------------------------------------------------------------

def test_op_eager_and_raw(ctx):
    prog = ctx.compile(SOFTMAX)
    rop = ragjit.torch.op(prog, name="softmax_test")
    assert "softmax_test(Tensor x_values, Tensor x_offsets, Tensor? x_lengths, Tensor w) -> " \
        "(Tensor, Tensor)" in rop.schema
    x = njt(LENS, (8,))
    w = torch.rand(8) + 0.5
    y, s = rop(x=x, w=w)
    want_y, want_s = prog(x=x, w=w)
    torch.testing.assert_close(y.values(), want_y.values(), rtol=0, atol=0)
    # the registered operator itself: flat tensors in, a jagged output's values out
    vals, s2 = torch.ops.ragjit.softmax_test(x.values(), x.offsets(), None, w)
    assert not vals.is_nested and vals.shape == x.values().shape
    torch.testing.assert_close(vals, want_y.values(), rtol=0, atol=0)
    torch.testing.assert_close(s2, want_s, rtol=0, atol=0)
    # the fake implementation agrees with the real one on shapes and dtypes
    torch.library.opcheck(rop.op, (x.values(), x.offsets(), None, w),
                          test_utils=("test_schema", "test_faketensor"))


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_op_under_torch_compile_fullgraph(ctx, backend):
    """A model around the operator compiles as one graph (fullgraph=True raises on any graph
    break) and gives what eager PyTorch gives."""
    torch._dynamo.reset()
    prog = ctx.compile(SOFTMAX)
    rop = ragjit.torch.op(prog)

    def model(x, w):
        y, s = rop(x=x * 2.0, w=w)
        return torch.relu(y) + 1.0, s.sum(dim=1)

    x = njt(LENS, (8,), seed=3)
    w = torch.rand(8)
    compiled = torch.compile(model, fullgraph=True, backend=backend)
    y, t = compiled(x, w)
    y_ref, t_ref = model(x, w)
    assert y.is_nested and y.shape[0] == len(LENS)
    torch.testing.assert_close(y.values(), y_ref.values(), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(t, t_ref, rtol=1e-5, atol=1e-5)
    # against PyTorch's own softmax on the NJT, in float64
    want = torch.relu(torch.softmax(x.double() * 2.0 * w.double(), dim=1)) + 1.0
    close(y.values(), want.values(), 1e-5)
    # other lengths: the same compiled function
    x2 = njt([4, 2, 9], (8,), seed=4)
    y2, _ = compiled(x2, w)
    close(y2.values(), (torch.relu(torch.softmax(x2.double() * 2.0 * w.double(), dim=1)) + 1.0).values(), 1e-5)


def test_op_data_dependent_pad_length(ctx):
    """pad(x) has the longest item's length, known only from the data: the fake gives a new
    unbacked size and the graph still compiles whole."""
    torch._dynamo.reset()
    prog = ctx.compile("ragged j1 : B\ninput x : f32[B, j1, 4]\np = pad(x, value=0.0)\n"
                       "m = x.max(dim=1)\noutput p, m\n")
    rop = ragjit.torch.op(prog)

    def model(x):
        p, m = rop(x=x)
        return p * 3.0, m

    x = njt(LENS, (4,), seed=5)
    p, m = torch.compile(model, fullgraph=True, backend="aot_eager")(x)
    assert p.shape == (len(LENS), max(LENS), 4)
    want = np.zeros((len(LENS), max(LENS), 4))
    for b, item in enumerate(x.unbind()):
        want[b, :len(item)] = item.double().numpy() * 3.0
    close(p, want, 1e-6)
    close(m[np.array(LENS) > 0], torch.stack([i.max(0).values for i in x.unbind() if len(i)]), 0)


def test_op_refuses_what_it_cannot_describe(ctx):
    prog = ctx.compile("ragged j1 : B\ninput q : f32[B, j1, 4]\ns = matmul(q, transpose(q, 1, 2))\n"
                       "output s\n")
    with pytest.raises(ragjit.UnsupportedError) as e:
        ragjit.torch.op(prog)
    assert "two ragged dims" in str(e.value)


def holes_view(B=4, L=6, inner=8, lengths=(2, 0, 6, 3), seed=6):
    """torch.nested.narrow's view of a padded (B, L, inner) buffer, and that buffer."""
    padded = torch.randn(B, L, inner, generator=torch.Generator().manual_seed(seed))
    lengths = torch.tensor(lengths)
    view = torch.nested.narrow(padded, 1, torch.zeros(B, dtype=torch.int64), lengths,
                               layout=torch.jagged)
    assert view._lengths is not None
    return view, padded


def check_softmax_on_view(y, s, view, padded, w, scale=1.0):
    """y, s of SOFTMAX on a view with holes, item by item against NumPy in float64 on the
    padded buffer; y keeps the view's layout (offsets, lengths, rows)."""
    assert y.values().shape == view.values().shape
    assert torch.equal(y.offsets(), view.offsets()) and torch.equal(y.lengths(), view.lengths())
    for b, n in enumerate(view.lengths().tolist()):
        start = int(view.offsets()[b])
        a = padded[b, :n].double().numpy() * w.double().numpy()
        if n:
            e = np.exp(a - a.max(0))
            close(y.values()[start:start + n], e / e.sum(0), 1e-5)
            close(s[b], scale * (e / e.sum(0)).sum(0), 1e-5)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_op_view_with_holes(ctx, backend):
    """A view with holes through the custom operator: its lengths are an argument, the output's
    values have the view's rows (as the fake says), and the NJT out is over the view's offsets
    and lengths, in eager calls, the registered operator itself and under torch.compile."""
    torch._dynamo.reset()
    rop = ragjit.torch.op(ctx.compile(SOFTMAX))
    view, padded = holes_view()
    w = torch.rand(8, generator=torch.Generator().manual_seed(7)) + 0.5
    y, s = rop(x=view, w=w)  # outside compilation: the program itself
    assert y.offsets() is view.offsets() and y.lengths() is view.lengths()
    check_softmax_on_view(y, s, view, padded, w)
    vals, s2 = rop.op(view.values(), view.offsets(), view.lengths(), w)
    assert vals.shape == view.values().shape
    for b, n in enumerate(view.lengths().tolist()):  # the items' rows; holes are unspecified
        start = int(view.offsets()[b])
        torch.testing.assert_close(vals[start:start + n], y.values()[start:start + n], rtol=0, atol=0)
    torch.testing.assert_close(s2, s, rtol=0, atol=0)
    torch.library.opcheck(rop.op, (view.values(), view.offsets(), view.lengths(), w),
                          test_utils=("test_schema", "test_faketensor"))

    def model(x, w):
        y, s = rop(x=x, w=w)
        return y, s * 2.0

    y, s = torch.compile(model, fullgraph=True, backend=backend)(view, w)
    assert y.is_nested and y.lengths() is not None
    check_softmax_on_view(y, s, view, padded, w, scale=2.0)


@pytest.mark.parametrize("how", ["program", "op", "op compiled"])
def test_view_with_holes_against_pytorch(ctx, how):
    """A view with holes in and out, against PyTorch's own op on the same view (pointwise: the
    NJT ops PyTorch runs on views; it refuses reductions over the ragged dim there), item by
    item through unbind(), which reads each item through the lengths; twice each (the second
    program call is planned)."""
    torch._dynamo.reset()
    prog = ctx.compile("ragged j1 : B\ninput x : f32[B, j1, 8]\ny = relu(x) * 2.0 + 1.0\noutput y\n")
    fn = prog if how == "program" else ragjit.torch.op(prog)
    if how == "op compiled":
        rop = fn
        fn = torch.compile(lambda x: rop(x=x), fullgraph=True, backend="aot_eager")
        call = fn
    else:
        def call(x):
            return fn(x=x)
    for seed in (15, 16):
        view, _ = holes_view(seed=seed)
        want = torch.relu(view) * 2.0 + 1.0
        y = call(view)
        assert y.is_nested and torch.equal(y.lengths(), view.lengths())
        for got, ref in zip(y.unbind(), want.unbind()):
            torch.testing.assert_close(got, ref, rtol=1e-6, atol=1e-6)


def test_op_checks_separate_tensors(ctx):
    """The registered operator gets separate tensors that no NJT constructor checked: offsets,
    lengths and devices that do not fit are errors naming the input, not reads out of bounds."""
    rop = ragjit.torch.op(ctx.compile(SOFTMAX))
    v, w = torch.rand(6, 8), torch.ones(8)
    with pytest.raises(ragjit.ShapeError, match="input x .*lengths of shape"):
        rop.op(v, torch.tensor([0, 2, 6]), torch.tensor([2]), w)
    with pytest.raises(ragjit.ShapeError, match="input x .*offsets of shape"):
        rop.op(v, torch.tensor([[0, 2, 6]]), None, w)
    with pytest.raises(ragjit.ShapeError, match="input x .*not integers"):
        rop.op(v, torch.tensor([0.0, 2.0, 6.0]), None, w)
    with pytest.raises(ragjit.OffsetsEndError):  # ragjit's own check of the contents
        rop.op(v, torch.tensor([0, 2, 9]), None, w)


# ---- the planned call (module _torch_io, Plan) ----------------------------------------

LINEAR = """
ragged j1 : B
input x : f32[B, j1, 8]
input w : f32[8, 4]
input g : f32[8]
h = matmul(x * g, w)
m = h.max(dim=1)
x2 = x * 2.0
output x2, h, m
"""


def plan_of(prog, *names):
    return prog._plans.get(tuple(names))


def count_general(prog):
    """A list that grows by one at each call that goes the general way (not the plan)."""
    calls = []
    general = prog._bind_and_run

    def counted(*args):
        calls.append(1)
        return general(*args)

    prog._bind_and_run = counted
    return calls


def test_planned_calls_match_pytorch(ctx, bound, planned):
    """After a first call, calls of the same names take the planned path; each is compared with
    PyTorch in float64, over new NJTs (new offsets), the same NJT refilled in place (its
    pointers are not bound again), a weight given as an nn.Parameter, and an output whose
    inner shape differs from the input's (its NJT's size and strides are checked against
    PyTorch's constructor)."""
    prog = ctx.compile(LINEAR)
    w = torch.nn.Parameter(torch.randn(8, 4, generator=torch.Generator().manual_seed(8)))
    g = torch.linspace(-1.0, 1.0, 8)

    def check(x, outs):
        x2, h, m = outs
        want = (x.values().double() * g.double()) @ w.detach().double()
        close(x2.values(), x.values().double() * 2.0, 1e-6)
        close(h.values(), want, 1e-5)
        assert x2.offsets() is x.offsets() and h.offsets() is x.offsets()
        assert h.shape == x.shape[:2] + (4,) and h.stride() == torch.nested.nested_tensor_from_jagged(
            h.values(), x.offsets()).stride()
        for b, item in enumerate(x.unbind()):
            if len(item):
                close(m[b], (item.double() * g.double() @ w.detach().double()).max(0).values, 1e-5)
        assert bound["out"][prog.outputs[1].node] == h.values().data_ptr()

    general = count_general(prog)
    x = njt(LENS, (8,), seed=9)
    check(x, prog(x=x, w=w, g=g))
    assert isinstance(plan_of(prog, "x", "w", "g"), ragjit._torch_io.Plan) and len(general) == 1
    assert (prog._fast is not None) == (planned == "C")
    for seed, lens in [(10, [4, 1, 0, 2]), (11, LENS), (12, [9])]:
        x = njt(lens, (8,), seed=seed)
        check(x, prog(x=x, w=w, g=g))
        assert bound["in"][prog.inputs[0].node] == x.values().data_ptr()
    bound["in"].clear()
    x.values().mul_(-1.5)  # the same tensors refilled: not bound again, the run reads them
    w.data.mul_(2.0)
    check(x, prog(x=x, w=w, g=g))
    assert prog.inputs[0].node not in bound["in"] and prog.inputs[1].node not in bound["in"]
    assert len(general) == 1  # every later call was planned


def test_planned_outputs_are_what_the_constructor_makes(ctx, planned):
    """The planned path's output NJT against PyTorch's constructor on the same tensors: the
    same attributes, size, strides and storage size; with the input's metadata cache empty
    and with max_seqlen cached (then NestedTensor.__init__ itself runs)."""
    prog = ctx.compile(LINEAR)
    w, g = torch.rand(8, 4), torch.rand(8)
    for x in [njt(LENS, (8,), seed=14),
              torch.nested.nested_tensor_from_jagged(torch.rand(16, 8), torch.tensor([0, 5, 16]),
                                                     max_seqlen=11)]:
        for _ in range(2):  # the second call is planned
            x2, h, _ = prog(x=x, w=w, g=g)
        assert plan_of(prog, "x", "w", "g")
        for out in (x2, h):
            ref = torch.nested.nested_tensor_from_jagged(out.values(), x.offsets(),
                                                         max_seqlen=11 if x._metadata_cache else None)
            assert set(vars(out)) == set(vars(ref)) and type(out) is type(ref)
            assert out.shape == ref.shape and out.stride() == ref.stride()
            assert out._size[1] is x._size[1]  # the input's ragged size itself
            assert out.untyped_storage().nbytes() == ref.untyped_storage().nbytes()
        if x._metadata_cache:
            assert h._max_seqlen == 11
    # the fast construction was checked against the constructor once and kept (a PyTorch
    # whose internals differ would turn it off, and outputs would come from the constructor)
    assert ragjit._torch_io._fast_ok is True


def test_planned_calls_fall_back(ctx, planned):
    """A call unlike the plan goes the general way and gets its results or its message: a
    NumPy input, another dtype, a non-contiguous values tensor, another shape, two inputs over
    one symbol with equal offsets in different tensors or with different offsets, bad offsets
    (ragjit's run refuses them from the plan too), and a view with holes (planned too)."""
    prog = ctx.compile("ragged j1 : B\ninput x : f32[B, j1, 4]\ninput z : f32[B, j1, 4]\n"
                       "y = x + z\nt = y.sum(dim=1)\noutput y, t\n")
    general = count_general(prog)
    x = njt(LENS, (4,), seed=13)
    z = torch.nested.nested_tensor_from_jagged(torch.rand_like(x.values()), x.offsets())
    y, t = prog(x=x, z=z)
    y, t = prog(x=x, z=z)
    assert isinstance(plan_of(prog, "x", "z"), ragjit._torch_io.Plan) and len(general) == 1
    close(y.values(), x.values().double() + z.values().double(), 1e-6)
    close(t, torch.stack([i.double().sum(0) for i in (x + z).unbind()]), 1e-5)
    z2 = torch.nested.nested_tensor_from_jagged(z.values(), x.offsets().clone())
    y2, _ = prog(x=x, z=z2)  # equal offsets, another tensor: compared by the general path
    close(y2.values(), y.values(), 0)
    assert len(general) == 2
    z3 = torch.nested.nested_tensor_from_jagged(z.values(), torch.tensor([0, 3, 3, 8, 10, 16]))
    with pytest.raises(ragjit.ShapeError, match="different offsets"):
        prog(x=x, z=z3)
    with pytest.raises(ragjit.DtypeError, match="input z"):
        prog(x=x, z=torch.nested.nested_tensor_from_jagged(z.values().double(), x.offsets()))
    with pytest.raises(ragjit.ShapeError):
        prog(x=x, z=torch.nested.nested_tensor_from_jagged(torch.rand(16, 5), x.offsets()))
    strided = torch.nested.nested_tensor_from_jagged(torch.rand(16, 8)[:, ::2], x.offsets())
    y4, _ = prog(x=x, z=strided)
    close(y4.values(), x.values().double() + strided.values().double(), 1e-6)
    yj, tj = prog(x=ragjit.Jagged(x.values().numpy(), x.offsets().numpy()),
                  z=ragjit.Jagged(z.values().numpy(), x.offsets().numpy()))
    assert isinstance(yj, ragjit.Jagged) and isinstance(tj, np.ndarray)
    close(yj.values, y.values().double().numpy(), 0)
    bad = torch.nested.nested_tensor_from_jagged(torch.rand(16, 4), torch.tensor([0, 3, 3, 8, 9, 17]))
    with pytest.raises(ragjit.OffsetsEndError):
        prog(x=bad, z=bad)
    view, padded = holes_view(inner=4)
    n = len(general)
    yv, tv = prog(x=view, z=view)  # planned: a view keeps its lengths
    assert len(general) == n
    assert yv.lengths() is view.lengths() and yv.values().shape == view.values().shape
    for b, n in enumerate(view.lengths().tolist()):
        close(tv[b], padded[b, :n].double().sum(0) * 2, 1e-5)
    y, t = prog(x=x, z=z)  # and back
    close(y.values(), x.values().double() + z.values().double(), 1e-6)


def softmax_ref(x, w):
    """SOFTMAX's outputs by PyTorch in float64, on a fresh NJT over copies of x's tensors (so
    nothing PyTorch cached about x is used)."""
    fresh = torch.nested.nested_tensor_from_jagged(x.values().clone().double(), x.offsets().clone())
    y = torch.softmax(fresh * w.double(), dim=1)
    return y.values(), torch.stack([i.sum(0) if len(i) else torch.zeros(8, dtype=torch.float64)
                                    for i in y.unbind()])


def test_planned_calls_see_every_change(ctx, bound, planned):
    """Nothing of an earlier call is reused where it changed: offsets rewritten in place (same
    tensor, same address), values rewritten in place, new NJTs, a view whose lengths change in
    place, a weight swapped for another; each call against PyTorch in float64. Offsets made
    wrong in place are refused by the planned call with ragjit's error."""
    prog = ctx.compile(SOFTMAX)
    general = count_general(prog)
    w = torch.linspace(0.5, 2.0, 8)
    x = njt(LENS, (8,), seed=21)

    def check(x, w):
        y, s = prog(x=x, w=w)
        want_y, want_s = softmax_ref(x, w)
        close(y.values(), want_y, 1e-5)
        close(s, want_s, 1e-5)
        assert y.offsets() is x.offsets() and y._size[1] is x._size[1]
        assert bound["out"][prog.outputs[0].node] == y.values().data_ptr()  # no copy out
        return y

    check(x, w)
    check(x, w)
    assert len(general) == 1
    x.offsets().copy_(torch.tensor([0, 1, 4, 9, 10, 16]))  # new lengths, the same tensor
    check(x, w)
    x.values().mul_(3.0).add_(0.25)
    check(x, w)
    check(x, torch.linspace(2.0, -1.0, 8))
    for seed, lens in [(22, [7, 7, 0]), (23, LENS), (24, [1] * 9)]:
        x = njt(lens, (8,), seed=seed)
        check(x, w)
        assert bound["in"][prog.inputs[0].node] == x.values().data_ptr()  # no copy in
    view, padded = holes_view(lengths=(2, 0, 6, 3))
    prog(x=view, w=w)
    for lengths in [(1, 1, 1, 1), (6, 6, 0, 2)]:
        view.lengths().copy_(torch.tensor(lengths))  # the view's holes move, in place
        y, s = prog(x=view, w=w)
        check_softmax_on_view(y, s, view, padded, w)
    assert len(general) == 1  # all of them planned
    x = njt(LENS, (8,), seed=25)
    check(x, w)
    x.offsets()[2] = 99  # past the values
    with pytest.raises(ragjit.Error, match="offsets"):
        prog(x=x, w=w)
    x.offsets()[2] = 1  # below the one before
    with pytest.raises(ragjit.OffsetsOrderError):
        prog(x=x, w=w)
    x.offsets()[2] = 3
    check(x, w)


def test_planned_c_calls_are_the_general_paths(ctx):
    """The C helper's outputs against the general path's on the same tensors (a program's first
    call goes the general way): equal values, the same offsets and ragged size, and NJTs alike
    in every attribute PyTorch's constructor sets, with the metadata cache empty and full."""
    if ragjit._torch_io._fastcall is None:
        pytest.skip("the C helper ragjit._fastcall was not built (no Python headers) or "
                    "RAGJIT_FASTCALL=0")
    w, g = torch.rand(8, 4), torch.rand(8)
    for x in [njt(LENS, (8,), seed=26), njt([0, 0, 4], (8,), seed=27),
              torch.nested.nested_tensor_from_jagged(torch.rand(16, 8), torch.tensor([0, 5, 16]),
                                                     max_seqlen=11)]:
        fast = ctx.compile(LINEAR)
        fast(x=x, w=w, g=g)
        assert fast._fast is not None
        general = count_general(fast)
        got = fast(x=x, w=w, g=g)
        assert not general  # the C helper made these
        want = ctx.compile(LINEAR)(x=x, w=w, g=g)  # a fresh program: the general path
        for a, b in zip(got, want):
            assert type(a) is type(b)
            if not a.is_nested:
                torch.testing.assert_close(a, b, rtol=0, atol=0)
                continue
            torch.testing.assert_close(a.values(), b.values(), rtol=0, atol=0)
            assert a.offsets() is b.offsets() is x.offsets() and a._lengths is b._lengths
            assert set(vars(a)) == set(vars(b)) and a._metadata_cache is b._metadata_cache
            assert a._size == b._size and a._strides == b._strides and a._size[1] is x._size[1]
            assert a.shape == b.shape and a.stride() == b.stride() and a.dtype == b.dtype
            assert a.untyped_storage().nbytes() == b.untyped_storage().nbytes()
            assert vars(a._values) == vars(b._values) and a.requires_grad == b.requires_grad
            close((a * 2 + b).values(), b.values() * 3, 0)  # an NJT op takes both together
    # a max length PyTorch cached since, not yet marked dynamic: NestedTensor.__init__ runs
    # (as in the constructor), and marks it
    x = njt(LENS, (8,), seed=28)
    fast = ctx.compile(LINEAR)
    fast(x=x, w=w, g=g)
    fast(x=x, w=w, g=g)
    x._get_max_seqlen()
    t = x._metadata_cache["max_seqlen"]
    assert 0 not in getattr(t, "_dynamo_dynamic_indices", ())
    general = count_general(fast)
    y = fast(x=x, w=w, g=g)[0]
    assert not general and 0 in t._dynamo_dynamic_indices and y._max_seqlen == max(LENS)


def test_c_caller_refuses_what_it_cannot_hold(ctx):
    """The C helper's Caller checks the plan it is given (errors, never a crash), and takes one
    dict of inputs."""
    fc = ragjit._torch_io._fastcall
    if fc is None:
        pytest.skip("the C helper ragjit._fastcall was not built (no Python headers) or "
                    "RAGJIT_FASTCALL=0")
    tio = ragjit._torch_io
    env = (vars(tio), tio._NT, tio._DENSE, torch.int64, torch.empty, torch.empty_like,
           torch.Tensor._make_wrapper_subclass, tio._init, print, print)
    fns = ragjit._lib.fastcall_addresses()
    x = ("x", 0, torch.float32, (16,), 5, None, None)
    y = (1, torch.float32, (16,), 0, True, (), tio._wrapper_args(torch.float32))
    fc.Caller(1, fns, [x], [y], [None], env)  # the shape of a right one (never called)
    for args, what in [((1, fns, [x], [], [], env), "1 to 32 ports"),
                       ((1, fns, [x, ("z", 1, torch.float32, (16,), 5, 1, None)], [y], [None], env),
                        "later one"),
                       ((1, (0,) * 6, [x], [y], [None], env), "address is 0"),
                       ((1, fns, [x], [y[:3] + (3,) + y[4:]], [None], env), "out of range"),
                       ((1, fns, [x], [y[:5] + (((0, 2),),) + y[6:]], [None], env), "out of range"),
                       ((1, fns, [x], [y], [], env), "one per output"),
                       ((1, fns, [x[:3] + ((1,) * 9,) + x[4:]], [y], [None], env), "at most 8")]:
        with pytest.raises(ValueError, match=what):
            fc.Caller(*args)
    with pytest.raises(TypeError):
        fc.Caller(1, fns, [x], [y], [None], env[:-1])
    prog = ctx.compile(SOFTMAX)
    a, w = njt(LENS, (8,)), torch.rand(8)
    prog(x=a, w=w)
    with pytest.raises(TypeError, match="one dict"):
        prog._fast([a, w])
    assert prog._fast({"x": a}) is NotImplemented and prog._fast({"x": a, "v": w}) is NotImplemented


def test_planned_calls_on_threads(ctx, planned):
    """Calls of one program on several threads at once (the run lets go of the interpreter):
    each thread's results are its own inputs'."""
    import threading
    prog = ctx.compile(SOFTMAX)
    w = torch.linspace(0.5, 2.0, 8)
    xs = [njt([3 + t, t, 5, 2 * t], (8,), seed=30 + t) for t in range(4)]
    wants = [softmax_ref(x, w) for x in xs]
    prog(x=xs[0], w=w)
    errors = []

    def work(t):
        try:
            for _ in range(150):
                y, s = prog(x=xs[t], w=w)
                close(y.values(), wants[t][0], 1e-5)
                close(s, wants[t][1], 1e-5)
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors[0]


def test_planned_errors_and_a_freed_program(ctx, planned):
    """Calls unlike the plan still raise ragjit's errors (another dtype, a missing input, an
    unknown name, a dense tensor for a jagged input), and a planned call outliving its program
    (the C helper's bindings are freed with it) does nothing."""
    import gc
    prog = ctx.compile(SOFTMAX)
    x, w = njt(LENS, (8,), seed=40), torch.linspace(0.5, 2.0, 8)
    prog(x=x, w=w)
    prog(x=x, w=w)
    with pytest.raises(ragjit.DtypeError, match="input w"):
        prog(x=x, w=w.double())
    with pytest.raises(ragjit.UnboundError, match="input w"):
        prog(x=x)
    with pytest.raises(ragjit.ArgumentError, match="'v'"):
        prog(x=x, v=w)
    with pytest.raises(ragjit.ShapeError, match="input x"):
        prog(x=x.values(), w=w)
    with pytest.raises(ragjit.ShapeError, match="input w"):
        prog(x=x, w=torch.rand(9))
    y, _ = prog(x=x, w=w)  # and still right after them
    close(y.values(), softmax_ref(x, w)[0], 1e-5)
    fast = prog._fast
    del prog, y
    gc.collect()
    if fast is None:
        return
    assert fast({"x": x, "w": w}) is NotImplemented
    # a program's plan and its C caller (a cycle) go with it
    callers = [type(o) is type(fast) for o in gc.get_objects()].count(True)
    for _ in range(3):
        prog = ctx.compile(SOFTMAX)
        prog(x=x, w=w)
        prog(x=x, w=w)
        assert prog._fast is not None
        del prog
    gc.collect()
    assert [type(o) is type(fast) for o in gc.get_objects()].count(True) == callers


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device (torch.cuda.is_available() is False)")
def test_cuda_tensors_stay_on_the_device(ctx):
    prog = ctx.compile(SOFTMAX, target="cuda")
    x = njt(LENS, (8,)).to("cuda")
    w = torch.rand(8, device="cuda")
    y, s = prog(x=x, w=w)
    assert y.is_cuda and s.is_cuda and y.offsets() is x.offsets()
    close(y.values(), torch.softmax(x.double() * w.double(), dim=1).values(), 1e-5)
    with pytest.raises(ragjit.UnsupportedError):
        ctx.compile(SOFTMAX)(x=x, w=w)  # the CPU target refuses device memory


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device (torch.cuda.is_available() is False)")
def test_cuda_views_and_the_op(ctx):
    """CUDA: a view with holes in and out, repeated calls (the plan is for CPU tensors only),
    and the custom operator eager and under torch.compile, all on the device."""
    prog = ctx.compile(SOFTMAX, target="cuda")
    view, padded = holes_view()
    view, w = view.to("cuda"), (torch.rand(8) + 0.5).to("cuda")
    for _ in range(3):
        y, s = prog(x=view, w=w)
        assert y.is_cuda and s.is_cuda and y.lengths() is view.lengths()
        check_softmax_on_view(y.cpu(), s.cpu(), view.cpu(), padded, w.cpu())
    assert not plan_of(prog, "x", "w")
    torch._dynamo.reset()
    rop = ragjit.torch.op(prog)
    y, s = torch.compile(lambda x, w: rop(x=x, w=w), fullgraph=True, backend="aot_eager")(view, w)
    assert y.is_cuda
    check_softmax_on_view(y.cpu(), s.cpu(), view.cpu(), padded, w.cpu())


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present (the CUDA tests run)")
def test_cuda_target_without_a_device(ctx):
    """Without a GPU the CUDA target says so at compile, by name, rather than failing later."""
    with pytest.raises(ragjit.NoDeviceError, match="CUDA"):
        ctx.compile(SOFTMAX, target="cuda")


def test_constants_on_the_planned_path(ctx):
    """Weights promised constant through PyTorch tensors: the planned calls (Plan.call) keep the
    packed weights while the same tensors come, with the same bits as a program without the
    promise; a new weight tensor is bound and packed again."""
    src = ("ragged j1 : B\ninput x : f32[B, j1, 64]\ninput w : f32[96, 64]\ninput b : f32[96]\n"
           "y = linear(x, w, b)\noutput y\n")
    plain, const = ctx.compile(src), ctx.compile(src, constants=["w", "b"])
    g = torch.Generator().manual_seed(3)
    w, b = torch.randn(96, 64, generator=g), torch.randn(96, generator=g)
    for k in range(4):
        x = njt([900, 0, 1300, 1100], (64,), seed=k)
        assert torch.equal(const(x=x, w=w, b=b).values(), plain(x=x, w=w, b=b).values())
    torch.testing.assert_close(const(x=x, w=w, b=b).values(), x.values() @ w.T + b, rtol=1e-5, atol=1e-5)
    w2 = w * 3.0
    assert torch.equal(const(x=x, w=w2, b=b).values(), plain(x=x, w=w2, b=b).values())
    w2.mul_(-1.0)
    const.constants_changed()
    assert torch.equal(const(x=x, w=w2, b=b).values(), plain(x=x, w=w2, b=b).values())


FUNCTIONS = """
ragged j1 : B
input x : f32[B, j1, 6]
c1 = x.clamp(min=-1.0, max=0.5)
c2 = torch.clamp(x, max=0.25)
c3 = x.clip(0.5, -1)
c4 = x.clamp_min(0)
c5 = F.leaky_relu(x, 0.2)
l1 = x.logsumexp(dim=-1)
l2 = torch.logsumexp(x, 1, keepdim=True)
l3 = logsumexp(x, (1, 2))
n1 = F.normalize(x, dim=-1)
n2 = F.normalize(x, p=1.0, dim=1)
n3 = normalize(x, p=inf, dim=-1)
n4 = normalize(x, p=3, dim=(1, 2), eps=1e-3)
output c1, c2, c3, c4, c5, l1, l2, l3, n1, n2, n3, n4
"""


def test_pytorch_functions_built_of_ops(ctx):
    """clamp, clip, clamp_min, leaky_relu, logsumexp and F.normalize against PyTorch's own
    functions, item by item in float64, on items with NaN, a row of -inf, an inf and an empty
    item (torch.logsumexp of an empty line is -inf)."""
    x = njt([3, 0, 5, 1, 7], (6,), seed=21)
    v = x.values()
    v[4, 2] = float("nan")
    v[5, :] = float("-inf")
    v[9, 1] = float("inf")
    F = torch.nn.functional
    refs = {
        "c1": lambda t: t.clamp(min=-1.0, max=0.5), "c2": lambda t: torch.clamp(t, max=0.25),
        "c3": lambda t: t.clip(0.5, -1), "c4": lambda t: t.clamp_min(0), "c5": lambda t: F.leaky_relu(t, 0.2),
        "l1": lambda t: t.logsumexp(dim=-1), "l2": lambda t: torch.logsumexp(t, 0, keepdim=True),
        "l3": lambda t: torch.logsumexp(t, (0, 1)), "n1": lambda t: F.normalize(t, dim=-1),
        "n2": lambda t: F.normalize(t, p=1.0, dim=0), "n3": lambda t: F.normalize(t, p=float("inf"), dim=-1),
        "n4": lambda t: F.normalize(t, p=3, dim=(0, 1), eps=1e-3)}
    outs = ctx.compile(FUNCTIONS)(x=x)
    assert len(outs) == len(refs)
    for name, got in zip(refs, outs):
        items = got.unbind() if got.is_nested else list(got)
        for b, t in enumerate(x.unbind()):
            want = refs[name](t.double())
            close(items[b].reshape(want.shape), want, 2e-6)


ELEMENTWISE = """
ragged j : B
input x : f32[B, j, 5]
input i : i32[B, j, 5]
input w : f32[5, 3]
a = x.square()
b = torch.reciprocal(x)
c = F.relu6(x * 4)
d = F.hardtanh(x, -0.5, 0.75)
e = F.hardsigmoid(x * 4)
f = F.hardswish(x * 4)
g = F.softsign(x)
h = i.reciprocal()
k = torch.mm(x, w)
l = i.square()
m = F.relu6(i * 3)
output a, b, c, d, e, f, g, h, k, l, m
"""


def test_pytorch_elementwise_functions(ctx):
    """square, reciprocal, relu6, hardtanh, hardsigmoid, hardswish, softsign and mm against
    PyTorch's own in float64, with NaN, inf and 0 in the data; the dtypes PyTorch gives (an
    integer's reciprocal is f32, its square and relu6 stay integers)."""
    F = torch.nn.functional
    g = torch.Generator().manual_seed(5)
    off = torch.tensor([0, 3, 3, 10])
    xv = torch.randn(10, 5, generator=g)
    xv[1, 1], xv[2, 2], xv[4, 0] = float("nan"), float("inf"), 0.0
    iv = torch.randint(-3, 4, (10, 5), dtype=torch.int32, generator=g)
    wv = torch.randn(5, 3, generator=g)
    outs = ctx.compile(ELEMENTWISE)(x=torch.nested.nested_tensor_from_jagged(xv, off),
                                    i=torch.nested.nested_tensor_from_jagged(iv, off), w=wv)
    X, I = xv.double(), iv
    refs = [X.square(), torch.reciprocal(X), F.relu6(X * 4), F.hardtanh(X, -0.5, 0.75), F.hardsigmoid(X * 4),
            F.hardswish(X * 4), F.softsign(X), I.reciprocal(), X @ wv.double(), I.square(), F.relu6(I * 3)]
    assert len(outs) == len(refs)
    for got, want in zip(outs, refs):
        got = got.values() if got.is_nested else got
        assert got.dtype == (torch.float32 if want.dtype == torch.float64 else want.dtype)
        close(got, want, 1e-6)


EXP_FAMILY = """
ragged j : B
input x : f32[B, j, 5]
input h : bf16[B, j, 5]
a = torch.log1p(x)
b = torch.expm1(x)
c = F.softplus(x)
d = F.softplus(x, beta=2.0, threshold=10.0)
e = F.elu(x)
f = F.celu(x, alpha=0.5)
g = F.selu(x)
k = F.mish(x)
l = x.var(1)
m = torch.std(x, dim=-1, keepdim=True)
n = x.var(dim=(1, 2), unbiased=False)
o = x.std(1, correction=0)
p = x.var()
q = x.mean(dim=(0, 1))
r = torch.sum(h, dim=(1, 2))
s = F.softplus(h)
output a, b, c, d, e, f, g, k, l, m, n, o, p, q, r, s
"""


def test_pytorch_exp_family_and_var(ctx):
    """log1p, expm1, softplus, elu, celu, selu, mish, var and std against PyTorch's own in
    float64, within 4 f32 ulps of each value (relative: log1p and expm1 near 0 must keep their
    accuracy, where exp(x) - 1 would lose it), with inf, -inf, NaN, -0.0, 1e-30 and values that
    overflow exp in the data; var over an empty item and an item of one element (NaN, as
    PyTorch's); a mean and a var over every row of every item (not the items' means combined);
    bf16 sums over two dims and softplus rounded once from f32."""
    F = torch.nn.functional
    gen = torch.Generator().manual_seed(3)
    off = torch.tensor([0, 3, 3, 4, 12])
    xv = torch.randn(12, 5, generator=gen) * 3
    xv[0] = torch.tensor([1e-7, -1e-7, 1e-30, -0.0, 0.0])
    xv[1] = torch.tensor([float("inf"), float("-inf"), float("nan"), 88.0, -20.0])
    xv[2] = torch.tensor([-0.999, 30.0, 1e-4, -1e-4, 20.0])
    hv = (torch.randn(12, 5, generator=gen) * 4).bfloat16()
    outs = ctx.compile(EXP_FAMILY)(x=torch.nested.nested_tensor_from_jagged(xv, off),
                                   h=torch.nested.nested_tensor_from_jagged(hv, off))
    X, H = xv.double(), hv.float()
    items = [X[off[i]:off[i + 1]] for i in range(len(off) - 1)]
    per_item = lambda fn: torch.stack([fn(t) for t in items])  # noqa: E731
    hitems = [H[off[i]:off[i + 1]] for i in range(len(off) - 1)]
    with warnings.catch_warnings():  # PyTorch warns of var with fewer elements than correction
        warnings.simplefilter("ignore")
        refs = [torch.log1p(X), torch.expm1(X), F.softplus(X), F.softplus(X, beta=2.0, threshold=10.0), F.elu(X),
                F.celu(X, alpha=0.5), F.selu(X), F.mish(X), per_item(lambda t: t.var(0)),
                torch.std(X, dim=-1, keepdim=True), per_item(lambda t: t.var(unbiased=False)),
                per_item(lambda t: t.std(0, correction=0)), X.var(), X.mean(0),
                torch.stack([t.sum() for t in hitems]).bfloat16(), F.softplus(H).bfloat16()]
    assert len(outs) == len(refs)
    for name, got, want in zip("abcdefgklmnopqrs", outs, refs):
        got = got.values() if got.is_nested else got
        assert got.dtype == (torch.bfloat16 if want.dtype == torch.bfloat16 else torch.float32), name
        g, w = got.double().numpy(), want.double().numpy()
        assert g.shape == w.shape, name
        if want.dtype == torch.bfloat16:  # one rounding from f32: the same bf16 value, or a neighbour
            tol = np.abs(w) * 2.0 ** -8
        else:
            tol = 4 * np.spacing(np.abs(w).astype(np.float32)).astype(np.float64) + 1e-44
        with np.errstate(invalid="ignore"):
            ok = (g == w) | (np.isnan(g) & np.isnan(w)) | (np.abs(g - w) <= tol)
        assert ok.all(), (name, g[~ok][:4], w[~ok][:4])
    assert np.signbit(outs[0].values()[0, 3].item()) and np.signbit(outs[1].values()[0, 3].item())  # -0.0 kept
    var_items = outs[8].numpy()
    assert np.isnan(var_items[1]).all() and np.isnan(var_items[2]).all()  # empty item, one element


ARGMAX = """
ragged j : B
input x : f32[B, j, 5]
input h : bf16[B, j, 5]
input n : i64[B, j, 5]
input w : f32[3, 4]
a = torch.argmax(x, dim=1)
b = x.argmin(-1)
c = x.argmax(2, keepdim=True)
d = h.argmin(dim=1, keepdim=True)
e = n.argmax(-1)
f = w.argmax()
g = torch.argmin(w, keepdim=True)
k = w.argmax(0)
l = F.log_softmax(x, -1).argmax(-1)
output a, b, c, d, e, f, g, k, l
"""


def test_pytorch_argmax(ctx):
    """argmax and argmin against PyTorch's own: the first of tied extremes, NaN counting as the
    extreme, -0.0 equal to 0.0, inf, integers and bf16, over the ragged dim and dense dims,
    keepdim, dim=None of a dense tensor (keepdim too); an empty item gives -1 (PyTorch refuses an
    empty dim; the guide documents -1)."""
    gen = torch.Generator().manual_seed(5)
    off = torch.tensor([0, 4, 4, 5, 13])
    xv = torch.randint(-3, 4, (13, 5), generator=gen).float()  # many ties
    xv[0] = torch.tensor([1.0, float("nan"), 2.0, float("nan"), -1.0])
    xv[1] = torch.tensor([-0.0, 0.0, -0.0, float("inf"), float("-inf")])
    xv[2, 2] = float("nan")
    hv = (torch.randn(13, 5, generator=gen) * 2).bfloat16()
    nv = torch.randint(-2, 3, (13, 5), generator=gen)
    w = torch.randint(0, 3, (3, 4), generator=gen).float()
    nt = torch.nested.nested_tensor_from_jagged
    outs = ctx.compile(ARGMAX)(x=nt(xv, off), h=nt(hv, off), n=nt(nv, off), w=w)
    items = lambda v: [v[off[i]:off[i + 1]] for i in range(len(off) - 1)]  # noqa: E731

    def per_item(v, fn):  # over the ragged dim: -1 for the empty item
        return torch.stack([fn(t) if len(t) else torch.full(t.shape[1:], -1, dtype=torch.int64) for t in items(v)])
    refs = [per_item(xv, lambda t: t.argmax(0)), xv.argmin(-1), xv.argmax(1, keepdim=True),
            per_item(hv, lambda t: t.argmin(0)).reshape(4, 1, 5), nv.argmax(-1), w.argmax(),
            torch.argmin(w, keepdim=True), w.argmax(0), torch.log_softmax(xv, -1).argmax(-1)]
    assert len(outs) == len(refs)
    for name, got, want in zip("abcdefgkl", outs, refs):
        got = got.values() if got.is_nested else got
        assert got.dtype == torch.int64, name
        assert got.shape == want.shape and torch.equal(got, want), (name, got, want)


MAX_PAIRS = """
ragged j : B
input x : f32[B, j, 5]
input m : bool[B, j, 5]
input w : f32[3, 4]
v, i = torch.max(x, 1)
a = x.min(-1).indices
b = torch.max(x, dim=-1, keepdim=True)[1]
c = torch.max(x, x * -1.0)
d = w.max(1)[0]
e = m.max(-1).indices
f = torch.min(w, 0).values
output v, i, a, b, c, d, e, f
"""


def test_pytorch_max_pairs(ctx):
    """PyTorch's max and min with a dim give (values, indices): unpacked, indexed [0] and [1],
    .values and .indices, of a bool tensor too; of two tensors the elementwise maximum. Against
    PyTorch's own on ties, NaN and -0.0 (the empty item's index is -1, its value -inf)."""
    gen = torch.Generator().manual_seed(7)
    off = torch.tensor([0, 3, 3, 9])
    xv = torch.randint(-2, 3, (9, 5), generator=gen).float()
    xv[0, 1], xv[4] = float("nan"), torch.tensor([-0.0, 0.0, 0.0, -1.0, -0.0])
    mv = torch.rand(9, 5, generator=gen) > 0.5
    w = torch.randint(0, 3, (3, 4), generator=gen).float()
    nt = torch.nested.nested_tensor_from_jagged
    outs = ctx.compile(MAX_PAIRS)(x=nt(xv, off), m=nt(mv, off), w=w)
    items = [xv[off[k]:off[k + 1]] for k in range(3)]
    vals = torch.stack([t.max(0).values if len(t) else torch.full((5,), float("-inf")) for t in items])
    idx = torch.stack([t.max(0).indices if len(t) else torch.full((5,), -1) for t in items])
    refs = [vals, idx, xv.min(-1).indices, torch.max(xv, dim=-1, keepdim=True)[1], torch.max(xv, xv * -1.0),
            w.max(1)[0], mv.max(-1).indices, torch.min(w, 0).values]
    assert len(outs) == len(refs)
    for name, got, want in zip("viabcdef", outs, refs):
        got = got.values() if got.is_nested else got
        assert got.dtype == want.dtype and got.shape == want.shape, (name, got.dtype, got.shape, want.shape)
        assert torch.equal(got, want) or (got.isnan() == want.isnan()).all() and torch.equal(
            got.nan_to_num(0.5), want.nan_to_num(0.5)), (name, got, want)


REDUCE_ALL = """
ragged j : B
input x : f32[B, j, 5]
input i : i32[B, j, 5]
input h : bf16[B, j, 5]
input w : f32[3, 4]
a = x.sum()
b = torch.mean(x)
c = x.amax()
d = w.sum(keepdim=True)
e = i.sum()
f = h.mean()
g = torch.min(w)
k = w.prod(dim=None)
l = x.sum().sum()
output a, b, c, d, e, f, g, k, l
"""


def test_pytorch_reduce_all(ctx):
    """sum, mean, max, min, prod with no dim (PyTorch's dim=None): over every element of every
    item of a jagged tensor (the mean over all of them, not of the items' means), a 0-d result;
    keepdim keeps every dim as 1; integers sum to i64; a bf16 mean accumulates in f32 and rounds
    once. Against PyTorch's own on the packed values in float64."""
    gen = torch.Generator().manual_seed(11)
    off = torch.tensor([0, 1, 1, 6])
    xv = torch.randn(6, 5, generator=gen)
    iv = torch.randint(-9, 10, (6, 5), generator=gen, dtype=torch.int32)
    hv = torch.randn(6, 5, generator=gen).bfloat16()
    w = torch.rand(3, 4, generator=gen) + 0.5
    nt = torch.nested.nested_tensor_from_jagged
    outs = ctx.compile(REDUCE_ALL)(x=nt(xv, off), i=nt(iv, off), h=nt(hv, off), w=w)
    X = xv.double()
    refs = [X.sum(), X.mean(), X.amax(), w.double().sum(dim=None, keepdim=True), iv.sum(), hv.float().mean().bfloat16(),
            w.min(), w.double().prod(), X.sum()]
    assert len(outs) == len(refs)
    for name, got, want in zip("abcdefgkl", outs, refs):
        assert got.shape == want.shape, (name, got.shape, want.shape)
        if want.dtype in (torch.int64, torch.bfloat16):
            assert got.dtype == want.dtype and torch.equal(got, want), (name, got, want)
        else:
            assert got.dtype == torch.float32, name
            assert abs(got.double().item() - want.item()) <= 1e-6 * (1 + X.abs().sum().item()), (name, got, want)


PORTING = """
ragged j : B
input x : f32[B, j, 6]
input h : bf16[B, j, 6]
a = x[..., : x.shape[-1] // 2] * (7 % 3) + (-7 // 2) + 2 ** -1
b = torch.arange(1.0, 2.0, 0.25) + arange(5, 0, -2).float().sum()
inv_freq = 1.0 / (10000 ** (torch.arange(0, 6, 2).float() / 6))
c = torch.zeros_like(x) + torch.full_like(x, 0.1, dtype=torch.float64) + x.new_ones(6)
d = x.norm(dim=-1) + torch.linalg.vector_norm(x, ord=float("inf"), dim=-1) + x.norm(p=1, dim=2)
e = torch.linalg.vector_norm(x, ord=3, dim=(1, 2), keepdim=True)
f = x.flip(1)
g = torch.flip(x, [1, 2])
k = x.unbind(-1)[1] + x.unbind(2)[5]
l = h.norm(dim=-1)
m = x.norm()
n = torch.linalg.vector_norm(x, 0, -1) + torch.linalg.vector_norm(x, float("-inf"), -1)
output a, b, inv_freq, c, d, e, f, g, k, l, m, n
"""


def test_pytorch_porting(ctx):
    """What PyTorch code writes around a model, against PyTorch's own: Python's arithmetic of
    numbers (x.shape[-1] // 2, %, ** -1) folded as Python folds it; arange(start, end, step) of
    ints and floats (a rotary embedding's inverse frequencies); zeros_like, full_like with a
    dtype, new_ones; norm and linalg.vector_norm (2, 1, 3, inf, -inf, 0; dims, keepdim; bf16
    rounded once); flip of the ragged dim (each item reversed) and of dense dims; unbind."""
    gen = torch.Generator().manual_seed(13)
    off = torch.tensor([0, 2, 2, 7])
    xv = torch.randn(7, 6, generator=gen)
    xv[0, 1] = 0.0
    hv = torch.randn(7, 6, generator=gen).bfloat16()
    nt = torch.nested.nested_tensor_from_jagged
    outs = ctx.compile(PORTING)(x=nt(xv, off), h=nt(hv, off))
    items = [xv[off[k]:off[k + 1]] for k in range(3)]
    lv = torch.linalg.vector_norm
    refs = [xv[..., :3] * 1 + (-4) + 0.5,
            torch.arange(1.0, 2.0, 0.25) + torch.arange(5, 0, -2).float().sum(),
            1.0 / (10000 ** (torch.arange(0, 6, 2).float() / 6)),
            (torch.zeros_like(xv) + torch.full_like(xv, 0.1, dtype=torch.float64) + xv.new_ones(6)),
            xv.norm(dim=-1) + lv(xv, ord=float("inf"), dim=-1) + xv.norm(p=1, dim=1),
            torch.stack([lv(t.double(), ord=3).reshape(1, 1) for t in items]),
            torch.cat([t.flip(0) for t in items]),
            torch.cat([t.flip(0, 1) for t in items]),
            xv[:, 1] + xv[:, 5],
            hv.float().norm(dim=-1).bfloat16(),
            xv.double().norm(),
            lv(xv, 0, -1) + lv(xv, float("-inf"), -1)]
    assert len(outs) == len(refs)
    for name, got, want in zip(["a", "b", "inv_freq", "c", "d", "e", "f", "g", "k", "l", "m", "n"], outs, refs):
        got = got.values() if got.is_nested else got
        assert got.shape == want.shape, (name, got.shape, want.shape)
        if want.dtype == torch.bfloat16:
            assert got.dtype == want.dtype and torch.equal(got, want), (name, got, want)
            continue
        tol = 4 * np.spacing(np.abs(want.float().numpy())).astype(np.float64) + 1e-12
        assert (np.abs(got.double().numpy() - want.double().numpy()) <= tol).all(), (name, got, want)


MORE = """
ragged j : B
input x : f32[B, j, 4]
input y : f32[B, j, 4]
input h : bf16[B, j, 4]
input c : f32[B, j, 1]
input w : f32[3, 4]
input m : bool[4, 4]
a = F.logsigmoid(x)
b = F.tanhshrink(x)
d = F.softshrink(x, 0.5)
e = F.hardshrink(x, lambd=0.3)
f = F.threshold(x, 0.1, 20.0)
g = F.softmin(x, dim=1)
k = F.glu(x, -1)
l = torch.logaddexp(x, y)
n = F.glu(h)
o = torch.tril(w, -1) + w.triu(1) * 2
p = m.triu()
q = c.expand(-1, -1, 4) + c.expand_as(x)
r = w.repeat(2, 3)
s = x.repeat(1, 1, 2)
t = w.unsqueeze(0).expand(2, 3, 4)
u = torch.tril(x @ x.transpose(1, 2))
output a, b, d, e, f, g, k, l, n, o, p, q, r, s, t, u
"""


def test_pytorch_more(ctx):
    """logsigmoid, tanhshrink, softshrink, hardshrink, threshold, softmin, glu (bf16 rounded
    once), logaddexp, tril and triu (of each item's attention block too), expand, expand_as and
    repeat, against PyTorch's own in float64, with inf, -inf, NaN and -0.0 in the data."""
    gen = torch.Generator().manual_seed(17)
    off = torch.tensor([0, 3, 3, 8])
    xv = torch.randn(8, 4, generator=gen) * 3
    xv[0] = torch.tensor([float("inf"), float("-inf"), float("nan"), -0.0])
    yv = torch.randn(8, 4, generator=gen)
    yv[0, :2] = torch.tensor([float("inf"), float("-inf")])
    hv = torch.randn(8, 4, generator=gen).bfloat16()
    cv = torch.randn(8, 1, generator=gen)
    w = torch.randn(3, 4, generator=gen)
    mv = torch.rand(4, 4, generator=gen) > 0.3
    nt = torch.nested.nested_tensor_from_jagged
    outs = ctx.compile(MORE)(x=nt(xv, off), y=nt(yv, off), h=nt(hv, off), c=nt(cv, off), w=w, m=mv)
    F = torch.nn.functional
    X = xv.double()
    items = lambda v: [v[off[i]:off[i + 1]] for i in range(3)]  # noqa: E731
    soft = torch.cat([F.softmin(t, dim=0) for t in items(X)])
    blocks = torch.cat([torch.tril(t @ t.T).reshape(-1) for t in items(X)])
    refs = [F.logsigmoid(X), F.tanhshrink(X), F.softshrink(X, 0.5), F.hardshrink(X, 0.3), F.threshold(X, 0.1, 20.0),
            soft, F.glu(X, -1), torch.logaddexp(X, yv.double()), F.glu(hv.float()).bfloat16(),
            torch.tril(w, -1) + w.triu(1) * 2, mv.triu(), cv.expand(-1, 4) + cv.expand_as(xv), w.repeat(2, 3),
            xv.repeat(1, 2), w.unsqueeze(0).expand(2, 3, 4), blocks]
    names = ["a", "b", "d", "e", "f", "g", "k", "l", "n", "o", "p", "q", "r", "s", "t", "u"]
    assert len(outs) == len(refs) == len(names)
    for name, got, want in zip(names, outs, refs):
        if name == "u":  # blocks of two ragged dims: ragjit's Jagged, each item's len_b^2 values
            got = torch.from_numpy(np.asarray(got.values)).reshape(-1)
        got = got.values() if got.is_nested else got
        assert got.shape == want.shape, (name, got.shape, want.shape)
        if want.dtype in (torch.bfloat16, torch.bool):
            assert got.dtype == want.dtype and torch.equal(got, want), (name, got, want)
            continue
        g, w64 = got.double().numpy(), want.double().numpy()
        scale = np.abs(X.numpy()) if name == "b" else np.abs(w64)  # x - tanh(x) cancels: ulps of x
        ulps = 8 if name in ("g", "l") else 4  # softmin, logaddexp: exp's 2.5 ulps, a sum, a quotient
        tol = ulps * np.spacing(scale.astype(np.float32)).astype(np.float64) + 1e-6 * (name == "u")
        with np.errstate(invalid="ignore"):
            ok = (g == w64) | (np.isnan(g) & np.isnan(w64)) | (np.abs(g - w64) <= tol)
        assert ok.all(), (name, g[~ok][:4], w64[~ok][:4])
