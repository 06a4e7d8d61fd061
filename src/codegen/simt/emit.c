/*
 * emit.c (SIMT) — loop IR to CUDA C and to OpenCL C 1.2: one printer, two spellings.
 *
 * The SIMT backends print the same loop IR the LLVM backend translates, as C that a device
 * compiler builds: NVRTC for CUDA (C++), clBuildProgram for OpenCL (C99-based OpenCL C 1.2).
 * The output is a fixed preamble of helpers, then one kernel function per loop-IR kernel, under
 * the loop IR's name (unmangled, so the driver finds it). The printer follows the LLVM
 * emitter's semantics operation by operation rather than C's, which differ in the corners that
 * matter for a numerical oracle:
 *
 *   - integer add/sub/mul/neg wrap (rj_add...: unsigned arithmetic; signed overflow is UB in C
 *     and NVVM would exploit it), integer pow wraps and follows the negative-exponent rule of
 *     the CPU's mathlib (rj_ipow);
 *   - float maximum/minimum propagate NaN, relu(x) = x < 0 ? 0 : x, sgn = (x>0)-(x<0);
 *   - float -> int saturates with NaN -> 0 (llvm.fptosi.sat; a C cast would be UB);
 *   - bool is `bool` in expressions and one byte in memory; add/max/or are ||,
 *     mul/min/and are && (short-circuiting a pure expression is harmless);
 *   - pow with a constant exponent of 1, 2, 3, 0.5 or -1 becomes the same multiply / sqrt /
 *     divide the LLVM emitter folds it to; LOP_FMA is fma(); everything else rounds per
 *     operation (NVRTC runs with --fmad=false, see nvrtc.c; OpenCL C contracts by default,
 *     so its source turns FP_CONTRACT off), so results match the CPU to the ulp-level
 *     differences of the math library.
 *
 * Spellings. CUDA C and OpenCL C differ in words, not in structure, so everything that
 * differs is one row of the spelling table below: the kernel keyword, the address-space
 * qualifier of pointers (`__global` on every OpenCL pointer parameter), block-shared memory,
 * the barrier, the index builtins, the name of the 64-bit integer types and their literal
 * suffixes, how a non-finite constant is written as bits, how math functions are named
 * (`expf` in CUDA, the overloaded `exp` in OpenCL) and whether helpers may be overloaded by
 * type (C++) or carry the type in their name (C: rj_max_f32). The preamble is written once, as
 * templates instantiated per type with the spelling's words (see expand below), so the two
 * spellings cannot drift apart in semantics. OpenCL's double-precision helpers are printed
 * only when the program computes in f64, with the cl_khr_fp64 pragma: an f32 program then
 * runs on a device without doubles. CUDA-only refinements, if any are ever added, belong
 * behind a field of the same table, as the one OpenCL-only detail does: a NaN constant is
 * read through a volatile there, since PoCL 3's builtins, built for finite math, fold into
 * garbage when the compiler hands them a literal NaN (exp(x + NaN)). A NaN is rare in a
 * kernel (a pad or fill value), so the load it costs does not matter.
 *
 * Launch scheme. A kernel processes the unit range [lo, hi) given by its PK_LO/PK_HI
 * parameters. On the GPU every thread takes one contiguous slice of it: with T threads in
 * the (1-D) grid, thread t handles [lo + t*c, lo + (t+1)*c) clipped to hi, c = ceil((hi-lo)/T).
 * The generated code shadows lo/hi with the thread's slice, so the loop-IR body runs
 * unchanged; for UD_ROWS kernels it also recomputes blo/bhi for the slice by binary search
 * over the class's logical offsets (searching within the whole launch's [blo, bhi], which
 * the runtime passes, so the kernel needs no batch size). Per-thread scratch is one slice of
 * a shared array: each scratch pointer parameter is followed by an extra `stride` parameter
 * (elements per thread). PK_NT is accepted and ignored: there are no streaming stores here.
 * The slice scheme keeps correctness independent of the grid size, so the runtime can pick
 * any launch shape (GPU performance is not the goal of this backend yet). Both spellings
 * take the same parameters in the same order, so one launch planner fills them.
 *
 * Parallel mappings. Today's lowering is CPU-shaped (each thread a chunk of units), so `units`,
 * `lanes` and `serial` loops are all ordinary loops of one thread; a `reduce` is the
 * accumulation v = v op e; `barrier` is the spelling's block barrier. A thread-scope local
 * whose storage a parameter passes in is that thread's slice of the scratch array; other
 * locals are arrays of their constant size, block-shared (`__shared__`, `__local`) for block
 * scope.
 *
 * Names. Loop-IR names come partly from the user (input names, symbols), so they can clash
 * with keywords, with each other once sanitised, or with math functions. Every C name is
 * therefore prefixed with its index: parameter i is p<i>_<name>, variable i is v<i>_<name>,
 * shared subexpressions t<n>, helpers rj_*; the sanitised name is kept for the reader.
 *
 * Expressions are a hash-consed DAG; printing them as trees could grow exponentially, so each
 * statement first binds the subexpressions it uses more than once to `const` temporaries
 * (loopir.c's binder, with this printer's policy). Only subexpressions the statement
 * evaluates unconditionally are bound: the index of a
 * guarded load is evaluated only when its guard holds (pad: "i < len ? x[row(i)] : v"), so
 * anything reachable only through such an index stays inside the conditional expression,
 * where the load itself is (`(g ? buf[i] : dflt)`).
 *
 * Variables are locals declared at the top of the kernel; those no statement reads are left
 * out, with their assignments (NVRTC would warn, and the values are pure). The text is a pure
 * function of the loop IR (no addresses, no clocks): dumping twice gives identical source,
 * which the tests and any kernel cache can rely on.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simt.h"

/* ---- spellings ---------------------------------------------------------------------------- */

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
} spelling;

static const spelling cuda_spelling = {
    .lang = "CUDA",
    .banner = "// CUDA C generated by ragjit from the loop IR; compile with NVRTC.\n",
    .prelude = "",
    .prelude_f64 = "",
    .dev = "__device__ __forceinline__",
    .kernel = "extern \"C\" __global__ void ",
    .restrict_kw = "__restrict__ ",
    .bounds = "__launch_bounds__(%d, %d) ",
    .shuffle = "__shfl_xor_sync",
    .atomic_min = "atomicMin",
    .atomic_min64 = {"atomicMin((long long *)", "(long long)"},
    .global = "",
    .shared = "__shared__ ",
    .barrier = "__syncthreads();",
    .group_id = "blockIdx.x",
    .local_id = "threadIdx.x",
    .local_size = "blockDim.x",
    .num_groups = "gridDim.x",
    .i64 = "long long",
    .u32 = "unsigned",
    .u64 = "unsigned long long",
    .i64_lit = "LL",
    .u64_lit = "ull",
    .f32_bits = {"__int_as_float((int)0x", "u)"},
    .f64_bits = {"__longlong_as_double((long long)0x", "ull)"},
    .overloads = true,
    .math_f = true,
    .f64_always = true,
};

/* static: OpenCL C 1.2 follows C99, where a plain `inline` function has no definition to call
 * when the compiler declines to inline it. */
static const spelling opencl_spelling = {
    .lang = "OpenCL",
    .banner = "// OpenCL C 1.2 generated by ragjit from the loop IR; build with -cl-std=CL1.2.\n",
    .prelude = "#pragma OPENCL FP_CONTRACT OFF\n#pragma OPENCL EXTENSION cl_khr_int64_extended_atomics : enable\n",
    .prelude_f64 = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n",
    .dev = "static inline",
    .kernel = "__kernel void ",
    .global = "__global ",
    .restrict_kw = "restrict ",
    .atomic_min = "atomic_min",
    .atomic_min64 = {"atom_min(", "(long)"},
    .shared = "__local ",
    .barrier = "barrier(CLK_LOCAL_MEM_FENCE);",
    .group_id = "get_group_id(0)",
    .local_id = "get_local_id(0)",
    .local_size = "get_local_size(0)",
    .num_groups = "get_num_groups(0)",
    .i64 = "long",
    .u32 = "uint",
    .u64 = "ulong",
    .i64_lit = "L",
    .u64_lit = "ul",
    .f32_bits = {"as_float(0x", "u)"},
    .f64_bits = {"as_double(0x", "ul)"},
    /* PoCL 3 folds a builtin of a literal NaN (exp(x + NaN), whose operand folds to NaN) into
     * garbage, its builtins being built for finite math: a NaN is read through a volatile */
    .f32_nan = {"rj_nan_f32(0x", "u)"},
    .f64_nan = {"rj_nan_f64(0x", "ul)"},
    .nan_helpers = {"// NaN constants through a volatile, so no compiler folds a builtin of one\n"
                    "RJ_DEV float rj_nan_f32(uint b) { volatile uint v = b; return as_float(v); }\n",
                    "RJ_DEV double rj_nan_f64(ulong b) { volatile ulong v = b; return as_double(v); }\n"},
    .overloads = false,
    .math_f = false,
    .f64_always = false,
};

/* ---- the preamble ----------------------------------------------------------------------------
 * Helpers with the semantics listed at the top of this file, as templates: each is printed
 * once per type of its mask, in the order f32, f64, i32, i64 (or once, untyped, for mask 0),
 * with these words of the spelling and the type substituted:
 *
 *   $T the type           $U its unsigned partner       $u the unsigned literal suffix
 *   $N the helper suffix  ("" where helpers overload, else _f32, _f64, _i32, _i64)
 *   $L the float literal suffix (f for f32)             $f the math suffix (expf: f32 in CUDA)
 *   $I the 64-bit integer type   $l its literal suffix  $G the global address space
 *
 * Only builtins that NVRTC declares without any #include, and that OpenCL C defines, are used
 * (expf / exp, erff / erf, ...). */
enum { MF32 = 1, MF64 = 2, MI32 = 4, MI64 = 8, MFLT = MF32 | MF64, MINT = MI32 | MI64 };

static const struct {
    int mask;
    const char *text;
} preamble[] = {
    {0, "// maximum/minimum: NaN if either operand is NaN\n"},
    {MFLT, "RJ_DEV $T rj_max$N($T a, $T b) { return (a != a || b != b) ? a + b : (a > b ? a : b); }\n"},
    {MINT, "RJ_DEV $T rj_max$N($T a, $T b) { return a > b ? a : b; }\n"},
    {MFLT, "RJ_DEV $T rj_min$N($T a, $T b) { return (a != a || b != b) ? a + b : (a < b ? a : b); }\n"},
    {MINT, "RJ_DEV $T rj_min$N($T a, $T b) { return a < b ? a : b; }\n"},
    {0, "// integer arithmetic wraps (two's complement), as in LLVM\n"},
    {MINT, "RJ_DEV $T rj_add$N($T a, $T b) { return ($T)(($U)a + ($U)b); }\n"},
    {MINT, "RJ_DEV $T rj_sub$N($T a, $T b) { return ($T)(($U)a - ($U)b); }\n"},
    {MINT, "RJ_DEV $T rj_mul$N($T a, $T b) { return ($T)(($U)a * ($U)b); }\n"},
    {MINT, "RJ_DEV $T rj_neg$N($T a) { return ($T)(0$u - ($U)a); }\n"},
    {MINT, "RJ_DEV $T rj_abs$N($T a) { return a < 0 ? rj_neg$N(a) : a; }\n"},
    {MI32, "RJ_DEV $T rj_sgn$N($T x) { return (x > 0) - (x < 0); }\n"},
    {MI64, "RJ_DEV $T rj_sgn$N($T x) { return ($T)((x > 0) - (x < 0)); }\n"},
    {MFLT, "RJ_DEV $T rj_sgn$N($T x) { return ($T)(x > 0.0$L) - ($T)(x < 0.0$L); }\n"},
    {MINT, "RJ_DEV $T rj_relu$N($T x) { return x > 0 ? x : 0; }\n"},
    {MFLT, "RJ_DEV $T rj_relu$N($T x) { return x < 0.0$L ? 0.0$L : x; }\n"},
    {0, "// integer pow: wraps; a negative exponent gives 1 for base 1, +-1 for base -1, else 0\n"},
    {MINT, "RJ_DEV $T rj_ipow$N($T b, $T e) {\n"
           "    if (e < 0) return b == 1 ? 1 : b == -1 ? ((e & 1) ? -1 : 1) : 0;\n"
           "    $U r = 1$u, x = ($U)b;\n"
           "    for (; e; e >>= 1) { if (e & 1) r *= x; x *= x; }\n"
           "    return ($T)r;\n"
           "}\n"},
    {0, "// float -> int saturates, NaN -> 0 (llvm.fptosi.sat)\n"},
    /* 2^31 - 1 is no float: the f32 bound is 2^31 itself */
    {MF32, "RJ_DEV int rj_to_i32$N($T x) {\n"
           "    return x != x ? 0 : x <= -2147483648.0f ? (-2147483647 - 1) : x >= 2147483648.0f ? 2147483647 : (int)x;\n"
           "}\n"},
    {MF64, "RJ_DEV int rj_to_i32$N($T x) {\n"
           "    return x != x ? 0 : x <= -2147483648.0 ? (-2147483647 - 1) : x >= 2147483647.0 ? 2147483647 : (int)x;\n"
           "}\n"},
    {MFLT, "RJ_DEV $I rj_to_i64$N($T x) {\n"
           "    if (x != x) return 0;\n"
           "    if (x <= -9223372036854775808.0$L) return -9223372036854775807$l - 1;\n"
           "    return x >= 9223372036854775808.0$L ? 9223372036854775807$l : ($I)x;\n"
           "}\n"},
    {MFLT, "RJ_DEV $T rj_sigmoid$N($T x) { return 1.0$L / (1.0$L + exp$f(-x)); }\n"},
    {MFLT, "RJ_DEV $T rj_silu$N($T x) { return x * rj_sigmoid$N(x); }\n"},
    /* GELU's two forms, spelled so that their tails are exact: 1 + erf(t) and 1 + tanh(u)
     * cancel where t, u are large and negative, and a device erf or tanh one ulp short of -1
     * (within OpenCL's and CUDA's bounds) times a large x is far from 0: gelu_tanh(-6843.7)
     * was -2e-4 on PoCL. erfc(-t) and x * sigmoid(2u) are the same functions without the
     * cancellation. */
    {MFLT, "RJ_DEV $T rj_gelu$N($T x) { return (0.5$L * x) * erfc$f(x * -0.707106781186547524$L); }\n"},
    {MFLT, "RJ_DEV $T rj_gelu_tanh$N($T x) {\n"
           "    return x * rj_sigmoid$N(1.5957691216057308$L * (x + 0.044715$L * ((x * x) * x)));\n"
           "}\n"},
    {MFLT, "RJ_DEV $T rj_rsqrt$N($T x) { return 1.0$L / sqrt$f(x); }\n"},
    {0, "// items of a thread's row range: largest b in [lo, hi] with off[b] <= v, smallest with off[b] >= v\n"},
    {0, "RJ_DEV $I rj_upper_item(const $G$I *off, $I lo, $I hi, $I v) {\n"
        "    while (lo < hi) { $I mid = lo + (hi - lo + 1) / 2; if (off[mid] <= v) lo = mid; else hi = mid - 1; }\n"
        "    return lo;\n"
        "}\n"},
    {0, "RJ_DEV $I rj_lower_item(const $G$I *off, $I lo, $I hi, $I v) {\n"
        "    while (lo < hi) { $I mid = lo + (hi - lo) / 2; if (off[mid] >= v) hi = mid; else lo = mid + 1; }\n"
        "    return lo;\n"
        "}\n"},
};

static const char *const type_suffix[RJ_DTYPE_COUNT] = {
    [RJ_F32] = "_f32", [RJ_F64] = "_f64", [RJ_I32] = "_i32", [RJ_I64] = "_i64"};

/* One template for type t (-1: untyped), as the table above describes. */
static void expand(sbuf *b, const spelling *sp, const char *s, int t) {
    bool f32 = t == RJ_F32;
    const char *ty = t == RJ_F32 ? "float" : t == RJ_F64 ? "double" : t == RJ_I32 ? "int" : sp->i64;
    for (; *s; s++) {
        if (*s != '$') {
            sbuf_putc(b, *s);
            continue;
        }
        switch (*++s) {
        case 'T': sbuf_puts(b, ty); break;
        case 'U': sbuf_puts(b, t == RJ_I32 ? sp->u32 : sp->u64); break;
        case 'u': sbuf_puts(b, t == RJ_I32 ? "u" : sp->u64_lit); break;
        case 'N': sbuf_puts(b, sp->overloads || t < 0 ? "" : type_suffix[t]); break;
        case 'L': sbuf_puts(b, f32 ? "f" : ""); break;
        case 'f': sbuf_puts(b, f32 && sp->math_f ? "f" : ""); break;
        case 'I': sbuf_puts(b, sp->i64); break;
        case 'l': sbuf_puts(b, sp->i64_lit); break;
        case 'G': sbuf_puts(b, sp->global); break;
        default: sbuf_putc(b, '$'), s--; break; /* not a placeholder: printed as it is */
        }
    }
}

static void put_preamble(sbuf *b, const spelling *sp, bool f64) {
    static const int order[] = {RJ_F32, RJ_F64, RJ_I32, RJ_I64};
    static const int bit[] = {MF32, MF64, MI32, MI64};
    sbuf_puts(b, sp->prelude);
    if (f64) sbuf_puts(b, sp->prelude_f64);
    sbuf_puts(b, "// Helpers: the semantics of ragjit's CPU backend (see src/codegen/simt/emit.c).\n");
    sbuf_printf(b, "#define RJ_DEV %s\n", sp->dev);
    if (sp->nan_helpers[0]) sbuf_puts(b, sp->nan_helpers[0]);
    if (sp->nan_helpers[1] && f64) sbuf_puts(b, sp->nan_helpers[1]);
    for (size_t i = 0; i < RJ_ARRAY_LEN(preamble); i++) {
        if (!preamble[i].mask) expand(b, sp, preamble[i].text, -1);
        for (int k = 0; k < 4; k++)
            if ((preamble[i].mask & bit[k]) && (order[k] != RJ_F64 || f64))
                expand(b, sp, preamble[i].text, order[k]);
    }
}

/* ---- printer state ------------------------------------------------------------------------ */

typedef struct cem {
    rj_ctx *ctx;
    sbuf *b;
    const spelling *sp;
    const lkernel *k;
    lx_binder bd;    /* temporaries t<N> of the statement being printed */
    uint32_t *seen;  /* lx_visit's marks for the walks below (compared with walk) */
    uint32_t walk;
    uint8_t *vset;   /* per variable: set inside the loop being checked */
    uint8_t *vread;  /* per variable: read somewhere (declared) */
    int depth;
    bool bad;        /* an operation this printer does not know */
    int32_t group;   /* threads sharing a chunk of units: lanes loops are spread across them */
    bool shuffle;    /* reductions across a group by warp shuffles (else block-shared memory) */
    int nred;        /* temporaries for the reductions of lanes loops */
} cem;

static bool isf(int t) { return t == RJ_F32 || t == RJ_F64; }

static const char *ctype(const cem *C, int t) {
    switch (t) {
    case RJ_BOOL: return "bool";
    case RJ_I32: return "int";
    case RJ_I64: return C->sp->i64;
    case RJ_F32: return "float";
    default: return "double";
    }
}

/* In memory, bool is one byte. */
static const char *mtype(const cem *C, int t) { return t == RJ_BOOL ? "unsigned char" : ctype(C, t); }

/* A helper of the preamble for operands of type t: overloaded, or named after the type. */
static void put_helper(cem *C, const char *name, int t) {
    sbuf_puts(C->b, name);
    if (!C->sp->overloads) sbuf_puts(C->b, type_suffix[t]);
}

/* A C math function (expf / exp) for type t, as the spelling names it. */
static void put_math(cem *C, const char *name, int t) {
    sbuf_puts(C->b, name);
    if (t == RJ_F32 && C->sp->math_f) sbuf_putc(C->b, 'f');
}

static void indent(cem *C) {
    for (int i = 0; i < C->depth; i++) sbuf_puts(C->b, "    ");
}

/* A loop-IR name as an identifier fragment. */
static void put_sanitised(sbuf *b, const char *s) {
    for (; *s; s++) {
        char c = *s;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        sbuf_putc(b, ok ? c : '_');
    }
}

static void put_param(cem *C, int32_t i) {
    sbuf_printf(C->b, "p%d_", (int)i);
    put_sanitised(C->b, C->k->params[i].name);
}

static void put_var(cem *C, int32_t v) {
    sbuf_printf(C->b, "v%d_", (int)v);
    put_sanitised(C->b, C->k->vars[v].name);
}

/* Text for a // comment: no line breaks, and no trailing backslash that would splice lines. */
static void put_comment_text(sbuf *b, const char *s) {
    for (; *s; s++) sbuf_putc(b, *s == '\n' || *s == '\r' ? ' ' : *s == '\\' ? '/' : *s);
}

/* ---- constants ---------------------------------------------------------------------------- */

/* Shortest decimal that reads back as the same float. */
static void fmt_float(char *out, size_t n, float v) {
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(out, n, "%.*g", prec, (double)v);
        if (strtof(out, NULL) == v) break;
    }
    if (!strpbrk(out, ".eE") && strlen(out) + 3 < n) strcat(out, ".0");
}

static void put_float(cem *C, int t, double v) {
    sbuf *b = C->b;
    const spelling *sp = C->sp;
    char num[48];
    if (t == RJ_F32) {
        float f = (float)v;
        if (!isfinite(f)) { /* no literal for inf/nan: the exact bits */
            uint32_t bits;
            memcpy(&bits, &f, sizeof bits);
            const char *const *w = isnan(f) && sp->f32_nan[0] ? sp->f32_nan : sp->f32_bits;
            sbuf_printf(b, "%s%08x%s", w[0], (unsigned)bits, w[1]);
            return;
        }
        fmt_float(num, sizeof num, f);
        sbuf_printf(b, signbit(f) ? "(%sf)" : "%sf", num);
        return;
    }
    if (!isfinite(v)) {
        uint64_t bits;
        memcpy(&bits, &v, sizeof bits);
        const char *const *w = isnan(v) && sp->f64_nan[0] ? sp->f64_nan : sp->f64_bits;
        sbuf_printf(b, "%s%016llx%s", w[0], (unsigned long long)bits, w[1]);
        return;
    }
    fmt_double(num, sizeof num, v);
    sbuf_printf(b, signbit(v) ? "(%s)" : "%s", num);
}

static void put_int(cem *C, int t, int64_t v) {
    sbuf *b = C->b;
    if (t == RJ_BOOL) {
        sbuf_puts(b, v ? "true" : "false");
    } else if (t == RJ_I32) {
        int32_t x = (int32_t)(uint32_t)(uint64_t)v;
        if (x == INT32_MIN) sbuf_puts(b, "(-2147483647 - 1)");
        else sbuf_printf(b, x < 0 ? "(%d)" : "%d", (int)x);
    } else {
        const char *sfx = C->sp->i64_lit;
        if (v == INT64_MIN) sbuf_printf(b, "(-9223372036854775807%s - 1)", sfx);
        else sbuf_printf(b, v < 0 ? "(%lld%s)" : "%lld%s", (long long)v, sfx);
    }
}

/* A constant value of loop-IR type t (f for floats, i for bool and integers). */
typedef struct cval {
    int t;
    double f;
    int64_t i;
} cval;

/* Evaluates a constant, through any casts of it, with the conversions of the generated code
 * (LLVM's constant folder does the same on the CPU); false if id is not constant. */
static bool const_eval(const lkernel *k, int32_t id, cval *v) {
    const lx *e = &k->ex[id];
    if (e->kind == LX_CONST) {
        v->t = e->type;
        v->f = e->type == RJ_F32 ? (double)(float)e->f : e->f;
        v->i = e->type == RJ_BOOL ? e->i != 0
             : e->type == RJ_I32 ? (int64_t)(int32_t)(uint32_t)(uint64_t)e->i : e->i;
        return true;
    }
    cval a;
    if (e->kind != LX_CAST || !const_eval(k, e->a, &a)) return false;
    int to = e->type;
    v->t = to;
    v->f = 0;
    v->i = 0;
    if (to == RJ_BOOL) v->i = isf(a.t) ? a.f != 0 || isnan(a.f) : a.i != 0;
    else if (to == RJ_F32) v->f = isf(a.t) ? (double)(float)a.f : (double)(float)a.i;
    else if (to == RJ_F64) v->f = isf(a.t) ? a.f : (double)a.i;
    else if (isf(a.t)) v->i = cast_float_to_int(a.f, (rj_dtype)to);
    else v->i = to == RJ_I32 ? (int64_t)(int32_t)(uint32_t)(uint64_t)a.i : a.i;
    return true;
}

/* A float expression of constants only (+, -, *, / and negation, through casts), evaluated
 * with the rounding of its type; false for anything else. The emitter prints such an
 * expression as its value: lowering substitutes a pad value into the expressions of the
 * padding's closed form, and `inf * 0.0`, left to the device compiler, reached exp() as a
 * literal NaN, which PoCL folds into garbage (see the spelling's f32_nan): softmax over a
 * padded dim wrote garbage to its padding rows where the reference has NaN. Folded here, the
 * NaN is printed as a constant, through the volatile read. */
static bool fold_float(const lkernel *k, int32_t id, double *out) {
    const lx *e = &k->ex[id];
    if (!isf(e->type)) return false;
    double a, b;
    if (e->kind == LX_CONST || e->kind == LX_CAST) {
        cval v;
        if (!const_eval(k, id, &v)) return false;
        *out = v.f;
        return true;
    }
    if (e->kind == LX_UNARY && e->fn == RJ_OP_NEG && fold_float(k, e->a, &a)) {
        *out = -a;
        return true;
    }
    if (e->kind != LX_BINARY || !fold_float(k, e->a, &a) || !fold_float(k, e->b, &b)) return false;
    switch (e->fn) {
    case RJ_OP_ADD: *out = a + b; break;
    case RJ_OP_SUB: *out = a - b; break;
    case RJ_OP_MUL: *out = a * b; break;
    case RJ_OP_DIV: *out = a / b; break;
    default: return false;
    }
    /* one IEEE operation in double, then rounded to f32: the correctly rounded f32 result
     * (double has more than twice f32's precision) */
    if (e->type == RJ_F32) *out = (double)(float)*out;
    return true;
}

/* ---- expressions -------------------------------------------------------------------------- */

/* How a float pow with a constant exponent is expanded (pow_expand), or POWX_NONE. */
static pow_expansion pow_expansion_of(const lkernel *k, const lx *e) {
    cval c;
    if (e->kind != LX_BINARY || e->fn != RJ_OP_POW || !isf(e->type) || !const_eval(k, e->b, &c) ||
        !isf(c.t))
        return POWX_NONE;
    return pow_expand(c.f);
}

static void expr(cem *C, int32_t id);

/* A callee: a helper of the preamble or a C math function, named for operands of type t
 * (put_helper, put_math). */
typedef struct callee {
    const char *name;
    bool math;
} callee;

static void put_callee(cem *C, callee f, int t) {
    if (f.math) put_math(C, f.name, t);
    else put_helper(C, f.name, t);
}

static void call1(cem *C, callee f, int t, int32_t a) {
    put_callee(C, f, t);
    sbuf_putc(C->b, '(');
    expr(C, a);
    sbuf_putc(C->b, ')');
}

static void call2(cem *C, callee f, int t, int32_t a, int32_t b) {
    put_callee(C, f, t);
    sbuf_putc(C->b, '(');
    expr(C, a);
    sbuf_puts(C->b, ", ");
    expr(C, b);
    sbuf_putc(C->b, ')');
}

#define HELPER(n) ((callee){n, false})
#define MATH(n) ((callee){n, true})

static void infix(cem *C, int32_t a, const char *op, int32_t b) {
    sbuf_putc(C->b, '(');
    expr(C, a);
    sbuf_printf(C->b, " %s ", op);
    expr(C, b);
    sbuf_putc(C->b, ')');
}

/* The memory a load or store addresses: a buffer, the thread's slice of the scratch a local's
 * parameter passes in, or a local array declared in the kernel. */
static void put_mem(cem *C, int mem, int32_t ref) {
    const llocal *l = mem == MEM_LOCAL ? &C->k->locals[ref] : NULL;
    if (!l) {
        put_param(C, ref);
    } else if (l->param >= 0) {
        put_param(C, l->param);
    } else {
        sbuf_printf(C->b, "l%d_", (int)ref);
        put_sanitised(C->b, l->name);
    }
}

static void load(cem *C, const lx *e) {
    bool bl = e->type == RJ_BOOL;
    if (bl) sbuf_putc(C->b, '(');
    put_mem(C, e->fn, e->ref);
    sbuf_putc(C->b, '[');
    expr(C, e->a);
    sbuf_putc(C->b, ']');
    if (bl) sbuf_puts(C->b, " != 0)");
}

static void unary(cem *C, const lx *e) {
    int t = e->type;
    callee fn = {0};
    if (e->fn == RJ_OP_LOGICAL_NOT) { /* operand already bool (lowering takes its truth) */
        sbuf_puts(C->b, "(!");
        expr(C, e->a);
        sbuf_putc(C->b, ')');
        return;
    }
    if (t == RJ_BOOL) {
        C->bad = true;
        return;
    }
    switch (e->fn) {
    case RJ_OP_NEG:
        if (!isf(t)) fn = HELPER("rj_neg");
        else {
            sbuf_puts(C->b, "(-");
            expr(C, e->a);
            sbuf_putc(C->b, ')');
            return;
        }
        break;
    case RJ_OP_ABS: fn = !isf(t) ? HELPER("rj_abs") : MATH("fabs"); break;
    case RJ_OP_SGN: fn = HELPER("rj_sgn"); break;
    case RJ_OP_RELU: fn = HELPER("rj_relu"); break;
    default:
        if (!isf(t)) break;
        switch (e->fn) {
        case RJ_OP_GELU: fn = HELPER("rj_gelu"); break;
        case RJ_OP_GELU_TANH: fn = HELPER("rj_gelu_tanh"); break;
        case RJ_OP_SILU: fn = HELPER("rj_silu"); break;
        case RJ_OP_SIGMOID: fn = HELPER("rj_sigmoid"); break;
        case RJ_OP_TANH: fn = MATH("tanh"); break;
        case RJ_OP_EXP: case LOP_EXP_TERM: fn = MATH("exp"); break;
        case RJ_OP_LOG: fn = MATH("log"); break;
        case RJ_OP_SQRT: fn = MATH("sqrt"); break;
        case RJ_OP_RSQRT: fn = HELPER("rj_rsqrt"); break;
        case RJ_OP_SIN: fn = MATH("sin"); break;
        case RJ_OP_COS: fn = MATH("cos"); break;
        default: break;
        }
    }
    if (!fn.name) {
        C->bad = true;
        return;
    }
    call1(C, fn, t, e->a);
}

/* pow with the constant exponents every target expands (pow_expand): the same operations,
 * so the same rounding, as the LLVM emitter. */
static void fpow(cem *C, const lx *e) {
    bool f32 = e->type == RJ_F32;
    switch (pow_expansion_of(C->k, e)) {
    case POWX_ONE: expr(C, e->a); return;
    case POWX_SQUARE:
    case POWX_CUBE: {
        bool cube = pow_expansion_of(C->k, e) == POWX_CUBE;
        sbuf_puts(C->b, cube ? "((" : "(");
        expr(C, e->a);
        sbuf_puts(C->b, " * ");
        expr(C, e->a);
        if (cube) {
            sbuf_puts(C->b, ") * ");
            expr(C, e->a);
        }
        sbuf_putc(C->b, ')');
        return;
    }
    case POWX_SQRT: call1(C, MATH("sqrt"), e->type, e->a); return;
    case POWX_RECIP:
        sbuf_puts(C->b, f32 ? "(1.0f / " : "(1.0 / ");
        expr(C, e->a);
        sbuf_putc(C->b, ')');
        return;
    case POWX_NONE: break;
    }
    call2(C, MATH("pow"), e->type, e->a, e->b);
}

/* How fn(a, b) in type t prints: [helper] "(" a mid b ")" (helper NULL: an infix operator).
 * False for the ops printed otherwise (float pow, fma) and for those this printer does not
 * know. */
static bool binary_form(int t, int fn, const char **helper, const char **mid) {
    const char *o = NULL, *m = NULL;
    if (t == RJ_BOOL) {
        switch (fn) {
        case RJ_OP_ADD:
        case RJ_OP_MAXIMUM:
        case RJ_OP_LOGICAL_OR: m = " || "; break;
        case RJ_OP_MUL:
        case RJ_OP_MINIMUM:
        case RJ_OP_LOGICAL_AND: m = " && "; break;
        default: break;
        }
    } else if (!isf(t)) {
        m = ", ";
        switch (fn) {
        case RJ_OP_ADD: o = "rj_add"; break;
        case RJ_OP_SUB: o = "rj_sub"; break;
        case RJ_OP_MUL: o = "rj_mul"; break;
        case RJ_OP_MAXIMUM: o = "rj_max"; break;
        case RJ_OP_MINIMUM: o = "rj_min"; break;
        case RJ_OP_POW: o = "rj_ipow"; break;
        case LOP_IDIV: m = " / "; break;
        case LOP_IREM: m = " % "; break;
        default: m = NULL; break;
        }
    } else {
        switch (fn) {
        case RJ_OP_ADD: m = " + "; break;
        case RJ_OP_SUB: m = " - "; break;
        case RJ_OP_MUL: m = " * "; break;
        case RJ_OP_DIV: m = " / "; break;
        case RJ_OP_MAXIMUM: o = "rj_max", m = ", "; break;
        case RJ_OP_MINIMUM: o = "rj_min", m = ", "; break;
        default: break;
        }
    }
    *helper = o;
    *mid = m;
    return m != NULL;
}

/* The opening of binary_form's text. */
static void open_form(cem *C, const char *helper, int t) {
    if (helper) put_helper(C, helper, t);
    sbuf_putc(C->b, '(');
}

/* a * b + c with the rounding of LOP_FMA: one fused rounding for floats, wrapping for ints.
 * put_c prints c (an expression, or a reduce's accumulator). */
static void fma_text(cem *C, int t, int32_t a, int32_t b, void (*put_c)(cem *, int32_t), int32_t c) {
    if (isf(t)) {
        put_math(C, "fma", t);
        sbuf_putc(C->b, '(');
        expr(C, a);
        sbuf_puts(C->b, ", ");
        expr(C, b);
    } else {
        put_helper(C, "rj_add", t);
        sbuf_putc(C->b, '(');
        call2(C, HELPER("rj_mul"), t, a, b);
    }
    sbuf_puts(C->b, ", ");
    put_c(C, c);
    sbuf_putc(C->b, ')');
}

static void binary(cem *C, const lx *e) {
    const char *helper, *mid;
    if (binary_form(e->type, e->fn, &helper, &mid)) {
        open_form(C, helper, e->type);
        expr(C, e->a);
        sbuf_puts(C->b, mid);
        expr(C, e->b);
        sbuf_putc(C->b, ')');
    } else if (isf(e->type) && e->fn == RJ_OP_POW) {
        fpow(C, e);
    } else if (e->type != RJ_BOOL && e->fn == LOP_FMA) {
        fma_text(C, e->type, e->a, e->b, expr, e->c);
    } else {
        C->bad = true;
    }
}

static void compare(cem *C, const lx *e) {
    static const char *const ops[] = {"==", "!=", "<", "<=", ">", ">="};
    if (e->fn == RJ_OP_LOGICAL_AND || e->fn == RJ_OP_LOGICAL_OR) {
        infix(C, e->a, e->fn == RJ_OP_LOGICAL_AND ? "&&" : "||", e->b);
        return;
    }
    if (e->fn < RJ_OP_EQ || e->fn > RJ_OP_GE) {
        C->bad = true;
        return;
    }
    /* C's float comparisons are LLVM's ordered ones, and != is unordered (true for NaN); bools
     * compare as 0/1, i.e. unsigned */
    infix(C, e->a, ops[e->fn - RJ_OP_EQ], e->b);
}

static void cast(cem *C, int32_t id) {
    const lx *e = &C->k->ex[id];
    int to = e->type, from = C->k->ex[e->a].type;
    cval v;
    if (const_eval(C->k, id, &v)) { /* folded, as NVRTC would: "0.5f" reads better than a cast */
        if (isf(to)) put_float(C, to, v.f);
        else put_int(C, to, v.i);
        return;
    }
    if (to == RJ_BOOL) { /* != 0 is true for NaN too, as LLVM's une */
        sbuf_puts(C->b, "(");
        expr(C, e->a);
        sbuf_puts(C->b, from == RJ_F32 ? " != 0.0f)" : from == RJ_F64 ? " != 0.0)" : " != 0)");
        return;
    }
    if (!isf(to) && isf(from)) {
        call1(C, HELPER(to == RJ_I32 ? "rj_to_i32" : "rj_to_i64"), from, e->a);
        return;
    }
    /* the rest are exact C conversions: int/bool -> float rounds to nearest, float widening or
     * narrowing rounds to nearest, bool -> int is 0/1, i64 -> i32 keeps the low bits (NVCC
     * and OpenCL's clang define the out-of-range signed conversion as modular) */
    sbuf_printf(C->b, "(%s)(", ctype(C, to));
    expr(C, e->a);
    sbuf_putc(C->b, ')');
}

static void expr(cem *C, int32_t id) {
    int32_t temp = lx_binder_name(&C->bd, id);
    if (temp >= 0) {
        sbuf_printf(C->b, "t%d", (int)temp);
        return;
    }
    const lx *e = &C->k->ex[id];
    double folded;
    if ((e->kind == LX_BINARY || e->kind == LX_UNARY) && fold_float(C->k, id, &folded)) {
        put_float(C, e->type, folded);
        return;
    }
    switch (e->kind) {
    case LX_CONST:
        if (isf(e->type)) put_float(C, e->type, e->f);
        else put_int(C, e->type, e->i);
        break;
    case LX_PARAM: put_param(C, e->ref); break;
    case LX_VAR: put_var(C, e->ref); break;
    case LX_LOAD:
        if (e->b >= 0) { /* the load happens only when the guard holds */
            sbuf_putc(C->b, '(');
            expr(C, e->b);
            sbuf_puts(C->b, " ? ");
            load(C, e);
            sbuf_puts(C->b, " : ");
            expr(C, e->c);
            sbuf_putc(C->b, ')');
        } else {
            load(C, e);
        }
        break;
    case LX_UNARY: unary(C, e); break;
    case LX_BINARY: binary(C, e); break;
    case LX_CMP: compare(C, e); break;
    case LX_SELECT:
        sbuf_putc(C->b, '(');
        expr(C, e->a);
        sbuf_puts(C->b, " ? ");
        expr(C, e->b);
        sbuf_puts(C->b, " : ");
        expr(C, e->c);
        sbuf_putc(C->b, ')');
        break;
    case LX_CAST: cast(C, id); break;
    default: C->bad = true; break;
    }
}

/* Worth a temporary: not a leaf, and not a cast of a constant (printed as a literal). */
static bool bindable(const lkernel *k, int32_t id) {
    const lx *e = &k->ex[id];
    cval v;
    if (e->kind == LX_CAST) return !const_eval(k, id, &v);
    return e->kind != LX_CONST && e->kind != LX_PARAM && e->kind != LX_VAR;
}

/* A float pow printed as x * x (or x * x * x) prints its operand more than once. */
static int32_t repeated(const lkernel *k, int32_t id) {
    pow_expansion x = pow_expansion_of(k, &k->ex[id]);
    return x == POWX_SQUARE || x == POWX_CUBE ? k->ex[id].a : -1;
}

/* The binder's callback: the temporary's definition, on its own line. */
static void bind_temp(void *ud, int32_t id, int32_t name) {
    cem *C = ud;
    indent(C);
    sbuf_printf(C->b, "const %s t%d = ", ctype(C, C->k->ex[id].type), (int)name);
    expr(C, id);
    sbuf_puts(C->b, ";\n");
}

/* Starts a statement whose expressions are roots[0..n). */
static void begin_stmt(cem *C, const int32_t *roots, int n) {
    lx_binder_stmt(&C->bd, roots, n);
}

/* ---- statements --------------------------------------------------------------------------- */

static void mark_set_vars(cem *C, int32_t s, uint8_t v) {
    for (; s >= 0; s = C->k->st[s].next) {
        const ls *st = &C->k->st[s];
        if (st->kind == LS_SET || st->kind == LS_REDUCE || st->kind == LS_FOR) C->vset[st->var] = v;
        if (st->kind == LS_FOR || st->kind == LS_IF) {
            mark_set_vars(C, st->body, v);
            mark_set_vars(C, st->els, v);
        }
    }
}

static bool reads_marked(const lkernel *k, int32_t id, void *ud) {
    const cem *C = ud;
    return k->ex[id].kind == LX_VAR && C->vset[k->ex[id].ref];
}

/* Does the loop's upper bound read a variable its body (or the loop itself) assigns? The loop
 * IR evaluates bounds once, C's `for` re-evaluates the condition each iteration. */
static bool bound_varies(cem *C, const ls *st) {
    C->vset[st->var] = 1;
    mark_set_vars(C, st->body, 1);
    bool r = lx_visit(C->k, st->b, reads_marked, C, C->seen, ++C->walk);
    C->vset[st->var] = 0;
    mark_set_vars(C, st->body, 0);
    return r;
}

/* ---- groups: lanes loops across threads ---------------------------------------------------
 *
 * A kernel whose launch shape has groups of G > 1 threads spreads the iterations of each lanes
 * loop across the G threads of the group (thread l of the group: iterations l, l + G, ...,
 * rj_lane being l), and every `reduce` inside such a loop accumulates a partial value per
 * thread that the group combines after the loop: with warp shuffles (a butterfly, so that
 * every thread ends with the same bits: each level combines a and b in one thread and b and a
 * in its partner, and the ops are commutative), or through block-shared memory (a tree with a
 * barrier per level) where the spelling has no shuffles, in which case the group is the whole
 * block. The accumulator's value before the loop is set aside and folded in once at the end,
 * so each thread starts from the identity. */

#define MAX_LANE_REDUCES 16

typedef struct lane_red {
    int32_t var;
    uint16_t fn;
} lane_red;

/* The distinct accumulators the reduces inside block s (and below) update, with their ops. */
static void collect_reduces(cem *C, int32_t s, lane_red *r, int *n) {
    for (; s >= 0; s = C->k->st[s].next) {
        const ls *st = &C->k->st[s];
        if (st->kind == LS_REDUCE) {
            uint16_t fn = (st->flags & LF_FMA) ? RJ_OP_ADD : st->fn;
            int i = 0;
            while (i < *n && r[i].var != st->var) i++;
            if (i < *n) {
                if (r[i].fn != fn) C->bad = true; /* one accumulator, two ops */
            } else if (*n == MAX_LANE_REDUCES) {
                C->bad = true;
            } else {
                r[(*n)++] = (lane_red){st->var, fn};
            }
        }
        if (st->kind == LS_FOR || st->kind == LS_IF) {
            collect_reduces(C, st->body, r, n);
            collect_reduces(C, st->els, r, n);
        }
    }
}

/* The identity of reduction fn in type t. */
static void put_identity(cem *C, int t, int fn) {
    op_identity_value id = op_identity(fn, (rj_dtype)t, true); /* the threads' partials */
    if (isf(t)) put_float(C, t, id.f);
    else put_int(C, t, id.i);
}

/* "v = fn(v, <text of other>)": the caller prints the other operand between the two calls. */
static void open_combine(cem *C, int32_t var, int fn) {
    const char *helper, *mid;
    int t = C->k->vars[var].type;
    indent(C);
    put_var(C, var);
    sbuf_puts(C->b, " = ");
    if (!binary_form(t, fn, &helper, &mid)) {
        C->bad = true;
        return;
    }
    open_form(C, helper, t);
    put_var(C, var);
    sbuf_puts(C->b, mid);
}

/* The group's partial values of r combined into every thread. */
static void combine_group(cem *C, const lane_red *r) {
    sbuf *b = C->b;
    int t = C->k->vars[r->var].type;
    if (C->shuffle) {
        indent(C);
        sbuf_printf(b, "for (int rj_o = %d; rj_o > 0; rj_o >>= 1)\n", (int)C->group / 2);
        C->depth++;
        open_combine(C, r->var, r->fn);
        if (t == RJ_BOOL) sbuf_printf(b, "(%s(rj_mask, (int)", C->sp->shuffle);
        else sbuf_printf(b, "%s(rj_mask, ", C->sp->shuffle);
        put_var(C, r->var);
        sbuf_printf(b, ", rj_o, %d)%s);\n", (int)C->group, t == RJ_BOOL ? " != 0)" : "");
        C->depth--;
        return;
    }
    const char *sfx = type_suffix[t] ? type_suffix[t] : "_b8";
    indent(C);
    sbuf_printf(b, "rj_red%s[rj_lane] = ", sfx);
    put_var(C, r->var);
    sbuf_printf(b, ";\n");
    indent(C);
    sbuf_printf(b, "%s\n", C->sp->barrier);
    indent(C);
    sbuf_printf(b, "for (int rj_o = %d; rj_o > 0; rj_o >>= 1) {\n", (int)C->group / 2);
    C->depth++;
    indent(C);
    sbuf_puts(b, "if (rj_lane < rj_o) {\n");
    C->depth++;
    indent(C);
    put_var(C, r->var);
    sbuf_printf(b, " = rj_red%s[rj_lane + rj_o];\n", sfx);
    open_combine(C, r->var, r->fn);
    sbuf_printf(b, "rj_red%s[rj_lane]);\n", sfx);
    indent(C);
    sbuf_printf(b, "rj_red%s[rj_lane] = ", sfx);
    put_var(C, r->var);
    sbuf_puts(b, ";\n");
    C->depth--;
    indent(C);
    sbuf_puts(b, "}\n");
    indent(C);
    sbuf_printf(b, "%s\n", C->sp->barrier);
    C->depth--;
    indent(C);
    sbuf_puts(b, "}\n");
    indent(C);
    put_var(C, r->var);
    sbuf_printf(b, " = rj_red%s[0];\n", sfx);
    indent(C);
    sbuf_printf(b, "%s\n", C->sp->barrier);
}

/* Block-shared arrays for the reductions of a kernel without shuffles: one per type. */
static void declare_group_arrays(cem *C) {
    const lkernel *k = C->k;
    if (C->group <= 1 || C->shuffle) return;
    bool used[RJ_DTYPE_COUNT] = {false};
    for (int32_t i = 0; i < k->nst; i++)
        if (k->st[i].kind == LS_REDUCE && k->st[i].var >= 0 && k->st[i].var < k->nvars)
            used[k->vars[k->st[i].var].type] = true;
    for (int t = 0; t < RJ_DTYPE_COUNT; t++) {
        if (!used[t]) continue;
        sbuf_printf(C->b, "    %s%s rj_red%s[%d];\n", C->sp->shared, mtype(C, t),
                    type_suffix[t] ? type_suffix[t] : "_b8", (int)C->group);
    }
}

/* A condition inside if ( ): without the parentheses a comparison prints with, which
 * compilers warn about (-Wparentheses-equality). */
static void cond_text(cem *C, int32_t id) {
    sbuf *b = C->b;
    size_t at = b->len;
    expr(C, id);
    if (b->failed || b->len < at + 2 || b->s[at] != '(' || b->s[b->len - 1] != ')') return;
    int depth = 0;
    for (size_t i = at; i < b->len; i++) {
        depth += b->s[i] == '(' ? 1 : b->s[i] == ')' ? -1 : 0;
        if (depth == 0 && i + 1 < b->len) return; /* "(a) && (b)": not one parenthesis */
    }
    memmove(b->s + at, b->s + at + 1, b->len - at - 2);
    b->len -= 2;
    b->s[b->len] = 0;
}

static void block(cem *C, int32_t s);

static void stmt(cem *C, const ls *st) {
    const lkernel *k = C->k;
    sbuf *b = C->b;
    switch (st->kind) {
    case LS_FOR: {
        int32_t roots[2] = {st->a, st->b};
        bool hoist = bound_varies(C, st);
        begin_stmt(C, roots, 2);
        int end = -1;
        if (hoist) {
            end = C->bd.count++;
            indent(C);
            sbuf_printf(b, "const %s t%d = ", C->sp->i64, end);
            expr(C, st->b);
            sbuf_puts(b, ";\n");
        }
        bool spread = st->map == LM_LANES && C->group > 1;
        lane_red red[MAX_LANE_REDUCES];
        int nred = 0, first = C->nred;
        if (spread) collect_reduces(C, st->body, red, &nred);
        for (int i = 0; i < nred; i++) { /* set aside what the accumulator holds */
            int t = k->vars[red[i].var].type;
            indent(C);
            sbuf_printf(b, "const %s rj_r%d = ", ctype(C, t), first + i);
            put_var(C, red[i].var);
            sbuf_puts(b, ";\n");
            indent(C);
            put_var(C, red[i].var);
            sbuf_puts(b, " = ");
            put_identity(C, t, red[i].fn);
            sbuf_puts(b, ";\n");
        }
        C->nred += nred;
        indent(C);
        sbuf_puts(b, "for (");
        put_var(C, st->var);
        sbuf_puts(b, " = ");
        expr(C, st->a);
        if (spread) sbuf_puts(b, " + rj_lane");
        sbuf_puts(b, "; ");
        put_var(C, st->var);
        sbuf_puts(b, " < ");
        if (hoist) sbuf_printf(b, "t%d", end);
        else expr(C, st->b);
        sbuf_puts(b, "; ");
        put_var(C, st->var);
        if (spread) sbuf_printf(b, " += %d) {\n", (int)C->group);
        else sbuf_puts(b, "++) {\n");
        C->depth++;
        block(C, st->body);
        C->depth--;
        indent(C);
        sbuf_puts(b, "}\n");
        for (int i = 0; i < nred; i++) {
            combine_group(C, &red[i]);
            open_combine(C, red[i].var, red[i].fn);
            sbuf_printf(b, "rj_r%d);\n", first + i);
        }
        break;
    }
    case LS_IF:
        begin_stmt(C, &st->a, 1);
        indent(C);
        sbuf_puts(b, "if (");
        cond_text(C, st->a);
        sbuf_puts(b, ") {\n");
        C->depth++;
        block(C, st->body);
        C->depth--;
        indent(C);
        if (st->els >= 0) {
            sbuf_puts(b, "} else {\n");
            C->depth++;
            block(C, st->els);
            C->depth--;
            indent(C);
        }
        sbuf_puts(b, "}\n");
        break;
    case LS_SET:
        if (!C->vread[st->var]) break;
        begin_stmt(C, &st->a, 1);
        indent(C);
        put_var(C, st->var);
        sbuf_puts(b, " = ");
        expr(C, st->a);
        sbuf_puts(b, ";\n");
        break;
    case LS_REDUCE: { /* v = v fn e, as binary() prints fn(v, e) */
        int32_t roots[2];
        begin_stmt(C, roots, ls_exprs(st, roots));
        indent(C);
        put_var(C, st->var);
        sbuf_puts(b, " = ");
        int t = k->vars[st->var].type;
        const char *helper, *mid;
        if (st->flags & LF_FMA) {
            if (t == RJ_BOOL) C->bad = true;
            else fma_text(C, t, st->a, st->b, put_var, st->var);
        } else if (binary_form(t, st->fn, &helper, &mid)) {
            open_form(C, helper, t);
            put_var(C, st->var);
            sbuf_puts(b, mid);
            expr(C, st->a);
            sbuf_putc(b, ')');
        } else {
            C->bad = true;
        }
        sbuf_puts(b, ";\n");
        break;
    }
    case LS_BARRIER:
        indent(C);
        sbuf_printf(b, "%s\n", C->sp->barrier);
        break;
    case LS_STORE: {
        int32_t roots[2] = {st->a, st->b};
        begin_stmt(C, roots, 2);
        indent(C);
        if (st->flags & LF_ATOMIC_MIN) { /* the index checks' first bad position */
            sbuf_printf(b, "%s&", C->sp->atomic_min64[0]);
            put_mem(C, st->mem, st->ref);
            sbuf_putc(b, '[');
            expr(C, st->a);
            sbuf_printf(b, "], %s(", C->sp->atomic_min64[1]);
            expr(C, st->b);
            sbuf_puts(b, "));\n");
            break;
        }
        put_mem(C, st->mem, st->ref);
        sbuf_putc(b, '[');
        expr(C, st->a);
        sbuf_puts(b, "] = ");
        bool bl = (st->mem == MEM_LOCAL ? k->locals[st->ref].dtype : k->params[st->ref].dtype) == RJ_BOOL;
        if (bl) sbuf_puts(b, "(unsigned char)");
        expr(C, st->b);
        sbuf_puts(b, ";\n");
        break;
    }
    default: C->bad = true; break;
    }
}

static void block(cem *C, int32_t s) {
    for (; s >= 0 && !C->bad; s = C->k->st[s].next) stmt(C, &C->k->st[s]);
}

/* ---- kernels ------------------------------------------------------------------------------ */

static bool mark_read(const lkernel *k, int32_t id, void *ud) {
    cem *C = ud;
    if (k->ex[id].kind == LX_VAR) C->vread[k->ex[id].ref] = 1;
    return false;
}

/* Marks the variables the statements read (and loop variables, and what a reduce updates)
 * in vread; one walk for the kernel, so each expression is visited once. */
static void mark_reads(cem *C, int32_t s) {
    for (; s >= 0; s = C->k->st[s].next) {
        const ls *st = &C->k->st[s];
        int32_t ex[2];
        int n = ls_exprs(st, ex);
        for (int i = 0; i < n; i++) lx_visit(C->k, ex[i], mark_read, C, C->seen, C->walk);
        if (st->kind == LS_FOR || st->kind == LS_REDUCE) C->vread[st->var] = 1;
        if (st->kind == LS_FOR || st->kind == LS_IF) {
            mark_reads(C, st->body);
            mark_reads(C, st->els);
        }
    }
}

static const char *const domain_text[] = {"logical rows of a ragged class",
                                          "(item, inner tile) pairs of a ragged class",
                                          "flattened dense indices",
                                          "(piece of an item, inner tile) pairs of a ragged class"};

static int32_t find_param(const lkernel *k, int kind, int32_t ref) {
    for (int32_t i = 0; i < k->nparams; i++)
        if (k->params[i].kind == kind && (ref < 0 || k->params[i].ref == ref)) return i;
    return -1;
}

static bool is_identifier(const char *s) {
    if (!*s || (*s >= '0' && *s <= '9')) return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return false;
    return true;
}

static void signature(cem *C) {
    const lkernel *k = C->k;
    sbuf *b = C->b;
    const spelling *sp = C->sp;
    sbuf_puts(b, sp->kernel);
    /* registers for half the multiprocessor's 2048 threads: enough warps to keep loads in
     * flight, and 64 registers per thread at 256 threads a block (full occupancy would allow
     * 32, and ptxas then spills the math functions' slow paths); a kernel writing many
     * buffers at once (a fused fan-out) keeps many values live, and gets twice that, as does
     * a product's loop around inlined producers (lkernel.heavy) */
    int nbuf = 0;
    for (int32_t i = 0; i < k->nparams; i++) nbuf += k->params[i].kind == PK_BUF;
    int threads = nbuf > 16 || k->heavy ? 512 : 1024;
    if (sp->bounds && k->launch.simt && k->launch.block > 0)
        sbuf_printf(b, sp->bounds, (int)k->launch.block,
                    k->launch.block >= threads ? 1 : (int)(threads / k->launch.block));
    sbuf_printf(b, "%s(", k->name);
    for (int32_t i = 0; i < k->nparams; i++) {
        const lparam *p = &k->params[i];
        sbuf_puts(b, i ? ",\n        " : "");
        switch (p->kind) {
        case PK_BUF:
            sbuf_printf(b, "%s%s%s *%s", sp->global, p->written ? "" : "const ", mtype(C, p->dtype), sp->restrict_kw);
            put_param(C, i);
            break;
        case PK_OFF:
        case PK_LOFF:
        case PK_PITEM:
        case PK_PSTART:
        case PK_SQOFF:
            sbuf_printf(b, "%sconst %s *%s", sp->global, sp->i64, sp->restrict_kw);
            put_param(C, i);
            break;
        case PK_ERR:
            sbuf_printf(b, "%sconst %s *", sp->global, sp->u32);
            put_param(C, i);
            break;
        case PK_SCRATCH:
            sbuf_printf(b, "%s%s *%s", sp->global, mtype(C, p->dtype), sp->restrict_kw);
            put_param(C, i);
            sbuf_printf(b, "_base, %s ", sp->i64);
            put_param(C, i);
            sbuf_puts(b, "_stride");
            break;
        case PK_LO:
        case PK_HI:
        case PK_BLO:
        case PK_BHI:
            sbuf_printf(b, "%s ", sp->i64);
            put_param(C, i);
            sbuf_puts(b, "_all");
            break;
        default:
            sbuf_printf(b, "%s ", sp->i64);
            put_param(C, i);
            break;
        }
    }
    sbuf_puts(b, ")\n");
}

/* The thread's slice of the launch: shadows lo/hi (and blo/bhi, scratch). */
static bool prologue(cem *C) {
    const lkernel *k = C->k;
    sbuf *b = C->b;
    int32_t lo = find_param(k, PK_LO, -1), hi = find_param(k, PK_HI, -1);
    int32_t blo = find_param(k, PK_BLO, -1), bhi = find_param(k, PK_BHI, -1);
    const spelling *sp = C->sp;
    const char *i64 = sp->i64;
    int32_t err = find_param(k, PK_ERR, -1);
    if (err >= 0) { /* the run's device offsets failed their check: touch nothing */
        sbuf_puts(b, "    if (");
        put_param(C, err);
        sbuf_puts(b, " && *");
        put_param(C, err);
        sbuf_puts(b, " != 0xffffffffu) return;\n");
    }
    if (C->group <= 1) {
        sbuf_printf(b, "    const %s rj_tid = (%s)%s * %s + %s;\n", i64, i64, sp->group_id, sp->local_size,
                    sp->local_id);
        sbuf_printf(b, "    const %s rj_nth = (%s)%s * %s;\n", i64, i64, sp->num_groups, sp->local_size);
    } else { /* rj_tid, rj_nth: the group and the number of groups; rj_lane: the thread in it */
        sbuf_printf(b, "    const %s rj_gtid = (%s)%s * %s + %s;\n", i64, i64, sp->group_id, sp->local_size,
                    sp->local_id);
        sbuf_printf(b, "    const %s rj_tid = rj_gtid / %d;\n", i64, (int)C->group);
        sbuf_printf(b, "    const %s rj_lane = rj_gtid %% %d;\n", i64, (int)C->group);
        sbuf_printf(b, "    const %s rj_nth = (%s)%s * %s / %d;\n", i64, i64, sp->num_groups, sp->local_size,
                    (int)C->group);
        if (C->shuffle && C->group >= 32)
            sbuf_puts(b, "    const unsigned rj_mask = 0xffffffffu;\n");
        else if (C->shuffle) /* the group's lanes of its warp */
            sbuf_printf(b, "    const unsigned rj_mask = ((1u << %d) - 1u) << ((unsigned)rj_gtid & %uu);\n",
                        (int)C->group, 31u & ~(unsigned)(C->group - 1));
    }
    if (lo >= 0 && hi >= 0) {
        sbuf_printf(b, "    const %s rj_n = ", i64);
        put_param(C, hi);
        sbuf_puts(b, "_all - ");
        put_param(C, lo);
        sbuf_puts(b, "_all;\n    if (rj_n <= 0) return;\n");
        sbuf_printf(b, "    const %s rj_chunk = (rj_n + rj_nth - 1) / rj_nth;\n", i64);
        for (int w = 0; w < 2; w++) {
            sbuf_printf(b, "    const %s ", i64);
            put_param(C, w ? hi : lo);
            sbuf_puts(b, " = ");
            put_param(C, lo);
            sbuf_puts(b, "_all + ");
            put_helper(C, "rj_min", RJ_I64);
            sbuf_puts(b, w ? "((rj_tid + 1) * rj_chunk, rj_n);\n" : "(rj_tid * rj_chunk, rj_n);\n");
        }
        sbuf_puts(b, "    if (");
        put_param(C, lo);
        sbuf_puts(b, " >= ");
        put_param(C, hi);
        sbuf_puts(b, ") return;\n");
    } else {
        if (lo >= 0 || hi >= 0 || blo >= 0 || bhi >= 0) return false;
        sbuf_puts(b, "    if (rj_tid != 0) return; // no unit range: one thread runs it all\n");
    }
    if (blo >= 0 || bhi >= 0) {
        int32_t loff = k->domain == UD_ROWS ? find_param(k, PK_LOFF, k->dom_class) : -1;
        if (blo < 0 || bhi < 0 || loff < 0) return false;
        for (int w = 0; w < 2; w++) {
            sbuf_printf(b, "    const %s ", i64);
            put_param(C, w ? bhi : blo);
            sbuf_printf(b, " = %s(", w ? "rj_lower_item" : "rj_upper_item");
            put_param(C, loff);
            sbuf_puts(b, ", ");
            put_param(C, blo);
            sbuf_puts(b, "_all, ");
            put_param(C, bhi);
            sbuf_puts(b, "_all, ");
            put_param(C, w ? hi : lo);
            sbuf_puts(b, ");\n");
        }
    }
    for (int32_t i = 0; i < k->nparams; i++) {
        if (k->params[i].kind != PK_SCRATCH) continue;
        sbuf_printf(b, "    %s%s *const ", sp->global, mtype(C, k->params[i].dtype));
        put_param(C, i);
        sbuf_puts(b, " = ");
        put_param(C, i);
        sbuf_puts(b, "_base + rj_tid * ");
        put_param(C, i);
        sbuf_puts(b, "_stride;\n");
    }
    return true;
}

/* Locals the kernel declares itself: per-thread arrays, and block-shared ones for block scope.
 * A block-scope local cannot live in per-thread scratch: false for the inconsistency. */
static bool declare_locals(cem *C) {
    const lkernel *k = C->k;
    for (int32_t l = 0; l < k->nlocals; l++) {
        const llocal *lc = &k->locals[l];
        if (lc->param >= 0) {
            if (lc->scope == LL_BLOCK) return false;
            continue;
        }
        sbuf_printf(C->b, "    %s%s ", lc->scope == LL_BLOCK ? C->sp->shared : "", mtype(C, lc->dtype));
        put_mem(C, MEM_LOCAL, l);
        sbuf_printf(C->b, "[%lld];\n", (long long)lc->elems);
    }
    return true;
}

static bool kernel(cem *C, const lkernel *k) {
    sbuf *b = C->b;
    C->k = k;
    C->depth = 1;
    C->group = k->launch.simt && k->launch.group > 1 ? k->launch.group : 1;
    C->shuffle = C->sp->shuffle && C->group <= 32;
    C->nred = 0;
    size_t ne = (size_t)(k->nex ? k->nex : 1), nv = (size_t)(k->nvars ? k->nvars : 1);
    bool ok = lx_binder_init(&C->bd, C->ctx, k);
    C->bd.lazy_guards = true;
    C->bd.bindable = bindable;
    C->bd.repeated = repeated;
    C->bd.bind = bind_temp;
    C->bd.ud = C;
    C->seen = mem_zalloc(C->ctx, sizeof(uint32_t) * ne);
    C->vset = mem_zalloc(C->ctx, nv);
    C->vread = mem_zalloc(C->ctx, nv);
    C->walk = 0;
    ok = ok && C->seen && C->vset && C->vread;
    bool shape = true;
    if (ok) {
        sbuf_puts(b, "\n// ");
        put_comment_text(b, k->name);
        sbuf_puts(b, ": ");
        put_comment_text(b, k->what);
        sbuf_printf(b, "\n// units: %s\n", domain_text[k->domain <= UD_PIECES ? k->domain : UD_DENSE]);
        signature(C);
        sbuf_puts(b, "{\n");
        shape = prologue(C) && declare_locals(C);
        declare_group_arrays(C);
        /* only variables something reads are declared: NVRTC warns about the others, and
         * assignments to them are dropped (pure expressions, nothing else changes) */
        C->walk++;
        mark_reads(C, k->body);
        for (int32_t v = 0; v < k->nvars; v++) {
            if (!C->vread[v]) continue;
            sbuf_printf(b, "    %s ", ctype(C, k->vars[v].type));
            put_var(C, v);
            sbuf_puts(b, " = 0;\n");
        }
        if (shape) block(C, k->body);
        sbuf_puts(b, "}\n");
    }
    lx_binder_free(&C->bd);
    mem_free(C->ctx, C->seen, sizeof(uint32_t) * ne);
    mem_free(C->ctx, C->vset, nv);
    mem_free(C->ctx, C->vread, nv);
    if (!ok) return false; /* out of memory: recorded by mem_alloc */
    if (!shape) {
        ctx_fail(C->ctx, RJ_ERR_INTERNAL, "%s emit: kernel %s has an inconsistent unit range "
                 "(lo/hi/blo/bhi/offsets parameters) or a block-scope local in scratch", C->sp->lang,
                 k->name);
        return false;
    }
    if (C->bad) {
        ctx_fail(C->ctx, RJ_ERR_INTERNAL, "%s emit: kernel %s uses an operation the %s "
                 "backend does not implement", C->sp->lang, k->name, C->sp->lang);
        return false;
    }
    return true;
}

/* Declarations and non-constant expressions: a constant is printed as a literal, which a cast
 * to f32 folds into a float literal and an f64 operation makes visible through its own type. */
bool simt_uses_f64(const lprog *p) {
    for (int32_t ki = 0; ki < p->nkernels; ki++) {
        const lkernel *k = &p->kernels[ki];
        cval v;
        for (int32_t i = 0; i < k->nparams; i++)
            if ((k->params[i].kind == PK_BUF || k->params[i].kind == PK_SCRATCH) && k->params[i].dtype == RJ_F64)
                return true;
        for (int32_t i = 0; i < k->nvars; i++)
            if (k->vars[i].type == RJ_F64) return true;
        for (int32_t i = 0; i < k->nlocals; i++)
            if (k->locals[i].dtype == RJ_F64) return true;
        for (int32_t i = 0; i < k->nex; i++)
            if (k->ex[i].type == RJ_F64 && k->ex[i].kind != LX_CONST && !const_eval(k, i, &v)) return true;
    }
    return false;
}

static void check_kernel(sbuf *b, const spelling *sp);

static char *source(rj_ctx *ctx, const lprog *p, const spelling *sp) {
    if (!ctx) return NULL;
    if (!p) {
        ctx_fail(ctx, RJ_ERR_ARG, "%s emit: no program", sp->lang);
        return NULL;
    }
    sbuf b;
    sbuf_init(&b, ctx);
    cem C = {.ctx = ctx, .b = &b, .sp = sp};
    sbuf_puts(&b, sp->banner);
    sbuf_puts(&b, "//\n"
                  "// Launch: any 1-D grid. With T threads in all, thread t processes units\n"
                  "// [lo + t*c, lo + (t+1)*c) of [lo, hi), c = ceil((hi - lo) / T).\n"
                  "// Parameters: one per loop-IR parameter, in order, named p<index>_<name>, except:\n"
                  "//   lo/hi/blo/bhi arrive as <name>_all: the bounds of the whole launch (blo/bhi\n"
                  "//     are recomputed per thread by binary search in the logical offsets);\n"
                  "//   a scratch pointer arrives as <name>_base followed by <name>_stride (elements\n"
                  "//     per thread): thread t uses <name>_base + t * <name>_stride;\n"
                  "//   nt (streaming stores) is ignored.\n"
                  "// bool is stored as one byte (0 or 1); offsets and sizes are 64-bit.\n\n");
    put_preamble(&b, sp, sp->f64_always || simt_uses_f64(p));
    for (int32_t i = 0; i < p->nkernels; i++) {
        if (!is_identifier(p->kernels[i].name)) {
            sbuf_free(&b);
            ctx_fail(ctx, RJ_ERR_INTERNAL, "%s emit: kernel name '%s' is not an identifier", sp->lang,
                     p->kernels[i].name);
            return NULL;
        }
        if (!kernel(&C, &p->kernels[i])) {
            sbuf_free(&b);
            return NULL;
        }
    }
    check_kernel(&b, sp);
    return sbuf_finish(&b);
}

/* The device check of offsets (launch.c runs it before the kernels of a run whose offsets are
 * on the device and not trusted): item b's offsets checked as the host checks them, the first
 * bad item of symbol `sym` and what is wrong with it kept as min(8 b + code) in err[1 + sym],
 * and err[0] (the word every kernel reads, PK_ERR) set to 0; all start all ones.
 * Codes: 1 offsets[0] != 0, 2 the offsets decrease at b, 3 offsets[B] != rows, 4 item b is
 * longer than maxlen (when maxlen >= 0), 5 item b's length differs from ref's (a `same`
 * symbol's offsets, when ref is not NULL). */
static void check_kernel(sbuf *b, const spelling *sp) {
    const char *I = sp->i64, *G = sp->global;
    sbuf_printf(b, "\n// rj_check_offsets: the device check of a run's device offsets (see launch.c)\n");
    sbuf_printf(b, "%srj_check_offsets(%sconst %s *off, %sconst %s *ref, %s B, %s rows, %s maxlen, %s%s *err, %s sym)\n{\n",
                sp->kernel, G, I, G, I, I, I, I, G, sp->u32, I);
    sbuf_printf(b, "    const %s step = (%s)%s * %s;\n", I, I, sp->num_groups, sp->local_size);
    sbuf_printf(b, "    for (%s i = (%s)%s * %s + %s; i <= B; i += step) {\n", I, I, sp->group_id, sp->local_size,
                sp->local_id);
    sbuf_printf(b, "        %s code = 0;\n", sp->u32);
    sbuf_printf(b, "        if (i == 0 && off[0] != 0) code = 1;\n"
                   "        else if (i == B && off[B] != rows) code = 3;\n"
                   "        else if (i < B) {\n"
                   "            const %s len = off[i + 1] - off[i];\n"
                   "            if (len < 0) code = 2;\n"
                   "            else if (maxlen >= 0 && len > maxlen) code = 4;\n"
                   "            else if (ref && ref[i + 1] - ref[i] != len) code = 5;\n"
                   "        }\n", I);
    sbuf_printf(b, "        if (code) {\n            %s(err + 1 + sym, (%s)(i * 8) + code);\n            %s(err, 0u);\n"
                   "        }\n    }\n}\n", sp->atomic_min, sp->u32, sp->atomic_min);
}

char *cuda_source(rj_ctx *ctx, const lprog *p) { return source(ctx, p, &cuda_spelling); }

char *opencl_source(rj_ctx *ctx, const lprog *p) { return source(ctx, p, &opencl_spelling); }
