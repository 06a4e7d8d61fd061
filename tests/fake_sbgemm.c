/*
 * fake_sbgemm.c — a tiny CBLAS that exports cblas_sbgemm, loaded by tests through RAGJIT_BLAS.
 *
 * Neither the BLAS this project's machines install (Debian 12's OpenBLAS 0.3.21) nor the
 * scipy-openblas32 wheel exports OpenBLAS's bf16 GEMM, so the path that hands bf16 operands to
 * cblas_sbgemm (lgemm GC_SBGEMM) would go untested. This library stands in for an OpenBLAS
 * built with BUILD_BFLOAT16: it says it is OpenBLAS (so ragjit takes it as an optimised
 * library) and computes each product by the definition, row-major only, accumulating in f32
 * (sbgemm) or in its own type, as slow as it is plain: tests give it small shapes.
 */
#include <stdint.h>
#include <string.h>

enum { ROW_MAJOR = 101, NO_TRANS = 111 };

/* what ragjit looks up (util/blas.c), declared for -Wmissing-prototypes */
char *openblas_get_config(void);
void openblas_set_num_threads(int n);
void cblas_sgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                 int ldb, float beta, float *c, int ldc);
void cblas_dgemm(int order, int ta, int tb, int m, int n, int k, double alpha, const double *a, int lda,
                 const double *b, int ldb, double beta, double *c, int ldc);
void cblas_sbgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const uint16_t *a, int lda,
                  const uint16_t *b, int ldb, float beta, float *c, int ldc);

char *openblas_get_config(void) { return "OpenBLAS (fake, with sbgemm: tests/fake_sbgemm.c)"; }
void openblas_set_num_threads(int n) { (void)n; }

static float bf16_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Element (i, p) of op(A) (m x k) and (p, j) of op(B) (k x n), row-major, transposed by ta / tb. */
#define AT(a, ta, lda, i, p) ((ta) == NO_TRANS ? (a)[(int64_t)(i) * (lda) + (p)] : (a)[(int64_t)(p) * (lda) + (i)])
#define GEMM_BODY(T, CONV)                                                                            \
    for (int i = 0; i < m; i++)                                                                       \
        for (int j = 0; j < n; j++) {                                                                 \
            T s = 0;                                                                                  \
            for (int p = 0; p < k; p++) s += CONV(AT(a, ta, lda, i, p)) * CONV(AT(b, tb, ldb, p, j)); \
            c[(int64_t)i * ldc + j] = alpha * s + (beta != 0 ? beta * c[(int64_t)i * ldc + j] : 0);   \
        }
#define SAME(x) (x)

void cblas_sgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                 int ldb, float beta, float *c, int ldc) {
    (void)order;
    GEMM_BODY(float, SAME)
}

void cblas_dgemm(int order, int ta, int tb, int m, int n, int k, double alpha, const double *a, int lda,
                 const double *b, int ldb, double beta, double *c, int ldc) {
    (void)order;
    GEMM_BODY(double, SAME)
}

void cblas_sbgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const uint16_t *a, int lda,
                  const uint16_t *b, int ldb, float beta, float *c, int ldc) {
    (void)order;
    GEMM_BODY(float, bf16_f32)
}
