/*
 * loopir.h — the loop IR: the lowering target shared by the LLVM and CUDA backends.
 *
 * A loop-IR program is a list of kernels and the buffers they read and write. A kernel is a
 * function of typed parameters (buffer pointers, offsets arrays, run-time sizes, and the unit
 * range [lo, hi) it must process) whose body is a small structured program:
 *
 *   statements   for v in a..b { ... }   if c { ... } else { ... }   v = e   buf[i] = e
 *   expressions  constants, parameters, variables, loads (optionally guarded by a predicate
 *                with a default: pad's "i < len_b ? x : v"), unary/binary/compare ops of the
 *                graph's op table, select, cast
 *
 * Expressions are hash-consed per kernel, so a DAG of shared subexpressions stays a DAG.
 * Nothing in the loop IR is backend specific: shapes are resolved to index arithmetic here,
 * so a backend only maps statements and expressions to its language, and never re-derives
 * shapes. The kernel's unit domain tells the runtime how to count and balance units:
 *
 *   UD_ROWS   logical rows of a ragged class (all items' rows, packed order): uniform cost
 *   UD_ITEMS  (item, inner tile) pairs of a ragged class: cost proportional to the item length
 *   UD_DENSE  the product of some dense dims: uniform cost
 */
#ifndef RJ_LOOPIR_H
#define RJ_LOOPIR_H

#include "ir.h"
#include "target.h"

/* internal ops beyond the graph's op table, for index arithmetic */
enum { LOP_IDIV = RJ_OP_COUNT, LOP_IREM, LOP_FMA, LOP_COUNT };

typedef enum {
    LX_CONST,  /* i / f */
    LX_PARAM,  /* scalar parameter `ref` */
    LX_VAR,    /* variable `ref` */
    LX_LOAD,   /* buffer parameter `ref` at index a; guarded if b >= 0: b ? load : c */
    LX_UNARY,  /* fn(a) */
    LX_BINARY, /* fn(a, b); LOP_FMA: a * b + c */
    LX_CMP,    /* fn(a, b) -> bool; operands of one type */
    LX_SELECT, /* a ? b : c, all evaluated */
    LX_CAST,   /* a converted to type */
} lx_kind;

typedef struct lx {
    uint8_t kind;
    uint8_t type;  /* rj_dtype of the value; RJ_I64 for indices */
    uint16_t fn;   /* rj_op or LOP_* */
    int32_t a, b, c;
    int32_t ref;
    int64_t i;
    double f;
} lx;

typedef enum { LS_FOR, LS_IF, LS_SET, LS_STORE } ls_kind;

enum {
    LF_INNER = 1, /* FOR: innermost loop over contiguous memory: vectorise it */
    LF_NT = 2,    /* STORE: streaming output; non-temporal when the kernel's nt flag is set */
};

typedef struct ls {
    uint8_t kind;
    uint8_t flags;
    int32_t var;        /* FOR: induction variable; SET: target */
    int32_t a, b;       /* FOR: bounds [a, b); IF: condition a; SET: value a; STORE: index a, value b */
    int32_t ref;        /* STORE: buffer parameter */
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
    PK_SCRATCH, /* per-thread scratch memory (scratch_elems elements of scratch_type) */
    PK_NT,      /* 1 if streaming stores should bypass the cache */
    PK_BLO,     /* UD_ROWS: first item overlapping [lo, hi) */
    PK_BHI,     /* UD_ROWS: one past the last item overlapping [lo, hi) */
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
} lvar;

typedef enum { UD_ROWS, UD_ITEMS, UD_DENSE } unit_domain;

typedef struct lkernel {
    rj_ctx *ctx;
    char name[32];
    char what[96];      /* one-line description for dumps */
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
    int32_t body;       /* first top-level statement */
    /* how the runtime counts and splits units */
    uint8_t domain;
    int32_t dom_class;  /* UD_ROWS / UD_ITEMS: class root symbol */
    int dom_rank;       /* UD_DENSE: units = product of dom_dims; UD_ITEMS: inner extent */
    rj_dim dom_dims[RJ_MAX_RANK];
    uint8_t scratch_type;
    int32_t scratch_per_tile; /* scratch elements needed per element of the tile */
    bool scratch_per_row;     /* plus one per element of the tile and row of the longest item */
    bool has_nt;        /* some store is LF_NT */
    bool tiled;         /* UD_ITEMS: the inner extent may be split into tiles */
} lkernel;

/* Buffers: what a PK_BUF parameter points to. */
typedef enum { LB_INPUT, LB_OUTPUT, LB_TEMP } lbuf_kind;

typedef struct lbuf {
    uint8_t kind;
    uint8_t dtype;
    int32_t index;     /* input / output / temp number */
    int32_t node;      /* node of the optimised graph */
    int rank;
    rj_dim dims[RJ_MAX_RANK]; /* layout: a ragged dim addresses rows through its symbol */
} lbuf;

typedef struct lprog {
    rj_ctx *ctx;
    lkernel *kernels;
    int32_t nkernels, capkernels;
    lbuf *bufs;
    int32_t nbufs, capbufs;
    int32_t ntemps;
} lprog;

/* building */
lkernel *lprog_add_kernel(lprog *p, const char *name);
void lprog_free(lprog *p);
int32_t lk_param(lkernel *k, param_kind kind, int32_t ref, rj_dtype dtype, const char *name);
int32_t lk_var(lkernel *k, const char *name, rj_dtype type);
int32_t lk_expr(lkernel *k, const lx *e);  /* hash-consed; -1 on OOM */
int32_t lk_stmt(lkernel *k, const ls *s);  /* appended, unlinked; -1 on OOM */

/* printing */
void print_lprog(sbuf *b, const rj_graph *g, const lprog *p);
void print_kernel_signature(sbuf *b, const lkernel *k);

/* lower.c: the fused graph as loop IR, shaped for the target `desc` describes */
struct fuse_plan;
rj_status pass_lower(const rj_graph *g, const rj_graph *orig, const struct fuse_plan *plan,
                     const target_desc *desc, lprog *out);

#endif
