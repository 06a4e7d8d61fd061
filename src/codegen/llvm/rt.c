/*
 * rt.c — routines that JIT-compiled CPU code calls instead of carrying its own copy.
 *
 * A kernel whose loop writes an output once, in a run that streams, stages its stores in an L1
 * buffer and flushes each chunk with rj.ntcopy.2 / .4 / .8 (stream.c, em_stage_close):
 * streaming (non-temporal) stores for whole cache lines (given nt = 0, the routines copy
 * plainly; stream.c calls them only with nt set, and loops of a constant extent that is a
 * multiple of the vector width store directly instead: stream.c, em_stream_test). The flush
 * used to be generated as IR into every module, where optimising and code-generating it took
 * more of a kernel's compile than the kernel's own loop (bench/NOTES.md, "Streaming copies").
 * Here it is compiled once, with the library.
 *
 * The linkers resolve the two names to these functions (jit.c: elfload.c's resolver, and
 * absolute symbols in ORC's dylib), so object code from the persistent cache links to the
 * running library's copy: no address is ever baked into generated code. Which variant a name
 * resolves to is chosen once per process from the CPU's features: one 64-byte store per cache
 * line where AVX-512 exists (faster than 32-byte stores: bench/NOTES.md, "Streaming copies"),
 * two 32-byte stores with AVX, four 16-byte SSE2 stores otherwise; other architectures copy.
 * The kernel's exit fences the streaming stores (sfence), so these routines do not.
 *
 * The table also resolves the C library's functions generated code may call (libm's f64
 * functions, which have no vector forms; memset and memcpy, which LLVM's loop idioms make of
 * zeroing and copying loops) to this library's own references to them. The process's global scope may not
 * hold libm: a program that does not link it can load ragjit with dlopen(RTLD_LOCAL), and then
 * a lookup by name (dlsym(RTLD_DEFAULT), ORC's process generator) would not find `pow`.
 */
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "llvm_backend.h"

/* The C library functions, after the routines in the table */
#define LIBC(f) {#f, (void (*)(void))(f)}
#define LIBC_FUNCTIONS                                                                               \
    LIBC(exp), LIBC(exp2), LIBC(expm1), LIBC(log), LIBC(log2), LIBC(log10), LIBC(log1p), LIBC(pow),    \
        LIBC(sqrt), LIBC(cbrt), LIBC(sin), LIBC(cos), LIBC(tan), LIBC(asin), LIBC(acos), LIBC(atan),   \
        LIBC(atan2), LIBC(sinh), LIBC(cosh), LIBC(tanh), LIBC(erf), LIBC(erfc), LIBC(fmod), LIBC(floor), \
        LIBC(ceil), LIBC(trunc), LIBC(round), LIBC(rint), LIBC(nearbyint), LIBC(fmin), LIBC(fmax),     \
        LIBC(expf), LIBC(exp2f), LIBC(logf), LIBC(log2f), LIBC(log10f), LIBC(powf), LIBC(sinf),        \
        LIBC(cosf), LIBC(tanhf), LIBC(fmodf), LIBC(floorf), LIBC(ceilf), LIBC(truncf), LIBC(roundf),   \
        LIBC(rintf), LIBC(nearbyintf), LIBC(memset), LIBC(memcpy), LIBC(memmove)

#if defined(__x86_64__)
#include <immintrin.h>
#define LINE 64

/* A flush for one instruction set: n elements of ES bytes from s to d; with nt, the part of
 * d up to its next cache line cached, whole lines streamed (STORE_LINE), the rest cached.
 * No call on the way (the head and the tail are element loops): a flush is per row of a
 * 1 KiB row, where three calls cost as much as a tenth of the row's time. */
#define DEFINE_COPY(NAME, ES, ATTR, STORE_LINE)                                        \
    ATTR static void NAME(void *dst, const void *src, int64_t n, int64_t nt) {            \
        char *d = dst;                                                                    \
        const char *s = src;                                                              \
        if (!nt) {                                                                        \
            memcpy(d, s, (size_t)n * ES);                                                 \
            return;                                                                       \
        }                                                                                 \
        int64_t i = 0;                                                                    \
        for (; i < n && ((uintptr_t)(d + i * ES) & (LINE - 1)); i++)                      \
            memcpy(d + i * ES, s + i * ES, ES);                                           \
        for (; i + LINE / ES <= n; i += LINE / ES) STORE_LINE(d + i * ES, s + i * ES);    \
        for (; i < n; i++) memcpy(d + i * ES, s + i * ES, ES);                            \
    }

#define LINE_AVX512(d, s) _mm512_stream_si512((void *)(d), _mm512_loadu_si512((const void *)(s)))
#define LINE_AVX(d, s)                                                                    \
    (_mm256_stream_si256((__m256i *)(d), _mm256_loadu_si256((const __m256i *)(s))),       \
     _mm256_stream_si256((__m256i *)((d) + 32), _mm256_loadu_si256((const __m256i *)((s) + 32))))
#define LINE_SSE2(d, s)                                                                   \
    for (int q = 0; q < LINE; q += 16)                                                    \
    _mm_stream_si128((__m128i *)((d) + q), _mm_loadu_si128((const __m128i *)((s) + q)))

DEFINE_COPY(copy2_avx512, 2, __attribute__((target("avx512f"))), LINE_AVX512)
DEFINE_COPY(copy4_avx512, 4, __attribute__((target("avx512f"))), LINE_AVX512)
DEFINE_COPY(copy8_avx512, 8, __attribute__((target("avx512f"))), LINE_AVX512)
DEFINE_COPY(copy2_avx, 2, __attribute__((target("avx"))), LINE_AVX)
DEFINE_COPY(copy4_avx, 4, __attribute__((target("avx"))), LINE_AVX)
DEFINE_COPY(copy8_avx, 8, __attribute__((target("avx"))), LINE_AVX)
DEFINE_COPY(copy2_sse2, 2, , LINE_SSE2)
DEFINE_COPY(copy4_sse2, 4, , LINE_SSE2)
DEFINE_COPY(copy8_sse2, 8, , LINE_SSE2)

#define FN(f) ((void (*)(void))(f))
static rt_symbol table[] = {{"rj.ntcopy.4", NULL}, {"rj.ntcopy.8", NULL}, {"rj.ntcopy.2", NULL}, LIBC_FUNCTIONS};
static pthread_once_t pick_once = PTHREAD_ONCE_INIT;
static void pick(void) {
    __builtin_cpu_init();
    bool avx512 = __builtin_cpu_supports("avx512f"), avx = __builtin_cpu_supports("avx");
    table[0].fn = avx512 ? FN(copy4_avx512) : avx ? FN(copy4_avx) : FN(copy4_sse2);
    table[1].fn = avx512 ? FN(copy8_avx512) : avx ? FN(copy8_avx) : FN(copy8_sse2);
    table[2].fn = avx512 ? FN(copy2_avx512) : avx ? FN(copy2_avx) : FN(copy2_sse2);
}
#else
static void copy4(void *dst, const void *src, int64_t n, int64_t nt) {
    (void)nt;
    memcpy(dst, src, (size_t)n * 4);
}
static void copy8(void *dst, const void *src, int64_t n, int64_t nt) {
    (void)nt;
    memcpy(dst, src, (size_t)n * 8);
}
static void copy2(void *dst, const void *src, int64_t n, int64_t nt) {
    (void)nt;
    memcpy(dst, src, (size_t)n * 2);
}
static rt_symbol table[] = {{"rj.ntcopy.4", (void (*)(void))copy4}, {"rj.ntcopy.8", (void (*)(void))copy8},
                            {"rj.ntcopy.2", (void (*)(void))copy2}, LIBC_FUNCTIONS};
static pthread_once_t pick_once = PTHREAD_ONCE_INIT;
static void pick(void) {}
#endif

_Static_assert(sizeof table / sizeof table[0] <= RT_MAX_SYMBOLS, "RT_MAX_SYMBOLS is too small");

const rt_symbol *rt_symbols(int *n) {
    pthread_once(&pick_once, pick);
    *n = (int)(sizeof table / sizeof table[0]);
    return table;
}
