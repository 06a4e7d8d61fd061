/*
 * padelim.c — pad/unpad elimination at the graph level.
 *
 * unpad(f(pad(x)), j) for an elementwise f is f(x): unpad keeps rows i < len_b, where every
 * pad of a tensor laid out by j (or a symbol declared same) reads x itself. This pass pushes
 * each unpad down through elementwise ops to its leaves:
 *   - pad(x) of the same ragged class becomes x;
 *   - operands broadcast along the padded dim (scalars, [D], [B, 1, D]) are kept as they are;
 *   - a dense [B, L, ...] leaf becomes unpad(leaf, j), a jagged view of it;
 * and gives up (leaving the unpad for the lowering to handle) on anything else, such as a
 * softmax over the padded dim, whose padding takes part in the result, or, for an unpad of
 * two dims ([B, L, L] -> [B, j, j]), an operand padded along one of them only ([B, 1, L]).
 *
 * What remains after this pass is padding that matters: pads feeding reductions or softmax
 * over the padded dim, and padded outputs. The lowering (lower/) treats every pad as a
 * predicate on loads and adds the padding's contribution to reductions in closed form, so a
 * padded tensor is only ever written to memory when it is an output.
 */
#include <string.h>

#include "passes.h"
#include "rewrite.h"

/* A node the unpad is being pushed through: its copy being built, the next operand. */
typedef struct pframe {
    int32_t o;
    int a;
    node m;
} pframe;

typedef struct pctx {
    rewriter *rw;
    const rj_graph *g;
    int32_t jroot;   /* class of the unpad's symbol */
    rj_dim j;
    bool pair;       /* the unpad keeps dims 1 and 2 ([B, L, L] -> [B, j, j]) */
    int32_t *memo;   /* old id -> pushed new id for this unpad, -1 impossible, -2 unknown */
    pframe *stack;   /* nodes whose operands are being pushed, innermost last */
    int32_t nstack, capstack;
    bool nomem;
} pctx;

static bool same_class(const rj_graph *g, rj_dim a, rj_dim b) {
    const sym *sa = graph_sym(g, a), *sb = graph_sym(g, b);
    return sa && sb && sa->kind == SYM_RAGGED && sb->kind == SYM_RAGGED &&
           sym_root(g, dim_sym(a)) == sym_root(g, dim_sym(b));
}

static bool is_elementwise(op_kind k) {
    return k == KIND_UNARY || k == KIND_BINARY || k == KIND_COMPARE || k == KIND_SELECT ||
           k == KIND_CAST;
}

/* Starts pushing the unpad through node o: a leaf is settled at once (in memo); an
 * elementwise node gets a frame, and push() settles its operands one by one. */
static void enter(pctx *pc, int32_t o) {
    const rj_graph *g = pc->g;
    const node *n = &g->nodes[o];
    if (n->op == RJ_OP_PAD && same_class(g, g->nodes[n->in[0]].dims[1], pc->j)) {
        pc->memo[o] = pc->rw->map[n->in[0]];
        return;
    }
    if (is_elementwise(op_table[n->op].kind)) {
        if (!mem_grow(g->ctx, (void **)&pc->stack, &pc->capstack, pc->nstack + 1, sizeof(pframe))) {
            pc->nomem = true;
            pc->memo[o] = -1;
            return;
        }
        pframe *f = &pc->stack[pc->nstack++];
        *f = (pframe){.o = o, .m = *n};
        f->m.name = NULL;
        return;
    }
    /* a dense [B, L, ...] leaf: read it through a jagged view */
    const sym *sj = graph_sym(g, pc->j);
    if (n->rank >= 2 && dim_ragged_pos(g, n) < 0 && dim_equal(g, n->dims[0], sym_dim(sj->parent))) {
        node u = {.op = RJ_OP_UNPAD, .nin = 1, .in = {pc->rw->map[o], -1, -1}, .ival = pc->j,
                  .keepdim = pc->pair};
        pc->memo[o] = rw_add(pc->rw, &u);
        return;
    }
    pc->memo[o] = -1;
}

/* The unpad pushed down to node o: the new id of the equivalent jagged node, or -1. A chain
 * of elementwise ops between pad and unpad may be as long as the program, so the walk keeps
 * its own stack of frames instead of recursing. Operands are settled in order and the first
 * one that cannot be pushed gives up on the node, as a recursive walk would. */
static int32_t push(pctx *pc, int32_t root) {
    const rj_graph *g = pc->g;
    if (pc->memo[root] != -2) return pc->memo[root];
    pc->nstack = 0;
    enter(pc, root);
    while (pc->nstack > 0) {
        pframe *f = &pc->stack[pc->nstack - 1];
        const node *n = &g->nodes[f->o];
        int32_t r = -2;
        for (; f->a < n->nin; f->a++) {
            int32_t in = n->in[f->a];
            const node *op = &g->nodes[in];
            int pos = 1 - (n->rank - op->rank);
            bool along1 = pos < 0 || op->dims[pos] == 1;
            bool along2 = pos + 1 < 0 || op->dims[pos + 1] == 1;
            if (along1 && (!pc->pair || along2)) {
                f->m.in[f->a] = pc->rw->map[in]; /* broadcast along the padded dims */
                continue;
            }
            if (pc->pair && along1 != along2) { /* [B, 1, L]: padded along one dim only */
                r = -1;
                break;
            }
            if (pos != 1 || pc->memo[in] == -1) {
                r = -1;
                break;
            }
            if (pc->memo[in] == -2) break; /* not pushed yet: descend first */
            f->m.in[f->a] = pc->memo[in];
        }
        if (r == -2 && f->a < n->nin) {
            enter(pc, n->in[f->a]); /* may move the stack: f is not used after this */
            continue;
        }
        if (r == -2) r = rw_add(pc->rw, &f->m);
        pc->memo[f->o] = r;
        pc->nstack--;
    }
    return pc->memo[root];
}

rj_status pass_eliminate_pads(rj_graph *g) {
    rj_ctx *ctx = g->ctx;
    rewriter rw;
    rj_status s = rw_begin(&rw, g);
    if (s) return s;
    size_t nb = (size_t)(g->n ? g->n : 1);
    uint8_t *live = mem_alloc(ctx, nb);
    int32_t *memo = mem_alloc(ctx, nb * sizeof(int32_t));
    pctx pc = {.rw = &rw, .g = g, .memo = memo};
    if (!live || !memo) {
        s = RJ_ERR_NOMEM;
        goto out;
    }
    rw_live(g, live);
    for (int32_t i = 0; i < g->n; i++) {
        if (!live[i] || rw.map[i] >= 0) continue;
        const node *n = &g->nodes[i];
        int32_t id = -1;
        if (n->op == RJ_OP_UNPAD) {
            for (int32_t k = 0; k < g->n; k++) memo[k] = -2;
            pc.j = (rj_dim)n->ival;
            pc.pair = n->keepdim;
            pc.jroot = sym_root(g, dim_sym(pc.j));
            int32_t pushed = push(&pc, n->in[0]);
            if (pc.nomem) {
                s = RJ_ERR_NOMEM;
                goto out;
            }
            const node *pn = pushed >= 0 ? &rw.out->nodes[pushed] : NULL;
            if (pn && pn->rank == n->rank && pn->dtype == n->dtype &&
                !memcmp(pn->dims, n->dims, sizeof(rj_dim) * n->rank)) {
                id = pushed;
                rw_label(&rw, id, n->name);
            }
        }
        if (id < 0) id = rw_copy(&rw, i);
        if ((rw.map[i] = id) < 0) {
            s = rw.out->status ? rw.out->status : RJ_ERR_NOMEM;
            goto out;
        }
    }
out:
    mem_free(ctx, live, nb);
    mem_free(ctx, memo, nb * sizeof(int32_t));
    mem_free(ctx, pc.stack, sizeof(pframe) * (size_t)pc.capstack);
    if (s) {
        rw_abort(&rw);
        return s;
    }
    return rw_finish(&rw);
}
