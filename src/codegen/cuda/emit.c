/*
 * emit.c (CUDA) — loop IR to CUDA C.
 *
 * The CUDA backend prints the same loop IR the LLVM backend translates, as C++ that NVRTC
 * compiles: a fixed preamble of `__device__` helpers, then one `extern "C" __global__`
 * function per kernel (unmangled, so the driver finds it by the loop IR's kernel name). The
 * printer follows the LLVM emitter's semantics operation by operation rather than C's, which
 * differ in the corners that matter for a numerical oracle:
 *
 *   - integer add/sub/mul/neg wrap (rj_add...: unsigned arithmetic; signed overflow is UB in C
 *     and NVVM would exploit it), integer pow wraps and follows the negative-exponent rule of
 *     the CPU's mathlib (rj_ipow);
 *   - float maximum/minimum propagate NaN, relu(x) = x < 0 ? 0 : x, sgn = (x>0)-(x<0);
 *   - float -> int saturates with NaN -> 0 (llvm.fptosi.sat; a C cast would be UB);
 *   - bool is C++ `bool` in expressions and one byte in memory; add/max/or are ||,
 *     mul/min/and are && (short-circuiting a pure expression is harmless);
 *   - pow with a constant exponent of 1, 2, 3, 0.5 or -1 becomes the same multiply / sqrt /
 *     divide the LLVM emitter folds it to; LOP_FMA is fma(); everything else rounds per
 *     operation (NVRTC runs with --fmad=false, see nvrtc.c), so results match the CPU to the
 *     ulp-level differences of the math library.
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
 * any launch shape (GPU performance is not the goal of this backend yet).
 *
 * Parallel mappings. Today's lowering is CPU-shaped (each thread a chunk of units), so `units`,
 * `lanes` and `serial` loops are all ordinary loops of one thread; a `reduce` is the
 * accumulation v = v op e; `barrier` is __syncthreads(). A thread-scope local whose storage a
 * parameter passes in is that thread's slice of the scratch array; other locals are arrays of
 * their constant size, `__shared__` for block scope.
 *
 * Names. Loop-IR names come partly from the user (input names, symbols), so they can clash
 * with C++ keywords, with each other once sanitised, or with math functions. Every C name is
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

#include "cuda_backend.h"

/* ---- the preamble ----------------------------------------------------------------------------
 * Overloads per C type, so the printer can name one helper for every dtype. Only CUDA builtins
 * that NVRTC declares without any #include are used (expf, erff, __int_as_float, ...). */
static const char *const preamble[] = {
    "// Helpers: the semantics of ragjit's CPU backend (see src/codegen/cuda/emit.c).\n",
    "#define RJ_DEV __device__ __forceinline__\n",
    "// maximum/minimum: NaN if either operand is NaN\n",
    "RJ_DEV float rj_max(float a, float b) { return (a != a || b != b) ? a + b : (a > b ? a : b); }\n",
    "RJ_DEV double rj_max(double a, double b) { return (a != a || b != b) ? a + b : (a > b ? a : b); }\n",
    "RJ_DEV int rj_max(int a, int b) { return a > b ? a : b; }\n",
    "RJ_DEV long long rj_max(long long a, long long b) { return a > b ? a : b; }\n",
    "RJ_DEV float rj_min(float a, float b) { return (a != a || b != b) ? a + b : (a < b ? a : b); }\n",
    "RJ_DEV double rj_min(double a, double b) { return (a != a || b != b) ? a + b : (a < b ? a : b); }\n",
    "RJ_DEV int rj_min(int a, int b) { return a < b ? a : b; }\n",
    "RJ_DEV long long rj_min(long long a, long long b) { return a < b ? a : b; }\n",
    "// integer arithmetic wraps (two's complement), as in LLVM\n",
    "RJ_DEV int rj_add(int a, int b) { return (int)((unsigned)a + (unsigned)b); }\n",
    "RJ_DEV long long rj_add(long long a, long long b) { return (long long)((unsigned long long)a + (unsigned long long)b); }\n",
    "RJ_DEV int rj_sub(int a, int b) { return (int)((unsigned)a - (unsigned)b); }\n",
    "RJ_DEV long long rj_sub(long long a, long long b) { return (long long)((unsigned long long)a - (unsigned long long)b); }\n",
    "RJ_DEV int rj_mul(int a, int b) { return (int)((unsigned)a * (unsigned)b); }\n",
    "RJ_DEV long long rj_mul(long long a, long long b) { return (long long)((unsigned long long)a * (unsigned long long)b); }\n",
    "RJ_DEV int rj_neg(int a) { return (int)(0u - (unsigned)a); }\n",
    "RJ_DEV long long rj_neg(long long a) { return (long long)(0ull - (unsigned long long)a); }\n",
    "RJ_DEV int rj_abs(int a) { return a < 0 ? rj_neg(a) : a; }\n",
    "RJ_DEV long long rj_abs(long long a) { return a < 0 ? rj_neg(a) : a; }\n",
    "RJ_DEV int rj_sgn(int x) { return (x > 0) - (x < 0); }\n",
    "RJ_DEV long long rj_sgn(long long x) { return (long long)((x > 0) - (x < 0)); }\n",
    "RJ_DEV float rj_sgn(float x) { return (float)(x > 0.0f) - (float)(x < 0.0f); }\n",
    "RJ_DEV double rj_sgn(double x) { return (double)(x > 0.0) - (double)(x < 0.0); }\n",
    "RJ_DEV int rj_relu(int x) { return x > 0 ? x : 0; }\n",
    "RJ_DEV long long rj_relu(long long x) { return x > 0 ? x : 0; }\n",
    "RJ_DEV float rj_relu(float x) { return x < 0.0f ? 0.0f : x; }\n",
    "RJ_DEV double rj_relu(double x) { return x < 0.0 ? 0.0 : x; }\n",
    "// integer pow: wraps; a negative exponent gives 1 for base 1, +-1 for base -1, else 0\n",
    "RJ_DEV int rj_ipow(int b, int e) {\n",
    "    if (e < 0) return b == 1 ? 1 : b == -1 ? ((e & 1) ? -1 : 1) : 0;\n",
    "    unsigned r = 1u, x = (unsigned)b;\n",
    "    for (; e; e >>= 1) { if (e & 1) r *= x; x *= x; }\n",
    "    return (int)r;\n",
    "}\n",
    "RJ_DEV long long rj_ipow(long long b, long long e) {\n",
    "    if (e < 0) return b == 1 ? 1 : b == -1 ? ((e & 1) ? -1 : 1) : 0;\n",
    "    unsigned long long r = 1ull, x = (unsigned long long)b;\n",
    "    for (; e; e >>= 1) { if (e & 1) r *= x; x *= x; }\n",
    "    return (long long)r;\n",
    "}\n",
    "// float -> int saturates, NaN -> 0 (llvm.fptosi.sat)\n",
    "RJ_DEV int rj_to_i32(float x) {\n",
    "    return x != x ? 0 : x <= -2147483648.0f ? (-2147483647 - 1) : x >= 2147483648.0f ? 2147483647 : (int)x;\n",
    "}\n",
    "RJ_DEV int rj_to_i32(double x) {\n",
    "    return x != x ? 0 : x <= -2147483648.0 ? (-2147483647 - 1) : x >= 2147483647.0 ? 2147483647 : (int)x;\n",
    "}\n",
    "RJ_DEV long long rj_to_i64(float x) {\n",
    "    if (x != x) return 0;\n",
    "    if (x <= -9223372036854775808.0f) return -9223372036854775807LL - 1;\n",
    "    return x >= 9223372036854775808.0f ? 9223372036854775807LL : (long long)x;\n",
    "}\n",
    "RJ_DEV long long rj_to_i64(double x) {\n",
    "    if (x != x) return 0;\n",
    "    if (x <= -9223372036854775808.0) return -9223372036854775807LL - 1;\n",
    "    return x >= 9223372036854775808.0 ? 9223372036854775807LL : (long long)x;\n",
    "}\n",
    "RJ_DEV float rj_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }\n",
    "RJ_DEV double rj_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }\n",
    "RJ_DEV float rj_silu(float x) { return x * rj_sigmoid(x); }\n",
    "RJ_DEV double rj_silu(double x) { return x * rj_sigmoid(x); }\n",
    "RJ_DEV float rj_gelu(float x) { return (0.5f * x) * (1.0f + erff(x * 0.707106781186547524f)); }\n",
    "RJ_DEV double rj_gelu(double x) { return (0.5 * x) * (1.0 + erf(x * 0.707106781186547524)); }\n",
    "RJ_DEV float rj_gelu_tanh(float x) {\n",
    "    return (0.5f * x) * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * ((x * x) * x))));\n",
    "}\n",
    "RJ_DEV double rj_gelu_tanh(double x) {\n",
    "    return (0.5 * x) * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * ((x * x) * x))));\n",
    "}\n",
    "RJ_DEV float rj_rsqrt(float x) { return 1.0f / sqrtf(x); }\n",
    "RJ_DEV double rj_rsqrt(double x) { return 1.0 / sqrt(x); }\n",
    "// items of a thread's row range: largest b in [lo, hi] with off[b] <= v, smallest with off[b] >= v\n",
    "RJ_DEV long long rj_upper_item(const long long *off, long long lo, long long hi, long long v) {\n",
    "    while (lo < hi) { long long mid = lo + (hi - lo + 1) / 2; if (off[mid] <= v) lo = mid; else hi = mid - 1; }\n",
    "    return lo;\n",
    "}\n",
    "RJ_DEV long long rj_lower_item(const long long *off, long long lo, long long hi, long long v) {\n",
    "    while (lo < hi) { long long mid = lo + (hi - lo) / 2; if (off[mid] >= v) hi = mid; else lo = mid + 1; }\n",
    "    return lo;\n",
    "}\n"};

/* ---- printer state ------------------------------------------------------------------------ */

typedef struct cem {
    rj_ctx *ctx;
    sbuf *b;
    const lkernel *k;
    lx_binder bd;    /* temporaries t<N> of the statement being printed */
    uint32_t *seen;  /* lx_visit's marks for the walks below (compared with walk) */
    uint32_t walk;
    uint8_t *vset;   /* per variable: set inside the loop being checked */
    uint8_t *vread;  /* per variable: read somewhere (declared) */
    int depth;
    bool bad;        /* an operation this printer does not know */
} cem;

static bool isf(int t) { return t == RJ_F32 || t == RJ_F64; }

static const char *ctype(int t) {
    switch (t) {
    case RJ_BOOL: return "bool";
    case RJ_I32: return "int";
    case RJ_I64: return "long long";
    case RJ_F32: return "float";
    default: return "double";
    }
}

/* In memory, bool is one byte. */
static const char *mtype(int t) { return t == RJ_BOOL ? "unsigned char" : ctype(t); }

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

static void put_float(sbuf *b, int t, double v) {
    char num[48];
    if (t == RJ_F32) {
        float f = (float)v;
        if (!isfinite(f)) { /* no literal for inf/nan: the exact bits */
            uint32_t bits;
            memcpy(&bits, &f, sizeof bits);
            sbuf_printf(b, "__int_as_float((int)0x%08xu)", (unsigned)bits);
            return;
        }
        fmt_float(num, sizeof num, f);
        sbuf_printf(b, signbit(f) ? "(%sf)" : "%sf", num);
        return;
    }
    if (!isfinite(v)) {
        uint64_t bits;
        memcpy(&bits, &v, sizeof bits);
        sbuf_printf(b, "__longlong_as_double((long long)0x%016llxull)", (unsigned long long)bits);
        return;
    }
    fmt_double(num, sizeof num, v);
    sbuf_printf(b, signbit(v) ? "(%s)" : "%s", num);
}

static void put_int(sbuf *b, int t, int64_t v) {
    if (t == RJ_BOOL) {
        sbuf_puts(b, v ? "true" : "false");
    } else if (t == RJ_I32) {
        int32_t x = (int32_t)(uint32_t)(uint64_t)v;
        if (x == INT32_MIN) sbuf_puts(b, "(-2147483647 - 1)");
        else sbuf_printf(b, x < 0 ? "(%d)" : "%d", (int)x);
    } else {
        if (v == INT64_MIN) sbuf_puts(b, "(-9223372036854775807LL - 1)");
        else sbuf_printf(b, v < 0 ? "(%lldLL)" : "%lldLL", (long long)v);
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

static void call1(cem *C, const char *fn, int32_t a) {
    sbuf_printf(C->b, "%s(", fn);
    expr(C, a);
    sbuf_putc(C->b, ')');
}

static void call2(cem *C, const char *fn, int32_t a, int32_t b) {
    sbuf_printf(C->b, "%s(", fn);
    expr(C, a);
    sbuf_puts(C->b, ", ");
    expr(C, b);
    sbuf_putc(C->b, ')');
}

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
    bool f32 = t == RJ_F32;
    const char *fn = NULL;
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
        if (!isf(t)) fn = "rj_neg";
        else {
            sbuf_puts(C->b, "(-");
            expr(C, e->a);
            sbuf_putc(C->b, ')');
            return;
        }
        break;
    case RJ_OP_ABS: fn = !isf(t) ? "rj_abs" : f32 ? "fabsf" : "fabs"; break;
    case RJ_OP_SGN: fn = "rj_sgn"; break;
    case RJ_OP_RELU: fn = "rj_relu"; break;
    default:
        if (!isf(t)) break;
        switch (e->fn) {
        case RJ_OP_GELU: fn = "rj_gelu"; break;
        case RJ_OP_GELU_TANH: fn = "rj_gelu_tanh"; break;
        case RJ_OP_SILU: fn = "rj_silu"; break;
        case RJ_OP_SIGMOID: fn = "rj_sigmoid"; break;
        case RJ_OP_TANH: fn = f32 ? "tanhf" : "tanh"; break;
        case RJ_OP_EXP: fn = f32 ? "expf" : "exp"; break;
        case RJ_OP_LOG: fn = f32 ? "logf" : "log"; break;
        case RJ_OP_SQRT: fn = f32 ? "sqrtf" : "sqrt"; break;
        case RJ_OP_RSQRT: fn = "rj_rsqrt"; break;
        case RJ_OP_SIN: fn = f32 ? "sinf" : "sin"; break;
        case RJ_OP_COS: fn = f32 ? "cosf" : "cos"; break;
        default: break;
        }
    }
    if (!fn) {
        C->bad = true;
        return;
    }
    call1(C, fn, e->a);
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
    case POWX_SQRT: call1(C, f32 ? "sqrtf" : "sqrt", e->a); return;
    case POWX_RECIP:
        sbuf_puts(C->b, f32 ? "(1.0f / " : "(1.0 / ");
        expr(C, e->a);
        sbuf_putc(C->b, ')');
        return;
    case POWX_NONE: break;
    }
    call2(C, f32 ? "powf" : "pow", e->a, e->b);
}

/* How fn(a, b) in type t prints: open, a, mid, b, ")". False for the ops printed otherwise
 * (float pow, fma) and for those this printer does not know. */
static bool binary_form(int t, int fn, const char **open, const char **mid) {
    const char *o = "(", *m = NULL;
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
        case RJ_OP_ADD: o = "rj_add("; break;
        case RJ_OP_SUB: o = "rj_sub("; break;
        case RJ_OP_MUL: o = "rj_mul("; break;
        case RJ_OP_MAXIMUM: o = "rj_max("; break;
        case RJ_OP_MINIMUM: o = "rj_min("; break;
        case RJ_OP_POW: o = "rj_ipow("; break;
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
        case RJ_OP_MAXIMUM: o = "rj_max(", m = ", "; break;
        case RJ_OP_MINIMUM: o = "rj_min(", m = ", "; break;
        default: break;
        }
    }
    *open = o;
    *mid = m;
    return m != NULL;
}

/* a * b + c with the rounding of LOP_FMA: one fused rounding for floats, wrapping for ints.
 * put_c prints c (an expression, or a reduce's accumulator). */
static void fma_text(cem *C, int t, int32_t a, int32_t b, void (*put_c)(cem *, int32_t), int32_t c) {
    if (isf(t)) {
        sbuf_puts(C->b, t == RJ_F32 ? "fmaf(" : "fma(");
        expr(C, a);
        sbuf_puts(C->b, ", ");
        expr(C, b);
    } else {
        sbuf_puts(C->b, "rj_add(");
        call2(C, "rj_mul", a, b);
    }
    sbuf_puts(C->b, ", ");
    put_c(C, c);
    sbuf_putc(C->b, ')');
}

static void binary(cem *C, const lx *e) {
    const char *open, *mid;
    if (binary_form(e->type, e->fn, &open, &mid)) {
        sbuf_puts(C->b, open);
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
        if (isf(to)) put_float(C->b, to, v.f);
        else put_int(C->b, to, v.i);
        return;
    }
    if (to == RJ_BOOL) { /* != 0 is true for NaN too, as LLVM's une */
        sbuf_puts(C->b, "(");
        expr(C, e->a);
        sbuf_puts(C->b, from == RJ_F32 ? " != 0.0f)" : from == RJ_F64 ? " != 0.0)" : " != 0)");
        return;
    }
    if (!isf(to) && isf(from)) {
        call1(C, to == RJ_I32 ? "rj_to_i32" : "rj_to_i64", e->a);
        return;
    }
    /* the rest are exact C conversions: int/bool -> float rounds to nearest, float widening or
     * narrowing rounds to nearest, bool -> int is 0/1, i64 -> i32 keeps the low bits (NVCC
     * defines the out-of-range signed conversion as modular) */
    sbuf_printf(C->b, "(%s)(", ctype(to));
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
    switch (e->kind) {
    case LX_CONST:
        if (isf(e->type)) put_float(C->b, e->type, e->f);
        else put_int(C->b, e->type, e->i);
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
    sbuf_printf(C->b, "const %s t%d = ", ctype(C->k->ex[id].type), (int)name);
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
            sbuf_printf(b, "const long long t%d = ", end);
            expr(C, st->b);
            sbuf_puts(b, ";\n");
        }
        indent(C);
        sbuf_puts(b, "for (");
        put_var(C, st->var);
        sbuf_puts(b, " = ");
        expr(C, st->a);
        sbuf_puts(b, "; ");
        put_var(C, st->var);
        sbuf_puts(b, " < ");
        if (hoist) sbuf_printf(b, "t%d", end);
        else expr(C, st->b);
        sbuf_puts(b, "; ");
        put_var(C, st->var);
        sbuf_puts(b, "++) {\n");
        C->depth++;
        block(C, st->body);
        C->depth--;
        indent(C);
        sbuf_puts(b, "}\n");
        break;
    }
    case LS_IF:
        begin_stmt(C, &st->a, 1);
        indent(C);
        sbuf_puts(b, "if (");
        expr(C, st->a);
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
        const char *open, *mid;
        if (st->flags & LF_FMA) {
            if (t == RJ_BOOL) C->bad = true;
            else fma_text(C, t, st->a, st->b, put_var, st->var);
        } else if (binary_form(t, st->fn, &open, &mid)) {
            sbuf_puts(b, open);
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
        sbuf_puts(b, "__syncthreads();\n");
        break;
    case LS_STORE: {
        int32_t roots[2] = {st->a, st->b};
        begin_stmt(C, roots, 2);
        indent(C);
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
                                          "flattened dense indices"};

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
    sbuf_printf(b, "extern \"C\" __global__ void %s(", k->name);
    for (int32_t i = 0; i < k->nparams; i++) {
        const lparam *p = &k->params[i];
        sbuf_puts(b, i ? ",\n        " : "");
        switch (p->kind) {
        case PK_BUF:
            sbuf_printf(b, "%s%s *", p->written ? "" : "const ", mtype(p->dtype));
            put_param(C, i);
            break;
        case PK_OFF:
        case PK_LOFF:
            sbuf_puts(b, "const long long *");
            put_param(C, i);
            break;
        case PK_SCRATCH:
            sbuf_printf(b, "%s *", mtype(p->dtype));
            put_param(C, i);
            sbuf_puts(b, "_base, long long ");
            put_param(C, i);
            sbuf_puts(b, "_stride");
            break;
        case PK_LO:
        case PK_HI:
        case PK_BLO:
        case PK_BHI:
            sbuf_puts(b, "long long ");
            put_param(C, i);
            sbuf_puts(b, "_all");
            break;
        default:
            sbuf_puts(b, "long long ");
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
    sbuf_puts(b, "    const long long rj_tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n");
    sbuf_puts(b, "    const long long rj_nth = (long long)gridDim.x * blockDim.x;\n");
    if (lo >= 0 && hi >= 0) {
        sbuf_puts(b, "    const long long rj_n = ");
        put_param(C, hi);
        sbuf_puts(b, "_all - ");
        put_param(C, lo);
        sbuf_puts(b, "_all;\n    if (rj_n <= 0) return;\n");
        sbuf_puts(b, "    const long long rj_chunk = (rj_n + rj_nth - 1) / rj_nth;\n");
        sbuf_puts(b, "    const long long ");
        put_param(C, lo);
        sbuf_puts(b, " = ");
        put_param(C, lo);
        sbuf_puts(b, "_all + rj_min(rj_tid * rj_chunk, rj_n);\n");
        sbuf_puts(b, "    const long long ");
        put_param(C, hi);
        sbuf_puts(b, " = ");
        put_param(C, lo);
        sbuf_puts(b, "_all + rj_min((rj_tid + 1) * rj_chunk, rj_n);\n    if (");
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
            sbuf_puts(b, "    const long long ");
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
        sbuf_printf(b, "    %s *const ", mtype(k->params[i].dtype));
        put_param(C, i);
        sbuf_puts(b, " = ");
        put_param(C, i);
        sbuf_puts(b, "_base + rj_tid * ");
        put_param(C, i);
        sbuf_puts(b, "_stride;\n");
    }
    return true;
}

/* Locals the kernel declares itself: per-thread arrays, and __shared__ ones for block scope.
 * A block-scope local cannot live in per-thread scratch: false for the inconsistency. */
static bool declare_locals(cem *C) {
    const lkernel *k = C->k;
    for (int32_t l = 0; l < k->nlocals; l++) {
        const llocal *lc = &k->locals[l];
        if (lc->param >= 0) {
            if (lc->scope == LL_BLOCK) return false;
            continue;
        }
        sbuf_printf(C->b, "    %s%s ", lc->scope == LL_BLOCK ? "__shared__ " : "", mtype(lc->dtype));
        put_mem(C, MEM_LOCAL, l);
        sbuf_printf(C->b, "[%lld];\n", (long long)lc->elems);
    }
    return true;
}

static bool kernel(cem *C, const lkernel *k) {
    sbuf *b = C->b;
    C->k = k;
    C->depth = 1;
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
        sbuf_printf(b, "\n// units: %s\n", domain_text[k->domain <= UD_DENSE ? k->domain : UD_DENSE]);
        signature(C);
        sbuf_puts(b, "{\n");
        shape = prologue(C) && declare_locals(C);
        /* only variables something reads are declared: NVRTC warns about the others, and
         * assignments to them are dropped (pure expressions, nothing else changes) */
        C->walk++;
        mark_reads(C, k->body);
        for (int32_t v = 0; v < k->nvars; v++) {
            if (!C->vread[v]) continue;
            sbuf_printf(b, "    %s ", ctype(k->vars[v].type));
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
        ctx_fail(C->ctx, RJ_ERR_INTERNAL, "CUDA emit: kernel %s has an inconsistent unit range "
                 "(lo/hi/blo/bhi/offsets parameters) or a block-scope local in scratch", k->name);
        return false;
    }
    if (C->bad) {
        ctx_fail(C->ctx, RJ_ERR_INTERNAL, "CUDA emit: kernel %s uses an operation the CUDA "
                 "backend does not implement", k->name);
        return false;
    }
    return true;
}

char *cuda_source(rj_ctx *ctx, const lprog *p) {
    if (!ctx) return NULL;
    if (!p) {
        ctx_fail(ctx, RJ_ERR_ARG, "cuda_source: no program");
        return NULL;
    }
    sbuf b;
    sbuf_init(&b, ctx);
    cem C = {.ctx = ctx, .b = &b};
    sbuf_puts(&b, "// CUDA C generated by ragjit from the loop IR; compile with NVRTC.\n"
                  "//\n"
                  "// Launch: any 1-D grid. With T threads in all, thread t processes units\n"
                  "// [lo + t*c, lo + (t+1)*c) of [lo, hi), c = ceil((hi - lo) / T).\n"
                  "// Parameters: one per loop-IR parameter, in order, named p<index>_<name>, except:\n"
                  "//   lo/hi/blo/bhi arrive as <name>_all: the bounds of the whole launch (blo/bhi\n"
                  "//     are recomputed per thread by binary search in the logical offsets);\n"
                  "//   a scratch pointer arrives as <name>_base followed by <name>_stride (elements\n"
                  "//     per thread): thread t uses <name>_base + t * <name>_stride;\n"
                  "//   nt (streaming stores) is ignored.\n"
                  "// bool is stored as one byte (0 or 1); offsets and sizes are 64-bit.\n\n");
    for (size_t i = 0; i < RJ_ARRAY_LEN(preamble); i++) sbuf_puts(&b, preamble[i]);
    for (int32_t i = 0; i < p->nkernels; i++) {
        if (!is_identifier(p->kernels[i].name)) {
            sbuf_free(&b);
            ctx_fail(ctx, RJ_ERR_INTERNAL, "CUDA emit: kernel name '%s' is not an identifier",
                     p->kernels[i].name);
            return NULL;
        }
        if (!kernel(&C, &p->kernels[i])) {
            sbuf_free(&b);
            return NULL;
        }
    }
    return sbuf_finish(&b);
}
