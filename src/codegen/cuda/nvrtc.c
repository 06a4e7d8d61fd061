/*
 * nvrtc.c — placeholder; the implementation is being written.
 */
#include "../../runtime/runtime.h"
#include "cuda_backend.h"

char *cuda_ptx(rj_ctx *ctx, const lprog *p, int arch) {
    (void)p, (void)arch;
    ctx_fail(ctx, RJ_ERR_UNSUPPORTED, "the CUDA backend is not implemented yet");
    return NULL;
}

static rj_status cuda_compile(rj_program *p) {
    return ctx_fail(p->ctx, RJ_ERR_UNSUPPORTED, "the CUDA target is not implemented yet");
}

static rj_status cuda_run(rj_program *p, rj_bind *b) {
    (void)b;
    return ctx_fail(p->ctx, RJ_ERR_UNSUPPORTED, "the CUDA target is not implemented yet");
}

static void cuda_release(rj_program *p) {
    (void)p;
}

const backend backend_cuda = {"cuda", cuda_compile, cuda_run, cuda_release};
