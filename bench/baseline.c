/*
 * baseline.c — what a careful person writes by hand, for comparison: the benchmark workloads
 * as plain C loops (compiled -O3 -march=native, OpenMP across rows or items), and the memory
 * bandwidth probes (read, copy and triad, with and without non-temporal stores).
 *
 * Nothing here is clever on purpose: these are the loops the JIT must at least match.
 */
#include "baseline.h"

#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <string.h>

void base_copy(float *restrict dst, const float *restrict src, int64_t n, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; i++) dst[i] = src[i];
}

void base_triad(float *restrict a, const float *restrict b, const float *restrict c, float s,
                int64_t n, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; i++) a[i] = b[i] + s * c[i];
}

/* Reads every element once: a sum over four vector accumulators (hides the add latency). */
float base_read(const float *restrict src, int64_t n, int threads) {
    float total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t lo = (n / 32) * t / nt * 32, hi = (n / 32) * (t + 1) / nt * 32;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t i = lo; i < hi; i += 32) {
            a0 = _mm256_add_ps(a0, _mm256_loadu_ps(src + i));
            a1 = _mm256_add_ps(a1, _mm256_loadu_ps(src + i + 8));
            a2 = _mm256_add_ps(a2, _mm256_loadu_ps(src + i + 16));
            a3 = _mm256_add_ps(a3, _mm256_loadu_ps(src + i + 24));
        }
        float lanes[8];
        _mm256_storeu_ps(lanes, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
        for (int k = 0; k < 8; k++) total += lanes[k];
        if (t == nt - 1)
            for (int64_t i = hi; i < n; i++) total += src[i];
    }
    return total;
}

/* Non-temporal variants: 32-byte aligned chunks per thread, streaming stores. */
void base_copy_nt(float *restrict dst, const float *restrict src, int64_t n, int threads) {
#pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t lo = (n / 8) * t / nt * 8, hi = (n / 8) * (t + 1) / nt * 8;
        for (int64_t i = lo; i < hi; i += 8) _mm256_stream_ps(dst + i, _mm256_loadu_ps(src + i));
        if (t == nt - 1)
            for (int64_t i = hi; i < n; i++) dst[i] = src[i];
    }
    _mm_sfence();
}

void base_triad_nt(float *restrict a, const float *restrict b, const float *restrict c, float s,
                   int64_t n, int threads) {
#pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t lo = (n / 8) * t / nt * 8, hi = (n / 8) * (t + 1) / nt * 8;
        __m256 vs = _mm256_set1_ps(s);
        for (int64_t i = lo; i < hi; i += 8)
            _mm256_stream_ps(a + i, _mm256_fmadd_ps(vs, _mm256_loadu_ps(c + i), _mm256_loadu_ps(b + i)));
        if (t == nt - 1)
            for (int64_t i = hi; i < n; i++) a[i] = b[i] + s * c[i];
    }
    _mm_sfence();
}

void base_w1(float *restrict y, const float *restrict x, const float *restrict w,
             const float *restrict b, int64_t rows, int64_t D, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t r = 0; r < rows; r++)
        for (int64_t d = 0; d < D; d++) {
            float v = x[r * D + d] * w[d] + b[d];
            y[r * D + d] = v > 0 ? v : 0;
        }
}

static inline float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Round to nearest even; a NaN stays a (quiet) NaN. */
static inline uint16_t f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(u >> 16 | 0x40);
    return (uint16_t)((u + 0x7fffu + (u >> 16 & 1)) >> 16);
}

/* W1 in bf16 with PyTorch's rounding per op (x * w rounded, then + b, relu, rounded): the same
 * bits as ragjit's, in plain C that GCC vectorises. */
void base_w1_bf16(uint16_t *restrict y, const uint16_t *restrict x, const uint16_t *restrict w,
                  const uint16_t *restrict b, int64_t rows, int64_t D, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t r = 0; r < rows; r++)
        for (int64_t d = 0; d < D; d++) {
            float p = bf16_to_f32(f32_to_bf16(bf16_to_f32(x[r * D + d]) * bf16_to_f32(w[d])));
            float v = p + bf16_to_f32(b[d]);
            y[r * D + d] = f32_to_bf16(v < 0 ? 0 : v);
        }
}

void base_w2(float *restrict y, const float *restrict x, const int64_t *off, int64_t B, int64_t D,
             int threads) {
#pragma omp parallel num_threads(threads)
    {
        float m[4096], s[4096];
#pragma omp for schedule(dynamic, 1)
        for (int64_t b = 0; b < B; b++) {
            for (int64_t d = 0; d < D; d++) m[d] = -INFINITY, s[d] = 0;
            for (int64_t r = off[b]; r < off[b + 1]; r++)
                for (int64_t d = 0; d < D; d++) m[d] = fmaxf(m[d], x[r * D + d]);
            for (int64_t r = off[b]; r < off[b + 1]; r++)
                for (int64_t d = 0; d < D; d++) {
                    float e = expf(x[r * D + d] - m[d]);
                    y[r * D + d] = e;
                    s[d] += e;
                }
            for (int64_t r = off[b]; r < off[b + 1]; r++)
                for (int64_t d = 0; d < D; d++) y[r * D + d] /= s[d];
        }
    }
}

void base_w3(float *restrict y, const float *restrict x, int64_t n, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * 2 + 1;
}

void base_w4(float *restrict y, const float *restrict x, const int64_t *off, int64_t B, int64_t D,
             int threads) {
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (int64_t b = 0; b < B; b++) {
        float *acc = y + b * D;
        for (int64_t d = 0; d < D; d++) acc[d] = 0;
        for (int64_t r = off[b]; r < off[b + 1]; r++)
            for (int64_t d = 0; d < D; d++) acc[d] += x[r * D + d];
    }
}

/* W4 the way ragjit's kernel is built, for telling the cost of its loop from that of its
 * compensation: 256-bit loads into a row of accumulators that stays in memory (the empty asm
 * keeps the compiler from holding it in registers, as ragjit's runtime-tiled kernel cannot),
 * one row at a time; compensated: blocks of 16 rows summed plainly, the block sums added with
 * Kahan compensation. D a multiple of 16, at most 4096, and at most 64 threads (else base_w4). */
void base_w4_rows(float *restrict y, const float *restrict x, const int64_t *off, int64_t B, int64_t D,
                  int threads, int compensated) {
    if (D % 16 || D > 4096 || threads > 64) {
        base_w4(y, x, off, B, D, threads);
        return;
    }
#pragma omp parallel num_threads(threads)
    {
        static _Alignas(64) float acc_[64][3 * 4096];
        float *acc = acc_[omp_get_thread_num() & 63], *part = acc + D, *comp = part + D;
#pragma omp for schedule(dynamic, 1)
        for (int64_t b = 0; b < B; b++) {
            memset(acc, 0, sizeof(float) * 3 * (size_t)D);
            int64_t block = compensated ? 16 : off[b + 1] - off[b];
            for (int64_t r0 = off[b]; r0 < off[b + 1]; r0 += block) {
                int64_t r1 = r0 + block < off[b + 1] ? r0 + block : off[b + 1];
                for (int64_t r = r0; r < r1; r++)
                    for (int64_t d = 0; d < D; d += 16) {
                        _mm256_store_ps(part + d, _mm256_add_ps(_mm256_load_ps(part + d), _mm256_loadu_ps(x + r * D + d)));
                        _mm256_store_ps(part + d + 8, _mm256_add_ps(_mm256_load_ps(part + d + 8),
                                                                    _mm256_loadu_ps(x + r * D + d + 8)));
                        __asm__ volatile("" ::: "memory");
                    }
                for (int64_t d = 0; d < D; d++) { /* Kahan, as ragjit's (an infinite sum keeps c) */
                    float t = part[d] - comp[d], s = acc[d] + t;
                    if (s - s == 0) comp[d] = (s - acc[d]) - t;
                    acc[d] = s, part[d] = 0;
                }
            }
            for (int64_t d = 0; d < D; d++) y[b * D + d] = acc[d] - comp[d];
        }
    }
}

void base_w5(float *restrict y, const float *restrict x, const float *restrict w,
             const float *restrict bias, int64_t rows, int64_t D, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * D;
        float mean = 0, var = 0;
        for (int64_t d = 0; d < D; d++) mean += xr[d];
        mean /= (float)D;
        for (int64_t d = 0; d < D; d++) var += (xr[d] - mean) * (xr[d] - mean);
        float rstd = 1.0f / sqrtf(var / (float)D + 1e-5f);
        for (int64_t d = 0; d < D; d++) y[r * D + d] = (xr[d] - mean) * rstd * w[d] + bias[d];
    }
}

void base_w6(float *restrict y, const float *restrict x, const int64_t *off, int64_t B, int64_t L,
             int64_t D, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t u = 0; u < B * L; u++) {
        int64_t b = u / L, i = u % L;
        float *dst = y + u * D;
        if (i < off[b + 1] - off[b]) memcpy(dst, x + (off[b] + i) * D, sizeof(float) * (size_t)D);
        else memset(dst, 0, sizeof(float) * (size_t)D);
    }
}
