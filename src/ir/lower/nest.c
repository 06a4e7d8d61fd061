/*
 * lower/nest.c — the unit loop nests templates start from.
 *
 * Loops carry their mapping (loopir.h): the loops enumerating a kernel's units are `units`,
 * the innermost loop over contiguous memory is `lanes`, everything else `serial`. A unit is
 * a row of a ragged class (rows_open: UD_ROWS) or a flattened dense index (dense_loop:
 * UD_DENSE); element_nest and leading_units put the inner loops inside either.
 */
#include <stdio.h>
#include <string.h>

#include "kit.h"

/* Nested loops over dims[k..end) of an index; the last one is the lanes loop if `vec`. */
void loops_v(lower *L, blk *b, at *a, const rj_dim *dims, int k, int end, body_fn fn,
             void *ud, bool vec) {
    if (k >= end || L->err) {
        if (!L->err) fn(L, b, a, ud);
        return;
    }
    if (dims[k] == 1) {
        a->idx[k] = xi(L, 0);
        loops_v(L, b, a, dims, k + 1, end, fn, ud, vec);
        return;
    }
    char name[16];
    snprintf(name, sizeof name, "d%d", k);
    int32_t v = newvar(L, name, RJ_I64);
    bool lanes = vec && k == end - 1;
    int32_t st = s_for(L, b, v, xi(L, 0), xextent(L, dims, k, a), lanes ? LM_LANES : LM_SERIAL);
    blk inner = NEWBLK;
    a->idx[k] = xvar(L, v);
    L->lanes += lanes;
    loops_v(L, &inner, a, dims, k + 1, end, fn, ud, vec);
    L->lanes -= lanes;
    close_body(L, st, &inner);
}

void loops(lower *L, blk *b, at *a, const rj_dim *dims, int k, int end, body_fn fn, void *ud) {
    loops_v(L, b, a, dims, k, end, fn, ud, true);
}

/* The item loop of a UD_ROWS kernel over class cls, opened in b (its body rn->item); the item
 * variable, the first and one past the last of its rows in [lo, hi) (*i0, *i1), and in *vrow a
 * variable named row for the caller's row loop. */
static int32_t rows_item(lower *L, blk *b, int32_t cls, rows_nest *rn, int32_t *i0, int32_t *i1, const char *row,
                         int32_t *vrow) {
    lkernel *k = L->k;
    k->domain = UD_ROWS;
    k->dom_class = cls;
    int32_t lo = xparam(L, PK_LO, 0, "lo"), hi = xparam(L, PK_HI, 0, "hi");
    int32_t blo = xparam(L, PK_BLO, 0, "blo"), bhi = xparam(L, PK_BHI, 0, "bhi");
    int32_t vb = newvar(L, "b", RJ_I64);
    *vrow = newvar(L, row, RJ_I64);
    rn->for_b = s_for(L, b, vb, blo, bhi, LM_UNITS);
    rn->item = rn->row = NEWBLK;
    int32_t xb = xvar(L, vb);
    int32_t vlb = newvar(L, "start", RJ_I64);
    s_set(L, &rn->item, vlb, xloff(L, cls, xb));
    int32_t start = xvar(L, vlb);
    *i0 = xmax(L, xsub(L, lo, start), xi(L, 0));
    *i1 = xmin(L, xsub(L, hi, start), xsub(L, xloff(L, cls, xadd(L, xb, xi(L, 1))), start));
    return xb;
}

blk *rows_open(lower *L, blk *b, at *a, int32_t cls, rows_nest *rn) {
    int32_t i0, i1, vi, xb = rows_item(L, b, cls, rn, &i0, &i1, "i", &vi);
    rn->for_i = s_for(L, &rn->item, vi, i0, i1, LM_UNITS);
    close_body(L, rn->for_b, &rn->item);
    a->idx[0] = xb;
    a->idx[1] = xvar(L, vi);
    a->inclass = cls;
    return &rn->row;
}

/* rows_open with the rows taken two at a time: the loop runs over the pairs of the item's rows
 * in [lo, hi), the last one a single row where their number is odd; a->idx[1] is the pair's
 * first row, and rn->left the rows from it to the end (1 in a last single row, else at least
 * 2). rows_close closes it. */
blk *rows_open_pairs(lower *L, blk *b, at *a, int32_t cls, rows_nest *rn) {
    int32_t i0, i1, vp, xb = rows_item(L, b, cls, rn, &i0, &i1, "ip", &vp);
    int32_t vi0 = newvar(L, "i0", RJ_I64), vn = newvar(L, "n", RJ_I64);
    s_set(L, &rn->item, vi0, i0);
    s_set(L, &rn->item, vn, xsub(L, i1, xvar(L, vi0))); /* the item's rows here (none: <= 0) */
    int32_t pairs = xbin(L, LOP_IDIV, RJ_I64, xadd(L, xvar(L, vn), xi(L, 1)), xi(L, 2));
    rn->for_i = s_for(L, &rn->item, vp, xi(L, 0), pairs, LM_UNITS);
    close_body(L, rn->for_b, &rn->item);
    int32_t twice = xmul(L, xvar(L, vp), xi(L, 2));
    rn->left = xsub(L, xvar(L, vn), twice);
    a->idx[0] = xb;
    a->idx[1] = xadd(L, xvar(L, vi0), twice);
    a->inclass = cls;
    return &rn->row;
}

/* A kernel whose every unit's work lies in loops over dims [first, stop): those dims, so that
 * a run where they hold no element launches nothing (2^40 rows of [B, j1, 0], or [2^40, 0],
 * would otherwise run 2^40 empty units). Kernels that do not say so run every unit. */
void unit_extent(lower *L, const rj_dim *dims, int first, int stop) {
    lkernel *k = L->k;
    k->unit_rank = stop > first ? stop - first : 0;
    if (k->unit_rank) memcpy(k->unit_dims, dims + first, sizeof(rj_dim) * (size_t)k->unit_rank);
}

void rows_close(lower *L, rows_nest *rn) {
    close_body(L, rn->for_i, &rn->row);
}

/* Unit loop for UD_DENSE over dims[0..n): units flattened; returns the unit block. */
blk *dense_loop(lower *L, blk *b, at *a, const rj_dim *dims, int n, blk *inner, int32_t *fstmt) {
    lkernel *k = L->k;
    k->domain = UD_DENSE;
    k->dom_rank = n;
    memcpy(k->dom_dims, dims, sizeof(rj_dim) * (size_t)n);
    int32_t vu = newvar(L, "u", RJ_I64);
    int32_t lo = xparam(L, PK_LO, 0, "lo"), hi = xparam(L, PK_HI, 0, "hi"); /* in this order */
    *fstmt = s_for(L, b, vu, lo, hi, LM_UNITS);
    *inner = NEWBLK;
    int32_t rem = xvar(L, vu);
    for (int d = n - 1; d >= 0; d--) {
        if (d == 0) {
            a->idx[0] = rem;
            break;
        }
        int32_t sz = xsize(L, dims[d]);
        a->idx[d] = dims[d] == 1 ? xi(L, 0) : xbin(L, LOP_IREM, RJ_I64, rem, sz);
        rem = xbin(L, LOP_IDIV, RJ_I64, rem, sz);
    }
    return inner;
}

/* The kernel's body: units over the rows of a shape (its ragged class's rows when it is jagged,
 * else its leading dims flattened), then loops over dims (of that rank) to the last, a lanes
 * loop, and fn at each full index. */
void element_nest(lower *L, const node *shape, const rj_dim *dims, body_fn fn, void *ud) {
    at a = {.rank = shape->rank, .inclass = -1, .outclass = -1, .guard = -1};
    blk top = NEWBLK;
    if (dim_ragged_pos(L->g, shape) == 1) {
        rows_nest rn;
        blk *in = rows_open(L, &top, &a, root_of(L->g, shape->dims[1]), &rn);
        unit_extent(L, dims, 2, shape->rank);
        loops(L, in, &a, dims, 2, shape->rank, fn, ud);
        rows_close(L, &rn);
    } else {
        blk inner;
        int32_t fs;
        int lead = shape->rank > 0 ? shape->rank - 1 : 0;
        dense_loop(L, &top, &a, dims, lead, &inner, &fs);
        unit_extent(L, dims, lead, shape->rank);
        loops(L, &inner, &a, dims, lead, shape->rank, fn, ud);
        close_body(L, fs, &inner);
    }
    L->k->body = top.first;
}

/* Units over the leading dims of a tensor of shape dims: rows of its class when it is jagged
 * (dims 0 and 1), else dims [0, upto) flattened. Inside each unit, loops (not vectorised) over
 * dims [first, stop) where first is 2 or upto, then fn at the full index. Returns first. */
int leading_units(lower *L, blk *top, const rj_dim *dims, int rank, int upto, int stop,
                  body_fn fn, void *ud) {
    at a = {.rank = rank, .inclass = -1, .outclass = -1, .guard = -1};
    const sym *s = rank > 1 ? graph_sym(L->g, dims[1]) : NULL;
    if (s && s->kind == SYM_RAGGED) {
        rows_nest rn;
        blk *in = rows_open(L, top, &a, root_of(L->g, dims[1]), &rn);
        unit_extent(L, dims, 2, stop);
        loops_v(L, in, &a, dims, 2, stop, fn, ud, false);
        rows_close(L, &rn);
        return 2;
    }
    blk inner;
    int32_t fs;
    dense_loop(L, top, &a, dims, upto, &inner, &fs);
    unit_extent(L, dims, upto, stop);
    loops_v(L, &inner, &a, dims, upto, stop, fn, ud, false);
    close_body(L, fs, &inner);
    return upto;
}
