/*
 * cpu.h — what the CPU target's files share (cpu.c: compile, state and the kernel launch;
 * cpu_gemm.c: the chunk loops of products and attention by a library GEMM).
 *
 * Internal to the runtime: a compiled program's code (the JIT's functions and one libffi call
 * interface per kernel), the context's CPU state, and a kernel's run.
 */
#ifndef RJ_RUNTIME_CPU_H
#define RJ_RUNTIME_CPU_H

#include <ffi.h>

#include "../codegen/llvm/llvm_backend.h"
#include "launch.h"
#include "pool.h"

typedef struct cpu_code cpu_code;

typedef struct cpu_state {
    struct llvm_jit *jit;
    uint64_t compiles;     /* modules JIT-compiled (tests check cache hits with it) */
    uint64_t shared;       /* kernels that ran another kernel's code: a repeat within their
                            * program (lprog_code_dups) or a kernel of another live program */
    kshare kernels;        /* the live programs' kernels by code key (kshare.c) */
    uint64_t disk_hits;    /* modules loaded from the persistent cache instead */
    uint64_t late_compiles, late_disk_hits; /* the same for kernels compiled late (atomic) */
    cpu_code *live;        /* compiled code alive now, by key */
    int64_t stream_bytes;  /* 0: the default threshold */
    int64_t l2_bytes;      /* a core's L2 (GEMM chunks are sized by it) */
    int64_t l3_bytes;      /* the last-level cache, 0 if unknown (stash_bytes) */
    int64_t env_stream_bytes; /* RAGJIT_NT_BYTES, or the default */
    int64_t env_stash_bytes;  /* RAGJIT_STASH_BYTES, or -1: from the caches (stash_bytes) */
    pool *pool;               /* the workers (started by the first run that wants them) */
} cpu_state;

typedef struct cpu_kernel {
    ffi_cif cif;
    ffi_type **types;
    int32_t n;
} cpu_kernel;

struct cpu_code {
    llvm_module_code *mc;
    llvm_module_code *mc_late; /* the kernels compiled late (compiled_late), once one is needed */
    int32_t nk;
    void **fns;            /* per kernel; a late kernel's is NULL until compiled (atomic) */
    cpu_kernel *kern;
    sbuf key;              /* the build, LLVM's identity and the loop IR's fingerprint */
    bool cacheable;        /* the build is identified: the persistent cache may keep the code */
    char prefix[40];       /* of the kernels' symbols */
    int refs;              /* code entries sharing it (graphs that lower to equal loop IR),
                            * and programs whose kernels run code of its module (deps) */
    cpu_code **deps;       /* the code whose kernels this program's run instead of their own */
    int32_t ndeps;
    cpu_code *next;        /* cpu_state.live */
};

#define MAX_THREADS 256
/* Chunks per thread: the last chunks bound how long the caller waits for a worker that shares
 * its core with another process (it runs at half speed there). With one of two cores busy a
 * 1 ms softmax ran 0.86-0.95x of its 1-thread time with 16, 1.05-1.06x with 4 (bench_busy,
 * W2 small, alternating); large runs were the same with either. */
#define CHUNKS_PER_THREAD 16
#define SMALL_WORK 16384
#define MAX_PARAMS 64

typedef struct run {
    const cpu_code *code;
    const lkernel *k;
    int32_t ki;
    const run_view *v;
    const launch_plan *pl;
    const launch_mem *m;
    bool nt;
} run;

/* The run's scratch, at least `bytes`: one block serves every kernel in turn, reserved against
 * the memory limit as it grows (*reserved: what this run reserved so far). NULL with *s set;
 * NULL with *s RJ_OK when o->dry (sized only). */
void *cpu_run_scratch(const run_view *v, const launch_opts *o, int64_t bytes, int64_t *reserved, const char *what,
                      rj_status *s);
/* Every page of [mem, mem + bytes) faulted in (for writing, contents kept), a slice per thread
 * of the pool (cpu_gemm.c says why). */
void cpu_touch(rj_ctx *ctx, void *mem, size_t bytes);
/* host_block_fresh, with what it allocated anew touched (cpu_touch) and advised as huge pages
 * (host_block_advise): before the touch when early (rj_bind_prepare) or in a run after the
 * binding's first (host_mem.ran: huge pages at once), after it in the first run (small pages
 * now, merged later; cpu_gemm.c says why); what the block held before is not kept. NULL with
 * *s set. */
void *cpu_block_get(const run_view *v, host_block *blk, size_t bytes, bool early, rj_status *s);
/* The bytes of a multi-pass item kernel's stash a worker may fill (cpu.c says how). */
int64_t cpu_stash_bytes(const cpu_state *st, int workers);
/* Before a run's kernels: drops what the binding kept of constant inputs (rj_bind_constant)
 * that were bound again since, or no longer promised, counts the rest against the memory
 * limit, and gives the run the copies it makes (all of them where dry), their pages touched
 * (cpu_gemm.c). */
rj_status cpu_consts_settle(const run_view *v, bool dry);
/* Bytes a kernel writes above which its streaming stores bypass the cache (RAGJIT_NT_BYTES). */
int64_t cpu_stream_threshold(rj_ctx *ctx);
/* Kernel ki, the epilogue of a library GEMM (lkernel.gemm): its chunk loop (cpu_gemm.c). */
rj_status cpu_run_gemm(const cpu_code *code, const lprog *lp, int32_t ki, const run_view *v, const launch_opts *o,
                       launch_mem *m, int64_t *scratch_reserved);

#endif
