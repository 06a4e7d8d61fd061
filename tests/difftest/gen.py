"""gen.py — random ragjit programs over every op family the guide documents.

A program starts from a float jagged input x : f32[B, j1, D] (D a constant, odd or even or 1,
or a named size) and grows by steps; each step is one op family's builder, which finds
operands of the types it needs in the pool of values made so far (or declares a new input)
and adds what it builds to the pool. The next op is the least-used one so far half of the
time, so a few hundred programs reach every op. Builders only make what the guide says is
valid; types are worked out by model.py, not by ragjit.

Some builders make fixed shapes on purpose, because they are where bugs were found: pad ->
softmax/reduction over the padded dim -> unpad (also of [B, j1, j1] blocks, with a
max(keepdim) - p broadcast, with an explicit len= above the longest item), dense inputs over a
pad length (a softmax over their dense dim, unpadded; pad(x, len=L) + m under a softmax), i64
literals above 2^53, gelu's tanh form far into the negative range.

Tensors per head ([B, H, j1, D] and what comes of it) are gen_heads.py's: a share of programs
(HEADS_SHARE, and the op choice's "heads") grow a chain of them.

The generator also knows the lengths of the data (gen is handed maxlen) so that an explicit
pad len= is never shorter than the longest item; shrinking only makes items shorter.
"""
import random

from .gen_heads import HeadsGen
from .model import FLOATS, HEADED, INTS, Node, Program, broadcast, category, is_pad, kind, lit, promote, to_float

UNARY = ["neg", "abs", "sgn", "relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh", "exp", "log", "sqrt",
         "rsqrt", "sin", "cos", "logical_not"]
FLOAT_UNARY = {"gelu", "gelu_tanh", "silu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "sin", "cos"}
BINARY = ["add", "sub", "mul", "div", "pow", "maximum", "minimum"]
COMPARE = ["eq", "ne", "lt", "le", "gt", "ge"]
REDUCE = ["sum", "mean", "max", "min", "prod"]
OPS = (UNARY + BINARY + COMPARE + ["logical_and", "logical_or", "where", "masked_fill", "cast"] + REDUCE +
       ["softmax", "log_softmax", "layer_norm", "rms_norm", "pad", "unpad", "matmul", "linear", "embedding",
        "gather", "take_along_dim", "index_select", "positions", "reshape", "view", "unsqueeze", "squeeze",
        "transpose", "narrow", "padchain", "densepad", "causal", "bigint", "pairinput", "heads", "cat", "stack", "permute", "flatten",
        "unflatten", "arange", "full", "clamp", "leaky_relu", "logsumexp", "normalize", "act", "expfn", "stat", "argmax", "porting"])
FLOAT_LITS = [0.5, 2.0, -1.5, 1e-05, 3.0, 0.25, -0.75, 100.0]
BIG_INTS = [9007199254740993, -9007199254740993, 2**62 + 1, 2**63 - 1]
PSEUDO = ("padchain", "densepad", "causal", "bigint", "pairinput", "heads")  # builders, not ops
HEADS_SHARE = 0.3  # programs given a chain per head besides the ones the op choice draws


class Gen(HeadsGen):
    def __init__(self, seed, maxlen, usage):
        self.rng = random.Random(seed)
        self.maxlen, self.usage = maxlen, usage
        self.H = None  # heads: set by the first chain per head (gen_heads.py)
        self.head_outs = []
        r = self.rng
        self.D = r.choice([1, 3, 4, 5, 7, 8, 16, "D"])
        self.sizes = {"D": r.choice([2, 4, 6])} if self.D == "D" else {}
        self.inputs, self.pool = [], []
        self.x = self.input("f32", ["B", "j1", self.D])

    # ---- pool helpers -------------------------------------------------------------------------

    def input(self, dtype, shape, **attrs):
        n = Node("input", [], dtype, shape, **attrs)
        self.inputs.append(n)
        self.pool.append(n)
        return n

    def add(self, op, args, dtype, shape, **attrs):
        attrs.setdefault("style", self.rng.randrange(12))
        n = Node(op, args, dtype, shape, **attrs)
        self.pool.append(n)
        self.usage[op] = self.usage.get(op, 0) + 1
        return n

    def pick(self, pred):
        c = [n for n in self.pool if pred(n) and n.kind != "rowcol" and n.attrs.get("usable", True)]
        return self.rng.choice(c) if c else None

    def fjag(self, inner=None):
        """A float jagged [B, j1, inner] value (inner defaults to D)."""
        inner = self.D if inner is None else inner
        n = self.pick(lambda n: n.dtype in FLOATS and n.shape == ["B", "j1", inner])
        if n is None or self.rng.random() < 0.15:
            n = self.input(self.rng.choice(["f32", "f32", "f32", "f64"]), ["B", "j1", inner])
        return n

    def any_float(self):
        n = self.pick(lambda n: n.dtype in FLOATS and n.kind in ("jagged", "pair", "dense"))
        return n or self.fjag()

    def ints(self):
        n = self.pick(lambda n: n.dtype in INTS and n.kind in ("jagged", "dense"))
        if n is None or self.rng.random() < 0.3:
            n = self.input(self.rng.choice(INTS), ["B", "j1", self.D])
        return n

    def bools(self, like=None):
        shape = like.shape if like is not None else ["B", "j1", self.D]
        n = self.pick(lambda n: n.dtype == "bool" and broadcast(n.shape, shape) == shape)
        if n is None or self.rng.random() < 0.3:
            n = self.input("bool", shape) if kind(shape) in ("jagged", "dense") and "j1" not in shape[2:] and not any(
                is_pad(d) for d in shape) else self.compare_of(like)
        return n

    def compare_of(self, a):
        return self.add(self.rng.choice(COMPARE), [a, lit(0.0)], "bool", a.shape, cdt=promote([a.dtype], [2]))

    def partner(self, a, same_dtype=None):
        """A second operand for a: a value of its shape, a broadcastable input, or a literal."""
        r, dt = self.rng, same_dtype or a.dtype
        roll = r.random()
        if roll < 0.5 and a.kind == "pair" and len(a.shape) == 3:  # a column or a row of columns
            c = [n for n in self.pool if n.shape in (["B", "j1", 1], ["B", 1, "j1"]) and category(n.dtype) == category(dt)]
            if c:
                return r.choice(c)
        if roll < 0.35:
            b = self.pick(lambda n: n is not a and n.shape == a.shape and category(n.dtype) == category(dt))
            if b is not None:
                return b
        if roll < 0.6 and a.kind == "jagged" and len(a.shape) == 3:
            shape = r.choice([[a.shape[2]], ["B", 1, a.shape[2]], ["B", "j1", 1]])
            return self.input(dt if dt != "bool" else "bool", shape)
        if roll < 0.7 and a.kind == "dense" and a.shape and a.shape[-1] != ("pad", "max"):
            return self.input(dt, a.shape[-1:])  # an input's dims are sizes, never max(j1)
        if dt in INTS:
            return lit(r.choice([1, 2, 3, -4, 7]))
        if dt == "bool":
            return lit(r.choice([True, False]))
        return lit(r.choice(FLOAT_LITS))

    # ---- elementwise ------------------------------------------------------------------------------

    def b_unary(self, op):
        r = self.rng
        if op == "logical_not":
            a = self.bools()
            return self.add(op, [a], "bool", a.shape)
        a = self.ints() if op in ("neg", "abs", "relu", "sgn") and r.random() < 0.3 else self.any_float()
        if op in ("log", "sqrt", "rsqrt") and r.random() < 0.7:
            a = self.add("add", [self.add("abs", [a], a.dtype, a.shape), lit(0.5)], a.dtype, a.shape)
        if op == "gelu_tanh" and r.random() < 0.4:
            a = self.add("mul", [a, lit(r.choice([30.0, 100.0, -60.0]))], a.dtype, a.shape)
        if op in ("exp", "sin", "cos") and r.random() < 0.5:
            a = self.add("tanh", [a], to_float(a.dtype), a.shape)
        dt = to_float(a.dtype) if op in FLOAT_UNARY else a.dtype
        return self.add(op, [a], dt, a.shape, cdt=dt)

    def b_binary(self, op):
        r = self.rng
        if op == "pow":
            return self.b_pow()
        roll = r.random()
        if roll < 0.2 and op in ("add", "sub", "mul", "maximum", "minimum"):
            a = self.ints()
        elif roll < 0.27 and op in ("add", "mul"):
            a = self.bools()
        else:
            a = self.any_float()
        b = self.partner(a)
        return self.elementwise(op, a, b)

    def elementwise(self, op, a, b):
        tens = [x for x in (a, b) if not x.is_lit()]
        cats = [x.attrs["cat"] for x in (a, b) if x.is_lit()]
        cdt = promote([t.dtype for t in tens], cats)
        shape = broadcast(a.shape, b.shape) if not b.is_lit() else a.shape
        if op in COMPARE:
            return self.add(op, [a, b], "bool", shape, cdt=cdt)
        dt = to_float(cdt) if op == "div" else cdt
        if op == "div":
            cdt = dt
        return self.add(op, [a, b], dt, shape, cdt=cdt)

    def b_pow(self):
        r = self.rng
        if r.random() < 0.3:
            a = self.ints()
            return self.add("pow", [a, lit(r.choice([0, 1, 2, 3, -1, -2]))], a.dtype, a.shape, cdt=a.dtype)
        a = self.any_float()
        if r.random() < 0.5:
            return self.add("pow", [a, lit(r.choice([2, 3, 0.5, -1, 2.0, -0.5]))], a.dtype, a.shape, cdt=a.dtype)
        e = self.add("abs", [a], a.dtype, a.shape)
        base = self.add("add", [self.add("abs", [a], a.dtype, a.shape), lit(0.25)], a.dtype, a.shape)
        return self.add("pow", [base, e], a.dtype, a.shape, cdt=a.dtype)

    def b_compare(self, op):
        a = self.ints() if self.rng.random() < 0.3 else self.any_float()
        return self.elementwise(op, a, self.partner(a))

    def b_logical(self, op):
        a = self.bools()
        b = self.bools(a) if self.rng.random() < 0.7 else lit(self.rng.choice([True, False]))
        shape = a.shape if b.is_lit() else broadcast(a.shape, b.shape)
        return self.add(op, [a, b], "bool", shape, cdt="bool")

    def b_where(self, _op):
        a = self.any_float() if self.rng.random() < 0.8 else self.ints()
        c = self.bools(a)
        b = self.partner(a)
        if self.rng.random() < 0.3 and a.dtype in FLOATS:
            b = lit(self.rng.choice([float("-inf"), float("inf"), 0.0]))
        tens = [x for x in (a, b) if not x.is_lit()]
        cdt = promote([t.dtype for t in tens], [x.attrs["cat"] for x in (b,) if x.is_lit()])
        shape = broadcast(c.shape, a.shape if b.is_lit() else broadcast(a.shape, b.shape))
        return self.add("where", [c, a, b], cdt, shape, cdt=cdt)

    def b_masked_fill(self, _op):
        a = self.any_float() if self.rng.random() < 0.75 else self.ints()
        m = self.bools(a)
        v = self.rng.choice([0.0, -1e9, float("-inf"), 2.5, 7.0]) if a.dtype in FLOATS else self.rng.choice([0, -3, 5, 2.75])
        return self.add("masked_fill", [a, m], a.dtype, a.shape, cdt=a.dtype, value=v)

    def b_cast(self, _op):
        r = self.rng
        a = self.pick(lambda n: n.kind in ("jagged", "dense", "pair")) or self.x
        if a.dtype in FLOATS and r.random() < 0.5:
            a = self.add("mul", [a, lit(r.choice([10.0, 3.5, 1e10]))], a.dtype, a.shape, cdt=a.dtype)
        to = r.choice(["f32", "f64", "i32", "i64", "bool"])
        return self.add("cast", [a], to, a.shape, to=to)

    def b_bigint(self, _op):
        r = self.rng
        a = self.pick(lambda n: n.dtype == "i64" and n.kind in ("jagged", "dense"))
        if a is None:
            a = self.input("i64", ["B", "j1", self.D])
        op = r.choice(["add", "sub", "eq", "mul"])
        v = lit(r.choice(BIG_INTS) if op != "mul" else r.choice([3, -2]))
        n = self.elementwise(op, a, v)
        if op == "mul":
            n = self.elementwise("add", n, lit(r.choice(BIG_INTS)))
        return n

    # ---- reductions, softmax, norms -----------------------------------------------------------------

    def reducible(self, floats):
        ok = (lambda n: n.dtype in FLOATS) if floats else (lambda n: True)
        return self.pick(lambda n: ok(n) and n.kind in ("jagged", "pair", "dense") and len(n.shape) >= 1
                         and not (n.kind == "dense" and "j1" in n.shape)) or self.fjag()

    def red_dims(self, a):
        rank = len(a.shape)
        if a.kind == "dense":
            return list(range(rank))
        return list(range(1, rank))

    def b_reduce(self, op):
        r = self.rng
        a = self.reducible(op == "mean" or r.random() < 0.7)
        if op == "mean" and a.dtype not in FLOATS:
            a = self.add("cast", [a], "f32", a.shape, to="f32")
        dims = self.red_dims(a)
        if not dims:
            return None
        d, keep = r.choice(dims), r.random() < 0.35
        shape = list(a.shape)
        if keep:
            shape[d] = 1
        else:
            del shape[d]
        if a.kind == "pair" and d == 1 and not keep:
            shape = ["B", "j1"] + shape[2:]
        dt = "i64" if op in ("sum", "prod") and a.dtype not in FLOATS else a.dtype
        dt = to_float(dt) if op == "mean" else dt
        dim = d - len(a.shape) if r.random() < 0.3 else d
        return self.add(op, [a], dt, shape, dim=dim, keepdim=keep)

    def b_softmax(self, op):
        a = self.reducible(True)
        d = self.rng.choice(self.red_dims(a))
        dim = d - len(a.shape) if self.rng.random() < 0.3 else d
        return self.add(op, [a], a.dtype, a.shape, dim=dim)

    def b_norm(self, op):
        r = self.rng
        a = self.pick(lambda n: n.dtype in FLOATS and n.kind in ("jagged", "dense") and len(n.shape) >= 2
                      and n.shape[-1] not in ("j1", "B") and not is_pad(n.shape[-1]))
        a = a or self.fjag()
        k = 2 if len(a.shape) >= 4 and a.kind == "jagged" and r.random() < 0.5 else 1
        ns = a.shape[-k:]
        args = [a]
        if r.random() < 0.6:
            args.append(self.input(a.dtype, ns))
            if op == "layer_norm" and r.random() < 0.6:
                args.append(self.input(a.dtype, ns))
        eps = r.choice([None, 1e-5, 1e-3])
        return self.add(op, args, a.dtype, a.shape, nshape=ns, eps=eps)

    # ---- pad / unpad --------------------------------------------------------------------------------

    def pad_len(self):
        r, roll = self.rng, self.rng.random()
        if roll < 0.55:
            return ("pad", "max"), None
        if roll < 0.8:
            L = self.maxlen + r.choice([0, 0, 1, 3])
            return ("pad", L), str(L)
        self.sizes["L"] = ("above_max", r.choice([0, 2]))
        return ("pad", "L"), "L"

    def b_pad(self, _op, src=None):
        r = self.rng
        a = src or self.pick(lambda n: n.kind in ("jagged", "pair") and n.dtype != "bool") or self.fjag()
        dim, text = self.pad_len()
        if a.dtype in FLOATS:
            v = r.choice([0.0, 0.5, -2.0, float("-inf"), float("inf"), float("nan"), -1e30])
        else:
            v = r.choice([0, -7, 3, 2.75])
        shape = ["B", dim] + ([dim] if a.kind == "pair" else []) + a.shape[3 if a.kind == "pair" else 2:]
        return self.add("pad", [a], a.dtype, shape, value=v, len=text, pair=a.kind == "pair")

    def padded(self):
        return self.pick(lambda n: n.kind == "dense" and len(n.shape) >= 2 and n.shape[0] == "B" and is_pad(n.shape[1]))

    def b_unpad(self, _op):
        p = self.padded() or self.b_pad("pad")
        pair = len(p.shape) >= 3 and is_pad(p.shape[2])
        shape = ["B", "j1"] + (["j1"] if pair else []) + p.shape[3 if pair else 2:]
        return self.add("unpad", [p], p.dtype, shape, pair=pair)

    def b_padchain(self, _op):
        """pad -> an op with dense semantics over the padded tensor -> unpad."""
        r = self.rng
        src = self.pick(lambda n: n.kind == "pair" and n.dtype in FLOATS) if r.random() < 0.4 else None
        p = self.b_pad("pad", src or self.fjag())
        pair = p.attrs["pair"]
        roll = r.random()
        if roll < 0.45:
            dims = [1, 2] if pair or len(p.shape) > 2 else [1]
            q = self.add(r.choice(["softmax", "log_softmax"]), [p], p.dtype, p.shape, dim=r.choice(dims))
        elif roll < 0.75:
            red = r.choice(["max", "sum", "mean", "min"])
            m = self.add(red, [p], p.dtype, p.shape[:1] + [1] + p.shape[2:], dim=1, keepdim=True)
            q = self.elementwise(r.choice(["sub", "add", "mul"]), m, p)
        else:
            q = self.b_unary_on(p)
        shape = ["B", "j1"] + (["j1"] if pair else []) + p.shape[3 if pair else 2:]
        return self.add("unpad", [q], q.dtype, shape, pair=pair)

    def b_densepad(self, _op):
        """A dense input over a pad length, m : [B, L, inner]: a kernel over its dense dims whose
        result is unpadded (such an output was once never written), or m added to
        pad(x, len=L) under a softmax over dim 1 (padding rows that differ row by row, which a
        softmax keeps for all L rows: its scratch was once sized by the longest item)."""
        r = self.rng
        x = self.fjag()
        if r.random() < 0.5:
            L = self.maxlen + r.choice([0, 1, 3, 9])
            dim, text = ("pad", L), str(L)
        else:
            self.sizes["L"] = ("above_max", r.choice([0, 2, 9]))
            dim, text = ("pad", "L"), "L"
        inner = x.shape[2]
        m = self.input(x.dtype, ["B", dim, inner])
        if r.random() < 0.5:
            if r.random() < 0.6:
                q = self.add(r.choice(["softmax", "log_softmax"]), [m], m.dtype, m.shape, dim=r.choice([1, 2]))
            else:
                red = r.choice(["max", "sum", "mean", "min"])
                q = self.elementwise("sub", m, self.add(red, [m], m.dtype, ["B", 1, inner], dim=1, keepdim=True))
            return self.add("unpad", [q], q.dtype, ["B", "j1", inner], pair=False)
        p = self.add("pad", [x], x.dtype, ["B", dim, inner], value=r.choice([0.0, 0.5, -2.0]), len=text, pair=False)
        h = self.elementwise("add", p, m)
        return self.add(r.choice(["softmax", "log_softmax"]), [h], h.dtype, h.shape, dim=1)

    def b_unary_on(self, a):
        op = self.rng.choice(["relu", "exp", "tanh", "gelu", "sigmoid", "abs"])
        dt = to_float(a.dtype) if op in FLOAT_UNARY else a.dtype
        return self.add(op, [a], dt, a.shape, cdt=dt)

    # ---- products --------------------------------------------------------------------------------

    def b_matmul(self, _op):
        r = self.rng
        roll, N = r.random(), r.choice([1, 3, 5, 8])
        if roll < 0.3:
            a = self.fjag()
            w = self.input(a.dtype, [a.shape[2], N])
            if r.random() < 0.3:
                w = self.add("transpose", [self.input(a.dtype, [N, a.shape[2]])], a.dtype, w.shape, d0=0, d1=1)
            return self.add("matmul", [a, w], a.dtype, ["B", "j1", N])
        if roll < 0.55:
            q, k = self.fjag(), self.fjag()
            if q.dtype != k.dtype:
                k = self.add("cast", [k], q.dtype, k.shape, to=q.dtype)
            kt = self.add("transpose", [k], k.dtype, ["B", k.shape[2], "j1"], d0=1, d1=2, usable=False)
            return self.add("matmul", [q, kt], q.dtype, ["B", "j1", "j1"])
        if roll < 0.8:
            p = self.pick(lambda n: n.kind == "pair" and n.dtype in FLOATS and len(n.shape) == 3)
            p = p or self.b_matmul_pair()
            if r.random() < 0.3:
                p = self.add("transpose", [p], p.dtype, p.shape, d0=1, d1=2)
            v = self.fjag()
            if v.dtype != p.dtype:
                v = self.add("cast", [v], p.dtype, v.shape, to=p.dtype)
            return self.add("matmul", [p, v], p.dtype, ["B", "j1", v.shape[2]])
        x, y = self.fjag(), self.fjag(r.choice([1, 3, self.D]))
        if x.dtype != y.dtype:
            y = self.add("cast", [y], x.dtype, y.shape, to=x.dtype)
        xt = self.add("transpose", [x], x.dtype, ["B", x.shape[2], "j1"], d0=1, d1=2, usable=False)
        return self.add("matmul", [xt, y], x.dtype, ["B", x.shape[2], y.shape[2]])

    def b_matmul_pair(self):
        q = self.fjag()
        kt = self.add("transpose", [q], q.dtype, ["B", q.shape[2], "j1"], d0=1, d1=2, usable=False)
        return self.add("matmul", [q, kt], q.dtype, ["B", "j1", "j1"])

    def b_linear(self, _op):
        a, N = self.fjag(), self.rng.choice([1, 2, 6])
        args = [a, self.input(a.dtype, [N, a.shape[2]])]
        if self.rng.random() < 0.6:
            args.append(self.input(a.dtype, [N]))
        return self.add("linear", args, a.dtype, ["B", "j1", N])

    def b_causal(self, _op):
        """where(pos.unsqueeze(2) >= pos.unsqueeze(1), s, -inf): a causal mask on blocks."""
        s = self.pick(lambda n: n.kind == "pair" and n.dtype in FLOATS and len(n.shape) == 3) or self.b_matmul_pair()
        pos = self.add("positions", [], "i64", ["B", "j1"])
        col = self.add("unsqueeze", [pos], "i64", ["B", "j1", 1], dim=2)
        row = self.add("unsqueeze", [pos], "i64", ["B", 1, "j1"], dim=1)
        m = self.add(self.rng.choice(["ge", "gt", "le"]), [col, row], "bool", ["B", "j1", "j1"], cdt="i64")
        fill = lit(self.rng.choice([float("-inf"), -1e9, 0.0]))
        return self.add("where", [m, s, fill], s.dtype, s.shape, cdt=s.dtype)

    def b_pairinput(self, _op):
        return self.input("f32", ["B", "j1", "j1"])

    # ---- index ops and views ------------------------------------------------------------------------

    def index_input(self, shape, bound):
        return self.input(self.rng.choice(INTS), shape, bound=bound)

    def b_embedding(self, _op):
        V = self.rng.choice([1, 5, 50])
        table = self.input(self.rng.choice(["f32", "f64"]), [V, self.D])
        ids = self.index_input(["B", "j1"] if self.rng.random() < 0.8 else ["B", 3], V)
        n = self.add("embedding", [table, ids], table.dtype, ids.shape + [self.D])
        if self.rng.random() < 0.4 and n.kind == "jagged":
            n = self.add("sum", [n], n.dtype, ["B", self.D], dim=1, keepdim=False)
        return n

    def b_gather(self, _op):
        a = self.fjag()
        if self.rng.random() < 0.5:
            K = self.rng.choice([1, 2])
            idx = self.index_input(["B", "j1", K], a.shape[2])
            return self.add("gather", [a, idx], a.dtype, ["B", "j1", K], dim=self.rng.choice([2, -1]))
        idx = self.index_input(["B", "j1", a.shape[2]], "j1")
        return self.add("gather", [a, idx], a.dtype, a.shape, dim=1)

    def b_take_along_dim(self, _op):
        a = self.fjag()
        t = self.index_input(["B", "j1"], a.shape[2])
        tu = self.add("unsqueeze", [t], t.dtype, ["B", "j1", 1], dim=-1)
        return self.add("take_along_dim", [a, tu], a.dtype, ["B", "j1", 1], dim=self.rng.choice([2, -1]))

    def b_index_select(self, _op):
        K = self.rng.choice([1, 3])
        if self.rng.random() < 0.7:
            a = self.fjag()
            idx = self.index_input([K], a.shape[2])
            return self.add("index_select", [a, idx], a.dtype, ["B", "j1", K], dim=2)
        w = self.input("f32", [self.D, 3])
        d = self.rng.choice([0, 1])
        idx = self.index_input([K], self.D if d == 0 else 3)
        shape = [K, 3] if d == 0 else [self.D, K]
        return self.add("index_select", [w, idx], "f32", shape, dim=d)

    def b_positions(self, _op):
        pos = self.add("positions", [], "i64", ["B", "j1"])
        if self.rng.random() < 0.5:
            return self.add("cast", [pos], "f32", pos.shape, to="f32")
        return pos

    def b_reshape(self, op):
        r = self.rng
        a = self.pick(lambda n: n.kind == "jagged" and len(n.shape) == 3 and n.shape[2] in (4, 8, 16))
        if a is None:
            a = self.input("f32", ["B", "j1", r.choice([4, 8])])
        D = a.shape[2]
        n = self.add(op, [a], a.dtype, ["B", "j1", 2, D // 2], to=["B", "j1", 2, r.choice([D // 2, -1])])
        if r.random() < 0.4:
            n = self.add("reshape", [n], a.dtype, a.shape, to=["B", "j1", -1])
        return n

    def b_unsqueeze(self, _op):
        a = self.pick(lambda n: n.kind == "jagged" and len(n.shape) <= 3) or self.fjag()
        return self.add("unsqueeze", [a], a.dtype, a.shape + [1], dim=self.rng.choice([-1, len(a.shape)]))

    def b_squeeze(self, _op):
        a = self.pick(lambda n: n.kind in ("jagged", "dense") and len(n.shape) >= 2 and n.shape[-1] == 1
                      and n.kind != "pair")
        a = a or self.b_unsqueeze("unsqueeze")
        return self.add("squeeze", [a], a.dtype, a.shape[:-1], dim=-1)

    def b_transpose(self, _op):
        if self.rng.random() < 0.4:
            p = self.pick(lambda n: n.kind == "pair" and len(n.shape) == 3) or self.b_matmul_pair()
            return self.add("transpose", [p], p.dtype, p.shape, d0=1, d1=2)
        a = self.pick(lambda n: n.kind == "dense" and len(n.shape) >= 2 and "B" not in n.shape)
        a = a or self.input("f32", [self.D, 3])
        s = list(a.shape)
        s[0], s[1] = s[1], s[0]
        return self.add("transpose", [a], a.dtype, s, d0=0, d1=1)

    def b_narrow(self, _op):
        """narrow over a dense dim of constant size (the dims after j1 of a jagged tensor, any dim
        of a dense one without B), spelt as syntax.py draws it: narrow(), x[..., a:b] with
        Python's clamping, split(...)[i], chunk(...)[i]. A quarter of the time a narrowed weight
        goes into a linear (W.narrow(0, s, n))."""
        r = self.rng
        if r.random() < 0.25:
            a = self.fjag()
            if type(a.shape[2]) is int:
                K, N = a.shape[2], r.choice([1, 3, 5])
                W = self.input(a.dtype, [N + r.choice([0, 1, 4]), K])
                wn = self.narrow_of(W, 0, N)
                return self.add("linear", [a, wn], a.dtype, ["B", "j1", N])

        def cuttable(n):
            return [k for k, d in enumerate(n.shape) if type(d) is int and d >= 1 and (n.kind == "dense" or k >= 2)]

        a = self.pick(lambda n: n.kind in ("jagged", "dense") and cuttable(n) and "j1" not in n.shape[2:])
        if a is None:
            a = self.input(r.choice(["f32", "f32", "f64", "i32"]), ["B", "j1", r.choice([3, 5, 8, 16])])
        k = r.choice(cuttable(a))
        return self.narrow_of(a, k, None)

    def narrow_of(self, a, k, length):
        """a narrowed in dim k to `length` elements (None: a random length, 0 included)."""
        r, size = self.rng, a.shape[k]
        if length is None:
            length = r.choice([r.randint(0, size), r.randint(1, size), max(1, size // 2)])
        start = r.randint(0, size - length)
        shape = list(a.shape)
        shape[k] = length
        return self.add("narrow", [a], a.dtype, shape, dim=k, rank=len(a.shape), start=start, length=length,
                        size=size)

    # ---- concatenation ----------------------------------------------------------------------------

    def joinable(self, n):
        """A value cat may take: jagged [B, j1, ...] or dense (no j1 inside), of rank >= 1."""
        return n.kind in ("jagged", "dense") and len(n.shape) >= 1 and not (n.kind == "dense" and "j1" in n.shape)

    def cat_operand(self, a, d, size, dt):
        """A value of a's shape but `size` in dim d: from the pool, or a new input (whose dims
        are sizes: a shape with a pad length can only be joined to values already made)."""
        shape = list(a.shape)
        shape[d] = size
        b = self.pick(lambda n: n.shape == shape and self.joinable(n))
        if b is not None and self.rng.random() < 0.6:
            return b
        if any(is_pad(x) for x in shape):
            return b or a
        return self.input(dt, shape)

    def b_cat(self, _op):
        r = self.rng
        a = self.pick(lambda n: self.joinable(n) and any(
            isinstance(n.shape[k], int) for k in range(2 if n.kind == "jagged" else 0, len(n.shape))))
        if a is None or r.random() < 0.2:
            a = self.input(r.choice(["f32", "f32", "f64", "i32", "bool"]), ["B", "j1", r.choice([1, 3, 4])])
        first = 2 if a.kind == "jagged" else 0
        dims = [k for k in range(first, len(a.shape)) if isinstance(a.shape[k], int)]
        d = dims[-1] if r.random() < 0.6 else r.choice(dims)
        args = [a]
        for _ in range(r.choice([1, 1, 2])):
            dt = a.dtype if r.random() < 0.6 else r.choice(["bool", "i32", "i64", "f32", "f64"])
            args.append(self.cat_operand(a, d, r.choice([1, 2, 3, a.shape[d]]), dt))
        shape = list(a.shape)
        shape[d] = sum(x.shape[d] for x in args)
        dim = d - len(shape) if r.random() < 0.5 else d
        return self.add("cat", args, promote([x.dtype for x in args]), shape, dim=dim)

    def b_stack(self, _op):
        r = self.rng
        a = self.pick(lambda n: self.joinable(n) and len(n.shape) < 6) or self.fjag()
        first = 2 if a.kind == "jagged" else 0
        d = r.randint(first, len(a.shape))
        args = [a] + [self.cat_operand(a, first, a.shape[first], a.dtype) if len(a.shape) > first else a
                      for _ in range(r.choice([1, 2]))]
        args = [x if x.shape == a.shape else a for x in args]
        shape = list(a.shape[:d]) + [len(args)] + list(a.shape[d:])
        dim = d - len(shape) if r.random() < 0.5 else d
        return self.add("stack", args, promote([x.dtype for x in args]), shape, dim=dim)

    # ---- permute, flatten, unflatten ----------------------------------------------------------------

    def b_permute(self, _op):
        r = self.rng
        a = self.pick(lambda n: (n.kind == "jagged" and len(n.shape) >= 4) or (
            n.kind == "dense" and len(n.shape) >= 2 and "j1" not in n.shape))
        if a is None:
            a = self.b_unflatten("unflatten")
        first = 2 if a.kind == "jagged" else 0
        rest = list(range(first, len(a.shape)))
        r.shuffle(rest)
        perm = list(range(first)) + rest
        perm_text = [p - len(a.shape) if r.random() < 0.3 else p for p in perm]
        return self.add("permute", [a], a.dtype, [a.shape[p] for p in perm], perm=perm_text)

    def b_flatten(self, _op):
        r = self.rng
        a = self.pick(lambda n: n.kind == "jagged" and len(n.shape) >= 4 and all(isinstance(d, int) for d in n.shape[2:]))
        a = a or self.b_unflatten("unflatten")
        end = r.randint(3, len(a.shape) - 1)
        size = 1
        for d in a.shape[2:end + 1]:
            size *= d
        shape = a.shape[:2] + [size] + a.shape[end + 1:]
        return self.add("flatten", [a], a.dtype, shape, start=2, end=end if r.random() < 0.5 else end - len(a.shape))

    def b_unflatten(self, _op):
        r = self.rng
        a = self.pick(lambda n: n.kind == "jagged" and len(n.shape) == 3 and n.shape[2] in (4, 6, 8, 16))
        if a is None:
            a = self.input("f32", ["B", "j1", r.choice([4, 6, 8])])
        D = a.shape[2]
        sizes = [2, D // 2]
        text = list(sizes)
        if r.random() < 0.3:
            text[r.randrange(2)] = -1
        return self.add("unflatten", [a], a.dtype, ["B", "j1"] + sizes, dim=r.choice([2, -1]), sizes=text)

    # ---- constants --------------------------------------------------------------------------------

    def b_arange(self, _op):
        """arange(n) combined with a value whose last dim is n (broadcast as PyTorch's)."""
        r = self.rng
        a = self.pick(lambda n: n.kind in ("jagged", "dense") and len(n.shape) >= 1 and isinstance(n.shape[-1], int)
                      and n.dtype != "bool" and (n.kind == "jagged" or "j1" not in n.shape)) or self.input(
            "f32", ["B", "j1", r.choice([1, 3, 5])])
        dt = r.choice([None, "f32", "f64", "i32", "i64"])
        c = self.add("arange", [], dt or "i64", [a.shape[-1]], as_dtype=dt)
        op = r.choice(["add", "mul", "sub"])
        return self.add(op, [a, c], promote([a.dtype, c.dtype]), a.shape)

    def b_full(self, _op):
        r = self.rng
        a = self.pick(lambda n: n.kind in ("jagged", "dense") and len(n.shape) >= 1 and not any(
            is_pad(d) for d in n.shape) and n.shape[-1] != "j1" and (n.kind == "jagged" or "j1" not in n.shape)) or self.fjag()
        shape = [a.shape[-1]] if a.kind == "jagged" or r.random() < 0.5 else list(a.shape)
        which = r.choice(["full", "zeros", "ones"])
        value = {"zeros": 0, "ones": 1}.get(which, r.choice([2.5, -1.5, 3, True, 0.25]))
        dflt = "f32" if which != "full" or isinstance(value, float) else "bool" if isinstance(value, bool) else "i64"
        dt = r.choice([None, None, "f32", "f64", "i32", "i64", "bool"])
        c = self.add(which, [], dt or dflt, shape, value=value, as_dtype=dt)
        if c.dtype == "bool" or a.dtype == "bool":
            # alone unless its shape names a size (D): only an input declares one, and a may be
            # its only user
            return c if all(isinstance(d, int) for d in shape) else self.elementwise("ne", a, c)
        op = r.choice(["add", "mul", "maximum"])
        return self.add(op, [a, c], promote([a.dtype, c.dtype]), broadcast(a.shape, shape))

    # ---- PyTorch's functions that ragjit builds of other ops ---------------------------------------

    def b_clamp(self, _op):
        """clamp / clip / clamp_min / clamp_max with literal bounds (or a tensor one now and then)."""
        r = self.rng
        a = self.ints() if r.random() < 0.25 else self.any_float()
        form = r.choice(["clamp", "clip", "clamp_min", "clamp_max"])

        def bound():
            if r.random() < 0.2:
                return self.partner(a)
            return lit(r.choice([-2, 0, 1, 3] if a.dtype in INTS and r.random() < 0.7 else
                                [-1.5, -0.25, 0.0, 0.5, 2.0, float("inf"), float("nan")]))
        lo = bound() if form == "clamp_min" or (form in ("clamp", "clip") and r.random() < 0.8) else None
        hi = bound() if form == "clamp_max" or (form in ("clamp", "clip") and (lo is None or r.random() < 0.8)) else None
        args = [a] + [b for b in (lo, hi) if b is not None]
        cdt = promote([x.dtype for x in args if not x.is_lit()], [x.attrs["cat"] for x in args if x.is_lit()])
        shape = a.shape
        for b in args[1:]:
            if not b.is_lit():
                shape = broadcast(shape, b.shape)
        return self.add("clamp", args, cdt, shape, cdt=cdt, form=form, lo=lo is not None, hi=hi is not None)

    def b_leaky_relu(self, _op):
        a = self.any_float()
        slope = self.rng.choice([None, 0.01, 0.2, -0.5, 2.0, 0.0])
        return self.add("leaky_relu", [a], a.dtype, a.shape, slope=slope)

    ACTS = ("square", "reciprocal", "relu6", "hardtanh", "hardsigmoid", "hardswish", "softsign")

    def b_act(self, _op):
        """PyTorch's elementwise functions that ragjit builds of ops (square ... softsign)."""
        r = self.rng
        fn = r.choice(self.ACTS)
        a = self.ints() if fn not in ("hardsigmoid", "hardswish") and r.random() < 0.25 else self.any_float()
        if fn in ("relu6", "hardsigmoid", "hardswish", "hardtanh") and r.random() < 0.6:  # reach both bounds
            a = self.add("mul", [a, lit(4 if a.dtype in INTS else 4.0)], a.dtype, a.shape, cdt=a.dtype)
        bounds = None
        if fn == "hardtanh" and r.random() < 0.6:
            bounds = (r.choice([-1.5, -1, 0, -3]), r.choice([0.5, 1, 2.0, 3]))
        cats = [lit(b).attrs["cat"] for b in bounds] if bounds else []
        dt = to_float(a.dtype) if fn in ("reciprocal", "softsign") else promote([a.dtype], cats)
        return self.add("act", [a], dt, a.shape, fn=fn, bounds=bounds, cdt=dt)

    def lse_operand(self):
        return self.pick(lambda n: n.kind in ("jagged", "dense") and len(n.shape) >= 1 and n.dtype != "bool"
                         and not (n.kind == "dense" and "j1" in n.shape)) or self.fjag()

    def some_dims(self, a):
        """One dim of a that may be reduced, or (a third of the time, where there are two) a tuple."""
        r, dims, rank = self.rng, self.red_dims(a), len(a.shape)
        ds = sorted(r.sample(dims, 2)) if len(dims) >= 2 and r.random() < 0.33 else [r.choice(dims)]
        return ds, [d - rank if r.random() < 0.3 else d for d in ds]

    def b_logsumexp(self, _op):
        r = self.rng
        a = self.lse_operand()
        ds, written = self.some_dims(a)
        keep = r.random() < 0.35
        shape = [1 if k in ds else d for k, d in enumerate(a.shape)] if keep else \
            [d for k, d in enumerate(a.shape) if k not in ds]
        return self.add("logsumexp", [a], to_float(a.dtype), shape, dims=ds, written=written,
                        tuple=len(ds) > 1 or r.random() < 0.2, keepdim=keep)

    def b_normalize(self, _op):
        r = self.rng
        a = self.pick(lambda n: n.kind in ("jagged", "dense") and n.dtype in FLOATS and len(n.shape) >= 1
                      and not (n.kind == "dense" and "j1" in n.shape)) or self.fjag()
        if len(a.shape) >= 2 and r.random() < 0.25:
            ds, written = [1], None  # PyTorch's default dim=1 (a jagged tensor's ragged dim)
        else:
            ds, written = self.some_dims(a)
        p = r.choice([None, 2.0, 1, 3, 0.5, float("inf")])
        eps = r.choice([None, 1e-3, 0.5])
        return self.add("normalize", [a], a.dtype, a.shape, dims=ds, written=written, p=p, eps=eps,
                        tuple=written is not None and (len(ds) > 1 or r.random() < 0.2))

    EXPFNS = ("log1p", "expm1", "softplus", "elu", "celu", "selu", "mish")

    def b_expfn(self, _op):
        """PyTorch's functions that ragjit builds of exp and log (log1p ... mish), a third of the
        time on values near 0, where log1p and expm1 must keep their accuracy."""
        r = self.rng
        fn = r.choice(self.EXPFNS)
        a = self.ints() if fn in ("log1p", "expm1") and r.random() < 0.2 else self.any_float()
        if a.dtype in FLOATS and r.random() < 0.33:
            a = self.add("mul", [a, lit(1e-3)], a.dtype, a.shape, cdt=a.dtype)
        at = {}
        if fn == "softplus":
            at = {"beta": r.choice([None, 2.0, 0.5]), "threshold": r.choice([None, 10.0, 1.0])}
        elif fn in ("elu", "celu"):
            at = {"alpha": r.choice([None, 0.5, 2.0])}
        return self.add("expfn", [a], to_float(a.dtype), a.shape, fn=fn, **at)

    def b_stat(self, _op):
        """var and std over a dim or two (PyTorch's correction or unbiased, keepdim), and every
        reduction over the batch and ragged dims of a jagged tensor at once (dim=(0, 1): every
        row of every item, not the items' results combined); over every dim, half the time with
        no dim (PyTorch's x.sum()) or dim=None."""
        r = self.rng
        fn = r.choice(["var", "std", "var", "std", "mean", "sum", "max", "min", "prod"])
        a = None
        if fn not in ("var", "std") or r.random() < 0.4:
            a = self.pick(lambda n: n.kind == "jagged" and n.dtype in FLOATS and n.shape[:2] == ["B", "j1"])
            a = a or self.fjag()
            rank = len(a.shape)
            ds = [0, 1] + ([r.choice(range(2, rank))] if rank > 2 and r.random() < 0.4 else [])
            written = [d - rank if r.random() < 0.3 else d for d in ds]
        else:
            a = self.pick(lambda n: n.kind in ("jagged", "dense") and n.dtype in FLOATS and len(n.shape) >= 1
                          and not (n.kind == "dense" and "j1" in n.shape)) or self.fjag()
            ds, written = self.some_dims(a)
        keep = r.random() < 0.35
        shape = [1 if k in ds else d for k, d in enumerate(a.shape)] if keep else \
            [d for k, d in enumerate(a.shape) if k not in ds]
        at = {"fn": fn, "dims": ds, "written": written, "keepdim": keep}
        at["all"] = len(ds) == len(a.shape) and r.random() < 0.5  # no dim, or dim=None: every dim
        if fn in ("var", "std"):
            form = r.random()
            if form < 0.3:
                at["correction"] = r.choice([0, 1, 2])
            elif form < 0.5:
                at["unbiased"] = r.random() < 0.5
        return self.add("stat", [a], a.dtype, shape, **at)

    def b_argmax(self, _op):
        """argmax and argmin (PyTorch's: the first extreme, NaN counting as one) over a dim of a
        jagged tensor (its ragged dim too), of attention scores [B, j1, j1] or of a dense
        tensor, keepdim, or dim=None of a dense tensor; a third of the time of relu(x) or sgn(x),
        whose many equal values tie."""
        r = self.rng
        fn = r.choice(["argmax", "argmin"])
        a = self.pick(lambda n: n.kind in ("jagged", "pair", "dense") and n.dtype != "bool" and len(n.shape) >= 1
                      and not (n.kind == "dense" and "j1" in n.shape)) or self.fjag()
        if r.random() < 0.33:
            tie = r.choice(["relu", "sgn"])
            a = self.add(tie, [a], a.dtype, a.shape)
        rank = len(a.shape)
        if a.kind == "dense" and (rank == 1 or all(isinstance(x, int) for x in a.shape)) and r.random() < 0.25:
            keep = r.random() < 0.4
            return self.add("argmax", [a], "i64", [1] * rank if keep else [], fn=fn, all=True, keepdim=keep)
        d = r.choice(self.red_dims(a))
        keep = r.random() < 0.35 and not (a.kind == "pair" and d == 1)  # [B, 1, j1] is no output
        shape = [1 if k == d else x for k, x in enumerate(a.shape)] if keep else \
            [x for k, x in enumerate(a.shape) if k != d]
        return self.add("argmax", [a], "i64", shape, fn=fn, dim=d, written=d - rank if r.random() < 0.3 else d,
                        keepdim=keep)

    PORTING = ("flip", "tril", "triu", "logaddexp", "glu", "norm", "logsigmoid", "softshrink", "hardshrink",
               "threshold", "expand_as")

    def b_porting(self, _op):
        """PyTorch's functions that ragjit builds of other ops for ported code: flip (of the
        ragged dim too), tril/triu (of attention blocks too), logaddexp, glu, norm, logsigmoid,
        the shrinks, threshold, expand_as."""
        r = self.rng
        fn = r.choice(self.PORTING)
        if fn == "flip":
            a = self.pick(lambda n: n.kind in ("jagged", "dense") and len(n.shape) >= 1 and not (
                n.kind == "dense" and "j1" in n.shape)) or self.fjag()
            ok = [k for k, d in enumerate(a.shape) if isinstance(d, int) or (a.kind == "jagged" and k == 1)]
            if not ok:
                return None
            dims = sorted(r.sample(ok, min(len(ok), r.choice([1, 1, 2]))))
            return self.add("porting", [a], a.dtype, a.shape, fn=fn, dims=dims)
        if fn in ("tril", "triu"):
            a = self.pick(lambda n: (n.kind == "pair" and len(n.shape) == 3) or (
                n.kind in ("jagged", "dense") and len(n.shape) >= 2 and not (n.kind == "dense" and "j1" in n.shape)))
            a = a or self.fjag()
            return self.add("porting", [a], a.dtype, a.shape, fn=fn, k=r.choice([0, 0, 1, -1, 2]))
        if fn == "expand_as":
            a = self.fjag(1)
            o = self.fjag()
            return self.add("porting", [a, o], a.dtype, o.shape, fn=fn)
        a = self.pick(lambda n: n.kind in ("jagged", "dense") and n.dtype in FLOATS and len(n.shape) >= 1 and not (
            n.kind == "dense" and "j1" in n.shape)) or self.fjag()
        if fn == "glu":
            if not (isinstance(a.shape[-1], int) and a.shape[-1] % 2 == 0):
                return None
            return self.add("porting", [a], a.dtype, a.shape[:-1] + [a.shape[-1] // 2], fn=fn)
        if fn == "logaddexp":
            b = self.pick(lambda n: n.dtype == a.dtype and n.shape == a.shape and n is not a) or self.input(a.dtype, a.shape)
            return self.add("porting", [a, b], a.dtype, a.shape, fn=fn)
        if fn == "norm":
            rank = len(a.shape)
            k = r.randrange(1, rank) if a.kind == "jagged" else r.randrange(rank)
            keep = r.random() < 0.3
            shape = [1 if i == k else d for i, d in enumerate(a.shape)] if keep else [d for i, d in enumerate(a.shape) if i != k]
            return self.add("porting", [a], a.dtype, shape, fn=fn, dim=k, keepdim=keep,
                            p=r.choice([None, 1, 3, float("inf"), float("-inf"), 0]))
        at = {"l": r.choice([None, 0.25, 1.0])} if "shrink" in fn else {"th": 0.1, "val": -2.0} if fn == "threshold" else {}
        return self.add("porting", [a], a.dtype, a.shape, fn=fn, **at)

    # ---- programs ---------------------------------------------------------------------------------

    def builder(self, op):
        for fam, ops in [("b_unary", UNARY), ("b_binary", BINARY), ("b_compare", COMPARE),
                         ("b_logical", ["logical_and", "logical_or"]), ("b_reduce", REDUCE),
                         ("b_softmax", ["softmax", "log_softmax"]), ("b_norm", ["layer_norm", "rms_norm"]),
                         ("b_reshape", ["reshape", "view"])]:
            if op in ops:
                return getattr(self, fam)
        return getattr(self, "b_" + op)

    def choose_op(self):
        if self.rng.random() < 0.5:
            least = min(self.usage.get(o, 0) for o in OPS)
            return self.rng.choice([o for o in OPS if self.usage.get(o, 0) == least])
        return self.rng.choice(OPS)

    def program(self, steps):
        made = []
        heads_at = self.rng.randrange(steps) if self.rng.random() < HEADS_SHARE else -1
        for i in range(steps):
            op = "heads" if i == heads_at else self.choose_op()
            n = self.builder(op)(op)
            if op in PSEUDO:
                self.usage[op] = self.usage.get(op, 0) + 1
            if n is not None:
                made.append(n)
        outs = [n for n in made[-1:] + self.rng.sample(made, min(2, len(made))) + self.head_outs if outputtable(n)]
        outs = list(dict.fromkeys(outs)) or [self.add("relu", [self.x], "f32", self.x.shape, cdt="f32")]
        prog = Program(self.inputs, outs, self.sizes)
        if undeclared(prog):  # a constant over D without the input that declares D: keep x
            outs.append(self.add("relu", [self.x], self.x.dtype, self.x.shape, cdt=self.x.dtype))
            prog = Program(self.inputs, outs, self.sizes)
        return prog


def undeclared(prog):
    """Named sizes the statements use that no input declares (only an input declares one)."""
    named = {d for n in prog.stmts for d in n.shape if isinstance(d, str) and d not in ("B", "j1")}
    return named - {d for n in prog.inputs for d in n.shape if isinstance(d, str)}


def outputtable(n):
    return n.op != "input" and n.kind in ("jagged", "pair", "dense") + HEADED and n.attrs.get("usable", True) and not (
        n.kind == "dense" and "j1" in n.shape)


def generate(seed, maxlen, usage, steps=None):
    g = Gen(seed, maxlen, usage)
    return g.program(steps or g.rng.randint(3, 8))
