/*
 * dlpack.c — zero-copy interchange with frameworks through DLPack (dlpack.h, version >= 0.6).
 *
 * Binding. A DLTensor says where its memory is (kDLCPU / kDLCUDAHost: host; kDLCUDA: a CUDA
 * device pointer; kDLOpenCL: a cl_mem), its element type, shape and strides. A dense input is
 * one tensor of the input's shape; a jagged input f[B, j, inner...] is two, as PyTorch's
 * nested jagged tensors are: the packed values [rows, inner...] and the offsets, int64 [B + 1],
 * in the same kind of memory. Each is checked against the input node (dtype, rank, constant
 * dims) and bound with the host or device calls of bind.c, so everything a run checks about
 * host or device memory applies. Only what ragjit can address as given is taken: compact
 * row-major strides (NULL, or the strides of a contiguous tensor, where a dim of extent 1 may
 * have any stride), one lane, device 0 for CUDA, no byte_offset for a cl_mem (a handle, not
 * an address); anything else is RJ_ERR_UNSUPPORTED saying what to change.
 *
 * Export. An output becomes a DLManagedTensor (two for a jagged output: values, and offsets
 * aliasing the bound offsets) whose memory the consumer owns from then on: an output ragjit
 * allocated is handed over (the binding allocates a new one for its next run), and the
 * deleter frees it; an output in the caller's memory is only described (the deleter frees
 * the description). Every exported tensor holds a reference to the context (ctx_ref), so a
 * framework may delete it after rj_ctx_free: the context's allocator is called then.
 */
#include <dlpack/dlpack.h>
#include <stdio.h>
#include <string.h>

#include "runtime.h"

enum { DL_BOOL = 6 }; /* kDLBool of DLPack >= 0.8; PyTorch exports bool with it */

/* ---- types ---------------------------------------------------------------------------------- */

static bool dtype_from_dl(DLDataType t, rj_dtype *out) {
    if (t.lanes != 1) return false;
    if (t.code == kDLFloat && t.bits == 32) *out = RJ_F32;
    else if (t.code == kDLFloat && t.bits == 64) *out = RJ_F64;
    else if (t.code == kDLFloat && t.bits == 16) *out = RJ_F16;
    else if (t.code == kDLBfloat && t.bits == 16) *out = RJ_BF16;
    else if (t.code == kDLInt && t.bits == 32) *out = RJ_I32;
    else if (t.code == kDLInt && t.bits == 64) *out = RJ_I64;
    else if (t.code == DL_BOOL && t.bits == 8) *out = RJ_BOOL;
    else return false;
    return true;
}

static DLDataType dtype_to_dl(rj_dtype t) {
    switch (t) {
    case RJ_F32: return (DLDataType){kDLFloat, 32, 1};
    case RJ_F64: return (DLDataType){kDLFloat, 64, 1};
    case RJ_F16: return (DLDataType){kDLFloat, 16, 1};
    case RJ_BF16: return (DLDataType){kDLBfloat, 16, 1};
    case RJ_I32: return (DLDataType){kDLInt, 32, 1};
    case RJ_I64: return (DLDataType){kDLInt, 64, 1};
    default: return (DLDataType){DL_BOOL, 8, 1};
    }
}

/* ---- binding ---------------------------------------------------------------------------------- */

typedef struct dl_view {
    bool device;       /* device memory (a CUDA pointer or a cl_mem) */
    uint64_t addr;     /* host pointer, device pointer or cl_mem */
    rj_dtype dtype;
    int64_t numel;
} dl_view;

/* Where a DLTensor's elements are, after the checks above; `what` names it in messages. */
static rj_status dl_take(rj_bind *b, const DLTensor *t, const char *what, dl_view *v) {
    rj_ctx *ctx = b->ctx;
    if (!t) return ctx_fail(ctx, RJ_ERR_ARG, "rj_bind_dlpack: %s is NULL", what);
    if (!dtype_from_dl(t->dtype, &v->dtype))
        return ctx_fail(ctx, RJ_ERR_UNSUPPORTED, "rj_bind_dlpack: %s has DLPack type code %u, %u bits, %u lanes "
                        "(ragjit takes float32/64, int32/64 and bool, one lane)", what, (unsigned)t->dtype.code,
                        (unsigned)t->dtype.bits, (unsigned)t->dtype.lanes);
    if (t->ndim < 0 || t->ndim > RJ_MAX_RANK || (t->ndim > 0 && !t->shape))
        return ctx_fail(ctx, RJ_ERR_ARG, "rj_bind_dlpack: %s has %d dims", what, (int)t->ndim);
    int64_t n = 1, stride = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] < 0) return ctx_fail(ctx, RJ_ERR_ARG, "rj_bind_dlpack: %s: dim %d is negative", what, d);
        if (t->strides && t->shape[d] != 1 && t->strides[d] != stride)
            return ctx_fail(ctx, RJ_ERR_UNSUPPORTED, "rj_bind_dlpack: %s is not contiguous (dim %d has stride %lld, "
                            "row-major needs %lld): make it contiguous first", what, d, (long long)t->strides[d],
                            (long long)stride);
        if (!mul_i64(n, t->shape[d], &n) || !mul_i64(stride, t->shape[d] ? t->shape[d] : 1, &stride))
            return ctx_fail(ctx, RJ_ERR_OVERFLOW, "rj_bind_dlpack: %s has too many elements", what);
    }
    v->numel = n;
    switch ((int)t->device.device_type) {
    case kDLCPU:
    case kDLCUDAHost:
        v->device = false;
        v->addr = (uint64_t)(uintptr_t)((const char *)t->data + t->byte_offset);
        return RJ_OK;
    case kDLCUDA:
        if (!b->be || b->be->target != RJ_TARGET_CUDA)
            return ctx_fail(ctx, RJ_ERR_UNSUPPORTED, "rj_bind_dlpack: %s is CUDA memory, but the program runs on "
                            "the %s target", what, b->be ? b->be->name : "?");
        if (t->device.device_id != 0)
            return ctx_fail(ctx, RJ_ERR_UNSUPPORTED, "rj_bind_dlpack: %s is on CUDA device %d; ragjit runs on "
                            "device 0 (CUDA_VISIBLE_DEVICES selects it)", what, (int)t->device.device_id);
        v->device = true;
        v->addr = (uint64_t)(uintptr_t)t->data + t->byte_offset;
        return RJ_OK;
    case kDLOpenCL:
        if (!b->be || b->be->target != RJ_TARGET_OPENCL)
            return ctx_fail(ctx, RJ_ERR_UNSUPPORTED, "rj_bind_dlpack: %s is OpenCL memory, but the program runs "
                            "on the %s target", what, b->be ? b->be->name : "?");
        if (t->byte_offset)
            return ctx_fail(ctx, RJ_ERR_UNSUPPORTED, "rj_bind_dlpack: %s: a cl_mem with a byte_offset (bind "
                            "a sub-buffer instead)", what);
        v->device = true;
        v->addr = (uint64_t)(uintptr_t)t->data;
        return RJ_OK;
    default:
        return ctx_fail(ctx, RJ_ERR_UNSUPPORTED, "rj_bind_dlpack: %s is on DLPack device type %d (ragjit takes "
                        "CPU, CUDA host, CUDA and OpenCL memory)", what, (int)t->device.device_type);
    }
}

rj_status rj_bind_dlpack(rj_bind *b, rj_node input, const void *values, const void *offsets) {
    if (!b) return RJ_ERR_ARG;
    int at = plan_find(b->plan, b->ctx, false, input, "rj_bind_dlpack");
    if (at < 0) return RJ_ERR_ARG;
    const plan_io *n = &b->plan->in[at];
    const plan_shape *sh = &n->sh;
    int rp = sh->rpos;
    if (sh->kind == SHAPE_PAIR)
        return ctx_fail(b->ctx, RJ_ERR_UNSUPPORTED, "rj_bind_dlpack: %s has two ragged dims: bind its blocks with "
                        "rj_bind_input", n->name);
    char what[160];
    snprintf(what, sizeof what, "the values of %s", n->name);
    dl_view v;
    rj_status s = dl_take(b, values, what, &v);
    if (s) return s;
    const DLTensor *t = values;
    if (v.dtype != (rj_dtype)sh->dtype)
        return ctx_fail(b->ctx, RJ_ERR_SHAPE, "rj_bind_dlpack: %s are %s but %s is %s", what, rj_dtype_name(v.dtype),
                        n->name, rj_dtype_name((rj_dtype)sh->dtype));
    int want_ndim = rp >= 0 ? sh->rank - 1 : sh->rank; /* jagged: [rows, inner...] */
    if (t->ndim != want_ndim)
        return ctx_fail(b->ctx, RJ_ERR_SHAPE, "rj_bind_dlpack: %s have %d dims but %s needs %d%s", what, (int)t->ndim,
                        n->name, want_ndim, rp >= 0 ? " (rows, then the inner dims)" : "");
    for (int d = rp >= 0 ? 2 : 0; d < sh->rank; d++) {
        int64_t got = t->shape[rp >= 0 ? d - 1 : d];
        if (sh->dims[d] >= 0 && got != sh->dims[d])
            return ctx_fail(b->ctx, RJ_ERR_SHAPE, "rj_bind_dlpack: %s: dim %d is %lld but %s has %lld there", what,
                            rp >= 0 ? d - 1 : d, (long long)got, n->name, (long long)sh->dims[d]);
    }
    if (rp < 0 && offsets)
        return ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_dlpack: %s is dense: no offsets", n->name);
    if (rp >= 0) {
        snprintf(what, sizeof what, "the offsets of %s", n->name);
        if (!offsets) return ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_dlpack: %s is jagged: %s are NULL", n->name, what);
        dl_view o;
        const DLTensor *ot = offsets;
        if ((s = dl_take(b, ot, what, &o))) return s;
        if (o.dtype != RJ_I64 || ot->ndim != 1 || ot->shape[0] < 1)
            return ctx_fail(b->ctx, RJ_ERR_SHAPE, "rj_bind_dlpack: %s must be int64 [B + 1]", what);
        if (o.device != v.device)
            return ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_dlpack: the values and the offsets of %s are in different "
                            "memories (one on the host, one on the device)", n->name);
        rj_dim j = sh->dims[rp];
        s = o.device ? rj_bind_offsets_device(b, j, ot->shape[0] - 1, o.addr, 0)
                     : rj_bind_offsets(b, j, ot->shape[0] - 1, (const int64_t *)(uintptr_t)o.addr, NULL);
        if (s) return s;
    }
    return v.device ? rj_bind_input_device(b, input, v.addr, v.numel)
                    : rj_bind_input(b, input, (const void *)(uintptr_t)v.addr, v.numel);
}

/* ---- export -------------------------------------------------------------------------------- */

/* A DLManagedTensor and what its deleter needs, in one block from the context's allocator. */
typedef struct export_block {
    DLManagedTensor mt;
    int64_t shape[RJ_MAX_RANK];
    rj_ctx *ctx;
    const backend *be;  /* for device memory the consumer now owns */
    void *host;         /* host memory the consumer now owns (mem_free), or NULL */
    size_t host_bytes;
    uint64_t dev;       /* device memory the consumer now owns (be->dev_free), or 0 */
} export_block;

static void export_delete(DLManagedTensor *mt) {
    export_block *e = mt ? mt->manager_ctx : NULL;
    if (!e) return;
    rj_ctx *ctx = e->ctx;
    if (e->host) mem_free(ctx, e->host, e->host_bytes);
    if (e->dev && e->be && e->be->dev_free) e->be->dev_free(ctx, e->dev);
    mem_free(ctx, e, sizeof *e);
    ctx_unref(ctx);
}

static DLManagedTensor *export_new(rj_bind *b, void *data, DLDevice dev, rj_dtype t, int ndim, const int64_t *shape) {
    export_block *e = mem_zalloc(b->ctx, sizeof *e);
    if (!e) return NULL;
    e->ctx = b->ctx;
    e->be = b->be;
    memcpy(e->shape, shape, sizeof(int64_t) * (size_t)ndim);
    e->mt.dl_tensor = (DLTensor){.data = data, .device = dev, .ndim = ndim, .dtype = dtype_to_dl(t),
                                 .shape = e->shape, .strides = NULL, .byte_offset = 0};
    e->mt.manager_ctx = e;
    e->mt.deleter = export_delete;
    ctx_ref(b->ctx);
    return &e->mt;
}

rj_status rj_bind_export_dlpack(rj_bind *b, rj_node out, struct DLManagedTensor **values,
                                struct DLManagedTensor **offsets) {
    if (!b) return RJ_ERR_ARG;
    if (values) *values = NULL;
    if (offsets) *offsets = NULL;
    const run_plan *pl = b->plan;
    int i = plan_find(pl, b->ctx, true, out, "rj_bind_export_dlpack");
    if (i < 0) return RJ_ERR_ARG;
    if (!values) return ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_export_dlpack: values is NULL");
    if (!b->run->prepared)
        return ctx_fail(b->ctx, RJ_ERR_UNBOUND, "rj_bind_export_dlpack: %s: the program has not run successfully "
                        "with this binding", pl->out[i].name);
    run_out *o = &b->run->out[i];
    const rj_tensor_info *ti = &o->result.info;
    bool jagged = ti->ragged_dim >= 0;
    if (ti->ragged_dims == 2)
        return ctx_fail(b->ctx, RJ_ERR_UNSUPPORTED, "rj_bind_export_dlpack: %s has two ragged dims: not exported "
                        "yet (read it with rj_bind_result)", pl->out[i].name);
    if (jagged && !offsets)
        return ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_export_dlpack: %s is jagged: offsets is NULL", pl->out[i].name);
    /* where the values are, and whether the consumer takes them over */
    DLDevice dev = {kDLCPU, 0};
    void *data = o->data;
    if (o->dev) {
        dev.device_type = b->be && b->be->target == RJ_TARGET_CUDA ? kDLCUDA : kDLOpenCL;
        data = (void *)(uintptr_t)o->ddata;
    }
    int64_t shape[RJ_MAX_RANK];
    int ndim = 0;
    if (jagged) {
        shape[ndim++] = ti->rows;
        for (int d = 2; d < ti->rank; d++) shape[ndim++] = ti->shape[d];
    } else {
        for (int d = 0; d < ti->rank; d++) shape[ndim++] = ti->shape[d];
    }
    int32_t j = jagged ? pl->out[i].sh.rsym : -1;
    if (jagged && b->rag[j].len)
        return ctx_fail(b->ctx, RJ_ERR_UNSUPPORTED, "rj_bind_export_dlpack: %s is laid out as a view with holes "
                        "(offsets and lengths): export needs packed offsets", pl->out[i].name);
    if (jagged && b->rag[j].dev && !b->rag[j].doff)
        return ctx_fail(b->ctx, RJ_ERR_INTERNAL, "rj_bind_export_dlpack: %s has no offsets", pl->out[i].name);
    DLManagedTensor *mv = export_new(b, data, dev, ti->dtype, ndim, shape), *mo = NULL;
    if (!mv) return RJ_ERR_NOMEM;
    if (jagged) {
        int64_t n = b->rag[j].batch + 1;
        void *od = b->rag[j].dev ? (void *)(uintptr_t)b->rag[j].doff : (void *)(uintptr_t)b->rag[j].off;
        DLDevice odev = b->rag[j].dev ? dev : (DLDevice){kDLCPU, 0};
        if (b->rag[j].dev && !o->dev) odev.device_type = b->be->target == RJ_TARGET_CUDA ? kDLCUDA : kDLOpenCL;
        if (!(mo = export_new(b, od, odev, RJ_I64, 1, &n))) {
            export_delete(mv);
            return RJ_ERR_NOMEM;
        }
    }
    /* memory ragjit allocated goes with the tensor; the next run allocates anew */
    export_block *e = mv->manager_ctx;
    if (o->dev && !o->duser) {
        e->dev = o->down;
        o->down = 0;
        o->down_bytes = 0;
    } else if (!o->dev && !b->out[i].user && o->own) {
        e->host = o->own;
        e->host_bytes = o->own_bytes;
        o->own = NULL;
        o->own_bytes = 0;
    }
    *values = mv;
    if (offsets) *offsets = mo;
    return RJ_OK;
}
