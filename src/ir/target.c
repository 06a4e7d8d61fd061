/*
 * target.c — the target descriptors lowering reads (target.h).
 *
 * The CPU's descriptor describes the host, so it is probed: cache sizes from sysconf, the
 * widest vector register from the CPU's feature bits. Probing is cheap but not free, and the
 * answer cannot change while the process runs, so it happens once, under pthread_once: every
 * later caller, on any thread, reads the same finished, never-written-again struct. That is
 * the one piece of process-wide state here, and it is immutable after its initialisation,
 * which is what makes it safe where a mutable global would not be.
 *
 * The CUDA descriptor is a constant describing a Hopper-class device (H100): 32-thread warps,
 * 16-byte vector loads, the default 48 KiB of shared memory a block may use without opting in,
 * 1024 threads per block, a 50 MiB L2. The OpenCL descriptor describes no device in
 * particular, since the same kernels run on PoCL's CPU device and on GPUs of every vendor: 128
 * work-items make a work-group (four 32-wide warps on NVIDIA, two 64-wide waves on AMD, and
 * within the 256 that nearly every OpenCL device allows), with the 32 KiB of local memory the
 * OpenCL 1.2 full profile guarantees. A runtime that knows its device may describe it better;
 * lowering only needs the shape of the machine, not its exact sizes. The reference
 * interpreter runs the CPU's lowering, so it shares the CPU's descriptor.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ragjit.h"
#include "target.h"

static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;
static target_desc cpu_desc;

/* A cache size from sysconf, or fallback where the C library does not know it (0 or -1). */
static int64_t cache_bytes(int name, int64_t fallback) {
    long v = sysconf(name);
    return v > 0 ? (int64_t)v : fallback;
}

/* Rows a sum over the ragged dim reads per step. Eight rows folded pairwise before they meet
 * the accumulator cut its loads and stores to an eighth, which paid on the machine where it
 * was tuned; on an AMD Zen 4 eight interleaved row streams read slower than one sequential
 * stream (the hardware prefetchers follow one stream, not eight 1 KiB apart), so AMD
 * processors read one row a step (bench/NOTES.md, "Row streams"). RAGJIT_ROW_STREAMS=1|8
 * overrides the choice, for measuring it on other machines. */
static int32_t row_streams(void) {
    const char *e = getenv("RAGJIT_ROW_STREAMS");
    if (e && (!strcmp(e, "1") || !strcmp(e, "8"))) return e[0] - '0';
#if defined(__x86_64__) || defined(__i386__)
    if (__builtin_cpu_is("amd")) return 1;
#endif
    return 8;
}

static void probe_cpu(void) {
    int32_t vec = 16; /* SSE2 / NEON: every CPU LLVM targets for us has 16-byte vectors */
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) vec = 64;
    else if (__builtin_cpu_supports("avx2")) vec = 32;
#endif
    cpu_desc = (target_desc){
        .name = "cpu",
        .simt = false,
        .warp = 1,
        .vector_bytes = vec,
#ifdef _SC_LEVEL1_DCACHE_SIZE
        .l1_bytes = cache_bytes(_SC_LEVEL1_DCACHE_SIZE, 32 << 10),
        .l2_bytes = cache_bytes(_SC_LEVEL2_CACHE_SIZE, 1 << 20),
        .l3_bytes = cache_bytes(_SC_LEVEL3_CACHE_SIZE, 0),
#else
        .l1_bytes = 32 << 10,
        .l2_bytes = 1 << 20,
#endif
        .shared_bytes = 0,
        .max_block = 1,
        .row_streams = row_streams(),
        .tile_registers = vec >= 64 ? 8 : 4,
        .row_registers = 2,
        .gemm_lib = true, /* where a BLAS loads (asked only when a program has a product) */
    };
}

static const target_desc cuda_desc = {
    .name = "cuda",
    .simt = true,
    .warp = 32,
    .vector_bytes = 16,
    .l1_bytes = 256 << 10,
    .l2_bytes = 50 << 20,
    .shared_bytes = 48 << 10,
    .max_block = 1024,
    .row_streams = 8,
    .shuffles = true,
};

static const target_desc opencl_desc = {
    .name = "opencl",
    .simt = true,
    .warp = 32,
    .vector_bytes = 16,
    .l1_bytes = 64 << 10,
    .l2_bytes = 4 << 20,
    .shared_bytes = 32 << 10,
    .max_block = 256,
    .row_streams = 8,
};

const target_desc *target_desc_for(int target) {
    switch (target) {
    case RJ_TARGET_CPU:
    case RJ_TARGET_REFERENCE:
        pthread_once(&cpu_once, probe_cpu);
        return &cpu_desc;
    case RJ_TARGET_CUDA: return &cuda_desc;
    case RJ_TARGET_OPENCL: return &opencl_desc;
    default: return NULL;
    }
}
