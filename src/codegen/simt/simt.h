/*
 * simt.h — SIMT code generation: loop IR to CUDA C or OpenCL C 1.2 (emit.c and the pieces emit.h
 * lists: one printer with two spellings), and CUDA C to PTX and machine code with NVRTC loaded
 * by dlopen (nvrtc.c).
 * Building, loading and launching the code is the runtime's business (runtime/cuda.c,
 * runtime/opencl.c).
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
/* The RAGJIT_SIMT_* experiment settings in force, as text for a cache key ("" when none). */
void simt_knobs(char *buf, size_t n);

/* PTX of p compiled by NVRTC for compute capability `arch` (e.g. 90 for compute_90; 0: 90).
 * RJ_ERR_NO_DEVICE when NVRTC cannot be loaded, RJ_ERR_COMPILE with NVRTC's log when
 * compilation fails. Text to free with rj_string_free. */
char *cuda_ptx(rj_ctx *ctx, const lprog *p, int arch);

/* What NVRTC made of a program: its PTX and, where asked for and NVRTC supports the
 * architecture itself, the machine code (a cubin for sm_<arch>; else NULL). */
typedef struct cuda_image {
    char *ptx;            /* rj_string_free */
    unsigned char *cubin; /* ragjit memory, cubin_len bytes */
    size_t cubin_len;
} cuda_image;

/* cuda_ptx's compile into *out, with machine_code the cubin too (one NVRTC compile). Errors as
 * cuda_ptx's; *out is empty on failure. */
rj_status cuda_image_build(rj_ctx *ctx, const lprog *p, int arch, bool machine_code, cuda_image *out);
void cuda_image_free(rj_ctx *ctx, cuda_image *im);

/* An image as bytes (the persistent cache's entry, ragjit memory in *data) and back: unpack
 * accepts only what pack writes (lengths that add up to len, PTX ending at its one NUL), else
 * false with *out empty, as on a failed allocation. */
rj_status cuda_image_pack(rj_ctx *ctx, const cuda_image *im, void **data, size_t *len);
bool cuda_image_unpack(rj_ctx *ctx, const void *data, size_t len, cuda_image *out);

#endif
