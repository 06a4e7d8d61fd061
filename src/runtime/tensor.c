/*
 * tensor.c — jagged and dense tensors at run time, and offsets validation.
 *
 * The layout is PyTorch's jagged NJT: packed values (rows x inner) plus int64 offsets of
 * length B+1; a view with holes (torch.nested.narrow over a padded buffer) adds lengths, and
 * row b then spans offsets[b] .. offsets[b] + lengths[b]. Constructors mirror torch.nested:
 * from components (copy), from values + offsets (no copy), from padded + lengths (a view), and
 * back to padded, unbind and contiguous.
 *
 * offsets_check is the single place that decides whether offsets are well formed; bindings
 * use it too, so a tensor and a raw binding fail with the same status and message shape.
 */
#include <string.h>

#include "runtime.h"

rj_status offsets_check(rj_ctx *ctx, const char *what, int64_t batch, const int64_t *off,
                        const int64_t *len, int64_t *rows_out, int64_t *maxlen_out) {
    if (batch < 0)
        return ctx_fail(ctx, RJ_ERR_BATCH, "%s: batch size %lld is negative", what,
                        (long long)batch);
    if (!off) return ctx_fail(ctx, RJ_ERR_ARG, "%s: offsets is NULL", what);
    int64_t rows = 0, maxlen = 0;
    if (!len) {
        if (off[0] != 0)
            return ctx_fail(ctx, RJ_ERR_OFFSETS_START, "%s: offsets[0] is %lld, expected 0", what,
                            (long long)off[0]);
        for (int64_t b = 0; b < batch; b++) {
            if (off[b + 1] < off[b])
                return ctx_fail(ctx, RJ_ERR_OFFSETS_ORDER, "%s: offsets decrease at index %lld "
                                "(%lld after %lld)", what, (long long)(b + 1),
                                (long long)off[b + 1], (long long)off[b]);
            int64_t l = off[b + 1] - off[b];
            if (l > maxlen) maxlen = l;
        }
        rows = off[batch];
    } else {
        for (int64_t b = 0; b < batch; b++) {
            int64_t end;
            if (off[b] < 0)
                return ctx_fail(ctx, RJ_ERR_OFFSETS_START, "%s: offsets[%lld] is negative (%lld)",
                                what, (long long)b, (long long)off[b]);
            if (len[b] < 0)
                return ctx_fail(ctx, RJ_ERR_OFFSETS_ORDER, "%s: lengths[%lld] is negative (%lld)",
                                what, (long long)b, (long long)len[b]);
            if (!add_i64(off[b], len[b], &end))
                return ctx_fail(ctx, RJ_ERR_OVERFLOW, "%s: offsets[%lld] + lengths[%lld] "
                                "overflows", what, (long long)b, (long long)b);
            if (end > rows) rows = end;
            if (len[b] > maxlen) maxlen = len[b];
        }
    }
    if (rows_out) *rows_out = rows;
    if (maxlen_out) *maxlen_out = maxlen;
    return RJ_OK;
}

static rj_tensor *tensor_alloc(rj_ctx *ctx) {
    rj_tensor *t = mem_zalloc(ctx, sizeof *t);
    if (t) t->ctx = ctx;
    return t;
}

void rj_tensor_free(rj_tensor *t) {
    if (!t || t->owned_by_bind) return;
    rj_ctx *ctx = t->ctx;
    mem_free_data(ctx, t->own_values, t->own_bytes);
    if (t->own_offsets) mem_free(ctx, t->own_offsets, sizeof(int64_t) * (size_t)(t->own_batch + 1));
    if (t->own_lengths) mem_free(ctx, t->own_lengths, sizeof(int64_t) * (size_t)(t->own_batch ? t->own_batch : 1));
    mem_free(ctx, t, sizeof *t);
}

rj_status rj_tensor_get_info(const rj_tensor *t, rj_tensor_info *info) {
    if (!t || !info) return RJ_ERR_ARG;
    *info = t->info;
    return RJ_OK;
}

/* Product of shape[from..rank) with overflow checking, by NumPy's rule (util.h's
 * shape_count): the same shapes are refused whatever the order of their dims, and every
 * partial product of an accepted shape fits. */
static rj_status shape_numel(rj_ctx *ctx, const char *what, int rank, const int64_t *shape,
                             int from, int64_t *out) {
    for (int i = from; i < rank; i++)
        if (shape[i] < 0)
            return ctx_fail(ctx, RJ_ERR_SIZE, "%s: dim %d is negative (%lld)", what, i,
                            (long long)shape[i]);
    if (rank > from && !shape_count(rank - from, shape + from, out, NULL))
        return ctx_fail(ctx, RJ_ERR_OVERFLOW, "%s: the element count overflows", what);
    if (rank <= from) *out = 1; /* shape may be NULL then */
    return RJ_OK;
}

static bool check_dtype_rank(rj_ctx *ctx, const char *what, rj_dtype dt, int rank, int lo,
                             const void *shape) {
    if ((unsigned)dt >= RJ_DTYPE_COUNT) {
        ctx_fail(ctx, RJ_ERR_ARG, "%s: invalid dtype %d", what, (int)dt);
        return false;
    }
    if (rank < lo || rank > RJ_MAX_RANK || (rank > 0 && !shape)) {
        ctx_fail(ctx, RJ_ERR_ARG, "%s: rank %d is out of range %d..%d%s", what, rank, lo,
                 RJ_MAX_RANK, rank > 0 && !shape ? " or shape is NULL" : "");
        return false;
    }
    return true;
}

static int64_t *copy_i64(rj_ctx *ctx, const int64_t *src, int64_t n) {
    int64_t *d = mem_alloc(ctx, sizeof(int64_t) * (size_t)(n ? n : 1));
    if (d && n) memcpy(d, src, sizeof(int64_t) * (size_t)n);
    return d;
}

rj_tensor *rj_tensor_dense(rj_ctx *ctx, rj_dtype dtype, int rank, const int64_t *shape,
                           void *data) {
    const char *what = "rj_tensor_dense";
    if (!ctx || !check_dtype_rank(ctx, what, dtype, rank, 0, shape)) return NULL;
    int64_t numel;
    size_t bytes;
    if (shape_numel(ctx, what, rank, shape, 0, &numel)) return NULL;
    if (!bytes_of(numel, rj_dtype_size(dtype), &bytes)) {
        ctx_fail(ctx, RJ_ERR_OVERFLOW, "%s: %lld elements overflow the address space", what,
                 (long long)numel);
        return NULL;
    }
    rj_tensor *t = tensor_alloc(ctx);
    if (!t) return NULL;
    if (!data) {
        if (!(t->own_values = mem_alloc_data(ctx, bytes))) {
            rj_tensor_free(t);
            return NULL;
        }
        memset(t->own_values, 0, bytes ? bytes : 1);
        t->own_bytes = bytes ? bytes : 1;
        data = t->own_values;
    }
    t->info = (rj_tensor_info){.dtype = dtype, .rank = rank, .ragged_dim = -1, .values = data,
                               .rows = numel};
    if (rank) memcpy(t->info.shape, shape, sizeof(int64_t) * (size_t)rank);
    return t;
}

rj_tensor *tensor_adopt_dense(rj_ctx *ctx, rj_dtype dtype, int rank, const int64_t *shape,
                              void *data, size_t bytes) {
    rj_tensor *t = rj_tensor_dense(ctx, dtype, rank, shape, data);
    if (!t) {
        mem_free_data(ctx, data, bytes);
        return NULL;
    }
    t->own_values = data;
    t->own_bytes = bytes;
    return t;
}

rj_tensor *rj_tensor_from_values(rj_ctx *ctx, rj_dtype dtype, int inner_rank,
                                 const int64_t *inner, void *values, int64_t rows,
                                 const int64_t *offsets, int64_t batch) {
    const char *what = "rj_tensor_from_values";
    if (!ctx || !check_dtype_rank(ctx, what, dtype, inner_rank + 2, 2,
                                       inner_rank ? (const void *)inner : "x"))
        return NULL;
    int64_t n_inner, numel, nrows, maxlen;
    size_t bytes;
    if (shape_numel(ctx, what, inner_rank, inner, 0, &n_inner)) return NULL;
    if (rows < 0) {
        ctx_fail(ctx, RJ_ERR_SIZE, "%s: rows is negative (%lld)", what, (long long)rows);
        return NULL;
    }
    if (!mul_i64(rows, n_inner, &numel) || !bytes_of(numel, rj_dtype_size(dtype), &bytes)) {
        ctx_fail(ctx, RJ_ERR_OVERFLOW, "%s: %lld rows overflow the address space", what,
                 (long long)rows);
        return NULL;
    }
    if (!values && numel > 0) {
        ctx_fail(ctx, RJ_ERR_ARG, "%s: values is NULL", what);
        return NULL;
    }
    if (offsets_check(ctx, what, batch, offsets, NULL, &nrows, &maxlen)) return NULL;
    if (nrows != rows) {
        ctx_fail(ctx, RJ_ERR_OFFSETS_END, "%s: offsets end at %lld (index %lld) but values "
                 "have %lld rows", what, (long long)nrows, (long long)batch, (long long)rows);
        return NULL;
    }
    rj_tensor *t = tensor_alloc(ctx);
    if (!t) return NULL;
    t->info = (rj_tensor_info){.dtype = dtype, .rank = inner_rank + 2, .ragged_dim = 1,
                               .values = values, .rows = rows, .offsets = offsets};
    t->info.shape[0] = batch;
    t->info.shape[1] = maxlen;
    for (int i = 0; i < inner_rank; i++) t->info.shape[i + 2] = inner[i];
    return t;
}

rj_tensor *rj_tensor_from_components(rj_ctx *ctx, rj_dtype dtype, int64_t n,
                                     const void *const *data, const int *ranks,
                                     const int64_t *const *shapes) {
    const char *what = "rj_tensor_from_components";
    if (!ctx) return NULL;
    if (n < 0 || (n > 0 && (!data || !ranks || !shapes))) {
        ctx_fail(ctx, RJ_ERR_ARG, "%s: %s", what, n < 0 ? "negative count" : "NULL array");
        return NULL;
    }
    if (n == 0) {
        ctx_fail(ctx, RJ_ERR_ARG, "%s: no components (the inner shape is unknown; use "
                 "rj_tensor_from_values)", what);
        return NULL;
    }
    if (!check_dtype_rank(ctx, what, dtype, ranks[0] + 1, 2, shapes[0])) return NULL;
    int rank = ranks[0];
    int64_t n_inner, total = 0, maxlen = 0;
    if (!shapes[0] || shape_numel(ctx, what, rank, shapes[0], 1, &n_inner)) return NULL;
    for (int64_t k = 0; k < n; k++) {
        if (ranks[k] != rank) {
            ctx_fail(ctx, RJ_ERR_SHAPE, "%s: component %lld has rank %d but component 0 has "
                     "rank %d (all components must have the same rank)", what, (long long)k,
                     ranks[k], rank);
            return NULL;
        }
        if (!shapes[k]) {
            ctx_fail(ctx, RJ_ERR_ARG, "%s: shape of component %lld is NULL", what, (long long)k);
            return NULL;
        }
        for (int d = 1; d < rank; d++)
            if (shapes[k][d] != shapes[0][d]) {
                ctx_fail(ctx, RJ_ERR_SHAPE, "%s: component %lld has size %lld in dim %d but "
                         "component 0 has %lld (only dim 0 may vary)", what, (long long)k,
                         (long long)shapes[k][d], d, (long long)shapes[0][d]);
                return NULL;
            }
        if (shapes[k][0] < 0) {
            ctx_fail(ctx, RJ_ERR_SIZE, "%s: component %lld has negative length", what,
                     (long long)k);
            return NULL;
        }
        if (shapes[k][0] > 0 && n_inner > 0 && !data[k]) {
            ctx_fail(ctx, RJ_ERR_ARG, "%s: data of component %lld is NULL", what, (long long)k);
            return NULL;
        }
        if (!add_i64(total, shapes[k][0], &total)) {
            ctx_fail(ctx, RJ_ERR_OVERFLOW, "%s: total row count overflows", what);
            return NULL;
        }
        if (shapes[k][0] > maxlen) maxlen = shapes[k][0];
    }
    int64_t numel;
    size_t es = rj_dtype_size(dtype), bytes;
    if (!mul_i64(total, n_inner, &numel) || !bytes_of(numel, es, &bytes) ||
        n > INT64_MAX / 8 - 1) {
        ctx_fail(ctx, RJ_ERR_OVERFLOW, "%s: the packed size overflows", what);
        return NULL;
    }
    rj_tensor *t = tensor_alloc(ctx);
    if (!t) return NULL;
    t->own_batch = n;
    t->own_bytes = bytes ? bytes : 1;
    if (!(t->own_values = mem_alloc_data(ctx, t->own_bytes)) ||
        !(t->own_offsets = mem_alloc(ctx, sizeof(int64_t) * (size_t)(n + 1)))) {
        rj_tensor_free(t);
        return NULL;
    }
    int64_t row = 0;
    t->own_offsets[0] = 0;
    for (int64_t k = 0; k < n; k++) {
        size_t kb = (size_t)(shapes[k][0] * n_inner) * es;
        if (kb) memcpy((char *)t->own_values + (size_t)(row * n_inner) * es, data[k], kb);
        row += shapes[k][0];
        t->own_offsets[k + 1] = row;
    }
    t->info = (rj_tensor_info){.dtype = dtype, .rank = rank + 1, .ragged_dim = 1,
                               .values = t->own_values, .rows = total,
                               .offsets = t->own_offsets};
    t->info.shape[0] = n;
    t->info.shape[1] = maxlen;
    for (int d = 1; d < rank; d++) t->info.shape[d + 1] = shapes[0][d];
    return t;
}

rj_tensor *rj_tensor_from_padded(rj_ctx *ctx, rj_dtype dtype, int rank, const int64_t *shape,
                                 void *padded, const int64_t *lengths) {
    const char *what = "rj_tensor_from_padded";
    if (!ctx || !check_dtype_rank(ctx, what, dtype, rank, 2, shape)) return NULL;
    int64_t numel, B = shape[0], L = shape[1], maxlen = 0;
    size_t bytes;
    if (shape_numel(ctx, what, rank, shape, 0, &numel)) return NULL;
    if (!bytes_of(numel, rj_dtype_size(dtype), &bytes)) {
        ctx_fail(ctx, RJ_ERR_OVERFLOW, "%s: the padded size overflows", what);
        return NULL;
    }
    if ((!padded && numel > 0) || (!lengths && B > 0)) {
        ctx_fail(ctx, RJ_ERR_ARG, "%s: %s is NULL", what, !padded ? "padded" : "lengths");
        return NULL;
    }
    for (int64_t b = 0; b < B; b++) {
        if (lengths[b] < 0) {
            ctx_fail(ctx, RJ_ERR_OFFSETS_ORDER, "%s: lengths[%lld] is negative (%lld)", what,
                     (long long)b, (long long)lengths[b]);
            return NULL;
        }
        if (lengths[b] > L) {
            ctx_fail(ctx, RJ_ERR_SIZE, "%s: lengths[%lld] = %lld exceeds the padded length %lld",
                     what, (long long)b, (long long)lengths[b], (long long)L);
            return NULL;
        }
        if (lengths[b] > maxlen) maxlen = lengths[b];
    }
    rj_tensor *t = tensor_alloc(ctx);
    if (!t) return NULL;
    t->own_batch = B;
    if (!(t->own_offsets = mem_alloc(ctx, sizeof(int64_t) * (size_t)(B + 1))) ||
        !(t->own_lengths = copy_i64(ctx, lengths, B))) {
        rj_tensor_free(t);
        return NULL;
    }
    for (int64_t b = 0; b <= B; b++) t->own_offsets[b] = b * L;
    t->info = (rj_tensor_info){.dtype = dtype, .rank = rank, .ragged_dim = 1, .values = padded,
                               .rows = B * L, .offsets = t->own_offsets,
                               .lengths = t->own_lengths};
    memcpy(t->info.shape, shape, sizeof(int64_t) * (size_t)rank);
    t->info.shape[1] = maxlen;
    return t;
}

static int64_t inner_numel(const rj_tensor_info *in) {
    int64_t n = 1;
    for (int d = 2; d < in->rank; d++) n *= in->shape[d];
    return n;
}

/* v converted as the graph's pad converts its value (a cast: integers saturate, NaN is 0),
 * so rj_tensor_to_padded and pad agree, and no value is undefined behaviour */
static void fill_value(void *dst, rj_dtype t, int64_t n, double v) {
    int64_t iv = t == RJ_I32 || t == RJ_I64 ? cast_float_to_int(v, t) : 0;
    switch (t) {
    case RJ_BOOL: memset(dst, v != 0, (size_t)n); break;
    case RJ_I32: for (int64_t i = 0; i < n; i++) ((int32_t *)dst)[i] = (int32_t)iv; break;
    case RJ_I64: for (int64_t i = 0; i < n; i++) ((int64_t *)dst)[i] = iv; break;
    case RJ_F32: for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = (float)v; break;
    case RJ_F16:
    case RJ_BF16: {
        uint16_t h = half_from_f32((float)v, t == RJ_BF16);
        for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = h;
        break;
    }
    default: for (int64_t i = 0; i < n; i++) ((double *)dst)[i] = v; break;
    }
}

rj_tensor *rj_tensor_to_padded(const rj_tensor *t, double value, int64_t len) {
    if (!t) return NULL;
    const rj_tensor_info *in = &t->info;
    rj_ctx *ctx = t->ctx;
    if (in->ragged_dim != 1) {
        ctx_fail(ctx, RJ_ERR_ARG, "rj_tensor_to_padded: the tensor is not jagged");
        return NULL;
    }
    if (in->ragged_dims == 2) {
        ctx_fail(ctx, RJ_ERR_UNSUPPORTED, "rj_tensor_to_padded: a tensor with two ragged dims is not supported yet");
        return NULL;
    }
    int64_t maxlen = in->shape[1], B = in->shape[0];
    if (len < 0) len = maxlen;
    if (len < maxlen) {
        for (int64_t b = 0; b < B; b++)
            if (row_len(in->offsets, in->lengths, b) > len) {
                ctx_fail(ctx, RJ_ERR_PAD_LEN, "rj_tensor_to_padded: length %lld is shorter than "
                         "row %lld (%lld rows); truncation is not supported", (long long)len,
                         (long long)b, (long long)row_len(in->offsets, in->lengths, b));
                return NULL;
            }
    }
    int64_t shape[RJ_MAX_RANK];
    memcpy(shape, in->shape, sizeof shape);
    shape[1] = len;
    rj_tensor *o = rj_tensor_dense(ctx, in->dtype, in->rank, shape, NULL);
    if (!o) return NULL;
    size_t es = rj_dtype_size(in->dtype);
    int64_t inner = inner_numel(in);
    for (int64_t b = 0; b < B; b++) {
        int64_t l = row_len(in->offsets, in->lengths, b);
        char *dst = (char *)o->info.values + (size_t)(b * len * inner) * es;
        if (l) memcpy(dst, (char *)in->values + (size_t)(in->offsets[b] * inner) * es,
                      (size_t)(l * inner) * es);
        fill_value(dst + (size_t)(l * inner) * es, in->dtype, (len - l) * inner, value);
    }
    return o;
}

rj_tensor *rj_tensor_contiguous(const rj_tensor *t) {
    if (!t) return NULL;
    const rj_tensor_info *in = &t->info;
    rj_ctx *ctx = t->ctx;
    if (in->ragged_dims == 2) {
        ctx_fail(ctx, RJ_ERR_UNSUPPORTED, "rj_tensor_contiguous: a tensor with two ragged dims is not supported yet "
                 "(its blocks are packed already)");
        return NULL;
    }
    if (in->ragged_dim < 0) {
        rj_tensor *o = rj_tensor_dense(ctx, in->dtype, in->rank, in->shape, NULL);
        if (o && o->own_bytes && in->rows)
            memcpy(o->info.values, in->values, (size_t)in->rows * rj_dtype_size(in->dtype));
        return o;
    }
    int64_t B = in->shape[0], inner = inner_numel(in), total = 0;
    for (int64_t b = 0; b < B; b++) total += row_len(in->offsets, in->lengths, b);
    size_t es = rj_dtype_size(in->dtype), bytes = (size_t)(total * inner) * es;
    rj_tensor *o = tensor_alloc(ctx);
    if (!o) return NULL;
    o->own_batch = B;
    o->own_bytes = bytes ? bytes : 1;
    if (!(o->own_values = mem_alloc_data(ctx, o->own_bytes)) ||
        !(o->own_offsets = mem_alloc(ctx, sizeof(int64_t) * (size_t)(B + 1)))) {
        rj_tensor_free(o);
        return NULL;
    }
    int64_t row = 0;
    o->own_offsets[0] = 0;
    for (int64_t b = 0; b < B; b++) {
        int64_t l = row_len(in->offsets, in->lengths, b);
        if (l) memcpy((char *)o->own_values + (size_t)(row * inner) * es,
                      (char *)in->values + (size_t)(in->offsets[b] * inner) * es,
                      (size_t)(l * inner) * es);
        row += l;
        o->own_offsets[b + 1] = row;
    }
    o->info = *in;
    o->info.values = o->own_values;
    o->info.rows = total;
    o->info.offsets = o->own_offsets;
    o->info.lengths = NULL;
    return o;
}

rj_status rj_tensor_unbind(const rj_tensor *t, rj_tensor_info *views, int64_t capacity) {
    if (!t) return RJ_ERR_ARG;
    const rj_tensor_info *in = &t->info;
    if (in->ragged_dim != 1)
        return ctx_fail(t->ctx, RJ_ERR_ARG, "rj_tensor_unbind: the tensor is not jagged");
    if (in->ragged_dims == 2)
        return ctx_fail(t->ctx, RJ_ERR_UNSUPPORTED, "rj_tensor_unbind: a tensor with two ragged dims is not "
                        "supported yet");
    int64_t B = in->shape[0];
    if (!views && B > 0) return ctx_fail(t->ctx, RJ_ERR_ARG, "rj_tensor_unbind: views is NULL");
    if (capacity < B)
        return ctx_fail(t->ctx, RJ_ERR_SIZE, "rj_tensor_unbind: room for %lld views but the "
                        "tensor has %lld components", (long long)capacity, (long long)B);
    size_t es = rj_dtype_size(in->dtype);
    int64_t inner = inner_numel(in);
    for (int64_t b = 0; b < B; b++) {
        int64_t l = row_len(in->offsets, in->lengths, b);
        rj_tensor_info *v = &views[b];
        *v = (rj_tensor_info){.dtype = in->dtype, .rank = in->rank - 1, .ragged_dim = -1,
                              .values = (char *)in->values + (size_t)(in->offsets[b] * inner) * es,
                              .rows = l * inner};
        v->shape[0] = l;
        for (int d = 2; d < in->rank; d++) v->shape[d - 1] = in->shape[d];
    }
    return RJ_OK;
}

double rj_value_get(rj_dtype t, const void *values, int64_t i) {
    switch (t) {
    case RJ_BOOL: return ((const uint8_t *)values)[i] != 0;
    case RJ_I32: return ((const int32_t *)values)[i];
    case RJ_I64: return (double)((const int64_t *)values)[i];
    case RJ_F32: return ((const float *)values)[i];
    case RJ_F64: return ((const double *)values)[i];
    case RJ_F16:
    case RJ_BF16: return half_to_f32(((const uint16_t *)values)[i], t == RJ_BF16);
    default: return 0;
    }
}

void rj_value_set(rj_dtype t, void *values, int64_t i, double v) {
    if ((unsigned)t < RJ_DTYPE_COUNT) fill_value((char *)values + (size_t)i * rj_dtype_size(t), t, 1, v);
}
