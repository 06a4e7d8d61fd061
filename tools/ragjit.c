/*
 * ragjit.c — the `ragjit` command: run, check, emit and bench programs written in the text
 * format, on NumPy .npy data or on random data it generates itself.
 *
 * Data layout (a contract, see docs/guide.md): for every input `x`, DIR/x.npy holds its
 * values — a jagged input's packed rows with shape (total_rows, inner...), a dense input its
 * full shape; for every ragged symbol `j1`, DIR/j1.npy holds its int64 offsets (B+1), and
 * DIR/j1.lengths.npy, if present, its lengths (B): j1 is then bound as a view with holes. A
 * dense size that no input determines (a pad length L, say) is read from DIR/L.npy, a 0-d
 * integer. Outputs are written the same way, always packed: a jagged output over a view with
 * holes is written as its items' rows one after the other, with packed offsets.
 *
 * Exit status: 0 success; 1 a compile, run or check failure; 2 bad usage or bad input. Every
 * failure prints one line to stderr saying what is wrong (a syntax error adds the source line
 * and a caret under it).
 *
 * It uses ragjit.h and nothing else (it links the shared library, which exports only the rj_
 * API): whatever a command needs to learn about a program, an embedder can learn the same
 * way, and a gap in the public API shows up here first.
 *
 * Programs and data may come from anywhere, so everything read is bounded: a program is a
 * regular file of at most PROGRAM_MAX_BYTES (a FIFO or a device is refused before it can
 * block or stream forever; .npy files get the same treatment in rj_npy_read), and --random
 * counts every array it would generate against RANDOM_MAX_BYTES, with arithmetic that cannot
 * overflow, before it allocates any of them.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ragjit.h"

enum { EXIT_RUN = 1, EXIT_USAGE = 2 };

/* Limits on what the command reads and makes, so that a mistaken or hostile argument is a
 * usage error instead of an endless read or an allocation the machine cannot satisfy. */
#define PROGRAM_MAX_BYTES ((int64_t)16 << 20) /* a program file */
#define RANDOM_MAX_BYTES ((int64_t)2 << 30)   /* all the data --random generates */

/* ---- messages ------------------------------------------------------------------------------ */

#if defined(__GNUC__)
#define CLI_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define CLI_PRINTF(f, a)
#endif

/* Prints "ragjit: <message>" on stderr and returns the exit status. */
static int die(int status, const char *fmt, ...) CLI_PRINTF(2, 3);
static int die(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("ragjit: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return status;
}

#define die_usage(...) die(EXIT_USAGE, __VA_ARGS__)
#define die_run(...) die(EXIT_RUN, __VA_ARGS__)

static const char main_help[] =
    "ragjit - a JIT compiler for ragged (jagged) tensor expressions\n"
    "\n"
    "usage: ragjit <command> PROGRAM [options]\n"
    "\n"
    "commands:\n"
    "  run     run PROGRAM on .npy data (or random data) and write its outputs as .npy files\n"
    "  check   run PROGRAM with the JIT and the reference interpreter and compare the outputs\n"
    "  emit    print one stage of the compilation (graph, opt, fused, loops, llvm, llvm-opt, asm,\n"
    "          cuda, ptx, opencl, dot)\n"
    "  bench   time PROGRAM: median run time and GB/s\n"
    "\n"
    "PROGRAM is a file in ragjit's text format (at most 16 MiB), for example\n"
    "(examples/softmax.rj):\n"
    "  ragged j1 : B\n"
    "  input x : f32[B, j1, 64]\n"
    "  s = softmax(relu(x * 2.0 + 0.5), dim=1)\n"
    "  output s\n"
    "\n"
    "examples (from the source directory):\n"
    "  ragjit run examples/softmax.rj --random B=8,maxlen=16,seed=1 --out /tmp/ragjit-out\n"
    "  ragjit check examples/layernorm_gelu.rj --random B=4,maxlen=32,seed=2\n"
    "  ragjit emit examples/pad_unpad.rj --stage opt\n"
    "  ragjit bench examples/elementwise.rj --random B=64,maxlen=256,seed=3 --reps 5\n"
    "\n"
    "'ragjit <command> --help' describes a command's options; docs/guide.md is the manual.\n"
    "Exit status: 0 ok, 1 compile/run/check failure, 2 bad usage or bad input.\n";

static const char data_help[] =
    "data (one of):\n"
    "  --data DIR          read DIR/<input>.npy for every input and DIR/<sym>.npy (int64\n"
    "                      offsets, length B+1) for every ragged symbol; a jagged input's file\n"
    "                      holds its packed rows, shape (total_rows, inner...), so dim k >= 2 of\n"
    "                      the tensor is axis k-1 of the file; a size no input determines (a pad\n"
    "                      length) is read from DIR/<size>.npy (0-d integer); a symbol with a\n"
    "                      DIR/<sym>.lengths.npy (int64, B entries) is a view with holes: item b\n"
    "                      is rows offsets[b] .. offsets[b]+lengths[b] of its tensors' files; an\n"
    "                      input no output uses (and a symbol only it uses) need not be there\n"
    "                      (a dense one that is there still gives its sizes)\n"
    "  --random SPEC       generate data: SPEC is comma-separated NAME=VALUE pairs: B (items,\n"
    "                      required), maxlen and minlen (rows per item, uniform in minlen..maxlen;\n"
    "                      default 0..16), seed (default 1), and any named size of the program\n"
    "                      (D=64, L=128; a name the program lacks is ignored with a note); at\n"
    "                      most 2 GiB in all. Values: floats uniform in [-1, 1), integers in\n"
    "                      [-10, 10], bools half true; an index op's indices in range\n"
    "  --size NAME=VALUE   a named size of the program (repeatable)\n"
    "  --save-data DIR     also write the data used (generated or read) to DIR, so that\n"
    "                      'ragjit run PROG --data DIR' reproduces the run\n";

static const char run_help[] =
    "usage: ragjit run PROGRAM (--data DIR | --random SPEC) --out DIR [options]\n"
    "\n"
    "Runs PROGRAM and writes OUT/<output>.npy for every output, and OUT/<sym>.npy (offsets)\n"
    "for every ragged symbol an output uses. A padded output holds its dense (B, L, ...) shape.\n"
    "Outputs over a view with holes are written packed (without the holes), with packed offsets.\n"
    "\n"
    "options:\n"
    "  --out DIR           where to write the outputs (created if missing)\n"
    "  --target T          cpu (default), cuda, opencl, or reference (the interpreter)\n"
    "  --threads N         CPU worker threads (default: the processors this process may use)\n"
    "  --time              print compile, bind and run times to stderr (the run's CPU time, all\n"
    "                      threads, and page faults too); with --reps N, also run N more times\n"
    "                      and print their median and the first run's time over it\n"
    "  --print             also print the outputs, item by item (abridged)\n"
    "%s"
    "\n"
    "examples:\n"
    "  ragjit run examples/softmax.rj --random B=8,maxlen=16,seed=1 --out /tmp/ragjit-out\n"
    "  ragjit run examples/masked_softmax.rj --random B=3,maxlen=4,seed=1 --out /tmp/ragjit-out --print --time\n"
    "  ragjit run examples/reductions.rj --random B=4,maxlen=8,seed=7 --save-data /tmp/ragjit-in --out /tmp/ragjit-out\n"
    "  ragjit run examples/reductions.rj --data /tmp/ragjit-in --out /tmp/ragjit-out2\n";

static const char check_help[] =
    "usage: ragjit check PROGRAM (--data DIR | --random SPEC) [options]\n"
    "\n"
    "Runs PROGRAM with the JIT and with the reference interpreter on the same data and reports\n"
    "the largest error of every output. Exit status 1 if any element differs by more than\n"
    "atol + rtol * |ref| of its own reference value (f32: atol 2e-5, rtol 1e-4; f64: 1e-12,\n"
    "1e-10; NaN must meet NaN, an infinity the same infinity; integers and bools must be equal).\n"
    "\n"
    "options:\n"
    "  --target T          cpu (default), cuda or opencl\n"
    "  --threads N         CPU worker threads (default: the processors this process may use)\n"
    "  --atol A, --rtol R  tolerances for floating-point outputs\n"
    "%s"
    "\n"
    "examples:\n"
    "  ragjit check examples/layernorm_gelu.rj --random B=4,maxlen=32,seed=2\n"
    "  ragjit check examples/masked_softmax.rj --random B=16,maxlen=64,seed=5 --threads 1\n";

static const char emit_help[] =
    "usage: ragjit emit PROGRAM --stage STAGE [--target T]\n"
    "\n"
    "Prints one stage of the compilation of PROGRAM:\n"
    "  graph      the program as parsed, in the text format, with every node's type\n"
    "  opt        the program after canonicalisation and pad/unpad elimination\n"
    "  fused      the kernels fusion chose, and what each computes\n"
    "  loops      the loop IR of every kernel, lowered for the target: parallel mapping of\n"
    "             each loop, reductions, local arrays, barriers, launch shapes\n"
    "  llvm       LLVM IR before optimisation\n"
    "  llvm-opt   LLVM IR after optimisation (vectorised)\n"
    "  asm        host assembly\n"
    "  cuda       CUDA C source\n"
    "  ptx        PTX compiled by NVRTC\n"
    "  opencl     OpenCL C 1.2 source (the same kernels as cuda)\n"
    "  dot        a Graphviz picture: shapes on edges, kernels as clusters\n"
    "\n"
    "options:\n"
    "  --target T          cpu (default), cuda, opencl, or reference: the target whose lowering\n"
    "                      the loops stage shows (llvm, llvm-opt and asm are always the CPU's,\n"
    "                      cuda and ptx CUDA's, opencl OpenCL's); no device is needed\n"
    "\n"
    "examples:\n"
    "  ragjit emit examples/pad_unpad.rj --stage opt\n"
    "  ragjit emit examples/softmax.rj --stage loops\n"
    "  ragjit emit examples/softmax.rj --stage loops --target cuda\n"
    "  ragjit emit examples/softmax.rj --stage opencl\n"
    "  ragjit emit examples/reductions.rj --stage dot\n";

static const char bench_help[] =
    "usage: ragjit bench PROGRAM (--data DIR | --random SPEC) [options]\n"
    "\n"
    "Compiles PROGRAM, runs it --reps times after a warm-up run, and prints the median time and\n"
    "the throughput: bytes of every input read once plus every output written once, per second.\n"
    "\n"
    "options:\n"
    "  --reps N            timed runs (default 20)\n"
    "  --target T          cpu (default), cuda, opencl, or reference\n"
    "  --threads N         CPU worker threads (default: the processors this process may use)\n"
    "  --ab VAR=VALUE      also compile PROGRAM in a second context created with VAR=VALUE in\n"
    "                      the environment (B; the first is A), the persistent cache off for\n"
    "                      both and after a throwaway compile (so both compile times are a warm\n"
    "                      process's), and alternate their runs (A B, B A, ...), B writing\n"
    "                      into A's outputs: prints each one's compile time and median run,\n"
    "                      the median over the pairs of B's time over A's, and whether B's\n"
    "                      results equal A's bit for bit. Pairs run milliseconds apart, so the\n"
    "                      machine's drift hits both alike: the way to measure a change of a\n"
    "                      few percent. VAR must be a setting read when a context compiles\n"
    "                      (RAGJIT_LLVM_LIGHT, RAGJIT_LLVM_PASSES, ...), not one read once per\n"
    "                      process (RAGJIT_LLVM_ARGS)\n"
    "%s"
    "\n"
    "examples:\n"
    "  ragjit bench examples/elementwise.rj --random B=64,maxlen=256,seed=3 --reps 5\n"
    "  ragjit bench examples/softmax.rj --random B=64,maxlen=256 --reps 50 --ab RAGJIT_LLVM_LIGHT=0\n";

/* ---- options --------------------------------------------------------------------------------- */

typedef struct sizeopt {
    char name[128]; /* as long as any name of a program */
    int64_t value;
} sizeopt;

typedef struct opts {
    const char *cmd, *prog, *data, *random, *out, *save, *stage, *ab;
    rj_target target;
    int threads, reps;
    bool time, print, reps_set;
    double atol, rtol;
    sizeopt sizes[32];
    int nsizes;
} opts;

static int parse_int(const char *s, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end) return -1;
    *out = v;
    return 0;
}

static int add_size(opts *o, const char *spec, const char *what) {
    const char *eq = strchr(spec, '=');
    int64_t v;
    if (!eq || eq == spec || parse_int(eq + 1, &v) || v < 0)
        return die_usage("%s: '%s' is not NAME=VALUE with a non-negative integer VALUE", what, spec);
    /* a longer name cut to fit could match another size */
    if (eq - spec >= (ptrdiff_t)sizeof o->sizes[0].name)
        return die_usage("%s: the name in '%.40s...' is too long", what, spec);
    if (o->nsizes == 32) return die_usage("%s: too many sizes", what);
    sizeopt *z = &o->sizes[o->nsizes++];
    snprintf(z->name, sizeof z->name, "%.*s", (int)(eq - spec), spec);
    z->value = v;
    return 0;
}

static int parse_opts(int argc, char **argv, opts *o) {
    *o = (opts){.cmd = argv[1], .target = RJ_TARGET_CPU, .reps = 20, .atol = -1, .rtol = -1};
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        char key[64];
        if (a[0] != '-' || !a[1]) {
            if (o->prog) return die_usage("%s: unexpected argument '%s' (one PROGRAM only)", o->cmd, a);
            o->prog = a;
            continue;
        }
        const char *eq = strchr(a, '=');
        if (eq && !strncmp(a, "--", 2)) {
            snprintf(key, sizeof key, "%.*s", (int)(eq - a), a);
            val = eq + 1;
        } else {
            snprintf(key, sizeof key, "%s", a);
        }
        static const char *const flags[] = {"--time", "--print", "--help", "-h"};
        static const char *const valued[] = {"--data", "--random", "--out", "--save-data", "--stage",
                                             "--size", "--target", "--threads", "--reps", "--atol", "--rtol",
                                             "--ab"};
        bool is_flag = false, known = false;
        for (size_t f = 0; f < sizeof flags / sizeof flags[0]; f++) is_flag |= !strcmp(key, flags[f]);
        for (size_t f = 0; f < sizeof valued / sizeof valued[0]; f++) known |= !strcmp(key, valued[f]);
        if (!is_flag && !known)
            return die_usage("%s: unknown option '%s' (see 'ragjit %s --help')", o->cmd, key, o->cmd);
        if (!is_flag && !val) {
            if (i + 1 >= argc) return die_usage("%s: option %s needs a value", o->cmd, key);
            val = argv[++i];
        }
        int64_t n;
        if (!strcmp(key, "--data")) o->data = val;
        else if (!strcmp(key, "--random")) o->random = val;
        else if (!strcmp(key, "--out")) o->out = val;
        else if (!strcmp(key, "--save-data")) o->save = val;
        else if (!strcmp(key, "--stage")) o->stage = val;
        else if (!strcmp(key, "--ab")) {
            const char *ve = strchr(val, '=');
            if (strcmp(o->cmd, "bench")) return die_usage("%s: --ab is an option of bench", o->cmd);
            if (!ve || ve == val || ve - val > 63) return die_usage("%s: --ab takes VAR=VALUE, got '%s'", o->cmd, val);
            o->ab = val;
        } else if (!strcmp(key, "--time")) o->time = true;
        else if (!strcmp(key, "--print")) o->print = true;
        else if (!strcmp(key, "--size")) {
            if (add_size(o, val, "--size")) return EXIT_USAGE;
        } else if (!strcmp(key, "--target")) {
            if (!strcmp(val, "cpu")) o->target = RJ_TARGET_CPU;
            else if (!strcmp(val, "cuda")) o->target = RJ_TARGET_CUDA;
            else if (!strcmp(val, "opencl")) o->target = RJ_TARGET_OPENCL;
            else if (!strcmp(val, "reference")) o->target = RJ_TARGET_REFERENCE;
            else return die_usage("%s: unknown target '%s' (cpu, cuda, opencl, reference)", o->cmd, val);
        } else if (!strcmp(key, "--threads")) {
            if (parse_int(val, &n) || n < 1 || n > 4096)
                return die_usage("%s: --threads must be an integer in 1..4096, got '%s'", o->cmd, val);
            o->threads = (int)n;
        } else if (!strcmp(key, "--reps")) {
            if (parse_int(val, &n) || n < 1 || n > 1000000)
                return die_usage("%s: --reps must be a positive integer, got '%s'", o->cmd, val);
            o->reps = (int)n;
            o->reps_set = true;
        } else if (!strcmp(key, "--atol") || !strcmp(key, "--rtol")) {
            char *end;
            double d = strtod(val, &end);
            if (end == val || *end || !(d >= 0))
                return die_usage("%s: %s must be a non-negative number, got '%s'", o->cmd, key, val);
            if (key[2] == 'a') o->atol = d;
            else o->rtol = d;
        } else {
            return die_usage("%s: unknown option '%s' (see 'ragjit %s --help')", o->cmd, key, o->cmd);
        }
    }
    return 0;
}

/* ---- programs -------------------------------------------------------------------------------- */

/* Reads a program: a regular file (fstat on the opened file, so what is checked is what is
 * read; a FIFO or a device would block or never end) of at most PROGRAM_MAX_BYTES. Opening
 * does not block either: O_NONBLOCK matters only for what is refused right after. */
static char *read_file(const char *path, int *status) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        *status = die_usage("%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    char *buf = NULL;
    size_t n = 0;
    if (fstat(fd, &st)) {
        *status = die_usage("%s: cannot stat: %s", path, strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        *status = die_usage("%s: not a regular file (%s)", path,
                            S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO"
                            : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" : "a socket");
    } else if (st.st_size > PROGRAM_MAX_BYTES) {
        *status = die_usage("%s: %lld bytes is more than a program may have (%lld MiB)", path,
                            (long long)st.st_size, (long long)(PROGRAM_MAX_BYTES >> 20));
    } else if (!(buf = malloc((size_t)st.st_size + 2))) {
        *status = die_run("out of memory");
    } else {
        /* one byte more than fstat said, to notice a file that grew in between */
        size_t cap = (size_t)st.st_size + 1;
        bool bad = false;
        while (n < cap) {
            ssize_t k = read(fd, buf + n, cap - n);
            if (k < 0 && errno == EINTR) continue;
            if (k < 0) *status = die_usage("%s: cannot read: %s", path, strerror(errno));
            if (k <= 0) {
                bad = k < 0;
                break;
            }
            n += (size_t)k;
        }
        if (n == cap) *status = die_usage("%s: the file changed while it was read", path);
        if (bad || n == cap) {
            free(buf);
            buf = NULL;
        }
    }
    close(fd);
    if (buf && memchr(buf, 0, n)) {
        free(buf);
        *status = die_usage("%s: not a text file (contains a NUL byte)", path);
        return NULL;
    }
    if (buf) buf[n] = 0;
    return buf;
}

static rj_graph *load_program(rj_ctx *ctx, const char *path, int *status) {
    char *src = read_file(path, status);
    if (!src) return NULL;
    rj_graph *g = rj_graph_parse(ctx, src, path);
    free(src);
    if (!g) {
        fprintf(stderr, "%s\n", rj_ctx_error(ctx));
        *status = EXIT_USAGE;
    } else if (rj_graph_warnings(g)) {
        fputs(rj_graph_warnings(g), stderr);
    }
    return g;
}

/* ---- data ------------------------------------------------------------------------------------- */

/* The per-symbol arrays below are indexed by the symbol's number (rj_graph_dim_at), which
 * these helpers translate to and from dims. */
static rj_dim_info dim_info(const rj_graph *g, rj_dim d) {
    rj_dim_info i = {.kind = RJ_DIM_CONST, .parent = RJ_DIM_NONE, .same = d};
    rj_dim_get_info(g, d, &i);
    return i;
}

static int sym_index(const rj_graph *g, rj_dim d) {
    for (int s = 0; s < rj_graph_dim_count(g); s++)
        if (rj_graph_dim_at(g, s) == d) return s;
    return -1;
}

static const char *sym_name(const rj_graph *g, int s) {
    return rj_dim_name(g, rj_graph_dim_at(g, s));
}

static rj_dim_info sym_info(const rj_graph *g, int s) {
    return dim_info(g, rj_graph_dim_at(g, s));
}

static bool is_pair_shape(const rj_graph *g, int rank, const rj_dim *dims);

/* Index of the ragged dim in a shape, or -1. */
static int ragged_pos(const rj_graph *g, int rank, const rj_dim *dims) {
    for (int k = 0; k < rank; k++)
        if (dim_info(g, dims[k]).kind == RJ_DIM_RAGGED) return k;
    return -1;
}

/* A tensor's description; all zero for NULL (no data loaded), which reads as empty. */
static rj_tensor_info tinfo(const rj_tensor *t) {
    rj_tensor_info i;
    memset(&i, 0, sizeof i);
    if (t) rj_tensor_get_info(t, &i);
    return i;
}

/* Everything bound for one run: arrays per input, offsets per symbol, values per size. */
typedef struct dataset {
    rj_ctx *ctx;
    const rj_graph *g;
    int nin, nsym;
    rj_tensor **in;        /* per input */
    rj_tensor **off;       /* per symbol (ragged): int64 offsets */
    rj_tensor **len;       /* per symbol (ragged): int64 lengths of a view with holes, or NULL */
    int64_t *size;         /* per symbol (dense): value, or -1 */
    char **size_src;       /* per symbol: where the size came from, for messages (a copy: it is
                            * often a path that is freed before the message needs it) */
} dataset;

static void dataset_free(dataset *d) {
    for (int i = 0; d->in && i < d->nin; i++) rj_tensor_free(d->in[i]);
    for (int s = 0; d->off && s < d->nsym; s++) rj_tensor_free(d->off[s]);
    for (int s = 0; d->len && s < d->nsym; s++) rj_tensor_free(d->len[s]);
    for (int s = 0; d->size_src && s < d->nsym; s++) free(d->size_src[s]);
    free(d->in), free(d->off), free(d->len), free(d->size), free(d->size_src);
}

static int dataset_init(dataset *d, rj_ctx *ctx, const rj_graph *g) {
    *d = (dataset){.ctx = ctx, .g = g, .nin = rj_graph_input_count(g),
                   .nsym = rj_graph_dim_count(g)};
    size_t ni = (size_t)(d->nin ? d->nin : 1), ns = (size_t)(d->nsym ? d->nsym : 1);
    d->in = calloc(ni, sizeof(rj_tensor *));
    d->off = calloc(ns, sizeof(rj_tensor *));
    d->len = calloc(ns, sizeof(rj_tensor *));
    d->size = malloc(ns * sizeof(int64_t));
    d->size_src = calloc(ns, sizeof(char *));
    if (!d->in || !d->off || !d->len || !d->size || !d->size_src) return die_run("out of memory");
    for (size_t s = 0; s < ns; s++) d->size[s] = -1;
    return 0;
}

/* Records size s as v, learned from src. */
static int learn_size(dataset *d, int s, int64_t v, const char *src) {
    char *copy = strdup(src);
    if (!copy) return die_run("out of memory");
    free(d->size_src[s]);
    d->size_src[s] = copy;
    d->size[s] = v;
    return 0;
}

/* Sets a dense size, which must agree with any earlier value. */
static int set_size(dataset *d, int s, int64_t v, const char *src) {
    if (d->size[s] >= 0 && d->size[s] != v)
        return die_usage("%s: %s is %lld here but %lld in %s", src, sym_name(d->g, s), (long long)v,
                         (long long)d->size[s], d->size_src[s]);
    return learn_size(d, s, v, src);
}

static int apply_size_opts(dataset *d, const opts *o) {
    for (int i = 0; i < o->nsizes; i++) {
        rj_dim dm = rj_graph_find_dim(d->g, o->sizes[i].name);
        if (dm == RJ_DIM_NONE) return die_usage("--size: the program has no size named '%s'", o->sizes[i].name);
        rj_dim_info di = dim_info(d->g, dm);
        if (di.kind != RJ_DIM_DENSE)
            return die_usage("--size: %s is a ragged symbol, not a dense size", di.name);
        if (set_size(d, sym_index(d->g, dm), o->sizes[i].value, "--size")) return EXIT_USAGE;
    }
    return 0;
}

/* Checks an input's array against its declared type, learning dense sizes. */
static int check_input_shape(dataset *d, int k, const char *file) {
    const rj_graph *g = d->g;
    rj_node n = rj_graph_input_at(g, k);
    const char *name = rj_graph_input_name(g, k);
    rj_dtype dtype = rj_node_dtype(g, n);
    rj_dim dims[RJ_MAX_RANK];
    int rank = rj_node_shape(g, n, dims);
    rj_tensor_info a = tinfo(d->in[k]);
    int rp = ragged_pos(g, rank, dims), skip = is_pair_shape(g, rank, dims) ? 2 : 1; /* ragged dims */
    if (a.dtype != dtype)
        return die_usage("%s: dtype %s but input %s is declared %s", file, rj_dtype_name(a.dtype),
                         name, rj_dtype_name(dtype));
    int want = rp >= 0 ? rank - skip : rank;
    if (a.rank != want)
        return die_usage("%s: %d dims but input %s needs %d (%s)", file, a.rank, name, want,
                         rp >= 0 ? "packed rows, then the inner dims" : "its full shape");
    for (int ad = 0; ad < a.rank; ad++) {
        int nd = rp >= 0 ? (ad == 0 ? rp : ad + skip) : ad;
        if (rp >= 0 && ad == 0) continue; /* the rows: checked against the offsets */
        rj_dim dm = dims[nd];
        if (dm >= 0) {
            if (a.shape[ad] != dm)
                return die_usage("%s: dim %d is %lld but input %s has %lld there", file, ad,
                                 (long long)a.shape[ad], name, (long long)dm);
        } else if (dim_info(g, dm).kind == RJ_DIM_DENSE) {
            if (set_size(d, sym_index(g, dm), a.shape[ad], file)) return EXIT_USAGE;
        }
    }
    return 0;
}

static char *path_join(const char *dir, const char *name, const char *ext) {
    size_t n = strlen(dir) + strlen(name) + strlen(ext) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s%s", dir, name, ext);
    return p;
}

/* An int32 array widened to int64 in place of *t (int32 offsets and lengths are accepted). */
static int widen_i32(dataset *d, rj_tensor **t) {
    rj_tensor_info a = tinfo(*t);
    if (a.dtype != RJ_I32) return 0;
    rj_tensor *wide = rj_tensor_dense(d->ctx, RJ_I64, 1, a.shape, NULL);
    if (!wide) return die_run("out of memory");
    int64_t *w = tinfo(wide).values;
    for (int64_t i = 0; i < a.shape[0]; i++) w[i] = ((int32_t *)a.values)[i];
    rj_tensor_free(*t);
    *t = wide;
    return 0;
}

static int check_offsets(dataset *d, int s, const char *file) {
    rj_tensor_info a = tinfo(d->off[s]);
    if (a.rank != 1)
        return die_usage("%s: offsets must be 1-d (B+1 entries), found %d dims", file, a.rank);
    if (widen_i32(d, &d->off[s])) return EXIT_RUN;
    a = tinfo(d->off[s]);
    if (a.dtype != RJ_I64)
        return die_usage("%s: offsets must be integers ('<i8'), found %s", file, rj_dtype_name(a.dtype));
    if (a.shape[0] < 1) return die_usage("%s: offsets must have at least 1 entry (B+1)", file);
    const int64_t *off = a.values;
    /* a view with holes places its items anywhere (validated by the binding); packed offsets
     * must start at 0 and never decrease */
    if (!d->len[s] && off[0] != 0) return die_usage("%s: offsets[0] is %lld, expected 0", file, (long long)off[0]);
    for (int64_t i = 1; !d->len[s] && i < a.shape[0]; i++)
        if (off[i] < off[i - 1])
            return die_usage("%s: offsets decrease at index %lld (%lld after %lld)", file,
                             (long long)i, (long long)off[i], (long long)off[i - 1]);
    return set_size(d, sym_index(d->g, sym_info(d->g, s).parent), a.shape[0] - 1, file);
}

/* DIR/<sym>.lengths.npy, if it exists: symbol s is then a view with holes (B lengths, int64,
 * row b spanning values rows offsets[b] .. offsets[b] + lengths[b]). Read before the offsets
 * are checked, which it relaxes; its size is checked against them afterwards. */
static int load_lengths(dataset *d, int s, const char *dir) {
    const char *name = sym_info(d->g, s).name;
    char *p = path_join(dir, name, ".lengths.npy");
    if (!p) return die_run("out of memory");
    struct stat st;
    int r = 0;
    if (stat(p, &st)) {
        free(p);
        return 0; /* packed */
    }
    rj_tensor_info a = {0};
    if (!(d->len[s] = rj_npy_read(d->ctx, p)))
        r = die_usage("the lengths of ragged symbol %s (int64, B entries): %s", name, rj_ctx_error(d->ctx));
    else if ((a = tinfo(d->len[s])).rank != 1)
        r = die_usage("%s: lengths must be 1-d (B entries), found %d dims", p, a.rank);
    else if (!(r = widen_i32(d, &d->len[s])) && (a = tinfo(d->len[s])).dtype != RJ_I64)
        r = die_usage("%s: lengths must be integers ('<i8'), found %s", p, rj_dtype_name(a.dtype));
    for (int64_t b = 0; !r && b < a.shape[0]; b++)
        if (((const int64_t *)a.values)[b] < 0)
            r = die_usage("%s: lengths[%lld] is negative (%lld)", p, (long long)b,
                          (long long)((const int64_t *)a.values)[b]);
    free(p);
    return r;
}

/* The lengths file has B entries: one fewer than the offsets. */
static int check_lengths_size(dataset *d, int s, const char *dir) {
    if (!d->len[s]) return 0;
    int64_t nl = tinfo(d->len[s]).shape[0], no = tinfo(d->off[s]).shape[0];
    if (nl != no - 1)
        return die_usage("%s/%s.lengths.npy: %lld lengths, but the offsets in %s/%s.npy give B = %lld "
                         "(B + 1 entries)", dir, sym_name(d->g, s), (long long)nl, dir, sym_name(d->g, s),
                         (long long)(no - 1));
    return 0;
}

/* Item b's length under symbol s: its lengths entry for a view with holes. */
static int64_t item_len(const dataset *d, int s, int64_t b) {
    const int64_t *off = tinfo(d->off[s]).values;
    return d->len[s] ? ((const int64_t *)tinfo(d->len[s]).values)[b] : off[b + 1] - off[b];
}

/* The rows symbol s's jagged tensors have: its last offset; for a view with holes, the end of
 * its furthest item (what the binding expects: holes included). */
static int64_t rows_of(const dataset *d, int s) {
    rj_tensor_info o = tinfo(d->off[s]);
    const int64_t *off = o.values;
    if (!d->len[s]) return off[o.shape[0] - 1];
    int64_t rows = 0;
    for (int64_t b = 0; b + 1 < o.shape[0]; b++)
        if (off[b] + item_len(d, s, b) > rows) rows = off[b] + item_len(d, s, b);
    return rows;
}

/* The rows of the blocks of a [B, s, s2, ...] tensor: the sum over items of len_s * len_s2
 * (s2 = s: the squared lengths; another symbol of B: cross attention's queries by keys). */
static int64_t block_rows_of(const dataset *d, int s, int s2) {
    rj_tensor_info o = tinfo(d->off[s]), o2 = tinfo(d->off[s2]);
    int64_t n = 0;
    for (int64_t b = 0; b + 1 < o.shape[0] && b + 1 < o2.shape[0]; b++) n += item_len(d, s, b) * item_len(d, s2, b);
    return n;
}

/* [B, j, j, ...]: two ragged dims (the file holds the items' len x len blocks, row after row). */
static bool is_pair_shape(const rj_graph *g, int rank, const rj_dim *dims) {
    return rank >= 3 && dim_info(g, dims[1]).kind == RJ_DIM_RAGGED && dim_info(g, dims[2]).kind == RJ_DIM_RAGGED;
}

static int load_data(dataset *d, const char *dir) {
    const rj_graph *g = d->g;
    struct stat st;
    if (stat(dir, &st) || !S_ISDIR(st.st_mode))
        return die_usage("--data: %s is not a directory", dir);
    /* offsets first: they give B and the rows */
    for (int s = 0; s < d->nsym; s++) {
        rj_dim_info si = sym_info(g, s);
        if (si.kind != RJ_DIM_RAGGED || !si.used) continue;
        char *p = path_join(dir, si.name, ".npy");
        if (!p) return die_run("out of memory");
        int r = load_lengths(d, s, dir);
        if (!r && !(d->off[s] = rj_npy_read(d->ctx, p)))
            r = die_usage("the offsets of ragged symbol %s (int64, B + 1 entries): %s", si.name, rj_ctx_error(d->ctx));
        else if (!r && !(r = check_offsets(d, s, p))) r = check_lengths_size(d, s, dir);
        free(p);
        if (r) return r;
    }
    for (int k = 0; k < d->nin; k++) {
        const char *name = rj_graph_input_name(g, k);
        rj_dim dims[RJ_MAX_RANK];
        int rank = rj_node_shape(g, rj_graph_input_at(g, k), dims);
        int rp = ragged_pos(g, rank, dims);
        char *p = path_join(dir, name, ".npy");
        if (!p) return die_run("out of memory");
        /* an input no output needs is not required; a dense one whose file is there is still
         * read, for the sizes it gives (a pad length P of an unused f32[B, P, D]) */
        if (!rj_graph_input_used(g, k) && (rp >= 0 || access(p, F_OK) != 0)) {
            free(p);
            continue;
        }
        int r = 0;
        if (!(d->in[k] = rj_npy_read(d->ctx, p))) r = die_usage("input %s: %s", name, rj_ctx_error(d->ctx));
        else r = check_input_shape(d, k, p);
        if (!r && rp >= 0) {
            int s = sym_index(g, dims[rp]);
            bool pair = is_pair_shape(g, rank, dims);
            int64_t last = pair ? block_rows_of(d, s, sym_index(g, dims[rp + 1])) : rows_of(d, s);
            int64_t rows = tinfo(d->in[k]).shape[0];
            /* a view with holes may have rows after its furthest item (a padded buffer's last
             * item shorter than the rest, as torch.nested.narrow leaves it): never read */
            if (pair || !d->len[s] ? rows != last : rows < last)
                r = die_usage(pair ? "%s: %lld rows, but the items' blocks (len x len of %s/%s%s.npy and its pair) have %lld"
                              : d->len[s] ? "%s: %lld rows, but the items of %s/%s%s.npy end at row %lld"
                                          : "%s: %lld rows, but the offsets in %s/%s%s.npy end at %lld", p,
                              (long long)rows, dir, sym_name(g, s), d->len[s] ? ".lengths" : "", (long long)last);
        }
        free(p);
        if (r) return r;
    }
    /* sizes nothing determined: DIR/<size>.npy, a 0-d integer */
    for (int s = 0; s < d->nsym; s++) {
        rj_dim_info si = sym_info(g, s);
        if (si.kind != RJ_DIM_DENSE || d->size[s] >= 0 || !si.used) continue;
        char *p = path_join(dir, si.name, ".npy");
        if (!p) return die_run("out of memory");
        struct stat fs;
        if (stat(p, &fs)) {
            free(p);
            continue; /* reported by the binding if it is needed */
        }
        rj_tensor *t = rj_npy_read(d->ctx, p);
        rj_tensor_info a = tinfo(t);
        int r = 0;
        if (!t) r = die_usage("%s", rj_ctx_error(d->ctx));
        else if (a.rank != 0 || (a.dtype != RJ_I64 && a.dtype != RJ_I32))
            r = die_usage("%s: size %s must be a 0-d integer array", p, si.name);
        else {
            int64_t v = a.dtype == RJ_I64 ? *(int64_t *)a.values : *(int32_t *)a.values;
            /* a negative size would read as "not given" (-1) or worse */
            if (v < 0) r = die_usage("%s: size %s is negative (%lld)", p, si.name, (long long)v);
            else r = learn_size(d, s, v, "the data directory");
        }
        rj_tensor_free(t);
        free(p);
        if (r) return r;
    }
    return 0;
}

static uint64_t rng_state;
static uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Counts n elements of es bytes against what --random may generate in all (RANDOM_MAX_BYTES),
 * before they are allocated; the arithmetic cannot overflow. */
static int random_budget(int64_t *used, int64_t n, int64_t es, const char *what) {
    if (n < 0 || n > (RANDOM_MAX_BYTES - *used) / es)
        return die_usage("--random: %s would take the generated data over %lld GiB (give smaller "
                         "sizes)", what, (long long)(RANDOM_MAX_BYTES >> 30));
    *used += n * es;
    return 0;
}

static int make_random(dataset *d, const char *spec) {
    const rj_graph *g = d->g;
    int64_t B = -1, maxlen = 16, minlen = 0, seed = 1;
    char *copy = strdup(spec);
    if (!copy) return die_run("out of memory");
    int r = 0;
    for (char *tok = strtok(copy, ","); tok && !r; tok = strtok(NULL, ",")) {
        char *eq = strchr(tok, '=');
        int64_t v;
        if (!eq || eq == tok || parse_int(eq + 1, &v) || v < 0) {
            r = die_usage("--random: '%s' is not NAME=VALUE with a non-negative integer", tok);
            break;
        }
        *eq = 0;
        if (!strcmp(tok, "B")) B = v;
        else if (!strcmp(tok, "maxlen")) maxlen = v;
        else if (!strcmp(tok, "minlen")) minlen = v;
        else if (!strcmp(tok, "seed")) seed = v;
        else {
            rj_dim dm = rj_graph_find_dim(g, tok);
            if (dm == RJ_DIM_NONE) /* one spec may serve several programs */
                fprintf(stderr, "ragjit: --random: note: the program has no size named '%s'; ignored\n", tok);
            else if (dim_info(g, dm).kind != RJ_DIM_DENSE)
                r = die_usage("--random: '%s' is not a dense size of the program (B, maxlen, minlen, seed, "
                              "or a size such as D=64)", tok);
            else r = set_size(d, sym_index(g, dm), v, "--random");
        }
    }
    free(copy);
    if (r) return r;
    if (minlen > maxlen) return die_usage("--random: minlen %lld is larger than maxlen %lld", (long long)minlen, (long long)maxlen);
    rng_state = (uint64_t)seed * 0x2545F4914F6CDD1Dull + 1;
    int64_t budget = 0;
    /* maxlen - minlen + 1 in unsigned arithmetic: maxlen may be as large as INT64_MAX */
    uint64_t span = (uint64_t)maxlen - (uint64_t)minlen + 1;
    /* offsets: one per class (symbols declared same share them) */
    for (int s = 0; s < d->nsym; s++) {
        rj_dim_info si = sym_info(g, s);
        if (si.kind != RJ_DIM_RAGGED || !si.used) continue;
        int parent = sym_index(g, si.parent);
        int64_t nb = B >= 0 ? B : d->size[parent];
        if (nb < 0) return die_usage("--random: the number of items is not given (add B=<n>)");
        char what[160];
        snprintf(what, sizeof what, "B=%lld", (long long)nb);
        if (random_budget(&budget, nb < RANDOM_MAX_BYTES ? nb + 1 : RANDOM_MAX_BYTES, 8, what))
            return EXIT_USAGE;
        /* the class's first member with offsets (its first symbol may be unused) */
        int from = -1;
        for (int m = 0; m < s && from < 0; m++)
            if (d->off[m] && sym_info(g, m).same == si.same) from = m;
        int64_t entries = nb + 1;
        if (!(d->off[s] = rj_tensor_dense(d->ctx, RJ_I64, 1, &entries, NULL))) return die_run("out of memory");
        int64_t *off = tinfo(d->off[s]).values;
        if (from >= 0) {
            memcpy(off, tinfo(d->off[from]).values, sizeof(int64_t) * (size_t)entries);
        } else {
            off[0] = 0;
            for (int64_t b = 0; b < nb; b++) {
                int64_t len = minlen + (int64_t)(rng_next() % span);
                if (len > INT64_MAX - off[b])
                    return die_usage("--random: the row count overflows (give a smaller B or maxlen)");
                off[b + 1] = off[b] + len;
            }
        }
        if (set_size(d, parent, nb, "--random")) return EXIT_USAGE;
    }
    for (int s = 0; s < d->nsym; s++)
        if (sym_info(g, s).kind == RJ_DIM_DENSE && d->size[s] < 0 && B >= 0 && !strcmp(sym_name(g, s), "B"))
            d->size[s] = B;
    /* values */
    for (int k = 0; k < d->nin; k++) {
        if (!rj_graph_input_used(g, k)) continue; /* no output needs it */
        const char *name = rj_graph_input_name(g, k);
        rj_node n = rj_graph_input_at(g, k);
        rj_dtype dtype = rj_node_dtype(g, n);
        rj_dim dims[RJ_MAX_RANK];
        int rank = rj_node_shape(g, n, dims);
        int rp = ragged_pos(g, rank, dims), skip = is_pair_shape(g, rank, dims) ? 2 : 1;
        int arank = rp >= 0 ? rank - skip : rank;
        int64_t shape[RJ_MAX_RANK], numel = 1;
        bool zero = false, over = false; /* a 0 dim makes it empty, however large the others */
        for (int ad = 0; ad < arank; ad++) {
            int nd = rp >= 0 ? (ad == 0 ? rp : ad + skip) : ad;
            rj_dim dm = dims[nd];
            int64_t v;
            if (rp >= 0 && ad == 0) {
                v = skip == 2 ? block_rows_of(d, sym_index(g, dm), sym_index(g, dims[rp + 1])) : rows_of(d, sym_index(g, dm));
            } else if (dm >= 0) {
                v = dm;
            } else {
                rj_dim_info di = dim_info(g, dm);
                if (di.kind == RJ_DIM_MAXLEN) {
                    rj_tensor_info o = tinfo(d->off[sym_index(g, di.parent)]);
                    v = 0;
                    for (int64_t b = 0; b + 1 < o.shape[0]; b++) {
                        int64_t l = ((int64_t *)o.values)[b + 1] - ((int64_t *)o.values)[b];
                        if (l > v) v = l;
                    }
                } else if ((v = d->size[sym_index(g, dm)]) < 0) {
                    return die_usage("--random: input %s needs the size %s (add %s=<n> to --random "
                                     "or --size)", name, di.name, di.name);
                }
            }
            shape[ad] = v;
            if (v == 0) zero = true;
            else if (over || numel > INT64_MAX / v) over = true;
            else numel *= v;
        }
        if (zero || over) numel = zero ? 0 : -1; /* -1: refused just below */
        char what[160];
        snprintf(what, sizeof what, "input %s", name);
        if (random_budget(&budget, numel, (int64_t)rj_dtype_size(dtype), what)) return EXIT_USAGE;
        if (!(d->in[k] = rj_tensor_dense(d->ctx, dtype, arank, shape, NULL))) return die_run("out of memory");
        void *values = tinfo(d->in[k]).values;
        /* the indices of an index op: in range (below a size, or below each item's length) */
        rj_dim bd = rj_graph_input_index_bound(g, k);
        const int64_t *boff = NULL, *ioff = NULL; /* the bound's and this input's offsets */
        int64_t bound = -1, inner = 1, per_item = numel;
        if (bd != RJ_DIM_NONE && (dtype == RJ_I32 || dtype == RJ_I64)) {
            rj_dim_info bi = dim_info(g, bd);
            if (bd >= 0) bound = bd;
            else if (bi.kind == RJ_DIM_DENSE) bound = d->size[sym_index(g, bd)];
            else if (bi.kind == RJ_DIM_RAGGED && d->off[sym_index(g, bd)]) boff = tinfo(d->off[sym_index(g, bd)]).values;
            for (int ad = 1; ad < arank; ad++) inner *= shape[ad];
            if (rp >= 0) ioff = tinfo(d->off[sym_index(g, dims[rp])]).values;
            else if (arank > 0 && shape[0] > 0) per_item = numel / shape[0];
        }
        for (int64_t i = 0, item = 0; i < numel; i++) {
            double u = (double)(rng_next() >> 11) * (1.0 / 9007199254740992.0);
            if (bound >= 0 || boff) {
                int64_t hi = bound;
                if (boff) {
                    if (ioff) while (ioff[item + 1] * inner <= i) item++;
                    else item = per_item ? i / per_item : 0;
                    hi = boff[item + 1] - boff[item];
                }
                int64_t v = (int64_t)floor(u * (double)hi);
                if (dtype == RJ_I32) ((int32_t *)values)[i] = (int32_t)v;
                else ((int64_t *)values)[i] = v;
                continue;
            }
            switch (dtype) {
            case RJ_BOOL: ((uint8_t *)values)[i] = u < 0.5; break;
            case RJ_I32: ((int32_t *)values)[i] = (int32_t)floor(u * 21) - 10; break;
            case RJ_I64: ((int64_t *)values)[i] = (int64_t)floor(u * 21) - 10; break;
            default: rj_value_set(dtype, values, (int64_t)i, 2 * u - 1); break;
            }
        }
    }
    return 0;
}

static int mkdir_p(const char *dir) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0777) && errno != EEXIST) return -1;
        *p = '/';
    }
    if (mkdir(buf, 0777) && errno != EEXIST) return -1;
    struct stat st;
    return stat(buf, &st) || !S_ISDIR(st.st_mode) ? -1 : 0;
}

static int write_npy(rj_ctx *ctx, const char *dir, const char *name, rj_dtype t, int rank,
                     const int64_t *shape, const void *data) {
    char *p = path_join(dir, name, ".npy");
    if (!p) return die_run("out of memory");
    rj_status s = rj_npy_write(ctx, p, t, rank, shape, data);
    free(p);
    return s ? die_usage("%s", rj_ctx_error(ctx)) : 0;
}

static int save_data(dataset *d, const char *dir) {
    const rj_graph *g = d->g;
    if (mkdir_p(dir)) return die_usage("--save-data: cannot create directory %s: %s", dir, strerror(errno));
    for (int k = 0; k < d->nin; k++) {
        rj_tensor_info a = tinfo(d->in[k]);
        if (d->in[k] && write_npy(d->ctx, dir, rj_graph_input_name(g, k), a.dtype, a.rank, a.shape, a.values))
            return EXIT_USAGE;
    }
    for (int s = 0; s < d->nsym; s++) {
        rj_tensor_info a = tinfo(d->off[s]);
        if (d->off[s] && write_npy(d->ctx, dir, sym_name(g, s), RJ_I64, 1, a.shape, a.values))
            return EXIT_USAGE;
        rj_tensor_info l = tinfo(d->len[s]);
        char lname[600];
        snprintf(lname, sizeof lname, "%s.lengths", sym_name(g, s));
        if (d->len[s] && write_npy(d->ctx, dir, lname, RJ_I64, 1, l.shape, l.values)) return EXIT_USAGE;
    }
    /* sizes no input determines (pad lengths): 0-d arrays */
    for (int s = 0; s < d->nsym; s++) {
        if (sym_info(g, s).kind != RJ_DIM_DENSE || d->size[s] < 0) continue;
        rj_dim sd = rj_graph_dim_at(g, s);
        bool from_input = false;
        for (int i = 0; i < d->nin && !from_input; i++) {
            rj_dim dims[RJ_MAX_RANK];
            int rank = rj_node_shape(g, rj_graph_input_at(g, i), dims);
            for (int k = 0; k < rank; k++) from_input |= dims[k] == sd;
        }
        for (int r = 0; r < d->nsym && !from_input; r++) {
            rj_dim_info ri = sym_info(g, r);
            from_input |= ri.kind == RJ_DIM_RAGGED && ri.parent == sd && d->off[r];
        }
        if (!from_input && write_npy(d->ctx, dir, sym_name(g, s), RJ_I64, 0, NULL, &d->size[s]))
            return EXIT_USAGE;
    }
    return 0;
}

static int get_data(dataset *d, rj_ctx *ctx, const rj_graph *g, const opts *o) {
    if (dataset_init(d, ctx, g)) return EXIT_RUN;
    if (!!o->data == !!o->random)
        return die_usage("%s: give exactly one of --data DIR and --random SPEC (for example "
                         "--random B=8,maxlen=16,seed=1)", o->cmd);
    int r = apply_size_opts(d, o);
    if (!r) r = o->data ? load_data(d, o->data) : make_random(d, o->random);
    if (!r && o->save) r = save_data(d, o->save);
    return r;
}

/* Data problems found by the binding are bad input (2); anything else is a run failure (1). */
static bool is_data_status(rj_status s) {
    return s == RJ_ERR_UNBOUND || s == RJ_ERR_SIZE || s == RJ_ERR_BATCH || s == RJ_ERR_OFFSETS_START ||
           s == RJ_ERR_OFFSETS_ORDER || s == RJ_ERR_OFFSETS_END || s == RJ_ERR_SAME ||
           s == RJ_ERR_OVERFLOW || s == RJ_ERR_PAD_LEN || s == RJ_ERR_INDEX;
}

/* The elements input k binds: all its file's, except that a jagged input over a view with holes
 * binds its rows up to its furthest item's end (rows after it, which no item owns, are left out:
 * the binding wants exactly the rows its offsets and lengths reach). */
static int64_t bound_numel(const dataset *d, int k) {
    rj_tensor_info a = tinfo(d->in[k]); /* dense: rows is the element count */
    rj_dim dims[RJ_MAX_RANK];
    int rank = rj_node_shape(d->g, rj_graph_input_at(d->g, k), dims);
    int rp = ragged_pos(d->g, rank, dims);
    if (rp < 0 || is_pair_shape(d->g, rank, dims) || !d->len[sym_index(d->g, dims[rp])]) return a.rows;
    int64_t inner = 1;
    for (int ad = 1; ad < a.rank; ad++) inner *= a.shape[ad];
    return rows_of(d, sym_index(d->g, dims[rp])) * inner;
}

static int bind_data(rj_ctx *ctx, rj_bind *b, const dataset *d) {
    const rj_graph *g = d->g;
    for (int s = 0; s < d->nsym; s++) {
        rj_dim sd = rj_graph_dim_at(g, s);
        rj_tensor_info o = tinfo(d->off[s]);
        if (d->off[s] && rj_bind_offsets(b, sd, o.shape[0] - 1, o.values, d->len[s] ? tinfo(d->len[s]).values : NULL))
            return die_run("%s", rj_ctx_error(ctx));
        if (sym_info(g, s).kind == RJ_DIM_DENSE && d->size[s] >= 0 && rj_bind_size(b, sd, d->size[s]))
            return die_run("%s", rj_ctx_error(ctx));
    }
    for (int k = 0; k < d->nin; k++) {
        if (d->in[k] && rj_bind_input(b, rj_graph_input_at(g, k), tinfo(d->in[k]).values, bound_numel(d, k)))
            return die_run("%s", rj_ctx_error(ctx));
    }
    return 0;
}

/* A failed run's (or rj_bind_prepare's) exit: bad data is a usage error. */
static int run_failure(rj_ctx *ctx, rj_status s) {
    if (is_data_status(s)) return die_usage("bad input data: %s", rj_ctx_error(ctx));
    return die_run("run failed: %s", rj_ctx_error(ctx));
}

static int run_once(rj_ctx *ctx, rj_program *p, rj_bind *b) {
    rj_status s = rj_program_run(p, b);
    return s ? run_failure(ctx, s) : 0;
}

static int64_t info_numel(const rj_tensor_info *t) {
    if (t->ragged_dim < 0) return t->rows;
    int64_t n = t->rows;
    for (int k = t->ragged_dims == 2 ? 3 : 2; k < t->rank; k++) n *= t->shape[k];
    return n;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static rj_program *compile(rj_ctx *ctx, rj_graph *g, rj_target t, int *status, double *ms) {
    double t0 = now_ms();
    rj_program *p = rj_program_new(g, t);
    if (ms) *ms = now_ms() - t0;
    static const char *const tnames[] = {"reference", "cpu", "cuda", "opencl"};
    if (!p && rj_ctx_status(ctx) == RJ_ERR_NO_DEVICE) /* not the program's fault: say so plainly */
        *status = die_run("the %s target is not available on this machine (%s); try --target cpu",
                          (unsigned)t < 4 ? tnames[t] : "requested", rj_ctx_error(ctx));
    else if (!p)
        *status = die_run("compile failed: %s", rj_ctx_error(ctx));
    return p;
}

/* ---- commands ------------------------------------------------------------------------------- */

/* A jagged result over a view with holes (its symbol was bound with lengths) keeps the holes;
 * `run` writes, and `check` compares, its items' rows packed one after the other, as a packed
 * binding would have laid them out. Rewrites t to describe that copy (*own, to free) with packed
 * offsets (*poff, to free); a result without lengths is left as it is. */
static int pack_result(rj_tensor_info *t, void **own, int64_t **poff) {
    *own = NULL, *poff = NULL;
    if (t->ragged_dim < 0 || t->ragged_dims == 2 || !t->lengths) return 0;
    int64_t nb = t->shape[0], row = (int64_t)rj_dtype_size(t->dtype), rows = 0;
    for (int k = 2; k < t->rank; k++) row *= t->shape[k];
    for (int64_t b = 0; b < nb; b++) rows += t->lengths[b];
    char *v = malloc(rows > 0 && row > 0 ? (size_t)(rows * row) : 1);
    int64_t *off = malloc(sizeof(int64_t) * (size_t)(nb + 1));
    if (!v || !off) {
        free(v), free(off);
        return die_run("out of memory");
    }
    off[0] = 0;
    for (int64_t b = 0; b < nb; b++) {
        off[b + 1] = off[b] + t->lengths[b];
        if (t->lengths[b])
            memcpy(v + off[b] * row, (const char *)t->values + t->offsets[b] * row, (size_t)(t->lengths[b] * row));
    }
    *own = v, *poff = off;
    t->values = v, t->rows = rows, t->offsets = off, t->lengths = NULL;
    return 0;
}

/* One output's files: its values, and for a jagged output its symbol's offsets. */
static int write_result(rj_ctx *ctx, const rj_graph *g, rj_node n, const char *name, const rj_tensor_info *t,
                        const char *dir) {
    int64_t shape[RJ_MAX_RANK];
    if (t->ragged_dims == 2) {
        /* two ragged dims: the items' len x len blocks, row after row (their offsets follow
         * from the ragged symbol's: item b's block starts at row sum_{c<b} len_c^2) */
        shape[0] = t->rows;
        for (int k = 3; k < t->rank; k++) shape[k - 2] = t->shape[k];
        return write_npy(ctx, dir, name, t->dtype, t->rank - 2, shape, t->values) ? EXIT_USAGE : 0;
    }
    if (t->ragged_dim < 0) return write_npy(ctx, dir, name, t->dtype, t->rank, t->shape, t->values) ? EXIT_USAGE : 0;
    /* packed rows (pack_result packed those of a view with holes) and their offsets */
    shape[0] = t->rows;
    for (int k = 2; k < t->rank; k++) shape[k - 1] = t->shape[k];
    if (write_npy(ctx, dir, name, t->dtype, t->rank - 1, shape, t->values)) return EXIT_USAGE;
    /* its ragged symbol: an output per head ([B, H, j, D]) comes back as stored, [B, j, H, D] */
    rj_dim dims[RJ_MAX_RANK];
    int r = rj_node_shape(g, n, dims), k = 1;
    rj_dim_info di;
    while (k < r - 1 && !(rj_dim_get_info(g, dims[k], &di) == RJ_OK && di.kind == RJ_DIM_RAGGED)) k++;
    int64_t nb = t->shape[0] + 1;
    return write_npy(ctx, dir, rj_dim_name(g, dims[k]), RJ_I64, 1, &nb, t->offsets) ? EXIT_USAGE : 0;
}

static int write_outputs(rj_ctx *ctx, const rj_graph *g, rj_bind *b, const char *dir) {
    if (mkdir_p(dir)) return die_usage("--out: cannot create directory %s: %s", dir, strerror(errno));
    for (int i = 0; i < rj_graph_output_count(g); i++) {
        rj_node n = rj_graph_output_at(g, i);
        const char *name = rj_graph_output_name(g, i);
        rj_tensor_info t = tinfo(rj_bind_result(b, n));
        void *own;
        int64_t *poff;
        if (pack_result(&t, &own, &poff)) return EXIT_RUN;
        int r = write_result(ctx, g, n, name, &t, dir);
        free(own), free(poff);
        if (r) return r;
    }
    return 0;
}

static double elem(const rj_tensor_info *t, int64_t i) {
    return rj_value_get(t->dtype, t->values, i);
}

/* A row of `n` elements starting at element `at`, at most 6 shown. */
static void print_row(const rj_tensor_info *t, int64_t at, int64_t n) {
    putchar('[');
    for (int64_t k = 0; k < n && k < 6; k++) printf(k ? " %.4g" : "%.4g", elem(t, at + k));
    if (n > 6) printf(" ... (%lld)", (long long)n);
    putchar(']');
}

static void print_outputs(rj_ctx *ctx, const rj_graph *g, rj_bind *b, const dataset *d) {
    for (int i = 0; i < rj_graph_output_count(g); i++) {
        rj_node n = rj_graph_output_at(g, i);
        rj_tensor_info t = tinfo(rj_bind_result(b, n));
        char *type = rj_node_type_str(g, n);
        printf("%s : %s\n", rj_graph_output_name(g, i), type ? type : "?");
        rj_string_free(ctx, type);
        if (t.ragged_dim < 0) { /* dense: one line per index of its first dim */
            int64_t n0 = t.rank ? t.shape[0] : 1, inner = 1;
            for (int k = 1; k < t.rank; k++) inner *= t.shape[k];
            for (int64_t i0 = 0; i0 < n0 && i0 < 4; i0++) {
                if (t.rank) printf("  [%lld]: ", (long long)i0);
                else printf("  ");
                print_row(&t, i0 * inner, inner);
                putchar('\n');
            }
            if (n0 > 4) printf("  ... (%lld in dim 0)\n", (long long)n0);
            continue;
        }
        int first = t.ragged_dims == 2 ? 3 : t.ragged_dim >= 0 ? 2 : (t.rank >= 2 ? 2 : t.rank);
        int64_t inner = 1;
        for (int k = first; k < t.rank; k++) inner *= t.shape[k];
        if (t.ragged_dims == 2) { /* each item a len1 x len2 block (the two symbols'): its first rows */
            rj_dim dims[RJ_MAX_RANK];
            int rank = rj_node_shape(g, n, dims), rp = ragged_pos(g, rank, dims);
            int s1 = sym_index(g, dims[rp]), s2 = sym_index(g, dims[rp + 1]);
            for (int64_t it = 0; it < t.shape[0] && it < 4; it++) {
                int64_t len = item_len(d, s1, it), len2 = item_len(d, s2, it);
                printf("  item %lld (%lld x %lld):", (long long)it, (long long)len, (long long)len2);
                for (int64_t r = 0; r < len && r < 4; r++) {
                    putchar(' ');
                    print_row(&t, (t.offsets[it] + r * len2) * inner, len2 * inner);
                }
                if (len > 4) printf(" ...");
                putchar('\n');
            }
            if (t.shape[0] > 4) printf("  ... (%lld items)\n", (long long)t.shape[0]);
            continue;
        }
        int64_t items = t.rank ? t.shape[0] : 1;
        for (int64_t it = 0; it < items && it < 4; it++) {
            int64_t rows = t.ragged_dim < 0 ? (t.rank >= 2 ? t.shape[1] : 1)
                           : t.lengths ? t.lengths[it] : t.offsets[it + 1] - t.offsets[it];
            int64_t row0 = t.ragged_dim >= 0 ? t.offsets[it] : it * rows;
            if (t.rank <= 1) inner = t.rank ? t.shape[0] : 1, rows = 1, row0 = 0;
            printf("  item %lld (%lld rows):", (long long)it, (long long)rows);
            for (int64_t r = 0; r < rows && r < 4; r++) {
                putchar(' ');
                print_row(&t, (row0 + r) * inner, inner);
            }
            if (rows > 4) printf(" ...");
            putchar('\n');
            if (t.rank <= 1) break;
        }
        if (t.rank > 1 && items > 4) printf("  ... (%lld items)\n", (long long)items);
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* What a phase of a command cost: wall time, the process's CPU time (every thread's) and its
 * page faults (first touches of fresh memory), for `run --time`. */
typedef struct meter {
    double wall, cpu;
    long faults;
} meter;

static meter meter_now(void) {
    struct timespec c;
    struct rusage ru;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c);
    getrusage(RUSAGE_SELF, &ru);
    return (meter){.wall = now_ms(), .cpu = (double)c.tv_sec * 1e3 + (double)c.tv_nsec * 1e-6,
                   .faults = ru.ru_minflt + ru.ru_majflt};
}

static meter meter_since(meter m0) {
    meter m = meter_now();
    return (meter){.wall = m.wall - m0.wall, .cpu = m.cpu - m0.cpu, .faults = m.faults - m0.faults};
}

/* The first run against the later ones of the same binding and data (--time with --reps): the
 * same process, moments apart, so the ratio holds on a loaded machine better than either time. */
static int time_later_runs(rj_ctx *ctx, rj_program *p, rj_bind *b, const opts *o, meter first) {
    double *w = malloc(sizeof *w * (size_t)o->reps), *c = malloc(sizeof *c * (size_t)o->reps);
    int r = w && c ? 0 : die_run("out of memory");
    long faults = 0;
    for (int i = 0; !r && i < o->reps; i++) {
        meter m0 = meter_now();
        r = run_once(ctx, p, b);
        meter m = meter_since(m0);
        w[i] = m.wall, c[i] = m.cpu, faults += m.faults;
    }
    if (!r) {
        qsort(w, (size_t)o->reps, sizeof *w, cmp_double);
        qsort(c, (size_t)o->reps, sizeof *c, cmp_double);
        double mw = w[o->reps / 2], mc = c[o->reps / 2];
        fprintf(stderr, "ragjit: later runs %.3f ms median of %d (cpu %.3f ms, %.0f page faults a run); "
                "first/later %.2f (cpu %.2f)\n", mw, o->reps, mc, (double)faults / o->reps,
                mw > 0 ? first.wall / mw : 0, mc > 0 ? first.cpu / mc : 0);
    }
    free(w), free(c);
    return r;
}

static int cmd_run(rj_ctx *ctx, rj_graph *g, const opts *o) {
    if (!o->out) return die_usage("run: --out DIR is required (where the outputs go)");
    dataset d;
    int r = get_data(&d, ctx, g, o);
    double cms = 0;
    meter mb = {0}, mr = {0};
    rj_program *p = NULL;
    rj_bind *b = NULL;
    if (!r && (p = compile(ctx, g, o->target, &r, &cms))) {
        meter m0 = meter_now();
        if (!(b = rj_bind_new(p))) r = die_run("%s", rj_ctx_error(ctx));
        if (!r) r = bind_data(ctx, b, &d);
        rj_status s = r ? RJ_OK : rj_bind_prepare(b); /* the run's memory, threads: a warm first run */
        if (s) r = run_failure(ctx, s);
        mb = meter_since(m0);
    }
    if (!r) {
        meter m0 = meter_now();
        r = run_once(ctx, p, b);
        mr = meter_since(m0);
    }
    if (!r && o->time)
        fprintf(stderr, "ragjit: compile %.2f ms, bind %.3f ms (cpu %.3f ms, %ld page faults), run %.3f ms (cpu %.3f ms, "
                "%ld page faults)\n", cms, mb.wall, mb.cpu, mb.faults, mr.wall, mr.cpu, mr.faults);
    if (!r && o->time && o->reps_set) r = time_later_runs(ctx, p, b, o, mr);
    if (!r) r = write_outputs(ctx, g, b, o->out);
    if (!r && o->print) print_outputs(ctx, g, b, &d);
    rj_bind_free(b);
    rj_program_free(p);
    dataset_free(&d);
    return r;
}

static int cmd_check(rj_ctx *ctx, rj_graph *g, const opts *o) {
    if (o->target == RJ_TARGET_REFERENCE)
        return die_usage("check: --target reference would compare the interpreter with itself");
    if (o->out) return die_usage("check: --out is not an option of check (it compares, and writes nothing; "
                                 "'ragjit run' writes outputs)");
    dataset d;
    int r = get_data(&d, ctx, g, o);
    rj_program *p = NULL, *pr = NULL;
    rj_bind *b = NULL, *br = NULL;
    if (!r && (p = compile(ctx, g, o->target, &r, NULL)) &&
        (pr = compile(ctx, g, RJ_TARGET_REFERENCE, &r, NULL)) &&
        (!(b = rj_bind_new(p)) || !(br = rj_bind_new(pr))))
        r = die_run("%s", rj_ctx_error(ctx));
    if (!r) r = bind_data(ctx, b, &d);
    if (!r) r = bind_data(ctx, br, &d);
    if (!r) r = run_once(ctx, p, b);
    if (!r) r = run_once(ctx, pr, br);
    bool bad = false;
    for (int i = 0; !r && i < rj_graph_output_count(g); i++) {
        rj_node n = rj_graph_output_at(g, i);
        const char *name = rj_graph_output_name(g, i);
        rj_tensor_info t = tinfo(rj_bind_result(b, n)), ref = tinfo(rj_bind_result(br, n));
        void *own[2];
        int64_t *poff[2];
        /* a view with holes: the items' rows only (what is in the holes is no one's) */
        if (pack_result(&t, &own[0], &poff[0]) || pack_result(&ref, &own[1], &poff[1])) {
            r = EXIT_RUN;
            break;
        }
        int64_t cnt = info_numel(&ref);
        bool fl = ref.dtype == RJ_F32 || ref.dtype == RJ_F64 || ref.dtype == RJ_F16 || ref.dtype == RJ_BF16;
        /* each element against its own reference value: a tolerance scaled by the output's
         * largest value would let a large error next to a large value pass unseen. 16-bit
         * results may differ by a rounding or two where f32 maths (exp, sums) lands near a
         * tie: about 2.5 ulps (bf16's ulp is 2^-8 relative, f16's 2^-11) */
        static const double atols[RJ_DTYPE_COUNT] = {[RJ_F32] = 2e-5, [RJ_F64] = 1e-12, [RJ_F16] = 1e-3, [RJ_BF16] = 1e-2};
        static const double rtols[RJ_DTYPE_COUNT] = {[RJ_F32] = 1e-4, [RJ_F64] = 1e-10, [RJ_F16] = 2e-3, [RJ_BF16] = 1e-2};
        double atol = o->atol >= 0 ? o->atol : fl ? atols[ref.dtype] : 1e-12;
        double rtol = o->rtol >= 0 ? o->rtol : fl ? rtols[ref.dtype] : 1e-10;
        double worst = 0;
        int64_t at = -1;
        for (int64_t k = 0; k < cnt; k++) {
            double a = rj_value_get(ref.dtype, t.values, k), w = rj_value_get(ref.dtype, ref.values, k);
            if ((isnan(a) && isnan(w)) || a == w) continue;
            double e = fabs(a - w);
            bool ok = fl && e <= atol + rtol * fabs(w);
            if (isnan(e)) e = INFINITY;
            if (e > worst) worst = e;
            if (!ok && at < 0) {
                at = k;
                fprintf(stderr, "ragjit: check: output %s element %lld is %.9g, the reference says %.9g\n",
                        name, (long long)k, a, w);
            }
        }
        printf("%-16s %10lld elements   max |error| %-10.3g %s\n", name, (long long)cnt,
               worst, at < 0 ? "ok" : "MISMATCH");
        for (int k = 0; k < 2; k++) free(own[k]), free(poff[k]);
        bad |= at >= 0;
    }
    rj_bind_free(b);
    rj_bind_free(br);
    rj_program_free(p);
    rj_program_free(pr);
    dataset_free(&d);
    return r ? r : bad ? EXIT_RUN : 0;
}

static int cmd_emit(rj_ctx *ctx, rj_graph *g, const opts *o) {
    if (!o->stage)
        return die_usage("emit: --stage is required (graph, opt, fused, loops, llvm, llvm-opt, asm, "
                         "cuda, ptx, opencl, dot)");
    static const char *const stages[] = {"graph", "opt", "fused", "loops", "llvm", "llvm-opt",
                                         "asm", "cuda", "ptx", "opencl", "dot"};
    bool known = false;
    for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++) known |= !strcmp(stages[i], o->stage);
    if (!known)
        return die_usage("emit: unknown stage '%s' (graph, opt, fused, loops, llvm, llvm-opt, asm, "
                         "cuda, ptx, opencl, dot)", o->stage);
    int r = 0;
    char *text = rj_graph_dump(g, o->target, o->stage);
    if (!text) r = die_run("emit: %s", rj_ctx_error(ctx));
    else fputs(text, stdout);
    rj_string_free(ctx, text);
    return r;
}


/* PROGRAM compiled in a context of its own (bench's threads, the persistent cache off): the
 * program, or NULL with *status set. */
static rj_program *compile_fresh(const opts *o, rj_ctx **c, rj_graph **g, double *ms, int *status) {
    *g = NULL;
    if (!(*c = rj_ctx_new(NULL, NULL))) {
        *status = die_run("out of memory");
        return NULL;
    }
    if (o->threads) rj_ctx_set_threads(*c, o->threads);
    rj_ctx_set_cache_dir(*c, "off");
    return (*g = load_program(*c, o->prog, status)) ? compile(*c, *g, o->target, status, ms) : NULL;
}

/* Output i's result after a run, and its size in bytes. */
static size_t result_bytes(rj_bind *b, const rj_graph *g, int i, rj_tensor_info *ti) {
    *ti = tinfo(rj_bind_result(b, rj_graph_output_at(g, i)));
    return (size_t)info_numel(ti) * rj_dtype_size(ti->dtype);
}

/* bench --ab: PROGRAM compiled again in a context created with o->ab in the environment, and
 * the two run in alternation. p, b: A, already run once. */
static int bench_ab(rj_ctx *ctx, const opts *o, const dataset *d, rj_program *p, rj_bind *b, double cms) {
    const char *eq = strchr(o->ab, '=');
    char var[64], *old = NULL;
    snprintf(var, sizeof var, "%.*s", (int)(eq - o->ab), o->ab);
    if (getenv(var) && !(old = strdup(getenv(var)))) return die_run("out of memory");
    int r = 0;
    double cms2 = 0;
    rj_ctx *c2 = NULL;
    rj_graph *g2 = NULL;
    rj_program *p2 = NULL;
    rj_bind *b2 = NULL;
    if (setenv(var, eq + 1, 1)) r = die_run("--ab: cannot set %s: %s", var, strerror(errno));
    else if ((p2 = compile_fresh(o, &c2, &g2, &cms2, &r)) && !(b2 = rj_bind_new(p2)))
        r = die_run("%s", rj_ctx_error(c2));
    if (old ? setenv(var, old, 1) : unsetenv(var)) r = r ? r : die_run("--ab: cannot restore %s", var);
    free(old);
    dataset d2 = *d;
    d2.g = g2;
    if (!r) r = bind_data(c2, b2, &d2);
    /* B writes where A does (A's results, saved first): the same memory, so that where the
     * outputs lie relative to the inputs (cache sets, 4 KiB aliasing) favours neither; with
     * outputs of their own, identical kernels measured up to 5% apart */
    int nout = rj_graph_output_count(d->g);
    void **saved = calloc((size_t)nout + 1, sizeof *saved);
    if (!r && !saved) r = die_run("out of memory");
    for (int i = 0; !r && i < nout; i++) {
        rj_tensor_info x;
        size_t bytes = result_bytes(b, d->g, i, &x);
        if (!(saved[i] = malloc(bytes ? bytes : 1))) r = die_run("out of memory");
        else if (bytes) memcpy(saved[i], x.values, bytes);
        if (!r && bytes && rj_bind_output(b2, rj_graph_output_at(g2, i), x.values, info_numel(&x)))
            r = die_run("%s", rj_ctx_error(c2));
    }
    if (!r) r = run_once(c2, p2, b2);
    bool same = true;
    for (int i = 0; !r && i < nout; i++) {
        rj_tensor_info y;
        size_t bytes = result_bytes(b2, g2, i, &y);
        same &= !bytes || !memcmp(saved[i], y.values, bytes);
    }
    for (int i = 0; saved && i < nout; i++) free(saved[i]);
    free(saved);
    double *t = r ? NULL : malloc(sizeof(double) * (size_t)o->reps * 3);
    if (!r && !t) r = die_run("out of memory");
    int wins = 0;
    for (int i = 0; !r && i < o->reps; i++) {
        for (int k = 0; !r && k < 2; k++) { /* A B, then B A */
            bool second = (k == 1) != (i % 2 == 1);
            double t0 = now_ms();
            r = second ? run_once(c2, p2, b2) : run_once(ctx, p, b);
            (second ? t + o->reps : t)[i] = now_ms() - t0;
        }
        if (!r) t[2 * o->reps + i] = t[o->reps + i] / t[i], wins += t[o->reps + i] < t[i];
    }
    if (!r) {
        for (int k = 0; k < 3; k++) qsort(t + k * o->reps, (size_t)o->reps, sizeof *t, cmp_double);
        int h = o->reps / 2;
        printf("%s: A: compile %.1f ms; run median %.3f ms (min %.3f)\n", o->prog, cms, t[h], t[0]);
        printf("%s: B (%s): compile %.1f ms; run median %.3f ms (min %.3f)\n", o->prog, o->ab, cms2,
               t[o->reps + h], t[o->reps]);
        printf("B/A: median of %d pairs %.3f (quartiles %.3f, %.3f); B faster in %d; outputs %s\n", o->reps,
               t[2 * o->reps + h], t[2 * o->reps + o->reps / 4], t[2 * o->reps + (3 * o->reps) / 4], wins,
               same ? "identical" : "differ");
    }
    free(t);
    rj_bind_free(b2);
    rj_program_free(p2);
    rj_graph_free(g2);
    rj_ctx_free(c2);
    return r;
}

static int cmd_bench(rj_ctx *ctx, rj_graph *g, const opts *o) {
    dataset d;
    int r = get_data(&d, ctx, g, o);
    if (!r && o->ab) { /* a throwaway compile first: A's would also pay for the process's LLVM start-up */
        rj_ctx *c0;
        rj_graph *g0;
        double ms;
        rj_program_free(compile_fresh(o, &c0, &g0, &ms, &r));
        rj_graph_free(g0);
        rj_ctx_free(c0);
    }
    double cms = 0;
    rj_program *p = NULL;
    rj_bind *b = NULL;
    double *t = malloc(sizeof(double) * (size_t)o->reps * 3), *tk = t ? t + o->reps : NULL, *tc = tk ? tk + o->reps : NULL;
    if (!t) r = die_run("out of memory");
    if (!r && (p = compile(ctx, g, o->target, &r, &cms)) && !(b = rj_bind_new(p))) r = die_run("%s", rj_ctx_error(ctx));
    if (!r) r = bind_data(ctx, b, &d);
    if (!r) r = run_once(ctx, p, b);
    if (!r && o->ab) r = bench_ab(ctx, o, &d, p, b, cms);
    int nk = 0;
    int64_t temp = 0;
    for (int i = 0; !r && !o->ab && i < o->reps; i++) {
        double t0 = now_ms();
        r = run_once(ctx, p, b);
        t[i] = now_ms() - t0;
        rj_run_stats st;
        if (!r && rj_bind_stats(b, &st) == RJ_OK) tk[i] = st.kernel_ms, tc[i] = st.copy_ms, nk = st.kernels, temp = st.temp_bytes;
    }
    if (!r && !o->ab) {
        qsort(t, (size_t)o->reps, sizeof *t, cmp_double);
        qsort(tk, (size_t)o->reps, sizeof *tk, cmp_double);
        qsort(tc, (size_t)o->reps, sizeof *tc, cmp_double);
        double med = t[o->reps / 2];
        double in_bytes = 0;
        for (int k = 0; k < d.nin; k++) {
            rj_tensor_info a = tinfo(d.in[k]); /* dense: rows is the element count */
            in_bytes += (double)a.rows * (double)rj_dtype_size(a.dtype);
        }
        double out_bytes = 0;
        printf("%s: compile %.1f ms; run median %.3f ms over %d runs (min %.3f, max %.3f)\n",
               o->prog, cms, med, o->reps, t[0], t[o->reps - 1]);
        printf("  %-16s %12.1f MB read\n", "inputs", in_bytes / 1e6);
        for (int i = 0; i < rj_graph_output_count(g); i++) {
            rj_tensor_info ti;
            double ob = (double)result_bytes(b, g, i, &ti);
            out_bytes += ob;
            printf("  %-16s %12.1f MB written   %8.2f GB/s (its bytes and all inputs)\n",
                   rj_graph_output_name(g, i), ob / 1e6, (ob + in_bytes) / (med * 1e-3) / 1e9);
        }
        printf("  %-16s %12.1f MB          %8.2f GB/s\n", "total", (in_bytes + out_bytes) / 1e6,
               (in_bytes + out_bytes) / (med * 1e-3) / 1e9);
        if (o->target == RJ_TARGET_CPU) printf("  %-16s %12.3f MB held (planned by liveness)\n", "temporaries", (double)temp / 1e6);
        if (o->target == RJ_TARGET_CUDA || o->target == RJ_TARGET_OPENCL) {
            double kmed = tk[o->reps / 2], kgbs = (in_bytes + out_bytes) / (kmed * 1e-3) / 1e9, probe = 0;
            printf("  %-16s %12.3f ms median (device timers, %d launches)   %8.2f GB/s\n", "kernels", kmed, nk, kgbs);
            printf("  %-16s %12.3f ms median (host <-> device, with allocations)\n", "copies", tc[o->reps / 2]);
            int64_t pb = (int64_t)(in_bytes > 1 << 20 ? in_bytes : 1 << 20);
            if (rj_device_copy_bandwidth(ctx, o->target, pb, &probe) == RJ_OK && probe > 0)
                printf("  %-16s %12.2f GB/s device-to-device copy of %.1f MB (same run); kernels at %.2fx it\n",
                       "copy probe", probe, (double)pb / 1e6, kgbs / probe);
            else
                printf("  %-16s %s\n", "copy probe", rj_ctx_error(ctx));
        }
    }
    free(t);
    rj_bind_free(b);
    rj_program_free(p);
    dataset_free(&d);
    return r;
}

int main(int argc, char **argv) {
    if (argc < 2) return die_usage("no command given (run, check, emit, bench; see ragjit --help)");
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        fputs(main_help, stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("ragjit %d.%d.%d\nBLAS: %s\n", RJ_VERSION_MAJOR, RJ_VERSION_MINOR, RJ_VERSION_PATCH, rj_blas_info());
        return 0;
    }
    static const struct {
        const char *name, *help;
        int (*fn)(rj_ctx *, rj_graph *, const opts *);
        bool data;
    } cmds[] = {{"run", run_help, cmd_run, true},
                {"check", check_help, cmd_check, true},
                {"emit", emit_help, cmd_emit, false},
                {"bench", bench_help, cmd_bench, true}};
    int c = -1;
    for (int i = 0; i < 4; i++)
        if (!strcmp(argv[1], cmds[i].name)) c = i;
    if (c < 0) return die_usage("unknown command '%s' (run, check, emit, bench; see ragjit --help)", argv[1]);
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf(cmds[c].help, data_help);
            return 0;
        }
    opts o;
    int r = parse_opts(argc, argv, &o);
    if (r) return r;
    if (!o.prog) return die_usage("%s: no PROGRAM given (see 'ragjit %s --help')", o.cmd, o.cmd);
    if (!cmds[c].data && (o.data || o.random || o.save || o.out))
        return die_usage("%s: does not take data options", o.cmd);
    rj_ctx *ctx = rj_ctx_new(NULL, NULL);
    if (!ctx) return die_run("out of memory");
    if (o.threads) rj_ctx_set_threads(ctx, o.threads);
    if (o.ab) rj_ctx_set_cache_dir(ctx, "off"); /* both compile */
    rj_graph *g = load_program(ctx, o.prog, &r);
    if (g) r = cmds[c].fn(ctx, g, &o);
    rj_graph_free(g);
    rj_ctx_free(ctx);
    return r;
}
