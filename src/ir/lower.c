/*
 * lower.c — lowering: the fused graph becomes loop IR.
 *
 * Every node is evaluated "at an index": value(n, at) returns a loop-IR expression computing
 * element `at` of node n. Inline nodes expand recursively into their operands (broadcast dims
 * read index 0); nodes computed by other kernels, and inputs, are loads. The index carries
 * what is known about the padded dim, which is how padding disappears:
 *
 *   at.inclass = c   idx[1] < len_b for ragged class c: pad(x) of class c reads x directly,
 *                    with no predicate (this is unpad(f(pad(x))) == f(x));
 *   at.outclass = c  idx[1] >= len_b: pad(x) of class c is its padding value, no load at all;
 *   otherwise        pad(x) is (i < len_b ? x : v), every load under it guarded.
 *
 * Reductions and softmax over a padded dim therefore split their axis loop in two: rows
 * i < len_b, evaluated with inclass, and the padding rows, evaluated with outclass. When the
 * padding rows' value does not depend on i (the usual case: the padding value combined with
 * per-item or per-column operands) their contribution is added in closed form — sum adds
 * (L - len_b) * v, max folds v in once, prod multiplies by v^(L - len_b), softmax adds
 * (L - len_b) * exp(v - m) — so the padding costs O(1) per item instead of O(L - len_b).
 *
 * Kernel templates (see loopir.h for unit domains and loop mappings):
 *   map      one pass over an output domain writing every output of that domain
 *   reduce   over the ragged or padded dim: per (item, inner tile), one accumulator per lane
 *            of the tile in a thread-local array, folded over the serial row loop; over a
 *            dense dim: per leading index, `reduce` statements over a lanes loop
 *   softmax  max pass, sum-of-exp pass, write pass (same split as reduce)
 *   norm     mean (and variance) passes over the normalised block, `reduce` statements over
 *            its innermost (lanes) loop, then the write pass
 * Each root kernel finishes by computing its epilogue (fused elementwise consumers) from the
 * root's value and storing every materialised node of its group.
 *
 * Loops carry their mapping: the loops enumerating a kernel's units are `units`, the innermost
 * loop over contiguous memory is `lanes`, everything else `serial`. Which template serves an
 * op family, and the launch shape recorded on each kernel, come from the target descriptor;
 * today one template serves every target (a thread runs a contiguous chunk of units), and the
 * descriptor decides the block size of SIMT launches.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "loopir.h"
#include "passes.h"

typedef struct at {
    int rank;
    int32_t idx[RJ_MAX_RANK];
    int32_t inclass;  /* idx[1] < len_b of this class (root sym), or -1 */
    int32_t outclass; /* idx[1] >= len_b of this class, or -1 */
    int32_t guard;    /* loads are guarded by this bool expression, or -1 */
} at;

typedef struct memo_ent {
    int32_t node;
    uint64_t key;
    int32_t expr;
} memo_ent;

typedef struct lower {
    rj_ctx *ctx;
    const rj_graph *g, *orig;
    const fuse_plan *plan;
    const target_desc *desc;
    lprog *prog;
    int32_t *bufof;     /* node -> first buffer holding it, or -1 */
    lkernel *k;
    int32_t group;      /* group being lowered */
    int32_t group2;     /* a group lowered into the same kernel (a GEMM before a softmax), or -1 */
    int32_t *merged;    /* per group: the GEMM group whose epilogue kernel computes it, or -1 */
    int32_t chunk_root, chunk_buf; /* the product read from a GEMM's chunk C, or -1 */
    rj_dim chunk_cols;
    rj_status err;
    int32_t subst_node, subst_expr; /* the root's value while lowering its epilogue */
    memo_ent *memo;
    int32_t memo_cap, memo_n;
    int lanes;          /* lanes loops around the statements being built */
} lower;

static launch_shape launch_for(const target_desc *d);
static void group_for(lower *L, lkernel *k);
static void lower_axis(lower *L, const fuse_group *gr);

typedef struct blk {
    int32_t first, last;
} blk;

#define NEWBLK ((blk){-1, -1})

/* ---- expressions --------------------------------------------------------------------------- */

static int32_t X(lower *L, lx e) {
    if (L->err) return 0;
    int32_t id = lk_expr(L->k, &e);
    if (id < 0) {
        L->err = RJ_ERR_NOMEM;
        return 0;
    }
    return id;
}

/* After a failure, expressions may not exist: a placeholder keeps the lowering going until
 * it returns the error. */
static const lx *E(lower *L, int32_t id) {
    static const lx none = {.kind = LX_CONST, .type = RJ_I64, .a = -1, .b = -1, .c = -1, .ref = -1};
    return L->err || id < 0 || id >= L->k->nex ? &none : &L->k->ex[id];
}

static bool is_const(lower *L, int32_t id, int64_t v) {
    const lx *e = E(L, id);
    return e->kind == LX_CONST && e->type == RJ_I64 && e->i == v;
}

static int32_t xi(lower *L, int64_t v) {
    return X(L, (lx){.kind = LX_CONST, .type = RJ_I64, .i = v, .a = -1, .b = -1, .c = -1, .ref = -1});
}

/* Opens kernel `name` of the program as the one being lowered (a group's first kernel, or a
 * further one of a template of several): the target's launch shape, and expression 0, so
 * that failed helpers can return it. False, with L->err set, when out of memory. */
static bool open_kernel(lower *L, const char *name) {
    if (!(L->k = lprog_add_kernel(L->prog, name))) {
        L->err = RJ_ERR_NOMEM;
        return false;
    }
    L->k->launch = launch_for(L->desc);
    xi(L, 0);
    return true;
}

static int32_t xconst(lower *L, rj_dtype t, double f) {
    lx e = {.kind = LX_CONST, .type = (uint8_t)t, .a = -1, .b = -1, .c = -1, .ref = -1};
    if (dtype_is_float(t)) e.f = t == RJ_F32 ? (double)(float)f : f;
    else if (t == RJ_BOOL) e.i = f != 0 || isnan(f);
    else e.i = cast_float_to_int(f, t); /* as the interpreter converts: saturating */
    return X(L, e);
}

/* An integer constant of type t, never through a double: i64 literals above 2^53 stay exact,
 * and an integer becomes an f32 with one rounding (as sitofp), not two. i32 wraps, as the
 * generated code's conversion does. */
static int32_t xconst_int(lower *L, rj_dtype t, int64_t v) {
    lx e = {.kind = LX_CONST, .type = (uint8_t)t, .a = -1, .b = -1, .c = -1, .ref = -1};
    if (t == RJ_F32) e.f = (double)(float)v;
    else if (t == RJ_F64) e.f = (double)v;
    else if (t == RJ_BOOL) e.i = v != 0;
    else e.i = t == RJ_I32 ? (int64_t)(int32_t)(uint32_t)(uint64_t)v : v;
    return X(L, e);
}

/* The smallest / largest value of t (identities of max / min). */
static int32_t xextreme(lower *L, rj_dtype t, bool lowest) {
    lx e = {.kind = LX_CONST, .type = (uint8_t)t, .a = -1, .b = -1, .c = -1, .ref = -1};
    switch (t) {
    case RJ_BOOL: e.i = !lowest; break;
    case RJ_I32: e.i = lowest ? INT32_MIN : INT32_MAX; break;
    case RJ_I64: e.i = lowest ? INT64_MIN : INT64_MAX; break;
    default: e.f = lowest ? -INFINITY : INFINITY; break;
    }
    return X(L, e);
}

static int32_t xparam(lower *L, param_kind kind, int32_t ref, const char *name) {
    if (L->err) return 0;
    int32_t p = lk_param(L->k, kind, ref, RJ_I64, name);
    if (p < 0) {
        L->err = RJ_ERR_NOMEM;
        return 0;
    }
    return X(L, (lx){.kind = LX_PARAM, .type = RJ_I64, .ref = p, .a = -1, .b = -1, .c = -1});
}

static int32_t xvar(lower *L, int32_t v) {
    if (L->err) return 0;
    return X(L, (lx){.kind = LX_VAR, .type = L->k->vars[v].type, .ref = v, .a = -1, .b = -1, .c = -1});
}

static int32_t newvar(lower *L, const char *name, rj_dtype t) {
    if (L->err) return 0;
    int32_t v = lk_var(L->k, name, t);
    if (v < 0) L->err = RJ_ERR_NOMEM;
    return v < 0 ? 0 : v;
}

/* u where p = idiv(u, m) * m (or m * idiv(u, m)) and r = irem(u, m), else -1: the unit's
 * index back from its row and column (pads address their output by both). */
static int32_t divmod_whole(lower *L, int32_t p, int32_t r) {
    const lx *x = E(L, p), *y = E(L, r);
    if (x->kind != LX_BINARY || x->fn != RJ_OP_MUL || y->kind != LX_BINARY || y->fn != LOP_IREM) return -1;
    for (int side = 0; side < 2; side++) {
        const lx *q = E(L, side ? x->b : x->a);
        int32_t m = side ? x->a : x->b;
        if (q->kind == LX_BINARY && q->fn == LOP_IDIV && q->b == m && y->a == q->a && y->b == m) return q->a;
    }
    return -1;
}

static int32_t xbin(lower *L, int fn, rj_dtype t, int32_t a, int32_t b) {
    if (t == RJ_I64 && !L->err) { /* fold index arithmetic, for readable dumps */
        const lx *x = E(L, a), *y = E(L, b);
        bool cx = x->kind == LX_CONST, cy = y->kind == LX_CONST;
        if (cx && cy) {
            /* wrapping, as the interpreter and the generated code compute i64 arithmetic */
            int64_t p = x->i, q = y->i;
            uint64_t up = (uint64_t)p, uq = (uint64_t)q;
            switch (fn) {
            case RJ_OP_ADD: return xi(L, (int64_t)(up + uq));
            case RJ_OP_SUB: return xi(L, (int64_t)(up - uq));
            case RJ_OP_MUL: return xi(L, (int64_t)(up * uq));
            case RJ_OP_MINIMUM: return xi(L, p < q ? p : q);
            case RJ_OP_MAXIMUM: return xi(L, p > q ? p : q);
            case LOP_IDIV:
                if (p >= 0 && q > 0) return xi(L, p / q);
                break;
            default: break;
            }
        }
        if (fn == RJ_OP_ADD && is_const(L, a, 0)) return b;
        if (fn == RJ_OP_ADD) { /* idiv(u, m) * m + irem(u, m) = u (truncating division) */
            int32_t u = divmod_whole(L, a, b);
            if (u < 0) u = divmod_whole(L, b, a);
            if (u >= 0) return u;
        }
        if ((fn == RJ_OP_ADD || fn == RJ_OP_SUB) && is_const(L, b, 0)) return a;
        if (fn == RJ_OP_MUL && is_const(L, a, 1)) return b;
        if ((fn == RJ_OP_MUL || fn == LOP_IDIV) && is_const(L, b, 1)) return a;
        if (fn == RJ_OP_MUL && (is_const(L, a, 0) || is_const(L, b, 0))) return xi(L, 0);
    }
    return X(L, (lx){.kind = LX_BINARY, .type = (uint8_t)t, .fn = (uint16_t)fn, .a = a, .b = b,
                     .c = -1, .ref = -1});
}

static int32_t xfma(lower *L, rj_dtype t, int32_t a, int32_t b, int32_t c) {
    return X(L, (lx){.kind = LX_BINARY, .type = (uint8_t)t, .fn = LOP_FMA, .a = a, .b = b, .c = c,
                     .ref = -1});
}

static int32_t xun(lower *L, int fn, rj_dtype t, int32_t a) {
    return X(L, (lx){.kind = LX_UNARY, .type = (uint8_t)t, .fn = (uint16_t)fn, .a = a, .b = -1,
                     .c = -1, .ref = -1});
}

static int32_t xcmp(lower *L, int fn, int32_t a, int32_t b) {
    return X(L, (lx){.kind = LX_CMP, .type = RJ_BOOL, .fn = (uint16_t)fn, .a = a, .b = b, .c = -1,
                     .ref = -1});
}

static int32_t xsel(lower *L, int32_t c, int32_t a, int32_t b) {
    return X(L, (lx){.kind = LX_SELECT, .type = E(L, a)->type, .a = c, .b = a, .c = b, .ref = -1});
}

static int32_t xcast(lower *L, rj_dtype t, int32_t a) {
    if (L->err || E(L, a)->type == t) return a;
    const lx *c = E(L, a);
    if (c->kind == LX_CONST && dtype_is_float(t)) /* literals: fold the conversion */
        return dtype_is_float((rj_dtype)c->type) ? xconst(L, t, c->f) : xconst_int(L, t, c->i);
    return X(L, (lx){.kind = LX_CAST, .type = (uint8_t)t, .a = a, .b = -1, .c = -1, .ref = -1});
}

static int32_t xmin(lower *L, int32_t a, int32_t b) { return xbin(L, RJ_OP_MINIMUM, RJ_I64, a, b); }
static int32_t xmax(lower *L, int32_t a, int32_t b) { return xbin(L, RJ_OP_MAXIMUM, RJ_I64, a, b); }
static int32_t xadd(lower *L, int32_t a, int32_t b) { return xbin(L, RJ_OP_ADD, RJ_I64, a, b); }
static int32_t xsub(lower *L, int32_t a, int32_t b) { return xbin(L, RJ_OP_SUB, RJ_I64, a, b); }
static int32_t xmul(lower *L, int32_t a, int32_t b) { return xbin(L, RJ_OP_MUL, RJ_I64, a, b); }

static int32_t xload(lower *L, int32_t param, int32_t idx, rj_dtype t, int32_t guard) {
    int32_t dflt = guard >= 0 ? xconst(L, t, 0) : -1;
    return X(L, (lx){.kind = LX_LOAD, .type = (uint8_t)t, .fn = MEM_PARAM, .ref = param, .a = idx,
                     .b = guard, .c = dflt});
}

/* Element idx of local array loc. */
static int32_t xlocal(lower *L, int32_t loc, int32_t idx) {
    if (L->err) return 0;
    return X(L, (lx){.kind = LX_LOAD, .type = L->k->locals[loc].dtype, .fn = MEM_LOCAL, .ref = loc,
                     .a = idx, .b = -1, .c = -1});
}

/* ---- statements ---------------------------------------------------------------------------- */

static int32_t put(lower *L, blk *b, ls s) {
    if (L->err) return -1;
    s.next = -1;
    int32_t id = lk_stmt(L->k, &s);
    if (id < 0) {
        L->err = RJ_ERR_NOMEM;
        return -1;
    }
    if (b->last >= 0) L->k->st[b->last].next = id;
    else b->first = id;
    b->last = id;
    return id;
}

static void s_set(lower *L, blk *b, int32_t var, int32_t val) {
    put(L, b, (ls){.kind = LS_SET, .var = var, .a = val, .b = -1, .ref = -1, .body = -1, .els = -1});
}

static void s_store(lower *L, blk *b, int32_t param, int32_t idx, int32_t val, uint8_t flags) {
    put(L, b, (ls){.kind = LS_STORE, .flags = flags, .mem = MEM_PARAM, .var = -1, .a = idx, .b = val,
                   .ref = param, .body = -1, .els = -1});
    if (!L->err) L->k->params[param].written = 1;
}

static void s_store_local(lower *L, blk *b, int32_t loc, int32_t idx, int32_t val) {
    put(L, b, (ls){.kind = LS_STORE, .mem = MEM_LOCAL, .var = -1, .a = idx, .b = val, .ref = loc,
                   .body = -1, .els = -1});
}

static int32_t s_for(lower *L, blk *b, int32_t var, int32_t lo, int32_t hi, loop_map map) {
    return put(L, b, (ls){.kind = LS_FOR, .map = (uint8_t)map, .var = var, .a = lo, .b = hi,
                          .ref = -1, .body = -1, .els = -1});
}

/* Opens "if c { ... }" in into. */
static int32_t s_if(lower *L, blk *into, blk *body, int32_t c) {
    *body = NEWBLK;
    return put(L, into, (ls){.kind = LS_IF, .var = -1, .a = c, .b = -1, .ref = -1, .body = -1, .els = -1});
}

/* var = var fn val, as a `reduce` when a lanes loop encloses it (a reduction over the lanes),
 * else as a plain assignment (a serial fold). fn: RJ_OP_ADD, _MUL, _MAXIMUM or _MINIMUM. */
static void s_accum(lower *L, blk *b, int32_t var, int fn, int32_t val) {
    if (L->lanes > 0) {
        put(L, b, (ls){.kind = LS_REDUCE, .fn = (uint16_t)fn, .var = var, .a = val, .b = -1,
                       .ref = -1, .body = -1, .els = -1});
        return;
    }
    s_set(L, b, var, xbin(L, fn, L->k->vars[var].type, xvar(L, var), val));
}

/* var = x * y + var with one rounding where the target has a fused multiply-add. */
static void s_accum_fma(lower *L, blk *b, int32_t var, int32_t x, int32_t y) {
    if (L->lanes > 0) {
        put(L, b, (ls){.kind = LS_REDUCE, .flags = LF_FMA, .fn = RJ_OP_ADD, .var = var, .a = x,
                       .b = y, .ref = -1, .body = -1, .els = -1});
        return;
    }
    s_set(L, b, var, xfma(L, L->k->vars[var].type, x, y, xvar(L, var)));
}

static void close_body(lower *L, int32_t stmt, const blk *inner) {
    if (!L->err && stmt >= 0) L->k->st[stmt].body = inner->first;
}

/* ---- sizes, offsets, addresses ------------------------------------------------------------- */

static int32_t root_of(const rj_graph *g, rj_dim d) { return sym_root(g, dim_sym(d)); }

static int32_t xsize(lower *L, rj_dim d) {
    if (d >= 0) return xi(L, d);
    const sym *s = graph_sym(L->g, d);
    return xparam(L, PK_SIZE, dim_sym(d), s->name);
}

static int32_t loff_param(lower *L, int32_t cls) {
    char name[64];
    snprintf(name, sizeof name, "%s.loff", L->g->syms[cls].name);
    if (L->err) return 0;
    int32_t p = lk_param(L->k, PK_LOFF, cls, RJ_I64, name);
    if (p < 0) L->err = RJ_ERR_NOMEM;
    return p < 0 ? 0 : p;
}

static int32_t xloff(lower *L, int32_t cls, int32_t b) {
    return xload(L, loff_param(L, cls), b, RJ_I64, -1);
}

static int32_t xlen(lower *L, int32_t cls, int32_t b) {
    return xsub(L, xloff(L, cls, xadd(L, b, xi(L, 1))), xloff(L, cls, b));
}

/* The first row of item b's len_b x len_b block, for tensors with two ragged dims. */
static int32_t xsq(lower *L, int32_t cls, int32_t b) {
    char name[64];
    snprintf(name, sizeof name, "%s.sq", L->g->syms[cls].name);
    int32_t p = L->err ? 0 : lk_param(L->k, PK_SQOFF, cls, RJ_I64, name);
    if (p < 0) {
        L->err = RJ_ERR_NOMEM;
        p = 0;
    }
    return xload(L, p, b, RJ_I64, -1);
}

/* The extent of dim k of dims at index a: the item's length for the second ragged dim of a
 * pair ([B, j1, j1]); the size otherwise. */
static int32_t xextent(lower *L, const rj_dim *dims, int k, const at *a) {
    const sym *s = k == 1 || k == 2 ? graph_sym(L->g, dims[k]) : NULL;
    if (s && s->kind == SYM_RAGGED) return xlen(L, root_of(L->g, dims[k]), a->idx[0]);
    return xsize(L, dims[k]);
}

/* Physical row of buffer bi at item b, row i. */
static int32_t xrow(lower *L, int32_t bi, int32_t b, int32_t i) {
    const lbuf *lb = &L->prog->bufs[bi];
    int32_t s = dim_sym(lb->dims[1]);
    if (lb->kind == LB_TEMP) return xadd(L, xloff(L, sym_root(L->g, s), b), i);
    char name[64];
    snprintf(name, sizeof name, "%s.off", L->g->syms[s].name);
    int32_t p = L->err ? 0 : lk_param(L->k, PK_OFF, s, RJ_I64, name);
    if (p < 0) {
        L->err = RJ_ERR_NOMEM;
        p = 0;
    }
    return xadd(L, xload(L, p, b, RJ_I64, -1), i);
}

static int32_t xaddr(lower *L, int32_t bi, const at *a) {
    const lbuf *lb = &L->prog->bufs[bi];
    int32_t off = xi(L, 0), k = 0;
    const sym *s = lb->rank > 1 ? graph_sym(L->g, lb->dims[1]) : NULL;
    const sym *s2 = lb->rank > 2 ? graph_sym(L->g, lb->dims[2]) : NULL;
    if (s && s->kind == SYM_RAGGED && s2 && s2->kind == SYM_RAGGED) { /* blocks of len x len rows */
        int32_t c = root_of(L->g, lb->dims[1]);
        off = xadd(L, xsq(L, c, a->idx[0]), xadd(L, xmul(L, a->idx[1], xlen(L, c, a->idx[0])), a->idx[2]));
        for (k = 3; k < lb->rank; k++) off = xadd(L, xmul(L, off, xsize(L, lb->dims[k])), a->idx[k]);
        return off;
    }
    if (s && s->kind == SYM_RAGGED) {
        off = xrow(L, bi, a->idx[0], a->idx[1]);
        k = 2;
    }
    for (; k < lb->rank; k++) off = xadd(L, xmul(L, off, xsize(L, lb->dims[k])), a->idx[k]);
    return off;
}

static int32_t buf_param(lower *L, int32_t bi) {
    if (L->err) return 0;
    const lbuf *lb = &L->prog->bufs[bi];
    char name[64];
    const rj_graph *g = L->g;
    switch (lb->kind) {
    case LB_INPUT: snprintf(name, sizeof name, "%s", g->nodes[g->inputs[lb->index]].name); break;
    case LB_OUTPUT: snprintf(name, sizeof name, "%s", g->outputs[lb->index].name); break;
    case LB_PIECES: snprintf(name, sizeof name, "pieces"); break;
    case LB_CHUNK: snprintf(name, sizeof name, "chunk_%c", lb->index ? 'c' : 'a'); break;
    default: snprintf(name, sizeof name, "t%d", lb->index); break;
    }
    int32_t p = lk_param(L->k, PK_BUF, bi, (rj_dtype)lb->dtype, name);
    if (p < 0) L->err = RJ_ERR_NOMEM;
    return p < 0 ? 0 : p;
}

/* ---- values at an index -------------------------------------------------------------------- */

static int32_t value(lower *L, int32_t n, const at *a);

static at operand_at(lower *L, const node *n, const node *o, const at *a) {
    at r = {.rank = o->rank, .inclass = -1, .outclass = -1, .guard = a->guard};
    int shift = n->rank - o->rank;
    for (int k = 0; k < o->rank; k++) r.idx[k] = o->dims[k] == 1 ? xi(L, 0) : a->idx[shift + k];
    if (shift == 0) {
        r.inclass = a->inclass;
        r.outclass = a->outclass;
    }
    return r;
}

static int32_t load_node(lower *L, int32_t n, const at *a) {
    int32_t bi = L->bufof[n];
    if (bi < 0) {
        L->err = RJ_ERR_INTERNAL;
        ctx_fail(L->ctx, RJ_ERR_INTERNAL, "lower: node %d is read but never written", n);
        return 0;
    }
    return xload(L, buf_param(L, bi), xaddr(L, bi, a), (rj_dtype)L->prog->bufs[bi].dtype, a->guard);
}

static int32_t truth(lower *L, int32_t e) {
    return xcast(L, RJ_BOOL, e);
}

static int32_t operand(lower *L, const node *n, int k, const at *a, rj_dtype t) {
    const node *o = &L->g->nodes[n->in[k]];
    at oa = operand_at(L, n, o, a);
    return xcast(L, t, value(L, n->in[k], &oa));
}

static int32_t pad_value(lower *L, const node *n, const at *a) {
    const rj_graph *g = L->g;
    const node *x = &g->nodes[n->in[0]];
    int32_t cls = root_of(g, x->dims[1]);
    int32_t pv = xconst(L, n->dtype, n->fval);
    if (a->outclass == cls) return pv;
    at xa = *a;
    xa.inclass = cls;
    xa.outclass = -1;
    /* a pair [B, j1, j1] padded to [B, L, L]: the column is inside too, or it is padding */
    int32_t in_col = node_is_pair(g, x) ? xcmp(L, RJ_OP_LT, a->idx[2], xlen(L, cls, a->idx[0])) : -1;
    if (a->inclass == cls && in_col < 0) return value(L, n->in[0], &xa);
    int32_t in_row = a->inclass == cls ? in_col : xcmp(L, RJ_OP_LT, a->idx[1], xlen(L, cls, a->idx[0]));
    if (in_col >= 0 && a->inclass != cls) in_row = xbin(L, RJ_OP_LOGICAL_AND, RJ_BOOL, in_row, in_col);
    xa.guard = a->guard >= 0 ? xbin(L, RJ_OP_LOGICAL_AND, RJ_BOOL, a->guard, in_row) : in_row;
    return xsel(L, in_row, value(L, n->in[0], &xa), pv);
}

/* ---- index ops and views -------------------------------------------------------------------
 * An index op evaluates its index at the output's position, then its source at the position
 * the index names: the source is any expression (an input, a value another kernel wrote, an
 * inline producer recomputed there). The load is guarded by the index's range test, so an
 * index out of range reads nothing (its check kernel reports it, below). */

/* The size index op n's indices must stay below at item b (an index into a ragged dim is
 * bounded by its item's length). */
static int32_t index_bound(lower *L, const node *n, int32_t b) {
    const node *x = &L->g->nodes[n->in[0]];
    rj_dim d = x->dims[n->op == RJ_OP_EMBEDDING ? 0 : n->axis];
    const sym *s = graph_sym(L->g, d);
    if (s && s->kind == SYM_RAGGED) return xlen(L, root_of(L->g, d), b);
    return xsize(L, d);
}

static int32_t index_ok(lower *L, int32_t iv, int32_t bound) {
    return xbin(L, RJ_OP_LOGICAL_AND, RJ_BOOL, xcmp(L, RJ_OP_GE, iv, xi(L, 0)), xcmp(L, RJ_OP_LT, iv, bound));
}

static int32_t index_value(lower *L, int32_t id, const at *a) {
    const rj_graph *g = L->g;
    const node *n = &g->nodes[id];
    if (n->op == RJ_OP_POSITIONS) return a->idx[1];
    const node *x = &g->nodes[n->in[0]], *ix = &g->nodes[n->in[1]];
    at ia = {.rank = ix->rank, .inclass = -1, .outclass = -1, .guard = a->guard};
    if (n->op == RJ_OP_EMBEDDING) { /* the index has the output's leading dims */
        memcpy(ia.idx, a->idx, sizeof(int32_t) * ix->rank);
        if (ix->rank >= 2) ia.inclass = a->inclass, ia.outclass = a->outclass;
    } else if (n->op == RJ_OP_INDEX_SELECT) {
        ia.idx[0] = a->idx[n->axis];
    } else {
        ia = operand_at(L, n, ix, a);
    }
    int32_t iv = xcast(L, RJ_I64, value(L, n->in[1], &ia));
    int32_t ok = index_ok(L, iv, index_bound(L, n, a->idx[0]));
    at xa;
    if (n->op == RJ_OP_EMBEDDING) {
        xa = (at){.rank = 2, .inclass = -1, .outclass = -1};
        xa.idx[0] = iv;
        xa.idx[1] = a->idx[n->rank - 1];
    } else {
        xa = n->op == RJ_OP_TAKE_ALONG_DIM ? operand_at(L, n, x, a) : *a;
        xa.rank = x->rank;
        xa.idx[n->axis] = iv;
        if (n->axis == 1) { /* dim 1 now follows the index: within the item if it is ragged */
            const sym *s = graph_sym(g, x->dims[1]);
            xa.inclass = s && s->kind == SYM_RAGGED ? root_of(g, x->dims[1]) : -1;
            xa.outclass = -1;
        }
    }
    xa.guard = a->guard >= 0 ? xbin(L, RJ_OP_LOGICAL_AND, RJ_BOOL, a->guard, ok) : ok;
    return value(L, n->in[0], &xa);
}

/* reshape: the kept dims (batch and ragged) read through; the rest is renumbered. Where only
 * dims of size 1 come and go (unsqueeze, squeeze) the others map one to one; otherwise through
 * the flat index of the re-laid-out dims. */
static int32_t view_value(lower *L, int32_t id, const at *a) {
    const rj_graph *g = L->g;
    const node *n = &g->nodes[id], *x = &g->nodes[n->in[0]];
    if (n->op == RJ_OP_TRANSPOSE) { /* x at the position with dims axis < ival swapped */
        at xa = *a;
        xa.idx[n->axis] = a->idx[n->ival];
        xa.idx[n->ival] = a->idx[n->axis];
        if (n->axis <= 1) xa.inclass = xa.outclass = -1; /* they describe idx[1] */
        return value(L, n->in[0], &xa);
    }
    bool to_col = node_is_column(g, n), from_col = node_is_column(g, x);
    if (to_col != from_col) { /* unsqueeze(x, 1) or squeeze(x, 1): (b, 0, j, ...) is (b, j, ...) */
        at xa = {.rank = x->rank, .inclass = -1, .outclass = -1, .guard = a->guard};
        xa.idx[0] = a->idx[0];
        if (to_col) {
            for (int k = 1; k < x->rank; k++) xa.idx[k] = a->idx[k + 1];
        } else {
            xa.idx[1] = xi(L, 0);
            for (int k = 1; k < n->rank; k++) xa.idx[k + 1] = a->idx[k];
        }
        return value(L, n->in[0], &xa);
    }
    int keep = dim_ragged_pos(g, x) >= 0 ? 2 : 0;
    at xa = {.rank = x->rank, .inclass = keep ? a->inclass : -1, .outclass = keep ? a->outclass : -1,
             .guard = a->guard};
    for (int k = 0; k < keep; k++) xa.idx[k] = a->idx[k];
    int on[RJ_MAX_RANK], xn[RJ_MAX_RANK], no = 0, nx = 0;
    for (int k = keep; k < n->rank; k++)
        if (n->dims[k] != 1) on[no++] = k;
    for (int k = keep; k < x->rank; k++)
        if (x->dims[k] != 1) xn[nx++] = k;
    bool direct = no == nx;
    for (int i = 0; direct && i < no; i++) direct = dim_equal(g, n->dims[on[i]], x->dims[xn[i]]);
    for (int k = keep; k < x->rank; k++) xa.idx[k] = xi(L, 0);
    if (direct) {
        for (int i = 0; i < no; i++) xa.idx[xn[i]] = a->idx[on[i]];
    } else {
        int32_t flat = xi(L, 0);
        for (int k = keep; k < n->rank; k++) flat = xadd(L, xmul(L, flat, xsize(L, n->dims[k])), a->idx[k]);
        for (int k = x->rank - 1; k > keep; k--) {
            int32_t sz = xsize(L, x->dims[k]);
            xa.idx[k] = xbin(L, LOP_IREM, RJ_I64, flat, sz);
            flat = xbin(L, LOP_IDIV, RJ_I64, flat, sz);
        }
        if (x->rank > keep) xa.idx[keep] = flat;
    }
    return value(L, n->in[0], &xa);
}

static int32_t compute(lower *L, int32_t id, const at *a) {
    const rj_graph *g = L->g;
    const node *n = &g->nodes[id];
    rj_dtype ct = node_compute_dtype(g, n);
    switch (op_table[n->op].kind) {
    case KIND_LEAF: /* literals; inputs are loaded by value() */
        return n->weak == WEAK_FLOAT ? xconst(L, RJ_F64, n->fval) : xconst_int(L, n->dtype, n->ival);
    case KIND_UNARY:
        if (n->op == RJ_OP_LOGICAL_NOT) return xun(L, RJ_OP_LOGICAL_NOT, RJ_BOOL, truth(L, operand(L, n, 0, a, ct)));
        return xun(L, n->op, ct, operand(L, n, 0, a, ct));
    case KIND_BINARY:
        return xbin(L, n->op, ct, operand(L, n, 0, a, ct), operand(L, n, 1, a, ct));
    case KIND_COMPARE:
        if (n->op == RJ_OP_LOGICAL_AND || n->op == RJ_OP_LOGICAL_OR) {
            int32_t p = truth(L, operand(L, n, 0, a, g->nodes[n->in[0]].dtype));
            int32_t q = truth(L, operand(L, n, 1, a, g->nodes[n->in[1]].dtype));
            return xbin(L, n->op, RJ_BOOL, p, q);
        }
        return xcmp(L, n->op, operand(L, n, 0, a, ct), operand(L, n, 1, a, ct));
    case KIND_SELECT:
        if (n->op == RJ_OP_WHERE)
            return xsel(L, operand(L, n, 0, a, RJ_BOOL), operand(L, n, 1, a, ct), operand(L, n, 2, a, ct));
        return xsel(L, operand(L, n, 1, a, RJ_BOOL), xconst(L, n->dtype, n->fval),
                    operand(L, n, 0, a, n->dtype));
    case KIND_CAST: return operand(L, n, 0, a, n->dtype);
    case KIND_PAD:
        if (n->op == RJ_OP_PAD) return pad_value(L, n, a);
        {
            at pa = *a;
            pa.inclass = root_of(g, (rj_dim)n->ival);
            pa.outclass = -1;
            return value(L, n->in[0], &pa);
        }
    case KIND_INDEX: return index_value(L, id, a);
    case KIND_VIEW: return view_value(L, id, a);
    default:
        L->err = RJ_ERR_INTERNAL;
        ctx_fail(L->ctx, RJ_ERR_INTERNAL, "lower: %s node %d cannot be computed inline",
                 op_table[n->op].name, id);
        return 0;
    }
}

static uint64_t at_key(const at *a) {
    uint64_t h = hash_mix(0x51ed27ull, (uint64_t)a->rank);
    for (int k = 0; k < a->rank; k++) h = hash_mix(h, (uint64_t)a->idx[k]);
    h = hash_mix(h, (uint64_t)(uint32_t)a->inclass | ((uint64_t)(uint32_t)a->outclass << 32));
    return hash_mix(h, (uint64_t)(uint32_t)a->guard);
}

static int32_t chunk_value(lower *L, const at *a);

static int32_t value(lower *L, int32_t id, const at *a) {
    if (L->err) return 0;
    if (id == L->subst_node) return L->subst_expr;
    if (id == L->chunk_root) return chunk_value(L, a);
    const fuse_node *f = &L->plan->nodes[id];
    if (f->role == FR_INPUT ||
        ((f->role == FR_ROOT || f->role == FR_EPILOGUE) && f->group != L->group && f->group != L->group2))
        return load_node(L, id, a);
    uint64_t key = at_key(a);
    for (int32_t m = 0; m < L->memo_n; m++)
        if (L->memo[m].node == id && L->memo[m].key == key) return L->memo[m].expr;
    int32_t e = compute(L, id, a);
    if (L->err) return 0;
    if (!mem_grow(L->ctx, (void **)&L->memo, &L->memo_cap, L->memo_n + 1, sizeof(memo_ent))) {
        L->err = RJ_ERR_NOMEM;
        return 0;
    }
    L->memo[L->memo_n++] = (memo_ent){.node = id, .key = key, .expr = e};
    return e;
}

/* Evaluates n at a with the root's value bound (for epilogues) and a fresh memo. */
static int32_t value_fresh(lower *L, int32_t n, const at *a) {
    L->memo_n = 0;
    return value(L, n, a);
}

/* Does expression e (transitively) read variable v? */
static bool expr_uses_var(lower *L, int32_t e, int32_t v) {
    if (L->err) return true;
    size_t n = sizeof(uint32_t) * (size_t)L->k->nex;
    uint32_t *seen = mem_zalloc(L->ctx, n);
    if (!seen) {
        L->err = RJ_ERR_NOMEM;
        return true;
    }
    bool r = lx_reads_var(L->k, e, v, seen, 1);
    mem_free(L->ctx, seen, n);
    return r;
}

/* Is e cheap enough to repeat: at most 48 expressions and no call into the maths library
 * (what unrolling copies, LLVM then vectorises and generates code for). */
typedef struct cheap_walk {
    int32_t count;
} cheap_walk;

static bool not_cheap(const lkernel *k, int32_t id, void *ud) {
    cheap_walk *w = ud;
    const lx *e = &k->ex[id];
    if (++w->count > 48) return true;
    if (e->kind == LX_UNARY)
        switch (e->fn) {
        case RJ_OP_GELU: case RJ_OP_GELU_TANH: case RJ_OP_SILU: case RJ_OP_SIGMOID: case RJ_OP_TANH:
        case RJ_OP_EXP: case RJ_OP_LOG: case RJ_OP_SIN: case RJ_OP_COS: case LOP_EXP_TERM: return true;
        default: return false;
        }
    return e->kind == LX_BINARY && e->fn == RJ_OP_POW;
}

static bool expr_cheap(lower *L, int32_t e) {
    if (L->err) return false;
    size_t n = sizeof(uint32_t) * (size_t)L->k->nex;
    uint32_t *seen = mem_zalloc(L->ctx, n);
    if (!seen) {
        L->err = RJ_ERR_NOMEM;
        return false;
    }
    cheap_walk w = {0};
    bool r = !lx_visit(L->k, e, not_cheap, &w, seen, 1);
    mem_free(L->ctx, seen, n);
    return r;
}

/* ---- stores of a group's results ----------------------------------------------------------- */

/* Stores node n's value v at index a into every buffer written for it. LF_NT (streaming) is
 * kept only for outputs: temporaries are read again by later kernels, from cache. */
static void store_node(lower *L, blk *b, int32_t n, int32_t v, const at *a, uint8_t flags) {
    for (int32_t bi = 0; bi < L->prog->nbufs; bi++) {
        const lbuf *lb = &L->prog->bufs[bi];
        if (lb->node != n || lb->kind == LB_INPUT) continue;
        uint8_t f = lb->kind == LB_OUTPUT ? flags : (uint8_t)(flags & ~LF_NT);
        s_store(L, b, buf_param(L, bi), xaddr(L, bi, a), xcast(L, (rj_dtype)lb->dtype, v), f);
        if (f & LF_NT) L->k->has_nt = true;
    }
}

/* What the caller of store_group knows of index a against the rows an unpad keeps. */
typedef enum {
    ROWS_OUT, /* a is padding (i >= len_b): unpad epilogues are not written there */
    ROWS_IN,  /* a is a row of the item (i < len_b, and j < len_b for two ragged dims) */
    ROWS_ANY, /* either: each unpad's store is guarded, unless a's class says */
} rows_known;

/* The condition under which index a is an element that unpad node u keeps, or -1 where the
 * caller or a's class already says it is (a row of u's class, u unpadding dim 1 only; the
 * column of two ragged dims is always checked). */
static int32_t unpad_keeps(lower *L, const node *u, const at *a, rows_known rows) {
    int32_t cls = root_of(L->g, u->dims[1]);
    int32_t in1 = rows == ROWS_IN || a->inclass == cls ? -1
                : xcmp(L, RJ_OP_LT, a->idx[1], xlen(L, cls, a->idx[0]));
    if (!u->keepdim) return in1;
    int32_t in2 = xcmp(L, RJ_OP_LT, a->idx[2], xlen(L, cls, a->idx[0]));
    return in1 < 0 ? in2 : xbin(L, RJ_OP_LOGICAL_AND, RJ_BOOL, in1, in2);
}

/* Root value r at index a: store the root if written, then its epilogue nodes; `rows` says
 * whether a is within the rows an unpad epilogue keeps. An unpad of a dense or padded domain
 * stores only the elements it keeps: storing them all wrote past its output (an item's block
 * is len_b x len_b, not L x L), and storing none left it unwritten. */
static void store_group(lower *L, blk *b, int32_t root, int32_t r, const at *a, rows_known rows,
                        uint8_t flags) {
    const fuse_group *gr = &L->plan->groups[L->group];
    int32_t rv = newvar(L, "r", L->g->nodes[root].dtype);
    s_set(L, b, rv, r);
    L->subst_node = root;
    L->subst_expr = xvar(L, rv);
    if (L->plan->nodes[root].mat) store_node(L, b, root, L->subst_expr, a, flags);
    for (int32_t m = 0; m < gr->nmembers; m++) {
        int32_t id = gr->members[m];
        if (!L->plan->nodes[id].mat) continue;
        const node *n = &L->g->nodes[id];
        int32_t keep = -1;
        if (n->op == RJ_OP_UNPAD) {
            if (rows == ROWS_OUT || (a->outclass >= 0 && a->outclass == root_of(L->g, n->dims[1]))) continue;
            keep = unpad_keeps(L, n, a, rows);
        }
        if (keep < 0) {
            store_node(L, b, id, value_fresh(L, id, a), a, flags);
            continue;
        }
        blk kb;
        int32_t st = s_if(L, b, &kb, keep);
        store_node(L, &kb, id, value_fresh(L, id, a), a, flags);
        close_body(L, st, &kb);
    }
    L->subst_node = -1;
}

/* ---- loop nests ---------------------------------------------------------------------------- */

typedef void (*body_fn)(lower *L, blk *b, at *a, void *ud);

/* Nested loops over dims[k..end) of an index; the last one is the lanes loop if `vec`. */
static void loops_v(lower *L, blk *b, at *a, const rj_dim *dims, int k, int end, body_fn fn,
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

static void loops(lower *L, blk *b, at *a, const rj_dim *dims, int k, int end, body_fn fn, void *ud) {
    loops_v(L, b, a, dims, k, end, fn, ud, true);
}

/* The unit loop nest of UD_ROWS kernels over class cls, two `units` loops that together
 * enumerate the rows [lo, hi):
 *     for b in blo..bhi { start = loff[b]; for i in (rows of item b within [lo, hi)) { ... } }
 * rows_open fills a->idx[0..1] and returns the block of the i loop; rows_close links it. */
typedef struct rows_nest {
    blk item;      /* body of the b loop */
    blk row;       /* body of the i loop: filled by the caller */
    int32_t for_i; /* the i loop statement */
} rows_nest;

static blk *rows_open(lower *L, blk *b, at *a, int32_t cls, rows_nest *rn) {
    lkernel *k = L->k;
    k->domain = UD_ROWS;
    k->dom_class = cls;
    int32_t lo = xparam(L, PK_LO, 0, "lo"), hi = xparam(L, PK_HI, 0, "hi");
    int32_t blo = xparam(L, PK_BLO, 0, "blo"), bhi = xparam(L, PK_BHI, 0, "bhi");
    int32_t vb = newvar(L, "b", RJ_I64), vi = newvar(L, "i", RJ_I64);
    int32_t fb = s_for(L, b, vb, blo, bhi, LM_UNITS);
    rn->item = rn->row = NEWBLK;
    int32_t xb = xvar(L, vb);
    int32_t vlb = newvar(L, "start", RJ_I64);
    s_set(L, &rn->item, vlb, xloff(L, cls, xb));
    int32_t start = xvar(L, vlb);
    int32_t i0 = xmax(L, xsub(L, lo, start), xi(L, 0));
    int32_t i1 = xmin(L, xsub(L, hi, start), xsub(L, xloff(L, cls, xadd(L, xb, xi(L, 1))), start));
    rn->for_i = s_for(L, &rn->item, vi, i0, i1, LM_UNITS);
    close_body(L, fb, &rn->item);
    a->idx[0] = xb;
    a->idx[1] = xvar(L, vi);
    a->inclass = cls;
    return &rn->row;
}

/* A kernel whose every unit's work lies in loops over dims [first, stop): those dims, so that
 * a run where they hold no element launches nothing (2^40 rows of [B, j1, 0], or [2^40, 0],
 * would otherwise run 2^40 empty units). Kernels that do not say so run every unit. */
static void unit_extent(lower *L, const rj_dim *dims, int first, int stop) {
    lkernel *k = L->k;
    k->unit_rank = stop > first ? stop - first : 0;
    if (k->unit_rank) memcpy(k->unit_dims, dims + first, sizeof(rj_dim) * (size_t)k->unit_rank);
}

static void rows_close(lower *L, rows_nest *rn) {
    close_body(L, rn->for_i, &rn->row);
}

/* Unit loop for UD_DENSE over dims[0..n): units flattened; returns the unit block. */
static blk *dense_loop(lower *L, blk *b, at *a, const rj_dim *dims, int n, blk *inner, int32_t *fstmt) {
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

/* Sets the kernel's one-line description from a printed buffer. */
static void set_what(lower *L, sbuf *w) {
    if (w->failed) L->err = RJ_ERR_NOMEM;
    else snprintf(L->k->what, sizeof L->k->what, "%s", w->s ? w->s : "");
    sbuf_free(w);
}

/* ---- map kernels --------------------------------------------------------------------------- */

static void map_body(lower *L, blk *b, at *a, void *ud) {
    const fuse_group *gr = ud;
    for (int32_t m = 0; m < gr->nmembers; m++) {
        int32_t id = gr->members[m];
        store_node(L, b, id, value_fresh(L, id, a), a, LF_NT);
    }
}

/* The kernel's body: units over the rows of a shape (its ragged class's rows when it is jagged,
 * else its leading dims flattened), then loops over dims (of that rank) to the last, a lanes
 * loop, and fn at each full index. */
static void element_nest(lower *L, const node *shape, const rj_dim *dims, body_fn fn, void *ud) {
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

static void lower_map(lower *L, const fuse_group *gr) {
    const node *d = &L->g->nodes[gr->root];
    sbuf w;
    sbuf_init(&w, L->ctx);
    sbuf_puts(&w, "map over ");
    print_node_type(&w, L->g, d);
    set_what(L, &w);
    element_nest(L, d, d->dims, map_body, (void *)gr);
}

/* ---- matrix products: the JIT's own kernel ---------------------------------------------------
 * Per row of the product (a unit), a lanes loop over its N columns; each lane runs the dot
 * product over K serially, with x's element (its producers inlined) and w's, and then the
 * epilogue at that element. On a SIMT target a warp takes a row: w's rows are read coalesced
 * and x's element is one broadcast load. It is what every target runs where no BLAS serves. */

static void matmul_body(lower *L, blk *b, at *a, void *ud) {
    const fuse_group *gr = ud;
    const node *r = &L->g->nodes[gr->root], *x = &L->g->nodes[r->in[0]];
    int R = r->rank;
    rj_dtype t = r->dtype;
    int32_t acc = newvar(L, "acc", t), vk = newvar(L, "k", RJ_I64);
    s_set(L, b, acc, xconst(L, t, 0));
    int32_t st = s_for(L, b, vk, xi(L, 0), xsize(L, x->dims[R - 1]), LM_SERIAL);
    blk kb = NEWBLK;
    at xa = *a;
    xa.idx[R - 1] = xvar(L, vk);
    if (R == 2) xa.inclass = xa.outclass = -1; /* dim 1 is K now */
    int32_t av = xcast(L, t, value_fresh(L, r->in[0], &xa));
    at wa = {.rank = 2, .inclass = -1, .outclass = -1, .guard = a->guard};
    wa.idx[0] = r->ival ? a->idx[R - 1] : xvar(L, vk);
    wa.idx[1] = r->ival ? xvar(L, vk) : a->idx[R - 1];
    int32_t wv = xcast(L, t, value(L, r->in[1], &wa));
    s_set(L, &kb, acc, xfma(L, t, av, wv, xvar(L, acc)));
    close_body(L, st, &kb);
    store_group(L, b, gr->root, xvar(L, acc), a, ROWS_ANY, LF_NT);
}

static void lower_matmul(lower *L, const fuse_group *gr) {
    const node *r = &L->g->nodes[gr->root];
    L->k->heavy = true;
    sbuf w;
    sbuf_init(&w, L->ctx);
    sbuf_puts(&w, "matmul of ");
    print_node_type(&w, L->g, &L->g->nodes[r->in[0]]);
    sbuf_puts(&w, r->ival ? " by the transpose of " : " by ");
    print_node_type(&w, L->g, &L->g->nodes[r->in[1]]);
    set_what(L, &w);
    element_nest(L, r, r->dims, matmul_body, (void *)gr);
}

/* ---- per-item products over a ragged dim ----------------------------------------------------
 *   q kᵀ  [B, j1, j1]: per row (b, i), for each column j < len_b, a dot product over D as a
 *         `reduce` over a lanes loop (vectorised on a CPU, a warp's shuffles on a SIMT target);
 *   p v   [B, j1, D] and xᵀ y [B, K, N]: per row, the contraction over the item's rows j (or
 *         i) into one accumulator per output column. On a CPU with a constant width those are a
 *         local array and the columns the inner lanes loop (acc[n] += p[i, j] v[j, n],
 *         vectorised, p read once per j); otherwise each lane keeps its own accumulator over a
 *         serial loop (a SIMT target: a warp per row, the lanes its threads).
 * On a SIMT target q kᵀ and p v are the block-wide tiled kernels of lower_item_matmul_simt
 * instead (below); xᵀ y keeps this form.
 * The item's rows are read from cache: an item's k or v is len_b rows. The product's epilogue
 * (a scale, a mask, ...) is computed as each element is stored. */

static bool is_jagged_t(const rj_graph *g, const node *n) {
    return n->op == RJ_OP_TRANSPOSE && dim_ragged_pos(g, n) == 2;
}

static at at3(int32_t b, int32_t i, int32_t j, int32_t cls) {
    return (at){.rank = 3, .idx = {b, i, j}, .inclass = cls, .outclass = -1, .guard = -1};
}

static void lower_item_matmul(lower *L, const fuse_group *gr) {
    const rj_graph *g = L->g;
    const node *r = &g->nodes[gr->root], *xn = &g->nodes[r->in[0]], *wn = &g->nodes[r->in[1]];
    bool qk = is_jagged_t(g, wn), gw = is_jagged_t(g, xn);
    int32_t xs = gw ? xn->in[0] : r->in[0], ws = qk ? wn->in[0] : r->in[1];
    const node *xv = &g->nodes[xs], *wv = &g->nodes[ws];
    int32_t cls = root_of(g, gw ? xv->dims[1] : qk ? xv->dims[1] : r->dims[1]);
    rj_dtype t = r->dtype;
    L->k->heavy = true;
    sbuf w;
    sbuf_init(&w, L->ctx);
    sbuf_printf(&w, "per-item product %s of ", qk ? "q kᵀ" : gw ? "xᵀ y" : "p v");
    print_node_type(&w, g, xv);
    sbuf_puts(&w, " and ");
    print_node_type(&w, g, wv);
    set_what(L, &w);
    at a = {.rank = 3, .inclass = -1, .outclass = -1, .guard = -1};
    blk top = NEWBLK, inner, *body;
    rows_nest rn;
    int32_t fs = -1;
    if (gw) { /* units (b, k) of the dense [B, K, N] */
        dense_loop(L, &top, &a, r->dims, 2, &inner, &fs);
        body = &inner;
    } else {
        body = rows_open(L, &top, &a, cls, &rn);
    }
    int32_t b = a.idx[0], len = xlen(L, cls, b);
    if (qk) {
        int32_t vj = newvar(L, "j", RJ_I64), vd = newvar(L, "d", RJ_I64), acc = newvar(L, "acc", t);
        int32_t fj = s_for(L, body, vj, xi(L, 0), len, LM_SERIAL);
        blk jb = NEWBLK, db = NEWBLK;
        s_set(L, &jb, acc, xconst(L, t, 0));
        int32_t fd = s_for(L, &jb, vd, xi(L, 0), xsize(L, xv->dims[2]), LM_LANES);
        L->lanes++;
        at qa = at3(b, a.idx[1], xvar(L, vd), cls), ka = at3(b, xvar(L, vj), xvar(L, vd), cls);
        int32_t qv = xcast(L, t, value_fresh(L, xs, &qa)), kv = xcast(L, t, value(L, ws, &ka));
        s_accum_fma(L, &db, acc, qv, kv);
        L->lanes--;
        close_body(L, fd, &db);
        at oa = at3(b, a.idx[1], xvar(L, vj), cls);
        store_group(L, &jb, gr->root, xvar(L, acc), &oa, ROWS_ANY, LF_NT);
        close_body(L, fj, &jb);
    } else {
        /* the contraction: p v sums over the block's columns j, xᵀ y over the item's rows */
        rj_dim ncols = r->dims[2];
        int32_t vn = newvar(L, "n", RJ_I64), vj = newvar(L, "j", RJ_I64);
        bool local = !L->desc->simt && ncols > 0 && ncols <= 4096;
        if (local) {
            int32_t loc = L->err ? -1 : lk_local(L->k, "acc", LL_THREAD, t);
            if (loc < 0) {
                if (!L->err) L->err = RJ_ERR_NOMEM;
                return;
            }
            L->k->locals[loc].elems = ncols;
            blk zb = NEWBLK, jb = NEWBLK, nb = NEWBLK, ob = NEWBLK;
            int32_t fz = s_for(L, body, vn, xi(L, 0), xi(L, ncols), LM_LANES);
            s_store_local(L, &zb, loc, xvar(L, vn), xconst(L, t, 0));
            close_body(L, fz, &zb);
            int32_t fj = s_for(L, body, vj, xi(L, 0), len, LM_SERIAL);
            at ca = gw ? at3(b, xvar(L, vj), a.idx[1], cls) : at3(b, a.idx[1], xvar(L, vj), cls);
            int32_t cv = newvar(L, "c", t);
            s_set(L, &jb, cv, xcast(L, t, value_fresh(L, xs, &ca)));
            int32_t fn = s_for(L, &jb, vn, xi(L, 0), xi(L, ncols), LM_LANES);
            L->lanes++;
            at va = at3(b, xvar(L, vj), xvar(L, vn), cls);
            int32_t vv = xcast(L, t, value(L, ws, &va));
            s_store_local(L, &nb, loc, xvar(L, vn), xfma(L, t, xvar(L, cv), vv, xlocal(L, loc, xvar(L, vn))));
            L->lanes--;
            close_body(L, fn, &nb);
            close_body(L, fj, &jb);
            int32_t fo = s_for(L, body, vn, xi(L, 0), xi(L, ncols), LM_LANES);
            L->lanes++;
            at oa = at3(b, a.idx[1], xvar(L, vn), gw ? -1 : cls);
            store_group(L, &ob, gr->root, xlocal(L, loc, xvar(L, vn)), &oa, ROWS_ANY, LF_NT);
            L->lanes--;
            close_body(L, fo, &ob);
        } else {
            int32_t acc = newvar(L, "acc", t);
            blk nb = NEWBLK, jb = NEWBLK;
            int32_t fn = s_for(L, body, vn, xi(L, 0), xsize(L, ncols), LM_LANES);
            L->lanes++;
            s_set(L, &nb, acc, xconst(L, t, 0));
            int32_t fj = s_for(L, &nb, vj, xi(L, 0), len, LM_SERIAL);
            at ca = gw ? at3(b, xvar(L, vj), a.idx[1], cls) : at3(b, a.idx[1], xvar(L, vj), cls);
            at va = at3(b, xvar(L, vj), xvar(L, vn), cls);
            int32_t cvv = xcast(L, t, value_fresh(L, xs, &ca)), vv = xcast(L, t, value(L, ws, &va));
            s_set(L, &jb, acc, xfma(L, t, cvv, vv, xvar(L, acc)));
            close_body(L, fj, &jb);
            at oa = at3(b, a.idx[1], xvar(L, vn), gw ? -1 : cls);
            store_group(L, &nb, gr->root, xvar(L, acc), &oa, ROWS_ANY, LF_NT);
            L->lanes--;
            close_body(L, fn, &nb);
        }
    }
    if (gw) close_body(L, fs, &inner);
    else rows_close(L, &rn);
    L->k->body = top.first;
}

/* ---- matrix products by a library GEMM (the CPU with a BLAS) ---------------------------------
 * The product of a chunk of rows goes into a per-worker buffer C (LB_CHUNK) that the cache
 * holds; this group's kernel is then its epilogue: it reads the product at (row - lo, n) and
 * computes and stores everything fused after it. x is taken from its buffer where it has one;
 * an inline x (a prologue: relu(x * w + b) @ W) is evaluated by a second kernel into the
 * chunk buffer A first. The runtime runs the chunk loop (lgemm, cpu.c). */

typedef struct gemm_ctx {
    const fuse_group *gr;
    int32_t buf;   /* the chunk buffer read (C) or written (A) */
    int32_t src;   /* the prologue's value: x */
    rj_dim cols;   /* a row of the chunk buffer */
} gemm_ctx;

/* The logical row of the product at a (its leading dims, all but the last), from the chunk's
 * first row: for a jagged product the packed row of its class. */
static int32_t chunk_row(lower *L, const node *r, const at *a) {
    int32_t row;
    if (dim_ragged_pos(L->g, r) == 1) {
        row = xadd(L, xloff(L, root_of(L->g, r->dims[1]), a->idx[0]), a->idx[1]);
    } else {
        row = a->idx[0];
        for (int k = 1; k < r->rank - 1; k++) row = xadd(L, xmul(L, row, xsize(L, r->dims[k])), a->idx[k]);
    }
    return xsub(L, row, xparam(L, PK_LO, 0, "lo"));
}

/* A row of a chunk buffer: a constant or dense width, or an item's length (a row of blocks). */
static int32_t chunk_width(lower *L, rj_dim cols, const at *a) {
    const sym *s = graph_sym(L->g, cols);
    return s && s->kind == SYM_RAGGED ? xlen(L, root_of(L->g, cols), a->idx[0]) : xsize(L, cols);
}

/* The product at a, from the GEMM's chunk C (a softmax computed in the GEMM's epilogue). */
static int32_t chunk_index(lower *L, const at *a) {
    const node *r = &L->g->nodes[L->chunk_root];
    return xadd(L, xmul(L, chunk_row(L, r, a), chunk_width(L, L->chunk_cols, a)), a->idx[r->rank - 1]);
}

static int32_t chunk_value(lower *L, const at *a) {
    return xload(L, buf_param(L, L->chunk_buf), chunk_index(L, a), L->g->nodes[L->chunk_root].dtype, -1);
}

static void gemm_epilogue_body(lower *L, blk *b, at *a, void *ud) {
    const gemm_ctx *c = ud;
    const node *r = &L->g->nodes[c->gr->root];
    int32_t idx = xadd(L, xmul(L, chunk_row(L, r, a), chunk_width(L, c->cols, a)), a->idx[r->rank - 1]);
    int32_t v = xload(L, buf_param(L, c->buf), idx, r->dtype, -1);
    store_group(L, b, c->gr->root, v, a, ROWS_ANY, LF_NT);
}

static void gemm_prologue_body(lower *L, blk *b, at *a, void *ud) {
    const gemm_ctx *c = ud;
    const node *r = &L->g->nodes[c->gr->root];
    int32_t idx = xadd(L, xmul(L, chunk_row(L, r, a), chunk_width(L, c->cols, a)), a->idx[r->rank - 1]);
    s_store(L, b, buf_param(L, c->buf), idx, xcast(L, r->dtype, value_fresh(L, c->src, a)), 0);
}

static int32_t add_chunk_buf(lower *L, int which, rj_dtype t, rj_dim cols) {
    lprog *p = L->prog;
    if (!mem_grow(L->ctx, (void **)&p->bufs, &p->capbufs, p->nbufs + 1, sizeof(lbuf))) {
        L->err = RJ_ERR_NOMEM;
        return -1;
    }
    p->bufs[p->nbufs] = (lbuf){.kind = LB_CHUNK, .dtype = (uint8_t)t, .index = which, .node = -1, .rank = 1,
                               .dims = {cols}};
    return p->nbufs++;
}

/* A node this kernel reads from a buffer as it is laid out: an input, or a value another
 * kernel wrote. */
static bool in_buffer(lower *L, int32_t id) {
    const fuse_node *f = &L->plan->nodes[id];
    bool elsewhere = f->role == FR_INPUT || ((f->role == FR_ROOT || f->role == FR_EPILOGUE) && f->group != L->group);
    return elsewhere && L->bufof[id] >= 0;
}

/* Does the CPU's BLAS compute this GEMM group? Judged from the fusion plan, so that lowering
 * and the merge of a softmax into the GEMM's epilogue (before the buffers exist) agree: x and
 * w come from memory (an input, or a value another kernel writes: it will have a buffer). */
static bool will_have_buffer(const lower *L, int32_t id, int32_t gi) {
    const fuse_node *f = &L->plan->nodes[id];
    return f->role == FR_INPUT || ((f->role == FR_ROOT || f->role == FR_EPILOGUE) && f->group != gi && f->mat);
}

static bool gemm_lib_group(const lower *L, int32_t gi) {
    const rj_graph *g = L->g;
    const fuse_group *gr = &L->plan->groups[gi];
    if (gr->kind != FG_ROOT || op_table[g->nodes[gr->root].op].kind != KIND_MATMUL) return false;
    const node *r = &g->nodes[gr->root], *x = &g->nodes[r->in[0]], *w = &g->nodes[r->in[1]];
    int rp = dim_ragged_pos(g, r);
    bool qk = is_jagged_t(g, w);
    int32_t wsrc = qk ? w->in[0] : r->in[1];
    if (!L->desc->gemm_lib || L->desc->simt || is_jagged_t(g, x) || x->dtype != r->dtype ||
        g->nodes[wsrc].dtype != r->dtype || (rp >= 0 && r->rank != 3) || !will_have_buffer(L, wsrc, gi))
        return false;
    if (qk && !will_have_buffer(L, r->in[0], gi)) return false;
    return blas_get() != NULL;
}

/* The symbol whose offsets address the rows of a jagged buffer, or -1 (a temporary: logical). */
static int32_t rows_sym(lower *L, int32_t bi) {
    const lbuf *lb = &L->prog->bufs[bi];
    return lb->kind == LB_TEMP ? -1 : dim_sym(lb->dims[1]);
}

/* true when the group is lowered for a library GEMM; false: the JIT's kernel serves. */
static bool lower_matmul_lib(lower *L, const fuse_group *gr) {
    const rj_graph *g = L->g;
    const node *r = &g->nodes[gr->root], *x = &g->nodes[r->in[0]], *w = &g->nodes[r->in[1]];
    int rp = dim_ragged_pos(g, r);
    bool qk = is_jagged_t(g, w), pv = node_is_pair(g, x), item = qk || pv;
    int32_t wsrc = qk ? w->in[0] : r->in[1]; /* the tensor whose rows multiply: k, v or w */
    int32_t gi = (int32_t)(gr - L->plan->groups), sm = -1;
    if (!gemm_lib_group(L, gi)) return false;
    int32_t epi = (int32_t)(L->k - L->prog->kernels);
    lgemm gm = {.on = true, .mode = qk ? GEMM_QK : pv ? GEMM_PV : GEMM_ROWS, .dtype = (uint8_t)r->dtype,
                .w_nk = r->ival != 0, .prologue = -1, .a_buf = -1, .a_sym = -1, .b_sym = -1,
                .a_cls = rp == 1 ? root_of(g, r->dims[1]) : -1, .w_buf = L->bufof[wsrc], .chunk_a = -1,
                .K = x->dims[x->rank - 1], .N = r->dims[r->rank - 1]};
    if (item) gm.b_sym = rows_sym(L, gm.w_buf);
    if (in_buffer(L, r->in[0])) {
        gm.a_buf = L->bufof[r->in[0]];
        if (rp == 1 && !pv) gm.a_sym = rows_sym(L, gm.a_buf);
    }
    gm.chunk_c = add_chunk_buf(L, 1, r->dtype, gm.N);
    if (gm.a_buf < 0) gm.chunk_a = add_chunk_buf(L, 0, r->dtype, gm.K);
    if (L->err) return true;
    sbuf what;
    sbuf_init(&what, L->ctx);
    sbuf_puts(&what, item ? "epilogue of the per-item GEMMs " : "epilogue of the GEMM ");
    print_node_type(&what, g, x);
    sbuf_puts(&what, qk ? " @ the transpose of " : r->ival ? " @ weightᵀ " : " @ ");
    print_node_type(&what, g, &g->nodes[wsrc]);
    set_what(L, &what);
    for (int32_t k = 0; k < L->plan->ngroups && L->merged; k++)
        if (L->merged[k] == gi) sm = k;
    if (sm >= 0) { /* the softmax after the product, row by row from C: the product stays in cache */
        L->chunk_root = gr->root, L->chunk_buf = gm.chunk_c, L->chunk_cols = gm.N;
        L->group = sm, L->group2 = gi;
        lower_axis(L, &L->plan->groups[sm]);
        L->group = gi, L->group2 = -1, L->chunk_root = -1;
    } else {
        gemm_ctx c = {.gr = gr, .buf = gm.chunk_c, .cols = gm.N};
        element_nest(L, r, r->dims, gemm_epilogue_body, &c);
    }
    if (gm.chunk_a >= 0 && !L->err) { /* the prologue: x's rows into A */
        char name[48];
        snprintf(name, sizeof name, "%.20s_prologue", L->k->name);
        if (!open_kernel(L, name)) return true;
        gm.prologue = L->prog->nkernels - 1;
        L->k->inner_only = true;
        snprintf(L->k->what, sizeof L->k->what, "prologue of a GEMM: x's rows into its chunk A");
        gemm_ctx pc = {.gr = gr, .buf = gm.chunk_a, .src = r->in[0], .cols = gm.K};
        element_nest(L, r, x->dims, gemm_prologue_body, &pc);
        group_for(L, L->k);
    }
    L->prog->kernels[epi].gemm = gm;
    L->k = &L->prog->kernels[epi]; /* the group's kernel, for what follows it in pass_lower */
    return true;
}

/* ---- reductions and softmax over an axis ----------------------------------------------------- */

typedef struct axis_info {
    const node *root, *x;
    int axis;
    bool items;       /* over the ragged (or padded) dim: UD_ITEMS */
    int32_t cls;      /* its class */
    bool padded;      /* the axis is a padded dim: rows [len_b, L) are padding */
    rj_dim L;         /* the padded extent */
} axis_info;

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

static axis_info axis_of(lower *L, const node *root) {
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

/* The binary op that folds one element into the accumulator of reduction op. */
static int combine_fn(rj_op op) {
    switch (op) {
    case RJ_OP_MAX: return RJ_OP_MAXIMUM;
    case RJ_OP_MIN: return RJ_OP_MINIMUM;
    case RJ_OP_PROD: return RJ_OP_MUL;
    default: return RJ_OP_ADD;
    }
}

/* The combining step of a reduction in type t. */
static int32_t combine(lower *L, rj_op op, rj_dtype t, int32_t acc, int32_t v) {
    return xbin(L, combine_fn(op), t, acc, v);
}

static int32_t identity(lower *L, rj_op op, rj_dtype t) {
    switch (op) {
    case RJ_OP_MAX: return xextreme(L, t, true);
    case RJ_OP_MIN: return xextreme(L, t, false);
    case RJ_OP_PROD: return xconst(L, t, 1);
    default: return xconst(L, t, 0);
    }
}

/* `times` copies of v folded into acc in closed form (times >= 0, an i64 expression). */
static int32_t combine_n(lower *L, rj_op op, rj_dtype t, int32_t acc, int32_t v, int32_t times) {
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

typedef struct red_ctx {
    axis_info ai;
    rj_dtype acc_t;      /* accumulator type */
    int32_t ntile;       /* tile extent expression */
    int32_t vi;          /* axis variable */
} red_ctx;

/* Element of the reduction input at the current index, as the accumulator type. */
static int32_t red_input(lower *L, red_ctx *rc, const at *a) {
    L->memo_n = 0;
    return xcast(L, rc->acc_t, value(L, rc->ai.root->in[0], a));
}

/* ---- reductions and softmax over the ragged or padded dim: per (item, tile) ------------------
 *
 * A unit is an item b and a tile [f0, f0 + tn) of its inner extent. Each lane t of the tile
 * has its own accumulators in a thread-local array, and the item's rows are folded into them
 * by a serial row loop around a lanes loop: a reduction over the rows, vectorised across the
 * lanes, so the lanes loop does not reduce and there is no `reduce` statement here. A kernel is
 * a sequence of named phases over that shape:
 *
 *   reductions  init, fold the rows, fold the padding rows, write
 *   softmax     init, fold the rows (max), fold the padding rows, init, fold the rows (sum of
 *               exp), fold the padding rows, invert the sum (softmax), write the rows
 *
 * where the padding rows (a padded axis: rows len_b <= i < L) are folded in closed form when
 * their value does not depend on i, and row by row otherwise. */

typedef struct items {
    red_ctx *rc;
    blk ub;            /* the unit loop's body, where the phases append */
    int32_t loc;       /* the thread-local accumulators (and softmax's stash) */
    int32_t sloc;      /* the accumulators' local: loc, or a constant-sized one of their own
                        * when the tile is a constant (state_tile) */
    int32_t vt;        /* the lane variable t */
    int32_t len, cnt;  /* the item's rows; its padding rows (0 unless the axis is padded) */
    at rows, pad;      /* element (b, i, f0 + t): in the rows, in the padding rows */
    int32_t s0, s1;    /* lane t of the first and the second accumulator */
    int32_t sc, sp;    /* lane t of the compensation and the block partial of a float sum */
    int32_t s2;        /* softmax: the input stashed for row i, lane t */
    bool compensate;   /* float sums are compensated (fold_add) */
} items;

/* The local that holds slot: the stash (s2) is in the scratch the runtime passes, the
 * accumulators in sloc. */
static int32_t loc_of(const items *it, int32_t slot) { return slot == it->s2 ? it->loc : it->sloc; }

/* Rows of an item summed plainly into a block partial before the partial is added, with
 * compensation, to the item's sum. */
#define ROW_BLOCK 16
/* Rows of a sum, max or min folded per step of the row loop where the target reads several
 * row streams at once (target_desc.row_streams > 1; a divisor of ROW_BLOCK; 8 measured best
 * on bench/'s W4 there: 4 and 16 read slower). Softmax's passes, which stash their rows and
 * take exp, are not unrolled (it bought nothing there and doubled compile time), nor are rows
 * whose value calls the maths library or is a large expression. */
#define ROW_UNROLL 8
#define SPEC_ROWS 16
#define SPEC_BIG 1e30

/* How a fold combines element v of the input into an accumulator. */
typedef enum {
    STASH_NONE,
    STASH_SAVE, /* also store v in the stash: later passes read it from cache, not memory */
    STASH_EXP,  /* read v from the stash and replace it there by the term exp(v - shift) */
    STASH_TERM, /* read v afresh (from cache) and store the term exp(v - shift) in the stash */
} stash_mode;

typedef struct fold {
    rj_op op;          /* the reduction: RJ_OP_SUM (and mean), _MAX, _MIN, _PROD */
    int32_t slot;      /* the accumulator: s0 or s1 */
    int32_t shift;     /* >= 0: fold exp(v - shift) rather than v (softmax's sum) */
    stash_mode stash;
    bool compensated;  /* a float sum: compensated in slot sc */
} fold;

/* Float sums are compensated (Kahan): the rounding error of each addition is carried in c
 * and subtracted from the next term, so a sum of n terms is accurate to a few ulps of the
 * sum of absolute values whatever n is, where a plain running sum loses up to n ulps (10^6
 * rows of 0.1f: 100958 instead of 100000). On a CPU the sum of a long item is memory-bound,
 * and the four extra operations per element run in the shadow of the loads. The update
 *     y = term - c;  s = acc + y;  c = (s - acc) - y;  acc = s
 * keeps c unchanged when s is not finite: an infinite partial sum makes (s - acc) - y NaN,
 * and the plain sum's inf (or NaN, for inf - inf) must come out, as it does in PyTorch. The
 * result is acc - c. The accumulator and c are variables or elements of a local array. */
typedef struct place {
    int32_t loc;       /* local array, or -1: variable */
    int32_t at;        /* index in the local, or the variable */
} place;

static int32_t place_get(lower *L, place p) {
    return p.loc >= 0 ? xlocal(L, p.loc, p.at) : xvar(L, p.at);
}

static void place_set(lower *L, blk *b, place p, int32_t v) {
    if (p.loc >= 0) s_store_local(L, b, p.loc, p.at, v);
    else s_set(L, b, p.at, v);
}

static void kahan_add(lower *L, blk *b, rj_dtype t, place acc_at, place c_at, int32_t term) {
    int32_t acc = place_get(L, acc_at), c = place_get(L, c_at);
    int32_t vy = newvar(L, "kterm", t), vs = newvar(L, "ksum", t);
    s_set(L, b, vy, xbin(L, RJ_OP_SUB, t, term, c));
    s_set(L, b, vs, xbin(L, RJ_OP_ADD, t, acc, xvar(L, vy)));
    int32_t sum = xvar(L, vs), y = xvar(L, vy);
    int32_t finite = xcmp(L, RJ_OP_EQ, xbin(L, RJ_OP_SUB, t, sum, sum), xconst(L, t, 0));
    place_set(L, b, c_at, xsel(L, finite, xbin(L, RJ_OP_SUB, t, xbin(L, RJ_OP_SUB, t, sum, acc), y), c));
    place_set(L, b, acc_at, sum);
}

static void fold_add(lower *L, blk *b, rj_dtype t, int32_t loc, int32_t slot, int32_t cslot, int32_t term) {
    kahan_add(L, b, t, (place){loc, slot}, (place){loc, cslot}, term);
}

/* The compensated sum in slot, as fold_add leaves it. */
static int32_t fold_result(lower *L, items *it, const fold *f) {
    int32_t acc = xlocal(L, loc_of(it, f->slot), f->slot);
    if (!f->compensated) return acc;
    return xbin(L, RJ_OP_SUB, it->rc->acc_t, acc, xlocal(L, loc_of(it, it->sc), it->sc));
}

/* Opens "for t in 0 .. tn lanes" in `into`; the caller fills *body and closes it. */
static int32_t lanes_for(lower *L, items *it, blk *into, blk *body) {
    *body = NEWBLK;
    return s_for(L, into, it->vt, xi(L, 0), it->rc->ntile, LM_LANES);
}

/* Softmax's term exp(v - m) with m the column's maximum (not positive where m is finite, and
 * where it is not, items_finish_sum makes the column NaN, as it is in the reference) or a
 * speculative shift below it, whose sums items_softmax checks. */
static int32_t softmax_term(lower *L, rj_dtype t, int32_t v, int32_t m) {
    return xun(L, LOP_EXP_TERM, t, xbin(L, RJ_OP_SUB, t, v, m));
}

static int32_t fold_term(lower *L, const fold *f, rj_dtype t, int32_t v) {
    return f->shift >= 0 ? softmax_term(L, t, v, f->shift) : v;
}

/* The index of element (b, i, flat) of x with its inner dims unflattened from `flat`, in the
 * item's rows (inclass cls) and, in *pad, the same index in the padding rows (outclass). */
static at item_element(lower *L, const node *x, int32_t cls, int32_t b, int32_t i, int32_t flat, at *pad) {
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

/* Softmax (and log_softmax) over the ragged dim on a CPU, over a constant inner extent N, may
 * take column tiles of a constant width. Its lanes loops then have a constant extent, which
 * emit.c writes out step by step (lkernel.lanes_whole), and its accumulators (the maximum, the
 * sum and its compensation, the block partial) live in an array of their own of constant size,
 * apart from the stash: LLVM keeps them in registers across the row loops, where through the
 * runtime's scratch every row stored and reloaded each one, and tiles of a width read from a
 * variable cannot be written out. Measured on a Zen 4 (AVX-512, f32, items of 1..1024 rows,
 * paired runs against the runtime-tile kernel): rows of at most one vector register run
 * 1.3-1.5x faster (examples/masked_softmax.rj's 8 columns, 16 columns) and 256 columns in two
 * tiles of eight registers 1.07-1.11x (bench/'s W2; a hand-written loop ran 2x faster with its
 * 128-column tile a constant than read from a variable), while 512 columns in four tiles
 * measured 0.85. Whole rows of 32 to 128 columns measured 0.97-1.0 while every row's store went
 * through a call (emit.c, stream_for); with rows stored directly, rows of two registers at most
 * ran 1.14-1.25x faster from the caches and 1.03-1.13x from memory (19, 24 and 32 columns; f64
 * at 12 the same), and compiled in 16-21 ms rather than 27-37; 48 and 64 columns ran 1.1-1.45x
 * faster but compiled 10-15 ms slower, 96 and 128 gained 3-5%. log_softmax, which stashes
 * nothing, ran 1.9-2.3x faster from the caches with constant tiles at 8, 19 and 32 columns
 * (1.6-2.1x from memory, compiling in 12-15 ms rather than 22-28) and at 256 columns 1.6x
 * (1.06x from memory, compiling 8 ms slower for its twin). The tiles are those two shapes (0:
 * the runtime's tiles). The runtime narrows tiles wider than LANES_GRANULE for long items, to
 * keep their stash in cache; a constant tile cannot be, so such a kernel gets a twin of runtime
 * tiles, and the runtime runs whichever the longest item's stash calls for (lower_items);
 * log_softmax, which has none, takes the same twin and the same rule. */
static int64_t state_tile(const lower *L, const lkernel *k, int32_t N, bool softmax, rj_dtype acc) {
    if (L->desc->simt || !softmax || !k->tiled || L->err || k->ex[N].kind != LX_CONST) return 0;
    int64_t lanes = L->desc->vector_bytes / (int64_t)rj_dtype_size(acc), n = k->ex[N].i;
    int64_t w = (L->desc->vector_bytes >= 64 ? 8 : 4) * lanes;
    if (n <= 0 || lanes <= 0) return 0;
    if (n <= 2 * lanes) return n;
    return n == 2 * w ? w : 0;
}

/* The unit loop and the unit's decomposition: item b, tile start f0, tile extent tn, item
 * length len; the accumulators and the index of an element of the tile. */
static int32_t items_open(lower *L, red_ctx *rc, items *it, blk *top, bool allow_state) {
    const node *root = rc->ai.root, *x = rc->ai.x;
    lkernel *k = L->k;
    bool softmax = op_table[root->op].kind == KIND_SOFTMAX;
    int32_t cls = rc->ai.cls;
    it->rc = rc;
    k->domain = UD_ITEMS;
    k->dom_class = cls;
    k->dom_rank = x->rank - 2;
    memcpy(k->dom_dims, x->dims + 2, sizeof(rj_dim) * (size_t)k->dom_rank);
    k->tiled = x->rank == 3;
    k->scratch_type = (uint8_t)rc->acc_t;
    bool sums = softmax || root->op == RJ_OP_SUM || root->op == RJ_OP_MEAN;
    it->compensate = sums && dtype_is_float(rc->acc_t);
    /* softmax: max, sum, its compensation and block partial, then the stash; sums: the sum,
     * its compensation and block partial; other reductions: the accumulator */
    k->scratch_per_tile = softmax ? 4 : it->compensate ? 3 : 1;
    k->passes = softmax ? 3 : 1;
    /* softmax keeps the tile's rows of one item in scratch (sized by the runtime to stay in
     * cache): the sum pass stashes exp(x - m) (the max pass stashes a costly input first, see
     * items_softmax), the write pass rescales it by 1/s. The input is read from memory once,
     * exp runs once per element, and the output is written once, streaming. */
    k->scratch_per_row = root->op == RJ_OP_SOFTMAX;
    int32_t vu = newvar(L, "u", RJ_I64);
    int32_t lo = xparam(L, PK_LO, 0, "lo"), hi = xparam(L, PK_HI, 0, "hi"); /* in this order */
    int32_t fu = s_for(L, top, vu, lo, hi, LM_UNITS);
    it->ub = NEWBLK;
    /* unit -> item b, tile [f0, f0 + ntile) of the inner extent N */
    int32_t N = xi(L, 1);
    for (int d = 2; d < x->rank; d++) N = xmul(L, N, xsize(L, x->dims[d]));
    int64_t TC = allow_state ? state_tile(L, k, N, softmax, rc->acc_t) : 0;
    int32_t T = TC > 0 ? xi(L, TC) : k->tiled ? xparam(L, PK_TILE, 0, "tile") : N;
    if (TC > 0) {
        k->fixed_tile = (int32_t)TC;
        k->scratch_per_tile = 0;
        /* the runtime narrows tiles wider than LANES_GRANULE for long items, to keep their
         * stash in cache: a twin of runtime tiles runs where this one's stash would not fit */
        if (k->ex[N].i > LANES_GRANULE) k->stash_variant = 1, k->variant_tile = (int32_t)TC;
    }
    if (!L->err && k->ex[N].kind == LX_CONST && k->ex[N].i > 0) {
        /* tiles are N or multiples of LANES_GRANULE, so every tile's extent (a tile, or what is
         * left of N after whole ones) is a multiple of their greatest common divisor */
        int64_t a = k->ex[N].i, g = LANES_GRANULE;
        while (g) {
            int64_t r = a % g;
            a = g, g = r;
        }
        k->lanes_max = TC > 0 ? TC : k->ex[N].i;
        k->lanes_multiple = a;
        k->lanes_whole = TC > 0;
    }
    int32_t nt = k->tiled ? xbin(L, LOP_IDIV, RJ_I64, xadd(L, N, xsub(L, T, xi(L, 1))), T) : xi(L, 1);
    int32_t vb = newvar(L, "b", RJ_I64), vf0 = newvar(L, "f0", RJ_I64), vnt = newvar(L, "tn", RJ_I64);
    int32_t vlen = newvar(L, "len", RJ_I64);
    int32_t u = xvar(L, vu);
    s_set(L, &it->ub, vb, xbin(L, LOP_IDIV, RJ_I64, u, nt));
    int32_t b = xvar(L, vb);
    s_set(L, &it->ub, vf0, xmul(L, xsub(L, u, xmul(L, b, nt)), T));
    int32_t f0 = xvar(L, vf0);
    if (TC > 0) { /* every tile whole: the extent is the constant */
        rc->ntile = T;
    } else {
        s_set(L, &it->ub, vnt, xmin(L, T, xsub(L, N, f0)));
        k->lanes_var = vnt;
        rc->ntile = xvar(L, vnt);
    }
    s_set(L, &it->ub, vlen, xlen(L, cls, b));
    it->len = xvar(L, vlen);
    it->cnt = rc->ai.padded ? xsub(L, xsize(L, rc->ai.L), it->len) : xi(L, 0);
    /* the accumulators: a thread-local array whose storage the runtime passes in */
    it->loc = L->err ? -1 : lk_local(k, "scratch", LL_THREAD, rc->acc_t);
    int32_t scr = it->loc < 0 ? -1 : lk_param(k, PK_SCRATCH, it->loc, rc->acc_t, "scratch");
    if (scr < 0) {
        if (!L->err) L->err = RJ_ERR_NOMEM;
        it->loc = 0;
    } else {
        k->locals[it->loc].param = scr;
    }
    it->sloc = it->loc;
    if (TC > 0 && !L->err) { /* the accumulators in an array of their own, of constant size */
        it->sloc = lk_local(k, "acc", LL_THREAD, rc->acc_t);
        if (it->sloc < 0) {
            L->err = RJ_ERR_NOMEM;
            it->sloc = it->loc;
        } else {
            k->locals[it->sloc].elems = 4 * TC;
        }
    }
    rc->vi = newvar(L, "i", RJ_I64);
    it->vt = newvar(L, "t", RJ_I64);

    /* index of element (b, i, f0 + t) with the inner dims unflattened */
    it->rows = item_element(L, x, cls, b, xvar(L, rc->vi), xadd(L, f0, xvar(L, it->vt)), &it->pad);
    int32_t t = xvar(L, it->vt);
    it->s0 = t;
    it->s1 = xadd(L, rc->ntile, t);
    it->sc = softmax ? xadd(L, xmul(L, xi(L, 2), rc->ntile), t) : it->s1;
    it->sp = xadd(L, xmul(L, xi(L, softmax ? 3 : 2), rc->ntile), t);
    int32_t srow = TC > 0 ? xvar(L, rc->vi) : xadd(L, xi(L, 4), xvar(L, rc->vi)); /* the stash after them */
    it->s2 = xadd(L, xmul(L, srow, rc->ntile), t);
    return fu;
}

/* Phase: a compensated sum's accumulator (s1 for softmax, else s0), compensation and block
 * partial all zero. */
static void items_init_sum(lower *L, items *it) {
    rj_dtype t = it->rc->acc_t;
    int32_t slot = op_table[it->rc->ai.root->op].kind == KIND_SOFTMAX ? it->s1 : it->s0;
    blk ib;
    int32_t ft = lanes_for(L, it, &it->ub, &ib);
    s_store_local(L, &ib, loc_of(it, slot), slot, xconst(L, t, 0));
    s_store_local(L, &ib, loc_of(it, it->sc), it->sc, xconst(L, t, 0));
    s_store_local(L, &ib, loc_of(it, it->sp), it->sp, xconst(L, t, 0));
    close_body(L, ft, &ib);
}

/* Phase: every lane's accumulator `slot` set to `value`. */
static void items_init(lower *L, items *it, int32_t slot, int32_t value) {
    blk ib;
    int32_t ft = lanes_for(L, it, &it->ub, &ib);
    s_store_local(L, &ib, loc_of(it, slot), slot, value);
    close_body(L, ft, &ib);
}

/* Rows [lo, hi) of the item folded into the accumulators, v being the element at row i. A
 * compensated sum runs in blocks of ROW_BLOCK rows: each block is summed plainly into a
 * partial per lane (one add per element, as an uncompensated sum), and only the partials are
 * added with compensation (kahan_add), so the cost of compensation is one step per block. */
static void fold_rows(lower *L, items *it, const fold *f, int32_t lo, int32_t hi, int32_t v, const at *rows) {
    red_ctx *rc = it->rc;
    rj_dtype t = rc->acc_t;
    int32_t term = fold_term(L, f, t, v);
    int32_t slot = f->compensated ? it->sp : f->slot;
    blk *into = &it->ub, bb = NEWBLK;
    int32_t fb = -1;
    if (f->compensated) {
        int32_t vib = newvar(L, "ib", RJ_I64);
        int32_t nb = xbin(L, LOP_IDIV, RJ_I64, xadd(L, xsub(L, hi, lo), xi(L, ROW_BLOCK - 1)), xi(L, ROW_BLOCK));
        fb = s_for(L, into, vib, xi(L, 0), nb, LM_SERIAL);
        lo = xadd(L, lo, xmul(L, xvar(L, vib), xi(L, ROW_BLOCK)));
        hi = xmin(L, xadd(L, lo, xi(L, ROW_BLOCK)), hi);
        into = &bb;
    }
    if (rows && L->desc->row_streams > 1 && f->stash == STASH_NONE && (f->op == RJ_OP_SUM || f->op == RJ_OP_MAX || f->op == RJ_OP_MIN) &&
        expr_cheap(L, term)) {
        /* ROW_UNROLL rows at a time, combined pairwise before they meet the accumulator: an
         * eighth of the accumulator's loads and stores, and eight row streams in flight */
        int32_t vq = newvar(L, "iq", RJ_I64), vr = newvar(L, "r", RJ_I64);
        int32_t nq = xbin(L, LOP_IDIV, RJ_I64, xsub(L, hi, lo), xi(L, ROW_UNROLL));
        blk qb = NEWBLK, qt;
        int32_t fq = s_for(L, into, vq, xi(L, 0), nq, LM_SERIAL);
        s_set(L, &qb, vr, xadd(L, lo, xmul(L, xvar(L, vq), xi(L, ROW_UNROLL))));
        int32_t fqt = lanes_for(L, it, &qb, &qt);
        int32_t terms[ROW_UNROLL];
        for (int k = 0; k < ROW_UNROLL; k++) {
            at a = *rows;
            a.idx[1] = xadd(L, xvar(L, vr), xi(L, k));
            terms[k] = fold_term(L, f, t, red_input(L, rc, &a));
        }
        for (int w = 1; w < ROW_UNROLL; w *= 2)
            for (int k = 0; k + w < ROW_UNROLL; k += 2 * w) terms[k] = combine(L, f->op, t, terms[k], terms[k + w]);
        s_store_local(L, &qt, loc_of(it, slot), slot, combine(L, f->op, t, xlocal(L, loc_of(it, slot), slot), terms[0]));
        close_body(L, fqt, &qt);
        close_body(L, fq, &qb);
        lo = xadd(L, lo, xmul(L, nq, xi(L, ROW_UNROLL)));
    }
    blk ib = NEWBLK, tb;
    int32_t fi = s_for(L, into, rc->vi, lo, hi, LM_SERIAL);
    int32_t ft = lanes_for(L, it, &ib, &tb);
    if (f->stash == STASH_SAVE) s_store_local(L, &tb, loc_of(it, it->s2), it->s2, v);
    if (f->stash == STASH_EXP || f->stash == STASH_TERM) {
        /* a variable: the store below overwrites what the expression reads */
        int32_t ve = newvar(L, "e", t);
        s_set(L, &tb, ve, term);
        term = xvar(L, ve);
        s_store_local(L, &tb, loc_of(it, it->s2), it->s2, term);
    }
    s_store_local(L, &tb, loc_of(it, slot), slot, combine(L, f->op, t, xlocal(L, loc_of(it, slot), slot), term));
    close_body(L, ft, &tb);
    close_body(L, fi, &ib);
    if (f->compensated) {
        blk kb;
        int32_t fk = lanes_for(L, it, &bb, &kb);
        fold_add(L, &kb, t, it->sloc, f->slot, it->sc, xlocal(L, loc_of(it, it->sp), it->sp));
        s_store_local(L, &kb, loc_of(it, it->sp), it->sp, xconst(L, t, 0));
        close_body(L, fk, &kb);
        close_body(L, fb, &bb);
    }
}

/* Phase: the item's rows i < len folded into the accumulators. */
static void items_fold_rows(lower *L, items *it, const fold *f) {
    int32_t v = f->stash == STASH_EXP ? xlocal(L, loc_of(it, it->s2), it->s2) : red_input(L, it->rc, &it->rows);
    fold_rows(L, it, f, xi(L, 0), it->len, v, &it->rows);
}

/* Phase: the padding rows len <= i < L folded in, at once when they all hold one value. */
static void items_fold_padding(lower *L, items *it, const fold *f) {
    red_ctx *rc = it->rc;
    if (!rc->ai.padded) return;
    rj_dtype t = rc->acc_t;
    int32_t v = red_input(L, rc, &it->pad);
    if (expr_uses_var(L, v, rc->vi)) {
        /* row by row, into the stash where there is one: it then holds L rows, not len_b */
        if (L->k->scratch_per_row) L->k->stash_rows = rc->ai.L;
        fold_rows(L, it, f, it->len, xadd(L, it->len, it->cnt), v, &it->pad);
        return;
    }
    int32_t term = fold_term(L, f, t, v), acc = xlocal(L, loc_of(it, f->slot), f->slot);
    blk tb;
    int32_t ft = lanes_for(L, it, &it->ub, &tb);
    if (f->compensated) /* cnt copies of the term as one, exact when there are none */
        fold_add(L, &tb, t, it->sloc, f->slot, it->sc,
                 xsel(L, xcmp(L, RJ_OP_GT, it->cnt, xi(L, 0)),
                      xbin(L, RJ_OP_MUL, t, term, xcast(L, t, it->cnt)), xconst(L, t, 0)));
    else
        s_store_local(L, &tb, loc_of(it, f->slot), f->slot, combine_n(L, f->op, t, acc, term, it->cnt));
    close_body(L, ft, &tb);
}

/* Phase (softmax): the sum finished, and replaced by its reciprocal so the write pass
 * multiplies (log_softmax keeps the sum). A column whose maximum is not finite (a NaN, an
 * infinity, or nothing but -inf) is NaN in the reference, every term being NaN or the sum
 * NaN; its sum is made NaN here, whatever softmax_term gave for such terms. */
static void items_finish_sum(lower *L, items *it, const fold *f, bool invert) {
    rj_dtype t = it->rc->acc_t;
    blk ib;
    int32_t ft = lanes_for(L, it, &it->ub, &ib);
    int32_t m = xlocal(L, loc_of(it, it->s0), it->s0);
    int32_t finite = xcmp(L, RJ_OP_EQ, xbin(L, RJ_OP_SUB, t, m, m), xconst(L, t, 0));
    int32_t sum = xsel(L, finite, fold_result(L, it, f), xconst(L, t, NAN));
    s_store_local(L, &ib, loc_of(it, it->s1), it->s1, invert ? xbin(L, RJ_OP_DIV, t, xconst(L, t, 1), sum) : sum);
    close_body(L, ft, &ib);
}

/* Phase (reductions): one result per (b, f), then the epilogue. */
static void items_write_result(lower *L, items *it, const fold *f) {
    red_ctx *rc = it->rc;
    const node *root = rc->ai.root, *x = rc->ai.x;
    rj_dtype t = rc->acc_t;
    blk ib;
    int32_t ft = lanes_for(L, it, &it->ub, &ib);
    int32_t r = fold_result(L, it, f);
    if (root->op == RJ_OP_MEAN) {
        int32_t n = rc->ai.padded ? xsize(L, rc->ai.L) : it->len;
        r = xbin(L, RJ_OP_DIV, t, r, xcast(L, t, n));
    }
    r = xcast(L, root->dtype, r);
    at oa = {.rank = root->rank, .inclass = -1, .outclass = -1, .guard = -1};
    oa.idx[0] = it->rows.idx[0];
    int o = 1;
    if (root->keepdim) oa.idx[o++] = xi(L, 0);
    for (int d = 2; d < x->rank; d++) oa.idx[o++] = it->rows.idx[d];
    store_group(L, &ib, (int32_t)(root - L->g->nodes), r, &oa, ROWS_OUT, 0);
    close_body(L, ft, &ib);
}

/* Phase (softmax): one result per row, streaming; the padding rows only where something
 * materialised is padded (the padded softmax itself, or an epilogue other than unpad). */
static void items_write_rows(lower *L, const fuse_group *gr, items *it) {
    red_ctx *rc = it->rc;
    const rj_graph *g = L->g;
    const node *root = rc->ai.root;
    rj_dtype t = rc->acc_t;
    bool padded_out = L->plan->nodes[root - g->nodes].mat;
    for (int32_t m = 0; m < gr->nmembers; m++)
        padded_out |= L->plan->nodes[gr->members[m]].mat && g->nodes[gr->members[m]].op != RJ_OP_UNPAD;
    for (int part = 0; part < (rc->ai.padded && padded_out ? 2 : 1); part++) {
        const at *pa = part ? &it->pad : &it->rows;
        blk ib = NEWBLK, tb;
        int32_t fi = s_for(L, &it->ub, rc->vi, part ? it->len : xi(L, 0),
                           part ? xadd(L, it->len, it->cnt) : it->len, LM_SERIAL);
        int32_t ft = lanes_for(L, it, &ib, &tb);
        int32_t m = xlocal(L, loc_of(it, it->s0), it->s0), s = xlocal(L, loc_of(it, it->s1), it->s1);
        int32_t y;
        if (root->op == RJ_OP_SOFTMAX) { /* s holds 1 / sum here */
            int32_t e = part == 0 ? xlocal(L, loc_of(it, it->s2), it->s2) : softmax_term(L, t, red_input(L, rc, pa), m);
            y = xbin(L, RJ_OP_MUL, t, e, s);
        } else {
            int32_t v = red_input(L, rc, pa);
            y = xbin(L, RJ_OP_SUB, t, xbin(L, RJ_OP_SUB, t, v, m), xun(L, RJ_OP_LOG, t, s));
        }
        store_group(L, &tb, (int32_t)(root - g->nodes), y, pa, part == 0 ? ROWS_IN : ROWS_OUT, LF_NT);
        close_body(L, ft, &tb);
        close_body(L, fi, &ib);
    }
}

static void items_reduction(lower *L, items *it) {
    red_ctx *rc = it->rc;
    rj_op op = (rj_op)rc->ai.root->op;
    fold f = {.op = op, .slot = it->s0, .shift = -1, .stash = STASH_NONE, .compensated = it->compensate};
    /* a sum of a cheap input streams it (lkernel.streams): on a Zen 4 such a kernel ran
     * 1.04-1.09x faster in 256-bit vectors than in 512-bit ones at D = 64, 256 and 1024, and
     * 1.00-1.05x when its data fit the caches; the other kernels tried (an elementwise chain,
     * a pad, a maximum over the ragged dim, a row norm, x - mean) ran up to 1.07x faster from
     * memory but up to 1.3x slower from the caches, and an input with exp keeps the widest
     * vectors for vscalefps */
    if ((op == RJ_OP_SUM || op == RJ_OP_MEAN) && expr_cheap(L, red_input(L, rc, &it->rows))) L->k->streams = true;
    items_init(L, it, it->s0, identity(L, op, rc->acc_t));
    if (f.compensated) items_init_sum(L, it);
    items_fold_rows(L, it, &f);
    items_fold_padding(L, it, &f);
    items_write_result(L, it, &f);
}

/* Phase (softmax): the sum of the terms from zero: the rows, then the padding. */
static void items_sum_pass(lower *L, items *it, const fold *sum) {
    if (sum->compensated) items_init_sum(L, it);
    else items_init(L, it, it->s1, xconst(L, it->rc->acc_t, 0));
    items_fold_rows(L, it, sum);
    items_fold_padding(L, it, sum);
}

/* Is a lane's sum of speculative terms within the range items_softmax trusts? (Not for NaN.) */
static int32_t sum_trusted(lower *L, items *it) {
    return xcmp(L, RJ_OP_LE, xlocal(L, loc_of(it, it->s1), it->s1), xconst(L, it->rc->acc_t, SPEC_BIG));
}

/* Softmax stashes its terms exp(x - m) so that the write pass does not take exp again. Where
 * the input is cheap (loads and a few operations), the max pass only reads it and the sum
 * pass reads it again, from cache, and stashes the term: the max pass streams like a plain
 * reduction, and the stash is written once rather than twice. On a Zen 4 (AVX-512, 2 threads)
 * bench's W2 took 13.3-15.5 ms where stashing the input in the max pass took 15.2-19.0 ms
 * (alternating runs); the max pass alone, stash stores and all, was a third of the kernel.
 * A costly input (one that calls exp or log) is still computed once, in the max pass.
 *
 * With a cheap input the maximum is also speculative: m is first the maximum of the item's
 * first and last SPEC_ROWS rows only, and the sum pass, which then reads the rows from memory,
 * takes exp(x - m) with it. Softmax does not depend on the shift (any m gives the same
 * ratios), and a shift below the true maximum loses nothing: every term is as exact relative
 * to itself as with the true maximum, the largest is at least 1 (the row that gave m), and a
 * term that underflows would have underflowed with the true maximum too. What a low m can do
 * is overflow, so the sum is checked: a column whose sum is not at most SPEC_BIG (it
 * overflowed, is NaN, or could overflow in the write pass) makes the unit run its max and sum
 * passes again, that column with the true maximum, as it runs without speculation: a later
 * row that exceeds those blocks by more than ln(SPEC_BIG) = 69, an infinity, a NaN or a
 * column of -inf all end there, and its result is the exact path's. The unit's other columns
 * keep their first shift and so compute their first results again, bit for bit: a column's
 * value never depends on which columns share its tile, which depends on the thread count.
 * On ordinary data the separate max pass over the whole item, a third of the kernel's time
 * that streamed from memory without computing, becomes a pass over 32 rows: W2 on a Zen 4
 * ran 7% faster on 2 threads (11 of 12 alternating pairs) and 5% on one. The last block is
 * there for data whose first rows are masked (-1e9): with the first block alone every unit
 * ran twice, 1.3x the time of the exact maximum; now it is as fast as ordinary data. Data
 * whose middle lies far above both ends pays for a second sum pass.
 * log_softmax keeps the exact maximum: its result x - m - log(sum) would subtract two values
 * as large as the distance between the blocks' maximum and the true one, losing absolute
 * accuracy. */
static void items_softmax(lower *L, const fuse_group *gr, items *it) {
    rj_dtype t = it->rc->acc_t;
    bool stash = it->rc->ai.root->op == RJ_OP_SOFTMAX;
    bool reread = stash && expr_cheap(L, red_input(L, it->rc, &it->rows));
    fold max = {.op = RJ_OP_MAX, .slot = it->s0, .shift = -1, .stash = stash && !reread ? STASH_SAVE : STASH_NONE};
    fold sum = {.op = RJ_OP_SUM, .slot = it->s1, .shift = xlocal(L, loc_of(it, it->s0), it->s0),
                .stash = !stash ? STASH_NONE : reread ? STASH_TERM : STASH_EXP, .compensated = it->compensate};
    if (!reread) {
        items_init(L, it, it->s0, xextreme(L, t, true));
        items_fold_rows(L, it, &max);
        items_fold_padding(L, it, &max);
        items_sum_pass(L, it, &sum);
    } else {
        int32_t vretry = newvar(L, "retry", RJ_I64), vpass = newvar(L, "pass", RJ_I64);
        s_set(L, &it->ub, vretry, xi(L, 1));
        blk pb = NEWBLK, ib;
        int32_t fp = s_for(L, &it->ub, vpass, xi(L, 0), xi(L, 2), LM_SERIAL);
        if (!L->err) L->k->st[fp].flags |= LF_NOUNROLL;
        int32_t fi = s_if(L, &pb, &ib, xcmp(L, RJ_OP_NE, xvar(L, vretry), xi(L, 0)));
        blk outer = it->ub;
        it->ub = ib;
        /* the maximum into sp (free until the sum), then into m where it applies: every column
         * on the first pass, on the second only those whose sum failed (s1 still holds it),
         * the others keeping their shift and so their first pass's results bit for bit */
        int32_t pass0 = xcmp(L, RJ_OP_EQ, xvar(L, vpass), xi(L, 0));
        max.slot = it->sp;
        items_init(L, it, it->sp, xextreme(L, t, true));
        int32_t hi = xsel(L, pass0, xmin(L, it->len, xi(L, SPEC_ROWS)), it->len);
        fold_rows(L, it, &max, xi(L, 0), hi, red_input(L, it->rc, &it->rows), &it->rows);
        /* and on the first pass the last SPEC_ROWS rows too (a masked first block) */
        int32_t lo2 = xsel(L, pass0, xmax(L, hi, xsub(L, it->len, xi(L, SPEC_ROWS))), it->len);
        fold_rows(L, it, &max, lo2, it->len, red_input(L, it->rc, &it->rows), &it->rows);
        items_fold_padding(L, it, &max);
        blk mb;
        int32_t fm = lanes_for(L, it, &it->ub, &mb);
        int32_t failed = xcmp(L, RJ_OP_EQ, sum_trusted(L, it), xconst(L, RJ_BOOL, 0));
        s_store_local(L, &mb, loc_of(it, it->s0), it->s0,
                      xsel(L, xbin(L, RJ_OP_LOGICAL_OR, RJ_BOOL, pass0, failed), xlocal(L, loc_of(it, it->sp), it->sp),
                           xlocal(L, loc_of(it, it->s0), it->s0)));
        close_body(L, fm, &mb);
        items_sum_pass(L, it, &sum);
        s_set(L, &it->ub, vretry, xi(L, 0));
        blk cb = NEWBLK;
        int32_t fc = s_for(L, &it->ub, it->vt, xi(L, 0), it->rc->ntile, LM_SERIAL);
        s_set(L, &cb, vretry, xmax(L, xvar(L, vretry), xsel(L, sum_trusted(L, it), xi(L, 0), xi(L, 1))));
        close_body(L, fc, &cb);
        ib = it->ub;
        it->ub = outer;
        close_body(L, fi, &ib);
        close_body(L, fp, &pb);
    }
    items_finish_sum(L, it, &sum, stash);
    items_write_rows(L, gr, it);
}

/* ---- reductions and softmax over the ragged or padded dim on a SIMT target ------------------
 *
 * One block per (piece, tile) unit. The tile is TS columns wide (a warp's width, or less for a
 * narrow inner extent), and the block's BS threads are R = BS / TS row groups of TS threads:
 * thread v takes column t = v mod TS and rows r, r + R, r + 2R, ... with r = v / TS. A warp
 * therefore reads TS consecutive elements of one row (coalesced), the R row groups stream
 * different rows at once, and every thread folds its rows into registers: a compensated sum,
 * a max/min/product, or for softmax the running maximum m and the sum s of exp(x - m),
 * rescaled when m grows (the online softmax: one pass over the input for both statistics).
 * The threads' partial values meet in block-shared memory after a barrier, and the first TS
 * threads fold the R partials of their column.
 *
 * A piece is a run of at most PK_PROWS rows of one item; the runtime cuts items into pieces
 * per run (UD_PIECES in loopir.h), so that a typical item is one piece and an item far longer
 * than the others becomes many, folded by many blocks at once. So the template is up to three
 * kernels, run in order:
 *
 *   fold     per (piece, tile): the partial values of the piece's rows. An item of one piece is
 *            finished here: its padding rows added in closed form and its result written, or
 *            for softmax its m and 1/s (log s for log_softmax) left in shared memory, from which,
 *            after a second barrier, every thread writes its rows (the input read again, mostly
 *            from L2: the block read the same rows moments before). An item of several pieces
 *            leaves its partials in the global buffer of pieces (LB_PIECES).
 *   combine  per (item, tile) of an item of several pieces: the pieces' partials folded, the
 *            padding added, and the result written (softmax: m and 1/s, into the first piece's
 *            slots).
 *   rows     softmax, per (piece, tile) of an item of several pieces: the piece's rows written.
 *
 * Nothing goes through per-thread global scratch.
 *
 * The online softmax step folds x into (m, s) with a single exp: with mn = max(m, x), one of
 * exp(m - mn) and exp(x - mn) is 1, so
 *     x > m:   s = s * exp(m - x) + (x - x + 1)      (x - x + 1: NaN for x = +inf, as exp(x - mn))
 *     else:    s = s + exp(x - m)                    (0 for x = -inf, whatever m is)
 * which keeps the NaN of the two-pass form wherever it has one (an +inf or NaN in the column),
 * and the sum is compensated as the CPU's is (the compensation rescaled with the sum). */

typedef enum { PH_FOLD, PH_COMBINE, PH_ROWS } simt_phase;

typedef struct simt_items {
    red_ctx *rc;
    simt_phase phase;
    blk ub;             /* the unit loop's body */
    int32_t part;       /* block-shared partials: [nslot][BS] (PH_FOLD) */
    int32_t pbuf;       /* the group's buffer of pieces */
    int32_t BS, TS, R, nslot;
    int32_t N;          /* the inner extent */
    int32_t b, f0, tn, len, cnt;
    int32_t p, p0, np;  /* the piece (not PH_COMBINE), the item's first piece, its pieces */
    int32_t r0, rn;     /* the piece's rows [r0, r0 + rn) (not PH_COMBINE) */
    int32_t last;       /* the piece is the item's last (row-dependent padding rows go there) */
    int32_t vv, vt, vr, vq; /* lane v, its column t and row group r, the row step q */
    at rows, pad;       /* element (b, i, f0 + t) in the rows / the padding rows */
    bool softmax, compensate;
} simt_items;

static ls s_barrier(void) {
    return (ls){.kind = LS_BARRIER, .var = -1, .a = -1, .b = -1, .ref = -1, .body = -1, .els = -1};
}

/* slot k of the block-shared partials of lane (expression) v */
static int32_t sp_at(lower *L, simt_items *s, int k, int32_t v) {
    return xlocal(L, s->part, xadd(L, xi(L, (int64_t)k * s->BS), v));
}

/* Index of slot k, column col of piece p in the buffer of pieces. */
static int32_t gp_index(lower *L, simt_items *s, int32_t p, int k, int32_t col) {
    return xadd(L, xmul(L, xadd(L, xmul(L, p, xi(L, s->nslot)), xi(L, k)), s->N), col);
}

static int32_t gp_load(lower *L, simt_items *s, int32_t p, int k, int32_t col, int32_t guard) {
    return xload(L, buf_param(L, s->pbuf), gp_index(L, s, p, k, col), s->rc->acc_t, guard);
}

static void gp_store(lower *L, simt_items *s, blk *b, int32_t p, int k, int32_t col, int32_t v) {
    s_store(L, b, buf_param(L, s->pbuf), gp_index(L, s, p, k, col), v, 0);
}

static int32_t class_param(lower *L, param_kind kind, int32_t cls, const char *what) {
    char name[64];
    snprintf(name, sizeof name, "%s.%s", L->g->syms[cls].name, what);
    return xparam(L, kind, cls, name);
}

/* Element e of the i64 array parameter of class cls. */
static int32_t class_load(lower *L, param_kind kind, int32_t cls, const char *what, int32_t e) {
    if (L->err) return 0;
    char name[64];
    snprintf(name, sizeof name, "%s.%s", L->g->syms[cls].name, what);
    int32_t p = lk_param(L->k, kind, cls, RJ_I64, name);
    if (p < 0) {
        L->err = RJ_ERR_NOMEM;
        return 0;
    }
    return xload(L, p, e, RJ_I64, -1);
}

static void simt_items_open(lower *L, red_ctx *rc, simt_items *s, blk *top, int32_t *fu) {
    const node *x = rc->ai.x;
    lkernel *k = L->k;
    int32_t cls = rc->ai.cls;
    k->domain = s->phase == PH_COMBINE ? UD_ITEMS : UD_PIECES;
    k->dom_class = cls;
    k->dom_rank = x->rank - 2;
    memcpy(k->dom_dims, x->dims + 2, sizeof(rj_dim) * (size_t)k->dom_rank);
    k->scratch_type = (uint8_t)rc->acc_t;
    k->passes = s->softmax && s->phase == PH_FOLD ? 2 : 1;
    k->tiled = true;
    k->fixed_tile = s->TS;
    k->launch.group = s->BS;
    int32_t vu = newvar(L, "u", RJ_I64);
    int32_t lo = xparam(L, PK_LO, 0, "lo"), hi = xparam(L, PK_HI, 0, "hi");
    *fu = s_for(L, top, vu, lo, hi, LM_UNITS);
    s->ub = NEWBLK;
    int32_t N = xi(L, 1);
    for (int d = 2; d < x->rank; d++) N = xmul(L, N, xsize(L, x->dims[d]));
    s->N = N;
    int32_t T = xi(L, s->TS);
    L->k->lanes_max = !L->err && L->k->ex[N].kind == LX_CONST && L->k->ex[N].i < s->TS ? L->k->ex[N].i : s->TS;
    int32_t nt = xbin(L, LOP_IDIV, RJ_I64, xadd(L, N, xi(L, s->TS - 1)), T);
    int32_t vb = newvar(L, "b", RJ_I64), vf0 = newvar(L, "f0", RJ_I64), vnt = newvar(L, "tn", RJ_I64);
    int32_t vlen = newvar(L, "len", RJ_I64), vp0 = newvar(L, "p0", RJ_I64), vnp = newvar(L, "np", RJ_I64);
    int32_t u = xvar(L, vu);
    int32_t outer = xbin(L, LOP_IDIV, RJ_I64, u, nt); /* the item or the piece */
    if (s->phase == PH_COMBINE) {
        s_set(L, &s->ub, vb, outer);
        s->p = -1;
    } else {
        int32_t vp = newvar(L, "p", RJ_I64);
        s_set(L, &s->ub, vp, outer);
        s->p = xvar(L, vp);
        s_set(L, &s->ub, vb, class_load(L, PK_PITEM, cls, "pitem", s->p));
    }
    s->b = xvar(L, vb);
    s_set(L, &s->ub, vf0, xmul(L, xsub(L, u, xmul(L, outer, nt)), T));
    s->f0 = xvar(L, vf0);
    s_set(L, &s->ub, vnt, xmin(L, T, xsub(L, N, s->f0)));
    s->tn = xvar(L, vnt);
    rc->ntile = s->tn;
    s_set(L, &s->ub, vlen, xlen(L, cls, s->b));
    s->len = xvar(L, vlen);
    s->cnt = rc->ai.padded ? xsub(L, xsize(L, rc->ai.L), s->len) : xi(L, 0);
    s_set(L, &s->ub, vp0, class_load(L, PK_PSTART, cls, "pstart", s->b));
    s->p0 = xvar(L, vp0);
    s_set(L, &s->ub, vnp, xsub(L, class_load(L, PK_PSTART, cls, "pstart", xadd(L, s->b, xi(L, 1))), s->p0));
    s->np = xvar(L, vnp);
    if (s->phase != PH_COMBINE) {
        int32_t vr0 = newvar(L, "r0", RJ_I64), vrn = newvar(L, "rn", RJ_I64);
        int32_t piece = xsub(L, s->p, s->p0);
        s_set(L, &s->ub, vr0, xmul(L, piece, class_param(L, PK_PROWS, cls, "prows")));
        s->r0 = xvar(L, vr0);
        s_set(L, &s->ub, vrn, xmin(L, class_param(L, PK_PROWS, cls, "prows"), xsub(L, s->len, s->r0)));
        s->rn = xvar(L, vrn);
        s->last = xcmp(L, RJ_OP_EQ, piece, xsub(L, s->np, xi(L, 1)));
    }
    if (s->phase == PH_FOLD) {
        s->part = L->err ? 0 : lk_local(k, "part", LL_BLOCK, rc->acc_t);
        if (s->part < 0) {
            L->err = RJ_ERR_NOMEM;
            s->part = 0;
        } else if (!L->err) {
            k->locals[s->part].elems = (int64_t)s->nslot * s->BS;
        }
    }
    rc->vi = newvar(L, "i", RJ_I64);
    s->vv = newvar(L, "v", RJ_I64);
    s->vt = newvar(L, "t", RJ_I64);
    s->vr = newvar(L, "r", RJ_I64);
    s->vq = newvar(L, "q", RJ_I64);
    s->rows = item_element(L, x, cls, s->b, xvar(L, rc->vi), xadd(L, s->f0, xvar(L, s->vt)), &s->pad);
}

/* Opens "for v in 0 .. BS lanes { t = v mod TS; r = v / TS; ...": one iteration per thread. */
static int32_t simt_lane_loop(lower *L, simt_items *s, blk *into, blk *body) {
    *body = NEWBLK;
    int32_t f = s_for(L, into, s->vv, xi(L, 0), xi(L, s->BS), LM_LANES);
    int32_t v = xvar(L, s->vv);
    s_set(L, body, s->vt, s->TS == 1 ? xi(L, 0) : xbin(L, LOP_IREM, RJ_I64, v, xi(L, s->TS)));
    s_set(L, body, s->vr, s->TS == 1 ? v : xbin(L, LOP_IDIV, RJ_I64, v, xi(L, s->TS)));
    return f;
}

/* Opens the row loop of a lane: rows [lo, lo + n) of the item with i = lo + r + q * R, none
 * when the lane's column is outside the tile; sets i. */
static int32_t simt_row_loop(lower *L, simt_items *s, blk *into, blk *body, int32_t lo, int32_t n) {
    *body = NEWBLK;
    int32_t r = xvar(L, s->vr);
    int32_t steps = xbin(L, LOP_IDIV, RJ_I64, xadd(L, xsub(L, n, r), xi(L, s->R - 1)), xi(L, s->R));
    int32_t ok = xcmp(L, RJ_OP_LT, xvar(L, s->vt), s->tn);
    steps = xsel(L, ok, xmax(L, steps, xi(L, 0)), xi(L, 0));
    int32_t f = s_for(L, into, s->vq, xi(L, 0), steps, LM_SERIAL);
    s_set(L, body, s->rc->vi, xadd(L, lo, xadd(L, r, xmul(L, xvar(L, s->vq), xi(L, s->R)))));
    return f;
}

/* The online softmax step: (m, s, c) folded with `times` copies (an expression of the type,
 * or -1 for one) of x; times > 0 is the caller's guard. */
static void online_step(lower *L, blk *b, rj_dtype t, int32_t vm, int32_t vs, int32_t vc, int32_t x,
                        int32_t times) {
    int32_t m = xvar(L, vm);
    int32_t big = xcmp(L, RJ_OP_GT, x, m);
    int32_t ex = xun(L, RJ_OP_EXP, t, xbin(L, RJ_OP_SUB, t, xbin(L, RJ_OP_MINIMUM, t, x, m),
                                         xbin(L, RJ_OP_MAXIMUM, t, x, m)));
    int32_t one = xbin(L, RJ_OP_ADD, t, xbin(L, RJ_OP_SUB, t, x, x), xconst(L, t, 1));
    int32_t neginf = xcmp(L, RJ_OP_EQ, x, xextreme(L, t, true));
    int32_t term = xsel(L, big, one, xsel(L, neginf, xconst(L, t, 0), ex));
    if (times >= 0) term = xbin(L, RJ_OP_MUL, t, term, times);
    int32_t vsc = newvar(L, "scale", t);
    s_set(L, b, vsc, xsel(L, big, ex, xconst(L, t, 1)));
    s_set(L, b, vs, xbin(L, RJ_OP_MUL, t, xvar(L, vs), xvar(L, vsc)));
    s_set(L, b, vc, xbin(L, RJ_OP_MUL, t, xvar(L, vc), xvar(L, vsc)));
    kahan_add(L, b, t, (place){-1, vs}, (place){-1, vc}, term);
    s_set(L, b, vm, xbin(L, RJ_OP_MAXIMUM, t, m, x));
}

/* Merges a partial (m2, sum2) of the online softmax into (m, s, c). */
static void online_merge(lower *L, blk *b, rj_dtype t, int32_t vm, int32_t vs, int32_t vc, int32_t m2,
                         int32_t sum2) {
    int32_t m = xvar(L, vm);
    int32_t big = xcmp(L, RJ_OP_GT, m2, m);
    int32_t ex = xun(L, RJ_OP_EXP, t, xbin(L, RJ_OP_SUB, t, xbin(L, RJ_OP_MINIMUM, t, m2, m),
                                         xbin(L, RJ_OP_MAXIMUM, t, m2, m)));
    int32_t neginf = xcmp(L, RJ_OP_EQ, m2, xextreme(L, t, true));
    int32_t term = xsel(L, neginf, xconst(L, t, 0), xsel(L, big, sum2, xbin(L, RJ_OP_MUL, t, sum2, ex)));
    int32_t vsc = newvar(L, "scale", t);
    s_set(L, b, vsc, xsel(L, big, ex, xconst(L, t, 1)));
    s_set(L, b, vs, xbin(L, RJ_OP_MUL, t, xvar(L, vs), xvar(L, vsc)));
    s_set(L, b, vc, xbin(L, RJ_OP_MUL, t, xvar(L, vc), xvar(L, vsc)));
    kahan_add(L, b, t, (place){-1, vs}, (place){-1, vc}, term);
    s_set(L, b, vm, xbin(L, RJ_OP_MAXIMUM, t, m, m2));
}

/* Folds element v into the lane's accumulators a (and c) or (m, s, c). */
static void simt_fold(lower *L, simt_items *s, blk *b, int32_t va, int32_t vs, int32_t vc, int32_t v) {
    red_ctx *rc = s->rc;
    rj_dtype t = rc->acc_t;
    int32_t vx = newvar(L, "x", t); /* read once, used by several statements */
    s_set(L, b, vx, v);
    v = xvar(L, vx);
    if (s->softmax) online_step(L, b, t, va, vs, vc, v, -1);
    else if (s->compensate) kahan_add(L, b, t, (place){-1, va}, (place){-1, vc}, v);
    else s_set(L, b, va, combine(L, (rj_op)rc->ai.root->op, t, xvar(L, va), v));
}

/* Merges partial k (its slots' values) into the accumulators. */
static void simt_merge(lower *L, simt_items *s, blk *b, int32_t va, int32_t vs, int32_t vc,
                       const int32_t *slot) {
    rj_dtype t = s->rc->acc_t;
    if (s->softmax)
        online_merge(L, b, t, va, vs, vc, slot[0], xbin(L, RJ_OP_SUB, t, slot[1], slot[2]));
    else if (s->compensate)
        kahan_add(L, b, t, (place){-1, va}, (place){-1, vc}, xbin(L, RJ_OP_SUB, t, slot[0], slot[1]));
    else
        s_set(L, b, va, combine(L, (rj_op)s->rc->ai.root->op, t, xvar(L, va), slot[0]));
}

/* The accumulators set from a partial's slots. */
static void simt_load_acc(lower *L, simt_items *s, blk *b, int32_t va, int32_t vs, int32_t vc,
                          const int32_t *slot) {
    s_set(L, b, va, slot[0]);
    if (s->softmax) s_set(L, b, vs, slot[1]);
    if (s->softmax || s->compensate) s_set(L, b, vc, slot[s->softmax ? 2 : 1]);
}

/* The accumulators' values in slot order. */
static void simt_acc_slots(lower *L, simt_items *s, int32_t va, int32_t vs, int32_t vc, int32_t *slot) {
    slot[0] = xvar(L, va);
    slot[1] = xvar(L, s->softmax ? vs : vc);
    slot[2] = xvar(L, vc);
}

/* Pass 1 (PH_FOLD): every lane folds its rows of the piece (and, in the item's last piece, the
 * padding rows whose value depends on the row) into registers and leaves them in the block's
 * partials. */
static void simt_pass_fold(lower *L, simt_items *s, int32_t va, int32_t vs, int32_t vc) {
    red_ctx *rc = s->rc;
    rj_dtype t = rc->acc_t;
    blk lb;
    int32_t fl = simt_lane_loop(L, s, &s->ub, &lb);
    s_set(L, &lb, va, s->softmax ? xextreme(L, t, true) : identity(L, (rj_op)rc->ai.root->op, t));
    if (s->softmax) s_set(L, &lb, vs, xconst(L, t, 0));
    if (s->softmax || s->compensate) s_set(L, &lb, vc, xconst(L, t, 0));
    for (int part = 0; part < 2; part++) {
        int32_t v;
        if (part == 1) {
            if (!rc->ai.padded) break;
            v = red_input(L, rc, &s->pad);
            if (!expr_uses_var(L, v, rc->vi)) break; /* closed form, when the item is finished */
        }
        blk rb;
        int32_t fr = part ? simt_row_loop(L, s, &lb, &rb, s->len, xsel(L, s->last, s->cnt, xi(L, 0)))
                          : simt_row_loop(L, s, &lb, &rb, s->r0, s->rn);
        v = red_input(L, rc, part ? &s->pad : &s->rows);
        simt_fold(L, s, &rb, va, vs, vc, v);
        close_body(L, fr, &rb);
    }
    int32_t slot[3];
    simt_acc_slots(L, s, va, vs, vc, slot);
    for (int k = 0; k < s->nslot; k++)
        s_store_local(L, &lb, s->part, xadd(L, xi(L, (int64_t)k * s->BS), xvar(L, s->vv)), slot[k]);
    close_body(L, fl, &lb);
    put(L, &s->ub, s_barrier());
}

/* The padding rows of one value, in closed form, when the item is complete. */
static void simt_padding(lower *L, simt_items *s, blk *cb, int32_t va, int32_t vs, int32_t vc) {
    red_ctx *rc = s->rc;
    rj_dtype t = rc->acc_t;
    if (!rc->ai.padded) return;
    int32_t v = red_input(L, rc, &s->pad);
    if (expr_uses_var(L, v, rc->vi)) return; /* folded row by row */
    int32_t some = xcmp(L, RJ_OP_GT, s->cnt, xi(L, 0));
    if (s->softmax) {
        blk ib;
        int32_t fi = s_if(L, cb, &ib, some);
        online_step(L, &ib, t, va, vs, vc, v, xcast(L, t, s->cnt));
        close_body(L, fi, &ib);
    } else if (s->compensate) {
        kahan_add(L, cb, t, (place){-1, va}, (place){-1, vc},
                  xsel(L, some, xbin(L, RJ_OP_MUL, t, v, xcast(L, t, s->cnt)), xconst(L, t, 0)));
    } else {
        s_set(L, cb, va, combine_n(L, (rj_op)rc->ai.root->op, t, xvar(L, va), v, s->cnt));
    }
}

/* The item's result for column t (reductions), then the epilogue; softmax: its m and its 1/s
 * (log s) through store(slot, value). */
static void simt_finish(lower *L, simt_items *s, blk *cb, int32_t va, int32_t vs, int32_t vc,
                        void (*store)(lower *, simt_items *, blk *, int, int32_t)) {
    red_ctx *rc = s->rc;
    const node *root = rc->ai.root, *x = rc->ai.x;
    rj_dtype t = rc->acc_t;
    simt_padding(L, s, cb, va, vs, vc);
    if (s->softmax) {
        int32_t sum = xbin(L, RJ_OP_SUB, t, xvar(L, vs), xvar(L, vc));
        store(L, s, cb, 0, xvar(L, va));
        store(L, s, cb, 1, root->op == RJ_OP_SOFTMAX ? xbin(L, RJ_OP_DIV, t, xconst(L, t, 1), sum)
                                                     : xun(L, RJ_OP_LOG, t, sum));
        return;
    }
    int32_t r = xvar(L, va);
    if (s->compensate) r = xbin(L, RJ_OP_SUB, t, r, xvar(L, vc));
    if (root->op == RJ_OP_MEAN) {
        int32_t n = rc->ai.padded ? xsize(L, rc->ai.L) : s->len;
        r = xbin(L, RJ_OP_DIV, t, r, xcast(L, t, n));
    }
    r = xcast(L, root->dtype, r);
    at oa = {.rank = root->rank, .inclass = -1, .outclass = -1, .guard = -1};
    oa.idx[0] = s->b;
    int o = 1;
    if (root->keepdim) oa.idx[o++] = xi(L, 0);
    for (int d = 2; d < x->rank; d++) oa.idx[o++] = s->rows.idx[d];
    store_group(L, cb, (int32_t)(root - L->g->nodes), r, &oa, ROWS_OUT, 0);
}

static void store_shared(lower *L, simt_items *s, blk *b, int k, int32_t v) {
    s_store_local(L, b, s->part, xadd(L, xi(L, (int64_t)k * s->BS), xvar(L, s->vt)), v);
}

static void store_first_piece(lower *L, simt_items *s, blk *b, int k, int32_t v) {
    gp_store(L, s, b, s->p0, k, xadd(L, s->f0, xvar(L, s->vt)), v);
}

/* Softmax: every lane writes its rows of the piece (and, in the item's last piece, the padding
 * rows where something padded is materialised) from its column's m and 1/s (log s). */
static void simt_write_rows(lower *L, const fuse_group *gr, simt_items *s, blk *into, int32_t m, int32_t kv) {
    red_ctx *rc = s->rc;
    const rj_graph *g = L->g;
    const node *root = rc->ai.root;
    rj_dtype t = rc->acc_t;
    bool padded_out = L->plan->nodes[root - g->nodes].mat;
    for (int32_t i = 0; i < gr->nmembers; i++)
        padded_out |= L->plan->nodes[gr->members[i]].mat && g->nodes[gr->members[i]].op != RJ_OP_UNPAD;
    blk lb;
    int32_t fl = simt_lane_loop(L, s, into, &lb);
    int32_t vm = newvar(L, "m", t), vk = newvar(L, "k", t);
    s_set(L, &lb, vm, m);
    s_set(L, &lb, vk, kv);
    for (int part = 0; part < (rc->ai.padded && padded_out ? 2 : 1); part++) {
        const at *pa = part ? &s->pad : &s->rows;
        blk rb;
        int32_t fr = part ? simt_row_loop(L, s, &lb, &rb, s->len, xsel(L, s->last, s->cnt, xi(L, 0)))
                          : simt_row_loop(L, s, &lb, &rb, s->r0, s->rn);
        int32_t v = red_input(L, rc, pa);
        int32_t y = root->op == RJ_OP_SOFTMAX
                        ? xbin(L, RJ_OP_MUL, t, xun(L, RJ_OP_EXP, t, xbin(L, RJ_OP_SUB, t, v, xvar(L, vm))), xvar(L, vk))
                        : xbin(L, RJ_OP_SUB, t, xbin(L, RJ_OP_SUB, t, v, xvar(L, vm)), xvar(L, vk));
        store_group(L, &rb, (int32_t)(root - g->nodes), y, pa, part == 0 ? ROWS_IN : ROWS_OUT, LF_NT);
        close_body(L, fr, &rb);
    }
    close_body(L, fl, &lb);
}

/* The fold kernel: see above. */
static void simt_kernel_fold(lower *L, const fuse_group *gr, simt_items *s, int32_t va, int32_t vs, int32_t vc) {
    simt_pass_fold(L, s, va, vs, vc);
    /* the first TS lanes fold the R partials of their column */
    blk cb = NEWBLK;
    int32_t fc = s_for(L, &s->ub, s->vt, xi(L, 0), s->tn, LM_LANES);
    int32_t col = xvar(L, s->vt), slot[3];
    for (int k = 0; k < s->nslot; k++) slot[k] = sp_at(L, s, k, col);
    simt_load_acc(L, s, &cb, va, vs, vc, slot);
    if (s->R > 1) {
        blk rb = NEWBLK;
        int32_t fr = s_for(L, &cb, s->vr, xi(L, 1), xi(L, s->R), LM_SERIAL);
        int32_t ix = xadd(L, xmul(L, xvar(L, s->vr), xi(L, s->TS)), col);
        for (int k = 0; k < s->nslot; k++) slot[k] = sp_at(L, s, k, ix);
        simt_merge(L, s, &rb, va, vs, vc, slot);
        close_body(L, fr, &rb);
    }
    /* an item of one piece is finished here; the pieces of a longer one are left for the
     * combine kernel */
    blk one, many = NEWBLK;
    int32_t fi = s_if(L, &cb, &one, xcmp(L, RJ_OP_EQ, s->np, xi(L, 1)));
    simt_finish(L, s, &one, va, vs, vc, store_shared);
    simt_acc_slots(L, s, va, vs, vc, slot);
    for (int k = 0; k < s->nslot; k++) gp_store(L, s, &many, s->p, k, xadd(L, s->f0, col), slot[k]);
    close_body(L, fi, &one);
    if (!L->err) L->k->st[fi].els = many.first;
    close_body(L, fc, &cb);
    if (s->softmax) { /* an item of one piece: its rows from m and 1/s in shared memory */
        blk ib;
        int32_t fw = s_if(L, &s->ub, &ib, xcmp(L, RJ_OP_EQ, s->np, xi(L, 1)));
        put(L, &ib, s_barrier());
        simt_write_rows(L, gr, s, &ib, sp_at(L, s, 0, xvar(L, s->vt)), sp_at(L, s, 1, xvar(L, s->vt)));
        close_body(L, fw, &ib);
    }
    put(L, &s->ub, s_barrier()); /* the next unit overwrites the partials */
}

/* The combine kernel: the pieces of an item of several, folded. */
static void simt_kernel_combine(lower *L, simt_items *s, int32_t va, int32_t vs, int32_t vc) {
    blk ib;
    int32_t fi = s_if(L, &s->ub, &ib, xcmp(L, RJ_OP_GT, s->np, xi(L, 1)));
    blk cb = NEWBLK;
    int32_t fc = s_for(L, &ib, s->vt, xi(L, 0), s->tn, LM_LANES);
    int32_t col = xadd(L, s->f0, xvar(L, s->vt)), slot[3];
    for (int k = 0; k < s->nslot; k++) slot[k] = gp_load(L, s, s->p0, k, col, -1);
    simt_load_acc(L, s, &cb, va, vs, vc, slot);
    blk rb = NEWBLK;
    int32_t fr = s_for(L, &cb, s->vq, xi(L, 1), s->np, LM_SERIAL);
    int32_t p = xadd(L, s->p0, xvar(L, s->vq));
    for (int k = 0; k < s->nslot; k++) slot[k] = gp_load(L, s, p, k, col, -1);
    simt_merge(L, s, &rb, va, vs, vc, slot);
    close_body(L, fr, &rb);
    simt_finish(L, s, &cb, va, vs, vc, store_first_piece);
    close_body(L, fc, &cb);
    close_body(L, fi, &ib);
}

/* The rows kernel (softmax): the rows of the pieces of an item of several. */
static void simt_kernel_rows(lower *L, const fuse_group *gr, simt_items *s) {
    blk ib;
    int32_t fi = s_if(L, &s->ub, &ib, xcmp(L, RJ_OP_GT, s->np, xi(L, 1)));
    int32_t col = xadd(L, s->f0, xvar(L, s->vt));
    int32_t in_tile = xcmp(L, RJ_OP_LT, xvar(L, s->vt), s->tn); /* no column past the tile */
    simt_write_rows(L, gr, s, &ib, gp_load(L, s, s->p0, 0, col, in_tile), gp_load(L, s, s->p0, 1, col, in_tile));
    close_body(L, fi, &ib);
}

static void simt_kernel(lower *L, const fuse_group *gr, red_ctx *rc, simt_phase ph, int32_t pbuf) {
    simt_items s = {.rc = rc, .phase = ph, .pbuf = pbuf};
    const node *root = rc->ai.root, *x = rc->ai.x;
    s.softmax = op_table[root->op].kind == KIND_SOFTMAX;
    bool sums = s.softmax || root->op == RJ_OP_SUM || root->op == RJ_OP_MEAN;
    s.compensate = sums && dtype_is_float(rc->acc_t);
    s.nslot = s.softmax ? 3 : s.compensate ? 2 : 1;
    int64_t n = 1;
    bool known = true;
    for (int d = 2; d < x->rank; d++) {
        if (x->dims[d] < 0) known = false;
        else n *= x->dims[d];
    }
    s.BS = L->k->launch.block;
    s.TS = L->desc->warp < s.BS ? L->desc->warp : s.BS;
    while (known && s.TS > 1 && s.TS / 2 >= n) s.TS /= 2;
    s.R = s.BS / s.TS;
    L->memo_n = 0;
    blk top = NEWBLK;
    int32_t fu;
    simt_items_open(L, rc, &s, &top, &fu);
    rj_dtype t = rc->acc_t;
    int32_t va = newvar(L, s.softmax ? "mx" : "acc", t);
    int32_t vs = newvar(L, "s", t), vc = newvar(L, "c", t);
    switch (ph) {
    case PH_FOLD: simt_kernel_fold(L, gr, &s, va, vs, vc); break;
    case PH_COMBINE: simt_kernel_combine(L, &s, va, vs, vc); break;
    default: simt_kernel_rows(L, gr, &s); break;
    }
    close_body(L, fu, &s.ub);
    L->k->body = top.first;
}

/* The buffer of pieces of a group's item kernels: nslot values per element of the inner
 * extent per piece. */
static int32_t add_pieces_buf(lower *L, red_ctx *rc) {
    lprog *p = L->prog;
    const node *root = rc->ai.root, *x = rc->ai.x;
    if (!mem_grow(L->ctx, (void **)&p->bufs, &p->capbufs, p->nbufs + 1, sizeof(lbuf))) {
        L->err = RJ_ERR_NOMEM;
        return 0;
    }
    bool softmax = op_table[root->op].kind == KIND_SOFTMAX;
    bool compensate = (softmax || root->op == RJ_OP_SUM || root->op == RJ_OP_MEAN) && dtype_is_float(rc->acc_t);
    lbuf *b = &p->bufs[p->nbufs];
    memset(b, 0, sizeof *b);
    b->kind = LB_PIECES;
    b->dtype = (uint8_t)rc->acc_t;
    b->index = rc->ai.cls;
    b->node = -1;
    b->rank = x->rank - 1;
    b->dims[0] = softmax ? 3 : compensate ? 2 : 1;
    for (int d = 2; d < x->rank; d++) b->dims[d - 1] = x->dims[d];
    return p->nbufs++;
}

static void lower_items_simt(lower *L, const fuse_group *gr, red_ctx *rc) {
    int32_t pbuf = add_pieces_buf(L, rc);
    if (L->err) return;
    char base[32], what[96];
    snprintf(base, sizeof base, "%s", L->k->name);
    snprintf(what, sizeof what, "%s", L->k->what);
    simt_kernel(L, gr, rc, PH_FOLD, pbuf);
    int nk = op_table[rc->ai.root->op].kind == KIND_SOFTMAX ? 3 : 2;
    static const char *const sfx[] = {"", "_combine", "_rows"};
    static const char *const role[] = {"", "combine the pieces of long items", "rows of long items"};
    for (int ph = 1; ph < nk && !L->err; ph++) {
        char name[48];
        snprintf(name, sizeof name, "%s%s", base, sfx[ph]);
        if (!open_kernel(L, name)) return;
        snprintf(L->k->what, sizeof L->k->what, "%.60s: %s", what, role[ph]);
        L->k->split_only = true;
        simt_kernel(L, gr, rc, (simt_phase)ph, pbuf);
    }
}

static void lower_items_cpu(lower *L, const fuse_group *gr, red_ctx *rc, bool allow_state) {
    items it;
    blk top = NEWBLK;
    int32_t fu = items_open(L, rc, &it, &top, allow_state);
    if (op_table[rc->ai.root->op].kind == KIND_SOFTMAX) items_softmax(L, gr, &it);
    else items_reduction(L, &it);
    close_body(L, fu, &it.ub);
    L->k->body = top.first;
}

static void lower_items(lower *L, const fuse_group *gr, red_ctx *rc) {
    if (L->desc->simt) {
        lower_items_simt(L, gr, rc);
        return;
    }
    lower_items_cpu(L, gr, rc, true);
    if (L->err || L->k->stash_variant != 1) return;
    /* the constant tile's twin (state_tile) */
    if (L->k->has_nt) xparam(L, PK_NT, 0, "nt"); /* as lower_program adds it to the last kernel */
    char name[48], what[sizeof L->k->what];
    snprintf(name, sizeof name, "%s_tiles", L->k->name);
    snprintf(what, sizeof what, "%s", L->k->what);
    int32_t vt = L->k->variant_tile;
    bool heavy = L->k->heavy;
    if (!open_kernel(L, name)) return;
    snprintf(L->k->what, sizeof L->k->what, "%s", what);
    L->k->heavy = heavy;
    L->k->stash_variant = 2;
    L->k->variant_tile = vt;
    L->memo_n = 0;
    lower_items_cpu(L, gr, rc, false);
}

/* ---- per-item products on a SIMT target: tiles in shared memory ------------------------------
 * q kᵀ and p v as a block-wide tiled GEMM per item. A block takes a piece of an item
 * (UD_PIECES: an item's rows cut into pieces, so that a long item is many units) and walks its
 * rows in tiles of MM_T rows and the product's columns (q kᵀ: the item's rows j; p v: the
 * dense columns n) in tiles of MM_T. Per tile of MM_T contraction indices (q kᵀ: d; p v: the
 * item's rows j) every thread stages MM_T² / block elements of A (q's or p's rows, read along
 * the contraction: coalesced) and of B (k's rows transposed, or v's rows) in shared memory;
 * after a barrier every thread accumulates MM_T² / block outputs of the tile (one column,
 * rows r, r + block / MM_T, ...) from them, A's element a broadcast across the warp and B's
 * rows padded to MM_T + 1 elements so that k's transposed stores hit distinct banks; a second
 * barrier frees the tiles for the next step. Each global element is read once per tile pair
 * instead of once per output element, and no output needs a cross-thread reduction. Elements
 * past the piece's rows, the columns or the contraction are staged as zeros and never stored;
 * every loop around a barrier has bounds the whole block shares. Returns false where the
 * block's shape does not suit the tiles (the caller lowers the plain kernel). */

#define MM_T 32

/* One staged element: local[slot] = ok ? value of node n at a : 0. */
static void mm_stage(lower *L, blk *b, int32_t loc, int32_t slot, int32_t ok, int32_t n, const at *a, rj_dtype t) {
    blk yes, no = NEWBLK;
    int32_t fi = s_if(L, b, &yes, ok);
    s_store_local(L, &yes, loc, slot, xcast(L, t, value_fresh(L, n, a)));
    s_store_local(L, &no, loc, slot, xconst(L, t, 0));
    close_body(L, fi, &yes);
    if (!L->err) L->k->st[fi].els = no.first;
}

/* ceil(n / MM_T), for a non-negative n */
static int32_t mm_tiles(lower *L, int32_t n) {
    return xbin(L, LOP_IDIV, RJ_I64, xadd(L, xmax(L, n, xi(L, 0)), xi(L, MM_T - 1)), xi(L, MM_T));
}

static bool lower_item_matmul_simt(lower *L, const fuse_group *gr) {
    const rj_graph *g = L->g;
    const node *r = &g->nodes[gr->root], *xn = &g->nodes[r->in[0]], *wn = &g->nodes[r->in[1]];
    lkernel *k = L->k;
    int BS = k->launch.block;
    bool qk = is_jagged_t(g, wn);
    if (!L->desc->simt || is_jagged_t(g, xn) || (!qk && !node_is_pair(g, xn)) || BS < MM_T || BS % MM_T ||
        (MM_T * MM_T) % BS)
        return false;
    int32_t xs = r->in[0], ws = qk ? wn->in[0] : r->in[1];
    const node *xv = &g->nodes[xs], *wv = &g->nodes[ws];
    int32_t cls = root_of(g, qk ? xv->dims[1] : r->dims[1]);
    rj_dtype t = r->dtype;
    int M = MM_T * MM_T / BS, RS = BS / MM_T; /* outputs a thread, rows between them */
    k->heavy = true;
    sbuf w;
    sbuf_init(&w, L->ctx);
    sbuf_printf(&w, "per-item product %s of ", qk ? "q kᵀ" : "p v");
    print_node_type(&w, g, xv);
    sbuf_puts(&w, " and ");
    print_node_type(&w, g, wv);
    sbuf_puts(&w, ", tiled in shared memory");
    set_what(L, &w);
    k->domain = UD_PIECES;
    k->dom_class = cls;
    k->dom_rank = 0;
    k->tiled = true;
    k->fixed_tile = 1;
    k->launch.group = BS;
    int32_t as = L->err ? -1 : lk_local(k, "atile", LL_BLOCK, t);
    int32_t bs = L->err || as < 0 ? -1 : lk_local(k, "btile", LL_BLOCK, t);
    if (as < 0 || bs < 0) {
        if (!L->err) L->err = RJ_ERR_NOMEM;
        return true;
    }
    if (!L->err) {
        k->locals[as].elems = (int64_t)MM_T * MM_T;
        k->locals[bs].elems = (int64_t)MM_T * (MM_T + 1);
    }
    int32_t acc[MM_T];
    for (int m = 0; m < M; m++) {
        char name[16];
        snprintf(name, sizeof name, "acc%d", m);
        acc[m] = newvar(L, name, t);
    }
    /* the unit u: a piece of item b, its rows [r0, rend) */
    blk top = NEWBLK, ub = NEWBLK;
    int32_t vu = newvar(L, "u", RJ_I64);
    int32_t fu = s_for(L, &top, vu, xparam(L, PK_LO, 0, "lo"), xparam(L, PK_HI, 0, "hi"), LM_UNITS);
    int32_t vb = newvar(L, "b", RJ_I64), vlen = newvar(L, "len", RJ_I64), vr0 = newvar(L, "r0", RJ_I64);
    int32_t vre = newvar(L, "rend", RJ_I64);
    int32_t u = xvar(L, vu);
    s_set(L, &ub, vb, class_load(L, PK_PITEM, cls, "pitem", u));
    int32_t b = xvar(L, vb);
    s_set(L, &ub, vlen, xlen(L, cls, b));
    int32_t len = xvar(L, vlen), prows = class_param(L, PK_PROWS, cls, "prows");
    s_set(L, &ub, vr0, xmul(L, xsub(L, u, class_load(L, PK_PSTART, cls, "pstart", b)), prows));
    int32_t r0 = xvar(L, vr0);
    s_set(L, &ub, vre, xmax(L, xmin(L, xadd(L, r0, prows), len), r0)); /* rows [r0, rend) */
    int32_t rend = xvar(L, vre);
    int32_t ncols = qk ? len : xsize(L, r->dims[2]), ncon = qk ? xsize(L, xv->dims[2]) : len;
    /* for each tile of rows i0 and of columns c0 */
    int32_t vti = newvar(L, "ti", RJ_I64), vtc = newvar(L, "tc", RJ_I64), vtt = newvar(L, "tt", RJ_I64);
    int32_t vi0 = newvar(L, "i0", RJ_I64), vc0 = newvar(L, "c0", RJ_I64), vt0 = newvar(L, "t0", RJ_I64);
    int32_t vv = newvar(L, "v", RJ_I64), vq = newvar(L, "q", RJ_I64), vbv = newvar(L, "bv", t);
    blk tib = NEWBLK, tcb = NEWBLK, ttb = NEWBLK;
    int32_t fti = s_for(L, &ub, vti, xi(L, 0), mm_tiles(L, xsub(L, rend, r0)), LM_SERIAL);
    s_set(L, &tib, vi0, xadd(L, r0, xmul(L, xvar(L, vti), xi(L, MM_T))));
    int32_t i0 = xvar(L, vi0);
    int32_t ftc = s_for(L, &tib, vtc, xi(L, 0), mm_tiles(L, ncols), LM_SERIAL);
    s_set(L, &tcb, vc0, xmul(L, xvar(L, vtc), xi(L, MM_T)));
    int32_t c0 = xvar(L, vc0);
    int32_t v = xvar(L, vv), col = xbin(L, LOP_IREM, RJ_I64, v, xi(L, MM_T));
    int32_t rg = xbin(L, LOP_IDIV, RJ_I64, v, xi(L, MM_T));
    { /* zero the thread's accumulators */
        blk lb = NEWBLK;
        int32_t fl = s_for(L, &tcb, vv, xi(L, 0), xi(L, BS), LM_LANES);
        for (int m = 0; m < M; m++) s_set(L, &lb, acc[m], xconst(L, t, 0));
        close_body(L, fl, &lb);
    }
    int32_t ftt = s_for(L, &tcb, vtt, xi(L, 0), mm_tiles(L, ncon), LM_SERIAL);
    s_set(L, &ttb, vt0, xmul(L, xvar(L, vtt), xi(L, MM_T)));
    int32_t t0 = xvar(L, vt0);
    { /* stage A [i][t] and B [t][c] (rows of MM_T + 1) */
        blk lb = NEWBLK;
        int32_t fl = s_for(L, &ttb, vv, xi(L, 0), xi(L, BS), LM_LANES);
        for (int l = 0; l < M; l++) {
            int32_t e = xadd(L, v, xi(L, (int64_t)l * BS));
            int32_t hi = xbin(L, LOP_IDIV, RJ_I64, e, xi(L, MM_T)), lo = xbin(L, LOP_IREM, RJ_I64, e, xi(L, MM_T));
            /* A: row i0 + hi, contraction t0 + lo */
            int32_t ai = xadd(L, i0, hi), at_ = xadd(L, t0, lo);
            int32_t aok = xbin(L, RJ_OP_LOGICAL_AND, RJ_BOOL, xcmp(L, RJ_OP_LT, ai, rend), xcmp(L, RJ_OP_LT, at_, ncon));
            at aa = at3(b, ai, at_, cls);
            mm_stage(L, &lb, as, e, aok, xs, &aa, t);
            /* B: q kᵀ reads k's row c0 + hi along d = t0 + lo; p v reads v's row t0 + hi along
             * n = c0 + lo: both coalesced */
            int32_t bc = qk ? xadd(L, c0, hi) : xadd(L, c0, lo), bt = qk ? xadd(L, t0, lo) : xadd(L, t0, hi);
            int32_t bok = xbin(L, RJ_OP_LOGICAL_AND, RJ_BOOL, xcmp(L, RJ_OP_LT, bc, ncols), xcmp(L, RJ_OP_LT, bt, ncon));
            at ba = qk ? at3(b, bc, bt, cls) : at3(b, bt, bc, cls);
            int32_t slot = xadd(L, xmul(L, qk ? lo : hi, xi(L, MM_T + 1)), qk ? hi : lo);
            mm_stage(L, &lb, bs, slot, bok, ws, &ba, t);
        }
        close_body(L, fl, &lb);
    }
    put(L, &ttb, s_barrier());
    { /* accumulate: acc[m] += A[rg + m RS][q] B[q][col] */
        blk lb = NEWBLK, qb = NEWBLK;
        int32_t fl = s_for(L, &ttb, vv, xi(L, 0), xi(L, BS), LM_LANES);
        int32_t fq = s_for(L, &lb, vq, xi(L, 0), xi(L, MM_T), LM_SERIAL);
        int32_t q = xvar(L, vq);
        s_set(L, &qb, vbv, xlocal(L, bs, xadd(L, xmul(L, q, xi(L, MM_T + 1)), col)));
        for (int m = 0; m < M; m++) {
            int32_t row = xadd(L, rg, xi(L, (int64_t)m * RS));
            int32_t av = xlocal(L, as, xadd(L, xmul(L, row, xi(L, MM_T)), q));
            s_set(L, &qb, acc[m], xfma(L, t, av, xvar(L, vbv), xvar(L, acc[m])));
        }
        close_body(L, fq, &qb);
        close_body(L, fl, &lb);
    }
    put(L, &ttb, s_barrier());
    close_body(L, ftt, &ttb);
    { /* the tile's outputs and what is fused after them */
        blk lb = NEWBLK;
        int32_t fl = s_for(L, &tcb, vv, xi(L, 0), xi(L, BS), LM_LANES);
        for (int m = 0; m < M; m++) {
            int32_t i = xadd(L, i0, xadd(L, rg, xi(L, (int64_t)m * RS))), j = xadd(L, c0, col);
            int32_t ok = xbin(L, RJ_OP_LOGICAL_AND, RJ_BOOL, xcmp(L, RJ_OP_LT, i, rend), xcmp(L, RJ_OP_LT, j, ncols));
            blk sb;
            int32_t fs = s_if(L, &lb, &sb, ok);
            at oa = at3(b, i, j, cls);
            store_group(L, &sb, gr->root, xvar(L, acc[m]), &oa, ROWS_ANY, LF_NT);
            close_body(L, fs, &sb);
        }
        close_body(L, fl, &lb);
    }
    close_body(L, ftc, &tcb);
    close_body(L, fti, &tib);
    close_body(L, fu, &ub);
    k->body = top.first;
    return true;
}

/* ---- reductions and softmax over a dense dim: per leading index ----------------------------- */

/* Elements a vectorised partial sum covers before it is folded into the compensated total.
 * The partial's own error grows with the adds each vector lane makes (256 elements on AVX2,
 * one 8-wide accumulator: 32 adds a lane, a sum of 10^6 0.1f 4 ulps off; 64: 1 ulp). An
 * extent known to be at most SUM_ONE_BLOCK is summed as one block (a norm over D = 256 stays
 * one plain vector loop). */
#define SUM_BLOCK 64
#define SUM_ONE_BLOCK 256

/* At a full index except the axis: the axis loops (max / sum / write for softmax, one fold for
 * a reduction) with scalar accumulators, then the result for a reduction. Along a contiguous
 * axis the loop is a lanes loop and the folds are `reduce` statements over it. */
static void dense_axis_body(lower *L, blk *b, at *a, void *ud) {
    red_ctx *rc = ud;
    const rj_graph *g = L->g;
    const node *root = rc->ai.root, *x = rc->ai.x;
    int32_t rid = (int32_t)(root - g->nodes);
    bool softmax = op_table[root->op].kind == KIND_SOFTMAX;
    rj_dtype t = rc->acc_t;
    int ax = rc->ai.axis;
    int32_t ext = x->dims[ax] == 1 ? xi(L, 1) : xextent(L, x->dims, ax, a);
    int32_t acc = newvar(L, "acc", t), acc2 = newvar(L, "acc2", t);
    int32_t va = newvar(L, "k", RJ_I64);
    int32_t saved = a->idx[ax];
    a->idx[ax] = xvar(L, va);
    bool vec = ax == x->rank - 1; /* contiguous along the axis */
    int passes = softmax ? 3 : 1;
    bool sums = softmax || root->op == RJ_OP_SUM || root->op == RJ_OP_MEAN;
    int32_t comp = sums && dtype_is_float(t) ? newvar(L, "c", t) : -1;
    /* a softmax in a GEMM's epilogue keeps each exp(x - max) in the chunk C, over the product
     * it no longer needs, so the write pass divides instead of computing exp again; C is in
     * cache, and the element is rewritten by the thread that wrote it */
    bool stash = root->op == RJ_OP_SOFTMAX && L->chunk_root >= 0 && ax == x->rank - 1 &&
                 L->g->nodes[L->chunk_root].dtype == t;
    for (int pass = 0; pass < passes; pass++) {
        bool write = softmax && pass == 2;
        int32_t target = softmax && pass == 1 ? acc2 : acc;
        /* an extent known to fit one block needs none */
        bool one_block = x->dims[ax] >= 0 && x->dims[ax] <= SUM_ONE_BLOCK;
        bool blocked = comp >= 0 && !one_block && (softmax ? pass == 1 : true);
        if (!write)
            s_set(L, b, target, softmax ? (pass == 0 ? xextreme(L, t, true) : xconst(L, t, 0))
                                        : identity(L, root->op, t));
        /* a float sum runs in blocks of SUM_BLOCK elements, each summed by the (vectorised)
         * loop into its own partial, the partials compensated (kahan_add): the error stays
         * that of one block whatever the extent */
        blk *into = b, bb = NEWBLK;
        int32_t fb = -1, lo = xi(L, 0), hi = ext, part = target;
        if (blocked) {
            s_set(L, b, comp, xconst(L, t, 0));
            int32_t vkb = newvar(L, "kb", RJ_I64);
            int32_t nb = xbin(L, LOP_IDIV, RJ_I64, xadd(L, ext, xi(L, SUM_BLOCK - 1)), xi(L, SUM_BLOCK));
            fb = s_for(L, b, vkb, xi(L, 0), nb, LM_SERIAL);
            lo = xmul(L, xvar(L, vkb), xi(L, SUM_BLOCK));
            hi = xmin(L, xadd(L, lo, xi(L, SUM_BLOCK)), ext);
            part = newvar(L, "part", t);
            s_set(L, &bb, part, xconst(L, t, 0));
            into = &bb;
        }
        blk ib = NEWBLK;
        int32_t fa = s_for(L, into, va, lo, hi, vec ? LM_LANES : LM_SERIAL);
        L->lanes += vec;
        int32_t v = red_input(L, rc, a);
        if (!softmax) {
            s_accum(L, &ib, part, combine_fn(root->op), v);
        } else if (pass == 0) {
            s_accum(L, &ib, target, RJ_OP_MAXIMUM, v);
        } else if (pass == 1) {
            int32_t e = xun(L, RJ_OP_EXP, t, xbin(L, RJ_OP_SUB, t, v, xvar(L, acc)));
            if (stash) { /* evaluated once, before the store overwrites what it reads */
                int32_t ev = newvar(L, "e", t);
                s_set(L, &ib, ev, e);
                e = xvar(L, ev);
                s_store(L, &ib, buf_param(L, L->chunk_buf), chunk_index(L, a), e, 0);
            }
            s_accum(L, &ib, part, RJ_OP_ADD, e);
        } else {
            int32_t m = xvar(L, acc), s = xvar(L, acc2);
            int32_t e = stash ? xload(L, buf_param(L, L->chunk_buf), chunk_index(L, a), t, -1)
                              : xun(L, RJ_OP_EXP, t, xbin(L, RJ_OP_SUB, t, v, m));
            int32_t y = root->op == RJ_OP_SOFTMAX
                            ? xbin(L, RJ_OP_DIV, t, e, s)
                            : xbin(L, RJ_OP_SUB, t, xbin(L, RJ_OP_SUB, t, v, m), xun(L, RJ_OP_LOG, t, s));
            store_group(L, &ib, rid, y, a, ROWS_ANY, LF_NT);
        }
        L->lanes -= vec;
        close_body(L, fa, &ib);
        if (blocked) {
            kahan_add(L, &bb, t, (place){-1, target}, (place){-1, comp}, xvar(L, part));
            close_body(L, fb, &bb);
            s_set(L, b, target, xbin(L, RJ_OP_SUB, t, xvar(L, target), xvar(L, comp)));
        }
    }
    a->idx[ax] = saved;
    if (softmax) return;
    int32_t r = xvar(L, acc);
    if (root->op == RJ_OP_MEAN) r = xbin(L, RJ_OP_DIV, t, r, xcast(L, t, ext));
    r = xcast(L, root->dtype, r);
    at oa = {.rank = root->rank, .inclass = a->inclass, .outclass = -1, .guard = -1};
    int o = 0;
    for (int d = 0; d < x->rank; d++) {
        if (d != ax) oa.idx[o++] = a->idx[d];
        else if (root->keepdim) oa.idx[o++] = xi(L, 0);
    }
    store_group(L, b, rid, r, &oa, ROWS_ANY, 0);
}

/* Units over the leading dims of a tensor of shape dims: rows of its class when it is jagged
 * (dims 0 and 1), else dims [0, upto) flattened. Inside each unit, loops (not vectorised) over
 * dims [first, stop) where first is 2 or upto, then fn at the full index. Returns first. */
static int leading_units(lower *L, blk *top, const rj_dim *dims, int rank, int upto, int stop,
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

/* Softmax or a reduction over dim 1 of a tensor with two ragged dims: a unit per column
 * (b, j) of an item's block, the rows i < len_b the axis loop (strided: one column of a
 * row-major block). The units are enumerated as the class's rows, j in the role of i. */
static void lower_pair_columns(lower *L, const fuse_group *gr, red_ctx *rc) {
    const node *x = rc->ai.x;
    blk top = NEWBLK;
    at a = {.rank = x->rank, .inclass = -1, .outclass = -1, .guard = -1};
    rows_nest rn;
    blk *in = rows_open(L, &top, &a, root_of(L->g, x->dims[1]), &rn);
    a.idx[2] = a.idx[1]; /* the unit's row index is the column j */
    a.idx[1] = xi(L, 0); /* replaced by the axis loop */
    rj_dim dims[RJ_MAX_RANK];
    memcpy(dims, x->dims, sizeof(rj_dim) * x->rank);
    dims[1] = dims[2] = 1; /* looped by the axis body and the units */
    loops_v(L, in, &a, dims, 3, x->rank, dense_axis_body, rc, false);
    rows_close(L, &rn);
    L->k->body = top.first;
    RJ_UNUSED(gr);
}

static void lower_axis(lower *L, const fuse_group *gr) {
    const rj_graph *g = L->g;
    const node *root = &g->nodes[gr->root];
    red_ctx rc = {.ai = axis_of(L, root)};
    const node *x = rc.ai.x;
    rc.acc_t = root->dtype;
    L->k->heavy = node_is_pair(g, x); /* block addressing on top of the math: more registers */
    sbuf w;
    sbuf_init(&w, L->ctx);
    sbuf_printf(&w, "%s over dim %d of ", op_table[root->op].name, rc.ai.axis);
    print_node_type(&w, g, x);
    if (rc.ai.items) sbuf_puts(&w, rc.ai.padded ? " (padded dim: padding in closed form)" : " (ragged dim)");
    set_what(L, &w);
    if (rc.ai.items) {
        lower_items(L, gr, &rc);
        return;
    }
    if (rc.ai.axis == 1 && node_is_pair(g, x)) {
        lower_pair_columns(L, gr, &rc);
        return;
    }
    blk top = NEWBLK;
    /* units: the dims before the axis; the dims after it are looped inside each unit, and the
     * axis itself by the body (its extent replaced by 1 here) */
    rj_dim dims[RJ_MAX_RANK];
    memcpy(dims, x->dims, sizeof(rj_dim) * x->rank);
    dims[rc.ai.axis] = 1;
    int first = leading_units(L, &top, dims, x->rank, rc.ai.axis, x->rank, dense_axis_body, &rc);
    /* a reduction's unit writes the dims after the axis (its identities where the axis is
     * empty); a softmax's writes the axis too, and nothing where it holds no element */
    if (op_table[root->op].kind == KIND_SOFTMAX) unit_extent(L, x->dims, first, x->rank);
    L->k->body = top.first;
}

/* ---- layer_norm and rms_norm ---------------------------------------------------------------- */

typedef struct norm_ctx {
    const node *root, *x;
    int lead;          /* first normalised dim */
} norm_ctx;

typedef struct norm_pass {
    norm_ctx *nc;
    int pass;          /* 0: statistics, 1: write */
    int32_t acc, acc2; /* sum of (x s - k) and of its squares (layer_norm); of (x s)^2 (rms_norm) */
    int32_t part, part2; /* the same over one block of the innermost dim (norm_stats_row) */
    int32_t c, c2;     /* their compensations (kahan_add) */
    int32_t shift;     /* variable k: the shift of the sums (norm_unit) */
    int32_t scale;     /* variable s: 1, or the power of two that keeps a big row's squares finite */
    bool scaled;       /* the statistics pass reads s (norm_unit's second try), else takes s = 1 */
    int32_t mean, rstd; /* variables: m1, the mean of x s - k (layer_norm), and 1 / sqrt(var + eps) */
} norm_pass;

static void norm_inner(lower *L, blk *b, at *a, void *ud) {
    norm_pass *np = ud;
    const node *root = np->nc->root;
    const rj_graph *g = L->g;
    rj_dtype t = root->dtype;
    L->memo_n = 0;
    int32_t v = xcast(L, t, value(L, root->in[0], a));
    bool layer = root->op == RJ_OP_LAYER_NORM;
    /* layer_norm: x s - k in one fma (with s = 1, x - k rounded once) */
    int32_t c = !layer ? -1
              : np->pass == 0 && !np->scaled ? xbin(L, RJ_OP_SUB, t, v, xvar(L, np->shift))
              : xfma(L, t, v, xvar(L, np->scale), xun(L, RJ_OP_NEG, t, xvar(L, np->shift)));
    if (np->pass == 0) {
        if (layer) {
            s_accum(L, b, np->part, RJ_OP_ADD, c);
            s_accum_fma(L, b, np->part2, c, c);
        } else {
            int32_t vs = np->scaled ? xbin(L, RJ_OP_MUL, t, v, xvar(L, np->scale)) : v;
            s_accum_fma(L, b, np->part2, vs, vs);
        }
    } else {
        /* layer_norm: ((x s - k) - m1) rstd, not (x - (k + m1)) rstd: x - k is exact wherever
         * x is within a factor of 2 of k, and m1 keeps the mean's digits below k's ulp, which
         * a mean rounded to f32 loses (data around 1e4 with a spread of 1: a shift of 1e-3 in
         * every result). The subtraction costs W5 about 2% with its rows in the caches (an fma
         * of (x s - k), rstd and -m1 rstd would save it, but its -m1 rstd waits for rstd, and
         * measured slower). rms_norm: x (s rstd) */
        int32_t y = layer ? xbin(L, RJ_OP_MUL, t, xbin(L, RJ_OP_SUB, t, c, xvar(L, np->mean)), xvar(L, np->rstd))
                          : xbin(L, RJ_OP_MUL, t, v, xvar(L, np->rstd));
        int k = 1;
        if (root->ival & 1) y = xbin(L, RJ_OP_MUL, t, y, operand(L, root, k++, a, t));
        if (root->ival & 2) y = xbin(L, RJ_OP_ADD, t, y, operand(L, root, k++, a, t));
        store_group(L, b, (int32_t)(root - g->nodes), y, a, ROWS_ANY, LF_NT);
    }
}

/* The statistics of one line of the innermost normalised dim: summed by the vectorised loop
 * in blocks of SUM_BLOCK elements into partials, which are added to the row's sums with
 * compensation (kahan_add), so the statistics of a long row are as accurate as a sum's. */
static void norm_stats_row(lower *L, blk *b, at *a, void *ud) {
    norm_pass *np = ud;
    const node *root = np->nc->root, *x = np->nc->x;
    rj_dtype t = root->dtype;
    int d = x->rank - 1;
    bool layer = root->op == RJ_OP_LAYER_NORM;
    int32_t ext = x->dims[d] == 1 ? xi(L, 1) : xsize(L, x->dims[d]);
    bool one_block = x->dims[d] >= 0 && x->dims[d] <= SUM_ONE_BLOCK;
    blk *into = b, bb = NEWBLK;
    int32_t fb = -1, lo = xi(L, 0), hi = ext;
    if (!one_block) {
        int32_t vkb = newvar(L, "kb", RJ_I64);
        int32_t nb = xbin(L, LOP_IDIV, RJ_I64, xadd(L, ext, xi(L, SUM_BLOCK - 1)), xi(L, SUM_BLOCK));
        fb = s_for(L, b, vkb, xi(L, 0), nb, LM_SERIAL);
        lo = xmul(L, xvar(L, vkb), xi(L, SUM_BLOCK));
        hi = xmin(L, xadd(L, lo, xi(L, SUM_BLOCK)), ext);
        into = &bb;
    }
    if (layer) s_set(L, into, np->part, xconst(L, t, 0));
    s_set(L, into, np->part2, xconst(L, t, 0));
    char name[16];
    snprintf(name, sizeof name, "d%d", d);
    int32_t vk = newvar(L, name, RJ_I64);
    blk ib = NEWBLK;
    int32_t fk = s_for(L, into, vk, lo, hi, LM_LANES);
    a->idx[d] = xvar(L, vk);
    L->lanes++;
    norm_inner(L, &ib, a, np);
    L->lanes--;
    close_body(L, fk, &ib);
    if (layer) kahan_add(L, into, t, (place){-1, np->acc}, (place){-1, np->c}, xvar(L, np->part));
    kahan_add(L, into, t, (place){-1, np->acc2}, (place){-1, np->c2}, xvar(L, np->part2));
    if (fb >= 0) close_body(L, fb, &bb);
}

/* The statistics of one row into np's sums, shifted by k and scaled by s (norm_unit). */
static void norm_stats(lower *L, blk *b, at *a, norm_pass *np) {
    const norm_ctx *nc = np->nc;
    const node *root = nc->root, *x = nc->x;
    rj_dtype t = root->dtype;
    bool layer = root->op == RJ_OP_LAYER_NORM;
    int last = x->rank - 1;
    /* one line of a size known to fit one block: the statistics are its sums, as they are */
    bool plain = nc->lead == last && x->dims[last] >= 0 && x->dims[last] <= SUM_ONE_BLOCK;
    if (layer) s_set(L, b, np->acc, xconst(L, t, 0));
    s_set(L, b, np->acc2, xconst(L, t, 0));
    np->pass = 0;
    if (plain) {
        np->part = np->acc, np->part2 = np->acc2;
        loops(L, b, a, x->dims, nc->lead, x->rank, norm_inner, np);
        return;
    }
    if (np->c < 0) { /* the first statistics pass of the row makes them, the second reuses them */
        np->part = newvar(L, "part", t);
        np->part2 = newvar(L, "part2", t);
        np->c = newvar(L, "c", t);
        np->c2 = newvar(L, "c2", t);
    }
    if (layer) s_set(L, b, np->c, xconst(L, t, 0));
    s_set(L, b, np->c2, xconst(L, t, 0));
    loops_v(L, b, a, x->dims, nc->lead, last, norm_stats_row, np, false);
    if (layer) s_set(L, b, np->acc, xbin(L, RJ_OP_SUB, t, xvar(L, np->acc), xvar(L, np->c)));
    s_set(L, b, np->acc2, xbin(L, RJ_OP_SUB, t, xvar(L, np->acc2), xvar(L, np->c2)));
}

/* One row: its statistics in one pass over the normalised block, then the write pass.
 *
 * layer_norm's variance comes from sums shifted by k, the row's first element,
 *   var = E[(x - k)^2] - E[x - k]^2,
 * which avoids the cancellation of E[x^2] - E[x]^2 whenever k is near the mean, and saves
 * the separate pass a textbook two-pass variance needs. Two kinds of row break that, and
 * are summed again (in a pass loop, as softmax's, so that the code exists once):
 * - k far from the mean. E[(x - k)^2] and E[x - k]^2 are then both about (mean - k)^2, and
 *   their difference keeps only var / E[(x - k)^2] of their precision: with the first
 *   element an outlier (a feature with massive activations, 1000 among values of spread 1
 *   in a row of 4096) 12 bits were lost, and results were off by 1e-2. Where
 *   (mean - k)^2 > 15/16 E[(x - k)^2] (more than 4 bits lost; k more than 3.9 standard
 *   deviations from the mean) the sums are taken again around k + m1, the mean.
 * - Large values. The sum of squares overflows where |x - k| (rms_norm: |x|) passes about
 *   1.8e19 / sqrt(n) in f32, and the row was NaN or 0 where its results are of the order of
 *   1. Where the sums are not finite, they are taken again on x s, s = 2^-80 (f64: 2^-600):
 *   exact scaling by a power of two, which keeps every square and sum in range; the write
 *   pass then computes ((x s - k) - m1) rstd with rstd that of the scaled row (rms_norm:
 *   x (s rstd)), the same values. Elements that become subnormal when scaled lose
 *   precision, but beside the row's big ones they do not change its statistics. A row with
 *   an infinity or a NaN ends with the sums it had (what the interpreter makes of it).
 * An ordinary row pays a compare and a branch, and its write pass a subtraction (the mean's
 * digits, above): W5 with its rows in the caches, one thread, alternating processes, ran at
 * 0.955 of its speed before (with the first pass inside the pass loop too, 0.89). The second
 * statistics loop makes the kernel's code 1.7 times as long, and its compile 3-4 ms longer
 * (W5 8-9 ms -> 12; scalar loops there compiled no faster): paid once per graph (the disk
 * cache keeps the code), where the row's speed is paid at every run. */
static void norm_unit(lower *L, blk *b, at *a, void *ud) {
    norm_ctx *nc = ud;
    const node *root = nc->root, *x = nc->x;
    rj_dtype t = root->dtype;
    int32_t n = xi(L, 1);
    for (int d = nc->lead; d < x->rank; d++) n = xmul(L, n, xsize(L, x->dims[d]));
    int32_t fn = xcast(L, t, n);
    bool layer = root->op == RJ_OP_LAYER_NORM;
    double eps = root->fval >= 0 ? root->fval : (t == RJ_F32 ? 1.1920928955078125e-07 : 2.220446049250313e-16);
    double big = t == RJ_F32 ? 3.4028234663852886e38 : 1.7976931348623157e308;
    double small = t == RJ_F32 ? 0x1p-80 : 0x1p-600;
    norm_pass np = {.nc = nc, .acc = newvar(L, "acc", t), .acc2 = newvar(L, "acc2", t), .c = -1,
                    .shift = newvar(L, "k", t), .scale = newvar(L, "s", t), .mean = newvar(L, "m1", t),
                    .rstd = newvar(L, "rstd", t)};
    int32_t vk0 = -1;
    if (layer) {
        at first = *a; /* guarded: the block may be empty */
        for (int d = nc->lead; d < x->rank; d++) first.idx[d] = xi(L, 0);
        first.guard = xcmp(L, RJ_OP_GT, n, xi(L, 0));
        L->memo_n = 0;
        vk0 = newvar(L, "k0", t);
        s_set(L, b, vk0, xcast(L, t, value(L, root->in[0], &first)));
        s_set(L, b, np.shift, xvar(L, vk0));
    }
    s_set(L, b, np.scale, xconst(L, t, 1));
    norm_stats(L, b, a, &np);
    if (layer) s_set(L, b, np.mean, xbin(L, RJ_OP_DIV, t, xvar(L, np.acc), fn));
    /* are the sums finite, and (layer_norm) k near the mean? One compare for both sums (an &&
     * of two was two branches, which serialised their horizontal additions: 4% on W5) */
    int32_t both = xvar(L, np.acc2);
    if (layer) both = xbin(L, RJ_OP_ADD, t, both, xun(L, RJ_OP_ABS, t, xvar(L, np.acc)));
    int32_t ok = xcmp(L, RJ_OP_LE, both, xconst(L, t, big)), done = ok;
    if (layer) {
        int32_t m1 = xvar(L, np.mean), ms = xbin(L, RJ_OP_DIV, t, xvar(L, np.acc2), fn);
        int32_t far = xcmp(L, RJ_OP_GT, xbin(L, RJ_OP_MUL, t, m1, m1), xbin(L, RJ_OP_MUL, t, xconst(L, t, 0.9375), ms));
        done = xbin(L, RJ_OP_LOGICAL_AND, RJ_BOOL, ok, xcmp(L, RJ_OP_EQ, far, xconst(L, RJ_BOOL, 0)));
    }
    /* else up to two more passes: scaled, then (layer_norm) around the mean */
    int32_t vretry = newvar(L, "retry", RJ_I64), vpass = newvar(L, "pass", RJ_I64);
    s_set(L, b, vretry, xsel(L, done, xi(L, 0), xi(L, 1)));
    blk rb, pb = NEWBLK, ib;
    int32_t fr = s_if(L, b, &rb, xcmp(L, RJ_OP_NE, xvar(L, vretry), xi(L, 0)));
    int32_t fp = s_for(L, &rb, vpass, xi(L, 0), xi(L, 2), LM_SERIAL);
    if (!L->err) L->k->st[fp].flags |= LF_NOUNROLL;
    int32_t fi = s_if(L, &pb, &ib, xcmp(L, RJ_OP_NE, xvar(L, vretry), xi(L, 0)));
    /* ok and far are of the sums before this pass */
    if (layer)
        s_set(L, &ib, np.shift, xsel(L, ok, xbin(L, RJ_OP_ADD, t, xvar(L, np.shift), xvar(L, np.mean)),
                                     xbin(L, RJ_OP_MUL, t, xvar(L, vk0), xconst(L, t, small))));
    s_set(L, &ib, np.scale, xsel(L, ok, xvar(L, np.scale), xconst(L, t, small)));
    np.scaled = true;
    norm_stats(L, &ib, a, &np);
    np.scaled = false;
    if (layer) s_set(L, &ib, np.mean, xbin(L, RJ_OP_DIV, t, xvar(L, np.acc), fn));
    s_set(L, &ib, vretry, xsel(L, done, xi(L, 0), xi(L, 1)));
    close_body(L, fi, &ib);
    close_body(L, fp, &pb);
    close_body(L, fr, &rb);
    /* rstd of the row as summed (scaled: eps scaled to match, which is 0 in f32) */
    int32_t var = xbin(L, RJ_OP_DIV, t, xvar(L, np.acc2), fn);
    if (layer) {
        int32_t m1 = xvar(L, np.mean);
        var = xbin(L, RJ_OP_MAXIMUM, t, xbin(L, RJ_OP_SUB, t, var, xbin(L, RJ_OP_MUL, t, m1, m1)), xconst(L, t, 0));
    }
    int32_t sc = xvar(L, np.scale);
    int32_t e = xbin(L, RJ_OP_MUL, t, xconst(L, t, eps), xbin(L, RJ_OP_MUL, t, sc, sc));
    s_set(L, b, np.rstd, xun(L, RJ_OP_RSQRT, t, xbin(L, RJ_OP_ADD, t, var, e)));
    if (!layer) s_set(L, b, np.rstd, xbin(L, RJ_OP_MUL, t, sc, xvar(L, np.rstd)));
    np.pass = 1;
    loops(L, b, a, x->dims, nc->lead, x->rank, norm_inner, &np);
}

static void lower_norm(lower *L, const fuse_group *gr) {
    const rj_graph *g = L->g;
    norm_ctx nc = {.root = &g->nodes[gr->root]};
    nc.x = &g->nodes[nc.root->in[0]];
    nc.lead = nc.x->rank - nc.root->axis;
    sbuf w;
    sbuf_init(&w, L->ctx);
    sbuf_printf(&w, "%s over the last %d dims of ", op_table[nc.root->op].name, nc.root->axis);
    print_node_type(&w, g, nc.x);
    set_what(L, &w);
    blk top = NEWBLK;
    /* a unit writes (and reads) the normalised dims and nothing else: none where they hold no
     * element (a [B, j1, 0] of 2^40 rows would otherwise run 2^40 units of nothing) */
    int first = leading_units(L, &top, nc.x->dims, nc.x->rank, nc.lead, nc.lead, norm_unit, &nc);
    unit_extent(L, nc.x->dims, first, nc.x->rank);
    L->k->body = top.first;
}

/* ---- buffers and the driver ------------------------------------------------------------------ */

static int32_t add_buf(lower *L, lbuf_kind kind, int32_t index, int32_t node_id, const node *layout) {
    lprog *p = L->prog;
    if (!mem_grow(L->ctx, (void **)&p->bufs, &p->capbufs, p->nbufs + 1, sizeof(lbuf))) {
        L->err = RJ_ERR_NOMEM;
        return -1;
    }
    lbuf *b = &p->bufs[p->nbufs];
    memset(b, 0, sizeof *b);
    b->kind = (uint8_t)kind;
    b->index = index;
    b->node = node_id;
    b->dtype = (uint8_t)layout->dtype;
    b->rank = layout->rank;
    memcpy(b->dims, layout->dims, sizeof(rj_dim) * (size_t)layout->rank);
    if (L->bufof[node_id] < 0) L->bufof[node_id] = p->nbufs;
    return p->nbufs++;
}

/* The launch shape before a kernel is lowered: on a SIMT target, blocks of eight warps (enough
 * threads per multiprocessor to hide memory latency, and the row groups of the item template);
 * the template may set the group (the item template takes whole blocks), else group_for
 * chooses it once the kernel exists. */
static launch_shape launch_for(const target_desc *d) {
    launch_shape s = {.simt = d->simt, .block = 1, .group = 1, .cover = LC_CHUNK};
    if (d->simt) s.block = 8 * d->warp < d->max_block ? 8 * d->warp : d->max_block;
    return s;
}

/* The threads a kernel's lanes loops are spread across on a SIMT target: a warp per unit (a
 * row: coalesced accesses, and warp-shuffle reductions over the row), narrowed to the lanes'
 * extent where it is a smaller constant; the whole block where reductions must go through
 * shared memory (no shuffles); one thread where there are no lanes. */
static void group_for(lower *L, lkernel *k) {
    if (!k->launch.simt || k->launch.group > 1) return;
    bool lanes = false, reduces = false, known = true;
    int64_t widest = 1;
    for (int32_t i = 0; i < k->nst && !L->err; i++) {
        const ls *st = &k->st[i];
        if (st->kind == LS_REDUCE) reduces = true;
        if (st->kind != LS_FOR || st->map != LM_LANES) continue;
        lanes = true;
        const lx *a = E(L, st->a), *b = E(L, st->b);
        if (a->kind == LX_CONST && b->kind == LX_CONST && a->type == RJ_I64 && b->type == RJ_I64) {
            if (b->i - a->i > widest) widest = b->i - a->i;
        } else {
            known = false;
        }
    }
    if (!lanes) return;
    if (reduces && !L->desc->shuffles) {
        k->launch.group = k->launch.block;
        return;
    }
    int32_t g = L->desc->warp < k->launch.block ? L->desc->warp : k->launch.block;
    while (known && g > 1 && g / 2 >= widest) g /= 2;
    k->launch.group = g;
}

/* ---- index checks ---------------------------------------------------------------------------
 * Per index op a kernel over its index tensor's domain: where an index is out of range, the
 * smallest packed logical position (C order over items' rows, then the inner dims) goes into
 * the op's word of the checks buffer by an atomic minimum, so the first bad index is found
 * whatever the threads' schedule. The program's first kernel sets every word to INT64_MAX. */

typedef struct check_ctx {
    const node *n;
    int32_t slot;
    int32_t cls;  /* the index tensor's ragged class, or -1 */
} check_ctx;

static void check_body(lower *L, blk *b, at *a, void *ud) {
    const check_ctx *c = ud;
    int32_t src = index_tensor(L->g, c->n);
    const node *ix = &L->g->nodes[src];
    int32_t iv = xcast(L, RJ_I64, value_fresh(L, src, a));
    int32_t bad = xun(L, RJ_OP_LOGICAL_NOT, RJ_BOOL, index_ok(L, iv, index_bound(L, c->n, a->idx[0])));
    int32_t pos = a->idx[0];
    int k = 1;
    if (c->cls >= 0) {
        pos = xadd(L, xloff(L, c->cls, a->idx[0]), a->idx[1]);
        k = 2;
    }
    for (; k < ix->rank; k++) pos = xadd(L, xmul(L, pos, xsize(L, ix->dims[k])), a->idx[k]);
    blk body;
    int32_t st = s_if(L, b, &body, bad);
    s_store(L, &body, buf_param(L, L->prog->checks_buf), xi(L, c->slot), pos, LF_ATOMIC_MIN);
    close_body(L, st, &body);
}

static void lower_check(lower *L, const fuse_group *gr, int32_t slot) {
    const node *n = &L->g->nodes[gr->root], *d = &L->g->nodes[index_tensor(L->g, &L->g->nodes[gr->root])];
    int rp = dim_ragged_pos(L->g, d);
    check_ctx c = {.n = n, .slot = slot, .cls = rp == 1 ? root_of(L->g, d->dims[1]) : -1};
    sbuf w;
    sbuf_init(&w, L->ctx);
    sbuf_puts(&w, "check the indices of ");
    print_node_call(&w, L->g, gr->root);
    set_what(L, &w);
    /* the record of the check, for the runtime's message */
    lcheck *lc = &L->prog->checks[slot];
    memset(lc, 0, sizeof *lc);
    lc->op = (uint16_t)n->op;
    lc->dtype = (uint8_t)d->dtype;
    lc->rank = d->rank;
    memcpy(lc->dims, d->dims, sizeof(rj_dim) * (size_t)d->rank);
    lc->bound = L->g->nodes[n->in[0]].dims[n->op == RJ_OP_EMBEDDING ? 0 : n->axis];
    lc->input = -1;
    int32_t src = index_tensor(L->g, n);
    for (int32_t i = 0; i < L->g->ninputs; i++)
        if (L->g->inputs[i] == src) lc->input = i;
    sbuf_init(&w, L->ctx);
    print_operand_what(&w, L->g, src);
    if (w.failed) L->err = RJ_ERR_NOMEM;
    else snprintf(lc->what, sizeof lc->what, "%s", w.s ? w.s : "");
    sbuf_free(&w);
    element_nest(L, d, d->dims, check_body, &c);
}

/* The checks buffer and the kernel that clears it, first in the program. */
static void lower_checks_init(lower *L) {
    const fuse_plan *plan = L->plan;
    int32_t n = 0;
    for (int32_t gi = 0; gi < plan->ngroups; gi++) n += plan->groups[gi].kind == FG_CHECK;
    L->prog->checks_buf = -1;
    if (!n) return;
    lprog *p = L->prog;
    if (!(p->checks = mem_zalloc(L->ctx, sizeof(lcheck) * (size_t)n)) ||
        !mem_grow(L->ctx, (void **)&p->bufs, &p->capbufs, p->nbufs + 1, sizeof(lbuf)) ||
        !(L->k = lprog_add_kernel(p, "kc"))) {
        L->err = RJ_ERR_NOMEM;
        return;
    }
    p->nchecks = n;
    p->checks_buf = p->nbufs;
    p->bufs[p->nbufs++] = (lbuf){.kind = LB_TEMP, .dtype = RJ_I64, .index = p->ntemps++, .node = -1, .rank = 1,
                                 .dims = {n}};
    L->group = -1;
    L->k->launch = launch_for(L->desc);
    xi(L, 0);
    snprintf(L->k->what, sizeof L->k->what, "clear the index checks");
    at a = {.rank = 1, .inclass = -1, .outclass = -1, .guard = -1};
    blk top = NEWBLK, inner;
    int32_t fs;
    dense_loop(L, &top, &a, p->bufs[p->checks_buf].dims, 1, &inner, &fs);
    s_store(L, &inner, buf_param(L, p->checks_buf), a.idx[0], xi(L, INT64_MAX), 0);
    close_body(L, fs, &inner);
    L->k->body = top.first;
    group_for(L, L->k);
}

/* A softmax (or log_softmax) over the last dim of a product the BLAS computes, reading it
 * directly or through the product's epilogue, is computed by the GEMM's epilogue kernel from
 * the chunk C, whose rows are whole rows of the product: the product and the values between
 * (unwritten) never go to memory. Only when nothing else reads them. */
static void merge_softmax(lower *L, int32_t gs, uint8_t *unwritten) {
    const rj_graph *g = L->g;
    const fuse_plan *p = L->plan;
    const fuse_group *sg = &p->groups[gs];
    if (sg->kind != FG_ROOT || op_table[g->nodes[sg->root].op].kind != KIND_SOFTMAX) return;
    const node *s = &g->nodes[sg->root];
    if (s->axis != s->rank - 1 || s->rank < 2) return;
    int32_t x = s->in[0];
    const fuse_node *fx = &p->nodes[x];
    if (fx->role != FR_ROOT && fx->role != FR_EPILOGUE) return;
    int32_t gm = fx->group;
    if (gm < 0 || gm >= gs || !gemm_lib_group(L, gm) || L->merged[gs] >= 0) return;
    for (int32_t k = 0; k < p->ngroups; k++)
        if (L->merged[k] == gm) return; /* one softmax a product */
    /* the product's values are read by their own group and by s only, and none is an output */
    for (int32_t i = 0; i < g->n; i++) {
        const fuse_node *fi = &p->nodes[i];
        if (fi->role == FR_DEAD) continue;
        for (int k = 0; k < g->nodes[i].nin; k++) {
            const fuse_node *fo = &p->nodes[g->nodes[i].in[k]];
            bool of_gemm = (fo->role == FR_ROOT || fo->role == FR_EPILOGUE) && fo->group == gm;
            if (of_gemm && i != sg->root && !((fi->role == FR_EPILOGUE || fi->role == FR_ROOT) && fi->group == gm))
                return;
        }
    }
    for (int32_t o = 0; o < g->noutputs; o++) {
        const fuse_node *fo = &p->nodes[g->outputs[o].node];
        if ((fo->role == FR_ROOT || fo->role == FR_EPILOGUE) && fo->group == gm) return;
    }
    L->merged[gs] = gm;
    for (int32_t i = 0; i < g->n; i++)
        if ((p->nodes[i].role == FR_ROOT || p->nodes[i].role == FR_EPILOGUE) && p->nodes[i].group == gm) unwritten[i] = 1;
}

rj_status pass_lower(const rj_graph *g, const rj_graph *orig, const fuse_plan *plan,
                     const target_desc *desc, lprog *out) {
    rj_ctx *ctx = g->ctx;
    memset(out, 0, sizeof *out);
    if (!desc) return ctx_fail(ctx, RJ_ERR_INTERNAL, "lower: no target descriptor");
    out->ctx = ctx;
    lower L = {.ctx = ctx, .g = g, .orig = orig, .plan = plan, .desc = desc, .prog = out,
               .subst_node = -1, .group2 = -1, .chunk_root = -1, .chunk_buf = -1};
    size_t nb = (size_t)(g->n ? g->n : 1);
    if (!(L.bufof = mem_alloc(ctx, nb * sizeof(int32_t)))) return RJ_ERR_NOMEM;
    for (int32_t i = 0; i < g->n; i++) L.bufof[i] = -1;
    /* inputs, outputs (laid out as the user's graph declares them), temps */
    for (int32_t i = 0; i < g->ninputs; i++)
        add_buf(&L, LB_INPUT, i, g->inputs[i], &g->nodes[g->inputs[i]]);
    for (int32_t i = 0; i < g->noutputs; i++) {
        const node *layout = &orig->nodes[orig->outputs[i].node];
        int32_t id = g->outputs[i].node;
        if (plan->nodes[id].role == FR_INPUT && L.bufof[id] >= 0) {
            /* an input returned as an output is copied by a map kernel */
            int32_t keep = L.bufof[id];
            add_buf(&L, LB_OUTPUT, i, id, layout);
            L.bufof[id] = keep;
            continue;
        }
        add_buf(&L, LB_OUTPUT, i, id, layout);
    }
    size_t ng = (size_t)(plan->ngroups ? plan->ngroups : 1);
    if (!(L.merged = mem_alloc(ctx, ng * sizeof(int32_t)))) {
        mem_free(ctx, L.bufof, nb * sizeof(int32_t));
        return RJ_ERR_NOMEM;
    }
    uint8_t *unwritten = mem_zalloc(ctx, nb); /* values a merged softmax computes from C */
    if (!unwritten) L.err = RJ_ERR_NOMEM;
    for (int32_t k = 0; k < plan->ngroups; k++) L.merged[k] = -1;
    for (int32_t k = 0; k < plan->ngroups && !L.err; k++) merge_softmax(&L, k, unwritten);
    for (int32_t i = 0; i < g->n; i++)
        if (plan->nodes[i].mat && L.bufof[i] < 0 && !(unwritten && unwritten[i]))
            add_buf(&L, LB_TEMP, out->ntemps++, i, &g->nodes[i]);
    mem_free(ctx, unwritten, nb);
    lower_checks_init(&L);
    for (int32_t gi = 0, slot = 0; gi < plan->ngroups && !L.err; gi++) {
        const fuse_group *gr = &plan->groups[gi];
        char name[16];
        snprintf(name, sizeof name, "k%d", gi);
        if (!open_kernel(&L, name)) break;
        L.group = gi;
        const node *r = &g->nodes[gr->root];
        if (L.merged[gi] >= 0) { /* computed by its GEMM's epilogue kernel: none of its own */
            lprog_free_last_kernel(out);
            continue;
        }
        if (gr->kind == FG_MAP) lower_map(&L, gr);
        else if (gr->kind == FG_CHECK) lower_check(&L, gr, slot++);
        else if (op_table[r->op].kind == KIND_NORM) lower_norm(&L, gr);
        else if (op_table[r->op].kind == KIND_MATMUL) {
            bool per_item = g->nodes[r->in[1]].rank == 3 || is_jagged_t(g, &g->nodes[r->in[0]]);
            if (!lower_matmul_lib(&L, gr)) {
                if (!per_item) lower_matmul(&L, gr);
                else if (!lower_item_matmul_simt(&L, gr)) lower_item_matmul(&L, gr);
            }
        }
        else lower_axis(&L, gr);
        if (L.err) break; /* L.k may be gone (a template's extra kernel failed to allocate) */
        if (L.k->has_nt) xparam(&L, PK_NT, 0, "nt");
        group_for(&L, L.k);
    }
    /* every SIMT kernel checks the word the device validation of offsets writes (launch.c) */
    for (int32_t ki = 0; desc->simt && !L.err && ki < out->nkernels; ki++)
        if (lk_param(&out->kernels[ki], PK_ERR, 0, RJ_I64, "err") < 0) L.err = RJ_ERR_NOMEM;
    mem_free(ctx, L.bufof, nb * sizeof(int32_t));
    mem_free(ctx, L.merged, ng * sizeof(int32_t));
    mem_free(ctx, L.memo, sizeof(memo_ent) * (size_t)L.memo_cap);
    if (L.err) {
        lprog_free(out);
        if (L.err == RJ_ERR_NOMEM) return ctx_fail(ctx, RJ_ERR_NOMEM, "out of memory while lowering");
        return L.err;
    }
    return RJ_OK;
}
