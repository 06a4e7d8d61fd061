/*
 * stdenv.h — the standard test graph shared by the JIT, CUDA and OpenCL tests.
 *
 * One set of inputs covers every case the fused kernels distinguish: two jagged f[B, j1, D]
 * tensors (x, y), dense weights w and v of [D], a jagged bool mask m and i32 tensor xi, a
 * per-item tensor pb[B, D] and its keepdim form p3[B, 1, D], a dense size L for padding, and
 * for the index ops a table tab[V, D] (V = 7) and jagged indices ix i64[B, j1] into it, and a
 * tensor with two ragged dims sb[B, j1, j1] (each item's len x len block).
 * Tests add ops on top (the builder shorthands below), bind random data of a length pattern
 * (packed, or as a view with holes whose hole rows hold NaN / 2^30 / true so that any read of
 * them shows), run, and compare with the reference interpreter under the documented tolerances.
 */
#ifndef RJ_TEST_STDENV_H
#define RJ_TEST_STDENV_H

#include "harness.h"

#define D 19 /* the inner width: odd, so vector loops have a remainder */
#define V 7  /* rows of the table tab; the indices ix are in 0..V-1 */

typedef struct env {
    rj_graph *g;
    rj_dim B, J, L;
    rj_node x, y, w, v, m, xi, pb, p3, tab, ix, sb;
    rj_dim J2;  /* a second ragged class of B, and kx [B, j2, D] of it (keys of cross
                 * attention): added by the graphs that use them (std_cross) */
    rj_node kx;
    rj_node pd; /* a dense f[B, L, D], added by the graphs that use it */
    rj_dtype ft;
} env;

env env_new(rj_ctx *ctx, rj_dtype ft);

/* builder shorthands */
static inline rj_node S(env *e, double v) { return rj_graph_scalar(e->g, v); }
static inline rj_node SI(env *e, int64_t v) { return rj_graph_scalar_int(e->g, v); }
static inline rj_node bin(env *e, rj_op op, rj_node a, rj_node b) { return rj_graph_binary(e->g, op, a, b); }
static inline rj_node un(env *e, rj_op op, rj_node a) { return rj_graph_unary(e->g, op, a); }
static inline void out(env *e, rj_node n) { rj_graph_output(e->g, n, NULL); }
static inline rj_node affine(env *e) { return bin(e, RJ_OP_ADD, bin(e, RJ_OP_MUL, e->x, e->w), e->v); }

/* Random data for env's inputs, one length pattern. */
typedef struct data {
    int64_t B, rows, maxlen, *off, sq; /* sq: sum of len_b^2, the rows of sb's blocks */
    void *x, *y, *w, *v, *m, *xi, *pb, *p3, *tab, *ix, *sb;
    int64_t *off2, rows2; /* j2: item b has the length of item B - 1 - b of j1, plus b % 2 */
    void *kx;
    void *pd; /* B x (maxlen + 3) x D, L being bound to maxlen + 3 */
} data;

data data_new(len_pattern p, rj_dtype ft, uint64_t seed);
void data_free(data *d);

/* d's jagged inputs laid out as views with holes: two unused rows after every item. */
typedef struct holes {
    int64_t *off, *len, rows;
    void *x, *y, *m, *xi, *ix;
    int64_t *off2, *len2, rows2; /* j2's, and kx spread by them */
    void *kx;
} holes;

holes holes_new(const data *d, rj_dtype ft);
void holes_free(holes *h);

/* Binds every input of e (the jagged ones from h when h is not NULL) and L = maxlen + 3. */
void bind_all(rj_ctx *ctx, rj_bind *b, const env *e, const data *d, const holes *h);

/* Elements a result holds (rows times inner size; for a view with holes, holes included). */
int64_t numel_of(const rj_tensor_info *t);

/* Fails unless got matches want: integers and bools exactly; floats within
 *     |got - want| <= rtol |want| + atol max(1, max |want|)
 * with (rtol, atol) = (1e-4, 2e-5) for f32 and (1e-10, 1e-12) for f64; NaN must meet NaN and
 * inf the same inf. A jagged result is compared item by item, its holes left out. */
void compare(const char *what, const rj_tensor_info *got, const rj_tensor_info *want);

/* The corpus of fused chains every backend is checked on: pad -> op -> unpad chains (padding
 * values that matter among them), reductions and softmax over padded and jagged data, norms,
 * several outputs, integer and bool chains, broadcasts of every kind, deep sharing. Each adds
 * its ops and outputs to a fresh env. */
typedef struct std_chain {
    const char *name;
    void (*fn)(env *e);
} std_chain;

extern const std_chain std_chains[];
extern const int std_nchains;

/* Groups of ops that between them use every op of the op table, every dtype and every kind of
 * operand (jagged, dense, per item, scalar), and constants without a plain literal. */
extern const std_chain std_ops[];
extern const int std_nops;

/* Adds the op group or chain of that name to e (fails the test if there is none). */
void std_chain_add(env *e, const char *name);

/* A random chain of 3 to 10 steps over e's inputs, made from `seed`: elementwise ops (every
 * unary op; binary ops on operands of the same kind, literals (some at the edges of f32) and
 * broadcasts; where, pow, casts there and back, masked_fill), reductions over the ragged dim
 * and over the inner dim (keepdim too), softmax and log_softmax over both and over per-item
 * values, layer and RMS norms, pad (to the longest row or to L, with infinities and NaN among
 * the values) and what follows it: unpad of an elementwise op, a reduction or a softmax over
 * the padded dim; now and then a product step (attention over x and y with a causal mask or a
 * shift, or a linear layer with an activation) or a gather (an embedding, take_along_dim over
 * the ragged, the inner or a padded dim). The newest value of each kind is an output. */
void std_random_chain(env *e, uint64_t seed);

/* Which random chains a test runs: RJ_RANDOM_CHAINS=N (1..N) or A..B, else 1..`fallback`. RJ_RANDOM_SEED=S
 * runs chain S alone (and prints it): *first = *last = S. */
void std_random_range(int fallback, uint64_t *first, uint64_t *last);

/* Prints chain `seed`'s graph in the text format (for reproducing a failure with `ragjit`). */
void std_random_print(rj_ctx *ctx, uint64_t seed, rj_dtype ft);

/* Random chains in f32 (every fourth in f64) on `target` against the interpreter, inputs
 * packed and with holes, every length pattern. Skips the test without a device. */
void std_random_run(rj_ctx *ctx, rj_target target, int fallback);

/* ---- the corpus of the GPU targets: the op groups, then the chains ---------------------------- */

int std_corpus_count(void);
const char *std_corpus_name(int i);
/* Graph i of the corpus with floats of type ft (f32 or f64); fails the test if it has errors. */
env std_corpus_build(rj_ctx *ctx, int i, rj_dtype ft);

double now_ms(void); /* a monotonic clock, in milliseconds */

/* Runs the whole corpus in f32 and f64 on `target` and compares every output with the
 * interpreter's (compare's tolerances) on every length pattern, with the inputs packed, as
 * views with holes, or both (layouts: STD_PACKED | STD_HOLES; both run on one compiled
 * program). Skips the test, saying why, when the target has no device. */
enum { STD_PACKED = 1, STD_HOLES = 2 };
void std_corpus_run(rj_ctx *ctx, rj_target target, int layouts);
/* ... with floats of the types ft0 .. ft1 (enum order: RJ_F16 .. RJ_BF16 for the 16-bit ones),
 * the graphs named in the NULL-terminated list `only` (NULL: all) */
void std_corpus_run_types(rj_ctx *ctx, rj_target target, int layouts, rj_dtype ft0, rj_dtype ft1,
                          const char *const *only);
/* gelu (both forms), silu, sigmoid and tanh at extreme arguments on a target, against forms
 * without cancellation (skips the test where the target has no device). */
void std_check_tails(rj_ctx *ctx, rj_target target);
/* sum, prod, max and min over empty items: +0.0, 1, -inf, +inf on a target and the
 * interpreter (skips the test where the target has no device). */
void std_check_identities(rj_ctx *ctx, rj_target target);

/* Index ops given indices out of range on `target`, packed and with holes: RJ_ERR_INDEX with
 * the interpreter's message (the op, the index tensor, the first bad position). Skips the
 * test without a device. */
void std_index_errors(rj_target target);

/* Compiles and runs two chains on `target` in a fresh context once with no failure, then once
 * with each allocation failing in turn: RJ_ERR_NOMEM every time, and nothing leaks. Skips the
 * test without a device. */
void std_alloc_sweep(rj_target target);
/* The same with every output in device memory the binding allocates, run twice (the second
 * run reuses the binding's device memory) and one output exported through DLPack. */
void std_alloc_sweep_mode(rj_target target, bool device);

/* Kernels compiled late (cpu.c): softmax over the ragged dim of f32[B, j1, N], with N the
 * width (256, 64 or 32: twice the host's constant tile) that gives its kernel a twin of runtime
 * tiles; fails the test if none does. The graph is the caller's (in ctx). */
rj_graph *late_graph(rj_ctx *ctx, int64_t *n);
/* Runs p (of g, from late_graph) on items of lengths len[0..B) of random data and compares the
 * result with the interpreter's (pr, a program of g). */
void late_check(rj_ctx *ctx, const rj_graph *g, rj_program *p, rj_program *pr, const int64_t *len, int64_t B,
                int64_t n);

#endif
