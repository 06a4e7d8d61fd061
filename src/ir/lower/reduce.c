/*
 * lower/reduce.c — what the reduction templates share.
 *
 * The axis a reduction or softmax runs over (a dense dim, the ragged dim, or a padded dim
 * whose padding is added in closed form) and how every template of one starts (axis_begin),
 * the combining steps of reductions (their identities are the kit's constants), compensated
 * (Kahan) addition, and the index of an element of an item's tile.
 */
#include <string.h>

#include "kit.h"

/* The ragged class padded along dim 1 of x's expression, or -1. */
static int32_t pad_class(lower *L, int32_t id, rj_dim dim1, uint8_t *seen) {
    const rj_graph *g = L->g;
    const node *n = &g->nodes[id];
    if (seen[id]) return -1;
    seen[id] = 1;
    const fuse_node *f = &L->plan->nodes[id];
    if (f->role != FR_INLINE) return -1;
    if (n->op == RJ_OP_PAD && n->dims[1] == dim1) return root_of(g, g->nodes[n->in[0]].dims[1]);
    for (int k = 0; k < n->nin; k++) {
        const node *o = &g->nodes[n->in[k]];
        if (o->rank != n->rank) continue; /* only operands varying along dim 1 */
        int32_t c = pad_class(L, n->in[k], dim1, seen);
        if (c >= 0) return c;
    }
    return -1;
}

axis_info axis_of(lower *L, const node *root) {
    const rj_graph *g = L->g;
    axis_info ai = {.root = root, .x = &g->nodes[root->in[0]], .axis = root->axis, .cls = -1};
    if (ai.axis != 1 || node_is_pair(g, ai.x)) return ai; /* a pair's columns: lower_pair_columns */
    const sym *s = graph_sym(g, ai.x->dims[1]);
    if (s && s->kind == SYM_RAGGED) {
        ai.items = true;
        ai.cls = root_of(g, ai.x->dims[1]);
        return ai;
    }
    uint8_t *seen = mem_zalloc(L->ctx, (size_t)g->n);
    if (!seen) {
        L->err = RJ_ERR_NOMEM;
        return ai;
    }
    int32_t c = pad_class(L, root->in[0], ai.x->dims[1], seen);
    mem_free(L->ctx, seen, (size_t)g->n);
    if (c >= 0 && dim_equal(g, ai.x->dims[0], sym_dim(g->syms[c].parent))) {
        ai.items = ai.padded = true;
        ai.cls = c;
        ai.L = ai.x->dims[1];
    }
    return ai;
}

/* The axis of a group's reduction or softmax, and its kernel's description: how every axis
 * template starts. */
void axis_begin(lower *L, const fuse_group *gr, red_ctx *rc) {
    const rj_graph *g = L->g;
    const node *root = &g->nodes[gr->root];
    *rc = (red_ctx){.ai = axis_of(L, root)};
    const node *x = rc->ai.x;
    rc->acc_t = dtype_compute(root->dtype); /* 16-bit: accumulated in f32 */
    L->k->heavy = node_is_pair(g, x); /* block addressing on top of the math: more registers */
    sbuf w;
    sbuf_init(&w, L->ctx);
    sbuf_printf(&w, "%s over dim %d of ", op_table[root->op].name, rc->ai.axis);
    print_node_type(&w, g, x);
    if (rc->ai.items) sbuf_puts(&w, rc->ai.padded ? " (padded dim: padding in closed form)" : " (ragged dim)");
    set_what(L, &w);
}

/* The binary op that folds one element into the accumulator of reduction op. */
int combine_fn(rj_op op) {
    switch (op) {
    case RJ_OP_MAX: return RJ_OP_MAXIMUM;
    case RJ_OP_MIN: return RJ_OP_MINIMUM;
    case RJ_OP_PROD: return RJ_OP_MUL;
    default: return RJ_OP_ADD;
    }
}

/* The combining step of a reduction in type t. */
int32_t combine(lower *L, rj_op op, rj_dtype t, int32_t acc, int32_t v) {
    return xbin(L, combine_fn(op), t, acc, v);
}

/* `times` copies of v folded into acc in closed form (times >= 0, an i64 expression). */
int32_t combine_n(lower *L, rj_op op, rj_dtype t, int32_t acc, int32_t v, int32_t times) {
    switch (op) {
    case RJ_OP_MAX:
    case RJ_OP_MIN:
        return xsel(L, xcmp(L, RJ_OP_GT, times, xi(L, 0)), combine(L, op, t, acc, v), acc);
    case RJ_OP_PROD:
        return xbin(L, RJ_OP_MUL, t, acc, xbin(L, RJ_OP_POW, t, v, xcast(L, t, times)));
    default: /* no padding rows add nothing, even when v is infinite or NaN (v * 0 is NaN) */
        return xsel(L, xcmp(L, RJ_OP_GT, times, xi(L, 0)),
                    xbin(L, RJ_OP_ADD, t, acc, xbin(L, RJ_OP_MUL, t, v, xcast(L, t, times))), acc);
    }
}

/* Element of the reduction input at the current index, as the accumulator type. */
int32_t red_input(lower *L, red_ctx *rc, const at *a) {
    L->memo_n = 0;
    return xcast(L, rc->acc_t, value(L, rc->ai.root->in[0], a));
}

static int32_t place_get(lower *L, place p) {
    return p.loc >= 0 ? xlocal(L, p.loc, p.at) : xvar(L, p.at);
}

static void place_set(lower *L, blk *b, place p, int32_t v) {
    if (p.loc >= 0) s_store_local(L, b, p.loc, p.at, v);
    else s_set(L, b, p.at, v);
}

void kahan_add(lower *L, blk *b, rj_dtype t, place acc_at, place c_at, int32_t term) {
    int32_t acc = place_get(L, acc_at), c = place_get(L, c_at);
    int32_t vy = newvar(L, "kterm", t), vs = newvar(L, "ksum", t);
    s_set(L, b, vy, xbin(L, RJ_OP_SUB, t, term, c));
    s_set(L, b, vs, xbin(L, RJ_OP_ADD, t, acc, xvar(L, vy)));
    int32_t sum = xvar(L, vs), y = xvar(L, vy);
    int32_t finite = xcmp(L, RJ_OP_EQ, xbin(L, RJ_OP_SUB, t, sum, sum), xconst(L, t, 0));
    place_set(L, b, c_at, xsel(L, finite, xbin(L, RJ_OP_SUB, t, xbin(L, RJ_OP_SUB, t, sum, acc), y), c));
    place_set(L, b, acc_at, sum);
}

/* The index of element (b, i, flat) of x with its inner dims unflattened from `flat`, in the
 * item's rows (inclass cls) and, in *pad, the same index in the padding rows (outclass). */
at item_element(lower *L, const node *x, int32_t cls, int32_t b, int32_t i, int32_t flat, at *pad) {
    at a = {.rank = x->rank, .inclass = cls, .outclass = -1, .guard = -1};
    a.idx[0] = b;
    a.idx[1] = i;
    int32_t rem = flat;
    for (int d = x->rank - 1; d >= 2; d--) {
        if (d == 2) {
            a.idx[2] = rem;
            break;
        }
        int32_t sz = xsize(L, x->dims[d]);
        a.idx[d] = x->dims[d] == 1 ? xi(L, 0) : xbin(L, LOP_IREM, RJ_I64, rem, sz);
        rem = xbin(L, LOP_IDIV, RJ_I64, rem, sz);
    }
    *pad = a;
    pad->inclass = -1;
    pad->outclass = cls;
    return a;
}

/* Does the group store its padding rows: is the padded softmax itself, or an epilogue other
 * than unpad, materialised? */
bool rows_padded_out(lower *L, const fuse_group *gr) {
    const rj_graph *g = L->g;
    bool out = L->plan->nodes[gr->root].mat;
    for (int32_t m = 0; m < gr->nmembers; m++)
        out |= L->plan->nodes[gr->members[m]].mat && g->nodes[gr->members[m]].op != RJ_OP_UNPAD;
    return out;
}
