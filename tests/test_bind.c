/*
 * test_bind.c — bindings and run-time validation: every way bound data can be wrong gets its
 * own status and a message naming the input or symbol and the first bad index; views with
 * holes, `same` symbols, caller-owned outputs, derived dense sizes and re-running with new
 * offsets work.
 */
#include "harness.h"

#include <stdlib.h>
#include <string.h>

/* y = x * w + 1 over f32[B, j1, D] and f32[D]; s = sum(x, dim=1) */
typedef struct prog {
    rj_graph *g;
    rj_program *p;
    rj_bind *b;
    rj_dim B, J, D;
    rj_node x, w, y, s;
} prog;

static prog make_prog(rj_ctx *ctx) {
    prog q;
    q.g = rj_graph_new(ctx);
    q.B = rj_graph_dense(q.g, "B");
    q.D = rj_graph_dense(q.g, "D");
    q.J = rj_graph_ragged(q.g, "j1", q.B);
    q.x = rj_graph_input(q.g, "x", RJ_F32, 3, (rj_dim[]){q.B, q.J, q.D});
    q.w = rj_graph_input(q.g, "w", RJ_F32, 1, (rj_dim[]){q.D});
    q.y = rj_graph_binary(q.g, RJ_OP_ADD, rj_graph_binary(q.g, RJ_OP_MUL, q.x, q.w),
                          rj_graph_scalar(q.g, 1));
    q.s = rj_graph_reduce(q.g, RJ_OP_SUM, q.x, 1, false);
    rj_graph_output(q.g, q.y, "y");
    rj_graph_output(q.g, q.s, "s");
    q.p = rj_program_new(q.g, RJ_TARGET_REFERENCE);
    assert_non_null(q.p);
    q.b = rj_bind_new(q.p);
    assert_non_null(q.b);
    return q;
}

static void free_prog(prog *q) {
    rj_bind_free(q->b);
    rj_program_free(q->p);
    rj_graph_free(q->g);
}

static const float W[2] = {2, -1};
static float X[16];

static void bind_ok(prog *q, const int64_t *off, int64_t B, int64_t rows) {
    for (int i = 0; i < 16; i++) X[i] = (float)i;
    rj_bind_offsets(q->b, q->J, B, off, NULL);
    rj_bind_input(q->b, q->x, X, rows * 2);
    rj_bind_input(q->b, q->w, W, 2);
}

static void expect_run(rj_ctx *ctx, prog *q, rj_status s, const char *msg) {
    assert_int_equal(rj_program_run(q->p, q->b), s);
    assert_int_equal(rj_ctx_status(ctx), s);
    assert_error_contains(ctx, msg);
    assert_null(rj_bind_result(q->b, q->y)); /* no results after a failed run */
}

static void test_run_ok_and_rerun(void **state) {
    fixture *f = *state;
    prog q = make_prog(f->ctx);
    int64_t off[] = {0, 2, 2, 5};
    bind_ok(&q, off, 3, 5);
    assert_null(rj_bind_result(q.b, q.y)); /* not run yet */
    assert_ok(f->ctx, rj_program_run(q.p, q.b));
    rj_tensor_info yi, si;
    rj_tensor_get_info(rj_bind_result(q.b, q.y), &yi);
    rj_tensor_get_info(rj_bind_result(q.b, q.s), &si);
    assert_int_equal(yi.rows, 5);
    assert_int_equal(yi.shape[2], 2);
    assert_ptr_equal(yi.offsets, off);
    assert_true(((float *)yi.values)[3] == 3 * -1.0f + 1); /* x[1][1] * w[1] + 1 */
    assert_true(((float *)si.values)[0] == 0 + 2);
    assert_true(((float *)si.values)[2] == 0 && ((float *)si.values)[3] == 0); /* empty item */
    /* new offsets and a new batch size: same program, same binding */
    int64_t off2[] = {0, 1, 3, 4, 6, 8};
    bind_ok(&q, off2, 5, 8);
    assert_ok(f->ctx, rj_program_run(q.p, q.b));
    rj_tensor_get_info(rj_bind_result(q.b, q.s), &si);
    assert_int_equal(si.shape[0], 5);
    assert_true(((float *)si.values)[8] == 12 + 14);
    free_prog(&q);
}

static void test_unbound(void **state) {
    fixture *f = *state;
    prog q = make_prog(f->ctx);
    expect_run(f->ctx, &q, RJ_ERR_UNBOUND, "input x is not bound");
    int64_t off[] = {0, 2};
    rj_bind_input(q.b, q.x, X, 4);
    rj_bind_input(q.b, q.w, W, 2);
    expect_run(f->ctx, &q, RJ_ERR_UNBOUND, "ragged symbol j1 has no offsets bound");
    rj_bind_offsets(q.b, q.J, 1, off, NULL);
    assert_ok(f->ctx, rj_program_run(q.p, q.b)); /* D derived from w's 2 elements */
    free_prog(&q);
    /* a dense size that nothing determines */
    rj_graph *g = rj_graph_new(f->ctx);
    rj_dim B = rj_graph_dense(g, "B"), J = rj_graph_ragged(g, "j1", B), L = rj_graph_dense(g, "L");
    rj_node x = rj_graph_input(g, "x", RJ_F32, 2, (rj_dim[]){B, J});
    rj_graph_output(g, rj_graph_pad(g, x, 0, L), "p");
    rj_program *p = rj_program_new(g, RJ_TARGET_REFERENCE);
    rj_bind *b = rj_bind_new(p);
    rj_bind_offsets(b, J, 1, off, NULL);
    rj_bind_input(b, x, X, 2);
    assert_int_equal(rj_program_run(p, b), RJ_ERR_UNBOUND);
    assert_error_contains(f->ctx, "dense size L is not bound (rj_bind_size) and cannot be derived");
    rj_bind_size(b, L, 1);
    assert_int_equal(rj_program_run(p, b), RJ_ERR_PAD_LEN);
    assert_error_contains(f->ctx, "pad: length L = 1 is shorter than item 0 of j1 (2 rows); "
                                  "truncation is not supported");
    rj_bind_size(b, L, 4);
    assert_ok(f->ctx, rj_program_run(p, b));
    rj_bind_free(b);
    rj_program_free(p);
    rj_graph_free(g);
}

static void test_offsets_errors(void **state) {
    fixture *f = *state;
    prog q = make_prog(f->ctx);
    int64_t start[] = {1, 2, 5};
    bind_ok(&q, start, 2, 5);
    expect_run(f->ctx, &q, RJ_ERR_OFFSETS_START, "ragged symbol j1: offsets[0] is 1, expected 0");
    /* asking for a result after the failed run keeps the run's message (issue 13) */
    assert_null(rj_bind_result(q.b, q.y));
    assert_int_equal(rj_ctx_status(f->ctx), RJ_ERR_OFFSETS_START);
    assert_error_contains(f->ctx, "offsets[0] is 1, expected 0");
    int64_t order[] = {0, 2, 5, 4, 6};
    bind_ok(&q, order, 4, 6);
    expect_run(f->ctx, &q, RJ_ERR_OFFSETS_ORDER, "ragged symbol j1: offsets decrease at index 3 (4 after 5)");
    int64_t end[] = {0, 2, 5};
    bind_ok(&q, end, 2, 4);
    expect_run(f->ctx, &q, RJ_ERR_OFFSETS_END,
               "input x: the offsets of j1 end at 5 (index 2) but the values have 4 rows");
    bind_ok(&q, end, 2, 6);
    expect_run(f->ctx, &q, RJ_ERR_OFFSETS_END, "but the values have 6 rows");
    bind_ok(&q, end, 2, 5);
    rj_bind_input(q.b, q.x, X, 9); /* 4.5 rows of 2 */
    expect_run(f->ctx, &q, RJ_ERR_SIZE, "input x: bound 9 elements, not a whole number of rows of 2");
    bind_ok(&q, end, 2, 5);
    rj_bind_input(q.b, q.w, W, 1); /* D = 2 is derived from x (10 elements, 5 rows) */
    expect_run(f->ctx, &q, RJ_ERR_SIZE, "input w: bound 1 elements but its shape needs 2");
    bind_ok(&q, end, 2, 5);
    rj_bind_size(q.b, q.D, 3);
    expect_run(f->ctx, &q, RJ_ERR_SIZE, "input x: bound 10 elements, not a whole number of rows of 3");
    free_prog(&q);
}

static void test_batch_and_same(void **state) {
    fixture *f = *state;
    rj_graph *g = rj_graph_new(f->ctx);
    rj_dim B = rj_graph_dense(g, "B"), J1 = rj_graph_ragged(g, "j1", B), J2 = rj_graph_ragged(g, "j2", B);
    rj_graph_same(g, J1, J2);
    rj_node x = rj_graph_input(g, "x", RJ_F32, 2, (rj_dim[]){B, J1});
    rj_node y = rj_graph_input(g, "y", RJ_F32, 2, (rj_dim[]){B, J2});
    rj_node z = rj_graph_binary(g, RJ_OP_ADD, x, y);
    rj_graph_output(g, z, "z");
    rj_program *p = rj_program_new(g, RJ_TARGET_REFERENCE);
    rj_bind *b = rj_bind_new(p);
    float xv[6] = {1, 2, 3, 4, 5, 6}, yv[8] = {10, 20, 30, 40, 50, 60, 70, 80};
    int64_t o1[] = {0, 2, 3, 6}, o2[] = {0, 2, 3, 6, 8}, o3[] = {0, 2, 4, 6};
    rj_bind_offsets(b, J1, 3, o1, NULL);
    rj_bind_offsets(b, J2, 4, o2, NULL);
    rj_bind_input(b, x, xv, 6);
    rj_bind_input(b, y, yv, 8);
    assert_int_equal(rj_program_run(p, b), RJ_ERR_BATCH);
    assert_error_contains(f->ctx, "ragged symbols j1 and j2 vary over the same dim B but have batch sizes 3 and 4");
    rj_bind_offsets(b, J2, 3, o3, NULL);
    rj_bind_input(b, y, yv, 6);
    assert_int_equal(rj_program_run(p, b), RJ_ERR_SAME);
    assert_error_contains(f->ctx, "j1 and j2 are declared same but item 1 has length 1 vs 2");
    /* y as a view with holes with the same lengths as j1: fine, and added row by row */
    int64_t hoff3[] = {0, 3, 6, 9}, hlen3[] = {2, 1, 3};
    float yh[9] = {10, 20, -1, 30, -1, -1, 40, 50, 60};
    rj_bind_offsets(b, J2, 3, hoff3, hlen3);
    rj_bind_input(b, y, yh, 9);
    assert_ok(f->ctx, rj_program_run(p, b));
    rj_tensor_info zi;
    rj_tensor_get_info(rj_bind_result(b, z), &zi);
    assert_null(zi.lengths);
    double want[] = {11, 22, 33, 44, 55, 66};
    assert_close_f("same add", zi.values, RJ_F32, want, 6, 0, 0);
    /* B bound explicitly must agree */
    rj_bind_size(b, B, 2);
    assert_int_equal(rj_program_run(p, b), RJ_ERR_BATCH);
    assert_error_contains(f->ctx, "ragged symbol j1 has 4 offsets (batch 3) but B is bound to 2");
    rj_bind_free(b);
    rj_program_free(p);
    rj_graph_free(g);
}

/* A `same` class whose first symbol no tensor uses: the interpreter (which dereferenced the
 * unbound root's lengths) and the CPU agree; members are compared with each other whichever
 * are bound, and offsets bound to an unused member are checked like any others. */
static void test_same_unused_root(void **state) {
    fixture *f = *state;
    rj_graph *g = rj_graph_parse(f->ctx, "ragged j1 : B\nragged j2 : B\nragged j3 : B\n"
                                 "same j1 j2\nsame j2 j3\ninput x : f32[B, j2, 2]\n"
                                 "input z : f32[B, j3, 2]\ny = x * 2 + z\noutput y\n", "s.rj");
    if (!g) fail_msg("%s", rj_ctx_error(f->ctx));
    rj_dim J1 = rj_graph_find_dim(g, "j1"), J2 = rj_graph_find_dim(g, "j2"),
          J3 = rj_graph_find_dim(g, "j3");
    rj_node x = rj_graph_find(g, "x"), z = rj_graph_find(g, "z"), y = rj_graph_find(g, "y");
    static const float xv[6] = {1, 2, 3, 4, 5, 6}, zv[6] = {10, 20, 30, 40, 50, 60};
    static const int64_t o[] = {0, 1, 3}, other[] = {0, 2, 3}, bad[] = {1, 2, 3};
    static const double want[] = {12, 24, 36, 48, 60, 72};
    static const rj_target targets[] = {RJ_TARGET_REFERENCE, RJ_TARGET_CPU};
    for (int t = 0; t < 2; t++) {
        rj_program *p = rj_program_new(g, targets[t]);
        if (!p) fail_msg("%s", rj_ctx_error(f->ctx));
        rj_bind *b = rj_bind_new(p);
        rj_bind_offsets(b, J2, 2, o, NULL);
        rj_bind_offsets(b, J3, 2, o, NULL);
        rj_bind_input(b, x, xv, 6);
        rj_bind_input(b, z, zv, 6);
        assert_ok(f->ctx, rj_program_run(p, b));
        rj_tensor_info yi;
        rj_tensor_get_info(rj_bind_result(b, y), &yi);
        assert_close_f("same, unused root", yi.values, RJ_F32, want, 6, 0, 0);
        /* j2 and j3 differ: with j1 unbound this used to pass unchecked */
        rj_bind_offsets(b, J3, 2, other, NULL);
        assert_int_equal(rj_program_run(p, b), RJ_ERR_SAME);
        assert_error_contains(f->ctx, "j2 and j3 are declared same but item 0 has length 1 vs 2");
        rj_bind_offsets(b, J3, 2, o, NULL);
        rj_bind_offsets(b, J1, 2, bad, NULL);
        assert_int_equal(rj_program_run(p, b), RJ_ERR_OFFSETS_START);
        assert_error_contains(f->ctx, "ragged symbol j1: offsets[0] is 1, expected 0");
        rj_bind_offsets(b, J1, 2, o, NULL);
        assert_ok(f->ctx, rj_program_run(p, b));
        rj_bind_free(b);
        rj_program_free(p);
    }
    rj_graph_free(g);
}

static void test_holes(void **state) {
    fixture *f = *state;
    prog q = make_prog(f->ctx);
    /* a padded [3, 4, 2] buffer narrowed to lengths 2, 0, 3 */
    float pad[24];
    for (int i = 0; i < 24; i++) pad[i] = (float)i;
    int64_t off[] = {0, 4, 8, 12}, len[] = {2, 0, 3};
    rj_bind_offsets(q.b, q.J, 3, off, len);
    rj_bind_input(q.b, q.x, pad, 24);
    rj_bind_input(q.b, q.w, W, 2);
    /* the capacity a caller's output needs, asked before the run: rows up to the furthest
     * row (holes included) x inner; a dense output's elements */
    int64_t need = -1;
    assert_ok(f->ctx, rj_bind_output_numel(q.b, q.y, &need));
    assert_int_equal(need, 11 * 2);
    assert_ok(f->ctx, rj_bind_output_numel(q.b, q.s, &need));
    assert_int_equal(need, 3 * 2);
    assert_int_equal(rj_bind_output_numel(q.b, q.y, NULL), RJ_ERR_ARG);
    assert_ok(f->ctx, rj_program_run(q.p, q.b));
    assert_ok(f->ctx, rj_bind_output_numel(q.b, q.y, &need)); /* the results stay readable */
    assert_non_null(rj_bind_result(q.b, q.y));
    rj_tensor_info yi, si;
    rj_tensor_get_info(rj_bind_result(q.b, q.y), &yi);
    rj_tensor_get_info(rj_bind_result(q.b, q.s), &si);
    assert_ptr_equal(yi.lengths, len);
    assert_int_equal(yi.rows, 11); /* the output keeps the holes layout */
    const float *yv = yi.values;
    assert_true(yv[0] == 1 && yv[1] == 0 && yv[2] == 5 && yv[3] == -2);
    assert_true(yv[16] == 33 && yv[17] == -16 && yv[21] == -20);
    double want_s[] = {0 + 2, 1 + 3, 0, 0, 16 + 18 + 20, 17 + 19 + 21};
    assert_close_f("sum with holes", si.values, RJ_F32, want_s, 6, 0, 0);
    /* errors specific to holes */
    int64_t neg_off[] = {0, -4, 8, 0}, neg_len[] = {2, -1, 3}, far[] = {0, 4, 20, 0};
    rj_bind_offsets(q.b, q.J, 3, neg_off, len);
    expect_run(f->ctx, &q, RJ_ERR_OFFSETS_START, "ragged symbol j1: offsets[1] is negative (-4)");
    rj_bind_offsets(q.b, q.J, 3, off, neg_len);
    expect_run(f->ctx, &q, RJ_ERR_OFFSETS_ORDER, "ragged symbol j1: lengths[1] is negative (-1)");
    rj_bind_offsets(q.b, q.J, 3, far, len);
    expect_run(f->ctx, &q, RJ_ERR_OFFSETS_END, "address rows up to 23 (index 3) but the values have 12 rows");
    int64_t huge[] = {INT64_MAX - 1, 0, 0, 0};
    rj_bind_offsets(q.b, q.J, 3, huge, len);
    expect_run(f->ctx, &q, RJ_ERR_OVERFLOW, "offsets[0] + lengths[0] overflows");
    free_prog(&q);
}

static void test_outputs_and_sizes(void **state) {
    fixture *f = *state;
    prog q = make_prog(f->ctx);
    int64_t off[] = {0, 2, 5};
    bind_ok(&q, off, 2, 5);
    float ybuf[10], small[3];
    assert_ok(f->ctx, rj_bind_output(q.b, q.y, ybuf, 10));
    assert_ok(f->ctx, rj_program_run(q.p, q.b));
    rj_tensor_info yi;
    rj_tensor_get_info(rj_bind_result(q.b, q.y), &yi);
    assert_ptr_equal(yi.values, ybuf);
    assert_true(ybuf[9] == 9 * -1.0f + 1);
    assert_ok(f->ctx, rj_bind_output(q.b, q.y, small, 3));
    expect_run(f->ctx, &q, RJ_ERR_SIZE, "output y: the bound buffer holds 3 elements but this run writes 10");
    assert_ok(f->ctx, rj_bind_output(q.b, q.y, NULL, 0)); /* back to ragjit-owned memory */
    assert_ok(f->ctx, rj_program_run(q.p, q.b));
    /* overflow of the element count */
    rj_bind_size(q.b, q.D, INT64_C(1) << 62);
    expect_run(f->ctx, &q, RJ_ERR_OVERFLOW, "input x: the element count overflows");
    free_prog(&q);
    /* ... also for an empty batch (NumPy's rule: an empty tensor's dims must fit too, so
     * that nothing downstream multiplies them past 64 bits) */
    rj_graph *g = rj_graph_new(f->ctx);
    rj_dim B = rj_graph_dense(g, "B"), J = rj_graph_ragged(g, "j1", B), D = rj_graph_dense(g, "D");
    rj_node x = rj_graph_input(g, "x", RJ_F32, 4, (rj_dim[]){B, J, D, D});
    assert_ok(f->ctx, rj_graph_output(g, rj_graph_unary(g, RJ_OP_NEG, x), "y"));
    rj_program *p = rj_program_new(g, RJ_TARGET_REFERENCE);
    rj_bind *b = rj_bind_new(p);
    assert_ok(f->ctx, rj_bind_offsets(b, J, 0, off, NULL));
    assert_ok(f->ctx, rj_bind_input(b, x, NULL, 0));
    assert_ok(f->ctx, rj_bind_size(b, D, INT64_C(1) << 32));
    assert_int_equal(rj_program_run(p, b), RJ_ERR_OVERFLOW);
    assert_error_contains(f->ctx, "input x: the element count overflows");
    assert_ok(f->ctx, rj_bind_size(b, D, INT64_C(1) << 31));
    assert_ok(f->ctx, rj_program_run(p, b));
    rj_bind_free(b);
    rj_program_free(p);
    rj_graph_free(g);
}

/* Outputs ragjit places start on a cache line, and large ones (64 KiB on) half a page past a
 * page (util/mem.c: a kernel's loads of an input from malloc, 16 bytes past a page, then never
 * wait for its stores to the output as they did at 64 bytes past one: 4K aliasing), however
 * the block grows or shrinks between runs, and a tensor ragjit allocates is placed alike. */
static void test_output_placement(void **state) {
    fixture *f = *state;
    prog q = make_prog(f->ctx);
    static const int64_t sizes[] = {3, 20000, 5, 40000, 16384};
    enum { MAXROWS = 40000 };
    float *x = calloc(2 * MAXROWS, sizeof(float));
    assert_non_null(x);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int64_t rows = sizes[k], off[] = {0, rows / 2, rows};
        assert_ok(f->ctx, rj_bind_offsets(q.b, q.J, 2, off, NULL));
        assert_ok(f->ctx, rj_bind_input(q.b, q.x, x, rows * 2));
        assert_ok(f->ctx, rj_bind_input(q.b, q.w, W, 2));
        x[2 * rows - 1] = 3.0f;
        assert_ok(f->ctx, rj_program_run(q.p, q.b));
        rj_tensor_info yi, si;
        rj_tensor_get_info(rj_bind_result(q.b, q.y), &yi);
        rj_tensor_get_info(rj_bind_result(q.b, q.s), &si);
        uintptr_t at = (uintptr_t)yi.values;
        assert_int_equal(at % 64, 0);
        if (rows * 2 * (int64_t)sizeof(float) >= 64 << 10) assert_int_equal(at % 4096, 2048);
        assert_int_equal((uintptr_t)si.values % 64, 0);
        assert_true(((float *)yi.values)[2 * rows - 1] == 3.0f * -1.0f + 1); /* the last element written */
        x[2 * rows - 1] = 0.0f;
    }
    free(x);
    free_prog(&q);
    for (int64_t n = 1; n <= (1 << 16); n *= 16) { /* tensors: 4 bytes to 256 KiB */
        rj_tensor *d = rj_tensor_dense(f->ctx, RJ_F32, 1, &n, NULL);
        assert_non_null(d);
        rj_tensor_info in;
        rj_tensor_get_info(d, &in);
        assert_int_equal((uintptr_t)in.values % (n * 4 >= 64 << 10 ? 4096 : 64), n * 4 >= 64 << 10 ? 2048 : 0);
        ((float *)in.values)[n - 1] = 1.0f;
        rj_tensor_free(d);
    }
}

static void test_bind_argument_errors(void **state) {
    fixture *f = *state;
    prog q = make_prog(f->ctx);
    int64_t off[] = {0, 1};
    assert_int_equal(rj_bind_input(q.b, q.y, X, 2), RJ_ERR_ARG);
    assert_error_contains(f->ctx, "rj_bind_input: node 4 is not an input of the program");
    assert_int_equal(rj_bind_input(q.b, q.x, X, -1), RJ_ERR_SIZE);
    assert_int_equal(rj_bind_input(q.b, q.x, NULL, 3), RJ_ERR_ARG);
    assert_int_equal(rj_bind_input(q.b, q.x, NULL, 0), RJ_OK);
    assert_int_equal(rj_bind_output(q.b, q.x, X, 2), RJ_ERR_ARG);
    assert_int_equal(rj_bind_output(q.b, q.y, NULL, 5), RJ_ERR_ARG);
    assert_int_equal(rj_bind_size(q.b, q.J, 3), RJ_ERR_ARG);
    assert_error_contains(f->ctx, "rj_bind_size: j1 is not a dense size (bind offsets for a ragged symbol)");
    assert_int_equal(rj_bind_size(q.b, q.D, -3), RJ_ERR_SIZE);
    assert_int_equal(rj_bind_size(q.b, 17, 3), RJ_ERR_ARG);
    assert_int_equal(rj_bind_offsets(q.b, q.B, 1, off, NULL), RJ_ERR_ARG);
    assert_int_equal(rj_bind_offsets(q.b, q.J, 1, NULL, NULL), RJ_ERR_ARG);
    assert_int_equal(rj_bind_offsets(q.b, q.J, -1, off, NULL), RJ_ERR_BATCH);
    assert_int_equal(rj_bind_size(NULL, q.D, 1), RJ_ERR_ARG);
    assert_null(rj_bind_result(q.b, q.x));
    assert_null(rj_bind_result(NULL, q.y));
    assert_int_equal(rj_bind_tensor(q.b, q.x, NULL), RJ_ERR_ARG);
    prog other = make_prog(f->ctx);
    assert_int_equal(rj_program_run(q.p, other.b), RJ_ERR_ARG);
    assert_error_contains(f->ctx, "the binding belongs to another program");
    assert_int_equal(rj_program_run(q.p, NULL), RJ_ERR_ARG);
    free_prog(&other);
    free_prog(&q);
}

static void test_bind_tensor(void **state) {
    fixture *f = *state;
    prog q = make_prog(f->ctx);
    float c0[] = {1, 2, 3, 4}, c1[] = {5, 6};
    rj_tensor *t = rj_tensor_from_components(f->ctx, RJ_F32, 2, (const void *[]){c0, c1},
                                             (int[]){2, 2},
                                             (const int64_t *[]){(int64_t[]){2, 2}, (int64_t[]){1, 2}});
    assert_non_null(t);
    assert_ok(f->ctx, rj_bind_tensor(q.b, q.x, t));
    rj_bind_input(q.b, q.w, W, 2);
    assert_ok(f->ctx, rj_program_run(q.p, q.b));
    rj_tensor_info si;
    rj_tensor_get_info(rj_bind_result(q.b, q.s), &si);
    assert_close_f("sum", si.values, RJ_F32, (double[]){4, 6, 5, 6}, 4, 0, 0);
    /* wrong dtype or rank */
    rj_tensor *d = rj_tensor_dense(f->ctx, RJ_F32, 1, (int64_t[]){2}, NULL);
    assert_int_equal(rj_bind_tensor(q.b, q.x, d), RJ_ERR_SHAPE);
    assert_error_contains(f->ctx, "rj_bind_tensor: x is jagged f32[rank 3] but the tensor is f32[rank 1]");
    assert_ok(f->ctx, rj_bind_tensor(q.b, q.w, d));
    /* the result tensor belongs to the binding: freeing it is ignored */
    rj_tensor_free((rj_tensor *)rj_bind_result(q.b, q.s));
    rj_tensor_free(d);
    rj_tensor_free(t);
    free_prog(&q);
}

/* Items of 2^40 rows of no element each ([B, j1, D] with D = 0: no values at all), or a dense
 * [2^40, 0], are valid data. Every op runs in no time, on the interpreter and the CPU: the
 * elementwise kernels once ran 2^40 empty units (a hang), and the interpreter's prefix sums of squared lengths (which
 * only tensors with two ragged dims read) overflowed (undefined behaviour, caught by UBSan in
 * the fuzzer). The results hold no element: [B, j1, 0], the sum [B, 0]. */
/* Data of many rows and no element: [B, j1, 0] with items of 2^40 rows, and a dense [2^40, 0].
 * Valid, and nothing to compute; every kernel kind must launch nothing for it (2^40 empty
 * units are a hang) and the interpreter must not overflow on its lengths. */
enum { NOTHING_JAGGED = 16, NOTHING_DENSE = 5 };

static const char *const nothing_what[NOTHING_JAGGED + NOTHING_DENSE] = {
    "x + 1", "sum(x, 1)", "softmax(x, 1)", "unpad(pad(x) * 2)", "layer_norm(x, D)",
    "rms_norm(x, D)", "softmax(x, 2)", "log_softmax(x, 2)", "x @ w", "relu(linear(x, w, b))",
    "gather(x, 1, i)", "max(x, 1)", "softmax(x4, 2) of [B, j1, 0, 4]",
    "softmax(x4, 2) of [B, j1, 4, 0]", "exp(unsqueeze(x, 2))", "layer_norm(x, D) * 2 + x",
    "dense x + 1", "dense x @ w", "dense softmax(x, 1)", "dense layer_norm(x, D)",
    "dense exp of [2^40, 0, 4]"};

/* Builds case c (< NOTHING_JAGGED: jagged, else dense) and binds it; returns its output. */
static rj_node nothing_case(rj_ctx *ctx, rj_graph *g, rj_bind **bp, rj_target t, int c, rj_program **pp) {
    rj_dim B = rj_graph_dense(g, "B"), D = rj_graph_dense(g, "D"), E = rj_graph_dense(g, "E");
    rj_dim J = rj_graph_ragged(g, "j1", B), Z = rj_graph_dense(g, "Z");
    bool dense = c >= NOTHING_JAGGED;
    rj_node x = dense ? rj_graph_input(g, "x", RJ_F32, c == 20 ? 3 : 2, (rj_dim[]){Z, D, E})
                      : rj_graph_input(g, "x", RJ_F32, 3, (rj_dim[]){B, J, D});
    rj_node in[3] = {RJ_NONE, RJ_NONE, RJ_NONE}, y = RJ_NONE;
    switch (c) {
    case 0: case 16: y = rj_graph_binary(g, RJ_OP_ADD, x, rj_graph_scalar(g, 1)); break;
    case 1: y = rj_graph_reduce(g, RJ_OP_SUM, x, 1, false); break;
    case 2: y = rj_graph_softmax(g, x, 1); break;
    case 3:
        y = rj_graph_unpad(g, rj_graph_binary(g, RJ_OP_MUL, rj_graph_pad(g, x, 0, RJ_DIM_NONE), rj_graph_scalar(g, 2)), J);
        break;
    case 4: case 19: y = rj_graph_layer_norm(g, x, 1, RJ_NONE, RJ_NONE, -1); break;
    case 5: y = rj_graph_rms_norm(g, x, 1, RJ_NONE, -1); break;
    case 6: y = rj_graph_softmax(g, x, 2); break;
    case 7: y = rj_graph_log_softmax(g, x, 2); break;
    case 8: case 9: case 17:
        in[0] = rj_graph_input(g, "w", RJ_F32, 2, (rj_dim[]){D, D});
        if (c != 9) {
            y = rj_graph_matmul(g, x, in[0]);
            break;
        }
        in[1] = rj_graph_input(g, "b", RJ_F32, 1, (rj_dim[]){D});
        y = rj_graph_unary(g, RJ_OP_RELU, rj_graph_linear(g, x, in[0], in[1]));
        break;
    case 10:
        in[0] = rj_graph_input(g, "i", RJ_I64, 3, (rj_dim[]){B, J, D});
        y = rj_graph_gather(g, x, 1, in[0]);
        break;
    case 11: y = rj_graph_reduce(g, RJ_OP_MAX, x, 1, false); break;
    case 12: case 13:
        in[0] = rj_graph_input(g, "x4", RJ_F32, 4, (rj_dim[]){B, J, c == 12 ? D : E, c == 12 ? E : D});
        y = rj_graph_softmax(g, in[0], 2);
        break;
    case 14: y = rj_graph_unary(g, RJ_OP_EXP, rj_graph_unsqueeze(g, x, 2)); break;
    case 15:
        y = rj_graph_binary(g, RJ_OP_ADD, rj_graph_binary(g, RJ_OP_MUL, rj_graph_layer_norm(g, x, 1, RJ_NONE, RJ_NONE, -1),
                                                          rj_graph_scalar(g, 2)), x);
        break;
    case 18: y = rj_graph_softmax(g, x, 1); break;
    case 20: y = rj_graph_unary(g, RJ_OP_EXP, x); break;
    }
    assert_ok(ctx, rj_graph_output(g, y, "y"));
    *pp = rj_program_new(g, t);
    if (!*pp) return RJ_NONE;
    rj_bind *b = *bp = rj_bind_new(*pp);
    assert_non_null(b);
    static float none[1];
    static const int64_t off[3] = {0, (int64_t)1 << 40, ((int64_t)1 << 40) + 5}; /* borrowed by b */
    if (!dense) assert_ok(ctx, rj_bind_offsets(b, J, 2, off, NULL));
    assert_ok(ctx, rj_bind_size(b, D, 0));
    assert_ok(ctx, rj_bind_size(b, E, 4));
    if (dense) assert_ok(ctx, rj_bind_size(b, Z, (int64_t)1 << 40));
    assert_ok(ctx, rj_bind_input(b, x, none, 0));
    for (int k = 0; k < 3; k++)
        if (in[k] != RJ_NONE) assert_ok(ctx, rj_bind_input(b, in[k], none, 0));
    return y;
}

static void test_rows_of_nothing(void **state) {
    fixture *f = *state;
    const rj_target targets[] = {RJ_TARGET_REFERENCE, RJ_TARGET_CPU, RJ_TARGET_OPENCL};
    for (int t = 0; t < 3; t++)
        for (int c = 0; c < NOTHING_JAGGED + NOTHING_DENSE; c++) {
            rj_graph *g = rj_graph_new(f->ctx);
            rj_bind *b = NULL;
            rj_program *p = NULL;
            rj_node y = nothing_case(f->ctx, g, &b, targets[t], c, &p);
            if (!p) { /* OpenCL where no device exists */
                assert_int_equal(rj_ctx_status(f->ctx), RJ_ERR_NO_DEVICE);
                assert_int_equal(targets[t], RJ_TARGET_OPENCL);
                rj_graph_free(g);
                break;
            }
            rj_status s = rj_program_run(p, b);
            if (c == 3) { /* the padded tensor would be 2 x 2^40 x 0: allowed, or refused by size */
                if (s != RJ_OK && s != RJ_ERR_SIZE && s != RJ_ERR_OVERFLOW)
                    fail_msg("%s on target %d: %s", nothing_what[c], t, rj_ctx_error(f->ctx));
            } else {
                if (s) fail_msg("%s on target %d: %s", nothing_what[c], t, rj_ctx_error(f->ctx));
                rj_tensor_info ti;
                assert_ok(f->ctx, rj_tensor_get_info(rj_bind_result(b, y), &ti));
                int64_t n = 1;
                for (int d = 0; d < ti.rank; d++) n *= ti.shape[d] < 0 ? 1 : ti.shape[d];
                assert_int_equal(n, 0); /* no element, whatever the rows */
                assert_int_equal(ti.shape[0], c < NOTHING_JAGGED ? 2 : (int64_t)1 << 40);
            }
            rj_bind_free(b);
            rj_program_free(p);
            rj_graph_free(g);
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        FX(test_run_ok_and_rerun), FX(test_unbound),           FX(test_offsets_errors),
        FX(test_batch_and_same),   FX(test_same_unused_root),  FX(test_holes),
        FX(test_outputs_and_sizes),
        FX(test_output_placement), FX(test_bind_argument_errors), FX(test_bind_tensor),
        FX(test_rows_of_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
