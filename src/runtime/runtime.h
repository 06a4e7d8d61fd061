/*
 * runtime.h — the run-time objects: context, tensors, programs, bindings, and the resolved
 * sizes of one run that every backend reads.
 *
 * A binding records what the caller bound (pointers, counts, sizes) and nothing is checked
 * until rj_program_run, because an embedding binds buffers once and refills them between
 * runs. bind_prepare then validates everything and resolves the run: the value of each dense
 * symbol, the batch size, the row count addressed by each ragged symbol, the memory of each
 * output. Backends get that resolved view (run_env) and never re-derive or re-check it.
 */
#ifndef RJ_RUNTIME_H
#define RJ_RUNTIME_H

#include "../ir/ir.h"

struct llvm_jit;
struct prog_cache;

struct rj_ctx {
    rj_alloc_fn alloc;
    void *ud;
    int threads;
    rj_status status;
    char err[1024];
    struct llvm_jit *jit;       /* created on first CPU compile (codegen/llvm) */
    struct prog_cache *cache;   /* compiled programs by structural hash */
    uint64_t llvm_compiles;     /* modules JIT-compiled (tests check cache hits with it) */
    int64_t nt_bytes;           /* outputs above this many bytes are streamed; 0: default */
};

int ctx_threads(const rj_ctx *ctx);
/* Releases backend state hanging off the context (JIT, cache). */
void backends_shutdown(rj_ctx *ctx);

struct rj_tensor {
    rj_ctx *ctx;
    rj_tensor_info info;
    bool owned_by_bind;   /* results live inside a binding: rj_tensor_free ignores them */
    void *own_values;
    size_t own_bytes;
    int64_t *own_offsets; /* B+1 */
    int64_t *own_lengths; /* B */
    int64_t own_batch;
};

/* A dense tensor over data (bytes long, from mem_alloc on ctx) that the tensor now owns. The
 * data is freed on failure too, so a reader can hand over its buffer without a cleanup path. */
rj_tensor *tensor_adopt_dense(rj_ctx *ctx, rj_dtype dtype, int rank, const int64_t *shape,
                              void *data, size_t bytes);

/* Validation of offsets shared by tensors and bindings. `what` names the symbol or tensor in
 * messages. rows_out receives the rows the offsets address (last offset, or the end of the
 * furthest row for a view with holes); maxlen_out the longest row. */
rj_status offsets_check(rj_ctx *ctx, const char *what, int64_t batch, const int64_t *offsets,
                        const int64_t *lengths, int64_t *rows_out, int64_t *maxlen_out);
static inline int64_t row_len(const int64_t *off, const int64_t *len, int64_t b) {
    return len ? len[b] : off[b + 1] - off[b];
}

/* ---- bindings and runs ------------------------------------------------------------------ */

typedef struct rag_bind {
    const int64_t *off, *len; /* len NULL: packed */
    int64_t batch;
    bool set;
} rag_bind;

typedef struct in_bind {
    const void *data;
    int64_t numel;
    bool set;
} in_bind;

typedef struct out_bind {
    void *user;          /* caller memory, or NULL */
    int64_t cap;         /* its capacity in elements */
    void *own;           /* memory ragjit allocated (kept across runs) */
    size_t own_bytes;
    void *data;          /* where this run writes */
    int64_t numel;       /* elements this run writes (rows * inner for jagged) */
    rj_tensor result;
} out_bind;

struct rj_bind {
    rj_ctx *ctx;
    rj_program *p;
    const rj_graph *g;    /* the program's graph */
    int32_t nsym;
    int64_t *size;        /* user-bound dense sizes */
    uint8_t *size_set;
    rag_bind *rag;        /* per symbol (used for ragged symbols) */
    in_bind *in;          /* per graph input */
    out_bind *out;        /* per graph output */
    /* resolved by bind_prepare for the current run */
    int64_t *val;         /* per symbol: dense size, max(j) size, or the max row of a ragged */
    int64_t *rows;        /* per symbol: rows addressed by a ragged symbol's offsets */
    uint8_t *used;        /* per symbol: appears in some shape of the graph */
    const int64_t **loff; /* per class root: logical (packed) row offsets of the class, B+1 */
    int64_t *cbatch;      /* per class root: its batch size */
    int64_t **loff_own;   /* per class root: loff computed for views with holes (reused) */
    int64_t *loff_cap;    /* their capacities, in entries */
    bool prepared;        /* the last run succeeded: results are valid */
};

/* Items of a class whose logical rows meet the range [lo, hi): the largest b with
 * loff[b] <= lo, and the smallest b with loff[b] >= hi (both in [0, B]). */
static inline int64_t item_at_or_before(const int64_t *loff, int64_t B, int64_t v) {
    int64_t lo = 0, hi = B;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (loff[mid] <= v) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

static inline int64_t item_at_or_after(const int64_t *loff, int64_t B, int64_t v) {
    int64_t lo = 0, hi = B;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (loff[mid] >= v) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* Checks every binding and resolves the sizes of this run (see the file comment). */
rj_status bind_prepare(rj_bind *b);
/* The concrete extent of dim d in this run; for a ragged dim, the longest row. */
int64_t bind_dim_value(const rj_bind *b, rj_dim d);

/* ---- programs --------------------------------------------------------------------------- */

typedef struct backend {
    const char *name;
    rj_status (*compile)(rj_program *p);
    rj_status (*run)(rj_program *p, rj_bind *b);
    void (*release)(rj_program *p);
} backend;

struct rj_program {
    rj_ctx *ctx;
    rj_graph *g;          /* private copy of the user's graph */
    rj_target target;
    const backend *be;
    void *impl;           /* backend state */
};

extern const backend backend_reference;
extern const backend backend_cpu;
extern const backend backend_cuda;

/* interp.c: evaluates the program's graph on a prepared binding. */
rj_status interp_run(rj_program *p, rj_bind *b);

#endif
