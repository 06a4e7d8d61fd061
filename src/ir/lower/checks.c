/*
 * lower/checks.c — the range checks of index ops.
 *
 * Per index tensor and bound a kernel over the tensor's domain (fuse.c makes one check of the
 * index ops that share both, the first in graph order naming them in messages): where an index is out of range, the
 * smallest packed logical position (C order over items' rows, then the inner dims) goes into
 * the op's word of the checks buffer by an atomic minimum, so the first bad index is found
 * whatever the threads' schedule. The program's first kernel sets every word to INT64_MAX.
 */
#include <stdio.h>
#include <string.h>

#include "kit.h"

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

void lower_check(lower *L, const fuse_group *gr) {
    int32_t slot = L->check_slot++;
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
    lc->bound = index_bound_dim(L->g, n);
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
void lower_checks_init(lower *L) {
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
    snprintf(L->k->tmpl, sizeof L->k->tmpl, "checks_clear");
    at a = {.rank = 1, .inclass = -1, .outclass = -1, .guard = -1};
    blk top = NEWBLK, inner;
    int32_t fs;
    dense_loop(L, &top, &a, p->bufs[p->checks_buf].dims, 1, &inner, &fs);
    s_store(L, &inner, buf_param(L, p->checks_buf), a.idx[0], xi(L, INT64_MAX), 0);
    close_body(L, fs, &inner);
    L->k->body = top.first;
    group_for(L, L->k);
}
