/*
 * test_graph.c — graph building and checking: types inferred for every op family, and every
 * way a graph can be ill-formed rejected at the call that made it, with the op and the shapes
 * named in the message.
 */
#include "harness.h"

#include "../src/ir/passes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct env {
    rj_ctx *ctx;
    rj_graph *g;
    rj_dim B, J, J2, D;
    rj_node x, y, w, z;
} env;

/* x, z: f32[B, j1, 64]; y: f32[B, j2, 64]; w: f32[64] */
static env make_env(void **state) {
    fixture *f = *state;
    env e = {.ctx = f->ctx};
    e.g = rj_graph_new(f->ctx);
    e.B = rj_graph_dense(e.g, "B");
    e.D = rj_graph_dense(e.g, "D");
    e.J = rj_graph_ragged(e.g, "j1", e.B);
    e.J2 = rj_graph_ragged(e.g, "j2", e.B);
    e.x = rj_graph_input(e.g, "x", RJ_F32, 3, (rj_dim[]){e.B, e.J, 64});
    e.y = rj_graph_input(e.g, "y", RJ_F32, 3, (rj_dim[]){e.B, e.J2, 64});
    e.w = rj_graph_input(e.g, "w", RJ_F32, 1, (rj_dim[]){64});
    e.z = rj_graph_input(e.g, "z", RJ_F32, 3, (rj_dim[]){e.B, e.J, 64});
    assert_int_equal(rj_graph_status(e.g), RJ_OK);
    return e;
}

static void assert_type(env *e, rj_node n, const char *want) {
    if (n == RJ_NONE) fail_msg("node failed: %s", rj_ctx_error(e->ctx));
    char *s = rj_node_type_str(e->g, n);
    assert_non_null(s);
    assert_string_equal(s, want);
    rj_string_free(e->ctx, s);
}

/* The node failed with status s and the exact message msg (or containing it, if partial). */
static void assert_fails(env *e, rj_node n, rj_status s, const char *msg) {
    assert_int_equal(n, RJ_NONE);
    assert_int_equal(rj_graph_status(e->g), s);
    assert_error_contains(e->ctx, msg);
    rj_graph_free(e->g);
    e->g = NULL;
}

static void test_ragged_mismatch_message(void **state) {
    env e = make_env(state);
    rj_node a = rj_graph_input(e.g, "a", RJ_F32, 3, (rj_dim[]){e.B, e.J, 128});
    rj_node b = rj_graph_input(e.g, "b", RJ_F32, 3, (rj_dim[]){e.B, e.J2, 128});
    rj_node n = rj_graph_binary(e.g, RJ_OP_ADD, a, b);
    assert_int_equal(n, RJ_NONE);
    assert_string_equal(rj_ctx_error(e.ctx),
                        "add: f32[B, j1, 128] and f32[B, j2, 128] differ in dim 1 (ragged j1 vs j2); if their items have equal lengths, declare `same j1 j2`");
    assert_fails(&e, n, RJ_ERR_SHAPE, "ragged j1 vs j2");
}

/* Two ragged classes of B (cross attention): queries x of j1 by keys y of j2 make [B, j1, j2];
 * what meets the blocks must be of the right class, and the messages name both symbols. */
static void test_cross_classes(void **state) {
    env e = make_env(state);
    rj_node s = rj_graph_matmul(e.g, e.x, rj_graph_transpose(e.g, e.y, 1, 2));
    assert_type(&e, s, "f32[B, j1, j2]");
    assert_type(&e, rj_graph_matmul(e.g, rj_graph_softmax(e.g, s, 2), e.y), "f32[B, j1, 64]");
    assert_type(&e, rj_graph_reduce(e.g, RJ_OP_SUM, s, 1, false), "f32[B, j2]");
    assert_type(&e, rj_graph_sdpa(e.g, e.x, e.y, e.y, RJ_NONE, true, NAN, false), "f32[B, j1, 64]");
    rj_node qx = rj_graph_transpose(e.g, rj_graph_reshape(e.g, e.x, 4, (rj_dim[]){e.B, e.J, 4, 16}), 1, 2);
    rj_node ky = rj_graph_transpose(e.g, rj_graph_reshape(e.g, e.y, 4, (rj_dim[]){e.B, e.J2, 4, 16}), 1, 2);
    assert_type(&e, rj_graph_matmul(e.g, qx, rj_graph_transpose(e.g, ky, -2, -1)), "f32[B, 4, j1, j2]");
    assert_fails(&e, rj_graph_matmul(e.g, s, e.z), RJ_ERR_SHAPE,
                 "matmul: f32[B, j1, j2] times f32[B, j1, 64]: per item, the contracted dims differ (ragged j2 vs "
                 "ragged j1)");
    e = make_env(state);
    s = rj_graph_matmul(e.g, e.x, rj_graph_transpose(e.g, e.y, 1, 2));
    rj_node st = rj_graph_matmul(e.g, e.y, rj_graph_transpose(e.g, e.x, 1, 2));
    assert_fails(&e, rj_graph_binary(e.g, RJ_OP_ADD, s, st), RJ_ERR_SHAPE,
                 "add: f32[B, j1, j2] and f32[B, j2, j1] differ in dim 1 (ragged j1 vs j2)");
    e = make_env(state);
    assert_fails(&e, rj_graph_sdpa(e.g, e.x, e.y, e.z, RJ_NONE, false, NAN, false), RJ_ERR_SHAPE,
                 "attention: the values f32[B, j1, 64] must be jagged [B, j2, Dv] with the scores' batch dim and "
                 "the ragged class of their keys, j2 (the scores are f32[B, j1, j2])");
}

static void test_dim_mismatch_messages(void **state) {
    env e = make_env(state);
    rj_node v = rj_graph_input(e.g, "v", RJ_F32, 1, (rj_dim[]){32});
    assert_fails(&e, rj_graph_binary(e.g, RJ_OP_MUL, e.x, v), RJ_ERR_SHAPE,
                 "mul: f32[B, j1, 64] and f32[32] differ in dim 2 (64 vs 32)");
    e = make_env(state);
    rj_node p = rj_graph_input(e.g, "p", RJ_F32, 3, (rj_dim[]){e.B, 5, 64});
    assert_fails(&e, rj_graph_binary(e.g, RJ_OP_SUB, e.x, p), RJ_ERR_SHAPE,
                 "sub: f32[B, j1, 64] and f32[B, 5, 64] differ in dim 1 (ragged j1 vs 5)");
    e = make_env(state);
    rj_node q = rj_graph_input(e.g, "q", RJ_F32, 1, (rj_dim[]){e.D});
    assert_fails(&e, rj_graph_binary(e.g, RJ_OP_MAXIMUM, e.x, q), RJ_ERR_SHAPE,
                 "maximum: f32[B, j1, 64] and f32[D] differ in dim 2 (64 vs D)");
    /* a padded tensor does not combine with a jagged one */
    e = make_env(state);
    rj_node pd = rj_graph_pad(e.g, e.x, 0, RJ_DIM_NONE);
    assert_fails(&e, rj_graph_binary(e.g, RJ_OP_ADD, pd, e.z), RJ_ERR_SHAPE,
                 "add: f32[B, max(j1), 64] and f32[B, j1, 64] differ in dim 1 (max(j1) vs ragged j1)");
    /* a per-item tensor [B, D] against a jagged one: the [B, 1, D] form suggested */
    e = make_env(state);
    rj_node pi = rj_graph_input(e.g, "pi", RJ_F32, 2, (rj_dim[]){e.B, 64});
    assert_fails(&e, rj_graph_binary(e.g, RJ_OP_ADD, e.x, pi), RJ_ERR_SHAPE,
                 "add: f32[B, j1, 64] and f32[B, 64] differ in dim 1 (ragged j1 vs B); a per-item tensor broadcasts "
                 "over an item's rows as f32[B, 1, 64] (keepdim=True, or declare it so)");
}

static void test_broadcasting(void **state) {
    env e = make_env(state);
    rj_node b1 = rj_graph_input(e.g, "b1", RJ_F32, 3, (rj_dim[]){e.B, 1, 64});
    rj_node one = rj_graph_input(e.g, "one", RJ_F32, 2, (rj_dim[]){1, 64});
    assert_type(&e, rj_graph_binary(e.g, RJ_OP_MUL, e.x, e.w), "f32[B, j1, 64]");
    assert_type(&e, rj_graph_binary(e.g, RJ_OP_ADD, e.x, b1), "f32[B, j1, 64]");
    assert_type(&e, rj_graph_binary(e.g, RJ_OP_ADD, b1, e.x), "f32[B, j1, 64]");
    assert_type(&e, rj_graph_binary(e.g, RJ_OP_ADD, one, e.x), "f32[B, j1, 64]");
    assert_type(&e, rj_graph_binary(e.g, RJ_OP_ADD, e.x, rj_graph_scalar(e.g, 1)), "f32[B, j1, 64]");
    assert_type(&e, rj_graph_binary(e.g, RJ_OP_ADD, rj_graph_scalar(e.g, 1), e.w), "f32[64]");
    assert_type(&e, rj_graph_binary(e.g, RJ_OP_ADD, b1, e.w), "f32[B, 1, 64]");
    assert_type(&e, rj_graph_where(e.g, rj_graph_binary(e.g, RJ_OP_GT, e.x, e.w), e.x,
                                   rj_graph_scalar(e.g, 0)), "f32[B, j1, 64]");
    assert_int_equal(rj_graph_status(e.g), RJ_OK);
    rj_graph_free(e.g);
}

static void test_same_symbols(void **state) {
    env e = make_env(state);
    assert_int_equal(rj_graph_same(e.g, e.J, e.J2), RJ_OK);
    assert_type(&e, rj_graph_binary(e.g, RJ_OP_ADD, e.x, e.y), "f32[B, j1, 64]");
    assert_type(&e, rj_graph_binary(e.g, RJ_OP_ADD, e.y, e.x), "f32[B, j2, 64]");
    rj_dim C = rj_graph_dense(e.g, "C");
    rj_dim K = rj_graph_ragged(e.g, "k", C);
    assert_int_equal(rj_graph_same(e.g, e.J, K), RJ_ERR_SHAPE);
    assert_error_contains(e.ctx, "same: j1 and k have different parents (B vs C)");
    rj_graph_free(e.g);
    e = make_env(state);
    assert_int_equal(rj_graph_same(e.g, e.J, e.B), RJ_ERR_ARG);
    rj_graph_free(e.g);
}

static void test_dtype_promotion(void **state) {
    env e = make_env(state);
    rj_graph *g = e.g;
    rj_node i32 = rj_graph_input(g, "i32", RJ_I32, 3, (rj_dim[]){e.B, e.J, 64});
    rj_node i64 = rj_graph_input(g, "i64", RJ_I64, 1, (rj_dim[]){64});
    rj_node f64 = rj_graph_input(g, "f64", RJ_F64, 1, (rj_dim[]){64});
    rj_node bl = rj_graph_input(g, "bl", RJ_BOOL, 1, (rj_dim[]){64});
    assert_type(&e, rj_graph_binary(g, RJ_OP_MUL, e.x, rj_graph_scalar(g, 2.0)), "f32[B, j1, 64]");
    assert_type(&e, rj_graph_binary(g, RJ_OP_MUL, i32, rj_graph_scalar(g, 2.5)), "f32[B, j1, 64]");
    assert_type(&e, rj_graph_binary(g, RJ_OP_MUL, i32, rj_graph_scalar_int(g, 2)), "i32[B, j1, 64]");
    assert_type(&e, rj_graph_binary(g, RJ_OP_ADD, i32, i64), "i64[B, j1, 64]");
    assert_type(&e, rj_graph_binary(g, RJ_OP_ADD, i64, e.w), "f32[64]");
    assert_type(&e, rj_graph_binary(g, RJ_OP_ADD, f64, e.w), "f64[64]");
    assert_type(&e, rj_graph_binary(g, RJ_OP_ADD, bl, rj_graph_scalar_int(g, 1)), "i64[64]");
    assert_type(&e, rj_graph_binary(g, RJ_OP_ADD, bl, bl), "bool[64]");
    assert_type(&e, rj_graph_binary(g, RJ_OP_DIV, i32, i32), "f32[B, j1, 64]");
    assert_type(&e, rj_graph_binary(g, RJ_OP_LT, i32, e.x), "bool[B, j1, 64]");
    assert_type(&e, rj_graph_binary(g, RJ_OP_LOGICAL_AND, i32, e.x), "bool[B, j1, 64]");
    assert_type(&e, rj_graph_unary(g, RJ_OP_EXP, i32), "f32[B, j1, 64]");
    assert_type(&e, rj_graph_unary(g, RJ_OP_ABS, i32), "i32[B, j1, 64]");
    assert_type(&e, rj_graph_unary(g, RJ_OP_LOGICAL_NOT, e.x), "bool[B, j1, 64]");
    assert_type(&e, rj_graph_reduce(g, RJ_OP_SUM, bl, 0, false), "i64[]");
    assert_type(&e, rj_graph_reduce(g, RJ_OP_PROD, i32, 1, false), "i64[B, 64]");
    assert_type(&e, rj_graph_reduce(g, RJ_OP_MAX, i32, 1, false), "i32[B, 64]");
    assert_type(&e, rj_graph_softmax(g, i32, 1), "f32[B, j1, 64]");
    assert_type(&e, rj_graph_cast(g, e.x, RJ_I64), "i64[B, j1, 64]");
    assert_type(&e, rj_graph_masked_fill(g, i32, rj_graph_binary(g, RJ_OP_GT, e.x, e.w), 3),
                "i32[B, j1, 64]");
    assert_type(&e, rj_graph_where(g, bl, i32, e.w), "f32[B, j1, 64]");
    assert_int_equal(rj_graph_status(g), RJ_OK);
    rj_graph_free(g);
}

static void test_dtype_errors(void **state) {
    env e = make_env(state);
    rj_node bl = rj_graph_input(e.g, "bl", RJ_BOOL, 1, (rj_dim[]){64});
    assert_fails(&e, rj_graph_unary(e.g, RJ_OP_NEG, bl), RJ_ERR_DTYPE,
                 "neg: bool[64]: not supported for bool (use logical_not)");
    e = make_env(state);
    bl = rj_graph_input(e.g, "bl", RJ_BOOL, 1, (rj_dim[]){64});
    assert_fails(&e, rj_graph_binary(e.g, RJ_OP_SUB, bl, bl), RJ_ERR_DTYPE, "sub: bool[64] and bool[64]");
    e = make_env(state);
    rj_node i = rj_graph_input(e.g, "i", RJ_I32, 1, (rj_dim[]){64});
    assert_fails(&e, rj_graph_reduce(e.g, RJ_OP_MEAN, i, 0, false), RJ_ERR_DTYPE,
                 "mean: i32[64]: expected a float tensor");
    e = make_env(state);
    assert_fails(&e, rj_graph_where(e.g, e.x, e.x, e.x), RJ_ERR_DTYPE,
                 "where: the condition must be bool, got f32[B, j1, 64]");
    e = make_env(state);
    assert_fails(&e, rj_graph_masked_fill(e.g, e.x, e.w, 0), RJ_ERR_DTYPE, "masked_fill: the mask must be bool");
    e = make_env(state);
    i = rj_graph_input(e.g, "i", RJ_I32, 3, (rj_dim[]){e.B, e.J, 64});
    assert_fails(&e, rj_graph_layer_norm(e.g, i, 1, RJ_NONE, RJ_NONE, -1), RJ_ERR_DTYPE,
                 "layer_norm: i32[B, j1, 64]: expected a float tensor");
    e = make_env(state);
    assert_fails(&e, rj_graph_cast(e.g, e.x, (rj_dtype)42), RJ_ERR_ARG, "cast: invalid dtype 42");
}

static void test_reductions(void **state) {
    env e = make_env(state);
    assert_type(&e, rj_graph_reduce(e.g, RJ_OP_SUM, e.x, 1, false), "f32[B, 64]");
    assert_type(&e, rj_graph_reduce(e.g, RJ_OP_SUM, e.x, 1, true), "f32[B, 1, 64]");
    assert_type(&e, rj_graph_reduce(e.g, RJ_OP_MEAN, e.x, -1, false), "f32[B, j1]");
    assert_type(&e, rj_graph_reduce(e.g, RJ_OP_MAX, e.x, 2, true), "f32[B, j1, 1]");
    assert_type(&e, rj_graph_reduce(e.g, RJ_OP_MIN, rj_graph_pad(e.g, e.x, 0, RJ_DIM_NONE), 1, false),
                "f32[B, 64]");
    assert_type(&e, rj_graph_softmax(e.g, e.x, 1), "f32[B, j1, 64]");
    assert_type(&e, rj_graph_log_softmax(e.g, e.x, -1), "f32[B, j1, 64]");
    assert_type(&e, rj_graph_reduce(e.g, RJ_OP_SUM, e.w, 0, false), "f32[]");
    rj_graph_free(e.g);
    e = make_env(state);
    assert_fails(&e, rj_graph_reduce(e.g, RJ_OP_SUM, e.x, 0, false), RJ_ERR_SHAPE,
                 "sum: cannot reduce over the batch dim 0 of the jagged tensor f32[B, j1, 64]");
    e = make_env(state);
    assert_fails(&e, rj_graph_reduce(e.g, RJ_OP_SUM, e.x, 3, false), RJ_ERR_SHAPE,
                 "sum: dim 3 is out of range for f32[B, j1, 64] (rank 3)");
    e = make_env(state);
    assert_fails(&e, rj_graph_softmax(e.g, e.x, -4), RJ_ERR_SHAPE, "softmax: dim -4 is out of range");
    e = make_env(state);
    assert_fails(&e, rj_graph_reduce(e.g, RJ_OP_SUM, rj_graph_scalar(e.g, 1), 0, false),
                 RJ_ERR_SHAPE, "sum: cannot reduce a scalar");
    e = make_env(state);
    assert_fails(&e, rj_graph_reduce(e.g, RJ_OP_ADD, e.x, 1, false), RJ_ERR_ARG,
                 "rj_graph_reduce: op 18 (add) is not a reduce op");
}

static void test_norms(void **state) {
    env e = make_env(state);
    rj_node w2 = rj_graph_input(e.g, "w2", RJ_F32, 1, (rj_dim[]){32});
    rj_node r4 = rj_graph_input(e.g, "r4", RJ_F64, 4, (rj_dim[]){e.B, e.J, 4, 16});
    rj_node w416 = rj_graph_input(e.g, "w416", RJ_F32, 2, (rj_dim[]){4, 16});
    assert_type(&e, rj_graph_layer_norm(e.g, e.x, 1, e.w, e.w, -1), "f32[B, j1, 64]");
    assert_type(&e, rj_graph_rms_norm(e.g, e.x, 1, RJ_NONE, -1), "f32[B, j1, 64]");
    assert_type(&e, rj_graph_layer_norm(e.g, r4, 2, w416, RJ_NONE, 1e-6), "f64[B, j1, 4, 16]");
    rj_graph_free(e.g);
    e = make_env(state);
    assert_fails(&e, rj_graph_layer_norm(e.g, e.x, 2, RJ_NONE, RJ_NONE, -1), RJ_ERR_SHAPE,
                 "layer_norm: cannot normalise over the ragged dim 1 of f32[B, j1, 64]");
    e = make_env(state);
    w2 = rj_graph_input(e.g, "w2", RJ_F32, 1, (rj_dim[]){32});
    assert_fails(&e, rj_graph_rms_norm(e.g, e.x, 1, w2, -1), RJ_ERR_SHAPE,
                 "rms_norm: weight f32[32] must have the normalized shape f32[64]");
    e = make_env(state);
    assert_fails(&e, rj_graph_layer_norm(e.g, e.x, 4, RJ_NONE, RJ_NONE, -1), RJ_ERR_SHAPE,
                 "layer_norm: normalized_shape has 4 dims but f32[B, j1, 64] has rank 3");
}

static void test_pad_unpad(void **state) {
    env e = make_env(state);
    rj_node p = rj_graph_pad(e.g, e.x, 0, RJ_DIM_NONE);
    assert_type(&e, p, "f32[B, max(j1), 64]");
    assert_type(&e, rj_graph_pad(e.g, e.x, -1, 128), "f32[B, 128, 64]");
    rj_dim L = rj_graph_dense(e.g, "L");
    assert_type(&e, rj_graph_pad(e.g, e.x, -1, L), "f32[B, L, 64]");
    assert_type(&e, rj_graph_unpad(e.g, p, e.J), "f32[B, j1, 64]");
    assert_type(&e, rj_graph_unpad(e.g, rj_graph_binary(e.g, RJ_OP_MUL, p, rj_graph_scalar(e.g, 2)), e.J2),
                "f32[B, j2, 64]");
    assert_type(&e, rj_graph_binary(e.g, RJ_OP_ADD, p, rj_graph_pad(e.g, e.z, 1, RJ_DIM_NONE)),
                "f32[B, max(j1), 64]");
    assert_int_equal(rj_graph_find_dim(e.g, "max(j1)") < 0, 1);
    rj_graph_free(e.g);
    e = make_env(state);
    assert_fails(&e, rj_graph_pad(e.g, e.w, 0, RJ_DIM_NONE), RJ_ERR_SHAPE,
                 "pad: f32[64] has no ragged dim to pad");
    e = make_env(state);
    assert_fails(&e, rj_graph_pad(e.g, e.x, 0, e.J), RJ_ERR_ARG, "pad: len must be a constant or a dense size");
    e = make_env(state);
    assert_fails(&e, rj_graph_unpad(e.g, e.x, e.J), RJ_ERR_SHAPE,
                 "unpad: expected a padded dense tensor [B, L, ...], got f32[B, j1, 64]");
    e = make_env(state);
    rj_dim C = rj_graph_dense(e.g, "C");
    rj_node pc = rj_graph_input(e.g, "pc", RJ_F32, 3, (rj_dim[]){C, 10, 64});
    assert_fails(&e, rj_graph_unpad(e.g, pc, e.J), RJ_ERR_SHAPE,
                 "unpad: f32[C, 10, 64]: dim 0 is C but j1 varies over B");
    e = make_env(state);
    assert_fails(&e, rj_graph_unpad(e.g, rj_graph_pad(e.g, e.x, 0, RJ_DIM_NONE), e.B), RJ_ERR_ARG,
                 "unpad: the second argument must be a ragged symbol");
}

static void test_input_errors(void **state) {
    env e = make_env(state);
    assert_fails(&e, rj_graph_input(e.g, "a", RJ_F32, 2, (rj_dim[]){e.J, e.B}), RJ_ERR_SHAPE,
                 "input: f32[j1, B]: ragged j1 must directly follow its parent dim B");
    e = make_env(state);
    assert_fails(&e, rj_graph_input(e.g, "a", RJ_F32, 3, (rj_dim[]){4, e.B, e.J}), RJ_ERR_UNSUPPORTED,
                 "a ragged dim at position 2 is not supported yet");
    e = make_env(state);
    assert_fails(&e, rj_graph_input(e.g, "x", RJ_F32, 1, (rj_dim[]){4}), RJ_ERR_ARG,
                 "input: the name 'x' is already used");
    e = make_env(state);
    assert_fails(&e, rj_graph_input(e.g, "9a", RJ_F32, 1, (rj_dim[]){4}), RJ_ERR_ARG,
                 "'9a' is not a valid name");
    e = make_env(state);
    assert_fails(&e, rj_graph_input(e.g, NULL, RJ_F32, 1, (rj_dim[]){4}), RJ_ERR_ARG, "(NULL)");
    e = make_env(state);
    assert_fails(&e, rj_graph_input(e.g, "a", RJ_F32, 9, (rj_dim[9]){0}), RJ_ERR_ARG,
                 "rank 9 is out of range 0..8");
    e = make_env(state);
    assert_fails(&e, rj_graph_input(e.g, "a", RJ_F32, 1, (rj_dim[]){-1000}), RJ_ERR_ARG,
                 "dim 0 is not a constant or a symbol of this graph");
    e = make_env(state);
    assert_fails(&e, rj_graph_input(e.g, "a", RJ_F32, 1, NULL), RJ_ERR_ARG, "dims is NULL");
    e = make_env(state);
    assert_fails(&e, rj_graph_input(e.g, "a", (rj_dtype)7, 1, (rj_dim[]){3}), RJ_ERR_ARG,
                 "input a: invalid dtype 7");
    /* nested raggedness is representable but not supported yet */
    e = make_env(state);
    assert_int_equal(rj_graph_ragged(e.g, "k", e.J), RJ_DIM_NONE);
    assert_int_equal(rj_graph_status(e.g), RJ_ERR_UNSUPPORTED);
    assert_error_contains(e.ctx, "nested raggedness is not supported yet");
    rj_graph_free(e.g);
    e = make_env(state);
    assert_int_equal(rj_graph_ragged(e.g, "B", e.B), RJ_DIM_NONE);
    assert_error_contains(e.ctx, "'B' is already declared as a dense size");
    rj_graph_free(e.g);
    e = make_env(state);
    assert_int_equal(rj_graph_ragged(e.g, "k", 5), RJ_DIM_NONE);
    assert_error_contains(e.ctx, "the parent of 'k' must be a declared size symbol");
    rj_graph_free(e.g);
    e = make_env(state);
    assert_int_equal(rj_graph_dense(e.g, "B"), e.B); /* declaring again is idempotent */
    assert_int_equal(rj_graph_ragged(e.g, "j1", e.B), e.J);
    rj_graph_free(e.g);
}

static void test_sticky_errors(void **state) {
    env e = make_env(state);
    rj_node bad = rj_graph_binary(e.g, RJ_OP_ADD, e.x, e.y);
    assert_int_equal(bad, RJ_NONE);
    char first[512];
    strcpy(first, rj_ctx_error(e.ctx));
    rj_node r = rj_graph_unary(e.g, RJ_OP_RELU, bad);
    r = rj_graph_reduce(e.g, RJ_OP_SUM, r, 1, false);
    assert_int_equal(r, RJ_NONE);
    assert_int_equal(rj_graph_output(e.g, r, "r"), RJ_ERR_GRAPH);
    assert_string_equal(rj_ctx_error(e.ctx), first);
    assert_int_equal(rj_graph_status(e.g), RJ_ERR_SHAPE);
    assert_null(rj_program_new(e.g, RJ_TARGET_REFERENCE));
    assert_error_contains(e.ctx, "the graph has errors: add: f32[B, j1, 64] and f32[B, j2, 64]");
    rj_graph_free(e.g);
    /* RJ_NONE without an earlier failure is reported */
    e = make_env(state);
    assert_int_equal(rj_graph_unary(e.g, RJ_OP_EXP, RJ_NONE), RJ_NONE);
    assert_int_equal(rj_graph_status(e.g), RJ_ERR_GRAPH);
    assert_error_contains(e.ctx, "exp: operand 1 is RJ_NONE");
    rj_graph_free(e.g);
    e = make_env(state);
    assert_int_equal(rj_graph_binary(e.g, RJ_OP_ADD, e.x, 12345), RJ_NONE);
    assert_error_contains(e.ctx, "add: operand 2 is not a node of this graph");
    rj_graph_free(e.g);
    e = make_env(state);
    assert_int_equal(rj_graph_unary(e.g, RJ_OP_ADD, e.x), RJ_NONE);
    assert_error_contains(e.ctx, "is not a unary op");
    rj_graph_free(e.g);
}

static void test_null_arguments(void **state) {
    fixture *f = *state;
    assert_int_equal(rj_graph_status(NULL), RJ_ERR_ARG);
    assert_int_equal(rj_graph_unary(NULL, RJ_OP_EXP, 0), RJ_NONE);
    assert_int_equal(rj_graph_dense(NULL, "B"), RJ_DIM_NONE);
    assert_int_equal(rj_graph_input(NULL, "x", RJ_F32, 0, NULL), RJ_NONE);
    assert_null(rj_program_new(NULL, RJ_TARGET_REFERENCE));
    assert_null(rj_bind_new(NULL));
    assert_int_equal(rj_program_run(NULL, NULL), RJ_ERR_ARG);
    assert_null(rj_graph_new(NULL));
    assert_null(rj_node_type_str(NULL, 0));
    rj_graph_free(NULL);
    rj_program_free(NULL);
    rj_bind_free(NULL);
    rj_tensor_free(NULL);
    rj_string_free(f->ctx, NULL);
    assert_string_equal(rj_ctx_error(NULL), "no context (NULL)");
    assert_string_equal(rj_status_str((rj_status)999), "unknown status");
    for (int s = 0; s < RJ_STATUS_COUNT; s++) assert_non_null(rj_status_str((rj_status)s));
}

static void test_outputs(void **state) {
    env e = make_env(state);
    rj_node r = rj_graph_unary(e.g, RJ_OP_RELU, e.x);
    assert_int_equal(rj_graph_output(e.g, r, "r"), RJ_OK);
    assert_int_equal(rj_graph_output(e.g, r, "r2"), RJ_ERR_ARG);
    assert_error_contains(e.ctx, "output r2: node is already output 'r'");
    rj_graph_free(e.g);
    e = make_env(state);
    assert_int_equal(rj_graph_output(e.g, rj_graph_scalar(e.g, 1), "s"), RJ_ERR_ARG);
    rj_graph_free(e.g);
    e = make_env(state);
    assert_int_equal(rj_graph_output(e.g, e.w, "x"), RJ_ERR_ARG);
    assert_error_contains(e.ctx, "the name 'x' is already used");
    rj_graph_free(e.g);
    e = make_env(state);
    assert_int_equal(rj_graph_output(e.g, e.x, NULL), RJ_OK);
    assert_int_equal(rj_graph_output(e.g, e.w, NULL), RJ_OK);
    assert_string_equal(rj_node_name(e.g, e.w), "out1");
    assert_int_equal(rj_graph_output_count(e.g), 2);
    assert_int_equal(rj_graph_find(e.g, "out0"), e.x);
    assert_int_equal(rj_graph_find(e.g, "w"), e.w);
    assert_int_equal(rj_graph_find(e.g, "nope"), RJ_NONE);
    assert_int_equal(rj_graph_input_count(e.g), 4);
    assert_int_equal(rj_graph_input_at(e.g, 2), e.w);
    assert_int_equal(rj_graph_input_at(e.g, 4), RJ_NONE);
    rj_dim dims[RJ_MAX_RANK];
    assert_int_equal(rj_node_shape(e.g, e.x, dims), 3);
    assert_true(dims[1] == e.J);
    assert_string_equal(rj_dim_name(e.g, dims[1]), "j1");
    assert_null(rj_dim_name(e.g, 64));
    assert_int_equal(rj_node_dtype(e.g, e.x), RJ_F32);
    assert_int_equal(rj_node_shape(e.g, 999, NULL), -1);
    rj_graph_free(e.g);
}

/* Introspection of names and symbols, as a tool that binds files by name uses it. */
static void test_names_and_symbols(void **state) {
    fixture *f = *state;
    static const char src[] = "ragged j1 : B\n"
                              "ragged j2 : B\n"
                              "same j1 j2\n"
                              "input x : f32[B, j1, 8]\n"
                              "input y : f32[B, j2, 8]\n"
                              "input w : f32[D]\n"
                              "ragged q : B\n"
                              "output x\n"
                              "s = x + y\n"
                              "p = pad(s, value=0.0)\n"
                              "output s, p\n";
    rj_graph *g = rj_graph_parse(f->ctx, src, "names.rj");
    if (!g) fail_msg("%s", rj_ctx_error(f->ctx));
    /* inputs and outputs by number, as declared; x is both */
    assert_int_equal(rj_graph_input_count(g), 3);
    assert_string_equal(rj_graph_input_name(g, 0), "x");
    assert_string_equal(rj_graph_input_name(g, 2), "w");
    assert_true(rj_graph_input_used(g, 0) && rj_graph_input_used(g, 1) && !rj_graph_input_used(g, 2));
    assert_int_equal(rj_graph_output_count(g), 3);
    assert_string_equal(rj_graph_output_name(g, 0), "x");
    assert_string_equal(rj_graph_output_name(g, 2), "p");
    assert_int_equal(rj_graph_output_at(g, 0), rj_graph_input_at(g, 0));

    /* symbols in order of creation: declarations first, max(j1) when pad made it */
    static const struct {
        const char *name;
        rj_dim_kind kind;
        const char *parent, *same;
        bool used;
    } want[] = {{"B", RJ_DIM_DENSE, NULL, "B", true},
                {"j1", RJ_DIM_RAGGED, "B", "j1", true},
                {"j2", RJ_DIM_RAGGED, "B", "j1", true}, /* same j1 j2: j1 came first */
                {"D", RJ_DIM_DENSE, NULL, "D", false},  /* only w has it, and no output uses w */
                {"q", RJ_DIM_RAGGED, "B", "q", false},  /* declared, no tensor uses it */
                {"max(j1)", RJ_DIM_MAXLEN, "j1", "max(j1)", true}};
    assert_int_equal(rj_graph_dim_count(g), 6);
    for (int i = 0; i < 6; i++) {
        rj_dim d = rj_graph_dim_at(g, i);
        rj_dim_info in;
        assert_ok(f->ctx, rj_dim_get_info(g, d, &in));
        assert_string_equal(in.name, want[i].name);
        assert_string_equal(rj_dim_name(g, d), want[i].name);
        assert_int_equal(in.kind, want[i].kind);
        assert_int_equal(in.used, want[i].used);
        assert_true(in.same == rj_graph_find_dim(g, want[i].same));
        if (want[i].parent) assert_true(in.parent == rj_graph_find_dim(g, want[i].parent));
        else assert_true(in.parent == RJ_DIM_NONE);
        if (in.kind != RJ_DIM_MAXLEN) assert_true(rj_graph_find_dim(g, want[i].name) == d);
    }
    /* constants are dims too */
    rj_dim_info in;
    assert_ok(f->ctx, rj_dim_get_info(g, 8, &in));
    assert_int_equal(in.kind, RJ_DIM_CONST);
    assert_null(in.name);
    assert_true(in.parent == RJ_DIM_NONE && in.same == 8 && in.used);
    assert_ok(f->ctx, rj_dim_get_info(g, 0, &in));
    assert_false(in.used);
    rj_graph_free(g);

    /* an input output under another name has two names; rj_node_name gives the output's */
    env e = make_env(state);
    assert_int_equal(rj_graph_output(e.g, e.w, "w_out"), RJ_OK);
    assert_string_equal(rj_graph_input_name(e.g, 2), "w");
    assert_string_equal(rj_graph_output_name(e.g, 0), "w_out");
    assert_string_equal(rj_node_name(e.g, e.w), "w_out");
    rj_graph_free(e.g);
}

/* Wrong questions fail with a status and a message, and leave the graph as it was. */
static void test_introspection_errors(void **state) {
    env e = make_env(state);
    assert_int_equal(rj_graph_input_at(e.g, 4), RJ_NONE);
    assert_error_contains(e.ctx, "rj_graph_input_at: index 4 is out of range (the graph has 4)");
    assert_null(rj_graph_input_name(e.g, -1));
    assert_error_contains(e.ctx, "rj_graph_input_name: index -1 is out of range");
    assert_int_equal(rj_graph_output_at(e.g, 0), RJ_NONE);
    assert_error_contains(e.ctx, "rj_graph_output_at: index 0 is out of range (the graph has 0)");
    assert_null(rj_graph_output_name(e.g, 0));
    assert_error_contains(e.ctx, "rj_graph_output_name: index 0 is out of range");
    assert_int_equal(rj_graph_dim_count(e.g), 4);
    assert_true(rj_graph_dim_at(e.g, 4) == RJ_DIM_NONE);
    assert_error_contains(e.ctx, "rj_graph_dim_at: index 4 is out of range (the graph has 4)");
    assert_true(rj_graph_dim_at(e.g, -7) == RJ_DIM_NONE);
    rj_dim_info in;
    assert_int_equal(rj_dim_get_info(e.g, RJ_DIM_NONE, &in), RJ_ERR_ARG);
    assert_error_contains(e.ctx, "is not a constant or a symbol of this graph");
    assert_int_equal(rj_ctx_status(e.ctx), RJ_ERR_ARG);
    assert_int_equal(rj_dim_get_info(e.g, -5, &in), RJ_ERR_ARG); /* symbol 4: not declared */
    assert_int_equal(rj_dim_get_info(e.g, e.B, NULL), RJ_ERR_ARG);
    assert_error_contains(e.ctx, "rj_dim_get_info: info is NULL");
    assert_int_equal(rj_graph_status(e.g), RJ_OK);
    /* the graph is still good to build on */
    assert_int_equal(rj_graph_output(e.g, e.x, "out"), RJ_OK);
    assert_string_equal(rj_graph_output_name(e.g, 0), "out");

    /* no graph: nothing to record the message in, but no crash */
    assert_int_equal(rj_graph_dim_count(NULL), 0);
    assert_true(rj_graph_dim_at(NULL, 0) == RJ_DIM_NONE);
    assert_null(rj_graph_input_name(NULL, 0));
    assert_null(rj_graph_output_name(NULL, 0));
    assert_int_equal(rj_dim_get_info(NULL, 0, &in), RJ_ERR_ARG);
    rj_graph_free(e.g);
}

/* Introspection reads what the graph holds: it never allocates, so it cannot fail for memory
 * even when the allocator fails everything. */
static void test_introspection_allocates_nothing(void **state) {
    fixture *f = *state;
    env e = make_env(state);
    rj_node p = rj_graph_pad(e.g, e.x, 0, RJ_DIM_NONE);
    assert_int_equal(rj_graph_output(e.g, p, "p"), RJ_OK);
    long attempts = f->tr.attempts;
    f->tr.fail_at = attempts + 1;
    for (int i = 0; i < rj_graph_input_count(e.g); i++) {
        assert_non_null(rj_graph_input_name(e.g, i));
        assert_true(rj_graph_input_at(e.g, i) != RJ_NONE);
    }
    assert_string_equal(rj_graph_output_name(e.g, 0), "p");
    for (int i = 0; i < rj_graph_dim_count(e.g); i++) {
        rj_dim_info in;
        assert_int_equal(rj_dim_get_info(e.g, rj_graph_dim_at(e.g, i), &in), RJ_OK);
    }
    assert_null(rj_graph_input_name(e.g, 99)); /* failing costs no allocation either */
    assert_int_equal(f->tr.attempts, attempts);
    f->tr.fail_at = 0;
    rj_graph_free(e.g);
}

/* cat and stack by the builder: types, promotion, the chain of binary cats, and the
 * operand numbering of its messages. */
static void test_cat_builder(void **state) {
    env e = make_env(state);
    rj_node h = rj_graph_input(e.g, "h", RJ_F64, 3, (rj_dim[]){e.B, e.J, 32});
    rj_node c = rj_graph_cat(e.g, (rj_node[]){e.x, h, e.z}, 3, -1);
    assert_type(&e, c, "f64[B, j1, 160]");
    assert_int_equal(rj_graph_cat(e.g, (rj_node[]){e.x}, 1, 2), e.x); /* one tensor: itself */
    assert_type(&e, rj_graph_stack(e.g, (rj_node[]){e.x, e.z}, 2, 2), "f32[B, j1, 2, 64]");
    assert_type(&e, rj_graph_stack(e.g, (rj_node[]){e.w, e.w, e.w}, 3, 0), "f32[3, 64]");
    assert_int_equal(rj_graph_cat(NULL, (rj_node[]){e.x}, 1, 2), RJ_NONE);
    assert_fails(&e, rj_graph_cat(e.g, (rj_node[]){e.x, e.z, e.y}, 3, 2), RJ_ERR_SHAPE,
                 "cat: operand 3 has ragged j2 in dim 1 where operand 1 has ragged j1");
    e = make_env(state);
    assert_fails(&e, rj_graph_cat(e.g, (rj_node[]){e.x, RJ_NONE}, 2, 2), RJ_ERR_GRAPH,
                 "cat: operand 2 is RJ_NONE (no node)");
    e = make_env(state);
    assert_fails(&e, rj_graph_cat(e.g, NULL, 0, 0), RJ_ERR_ARG, "cat: expected a non-empty list of tensors");
    e = make_env(state);
    rj_node d = rj_graph_input(e.g, "d", RJ_F32, 2, (rj_dim[]){e.D, 64});
    assert_fails(&e, rj_graph_cat(e.g, (rj_node[]){d, e.w}, 2, 0), RJ_ERR_SHAPE,
                 "cat: operand 2 has 1 dims where operand 1 has 2");
    e = make_env(state);
    d = rj_graph_input(e.g, "d", RJ_F32, 2, (rj_dim[]){e.D, 64});
    assert_fails(&e, rj_graph_cat(e.g, (rj_node[]){d, d}, 2, 0), RJ_ERR_UNSUPPORTED,
                 "cat: operand 1 has the run-time size D in the cat dim 0");
}

/* rj_graph_call: a layer built once as a graph of its own, called twice; its symbols bound
 * by the arguments (its N and r : M are the caller's B and j1 or j2), a size only its reshape
 * names declared in the caller; what a call refuses. */
static void test_call(void **state) {
    env e = make_env(state);
    rj_graph *fn = rj_graph_new(e.ctx);
    rj_dim N = rj_graph_dense(fn, "N"), r = rj_graph_ragged(fn, "r", N), K = rj_graph_dense(fn, "K");
    rj_node px = rj_graph_input(fn, "px", RJ_F32, 3, (rj_dim[]){N, r, 64});
    rj_node pw = rj_graph_input(fn, "pw", RJ_F32, 1, (rj_dim[]){64});
    rj_node h = rj_graph_binary(fn, RJ_OP_ADD, rj_graph_unary(fn, RJ_OP_RELU, rj_graph_binary(fn, RJ_OP_MUL, px, pw)), px);
    rj_node v = rj_graph_reshape(fn, h, 4, (rj_dim[]){N, r, 8, RJ_DIM_NONE});
    assert_int_equal(rj_graph_output(fn, h, "h"), RJ_OK);
    assert_int_equal(rj_graph_output(fn, rj_graph_softmax(fn, v, 1), "s"), RJ_OK);
    assert_int_equal(rj_graph_output(fn, rj_graph_full(fn, 1, (rj_dim[]){K}, 2.0, RJ_F32), "k"), RJ_OK);
    rj_node out[3], out2[3];
    assert_int_equal(rj_graph_call(e.g, fn, (rj_node[]){e.x, e.w}, 2, out, 3), RJ_OK);
    assert_type(&e, out[0], "f32[B, j1, 64]");
    assert_type(&e, out[1], "f32[B, j1, 8, 8]");
    assert_type(&e, out[2], "f32[K]");
    assert_int_equal(rj_graph_call(e.g, fn, (rj_node[]){e.y, e.w}, 2, out2, 3), RJ_OK);
    assert_type(&e, out2[0], "f32[B, j2, 64]");
    assert_int_not_equal(rj_graph_find_dim(e.g, "K"), RJ_DIM_NONE);
    /* refused: counts, dtypes, ranks, a symbol bound twice, a ragged dim where a dense one is */
    rj_node d = rj_graph_input(e.g, "d", RJ_F64, 1, (rj_dim[]){64});
    assert_int_equal(rj_graph_call(e.g, fn, (rj_node[]){e.x}, 1, out, 3), RJ_ERR_ARG);
    assert_error_contains(e.ctx, "call: the function takes 2 arguments, 1 given");
    rj_graph_free(e.g);
    e = make_env(state);
    d = rj_graph_input(e.g, "d", RJ_F64, 1, (rj_dim[]){64});
    assert_int_equal(rj_graph_call(e.g, fn, (rj_node[]){e.x, d}, 2, out, 3), RJ_ERR_DTYPE);
    assert_error_contains(e.ctx, "call: argument 2 has dtype f64 where the function's parameter pw has dtype f32");
    rj_graph_free(e.g);
    e = make_env(state);
    assert_int_equal(rj_graph_call(e.g, fn, (rj_node[]){e.w, e.w}, 2, out, 3), RJ_ERR_SHAPE);
    assert_error_contains(e.ctx, "call: argument 1 has rank");
    rj_graph_free(e.g);
    e = make_env(state);
    rj_graph *fn2 = rj_graph_new(e.ctx);
    rj_dim N2 = rj_graph_dense(fn2, "N"), r2 = rj_graph_ragged(fn2, "r", N2);
    rj_node a = rj_graph_input(fn2, "a", RJ_F32, 3, (rj_dim[]){N2, r2, 64});
    rj_node b = rj_graph_input(fn2, "b", RJ_F32, 3, (rj_dim[]){N2, r2, 64});
    assert_int_equal(rj_graph_output(fn2, rj_graph_binary(fn2, RJ_OP_ADD, a, b), "s"), RJ_OK);
    assert_int_equal(rj_graph_call(e.g, fn2, (rj_node[]){e.x, e.y}, 2, out, 1), RJ_ERR_SHAPE);
    assert_error_contains(e.ctx, "call: argument 2, dim 1: the function's r is bound to two different dims");
    rj_graph_free(e.g);
    e = make_env(state);
    rj_node dd = rj_graph_input(e.g, "dd", RJ_F32, 3, (rj_dim[]){e.B, 5, 64});
    assert_int_equal(rj_graph_call(e.g, fn2, (rj_node[]){dd, dd}, 2, out, 1), RJ_ERR_SHAPE);
    assert_error_contains(e.ctx, "the function's parameter has the ragged r there");
    assert_int_equal(rj_graph_call(e.g, e.g, NULL, 0, NULL, 0), RJ_ERR_GRAPH); /* e.g failed: sticky */
    rj_graph_free(e.g);
    e = make_env(state);
    assert_int_equal(rj_graph_call(e.g, e.g, NULL, 0, NULL, 0), RJ_ERR_ARG);
    rj_graph_free(e.g);
    rj_graph_free(fn);
    rj_graph_free(fn2);
}

/* arange and full: dense shapes, the dtype given, no ragged dim. */
static void test_constants_builder(void **state) {
    env e = make_env(state);
    assert_type(&e, rj_graph_arange(e.g, 5, RJ_I64), "i64[5]");
    assert_type(&e, rj_graph_arange(e.g, e.D, RJ_F32), "f32[D]");
    assert_type(&e, rj_graph_full(e.g, 2, (rj_dim[]){e.B, 3}, 1.5, RJ_F64), "f64[B, 3]");
    assert_type(&e, rj_graph_full(e.g, 0, NULL, 1, RJ_BOOL), "bool[]");
    assert_type(&e, rj_graph_binary(e.g, RJ_OP_MUL, e.x, rj_graph_full(e.g, 1, (rj_dim[]){64}, 2, RJ_F64)),
                "f64[B, j1, 64]");
    assert_int_equal(rj_graph_arange(NULL, 5, RJ_I64), RJ_NONE);
    assert_fails(&e, rj_graph_full(e.g, 2, (rj_dim[]){e.B, e.J}, 0, RJ_F32), RJ_ERR_SHAPE,
                 "full: dim 1 is the ragged symbol j1: constants have dense shapes");
    e = make_env(state);
    assert_fails(&e, rj_graph_arange(e.g, 4, (rj_dtype)9), RJ_ERR_ARG, "arange: invalid dtype 9");
    e = make_env(state);
    assert_fails(&e, rj_graph_full(e.g, 1, (rj_dim[]){RJ_DIM_NONE}, 0, RJ_F32), RJ_ERR_ARG,
                 "full: dim 0 of the shape is RJ_DIM_NONE");
}

static void test_op_table(void **state) {
    (void)state;
    for (int i = 0; i < RJ_OP_COUNT; i++) {
        const char *n = rj_op_name((rj_op)i);
        assert_non_null(n);
        assert_int_equal(rj_op_from_name(n), i);
    }
    assert_int_equal(rj_op_from_name("nope"), RJ_OP_COUNT);
    assert_null(rj_op_name(RJ_OP_COUNT));
    assert_string_equal(rj_dtype_name(RJ_F32), "f32");
    assert_int_equal(rj_dtype_size(RJ_F64), 8);
    assert_int_equal(rj_dtype_size((rj_dtype)99), 0);
}

/* "y = y + 1" n times over x : f32[B, j, 2] (between a pad and an unpad when padded). */
static char *chain_program(int n, bool padded) {
    char *src = malloc(128 + 10 * (size_t)n), *p = src;
    assert_non_null(src);
    p += sprintf(p, "ragged j : B\ninput x : f32[B, j, 2]\ny = %s\n", padded ? "pad(x)" : "x");
    for (int i = 0; i < n; i++) p += sprintf(p, "y = y + 1\n");
    sprintf(p, "%soutput y\n", padded ? "y = unpad(y, j)\n" : "");
    return src;
}

/* "y<k> = y<k-1> + 1", n statements, every value with a name of its own. */
static char *named_chain_program(int n) {
    char *src = malloc(128 + 32 * (size_t)n), *p = src;
    assert_non_null(src);
    p += sprintf(p, "ragged j : B\ninput x : f32[B, j, 2]\ny0 = x\n");
    for (int i = 1; i <= n; i++) p += sprintf(p, "y%d = y%d + 1\n", i, i - 1);
    sprintf(p, "output y%d\n", n);
    return src;
}

/* Runs the chain program on 3 rows and checks y = x + n. */
static void run_chain(rj_ctx *ctx, rj_graph *g, rj_target t, int n) {
    rj_program *p = rj_program_new(g, t);
    if (!p) fail_msg("%s", rj_ctx_error(ctx));
    rj_bind *b = rj_bind_new(p);
    static const int64_t off[] = {0, 1, 3};
    static const float x[6] = {0, 1, 2, 3, 4, 5};
    assert_ok(ctx, rj_bind_offsets(b, rj_graph_find_dim(g, "j"), 2, off, NULL));
    assert_ok(ctx, rj_bind_input(b, rj_graph_find(g, "x"), x, 6));
    assert_ok(ctx, rj_program_run(p, b));
    rj_tensor_info info;
    assert_ok(ctx, rj_tensor_get_info(rj_bind_result(b, rj_graph_find(g, "y")), &info));
    for (int i = 0; i < 6; i++) assert_true(((const float *)info.values)[i] == x[i] + (float)n);
    rj_bind_free(b);
    rj_program_free(p);
}

/* Long chains of statements reach nothing that recurses over the graph without a bound: a
 * 100,000-node chain parses, prints, interprets and fuses; fusion cuts it into kernels of at
 * most FUSE_CUT_DEPTH chained operations (the bound that keeps compilation's stack small), so
 * long chains compile and run too. */
static void test_deep_chains(void **state) {
    fixture *f = *state;
    for (int padded = 0; padded < 2; padded++) {
        char *src = chain_program(100000, padded);
        rj_graph *g = rj_graph_parse(f->ctx, src, "chain.rj");
        free(src);
        if (!g) fail_msg("%s", rj_ctx_error(f->ctx));
        char *text = rj_graph_dump(g, RJ_TARGET_REFERENCE, "graph");
        assert_non_null(text);
        rj_string_free(f->ctx, text);
        run_chain(f->ctx, g, RJ_TARGET_REFERENCE, 100000);
        /* pad elimination and fusion walk the whole chain (they used to recurse) */
        text = rj_graph_dump(g, RJ_TARGET_CPU, "fused");
        if (!text) fail_msg("%s", rj_ctx_error(f->ctx));
        int kernels = 0;
        for (const char *t = text; (t = strstr(t, "kernel ")); t++) kernels++;
        if (kernels < 100000 / FUSE_CUT_DEPTH) fail_msg("a 100,000-link chain fused into %d kernels", kernels);
        rj_string_free(f->ctx, text);
        rj_graph_free(g);
        /* compiled and run: 3,000 links, cut into kernels */
        src = chain_program(3000, padded);
        g = rj_graph_parse(f->ctx, src, "chain.rj");
        free(src);
        if (!g) fail_msg("%s", rj_ctx_error(f->ctx));
        run_chain(f->ctx, g, RJ_TARGET_CPU, 3000);
        rj_graph_free(g);
    }
    /* 100,000 distinct names: looked up and printed in linear time (this took minutes) */
    char *src = named_chain_program(100000);
    rj_graph *g = rj_graph_parse(f->ctx, src, "named.rj");
    free(src);
    if (!g) fail_msg("%s", rj_ctx_error(f->ctx));
    char *text = rj_graph_dump(g, RJ_TARGET_REFERENCE, "graph");
    assert_non_null(text);
    assert_non_null(strstr(text, "\ny100000 = add(y99999, 1)"));
    rj_string_free(f->ctx, text);
    rj_graph_free(g);
}

/* A program without inputs (cloning it copied from a NULL array) compiles and runs. */
static void test_no_inputs(void **state) {
    fixture *f = *state;
    rj_graph *g = rj_graph_parse(f->ctx, "y = relu(1.5) + 2\noutput y\n", "c.rj");
    if (!g) fail_msg("%s", rj_ctx_error(f->ctx));
    assert_int_equal(rj_graph_input_count(g), 0);
    for (int t = 0; t < 2; t++) {
        rj_program *p = rj_program_new(g, t ? RJ_TARGET_CPU : RJ_TARGET_REFERENCE);
        if (!p) fail_msg("%s", rj_ctx_error(f->ctx));
        rj_bind *b = rj_bind_new(p);
        assert_ok(f->ctx, rj_program_run(p, b));
        rj_tensor_info info;
        assert_ok(f->ctx, rj_tensor_get_info(rj_bind_result(b, rj_graph_find(g, "y")), &info));
        assert_int_equal(info.rank, 0);
        assert_true(*(const float *)info.values == 3.5f);
        rj_bind_free(b);
        rj_program_free(p);
    }
    rj_graph_free(g);
    /* constants the canonicaliser could fold to a literal stay outputs on every target */
    g = rj_graph_parse(f->ctx, "input x : f32[4]\ny = 2 * 1\nz = abs(-3.5) * 1\nw = x + y\noutput y, z, w\n",
                       "c2.rj");
    if (!g) fail_msg("%s", rj_ctx_error(f->ctx));
    float xs[4] = {1, 2, 3, 4};
    for (int t = 0; t < 2; t++) {
        rj_program *p = rj_program_new(g, t ? RJ_TARGET_CPU : RJ_TARGET_REFERENCE);
        if (!p) fail_msg("%s", rj_ctx_error(f->ctx));
        rj_bind *b = rj_bind_new(p);
        assert_ok(f->ctx, rj_bind_input(b, rj_graph_input_at(g, 0), xs, 4));
        assert_ok(f->ctx, rj_program_run(p, b));
        rj_tensor_info y, z, w;
        assert_ok(f->ctx, rj_tensor_get_info(rj_bind_result(b, rj_graph_find(g, "y")), &y));
        assert_ok(f->ctx, rj_tensor_get_info(rj_bind_result(b, rj_graph_find(g, "z")), &z));
        assert_ok(f->ctx, rj_tensor_get_info(rj_bind_result(b, rj_graph_find(g, "w")), &w));
        assert_int_equal(y.dtype, RJ_I64);
        assert_int_equal(*(const int64_t *)y.values, 2);
        assert_true(*(const float *)z.values == 3.5f);
        assert_true(((const float *)w.values)[3] == 6.0f);
        rj_bind_free(b);
        rj_program_free(p);
    }
    rj_graph_free(g);
}

/* The builder keeps inputs, outputs and symbols in one namespace (ragjit run gives each a
 * file in one directory): every kind of clash fails at the call, naming both. */
static void test_one_namespace(void **state) {
    static const char *const want[] = {
        "input: the name 'j1' is already used by a ragged symbol",
        "input: the name 'D' is already used by a dense size",
        "output: the name 'j2' is already used by a ragged symbol",
        "output: the name 'B' is already used by a dense size",
        "rj_graph_dense: the name 'x' is already used by an input",
        "rj_graph_ragged: the name 'w' is already used by an input",
        "rj_graph_dense: the name 'r' is already used by an output",
    };
    for (int i = 0; i < 7; i++) {
        env e = make_env(state);
        rj_node r = rj_graph_unary(e.g, RJ_OP_RELU, e.x);
        bool ok = true;
        switch (i) {
        case 0: ok = rj_graph_input(e.g, "j1", RJ_F32, 1, (rj_dim[]){4}) != RJ_NONE; break;
        case 1: ok = rj_graph_input(e.g, "D", RJ_F32, 1, (rj_dim[]){4}) != RJ_NONE; break;
        case 2: ok = rj_graph_output(e.g, r, "j2") == RJ_OK; break;
        case 3: ok = rj_graph_output(e.g, r, "B") == RJ_OK; break;
        case 4: ok = rj_graph_dense(e.g, "x") != RJ_DIM_NONE; break;
        case 5: ok = rj_graph_ragged(e.g, "w", e.B) != RJ_DIM_NONE; break;
        default:
            assert_ok(e.ctx, rj_graph_output(e.g, r, "r"));
            ok = rj_graph_dense(e.g, "r") != RJ_DIM_NONE;
            break;
        }
        assert_false(ok);
        assert_int_equal(rj_graph_status(e.g), RJ_ERR_ARG);
        assert_error_contains(e.ctx, want[i]);
        rj_graph_free(e.g);
    }
    /* an automatic output name skips names in use; an input output keeps its own name */
    env e = make_env(state);
    rj_graph_dense(e.g, "out0");
    assert_ok(e.ctx, rj_graph_output(e.g, e.x, NULL));
    assert_string_equal(rj_graph_output_name(e.g, 0), "out1");
    assert_ok(e.ctx, rj_graph_output(e.g, e.w, "w"));
    rj_graph_free(e.g);
}

/* Constant dims multiply to at most 2^48 elements in any shape, inputs and pads alike: beyond
 * that no tensor fits in memory, and lowering's arithmetic on constant extents overflowed. */
static void test_constant_sizes(void **state) {
    env e = make_env(state);
    assert_true(rj_graph_input(e.g, "a", RJ_F32, 2, (rj_dim[]){1 << 24, 1 << 24}) != RJ_NONE);
    assert_true(rj_graph_input(e.g, "b", RJ_F32, 3, (rj_dim[]){0, INT64_MAX, INT64_MAX}) == RJ_NONE);
    assert_int_equal(rj_graph_status(e.g), RJ_ERR_OVERFLOW);
    assert_error_contains(e.ctx, "input: f32[0, 9223372036854775807, 9223372036854775807]: its "
                                 "constant dims multiply to more than 2^48 elements");
    rj_graph_free(e.g);
    e = make_env(state);
    assert_true(rj_graph_pad(e.g, e.x, 0, (rj_dim)1 << 42) != RJ_NONE);
    assert_true(rj_graph_pad(e.g, e.x, 0, (rj_dim)1 << 43) == RJ_NONE);
    assert_error_contains(e.ctx, "pad: f32[B, 8796093022208, 64]: its constant dims multiply to "
                                 "more than 2^48 elements");
    rj_graph_free(e.g);
}

/* narrow: a dense dim of constant size only, with PyTorch's bounds; each refusal names why. */
static void test_narrow(void **state) {
    env e = make_env(state);
    assert_type(&e, rj_graph_narrow(e.g, e.x, 2, 16, 32), "f32[B, j1, 32]");
    assert_type(&e, rj_graph_narrow(e.g, e.x, -1, -8, 8), "f32[B, j1, 8]"); /* from the end */
    assert_type(&e, rj_graph_narrow(e.g, e.x, 2, 64, 0), "f32[B, j1, 0]");
    assert_type(&e, rj_graph_narrow(e.g, e.w, 0, 0, 64), "f32[64]");
    rj_node W = rj_graph_input(e.g, "W", RJ_F32, 2, (rj_dim[]){128, 64});
    assert_type(&e, rj_graph_linear(e.g, e.x, rj_graph_narrow(e.g, W, 0, 64, 64), RJ_NONE), "f32[B, j1, 64]");
    assert_type(&e, rj_graph_narrow(e.g, rj_graph_pad(e.g, e.x, 0, 16), 1, 4, 8), "f32[B, 8, 64]"); /* dense */
    rj_graph_free(e.g);
    static const struct {
        int dim;
        int64_t start, len;
        rj_status s;
        const char *msg;
    } bad[] = {
        {1, 0, 1, RJ_ERR_UNSUPPORTED, "narrow: dim 1 of f32[B, j1, 64] is the ragged dim j1: slicing a ragged dim is "
         "not supported"},
        {0, 0, 1, RJ_ERR_UNSUPPORTED, "narrow: dim 0 of f32[B, j1, 64] is the batch dim: slicing the batch dim of a "
         "jagged tensor is not supported"},
        {3, 0, 1, RJ_ERR_SHAPE, "narrow: dim 3 is out of range for f32[B, j1, 64] (3 dims)"},
        {-4, 0, 1, RJ_ERR_SHAPE, "narrow: dim -4 is out of range for f32[B, j1, 64] (3 dims)"},
        {2, 0, -1, RJ_ERR_ARG, "narrow: length -1 is negative"},
        {2, 60, 5, RJ_ERR_ARG, "narrow: start 60 + length 5 exceeds the size 64 of dim 2 of f32[B, j1, 64]"},
        {2, -4, 5, RJ_ERR_ARG, "narrow: start 60 + length 5 exceeds the size 64 of dim 2 of f32[B, j1, 64]"},
        {2, 65, 0, RJ_ERR_ARG, "narrow: start 65 is out of range for dim 2 of f32[B, j1, 64] (from -64 to 64)"},
        {2, -65, 0, RJ_ERR_ARG, "narrow: start -65 is out of range for dim 2 of f32[B, j1, 64] (from -64 to 64)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        e = make_env(state);
        assert_fails(&e, rj_graph_narrow(e.g, e.x, bad[i].dim, bad[i].start, bad[i].len), bad[i].s, bad[i].msg);
    }
    e = make_env(state);
    rj_node xd = rj_graph_input(e.g, "xd", RJ_F32, 3, (rj_dim[]){e.B, e.J, e.D});
    assert_fails(&e, rj_graph_narrow(e.g, xd, 2, 0, 1), RJ_ERR_UNSUPPORTED,
                 "narrow: dim 2 of f32[B, j1, D] has the size D, known only at run time: narrow needs a dim of "
                 "constant size");
    e = make_env(state);
    assert_fails(&e, rj_graph_narrow(e.g, rj_graph_scalar(e.g, 1), 0, 0, 1), RJ_ERR_SHAPE,
                 "narrow: cannot narrow a literal");
    e = make_env(state);
    assert_fails(&e, rj_graph_narrow(e.g, 1000, 0, 0, 1), RJ_ERR_GRAPH, "narrow: operand 1 is not a node");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        FX(test_ragged_mismatch_message), FX(test_cross_classes), FX(test_dim_mismatch_messages), FX(test_broadcasting),
        FX(test_same_symbols), FX(test_dtype_promotion), FX(test_dtype_errors),
        FX(test_reductions), FX(test_norms), FX(test_pad_unpad), FX(test_input_errors),
        FX(test_sticky_errors), FX(test_null_arguments), FX(test_outputs),
        FX(test_names_and_symbols), FX(test_introspection_errors),
        FX(test_introspection_allocates_nothing), FX(test_op_table), FX(test_cat_builder), FX(test_call), FX(test_constants_builder), FX(test_deep_chains),
        FX(test_no_inputs), FX(test_one_namespace), FX(test_constant_sizes), FX(test_narrow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
