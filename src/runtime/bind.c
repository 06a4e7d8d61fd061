/*
 * bind.c — bindings: what the caller bound for a run, and the validation that resolves a run.
 *
 * Binding calls only record pointers and counts (they check what can be checked without
 * reading the data: ids, NULLs, kinds). bind_prepare, called by rj_program_run, validates in
 * the order a user would fix problems:
 *   1. every input some output depends on, and every ragged symbol the graph uses, is bound (an
 *      input no output depends on may stay unbound: then its symbols are not required either);
 *   2. offsets are well formed (offsets_check; every bound symbol's, used or not), batch sizes
 *      agree per parent dim;
 *   3. symbols declared `same` have equal lengths (all bound members of a class, whichever
 *      of them are bound);
 *   4. dense sizes are bound or solvable from input element counts; max(j) sizes computed;
 *   5. every input buffer has exactly the elements its shape needs (for jagged inputs: the
 *      last offset equals its row count);
 *   6. pad lengths and unpad sources are long enough for the longest row;
 *   7. outputs: caller memory is large enough, or ragjit memory is (re)allocated.
 * Each failure has its own status and names the input or symbol and the first bad index.
 */
#include <stdio.h>
#include <string.h>

#include "launch.h"

static void mark_dims(const node *n, uint8_t *used) {
    for (int k = 0; k < n->rank; k++)
        if (dim_is_sym(n->dims[k])) used[dim_sym(n->dims[k])] = 1;
}

/* Symbols appearing in the shape of a node some output depends on: only those need
 * bindings. An input no output depends on is idle: a program may declare one (the text
 * format warns) and run without it; its symbols are marked when it is bound after all. */
static rj_status mark_used(rj_ctx *ctx, const rj_graph *g, uint8_t *used, uint8_t *idle) {
    uint8_t *live = mem_alloc(ctx, (size_t)(g->n ? g->n : 1));
    if (!live) return RJ_ERR_NOMEM;
    graph_live(g, live);
    for (int32_t i = 0; i < g->n; i++)
        if (live[i]) mark_dims(&g->nodes[i], used);
    for (int32_t i = 0; i < g->ninputs; i++) idle[i] = !live[g->inputs[i]];
    mem_free(ctx, live, (size_t)(g->n ? g->n : 1));
    return RJ_OK;
}

rj_bind *rj_bind_new(rj_program *p) {
    if (!p) return NULL;
    rj_ctx *ctx = p->ctx;
    const rj_graph *g = p->g;
    rj_bind *b = mem_zalloc(ctx, sizeof *b);
    if (!b) return NULL;
    b->ctx = ctx;
    b->prog_id = p->id;
    b->be = p->be;
    b->art = p->art;
    artifact_retain(ctx, b->art);
    b->g = g;
    b->nsym = g->nsym;
    size_t ns = (size_t)(g->nsym ? g->nsym : 1);
    if (!(b->size = mem_zalloc(ctx, ns * sizeof(int64_t))) ||
        !(b->size_set = mem_zalloc(ctx, ns)) ||
        !(b->rag = mem_zalloc(ctx, ns * sizeof(rag_bind))) ||
        !(b->val = mem_zalloc(ctx, ns * sizeof(int64_t))) ||
        !(b->rows = mem_zalloc(ctx, ns * sizeof(int64_t))) ||
        !(b->used = mem_zalloc(ctx, ns)) ||
        !(b->loff = mem_zalloc(ctx, ns * sizeof(int64_t *))) ||
        !(b->cbatch = mem_zalloc(ctx, ns * sizeof(int64_t))) ||
        !(b->crows = mem_zalloc(ctx, ns * sizeof(int64_t))) ||
        !(b->loff_own = mem_zalloc(ctx, ns * sizeof(int64_t *))) ||
        !(b->loff_cap = mem_zalloc(ctx, ns * sizeof(int64_t))) ||
        !(b->sqoff = mem_zalloc(ctx, ns * sizeof(int64_t *))) ||
        !(b->sq_cap = mem_zalloc(ctx, ns * sizeof(int64_t))) || !(b->paired = mem_zalloc(ctx, ns)) ||
        !(b->in = mem_zalloc(ctx, (size_t)(g->ninputs ? g->ninputs : 1) * sizeof(in_bind))) ||
        !(b->idle = mem_zalloc(ctx, (size_t)(g->ninputs ? g->ninputs : 1))) ||
        !(b->out = mem_zalloc(ctx, (size_t)(g->noutputs ? g->noutputs : 1) * sizeof(out_bind)))) {
        rj_bind_free(b);
        return NULL;
    }
    for (int32_t i = 0; i < g->n; i++)
        if (node_is_pair(g, &g->nodes[i])) {
            b->paired[sym_root(g, dim_sym(g->nodes[i].dims[1]))] = 1;
            b->pairs = true;
        }
    if (mark_used(ctx, g, b->used, b->idle)) {
        rj_bind_free(b);
        return NULL;
    }
    return b;
}

void rj_bind_free(rj_bind *b) {
    if (!b) return;
    rj_ctx *ctx = b->ctx;
    const rj_graph *g = b->g;
    size_t ns = (size_t)(b->nsym ? b->nsym : 1);
    if (b->out)
        for (int32_t i = 0; i < g->noutputs; i++) {
            mem_free(ctx, b->out[i].own, b->out[i].own_bytes);
            if (b->out[i].down && b->be && b->be->dev_free) b->be->dev_free(ctx, b->out[i].down);
        }
    if (b->rag)
        for (int32_t s = 0; s < b->nsym; s++) mem_free(ctx, b->rag[s].hcopy, b->rag[s].hcopy_bytes);
    if (b->be && b->be->wait && b->pending) {
        double ms;
        b->be->wait(b, &ms); /* nothing is freed under running kernels */
    }
    for (size_t i = 0; i < b->ndmem; i++) {
        if (b->dmem[i].addr && b->be && b->be->dev_free) b->be->dev_free(ctx, b->dmem[i].addr);
        mem_free(ctx, b->dmem[i].shadow, b->dmem[i].shadow_bytes);
    }
    mem_free(ctx, b->dmem, sizeof(dev_block) * b->ndmem);
    if (b->be && b->be->bind_release) b->be->bind_release(b);
    mem_free(ctx, b->size, ns * sizeof(int64_t));
    mem_free(ctx, b->size_set, ns);
    mem_free(ctx, b->rag, ns * sizeof(rag_bind));
    mem_free(ctx, b->val, ns * sizeof(int64_t));
    mem_free(ctx, b->rows, ns * sizeof(int64_t));
    mem_free(ctx, b->used, ns);
    if (b->loff_own && b->loff_cap)
        for (size_t s = 0; s < ns; s++) mem_free(ctx, b->loff_own[s], sizeof(int64_t) * (size_t)b->loff_cap[s]);
    mem_free(ctx, b->loff, ns * sizeof(int64_t *));
    mem_free(ctx, b->cbatch, ns * sizeof(int64_t));
    mem_free(ctx, b->crows, ns * sizeof(int64_t));
    mem_free(ctx, b->loff_own, ns * sizeof(int64_t *));
    mem_free(ctx, b->loff_cap, ns * sizeof(int64_t));
    if (b->sqoff && b->sq_cap)
        for (size_t s = 0; s < ns; s++) mem_free(ctx, b->sqoff[s], sizeof(int64_t) * (size_t)b->sq_cap[s]);
    mem_free(ctx, b->sqoff, ns * sizeof(int64_t *));
    mem_free(ctx, b->sq_cap, ns * sizeof(int64_t));
    mem_free(ctx, b->paired, ns);
    mem_free(ctx, b->in, (size_t)(g->ninputs ? g->ninputs : 1) * sizeof(in_bind));
    mem_free(ctx, b->idle, (size_t)(g->ninputs ? g->ninputs : 1));
    mem_free(ctx, b->out, (size_t)(g->noutputs ? g->noutputs : 1) * sizeof(out_bind));
    host_mem_free(ctx, b->mem);
    artifact_release(ctx, b->art);
    mem_free(ctx, b, sizeof *b);
}

static const sym *bound_sym(rj_bind *b, rj_dim d, const char *call) {
    const sym *s = graph_sym(b->g, d);
    if (!s) ctx_fail(b->ctx, RJ_ERR_ARG, "%s: not a symbol of the program's graph", call);
    return s;
}

rj_status rj_bind_size(rj_bind *b, rj_dim d, int64_t value) {
    if (!b) return RJ_ERR_ARG;
    const sym *s = bound_sym(b, d, "rj_bind_size");
    if (!s) return RJ_ERR_ARG;
    if (s->kind != SYM_DENSE)
        return ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_size: %s is not a dense size%s", s->name,
                        s->kind == SYM_RAGGED ? " (bind offsets for a ragged symbol)" : "");
    if (value < 0)
        return ctx_fail(b->ctx, RJ_ERR_SIZE, "rj_bind_size: %s = %lld is negative", s->name,
                        (long long)value);
    b->size[dim_sym(d)] = value;
    b->size_set[dim_sym(d)] = 1;
    b->prepared = false;
    return RJ_OK;
}

rj_status rj_bind_offsets(rj_bind *b, rj_dim d, int64_t batch, const int64_t *offsets,
                          const int64_t *lengths) {
    if (!b) return RJ_ERR_ARG;
    const sym *s = bound_sym(b, d, "rj_bind_offsets");
    if (!s) return RJ_ERR_ARG;
    if (s->kind != SYM_RAGGED)
        return ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_offsets: %s is not a ragged symbol",
                        s->name);
    if (!offsets) return ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_offsets: %s: offsets is NULL",
                                  s->name);
    if (batch < 0)
        return ctx_fail(b->ctx, RJ_ERR_BATCH, "rj_bind_offsets: %s: batch %lld is negative",
                        s->name, (long long)batch);
    rag_bind *r = &b->rag[dim_sym(d)];
    *r = (rag_bind){.off = offsets, .len = lengths, .batch = batch, .set = true, .hcopy = r->hcopy,
                    .hcopy_bytes = r->hcopy_bytes};
    b->prepared = false;
    return RJ_OK;
}

/* ---- device memory ----------------------------------------------------------------------- */

static int input_index(rj_bind *b, rj_node n, const char *call);
static int output_index(rj_bind *b, rj_node n, const char *call);

static rj_status need_device(rj_bind *b, const char *call) {
    if (b->be && b->be->dev_read) return RJ_OK;
    return ctx_fail(b->ctx, RJ_ERR_UNSUPPORTED, "%s: the %s target has no device memory (bind host "
                    "memory, or compile for cuda or opencl)", call, b->be ? b->be->name : "program's");
}

rj_status rj_bind_offsets_device(rj_bind *b, rj_dim d, int64_t batch, rj_devptr offsets, rj_devptr lengths) {
    if (!b) return RJ_ERR_ARG;
    rj_status st = need_device(b, "rj_bind_offsets_device");
    if (st) return st;
    const sym *s = bound_sym(b, d, "rj_bind_offsets_device");
    if (!s) return RJ_ERR_ARG;
    if (s->kind != SYM_RAGGED)
        return ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_offsets_device: %s is not a ragged symbol", s->name);
    if (!offsets) return ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_offsets_device: %s: offsets is 0", s->name);
    if (batch < 0 || batch > ((int64_t)1 << 40))
        return ctx_fail(b->ctx, RJ_ERR_BATCH, "rj_bind_offsets_device: %s: batch %lld is out of range "
                        "(0 .. 2^40)", s->name, (long long)batch);
    rag_bind *r = &b->rag[dim_sym(d)];
    *r = (rag_bind){.batch = batch, .set = true, .dev = true, .doff = offsets, .dlen = lengths,
                    .hcopy = r->hcopy, .hcopy_bytes = r->hcopy_bytes, .info_rows = -1, .info_maxlen = -1};
    b->has_dev = true;
    b->prepared = false;
    return RJ_OK;
}

rj_status rj_bind_offsets_info(rj_bind *b, rj_dim d, int64_t rows, int64_t maxlen) {
    if (!b) return RJ_ERR_ARG;
    const sym *s = bound_sym(b, d, "rj_bind_offsets_info");
    if (!s) return RJ_ERR_ARG;
    rag_bind *r = &b->rag[dim_sym(d)];
    if (s->kind != SYM_RAGGED || !r->set || !r->dev)
        return ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_offsets_info: %s has no device offsets bound "
                        "(rj_bind_offsets_device first)", s->name);
    if (rows < 0 || maxlen < -1 || maxlen > rows || (r->batch == 0 && rows > 0))
        return ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_offsets_info: %s: rows %lld and longest item %lld "
                        "cannot describe %lld items", s->name, (long long)rows, (long long)maxlen,
                        (long long)r->batch);
    r->info_rows = rows;
    r->info_maxlen = maxlen;
    b->prepared = false;
    return RJ_OK;
}

rj_status rj_bind_trust_offsets(rj_bind *b, bool trusted) {
    if (!b) return RJ_ERR_ARG;
    rj_status st = need_device(b, "rj_bind_trust_offsets");
    if (st) return st;
    b->trusted = trusted;
    b->prepared = false;
    return RJ_OK;
}

rj_status bind_device_verdict(rj_bind *b, device_check which, uint64_t addr, device_read_fn read, void *ud) {
    const lprog *lp = &b->art->comp.lp;
    size_t bytes = which == CHECK_OFFSETS ? ((size_t)b->nsym + 1) * sizeof(uint32_t)
                                          : (size_t)lp->nchecks * sizeof(int64_t);
    void *w = mem_alloc(b->ctx, bytes ? bytes : 1);
    if (!w) return RJ_ERR_NOMEM;
    rj_status s = read(ud, w, addr, bytes);
    if (!s) s = which == CHECK_OFFSETS ? bind_offsets_verdict(b, w) : index_verdict(b, lp, w);
    mem_free(b->ctx, w, bytes ? bytes : 1);
    return s;
}

/* After rj_bind_wait: the binding's own device read, on its stream. */
static rj_status wait_read(void *ud, void *dst, uint64_t addr, size_t bytes) {
    rj_bind *b = ud;
    return b->be->dev_read(b->ctx, b->stream, dst, addr, bytes);
}

rj_status rj_bind_wait(rj_bind *b) {
    if (!b) return RJ_ERR_ARG;
    if (!b->pending) return RJ_OK;
    double ms = -1;
    rj_status s = b->be->wait(b, &ms);
    b->pending = false;
    if (!s) b->stats.kernel_ms = ms;
    /* the run's device check of offsets (the kernels did nothing if it failed), its index checks */
    if (!s && b->err_addr) s = bind_device_verdict(b, CHECK_OFFSETS, b->err_addr, wait_read, b);
    if (!s && b->checks_addr) s = bind_device_verdict(b, CHECK_INDICES, b->checks_addr, wait_read, b);
    if (s && (b->err_addr || b->checks_addr)) b->prepared = false;
    b->err_addr = b->checks_addr = 0;
    return s;
}

rj_status rj_bind_input_device(rj_bind *b, rj_node n, rj_devptr data, int64_t numel) {
    if (!b) return RJ_ERR_ARG;
    rj_status st = need_device(b, "rj_bind_input_device");
    if (st) return st;
    int i = input_index(b, n, "rj_bind_input_device");
    if (i < 0) return RJ_ERR_ARG;
    const char *name = b->g->nodes[n].name;
    if (numel < 0)
        return ctx_fail(b->ctx, RJ_ERR_SIZE, "rj_bind_input_device: %s: numel %lld is negative", name,
                        (long long)numel);
    if (!data && numel > 0) return ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_input_device: %s: data is 0", name);
    b->in[i] = (in_bind){.numel = numel, .set = true, .dev = true, .ddata = data};
    b->has_dev = true;
    b->prepared = false;
    return RJ_OK;
}

rj_status rj_bind_output_device(rj_bind *b, rj_node n, rj_devptr data, int64_t capacity) {
    if (!b) return RJ_ERR_ARG;
    rj_status st = need_device(b, "rj_bind_output_device");
    if (st) return st;
    int i = output_index(b, n, "rj_bind_output_device");
    if (i < 0) return RJ_ERR_ARG;
    if (capacity < 0 || (!data && capacity > 0))
        return ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_output_device: %s: %s", b->g->outputs[i].name,
                        capacity < 0 ? "negative capacity" : "data is 0 (ragjit allocates: capacity 0)");
    out_bind *o = &b->out[i];
    o->dev = true;
    o->duser = data;
    o->user = NULL;
    o->cap = data ? capacity : 0;
    b->has_dev = true;
    b->prepared = false;
    return RJ_OK;
}

rj_status rj_bind_result_device(rj_bind *b, rj_node n, rj_devptr *data, int64_t *numel) {
    if (!b) return RJ_ERR_ARG;
    int i = output_index(b, n, "rj_bind_result_device");
    if (i < 0) return RJ_ERR_ARG;
    const out_bind *o = &b->out[i];
    if (!b->prepared)
        return ctx_fail(b->ctx, RJ_ERR_UNBOUND, "rj_bind_result_device: %s: the program has not run "
                        "successfully with this binding", b->g->outputs[i].name);
    if (!o->dev)
        return ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_result_device: %s is in host memory (rj_bind_result)",
                        b->g->outputs[i].name);
    if (data) *data = o->ddata;
    if (numel) *numel = o->numel;
    return RJ_OK;
}

rj_status rj_bind_stream(rj_bind *b, void *stream) {
    if (!b) return RJ_ERR_ARG;
    rj_status st = need_device(b, "rj_bind_stream");
    if (st) return st;
    if (stream != b->stream && (st = rj_bind_wait(b))) return st; /* its memory, on another stream */
    b->stream = stream;
    return RJ_OK;
}

/* Device offsets read back for validation and planning (one copy each of offsets, lengths). */
static rj_status fetch_offsets(rj_bind *b) {
    for (int32_t s = 0; s < b->nsym; s++) {
        rag_bind *r = &b->rag[s];
        if (!r->set || !r->dev) continue;
        r->devcheck = false;
        if (b->trusted && !r->dlen && r->info_rows < 0)
            return ctx_fail(b->ctx, RJ_ERR_ARG, "trusted device offsets of %s need their rows given by "
                            "rj_bind_offsets_info", b->g->syms[s].name);
        bool maxlen_used = false; /* a size max(j) of this symbol shapes something */
        for (int32_t m = 0; m < b->nsym; m++)
            maxlen_used |= b->g->syms[m].kind == SYM_MAXLEN && b->g->syms[m].parent == s && b->used[m];
        if (b->trusted && !r->dlen && maxlen_used && r->info_maxlen < 0)
            return ctx_fail(b->ctx, RJ_ERR_ARG, "trusted device offsets of %s need their longest item given by "
                            "rj_bind_offsets_info: max(%s) is a size of the program", b->g->syms[s].name,
                            b->g->syms[s].name);
        /* the device check reports an item in 32 bits (8 item + code): beyond 2^29 items the
         * offsets are read back instead, unless trusted */
        bool checkable = b->trusted || r->batch < ((int64_t)1 << 29);
        if (!r->dlen && r->info_rows >= 0 && (r->info_maxlen >= 0 || !maxlen_used) && checkable) {
            /* the caller's facts stand for the offsets; unless trusted, a kernel checks them on
             * the device (launch.c) */
            r->off = r->len = NULL;
            r->devcheck = !b->trusted;
            continue;
        } /* a view with holes, or offsets without the facts the program needs: read back and
           * checked here */
        size_t n = (size_t)(r->batch + 1) + (r->dlen ? (size_t)r->batch : 0), bytes = n * sizeof(int64_t);
        if (bytes > r->hcopy_bytes) {
            int64_t *h = mem_realloc(b->ctx, r->hcopy, r->hcopy_bytes, bytes);
            if (!h) return RJ_ERR_NOMEM;
            r->hcopy = h;
            r->hcopy_bytes = bytes;
        }
        char what[160];
        snprintf(what, sizeof what, "the device offsets of %s", b->g->syms[s].name);
        rj_status st = b->be->dev_check(b->ctx, r->doff, sizeof(int64_t) * (size_t)(r->batch + 1), true, what);
        if (!st) st = b->be->dev_read(b->ctx, b->stream, r->hcopy, r->doff, sizeof(int64_t) * (size_t)(r->batch + 1));
        if (!st && r->dlen) {
            snprintf(what, sizeof what, "the device lengths of %s", b->g->syms[s].name);
            st = b->be->dev_check(b->ctx, r->dlen, sizeof(int64_t) * (size_t)r->batch, true, what);
            if (!st) st = b->be->dev_read(b->ctx, b->stream, r->hcopy + r->batch + 1, r->dlen,
                                          sizeof(int64_t) * (size_t)r->batch);
        }
        if (st) return st;
        r->off = r->hcopy;
        r->len = r->dlen ? r->hcopy + r->batch + 1 : NULL;
    }
    return RJ_OK;
}

rj_status bind_offsets_verdict(rj_bind *b, const uint32_t *words) {
    if (words[0] == 0xffffffffu) return RJ_OK;
    for (int32_t s = 0; s < b->nsym; s++) {
        uint32_t w = words[1 + s];
        if (w == 0xffffffffu) continue;
        const char *name = b->g->syms[s].name;
        long long item = (long long)(w / 8);
        const rag_bind *r = &b->rag[s];
        switch (w % 8) {
        case 1:
            return ctx_fail(b->ctx, RJ_ERR_OFFSETS_START, "ragged symbol %s: the device offsets do not start at 0 "
                            "(checked on the device)", name);
        case 2:
            return ctx_fail(b->ctx, RJ_ERR_OFFSETS_ORDER, "ragged symbol %s: the device offsets decrease at item %lld "
                            "(offsets[%lld] < offsets[%lld]; checked on the device)", name, item, item + 1, item);
        case 3:
            return ctx_fail(b->ctx, RJ_ERR_OFFSETS_END, "ragged symbol %s: the device offsets end at another row than "
                            "the %lld rows given by rj_bind_offsets_info (offsets[%lld]; checked on the device)", name,
                            (long long)r->info_rows, item);
        case 4:
            return ctx_fail(b->ctx, RJ_ERR_SIZE, "ragged symbol %s: item %lld is longer than the longest item given by "
                            "rj_bind_offsets_info (%lld; checked on the device)", name, item, (long long)r->info_maxlen);
        default:
            return ctx_fail(b->ctx, RJ_ERR_SAME, "ragged symbol %s: item %lld has another length than in the symbols "
                            "declared same with it (checked on the device)", name, item);
        }
    }
    return ctx_fail(b->ctx, RJ_ERR_INTERNAL, "the device check of offsets failed without naming a symbol");
}

/* Every buffer where the binding says it is, as far as the driver can tell, and as large as
 * bound (device memory). */
static rj_status check_memory(rj_bind *b) {
    const rj_graph *g = b->g;
    if (!b->be || !b->be->dev_check) return RJ_OK;
    char what[200];
    for (int32_t i = 0; i < g->ninputs; i++) {
        const in_bind *ib = &b->in[i];
        if (!ib->set) continue; /* idle */
        size_t bytes = (size_t)ib->numel * rj_dtype_size(g->nodes[g->inputs[i]].dtype);
        snprintf(what, sizeof what, "input %s", g->nodes[g->inputs[i]].name);
        rj_status s = ib->dev ? b->be->dev_check(b->ctx, ib->ddata, bytes, true, what)
                              : b->be->dev_check(b->ctx, (uint64_t)(uintptr_t)ib->data, bytes, false, what);
        if (s) return s;
    }
    for (int32_t i = 0; i < g->noutputs; i++) {
        const out_bind *o = &b->out[i];
        snprintf(what, sizeof what, "output %s", g->outputs[i].name);
        size_t bytes = (size_t)o->numel * rj_dtype_size(g->nodes[g->outputs[i].node].dtype);
        rj_status s = RJ_OK;
        if (o->dev && o->duser) s = b->be->dev_check(b->ctx, o->duser, bytes, true, what);
        else if (!o->dev && o->user) s = b->be->dev_check(b->ctx, (uint64_t)(uintptr_t)o->user, bytes, false, what);
        if (s) return s;
    }
    for (int32_t s = 0; s < b->nsym; s++) {
        const rag_bind *r = &b->rag[s];
        if (!r->set || r->dev) continue;
        snprintf(what, sizeof what, "the offsets of %s", g->syms[s].name);
        rj_status st = b->be->dev_check(b->ctx, (uint64_t)(uintptr_t)r->off, 0, false, what);
        if (st) return st;
    }
    return RJ_OK;
}

static int input_index(rj_bind *b, rj_node n, const char *call) {
    for (int32_t i = 0; i < b->g->ninputs; i++)
        if (b->g->inputs[i] == n) return i;
    ctx_fail(b->ctx, RJ_ERR_ARG, "%s: node %d is not an input of the program", call, (int)n);
    return -1;
}

static int output_index(rj_bind *b, rj_node n, const char *call) {
    for (int32_t i = 0; i < b->g->noutputs; i++)
        if (b->g->outputs[i].node == n) return i;
    ctx_fail(b->ctx, RJ_ERR_ARG, "%s: node %d is not an output of the program", call, (int)n);
    return -1;
}

rj_status rj_bind_input(rj_bind *b, rj_node n, const void *data, int64_t numel) {
    if (!b) return RJ_ERR_ARG;
    int i = input_index(b, n, "rj_bind_input");
    if (i < 0) return RJ_ERR_ARG;
    const char *name = b->g->nodes[n].name;
    if (numel < 0)
        return ctx_fail(b->ctx, RJ_ERR_SIZE, "rj_bind_input: %s: numel %lld is negative", name,
                        (long long)numel);
    if (!data && numel > 0)
        return ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_input: %s: data is NULL", name);
    b->in[i] = (in_bind){.data = data, .numel = numel, .set = true};
    b->prepared = false;
    return RJ_OK;
}

rj_status rj_bind_output(rj_bind *b, rj_node n, void *data, int64_t capacity) {
    if (!b) return RJ_ERR_ARG;
    int i = output_index(b, n, "rj_bind_output");
    if (i < 0) return RJ_ERR_ARG;
    if (capacity < 0 || (!data && capacity > 0))
        return ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_output: %s: %s", b->g->outputs[i].name,
                        capacity < 0 ? "negative capacity" : "data is NULL");
    b->out[i].user = data;
    b->out[i].cap = data ? capacity : 0;
    b->out[i].dev = false;
    b->out[i].duser = 0;
    b->prepared = false;
    return RJ_OK;
}

rj_status rj_bind_tensor(rj_bind *b, rj_node n, const rj_tensor *t) {
    if (!b) return RJ_ERR_ARG;
    if (!t) return ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_tensor: tensor is NULL");
    int i = input_index(b, n, "rj_bind_tensor");
    if (i < 0) return RJ_ERR_ARG;
    const node *nd = &b->g->nodes[n];
    const rj_tensor_info *ti = &t->info;
    int rp = dim_ragged_pos(b->g, nd);
    if (ti->ragged_dims == 2 || node_is_pair(b->g, nd))
        return ctx_fail(b->ctx, RJ_ERR_UNSUPPORTED, "rj_bind_tensor: %s: a tensor with two ragged dims is bound with "
                        "rj_bind_input (its blocks, len_b x len_b rows an item)", nd->name);
    if (ti->dtype != nd->dtype || ti->rank != nd->rank || (rp >= 0) != (ti->ragged_dim >= 0))
        return ctx_fail(b->ctx, RJ_ERR_SHAPE, "rj_bind_tensor: %s is %s%s[rank %d] but the "
                        "tensor is %s%s[rank %d]", nd->name, rp >= 0 ? "jagged " : "",
                        rj_dtype_name(nd->dtype), nd->rank, ti->ragged_dim >= 0 ? "jagged " : "",
                        rj_dtype_name(ti->dtype), ti->rank);
    int64_t numel = ti->rows;
    if (rp >= 0) {
        int64_t inner = 1;
        for (int d = 2; d < ti->rank; d++) inner *= ti->shape[d];
        numel = ti->rows * inner;
        rj_dim j = nd->dims[rp];
        rag_bind *r = &b->rag[dim_sym(j)];
        if (r->set && (r->off != ti->offsets || r->len != ti->lengths)) {
            /* another tensor bound this symbol: they must address rows identically */
            bool same = r->batch == ti->shape[0] && (!r->len) == (!ti->lengths);
            for (int64_t k = 0; same && k <= r->batch; k++)
                same = r->off[k] == ti->offsets[k] && (k == r->batch || !r->len ||
                                                        r->len[k] == ti->lengths[k]);
            if (!same)
                return ctx_fail(b->ctx, RJ_ERR_SAME, "rj_bind_tensor: %s: its offsets differ "
                                "from those already bound to %s", nd->name,
                                graph_sym(b->g, j)->name);
        } else {
            rj_status s = rj_bind_offsets(b, j, ti->shape[0], ti->offsets, ti->lengths);
            if (s) return s;
        }
    }
    return rj_bind_input(b, n, ti->values, numel);
}

/* ---- validation -------------------------------------------------------------------------- */

int64_t bind_dim_value(const rj_bind *b, rj_dim d) {
    return d >= 0 ? d : b->val[dim_sym(d)];
}

/* Number of elements of node n in this run: rows x inner for jagged, the product for dense.
 * By NumPy's rule (util.h), the dims of an empty tensor must fit as well, so that every
 * partial product the backends compute fits. */
static rj_status node_numel(rj_bind *b, const node *n, const char *what, int64_t *out) {
    const rj_graph *g = b->g;
    int rp = dim_ragged_pos(g, n), nf = 0;
    int64_t fact[RJ_MAX_RANK];
    if (node_is_pair(g, n)) { /* the class's blocks of len_b x len_b rows, then the inner dims */
        int32_t c = sym_root(g, dim_sym(n->dims[1]));
        fact[nf++] = b->sqoff[c] ? b->sqoff[c][b->cbatch[c]] : 0;
        for (int k = 3; k < n->rank; k++) fact[nf++] = bind_dim_value(b, n->dims[k]);
        if (!shape_count(nf, fact, out, NULL))
            return ctx_fail(b->ctx, RJ_ERR_OVERFLOW, "%s: the element count overflows", what);
        return RJ_OK;
    }
    for (int k = 0; k < n->rank; k++) {
        if (k == rp) fact[nf++] = b->rows[dim_sym(n->dims[k])];
        else if (k != rp - 1) fact[nf++] = bind_dim_value(b, n->dims[k]); /* B: in the rows */
    }
    if (!shape_count(nf, fact, out, NULL))
        return ctx_fail(b->ctx, RJ_ERR_OVERFLOW, "%s: the element count overflows", what);
    return RJ_OK;
}

static rj_status check_ragged(rj_bind *b) {
    const rj_graph *g = b->g;
    rj_ctx *ctx = b->ctx;
    for (int32_t s = 0; s < g->nsym; s++) {
        const sym *sy = &g->syms[s];
        if (sy->kind != SYM_RAGGED) continue;
        rag_bind *r = &b->rag[s];
        if (!r->set) {
            if (!b->used[s]) continue;
            return ctx_fail(ctx, RJ_ERR_UNBOUND, "ragged symbol %s has no offsets bound "
                            "(rj_bind_offsets or rj_bind_tensor)", sy->name);
        }
        /* bound offsets are checked even where no tensor uses the symbol: a `same` class takes
         * its row layout from any bound member (class_offsets, the interpreter) */
        char what[200];
        snprintf(what, sizeof what, "ragged symbol %s", sy->name);
        rj_status st = RJ_OK;
        if (r->dev && !r->off) { /* rows and the longest item as the caller says */
            b->rows[s] = r->info_rows;
            b->val[s] = r->info_maxlen >= 0 ? r->info_maxlen : r->info_rows;
        } else {
            st = offsets_check(ctx, what, r->batch, r->off, r->len, &b->rows[s], &b->val[s]);
        }
        if (st) return st;
        if (!b->used[s]) continue;
        int32_t p = sy->parent;
        if (b->size_set[p] && b->size[p] != r->batch)
            return ctx_fail(ctx, RJ_ERR_BATCH, "ragged symbol %s has %lld offsets (batch %lld) "
                            "but %s is bound to %lld", sy->name, (long long)(r->batch + 1),
                            (long long)r->batch, g->syms[p].name, (long long)b->size[p]);
        for (int32_t o = 0; o < s; o++) {
            const sym *so = &g->syms[o];
            if (so->kind == SYM_RAGGED && so->parent == p && b->rag[o].set &&
                b->used[o] && b->rag[o].batch != r->batch)
                return ctx_fail(ctx, RJ_ERR_BATCH, "ragged symbols %s and %s vary over the same "
                                "dim %s but have batch sizes %lld and %lld", so->name, sy->name,
                                g->syms[p].name, (long long)b->rag[o].batch,
                                (long long)r->batch);
        }
        b->val[p] = r->batch;
    }
    /* `same` symbols: every bound member has the lengths of the class's first bound member,
     * row by row (the class's root may be bound to nothing when no tensor uses it) */
    for (int32_t s = 0; s < g->nsym; s++) {
        if (g->syms[s].kind != SYM_RAGGED || !b->rag[s].set) continue;
        int32_t root = sym_root(g, s), ref = 0;
        while (!b->rag[ref].set || g->syms[ref].kind != SYM_RAGGED || sym_root(g, ref) != root)
            ref++;
        if (ref == s) continue;
        const rag_bind *x = &b->rag[ref], *y = &b->rag[s];
        if (x->batch != y->batch)
            return ctx_fail(ctx, RJ_ERR_SAME, "%s and %s are declared same but have batch sizes "
                            "%lld and %lld", g->syms[ref].name, g->syms[s].name,
                            (long long)x->batch, (long long)y->batch);
        if (!x->off || !y->off) { /* trusted device offsets: their facts must agree */
            if (b->rows[ref] != b->rows[s])
                return ctx_fail(ctx, RJ_ERR_SAME, "%s and %s are declared same but have %lld and %lld rows",
                                g->syms[ref].name, g->syms[s].name, (long long)b->rows[ref], (long long)b->rows[s]);
            continue;
        }
        for (int64_t k = 0; k < x->batch; k++) {
            int64_t nx = row_len(x->off, x->len, k), ny = row_len(y->off, y->len, k);
            if (nx != ny)
                return ctx_fail(ctx, RJ_ERR_SAME, "%s and %s are declared same but item %lld has "
                                "length %lld vs %lld", g->syms[ref].name, g->syms[s].name,
                                (long long)k, (long long)nx, (long long)ny);
        }
    }
    return RJ_OK;
}

/* Dense sizes: bound ones, then ones solvable from an input's element count (a dense size
 * appearing exactly once among otherwise known dims of an input). */
static rj_status resolve_dense(rj_bind *b, uint8_t *known) {
    const rj_graph *g = b->g;
    for (int32_t s = 0; s < g->nsym; s++) {
        const sym *sy = &g->syms[s];
        if (sy->kind == SYM_RAGGED && b->rag[s].set) known[s] = known[sy->parent] = 1;
        if (sy->kind == SYM_DENSE && b->size_set[s] && !known[s]) {
            b->val[s] = b->size[s];
            known[s] = 1;
        }
        if (sy->kind == SYM_MAXLEN && b->rag[sy->parent].set) {
            b->val[s] = b->val[sy->parent];
            known[s] = 1;
        }
    }
    for (bool progress = true; progress;) {
        progress = false;
        for (int32_t i = 0; i < g->ninputs; i++) {
            const node *n = &g->nodes[g->inputs[i]];
            if (!b->in[i].set || node_is_pair(g, n)) continue; /* sizes come from elsewhere for blocks */
            int rp = dim_ragged_pos(g, n), unknown = -1, nunknown = 0;
            int64_t c = 1;
            bool ok = true;
            for (int k = 0; k < n->rank && ok; k++) {
                if (k == rp - 1) continue;
                rj_dim d = n->dims[k];
                int64_t v;
                if (k == rp) v = b->rows[dim_sym(d)];
                else if (d >= 0) v = d;
                else if (known[dim_sym(d)]) v = b->val[dim_sym(d)];
                else {
                    if (unknown >= 0 && n->dims[unknown] == d) ok = false;
                    unknown = k;
                    nunknown++;
                    continue;
                }
                ok = mul_i64(c, v, &c);
            }
            if (!ok || nunknown != 1 || c == 0 || b->in[i].numel % c) continue;
            int32_t s = dim_sym(n->dims[unknown]);
            b->val[s] = b->in[i].numel / c;
            known[s] = 1;
            progress = true;
        }
    }
    for (int32_t s = 0; s < g->nsym; s++)
        if (!known[s] && g->syms[s].kind == SYM_DENSE && b->used[s])
            return ctx_fail(b->ctx, RJ_ERR_UNBOUND, "dense size %s is not bound (rj_bind_size) "
                            "and cannot be derived from the inputs", g->syms[s].name);
    return RJ_OK;
}

static rj_status check_inputs(rj_bind *b) {
    const rj_graph *g = b->g;
    for (int32_t i = 0; i < g->ninputs; i++) {
        const node *n = &g->nodes[g->inputs[i]];
        const in_bind *ib = &b->in[i];
        if (!ib->set) continue; /* idle */
        int64_t need;
        char what[200];
        snprintf(what, sizeof what, "input %s", n->name);
        rj_status s = node_numel(b, n, what, &need);
        if (s) return s;
        size_t bytes;
        if (!bytes_of(need, rj_dtype_size(n->dtype), &bytes))
            return ctx_fail(b->ctx, RJ_ERR_OVERFLOW, "%s: %lld elements overflow the address "
                            "space", what, (long long)need);
        if (ib->numel == need) continue;
        if (node_is_pair(g, n)) /* blocks: no view with holes, the count is the whole story */
            return ctx_fail(b->ctx, RJ_ERR_SIZE, "%s: bound %lld elements but its blocks of len_b x len_b rows need "
                            "%lld", what, (long long)ib->numel, (long long)need);
        int rp = dim_ragged_pos(g, n);
        if (rp < 0)
            return ctx_fail(b->ctx, RJ_ERR_SIZE, "%s: bound %lld elements but its shape needs "
                            "%lld", what, (long long)ib->numel, (long long)need);
        int32_t j = dim_sym(n->dims[rp]);
        const rag_bind *r = &b->rag[j];
        int64_t rows = b->rows[j], inner = rows ? need / rows : 0;
        if (!rows) {
            /* no rows addressed: inner size alone decides */
            int64_t c = 1;
            for (int k = rp + 1; k < n->rank; k++) c *= bind_dim_value(b, n->dims[k]);
            inner = c;
        }
        if (inner == 0 || ib->numel % inner)
            return ctx_fail(b->ctx, RJ_ERR_SIZE, "%s: bound %lld elements, not a whole number "
                            "of rows of %lld", what, (long long)ib->numel, (long long)inner);
        int64_t have = ib->numel / inner;
        if (r->len && have >= rows) continue; /* a view with holes may have spare rows */
        return ctx_fail(b->ctx, RJ_ERR_OFFSETS_END, "%s: the offsets of %s %s %lld (index "
                        "%lld) but the values have %lld rows", what, g->syms[j].name,
                        r->len ? "address rows up to" : "end at", (long long)rows,
                        (long long)r->batch, (long long)have);
    }
    return RJ_OK;
}

/* pad(x, len=L) and unpad(p[B, L, ...], j) need L >= the longest row. */
static rj_status check_pad_lengths(rj_bind *b) {
    const rj_graph *g = b->g;
    for (int32_t i = 0; i < g->n; i++) {
        const node *n = &g->nodes[i];
        if (op_table[n->op].kind != KIND_PAD) continue;
        const node *x = &g->nodes[n->in[0]];
        rj_dim L = n->op == RJ_OP_PAD ? n->dims[1] : x->dims[1];
        int32_t j = dim_sym(n->op == RJ_OP_PAD ? x->dims[1] : n->dims[1]);
        int64_t lv = bind_dim_value(b, L), maxlen = b->val[j];
        if (n->op == RJ_OP_UNPAD && n->keepdim && bind_dim_value(b, x->dims[2]) < lv) /* [B, L, L2]: the shorter */
            L = x->dims[2], lv = bind_dim_value(b, L);
        if (lv >= maxlen) continue;
        const rag_bind *r = &b->rag[j];
        int64_t item = 0;
        while (r->off && item < r->batch && row_len(r->off, r->len, item) <= lv) item++;
        sbuf lb;
        sbuf_init(&lb, b->ctx);
        print_dim(&lb, g, L);
        rj_status s = ctx_fail(b->ctx, RJ_ERR_PAD_LEN, "%s: length %s = %lld is shorter than "
                               "item %lld of %s (%lld rows); truncation is not supported",
                               op_table[n->op].name, lb.s ? lb.s : "?", (long long)lv,
                               (long long)item, g->syms[j].name, (long long)maxlen);
        sbuf_free(&lb);
        return s;
    }
    return RJ_OK;
}

static rj_status prepare_outputs(rj_bind *b) {
    const rj_graph *g = b->g;
    for (int32_t i = 0; i < g->noutputs; i++) {
        const node *n = &g->nodes[g->outputs[i].node];
        out_bind *o = &b->out[i];
        char what[200];
        snprintf(what, sizeof what, "output %s", g->outputs[i].name);
        int64_t need;
        size_t bytes;
        rj_status s = node_numel(b, n, what, &need);
        if (s) return s;
        if (!bytes_of(need, rj_dtype_size(n->dtype), &bytes))
            return ctx_fail(b->ctx, RJ_ERR_OVERFLOW, "%s: %lld elements overflow the address "
                            "space", what, (long long)need);
        if (b->sizing) { /* the size only: the last run's results stay as they are */
            o->sized = need;
            continue;
        }
        if (o->dev) {
            if (o->duser && o->cap < need)
                return ctx_fail(b->ctx, RJ_ERR_SIZE, "%s: the bound device buffer holds %lld elements "
                                "but this run writes %lld", what, (long long)o->cap, (long long)need);
            if (!o->duser && (s = run_reserve(b, (int64_t)bytes, what, -1))) return s;
            o->data = NULL; /* the run sets ddata */
        } else if (o->user) {
            if (o->cap < need)
                return ctx_fail(b->ctx, RJ_ERR_SIZE, "%s: the bound buffer holds %lld elements "
                                "but this run writes %lld", what, (long long)o->cap,
                                (long long)need);
            o->data = o->user;
        } else if ((s = run_reserve(b, (int64_t)bytes, what, -1))) {
            return s;
        } else {
            /* 64-byte aligned: whole cache lines per row for streaming stores and vectors */
            if (bytes + 64 > o->own_bytes || !o->own) {
                size_t nb = bytes + 64;
                void *m = mem_realloc(b->ctx, o->own, o->own_bytes, nb);
                if (!m) return RJ_ERR_NOMEM;
                o->own = m;
                o->own_bytes = nb;
            }
            o->data = (void *)(((uintptr_t)o->own + 63) & ~(uintptr_t)63);
        }
        o->numel = need;
        /* the result tensor describes the memory with the symbol's addressing */
        rj_tensor *t = &o->result;
        memset(t, 0, sizeof *t);
        t->ctx = b->ctx;
        t->owned_by_bind = true;
        t->info.dtype = n->dtype;
        t->info.rank = n->rank;
        t->info.values = o->data;
        int rp = dim_ragged_pos(g, n);
        t->info.ragged_dim = rp;
        for (int k = 0; k < n->rank; k++) t->info.shape[k] = bind_dim_value(b, n->dims[k]);
        t->info.ragged_dims = rp >= 0 ? 1 : 0;
        if (node_is_pair(g, n)) { /* blocks of len_b x len_b rows */
            int32_t c = sym_root(g, dim_sym(n->dims[1]));
            t->info.ragged_dims = 2;
            t->info.rows = b->sqoff[c][b->cbatch[c]];
            t->info.offsets = b->sqoff[c];
            t->info.lengths = NULL;
        } else if (rp >= 0) {
            int32_t j = dim_sym(n->dims[rp]);
            t->info.rows = b->rows[j];
            t->info.offsets = b->rag[j].off;
            t->info.lengths = b->rag[j].len;
        } else {
            t->info.rows = need;
        }
    }
    return RJ_OK;
}

/* A device output against the device inputs and outputs before it: address ranges on CUDA;
 * on OpenCL, where a cl_mem is a handle, the same handle. */
static rj_status check_overlap_device(rj_bind *b, int32_t o, size_t ob_bytes) {
    const rj_graph *g = b->g;
    const out_bind *ob = &b->out[o];
    bool ranges = b->be && b->be->target == RJ_TARGET_CUDA;
    if (!ob->duser || !ob_bytes) return RJ_OK;
    uint64_t lo = ob->duser, hi = lo + ob_bytes;
    for (int32_t i = 0; i < g->ninputs; i++) {
        const in_bind *ib = &b->in[i];
        uint64_t n = (uint64_t)ib->numel * rj_dtype_size(g->nodes[g->inputs[i]].dtype);
        if (ib->dev && n && (ranges ? ib->ddata < hi && lo < ib->ddata + n : ib->ddata == lo))
            return ctx_fail(b->ctx, RJ_ERR_ARG, "output %s overlaps input %s (outputs must not alias inputs)",
                            g->outputs[o].name, g->nodes[g->inputs[i]].name);
    }
    for (int32_t k = 0; k < o; k++) {
        const out_bind *q = &b->out[k];
        uint64_t n = (uint64_t)q->numel * rj_dtype_size(g->nodes[g->outputs[k].node].dtype);
        if (q->dev && q->duser && n && (ranges ? q->duser < hi && lo < q->duser + n : q->duser == lo))
            return ctx_fail(b->ctx, RJ_ERR_ARG, "outputs %s and %s overlap", g->outputs[k].name, g->outputs[o].name);
    }
    return RJ_OK;
}

/* Outputs must not overlap inputs or each other: kernels read inputs after writing outputs
 * (softmax's passes) and the generated code assumes no aliasing. */
static rj_status check_overlap(rj_bind *b) {
    const rj_graph *g = b->g;
    for (int32_t o = 0; o < g->noutputs; o++) {
        const out_bind *ob = &b->out[o];
        size_t ob_bytes = (size_t)ob->numel * rj_dtype_size(g->nodes[g->outputs[o].node].dtype);
        if (ob->dev) {
            rj_status s = check_overlap_device(b, o, ob_bytes);
            if (s) return s;
            continue;
        }
        if (!ob->user || !ob_bytes) continue;
        const char *lo = ob->user, *hi = lo + ob_bytes;
        for (int32_t i = 0; i < g->ninputs; i++) {
            const char *p = b->in[i].data;
            size_t n = (size_t)b->in[i].numel * rj_dtype_size(g->nodes[g->inputs[i]].dtype);
            if (p && n && p < hi && lo < p + n)
                return ctx_fail(b->ctx, RJ_ERR_ARG, "output %s overlaps input %s (outputs must not "
                                "alias inputs)", g->outputs[o].name, g->nodes[g->inputs[i]].name);
        }
        for (int32_t k = 0; k < o; k++) {
            const out_bind *q = &b->out[k];
            size_t qn = (size_t)q->numel * rj_dtype_size(g->nodes[g->outputs[k].node].dtype);
            if (q->user && qn && (const char *)q->user < hi && lo < (const char *)q->user + qn)
                return ctx_fail(b->ctx, RJ_ERR_ARG, "outputs %s and %s overlap", g->outputs[k].name,
                                g->outputs[o].name);
        }
    }
    return RJ_OK;
}

/* Pair tensors ([B, j, j]): item b's len_b x len_b block starts at row sqoff[b] of the class's
 * blocks, a prefix sum of the squared lengths (from the logical offsets). */
static rj_status square_offsets(rj_bind *b) {
    const rj_graph *g = b->g;
    for (int32_t s = 0; s < g->nsym; s++) {
        if (!b->paired[s] || (!b->used[s] && !b->loff[s])) continue; /* only idle inputs have it */
        if (!b->loff[s])
            return ctx_fail(b->ctx, RJ_ERR_UNSUPPORTED, "ragged symbol %s: a program with two ragged dims of one "
                            "class needs its offsets on the host (not trusted device offsets)", g->syms[s].name);
        int64_t B = b->cbatch[s];
        if (b->sq_cap[s] < B + 1) {
            int64_t *n = mem_realloc(b->ctx, b->sqoff[s], sizeof(int64_t) * (size_t)b->sq_cap[s],
                                     sizeof(int64_t) * (size_t)(B + 1));
            if (!n) return RJ_ERR_NOMEM;
            b->sqoff[s] = n;
            b->sq_cap[s] = B + 1;
        }
        int64_t *q = b->sqoff[s];
        q[0] = 0;
        for (int64_t k = 0; k < B; k++) {
            int64_t l = b->loff[s][k + 1] - b->loff[s][k], l2;
            if (!mul_i64(l, l, &l2) || !add_i64(q[k], l2, &q[k + 1]))
                return ctx_fail(b->ctx, RJ_ERR_OVERFLOW, "ragged symbol %s: the blocks of its items' squared "
                                "lengths overflow", g->syms[s].name);
        }
    }
    return RJ_OK;
}

/* Logical offsets per ragged class: a packed member's offsets serve the whole class (members
 * have equal lengths, checked above); if every member is a view with holes, a prefix sum of
 * the lengths, kept in memory the binding reuses. Kernels iterate a class's rows in this
 * packed order and address each tensor through its own symbol's offsets. */
static rj_status class_offsets(rj_bind *b) {
    const rj_graph *g = b->g;
    for (int32_t s = 0; s < g->nsym; s++) {
        b->loff[s] = NULL;
        if (g->syms[s].kind != SYM_RAGGED || sym_root(g, s) != s) continue;
        const rag_bind *src = NULL;
        int32_t srcm = -1;
        for (int32_t m = 0; m < g->nsym; m++)
            if (b->rag[m].set && g->syms[m].kind == SYM_RAGGED && sym_root(g, m) == s &&
                (!src || (src->len && !b->rag[m].len)))
                src = &b->rag[m], srcm = m;
        if (!src) continue;
        b->cbatch[s] = src->batch;
        if (!src->off) { /* trusted device offsets */
            b->crows[s] = b->rows[srcm];
            continue;
        }
        if (!src->len) {
            b->loff[s] = src->off;
            b->crows[s] = src->off[src->batch];
            continue;
        }
        if (b->loff_cap[s] < src->batch + 1) {
            int64_t *n = mem_realloc(b->ctx, b->loff_own[s], sizeof(int64_t) * (size_t)b->loff_cap[s],
                                     sizeof(int64_t) * (size_t)(src->batch + 1));
            if (!n) return RJ_ERR_NOMEM;
            b->loff_own[s] = n;
            b->loff_cap[s] = src->batch + 1;
        }
        int64_t *lo = b->loff_own[s];
        lo[0] = 0;
        for (int64_t k = 0; k < src->batch; k++) lo[k + 1] = lo[k] + src->len[k];
        b->loff[s] = lo;
        b->crows[s] = lo[src->batch];
    }
    return b->pairs ? square_offsets(b) : RJ_OK;
}

rj_status run_reserve(rj_bind *b, int64_t bytes, const char *what, int index) {
    int64_t limit = __atomic_load_n(&b->ctx->run_limit, __ATOMIC_RELAXED), total;
    if (!add_i64(b->run_bytes, bytes, &total)) total = INT64_MAX;
    if (total > limit) {
        char name[224];
        if (index >= 0) snprintf(name, sizeof name, "%s %d", what, index);
        else snprintf(name, sizeof name, "%s", what);
        return ctx_fail(b->ctx, RJ_ERR_SIZE, "%s needs %lld bytes, and this run would then use %lld "
                        "bytes, above the memory limit of %lld bytes (rj_ctx_set_memory_limit)", name,
                        (long long)bytes, (long long)total, (long long)limit);
    }
    b->run_bytes = total;
    return RJ_OK;
}

rj_status bind_prepare(rj_bind *b) {
    const rj_graph *g = b->g;
    rj_ctx *ctx = b->ctx;
    b->prepared = false;
    b->run_bytes = 0;
    for (int32_t i = 0; i < g->ninputs; i++) {
        if (b->idle[i] && b->in[i].set) mark_dims(&g->nodes[g->inputs[i]], b->used); /* checked as bound */
        if (!b->in[i].set && !b->idle[i])
            return ctx_fail(ctx, RJ_ERR_UNBOUND, "input %s is not bound (rj_bind_input or "
                            "rj_bind_tensor)", g->nodes[g->inputs[i]].name);
    }
    rj_status s = b->has_dev ? fetch_offsets(b) : RJ_OK;
    if (s || (s = check_ragged(b)) || (s = class_offsets(b))) return s;
    uint8_t stack_known[64], *known = stack_known;
    size_t kn = (size_t)g->nsym;
    if (kn > sizeof stack_known && !(known = mem_alloc(ctx, kn))) return RJ_ERR_NOMEM;
    memset(known, 0, kn ? kn : 1);
    s = resolve_dense(b, known);
    if (known != stack_known) mem_free(ctx, known, kn);
    if (s) return s;
    if ((s = check_inputs(b)) || (s = check_pad_lengths(b)) || (s = prepare_outputs(b))) return s;
    if (b->sizing) return RJ_OK;
    if ((s = check_overlap(b))) return s;
    return check_memory(b);
}

rj_status rj_bind_output_numel(rj_bind *b, rj_node n, int64_t *numel) {
    if (!b) return RJ_ERR_ARG;
    int i = output_index(b, n, "rj_bind_output_numel");
    if (i < 0) return RJ_ERR_ARG;
    if (!numel) return ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_output_numel: numel is NULL");
    bool prepared = b->prepared; /* the last run's results stay readable */
    b->sizing = true;            /* everything a run checks, nothing it allocates */
    rj_status s = bind_prepare(b);
    b->sizing = false;
    b->prepared = prepared && !s;
    if (!s) *numel = b->out[i].sized;
    return s;
}

const rj_tensor *rj_bind_result(rj_bind *b, rj_node n) {
    if (!b) return NULL;
    int i = output_index(b, n, "rj_bind_result");
    if (i < 0) return NULL;
    if (!b->prepared) { /* after a failed run, its error is the one worth repeating */
        if (b->run_failed) ctx_fail(b->ctx, b->run_status, "%s", b->run_msg);
        else
            ctx_fail(b->ctx, RJ_ERR_UNBOUND, "rj_bind_result: %s: the program has not run "
                     "successfully with this binding", b->g->outputs[i].name);
        return NULL;
    }
    return &b->out[i].result;
}
