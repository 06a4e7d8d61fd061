/*
 * lower/kit.c — the builders of loop IR.
 *
 * Expressions are hash-consed (lk_expr) and i64 index arithmetic is folded as it is built
 * (constants, x + 0, x * 1, idiv(u, m) * m + irem(u, m) = u), so the dumps stay readable and
 * equal indices are one expression; the identities of reductions are constants among them.
 * Statements are appended to blocks (blk) and linked as they are closed. Sizes, offsets and
 * addresses turn a buffer's dims into parameters and loads (a library GEMM's chunk buffers
 * included); a buffer's parameter is added to a kernel the first time the kernel uses it.
 * This is the bottom of lowering: it calls the loop IR, the graph and util, nothing above.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kit.h"

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

int32_t xi(lower *L, int64_t v) {
    return X(L, (lx){.kind = LX_CONST, .type = RJ_I64, .i = v, .a = -1, .b = -1, .c = -1, .ref = -1});
}

/* Opens kernel `name` of the program as the one being lowered (a group's first kernel, or a
 * further one of a template of several): the target's launch shape, and expression 0, so
 * that failed helpers can return it. False, with L->err set, when out of memory. */
bool open_kernel(lower *L, const char *name) {
    if (!(L->k = lprog_add_kernel(L->prog, name))) {
        L->err = RJ_ERR_NOMEM;
        return false;
    }
    L->k->launch = launch_for(L->desc);
    xi(L, 0);
    return true;
}

/* A constant of a 16-bit dtype (a pad or fill value) is that format's value, as an f32. */
int32_t xconst(lower *L, rj_dtype t, double f) {
    if (dtype_is_half(t) && isfinite(f)) f = half_round(f, t == RJ_BF16);
    t = dtype_compute(t);
    lx e = {.kind = LX_CONST, .type = (uint8_t)t, .a = -1, .b = -1, .c = -1, .ref = -1};
    if (dtype_is_float(t)) e.f = t == RJ_F32 ? (double)(float)f : f;
    else if (t == RJ_BOOL) e.i = f != 0 || isnan(f);
    else e.i = cast_float_to_int(f, t); /* as the interpreter converts: saturating */
    return X(L, e);
}

/* An integer constant of type t, never through a double: i64 literals above 2^53 stay exact,
 * and an integer becomes an f32 with one rounding (as sitofp), not two. i32 wraps, as the
 * generated code's conversion does. */
int32_t xconst_int(lower *L, rj_dtype t, int64_t v) {
    if (dtype_is_half(t)) return xconst(L, t, (double)(float)v);
    lx e = {.kind = LX_CONST, .type = (uint8_t)t, .a = -1, .b = -1, .c = -1, .ref = -1};
    if (t == RJ_F32) e.f = (double)(float)v;
    else if (t == RJ_F64) e.f = (double)v;
    else if (t == RJ_BOOL) e.i = v != 0;
    else e.i = t == RJ_I32 ? (int64_t)(int32_t)(uint32_t)(uint64_t)v : v;
    return X(L, e);
}

/* The identity of reduction op in t (ops.c: op_identity), as a constant. */
int32_t identity(lower *L, rj_op op, rj_dtype t) {
    op_identity_value v = op_identity(op, t, false);
    return dtype_is_float(t) ? xconst(L, t, v.f) : xconst_int(L, t, v.i);
}

/* The smallest / largest value of t (identities of max / min). */
int32_t xextreme(lower *L, rj_dtype t, bool lowest) {
    return identity(L, lowest ? RJ_OP_MAX : RJ_OP_MIN, t);
}

int32_t xparam(lower *L, param_kind kind, int32_t ref, const char *name) {
    if (L->err) return 0;
    int32_t p = lk_param(L->k, kind, ref, RJ_I64, name);
    if (p < 0) {
        L->err = RJ_ERR_NOMEM;
        return 0;
    }
    return X(L, (lx){.kind = LX_PARAM, .type = RJ_I64, .ref = p, .a = -1, .b = -1, .c = -1});
}

int32_t xvar(lower *L, int32_t v) {
    if (L->err) return 0;
    return X(L, (lx){.kind = LX_VAR, .type = L->k->vars[v].type, .ref = v, .a = -1, .b = -1, .c = -1});
}

int32_t newvar(lower *L, const char *name, rj_dtype t) {
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

int32_t xbin(lower *L, int fn, rj_dtype t, int32_t a, int32_t b) {
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
    return X(L, (lx){.kind = LX_BINARY, .type = (uint8_t)dtype_compute(t), .fn = (uint16_t)fn, .a = a, .b = b,
                     .c = -1, .ref = -1});
}

int32_t xfma(lower *L, rj_dtype t, int32_t a, int32_t b, int32_t c) {
    return X(L, (lx){.kind = LX_BINARY, .type = (uint8_t)dtype_compute(t), .fn = LOP_FMA, .a = a, .b = b, .c = c,
                     .ref = -1});
}

int32_t xun(lower *L, int fn, rj_dtype t, int32_t a) {
    return X(L, (lx){.kind = LX_UNARY, .type = (uint8_t)dtype_compute(t), .fn = (uint16_t)fn, .a = a, .b = -1,
                     .c = -1, .ref = -1});
}

int32_t xcmp(lower *L, int fn, int32_t a, int32_t b) {
    return X(L, (lx){.kind = LX_CMP, .type = RJ_BOOL, .fn = (uint16_t)fn, .a = a, .b = b, .c = -1,
                     .ref = -1});
}

int32_t xsel(lower *L, int32_t c, int32_t a, int32_t b) {
    return X(L, (lx){.kind = LX_SELECT, .type = E(L, a)->type, .a = c, .b = a, .c = b, .ref = -1});
}

/* Is x the literal +-2^k, k >= 0? A bf16 value times it is a bf16 value: the f32 product is
 * exact (8 significant bits at most, and bf16 has f32's exponent range, subnormals included)
 * or overflows to inf, which bf16 holds too, and a NaN stays the same NaN with the quiet bit
 * set, which the rounding would set. Not for f16, whose range ends at 65504: 2 * 40000 is an
 * f32 that rounds to inf. */
static bool scales_exactly(const lx *x) {
    if (x->kind != LX_CONST || x->type != RJ_F32 || !isfinite(x->f) || x->f == 0) return false;
    int e;
    return fabs(frexp(x->f, &e)) == 0.5 && e >= 1;
}

/* Is e's value one of 16-bit format t's (so rounding it again changes nothing)? */
static bool holds_half(lower *L, rj_dtype t, int32_t e) {
    const lx *x = E(L, e);
    switch (x->kind) {
    case LX_CONST: return x->type == RJ_F32 && (!isfinite(x->f) || half_round(x->f, t == RJ_BF16) == x->f);
    case LX_LOAD: return x->fn == MEM_PARAM && L->k->params[x->ref].dtype == t &&
                         (x->b < 0 || holds_half(L, t, x->c));
    case LX_UNARY: /* a rounding; or an exact op (a sign, a choice) of a value the format holds */
        return x->fn == (t == RJ_BF16 ? LOP_ROUND_BF16 : LOP_ROUND_F16) ||
               ((x->fn == RJ_OP_RELU || x->fn == RJ_OP_NEG || x->fn == RJ_OP_ABS) && holds_half(L, t, x->a));
    case LX_BINARY:
        if (x->fn == RJ_OP_MUL && t == RJ_BF16 && x->type == RJ_F32)
            return (scales_exactly(E(L, x->b)) && holds_half(L, t, x->a)) ||
                   (scales_exactly(E(L, x->a)) && holds_half(L, t, x->b));
        return (x->fn == RJ_OP_MAXIMUM || x->fn == RJ_OP_MINIMUM) && holds_half(L, t, x->a) && holds_half(L, t, x->b);
    case LX_SELECT: return holds_half(L, t, x->b) && holds_half(L, t, x->c);
    case LX_VAR: return L->k->vars[x->ref].holds == t;
    default: return false;
    }
}

/* To a 16-bit t: the value rounded to t's format, an f32 (loopir.h); a literal is converted to
 * f32 only, as PyTorch keeps a Python scalar at the f32 of its arithmetic. */
int32_t xcast(lower *L, rj_dtype t, int32_t a) {
    if (L->err || E(L, a)->type == t) return a;
    const lx *c = E(L, a);
    if (dtype_is_half(t)) {
        if (c->kind == LX_CONST) return xcast(L, RJ_F32, a);
        if (holds_half(L, t, a)) return a;
        return xun(L, t == RJ_BF16 ? LOP_ROUND_BF16 : LOP_ROUND_F16, RJ_F32, xcast(L, RJ_F32, a));
    }
    if (c->kind == LX_CONST && dtype_is_float(t)) /* literals: fold the conversion */
        return dtype_is_float((rj_dtype)c->type) ? xconst(L, t, c->f) : xconst_int(L, t, c->i);
    return X(L, (lx){.kind = LX_CAST, .type = (uint8_t)t, .a = a, .b = -1, .c = -1, .ref = -1});
}

int32_t xmin(lower *L, int32_t a, int32_t b) { return xbin(L, RJ_OP_MINIMUM, RJ_I64, a, b); }
int32_t xmax(lower *L, int32_t a, int32_t b) { return xbin(L, RJ_OP_MAXIMUM, RJ_I64, a, b); }
int32_t xadd(lower *L, int32_t a, int32_t b) { return xbin(L, RJ_OP_ADD, RJ_I64, a, b); }
int32_t xsub(lower *L, int32_t a, int32_t b) { return xbin(L, RJ_OP_SUB, RJ_I64, a, b); }
int32_t xmul(lower *L, int32_t a, int32_t b) { return xbin(L, RJ_OP_MUL, RJ_I64, a, b); }

int32_t xload(lower *L, int32_t param, int32_t idx, rj_dtype t, int32_t guard) {
    int32_t dflt = guard >= 0 ? xconst(L, t, 0) : -1;
    return X(L, (lx){.kind = LX_LOAD, .type = (uint8_t)dtype_compute(t), .fn = MEM_PARAM, .ref = param, .a = idx,
                     .b = guard, .c = dflt});
}

/* Element idx of local array loc. */
int32_t xlocal(lower *L, int32_t loc, int32_t idx) {
    if (L->err) return 0;
    return X(L, (lx){.kind = LX_LOAD, .type = L->k->locals[loc].dtype, .fn = MEM_LOCAL, .ref = loc,
                     .a = idx, .b = -1, .c = -1});
}

/* ---- statements ---------------------------------------------------------------------------- */

int32_t put(lower *L, blk *b, ls s) {
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

void s_set(lower *L, blk *b, int32_t var, int32_t val) {
    put(L, b, (ls){.kind = LS_SET, .var = var, .a = val, .b = -1, .ref = -1, .body = -1, .els = -1});
}

void s_store(lower *L, blk *b, int32_t param, int32_t idx, int32_t val, uint8_t flags) {
    rj_dtype t = L->err ? RJ_F32 : (rj_dtype)L->k->params[param].dtype;
    if (dtype_is_half(t) && holds_half(L, t, val)) flags |= LF_HELD;
    put(L, b, (ls){.kind = LS_STORE, .flags = flags, .mem = MEM_PARAM, .var = -1, .a = idx, .b = val,
                   .ref = param, .body = -1, .els = -1});
    if (!L->err) L->k->params[param].written = 1;
}

void s_store_local(lower *L, blk *b, int32_t loc, int32_t idx, int32_t val) {
    put(L, b, (ls){.kind = LS_STORE, .mem = MEM_LOCAL, .var = -1, .a = idx, .b = val, .ref = loc,
                   .body = -1, .els = -1});
}

int32_t s_for(lower *L, blk *b, int32_t var, int32_t lo, int32_t hi, loop_map map) {
    return put(L, b, (ls){.kind = LS_FOR, .map = (uint8_t)map, .var = var, .a = lo, .b = hi,
                          .ref = -1, .body = -1, .els = -1});
}

/* Opens "if c { ... }" in into. */
int32_t s_if(lower *L, blk *into, blk *body, int32_t c) {
    *body = NEWBLK;
    return put(L, into, (ls){.kind = LS_IF, .var = -1, .a = c, .b = -1, .ref = -1, .body = -1, .els = -1});
}

/* var = var fn val, as a `reduce` when a lanes loop encloses it (a reduction over the lanes),
 * else as a plain assignment (a serial fold). fn: RJ_OP_ADD, _MUL, _MAXIMUM or _MINIMUM. */
void s_accum(lower *L, blk *b, int32_t var, int fn, int32_t val) {
    if (L->err) return; /* var may be newvar's 0 of a kernel with no variables */
    if (L->lanes > 0) {
        put(L, b, (ls){.kind = LS_REDUCE, .fn = (uint16_t)fn, .var = var, .a = val, .b = -1,
                       .ref = -1, .body = -1, .els = -1});
        return;
    }
    s_set(L, b, var, xbin(L, fn, L->k->vars[var].type, xvar(L, var), val));
}

/* var = x * y + var with one rounding where the target has a fused multiply-add. */
void s_accum_fma(lower *L, blk *b, int32_t var, int32_t x, int32_t y) {
    if (L->err) return;
    if (L->lanes > 0) {
        put(L, b, (ls){.kind = LS_REDUCE, .flags = LF_FMA, .fn = RJ_OP_ADD, .var = var, .a = x,
                       .b = y, .ref = -1, .body = -1, .els = -1});
        return;
    }
    s_set(L, b, var, xfma(L, L->k->vars[var].type, x, y, xvar(L, var)));
}

void close_body(lower *L, int32_t stmt, const blk *inner) {
    if (!L->err && stmt >= 0) L->k->st[stmt].body = inner->first;
}

ls s_barrier(void) {
    return (ls){.kind = LS_BARRIER, .var = -1, .a = -1, .b = -1, .ref = -1, .body = -1, .els = -1};
}

/* ---- sizes, offsets, addresses ------------------------------------------------------------- */

int32_t root_of(const rj_graph *g, rj_dim d) { return sym_root(g, dim_sym(d)); }

int32_t xsize(lower *L, rj_dim d) {
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

int32_t xloff(lower *L, int32_t cls, int32_t b) {
    return xload(L, loff_param(L, cls), b, RJ_I64, -1);
}

int32_t xlen(lower *L, int32_t cls, int32_t b) {
    return xsub(L, xloff(L, cls, xadd(L, b, xi(L, 1))), xloff(L, cls, b));
}

/* The first row of item b's len1_b x len2_b block, for tensors with two ragged dims: rows of
 * class c1, columns of c2 (c1 itself in self attention, another class in cross attention). */
int32_t xsq(lower *L, int32_t c1, int32_t c2, int32_t b) {
    if (c1 == c2) return class_load(L, PK_SQOFF, c1, "sq", b);
    if (L->err) return 0;
    char name[64];
    snprintf(name, sizeof name, "%s.%s.sq", L->g->syms[c1].name, L->g->syms[c2].name);
    int32_t p = lk_param(L->k, PK_SQOFF, pair_key(L->g->nsym, c1, c2), RJ_I64, name);
    if (p < 0) L->err = RJ_ERR_NOMEM;
    return p < 0 ? 0 : xload(L, p, b, RJ_I64, -1);
}

/* The extent of dim k of dims at index a: the item's length for the second ragged dim of a
 * pair ([B, j1, j1]); the size otherwise. */
int32_t xextent(lower *L, const rj_dim *dims, int k, const at *a) {
    const sym *s = k == 1 || k == 2 ? graph_sym(L->g, dims[k]) : NULL;
    if (s && s->kind == SYM_RAGGED) return xlen(L, root_of(L->g, dims[k]), a->idx[0]);
    return xsize(L, dims[k]);
}

/* Physical row of buffer bi at item b, row i. */
static int32_t xrow(lower *L, int32_t bi, int32_t b, int32_t i) {
    const lbuf *lb = &L->prog->bufs[bi];
    int32_t s = dim_sym(lb->dims[1]);
    if (lb->kind == LB_TEMP) return xadd(L, xloff(L, sym_root(L->g, s), b), i);
    return xadd(L, class_load(L, PK_OFF, s, "off", b), i);
}

int32_t xaddr(lower *L, int32_t bi, const at *a) {
    const lbuf *lb = &L->prog->bufs[bi];
    int32_t off = xi(L, 0), k = 0;
    const sym *s = lb->rank > 1 ? graph_sym(L->g, lb->dims[1]) : NULL;
    const sym *s2 = lb->rank > 2 ? graph_sym(L->g, lb->dims[2]) : NULL;
    if (s && s->kind == SYM_RAGGED && s2 && s2->kind == SYM_RAGGED) { /* blocks of len1 x len2 rows */
        int32_t c = root_of(L->g, lb->dims[1]), c2 = root_of(L->g, lb->dims[2]);
        off = xadd(L, xsq(L, c, c2, a->idx[0]), xadd(L, xmul(L, a->idx[1], xlen(L, c2, a->idx[0])), a->idx[2]));
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

int32_t buf_param(lower *L, int32_t bi) {
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

/* A library GEMM's chunk buffer (LB_CHUNK; which: 0 A, 1 C) of `cols` columns a row, per
 * worker (the runtime sizes it). */
int32_t chunk_buf_add(lower *L, int which, rj_dtype t, rj_dim cols) {
    lprog *p = L->prog;
    if (!mem_grow(L->ctx, (void **)&p->bufs, &p->capbufs, p->nbufs + 1, sizeof(lbuf))) {
        L->err = RJ_ERR_NOMEM;
        return -1;
    }
    p->bufs[p->nbufs] = (lbuf){.kind = LB_CHUNK, .dtype = (uint8_t)t, .index = which, .node = -1, .rank = 1,
                               .dims = {cols}};
    return p->nbufs++;
}

/* Will node id be in memory when group gi runs: an input, or a value another group writes?
 * Judged from the fusion plan (a library GEMM's templates ask before the buffers exist). */
bool will_have_buffer(const lower *L, int32_t id, int32_t gi) {
    const fuse_node *f = &L->plan->nodes[id];
    return f->role == FR_INPUT || ((f->role == FR_ROOT || f->role == FR_EPILOGUE) && f->group != gi && f->mat);
}

/* The symbol whose offsets address the rows of a jagged buffer, or -1 (a temporary: logical). */
int32_t buf_rows_sym(lower *L, int32_t bi) {
    const lbuf *lb = &L->prog->bufs[bi];
    return lb->kind == LB_TEMP ? -1 : dim_sym(lb->dims[1]);
}

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

/* Element a of product r in a library GEMM's chunk buffer (LB_CHUNK, gemm_lib.c) of `cols`
 * columns a row: where the epilogue reads C, the prologue writes x's rows into A, and a
 * softmax computed in the epilogue (axis.c, value.c) reads the product and keeps its terms. */
int32_t chunk_at(lower *L, const node *r, rj_dim cols, const at *a) {
    int col = r->keepdim && r->rank == 4 ? 2 : r->rank - 1; /* per head [B, i, j, H]: C holds one head's [i, j] */
    return xadd(L, xmul(L, chunk_row(L, r, a), chunk_width(L, cols, a)), a->idx[col]);
}

/* The product at a, from the GEMM's chunk C (a softmax computed in the GEMM's epilogue). */
int32_t chunk_index(lower *L, const at *a) {
    return chunk_at(L, &L->g->nodes[L->chunk_root], L->chunk_cols, a);
}

int32_t chunk_value(lower *L, const at *a) {
    /* C is f32 for a 16-bit product: its value is that rounded once */
    int32_t v = xload(L, buf_param(L, L->chunk_buf), chunk_index(L, a), L->prog->bufs[L->chunk_buf].dtype, -1);
    return xcast(L, L->g->nodes[L->chunk_root].dtype, v);
}

int32_t class_param(lower *L, param_kind kind, int32_t cls, const char *what) {
    char name[64];
    snprintf(name, sizeof name, "%s.%s", L->g->syms[cls].name, what);
    return xparam(L, kind, cls, name);
}

/* Element e of the i64 array parameter of class cls. */
int32_t class_load(lower *L, param_kind kind, int32_t cls, const char *what, int32_t e) {
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

int32_t add_buf(lower *L, lbuf_kind kind, int32_t index, int32_t node_id, const node *layout) {
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
launch_shape launch_for(const target_desc *d) {
    launch_shape s = {.simt = d->simt, .block = 1, .group = 1, .cover = LC_CHUNK};
    if (d->simt) s.block = 8 * d->warp < d->max_block ? 8 * d->warp : d->max_block;
    return s;
}

/* The threads a kernel's lanes loops are spread across on a SIMT target: a warp per unit (a
 * row: coalesced accesses, and warp-shuffle reductions over the row), narrowed to the lanes'
 * extent where it is a smaller constant; the whole block where reductions must go through
 * shared memory (no shuffles); one thread where there are no lanes. */
void group_for(lower *L, lkernel *k) {
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

/* Sets the kernel's one-line description from a printed buffer. */
void set_what(lower *L, sbuf *w) {
    if (w->failed) L->err = RJ_ERR_NOMEM;
    else snprintf(L->k->what, sizeof L->k->what, "%s", w->s ? w->s : "");
    sbuf_free(w);
}

bool is_jagged_t(const rj_graph *g, const node *n) {
    return n->op == RJ_OP_TRANSPOSE && dim_ragged_pos(g, n) == 2;
}

at at3(int32_t b, int32_t i, int32_t j, int32_t cls) {
    return (at){.rank = 3, .idx = {b, i, j}, .inclass = cls, .outclass = -1, .guard = -1};
}
