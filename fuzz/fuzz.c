/*
 * fuzz.c — the harnesses' shared checks, allocator, byte reader and bindings (see fuzz.h).
 */
#include "fuzz.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/util/util.h"

/* ---- checks -------------------------------------------------------------------------- */

void fz_die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("FUZZ FINDING: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

void fz_clear(rj_ctx *ctx) {
    ctx_clear_error(ctx);
}

void fz_failed(rj_ctx *ctx, const char *call) {
    rj_status s = rj_ctx_status(ctx);
    if (s == RJ_OK || (unsigned)s >= RJ_STATUS_COUNT || !rj_status_str(s))
        fz_die("%s failed but the context's status is %d", call, (int)s);
    const char *msg = rj_ctx_error(ctx);
    if (!msg || !msg[0]) fz_die("%s failed (%s) without a message", call, rj_status_str(s));
}

void fz_failed_builder(rj_ctx *ctx, rj_status graph_before, const char *call) {
    if (graph_before != RJ_OK && rj_ctx_status(ctx) == RJ_OK) return;
    fz_failed(ctx, call);
}

bool fz_tracing(void) {
    static int on = -1;
    if (on < 0) {
        const char *t = getenv("FUZZ_TRACE");
        on = t && *t && strcmp(t, "0");
    }
    return on;
}

/* ---- the allocator ------------------------------------------------------------------- */

/* The tracker, behind a cap: a refused request is an ordinary allocation failure to ragjit. */
static void *fz_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    fz_mem *m = ud;
    if (nsize > FZ_MAX_BLOCK ||
        (nsize > osize && m->tr.live_bytes + (long long)(nsize - osize) > FZ_MAX_LIVE))
        return NULL;
    return tracking_alloc(&m->tr, ptr, osize, nsize);
}

rj_ctx *fz_ctx_new(fz_mem *m) {
    return rj_ctx_new(fz_alloc, m);
}

long fz_ctx_free(rj_ctx *ctx, fz_mem *m) {
    rj_ctx_free(ctx);
    if (m->tr.live_blocks) fz_die("leak: %ld blocks (%lld bytes) live after rj_ctx_free",
                                  m->tr.live_blocks, m->tr.live_bytes);
    if (m->tr.bad_size) fz_die("a block's size was misreported to the allocator");
    return m->tr.attempts;
}

/* ---- reading results ----------------------------------------------------------------- */

static volatile unsigned char sink;

static void touch(const void *p, size_t n) {
    const unsigned char *c = p;
    unsigned char x = 0;
    for (size_t i = 0; i < n; i++) x ^= c[i];
    sink ^= x;
}

void fz_string(rj_ctx *ctx, char *s, const char *call) {
    if (!s) {
        fz_failed(ctx, call);
        return;
    }
    touch(s, strlen(s));
    rj_string_free(ctx, s);
}

void fz_touch_tensor(const rj_tensor *t) {
    rj_tensor_info ti;
    if (rj_tensor_get_info(t, &ti) != RJ_OK) fz_die("rj_tensor_get_info failed on a tensor");
    if ((unsigned)ti.dtype >= RJ_DTYPE_COUNT || ti.rank < 0 || ti.rank > RJ_MAX_RANK ||
        (ti.ragged_dim != -1 && ti.ragged_dim != 1) || (ti.ragged_dim == 1 && ti.rank < 2))
        fz_die("tensor info out of range: dtype %d rank %d ragged_dim %d", (int)ti.dtype,
               ti.rank, ti.ragged_dim);
    int64_t numel = ti.rows, inner = 1;
    if (ti.ragged_dim == 1) {
        int64_t B = ti.shape[0];
        if (B < 0 || !ti.offsets) fz_die("jagged tensor with batch %lld, offsets %p",
                                         (long long)B, (const void *)ti.offsets);
        touch(ti.offsets, sizeof(int64_t) * (size_t)(B + 1));
        if (ti.lengths) touch(ti.lengths, sizeof(int64_t) * (size_t)B);
        if (ti.ragged_dims == 2 && (ti.rank < 3 || ti.lengths || ti.offsets[B] != ti.rows))
            fz_die("a tensor with two ragged dims of rank %d, lengths %p, blocks ending at %lld of %lld rows",
                   ti.rank, (const void *)ti.lengths, (long long)(B >= 0 ? ti.offsets[B] : -1), (long long)ti.rows);
        for (int k = ti.ragged_dims == 2 ? 3 : 2; k < ti.rank; k++) inner *= ti.shape[k];
        numel = ti.rows * inner;
    } else {
        for (int k = 0; k < ti.rank; k++) inner *= ti.shape[k];
        if (inner != ti.rows) fz_die("dense tensor of shape product %lld has rows %lld",
                                     (long long)inner, (long long)ti.rows);
    }
    if (numel < 0) fz_die("tensor with %lld elements", (long long)numel);
    if (numel && !ti.values) fz_die("tensor with %lld elements and no values", (long long)numel);
    if (numel) touch(ti.values, (size_t)numel * rj_dtype_size(ti.dtype));
}

void fz_check_results(rj_ctx *ctx, rj_bind *b, const rj_node *outputs, int n) {
    for (int i = 0; i < n; i++) {
        fz_clear(ctx);
        const rj_tensor *t = rj_bind_result(b, outputs[i]);
        if (!t) fz_die("no result for output node %d after a successful run: %s",
                       (int)outputs[i], rj_ctx_error(ctx));
        fz_touch_tensor(t);
    }
}

/* ---- bytes and randomness ------------------------------------------------------------ */

unsigned fz_byte(fz_bytes *in) {
    return in->i < in->n ? in->p[in->i++] : 0;
}

bool fz_more(const fz_bytes *in) {
    return in->i < in->n;
}

uint64_t fz_hash(const uint8_t *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

uint64_t fz_rng(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#define FZ_ARENA_BUDGET ((size_t)64 << 20)

void *fz_arena_alloc(fz_arena *a, size_t bytes) {
    if (bytes == 0) bytes = 1;
    if (bytes > FZ_ARENA_BUDGET - a->bytes) return NULL;
    if (a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 16;
        void **nb = realloc(a->blocks, cap * sizeof *nb);
        if (!nb) return NULL;
        a->blocks = nb;
        a->cap = cap;
    }
    void *p = calloc(1, bytes);
    if (!p) return NULL;
    a->bytes += bytes;
    return a->blocks[a->n++] = p;
}

void fz_arena_free(fz_arena *a) {
    for (size_t i = 0; i < a->n; i++) free(a->blocks[i]);
    free(a->blocks);
    memset(a, 0, sizeof *a);
}

/* ---- binding ------------------------------------------------------------------------- */

#define FZ_MAX_NUMEL ((int64_t)1 << 16)

int fz_sym_index(const rj_graph *g, rj_dim d) {
    int n = rj_graph_dim_count(g);
    for (int i = 0; i < n && i < FZ_MAX_SYMS; i++)
        if (rj_graph_dim_at(g, i) == d) return i;
    return -1;
}

int64_t fz_numel(const rj_graph *g, rj_node n, const fz_sizes *s) {
    rj_dim dims[RJ_MAX_RANK];
    int rank = rj_node_shape(g, n, dims), rp = -1;
    rj_dim_info info;
    for (int k = 0; k < rank && rp < 0; k++)
        if (rj_dim_get_info(g, dims[k], &info) == RJ_OK && info.kind == RJ_DIM_RAGGED) rp = k;
    int64_t c = 1;
    for (int k = 0; k < rank; k++) {
        if (k == rp - 1) continue; /* the batch dim is folded into the rows */
        int64_t v = dims[k];
        if (dims[k] < 0) {
            int i = fz_sym_index(g, dims[k]);
            if (i < 0 || !s->known[i]) return -1;
            v = k == rp ? s->rows[i] : s->val[i];
        }
        if (v < 0 || __builtin_mul_overflow(c, v, &c) || c > FZ_MAX_NUMEL) return -1;
    }
    return rank < 0 ? -1 : c;
}

void fz_fill(void *data, rj_dtype t, int64_t n, uint64_t *rng) {
    static const double special[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1e30, -1e30, 65504.0};
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = fz_rng(rng);
        double v = r % 32 == 0 ? special[(r >> 8) % FZ_LEN(special)]
                               : (double)((int64_t)((r >> 8) % 9) - 4) * 0.5;
        switch (t) {
        case RJ_BOOL: ((uint8_t *)data)[i] = (uint8_t)(r >> 8 & 1); break;
        case RJ_I32: ((int32_t *)data)[i] = r % 32 == 0 ? INT32_MIN : (int32_t)((r >> 8) % 9) - 4; break;
        case RJ_I64: ((int64_t *)data)[i] = r % 32 == 0 ? INT64_MIN : (int64_t)((r >> 8) % 9) - 4; break;
        case RJ_F32: ((float *)data)[i] = (float)v; break;
        case RJ_F64: ((double *)data)[i] = v; break;
        default: rj_value_set(t, data, i, v); break; /* f16, bf16: rounded to the format */
        }
    }
}

/* Lengths of B items: mostly 0..3, and a "same" copy of another symbol's now and then. */
static bool bind_ragged(rj_ctx *ctx, rj_bind *b, rj_dim d, int64_t B, const int64_t *like,
                        uint64_t *rng, fz_arena *a, int64_t *rows, int64_t *maxlen,
                        int64_t **lens_out) {
    int64_t *len = fz_arena_alloc(a, sizeof(int64_t) * (size_t)(B + 1));
    int64_t *off = fz_arena_alloc(a, sizeof(int64_t) * (size_t)(B + 1));
    if (!len || !off) return false;
    bool holes = fz_rng(rng) % 8 == 0; /* a view with holes: gaps between the rows */
    int64_t pos = 0;
    *maxlen = 0;
    for (int64_t k = 0; k < B; k++) {
        len[k] = like ? like[k] : (int64_t)(fz_rng(rng) % 4);
        pos += holes ? (int64_t)(fz_rng(rng) % 3) : 0;
        off[k] = pos;
        pos += len[k];
        if (len[k] > *maxlen) *maxlen = len[k];
    }
    off[B] = *rows = pos;
    *lens_out = len;
    fz_clear(ctx);
    if (rj_bind_offsets(b, d, B, off, holes ? len : NULL) != RJ_OK)
        fz_die("rj_bind_offsets of valid offsets failed: %s", rj_ctx_error(ctx));
    return true;
}

bool fz_bind_all(rj_ctx *ctx, rj_bind *b, const rj_graph *g, uint64_t *rng, fz_arena *a,
                 fz_sizes *s) {
    int ns = rj_graph_dim_count(g);
    if (ns > FZ_MAX_SYMS) return false;
    memset(s, 0, sizeof *s);
    int64_t *lens[FZ_MAX_SYMS] = {0};
    rj_dim_info info[FZ_MAX_SYMS];
    for (int i = 0; i < ns; i++)
        if (rj_dim_get_info(g, rj_graph_dim_at(g, i), &info[i]) != RJ_OK)
            fz_die("rj_dim_get_info failed on symbol %d: %s", i, rj_ctx_error(ctx));
    for (int i = 0; i < ns; i++) {
        if (info[i].kind != RJ_DIM_DENSE) continue;
        uint64_t r = fz_rng(rng) % 8;
        s->val[i] = r == 0 ? 0 : 1 + (int64_t)(r % 3);
        s->known[i] = true;
        fz_clear(ctx);
        if (rj_bind_size(b, rj_graph_dim_at(g, i), s->val[i]) != RJ_OK)
            fz_die("rj_bind_size failed: %s", rj_ctx_error(ctx));
    }
    for (int i = 0; i < ns; i++) {
        if (info[i].kind != RJ_DIM_RAGGED) continue;
        int p = fz_sym_index(g, info[i].parent), root = fz_sym_index(g, info[i].same);
        if (p < 0 || !s->known[p]) continue;
        const int64_t *like = root >= 0 && root != i && fz_rng(rng) % 16 ? lens[root] : NULL;
        if (!bind_ragged(ctx, b, rj_graph_dim_at(g, i), s->val[p], like, rng, a, &s->rows[i],
                         &s->val[i], &lens[i]))
            return false;
        s->known[i] = true;
    }
    for (int i = 0; i < ns; i++) {
        int p = fz_sym_index(g, info[i].parent);
        if (info[i].kind != RJ_DIM_MAXLEN || p < 0 || !s->known[p]) continue;
        s->val[i] = s->val[p];
        s->known[i] = true;
    }
    for (int k = 0; k < rj_graph_input_count(g); k++) {
        rj_node n = rj_graph_input_at(g, k);
        int64_t numel = fz_numel(g, n, s);
        if (numel < 0) return false;
        rj_dtype t = rj_node_dtype(g, n);
        void *data = fz_arena_alloc(a, (size_t)numel * rj_dtype_size(t));
        if (!data) return false;
        fz_fill(data, t, numel, rng);
        fz_clear(ctx);
        if (rj_bind_input(b, n, data, numel) != RJ_OK)
            fz_die("rj_bind_input failed: %s", rj_ctx_error(ctx));
    }
    return true;
}

