/*
 * cpu.c — the CPU backend: compile through the pipeline and LLVM, cache, and dispatch.
 *
 * Compiling: the structural hash of the graph (dtypes, constant dims and ops; not names)
 * finds an identical earlier compile in the context's cache; a hit shares its machine code
 * and does no LLVM work at all. A miss runs the pipeline, JIT-compiles the loop IR, and
 * prepares one libffi call interface per kernel from its typed signature.
 *
 * Running: kernels take only pointers and sizes, so a run only computes arguments: logical
 * offsets per ragged class (the caller's offsets when they are packed; a prefix sum of
 * lengths for views with holes), temporaries, and per-thread unit ranges. Units are split so
 * every thread gets the same amount of work, not the same number of items: row ranges for
 * elementwise and per-row kernels (an item longer than all others is simply split across
 * threads), and for reductions over the ragged dim (item, column tile) units weighted by the
 * item's length, with columns tiled when one item would otherwise dominate. Threads come from
 * OpenMP; small runs stay on the calling thread, where dispatch costs a few calls.
 */
#include <ffi.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../codegen/llvm/llvm_backend.h"
#include "../ir/pipeline.h"
#include "runtime.h"

typedef struct cpu_kernel {
    ffi_cif cif;
    ffi_type **types;
    int32_t n;
} cpu_kernel;

typedef struct cpu_entry {
    struct cpu_entry *next;
    uint64_t hash;
    rj_graph *key;
    int refs;
    compiled comp;
    llvm_module_code *code;
    void **fns;
    cpu_kernel *kern;
} cpu_entry;

struct prog_cache {
    cpu_entry *head;
    int32_t n;
};

typedef struct owned {
    void *p;
    size_t bytes;
} owned;

typedef struct cpu_state {
    cpu_entry *e;
    owned *temp;          /* per temporary buffer */
    owned scratch;        /* per-thread accumulators */
} cpu_state;

#define MAX_THREADS 256
#define MAX_CACHED 64

/* ---- structural equality of graphs (the cache key) ------------------------------------- */

static bool graphs_equal(const rj_graph *a, const rj_graph *b) {
    if (a->n != b->n || a->nsym != b->nsym || a->ninputs != b->ninputs || a->noutputs != b->noutputs)
        return false;
    for (int32_t i = 0; i < a->nsym; i++)
        if (a->syms[i].kind != b->syms[i].kind || a->syms[i].parent != b->syms[i].parent ||
            sym_root(a, i) != sym_root(b, i))
            return false;
    for (int32_t i = 0; i < a->n; i++) {
        const node *x = &a->nodes[i], *y = &b->nodes[i];
        if (x->op != y->op || x->dtype != y->dtype || x->rank != y->rank || x->nin != y->nin ||
            x->weak != y->weak || x->keepdim != y->keepdim || x->axis != y->axis ||
            x->ival != y->ival || memcmp(&x->fval, &y->fval, sizeof x->fval) ||
            memcmp(x->in, y->in, sizeof(int32_t) * x->nin) ||
            memcmp(x->dims, y->dims, sizeof(rj_dim) * x->rank))
            return false;
    }
    for (int32_t i = 0; i < a->ninputs; i++)
        if (a->inputs[i] != b->inputs[i]) return false;
    for (int32_t i = 0; i < a->noutputs; i++)
        if (a->outputs[i].node != b->outputs[i].node) return false;
    return true;
}

/* ---- compile --------------------------------------------------------------------------- */

static void entry_free(rj_ctx *ctx, cpu_entry *e) {
    int32_t nk = e->comp.lp.nkernels;
    if (e->kern)
        for (int32_t i = 0; i < nk; i++)
            mem_free(ctx, e->kern[i].types, sizeof(ffi_type *) * (size_t)(e->kern[i].n + 1));
    mem_free(ctx, e->kern, sizeof(cpu_kernel) * (size_t)(nk ? nk : 1));
    mem_free(ctx, e->fns, sizeof(void *) * (size_t)(nk ? nk : 1));
    llvm_code_free(ctx, e->code);
    compiled_free(&e->comp);
    rj_graph_free(e->key);
    mem_free(ctx, e, sizeof *e);
}

static rj_status prepare_ffi(rj_ctx *ctx, cpu_entry *e) {
    int32_t nk = e->comp.lp.nkernels;
    if (!(e->kern = mem_zalloc(ctx, sizeof(cpu_kernel) * (size_t)(nk ? nk : 1)))) return RJ_ERR_NOMEM;
    for (int32_t i = 0; i < nk; i++) {
        const lkernel *k = &e->comp.lp.kernels[i];
        cpu_kernel *ck = &e->kern[i];
        ck->n = k->nparams;
        if (!(ck->types = mem_alloc(ctx, sizeof(ffi_type *) * (size_t)(k->nparams + 1)))) return RJ_ERR_NOMEM;
        for (int32_t a = 0; a < k->nparams; a++) {
            int kind = k->params[a].kind;
            bool ptr = kind == PK_BUF || kind == PK_OFF || kind == PK_LOFF || kind == PK_SCRATCH;
            ck->types[a] = ptr ? &ffi_type_pointer : &ffi_type_sint64;
        }
        if (ffi_prep_cif(&ck->cif, FFI_DEFAULT_ABI, (unsigned)k->nparams, &ffi_type_void, ck->types) != FFI_OK)
            return ctx_fail(ctx, RJ_ERR_COMPILE, "libffi: cannot prepare the call of kernel %s", k->name);
    }
    return RJ_OK;
}

static rj_status cache_evict(rj_ctx *ctx) {
    struct prog_cache *c = ctx->cache;
    while (c->n > MAX_CACHED) {
        cpu_entry **pp = &c->head, **victim = NULL;
        for (; *pp; pp = &(*pp)->next)
            if ((*pp)->refs == 0) victim = pp; /* the oldest unreferenced entry is last */
        if (!victim) break;
        cpu_entry *v = *victim;
        *victim = v->next;
        entry_free(ctx, v);
        c->n--;
    }
    return RJ_OK;
}

static rj_status cpu_compile(rj_program *p) {
    rj_ctx *ctx = p->ctx;
    if (!ctx->cache) {
        if (!(ctx->cache = mem_zalloc(ctx, sizeof *ctx->cache))) return RJ_ERR_NOMEM;
    }
    cpu_state *st = mem_zalloc(ctx, sizeof *st);
    if (!st) return RJ_ERR_NOMEM;
    p->impl = st;
    uint64_t h = graph_hash(p->g);
    for (cpu_entry *e = ctx->cache->head; e; e = e->next)
        if (e->hash == h && graphs_equal(e->key, p->g)) {
            e->refs++;
            st->e = e;
            return RJ_OK;
        }
    cpu_entry *e = mem_zalloc(ctx, sizeof *e);
    if (!e) return RJ_ERR_NOMEM;
    e->hash = h;
    rj_status s = RJ_ERR_NOMEM;
    if (!(e->key = graph_clone(ctx, p->g))) goto fail;
    if ((s = pipeline_run(p->g, target_desc_for(RJ_TARGET_CPU), &e->comp))) goto fail;
    int32_t nk = e->comp.lp.nkernels;
    s = RJ_ERR_NOMEM;
    if (!(e->fns = mem_zalloc(ctx, sizeof(void *) * (size_t)(nk ? nk : 1)))) goto fail;
    if ((s = llvm_compile(ctx, &e->comp.lp, e->fns, &e->code)) || (s = prepare_ffi(ctx, e))) goto fail;
    e->refs = 1;
    e->next = ctx->cache->head;
    ctx->cache->head = e;
    ctx->cache->n++;
    st->e = e;
    return cache_evict(ctx);
fail:
    entry_free(ctx, e);
    return s;
}

static void cpu_release(rj_program *p) {
    cpu_state *st = p->impl;
    if (!st) return;
    rj_ctx *ctx = p->ctx;
    if (st->e) {
        int32_t nt = st->e->comp.lp.ntemps;
        if (st->temp)
            for (int32_t i = 0; i < nt; i++) mem_free(ctx, st->temp[i].p, st->temp[i].bytes);
        mem_free(ctx, st->temp, sizeof(owned) * (size_t)(nt ? nt : 1));
        st->e->refs--;
    }
    mem_free(ctx, st->scratch.p, st->scratch.bytes);
    mem_free(ctx, st, sizeof *st);
    p->impl = NULL;
    if (ctx->cache) cache_evict(ctx);
}

void backends_shutdown(rj_ctx *ctx) {
    if (ctx->cache) {
        for (cpu_entry *e = ctx->cache->head, *n; e; e = n) {
            n = e->next;
            entry_free(ctx, e);
        }
        mem_free(ctx, ctx->cache, sizeof *ctx->cache);
        ctx->cache = NULL;
    }
    llvm_jit_free(ctx->jit);
    ctx->jit = NULL;
}

/* ---- run ------------------------------------------------------------------------------- */

typedef union slot {
    void *p;
    int64_t i;
} slot;

typedef struct run {
    rj_ctx *ctx;
    rj_program *p;
    rj_bind *b;
    cpu_state *st;
    const lprog *lp;
    const int64_t **loff; /* per class root: logical offsets (the binding's) */
    const int64_t *batch; /* per class root: batch size */
} run;

static bool grow(rj_ctx *ctx, owned *o, size_t need) {
    if (need <= o->bytes && o->p) return true;
    void *n = mem_realloc(ctx, o->p, o->bytes, need ? need : 1);
    if (!n) return false;
    o->p = n;
    o->bytes = need ? need : 1;
    return true;
}

static int64_t dims_numel(run *r, const rj_dim *dims, int n) {
    int64_t c = 1;
    for (int k = 0; k < n; k++) c *= bind_dim_value(r->b, dims[k]);
    return c;
}

static rj_status temps(run *r) {
    const lprog *lp = r->lp;
    cpu_state *st = r->st;
    rj_ctx *ctx = r->ctx;
    int32_t nt = lp->ntemps;
    if (!st->temp && nt && !(st->temp = mem_zalloc(ctx, sizeof(owned) * (size_t)nt)))
        return RJ_ERR_NOMEM;
    for (int32_t i = 0; i < lp->nbufs; i++) {
        const lbuf *lb = &lp->bufs[i];
        if (lb->kind != LB_TEMP) continue;
        int64_t n;
        const sym *s = lb->rank > 1 ? graph_sym(r->p->g, lb->dims[1]) : NULL;
        if (s && s->kind == SYM_RAGGED) {
            int32_t cls = sym_root(r->p->g, dim_sym(lb->dims[1]));
            n = r->loff[cls][r->batch[cls]] * dims_numel(r, lb->dims + 2, lb->rank - 2);
        } else {
            n = dims_numel(r, lb->dims, lb->rank);
        }
        size_t bytes;
        if (!bytes_of(n, rj_dtype_size((rj_dtype)lb->dtype), &bytes))
            return ctx_fail(ctx, RJ_ERR_OVERFLOW, "temporary %d is too large", lb->index);
        if (!grow(ctx, &st->temp[lb->index], bytes + 64)) return RJ_ERR_NOMEM;
    }
    return RJ_OK;
}

static void *buf_ptr(run *r, const lbuf *lb) {
    switch (lb->kind) {
    case LB_INPUT: return (void *)r->b->in[lb->index].data;
    case LB_OUTPUT: return r->b->out[lb->index].data;
    default: return (void *)(((uintptr_t)r->st->temp[lb->index].p + 63) & ~(uintptr_t)63);
    }
}

/* Chunks per thread: a few more chunks than threads, taken dynamically, absorb threads that
 * start late or share a core (common on VMs) without changing any result. */
#define CHUNKS_PER_THREAD 4
#define MAX_CHUNKS (MAX_THREADS * CHUNKS_PER_THREAD)

typedef struct plan_k {
    int nth, nchunks;
    int64_t lo[MAX_CHUNKS + 1]; /* chunk c is units lo[c] .. lo[c+1] */
    int64_t tile;
    int64_t nunits;
    int64_t nt;
    size_t scratch_per_thread;
} plan_k;

/* Outputs larger than this are written with streaming (non-temporal) stores: they skip the
 * read-for-ownership of each line and do not evict the inputs from cache. Measured with
 * bench/ (copy-nt vs copy); override with RAGJIT_NT_BYTES. */
#define NT_BYTES_DEFAULT (8 << 20)

static int64_t nt_threshold(const rj_ctx *ctx) {
    if (ctx->nt_bytes) return ctx->nt_bytes;
    static int64_t env = -2;
    if (env == -2) {
        const char *v = getenv("RAGJIT_NT_BYTES");
        env = v ? atoll(v) : -1;
    }
    return env >= 0 ? env : NT_BYTES_DEFAULT;
}

/* Splits the kernel's units across threads. */
static void plan_kernel(run *r, const lkernel *k, plan_k *pk) {
    int threads = ctx_threads(r->ctx);
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    int64_t work, N = 1;
    memset(pk, 0, sizeof *pk);
    int32_t cls = k->dom_class;
    switch (k->domain) {
    case UD_ROWS: {
        pk->nunits = r->loff[cls][r->batch[cls]];
        work = pk->nunits;
        break;
    }
    case UD_ITEMS: {
        N = dims_numel(r, k->dom_dims, k->dom_rank);
        int64_t B = r->batch[cls], total = 0, maxw = 0;
        const int64_t *lo = r->loff[cls];
        for (int64_t b = 0; b < B; b++) {
            int64_t w = lo[b + 1] - lo[b] + 1;
            total += w;
            if (w > maxw) maxw = w;
        }
        pk->tile = N > 0 ? N : 1;
        pk->nt = 1;
        if (k->tiled && k->scratch_per_tile > 1 && N > 16) {
            /* multi-pass kernels (softmax) re-read each item's block: keep the input and output
             * columns of one tile within half of L2 */
            static int64_t l2 = 0;
            if (!l2) {
                long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
                l2 = v > 0 ? v : 1 << 20;
            }
            int64_t es = (int64_t)rj_dtype_size((rj_dtype)k->scratch_type);
            int64_t t = l2 / 2 / ((maxw > 0 ? maxw : 1) * es * 2);
            t = t / 16 * 16;
            if (t < 16) t = 16;
            if (t < N) {
                pk->tile = t;
                pk->nt = (N + t - 1) / t;
            }
        }
        if (k->tiled && threads > 1 && N >= 32 && maxw * 2 * threads > total * pk->nt) {
            int64_t want = 2 * threads;
            int64_t t = (N + want - 1) / want;
            t = (t + 15) / 16 * 16;
            if (t < pk->tile) {
                pk->tile = t;
                pk->nt = (N + t - 1) / t;
            }
        }
        pk->nunits = B * pk->nt;
        work = total * (N > 0 ? N : 1);
        break;
    }
    default:
        pk->nunits = dims_numel(r, k->dom_dims, k->dom_rank);
        work = pk->nunits;
        break;
    }
    int nth = threads;
    if (work < 16384 || pk->nunits < 2) nth = 1;
    if (nth > pk->nunits) nth = (int)(pk->nunits > 0 ? pk->nunits : 1);
    pk->nth = nth;
    int nc = nth == 1 ? 1 : nth * CHUNKS_PER_THREAD;
    if (nc > pk->nunits) nc = (int)(pk->nunits > 0 ? pk->nunits : 1);
    pk->nchunks = nc;
    if (k->domain == UD_ITEMS && nc > 1) {
        /* weighted split: each chunk gets about total / nc of sum(len_b + 1) over its units */
        const int64_t *lo = r->loff[cls];
        int64_t total = 0;
        for (int64_t u = 0; u < pk->nunits; u++) {
            int64_t b = u / pk->nt;
            total += lo[b + 1] - lo[b] + 1;
        }
        int c = 1;
        int64_t acc = 0;
        pk->lo[0] = 0;
        for (int64_t u = 0; u < pk->nunits && c < nc; u++) {
            int64_t b = u / pk->nt;
            acc += lo[b + 1] - lo[b] + 1;
            while (c < nc && acc * nc >= total * c) pk->lo[c++] = u + 1;
        }
        while (c <= nc) pk->lo[c++] = pk->nunits;
    } else {
        for (int c = 0; c <= nc; c++) pk->lo[c] = pk->nunits * c / nc;
    }
    if (k->scratch_per_tile) {
        size_t per = (size_t)k->scratch_per_tile;
        if (k->scratch_per_row && k->domain == UD_ITEMS) {
            const int64_t *lo = r->loff[cls];
            int64_t maxlen = 0;
            for (int64_t b = 0; b < r->batch[cls]; b++)
                if (lo[b + 1] - lo[b] > maxlen) maxlen = lo[b + 1] - lo[b];
            per += (size_t)maxlen;
        }
        pk->scratch_per_thread = (per * (size_t)pk->tile * rj_dtype_size((rj_dtype)k->scratch_type) + 63) / 64 * 64;
    }
}

static void call_kernel(run *r, const cpu_entry *e, int32_t ki, const plan_k *pk, int chunk, int t,
                        bool nt) {
    const lkernel *k = &r->lp->kernels[ki];
    slot vals[64];
    void *argv[64];
    int64_t lo = pk->lo[chunk], hi = pk->lo[chunk + 1];
    if (lo >= hi) return;
    for (int32_t a = 0; a < k->nparams && a < 64; a++) {
        const lparam *pm = &k->params[a];
        argv[a] = &vals[a];
        switch (pm->kind) {
        case PK_BUF: vals[a].p = buf_ptr(r, &r->lp->bufs[pm->ref]); break;
        case PK_OFF: vals[a].p = (void *)r->b->rag[pm->ref].off; break;
        case PK_LOFF: vals[a].p = (void *)r->loff[pm->ref]; break;
        case PK_SIZE: vals[a].i = r->b->val[pm->ref]; break;
        case PK_LO: vals[a].i = lo; break;
        case PK_HI: vals[a].i = hi; break;
        case PK_TILE: vals[a].i = pk->tile; break;
        case PK_SCRATCH: { /* 64-byte aligned slices: no two threads share a cache line */
            uintptr_t base = ((uintptr_t)r->st->scratch.p + 63) & ~(uintptr_t)63;
            vals[a].p = (void *)(base + (size_t)t * pk->scratch_per_thread);
            break;
        }
        case PK_NT: vals[a].i = nt; break;
        case PK_BLO: vals[a].i = item_at_or_before(r->loff[k->dom_class], r->batch[k->dom_class], lo); break;
        case PK_BHI: vals[a].i = item_at_or_after(r->loff[k->dom_class], r->batch[k->dom_class], hi); break;
        }
    }
    ffi_call((ffi_cif *)&e->kern[ki].cif, FFI_FN(e->fns[ki]), NULL, argv);
}

static rj_status cpu_run(rj_program *p, rj_bind *b) {
    rj_ctx *ctx = p->ctx;
    cpu_state *st = p->impl;
    const cpu_entry *e = st->e;
    run r = {.ctx = ctx, .p = p, .b = b, .st = st, .lp = &e->comp.lp, .loff = b->loff, .batch = b->cbatch};
    rj_status s = temps(&r);
    for (int32_t ki = 0; !s && ki < r.lp->nkernels; ki++) {
        const lkernel *k = &r.lp->kernels[ki];
        if (k->nparams > 64) {
            s = ctx_fail(ctx, RJ_ERR_UNSUPPORTED, "kernel %s has more than 64 parameters", k->name);
            break;
        }
        plan_k pk;
        plan_kernel(&r, k, &pk);
        if (pk.nunits <= 0) continue;
        if (pk.scratch_per_thread && !grow(ctx, &st->scratch, pk.scratch_per_thread * (size_t)pk.nth + 64)) {
            s = RJ_ERR_NOMEM;
            break;
        }
        bool nt = false;
        if (k->has_nt) {
            int64_t bytes = 0;
            for (int32_t a = 0; a < k->nparams; a++) {
                const lparam *pm = &k->params[a];
                if (pm->kind != PK_BUF || !pm->written) continue;
                const lbuf *lb = &r.lp->bufs[pm->ref];
                if (lb->kind == LB_OUTPUT) bytes += b->out[lb->index].numel * (int64_t)rj_dtype_size((rj_dtype)lb->dtype);
            }
            nt = bytes > nt_threshold(ctx);
        }
        if (pk.nth == 1) {
            call_kernel(&r, e, ki, &pk, 0, 0, nt);
        } else {
#pragma omp parallel for schedule(dynamic, 1) num_threads(pk.nth)
            for (int c = 0; c < pk.nchunks; c++) call_kernel(&r, e, ki, &pk, c, omp_get_thread_num(), nt);
        }
    }
    return s;
}

const backend backend_cpu = {"cpu", cpu_compile, cpu_run, cpu_release};
