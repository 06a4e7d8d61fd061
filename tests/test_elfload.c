/*
 * test_elfload.c — ragjit's own linker of object code (src/codegen/llvm/elfload.c).
 *
 * An object file is compiled here by LLVM from a small function with the two relocation kinds
 * ragjit's kernels use (a constant in a read-only pool, read relative to the instruction pointer;
 * a call to a routine outside the object), linked, and called: the routine lies in this test's
 * executable, which is usually further than a 32-bit displacement from the mapping, so the call
 * goes through a stub. Then the linker must refuse, without crashing or reading outside the
 * file (the sanitizer build checks that), and leave the context's error alone:
 *   - every truncation of the object;
 *   - every byte of the object replaced by 0x00, 0xff and itself with the top bit flipped (what
 *     still links is freed unrun: a flipped instruction byte is a valid object);
 *   - another machine, an unresolved routine, a function that is not in the object.
 * The whole library, on the other hand, goes through it in test_jit (RAGJIT_LLVM_LINKER=own on
 * x86-64: a refusal fails the compile) and through ORC in jit-no-blas (RAGJIT_LLVM_LINKER=orc).
 */
#include "harness.h"

#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/codegen/llvm/llvm_backend.h"
#include "objcode.h"

static const char ir_text[] =
    "define float @t_f(float %x) nounwind {\n"
    "  %a = fmul float %x, 3.250000e+00\n"
    "  %c = call float @t_ext(float %a)\n"
    "  %d = fadd float %c, 1.500000e+00\n"
    "  ret float %d\n"
    "}\n"
    "declare float @t_ext(float)\n";

static float ext_fn(float v) {
    return v * 2.0f;
}

static void *resolver(const char *name, void *ud) {
    int *calls = ud;
    ++*calls;
    if (strcmp(name, "t_ext")) return NULL;
    float (*f)(float) = ext_fn;
    void *p;
    memcpy(&p, &f, sizeof p);
    return p;
}

static void *no_resolver(const char *name, void *ud) {
    (void)name, (void)ud;
    return NULL;
}

/* Links obj (len bytes) with resolver r, expecting a refusal whose reason holds `want` (NULL:
 * any reason, or none if it links). Returns whether it linked. */
static bool try_link(rj_ctx *ctx, const unsigned char *obj, size_t len, elf_resolver r, const char *want,
                     void **fn) {
    static const char *const names[] = {"t_f"};
    int calls = 0;
    elf_code *code = NULL;
    char why[200];
    *fn = (void *)1;
    assert_int_equal(elf_link(ctx, &obj, &len, 1, r, &calls, names, 1, fn, &code, why, sizeof why), RJ_OK);
    if (!code) {
        assert_null(*fn);
        assert_true(why[0]);
        if (want && !strstr(why, want)) fail_msg("refused with \"%s\", expected \"%s\"", why, want);
        return false;
    }
    if (want) fail_msg("linked; expected a refusal (%s)", want);
    assert_non_null(*fn);
    elf_code_free(ctx, code);
    return true;
}

static void test_link_and_call(void **state) {
    (void)state;
#if !defined(__x86_64__)
    skip(); /* elfload.c links x86-64 objects; elsewhere ORC links them all */
#endif
    rj_ctx *ctx = rj_ctx_new(NULL, NULL);
    assert_non_null(ctx);
    size_t len;
    char err[300];
    unsigned char *obj = objcode_compile(ir_text, &len, err, sizeof err);
    if (!obj) fail_msg("%s", err);
    const unsigned char *o = obj;
    static const char *const names[] = {"t_f"};
    void *fn = NULL;
    elf_code *code = NULL;
    char why[200];
    int calls = 0;
    assert_int_equal(elf_link(ctx, &o, &len, 1, resolver, &calls, names, 1, &fn, &code, why, sizeof why), RJ_OK);
    if (!code) fail_msg("refused: %s", why);
    assert_int_equal(calls, 1);
    float (*f)(float);
    memcpy(&f, &fn, sizeof f);
    assert_true(f(2.0f) == 2.0f * 3.25f * 2.0f + 1.5f);
    assert_true(f(-1.0f) == -1.0f * 3.25f * 2.0f + 1.5f);
    elf_code_free(ctx, code);

    unsigned char *bad = malloc(len);
    assert_non_null(bad);
    memcpy(bad, obj, len);
    bad[offsetof(Elf64_Ehdr, e_machine)] = EM_AARCH64;
    try_link(ctx, bad, len, resolver, "machine", &fn);
    try_link(ctx, obj, len, no_resolver, "unresolved symbol t_ext", &fn);
    {
        static const char *const other[] = {"t_g"};
        calls = 0;
        assert_int_equal(elf_link(ctx, &o, &len, 1, resolver, &calls, other, 1, &fn, &code, why, sizeof why), RJ_OK);
        assert_null(code);
        assert_non_null(strstr(why, "no function t_g"));
    }
    for (size_t n = 0; n < len; n++) try_link(ctx, obj, n, resolver, "", &fn);
    int linked = 0, refused = 0;
    for (size_t i = 0; i < len; i++) {
        const unsigned char vals[3] = {0x00, 0xff, (unsigned char)(obj[i] ^ 0x80)};
        for (int v = 0; v < 3; v++) {
            memcpy(bad, obj, len);
            bad[i] = vals[v];
            if (try_link(ctx, bad, len, resolver, NULL, &fn)) linked++;
            else refused++;
        }
    }
    printf("object of %zu bytes: %d damaged copies linked, %d refused\n", len, linked, refused);
    assert_true(refused > 0 && linked > 0);
    assert_int_equal(rj_ctx_status(ctx), RJ_OK); /* refusals are not errors */
    free(bad);
    free(obj);
    rj_ctx_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_link_and_call),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
