/*
 * lower/value.c — a node's value at an index, and the stores of a group.
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
 * Each root kernel finishes by computing its epilogue (fused elementwise consumers) from the
 * root's value and storing every materialised node of its group (store_group).
 */
#include <string.h>

#include "kit.h"

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

int32_t operand(lower *L, const node *n, int k, const at *a, rj_dtype t) {
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
int32_t index_bound(lower *L, const node *n, int32_t b) {
    const node *x = &L->g->nodes[n->in[0]];
    rj_dim d = x->dims[n->op == RJ_OP_EMBEDDING ? 0 : n->axis];
    const sym *s = graph_sym(L->g, d);
    if (s && s->kind == SYM_RAGGED) return xlen(L, root_of(L->g, d), b);
    return xsize(L, d);
}

int32_t index_ok(lower *L, int32_t iv, int32_t bound) {
    return xbin(L, RJ_OP_LOGICAL_AND, RJ_BOOL, xcmp(L, RJ_OP_GE, iv, xi(L, 0)), xcmp(L, RJ_OP_LT, iv, bound));
}

static int32_t index_value(lower *L, int32_t id, const at *a) {
    const rj_graph *g = L->g;
    const node *n = &g->nodes[id];
    if (n->op == RJ_OP_POSITIONS) return a->idx[1];
    if (n->op == RJ_OP_ARANGE) return xcast(L, n->dtype, a->idx[0]);
    if (n->op == RJ_OP_FULL)
        return dtype_is_float(n->dtype) ? xconst(L, n->dtype, n->fval) : xconst_int(L, n->dtype, n->ival);
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
 * the flat index of the re-laid-out dims. transpose swaps two indices, narrow adds its start
 * to one. */
static int32_t view_value(lower *L, int32_t id, const at *a) {
    const rj_graph *g = L->g;
    const node *n = &g->nodes[id], *x = &g->nodes[n->in[0]];
    if (n->op == RJ_OP_CAT) { /* d < n1 ? x[d] : y[d - n1], each side's loads under its half */
        int32_t n1 = xi(L, x->dims[n->axis]), first = xcmp(L, RJ_OP_LT, a->idx[n->axis], n1);
        at xa = *a, ya = *a;
        ya.idx[n->axis] = xbin(L, RJ_OP_SUB, RJ_I64, a->idx[n->axis], n1);
        xa.guard = a->guard >= 0 ? xbin(L, RJ_OP_LOGICAL_AND, RJ_BOOL, a->guard, first) : first;
        int32_t second = xun(L, RJ_OP_LOGICAL_NOT, RJ_BOOL, first);
        ya.guard = a->guard >= 0 ? xbin(L, RJ_OP_LOGICAL_AND, RJ_BOOL, a->guard, second) : second;
        return xsel(L, first, xcast(L, n->dtype, value(L, n->in[0], &xa)), xcast(L, n->dtype, value(L, n->in[1], &ya)));
    }
    if (n->op == RJ_OP_TRANSPOSE) { /* x at the position with dims axis < ival swapped */
        at xa = *a;
        xa.idx[n->axis] = a->idx[n->ival];
        xa.idx[n->ival] = a->idx[n->axis];
        if (n->axis <= 1) xa.inclass = xa.outclass = -1; /* they describe idx[1] */
        return value(L, n->in[0], &xa);
    }
    if (n->op == RJ_OP_NARROW) { /* x at the position shifted by start in dim axis */
        at xa = *a;
        if (n->ival) xa.idx[n->axis] = xadd(L, a->idx[n->axis], xi(L, n->ival));
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

int32_t value(lower *L, int32_t id, const at *a) {
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
    /* a 16-bit node's value is rounded once, where it is made (PyTorch rounds every op's) */
    if (dtype_is_half(L->g->nodes[id].dtype)) e = xcast(L, L->g->nodes[id].dtype, e);
    if (L->err) return 0;
    if (!mem_grow(L->ctx, (void **)&L->memo, &L->memo_cap, L->memo_n + 1, sizeof(memo_ent))) {
        L->err = RJ_ERR_NOMEM;
        return 0;
    }
    L->memo[L->memo_n++] = (memo_ent){.node = id, .key = key, .expr = e};
    return e;
}

/* Evaluates n at a with the root's value bound (for epilogues) and a fresh memo. */
int32_t value_fresh(lower *L, int32_t n, const at *a) {
    L->memo_n = 0;
    return value(L, n, a);
}

/* Does expression e (transitively) read variable v? */
bool expr_uses_var(lower *L, int32_t e, int32_t v) {
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

bool expr_cheap(lower *L, int32_t e) {
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
 * kept only for outputs: temporaries are read again by later kernels, from cache. Unless
 * LF_NT_TEMP says otherwise (a GEMM's epilogue: gemm_lib.c says why); the runtime streams only
 * where the kernel writes more than its threshold anyway. */
void store_node(lower *L, blk *b, int32_t n, int32_t v, const at *a, uint8_t flags) {
    for (int32_t bi = 0; bi < L->prog->nbufs; bi++) {
        const lbuf *lb = &L->prog->bufs[bi];
        if (lb->node != n || lb->kind == LB_INPUT) continue;
        bool nt = lb->kind == LB_OUTPUT || (flags & LF_NT_TEMP);
        uint8_t f = (uint8_t)(flags & ~LF_NT_TEMP & (nt ? 0xFF : ~LF_NT));
        s_store(L, b, buf_param(L, bi), xaddr(L, bi, a), xcast(L, (rj_dtype)lb->dtype, v), f);
        if (f & LF_NT) L->k->has_nt = true;
    }
}

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
void store_group(lower *L, blk *b, int32_t root, int32_t r, const at *a, rows_known rows,
                 uint8_t flags) {
    const fuse_group *gr = &L->plan->groups[L->group];
    int32_t rv = newvar(L, "r", L->g->nodes[root].dtype);
    s_set(L, b, rv, xcast(L, L->g->nodes[root].dtype, r)); /* 16-bit: rounded once, here */
    if (!L->err && dtype_is_half(L->g->nodes[root].dtype)) L->k->vars[rv].holds = (uint8_t)L->g->nodes[root].dtype;
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
