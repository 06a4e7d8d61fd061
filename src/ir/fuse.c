/*
 * fuse.c — fusion: decide which kernels exist and what each computes.
 *
 * The unit of fusion is the root: every reduction, softmax, log_softmax, layer_norm and
 * rms_norm gets a kernel whose loop structure it dictates. Elementwise work is never given a
 * kernel of its own if it can be avoided:
 *   - producers (elementwise ops, casts, literals, pads, unpads) are INLINE: recomputed at
 *     every index where a kernel needs them, so softmax(relu(x*w+b)) reads x straight from the
 *     caller's memory inside the softmax kernel;
 *   - consumers of a root that have the root's output shape become its EPILOGUE and are
 *     computed as the root's results are written (relu(sum(x)) is one kernel); unpad of a
 *     softmax over a padded dim counts as such a consumer;
 *   - what remains to be written — outputs that are inline expressions — forms MAP kernels,
 *     one per output domain, each writing all outputs of that domain in one pass.
 * A node is materialised (written to memory) only if it is an output or another kernel reads
 * it. Inline nodes never are: recomputing an elementwise expression costs less than a round
 * trip through memory, and padded tensors in particular are never written unless they are
 * outputs.
 *
 * Kernels run in this order: root kernels by node id (a root only reads roots and epilogues
 * built before it), then map kernels (nothing reads an output of a map kernel).
 *
 * A kernel computes at most FUSE_MAX_DEPTH chained operations (see check_depth): compilation
 * walks those chains recursively, and the bound is what keeps its stack use bounded for any
 * program. A longer chain of inline nodes is cut: every FUSE_CUT_DEPTH-th link is
 * materialised by a map kernel of its own, run in node order with the root kernels, and the
 * rest of the chain reads it back. A 100,000-statement chain compiles to 200 kernels instead
 * of being refused. Nothing here recurses.
 */
#include <string.h>

#include "passes.h"
#include "target.h"

static bool is_root_kind(op_kind k) {
    return k == KIND_REDUCE || k == KIND_SOFTMAX || k == KIND_NORM || k == KIND_MATMUL || k == KIND_ATTENTION;
}

static bool same_dims(const rj_graph *g, const node *a, const node *b) {
    if (a->rank != b->rank) return false;
    for (int k = 0; k < a->rank; k++)
        if (!dim_equal(g, a->dims[k], b->dims[k])) return false;
    return true;
}

/* c may be computed in r's kernel, at r's output index. */
static bool fits_epilogue(const rj_graph *g, const node *c, const node *r) {
    op_kind k = op_table[c->op].kind;
    if (r->op == RJ_OP_ATTENTION) return false; /* its kernel accumulates in its own output */
    if (k == KIND_UNARY || k == KIND_BINARY || k == KIND_COMPARE || k == KIND_SELECT ||
        k == KIND_CAST)
        return same_dims(g, c, r);
    /* unpad of a softmax over a padded dim: written for rows i < len_b only */
    if (c->op == RJ_OP_UNPAD && op_table[r->op].kind == KIND_SOFTMAX && r->axis == 1 &&
        dim_ragged_pos(g, r) < 0)
        return same_dims(g, &g->nodes[c->in[0]], r);
    return false;
}

static rj_status add_member(fuse_plan *p, fuse_group *gr, int32_t id) {
    if (!mem_grow(p->ctx, (void **)&gr->members, &gr->capmembers, gr->nmembers + 1,
                  sizeof(int32_t)))
        return RJ_ERR_NOMEM;
    gr->members[gr->nmembers++] = id;
    return RJ_OK;
}

static int32_t new_group(fuse_plan *p, uint8_t kind, int32_t root) {
    if (!mem_grow(p->ctx, (void **)&p->groups, &p->capgroups, p->ngroups + 1, sizeof(fuse_group)))
        return -1;
    p->groups[p->ngroups] = (fuse_group){.kind = kind, .root = root, .product = -1};
    return p->ngroups++;
}

/* Marks what kernel `grp` reads from other kernels, expanding inline nodes from `from`. The
 * expansion keeps its own stack of nodes still to expand (each pushed once, thanks to seen),
 * so a long chain of inline nodes costs heap, not call stack. */
static rj_status mark_reads(const rj_graph *g, fuse_plan *p, int32_t from, int32_t grp,
                            uint8_t *seen, int32_t **stack, int32_t *cap) {
    int32_t top = 0;
    (*stack)[top++] = from;
    while (top > 0) {
        const node *n = &g->nodes[(*stack)[--top]];
        for (int k = 0; k < n->nin; k++) {
            int32_t o = n->in[k];
            fuse_node *f = &p->nodes[o];
            if (f->role == FR_ROOT || f->role == FR_EPILOGUE) {
                if (f->group != grp) {
                    f->mat = 1;
                    continue;
                }
                if (f->role == FR_ROOT) continue; /* the root's own value is at hand */
            }
            if (f->role == FR_INPUT || seen[o]) continue;
            seen[o] = 1;
            if (!mem_grow(p->ctx, (void **)stack, cap, top + 1, sizeof(int32_t)))
                return RJ_ERR_NOMEM;
            (*stack)[top++] = o;
        }
    }
    return RJ_OK;
}

/* Lowering evaluates an inline node by recursing into its operands (lower/value.c: value), and
 * the backends walk the resulting expressions recursively too, so the longest chain of nodes
 * one kernel computes without writing them bounds the stack compilation needs. Chains longer
 * than FUSE_MAX_DEPTH are refused here, with a message, instead of overflowing the stack
 * somewhere below. depth[i] counts the chain ending at i. A root's value is at hand in its
 * own kernel and loaded in others, so chains restart after it; epilogues count as links,
 * which over-estimates only chains that cross into another kernel. */
static rj_status check_depth(const rj_graph *g, const fuse_plan *p, int32_t *depth) {
    int32_t deepest = -1;
    for (int32_t i = 0; i < g->n; i++) {
        const node *n = &g->nodes[i];
        uint8_t role = p->nodes[i].role;
        depth[i] = 0;
        if (role == FR_DEAD || role == FR_INPUT || n->nin == 0) continue; /* leaves */
        for (int k = 0; k < n->nin; k++) {
            int32_t o = n->in[k], d = p->nodes[o].role == FR_ROOT ? 0 : depth[o];
            if (d > depth[i]) depth[i] = d;
        }
        depth[i]++;
        if (deepest < 0 || depth[i] > depth[deepest]) deepest = i;
    }
    if (deepest < 0 || depth[deepest] <= FUSE_MAX_DEPTH) return RJ_OK;
    /* the end of the longest chain is usually an output, which names it for the user */
    sbuf b;
    sbuf_init(&b, g->ctx);
    print_node_ref(&b, g, deepest);
    rj_status s = ctx_fail(g->ctx, RJ_ERR_UNSUPPORTED, "fuse: %s is computed by a chain of %d "
                           "operations inside one kernel, more than the %d this version "
                           "allows; split the program, writing an intermediate result as an "
                           "output", b.s ? b.s : "a node", (int)depth[deepest], FUSE_MAX_DEPTH);
    sbuf_free(&b);
    return s;
}

/* Whether an earlier index op's check covers index op n's: the same index tensor and bound
 * (a model indexing with one tensor at every layer checks it once a run). */
static bool checked(const rj_graph *g, const fuse_plan *p, const node *n) {
    for (int32_t gi = 0; gi < p->ngroups; gi++) {
        const node *o = &g->nodes[p->groups[gi].root];
        if (p->groups[gi].kind == FG_CHECK && index_tensor(g, o) == index_tensor(g, n) &&
            index_bound_dim(g, o) == index_bound_dim(g, n))
            return true;
    }
    return false;
}

/* The products attention kernels compute inline, as the elementwise work on them (in[i] = 1),
 * and what is computed from them (in[i] = 2: never an epilogue of another root). */
static bool mark_products(const rj_graph *g, const uint8_t *live, uint8_t *in) {
    memset(in, 0, (size_t)(g->n ? g->n : 1));
    for (int32_t i = 0; i < g->n; i++) {
        int32_t pr = live[i] && g->nodes[i].op == RJ_OP_ATTENTION ? attention_product(g, i, live) : -1;
        if (pr < -1) return false; /* out of memory */
        if (pr >= 0) in[pr] = 1;
    }
    for (int32_t i = 0; i < g->n; i++) {
        const node *n = &g->nodes[i];
        for (int k = 0; k < n->nin && !in[i] && !is_root_kind(op_table[n->op].kind); k++)
            if (in[n->in[k]]) in[i] = 2;
    }
    return true;
}

/* An input, or a slice of one: narrows, and reshapes that drop a leading 1 (a model's stacked
 * weights, w[i] of [layers, N, K], as gemm_lib.c's w_source reads them). */
static bool input_slice(const rj_graph *g, int32_t id) {
    for (;;) {
        const node *n = &g->nodes[id], *x = n->nin ? &g->nodes[n->in[0]] : NULL;
        if (n->op == RJ_OP_INPUT) return true;
        if (n->op != RJ_OP_NARROW && !(n->op == RJ_OP_RESHAPE && x->rank == n->rank + 1 && x->dims[0] == 1 &&
                                       !memcmp(x->dims + 1, n->dims, sizeof(rj_dim) * (size_t)n->rank)))
            return false;
        id = n->in[0];
    }
}

/* A 16-bit dense weight widened for a matrix product (linear's bias form in 16-bit multiplies
 * cast(x, f32) by cast(w, f32)): the cast is written once per run, a small f32 tensor, so that
 * the product reads w from a buffer (a GEMM reads its weight in place) instead of converting
 * each element at every use; x's cast stays inline (the GEMM's prologue converts its rows).
 * The weight is an input or a slice of one (input_slice: a layer's weight of a stacked model,
 * which otherwise left the product to the JIT's loops, 50x slower in the bf16 encoder). Not
 * where the target multiplies bf16 operands as they are (a CPU with AMX tiles or AVX512-BF16, a
 * BLAS's sbgemm: lower/gemm_lib.c reads the bf16 weight itself). */
static bool widened_weight(const rj_graph *g, const target_desc *desc, const uint8_t *live, int32_t i) {
    const node *n = &g->nodes[i];
    if (n->op != RJ_OP_CAST || n->rank != 2 || !dtype_is_half(g->nodes[n->in[0]].dtype) || !input_slice(g, n->in[0]))
        return false;
    int32_t x16, w16;
    for (int32_t k = i + 1; k < g->n; k++) /* consumers come after their operands */
        if (live[k] && op_table[g->nodes[k].op].kind == KIND_MATMUL && g->nodes[k].in[1] == i)
            /* unless the GEMM reads the bf16 weight as it is (lower/gemm_lib.c) */
            return !(product_of_bf16(g, k, &x16, &w16) && target_sbgemm(desc));
    return false;
}

/* A bf16 value widened only to be x of products that take bf16 operands as they are (the
 * target's sbgemm: product_of_bf16): not written by its producer's kernel as an f32 epilogue,
 * so that the bf16 value is what is written (half the bytes) and the GEMM reads its rows in
 * place; otherwise the f32 copy was written beside the bf16 value and a prologue narrowed it
 * back for the product. */
static bool bf16_operand(const rj_graph *g, const target_desc *desc, const uint8_t *live, int32_t i) {
    const node *n = &g->nodes[i];
    if (n->op != RJ_OP_CAST || n->dtype != RJ_F32 || g->nodes[n->in[0]].dtype != RJ_BF16 || !target_sbgemm(desc))
        return false;
    int32_t x16, w16, uses = 0;
    for (int32_t k = i + 1; k < g->n; k++) {
        if (!live[k]) continue;
        const node *c = &g->nodes[k];
        for (int q = 0; q < c->nin; q++) {
            if (c->in[q] != i) continue;
            if (q != 0 || !product_of_bf16(g, k, &x16, &w16)) return false;
            uses++;
        }
    }
    for (int32_t o = 0; o < g->noutputs; o++)
        if (g->outputs[o].node == i) return false;
    return uses > 0;
}

bool product_of_bf16(const rj_graph *g, int32_t mm, int32_t *x16, int32_t *w16) {
    const node *r = &g->nodes[mm];
    if (op_table[r->op].kind != KIND_MATMUL || r->dtype != RJ_F32) return false;
    const node *x = &g->nodes[r->in[0]], *w = &g->nodes[r->in[1]];
    if (x->op != RJ_OP_CAST || w->op != RJ_OP_CAST || g->nodes[x->in[0]].dtype != RJ_BF16 ||
        g->nodes[w->in[0]].dtype != RJ_BF16)
        return false;
    *x16 = x->in[0], *w16 = w->in[0];
    return true;
}

bool target_sbgemm(const target_desc *desc) {
    const blas_fns *bl = desc && desc->gemm_lib ? blas_get() : NULL;
    return bl && bl->sbgemm;
}

rj_status pass_fuse(const rj_graph *g, const target_desc *desc, fuse_plan *p) {
    rj_ctx *ctx = g->ctx;
    memset(p, 0, sizeof *p);
    p->ctx = ctx;
    p->n = g->n;
    size_t nb = (size_t)(g->n ? g->n : 1);
    uint8_t *live = mem_alloc(ctx, nb), *seen = mem_alloc(ctx, nb);
    int32_t *maxroot = mem_alloc(ctx, nb * sizeof(int32_t)), *stack = NULL, stack_cap = 0;
    int32_t *chain = mem_alloc(ctx, nb * sizeof(int32_t)); /* inline links ending at a node */
    rj_status s = RJ_ERR_NOMEM;
    if (!live || !seen || !maxroot || !chain || !(p->nodes = mem_zalloc(ctx, nb * sizeof(fuse_node))) ||
        !mem_grow(ctx, (void **)&stack, &stack_cap, 1, sizeof(int32_t)))
        goto out;
    /* live nodes, inputs included */
    memset(live, 0, nb);
    for (int32_t i = 0; i < g->noutputs; i++) live[g->outputs[i].node] = 1;
    for (int32_t i = g->n - 1; i >= 0; i--)
        if (live[i])
            for (int k = 0; k < g->nodes[i].nin; k++) live[g->nodes[i].in[k]] = 1;
    if (!mark_products(g, live, seen)) goto out;
    for (int32_t i = 0; i < g->n; i++) {
        const node *n = &g->nodes[i];
        fuse_node *f = &p->nodes[i];
        f->group = -1;
        maxroot[i] = -1;
        chain[i] = 0;
        if (n->op == RJ_OP_INPUT) {
            f->role = FR_INPUT;
            continue;
        }
        if (!live[i]) continue;
        for (int k = 0; k < n->nin; k++)
            if (maxroot[n->in[k]] > maxroot[i]) maxroot[i] = maxroot[n->in[k]];
        if (seen[i] == 1) {
            f->role = FR_INLINE;
            continue;
        }
        if (is_root_kind(op_table[n->op].kind)) {
            f->role = FR_ROOT;
            if ((f->group = new_group(p, FG_ROOT, i)) < 0) goto out;
            if (n->op == RJ_OP_ATTENTION && (p->groups[f->group].product = attention_product(g, i, live)) < -1) goto out;
            maxroot[i] = i;
            continue;
        }
        for (int k = 0; k < n->nin; k++) {
            int32_t o = n->in[k], d = p->nodes[o].role == FR_ROOT ? 0 : chain[o];
            if (d > chain[i]) chain[i] = d;
        }
        if (n->nin && (++chain[i] >= FUSE_CUT_DEPTH || widened_weight(g, desc, live, i))) {
            /* a long inline chain's end, or a widened weight: a map kernel of its own, in node
             * order (a root, for everything that reads it), so the chain starts again here */
            f->role = FR_ROOT;
            if ((f->group = new_group(p, FG_MAP, i)) < 0 || add_member(p, &p->groups[f->group], i))
                goto out;
            chain[i] = 0;
            continue;
        }
        f->role = FR_INLINE;
        if (op_table[n->op].kind == KIND_INDEX && n->nin == 2 && !checked(g, p, n) && new_group(p, FG_CHECK, i) < 0)
            goto out;
        int32_t r = maxroot[i];
        if (r >= 0 && !seen[i] && fits_epilogue(g, n, &g->nodes[r]) && !bf16_operand(g, desc, live, i)) {
            /* every path to r must run through r's epilogue: an inline node in between has
             * another shape and is evaluated elsewhere */
            bool ok = true;
            for (int k = 0; k < n->nin && ok; k++) {
                int32_t o = n->in[k];
                if (maxroot[o] == r && o != r && p->nodes[o].role != FR_EPILOGUE) ok = false;
            }
            if (ok) {
                f->role = FR_EPILOGUE;
                f->group = p->nodes[r].group;
                if (add_member(p, &p->groups[f->group], i)) goto out;
            }
        }
    }
    for (int32_t i = 0; i < g->noutputs; i++) p->nodes[g->outputs[i].node].mat = 1;
    /* what each root kernel reads from other kernels must be materialised */
    memset(seen, 0, nb);
    for (int32_t gi = 0; gi < p->ngroups; gi++) {
        fuse_group *gr = &p->groups[gi];
        if (gr->kind == FG_CHECK) { /* it computes the index tensor, nothing else */
            int32_t o = index_tensor(g, &g->nodes[gr->root]);
            fuse_node *f = &p->nodes[o];
            if (f->role == FR_ROOT || f->role == FR_EPILOGUE) f->mat = 1;
            else if (f->role == FR_INLINE && mark_reads(g, p, o, gi, seen, &stack, &stack_cap)) goto out;
            memset(seen, 0, nb);
            continue;
        }
        if (mark_reads(g, p, gr->root, gi, seen, &stack, &stack_cap)) goto out;
        for (int32_t m = 0; m < gr->nmembers; m++)
            if (mark_reads(g, p, gr->members[m], gi, seen, &stack, &stack_cap)) goto out;
        memset(seen, 0, nb);
    }
    /* map kernels: inline (or input) outputs, one kernel per output domain */
    int32_t nroot_groups = p->ngroups;
    for (int32_t i = 0; i < g->n; i++) {
        fuse_node *f = &p->nodes[i];
        if (!f->mat || (f->role != FR_INLINE && f->role != FR_INPUT)) continue;
        int32_t gi = -1;
        for (int32_t k = nroot_groups; k < p->ngroups && gi < 0; k++)
            if (same_dims(g, &g->nodes[p->groups[k].root], &g->nodes[i])) gi = k;
        if (gi < 0 && (gi = new_group(p, FG_MAP, i)) < 0) goto out;
        f->group = gi;
        if (add_member(p, &p->groups[gi], i) || mark_reads(g, p, i, gi, seen, &stack, &stack_cap))
            goto out;
        memset(seen, 0, nb);
    }
    s = check_depth(g, p, maxroot);
out:
    mem_free(ctx, live, nb);
    mem_free(ctx, seen, nb);
    mem_free(ctx, maxroot, nb * sizeof(int32_t));
    mem_free(ctx, chain, nb * sizeof(int32_t));
    mem_free(ctx, stack, sizeof(int32_t) * (size_t)stack_cap);
    if (s) {
        fuse_plan_free(p);
        if (s == RJ_ERR_NOMEM && ctx_last_status(ctx) != RJ_ERR_NOMEM)
            ctx_fail(ctx, s, "fuse: out of memory");
    }
    return s;
}

void fuse_plan_free(fuse_plan *p) {
    if (!p->ctx) return;
    for (int32_t i = 0; i < p->ngroups; i++)
        mem_free(p->ctx, p->groups[i].members, sizeof(int32_t) * (size_t)p->groups[i].capmembers);
    mem_free(p->ctx, p->groups, sizeof(fuse_group) * (size_t)p->capgroups);
    mem_free(p->ctx, p->nodes, sizeof(fuse_node) * (size_t)(p->n ? p->n : 1));
    memset(p, 0, sizeof *p);
}

/* ---- the "fused" dump ------------------------------------------------------------------------
 * Per kernel: what gives it its loops, every value it computes (the producers inlined into it
 * too, which exist nowhere else), and for each value written to memory why: an output of the
 * program, or read by later kernels (which are named). */

/* Kernel gi's inline nodes (in inl) and the values it reads from memory (in reads), from the
 * operands of what it computes, through inline producers. */
void fuse_kernel_uses(const rj_graph *g, const fuse_plan *p, int32_t gi, uint8_t *inl, uint8_t *reads,
                      int32_t *stack) {
    const fuse_group *gr = &p->groups[gi];
    int32_t top = 0;
    /* the operands of this kernel's own values (its root, its epilogue or map members), or the
     * index tensor a check kernel evaluates */
    if (gr->kind == FG_CHECK) stack[top++] = index_tensor(g, &g->nodes[gr->root]);
    for (int32_t m = -1; m < gr->nmembers; m++) {
        if (m < 0 && gr->kind != FG_ROOT) continue;
        const node *n = &g->nodes[m < 0 ? gr->root : gr->members[m]];
        for (int k = 0; k < n->nin; k++) stack[top++] = n->in[k];
    }
    while (top > 0) {
        int32_t id = stack[--top];
        const node *n = &g->nodes[id];
        const fuse_node *f = &p->nodes[id];
        /* inline nodes are recomputed wherever they are used, even those a map kernel writes
         * as outputs; roots and epilogues are read from memory, but for this kernel's own */
        if (f->role != FR_INPUT && f->group == gi) continue;
        if (f->role == FR_INPUT || f->role == FR_ROOT || f->role == FR_EPILOGUE) {
            reads[id] = 1;
            continue;
        }
        if (inl[id]) continue;
        inl[id] = 1;
        for (int k = 0; k < n->nin; k++) stack[top++] = n->in[k];
    }
}

/* "(written: an output; read by kernels 3, 5)" for a materialised node. */
static void why_written(sbuf *b, const rj_graph *g, const fuse_plan *p, int32_t id, const uint8_t *readers) {
    if (!p->nodes[id].mat) return;
    bool out = false;
    for (int32_t o = 0; o < g->noutputs; o++) out |= g->outputs[o].node == id;
    sbuf_puts(b, "  (written: ");
    if (out) sbuf_puts(b, "an output");
    int nr = 0;
    for (int32_t k = 0; k < p->ngroups; k++)
        if (readers[k]) sbuf_printf(b, "%s%d", nr++ ? ", " : out ? "; read by kernel " : "read by kernel ", (int)k);
    if (!out && !nr) sbuf_puts(b, "kept");
    sbuf_putc(b, ')');
}

void print_fuse_plan(sbuf *b, const rj_graph *g, const fuse_plan *p) {
    size_t n = (size_t)(g->n ? g->n : 1), ng = (size_t)(p->ngroups ? p->ngroups : 1);
    uint8_t *inl = mem_zalloc(g->ctx, n), *reads = mem_zalloc(g->ctx, n * ng), *readers = mem_zalloc(g->ctx, ng);
    uint8_t *ignore = mem_zalloc(g->ctx, n);
    int32_t *stack = mem_alloc(g->ctx, sizeof(int32_t) * (size_t)(5 * (g->n + 1)));
    namer *nm = print_names_new(g); /* names in linear time: a chain has 100,000 of them */
    if (!inl || !reads || !readers || !ignore || !stack || !nm) {
        b->failed = true;
        goto out;
    }
    for (int32_t gi = 0; gi < p->ngroups; gi++) {
        memset(inl, 0, n);
        fuse_kernel_uses(g, p, gi, inl, reads + (size_t)gi * n, stack);
    }
    for (int32_t gi = 0; gi < p->ngroups; gi++) {
        const fuse_group *gr = &p->groups[gi];
        const node *r = &g->nodes[gr->root];
        memset(inl, 0, n); /* this kernel's inline producers (its reads are known already) */
        fuse_kernel_uses(g, p, gi, inl, ignore, stack);
        if (gr->kind == FG_ROOT) {
            sbuf_printf(b, "kernel %d: ", gi);
            print_node_ref_nm(b, g, nm, gr->root);
            sbuf_puts(b, " = ");
            print_node_call_nm(b, g, nm, gr->root);
        } else if (gr->kind == FG_CHECK) {
            sbuf_printf(b, "kernel %d: checks the indices of ", gi);
            print_node_call_nm(b, g, nm, gr->root);
            sbuf_puts(b, "  (an index out of range fails the run)");
        } else {
            sbuf_printf(b, "kernel %d: map over ", gi);
            print_node_type(b, g, r);
        }
        if (gr->kind == FG_ROOT) {
            for (int32_t k = 0; k < p->ngroups; k++) readers[k] = reads[(size_t)k * n + (size_t)gr->root];
            if (p->nodes[gr->root].mat) why_written(b, g, p, gr->root, readers);
            else sbuf_puts(b, "  (not written: used where it is computed)");
        }
        sbuf_putc(b, '\n');
        for (int32_t id = 0; id < g->n; id++) { /* producers evaluated inside, in graph order */
            if (!inl[id] || g->nodes[id].op == RJ_OP_SCALAR) continue;
            sbuf_puts(b, "  inline ");
            print_node_ref_nm(b, g, nm, id);
            sbuf_puts(b, " = ");
            print_node_call_nm(b, g, nm, id);
            sbuf_putc(b, '\n');
        }
        for (int32_t m = 0; m < gr->nmembers; m++) {
            int32_t id = gr->members[m];
            sbuf_puts(b, gr->kind == FG_ROOT ? "  epilogue " : "  ");
            print_node_ref_nm(b, g, nm, id);
            sbuf_puts(b, " = ");
            print_node_call_nm(b, g, nm, id);
            for (int32_t k = 0; k < p->ngroups; k++) readers[k] = reads[(size_t)k * n + (size_t)id];
            why_written(b, g, p, id, readers);
            sbuf_putc(b, '\n');
        }
    }
out:
    print_names_free(g, nm);
    mem_free(g->ctx, inl, n);
    mem_free(g->ctx, reads, n * ng);
    mem_free(g->ctx, readers, ng);
    mem_free(g->ctx, ignore, n);
    mem_free(g->ctx, stack, sizeof(int32_t) * (size_t)(5 * (g->n + 1)));
}
