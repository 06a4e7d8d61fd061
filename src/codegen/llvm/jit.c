/*
 * jit.c — the context's LLVM code generation: loop IR to object code, and object code to
 * functions in memory.
 *
 * The CPU target (runtime/cpu.c) creates this state on the first compile of a context and keeps
 * it in the context's CPU slot. Compiling and linking are two steps, so that the object code in
 * between can go to the persistent cache and come back in another process (runtime/cpu.c
 * decides). Each kernel is a module of its own, and the kernels of a program are compiled by
 * several threads at once, each with its own LLVM context and TargetMachine (a TargetMachine
 * generates code for one module at a time); the modules do not depend on the number of threads,
 * so neither does the code. Symbols carry a prefix unique to the program (the caller's: a hash
 * of the cache key, the same in every process).
 *
 * Linking: elfload.c, ragjit's own linker, takes the x86-64 objects written here and maps each
 * program's code and constants in memory of its own, freed with the program. In a new process
 * that loads cached code it is what makes a hit cheap: ORC's LLJIT costs about 0.5 ms to create
 * (it detects the host and builds TargetMachines of its own) and more per program to link,
 * where elfload.c links a program in tens of microseconds (bench/'s disk-hit line went from
 * 1.0-1.5 ms to 0.3-0.5 ms). What it does not take goes to ORC, as every object did before: an
 * LLJIT made on first need (orc_get), one resource tracker per program, so freeing a program
 * evicts exactly its machine code. Both resolve names alike: rt.c's routines, the C library
 * functions generated code may call (libm's f64 functions, memset) by this library's own
 * references (rt.c's table), then the process's symbols. RAGJIT_LLVM_LINKER=orc sends everything to
 * ORC, =own refuses to fall back (tests). Neither step needs LLVM's target registration or a
 * TargetMachine, so a process that only loads cached code creates neither; the host's triple,
 * CPU and features, which the cache key names, come from LLVM's host queries.
 *
 * Optimisation runs LLVM's new pass manager with a TargetMachine for the host CPU, and one of
 * four pipelines per module (pipeline_tier): a short one for kernels over rows without
 * branches in their vector loops (LIGHT_PASSES); for other kernels whose lanes loops vector.c
 * wrote as vector code, one without the loop vectoriser and unroller (VECTOR_PASSES); and
 * where some lanes loop is left to the vectoriser, as before, a middle one for softmax over
 * the ragged dim (MEDIUM_PASSES) and "default<O3>" for the rest. O3 runs ~100 passes most of
 * which find nothing in ragjit's already simple loops; a shorter pipeline becomes a kernel
 * shape's default only once every bench workload and example runs as fast with it
 * (bench/pipeline_check.py, in pairs of runs in one process: `ragjit bench --ab`;
 * bench/NOTES.md, "LLVM pipelines").
 * RAGJIT_LLVM_PASSES replaces them all, RAGJIT_LLVM_LIGHT limits the shorter ones and
 * RAGJIT_LLVM_VECTOR=0 leaves every lanes loop to the vectoriser, RAGJIT_LLVM_STREAM_VECTOR
 * sets the width of sums over the ragged dim (stream_bits) (all read when the
 * context's JIT is created, so a context never mixes two settings). Where mathlib.c kept exp out of line for
 * the vectoriser (AVX-512: its vector variants use vscalefps), a second short run
 * (ML_LATE_PASSES) inlines it once the pipeline is done. After the pipeline, horizontal float
 * reductions are rewritten as trees (reduce_tree.c). The same TargetMachine then generates the
 * object code (ORC's IR layer would create a TargetMachine per module). The dumps
 * (LLVM IR before and after optimisation, assembly) are produced together by the same steps,
 * from a fresh module, so one request fills all three texts.
 *
 * RAGJIT_PERF_MAP=1 lists each linked kernel in perf's map of JIT code (perf_map_add).
 *
 * Memory: LLVM allocates its own memory (compilation, ORC and the code it links), and
 * elfload.c maps pages for code; those are the places where ragjit's allocator hook is not
 * consulted (executable pages cannot come from it).
 */
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Object.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Support.h>
#include <llvm-c/Target.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "llvm_backend.h"

/* Kernels of one program are compiled by up to this many threads at once. */
#define MAX_WORKERS 16

enum { LINK_AUTO, LINK_OWN, LINK_ORC };

struct llvm_jit {
    LLVMOrcLLJITRef jit; /* ORC, made for the first program elfload.c does not take (orc_get) */
    LLVMTargetMachineRef tm; /* made by the first compile (code_tm): loading cached code needs none */
    LLVMTargetRef target;
    LLVMTargetMachineRef wtm[MAX_WORKERS]; /* one per compile thread beyond the caller's (tm) */
    const char *triple, *cpu, *features; /* the host's (init_llvm) */
    char *layout; /* the TargetMachine's data layout (code_tm) */
    int linker;   /* who links the objects: LINK_AUTO elfload.c, else ORC (RAGJIT_LLVM_LINKER) */
    char *passes; /* the optimisation pipeline (new pass manager syntax) */
    bool unroll;  /* LLVM's loop unroller runs in it (RAGJIT_LLVM_UNROLL=0: not) */
    int light;    /* which kernels get a shorter pipeline than O3 (pipeline_tier): 3 (default)
                   * simple row kernels, kernels of vector code, softmax's; 2
                   * (RAGJIT_LLVM_LIGHT=medium) simple row kernels and softmax's; 1
                   * (RAGJIT_LLVM_LIGHT=rows) simple row kernels; 0 (RAGJIT_LLVM_LIGHT=0 or a
                   * user's pipeline) none */
    bool perf_map; /* RAGJIT_PERF_MAP=1: kernels listed in /tmp/perf-<pid>.map (perf_map_add) */
    char *light_passes; /* LIGHT_PASSES, or RAGJIT_LLVM_LIGHT_PASSES (for measuring others) */
    int vector_bits;    /* lanes loops emitted as vectors of this width (vector.c), 0 with
                         * RAGJIT_LLVM_VECTOR=0: left to LLVM's loop vectoriser */
    int stream_bits;    /* the width for kernels that stream their input through additions */
    int prefetch;       /* bytes ahead streaming vector loads prefetch (RAGJIT_LLVM_PREFETCH) */
};

struct llvm_module_code {
    elf_code *elf;              /* linked by elfload.c */
    LLVMOrcResourceTrackerRef rt; /* or by ORC */
};

#define MAX_LLVM_ARGS 16
static char llvm_args[1024]; /* the options given to LLVM (part of the cache identity) */
static pthread_once_t init_once = PTHREAD_ONCE_INIT, codegen_once = PTHREAD_ONCE_INIT;
static pthread_once_t target_once = PTHREAD_ONCE_INIT;
static void init_target(void);
static char llvm_words[sizeof llvm_args]; /* LLVM keeps pointers to its options */

/* The host, in static storage: nothing to free when the library is unloaded, and nothing freed
 * under a context still using it when the process ends. */
static char host_triple[256], host_cpu[256], host_features[16384];

/* Copies LLVM's string to dst (n bytes) and disposes of it; an empty string if it does not fit
 * (no CPU has 16 KiB of feature names: the TargetMachine then gets the CPU name alone). */
static void take_host(char *dst, size_t n, char *s) {
    size_t k = s ? strlen(s) : 0;
    if (k < n) memcpy(dst, s ? s : "", k + 1);
    LLVMDisposeMessage(s);
}

/* Whether a triple names the machine this library was compiled for. */
static bool triple_is_host(const char *t) {
#if defined(__x86_64__)
    return !strncmp(t, "x86_64", 6);
#elif defined(__aarch64__)
    return !strncmp(t, "aarch64", 7) || !strncmp(t, "arm64", 5);
#else
    return true;
#endif
}

/* What a JIT needs, once a process: the host as LLJIT would detect it (without creating one,
 * unless LLVM's default triple names another machine; the CPU's queries cost about 0.1 ms on a
 * VM, where cpuid exits to the hypervisor), and the options given to LLVM (not yet parsed:
 * init_codegen). */
static void init_llvm(void) {
    char *deft = LLVMGetDefaultTargetTriple();
    take_host(host_triple, sizeof host_triple, LLVMNormalizeTargetTriple(deft));
    LLVMDisposeMessage(deft);
    LLVMOrcLLJITRef probe = NULL;
    /* an LLVM built to cross-compile by default: the process's triple, as LLJIT finds it */
    if (!triple_is_host(host_triple)) {
        pthread_once(&target_once, init_target);
        LLVMErrorRef err = LLVMOrcCreateLLJIT(&probe, NULL);
        if (err) LLVMConsumeError(err);
        else {
            snprintf(host_triple, sizeof host_triple, "%s", LLVMOrcLLJITGetTripleString(probe));
            err = LLVMOrcDisposeLLJIT(probe);
            if (err) LLVMConsumeError(err);
        }
    }
    take_host(host_cpu, sizeof host_cpu, LLVMGetHostCPUName());
    take_host(host_features, sizeof host_features, LLVMGetHostCPUFeatures());
    /* RAGJIT_LLVM_NO_F16C=1: compile as for a CPU without F16C (LLVM then drops the AVX-512
     * features that imply it too), so that the integer f16 conversions (half.c) are tested on
     * any machine; the features are the cache key's, so such code is cached apart */
    char *f16c = getenv("RAGJIT_LLVM_NO_F16C") ? strstr(host_features, "+f16c") : NULL;
    if (f16c) *f16c = '-';
    /* RAGJIT_LLVM_NO_BF16=1: likewise without AVX512-BF16, so that bf16 narrows with integer
     * operations (half.c) on a CPU that has the instructions */
    char *bf16 = getenv("RAGJIT_LLVM_NO_BF16") ? strstr(host_features, "+avx512bf16") : NULL;
    if (bf16) *bf16 = '-';
    /* Loop strength reduction costs a quarter of code generation time on ragjit's kernels
     * and gains nothing measurable on them (bench/); it is a process-wide LLVM option, so an
     * embedding that uses LLVM for other work can keep LLVM's defaults with
     * RAGJIT_LLVM_DEFAULTS=1. */
    /* RAGJIT_LLVM_ARGS: more of LLVM's options, separated by spaces (-time-passes, say), for
     * experiments: LLVM ends the process on an option it does not know. */
    const char *e = getenv("RAGJIT_LLVM_ARGS");
    snprintf(llvm_args, sizeof llvm_args, "%s%s", getenv("RAGJIT_LLVM_DEFAULTS") ? "" : "-disable-lsr ", e ? e : "");
}

/* The host target's registration, once a process, for a TargetMachine or ORC. */
static void init_target(void) {
    LLVMInitializeNativeTarget();
}

/* What generating code needs besides, once a process, before the first compile of any context
 * (code_tm): the target, the assembly printer, and LLVM's options parsed. A process that only
 * loads cached code skips all three (about 0.2 ms of a new process's first program). */
static void init_codegen(void) {
    pthread_once(&target_once, init_target);
    LLVMInitializeNativeAsmPrinter();
    LLVMInitializeNativeAsmParser(); /* nt_half.c's inline assembly */
    memcpy(llvm_words, llvm_args, sizeof llvm_words);
    const char *args[1 + MAX_LLVM_ARGS] = {"ragjit"};
    int n = 1;
    for (char *save = NULL, *a = strtok_r(llvm_words, " ", &save); a && n < 1 + MAX_LLVM_ARGS;
         a = strtok_r(NULL, " ", &save))
        args[n++] = a;
    if (n > 1) LLVMParseCommandLineOptions(n, args, NULL);
}

static rj_status llvm_error(rj_ctx *ctx, LLVMErrorRef err, const char *what) {
    char *m = LLVMGetErrorMessage(err);
    rj_status s = ctx_fail(ctx, RJ_ERR_COMPILE, "%s: %s", what, m);
    LLVMDisposeErrorMessage(m);
    return s;
}

void llvm_jit_free(struct llvm_jit *j) {
    if (!j) return;
    if (j->tm) LLVMDisposeTargetMachine(j->tm);
    for (int i = 0; i < MAX_WORKERS; i++)
        if (j->wtm[i]) LLVMDisposeTargetMachine(j->wtm[i]);
    if (j->jit) {
        LLVMErrorRef e = LLVMOrcDisposeLLJIT(j->jit);
        if (e) LLVMConsumeError(e);
    }
    LLVMDisposeMessage(j->layout);
    free(j->passes);
    free(j->light_passes);
    free(j);
}

/* The small code model, position-independent: constants are addressed relative to the
 * instruction pointer and folded into vector instructions as broadcast operands (the JIT
 * default, the large model, loads each constant's address into a register first). A
 * TargetMachine serves one code generation at a time, so each compile thread has its own. */
static LLVMTargetMachineRef new_tm(const struct llvm_jit *j) {
    return LLVMCreateTargetMachine(j->target, j->triple, j->cpu, j->features, LLVMCodeGenLevelAggressive,
                                   LLVMRelocPIC, LLVMCodeModelSmall);
}

/* The caller's TargetMachine and the data layout the modules get from it, made by the first
 * compile or dump of a context (callers hold the context's lock), after init_codegen: a process
 * that only loads cached code never pays for one (0.1 ms). */
static rj_status code_tm(rj_ctx *ctx, struct llvm_jit *j) {
    pthread_once(&codegen_once, init_codegen);
    if (j->tm) return RJ_OK;
    char *msg = NULL;
    if (!j->target && LLVMGetTargetFromTriple(j->triple, &j->target, &msg)) {
        rj_status s = ctx_fail(ctx, RJ_ERR_COMPILE, "no LLVM target for %s: %s", j->triple, msg);
        LLVMDisposeMessage(msg);
        return s;
    }
    if (!(j->tm = new_tm(j)))
        return ctx_fail(ctx, RJ_ERR_COMPILE, "creating an LLVM TargetMachine for %s (%s)", j->triple, j->cpu);
    LLVMTargetDataRef td = LLVMCreateTargetDataLayout(j->tm);
    j->layout = LLVMCopyStringRepOfTargetData(td);
    LLVMDisposeTargetData(td);
    return RJ_OK;
}

/* ORC's LLJIT, for objects elfload.c does not take (another machine than x86-64, say), made
 * the first time one comes (callers hold the context's lock): it costs about 0.5 ms in a new
 * process. Symbols resolve as elfload.c resolves them (resolve_symbol), as absolute symbols
 * and then through the process generator. */
static rj_status orc_get(rj_ctx *ctx, struct llvm_jit *j) {
    if (j->jit) return RJ_OK;
    pthread_once(&target_once, init_target);
    LLVMErrorRef err = LLVMOrcCreateLLJIT(&j->jit, NULL);
    if (err) {
        j->jit = NULL;
        return llvm_error(ctx, err, "creating the LLVM JIT");
    }
    LLVMOrcDefinitionGeneratorRef gen;
    err = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(&gen, LLVMOrcLLJITGetGlobalPrefix(j->jit),
                                                              NULL, NULL);
    if (!err) {
        LLVMOrcJITDylibAddGenerator(LLVMOrcLLJITGetMainJITDylib(j->jit), gen);
        /* rt.c's routines and C library functions, by name: generated and cached code alike link
         * to this library's copy and references */
        int n;
        const rt_symbol *rt = rt_symbols(&n);
        LLVMOrcCSymbolMapPair syms[RT_MAX_SYMBOLS];
        for (int i = 0; i < n; i++)
            syms[i] = (LLVMOrcCSymbolMapPair){
                .Name = LLVMOrcLLJITMangleAndIntern(j->jit, rt[i].name),
                .Sym = {.Address = (LLVMOrcExecutorAddress)(uintptr_t)rt[i].fn,
                        .Flags = {.GenericFlags = LLVMJITSymbolGenericFlagsExported | LLVMJITSymbolGenericFlagsCallable}}};
        err = LLVMOrcJITDylibDefine(LLVMOrcLLJITGetMainJITDylib(j->jit), LLVMOrcAbsoluteSymbols(syms, (size_t)n));
    }
    if (!err) return RJ_OK;
    LLVMErrorRef e = LLVMOrcDisposeLLJIT(j->jit);
    if (e) LLVMConsumeError(e);
    j->jit = NULL;
    return llvm_error(ctx, err, "setting up the LLVM JIT's symbols");
}

/* elfload.c's resolver: rt.c's table (its routines, the C library functions it knows), then
 * the process's symbols, as ORC's process generator finds them. */
static void *resolve_symbol(const char *name, void *ud) {
    RJ_UNUSED(ud);
    int n;
    const rt_symbol *rt = rt_symbols(&n);
    for (int i = 0; i < n; i++)
        if (!strcmp(name, rt[i].name)) {
            void *p;
            memcpy(&p, &rt[i].fn, sizeof p);
            return p;
        }
    return dlsym(RTLD_DEFAULT, name);
}

/* A short pipeline for simple kernels (simple_kernel): inlining of the maths functions,
 * scalar clean-up (early CSE over memory SSA, so a value computed for two outputs is computed
 * once), loops rotated before loop-invariant code motion (a log of the row's sum leaves the
 * vector loop) and the loop vectoriser. It compiles those kernels in 60-70% of O3's time with
 * the same run times; kernels with guarded loads or branches in their vector loops (padding)
 * need O3's unswitching (bench/NOTES.md, "LLVM pipelines"). */
#define LIGHT_PASSES                                                                          \
    "always-inline,function(sroa,early-cse<memssa>,instcombine,simplifycfg,loop-simplify,lcssa,"  \
    "loop-rotate,loop-mssa(licm),gvn,indvars,loop-vectorize,instcombine,simplifycfg)"

/* A middle pipeline for softmax and log_softmax over the ragged dim (multi-pass item kernels):
 * the light one plus non-trivial unswitching (the passes' branches on the pass and the retry),
 * loop idioms and deletion, and unrolling after vectorisation. It compiles them in about 75%
 * of O3's time with the same run times and identical results; reductions over the ragged dim
 * ran slower with it and keep O3 (bench/NOTES.md, "LLVM pipelines"). */
#define MEDIUM_PASSES                                                                                   \
    "always-inline,function(sroa,early-cse<memssa>,instcombine,simplifycfg,loop-mssa(loop-rotate,licm," \
    "simple-loop-unswitch<nontrivial>),simplifycfg,instcombine,loop(loop-idiom,indvars,loop-deletion)," \
    "gvn,loop-vectorize,instcombine,simplifycfg,loop-unroll<O3>,instcombine,loop-mssa(licm),simplifycfg)," \
    "globaldce"

/* Which pipeline a kernel needs; a module gets the longest of its kernels'. */
/* The pipeline for kernels whose lanes loops are all vector code already (vector.c): no loop
 * vectoriser, no unroller, no induction-variable rewriting; what is left to do is promoting
 * the variables to registers, folding, hoisting what the loops do not change (row starts,
 * bounds), unswitching the loops on invariant branches (pads, softmax's passes) and removing
 * redundant loads. */
#define VECTOR_PASSES                                                                                   \
    "always-inline,function(sroa,early-cse<memssa>,instcombine,simplifycfg,loop-mssa(loop-rotate,licm," \
    "simple-loop-unswitch<nontrivial>),simplifycfg,instcombine,gvn,loop-mssa(licm),simplifycfg),globaldce"

enum { TIER_LIGHT, TIER_VECTOR, TIER_MEDIUM, TIER_FULL };

/* How far ahead a vector load that streams through memory prefetches (vector.c: vload_at). A
 * loop of many instructions per cache line (bf16's widenings and roundings) keeps too few
 * lines in flight for one core to reach the memory's bandwidth by out-of-order execution
 * alone; 2 KiB ahead measured best for bf16 and f32 alike (bench/NOTES.md, "Prefetching
 * streamed loads"). RAGJIT_LLVM_PREFETCH=N sets it (0: none). */
#define PREFETCH_BYTES 2048

/* The widest vectors the kernels use: 512 bits with AVX-512 (the functions prefer them:
 * emit.c, kernel), 256 with AVX, else 128 (SSE2 and NEON, the baselines of x86-64 and
 * AArch64). */
static int host_vector_bits(const char *triple, const char *features) {
    if (strstr(features, "+avx512f")) return 512;
    if (strstr(features, "+avx,") || strstr(features, "+avx2")) return 256;
    return strstr(triple, "x86_64") || strstr(triple, "aarch64") ? 128 : 0;
}

/* The vector width of kernels that stream their input through additions (lkernel.streams).
 * A Zen 4 splits each 512-bit operation in two 256-bit halves, so arithmetic gains nothing
 * from 512 bits, and one thread streaming from memory reads slower with 512-bit loads than
 * with 256-bit ones. Only such sums take it: kernels doing more per element are faster in 512
 * bits when their data is in the caches (bench/NOTES.md, "Narrower vectors for sums").
 * RAGJIT_LLVM_STREAM_VECTOR=256|512 overrides the choice, for measuring it on other CPUs. */
static int stream_bits(const char *cpu, int vector_bits) {
    const char *e = getenv("RAGJIT_LLVM_STREAM_VECTOR");
    int bits = e ? atoi(e) : 0;
    if (bits != 256 && bits != 512) bits = vector_bits == 512 && cpu && !strcmp(cpu, "znver4") ? 256 : vector_bits;
    return bits < vector_bits ? bits : vector_bits;
}

rj_status llvm_jit_new(rj_ctx *ctx, struct llvm_jit **out) {
    *out = NULL;
    pthread_once(&init_once, init_llvm);
    struct llvm_jit *j = calloc(1, sizeof *j); /* lives with LLVM's own allocations */
    if (!j) return ctx_fail(ctx, RJ_ERR_NOMEM, "out of memory creating the JIT");
    j->triple = host_triple;
    j->cpu = host_cpu;
    j->features = host_features;
    const char *lk = getenv("RAGJIT_LLVM_LINKER");
    j->linker = lk && !strcmp(lk, "orc") ? LINK_ORC : lk && !strcmp(lk, "own") ? LINK_OWN : LINK_AUTO;
    const char *light = getenv("RAGJIT_LLVM_LIGHT");
    const char *user = getenv("RAGJIT_LLVM_PASSES");
    if ((light && !strcmp(light, "0")) || (user && *user)) j->light = 0;
    else j->light = !light ? 3 : !strcmp(light, "rows") ? 1 : !strcmp(light, "medium") ? 2 : 3;
    const char *vec = getenv("RAGJIT_LLVM_VECTOR");
    int bits = vec ? atoi(vec) : -1; /* 0, or 128/256/512 in place of the host's width */
    j->vector_bits = bits == 0 || bits == 128 || bits == 256 || bits == 512 ? bits : host_vector_bits(j->triple, j->features);
    j->stream_bits = stream_bits(j->cpu, j->vector_bits);
    const char *pf = getenv("RAGJIT_LLVM_PREFETCH");
    j->prefetch = pf && *pf ? atoi(pf) : PREFETCH_BYTES;
    if (j->prefetch < 0 || j->prefetch > (1 << 16)) j->prefetch = PREFETCH_BYTES;
    const char *pm = getenv("RAGJIT_PERF_MAP");
    j->perf_map = pm && *pm && strcmp(pm, "0");
    const char *unroll = getenv("RAGJIT_LLVM_UNROLL");
    j->unroll = !(unroll && !strcmp(unroll, "0"));
    const char *passes = getenv("RAGJIT_LLVM_PASSES");
    const char *lp = getenv("RAGJIT_LLVM_LIGHT_PASSES");
    if (!(j->passes = strdup(passes && *passes ? passes : "default<O3>")) ||
        !(j->light_passes = strdup(lp && *lp ? lp : LIGHT_PASSES))) {
        llvm_jit_free(j);
        return ctx_fail(ctx, RJ_ERR_NOMEM, "out of memory creating the JIT");
    }
    *out = j;
    return RJ_OK;
}

/* LLVM reports "loop not vectorized" remarks for forced-vectorisation hints on loops that
 * call libm (f64 exp, say); they are expected, so diagnostics below errors are dropped. */
static void diagnostics(LLVMDiagnosticInfoRef info, void *ud) {
    RJ_UNUSED(ud);
    if (LLVMGetDiagInfoSeverity(info) != LLVMDSError) return;
    char *m = LLVMGetDiagInfoDescription(info);
    fprintf(stderr, "ragjit: LLVM: %s\n", m);
    LLVMDisposeMessage(m);
}

static bool guarded_load(const lkernel *k, int32_t id, void *ud) {
    RJ_UNUSED(ud);
    return k->ex[id].kind == LX_LOAD && k->ex[id].b >= 0;
}

/* Does a statement of the list at s, inside a lanes loop or below one, branch or load under a
 * guard? */
static bool lanes_branch(const lkernel *k, int32_t s, bool in_lanes, uint32_t *seen, uint32_t *mark) {
    for (; s >= 0; s = k->st[s].next) {
        const ls *st = &k->st[s];
        if (st->kind == LS_IF && in_lanes) return true;
        if (st->kind == LS_FOR || st->kind == LS_IF) {
            if (lanes_branch(k, st->body, in_lanes || (st->kind == LS_FOR && st->map == LM_LANES), seen, mark))
                return true;
            if (st->kind == LS_IF && lanes_branch(k, st->els, in_lanes, seen, mark)) return true;
        }
        int32_t ex[2];
        int n = ls_exprs(st, ex);
        for (int i = 0; in_lanes && i < n; i++)
            if (ex[i] >= 0 && lx_visit(k, ex[i], guarded_load, NULL, seen, ++*mark)) return true;
    }
    return false;
}

/* Rows of a ragged class or a dense map, with no branch or guarded load in a lanes loop and
 * no library GEMM. */
static bool simple_kernel(const lkernel *k) {
    if (k->domain != UD_ROWS || k->gemm.on) return false;
    uint32_t *seen = calloc((size_t)(k->nex ? k->nex : 1), sizeof *seen), mark = 0;
    bool simple = seen && !lanes_branch(k, k->body, false, seen, &mark);
    free(seen);
    return simple;
}

static int kernel_tier(const lkernel *k) {
    if (simple_kernel(k)) return TIER_LIGHT;
    return k->domain == UD_ITEMS && k->tiling.passes > 1 && !k->gemm.on ? TIER_MEDIUM : TIER_FULL;
}

/* The pipeline for kernels [first, first + count) of p, of which lanes_left lanes loops were
 * left to LLVM's vectoriser. */
static int pipeline_tier(const struct llvm_jit *j, const lprog *p, int32_t first, int32_t count, int32_t lanes_left) {
    int tier = TIER_LIGHT;
    for (int32_t i = first; i < first + count && tier < TIER_FULL; i++) {
        int t = kernel_tier(&p->kernels[i]);
        if (t > tier) tier = t;
    }
    if (tier > TIER_LIGHT && !lanes_left && j->light >= 3) return TIER_VECTOR;
    bool allowed = tier == TIER_FULL || (tier == TIER_LIGHT ? j->light >= 1 : j->light >= 2);
    return allowed ? tier : TIER_FULL;
}

static rj_status optimise(rj_ctx *ctx, struct llvm_jit *j, LLVMTargetMachineRef tm, LLVMModuleRef m, int tier) {
    LLVMPassBuilderOptionsRef o = LLVMCreatePassBuilderOptions();
    LLVMPassBuilderOptionsSetLoopVectorization(o, 1);
    LLVMPassBuilderOptionsSetSLPVectorization(o, 1);
    LLVMPassBuilderOptionsSetLoopUnrolling(o, j->unroll && tier == TIER_FULL);
    const char *passes = tier == TIER_LIGHT    ? j->light_passes
                         : tier == TIER_VECTOR ? VECTOR_PASSES
                         : tier == TIER_MEDIUM ? MEDIUM_PASSES
                                               : j->passes;
    LLVMErrorRef err = LLVMRunPasses(m, passes, tm, o);
    if (!err && ml_after_vectoriser(m)) err = LLVMRunPasses(m, ML_LATE_PASSES, tm, o);
    LLVMDisposePassBuilderOptions(o);
    if (!err) {
        llvm_reduce_trees(m);
        if (strstr(j->triple, "x86_64")) llvm_nt_half_stores(m, LLVMGetMDKindIDInContext(LLVMGetModuleContext(m), "nontemporal", 11));
        return RJ_OK;
    }
    char what[320];
    snprintf(what, sizeof what, "optimising with the pass pipeline \"%.200s\"%s", j->passes,
             strcmp(j->passes, "default<O3>") ? " (from RAGJIT_LLVM_PASSES)" : "");
    return llvm_error(ctx, err, what);
}

static emit_target target_of(const struct llvm_jit *j) {
    return (emit_target){.triple = j->triple, .layout = j->layout, .cpu = j->cpu, .features = j->features,
                         .vector_bits = j->vector_bits, .stream_bits = j->stream_bits,
                         .prefetch = j->prefetch};
}

void llvm_identity(const struct llvm_jit *j, sbuf *b) {
    unsigned major = 0, minor = 0, patch = 0;
    LLVMGetVersion(&major, &minor, &patch);
    sbuf_printf(b, "llvm %u.%u.%u\n%s\n%s\n%s\n%s\nunroll %d light %d %s\nmedium %s\nargs %s\nsmall-pic\nvector %d %d\n",
                major, minor, patch, j->triple, j->cpu, j->features, j->passes, j->unroll, j->light, j->light_passes,
                MEDIUM_PASSES, llvm_args, j->vector_bits, j->stream_bits);
    sbuf_printf(b, "%s\nprefetch %d\n", VECTOR_PASSES, j->prefetch);
}

/* Kernels [first, first + count) of p compiled by tm into one object file (*out). */
static rj_status object_of(rj_ctx *ctx, struct llvm_jit *j, LLVMTargetMachineRef tm, const lprog *p,
                           int32_t first, int32_t count, const char *prefix, LLVMMemoryBufferRef *out) {
    rj_status s;
    *out = NULL;
    LLVMContextRef c = LLVMContextCreate();
    LLVMContextSetDiagnosticHandler(c, diagnostics, NULL);
    emit_target t = target_of(j);
    int32_t lanes_left = 0;
    LLVMModuleRef m = llvm_emit_module(ctx, c, p, first, count, prefix, &t, &lanes_left);
    if (!m) {
        LLVMContextDispose(c);
        return ctx_last_status(ctx);
    }
    if ((s = optimise(ctx, j, tm, m, pipeline_tier(j, p, first, count, lanes_left)))) {
        LLVMDisposeModule(m);
        LLVMContextDispose(c);
        return s;
    }
    char *msg = NULL;
    bool bad = LLVMTargetMachineEmitToMemoryBuffer(tm, m, LLVMObjectFile, &msg, out);
    LLVMDisposeModule(m);
    LLVMContextDispose(c);
    if (bad) {
        *out = NULL;
        s = ctx_fail(ctx, RJ_ERR_COMPILE, "generating machine code: %s", msg ? msg : "");
        LLVMDisposeMessage(msg);
        return s;
    }
    return RJ_OK;
}

/* Compile threads share a counter of kernels; each compiles the next one not taken, with its
 * own LLVM context and TargetMachine. Errors are recorded per thread (error.c), so a thread
 * keeps its failure's message for the caller to report. */
typedef struct compile_job {
    rj_ctx *ctx;
    struct llvm_jit *j;
    const lprog *p;
    const char *prefix;
    const bool *sel;             /* the kernels to compile; NULL: all */
    int32_t next;                /* atomic: the next kernel to take */
    LLVMMemoryBufferRef *objs;   /* per kernel */
} compile_job;

typedef struct compile_worker {
    compile_job *job;
    LLVMTargetMachineRef tm;
    pthread_t thread;
    bool started;
    rj_status status;
    char msg[512];
} compile_worker;

static void *compile_loop(void *arg) {
    compile_worker *w = arg;
    compile_job *jb = w->job;
    for (int32_t k; !w->status && (k = __atomic_fetch_add(&jb->next, 1, __ATOMIC_RELAXED)) < jb->p->nkernels;)
        if ((!jb->sel || jb->sel[k]) &&
            (w->status = object_of(jb->ctx, jb->j, w->tm, jb->p, k, 1, jb->prefix, &jb->objs[k])))
            snprintf(w->msg, sizeof w->msg, "%s", ctx_last_error(jb->ctx));
    return NULL;
}

/* Object code as stored and loaded: u64 count, then per object file u64 length and its bytes
 * (little-endian); the kernels not compiled (NULL) have none. */
static rj_status pack(rj_ctx *ctx, LLVMMemoryBufferRef *objs, int32_t n, void **obj, size_t *len) {
    size_t total = 8;
    uint64_t count = 0;
    for (int32_t i = 0; i < n; i++)
        if (objs[i]) total += 8 + LLVMGetBufferSize(objs[i]), count++;
    unsigned char *b = mem_alloc(ctx, total);
    if (!b) return RJ_ERR_NOMEM;
    le_put_u64(b, count);
    size_t at = 8;
    for (int32_t i = 0; i < n; i++) {
        if (!objs[i]) continue;
        size_t k = LLVMGetBufferSize(objs[i]);
        le_put_u64(b + at, k);
        memcpy(b + at + 8, LLVMGetBufferStart(objs[i]), k);
        at += 8 + k;
    }
    *obj = b;
    *len = total;
    return RJ_OK;
}

rj_status llvm_object(rj_ctx *ctx, struct llvm_jit *j, const lprog *p, const char *prefix, const bool *sel,
                      int threads, void **obj, size_t *len) {
    *obj = NULL;
    *len = 0;
    rj_status ts = code_tm(ctx, j);
    if (ts) return ts;
    int32_t nk = p->nkernels, nsel = 0;
    for (int32_t k = 0; k < nk; k++) nsel += !sel || sel[k];
    int nw = threads < nsel ? threads : nsel;
    if (nw > MAX_WORKERS + 1) nw = MAX_WORKERS + 1;
    if (nw < 1) nw = 1;
    for (int i = 1; i < nw; i++)
        if (!j->wtm[i - 1] && !(j->wtm[i - 1] = new_tm(j))) nw = i;
    LLVMMemoryBufferRef *objs = mem_zalloc(ctx, sizeof *objs * (size_t)nk);
    compile_worker *w = mem_zalloc(ctx, sizeof *w * (size_t)nw);
    if (!objs || !w) {
        mem_free(ctx, objs, sizeof *objs * (size_t)nk);
        mem_free(ctx, w, sizeof *w * (size_t)(nw > 0 ? nw : 1));
        return RJ_ERR_NOMEM;
    }
    compile_job jb = {.ctx = ctx, .j = j, .p = p, .prefix = prefix, .sel = sel, .objs = objs};
    for (int i = 0; i < nw; i++) {
        w[i].job = &jb;
        w[i].tm = i ? j->wtm[i - 1] : j->tm;
        if (i) w[i].started = pthread_create(&w[i].thread, NULL, compile_loop, &w[i]) == 0;
    }
    compile_loop(&w[0]); /* the caller is a worker too; threads that did not start cost nothing */
    rj_status s = RJ_OK;
    for (int i = 0; i < nw; i++) {
        if (i && w[i].started) pthread_join(w[i].thread, NULL);
        if (w[i].status && !s) s = ctx_fail(ctx, w[i].status, "%s", w[i].msg);
    }
    if (!s) s = pack(ctx, objs, nk, obj, len);
    for (int32_t k = 0; k < nk; k++)
        if (objs[k]) LLVMDisposeMemoryBuffer(objs[k]);
    mem_free(ctx, objs, sizeof *objs * (size_t)nk);
    mem_free(ctx, w, sizeof *w * (size_t)nw);
    return s;
}

/* perf's map of JIT code (RAGJIT_PERF_MAP=1): a line "address size name" for each kernel of
 * the program just linked, appended to /tmp/perf-<pid>.map, where `perf report` looks for the
 * names of code that no file on disk describes. The sizes are the kernels' ELF symbol sizes,
 * read from the object files. Each line is one write to a file opened for appending, so
 * threads linking programs at once do not interleave lines. Machine code of a freed program
 * may be reused by a later one, whose lines then come after. Best effort: a failure to parse
 * or write leaves the map incomplete and the program unaffected. */
static void perf_map_add(rj_ctx *ctx, const lprog *p, const char *prefix, const bool *sel, const unsigned char *pack,
                         void *const *fns) {
    uint64_t n = le_get_u64(pack), *size = mem_zalloc(ctx, sizeof *size * (size_t)p->nkernels);
    if (!size) return;
    size_t at = 8, pl = strlen(prefix);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t k = le_get_u64(pack + at);
        LLVMMemoryBufferRef mb = LLVMCreateMemoryBufferWithMemoryRange((const char *)pack + at + 8, (size_t)k, "rj", 0);
        at += 8 + (size_t)k;
        char *err = NULL;
        LLVMBinaryRef bin = LLVMCreateBinary(mb, NULL, &err);
        LLVMDisposeMessage(err);
        if (bin) {
            LLVMSymbolIteratorRef si = LLVMObjectFileCopySymbolIterator(bin);
            for (; si && !LLVMObjectFileIsSymbolIteratorAtEnd(bin, si); LLVMMoveToNextSymbol(si)) {
                const char *name = LLVMGetSymbolName(si);
                if (!name || strncmp(name, prefix, pl)) continue;
                for (int32_t q = 0; q < p->nkernels; q++)
                    if (!strcmp(name + pl, p->kernels[q].name)) size[q] = LLVMGetSymbolSize(si);
            }
            if (si) LLVMDisposeSymbolIterator(si);
            LLVMDisposeBinary(bin);
        }
        LLVMDisposeMemoryBuffer(mb);
    }
    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        mem_free(ctx, size, sizeof *size * (size_t)p->nkernels);
        return;
    }
    for (int32_t q = 0; q < p->nkernels; q++) {
        if ((sel && !sel[q]) || !fns[q]) continue; /* this load's kernels only */
        char line[160];
        int m = snprintf(line, sizeof line, "%llx %llx %s%s\n", (unsigned long long)(uintptr_t)fns[q],
                         (unsigned long long)(size[q] ? size[q] : 1), prefix, p->kernels[q].name);
        if (m > 0 && (size_t)m < sizeof line && write(fd, line, (size_t)m) != m) break;
    }
    close(fd);
    mem_free(ctx, size, sizeof *size * (size_t)p->nkernels);
}

/* Links the objects by ORC, in the context's LLJIT; fns[i] is the address of names[i]. */
static rj_status orc_load(rj_ctx *ctx, struct llvm_jit *j, const unsigned char *const *objs, const size_t *lens,
                          int32_t n, const char *const *names, int32_t nnames, void **fns, llvm_module_code *mc) {
    rj_status s = orc_get(ctx, j);
    if (s) return s;
    LLVMOrcJITDylibRef jd = LLVMOrcLLJITGetMainJITDylib(j->jit);
    LLVMOrcResourceTrackerRef rt = LLVMOrcJITDylibCreateResourceTracker(jd);
    for (int32_t i = 0; i < n && !s; i++) {
        LLVMMemoryBufferRef mb = LLVMCreateMemoryBufferWithMemoryRangeCopy((const char *)objs[i], lens[i], "rj");
        LLVMErrorRef err = LLVMOrcLLJITAddObjectFileWithRT(j->jit, rt, mb); /* takes mb */
        if (err) s = llvm_error(ctx, err, "adding the object to the JIT");
    }
    for (int32_t i = 0; !s && i < nnames; i++) {
        LLVMOrcExecutorAddress addr = 0;
        LLVMErrorRef err = LLVMOrcLLJITLookup(j->jit, &addr, names[i]);
        if (err) s = llvm_error(ctx, err, "linking the machine code");
        fns[i] = (void *)(uintptr_t)addr;
    }
    if (s) {
        LLVMErrorRef e2 = LLVMOrcResourceTrackerRemove(rt);
        if (e2) LLVMConsumeError(e2);
        LLVMOrcReleaseResourceTracker(rt);
        return s;
    }
    mc->rt = rt;
    return RJ_OK;
}

rj_status llvm_load(rj_ctx *ctx, struct llvm_jit *j, const lprog *p, const char *prefix, const bool *sel,
                    const void *obj, size_t len, void **fns, llvm_module_code **code) {
    *code = NULL;
    const unsigned char *b = obj;
    uint64_t n = len >= 8 ? le_get_u64(b) : 0;
    if (n == 0 || n > (uint64_t)p->nkernels + 1)
        return ctx_fail(ctx, RJ_ERR_COMPILE, "object code of %llu files for %d kernels", (unsigned long long)n,
                        (int)p->nkernels);
    size_t nk = (size_t)(p->nkernels ? p->nkernels : 1);
    llvm_module_code *mc = mem_zalloc(ctx, sizeof *mc);
    const unsigned char **objs = mem_alloc(ctx, sizeof *objs * (size_t)n);
    size_t *lens = mem_alloc(ctx, sizeof *lens * (size_t)n);
    char(*names)[96] = mem_alloc(ctx, sizeof *names * nk);
    const char **np = mem_alloc(ctx, sizeof *np * nk);
    int32_t *which = mem_alloc(ctx, sizeof *which * nk); /* the kernel of each name */
    void **addrs = mem_zalloc(ctx, sizeof *addrs * nk);
    rj_status s = mc && objs && lens && names && np && which && addrs ? RJ_OK : RJ_ERR_NOMEM;
    size_t at = 8;
    for (uint64_t i = 0; i < n && !s; i++) {
        uint64_t k = at + 8 <= len ? le_get_u64(b + at) : 0;
        if (at + 8 > len || k > len - at - 8) s = ctx_fail(ctx, RJ_ERR_COMPILE, "object code truncated");
        else {
            objs[i] = b + at + 8;
            lens[i] = (size_t)k;
            at += 8 + (size_t)k;
        }
    }
    int32_t nn = 0;
    for (int32_t i = 0; !s && i < p->nkernels; i++) {
        if (sel && !sel[i]) continue;
        snprintf(names[nn], sizeof *names, "%s%s", prefix, p->kernels[i].name);
        np[nn] = names[nn];
        which[nn++] = i;
    }
    if (!s && j->linker != LINK_ORC) {
        char why[200];
        s = elf_link(ctx, objs, lens, (int32_t)n, resolve_symbol, NULL, np, nn, addrs, &mc->elf, why, sizeof why);
        if (!s && !mc->elf && j->linker == LINK_OWN)
            s = ctx_fail(ctx, RJ_ERR_COMPILE, "ragjit's linker did not take the object code: %s", why);
    }
    if (!s && !mc->elf) s = orc_load(ctx, j, objs, lens, (int32_t)n, np, nn, addrs, mc);
    /* published one by one, release: a run on another thread may be reading fns (cpu.c's
     * kernels compiled on first need) */
    for (int32_t q = 0; !s && q < nn; q++) __atomic_store_n(&fns[which[q]], addrs[q], __ATOMIC_RELEASE);
    if (!s && j->perf_map) perf_map_add(ctx, p, prefix, sel, b, fns);
    mem_free(ctx, objs, sizeof *objs * (size_t)n);
    mem_free(ctx, lens, sizeof *lens * (size_t)n);
    mem_free(ctx, names, sizeof *names * nk);
    mem_free(ctx, np, sizeof *np * nk);
    mem_free(ctx, which, sizeof *which * nk);
    mem_free(ctx, addrs, sizeof *addrs * nk);
    if (s) {
        mem_free(ctx, mc, sizeof *mc);
        return s;
    }
    *code = mc;
    return RJ_OK;
}

void llvm_code_free(rj_ctx *ctx, llvm_module_code *code) {
    if (!code) return;
    if (code->elf) elf_code_free(ctx, code->elf);
    else {
        LLVMErrorRef e = LLVMOrcResourceTrackerRemove(code->rt);
        if (e) LLVMConsumeError(e);
        LLVMOrcReleaseResourceTracker(code->rt);
    }
    mem_free(ctx, code, sizeof *code);
}

/* Owns LLVM's message text: copies it into ragjit memory and disposes of it. */
static char *take_text(rj_ctx *ctx, const char *raw, size_t n) {
    sbuf sb;
    sbuf_init(&sb, ctx);
    for (size_t i = 0; i < n; i++) sbuf_putc(&sb, raw[i]);
    return sbuf_finish(&sb);
}

rj_status llvm_dump(rj_ctx *ctx, struct llvm_jit *j, const lprog *p, char **ir, char **ir_opt,
                    char **asm_text) {
    *ir = NULL;
    if (ir_opt) *ir_opt = NULL;
    if (asm_text) *asm_text = NULL;
    rj_status ts = code_tm(ctx, j); /* the modules' data layout comes from it */
    if (ts) return ts;
    LLVMContextRef c = LLVMContextCreate();
    LLVMContextSetDiagnosticHandler(c, diagnostics, NULL);
    emit_target t = target_of(j);
    int32_t lanes_left = 0;
    LLVMModuleRef m = llvm_emit_module(ctx, c, p, 0, p->nkernels, "rj_", &t, &lanes_left);
    rj_status s = m ? RJ_OK : ctx_last_status(ctx);
    char *raw = NULL;
    if (!s) {
        raw = LLVMPrintModuleToString(m);
        if (!(*ir = take_text(ctx, raw, strlen(raw)))) s = RJ_ERR_NOMEM;
        LLVMDisposeMessage(raw);
    }
    if (!s && ir_opt && !(s = optimise(ctx, j, j->tm, m, pipeline_tier(j, p, 0, p->nkernels, lanes_left)))) {
        raw = LLVMPrintModuleToString(m);
        if (!(*ir_opt = take_text(ctx, raw, strlen(raw)))) s = RJ_ERR_NOMEM;
        LLVMDisposeMessage(raw);
    }
    if (!s && ir_opt && asm_text) {
        char *msg = NULL;
        LLVMMemoryBufferRef buf = NULL;
        if (LLVMTargetMachineEmitToMemoryBuffer(j->tm, m, LLVMAssemblyFile, &msg, &buf)) {
            s = ctx_fail(ctx, RJ_ERR_COMPILE, "emitting assembly: %s", msg ? msg : "");
            LLVMDisposeMessage(msg);
        } else {
            if (!(*asm_text = take_text(ctx, LLVMGetBufferStart(buf), LLVMGetBufferSize(buf))))
                s = RJ_ERR_NOMEM;
            LLVMDisposeMemoryBuffer(buf);
        }
    }
    if (m) LLVMDisposeModule(m);
    LLVMContextDispose(c);
    if (s) {
        rj_string_free(ctx, *ir);
        *ir = NULL;
        if (ir_opt) rj_string_free(ctx, *ir_opt), *ir_opt = NULL;
    }
    return s;
}
