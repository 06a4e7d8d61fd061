/*
 * test_alloc.c — allocation failure: a representative build + bind + run fails its Nth
 * allocation for every N until it completes, and each time the failing call reports
 * RJ_ERR_NOMEM, nothing crashes, and nothing leaks.
 */
#include "harness.h"

#include <stdio.h>
#include <string.h>

/* The scenario; returns RJ_OK on completion or the status of the first failure. */
static rj_status scenario(tracker *tr, rj_target target) {
    rj_ctx *ctx = rj_ctx_new(tracking_alloc, tr);
    if (!ctx) return RJ_ERR_NOMEM;
    rj_status st = RJ_OK;
    rj_graph *g = NULL;
    rj_program *p = NULL;
    rj_bind *b = NULL;
    rj_tensor *t = NULL, *padded = NULL;
    char *text = NULL;
#define CHECK(cond)                                                                           \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            st = rj_ctx_status(ctx);                                                          \
            goto done;                                                                        \
        }                                                                                     \
    } while (0)
    /* the sweep counts the allocations once and fails each in turn, so the run must not
     * depend on a persistent cache that the counting run itself fills (RAGJIT_CACHE_DIR) */
    CHECK(rj_ctx_set_cache_dir(ctx, "off") == RJ_OK);
    CHECK((g = rj_graph_new(ctx)));
    rj_dim B = rj_graph_dense(g, "B"), J = rj_graph_ragged(g, "j1", B);
    rj_dim J2 = rj_graph_ragged(g, "j2", B);
    rj_graph_same(g, J, J2);
    rj_node x = rj_graph_input(g, "x", RJ_F32, 3, (rj_dim[]){B, J, 4});
    rj_node y = rj_graph_input(g, "y", RJ_F32, 3, (rj_dim[]){B, J2, 4});
    rj_node w = rj_graph_input(g, "w", RJ_F32, 1, (rj_dim[]){4});
    rj_node h = rj_graph_unary(g, RJ_OP_GELU, rj_graph_binary(g, RJ_OP_MUL, x, w));
    h = rj_graph_binary(g, RJ_OP_ADD, h, y);
    rj_node s = rj_graph_softmax(g, h, 1);
    rj_node m = rj_graph_reduce(g, RJ_OP_MEAN, rj_graph_pad(g, h, 1.0, RJ_DIM_NONE), 1, false);
    rj_node n = rj_graph_layer_norm(g, h, 1, w, w, -1);
    rj_node u = rj_graph_unpad(g, rj_graph_pad(g, n, 0, 16), J);
    rj_graph_output(g, s, "s");
    rj_graph_output(g, m, "m");
    rj_graph_output(g, u, "u");
    CHECK(rj_graph_status(g) == RJ_OK);
    CHECK((text = rj_node_type_str(g, m)));
    CHECK((p = rj_program_new(g, target)));
    CHECK((b = rj_bind_new(p)));
    static const float a0[] = {1, 2, 3, 4, 5, 6, 7, 8}, a1[] = {9, 10, 11, 12};
    CHECK((t = rj_tensor_from_components(ctx, RJ_F32, 3, (const void *[]){a0, NULL, a1},
                                         (int[]){2, 2, 2},
                                         (const int64_t *[]){(int64_t[]){2, 4}, (int64_t[]){0, 4},
                                                             (int64_t[]){1, 4}})));
    CHECK((padded = rj_tensor_to_padded(t, 0, -1)));
    static const float wv[] = {1, -1, 0.5f, 2};
    CHECK(rj_bind_tensor(b, x, t) == RJ_OK);
    CHECK(rj_bind_tensor(b, y, t) == RJ_OK);
    CHECK(rj_bind_input(b, w, wv, 4) == RJ_OK);
    CHECK(rj_program_run(p, b) == RJ_OK);
    CHECK(rj_bind_result(b, u) != NULL);
    CHECK(rj_program_run(p, b) == RJ_OK);
done:
    rj_string_free(ctx, text);
    rj_tensor_free(padded);
    rj_tensor_free(t);
    rj_bind_free(b);
    rj_program_free(p);
    rj_graph_free(g);
    rj_ctx_free(ctx);
    return st;
#undef CHECK
}

static void sweep(rj_target target) {
    tracker clean = {0};
    assert_int_equal(scenario(&clean, target), RJ_OK);
    assert_int_equal(clean.live_blocks, 0);
    long total = clean.attempts;
    assert_true(total > 20);
    for (long nth = 1; nth <= total; nth++) {
        tracker tr = {.fail_at = nth};
        rj_status st = scenario(&tr, target);
        if (st != RJ_ERR_NOMEM)
            fail_msg("failing allocation %ld of %ld gave status %d (%s), not RJ_ERR_NOMEM", nth,
                     total, st, rj_status_str(st));
        if (tr.live_blocks != 0 || tr.bad_size)
            fail_msg("failing allocation %ld of %ld leaked %ld blocks", nth, total, tr.live_blocks);
    }
    printf("alloc sweep (%s): %ld allocation points, each failed once\n",
           target == RJ_TARGET_REFERENCE ? "reference" : "cpu", total);
}

static void test_alloc_failure_reference(void **state) {
    (void)state;
    sweep(RJ_TARGET_REFERENCE);
}

static void test_alloc_failure_cpu(void **state) {
    (void)state;
    sweep(RJ_TARGET_CPU);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_failure_reference),
        cmocka_unit_test(test_alloc_failure_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
