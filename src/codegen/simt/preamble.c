/*
 * preamble.c (SIMT) — the helpers every source starts with.
 *
 * What emit.c's list of semantics asks for and C does not give (wrapping integer arithmetic,
 * NaN-propagating maximum and minimum, saturating float -> int conversions, integer pow, ...)
 * is a small device function printed before the kernels, and ops.c's spellings call them.
 * Each helper is written once, as a template instantiated per type with the spelling's words,
 * so the CUDA and OpenCL sources cannot drift apart in semantics. The double-precision helpers
 * are printed where the spelling always prints them (CUDA) or the program computes in f64
 * (OpenCL, whose doubles need cl_khr_fp64). The preamble also has the binary searches that
 * give a thread its items of the logical offsets (kernel.c's prologue).
 */
#include "emit.h"

/* ---- the preamble ----------------------------------------------------------------------------
 * Helpers with the semantics listed at the top of emit.c, as templates: each is printed
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

/* The 16-bit formats (util/half.c's algorithms, in the kernels' language): bf16 is the top half
 * of an f32, rounded by adding 0x7FFF plus the lowest kept bit, NaN kept quiet; f16 rebiases the
 * exponent and rounds the same way, lets the FPU round subnormals (a + 0.5 in units of 2^-24)
 * and sends 65520 and above to inf. Integer operations only, so no header (cuda_fp16.h is not
 * on NVRTC's path) or extension (OpenCL's cl_khr_fp16) is needed. $B and $F are the bit casts
 * float -> unsigned int and back. */
static const char half_helpers[] =
    "// 16-bit floats: stored as their bits, computed in f32, rounded to nearest even on store\n"
    "RJ_DEV float rj_bf16_to_f32(unsigned short h) { return $F((unsigned int)h << 16); }\n"
    "RJ_DEV unsigned int rj_bf16_top(float f) {\n"
    "    unsigned int u = $B(f);\n"
    "    return (f != f ? (u | 0x400000u) : u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;\n"
    "}\n"
    "RJ_DEV unsigned short rj_f32_to_bf16(float f) { return (unsigned short)(rj_bf16_top(f) >> 16); }\n"
    "RJ_DEV float rj_round_bf16(float f) { return $F(rj_bf16_top(f)); }\n"
    "RJ_DEV float rj_f16_to_f32(unsigned short h) {\n"
    "    unsigned int s = (unsigned int)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;\n"
    "    if (e == 0) return $F($B((float)m * 5.9604644775390625e-8f) | s);\n"
    "    return $F(s | (e == 31 ? 0x7f800000u | (m << 13) : ((e + 112u) << 23) | (m << 13)));\n"
    "}\n"
    "RJ_DEV unsigned short rj_f32_to_f16(float f) {\n"
    "    unsigned int u = $B(f), s = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;\n"
    "    if (a > 0x7f800000u) return (unsigned short)(s | 0x7e00u | ((a >> 13) & 0x3ffu));\n"
    "    if (a >= 0x477ff000u) return (unsigned short)(s | 0x7c00u);\n"
    "    if (a < 0x38800000u) return (unsigned short)(s | ($B($F(a) + 0.5f) - 0x3f000000u));\n"
    "    return (unsigned short)(s | ((a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13));\n"
    "}\n"
    "RJ_DEV float rj_round_f16(float f) { return rj_f16_to_f32(rj_f32_to_f16(f)); }\n";

const char *const cem_type_suffix[RJ_DTYPE_COUNT] = {
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
        case 'N': sbuf_puts(b, sp->overloads || t < 0 ? "" : cem_type_suffix[t]); break;
        case 'L': sbuf_puts(b, f32 ? "f" : ""); break;
        case 'f': sbuf_puts(b, f32 && sp->math_f ? "f" : ""); break;
        case 'I': sbuf_puts(b, sp->i64); break;
        case 'l': sbuf_puts(b, sp->i64_lit); break;
        case 'G': sbuf_puts(b, sp->global); break;
        case 'B': sbuf_puts(b, sp->f32_as_uint); break;
        case 'F': sbuf_puts(b, sp->uint_as_f32); break;
        default: sbuf_putc(b, '$'), s--; break; /* not a placeholder: printed as it is */
        }
    }
}

/* The spelling's pragmas, then every helper (the f64 ones only where f64 holds). */
void cem_put_preamble(sbuf *b, const spelling *sp, bool f64, bool half) {
    static const int order[] = {RJ_F32, RJ_F64, RJ_I32, RJ_I64};
    static const int bit[] = {MF32, MF64, MI32, MI64};
    sbuf_puts(b, sp->prelude);
    if (f64) sbuf_puts(b, sp->prelude_f64);
    sbuf_puts(b, "// Helpers: the semantics of ragjit's CPU backend (see src/codegen/simt/emit.c).\n");
    sbuf_printf(b, "#define RJ_DEV %s\n", sp->dev);
    if (sp->nan_helpers[0]) sbuf_puts(b, sp->nan_helpers[0]);
    if (sp->nan_helpers[1] && f64) sbuf_puts(b, sp->nan_helpers[1]);
    if (half) expand(b, sp, half_helpers, -1);
    for (size_t i = 0; i < RJ_ARRAY_LEN(preamble); i++) {
        if (!preamble[i].mask) expand(b, sp, preamble[i].text, -1);
        for (int k = 0; k < 4; k++)
            if ((preamble[i].mask & bit[k]) && (order[k] != RJ_F64 || f64))
                expand(b, sp, preamble[i].text, order[k]);
    }
}
