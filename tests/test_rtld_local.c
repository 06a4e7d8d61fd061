/*
 * test_rtld_local.c — ragjit loaded with dlopen(RTLD_LOCAL) into a program without libm.
 *
 * Generated code calls libm for f64 exp, log and tanh (there are no vector forms). ORC's
 * process generator looks names up in the main program's global scope (dlopen(NULL)), which
 * holds no libm when the program does not link it and loads ragjit privately, as a plugin host
 * or an interpreter's FFI may: there every such kernel failed to link ("Symbols not found:
 * [ exp, log, tanh ]"). Both linkers now get the library's own references first (rt.c's
 * table). This test is such a program: it links neither libm nor ragjit, loads libragjit.so
 * (argv[1]) with RTLD_LOCAL, and compares an f64 program's CPU results with the interpreter's;
 * meson runs it with each linker. It says so when libm is in the global scope anyway (a
 * sanitizer's runtime brings it), where it still runs but proves less.
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "ragjit.h"

static const char *library;
static void *lib;

static void *sym(const char *name) {
    void *p = dlsym(lib, name);
    if (!p) fail_msg("%s not in %s", name, library);
    return p;
}

#define LOAD(f) __typeof__(&f) p_##f; memcpy(&p_##f, &(void *){sym(#f)}, sizeof p_##f)

static const char program[] =
    "ragged j1 : B\n"
    "input x : f64[B, j1, 3]\n"
    "y = exp(x) * 0.5 + tanh(x * 2.0) - log(x * x + 1.0)\n"
    "output y\n";

enum { B = 5, ROWS = 1 + 0 + 7 + 2 + 30 };

static void test_private_load(void **state) {
    (void)state;
    lib = dlopen(library, RTLD_LOCAL | RTLD_NOW);
    if (!lib) fail_msg("dlopen %s: %s", library, dlerror());
    if (dlsym(RTLD_DEFAULT, "tanh")) printf("libm is in the global scope of this process: the test proves less\n");
    LOAD(rj_ctx_new);
    LOAD(rj_ctx_free);
    LOAD(rj_ctx_error);
    LOAD(rj_graph_parse);
    LOAD(rj_graph_free);
    LOAD(rj_graph_find);
    LOAD(rj_graph_find_dim);
    LOAD(rj_program_new);
    LOAD(rj_program_free);
    LOAD(rj_program_run);
    LOAD(rj_bind_new);
    LOAD(rj_bind_free);
    LOAD(rj_bind_offsets);
    LOAD(rj_bind_input);
    LOAD(rj_bind_output);
    rj_ctx *ctx = p_rj_ctx_new(NULL, NULL);
    assert_non_null(ctx);
    rj_graph *g = p_rj_graph_parse(ctx, program, "rtld.rj");
    if (!g) fail_msg("%s", p_rj_ctx_error(ctx));
    static const int64_t offsets[B + 1] = {0, 1, 1, 8, 10, ROWS};
    double x[ROWS * 3], want[ROWS * 3], got[ROWS * 3];
    for (int i = 0; i < ROWS * 3; i++) x[i] = (double)((i * 37) % 23 - 11) / 4.0;
    const rj_target targets[2] = {RJ_TARGET_REFERENCE, RJ_TARGET_CPU};
    for (int t = 0; t < 2; t++) {
        rj_program *p = p_rj_program_new(g, targets[t]);
        if (!p) fail_msg("compiling: %s", p_rj_ctx_error(ctx));
        rj_bind *b = p_rj_bind_new(p);
        assert_non_null(b);
        if (p_rj_bind_offsets(b, p_rj_graph_find_dim(g, "j1"), B, offsets, NULL) ||
            p_rj_bind_input(b, p_rj_graph_find(g, "x"), x, ROWS * 3) ||
            p_rj_bind_output(b, p_rj_graph_find(g, "y"), t ? got : want, ROWS * 3) || p_rj_program_run(p, b))
            fail_msg("running: %s", p_rj_ctx_error(ctx));
        p_rj_bind_free(b);
        p_rj_program_free(p);
    }
    for (int i = 0; i < ROWS * 3; i++) {
        double d = got[i] - want[i], m = want[i] < 0 ? -want[i] : want[i];
        if ((d < 0 ? -d : d) > 1e-12 * (m > 1 ? m : 1))
            fail_msg("y[%d] = %.17g, the interpreter's %.17g", i, got[i], want[i]);
    }
    p_rj_graph_free(g);
    p_rj_ctx_free(ctx);
    /* no dlclose: LLVM's process-wide state does not survive being unloaded, so the library
     * stays loaded, as plugin hosts keep theirs */
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_rtld_local LIBRAGJIT\n");
        return 2;
    }
    library = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_private_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
