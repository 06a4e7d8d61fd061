/*
 * embedding.c — ragjit inside a model runtime: compile once, bind caller-owned buffers once,
 * then run batch after batch with new offsets and batch sizes. Kernels take offsets and sizes
 * as arguments, so nothing is recompiled; the buffers are the caller's, so nothing is
 * allocated per batch either.
 *
 *   cc embedding.c $(pkg-config --cflags --libs ragjit) -o embedding && ./embedding
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */
#include <ragjit.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define D 32
#define MAX_ROWS 4096
#define MAX_ITEMS 64

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

int main(void) {
    rj_ctx *ctx = rj_ctx_new(NULL, NULL);
    rj_graph *g = rj_graph_new(ctx);
    rj_dim B = rj_graph_dense(g, "B"), J = rj_graph_ragged(g, "tokens", B);
    rj_node emb = rj_graph_input(g, "emb", RJ_F32, 3, (rj_dim[]){B, J, D});
    /* mean-pool each sequence after a layer_norm: a sentence embedding */
    rj_node h = rj_graph_layer_norm(g, emb, 1, RJ_NONE, RJ_NONE, -1);
    rj_node pooled = rj_graph_reduce(g, RJ_OP_MEAN, h, 1, false);
    rj_graph_output(g, pooled, "pooled");
    double t0 = now_ms();
    rj_program *p = rj_program_new(g, RJ_TARGET_CPU);
    double compile_ms = now_ms() - t0;
    if (!p) {
        fprintf(stderr, "%s\n", rj_ctx_error(ctx));
        return 1;
    }
    /* the runtime's own buffers, sized for the largest batch */
    static float values[MAX_ROWS * D], out[MAX_ITEMS * D];
    static int64_t offsets[MAX_ITEMS + 1];
    rj_bind *b = rj_bind_new(p);
    if (!b || rj_bind_output(b, pooled, out, MAX_ITEMS * D)) return 1;
    unsigned seed = 1;
    double run_ms = 0;
    int batches = 200;
    for (int batch = 0; batch < batches; batch++) {
        int64_t items = 1 + rand_r(&seed) % MAX_ITEMS, rows = 0;
        offsets[0] = 0;
        for (int64_t i = 0; i < items; i++) {
            int64_t len = rand_r(&seed) % (MAX_ROWS / MAX_ITEMS + 1);
            offsets[i + 1] = rows += len;
        }
        for (int64_t k = 0; k < rows * D; k++) values[k] = (float)(rand_r(&seed) % 1000) / 500.0f - 1.0f;
        /* rebinding is two pointer updates; validation happens in rj_program_run */
        if (rj_bind_offsets(b, J, items, offsets, NULL) || rj_bind_input(b, emb, values, rows * D)) return 1;
        t0 = now_ms();
        if (rj_program_run(p, b)) {
            fprintf(stderr, "batch %d: %s\n", batch, rj_ctx_error(ctx));
            return 1;
        }
        run_ms += now_ms() - t0;
    }
    printf("compiled once in %.1f ms; ran %d batches of 1..%d sequences in %.2f ms (%.1f us each)\n",
           compile_ms, batches, MAX_ITEMS, run_ms, run_ms * 1e3 / batches);
    printf("last batch, first sequence's pooled embedding starts %.4f %.4f %.4f\n", out[0], out[1], out[2]);
    rj_bind_free(b);
    rj_program_free(p);
    rj_graph_free(g);
    rj_ctx_free(ctx);
    return 0;
}
