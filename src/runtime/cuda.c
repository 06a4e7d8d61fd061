/*
 * cuda.c — the CUDA target: PTX from codegen/cuda loaded into the device's primary context,
 * and runs launched through the CUDA driver, loaded with dlopen.
 *
 * ragjit must build and run where no driver or GPU exists, so the driver's few types,
 * constants and entry points are declared below (checked against the CUDA 13 headers, see
 * shared/reference/cuda-nvrtc.md) and resolved with dlsym. The driver is loaded once per
 * process (pthread_once) and never unloaded: it must outlive every module and context
 * created through it. cuda.h #defines many entry points to versioned names, so the symbols
 * looked up are those (`cuMemAlloc_v2`, ...).
 *
 * available() checks for a driver and a device first — the path every machine without a GPU
 * takes — and reports "no CUDA device" with the reason. compile() gets PTX for the device's
 * architecture, loads it into device 0's primary context (the context CUDA runtime users
 * share; cuCtxCreate changed signature in CUDA 13) and looks up one function per kernel.
 * The "cuda" and "ptx" dumps need no device: without one, PTX is for compute_90.
 *
 * A run mirrors the CPU's through the shared launch planning (launch.c): device copies of
 * inputs, offsets and logical offsets, device outputs, temporaries and per-thread scratch,
 * then the kernels in order on the default stream, then the outputs copied back into the
 * binding's host memory. Device memory lives for one run only: simple, and nothing leaks when
 * a binding's sizes change between runs. When some input is a view with holes, outputs are
 * copied in as well, since kernels leave the holes of a jagged output untouched (as the CPU
 * does in the caller's memory). Launch shape: a unit range [0, units) split across
 * min(units, 65536) threads in blocks of the kernel's launch shape (lowering reads the block
 * size from the target descriptor); the generated code gives each thread one
 * contiguous slice (see codegen/cuda/emit.c), so any shape is correct. Reductions over the
 * ragged dim take whole items as units (no column tiling) and their scratch is sized per
 * thread, with the thread count lowered so a run's scratch stays within SCRATCH_BUDGET.
 *
 * Errors: no driver or device -> RJ_ERR_NO_DEVICE; NVRTC missing -> RJ_ERR_NO_DEVICE; a CUDA
 * call failing while compiling -> RJ_ERR_COMPILE, while running -> RJ_ERR_INTERNAL (device
 * out of memory -> RJ_ERR_NOMEM), always naming the call and its error code. Host memory
 * goes through the context's allocator.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../codegen/cuda/cuda_backend.h"
#include "launch.h"

/* ---- the CUDA declarations we need ------------------------------------------------------- */

typedef int CUresult;
typedef int CUdevice;
typedef int CUjit_option;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef unsigned long long CUdeviceptr;

enum {
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_JIT_ERROR_LOG_BUFFER = 5,
    CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
};

/* ---- the driver --------------------------------------------------------------------------- */

typedef struct cuda_api {
    bool loaded;       /* libcuda.so.1 and every symbol we need */
    CUresult init;     /* cuInit's result */
    int ndev;
    char err[384];     /* why there is no device */
    CUresult (*Init)(unsigned);
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetAttribute)(int *, int, CUdevice);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*DevicePrimaryCtxRelease)(CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*CtxSynchronize)(void);
    CUresult (*ModuleLoadDataEx)(CUmodule *, const void *, unsigned, CUjit_option *, void **);
    CUresult (*ModuleUnload)(CUmodule);
    CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, CUstream, void **, void **);
    CUresult (*GetErrorName)(CUresult, const char **); /* optional */
} cuda_api;

static cuda_api cu;
static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

static void driver_load(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(cu.err, sizeof cu.err, "no CUDA device: libcuda.so.1 not found (%s)", dlerror());
        return;
    }
    static const struct {
        const char *name, *alt; /* alt: the unversioned name of older drivers */
        size_t off;
    } syms[] = {
        {"cuInit", NULL, offsetof(cuda_api, Init)},
        {"cuDeviceGetCount", NULL, offsetof(cuda_api, DeviceGetCount)},
        {"cuDeviceGet", NULL, offsetof(cuda_api, DeviceGet)},
        {"cuDeviceGetAttribute", NULL, offsetof(cuda_api, DeviceGetAttribute)},
        {"cuDevicePrimaryCtxRetain", NULL, offsetof(cuda_api, DevicePrimaryCtxRetain)},
        {"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease", offsetof(cuda_api, DevicePrimaryCtxRelease)},
        {"cuCtxSetCurrent", NULL, offsetof(cuda_api, CtxSetCurrent)},
        {"cuCtxSynchronize", NULL, offsetof(cuda_api, CtxSynchronize)},
        {"cuModuleLoadDataEx", NULL, offsetof(cuda_api, ModuleLoadDataEx)},
        {"cuModuleUnload", NULL, offsetof(cuda_api, ModuleUnload)},
        {"cuModuleGetFunction", NULL, offsetof(cuda_api, ModuleGetFunction)},
        {"cuMemAlloc_v2", NULL, offsetof(cuda_api, MemAlloc)},
        {"cuMemFree_v2", NULL, offsetof(cuda_api, MemFree)},
        {"cuMemcpyHtoD_v2", NULL, offsetof(cuda_api, MemcpyHtoD)},
        {"cuMemcpyDtoH_v2", NULL, offsetof(cuda_api, MemcpyDtoH)},
        {"cuLaunchKernel", NULL, offsetof(cuda_api, LaunchKernel)},
    };
    for (size_t i = 0; i < RJ_ARRAY_LEN(syms); i++) {
        void *slot = (char *)&cu + syms[i].off;
        if (!dl_sym(lib, syms[i].name, slot) && !(syms[i].alt && dl_sym(lib, syms[i].alt, slot))) {
            snprintf(cu.err, sizeof cu.err, "no CUDA device: libcuda.so.1 lacks %s", syms[i].name);
            dlclose(lib); /* cu.loaded stays false: nothing below is called */
            return;
        }
    }
    dl_sym(lib, "cuGetErrorName", &cu.GetErrorName);
    cu.loaded = true;
    cu.init = cu.Init(0);
    if (cu.init) {
        /* 100 = CUDA_ERROR_NO_DEVICE: a driver but no GPU; others: driver/kernel mismatch */
        snprintf(cu.err, sizeof cu.err, "no CUDA device: cuInit returned %d", cu.init);
        return;
    }
    if (cu.DeviceGetCount(&cu.ndev) || cu.ndev <= 0) {
        cu.ndev = 0;
        snprintf(cu.err, sizeof cu.err, "no CUDA device: the driver reports no devices");
    }
}

/* Device 0, or RJ_ERR_NO_DEVICE with the reason. */
static rj_status driver_device(rj_ctx *ctx, CUdevice *dev) {
    pthread_once(&cu_once, driver_load);
    if (!cu.loaded || cu.init || cu.ndev <= 0) return ctx_fail(ctx, RJ_ERR_NO_DEVICE, "%s", cu.err);
    CUresult r = cu.DeviceGet(dev, 0);
    if (r) return ctx_fail(ctx, RJ_ERR_NO_DEVICE, "no CUDA device: cuDeviceGet returned %d", r);
    return RJ_OK;
}

/* Compute capability of device 0 as major*10 + minor, or 0 without a device. */
static int device_arch(void) {
    pthread_once(&cu_once, driver_load);
    CUdevice dev;
    int maj = 0, min = 0;
    if (!cu.loaded || cu.init || cu.ndev <= 0 || cu.DeviceGet(&dev, 0) ||
        cu.DeviceGetAttribute(&maj, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) ||
        cu.DeviceGetAttribute(&min, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))
        return 0;
    return maj * 10 + min;
}

/* A failed driver call as an error naming the call, its code, and what it was for (or NULL). */
static rj_status cu_fail(rj_ctx *ctx, rj_status s, const char *fn, CUresult r, const char *what) {
    const char *name = NULL;
    if (cu.GetErrorName && cu.GetErrorName(r, &name)) name = NULL;
    if (r == CUDA_ERROR_OUT_OF_MEMORY) s = RJ_ERR_NOMEM;
    return ctx_fail(ctx, s, "CUDA: %s failed with error %d%s%s%s%s%s", fn, r, name ? " (" : "",
                    name ? name : "", name ? ")" : "", what ? " " : "", what ? what : "");
}


/* ---- compile ------------------------------------------------------------------------------ */

typedef struct cuda_code {
    CUdevice dev;
    CUcontext cuctx;   /* the device's primary context, retained */
    bool retained;
    CUmodule mod;
    CUfunction *fns;   /* per kernel */
    int32_t nfns;
    char *ptx;         /* what was loaded (the "ptx" dump) */
} cuda_code;

static rj_status cuda_available(rj_ctx *ctx) {
    CUdevice dev;
    return driver_device(ctx, &dev);
}

static void cuda_code_free(rj_ctx *ctx, void *p) {
    cuda_code *cc = p;
    if (!cc) return;
    if (cc->mod && !cu.CtxSetCurrent(cc->cuctx)) cu.ModuleUnload(cc->mod);
    if (cc->retained) cu.DevicePrimaryCtxRelease(cc->dev);
    mem_free(ctx, cc->fns, sizeof(CUfunction) * (size_t)(cc->nfns ? cc->nfns : 1));
    rj_string_free(ctx, cc->ptx);
    mem_free(ctx, cc, sizeof *cc);
}

static rj_status load_module(rj_ctx *ctx, const lprog *lp, cuda_code *cc) {
    rj_status s = driver_device(ctx, &cc->dev);
    if (s) return s;
    CUresult r = cu.DevicePrimaryCtxRetain(&cc->cuctx, cc->dev);
    if (r) return cu_fail(ctx, RJ_ERR_COMPILE, "cuDevicePrimaryCtxRetain", r, NULL);
    cc->retained = true;
    if ((r = cu.CtxSetCurrent(cc->cuctx))) return cu_fail(ctx, RJ_ERR_COMPILE, "cuCtxSetCurrent", r, NULL);
    if (!(cc->ptx = cuda_ptx(ctx, lp, device_arch())))
        return ctx_last_status(ctx) ? ctx_last_status(ctx) : RJ_ERR_COMPILE;
    char log[2048] = "";
    CUjit_option jo[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *jv[] = {log, (void *)(uintptr_t)sizeof log};
    if ((r = cu.ModuleLoadDataEx(&cc->mod, cc->ptx, 2, jo, jv))) {
        cc->mod = NULL;
        log[sizeof log - 1] = 0;
        return ctx_fail(ctx, RJ_ERR_COMPILE, "CUDA: cuModuleLoadDataEx failed with error %d%s%s%.600s", r,
                        r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION ? " (the driver is older than NVRTC)" : "",
                        log[0] ? ": " : "", log);
    }
    int32_t nk = lp->nkernels;
    if (!(cc->fns = mem_zalloc(ctx, sizeof(CUfunction) * (size_t)(nk ? nk : 1)))) return RJ_ERR_NOMEM;
    cc->nfns = nk;
    for (int32_t i = 0; i < nk; i++) {
        const char *name = lp->kernels[i].name;
        if ((r = cu.ModuleGetFunction(&cc->fns[i], cc->mod, name)))
            return cu_fail(ctx, RJ_ERR_COMPILE, "cuModuleGetFunction", r, name);
    }
    return RJ_OK;
}

static rj_status cuda_compile(rj_ctx *ctx, const lprog *lp, void **out) {
    cuda_code *cc = mem_zalloc(ctx, sizeof *cc);
    if (!cc) return RJ_ERR_NOMEM;
    rj_status s = load_module(ctx, lp, cc);
    if (s) {
        cuda_code_free(ctx, cc);
        return s;
    }
    *out = cc;
    return RJ_OK;
}

/* "cuda", or "ptx" (for the device's architecture, or compute_90 without one). */
static rj_status cuda_dump(rj_ctx *ctx, const lprog *lp, const void *code, int st, char **text) {
    const cuda_code *cc = code;
    if (st == STAGE_CUDA) {
        text[st] = cuda_source(ctx, lp);
    } else if (cc && cc->ptx) {
        sbuf b;
        sbuf_init(&b, ctx);
        sbuf_puts(&b, cc->ptx);
        text[st] = sbuf_finish(&b);
    } else {
        text[st] = cuda_ptx(ctx, lp, device_arch());
    }
    return text[st] ? RJ_OK : ctx_last_status(ctx);
}

/* ---- run ---------------------------------------------------------------------------------- */

#define BLOCK 128           /* threads per block where the kernel's launch shape names none */
#define MAX_THREADS 65536
#define SCRATCH_BUDGET ((int64_t)256 << 20) /* bytes of per-thread scratch per launch */
/* At least MIN_ALLOC bytes: 0 is an error to CUDA, and some kernels read element 0 of an
 * empty buffer (layer_norm's shift value) without using it. */
#define MIN_ALLOC 64

typedef struct run {
    rj_ctx *ctx;
    rj_bind *b;
    const cuda_code *cc;
    const lprog *lp;
    uint64_t *addr;        /* the launch_mem arrays: per buffer, per symbol, per class */
    size_t naddr;
    launch_mem m;
    CUdeviceptr scratch;
    int64_t scratch_bytes;
} run;

static rj_status dev_alloc(run *r, uint64_t *d, int64_t bytes, const char *what) {
    CUdeviceptr p = 0;
    *d = 0;
    rj_status s = run_reserve(r->b, bytes, what);
    if (s) return s;
    CUresult e = cu.MemAlloc(&p, bytes > MIN_ALLOC ? (size_t)bytes : MIN_ALLOC);
    *d = e ? 0 : p;
    if (e) {
        char detail[160];
        snprintf(detail, sizeof detail, "allocating %lld bytes for %s", (long long)bytes, what);
        return cu_fail(r->ctx, RJ_ERR_INTERNAL, "cuMemAlloc_v2", e, detail);
    }
    return RJ_OK;
}

static rj_status upload(run *r, uint64_t *d, const void *src, int64_t bytes, const char *what) {
    rj_status s = dev_alloc(r, d, bytes, what);
    if (s || bytes <= 0) return s;
    CUresult e = cu.MemcpyHtoD(*d, src, (size_t)bytes);
    return e ? cu_fail(r->ctx, RJ_ERR_INTERNAL, "cuMemcpyHtoD_v2", e, what) : RJ_OK;
}

/* Device memory for every loop-IR buffer, and the offsets and logical offsets the kernels
 * read; inputs copied in. An output laid out as a view with holes is copied in too: kernels
 * write only the rows inside items, and the rows in the holes must come back as they were. */
static rj_status device_memory(run *r) {
    rj_bind *b = r->b;
    const lprog *lp = r->lp;
    uint64_t *buf = r->addr, *off = buf + lp->nbufs, *loff = off + b->nsym;
    r->m = (launch_mem){.buf = buf, .off = off, .loff = loff};
    bool holes = false;
    for (int32_t s = 0; s < b->nsym; s++) holes |= b->rag[s].set && b->rag[s].len;
    for (int32_t i = 0; i < lp->nbufs; i++) {
        const lbuf *lb = &lp->bufs[i];
        int64_t n;
        size_t bytes;
        rj_status s = launch_buf_elems(b, lb, &n);
        if (s) return s;
        if (!bytes_of(n, rj_dtype_size((rj_dtype)lb->dtype), &bytes))
            return ctx_fail(r->ctx, RJ_ERR_OVERFLOW, "CUDA run: buffer %d is too large", (int)i);
        if (lb->kind == LB_INPUT)
            s = upload(r, &buf[i], b->in[lb->index].data, (int64_t)bytes, "an input");
        else if (lb->kind == LB_OUTPUT && holes)
            s = upload(r, &buf[i], b->out[lb->index].data, (int64_t)bytes, "an output");
        else
            s = dev_alloc(r, &buf[i], (int64_t)bytes, lb->kind == LB_OUTPUT ? "an output" : "a temporary");
        if (s) return s;
    }
    for (int32_t ki = 0; ki < lp->nkernels; ki++) {
        const lkernel *k = &lp->kernels[ki];
        for (int32_t a = 0; a < k->nparams; a++) {
            const lparam *pm = &k->params[a];
            int32_t sy = pm->ref;
            rj_status s = RJ_OK;
            if (pm->kind == PK_OFF && !off[sy]) {
                if (sy < 0 || sy >= b->nsym || !b->rag[sy].set)
                    return ctx_fail(r->ctx, RJ_ERR_INTERNAL, "CUDA run: no offsets bound for %s", pm->name);
                s = upload(r, &off[sy], b->rag[sy].off, (int64_t)sizeof(int64_t) * (b->rag[sy].batch + 1), pm->name);
            } else if (pm->kind == PK_LOFF && !loff[sy]) {
                if (sy < 0 || sy >= b->nsym || !b->loff[sy])
                    return ctx_fail(r->ctx, RJ_ERR_INTERNAL, "CUDA run: no offsets for ragged class %d", (int)sy);
                s = upload(r, &loff[sy], b->loff[sy], (int64_t)sizeof(int64_t) * (b->cbatch[sy] + 1), pm->name);
            }
            if (s) return s;
        }
    }
    return RJ_OK;
}

/* Device scratch of at least `bytes`. */
static rj_status scratch(run *r, int64_t bytes) {
    if (bytes <= r->scratch_bytes) return RJ_OK;
    if (r->scratch) cu.MemFree(r->scratch);
    r->scratch = 0;
    r->scratch_bytes = 0;
    uint64_t d;
    rj_status s = dev_alloc(r, &d, bytes, "per-thread scratch");
    if (!s) r->scratch = d, r->scratch_bytes = bytes;
    return s;
}

static rj_status launch(run *r, int32_t ki) {
    const lkernel *k = &r->lp->kernels[ki];
    rj_ctx *ctx = r->ctx;
    static const launch_opts o = {.workers = MAX_THREADS, .scratch_budget = SCRATCH_BUDGET};
    launch_plan pl;
    rj_status s = launch_plan_kernel(r->b, k, &o, &pl);
    if (s || pl.units <= 0) return s;
    int64_t block = k->launch.simt && k->launch.block > 0 ? k->launch.block : BLOCK;
    int64_t threads = ((int64_t)pl.workers + block - 1) / block * block;
    if (pl.scratch_elems) {
        int64_t bytes;
        if (!mul_i64(pl.scratch_elems, threads, &bytes) ||
            !mul_i64(bytes, (int64_t)rj_dtype_size((rj_dtype)k->scratch_type), &bytes))
            return ctx_fail(ctx, RJ_ERR_OVERFLOW, "CUDA run: scratch size overflows");
        if ((s = scratch(r, bytes))) return s;
        r->m.scratch = r->scratch;
    }
    /* one value per parameter; the generated code takes a scratch pointer's stride (elements
     * per thread) right after it */
    size_t nslots = (size_t)k->nparams * 2 + 1;
    uint64_t *vals = mem_zalloc(ctx, sizeof(uint64_t) * nslots);
    void **args = mem_zalloc(ctx, sizeof(void *) * nslots);
    if (!vals || !args) {
        s = RJ_ERR_NOMEM;
    } else {
        launch_args(r->b, k, &pl, &r->m, 0, pl.units, 0, false, vals);
        uint64_t *stride = vals + k->nparams;
        size_t n = 0;
        for (int32_t a = 0; a < k->nparams; a++) {
            args[n++] = &vals[a];
            if (k->params[a].kind == PK_SCRATCH) {
                *stride = (uint64_t)pl.scratch_elems;
                args[n++] = stride;
            }
        }
        CUresult e = cu.LaunchKernel(r->cc->fns[ki], (unsigned)(threads / block), 1, 1, (unsigned)block, 1, 1,
                                     0, NULL, args, NULL);
        if (e) s = cu_fail(ctx, RJ_ERR_INTERNAL, "cuLaunchKernel", e, k->name);
    }
    mem_free(ctx, vals, sizeof(uint64_t) * nslots);
    mem_free(ctx, args, sizeof(void *) * nslots);
    return s;
}

static rj_status cuda_run(rj_program *p, rj_bind *b) {
    rj_ctx *ctx = p->ctx;
    const cuda_code *cc = p->art->ce ? p->art->ce->code : NULL;
    if (!cc || !cc->mod) return ctx_fail(ctx, RJ_ERR_INTERNAL, "CUDA run: the program is not compiled");
    run r = {.ctx = ctx, .b = b, .cc = cc, .lp = &p->art->comp.lp};
    r.naddr = (size_t)r.lp->nbufs + 2 * (size_t)b->nsym;
    rj_status s = RJ_OK;
    CUresult e;
    if (!(r.addr = mem_zalloc(ctx, sizeof(uint64_t) * (r.naddr ? r.naddr : 1)))) s = RJ_ERR_NOMEM;
    else if ((e = cu.CtxSetCurrent(cc->cuctx))) s = cu_fail(ctx, RJ_ERR_INTERNAL, "cuCtxSetCurrent", e, NULL);
    if (!s) s = device_memory(&r);
    for (int32_t ki = 0; !s && ki < r.lp->nkernels; ki++) s = launch(&r, ki);
    if (!s && (e = cu.CtxSynchronize())) s = cu_fail(ctx, RJ_ERR_INTERNAL, "cuCtxSynchronize", e, "(a kernel failed)");
    for (int32_t i = 0; !s && i < r.lp->nbufs; i++) {
        const lbuf *lb = &r.lp->bufs[i];
        if (lb->kind != LB_OUTPUT) continue;
        const out_bind *ob = &b->out[lb->index];
        size_t bytes;
        if (!bytes_of(ob->numel, rj_dtype_size((rj_dtype)lb->dtype), &bytes))
            s = ctx_fail(ctx, RJ_ERR_OVERFLOW, "CUDA run: output %d is too large", lb->index);
        else if (bytes && (e = cu.MemcpyDtoH(ob->data, r.m.buf[i], bytes)))
            s = cu_fail(ctx, RJ_ERR_INTERNAL, "cuMemcpyDtoH_v2", e, "copying an output back");
    }
    /* teardown; after a failed launch the context may be unusable, and frees may fail too */
    if (r.addr)
        for (size_t i = 0; i < r.naddr; i++)
            if (r.addr[i]) cu.MemFree(r.addr[i]);
    if (r.scratch) cu.MemFree(r.scratch);
    mem_free(ctx, r.addr, sizeof(uint64_t) * (r.naddr ? r.naddr : 1));
    return s;
}

const backend backend_cuda = {
    .name = "cuda",
    .target = RJ_TARGET_CUDA,
    .available = cuda_available,
    .compile = cuda_compile,
    .code_free = cuda_code_free,
    .dump = cuda_dump,
    .run = cuda_run,
};
