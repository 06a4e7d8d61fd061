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
 *
 * The device check of offsets (offsets bound on the device with their facts, checked by a
 * kernel before the run's kernels) is judged here as well, into the message a host check of
 * the same offsets gives. Both verdicts read the run's view and its plan (the symbols of each
 * check, resolved when the program was compiled) and nothing above them.
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
                    f->op, at, f->what, val, range);
}

/* The fault at packed logical position pos of check ci's index tensor. */
static rj_status fault_at(const run_view *v, int32_t ci, int64_t pos) {
    const lcheck *c = &v->lp->checks[ci];
    const plan_check *pc = &v->plan->check[ci];
    index_fault f = {.op = pc->op, .what = c->what, .rank = c->rank, .bound = -1};
    int64_t ext[RJ_MAX_RANK], item = 0, row = 0, rest = pos, phys = pos;
    int first = pc->jagged ? 2 : 0;
    int64_t inner = 1;
    for (int k = first; k < c->rank; k++) inner *= (ext[k] = run_dim(v, c->dims[k]));
    if (pc->jagged) {
        const int64_t *loff = v->cls[pc->cls].loff;
        if (!loff || inner <= 0) { /* trusted device offsets: the position is all there is */
            f.rank = 1;
            f.at[0] = pos;
            return index_fault_fail(v->ctx, &f);
        }
        row = pos / inner;
        rest = pos % inner;
        item = item_at_or_before(loff, v->cls[pc->cls].batch, row);
        f.at[0] = item;
        f.at[1] = row - loff[item];
        const run_sym *rg = &v->sym[pc->rsym];
        phys = rg->off && !rg->dev ? (rg->off[item] + f.at[1]) * inner + rest : -1;
    } else {
        for (int k = 0; k < c->rank; k++) ext[k] = run_dim(v, c->dims[k]);
    }
    for (int k = c->rank - 1; k >= first; k--) {
        f.at[k] = ext[k] ? rest % ext[k] : 0;
        rest = ext[k] ? rest / ext[k] : 0;
    }
    item = f.at[0];
    const run_in *ib = c->input >= 0 ? &v->in[c->input] : NULL;
    if (ib && !ib->dev && ib->data && phys >= 0 && phys < ib->numel) {
        f.has_value = true;
        f.value = c->dtype == RJ_I32 ? ((const int32_t *)ib->data)[phys] : ((const int64_t *)ib->data)[phys];
    }
    if (pc->bound_ragged) {
        const run_class *cl = &v->cls[pc->bound_cls];
        f.per_item = true;
        if (cl->loff && item >= 0 && item < cl->batch) f.bound = cl->loff[item + 1] - cl->loff[item];
    } else {
        f.bound = run_dim(v, c->bound);
    }
    return index_fault_fail(v->ctx, &f);
}

rj_status index_verdict(const run_view *v, const int64_t *words) {
    for (int32_t i = 0; i < v->lp->nchecks; i++)
        if (words[i] != INT64_MAX) return fault_at(v, i, words[i]);
    return RJ_OK;
}

rj_status offsets_verdict(const run_view *v, const uint32_t *words) {
    if (words[0] == 0xffffffffu) return RJ_OK;
    for (int32_t s = 0; s < v->plan->nsym; s++) {
        uint32_t w = words[1 + s];
        if (w == 0xffffffffu) continue;
        const char *name = v->plan->sym[s].name;
        long long item = (long long)(w / 8);
        const run_sym *r = &v->sym[s];
        switch (w % 8) {
        case 1:
            return ctx_fail(v->ctx, RJ_ERR_OFFSETS_START, "ragged symbol %s: the device offsets do not start at 0 "
                            "(checked on the device)", name);
        case 2:
            return ctx_fail(v->ctx, RJ_ERR_OFFSETS_ORDER, "ragged symbol %s: the device offsets decrease at item %lld "
                            "(offsets[%lld] < offsets[%lld]; checked on the device)", name, item, item + 1, item);
        case 3:
            return ctx_fail(v->ctx, RJ_ERR_OFFSETS_END, "ragged symbol %s: the device offsets end at another row than "
                            "the %lld rows given by rj_bind_offsets_info "
                            "(offsets[%lld]; checked on the device)", name,
                            (long long)r->info_rows, item);
        case 4:
            return ctx_fail(v->ctx, RJ_ERR_SIZE, "ragged symbol %s: item %lld is longer than the longest item given by "
                            "rj_bind_offsets_info "
                            "(%lld; checked on the device)", name, item, (long long)r->info_maxlen);
        default:
            return ctx_fail(v->ctx, RJ_ERR_SAME, "ragged symbol %s: item %lld has another length than in the symbols "
                            "declared same with it (checked on the device)", name, item);
        }
    }
    return ctx_fail(v->ctx, RJ_ERR_INTERNAL, "the device check of offsets failed without naming a symbol");
}

rj_status device_verdict(const run_view *v, device_check which, uint64_t addr, device_read_fn read, void *ud) {
    size_t bytes = which == CHECK_OFFSETS ? ((size_t)v->plan->nsym + 1) * sizeof(uint32_t)
                                          : (size_t)v->lp->nchecks * sizeof(int64_t);
    void *w = mem_alloc(v->ctx, bytes ? bytes : 1);
    if (!w) return RJ_ERR_NOMEM;
    rj_status s = read(ud, w, addr, bytes);
    if (!s) s = which == CHECK_OFFSETS ? offsets_verdict(v, w) : index_verdict(v, w);
    mem_free(v->ctx, w, bytes ? bytes : 1);
    return s;
}
