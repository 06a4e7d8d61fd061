/*
 * lower/lower.c — lowering: the fused graph becomes loop IR, one group at a time, by a table
 * of templates.
 *
 * Each row of the table is a template: a name (recorded on the kernels it makes and shown in
 * the `loops` dump), its op family, the targets it serves (a CPU, a SIMT target, or both: read
 * from the target descriptor, never from the backend), applies() — does it serve this group?
 * — and lower(), which fills the group's kernel and may add more (a GEMM's prologue, a SIMT
 * reduction's combine and rows kernels, a softmax's twin of runtime tiles). pass_lower walks
 * the rows in order and the first that applies lowers the group, so a more specialised row
 * stands before the general one of its family (the tiled SIMT products before the plain
 * per-item product, the BLAS before the JIT's own product). Adding a template is a row here and
 * a file beside it; what templates share is the kit (kit.h).
 *
 * Before the groups, lowering lays out the buffers (inputs, outputs as the user's graph
 * declares them, then one temporary per materialised node) and the kernel that clears the
 * index checks; a softmax that a library GEMM's epilogue computes (merge_softmax) has no
 * kernel of its own: the GEMM's template has the table lower it into the epilogue
 * (lower_in_kernel), so no template calls another.
 */
#include <stdio.h>
#include <string.h>

#include "kit.h"

enum { TT_CPU = 1, TT_SIMT = 2, TT_ALL = TT_CPU | TT_SIMT };

typedef struct lower_template {
    const char *name;
    const char *family;
    unsigned targets; /* TT_*: the descriptors it serves */
    bool (*applies)(lower *L, const fuse_group *gr);
    void (*lower)(lower *L, const fuse_group *gr);
} lower_template;

static op_kind root_kind(lower *L, const fuse_group *gr) {
    return op_table[L->g->nodes[gr->root].op].kind;
}

static bool is_check(lower *L, const fuse_group *gr) { RJ_UNUSED(L); return gr->kind == FG_CHECK; }
static bool is_map(lower *L, const fuse_group *gr) { RJ_UNUSED(L); return gr->kind == FG_MAP; }

static bool is_root(lower *L, const fuse_group *gr, op_kind kind) {
    return gr->kind == FG_ROOT && root_kind(L, gr) == kind;
}

static bool is_norm(lower *L, const fuse_group *gr) { return is_root(L, gr, KIND_NORM); }

/* A product per item: w of rank 3 (p v, xᵀ y) or the jagged transpose kᵀ (q kᵀ). */
static bool is_item_product(lower *L, const fuse_group *gr) {
    const node *r = &L->g->nodes[gr->root];
    return is_root(L, gr, KIND_MATMUL) &&
           (L->g->nodes[r->in[1]].rank == 3 || is_jagged_t(L->g, &L->g->nodes[r->in[0]]));
}

static bool is_item_product_tiled(lower *L, const fuse_group *gr) {
    return is_item_product(L, gr) && item_matmul_tiled_applies(L, gr);
}

static bool is_product(lower *L, const fuse_group *gr) {
    return is_root(L, gr, KIND_MATMUL) && !is_item_product(L, gr);
}

/* A product per (item, head): the heads pass's stored form (keepdim = 1). */
static bool is_head_product(lower *L, const fuse_group *gr) {
    return is_root(L, gr, KIND_MATMUL) && L->g->nodes[gr->root].keepdim;
}

static bool is_gemm_lib(lower *L, const fuse_group *gr) {
    return is_root(L, gr, KIND_MATMUL) && gemm_lib_applies(L, gr);
}

/* A reduction or softmax, and its axis. */
static bool axis_group(lower *L, const fuse_group *gr, axis_info *ai) {
    op_kind kind = root_kind(L, gr);
    if (gr->kind != FG_ROOT || kind == KIND_NORM || kind == KIND_MATMUL || kind == KIND_ATTENTION) return false;
    *ai = axis_of(L, &L->g->nodes[gr->root]);
    return !L->err;
}

static bool is_items(lower *L, const fuse_group *gr) {
    axis_info ai;
    return axis_group(L, gr, &ai) && ai.items;
}

static bool is_items_softmax(lower *L, const fuse_group *gr) {
    return is_items(L, gr) && root_kind(L, gr) == KIND_SOFTMAX;
}

static bool is_items_reduction(lower *L, const fuse_group *gr) {
    return is_items(L, gr) && root_kind(L, gr) != KIND_SOFTMAX;
}

static bool is_pair_columns(lower *L, const fuse_group *gr) {
    axis_info ai;
    return axis_group(L, gr, &ai) && !ai.items && ai.axis == 1 && node_is_pair(L->g, ai.x);
}

static bool is_dense_axis(lower *L, const fuse_group *gr) {
    axis_info ai;
    return axis_group(L, gr, &ai) && !ai.items && !(ai.axis == 1 && node_is_pair(L->g, ai.x));
}

static bool is_attention(lower *L, const fuse_group *gr) { return is_root(L, gr, KIND_ATTENTION); }

static bool is_attention_flash(lower *L, const fuse_group *gr) {
    return is_attention(L, gr) && attention_flash_applies(L, gr);
}

static bool is_attention_lib(lower *L, const fuse_group *gr) {
    return is_attention(L, gr) && attention_lib_applies(L, gr);
}

static bool is_attention_gemm(lower *L, const fuse_group *gr) {
    return is_attention(L, gr) && attention_gemm_applies(L, gr);
}

static const lower_template templates[] = {
    {"checks",                 "checks", TT_ALL,  is_check,              lower_check},
    {"map",                    "map",    TT_ALL,  is_map,                lower_map},
    {"norm_rows",              "norm",   TT_ALL,  is_norm,               lower_norm},
    {"head_matmul",            "matmul", TT_ALL,  is_head_product,       lower_head_matmul},
    {"attention_lib",          "attention", TT_CPU, is_attention_lib,    lower_attention_lib},
    {"attention_gemm",         "attention", TT_CPU, is_attention_gemm,   lower_attention_gemm},
    {"attention_flash_simt",   "attention", TT_SIMT, is_attention_flash, lower_attention_flash},
    {"attention_rows",         "attention", TT_ALL, is_attention,        lower_attention},
    {"gemm_lib",               "matmul", TT_CPU,  is_gemm_lib,           lower_matmul_lib},
    {"item_matmul_tiled_simt", "matmul", TT_SIMT, is_item_product_tiled, lower_item_matmul_tiled},
    {"item_matmul_cpu",        "matmul", TT_CPU,  is_item_product,       lower_item_matmul_cpu},
    {"item_matmul_simt",       "matmul", TT_SIMT, is_item_product,       lower_item_matmul_threads},
    {"matmul",                 "matmul", TT_ALL,  is_product,            lower_matmul},
    {"items_softmax_cpu",      "items",  TT_CPU,  is_items_softmax,      lower_items_cpu_group},
    {"items_reduce_cpu",       "items",  TT_CPU,  is_items_reduction,    lower_items_cpu_group},
    {"items_softmax_simt",     "items",  TT_SIMT, is_items_softmax,      lower_items_simt_group},
    {"items_reduce_simt",      "items",  TT_SIMT, is_items_reduction,    lower_items_simt_group},
    {"pair_columns",           "axis",   TT_ALL,  is_pair_columns,       lower_pair_columns},
    {"dense_axis",             "axis",   TT_ALL,  is_dense_axis,         lower_dense_axis},
};

/* The first row serving the group on this target, or NULL (L->err set where that is an
 * error). */
static const lower_template *template_for(lower *L, const fuse_group *gr) {
    unsigned target = L->desc->simt ? TT_SIMT : TT_CPU;
    L->why = L->why_tmpl = NULL;
    for (size_t i = 0; i < sizeof templates / sizeof templates[0] && !L->err; i++) {
        if (!(templates[i].targets & target)) continue;
        const char *why = L->why;
        if (templates[i].applies(L, gr)) return &templates[i];
        if (L->why != why) L->why_tmpl = templates[i].name;
    }
    if (!L->err) {
        L->err = RJ_ERR_INTERNAL;
        ctx_fail(L->ctx, RJ_ERR_INTERNAL, "lower: no template serves group %d (%s)", (int)(gr - L->plan->groups),
                 op_table[L->g->nodes[gr->root].op].name);
    }
    return NULL;
}

/* Group gr lowered into the kernel being built, by the template that serves it: for a
 * template whose kernel computes gr too (L->lower_in_kernel). The kernel keeps its name and
 * its template's. */
static void lower_in_kernel(lower *L, const fuse_group *gr) {
    const lower_template *t = template_for(L, gr);
    if (t) t->lower(L, gr);
}

/* Lays out the buffers: inputs, outputs (as the user's graph declares them), and the
 * temporaries of materialised nodes; decides which softmaxes a GEMM's epilogue computes. */
static void lower_buffers(lower *L) {
    const rj_graph *g = L->g, *orig = L->orig;
    const fuse_plan *plan = L->plan;
    for (int32_t i = 0; i < g->ninputs; i++)
        add_buf(L, LB_INPUT, i, g->inputs[i], &g->nodes[g->inputs[i]]);
    for (int32_t i = 0; i < g->noutputs; i++) {
        node layout_n = orig->nodes[orig->outputs[i].node]; /* as stored (heads: canonical order) */
        node_phys_dims(orig, &orig->nodes[orig->outputs[i].node], layout_n.dims);
        const node *layout = &layout_n;
        int32_t id = g->outputs[i].node;
        if (plan->nodes[id].role == FR_INPUT && L->bufof[id] >= 0) {
            /* an input returned as an output is copied by a map kernel */
            int32_t keep = L->bufof[id];
            add_buf(L, LB_OUTPUT, i, id, layout);
            L->bufof[id] = keep;
            continue;
        }
        add_buf(L, LB_OUTPUT, i, id, layout);
    }
    size_t nb = (size_t)(g->n ? g->n : 1);
    uint8_t *unwritten = mem_zalloc(L->ctx, nb); /* values a merged softmax computes from C */
    if (!unwritten) L->err = RJ_ERR_NOMEM;
    for (int32_t k = 0; k < plan->ngroups; k++) L->merged[k] = -1;
    for (int32_t k = 0; k < plan->ngroups && !L->err; k++) merge_softmax(L, k, unwritten);
    for (int32_t i = 0; i < g->n; i++)
        if (plan->nodes[i].mat && L->bufof[i] < 0 && !(unwritten && unwritten[i]))
            add_buf(L, LB_TEMP, L->prog->ntemps++, i, &g->nodes[i]);
    mem_free(L->ctx, unwritten, nb);
}

/* Group gi's kernels, by the first template that serves it. */
static void lower_group(lower *L, int32_t gi) {
    const fuse_group *gr = &L->plan->groups[gi];
    char name[16];
    snprintf(name, sizeof name, "k%d", gi);
    L->tmpl = NULL;
    if (!open_kernel(L, name)) return;
    L->group = gi;
    if (L->merged[gi] >= 0) { /* computed by its GEMM's epilogue kernel: none of its own */
        lprog_free_last_kernel(L->prog);
        return;
    }
    const lower_template *t = template_for(L, gr);
    if (!t) return;
    L->tmpl = t->name;
    snprintf(L->k->tmpl, sizeof L->k->tmpl, "%s", t->name);
    if (L->why) snprintf(L->k->note, sizeof L->k->note, "not %s: %s", L->why_tmpl, L->why);
    t->lower(L, gr);
    if (L->err) return; /* L->k may be gone (a template's extra kernel failed to allocate) */
    if (L->k->has_nt) xparam(L, PK_NT, 0, "nt");
    group_for(L, L->k);
}

rj_status pass_lower(const rj_graph *g, const rj_graph *orig, const fuse_plan *plan,
                     const target_desc *desc, lprog *out) {
    rj_ctx *ctx = g->ctx;
    memset(out, 0, sizeof *out);
    if (!desc) return ctx_fail(ctx, RJ_ERR_INTERNAL, "lower: no target descriptor");
    out->ctx = ctx;
    lower L = {.ctx = ctx, .g = g, .orig = orig, .plan = plan, .desc = desc, .prog = out,
               .subst_node = -1, .group2 = -1, .chunk_root = -1, .chunk_buf = -1,
               .lower_in_kernel = lower_in_kernel};
    size_t nb = (size_t)(g->n ? g->n : 1);
    if (!(L.bufof = mem_alloc(ctx, nb * sizeof(int32_t)))) return RJ_ERR_NOMEM;
    for (int32_t i = 0; i < g->n; i++) L.bufof[i] = -1;
    size_t ng = (size_t)(plan->ngroups ? plan->ngroups : 1);
    if (!(L.merged = mem_alloc(ctx, ng * sizeof(int32_t)))) {
        mem_free(ctx, L.bufof, nb * sizeof(int32_t));
        return RJ_ERR_NOMEM;
    }
    lower_buffers(&L);
    lower_checks_init(&L);
    for (int32_t gi = 0; gi < plan->ngroups && !L.err; gi++) lower_group(&L, gi);
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
