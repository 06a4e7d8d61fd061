/*
 * runtime.h — the run-time objects: context, tensors, programs, bindings, the plan of a run
 * and the resolved view of one run that every backend reads.
 *
 * A program's plan (plan.c) is made once, when it is compiled: the graph's symbols, inputs,
 * outputs, pads, loop-IR buffers and index checks as flat arrays, so that a run never goes
 * back to the graph. A binding (bind.c) records what the caller bound and nothing is checked
 * until rj_program_run, because an embedding binds buffers once and refills them between
 * runs. run_resolve (resolve.c) then walks the plan, validates the bindings and resolves the
 * run into a run_view: the value of each symbol, the batch size and row count of each ragged
 * class, where each input is and where each output goes. Backends get that view and never
 * re-derive or re-check it; the state of runs (memory kept across runs, a device run that
 * returned early, the last error) lives in the binding's run_state (run.c).
 *
 * Calls point one way. At compile time program.c makes the plan (plan.c, the runtime's only
 * reader of the graph for runs). At run time bind.c (the caller's records) calls run.c, which
 * calls resolve.c and then a backend through its table (cpu.c, cuda.c, opencl.c, interp.c);
 * the backends call launch.c (the planning every target shares), and launch.c calls checks.c
 * (verdicts) and runmem.c (the memory limit, memory kept across runs), which call nothing
 * above them.
 */
#ifndef RJ_RUNTIME_H
#define RJ_RUNTIME_H

#include "../ir/pipeline.h"

/* What each context slot (util.h) holds. The program cache is released first: its entries
 * hold code that the backends' state (the JIT, a device context) must outlive. */
enum { SLOT_CACHE, SLOT_CPU, SLOT_CUDA, SLOT_OPENCL, SLOT_COUNT_ };
_Static_assert((int)SLOT_COUNT_ <= (int)CTX_SLOTS, "more context slots than util.h provides");

int ctx_threads(const rj_ctx *ctx);

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

/* A dense tensor over data (bytes long, from mem_alloc_data on ctx) that the tensor now owns. The
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

/* The context's reference count (ctx.c): exported DLPack tensors keep it alive. */
void ctx_ref(rj_ctx *ctx);
void ctx_unref(rj_ctx *ctx);

/* ---- the plan of a run (plan.c) ------------------------------------------------------------
 * Made once per artifact, when the program is compiled, from its graph and loop IR: what every
 * run checks, resolves and places, as flat arrays that a run walks without going back to the
 * graph. */

typedef enum { SHAPE_DENSE, SHAPE_JAGGED, SHAPE_PAIR } shape_kind;

/* A tensor's shape as a run sizes it. JAGGED: rows of the ragged symbol at rpos, the items
 * being dim rpos - 1; PAIR ([B, j, j, ...]): blocks of len_b x len_b rows of class cls. */
typedef struct plan_shape {
    uint8_t kind;            /* shape_kind */
    uint8_t dtype;
    int8_t rank;
    int8_t rpos;             /* the ragged dim, or -1 */
    int32_t rsym;            /* the symbol at rpos, or -1 */
    int32_t cls;             /* its `same` class root, or -1 */
    int32_t pkey;            /* PAIR: the key of its blocks (ir.h, pair_key), or -1 */
    int64_t es;              /* bytes per element */
    rj_dim dims[RJ_MAX_RANK];
} plan_shape;

typedef struct plan_sym {
    const char *name;        /* the graph's */
    uint8_t kind;            /* SYM_DENSE, SYM_RAGGED, SYM_MAXLEN */
    int32_t parent;          /* RAGGED: its dim; MAXLEN: its ragged symbol; else -1 */
    int32_t root;            /* RAGGED: its class root; else itself */
} plan_sym;

typedef struct plan_io {     /* a graph input or output */
    const char *name;
    rj_node node;
    bool idle;               /* an input no output depends on: it may stay unbound */
    plan_shape sh;
} plan_io;

/* pad(x, len=L) and unpad(p[B, L, ...], j) need L >= the longest item of j; unpad with
 * keepdim of [B, L, L2] needs the shorter of L and L2 to be. */
typedef struct plan_pad {
    const char *op;
    rj_dim len, len2;        /* len2: RJ_DIM_NONE unless keepdim unpad */
    int32_t sym;             /* j */
} plan_pad;

/* An index op's range check (lprog.checks) with its symbols resolved for the verdict. */
typedef struct plan_check {
    const char *op;
    bool jagged;             /* the index tensor's dim 1 is ragged: symbol rsym, class cls */
    int32_t rsym, cls;
    bool bound_ragged;       /* the indexed dim is ragged, of class bound_cls */
    int32_t bound_cls;
} plan_check;

/* The blocks of [B, j1, j2] tensors: rows of class root r1 by columns of r2 (r1 == r2: square
 * blocks of one class), named by key = pair_key(nsym, r1, r2). */
typedef struct plan_pair {
    int32_t key, r1, r2;
} plan_pair;

typedef struct run_plan {
    int32_t nsym, ninputs, noutputs, npads, nbufs, nchecks, nkernels, nroots;
    plan_sym *sym;
    uint8_t *used;           /* per symbol: in the shape of a node some output depends on */
    int32_t *roots;          /* the class roots of ragged symbols, ascending */
    plan_io *in, *out;
    plan_pad *pad;
    plan_shape *buf;         /* per loop-IR buffer (compiled targets; temporaries are sized
                                from it) */
    plan_check *check;       /* per lprog.checks */
    int64_t *scratch_es;     /* per kernel: bytes per element of its scratch */
    int32_t *live;           /* per buffer, 2 entries: the first and the last kernel that use
                                it (a GEMM's prologue counts as its GEMM kernel; the checks'
                                words are read after the last kernel: nkernels); -1: none.
                                Temporaries whose spans do not meet share memory (cpu.c) */
    plan_pair *pair;         /* the pairs of classes that some [B, j1, j2] tensor has (their
                                blocks' offsets are computed each run), npairs of them */
    int32_t npairs, cappairs; /* cappairs: the nodes that store pairs, what pair has room for */
} run_plan;

/* The plan of g and lp (NULL for the reference target, which launches no kernels). */
rj_status plan_make(rj_ctx *ctx, const rj_graph *g, const lprog *lp, run_plan *pl);
void plan_free(rj_ctx *ctx, run_plan *pl);
/* The index of graph input (output) node n, or -1 after failing `call` with RJ_ERR_ARG. */
int plan_find(const run_plan *pl, rj_ctx *ctx, bool out, rj_node n, const char *call);

/* ---- bindings (bind.c) ---------------------------------------------------------------------
 * What the caller bound, recorded as given; nothing is read or checked before a run. */

typedef struct rag_bind {
    const int64_t *off, *len; /* host offsets, lengths (NULL: packed) */
    int64_t batch;
    bool set;
    bool dev;                 /* offsets (and lengths) live on the device: doff, dlen */
    uint64_t doff, dlen;      /* dlen 0: packed */
    int64_t info_rows, info_maxlen; /* rj_bind_offsets_info (-1: not given) */
} rag_bind;

typedef struct in_bind {
    const void *data;    /* host memory, or NULL when dev */
    int64_t numel;
    bool set;
    bool dev;            /* device memory: ddata */
    bool constant;       /* rj_bind_constant: its contents stay until it is bound again */
    uint64_t ddata;
    uint64_t gen;        /* which binding of the binding's inputs this is (rj_bind.gens) */
} in_bind;

typedef struct out_bind {
    void *user;          /* caller memory, or NULL */
    int64_t cap;         /* its capacity in elements */
    bool dev;            /* written to device memory: duser, or memory ragjit allocates */
    uint64_t duser;      /* the caller's device memory (0: ragjit's) */
} out_bind;

struct rj_bind {
    rj_ctx *ctx;
    uint64_t prog_id;     /* the program's serial number (a binding serves one program) */
    struct artifact *art; /* the program's compiled graph: a reference, so a binding may
                             outlive its program */
    const run_plan *plan; /* the artifact's */
    const struct backend *be; /* the program's backend (device memory of the binding) */
    int64_t *size;        /* user-bound dense sizes */
    uint8_t *size_set;
    rag_bind *rag;        /* per symbol (used for ragged symbols) */
    in_bind *in;          /* per graph input */
    out_bind *out;        /* per graph output */
    void *stream;         /* the caller's CUstream / cl_command_queue, or NULL */
    bool has_dev;         /* something is bound as device memory */
    bool trusted;         /* rj_bind_trust_offsets: device offsets are neither read nor checked */
    uint64_t gens;        /* binds of inputs so far: each gets the next number (in_bind.gen), so
                             that what a run kept of a constant input's contents knows whether
                             it is still the contents of the input bound now */
    struct run_state *run; /* its runs (run.c) */
};

/* ---- the resolved view of a run ------------------------------------------------------------
 * What resolve.c makes of the bindings for one run, and all that a backend reads of it. */

typedef struct run_sym {
    int64_t val;              /* the extent of the dim: a dense size, a max(j) size, or a ragged
                                 symbol's longest item */
    int64_t rows;             /* ragged: the rows its offsets address */
    int64_t batch;            /* ragged: its items */
    const int64_t *off, *len; /* ragged: offsets and lengths on the host (len NULL: packed; off
                                 NULL: device offsets the host never reads) */
    uint64_t doff, dlen;      /* dev: the offsets (and lengths) on the device */
    int64_t info_rows, info_maxlen; /* dev: rj_bind_offsets_info (-1: not given) */
    bool bound, dev;
    bool devcheck;            /* this run checks the device offsets on the device (launch.c) */
} run_sym;

typedef struct run_class {    /* per class root */
    const int64_t *loff;      /* logical (packed) row offsets, B+1 (NULL: trusted device
                                 offsets, of which only batch and rows are known) */
    int64_t batch, rows;
} run_class;

typedef struct run_pair {     /* per plan_pair */
    const int64_t *sqoff;     /* the first row of item b's len1_b x len2_b block (B+1 entries:
                                 prefix sums of len1_b * len2_b), or NULL */
    int64_t *own;             /* the memory behind it, kept across runs */
    int64_t cap;
} run_pair;

typedef struct run_in {
    const void *data;         /* host memory, or NULL when dev */
    uint64_t ddata;
    int64_t numel;
    bool set, dev;
    bool constant;            /* promised constant (rj_bind_constant) */
    uint64_t gen;             /* its in_bind.gen */
} run_in;

typedef struct run_out {
    void *data;               /* where this run writes (host outputs) */
    uint64_t ddata;           /* where this run writes (device outputs; set by the run) */
    int64_t numel;            /* elements this run writes (rows * inner for jagged) */
    bool dev;
    uint64_t duser;           /* the caller's device memory (0: ragjit's, down) */
    uint64_t down;            /* device memory ragjit allocated (kept across runs, freed by
                                 backend.dev_free) */
    size_t down_bytes;
    void *own;                /* host memory ragjit allocated (kept across runs) */
    size_t own_bytes;
    int64_t sized;            /* rj_bind_output_numel's answer */
    rj_tensor result;
} run_out;

/* Device memory kept across runs (GPU targets): every per-run buffer of a device run
 * (temporaries, uploads, tables, scratch) has a slot, grown as needed, so a run allocates and
 * frees nothing once warm. shadow: what a small upload last wrote (offsets, tables), so an
 * unchanged one is not copied again. */
typedef struct dev_block {
    uint64_t addr;
    size_t bytes;
    void *shadow;
    size_t shadow_bytes;
} dev_block;

/* Host memory kept across runs for temporaries and scratch (CPU runs): grown as needed. */
typedef struct host_block {
    void *p;
    size_t bytes;
    size_t huge;              /* the huge pages advised in it (host_block_fresh), or 0 */
    size_t align, skew;       /* its use starts skew bytes past a multiple of align (host_block_fresh) */
} host_block;

/* What a product keeps of a constant input's contents across runs (cpu_gemm.c: its weight
 * packed, or widened to f32): where in the binding's block of copies, and what it was made
 * from: which binding of the input (in_bind.gen), and the shape and view it was read through. */
typedef struct const_copy {
    int64_t off, bytes;       /* in host_mem.const_block (bytes 0: none) */
    bool valid;               /* made, from binding gen of the input, as key says */
    bool given;               /* this run makes it (cpu_consts_settle) */
    bool idle;                /* given to a run, which did not make it (its product packed
                                 nothing): left out of the next runs' shares until it asks */
    uint64_t gen;
    int64_t key[7];           /* how it was made (cpu_gemm.c: cpu_run_gemm) */
} const_copy;

typedef struct host_mem {
    host_block arena;         /* the temporaries, placed by liveness (cpu.c: place_temps) */
    int64_t *place;           /* 6 per buffer: a temporary's bytes and offset, and room for
                                 placing them (cpu.c: place_temps) */
    int32_t nplace;
    int64_t temp_bytes;       /* the arena's bytes in the last run */
    host_block scratch;
    host_block addrs;         /* the launch_mem arrays */
    bool ran;                 /* a run has completed with these blocks (cpu_block_get) */
    struct const_copy *consts; /* per kernel: what its product keeps of a constant input's
                                 contents (cpu_gemm.c), or NULL */
    int32_t nconsts;
    host_block const_block;   /* the copies, laid out for the last run (cpu_consts_settle) */
    char *const_at;           /* where they start in it */
    int64_t const_bytes;      /* their bytes */
} host_mem;

typedef struct run_mem {
    host_mem *host;           /* host runs' (cpu.c), or NULL */
    dev_block *dmem;          /* device runs' slots (launch.c) */
    size_t ndmem;
    int64_t reserved;         /* what this run has reserved (run_reserve) */
} run_mem;

/* A device run that returned before its kernels finished (rj_bind_wait). */
typedef struct run_async {
    bool pending;
    void *events[2];          /* the backend's timing events of that run */
    void *queue;              /* OpenCL: its queue */
    uint64_t err_addr;        /* its device check's words of offsets (or 0) */
    uint64_t checks_addr;     /* its index checks' words (or 0) */
} run_async;

typedef struct run_view {
    rj_ctx *ctx;
    const run_plan *plan;
    const struct backend *be;
    const lprog *lp;          /* the loop IR (compiled targets) */
    void *code;               /* the backend's compiled code */
    const rj_graph *g;        /* the graph: only the reference interpreter evaluates it */
    void *stream;             /* the caller's stream / queue, or NULL */
    bool has_dev;             /* something is bound as device memory */
    const run_sym *sym;       /* per symbol */
    const run_class *cls;     /* per symbol; meaningful at class roots */
    const run_pair *pair;     /* per plan_pair */
    const run_in *in;
    run_out *out;
    run_mem *mem;
    run_async *async;
    rj_run_stats *stats;      /* backends fill kernel_ms (< 0: the run's time), copy_ms, kernels */
} run_view;

/* The concrete extent of dim d in this run; for a ragged dim, the longest item. */
/* The plan's index of the pair of classes named by key (PK_SQOFF's ref), or -1; its blocks'
 * offsets in this run, or NULL. */
static inline int32_t plan_pair_slot(const run_plan *pl, int32_t key) {
    for (int32_t k = 0; k < pl->npairs; k++)
        if (pl->pair[k].key == key) return k;
    return -1;
}
static inline const int64_t *run_pair_off(const run_view *v, int32_t key) {
    int32_t k = plan_pair_slot(v->plan, key);
    return k >= 0 ? v->pair[k].sqoff : NULL;
}

static inline int64_t run_dim(const run_view *v, rj_dim d) {
    return d >= 0 ? d : v->sym[dim_sym(d)].val;
}

/* The runs of a binding: the view and the memory behind it, kept across runs (run.c). */
typedef struct run_symmem {   /* per symbol: memory resolution reuses */
    int64_t *loff;            /* class roots: logical offsets of views with holes */
    int64_t loff_cap;
    int64_t *hcopy;           /* device offsets read back: batch + 1 offsets, then lengths */
    size_t hcopy_bytes;
} run_symmem;

typedef struct run_state {
    run_view v;
    run_sym *sym;
    run_class *cls;
    run_pair *pair;
    run_in *in;
    run_out *out;
    run_symmem *own;
    uint8_t *used;            /* per symbol: the plan's, and the symbols of bound idle inputs */
    run_mem mem;
    run_async async;
    rj_run_stats stats;       /* of the last run (rj_bind_stats) */
    bool prepared;            /* the last run succeeded: results are valid */
    bool sizing;              /* resolving for rj_bind_output_numel: sizes only, no memory */
    bool ready;               /* rj_bind_prepare succeeded since the last run: stats hold its plan */
    bool failed;              /* the last run failed: rj_bind_result repeats its error */
    rj_status status;         /* ... its status and message */
    char msg[512];
} run_state;

run_state *run_state_new(rj_ctx *ctx, struct artifact *art, const struct backend *be);
void run_state_free(rj_ctx *ctx, run_state *rs);

/* resolve.c: checks every binding and resolves the run into b->run's view. */
rj_status run_resolve(rj_bind *b);

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

/* ---- checks (checks.c) and memory (runmem.c): below everything of a run ------------------- */

/* An index op's first index out of range, as every target reports it. */
typedef struct index_fault {
    const char *op;                /* the index op's name */
    const char *what;              /* "input idx", or the index value's name */
    int rank;
    int64_t at[RJ_MAX_RANK];       /* its position in the index tensor */
    bool has_value;
    int64_t value;                 /* the index, when known */
    int64_t bound;                 /* the indexed dim's size (< 0: unknown) */
    bool per_item;                 /* the indexed dim is ragged: bound is item at[0]'s length */
} index_fault;
rj_status index_fault_fail(rj_ctx *ctx, const index_fault *f);
/* The run's verdict from the words of its checks buffer (lprog.checks_buf): RJ_OK, or the
 * first index op's first bad index. */
rj_status index_verdict(const run_view *v, const int64_t *words);
/* The device check's words (1 + nsym u32, launch.c) as the failure a host check would give:
 * the status, and a message naming the symbol and the first bad item. RJ_OK when all ones. */
rj_status offsets_verdict(const run_view *v, const uint32_t *words);

/* A device run's checks, read back from device memory at addr by read(ud, ...) and judged. */
typedef enum { CHECK_OFFSETS, CHECK_INDICES } device_check;
typedef rj_status (*device_read_fn)(void *ud, void *dst, uint64_t addr, size_t bytes);
rj_status device_verdict(const run_view *v, device_check which, uint64_t addr, device_read_fn read, void *ud);

/* Counts `bytes` that this run is about to allocate for `what` (followed by `index` when it
 * is >= 0: "temporary 3") against the context's memory limit (rj_ctx_set_memory_limit);
 * RJ_ERR_SIZE, naming it, when they do not fit. Every run-time allocation whose size the data
 * decides goes through here first; the name is formatted only on failure, off the dispatch
 * path. */
rj_status run_reserve(const run_view *v, int64_t bytes, const char *what, int index);
/* At least `bytes` (plus 64 for alignment) in blk; the address, 64-byte aligned. */
void *host_block_get(rj_ctx *ctx, host_block *blk, size_t bytes);
/* Transparent huge pages' size where the kernel may give them to memory that asks
 * (/sys/kernel/mm/transparent_hugepage: enabled `always` or `madvise`), 0 where it never does,
 * RAGJIT_HUGE_PAGES=0 is set, or elsewhere than Linux. Read once per process. */
size_t host_huge_pages(void);
/* At least `bytes` in blk, whose content need not be kept: a block that grows is allocated
 * afresh (nothing copied), and with huge > 0 a block of a huge page or more is allocated a
 * huge page larger and used from a huge page boundary (host_block_advise). The address
 * (64-byte aligned, or huge-aligned); *fresh: the block is new, not one page of it touched. */
void *host_block_fresh(rj_ctx *ctx, host_block *blk, size_t bytes, size_t huge, bool *fresh);
/* Advises the whole huge pages of a block host_block_fresh aligned as such (madvise
 * MADV_HUGEPAGE): pages faulted in later are huge ones, and those already there may be merged
 * into huge ones by the kernel in the background (khugepaged). */
void host_block_advise(host_block *blk);
/* Frees blk (huge pages advised in it withdrawn first). */
void host_block_free(rj_ctx *ctx, host_block *blk);
/* Frees what rm holds (device slots through be->dev_free). */
void run_mem_free(rj_ctx *ctx, const struct backend *be, run_mem *rm);

/* ---- programs ----------------------------------------------------------------------------- */

/* Stages of compilation whose text a program can show (rj_program_dump). Each is produced by
 * the pipeline or by one backend, once, and then kept. */
#define STAGES(X)                                                                              \
    X(GRAPH, "graph", "graph.rj", -1)                                                          \
    X(OPT, "opt", "opt.rj", -1)                                                                \
    X(FUSED, "fused", "fused.txt", -1)                                                         \
    X(LOOPS, "loops", "loops.txt", -1)                                                         \
    X(LLVM, "llvm", "ll", RJ_TARGET_CPU)                                                       \
    X(LLVM_OPT, "llvm-opt", "opt.ll", RJ_TARGET_CPU)                                           \
    X(ASM, "asm", "s", RJ_TARGET_CPU)                                                          \
    X(CUDA, "cuda", "cu", RJ_TARGET_CUDA)                                                      \
    X(PTX, "ptx", "ptx", RJ_TARGET_CUDA)                                                       \
    X(OPENCL, "opencl", "cl", RJ_TARGET_OPENCL)                                                \
    X(DOT, "dot", "dot", -1)
#define STAGE_ENUM(e, name, ext, owner) STAGE_##e,
typedef enum { STAGES(STAGE_ENUM) STAGE_COUNT } stage_id;
#undef STAGE_ENUM

typedef struct stage_info {
    const char *name, *ext; /* the stage's name, and the file extension RAGJIT_DUMP uses */
    int owner;              /* the target whose backend produces it, or -1: the pipeline */
} stage_info;
extern const stage_info stage_table[STAGE_COUNT];

/* Compiled code, shared by every artifact of the same structure and target: graphs that
 * differ only in names run the same machine code. */
typedef struct code_entry {
    struct code_entry *next;
    uint64_t hash;           /* graph_hash of key */
    rj_target target;
    rj_graph *key;
    int refs;                /* artifacts using it */
    void *code;              /* the backend's compiled form */
} code_entry;

/* A graph compiled for one target: the pipeline's results (lowered for the target's
 * descriptor), the stage texts produced so far, and the code. Identical graphs (names
 * included, since texts print them) share one through the context's cache (program.c);
 * programs hold references. */
typedef struct artifact {
    struct artifact *next;
    uint64_t hash;           /* graph_hash and graph_names_hash of key, mixed */
    rj_target target;
    rj_graph *key;           /* the graph as the user built it */
    int refs;                /* programs using it */
    bool lowered;            /* comp holds the pipeline's results */
    compiled comp;
    code_entry *ce;          /* NULL until compiled */
    char *text[STAGE_COUNT]; /* kept stage texts (NULL until asked for) */
    bool planned;            /* plan is made (with the code: runs read nothing else) */
    run_plan plan;
} artifact;

/* A target: plain hooks over loop IR and resolved runs, driven by program.c. The backends
 * never call the pipeline and never read binding or context internals beyond what these
 * arguments give them. */
typedef struct backend {
    const char *name;
    rj_target target;
    /* Can programs run here? The cheap refusal (no device) before anything is compiled. */
    rj_status (*available)(rj_ctx *ctx);
    /* Compiles loop IR into *code (shared by every program of the artifact). */
    rj_status (*compile)(rj_ctx *ctx, const lprog *lp, void **code);
    void (*code_free)(rj_ctx *ctx, void *code);
    /* Fills text[st] for a stage the backend owns (and any other of its stages that come from
     * the same work), from the loop IR and, when the artifact was compiled, its code; no
     * device is needed. */
    rj_status (*dump)(rj_ctx *ctx, const lprog *lp, const void *code, int st, char **text);
    /* Runs the compiled program on a resolved run. */
    rj_status (*run)(const run_view *v);
    /* rj_bind_prepare: everything of a run on v but its kernels (the memory it will use, sized,
     * allocated and touched; threads started; kernels compiled late), so that the first run
     * starts as warm as the later ones; stats->temp_bytes as a run sets it (NULL: nothing to
     * prepare beyond resolving). */
    rj_status (*prepare)(const run_view *v);
    /* rj_device_copy_bandwidth: ms for one device-to-device copy of `bytes` (NULL: none). */
    rj_status (*copy_probe)(rj_ctx *ctx, int64_t bytes, double *ms);
    /* Device memory of bindings (NULL on targets without a device): reads device memory into
     * the host (device offsets, before validation) on the binding's stream; frees what a
     * binding allocated; checks that addr is device memory of at least `bytes` (device) or
     * that a host pointer is not device memory (!device), where the driver can tell. */
    rj_status (*dev_read)(rj_ctx *ctx, void *stream, void *dst, uint64_t src, size_t bytes);
    void (*dev_free)(rj_ctx *ctx, uint64_t addr);
    rj_status (*dev_check)(rj_ctx *ctx, uint64_t addr, size_t bytes, bool device, const char *what);
    /* rj_device_handles: the device's context and ragjit's queue (NULL: none). */
    rj_status (*handles)(rj_ctx *ctx, void **context, void **queue);
    /* rj_bind_wait: waits for the run that returned early and fills its kernel time (NULL:
     * runs never return early); releases a binding's events (rj_bind_free). */
    rj_status (*wait)(rj_ctx *ctx, run_async *a, double *kernel_ms);
    void (*async_release)(run_async *a);
} backend;

struct rj_program {
    rj_ctx *ctx;
    const rj_graph *g;    /* the artifact's copy of the user's graph (names included) */
    rj_target target;
    uint64_t id;          /* serial number, unique in the process */
    const backend *be;
    artifact *art;        /* shared through the cache */
};

/* The persistent kernel cache (diskcache.c). A backend asks for the entry of its key (its
 * identity followed by the loop IR's fingerprint) before compiling, and stores what it
 * compiled; target names the entry's kind ("cpu", "cuda", "opencl"). disk_load hands over a
 * copy of the payload (mem_free it with *len) only when the whole key matches. Neither ever
 * fails a compile: any error is a miss or a write not made. Both run under the context's
 * lock. disk_build_id: this build of ragjit (its library's GNU build-id), NULL if unknown. */
bool disk_load(rj_ctx *ctx, const char *target, const void *key, size_t keylen, void **data, size_t *len);
void disk_store(rj_ctx *ctx, const char *target, const void *key, size_t keylen, const void *data, size_t len);
const char *disk_build_id(void);
bool disk_enabled(rj_ctx *ctx); /* a directory is set and the build is known */
/* The key of a device backend's entry in *key (initialised here): this build, the backend's
 * ident text and lp's fingerprint; empty (key->len 0) when the cache is off. */
rj_status disk_key(rj_ctx *ctx, sbuf *key, const lprog *lp, const char *ident);

extern const backend backend_reference;
extern const backend backend_cpu;
extern const backend backend_cuda;
extern const backend backend_opencl;

/* References to an artifact (program.c): programs and bindings hold one each. */
void artifact_retain(rj_ctx *ctx, artifact *a);
void artifact_release(rj_ctx *ctx, artifact *a);

/* interp.c: evaluates the program's graph on a resolved run. */
rj_status interp_run(const run_view *v);

/* kshare.c: a context's compiled kernels by code key (lprog_kernel_code_key), each with the
 * backend's code that owns it. */
typedef struct kshare_entry {
    uint64_t hash;
    sbuf key;
    void *fn, *owner;
} kshare_entry;
typedef struct kshare {
    kshare_entry *e;
    int32_t n, cap;
} kshare;
void *kshare_find(const kshare *t, const sbuf *key, void **owner);     /* NULL: none */
rj_status kshare_add(rj_ctx *ctx, kshare *t, sbuf *key, void *fn, void *owner); /* takes key */
void kshare_drop(kshare *t, const void *owner);                         /* owner's entries */
void kshare_free(rj_ctx *ctx, kshare *t);

/* cpu.c: settings and counters of the CPU backend (tests use them). Outputs larger than
 * `bytes` are written with streaming stores (0: the default threshold). */
rj_status cpu_set_stream_bytes(rj_ctx *ctx, int64_t bytes);
uint64_t cpu_compile_count(const rj_ctx *ctx);
uint64_t cpu_shared_kernel_count(const rj_ctx *ctx); /* kernels that run another one's code */
uint64_t cpu_disk_hit_count(const rj_ctx *ctx); /* modules loaded from the persistent cache */
/* The same for kernels compiled on first need (cpu.c, compiled_late). */
void cpu_late_counts(const rj_ctx *ctx, uint64_t *compiles, uint64_t *disk_hits);
uint64_t opencl_disk_hit_count(void); /* OpenCL programs built from it, in this process */

#endif
