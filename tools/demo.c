/*
 * demo.c — the C demo: build a ragged expression, JIT-compile it for the CPU, run it on a small
 * jagged batch, check it against the reference interpreter, and print inputs, shapes, results,
 * compile time and run time.
 *
 * The graph is the one from the design document: h = relu(x * w + 0.5) over f32[B, j1, D],
 * then a softmax over the ragged dim, a sum over the ragged dim, and a pad/op/unpad chain.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ragjit.h"

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

#define D 3

static void print_jagged(const char *name, const rj_tensor *t) {
    rj_tensor_info in;
    rj_tensor_get_info(t, &in);
    const float *v = in.values;
    printf("%s:\n", name);
    for (int64_t b = 0; b < in.shape[0]; b++) {
        int64_t len = in.lengths ? in.lengths[b] : in.offsets[b + 1] - in.offsets[b];
        printf("  item %lld (%lld rows):", (long long)b, (long long)len);
        for (int64_t i = 0; i < len; i++) {
            printf(" [");
            for (int d = 0; d < D; d++)
                printf("%s%.4f", d ? " " : "", v[(in.offsets[b] + i) * D + d]);
            printf("]");
        }
        printf("\n");
    }
}

static void print_dense(const char *name, const rj_tensor *t) {
    rj_tensor_info in;
    rj_tensor_get_info(t, &in);
    const float *v = in.values;
    printf("%s: [%lld, %lld]\n", name, (long long)in.shape[0], (long long)in.shape[1]);
    for (int64_t b = 0; b < in.shape[0]; b++) {
        printf("  ");
        for (int64_t d = 0; d < in.shape[1]; d++) printf(" %.4f", v[b * in.shape[1] + d]);
        printf("\n");
    }
}

static int fail(rj_ctx *ctx, const char *what) {
    fprintf(stderr, "demo: %s: %s\n", what, rj_ctx_error(ctx));
    return 1;
}

int main(void) {
    rj_ctx *ctx = rj_ctx_new(NULL, NULL);
    if (!ctx) return 1;
    rj_graph *g = rj_graph_new(ctx);
    rj_dim B = rj_graph_dense(g, "B"), J = rj_graph_ragged(g, "j1", B);
    rj_node x = rj_graph_input(g, "x", RJ_F32, 3, (rj_dim[]){B, J, D});
    rj_node w = rj_graph_input(g, "w", RJ_F32, 1, (rj_dim[]){D});
    rj_node h = rj_graph_unary(g, RJ_OP_RELU,
                               rj_graph_binary(g, RJ_OP_ADD, rj_graph_binary(g, RJ_OP_MUL, x, w),
                                               rj_graph_scalar(g, 0.5)));
    rj_node s = rj_graph_softmax(g, h, 1);
    rj_node m = rj_graph_reduce(g, RJ_OP_SUM, h, 1, false);
    rj_node p = rj_graph_pad(g, h, 0.0, RJ_DIM_NONE);
    rj_node u = rj_graph_unpad(g, rj_graph_binary(g, RJ_OP_MUL, p, rj_graph_scalar(g, 2.0)), J);
    rj_graph_output(g, s, "s");
    rj_graph_output(g, m, "m");
    rj_graph_output(g, u, "u");
    if (rj_graph_status(g) != RJ_OK) return fail(ctx, "building the graph");

    double t0 = now_ms();
    rj_program *prog = rj_program_new(g, RJ_TARGET_CPU);
    double compile_ms = now_ms() - t0;
    if (!prog) return fail(ctx, "compiling");
    rj_program *ref = rj_program_new(g, RJ_TARGET_REFERENCE);
    if (!ref) return fail(ctx, "preparing the reference interpreter");

    /* three sequences of lengths 2, 0 and 3 */
    int64_t offsets[] = {0, 2, 2, 5};
    float xv[5 * D], wv[D] = {1.0f, -1.0f, 0.5f};
    for (int i = 0; i < 5 * D; i++) xv[i] = (float)((i * 7) % 11) / 4.0f - 1.0f;
    rj_tensor *xt = rj_tensor_from_values(ctx, RJ_F32, 1, (int64_t[]){D}, xv, 5, offsets, 3);
    if (!xt) return fail(ctx, "making the input tensor");

    char *text = NULL;
    printf("program:\n");
    for (int i = 0; i < rj_graph_input_count(g); i++) {
        rj_node in = rj_graph_input_at(g, i);
        text = rj_node_type_str(g, in);
        printf("  input  %s : %s\n", rj_graph_input_name(g, i), text);
        rj_string_free(ctx, text);
    }
    for (int i = 0; i < rj_graph_output_count(g); i++) {
        rj_node o = rj_graph_output_at(g, i);
        text = rj_node_type_str(g, o);
        printf("  output %s : %s\n", rj_graph_output_name(g, i), text);
        rj_string_free(ctx, text);
    }
    print_jagged("x (offsets 0 2 2 5)", xt);
    printf("w: [%.2f %.2f %.2f]\n\n", wv[0], wv[1], wv[2]);

    rj_bind *b = rj_bind_new(prog), *rb = rj_bind_new(ref);
    if (!b || !rb || rj_bind_tensor(b, x, xt) || rj_bind_input(b, w, wv, D) ||
        rj_bind_tensor(rb, x, xt) || rj_bind_input(rb, w, wv, D) || rj_program_run(ref, rb))
        return fail(ctx, "binding");
    t0 = now_ms();
    if (rj_program_run(prog, b)) return fail(ctx, "running");
    double run_ms = now_ms() - t0;
    char *fused = rj_program_dump(prog, "fused");
    printf("fused kernels:\n%s\n", fused ? fused : "?");
    rj_string_free(ctx, fused);
    printf("results (JIT-compiled for the CPU):\n");
    print_jagged("s = softmax(relu(x * w + 0.5), dim=1)", rj_bind_result(b, s));
    print_dense("m = sum(h, dim=1)", rj_bind_result(b, m));
    print_jagged("u = unpad(pad(h, 0) * 2, j1)", rj_bind_result(b, u));

    /* the interpreter is the oracle: the JIT must agree with it */
    double worst = 0;
    rj_node outs[3] = {s, m, u};
    for (int k = 0; k < 3; k++) {
        rj_tensor_info a, r;
        rj_tensor_get_info(rj_bind_result(b, outs[k]), &a);
        rj_tensor_get_info(rj_bind_result(rb, outs[k]), &r);
        int64_t n = a.ragged_dim < 0 ? a.rows : a.rows * D;
        for (int64_t i = 0; i < n; i++) {
            double d = fabs((double)((float *)a.values)[i] - (double)((float *)r.values)[i]);
            if (d > worst) worst = d;
        }
    }
    printf("\ncompile %.1f ms (first program of the process, LLVM's set-up included; or a load from "
           "the persistent cache), run %.3f ms, largest difference from the reference interpreter %.2g\n",
           compile_ms, run_ms, worst);
    rj_bind_free(b);
    rj_bind_free(rb);
    rj_tensor_free(xt);
    rj_program_free(ref);
    rj_program_free(prog);
    rj_graph_free(g);
    rj_ctx_free(ctx);
    return 0;
}
