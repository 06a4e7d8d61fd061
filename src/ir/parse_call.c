/*
 * parse_call.c — the functions a call in the text format can name, as one table.
 *
 * Every op of the op table (RJ_OP_TABLE) is callable by its name there, which this file never
 * repeats: a row matches an op, or every op of a kind, and gives the parameters in PyTorch's
 * names and order and the handler that builds the node. Ops whose arguments differ from the
 * rest of their kind (pow's exponent, gelu's approximate) have rows of their own, checked
 * before the kind's. The text format's own names are rows too: PyTorch's spellings that are
 * aliases of ops (sign, view, amax, amin) and functions built of other ops (linear, squeeze,
 * unsqueeze, t, size, split and chunk, whose value is several narrows; PyTorch's clamp,
 * logsumexp, normalize, log1p, var and the rest are in parse_fns.c, and the helpers every
 * handler shares in parse_args.c).
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

/* sum(x, dim=(1, 2), keepdim): PyTorch's reduction over several dims, as one reduction per
 * dim from the last to the first. Nesting is exact for sum, max, min and prod, and for mean
 * where every row of the outer dim holds as many elements along the inner ones; a mean over
 * the batch dim of a jagged tensor is sum / count (mean_over). v: input, dim, keepdim. */
static value reduce_dims(parser *P, const token *fn, const char *name, rj_op op, value **v) {
    value r = node_value(RJ_NONE, *fn);
    bool keep = false;
    if (v[2] && !bool_arg(P, name, "keepdim", v[2], &keep)) return r;
    rj_node x = as_node(P, v[0]);
    if (P->failed) return r;
    rj_dim shape[RJ_MAX_RANK];
    int dims[RJ_MAX_RANK], n = dim_list(P, name, v[1], rj_node_shape(P->g, x, shape), dims);
    if (!n) return r;
    /* 16-bit sums, means and products over several dims accumulate in f32 across all of them
     * and round once, as PyTorch's do (one reduction a dim would round between them) */
    rj_dtype t = rj_node_dtype(P->g, x);
    bool wide = n > 1 && (t == RJ_F16 || t == RJ_BF16) && (op == RJ_OP_SUM || op == RJ_OP_MEAN || op == RJ_OP_PROD);
    if (wide) x = built_as(P, fn, NULL, rj_graph_cast(P->g, x, RJ_F32));
    if (!P->failed)
        r.node = op == RJ_OP_MEAN ? mean_over(P, fn, NULL, x, dims, n, keep) : reduce_over(P, fn, NULL, op, x, dims, n, keep);
    if (wide && !P->failed && r.node != RJ_NONE) r.node = built_as(P, fn, NULL, rj_graph_cast(P->g, r.node, t));
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
    /* PyTorch's max and min by those names (not amax, amin): of two tensors the elementwise
     * maximum and minimum; with a dim (values, indices) */
    bool pair = (c->op == RJ_OP_MAX || c->op == RJ_OP_MIN) && (!strcmp(c->name, "max") || !strcmp(c->name, "min"));
    bool all = !v[1] || is_none(v[1]); /* x.sum(): every dim, as PyTorch's dim=None */
    if (pair && !all && !v[1]->is_tuple && !v[1]->is_list && !v[1]->is_size && v[1]->node != RJ_NONE && !scalar_of(P, v[1])) {
        if (v[2] || v[3]) {
            fail_at(P, &(v[2] ? v[2] : v[3])->at, RJ_ERR_PARSE, "%s of two tensors (the elementwise %s) takes no %s",
                    c->name, c->op == RJ_OP_MAX ? "maximum" : "minimum", v[2] ? "keepdim" : "dtype");
            return nothing(c);
        }
        rj_node a = as_node(P, v[0]), b = as_node(P, v[1]);
        if (P->failed) return nothing(c);
        return made(P, c, rj_graph_binary(P->g, c->op == RJ_OP_MAX ? RJ_OP_MAXIMUM : RJ_OP_MINIMUM, a, b));
    }
    if (!op_dtype(P, c, v[3], &dt)) return nothing(c);
    value x = node_value(cast_to(P, c, as_node(P, v[0]), dt), v[0]->at);
    if (P->failed) return nothing(c);
    value r, every = {.node = RJ_NONE, .is_tuple = true, .at = *c->fn};
    if (all) { /* a tuple of every dim; a 0-d tensor seen as [1] */
        rj_dim shape[RJ_MAX_RANK];
        every.ndims = rj_node_shape(P->g, x.node, shape);
        if (!every.ndims) x.node = built_as(P, c->fn, c->name, rj_graph_reshape(P->g, x.node, 1, (rj_dim[]){1}));
        every.ndims += !every.ndims;
        for (int i = 0; i < every.ndims; i++) every.dims[i] = i;
        if (P->failed) return nothing(c);
    }
    if (all || v[1]->is_tuple) {
        value *vs[3] = {&x, all ? &every : v[1], v[2]};
        r = reduce_dims(P, c->fn, c->name, c->op, vs);
    } else {
        if (!int_arg(P, c->name, "dim", v[1], INT_MIN, INT_MAX, &dim) ||
            (v[2] && !bool_arg(P, c->name, "keepdim", v[2], &keep)))
            return nothing(c);
        r = made(P, c, rj_graph_reduce(P->g, c->op, x.node, (int)dim, keep));
        if (pair && !P->failed) { /* the indices, built if asked for: v, i = x.max(1) */
            rj_dim shape[RJ_MAX_RANK];
            int rank = rj_node_shape(P->g, x.node, shape);
            r.has_indices = true, r.ind_x = x.node, r.ind_keep = keep, r.ind_min = c->op == RJ_OP_MIN;
            r.ind_dim = (int)(dim < 0 ? dim + rank : dim);
        }
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

/* x.contiguous(), x.clone(), x.detach(): the value itself (ragjit's values are not storage).
 * dropout(input, p=0.5, training=True, inplace=False), PyTorch's F.dropout and a Dropout
 * module's call with `self.` dropped: ragjit runs inference, so it is the identity, as a module
 * in eval mode is; training=True is refused, and p must lie in [0, 1] as PyTorch requires. */
static value build_same(parser *P, const call_site *c, value **v) {
    if (!strcmp(c->name, "dropout")) {
        double p = 0.5;
        bool training = false, inplace;
        if ((v[1] && !literal(P, v[1], &p)) || (v[2] && !bool_arg(P, c->name, "training", v[2], &training)) ||
            (v[3] && !bool_arg(P, c->name, "inplace", v[3], &inplace)))
            return nothing(c);
        if (!(p >= 0 && p <= 1)) {
            fail_at(P, &v[1]->at, RJ_ERR_ARG, "dropout: p must lie between 0 and 1 (it is %g)", p);
            return nothing(c);
        }
        if (training) {
            fail_at(P, &v[2]->at, RJ_ERR_UNSUPPORTED, "dropout: training=True drops at random; ragjit runs inference, "
                    "where dropout is the identity (training=False, or leave it out)");
            return nothing(c);
        }
    }
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
    ROW_NAME("unbind", build_unbind, 1, "input", "dim"),
    ROW(FORM_NAME, "flip", -1, build_flip, 2, SLOT_DIMS_VAR, 1, "input", "dims"),
    ROW_NAME("tril", build_tril, 1, "input", "diagonal"),
    ROW_NAME("triu", build_tril, 1, "input", "diagonal"),
    ROW(FORM_NAME, "expand", -1, build_expand, 2, SLOT_DIMS_VAR, 1, "input", "size"),
    ROW_NAME("expand_as", build_expand, 2, "input", "other"),
    ROW(FORM_NAME, "repeat", -1, build_repeat, 2, SLOT_DIMS_VAR, 1, "input", "repeats"),
    ROW_ALIAS("amax", MAX), /* PyTorch's names of the reductions to values */
    ROW_ALIAS("amin", MIN),
    ROW(FORM_NAME, "permute", -1, build_permute, 2, SLOT_DIMS_VAR, 1, "input", "dims"),
    ROW_NAME("flatten", build_flatten, 1, "input", "start_dim", "end_dim"),
    ROW_NAME("unflatten", build_unflatten, 3, "input", "dim", "sizes"),
    ROW(FORM_NAME, "zeros", -1, build_full, 1, SLOT_DIMS_VAR, 0, "size", "dtype"),
    ROW(FORM_NAME, "ones", -1, build_full, 1, SLOT_DIMS_VAR, 0, "size", "dtype"),
    ROW_NAME("zeros_like", build_like, 1, "input", "dtype"),
    ROW_NAME("ones_like", build_like, 1, "input", "dtype"),
    ROW_NAME("full_like", build_like, 2, "input", "fill_value", "dtype"),
    ROW(FORM_NAME, "new_zeros", -1, build_like, 2, SLOT_DIMS_VAR, 1, "input", "size", "dtype"),
    ROW(FORM_NAME, "new_ones", -1, build_like, 2, SLOT_DIMS_VAR, 1, "input", "size", "dtype"),
    ROW_NAME("new_full", build_like, 3, "input", "size", "fill_value", "dtype"),
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
    ROW_NAME("log1p", build_exp_family, 1, "input"),
    ROW_NAME("expm1", build_exp_family, 1, "input"),
    ROW_NAME("softplus", build_exp_family, 1, "input", "beta", "threshold"),
    ROW_NAME("elu", build_exp_family, 1, "input", "alpha"),
    ROW_NAME("celu", build_exp_family, 1, "input", "alpha"),
    ROW_NAME("selu", build_exp_family, 1, "input"),
    ROW_NAME("mish", build_exp_family, 1, "input"),
    ROW_NAME("logsigmoid", build_more_fn, 1, "input"),
    ROW_NAME("tanhshrink", build_more_fn, 1, "input"),
    ROW_NAME("softshrink", build_more_fn, 1, "input", "lambd"),
    ROW_NAME("hardshrink", build_more_fn, 1, "input", "lambd"),
    ROW_NAME("threshold", build_more_fn, 3, "input", "threshold", "value"),
    ROW_NAME("softmin", build_more_fn, 1, "input", "dim"),
    ROW_NAME("glu", build_more_fn, 1, "input", "dim"),
    ROW_NAME("logaddexp", build_more_fn, 2, "input", "other"),
    ROW(FORM_NAME, "var", -1, build_var, 1, SLOT_DIMS, 1, "input", "dim", "unbiased", "keepdim", "correction"),
    ROW(FORM_NAME, "std", -1, build_var, 1, SLOT_DIMS, 1, "input", "dim", "unbiased", "keepdim", "correction"),
    ROW(FORM_NAME, "norm", -1, build_norm_fn, 1, SLOT_DIMS, 2, "input", "p", "dim", "keepdim", "dtype"),
    ROW(FORM_NAME, "vector_norm", -1, build_norm_fn, 1, SLOT_DIMS, 2, "input", "ord", "dim", "keepdim", "dtype"),
    ROW_NAME("argmax", build_argmax, 1, "input", "dim", "keepdim"),
    ROW_NAME("argmin", build_argmax, 1, "input", "dim", "keepdim"),
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
    ROW_NAME("dropout", build_same, 1, "input", "p", "training", "inplace"),
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
    ROW(FORM_OP, NULL, RJ_OP_ARANGE, build_arange, 0, SLOT_SIZE, 0, "start", "end", "step", "dtype"),
    ROW(FORM_OP, NULL, RJ_OP_FULL, build_full, 2, SLOT_SIZE, 0, "size", "fill_value", "dtype"),
    /* every other op of these kinds (inputs and scalars, KIND_LEAF, are no calls) */
    ROW_KIND(UNARY, build_unary, 1, "input"),
    ROW_KIND(BINARY, build_binary, 2, "input", "other"),
    ROW_KIND(COMPARE, build_binary, 2, "input", "other"),
    ROW(FORM_KIND, NULL, KIND_REDUCE, build_reduce, 1, SLOT_DIMS, 1, "input", "dim", "keepdim", "dtype"),
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
