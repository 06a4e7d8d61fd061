/*
 * util.h — small shared helpers: checked size arithmetic, memory through the context's
 * allocator hook, and a growable text buffer.
 *
 * Every allocation in ragjit goes through mem_alloc/mem_realloc/mem_free, which call the
 * user's hook with Lua's (ptr, osize, nsize) contract. Callers therefore remember the size of
 * what they allocated; arrays keep an explicit capacity for that reason. A failed allocation
 * records RJ_ERR_NOMEM in the context and returns NULL, so call sites only propagate.
 *
 * The text buffer (sbuf) is used by every printer and error formatter. It never fails loudly:
 * an allocation failure sets a flag that sbuf_finish reports, so printing code stays linear.
 */
#ifndef RJ_UTIL_H
#define RJ_UTIL_H

#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ragjit.h"

#define RJ_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define RJ_UNUSED(x) ((void)(x))

#if defined(__GNUC__)
#define RJ_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define RJ_PRINTF(f, a)
#endif

/* Checked arithmetic on sizes: return false on overflow (or a negative operand). */
static inline bool mul_i64(int64_t a, int64_t b, int64_t *r) {
    return a >= 0 && b >= 0 && !__builtin_mul_overflow(a, b, r);
}
static inline bool add_i64(int64_t a, int64_t b, int64_t *r) {
    return a >= 0 && b >= 0 && !__builtin_add_overflow(a, b, r);
}
/* Bytes for n elements of size s, refusing anything above PTRDIFF_MAX. */
static inline bool bytes_of(int64_t n, size_t s, size_t *r) {
    int64_t b;
    if (!mul_i64(n, (int64_t)s, &b) || (uint64_t)b > (uint64_t)PTRDIFF_MAX) return false;
    *r = (size_t)b;
    return true;
}

/* The element count of a shape by NumPy's rule: 0 if a dim is 0, but the product of the
 * non-zero dims must fit all the same (NumPy refuses a larger shape as "too big" even when
 * another dim is 0), so that every partial product of the dims fits too, whatever order code
 * multiplies them in. *nonzero gets that product. False on overflow or a negative dim. */
static inline bool shape_count(int rank, const int64_t *shape, int64_t *numel, int64_t *nonzero) {
    int64_t n = 1;
    bool empty = false;
    for (int i = 0; i < rank; i++) {
        if (shape[i] == 0) empty = true;
        else if (!mul_i64(n, shape[i], &n)) return false;
    }
    *numel = empty ? 0 : n;
    if (nonzero) *nonzero = n;
    return true;
}

/* ---- the context ---------------------------------------------------------------------------
 * Defined here, at the bottom, because every layer allocates and reports errors through it.
 * It holds only what is common to all of ragjit (the allocator, the error, the settings);
 * everything a layer above keeps per context — the program cache, a backend's JIT or device
 * handles — hangs off a slot: an opaque pointer with the release hook that frees it.
 * rj_ctx_free (runtime/ctx.c) calls the hooks in slot order and knows nothing else about
 * what they hold, so no backend is named below the runtime's backend table. */
enum { CTX_SLOTS = 4 };

typedef struct ctx_slot {
    void *state;
    void (*release)(rj_ctx *ctx, void *state);
} ctx_slot;

struct rj_ctx {
    rj_alloc_fn alloc;
    void *ud;
    uint64_t id;          /* unique in the process: keys the per-thread errors (error.c) */
    int threads;          /* rj_ctx_set_threads; 0: cpus_usable() */
    rj_parallel_fn parallel; /* rj_ctx_set_parallel: the embedder's pool, or NULL: ragjit's */
    void *parallel_user;
    int64_t run_limit;    /* rj_ctx_set_memory_limit: most bytes one run may allocate */
    pthread_mutex_t lock; /* guards the slots' shared state (the program cache, a JIT) */
    ctx_slot slot[CTX_SLOTS];
    int refs;             /* rj_ctx_free's and every exported DLPack tensor's (ctx_unref) */
    char *cache_dir;      /* rj_ctx_set_cache_dir (under the lock); "" or "off": no disk cache */
    bool cache_dir_set;   /* else the environment decides (runtime/diskcache.c) */
};

/* cpus.c: the processors this process may keep busy (the affinity mask it started with,
 * capped by the cgroup's CPU quota as first read in the process); and that quota in processors,
 * rounded up (0: none), reading /proc/self/cgroup and /sys/fs/cgroup under root ("": the real
 * ones; tests give a directory of their own). */
int cpus_usable(void);
int cpus_quota(const char *root);
/* The affinity mask the process started with (false: unknown), for ragjit's worker threads. */
bool cpus_start_set(cpu_set_t *set);

static inline void ctx_lock(rj_ctx *ctx) { pthread_mutex_lock(&ctx->lock); }
static inline void ctx_unlock(rj_ctx *ctx) { pthread_mutex_unlock(&ctx->lock); }

/* Memory through the context hook (mem.c). NULL on failure, with the error recorded. */
void *mem_alloc(rj_ctx *ctx, size_t n);
void *mem_zalloc(rj_ctx *ctx, size_t n);
void *mem_realloc(rj_ctx *ctx, void *p, size_t osize, size_t nsize);
void mem_free(rj_ctx *ctx, void *p, size_t n);
/* Tensor data: 64-byte aligned (whole cache lines per row for vector loads and streaming
 * stores; a block from malloc is 16 bytes past one), 64 KiB or more starting half a page past
 * a page (no 4K aliasing against the inputs: mem.c), freed with mem_free_data and the same n. */
void *mem_alloc_data(rj_ctx *ctx, size_t n);
/* The same placement in a block of the caller's: n bytes of data fit from mem_data_place(raw, n)
 * on in a block of n + mem_data_pad(n) bytes at raw. */
size_t mem_data_pad(size_t n);
void *mem_data_place(void *raw, size_t n);
void mem_free_data(rj_ctx *ctx, void *p, size_t n);
char *mem_strdup(rj_ctx *ctx, const char *s);
void mem_strfree(rj_ctx *ctx, char *s);
/* Grows *arr (of elem-size es) so it holds at least need elements; *cap is updated. */
bool mem_grow(rj_ctx *ctx, void **arr, int32_t *cap, int32_t need, size_t es);

/* Errors (error.c): record a message for the context on the calling thread and return the
 * status. Each thread sees its own last failure, so threads sharing a context never read or
 * overwrite each other's messages. */
rj_status ctx_fail(rj_ctx *ctx, rj_status s, const char *fmt, ...) RJ_PRINTF(3, 4);
rj_status ctx_failv(rj_ctx *ctx, rj_status s, const char *fmt, va_list ap);
void ctx_clear_error(rj_ctx *ctx);
rj_status ctx_last_status(const rj_ctx *ctx);
const char *ctx_last_error(const rj_ctx *ctx);

/* A saved error, for code that must leave the caller's last error as it was. */
typedef struct ctx_error {
    rj_status status;
    char msg[2048]; /* an unknown function's message lists every function */
} ctx_error;
void ctx_error_save(const rj_ctx *ctx, ctx_error *e);
void ctx_error_restore(rj_ctx *ctx, const ctx_error *e);

/* dl.c: looks up `name` in a dlopen'd library and stores it in the function pointer at fnptr;
 * false if it is missing. */
bool dl_sym(void *lib, const char *name, void *fnptr);

/* blas.c: the CPU's GEMMs: the host's CBLAS (row-major calls), or ragjit's own sgemm (own set,
 * sgemm and dgemm NULL: f64 products stay JIT loops), or NULL for neither (RAGJIT_BLAS=loops). */
typedef struct sgemm_kernel sgemm_kernel;
typedef struct blas_fns {
    const char *name;
    void (*sgemm)(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                  const float *b, int ldb, float beta, float *c, int ldc);
    void (*dgemm)(int order, int ta, int tb, int m, int n, int k, double alpha, const double *a, int lda,
                  const double *b, int ldb, double beta, double *c, int ldc);
    /* OpenBLAS's bf16 GEMM (cblas_sbgemm, built with BUILD_BFLOAT16): bf16 operands, f32 C;
     * NULL where the library lacks it (Debian's 0.3.21 does) */
    void (*sbgemm)(int order, int ta, int tb, int m, int n, int k, float alpha, const uint16_t *a, int lda,
                   const uint16_t *b, int ldb, float beta, float *c, int ldc);
    const sgemm_kernel *own;
    /* where sbgemm is one of ragjit's own (amx.c, bf16dot.c): the same as a kernel of packed
     * calls, for op(B) packed once for a product's chunks; else NULL */
    const sgemm_kernel *sbgemm_kernel;
} blas_fns;
enum { BLAS_ROW_MAJOR = 101, BLAS_NO_TRANS = 111, BLAS_TRANS = 112 };
const blas_fns *blas_get(void);
/* A cblas_sbgemm. amx.c's by AMX tiles (C = A op(B), row-major, A not transposed, alpha 1,
 * beta 0 fast; other arguments by the definition), NULL where the CPU or the OS has no AMX-BF16
 * or RAGJIT_AMX=0. blas.c gives it to bf16 products where the BLAS exports no sbgemm. */
typedef void sbgemm_fn(int order, int ta, int tb, int m, int n, int k, float alpha, const uint16_t *a, int lda,
                       const uint16_t *b, int ldb, float beta, float *c, int ldc);
sbgemm_fn *amx_sbgemm_get(void);
/* The same as a kernel of gemm.c's packed calls (bf16 A rows and op(B), f32 C; its own layout),
 * for a product's chunks with op(B) packed once (cpu_gemm.c); NULL as amx_sbgemm_get. */
const sgemm_kernel *amx_kernel(void);
/* bf16dot.c: the same by AVX512-BF16's VDPBF16PS (Zen 4, Cooper Lake), NULL where the CPU lacks
 * it or RAGJIT_AVX512BF16=0; blas.c's choice where the BLAS has no sbgemm and there is no AMX. */
sbgemm_fn *bf16dot_sbgemm_get(void);
const sgemm_kernel *bf16dot_kernel(void);
/* Which serves ("OpenBLAS 0.3.21 ... (libopenblas.so.0)", "ragjit's own sgemm (...): why"). */
const char *blas_info(void);

/* gemm.c: ragjit's own packed sgemm, for CPU products where no optimised BLAS serves.
 * sgemm_kernel_get(SGEMM_BEST) is the best micro-kernel this CPU runs (never NULL: the portable
 * one at worst); a named ISA the CPU lacks gives NULL (tests run each one the CPU has). */
enum { SGEMM_BEST, SGEMM_PORTABLE, SGEMM_AVX2, SGEMM_AVX512, SGEMM_AMX_BF16 /* amx.c: bf16 operands */,
       SGEMM_AVX512_BF16 /* bf16dot.c: bf16 operands */ };
typedef void sgemm_micro(int64_t kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc, int load,
                         int h, int w);
struct sgemm_kernel {
    const char *name; /* "AVX-512 14x32" */
    int isa, mr, nr;  /* the C block one call computes: mr rows x nr columns */
    int64_t kc, mc, nc; /* blocking: inner steps, rows of A and columns of B packed at a time */
    /* C's block (row stride ldc) = (or += when load) A's sliver times B's packed sliver over kc
     * steps; run reads A packed, rows (NULL: none) in place, row r at a + r lda; the _edge
     * twins (NULL: none) write only the block's first h rows and w columns */
    sgemm_micro *run, *rows, *run_edge, *rows_edge;
    /* a kernel with a packed layout and operands of its own (amx.c: bf16 A and B): the packed
     * calls below are these, where set (a and b then point to its element type) */
    int64_t (*packed_blocks)(int64_t n, int64_t k);
    size_t (*packed_bytes)(int64_t n, int64_t k);
    void (*pack_block)(bool tb, int64_t n, int64_t k, const void *b, int64_t ldb, int64_t block, void *packed);
    void (*run_packed)(int64_t m, int64_t n, int64_t k, const void *a, int64_t lda, const void *packed, float *c,
                       int64_t ldc);
};
const sgemm_kernel *sgemm_kernel_get(int isa);
const sgemm_kernel *sgemm_x86_kernel(int isa); /* gemm_x86.c: NULL off x86 or without the ISA */
/* Bytes of packing scratch sgemm_run needs for an m x n x k product (64-byte aligned inside). */
size_t sgemm_scratch_bytes(const sgemm_kernel *kn, int64_t m, int64_t n, int64_t k);
/* Row-major C (m x n, row stride ldc) = alpha op(A) op(B) + beta C, op(A) m x k, op(B) k x n,
 * transposed where ta / tb (A stored k x m, B stored n x k), as cblas_sgemm with CblasRowMajor;
 * beta == 0 never reads C. scratch: sgemm_scratch_bytes of memory. One thread. */
void sgemm_run(const sgemm_kernel *kn, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
               const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc,
               void *scratch);
/* The same with op(B) packed once for many calls (every chunk of rows of one product): its
 * sgemm_packed_b_blocks blocks, each packed by sgemm_pack_b_block (any thread, any order) into
 * sgemm_packed_b_bytes at `packed` (64-byte aligned), for products of n x k; then
 * sgemm_run_packed computes C = A op(B) (alpha 1, beta 0, A not transposed) for any m. */
int64_t sgemm_packed_b_blocks(const sgemm_kernel *kn, int64_t n, int64_t k);
size_t sgemm_packed_b_bytes(const sgemm_kernel *kn, int64_t n, int64_t k);
void sgemm_pack_b_block(const sgemm_kernel *kn, bool tb, int64_t n, int64_t k, const float *b, int64_t ldb,
                        int64_t block, float *packed);
void sgemm_run_packed(const sgemm_kernel *kn, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                      const float *packed, float *c, int64_t ldc, void *scratch);

/* head_gemm.c: an attention head's products on short items, AVX-512 only (head_gemm_ok false
 * elsewhere): C (m x n, ldc) = A (m x k, lda) Bᵀ (B stored n x k, ldb; scratch of
 * head_gemm_scratch_bytes(n, k)), and C = A B (B stored k x n, ldb). A and B read in place;
 * each element one in-order sum over k, whatever m, n and the thread count. One thread. */
bool head_gemm_ok(void);
size_t head_gemm_scratch_bytes(int64_t n, int64_t k);
void head_gemm_nt(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
                  int64_t ldc, void *scratch);
void head_gemm_nn(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
                  int64_t ldc);

/* head_softmax.c: rows of an attention head's scores turned into the softmax's weights in place,
 * AVX-512 only (head_softmax_ok false elsewhere): per row of m, x = c * scale (c / scale where
 * divide), m' its max (0 where -inf), p = exp(x - m'), P = p / sum p; a row of zero sum is NaN,
 * or 0 where safe. With round HS_ROUND_BF16 or HS_ROUND_F16 the scores are 16-bit values of
 * ops: c rounded to the format first, and x rounded again (to nearest even; the weights stay
 * f32). */
enum { HS_ROUND_NONE, HS_ROUND_BF16, HS_ROUND_F16 };
bool head_softmax_ok(void);
void head_softmax_rows(int64_t m, int64_t n, float *c, int64_t ldc, float scale, bool divide, bool safe, int round);

/* Growable text. */
typedef struct sbuf {
    rj_ctx *ctx;
    char *s;
    size_t len, cap;
    bool failed;
} sbuf;

void sbuf_init(sbuf *b, rj_ctx *ctx);
void sbuf_puts(sbuf *b, const char *s);
void sbuf_putc(sbuf *b, char c);
void sbuf_put(sbuf *b, const void *data, size_t n); /* bytes, NULs included */
void sbuf_printf(sbuf *b, const char *fmt, ...) RJ_PRINTF(2, 3);
void sbuf_vprintf(sbuf *b, const char *fmt, va_list ap);
/* Hands the text to the caller (free with rj_string_free); NULL with RJ_ERR_NOMEM recorded. */
char *sbuf_finish(sbuf *b);
void sbuf_free(sbuf *b);

/* The first lines of a compiler's log in dst (n bytes), joined by " | ": one line of an error
 * message. */
void text_head(char *dst, size_t n, const char *log);

/* file.c: opens path for reading ("rb") or writing ("wb", truncated), only if it is a regular
 * file; NULL with RJ_ERR_IO and a message naming the file otherwise. The size of a file opened
 * for reading goes to *size (may be NULL). Never blocks on a FIFO. */
FILE *file_open_regular(rj_ctx *ctx, const char *path, bool write, int64_t *size);

/* A map from names to int32 values (strmap.c): lookups in constant time however many names a
 * program has. Keys are copied. strmap_get gives -1 for a missing key; strmap_put replaces a
 * present key's value and returns false, with the error recorded, when out of memory. */
typedef struct strmap {
    rj_ctx *ctx;
    char **keys;
    int32_t *vals;
    int32_t cap, n;
} strmap;

void strmap_init(strmap *m, rj_ctx *ctx);
int32_t strmap_get(const strmap *m, const char *key);
bool strmap_put(strmap *m, const char *key, int32_t val);
void strmap_free(strmap *m);

/* Milliseconds on the monotonic clock (clock.c). */
double clock_ms(void);

/* half.c: the 16-bit float formats (bf16 true: bfloat16, else IEEE f16) as bit patterns,
 * converted with round-to-nearest-even; NaN stays a quiet NaN. half_round rounds a double to
 * f32 and then to the format (as compiled code rounds an f32 result), back as a double. */
uint16_t half_from_f32(float f, bool bf16);
float half_to_f32(uint16_t h, bool bf16);
double half_round(double v, bool bf16);
/* Blocks of rows x cols, rows ldd / lds elements apart, widened to f32 or rounded from it. */
void half_rows_to_f32(float *dst, int64_t ldd, const uint16_t *src, int64_t lds, int64_t rows, int64_t cols,
                      bool bf16);
void half_rows_from_f32(uint16_t *dst, int64_t ldd, const float *src, int64_t lds, int64_t rows, int64_t cols,
                        bool bf16);
/* Row-major C = alpha op(A) op(B) + beta C of bf16 operands, as cblas_sbgemm, by the definition
 * (the arguments ragjit's own sbgemms leave to it). */
void sbgemm_by_definition(int ta, int tb, int m, int n, int k, float alpha, const uint16_t *a, int lda,
                          const uint16_t *b, int ldb, float beta, float *c, int ldc);

/* Shortest text that reads back as the same double ("0.5", "1e-05", "inf", "nan"). */
void fmt_double(char *out, size_t n, double v);

/* 64-bit FNV-1a style hashing for structural hashes. */
static inline uint64_t hash_mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0x100000001b3ull;
}
uint64_t hash_str(uint64_t h, const char *s);

/* Little-endian u64 in bytes: the formats ragjit writes to disk (diskcache.c, jit.c). */
static inline void le_put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static inline uint64_t le_get_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

#endif
