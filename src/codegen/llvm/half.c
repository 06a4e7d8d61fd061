/*
 * half.c — the LLVM spelling of the 16-bit storage types: widening a loaded f16/bf16 (or bool
 * byte) to the value the loop IR computes with, narrowing an f32 to store it, and the loop
 * IR's LOP_ROUND_F16/BF16.
 *
 * In memory both 16-bit formats are i16 (loopir.h: no value has a 16-bit type). f16 goes
 * through LLVM's `half`: fpext/fptrunc, which x86 with F16C turns into vcvtph2ps/vcvtps2ph
 * (round to nearest even, NaN quiet) on whole vectors. Without F16C LLVM 14 would call
 * __gnu_f2h_ieee, which the JIT cannot resolve, so the conversion is then spelled in integer
 * operations like bf16's. bf16 is always integer operations: LLVM 14 cannot select bfloat's
 * fptrunc on x86 (attention-python-16bit.md §6). Widening is exact: bf16 is the top half of an
 * f32. Narrowing to bf16 adds 0x7FFF plus the lowest kept bit and keeps the top half (nearest
 * even; overflow carries into inf); a NaN keeps its top bits with the quiet bit set. These are
 * the same conversions as util/half.c's, which the interpreter and the host use.
 * Everything works on scalars and on vectors alike: the types follow the operand's.
 *
 * Where the CPU has AVX512-BF16, a vector stored to bf16 (a stored round_bf16, vector.c) is
 * narrowed by vcvtne2ps2bf16, which rounds and packs two registers in one instruction where
 * the integer rounding took seven per register and a vpermt2w; it flushes subnormal inputs,
 * so a step holding one (a vfpclassps a register tells, and a branch rarely taken) goes
 * through bf16_cvt's fix and the result stays bit for bit the integer one.
 * A rounding whose result is used as f32 (LOP_ROUND_BF16 inside a chain) stays integer: the
 * conversion, its fix and the widening back cost three shuffles per register on the one port
 * that runs them (port 5 on Intel), against one compare (bench/NOTES.md, 2026-11-28). On
 * AVX-512 the integer rounding's NaN lanes come from one vfixupimmps instead of that compare
 * and a masked or.
 *
 * A lanes loop whose memory accesses are all unit-stride bf16 keeps its lanes in even/odd order
 * (E->vpair, vplan.c): a step's vf elements, read as vf/2 i32, hold element 2i in the low half
 * of word i and 2i+1 in its high half, so a shift gives the even elements as f32 and an and the
 * odd ones, where widening in memory's order took a port-5 zero-extension (vpmovzxwd) and a
 * shift per register. A store packs them back the same way: the rounded even lanes shifted
 * down, or'ed with the odd ones (whose low halves the rounding cleared).
 */
#include "emit.h"

#include <string.h>

/* t's integer type of `bits` with v's shape (scalar, or a vector of as many lanes). */
static LLVMTypeRef like(em *E, LLVMValueRef v, LLVMTypeRef scalar) {
    LLVMTypeRef vt = LLVMTypeOf(v);
    return LLVMGetTypeKind(vt) == LLVMVectorTypeKind ? LLVMVectorType(scalar, LLVMGetVectorSize(vt)) : scalar;
    (void)E;
}

static LLVMValueRef kconst(LLVMTypeRef t, unsigned long long v) {
    if (LLVMGetTypeKind(t) != LLVMVectorTypeKind) return LLVMConstInt(t, v, 0);
    return ml_splat(LLVMConstInt(LLVMGetElementType(t), v, 0), LLVMGetVectorSize(t));
}

static bool has_f16c(em *E) { return E->f16c; }

/* The top 16 bits of each i32 of u, as i16s. On a vector, a shuffle of u's 16-bit halves
 * (the odd ones, little-endian), which x86 does in one vpermt2w per two registers where the
 * shift and truncation took five instructions; on a scalar, the shift. */
static LLVMValueRef top_halves(em *E, LLVMValueRef u) {
    LLVMBuilderRef b = E->b;
    LLVMTypeRef t = LLVMTypeOf(u), i16 = LLVMInt16TypeInContext(E->c);
    if (LLVMGetTypeKind(t) != LLVMVectorTypeKind)
        return LLVMBuildTrunc(b, LLVMBuildLShr(b, u, kconst(t, 16), ""), i16, "");
    unsigned n = LLVMGetVectorSize(t);
    if (n > 256) return LLVMBuildTrunc(b, LLVMBuildLShr(b, u, kconst(t, 16), ""), LLVMVectorType(i16, n), "");
    LLVMValueRef h = LLVMBuildBitCast(b, u, LLVMVectorType(i16, 2 * n), ""), idx[256];
    for (unsigned i = 0; i < n; i++) idx[i] = LLVMConstInt(LLVMInt32TypeInContext(E->c), 2 * i + 1, 0);
    return LLVMBuildShuffleVector(b, h, LLVMGetUndef(LLVMTypeOf(h)), LLVMConstVector(idx, n), "");
}

/* Lanes [from, from + n) of vector v. */
static LLVMValueRef lanes(em *E, LLVMValueRef v, unsigned from, unsigned n) {
    LLVMValueRef idx[64];
    for (unsigned i = 0; i < n; i++) idx[i] = LLVMConstInt(LLVMInt32TypeInContext(E->c), from + i, 0);
    return LLVMBuildShuffleVector(E->b, v, LLVMGetUndef(LLVMTypeOf(v)), LLVMConstVector(idx, n), "");
}

/* a's lanes then b's (same type). */
static LLVMValueRef concat(em *E, LLVMValueRef a, LLVMValueRef b) {
    unsigned n = LLVMGetVectorSize(LLVMTypeOf(a));
    LLVMValueRef idx[128];
    for (unsigned i = 0; i < 2 * n; i++) idx[i] = LLVMConstInt(LLVMInt32TypeInContext(E->c), i, 0);
    return LLVMBuildShuffleVector(E->b, a, b, LLVMConstVector(idx, 2 * n), "");
}

/* parts[0..np) (np a power of two, equal types) end to end. */
static LLVMValueRef join(em *E, LLVMValueRef *parts, unsigned np) {
    for (; np > 1; np /= 2)
        for (unsigned i = 0; i < np / 2; i++) parts[i] = concat(E, parts[2 * i], parts[2 * i + 1]);
    return parts[0];
}

/* The register width in f32 lanes (16; 8 on 256-bit code; 0 on narrower) that whole-register
 * x86 intrinsics take f's lanes in, if f is a vector of a power of two of them. */
static unsigned reg_chunk(em *E, LLVMValueRef f) {
    LLVMTypeRef t = LLVMTypeOf(f);
    if (LLVMGetTypeKind(t) != LLVMVectorTypeKind || (E->vbits && E->vbits < 256)) return 0;
    unsigned n = LLVMGetVectorSize(t), c = E->vbits == 256 ? 8 : 16;
    return n % c == 0 && n / c <= 8 && !((n / c) & (n / c - 1)) ? c : 0;
}

static LLVMValueRef x86(em *E, const char *name, LLVMValueRef *a, unsigned n) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(E->m, id, NULL, 0);
    return LLVMBuildCall2(E->b, LLVMIntrinsicGetType(E->c, id, NULL, 0), fn, a, n, "");
}

/* Whether the NaN lanes of f's rounding can be made by vfixupimmps (AVX-512): a vector of
 * whole registers (16 lanes; 8 on 256-bit code). */
static unsigned fixup_chunk(em *E, LLVMValueRef f) { return E->avx512 ? reg_chunk(E, f) : 0; }

/* r (i32 lanes) with f's NaN lanes replaced by f's bits with the quiet bit set, by one
 * vfixupimmps per register: its table maps the quiet and the signalling NaN classes to
 * QNaN(f) and every other class to r, which replaces the NaN compare (a port-5 instruction
 * into a mask register) and the masked or. */
static LLVMValueRef quiet_nans(em *E, LLVMValueRef r, LLVMValueRef f, unsigned chunk) {
    LLVMBuilderRef b = E->b;
    LLVMTypeRef ft = LLVMTypeOf(f), i32 = LLVMInt32TypeInContext(E->c);
    unsigned n = LLVMGetVectorSize(ft);
    LLVMValueRef rf = LLVMBuildBitCast(b, r, ft, ""), part[8];
    unsigned np = 0;
    LLVMValueRef table = ml_splat(LLVMConstInt(i32, 0x22, 0), chunk); /* QNaN, SNaN tokens: 2 */
    for (unsigned at = 0; at < n; at += chunk) {
        LLVMValueRef a[6] = {n == chunk ? rf : lanes(E, rf, at, chunk), n == chunk ? f : lanes(E, f, at, chunk), table,
                             LLVMConstInt(i32, 0, 0), NULL, LLVMConstInt(i32, 4, 0)}; /* current rounding */
        a[4] = LLVMConstAllOnes(chunk == 16 ? LLVMInt16TypeInContext(E->c) : LLVMInt8TypeInContext(E->c));
        part[np++] = chunk == 16 ? x86(E, "llvm.x86.avx512.mask.fixupimm.ps.512", a, 6)
                                 : x86(E, "llvm.x86.avx512.mask.fixupimm.ps.256", a, 5);
    }
    return LLVMBuildBitCast(b, join(E, part, np), LLVMTypeOf(r), "");
}

/* f32 bits u (i32) of f32 value f, rounded to bf16 in the top half (low half zero). */
static LLVMValueRef bf16_top(em *E, LLVMValueRef f) {
    LLVMBuilderRef b = E->b;
    LLVMTypeRef i32 = like(E, f, LLVMInt32TypeInContext(E->c));
    LLVMValueRef u = LLVMBuildBitCast(b, f, i32, "");
    LLVMValueRef odd = LLVMBuildAnd(b, LLVMBuildLShr(b, u, kconst(i32, 16), ""), kconst(i32, 1), "");
    LLVMValueRef r = LLVMBuildAdd(b, LLVMBuildAdd(b, u, kconst(i32, 0x7fff), ""), odd, "");
    if (fixup_chunk(E, f)) {
        r = quiet_nans(E, r, f, fixup_chunk(E, f));
    } else {
        LLVMValueRef q = LLVMBuildOr(b, u, kconst(i32, 0x400000), ""); /* NaN: quiet */
        LLVMValueRef nan = LLVMBuildFCmp(b, LLVMRealUNO, f, f, "");
        r = LLVMBuildSelect(b, nan, q, r, "");
    }
    return LLVMBuildAnd(b, r, kconst(i32, 0xffff0000u), "");
}

/* Whether f (f32 lanes) narrows to bf16 through AVX512-BF16: a vector of whole registers'
 * halves (8 lanes on 256-bit code, 16 otherwise; LLVM splits wider ones). */
static unsigned bf16_cvt_chunk(em *E, LLVMValueRef f) { return E->bf16cvt ? reg_chunk(E, f) : 0; }

/* vcvtne(2)ps2bf16 on the f32 lanes x, register by register: <n x i16>. */
static LLVMValueRef bf16_pack(em *E, LLVMValueRef x, unsigned chunk) {
    unsigned n = LLVMGetVectorSize(LLVMTypeOf(x)), np = 0;
    LLVMValueRef part[8];
    const char *one = chunk == 8 ? "llvm.x86.avx512bf16.cvtneps2bf16.256" : "llvm.x86.avx512bf16.cvtneps2bf16.512";
    const char *two = chunk == 8 ? "llvm.x86.avx512bf16.cvtne2ps2bf16.256" : "llvm.x86.avx512bf16.cvtne2ps2bf16.512";
    for (unsigned at = 0; at < n; at += 2 * chunk) {
        LLVMValueRef r;
        if (at + chunk == n) { /* an odd register out */
            LLVMValueRef a = n == chunk ? x : lanes(E, x, at, chunk);
            r = x86(E, one, &a, 1);
        } else { /* the second operand fills the low half */
            LLVMValueRef a[2] = {lanes(E, x, at + chunk, chunk), lanes(E, x, at, chunk)};
            r = x86(E, two, a, 2);
        }
        unsigned w = LLVMGetVectorSize(LLVMTypeOf(r));
        part[np++] = LLVMBuildBitCast(E->b, r, LLVMVectorType(LLVMInt16TypeInContext(E->c), w), "");
    }
    return join(E, part, np);
}

/* The lanes of f in the classes of vfpclassps's imm (0x20 subnormal, 0x06 zero), one
 * instruction a register: <n x i1>. */
static LLVMValueRef fpclass(em *E, LLVMValueRef f, unsigned chunk, unsigned imm) {
    unsigned n = LLVMGetVectorSize(LLVMTypeOf(f)), np = 0;
    LLVMValueRef part[8];
    for (unsigned at = 0; at < n; at += chunk) {
        LLVMValueRef a[2] = {n == chunk ? f : lanes(E, f, at, chunk), LLVMConstInt(LLVMInt32TypeInContext(E->c), imm, 0)};
        part[np++] = x86(E, chunk == 16 ? "llvm.x86.avx512.fpclass.ps.512" : "llvm.x86.avx512.fpclass.ps.256", a, 2);
    }
    return join(E, part, np);
}

/* Whether any lane of f is subnormal: a vfpclassps a register and one test of the masks (the
 * registers' masks or-ed, which is one kortest for two, where joining them took a kunpck
 * more). */
static LLVMValueRef any_subnormal(em *E, LLVMValueRef f, unsigned chunk) {
    unsigned n = LLVMGetVectorSize(LLVMTypeOf(f));
    LLVMTypeRef bits = LLVMIntTypeInContext(E->c, chunk);
    LLVMValueRef any = NULL;
    for (unsigned at = 0; at < n; at += chunk) {
        LLVMValueRef a[2] = {n == chunk ? f : lanes(E, f, at, chunk), LLVMConstInt(LLVMInt32TypeInContext(E->c), 0x20, 0)};
        LLVMValueRef k = x86(E, chunk == 16 ? "llvm.x86.avx512.fpclass.ps.512" : "llvm.x86.avx512.fpclass.ps.256", a, 2);
        k = LLVMBuildBitCast(E->b, k, bits, "");
        any = any ? LLVMBuildOr(E->b, any, k, "") : k;
    }
    return LLVMBuildICmp(E->b, LLVMIntNE, any, LLVMConstInt(bits, 0, 0), "");
}

/* bf16 bits (<n x i16>) of f32 lanes f by vcvtne(2)ps2bf16: the rounding and the pack in one
 * instruction per register pair. The instruction flushes subnormal inputs to zero, so where
 * a step holds one (a branch, rarely taken) lanes with a zero exponent field get the
 * exponent's lowest bit first (a normal number whose bits round at the same position, and +-0
 * becomes +-2^-126, exact in bf16) and lose it again in the 16-bit result (0x0080; a carry
 * into the exponent gives the smallest normal, which is the integer rounding's answer too):
 * bit for bit bf16_top's result, NaN included. The test is one vfpclassps a register where
 * the fix took a test, a masked or and a masked subtraction on every step. */
static LLVMValueRef bf16_cvt(em *E, LLVMValueRef f, unsigned chunk) {
    LLVMBuilderRef b = E->b;
    LLVMTypeRef i32 = like(E, f, LLVMInt32TypeInContext(E->c)), i16 = like(E, f, LLVMInt16TypeInContext(E->c));
    LLVMValueRef fast = bf16_pack(E, f, chunk);
    LLVMBasicBlockRef from = LLVMGetInsertBlock(b), fix = LLVMAppendBasicBlockInContext(E->c, E->fn, "bf16.sub");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(E->c, E->fn, "bf16.done");
    LLVMBuildCondBr(b, any_subnormal(E, f, chunk), fix, done);
    LLVMPositionBuilderAtEnd(b, fix);
    LLVMValueRef u = LLVMBuildBitCast(b, f, i32, ""), k = fpclass(E, f, chunk, 0x26); /* exponent field 0 */
    u = LLVMBuildSelect(b, k, LLVMBuildOr(b, u, kconst(i32, 0x00800000), ""), u, "");
    LLVMValueRef r = bf16_pack(E, LLVMBuildBitCast(b, u, LLVMTypeOf(f), ""), chunk);
    r = LLVMBuildSelect(b, k, LLVMBuildSub(b, r, kconst(i16, 0x80), ""), r, "");
    LLVMBuildBr(b, done);
    LLVMPositionBuilderAtEnd(b, done);
    LLVMValueRef phi = LLVMBuildPhi(b, LLVMTypeOf(r), "");
    LLVMAddIncoming(phi, (LLVMValueRef[]){r, fast}, (LLVMBasicBlockRef[]){fix, from}, 2);
    return phi;
}

/* f16 from an f32 in integer operations (no F16C): util/half.c's algorithm. */
static LLVMValueRef f16_bits_int(em *E, LLVMValueRef f) {
    LLVMBuilderRef b = E->b;
    LLVMTypeRef i32 = like(E, f, LLVMInt32TypeInContext(E->c)), ft = LLVMTypeOf(f);
    LLVMValueRef u = LLVMBuildBitCast(b, f, i32, "");
    LLVMValueRef sign = LLVMBuildAnd(b, LLVMBuildLShr(b, u, kconst(i32, 16), ""), kconst(i32, 0x8000), "");
    LLVMValueRef a = LLVMBuildAnd(b, u, kconst(i32, 0x7fffffff), "");
    /* normal: rebias, add-and-truncate to nearest even */
    LLVMValueRef odd = LLVMBuildAnd(b, LLVMBuildLShr(b, a, kconst(i32, 13), ""), kconst(i32, 1), "");
    LLVMValueRef n = LLVMBuildAdd(b, a, kconst(i32, (uint32_t)(0u - (112u << 23)) + 0xfffu), "");
    n = LLVMBuildLShr(b, LLVMBuildAdd(b, n, odd, ""), kconst(i32, 13), "");
    /* subnormal: the FPU rounds a + 0.5 to units of 2^-24 */
    LLVMValueRef af = LLVMBuildBitCast(b, a, ft, "");
    LLVMValueRef half = LLVMBuildBitCast(b, kconst(i32, 0x3f000000), ft, "");
    LLVMValueRef s = LLVMBuildSub(b, LLVMBuildBitCast(b, LLVMBuildFAdd(b, af, half, ""), i32, ""), kconst(i32, 0x3f000000), "");
    LLVMValueRef nanv = LLVMBuildOr(b, kconst(i32, 0x7e00), LLVMBuildAnd(b, LLVMBuildLShr(b, a, kconst(i32, 13), ""), kconst(i32, 0x3ff), ""), "");
    LLVMValueRef r = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntULT, a, kconst(i32, 0x38800000), ""), s, n, "");
    r = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntUGE, a, kconst(i32, 0x477ff000), ""), kconst(i32, 0x7c00), r, "");
    r = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntUGT, a, kconst(i32, 0x7f800000), ""), nanv, r, "");
    return LLVMBuildOr(b, r, sign, ""); /* i32 holding the 16 bits */
}

/* f16 bits (i16) to f32 in integer operations (no F16C). */
static LLVMValueRef f16_widen_int(em *E, LLVMValueRef h) {
    LLVMBuilderRef b = E->b;
    LLVMTypeRef i32 = like(E, h, LLVMInt32TypeInContext(E->c)), ft = like(E, h, LLVMFloatTypeInContext(E->c));
    LLVMValueRef x = LLVMBuildZExt(b, h, i32, "");
    LLVMValueRef sign = LLVMBuildShl(b, LLVMBuildAnd(b, x, kconst(i32, 0x8000), ""), kconst(i32, 16), "");
    LLVMValueRef em_ = LLVMBuildAnd(b, x, kconst(i32, 0x7fff), "");
    LLVMValueRef e = LLVMBuildLShr(b, em_, kconst(i32, 10), "");
    LLVMValueRef normal = LLVMBuildAdd(b, LLVMBuildShl(b, em_, kconst(i32, 13), ""), kconst(i32, 112u << 23), "");
    LLVMValueRef infnan = LLVMBuildOr(b, LLVMBuildShl(b, em_, kconst(i32, 13), ""), kconst(i32, 0x7f800000), "");
    LLVMValueRef sub = LLVMBuildBitCast(b, LLVMBuildFMul(b, LLVMBuildUIToFP(b, em_, ft, ""),
                                        LLVMBuildBitCast(b, kconst(i32, 0x33800000), ft, ""), ""), i32, ""); /* * 2^-24 */
    LLVMValueRef r = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, e, kconst(i32, 0), ""), sub, normal, "");
    r = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, e, kconst(i32, 31), ""), infnan, r, "");
    return LLVMBuildBitCast(b, LLVMBuildOr(b, r, sign, ""), ft, "");
}

LLVMValueRef em_from_mem(em *E, LLVMValueRef v, int t) {
    LLVMBuilderRef b = E->b;
    switch (t) {
    case RJ_BOOL: return LLVMBuildICmp(b, LLVMIntNE, v, kconst(LLVMTypeOf(v), 0), "");
    case RJ_F16:
        if (!has_f16c(E)) return f16_widen_int(E, v);
        return LLVMBuildFPExt(b, LLVMBuildBitCast(b, v, like(E, v, LLVMHalfTypeInContext(E->c)), ""),
                              like(E, v, LLVMFloatTypeInContext(E->c)), "");
    case RJ_BF16: {
        LLVMTypeRef i32 = like(E, v, LLVMInt32TypeInContext(E->c));
        LLVMValueRef u = LLVMBuildShl(b, LLVMBuildZExt(b, v, i32, ""), kconst(i32, 16), "");
        return LLVMBuildBitCast(b, u, like(E, v, LLVMFloatTypeInContext(E->c)), "");
    }
    default: return v;
    }
}

LLVMValueRef em_to_mem(em *E, LLVMValueRef v, int t) {
    LLVMBuilderRef b = E->b;
    switch (t) {
    case RJ_BOOL: return LLVMBuildZExt(b, v, like(E, v, LLVMInt8TypeInContext(E->c)), "");
    case RJ_F16:
        if (!has_f16c(E)) return LLVMBuildTrunc(b, f16_bits_int(E, v), like(E, v, LLVMInt16TypeInContext(E->c)), "");
        return LLVMBuildBitCast(b, LLVMBuildFPTrunc(b, v, like(E, v, LLVMHalfTypeInContext(E->c)), ""),
                                like(E, v, LLVMInt16TypeInContext(E->c)), "");
    case RJ_BF16: {
        unsigned chunk = bf16_cvt_chunk(E, v);
        return chunk ? bf16_cvt(E, v, chunk) : top_halves(E, bf16_top(E, v));
    }
    default: return v;
    }
}

/* em_to_mem of a value its 16-bit format holds already (LF_HELD): bf16's top half as it is,
 * without the rounding's add, select and mask (a second rounding changes nothing). */
LLVMValueRef em_to_mem_held(em *E, LLVMValueRef v, int t, bool held) {
    if (!held || t != RJ_BF16) return em_to_mem(E, v, t);
    return top_halves(E, LLVMBuildBitCast(E->b, v, like(E, v, LLVMInt32TypeInContext(E->c)), ""));
}

/* With E->vpair: bf16 bits v (<vf x i16>, memory's order) as f32 lanes in even/odd order,
 * no shuffle. */
LLVMValueRef em_from_pairs(em *E, LLVMValueRef v) {
    LLVMBuilderRef b = E->b;
    unsigned n = LLVMGetVectorSize(LLVMTypeOf(v));
    LLVMTypeRef w = LLVMVectorType(LLVMInt32TypeInContext(E->c), n / 2);
    LLVMValueRef u = LLVMBuildBitCast(b, v, w, "");
    LLVMValueRef even = LLVMBuildShl(b, u, kconst(w, 16), ""), odd = LLVMBuildAnd(b, u, kconst(w, 0xffff0000u), "");
    return LLVMBuildBitCast(b, concat(E, even, odd), LLVMVectorType(LLVMFloatTypeInContext(E->c), n), "");
}

/* bf16 bits in even/odd lane order (<n x i16>) in memory's order: one word shuffle. */
LLVMValueRef em_pairs_interleave(em *E, LLVMValueRef h) {
    unsigned n = LLVMGetVectorSize(LLVMTypeOf(h));
    LLVMValueRef idx[64];
    for (unsigned j = 0; j < n; j++) idx[j] = LLVMConstInt(LLVMInt32TypeInContext(E->c), (j & 1 ? n / 2 : 0) + j / 2, 0);
    return LLVMBuildShuffleVector(E->b, h, LLVMGetUndef(LLVMTypeOf(h)), LLVMConstVector(idx, n), "");
}

/* With E->vpair: f32 lanes v in even/odd order as bf16 bits in memory's order (<n x i16>),
 * rounded unless held (a value bf16 holds: its low halves are zero). Where the CPU has
 * AVX512-BF16 a rounding is vcvtne2ps2bf16's and the words are interleaved by one shuffle;
 * else the even lanes' top halves shift down into the odd lanes' low halves. */
LLVMValueRef em_to_pairs(em *E, LLVMValueRef v, bool held) {
    LLVMBuilderRef b = E->b;
    if (!held && bf16_cvt_chunk(E, v)) return em_pairs_interleave(E, em_to_mem(E, v, RJ_BF16));
    unsigned n = LLVMGetVectorSize(LLVMTypeOf(v));
    LLVMValueRef u = held ? LLVMBuildBitCast(b, v, like(E, v, LLVMInt32TypeInContext(E->c)), "") : bf16_top(E, v);
    LLVMValueRef even = LLVMBuildLShr(b, lanes(E, u, 0, n / 2), kconst(LLVMVectorType(LLVMInt32TypeInContext(E->c), n / 2), 16), "");
    LLVMValueRef r = LLVMBuildOr(b, even, lanes(E, u, n / 2, n / 2), "");
    return LLVMBuildBitCast(b, r, LLVMVectorType(LLVMInt16TypeInContext(E->c), n), "");
}

LLVMValueRef em_round_half(em *E, LLVMValueRef v, bool bf16) {
    /* in a vpair step with AVX512-BF16, the conversion's words interleaved into memory's order
     * widen with a shift and an and: fewer instructions than the integer rounding's twelve a
     * register pair (in memory's order the widening back cost two port-5 shuffles more) */
    if (bf16 && E->vpair && E->vloop >= 0 && LLVMGetTypeKind(LLVMTypeOf(v)) == LLVMVectorTypeKind &&
        LLVMGetVectorSize(LLVMTypeOf(v)) == (unsigned)E->vf && bf16_cvt_chunk(E, v))
        return em_from_pairs(E, em_pairs_interleave(E, em_to_mem(E, v, RJ_BF16)));
    if (bf16) return LLVMBuildBitCast(E->b, bf16_top(E, v), LLVMTypeOf(v), "");
    return em_from_mem(E, em_to_mem(E, v, RJ_F16), RJ_F16);
}
