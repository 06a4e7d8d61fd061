/*
 * loopir.h — the loop IR: the lowering target shared by the LLVM and CUDA backends.
 *
 * A loop-IR program is a list of kernels and the buffers they read and write. A kernel is a
 * function of typed parameters (buffer pointers, offsets arrays, run-time sizes, and the unit
 * range [lo, hi) it must process) whose body is a small structured program:
 *
 *   statements   for v in a..b <mapping> { ... }   if c { ... } else { ... }   v = e
 *                buf[i] = e   reduce v op= e   barrier
 *   expressions  constants, parameters, variables, loads (optionally guarded by a predicate
 *                with a default: pad's "i < len_b ? x : v"), unary/binary/compare ops of the
 *                graph's op table, select, cast
 *
 * The IR is parallelism-aware but backend-neutral (DESIGN.md §3, after Halide's ForType): every
 * loop says how its iterations may be spread over the machine —
 *
 *   serial  in order, in one thread;
 *   units   the kernel's units (the loops that enumerate [lo, hi)), split across CPU threads
 *           or SIMT blocks and threads by the launch;
 *   lanes   independent iterations over contiguous memory: the vectorised loop on a CPU,
 *           the threads of a block on a SIMT target;
 *
 * and a reduction over a lanes loop is a statement of its own, `reduce v op= e`, rather than a
 * read-modify-write of v: a CPU accumulates (the vectoriser splits the accumulator), a SIMT
 * target may combine its threads' partial values with shuffles and a shared-memory step.
 * Memory private to a kernel is a local array with a scope: thread (per-thread scratch, which
 * the CPU runtime passes in as a pointer parameter) or block (shared memory on a SIMT target).
 * `barrier` orders a block's accesses to its block-scope locals. Each kernel records its launch
 * shape: the unit domain below, and what a thread (and on SIMT targets a block) covers.
 *
 * Expressions are hash-consed per kernel, so a DAG of shared subexpressions stays a DAG.
 * Shapes are resolved to index arithmetic here, so a backend only maps statements and
 * expressions to its language, and never re-derives shapes. The kernel's unit domain tells
 * the runtime how to count and balance units:
 *
 *   UD_ROWS   logical rows of a ragged class (all items' rows, packed order): uniform cost
 *   UD_ITEMS  (item, inner tile) pairs of a ragged class: cost proportional to the item length
 *   UD_DENSE  the product of some dense dims: uniform cost
 *   UD_PIECES (piece, inner tile) pairs of a ragged class, where the runtime cuts every item
 *             into pieces of at most PK_PROWS rows (at least one piece an item, so an empty
 *             item has one), chosen per run so that one long item becomes many units: the
 *             SIMT templates fold an item's pieces in parallel and combine them after
 */
#ifndef RJ_LOOPIR_H
#define RJ_LOOPIR_H

#include "ir.h"
#include "target.h"

/* internal ops beyond the graph's op table: index arithmetic, the fused multiply-add,
 * LOP_EXP_TERM, exp of softmax's terms x - m: exp within its bound for arguments up to 88;
 * above 88 or for NaN, any value above 1e30, an infinity or NaN (the sums of such terms are
 * checked, and the column is NaN or computed again: lower/items.c), so a backend may leave out
 * its handling of overflow and NaN; and LOP_ERFC, the complementary error function (gelu's
 * expansion, expand.c); LOP_ROUND_F16 / LOP_ROUND_BF16, an f32 rounded to nearest even to
 * the nearest value of that 16-bit format and kept an f32 (every value an op of a 16-bit
 * dtype produces passes through one, which is how f32 arithmetic gives 16-bit results).
 *
 * 16-bit floats are storage only: no expression, variable or local has type f16 or bf16. A
 * load from a 16-bit buffer is an f32 (widened); a store of an f32 to one rounds it. */
enum { LOP_IDIV = RJ_OP_COUNT, LOP_IREM, LOP_FMA, LOP_EXP_TERM, LOP_ERFC, LOP_ROUND_F16, LOP_ROUND_BF16,
       LOP_COUNT };

/* What a LOAD (its fn) or a STORE (its mem) addresses through `ref`. */
enum {
    MEM_PARAM, /* a buffer parameter (PK_BUF) */
    MEM_LOCAL, /* a local array of the kernel (lkernel.locals) */
};

typedef enum {
    LX_CONST,  /* i / f */
    LX_PARAM,  /* scalar parameter `ref` */
    LX_VAR,    /* variable `ref` */
    LX_LOAD,   /* memory `ref` (fn: MEM_*) at index a; guarded if b >= 0: b ? load : c */
    LX_UNARY,  /* fn(a) */
    LX_BINARY, /* fn(a, b); LOP_FMA: a * b + c */
    LX_CMP,    /* fn(a, b) -> bool; operands of one type */
    LX_SELECT, /* a ? b : c, all evaluated */
    LX_CAST,   /* a converted to type */
} lx_kind;

typedef struct lx {
    uint8_t kind;
    uint8_t type;  /* rj_dtype of the value; RJ_I64 for indices */
    uint16_t fn;   /* rj_op or LOP_*; LOAD: MEM_* */
    int32_t a, b, c;
    int32_t ref;
    int64_t i;
    double f;
} lx;

typedef enum { LS_FOR, LS_IF, LS_SET, LS_STORE, LS_REDUCE, LS_BARRIER } ls_kind;

/* How a FOR's iterations may be spread over the machine (see the top of this file). */
typedef enum { LM_SERIAL, LM_UNITS, LM_LANES } loop_map;

enum {
    LF_NT = 1,  /* STORE: streaming output; non-temporal when the kernel's nt flag is set */
    LF_FMA = 2, /* REDUCE: the value is a * b, contracted with the accumulation into one
                 * multiply-add (layer_norm's sum of squares) */
    LF_ATOMIC_MIN = 4, /* STORE: buf[i] = min(buf[i], v) as one atomic operation, i64 only
                        * (the index checks: any thread may find a bad index) */
    LF_NOUNROLL = 8,   /* FOR (serial): not to be unrolled, its body being large and its
                        * later iterations rare (softmax's retry, lower/items.c) */
    LF_HELD = 16,      /* STORE to a 16-bit buffer: the value is one of its format's already
                        * (rounded where it was made, or loaded), so the store narrows it
                        * without rounding it again (set by s_store, lower/kit.c) */
    LF_NT_TEMP = 32,   /* store_node's flags only, with LF_NT: streaming into temporaries too (a
                        * GEMM's epilogue, lower/gemm_lib.c); never on a STORE itself */
};

typedef struct ls {
    uint8_t kind;
    uint8_t flags;
    uint8_t map;        /* FOR: loop_map */
    uint8_t mem;        /* STORE: MEM_* */
    uint16_t fn;        /* REDUCE: combining op, RJ_OP_ADD, _MUL, _MAXIMUM or _MINIMUM */
    int32_t var;        /* FOR: induction variable; SET, REDUCE: target */
    int32_t a, b;       /* FOR: bounds [a, b); IF: condition a; SET: value a; STORE: index a,
                         * value b; REDUCE: value a (LF_FMA: a * b; else b = -1) */
    int32_t ref;        /* STORE: buffer parameter or local array */
    int32_t body, els;  /* FOR/IF: first child statement; IF: else (-1 if none) */
    int32_t next;       /* next statement in the same block (-1 at the end) */
} ls;

typedef enum {
    PK_BUF,     /* data pointer of buffer `ref` (lprog.bufs) */
    PK_OFF,     /* offsets of ragged symbol `ref` (B+1, physical rows) */
    PK_LOFF,    /* logical (packed) offsets of the class rooted at symbol `ref` */
    PK_SIZE,    /* run-time value of symbol `ref` (dense size or max(j)) */
    PK_LO,      /* first unit */
    PK_HI,      /* one past the last unit */
    PK_TILE,    /* UD_ITEMS: inner elements per unit */
    PK_SCRATCH, /* storage of the thread-scope local array `ref`, per thread (the runtime
                 * sizes it from scratch_type / scratch_per_tile / scratch_per_row) */
    PK_NT,      /* 1 if streaming stores should bypass the cache */
    PK_BLO,     /* UD_ROWS: first item overlapping [lo, hi) */
    PK_BHI,     /* UD_ROWS: one past the last item overlapping [lo, hi) */
    PK_PROWS,   /* rows per piece of the class rooted at symbol `ref` (see UD_PIECES) */
    PK_PITEM,   /* i64*: the item of each piece of class `ref` */
    PK_PSTART,  /* i64*: the first piece of each item of class `ref` (B+1 entries) */
    PK_ERR,     /* SIMT: the run's offsets-check word (u32*, all ones: valid), or NULL; a
                 * kernel does nothing when it says the device offsets are invalid */
    PK_SQOFF,   /* i64*: the first row of each item's len x len block of the class rooted at
                 * symbol `ref` (B+1 entries), for tensors with two ragged dims */
    PK_HEAD,    /* the head a GEMM_ATTN epilogue's call computes (lgemm: the runtime's unit) */
} param_kind;

typedef struct lparam {
    uint8_t kind;
    uint8_t dtype;  /* PK_BUF / PK_SCRATCH element type */
    uint8_t written;/* PK_BUF: the kernel stores to it */
    int32_t ref;
    char name[48];
} lparam;

typedef struct lvar {
    char name[24];
    uint8_t type;
    uint8_t holds; /* RJ_F16 / RJ_BF16 where its one assignment is a value already rounded to
                    * that format (a root's value, store_group), so that no store or op rounds
                    * it again; 0 (RJ_BOOL) otherwise */
} lvar;

/* A local array: memory private to one thread or shared by one block, for the kernel's run. */
typedef enum { LL_THREAD, LL_BLOCK } local_scope;

typedef struct llocal {
    char name[24];
    uint8_t scope;   /* local_scope */
    uint8_t dtype;
    int32_t param;   /* the PK_SCRATCH parameter its storage arrives in (sized by the runtime
                      * from the kernel's scratch_* fields), or -1: the backend allocates it */
    int64_t elems;   /* param < 0: its size in elements, a constant */
} llocal;

typedef enum { UD_ROWS, UD_ITEMS, UD_DENSE, UD_PIECES } unit_domain;

/* What the threads of a launch cover. Threads come in groups of launch_shape.group
 * consecutive threads (1 on a CPU; a warp, part of one, or a whole block on a SIMT target).
 * A group takes a contiguous chunk of the kernel's units; every thread of the group runs the
 * unit's statements, except that the iterations of a `lanes` loop are spread across the
 * group's threads (thread l of the group takes iterations l, l + group, ...), and a `reduce`
 * inside a lanes loop combines the threads' partial values so that every thread holds the
 * whole result after the loop. So statements outside lanes loops compute the same values in
 * every thread of a group (stores there write the same value to the same place), a variable
 * set inside a lanes loop is private to the thread running that iteration, and a thread-scope
 * local indexed by a lanes variable is touched by the one thread that runs that iteration.
 * `barrier` and block-scope locals need the group to be the whole block (the block then runs
 * its chunk of units in step). */
typedef enum {
    LC_CHUNK, /* a group of threads takes a contiguous chunk of units, lanes across the group */
} launch_cover;

/* The launch shape: with the unit domain (domain, dom_* of the kernel), how units map onto
 * the target lowering read from its descriptor. */
typedef struct launch_shape {
    bool simt;       /* threads come in blocks (target_desc.simt) */
    int32_t block;   /* SIMT: threads per block; 1 on a CPU */
    int32_t group;   /* threads sharing a chunk of units (a power of two dividing block) */
    uint8_t cover;   /* launch_cover */
    int32_t sm_threads; /* SIMT: threads a multiprocessor is to hold at once, which bounds the
                         * registers of a thread (0: the printer's choice, codegen/simt/kernel.c) */
} launch_shape;

/* A matrix product computed by a library GEMM (the CPU's BLAS) in chunks of rows: for rows
 * [lo, hi) of the product, the runtime runs the prologue kernel (which writes x's rows into
 * the A chunk buffer) or takes x's rows from its buffer, multiplies them by w into the C chunk
 * buffer, and runs the epilogue kernel (which reads the product from C and writes everything
 * fused after it) over [lo, hi). Chunk buffers are per worker and sized for the cache: the
 * product never goes to memory unless it is an output. */
typedef enum { GEMM_ROWS, GEMM_QK, GEMM_PV, GEMM_ATTN } gemm_mode;

/* What multiplies a product's operands (lgemm.core). 16-bit operands are widened to f32 for
 * sgemm (x's rows by the prologue into an f32 chunk A, w — k, v — once per run by the
 * runtime, an attention's q, k and v tile by tile) or, bf16 where the BLAS exports it, given
 * to sbgemm as they are; either way C is f32 and the epilogue rounds once on store. */
typedef enum {
    GC_SAME,   /* the product's dtype (sgemm, dgemm) */
    GC_WIDEN,  /* 16-bit operands widened to f32, sgemm (ragjit's own or the BLAS's) */
    GC_SBGEMM, /* bf16 operands, the BLAS's cblas_sbgemm, f32 C */
} gemm_core_kind;

/* GEMM_ATTN: one operand of the attention's products, read (or written) in place: element e
 * of head h in row i of item b is element (row_b + i) * ld + off + h * hs + e of buffer buf,
 * row_b the item's first row by symbol sym's offsets (-1: the class's logical offsets). A
 * head's columns are thus a strided matrix the BLAS takes as it is (leading dimension ld). */
typedef struct lview {
    int32_t buf, sym;
    int64_t off, hs, ld;
} lview;

typedef struct lgemm {
    bool on;
    uint8_t mode;        /* GEMM_ROWS: x's rows times a dense w. Per item b of class a_cls, in
                          * chunks of an item's rows i: GEMM_QK: C[i, j] = q[i] · k[j] over the
                          * item's rows j (w_buf holds k, b_sym its offsets); GEMM_PV: C[i, n] =
                          * sum_j p[i, j] v[j, n], p a [B, j, j] buffer (its blocks) or the
                          * prologue's chunk, v in w_buf (b_sym its offsets). GEMM_ATTN: per
                          * item b, head h and chunk of query rows, C = q kᵀ (q, k: att[0],
                          * att[1]); this kernel (PK_HEAD: h) turns C's rows into the softmax's
                          * weights P in place; then o = P v (v, o: att[2], att[3]) */
    int32_t b_sym;       /* QK, PV: the ragged symbol addressing w_buf's rows, or -1: logical */
    uint8_t dtype;       /* x, w and the product: f32, f64, or f16 / bf16 (core: how) */
    uint8_t core;        /* gemm_core_kind; the chunk C is f32 unless the product is f64 */
    bool w_nk;           /* w is [N, K] (linear's weight): multiplied transposed */
    int32_t prologue;    /* the kernel writing the A chunk, or -1: x is read from a_buf */
    int32_t a_buf;       /* x's buffer (prologue < 0) */
    int32_t a_sym;       /* the ragged symbol whose offsets address a_buf's rows, or -1: its
                          * rows are contiguous in logical order (dense, or a temporary) */
    int32_t a_cls;       /* the ragged class of the product's rows, or -1: dense rows */
    int32_t b_cls;       /* QK, PV: the ragged class of w_buf's rows (the keys: a_cls, or
                          * another class in cross attention), or -1 */
    int32_t w_buf;       /* w's buffer, dense */
    int64_t w_off, w_ld; /* ROWS: w read from element w_off of w_buf with rows w_ld apart (w a
                          * slice of a weight: W.narrow(0, s, n), W[:, a:b]); w_ld 0: w is the
                          * whole buffer, rows K ([N, K]) or N apart */
    int32_t chunk_a, chunk_c; /* the chunk buffers (LB_CHUNK), chunk_a -1 without prologue */
    rj_dim K, N;         /* GEMM_ATTN: E (q's and k's columns a head) and Dv, constants */
    lview att[4];        /* GEMM_ATTN: q, k, v and the attention's result o */
    int64_t heads, kv_heads; /* GEMM_ATTN: H (1 without heads) and Hkv, dividing H */
    bool att_plain;      /* GEMM_ATTN: the scores' function F is the product times att_scale
                          * (over it where att_div; 1: the product itself), each rounded to the
                          * attention's type, so the runtime may compute the weights itself
                          * (util/head_softmax.c), not this kernel */
    bool att_div;
    bool att_safe;       /* GEMM_ATTN: a row of zero sum gives 0 weights, not NaN (SDPA's) */
    float att_scale;
} lgemm;

/* CPU runs narrow the column tiles of item kernels to multiples of this (launch.c), so a
 * tile of a constant inner extent that is a multiple of it has no partial vector step. */
#define LANES_GRANULE 32

/* Which of a group's item kernels runs (UD_ITEMS on a CPU: lower/items.c, lower_items_cpu). */
typedef enum {
    KV_ALWAYS,        /* the group's only kernel */
    KV_STASH_FITS,    /* a softmax's constant-tile kernel: runs when the longest item's stash
                       * at variant_tile columns fits the runtime's cache budget */
    KV_STASH_EXCEEDS, /* its twin of runtime tiles (which the runtime narrows for long items):
                       * runs when it does not */
} kernel_variant;

/* What the item templates (UD_ITEMS, UD_PIECES: lower/items.c, items_simt.c, matmul_simt.c)
 * tell the runtime and the backends of a kernel (lkernel.tiling): the tiles of the inner
 * extent, the per-thread scratch (the thread-scope local passed as PK_SCRATCH: its size per
 * thread), which of a softmax's two kernels runs, and what the backends may assume of the
 * lanes loops. Zero in every other kernel. */
typedef struct lk_tiling {
    uint8_t scratch_type;     /* the scratch's elements */
    int32_t scratch_per_tile; /* scratch elements needed per element of the tile */
    bool scratch_per_row;     /* plus one per element of the tile and row of the stash */
    rj_dim stash_rows;        /* scratch_per_row: the stash's rows, a size of the graph (a padded
                               * axis whose padding rows are stashed too: its length L, which
                               * may exceed every item); 0: the longest item's length */
    bool tiled;         /* UD_ITEMS: the inner extent may be split into tiles */
    uint8_t passes;     /* UD_ITEMS: passes over each item's rows (cache tiling pays above 1) */
    int32_t fixed_tile; /* UD_ITEMS: the tile is this constant of the kernel's code, not the
                         * runtime's choice (0: the runtime chooses, PK_TILE passes it) */
    int64_t lanes_max;  /* UD_ITEMS, UD_PIECES: at most this many lanes in any lanes loop (the
                         * inner extent where it is a constant, or the fixed tile); 0: not known */
    int32_t lanes_var;  /* UD_ITEMS: the variable holding the unit's extent of the tile (tn),
                         * where lanes_multiple > 0 */
    int64_t lanes_multiple; /* every value lanes_var takes is a multiple of this (of the
                             * constant inner extent's greatest common divisor with
                             * LANES_GRANULE, to whose multiples the runtime narrows tiles);
                             * 0: not known */
    bool lanes_whole;   /* lanes loops of a constant extent up to lanes_max are written out
                         * step by step, with no loop (a constant tile's accumulators then
                         * stay in registers across the row loops around them) */
    uint8_t stash_variant; /* kernel_variant: which of a softmax's two kernels runs */
    int32_t variant_tile;     /* KV_STASH_*: the constant tile the choice is made at */
} lk_tiling;

typedef struct lkernel {
    rj_ctx *ctx;
    char name[32];
    char what[96];      /* one-line description for dumps */
    char tmpl[24];      /* the lowering template that made it (lower/lower.c's table) */
    char note[96];      /* a line more for dumps: what the template chose, or why a more
                         * specialised template of the table did not serve the group */
    lparam *params;
    int32_t nparams, capparams;
    lx *ex;
    int32_t nex, capex;
    int32_t *htab;      /* hash-consing of ex */
    int32_t hcap;
    ls *st;
    int32_t nst, capst;
    lvar *vars;
    int32_t nvars, capvars;
    llocal *locals;
    int32_t nlocals, caplocals;
    int32_t body;       /* first top-level statement */
    /* how the runtime counts and splits units */
    uint8_t domain;
    int32_t dom_class;  /* UD_ROWS / UD_ITEMS: class root symbol */
    int dom_rank;       /* UD_DENSE: units = product of dom_dims; UD_ITEMS: inner extent */
    rj_dim dom_dims[RJ_MAX_RANK];
    int unit_rank;      /* UD_ROWS / UD_DENSE: the dims every unit's work loops over, where a */
    rj_dim unit_dims[RJ_MAX_RANK]; /* run in which they hold no element launches nothing; or 0 */
    launch_shape launch;
    bool has_nt;        /* some store is LF_NT */
    lk_tiling tiling;   /* item templates: tiles, scratch, lanes, the variant (above) */
    bool split_only;    /* works only on items cut into several pieces (UD_PIECES): a run
                         * whose every item is one piece skips it */
    bool inner_only;    /* run only by another kernel's library call (a GEMM's prologue) */
    bool heavy;         /* keeps many values live (a product's loop around inlined producers):
                         * a SIMT target plans more registers per thread for it */
    bool streams;       /* streams its input through additions (a sum or mean over the ragged
                         * dim of an input without exp and its kin, lower/items.c: items_reduction):
                         * a CPU backend may give it narrower vectors than the widest
                         * (llvm/emit.c, emit_target.stream_bits) */
    lgemm gemm;         /* gemm.on: this kernel is the epilogue of a library GEMM (below) */
} lkernel;
/* Buffers: what a PK_BUF parameter points to. */
typedef enum {
    LB_INPUT,
    LB_OUTPUT,
    LB_TEMP,
    LB_PIECES, /* per piece of class `index` (UD_PIECES), dims[0] slots of the inner extent
                * dims[1..rank): the partial results of split items (SIMT templates) */
    LB_CHUNK,  /* a library GEMM's chunk of rows (index 0: A, 1: C), dims[0] columns a row:
                * per worker, addressed from the chunk's first row (PK_LO) */
} lbuf_kind;

typedef struct lbuf {
    uint8_t kind;
    uint8_t dtype;
    int32_t index;     /* input / output / temp number */
    int32_t node;      /* node of the optimised graph */
    int rank;
    rj_dim dims[RJ_MAX_RANK]; /* layout: a ragged dim addresses rows through its symbol */
} lbuf;

/* The range check of one index op (checks.c): check kernels keep in word `slot` of the
 * checks buffer the smallest packed logical position of the index tensor holding an index
 * out of range (INT64_MAX: none); the runtime turns it into the run's error with this. */
typedef struct lcheck {
    uint16_t op;               /* the index op */
    uint8_t dtype;             /* the index tensor's */
    int32_t input;             /* the index tensor is this graph input (its value can be read
                                * back on the host), or -1 */
    int rank;
    rj_dim dims[RJ_MAX_RANK];  /* the index tensor's shape */
    rj_dim bound;              /* the indexed dim: indices stay below its size (a ragged dim:
                                * below the length of the index's item) */
    char what[64];             /* the index tensor in messages: "input idx", "t" */
} lcheck;

typedef struct lprog {
    rj_ctx *ctx;
    lkernel *kernels;
    int32_t nkernels, capkernels;
    lbuf *bufs;
    int32_t nbufs, capbufs;
    int32_t ntemps;
    lcheck *checks;            /* one per index op, in graph order */
    int32_t nchecks;
    int32_t checks_buf;        /* the buffer of their words (a temporary of nchecks i64, set to
                                * INT64_MAX by the program's first kernel), or -1 */
} lprog;

/* Every field of p that a backend or the runtime reads, appended to b as bytes (the key of
 * the persistent kernel cache: equal fingerprints compile to equal code). */
void lprog_fingerprint(const lprog *p, sbuf *b);
/* dup[i] (p->nkernels entries): the first kernel whose machine code kernel i's is, or -1. */
rj_status lprog_code_dups(const lprog *p, int32_t *dup);
/* Kernel k's code key (what its machine code depends on) appended to b; false for a kernel
 * that keeps its own code (a GEMM's epilogue, a kernel only another calls). */
bool lprog_kernel_code_key(const lprog *p, int32_t k, sbuf *b);

/* building */
lkernel *lprog_add_kernel(lprog *p, const char *name);
void lprog_free(lprog *p);
void lprog_free_last_kernel(lprog *p); /* a kernel added and then not needed */
int32_t lk_param(lkernel *k, param_kind kind, int32_t ref, rj_dtype dtype, const char *name);
int32_t lk_var(lkernel *k, const char *name, rj_dtype type);
int32_t lk_local(lkernel *k, const char *name, local_scope scope, rj_dtype dtype);
int32_t lk_expr(lkernel *k, const lx *e);  /* hash-consed; -1 on OOM */
int32_t lk_stmt(lkernel *k, const ls *s);  /* appended, unlinked; -1 on OOM */

/* walking: the one definition of an expression's operands and a statement's expressions */
int lx_children(const lx *e, int32_t out[3]);  /* operands in evaluation order; returns count */
int ls_exprs(const ls *s, int32_t out[2]);      /* expressions a statement evaluates */

/* Calls fn on e and on every expression below it, each at most once per walk: an expression
 * is skipped when seen[id] == mark, else marked (callers start a walk with a fresh mark over
 * a zeroed array of nex entries). Stops and returns true as soon as fn does. */
typedef bool (*lx_visit_fn)(const lkernel *k, int32_t id, void *ud);
bool lx_visit(const lkernel *k, int32_t e, lx_visit_fn fn, void *ud, uint32_t *seen, uint32_t mark);
bool lx_reads_var(const lkernel *k, int32_t e, int32_t var, uint32_t *seen, uint32_t mark);

/* Shared subexpressions of a statement, for printers of the expression DAG (the loop-IR dump,
 * CUDA C): printing it as trees repeats them, exponentially for chains like h = h * h + h.
 * lx_binder_stmt counts the uses of every subexpression of a statement's roots and calls
 * bind() for each one used more than once, operands first, so the printer can name it (a
 * "%N = ..." line, a `const` temporary) before the statement; lx_binder_name then gives the
 * name within that statement. Names count up through the kernel (count). */
typedef struct lx_binder {
    rj_ctx *ctx;
    const lkernel *k;
    int32_t count;      /* names handed out so far; a printer may take numbers from it too */
    /* policy */
    bool lazy_guards;   /* a guarded load's index is evaluated only when its guard holds: uses
                         * there do not count, so nothing is hoisted out of the condition */
    bool (*bindable)(const lkernel *k, int32_t id);       /* beyond not being a leaf */
    void (*bind)(void *ud, int32_t id, int32_t name);     /* print the binding of id */
    void *ud;
    /* per expression, valid when stamp[id] == epoch (one epoch per statement) */
    uint32_t *stamp, *seen;
    int32_t *uses, *name;
    uint32_t epoch;
} lx_binder;

bool lx_binder_init(lx_binder *bd, rj_ctx *ctx, const lkernel *k); /* false: out of memory */
void lx_binder_free(lx_binder *bd);
void lx_binder_stmt(lx_binder *bd, const int32_t *roots, int nroots);
int32_t lx_binder_name(const lx_binder *bd, int32_t id); /* -1: not bound in this statement */

/* Checks the rules the builders rely on (a reduce inside a lanes loop, into a variable the
 * value does not read and nothing else in that loop assigns; loads and stores within the
 * kernel's parameters and locals); RJ_ERR_INTERNAL naming the kernel otherwise. */
rj_status lprog_verify(const lprog *p);

/* printing */
void print_lprog(sbuf *b, const rj_graph *g, const lprog *p);
void print_kernel_signature(sbuf *b, const lkernel *k);

/* expand.c: composite ops (gelu, silu, sigmoid, rsqrt, sgn, relu, pow with a literal
 * exponent) rewritten as primitives, so the backends spell only those */
rj_status pass_expand(lprog *p);

/* widen16.c: on a CPU, 16-bit vectors every unit reads alike (w[t] in a units loop) widened
 * once a call into an f32 copy, which the loads read instead */
rj_status pass_widen16(lprog *p, const target_desc *desc);

/* lower/lower.c: the fused graph as loop IR, shaped for the target `desc` describes */
struct fuse_plan;
rj_status pass_lower(const rj_graph *g, const rj_graph *orig, const struct fuse_plan *plan,
                     const target_desc *desc, lprog *out);

#endif
