/*
 * emit.c — loop IR to LLVM IR: the module and its kernels' functions.
 *
 * A direct translation: each kernel becomes a function with one parameter per loop-IR
 * parameter (pointers noalias, nocapture, readonly where only read: inputs never overlap
 * outputs, which the runtime checks), each variable an alloca that mem2reg promotes, each FOR
 * a canonical counted loop, each expression a handful of instructions (emit.h lists the
 * files). The optimiser does the rest: LICM hoists row starts and loop bounds, and unswitching
 * splits loops on the invariant predicates of pads.
 *
 * Here the module is made for the target, each kernel's function declared with the CPU, its
 * features and the vector width it prefers, its entry block given the variables' allocas and
 * the locals (a thread-scope local is the scratch pointer its parameter passes in, any other
 * an alloca), and its body emitted, with a fence after it where stores streamed. The module
 * records how many lanes loops became vector code and how many were left to LLVM's loop
 * vectoriser (!ragjit.lanes), so that jit.c can pick a shorter pipeline where none was left,
 * and it is verified before it is handed on.
 */
#include <llvm-c/Analysis.h>
#include <stdio.h>
#include <string.h>

#include "emit.h"

static void add_attr(em *E, LLVMValueRef fn, unsigned idx, const char *name) {
    LLVMAddAttributeAtIndex(fn, idx, LLVMCreateEnumAttribute(E->c, LLVMGetEnumAttributeKindForName(name, strlen(name)), 0));
}

static bool kernel(em *E, const lkernel *k, const char *prefix, const emit_target *t) {
    E->k = k;
    int wide = E->vbits;
    /* a kernel that streams its input through additions (lkernel.streams) in the target's
     * stream_bits (jit.c: 256 on a Zen 4) */
    bool narrow = E->vbits && t->stream_bits && t->stream_bits < E->vbits && k->streams;
    if (narrow) E->vbits = t->stream_bits;
    LLVMTypeRef ptr = LLVMPointerTypeInContext(E->c, 0), i64 = vty(E, RJ_I64);
    LLVMTypeRef *pt = mem_alloc(E->ctx, sizeof(LLVMTypeRef) * (size_t)(k->nparams + 1));
    size_t na = (size_t)(k->nparams + 1), nv = (size_t)(k->nvars + 1), ne = (size_t)(k->nex + 1);
    size_t nl = (size_t)(k->nlocals + 1);
    E->args = mem_zalloc(E->ctx, sizeof(LLVMValueRef) * na);
    E->vars = mem_zalloc(E->ctx, sizeof(LLVMValueRef) * nv);
    E->locals = mem_zalloc(E->ctx, sizeof(LLVMValueRef) * nl);
    E->cache = mem_zalloc(E->ctx, sizeof(LLVMValueRef) * ne);
    E->vcache = mem_zalloc(E->ctx, sizeof(LLVMValueRef) * ne);
    E->vvals = mem_zalloc(E->ctx, sizeof(LLVMValueRef) * nv);
    E->vclass = mem_zalloc(E->ctx, ne);
    E->vvar = mem_zalloc(E->ctx, nv);
    E->vloop = -1;
    bool ok = pt && E->args && E->vars && E->locals && E->cache && E->vcache && E->vvals && E->vclass && E->vvar;
    if (ok) {
        for (int32_t i = 0; i < k->nparams; i++) {
            int kind = k->params[i].kind;
            pt[i] = kind == PK_BUF || kind == PK_OFF || kind == PK_LOFF || kind == PK_SCRATCH || kind == PK_PITEM ||
                kind == PK_PSTART || kind == PK_SQOFF ? ptr : i64;
        }
        char name[96];
        snprintf(name, sizeof name, "%s%s", prefix, k->name);
        LLVMTypeRef fty = LLVMFunctionType(LLVMVoidTypeInContext(E->c), pt, (unsigned)k->nparams, 0);
        E->fn = LLVMAddFunction(E->m, name, fty);
        add_attr(E, E->fn, LLVMAttributeFunctionIndex, "nounwind");
        LLVMAddTargetDependentFunctionAttr(E->fn, "target-cpu", t->cpu);
        LLVMAddTargetDependentFunctionAttr(E->fn, "target-features", t->features);
        /* 512-bit vectors where the CPU has them: exp-heavy loops (softmax) gain ~25%; sums over
         * the ragged dim take the target's stream_bits (256 on a Zen 4, jit.c) */
        if (strstr(t->features, "+avx512f") && (!E->vbits || E->vbits >= 512))
            LLVMAddTargetDependentFunctionAttr(E->fn, "prefer-vector-width", "512");
        if (narrow && strstr(t->features, "+avx512f")) { /* 256 bits: LLVM splits wider vectors */
            char w[16];
            snprintf(w, sizeof w, "%d", E->vbits);
            LLVMAddTargetDependentFunctionAttr(E->fn, "prefer-vector-width", w);
            LLVMAddTargetDependentFunctionAttr(E->fn, "min-legal-vector-width", w);
        }
        for (int32_t i = 0; i < k->nparams; i++) {
            const lparam *p = &k->params[i];
            E->args[i] = LLVMGetParam(E->fn, (unsigned)i);
            LLVMSetValueName2(E->args[i], p->name, strlen(p->name));
            if (pt[i] != ptr) continue;
            add_attr(E, E->fn, (unsigned)i + 1, "noalias");
            add_attr(E, E->fn, (unsigned)i + 1, "nocapture");
            if (p->kind != PK_SCRATCH && !(p->kind == PK_BUF && p->written))
                add_attr(E, E->fn, (unsigned)i + 1, "readonly");
        }
        LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(E->c, E->fn, "entry");
        E->entry = entry;
        LLVMPositionBuilderAtEnd(E->b, entry);
        for (int32_t v = 0; v < k->nvars; v++)
            E->vars[v] = LLVMBuildAlloca(E->b, vty(E, k->vars[v].type), k->vars[v].name);
        for (int32_t l = 0; l < k->nlocals; l++) {
            const llocal *lc = &k->locals[l];
            E->locals[l] = lc->param >= 0 ? E->args[lc->param]
                                          : em_entry_alloca(E, LLVMArrayType(mty(E, lc->dtype), (unsigned)lc->elems), lc->name);
        }
        E->ntp = -1;
        for (int32_t i = 0; i < k->nparams; i++)
            if (k->params[i].kind == PK_NT) E->ntp = i;
        em_block(E, k->body);
        if (E->used_nt && strstr(t->triple, "x86_64")) { /* order streaming stores before returning */
            static const char sf[] = "llvm.x86.sse.sfence";
            unsigned id = LLVMLookupIntrinsicID(sf, sizeof sf - 1);
            LLVMValueRef fence = LLVMGetIntrinsicDeclaration(E->m, id, NULL, 0);
            LLVMBuildCall2(E->b, LLVMIntrinsicGetType(E->c, id, NULL, 0), fence, NULL, 0, "");
        }
        LLVMBuildRetVoid(E->b);
    }
    mem_free(E->ctx, pt, sizeof(LLVMTypeRef) * na);
    mem_free(E->ctx, E->args, sizeof(LLVMValueRef) * na);
    mem_free(E->ctx, E->vars, sizeof(LLVMValueRef) * nv);
    mem_free(E->ctx, E->locals, sizeof(LLVMValueRef) * nl);
    mem_free(E->ctx, E->cache, sizeof(LLVMValueRef) * ne);
    mem_free(E->ctx, E->vcache, sizeof(LLVMValueRef) * ne);
    mem_free(E->ctx, E->vvals, sizeof(LLVMValueRef) * nv);
    mem_free(E->ctx, E->vclass, ne);
    mem_free(E->ctx, E->vvar, nv);
    E->args = E->vars = E->locals = E->cache = E->vcache = E->vvals = NULL;
    E->vclass = E->vvar = NULL;
    E->nstack = 0;
    E->used_nt = false;
    E->vbits = wide;
    if (!ok || E->nomem) {
        ctx_fail(E->ctx, RJ_ERR_NOMEM, "out of memory while generating LLVM IR");
        return false;
    }
    if (E->fail) ctx_fail(E->ctx, RJ_ERR_INTERNAL, "emit: kernel %s uses an operation the LLVM "
                          "backend does not implement", k->name);
    return !E->fail;
}

LLVMModuleRef llvm_emit_module(rj_ctx *ctx, LLVMContextRef c, const lprog *p, int32_t first, int32_t count,
                               const char *prefix, const emit_target *t, int32_t *lanes_left) {
    em E = {.ctx = ctx, .c = c};
    E.m = LLVMModuleCreateWithNameInContext(prefix, c);
    LLVMSetTarget(E.m, t->triple);
    LLVMSetDataLayout(E.m, t->layout);
    E.b = LLVMCreateBuilderInContext(c);
    E.ml = (mathlib){.c = c, .m = E.m};
    ml_set_features(&E.ml, t->features);
    E.f16c = t->features && strstr(t->features, "+f16c");
    /* without F16C (RAGJIT_LLVM_NO_F16C) LLVM drops every AVX-512 feature, whatever the string says */
    E.avx512 = E.f16c && strstr(t->features, "+avx512f") && strstr(t->features, "+avx512vl");
    E.bf16cvt = E.f16c && strstr(t->features, "+avx512bf16") && strstr(t->features, "+avx512vl");
    E.vbits = t->vector_bits;
    E.prefetch = t->prefetch;
    /* as on a CPU without AVX-512: narrower vectors, or no F16C, where LLVM has dropped AVX-512
     * (vscalefps would not select: with RAGJIT_LLVM_VECTOR=0 an exp still asked for it, and
     * LLVM ended the process) */
    if ((E.vbits && E.vbits < 512) || !E.f16c) E.ml.scalef = 0, E.ml.scalef_vl = false;
    E.md_nt = LLVMGetMDKindIDInContext(c, "nontemporal", 11);
    E.md_loop = LLVMGetMDKindIDInContext(c, "llvm.loop", 9);
    E.md_group = LLVMGetMDKindIDInContext(c, "llvm.access.group", 17);
    bool ok = true;
    for (int32_t i = first; i < first + count && ok; i++) ok = kernel(&E, &p->kernels[i], prefix, t);
    if (ok) ml_finish(&E.ml);
    *lanes_left = E.nscalar;
    if (ok && E.vbits && E.vbits < 512 && strstr(t->features, "+avx512f")) {
        /* narrower vectors than the CPU has (RAGJIT_LLVM_VECTOR=256: code as for AVX2): every
         * function says so, the math it inlines included (inlining keeps the attribute only
         * where both functions have it) */
        for (LLVMValueRef f = LLVMGetFirstFunction(E.m); f; f = LLVMGetNextFunction(f)) {
            if (LLVMIsDeclaration(f)) continue;
            LLVMAddTargetDependentFunctionAttr(f, "prefer-vector-width", "256");
            LLVMAddTargetDependentFunctionAttr(f, "min-legal-vector-width", "256");
        }
    }
    if (ok) { /* for the dumps: !ragjit.lanes = !{!{!"vector", i32 n, !"llvm", i32 m}} */
        LLVMTypeRef i32 = LLVMInt32TypeInContext(c);
        LLVMMetadataRef ops[4] = {LLVMMDStringInContext2(c, "vector", 6),
                                  LLVMValueAsMetadata(LLVMConstInt(i32, (unsigned)E.nvec, 0)),
                                  LLVMMDStringInContext2(c, "llvm", 4),
                                  LLVMValueAsMetadata(LLVMConstInt(i32, (unsigned)E.nscalar, 0))};
        LLVMAddNamedMetadataOperand(E.m, "ragjit.lanes", LLVMMetadataAsValue(c, LLVMMDNodeInContext2(c, ops, 4)));
    }
    LLVMDisposeBuilder(E.b);
    mem_free(ctx, E.stack, sizeof(int32_t) * (size_t)E.capstack);
    if (ok) {
        char *msg = NULL;
        if (LLVMVerifyModule(E.m, LLVMReturnStatusAction, &msg)) {
            ctx_fail(ctx, RJ_ERR_INTERNAL, "emit: generated LLVM IR is invalid: %.600s", msg ? msg : "");
            ok = false;
        }
        LLVMDisposeMessage(msg);
    }
    if (!ok) {
        LLVMDisposeModule(E.m);
        return NULL;
    }
    return E.m;
}
