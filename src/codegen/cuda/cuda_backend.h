/*
 * cuda_backend.h — CUDA code generation: loop IR to CUDA C (emit.c) and CUDA C to PTX with
 * NVRTC loaded by dlopen (nvrtc.c). Loading and launching is runtime/cuda.c's.
 */
#ifndef RJ_CUDA_BACKEND_H
#define RJ_CUDA_BACKEND_H

#include "../../ir/loopir.h"

/* CUDA C source of every kernel of p: one `extern "C" __global__` function per kernel. Text to
 * free with rj_string_free; NULL with the error in ctx. */
char *cuda_source(rj_ctx *ctx, const lprog *p);

/* PTX of p compiled by NVRTC for compute capability `arch` (e.g. 90 for compute_90; 0: 90). RJ_ERR_NO_DEVICE when NVRTC cannot be loaded,
 * RJ_ERR_COMPILE with NVRTC's log when compilation fails. Text to free with rj_string_free. */
char *cuda_ptx(rj_ctx *ctx, const lprog *p, int arch);

#endif
