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

/* ---- bindings and runs ------------------------------------------------------------------ */

/* Device memory a binding keeps across runs (GPU targets): every per-run buffer of a device
 * run (temporaries, uploads, tables, scratch) has a slot, grown as needed and freed with the
 * binding, so a run allocates and frees nothing once warm. shadow: what a small upload last
 * wrote (offsets, tables), so an unchanged one is not copied again. */
typedef struct dev_block {
    uint64_t addr;
    size_t bytes;
    void *shadow;
    size_t shadow_bytes;
} dev_block;

typedef struct rag_bind {
    const int64_t *off, *len; /* len NULL: packed (host memory; for device offsets, the copy) */
    int64_t batch;
    bool set;
    bool dev;                 /* offsets (and lengths) live on the device: doff, dlen */
    uint64_t doff, dlen;      /* dlen 0: packed */
    int64_t info_rows, info_maxlen; /* rj_bind_offsets_info (-1: not given) */
    bool devcheck;            /* this run checks the device offsets on the device (launch.c) */
    int64_t *hcopy;           /* device offsets read back: batch + 1 offsets, then lengths */
    size_t hcopy_bytes;
} rag_bind;

typedef struct in_bind {
    const void *data;    /* host memory, or NULL when dev */
    int64_t numel;
    bool set;
    bool dev;            /* device memory: ddata */
    uint64_t ddata;
} in_bind;

typedef struct out_bind {
    void *user;          /* caller memory, or NULL */
    int64_t cap;         /* its capacity in elements */
    void *own;           /* memory ragjit allocated (kept across runs) */
    size_t own_bytes;
    void *data;          /* where this run writes (host outputs) */
    int64_t numel;       /* elements this run writes (rows * inner for jagged) */
    int64_t sized;       /* rj_bind_output_numel's answer */
    rj_tensor result;
    bool dev;            /* written to device memory: duser, or down that ragjit allocates */
    uint64_t duser;      /* the caller's device memory (0: ragjit's) */
    uint64_t down;       /* device memory ragjit allocated (kept across runs, freed with the
                            binding by backend.dev_free) */
    size_t down_bytes;
    uint64_t ddata;      /* where this run writes (device outputs; set by the run) */
} out_bind;

struct rj_bind {
    rj_ctx *ctx;
    uint64_t prog_id;     /* the program's serial number (a binding serves one program) */
    struct artifact *art; /* the program's compiled graph: a reference, so a binding may
                             outlive its program */
    const rj_graph *g;    /* the program's graph (the artifact's) */
    int32_t nsym;
    int64_t *size;        /* user-bound dense sizes */
    uint8_t *size_set;
    rag_bind *rag;        /* per symbol (used for ragged symbols) */
    in_bind *in;          /* per graph input */
    out_bind *out;        /* per graph output */
    /* resolved by bind_prepare for the current run */
    int64_t *val;         /* per symbol: dense size, max(j) size, or the max row of a ragged */
    int64_t *rows;        /* per symbol: rows addressed by a ragged symbol's offsets */
    uint8_t *used;        /* per symbol: appears in the shape of a node some output depends on, or of a bound input */
    uint8_t *idle;        /* per input: no output depends on it, so it may stay unbound */
    const int64_t **loff; /* per class root: logical (packed) row offsets of the class, B+1 */
    int64_t *cbatch;      /* per class root: its batch size */
    int64_t *crows;       /* per class root: its logical rows (loff[cbatch], or the caller's
                             count for trusted device offsets, whose loff is NULL) */
    int64_t **loff_own;   /* per class root: loff computed for views with holes (reused) */
    int64_t *loff_cap;    /* their capacities, in entries */
    bool pairs;           /* the graph has [B, j, j] tensors (node_is_pair) */
    uint8_t *paired;      /* per class root: some [B, j, j] tensor has this class (its blocks'
                             offsets are computed each run) */
    int64_t **sqoff;      /* pairs: per class root, the first row of item b's len_b x len_b
                             block (B+1 entries: prefix sums of len_b^2), or NULL */
    int64_t *sq_cap;      /* their capacities, in entries */
    bool prepared;        /* the last run succeeded: results are valid */
    struct host_mem *mem; /* temporaries and scratch of host runs, kept across runs */
    int64_t run_bytes;    /* what this run has reserved (run_reserve) */
    rj_run_stats stats;   /* of the last run (rj_bind_stats); backends fill kernel_ms (< 0:
                             the run's time), copy_ms and kernels */
    const struct backend *be; /* the program's backend (device memory of the binding) */
    void *stream;         /* the caller's CUstream / cl_command_queue, or NULL */
    bool has_dev;         /* something is bound as device memory */
    bool trusted;         /* rj_bind_trust_offsets: device offsets are neither read nor checked */
    bool run_failed;      /* the last run failed: rj_bind_result repeats its error */
    rj_status run_status; /* ... its status and message */
    char run_msg[512];
    bool sizing;          /* bind_prepare for rj_bind_output_numel: sizes only, no memory */
    bool pending;         /* the last run returned before its kernels finished (rj_bind_wait) */
    dev_block *dmem;      /* device memory kept across runs (launch.c) */
    size_t ndmem;
    void *dev_events[2];  /* the backend's timing events of the last asynchronous run */
    void *dev_queue;      /* OpenCL: the queue of the last run that returned early */
    uint64_t err_addr;    /* the device check's words of a run that returned early (or 0) */
    uint64_t checks_addr; /* the index checks' words of a run that returned early (or 0) */
};

/* The device check's words (1 + nsym u32, launch.c) as the failure a host check would give:
 * the status, and a message naming the symbol and the first bad item. RJ_OK when all ones. */
rj_status bind_offsets_verdict(rj_bind *b, const uint32_t *words);

/* checks.c: an index op's first index out of range, as every target reports it. */
typedef struct index_fault {
    rj_op op;
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
rj_status index_verdict(rj_bind *b, const lprog *lp, const int64_t *words);

/* A device run's checks, read back from device memory at addr by read(ud, ...) and judged: the
 * offsets check's words (bind_offsets_verdict) or the index checks' (index_verdict). */
typedef enum { CHECK_OFFSETS, CHECK_INDICES } device_check;
typedef rj_status (*device_read_fn)(void *ud, void *dst, uint64_t addr, size_t bytes);
rj_status bind_device_verdict(rj_bind *b, device_check which, uint64_t addr, device_read_fn read, void *ud);

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

/* Counts `bytes` that this run is about to allocate for `what` (followed by `index` when it
 * is >= 0: "temporary 3") against the context's memory limit (rj_ctx_set_memory_limit);
 * RJ_ERR_SIZE, naming it, when they do not fit. Every run-time allocation whose size the data
 * decides goes through here first; the name is formatted only on failure, off the dispatch
 * path. */
rj_status run_reserve(rj_bind *b, int64_t bytes, const char *what, int index);

/* Checks every binding and resolves the sizes of this run (see the file comment). */
rj_status bind_prepare(rj_bind *b);
/* The concrete extent of dim d in this run; for a ragged dim, the longest row. */
int64_t bind_dim_value(const rj_bind *b, rj_dim d);

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
    /* Runs a compiled program on a prepared binding. */
    rj_status (*run)(rj_program *p, rj_bind *b);
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
    /* rj_bind_wait: waits for the binding's last run and fills its kernel time (NULL: runs
     * never return early); releases the binding's events (rj_bind_free). */
    rj_status (*wait)(rj_bind *b, double *kernel_ms);
    void (*bind_release)(rj_bind *b);
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

/* interp.c: evaluates the program's graph on a prepared binding. */
rj_status interp_run(rj_program *p, rj_bind *b);

/* cpu.c: settings and counters of the CPU backend (tests use them). Outputs larger than
 * `bytes` are written with streaming stores (0: the default threshold). */
rj_status cpu_set_stream_bytes(rj_ctx *ctx, int64_t bytes);
uint64_t cpu_compile_count(const rj_ctx *ctx);
uint64_t cpu_disk_hit_count(const rj_ctx *ctx); /* modules loaded from the persistent cache */
/* The same for kernels compiled on first need (cpu.c, compiled_late). */
void cpu_late_counts(const rj_ctx *ctx, uint64_t *compiles, uint64_t *disk_hits);
uint64_t opencl_disk_hit_count(void); /* OpenCL programs built from it, in this process */

#endif
