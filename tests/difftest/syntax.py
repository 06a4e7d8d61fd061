"""syntax.py — prints a Node as an expression of ragjit's text format.

Each node carries a 'style' attribute drawn by the generator, so that the same op is written
in each of the spellings the guide documents (infix operators, function calls, method calls,
keyword or positional arguments, `sign` for `sgn`, `view` for `reshape`): the parser is part
of what is tested.
"""
from .model import dim_text, lit_text

INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "eq": "==", "ne": "!=", "lt": "<",
         "le": "<=", "gt": ">", "ge": ">=", "logical_and": "&", "logical_or": "|", "matmul": "@"}


TORCH_DTYPE = {"f32": ("torch.float32", "torch.float", "float"), "f64": ("torch.float64", "torch.double", "double"),
               "f16": ("torch.float16", "torch.half", "half"), "bf16": ("torch.bfloat16", "torch.bfloat16", "bfloat16"),
               "i32": ("torch.int32", "torch.int", "int"), "i64": ("torch.int64", "torch.long", "long"),
               "bool": ("torch.bool", "torch.bool", "bool")}  # PyTorch's names, and the cast method


def value_text(v, s=0):
    """A literal's text; infinities and NaN now and then as Python writes them, float("-inf")."""
    t = lit_text(v)
    if t in ("inf", "-inf", "nan") and s % 3 == 1:
        return f'float("{t}")' if s % 2 else f"float('{t}')"
    return t


def operand(n, s=0):
    if n.is_lit():
        t = value_text(n.attrs["value"], s)
        return f"({t})" if t.startswith("-") else t
    return n.name


def call(name, args, style, kw=()):
    """name(args..., k=v...) or, with an odd style, args[0].name(rest...)."""
    kws = [f"{k}={v}" for k, v in kw]
    if style % 2 and args and not args[0][0].isdigit() and not args[0].startswith("("):
        return f"{args[0]}.{name}(" + ", ".join(list(args[1:]) + kws) + ")"
    return f"{name}(" + ", ".join(list(args) + kws) + ")"


def expr(n):
    s, at, op = n.attrs.get("style", 0), n.attrs, n.op
    a = [operand(x, s + k) for k, x in enumerate(n.args)]
    if op in INFIX and s % 3 != 2:
        return f"({a[0]} {INFIX[op]} {a[1]})"
    if op == "neg" and s % 2:
        return f"(-{a[0]})"
    if op == "logical_not" and s % 2:
        return f"(~{a[0]})"
    if op == "where":  # PyTorch's method form: x.where(cond, y) is where(cond, x, y)
        if s % 2 and not a[1][0].isdigit() and not a[1].startswith("("):
            return f"{a[1]}.where({a[0]}, {a[2]})"
        return f"where({a[0]}, {a[1]}, {a[2]})"
    if op == "gelu":
        return call("gelu", a, s, [("approximate", '"none"')] if s % 4 == 2 else [])
    if op == "gelu_tanh":
        return call("gelu", a, s, [("approximate", '"tanh"')])
    if op == "sgn":
        return call("sign" if s % 4 >= 2 else "sgn", a, s)
    if op == "cast":  # a string, PyTorch's torch.float16, or its methods: x.half(), x.to(...), x.type(...)
        names, form = TORCH_DTYPE[at["to"]], s % 6
        if form == 1:
            return f"{a[0]}.{names[2]}()"
        if form == 2:
            return f"{a[0]}.{'to' if s % 4 < 2 else 'type'}({names[s % 2]})"
        if form == 3:
            return call("cast", a + [names[0]], s)
        return call("cast", a + [f'"{at["to"]}"'], s)
    if op == "masked_fill":
        return call("masked_fill", a + [value_text(at["value"], s)], s)
    if op in ("sum", "mean", "max", "min", "prod", "softmax", "log_softmax"):
        kw = [("keepdim", "True")] if at.get("keepdim") else []
        if op not in ("max", "min") and s % 5 == 4:  # PyTorch's dtype=, of the result's own dtype
            kw.append(("dtype", TORCH_DTYPE[n.dtype][0]))
        if op in ("max", "min") and s % 7 >= 4:  # PyTorch's (values, indices): the values
            text = call(op, a + [str(at["dim"])], s, kw)
            return (f"{text}[0]", f"{text}.values", call("a" + op, a + [str(at["dim"])], s, kw))[s % 7 - 4]
        if s % 4 >= 2:
            return call(op, a + [str(at["dim"])], s, kw)
        return call(op, a, s, [("dim", at["dim"])] + kw)
    if op in ("layer_norm", "rms_norm"):
        ns = at["nshape"]
        ns = dim_text(ns[0]) if len(ns) == 1 else "[" + ", ".join(dim_text(d) for d in ns) + "]"
        kw = [("eps", repr(at["eps"]))] if at.get("eps") is not None else []
        return call(op, [a[0], ns] + a[1:], s, kw)
    if op == "pad":
        kw = [("value", lit_text(at["value"]))]
        if at.get("len") is not None:
            kw.append(("len", at["len"]))
        return call("pad", a, s, kw)
    if op == "unpad":
        return call("unpad", a + ["[j1, j1]" if at.get("pair") else "j1"], s)
    if op == "linear":
        return call("linear", a, s)
    if op in ("gather", "index_select"):
        return call(op, [a[0], str(at["dim"]), a[1]], s)
    if op == "take_along_dim":
        return call(op, a, s, [("dim", at["dim"])])
    if op == "positions":
        return f"positions({at.get('sym', 'j1')})"
    if op == "sdpa":  # PyTorch's keywords; the mask positional now and then
        kw = [("is_causal", "True")] if at["causal"] else [("is_causal", "False")] if s % 3 == 0 else []
        if at.get("scale") is not None:
            kw.append(("scale", repr(at["scale"])))
        if at.get("gqa"):
            kw.append(("enable_gqa", "True"))
        if len(a) > 3 and s % 2:
            return call("scaled_dot_product_attention", a, 0, kw)
        return call("scaled_dot_product_attention", a[:3], 0, ([("attn_mask", a[3])] if len(a) > 3 else []) + kw)
    if op in ("reshape", "view"):
        if at.get("inline"):  # PyTorch's x.view(B, j1, H, D): the sizes one by one
            return f"{a[0]}.{op}(" + ", ".join(dim_text(d) for d in at["to"]) + ")"
        return call(op, a + ["[" + ", ".join(dim_text(d) for d in at["to"]) + "]"], s)
    if op in ("unsqueeze", "squeeze"):
        return call(op, a + [str(at["dim"])], s)
    if op == "transpose":
        if at.get("mT"):
            return f"{a[0]}.mT"
        t = call(op, a + [str(at["d0"]), str(at["d1"])], s)
        return t + (".contiguous()", "", ".clone()", "", "")[s % 5]
    if op == "narrow":
        return narrow_expr(a[0], at, s)
    if op in ("arange", "full", "zeros", "ones"):
        kw = [("dtype", f'"{at["as_dtype"]}"')] if at.get("as_dtype") else []
        shape = "[" + ", ".join(dim_text(d) for d in n.shape) + "]"
        if op == "arange":
            return call("torch.arange" if s % 2 else "arange", [dim_text(n.shape[0])], 0, kw)
        if op == "full":
            return call("torch.full" if s % 2 else "full", [shape, lit_text(at["value"])], 0, kw)
        if s % 3 == 0 and n.shape:
            return call(op, [dim_text(d) for d in n.shape], 0, kw)
        return call(op, [shape if s % 2 else "(" + ", ".join(dim_text(d) for d in n.shape) + ",)"], 0, kw)
    if op == "permute":
        dims = [str(d) for d in at["perm"]]
        if s % 3 == 0:
            return f"{a[0]}.permute({', '.join(dims)})"
        return f"torch.permute({a[0]}, ({', '.join(dims)},))" if s % 3 == 1 else call(op, [a[0], "[" + ", ".join(dims) + "]"], s)
    if op == "flatten":
        if at.get("short"):  # x.flatten(2): to the last dim
            return f"{a[0]}.flatten({at['start']})"
        return call(op, a, s, [("start_dim", at["start"]), ("end_dim", at["end"])])
    if op == "unflatten":
        sz = "(" + ", ".join(str(d) for d in at["sizes"]) + ")" if s % 2 else "[" + ", ".join(str(d) for d in at["sizes"]) + "]"
        return call(op, [a[0], str(at["dim"]), sz], s)
    if op in ("cat", "stack"):
        lst = "[" + ", ".join(a) + "]" if s % 2 else "(" + ", ".join(a) + ")"
        return f"torch.{op}({lst}, {at['dim']})" if s % 4 >= 2 else f"{op}({lst}, dim={at['dim']})"
    if op == "clamp":
        form, rest = at["form"], a[1:]
        if form in ("clamp_min", "clamp_max"):
            return call(form, a, s) if s % 3 else call(form, [a[0]], s, [(form[-3:], rest[0])])
        lo = rest[0] if at["lo"] else "None"
        hi = rest[-1] if at["hi"] else None
        if s % 3 == 0:  # keywords, None left out
            kw = ([("min", lo)] if at["lo"] else []) + ([("max", hi)] if hi else [])
            return f"torch.{form}({a[0]}, " + ", ".join(f"{k}={v}" for k, v in kw) + ")" if s % 2 == 0 else \
                call(form, [a[0]], s, kw)
        return call(form, [a[0], lo] + ([hi] if hi else []), s)
    if op == "leaky_relu":
        sl = at.get("slope")
        if sl is None:
            return call("F.leaky_relu" if s % 4 == 0 else "leaky_relu", a, s if s % 4 else 0)
        return call("leaky_relu", a + [lit_text(sl)], s) if s % 3 else call("leaky_relu", a, s, [("negative_slope", lit_text(sl))])
    if op == "act":
        fn, b = at["fn"], at.get("bounds")
        if b:
            kw = [("min_val", lit_text(b[0])), ("max_val", lit_text(b[1]))]
            return call("F.hardtanh", a, 0, kw) if s % 3 == 0 else call("hardtanh", a + [lit_text(v) for v in b], s)
        if s % 4 == 0:
            return call(("torch." if fn in ("square", "reciprocal") else "F.") + fn, a, 0)
        return call(fn, a, s)
    if op == "expfn":
        fn = at["fn"]
        kw = [(k, lit_text(at[k])) for k in ("beta", "threshold", "alpha") if at.get(k) is not None]
        name = ("torch." if fn in ("log1p", "expm1") else "F.") + fn if s % 3 == 0 else fn
        if kw and s % 2:  # positional: softplus(x, beta, threshold), elu(x, alpha)
            if fn == "softplus" and at.get("beta") is None:
                return call(name, a, s if s % 3 else 0, kw)
            return call(name, a + [v for _, v in kw], s if s % 3 else 0)
        return call(name, a, s if s % 3 else 0, kw)
    if op == "porting":
        fn = at["fn"]
        if fn == "flip":
            dims = "[" + ", ".join(str(d) for d in at["dims"]) + "]"
            return call("torch.flip", a + [dims], 0) if s % 2 == 0 else f"{a[0]}.flip(" + ", ".join(str(d) for d in at["dims"]) + ")"
        if fn in ("tril", "triu"):
            return call(("torch." if s % 3 == 0 else "") + fn, a + ([str(at["k"])] if at["k"] else []), s if s % 3 else 0)
        if fn == "norm":
            kw = ([("p", lit_text(at["p"]))] if at["p"] is not None else []) + [("dim", str(at["dim"]))] + (
                [("keepdim", "True")] if at["keepdim"] else [])
            if s % 2:
                return call("torch.linalg.vector_norm", a, 0, [("ord" if k == "p" else k, v) for k, v in kw])
            return call("norm", a, 1, kw)
        if fn in ("softshrink", "hardshrink"):
            return call("F." + fn, a + ([lit_text(at["l"])] if at.get("l") is not None else []), 0)
        if fn == "threshold":
            return call("F.threshold", a + [lit_text(at["th"]), lit_text(at["val"])], 0)
        if fn == "logaddexp":
            return call("torch.logaddexp", a, 0) if s % 2 else call("logaddexp", a, 1)
        return call(("F." + fn) if fn in ("glu", "logsigmoid") and s % 2 else fn, a, 0 if s % 2 else 1)
    if op == "argmax":
        fn = at["fn"]
        kw = [] if at.get("all") else [("dim", str(at["written"]))]
        if at.get("keepdim"):
            kw.append(("keepdim", "True"))
        if not at.get("all") and s % 5 >= 3:  # PyTorch's (values, indices) of max and min with a dim
            text = call(fn[3:], a + [v for _, v in kw], s) if s % 2 else call("torch." + fn[3:], a, 0, kw)
            return f"{text}[1]" if s % 5 == 3 else f"{text}.indices"
        if kw and s % 4 == 1:  # positional: x.argmax(dim[, keepdim])
            return call(fn, a + [v for _, v in kw], s)
        return call(("torch." + fn) if s % 3 == 0 else fn, a, s if s % 3 else 0, kw)
    if op == "stat":
        fn, w = at["fn"], at["written"]
        dim = "(" + ", ".join(str(d) for d in w) + ("," if len(w) == 1 else "") + ")" if len(w) > 1 else str(w[0])
        kw = ([("dim", "None")] if s % 5 == 0 else []) if at.get("all") else [("dim", dim)]
        if at.get("unbiased") is not None:
            kw.append(("unbiased", "True" if at["unbiased"] else "False"))
        if at.get("correction") is not None:
            kw.append(("correction", str(at["correction"])))
        if at.get("keepdim"):
            kw.append(("keepdim", "True"))
        return call(("torch." + fn) if s % 3 == 0 else fn, a, s if s % 3 else 0, kw)
    if op in ("logsumexp", "normalize"):
        w = at.get("written")
        dim = None if w is None else "(" + ", ".join(str(d) for d in w) + ("," if len(w) == 1 else "") + ")" \
            if at.get("tuple") else str(w[0])
        if op == "logsumexp":
            kw = [("keepdim", "True")] if at.get("keepdim") else []
            if s % 4 >= 2:
                return call(op, a + [dim], s, kw)
            return call("torch.logsumexp" if s % 4 == 0 else op, a, s if s % 4 else 0, [("dim", dim)] + kw)
        kw = ([("p", lit_text(at["p"]))] if at.get("p") is not None else []) + \
            ([("dim", dim)] if dim is not None else []) + ([("eps", repr(at["eps"]))] if at.get("eps") is not None else [])
        return call("F.normalize" if s % 4 == 0 else op, a, s if s % 4 else 0, kw)
    return call(op, a, s)


def narrow_expr(x, at, s):
    """narrow(x, dim, start, length) in one of its spellings: the call (negative dim and start
    too, torch.narrow), Python slicing (negative and out-of-range bounds, which Python clamps,
    '...' or ':'s before it), and a piece of a split or chunk when the cut is one."""
    k, n, start, length, size = at["dim"], at["rank"], at["start"], at["length"], at["size"]
    form = s % 6
    if form == 5 and length and start % length == 0:
        return f"{x}.split({length}, dim={k - n})[{start // length}]"
    if form == 4 and length and start % length == 0:
        chunks = -(-size // length)  # chunk's pieces are ceil(size / chunks) long
        if -(-size // chunks) == length:
            return f"torch.chunk({x}, {chunks}, dim={k})[{start // length}]"
    if form >= 2:
        lo = str(start - size) if s % 4 == 2 and 0 < start < size else str(start)  # -0 is 0, not the end
        stop = start + length
        hi = "" if stop == size and s % 3 == 0 else str(stop + 1000 if stop == size and s % 3 == 1 else stop)
        sl = f"{lo}:{hi}"
        if s % 2 and k == n - 1:
            items = ["...", sl]
        else:
            items = [":"] * k + [sl] + ([] if s % 4 == 0 else [":"] * (n - 1 - k))
        return f"{x}[" + ", ".join(items) + "]"
    d = k - n if s % 4 == 1 else k
    st = start - size if s % 4 == 3 and 0 < start < size else start
    return call("torch.narrow" if s % 4 == 0 else "narrow", [x, str(d), str(st), str(length)], s)
