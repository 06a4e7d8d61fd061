/*
 * vector.c — lanes loops as vector code, as vplan.c planned them.
 *
 * Full steps of vf lanes, then at most one step with the lanes past the end masked off
 * (masked loads and stores), with no scalar remainder; where the bounds are constants, no
 * masked step when vf divides the extent, and no loop at all for a few steps. A step covers
 * two vector registers: LLVM splits each operation into two independent ones, interleaved,
 * which hides the latency of long chains such as exp's as the vectoriser's interleaving did.
 * LLVM's loop vectoriser, which would otherwise widen the loop, adds an interleaved main loop,
 * a vector epilogue and a scalar remainder with run-time checks between them, about four
 * copies of the body, and its legality and cost analyses were about half of a reduction's or
 * softmax's compile time. The loop is marked as vectorised, so the vectoriser leaves it alone.
 *
 * Uniform expressions are scalars (expr.c); varying ones are vectors of vf lanes (vexpr), with
 * ops.c's operations on them. Loads and stores along the lanes are vector loads and stores at
 * the first lane's address, others gathers and scatters; a store every lane makes to one
 * address keeps the last lane's value, as the scalar loop's last iteration would. A select or
 * a guarded load whose condition is the same in every lane is a branch, so only the arm taken
 * is computed. A reduction's vector of partial results starts at its operation's identity and
 * is folded after the loop (a tree of shuffles) into the variable, as the vectoriser's
 * reductions are. With E->vpair a step's lanes hold its even elements, then its odd ones:
 * memory is read and written in memory's order (its masks too), and the fold pairs the same
 * elements as in memory's order.
 */
#include <llvm-c/DebugInfo.h>
#include <string.h>

#include "emit.h"

static LLVMValueRef vexpr(em *E, int32_t id);

static LLVMValueRef splat(em *E, LLVMValueRef x, int n) {
    if (LLVMIsConstant(x)) return splat_const(x, n);
    LLVMTypeRef vt = LLVMVectorType(LLVMTypeOf(x), (unsigned)n);
    LLVMValueRef one = LLVMBuildInsertElement(E->b, LLVMGetPoison(vt), x, i32c(E, 0), "");
    LLVMValueRef zeros = LLVMConstNull(LLVMVectorType(LLVMInt32TypeInContext(E->c), (unsigned)n));
    return LLVMBuildShuffleVector(E->b, one, LLVMGetPoison(vt), zeros, "");
}

/* id's value in every lane: a vector of vf */
static LLVMValueRef vvec(em *E, int32_t id) {
    LLVMValueRef v = vexpr(E, id);
    return LLVMGetTypeKind(LLVMTypeOf(v)) == LLVMVectorTypeKind ? v : splat(E, v, E->vf);
}

/* <base, base + 1, ...>: the lanes' indices from a scalar i64 */
static LLVMValueRef iota_from(em *E, LLVMValueRef base) {
    LLVMValueRef e[64];
    LLVMTypeRef i64 = LLVMInt64TypeInContext(E->c);
    for (int i = 0; i < E->vf; i++) e[i] = LLVMConstInt(i64, (unsigned long long)i, 0);
    return LLVMBuildAdd(E->b, splat(E, base, E->vf), LLVMConstVector(e, (unsigned)E->vf), "");
}

static LLVMValueRef vintrinsic(em *E, const char *name, LLVMTypeRef *tys, unsigned nt, LLVMValueRef *args, unsigned n) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(E->m, id, tys, nt);
    return LLVMBuildCall2(E->b, LLVMIntrinsicGetType(E->c, id, tys, nt), fn, args, n, "");
}

static LLVMValueRef all_lanes(em *E) {
    return LLVMConstAllOnes(LLVMVectorType(LLVMInt1TypeInContext(E->c), (unsigned)E->vf));
}

/* v's lanes from memory's order into E->vpair's (the even elements, then the odd ones), or
 * back (to_pairs false): the 4-byte elements of a loop kept in that order for its bf16 ones,
 * two shuffles a step. */
static LLVMValueRef vpair_order(em *E, LLVMValueRef v, bool to_pairs) {
    LLVMValueRef idx[64];
    int h = E->vf / 2;
    for (int i = 0; i < E->vf; i++)
        idx[i] = i32c(E, (unsigned)(to_pairs ? (i < h ? 2 * i : 2 * (i - h) + 1) : (i & 1 ? h : 0) + i / 2));
    return LLVMBuildShuffleVector(E->b, v, LLVMGetPoison(LLVMTypeOf(v)), LLVMConstVector(idx, (unsigned)E->vf), "");
}

/* Does index idx move with something besides the lanes (a row, an item: a variable set
 * outside the loop, an offset loaded)? Then the loop's loads at it stream through memory
 * from one execution of the loop to the next; a weight indexed by the lanes alone does not. */
static bool streams(em *E, int32_t id) {
    const lx *e = &E->k->ex[id];
    if (e->kind == LX_VAR) return e->ref != E->vloop && E->vvar[e->ref] != VV_AFFINE;
    if (e->kind == LX_LOAD) return true;
    int32_t kids[3];
    int n = lx_children(e, kids);
    for (int i = 0; i < n; i++)
        if (streams(E, kids[i])) return true;
    return false;
}

/* Prefetches for a full step's contiguous load at p (bytes bytes) of a buffer parameter that
 * streams: a line E->prefetch bytes ahead of each of the step's lines. Prefetches never fault,
 * so those past the buffer's end are harmless; those of lines already cached cost an issue
 * slot each. */
static void vprefetch(em *E, LLVMValueRef p, unsigned bytes) {
    LLVMTypeRef i8 = LLVMInt8TypeInContext(E->c), i32 = LLVMInt32TypeInContext(E->c);
    LLVMTypeRef ptr = LLVMPointerTypeInContext(E->c, 0);
    for (unsigned o = 0; o < bytes; o += 64) {
        LLVMValueRef off = LLVMConstInt(LLVMInt64TypeInContext(E->c), (unsigned long long)E->prefetch + o, 0);
        LLVMValueRef a[4] = {LLVMBuildGEP2(E->b, i8, p, &off, 1, ""), LLVMConstInt(i32, 0, 0), LLVMConstInt(i32, 3, 0),
                             LLVMConstInt(i32, 1, 0)};
        vintrinsic(E, "llvm.prefetch", &ptr, 1, a, 4);
    }
}

/* A vector of memory `mem`/`ref` elements of type t at index idx (an expression): contiguous
 * from the first lane's element when idx runs along the lanes, else gathered; lanes off in
 * mask (NULL: all on) are not read and take passthru's values. */
static LLVMValueRef vload_at(em *E, int mem, int32_t ref, int t, int32_t idx, LLVMValueRef mask, LLVMValueRef passthru) {
    LLVMTypeRef et = mty(E, t), vt = LLVMVectorType(et, (unsigned)E->vf);
    LLVMTypeRef ptr = LLVMPointerTypeInContext(E->c, 0);
    unsigned align = (unsigned)rj_dtype_size((rj_dtype)t);
    if (E->vpair) { /* memory's order (the lanes off are past the end: any value will do) */
        mask = mask ? E->vmask_mem : NULL;
        passthru = NULL;
    }
    if (passthru) passthru = em_to_mem(E, passthru, t);
    LLVMValueRef v;
    if (em_vunit(E, idx)) {
        LLVMValueRef p = em_mem_addr(E, mem, ref, t, em_expr(E, idx));
        if (!mask) {
            if (E->prefetch && mem == MEM_PARAM && streams(E, idx)) vprefetch(E, p, (unsigned)E->vf * align);
            v = LLVMBuildLoad2(E->b, vt, p, "");
            LLVMSetAlignment(v, align);
        } else {
            LLVMTypeRef tys[2] = {vt, ptr};
            LLVMValueRef a[4] = {p, i32c(E, align), mask, passthru ? passthru : LLVMGetPoison(vt)};
            v = vintrinsic(E, "llvm.masked.load", tys, 2, a, 4);
        }
    } else {
        LLVMValueRef ps = em_mem_addr(E, mem, ref, t, vvec(E, idx));
        LLVMTypeRef tys[2] = {vt, LLVMTypeOf(ps)};
        LLVMValueRef a[4] = {ps, i32c(E, align), mask ? mask : all_lanes(E), passthru ? passthru : LLVMGetPoison(vt)};
        v = vintrinsic(E, "llvm.masked.gather", tys, 2, a, 4);
    }
    if (!E->vpair) return em_from_mem(E, v, t);
    return t == RJ_BF16 ? em_from_pairs(E, v) : vpair_order(E, v, true);
}

static LLVMValueRef vload(em *E, const lx *e) {
    if (e->b < 0) return vload_at(E, e->fn, e->ref, mem_dtype(E->k, e->fn, e->ref), e->a, E->vmask, NULL);
    LLVMValueRef dflt = vvec(E, e->c);
    if (em_varying(E, e->b)) { /* lanes whose guard is off are not read */
        LLVMValueRef g = vvec(E, e->b);
        LLVMValueRef m = E->vmask ? LLVMBuildAnd(E->b, g, E->vmask, "") : g;
        return vload_at(E, e->fn, e->ref, mem_dtype(E->k, e->fn, e->ref), e->a, m, dflt);
    }
    em_when w = em_when_open(E, em_expr(E, e->b)); /* one guard for every lane: a branch */
    return em_when_close(E, &w, vload_at(E, e->fn, e->ref, mem_dtype(E->k, e->fn, e->ref), e->a, E->vmask, dflt), dflt);
}

/* c ? b : d for a condition c the same in every lane: a branch to the arm chosen, so that
 * what only that arm needs (a load under the same guard, as pads have) is not computed for
 * the other, and the guard's test folds into the branch. */
static LLVMValueRef vselect_branch(em *E, const lx *e) {
    LLVMValueRef c = em_expr(E, e->a);
    LLVMBasicBlockRef yes = LLVMAppendBasicBlockInContext(E->c, E->fn, "vsel.then");
    LLVMBasicBlockRef no = LLVMAppendBasicBlockInContext(E->c, E->fn, "vsel.else");
    LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(E->c, E->fn, "vsel.join");
    LLVMBuildCondBr(E->b, c, yes, no);
    LLVMValueRef v[2];
    LLVMBasicBlockRef from[2];
    for (int i = 0; i < 2; i++) {
        LLVMPositionBuilderAtEnd(E->b, i ? no : yes);
        int32_t mark = E->nstack;
        v[i] = vvec(E, i ? e->c : e->b);
        em_forget_to(E, mark); /* what the arm computed is not available after the join */
        from[i] = LLVMGetInsertBlock(E->b);
        LLVMBuildBr(E->b, join);
    }
    LLVMPositionBuilderAtEnd(E->b, join);
    LLVMValueRef phi = LLVMBuildPhi(E->b, LLVMTypeOf(v[0]), "");
    LLVMAddIncoming(phi, v, from, 2);
    return phi;
}

/* An expression inside a vector loop: a scalar where uniform, else a vector of vf lanes. */
static LLVMValueRef vexpr(em *E, int32_t id) {
    if (!em_varying(E, id)) return em_expr(E, id);
    if (E->vcache[id]) return E->vcache[id];
    const lx *e = &E->k->ex[id];
    LLVMValueRef v, x, y, z;
    switch (e->kind) {
    case LX_VAR:
        if (e->ref == E->vloop) v = iota_from(E, E->t0);
        else if (E->vvar[e->ref] == VV_AFFINE) v = iota_from(E, LLVMBuildLoad2(E->b, sty(E, RJ_I64), E->vars[e->ref], ""));
        else v = LLVMBuildLoad2(E->b, LLVMVectorType(sty(E, e->type), (unsigned)E->vf), E->vvals[e->ref], "");
        break;
    case LX_LOAD: v = vload(E, e); break;
    case LX_UNARY:
        x = vvec(E, e->a);
        E->vw = E->vf;
        v = em_unary(E, e->fn, e->type, x);
        break;
    case LX_BINARY:
        x = vvec(E, e->a), y = vvec(E, e->b), z = e->c >= 0 ? vvec(E, e->c) : NULL;
        E->vw = E->vf;
        v = em_binary(E, e->fn, e->type, x, y, z);
        break;
    case LX_CMP:
        x = vvec(E, e->a), y = vvec(E, e->b);
        E->vw = E->vf;
        v = em_compare(E, e->fn, E->k->ex[e->a].type, x, y);
        break;
    case LX_SELECT:
        if (!em_varying(E, e->a)) { /* one choice for all lanes: a branch, only it computed */
            v = vselect_branch(E, e);
            break;
        }
        x = vexpr(E, e->a), y = vvec(E, e->b), z = vvec(E, e->c);
        v = LLVMBuildSelect(E->b, x, y, z, "");
        break;
    default:
        x = vvec(E, e->a);
        E->vw = E->vf;
        v = em_convert(E, x, E->k->ex[e->a].type, e->type);
        break;
    }
    E->vw = 0;
    em_remember_v(E, id, v);
    return v;
}

/* The identity of a reduction's operation, in every lane. */
static LLVMValueRef videntity(em *E, int fn, int t) {
    E->vw = E->vf;
    op_identity_value id = op_identity(fn, (rj_dtype)t, true); /* the lanes' partials */
    LLVMValueRef v = isf(t) ? fconst(E, t, id.f) : iconst(E, t, id.i);
    E->vw = 0;
    return v;
}

/* Which lane of a step holds its element j: j itself, or with E->vpair the even elements
 * first, then the odd ones. */
static unsigned lane_of(const em *E, int j) { return E->vpair ? (unsigned)((j & 1 ? E->vf / 2 : 0) + j / 2) : (unsigned)j; }

/* The lanes of v combined by fn: halves folded onto each other, a tree. Elements j and j + w
 * are combined at each level whatever the lanes' order (the first level takes them from where
 * vpair put them), so the bits do not depend on it. */
static LLVMValueRef vfold(em *E, int fn, int t, LLVMValueRef v) {
    for (int w = E->vf / 2; w >= 1; w /= 2) {
        LLVMValueRef lo[32], hi[32];
        bool first = w == E->vf / 2;
        for (int i = 0; i < w; i++)
            lo[i] = i32c(E, first ? lane_of(E, i) : (unsigned)i), hi[i] = i32c(E, first ? lane_of(E, i + w) : (unsigned)(i + w));
        LLVMValueRef a = LLVMBuildShuffleVector(E->b, v, LLVMGetPoison(LLVMTypeOf(v)), LLVMConstVector(lo, (unsigned)w), "");
        LLVMValueRef c = LLVMBuildShuffleVector(E->b, v, LLVMGetPoison(LLVMTypeOf(v)), LLVMConstVector(hi, (unsigned)w), "");
        E->vw = w;
        v = em_binary(E, fn, t, a, c, NULL);
        E->vw = 0;
    }
    return LLVMBuildExtractElement(E->b, v, i32c(E, 0), "");
}

/* The alignment of the direct streaming stores (stream.c: em_stream_test) of type t: a vector's bytes, at most a
 * machine register's (a wider vector is stored register by register). */
unsigned em_nt_align(const em *E, int t) {
    unsigned a = (unsigned)E->vf * (unsigned)rj_dtype_size((rj_dtype)t), r = (unsigned)E->vbits / 8;
    return a < r ? a : r;
}

static void vblock(em *E, int32_t s);

/* For a bf16 store with AVX512-BF16: the bits of expression id, a value the format holds
 * (LF_HELD), computed in the 16-bit domain where that saves the f32 rounding: a rounding is
 * vcvtne2ps2bf16's rounding and packing in one (half.c), a choice between held values chooses
 * between their bits. relu(x), expanded to (x < 0) ? 0 : x, tests the sign on x's bits, so
 * relu(x * w + b)'s last rounding is never done in f32: bf16 x < 0 iff its bits, as an i16,
 * lie in [0x8001, 0xFF80] (not -0, not a NaN), and x > 0 iff in [0x0001, 0x7F80]. Anything
 * else is rounded in f32 and packed (em_to_mem_held). */
static LLVMValueRef vheld_bits(em *E, int32_t id) {
    const lx *x = &E->k->ex[id];
    if (em_varying(E, id) && x->kind == LX_UNARY && x->fn == LOP_ROUND_BF16)
        return em_to_mem(E, vvec(E, x->a), RJ_BF16);
    if (em_varying(E, id) && x->kind == LX_SELECT && em_varying(E, x->a)) {
        const lx *c = &E->k->ex[x->a], *z = c->kind == LX_CMP ? &E->k->ex[c->b] : NULL;
        LLVMValueRef cond, h = NULL;
        if (z && (c->fn == RJ_OP_LT || c->fn == RJ_OP_GT) && (c->a == x->b || c->a == x->c) &&
            E->k->ex[c->a].type == RJ_F32 && z->kind == LX_CONST && z->f == 0) {
            h = vheld_bits(E, c->a); /* made once: its conversion may branch (half.c) */
            LLVMValueRef lo = LLVMConstInt(LLVMInt16TypeInContext(E->c), c->fn == RJ_OP_LT ? 0x8001 : 0x0001, 0);
            LLVMValueRef d = LLVMBuildSub(E->b, h, splat_const(lo, E->vf), "");
            cond = LLVMBuildICmp(E->b, LLVMIntULE, d, splat_const(LLVMConstInt(LLVMInt16TypeInContext(E->c), 0x7f7f, 0), E->vf), "");
        } else {
            cond = vvec(E, x->a);
        }
        LLVMValueRef yes = h && x->b == c->a ? h : vheld_bits(E, x->b), no = h && x->c == c->a ? h : vheld_bits(E, x->c);
        return LLVMBuildSelect(E->b, cond, yes, no, "");
    }
    return em_to_mem_held(E, vvec(E, id), RJ_BF16, true);
}

/* With E->vpair, the bf16 bits of expression id in memory's order (held: a value the format
 * holds): a rounding or a choice that vheld_bits makes on 16-bit bits there, interleaved by
 * one shuffle; anything else packed from the f32 lanes by a shift and an or (half.c). */
static LLVMValueRef vpair_bits(em *E, int32_t id, bool held) {
    const lx *x = &E->k->ex[id];
    if (E->bf16cvt && held && (x->kind == LX_SELECT || (x->kind == LX_UNARY && x->fn == LOP_ROUND_BF16)))
        return em_pairs_interleave(E, vheld_bits(E, id));
    for (int i = 0; held && x->kind == LX_VAR && i < E->nheld; i++)
        if (E->held_var[i] == x->ref) return E->held_bits[i];
    return em_to_pairs(E, vvec(E, id), held);
}

/* A lanes variable's new value. A bf16 rounding kept in a variable (the rows templates' r =
 * round_bf16(...), then stored) goes through vcvtne2ps2bf16 and is widened back: the store of
 * the variable then packs the widened value, which LLVM folds to the conversion's own bits,
 * so rounding and packing cost the conversion alone (half.c). With vpair LLVM does not see
 * through the packing, so the conversion's bits, interleaved, are kept for the store
 * (E->held_bits, vpair_bits). */
static LLVMValueRef vset_value(em *E, int32_t var, int32_t id) {
    const lx *x = &E->k->ex[id];
    for (int i = 0; i < E->nheld; i++) /* its bits from an earlier value are stale */
        if (E->held_var[i] == var) E->held_var[i] = -1;
    if (!E->bf16cvt || x->kind != LX_UNARY || x->fn != LOP_ROUND_BF16) return vvec(E, id);
    LLVMValueRef h = em_to_mem(E, vvec(E, x->a), RJ_BF16);
    if (E->vpair) { /* LLVM does not fold the store's packing here: the store takes these bits */
        if (E->nheld < 8) E->held_var[E->nheld] = var, E->held_bits[E->nheld++] = em_pairs_interleave(E, h);
    }
    return em_from_mem(E, h, RJ_BF16);
}

static void vstmt(em *E, const ls *st) {
    LLVMBuilderRef b = E->b;
    const lkernel *k = E->k;
    em_forget_to(E, 0);
    switch (st->kind) {
    case LS_SET:
        if (E->vvar[st->var] == VV_PRIVATE) LLVMBuildStore(b, vset_value(E, st->var, st->a), E->vvals[st->var]);
        else LLVMBuildStore(b, em_expr(E, st->a), E->vars[st->var]); /* uniform, or an index's first lane */
        break;
    case LS_REDUCE: {
        int t = k->vars[st->var].type;
        LLVMTypeRef vt = LLVMVectorType(sty(E, t), (unsigned)E->vf);
        LLVMValueRef x = vvec(E, st->a), y = st->flags & LF_FMA ? vvec(E, st->b) : NULL;
        LLVMValueRef slot = E->vvals[st->var];
        LLVMValueRef acc = LLVMBuildLoad2(b, vt, slot, "");
        E->vw = E->vf;
        LLVMValueRef v = y ? em_binary(E, LOP_FMA, t, x, y, acc) : em_binary(E, st->fn, t, acc, x, NULL);
        E->vw = 0;
        if (E->vmask && E->vvar[st->var] == VV_REDUCE) v = LLVMBuildSelect(b, E->vmask, v, acc, "");
        LLVMBuildStore(b, v, slot);
        break;
    }
    case LS_STORE: {
        int t = st->mem == MEM_LOCAL ? k->locals[st->ref].dtype : k->params[st->ref].dtype;
        unsigned align = (unsigned)rj_dtype_size((rj_dtype)t);
        if (!em_varying(E, st->a)) { /* every lane at one address: the last lane's value, as the
                                   * scalar loop's last iteration leaves it */
            LLVMValueRef x = vexpr(E, st->b);
            if (LLVMGetTypeKind(LLVMTypeOf(x)) == LLVMVectorTypeKind) x = LLVMBuildExtractElement(b, x, E->vlast, "");
            x = em_to_mem_held(E, x, t, st->flags & LF_HELD);
            LLVMSetAlignment(LLVMBuildStore(b, x, em_mem_addr(E, st->mem, st->ref, t, em_expr(E, st->a))), align);
            break;
        }
        LLVMTypeRef vt = LLVMVectorType(mty(E, t), (unsigned)E->vf), ptr = LLVMPointerTypeInContext(E->c, 0);
        LLVMValueRef v;
        if (E->vpair && t == RJ_BF16) v = vpair_bits(E, st->b, st->flags & LF_HELD);
        else if (E->vpair) v = vpair_order(E, em_to_mem(E, vvec(E, st->b), t), false);
        else if (t == RJ_BF16 && E->bf16cvt && (st->flags & LF_HELD)) v = vheld_bits(E, st->b);
        else v = em_to_mem_held(E, vvec(E, st->b), t, st->flags & LF_HELD);
        int sq = -1;
        for (int q = 0; q < E->nstage; q++)
            if (&k->st[E->stage_stmt[q]] == st) sq = q;
        LLVMValueRef p = NULL;
        if (sq >= 0) {
            LLVMValueRef off = LLVMBuildSub(b, E->stage_idx, E->stage_d0, "");
            p = LLVMBuildInBoundsGEP2(b, mty(E, t), E->stage_buf[sq], &off, 1, "");
        } else if (em_vunit(E, st->a)) {
            p = em_mem_addr(E, st->mem, st->ref, t, em_expr(E, st->a));
        }
        if (p && !E->vmask) {
            LLVMValueRef sv = LLVMBuildStore(b, v, p);
            if (E->nt_direct && (st->flags & LF_NT) && sq < 0) { /* aligned: em_stream_test checked */
                align = em_nt_align(E, t);
                LLVMValueRef one = LLVMConstInt(LLVMInt32TypeInContext(E->c), 1, 0);
                LLVMMetadataRef md = LLVMValueAsMetadata(one);
                LLVMSetMetadata(sv, E->md_nt, LLVMMetadataAsValue(E->c, LLVMMDNodeInContext2(E->c, &md, 1)));
            }
            LLVMSetAlignment(sv, align);
        } else if (p) {
            LLVMTypeRef tys[2] = {vt, ptr};
            LLVMValueRef a[4] = {v, p, i32c(E, align), E->vpair ? E->vmask_mem : E->vmask};
            vintrinsic(E, "llvm.masked.store", tys, 2, a, 4);
        } else {
            LLVMValueRef ps = em_mem_addr(E, st->mem, st->ref, t, vvec(E, st->a));
            LLVMTypeRef tys[2] = {vt, LLVMTypeOf(ps)};
            LLVMValueRef a[4] = {v, ps, i32c(E, align), E->vmask ? E->vmask : all_lanes(E)};
            vintrinsic(E, "llvm.masked.scatter", tys, 2, a, 4);
        }
        break;
    }
    case LS_IF: { /* a uniform condition (em_vector_plan) */
        E->nheld = 0; /* bits made in one arm are not there after the join */
        em_if r = em_if_open(E, st->a);
        vblock(E, st->body);
        em_if_else(E, &r);
        E->nheld = 0;
        vblock(E, st->els);
        em_if_close(E, &r);
        E->nheld = 0;
        break;
    }
    default: break; /* BARRIER: one thread; FOR: not planned */
    }
    em_forget_to(E, 0);
}

static void vblock(em *E, int32_t s) {
    for (; s >= 0 && !E->fail && !E->nomem; s = E->k->st[s].next) vstmt(E, &E->k->st[s]);
}

/* The loop's metadata: already vectorised (LLVM's vectoriser leaves it alone). */
static LLVMValueRef vloop_md(em *E) {
    LLVMMetadataRef tmp = LLVMTemporaryMDNode(E->c, NULL, 0);
    static const char key[] = "llvm.loop.isvectorized";
    LLVMMetadataRef kv[2] = {LLVMMDStringInContext2(E->c, key, sizeof key - 1),
                             LLVMValueAsMetadata(LLVMConstInt(LLVMInt32TypeInContext(E->c), 1, 0))};
    LLVMMetadataRef ops[2] = {tmp, LLVMMDNodeInContext2(E->c, kv, 2)};
    LLVMMetadataRef id = LLVMMDNodeInContext2(E->c, ops, 2);
    LLVMMetadataReplaceAllUsesWith(tmp, id);
    return LLVMMetadataAsValue(E->c, id);
}

/* Loops with constant bounds of at most this many steps are emitted without a loop; in a
 * kernel with lanes_whole (a softmax's constant tiles, lower/items.c: state_tile), loops of up to
 * lanes_max lanes, so that its accumulators stay in registers across the row loops. */
#define VSTRAIGHT 2

/* The lanes holding elements below n (an i32), as a mask; pair: in vpair's order. */
static LLVMValueRef lanes_below(em *E, LLVMValueRef n, bool pair) {
    LLVMValueRef lanes[64];
    for (int i = 0; i < E->vf; i++) lanes[i] = i32c(E, pair ? (unsigned)(i < E->vf / 2 ? 2 * i : 2 * (i - E->vf / 2) + 1) : (unsigned)i);
    return LLVMBuildICmp(E->b, LLVMIntULT, LLVMConstVector(lanes, (unsigned)E->vf), splat(E, n, E->vf), "");
}

/* One step of the body over elements t0 .. t0 + vf - 1 (t0: an i64), those from t0 + left
 * on (left: an i32; NULL: none) neither read nor written; last: the last lane on (an i32). */
static void vstep(em *E, const ls *st, LLVMValueRef t0, LLVMValueRef left, LLVMValueRef last) {
    LLVMBuildStore(E->b, t0, E->vars[st->var]); /* scalar index expressions read the first lane */
    E->t0 = t0;
    if (E->nstage) E->stage_idx = t0;
    E->vmask = E->vmask_mem = left ? lanes_below(E, left, false) : NULL;
    if (left && E->vpair) E->vmask = lanes_below(E, left, true);
    E->vlast = last;
    E->nheld = 0;
    em_forget_to(E, 0);
    vblock(E, st->body);
    E->vmask = E->vmask_mem = NULL;
    em_forget_to(E, 0);
}

/* for t in [lo, hi) lanes, planned by em_vector_plan: full steps of vf lanes, then steps of at
 * most vf lanes, masked, for the rest (none where the bounds are constants a multiple of vf
 * apart; with constant bounds a few steps apart, the steps in a row without a loop); then the
 * reductions' partial results folded into their variables. */
void em_vector_loop(em *E, const ls *st, LLVMValueRef lo, LLVMValueRef hi) {
    LLVMBuilderRef b = E->b;
    const lkernel *k = E->k;
    int vf = E->vf;
    LLVMTypeRef i64 = sty(E, RJ_I64), i32 = LLVMInt32TypeInContext(E->c);
    for (int32_t v = 0; v < k->nvars; v++) {
        E->vvals[v] = NULL;
        if (E->vvar[v] == VV_PRIVATE || E->vvar[v] == VV_REDUCE)
            E->vvals[v] = em_entry_alloca(E, LLVMVectorType(sty(E, k->vars[v].type), (unsigned)vf), k->vars[v].name);
    }
    /* the reductions' partial results start at their operation's identity */
    for (int32_t s = st->body; s >= 0; s = k->st[s].next) {
        const ls *x = &k->st[s];
        if (x->kind == LS_REDUCE && E->vvar[x->var] == VV_REDUCE)
            LLVMBuildStore(b, videntity(E, x->fn, k->vars[x->var].type), E->vvals[x->var]);
    }
    LLVMValueRef var = E->vars[st->var], vfc = LLVMConstInt(i64, (unsigned long long)vf, 0);
    const lx *clo = &k->ex[st->a], *chi = &k->ex[st->b];
    bool fixed = clo->kind == LX_CONST && chi->kind == LX_CONST;
    if (fixed && (chi->i - clo->i <= VSTRAIGHT * vf || (k->tiling.lanes_whole && chi->i - clo->i <= k->tiling.lanes_max))) {
        int64_t t = clo->i;
        for (; t + vf <= chi->i; t += vf) vstep(E, st, LLVMConstInt(i64, (unsigned long long)t, 1), NULL, i32c(E, (unsigned)vf - 1));
        if (t < chi->i)
            vstep(E, st, LLVMConstInt(i64, (unsigned long long)t, 1), i32c(E, (unsigned)(chi->i - t)),
                  i32c(E, (unsigned)(chi->i - t - 1)));
    } else {
        LLVMBuildStore(b, lo, var);
        LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(E->c, E->fn, "vloop");
        LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(E->c, E->fn, "vloop.body");
        LLVMBasicBlockRef rest = LLVMAppendBasicBlockInContext(E->c, E->fn, "vloop.rest");
        LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(E->c, E->fn, "vloop.exit");
        LLVMBuildBr(b, head);
        LLVMPositionBuilderAtEnd(b, head);
        LLVMValueRef t0 = LLVMBuildLoad2(b, i64, var, "");
        LLVMValueRef end = LLVMBuildAdd(b, t0, vfc, "");
        LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLE, end, hi, ""), body, rest);
        LLVMPositionBuilderAtEnd(b, body);
        vstep(E, st, t0, NULL, i32c(E, (unsigned)vf - 1));
        LLVMBuildStore(b, end, var);
        LLVMSetMetadata(LLVMBuildBr(b, head), E->md_loop, vloop_md(E));
        LLVMPositionBuilderAtEnd(b, rest);
        /* no lanes left over where vf divides every extent: a constant one, or the unit's tile
         * of an item kernel whose tiles are multiples of lanes_multiple */
        bool tiles = k->tiling.lanes_multiple > 0 && k->tiling.lanes_multiple % vf == 0 && clo->kind == LX_CONST && clo->i == 0 &&
                     chi->kind == LX_VAR && chi->ref == k->tiling.lanes_var;
        if ((fixed && (chi->i - clo->i) % vf == 0) || tiles) {
            LLVMBuildBr(b, exit);
        } else { /* fewer than vf lanes left: one masked step */
            LLVMBasicBlockRef part = LLVMAppendBasicBlockInContext(E->c, E->fn, "vloop.part");
            LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, t0, hi, ""), part, exit);
            LLVMPositionBuilderAtEnd(b, part);
            LLVMValueRef left = LLVMBuildTrunc(b, LLVMBuildSub(b, hi, t0, ""), i32, "");
            vstep(E, st, t0, left, LLVMBuildSub(b, left, i32c(E, 1), ""));
            LLVMBuildBr(b, exit);
        }
        LLVMPositionBuilderAtEnd(b, exit);
    }
    LLVMBuildStore(b, hi, var);
    for (int32_t s = st->body; s >= 0; s = k->st[s].next) {
        const ls *x = &k->st[s];
        if (x->kind != LS_REDUCE || E->vvar[x->var] != VV_REDUCE) continue;
        int t = k->vars[x->var].type;
        int fn = x->flags & LF_FMA ? RJ_OP_ADD : x->fn;
        LLVMValueRef acc = LLVMBuildLoad2(b, LLVMVectorType(sty(E, t), (unsigned)vf), E->vvals[x->var], "");
        LLVMValueRef cur = LLVMBuildLoad2(b, sty(E, t), E->vars[x->var], "");
        LLVMBuildStore(b, em_binary(E, fn, t, cur, vfold(E, fn, t, acc), NULL), E->vars[x->var]);
        E->vvar[x->var] = VV_UNIFORM; /* folded once, however many statements reduce into it */
    }
    E->vloop = -1; /* E->vpair stays: stream.c runs one plan's loop twice */
}
