/*
 * fuzz.h — what the three libFuzzer harnesses share: a context whose allocator counts, caps
 * and fails allocations; the checks that turn a silent misbehaviour into a crash libFuzzer
 * reports; a byte reader and a small random generator; and valid bindings for any graph, so
 * that a harness can run what it built on the reference target.
 *
 * A harness is only as good as what it calls a failure. Sanitizers catch memory errors and
 * undefined behaviour, the tracker catches leaks and misreported block sizes (which LSan
 * cannot see, since the blocks are the tracker's), and the checks here catch the contract of
 * ragjit.h: every failing call leaves a status and a message in the context (quietly failing
 * builder calls excepted, which keep the graph's first failure), and every result a call
 * returns can be read to its last byte.
 *
 * Everything is bounded so that a run takes milliseconds whatever the bytes say: the
 * allocator refuses blocks above FZ_MAX_BLOCK (ragjit must then report RJ_ERR_NOMEM, which is
 * part of what is tested), bindings use small sizes, and harness memory comes from an arena
 * with a budget.
 */
#ifndef RJ_FUZZ_H
#define RJ_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ragjit.h"
#include "../tests/tracker.h"

#define FZ_MAX_BLOCK ((size_t)16 << 20)   /* the allocator refuses larger requests */
#define FZ_MAX_LIVE ((long long)128 << 20) /* ... and requests beyond this much live memory */
#define FZ_MAX_SYMS 64                     /* symbols the binding helpers track */
#define FZ_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ---- checks -------------------------------------------------------------------------- */

/* Prints the message and aborts: a finding. */
_Noreturn void fz_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Forgets the context's last error, so that the next call's failure can be told apart. */
void fz_clear(rj_ctx *ctx);
/* After a call that failed: the context must hold a valid status and a message. */
void fz_failed(rj_ctx *ctx, const char *call);
/* After a builder call that failed: as fz_failed, unless the graph had failed already (the
 * documented quiet failure that keeps the first message). */
void fz_failed_builder(rj_ctx *ctx, rj_status graph_before, const char *call);

/* A context on a tracking allocator that refuses oversized requests; fail_at as tracker. */
typedef struct fz_mem {
    tracker tr;
} fz_mem;

rj_ctx *fz_ctx_new(fz_mem *m);
/* Frees the context and dies if a block is still live or a size was misreported; returns
 * the allocations attempted in the context's life (the range for a fail_at). */
long fz_ctx_free(rj_ctx *ctx, fz_mem *m);

/* Reads a string ragjit returned (s may be NULL after a failure) and frees it. */
void fz_string(rj_ctx *ctx, char *s, const char *call);
/* Reads every byte a tensor describes: values, offsets, lengths. */
void fz_touch_tensor(const rj_tensor *t);
/* After a successful run: every output's result exists and can be read. */
void fz_check_results(rj_ctx *ctx, rj_bind *b, const rj_node *outputs, int n);

/* FUZZ_TRACE=1 in the environment: the harnesses print what each step did, on stderr, to
 * explain a finding or a seed. */
bool fz_tracing(void);

/* ---- bytes and randomness ------------------------------------------------------------ */

typedef struct fz_bytes {
    const uint8_t *p;
    size_t n, i;
} fz_bytes;

/* The next byte, or 0 once the input is used up. */
unsigned fz_byte(fz_bytes *in);
bool fz_more(const fz_bytes *in);

uint64_t fz_hash(const uint8_t *p, size_t n);
uint64_t fz_rng(uint64_t *state);

/* Harness memory (offsets, input data, output buffers): freed all at once at the end, after
 * ragjit's last use of it; NULL once the budget is spent. */
typedef struct fz_arena {
    void **blocks;
    size_t n, cap, bytes;
} fz_arena;

void *fz_arena_alloc(fz_arena *a, size_t bytes);
void fz_arena_free(fz_arena *a);

/* ---- binding ------------------------------------------------------------------------- */

/* What one binding's sizes are, by symbol index, as ragjit will resolve them. */
typedef struct fz_sizes {
    int64_t val[FZ_MAX_SYMS];   /* dense: the size; ragged: its longest row */
    int64_t rows[FZ_MAX_SYMS];  /* ragged: rows its offsets address */
    bool known[FZ_MAX_SYMS];
} fz_sizes;

/* Symbol index of dim d in g, or -1 for a constant or a dim the helpers do not track. */
int fz_sym_index(const rj_graph *g, rj_dim d);
/* Elements that input n needs under sizes s (rows x inner for a jagged input); -1 if a size
 * is unknown or the count is too large for the harness to provide. */
int64_t fz_numel(const rj_graph *g, rj_node n, const fz_sizes *s);
/* Fills n elements of dtype t with values from rng: small numbers, now and then 0, -0, inf,
 * NaN or a huge one. */
void fz_fill(void *data, rj_dtype t, int64_t n, uint64_t *rng);

/* Binds every dense size, ragged symbol and input of g (the program's graph, or the graph it
 * was built from) with small valid data from rng; rarely, `same` symbols get different lengths
 * to exercise RJ_ERR_SAME. Returns false if the harness could not provide the memory. */
bool fz_bind_all(rj_ctx *ctx, rj_bind *b, const rj_graph *g, uint64_t *rng, fz_arena *a,
                 fz_sizes *s);


#endif
