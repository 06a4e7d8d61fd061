/*
 * cpu_gemm.c — the CPU's chunk loops around a library GEMM (lkernel.gemm, loopir.h).
 *
 * A product the BLAS computes (or ragjit's own sgemm, util/gemm.c) runs in chunks of rows,
 * each chunk's product into a per-worker buffer C that the cache holds, followed by the
 * group's JIT kernel over the same rows as its epilogue: the product never goes to memory
 * unless it is an output. Chunks go to the context's pool like any kernel's units. The run's
 * scratch, the cache budget that sizes chunks and stashes and the stream threshold live here
 * too (cpu.c's kernels use them), so that calls between the two files point one way.
 *
 * So does the first touch of a run's host memory (cpu_block_get). Memory a binding keeps
 * (the temporaries' arena, the scratch) is fresh when it is allocated or grown, and the
 * kernels that wrote it first paid a page fault every 4 KiB, one at a time on whichever
 * thread got there: about 3 us each on the machines of bench/NOTES.md, 10 ms for the
 * encoder's 12 MB arena, most of what made a first run slower than the later ones. A grown
 * block is touched at once instead, a slice per thread of the pool: rj_bind_prepare does it
 * before the first run, and a run that grows a block pays for its faults in parallel rather
 * than one by one inside its kernels. The touch is an atomic add of 0: it faults the page in
 * for writing. Then the block asks for transparent huge pages (runmem.c says why): a
 * binding's first run touches its blocks in small pages, the cheapest there is to get for
 * fresh memory in a VM, and the kernel merges them into huge ones in the background
 * (khugepaged) for the runs after; rj_bind_prepare, and a later run whose larger data grows a
 * block, ask before they touch: huge pages at once, so that the runs after have them (4-9%
 * less CPU for the encoder), paid for at bind time or by a run that pays for fresh memory
 * anyway.
 *
 * An f32 attention's short items (fewer than 128 keys: MNLI's, CoLA's) multiply by
 * util/head_gemm.c, blocks shaped for a head's few dozen rows and columns, instead of a BLAS
 * call per (item, head) that was mostly fixed costs and packing; all heads of an item are one
 * unit, so that the next head's q, k and v are prefetched while one computes (a head's columns
 * of the QKV projection's rows are 6 KiB apart, a stride the hardware prefetchers miss).
 *
 * Between an attention's two products, the softmax's weights come from util/head_softmax.c
 * where the scores' function is the product times or over a constant (lgemm.att_plain; in a
 * 16-bit attention each rounded to the format, as the kernel rounds them) and the CPU has
 * AVX-512: a plain loop over each row's vectors, where the JIT's kernel paid a loop nest per
 * row (any other function keeps the kernel; in the bf16 encoder the kernel was 9% of the run,
 * and head_softmax made the run 5% faster). A projection's epilogue streams its rows past
 * the cache where it writes more than the stream threshold, temporaries too (gemm_lib.c says
 * why).
 *
 * 16-bit products (lgemm.core, loopir.h) multiply in f32: the prologue has widened x's rows
 * into the f32 chunk A, w (k, v) is widened here once per run into an f32 copy in the run's
 * scratch, ahead of the chunks, and an attention's q, k and v are widened tile by tile in the
 * worker's scratch (k and v once per item and head a worker meets in a row; then multiplied as
 * f32 ones are: head_gemm on short items, the own sgemm on long ones), its output rounded once
 * as it is stored. bf16 with an sbgemm (a BLAS's, or util/amx.c's AMX tiles) multiplies the
 * operands as they are; with AMX, w goes into the tiles' layout once a run like an f32 w
 * (rows_prepack).
 */
#include <ffi.h>
#include <string.h>

#include "cpu.h"

#define TOUCH_SLICE ((size_t)2 << 20) /* a thread's share of a first touch */
#define PAGE_STEP 4096                  /* touching every 4 KiB reaches every page of any size */

typedef struct touch_job {
    char *p;
    size_t bytes;
} touch_job;

static void touch_task(void *arg, int64_t c, int slot) {
    RJ_UNUSED(slot);
    const touch_job *t = arg;
    size_t lo = (size_t)c * TOUCH_SLICE, hi = lo + TOUCH_SLICE < t->bytes ? lo + TOUCH_SLICE : t->bytes;
    for (size_t i = lo; i < hi; i += PAGE_STEP) __atomic_fetch_add(t->p + i, 0, __ATOMIC_RELAXED);
}

void cpu_touch(rj_ctx *ctx, void *mem, size_t bytes) {
    char *p = mem;
    const cpu_state *st = ctx->slot[SLOT_CPU].state;
    int64_t n = (int64_t)((bytes + TOUCH_SLICE - 1) / TOUCH_SLICE);
    int threads = ctx_threads(ctx);
    touch_job t = {.p = p, .bytes = bytes};
    pool_run(ctx, st ? st->pool : NULL, n, threads < MAX_THREADS ? threads : MAX_THREADS, touch_task, &t);
}

void *cpu_block_get(const run_view *v, host_block *blk, size_t bytes, bool early, rj_status *s) {
    bool fresh;
    early = early || v->mem->host->ran; /* a block that grows after the binding's first run (cpu.h) */
    void *p = host_block_fresh(v->ctx, blk, bytes, host_huge_pages(), &fresh);
    if (!p) *s = RJ_ERR_NOMEM;
    else if (fresh) {
        if (early) host_block_advise(blk);
        cpu_touch(v->ctx, p, bytes);
        if (!early) host_block_advise(blk);
    }
    return p;
}

void *cpu_run_scratch(const run_view *v, const launch_opts *o, int64_t bytes, int64_t *reserved, const char *what,
                      rj_status *s) {
    *s = RJ_OK;
    if (bytes > *reserved) {
        if ((*s = run_reserve(v, bytes - *reserved, what, -1))) return NULL;
        *reserved = bytes;
    }
    if (o->dry) return NULL; /* sized; allocated once the largest is known (cpu.c, cpu_exec) */
    return cpu_block_get(v, &v->mem->host->scratch, (size_t)bytes, false, s);
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

int64_t cpu_stream_threshold(rj_ctx *ctx) {
    const cpu_state *st = ctx->slot[SLOT_CPU].state;
    int64_t set = __atomic_load_n(&st->stream_bytes, __ATOMIC_RELAXED);
    return set ? set : st->env_stream_bytes;
}

/* Kernel ki over rows [lo, hi) with the worker's chunk buffers in place of the shared ones
 * (and, for an attention's epilogue, the head); nt: its streaming stores bypass the cache. */
static void call_range(const cpu_code *code, const lprog *lp, int32_t ki, const run_view *v, const launch_plan *pl,
                       const launch_mem *m, int64_t lo, int64_t hi, int worker, void *chunk_a, void *chunk_c,
                       int64_t head, bool nt) {
    const lkernel *k = &lp->kernels[ki];
    uint64_t vals[MAX_PARAMS];
    void *argv[MAX_PARAMS];
    launch_args(v, k, pl, m, lo, hi, worker, nt, vals);
    for (int32_t a = 0; a < k->nparams; a++) {
        const lparam *pm = &k->params[a];
        if (pm->kind == PK_BUF && lp->bufs[pm->ref].kind == LB_CHUNK)
            vals[a] = (uint64_t)(uintptr_t)(lp->bufs[pm->ref].index ? chunk_c : chunk_a);
        if (pm->kind == PK_HEAD) vals[a] = (uint64_t)head;
        argv[a] = &vals[a];
    }
    ffi_call((ffi_cif *)&code->kern[ki].cif, FFI_FN(code->fns[ki]), NULL, argv);
}

/* The element type the core multiplies (gemm_full): f64, f32 (16-bit operands widened too)
 * or bf16 (sbgemm); its operands' bytes; and C's (f32 for every 16-bit product). */
static uint8_t core_dtype(const lgemm *gm) {
    return gm->core == GC_SBGEMM ? RJ_BF16 : gm->dtype == RJ_F64 ? RJ_F64 : RJ_F32;
}

static size_t gemm_es(const lgemm *gm) {
    return rj_dtype_size((rj_dtype)core_dtype(gm));
}

static size_t gemm_esc(const lgemm *gm) {
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
static void gemm_full(const gemm_core *g, uint8_t ct, bool tw, int64_t rows, int64_t K, int64_t N, const void *a,
                      int64_t lda, const void *w, int64_t ldb, void *c, int64_t ldc) {
    int tb = tw ? BLAS_TRANS : BLAS_NO_TRANS;
    int la = (int)(lda > 0 ? lda : 1), lb = (int)(ldb > 0 ? ldb : 1), lc = (int)(ldc > 0 ? ldc : 1);
    if (rows <= 0 || N <= 0) return;
    if (ct == RJ_BF16) /* GC_SBGEMM: only where the BLAS has it */
        g->bl->sbgemm(BLAS_ROW_MAJOR, BLAS_NO_TRANS, tb, (int)rows, (int)N, (int)K, 1.0f, a, la, w, lb, 0.0f, c, lc);
    else if (g->bl->own) /* f32 only: gemm_lib leaves f64 products to the JIT's loops then */
        sgemm_run(g->bl->own, false, tw, rows, N, K, 1.0f, a, la, w, lb, 0.0f, c, lc, g->pack);
    else if (ct == RJ_F64)
        g->bl->dgemm(BLAS_ROW_MAJOR, BLAS_NO_TRANS, tb, (int)rows, (int)N, (int)K, 1.0, a, la, w, lb, 0.0, c, lc);
    else
        g->bl->sgemm(BLAS_ROW_MAJOR, BLAS_NO_TRANS, tb, (int)rows, (int)N, (int)K, 1.0f, a, la, w, lb, 0.0f, c, lc);
}

/* w as the core reads it: from element off of buffer p, rows ld apart (0: K or N). */
typedef struct wsrc {
    const char *p;
    int64_t off, ld;
} wsrc;

static void gemm_call(const gemm_core *g, const lgemm *gm, int64_t rows, int64_t K, int64_t N, const void *a,
                      const wsrc *w, void *c) {
    if (g->packed_w) {
        sgemm_run_packed(g->pk, rows, N, K, a, K, g->packed_w, c, N, g->pack);
        return;
    }
    const char *wp = w->p + (size_t)w->off * gemm_es(gm); /* a slice of a weight: its first element */
    gemm_full(g, core_dtype(gm), gm->w_nk, rows, K, N, a, K, wp, w->ld ? w->ld : gm->w_nk ? K : N, c, N);
}

/* The first physical row of item b in a buffer addressed by symbol `sym`'s offsets (-1: the
 * class's logical offsets). */
static int64_t item_row(const run_view *v, int32_t rsym, int32_t cls, int64_t item) {
    return rsym >= 0 ? v->sym[rsym].off[item] : v->cls[cls].loff[item];
}

/* Per-item products (GEMM_QK, GEMM_PV): rows [i0, i1) of item `it` into C. */
static void gemm_item_chunk(const gemm_core *g, const lgemm *gm, const run_view *v, const launch_mem *m,
                            const char *wbuf, int64_t it, int64_t i0, int64_t i1, int64_t K, int64_t N, size_t es,
                            const void *chunk_a, void *chunk_c) {
    int32_t c = gm->a_cls, cb = gm->b_cls; /* the rows' class and the keys' (two in cross attention) */
    int64_t len = v->cls[cb].loff[it + 1] - v->cls[cb].loff[it];
    const char *w = wbuf + (size_t)item_row(v, gm->b_sym, cb, it) * (size_t)(gm->mode == GEMM_QK ? K : N) * es;
    uint8_t ct = core_dtype(gm);
    if (gm->mode == GEMM_QK) { /* q rows @ kᵀ: len columns; q widened by the prologue */
        const char *q = gm->prologue >= 0 ? chunk_a
                        : (const char *)(uintptr_t)m->buf[gm->a_buf] + (size_t)(item_row(v, gm->a_sym, c, it) + i0) * (size_t)K * es;
        gemm_full(g, ct, true, i1 - i0, K, len, q, K, w, K, chunk_c, len);
        return;
    }
    const char *p = gm->prologue >= 0 ? chunk_a
                                      : (const char *)(uintptr_t)m->buf[gm->a_buf] +
                                            (size_t)(run_pair_off(v, pair_key(v->plan->nsym, c, cb))[it] + i0 * len) *
                                                es; /* the item's block */
    gemm_full(g, ct, false, i1 - i0, len, N, p, len, w, N, chunk_c, N);
}

/* C rows [lo, hi) of the product: x's rows from its buffer (split where items are not
 * adjacent in memory: a view with holes) or from the prologue's chunk A. */
static void gemm_chunk(const gemm_core *g, const lgemm *gm, const run_view *v, const launch_mem *m, const wsrc *w,
                       int64_t lo, int64_t hi, int64_t K, int64_t N, size_t es, size_t esc, const void *chunk_a,
                       void *chunk_c) {
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
                      (char *)chunk_c + (size_t)(s0 - lo) * (size_t)N * esc);
        it = end + 1;
    }
}

/* Rows per chunk: the chunk's C (and A) fill about L2, where the epilogue reads them back.
 * Smaller chunks keep them in L2 more surely, but every BLAS call packs all of w again: at
 * K = 256, N = 1024 on a 2 MiB L2, 64-row chunks ran at 0.73x the BLAS alone, 256 rows at
 * 0.97x, 512 rows (2 MiB of C) at 1.0-1.07x (bench W7). At least 16 rows, at most 4096. */
static int64_t gemm_rows_per_chunk(int64_t N, int64_t K, size_t es, size_t esc, bool prologue, int64_t l2) {
    int64_t row = N * (int64_t)esc + (prologue ? K * (int64_t)es : 0), r = row > 0 ? l2 / row : 4096;
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
    size_t es, esc;        /* the core's operand elements, C's */
    wsrc w;                /* w as the core reads it (widened: the run's f32 copy) */
    int64_t *seen;         /* GEMM_ATTN, 16-bit: per slot, the (item, kv head) whose k, v it holds */
    int64_t maxlen, h_off; /* GEMM_ATTN, 16-bit: the longest item; where a slot's f32 tiles start */
    const int64_t *ch;     /* per-item chunks: item, first row, end row (GEMM_ATTN: and head) */
    char *sc;
    int64_t per, a_bytes, c_bytes; /* a slot's scratch: A's chunk, C's chunk, the own sgemm's packing */
    const sgemm_kernel *pk; /* w packed once for all chunks (rows_prepack) by this kernel, into packed_w */
    float *packed_w;
    bool small; /* GEMM_ATTN, f32: items of fewer than ATTN_OWN_LEN keys by head_gemm (util/head_gemm.c) */
    bool native; /* GEMM_ATTN: the weights by util/head_softmax.c, not the kernel (lgemm.att_plain) */
    bool nt;     /* GEMM_ROWS: the epilogue's streaming stores bypass the cache (cpu_run_gemm) */
} gemm_job;

/* Rows [lo, hi) of the product's kernels (prologue, epilogue) with the slot's chunk buffers. */
static void gemm_range(const gemm_job *g, int32_t ki, int64_t lo, int64_t hi, int slot) {
    char *ca = g->sc + g->per * slot;
    call_range(g->r.code, g->lp, ki, g->r.v, g->r.pl, g->r.m, lo, hi, slot, ca, ca + g->a_bytes, 0, g->nt);
}

static void gemm_items_task(void *arg, int64_t q, int slot) {
    const gemm_job *g = arg;
    const lgemm *gm = &g->r.k->gemm;
    const int64_t *lo = g->r.v->cls[gm->a_cls].loff;
    int64_t it = g->ch[3 * q], i0 = g->ch[3 * q + 1], i1 = g->ch[3 * q + 2];
    char *ca = g->sc + g->per * slot, *cc = ca + g->a_bytes;
    gemm_core core = {.bl = g->bl, .pack = cc + g->c_bytes};
    if (gm->prologue >= 0) gemm_range(g, gm->prologue, lo[it] + i0, lo[it] + i1, slot);
    gemm_item_chunk(&core, gm, g->r.v, g->r.m, g->w.p, it, i0, i1, g->K, g->N, g->es, ca, cc);
    gemm_range(g, g->r.ki, lo[it] + i0, lo[it] + i1, slot);
}

static void gemm_rows_task(void *arg, int64_t c, int slot) {
    const gemm_job *g = arg;
    const lgemm *gm = &g->r.k->gemm;
    int64_t lo = c * g->R, hi = lo + g->R < g->units ? lo + g->R : g->units;
    char *ca = g->sc + g->per * slot, *cc = ca + g->a_bytes;
    gemm_core core = {.bl = g->bl, .pack = cc + g->c_bytes, .pk = g->pk, .packed_w = g->packed_w};
    if (gm->prologue >= 0) gemm_range(g, gm->prologue, lo, hi, slot);
    gemm_chunk(&core, gm, g->r.v, g->r.m, &g->w, lo, hi, g->K, g->N, g->es, g->esc, ca, cc);
    gemm_range(g, g->r.ki, lo, hi, slot);
}

/* ---- 16-bit operands widened to f32 (GC_WIDEN) ------------------------------------------- */

/* w's 16-bit rows, widened once per run into dst: GEMM_ROWS the matrix (or a weight's slice)
 * in pieces of WIDEN_ROWS rows, contiguous in dst; QK and PV each item's rows, at the same
 * rows of dst as in the buffer (holes stay unwritten). */
#define WIDEN_ROWS 256
typedef struct widen_job {
    const lgemm *gm;
    const run_view *v;
    const uint16_t *src;
    float *dst;
    int64_t rows, cols, lds; /* GEMM_ROWS */
} widen_job;

static void widen_task(void *arg, int64_t u, int slot) {
    const widen_job *j = arg;
    const lgemm *gm = j->gm;
    bool bf16 = gm->dtype == RJ_BF16;
    (void)slot;
    if (gm->mode == GEMM_ROWS) {
        int64_t r0 = u * WIDEN_ROWS, r1 = r0 + WIDEN_ROWS < j->rows ? r0 + WIDEN_ROWS : j->rows;
        half_rows_to_f32(j->dst + r0 * j->cols, j->cols, j->src + r0 * j->lds, j->lds, r1 - r0, j->cols, bf16);
        return;
    }
    const int64_t *lk = j->v->cls[gm->b_cls].loff;
    int64_t row = item_row(j->v, gm->b_sym, gm->b_cls, u);
    half_rows_to_f32(j->dst + row * j->cols, j->cols, j->src + row * j->cols, j->cols, lk[u + 1] - lk[u], j->cols, bf16);
}

/* The f32 copy's bytes (0 unless GC_WIDEN), and the job that fills it (units: *n). */
static int64_t widen_plan(const lgemm *gm, const run_view *v, const launch_mem *m, int64_t K, int64_t N,
                          widen_job *j, int64_t *n) {
    *n = 0;
    if (gm->core != GC_WIDEN) return 0;
    *j = (widen_job){.gm = gm, .v = v, .src = (const uint16_t *)(uintptr_t)m->buf[gm->w_buf]};
    if (gm->mode == GEMM_ROWS) {
        j->rows = gm->w_nk ? N : K, j->cols = gm->w_nk ? K : N;
        j->lds = gm->w_ld ? gm->w_ld : j->cols, j->src += gm->w_off;
        *n = (j->rows + WIDEN_ROWS - 1) / WIDEN_ROWS;
        return (j->rows * j->cols * (int64_t)sizeof(float) + 63) / 64 * 64;
    }
    int64_t B = v->cls[gm->b_cls].batch, end = 0;
    const int64_t *lk = v->cls[gm->b_cls].loff;
    for (int64_t it = 0; it < B; it++) {
        int64_t e = item_row(v, gm->b_sym, gm->b_cls, it) + lk[it + 1] - lk[it];
        end = e > end ? e : end;
    }
    j->cols = gm->mode == GEMM_QK ? K : N;
    *n = B;
    return (end * j->cols * (int64_t)sizeof(float) + 63) / 64 * 64;
}

/* Widens w into dst (the run's scratch, ahead of the chunk buffers) and points g->w at it. */
static void widen_run(rj_ctx *ctx, int workers, widen_job *j, int64_t n, float *dst, gemm_job *g) {
    if (!n) return;
    j->dst = dst;
    pool_run(ctx, ((const cpu_state *)ctx->slot[SLOT_CPU].state)->pool, n, workers < n ? workers : (int)n, widen_task, j);
    g->w = (wsrc){.p = (const char *)dst};
}

/* Rows in chunks pack w once per chunk in a BLAS's sgemm: 10-17% of the CoRa module's time
 * (perf: OpenBLAS 0.3.21's sgemm_incopy on the QKV and output projections, 2 threads, SQuAD's
 * and CoLA's lengths), as much as the epilogues and the attention's softmax together. An f32
 * product of several chunks (or large enough to be split among workers: rows_fine) therefore
 * runs on ragjit's own sgemm with w packed once, by the pool, before the chunks (its kernel is within a few percent of OpenBLAS's on these chunks,
 * bench_gemm), unless only the portable kernel runs here. */
static const sgemm_kernel *rows_prepack(const blas_fns *bl, const lgemm *gm, int64_t nchunks) {
    if (nchunks < 2) return NULL;
    /* bf16 operands by ragjit's own sbgemm (util/amx.c's tiles, util/bf16dot.c): w in its layout */
    if (gm->core == GC_SBGEMM) return bl->sbgemm_kernel;
    if (gm->dtype != RJ_F32) return NULL;
    if (bl->own) return bl->own;
    const sgemm_kernel *k = sgemm_kernel_get(SGEMM_BEST);
    return k->isa == SGEMM_PORTABLE ? NULL : k;
}

/* A short product's chunks on several workers, finer: at least ROWS_FINE_PER_WORKER a worker,
 * of whole slivers (at least two each), where the L2 rule above gave fewer. CoLA's QKV
 * projection (416 rows) ran as 2 chunks on 2 threads, so a worker that woke late — or lost its
 * processor to another process — held up half the product, or left the caller to run both
 * (issue 36: a late worker should delay only the small piece it holds). With w packed once
 * (pk) a chunk's rows change no element's sum, so the bits stay the same; the chunks re-read
 * the packed w from L3 more often, which measured within ±2% of the CPU time on one thread
 * (CoLA, MNLI, SQuAD; bench/NOTES.md). Whether R changed. */
#define ROWS_FINE_PER_WORKER 4
static bool rows_fine(const sgemm_kernel *pk, int64_t units, int workers, int64_t *R) {
    int64_t want = (int64_t)workers * ROWS_FINE_PER_WORKER;
    if ((units + *R - 1) / *R >= want) return false;
    int64_t r = (units + want - 1) / want;
    r = (r + pk->mr - 1) / pk->mr * pk->mr;
    if (r < 2 * pk->mr) r = 2 * pk->mr;
    if (r >= *R) return false;
    *R = r;
    return true;
}

/* ---- what a product keeps of a constant input (rj_bind_constant) ------------------------- */

/* A model's weights are the same in every run, yet every run packed (or widened) each
 * product's w again: 4.6% of the encoder's run, 42 MB read and written for six layers, and
 * ~10% of a CoLA-sized attention module's. Where w is an input promised constant, the packed
 * (widened) w is made by rj_bind_prepare, or else by the first run that needs it, into a copy
 * the binding keeps, and later runs use it as it is. Packing does not change the arithmetic:
 * the same kernel multiplies the same panels, so results are the same bits with and without
 * the promise.
 *
 * The copies of all products share one block of the binding, laid out once for the products
 * and shapes of the run (cpu_consts_settle), in huge pages like the scratch: each in its own
 * small-page block, the micro-kernel read the panels of the copies 5% slower than those packed
 * into the scratch in the run (perf, the encoder: its time with the promise no better than
 * without), TLB misses on panels walked once per chunk. A copy is keyed by what was packed
 * (the packing kernel, the shape and the view: a weight's slice, its transposition) and by
 * which binding of the input it came from, so binding the input again makes it stale; a new
 * layout (other shapes) makes every copy stale. Room is kept for every product over a
 * constant weight, also one whose rows fit one chunk this run (packed by no run then).
 *
 * Without rj_bind_prepare, the copies are made over a binding's first runs: each run makes
 * the next of those not made, in order, up to a CONST_RUNS-th of their bytes (at least one),
 * and packs the others into its scratch as a run without the promise does. The cost of a copy
 * is mostly its fresh memory (42 MB for the encoder: its huge pages' first faults, a few ms
 * to 80 ms in a VM, where packing into the scratch costs ~3 ms a run), so the run touches the
 * pages of its share of the block at once, on the pool, ahead of its products: the encoder's
 * first run went from 1.10-1.11 to 1.08-1.09 of its later ones (medians of 12 fresh
 * processes), the slowest of the next four 1.06-1.07. Touching each copy's pages as it is
 * made was slower (1.23: a copy of one or two huge pages is touched by one thread); so was
 * letting the packing fault them (1.16). */
#define CONST_RUNS 4

/* The binding of kernel ki's w, where w is an input. */
static const run_in *w_input(const run_view *v, int32_t ki) {
    return &v->in[v->lp->bufs[v->lp->kernels[ki].gemm.w_buf].index];
}

/* Whether kernel ki is a product of rows by a weight promised constant. */
static bool const_weight(const run_view *v, const lprog *lp, int32_t ki) {
    const lgemm *gm = &lp->kernels[ki].gemm;
    return gm->on && gm->mode == GEMM_ROWS && lp->bufs[gm->w_buf].kind == LB_INPUT && w_input(v, ki)->constant;
}

/* Bytes of kernel ki's copy of its w in this run's shapes, or 0 where it keeps none. */
static int64_t const_need(const run_view *v, const lprog *lp, int32_t ki, const blas_fns *bl) {
    const lgemm *gm = &lp->kernels[ki].gemm;
    if (!bl || !const_weight(v, lp, ki)) return 0;
    int64_t K = run_dim(v, gm->K), N = run_dim(v, gm->N);
    if (gm->core == GC_WIDEN) return (N * K * (int64_t)sizeof(float) + 63) / 64 * 64;
    const sgemm_kernel *pk = rows_prepack(bl, gm, 2); /* as a run of several chunks packs */
    return pk ? ((int64_t)sgemm_packed_b_bytes(pk, N, K) + 63) / 64 * 64 : 0;
}

rj_status cpu_consts_settle(const run_view *v, bool dry) {
    host_mem *hm = v->mem->host;
    const lprog *lp = v->lp;
    int64_t total = 0;
    bool moved = false, any = false;
    for (int32_t ki = 0; ki < lp->nkernels && !any; ki++) any = const_weight(v, lp, ki);
    const blas_fns *bl = any ? blas_get() : NULL; /* loaded by the first product otherwise */
    if (any && !hm->consts) {
        if (!(hm->consts = mem_zalloc(v->ctx, sizeof(const_copy) * (size_t)lp->nkernels))) return RJ_ERR_NOMEM;
        hm->nconsts = lp->nkernels;
    }
    for (int32_t ki = 0; ki < hm->nconsts; ki++) {
        const_copy *c = &hm->consts[ki];
        int64_t bytes = const_need(v, lp, ki, bl);
        moved = moved || c->bytes != bytes || c->off != total;
        c->off = total, c->bytes = bytes;
        total += bytes;
        if (c->valid && (!bytes || w_input(v, ki)->gen != c->gen)) c->valid = false;
    }
    hm->const_bytes = total;
    rj_status s = RJ_OK;
    char *at = NULL;
    bool fresh = false;
    if (!total) host_block_free(v->ctx, &hm->const_block);
    else if (!(s = run_reserve(v, total, "the copies kept of constant inputs", -1))) {
        if (!(at = host_block_fresh(v->ctx, &hm->const_block, (size_t)total, host_huge_pages(), &fresh)))
            s = RJ_ERR_NOMEM;
        else if (fresh) host_block_advise(&hm->const_block);
    }
    bool stale = moved || at != hm->const_at;
    for (int32_t ki = 0; ki < hm->nconsts; ki++) {
        const_copy *c = &hm->consts[ki];
        if (stale) c->valid = c->idle = false;
        else if (c->given && !c->valid) c->idle = true; /* the last run's product packed nothing */
        c->given = false;
    }
    hm->const_at = at;
    /* the copies this run makes: those not made (nor idle), in order, up to its share of all
     * bytes (at least one); the pages from the first to the last touched at once, on the pool */
    int64_t share = dry ? total : (total + CONST_RUNS - 1) / CONST_RUNS, lo = -1, hi = 0, sum = 0;
    for (int32_t ki = 0; at && ki < hm->nconsts; ki++) {
        const_copy *c = &hm->consts[ki];
        if (!c->bytes || c->valid || c->idle) continue;
        if (sum && sum + c->bytes > share) break;
        if (lo < 0) lo = c->off;
        hi = c->off + c->bytes, sum += c->bytes, c->given = true;
    }
    if (lo >= 0) cpu_touch(v->ctx, at + lo, (size_t)(hi - lo));
    return s;
}

/* Kernel ki's room for a copy of `bytes` of its w, or NULL where it keeps none. */
static char *const_room(const run_view *v, int32_t ki, int64_t bytes) {
    const host_mem *hm = v->mem->host;
    if (ki >= hm->nconsts || !hm->const_at || !bytes || hm->consts[ki].bytes < bytes) return NULL;
    return hm->const_at + hm->consts[ki].off;
}

/* Whether kernel ki's copy is made as key says: from this binding of the input, by the same
 * packing of the same view. */
static bool const_current(const run_view *v, int32_t ki, const int64_t key[7]) {
    const const_copy *c = &v->mem->host->consts[ki];
    return c->valid && c->gen == w_input(v, ki)->gen && !memcmp(c->key, key, sizeof c->key);
}

/* Whether this run makes kernel ki's copy (not made as key says): whether it is one of those
 * cpu_consts_settle gave this run. From here it counts as made, as key says (the caller makes
 * it before anything reads it); else as not made, for a later run's share (also where it was
 * idle: its product packs again). */
static bool const_turn(const run_view *v, int32_t ki, const int64_t key[7]) {
    const_copy *c = &v->mem->host->consts[ki];
    c->valid = c->given, c->idle = false;
    if (!c->valid) return false;
    c->gen = w_input(v, ki)->gen;
    memcpy(c->key, key, sizeof c->key);
    return true;
}

static void pack_w_task(void *arg, int64_t block, int slot) {
    (void)slot;
    const gemm_job *g = arg;
    const lgemm *gm = &g->r.k->gemm;
    const char *w = (const char *)(uintptr_t)g->r.m->buf[gm->w_buf] + (size_t)gm->w_off * g->es; /* f32, or bf16 (AMX) */
    sgemm_pack_b_block(g->pk, gm->w_nk, g->N, g->K, (const float *)(uintptr_t)w,
                       gm->w_ld ? gm->w_ld : gm->w_nk ? g->K : g->N, block, g->packed_w);
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
    size_t es = gemm_es(gm), esc = gemm_esc(gm);
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
    int64_t acols = gm->mode == GEMM_QK ? K : maxlen; /* A: q's rows (widened) or p's */
    int64_t row = (gm->mode == GEMM_QK ? maxlen : N) * (int64_t)esc + (pro ? acols * (int64_t)es : 0);
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
    int64_t a_bytes = pro ? (R * acols * (int64_t)es + 63) / 64 * 64 : 0;
    int64_t c_bytes = (R * (gm->mode == GEMM_QK ? maxlen : N) * (int64_t)esc + 63) / 64 * 64;
    int64_t big = maxlen > K ? maxlen : K, p_bytes = gemm_pack_bytes(bl, R, big > N ? big : N, big), nw;
    widen_job wj;
    int64_t w_bytes = widen_plan(gm, v, m, K, N, &wj, &nw);
    int64_t per = a_bytes + c_bytes + p_bytes, bytes = w_bytes + per * workers;
    rj_status s = RJ_OK;
    char *sc = cpu_run_scratch(v, o, bytes, scratch_reserved, "a GEMM's chunk buffers", &s);
    if (!sc) goto out;
    gemm_job g = {.r = {.code = code, .k = k, .ki = ki, .v = v, .pl = pl, .m = m}, .lp = lp, .bl = bl, .K = K,
                  .N = N, .es = es, .esc = esc, .w = {.p = (const char *)(uintptr_t)m->buf[gm->w_buf]}, .ch = ch,
                  .sc = sc + w_bytes, .per = per, .a_bytes = a_bytes, .c_bytes = c_bytes};
    widen_run(ctx, o->workers, &wj, nw, (float *)sc, &g);
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

/* An attention's products (a 16-bit one's on its widened tiles) on items of at least this
 * many keys go to ragjit's own sgemm even where a BLAS serves: its kernels read A (q's rows,
 * then the weights in C) in place, where OpenBLAS 0.3.21 packs both operands of every call and zeroes C for beta = 0 (a fifth of
 * the attention's time on SQuAD's lengths, perf). bench_gemm, one thread, head of 64, own over
 * OpenBLAS: q kᵀ 0.77 / 0.96 / 1.06 / 1.07 / 1.12 and P v 0.80 / 0.84 / 0.90 / 1.26 / 1.28 at
 * 48 / 64 / 96 / 128 / 192 keys; on short items OpenBLAS's small-matrix kernels win by far
 * (13 keys: 0.10 and 0.51), so those stay with the BLAS, or rather go to head_gemm where the
 * CPU has AVX-512 (attention_small below). */
#define ATTN_OWN_LEN 128

/* C's rows [i0, i1) of item it (len scores each), head h, into the softmax's weights: by the
 * runtime's own code where F is the scores times a constant (g->native; a 16-bit attention's
 * scores rounded as its ops round them), else by the kernel. */
static void attention_weights(const gemm_job *g, int64_t it, int64_t h, int64_t i0, int64_t i1, int64_t len, char *cc,
                              int slot) {
    const lgemm *gm = &g->r.k->gemm;
    const int64_t *lo = g->r.v->cls[gm->a_cls].loff;
    int round = gm->dtype == RJ_BF16 ? HS_ROUND_BF16 : gm->dtype == RJ_F16 ? HS_ROUND_F16 : HS_ROUND_NONE;
    if (g->native) head_softmax_rows(i1 - i0, len, (float *)cc, len, gm->att_scale, gm->att_div, gm->att_safe, round);
    else call_range(g->r.code, g->lp, g->r.ki, g->r.v, g->r.pl, g->r.m, lo[it] + i0, lo[it] + i1, slot, NULL, cc, h,
                    false);
}

/* attention_task for 16-bit q, k, v: the chunk's q rows widened, k and v of the item's kv head
 * widened unless the slot holds them already (an item's heads and chunks come in a row), both
 * products in f32, the output rounded once as it is stored. Per slot after C and the packing
 * scratch (a_bytes of it): q [R x K], k [len x K], v [len x N], o [R x N], f32. */
static void attention_half(const gemm_job *g, const gemm_core *core, int64_t it, int64_t h, int64_t hk, int64_t i0,
                           int64_t i1, char *cc, int slot) {
    const lgemm *gm = &g->r.k->gemm;
    const run_view *v = g->r.v;
    const lview *at = gm->att;
    int32_t c = gm->a_cls;
    int64_t len = v->cls[c].loff[it + 1] - v->cls[c].loff[it], K = g->K, N = g->N, R = g->R;
    bool bf = gm->dtype == RJ_BF16;
    float *q = (float *)(cc + g->h_off), *k = q + R * K, *vv = k + g->maxlen * K, *o = vv + g->maxlen * N;
    half_rows_to_f32(q, K, (const uint16_t *)view_at(v, g->r.m, &at[0], c, it, i0, h, 2), at[0].ld, i1 - i0, K, bf);
    if (g->seen[2 * slot] != it || g->seen[2 * slot + 1] != hk) {
        half_rows_to_f32(k, K, (const uint16_t *)view_at(v, g->r.m, &at[1], c, it, 0, hk, 2), at[1].ld, len, K, bf);
        half_rows_to_f32(vv, N, (const uint16_t *)view_at(v, g->r.m, &at[2], c, it, 0, hk, 2), at[2].ld, len, N, bf);
        g->seen[2 * slot] = it, g->seen[2 * slot + 1] = hk;
    }
    bool small = g->small && len < ATTN_OWN_LEN; /* as f32 ones: short items by head_gemm */
    if (small) head_gemm_nt(i1 - i0, len, K, q, K, k, K, (float *)cc, len, core->pack);
    else gemm_full(core, RJ_F32, true, i1 - i0, K, len, q, K, k, K, cc, len);
    attention_weights(g, it, h, i0, i1, len, cc, slot);
    if (small) head_gemm_nn(i1 - i0, N, len, (const float *)cc, len, vv, N, o, N);
    else gemm_full(core, RJ_F32, false, i1 - i0, len, N, cc, len, vv, N, o, N);
    half_rows_from_f32((uint16_t *)view_at(v, g->r.m, &at[3], c, it, i0, h, 2), at[3].ld, o, N, i1 - i0, N, bf);
}

/* Where rows [i0, i1) of item it, head h read and write (q at[0] from row i0, k at[1] and v at[2]
 * of its kv head from row 0, o at[3] from row i0), and the item's length. */
static int64_t head_views(const gemm_job *g, int64_t it, int64_t h, int64_t i0, char *p[4]) {
    const lgemm *gm = &g->r.k->gemm;
    const run_view *v = g->r.v;
    int32_t c = gm->a_cls;
    int64_t hk = h / (gm->heads / gm->kv_heads);
    for (int x = 0; x < 4; x++)
        p[x] = view_at(v, g->r.m, &gm->att[x], c, it, x == 0 || x == 3 ? i0 : 0, x == 0 || x == 3 ? h : hk, g->es);
    return v->cls[c].loff[it + 1] - v->cls[c].loff[it];
}

/* Rows [i0, i1) of item it, head h, by head_gemm (f32, a short item): S = Q Kᵀ into C, the
 * kernel's weights in C, O = P V into the head's columns of the result. */
static void attention_small(const gemm_job *g, int64_t it, int64_t h, int64_t i0, int64_t i1, char *cc, void *pack,
                            int slot) {
    const lview *at = g->r.k->gemm.att;
    char *p[4];
    int64_t len = head_views(g, it, h, i0, p);
    head_gemm_nt(i1 - i0, len, g->K, (const float *)p[0], at[0].ld, (const float *)p[1], at[1].ld, (float *)cc, len,
                 pack);
    attention_weights(g, it, h, i0, i1, len, cc, slot);
    head_gemm_nn(i1 - i0, g->N, len, (const float *)cc, len, (const float *)p[2], at[2].ld, (float *)p[3], at[3].ld);
}

/* Rows [r0, r1) of an operand's head h (cols floats each) asked into the cache. Inlined: a
 * static function of nothing but prefetches is found free of side effects (GCC's ipa-pure-const)
 * and its calls are dropped. */
__attribute__((always_inline)) static inline void prefetch_rows(const gemm_job *g, const lview *w, int64_t it,
                                                                int64_t r0, int64_t r1, int64_t h, int64_t cols) {
    for (int64_t r = r0; r < r1; r++) {
        const char *p = view_at(g->r.v, g->r.m, w, g->r.k->gemm.a_cls, it, r, h, g->es);
        for (int64_t e = 0; e < cols * (int64_t)g->es; e += 64) __builtin_prefetch(p + e, 0, 2);
    }
}

/* Rows [i0, i1) of item it, head h, by the BLAS (or the own sgemm, core): C = Q Kᵀ, the
 * kernel's weights in C, O = P V into the head's columns of the result. */
static void attention_blas(const gemm_job *g, const gemm_core *core, int64_t it, int64_t h, int64_t i0, int64_t i1,
                           char *cc, int slot) {
    const lgemm *gm = &g->r.k->gemm;
    const lview *at = gm->att;
    char *p[4];
    int64_t len = head_views(g, it, h, i0, p);
    gemm_full(core, gm->dtype, true, i1 - i0, g->K, len, p[0], at[0].ld, p[1], at[1].ld, cc, len);
    attention_weights(g, it, h, i0, i1, len, cc, slot);
    gemm_full(core, gm->dtype, false, i1 - i0, len, g->N, cc, len, p[2], at[2].ld, p[3], at[3].ld);
}

/* All heads of a short item's rows [i0, i1), one after another, the next head's q, k and v
 * asked into the cache while this one computes: a head's columns are 256 bytes of rows
 * 6 KiB apart (the QKV projection's), a stride no hardware prefetcher follows, so each
 * head's first reads waited on memory (perf: the loads of K's transpose and of V's rows). */
static void attention_heads(const gemm_job *g, int64_t it, int64_t i0, int64_t i1, char *cc, void *pack, int slot) {
    const lgemm *gm = &g->r.k->gemm;
    const int64_t *lo = g->r.v->cls[gm->a_cls].loff;
    int64_t len = lo[it + 1] - lo[it], per = gm->heads / gm->kv_heads;
    for (int64_t h = 0; h < gm->heads; h++) {
        if (h + 1 < gm->heads) {
            prefetch_rows(g, &gm->att[0], it, i0, i1, h + 1, g->K);
            prefetch_rows(g, &gm->att[1], it, 0, len, (h + 1) / per, g->K);
            prefetch_rows(g, &gm->att[2], it, 0, len, (h + 1) / per, g->N);
        }
        attention_small(g, it, h, i0, i1, cc, pack, slot);
    }
}

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
    if (dtype_is_half((rj_dtype)gm->dtype)) {
        attention_half(g, &core, it, h, hk, i0, i1, cc, slot);
        return;
    }
    if (h < 0) attention_heads(g, it, i0, i1, cc, core.pack, slot);
    else attention_blas(g, &core, it, h, i0, i1, cc, slot);
}

/* Units of (item, head, chunk of R query rows): R rows of the longest item's scores fill at
 * most half of L2, where the kernel and the second product read them back, and a worker's C
 * at most 1/32 of the result (the attention's memory stays about its output's: 1.03x with
 * one worker on RACE's lengths, per head); the units are at least 32 so that a long item never
 * serialises the run (R at least 16 rows all the same). Items go longest first, so the pool's
 * dynamic claiming ends on short units; an item's heads and chunks follow each other, so its
 * k and v stay in cache. Neither depends on the thread count (chunk shapes change a BLAS's
 * rounding). An f32 item of fewer than ATTN_OWN_LEN keys is one unit per chunk for all its
 * heads (head -1) by head_gemm: the next head's operands are fetched while one computes. */
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
    size_t es = gemm_esc(gm); /* C's, and the operands' but for 16-bit ones (widened, attention_half) */
    bool half = dtype_is_half((rj_dtype)gm->dtype);
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
    /* short items by head_gemm: f32 ones all heads in one unit, 16-bit ones head by head on their
     * widened tiles (attention_half) */
    bool small = (gm->dtype == RJ_F32 || half) && head_gemm_ok(), all_heads = small && !half;
    bool native = gm->att_plain && (gm->dtype == RJ_F32 || half) && head_softmax_ok();
    for (int64_t it = 0; it < B; it++)
        n += (lo[it + 1] - lo[it] + R - 1) / R * (all_heads && lo[it + 1] - lo[it] < ATTN_OWN_LEN ? 1 : H);
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
        bool all = all_heads && len < ATTN_OWN_LEN; /* h = -1: every head in one unit */
        for (int64_t h = all ? -1 : 0; h < (all ? 0 : H); h++)
            for (int64_t i0 = 0; i0 < len; i0 += R, u++)
                ch[4 * u] = it, ch[4 * u + 1] = h, ch[4 * u + 2] = i0, ch[4 * u + 3] = i0 + R < len ? i0 + R : len;
    }
    int workers = o->workers < n ? o->workers : (int)n;
    blas_fns own = {.name = "ragjit", .own = sgemm_kernel_get(SGEMM_BEST)};
    const blas_fns *own_fns = (gm->dtype == RJ_F32 || half) && !bl->own && maxlen >= ATTN_OWN_LEN ? &own : NULL;
    int64_t K = run_dim(v, gm->K), N = run_dim(v, gm->N), big = maxlen > K ? maxlen : K;
    int64_t c_bytes = (R * maxlen * (int64_t)es + 63) / 64 * 64;
    int64_t p_bytes = (gemm_pack_bytes(own_fns ? own_fns : bl, R, maxlen > N ? maxlen : N, big) + 63) / 64 * 64;
    int64_t hg = (int64_t)head_gemm_scratch_bytes(maxlen < ATTN_OWN_LEN ? maxlen : ATTN_OWN_LEN, K); /* K's transpose */
    p_bytes = small && p_bytes < hg ? (hg + 63) / 64 * 64 : p_bytes;
    int64_t h_bytes = half ? ((R + maxlen) * (K + N) * (int64_t)sizeof(float) + 63) / 64 * 64 : 0;
    int64_t per = c_bytes + p_bytes + h_bytes;
    rj_status s = RJ_OK;
    char *sc = cpu_run_scratch(v, o, per * workers, scratch_reserved, "an attention's chunk buffers", &s);
    int64_t *seen = half ? mem_alloc(ctx, sizeof(int64_t) * 2 * (size_t)workers) : NULL;
    if (half && !seen) s = RJ_ERR_NOMEM;
    for (int w = 0; seen && w < 2 * workers; w++) seen[w] = -1;
    if (sc && !s) {
        gemm_job g = {.r = {.code = code, .k = k, .ki = ki, .v = v, .pl = pl, .m = m}, .lp = lp, .bl = bl,
                      .own = own_fns, .K = K, .N = N, .R = R, .es = es, .ch = ch, .sc = sc, .per = per,
                      .c_bytes = c_bytes, .seen = seen, .maxlen = maxlen, .h_off = c_bytes + p_bytes,
                      .small = small, .native = native};
        pool_run(ctx, st->pool, n, workers, attention_task, &g);
    }
    if (seen) mem_free(ctx, seen, sizeof(int64_t) * 2 * (size_t)workers);
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
    size_t es = gemm_es(gm), esc = gemm_esc(gm);
    bool pro = gm->prologue >= 0;
    int64_t R = gemm_rows_per_chunk(N, K, es, esc, pro, ((const cpu_state *)ctx->slot[SLOT_CPU].state)->l2_bytes);
    int64_t nchunks = gemm_even_chunks(units, &R);
    bool splits = units * (K + N) >= o->small_work; /* worth more than one worker */
    int team_w = splits ? o->workers : 1;
    /* per worker: A (with a prologue) and C, each 64-byte aligned; then w packed once, if so
     * (f32 only: a 16-bit w is widened once into its f32 copy ahead of them instead); whatever
     * the thread count, so that the bits do not depend on it */
    const sgemm_kernel *pk = rows_prepack(bl, gm, splits && nchunks < 2 ? 2 : nchunks);
    /* chunks of whole slivers of the kernel's mr rows, where that keeps their number: only the
     * last chunk ends in an edge sliver (computed whole, stored in part), not every one; the
     * edges were 2% of MNLI's samples (edge_avx512) */
    int64_t Rr = pk ? (R + pk->mr - 1) / pk->mr * pk->mr : R;
    if ((units + Rr - 1) / Rr == nchunks) R = Rr;
    if (pk && team_w > 1 && rows_fine(pk, units, team_w, &R)) nchunks = (units + R - 1) / R;
    int workers = team_w < nchunks ? team_w : (int)nchunks;
    int64_t a_bytes = pro ? (R * K * (int64_t)es + 63) / 64 * 64 : 0, c_bytes = (R * N * (int64_t)esc + 63) / 64 * 64;
    int64_t pack = pk ? ((int64_t)sgemm_scratch_bytes(pk, R, N, K) + 63) / 64 * 64 : gemm_pack_bytes(bl, R, N, K);
    int64_t per = a_bytes + c_bytes + pack, wp = pk ? (int64_t)sgemm_packed_b_bytes(pk, N, K) : 0, nw;
    widen_job wj;
    int64_t w_bytes = widen_plan(gm, v, m, K, N, &wj, &nw);
    /* w packed or widened into the binding's copy where it is a constant input, else into the
     * scratch, ahead of the chunk buffers (widened) or after them (packed) */
    int64_t key[7] = {pk ? 1 : 2, (int64_t)(uintptr_t)pk, N, K, gm->w_off, gm->w_ld, gm->w_nk};
    char *kc = pk || nw ? const_room(v, ki, pk ? wp : w_bytes) : NULL;
    bool fresh = true;
    if (kc && const_current(v, ki, key)) fresh = false;
    else if (kc && !const_turn(v, ki, key)) kc = NULL; /* a later run makes it */
    int64_t sw = kc ? 0 : w_bytes, bytes = sw + per * workers + (kc ? 0 : wp);
    bool nt = k->has_nt && units * N * (int64_t)rj_dtype_size((rj_dtype)gm->dtype) > cpu_stream_threshold(ctx);
    char *sc = cpu_run_scratch(v, o, bytes, scratch_reserved, "a GEMM's chunk buffers", &s);
    if (!sc && (s || !kc)) return s; /* sized only (dry), unless a constant's copy is to be made */
    if (!sc && !fresh) return RJ_OK;
    pool *team = ((const cpu_state *)ctx->slot[SLOT_CPU].state)->pool;
    gemm_job g = {.r = {.code = code, .k = k, .ki = ki, .v = v, .pl = &pl, .m = m}, .lp = lp, .bl = bl, .K = K,
                  .N = N, .R = R, .units = units, .es = es, .esc = esc, .sc = sc ? sc + sw : NULL, .per = per,
                  .a_bytes = a_bytes, .c_bytes = c_bytes,
                  .w = {.p = (const char *)(uintptr_t)m->buf[gm->w_buf], .off = gm->w_off, .ld = gm->w_ld},
                  .pk = pk, .packed_w = pk ? (float *)(kc ? kc : sc + sw + per * workers) : NULL,
                  .nt = nt};
    /* a constant's copy is made by one of the first runs that need it (const_turn), or ahead
     * of them by rj_bind_prepare (dry: sc is NULL, the copy all that is made) */
    if (fresh) widen_run(ctx, o->workers, &wj, nw, (float *)(kc ? kc : sc), &g);
    else if (nw) g.w = (wsrc){.p = kc};
    if (pk && fresh) {
        int64_t blocks = sgemm_packed_b_blocks(pk, N, K);
        pool_run(ctx, team, blocks, workers < blocks ? workers : (int)blocks, pack_w_task, &g);
    }
    if (sc) pool_run(ctx, team, nchunks, workers, gemm_rows_task, &g);
    return RJ_OK;
}
