/*
 * plan.c — the plan of a run, made once when a program is compiled.
 *
 * A run checks the same things in the same order every time: which symbols need offsets,
 * which inputs must be bound and what shape each has, which dense sizes can be solved from
 * element counts, which pad lengths must hold the longest item, where each output goes and how
 * big it is, how large each temporary of the loop IR is. Everything in those questions that the
 * graph decides (a symbol's kind, parent and `same` class, a tensor's ragged dim, whether it is
 * a [B, j1, j2] pair and of which classes, whether an output depends on an input) is asked here, once per artifact,
 * and written down as flat arrays of plain data (runtime.h, run_plan). The run (resolve.c,
 * launch.c, checks.c, the backends) walks those arrays and never calls back into the IR; this
 * file is the runtime's one reader of the graph on behalf of runs.
 */
#include <string.h>

#include "runtime.h"

/* A tensor's shape: dims, element size, and where its rows come from. */
static plan_shape shape_of(const rj_graph *g, rj_dtype dtype, int rank, const rj_dim *dims, bool pair, int rpos) {
    plan_shape sh = {.kind = SHAPE_DENSE, .dtype = (uint8_t)dtype, .rank = (int8_t)rank, .rpos = (int8_t)rpos,
                     .rsym = -1, .cls = -1, .pkey = -1, .es = (int64_t)rj_dtype_size(dtype)};
    for (int k = 0; k < rank; k++) sh.dims[k] = dims[k];
    if (rpos >= 0) {
        sh.kind = pair ? SHAPE_PAIR : SHAPE_JAGGED;
        sh.rsym = dim_sym(dims[rpos]);
        sh.cls = sym_root(g, sh.rsym);
        if (pair) sh.pkey = pair_key(g->nsym, sh.cls, sym_root(g, dim_sym(dims[rpos + 1])));
    }
    return sh;
}

/* As stored: a tensor per head ([B, H, j, D]) in its canonical order (ir.h, node_phys_dims). */
static plan_shape node_shape(const rj_graph *g, const node *n) {
    node t = *n;
    node_phys_dims(g, n, t.dims);
    return shape_of(g, n->dtype, n->rank, t.dims, node_is_pair(g, &t), dim_ragged_pos(g, &t));
}

/* A loop-IR buffer's layout: a ragged dim 1 addresses the rows of its class, a ragged dim 2
 * as well makes blocks of len x len rows (launch.c, launch_buf_elems). */
static plan_shape buf_shape(const rj_graph *g, const lbuf *lb) {
    const sym *s1 = lb->rank > 1 ? graph_sym(g, lb->dims[1]) : NULL;
    const sym *s2 = lb->rank > 2 ? graph_sym(g, lb->dims[2]) : NULL;
    bool jagged = s1 && s1->kind == SYM_RAGGED;
    return shape_of(g, (rj_dtype)lb->dtype, lb->rank, lb->dims, jagged && s2 && s2->kind == SYM_RAGGED,
                    jagged ? 1 : -1);
}

static int32_t root_of_dim(const rj_graph *g, rj_dim d) { return sym_root(g, dim_sym(d)); }

static void mark_dims(const node *n, uint8_t *used) {
    for (int k = 0; k < n->rank; k++)
        if (dim_is_sym(n->dims[k])) used[dim_sym(n->dims[k])] = 1;
}

/* Symbols: kinds, classes, the ones some output's computation uses, the classes of pairs. */
static rj_status plan_syms(rj_ctx *ctx, const rj_graph *g, run_plan *pl) {
    size_t ns = (size_t)(g->nsym ? g->nsym : 1), nn = (size_t)(g->n ? g->n : 1);
    if (!(pl->sym = mem_zalloc(ctx, ns * sizeof(plan_sym))) || !(pl->used = mem_zalloc(ctx, ns)) ||
        !(pl->roots = mem_zalloc(ctx, ns * sizeof(int32_t))))
        return RJ_ERR_NOMEM;
    for (int32_t s = 0; s < g->nsym; s++) {
        const sym *sy = &g->syms[s];
        pl->sym[s] = (plan_sym){.name = sy->name, .kind = sy->kind, .parent = sy->parent,
                                .root = sy->kind == SYM_RAGGED ? sym_root(g, s) : s};
        if (sy->kind == SYM_RAGGED && pl->sym[s].root == s) pl->roots[pl->nroots++] = s;
    }
    for (int32_t i = 0; i < g->n; i++) pl->cappairs += node_stores_pair(g, &g->nodes[i]);
    if (!(pl->pair = mem_zalloc(ctx, (size_t)(pl->cappairs ? pl->cappairs : 1) * sizeof(plan_pair)))) return RJ_ERR_NOMEM;
    for (int32_t i = 0; i < g->n; i++) {
        if (!node_stores_pair(g, &g->nodes[i])) continue;
        rj_dim d[RJ_MAX_RANK];
        node_phys_dims(g, &g->nodes[i], d);
        int32_t r1 = root_of_dim(g, d[1]), r2 = root_of_dim(g, d[2]), key = pair_key(g->nsym, r1, r2), k = 0;
        while (k < pl->npairs && pl->pair[k].key != key) k++;
        if (k == pl->npairs) pl->pair[pl->npairs++] = (plan_pair){.key = key, .r1 = r1, .r2 = r2};
    }
    /* only the symbols of nodes some output depends on need bindings; an input no output
     * depends on is idle (the text format warns) and its symbols count once it is bound */
    uint8_t *live = mem_alloc(ctx, nn);
    if (!live) return RJ_ERR_NOMEM;
    graph_live(g, live);
    for (int32_t i = 0; i < g->n; i++)
        if (live[i]) mark_dims(&g->nodes[i], pl->used);
    for (int32_t i = 0; i < g->ninputs; i++) pl->in[i].idle = !live[g->inputs[i]];
    mem_free(ctx, live, nn);
    return RJ_OK;
}

static rj_status plan_pads(rj_ctx *ctx, const rj_graph *g, run_plan *pl) {
    int32_t n = 0;
    for (int32_t i = 0; i < g->n; i++) n += op_table[g->nodes[i].op].kind == KIND_PAD;
    if (!(pl->pad = mem_zalloc(ctx, (size_t)(n ? n : 1) * sizeof(plan_pad)))) return RJ_ERR_NOMEM;
    for (int32_t i = 0; i < g->n; i++) {
        const node *nd = &g->nodes[i];
        if (op_table[nd->op].kind != KIND_PAD) continue;
        const node *x = &g->nodes[nd->in[0]];
        bool pad = nd->op == RJ_OP_PAD;
        pl->pad[pl->npads++] = (plan_pad){.op = op_table[nd->op].name, .len = pad ? nd->dims[1] : x->dims[1],
                                          .len2 = !pad && nd->keepdim ? x->dims[2] : RJ_DIM_NONE,
                                          .sym = dim_sym(pad ? x->dims[1] : nd->dims[1])};
    }
    return RJ_OK;
}

static void use(run_plan *pl, int32_t buf, int32_t k) {
    if (buf < 0) return;
    int32_t *l = &pl->live[2 * buf];
    if (l[0] < 0 || k < l[0]) l[0] = k;
    if (k > l[1]) l[1] = k;
}

/* Each buffer's span of kernels (run_plan.live): where kernels name it as a parameter, where a
 * GEMM kernel's library call reads it, a prologue (inner_only) at its GEMM kernel. */
static void plan_live(const lprog *lp, run_plan *pl) {
    for (int32_t i = 0; i < pl->nbufs; i++) pl->live[2 * i] = pl->live[2 * i + 1] = -1;
    for (int32_t k = 0; k < lp->nkernels; k++) {
        const lkernel *kn = &lp->kernels[k];
        int32_t at = k;
        for (int32_t j = 0; kn->inner_only && j < lp->nkernels; j++)
            if (lp->kernels[j].gemm.on && lp->kernels[j].gemm.prologue == k) at = j;
        for (int32_t a = 0; a < kn->nparams; a++)
            if (kn->params[a].kind == PK_BUF) use(pl, kn->params[a].ref, at);
        if (kn->gemm.on) {
            use(pl, kn->gemm.a_buf, k);
            use(pl, kn->gemm.w_buf, k);
            if (kn->gemm.mode == GEMM_ATTN)
                for (int o = 0; o < 4; o++) use(pl, kn->gemm.att[o].buf, k);
        }
    }
    if (lp->checks_buf >= 0) use(pl, lp->checks_buf, lp->nkernels);
}

/* Loop-IR buffers, kernels' scratch and index checks (compiled targets). */
static rj_status plan_loops(rj_ctx *ctx, const rj_graph *g, const lprog *lp, run_plan *pl) {
    pl->nbufs = lp ? lp->nbufs : 0;
    pl->nkernels = lp ? lp->nkernels : 0;
    pl->nchecks = lp ? lp->nchecks : 0;
    if (!(pl->buf = mem_zalloc(ctx, (size_t)(pl->nbufs ? pl->nbufs : 1) * sizeof(plan_shape))) ||
        !(pl->scratch_es = mem_zalloc(ctx, (size_t)(pl->nkernels ? pl->nkernels : 1) * sizeof(int64_t))) ||
        !(pl->check = mem_zalloc(ctx, (size_t)(pl->nchecks ? pl->nchecks : 1) * sizeof(plan_check))))
        return RJ_ERR_NOMEM;
    for (int32_t i = 0; i < pl->nbufs; i++) pl->buf[i] = buf_shape(g, &lp->bufs[i]);
    if (!(pl->live = mem_alloc(ctx, sizeof(int32_t) * 2 * (size_t)(pl->nbufs ? pl->nbufs : 1)))) return RJ_ERR_NOMEM;
    if (lp) plan_live(lp, pl);
    for (int32_t k = 0; k < pl->nkernels; k++)
        pl->scratch_es[k] = (int64_t)rj_dtype_size((rj_dtype)lp->kernels[k].tiling.scratch_type);
    for (int32_t i = 0; i < pl->nchecks; i++) {
        const lcheck *c = &lp->checks[i];
        const sym *s1 = c->rank > 1 ? graph_sym(g, c->dims[1]) : NULL, *sb = graph_sym(g, c->bound);
        plan_check *pc = &pl->check[i];
        *pc = (plan_check){.op = rj_op_name((rj_op)c->op), .rsym = -1, .cls = -1, .bound_cls = -1};
        if (s1 && s1->kind == SYM_RAGGED) {
            pc->jagged = true;
            pc->rsym = dim_sym(c->dims[1]);
            pc->cls = sym_root(g, pc->rsym);
        }
        if (sb && sb->kind == SYM_RAGGED) {
            pc->bound_ragged = true;
            pc->bound_cls = sym_root(g, dim_sym(c->bound));
        }
    }
    return RJ_OK;
}

rj_status plan_make(rj_ctx *ctx, const rj_graph *g, const lprog *lp, run_plan *pl) {
    memset(pl, 0, sizeof *pl);
    pl->nsym = g->nsym;
    pl->ninputs = g->ninputs;
    pl->noutputs = g->noutputs;
    rj_status s = RJ_OK;
    if (!(pl->in = mem_zalloc(ctx, (size_t)(g->ninputs ? g->ninputs : 1) * sizeof(plan_io))) ||
        !(pl->out = mem_zalloc(ctx, (size_t)(g->noutputs ? g->noutputs : 1) * sizeof(plan_io))))
        s = RJ_ERR_NOMEM;
    for (int32_t i = 0; !s && i < g->ninputs; i++) {
        const node *n = &g->nodes[g->inputs[i]];
        pl->in[i] = (plan_io){.name = n->name, .node = g->inputs[i], .sh = node_shape(g, n)};
    }
    for (int32_t i = 0; !s && i < g->noutputs; i++)
        pl->out[i] = (plan_io){.name = g->outputs[i].name, .node = g->outputs[i].node,
                               .sh = node_shape(g, &g->nodes[g->outputs[i].node])};
    if (!s) s = plan_syms(ctx, g, pl);
    if (!s) s = plan_pads(ctx, g, pl);
    if (!s) s = plan_loops(ctx, g, lp, pl);
    if (s) plan_free(ctx, pl);
    return s;
}

int plan_find(const run_plan *pl, rj_ctx *ctx, bool out, rj_node n, const char *call) {
    const plan_io *io = out ? pl->out : pl->in;
    for (int32_t i = 0, count = out ? pl->noutputs : pl->ninputs; i < count; i++)
        if (io[i].node == n) return i;
    ctx_fail(ctx, RJ_ERR_ARG, "%s: node %d is not an %s of the program", call, (int)n, out ? "output" : "input");
    return -1;
}

void plan_free(rj_ctx *ctx, run_plan *pl) {
    size_t ns = (size_t)(pl->nsym ? pl->nsym : 1);
    mem_free(ctx, pl->sym, ns * sizeof(plan_sym));
    mem_free(ctx, pl->used, ns);
    mem_free(ctx, pl->roots, ns * sizeof(int32_t));
    mem_free(ctx, pl->pair, (size_t)(pl->cappairs ? pl->cappairs : 1) * sizeof(plan_pair));
    mem_free(ctx, pl->in, (size_t)(pl->ninputs ? pl->ninputs : 1) * sizeof(plan_io));
    mem_free(ctx, pl->out, (size_t)(pl->noutputs ? pl->noutputs : 1) * sizeof(plan_io));
    mem_free(ctx, pl->pad, (size_t)(pl->npads ? pl->npads : 1) * sizeof(plan_pad));
    mem_free(ctx, pl->buf, (size_t)(pl->nbufs ? pl->nbufs : 1) * sizeof(plan_shape));
    mem_free(ctx, pl->scratch_es, (size_t)(pl->nkernels ? pl->nkernels : 1) * sizeof(int64_t));
    mem_free(ctx, pl->check, (size_t)(pl->nchecks ? pl->nchecks : 1) * sizeof(plan_check));
    mem_free(ctx, pl->live, sizeof(int32_t) * 2 * (size_t)(pl->nbufs ? pl->nbufs : 1));
    memset(pl, 0, sizeof *pl);
}
