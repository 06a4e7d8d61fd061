/*
 * fuzz_api.c — the fuzzer's bytes as a sequence of C API calls.
 *
 * ragjit.h promises that nothing a caller passes crashes the library: bad ids, RJ_NONE, wrong
 * dims, invalid enums, malformed offsets, buffers of the wrong size all end in a status and a
 * message, and every object can be freed in any order. This harness holds it to that. The
 * bytes are a small program for an interpreter of API calls, in three parts:
 *
 *   header   allocation failure (a first byte >= 0x80 and the next one choose which
 *            allocation fails, 1..32768) and the order of the final frees;
 *   graph    builder calls (dims, symbols, `same`, inputs, scalars, every op family, outputs),
 *            introspection and dumps, with operands picked from the nodes returned so far or
 *            from a list of invalid ones (RJ_NONE, out-of-range ids), dims from the symbols,
 *            small constants and invalid values, until an END byte;
 *   run      programs (reference target only), bindings, sizes, offsets derived from the
 *            bytes (valid, decreasing, bad start or end, holes, negative, huge), inputs and
 *            outputs (right size, wrong size, aliasing, NULL), tensors bound as inputs,
 *            runs, results, dumps and frees, in any order.
 *
 * When the bytes run out the harness finishes the story itself: if nothing was run, it
 * compiles the graph, binds valid data and runs it, so that short inputs reach the
 * interpreter too. Then everything still alive is freed in the order the header chose, and
 * the tracker must find nothing left.
 *
 * Every call is checked (fuzz.h): a failure must leave a status and a message (builders that
 * fail quietly on an already failed graph excepted), a successful run must give a readable
 * result for every output, and after a failed run rj_bind_result must refuse. Memory the
 * harness lends (offsets, inputs, outputs) lives until the very end, because bindings borrow
 * it; sizes are kept small so that each input runs in milliseconds.
 *
 * The seeds in fuzz/corpus/api/ were written by hand in this encoding (a ragged softmax with
 * reductions and pad/unpad, broadcasting with norms and selects, `same` symbols bound through
 * tensors, explicit pad lengths, invalid operands, and one of them failing an allocation in a
 * dump, in rj_bind_new and in a run); those named regress-* are inputs it once failed on (an
 * item of 2^63 - 1 empty rows overflowed the interpreter's sums of squared lengths). FUZZ_TRACE=1
 * prints what an input does, step by step.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

#define MAX_NODES 256
#define MAX_LIST 64
#define NPROG 2
#define NBIND 3
#define NTENSOR 6

typedef struct api {
    fz_bytes in;
    fz_mem mem;
    rj_ctx *ctx;
    rj_graph *g;                    /* NULL once freed */
    rj_node nodes[MAX_NODES];       /* every node a builder returned, RJ_NONE included */
    int nnodes;
    rj_node ins[MAX_LIST], outs[MAX_LIST];
    int nins, nouts;
    rj_dim syms[MAX_LIST];          /* symbols returned by rj_graph_dense / rj_graph_ragged */
    int nsyms;
    rj_program *prog[NPROG];
    int prog_nouts[NPROG];          /* outputs the graph had when the program was made */
    unsigned prog_gen[NPROG];       /* programs made in the slot so far */
    rj_bind *bind[NBIND];
    int bind_prog[NBIND];           /* the program (slot, generation) it was made for */
    unsigned bind_gen[NBIND];
    fz_sizes sizes[NBIND];          /* what the harness bound, for element counts */
    rj_tensor *tensor[NTENSOR];
    const void *last_data;          /* the last input buffer, to alias outputs with */
    int64_t last_elems;             /* its size in 8-byte elements */
    fz_arena arena;
    uint64_t rng;
    bool ran;
} api;

static void trace_step(api *s, const char *phase, unsigned op) {
    if (fz_tracing())
        fprintf(stderr, "%s %u (allocations %ld): %s: %s\n", phase, op, s->mem.tr.attempts,
                rj_status_str(rj_ctx_status(s->ctx)), rj_ctx_error(s->ctx));
}

/* ---- picking values from the bytes --------------------------------------------------- */

static unsigned byte(api *s) { return fz_byte(&s->in); }

static rj_node pick_node(api *s) {
    static const rj_node odd[] = {RJ_NONE, -2, 0, 1, 4096, INT32_MAX, INT32_MIN, MAX_NODES};
    unsigned b = byte(s);
    return b < 0xf0 && s->nnodes ? s->nodes[b % (unsigned)s->nnodes] : odd[b % 8];
}

/* An input (or output) node most of the time, anything now and then. */
static rj_node pick_from(api *s, const rj_node *list, int n) {
    unsigned b = byte(s);
    return b < 0xc0 && n ? list[b % (unsigned)n] : pick_node(s);
}

static int sym_count(api *s) {
    return s->g ? rj_graph_dim_count(s->g) : s->nsyms;
}

static rj_dim sym_at(api *s, int i) {
    return s->g ? rj_graph_dim_at(s->g, i) : s->syms[i];
}

static rj_dim pick_dim(api *s) {
    static const rj_dim consts[] = {0, 1, 2, 3, 4, 5, 8, 64};
    static const rj_dim odd[] = {RJ_DIM_NONE, -1000, -1, INT64_MAX, (rj_dim)1 << 40, -2, 7,
                                 (rj_dim)1 << 20};
    unsigned b = byte(s);
    int n = sym_count(s);
    switch (b & 3) {
    case 0: return consts[(b >> 2) % 8];
    case 3: return odd[(b >> 2) % 8];
    default: return n ? sym_at(s, (int)((b >> 2) % (unsigned)n)) : consts[(b >> 2) % 8];
    }
}

static const char *pick_name(api *s) {
    static const char *const names[] = {
        "B", "D", "L", "j1", "j2", "k", "x", "y", "w", "out", "h", "max(j1)", "", "two words",
        "x\n", "_", "B2", "in", NULL,
        "a_name_that_is_much_longer_than_any_buffer_a_parser_or_printer_might_keep_for_it_"
        "because_callers_can_pass_anything_at_all_and_ragjit_must_cope_with_that_0123456789"};
    return names[byte(s) % FZ_LEN(names)];
}

static double pick_double(api *s) {
    static const double v[] = {0.0, 1.0, -1.0, 0.5, 2.0, -INFINITY, INFINITY, NAN, 1e-5,
                               -1e9, 1e300, -0.0, 3.0, 1e-320, 65504.0, -2.5};
    return v[byte(s) % FZ_LEN(v)];
}

static int64_t pick_i64(api *s) {
    static const int64_t v[] = {0, 1, -1, 2, 3, 4, INT64_MAX, INT64_MIN, (int64_t)1 << 40,
                                -5, 7, 16};
    return v[byte(s) % FZ_LEN(v)];
}

static rj_dtype pick_dtype(api *s) {
    static const int v[] = {RJ_BOOL, RJ_I32, RJ_I64, RJ_F32, RJ_F64, RJ_F16, RJ_BF16, RJ_DTYPE_COUNT, -1};
    return (rj_dtype)v[byte(s) % FZ_LEN(v)];
}

static rj_op pick_op(api *s) {
    unsigned b = byte(s) % (RJ_OP_COUNT + 2);
    return b == RJ_OP_COUNT + 1 ? (rj_op)-1 : (rj_op)b;
}

static int pick_int(api *s) { return (int)(int8_t)byte(s); }

/* ---- the graph ------------------------------------------------------------------------ */

static void note_node(api *s, rj_node r, rj_status before, const char *call) {
    if (r == RJ_NONE) fz_failed_builder(s->ctx, before, call);
    else if (r < 0 || rj_node_shape(s->g, r, NULL) < 0)
        fz_die("%s returned %d, not a node of the graph", call, (int)r);
    else if (rj_graph_status(s->g) != before)
        fz_die("%s succeeded but changed the graph's status", call);
    if (s->nnodes < MAX_NODES) s->nodes[s->nnodes++] = r;
}

static void note_dim(api *s, rj_dim d, rj_status before, const char *call) {
    if (d == RJ_DIM_NONE) fz_failed_builder(s->ctx, before, call);
    else if (s->nsyms < MAX_LIST) s->syms[s->nsyms++] = d;
}

static void note_status(api *s, rj_status st, rj_status before, const char *call) {
    if ((unsigned)st >= RJ_STATUS_COUNT) fz_die("%s returned status %d", call, (int)st);
    if (st != RJ_OK) fz_failed_builder(s->ctx, before, call);
}

static void introspect(api *s) {
    rj_graph *g = s->g;
    rj_ctx *ctx = s->ctx;
    rj_dim dims[RJ_MAX_RANK];
    rj_dim_info info;
    int i = pick_int(s);
    fz_clear(ctx);
    switch (byte(s) % 8) {
    case 0: fz_string(ctx, rj_node_type_str(g, pick_node(s)), "rj_node_type_str"); break;
    case 1: {
        rj_node n = pick_node(s);
        int rank = rj_node_shape(g, n, dims);
        if (rank > RJ_MAX_RANK) fz_die("rj_node_shape gave rank %d", rank);
        const char *name = rj_node_name(g, n);
        if (name) fz_string(ctx, rj_node_type_str(g, n), "rj_node_type_str");
        (void)rj_node_dtype(g, n);
        break;
    }
    case 2:
        if (rj_dim_get_info(g, pick_dim(s), &info) != RJ_OK) fz_failed(ctx, "rj_dim_get_info");
        else if (info.name && !*info.name && info.kind != RJ_DIM_CONST)
            fz_die("a symbol without a name");
        break;
    case 3: (void)rj_graph_find(g, pick_name(s)); break;
    case 4: {
        const char *nm = pick_name(s);
        if (nm) (void)rj_graph_find_dim(g, nm);
        break;
    }
    case 5:
        if (rj_graph_input_at(g, i) == RJ_NONE) fz_failed(ctx, "rj_graph_input_at");
        fz_clear(ctx);
        if (!rj_graph_input_name(g, i)) fz_failed(ctx, "rj_graph_input_name");
        break;
    case 6:
        if (rj_graph_output_at(g, i) == RJ_NONE) fz_failed(ctx, "rj_graph_output_at");
        fz_clear(ctx);
        if (!rj_graph_output_name(g, i)) fz_failed(ctx, "rj_graph_output_name");
        break;
    default: {
        const char *nm = rj_dim_name(g, pick_dim(s));
        if (nm && !*nm) fz_die("rj_dim_name gave an empty name");
        break;
    }
    }
}

/* Stages that need no code generator: never llvm, llvm-opt, asm (LLVM) or ptx (NVRTC). */
static const char *pick_stage(api *s) {
    static const char *const st[] = {"graph", "opt", "fused", "loops", "dot", "cuda", "bogus",
                                     NULL};
    return st[byte(s) % FZ_LEN(st)];
}

static rj_target pick_target(api *s) {
    static const int t[] = {RJ_TARGET_REFERENCE, RJ_TARGET_CPU, RJ_TARGET_CUDA, 7, -1};
    return (rj_target)t[byte(s) % FZ_LEN(t)];
}

/* Targets for programs: never the CPU, whose programs are compiled by LLVM. CUDA fails
 * without a device, quickly. */
static rj_target pick_program_target(api *s) {
    static const int t[] = {RJ_TARGET_CUDA, 7, -1};
    return (rj_target)t[byte(s) % FZ_LEN(t)];
}

enum {
    G_END, G_DENSE, G_RAGGED, G_SAME, G_INPUT, G_SCALAR, G_SCALAR_INT, G_SCALAR_BOOL, G_UNARY,
    G_BINARY, G_WHERE, G_MASKED_FILL, G_CAST, G_REDUCE, G_SOFTMAX, G_LAYER_NORM, G_RMS_NORM,
    G_PAD, G_UNPAD, G_OUTPUT, G_INTROSPECT, G_DUMP, G_INDEX, G_VIEW, G_MATMUL, G_COUNT
};

/* One builder call; false at the END byte. */
static bool graph_step(api *s) {
    rj_graph *g = s->g;
    rj_ctx *ctx = s->ctx;
    unsigned op = byte(s) % G_COUNT;
    rj_status before = rj_graph_status(g);
    fz_clear(ctx); /* picking operands never touches the context's error */
    switch (op) {
    case G_END: return false;
    case G_DENSE: {
        const char *nm = pick_name(s);
        note_dim(s, rj_graph_dense(g, nm), before, "rj_graph_dense");
        break;
    }
    case G_RAGGED: {
        const char *nm = pick_name(s);
        rj_dim parent = pick_dim(s);
        note_dim(s, rj_graph_ragged(g, nm, parent), before, "rj_graph_ragged");
        break;
    }
    case G_SAME: {
        rj_dim a = pick_dim(s), b = pick_dim(s);
        note_status(s, rj_graph_same(g, a, b), before, "rj_graph_same");
        break;
    }
    case G_INPUT: {
        const char *nm = pick_name(s);
        rj_dtype t = pick_dtype(s);
        int rank = (int)(byte(s) % 11) - 1;
        rj_dim dims[RJ_MAX_RANK + 1];
        for (int k = 0; k < rank && k <= RJ_MAX_RANK; k++) dims[k] = pick_dim(s);
        bool null_dims = byte(s) % 16 == 0;
        rj_node n = rj_graph_input(g, nm, t, rank, null_dims ? NULL : dims);
        note_node(s, n, before, "rj_graph_input");
        if (n != RJ_NONE && s->nins < MAX_LIST) s->ins[s->nins++] = n;
        break;
    }
    case G_SCALAR: {
        double v = pick_double(s);
        note_node(s, rj_graph_scalar(g, v), before, "rj_graph_scalar");
        break;
    }
    case G_SCALAR_INT: {
        int64_t v = pick_i64(s);
        note_node(s, rj_graph_scalar_int(g, v), before, "rj_graph_scalar_int");
        break;
    }
    case G_SCALAR_BOOL:
        note_node(s, rj_graph_scalar_bool(g, byte(s) & 1), before, "rj_graph_scalar_bool");
        break;
    case G_UNARY: {
        rj_op o = pick_op(s);
        rj_node x = pick_node(s);
        note_node(s, rj_graph_unary(g, o, x), before, "rj_graph_unary");
        break;
    }
    case G_BINARY: {
        rj_op o = pick_op(s);
        rj_node a = pick_node(s), b = pick_node(s);
        note_node(s, rj_graph_binary(g, o, a, b), before, "rj_graph_binary");
        break;
    }
    case G_WHERE: {
        rj_node c = pick_node(s), a = pick_node(s), b = pick_node(s);
        note_node(s, rj_graph_where(g, c, a, b), before, "rj_graph_where");
        break;
    }
    case G_MASKED_FILL: {
        rj_node x = pick_node(s), m = pick_node(s);
        double v = pick_double(s);
        note_node(s, rj_graph_masked_fill(g, x, m, v), before, "rj_graph_masked_fill");
        break;
    }
    case G_CAST: {
        rj_node x = pick_node(s);
        rj_dtype t = pick_dtype(s);
        note_node(s, rj_graph_cast(g, x, t), before, "rj_graph_cast");
        break;
    }
    case G_REDUCE: {
        rj_op o = pick_op(s);
        rj_node x = pick_node(s);
        int dim = pick_int(s);
        bool keep = byte(s) & 1;
        note_node(s, rj_graph_reduce(g, o, x, dim, keep), before, "rj_graph_reduce");
        break;
    }
    case G_SOFTMAX: {
        bool log = byte(s) & 1;
        rj_node x = pick_node(s);
        int dim = pick_int(s);
        note_node(s, log ? rj_graph_log_softmax(g, x, dim) : rj_graph_softmax(g, x, dim), before,
                  "rj_graph_softmax");
        break;
    }
    case G_LAYER_NORM:
    case G_RMS_NORM: {
        unsigned flags = byte(s);
        rj_node x = pick_node(s);
        int nd = pick_int(s);
        rj_node w = flags & 1 ? pick_node(s) : RJ_NONE, b = flags & 2 ? pick_node(s) : RJ_NONE;
        double eps = flags & 4 ? pick_double(s) : -1.0;
        rj_node r = op == G_LAYER_NORM ? rj_graph_layer_norm(g, x, nd, w, b, eps)
                                       : rj_graph_rms_norm(g, x, nd, w, eps);
        note_node(s, r, before, "rj_graph_layer_norm / rms_norm");
        break;
    }
    case G_PAD: {
        rj_node x = pick_node(s);
        double v = pick_double(s);
        rj_dim len = byte(s) & 1 ? pick_dim(s) : RJ_DIM_NONE;
        note_node(s, rj_graph_pad(g, x, v, len), before, "rj_graph_pad");
        break;
    }
    case G_INDEX: { /* embedding, gather, take_along_dim, index_select, positions */
        unsigned which = byte(s) % 5;
        rj_node x = pick_node(s), i = pick_node(s);
        int dim = pick_int(s);
        rj_node r = which == 0 ? rj_graph_embedding(g, x, i)
                    : which == 1 ? rj_graph_gather(g, x, dim, i)
                    : which == 2 ? rj_graph_take_along_dim(g, x, i, dim)
                    : which == 3 ? rj_graph_index_select(g, x, dim, i)
                                 : rj_graph_positions(g, pick_dim(s));
        note_node(s, r, before, "an index op");
        break;
    }
    case G_MATMUL: { /* matmul, linear, transpose */
        unsigned which = byte(s) % 3;
        rj_node x = pick_node(s), w = pick_node(s);
        rj_node r = which == 0   ? rj_graph_matmul(g, x, w)
                    : which == 1 ? rj_graph_linear(g, x, w, byte(s) & 1 ? pick_node(s) : RJ_NONE)
                                 : rj_graph_transpose(g, x, pick_int(s), pick_int(s));
        note_node(s, r, before, "a product or transpose");
        break;
    }
    case G_VIEW: { /* reshape (one dim may be -1), unsqueeze, squeeze */
        unsigned which = byte(s) % 3;
        rj_node x = pick_node(s);
        rj_node r;
        if (which == 0) {
            rj_dim dims[RJ_MAX_RANK];
            int rank = (int)(byte(s) % (RJ_MAX_RANK + 2)) - 1; /* -1 .. RJ_MAX_RANK */
            for (int k = 0; k < RJ_MAX_RANK; k++) dims[k] = byte(s) % 8 == 7 ? RJ_DIM_NONE : pick_dim(s);
            r = rj_graph_reshape(g, x, rank, byte(s) % 16 ? dims : NULL);
        } else {
            int dim = pick_int(s);
            r = which == 1 ? rj_graph_unsqueeze(g, x, dim) : rj_graph_squeeze(g, x, dim);
        }
        note_node(s, r, before, "a view");
        break;
    }
    case G_UNPAD: {
        rj_node p = pick_node(s);
        rj_dim j = pick_dim(s);
        note_node(s, rj_graph_unpad(g, p, j), before, "rj_graph_unpad");
        break;
    }
    case G_OUTPUT: {
        rj_node n = pick_node(s);
        const char *nm = pick_name(s);
        rj_status st = rj_graph_output(g, n, nm);
        note_status(s, st, before, "rj_graph_output");
        if (st == RJ_OK && s->nouts < MAX_LIST) s->outs[s->nouts++] = n;
        break;
    }
    case G_INTROSPECT: introspect(s); break;
    default: { /* G_DUMP */
        rj_target t = pick_target(s);
        const char *st = pick_stage(s);
        fz_string(ctx, rj_graph_dump(g, t, st), "rj_graph_dump");
        break;
    }
    }
    trace_step(s, "graph", op);
    return true;
}

/* ---- programs, bindings, runs ---------------------------------------------------------- */

static void program_new(api *s, int slot, rj_target t) {
    if (!s->g) return;
    rj_program_free(s->prog[slot]);
    fz_clear(s->ctx);
    s->prog[slot] = rj_program_new(s->g, t);
    s->prog_gen[slot]++;
    if (!s->prog[slot]) fz_failed(s->ctx, "rj_program_new");
    else if (t != RJ_TARGET_REFERENCE) fz_die("rj_program_new accepted target %d", (int)t);
    s->prog_nouts[slot] = s->nouts;
}

static void bind_new(api *s, int slot, int ps) {
    if (!s->prog[ps]) return;
    rj_bind_free(s->bind[slot]);
    fz_clear(s->ctx);
    s->bind[slot] = rj_bind_new(s->prog[ps]);
    s->bind_prog[slot] = ps;
    s->bind_gen[slot] = s->prog_gen[ps];
    memset(&s->sizes[slot], 0, sizeof s->sizes[slot]);
    if (!s->bind[slot]) fz_failed(s->ctx, "rj_bind_new");
}

static void run(api *s, int bs, int ps) {
    rj_bind *b = s->bind[bs];
    rj_program *p = s->prog[ps];
    if (!b || !p) return;
    s->ran = true;
    fz_clear(s->ctx);
    rj_status st = rj_program_run(p, b);
    if (fz_tracing()) fprintf(stderr, "run: %s: %s\n", rj_status_str(st), st ? rj_ctx_error(s->ctx) : "");
    if (st == RJ_OK) {
        fz_check_results(s->ctx, b, s->outs, s->prog_nouts[ps]);
        return;
    }
    fz_failed(s->ctx, "rj_program_run");
    bool own = s->bind_prog[bs] == ps && s->bind_gen[bs] == s->prog_gen[ps];
    if (own && s->prog_nouts[ps] > 0 && rj_bind_result(b, s->outs[0]))
        fz_die("rj_bind_result gave a result after a failed run (%s)", rj_status_str(st));
}

/* Offsets of B items from the bytes, valid or broken in one of several ways. */
static void bind_offsets(api *s, int bs) {
    rj_bind *b = s->bind[bs];
    rj_dim d = pick_dim(s);
    unsigned kind = byte(s) % 8;
    int64_t B = byte(s) % 6;
    if (kind == 7 && byte(s) % 2) B = -1;
    int64_t *off = fz_arena_alloc(&s->arena, sizeof(int64_t) * (size_t)(B + 2));
    int64_t *len = fz_arena_alloc(&s->arena, sizeof(int64_t) * (size_t)(B + 2));
    if (!off || !len || !b) return;
    int64_t pos = 0, maxlen = 0;
    for (int64_t k = 0; k < B; k++) {
        len[k] = byte(s) % 5;
        pos += kind == 5 ? byte(s) % 3 : 0; /* a view with holes: gaps between rows */
        off[k] = pos;
        pos += len[k];
        if (len[k] > maxlen) maxlen = len[k];
    }
    off[B > 0 ? B : 0] = pos;
    int64_t k = B > 0 ? (int64_t)(byte(s) % (unsigned)B) : 0;
    switch (kind) {
    case 3: off[0] = 1; break;                                /* bad start */
    case 4: if (B > 0) off[k + 1] = off[k] - 1; break;        /* decreasing */
    case 5: if (B > 0 && byte(s) % 4 == 0) len[k] = -1; break; /* holes; a negative length */
    case 6: off[B > 0 ? B : 0] += 1; break;                   /* ends past the values */
    case 7: if (B > 0) off[B] = INT64_MAX; break;             /* huge */
    default: break;
    }
    bool holes = kind == 5;
    fz_clear(s->ctx);
    rj_status st = rj_bind_offsets(b, d, B, byte(s) % 32 ? off : NULL, holes ? len : NULL);
    if (st != RJ_OK) {
        fz_failed(s->ctx, "rj_bind_offsets");
        return;
    }
    int i = s->g ? fz_sym_index(s->g, d) : -1;
    if (i >= 0) {
        s->sizes[bs].rows[i] = off[B > 0 ? B : 0];
        if (holes && B > 0) s->sizes[bs].rows[i] = off[B - 1] + len[B - 1];
        s->sizes[bs].val[i] = maxlen;
        s->sizes[bs].known[i] = true;
        rj_dim_info info;
        int p = rj_dim_get_info(s->g, d, &info) == RJ_OK ? fz_sym_index(s->g, info.parent) : -1;
        if (p >= 0) s->sizes[bs].val[p] = B, s->sizes[bs].known[p] = true;
    }
}

static void bind_size(api *s, int bs) {
    rj_dim d = pick_dim(s);
    int64_t v = pick_i64(s);
    if (!s->bind[bs]) return;
    fz_clear(s->ctx);
    if (rj_bind_size(s->bind[bs], d, v) != RJ_OK) {
        fz_failed(s->ctx, "rj_bind_size");
        return;
    }
    int i = s->g ? fz_sym_index(s->g, d) : -1;
    if (i >= 0) s->sizes[bs].val[i] = v, s->sizes[bs].known[i] = true;
}

/* An input buffer of about the right size, or of a wrong one. */
static void bind_input(api *s, int bs) {
    rj_node n = pick_from(s, s->ins, s->nins);
    unsigned mode = byte(s) % 8;
    int64_t numel = s->g ? fz_numel(s->g, n, &s->sizes[bs]) : -1;
    if (numel < 0 || mode >= 5) numel = byte(s);
    if (mode == 2) numel += 1;
    if (mode == 3 && numel > 0) numel -= 1;
    void *data = fz_arena_alloc(&s->arena, (size_t)(numel ? numel : 1) * 8);
    if (!data || !s->bind[bs]) return;
    rj_dtype t = s->g ? rj_node_dtype(s->g, n) : RJ_I64;
    fz_fill(data, (unsigned)t < RJ_DTYPE_COUNT ? t : RJ_I64, numel, &s->rng);
    if (mode == 4) numel = byte(s) & 1 ? -1 : numel + 1, data = byte(s) & 1 ? NULL : data;
    fz_clear(s->ctx);
    if (rj_bind_input(s->bind[bs], n, data, numel) != RJ_OK) {
        fz_failed(s->ctx, "rj_bind_input");
        return;
    }
    s->last_data = data;
    s->last_elems = numel;
}

/* Caller memory for an output: room for a few elements or plenty, none (ragjit's own), or
 * the last input's buffer (aliasing, which must be refused). */
static void bind_output(api *s, int bs) {
    rj_node n = pick_from(s, s->outs, s->nouts);
    unsigned mode = byte(s) % 8;
    int64_t cap = mode < 3 ? (int64_t)byte(s) : 4096;
    void *data = fz_arena_alloc(&s->arena, (size_t)(cap ? cap : 1) * 8);
    if (!data || !s->bind[bs]) return;
    if (mode == 4) data = NULL, cap = 0;
    if (mode == 5) data = NULL, cap = 3;
    if (mode == 6) cap = -1;
    if (mode == 7 && s->last_data) data = (void *)s->last_data, cap = s->last_elems;
    fz_clear(s->ctx);
    if (rj_bind_output(s->bind[bs], n, data, cap) != RJ_OK) fz_failed(s->ctx, "rj_bind_output");
}

static int free_tensor_slot(api *s) {
    for (int i = 0; i < NTENSOR; i++)
        if (!s->tensor[i]) return i;
    return -1;
}

/* Inner dims (after B and the ragged dim) of node n under the binding's sizes. */
static int inner_dims(api *s, int bs, rj_node n, int64_t *inner) {
    rj_dim dims[RJ_MAX_RANK];
    int rank = s->g ? rj_node_shape(s->g, n, dims) : -1;
    if (rank < 2) return 0;
    for (int k = 2; k < rank; k++) {
        int i = dims[k] < 0 ? fz_sym_index(s->g, dims[k]) : -1;
        inner[k - 2] = dims[k] >= 0 ? dims[k] : i >= 0 && s->sizes[bs].known[i] ? s->sizes[bs].val[i] : 2;
        if (inner[k - 2] > 64 || inner[k - 2] < 0) inner[k - 2] = 2;
    }
    return rank - 2;
}

/* A tensor made by one of the constructors, bound to an input. */
static void bind_tensor(api *s, int bs) {
    rj_node n = pick_from(s, s->ins, s->nins);
    unsigned kind = byte(s) % 4;
    int slot = free_tensor_slot(s);
    rj_dtype t = s->g && rj_node_shape(s->g, n, NULL) >= 0 ? rj_node_dtype(s->g, n)
                                                          : pick_dtype(s);
    int64_t inner[RJ_MAX_RANK] = {0}, B = byte(s) % 5, L = byte(s) % 4;
    int nin = inner_dims(s, bs, n, inner), ir = nin;
    int64_t in_numel = 1;
    for (int k = 0; k < nin; k++) in_numel *= inner[k];
    if (slot < 0 || (unsigned)t >= RJ_DTYPE_COUNT) return;
    rj_tensor *x = NULL;
    fz_clear(s->ctx);
    switch (kind) {
    case 0: { /* dense, ragjit's own zeroed memory */
        int64_t shape[RJ_MAX_RANK] = {B, L};
        for (int k = 0; k < nin && k + 2 < RJ_MAX_RANK; k++) shape[k + 2] = inner[k];
        x = rj_tensor_dense(s->ctx, t, nin + 2 <= RJ_MAX_RANK ? nin + 2 : RJ_MAX_RANK, shape, NULL);
        break;
    }
    case 1: { /* from values and offsets */
        int64_t *off = fz_arena_alloc(&s->arena, sizeof(int64_t) * (size_t)(B + 1));
        if (!off) return;
        for (int64_t k = 0; k < B; k++) off[k + 1] = off[k] + byte(s) % 4;
        void *v = fz_arena_alloc(&s->arena, (size_t)(off[B] * in_numel + 1) * 8);
        if (!v) return;
        fz_fill(v, t, off[B] * in_numel, &s->rng);
        x = rj_tensor_from_values(s->ctx, t, ir, inner, v, off[B], off, B);
        break;
    }
    case 2: { /* a view with holes over padded memory */
        int64_t shape[RJ_MAX_RANK] = {B, L}, *lens = fz_arena_alloc(&s->arena, sizeof(int64_t) * (size_t)(B + 1));
        for (int k = 0; k < nin && k + 2 < RJ_MAX_RANK; k++) shape[k + 2] = inner[k];
        void *v = fz_arena_alloc(&s->arena, (size_t)(B * L * in_numel + 1) * 8);
        if (!lens || !v) return;
        for (int64_t k = 0; k < B; k++) lens[k] = byte(s) % 5; /* may exceed L: refused */
        fz_fill(v, t, B * L * in_numel, &s->rng);
        x = rj_tensor_from_padded(s->ctx, t, nin + 2 <= RJ_MAX_RANK ? nin + 2 : RJ_MAX_RANK, shape,
                                  v, lens);
        break;
    }
    default: { /* copied from components */
        const void *data[4];
        int ranks[4];
        int64_t shapes[4][RJ_MAX_RANK];
        const int64_t *sp[4];
        int64_t nc = B < 4 ? B : 4;
        for (int64_t c = 0; c < nc; c++) {
            shapes[c][0] = byte(s) % 4;
            for (int k = 0; k < nin && k + 1 < RJ_MAX_RANK; k++) shapes[c][k + 1] = inner[k];
            ranks[c] = nin + 1 <= RJ_MAX_RANK ? nin + 1 : RJ_MAX_RANK;
            int64_t elems = shapes[c][0] * in_numel;
            if (byte(s) % 16 == 0) ranks[c] = 1, elems = shapes[c][0]; /* refused unless all are */
            void *v = fz_arena_alloc(&s->arena, (size_t)(elems + 1) * 8);
            if (!v) return;
            fz_fill(v, t, elems, &s->rng);
            data[c] = v;
            sp[c] = shapes[c];
        }
        x = rj_tensor_from_components(s->ctx, t, nc, data, ranks, sp);
        break;
    }
    }
    if (!x) {
        fz_failed(s->ctx, "an rj_tensor constructor");
        return;
    }
    fz_touch_tensor(x);
    s->tensor[slot] = x;
    if (!s->bind[bs]) return;
    fz_clear(s->ctx);
    if (rj_bind_tensor(s->bind[bs], n, x) != RJ_OK) fz_failed(s->ctx, "rj_bind_tensor");
}

/* The tensor calls that make new tensors or views from one. */
static void tensor_op(api *s) {
    rj_tensor *t = s->tensor[byte(s) % NTENSOR];
    unsigned op = byte(s) % 3;
    if (!t) return;
    rj_ctx *ctx = s->ctx;
    fz_clear(ctx);
    if (op == 2) {
        rj_tensor_info views[8];
        int64_t cap = byte(s) % 9;
        if (rj_tensor_unbind(t, views, cap) != RJ_OK) {
            fz_failed(ctx, "rj_tensor_unbind");
            return;
        }
        rj_tensor_info ti;
        rj_tensor_get_info(t, &ti);
        for (int64_t b = 0; b < ti.shape[0]; b++) {
            const unsigned char *p = views[b].values;
            size_t bytes = (size_t)views[b].rows * rj_dtype_size(views[b].dtype);
            unsigned char x = 0;
            for (size_t i = 0; i < bytes; i++) x ^= p[i];
            (void)x;
        }
        return;
    }
    rj_tensor *o = op == 0 ? rj_tensor_to_padded(t, pick_double(s), pick_i64(s) % 8)
                           : rj_tensor_contiguous(t);
    if (!o) {
        fz_failed(ctx, op == 0 ? "rj_tensor_to_padded" : "rj_tensor_contiguous");
        return;
    }
    fz_touch_tensor(o);
    rj_tensor_free(o);
}

static void result(api *s, int bs) {
    rj_node n = pick_from(s, s->outs, s->nouts);
    if (!s->bind[bs]) return;
    fz_clear(s->ctx);
    const rj_tensor *t = rj_bind_result(s->bind[bs], n);
    if (t) fz_touch_tensor(t);
    else fz_failed(s->ctx, "rj_bind_result");
}

static void auto_bind(api *s, int bs) {
    if (!s->bind[bs] || !s->g) return;
    fz_bind_all(s->ctx, s->bind[bs], s->g, &s->rng, &s->arena, &s->sizes[bs]);
}

enum {
    R_END, R_PROGRAM, R_PROGRAM_FREE, R_PROGRAM_DUMP, R_BIND, R_BIND_FREE, R_SIZE, R_OFFSETS,
    R_INPUT, R_OUTPUT, R_TENSOR, R_TENSOR_OP, R_AUTO, R_RUN, R_RESULT, R_GRAPH_FREE, R_COUNT
};

static bool run_step(api *s) {
    unsigned op = byte(s) % R_COUNT, x = byte(s);
    int ps = (int)(x % NPROG), bs = (int)(x >> 4) % NBIND;
    switch (op) {
    case R_END: return false;
    case R_PROGRAM:
        program_new(s, ps, byte(s) % 8 ? RJ_TARGET_REFERENCE : pick_program_target(s));
        break;
    case R_PROGRAM_FREE:
        rj_program_free(s->prog[ps]);
        s->prog[ps] = NULL;
        break;
    case R_PROGRAM_DUMP:
        if (s->prog[ps]) {
            const char *st = pick_stage(s);
            fz_clear(s->ctx);
            fz_string(s->ctx, rj_program_dump(s->prog[ps], st), "rj_program_dump");
        }
        break;
    case R_BIND: bind_new(s, bs, ps); break;
    case R_BIND_FREE:
        rj_bind_free(s->bind[bs]);
        s->bind[bs] = NULL;
        break;
    case R_SIZE: bind_size(s, bs); break;
    case R_OFFSETS: bind_offsets(s, bs); break;
    case R_INPUT: bind_input(s, bs); break;
    case R_OUTPUT: bind_output(s, bs); break;
    case R_TENSOR: bind_tensor(s, bs); break;
    case R_TENSOR_OP: tensor_op(s); break;
    case R_AUTO: auto_bind(s, bs); break;
    case R_RUN: run(s, bs, ps); break;
    case R_RESULT: result(s, bs); break;
    default: /* R_GRAPH_FREE: programs and bindings must not need it */
        rj_graph_free(s->g);
        s->g = NULL;
        break;
    }
    trace_step(s, "run", op);
    return true;
}

/* ---- the end ---------------------------------------------------------------------------- */

static void free_class(api *s, int c) {
    switch (c) {
    case 0:
        for (int i = 0; i < NBIND; i++) rj_bind_free(s->bind[i]), s->bind[i] = NULL;
        break;
    case 1:
        for (int i = 0; i < NTENSOR; i++) rj_tensor_free(s->tensor[i]), s->tensor[i] = NULL;
        break;
    case 2:
        for (int i = 0; i < NPROG; i++) rj_program_free(s->prog[i]), s->prog[i] = NULL;
        break;
    default:
        rj_graph_free(s->g);
        s->g = NULL;
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    api *s = calloc(1, sizeof *s);
    if (!s) return 0;
    s->in = (fz_bytes){.p = data, .n = size};
    s->rng = fz_hash(data, size);
    unsigned h = byte(s);
    if (h >= 0x80) s->mem.tr.fail_at = (long)((h & 0x7f) << 8 | byte(s)) + 1;
    unsigned order = byte(s) % 24;
    s->ctx = fz_ctx_new(&s->mem);
    if (!s->ctx) goto out;
    fz_clear(s->ctx);
    s->g = rj_graph_new(s->ctx);
    if (!s->g) {
        fz_failed(s->ctx, "rj_graph_new");
        goto done;
    }
    while (fz_more(&s->in) && graph_step(s)) {}
    while (fz_more(&s->in) && run_step(s)) {}
    if (!s->ran && s->g) { /* short inputs still reach the interpreter */
        if (!s->prog[0]) program_new(s, 0, RJ_TARGET_REFERENCE);
        bind_new(s, 0, 0);
        if (s->bind[0] && s->g &&
            fz_bind_all(s->ctx, s->bind[0], s->g, &s->rng, &s->arena, &s->sizes[0]))
            run(s, 0, 0);
    }
done: {
    /* the order of the four kinds of frees: the order-th permutation of 0..3 */
    int classes[4] = {0, 1, 2, 3};
    for (int i = 0, o = (int)order; i < 4; i++) {
        int f = 1;
        for (int k = 1; k < 4 - i; k++) f *= k;
        int pick = i + o / f;
        o %= f;
        int c = classes[pick];
        memmove(&classes[i + 1], &classes[i], sizeof(int) * (size_t)(pick - i));
        classes[i] = c;
    }
    for (int i = 0; i < 4; i++) free_class(s, classes[i]);
    fz_ctx_free(s->ctx, &s->mem);
}
out:
    fz_arena_free(&s->arena);
    free(s);
    return 0;
}
