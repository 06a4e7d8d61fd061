/*
 * test_cuda.c — the CUDA backend: generated CUDA C, NVRTC, ptxas, and (with a GPU) results.
 *
 * A corpus of graphs covers every op and a set of fused chains (softmax/sum/mean over the
 * ragged dim, reductions over a padded dim, layer_norm, pad/unpad chains, int and bool ops,
 * casts), each in f32, f64, f16 and bf16. For every graph:
 *   - the "cuda" dump has one `extern "C" __global__` function per loop-IR kernel, under the
 *     kernel's name, and dumping twice gives the same text;
 *   - NVRTC compiles it ("ptx" dump), the PTX has an .entry per kernel, and ptxas assembles
 *     it for the PTX's own target. Without NVRTC (or ptxas) the test says why and is skipped.
 * Every allocation of the "cuda" and "ptx" dumps is failed once: RJ_ERR_NOMEM, no leaks.
 * Compiling for RJ_TARGET_CUDA without a driver or device must fail cleanly with
 * RJ_ERR_NO_DEVICE and "no CUDA device" (the fixture checks nothing leaks). Where a device
 * exists, the corpus runs on it and is compared with the reference interpreter on every
 * length pattern, with the CPU JIT's tolerances (see test_jit.c), once with packed inputs and
 * once with the jagged inputs bound as views with holes, and in f16 and bf16 (packed); and
 * every allocation of compiling and running is failed once. Those device tests are skipped, saying why, without a GPU.
 */
#include "stdenv.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define PTXAS "/usr/local/cuda/bin/ptxas"

/* Kernel names of the loop IR ("kernel k0(...") into names[], returns how many. */
static int kernel_names(const char *loops, char names[][32], int cap) {
    int n = 0;
    for (const char *s = loops; (s = strstr(s, "kernel ")) && n < cap; s++) {
        if (s != loops && s[-1] != '\n') continue;
        const char *a = s + 7, *p = strchr(a, '(');
        if (!p || p - a >= 32) continue;
        memcpy(names[n], a, (size_t)(p - a));
        names[n][p - a] = 0;
        n++;
    }
    return n;
}

/* ---- the generated source ---------------------------------------------------------------- */

static void check_source(rj_ctx *ctx, const rj_graph *g, const char *what, size_t *bytes) {
    rj_program *p = rj_program_new((rj_graph *)g, RJ_TARGET_REFERENCE);
    assert_non_null(p);
    char *loops = rj_graph_dump((rj_graph *)g, RJ_TARGET_CUDA, "loops");
    char *src = rj_program_dump(p, "cuda");
    char *again = rj_program_dump(p, "cuda");
    if (!loops || !src || !again) fail_msg("%s: dump: %s", what, rj_ctx_error(ctx));
    char names[64][32];
    int nk = kernel_names(loops, names, 64);
    assert_true(nk > 0);
    /* blocks of 256 threads, or the kernel's own (the tiled attention's 64) */
    if (count_substr(src, "extern \"C\" __global__ void __launch_bounds__(") != nk)
        fail_msg("%s: %d kernels in the loop IR but %d __global__ functions", what, nk,
                 count_substr(src, "extern \"C\" __global__ void "));
    for (int i = 0; i < nk; i++) {
        char sig[96];
        snprintf(sig, sizeof sig, ") %.31s(", names[i]); /* after __launch_bounds__(block, n) */
        if (!strstr(src, sig)) fail_msg("%s: no `%s` in the CUDA source", what, sig);
    }
    if (strcmp(src, again)) fail_msg("%s: two dumps of the CUDA source differ", what);
    if (strlen(src) > 200000) fail_msg("%s: %zu bytes of CUDA source", what, strlen(src));
    /* no bare inf/nan outside comments: they have no C literal */
    for (const char *line = src; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        const char *c = line;
        while (c < line + len && *c == ' ') c++;
        if (c[0] != '/' || c[1] != '/') {
            char buf[4096];
            snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf - 1 ? len : sizeof buf - 1), line);
            if (has_code_word(buf, "inf") || has_code_word(buf, "nan"))
                fail_msg("%s: a non-finite constant printed as text: %s", what, buf);
        }
        line += len + (end ? 1 : 0);
    }
    *bytes += strlen(src);
    rj_string_free(ctx, loops);
    rj_string_free(ctx, src);
    rj_string_free(ctx, again);
    rj_program_free(p);
}

/* The corpus's float types: f32, f64, and the 16-bit storage types (their conversions are the
 * preamble's integer helpers, which NVRTC compiles without cuda_fp16.h). */
static const rj_dtype corpus_types[4] = {RJ_F32, RJ_F64, RJ_F16, RJ_BF16};

static void test_source(void **state) {
    fixture *f = *state;
    size_t bytes = 0;
    double t0 = now_ms();
    for (int i = 0; i < std_corpus_count(); i++)
        for (int fi = 0; fi < 4; fi++) {
            rj_dtype ft = corpus_types[fi];
            env e = std_corpus_build(f->ctx, i, ft);
            char what[96];
            snprintf(what, sizeof what, "%s (%s)", std_corpus_name(i), rj_dtype_name(ft));
            check_source(f->ctx, e.g, what, &bytes);
            rj_graph_free(e.g);
        }
    printf("CUDA source of %d graphs (f32, f64, f16, bf16): %zu bytes in %.0f ms\n", 4 * std_corpus_count(), bytes,
           now_ms() - t0);
}

/* The unroll hint (simt/stmt.c: lanes_unroll): a warp-per-row kernel's lanes loop over D = 256
 * (8 iterations a thread) is unrolled in full, the softmax fold's lanes loop over the block (1
 * a thread) is not, OpenCL's source never carries the hint, RAGJIT_SIMT_UNROLL_LANES=0 turns
 * it off, and the setting joins nothing else: the text without it is as before. */
static void test_unroll_hints(void **state) {
    fixture *f = *state;
    static const char *const progs[2] = {
        "ragged j1 : B\ninput x : bf16[B, j1, 256]\ninput w : bf16[256]\ny = relu(x * w)\noutput y\n",
        "ragged j1 : B\ninput x : f32[B, j1, 256]\ny = softmax(x, dim=1)\noutput y\n"};
    for (int i = 0; i < 2; i++) {
        rj_graph *g = rj_graph_parse(f->ctx, progs[i], "u.rj");
        assert_non_null(g);
        char *cuda = rj_graph_dump(g, RJ_TARGET_CUDA, "cuda");
        char *ocl = rj_graph_dump(g, RJ_TARGET_OPENCL, "opencl");
        assert_non_null(cuda);
        assert_non_null(ocl);
        const char *hint = strstr(cuda, "#pragma unroll 8\n");
        if (i == 0 && (!hint || !strstr(hint, "+= 32) {")))
            fail_msg("no full unroll before the row's lanes loop:\n%s", cuda);
        if (i == 1 && strstr(cuda, "#pragma unroll")) fail_msg("an unroll hint in the softmax fold:\n%s", cuda);
        if (strstr(ocl, "#pragma unroll")) fail_msg("an unroll hint in OpenCL C");
        rj_string_free(f->ctx, cuda), rj_string_free(f->ctx, ocl);
        rj_graph_free(g);
        rj_ctx *c2 = rj_ctx_new(NULL, NULL); /* a new context: a context keeps its kernels */
        assert_non_null(c2);
        setenv("RAGJIT_SIMT_UNROLL_LANES", "0", 1);
        g = rj_graph_parse(c2, progs[i], "u.rj");
        char *off = g ? rj_graph_dump(g, RJ_TARGET_CUDA, "cuda") : NULL;
        unsetenv("RAGJIT_SIMT_UNROLL_LANES");
        assert_non_null(off);
        if (strstr(off, "#pragma unroll")) fail_msg("RAGJIT_SIMT_UNROLL_LANES=0 left a hint");
        rj_string_free(c2, off);
        rj_graph_free(g);
        rj_ctx_free(c2);
    }
}

/* Exact literals: constants round-trip, and non-finite ones are written as bits. */
static void test_constants_text(void **state) {
    fixture *f = *state;
    static const char *const want[2][4] = {
        {"__int_as_float((int)0x7fc00000u)", "__int_as_float((int)0x7f800000u)",
         "__int_as_float((int)0xff800000u)", "0.1f"},
        {"__longlong_as_double((long long)0x7ff8000000000000ull)",
         "__longlong_as_double((long long)0x7ff0000000000000ull)",
         "__longlong_as_double((long long)0xfff0000000000000ull)", "0.1)"}};
    for (rj_dtype ft = RJ_F32; ft <= RJ_F64; ft++) {
        env e = env_new(f->ctx, ft);
        std_chain_add(&e, "constants");
        rj_program *p = rj_program_new(e.g, RJ_TARGET_REFERENCE);
        char *src = rj_program_dump(p, "cuda");
        assert_non_null(src);
        for (int k = 0; k < 4; k++)
            if (!strstr(src, want[ft - RJ_F32][k]))
                fail_msg("%s source lacks %s", rj_dtype_name(ft), want[ft - RJ_F32][k]);
        assert_non_null(strstr(src, "(-2147483647 - 1)"));
        assert_non_null(strstr(src, "(-9223372036854775807LL - 1)"));
        if (ft == RJ_F32) assert_non_null(strstr(src, "1e-45f"));
        rj_string_free(f->ctx, src);
        rj_program_free(p);
        rj_graph_free(e.g);
    }
}

/* ---- NVRTC and ptxas ---------------------------------------------------------------------- */

/* What ptxas -v reported over the corpus: registers per kernel, and any spills. */
typedef struct ptx_stats {
    int kernels;
    int regs_max, regs_hist[5]; /* <= 32, <= 64, <= 96, <= 128, more */
    char worst[128];
} ptx_stats;

/* Reads ptxas -v's lines: "Compiling entry function 'k0' ...", "... N bytes spill stores, M
 * bytes spill loads", "Used R registers, ..."; fails the test on any local-memory spill. */
static void ptxas_verbose(const char *msg, const char *what, ptx_stats *ps) {
    char entry[40] = "?";
    for (const char *l = msg; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        const char *q;
        if ((q = strstr(l, "entry function '")) && q < strchr(l, '\n')) {
            sscanf(q + 16, "%39[^']", entry);
        } else if ((q = strstr(l, "bytes spill stores")) && q < strchr(l, '\n')) {
            int st = -1, ld = -1;
            const char *c = strchr(l, ',');
            if (c && sscanf(c + 1, " %d bytes spill stores, %d bytes spill loads", &st, &ld) == 2 && (st || ld))
                fail_msg("%s: kernel %s spills to local memory (%d bytes stored, %d loaded)", what, entry, st, ld);
        } else if ((q = strstr(l, "Used ")) && q < strchr(l, '\n')) {
            int r = 0;
            if (sscanf(q, "Used %d registers", &r) == 1) {
                ps->kernels++;
                ps->regs_hist[r <= 32 ? 0 : r <= 64 ? 1 : r <= 96 ? 2 : r <= 128 ? 3 : 4]++;
                if (r > ps->regs_max) {
                    ps->regs_max = r;
                    snprintf(ps->worst, sizeof ps->worst, "%.60s %s", what, entry);
                }
                if (getenv("RAGJIT_PTXAS_TABLE")) printf("  %-60s %-4s %3d registers\n", what, entry, r);
            }
        }
    }
}

/* Assembles PTX with ptxas -v for the PTX's own target; fails the test with ptxas's output. */
static void assemble(const char *ptx, const char *what, ptx_stats *ps) {
    const char *t = strstr(ptx, ".target sm_");
    assert_non_null(t);
    int arch = atoi(t + 11);
    char path[] = "/tmp/ragjit_cuda_XXXXXX.ptx";
    int fd = mkstemps(path, 4);
    assert_true(fd >= 0);
    FILE *fp = fdopen(fd, "w");
    assert_non_null(fp);
    fputs(ptx, fp);
    fclose(fp);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "%s -v -arch=sm_%d -o /dev/null %s 2>&1", PTXAS, arch, path);
    FILE *pp = popen(cmd, "r");
    assert_non_null(pp);
    static char msg[1 << 16];
    size_t n = fread(msg, 1, sizeof msg - 1, pp);
    msg[n] = 0;
    int st = pclose(pp);
    unlink(path);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("%s: ptxas -arch=sm_%d failed (status %d): %.2000s", what, arch, st, msg);
    ptxas_verbose(msg, what, ps);
}

static void test_ptx(void **state) {
    fixture *f = *state;
    bool have_ptxas = access(PTXAS, X_OK) == 0;
    double t_nvrtc = 0, t_ptxas = 0;
    int graphs = 0, kernels = 0;
    ptx_stats ps = {0};
    for (int i = 0; i < std_corpus_count(); i++)
        for (int fi = 0; fi < 4; fi++) {
            rj_dtype ft = corpus_types[fi];
            if (!in_shard((uint64_t)i)) continue; /* sliced (FX_SLICED) */
            env e = std_corpus_build(f->ctx, i, ft);
            char what[96];
            snprintf(what, sizeof what, "%s (%s)", std_corpus_name(i), rj_dtype_name(ft));
            rj_program *p = rj_program_new(e.g, RJ_TARGET_REFERENCE);
            assert_non_null(p);
            double t0 = now_ms();
            char *ptx = rj_program_dump(p, "ptx");
            t_nvrtc += now_ms() - t0;
            if (!ptx) {
                if (rj_ctx_status(f->ctx) != RJ_ERR_NO_DEVICE)
                    fail_msg("%s: NVRTC: %s", what, rj_ctx_error(f->ctx));
                printf("skipped: %s\n", rj_ctx_error(f->ctx));
                rj_program_free(p);
                rj_graph_free(e.g);
                skip();
            }
            char *loops = rj_graph_dump(e.g, RJ_TARGET_CUDA, "loops");
            assert_non_null(loops);
            char names[64][32];
            int nk = kernel_names(loops, names, 64);
            for (int k = 0; k < nk; k++) {
                char entry[96];
                snprintf(entry, sizeof entry, ".entry %.31s(", names[k]);
                if (!strstr(ptx, entry)) fail_msg("%s: no `%s` in the PTX", what, entry);
            }
            kernels += nk;
            graphs++;
            if (have_ptxas) {
                t0 = now_ms();
                assemble(ptx, what, &ps);
                t_ptxas += now_ms() - t0;
            }
            rj_string_free(f->ctx, loops);
            rj_string_free(f->ctx, ptx);
            rj_program_free(p);
            rj_graph_free(e.g);
        }
    printf("NVRTC compiled %d graphs (%d kernels) in %.0f ms", graphs, kernels, t_nvrtc);
    if (!have_ptxas) {
        printf("\nskipped: %s not found, the PTX was not assembled\n", PTXAS);
        skip();
    }
    printf("; ptxas assembled them in %.0f ms\n", t_ptxas);
    printf("ptxas -v: %d kernels, no local-memory spills; registers <= 32: %d, <= 64: %d, <= 96: %d, "
           "<= 128: %d, more: %d; most %d (%s)\n", ps.kernels, ps.regs_hist[0], ps.regs_hist[1],
           ps.regs_hist[2], ps.regs_hist[3], ps.regs_hist[4], ps.regs_max, ps.worst);
    assert_int_equal(ps.kernels, kernels + graphs); /* and each module's rj_check_offsets */
}

/* The tiled attention (lower/attention_simt.c) where real models meet it: CoRa's MHA module
 * (8 heads of 64 from one QKV projection, no scale), causal GQA, a soft cap (tanh) under a
 * causal mask, f64 heads of 32 with a bool mask, causal heads of 128 (a row over 2 threads),
 * f16 and bf16 storage (cross attention in bf16). Each must be lowered by attention_flash_simt for
 * CUDA, compile with NVRTC and assemble with ptxas without spills (q and O live in registers). */
static void test_attention_tiles(void **state) {
    fixture *f = *state;
    static const char *const text[][2] = {
        {"cora_mha",
         "ragged j1 : B\ninput x : f32[B, j1, 512]\ninput w : f32[1536, 512]\ninput bw : f32[1536]\n"
         "q, k, v = linear(x, w, bw).split(512, dim=-1)\nq = q.view(B, j1, 8, 64).transpose(1, 2)\n"
         "k = k.view(B, j1, 8, 64).transpose(1, 2)\nv = v.view(B, j1, 8, 64).transpose(1, 2)\n"
         "a = scaled_dot_product_attention(q, k, v, scale=1.0)\ny = a.transpose(1, 2).flatten(2)\noutput y\n"},
        {"gqa_causal",
         "ragged j1 : B\ninput x : f32[B, j1, 256]\ninput kv : f32[B, j1, 128]\n"
         "q = x.view(B, j1, 8, 32).transpose(1, 2)\nk = kv.view(B, j1, 4, 32).transpose(1, 2)\n"
         "y = scaled_dot_product_attention(q, k, k, is_causal=True, enable_gqa=True)\noutput y\n"},
        {"softcap_causal",
         "ragged j1 : B\ninput x : f32[B, j1, 256]\n"
         "q = x.view(B, j1, 4, 64).transpose(1, 2)\n"
         "pos = positions(j1)\nc = (pos.unsqueeze(2) >= pos.unsqueeze(1)).unsqueeze(1)\n"
         "s = 30.0 * tanh(q @ q.transpose(-2, -1) / 30.0)\n"
         "y = softmax(where(c, s, -inf), dim=-1) @ q\noutput y\n"},
        {"f64_bool_mask",
         "ragged j1 : B\ninput q : f64[B, j1, 32]\ninput k : f64[B, j1, 32]\ninput v : f64[B, j1, 16]\n"
         "input mb : bool[B, j1, j1]\nout = scaled_dot_product_attention(q, k, v, attn_mask=mb)\noutput out\n"},
        /* head dim 128 (Llama's): a row over 2 threads; causal: key tiles bounded */
        {"causal_d128",
         "ragged j1 : B\ninput x : f32[B, j1, 768]\nq, k, v = x.split(256, dim=-1)\n"
         "q = q.view(B, j1, 2, 128).transpose(1, 2)\nk = k.view(B, j1, 2, 128).transpose(1, 2)\n"
         "v = v.view(B, j1, 2, 128).transpose(1, 2)\n"
         "a = scaled_dot_product_attention(q, k, v, is_causal=True)\ny = a.transpose(1, 2).flatten(2)\noutput y\n"},
        /* 16-bit storage, widened into f32 tiles: f16 heads of 64, bf16 cross attention of 128 */
        {"f16_causal_d64",
         "ragged j1 : B\ninput x : f16[B, j1, 768]\nq, k, v = x.split(256, dim=-1)\n"
         "q = q.view(B, j1, 4, 64).transpose(1, 2)\nk = k.view(B, j1, 4, 64).transpose(1, 2)\n"
         "v = v.view(B, j1, 4, 64).transpose(1, 2)\n"
         "a = scaled_dot_product_attention(q, k, v, is_causal=True)\ny = a.transpose(1, 2).flatten(2)\noutput y\n"},
        {"bf16_cross_d128",
         "ragged j1 : B\nragged j2 : B\ninput xq : bf16[B, j1, 256]\ninput xkv : bf16[B, j2, 512]\n"
         "k, v = xkv.split(256, dim=-1)\nq = xq.view(B, j1, 2, 128).transpose(1, 2)\n"
         "k = k.view(B, j2, 2, 128).transpose(1, 2)\nv = v.view(B, j2, 2, 128).transpose(1, 2)\n"
         "a = scaled_dot_product_attention(q, k, v, is_causal=True)\ny = a.transpose(1, 2).flatten(2)\noutput y\n"},
    };
    ptx_stats ps = {0};
    for (size_t i = 0; i < sizeof text / sizeof text[0]; i++) {
        rj_graph *g = rj_graph_parse(f->ctx, text[i][1], "t.rj");
        if (!g) fail_msg("%s: %s", text[i][0], rj_ctx_error(f->ctx));
        char *loops = rj_graph_dump(g, RJ_TARGET_CUDA, "loops");
        assert_non_null(loops);
        if (!strstr(loops, "template: attention_flash_simt"))
            fail_msg("%s: not the tiled attention on CUDA:\n%.3000s", text[i][0], loops);
        rj_string_free(f->ctx, loops);
        rj_program *p = rj_program_new(g, RJ_TARGET_REFERENCE);
        assert_non_null(p);
        char *ptx = rj_program_dump(p, "ptx");
        if (!ptx) {
            if (rj_ctx_status(f->ctx) != RJ_ERR_NO_DEVICE) fail_msg("%s: NVRTC: %s", text[i][0], rj_ctx_error(f->ctx));
            printf("skipped: %s\n", rj_ctx_error(f->ctx));
            rj_program_free(p);
            rj_graph_free(g);
            skip();
        }
        if (access(PTXAS, X_OK) == 0) assemble(ptx, text[i][0], &ps);
        rj_string_free(f->ctx, ptx);
        rj_program_free(p);
        rj_graph_free(g);
    }
    printf("tiled attention: %d kernels assembled without spills, most %d registers (%s)\n", ps.kernels,
           ps.regs_max, ps.worst);
}

/* ---- allocation failures ------------------------------------------------------------------ */

/* Dumps `stage` of a small graph with the nth allocation of the dump failing (0: none). */
static rj_status dump_failing(tracker *tr, const char *stage, long nth, long *attempts) {
    rj_ctx *ctx = rj_ctx_new(tracking_alloc, tr);
    assert_non_null(ctx);
    env e = env_new(ctx, RJ_F32);
    std_chain_add(&e, "softmax(relu(x*w+v), dim=1)");
    std_chain_add(&e, "sum(pad(x,0.75,L),1)");
    std_chain_add(&e, "gelu(layer_norm(x)+0.1)");
    rj_program *p = rj_program_new(e.g, RJ_TARGET_REFERENCE);
    assert_non_null(p);
    long before = tr->attempts;
    tr->fail_at = nth ? before + nth : 0;
    char *text = rj_program_dump(p, stage);
    rj_status st = text ? RJ_OK : rj_ctx_status(ctx);
    tr->fail_at = 0;
    *attempts = tr->attempts - before;
    rj_string_free(ctx, text);
    rj_program_free(p);
    rj_graph_free(e.g);
    rj_ctx_free(ctx);
    return st;
}

/* Every allocation of the "cuda" and "ptx" dumps fails once: RJ_ERR_NOMEM, nothing leaks. */
static void test_alloc_failures(void **state) {
    (void)state;
    static const char *const stages[] = {"cuda", "ptx"};
    for (int k = 0; k < 2; k++) {
        tracker clean = {0};
        long total;
        rj_status st = dump_failing(&clean, stages[k], 0, &total);
        if (st == RJ_ERR_NO_DEVICE) {
            printf("alloc sweep (ptx) skipped: NVRTC is not available\n");
            continue;
        }
        assert_int_equal(st, RJ_OK);
        assert_int_equal(clean.live_blocks, 0);
        for (long nth = 1; nth <= total; nth++) {
            tracker tr = {0};
            long n;
            st = dump_failing(&tr, stages[k], nth, &n);
            if (st != RJ_ERR_NOMEM)
                fail_msg("%s: failing allocation %ld of %ld gave %s", stages[k], nth, total, rj_status_str(st));
            if (tr.live_blocks || tr.bad_size)
                fail_msg("%s: failing allocation %ld of %ld leaked %ld blocks", stages[k], nth, total, tr.live_blocks);
        }
        printf("alloc sweep (%s dump): %ld allocation points, each failed once\n", stages[k], total);
    }
}

/* ---- the RJ_TARGET_CUDA program ------------------------------------------------------------ */

/* Without a device the program fails cleanly; with one, test_device_runs covers it. */
static void test_no_device(void **state) {
    fixture *f = *state;
    env e = env_new(f->ctx, RJ_F32);
    std_chain_add(&e, "softmax(relu(x*w+v), dim=1)");
    for (int round = 0; round < 2; round++) { /* the second time from the cached driver state */
        rj_program *p = rj_program_new(e.g, RJ_TARGET_CUDA);
        if (p) {
            rj_program_free(p);
            rj_graph_free(e.g);
            printf("skipped: a CUDA device is present (test_device_runs checks results)\n");
            skip();
        }
        assert_int_equal(rj_ctx_status(f->ctx), RJ_ERR_NO_DEVICE);
        assert_error_contains(f->ctx, "no CUDA device");
        if (round == 0) printf("rj_program_new(RJ_TARGET_CUDA): %s\n", rj_ctx_error(f->ctx));
    }
    double gbs = 1;
    assert_int_equal(rj_device_copy_bandwidth(f->ctx, RJ_TARGET_CUDA, 1 << 20, &gbs), RJ_ERR_NO_DEVICE);
    assert_true(gbs == 0);
    rj_graph_free(e.g);
}

/* Where a device exists: the kernels are timed by events, and the copy probe measures the
 * device's memory. */
static void test_device_stats(void **state) {
    fixture *f = *state;
    env e = env_new(f->ctx, RJ_F32);
    std_chain_add(&e, "sum(pad(x,0.75,L),1)");
    rj_program *p = rj_program_new(e.g, RJ_TARGET_CUDA);
    if (!p) {
        rj_graph_free(e.g);
        printf("skipped: %s\n", rj_ctx_error(f->ctx));
        skip();
    }
    data d = data_new(LEN_ONE_LONG, RJ_F32, 5);
    rj_bind *b = rj_bind_new(p);
    assert_non_null(b);
    bind_all(f->ctx, b, &e, &d, NULL);
    assert_int_equal(rj_program_run(p, b), RJ_OK);
    rj_run_stats st;
    assert_int_equal(rj_bind_stats(b, &st), RJ_OK);
    assert_int_equal(st.kernels, 2); /* the fold and the combine of the sum */
    assert_true(st.kernel_ms > 0 && st.run_ms >= st.kernel_ms);
    double gbs = 0;
    assert_int_equal(rj_device_copy_bandwidth(f->ctx, RJ_TARGET_CUDA, 64 << 20, &gbs), RJ_OK);
    printf("kernels %.3f ms (events), copies %.3f ms; copy probe %.1f GB/s\n", st.kernel_ms, st.copy_ms, gbs);
    assert_true(gbs > 0);
    rj_bind_free(b);
    data_free(&d);
    rj_program_free(p);
    rj_graph_free(e.g);
}

/* Where a device exists: the corpus against the interpreter on every length pattern, with
 * packed inputs and then with inputs as views with holes; every allocation of compiling and
 * running fails once. */
static void test_device_runs(void **state) { std_corpus_run(((fixture *)*state)->ctx, RJ_TARGET_CUDA, STD_PACKED); }
static void test_device_holes(void **state) { std_corpus_run(((fixture *)*state)->ctx, RJ_TARGET_CUDA, STD_HOLES); }
/* The whole corpus in f16 and bf16 (__half, __nv_bfloat16, f32 arithmetic) against the
 * interpreter, which rounds at the same points (every length pattern, packed inputs). */
static void test_device_half(void **state) {
    std_corpus_run_types(((fixture *)*state)->ctx, RJ_TARGET_CUDA, STD_PACKED, RJ_F16, RJ_BF16, NULL);
}
static void test_device_random(void **state) { std_random_run(((fixture *)*state)->ctx, RJ_TARGET_CUDA, 16); }
/* Where a device exists: a device-resident run with trusted offsets on the caller's stream is
 * captured into a CUDA graph, and the graph replayed on new data gives the CPU's results. */
typedef struct cudrv {
    int (*StreamCreate)(void **, unsigned);
    int (*StreamDestroy)(void *);
    int (*StreamSynchronize)(void *);
    int (*BeginCapture)(void *, int);
    int (*EndCapture)(void *, void **);
    int (*Instantiate)(void **, void *, unsigned long long);
    int (*GraphLaunch)(void *, void *);
    int (*GraphExecDestroy)(void *);
    int (*GraphDestroy)(void *);
    int (*MemAlloc)(uint64_t *, size_t);
    int (*MemFree)(uint64_t);
    int (*HtoD)(uint64_t, const void *, size_t);
    int (*DtoH)(void *, uint64_t, size_t);
} cudrv;

static void test_device_graph(void **state) {
    fixture *f = *state;
    rj_ctx *ctx = f->ctx;
    rj_graph *g = rj_graph_parse(ctx, "ragged j : B\ninput x : f32[B, j, 8]\ninput w : f32[8]\n"
                                      "y = relu(x * w)\ns = softmax(x, dim=1)\noutput y\noutput s\n", "g.rj");
    assert_non_null(g);
    rj_program *p = rj_program_new(g, RJ_TARGET_CUDA);
    if (!p) {
        printf("skipped: %s\n", rj_ctx_error(ctx));
        rj_graph_free(g);
        skip();
    }
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    assert_non_null(lib);
    cudrv cu = {0};
    static const char *const names[] = {"cuStreamCreate", "cuStreamDestroy_v2", "cuStreamSynchronize",
                                         "cuStreamBeginCapture_v2", "cuStreamEndCapture", "cuGraphInstantiateWithFlags",
                                         "cuGraphLaunch", "cuGraphExecDestroy", "cuGraphDestroy", "cuMemAlloc_v2",
                                         "cuMemFree_v2", "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2"};
    void **slots = (void **)&cu;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!(slots[i] = dlsym(lib, names[i]))) fail_msg("libcuda.so.1 lacks %s", names[i]);
    void *cx = NULL;
    assert_ok(ctx, rj_device_handles(ctx, RJ_TARGET_CUDA, &cx, NULL)); /* and current */
    enum { B = 6, ROWS = 40 };
    int64_t off[B + 1] = {0, 3, 3, 11, 12, 30, ROWS};
    float x[ROWS * 8], w[8];
    for (int i = 0; i < 8; i++) w[i] = 0.5f + (float)i / 8;
    uint64_t dx = 0, dw = 0, doff = 0;
    assert_int_equal(cu.MemAlloc(&dx, sizeof x), 0);
    assert_int_equal(cu.MemAlloc(&dw, sizeof w), 0);
    assert_int_equal(cu.MemAlloc(&doff, sizeof off), 0);
    assert_int_equal(cu.HtoD(dw, w, sizeof w), 0);
    assert_int_equal(cu.HtoD(doff, off, sizeof off), 0);
    void *stream = NULL;
    assert_int_equal(cu.StreamCreate(&stream, 1 /* CU_STREAM_NON_BLOCKING */), 0);
    rj_node nx = rj_graph_find(g, "x"), nw = rj_graph_find(g, "w"), ny = rj_graph_find(g, "y"), ns = rj_graph_find(g, "s");
    rj_dim J = rj_graph_find_dim(g, "j");
    rj_bind *b = rj_bind_new(p);
    assert_ok(ctx, rj_bind_stream(b, stream));
    assert_ok(ctx, rj_bind_offsets_device(b, J, B, doff, 0));
    assert_ok(ctx, rj_bind_offsets_info(b, J, ROWS, 18));
    assert_ok(ctx, rj_bind_trust_offsets(b, true));
    assert_ok(ctx, rj_bind_input_device(b, nx, dx, ROWS * 8));
    assert_ok(ctx, rj_bind_input_device(b, nw, dw, 8));
    assert_ok(ctx, rj_bind_output_device(b, ny, 0, 0));
    assert_ok(ctx, rj_bind_output_device(b, ns, 0, 0));
    for (int i = 0; i < ROWS * 8; i++) x[i] = (float)((i * 13) % 17) / 8.0f - 1.0f;
    assert_int_equal(cu.HtoD(dx, x, sizeof x), 0);
    assert_ok(ctx, rj_program_run(p, b)); /* warm: the binding's device memory and tables */
    assert_ok(ctx, rj_bind_wait(b));
    void *graph = NULL, *exec = NULL;
    assert_int_equal(cu.BeginCapture(stream, 2 /* relaxed */), 0);
    rj_status st = rj_program_run(p, b);
    assert_int_equal(cu.EndCapture(stream, &graph), 0);
    if (st) fail_msg("a run under stream capture failed: %s", rj_ctx_error(ctx));
    assert_non_null(graph);
    assert_int_equal(cu.Instantiate(&exec, graph, 0), 0);
    rj_devptr dy = 0, ds = 0;
    assert_ok(ctx, rj_bind_result_device(b, ny, &dy, NULL));
    assert_ok(ctx, rj_bind_result_device(b, ns, &ds, NULL));
    rj_program *pc = rj_program_new(g, RJ_TARGET_CPU);
    rj_bind *bc = rj_bind_new(pc);
    assert_ok(ctx, rj_bind_offsets(bc, J, B, off, NULL));
    assert_ok(ctx, rj_bind_input(bc, nx, x, ROWS * 8));
    assert_ok(ctx, rj_bind_input(bc, nw, w, 8));
    for (int rep = 0; rep < 3; rep++) { /* new data, the same graph */
        for (int i = 0; i < ROWS * 8; i++) x[i] = (float)((i * 7 + rep * 5) % 23) / 4.0f - 2.5f;
        assert_int_equal(cu.HtoD(dx, x, sizeof x), 0);
        assert_int_equal(cu.GraphLaunch(exec, stream), 0);
        assert_int_equal(cu.StreamSynchronize(stream), 0);
        float y[ROWS * 8], s[ROWS * 8];
        assert_int_equal(cu.DtoH(y, dy, sizeof y), 0);
        assert_int_equal(cu.DtoH(s, ds, sizeof s), 0);
        assert_ok(ctx, rj_program_run(pc, bc));
        rj_tensor_info wy, ws;
        assert_ok(ctx, rj_tensor_get_info(rj_bind_result(bc, ny), &wy));
        assert_ok(ctx, rj_tensor_get_info(rj_bind_result(bc, ns), &ws));
        for (int i = 0; i < ROWS * 8; i++) {
            if (fabsf(y[i] - ((const float *)wy.values)[i]) > 1e-6f) fail_msg("graph replay %d: y[%d] differs", rep, i);
            if (fabsf(s[i] - ((const float *)ws.values)[i]) > 1e-5f) fail_msg("graph replay %d: s[%d] differs", rep, i);
        }
    }
    printf("a device-resident run captured into a CUDA graph and replayed 3 times on new data\n");
    cu.GraphExecDestroy(exec);
    cu.GraphDestroy(graph);
    rj_bind_free(bc);
    rj_program_free(pc);
    rj_bind_free(b);
    cu.StreamDestroy(stream);
    cu.MemFree(dx), cu.MemFree(dw), cu.MemFree(doff);
    rj_program_free(p);
    rj_graph_free(g);
    dlclose(lib);
}

static void test_index_errors(void **state) {
    (void)state;
    std_index_errors(RJ_TARGET_CUDA);
}

static void test_device_alloc_failures_device(void **state) {
    (void)state;
    std_alloc_sweep_mode(RJ_TARGET_CUDA, true);
}

static void test_device_alloc_failures(void **state) {
    (void)state;
    std_alloc_sweep(RJ_TARGET_CUDA);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        FX(test_source), FX(test_unroll_hints), FX(test_constants_text), FX_SLICED(test_ptx), FX(test_attention_tiles), FX(test_alloc_failures),
        FX(test_no_device), FX(test_device_stats),
        FX(test_device_runs), FX(test_device_holes), FX(test_device_half), FX(test_device_random), FX(test_device_alloc_failures), FX(test_index_errors),
        FX(test_device_alloc_failures_device), FX(test_device_graph),
    };
    return run_group(tests, NULL, NULL, argc, argv);
}
