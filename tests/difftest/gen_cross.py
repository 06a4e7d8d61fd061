"""gen_cross.py — programs of two ragged classes (docs/guide.md, "Two ragged classes").

Cross attention has queries of one ragged symbol j1 and keys and values of another, j2, over
the same batch: `q [B, j1, E] @ k.transpose(1, 2)` with `k [B, j2, E]` is `[B, j1, j2]`, each
item a len1_b x len2_b block stored row-major item after item. A wrong block size, a block
read with the other class's offsets or lengths, or a causal mask aligned bottom-right instead
of top-left shows only where the two classes differ item by item — so these programs run on
a second lengths list drawn from its own pattern (data.lengths2: items without queries meet
items without keys, one long item of each class) and, with holes, on both classes as views
with their own gaps.

One program is one chain: inputs q, k, v (sometimes split into heads, [B, H, j1, Dh] against
[B, H, j2, Dh]); then either the explicit scores q @ kᵀ, scaled, masked (a bool [B, j1, j2]
input, the causal `positions(j1).unsqueeze(2) >= positions(j2).unsqueeze(1)`, a key-padding
`positions(j2).unsqueeze(1) < n`), tanh-capped or biased by `pos_j - pos_i`, then softmax over
the keys (or the queries), log_softmax or a reduction, and often `@ v`; or
`scaled_dot_product_attention` with and without `is_causal`, a mask, a scale, and per head
sometimes GQA (`enable_gqa=True`, 2 key/value heads for 4 query heads). The scores, the
weights and the result become outputs at random, so the same chain runs fused (only the
result read) and unfused (the scores an output too); a score output checks the blocks' order.
The reference (evaluate.py) holds every value item by item in PyTorch's dims.
"""
import random

from .model import Node, Program, broadcast, lit, promote, to_float

SHARE = 0.12  # of the programs (difftest.case_of draws it from its own stream)


class CrossGen:
    def __init__(self, seed, usage):
        self.rng = random.Random(seed * 7919 + 2)
        self.usage, self.inputs, self.outs = usage, [], []

    def input(self, dtype, shape):
        n = Node("input", [], dtype, shape)
        self.inputs.append(n)
        return n

    def add(self, op, args, dtype, shape, **attrs):
        attrs.setdefault("style", self.rng.randrange(12))
        self.usage[op] = self.usage.get(op, 0) + 1
        return Node(op, args, dtype, shape, **attrs)

    def ew(self, op, a, b):
        """An elementwise binary op with PyTorch's promotion (gen.Gen.elementwise's rules)."""
        tens = [x for x in (a, b) if not x.is_lit()]
        cdt = promote([t.dtype for t in tens], [x.attrs["cat"] for x in (a, b) if x.is_lit()])
        shape = broadcast(a.shape, b.shape) if not b.is_lit() else a.shape
        if op in ("lt", "le", "gt", "ge", "eq", "ne"):
            return self.add(op, [a, b], "bool", shape, cdt=cdt)
        dt = to_float(cdt) if op == "div" else cdt
        return self.add(op, [a, b], dt, shape, cdt=dt)

    def maybe_out(self, n, p):
        if self.rng.random() < p:
            self.outs.append(n)

    # ---- operands -----------------------------------------------------------------------------

    def operand(self, sym, inner, H=None):
        """A float [B, sym, inner] input, per head [B, H, sym, Dh] (split as PyTorch code does)."""
        H = H or self.H
        if not H:
            return self.input(self.dt, ["B", sym, inner])
        x = self.input(self.dt, ["B", sym, H * inner])
        v = self.add("view", [x], self.dt, ["B", sym, H, inner], to=["B", sym, H, inner],
                     inline=self.rng.random() < 0.5)
        return self.add("transpose", [v], self.dt, ["B", H, sym, inner], d0=1, d1=2)

    def positions(self, sym, dim):
        pos = self.add("positions", [], "i64", ["B", sym], sym=sym)
        shape = ["B", sym, 1] if dim == 2 else ["B", 1, sym]
        return self.add("unsqueeze", [pos], "i64", shape, dim=dim)

    def mask(self):
        """A bool [B, j1, j2] (or key-padding [B, 1, j2]) mask: an input, causal, or padding."""
        r, form = self.rng, self.rng.randrange(3)
        if form == 0:
            return self.input("bool", ["B", "j1", "j2"])
        if form == 1:  # causal, top-left: key j seen by query i iff j <= i
            return self.ew(r.choice(["ge", "gt"]), self.positions("j1", 2), self.positions("j2", 1))
        return self.ew("lt", self.positions("j2", 1), lit(r.choice([1, 2, 4])))

    # ---- the chain -------------------------------------------------------------------------------

    def scores(self, q, k):
        r = self.rng
        kt_shape = k.shape[:-2] + [k.shape[-1], k.shape[-2]]
        if self.H:
            d0, d1, mT = r.choice([(-2, -1, False), (2, 3, False), (-2, -1, True)])
        else:
            d0, d1, mT = r.choice([(1, 2), (2, 1), (-2, -1)]) + (False,)
        kt = self.add("transpose", [k], k.dtype, kt_shape, d0=d0, d1=d1, mT=mT, usable=False)
        s = self.add("matmul", [q, kt], q.dtype, q.shape[:-1] + [k.shape[-2]])
        self.maybe_out(s, 0.15)
        if r.random() < 0.6:
            s = self.ew(r.choice(["mul", "div"]), s, lit(r.choice([0.125, 0.5, 2.0, 0.35355339059327373])))
        if r.random() < 0.25:  # soft-capping: tanh(s / c) * c
            s = self.add("tanh", [self.ew("div", s, lit(5.0))], s.dtype, s.shape, cdt=s.dtype)
            s = self.ew("mul", s, lit(5.0))
        if not self.H and r.random() < 0.5:
            m = self.mask()
            if r.random() < 0.6:
                s = self.add("where", [m, s, lit(r.choice([float("-inf"), -1e9, -1.0]))], s.dtype, s.shape,
                             cdt=s.dtype)
            else:
                s = self.add("masked_fill", [s, self.add("logical_not", [m], "bool", m.shape, cdt="bool")],
                             s.dtype, s.shape, cdt=s.dtype, value=float("-inf"))
        if not self.H and r.random() < 0.2:  # an ALiBi-like bias (pos_j - pos_i) * slope
            d = self.ew("sub", self.positions("j2", 1), self.positions("j1", 2))
            s = self.ew("add", s, self.ew("mul", d, lit(-0.25)))
        if not self.H and r.random() < 0.15:  # an additive per-item bias input
            s = self.ew("add", s, self.input(s.dtype, ["B", "j1", "j2"]))
        self.maybe_out(s, 0.2)
        return s

    def after(self, s, v):
        r = self.rng
        last, rows = len(s.shape) - 1, len(s.shape) - 2
        form = r.random()
        if form < 0.7:  # the attention: softmax over the keys, then @ v
            p = self.add("softmax", [s], s.dtype, s.shape, dim=r.choice([-1, last]))
            self.maybe_out(p, 0.2)
            return self.add("matmul", [p, v], s.dtype, s.shape[:-1] + [v.shape[-1]])
        if form < 0.8 or self.H:
            op = r.choice(["softmax", "log_softmax"])
            return self.add(op, [s], s.dtype, s.shape, dim=r.choice([rows, last, -1]))
        op, d = r.choice(["sum", "max", "mean", "min"]), r.choice([1, 2, -1])
        keep = d != 1 and r.random() < 0.3
        shape = list(s.shape)
        if keep:
            shape[d] = 1
        else:
            del shape[d]
        m = self.add(op, [s], s.dtype, shape, dim=d, keepdim=keep)
        return self.ew("sub", s, m) if keep else m

    def sdpa(self, q, k, v, gqa=False):
        r = self.rng
        args, attrs = [q, k, v], {"causal": False, "scale": None, "gqa": gqa}
        form = r.choice([0, 1, 1, 2, 2])
        if form == 1:
            attrs["causal"] = True
        elif form == 2:
            m = self.mask() if not self.H else self.input("bool", ["B", "j1", "j2"])
            if self.H:
                m = self.add("unsqueeze", [m], "bool", ["B", 1, "j1", "j2"], dim=1)
            elif r.random() < 0.3:
                m = self.input(q.dtype, ["B", "j1", "j2"])  # a float mask: added to the scores
            args.append(m)
        if r.random() < 0.3:
            attrs["scale"] = r.choice([0.3, 1.0, 0.125])
        return self.add("sdpa", args, q.dtype, q.shape[:-1] + [v.shape[-1]], **attrs)

    def program(self):
        r = self.rng
        self.dt = r.choice(["f32", "f32", "f32", "f64"])
        self.H = r.choice([2, 3, 4]) if r.random() < 0.3 else None
        E, Dv = r.choice([1, 2, 3, 4, 8, 16]), r.choice([1, 2, 3, 5, 8])
        if r.random() < 0.4:
            gqa = self.H == 4 and r.random() < 0.4  # 2 key/value heads for 4 query heads
            q, k, v = (self.operand(s, d, 2 if gqa and s == "j2" else None) for s, d in (("j1", E), ("j2", E), ("j2", Dv)))
            o = self.sdpa(q, k, v, gqa)
        else:
            q, k, v = self.operand("j1", E), self.operand("j2", E), self.operand("j2", Dv)
            o = self.after(self.scores(q, k), v)
        self.outs.append(o)
        outs = list(dict.fromkeys(self.outs))
        return Program(self.inputs, outs)


def generate(seed, usage):
    return CrossGen(seed, usage).program()


def is_cross(prog):
    return any("j2" in n.shape for n in prog.inputs)

