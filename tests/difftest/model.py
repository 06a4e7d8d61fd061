"""model.py — the tester's own picture of a ragjit program: dtypes, symbolic shapes, nodes.

The generator builds programs as a graph of Node objects and prints them in ragjit's text
format; the reference evaluates the same graph. Types are worked out here, independently of
ragjit, from docs/guide.md: PyTorch promotion (float beats int beats bool, the wider type wins,
a Python literal only counts when its category is higher than every tensor operand's),
NumPy-style broadcasting against trailing dims, and shapes made of

  'B'               the batch size (the parent of j1)
  'j1'              the ragged symbol (at position 1, and 2 for a per-item block [B, j1, j1])
  'D'               a named dense size
  ('pad', spec)     a pad length: spec 'max' (max(j1)), an int (an explicit len=), or a name
  int               a constant

A tensor is itemised (held item by item in the reference) when it is jagged [B, j1, ...], a
per-item block [B, j1, j1, ...], a row of columns [B, 1, j1, ...] or a tensor per head
(docs/guide.md, "Heads": PyTorch's [B, H, j1, D], the transposed key [B, H, D, j1], the scores
[B, H, j1, j1], H a constant of at least 2); everything else is dense. A tensor per head keeps
PyTorch's shape here, dims and all; only its output is written in the canonical order.
"""

DTYPES = ("bool", "i32", "i64", "f32", "f64")
FLOATS = ("f32", "f64", "f16", "bf16")  # the 16-bit ones only after half.halve
INTS = ("i32", "i64")


def category(dt):
    return 0 if dt == "bool" else 1 if dt in INTS else 2


def wider(a, b):
    if category(a) != category(b):
        return a if category(a) > category(b) else b
    return a if DTYPES.index(a) >= DTYPES.index(b) else b


def promote(tensor_dtypes, literal_cats=()):
    """The result dtype of an elementwise op: tensors promote among themselves; a literal wins
    only with a category above every tensor's (then the default dtype of its category)."""
    dt = tensor_dtypes[0]
    for t in tensor_dtypes[1:]:
        dt = wider(dt, t)
    for c in literal_cats:
        if c > category(dt):
            dt = ("bool", "i64", "f32")[c]
    return dt


def to_float(dt):
    return dt if dt in FLOATS else "f32"


def is_pad(d):
    return isinstance(d, tuple) and d[0] == "pad"


HEADED = ("hjag", "hkt", "hpair", "hjag2", "hkt2", "hcpair")
RAGGED = ("j1", "j2")


def kind(shape):
    """'jagged', 'pair', 'rowcol', 'dense', or per head: 'hjag' [B, H, j1, ...], 'hkt'
    [B, H, D, j1], 'hpair' [B, H, j1, j1]. A second ragged class j2 (gen_cross.py): 'jagged2'
    [B, j2, ...], 'cpair' [B, j1, j2, ...] (each item a len1 x len2 block), 'rowcol2' [B, 1, j2,
    ...], per head 'hjag2' [B, H, j2, D], 'hkt2' [B, H, D, j2], 'hcpair' [B, H, j1, j2]."""
    if len(shape) >= 2 and shape[0] == "B" and shape[1] in RAGGED:
        if len(shape) >= 3 and shape[2] in RAGGED:
            return "pair" if shape[1] == shape[2] == "j1" else "cpair"
        return "jagged" if shape[1] == "j1" else "jagged2"
    if len(shape) >= 3 and shape[0] == "B" and shape[1] == 1 and shape[2] in RAGGED:
        return "rowcol" if shape[2] == "j1" else "rowcol2"
    if len(shape) >= 4 and shape[0] == "B" and isinstance(shape[1], int) and shape[1] >= 2:
        js = [k for k, d in enumerate(shape) if d in RAGGED]
        two = "2" if "j2" in shape else ""
        if js == [2]:
            return "hjag" + two
        if js == [3] and len(shape) == 4:
            return "hkt" + two
        if js == [2, 3] and len(shape) == 4:
            return "hcpair" if two else "hpair"
    return "dense"


def broadcast(a, b):
    """Symbolic broadcast of two shapes, or None where ragjit must refuse them."""
    n = max(len(a), len(b))
    a = [1] * (n - len(a)) + list(a)
    b = [1] * (n - len(b)) + list(b)
    out = []
    for x, y in zip(a, b):
        if x == y:
            out.append(x)
        elif x == 1:
            out.append(y)
        elif y == 1:
            out.append(x)
        else:
            return None
    if any(j in out for j in RAGGED) and kind(out) == "dense":
        return None  # a ragged dim anywhere but positions 1-2
    return out


def dim_text(d):
    if is_pad(d):
        return {"max": "max(j1)"}.get(d[1], str(d[1]))
    return str(d)


def shape_text(shape):
    return "[" + ", ".join(dim_text(d) for d in shape) + "]"


class Node:
    """One value of a program. op: 'input', 'lit' or a text-format function name (plus the
    spellings 'gelu_tanh', 'unsqueeze', 'causal'...); args: operand Nodes; attrs: the rest."""

    def __init__(self, op, args, dtype, shape, **attrs):
        self.op, self.args, self.dtype, self.shape, self.attrs = op, list(args), dtype, list(shape), attrs
        self.name = None

    @property
    def kind(self):
        return kind(self.shape)

    def is_lit(self):
        return self.op == "lit"

    def __repr__(self):
        return f"Node({self.op}, {self.dtype}{shape_text(self.shape)})"


def lit(value):
    """A Python-number literal; its category decides promotion."""
    c = 0 if isinstance(value, bool) else 1 if isinstance(value, int) else 2
    return Node("lit", [], ("bool", "i64", "f32")[c], [], value=value, cat=c)


def lit_text(v):
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, int):
        return str(v)
    if v != v:
        return "nan"
    if v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    return repr(float(v))


class Program:
    """Inputs, the statements in order (every non-input, non-literal node), outputs; sizes the
    data must bind (named dense sizes and pad lengths); text() prints the .rj file."""

    def __init__(self, inputs, outputs, sizes=None):
        # a node is output once (shrinking may replace two outputs by the same operand)
        self.inputs, self.outputs, self.sizes = list(inputs), list({id(o): o for o in outputs}.values()), dict(sizes or {})
        self.stmts = topo(self.outputs)
        for i, n in enumerate(self.inputs):
            n.name = n.name or f"x{i}"
        for i, n in enumerate(self.stmts):
            n.name = f"v{i}"
        used = set(id(n) for n in self.stmts)
        for n in self.stmts:
            used.update(id(a) for a in n.args)
        self.inputs = [n for n in self.inputs if id(n) in used or n in self.outputs]

    def text(self):
        from . import syntax
        lines = ["ragged j1 : B"]
        if any("j2" in n.shape for n in self.inputs + self.stmts):
            lines.append("ragged j2 : B")
        lines += [f"input {n.name} : {n.dtype}{shape_text(n.shape)}" for n in self.inputs]
        lines += [f"{n.name} = {syntax.expr(n)}" for n in self.stmts]
        lines.append("output " + ", ".join(n.name for n in self.outputs))
        return "\n".join(lines) + "\n"


def topo(outputs):
    """Non-input, non-literal nodes reachable from outputs, operands first."""
    seen, order = set(), []

    def visit(n):
        if id(n) in seen or n.op in ("input", "lit"):
            return
        seen.add(id(n))
        for a in n.args:
            visit(a)
        order.append(n)

    for o in outputs:
        visit(o)
    return order
