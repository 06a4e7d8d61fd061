/*
 * mathulp.c — the CPU JIT's f32 exp, log, tanh, gelu (erfc) and sigmoid measured over every float.
 *
 * mathlib.c computes these as branch-free polynomials so that loops over them vectorise, and
 * docs/guide.md promises 2.5 ulp. This tool checks the promise on the code the JIT actually
 * generates: it compiles y = f(x) over a dense f32 vector, runs it on all 2^32 bit patterns
 * (2^24 at a time) and compares each result with double-precision libm rounded to f32,
 * counting the error in units of the f32 ulp at the true value. Results whose true value is
 * below the smallest normal float may flush to zero (documented); gelu is x erfc(-x / sqrt 2) / 2
 * (expand.c), which has no cancellation, so its tail counts in ulps of the value too (PyTorch's
 * f32 x (1 + erf(x / sqrt 2)) / 2 is off by up to 2^-25 |x| there); there the rounding of
 * t = x / sqrt 2 to f32 alone costs about 2 t^2 ulp (erfc's slope), so gelu exceeds 4 ulp for
 * x below about -2 (170 ulp at x = -13, where gelu is 1e-37) and exits 1; an overflowing true value
 * gives an infinity of its sign or a float within the bound of it, and NaN gives NaN.
 *
 *   mathulp [exp|log|tanh|gelu|sigmoid ...]   (default: all; a few minutes on two cores)
 *
 * Not a test (it takes minutes); the closing notes of the maths changes quote its output.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ragjit.h"

static double ref(rj_op op, double x) {
    switch (op) {
    case RJ_OP_EXP: return exp(x);
    case RJ_OP_LOG: return log(x);
    case RJ_OP_TANH: return tanh(x);
    case RJ_OP_GELU: return 0.5 * x * erfc(-x / sqrt(2.0));
    default: return 1 / (1 + exp(-x)); /* sigmoid */
    }
}

/* The f32 ulp at |v|: 2^(e - 24) for v in [2^(e-1), 2^e), and the subnormal spacing below. */
static double ulp_at(double v) {
    int e;
    frexp(fabs(v), &e);
    double u = ldexp(1, e - 24);
    return u < ldexp(1, -149) ? ldexp(1, -149) : u;
}

int main(int argc, char **argv) {
    static const struct { const char *name; rj_op op; } all[] = {
        {"exp", RJ_OP_EXP}, {"log", RJ_OP_LOG}, {"tanh", RJ_OP_TANH}, {"gelu", RJ_OP_GELU},
        {"sigmoid", RJ_OP_SIGMOID}};
    int nall = (int)(sizeof all / sizeof all[0]);
    rj_ctx *ctx = rj_ctx_new(NULL, NULL);
    const int64_t chunk = (int64_t)1 << 24;
    float *x = malloc(sizeof(float) * (size_t)chunk), *y = malloc(sizeof(float) * (size_t)chunk);
    double *err = malloc(sizeof(double) * (size_t)chunk);
    if (!ctx || !x || !y || !err) return 1;
    int bad_total = 0;
    for (int k = 0; k < nall; k++) {
        bool want = argc < 2;
        for (int a = 1; a < argc; a++) want |= !strcmp(argv[a], all[k].name);
        if (!want) continue;
        rj_graph *g = rj_graph_new(ctx);
        rj_dim N = rj_graph_dense(g, "N");
        rj_node xn = rj_graph_input(g, "x", RJ_F32, 1, &N);
        rj_node yn = rj_graph_unary(g, all[k].op, xn);
        rj_graph_output(g, yn, "y");
        rj_program *p = rj_program_new(g, RJ_TARGET_CPU);
        rj_bind *b = p ? rj_bind_new(p) : NULL;
        if (!b || rj_bind_input(b, xn, x, chunk) || rj_bind_output(b, yn, y, chunk)) {
            fprintf(stderr, "mathulp: %s: %s\n", all[k].name, rj_ctx_error(ctx));
            return 1;
        }
        double worst = 0;
        float worst_x = 0;
        long bad = 0;
        for (uint64_t base = 0; base < ((uint64_t)1 << 32); base += (uint64_t)chunk) {
            for (int64_t i = 0; i < chunk; i++) {
                uint32_t u = (uint32_t)(base + (uint64_t)i);
                memcpy(&x[i], &u, 4);
            }
            if (rj_program_run(p, b)) {
                fprintf(stderr, "mathulp: %s: %s\n", all[k].name, rj_ctx_error(ctx));
                return 1;
            }
#pragma omp parallel for reduction(+ : bad)
            for (int64_t i = 0; i < chunk; i++) {
                double r = ref(all[k].op, (double)x[i]), got = (double)y[i], e = 0;
                if (isnan(r)) e = isnan(got) ? 0 : INFINITY;
                else if (fabs(r) > FLT_MAX) /* an infinity, or a float a few ulps from it */
                    e = isinf(got) && (got > 0) == (r > 0) ? 0 : fabs(got - r) / ulp_at(FLT_MAX);
                else if (fabs(r) < FLT_MIN && fabs(got) < FLT_MIN) e = 0; /* may flush */
                else e = fabs(got - r) / ulp_at(r);
                if (e > 4) bad++;
                err[i] = e;
            }
            for (int64_t i = 0; i < chunk; i++)
                if (err[i] > worst) worst = err[i], worst_x = x[i];
        }
        printf("%-8s max error %.3f ulp (at x = %.9g), %ld results off by more than 4 ulp\n",
               all[k].name, worst, (double)worst_x, bad);
        fflush(stdout);
        bad_total += bad > 0;
        rj_bind_free(b);
        rj_program_free(p);
        rj_graph_free(g);
    }
    free(x), free(y), free(err);
    rj_ctx_free(ctx);
    return bad_total ? 1 : 0;
}
