/*
 * test_tensor.c — run-time jagged tensors: the torch.nested-style constructors and
 * conversions, and their error paths.
 */
#include "harness.h"

#include <stdint.h>

#include <math.h>
#include <string.h>

static rj_tensor *two_components(rj_ctx *ctx) {
    static const float a[] = {1, 2, 3, 4, 5, 6}, b[] = {7, 8};
    return rj_tensor_from_components(ctx, RJ_F32, 3, (const void *[]){a, NULL, b},
                                     (int[]){2, 2, 2},
                                     (const int64_t *[]){(int64_t[]){3, 2}, (int64_t[]){0, 2},
                                                         (int64_t[]){1, 2}});
}

static void test_from_components(void **state) {
    fixture *f = *state;
    rj_tensor *t = two_components(f->ctx);
    assert_non_null(t);
    rj_tensor_info in;
    assert_ok(f->ctx, rj_tensor_get_info(t, &in));
    assert_int_equal(in.rank, 3);
    assert_int_equal(in.ragged_dim, 1);
    assert_int_equal(in.shape[0], 3);
    assert_int_equal(in.shape[1], 3); /* longest component */
    assert_int_equal(in.shape[2], 2);
    assert_int_equal(in.rows, 4);
    assert_int_equal(in.offsets[0], 0);
    assert_int_equal(in.offsets[1], 3);
    assert_int_equal(in.offsets[2], 3);
    assert_int_equal(in.offsets[3], 4);
    assert_null(in.lengths);
    assert_close_f("values", in.values, RJ_F32, (double[]){1, 2, 3, 4, 5, 6, 7, 8}, 8, 0, 0);
    rj_tensor_free(t);
    /* rank-1 components make an f32[B, j] tensor */
    static const int32_t c0[] = {1, 2}, c1[] = {3};
    t = rj_tensor_from_components(f->ctx, RJ_I32, 2, (const void *[]){c0, c1}, (int[]){1, 1},
                                  (const int64_t *[]){(int64_t[]){2}, (int64_t[]){1}});
    assert_non_null(t);
    rj_tensor_get_info(t, &in);
    assert_int_equal(in.rank, 2);
    assert_int_equal(((int32_t *)in.values)[2], 3);
    rj_tensor_free(t);
}

static void test_components_errors(void **state) {
    fixture *f = *state;
    static const float a[] = {1, 2, 3, 4};
    assert_null(rj_tensor_from_components(f->ctx, RJ_F32, 2, (const void *[]){a, a}, (int[]){2, 3},
                                          (const int64_t *[]){(int64_t[]){2, 2}, (int64_t[]){1, 1, 2}}));
    assert_int_equal(rj_ctx_status(f->ctx), RJ_ERR_SHAPE);
    assert_error_contains(f->ctx, "component 1 has rank 3 but component 0 has rank 2");
    assert_null(rj_tensor_from_components(f->ctx, RJ_F32, 2, (const void *[]){a, a}, (int[]){2, 2},
                                          (const int64_t *[]){(int64_t[]){2, 2}, (int64_t[]){1, 3}}));
    assert_error_contains(f->ctx, "component 1 has size 3 in dim 1 but component 0 has 2");
    assert_null(rj_tensor_from_components(f->ctx, RJ_F32, 0, NULL, NULL, NULL));
    assert_int_equal(rj_ctx_status(f->ctx), RJ_ERR_ARG);
    assert_null(rj_tensor_from_components(f->ctx, RJ_F32, 1, (const void *[]){NULL}, (int[]){1},
                                          (const int64_t *[]){(int64_t[]){2}}));
    assert_error_contains(f->ctx, "data of component 0 is NULL");
    assert_null(rj_tensor_from_components(f->ctx, RJ_F32, 1, (const void *[]){a}, (int[]){1},
                                          (const int64_t *[]){(int64_t[]){-2}}));
    assert_error_contains(f->ctx, "component 0 has negative length");
    assert_null(rj_tensor_from_components(f->ctx, RJ_F32, 1, (const void *[]){a}, (int[]){0},
                                          (const int64_t *[]){(int64_t[]){2}}));
    assert_error_contains(f->ctx, "rank 1 is out of range 2..8");
    assert_null(rj_tensor_from_components(f->ctx, (rj_dtype)9, 1, (const void *[]){a}, (int[]){1},
                                          (const int64_t *[]){(int64_t[]){2}}));
    assert_error_contains(f->ctx, "invalid dtype 9");
    assert_null(rj_tensor_from_components(f->ctx, RJ_F32, 2, (const void *[]){a, a}, (int[]){2, 2},
                                          (const int64_t *[]){(int64_t[]){INT64_MAX, 2},
                                                              (int64_t[]){2, 2}}));
    assert_int_equal(rj_ctx_status(f->ctx), RJ_ERR_OVERFLOW);
    assert_null(rj_tensor_from_components(NULL, RJ_F32, 0, NULL, NULL, NULL));
}

static void test_from_values(void **state) {
    fixture *f = *state;
    float v[10];
    int64_t off[] = {0, 2, 2, 5};
    rj_tensor *t = rj_tensor_from_values(f->ctx, RJ_F32, 1, (int64_t[]){2}, v, 5, off, 3);
    assert_non_null(t);
    rj_tensor_info in;
    rj_tensor_get_info(t, &in);
    assert_ptr_equal(in.values, v); /* no copy */
    assert_ptr_equal(in.offsets, off);
    assert_int_equal(in.shape[1], 3);
    rj_tensor_free(t);
    int64_t bad0[] = {1, 2, 5}, dec[] = {0, 3, 2, 5};
    assert_null(rj_tensor_from_values(f->ctx, RJ_F32, 1, (int64_t[]){2}, v, 5, bad0, 2));
    assert_int_equal(rj_ctx_status(f->ctx), RJ_ERR_OFFSETS_START);
    assert_null(rj_tensor_from_values(f->ctx, RJ_F32, 1, (int64_t[]){2}, v, 5, dec, 3));
    assert_int_equal(rj_ctx_status(f->ctx), RJ_ERR_OFFSETS_ORDER);
    assert_error_contains(f->ctx, "offsets decrease at index 2 (2 after 3)");
    assert_null(rj_tensor_from_values(f->ctx, RJ_F32, 1, (int64_t[]){2}, v, 4, off, 3));
    assert_int_equal(rj_ctx_status(f->ctx), RJ_ERR_OFFSETS_END);
    assert_error_contains(f->ctx, "offsets end at 5 (index 3) but values have 4 rows");
    assert_null(rj_tensor_from_values(f->ctx, RJ_F32, 1, (int64_t[]){2}, v, 5, NULL, 3));
    assert_int_equal(rj_ctx_status(f->ctx), RJ_ERR_ARG);
    assert_null(rj_tensor_from_values(f->ctx, RJ_F32, 1, (int64_t[]){2}, v, 5, off, -1));
    assert_int_equal(rj_ctx_status(f->ctx), RJ_ERR_BATCH);
    assert_null(rj_tensor_from_values(f->ctx, RJ_F32, 1, (int64_t[]){INT64_MAX}, v, 5, off, 3));
    assert_int_equal(rj_ctx_status(f->ctx), RJ_ERR_OVERFLOW);
    assert_null(rj_tensor_from_values(f->ctx, RJ_F32, 1, (int64_t[]){-2}, v, 5, off, 3));
    assert_int_equal(rj_ctx_status(f->ctx), RJ_ERR_SIZE);
}

/* Values ragjit allocates start on a cache line (ragjit.h): rows of 1 KiB then cover 16 lines,
 * not 17, and a 16-byte-aligned malloc block read in 512-byte column tiles ran softmax 1.75x
 * slower in a hand-written loop. */
static void test_values_aligned(void **state) {
    fixture *f = *state;
    for (int64_t n = 0; n < 70; n += 13) {
        rj_tensor *d = rj_tensor_dense(f->ctx, RJ_F32, 1, &n, NULL);
        assert_non_null(d);
        rj_tensor_info in;
        rj_tensor_get_info(d, &in);
        assert_int_equal((uintptr_t)in.values % 64, 0);
        for (int64_t i = 0; i < n; i++) assert_true(((float *)in.values)[i] == 0.0f);
        const void *data[] = {in.values};
        int64_t shape[] = {n, 1};
        rj_tensor *c = rj_tensor_from_components(f->ctx, RJ_F32, 1, data, (int[]){2}, (const int64_t *const[]){shape});
        assert_non_null(c);
        rj_tensor *p = rj_tensor_to_padded(c, 1.0, -1), *k = rj_tensor_contiguous(c);
        assert_non_null(p);
        assert_non_null(k);
        rj_tensor *all[] = {c, p, k};
        for (int i = 0; i < 3; i++) {
            rj_tensor_get_info(all[i], &in);
            assert_int_equal((uintptr_t)in.values % 64, 0);
            rj_tensor_free(all[i]);
        }
        rj_tensor_free(d);
    }
}

static void test_padded_roundtrip(void **state) {
    fixture *f = *state;
    rj_tensor *t = two_components(f->ctx);
    rj_tensor *p = rj_tensor_to_padded(t, -1, -1);
    assert_non_null(p);
    rj_tensor_info pi;
    rj_tensor_get_info(p, &pi);
    assert_int_equal(pi.ragged_dim, -1);
    assert_int_equal(pi.shape[0], 3);
    assert_int_equal(pi.shape[1], 3);
    assert_close_f("padded", pi.values, RJ_F32,
                   (double[]){1, 2, 3, 4, 5, 6, -1, -1, -1, -1, -1, -1, 7, 8, -1, -1, -1, -1}, 18, 0, 0);
    /* narrow the padded buffer back: a view with holes */
    rj_tensor *v = rj_tensor_from_padded(f->ctx, RJ_F32, 3, pi.shape, pi.values, (int64_t[]){3, 0, 1});
    assert_non_null(v);
    rj_tensor_info vi;
    rj_tensor_get_info(v, &vi);
    assert_non_null(vi.lengths);
    assert_int_equal(vi.offsets[2], 6);
    assert_ptr_equal(vi.values, pi.values);
    /* contiguous packs it back to the original */
    rj_tensor *c = rj_tensor_contiguous(v);
    rj_tensor_info ci;
    rj_tensor_get_info(c, &ci);
    assert_null(ci.lengths);
    assert_int_equal(ci.rows, 4);
    assert_close_f("contiguous", ci.values, RJ_F32, (double[]){1, 2, 3, 4, 5, 6, 7, 8}, 8, 0, 0);
    /* padding a view with holes to a longer length */
    rj_tensor *p5 = rj_tensor_to_padded(v, 0, 5);
    rj_tensor_info p5i;
    rj_tensor_get_info(p5, &p5i);
    assert_int_equal(p5i.shape[1], 5);
    assert_true(((float *)p5i.values)[20] == 7 && ((float *)p5i.values)[22] == 0);
    /* truncation is not supported */
    assert_null(rj_tensor_to_padded(t, 0, 2));
    assert_int_equal(rj_ctx_status(f->ctx), RJ_ERR_PAD_LEN);
    assert_error_contains(f->ctx, "length 2 is shorter than row 0 (3 rows); truncation is not supported");
    assert_null(rj_tensor_to_padded(p, 0, -1));
    assert_error_contains(f->ctx, "the tensor is not jagged");
    rj_tensor_free(p5);
    rj_tensor_free(c);
    rj_tensor_free(v);
    rj_tensor_free(p);
    rj_tensor_free(t);
}

static void test_from_padded_errors(void **state) {
    fixture *f = *state;
    float buf[12];
    assert_null(rj_tensor_from_padded(f->ctx, RJ_F32, 2, (int64_t[]){3, 4}, buf, (int64_t[]){1, 5, 0}));
    assert_int_equal(rj_ctx_status(f->ctx), RJ_ERR_SIZE);
    assert_error_contains(f->ctx, "lengths[1] = 5 exceeds the padded length 4");
    assert_null(rj_tensor_from_padded(f->ctx, RJ_F32, 2, (int64_t[]){3, 4}, buf, (int64_t[]){1, -1, 0}));
    assert_int_equal(rj_ctx_status(f->ctx), RJ_ERR_OFFSETS_ORDER);
    assert_null(rj_tensor_from_padded(f->ctx, RJ_F32, 2, (int64_t[]){3, 4}, buf, NULL));
    assert_int_equal(rj_ctx_status(f->ctx), RJ_ERR_ARG);
    assert_null(rj_tensor_from_padded(f->ctx, RJ_F32, 1, (int64_t[]){3}, buf, (int64_t[]){1}));
    assert_int_equal(rj_ctx_status(f->ctx), RJ_ERR_ARG);
    assert_null(rj_tensor_from_padded(f->ctx, RJ_F32, 2, (int64_t[]){INT64_MAX / 2, 4}, buf, (int64_t[]){1}));
    assert_int_equal(rj_ctx_status(f->ctx), RJ_ERR_OVERFLOW);
}

static void test_unbind(void **state) {
    fixture *f = *state;
    rj_tensor *t = two_components(f->ctx);
    rj_tensor_info views[3];
    assert_ok(f->ctx, rj_tensor_unbind(t, views, 3));
    assert_int_equal(views[0].rank, 2);
    assert_int_equal(views[0].shape[0], 3);
    assert_int_equal(views[1].shape[0], 0);
    assert_int_equal(views[2].shape[0], 1);
    assert_int_equal(views[2].shape[1], 2);
    assert_true(((float *)views[2].values)[0] == 7);
    assert_int_equal(rj_tensor_unbind(t, views, 2), RJ_ERR_SIZE);
    assert_error_contains(f->ctx, "room for 2 views but the tensor has 3 components");
    rj_tensor *d = rj_tensor_dense(f->ctx, RJ_I64, 2, (int64_t[]){2, 3}, NULL);
    assert_int_equal(rj_tensor_unbind(d, views, 3), RJ_ERR_ARG);
    rj_tensor_info di;
    rj_tensor_get_info(d, &di);
    assert_int_equal(di.rows, 6);
    assert_true(((int64_t *)di.values)[5] == 0);
    rj_tensor *dc = rj_tensor_contiguous(d);
    assert_non_null(dc);
    rj_tensor_free(dc);
    rj_tensor_free(d);
    rj_tensor_free(t);
    assert_int_equal(rj_tensor_unbind(NULL, views, 1), RJ_ERR_ARG);
    assert_int_equal(rj_tensor_get_info(NULL, views), RJ_ERR_ARG);
}

static void test_dense_errors(void **state) {
    fixture *f = *state;
    assert_null(rj_tensor_dense(f->ctx, RJ_F32, 2, (int64_t[]){INT64_MAX, 3}, NULL));
    assert_int_equal(rj_ctx_status(f->ctx), RJ_ERR_OVERFLOW);
    assert_null(rj_tensor_dense(f->ctx, RJ_F32, 2, (int64_t[]){INT64_MAX / 2, 1}, NULL));
    assert_int_equal(rj_ctx_status(f->ctx), RJ_ERR_OVERFLOW);
    assert_null(rj_tensor_dense(f->ctx, RJ_F32, 2, (int64_t[]){-1, 3}, NULL));
    assert_int_equal(rj_ctx_status(f->ctx), RJ_ERR_SIZE);
    assert_null(rj_tensor_dense(f->ctx, RJ_F32, 9, (int64_t[9]){0}, NULL));
    assert_int_equal(rj_ctx_status(f->ctx), RJ_ERR_ARG);
    rj_tensor *s = rj_tensor_dense(f->ctx, RJ_F64, 0, NULL, NULL); /* a scalar */
    assert_non_null(s);
    rj_tensor_free(s);
}

/* Found by fuzz/fuzz_api (UBSan): rj_tensor_to_padded(value=1e300) of an i32 tensor of three
 * items converted the value with a plain C cast, undefined out of range. It now converts as
 * the graph's pad does: saturating, NaN giving 0. */
static void test_fuzz_to_padded_value_out_of_range(void **state) {
    fixture *f = *state;
    static int32_t v32[4] = {1, 2, 3, 4};
    static int64_t v64[4] = {1, 2, 3, 4};
    static const int64_t off[4] = {0, 1, 3, 4};
    static const struct {
        double value;
        int64_t i32, i64;
    } cases[] = {{1e300, INT32_MAX, INT64_MAX}, {-1e300, INT32_MIN, INT64_MIN}, {NAN, 0, 0},
                 {INFINITY, INT32_MAX, INT64_MAX}, {-7.9, -7, -7}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rj_tensor *t = rj_tensor_from_values(f->ctx, RJ_I32, 0, NULL, v32, 4, off, 3);
        rj_tensor *p = rj_tensor_to_padded(t, cases[i].value, 2);
        assert_non_null(p);
        rj_tensor_info pi;
        rj_tensor_get_info(p, &pi);
        const int32_t *o = pi.values;
        assert_int_equal(o[0], 1);
        assert_int_equal(o[1], cases[i].i32);
        assert_int_equal(o[5], cases[i].i32);
        rj_tensor_free(p);
        rj_tensor_free(t);
        t = rj_tensor_from_values(f->ctx, RJ_I64, 0, NULL, v64, 4, off, 3);
        p = rj_tensor_to_padded(t, cases[i].value, 2);
        assert_non_null(p);
        rj_tensor_get_info(p, &pi);
        assert_int_equal(((const int64_t *)pi.values)[1], cases[i].i64);
        rj_tensor_free(p);
        rj_tensor_free(t);
    }
}

/* ---- 16-bit floats: rj_value_get / rj_value_set ------------------------------------------- */

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* f16 against the compiler's own _Float16 (libgcc's conversions, round to nearest even): every
 * f16 widened, and f32 values around every f16 and every rounding boundary narrowed (each sign,
 * exponent and top 10 mantissa bits, with low bits 0, 1, just below, at and just above the
 * halfway point, and all ones). */
#ifdef __FLT16_MAX__
__extension__ typedef _Float16 ref_f16; /* C23's, and GCC's and clang's before it */
#endif

static void test_f16_conversions(void **state) {
    (void)state;
#ifdef __FLT16_MAX__
    for (uint32_t h = 0; h < 0x10000; h++) {
        uint16_t b = (uint16_t)h;
        ref_f16 x;
        memcpy(&x, &b, 2);
        double got = rj_value_get(RJ_F16, &b, 0), want = (double)(float)x;
        if (!(got == want || (isnan(got) && isnan(want))) || signbit(got) != signbit(want))
            fail_msg("f16 0x%04x widens to %g, expected %g", h, got, want);
    }
    static const uint32_t low[] = {0, 1, 0xfff, 0x1000, 0x1001, 0x1fff};
    for (uint32_t top = 0; top < (1u << 19); top++)
        for (size_t k = 0; k < sizeof low / sizeof low[0]; k++) {
            float f = bits_f32(top << 13 | low[k]);
            uint16_t got;
            rj_value_set(RJ_F16, &got, 0, f);
            ref_f16 x = (ref_f16)f;
            uint16_t want;
            memcpy(&want, &x, 2);
            bool nan = (want & 0x7c00) == 0x7c00 && (want & 0x3ff);
            if (got != want && !(nan && (got & 0x7c00) == 0x7c00 && (got & 0x3ff)))
                fail_msg("f32 0x%08x narrows to f16 0x%04x, expected 0x%04x", f32_bits(f), got, want);
        }
#else
    skip();
#endif
}

/* bf16 is the top half of an f32: every bf16 widens exactly and narrows back to itself (a NaN
 * to a quiet NaN of the same sign), and ties go to the even neighbour. */
static void test_bf16_conversions(void **state) {
    (void)state;
    for (uint32_t h = 0; h < 0x10000; h++) {
        uint16_t b = (uint16_t)h, back;
        double v = rj_value_get(RJ_BF16, &b, 0);
        assert_true(isnan(v) ? (h & 0x7f80) == 0x7f80 : f32_bits((float)v) == h << 16); /* NaN: quietened */
        rj_value_set(RJ_BF16, &back, 0, v);
        if (isnan(v)) assert_true((back & 0xffc0) == ((h & 0x8000) | 0x7fc0));
        else assert_int_equal(back, h);
    }
    static const struct {
        uint32_t f;
        uint16_t bf;
    } cases[] = {
        {0x3f808000, 0x3f80}, {0x3f818000, 0x3f82}, {0x3f808001, 0x3f81}, {0x3f807fff, 0x3f80},
        {0x7f7fffff, 0x7f80}, /* the largest f32 is past bf16's largest: inf */
        {0x7f7f7fff, 0x7f7f}, {0x00008000, 0x0000}, {0x00018000, 0x0002}, /* subnormals: even */
        {0x80000000, 0x8000}, {0xff800000, 0xff80},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t got;
        rj_value_set(RJ_BF16, &got, 0, bits_f32(cases[i].f));
        if (got != cases[i].bf) fail_msg("f32 0x%08x narrows to bf16 0x%04x, expected 0x%04x", cases[i].f, got, cases[i].bf);
    }
    /* a double rounds to f32 first, as kernels round their f32 results */
    uint16_t got;
    rj_value_set(RJ_BF16, &got, 0, 1.0 + 0x1p-8 + 0x1p-40);
    assert_int_equal(got, 0x3f80); /* (float) drops 2^-40, leaving a tie, which goes to even */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        FX(test_from_components), FX(test_components_errors), FX(test_from_values), FX(test_values_aligned),
        FX(test_padded_roundtrip), FX(test_from_padded_errors), FX(test_unbind),
        FX(test_dense_errors), FX(test_fuzz_to_padded_value_out_of_range), FX(test_f16_conversions),
        FX(test_bf16_conversions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
