/*
 * mathlib.c — vectorisable f32 math in LLVM IR.
 *
 * LLVM will not vectorise a loop that calls expf from libm (it has no vector library to map
 * the call to), and a softmax or gelu loop that runs scalar calls is an order of magnitude
 * off the memory wall. So exp, log, tanh and erfc for f32 are generated here as small
 * branch-free functions marked alwaysinline: after inlining they are plain arithmetic, selects
 * and bit casts, which the loop vectoriser handles like any other code. The same builders
 * take vectors: ml_call_vec gives the vector loops vector.c writes itself a variant of any
 * width with the scalar function's arithmetic on every lane.
 *
 * Algorithms (coefficients fitted for this project by weighted least squares; max error
 * measured against double-precision libm over every float by bench/mathulp, on the code the
 * JIT generates):
 *   exp   x = n ln2 + r, |r| <= ln2/2 (Cody-Waite split), e^r = 1 + r + r^2 P(r) of degree 6;
 *         with AVX-512, e^r by Horner's rule to the end and 2^n applied by vscalefps, results
 *         below the smallest normal float subnormal as in libm            (<= 0.97 ulp);
 *         elsewhere 2^n added to the result's exponent field as an integer, results below
 *         the smallest normal float flushed to 0                          (<= 1.08 ulp)
 *   log   x = 2^e m, m in [sqrt(1/2), sqrt(2)), log(1+f) = f - f^2/2 + f^3 Q(f) (<= 1.37 ulp)
 *   tanh  |x| < 0.625: x + x^3 T(x^2); else 1 - 2 / (e^{2|x|} + 1) with the sign   (<= 1.34 ulp)
 *   erfc  |x| < 1: 1 - x E(x^2); else e^{-x^2} G(1/x) / x (2 minus that below -1), G fitted
 *         to relative error up to |x| = 10.1, where erfc leaves the floats (gelu through it;
 *         sigmoid 1 / (1 + e^-x): <= 2.49 ulp; bench/mathulp gives the current numbers)
 * Special values: NaN propagates; exp(+-inf) = inf / 0 (and without AVX-512 exp(x < -87.34)
 * = 0: no subnormal results); log(0) = -inf, log(x < 0) = NaN. Softmax's terms use a variant
 * of exp that skips the checks their sums make (rj.expf.term, see build_exp).
 * Denormal inputs to log are rescaled by 2^23 first.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "llvm_backend.h"

static LLVMTypeRef f32(mathlib *ml) { return LLVMFloatTypeInContext(ml->c); }
static LLVMTypeRef i32(mathlib *ml) { return LLVMInt32TypeInContext(ml->c); }
static LLVMValueRef cf(mathlib *ml, double v) { return LLVMConstReal(f32(ml), v); }
static LLVMValueRef ci(mathlib *ml, long long v) { return LLVMConstInt(i32(ml), (unsigned long long)v, 1); }

LLVMValueRef ml_intrinsic(mathlib *ml, LLVMBuilderRef b, const char *name, LLVMValueRef *args,
                          unsigned n) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMTypeRef ty = LLVMTypeOf(args[0]);
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(ml->m, id, &ty, 1);
    LLVMTypeRef fty = LLVMIntrinsicGetType(ml->c, id, &ty, 1);
    return LLVMBuildCall2(b, fty, fn, args, n, "");
}

/* Saturating float -> int conversion has a second overloaded type (the result). */
static LLVMValueRef fptosi_sat(mathlib *ml, LLVMBuilderRef b, LLVMValueRef v, LLVMTypeRef to) {
    static const char name[] = "llvm.fptosi.sat";
    unsigned id = LLVMLookupIntrinsicID(name, sizeof name - 1);
    LLVMTypeRef tys[2] = {to, LLVMTypeOf(v)};
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(ml->m, id, tys, 2);
    LLVMTypeRef fty = LLVMIntrinsicGetType(ml->c, id, tys, 2);
    return LLVMBuildCall2(b, fty, fn, &v, 1, "");
}

LLVMValueRef ml_libm(mathlib *ml, LLVMBuilderRef b, const char *name, LLVMValueRef *args,
                     unsigned n) {
    LLVMTypeRef t = LLVMTypeOf(args[0]);
    LLVMTypeRef params[2] = {t, t};
    LLVMTypeRef fty = LLVMFunctionType(t, params, n, 0);
    LLVMValueRef fn = LLVMGetNamedFunction(ml->m, name);
    if (!fn) {
        fn = LLVMAddFunction(ml->m, name, fty);
        LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                                LLVMCreateEnumAttribute(ml->c, LLVMGetEnumAttributeKindForName("nounwind", 8), 0));
    }
    return LLVMBuildCall2(b, fty, fn, args, n, "");
}

static LLVMValueRef fma_(mathlib *ml, LLVMBuilderRef b, LLVMValueRef x, LLVMValueRef y, LLVMValueRef z) {
    LLVMValueRef a[3] = {x, y, z};
    return ml_intrinsic(ml, b, "llvm.fmuladd", a, 3);
}

static LLVMValueRef sel(LLVMBuilderRef b, LLVMValueRef c, LLVMValueRef t, LLVMValueRef f) {
    return LLVMBuildSelect(b, c, t, f, "");
}

static LLVMValueRef fcmp(LLVMBuilderRef b, LLVMRealPredicate p, LLVMValueRef x, LLVMValueRef y) {
    return LLVMBuildFCmp(b, p, x, y, "");
}

/* Starts an internal alwaysinline function of type ret(params...). */
static LLVMValueRef begin_fn(mathlib *ml, LLVMBuilderRef b, const char *name, LLVMTypeRef ret,
                             LLVMTypeRef *params, unsigned n, LLVMTypeRef *fty) {
    *fty = LLVMFunctionType(ret, params, n, 0);
    LLVMValueRef fn = LLVMAddFunction(ml->m, name, *fty);
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    static const char *const attrs[] = {"alwaysinline", "nounwind", "willreturn", "nosync", "nofree"};
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++)
        LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                                LLVMCreateEnumAttribute(ml->c, LLVMGetEnumAttributeKindForName(attrs[i], strlen(attrs[i])), 0));
    LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ml->c, fn, "entry"));
    return fn;
}

static void add_attr(mathlib *ml, LLVMValueRef fn, unsigned idx, const char *name, uint64_t v) {
    LLVMAddAttributeAtIndex(fn, idx, LLVMCreateEnumAttribute(ml->c, LLVMGetEnumAttributeKindForName(name, strlen(name)), v));
}

/* The builders below take a float or a vector of floats (a vector variant, ml_call_vec): the
 * type `like` shapes their constants and casts. */
static LLVMTypeRef shaped(LLVMValueRef like, LLVMTypeRef elem) {
    LLVMTypeRef t = LLVMTypeOf(like);
    return LLVMGetTypeKind(t) == LLVMVectorTypeKind ? LLVMVectorType(elem, LLVMGetVectorSize(t)) : elem;
}

LLVMValueRef ml_splat(LLVMValueRef c, unsigned n) {
    LLVMValueRef e[64];
    for (unsigned i = 0; i < n; i++) e[i] = c;
    return LLVMConstVector(e, n);
}

static LLVMValueRef splat_of(LLVMValueRef c, LLVMTypeRef ty) {
    return LLVMGetTypeKind(ty) == LLVMVectorTypeKind ? ml_splat(c, LLVMGetVectorSize(ty)) : c;
}

static LLVMValueRef kf(mathlib *ml, LLVMValueRef like, double v) {
    return splat_of(cf(ml, v), shaped(like, f32(ml)));
}

static LLVMValueRef ki(mathlib *ml, LLVMValueRef like, long long v) {
    return splat_of(ci(ml, v), shaped(like, i32(ml)));
}

/* Horner: c[0] + x (c[1] + x (...)) with c given from the highest degree down. */
static LLVMValueRef horner(mathlib *ml, LLVMBuilderRef b, LLVMValueRef x, const double *hi_to_lo, int n) {
    LLVMValueRef p = kf(ml, x, hi_to_lo[0]);
    for (int k = 1; k < n; k++) p = fma_(ml, b, p, x, kf(ml, x, hi_to_lo[k]));
    return p;
}

static LLVMValueRef as_int(mathlib *ml, LLVMBuilderRef b, LLVMValueRef f) {
    return LLVMBuildBitCast(b, f, shaped(f, i32(ml)), "");
}

static LLVMValueRef as_float(mathlib *ml, LLVMBuilderRef b, LLVMValueRef i) {
    return LLVMBuildBitCast(b, i, shaped(i, f32(ml)), "");
}

/* exp's polynomials e^r = 1 + r + c2 r^2 + ..., from the highest degree down: degree 6 for exp,
 * degree 5 for softmax's terms (build_exp says why). build_exp evaluates 1 + r + r^2 P(r)
 * with the coefficients before the two 1s, build_exp_scalef all of them by Horner's rule. */
static const double EXP_P6[] = {0.001390127930790186, 0.008363140746951103, 0.04166685417294502,
                                0.16666577756404877, 0.5, 1.0, 1.0};
static const double EXP_P5[] = {0.008312531096295678, 0.041890123685557834, 0.16667114431357438,
                                0.49999231696857616, 1.0, 1.0};

/* x = n ln2 + r (Cody-Waite), n = round(x log2 e) by the 1.5 * 2^23 trick: t's low mantissa
 * bits hold n itself, so no float -> int conversion (and no poison for out-of-range or NaN
 * inputs) is needed. Scalars or vectors (constants splat to x's type). Returns r. */
static LLVMValueRef exp_reduce(mathlib *ml, LLVMBuilderRef b, LLVMValueRef x, LLVMValueRef *t, LLVMValueRef *n) {
    *t = fma_(ml, b, x, kf(ml, x, 1.44269504088896341), kf(ml, x, 12582912.0));
    *n = LLVMBuildFSub(b, *t, kf(ml, x, 12582912.0), "");
    LLVMValueRef r = fma_(ml, b, *n, kf(ml, x, -0.693359375), x);
    return fma_(ml, b, *n, kf(ml, x, 2.12194440e-4), r);
}

/* term: softmax's terms exp(x - m) (LOP_EXP_TERM). With m the column's maximum the argument
 * is not positive, except where m is not finite (a NaN or an infinity in the column), and
 * there softmax's result is NaN whatever the terms are (items_finish_sum in lower/items.c
 * makes it so). With a speculative m (the maximum of a first block of rows, items_softmax)
 * it can be positive, and the sum of the terms is checked: any term above 1e30, an infinity
 * or a NaN makes the column run again with the true maximum. So the argument is clamped to
 * at most 88 (one vminps; NaN becomes 88, whose e^88 = 1.65e38 fails the check as NaN
 * would), below which 2^n stays a normal float and needs no select for overflow or NaN (a
 * compare and a masked add), and the polynomial is of degree 5: 2.26 ulp over every float <= 0
 * (degree 6: 1.06), 2.27 over every float, within the 2.5 the guide promises. Without the
 * select, alternating runs of bench's W2 on one thread of a Zen 4 (AVX-512) were 13% faster
 * (8 of 8 pairs; on two threads the machine's noise hid any gain).
 * clamp_term: the term's argument x < 88 ? x : 88, NaN included, in the form LLVM matches to
 * one vminps. Both exps take it (build_exp_scalef says why the AVX-512 one needs it too). */
static LLVMValueRef clamp_term(mathlib *ml, LLVMBuilderRef b, LLVMValueRef x) {
    return sel(b, fcmp(b, LLVMRealOLT, x, kf(ml, x, 88.0)), x, kf(ml, x, 88.0));
}

static void build_exp(mathlib *ml, LLVMBuilderRef b, LLVMValueRef x, bool term) {
    if (term) x = clamp_term(ml, b, x);
    /* degree 6 (1 + r + r^2 P(r)): 1.06 ulp. Degree 5 keeps exp itself within 2.5 ulp (2.26
     * measured over every float <= 0, 2.27 over every float by bench/mathulp), but sigmoid's
     * 1 / (1 + e^-x) passes exp's error through whole and reached 3.4 ulp; so degree 6, one
     * fma more, except for softmax's terms (term), which only need exp's own bound */
    LLVMValueRef t, n, r = exp_reduce(ml, b, x, &t, &n);
    LLVMValueRef p = term ? horner(ml, b, r, EXP_P5, 4) : horner(ml, b, r, EXP_P6, 5);
    LLVMValueRef y = LLVMBuildFAdd(b, fma_(ml, b, p, LLVMBuildFMul(b, r, r, ""), r), kf(ml, x, 1.0), "");
    /* 2^n applied by adding n to y's exponent field (y in [0.7, 1.42]): exact for every n in
     * [-126, 128] whose result is a normal float or +inf; the selects below take the rest */
    y = as_float(ml, b, LLVMBuildAdd(b, as_int(ml, b, y), LLVMBuildShl(b, as_int(ml, b, t), ki(ml, x, 23), ""), ""));
    y = sel(b, fcmp(b, LLVMRealOLT, x, kf(ml, x, -87.33654475)), kf(ml, x, 0), y);
    /* x > 88.72 gives inf, and a NaN x itself (x + inf) */
    if (!term)
        y = sel(b, fcmp(b, LLVMRealUGT, x, kf(ml, x, 88.72283935546875)),
                LLVMBuildFAdd(b, x, kf(ml, x, INFINITY), ""), y);
    LLVMBuildRet(b, y);
}

/* ---- exp through vscalefps (AVX-512) ----
 * Where the CPU has AVX-512, exp scales its polynomial by 2^n with vscalefps, which is exact
 * for every n and result (overflow to inf, gradual underflow to subnormals, NaN kept). That
 * drops the integer exponent insertion and the selects for the ranges it cannot take (a shift,
 * an add, a compare and a masked move) for one instruction, and the argument only needs
 * clamping to where the result is 0 or inf. The vectoriser cannot widen a call of a target's
 * intrinsic, so exp is then a function it does not see into: the scalar one, marked noinline,
 * readnone, and each call names its vector variants (4, 8 and 16 wide, the same arithmetic
 * on vectors) in the "vector-function-abi-variant" attribute, which the loop and SLP
 * vectorisers use to widen a call. Both kinds are kept alive by llvm.compiler.used until the
 * vectoriser has run; then ml_after_vectoriser makes them alwaysinline and a second short run
 * (ML_LATE_PASSES) inlines them, so the loops hold plain vector code as before. The scalar
 * variant (for loop remainders) uses vscalefss: scalar and vector results are bit-for-bit
 * the same, so a column's value does not depend on which of the two computed it.
 * The polynomial is evaluated by Horner's rule to the end (1 + r (1 + r (c2 + ...))): two
 * fmas instead of a multiply, an fma and an add. Measured over every float (a C replica of
 * this sequence against double exp): 0.97 ulp with degree 6, and 2.18 ulp with degree 5
 * (softmax's terms), both over every float. */
static LLVMValueRef x86_call(mathlib *ml, LLVMBuilderRef b, const char *name, LLVMValueRef *args, unsigned n) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(ml->m, id, NULL, 0);
    return LLVMBuildCall2(b, LLVMIntrinsicGetType(ml->c, id, NULL, 0), fn, args, n, "");
}

/* p * 2^floor(n), w lanes (1: the scalar form) */
static LLVMValueRef scalef(mathlib *ml, LLVMBuilderRef b, LLVMValueRef p, LLVMValueRef n, unsigned w) {
    LLVMTypeRef i8 = LLVMInt8TypeInContext(ml->c);
    LLVMValueRef all8 = LLVMConstAllOnes(i8), cur = ci(ml, 4); /* _MM_FROUND_CUR_DIRECTION */
    if (w == 1) {
        LLVMValueRef z = LLVMConstNull(LLVMVectorType(f32(ml), 4)), i0 = ci(ml, 0);
        LLVMValueRef a[5] = {LLVMBuildInsertElement(b, z, p, i0, ""), LLVMBuildInsertElement(b, z, n, i0, ""), z,
                             all8, cur};
        return LLVMBuildExtractElement(b, x86_call(ml, b, "llvm.x86.avx512.mask.scalef.ss", a, 5), i0, "");
    }
    if (w == 16) {
        LLVMValueRef a[5] = {p, n, p, LLVMConstAllOnes(LLVMInt16TypeInContext(ml->c)), cur};
        return x86_call(ml, b, "llvm.x86.avx512.mask.scalef.ps.512", a, 5);
    }
    if (w > 16) { /* wider than a register (ml_call_vec's two-register steps): halves */
        LLVMValueRef lo[32], hi[32], all[64];
        unsigned h = w / 2;
        for (unsigned i = 0; i < h; i++) lo[i] = ci(ml, (long long)i), hi[i] = ci(ml, (long long)(i + h));
        for (unsigned i = 0; i < w; i++) all[i] = ci(ml, (long long)i);
        LLVMValueRef pl = LLVMBuildShuffleVector(b, p, p, LLVMConstVector(lo, h), "");
        LLVMValueRef ph = LLVMBuildShuffleVector(b, p, p, LLVMConstVector(hi, h), "");
        LLVMValueRef nl = LLVMBuildShuffleVector(b, n, n, LLVMConstVector(lo, h), "");
        LLVMValueRef nh = LLVMBuildShuffleVector(b, n, n, LLVMConstVector(hi, h), "");
        return LLVMBuildShuffleVector(b, scalef(ml, b, pl, nl, h), scalef(ml, b, ph, nh, h), LLVMConstVector(all, w), "");
    }
    LLVMValueRef a[4] = {p, n, p, all8};
    return x86_call(ml, b, w == 8 ? "llvm.x86.avx512.mask.scalef.ps.256" : "llvm.x86.avx512.mask.scalef.ps.128", a, 4);
}

static void build_exp_scalef(mathlib *ml, LLVMBuilderRef b, LLVMValueRef x, unsigned w, bool term) {
    /* below -104 the result rounds to 0 (and the reduction below stays exact); a NaN is kept */
    x = sel(b, fcmp(b, LLVMRealOLT, x, kf(ml, x, -104.0)), kf(ml, x, -104.0), x);
    /* above 89, inf. Softmax's terms are clamped at 88 as in build_exp, NaN included: their
     * sum must fail its check wherever the shift was too low, and beyond about 3.8e7 the
     * reduction above is out of range (n no longer fits the 1.5 * 2^23 trick), r is garbage
     * and the polynomial can be negative: scalef made such a term -inf, which passed the
     * check (a sum of -inf is <= 1e30) and gave NaN results */
    if (term) x = clamp_term(ml, b, x);
    else x = sel(b, fcmp(b, LLVMRealOGT, x, kf(ml, x, 89.0)), kf(ml, x, 89.0), x);
    LLVMValueRef t, n, r = exp_reduce(ml, b, x, &t, &n);
    LLVMValueRef p = term ? horner(ml, b, r, EXP_P5, 6) : horner(ml, b, r, EXP_P6, 7);
    LLVMBuildRet(b, scalef(ml, b, p, n, w));
}

/* exp's scalar function (noinline until the vectoriser has run) and its vector variants; the
 * value of the calls' "vector-function-abi-variant" attribute in *abi. */
static LLVMValueRef build_exp_family(mathlib *ml, LLVMBuilderRef b, ml_func f, char *abi, size_t abisz) {
    const char *name = f == ML_EXPF ? "rj.expf" : "rj.expf.term";
    bool term = f == ML_EXPF_TERM;
    LLVMTypeRef t = f32(ml);
    LLVMValueRef fn = begin_fn(ml, b, name, t, &t, 1, &ml->ty[f]);
    LLVMRemoveEnumAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMGetEnumAttributeKindForName("alwaysinline", 12));
    add_attr(ml, fn, LLVMAttributeFunctionIndex, "noinline", 0);
    add_attr(ml, fn, LLVMAttributeFunctionIndex, "memory", 0); /* none */
    build_exp_scalef(ml, b, LLVMGetParam(fn, 0), 1, term);
    ml->keep[ml->nkeep++] = fn;
    size_t len = 0;
    abi[0] = 0;
    for (unsigned w = 4; w <= ml->scalef; w *= 2) {
        if (w < 16 && !ml->scalef_vl) continue;
        char vname[40];
        snprintf(vname, sizeof vname, "%s.v%u", name, w);
        LLVMTypeRef vt = LLVMVectorType(t, w), vty;
        LLVMValueRef v = begin_fn(ml, b, vname, vt, &vt, 1, &vty);
        add_attr(ml, v, LLVMAttributeFunctionIndex, "memory", 0);
        build_exp_scalef(ml, b, LLVMGetParam(v, 0), w, term);
        ml->keep[ml->nkeep++] = v;
        len += (size_t)snprintf(abi + len, abisz - len, "%s_ZGV_LLVM_N%uv_%s(%s)", len ? "," : "", w, name, vname);
    }
    return fn;
}

void ml_set_features(mathlib *ml, const char *features) {
    ml->scalef = 0;
    ml->scalef_vl = false;
    bool f = false, vl = false;
    for (const char *s = features; s && *s;) {
        const char *e = strchr(s, ',');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 8 && !memcmp(s, "+avx512f", 8)) f = true;
        if (n == 9 && !memcmp(s, "+avx512vl", 9)) vl = true;
        s += n + (e ? 1 : 0);
    }
    if (f) ml->scalef = 16, ml->scalef_vl = vl;
}

void ml_finish(mathlib *ml) {
    if (!ml->nkeep) return;
    LLVMTypeRef pt = LLVMPointerTypeInContext(ml->c, 0);
    LLVMValueRef g = LLVMAddGlobal(ml->m, LLVMArrayType(pt, ml->nkeep), "llvm.compiler.used");
    LLVMSetLinkage(g, LLVMAppendingLinkage);
    LLVMSetSection(g, "llvm.metadata");
    LLVMSetInitializer(g, LLVMConstArray(pt, ml->keep, ml->nkeep));
}

bool ml_after_vectoriser(LLVMModuleRef m) {
    LLVMValueRef g = LLVMGetNamedGlobal(m, "llvm.compiler.used");
    if (!g) return false;
    LLVMDeleteGlobal(g);
    LLVMContextRef c = LLVMGetModuleContext(m);
    unsigned noinl = LLVMGetEnumAttributeKindForName("noinline", 8);
    unsigned always = LLVMGetEnumAttributeKindForName("alwaysinline", 12);
    for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f)) {
        size_t n;
        const char *name = LLVMGetValueName2(f, &n);
        if (n < 7 || memcmp(name, "rj.expf", 7) || LLVMIsDeclaration(f)) continue;
        LLVMRemoveEnumAttributeAtIndex(f, LLVMAttributeFunctionIndex, noinl);
        if (!LLVMGetEnumAttributeAtIndex(f, LLVMAttributeFunctionIndex, always))
            LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(c, always, 0));
    }
    return true;
}

/* exp of a float (ml_call) or of a vector (its variant of that width) */
static LLVMValueRef call_exp(mathlib *ml, LLVMBuilderRef b, LLVMValueRef x) {
    LLVMTypeRef t = LLVMTypeOf(x);
    if (LLVMGetTypeKind(t) == LLVMVectorTypeKind) return ml_call_vec(ml, b, ML_EXPF, x, LLVMGetVectorSize(t));
    return ml_call(ml, b, ML_EXPF, &x, 1);
}

static void build_log(mathlib *ml, LLVMBuilderRef b, LLVMValueRef x) {
    static const double Q[] = {-0.07974075525999069, 0.12655635178089142, -0.129892960190773,
                               0.1420995444059372, -0.16641581058502197, 0.20001201331615448,
                               -0.25000303983688354, 0.3333333134651184};
    LLVMValueRef den = fcmp(b, LLVMRealOLT, x, kf(ml, x, 1.17549435e-38));
    LLVMValueRef xs = sel(b, den, LLVMBuildFMul(b, x, kf(ml, x, 8388608.0), ""), x);
    LLVMValueRef u = as_int(ml, b, xs);
    LLVMValueRef e = LLVMBuildSub(b, LLVMBuildLShr(b, u, ki(ml, x, 23), ""), ki(ml, x, 127), "");
    e = sel(b, den, LLVMBuildSub(b, e, ki(ml, x, 23), ""), e);
    LLVMValueRef m = as_float(ml, b, LLVMBuildOr(b, LLVMBuildAnd(b, u, ki(ml, x, 0x007fffff), ""), ki(ml, x, 0x3f800000), ""));
    LLVMValueRef big = fcmp(b, LLVMRealOGT, m, kf(ml, x, 1.41421356237));
    m = sel(b, big, LLVMBuildFMul(b, m, kf(ml, x, 0.5), ""), m);
    e = sel(b, big, LLVMBuildAdd(b, e, ki(ml, x, 1), ""), e);
    LLVMValueRef f = LLVMBuildFSub(b, m, kf(ml, x, 1.0), "");
    LLVMValueRef q = horner(ml, b, f, Q, 8);
    LLVMValueRef f2 = LLVMBuildFMul(b, f, f, "");
    LLVMValueRef y = fma_(ml, b, LLVMBuildFMul(b, q, f, ""), f2, fma_(ml, b, kf(ml, x, -0.5), f2, f));
    LLVMValueRef ef = LLVMBuildSIToFP(b, e, LLVMTypeOf(x), "");
    y = fma_(ml, b, ef, kf(ml, x, 0.693147182464599609375), y);
    y = fma_(ml, b, ef, kf(ml, x, -1.904654323148236017e-09), y);
    y = sel(b, fcmp(b, LLVMRealOEQ, x, kf(ml, x, 0)), kf(ml, x, -INFINITY), y);
    y = sel(b, fcmp(b, LLVMRealULT, x, kf(ml, x, 0)), kf(ml, x, NAN), y); /* x < 0 or NaN */
    y = sel(b, fcmp(b, LLVMRealOEQ, x, kf(ml, x, INFINITY)), kf(ml, x, INFINITY), y);
    LLVMBuildRet(b, y);
}

static void build_tanh(mathlib *ml, LLVMBuilderRef b, LLVMValueRef x) {
    static const double T[] = {-0.006097828503698111, 0.020998140797019005, -0.053851183503866196,
                               0.13332772254943848, -0.333333283662796};
    LLVMValueRef a = ml_intrinsic(ml, b, "llvm.fabs", &x, 1);
    LLVMValueRef z = LLVMBuildFMul(b, x, x, "");
    LLVMValueRef t = horner(ml, b, z, T, 5);
    LLVMValueRef small = fma_(ml, b, LLVMBuildFMul(b, t, z, ""), x, x);
    LLVMValueRef two_a = LLVMBuildFMul(b, kf(ml, x, 2.0),
        ml_intrinsic(ml, b, "llvm.minnum", (LLVMValueRef[]){a, kf(ml, x, 10.0)}, 2), "");
    LLVMValueRef e = call_exp(ml, b, two_a);
    LLVMValueRef big = LLVMBuildFSub(b, kf(ml, x, 1.0),
        LLVMBuildFDiv(b, kf(ml, x, 2.0), LLVMBuildFAdd(b, e, kf(ml, x, 1.0), ""), ""), "");
    big = ml_intrinsic(ml, b, "llvm.copysign", (LLVMValueRef[]){big, x}, 2);
    LLVMValueRef y = sel(b, fcmp(b, LLVMRealOLT, a, kf(ml, x, 0.625)), small, big);
    /* tanh is odd: the sign of the input, also for -0.0, where the polynomial's fma gives +0 */
    y = ml_intrinsic(ml, b, "llvm.copysign", (LLVMValueRef[]){y, x}, 2);
    y = sel(b, fcmp(b, LLVMRealUNO, x, x), x, y);
    LLVMBuildRet(b, y);
}

/* erfc(x) = 1 - erf(x), without the cancellation of 1 - erf(x) where erf is near 1: gelu's
 * tail, x erfc(-x / sqrt 2) / 2 for large negative x, is a tiny number that 1 + erf(t) would
 * round to a multiple of 2^-24. For |x| < 1, 1 - x E(x^2) (no cancellation: erfc > 0.15);
 * beyond, the tail itself, T(x) = e^{-x^2} G(1/x) / x for x >= 1 and 2 - T(-x) for x <= -1,
 * G fitted to relative error on [1, 10.1] (above 10.1 erfc is below half the smallest
 * subnormal float). e^{-x^2} takes the rounding error of x^2 into account, exp(-p)(1 - e) with
 * e = x^2 - p from a fused multiply-add (where the target has none, fmuladd rounds and e is
 * 0: the error of x^2 rounded, up to 5e-6 relative at x = 10). */
static void build_erfc(mathlib *ml, LLVMBuilderRef b, LLVMValueRef x) {
    static const double S[] = {7.853856368456036e-05, -0.0008010191959328949, 0.005188327748328447,
                               -0.026853810995817184, 0.1128358542919159, -0.3761262595653534,
                               1.1283791065216064};
    static const double G[] = {-0.02399711310863495, 0.20015166699886322, -0.6957228779792786,
                               1.3325657844543457, -1.5145986080169678, 0.9428027868270874,
                               -0.10842801630496979, -0.268466055393219, -0.0009406572207808495,
                               0.5642167329788208};
    LLVMValueRef a = ml_intrinsic(ml, b, "llvm.fabs", &x, 1);
    LLVMValueRef small = LLVMBuildFSub(b, kf(ml, x, 1.0),
                                       LLVMBuildFMul(b, x, horner(ml, b, LLVMBuildFMul(b, x, x, ""), S, 7), ""), "");
    LLVMValueRef ac = ml_intrinsic(ml, b, "llvm.minnum", (LLVMValueRef[]){a, kf(ml, x, 10.1)}, 2);
    ac = ml_intrinsic(ml, b, "llvm.maxnum", (LLVMValueRef[]){ac, kf(ml, x, 1.0)}, 2);
    LLVMValueRef u = LLVMBuildFDiv(b, kf(ml, x, 1.0), ac, "");
    LLVMValueRef p = LLVMBuildFMul(b, ac, ac, "");
    LLVMValueRef e = fma_(ml, b, ac, ac, LLVMBuildFNeg(b, p, ""));
    LLVMValueRef ex = LLVMBuildFMul(b, call_exp(ml, b, LLVMBuildFNeg(b, p, "")),
                                    LLVMBuildFSub(b, kf(ml, x, 1.0), e, ""), "");
    LLVMValueRef tail = LLVMBuildFMul(b, LLVMBuildFMul(b, ex, horner(ml, b, u, G, 10), ""), u, "");
    LLVMValueRef big = sel(b, fcmp(b, LLVMRealOLT, x, kf(ml, x, 0.0)),
                           LLVMBuildFSub(b, kf(ml, x, 2.0), tail, ""), tail);
    LLVMValueRef y = sel(b, fcmp(b, LLVMRealOLT, a, kf(ml, x, 1.0)), small, big);
    y = sel(b, fcmp(b, LLVMRealUNO, x, x), x, y);
    LLVMBuildRet(b, y);
}

/* Integer power with wrapping; negative exponents give 0 except for bases 1 and -1. */
static void build_ipow(mathlib *ml, LLVMBuilderRef b, LLVMValueRef fn, LLVMTypeRef t) {
    LLVMValueRef base = LLVMGetParam(fn, 0), ex = LLVMGetParam(fn, 1);
    LLVMBasicBlockRef entry = LLVMGetInsertBlock(b);
    LLVMBasicBlockRef neg = LLVMAppendBasicBlockInContext(ml->c, fn, "neg");
    LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(ml->c, fn, "loop");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(ml->c, fn, "done");
    LLVMValueRef zero = LLVMConstInt(t, 0, 0), one = LLVMConstInt(t, 1, 0);
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, ex, zero, ""), neg, loop);
    LLVMPositionBuilderAtEnd(b, neg);
    LLVMValueRef odd = LLVMBuildTrunc(b, ex, LLVMInt1TypeInContext(ml->c), "");
    LLVMValueRef m1 = sel(b, odd, LLVMConstAllOnes(t), one);
    LLVMValueRef r = sel(b, LLVMBuildICmp(b, LLVMIntEQ, base, one, ""), one,
                         sel(b, LLVMBuildICmp(b, LLVMIntEQ, base, LLVMConstAllOnes(t), ""), m1, zero));
    LLVMBuildRet(b, r);
    LLVMPositionBuilderAtEnd(b, loop);
    LLVMValueRef acc = LLVMBuildPhi(b, t, ""), x = LLVMBuildPhi(b, t, ""), e = LLVMBuildPhi(b, t, "");
    LLVMValueRef bit = LLVMBuildTrunc(b, e, LLVMInt1TypeInContext(ml->c), "");
    LLVMValueRef acc2 = sel(b, bit, LLVMBuildMul(b, acc, x, ""), acc);
    LLVMValueRef x2 = LLVMBuildMul(b, x, x, "");
    LLVMValueRef e2 = LLVMBuildLShr(b, e, one, "");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, e2, zero, ""), done, loop);
    LLVMAddIncoming(acc, (LLVMValueRef[]){one, acc2}, (LLVMBasicBlockRef[]){entry, loop}, 2);
    LLVMAddIncoming(x, (LLVMValueRef[]){base, x2}, (LLVMBasicBlockRef[]){entry, loop}, 2);
    LLVMAddIncoming(e, (LLVMValueRef[]){ex, e2}, (LLVMBasicBlockRef[]){entry, loop}, 2);
    LLVMPositionBuilderAtEnd(b, done);
    /* exponent 0 takes the loop once with bit 0 clear: acc stays 1 */
    LLVMBuildRet(b, acc2);
}

/* The body of f32 function f (ML_EXPF .. ML_EXPF_TERM) of x, a float or a vector of them. */
static void build_f32(mathlib *ml, LLVMBuilderRef b, ml_func f, LLVMValueRef x) {
    switch (f) {
    case ML_EXPF: build_exp(ml, b, x, false); break;
    case ML_EXPF_TERM: build_exp(ml, b, x, true); break;
    case ML_LOGF: build_log(ml, b, x); break;
    case ML_TANHF: build_tanh(ml, b, x); break;
    default: build_erfc(ml, b, x); break;
    }
}

static const char *const names[ML_COUNT] = {"rj.expf", "rj.logf", "rj.tanhf", "rj.erfcf", "rj.expf.term",
                                            "rj.ipow.i32", "rj.ipow.i64", "rj.ntcopy.4", "rj.ntcopy.8",
                                            "rj.ntcopy.2"};

LLVMValueRef ml_call(mathlib *ml, LLVMBuilderRef b, ml_func f, LLVMValueRef *args, unsigned n) {
    bool scaled = (f == ML_EXPF || f == ML_EXPF_TERM) && ml->scalef;
    char *abi = ml->abi[f == ML_EXPF ? 0 : 1];
    if (!ml->fn[f]) {
        LLVMBasicBlockRef saved = LLVMGetInsertBlock(b);
        if (f == ML_NTCOPY2 || f == ML_NTCOPY4 || f == ML_NTCOPY8) {
            /* rt.c's copy, compiled with the library: (dst, src, n, nt), touching only the
             * n elements at its two pointers */
            LLVMTypeRef ptr = LLVMPointerTypeInContext(ml->c, 0), i64 = LLVMInt64TypeInContext(ml->c);
            LLVMTypeRef params[4] = {ptr, ptr, i64, i64};
            ml->ty[f] = LLVMFunctionType(LLVMVoidTypeInContext(ml->c), params, 4, 0);
            LLVMValueRef fn = LLVMAddFunction(ml->m, names[f], ml->ty[f]);
            static const char *const attrs[] = {"nounwind", "willreturn", "nosync", "nofree"};
            for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++)
                add_attr(ml, fn, LLVMAttributeFunctionIndex, attrs[i], 0);
            add_attr(ml, fn, LLVMAttributeFunctionIndex, "memory", 3); /* argmem: readwrite */
            add_attr(ml, fn, 1, "nocapture", 0);
            add_attr(ml, fn, 1, "writeonly", 0);
            add_attr(ml, fn, 2, "nocapture", 0);
            add_attr(ml, fn, 2, "readonly", 0);
            ml->fn[f] = fn;
        } else if (scaled) {
            ml->fn[f] = build_exp_family(ml, b, f, abi, sizeof ml->abi[0]);
        } else {
            LLVMTypeRef t = f == ML_IPOW32 ? i32(ml) : f == ML_IPOW64 ? LLVMInt64TypeInContext(ml->c) : f32(ml);
            LLVMTypeRef params[2] = {t, t};
            LLVMValueRef fn = begin_fn(ml, b, names[f], t, params, f >= ML_IPOW32 ? 2 : 1, &ml->ty[f]);
            ml->fn[f] = fn;
            if (f >= ML_IPOW32) build_ipow(ml, b, fn, t);
            else build_f32(ml, b, f, LLVMGetParam(fn, 0));
        }
        LLVMPositionBuilderAtEnd(b, saved);
    }
    LLVMValueRef call = LLVMBuildCall2(b, ml->ty[f], ml->fn[f], args, n, "");
    if (scaled && *abi) {
        static const char key[] = "vector-function-abi-variant";
        LLVMAddCallSiteAttribute(call, LLVMAttributeFunctionIndex,
                                 LLVMCreateStringAttribute(ml->c, key, sizeof key - 1, abi, (unsigned)strlen(abi)));
    }
    return call;
}

/* A vector variant of exp, log, tanh or erfc: w lanes, the same arithmetic as the scalar
 * function on every lane (alwaysinline, like it). With AVX-512 exp's own vector variants
 * (build_exp_family) serve the widths they exist for. */
LLVMValueRef ml_call_vec(mathlib *ml, LLVMBuilderRef b, ml_func f, LLVMValueRef x, unsigned w) {
    unsigned wi = 0;
    while ((1u << wi) < w) wi++;
    if (wi >= ML_VEC_WIDTHS || (1u << wi) != w || f > ML_EXPF_TERM) return NULL;
    if (!ml->vfn[f][wi]) {
        bool exp = f == ML_EXPF || f == ML_EXPF_TERM;
        char name[48];
        if (exp && ml->scalef && w > ml->scalef && (w & (w - 1)) == 0) {
            /* two registers or more: the scalef arithmetic on each half */
            LLVMBasicBlockRef saved = LLVMGetInsertBlock(b);
            snprintf(name, sizeof name, "%s.v%u", names[f], w);
            LLVMTypeRef vt = LLVMVectorType(f32(ml), w);
            LLVMValueRef fn = begin_fn(ml, b, name, vt, &vt, 1, &ml->vty[f][wi]);
            add_attr(ml, fn, LLVMAttributeFunctionIndex, "memory", 0);
            ml->vfn[f][wi] = fn;
            build_exp_scalef(ml, b, LLVMGetParam(fn, 0), w, f == ML_EXPF_TERM);
            LLVMPositionBuilderAtEnd(b, saved);
        } else if (exp && ml->scalef && (w == ml->scalef || (ml->scalef_vl && (w == 4 || w == 8)))) {
            if (!ml->fn[f]) { /* builds the family: the scalar function and its variants */
                LLVMValueRef one = LLVMGetUndef(f32(ml));
                LLVMValueRef probe = ml_call(ml, b, f, &one, 1);
                LLVMInstructionEraseFromParent(probe);
            }
            snprintf(name, sizeof name, "%s.v%u", names[f], w);
            ml->vfn[f][wi] = LLVMGetNamedFunction(ml->m, name);
            ml->vty[f][wi] = LLVMGlobalGetValueType(ml->vfn[f][wi]);
        } else {
            LLVMBasicBlockRef saved = LLVMGetInsertBlock(b);
            snprintf(name, sizeof name, "%s.w%u", names[f], w);
            LLVMTypeRef vt = LLVMVectorType(f32(ml), w);
            LLVMValueRef fn = begin_fn(ml, b, name, vt, &vt, 1, &ml->vty[f][wi]);
            ml->vfn[f][wi] = fn;
            build_f32(ml, b, f, LLVMGetParam(fn, 0));
            LLVMPositionBuilderAtEnd(b, saved);
        }
    }
    return LLVMBuildCall2(b, ml->vty[f][wi], ml->vfn[f][wi], &x, 1, "");
}

LLVMValueRef ml_fptosi_sat(mathlib *ml, LLVMBuilderRef b, LLVMValueRef v, LLVMTypeRef to) {
    return fptosi_sat(ml, b, v, to);
}
