/*
 * llvm_backend.h — the CPU backend's internal interface: loop IR to LLVM IR (emit.c, with the
 * pieces emit.h lists), the vectorisable math functions (mathlib.c), tree-shaped horizontal
 * reductions (reduce_tree.c), the routines generated code calls (rt.c), and the JIT (jit.c).
 */
#ifndef RJ_LLVM_BACKEND_H
#define RJ_LLVM_BACKEND_H

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#include "../../ir/loopir.h"

/* ---- mathlib.c: f32 exp/log/tanh/erfc as branch-free inline IR, so loops calling them
 * vectorise; f64 and rarer functions go to libm. */
#define ML_VEC_WIDTHS 7 /* ml_call_vec: 1 to 64 lanes */
typedef struct mathlib {
    LLVMContextRef c;
    LLVMModuleRef m;
    LLVMValueRef fn[16];
    LLVMTypeRef ty[16];
    unsigned scalef;        /* widest vector of f32 with vscalefps (AVX-512: 16, or 0), see mathlib.c */
    bool scalef_vl;         /* and its 4- and 8-wide forms (AVX-512VL) */
    LLVMValueRef keep[16];  /* exp's scalar and vector variants, kept alive until the vectoriser */
    unsigned nkeep;
    char abi[2][256];       /* the calls' vector-function-abi-variant (exp, exp_term) */
    LLVMValueRef vfn[5][ML_VEC_WIDTHS]; /* ml_call_vec's variants of ML_EXPF .. ML_EXPF_TERM, by log2(width) */
    LLVMTypeRef vty[5][ML_VEC_WIDTHS];
} mathlib;

/* ML_EXPF_TERM: exp of softmax's terms x - m, which need no handling of overflow or NaN
 * (LOP_EXP_TERM in loopir.h), see mathlib.c */
typedef enum { ML_EXPF, ML_LOGF, ML_TANHF, ML_ERFCF, ML_EXPF_TERM, ML_IPOW32, ML_IPOW64, ML_NTCOPY4, ML_NTCOPY8,
               ML_NTCOPY2, ML_COUNT } ml_func;

/* Calls function f on args (declaring or building it in the module on first use). */
LLVMValueRef ml_call(mathlib *ml, LLVMBuilderRef b, ml_func f, LLVMValueRef *args, unsigned n);
/* Calls the w-lane vector variant of f (ML_EXPF .. ML_EXPF_TERM: exp, log, tanh, erfc, exp's
 * softmax term) on the vector x of w floats; NULL for any other f or a w not a power of two
 * up to 64. */
LLVMValueRef ml_call_vec(mathlib *ml, LLVMBuilderRef b, ml_func f, LLVMValueRef x, unsigned w);
/* The constant c in each of n lanes (n <= 64). */
LLVMValueRef ml_splat(LLVMValueRef c, unsigned n);
/* Calls an LLVM intrinsic overloaded on the type of its first argument. */
LLVMValueRef ml_intrinsic(mathlib *ml, LLVMBuilderRef b, const char *name, LLVMValueRef *args,
                          unsigned n);
/* Sets ml's vscalefps fields from a TargetMachine's feature string ("+avx512f,..."). */
void ml_set_features(mathlib *ml, const char *features);
/* Ends the module's emission: records what must outlive the optimiser's first run. */
void ml_finish(mathlib *ml);
/* After the optimiser's first run (the vectoriser's included): makes exp's variants inline and
 * drops what kept them; returns whether the module needs the second run (ML_LATE_PASSES). */
bool ml_after_vectoriser(LLVMModuleRef m);
#define ML_LATE_PASSES "always-inline,globaldce"
/* Saturating float -> integer conversion (NaN gives 0), as the interpreter defines casts. */
LLVMValueRef ml_fptosi_sat(mathlib *ml, LLVMBuilderRef b, LLVMValueRef v, LLVMTypeRef to);
/* Calls a libm function of one or two double (or float) arguments. */
LLVMValueRef ml_libm(mathlib *ml, LLVMBuilderRef b, const char *name, LLVMValueRef *args,
                     unsigned n);

/* ---- rt.c: routines generated code calls by name, compiled with the library; the linkers
 * resolve each name to its function's address (ML_NTCOPY4 and ML_NTCOPY8 above are calls to
 * them) ---- */
typedef struct rt_symbol {
    const char *name;
    void (*fn)(void);
} rt_symbol;
enum { RT_MAX_SYMBOLS = 64 };
/* The routines, in the variants for this CPU (picked on the first call), then the C library
 * functions generated code may call (libm's, memset, memcpy) by this library's own references
 * to them: *n entries, at most RT_MAX_SYMBOLS. */
const rt_symbol *rt_symbols(int *n);

/* ---- emit.c (its pieces share emit.h) ---- */
typedef struct emit_target {
    const char *triple, *layout, *cpu, *features;
    int vector_bits; /* lanes loops as vectors of this many bits (vector.c); 0: LLVM's vectoriser */
    int stream_bits; /* the same for a kernel that streams its input through additions
                      * (lkernel.streams); 0: vector_bits */
    int prefetch;    /* vector loads that stream through memory prefetch this many bytes ahead
                      * (vector.c); 0: none */
} emit_target;

/* A module holding kernels [first, first + count) of p, named <prefix><kernel name>; the
 * number of lanes loops it leaves to LLVM's loop vectoriser in *lanes_left. NULL with the
 * error in ctx. */
LLVMModuleRef llvm_emit_module(rj_ctx *ctx, LLVMContextRef c, const lprog *p, int32_t first, int32_t count,
                               const char *prefix, const emit_target *t, int32_t *lanes_left);

/* ---- reduce_tree.c ---- */
/* Rewrites the module's llvm.vector.reduce.fadd/fmul calls as shuffle trees (see the file);
 * returns how many. Run after optimisation, before code generation. */
int llvm_reduce_trees(LLVMModuleRef m);
/* Streamed stores of f16 vectors (metadata kind md_nt) as stores of i16 vectors (nt_half.c). */
int llvm_nt_half_stores(LLVMModuleRef m, unsigned md_nt);

/* ---- elfload.c ---- */
/* The address of an external symbol (a runtime routine, libm), NULL if there is none. */
typedef void *(*elf_resolver)(const char *name, void *ud);
typedef struct elf_code elf_code;
/* Links the n x86-64 ELF relocatable objects objs[i] (lens[i] bytes, at any alignment) into
 * executable memory of their own (*out) and fills addrs[q] with the address of the function
 * names[q]. *out is NULL when it does not take the objects (see the file; why then says what it
 * refused, and addrs are NULL): the caller links them otherwise. RJ_ERR_NOMEM when the
 * allocator refused. */
rj_status elf_link(rj_ctx *ctx, const unsigned char *const *objs, const size_t *lens, int32_t n, elf_resolver ext,
                   void *ud, const char *const *names, int32_t nnames, void **addrs, elf_code **out, char *why,
                   size_t why_size);
void elf_code_free(rj_ctx *ctx, elf_code *c);

/* ---- jit.c ---- */
struct llvm_jit;
typedef struct llvm_module_code llvm_module_code;

/* Code generation for the host: its TargetMachines and optimisation pipelines (made at the
 * first compile), and the linkers (elfload.c, or ORC's LLJIT made on first need). */
rj_status llvm_jit_new(rj_ctx *ctx, struct llvm_jit **out);
void llvm_jit_free(struct llvm_jit *j);
/* What besides the loop IR decides the machine code (LLVM's version, the target triple, CPU
 * and features, the pass pipeline), appended to b: the persistent cache's key names it. */
void llvm_identity(const struct llvm_jit *j, sbuf *b);
/* Optimises and compiles the kernels i of p with sel[i] (all where sel is NULL), named
 * <prefix><kernel name>, into object code: *obj (mem_alloc'd, *len bytes: an object file per
 * kernel, see jit.c) on success, up to `threads` kernels at once. Each kernel is a module of
 * its own whatever the number of threads, so the code (and the results) never depend on it. */
rj_status llvm_object(rj_ctx *ctx, struct llvm_jit *j, const lprog *p, const char *prefix, const bool *sel,
                      int threads, void **obj, size_t *len);
/* Links the object code of p's kernels (from llvm_object with the same sel, now or in an
 * earlier process) into memory (elfload.c, else ORC); stores kernel i's address in fns[i]
 * (atomically, release) for each i selected, and leaves the others. A prefix names one
 * compile's kernels: objects of disjoint selections may share it. */
rj_status llvm_load(rj_ctx *ctx, struct llvm_jit *j, const lprog *p, const char *prefix, const bool *sel,
                    const void *obj, size_t len, void **fns, llvm_module_code **code);
void llvm_code_free(rj_ctx *ctx, llvm_module_code *code);
/* The dumps, from one emission: LLVM IR before optimisation, and, when ir_opt (and then
 * asm_text) is not NULL, after optimisation and host assembly. Texts to free with
 * rj_string_free; all NULL on failure. */
rj_status llvm_dump(rj_ctx *ctx, struct llvm_jit *j, const lprog *p, char **ir, char **ir_opt,
                    char **asm_text);

#endif
