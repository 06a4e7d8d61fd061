/*
 * cpu_gemm.c — the CPU's chunk loops around a library GEMM (lkernel.gemm, loopir.h).
 *
 * A product the BLAS computes (or ragjit's own sgemm, util/gemm.c) runs in chunks of rows,
 * each chunk's product into a per-worker buffer C that the cache holds, followed by the
 * group's JIT kernel over the same rows as its epilogue: the product never goes to memory
 * unless it is an output. Chunks go to the context's pool like any kernel's units. The run's
 * scratch and the cache budget that sizes chunks and stashes live here too (cpu.c's kernels
 * use them), so that calls between the two files point one way.
 */
#include <ffi.h>
#include <string.h>

#include "cpu.h"

/* The run's scratch, at least `bytes`: one block serves every kernel in turn, reserved against
 * the memory limit as it grows (*reserved: what this run reserved so far). NULL with *s set. */
void *cpu_run_scratch(const run_view *v, int64_t bytes, int64_t *reserved, const char *what, rj_status *s) {
    if (bytes > *reserved) {
        if ((*s = run_reserve(v, bytes - *reserved, what, -1))) return NULL;
        *reserved = bytes;
    }
    void *p = host_block_get(v->ctx, &v->mem->host->scratch, (size_t)bytes);
    if (!p) *s = RJ_ERR_NOMEM;
    return p;
}

/* The bytes of a multi-pass item kernel's stash (softmax over the ragged dim keeps the
 * longest item's rows of one column tile) a worker may fill: its share of the last-level
 * cache, at most STASH_MAX, and at least half its L2. Narrower tiles cost more than a stash
 * that spills L2: a tile reads part of each row, and on an AMD Zen 4 (1 MiB L2, 32 MiB L3
 * for two cores) rows read 128 or 64 columns at a time ran softmax 1.4-1.8x slower than
 * whole rows with a stash four to sixteen times the L2 (bench/'s W2 and `ragjit bench` at
 * maxlen 1024, 4096 and 16384), while a stash beyond the cache falls to memory speed. The cap
 * keeps machines that report their host's cache (as VMs do) from assuming all of it. */
#define STASH_MAX ((int64_t)8 << 20)
int64_t cpu_stash_bytes(const cpu_state *st, int workers) {
    if (st->env_stash_bytes >= 0) return st->env_stash_bytes; /* the user's (caches VMs misreport) */
    int64_t share = st->l3_bytes / (workers > 0 ? workers : 1) / 2;
    if (share > STASH_MAX) share = STASH_MAX;
    return share > st->l2_bytes / 2 ? share : st->l2_bytes / 2;
}

/* Kernel ki over rows [lo, hi) with the worker's chunk buffers in place of the shared ones
 * (and, for an attention's epilogue, the head). */
static void call_range(const cpu_code *code, const lprog *lp, int32_t ki, const run_view *v, const launch_plan *pl,
                       const launch_mem *m, int64_t lo, int64_t hi, int worker, void *chunk_a, void *chunk_c,
                       int64_t head) {
    const lkernel *k = &lp->kernels[ki];
    uint64_t vals[MAX_PARAMS];
    void *argv[MAX_PARAMS];
    launch_args(v, k, pl, m, lo, hi, worker, false, vals);
    for (int32_t a = 0; a < k->nparams; a++) {
        const lparam *pm = &k->params[a];
        if (pm->kind == PK_BUF && lp->bufs[pm->ref].kind == LB_CHUNK)
            vals[a] = (uint64_t)(uintptr_t)(lp->bufs[pm->ref].index ? chunk_c : chunk_a);
        if (pm->kind == PK_HEAD) vals[a] = (uint64_t)head;
        argv[a] = &vals[a];
    }
    ffi_call((ffi_cif *)&code->kern[ki].cif, FFI_FN(code->fns[ki]), NULL, argv);
}

/* Bytes per element of a product: dgemm's for f64, else sgemm's (gemm_full). */
static size_t gemm_es(const lgemm *gm) {
    return gm->dtype == RJ_F64 ? sizeof(double) : sizeof(float);
}

/* What computes a product's core on one worker: the BLAS, or ragjit's own sgemm with the
 * worker's packing scratch. */
typedef struct gemm_core {
    const blas_fns *bl;
    void *pack;
    const sgemm_kernel *pk; /* with w packed once for every chunk (packed_w), this kernel */
    const float *packed_w;
} gemm_core;

/* Bytes of a worker's packing scratch for products of at most m x n x k (0 with a BLAS). */
static int64_t gemm_pack_bytes(const blas_fns *bl, int64_t m, int64_t n, int64_t k) {
    return bl->own ? ((int64_t)sgemm_scratch_bytes(bl->own, m, n, k) + 63) / 64 * 64 : 0;
}

/* C (rows x N, row stride ldc) = A (rows x K, lda) @ W (K x N, or N x K transposed, ldb). */
static void gemm_full(const gemm_core *g, uint8_t dtype, bool tw, int64_t rows, int64_t K, int64_t N, const void *a,
                      int64_t lda, const void *w, int64_t ldb, void *c, int64_t ldc) {
    int tb = tw ? BLAS_TRANS : BLAS_NO_TRANS;
    int la = (int)(lda > 0 ? lda : 1), lb = (int)(ldb > 0 ? ldb : 1), lc = (int)(ldc > 0 ? ldc : 1);
    if (rows <= 0 || N <= 0) return;
    if (g->bl->own) /* f32 only: gemm_lib leaves f64 products to the JIT's loops then */
        sgemm_run(g->bl->own, false, tw, rows, N, K, 1.0f, a, la, w, lb, 0.0f, c, lc, g->pack);
    else if (dtype == RJ_F64)
        g->bl->dgemm(BLAS_ROW_MAJOR, BLAS_NO_TRANS, tb, (int)rows, (int)N, (int)K, 1.0, a, la, w, lb, 0.0, c, lc);
    else
        g->bl->sgemm(BLAS_ROW_MAJOR, BLAS_NO_TRANS, tb, (int)rows, (int)N, (int)K, 1.0f, a, la, w, lb, 0.0f, c, lc);
}

static void gemm_call(const gemm_core *g, const lgemm *gm, int64_t rows, int64_t K, int64_t N, const void *a,
                      const void *w, void *c) {
    if (g->packed_w) {
        sgemm_run_packed(g->pk, rows, N, K, a, K, g->packed_w, c, N, g->pack);
        return;
    }
    w = (const char *)w + (size_t)gm->w_off * gemm_es(gm); /* a slice of a weight: its first element */
    gemm_full(g, gm->dtype, gm->w_nk, rows, K, N, a, K, w, gm->w_ld ? gm->w_ld : gm->w_nk ? K : N, c, N);
}

/* The first physical row of item b in a buffer addressed by symbol `sym`'s offsets (-1: the
 * class's logical offsets). */
static int64_t item_row(const run_view *v, int32_t rsym, int32_t cls, int64_t item) {
    return rsym >= 0 ? v->sym[rsym].off[item] : v->cls[cls].loff[item];
}

/* Per-item products (GEMM_QK, GEMM_PV): rows [i0, i1) of item `it` into C. */
static void gemm_item_chunk(const gemm_core *g, const lgemm *gm, const run_view *v, const launch_mem *m, int64_t it,
                            int64_t i0, int64_t i1, int64_t K, int64_t N, size_t es, const void *chunk_a, void *chunk_c) {
    int32_t c = gm->a_cls, cb = gm->b_cls; /* the rows' class and the keys' (two in cross attention) */
    int64_t len = v->cls[cb].loff[it + 1] - v->cls[cb].loff[it];
    const char *w = (const char *)(uintptr_t)m->buf[gm->w_buf] + (size_t)item_row(v, gm->b_sym, cb, it) *
                    (size_t)(gm->mode == GEMM_QK ? K : N) * es;
    if (gm->mode == GEMM_QK) { /* q rows @ kᵀ: len columns */
        const char *q = (const char *)(uintptr_t)m->buf[gm->a_buf] + (size_t)(item_row(v, gm->a_sym, c, it) + i0) * (size_t)K * es;
        gemm_full(g, gm->dtype, true, i1 - i0, K, len, q, K, w, K, chunk_c, len);
        return;
    }
    const char *p = gm->prologue >= 0 ? chunk_a
                                      : (const char *)(uintptr_t)m->buf[gm->a_buf] +
                                            (size_t)(run_pair_off(v, pair_key(v->plan->nsym, c, cb))[it] + i0 * len) *
                                                es; /* the item's block */
    gemm_full(g, gm->dtype, false, i1 - i0, len, N, p, len, w, N, chunk_c, N);
}

/* C rows [lo, hi) of the product: x's rows from its buffer (split where items are not
 * adjacent in memory: a view with holes) or from the prologue's chunk A. */
static void gemm_chunk(const gemm_core *g, const lgemm *gm, const run_view *v, const launch_mem *m, int64_t lo,
                       int64_t hi, int64_t K, int64_t N, size_t es, const void *chunk_a, void *chunk_c) {
    const char *w = (const char *)(uintptr_t)m->buf[gm->w_buf];
    if (gm->prologue >= 0) {
        gemm_call(g, gm, hi - lo, K, N, chunk_a, w, chunk_c);
        return;
    }
    const char *x = (const char *)(uintptr_t)m->buf[gm->a_buf];
    if (gm->a_sym < 0) { /* rows contiguous in logical order */
        gemm_call(g, gm, hi - lo, K, N, x + (size_t)lo * (size_t)K * es, w, chunk_c);
        return;
    }
    const int64_t *loff = v->cls[gm->a_cls].loff, *off = v->sym[gm->a_sym].off;
    int64_t B = v->cls[gm->a_cls].batch;
    for (int64_t it = item_at_or_before(loff, B, lo); it < B && loff[it] < hi;) {
        /* a run of items whose rows follow each other in memory */
        int64_t s0 = lo > loff[it] ? lo : loff[it], phys = item_row(v, gm->a_sym, gm->a_cls, it) + (s0 - loff[it]);
        int64_t end = it;
        while (end + 1 < B && loff[end + 1] < hi && off[end + 1] == off[end] + (loff[end + 1] - loff[end])) end++;
        int64_t s1 = loff[end + 1] < hi ? loff[end + 1] : hi;
        if (s1 > s0)
            gemm_call(g, gm, s1 - s0, K, N, x + (size_t)phys * (size_t)K * es, w,
                      (char *)chunk_c + (size_t)(s0 - lo) * (size_t)N * es);
        it = end + 1;
    }
}

/* Rows per chunk: the chunk's C (and A) fill about L2, where the epilogue reads them back.
 * Smaller chunks keep them in L2 more surely, but every BLAS call packs all of w again: at
 * K = 256, N = 1024 on a 2 MiB L2, 64-row chunks ran at 0.73x the BLAS alone, 256 rows at
 * 0.97x, 512 rows (2 MiB of C) at 1.0-1.07x (bench W7). At least 16 rows, at most 4096. */
static int64_t gemm_rows_per_chunk(int64_t N, int64_t K, size_t es, bool prologue, int64_t l2) {
    int64_t row = (N + (prologue ? K : 0)) * (int64_t)es, r = row > 0 ? l2 / row : 4096;
    return r < 16 ? 16 : r > 4096 ? 4096 : r;
}

/* The chunks of `units` rows at most R each: an even number of equal chunks (at least 16 rows
 * each). Chunks of R and a remainder left one worker of two idle for most of a short batch:
 * CoLA's 455 rows through the QKV projection (R = 341) ran as 341 rows on one worker and 114
 * on the other, and the output projection (R = 512) on one worker alone. Even, not a multiple
 * of the thread count: a chunk's shape may change the BLAS's rounding, and results must not
 * depend on the threads (2 is the common count; more threads split longer runs anyway). */
static int64_t gemm_even_chunks(int64_t units, int64_t *R) {
    int64_t n = (units + *R - 1) / *R;
    if (n % 2 && units >= 32) n++;
    *R = (units + n - 1) / n;
    return (units + *R - 1) / *R;
}

/* A GEMM's chunk loop, as the pool's task: each thread's chunk buffers (A with a prologue,
 * then C) at sc + per * slot. */
typedef struct gemm_job {
    run r; /* the GEMM's kernel (its epilogue) */
    const lprog *lp;
    const blas_fns *bl, *own; /* own: ragjit's sgemm for an attention's longer items, or NULL */
    int64_t K, N, R, units;
    size_t es;
    const int64_t *ch;     /* per-item chunks: item, first row, end row (GEMM_ATTN: and head) */
    char *sc;
    int64_t per, a_bytes, c_bytes; /* a slot's scratch: A's chunk, C's chunk, the own sgemm's packing */
    const sgemm_kernel *pk; /* w packed once for all chunks (rows_prepack) by this kernel, into packed_w */
    float *packed_w;
} gemm_job;

/* Rows [lo, hi) of the product's kernels (prologue, epilogue) with the slot's chunk buffers. */
static void gemm_range(const gemm_job *g, int32_t ki, int64_t lo, int64_t hi, int slot) {
    char *ca = g->sc + g->per * slot;
    call_range(g->r.code, g->lp, ki, g->r.v, g->r.pl, g->r.m, lo, hi, slot, ca, ca + g->a_bytes, 0);
}

static void gemm_items_task(void *arg, int64_t q, int slot) {
    const gemm_job *g = arg;
    const lgemm *gm = &g->r.k->gemm;
    const int64_t *lo = g->r.v->cls[gm->a_cls].loff;
    int64_t it = g->ch[3 * q], i0 = g->ch[3 * q + 1], i1 = g->ch[3 * q + 2];
    char *ca = g->sc + g->per * slot, *cc = ca + g->a_bytes;
    gemm_core core = {.bl = g->bl, .pack = cc + g->c_bytes};
    if (gm->prologue >= 0) gemm_range(g, gm->prologue, lo[it] + i0, lo[it] + i1, slot);
    gemm_item_chunk(&core, gm, g->r.v, g->r.m, it, i0, i1, g->K, g->N, g->es, ca, cc);
    gemm_range(g, g->r.ki, lo[it] + i0, lo[it] + i1, slot);
}

static void gemm_rows_task(void *arg, int64_t c, int slot) {
    const gemm_job *g = arg;
    const lgemm *gm = &g->r.k->gemm;
    int64_t lo = c * g->R, hi = lo + g->R < g->units ? lo + g->R : g->units;
    char *ca = g->sc + g->per * slot, *cc = ca + g->a_bytes;
    gemm_core core = {.bl = g->bl, .pack = cc + g->c_bytes, .pk = g->pk, .packed_w = g->packed_w};
    if (gm->prologue >= 0) gemm_range(g, gm->prologue, lo, hi, slot);
    gemm_chunk(&core, gm, g->r.v, g->r.m, lo, hi, g->K, g->N, g->es, ca, cc);
    gemm_range(g, g->r.ki, lo, hi, slot);
}

/* Rows in chunks pack w once per chunk in a BLAS's sgemm: 10-17% of the CoRa module's time
 * (perf: OpenBLAS 0.3.21's sgemm_incopy on the QKV and output projections, 2 threads, SQuAD's
 * and CoLA's lengths), as much as the epilogues and the attention's softmax together. An f32
 * product of several chunks therefore runs on ragjit's own sgemm with w packed once, by the
 * pool, before the chunks (its kernel is within a few percent of OpenBLAS's on these chunks,
 * bench_gemm), unless only the portable kernel runs here. */
static const sgemm_kernel *rows_prepack(const blas_fns *bl, const lgemm *gm, int64_t nchunks) {
    if (gm->dtype != RJ_F32 || nchunks < 2) return NULL;
    if (bl->own) return bl->own;
    const sgemm_kernel *k = sgemm_kernel_get(SGEMM_BEST);
    return k->isa == SGEMM_PORTABLE ? NULL : k;
}

static void pack_w_task(void *arg, int64_t block, int slot) {
    (void)slot;
    const gemm_job *g = arg;
    const lgemm *gm = &g->r.k->gemm;
    const float *w = (const float *)(uintptr_t)g->r.m->buf[gm->w_buf] + gm->w_off;
    sgemm_pack_b_block(g->pk, gm->w_nk, g->N, g->K, w, gm->w_ld ? gm->w_ld : gm->w_nk ? g->K : g->N, block,
                       g->packed_w);
}

/* Per-item products: chunks never cross an item (its k or v multiplies every row of it), each
 * of at most R rows with R chosen so that the longest item's chunk of C (and A) fills the
 * last-level cache's budget (cpu_stash_bytes for one worker), not L2: every chunk packs the item's
 * k (or v) again, and on a Zen 4 (1 MiB L2) whole 1024-row items ran bench's W8 and W9 3-7%
 * faster than 256-row chunks, while the softmax epilogue reads C from L3 at little cost. */
static rj_status run_gemm_items(const cpu_code *code, const lprog *lp, int32_t ki, const run_view *v,
                                const launch_opts *o, launch_mem *m, int64_t *scratch_reserved, const blas_fns *bl,
                                const launch_plan *pl) {
    const lkernel *k = &lp->kernels[ki];
    const lgemm *gm = &k->gemm;
    rj_ctx *ctx = v->ctx;
    int32_t c = gm->a_cls;
    int64_t B = v->cls[c].batch, K = run_dim(v, gm->K), N = run_dim(v, gm->N), maxlen = 0, n = 0;
    const int64_t *lo = v->cls[c].loff;
    size_t es = gemm_es(gm);
    bool pro = gm->prologue >= 0;
    /* neither may depend on the thread count: chunk shapes change a BLAS's rounding */
    int64_t budget = cpu_stash_bytes(ctx->slot[SLOT_CPU].state, 1);
    if (!lo) return ctx_fail(ctx, RJ_ERR_INTERNAL, "kernel %s: per-item GEMMs without host offsets", k->name);
    /* rows per chunk of each item, and the chunks */
    const int64_t *lk = v->cls[gm->b_cls >= 0 ? gm->b_cls : c].loff; /* the keys' (cross attention) */
    for (int64_t it = 0; lk && it < B; it++) {
        int64_t len = lo[it + 1] - lo[it], lenk = lk[it + 1] - lk[it];
        if (len > maxlen) maxlen = len;
        if (lenk > maxlen) maxlen = lenk;
    }
    if (maxlen > INT32_MAX || K > INT32_MAX || N > INT32_MAX)
        return ctx_fail(ctx, RJ_ERR_UNSUPPORTED, "kernel %s: a per-item GEMM exceeds the BLAS's int sizes", k->name);
    int64_t wmax = (gm->mode == GEMM_QK ? maxlen : N) + (pro ? maxlen : 0), row = wmax * (int64_t)es;
    int64_t R = row > 0 ? budget / row : 4096;
    /* and at least 16 chunks in all, so that one long item still feeds the workers */
    int64_t share = (lo[B] - lo[0]) / 16;
    if (R > share) R = share;
    R = R < 16 ? 16 : R > 4096 ? 4096 : R;
    for (int64_t it = 0; it < B; it++) n += (lo[it + 1] - lo[it] + R - 1) / R;
    if (n == 0) return RJ_OK;
    int64_t *ch = mem_alloc(ctx, sizeof(int64_t) * 3 * (size_t)n);
    if (!ch) return RJ_ERR_NOMEM;
    n = 0;
    for (int64_t it = 0; it < B; it++)
        for (int64_t i0 = 0; i0 < lo[it + 1] - lo[it]; i0 += R) {
            int64_t i1 = i0 + R < lo[it + 1] - lo[it] ? i0 + R : lo[it + 1] - lo[it];
            ch[3 * n] = it, ch[3 * n + 1] = i0, ch[3 * n + 2] = i1, n++;
        }
    int workers = o->workers < n ? o->workers : (int)n;
    int64_t a_bytes = pro ? (R * maxlen * (int64_t)es + 63) / 64 * 64 : 0;
    int64_t c_bytes = (R * (gm->mode == GEMM_QK ? maxlen : N) * (int64_t)es + 63) / 64 * 64;
    int64_t big = maxlen > K ? maxlen : K, p_bytes = gemm_pack_bytes(bl, R, big > N ? big : N, big);
    int64_t per = a_bytes + c_bytes + p_bytes, bytes = per * workers;
    rj_status s = RJ_OK;
    char *sc = cpu_run_scratch(v, bytes, scratch_reserved, "a GEMM's chunk buffers", &s);
    if (!sc) goto out;
    gemm_job g = {.r = {.code = code, .k = k, .ki = ki, .v = v, .pl = pl, .m = m}, .lp = lp, .bl = bl, .K = K,
                  .N = N, .es = es, .ch = ch, .sc = sc, .per = per, .a_bytes = a_bytes, .c_bytes = c_bytes};
    pool_run(ctx, ((const cpu_state *)ctx->slot[SLOT_CPU].state)->pool, n, workers, gemm_items_task, &g);
out:
    mem_free(ctx, ch, sizeof(int64_t) * 3 * (size_t)n);
    return s;
}

/* ---- fused attention: both products by the GEMM (GEMM_ATTN, lower/attention_lib.c) ---------- */

/* Element (row i of item it, head h) of an operand seen through its view. */
static char *view_at(const run_view *v, const launch_mem *m, const lview *w, int32_t cls, int64_t it, int64_t i,
                     int64_t h, size_t es) {
    int64_t row = item_row(v, w->sym, cls, it) + i;
    return (char *)(uintptr_t)m->buf[w->buf] + (size_t)(row * w->ld + w->off + h * w->hs) * es;
}

/* An f32 attention's products on items of at least this many keys go to ragjit's own sgemm
 * even where a BLAS serves: its kernels read A (q's rows, then the weights in C) in place,
 * where OpenBLAS 0.3.21 packs both operands of every call and zeroes C for beta = 0 (a fifth of
 * the attention's time on SQuAD's lengths, perf). bench_gemm, one thread, head of 64, own over
 * OpenBLAS: q kᵀ 0.77 / 0.96 / 1.06 / 1.07 / 1.12 and P v 0.80 / 0.84 / 0.90 / 1.26 / 1.28 at
 * 48 / 64 / 96 / 128 / 192 keys; on short items OpenBLAS's small-matrix kernels win by far
 * (13 keys: 0.10 and 0.51), so those stay with the BLAS. */
#define ATTN_OWN_LEN 128

/* One unit: C = Q K_bᵀ for the chunk's query rows of one head, the kernel turns C into the
 * softmax's weights, O = P V_b into the head's columns of the result. */
static void attention_task(void *arg, int64_t u, int slot) {
    const gemm_job *g = arg;
    const lgemm *gm = &g->r.k->gemm;
    const run_view *v = g->r.v;
    int32_t c = gm->a_cls;
    const int64_t *lo = v->cls[c].loff, *ch = g->ch + 4 * u;
    int64_t it = ch[0], h = ch[1], i0 = ch[2], i1 = ch[3], len = lo[it + 1] - lo[it];
    int64_t hk = h / (gm->heads / gm->kv_heads);
    char *cc = g->sc + g->per * slot;
    gemm_core core = {.bl = g->own && len >= ATTN_OWN_LEN ? g->own : g->bl, .pack = cc + g->c_bytes};
    const lview *at = gm->att;
    gemm_full(&core, gm->dtype, true, i1 - i0, g->K, len, view_at(v, g->r.m, &at[0], c, it, i0, h, g->es), at[0].ld,
              view_at(v, g->r.m, &at[1], c, it, 0, hk, g->es), at[1].ld, cc, len);
    call_range(g->r.code, g->lp, g->r.ki, v, g->r.pl, g->r.m, lo[it] + i0, lo[it] + i1, slot, NULL, cc, h);
    gemm_full(&core, gm->dtype, false, i1 - i0, len, g->N, cc, len, view_at(v, g->r.m, &at[2], c, it, 0, hk, g->es),
              at[2].ld, view_at(v, g->r.m, &at[3], c, it, i0, h, g->es), at[3].ld);
}

/* Units of (item, head, chunk of R query rows): R rows of the longest item's scores fill at
 * most half of L2, where the kernel and the second product read them back, and a worker's C
 * at most 1/32 of the result (the attention's memory stays about its output's: 1.03x with
 * one worker on RACE's lengths, per head); the units are at least 32 so that a long item never
 * serialises the run (R at least 16 rows all the same). Items go longest first, so the pool's
 * dynamic claiming ends on short units; an item's heads and chunks follow each other, so its
 * k and v stay in cache. Neither depends on the thread count (chunk shapes change a BLAS's
 * rounding). */
static rj_status run_attention(const cpu_code *code, const lprog *lp, int32_t ki, const run_view *v,
                               const launch_opts *o, launch_mem *m, int64_t *scratch_reserved, const blas_fns *bl,
                               const launch_plan *pl) {
    const lkernel *k = &lp->kernels[ki];
    const lgemm *gm = &k->gemm;
    rj_ctx *ctx = v->ctx;
    const cpu_state *st = ctx->slot[SLOT_CPU].state;
    int32_t c = gm->a_cls;
    int64_t B = v->cls[c].batch, H = gm->heads, maxlen = 0, n = 0, rows = 0;
    const int64_t *lo = v->cls[c].loff;
    size_t es = gemm_es(gm);
    if (!lo) return ctx_fail(ctx, RJ_ERR_INTERNAL, "kernel %s: attention GEMMs without host offsets", k->name);
    for (int64_t it = 0; it < B; it++) {
        int64_t len = lo[it + 1] - lo[it];
        maxlen = len > maxlen ? len : maxlen;
        rows += len;
    }
    if (maxlen > INT32_MAX || gm->att[0].ld > INT32_MAX || gm->att[1].ld > INT32_MAX || gm->att[2].ld > INT32_MAX ||
        gm->att[3].ld > INT32_MAX)
        return ctx_fail(ctx, RJ_ERR_UNSUPPORTED, "kernel %s: an attention's GEMM exceeds the BLAS's int sizes", k->name);
    if (rows == 0) return RJ_OK;
    int64_t row = maxlen * (int64_t)es, R = st->l2_bytes / 2 / row, share = rows / 32;
    int64_t cap = rows * H * run_dim(v, gm->N) * (int64_t)es / 32 / row; /* C: 1/32 of the result */
    R = R > share ? share : R;
    R = R > cap ? cap : R;
    R = R < 16 ? 16 : R > 4096 ? 4096 : R;
    for (int64_t it = 0; it < B; it++) n += (lo[it + 1] - lo[it] + R - 1) / R * H;
    int64_t *ch = mem_alloc(ctx, sizeof(int64_t) * (4 * (size_t)n + (size_t)B));
    if (!ch) return RJ_ERR_NOMEM;
    int64_t *order = ch + 4 * n, u = 0;
    for (int64_t it = 0; it < B; it++) { /* by length, longest first (insertion: B is small) */
        int64_t y = it, len = lo[it + 1] - lo[it];
        for (; y > 0 && lo[order[y - 1] + 1] - lo[order[y - 1]] < len; y--) order[y] = order[y - 1];
        order[y] = it;
    }
    for (int64_t x = 0; x < B; x++) {
        int64_t it = order[x], len = lo[it + 1] - lo[it];
        for (int64_t h = 0; h < H; h++)
            for (int64_t i0 = 0; i0 < len; i0 += R, u++)
                ch[4 * u] = it, ch[4 * u + 1] = h, ch[4 * u + 2] = i0, ch[4 * u + 3] = i0 + R < len ? i0 + R : len;
    }
    int workers = o->workers < n ? o->workers : (int)n;
    blas_fns own = {.name = "ragjit", .own = sgemm_kernel_get(SGEMM_BEST)};
    const blas_fns *own_fns = gm->dtype == RJ_F32 && !bl->own && maxlen >= ATTN_OWN_LEN ? &own : NULL;
    int64_t K = run_dim(v, gm->K), N = run_dim(v, gm->N), big = maxlen > K ? maxlen : K;
    int64_t c_bytes = (R * maxlen * (int64_t)es + 63) / 64 * 64;
    int64_t per = c_bytes + gemm_pack_bytes(own_fns ? own_fns : bl, R, maxlen > N ? maxlen : N, big);
    rj_status s = RJ_OK;
    char *sc = cpu_run_scratch(v, per * workers, scratch_reserved, "an attention's chunk buffers", &s);
    if (sc) {
        gemm_job g = {.r = {.code = code, .k = k, .ki = ki, .v = v, .pl = pl, .m = m}, .lp = lp, .bl = bl,
                      .own = own_fns, .K = K, .N = N, .es = es, .ch = ch, .sc = sc, .per = per, .c_bytes = c_bytes};
        pool_run(ctx, st->pool, n, workers, attention_task, &g);
    }
    mem_free(ctx, ch, sizeof(int64_t) * (4 * (size_t)n + (size_t)B));
    return s;
}

rj_status cpu_run_gemm(const cpu_code *code, const lprog *lp, int32_t ki, const run_view *v, const launch_opts *o,
                          launch_mem *m, int64_t *scratch_reserved) {
    const lkernel *k = &lp->kernels[ki];
    const lgemm *gm = &k->gemm;
    rj_ctx *ctx = v->ctx;
    const blas_fns *bl = blas_get();
    if (!bl) return ctx_fail(ctx, RJ_ERR_INTERNAL, "kernel %s: compiled for a BLAS that is gone", k->name);
    launch_plan pl;
    rj_status s = launch_plan_kernel(v, k, o, &pl);
    if (s || pl.units <= 0) return s;
    if (gm->mode == GEMM_ATTN) return run_attention(code, lp, ki, v, o, m, scratch_reserved, bl, &pl);
    if (gm->mode != GEMM_ROWS) return run_gemm_items(code, lp, ki, v, o, m, scratch_reserved, bl, &pl);
    int64_t K = run_dim(v, gm->K), N = run_dim(v, gm->N), units = pl.units;
    if (K > INT32_MAX || N > INT32_MAX)
        return ctx_fail(ctx, RJ_ERR_UNSUPPORTED, "kernel %s: a GEMM with K = %lld, N = %lld exceeds the BLAS's int "
                        "sizes", k->name, (long long)K, (long long)N);
    size_t es = gemm_es(gm);
    bool pro = gm->prologue >= 0;
    int64_t R = gemm_rows_per_chunk(N, K, es, pro, ((const cpu_state *)ctx->slot[SLOT_CPU].state)->l2_bytes);
    int64_t nchunks = gemm_even_chunks(units, &R);
    int workers = o->workers < nchunks ? o->workers : (int)nchunks;
    if (units * (K + N) < o->small_work) workers = 1;
    /* per worker: A (with a prologue) and C, each 64-byte aligned; then w packed once, if so */
    const sgemm_kernel *pk = rows_prepack(bl, gm, nchunks);
    int64_t a_bytes = pro ? (R * K * (int64_t)es + 63) / 64 * 64 : 0, c_bytes = (R * N * (int64_t)es + 63) / 64 * 64;
    int64_t pack = pk ? ((int64_t)sgemm_scratch_bytes(pk, R, N, K) + 63) / 64 * 64 : gemm_pack_bytes(bl, R, N, K);
    int64_t per = a_bytes + c_bytes + pack, wp = pk ? (int64_t)sgemm_packed_b_bytes(pk, N, K) : 0;
    char *sc = cpu_run_scratch(v, per * workers + wp, scratch_reserved, "a GEMM's chunk buffers", &s);
    if (!sc) return s;
    pool *team = ((const cpu_state *)ctx->slot[SLOT_CPU].state)->pool;
    gemm_job g = {.r = {.code = code, .k = k, .ki = ki, .v = v, .pl = &pl, .m = m}, .lp = lp, .bl = bl, .K = K,
                  .N = N, .R = R, .units = units, .es = es, .sc = sc, .per = per, .a_bytes = a_bytes,
                  .c_bytes = c_bytes, .pk = pk, .packed_w = pk ? (float *)(sc + per * workers) : NULL};
    if (pk) {
        int64_t blocks = sgemm_packed_b_blocks(pk, N, K);
        pool_run(ctx, team, blocks, workers < blocks ? workers : (int)blocks, pack_w_task, &g);
    }
    pool_run(ctx, team, nchunks, workers, gemm_rows_task, &g);
    return RJ_OK;
}
