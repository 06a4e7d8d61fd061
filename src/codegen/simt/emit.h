/*
 * simt/emit.h — what the pieces of the SIMT printer share: the spelling table's shape, the
 * printer's state, and each file's entry points.
 *
 * cuda_source and opencl_source (emit.c) print the preamble of helpers (preamble.c), then each
 * kernel (kernel.c): its signature and prologue, then its statements (stmt.c), whose lanes
 * loops may be spread across a group of threads (group.c), and whose expressions (expr.c)
 * print their operations in the forms ops.c chooses and their constants as const.c does.
 * Functions one piece calls in another carry the prefix cem_; the rest stay static in their
 * file. The declarations below are grouped by the file that defines them, lowest first.
 */
#ifndef RJ_SIMT_EMIT_H
#define RJ_SIMT_EMIT_H

#include "simt.h"

/* The words that differ between the spellings: one row per language (emit.c). */
typedef struct spelling {
    const char *lang;          /* in messages: "CUDA", "OpenCL" */
    const char *banner;        /* the first line of the source */
    const char *prelude;       /* before the helpers (pragmas) */
    const char *prelude_f64;   /* also, when the program computes in f64 */
    const char *dev;           /* what RJ_DEV, the helpers' qualifier, stands for */
    const char *kernel;        /* a kernel function's declaration up to its name */
    const char *bounds;        /* between kernel and name, with the block size and the blocks
                                * per multiprocessor to plan registers for (NULL: none) */
    const char *atomic_min;    /* an atomic minimum of an unsigned int in global memory */
    const char *atomic_min64[2]; /* ... of a 64-bit int: around "&buf[i], " (LF_ATOMIC_MIN) */
    const char *shuffle;       /* a warp's register exchange, (mask, value, offset, width)
                                * (NULL: none; reductions go through block-shared memory) */
    const char *global;        /* address space of pointer parameters ("" or "__global ") */
    const char *restrict_kw;   /* after the '*' of a pointer parameter: no other parameter
                                * reaches its memory (every buffer of a run is its own) */
    const char *shared;        /* block-scope arrays */
    const char *barrier;       /* a block barrier, as a statement */
    const char *group_id, *local_id, *local_size, *num_groups; /* 1-D index builtins */
    const char *i64, *u32, *u64; /* integer type names beyond int (OpenCL reserves long long) */
    const char *i64_lit, *u64_lit; /* their literal suffixes */
    const char *f32_bits[2];   /* around the hex digits of a float written as its bits */
    const char *f64_bits[2];   /* ... of a double */
    const char *f32_nan[2];    /* ... of a float NaN (NULL: as other bits) */
    const char *f64_nan[2];    /* ... of a double NaN */
    const char *nan_helpers[2]; /* preamble lines for those, f32 and f64 (NULL: none) */
    bool overloads;            /* helpers overload by type (C++); else rj_max_f32, rj_max_i64 */
    bool math_f;               /* f32 math functions take an 'f' suffix (expf); else overloaded */
    bool f64_always;           /* double helpers printed whatever the program uses */
    const char *f32_as_uint, *uint_as_f32; /* bit casts between float and unsigned int */
    const char *unroll;        /* an unroll hint before a loop, with its factor (NULL: none) */
    bool vload_half;           /* f16 memory through vload_half / vstore_half_rte (OpenCL),
                                * else the preamble's integer conversions */
} spelling;

/* The printer's state while it prints one source. */
typedef struct cem {
    rj_ctx *ctx;
    sbuf *b;
    const spelling *sp;
    const lkernel *k;
    lx_binder bd;    /* temporaries t<N> of the statement being printed */
    uint32_t *seen;  /* lx_visit's marks for the walks of stmt.c and kernel.c (compared with walk) */
    uint32_t walk;
    uint8_t *vset;   /* per variable: set inside the loop being checked */
    uint8_t *vread;  /* per variable: read somewhere (declared) */
    int depth;
    bool bad;        /* an operation this printer does not know */
    int32_t group;   /* threads sharing a chunk of units: lanes loops are spread across them */
    bool shuffle;    /* reductions across a group by warp shuffles (else block-shared memory) */
    int nred;        /* temporaries for the reductions of lanes loops */
} cem;

/* ---- types and indentation ---- */

static inline bool isf(int t) { return t == RJ_F32 || t == RJ_F64 || t == RJ_F16 || t == RJ_BF16; }

static inline const char *ctype(const cem *C, int t) {
    switch (t) {
    case RJ_BOOL: return "bool";
    case RJ_I32: return "int";
    case RJ_I64: return C->sp->i64;
    case RJ_F32: return "float";
    default: return "double";
    }
}

/* In memory, bool is one byte and a 16-bit float its bits (loads widen them, stores round to
 * them: preamble.c's rj_* conversions; no value has a 16-bit type, loopir.h). */
static inline const char *mtype(const cem *C, int t) {
    return t == RJ_BOOL ? "unsigned char" : t == RJ_F16 || t == RJ_BF16 ? "unsigned short" : ctype(C, t);
}

/* The element type of memory `mem` / `ref` (a load's fn / ref, a store's mem / ref). */
static inline int mem_dtype(const lkernel *k, int mem, int32_t ref) {
    return mem == MEM_LOCAL ? k->locals[ref].dtype : k->params[ref].dtype;
}

static inline void indent(cem *C) {
    for (int i = 0; i < C->depth; i++) sbuf_puts(C->b, "    ");
}

/* ---- preamble.c: the helpers every source starts with ---- */
/* The helpers' name suffix per type where helpers do not overload ("_f32" ...; NULL for bool). */
extern const char *const cem_type_suffix[RJ_DTYPE_COUNT];
void cem_put_preamble(sbuf *b, const spelling *sp, bool f64, bool half);

/* ---- const.c: constants ---- */
void cem_put_float(cem *C, int t, double v);
void cem_put_int(cem *C, int t, int64_t v);
/* A constant value of loop-IR type t (f for floats, i for bool and integers). */
typedef struct cval {
    int t;
    double f;
    int64_t i;
} cval;
bool cem_const_eval(const lkernel *k, int32_t id, cval *v);
bool cem_fold_float(const lkernel *k, int32_t id, double *out);

/* ---- ops.c: how single operations are spelled (forms: see its top) ---- */
/* The form of an operation of loop-IR kind (LX_UNARY, LX_BINARY, LX_CMP, LX_CAST) with result
 * type t and, for a cast, operand type from; NULL where this printer does not know it. */
const char *cem_op_form(int kind, int fn, int t, int from);
/* The form of fn(v, e) for a reduction's accumulator v of type t. */
const char *cem_combine_form(int fn, int t);

/* ---- expr.c: names, expressions, and operations printed in their forms ---- */
void cem_put_param(cem *C, int32_t i);
void cem_put_var(cem *C, int32_t v);
void cem_put_helper(cem *C, const char *name, int t);
void cem_put_mem(cem *C, int mem, int32_t ref);
void cem_expr(cem *C, int32_t id);
const char *cem_put_form(cem *C, const char *f, int t, int to, int *opnd);
void cem_put_op(cem *C, const char *f, int t, int to, const int32_t *opnd, int var);
/* Sets up C->bd, the binder of temporaries, for kernel k with this printer's policy; false
 * when out of memory. */
bool cem_binder_init(cem *C, const lkernel *k);
void cem_begin_stmt(cem *C, const int32_t *roots, int n);

/* ---- group.c: lanes loops across a group of threads ---- */
#define MAX_LANE_REDUCES 16

typedef struct lane_red {
    int32_t var;
    uint16_t fn;
} lane_red;

void cem_collect_reduces(cem *C, int32_t s, lane_red *r, int *n);
void cem_put_identity(cem *C, int t, int fn);
const char *cem_open_combine(cem *C, int32_t var, int fn);
void cem_close_combine(cem *C, int32_t var, const char *rest);
void cem_combine_group(cem *C, const lane_red *r);
void cem_declare_group_arrays(cem *C);

/* ---- stmt.c: statements ---- */
void cem_block(cem *C, int32_t s);
/* An experiment's setting from the environment (RAGJIT_SIMT_<name>), or -1 (knobs.c). */
int cem_knob(const char *name);

/* ---- kernel.c: kernels ---- */
/* Prints kernel k; false with the error in C->ctx. */
bool cem_kernel(cem *C, const lkernel *k);

#endif
