"""gen_heads.py — the generator's builders for tensors per head (docs/guide.md, "Heads").

Attention code splits a float jagged [B, j1, H·Dh] into heads the ways PyTorch code does
(x.view(B, j1, H, Dh).transpose(1, 2), unflatten(-1, [H, Dh]), permute(0, 2, 1, 3), a piece
of a qkv projection first), works on [B, H, j1, Dh], the transposed key [B, H, Dh, j1] and the
scores [B, H, j1, j1], and merges back (transpose(1, 2), then flatten(2) or a reshape to
[B, j1, H·Dh], often a linear). ragjit stores these in another order than their shape says,
rewrites the program into that order and writes per-head outputs in it: every step here is
one the guide lists for heads, so that a wrong rewrite, a wrong stored order or a wrong output
order shows as a mismatch against the reference, which evaluates the same graph in PyTorch's
dim order (evaluate.py).

b_heads grows one chain: a split, then a few steps that take the latest head value most of
the time (so steps compose: a narrowed q into the scores, softmax of scaled scores times v,
norms of a linear of heads), then sometimes a merge. A program has one H (2..4); Dh (1..8) is
the product's, so H·Dh often equals the input's inner size D and heads mix with the values the
other builders make. Intermediate values per head become outputs now and then.

KNOWN holds steps the guide describes but this version of ragjit fails to compile (the lead's
reproducers in the report): each is off until fixed, so that the CI mode stays green.
"""
from .model import FLOATS, HEADED, lit

KNOWN = {
    "heads_keepdim": False,   # q - q.mean(1, keepdim=True): compile fails (an internal reshape)
    "col_keepdim": False,     # s.sum(2, keepdim=True) of scores [B, H, j1, j1]: compile fails
}
H_UNARY = ["neg", "abs", "relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh", "exp", "sin", "cos", "sqrt",
           "log", "rsqrt", "sgn"]
H_BINARY = ["add", "sub", "mul", "div", "maximum", "minimum"]
# step: the kinds of operand it takes (the first is what a new operand is made as)
STEPS = {"unary": ("hjag", "hpair", "hkt"), "scalar": ("hjag", "hpair", "hkt"), "same": ("hjag", "hpair"),
         "dense": ("hjag", "hpair"), "where": ("hjag", "hpair"), "scores": ("hjag",),
         "softmax": ("hpair", "hjag"), "reduce": ("hjag", "hpair"), "over_heads": ("hjag", "hpair"),
         "norm": ("hjag",), "narrow": ("hjag",), "pv": ("hpair",), "linear": ("hjag",),
         "ptrans": ("hpair",), "merge": ("hjag",)}


class HeadsGen:
    """A mixin of gen.Gen: uses its pool (add, input, pick, fjag, elementwise, narrow_of)."""

    def heads_shape(self):
        if getattr(self, "H", None) is None:
            r = self.rng
            fits = [(h, self.D // h) for h in (2, 3, 4) if isinstance(self.D, int) and self.D % h == 0
                    and 1 <= self.D // h <= 8]
            self.H, self.Dh = r.choice(fits) if fits and r.random() < 0.5 else (r.randint(2, 4), r.randint(1, 8))
        return self.H, self.Dh

    def head_value(self, kinds, shape=None):
        return self.pick(lambda n: n.kind in kinds and n.dtype in FLOATS and (shape is None or n.shape == shape))

    def split(self, Dh=None):
        """A float jagged [B, j1, H·Dh] split into heads: [B, H, j1, Dh]."""
        r = self.rng
        H, Dh0 = self.heads_shape()
        Dh = Dh0 if Dh is None else Dh
        E = H * Dh
        if r.random() < 0.2:  # q, k, v = qkv.split(E, dim=-1)
            big = self.fjag(3 * E)
            i = r.randrange(3)
            src = self.add("narrow", [big], big.dtype, ["B", "j1", E], dim=2, rank=3, start=i * E, length=E,
                           size=3 * E)
        else:
            src = self.pick(lambda n: n.dtype in FLOATS and n.shape == ["B", "j1", E])
            if src is None or r.random() < 0.3:
                src = self.input(r.choice(["f32", "f32", "f32", "f64"]), ["B", "j1", E])
        dt, form = src.dtype, r.randrange(4)
        if form < 2:
            to = ["B", "j1", H, Dh] if r.random() < 0.7 else ["B", "j1", H, -1]
            v = self.add(r.choice(["view", "reshape"]), [src], dt, ["B", "j1", H, Dh], to=to, inline=form == 0)
        else:
            sizes = [H, Dh] if r.random() < 0.7 else [H, -1]
            v = self.add("unflatten", [src], dt, ["B", "j1", H, Dh], dim=r.choice([2, -1]), sizes=sizes)
        return self.head_swap(v, ["B", H, "j1", Dh])

    def head_swap(self, v, shape):
        """dims 1 and 2 swapped ([B, j1, H, D] <-> [B, H, j1, D]), in one of PyTorch's spellings."""
        r = self.rng
        if r.random() < 0.25:
            return self.add("permute", [v], v.dtype, shape, perm=r.choice([[0, 2, 1, 3], [0, 2, 1, -1], [0, -2, 1, 3]]))
        d0, d1 = r.choice([(1, 2), (2, 1), (-3, -2), (1, -2)])
        return self.add("transpose", [v], v.dtype, shape, d0=d0, d1=d1)

    def head_like(self, a):
        """Another float value of a's shape, cast to a's dtype."""
        b = self.pick(lambda n: n is not a and n.shape == a.shape and n.dtype in FLOATS)
        if b is None or self.rng.random() < 0.3:
            b = self.split(a.shape[3]) if a.kind == "hjag" and len(a.shape) == 4 else self.h_scores(self.split())
        if b.dtype != a.dtype:
            b = self.add("cast", [b], a.dtype, b.shape, to=a.dtype)
        return b

    # ---- steps --------------------------------------------------------------------------------------

    def h_unary(self, a):
        r = self.rng
        op = r.choice(H_UNARY)
        if op in ("exp", "sin", "cos") and (products(a) or r.random() < 0.5):
            # of a product (scores up to 8·4 here, (q kT) v up to 50) these amplify the f32
            # rounding of its sums beyond what the f32 reference, summed by BLAS, shows
            # (check.py): kept in range, as gen.b_unary does
            a = self.add("tanh", [a], a.dtype, a.shape, cdt=a.dtype)
        if op in ("log", "sqrt", "rsqrt"):
            a = self.add("add", [self.add("abs", [a], a.dtype, a.shape, cdt=a.dtype), lit(0.5)], a.dtype, a.shape,
                         cdt=a.dtype)
        return self.add(op, [a], a.dtype, a.shape, cdt=a.dtype)

    def h_scalar(self, a):
        r = self.rng
        op = r.choice(H_BINARY + ["pow"])
        v = lit(r.choice([2, 3]) if op == "pow" else r.choice([0.5, 2.0, -1.5, 0.125, 3.0, 0.35355339059327373]))
        args = [v, a] if op in ("add", "mul", "sub") and r.random() < 0.3 else [a, v]
        return self.elementwise(op, *args)

    def h_same(self, a):
        return self.elementwise(self.rng.choice(H_BINARY), a, self.head_like(a))

    def h_dense(self, a):
        """a broadcast against a dense operand: per-head slopes [H, 1, 1], a per-feature [Dh]."""
        r, H = self.rng, a.shape[1]
        last = a.shape[-1]
        shapes = [[H, 1, 1], [1, H, 1, 1], [1], [1, 1, 1]]
        if a.kind == "hjag":
            shapes += [[last], [1, 1, last], [H, 1, last]]
        b = self.input(r.choice([a.dtype, a.dtype, "f32", "f64"]), r.choice(shapes))
        args = [a, b] if r.random() < 0.7 else [b, a]
        return self.elementwise(r.choice(H_BINARY), *args)

    def h_where(self, a):
        r = self.rng
        c = self.elementwise(r.choice(["gt", "lt", "ge"]), a, lit(r.choice([0.0, 0.5, -0.25])) if r.random() < 0.7
                             else self.head_like(a))
        if r.random() < 0.5:
            v = r.choice([float("-inf"), -1e9, 0.0, 2.5])
            return self.add("masked_fill", [a, c], a.dtype, a.shape, cdt=a.dtype, value=v)
        other = lit(r.choice([float("-inf"), 0.0, -1.0])) if r.random() < 0.6 else self.head_like(a)
        return self.add("where", [c, a, other], a.dtype, a.shape, cdt=a.dtype)

    def h_scores(self, q):
        """q @ k.transpose(-2, -1) (or .mT, transpose(2, 3)), often scaled: [B, H, j1, j1]."""
        r = self.rng
        k = self.head_like(q)
        H, Dk = q.shape[1], q.shape[3]
        d0, d1, mT = r.choice([(-2, -1, False), (-2, -1, True), (2, 3, False), (3, 2, False), (-1, 2, False)])
        kt = self.add("transpose", [k], k.dtype, ["B", H, Dk, "j1"], d0=d0, d1=d1, mT=mT,
                      usable=r.random() < 0.3)
        s = self.add("matmul", [q, kt], q.dtype, ["B", H, "j1", "j1"])
        if r.random() < 0.5:
            s = self.elementwise(r.choice(["mul", "div"]), s, lit(r.choice([0.125, 0.5, 2.0, 0.35355339059327373])))
        return s

    def h_softmax(self, a):
        r = self.rng
        dims = [-1, 3, 2, -2] if a.kind == "hpair" else [-1, 3, 2]
        return self.add(r.choice(["softmax", "log_softmax"]), [a], a.dtype, a.shape, dim=r.choice(dims))

    def h_reduce(self, a):
        """keepdim over the last dim ([B, H, j1, 1]), or over the columns of scores (KNOWN)."""
        r = self.rng
        op = r.choice(["sum", "mean", "max", "min"] + (["prod"] if a.kind == "hjag" else []))
        d = -1 if r.random() < 0.6 else 3
        if a.kind == "hpair" and KNOWN["col_keepdim"] and r.random() < 0.3:
            d = r.choice([2, -2])
        shape = list(a.shape)
        shape[d] = 1
        m = self.add(op, [a], a.dtype, shape, dim=d, keepdim=True)
        if a.kind == "hjag" and shape[-1] == 1 and r.random() < 0.5:  # q - q.mean(-1, keepdim=True)
            return self.elementwise(r.choice(["sub", "div", "mul"]), a, m)
        return m

    def h_over_heads(self, a):
        """A reduction over dim 1 (the heads): [B, j1, Dh] or [B, j1, j1]."""
        r = self.rng
        op = r.choice(["sum", "mean", "max", "min"])
        if KNOWN["heads_keepdim"] and a.kind == "hjag" and r.random() < 0.4:
            m = self.add(op, [a], a.dtype, ["B", 1] + a.shape[2:], dim=1, keepdim=True)
            return self.elementwise(r.choice(["sub", "add", "mul"]), a, m)
        return self.add(op, [a], a.dtype, ["B"] + a.shape[2:], dim=r.choice([1, -3]), keepdim=False)

    def h_norm(self, a):
        r = self.rng
        op = r.choice(["rms_norm", "layer_norm"])
        ns, args = [a.shape[-1]], [a]
        if r.random() < 0.5:
            args.append(self.input(a.dtype, ns))
            if op == "layer_norm" and r.random() < 0.5:
                args.append(self.input(a.dtype, ns))
        return self.add(op, args, a.dtype, a.shape, nshape=ns, eps=r.choice([None, 1e-5, 1e-6]))

    def h_narrow(self, a):
        size = a.shape[3]
        return self.narrow_of(a, 3, self.rng.randint(1, size))

    def h_pv(self, p):
        """p @ v: [B, H, j1, j1] @ [B, H, j1, Dv], p often a softmax first."""
        r = self.rng
        if r.random() < 0.6:
            p = self.add("softmax", [p], p.dtype, p.shape, dim=r.choice([-1, 3]))
        Dv = r.choice([self.Dh, self.Dh, r.randint(1, 8)])
        v = self.head_value(("hjag",), ["B", p.shape[1], "j1", Dv]) or self.split(Dv)
        if v.dtype != p.dtype:
            v = self.add("cast", [v], p.dtype, v.shape, to=p.dtype)
        return self.add("matmul", [p, v], p.dtype, ["B", p.shape[1], "j1", Dv])

    def h_linear(self, a):
        """A product by a dense weight: linear(a, W[N, Dh]) or a @ W[Dh, N]."""
        r = self.rng
        N, K = r.choice([1, 2, 5]), a.shape[-1]
        if r.random() < 0.6:
            args = [a, self.input(a.dtype, [N, K])] + ([self.input(a.dtype, [N])] if r.random() < 0.5 else [])
            return self.add("linear", args, a.dtype, a.shape[:-1] + [N])
        return self.add("matmul", [a, self.input(a.dtype, [K, N])], a.dtype, a.shape[:-1] + [N])

    def h_ptrans(self, p):
        d0, d1, mT = self.rng.choice([(-2, -1, False), (2, 3, False), (-1, -2, False), (-2, -1, True)])
        return self.add("transpose", [p], p.dtype, p.shape, d0=d0, d1=d1, mT=mT)

    def h_merge(self, a):
        """[B, H, j1, D] back to [B, j1, H, D], then often to [B, j1, H·D], then sometimes a linear."""
        r = self.rng
        H, D = a.shape[1], a.shape[3]
        if products(a) >= 2:  # bounded before the pool hands it to gen.b_unary's exp, sin, cos
            a = self.add("tanh", [a], a.dtype, a.shape, cdt=a.dtype)
        m = self.head_swap(a, ["B", "j1", H, D])
        if r.random() < 0.8:
            form = r.randrange(4)
            if form == 0:
                m = self.add("flatten", [m], m.dtype, ["B", "j1", H * D], start=2, end=-1, short=True)
            elif form == 1:
                m = self.add("flatten", [m], m.dtype, ["B", "j1", H * D], start=r.choice([2, -2]), end=r.choice([3, -1]))
            else:
                to = ["B", "j1", H * D] if form == 2 else ["B", "j1", -1]
                m = self.add(r.choice(["reshape", "view"]), [m], m.dtype, ["B", "j1", H * D], to=to,
                             inline=r.random() < 0.5)
            if r.random() < 0.4:
                N = r.choice([1, 3, 8])
                m = self.add("linear", [m, self.input(m.dtype, [N, H * D])], m.dtype, ["B", "j1", N])
        return m

    # ---- the chain ----------------------------------------------------------------------------------

    def b_heads(self, _op):
        r = self.rng
        self.heads_shape()
        cur = self.split()
        for _ in range(r.randint(2, 5)):
            step = r.choice(list(STEPS))
            kinds = STEPS[step]
            a = cur if cur.kind in kinds and r.random() < 0.75 else self.head_value(kinds)
            if a is None:
                a = self.split() if kinds[0] == "hjag" else self.h_scores(self.split())
            n = getattr(self, "h_" + step)(a)
            if r.random() < 0.15 and n.kind in HEADED:
                self.head_outs.append(n)
            cur = n if n.kind in HEADED else cur
            if step in ("merge", "over_heads") and r.random() < 0.5:
                cur = n
                break
        if cur.kind == "hpair" and r.random() < 0.4:
            cur = self.h_pv(cur)
        if cur.kind == "hjag" and r.random() < 0.4:
            cur = self.h_merge(cur)
        if r.random() < 0.5:  # an output, whatever the program's later steps take of it
            self.head_outs.append(cur)
        return cur


NORMALISED = ("softmax", "log_softmax", "rms_norm", "layer_norm", "tanh", "sigmoid")


def products(n, depth=8):
    """How many products (matmul, linear) n is a chain of, since the last op that bounds
    values: (q kT) v is 2, softmax(q kT) v is 1. A few ulps of such a value's sums move
    exp, sin and cos of it further than check.py's f32 reference can show."""
    if n.op in NORMALISED or depth == 0:
        return 0
    own = 1 if n.op in ("matmul", "linear") else 0
    return own + max([products(a, depth - 1) for a in n.args] or [0])
