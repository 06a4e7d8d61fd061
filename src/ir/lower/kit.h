/*
 * lower/kit.h — what every lowering template shares.
 *
 * Lowering is a table of templates (lower.c): each fused group is lowered by the first row
 * whose applies() holds, into one kernel or a few. The templates build loop IR through this
 * kit only: expressions are hash-consed and index arithmetic folded in one place (kit.c), a
 * node is evaluated at an index by value() (value.c), a group's results are stored by
 * store_group, and the unit loop nests every template starts from are in nest.c. An
 * allocation failure sets L->err; from then on every builder returns a placeholder and the
 * template runs to its end, and pass_lower returns the error.
 *
 * Calls point down only. kit.c, the builders (over the loop IR and the graph), is the bottom;
 * value.c, nest.c and reduce.c, the pieces templates share, stand on it (reduce.c on value.c
 * too); the templates, one file per family, stand on those and never call each other; the
 * table (lower.c) is the top. A template whose kernel computes another group as well (a
 * softmax in a library GEMM's epilogue) asks the table for it (L->lower_in_kernel).
 *
 * The declarations below are grouped by the file that defines them, from the bottom up.
 * Templates' own entry points are declared at the end, for the table.
 */
#ifndef RJ_LOWER_KIT_H
#define RJ_LOWER_KIT_H

#include "../loopir.h"
#include "../passes.h"

typedef struct at {
    int rank;
    int32_t idx[RJ_MAX_RANK];
    int32_t inclass;  /* idx[1] < len_b of this class (root sym), or -1 */
    int32_t outclass; /* idx[1] >= len_b of this class, or -1 */
    int32_t guard;    /* loads are guarded by this bool expression, or -1 */
} at;

typedef struct memo_ent {
    int32_t node;
    uint64_t key;
    int32_t expr;
} memo_ent;

typedef struct lower {
    rj_ctx *ctx;
    const rj_graph *g, *orig;
    const fuse_plan *plan;
    const target_desc *desc;
    lprog *prog;
    int32_t *bufof;     /* node -> first buffer holding it, or -1 */
    lkernel *k;
    int32_t group;      /* group being lowered */
    int32_t group2;     /* a group lowered into the same kernel (a GEMM before a softmax), or -1 */
    int32_t *merged;    /* per group: the GEMM group whose epilogue kernel computes it, or -1 */
    int32_t chunk_root, chunk_buf; /* the product read from a GEMM's chunk C, or -1 */
    rj_dim chunk_cols;
    rj_status err;
    int32_t subst_node, subst_expr; /* the root's value while lowering its epilogue */
    memo_ent *memo;
    int32_t memo_cap, memo_n;
    int lanes;          /* lanes loops around the statements being built */
    const char *tmpl;   /* the template lowering the group (lower.c), named on its kernels */
    /* The table's lowering of another group into the kernel being built (lower.c), for a
     * template whose kernel computes that group too (a softmax in a GEMM's epilogue): the
     * template that serves the group is the table's choice, never a call between templates. */
    void (*lower_in_kernel)(struct lower *L, const fuse_group *gr);
    int32_t check_slot; /* the next index check's word in the checks buffer */
    /* Why the last template whose applies() refused the group did (a static string), or NULL;
     * the table names it in the note of the kernel that serves the group instead. */
    const char *why;
    const char *why_tmpl;
} lower;

typedef struct blk {
    int32_t first, last;
} blk;

#define NEWBLK ((blk){-1, -1})

/* What the caller of store_group knows of index a against the rows an unpad keeps. */
typedef enum {
    ROWS_OUT, /* a is padding (i >= len_b): unpad epilogues are not written there */
    ROWS_IN,  /* a is a row of the item (i < len_b, and j < len_b for two ragged dims) */
    ROWS_ANY, /* either: each unpad's store is guarded, unless a's class says */
} rows_known;

typedef void (*body_fn)(lower *L, blk *b, at *a, void *ud);

/* The unit loop nest of UD_ROWS kernels over class cls, two `units` loops that together
 * enumerate the rows [lo, hi):
 *     for b in blo..bhi { start = loff[b]; for i in (rows of item b within [lo, hi)) { ... } }
 * rows_open fills a->idx[0..1] and returns the block of the i loop; rows_close links it. */
typedef struct rows_nest {
    blk item;      /* body of the b loop */
    blk row;       /* body of the i loop: filled by the caller */
    int32_t for_b; /* the b loop statement */
    int32_t for_i; /* the i loop statement */
    int32_t left;  /* rows_open_pairs: the rows from the pair's first to the item's end here */
} rows_nest;

typedef struct axis_info {
    const node *root, *x;
    int axis;
    bool items;       /* over the ragged (or padded) dim: UD_ITEMS */
    int32_t cls;      /* its class */
    bool padded;      /* the axis is a padded dim: rows [len_b, L) are padding */
    rj_dim L;         /* the padded extent */
} axis_info;

typedef struct red_ctx {
    axis_info ai;
    rj_dtype acc_t;      /* accumulator type */
    int32_t ntile;       /* tile extent expression */
    int32_t vi;          /* axis variable */
} red_ctx;

/* Float sums are compensated (Kahan): the rounding error of each addition is carried in c
 * and subtracted from the next term, so a sum of n terms is accurate to a few ulps of the
 * sum of absolute values whatever n is, where a plain running sum loses up to n ulps (10^6
 * rows of 0.1f: 100958 instead of 100000). On a CPU the sum of a long item is memory-bound,
 * and the four extra operations per element run in the shadow of the loads. The update
 *     y = term - c;  s = acc + y;  c = (s - acc) - y;  acc = s
 * keeps c unchanged when s is not finite: an infinite partial sum makes (s - acc) - y NaN,
 * and the plain sum's inf (or NaN, for inf - inf) must come out, as it does in PyTorch. The
 * result is acc - c. The accumulator and c are variables or elements of a local array. */
typedef struct place {
    int32_t loc;       /* local array, or -1: variable */
    int32_t at;        /* index in the local, or the variable */
} place;

/* Elements a vectorised partial sum covers before it is folded into the compensated total.
 * The partial's own error grows with the adds each vector lane makes (256 elements on AVX2,
 * one 8-wide accumulator: 32 adds a lane, a sum of 10^6 0.1f 4 ulps off; 64: 1 ulp). An
 * extent known to be at most SUM_ONE_BLOCK is summed as one block (a norm over D = 256 stays
 * one plain vector loop). */
#define SUM_BLOCK 64
#define SUM_ONE_BLOCK 256

/* ---- kit.c: expressions, statements, sizes and addresses, buffers, launch shapes ---- */
int32_t xi(lower *L, int64_t v);
bool open_kernel(lower *L, const char *name);
int32_t xconst(lower *L, rj_dtype t, double f);
int32_t xconst_int(lower *L, rj_dtype t, int64_t v);
int32_t xextreme(lower *L, rj_dtype t, bool lowest);
int32_t xparam(lower *L, param_kind kind, int32_t ref, const char *name);
int32_t xvar(lower *L, int32_t v);
int32_t newvar(lower *L, const char *name, rj_dtype t);
int32_t xbin(lower *L, int fn, rj_dtype t, int32_t a, int32_t b);
int32_t xfma(lower *L, rj_dtype t, int32_t a, int32_t b, int32_t c);
int32_t xun(lower *L, int fn, rj_dtype t, int32_t a);
int32_t xcmp(lower *L, int fn, int32_t a, int32_t b);
int32_t xsel(lower *L, int32_t c, int32_t a, int32_t b);
int32_t xcast(lower *L, rj_dtype t, int32_t a);
int32_t xmin(lower *L, int32_t a, int32_t b);
int32_t xmax(lower *L, int32_t a, int32_t b);
int32_t xadd(lower *L, int32_t a, int32_t b);
int32_t xsub(lower *L, int32_t a, int32_t b);
int32_t xmul(lower *L, int32_t a, int32_t b);
int32_t xload(lower *L, int32_t param, int32_t idx, rj_dtype t, int32_t guard);
int32_t xlocal(lower *L, int32_t loc, int32_t idx);
int32_t put(lower *L, blk *b, ls s);
void s_set(lower *L, blk *b, int32_t var, int32_t val);
void s_store(lower *L, blk *b, int32_t param, int32_t idx, int32_t val, uint8_t flags);
void s_store_local(lower *L, blk *b, int32_t loc, int32_t idx, int32_t val);
int32_t s_for(lower *L, blk *b, int32_t var, int32_t lo, int32_t hi, loop_map map);
int32_t s_if(lower *L, blk *into, blk *body, int32_t c);
void s_accum(lower *L, blk *b, int32_t var, int fn, int32_t val);
void s_accum_fma(lower *L, blk *b, int32_t var, int32_t x, int32_t y);
void close_body(lower *L, int32_t stmt, const blk *inner);
int32_t root_of(const rj_graph *g, rj_dim d);
int32_t xsize(lower *L, rj_dim d);
int32_t xloff(lower *L, int32_t cls, int32_t b);
int32_t xlen(lower *L, int32_t cls, int32_t b);
int32_t xextent(lower *L, const rj_dim *dims, int k, const at *a);
int32_t xaddr(lower *L, int32_t bi, const at *a);
int32_t buf_param(lower *L, int32_t bi);
void set_what(lower *L, sbuf *w);
bool is_jagged_t(const rj_graph *g, const node *n);
at at3(int32_t b, int32_t i, int32_t j, int32_t cls);
ls s_barrier(void);
int32_t class_param(lower *L, param_kind kind, int32_t cls, const char *what);
int32_t class_load(lower *L, param_kind kind, int32_t cls, const char *what, int32_t e);
int32_t xsq(lower *L, int32_t c1, int32_t c2, int32_t b);
int32_t add_buf(lower *L, lbuf_kind kind, int32_t index, int32_t node_id, const node *layout);
launch_shape launch_for(const target_desc *d);
void group_for(lower *L, lkernel *k);
int32_t identity(lower *L, rj_op op, rj_dtype t);
int32_t chunk_buf_add(lower *L, int which, rj_dtype t, rj_dim cols);
bool will_have_buffer(const lower *L, int32_t id, int32_t gi);
int32_t buf_rows_sym(lower *L, int32_t bi);
int32_t chunk_at(lower *L, const node *r, rj_dim cols, const at *a);
int32_t chunk_index(lower *L, const at *a);
int32_t chunk_value(lower *L, const at *a);

/* ---- value.c: values at an index and the stores of a group ---- */
int32_t operand(lower *L, const node *n, int k, const at *a, rj_dtype t);
int32_t index_bound(lower *L, const node *n, int32_t b);
int32_t index_ok(lower *L, int32_t iv, int32_t bound);
int32_t value(lower *L, int32_t id, const at *a);
int32_t value_fresh(lower *L, int32_t n, const at *a);
bool expr_uses_var(lower *L, int32_t e, int32_t v);
bool expr_cheap(lower *L, int32_t e);
void store_node(lower *L, blk *b, int32_t n, int32_t v, const at *a, uint8_t flags);
void store_group(lower *L, blk *b, int32_t root, int32_t r, const at *a, rows_known rows, uint8_t flags);

/* ---- nest.c: unit loop nests ---- */
void loops_v(lower *L, blk *b, at *a, const rj_dim *dims, int k, int end, body_fn fn, void *ud, bool vec);
void loops(lower *L, blk *b, at *a, const rj_dim *dims, int k, int end, body_fn fn, void *ud);
blk *rows_open(lower *L, blk *b, at *a, int32_t cls, rows_nest *rn);
void unit_extent(lower *L, const rj_dim *dims, int first, int stop);
void rows_close(lower *L, rows_nest *rn);
blk *rows_open_pairs(lower *L, blk *b, at *a, int32_t cls, rows_nest *rn);
blk *dense_loop(lower *L, blk *b, at *a, const rj_dim *dims, int n, blk *inner, int32_t *fstmt);
void element_nest(lower *L, const node *shape, const rj_dim *dims, body_fn fn, void *ud);
int leading_units(lower *L, blk *top, const rj_dim *dims, int rank, int upto, int stop, body_fn fn, void *ud);

/* ---- reduce.c: what reductions share ---- */
axis_info axis_of(lower *L, const node *root);
int combine_fn(rj_op op);
int32_t combine(lower *L, rj_op op, rj_dtype t, int32_t acc, int32_t v);
int32_t combine_n(lower *L, rj_op op, rj_dtype t, int32_t acc, int32_t v, int32_t times);
int32_t red_input(lower *L, red_ctx *rc, const at *a);
void kahan_add(lower *L, blk *b, rj_dtype t, place acc_at, place c_at, int32_t term);
at item_element(lower *L, const node *x, int32_t cls, int32_t b, int32_t i, int32_t flat, at *pad);
bool rows_padded_out(lower *L, const fuse_group *gr);
void axis_begin(lower *L, const fuse_group *gr, red_ctx *rc);

/* ---- keyrange.c: the keys a mask leaves visible (bounds on j linear in the row i) ---- */
typedef struct key_bound {
    bool has;
    int64_t a, b;  /* j <= a i + b (hi) or j >= a i + b (lo) */
} key_bound;
typedef struct key_range {
    key_bound lo, hi;
} key_range;
key_range key_range_of(const rj_graph *g, int32_t scores);

/* ---- the templates: what the table (lower.c) calls, and nothing else ---- */

/* checks.c: the range checks of index ops, and the kernel that clears their words */
void lower_check(lower *L, const fuse_group *gr);
void lower_checks_init(lower *L);
/* map.c */
void lower_map(lower *L, const fuse_group *gr);
/* norm.c */
void lower_norm(lower *L, const fuse_group *gr);
/* gemm_lib.c: a library GEMM's epilogue (and prologue) kernels; a softmax computed in one */
bool gemm_lib_applies(lower *L, const fuse_group *gr);
void lower_matmul_lib(lower *L, const fuse_group *gr);
void merge_softmax(lower *L, int32_t gs, uint8_t *unwritten);
/* attention_lib.c: fused attention whose products a library GEMM computes */
bool attention_lib_applies(lower *L, const fuse_group *gr);
void lower_attention_lib(lower *L, const fuse_group *gr);
bool attention_gemm_applies(lower *L, const fuse_group *gr);
void lower_attention_gemm(lower *L, const fuse_group *gr);
/* matmul_simt.c */
bool item_matmul_tiled_applies(lower *L, const fuse_group *gr);
void lower_item_matmul_tiled(lower *L, const fuse_group *gr);
/* matmul.c */
void lower_item_matmul_cpu(lower *L, const fuse_group *gr);
void lower_item_matmul_threads(lower *L, const fuse_group *gr);
void lower_head_matmul(lower *L, const fuse_group *gr);
void lower_matmul(lower *L, const fuse_group *gr);
/* items.c and items_simt.c: over the ragged or padded dim */
void lower_items_cpu_group(lower *L, const fuse_group *gr);
void lower_items_simt_group(lower *L, const fuse_group *gr);
/* attention.c: softmax(F, dim=-1) @ v, one online-softmax pass per query row */
void lower_attention(lower *L, const fuse_group *gr);
/* attention_simt.c: the same in FlashAttention-2's form, key tiles in shared memory */
bool attention_flash_applies(lower *L, const fuse_group *gr);
void lower_attention_flash(lower *L, const fuse_group *gr);
/* axis.c */
void lower_pair_columns(lower *L, const fuse_group *gr);
void lower_dense_axis(lower *L, const fuse_group *gr);

#endif
