/*
 * parse_views.c — the text format's views and constants: narrow and Python slices (x[..., a:b]),
 * split and chunk (several pieces, taken apart by a tuple assignment), permute, flatten and
 * unflatten, cat and stack, and the constants arange, full, zeros and ones.
 *
 * Handlers of the function table (parse_call.c), each binding its arguments to a call of the
 * builder (PyTorch's names and argument conventions); slices of a subscript come here from the
 * grammar (parse_expr.c). Below both: it calls only parse_names.c, the lexer and the builder.
 */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "parse.h"

/* ---- slices: narrow, split, chunk, x[a:b] ----------------------------------------------------- */

/* Dim `dim` (negative: from the end) of x, a dim that narrow can cut, into *k and its constant
 * size into *size; false after reporting. For the batch dim, a ragged dim or a size known only at
 * run time the builder's narrow says which it is. */
static bool slice_dim(parser *P, const token *at, const char *fname, rj_node x, int64_t dim, int *k, int64_t *size) {
    rj_dim dims[RJ_MAX_RANK];
    int rank = rj_node_shape(P->g, x, dims);
    if (dim < -rank || dim >= rank) {
        fail_at(P, at, RJ_ERR_SHAPE, "%s: dim %lld is out of range for a tensor of %d dims", fname, (long long)dim, rank);
        return false;
    }
    *k = (int)(dim < 0 ? dim + rank : dim);
    *size = dims[*k];
    if (*size >= 0) return true;
    built(P, rj_graph_narrow(P->g, x, *k, 0, 0), at); /* fails, naming the kind of dim */
    return false;
}

value build_narrow(parser *P, const call_site *c, value **v) {
    int64_t dim, start, len;
    if (!int_arg(P, c->name, "dim", v[1], INT_MIN, INT_MAX, &dim) ||
        !int_arg(P, c->name, "start", v[2], INT64_MIN, INT64_MAX, &start) ||
        !int_arg(P, c->name, "length", v[3], INT64_MIN, INT64_MAX, &len))
        return nothing(c);
    return made(P, c, rj_graph_narrow(P->g, as_node(P, v[0]), (int)dim, start, len));
}

enum { MAX_PIECES = 65536 };

/* split(tensor, split_size_or_sections, dim=0) and chunk(input, chunks, dim=0): narrows of one
 * dim, as many as PyTorch makes and of its sizes: pieces of split_size (the last shorter when
 * it does not divide the size), of the sizes listed (adding up to the size), or ceil(size /
 * chunks) each (so possibly fewer than chunks). The value is the list of pieces, which a
 * tuple assignment (q, k, v = ...) or an index ([0]) takes apart. */
value build_split(parser *P, const call_site *c, value **v) {
    bool chunk = c->name[0] == 'c';
    const value *sec = v[1]->is_list || v[1]->is_tuple ? v[1] : NULL;
    int64_t dim = 0, n = 0, size, step = 0, count;
    int k;
    if (v[2] && !int_arg(P, c->name, "dim", v[2], INT_MIN, INT_MAX, &dim)) return nothing(c);
    if (sec && chunk) {
        fail_at(P, &sec->at, RJ_ERR_PARSE, "chunk: chunks must be an integer (split takes a list of sizes)");
        return nothing(c);
    }
    if (!sec && !int_arg(P, c->name, chunk ? "chunks" : "split_size", v[1], chunk ? 1 : 0, INT64_MAX, &n))
        return nothing(c);
    rj_node x = as_node(P, v[0]);
    if (P->failed || !slice_dim(P, v[2] ? &v[2]->at : c->fn, c->name, x, dim, &k, &size)) return nothing(c);
    if (sec) {
        int64_t sum = 0;
        for (int i = 0; i < sec->ndims; i++) {
            if ((sec->is_tuple && (sec->tuple_syms >> i & 1)) || sec->is_size || sec->dims[i] < 0) {
                fail_at(P, &sec->at, RJ_ERR_PARSE, "split: the sizes must be non-negative integers");
                return nothing(c);
            }
            sum += sec->dims[i];
        }
        if (sum != size) {
            fail_at(P, &sec->at, RJ_ERR_SHAPE, "split: the sizes add up to %lld, but dim %d has size %lld (they must "
                    "add up to it exactly)", (long long)sum, k, (long long)size);
            return nothing(c);
        }
        count = sec->ndims;
    } else if (chunk) {
        step = size / n + (size % n != 0);
        count = step ? (size + step - 1) / step : n;
    } else {
        if (n == 0 && size != 0) {
            fail_at(P, &v[1]->at, RJ_ERR_ARG, "split: split_size can only be 0 if the dim's size is 0 (dim %d has "
                    "size %lld)", k, (long long)size);
            return nothing(c);
        }
        step = n;
        count = n && size ? size / n + (size % n != 0) : 1;
    }
    if (count > MAX_PIECES) {
        fail_at(P, c->fn, RJ_ERR_UNSUPPORTED, "%s: %lld pieces, more than %d", c->name, (long long)count, MAX_PIECES);
        return nothing(c);
    }
    if (!mem_grow(P->ctx, (void **)&P->pieces, &P->cappieces, P->npieces + (int32_t)count, sizeof(rj_node))) {
        fail_at(P, c->fn, RJ_ERR_NOMEM, "out of memory");
        return nothing(c);
    }
    value r = {.node = RJ_NONE, .is_pieces = true, .piece0 = P->npieces, .npieces = (int32_t)count, .at = *c->fn};
    for (int64_t i = 0, at = 0; i < count && !P->failed; i++) {
        int64_t len = sec ? sec->dims[i] : step < size - at ? step : size - at;
        P->pieces[P->npieces++] = built(P, rj_graph_narrow(P->g, x, k, at, len), c->fn);
        at += len;
    }
    return r;
}

/* Python's clamping of a slice bound (step 1) into 0..size. */
static int64_t slice_bound(int64_t b, int64_t size) {
    if (b < 0) b = b < -size ? 0 : b + size;
    return b > size ? size : b;
}

value subscript_value(parser *P, const token *t, const value *self, const subscript *s) {
    value r = node_value(RJ_NONE, self->at);
    if (self->is_pieces) { /* x.split(64)[1] */
        int64_t i = s->item[0].v[0], n = self->npieces;
        if (s->n != 1 || s->item[0].kind != SUB_INDEX) {
            fail_at(P, t, RJ_ERR_PARSE, "the tensors of a split or chunk take one integer index ([0], [-1])");
        } else if (i < -n || i >= n) {
            fail_at(P, &s->item[0].at, RJ_ERR_SHAPE, "index %lld is out of range for the %lld tensors of a split or "
                    "chunk", (long long)i, (long long)n);
        } else {
            r.node = P->pieces[self->piece0 + (i < 0 ? i + n : i)];
        }
        return r;
    }
    if (self->has_indices) { /* x.max(1)[1]: PyTorch's (values, indices) */
        int64_t i = s->item[0].v[0];
        if (s->n != 1 || s->item[0].kind != SUB_INDEX || i < -2 || i > 1) {
            fail_at(P, t, RJ_ERR_PARSE, "max and min with a dim give (values, indices), as PyTorch's: take [0] or [1] "
                    "(or .values, .indices) before indexing further, or call amax / amin for the values alone");
            return r;
        }
        r.node = i == 0 || i == -2 ? self->node : indices_of(P, t, self);
        return r;
    }
    rj_node x = as_node(P, self);
    if (P->failed) return r;
    rj_dim dims[RJ_MAX_RANK];
    int rank = rj_node_shape(P->g, x, dims), ell = -1, m = 0;
    for (int i = 0; i < s->n; i++) {
        if (s->item[i].kind != SUB_ELLIPSIS) {
            m++;
        } else if (ell >= 0) {
            fail_at(P, &s->item[i].at, RJ_ERR_PARSE, "a subscript can have only one '...'");
            return r;
        } else {
            ell = i;
        }
    }
    if (m > rank) {
        fail_at(P, t, RJ_ERR_SHAPE, "too many indices for a tensor of %d dims: %d were given", rank, m);
        return r;
    }
    bool drop[RJ_MAX_RANK] = {false};
    for (int i = 0; i < s->n && !P->failed; i++) {
        const sub_item *it = &s->item[i];
        int d = ell < 0 || i < ell ? i : rank - (s->n - i), k;
        int64_t size, start, len;
        if (it->kind == SUB_ELLIPSIS) continue;
        if (it->kind == SUB_SLICE) {
            if (it->has[2] && it->v[2] != 1) {
                fail_at(P, &it->at, RJ_ERR_UNSUPPORTED, "slice step %lld is not supported (only step 1: x[..., a:b])",
                        (long long)it->v[2]);
                return r;
            }
            if ((!it->has[0] || it->v[0] == 0) && !it->has[1]) continue; /* ':' and '0:': all of it */
        }
        if (!slice_dim(P, &it->at, it->kind == SUB_SLICE ? "slice" : "index", x, d, &k, &size)) return r;
        if (it->kind == SUB_INDEX) {
            if (it->v[0] < -size || it->v[0] >= size) {
                fail_at(P, &it->at, RJ_ERR_SHAPE, "index %lld is out of range for dim %d of size %lld",
                        (long long)it->v[0], d, (long long)size);
                return r;
            }
            start = it->v[0] < 0 ? it->v[0] + size : it->v[0], len = 1, drop[d] = true;
        } else {
            int64_t stop = it->has[1] ? slice_bound(it->v[1], size) : size;
            start = it->has[0] ? slice_bound(it->v[0], size) : 0;
            len = stop > start ? stop - start : 0;
            if (start == 0 && len == size) continue;
        }
        x = built(P, rj_graph_narrow(P->g, x, d, start, len), &it->at);
    }
    for (int d = rank - 1; d >= 0 && !P->failed; d--)
        if (drop[d]) x = built(P, rj_graph_squeeze(P->g, x, d), t);
    if (!P->failed) r.node = x;
    return r;
}

/* A list or tuple of integer dims (v from SLOT_DIMS / SLOT_DIMS_VAR) into out; false after
 * reporting. */
static bool int_dims(parser *P, const char *fname, const char *arg, const value *v, int *out, int *n) {
    if (!v->is_tuple && !v->is_list) {
        const node *s = scalar_of(P, v);
        if (s && s->weak == WEAK_INT && s->ival >= INT_MIN && s->ival <= INT_MAX) { /* one dim */
            out[0] = (int)s->ival;
            *n = 1;
            return true;
        }
        fail_at(P, &v->at, RJ_ERR_PARSE, "%s: %s must be a list of integer dims", fname, arg);
        return false;
    }
    for (int i = 0; i < v->ndims; i++)
        if ((v->tuple_syms >> i & 1) || v->dims[i] == RJ_DIM_NONE || v->dims[i] < INT_MIN || v->dims[i] > INT_MAX ||
            (v->is_list && !v->is_tuple)) {
            fail_at(P, &v->at, RJ_ERR_PARSE, "%s: %s must be integers", fname, arg);
            return false;
        }
    for (int i = 0; i < v->ndims; i++) out[i] = (int)v->dims[i];
    *n = v->ndims;
    return true;
}

/* permute(input, dims): x.permute(0, 1, 3, 2), x.permute([0, 1, 3, 2]), torch.permute(x, (0, 1, 3, 2)) */
value build_permute(parser *P, const call_site *c, value **v) {
    int perm[RJ_MAX_RANK], n;
    if (!int_dims(P, c->name, "dims", v[1], perm, &n)) return nothing(c);
    return made(P, c, rj_graph_permute(P->g, as_node(P, v[0]), n, perm));
}

/* flatten(input, start_dim=0, end_dim=-1) and unflatten(input, dim, sizes): reshapes of the
 * dims named, so a jagged tensor's batch and ragged dims stay as they are (reshape says so). */
value build_flatten(parser *P, const call_site *c, value **v) {
    int64_t a = 0, b = -1;
    if ((v[1] && !int_arg(P, c->name, "start_dim", v[1], INT_MIN, INT_MAX, &a)) ||
        (v[2] && !int_arg(P, c->name, "end_dim", v[2], INT_MIN, INT_MAX, &b)))
        return nothing(c);
    rj_node x = as_node(P, v[0]);
    if (P->failed) return nothing(c);
    rj_dim dims[RJ_MAX_RANK], to[RJ_MAX_RANK];
    int rank = rj_node_shape(P->g, x, dims);
    if (rank == 0) return made(P, c, rj_graph_reshape(P->g, x, 1, (rj_dim[]){1}));
    if (a < 0) a += rank;
    if (b < 0) b += rank;
    if (a < 0 || a >= rank || b < 0 || b >= rank || a > b) {
        fail_at(P, c->fn, RJ_ERR_SHAPE, "%s: dims %lld..%lld are out of range for a tensor of %d dims (start_dim "
                "must not follow end_dim)", c->name, (long long)a, (long long)b, rank);
        return nothing(c);
    }
    int rp = dim_ragged_pos(P->g, graph_node(P->g, x));
    if (rp >= 0 && a <= rp && a < b) {
        fail_at(P, c->fn, RJ_ERR_UNSUPPORTED, "%s: dims %lld..%lld include the %s dim %d: a jagged tensor keeps its "
                "batch and ragged dims in place (flatten(%d) joins the dims after them)", c->name, (long long)a,
                (long long)b, a < rp ? "batch" : "ragged", (int)a, rp + 1);
        return nothing(c);
    }
    /* the flattened size: a constant, or the one size bound at run time among dims of 1 */
    rj_dim m = 1;
    int64_t prod = 1;
    int named = 0;
    for (int64_t k = a; k <= b; k++) {
        if (dims[k] < 0) named++, m = dims[k];
        else if (dims[k] && prod > INT64_MAX / dims[k]) prod = INT64_MAX;
        else prod *= dims[k];
    }
    if (named > 1 || (named == 1 && prod != 1)) {
        fail_at(P, c->fn, RJ_ERR_UNSUPPORTED, "%s: dims %lld..%lld hold a size bound at run time beside other sizes: "
                "this version cannot name their product", c->name, (long long)a, (long long)b);
        return nothing(c);
    }
    int n = 0;
    for (int k = 0; k < a; k++) to[n++] = dims[k];
    to[n++] = named ? m : prod;
    for (int k = (int)b + 1; k < rank; k++) to[n++] = dims[k];
    return made(P, c, rj_graph_reshape(P->g, x, n, to));
}

value build_unflatten(parser *P, const call_site *c, value **v) {
    int64_t d;
    if (!int_arg(P, c->name, "dim", v[1], INT_MIN, INT_MAX, &d)) return nothing(c);
    const value *sz = v[2];
    if (!sz->is_list && !sz->is_tuple) {
        fail_at(P, &sz->at, RJ_ERR_PARSE, "%s: sizes must be a list or tuple of sizes ((12, 32); -1 for one "
                "inferred size)", c->name);
        return nothing(c);
    }
    rj_node x = as_node(P, v[0]);
    if (P->failed) return nothing(c);
    rj_dim dims[RJ_MAX_RANK], to[RJ_MAX_RANK];
    int rank = rj_node_shape(P->g, x, dims);
    if (d < -rank || d >= rank) {
        fail_at(P, &v[1]->at, RJ_ERR_SHAPE, "%s: dim %lld is out of range for a tensor of %d dims", c->name,
                (long long)d, rank);
        return nothing(c);
    }
    if (d < 0) d += rank;
    if (sz->ndims < 1 || rank - 1 + sz->ndims > RJ_MAX_RANK) {
        fail_at(P, &sz->at, RJ_ERR_SHAPE, "%s: sizes must hold 1 to %d sizes here", c->name, RJ_MAX_RANK - rank + 1);
        return nothing(c);
    }
    int n = 0;
    for (int k = 0; k < d; k++) to[n++] = dims[k];
    for (int i = 0; i < sz->ndims; i++) {
        rj_dim s = sz->dims[i];
        if (sz->is_tuple && !(sz->tuple_syms >> i & 1) && s < 0) {
            if (s != -1) {
                fail_at(P, &sz->at, RJ_ERR_PARSE, "%s: a size must not be negative (-1 is the inferred size)", c->name);
                return nothing(c);
            }
            s = RJ_DIM_NONE;
        }
        to[n++] = s;
    }
    for (int k = (int)d + 1; k < rank; k++) to[n++] = dims[k];
    return made(P, c, rj_graph_reshape(P->g, x, n, to));
}

/* The dtype= of a constant (a string), or `dflt` when not given. */
static bool dtype_arg(parser *P, const call_site *c, const value *v, rj_dtype dflt, rj_dtype *out) {
    *out = dflt;
    if (!v || is_none(v)) return true;
    if (!dtype_value(v, out)) {
        fail_at(P, &v->at, RJ_ERR_PARSE, "%s: dtype must be one of \"f32\", \"f64\", \"f16\", \"bf16\", \"i32\", \"i64\", \"bool\"",
                c->name);
        return false;
    }
    return true;
}

/* A constant's shape: a list or tuple of sizes ([2, D], (2, 3)), or one size (3, D). */
static bool shape_arg(parser *P, const call_site *c, const value *v, rj_dim *dims, int *n) {
    if (v->is_list || v->is_tuple) {
        for (int i = 0; i < v->ndims; i++)
            if (v->dims[i] == RJ_DIM_NONE || (v->is_tuple && !(v->tuple_syms >> i & 1) && v->dims[i] < 0)) {
                fail_at(P, &v->at, RJ_ERR_PARSE, "%s: a size must not be negative", c->name);
                return false;
            }
        memcpy(dims, v->dims, sizeof(rj_dim) * (size_t)v->ndims);
        *n = v->ndims;
        return true;
    }
    const node *s = scalar_of(P, v);
    if (!s || s->weak != WEAK_INT || s->ival < 0) {
        fail_at(P, &v->at, RJ_ERR_PARSE, "%s: the size must be a list of sizes, or a size (a number or a size name)",
                c->name);
        return false;
    }
    dims[0] = s->ival;
    *n = 1;
    return true;
}

/* arange(end, dtype="i64"), PyTorch's default dtype for integer ends */
value build_arange(parser *P, const call_site *c, value **v) {
    rj_dim d[RJ_MAX_RANK];
    int n;
    rj_dtype dt;
    if (!shape_arg(P, c, v[0], d, &n) || !dtype_arg(P, c, v[1], RJ_I64, &dt)) return nothing(c);
    if (n != 1) {
        fail_at(P, &v[0]->at, RJ_ERR_PARSE, "arange: end must be one size (a number or a size name)");
        return nothing(c);
    }
    return made(P, c, rj_graph_arange(P->g, d[0], dt));
}

/* full(size, fill_value, dtype=None): the dtype of the value's kind by default (PyTorch's:
 * f32 for a float, i64 for an int, bool); zeros(size, dtype="f32") and ones(...) are full of 0
 * and 1, their size a list, a tuple or the sizes one by one (zeros(2, D)). */
value build_full(parser *P, const call_site *c, value **v) {
    rj_dim d[RJ_MAX_RANK];
    int n;
    rj_dtype dt;
    double val = c->name[0] == 'o';
    rj_dtype dflt = RJ_F32;
    const value *dv = v[1];
    if (c->op == RJ_OP_FULL) {
        const node *s = scalar_of(P, v[1]);
        if (!s || (s->op != RJ_OP_SCALAR)) {
            fail_at(P, &v[1]->at, RJ_ERR_PARSE, "full: fill_value must be a number or True/False");
            return nothing(c);
        }
        val = s->weak == WEAK_FLOAT ? s->fval : (double)s->ival;
        dflt = s->weak == WEAK_FLOAT ? RJ_F32 : s->weak == WEAK_INT ? RJ_I64 : RJ_BOOL;
        dv = v[2];
    }
    if (!shape_arg(P, c, v[0], d, &n) || !dtype_arg(P, c, dv, dflt, &dt)) return nothing(c);
    return made(P, c, rj_graph_full(P->g, n, d, val, dt));
}

/* cat(tensors, dim=0), stack(tensors, dim=0): a list of tensors, joined by the builder. */
value build_cat(parser *P, const call_site *c, value **v) {
    int64_t dim = 0;
    if (!v[0]->is_tensors) {
        fail_at(P, &v[0]->at, RJ_ERR_PARSE, "%s: tensors must be a list of tensors (%s([a, b], dim=-1))", c->name,
                c->name);
        return nothing(c);
    }
    if (v[1] && !int_arg(P, c->name, "dim", v[1], INT_MIN, INT_MAX, &dim)) return nothing(c);
    rj_node xs[RJ_MAX_RANK];
    for (int i = 0; i < v[0]->ndims; i++) xs[i] = (rj_node)v[0]->dims[i];
    return made(P, c, c->name[0] == 's' ? rj_graph_stack(P->g, xs, v[0]->ndims, (int)dim)
                                        : rj_graph_cat(P->g, xs, v[0]->ndims, (int)dim));
}
