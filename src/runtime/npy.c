/*
 * npy.c — placeholder; the implementation is being written.
 */
#include "npy.h"

rj_status npy_read(rj_ctx *ctx, const char *path, npy_array *out) {
    (void)out;
    return ctx_fail(ctx, RJ_ERR_UNSUPPORTED, "%s: .npy reading is not implemented yet", path);
}

rj_status npy_write(rj_ctx *ctx, const char *path, rj_dtype dtype, int rank, const int64_t *shape,
                    const void *data) {
    (void)dtype, (void)rank, (void)shape, (void)data;
    return ctx_fail(ctx, RJ_ERR_UNSUPPORTED, "%s: .npy writing is not implemented yet", path);
}

void npy_free(rj_ctx *ctx, npy_array *a) {
    (void)ctx, (void)a;
}
