/*
 * target.h — target descriptors: what lowering may assume about the machine, as plain data.
 *
 * Lowering picks a kernel template per op family by reading a descriptor, never by asking
 * which backend it serves (DESIGN.md §3): a CPU wants L2-sized tiles, scratch per thread and
 * a vectorisable inner loop; a SIMT target wants coalesced grid-stride loops, one warp per
 * row, one block per (item, tile) with block-level reductions. Everything a template needs to
 * make that choice is here, and nothing else: no function pointers, no backend state, so the
 * IR layer stays below codegen. target.c holds one descriptor per target: the CPU's probed
 * from the host once (cache sizes, vector width), the others constants that dumps and
 * compilation use when nothing better is known.
 */
#ifndef RJ_TARGET_H
#define RJ_TARGET_H

#include <stdbool.h>
#include <stdint.h>

typedef struct target_desc {
    const char *name;        /* "cpu", "cuda", "opencl", "reference" */
    bool simt;               /* units are blocks and lanes are threads of a block */
    int32_t warp;            /* SIMT: threads that run in lockstep (1 on a CPU) */
    int32_t vector_bytes;    /* widest vector register (CPU) or load (SIMT), in bytes */
    int64_t l1_bytes;        /* per core / per SM */
    int64_t l2_bytes;        /* per core (CPU) or device-wide (SIMT) */
    int64_t l3_bytes;        /* CPU: the last-level cache shared by the cores (0: none known) */
    int64_t shared_bytes;    /* SIMT: shared memory a block may use; 0 on a CPU */
    int32_t max_block;       /* SIMT: most threads in a block; 1 on a CPU */
    bool shuffles;           /* SIMT: the threads of a warp can exchange registers (CUDA's
                              * __shfl_xor_sync); without, reductions across threads go
                              * through block-shared memory (OpenCL C 1.2) */
    int32_t row_streams;     /* rows a column reduction (a sum over the ragged dim) reads per
                              * step, 1 or 8: on a CPU probed (row_streams in target.c); 8 on
                              * SIMT targets (eight independent loads in flight a thread) */
    int32_t tile_registers;  /* CPU: vector registers of accumulators a softmax's constant column
                              * tile takes (lower/items.c: state_tile): 8 of AVX-512's 32, else 4
                              * of 16; 0 on SIMT targets */
    int32_t row_registers;   /* CPU: a softmax over rows of at most this many vector registers
                              * takes the whole row as its constant tile (2) */
    bool gemm_lib;           /* matrix products may call a library GEMM on chunks of rows (the
                              * CPU, where a BLAS loads: util/blas.c); else the JIT's own kernel */
} target_desc;

/* The descriptors lowering uses when dumping or compiling for a target (rj_target values). The
 * CPU's is the host's, probed once; the CUDA one is a Hopper-class default, the OpenCL one
 * a portable one for any OpenCL device. */
const target_desc *target_desc_for(int target);

#endif
