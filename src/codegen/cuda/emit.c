/*
 * emit.c (CUDA) — placeholder; the implementation is being written.
 */
#include "cuda_backend.h"

char *cuda_source(rj_ctx *ctx, const lprog *p) {
    (void)p;
    ctx_fail(ctx, RJ_ERR_UNSUPPORTED, "the CUDA backend is not implemented yet");
    return NULL;
}
