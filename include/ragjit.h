/*
 * ragjit.h — the public interface of ragjit, a JIT compiler for ragged (jagged) tensor
 * expressions.
 *
 * A program is described once as an expression graph over jagged tensors, checked when it is
 * built, compiled for a target, and run many times on new data:
 *
 *     rj_ctx *ctx = rj_ctx_new(NULL, NULL);
 *     rj_graph *g = rj_graph_new(ctx);
 *     rj_dim B = rj_graph_dense(g, "B"), J = rj_graph_ragged(g, "j1", B);
 *     rj_node x = rj_graph_input(g, "x", RJ_F32, 3, (rj_dim[]){B, J, 64});
 *     rj_node y = rj_graph_softmax(g, rj_graph_unary(g, RJ_OP_RELU, x), 1);
 *     rj_graph_output(g, y, "y");
 *     if (rj_graph_status(g) != RJ_OK) puts(rj_ctx_error(ctx));   // one check for the build
 *     rj_program *p = rj_program_new(g, RJ_TARGET_CPU);
 *     rj_bind *b = rj_bind_new(p);
 *     rj_bind_offsets(b, J, batch, offsets, NULL);
 *     rj_bind_input(b, x, values, rows * 64);
 *     rj_program_run(p, b);
 *     const rj_tensor *out = rj_bind_result(b, y);
 *
 * Model (see docs/guide.md):
 *   - A dim is a constant (>= 0), a named dense size bound at run time ("B", "D"), or a
 *     ragged symbol ("j1") whose extent varies with the index of its parent dim.
 *   - A jagged tensor f32[B, j1, 64] is a packed values buffer of shape (rows, 64) plus the
 *     int64 offsets of its ragged symbol (length B+1). Offsets belong to the symbol: every tensor
 *     naming j1 in one run is addressed through the same offsets (and optional lengths, for
 *     views with holes).
 *   - pad/unpad convert between jagged and padded dense form; ops on padded tensors have plain
 *     dense semantics, which the compiler reproduces without materialising the padding.
 *
 * Conventions:
 *   - Every object belongs to one rj_ctx and every allocation goes through its allocator hook.
 *   - Threads. A context may be shared by any number of threads: compiling (rj_program_new:
 *     a graph asked for by several threads at once compiles once), dumping, running and
 *     freeing programs, and creating and freeing bindings and tensors, all at the same time.
 *     One program may run on many threads at once, each with its own binding. What must not
 *     be shared is an object being changed: a graph while it is built (or while
 *     rj_program_new / rj_graph_dump reads it), a binding, and a tensor each belong to one
 *     thread at a time. With a shared context the allocator hook is called from several
 *     threads and must be thread-safe (the default is). Programs also use worker threads of
 *     their own (rj_ctx_set_threads).
 *   - Functions return an rj_status, or an object / node that signals failure (NULL, RJ_NONE,
 *     RJ_DIM_NONE). After any failure rj_ctx_error() describes what is wrong: the last failure
 *     of a call made on the calling thread, so threads never see each other's errors.
 *   - Graph building is "sticky": the first failure is recorded in the graph, later builder
 *     calls given RJ_NONE fail quietly, so a whole graph can be built and checked once.
 *   - One free call per object; free functions accept NULL.
 */
#ifndef RAGJIT_H
#define RAGJIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(RJ_BUILDING_LIBRARY) && defined(__GNUC__)
#define RJ_API __attribute__((visibility("default")))
#else
#define RJ_API
#endif

#define RJ_VERSION_MAJOR 0
#define RJ_VERSION_MINOR 1
#define RJ_VERSION_PATCH 0

/* Largest tensor rank. */
#define RJ_MAX_RANK 8

/* ----------------------------------------------------------------------------------------------
 * Status codes. Each failure that callers may want to tell apart has its own code; the
 * per-context message (rj_ctx_error) names the object and, for data errors, the first bad index.
 */
typedef enum rj_status {
    RJ_OK = 0,
    RJ_ERR_NOMEM,          /* the allocator returned NULL */
    RJ_ERR_ARG,            /* NULL pointer, unknown enum, index out of range, bad name */
    RJ_ERR_GRAPH,          /* a builder argument is RJ_NONE or the graph already failed */
    RJ_ERR_SHAPE,          /* ranks or dims do not combine (incl. ragged symbol mismatch) */
    RJ_ERR_DTYPE,          /* the op does not accept this dtype */
    RJ_ERR_UNSUPPORTED,    /* well-formed, but not supported by this version or target */
    RJ_ERR_UNBOUND,        /* an input, output, dense size or ragged symbol is not bound */
    RJ_ERR_SIZE,           /* a buffer's element count or a dense size disagrees */
    RJ_ERR_BATCH,          /* batch sizes (offsets lengths, B) disagree */
    RJ_ERR_OFFSETS_START,  /* offsets[0] != 0, or a negative offset in a view with holes */
    RJ_ERR_OFFSETS_ORDER,  /* offsets decrease, or a negative length */
    RJ_ERR_OFFSETS_END,    /* last offset != rows of a values buffer (or beyond it, with holes) */
    RJ_ERR_SAME,           /* symbols declared `same` have different lengths */
    RJ_ERR_OVERFLOW,       /* a size computation overflows */
    RJ_ERR_PAD_LEN,        /* a pad/unpad length is smaller than the longest row */
    RJ_ERR_PARSE,          /* text format syntax error */
    RJ_ERR_IO,             /* file could not be read or written, or is malformed */
    RJ_ERR_COMPILE,        /* the backend failed to compile the program */
    RJ_ERR_NO_DEVICE,      /* no CUDA driver or device, no OpenCL loader, platform or device */
    RJ_ERR_INTERNAL,       /* a bug in ragjit: please report it */
    RJ_ERR_INDEX,          /* an index op's index is out of range (found during a run) */
    RJ_STATUS_COUNT
} rj_status;

/* Short constant description of a status ("out of memory", ...). */
RJ_API const char *rj_status_str(rj_status s);

/* ----------------------------------------------------------------------------------------------
 * Context. The allocator follows Lua's contract: nsize == 0 frees ptr (returning NULL);
 * otherwise it (re)allocates ptr from osize to nsize bytes and returns NULL on failure, leaving
 * ptr untouched. osize is the size previously requested for ptr (0 when ptr is NULL).
 * Returned blocks must be aligned for any scalar type (malloc alignment).
 */
typedef void *(*rj_alloc_fn)(void *ud, void *ptr, size_t osize, size_t nsize);
typedef struct rj_ctx rj_ctx;

/* A new context; alloc == NULL selects malloc/realloc/free. NULL if out of memory. */
RJ_API rj_ctx *rj_ctx_new(rj_alloc_fn alloc, void *ud);
/* Frees the context. All graphs, programs, bindings and tensors of the context must be freed
 * first; the context frees its compiler (JIT) state. */
RJ_API void rj_ctx_free(rj_ctx *ctx);
/* The message of the last failure in this context on the calling thread ("" if none); valid
 * until that thread's next call. */
RJ_API const char *rj_ctx_error(const rj_ctx *ctx);
/* The status of the last failure in this context on the calling thread (RJ_OK if none): the
 * status behind a NULL or RJ_NONE result. */
RJ_API rj_status rj_ctx_status(const rj_ctx *ctx);
/* Number of worker threads for CPU programs; 0 (the default) means one per processor the
 * process may keep busy: its CPU affinity mask as it started (taskset, a container's cpuset;
 * as OpenMP counts its default threads, so a thread pinned since does not shrink it), capped
 * by the cgroup's CPU quota rounded up (docker --cpus, a Kubernetes CPU limit; read once per
 * process). Runs started after the call use the new number.
 * ragjit's own workers are threads of the context, started by the first run that wants them
 * and stopped by rj_ctx_free. A kernel's work is cut into more chunks than threads, claimed
 * one at a time by the calling thread and whichever workers are awake: a worker the OS does
 * not schedule delays only the chunk it holds, and a run never waits for one that has not
 * started. */
RJ_API rj_status rj_ctx_set_threads(rj_ctx *ctx, int threads);
/* An embedding runtime's own thread pool, used instead of ragjit's workers (as XNNPACK takes
 * a pthreadpool). For each kernel that runs on more than one thread ragjit calls
 * fn(user, n, task, task_arg): fn must call task(task_arg, i) once for every i in [0, n),
 * from any threads, in any order, at once or not, and return when all n calls have returned.
 * n is at most the context's thread count (rj_ctx_set_threads: set it to the pool's size).
 * Each call claims chunks of the kernel's work until none is left, so a call that starts late
 * finds nothing to do and returns at once, and the kernel's work is done by whichever calls
 * run; i names that call's scratch memory, so two calls with the same i must not overlap.
 * fn may be called from several threads at once (one context may run programs on many
 * threads), never from inside task. fn == NULL restores ragjit's own workers. Set it before
 * runs start: not while a run is in flight on the context. */
typedef void (*rj_task_fn)(void *task_arg, int i);
typedef void (*rj_parallel_fn)(void *user, int n, rj_task_fn task, void *task_arg);
RJ_API rj_status rj_ctx_set_parallel(rj_ctx *ctx, rj_parallel_fn fn, void *user);
/* The most memory one run may allocate: outputs ragjit allocates, temporaries, per-thread
 * scratch, device buffers, and the reference interpreter's intermediates (caller memory does
 * not count). A run that would need more fails with RJ_ERR_SIZE before allocating anything
 * large, naming what it needed, so a hostile pad length or batch cannot exhaust the machine.
 * 0 restores the default: half of the machine's physical memory. */
RJ_API rj_status rj_ctx_set_memory_limit(rj_ctx *ctx, int64_t bytes);
/* The persistent kernel cache: compiled code (CPU object code, CUDA images, OpenCL program
 * binaries) kept in files under `dir` and loaded by any later process that compiles the same
 * kernels for the same machine and the same build of ragjit, without compiling. NULL (the
 * default) takes RAGJIT_CACHE_DIR, else $XDG_CACHE_HOME/ragjit, else ~/.cache/ragjit; "" or
 * "off" (here or in RAGJIT_CACHE_DIR) turns it off. An entry is used only if it is complete
 * and its whole key matches; a damaged or foreign one is ignored and rewritten. Directories
 * that cannot be written only cost the cache. The entries are kept below RAGJIT_CACHE_MAX_MB
 * (1024 by default): after each store the least recently used go. The directory may be deleted
 * at any time. Compiles after the call use the new setting. */
RJ_API rj_status rj_ctx_set_cache_dir(rj_ctx *ctx, const char *dir);
/* What computes matrix products on the CPU, for every context of the process: a BLAS,
 * "OpenBLAS 0.3.21 DYNAMIC_ARCH ... (libopenblas.so.0)"; or "ragjit's own sgemm (AVX-512 14x32):
 * ..." saying why no BLAS does (RAGJIT_BLAS=off; none found; only the reference BLAS found,
 * which is slower than ragjit's own sgemm and so is not used unless RAGJIT_BLAS names it; f64
 * products are then JIT loops); or "none: ..." (RAGJIT_BLAS=loops: every product as JIT loops).
 * Loads the library on first use (RAGJIT_BLAS is read then); a constant string. */
RJ_API const char *rj_blas_info(void);
/* Frees a string returned by ragjit (dumps, shape strings). */
RJ_API void rj_string_free(rj_ctx *ctx, char *s);

/* ----------------------------------------------------------------------------------------------
 * Dtypes. Promotion follows PyTorch: float beats int beats bool and the wider type wins; a
 * scalar literal never widens a tensor (f32 * 2.0 stays f32), but lifts an int tensor to f32
 * (resp. a bool tensor to i64) when it is of a higher category.
 * RJ_F16 (IEEE binary16) and RJ_BF16 (bfloat16) are storage types: loads widen to f32, the
 * arithmetic and every accumulation are f32, and each value an op produces is rounded to
 * nearest even once (PyTorch's CPU semantics). f16 with bf16 promotes to f32; with f32, f32.
 */
typedef enum rj_dtype { RJ_BOOL, RJ_I32, RJ_I64, RJ_F32, RJ_F64, RJ_F16, RJ_BF16, RJ_DTYPE_COUNT } rj_dtype;

RJ_API const char *rj_dtype_name(rj_dtype t); /* "bool", "i32", ... or NULL */
RJ_API size_t rj_dtype_size(rj_dtype t);      /* bytes per element, 0 if invalid */
/* Element i of an array of dtype t, as a double (bool 0/1; a 16-bit float widened exactly);
 * and v stored there: floats round to nearest even (16-bit ones through f32, as kernels round
 * their f32 results), integers saturate with NaN -> 0 as casts do. An invalid t reads 0 and
 * writes nothing. For data in a dtype C has no type for (f16, bf16). */
RJ_API double rj_value_get(rj_dtype t, const void *values, int64_t i);
RJ_API void rj_value_set(rj_dtype t, void *values, int64_t i, double v);

/* ----------------------------------------------------------------------------------------------
 * Ops, defined once in this table: X(ENUM, text name, kind, result dtype rule).
 * Kinds: LEAF inputs and literals; UNARY, BINARY, COMPARE elementwise; SELECT where/masked_fill;
 * CAST; REDUCE over one dim; SOFTMAX over one dim; NORM over trailing dense dims; PAD/UNPAD.
 * Dtype rules: SAME (promoted inputs), FLOAT (promoted, then int/bool -> f32), BOOL (bool),
 * SUM (bool/int -> i64), ATTR (given by an attribute).
 */
#define RJ_OP_TABLE(X)                                   \
    X(INPUT, "input", LEAF, ATTR)                        \
    X(SCALAR, "scalar", LEAF, ATTR)                      \
    X(NEG, "neg", UNARY, SAME)                           \
    X(ABS, "abs", UNARY, SAME)                           \
    X(SGN, "sgn", UNARY, SAME)                           \
    X(RELU, "relu", UNARY, SAME)                         \
    X(GELU, "gelu", UNARY, FLOAT)                        \
    X(GELU_TANH, "gelu_tanh", UNARY, FLOAT)              \
    X(SILU, "silu", UNARY, FLOAT)                        \
    X(SIGMOID, "sigmoid", UNARY, FLOAT)                  \
    X(TANH, "tanh", UNARY, FLOAT)                        \
    X(EXP, "exp", UNARY, FLOAT)                          \
    X(LOG, "log", UNARY, FLOAT)                          \
    X(SQRT, "sqrt", UNARY, FLOAT)                        \
    X(RSQRT, "rsqrt", UNARY, FLOAT)                      \
    X(SIN, "sin", UNARY, FLOAT)                          \
    X(COS, "cos", UNARY, FLOAT)                          \
    X(LOGICAL_NOT, "logical_not", UNARY, BOOL)           \
    X(ADD, "add", BINARY, SAME)                          \
    X(SUB, "sub", BINARY, SAME)                          \
    X(MUL, "mul", BINARY, SAME)                          \
    X(DIV, "div", BINARY, FLOAT)                         \
    X(POW, "pow", BINARY, SAME)                          \
    X(MAXIMUM, "maximum", BINARY, SAME)                  \
    X(MINIMUM, "minimum", BINARY, SAME)                  \
    X(EQ, "eq", COMPARE, BOOL)                           \
    X(NE, "ne", COMPARE, BOOL)                           \
    X(LT, "lt", COMPARE, BOOL)                           \
    X(LE, "le", COMPARE, BOOL)                           \
    X(GT, "gt", COMPARE, BOOL)                           \
    X(GE, "ge", COMPARE, BOOL)                           \
    X(LOGICAL_AND, "logical_and", COMPARE, BOOL)         \
    X(LOGICAL_OR, "logical_or", COMPARE, BOOL)           \
    X(WHERE, "where", SELECT, SAME)                      \
    X(MASKED_FILL, "masked_fill", SELECT, SAME)          \
    X(CAST, "cast", CAST, ATTR)                          \
    X(SUM, "sum", REDUCE, SUM)                           \
    X(MEAN, "mean", REDUCE, FLOAT)                       \
    X(MAX, "max", REDUCE, SAME)                          \
    X(MIN, "min", REDUCE, SAME)                          \
    X(PROD, "prod", REDUCE, SUM)                         \
    X(SOFTMAX, "softmax", SOFTMAX, FLOAT)                \
    X(LOG_SOFTMAX, "log_softmax", SOFTMAX, FLOAT)        \
    X(LAYER_NORM, "layer_norm", NORM, FLOAT)             \
    X(RMS_NORM, "rms_norm", NORM, FLOAT)                 \
    X(PAD, "pad", PAD, SAME)                             \
    X(UNPAD, "unpad", PAD, SAME)                         \
    X(EMBEDDING, "embedding", INDEX, ATTR)               \
    X(GATHER, "gather", INDEX, ATTR)                     \
    X(TAKE_ALONG_DIM, "take_along_dim", INDEX, ATTR)     \
    X(INDEX_SELECT, "index_select", INDEX, ATTR)         \
    X(POSITIONS, "positions", INDEX, ATTR)               \
    X(RESHAPE, "reshape", VIEW, ATTR)                    \
    X(NARROW, "narrow", VIEW, ATTR)                      \
    X(MATMUL, "matmul", MATMUL, FLOAT)                   \
    X(TRANSPOSE, "transpose", VIEW, ATTR)                \
    X(CAT, "cat", VIEW, SAME)                            \
    X(ARANGE, "arange", INDEX, ATTR)                     \
    X(FULL, "full", INDEX, ATTR)                         \
    X(ATTENTION, "attention", ATTENTION, FLOAT)

typedef enum rj_op {
#define RJ_X_(e, name, kind, rule) RJ_OP_##e,
    RJ_OP_TABLE(RJ_X_)
#undef RJ_X_
    RJ_OP_COUNT
} rj_op;

RJ_API const char *rj_op_name(rj_op op);      /* "add", ... or NULL */
RJ_API rj_op rj_op_from_name(const char *s);  /* RJ_OP_COUNT if unknown */

/* ----------------------------------------------------------------------------------------------
 * Graphs. A graph owns its nodes (ids, valid until the graph is freed) and shape symbols.
 *
 * rj_dim: a constant size (>= 0) or a symbol (< 0) returned by rj_graph_dense/rj_graph_ragged.
 * RJ_DIM_NONE marks a failed symbol call, or "default" where documented.
 */
typedef struct rj_graph rj_graph;
typedef int64_t rj_dim;
typedef int32_t rj_node;
#define RJ_NONE ((rj_node)-1)
#define RJ_DIM_NONE INT64_MIN

RJ_API rj_graph *rj_graph_new(rj_ctx *ctx);
RJ_API void rj_graph_free(rj_graph *g);
/* RJ_OK, or the status of the first failure while building (its message is in the context). */
RJ_API rj_status rj_graph_status(const rj_graph *g);

/* Names. Inputs, outputs and symbols (dense sizes, ragged symbols) share one namespace, as the
 * data files named after them share one directory in `ragjit run`: giving a name that another
 * kind already has fails with RJ_ERR_ARG naming both, so that no input's file can be read as a
 * symbol's offsets or an output written over them. An input that is also an output may keep
 * its name. Names are letters, digits and _, not starting with a digit, under 128 bytes. */

/* A named dense size bound at run time; the same name gives the same symbol. Fails if an input
 * or output has the name. */
RJ_API rj_dim rj_graph_dense(rj_graph *g, const char *name);
/* A ragged symbol whose extent varies with the index of `parent` (a dense size symbol, the
 * batch dim). Declaring an existing name again with the same parent returns the same symbol.
 * Fails if an input or output has the name. */
RJ_API rj_dim rj_graph_ragged(rj_graph *g, const char *name, rj_dim parent);
/* Declares two ragged symbols with the same parent equal: tensors using them combine, and the
 * runtime compares the lengths bound to them once per run (RJ_ERR_SAME if they differ). */
RJ_API rj_status rj_graph_same(rj_graph *g, rj_dim a, rj_dim b);
/* The symbol named `name`, or RJ_DIM_NONE. */
RJ_API rj_dim rj_graph_find_dim(const rj_graph *g, const char *name);

/* A graph input. A ragged dim must directly follow its parent dim (f32[B, j1, 64]). Fails if
 * any input, output or symbol already has the name. */
RJ_API rj_node rj_graph_input(rj_graph *g, const char *name, rj_dtype dtype, int rank,
                              const rj_dim *dims);
/* Marks a node as an output under `name` (NULL: the first of "out<k>", k = 0, 1, ... that no
 * input, output or symbol has). A node may be output once. Fails if another node's input or
 * output, or a symbol, has the name. */
RJ_API rj_status rj_graph_output(rj_graph *g, rj_node n, const char *name);

/* Scalar literals. They take part in dtype promotion as Python numbers do in PyTorch. */
RJ_API rj_node rj_graph_scalar(rj_graph *g, double v);       /* a float literal */
RJ_API rj_node rj_graph_scalar_int(rj_graph *g, int64_t v);  /* an int literal */
RJ_API rj_node rj_graph_scalar_bool(rj_graph *g, bool v);    /* True / False */

/* Elementwise ops (kinds UNARY, BINARY, COMPARE); operands broadcast as in NumPy on trailing
 * dims, a size-1 dim broadcasting against any dim, ragged included. Two operands may differ
 * in a dim only if one of them is 1. */
RJ_API rj_node rj_graph_unary(rj_graph *g, rj_op op, rj_node x);
RJ_API rj_node rj_graph_binary(rj_graph *g, rj_op op, rj_node a, rj_node b);
/* where(c, a, b): c must be bool. */
RJ_API rj_node rj_graph_where(rj_graph *g, rj_node c, rj_node a, rj_node b);
/* masked_fill(x, mask, value): mask is bool and broadcasts to x's shape; result has x's dtype. */
RJ_API rj_node rj_graph_masked_fill(rj_graph *g, rj_node x, rj_node mask, double value);
RJ_API rj_node rj_graph_cast(rj_graph *g, rj_node x, rj_dtype to);

/* Reductions (SUM, MEAN, MAX, MIN, PROD) over one dim; dim may be negative. Over the ragged
 * dim they give a dense [B, ...] tensor; an empty row gives the identity (sum 0, prod 1,
 * max -inf / the type's minimum, min +inf / maximum, mean NaN). */
RJ_API rj_node rj_graph_reduce(rj_graph *g, rj_op op, rj_node x, int dim, bool keepdim);
/* softmax / log_softmax over one dim (the ragged dim or a dense dim). */
RJ_API rj_node rj_graph_softmax(rj_graph *g, rj_node x, int dim);
RJ_API rj_node rj_graph_log_softmax(rj_graph *g, rj_node x, int dim);
/* layer_norm over the last `ndims` dims, which must be dense. weight and bias are RJ_NONE or
 * tensors of exactly those dims. eps < 0 selects the default 1e-5. */
RJ_API rj_node rj_graph_layer_norm(rj_graph *g, rj_node x, int ndims, rj_node weight,
                                   rj_node bias, double eps);
/* rms_norm over the last `ndims` dims; eps < 0 selects the dtype's machine epsilon (as
 * PyTorch's eps=None). */
RJ_API rj_node rj_graph_rms_norm(rj_graph *g, rj_node x, int ndims, rj_node weight,
                                 double eps);
/* pad(x, value, len): T[B, j, ...] -> T[B, len, ...]; len RJ_DIM_NONE pads to the longest
 * row (a run-time size printed max(j)); a constant or dense len smaller than the longest row
 * fails at run time with RJ_ERR_PAD_LEN (truncation is not supported). */
RJ_API rj_node rj_graph_pad(rj_graph *g, rj_node x, double value, rj_dim len);
/* unpad(p, j): T[B, L, ...] -> T[B, j, ...], keeping the first len_b rows of item b; L must be
 * at least the longest row of j (checked at run time). */
RJ_API rj_node rj_graph_unpad(rj_graph *g, rj_node p, rj_dim ragged);
/* unpad of dims 1 and 2: T[B, L, L, ...] -> T[B, j, j, ...], each item's first len_b x len_b
 * block (the inverse of pad of a tensor with two ragged dims). */
RJ_API rj_node rj_graph_unpad_blocks(rj_graph *g, rj_node p, rj_dim ragged);

/* Index ops (PyTorch's names and semantics). Indices are integer tensors (i32 or i64) with
 * values in [0, size) of the dim they index: negative indices are out of range, as in
 * PyTorch's embedding and gather. Every run checks every index on the target that runs it
 * (inside the generated kernels, never reading out of bounds) and an out-of-range index fails
 * the run with RJ_ERR_INDEX and a message naming the op, the index tensor and the first bad
 * position; the outputs of such a run are unspecified.
 *
 * embedding(table, idx): table [V, D], idx of any shape S (jagged [B, j1] included):
 * T[S..., D], row idx[s] of the table at s. sum(embedding(t, idx), dim=1) is a fused
 * embedding bag. */
RJ_API rj_node rj_graph_embedding(rj_graph *g, rj_node table, rj_node idx);
/* gather(x, dim, index): out[..., i, ...] = x[..., index[..., i, ...], ...] along dim, with
 * index of x's rank and, in every other dim, x's size (a smaller constant size reads the first
 * rows, as PyTorch's gather does); the result has index's shape. dim may be the ragged dim (an
 * index into each item's rows, bounded by that item's length) or a dense dim. */
RJ_API rj_node rj_graph_gather(rj_graph *g, rj_node x, int dim, rj_node index);
/* take_along_dim(x, index, dim): gather with x and index broadcast against each other in
 * every dim but dim (numpy.take_along_axis): log_softmax [B, j1, V] with a target [B, j1, 1]
 * gives the log-likelihood [B, j1, 1]. */
RJ_API rj_node rj_graph_take_along_dim(rj_graph *g, rj_node x, rj_node index, int dim);
/* index_select(x, dim, index): index a 1-D integer tensor [K]; dim a dense dim of x (not the
 * ragged dim or the batch dim of a jagged tensor); the result is x with that dim K. */
RJ_API rj_node rj_graph_index_select(rj_graph *g, rj_node x, int dim, rj_node index);
/* positions(j): i64[B, j], each row's index inside its item (0, 1, ..., len_b - 1). */
RJ_API rj_node rj_graph_positions(rj_graph *g, rj_dim ragged);
/* Constants computed from the index, with no input buffer (PyTorch's arange, full, zeros,
 * ones): arange(n, dtype) is [n] holding 0, 1, ..., n - 1; full(rank, dims, value, dtype) a
 * tensor of dims (constants and dense size symbols: no ragged dim) all `value` (converted to
 * dtype as a cast converts). They are typed tensors: full(..., F32) * an f64 tensor is f64. */
RJ_API rj_node rj_graph_arange(rj_graph *g, rj_dim n, rj_dtype dtype);
RJ_API rj_node rj_graph_full(rj_graph *g, int rank, const rj_dim *dims, double value, rj_dtype dtype);
/* reshape(x, rank, dims): x viewed with other dims after the batch and ragged dims (for a
 * jagged x, dims[0..1] must be x's own: [B, j1, 8, 8] from [B, j1, 64]); the dims must hold
 * as many elements, provably (equal products of constants and the same size symbols). One
 * dim may be RJ_DIM_NONE, meaning -1: the size that makes the counts agree (constants only).
 * unsqueeze / squeeze insert or drop a dim of size 1 (dim may be negative; squeeze of a dim
 * that is not 1 returns x unchanged, as PyTorch does). */
RJ_API rj_node rj_graph_reshape(rj_graph *g, rj_node x, int rank, const rj_dim *dims);
RJ_API rj_node rj_graph_unsqueeze(rj_graph *g, rj_node x, int dim);
RJ_API rj_node rj_graph_squeeze(rj_graph *g, rj_node x, int dim);
/* narrow(x, dim, start, length), PyTorch's torch.narrow: x with dim cut to the elements
 * start .. start+length-1, a view (read through, never copied). dim (may be negative) is a
 * dense dim of constant size: any dim of a dense tensor, a dim after the ragged one of a jagged
 * tensor ([B, j1, D]: dim 2 or -1); slicing the batch dim or a ragged dim is not supported. A
 * negative start counts from the end; 0 <= length and start + length <= the size. PyTorch's
 * split and chunk are narrows (the text format spells them so). */
RJ_API rj_node rj_graph_narrow(rj_graph *g, rj_node x, int dim, int64_t start, int64_t length);

/* Matrix products. matmul(x, w): x [..., M, K] (a jagged [B, j1, K] included) times a dense
 * 2-D w [K, N]: [..., N], one GEMM over all of x's rows (for a jagged x, its packed rows). Both
 * float (promoted as add promotes). linear(x, weight, bias): x @ weightᵀ + bias with PyTorch's
 * weight [N, K] and bias [N] or RJ_NONE. Elementwise work on x and on the product is fused
 * around the product (a bias, an activation, a residual add, ...). */
RJ_API rj_node rj_graph_matmul(rj_graph *g, rj_node x, rj_node w);
/* Per-item products over a ragged dim (DESIGN.md §1 (b), (c)): with q, k, v jagged [B, j1, D],
 *   matmul(q, transpose(k, 1, 2))   [B, j1, j1]: each item's len_b x len_b block (two ragged
 *                                   dims of one class: attention scores)
 *   matmul(p, v), p [B, j1, j1]     [B, j1, D]
 *   matmul(transpose(x, 1, 2), y)   dense [B, K, N] for x [B, j1, K], y [B, j1, N], summed over
 *                                   each item's rows (a weight gradient)
 * and with k, v of another ragged symbol of B, [B, j2, D] (cross attention), q kᵀ is [B, j1, j2],
 * each item a len1_b x len2_b block, and p v takes v [B, j2, D] (docs/guide.md, "Two ragged
 * classes"; pad and transposing such blocks are refused).
 * A tensor with two ragged dims takes elementwise ops, and softmax, log_softmax and the
 * reductions over dim 1 (without keepdim), dim 2 or a later dense dim, and pad (both ragged dims:
 * [B, L, L]; rj_graph_unpad_blocks takes the blocks back); it can be an input (bound with
 * rj_bind_input: sum_b len_b^2 rows of the inner dims, item after item) and an output (rj_tensor_info: each
 * item's block of len_b x len_b rows of the inner dims, in C order, item b's block starting at
 * offsets[b] rows, ragged_dims = 2). transpose(x, d0, d1) swaps two dims of a dense tensor;
 * of a jagged [B, j1, D] (dims 1 and 2) it is only an operand of matmul; two dense dims of a
 * jagged tensor (dims 2 and 3 of [B, j1, H, D]) swap as a dense tensor's do. */
RJ_API rj_node rj_graph_transpose(rj_graph *g, rj_node x, int dim0, int dim1);
RJ_API rj_node rj_graph_linear(rj_graph *g, rj_node x, rj_node weight, rj_node bias);

/* Fused attention (docs/guide.md, "Attention"). attention(scores, v, safe): softmax(scores,
 * dim=-1) @ v computed by one online-softmax kernel that never writes the scores, where scores
 * is a tensor with two ragged dims [B, j1, j2] (or [B, j1, j2, H] with heads; j2 is j1 in self
 * attention, another symbol of B in cross attention) and v is jagged [B, j2, Dv]
 * ([B, j2, Hkv, Dv], Hkv dividing H: query head h reads kv head h / (H / Hkv)); the
 * result is [B, j1, Dv] ([B, j1, H, Dv]). scores is usually an elementwise expression of one
 * per-item product q @ kᵀ (a scale, masks, biases from positions, soft-capping), which the
 * kernel computes as it goes. A row whose scores are all -inf is NaN, as softmax gives, unless
 * `safe`: then it is 0 (PyTorch's scaled_dot_product_attention). The compiler also finds
 * matmul(softmax(f(q @ kᵀ), dim=-1), v) written out and fuses it the same way.
 *
 * scaled_dot_product_attention(q, k, v, attn_mask, is_causal, scale, enable_gqa): PyTorch's
 * F.scaled_dot_product_attention (dropout_p = 0) on jagged q [B, j1, E], k [B, j2, E] and v
 * [B, j2, Dv] (j2 = j1, or keys of their own lengths): scale NaN selects the default 1/sqrt(E);
 * attn_mask (RJ_NONE or a tensor broadcastable to the scores [B, j1, j2]) is bool (True = takes
 * part) or float (added to the scaled scores); is_causal lets query i see keys j <= i (top-left,
 * PyTorch's ones(L, S).tril(0)) and cannot be combined with attn_mask; a
 * fully masked row gives 0. Built as matmul, scale, mask and attention(..., safe=true). */
RJ_API rj_node rj_graph_attention(rj_graph *g, rj_node scores, rj_node v, bool safe);
RJ_API rj_node rj_graph_sdpa(rj_graph *g, rj_node q, rj_node k, rj_node v, rj_node attn_mask,
                             bool is_causal, double scale, bool enable_gqa);

/* cat(xs, n, dim): PyTorch's torch.cat of n >= 1 tensors along a dense dim (dim may be
 * negative): all jagged with the same ragged symbol ([B, j1, D_i]) or all dense, of one rank,
 * equal in every other dim; the cat dim must be a constant size in each (the result's is their
 * sum). Not along the batch or the ragged dim. The dtype is the promotion of the operands' (as
 * PyTorch's); a literal is refused. Errors name the operands by their place in xs from 1 ("cat:
 * operand 2 has 64 in dim 1 where operand 1 has 32"). No copy is made where a consumer fuses:
 * element d of the cat dim reads xs[0] at d, or the next operand at d minus the sizes before
 * it. stack(xs, n, dim) is unsqueeze(x, dim) of each, then cat along dim; dim counts in the
 * result (-1: a new last dim) and must come after a jagged tensor's ragged dim. */
/* permute(x, rank, perm): PyTorch's x.permute(perm), dim perm[k] of x at k (negative dims
 * count from the last), as a chain of transposes. A jagged tensor keeps its batch dim in place;
 * of 3 dims also its ragged dim; of 4 or more its ragged dim may move among the dense ones as
 * heads do ([B, j1, H, D] -> [B, H, j1, D] by (0, 2, 1, 3), a free view: the guide's "Heads");
 * a dense tensor takes any permutation. */
RJ_API rj_node rj_graph_permute(rj_graph *g, rj_node x, int rank, const int *perm);
RJ_API rj_node rj_graph_cat(rj_graph *g, const rj_node *xs, int n, int dim);
RJ_API rj_node rj_graph_stack(rj_graph *g, const rj_node *xs, int n, int dim);

/* Functions: fn is a graph of the same context used as a function (a layer built once): its
 * inputs are the parameters, in order, its outputs the results, in order. The call copies
 * fn's nodes into g with each parameter replaced by args[k] and writes the nodes of fn's
 * outputs, in g, to results (nresults = rj_graph_output_count(fn)). Each argument must have
 * its parameter's dtype and rank; fn's symbols are bound by the arguments' dims (B, j1 of the
 * parameters are whatever the arguments have there, consistently; a dense size no parameter
 * binds is g's of that name, declared if g has none). Every node is re-inferred in g, so a
 * call is its body written out; kernels identical in every call compile once. fn stays
 * untouched and can be called again. Returns RJ_OK or the failure (also g's error). */
RJ_API rj_status rj_graph_call(rj_graph *g, const rj_graph *fn, const rj_node *args, int nargs, rj_node *results,
                               int nresults);

/* Parses a program in ragjit's text format (docs/guide.md) into a new graph:
 *     ragged j1 : B
 *     input x : f32[B, j1, 64]
 *     y = softmax(relu(x * 2.0 + 0.5), dim=1)
 *     output y
 * `filename` is used in messages only (NULL: "<input>"). On error: NULL, with a status from
 * rj_ctx_status (RJ_ERR_PARSE for syntax, or the builder's status for ill-formed programs) and
 * a message "file:line:col: message", then the source line and a caret under the column.
 * Sources must be under 2 GiB; expressions nest at most 256 levels (deeper is RJ_ERR_PARSE),
 * so parsing needs at most about 1 MiB of stack whatever the source. */
RJ_API rj_graph *rj_graph_parse(rj_ctx *ctx, const char *source, const char *filename);
/* What rj_graph_parse found suspicious but legal, one "file:line:col: warning: ..." a line (a
 * ragged symbol no input uses; a new dense size named like a ragged symbol, the sign of a
 * typo in a shape), or NULL; owned by the graph. */
RJ_API const char *rj_graph_warnings(const rj_graph *g);

/* Introspection: what a parsed or built graph declares, for code that binds data by name
 * (the `ragjit` command is written on these calls alone). Inputs and outputs are numbered
 * 0 .. count-1 in declaration order; an index out of range gives RJ_NONE / NULL and a message
 * in the context. Strings belong to the graph. */
RJ_API int rj_graph_input_count(const rj_graph *g);
RJ_API rj_node rj_graph_input_at(const rj_graph *g, int i);
RJ_API int rj_graph_output_count(const rj_graph *g);
RJ_API rj_node rj_graph_output_at(const rj_graph *g, int i);
/* The name the i-th input / output was declared with. Prefer these to rj_node_name for
 * file or buffer names: an input that is also an output has two names. */
RJ_API const char *rj_graph_input_name(const rj_graph *g, int i);
/* Whether some output depends on input i. An input none depends on may stay unbound (the
 * text format warns about one); `ragjit run --data` does not read it. */
RJ_API bool rj_graph_input_used(const rj_graph *g, int i);
/* The dim whose size bounds the values of input i where an index op uses it as its indices
 * (directly or through reshapes; a ragged dim bounds each item's indices by its length), or
 * RJ_DIM_NONE when none does: what `ragjit --random` draws index inputs below. */
RJ_API rj_dim rj_graph_input_index_bound(const rj_graph *g, int i);
RJ_API const char *rj_graph_output_name(const rj_graph *g, int i);
RJ_API rj_node rj_graph_find(const rj_graph *g, const char *name); /* input or output name */
/* The output name, input name, or text-format variable name of a node; NULL if none. */
RJ_API const char *rj_node_name(const rj_graph *g, rj_node n);
RJ_API rj_dtype rj_node_dtype(const rj_graph *g, rj_node n);
/* Rank (or -1) and, if dims != NULL, the dims. */
RJ_API int rj_node_shape(const rj_graph *g, rj_node n, rj_dim dims[RJ_MAX_RANK]);
RJ_API const char *rj_dim_name(const rj_graph *g, rj_dim d); /* symbol name, NULL if constant */
/* The type of a node as text, e.g. "f32[B, j1, 64]"; free with rj_string_free. */
RJ_API char *rj_node_type_str(const rj_graph *g, rj_node n);

/* Symbols: the dense sizes and ragged symbols a graph declares and the max(j) sizes that pad
 * creates, numbered 0 .. rj_graph_dim_count-1 in order of creation. rj_graph_dim_at gives the
 * rj_dim of symbol i (RJ_DIM_NONE if out of range); rj_dim_get_info describes any dim of the
 * graph, constants included, and fails with RJ_ERR_ARG for a dim that is neither. */
typedef enum rj_dim_kind {
    RJ_DIM_CONST,   /* a constant size (d >= 0) */
    RJ_DIM_DENSE,   /* a named size bound at run time (B, D) */
    RJ_DIM_RAGGED,  /* a ragged symbol (j1 : B) */
    RJ_DIM_MAXLEN   /* the longest row of a ragged symbol, max(j1): computed, never bound */
} rj_dim_kind;

typedef struct rj_dim_info {
    rj_dim_kind kind;
    const char *name;  /* "B", "j1", "max(j1)"; NULL for a constant */
    rj_dim parent;     /* RAGGED: the dim it varies over; MAXLEN: its ragged symbol; else
                        * RJ_DIM_NONE */
    rj_dim same;       /* the first-declared member of its rj_graph_same class (d if none):
                        * symbols with equal `same` must be bound equal lengths */
    bool used;         /* the shape of a node some output depends on has d; an unused symbol
                        * needs no binding */
} rj_dim_info;

RJ_API int rj_graph_dim_count(const rj_graph *g);
RJ_API rj_dim rj_graph_dim_at(const rj_graph *g, int i);
RJ_API rj_status rj_dim_get_info(const rj_graph *g, rj_dim d, rj_dim_info *info);

/* ----------------------------------------------------------------------------------------------
 * Tensors: runtime jagged or dense data. A jagged tensor has exactly one ragged dim, dim 1,
 * addressed by offsets (B+1) and, for a view with holes, lengths (B): row b of the ragged dim
 * spans values rows offsets[b] .. offsets[b] + len_b, where len_b = lengths[b] or
 * offsets[b+1] - offsets[b]. A tensor either owns its memory or borrows the caller's.
 */
typedef struct rj_tensor rj_tensor;

/* A plain description of a tensor's memory; the shape's ragged dim holds the longest row. */
typedef struct rj_tensor_info {
    rj_dtype dtype;
    int rank;
    int ragged_dim;               /* 1 for a jagged tensor, -1 for a dense one */
    int64_t shape[RJ_MAX_RANK];   /* shape[0] = B for a jagged tensor */
    void *values;                 /* packed rows (jagged) or the dense array, C order */
    int64_t rows;                 /* jagged: rows in values; dense: number of elements */
    const int64_t *offsets;       /* jagged: B+1 entries */
    const int64_t *lengths;       /* jagged view with holes: B entries; else NULL */
    int ragged_dims;              /* 2 for [B, j, j', ...] (dims 1 and 2 ragged, one block of
                                   * len_b x len'_b rows an item, offsets[b] its first row);
                                   * else 1 (or 0 when left zero by the caller) */
} rj_tensor_info;

/* Values that ragjit allocates (rj_tensor_dense with data == NULL, from_components, to_padded,
 * contiguous, rj_npy_read, and the outputs a binding allocates) start on a 64-byte boundary,
 * and from 64 KiB on half a page (2048 bytes) past a page boundary (no 4K aliasing against
 * inputs from malloc or NumPy, 16 bytes past one: docs/guide.md, rj_bind_output).
 * A dense tensor over caller memory (borrowed) or, with data == NULL, zero-filled owned memory. */
RJ_API rj_tensor *rj_tensor_dense(rj_ctx *ctx, rj_dtype dtype, int rank, const int64_t *shape,
                                  void *data);
/* A jagged tensor from packed values (rows x inner) and offsets (B+1), borrowed, no copy, like
 * torch.nested.nested_tensor_from_jagged. inner has inner_rank dims; the result's rank is
 * inner_rank + 2. The offsets are validated. */
RJ_API rj_tensor *rj_tensor_from_values(rj_ctx *ctx, rj_dtype dtype, int inner_rank,
                                        const int64_t *inner, void *values, int64_t rows,
                                        const int64_t *offsets, int64_t batch);
/* A jagged tensor copied from n components; component k has rank ranks[k] >= 1 and shape
 * shapes[k] = (len_k, inner...); all must agree in rank and inner dims (like
 * torch.nested.nested_tensor). */
RJ_API rj_tensor *rj_tensor_from_components(rj_ctx *ctx, rj_dtype dtype, int64_t n,
                                            const void *const *data, const int *ranks,
                                            const int64_t *const *shapes);
/* A view with holes over a padded dense array (B, L, inner...) keeping the first lengths[b]
 * rows of item b (like torch.nested.narrow); borrows padded; copies lengths. */
RJ_API rj_tensor *rj_tensor_from_padded(rj_ctx *ctx, rj_dtype dtype, int rank,
                                        const int64_t *shape, void *padded,
                                        const int64_t *lengths);
/* A new dense tensor (B, len, inner...) filled with value beyond each row; len < 0 selects the
 * longest row; a len shorter than the longest row is RJ_ERR_PAD_LEN. value converts to the
 * dtype as pad's does (for integers: rounded toward zero, saturating, NaN gives 0). */
RJ_API rj_tensor *rj_tensor_to_padded(const rj_tensor *t, double value, int64_t len);
/* A packed copy (a view with holes becomes contiguous); also copies dense tensors. */
RJ_API rj_tensor *rj_tensor_contiguous(const rj_tensor *t);
/* Fills views[0..B) with dense descriptions of the components of jagged t (no copy). */
RJ_API rj_status rj_tensor_unbind(const rj_tensor *t, rj_tensor_info *views, int64_t capacity);
RJ_API rj_status rj_tensor_get_info(const rj_tensor *t, rj_tensor_info *info);
RJ_API void rj_tensor_free(rj_tensor *t);

/* ----------------------------------------------------------------------------------------------
 * NumPy .npy files, the exchange format of the `ragjit` command: little-endian, C order,
 * dtypes '<f4' '<f8' '<i4' '<i8' '|b1', '<f2' (f16) and '<V2' (bf16, as ml_dtypes saves its
 * bfloat16; '|V2' is read too). Files of format 1.0, 2.0 and 3.0 are read ('|u1' as
 * bool when every byte is 0 or 1); files are written byte for byte as np.save writes them.
 * Anything unsupported or malformed is RJ_ERR_IO with a message naming the file and the
 * problem (bad magic, unsupported dtype, Fortran order, truncated data, ...). Only regular
 * files are read or written: a FIFO, a device or a directory is RJ_ERR_IO at once (never a
 * blocked open or an endless read), and no more data is read than the header declares, after
 * checking that the file holds exactly that much.
 */

/* Reads path into a new dense tensor that owns its memory; rj_tensor_get_info gives its dtype,
 * shape and values (rank 0 for a scalar). Free with rj_tensor_free. NULL on failure. A jagged
 * tensor is a values file plus an offsets file: read both and use rj_tensor_from_values. */
RJ_API rj_tensor *rj_npy_read(rj_ctx *ctx, const char *path);
/* Writes rank dims of shape (rank 0: a scalar; shape may then be NULL) from data, C order, to
 * path. Bool elements are written as 0 or 1. data may be NULL when there are no elements. */
RJ_API rj_status rj_npy_write(rj_ctx *ctx, const char *path, rj_dtype dtype, int rank,
                              const int64_t *shape, const void *data);

/* ----------------------------------------------------------------------------------------------
 * Programs and bindings.
 *
 * rj_program_new compiles a graph for a target; the program keeps its own copy of the graph,
 * so node ids and symbols of `g` stay valid for binding and g may be freed. Identical graphs
 * compile once per context (a program cache). RJ_TARGET_REFERENCE is the reference
 * interpreter: op by op, every intermediate materialised; the oracle for the other targets.
 * RJ_TARGET_CUDA runs on an NVIDIA GPU through the CUDA driver; RJ_TARGET_OPENCL runs the same
 * kernels, spelled in OpenCL C 1.2, on any OpenCL device (a GPU, or the CPU through PoCL),
 * through the ICD loader libOpenCL.so.1. Both load their driver at run time: without one,
 * rj_program_new fails with RJ_ERR_NO_DEVICE saying why.
 */
typedef enum rj_target {
    RJ_TARGET_REFERENCE,
    RJ_TARGET_CPU,
    RJ_TARGET_CUDA,
    RJ_TARGET_OPENCL,
} rj_target;
typedef struct rj_program rj_program;
typedef struct rj_bind rj_bind;

RJ_API rj_program *rj_program_new(rj_graph *g, rj_target target);
RJ_API void rj_program_free(rj_program *p);

/* The text of one compilation stage, to free with rj_string_free (NULL on error):
 *   "graph"     the program's graph as written (text format)
 *   "opt"       the graph after canonicalisation and pad/unpad elimination
 *   "fused"     the kernels fusion chose and the nodes each computes
 *   "loops"     the loop IR of every kernel, lowered for the program's target (its parallel
 *               mapping, reductions, local arrays, barriers and launch shapes)
 *   "llvm"      LLVM IR before optimisation;  "llvm-opt" after;  "asm"  host assembly
 *   "cuda"      CUDA C source;  "ptx"  PTX from NVRTC (RJ_ERR_NO_DEVICE if NVRTC is missing)
 *   "opencl"    OpenCL C 1.2 source (no OpenCL library needed)
 *   "dot"       a Graphviz picture: shapes on edges, fused kernels as clusters
 * A stage that belongs to one backend ("llvm", "llvm-opt", "asm": the CPU; "cuda", "ptx":
 * CUDA; "opencl": OpenCL) is that backend's text whatever the program's target. The program keeps each text
 * once produced: asking again costs nothing and never recompiles. */
RJ_API char *rj_program_dump(rj_program *p, const char *stage);
/* The same stages for g compiled for `target`, without running anything: no device is needed
 * (CUDA's "ptx" needs NVRTC only). Shares the context's program cache. */
RJ_API char *rj_graph_dump(rj_graph *g, rj_target target, const char *stage);

/* A set of buffers for running a program; reusable across runs (rebinding what changes). */
RJ_API rj_bind *rj_bind_new(rj_program *p);
RJ_API void rj_bind_free(rj_bind *b);
/* The value of a named dense size. The batch size of a ragged symbol's parent comes from its
 * offsets; pad lengths of the form max(j) are computed. */
RJ_API rj_status rj_bind_size(rj_bind *b, rj_dim sym, int64_t value);
/* The offsets (batch + 1 entries) and, for a view with holes, lengths (batch entries) of a
 * ragged symbol; borrowed until the binding is freed or rebound. */
RJ_API rj_status rj_bind_offsets(rj_bind *b, rj_dim ragged, int64_t batch,
                                 const int64_t *offsets, const int64_t *lengths);
/* An input buffer holding numel elements (for a jagged input: rows x inner). Borrowed. */
RJ_API rj_status rj_bind_input(rj_bind *b, rj_node input, const void *data, int64_t numel);
/* A promise that the contents of the buffer bound to `input` do not change from one run to the
 * next until the input is bound again (constant true), or its withdrawal (false). Model
 * weights are the use: a runtime binds them once and runs many batches. Under the promise a
 * binding may keep what it derives from the input's contents across runs: on the CPU, the
 * weights of a matrix product packed for ragjit's sgemm (and a 16-bit weight widened to f32),
 * made by rj_bind_prepare or else over the first runs that need them (a quarter of their
 * bytes a run, so that no run pays for all), and reused by the later ones, as oneDNN's
 * prepacked weights and TensorRT's constants are. The promise stays with the input: binding
 * it again (rj_bind_input, rj_bind_tensor, rj_bind_dlpack; another pointer or
 * the same one, which is how a caller says that the contents changed) drops what was kept, and
 * the next run makes it again; so does calling rj_bind_constant again. The kept copies are the
 * binding's memory: counted against the memory limit, reported by rj_bind_stats (const_bytes)
 * and freed with the binding. Results are the same bits with and without the promise; an input without it
 * behaves as if this call did not exist. Any input may be promised (RJ_ERR_ARG for a node that
 * is not an input of the program); other targets accept the promise and keep nothing yet. */
RJ_API rj_status rj_bind_constant(rj_bind *b, rj_node input, bool constant);
/* Caller memory for an output, with room for capacity elements; without it ragjit allocates
 * (and reuses) the output memory. */
RJ_API rj_status rj_bind_output(rj_bind *b, rj_node output, void *data, int64_t capacity);
/* Binds a tensor's data and, for a jagged tensor, its offsets/lengths to the ragged symbol of
 * the input (which must then agree with any offsets bound to that symbol). */
RJ_API rj_status rj_bind_tensor(rj_bind *b, rj_node input, const rj_tensor *t);
/* The elements an output needs in this binding's next run (for a jagged output over a view with
 * holes, its rows up to the furthest row, holes included): the capacity to give
 * rj_bind_output. Checks the bindings as a run would (offsets, sizes), allocates nothing. */
RJ_API rj_status rj_bind_output_numel(rj_bind *b, rj_node output, int64_t *numel);
/* Gets the binding's next run ready, so that it starts as warm as a later one: checks the
 * bindings as a run would, then, on the CPU, plans the temporaries for the bound sizes and
 * allocates them with the run's scratch and the outputs ragjit places, counting all of it
 * against the memory limit (a plan above the limit fails here, with the message a run would
 * give), touches every page of it on the worker threads (started here, not by the run), and
 * compiles the kernels that are compiled on first use, and makes the copies kept of inputs
 * promised constant (rj_bind_constant). Runs with the same or smaller sizes then allocate
 * nothing and fault no page in; rj_bind_stats reports temp_bytes before any run.
 * Optional: a run does whatever is not done yet. Binding anything again keeps what it made (a
 * run grows it if needed) but voids rj_bind_stats' report of it. On GPU targets and the
 * reference interpreter it only checks. */
RJ_API rj_status rj_bind_prepare(rj_bind *b);
/* Runs the program: validates the bindings (offsets, sizes, `same` symbols), allocates or
 * checks outputs and computes them. */
RJ_API rj_status rj_program_run(rj_program *p, rj_bind *b);
/* After a successful run: an output as a tensor owned by the binding, valid until the next
 * run or rj_bind_free. */
RJ_API const rj_tensor *rj_bind_result(rj_bind *b, rj_node output);

/* ---- device memory (GPU targets) ---------------------------------------------------------
 * On RJ_TARGET_CUDA and RJ_TARGET_OPENCL a binding's inputs, outputs and offsets may live in
 * the device's memory, and are then used where they are: nothing is copied. A device buffer
 * is an rj_devptr: a CUDA device pointer (a CUdeviceptr, e.g. from cuMemAlloc or a PyTorch
 * CUDA tensor's data_ptr(); ragjit runs in the device's primary context, as the CUDA runtime
 * does), or an OpenCL cl_mem cast to an integer, created in ragjit's OpenCL context
 * (rj_device_handles). Sizes are in elements, as for host memory. CUDA checks that a device
 * pointer is device memory holding the bound size, and that a host pointer bound with the
 * host calls is not device memory (RJ_ERR_ARG naming the buffer); OpenCL checks the size of
 * each cl_mem (a handle that is no cl_mem cannot be told apart: it is the caller's promise).
 *
 * Device offsets without their facts (rj_bind_offsets_info below) are read back with one
 * small copy per run (batch + 1 offsets, and the lengths of a view with holes) and validated
 * on the host like host offsets; the kernels use the device copy. Outputs bound with rj_bind_output_device(b, out, 0, 0) are allocated by
 * ragjit on the device, owned by the binding and reused across runs while they fit
 * (rj_bind_result_device gives their address). A run whose outputs are all device memory
 * copies nothing back and returns once its kernels are queued: rj_bind_wait waits for them
 * (and reports a failed device check of offsets); the next run of the binding waits too
 * before it overwrites what they may still use. The result
 * tensor of a device output (rj_bind_result) describes its shape and offsets with values
 * NULL. The CPU and reference targets refuse device memory (RJ_ERR_UNSUPPORTED). */
typedef uint64_t rj_devptr;
RJ_API rj_status rj_bind_input_device(rj_bind *b, rj_node input, rj_devptr data, int64_t numel);
RJ_API rj_status rj_bind_output_device(rj_bind *b, rj_node output, rj_devptr data, int64_t capacity);
RJ_API rj_status rj_bind_offsets_device(rj_bind *b, rj_dim ragged, int64_t batch, rj_devptr offsets,
                                        rj_devptr lengths);
/* What the host needs of device offsets, so that a run need not read them back: the rows
 * they address (the last offset) and the longest item (-1: unknown; needed where a pad
 * length is max(j), else an upper bound of 64 pieces per item is planned for). With them, a
 * kernel checks the offsets on the device before the run's kernels (which do nothing if the
 * check fails) and the run fails as a host check would, naming the symbol and the first bad
 * item. With rj_bind_trust_offsets(b, true) runs take the facts as given: nothing is read
 * back or checked, nothing is copied and, when every output is device memory, a run
 * returns as soon as its kernels are queued on the binding's stream (rj_bind_wait), so it can
 * be captured into a CUDA graph. Offsets that contradict trusted facts are the caller's
 * error, as with any kernel library. Views with holes are always read back and checked. */
RJ_API rj_status rj_bind_offsets_info(rj_bind *b, rj_dim ragged, int64_t rows, int64_t maxlen);
RJ_API rj_status rj_bind_trust_offsets(rj_bind *b, bool trusted);
/* Waits for the binding's last run when it returned early, and completes its statistics
 * (rj_bind_stats' kernel_ms is -1 until then). A no-op otherwise. */
RJ_API rj_status rj_bind_wait(rj_bind *b);
/* After a successful run: where a device output is and how many elements this run wrote. */
RJ_API rj_status rj_bind_result_device(rj_bind *b, rj_node output, rj_devptr *data, int64_t *numel);
/* The stream (CUstream) or command queue (cl_command_queue, of ragjit's OpenCL context) the
 * binding's runs use; NULL: the default stream / ragjit's queue. */
RJ_API rj_status rj_bind_stream(rj_bind *b, void *stream);
/* The device's context (CUcontext: the primary context of device 0; cl_context) and ragjit's
 * command queue (OpenCL; NULL for CUDA), for allocating device memory to bind. */
RJ_API rj_status rj_device_handles(rj_ctx *ctx, rj_target target, void **context, void **queue);

/* ---- DLPack ---------------------------------------------------------------------------------
 * Zero-copy interchange with PyTorch, CuPy, JAX and NumPy >= 1.22 through DLPack (dlpack.h,
 * version 0.6 or later; `values` and `offsets` below point to DLTensors).
 *
 * rj_bind_dlpack binds an input from a DLTensor: a dense input from one tensor of its shape; a
 * jagged input f[B, j, inner...] from two, as a PyTorch nested jagged tensor is made
 * (nt.values(): [rows, inner...]; nt.offsets(): int64 [B + 1]), both in host memory (kDLCPU,
 * kDLCUDAHost) or both on the program's device (kDLCUDA device 0, kDLOpenCL). The dtype (float32
 * and 64, int32 and 64, bool), the number of dims and the constant dims must match the input;
 * strides must be those of a contiguous tensor. Nothing is copied; the tensors are borrowed.
 *
 * rj_bind_export_dlpack describes an output after a successful run as DLManagedTensors (for a
 * jagged output also its offsets, int64 [B + 1], aliasing the offsets bound to its symbol;
 * `offsets` may be NULL for a dense output). Memory ragjit allocated for the output becomes
 * the tensor's, freed by its deleter (the binding allocates new memory for its next run);
 * memory the caller bound stays the caller's. Each exported tensor keeps the context alive
 * until its deleter runs, which may be after rj_ctx_free. An output laid out as a view with
 * holes is RJ_ERR_UNSUPPORTED. */
struct DLManagedTensor;
RJ_API rj_status rj_bind_dlpack(rj_bind *b, rj_node input, const void *values, const void *offsets);
RJ_API rj_status rj_bind_export_dlpack(rj_bind *b, rj_node output, struct DLManagedTensor **values,
                                       struct DLManagedTensor **offsets);

/* Where the time of a binding's last successful run went, for benchmarks and profiling. On a
 * GPU target the kernels are timed by the device (CUDA events, OpenCL profiling), apart from
 * the copies between host and device memory that a run with host pointers makes; on the CPU
 * and the reference target the kernels' time is the run's. Milliseconds. After
 * rj_bind_prepare and before a run: the memory planned (temp_bytes), and zero times. */
typedef struct rj_run_stats {
    double run_ms;     /* rj_program_run, host clock */
    double kernel_ms;  /* the kernels, first start to last end */
    double copy_ms;    /* host <-> device copies (and device allocations), host clock */
    int kernels;       /* kernel launches */
    int64_t temp_bytes; /* memory of the run's temporaries: on the CPU one arena in which
                         * temporaries whose kernels do not overlap share bytes (planned by
                         * liveness); 0 on other targets */
    int64_t const_bytes; /* memory the binding keeps across runs for inputs promised constant
                          * (rj_bind_constant): weights packed or widened once; CPU only */
} rj_run_stats;
RJ_API rj_status rj_bind_stats(const rj_bind *b, rj_run_stats *stats);

/* A device-to-device copy of `bytes` bytes on a GPU target, timed by the device (the median of
 * a few copies): the memory bandwidth a kernel can hope for, as bytes read plus bytes written
 * per second (GB/s = 1e9 bytes/s). RJ_ERR_NO_DEVICE without a device; RJ_ERR_UNSUPPORTED for
 * the CPU and reference targets, whose bandwidth bench/ measures with host loops. */
RJ_API rj_status rj_device_copy_bandwidth(rj_ctx *ctx, rj_target target, int64_t bytes, double *gb_per_s);

#ifdef __cplusplus
}
#endif
#endif /* RAGJIT_H */
