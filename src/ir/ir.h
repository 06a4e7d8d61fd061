/*
 * ir.h — the graph IR: nodes, shape symbols, and the op properties that every pass reads.
 *
 * A graph is an append-only array of nodes in topological order (an operand always has a
 * smaller id than its user), so passes walk it forwards and need no worklists. Each node
 * carries its inferred dtype and shape; shapes are lists of rj_dim where a negative value
 * names a symbol of the graph:
 *
 *   SYM_DENSE   a size bound at run time (B, D)
 *   SYM_RAGGED  a size varying with the index of its parent dim (j1 : B); the model allows the
 *               parent to be ragged too (nested raggedness) and several ragged dims per tensor
 *   SYM_MAXLEN  the run-time size max_b len_b of a ragged symbol, created by pad's default
 *
 * Symbols declared `same` are merged with union-find; shape checks compare class
 * representatives (sym_root) while nodes keep the symbol they were built with, so each tensor
 * is still addressed through its own bound offsets at run time.
 *
 * Node ids, symbol ids and the order of inputs and outputs are preserved by graph_clone, so
 * a program's private copy answers to the ids of the user's graph.
 */
#ifndef RJ_IR_H
#define RJ_IR_H

#include "../util/util.h"

enum { SYM_DENSE, SYM_RAGGED, SYM_MAXLEN };

typedef struct sym {
    char *name;
    uint8_t kind;
    int32_t parent; /* RAGGED: parent sym id; MAXLEN: the ragged sym id; else -1 */
    int32_t uf;     /* union-find link for `same` (itself when a root) */
} sym;

/* Kinds and dtype rules of the op table (see ragjit.h). */
typedef enum { KIND_LEAF, KIND_UNARY, KIND_BINARY, KIND_COMPARE, KIND_SELECT, KIND_CAST,
               KIND_REDUCE, KIND_SOFTMAX, KIND_NORM, KIND_PAD, KIND_INDEX, KIND_VIEW,
               KIND_MATMUL, KIND_ATTENTION } op_kind;
typedef enum { RULE_ATTR, RULE_SAME, RULE_FLOAT, RULE_BOOL, RULE_SUM } op_rule;

typedef struct op_info {
    const char *name;
    op_kind kind;
    op_rule rule;
} op_info;

extern const op_info op_table[RJ_OP_COUNT];

/* CAST of a float to an integer type: saturating, NaN -> 0 (llvm.fptosi.sat). Shared by the
 * interpreter and the constant folders so that every target agrees on it. */
static inline int64_t cast_float_to_int(double f, rj_dtype to) {
    double lo = to == RJ_I32 ? -2147483648.0 : -9223372036854775808.0;
    double hi = to == RJ_I32 ? 2147483647.0 : 9223372036854775807.0;
    if (f != f) return 0;
    if (f <= lo) return to == RJ_I32 ? INT32_MIN : INT64_MIN;
    if (f >= hi) return to == RJ_I32 ? INT32_MAX : INT64_MAX;
    return (int64_t)f;
}

/* Float pow with a literal exponent of 1, 2, 3, 0.5, -1, -0.5 or -2 is computed by every target
 * (the interpreter included) as x, x*x, (x*x)*x, sqrt(x), 1/x, 1/sqrt(x) and 1/(x*x), as
 * PyTorch's CPU and CUDA kernels do: faster, and sqrt's special values rather than C pow's
 * (sqrt(-inf) is NaN, sqrt(-0.0) is -0.0; so (-inf) ** -0.5 is NaN and (-0.0) ** -0.5 is -inf,
 * and x*x of an f32 past 1.8e19 is inf, so x ** -2 is 0 there). Defined once here so the targets
 * cannot disagree. */
typedef enum {
    POWX_NONE,
    POWX_ONE,
    POWX_SQUARE,
    POWX_CUBE,
    POWX_SQRT,
    POWX_RECIP,
    POWX_RSQRT,
    POWX_RECIP_SQUARE
} pow_expansion;
static inline pow_expansion pow_expand(double e) {
    return e == 1 ? POWX_ONE : e == 2 ? POWX_SQUARE : e == 3 ? POWX_CUBE : e == 0.5 ? POWX_SQRT
           : e == -1 ? POWX_RECIP : e == -0.5 ? POWX_RSQRT : e == -2 ? POWX_RECIP_SQUARE : POWX_NONE;
}

/* Scalar literal categories (node.weak); 0 is a typed tensor. */
enum { WEAK_NONE, WEAK_BOOL, WEAK_INT, WEAK_FLOAT };

typedef struct node {
    rj_op op;
    rj_dtype dtype;
    uint8_t rank;
    uint8_t nin;
    uint8_t weak;     /* SCALAR: literal category */
    uint8_t keepdim;  /* REDUCE; UNPAD: 1 to unpad dims 1 and 2 ([B, L, L] -> [B, j, j]) */
    int32_t in[3];
    int32_t axis;     /* REDUCE/SOFTMAX/GATHER/TAKE_ALONG_DIM/INDEX_SELECT/NARROW: dim (normalised);
                       * NORM: ndims; TRANSPOSE: the first dim swapped (the second in ival) */
    double fval;      /* SCALAR (float), PAD/MASKED_FILL value, NORM eps; NARROW: the length as
                       * built (then also dims[axis]) */
    int64_t ival;     /* SCALAR (int/bool), FULL's value as an integer (fval as a float); ARANGE and
                       * FULL keep their dtype in axis; POSITIONS: its ragged symbol (an rj_dim); MATMUL:
                       * 1 if w is given as [N, K] (linear's weight), else 0; NARROW: the start
                       * (normalised: >= 0) */
    char *name;       /* INPUT name; for other nodes the variable name from the text format */
    int32_t loc;      /* source position for text-format errors, or -1 */
    int32_t from;     /* 1 + the id of the user's node this one computes, 0 if none: kept by
                       * the passes, so dumps of every stage number values as `graph` does */
    rj_dim dims[RJ_MAX_RANK];
} node;

typedef struct output {
    int32_t node;
    char *name;
} output;

struct rj_graph {
    rj_ctx *ctx;
    node *nodes;
    int32_t n, cap;
    sym *syms;
    int32_t nsym, capsym;
    int32_t *inputs;
    int32_t ninputs, capinputs;
    output *outputs;
    int32_t noutputs, capoutputs;
    rj_status status; /* first failure while building */
    char first_err[512]; /* its message */
    int32_t cur_loc;  /* stamped into new nodes (text format) */
    bool derived;     /* built by a pass: nodes keep the `from` they are given */
    char *warnings;   /* the parser's warnings, one a line (rj_graph_warnings), or NULL;
                         * freed with rj_string_free */
    uint8_t *live;    /* per node below nlive: some output depends on it (graph_live), kept by
                       * rj_graph_output for introspection, which must not allocate; NULL in a
                       * graph without outputs and in a pass's graph */
    int32_t nlive;
};

/* dims <-> symbol ids */
static inline bool dim_is_sym(rj_dim d) { return d < 0 && d != RJ_DIM_NONE; }
static inline int32_t dim_sym(rj_dim d) { return (int32_t)(-d - 1); }
static inline rj_dim sym_dim(int32_t id) { return -(rj_dim)id - 1; }

/* graph.c */
rj_graph *graph_new(rj_ctx *ctx);
rj_graph *graph_clone(rj_ctx *ctx, const rj_graph *g);
node *graph_node(const rj_graph *g, rj_node id);       /* NULL if out of range */
/* live[i] = 1 where some output depends on node i, else 0 (live has g->n bytes). */
void graph_live(const rj_graph *g, uint8_t *live);
int32_t graph_add_node(rj_graph *g, const node *n);      /* copies n; -1 on OOM */
int32_t graph_add_sym(rj_graph *g, const char *name, int kind, int32_t parent);
int32_t graph_find_sym(const rj_graph *g, const char *name);
int32_t sym_root(const rj_graph *g, int32_t s);
const sym *graph_sym(const rj_graph *g, rj_dim d);      /* NULL for constants */
bool graph_is_valid_dim(const rj_graph *g, rj_dim d);
/* Records the failure as the context's error (util: ctx_failv) and, if it is the graph's
 * first, as the graph's status and message; returns s. */
rj_status graph_fail(rj_graph *g, rj_status s, const char *fmt, ...) RJ_PRINTF(3, 4);
/* The same for the error a util call has just recorded (an allocation's). */
rj_status graph_keep_error(rj_graph *g, rj_status s);
/* Names of inputs, outputs and symbols: an identifier of fewer than 128 characters; the
 * input or output other than node `self` ("an input", "an output"), or the symbol ("a ragged
 * symbol", "a dense size"), that already has `name`, or NULL. */
bool graph_name_valid(const char *name);
const char *graph_name_user(const rj_graph *g, const char *name, rj_node self);
/* Structural identity (ops, dtypes, constant dims, attributes; not names): graphs equal in
 * structure compile to the same code. With `names`, names must match too, as they do for
 * everything printed. */
uint64_t graph_hash(const rj_graph *g);
uint64_t graph_names_hash(const rj_graph *g);
bool graph_equal(const rj_graph *a, const rj_graph *b, bool names);

/* dims and shapes */
bool dim_equal(const rj_graph *g, rj_dim a, rj_dim b);   /* same constant / class */
int dim_ragged_pos(const rj_graph *g, const node *n);    /* index of the ragged dim, or -1 */
static inline bool node_is_jagged(const rj_graph *g, const node *n) {
    return dim_ragged_pos(g, n) >= 0;
}
/* [B, j, j', ...] with j and j' ragged, both varying over B: two ragged dims, each item a
 * len_b x len'_b block (a pair tensor: attention scores). j and j' are of one class (self
 * attention, square blocks) or of two (cross attention: queries of j1 by keys of j2). */
bool node_is_pair(const rj_graph *g, const node *n);
/* A pair (or a pair per head) whose two ragged dims are of different classes. */
bool node_is_cross(const rj_graph *g, const node *n);
/* The key of the blocks of a pair of ragged classes (roots r1 of the rows, r2 of the columns):
 * r1 itself for one class, so self pairs keep their class's key; nsym + r1 * nsym + r2 for
 * two. Kernels name a pair's block offsets by it (PK_SQOFF's ref), the runtime computes them. */
static inline int32_t pair_key(int32_t nsym, int32_t r1, int32_t r2) {
    return r1 == r2 ? r1 : nsym + r1 * nsym + r2;
}
/* [B, 1, j, ...]: a jagged [B, j, ...] seen as a row of columns (unsqueeze(x, 1)), an operand
 * of elementwise ops with [B, j, j] (a causal mask: positions(j1).unsqueeze(1)). */
bool node_is_column(const rj_graph *g, const node *n);

/* [B, H, j, D], [B, H, D, j], [B, H, j, j]: a jagged tensor seen per head (x.view(B, j, H, D)
 * .transpose(1, 2) and what is computed from it). Its values are stored in canonical order:
 * the batch dim, its ragged dims, then its other dims in order, as PyTorch stores the values of
 * a transposed jagged tensor ([B, H, j, D] as rows of [H, D]); the heads pass (heads.c)
 * rewrites such nodes into that order before the other passes. node_phys_order fills order[p]
 * with the dim stored at position p (the identity for other tensors); node_phys_dims the dims
 * in that order. */
bool node_is_headed(const rj_graph *g, const node *n);
int node_phys_order(const rj_graph *g, const node *n, int *order);
void node_phys_dims(const rj_graph *g, const node *n, rj_dim *dims);
/* Stored as len_b x len_b blocks per item: a pair, or a pair per head. */
bool node_stores_pair(const rj_graph *g, const node *n);

/* ops.c */
rj_dtype dtype_promote(rj_dtype a, rj_dtype b);
/* The identity of a combining op in dtype t, defined once for every target and the
 * interpreter: fn is RJ_OP_ADD, _MUL, _MAXIMUM or _MINIMUM (or the reductions SUM, MEAN,
 * PROD, MAX, MIN). An empty sum is +0.0 (PyTorch's), a product 1, a max the lowest value
 * (-inf, INT_MIN, false), a min the highest. With `partial`, the value that partial
 * accumulators (a vector's lanes, a block's threads) start from before they are folded into
 * a result: -0.0 for a float sum, which leaves every value as it is, -0.0 included. */
typedef struct op_identity_value {
    double f;  /* float types */
    int64_t i; /* integers and bool */
} op_identity_value;
op_identity_value op_identity(int fn, rj_dtype t, bool partial);
bool dtype_is_float(rj_dtype t);  /* f16, bf16, f32, f64 */
/* The 16-bit storage types, and the type their values are computed in (f32; t otherwise). */
bool dtype_is_half(rj_dtype t);
rj_dtype dtype_compute(rj_dtype t);
bool dtype_is_int(rj_dtype t); /* i32, i64 (not bool) */
/* The dtype an elementwise node computes in (its operands are converted to it); for
 * comparisons this differs from the bool result. */
rj_dtype node_compute_dtype(const rj_graph *g, const node *n);

/* The tensor whose values index op n checks: its index operand, seen through reshapes that
 * keep dim 0 (they keep every element's packed position and its item, so positions and
 * values are the underlying tensor's, often an input the user can look at). */
static inline int32_t index_tensor(const rj_graph *g, const node *n) {
    int32_t id = n->in[1];
    while (g->nodes[id].op == RJ_OP_RESHAPE && g->nodes[id].rank > 0 &&
           g->nodes[g->nodes[id].in[0]].rank > 0 && g->nodes[id].dims[0] == g->nodes[g->nodes[id].in[0]].dims[0])
        id = g->nodes[id].in[0];
    return id;
}

/* The size index op n's indices must stay below: the indexed dim of its source (embedding:
 * the table's rows). Two index ops with the same index_tensor and bound check the same thing. */
static inline rj_dim index_bound_dim(const rj_graph *g, const node *n) {
    return g->nodes[n->in[0]].dims[n->op == RJ_OP_EMBEDDING ? 0 : n->axis];
}

/* Index ops with no operand, computed from the index alone: positions, arange, full. */
static inline bool op_is_generator(rj_op op) {
    return op == RJ_OP_POSITIONS || op == RJ_OP_ARANGE || op == RJ_OP_FULL;
}

/* infer.c: fills dtype/rank/dims of n from its operands and attributes, or fails with a
 * message naming the op and the shapes. */
rj_status infer_node(rj_graph *g, node *n);
/* cat's operands a and b (numbered ia and ib in the user's list, from 1) agree along every
 * dim but *axis, which is normalised; fails with a message naming the mismatch. */
rj_status cat_check(rj_graph *g, const node *a, const node *b, int ia, int ib, int *axis);

/* print.c */
void print_dim(sbuf *b, const rj_graph *g, rj_dim d);
void print_type(sbuf *b, const rj_graph *g, rj_dtype t, int rank, const rj_dim *dims);
void print_node_type(sbuf *b, const rj_graph *g, const node *n);
void print_graph(sbuf *b, const rj_graph *g);
void print_node_ref(sbuf *b, const rj_graph *g, int32_t id);  /* its name in printed programs */
void print_node_call(sbuf *b, const rj_graph *g, int32_t id); /* "relu(h)", "sum(x, dim=1)" */
void print_operand_what(sbuf *b, const rj_graph *g, int32_t id); /* "input idx", or its name */
/* The same for many nodes of one graph, in linear time: an index of the graph's names
 * (print_names_new; NULL when out of memory, the slow path then) used by every call. */
typedef struct namer namer;
namer *print_names_new(const rj_graph *g);
void print_names_free(const rj_graph *g, namer *nm);
void print_node_ref_nm(sbuf *b, const rj_graph *g, const namer *nm, int32_t id);
void print_node_call_nm(sbuf *b, const rj_graph *g, const namer *nm, int32_t id);

/* verify.c */
rj_status verify_graph(rj_graph *g);

#endif
