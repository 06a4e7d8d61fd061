/*
 * cuda.c — the CUDA target: PTX from codegen/simt loaded into the device's primary context,
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
 * takes — and reports "no CUDA device" with the reason. compile() gets machine code for the
 * device's architecture from NVRTC (a cubin, with its PTX; PTX alone for a device newer than
 * NVRTC knows) or the persistent cache, loads it into device 0's primary context (the context
 * CUDA runtime users share; cuCtxCreate changed signature in CUDA 13) and looks up one
 * function per kernel.
 * The "cuda" and "ptx" dumps need no device: without one, PTX is for compute_90.
 *
 * A run is launch.c's device_run with the driver's calls: device copies of inputs, offsets
 * and logical offsets, device outputs, temporaries and per-thread scratch, then the kernels
 * in order on the default stream, then the outputs copied back into the binding's host
 * memory. Launch shape: a unit range [0, units) split across min(units, 65536) threads in
 * blocks of the kernel's launch shape (lowering reads the block size from the target
 * descriptor). Reductions over the ragged dim take whole items as units (no column tiling)
 * and their scratch is sized per thread, with the thread count lowered so a run's scratch
 * stays within SCRATCH_BUDGET.
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

#include "../codegen/simt/simt.h"
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
typedef struct CUevent_st *CUevent;

enum {
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_JIT_ERROR_LOG_BUFFER = 5,
    CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_INVALID_IMAGE = 200,
    CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
};

/* ---- the driver --------------------------------------------------------------------------- */

typedef struct cuda_api {
    bool loaded;       /* libcuda.so.1 and every symbol we need */
    CUresult init;     /* cuInit's result */
    int ndev;
    int64_t threads;   /* device 0: multiprocessors x threads each x 4 (launch.c's groups) */
    char err[384];     /* why there is no device */
    CUresult (*Init)(unsigned);
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetAttribute)(int *, int, CUdevice);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
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
    CUresult (*MemcpyDtoD)(CUdeviceptr, CUdeviceptr, size_t);
    CUresult (*EventCreate)(CUevent *, unsigned);
    CUresult (*EventRecord)(CUevent, CUstream);
    CUresult (*EventSynchronize)(CUevent);
    CUresult (*EventElapsedTime)(float *, CUevent, CUevent);
    CUresult (*EventDestroy)(CUevent);
    CUresult (*StreamSynchronize)(CUstream);
    CUresult (*GetErrorName)(CUresult, const char **); /* optional */
    CUresult (*DriverGetVersion)(int *);                /* optional */
    CUresult (*PointerGetAttribute)(void *, int, CUdeviceptr);            /* optional */
    CUresult (*MemGetAddressRange)(CUdeviceptr *, size_t *, CUdeviceptr); /* optional */
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
        {"cuMemcpyDtoD_v2", NULL, offsetof(cuda_api, MemcpyDtoD)},
        {"cuEventCreate", NULL, offsetof(cuda_api, EventCreate)},
        {"cuEventRecord", NULL, offsetof(cuda_api, EventRecord)},
        {"cuEventSynchronize", NULL, offsetof(cuda_api, EventSynchronize)},
        {"cuEventElapsedTime_v2", "cuEventElapsedTime", offsetof(cuda_api, EventElapsedTime)}, /* CUDA 13: _v2 */
        {"cuEventDestroy_v2", "cuEventDestroy", offsetof(cuda_api, EventDestroy)},
        {"cuStreamSynchronize", NULL, offsetof(cuda_api, StreamSynchronize)},
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
    if (!dl_sym(lib, "cuDriverGetVersion", &cu.DriverGetVersion)) cu.DriverGetVersion = NULL;
    dl_sym(lib, "cuPointerGetAttribute", &cu.PointerGetAttribute);
    if (!dl_sym(lib, "cuMemGetAddressRange_v2", &cu.MemGetAddressRange)) cu.MemGetAddressRange = NULL;
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
        return;
    }
    /* enough threads to fill every multiprocessor four times over: launch.c gives each thread
     * group a contiguous chunk of units, and more, shorter chunks balance uneven units */
    CUdevice dev;
    int sms = 0, per = 0;
    if (!cu.DeviceGet(&dev, 0) && !cu.DeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) &&
        !cu.DeviceGetAttribute(&per, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, dev) && sms > 0 && per > 0)
        cu.threads = (int64_t)sms * per * 4;
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
    CUcontext cuctx;   /* the device's primary context (primary_current: kept for the process) */
    CUmodule mod;
    CUfunction *fns;   /* per kernel */
    int32_t nfns;
    CUfunction check;  /* rj_check_offsets */
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
    mem_free(ctx, cc->fns, sizeof(CUfunction) * (size_t)(cc->nfns ? cc->nfns : 1));
    rj_string_free(ctx, cc->ptx);
    mem_free(ctx, cc, sizeof *cc);
}

static rj_status primary_current(rj_ctx *ctx, CUcontext *out);

static rj_status load_module(rj_ctx *ctx, const lprog *lp, cuda_code *cc) {
    /* the primary context, retained once for the process and made current (primary_current),
     * as the CUDA runtime keeps it: a retain per program, released with it, destroyed the
     * context with the last program, for the next one to create anew */
    rj_status s = primary_current(ctx, &cc->cuctx);
    if (s) return s;
    CUresult r;
    /* the persistent cache: what NVRTC made for an earlier process (NVRTC is not even loaded,
     * which alone costs ~10 ms), machine code for this device where NVRTC knows its
     * architecture (cuda_image_build), so the driver does not translate PTX either; keyed by
     * this build of ragjit (which fixes the CUDA C and NVRTC's options), the device's
     * architecture, the driver's version and the loop IR. Not by NVRTC's version: asking would
     * load it, and code from any NVRTC the driver accepts means the same program. */
    int drv = 0, arch = device_arch();
    if (cu.DriverGetVersion && cu.DriverGetVersion(&drv)) drv = 0;
    char ident[256], knobs[160];
    simt_knobs(knobs, sizeof knobs);
    snprintf(ident, sizeof ident, "cuda\narch %d\ndriver %d\n%s", arch, drv, knobs);
    sbuf key;
    rj_status ks = disk_key(ctx, &key, lp, ident);
    if (ks) return ks;
    bool on = key.len > 0, hit = false;
    cuda_image im = {0};
    void *bin = NULL;
    size_t blen = 0;
    if (on && disk_load(ctx, "cuda", key.s, key.len, &bin, &blen)) {
        if (!(hit = cuda_image_unpack(ctx, bin, blen, &im))) ctx_clear_error(ctx); /* a miss */
        mem_free(ctx, bin, blen);
    }
    if (!hit) {
        if ((s = cuda_image_build(ctx, lp, arch, true, &im))) {
            sbuf_free(&key);
            return s;
        }
        if (on && cuda_image_pack(ctx, &im, &bin, &blen) == RJ_OK) {
            disk_store(ctx, "cuda", key.s, key.len, bin, blen);
            mem_free(ctx, bin, blen);
        }
        ctx_clear_error(ctx); /* a failed store costs the cache, not the compile */
    }
    sbuf_free(&key);
    cc->ptx = im.ptx;
    im.ptx = NULL;
    char log[2048] = "";
    CUjit_option jo[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *jv[] = {log, (void *)(uintptr_t)sizeof log};
    /* the machine code; the PTX where the driver refuses it (it translates PTX for its device) */
    r = im.cubin ? cu.ModuleLoadDataEx(&cc->mod, im.cubin, 2, jo, jv) : CUDA_ERROR_INVALID_IMAGE;
    cuda_image_free(ctx, &im);
    if (r) {
        log[0] = 0;
        r = cu.ModuleLoadDataEx(&cc->mod, cc->ptx, 2, jo, jv);
    }
    if (r) {
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
    if ((r = cu.ModuleGetFunction(&cc->check, cc->mod, "rj_check_offsets")))
        return cu_fail(ctx, RJ_ERR_COMPILE, "cuModuleGetFunction", r, "rj_check_offsets");
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
    const cuda_code *cc;
    const lprog *lp;
    CUevent *ev;       /* the binding's: before the first kernel, after the last (NULL: no timing) */
    bool started;
    CUstream stream;   /* the binding's, or NULL: the default stream */
} run;

static rj_status run_alloc(void *ud, uint64_t *d, int64_t bytes, const char *what) {
    run *r = ud;
    CUdeviceptr p = 0;
    CUresult e = cu.MemAlloc(&p, bytes > MIN_ALLOC ? (size_t)bytes : MIN_ALLOC);
    *d = e ? 0 : p;
    if (e) {
        char detail[160];
        snprintf(detail, sizeof detail, "allocating %lld bytes for %s", (long long)bytes, what);
        return cu_fail(r->ctx, RJ_ERR_INTERNAL, "cuMemAlloc_v2", e, detail);
    }
    return RJ_OK;
}

static void run_release(void *ud, uint64_t d) {
    (void)ud;
    cu.MemFree(d);
}

static rj_status run_write(void *ud, uint64_t d, const void *src, size_t bytes, const char *what) {
    run *r = ud;
    CUresult e = cu.MemcpyHtoD(d, src, bytes);
    return e ? cu_fail(r->ctx, RJ_ERR_INTERNAL, "cuMemcpyHtoD_v2", e, what) : RJ_OK;
}

static rj_status run_read(void *ud, void *dst, uint64_t d, size_t bytes, const char *what) {
    run *r = ud;
    CUresult e = cu.MemcpyDtoH(dst, d, bytes);
    return e ? cu_fail(r->ctx, RJ_ERR_INTERNAL, "cuMemcpyDtoH_v2", e, what) : RJ_OK;
}

static int64_t run_block(void *ud, int32_t ki) {
    const lkernel *k = &((run *)ud)->lp->kernels[ki];
    return k->launch.simt && k->launch.block > 0 ? k->launch.block : BLOCK;
}

/* On the default stream; the driver takes a pointer to each parameter's value. */
static rj_status run_launch(void *ud, int32_t ki, int64_t block, int64_t threads, uint64_t *args) {
    run *r = ud;
    const lkernel *k = &r->lp->kernels[ki];
    size_t nslots = (size_t)k->nparams * 2 + 1;
    void **ptrs = mem_alloc(r->ctx, sizeof(void *) * nslots);
    if (!ptrs) return RJ_ERR_NOMEM;
    size_t n = 0;
    for (int32_t a = 0; a < k->nparams; a++) {
        ptrs[n] = &args[n];
        n++;
        if (k->params[a].kind == PK_SCRATCH) ptrs[n] = &args[n], n++;
    }
    if (!r->started && r->ev[0] && !cu.EventRecord(r->ev[0], r->stream)) r->started = true;
    CUresult e = cu.LaunchKernel(r->cc->fns[ki], (unsigned)(threads / block), 1, 1, (unsigned)block, 1, 1,
                                 0, r->stream, ptrs, NULL);
    mem_free(r->ctx, ptrs, sizeof(void *) * nslots);
    return e ? cu_fail(r->ctx, RJ_ERR_INTERNAL, "cuLaunchKernel", e, k->name) : RJ_OK;
}

static rj_status run_finish(void *ud, double *kernel_ms) {
    run *r = ud;
    bool timed = r->started && r->ev[1] && !cu.EventRecord(r->ev[1], r->stream);
    CUresult e = r->stream ? cu.StreamSynchronize(r->stream) : cu.CtxSynchronize();
    if (e) return cu_fail(r->ctx, RJ_ERR_INTERNAL, r->stream ? "cuStreamSynchronize" : "cuCtxSynchronize", e,
                          "(a kernel failed)");
    float ms = 0;
    if (timed && !cu.EventElapsedTime(&ms, r->ev[0], r->ev[1])) *kernel_ms = ms;
    return RJ_OK;
}

static rj_status run_check(void *ud, uint64_t off, uint64_t ref, int64_t B, int64_t rows, int64_t maxlen,
                           uint64_t err, int64_t symbol) {
    run *r = ud;
    uint64_t a[7] = {off, ref, (uint64_t)B, (uint64_t)rows, (uint64_t)maxlen, err, (uint64_t)symbol};
    void *ptrs[7];
    for (int i = 0; i < 7; i++) ptrs[i] = &a[i];
    int64_t blocks = (B + 1 + 255) / 256;
    if (blocks > 1024) blocks = 1024; /* grid-stride beyond */
    if (!r->started && r->ev && r->ev[0] && !cu.EventRecord(r->ev[0], r->stream)) r->started = true;
    CUresult e = cu.LaunchKernel(r->cc->check, (unsigned)blocks, 1, 1, 256, 1, 1, 0, r->stream, ptrs, NULL);
    return e ? cu_fail(r->ctx, RJ_ERR_INTERNAL, "cuLaunchKernel", e, "rj_check_offsets") : RJ_OK;
}

static rj_status run_leave(void *ud) {
    run *r = ud;
    if (r->started && r->ev[1] && !cu.EventRecord(r->ev[1], r->stream)) return RJ_OK;
    /* no event to wait on later: wait now */
    CUresult e = r->stream ? cu.StreamSynchronize(r->stream) : cu.CtxSynchronize();
    return e ? cu_fail(r->ctx, RJ_ERR_INTERNAL, "cuStreamSynchronize", e, "(a kernel failed)") : RJ_OK;
}

static int64_t run_threads(void *ud) {
    (void)ud;
    return cu.threads > 0 ? cu.threads : MAX_THREADS;
}

static const device_ops cuda_ops = {
    .what = "CUDA run",
    .max_threads = MAX_THREADS,
    .scratch_budget = SCRATCH_BUDGET,
    .alloc = run_alloc,
    .release = run_release,
    .write = run_write,
    .read = run_read,
    .block = run_block,
    .launch = run_launch,
    .finish = run_finish,
    .leave = run_leave,
    .check = run_check,
    .threads = run_threads,
};

static rj_status cuda_run(const run_view *v) {
    rj_ctx *ctx = v->ctx;
    const cuda_code *cc = v->code;
    if (!cc || !cc->mod) return ctx_fail(ctx, RJ_ERR_INTERNAL, "CUDA run: the program is not compiled");
    CUresult e = cu.CtxSetCurrent(cc->cuctx);
    if (e) return cu_fail(ctx, RJ_ERR_INTERNAL, "cuCtxSetCurrent", e, NULL);
    run r = {.ctx = ctx, .cc = cc, .lp = v->lp, .stream = (CUstream)v->stream, .ev = (CUevent *)v->async->events};
    /* the binding's events, made at its first run; timing is best effort: without events a
     * run reports its host-clock kernel time and never returns early */
    for (int i = 0; i < 2; i++)
        if (!r.ev[i] && cu.EventCreate(&r.ev[i], 0)) r.ev[i] = NULL;
    return device_run(v, &cuda_ops, &r);
}

/* rj_bind_wait: the end event of the binding's last run. */
static rj_status cuda_wait(rj_ctx *ctx, run_async *a, double *kernel_ms) {
    CUevent *ev = (CUevent *)a->events;
    rj_status s = primary_current(ctx, NULL);
    if (s) return s;
    CUresult e = ev[1] ? cu.EventSynchronize(ev[1]) : cu.CtxSynchronize();
    if (e) return cu_fail(ctx, RJ_ERR_INTERNAL, "cuEventSynchronize", e, "(a kernel of the run failed)");
    float ms = 0;
    if (ev[0] && ev[1] && !cu.EventElapsedTime(&ms, ev[0], ev[1])) *kernel_ms = ms;
    return RJ_OK;
}

static void cuda_async_release(run_async *a) {
    CUevent *ev = (CUevent *)a->events;
    for (int i = 0; i < 2; i++)
        if (ev[i]) cu.EventDestroy(ev[i]), ev[i] = NULL;
}

/* ---- device memory of bindings ------------------------------------------------------------- */

/* The primary context of device 0, retained once for the process and made current: device
 * pointers of the CUDA runtime (PyTorch's) live there, and bindings use it before and after
 * any program runs. Loading a program and the copy probe take it too, so that freeing the
 * last program does not destroy the context for the next one to create again (on an H200,
 * bench's "loading from the cache" line, 108 ms, was likely most of that: a measure for the
 * next GPU session). */
static pthread_mutex_t primary_lock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext primary;

static rj_status primary_current(rj_ctx *ctx, CUcontext *out) {
    CUdevice dev;
    rj_status s = driver_device(ctx, &dev);
    if (s) return s;
    pthread_mutex_lock(&primary_lock);
    CUresult e = primary ? 0 : cu.DevicePrimaryCtxRetain(&primary, dev);
    CUcontext cx = primary;
    pthread_mutex_unlock(&primary_lock);
    if (e) return cu_fail(ctx, RJ_ERR_NO_DEVICE, "cuDevicePrimaryCtxRetain", e, NULL);
    if ((e = cu.CtxSetCurrent(cx))) return cu_fail(ctx, RJ_ERR_INTERNAL, "cuCtxSetCurrent", e, NULL);
    if (out) *out = cx;
    return RJ_OK;
}

/* After the binding's stream's work, so offsets a kernel just wrote are read as written. */
static rj_status cuda_dev_read(rj_ctx *ctx, void *stream, void *dst, uint64_t src, size_t bytes) {
    rj_status s = primary_current(ctx, NULL);
    if (s) return s;
    CUresult e = stream ? cu.StreamSynchronize((CUstream)stream) : 0;
    if (e) return cu_fail(ctx, RJ_ERR_INTERNAL, "cuStreamSynchronize", e, "(before reading device offsets)");
    e = cu.MemcpyDtoH(dst, src, bytes);
    return e ? cu_fail(ctx, RJ_ERR_INTERNAL, "cuMemcpyDtoH_v2", e, "(reading device offsets)") : RJ_OK;
}

static void cuda_dev_free(rj_ctx *ctx, uint64_t addr) {
    if (addr && !primary_current(ctx, NULL)) cu.MemFree(addr);
}

enum { CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2, CU_MEMORYTYPE_DEVICE = 2, CU_MEMORYTYPE_UNIFIED = 4 };

/* cuPointerGetAttribute tells device memory from host memory (it fails for plain malloc'd
 * memory); cuMemGetAddressRange gives the allocation around a device pointer. */
static rj_status cuda_dev_check(rj_ctx *ctx, uint64_t addr, size_t bytes, bool device, const char *what) {
    if (!cu.PointerGetAttribute || !addr) return RJ_OK;
    rj_status s = primary_current(ctx, NULL);
    if (s) return s;
    unsigned type = 0;
    CUresult e = cu.PointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, addr);
    bool on_device = !e && (type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_UNIFIED);
    if (!device)
        return on_device ? ctx_fail(ctx, RJ_ERR_ARG, "%s is device memory: bind it with the _device calls "
                                    "(rj_bind_input_device, ...)", what)
                         : RJ_OK;
    if (!on_device)
        return ctx_fail(ctx, RJ_ERR_ARG, "%s is not device memory of the CUDA device (a host pointer bound "
                        "as device memory?)", what);
    CUdeviceptr base = 0;
    size_t size = 0;
    if (cu.MemGetAddressRange && !cu.MemGetAddressRange(&base, &size, addr) && addr - base + bytes > size)
        return ctx_fail(ctx, RJ_ERR_SIZE, "%s: its allocation holds %llu bytes from that address but the "
                        "binding needs %zu", what, (unsigned long long)(size - (addr - base)), bytes);
    return RJ_OK;
}

static rj_status cuda_handles(rj_ctx *ctx, void **context, void **queue) {
    CUcontext cx = NULL;
    rj_status s = primary_current(ctx, &cx);
    if (s) return s;
    if (context) *context = cx;
    if (queue) *queue = NULL;
    return RJ_OK;
}

/* rj_device_copy_bandwidth: one device-to-device copy between two fresh buffers, timed by
 * events around it on the default stream. */
static rj_status cuda_copy_probe(rj_ctx *ctx, int64_t bytes, double *ms) {
    /* the primary context, kept for the process (as load_module's): a probe before the first
     * program (bench's, measuring the driver's start-up) must not leave it to be created again */
    rj_status s = primary_current(ctx, NULL);
    if (s) return s;
    CUresult e;
    CUdeviceptr a = 0, b = 0;
    CUevent ev[2] = {NULL, NULL};
    if (!(e = cu.MemAlloc(&a, (size_t)bytes)) && !(e = cu.MemAlloc(&b, (size_t)bytes)) &&
        !(e = cu.EventCreate(&ev[0], 0)) && !(e = cu.EventCreate(&ev[1], 0)) && !(e = cu.EventRecord(ev[0], NULL)) &&
        !(e = cu.MemcpyDtoD(b, a, (size_t)bytes)) && !(e = cu.EventRecord(ev[1], NULL)) &&
        !(e = cu.EventSynchronize(ev[1]))) {
        float t = 0;
        e = cu.EventElapsedTime(&t, ev[0], ev[1]);
        *ms = t;
    }
    for (int i = 0; i < 2; i++)
        if (ev[i]) cu.EventDestroy(ev[i]);
    if (a) cu.MemFree(a);
    if (b) cu.MemFree(b);
    return e ? cu_fail(ctx, RJ_ERR_INTERNAL, "the copy probe (cuMemAlloc, cuEventRecord, cuMemcpyDtoD or "
                                             "cuEventElapsedTime)", e, NULL) : RJ_OK;
}

const backend backend_cuda = {
    .name = "cuda",
    .target = RJ_TARGET_CUDA,
    .available = cuda_available,
    .compile = cuda_compile,
    .code_free = cuda_code_free,
    .dump = cuda_dump,
    .run = cuda_run,
    .copy_probe = cuda_copy_probe,
    .dev_read = cuda_dev_read,
    .dev_free = cuda_dev_free,
    .dev_check = cuda_dev_check,
    .handles = cuda_handles,
    .wait = cuda_wait,
    .async_release = cuda_async_release,
};
