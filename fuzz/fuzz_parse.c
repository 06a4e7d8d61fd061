/*
 * fuzz_parse.c — the fuzzer's bytes as a program in the text format.
 *
 * The parser is the one part of ragjit that reads text from people and from other programs,
 * so it must turn anything at all into either a graph or one located error. This harness
 * parses the bytes and then drives everything a parsed program reaches without code
 * generation:
 *
 *   - every target-neutral dump (graph, opt, fused, loops, dot) for the CPU's descriptor and
 *     the loop IR and CUDA C for the CUDA descriptor: the whole pipeline (verify, canonicalise,
 *     pad elimination, fusion) and both lowerings, with no LLVM and no device;
 *   - the printer as the parser's inverse: the printed graph must parse again, print the
 *     same text (the fixed point test_parse checks for a few programs, here for all of them)
 *     and lower to the same loops (the same meaning, not only the same spelling);
 *   - a run on the reference target with small data derived from the bytes, results read to
 *     the last byte.
 *
 * The CPU target's own stages (llvm, llvm-opt, asm) and CPU programs are never asked for:
 * an LLVM compile costs milliseconds, a thousand times a parse, and would starve the search.
 *
 * Each input runs twice: once as is, counting allocations, then again with one allocation
 * (chosen by a hash of the bytes) failing, so that every error path the input reaches gets
 * its turn at running out of memory. Both runs must end without a leak.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"


static void trace_status(rj_ctx *ctx, const char *what) {
    if (fz_tracing()) fprintf(stderr, "%s: %s: %s\n", what, rj_status_str(rj_ctx_status(ctx)),
                       rj_ctx_error(ctx));
}

static void dump(rj_ctx *ctx, rj_graph *g, rj_target t, const char *stage) {
    fz_clear(ctx);
    fz_string(ctx, rj_graph_dump(g, t, stage), stage);
}

/* print(parse(src)) parses, prints the same text and compiles to the same loops. */
static void check_fixed_point(rj_ctx *ctx, rj_graph *g) {
    fz_clear(ctx);
    char *text = rj_graph_dump(g, RJ_TARGET_REFERENCE, "graph");
    if (!text) fz_die("the graph stage of a parsed program failed: %s", rj_ctx_error(ctx));
    fz_clear(ctx);
    rj_graph *g2 = rj_graph_parse(ctx, text, "printed.rj");
    if (!g2) fz_die("the printed program does not parse: %s\n--- printed:\n%s", rj_ctx_error(ctx), text);
    char *text2 = rj_graph_dump(g2, RJ_TARGET_REFERENCE, "graph");
    if (!text2) fz_die("the graph stage of a re-parsed program failed: %s", rj_ctx_error(ctx));
    if (strcmp(text, text2))
        fz_die("printing is not a fixed point:\n--- first:\n%s\n--- second:\n%s", text, text2);
    /* and the printed program means the same: it lowers to the same loops (names of
     * intermediates may differ, so the opt and fused stages are not compared) */
    char *l1 = rj_graph_dump(g, RJ_TARGET_CPU, "loops"), *l2 = rj_graph_dump(g2, RJ_TARGET_CPU, "loops");
    if (!l1 != !l2 || (l1 && strcmp(l1, l2)))
        fz_die("the printed program lowers differently:\n--- printed:\n%s\n--- loops:\n%s\n--- "
               "loops of the printed program:\n%s", text, l1 ? l1 : rj_ctx_error(ctx),
               l2 ? l2 : rj_ctx_error(ctx));
    rj_string_free(ctx, l1);
    rj_string_free(ctx, l2);
    rj_string_free(ctx, text);
    rj_string_free(ctx, text2);
    rj_graph_free(g2);
}

static void run_reference(rj_ctx *ctx, rj_graph *g, uint64_t seed) {
    fz_clear(ctx);
    rj_program *p = rj_program_new(g, RJ_TARGET_REFERENCE);
    if (!p) {
        fz_failed(ctx, "rj_program_new");
        return;
    }
    fz_clear(ctx);
    rj_bind *b = rj_bind_new(p);
    if (!b) fz_failed(ctx, "rj_bind_new");
    fz_arena arena = {0};
    fz_sizes sizes;
    if (b && fz_bind_all(ctx, b, g, &seed, &arena, &sizes)) {
        rj_node outs[64];
        int n = rj_graph_output_count(g);
        n = n < 64 ? n : 64;
        for (int i = 0; i < n; i++) outs[i] = rj_graph_output_at(g, i);
        for (int rep = 0; rep < 2; rep++) { /* the second run reuses the binding's memory */
            fz_clear(ctx);
            if (rj_program_run(p, b) == RJ_OK) fz_check_results(ctx, b, outs, n);
            else fz_failed(ctx, "rj_program_run");
            trace_status(ctx, "run");
        }
    } else if (fz_tracing()) {
        fprintf(stderr, "run: not bound (sizes too large for the harness)\n");
    }
    rj_bind_free(b);
    rj_program_free(p);
    fz_arena_free(&arena);
}

/* One parse and everything after it; returns the allocation attempts it made. */
static long parse_and_use(const char *src, uint64_t seed, long fail_at) {
    fz_mem m = {.tr = {.fail_at = fail_at}};
    rj_ctx *ctx = fz_ctx_new(&m);
    if (!ctx) return m.tr.attempts;
    rj_graph *g = rj_graph_parse(ctx, src, "fuzz.rj");
    trace_status(ctx, "parse");
    if (!g) {
        fz_failed(ctx, "rj_graph_parse");
        const char *msg = rj_ctx_error(ctx);
        if (rj_ctx_status(ctx) != RJ_ERR_NOMEM && strncmp(msg, "fuzz.rj:", 8))
            fz_die("a parse error not located in the source: %s", msg);
    } else {
        static const char *const cpu_stages[] = {"graph", "opt", "fused", "loops", "dot"};
        for (size_t i = 0; i < FZ_LEN(cpu_stages); i++)
            dump(ctx, g, RJ_TARGET_CPU, cpu_stages[i]);
        dump(ctx, g, RJ_TARGET_CUDA, "loops");
        dump(ctx, g, RJ_TARGET_CUDA, "cuda");
        if (!fail_at) check_fixed_point(ctx, g);
        run_reference(ctx, g, seed);
        rj_graph_free(g);
    }
    return fz_ctx_free(ctx, &m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *src = malloc(size + 1);
    if (!src) return 0;
    memcpy(src, data, size);
    src[size] = 0;
    uint64_t h = fz_hash(data, size);
    long attempts = parse_and_use(src, h, 0);
    if (attempts > 0) parse_and_use(src, h, 1 + (long)(h % (uint64_t)attempts));
    free(src);
    return 0;
}
