/*
 * npy.h — reading and writing NumPy .npy files (see npy.c).
 *
 * Supported: format versions 1.0, 2.0 and 3.0 (read), 1.0 (written; 2.0 when the header needs
 * it); C order; little-endian '<f4' '<f8' '<i4' '<i8' and '|b1' (also '|u1' read as bool).
 * Everything that is not supported or malformed is RJ_ERR_IO with a message naming the file
 * and the problem (bad magic, bad header, unsupported dtype, Fortran order, truncated data...).
 */
#ifndef RJ_NPY_H
#define RJ_NPY_H

#include "../util/util.h"

typedef struct npy_array {
    rj_dtype dtype;
    int rank;
    int64_t shape[RJ_MAX_RANK];
    void *data;   /* owned; allocated through the context */
    size_t bytes; /* size of data */
} npy_array;

/* Reads path into *out (zeroed on failure). */
rj_status npy_read(rj_ctx *ctx, const char *path, npy_array *out);
/* Writes an array of rank dims (rank 0: a scalar) to path. */
rj_status npy_write(rj_ctx *ctx, const char *path, rj_dtype dtype, int rank, const int64_t *shape,
                    const void *data);
void npy_free(rj_ctx *ctx, npy_array *a);

#endif
