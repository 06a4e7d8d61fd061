/*
 * checks.c — what a run reports when an index op meets an index out of range.
 *
 * Index ops (embedding, gather, take_along_dim, index_select) read memory at positions their
 * index tensor holds. Every target checks every index where the run computes it: the
 * compiled targets in a check kernel over the index tensor's domain that keeps, per index
 * op, the first bad position (an atomic minimum of its packed logical position, so the
 * answer does not depend on how threads were scheduled), the reference interpreter in a scan
 * of the same domain in the same order. The gathering kernels never load out of bounds:
 * their loads are guarded by the same range test. After the run, the first index op (in
 * graph order) with a bad position fails the run with RJ_ERR_INDEX and the one message
 * formatted here, so every target names the same op, tensor, position and range, and the
 * index itself where the index tensor is an input (the host can read it back).
 */
#include <stdio.h>

#include "runtime.h"

rj_status index_fault_fail(rj_ctx *ctx, const index_fault *f) {
    char at[RJ_MAX_RANK * 22 + 4] = "[", val[48] = "", range[96];
    size_t n = 1;
    for (int k = 0; k < f->rank && n < sizeof at; k++)
        n += (size_t)snprintf(at + n, sizeof at - n, "%s%lld", k ? ", " : "", (long long)f->at[k]);
    if (n < sizeof at) snprintf(at + n, sizeof at - n, "]");
    if (f->has_value) snprintf(val, sizeof val, "%lld, ", (long long)f->value);
    if (f->bound >= 0 && f->per_item)
        snprintf(range, sizeof range, "out of range [0, %lld) (item %lld has %lld rows)", (long long)f->bound,
                 (long long)f->at[0], (long long)f->bound);
    else if (f->bound >= 0)
        snprintf(range, sizeof range, "out of range [0, %lld)", (long long)f->bound);
    else
        snprintf(range, sizeof range, "out of range of item %lld's rows", (long long)f->at[0]);
    return ctx_fail(ctx, RJ_ERR_INDEX, "%s: the index at %s of %s is %s%s; it is the first index out of range there",
                    rj_op_name(f->op), at, f->what, val, range);
}

/* The fault at packed logical position pos of check c's index tensor. */
static rj_status fault_at(rj_bind *b, const lcheck *c, int64_t pos) {
    const rj_graph *g = b->g;
    index_fault f = {.op = (rj_op)c->op, .what = c->what, .rank = c->rank, .bound = -1};
    int64_t ext[RJ_MAX_RANK], item = 0, row = 0, rest = pos, phys = pos;
    const sym *s1 = c->rank > 1 ? graph_sym(g, c->dims[1]) : NULL;
    bool jagged = s1 && s1->kind == SYM_RAGGED;
    int first = jagged ? 2 : 0;
    int64_t inner = 1;
    for (int k = first; k < c->rank; k++) inner *= (ext[k] = bind_dim_value(b, c->dims[k]));
    if (jagged) {
        int32_t cls = sym_root(g, dim_sym(c->dims[1]));
        const int64_t *loff = b->loff[cls];
        if (!loff || inner <= 0) { /* trusted device offsets: the position is all there is */
            f.rank = 1;
            f.at[0] = pos;
            return index_fault_fail(b->ctx, &f);
        }
        row = pos / inner;
        rest = pos % inner;
        item = item_at_or_before(loff, b->cbatch[cls], row);
        f.at[0] = item;
        f.at[1] = row - loff[item];
        const rag_bind *rg = &b->rag[dim_sym(c->dims[1])];
        phys = rg->off && !rg->dev ? (rg->off[item] + f.at[1]) * inner + rest : -1;
    } else {
        for (int k = 0; k < c->rank; k++) ext[k] = bind_dim_value(b, c->dims[k]);
    }
    for (int k = c->rank - 1; k >= first; k--) {
        f.at[k] = ext[k] ? rest % ext[k] : 0;
        rest = ext[k] ? rest / ext[k] : 0;
    }
    item = f.at[0];
    const in_bind *ib = c->input >= 0 ? &b->in[c->input] : NULL;
    if (ib && !ib->dev && ib->data && phys >= 0 && phys < ib->numel) {
        f.has_value = true;
        f.value = c->dtype == RJ_I32 ? ((const int32_t *)ib->data)[phys] : ((const int64_t *)ib->data)[phys];
    }
    const sym *sb = graph_sym(g, c->bound);
    if (sb && sb->kind == SYM_RAGGED) {
        int32_t cls = sym_root(g, dim_sym(c->bound));
        f.per_item = true;
        if (b->loff[cls] && item >= 0 && item < b->cbatch[cls]) f.bound = b->loff[cls][item + 1] - b->loff[cls][item];
    } else {
        f.bound = bind_dim_value(b, c->bound);
    }
    return index_fault_fail(b->ctx, &f);
}

rj_status index_verdict(rj_bind *b, const lprog *lp, const int64_t *words) {
    for (int32_t i = 0; i < lp->nchecks; i++)
        if (words[i] != INT64_MAX) return fault_at(b, &lp->checks[i], words[i]);
    return RJ_OK;
}
