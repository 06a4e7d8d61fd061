/*
 * parse_views.c — the text format's views and constants: narrow and Python slices (x[..., a:b]),
 * split, chunk and unbind (several pieces, taken apart by a tuple assignment), flip, permute,
 * flatten and unflatten, cat and stack, and the constants arange, full, zeros, ones and their
 * _like and new_ forms.
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

/* Room for `count` more pieces (a split's, an unbind's), and *r the value that will list them
 * as they are appended to P->pieces; false after reporting. */
static bool pieces_begin(parser *P, const call_site *c, int64_t count, value *r) {
    if (count > MAX_PIECES) {
        fail_at(P, c->fn, RJ_ERR_UNSUPPORTED, "%s: %lld pieces, more than %d", c->name, (long long)count, MAX_PIECES);
        return false;
    }
    if (!mem_grow(P->ctx, (void **)&P->pieces, &P->cappieces, P->npieces + (int32_t)count, sizeof(rj_node))) {
        fail_at(P, c->fn, RJ_ERR_NOMEM, "out of memory");
        return false;
    }
    *r = (value){.node = RJ_NONE, .is_pieces = true, .piece0 = P->npieces, .npieces = (int32_t)count, .at = *c->fn};
    return true;
}

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
    value r;
    if (!pieces_begin(P, c, count, &r)) return nothing(c);
    for (int64_t i = 0, at = 0; i < count && !P->failed; i++) {
        int64_t len = sec ? sec->dims[i] : step < size - at ? step : size - at;
        P->pieces[P->npieces++] = built(P, rj_graph_narrow(P->g, x, k, at, len), c->fn);
        at += len;
    }
    return r;
}

/* slice_dim for unbind, flip and repeat: a dense dim of constant size, else an error naming
 * fname and what else it takes (`also`, "" for nothing). */
static bool whole_dim(parser *P, const token *at, const char *fname, const char *also, rj_node x, int64_t dim, int *k,
                      int64_t *size) {
    rj_dim dims[RJ_MAX_RANK];
    int rank = rj_node_shape(P->g, x, dims);
    if (dim >= -rank && dim < rank && dims[dim < 0 ? dim + rank : dim] < 0) {
        fail_at(P, at, RJ_ERR_UNSUPPORTED, "%s: dim %lld has a size known only at run time (the batch dim, a ragged "
                "dim or a size name); %s takes a dense dim of constant size%s", fname, (long long)dim, fname, also);
        return false;
    }
    return slice_dim(P, at, fname, x, dim, k, size);
}

/* unbind(input, dim=0): PyTorch's, the tensors of each index of a dense dim of constant size,
 * that dim removed (narrows of 1, squeezed): a tuple assignment or an index takes them apart. */
value build_unbind(parser *P, const call_site *c, value **v) {
    int64_t dim = 0, size;
    int k;
    if (v[1] && !int_arg(P, c->name, "dim", v[1], INT_MIN, INT_MAX, &dim)) return nothing(c);
    rj_node x = as_node(P, v[0]);
    if (P->failed || !whole_dim(P, v[1] ? &v[1]->at : c->fn, c->name, "", x, dim, &k, &size)) return nothing(c);
    value r;
    if (!pieces_begin(P, c, size, &r)) return nothing(c);
    for (int64_t i = 0; i < size && !P->failed; i++)
        P->pieces[P->npieces++] = built(P, rj_graph_squeeze(P->g, built(P, rj_graph_narrow(P->g, x, k, i, 1), c->fn), k), c->fn);
    return r;
}

/* flip(input, dims): PyTorch's, the order of each dim named reversed: a dense dim of constant
 * size by index_select of size - 1 - arange(size); the ragged dim of a jagged tensor, each
 * item's rows reversed, by take_along_dim of len_b - 1 - positions (the largest position less
 * each). */
value build_flip(parser *P, const call_site *c, value **v) {
    rj_node x = as_node(P, v[0]);
    if (P->failed) return nothing(c);
    rj_graph *g = P->g;
    rj_dim shape[RJ_MAX_RANK];
    int rank = rj_node_shape(g, x, shape), dims[RJ_MAX_RANK], n = dim_list(P, c->name, v[1], rank, dims);
    for (int i = 0; i < n && !P->failed; i++) {
        int d = dims[i];
        const node *xn = &g->nodes[x];
        if (d == 1 && node_is_jagged(g, xn) && !node_is_pair(g, xn) && dim_ragged_pos(g, xn) == 1) {
            rj_node pos = index_along(P, c->fn, c->name, x, 1); /* [B, j1, 1..] */
            if (pos == RJ_NONE) return nothing(c);
            rj_node last = rj_graph_reduce(g, RJ_OP_MAX, pos, 1, true); /* len_b - 1: [B, 1, 1..] */
            rj_node idx = rj_graph_binary(g, RJ_OP_SUB, last, pos);
            x = built_as(P, c->fn, c->name, rj_graph_take_along_dim(g, x, built_as(P, c->fn, c->name, idx), 1));
            continue;
        }
        int k;
        int64_t size;
        if (!whole_dim(P, c->fn, c->name, " or the ragged dim of a jagged tensor", x, d, &k, &size)) return nothing(c);
        rj_node idx = rj_graph_binary(g, RJ_OP_SUB, rj_graph_scalar_int(g, size - 1), rj_graph_arange(g, size, RJ_I64));
        x = built_as(P, c->fn, c->name, rj_graph_index_select(g, x, k, built_as(P, c->fn, c->name, idx)));
    }
    return P->failed || !n ? nothing(c) : node_value(x, *c->fn);
}

/* A list of sizes or counts as written: a list, a tuple, or one integer (x.expand(4)); NULL after
 * reporting. */
static const value *size_list(parser *P, const call_site *c, const value *v, value *one, const char *what) {
    if (v->is_list || v->is_tuple) return v;
    const node *s = v->is_size ? NULL : scalar_of(P, v);
    if (!s || s->weak != WEAK_INT) {
        fail_at(P, &v->at, RJ_ERR_PARSE, "%s: the %s must be a list or tuple, or the %s one by one", c->name, what, what);
        return NULL;
    }
    *one = (value){.node = RJ_NONE, .is_tuple = true, .ndims = 1, .at = v->at};
    one->dims[0] = s->ival;
    return one;
}

/* tril and triu (input, diagonal=0): PyTorch's, input with the elements above (tril) or below
 * (triu) the diagonal of its last two dims made 0 (False): where column - row <= diagonal
 * (>= for triu). The rows and columns are aranges of dense dims or each item's positions: the
 * blocks of attention scores [B, j1, j1] ([B, H, j1, j1] per head) take a causal mask so. */
value build_tril(parser *P, const call_site *c, value **v) {
    int64_t k = 0;
    if (v[1] && !int_arg(P, c->name, "diagonal", v[1], INT32_MIN, INT32_MAX, &k)) return nothing(c);
    rj_node x = as_node(P, v[0]);
    if (P->failed) return nothing(c);
    rj_graph *g = P->g;
    rj_dim shape[RJ_MAX_RANK];
    int rank = rj_node_shape(g, x, shape);
    if (rank < 2) {
        fail_at(P, c->fn, RJ_ERR_SHAPE, "%s: the input must have at least 2 dims (it has %d)", c->name, rank);
        return nothing(c);
    }
    rj_node row = index_along(P, c->fn, c->name, x, rank - 2), col = index_along(P, c->fn, c->name, x, rank - 1);
    if (row == RJ_NONE || col == RJ_NONE) return nothing(c);
    rj_node off = rj_graph_binary(g, RJ_OP_SUB, col, row);
    rj_node keep = rj_graph_binary(g, !strcmp(c->name, "tril") ? RJ_OP_LE : RJ_OP_GE,
                                   off, rj_graph_scalar_int(g, k));
    rj_node zero = rj_node_dtype(g, x) == RJ_BOOL ? rj_graph_scalar_bool(g, false) : rj_graph_scalar_int(g, 0);
    return made(P, c, rj_graph_where(g, keep, x, zero));
}

/* expand(input, *sizes): PyTorch's, dims of size 1 broadcast to the sizes given (-1 keeps a dim;
 * new dims may lead), a view; expand_as(input, other): to other's shape, its ragged dims too.
 * Both are where(mask, x, x) with a mask of the broadcast shape: nothing is copied where a
 * consumer fuses. */
value build_expand(parser *P, const call_site *c, value **v) {
    rj_node x = as_node(P, v[0]);
    if (P->failed) return nothing(c);
    rj_graph *g = P->g;
    if (!strcmp(c->name, "expand_as")) {
        rj_node o = as_node(P, v[1]);
        if (P->failed) return nothing(c);
        return made(P, c, rj_graph_where(g, ones_like(g, o, RJ_BOOL), x, x));
    }
    value one;
    const value *sz = size_list(P, c, v[1], &one, "sizes");
    if (!sz) return nothing(c);
    rj_dim shape[RJ_MAX_RANK], mask[RJ_MAX_RANK];
    int rank = rj_node_shape(g, x, shape), n = sz->ndims, lead = n - rank;
    bool any = false;
    if (lead < 0) {
        fail_at(P, &sz->at, RJ_ERR_SHAPE, "expand: %d sizes for a tensor of %d dims (at least as many are needed)", n, rank);
        return nothing(c);
    }
    for (int i = 0; i < n; i++) {
        rj_dim want = sz->dims[i], have = i >= lead ? shape[i - lead] : 1;
        bool keep = sz->is_tuple && !(sz->tuple_syms >> i & 1) && want == -1;
        if (keep && i < lead) {
            fail_at(P, &sz->at, RJ_ERR_SHAPE, "expand: -1 is not allowed for a new leading dim (dim %d)", i);
            return nothing(c);
        }
        mask[i] = 1;
        if (keep || dim_equal(g, want, have)) continue;
        if (have != 1 || (want < 0 && !(sz->is_tuple && (sz->tuple_syms >> i & 1)))) {
            fail_at(P, &sz->at, RJ_ERR_SHAPE, "expand: dim %d has a size other than 1, which expand cannot change "
                    "(PyTorch's repeat copies)", i - lead);
            return nothing(c);
        }
        mask[i] = want, any = true;
    }
    if (!any) return node_value(x, *c->fn);
    int first = 0;
    while (mask[first] == 1) first++;
    return made(P, c, rj_graph_where(g, rj_graph_full(g, n - first, mask + first, 1, RJ_BOOL), x, x));
}

/* repeat(input, *repeats): PyTorch's, the tensor copied repeats[k] times along dim k (new dims
 * of 1 lead where there are more repeats than dims): cat of copies along each dense dim of
 * constant size repeated; the batch and ragged dims of a jagged tensor take only 1. */
value build_repeat(parser *P, const call_site *c, value **v) {
    rj_node x = as_node(P, v[0]);
    if (P->failed) return nothing(c);
    rj_graph *g = P->g;
    value one;
    const value *rp = size_list(P, c, v[1], &one, "counts");
    if (!rp) return nothing(c);
    rj_dim shape[RJ_MAX_RANK];
    int rank = rj_node_shape(g, x, shape), n = rp->ndims;
    if (n < rank) {
        fail_at(P, &rp->at, RJ_ERR_SHAPE, "repeat: %d counts for a tensor of %d dims (at least as many are needed)", n, rank);
        return nothing(c);
    }
    for (int i = 0; i < n - rank && !P->failed; i++) x = built_as(P, c->fn, c->name, rj_graph_unsqueeze(g, x, 0));
    for (int i = 0; i < n && !P->failed; i++) {
        int64_t k = rp->dims[i];
        if ((rp->is_tuple && (rp->tuple_syms >> i & 1)) || k < 1 || k > 64) {
            fail_at(P, &rp->at, RJ_ERR_ARG, "repeat: count %d must be an integer from 1 to 64", i);
            return nothing(c);
        }
        if (k == 1) continue;
        int dk;
        int64_t size;
        if (!whole_dim(P, c->fn, c->name, "", x, i, &dk, &size)) return nothing(c);
        rj_node copies[64];
        for (int64_t j = 0; j < k; j++) copies[j] = x;
        x = built_as(P, c->fn, c->name, rj_graph_cat(g, copies, (int)k, i));
    }
    return P->failed ? nothing(c) : node_value(x, *c->fn);
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

/* arange(end, dtype="i64"), PyTorch's default dtype for integer ends; arange(start, end,
 * step=1, dtype=None) of numbers: ceil((end - start) / step) values start + i step, computed in
 * f64 and converted, i64 for integers and f32 if any of them is a float (PyTorch's). A string
 * second argument is the dtype (arange(n, "f32"), the form before start and step). */
value build_arange(parser *P, const call_site *c, value **v) {
    rj_dim d[RJ_MAX_RANK];
    int n;
    rj_dtype dt;
    if (v[1] && v[1]->is_string && !v[2] && !v[3]) v[3] = v[1], v[1] = NULL;
    if (!v[0]) { /* arange(end=4): a number (a size name only as the first argument) */
        if (!v[1]) {
            fail_at(P, c->fn, RJ_ERR_PARSE, "arange: missing argument 'end'");
            return nothing(c);
        }
        if (!v[2]) v[0] = v[1], v[1] = NULL;
    }
    if (!v[1] && !v[2]) {
        if (!shape_arg(P, c, v[0], d, &n) || !dtype_arg(P, c, v[3], RJ_I64, &dt)) return nothing(c);
        if (n != 1) {
            fail_at(P, &v[0]->at, RJ_ERR_PARSE, "arange: end must be one size (a number or a size name)");
            return nothing(c);
        }
        return made(P, c, rj_graph_arange(P->g, d[0], dt));
    }
    double num[3] = {0, 0, 1};
    bool floats = false;
    for (int i = 0; i < 3; i++) {
        if (!v[i]) continue;
        const node *s = v[i]->is_size ? NULL : scalar_of(P, v[i]);
        if (!s || (s->weak != WEAK_INT && s->weak != WEAK_FLOAT)) {
            fail_at(P, &v[i]->at, RJ_ERR_PARSE, "arange: start, end and step must be numbers (a size name only as "
                    "arange(end))");
            return nothing(c);
        }
        num[i] = s->weak == WEAK_INT ? (double)s->ival : s->fval;
        floats |= s->weak == WEAK_FLOAT;
    }
    if (!v[1]) {
        fail_at(P, c->fn, RJ_ERR_PARSE, "arange: missing argument 'end'");
        return nothing(c);
    }
    double count = num[2] != 0 ? ceil((num[1] - num[0]) / num[2]) : NAN;
    if (!(count >= 0) || count > 0x1p48) {
        fail_at(P, &v[num[2] == 0 ? 2 : 1]->at, RJ_ERR_ARG, "arange: %s", num[2] == 0 ? "step must not be zero"
                : count < 0 ? "end lies on the wrong side of start for the step's sign" : "too many values");
        return nothing(c);
    }
    if (!dtype_arg(P, c, v[3], floats ? RJ_F32 : RJ_I64, &dt)) return nothing(c);
    rj_graph *g = P->g;
    rj_dtype w = floats || dtype_is_float(dt) ? RJ_F64 : RJ_I64;
    rj_node r = rj_graph_arange(g, (rj_dim)count, w);
    rj_node step = w == RJ_I64 ? rj_graph_scalar_int(g, (int64_t)num[2]) : rj_graph_scalar(g, num[2]);
    rj_node start = w == RJ_I64 ? rj_graph_scalar_int(g, (int64_t)num[0]) : rj_graph_scalar(g, num[0]);
    r = rj_graph_binary(g, RJ_OP_ADD, rj_graph_binary(g, RJ_OP_MUL, r, step), start);
    return made(P, c, dt == w ? r : rj_graph_cast(g, r, dt));
}

/* A constant's fill_value: a number or True/False (*val), and the dtype of its kind (PyTorch's
 * default: f32 for a float, i64 for an int, bool); false after reporting. */
static bool fill_value(parser *P, const call_site *c, const value *v, double *val, rj_dtype *kind) {
    const node *s = scalar_of(P, v);
    if (!s) {
        fail_at(P, &v->at, RJ_ERR_PARSE, "%s: fill_value must be a number or True/False", c->name);
        return false;
    }
    *val = s->weak == WEAK_FLOAT ? s->fval : (double)s->ival;
    *kind = s->weak == WEAK_FLOAT ? RJ_F32 : s->weak == WEAK_INT ? RJ_I64 : RJ_BOOL;
    return true;
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
        if (!fill_value(P, c, v[1], &val, &dflt)) return nothing(c);
        dv = v[2];
    }
    if (!shape_arg(P, c, v[0], d, &n) || !dtype_arg(P, c, dv, dflt, &dt)) return nothing(c);
    return made(P, c, rj_graph_full(P->g, n, d, val, dt));
}

/* zeros_like ones_like (input, dtype=None), full_like(input, fill_value, dtype=None): PyTorch's,
 * input's shape (its ragged dims too) every element the value, of input's dtype unless dtype is
 * given; new_zeros new_ones (input, size, dtype=None), new_full(input, size, fill_value,
 * dtype=None): full(size, ...) of input's dtype unless dtype is given. */
value build_like(parser *P, const call_site *c, value **v) {
    bool like = strstr(c->name, "_like") != NULL, filled = strstr(c->name, "full") != NULL;
    rj_node x = as_node(P, v[0]);
    if (P->failed) return nothing(c);
    rj_graph *g = P->g;
    const value *fv = filled ? v[like ? 1 : 2] : NULL, *dv = v[(like ? 1 : 2) + filled];
    double val = strstr(c->name, "ones") != NULL;
    rj_dtype dt;
    if (fv && !fill_value(P, c, fv, &val, &dt)) return nothing(c);
    if (!dtype_arg(P, c, dv, rj_node_dtype(g, x), &dt)) return nothing(c);
    if (!like) {
        rj_dim d[RJ_MAX_RANK];
        int n;
        if (!shape_arg(P, c, v[1], d, &n)) return nothing(c);
        return made(P, c, rj_graph_full(g, n, d, val, dt));
    }
    rj_node k = rj_graph_full(g, 0, NULL, val, dt);
    return made(P, c, rj_graph_where(g, ones_like(g, x, RJ_BOOL), k, k));
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
