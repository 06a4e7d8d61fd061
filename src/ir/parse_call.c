/*
 * parse_call.c — the functions a call in the text format can name, as one table.
 *
 * Every op of the op table (RJ_OP_TABLE) is callable by its name there, which this file never
 * repeats: a row matches an op, or every op of a kind, and gives the parameters in PyTorch's
 * names and order and the handler that builds the node. Ops whose arguments differ from the
 * rest of their kind (pow's exponent, gelu's approximate) have rows of their own, checked
 * before the kind's. The text format's own names are rows too: PyTorch's spellings that are
 * aliases of ops (sign, view, amax, amin) and functions built of other ops (linear, squeeze,
 * unsqueeze, t, size, split and chunk, whose value is several narrows, and PyTorch's clamp,
 * leaky_relu, logsumexp and normalize, whose errors name them rather than their parts).
 * Arguments are bound to the row's parameters as Python binds them, so every function gets the
 * same messages for a missing, unknown or repeated argument, and an unknown function's message
 * lists the rows.
 *
 * Attributes are checked here, where the text still says what the user wrote: an integer
 * argument (a dim, a length, a size) must be an integer literal in range, since a float or a
 * wrapped value would silently mean another dim, and a negative constant would be taken for a
 * symbol's id (rj_dim).
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

/* ---- attributes ----------------------------------------------------------------------------- */

/* The literal value of a scalar node, for attributes given as numbers. */
static bool literal(parser *P, const value *v, double *out) {
    const node *n = v->node >= 0 ? graph_node(P->g, v->node) : NULL;
    if (!n || n->op != RJ_OP_SCALAR) {
        fail_at(P, &v->at, RJ_ERR_PARSE, "expected a number");
        return false;
    }
    *out = n->weak == WEAK_FLOAT ? n->fval : (double)n->ival;
    return true;
}

/* An integer literal that a double cannot hold (|v| > 2^53, not a multiple of its spacing):
 * attributes taken as doubles (pad's value) would round it. */
static bool inexact_int(parser *P, const value *v) {
    const node *n = v->node >= 0 ? graph_node(P->g, v->node) : NULL;
    if (!n || n->op != RJ_OP_SCALAR || n->weak != WEAK_INT) return false;
    double d = (double)n->ival;
    return d >= 9223372036854775808.0 || (int64_t)d != n->ival;
}

static bool bool_arg(parser *P, const char *fname, const char *arg, const value *v, bool *out) {
    const node *n = scalar_of(P, v);
    if (!n || n->weak != WEAK_BOOL) {
        fail_at(P, &v->at, RJ_ERR_PARSE, "%s: %s must be True or False", fname, arg);
        return false;
    }
    *out = n->ival != 0;
    return true;
}

static bool str_is(const value *v, const char *s) {
    return v->is_string && v->slen == (int)strlen(s) && !strncmp(v->str, s, (size_t)v->slen);
}

/* normalized_shape: a dim, or a list of dims, matching the input's trailing dims. */
static bool norm_shape(parser *P, const char *fname, const value *v, rj_node x, int *ndims) {
    rj_dim want[RJ_MAX_RANK];
    int n = 0;
    if (v->is_list || v->is_tuple) { /* [D], (64,), (D,) */
        n = v->ndims;
        memcpy(want, v->dims, sizeof(rj_dim) * (size_t)n);
        for (int i = 0; v->is_tuple && i < n; i++)
            if (!(v->tuple_syms >> i & 1) && want[i] < 0) { /* a negative size would read as a symbol's id */
                fail_at(P, &v->at, RJ_ERR_PARSE, "%s: normalized_shape holds a negative size", fname);
                return false;
            }
    } else {
        const node *s = scalar_of(P, v);
        if (!s || s->weak != WEAK_INT) {
            fail_at(P, &v->at, RJ_ERR_PARSE, "normalized_shape must be a size or a list of sizes");
            return false;
        }
        /* a constant size: a negative number would read as a symbol's id */
        if (s->ival < 0) {
            fail_at(P, &v->at, RJ_ERR_PARSE, "%s: normalized_shape=%lld is negative", fname,
                    (long long)s->ival);
            return false;
        }
        want[n++] = s->ival;
    }
    rj_dim dims[RJ_MAX_RANK];
    int r = rj_node_shape(P->g, x, dims);
    if (n < 1 || n > r) {
        fail_at(P, &v->at, RJ_ERR_SHAPE, "normalized_shape has %d dims but the input has rank %d", n, r);
        return false;
    }
    for (int i = 0; i < n; i++)
        if (!dim_equal(P->g, want[i], dims[r - n + i])) {
            fail_at(P, &v->at, RJ_ERR_SHAPE, "normalized_shape does not match the input's last %d dims", n);
            return false;
        }
    *ndims = n;
    return true;
}

/* Binds arguments to parameter names (as Python does): names[i] receives positional i or
 * the keyword names[i]; a parameter may be optional. Returns false after reporting. */
static bool bind_args(parser *P, const token *fn, const char *fname, args *a,
                      const char *const *names, int nparams, int nrequired, value **out) {
    for (int i = 0; i < nparams; i++) out[i] = NULL;
    if (a->npos > nparams) {
        fail_at(P, &a->pos[nparams].at, RJ_ERR_PARSE, "%s takes at most %d arguments", fname, nparams);
        return false;
    }
    for (int i = 0; i < a->npos; i++) out[i] = &a->pos[i];
    for (int k = 0; k < a->nkw; k++) {
        int i = 0;
        while (i < nparams && strcmp(names[i], a->key[k])) i++;
        if (i == nparams) {
            suggest s = {.word = a->key[k]};
            char list[160] = "", hint[96];
            for (int j = 0; j < nparams; j++) {
                suggest_try(&s, names[j]);
                size_t l = strlen(list);
                snprintf(list + l, sizeof list - l, "%s%s", j ? ", " : "", names[j]);
            }
            suggestion(&s, hint, sizeof hint);
            fail_at(P, &a->kw[k].at, RJ_ERR_PARSE, "%s has no argument '%s'%s; it takes %s", fname, a->key[k], hint,
                    list);
            return false;
        }
        if (out[i]) {
            fail_at(P, &a->kw[k].at, RJ_ERR_PARSE, "%s: argument '%s' given twice", fname, names[i]);
            return false;
        }
        out[i] = &a->kw[k];
    }
    for (int i = 0; i < nrequired; i++)
        if (!out[i]) {
            fail_at(P, fn, RJ_ERR_PARSE, "%s: missing argument '%s'", fname, names[i]);
            return false;
        }
    return true;
}

/* ---- shapes: x.T, x.size(k), reductions over several dims ------------------------------------ */

/* PyTorch's x.t() and x.T (2-D: the transpose; fewer dims: x itself) and x.mT (the last two
 * dims of any tensor). PyTorch's .T of more dims reverses them all, which ragjit's views cannot
 * do; that is an error that names what to write. */
value transpose_last(parser *P, const token *at, const char *what, const value *self, bool batched) {
    value r = node_value(RJ_NONE, self->at);
    rj_node x = as_node(P, self);
    if (P->failed) return r;
    rj_dim dims[RJ_MAX_RANK];
    int rank = rj_node_shape(P->g, x, dims);
    if (batched ? rank < 2 : rank > 2) {
        fail_at(P, at, RJ_ERR_SHAPE, batched ? "%s: the tensor has %d dim(s); .mT transposes the last two of at least 2"
                : "%s: the tensor has %d dims; PyTorch's .T and t() are the transpose of a 2-D tensor (.T of more "
                  "dims reverses them all): write .mT or transpose(-2, -1) for the last two", what, rank);
        return r;
    }
    r.node = rank < 2 ? x : built(P, rj_graph_transpose(P->g, x, rank - 2, rank - 1), at);
    return r;
}

/* x.size(k) and x.shape[k]: a constant dim is an integer literal, usable in arithmetic; a
 * named one is that size by name, as if the user had written it (D, j1). */
value size_value(parser *P, const token *at, const char *what, const value *self, const value *dimv) {
    value r = node_value(RJ_NONE, self->at);
    int64_t k;
    rj_node x = as_node(P, self);
    if (P->failed || !int_arg(P, what, "dim", dimv, INT_MIN, INT_MAX, &k)) return r;
    rj_dim dims[RJ_MAX_RANK];
    int rank = rj_node_shape(P->g, x, dims);
    if (k < -rank || k >= rank) {
        fail_at(P, &dimv->at, RJ_ERR_SHAPE, "%s: dim %lld is out of range for a tensor of %d dims", what,
                (long long)k, rank);
        return r;
    }
    rj_dim d = dims[k < 0 ? k + rank : k];
    if (d >= 0) {
        r.node = built(P, rj_graph_scalar_int(P->g, d), at);
    } else {
        r.is_list = r.is_size = true;
        r.ndims = 1;
        r.dims[0] = d;
    }
    return r;
}

/* n, reporting at t if the builder failed, the message's op named `as` where it is not NULL:
 * the functions built of other ops (clamp, logsumexp...) name themselves, not their parts. */
static rj_node built_as(parser *P, const token *t, const char *as, rj_node n) {
    if (n != RJ_NONE || P->failed || !as) return built(P, n, t);
    const char *m = ctx_last_error(P->ctx), *colon = strstr(m, ": ");
    size_t k = colon ? (size_t)(colon - m) : 0;
    for (size_t i = 0; i < k; i++)
        if (!is_ident_char(m[i])) k = 0;
    char msg[768];
    snprintf(msg, sizeof msg, "%s: %s", as, k ? colon + 2 : m);
    fail_at(P, t, rj_graph_status(P->g) ? rj_graph_status(P->g) : ctx_last_status(P->ctx), "%s", msg);
    return RJ_NONE;
}

/* The dims `t` names for a tensor of `rank` dims, normalised and in decreasing order: a tuple
 * (1, 2), or (any) an integer literal. Returns their number, 0 after reporting. */
static int dim_list(parser *P, const char *name, const value *t, int rank, int dims[RJ_MAX_RANK]) {
    if (!t->is_tuple) {
        int64_t d;
        if (!int_arg(P, name, "dim", t, INT_MIN, INT_MAX, &d)) return 0;
        if (d < -rank || d >= rank) {
            fail_at(P, &t->at, RJ_ERR_SHAPE, "%s: dim %lld is out of range for a tensor of %d dims", name,
                    (long long)d, rank);
            return 0;
        }
        dims[0] = (int)(d < 0 ? d + rank : d);
        return 1;
    }
    if (t->ndims == 0) {
        fail_at(P, &t->at, RJ_ERR_PARSE, "%s: dim=() names no dim (name the dims to reduce)", name);
        return 0;
    }
    int n = 0;
    for (int i = 0; i < t->ndims; i++) {
        int64_t d = t->dims[i];
        if (t->tuple_syms >> i & 1) {
            fail_at(P, &t->at, RJ_ERR_PARSE, "%s: the dims must be integers", name);
            return 0;
        }
        if (d < -rank || d >= rank) {
            fail_at(P, &t->at, RJ_ERR_SHAPE, "%s: dim %lld is out of range for a tensor of %d dims", name,
                    (long long)d, rank);
            return 0;
        }
        int k = (int)(d < 0 ? d + rank : d), at = n;
        while (at > 0 && dims[at - 1] < k) at--; /* kept in decreasing order */
        if (at > 0 && dims[at - 1] == k) {
            fail_at(P, &t->at, RJ_ERR_SHAPE, "%s: dim %d appears multiple times in the list of dims", name, k);
            return 0;
        }
        memmove(dims + at + 1, dims + at, sizeof(int) * (size_t)(n - at));
        dims[at] = k;
        n++;
    }
    return n;
}

/* x reduced by op over dims[0..n) (decreasing: with keepdim=False the dims still to reduce
 * keep their numbers); RJ_NONE after reporting at fn (as `as`: built_as). */
static rj_node reduce_over(parser *P, const token *fn, const char *as, rj_op op, rj_node x, const int *dims, int n,
                           bool keep) {
    for (int i = 0; i < n && !P->failed; i++) x = built_as(P, fn, as, rj_graph_reduce(P->g, op, x, dims[i], keep));
    return P->failed ? RJ_NONE : x;
}

/* sum(x, dim=(1, 2), keepdim): PyTorch's reduction over several dims, as one reduction per
 * dim from the last to the first. Nesting is exact for sum, max, min and prod, and for mean
 * too: every row of the outer dim holds the same number of elements along the inner ones.
 * v: input, dim, keepdim. */
static value reduce_dims(parser *P, const token *fn, const char *name, rj_op op, value **v) {
    value r = node_value(RJ_NONE, *fn);
    bool keep = false;
    if (v[2] && !bool_arg(P, name, "keepdim", v[2], &keep)) return r;
    rj_node x = as_node(P, v[0]);
    if (P->failed) return r;
    rj_dim shape[RJ_MAX_RANK];
    int dims[RJ_MAX_RANK], n = dim_list(P, name, v[1], rj_node_shape(P->g, x, shape), dims);
    if (n) r.node = reduce_over(P, fn, NULL, op, x, dims, n, keep);
    return r;
}

/* ---- handlers: the arguments bound (v, in the row's order) to a node ------------------------- */

static value build_unary(parser *P, const call_site *c, value **v) {
    return made(P, c, rj_graph_unary(P->g, c->op, as_node(P, v[0])));
}

/* gelu(input, approximate="none"): "tanh" is the op gelu_tanh */
static value build_gelu(parser *P, const call_site *c, value **v) {
    rj_op op = c->op;
    if (v[1] && !str_is(v[1], "tanh") && !str_is(v[1], "none")) {
        fail_at(P, &v[1]->at, RJ_ERR_PARSE, "gelu: approximate must be \"none\" or \"tanh\"");
        return nothing(c);
    }
    if (v[1] && str_is(v[1], "tanh")) op = RJ_OP_GELU_TANH;
    return made(P, c, rj_graph_unary(P->g, op, as_node(P, v[0])));
}

static value build_binary(parser *P, const call_site *c, value **v) {
    return made(P, c, rj_graph_binary(P->g, c->op, as_node(P, v[0]), as_node(P, v[1])));
}

static value build_where(parser *P, const call_site *c, value **v) {
    return made(P, c, rj_graph_where(P->g, as_node(P, v[0]), as_node(P, v[1]), as_node(P, v[2])));
}

static value build_masked_fill(parser *P, const call_site *c, value **v) {
    double val;
    if (!literal(P, v[2], &val)) return nothing(c);
    if (inexact_int(P, v[2])) /* as where(mask, value, x), the literal kept exact */
        return made(P, c, rj_graph_where(P->g, as_node(P, v[1]), as_node(P, v[2]), as_node(P, v[0])));
    return made(P, c, rj_graph_masked_fill(P->g, as_node(P, v[0]), as_node(P, v[1]), val));
}

static value build_cast(parser *P, const call_site *c, value **v) {
    rj_dtype dt;
    if (!dtype_value(v[1], &dt)) {
        fail_at(P, &v[1]->at, RJ_ERR_PARSE, "cast: dtype must be one of \"f32\", \"f64\", "
                "\"f16\", \"bf16\", \"i32\", \"i64\", \"bool\"");
        return nothing(c);
    }
    return made(P, c, rj_graph_cast(P->g, as_node(P, v[0]), dt));
}

/* The dtype= of a reduction or a softmax (PyTorch's: the input is cast to it first, and the
 * result is of it); false after reporting. *dt is RJ_DTYPE_COUNT when not given. */
static bool op_dtype(parser *P, const call_site *c, const value *v, rj_dtype *dt) {
    *dt = (rj_dtype)RJ_DTYPE_COUNT;
    if (!v || is_none(v)) return true;
    if (c->op == RJ_OP_MAX || c->op == RJ_OP_MIN) {
        fail_at(P, &v->at, RJ_ERR_PARSE, "%s has no argument 'dtype' (PyTorch's amax and amin have none)", c->name);
        return false;
    }
    if (dtype_value(v, dt)) return true;
    fail_at(P, &v->at, RJ_ERR_PARSE, "%s: dtype must be a dtype (torch.float32, \"f32\", ...)", c->name);
    return false;
}

/* x cast to dt (RJ_DTYPE_COUNT: x itself). */
static rj_node cast_to(parser *P, const call_site *c, rj_node x, rj_dtype dt) {
    if ((int)dt == RJ_DTYPE_COUNT || P->failed || rj_node_dtype(P->g, x) == dt) return x;
    return built(P, rj_graph_cast(P->g, x, dt), c->fn);
}

/* sum mean max min prod (input, dim, keepdim=False, dtype=None) */
static value build_reduce(parser *P, const call_site *c, value **v) {
    int64_t dim;
    bool keep = false;
    rj_dtype dt;
    if (!op_dtype(P, c, v[3], &dt)) return nothing(c);
    value x = node_value(cast_to(P, c, as_node(P, v[0]), dt), v[0]->at);
    if (P->failed) return nothing(c);
    value r;
    if (v[1]->is_tuple) {
        value *vs[3] = {&x, v[1], v[2]};
        r = reduce_dims(P, c->fn, c->name, c->op, vs);
    } else {
        if (!int_arg(P, c->name, "dim", v[1], INT_MIN, INT_MAX, &dim) ||
            (v[2] && !bool_arg(P, c->name, "keepdim", v[2], &keep)))
            return nothing(c);
        r = made(P, c, rj_graph_reduce(P->g, c->op, x.node, (int)dim, keep));
    }
    if (!P->failed) r.node = cast_to(P, c, r.node, dt); /* sum(i32, dtype=torch.int32) stays i32 */
    return r;
}

/* softmax log_softmax (input, dim, dtype=None) */
static value build_softmax(parser *P, const call_site *c, value **v) {
    int64_t dim;
    rj_dtype dt;
    if (!int_arg(P, c->name, "dim", v[1], INT_MIN, INT_MAX, &dim) || !op_dtype(P, c, v[2], &dt)) return nothing(c);
    rj_node x = cast_to(P, c, as_node(P, v[0]), dt);
    if (P->failed) return nothing(c);
    return made(P, c, c->op == RJ_OP_SOFTMAX ? rj_graph_softmax(P->g, x, (int)dim) : rj_graph_log_softmax(P->g, x, (int)dim));
}

/* layer_norm(input, normalized_shape, weight, bias, eps), rms_norm(..., weight, eps) */
static value build_norm(parser *P, const call_site *c, value **v) {
    bool layer = c->op == RJ_OP_LAYER_NORM;
    rj_node x = as_node(P, v[0]), w = RJ_NONE, b = RJ_NONE;
    int nd;
    double eps = -1;
    if (P->failed || !norm_shape(P, c->name, v[1], x, &nd)) return nothing(c);
    if (v[2] && !is_none(v[2])) w = as_node(P, v[2]);
    if (layer && v[3] && !is_none(v[3])) b = as_node(P, v[3]);
    value *ev = v[layer ? 4 : 3];
    if (ev && !is_none(ev) && !literal(P, ev, &eps)) return nothing(c);
    if (ev && !is_none(ev) && eps < 0) {
        fail_at(P, &ev->at, RJ_ERR_PARSE, "%s: eps must not be negative", c->name);
        return nothing(c);
    }
    return made(P, c, layer ? rj_graph_layer_norm(P->g, x, nd, w, b, eps) : rj_graph_rms_norm(P->g, x, nd, w, eps));
}

static value build_pad(parser *P, const call_site *c, value **v) {
    double val = 0;
    rj_dim len = RJ_DIM_NONE;
    if (v[1] && (v[1]->is_tuple || (v[1]->is_list && !v[1]->is_size))) { /* F.pad(x, (0, 1)) */
        fail_at(P, &v[1]->at, RJ_ERR_UNSUPPORTED, "pad: ragjit's pad(input, value=0.0, len=None) pads the ragged "
                "dim to a length; PyTorch's F.pad(input, (left, right, ...)) of dense dims is not supported: cat "
                "the tensor with a full(...) of the padding");
        return nothing(c);
    }
    if (v[1] && !literal(P, v[1], &val)) return nothing(c);
    if (v[1] && inexact_int(P, v[1])) {
        fail_at(P, &v[1]->at, RJ_ERR_ARG, "pad: the value is an integer beyond 2^53, which pad "
                "would round (it takes a double); pad with 0 and write the value with where()");
        return nothing(c);
    }
    if (v[2] && !is_none(v[2])) {
        int64_t n;
        if (v[2]->is_list && v[2]->ndims == 1) len = v[2]->dims[0];
        else if (!int_arg(P, c->name, "len", v[2], 0, INT64_MAX, &n)) return nothing(c);
        else len = n; /* a constant: never negative, which would name a symbol */
    }
    return made(P, c, rj_graph_pad(P->g, as_node(P, v[0]), val, len));
}

static value build_unpad(parser *P, const call_site *c, value **v) {
    bool blocks = v[1]->is_list && v[1]->ndims == 2 && v[1]->dims[0] == v[1]->dims[1];
    if (!v[1]->is_list || (v[1]->ndims != 1 && !blocks)) {
        fail_at(P, &v[1]->at, RJ_ERR_PARSE, "unpad: the second argument must be a ragged symbol (j1), or [j1, j1] "
                "for dims 1 and 2");
        return nothing(c);
    }
    return made(P, c, blocks ? rj_graph_unpad_blocks(P->g, as_node(P, v[0]), v[1]->dims[0])
                             : rj_graph_unpad(P->g, as_node(P, v[0]), v[1]->dims[0]));
}

/* embedding(table, idx) as the C API has it; F.embedding(input=idx, weight=table) by keyword,
 * or its positional order (indices first) when only the first is integer */
static value build_embedding(parser *P, const call_site *c, value **v) {
    rj_node t = as_node(P, v[0]), i = as_node(P, v[1]);
    if (P->failed) return nothing(c);
    if (c->a->npos == 2 && dtype_is_int(rj_node_dtype(P->g, t)) && !dtype_is_int(rj_node_dtype(P->g, i))) {
        rj_node k = t;
        t = i, i = k;
    }
    return made(P, c, rj_graph_embedding(P->g, t, i));
}

/* gather(input, dim, index), index_select(input, dim, index), take_along_dim(input, indices, dim) */
static value build_index(parser *P, const call_site *c, value **v) {
    bool take = c->op == RJ_OP_TAKE_ALONG_DIM;
    int64_t dim;
    if (!int_arg(P, c->name, "dim", v[take ? 2 : 1], INT_MIN, INT_MAX, &dim)) return nothing(c);
    rj_node x = as_node(P, v[0]), i = as_node(P, v[take ? 1 : 2]);
    if (P->failed) return nothing(c);
    return made(P, c, c->op == RJ_OP_GATHER ? rj_graph_gather(P->g, x, (int)dim, i)
                      : take                ? rj_graph_take_along_dim(P->g, x, i, (int)dim)
                                            : rj_graph_index_select(P->g, x, (int)dim, i));
}

static value build_positions(parser *P, const call_site *c, value **v) {
    if (!v[0]->is_list || v[0]->ndims != 1) {
        fail_at(P, &v[0]->at, RJ_ERR_PARSE, "positions: the argument must be a ragged symbol (positions(j1))");
        return nothing(c);
    }
    return made(P, c, rj_graph_positions(P->g, v[0]->dims[0]));
}

static value build_reshape(parser *P, const call_site *c, value **v) {
    if (v[1]->is_tuple) { /* x.view(B, j1, 4, 16), x.reshape((B, -1)): the sizes one by one */
        value t = *v[1];
        t.is_tuple = false, t.is_list = true;
        for (int i = 0; i < t.ndims; i++) {
            if (v[1]->tuple_syms >> i & 1) continue;
            if (t.dims[i] < -1) {
                fail_at(P, &v[1]->at, RJ_ERR_PARSE, "%s: size %lld is negative (-1 is the inferred size)", c->name,
                        (long long)t.dims[i]);
                return nothing(c);
            }
            if (t.dims[i] == -1) t.dims[i] = RJ_DIM_NONE;
        }
        return made(P, c, rj_graph_reshape(P->g, as_node(P, v[0]), t.ndims, t.dims));
    }
    if (!v[1]->is_list) {
        fail_at(P, &v[1]->at, RJ_ERR_PARSE, "%s: shape must be a list of sizes ([B, j1, 8, 8]; -1 for one "
                "inferred size)", c->name);
        return nothing(c);
    }
    return made(P, c, rj_graph_reshape(P->g, as_node(P, v[0]), v[1]->ndims, v[1]->dims));
}

static value build_transpose(parser *P, const call_site *c, value **v) {
    int64_t d0, d1;
    if (!int_arg(P, c->name, "dim0", v[1], INT_MIN, INT_MAX, &d0) ||
        !int_arg(P, c->name, "dim1", v[2], INT_MIN, INT_MAX, &d1))
        return nothing(c);
    return made(P, c, rj_graph_transpose(P->g, as_node(P, v[0]), (int)d0, (int)d1));
}

static value build_matmul(parser *P, const call_site *c, value **v) {
    return made(P, c, rj_graph_matmul(P->g, as_node(P, v[0]), as_node(P, v[1])));
}

/* attention(scores, value, safe=False): softmax(scores, dim=-1) @ value as one op. */
static value build_attention(parser *P, const call_site *c, value **v) {
    bool safe = false;
    if (v[2] && !bool_arg(P, c->name, "safe", v[2], &safe)) return nothing(c);
    return made(P, c, rj_graph_attention(P->g, as_node(P, v[0]), as_node(P, v[1]), safe));
}

/* scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
 * is_causal=False, scale=None, enable_gqa=False), PyTorch's; inference only (dropout_p 0). */
static value build_sdpa(parser *P, const call_site *c, value **v) {
    bool causal = false, gqa = false;
    double scale = NAN, drop = 0;
    if ((v[4] && !literal(P, v[4], &drop)) || (v[5] && !bool_arg(P, c->name, "is_causal", v[5], &causal)) ||
        (v[6] && !is_none(v[6]) && !literal(P, v[6], &scale)) ||
        (v[7] && !bool_arg(P, c->name, "enable_gqa", v[7], &gqa)))
        return nothing(c);
    if (drop != 0) {
        fail_at(P, &v[4]->at, RJ_ERR_ARG, "%s: dropout_p must be 0.0 (ragjit runs inference)", c->name);
        return nothing(c);
    }
    rj_node m = v[3] && !is_none(v[3]) ? as_node(P, v[3]) : RJ_NONE;
    rj_node q = as_node(P, v[0]), k = as_node(P, v[1]), val = as_node(P, v[2]);
    if (P->failed) return nothing(c);
    return made(P, c, rj_graph_sdpa(P->g, q, k, val, m, causal, scale, gqa));
}

/* unsqueeze(x, dim), squeeze(x, dim=None): views made by rj_graph_reshape. */
static value build_squeeze(parser *P, const call_site *c, value **v) {
    int64_t dim = 0;
    if (v[1] && !is_none(v[1]) && !int_arg(P, c->name, "dim", v[1], INT_MIN, INT_MAX, &dim)) return nothing(c);
    rj_node x = as_node(P, v[0]);
    if (P->failed) return nothing(c);
    if (c->name[0] == 'u') return made(P, c, rj_graph_unsqueeze(P->g, x, (int)dim));
    if (v[1] && !is_none(v[1])) return made(P, c, rj_graph_squeeze(P->g, x, (int)dim));
    /* every dim of size 1 */
    rj_dim dims[RJ_MAX_RANK], keep[RJ_MAX_RANK];
    int rank = rj_node_shape(P->g, x, dims), n = 0;
    for (int k = 0; k < rank; k++)
        if (dims[k] != 1) keep[n++] = dims[k];
    return n == rank ? node_value(x, *c->fn) : made(P, c, rj_graph_reshape(P->g, x, n, keep));
}

/* linear(input, weight, bias=None), PyTorch's F.linear: weight [N, K]. */
static value build_linear(parser *P, const call_site *c, value **v) {
    rj_node x = as_node(P, v[0]), w = as_node(P, v[1]), b = v[2] && !is_none(v[2]) ? as_node(P, v[2]) : RJ_NONE;
    if (P->failed) return nothing(c);
    return made(P, c, rj_graph_linear(P->g, x, w, b));
}

static value build_t(parser *P, const call_site *c, value **v) {
    return transpose_last(P, c->fn, "t", v[0], false);
}

static value build_size(parser *P, const call_site *c, value **v) {
    if (!v[1] || is_none(v[1])) {
        fail_at(P, c->fn, RJ_ERR_PARSE, "size: name one dim, x.size(k) or x.shape[k] (ragjit has no tuples of sizes)");
        return nothing(c);
    }
    return size_value(P, c->fn, "size", v[0], v[1]);
}

/* ---- PyTorch's functions built of other ops ---------------------------------------------- */

/* clamp(input, min=None, max=None) (and clip), clamp_min(input, min), clamp_max(input, max):
 * maximum with min, then minimum with max, which is PyTorch's clamp: NaN in the input or in a
 * bound gives NaN, min > max gives max, and the dtype is the promotion of the input and the
 * bounds (numbers or tensors that broadcast). */
static value build_clamp(parser *P, const call_site *c, value **v) {
    bool only_min = !strcmp(c->name, "clamp_min"), only_max = !strcmp(c->name, "clamp_max");
    const value *lo = only_max ? NULL : v[1], *hi = only_max ? v[1] : only_min ? NULL : v[2];
    if (is_none(lo)) lo = NULL;
    if (is_none(hi)) hi = NULL;
    if (!lo && !hi) {
        fail_at(P, c->fn, RJ_ERR_ARG, "%s: at least one of min and max must be given", c->name);
        return nothing(c);
    }
    rj_node x = as_node(P, v[0]);
    if (lo && !P->failed) x = built_as(P, c->fn, c->name, rj_graph_binary(P->g, RJ_OP_MAXIMUM, x, as_node(P, lo)));
    if (hi && !P->failed) x = built_as(P, c->fn, c->name, rj_graph_binary(P->g, RJ_OP_MINIMUM, x, as_node(P, hi)));
    return P->failed ? nothing(c) : node_value(x, *c->fn);
}

/* x as a float tensor to compute in: f32 for integers and bool (PyTorch's default float) and
 * for f16 and bf16 (ragjit's arithmetic for them, rounded once at the end: *back). */
static rj_node float_work(parser *P, const call_site *c, rj_node x, rj_dtype *back) {
    rj_dtype t = rj_node_dtype(P->g, x);
    *back = t == RJ_F16 || t == RJ_BF16 || t == RJ_F64 ? t : RJ_F32;
    return t == RJ_F32 || t == RJ_F64 ? x : built_as(P, c->fn, c->name, rj_graph_cast(P->g, x, RJ_F32));
}

/* r, the result of a function built of ops, rounded to `back` where float_work set it (a dtype
 * other than r's; RJ_DTYPE_COUNT: r as it is); nothing after reporting. */
static value rounded_back(parser *P, const call_site *c, rj_node r, rj_dtype back) {
    r = built_as(P, c->fn, c->name, r);
    if (!P->failed && (int)back != RJ_DTYPE_COUNT && back != rj_node_dtype(P->g, r))
        r = built_as(P, c->fn, c->name, rj_graph_cast(P->g, r, back));
    return P->failed ? nothing(c) : node_value(r, *c->fn);
}

/* v as a float tensor operand, as PyTorch's vector norms and leaky_relu require; RJ_NONE after
 * reporting. */
static rj_node float_input(parser *P, const call_site *c, const value *v) {
    rj_node x = as_node(P, v);
    if (P->failed) return RJ_NONE;
    if (!dtype_is_float(rj_node_dtype(P->g, x))) {
        fail_at(P, c->fn, RJ_ERR_DTYPE, "%s: the input must be a float tensor (it is %s)", c->name,
                rj_dtype_name(rj_node_dtype(P->g, x)));
        return RJ_NONE;
    }
    return x;
}

/* logsumexp(input, dim, keepdim=False): PyTorch's, m + log(sum(exp(x - m), dim)) with m the
 * maximum over dim taken as 0 where it is infinite, so that a line of -inf (or an empty item)
 * gives -inf, one with +inf gives inf, and NaN gives NaN. Integer inputs give f32. */
static value build_logsumexp(parser *P, const call_site *c, value **v) {
    bool keep = false;
    if (v[2] && !bool_arg(P, c->name, "keepdim", v[2], &keep)) return nothing(c);
    rj_node x = as_node(P, v[0]);
    if (P->failed) return nothing(c);
    rj_dim shape[RJ_MAX_RANK];
    int dims[RJ_MAX_RANK], n = dim_list(P, c->name, v[1], rj_node_shape(P->g, x, shape), dims);
    rj_dtype back;
    if (!n || (x = float_work(P, c, x, &back)) == RJ_NONE) return nothing(c);
    rj_graph *g = P->g;
    rj_node m = reduce_over(P, c->fn, c->name, RJ_OP_MAX, x, dims, n, true);
    if (m == RJ_NONE) return nothing(c);
    rj_node inf = rj_graph_binary(g, RJ_OP_EQ, rj_graph_unary(g, RJ_OP_ABS, m), rj_graph_scalar(g, INFINITY));
    m = built_as(P, c->fn, c->name, rj_graph_where(g, inf, rj_graph_scalar(g, 0.0), m));
    rj_node e = P->failed ? RJ_NONE : built_as(P, c->fn, c->name, rj_graph_unary(g, RJ_OP_EXP, rj_graph_binary(g, RJ_OP_SUB, x, m)));
    rj_node s = P->failed ? RJ_NONE : reduce_over(P, c->fn, c->name, RJ_OP_SUM, e, dims, n, keep);
    for (int i = 0; i < n && !keep && !P->failed; i++) m = built_as(P, c->fn, c->name, rj_graph_squeeze(g, m, dims[i]));
    if (P->failed) return nothing(c);
    return rounded_back(P, c, rj_graph_binary(g, RJ_OP_ADD, rj_graph_unary(g, RJ_OP_LOG, s), m), back);
}

/* normalize(input, p=2.0, dim=1, eps=1e-12): PyTorch's F.normalize, x / max(||x||_p, eps)
 * over dim (an integer or a tuple): p = 2 is sqrt(sum(x * x)), 1 sum(|x|), inf max(|x|), any
 * other positive p sum(|x| ** p) ** (1 / p). The input must be a float tensor, as PyTorch's
 * vector norm requires. */
static value build_normalize(parser *P, const call_site *c, value **v) {
    double p = 2, eps = 1e-12;
    if ((v[1] && !literal(P, v[1], &p)) || (v[3] && !literal(P, v[3], &eps))) return nothing(c);
    if (!(p > 0)) {
        fail_at(P, &v[1]->at, RJ_ERR_ARG, "%s: p must be positive (or inf)", c->name);
        return nothing(c);
    }
    rj_node x = float_input(P, c, v[0]);
    if (x == RJ_NONE) return nothing(c);
    rj_graph *g = P->g;
    rj_dim shape[RJ_MAX_RANK];
    int dims[RJ_MAX_RANK], rank = rj_node_shape(g, x, shape);
    int n = v[2] ? dim_list(P, c->name, v[2], rank, dims) : rank > 1 ? (dims[0] = 1, 1) : 0;
    if (!n) {
        if (!P->failed) fail_at(P, c->fn, RJ_ERR_SHAPE, "%s: dim 1 is out of range for a tensor of %d dims", c->name, rank);
        return nothing(c);
    }
    rj_dtype back;
    if ((x = float_work(P, c, x, &back)) == RJ_NONE) return nothing(c);
    rj_node a = p == 2 ? rj_graph_binary(g, RJ_OP_MUL, x, x) : rj_graph_unary(g, RJ_OP_ABS, x);
    if (p != 1 && p != 2 && !isinf(p)) a = rj_graph_binary(g, RJ_OP_POW, a, rj_graph_scalar(g, p));
    rj_node norm = reduce_over(P, c->fn, c->name, isinf(p) ? RJ_OP_MAX : RJ_OP_SUM, built_as(P, c->fn, c->name, a), dims, n, true);
    if (norm == RJ_NONE) return nothing(c);
    if (p == 2) norm = rj_graph_unary(g, RJ_OP_SQRT, norm);
    else if (p != 1 && !isinf(p)) norm = rj_graph_binary(g, RJ_OP_POW, norm, rj_graph_scalar(g, 1 / p));
    return rounded_back(P, c, rj_graph_binary(g, RJ_OP_DIV, x, rj_graph_binary(g, RJ_OP_MAXIMUM, norm, rj_graph_scalar(g, eps))),
                        back);
}

/* leaky_relu(input, negative_slope=0.01): x where x > 0, else x * negative_slope (PyTorch's;
 * a float input). */
static value build_leaky_relu(parser *P, const call_site *c, value **v) {
    double slope = 0.01;
    if (v[1] && !literal(P, v[1], &slope)) return nothing(c);
    rj_node x = float_input(P, c, v[0]);
    if (x == RJ_NONE) return nothing(c);
    rj_graph *g = P->g;
    rj_node pos = rj_graph_binary(g, RJ_OP_GT, x, rj_graph_scalar(g, 0.0));
    rj_node r = built_as(P, c->fn, c->name, rj_graph_where(g, pos, x, rj_graph_binary(g, RJ_OP_MUL, x, rj_graph_scalar(g, slope))));
    return node_value(r, *c->fn);
}

/* square, reciprocal, relu6, hardtanh(input, min_val=-1.0, max_val=1.0), hardsigmoid,
 * hardswish, softsign: PyTorch's, in the order of its CPU kernels' arithmetic:
 *   square x * x            reciprocal 1 / x (an integer input gives f32)
 *   relu6 min(max(x, 0), 6)   hardtanh min(max(x, min_val), max_val)
 *   hardsigmoid min(max(x + 3, 0), 6) / 6     hardswish x * min(max(x + 3, 0), 6) / 6
 *   softsign x / (1 + |x|)
 * max and min keep NaN, as PyTorch's clamps do. */
static value build_elementwise_fn(parser *P, const call_site *c, value **v) {
    rj_graph *g = P->g;
    const char *f = c->name;
    bool hard = f[0] == 'h' && f[4] == 's'; /* hardsigmoid, hardswish: of x + 3, a float input */
    rj_node x = hard ? float_input(P, c, v[0]) : as_node(P, v[0]), r = RJ_NONE;
    if (P->failed) return nothing(c);
    rj_dtype t = rj_node_dtype(g, x), back = (rj_dtype)RJ_DTYPE_COUNT; /* the dtype to round to at the end */
    /* several ops in 16 bits would round after each: compute in f32, round once (PyTorch's
     * kernels do) */
    bool several = hard || !strcmp(f, "softsign");
    if (several && (t == RJ_F16 || t == RJ_BF16) && (x = float_work(P, c, x, &back)) == RJ_NONE) return nothing(c);
    if (!strcmp(f, "square")) r = rj_graph_binary(g, RJ_OP_MUL, x, x);
    else if (!strcmp(f, "reciprocal")) r = rj_graph_binary(g, RJ_OP_DIV, rj_graph_scalar_int(g, 1), x);
    else if (!strcmp(f, "softsign"))
        r = rj_graph_binary(g, RJ_OP_DIV, x, rj_graph_binary(g, RJ_OP_ADD, rj_graph_scalar_int(g, 1), rj_graph_unary(g, RJ_OP_ABS, x)));
    else {
        bool tanh = !strcmp(f, "hardtanh");
        /* the bounds are numbers, integer ones keeping an integer input's dtype (relu6 and
         * hardtanh of i64 are i64) */
        double num;
        if (tanh && ((v[1] && !literal(P, v[1], &num)) || (v[2] && !literal(P, v[2], &num)))) return nothing(c);
        rj_node lon = tanh ? (v[1] ? as_node(P, v[1]) : rj_graph_scalar_int(g, -1)) : rj_graph_scalar_int(g, 0);
        rj_node hin = tanh ? (v[2] ? as_node(P, v[2]) : rj_graph_scalar_int(g, 1)) : rj_graph_scalar_int(g, 6);
        rj_node in = hard ? rj_graph_binary(g, RJ_OP_ADD, x, rj_graph_scalar_int(g, 3)) : x;
        r = rj_graph_binary(g, RJ_OP_MINIMUM, rj_graph_binary(g, RJ_OP_MAXIMUM, in, lon), hin);
        if (!strcmp(f, "hardswish")) r = rj_graph_binary(g, RJ_OP_MUL, x, r);
        if (hard) r = rj_graph_binary(g, RJ_OP_DIV, r, rj_graph_scalar_int(g, 6));
    }
    return rounded_back(P, c, r, back);
}

/* x.float(), x.double(), x.half(), x.bfloat16(), x.int(), x.long(), x.bool(): PyTorch's casts
 * by method. float(...) of a string or a number is Python's float, a float literal:
 * float("-inf") in a mask, as PyTorch code writes it. */
static value build_as_dtype(parser *P, const call_site *c, value **v) {
    if (!strcmp(c->name, "float") && !c->a->method) {
        const node *s = scalar_of(P, v[0]);
        if (s) return made(P, c, rj_graph_scalar(P->g, s->weak == WEAK_FLOAT ? s->fval : (double)s->ival));
        if (v[0]->is_string) {
            char text[64] = "", *end;
            int n = v[0]->slen < (int)sizeof text - 1 ? v[0]->slen : (int)sizeof text - 1;
            memcpy(text, v[0]->str, (size_t)n);
            double d = strtod(text, &end);
            while (*end == ' ' || *end == '\t') end++;
            if (end == text || *end || v[0]->slen != n) {
                fail_at(P, &v[0]->at, RJ_ERR_PARSE, "float: could not convert string to float: '%.*s'",
                        v[0]->slen < 40 ? v[0]->slen : 40, v[0]->str);
                return nothing(c);
            }
            return made(P, c, rj_graph_scalar(P->g, d));
        }
    }
    rj_dtype to = RJ_F32;
    parse_dtype_name(c->name, &to);
    return made(P, c, rj_graph_cast(P->g, as_node(P, v[0]), to));
}

/* x.to(dtype), x.type(dtype) (torch.float16, "f16"), x.to(other) and x.type_as(other): a cast
 * to the dtype, or to other's. ragjit's programs name no device: x.to("cuda") is an error. */
static value build_to(parser *P, const call_site *c, value **v) {
    rj_dtype to;
    if (!dtype_value(v[1], &to)) {
        if (v[1]->is_string || v[1]->is_none || v[1]->node == RJ_NONE || scalar_of(P, v[1])) {
            fail_at(P, &v[1]->at, RJ_ERR_ARG, "%s: expected a dtype (torch.float16, \"f16\") or a tensor whose dtype "
                    "to take%s", c->name, v[1]->is_string ? " (a program names no device)" : "");
            return nothing(c);
        }
        to = rj_node_dtype(P->g, as_node(P, v[1]));
    }
    return made(P, c, rj_graph_cast(P->g, as_node(P, v[0]), to));
}

/* torch.finfo(dtype) and torch.iinfo(dtype) (finfo() is f32's): a dtype's limits, read by
 * .min, .max, .eps, .tiny (parse_expr.c: info_attr), as PyTorch code writes a mask's fill,
 * masked_fill(m, torch.finfo(x.dtype).min). */
static value build_info(parser *P, const call_site *c, value **v) {
    bool ints = c->name[0] == 'i';
    rj_dtype dt = RJ_F32;
    if ((v[0] || ints) && !dtype_value(v[0], &dt)) {
        fail_at(P, v[0] ? &v[0]->at : c->fn, RJ_ERR_PARSE, "%s: expected a dtype (torch.float32, x.dtype)", c->name);
        return nothing(c);
    }
    if (ints ? dt != RJ_I32 && dt != RJ_I64 : !dtype_is_float(dt)) {
        fail_at(P, v[0] ? &v[0]->at : c->fn, RJ_ERR_DTYPE, "%s: %s is not %s dtype (use %s)", c->name,
                rj_dtype_name(dt), ints ? "an integer" : "a float", ints ? "finfo" : "iinfo");
        return nothing(c);
    }
    value r = nothing(c);
    r.info = (int8_t)(ints ? 2 : 1);
    r.info_dt = dt;
    return r;
}

/* x.contiguous(), x.clone(), x.detach(): the value itself (ragjit's values are not storage). */
static value build_same(parser *P, const call_site *c, value **v) {
    rj_node x = as_node(P, v[0]);
    return P->failed ? nothing(c) : node_value(x, *c->fn);
}

/* ---- the table ---------------------------------------------------------------------------- */

typedef enum {
    FORM_NAME,  /* a function of the text format's own, by name */
    FORM_ALIAS, /* another name of the op `of`, called as that op is */
    FORM_OP,    /* the op `of`, by its name in the op table */
    FORM_KIND,  /* every op of kind `of` without a row of its own */
} form_key;

enum { MAX_PARAMS = 8 };

struct call_form {
    form_key key;
    const char *name;               /* FORM_NAME, FORM_ALIAS */
    int of;                         /* an rj_op, or an op_kind */
    const char *params[MAX_PARAMS]; /* PyTorch's names, in its order; NULL after the last */
    int required;                   /* the first `required` params must be given */
    int slot, slot_at;              /* params[slot_at] is read as SLOT_DIMS or SLOT_SIZE (arg_value) */
    call_build build;               /* NULL in an op's row: the op is not callable by name */
};

#define ROW(key, name, of, build, required, slot, slot_at, ...) \
    {key, name, of, {__VA_ARGS__}, required, slot, slot_at, build}
#define ROW_NAME(name, build, required, ...) ROW(FORM_NAME, name, -1, build, required, SLOT_NONE, 0, __VA_ARGS__)
#define ROW_ALIAS(name, op) ROW(FORM_ALIAS, name, RJ_OP_##op, NULL, 0, SLOT_NONE, 0, NULL)
#define ROW_OP(op, build, required, ...) ROW(FORM_OP, NULL, RJ_OP_##op, build, required, SLOT_NONE, 0, __VA_ARGS__)
#define ROW_KIND(kind, build, required, ...) \
    ROW(FORM_KIND, NULL, KIND_##kind, build, required, SLOT_NONE, 0, __VA_ARGS__)

static const call_form forms[] = {
    /* the text format's own names, which the unknown-function message lists in this order
     * after the ops */
    ROW_ALIAS("sign", SGN),
    ROW_ALIAS("view", RESHAPE),
    ROW_NAME("unsqueeze", build_squeeze, 2, "input", "dim"),
    ROW_NAME("squeeze", build_squeeze, 1, "input", "dim"),
    ROW_NAME("linear", build_linear, 2, "input", "weight", "bias"),
    ROW_NAME("t", build_t, 1, "input"),
    ROW_NAME("scaled_dot_product_attention", build_sdpa, 3, "query", "key", "value", "attn_mask", "dropout_p",
             "is_causal", "scale", "enable_gqa"),
    ROW_NAME("size", build_size, 1, "input", "dim"),
    ROW_NAME("split", build_split, 2, "tensor", "split_size", "dim"),
    ROW_NAME("chunk", build_split, 2, "input", "chunks", "dim"),
    ROW_ALIAS("amax", MAX), /* PyTorch's names of the reductions to values */
    ROW_ALIAS("amin", MIN),
    ROW(FORM_NAME, "permute", -1, build_permute, 2, SLOT_DIMS_VAR, 1, "input", "dims"),
    ROW_NAME("flatten", build_flatten, 1, "input", "start_dim", "end_dim"),
    ROW_NAME("unflatten", build_unflatten, 3, "input", "dim", "sizes"),
    ROW(FORM_NAME, "zeros", -1, build_full, 1, SLOT_DIMS_VAR, 0, "size", "dtype"),
    ROW(FORM_NAME, "ones", -1, build_full, 1, SLOT_DIMS_VAR, 0, "size", "dtype"),
    ROW(FORM_NAME, "stack", -1, build_cat, 1, SLOT_TENSORS, 0, "tensors", "dim"),
    ROW_NAME("clamp", build_clamp, 1, "input", "min", "max"),
    ROW_NAME("clip", build_clamp, 1, "input", "min", "max"),
    ROW_NAME("clamp_min", build_clamp, 2, "input", "min"),
    ROW_NAME("clamp_max", build_clamp, 2, "input", "max"),
    ROW(FORM_NAME, "logsumexp", -1, build_logsumexp, 2, SLOT_DIMS, 1, "input", "dim", "keepdim"),
    ROW(FORM_NAME, "normalize", -1, build_normalize, 1, SLOT_DIMS, 2, "input", "p", "dim", "eps"),
    ROW_NAME("leaky_relu", build_leaky_relu, 1, "input", "negative_slope"),
    ROW_NAME("square", build_elementwise_fn, 1, "input"),
    ROW_NAME("reciprocal", build_elementwise_fn, 1, "input"),
    ROW_NAME("relu6", build_elementwise_fn, 1, "input"),
    ROW_NAME("hardtanh", build_elementwise_fn, 1, "input", "min_val", "max_val"),
    ROW_NAME("hardsigmoid", build_elementwise_fn, 1, "input"),
    ROW_NAME("hardswish", build_elementwise_fn, 1, "input"),
    ROW_NAME("softsign", build_elementwise_fn, 1, "input"),
    ROW_ALIAS("mm", MATMUL),
    ROW_ALIAS("bmm", MATMUL),
    ROW_NAME("float", build_as_dtype, 1, "input"), /* PyTorch's casts by method, and Python's float */
    ROW_NAME("double", build_as_dtype, 1, "input"),
    ROW_NAME("half", build_as_dtype, 1, "input"),
    ROW_NAME("bfloat16", build_as_dtype, 1, "input"),
    ROW_NAME("int", build_as_dtype, 1, "input"),
    ROW_NAME("long", build_as_dtype, 1, "input"),
    ROW_NAME("bool", build_as_dtype, 1, "input"),
    ROW_NAME("to", build_to, 2, "input", "dtype"),
    ROW_NAME("type", build_to, 2, "input", "dtype"),
    ROW_NAME("type_as", build_to, 2, "input", "other"),
    ROW_NAME("finfo", build_info, 0, "type"),
    ROW_NAME("iinfo", build_info, 1, "type"),
    ROW_NAME("contiguous", build_same, 1, "input"),
    ROW_NAME("clone", build_same, 1, "input"),
    ROW_NAME("detach", build_same, 1, "input"),
    /* ops whose arguments differ from the rest of their kind's */
    ROW_OP(GELU, build_gelu, 1, "input", "approximate"),
    ROW_OP(GELU_TANH, NULL, 0, NULL), /* gelu(x, approximate="tanh") */
    ROW_OP(POW, build_binary, 2, "input", "exponent"),
    ROW_OP(WHERE, build_where, 3, "condition", "input", "other"),
    ROW_OP(MASKED_FILL, build_masked_fill, 3, "input", "mask", "value"),
    ROW_OP(CAST, build_cast, 2, "input", "dtype"),
    ROW_OP(LAYER_NORM, build_norm, 2, "input", "normalized_shape", "weight", "bias", "eps"),
    ROW_OP(RMS_NORM, build_norm, 2, "input", "normalized_shape", "weight", "eps"),
    ROW(FORM_OP, NULL, RJ_OP_PAD, build_pad, 1, SLOT_SIZE, 2, "input", "value", "len"),
    ROW_OP(UNPAD, build_unpad, 2, "input", "ragged"),
    ROW_OP(EMBEDDING, build_embedding, 2, "weight", "input"),
    ROW_OP(GATHER, build_index, 3, "input", "dim", "index"),
    ROW_OP(INDEX_SELECT, build_index, 3, "input", "dim", "index"),
    ROW_OP(TAKE_ALONG_DIM, build_index, 3, "input", "indices", "dim"),
    ROW_OP(POSITIONS, build_positions, 1, "ragged"),
    ROW_OP(RESHAPE, build_reshape, 2, "input", "shape"),
    ROW_OP(TRANSPOSE, build_transpose, 3, "input", "dim0", "dim1"),
    ROW_OP(NARROW, build_narrow, 4, "input", "dim", "start", "length"),
    ROW_OP(MATMUL, build_matmul, 2, "input", "other"),
    ROW_OP(ATTENTION, build_attention, 2, "scores", "value", "safe"),
    ROW(FORM_OP, NULL, RJ_OP_CAT, build_cat, 1, SLOT_TENSORS, 0, "tensors", "dim"),
    ROW(FORM_OP, NULL, RJ_OP_ARANGE, build_arange, 1, SLOT_SIZE, 0, "end", "dtype"),
    ROW(FORM_OP, NULL, RJ_OP_FULL, build_full, 2, SLOT_SIZE, 0, "size", "fill_value", "dtype"),
    /* every other op of these kinds (inputs and scalars, KIND_LEAF, are no calls) */
    ROW_KIND(UNARY, build_unary, 1, "input"),
    ROW_KIND(BINARY, build_binary, 2, "input", "other"),
    ROW_KIND(COMPARE, build_binary, 2, "input", "other"),
    ROW(FORM_KIND, NULL, KIND_REDUCE, build_reduce, 2, SLOT_DIMS, 1, "input", "dim", "keepdim", "dtype"),
    ROW_KIND(SOFTMAX, build_softmax, 2, "input", "dim", "dtype"),
};

#undef ROW
#undef ROW_NAME
#undef ROW_ALIAS
#undef ROW_OP
#undef ROW_KIND

/* The row that calls op, or NULL if the op is not callable by name. */
static const call_form *op_form(rj_op op) {
    for (size_t i = 0; i < RJ_ARRAY_LEN(forms); i++)
        if (forms[i].key == FORM_OP && forms[i].of == (int)op) return forms[i].build ? &forms[i] : NULL;
    for (size_t i = 0; i < RJ_ARRAY_LEN(forms); i++)
        if (forms[i].key == FORM_KIND && forms[i].of == (int)op_table[op].kind) return &forms[i];
    return NULL;
}

const call_form *call_find(const char *name, rj_op *op) {
    *op = RJ_OP_COUNT;
    for (size_t i = 0; i < RJ_ARRAY_LEN(forms); i++) {
        const call_form *f = &forms[i];
        if ((f->key != FORM_NAME && f->key != FORM_ALIAS) || strcmp(f->name, name)) continue;
        if (f->key == FORM_NAME) return f;
        *op = (rj_op)f->of;
        return op_form(*op);
    }
    *op = rj_op_from_name(name);
    return *op == RJ_OP_COUNT ? NULL : op_form(*op);
}

int call_slot(const args *a, const char *key) {
    const call_form *f = a->form;
    if (!f || f->slot == SLOT_NONE) return SLOT_NONE;
    bool here = !strcmp(key, f->params[f->slot_at]) || (!key[0] && a->npos == f->slot_at);
    return here ? f->slot : SLOT_NONE;
}

/* A name for the list of functions in the unknown-function message, and a candidate for its
 * suggestion. */
static void offer(suggest *s, char *list, size_t n, const char *name) {
    suggest_try(s, name);
    size_t l = strlen(list);
    snprintf(list + l, n - l, "%s%s", l ? " " : "", name);
}

static value unknown_function(parser *P, const token *fn, const char *name, const args *a) {
    suggest s = {.word = name};
    char list[1536] = "";
    for (int o = 0; o < RJ_OP_COUNT; o++)
        if (op_form((rj_op)o)) offer(&s, list, sizeof list, rj_op_name((rj_op)o));
    for (size_t i = 0; i < RJ_ARRAY_LEN(forms); i++)
        if (forms[i].key == FORM_NAME || forms[i].key == FORM_ALIAS) offer(&s, list, sizeof list, forms[i].name);
    char hint[96];
    suggestion(&s, hint, sizeof hint);
    if (s.best) fail_at(P, fn, RJ_ERR_PARSE, "unknown %s '%s'%s", a->method ? "method" : "function", name, hint);
    else if (a->method) /* the list of functions says little about methods */
        fail_at(P, fn, RJ_ERR_PARSE, "unknown method '%s': x.%s(...) would be %s(x, ...), and there is no function "
                "%s (docs/guide.md lists them)", name, name, name, name);
    else fail_at(P, fn, RJ_ERR_PARSE, "unknown function '%s'; the functions are: %s", name, list);
    return node_value(RJ_NONE, *fn);
}

value call_apply(parser *P, const token *fn, const char *name, args *a) {
    const call_form *f = a->form;
    if (!f) { /* a function of the program's own (def), else unknown */
        bool found = false;
        value r = P->run_def ? P->run_def(P, fn, name, a, &found) : node_value(RJ_NONE, *fn);
        return found ? r : unknown_function(P, fn, name, a);
    }
    if (a->method && a->op == RJ_OP_WHERE && a->npos >= 2) { /* PyTorch: x.where(cond, y) is where(cond, x, y) */
        value self = a->pos[0];
        a->pos[0] = a->pos[1], a->pos[1] = self;
    }
    value *v[MAX_PARAMS];
    int nparams = 0;
    while (nparams < MAX_PARAMS && f->params[nparams]) nparams++;
    /* x.permute(0, 1, 3, 2), x.view(B, j1, 4, 16): one tuple */
    int var_at = f->slot == SLOT_DIMS_VAR ? f->slot_at : a->op == RJ_OP_RESHAPE ? 1 : -1;
    if (var_at >= 0 && a->npos > var_at + 1) {
        value t = {.node = RJ_NONE, .is_tuple = true, .at = a->pos[var_at].at};
        for (int i = var_at; i < a->npos; i++) {
            if (a->pos[i].is_size) { /* zeros(B, D): sizes by name */
                t.tuple_syms |= 1u << t.ndims;
                t.dims[t.ndims++] = a->pos[i].dims[0];
                continue;
            }
            const node *s = scalar_of(P, &a->pos[i]);
            if (!s || s->weak != WEAK_INT) {
                fail_at(P, &a->pos[i].at, RJ_ERR_PARSE, "%s: %s must be integers", name, f->params[var_at]);
                return node_value(RJ_NONE, *fn);
            }
            t.dims[t.ndims++] = s->ival;
        }
        a->pos[var_at] = t;
        a->npos = var_at + 1;
    }
    if (!bind_args(P, fn, name, a, f->params, nparams, f->required, v)) return node_value(RJ_NONE, *fn);
    call_site c = {.fn = fn, .name = name, .op = a->op, .a = a};
    return f->build(P, &c, v);
}
