/*
 * passes.h — the compilation pipeline's passes and the fusion plan they produce.
 *
 *   verify → heads → canonicalize → eliminate_pads → find_attention → canonicalize → fuse → lower → expand
 *
 * Graph passes rewrite the graph (rewrite.h); fuse annotates it with a plan; lower turns the
 * plan into loop IR (loopir.h); expand rewrites its composite ops as primitives (expand.c),
 * and the result is the input of every backend.
 */
#ifndef RJ_PASSES_H
#define RJ_PASSES_H

#include "ir.h"

rj_status pass_heads(rj_graph *g);
rj_status pass_canonicalize(rj_graph *g);
rj_status pass_eliminate_pads(rj_graph *g);
rj_status pass_find_attention(rj_graph *g);
/* attention.c: the per-item product q @ kᵀ that attention node att's kernel computes where its
 * scores need it, or -1 (none, or something else reads it: it is then materialised), or -2
 * when out of memory (recorded in the context); live: the nodes to count as readers (NULL:
 * all). */
int32_t attention_product(const rj_graph *g, int32_t att, const uint8_t *live);

/* ---- the fusion plan --------------------------------------------------------------------- */

/* What a node becomes in generated code. */
typedef enum {
    FR_DEAD,     /* not needed by any output */
    FR_INPUT,    /* bound by the caller */
    FR_INLINE,   /* recomputed wherever it is used (elementwise ops, pad, unpad, literals) */
    FR_ROOT,     /* gives a kernel its loop structure: reduction, softmax, norm */
    FR_EPILOGUE, /* elementwise consumer computed inside its root's kernel, at its output */
} fuse_role;

typedef struct fuse_node {
    uint8_t role;
    uint8_t mat;     /* written to memory: an output, or read by another kernel */
    int32_t group;   /* kernel that computes it (-1 for inputs and inline nodes) */
} fuse_node;

/* FG_CHECK: the range check of an index op's indices (root: the index op), a kernel over the
 * index tensor's domain run where the op's producers have run (lower/checks.c,
 * runtime/checks.c). */
typedef enum { FG_ROOT, FG_MAP, FG_CHECK } fuse_group_kind;

typedef struct fuse_group {
    uint8_t kind;
    int32_t root;    /* FG_ROOT: the root node; FG_MAP: a node whose dims give the domain */
    int32_t *members;/* FG_MAP: materialised nodes computed here; FG_ROOT: epilogue nodes */
    int32_t nmembers, capmembers;
    int32_t product; /* FG_ROOT of an attention: the product its kernel computes inline, or -1 */
} fuse_group;

typedef struct fuse_plan {
    rj_ctx *ctx;
    fuse_node *nodes; /* per graph node */
    int32_t n;
    fuse_group *groups; /* in execution order */
    int32_t ngroups, capgroups;
} fuse_plan;

/* The nodes kernel gi evaluates inline (marked in inl: the producers recomputed inside it,
 * reached from what it computes through inline operands) and the values it reads from memory
 * (marked in reads: inputs and what other kernels write). stack: room for 5 (g->n + 1) ids. */
void fuse_kernel_uses(const rj_graph *g, const fuse_plan *p, int32_t gi, uint8_t *inl, uint8_t *reads,
                      int32_t *stack);

/* The longest chain of operations one kernel computes without writing it to memory (it
 * bounds the stack compilation needs). Fusion cuts inline chains every FUSE_CUT_DEPTH links
 * by materialising a link, so only a pathological mix of epilogues could still exceed the
 * maximum, which then fails with RJ_ERR_UNSUPPORTED (see check_depth in fuse.c). */
enum { FUSE_MAX_DEPTH = 1000, FUSE_CUT_DEPTH = 500 };

/* desc: the target (a CPU whose products may go to a GEMM with bf16 operands reads a bf16
 * weight as it is, where other targets widen it once: widened_weight) */
typedef struct target_desc target_desc;
rj_status pass_fuse(const rj_graph *g, const target_desc *desc, fuse_plan *plan);
/* A matrix product of two bf16 values widened to f32 (linear with a bias in bf16 is built as
 * cast(x) @ cast(w)ᵀ, so that the sum rounds once): the casts' operands in *x16 and *w16. A
 * GEMM of bf16 operands with f32 products computes it as they are. */
bool product_of_bf16(const rj_graph *g, int32_t mm, int32_t *x16, int32_t *w16);
/* Does the target multiply bf16 operands as they are (a CPU whose BLAS, or ragjit's AMX
 * tiles, give sbgemm)? */
bool target_sbgemm(const target_desc *desc);
void fuse_plan_free(fuse_plan *plan);
void print_fuse_plan(sbuf *b, const rj_graph *g, const fuse_plan *plan);
/* dot.c: the graph as Graphviz, kernels as clusters */
void print_dot(sbuf *b, const rj_graph *g, const fuse_plan *plan);

#endif
