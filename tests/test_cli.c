/*
 * test_cli.c — the `ragjit` command, driven as a user drives it.
 *
 * Every example printed by `--help` is run as pasted; every example program is checked
 * against the interpreter; run then check round-trips through saved data; every way the
 * command can be misused or fed bad data exits with the specified status and one line on
 * stderr; and the graph, opt, loops and dot dumps of the examples match the golden files in
 * tests/golden (regenerate them with: RAGJIT_UPDATE_GOLDEN=1 meson test -C build cli, then
 * review the diff). The faster LLVM pipeline the guide offers is run as printed there.
 *
 * The test runs from the source directory (examples/ paths as in the help texts) and finds
 * the command in $RAGJIT.
 */
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *ragjit;
static char tmpdir[256];

typedef struct result {
    int status;
    char out[1 << 18], err[8192];
} result;

/* Runs a shell command line with "ragjit" replaced by the binary; captures both streams. */
static result *run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static result *run(const char *fmt, ...) {
    static result r;
    char line[4096], cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    const char *rest = line;
    assert_true(!strncmp(rest, "ragjit", 6));
    snprintf(cmd, sizeof cmd, "%s%s >%s/out 2>%s/err", ragjit, rest + 6, tmpdir, tmpdir);
    int st = system(cmd);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
    char path[512];
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/%s", tmpdir, k ? "err" : "out");
        FILE *f = fopen(path, "rb");
        char *dst = k ? r.err : r.out;
        size_t cap = k ? sizeof r.err : sizeof r.out;
        size_t n = f ? fread(dst, 1, cap - 1, f) : 0;
        dst[n] = 0;
        if (f) fclose(f);
    }
    return &r;
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* A failure: the status, one line on stderr containing `needle`. */
static void expect_fail(result *r, int status, const char *needle) {
    if (r->status != status) fail_msg("exit %d, expected %d; stderr: %s", r->status, status, r->err);
    if (!strstr(r->err, needle)) fail_msg("stderr lacks \"%s\": %s", needle, r->err);
    if (count_lines(r->err) != 1) fail_msg("expected one line on stderr, got:\n%s", r->err);
}

static void expect_ok(result *r) {
    if (r->status != 0) fail_msg("exit %d; stderr: %s", r->status, r->err);
}

/* An OpenCL run: it succeeds, or there is no OpenCL device here. */
static void expect_ok_or_no_device(result *r) {
    if (r->status == 1) expect_fail(r, 1, "no OpenCL device");
    else expect_ok(r);
}

/* ---- help --------------------------------------------------------------------------------- */

static void test_help_examples(void **state) {
    (void)state;
    static const char *const cmds[] = {"--help", "run --help", "check --help", "emit --help", "bench --help"};
    int examples = 0;
    for (size_t c = 0; c < sizeof cmds / sizeof cmds[0]; c++) {
        result *r = run("ragjit %s", cmds[c]);
        expect_ok(r);
        assert_true(strlen(r->out) > 100);
        static char help[sizeof r->out];
        snprintf(help, sizeof help, "%s", r->out);
        for (char *line = strtok(help, "\n"); line; line = strtok(NULL, "\n")) {
            if (strncmp(line, "  ragjit ", 9)) continue;
            result *e = run("%s", line + 2);
            if (e->status) fail_msg("help example failed (exit %d): %s\n%s", e->status, line + 2, e->err);
            examples++;
        }
    }
    printf("%d help examples run as pasted\n", examples);
    assert_true(examples >= 8);
    expect_fail(run("ragjit"), 2, "");
    expect_ok(run("ragjit --version"));
}

/* --version names the BLAS in use (util/blas.c): the library RAGJIT_BLAS names, ragjit's own
 * sgemm with the reason when it is off or does not load, "none" for JIT loops, the reference
 * BLAS as such (where Debian's is installed), and an optimised library when the search finds
 * one (OpenBLAS where the README's install step put it). */
static void expect_blas(result *r, const char *needle) {
    expect_ok(r);
    const char *line = strstr(r->out, "\nBLAS: ");
    if (!line || !strstr(line, needle)) fail_msg("no \"BLAS: ...%s\" line: %s", needle, r->out);
}

static void test_version_blas(void **state) {
    (void)state;
    expect_blas(run("ragjit --version"), "");
    setenv("RAGJIT_BLAS", "off", 1);
    expect_blas(run("ragjit --version"), "ragjit's own sgemm");
    expect_blas(run("ragjit --version"), "RAGJIT_BLAS=off");
    setenv("RAGJIT_BLAS", "loops", 1);
    expect_blas(run("ragjit --version"), "none: products as JIT loops (RAGJIT_BLAS=loops)");
    setenv("RAGJIT_BLAS", "/nonexistent/libblas.so", 1);
    expect_blas(run("ragjit --version"), "ragjit's own sgemm");
    expect_blas(run("ragjit --version"), "does not load as a CBLAS");
    static const char reference[] = "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3";
    if (access(reference, R_OK) == 0) {
        setenv("RAGJIT_BLAS", reference, 1);
        expect_blas(run("ragjit --version"), "the reference BLAS, slow");
    } else {
        printf("no reference BLAS at %s: its identification not checked\n", reference);
    }
    unsetenv("RAGJIT_BLAS");
    if (access("/usr/lib/x86_64-linux-gnu/libopenblas.so.0", R_OK) == 0)
        expect_blas(run("ragjit --version"), "OpenBLAS");
}

/* ---- examples ------------------------------------------------------------------------------ */

static void test_examples_check(void **state) {
    (void)state;
    DIR *d = opendir("examples");
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 4 || strcmp(e->d_name + len - 3, ".rj")) continue;
        for (int seed = 1; seed <= 3; seed++) {
            /* V: the vocabulary of the index examples (a note where a program lacks it); their
             * indices are drawn in range (rj_graph_input_index_bound) */
            result *r = run("ragjit check examples/%s --random B=%d,maxlen=%d,seed=%d,V=%d", e->d_name,
                            seed * 3, seed * 17, seed, 10 * seed);
            if (r->status) fail_msg("examples/%s (seed %d): exit %d\n%s%s", e->d_name, seed, r->status, r->out, r->err);
        }
        n++;
    }
    closedir(d);
    printf("%d example programs checked against the interpreter\n", n);
    assert_true(n >= 8);
}

static int files_equal(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int eq = fa && fb;
    while (eq) {
        int ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb) eq = 0;
        if (ca == EOF || cb == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return eq;
}

static void test_run_check_roundtrip(void **state) {
    (void)state;
    expect_ok(run("ragjit run examples/reductions.rj --random B=9,maxlen=40,seed=4 --save-data %s/d1 --out %s/o1",
                  tmpdir, tmpdir));
    expect_ok(run("ragjit check examples/reductions.rj --data %s/d1", tmpdir));
    expect_ok(run("ragjit run examples/reductions.rj --data %s/d1 --out %s/o2 --threads 1", tmpdir, tmpdir));
    static const char *const files[] = {"total", "avg", "peak", "rownorm", "centered", "j1"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char a[512], b[512];
        snprintf(a, sizeof a, "%s/o1/%s.npy", tmpdir, files[i]);
        snprintf(b, sizeof b, "%s/o2/%s.npy", tmpdir, files[i]);
        if (!files_equal(a, b)) fail_msg("%s differs between a random run and its replay", files[i]);
    }
    /* a pad length no input determines travels as a 0-d array */
    static const char prog[] = "ragged j : B\ninput x : f32[B, j, 4]\ny = pad(x, value=1.0, len=L)\noutput y\n";
    char path[512];
    snprintf(path, sizeof path, "%s/padl.rj", tmpdir);
    FILE *f = fopen(path, "w");
    fputs(prog, f);
    fclose(f);
    expect_ok(run("ragjit run %s --random B=3,maxlen=5,L=7 --save-data %s/d2 --out %s/o3", path, tmpdir, tmpdir));
    expect_ok(run("ragjit check %s --data %s/d2", path, tmpdir));
    expect_fail(run("ragjit run %s --random B=3,maxlen=5 --out %s/o4", path, tmpdir), 2, "size L is not bound");
    expect_fail(run("ragjit run %s --random B=3,maxlen=9,minlen=9,L=7 --out %s/o4", path, tmpdir), 2,
                "pad: length L = 7 is shorter than item 0 of j (9 rows); truncation is not supported");
    /* bench prints times and throughput */
    result *r = run("ragjit bench examples/softmax.rj --random B=4,maxlen=8 --reps 3");
    expect_ok(r);
    assert_non_null(strstr(r->out, "run median"));
    assert_non_null(strstr(r->out, "GB/s"));
    /* bench --ab: a second context with the setting, runs in pairs; a setting nothing reads
     * compiles the same code, which must write the same bits (into A's memory) */
    r = run("ragjit bench examples/softmax.rj --random B=6,maxlen=20 --reps 4 --ab RAGJIT_TEST_UNUSED=1");
    expect_ok(r);
    assert_non_null(strstr(r->out, "B (RAGJIT_TEST_UNUSED=1): compile"));
    assert_non_null(strstr(r->out, "B/A: median of 4 pairs"));
    assert_non_null(strstr(r->out, "outputs identical"));
    r = run("ragjit bench examples/masked_softmax.rj --random B=6,maxlen=20 --reps 2 --ab RAGJIT_LLVM_LIGHT=0");
    expect_ok(r);
    assert_non_null(strstr(r->out, "B/A: median of 2 pairs"));
    expect_fail(run("ragjit bench examples/softmax.rj --random B=2 --ab LIGHT"), 2,
                "--ab takes VAR=VALUE, got 'LIGHT'");
    expect_fail(run("ragjit run examples/softmax.rj --random B=2 --out %s/o5 --ab A=1", tmpdir), 2,
                "--ab is an option of bench");
}

static void test_emit_stages(void **state) {
    (void)state;
    static const char *const stages[] = {"graph", "opt", "fused", "loops", "llvm", "llvm-opt", "asm", "cuda",
                                         "opencl", "dot"};
    for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++) {
        result *r = run("ragjit emit examples/masked_softmax.rj --stage %s", stages[i]);
        expect_ok(r);
        assert_true(strlen(r->out) > 20);
    }
    result *r = run("ragjit emit examples/masked_softmax.rj --stage ptx");
    if (r->status) {
        printf("ptx stage unavailable here: %s", r->err);
        assert_int_equal(r->status, 1);
    } else {
        assert_non_null(strstr(r->out, ".entry"));
    }
    r = run("ragjit emit examples/elementwise.rj --stage asm");
    expect_ok(r);
    assert_true(strstr(r->out, "mulps") || strstr(r->out, "fmadd"));
    /* "fused" explains itself: producers inlined into a kernel, and why each value is written */
    r = run("ragjit emit examples/reductions.rj --stage fused");
    expect_ok(r);
    static const char *const says[] = {"total = sum(x, dim=1)  (written: an output)", "  inline v7 = mul(x, x)\n",
                                       "(not written: used where it is computed)", "(written: read by kernel 5)"};
    for (size_t i = 0; i < sizeof says / sizeof says[0]; i++)
        if (!strstr(r->out, says[i])) fail_msg("the fused dump lacks \"%s\":\n%s", says[i], r->out);
    /* ... numbering unnamed values as `graph` does (the passes renumber nodes) */
    r = run("ragjit emit examples/reductions.rj --stage graph");
    expect_ok(r);
    if (!strstr(r->out, "v7 = mul(x, x)")) fail_msg("graph and fused number values differently:\n%s", r->out);
    r = run("ragjit emit examples/reductions.rj --stage loops");
    expect_ok(r);
    if (!strstr(r->out, "buffer 1: output 0 (total)")) fail_msg("loops does not name its buffers:\n%s", r->out);
    /* "dot": inlined producers inside their kernel's cluster; rendered where Graphviz exists */
    r = run("ragjit emit examples/masked_softmax.rj --stage dot");
    expect_ok(r);
    const char *cl = strstr(r->out, "subgraph cluster_k0"), *end = cl ? strstr(cl, "\n  }\n") : NULL;
    const char *inl = strstr(r->out, "p = pad(v2, value=-inf)");
    if (!cl || !end || !inl || inl < cl || inl > end) fail_msg("pad is not inside kernel 0's cluster:\n%s", r->out);
    if (strstr(r->out, "\\\\n")) fail_msg("a label with an escaped backslash:\n%s", r->out);
    if (system("command -v dot >/dev/null 2>&1") == 0) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "%s emit examples/masked_softmax.rj --stage dot | dot -Tsvg >/dev/null", ragjit);
        assert_int_equal(system(cmd), 0);
        printf("the dot dump renders with Graphviz\n");
    }
}

/* ---- failures --------------------------------------------------------------------------------- */

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* A .npy file written by hand: header dict and raw data. */
static void write_npy(const char *path, const char *dict, const void *data, size_t n) {
    char header[128];
    int len = snprintf(header, sizeof header, "%s", dict);
    while ((10 + len + 1) % 64) header[len++] = ' ';
    header[len++] = '\n';
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    unsigned char hl[2] = {(unsigned char)(len & 0xff), (unsigned char)(len >> 8)};
    fwrite(hl, 1, 2, f);
    fwrite(header, 1, (size_t)len, f);
    if (n) fwrite(data, 1, n, f);
    fclose(f);
}

static void test_usage_errors(void **state) {
    (void)state;
    const char *S = "examples/softmax.rj";
    expect_fail(run("ragjit frob"), 2, "unknown command 'frob'");
    expect_fail(run("ragjit run"), 2, "no PROGRAM given");
    expect_fail(run("ragjit run nope.rj --random B=2 --out %s/x", tmpdir), 2, "nope.rj: cannot open");
    expect_fail(run("ragjit run %s --random B=2", S), 2, "--out DIR is required");
    expect_fail(run("ragjit run %s --out %s/x", S, tmpdir), 2, "give exactly one of --data DIR and --random SPEC");
    expect_fail(run("ragjit run %s --random B=2 --data . --out %s/x", S, tmpdir), 2, "give exactly one of");
    expect_fail(run("ragjit run %s --random B=2 --out %s/x --bogus", S, tmpdir), 2, "unknown option '--bogus'");
    expect_fail(run("ragjit run %s --random B=2 --out", S), 2, "option --out needs a value");
    expect_fail(run("ragjit run %s --random B=2 --out %s/x --threads zero", S, tmpdir), 2, "--threads must be");
    expect_fail(run("ragjit run %s --random B=2 --out %s/x --target gpu", S, tmpdir), 2, "unknown target 'gpu'");
    expect_fail(run("ragjit bench %s --random B=2 --reps -1", S), 2, "--reps must be a positive integer");
    expect_fail(run("ragjit run %s --random B=x --out %s/x", S, tmpdir), 2, "--random: 'B=x' is not NAME=VALUE");
    /* --print shows a dense output as dense, a jagged one item by item */
    char dp[600];
    snprintf(dp, sizeof dp, "%s/dense.rj", tmpdir);
    write_file(dp, "ragged j1 : B\ninput x : f32[B, j1, 2]\ns = sum(x, dim=1)\noutput s\n");
    result *rp = run("ragjit run %s --random B=2,maxlen=3,seed=1 --out %s/x --print", dp, tmpdir);
    expect_ok(rp);
    if (!strstr(rp->out, "  [0]: [") || !strstr(rp->out, "  [1]: [") || strstr(rp->out, "item 0"))
        fail_msg("--print of a dense output:\n%s", rp->out);
    /* a size the program lacks is ignored with a note (one spec can serve several programs) */
    result *rq = run("ragjit run %s --random B=2,Q=3 --out %s/x", S, tmpdir);
    expect_ok(rq);
    assert_non_null(strstr(rq->err, "the program has no size named 'Q'; ignored"));
    expect_fail(run("ragjit run %s --random B=2,j1=3 --out %s/x", S, tmpdir), 2, "'j1' is not a dense size");
    expect_fail(run("ragjit check %s --random B=2 --out %s/x", S, tmpdir), 2, "--out is not an option of check");
    expect_fail(run("ragjit run %s --random maxlen=2 --out %s/x", S, tmpdir), 2, "the number of items is not given");
    expect_fail(run("ragjit run %s --random B=2 --out %s/x --size D=4", S, tmpdir), 2, "--size: the program has no size named 'D'");
    expect_fail(run("ragjit emit %s", S), 2, "--stage is required");
    expect_fail(run("ragjit emit %s --stage nope", S), 2, "unknown stage 'nope'");
    expect_fail(run("ragjit emit %s --stage graph --random B=2", S), 2, "does not take data options");
    expect_fail(run("ragjit check %s --random B=2 --target reference", S), 2, "compare the interpreter with itself");
    expect_fail(run("ragjit run %s --data %s/none --out %s/x", S, tmpdir, tmpdir), 2, "is not a directory");
    /* syntax errors: location, the line and a caret (three lines) */
    char path[512];
    snprintf(path, sizeof path, "%s/bad.rj", tmpdir);
    write_file(path, "ragged j : B\ninput x : f32[B, j, 4]\ny = relu(x +)\noutput y\n");
    result *r = run("ragjit emit %s --stage graph", path);
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->err, "bad.rj:3:13: expected an expression, found ')'"));
    assert_int_equal(count_lines(r->err), 3);
    assert_non_null(strstr(r->err, "            ^"));
    /* shape errors from the builder point at the statement */
    write_file(path, "ragged j : B\nragged k : B\ninput x : f32[B, j, 4]\ninput y : f32[B, k, 4]\nz = x * y\noutput z\n");
    r = run("ragjit emit %s --stage graph", path);
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->err, "bad.rj:5:7: mul: f32[B, j, 4] and f32[B, k, 4] differ in dim 1 (ragged j vs k)"));
}

/* run --time: one line of the phases with their CPU time and page faults; with --reps, a second
 * with the later runs and the first run's time over theirs (test_prepare checks what the
 * bind phase's rj_bind_prepare does). */
static void test_run_time(void **state) {
    (void)state;
    result *r = run("ragjit run examples/reductions.rj --random B=64,maxlen=600,seed=2 --out %s/t --time --reps 3",
                    tmpdir);
    expect_ok(r);
    static const char *const want[] = {"ragjit: compile ", ", bind ", " page faults), run ", "ragjit: later runs ",
                                       " median of 3 (cpu ", "first/later "};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(r->err, want[i])) fail_msg("run --time: no \"%s\" in:\n%s", want[i], r->err);
    assert_int_equal(count_lines(r->err), 2);
    r = run("ragjit run examples/softmax.rj --random B=2 --out %s/t --time", tmpdir);
    expect_ok(r);
    assert_int_equal(count_lines(r->err), 1);
}

static void test_run_failures(void **state) {
    (void)state;
    const char *S = "examples/softmax.rj";
    result *r = run("ragjit check %s --random B=5,maxlen=30,seed=3 --atol 0 --rtol 0", S);
    assert_int_equal(r->status, 1);
    assert_non_null(strstr(r->out, "MISMATCH"));
    r = run("ragjit run %s --random B=2 --out %s/x --target cuda", S, tmpdir);
    if (r->status != 0) expect_fail(r, 1, "the cuda target is not available on this machine");
    /* OpenCL: checked against the interpreter where a device (PoCL) exists, else one clear line */
    r = run("ragjit check %s --random B=5,maxlen=30,seed=3 --target opencl", S);
    if (r->status != 0) expect_fail(r, 1, "no OpenCL device");
    else assert_non_null(strstr(r->out, "ok"));
}

/* RAGJIT_LLVM_PASSES: the faster pipeline docs/guide.md offers (read from the guide, so the
 * text users copy is the one tested) gives correct results, and a bad pipeline is a compile
 * error that names the variable. */
/* Lanes loops as vector code (llvm/vector.c) at inner widths around the vector width and its
 * halves, as a constant (straight-line steps, or a loop without a masked step where vf
 * divides it) and as a size bound at run time (a loop and a masked last step), against the
 * interpreter; and with LLVM's vectoriser instead (RAGJIT_LLVM_VECTOR=0), and with 256-bit
 * vectors. The program covers maps with exp, log, tanh and erf, reductions over the inner dim
 * (+, max, min, *, on floats, ints and bools) and over the ragged one, softmax over both,
 * layer_norm, pads (guards the same in every lane), a select on a varying condition, a
 * transposed dense tensor (gathers along the lanes), and a mean over the ragged dim of [B, j]
 * (its result stored by every lane of a one-lane tile). */
static void test_vector_widths(void **state) {
    (void)state;
    static const char *const prog =
        "ragged j : B\n"
        "input x : f32[B, j, %s]\n"
        "input w : f32[%s]\n"
        "input xi : i32[B, j, %s]\n"
        "input z : f32[B, j]\n"
        "input dn : f32[B, 5, %s]\n"
        "dt = dn.transpose(1, 2) * 2.0\n"
        "mz = mean(z * 2.0, dim=1)\n"
        "e = exp(x * w) - log(abs(x) + 1.0) + tanh(x) + gelu(x)\n"
        "s = sum(x, dim=2) + max(x, dim=2) - min(x, dim=2) + prod(x * 0.1 + 1.0, dim=2)\n"
        "si = sum(xi, dim=2) + max(xi, dim=2)\n"
        "anyp = logical_or(max(x > 1.5, dim=2), min(xi > 0, dim=2))\n"
        "r = sum(x, dim=1) + max(x, dim=1)\n"
        "sm = softmax(x, dim=2) + softmax(x, dim=1)\n"
        "ln = layer_norm(x, %s, weight=w, bias=w)\n"
        "p = pad(x * 2.0, value=-1.5)\n"
        "q = where(x > 0.0, x * w, -x)\n"
        "output e, s, si, anyp, r, sm, ln, p, q, mz, dt\n";
    static const int widths[] = {1, 2, 3, 8, 15, 16, 17, 31, 33, 48, 64, 100, 256};
    char path[512], text[2048];
    snprintf(path, sizeof path, "%s/widths.rj", tmpdir);
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++) {
        for (int named = 0; named < 2; named++) {
            char n[16];
            snprintf(n, sizeof n, "%d", widths[i]);
            const char *d = named ? "N" : n;
            snprintf(text, sizeof text, prog, d, d, d, d, d);
            write_file(path, text);
            result *r = run("ragjit check %s --random B=7,minlen=0,maxlen=%d,seed=%d,N=%d", path, 3 + 5 * (int)i,
                            (int)i + 1, widths[i]);
            if (r->status) fail_msg("width %s: exit %d\n%s%s", d, r->status, r->out, r->err);
            if (widths[i] == 17 && !named) { /* every lanes loop of it is vector code */
                r = run("ragjit emit %s --stage llvm | tail -c 2000", path); /* the metadata ends it */
                expect_ok(r);
                if (!strstr(r->out, "!\"llvm\", i32 0}")) fail_msg("lanes loops left to LLVM:\n%.3000s", r->out);
            }
        }
    }
    static const char *const settings[] = {"0", "256"};
    for (int k = 0; k < 2; k++) {
        setenv("RAGJIT_LLVM_VECTOR", settings[k], 1);
        result *r = run("ragjit check %s --random B=9,maxlen=40,seed=5,N=37", path);
        unsetenv("RAGJIT_LLVM_VECTOR");
        if (r->status) fail_msg("RAGJIT_LLVM_VECTOR=%s: exit %d\n%s%s", settings[k], r->status, r->out, r->err);
    }
    /* item kernels' tiles narrowed (a stash budget of a few rows, and one item far longer than
     * the other): their vector loops leave out the masked step only where every tile allows */
    static const int narrow[] = {40, 48, 96, 100, 256};
    setenv("RAGJIT_STASH_BYTES", "8192", 1);
    for (size_t i = 0; i < sizeof narrow / sizeof narrow[0]; i++) {
        char n[16];
        snprintf(n, sizeof n, "%d", narrow[i]);
        snprintf(text, sizeof text, prog, n, n, n, n, n);
        write_file(path, text);
        result *r = run("ragjit check %s --random B=2,minlen=1,maxlen=300,seed=%d", path, (int)i + 3);
        if (r->status) fail_msg("width %d, narrow tiles: exit %d\n%s%s", narrow[i], r->status, r->out, r->err);
    }
    unsetenv("RAGJIT_STASH_BYTES");
}

static void test_pass_pipeline(void **state) {
    (void)state;
    static char guide[1 << 19], pipeline[1024]; /* the whole guide (143 KB in 2026-11) */
    FILE *f = fopen("docs/guide.md", "rb");
    assert_non_null(f);
    size_t got = fread(guide, 1, sizeof guide - 1, f);
    assert_true(got < sizeof guide - 1); /* read to its end */
    guide[got] = 0;
    fclose(f);
    const char *mark = "RAGJIT_LLVM_PASSES='", *p = strstr(guide, mark);
    assert_non_null(p);
    p += strlen(mark);
    const char *q = strchr(p, '\'');
    assert_true(q && q > p && (size_t)(q - p) < sizeof pipeline);
    memcpy(pipeline, p, (size_t)(q - p));
    pipeline[q - p] = 0;
    assert_non_null(strstr(pipeline, "loop-vectorize"));
    setenv("RAGJIT_LLVM_PASSES", pipeline, 1);
    static const char *const progs[] = {"softmax", "layernorm_gelu", "reductions", "pad_unpad"};
    for (size_t i = 0; i < sizeof progs / sizeof progs[0]; i++)
        expect_ok(run("ragjit check examples/%s.rj --random B=9,maxlen=40,seed=2", progs[i]));
    /* and the default's tiers one by one: O3 everywhere, the short pipeline for row kernels only */
    unsetenv("RAGJIT_LLVM_PASSES");
    static const char *const tiers[] = {"0", "rows"};
    for (size_t t = 0; t < 2; t++) {
        setenv("RAGJIT_LLVM_LIGHT", tiers[t], 1);
        for (size_t i = 0; i < 2; i++)
            expect_ok(run("ragjit check examples/%s.rj --random B=9,maxlen=40,seed=2,V=50",
                          i ? "masked_softmax" : "nll"));
    }
    unsetenv("RAGJIT_LLVM_LIGHT");
    setenv("RAGJIT_LLVM_PASSES", "function(no-such-pass)", 1);
    result *r = run("ragjit check examples/softmax.rj --random B=3");
    unsetenv("RAGJIT_LLVM_PASSES");
    expect_fail(r, 1, "pass pipeline \"function(no-such-pass)\" (from RAGJIT_LLVM_PASSES)");
}

static void test_bad_data(void **state) {
    (void)state;
    const char *S = "examples/softmax.rj";
    char d[512], p[600];
    snprintf(d, sizeof d, "%s/data", tmpdir);
    expect_ok(run("ragjit run %s --random B=3,maxlen=4,minlen=1,seed=1 --save-data %s --out %s/o", S, d, tmpdir));
    /* each case breaks one file, checks the message, and restores it */
    snprintf(p, sizeof p, "%s/x.npy", d);
    char good[600];
    snprintf(good, sizeof good, "%s/x.good", d);
    rename(p, good);
    expect_fail(run("ragjit run %s --data %s --out %s/o", S, d, tmpdir), 2, "input x: ");
    expect_fail(run("ragjit run %s --data %s --out %s/o", S, d, tmpdir), 2, "x.npy: cannot open");
    write_file(p, "definitely not numpy");
    expect_fail(run("ragjit run %s --data %s --out %s/o", S, d, tmpdir), 2, "x.npy: not a .npy file (bad magic)");
    float fl[4] = {0};
    write_npy(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (10, 64), }", fl, sizeof fl);
    expect_fail(run("ragjit run %s --data %s --out %s/o", S, d, tmpdir), 2, "x.npy: truncated");
    double db[64] = {0};
    write_npy(p, "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 64), }", db, sizeof db);
    expect_fail(run("ragjit run %s --data %s --out %s/o", S, d, tmpdir), 2, "dtype f64 but input x is declared f32");
    write_npy(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (64,), }", db, 256);
    expect_fail(run("ragjit run %s --data %s --out %s/o", S, d, tmpdir), 2, "1 dims but input x needs 2");
    write_npy(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 32), }", db, 256);
    expect_fail(run("ragjit run %s --data %s --out %s/o", S, d, tmpdir), 2, "dim 1 is 32 but input x has 64 there");
    write_npy(p, "{'descr': '>f4', 'fortran_order': False, 'shape': (1, 64), }", db, 256);
    expect_fail(run("ragjit run %s --data %s --out %s/o", S, d, tmpdir), 2, "unsupported dtype '>f4'");
    write_npy(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 64), }", db, 256);
    expect_fail(run("ragjit run %s --data %s --out %s/o", S, d, tmpdir), 2, "1 rows, but the offsets in");
    remove(p);
    rename(good, p);
    /* offsets */
    snprintf(p, sizeof p, "%s/j1.npy", d);
    snprintf(good, sizeof good, "%s/j1.good", d);
    rename(p, good);
    int64_t bad_start[] = {1, 2, 3, 4};
    write_npy(p, "{'descr': '<i8', 'fortran_order': False, 'shape': (4,), }", bad_start, sizeof bad_start);
    expect_fail(run("ragjit run %s --data %s --out %s/o", S, d, tmpdir), 2, "j1.npy: offsets[0] is 1, expected 0");
    int64_t dec[] = {0, 3, 2, 4};
    write_npy(p, "{'descr': '<i8', 'fortran_order': False, 'shape': (4,), }", dec, sizeof dec);
    expect_fail(run("ragjit run %s --data %s --out %s/o", S, d, tmpdir), 2, "j1.npy: offsets decrease at index 2");
    float fo[4] = {0};
    write_npy(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", fo, sizeof fo);
    expect_fail(run("ragjit run %s --data %s --out %s/o", S, d, tmpdir), 2, "j1.npy: offsets must be integers");
    write_npy(p, "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 2), }", dec, sizeof dec);
    expect_fail(run("ragjit run %s --data %s --out %s/o", S, d, tmpdir), 2, "j1.npy: offsets must be 1-d");
    remove(p);
    rename(good, p);
    expect_ok(run("ragjit run %s --data %s --out %s/o", S, d, tmpdir));
    /* two files disagree on a dense size: the message names both files */
    char prog[600], d2[512], want[1400];
    snprintf(prog, sizeof prog, "%s/twod.rj", tmpdir);
    write_file(prog, "input a : f32[D]\ninput b : f32[D]\ny = a + b\noutput y\n");
    snprintf(d2, sizeof d2, "%s/data2", tmpdir);
    expect_ok(run("ragjit run %s --random D=4 --save-data %s --out %s/o", prog, d2, tmpdir));
    snprintf(p, sizeof p, "%s/b.npy", d2);
    write_npy(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", fo, 12);
    snprintf(want, sizeof want, "%s/b.npy: D is 3 here but 4 in %s/a.npy", d2, d2);
    expect_fail(run("ragjit run %s --data %s --out %s/o", prog, d2, tmpdir), 2, want);
}

/* --data with DIR/<sym>.lengths.npy: the symbol is a view with holes. Items 0 and 2 of a
 * (3, 4, 2) padded buffer with garbage (1e30) in the holes give the same files as the packed
 * data; outputs are written packed. A bad lengths file is bad input. */
static void test_data_lengths(void **state) {
    (void)state;
    char prog[600], dh[512], dp[512], p[600], a[600], b[600];
    snprintf(prog, sizeof prog, "%s/holes.rj", tmpdir);
    write_file(prog, "ragged j1 : B\ninput x : f32[B, j1, 2]\ny = x * 2.0\ns = sum(x, dim=1)\noutput y, s\n");
    snprintf(dh, sizeof dh, "%s/holes", tmpdir);
    snprintf(dp, sizeof dp, "%s/packed", tmpdir);
    mkdir(dh, 0777), mkdir(dp, 0777);
    float padded[12][2], packed[5][2];
    int64_t lens[3] = {2, 0, 3}, offh[4] = {0, 4, 8, 12}, offp[4] = {0, 2, 2, 5};
    for (int r = 0, k = 0; r < 12; r++)
        for (int c = 0; c < 2; c++) {
            bool real = (r % 4) < lens[r / 4];
            padded[r][c] = real ? (float)(r * 2 + c) : 1e30f;
            if (real) packed[k / 2][k % 2] = padded[r][c], k++;
        }
    snprintf(p, sizeof p, "%s/x.npy", dh);
    write_npy(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (12, 2), }", padded, sizeof padded);
    snprintf(p, sizeof p, "%s/j1.npy", dh);
    write_npy(p, "{'descr': '<i8', 'fortran_order': False, 'shape': (4,), }", offh, sizeof offh);
    snprintf(p, sizeof p, "%s/j1.lengths.npy", dh);
    write_npy(p, "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", lens, sizeof lens);
    snprintf(p, sizeof p, "%s/x.npy", dp);
    write_npy(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (5, 2), }", packed, sizeof packed);
    snprintf(p, sizeof p, "%s/j1.npy", dp);
    write_npy(p, "{'descr': '<i8', 'fortran_order': False, 'shape': (4,), }", offp, sizeof offp);
    expect_ok(run("ragjit run %s --data %s --out %s/oh", prog, dh, tmpdir));
    expect_ok(run("ragjit run %s --data %s --out %s/op", prog, dp, tmpdir));
    expect_ok(run("ragjit check %s --data %s", prog, dh));
    result *r = run("ragjit run %s --data %s --out %s/ohc --target opencl", prog, dh, tmpdir);
    if (r->status != 0) expect_fail(r, 1, "no OpenCL device");
    static const char *const files[] = {"y", "s", "j1"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(a, sizeof a, "%s/oh/%s.npy", tmpdir, files[i]);
        snprintf(b, sizeof b, "%s/op/%s.npy", tmpdir, files[i]);
        if (!files_equal(a, b)) fail_msg("%s: a view with holes and its packed data differ", files[i]);
    }
    snprintf(p, sizeof p, "%s/j1.lengths.npy", dh);
    write_npy(p, "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", lens, 16);
    expect_fail(run("ragjit run %s --data %s --out %s/oh", prog, dh, tmpdir), 2, "2 lengths, but the offsets");
    float fl[3] = {2, 0, 3};
    write_npy(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", fl, sizeof fl);
    expect_fail(run("ragjit run %s --data %s --out %s/oh", prog, dh, tmpdir), 2, "lengths must be integers");
    int64_t neg[3] = {2, -1, 3};
    write_npy(p, "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", neg, sizeof neg);
    expect_fail(run("ragjit run %s --data %s --out %s/oh", prog, dh, tmpdir), 2, "lengths[1] is negative");
}

/* Issue 33, a newcomer from PyTorch: an input no output uses need not exist in --data (it is
 * warned about once, and neither it nor the symbols and sizes only it has are read); one value
 * output under two names writes both, equal, on every target; and shape errors found while
 * building are bad input (exit 2) with the hint that fixes them. */
static void test_from_pytorch(void **state) {
    (void)state;
    char prog[600], data[600], a[700], b[700];
    snprintf(prog, sizeof prog, "%s/newcomer.rj", tmpdir);
    snprintf(data, sizeof data, "%s/newcomer-data", tmpdir);
    write_file(prog, "ragged j1 : B\nragged j2 : B\ninput x : f32[B, j1, 4]\ninput v : f32[B, j2, E]\n"
                     "input ids : i64[B, j1]\nt = v.sum(1)\nz = x * 2.0\ny = z\nii = ids\n"
                     "output y, z, ii, ids\n");
    result *r = run("ragjit run %s --random B=3,maxlen=4,seed=1 --save-data %s --out %s/nc-cpu", prog, data, tmpdir);
    expect_ok(r);
    if (!strstr(r->err, "newcomer.rj:4:7: warning: input v is not used by any output (it needs no data)") ||
        count_lines(r->err) != 1)
        fail_msg("expected one warning about v, got:\n%s", r->err);
    static const char *const absent[] = {"v", "j2", "E"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(a, sizeof a, "%s/%s.npy", data, absent[i]);
        if (!access(a, F_OK)) fail_msg("%s was written, but no output needs it", a);
    }
    static const char *const targets[] = {"cpu", "reference", "opencl"};
    for (size_t t = 0; t < 3; t++) {
        r = run("ragjit run %s --data %s --out %s/nc-%s --target %s", prog, data, tmpdir, targets[t], targets[t]);
        if (t == 2 && r->status == 1 && strstr(r->err, "no OpenCL device")) break;
        expect_ok(r);
        static const char *const pairs[][2] = {{"y", "z"}, {"ii", "ids"}};
        for (size_t i = 0; i < 2; i++) {
            snprintf(a, sizeof a, "%s/nc-%s/%s.npy", tmpdir, targets[t], pairs[i][0]);
            snprintf(b, sizeof b, "%s/nc-%s/%s.npy", tmpdir, targets[t], pairs[i][1]);
            if (!files_equal(a, b)) fail_msg("%s: outputs %s and %s differ", targets[t], pairs[i][0], pairs[i][1]);
        }
        snprintf(a, sizeof a, "%s/nc-%s/ids.npy", tmpdir, targets[t]);
        snprintf(b, sizeof b, "%s/ids.npy", data);
        if (!files_equal(a, b)) fail_msg("%s: output ids is not input ids", targets[t]);
    }
    r = run("ragjit check %s --data %s --target opencl", prog, data);
    expect_ok_or_no_device(r);
    /* the mask meets x from the last dim: exit 2, and the fix in the message */
    write_file(prog, "ragged j1 : B\ninput x : f32[B, j1, D]\ninput mask : bool[B, j1]\n"
                     "y = x.masked_fill(~mask, 0.0)\noutput y\n");
    r = run("ragjit check %s --random B=8,maxlen=16", prog);
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->err, "write mask.unsqueeze(-1) (bool[B, j1, 1])"));
    write_file(prog, "ragged j1 : B\ninput x : f32[B, j1, D]\ninput mask : bool[B, j1]\n"
                     "y = x.masked_fill(~mask.unsqueeze(-1), 0.0)\noutput y\n");
    expect_ok(run("ragjit check %s --random B=8,maxlen=16,D=5", prog));
    write_file(prog, "ragged j1 : B\ninput x : f32[B, j1, 4]\ninput y : f32[B, j2, 4]\nz = x + y\noutput z\n");
    r = run("ragjit run %s --random B=2 --out %s/nc-bad", prog, tmpdir);
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->err, "declare `ragged j2 : B` before its first use"));
    /* an unused dense input that is there still gives its sizes (the pad length P), and an
     * unused input with two ragged dims asks for no offsets */
    snprintf(data, sizeof data, "%s/unused-data", tmpdir);
    snprintf(a, sizeof a, "mkdir -p %s", data);
    assert_int_equal(system(a), 0);
    static const int64_t off[3] = {0, 2, 3};
    static const float vals[24] = {0};
    snprintf(a, sizeof a, "%s/j1.npy", data);
    write_npy(a, "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", off, sizeof off);
    snprintf(a, sizeof a, "%s/x.npy", data);
    write_npy(a, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", vals, 12 * sizeof(float));
    snprintf(a, sizeof a, "%s/pd.npy", data);
    write_npy(a, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4), }", vals, 24 * sizeof(float));
    write_file(prog, "ragged j1 : B\ninput x : f32[B, j1, 4]\ninput pd : f32[B, P, 4]\n"
                     "u = pad(x, value=1.0, len=P)\noutput u\n");
    expect_ok(run("ragjit run %s --data %s --out %s/unused-out", prog, data, tmpdir));
    write_file(prog, "ragged j1 : B\ninput s : f32[B, j1, j1]\ninput pd : f32[B, P, 4]\n"
                     "u = pd.softmax(2)\noutput u\n");
    expect_ok(run("ragjit run %s --data %s --out %s/unused-out2", prog, data, tmpdir));
}

/* A product by a slice of a weight (W.narrow(0, s, n), W[:, a:b], a layer's S[i] of stacked weights) stays one BLAS call reading
 * the weight in place (with its row stride), where the BLAS computes the whole weight's product,
 * and agrees with the interpreter on the CPU. */
static void test_sliced_weight(void **state) {
    (void)state;
    char prog[600], whole[600];
    snprintf(prog, sizeof prog, "%s/sliced.rj", tmpdir);
    snprintf(whole, sizeof whole, "%s/whole.rj", tmpdir);
    write_file(whole, "ragged j1 : B\ninput x : f32[B, j1, 40]\ninput W : f32[64, 40]\ny = linear(x, W)\n"
                      "output y\n");
    write_file(prog, "ragged j1 : B\ninput x : f32[B, j1, 40]\ninput W : f32[64, 40]\ninput W2 : f32[40, 48]\n"
                     "input S : f32[3, 24, 40]\n"
                     "q, k = W.split(32)\ny = linear(x, k).relu()\nz = x @ W2[:, 8:24] + 1.0\n"
                     "u = linear(x[..., 4:20], W[10:22, 4:20])\nv = linear(x, S[2])\nv2 = linear(x, S[1, 4:12])\n"
                     "output y, z, u, v, v2\n");
    result *r = run("ragjit emit %s --stage loops", whole);
    expect_ok(r);
    bool lib = strstr(r->out, "template: gemm_lib") != NULL;
    r = run("ragjit emit %s --stage loops", prog);
    expect_ok(r);
    static const char *const says[] = {"(buffer 1 from element 1280, rows 40 apart)", "from element 8, rows 48 apart",
                                       "from element 404, rows 40 apart", "from element 1920, rows 40 apart",
                                       "from element 1120, rows 40 apart"};
    for (size_t i = 0; lib && i < sizeof says / sizeof says[0]; i++)
        if (!strstr(r->out, says[i])) fail_msg("the sliced weights' products do not say \"%s\":\n%s", says[i], r->out);
    if (!lib) printf("no BLAS here: the sliced weights' products are ragjit's own kernels\n");
    expect_ok(run("ragjit check %s --random B=5,maxlen=33,seed=4", prog));
    expect_ok(run("ragjit check %s --random B=5,maxlen=33,seed=4 --threads 2", prog));
}

/* Code ported from PyTorch that joins and re-lays out features: ragjit check agrees on the CPU
 * and OpenCL (when there is a device), and a cat of mismatched operands exits 2 naming them. */
static void test_cat_views(void **state) {
    (void)state;
    char prog[600];
    snprintf(prog, sizeof prog, "%s/catviews.rj", tmpdir);
    write_file(prog, "ragged j1 : B\ninput x : f32[B, j1, 384]\ninput h : f32[B, j1, 32]\ninput w : f32[16, 416]\n"
                     "q = x.unflatten(2, (12, 32)).permute(0, 1, 3, 2)\ns = torch.softmax(q, dim=1).flatten(2)\n"
                     "c = torch.cat([x, h], dim=-1)\ny = F.linear(c, w) ** 2 + torch.arange(16)\n"
                     "z = torch.stack([h, h * 2.0], dim=2).sum(1) - torch.full((2, 32), 0.5)\noutput s, y, z\n");
    expect_ok(run("ragjit check %s --random B=5,maxlen=9,seed=3", prog));
    expect_ok_or_no_device(run("ragjit check %s --random B=5,maxlen=9,seed=3 --target opencl", prog));
    write_file(prog, "ragged j1 : B\ninput x : f32[B, j1, 384]\ninput h : f32[B, 1, 32]\n"
                     "c = torch.cat([x, h], dim=-1)\noutput c\n");
    result *r = run("ragjit check %s --random B=2", prog);
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->err, "catviews.rj:4:11: cat: operand 2 f32[B, 1, 32] is dense where operand 1 "
                                   "f32[B, j1, 384] is jagged"));
}

/* ---- hostile programs and files --------------------------------------------------------------- */

/* Programs and data an embedding did not write: each is refused with status 2 and a message
 * naming what is wrong, never a crash, a hang or lost data. */
static void test_hostile_inputs(void **state) {
    (void)state;
    char prog[600], out[600];
    snprintf(prog, sizeof prog, "%s/clash.rj", tmpdir);
    snprintf(out, sizeof out, "%s/clash-out", tmpdir);
    /* an output named like a ragged symbol used to be overwritten by the symbol's offsets */
    write_file(prog, "ragged j1 : B\ninput x : f32[B, j1, 4]\nj1 = x * 2\noutput j1\n");
    result *r = run("ragjit run %s --random B=2,maxlen=3 --out %s", prog, out);
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->err, "clash.rj:3:1: the name 'j1' is already used by a ragged symbol"));
    write_file(prog, "ragged j1 : B\ninput j1 : f32[B, 4]\ny = j1 * 2\noutput y\n");
    r = run("ragjit run %s --random B=2,maxlen=3 --out %s", prog, out);
    assert_int_equal(r->status, 2);
    assert_non_null(strstr(r->err, "clash.rj:2:7: the name 'j1' is already used by a ragged symbol"));
    /* the interpreter with a `same` class whose first symbol no input uses */
    write_file(prog, "ragged j1 : B\nragged j2 : B\nsame j1 j2\ninput x : f32[B, j2, 4]\n"
                     "y = x * 2\noutput y\n");
    expect_ok(run("ragjit check %s --random B=3,maxlen=4", prog));
    expect_ok(run("ragjit run %s --random B=3,maxlen=4 --target reference --out %s", prog, out));
    /* programs are regular files of at most 16 MiB: a FIFO blocked, /dev/zero never ended */
    char fifo[600];
    snprintf(fifo, sizeof fifo, "%s/fifo.rj", tmpdir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    expect_fail(run("ragjit emit %s --stage graph", fifo), 2, "fifo.rj: not a regular file (a FIFO)");
    expect_fail(run("ragjit emit /dev/zero --stage graph"), 2, "/dev/zero: not a regular file (a device)");
    expect_fail(run("ragjit emit %s --stage graph", tmpdir), 2, "not a regular file (a directory)");
    snprintf(prog, sizeof prog, "%s/big.rj", tmpdir);
    FILE *f = fopen(prog, "w");
    assert_non_null(f);
    for (int i = 0; i < (16 << 20) / 64 + 1; i++)
        fputs("# a comment line, sixty-four bytes long with its newline ......\n", f);
    fclose(f);
    expect_fail(run("ragjit emit %s --stage graph", prog), 2,
                "big.rj: 16777280 bytes is more than a program may have (16 MiB)");
    /* data files too, read and written: a FIFO in the data or output directory */
    const char *S = "examples/softmax.rj";
    char d[600], p[700];
    snprintf(d, sizeof d, "%s/fifo-data", tmpdir);
    expect_ok(run("ragjit run %s --random B=2,maxlen=3 --save-data %s --out %s", S, d, out));
    snprintf(p, sizeof p, "%s/x.npy", d);
    remove(p);
    assert_int_equal(mkfifo(p, 0600), 0);
    expect_fail(run("ragjit run %s --data %s --out %s", S, d, out), 2, "x.npy: cannot read: not a regular file");
    snprintf(p, sizeof p, "%s/s.npy", out);
    remove(p);
    assert_int_equal(mkfifo(p, 0600), 0);
    expect_fail(run("ragjit run %s --random B=2 --out %s", S, out), 2, "s.npy: cannot write: not a regular file");
    remove(p);
    /* a negative size in the data directory */
    snprintf(prog, sizeof prog, "%s/padlen.rj", tmpdir);
    write_file(prog, "ragged j : B\ninput x : f32[B, j, 2]\ny = pad(x, len=L)\noutput y\n");
    snprintf(d, sizeof d, "%s/size-data", tmpdir);
    expect_ok(run("ragjit run %s --random B=2,maxlen=3,L=3 --save-data %s --out %s", prog, d, out));
    snprintf(p, sizeof p, "%s/L.npy", d);
    int64_t neg = -3;
    write_npy(p, "{'descr': '<i8', 'fortran_order': False, 'shape': (), }", &neg, sizeof neg);
    expect_fail(run("ragjit run %s --data %s --out %s", prog, d, out), 2, "L.npy: size L is negative (-3)");
    /* --random: sizes whose data would not fit are refused before anything is allocated */
    expect_fail(run("ragjit run %s --random B=4294967296 --out %s", S, out), 2,
                "--random: B=4294967296 would take the generated data over 2 GiB");
    expect_fail(run("ragjit run %s --random B=100000000,maxlen=100 --out %s", S, out), 2,
                "--random: input x would take the generated data over 2 GiB");
    expect_fail(run("ragjit run %s --random B=4,maxlen=9223372036854775807 --out %s", S, out), 2,
                "--random: the row count overflows");
    /* RAGJIT_DUMP skips what is not a regular file (a FIFO blocked the compile) */
    char dump[600];
    snprintf(dump, sizeof dump, "%s/dump", tmpdir);
    assert_int_equal(mkdir(dump, 0700), 0);
    snprintf(p, sizeof p, "%s/0001-s.graph.rj", dump);
    assert_int_equal(mkfifo(p, 0600), 0);
    setenv("RAGJIT_DUMP", dump, 1);
    r = run("ragjit run %s --random B=2 --out %s", S, out);
    unsetenv("RAGJIT_DUMP");
    expect_ok(r);
    assert_non_null(strstr(r->err, "RAGJIT_DUMP: "));
    assert_non_null(strstr(r->err, "0001-s.graph.rj: cannot write: not a regular file"));
    /* a size name is never cut to fit (a cut name could be another size's) */
    char longname[200];
    memset(longname, 'D', 130);
    longname[130] = 0;
    expect_fail(run("ragjit run %s --random B=2 --size %s=3 --out %s", S, longname, out), 2,
                "--size: the name in 'DDDD");
}

/* ---- golden dumps ---------------------------------------------------------------------------- */

/* The golden dumps (tests/golden): every example's graph stages and, for each target, its
 * loop IR and generated source, so that a change to lowering or an emitter shows exactly what
 * it changed in generated code (RAGJIT_UPDATE_GOLDEN=1 rewrites them; review with git diff).
 * The CPU's loop IR is kept with a library GEMM (a BLAS's or ragjit's own sgemm: the GEMM's
 * epilogue kernels), and with products as JIT loops (RAGJIT_BLAS=loops, noblas.loops). */
typedef struct golden_stage {
    const char *stage, *target, *suffix;
    bool no_blas;
} golden_stage;

static char *read_whole(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *s = malloc(cap);
    for (size_t got; s && (got = fread(s + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (n + 1 == cap) s = realloc(s, cap *= 2);
    }
    fclose(f);
    if (s) s[n] = 0;
    return s;
}

static void test_golden(void **state) {
    (void)state;
    static const char *const names[] = {"elementwise", "softmax", "masked_softmax", "layernorm_gelu", "reductions",
                                        "pad_unpad", "attention_scores", "embedding_bag", "linear_gelu", "nll"};
    static const golden_stage stages[] = {
        {"graph", "cpu", "graph", false},         {"opt", "cpu", "opt", false},
        {"dot", "cpu", "dot", false},             {"loops", "cpu", "loops", false},
        {"loops", "cpu", "noblas.loops", true},   {"loops", "cuda", "cuda.loops", false},
        {"loops", "opencl", "opencl.loops", false}, {"cuda", "cuda", "cu", false},
        {"opencl", "opencl", "cl", false},
    };
    bool update = getenv("RAGJIT_UPDATE_GOLDEN") && *getenv("RAGJIT_UPDATE_GOLDEN");
    int checked = 0;
    /* the loops dumps fold eight rows a step whatever this machine's processor prefers
     * (target_desc.row_streams), so the files are the same on every machine */
    setenv("RAGJIT_ROW_STREAMS", "8", 1);
    /* a library GEMM serves by default (a BLAS, else ragjit's own sgemm); were products JIT
     * loops by default all the same, the default CPU dumps are the loops ones, checked as such */
    static char with[sizeof ((result *)0)->out];
    snprintf(with, sizeof with, "%s", run("ragjit emit examples/linear_gelu.rj --stage loops")->out);
    setenv("RAGJIT_BLAS", "loops", 1);
    bool blas = strcmp(with, run("ragjit emit examples/linear_gelu.rj --stage loops")->out) != 0;
    unsetenv("RAGJIT_BLAS");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        for (size_t s = 0; s < sizeof stages / sizeof stages[0]; s++) {
            const golden_stage *gs = &stages[s];
            if (gs->no_blas) setenv("RAGJIT_BLAS", "loops", 1);
            result *r = run("ragjit emit examples/%s.rj --stage %s --target %s", names[i], gs->stage, gs->target);
            unsetenv("RAGJIT_BLAS");
            expect_ok(r);
            char path[512];
            snprintf(path, sizeof path, "tests/golden/%s.%s", names[i], gs->suffix);
            if (update) {
                FILE *f = fopen(path, "w");
                assert_non_null(f);
                fputs(r->out, f);
                fclose(f);
                continue;
            }
            if (!blas && !strcmp(gs->suffix, "loops")) continue;
            char *want = read_whole(path);
            if (!want) fail_msg("%s is missing (RAGJIT_UPDATE_GOLDEN=1 meson test -C build cli)", path);
            if (strcmp(want, r->out))
                fail_msg("%s differs from the output of 'ragjit emit examples/%s.rj --stage %s --target %s':\n%s",
                         path, names[i], gs->stage, gs->target, r->out);
            free(want);
            checked++;
        }
    unsetenv("RAGJIT_ROW_STREAMS");
    if (update) printf("golden files rewritten; review them with git diff\n");
    else printf("%d golden dumps match%s\n", checked, blas ? "" : " (products are JIT loops here: the CPU's with a library GEMM skipped)");
}

static int setup(void **state) {
    (void)state;
    ragjit = getenv("RAGJIT");
    if (!ragjit) {
        fprintf(stderr, "test_cli: set RAGJIT to the ragjit binary\n");
        return -1;
    }
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ragjit-cli-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help_examples),   cmocka_unit_test(test_version_blas), cmocka_unit_test(test_examples_check),
        cmocka_unit_test(test_run_check_roundtrip), cmocka_unit_test(test_emit_stages),
        cmocka_unit_test(test_usage_errors),    cmocka_unit_test(test_run_failures),
        cmocka_unit_test(test_bad_data),        cmocka_unit_test(test_golden),
        cmocka_unit_test(test_vector_widths), cmocka_unit_test(test_pass_pipeline),   cmocka_unit_test(test_hostile_inputs),
        cmocka_unit_test(test_data_lengths), cmocka_unit_test(test_from_pytorch), cmocka_unit_test(test_sliced_weight),
        cmocka_unit_test(test_cat_views),       cmocka_unit_test(test_run_time),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
