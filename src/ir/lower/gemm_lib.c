/*
 * lower/gemm_lib.c — matrix products by a library GEMM (the CPU: a BLAS, or ragjit's own sgemm).
 *
 * The product of a chunk of rows goes into a per-worker buffer C (LB_CHUNK) that the cache
 * holds; this group's kernel is then its epilogue: it reads the product at (row - lo, n) and
 * computes and stores everything fused after it. x is taken from its buffer where it has one;
 * an inline x (a prologue: relu(x * w + b) @ W) is evaluated by a second kernel into the
 * chunk buffer A first. The runtime runs the chunk loop (lgemm, cpu.c).
 *
 * 16-bit products (f16, bf16) multiply in f32, as PyTorch's CPU does: C is f32 and the
 * epilogue rounds the product once where it reads it (value() rounds every 16-bit node's
 * value where it is made), so what is stored equals the f32 product rounded once, as the
 * JIT's loops compute it. The operands reach the f32 GEMM widened (GC_WIDEN): x's rows always
 * through the prologue, which widens them into an f32 chunk A as it writes an inline x (in
 * cache, like the product), and w (k, v) once per run by the runtime into an f32 copy (a few
 * hundred KiB for a layer's weight, read by every chunk). Where the BLAS has a bf16 GEMM
 * (sbgemm: a library's, or util/amx.c's AMX tiles), bf16 operands go to it as they are
 * (GC_SBGEMM) and only C is f32; so does linear's bias form in bf16, cast(x) @ cast(w)ᵀ in f32
 * (bf16_pair: the same products, each exact in f32), whose weight fusion then leaves unwidened
 * (fuse.c: widened_weight).
 */
#include <stdio.h>

#include <string.h>

#include "kit.h"

typedef struct gemm_ctx {
    const fuse_group *gr;
    int32_t buf;   /* the chunk buffer read (C) or written (A) */
    int32_t src;   /* the prologue's value: x */
    rj_dim cols;   /* a row of the chunk buffer */
} gemm_ctx;

static void gemm_epilogue_body(lower *L, blk *b, at *a, void *ud) {
    const gemm_ctx *c = ud;
    const node *r = &L->g->nodes[c->gr->root];
    int32_t idx = chunk_at(L, r, c->cols, a);
    int32_t v = xcast(L, r->dtype, xload(L, buf_param(L, c->buf), idx, L->prog->bufs[c->buf].dtype, -1));
    /* streaming into temporaries too: a projection's rows go to the next kernel (the attention,
     * the next product) only after the whole product, so where they are more than the runtime's
     * threshold they leave the cache before they are read, and a store that fetches each line
     * first (the cache's write-allocate) doubles the traffic. The CoRa module's QKV rows
     * (bench/NOTES.md, 2026-11-28 23:00): 1.02-1.05x on RACE, SQuAD and MNLI (1 thread) */
    store_group(L, b, c->gr->root, v, a, ROWS_ANY, LF_NT | LF_NT_TEMP);
}

static void gemm_prologue_body(lower *L, blk *b, at *a, void *ud) {
    const gemm_ctx *c = ud;
    const node *r = &L->g->nodes[c->gr->root];
    int32_t idx = chunk_at(L, r, c->cols, a);
    s_store(L, b, buf_param(L, c->buf), idx, xcast(L, r->dtype, value_fresh(L, c->src, a)), 0);
}


/* A node this kernel reads from a buffer as it is laid out: an input, or a value another
 * kernel wrote. */
static bool in_buffer(lower *L, int32_t id) {
    const fuse_node *f = &L->plan->nodes[id];
    bool elsewhere = f->role == FR_INPUT || ((f->role == FR_ROOT || f->role == FR_EPILOGUE) && f->group != L->group);
    return elsewhere && L->bufof[id] >= 0;
}

/* x itself, or the node x's rows are a view of where x only merges trailing dense dims of it
 * (a reshape keeping [B, j1]: the head merge a.transpose(1, 2).flatten(2) of an attention's
 * [B, j1, H, D] result is [B, j1, H·D], the same bytes): the GEMM then reads that node's
 * buffer in place, where a prologue kernel copied every row into the chunk A (1.5-2% of the
 * CoRa module's time) and took L2 from C. */
static int32_t x_source(const rj_graph *g, int32_t x) {
    const node *n = &g->nodes[x];
    if (n->op != RJ_OP_RESHAPE || n->rank != 3) return x;
    const node *s = &g->nodes[n->in[0]];
    int64_t row = 1;
    for (int k = 2; k < s->rank; k++) row = s->dims[k] > 0 ? row * s->dims[k] : -1;
    bool merge = s->rank > 3 && row > 0 && row == n->dims[2] && s->dims[0] == n->dims[0] && s->dims[1] == n->dims[1];
    return merge && s->dtype == n->dtype ? n->in[0] : x;
}

/* A dense 2-D w read through narrows of a tensor of constant dims (a weight sliced:
 * W.narrow(0, s, n), W[:, a:b], and a layer's slice W[i] of stacked weights [L, N, K], which
 * is a narrow then a reshape that drops the leading 1): the node whose buffer the BLAS reads
 * in place, with the offset of the slice's first element in *off and the tensor's row stride
 * in *ld. Otherwise w itself, *ld = 0. */
static int32_t w_source(const rj_graph *g, int32_t w, int64_t *off, int64_t *ld) {
    int64_t start[RJ_MAX_RANK] = {0}; /* by dim from the last: dropping leading 1s keeps them */
    int32_t id = w;
    *off = *ld = 0;
    for (;;) {
        const node *n = &g->nodes[id], *x = n->nin ? &g->nodes[n->in[0]] : NULL;
        if (n->op == RJ_OP_NARROW) {
            start[n->rank - 1 - n->axis] += n->ival;
        } else if (!(n->op == RJ_OP_RESHAPE && x->rank == n->rank + 1 && x->dims[0] == 1 &&
                     !memcmp(x->dims + 1, n->dims, sizeof(rj_dim) * n->rank))) {
            break;
        }
        id = n->in[0];
    }
    const node *b = &g->nodes[id];
    if (id == w || b->rank < 2) return w;
    int64_t stride = 1, o = 0;
    for (int k = 0; k < b->rank; k++) { /* k from the last dim */
        rj_dim d = b->dims[b->rank - 1 - k];
        if (d < 0) return w;
        o += start[k] * stride;
        stride *= d;
    }
    *off = o;
    *ld = b->dims[b->rank - 1];
    return id;
}

/* The tensor whose rows multiply (k, v or w; w seen through narrows, w_source). */
static int32_t rows_source(const rj_graph *g, const node *r, bool qk, int64_t *off, int64_t *ld) {
    *off = *ld = 0;
    if (qk) return g->nodes[r->in[1]].in[0];
    return g->nodes[r->in[1]].rank == 2 ? w_source(g, r->in[1], off, ld) : r->in[1];
}

/* Does the CPU's BLAS compute this GEMM group? Judged from the fusion plan, so that lowering
 * and the merge of a softmax into the GEMM's epilogue (before the buffers exist) agree: x and
 * w come from memory (will_have_buffer). */

/* A product of bf16 values widened to f32 (fuse.c: product_of_bf16: linear's bias form in
 * bf16) where the target multiplies bf16 operands as they are (GC_SBGEMM): the bf16 x and w
 * (a 2-D weight, through its narrows as w_source reads it). The product is the same: each
 * product of two bf16 values is exact in f32, and sbgemm sums them in f32. */
static bool bf16_pair(const lower *L, const node *r, int32_t root, int32_t *x16, int32_t *w16) {
    return !is_jagged_t(L->g, &L->g->nodes[r->in[1]]) && product_of_bf16(L->g, root, x16, w16) &&
           L->g->nodes[*w16].rank == 2 && !node_is_pair(L->g, &L->g->nodes[*x16]) && target_sbgemm(L->desc);
}

static bool gemm_lib_group(const lower *L, int32_t gi) {
    const rj_graph *g = L->g;
    const fuse_group *gr = &L->plan->groups[gi];
    if (gr->kind != FG_ROOT || op_table[g->nodes[gr->root].op].kind != KIND_MATMUL) return false;
    const node *r = &g->nodes[gr->root], *x = &g->nodes[r->in[0]], *w = &g->nodes[r->in[1]];
    int rp = dim_ragged_pos(g, r);
    bool qk = is_jagged_t(g, w);
    int64_t off, ld;
    int32_t x16, w16;
    bool pair = bf16_pair(L, r, gr->root, &x16, &w16);
    int32_t wsrc = pair ? w_source(g, w16, &off, &ld) : rows_source(g, r, qk, &off, &ld);
    if (!L->desc->gemm_lib || is_jagged_t(g, x) || x->dtype != r->dtype ||
        g->nodes[wsrc].dtype != (pair ? RJ_BF16 : r->dtype) || (rp >= 0 && r->rank != 3) || !will_have_buffer(L, wsrc, gi))
        return false;
    if (qk && !will_have_buffer(L, r->in[0], gi)) return false;
    const blas_fns *bl = blas_get(); /* ragjit's own sgemm has no f64 twin: those stay loops */
    return bl && (r->dtype != RJ_F64 || bl->dgemm);
}


/* How a product of dtype t multiplies (gemm_core_kind), and the dtypes of its chunks A and C. */
static uint8_t gemm_core_of(rj_dtype t, rj_dtype *a_t, rj_dtype *c_t) {
    const blas_fns *bl = blas_get();
    uint8_t core = !dtype_is_half(t) ? GC_SAME : t == RJ_BF16 && bl && bl->sbgemm ? GC_SBGEMM : GC_WIDEN;
    *a_t = core == GC_WIDEN ? RJ_F32 : t;
    *c_t = dtype_compute(t);
    return core;
}

bool gemm_lib_applies(lower *L, const fuse_group *gr) {
    return gemm_lib_group(L, (int32_t)(gr - L->plan->groups));
}

void lower_matmul_lib(lower *L, const fuse_group *gr) {
    const rj_graph *g = L->g;
    const node *r = &g->nodes[gr->root], *x = &g->nodes[r->in[0]], *w = &g->nodes[r->in[1]];
    int rp = dim_ragged_pos(g, r);
    bool qk = is_jagged_t(g, w), pv = node_is_pair(g, x), item = qk || pv;
    int64_t w_off, w_ld;
    int32_t x16, w16;
    bool pair = bf16_pair(L, r, gr->root, &x16, &w16); /* bf16 x and w widened: sbgemm takes them as they are */
    int32_t wsrc = pair ? w_source(g, w16, &w_off, &w_ld) /* the tensor whose rows multiply: k, v or w */
                        : rows_source(g, r, qk, &w_off, &w_ld);
    int32_t gi = (int32_t)(gr - L->plan->groups), sm = -1;
    int32_t epi = (int32_t)(L->k - L->prog->kernels);
    rj_dtype a_t, c_t;
    uint8_t core = gemm_core_of(r->dtype, &a_t, &c_t);
    if (pair) core = GC_SBGEMM, a_t = RJ_BF16, c_t = RJ_F32;
    lgemm gm = {.on = true, .mode = qk ? GEMM_QK : pv ? GEMM_PV : GEMM_ROWS, .dtype = (uint8_t)r->dtype, .core = core,
                .w_nk = r->ival != 0, .prologue = -1, .a_buf = -1, .a_sym = -1, .b_sym = -1,
                .a_cls = rp == 1 ? root_of(g, r->dims[1]) : -1, .w_buf = L->bufof[wsrc], .chunk_a = -1,
                .b_cls = item ? root_of(g, qk ? r->dims[2] : x->dims[2]) : -1,
                .K = x->dims[x->rank - 1], .N = r->dims[r->rank - 1], .w_off = w_off, .w_ld = w_ld};
    if (item) gm.b_sym = buf_rows_sym(L, gm.w_buf);
    int32_t xsrc = pair ? (in_buffer(L, x16) ? x16 : x_source(g, x16)) /* else the prologue: exact in bf16 */
                        : in_buffer(L, r->in[0]) || pv ? r->in[0] : x_source(g, r->in[0]);
    if (in_buffer(L, xsrc) && core != GC_WIDEN) { /* widened: x's rows through the prologue */
        gm.a_buf = L->bufof[xsrc];
        if (rp == 1 && !pv) gm.a_sym = buf_rows_sym(L, gm.a_buf);
    }
    gm.chunk_c = chunk_buf_add(L, 1, c_t, gm.N);
    if (gm.a_buf < 0) gm.chunk_a = chunk_buf_add(L, 0, a_t, gm.K);
    if (L->err) return;
    sbuf what;
    sbuf_init(&what, L->ctx);
    sbuf_puts(&what, item ? "epilogue of the per-item GEMMs " : "epilogue of the GEMM ");
    print_node_type(&what, g, pair ? &g->nodes[x16] : x);
    sbuf_puts(&what, qk ? " @ the transpose of " : r->ival ? " @ weightᵀ " : " @ ");
    print_node_type(&what, g, &g->nodes[wsrc]);
    set_what(L, &what);
    for (int32_t k = 0; k < L->plan->ngroups && L->merged; k++)
        if (L->merged[k] == gi) sm = k;
    if (sm >= 0) { /* the softmax after the product, row by row from C: the product stays in cache */
        L->chunk_root = gr->root, L->chunk_buf = gm.chunk_c, L->chunk_cols = gm.N;
        L->group = sm, L->group2 = gi;
        L->lower_in_kernel(L, &L->plan->groups[sm]);
        L->group = gi, L->group2 = -1, L->chunk_root = -1;
    } else {
        gemm_ctx c = {.gr = gr, .buf = gm.chunk_c, .cols = gm.N};
        element_nest(L, r, r->dims, gemm_epilogue_body, &c);
    }
    if (gm.chunk_a >= 0 && !L->err) { /* the prologue: x's rows into A */
        char name[48];
        snprintf(name, sizeof name, "%.20s_prologue", L->k->name);
        if (!open_kernel(L, name)) return;
        gm.prologue = L->prog->nkernels - 1;
        L->k->inner_only = true;
        snprintf(L->k->what, sizeof L->k->what, "prologue of a GEMM: x's rows into its chunk A");
        gemm_ctx pc = {.gr = gr, .buf = gm.chunk_a, .src = r->in[0], .cols = gm.K};
        element_nest(L, r, x->dims, gemm_prologue_body, &pc);
        group_for(L, L->k);
    }
    L->prog->kernels[epi].gemm = gm;
    L->k = &L->prog->kernels[epi]; /* the group's kernel, for what follows it in pass_lower */
}

/* A softmax (or log_softmax) over the last dim of a product the BLAS computes, reading it
 * directly or through the product's epilogue, is computed by the GEMM's epilogue kernel from
 * the chunk C, whose rows are whole rows of the product: the product and the values between
 * (unwritten) never go to memory. Only when nothing else reads them. */
void merge_softmax(lower *L, int32_t gs, uint8_t *unwritten) {
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
