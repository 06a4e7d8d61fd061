/*
 * builder.c — the C builder API in one page: build softmax(x * w) over a ragged batch, compile
 * it for the CPU, run it on a batch made from three sequences, print the result.
 *
 *   cc builder.c $(pkg-config --cflags --libs ragjit) -o builder && ./builder
 */
#include <ragjit.h>
#include <stdio.h>

int main(void) {
    rj_ctx *ctx = rj_ctx_new(NULL, NULL);
    rj_graph *g = rj_graph_new(ctx);
    rj_dim B = rj_graph_dense(g, "B"), J = rj_graph_ragged(g, "j", B);
    rj_node x = rj_graph_input(g, "x", RJ_F32, 3, (rj_dim[]){B, J, 2});
    rj_node w = rj_graph_input(g, "w", RJ_F32, 1, (rj_dim[]){2});
    rj_node y = rj_graph_softmax(g, rj_graph_binary(g, RJ_OP_MUL, x, w), 1);
    rj_graph_output(g, y, "y");
    if (rj_graph_status(g) != RJ_OK) { /* one check for the whole build */
        fprintf(stderr, "%s\n", rj_ctx_error(ctx));
        return 1;
    }
    rj_program *p = rj_program_new(g, RJ_TARGET_CPU);
    if (!p) {
        fprintf(stderr, "%s\n", rj_ctx_error(ctx));
        return 1;
    }
    /* three sequences of 2, 1 and 3 rows, packed like torch.nested.nested_tensor */
    const float a[] = {1, 2, 3, 4}, b[] = {5, 6}, c[] = {0, 1, 0, 2, 0, 3};
    rj_tensor *xt = rj_tensor_from_components(ctx, RJ_F32, 3, (const void *[]){a, b, c},
                                              (int[]){2, 2, 2},
                                              (const int64_t *[]){(int64_t[]){2, 2}, (int64_t[]){1, 2},
                                                                  (int64_t[]){3, 2}});
    const float wv[] = {1.0f, 0.5f};
    rj_bind *bind = rj_bind_new(p);
    if (!xt || rj_bind_tensor(bind, x, xt) || rj_bind_input(bind, w, wv, 2) || rj_program_run(p, bind)) {
        fprintf(stderr, "%s\n", rj_ctx_error(ctx));
        return 1;
    }
    rj_tensor_info out;
    rj_tensor_get_info(rj_bind_result(bind, y), &out);
    const float *v = out.values;
    for (int64_t i = 0; i < out.shape[0]; i++) {
        printf("sequence %lld:", (long long)i);
        for (int64_t r = out.offsets[i]; r < out.offsets[i + 1]; r++) printf(" [%.4f %.4f]", v[2 * r], v[2 * r + 1]);
        printf("\n");
    }
    rj_bind_free(bind);
    rj_tensor_free(xt);
    rj_program_free(p);
    rj_graph_free(g);
    rj_ctx_free(ctx);
    return 0;
}
