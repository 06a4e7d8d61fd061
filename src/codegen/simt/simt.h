/*
 * simt.h — SIMT code generation: loop IR to CUDA C or OpenCL C 1.2 (emit.c, one printer with two
 * spellings), and CUDA C to PTX with NVRTC loaded by dlopen (nvrtc.c). Building, loading and
 * launching the code is the runtime's business (runtime/cuda.c, runtime/opencl.c).
 */
#ifndef RJ_SIMT_H
#define RJ_SIMT_H

#include "../../ir/loopir.h"

/* CUDA C source of every kernel of p: one `extern "C" __global__` function per kernel. Text to
 * free with rj_string_free; NULL with the error in ctx. */
char *cuda_source(rj_ctx *ctx, const lprog *p);

/* The same kernels in OpenCL C 1.2: one `__kernel` function per kernel, with the same
 * parameters in the same order (pointers are `__global`, 64-bit integers `long`). */
char *opencl_source(rj_ctx *ctx, const lprog *p);

/* Does p compute in double precision anywhere? (OpenCL needs cl_khr_fp64 for it.) */
bool simt_uses_f64(const lprog *p);

/* PTX of p compiled by NVRTC for compute capability `arch` (e.g. 90 for compute_90; 0: 90). RJ_ERR_NO_DEVICE when NVRTC cannot be loaded,
 * RJ_ERR_COMPILE with NVRTC's log when compilation fails. Text to free with rj_string_free. */
char *cuda_ptx(rj_ctx *ctx, const lprog *p, int arch);

#endif
