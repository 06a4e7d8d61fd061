/*
 * baseline.h — hand-written C loops and bandwidth probes for bench.c (see baseline.c).
 */
#ifndef RJ_BENCH_BASELINE_H
#define RJ_BENCH_BASELINE_H

#include <stdint.h>

float base_read(const float *src, int64_t n, int threads);
void base_copy(float *dst, const float *src, int64_t n, int threads);
void base_copy_nt(float *dst, const float *src, int64_t n, int threads);
void base_triad(float *a, const float *b, const float *c, float s, int64_t n, int threads);
void base_triad_nt(float *a, const float *b, const float *c, float s, int64_t n, int threads);
void base_w1(float *y, const float *x, const float *w, const float *b, int64_t rows, int64_t D, int threads);
void base_w1_bf16(uint16_t *y, const uint16_t *x, const uint16_t *w, const uint16_t *b, int64_t rows, int64_t D,
                  int threads);
void base_w2(float *y, const float *x, const int64_t *off, int64_t B, int64_t D, int threads);
void base_w3(float *y, const float *x, int64_t n, int threads);
void base_w4(float *y, const float *x, const int64_t *off, int64_t B, int64_t D, int threads);
void base_w4_rows(float *y, const float *x, const int64_t *off, int64_t B, int64_t D, int threads,
                  int compensated);
void base_w5(float *y, const float *x, const float *w, const float *bias, int64_t rows, int64_t D, int threads);
void base_w6(float *y, const float *x, const int64_t *off, int64_t B, int64_t L, int64_t D, int threads);

#endif
