/*
 * parse_expr.c — the text format's expressions: operators, literals, names, and the syntax of
 * calls and their arguments.
 *
 * Expressions are Python's, with Python's precedence (comparisons < | < & < + - < * / // % @ <
 * unary - ~ < ** < calls and methods). Number literals are Python numbers for dtype promotion (2 is
 * an int, 2.0 and inf are floats), True/False are bools, and calls take positional and keyword
 * arguments with PyTorch's names, as functions (softmax(x, dim=1)), as PyTorch's module
 * functions (torch.softmax, F.gelu) or as methods of their first argument (x.softmax(1)), and
 * Python's subscripts (x[..., 0:64], read here, made narrows in parse_call.c).
 * Infix operators map to the ops add, sub, mul, div, matmul, the comparisons and the logical
 * ops; between two numbers they are Python's arithmetic, folded into a number (// and % only
 * there: x.shape[-1] // 2). What a call's name means is parse_call.c's table; this file reads
 * what is written.
 *
 * The builder runs as the expression is read, so a shape error is reported at the operator or
 * call that caused it. Each parse function carries its grammar rule in a comment.
 *
 * The parser recurses only through expressions (parentheses, call arguments, unary minus),
 * and every such cycle opens a level with nest_in, which stops at PARSE_MAX_NEST levels: a
 * program is data an embedding may not have written, and 1,500 nested parentheses must be a
 * parse error at the offending one, not a stack overflow. A call's arguments live on the heap
 * rather than in the recursing frames, which keeps the stack of the deepest expression allowed
 * under about 1 MiB.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "parse.h"


/* An attribute of torch.finfo(dt) or torch.iinfo(dt): PyTorch's min, max, eps, tiny
 * (smallest_normal) and bits, as a number literal. */
static value info_attr(parser *P, const token *m, const char *name, const value *self) {
    static const struct {
        rj_dtype t;
        double max, eps, tiny;
        int bits;
    } f[] = {{RJ_F32, 3.4028234663852886e38, 0x1p-23, 0x1p-126, 32}, {RJ_F64, 1.7976931348623157e308, 0x1p-52, 0x1p-1022, 64},
             {RJ_F16, 65504.0, 0x1p-10, 0x1p-14, 16}, {RJ_BF16, 3.3895313892515355e38, 0x1p-7, 0x1p-126, 16}};
    value r = node_value(RJ_NONE, self->at);
    bool ints = self->info == 2, is_max = !strcmp(name, "max"), is_min = !strcmp(name, "min");
    if (ints && (is_max || is_min)) {
        int64_t hi = self->info_dt == RJ_I32 ? INT32_MAX : INT64_MAX;
        r.node = built(P, rj_graph_scalar_int(P->g, is_max ? hi : -hi - 1), m);
        return r;
    }
    if (!strcmp(name, "bits")) {
        r.node = built(P, rj_graph_scalar_int(P->g, ints ? (self->info_dt == RJ_I32 ? 32 : 64) : 0), m);
        for (size_t i = 0; !ints && i < sizeof f / sizeof f[0]; i++)
            if (f[i].t == self->info_dt) r.node = built(P, rj_graph_scalar_int(P->g, f[i].bits), m);
        return r;
    }
    for (size_t i = 0; !ints && i < sizeof f / sizeof f[0]; i++) {
        if (f[i].t != self->info_dt) continue;
        double v = is_max ? f[i].max : is_min ? -f[i].max : !strcmp(name, "eps") ? f[i].eps
                 : !strcmp(name, "tiny") || !strcmp(name, "smallest_normal") ? f[i].tiny : NAN;
        if (v == v) {
            r.node = built(P, rj_graph_scalar(P->g, v), m);
            return r;
        }
    }
    fail_at(P, m, RJ_ERR_PARSE, "%s has no attribute '%s' (ragjit has %s)", ints ? "iinfo" : "finfo", name,
            ints ? "min, max and bits" : "min, max, eps, tiny, smallest_normal and bits");
    return r;
}

/* Python's own parser stops at 200 nested parentheses; real programs nest a handful. */
enum { PARSE_MAX_NEST = 256 };

static value parse_postfix(parser *P);
static value parse_primary(parser *P);

/* Opens one level of expression nesting at t (a parenthesis, a call, a unary minus); false
 * after reporting when that is one level too many. Every recursive cycle of the grammar opens
 * a level, so this bounds the parser's recursion. */
static bool nest_in(parser *P, const token *t) {
    if (P->failed) return false;
    if (P->nest == PARSE_MAX_NEST) {
        fail_at(P, t, RJ_ERR_PARSE, "expression nested too deeply (more than %d levels of "
                "parentheses, calls and unary minus)", PARSE_MAX_NEST);
        return false;
    }
    P->nest++;
    return true;
}

/* ---- arguments ------------------------------------------------------------------------------ */

/* The rest of a tuple or of a list of dims, after its opening bracket and `first` elements
 * already in v: { "," expr } [ "," ] close. Each element is an integer literal (a dim, which
 * may be negative) or a size. */
static void tuple_rest(parser *P, value *v, tok_kind close, const char *closing) {
    v->is_tuple = true;
    while (!P->failed && P->tok.kind != close) {
        if (v->ndims > 0 && !lex_expect(P, T_COMMA, close == T_RPAREN ? "',' or ')'" : "',' or ']'")) return;
        if (P->tok.kind == close) break; /* (1,) */
        if (v->ndims == RJ_MAX_RANK) {
            fail_at(P, &P->tok, RJ_ERR_PARSE, "tuple too long (at most %d elements)", RJ_MAX_RANK);
            return;
        }
        value e = parse_expr(P);
        if (P->failed) return;
        const node *n = scalar_of(P, &e);
        if (e.is_size) {
            v->tuple_syms |= 1u << v->ndims;
            v->dims[v->ndims++] = e.dims[0];
        } else if (n && n->weak == WEAK_INT) {
            v->dims[v->ndims++] = n->ival;
        } else {
            fail_at(P, &e.at, RJ_ERR_PARSE, "a tuple holds integers (dims) or sizes");
            return;
        }
    }
    lex_expect(P, close, closing);
}

/* list_dim = dim | postfix   (a size taken from a tensor: [B, j1, x.size(2) * 2] is not
 * allowed, [B, j1, x.size(2)] and [B, -1, x.shape[-1]] are) */
static rj_dim list_dim(parser *P) {
    const char *q = P->p;
    while (*q == ' ' || *q == '\t') q++;
    if (P->tok.kind != T_IDENT || *q != '.') return parse_dim(P);
    value v = parse_postfix(P);
    if (P->failed) return RJ_DIM_NONE;
    if (v.is_size) return v.dims[0];
    const node *n = scalar_of(P, &v);
    if (n && n->weak == WEAK_INT && n->ival >= 0) return n->ival;
    fail_at(P, &v.at, RJ_ERR_PARSE, "expected a size in the list (a number, a size name, x.size(k) or x.shape[k])");
    return RJ_DIM_NONE;
}

/* list = "[" [ ( list_dim | "-" "1" ) { "," ( list_dim | "-" "1" ) } ] "]" */
static value list_value(parser *P) {
    value v = {.node = RJ_NONE, .is_list = true, .at = P->tok};
    lex_next(P);
    while (!P->failed && P->tok.kind != T_RBRACK) {
        if (v.ndims == RJ_MAX_RANK) {
            fail_at(P, &P->tok, RJ_ERR_PARSE, "list too long");
            return v;
        }
        if (P->tok.kind == T_MINUS) { /* -1: reshape's inferred size */
            token m = P->tok;
            lex_next(P);
            if (P->tok.kind != T_INT || P->tok.ival != 1) {
                fail_at(P, &m, RJ_ERR_PARSE, "a dim must not be negative (-1 is reshape's inferred size)");
                return v;
            }
            lex_next(P);
            v.dims[v.ndims++] = RJ_DIM_NONE;
        } else {
            v.dims[v.ndims++] = list_dim(P);
        }
        if (P->tok.kind != T_RBRACK && !lex_expect(P, T_COMMA, "',' or ']'")) return v;
    }
    lex_expect(P, T_RBRACK, "']'");
    return v;
}

/* tensors = ( "[" | "(" ) expr { "," expr } [ "," ] ( "]" | ")" ): cat's and stack's list */
static value tensor_list(parser *P) {
    value v = {.node = RJ_NONE, .is_tensors = true, .at = P->tok};
    tok_kind close = P->tok.kind == T_LBRACK ? T_RBRACK : T_RPAREN;
    const char *closing = close == T_RBRACK ? "',' or ']'" : "',' or ')'";
    lex_next(P);
    while (!P->failed && P->tok.kind != close) {
        if (v.ndims == RJ_MAX_RANK) {
            fail_at(P, &P->tok, RJ_ERR_PARSE, "at most %d tensors in one list (join the results again)", RJ_MAX_RANK);
            return v;
        }
        value x = parse_expr(P);
        rj_node n = as_node(P, &x);
        if (P->failed) return v;
        v.dims[v.ndims++] = n;
        if (P->tok.kind != close && !lex_expect(P, T_COMMA, closing)) return v;
    }
    lex_expect(P, close, close == T_RBRACK ? "']'" : "')'");
    return v;
}

/* An argument's value: expr | list | STRING, or as the function's table row has that argument
 * written: a size by name (pad's len), or a list of dims (sum(x, dim=[1, 2]), which may be
 * negative, rather than sizes). */
static value arg_value(parser *P, int slot) {
    if (slot == SLOT_SIZE && P->tok.kind == T_IDENT) {
        char nm[128];
        snprintf(nm, sizeof nm, "%.*s", P->tok.len < 127 ? P->tok.len : 127, P->tok.start);
        if (!find_var(P, nm) && strcmp(nm, "None")) { /* a size name, declared on use */
            value v = {.node = RJ_NONE, .is_list = true, .ndims = 1, .at = P->tok};
            v.dims[0] = parse_dim(P);
            return v;
        }
    }
    if (slot == SLOT_TENSORS && (P->tok.kind == T_LBRACK || P->tok.kind == T_LPAREN))
        return tensor_list(P);
    if ((slot == SLOT_DIMS || slot == SLOT_DIMS_VAR) && P->tok.kind == T_LBRACK) {
        value v = {.node = RJ_NONE, .at = P->tok};
        lex_next(P);
        tuple_rest(P, &v, T_RBRACK, "']'");
        return v;
    }
    if (P->tok.kind == T_LBRACK) return list_value(P);
    if (P->tok.kind == T_STRING) {
        value v = {.node = RJ_NONE, .is_string = true, .str = P->tok.start + 1, .slen = P->tok.len - 2,
                   .at = P->tok};
        lex_next(P);
        return v;
    }
    return parse_expr(P);
}

/* arg = [ IDENT "=" ] value */
static void parse_arg(parser *P, args *a) {
    token start = P->tok;
    char key[32] = "";
    if (start.kind == T_IDENT) {
        /* look ahead for "name =" (but not "name ==") */
        const char *q = P->p;
        while (*q == ' ' || *q == '\t') q++;
        if (q[0] == '=' && q[1] != '=') {
            lex_ident(P, key, sizeof key, "an argument name");
            lex_next(P); /* '=' */
        }
    }
    value v = arg_value(P, call_slot(a, key));
    if (P->failed) return;
    if (key[0]) {
        if (a->nkw == MAX_ARGS) {
            fail_at(P, &start, RJ_ERR_PARSE, "too many arguments");
            return;
        }
        for (int i = 0; i < a->nkw; i++)
            if (!strcmp(a->key[i], key)) {
                fail_at(P, &start, RJ_ERR_PARSE, "argument '%s' given twice", key);
                return;
            }
        snprintf(a->key[a->nkw], sizeof a->key[0], "%s", key);
        v.at = start; /* messages about a keyword argument point at its name */
        a->kw[a->nkw++] = v;
    } else {
        if (a->nkw) {
            fail_at(P, &start, RJ_ERR_PARSE, "positional argument after keyword arguments");
            return;
        }
        if (a->npos == MAX_ARGS) {
            fail_at(P, &start, RJ_ERR_PARSE, "too many arguments");
            return;
        }
        a->pos[a->npos++] = v;
    }
}

/* "(" [ arg { "," arg } ] ")" after a function's name at t: the call, with `self` (a method
 * call's receiver) as the first positional argument when not NULL. */
static value call_args(parser *P, const token *t, const char *name, const value *self) {
    value r = node_value(RJ_NONE, *t);
    if (!nest_in(P, t)) return r;
    lex_next(P); /* '(' */
    args *a = mem_alloc(P->ctx, sizeof *a);
    if (!a) {
        fail_at(P, t, RJ_ERR_NOMEM, "out of memory");
        return r;
    }
    *a = (args){.method = self != NULL};
    a->form = call_find(name, &a->op);
    if (self) a->pos[a->npos++] = *self;
    while (!P->failed && P->tok.kind != T_RPAREN) {
        parse_arg(P, a);
        if (P->tok.kind != T_RPAREN && !lex_expect(P, T_COMMA, "',' or ')'")) break;
    }
    P->nest--;
    if (!P->failed && lex_expect(P, T_RPAREN, "')'")) r = call_apply(P, t, name, a);
    mem_free(P->ctx, a, sizeof *a);
    return r;
}

/* ---- primaries ------------------------------------------------------------------------------ */

/* PyTorch's module prefixes: "torch", "F" (torch.nn.functional as F), "torch.nn.functional"
 * and "nn.functional", with the intermediate "torch.nn" and "nn", and "torch.linalg" (of which
 * vector_norm only). 2: a module, 1: a prefix of one only, 0: neither. */
static int module_kind(const char *path) {
    static const char *const mods[] = {"torch", "F", "torch.nn.functional", "nn.functional", "torch.linalg"};
    for (size_t i = 0; i < RJ_ARRAY_LEN(mods); i++)
        if (!strcmp(path, mods[i])) return 2;
    return !strcmp(path, "torch.nn") || !strcmp(path, "nn");
}

/* module_path = MODULE { "." IDENT } "." IDENT, with `name` the first word and the current
 * token the '.' after it: ported code keeps torch.softmax, F.gelu and
 * torch.nn.functional.layer_norm, which name ragjit's functions of the same names. On a
 * module, leaves the function's name in `name` and its token in *t and returns 1; returns 0
 * (consuming nothing) when name is no module, -1 after reporting. */
static int module_path(parser *P, char *name, size_t n, token *t) {
    char path[160];
    snprintf(path, sizeof path, "%s", name);
    if (!module_kind(path)) return 0;
    while (!P->failed && P->tok.kind == T_DOT) {
        lex_next(P);
        token w = P->tok;
        char word[128], longer[300];
        int room = (int)sizeof path - 1;
        if (!lex_ident(P, word, sizeof word, "a function's name")) return -1;
        snprintf(longer, sizeof longer, "%s.%s", path, word);
        if (P->tok.kind == T_DOT && module_kind(longer)) {
            snprintf(path, sizeof path, "%.*s", room, longer);
            continue;
        }
        if (!strcmp(path, "torch.linalg") && strcmp(word, "vector_norm")) { /* its matrix norms are not */
            fail_at(P, &w, RJ_ERR_UNSUPPORTED, "torch.linalg.%s is not supported; torch.linalg.vector_norm and "
                    "torch.norm are", word);
            return -1;
        }
        if (module_kind(path) != 2) {
            fail_at(P, &w, RJ_ERR_PARSE, "'%s' is not a module ragjit knows: write %s(...), or F.%s(...), "
                    "torch.%s(...), torch.nn.functional.%s(...)", longer, word, word, word, word);
            return -1;
        }
        snprintf(name, n, "%s", word);
        *t = w;
        return 1;
    }
    if (!P->failed) fail_at(P, t, RJ_ERR_PARSE, "'%s' is a module: write %s.name(...)", path, path);
    return -1;
}

/* An integer in a subscript (a bound, a step, an index) into *out; false after reporting. */
static bool sub_int(parser *P, int64_t *out) {
    value e = parse_expr(P);
    if (P->failed) return false;
    const node *n = e.is_size ? NULL : scalar_of(P, &e);
    if (!n || n->weak != WEAK_INT) {
        fail_at(P, &e.at, RJ_ERR_PARSE, "a subscript holds integer literals (x[..., 0:64], x[:, :, -1]), '...' and ':'");
        return false;
    }
    *out = n->ival;
    return true;
}

static bool sub_end(const parser *P) {
    return P->tok.kind == T_COMMA || P->tok.kind == T_RBRACK || P->tok.kind == T_COLON;
}

/* subscript = "[" sub_item { "," sub_item } [ "," ] "]"
 * sub_item  = "..." | [ expr ] ":" [ expr ] [ ":" [ expr ] ] | expr   (Python's slices) */
static bool parse_subscript(parser *P, subscript *s) {
    lex_next(P); /* '[' */
    s->n = 0;
    while (!P->failed && P->tok.kind != T_RBRACK) {
        if (s->n > 0 && (!lex_expect(P, T_COMMA, "',' or ']'") || P->tok.kind == T_RBRACK)) break;
        if (s->n == RJ_MAX_RANK + 1) {
            fail_at(P, &P->tok, RJ_ERR_PARSE, "too many items in a subscript (at most %d)", RJ_MAX_RANK + 1);
            return false;
        }
        sub_item *it = &s->item[s->n++];
        *it = (sub_item){.kind = SUB_SLICE, .at = P->tok};
        if (P->tok.kind == T_DOT) { /* "..." */
            for (int k = 0; k < 3 && !P->failed; k++) lex_expect(P, T_DOT, "'...'");
            it->kind = SUB_ELLIPSIS;
            continue;
        }
        if (P->tok.kind == T_IDENT && P->tok.len == 4 && !strncmp(P->tok.start, "None", 4)) {
            fail_at(P, &P->tok, RJ_ERR_PARSE, "x[..., None] (a new dim) is not supported: write x.unsqueeze(dim)");
            return false;
        }
        if (P->tok.kind != T_COLON) {
            if (!sub_int(P, &it->v[0])) return false;
            it->has[0] = true;
            if (P->tok.kind != T_COLON) {
                it->kind = SUB_INDEX;
                continue;
            }
        }
        lex_next(P); /* the first ':' */
        if (!sub_end(P)) {
            if (!sub_int(P, &it->v[1])) return false;
            it->has[1] = true;
        }
        if (P->tok.kind == T_COLON) {
            lex_next(P);
            if (!sub_end(P)) {
                if (!sub_int(P, &it->v[2])) return false;
                it->has[2] = true;
            }
        }
    }
    return lex_expect(P, T_RBRACK, "']'");
}

/* postfix = primary { "." IDENT "(" [ arg { "," arg } ] ")" | subscript }: PyTorch's method
 * syntax, any op as a method of its first argument (x.sum(dim=1), x.softmax(1),
 * m.masked_fill(...)), and Python's slicing (x[..., 0:64], a split's x.split(64)[0]) */
static value parse_postfix(parser *P) {
    value r = parse_primary(P);
    while (!P->failed && (P->tok.kind == T_DOT || P->tok.kind == T_LBRACK)) {
        if (P->tok.kind == T_LBRACK) {
            token lb = P->tok;
            value self = r;
            if (!nest_in(P, &lb)) return r;
            subscript *sub = mem_alloc(P->ctx, sizeof *sub);
            if (!sub) {
                fail_at(P, &lb, RJ_ERR_NOMEM, "out of memory");
                return r;
            }
            bool ok = parse_subscript(P, sub);
            P->nest--;
            if (ok) r = subscript_value(P, &lb, &self, sub);
            mem_free(P->ctx, sub, sizeof *sub);
            r.at = self.at;
            continue;
        }
        lex_next(P);
        token m = P->tok;
        char name[128];
        if (!lex_ident(P, name, sizeof name, "a method name after '.'")) return r;
        value self = r;
        if (P->tok.kind != T_LPAREN) {
            if (!strcmp(name, "T") || !strcmp(name, "mT")) {
                r = transpose_last(P, &m, name[0] == 'm' ? ".mT" : ".T", &self, name[0] == 'm');
                continue;
            }
            if (!strcmp(name, "shape") && P->tok.kind == T_LBRACK) { /* x.shape[k] */
                lex_next(P);
                value k = parse_expr(P);
                if (!lex_expect(P, T_RBRACK, "']' after x.shape[k]")) return r;
                r = size_value(P, &m, "shape", &self, &k);
                continue;
            }
            if (self.has_indices && (!strcmp(name, "values") || !strcmp(name, "indices"))) { /* x.max(1).indices */
                r = node_value(name[0] == 'v' ? self.node : indices_of(P, &m, &self), self.at);
                continue;
            }
            if (self.info) { /* torch.finfo(dt).min */
                r = info_attr(P, &m, name, &self);
                continue;
            }
            if (!strcmp(name, "dtype") && !P->failed) { /* x.dtype, a dtype value */
                rj_node x = as_node(P, &self);
                if (P->failed) return r;
                r = dtype_as_value(rj_node_dtype(P->g, x), self.at);
                continue;
            }
            if (!strcmp(name, "shape"))
                fail_at(P, &m, RJ_ERR_PARSE, "'.shape' is a tuple of sizes, which ragjit does not have: write "
                        "x.shape[k] or x.size(k) for dim k");
            else
                fail_at(P, &m, RJ_ERR_PARSE, "'.%s' is not a call: write %s(...) (ragjit's attributes are .T, .mT, "
                        ".shape[k] and .dtype; the rest are methods)", name, name);
            return r;
        }
        r = call_args(P, &m, name, &self);
        r.at = self.at;
    }
    return r;
}

/* paren = "(" expr ")" | "(" ")" | "(" expr "," tuple_rest   (a tuple of dims, as PyTorch's
 * dim=(1, 2)) */
static value parse_paren(parser *P, const token *t) {
    value r = node_value(RJ_NONE, *t);
    if (!nest_in(P, t)) return r;
    lex_next(P);
    if (P->tok.kind == T_RPAREN) { /* () */
        r.is_tuple = true;
    } else {
        r = parse_expr(P);
        if (!P->failed && P->tok.kind == T_COMMA) { /* (1, 2) */
            value first = r;
            r = node_value(RJ_NONE, *t);
            const node *n = scalar_of(P, &first);
            if (first.is_size) r.tuple_syms = 1, r.dims[r.ndims++] = first.dims[0];
            else if (n && n->weak == WEAK_INT) r.dims[r.ndims++] = n->ival;
            else fail_at(P, &first.at, RJ_ERR_PARSE, "a tuple holds integers (dims) or sizes");
            tuple_rest(P, &r, T_RPAREN, "')'");
            P->nest--;
            return r;
        }
    }
    P->nest--;
    lex_expect(P, T_RPAREN, "')'");
    return r;
}

/* Equal but for the case of ASCII letters (true, TRUE and True). */
static bool same_letters(const char *a, const char *b) {
    for (; *a && *b; a++, b++) {
        char x = *a >= 'A' && *a <= 'Z' ? (char)(*a - 'A' + 'a') : *a, y = *b >= 'A' && *b <= 'Z' ? (char)(*b - 'A' + 'a') : *b;
        if (x != y) return false;
    }
    return !*a && !*b;
}

/* A name not called, at t: a literal's keyword, a variable, or a size; else the error for an
 * undefined name, with the closest defined one. */
static value name_value(parser *P, const token *t, const char *name) {
    value r = node_value(RJ_NONE, *t);
    if (!strcmp(name, "True") || !strcmp(name, "False")) {
        r.node = built(P, rj_graph_scalar_bool(P->g, name[0] == 'T'), t);
        return r;
    }
    if (!strcmp(name, "inf") || !strcmp(name, "nan")) {
        r.node = built(P, rj_graph_scalar(P->g, name[0] == 'i' ? INFINITY : NAN), t);
        return r;
    }
    if (!strcmp(name, "None")) {
        r.is_none = true;
        return r;
    }
    var *v = find_var(P, name);
    if (v && v->dtype >= 0) return dtype_as_value((rj_dtype)v->dtype, *t); /* a dtype kept in a variable */
    if (v) {
        r.node = v->node;
        return r;
    }
    /* a symbol (unpad's argument, pad's len, a normalized_shape entry) */
    rj_dim d = rj_graph_find_dim(P->g, name);
    if (d != RJ_DIM_NONE) {
        r.is_list = r.is_size = true;
        r.ndims = 1;
        r.dims[0] = d;
        return r;
    }
    suggest s = {.word = name};
    /* Python's keywords first: keepdim=true is JSON's or C's spelling of True */
    static const char *const keywords[] = {"True", "False", "None", "inf", "nan"};
    for (size_t i = 0; i < RJ_ARRAY_LEN(keywords) && !s.best; i++)
        if (same_letters(name, keywords[i])) s.best = keywords[i];
    for (int32_t i = 0; i < P->nvars; i++) suggest_try(&s, P->vars[i].name);
    for (int32_t i = 0; i < P->g->nsym; i++) suggest_try(&s, P->g->syms[i].name);
    char hint[160];
    suggestion(&s, hint, sizeof hint);
    fail_at(P, t, RJ_ERR_PARSE, "undefined name '%s'%s", name, hint);
    return r;
}

/* Python's math module on numbers: math.sqrt(32), math.log(2), math.pi, as scores / math.sqrt(d)
 * is written; the value is a float literal (floor and ceil: an integer one), computed in double.
 * The current token is the '.' after "math". */
static value parse_math(parser *P, const token *at) {
    value r = node_value(RJ_NONE, *at);
    lex_next(P);
    token w = P->tok;
    char word[32];
    if (!lex_ident(P, word, sizeof word, "a name from math")) return r;
    static const struct {
        const char *name;
        double v;
    } consts[] = {{"pi", 3.141592653589793}, {"e", 2.718281828459045}, {"tau", 6.283185307179586},
                  {"inf", INFINITY}, {"nan", NAN}};
    if (P->tok.kind != T_LPAREN) {
        for (size_t i = 0; i < RJ_ARRAY_LEN(consts); i++)
            if (!strcmp(word, consts[i].name)) {
                r.node = built(P, rj_graph_scalar(P->g, consts[i].v), &w);
                return r;
            }
        fail_at(P, &w, RJ_ERR_PARSE, "math.%s is not a constant ragjit knows (pi, e, tau, inf, nan)", word);
        return r;
    }
    lex_next(P);
    double a[2] = {0, 0};
    int n = 0;
    while (!P->failed && P->tok.kind != T_RPAREN) {
        if (n && !lex_expect(P, T_COMMA, "',' or ')'")) return r;
        value v = parse_expr(P);
        const node *s = P->failed ? NULL : scalar_of(P, &v);
        if (P->failed) return r;
        if (!s || s->weak == WEAK_BOOL || n == 2) {
            fail_at(P, &v.at, RJ_ERR_PARSE, n == 2 ? "math.%s: too many arguments"
                    : "math.%s takes numbers (for a tensor, write the function itself: sqrt(x), exp(x))", word);
            return r;
        }
        a[n++] = s->weak == WEAK_FLOAT ? s->fval : (double)s->ival;
    }
    if (!lex_expect(P, T_RPAREN, "')'")) return r;
    double x = a[0], y;
    bool two = !strcmp(word, "pow") || !strcmp(word, "atan2");
    if (n != (two ? 2 : 1) && !(n == 2 && !strcmp(word, "log"))) {
        fail_at(P, &w, RJ_ERR_PARSE, "math.%s takes %s argument%s", word, two ? "two" : "one", two ? "s" : "");
        return r;
    }
    if (!strcmp(word, "sqrt")) y = sqrt(x);
    else if (!strcmp(word, "exp")) y = exp(x);
    else if (!strcmp(word, "log")) y = n == 2 ? log(x) / log(a[1]) : log(x);
    else if (!strcmp(word, "log2")) y = log2(x);
    else if (!strcmp(word, "log10")) y = log10(x);
    else if (!strcmp(word, "pow")) y = pow(x, a[1]);
    else if (!strcmp(word, "sin")) y = sin(x);
    else if (!strcmp(word, "cos")) y = cos(x);
    else if (!strcmp(word, "tanh")) y = tanh(x);
    else if (!strcmp(word, "atan2")) y = atan2(x, a[1]);
    else if (!strcmp(word, "fabs")) y = fabs(x);
    else if (!strcmp(word, "erf")) y = erf(x);
    else if (!strcmp(word, "floor") || !strcmp(word, "ceil")) {
        y = word[0] == 'f' ? floor(x) : ceil(x);
        if (!(fabs(y) < 9.2e18)) {
            fail_at(P, &w, RJ_ERR_PARSE, "math.%s: cannot convert %g to an integer", word, x);
            return r;
        }
        r.node = built(P, rj_graph_scalar_int(P->g, (int64_t)y), &w);
        return r;
    } else {
        fail_at(P, &w, RJ_ERR_PARSE, "math.%s is not a function ragjit knows (sqrt, exp, log, log2, log10, pow, "
                "sin, cos, tanh, atan2, fabs, erf, floor, ceil)", word);
        return r;
    }
    if (y != y && x == x && a[1] == a[1]) { /* Python raises where C gives NaN: sqrt(-1), log(-1) */
        fail_at(P, &w, RJ_ERR_PARSE, "math.%s: math domain error", word);
        return r;
    }
    r.node = built(P, rj_graph_scalar(P->g, y), &w);
    return r;
}

/* primary = NUMBER | "True" | "False" | "inf" | "nan" | IDENT | IDENT "(" [ arg { "," arg } ] ")"
 *         | module_path "(" [ arg { "," arg } ] ")" | paren */
static value parse_primary(parser *P) {
    token t = P->tok;
    value r = node_value(RJ_NONE, t);
    if (P->failed) return r;
    switch (t.kind) {
    case T_INT:
        lex_next(P);
        r.node = built(P, rj_graph_scalar_int(P->g, t.ival), &t);
        return r;
    case T_FLOAT:
        lex_next(P);
        r.node = built(P, rj_graph_scalar(P->g, t.fval), &t);
        return r;
    case T_LPAREN:
        return parse_paren(P, &t);
    case T_IDENT: break;
    default: {
        char got[80];
        tok_text(&t, got, sizeof got);
        fail_at(P, &t, RJ_ERR_PARSE, "expected an expression, found %s", got);
        return r;
    }
    }
    char name[128];
    lex_ident(P, name, sizeof name, "a name");
    if (P->failed) return r;
    if (P->tok.kind == T_DOT && !strcmp(name, "math") && !find_var(P, name)) return parse_math(P, &t);
    if (P->tok.kind == T_DOT && !find_var(P, name)) {
        int m = module_path(P, name, sizeof name, &t);
        if (m < 0) return r;
        rj_dtype dt;
        if (m > 0 && P->tok.kind != T_LPAREN && parse_dtype_name(name, &dt)) { /* torch.float16 */
            r = (value){.node = RJ_NONE, .is_string = true, .str = t.start, .slen = t.len, .at = t};
            return r;
        }
        if (m > 0 && P->tok.kind != T_LPAREN) {
            fail_at(P, &t, RJ_ERR_PARSE, "'%s' is a function: call it (%s(...)); the dtypes are torch.float32, "
                    "float64, float16, bfloat16, int32, int64 and bool", name, name);
            return r;
        }
    }
    if (P->tok.kind == T_LPAREN) return call_args(P, &t, name, NULL);
    return name_value(P, &t, name);
}

/* ---- operators ------------------------------------------------------------------------------ */

static value parse_unary(parser *P);

/* Python's arithmetic of two numbers (+ - * / // % **), folded into a number as Python
 * evaluates it before PyTorch sees it: int op int stays int (/ gives a float; ** a float for
 * a negative exponent), any float makes a float; x.shape[-1] // 2 is then a number that sizes
 * and subscripts take. Returns false, touching nothing, unless both are numbers; *r the number,
 * or nothing after an error (division by zero, an int that overflows 64 bits). */
static bool fold_numbers(parser *P, const token *op, const value *a, const value *b, value *r) {
    const node *x = a->is_size || a->is_string ? NULL : scalar_of(P, a);
    const node *y = b->is_size || b->is_string ? NULL : scalar_of(P, b);
    if (!x || !y || x->weak == WEAK_BOOL || y->weak == WEAK_BOOL || x->weak == WEAK_NONE || y->weak == WEAK_NONE)
        return false;
    *r = node_value(RJ_NONE, a->at);
    tok_kind k = op->kind;
    bool ints = x->weak == WEAK_INT && y->weak == WEAK_INT;
    bool zero_y = y->weak == WEAK_INT ? y->ival == 0 : y->fval == 0;
    bool zero_x = x->weak == WEAK_INT ? x->ival == 0 : x->fval == 0;
    bool neg_y = y->weak == WEAK_INT ? y->ival < 0 : y->fval < 0;
    if (((k == T_SLASH || k == T_FLOORDIV || k == T_PERCENT) && zero_y) || (k == T_POW && zero_x && neg_y)) {
        fail_at(P, op, RJ_ERR_ARG, "division by zero (of two numbers, as Python evaluates them)");
        return true;
    }
    if (ints && k != T_SLASH && !(k == T_POW && y->ival < 0)) {
        int64_t u = x->ival, v = y->ival, w = 0;
        bool over = false;
        if (k == T_PLUS) over = __builtin_add_overflow(u, v, &w);
        else if (k == T_MINUS) over = __builtin_sub_overflow(u, v, &w);
        else if (k == T_STAR) over = __builtin_mul_overflow(u, v, &w);
        else if (k == T_FLOORDIV || k == T_PERCENT) {
            over = u == INT64_MIN && v == -1;
            int64_t q = over ? 0 : u / v, m = over ? 0 : u % v;
            if (m != 0 && (m < 0) != (v < 0)) q--, m += v; /* Python's: toward -inf, the divisor's sign */
            w = k == T_FLOORDIV ? q : m;
        } else { /* ** */
            w = 1;
            for (int64_t e = v, base = u; e > 0 && !over; e >>= 1) {
                if (e & 1) over = __builtin_mul_overflow(w, base, &w);
                if (e > 1 && !over) over = __builtin_mul_overflow(base, base, &base);
            }
        }
        if (over) {
            fail_at(P, op, RJ_ERR_OVERFLOW, "this integer arithmetic overflows 64 bits");
            return true;
        }
        r->node = built(P, rj_graph_scalar_int(P->g, w), op);
        return true;
    }
    double u = x->weak == WEAK_INT ? (double)x->ival : x->fval, v = y->weak == WEAK_INT ? (double)y->ival : y->fval, w;
    switch (k) {
    case T_PLUS: w = u + v; break;
    case T_MINUS: w = u - v; break;
    case T_STAR: w = u * v; break;
    case T_SLASH: w = u / v; break;
    case T_FLOORDIV: w = floor(u / v); break;
    case T_PERCENT: w = fmod(u, v), w = w != 0 && (w < 0) != (v < 0) ? w + v : w; break;
    default: w = pow(u, v); break;
    }
    r->node = built(P, rj_graph_scalar(P->g, w), op);
    return true;
}

/* power = postfix [ "**" unary ]   (Python's: binds tighter than a unary minus on its left,
 * -x ** 2 is -(x ** 2), and right-associative, a ** b ** c is a ** (b ** c); the exponent may
 * be negated, x ** -1) */
static value parse_power(parser *P) {
    value a = parse_postfix(P);
    if (P->failed || P->tok.kind != T_POW) return a;
    token op = P->tok;
    lex_next(P);
    if (!nest_in(P, &op)) return a;
    value b = parse_unary(P);
    P->nest--;
    value r;
    if (P->failed || fold_numbers(P, &op, &a, &b, &r)) return P->failed ? a : r;
    rj_node n = rj_graph_binary(P->g, RJ_OP_POW, as_node(P, &a), as_node(P, &b));
    token at = a.at;
    return node_value(built(P, n, &op), at);
}

/* Whether "**" follows the current token (a number after a minus: -2 ** 2 is -(2 ** 2)). */
static bool pow_follows(const parser *P) {
    const char *q = P->p;
    while (*q == ' ' || *q == '\t') q++;
    return q[0] == '*' && q[1] == '*';
}

/* unary = "-" unary | "~" unary | power */
static value parse_unary(parser *P) {
    token t = P->tok;
    if (t.kind == T_TILDE) { /* logical_not, as on a PyTorch bool tensor */
        lex_next(P);
        value r = node_value(RJ_NONE, t);
        if (!nest_in(P, &t)) return r;
        value x = parse_unary(P);
        P->nest--;
        r.node = built(P, rj_graph_unary(P->g, RJ_OP_LOGICAL_NOT, as_node(P, &x)), &t);
        return r;
    }
    if (t.kind == T_MINUS) {
        lex_next(P);
        /* a negative number literal stays a literal */
        if ((P->tok.kind == T_INT || P->tok.kind == T_FLOAT) && !pow_follows(P)) {
            token n = P->tok;
            lex_next(P);
            value r = node_value(RJ_NONE, t);
            r.node = n.kind == T_INT ? rj_graph_scalar_int(P->g, -n.ival) : rj_graph_scalar(P->g, -n.fval);
            built(P, r.node, &t);
            return r;
        }
        value r = node_value(RJ_NONE, t);
        if (!nest_in(P, &t)) return r;
        value x = parse_unary(P);
        P->nest--;
        const node *lit = x.is_string || x.is_none ? NULL : scalar_of(P, &x);
        if (lit && lit->weak != WEAK_BOOL) { /* -inf, -(2.5): literals */
            r.node = lit->weak == WEAK_INT ? rj_graph_scalar_int(P->g, -lit->ival) : rj_graph_scalar(P->g, -lit->fval);
            built(P, r.node, &t);
            return r;
        }
        r.node = built(P, rj_graph_unary(P->g, RJ_OP_NEG, as_node(P, &x)), &t);
        return r;
    }
    return parse_power(P);
}

/* One left-associative level of binary operators: operand { op operand }. */
static value parse_level(parser *P, value (*operand)(parser *), tok_kind k1, rj_op op1, tok_kind k2, rj_op op2) {
    value a = operand(P);
    while (!P->failed && (P->tok.kind == k1 || P->tok.kind == k2)) {
        token op = P->tok;
        lex_next(P);
        value b = operand(P);
        value f;
        if (!P->failed && (op.kind == T_PLUS || op.kind == T_MINUS) && fold_numbers(P, &op, &a, &b, &f)) {
            a = f;
            continue;
        }
        rj_node n = rj_graph_binary(P->g, op.kind == k1 ? op1 : op2, as_node(P, &a), as_node(P, &b));
        token at = a.at;
        a = node_value(built(P, n, &op), at);
    }
    return a;
}

/* term = unary { ("*" | "/" | "//" | "%" | "@") unary } (Python's precedence: all alike); // and %
 * of numbers only (fold_numbers) */
static value parse_term(parser *P) {
    value a = parse_unary(P);
    while (!P->failed && (P->tok.kind == T_STAR || P->tok.kind == T_SLASH || P->tok.kind == T_AT ||
                          P->tok.kind == T_FLOORDIV || P->tok.kind == T_PERCENT)) {
        token op = P->tok;
        lex_next(P);
        value b = parse_unary(P), f;
        if (P->failed) break;
        if (op.kind != T_AT && fold_numbers(P, &op, &a, &b, &f)) {
            a = f;
            continue;
        }
        if (op.kind == T_FLOORDIV || op.kind == T_PERCENT) {
            fail_at(P, &op, RJ_ERR_UNSUPPORTED, "'%s' of tensors (PyTorch's %s) is not supported in this version; of two "
                    "numbers it is Python's (x.shape[-1] // 2)", op.kind == T_FLOORDIV ? "//" : "%",
                    op.kind == T_FLOORDIV ? "floor_divide" : "remainder");
            break;
        }
        rj_node x = as_node(P, &a), y = as_node(P, &b);
        rj_node n = op.kind == T_AT ? rj_graph_matmul(P->g, x, y)
                                    : rj_graph_binary(P->g, op.kind == T_STAR ? RJ_OP_MUL : RJ_OP_DIV, x, y);
        token at = a.at;
        a = node_value(built(P, n, &op), at);
    }
    return a;
}

/* additive = term { ("+" | "-") term } */
static value parse_additive(parser *P) {
    return parse_level(P, parse_term, T_PLUS, RJ_OP_ADD, T_MINUS, RJ_OP_SUB);
}

/* and_expr = additive { "&" additive }   (Python's precedence: & binds tighter than |, both
 * looser than + and tighter than comparisons, so masks need parentheses as in PyTorch) */
static value parse_and(parser *P) {
    return parse_level(P, parse_additive, T_AMP, RJ_OP_LOGICAL_AND, T_AMP, RJ_OP_LOGICAL_AND);
}

/* or_expr = and_expr { "|" and_expr } */
static value parse_or(parser *P) {
    return parse_level(P, parse_and, T_PIPE, RJ_OP_LOGICAL_OR, T_PIPE, RJ_OP_LOGICAL_OR);
}

/* expr = or_expr [ ("<" | "<=" | ">" | ">=" | "==" | "!=") or_expr ] */
value parse_expr(parser *P) {
    value a = parse_or(P);
    static const struct {
        tok_kind k;
        rj_op op;
    } cmp[] = {{T_LT, RJ_OP_LT}, {T_LE, RJ_OP_LE}, {T_GT, RJ_OP_GT}, {T_GE, RJ_OP_GE},
               {T_EQ, RJ_OP_EQ}, {T_NE, RJ_OP_NE}};
    for (size_t i = 0; !P->failed && i < sizeof cmp / sizeof cmp[0]; i++) {
        if (P->tok.kind != cmp[i].k) continue;
        token op = P->tok;
        lex_next(P);
        value b = parse_or(P);
        token at = a.at;
        a = node_value(built(P, rj_graph_binary(P->g, cmp[i].op, as_node(P, &a), as_node(P, &b)), &op), at);
        break;
    }
    return a;
}
