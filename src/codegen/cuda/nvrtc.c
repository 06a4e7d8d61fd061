/*
 * nvrtc.c — NVRTC and the CUDA driver through dlopen, and the RJ_TARGET_CUDA backend.
 *
 * ragjit must build and run where no CUDA toolkit, driver or GPU exists, so nothing here
 * includes a CUDA header or links a CUDA library: the few types, constants and entry points
 * are declared below (checked against the CUDA 13 headers, see
 * shared/reference/cuda-nvrtc.md) and resolved with dlsym. Both libraries are loaded once per
 * process (pthread_once) and never unloaded: NVRTC is large and slow to load, and a driver
 * must outlive every module and context created through it. cuda.h #defines many entry
 * points to versioned names, so the symbols looked up are those (`cuMemAlloc_v2`, ...).
 *
 * Compiling PTX. cuda_ptx prints the loop IR as CUDA C (emit.c) and compiles it for a
 * virtual architecture: the highest NVRTC supports at or below the requested one (the
 * device's when asked for 0 and a device exists, else compute_90). NVRTC 13 dropped
 * everything below compute_75, so asking it for an arbitrary number fails; its own list of
 * supported architectures is the authority. Options: --fmad=false, so the GPU rounds every
 * multiply and add separately as the CPU backend does (an explicit fma in the loop IR stays
 * an fma); the IEEE defaults (no flush-to-zero, precise division and square root) are
 * NVRTC's own. A failed compile is a bug in the emitter: the error carries the first lines
 * of NVRTC's log.
 *
 * Running. compile checks for a driver and a device first, the path every machine without a
 * GPU takes, and reports "no CUDA device" with the reason. With a device (device 0) it runs the
 * pipeline, compiles PTX for the device, loads it into the device's primary context (the
 * context CUDA runtime users share; cuCtxCreate changed signature in CUDA 13) and looks up
 * one function per kernel. A run mirrors the CPU runtime (runtime/cpu.c): logical offsets per
 * ragged class on the host (a prefix sum of lengths for views with holes), then device
 * copies of inputs and offsets, device outputs, temporaries and per-thread scratch, then the
 * kernels in order on the default stream, then the outputs copied back into the binding's
 * host memory. Device memory lives for one run only: simple, and nothing leaks when a
 * binding's sizes change between runs. When some input is a view with holes, outputs are
 * copied in as well, since kernels leave the holes of a jagged output untouched (as the CPU
 * does in the caller's memory). Launch shape: a unit range [0, units) split across
 * min(units, 65536) threads in blocks of 128; the generated code gives each thread one
 * contiguous slice (see emit.c), so any shape is correct. Reductions over the ragged dim take
 * whole items as units (no column tiling) and their scratch is sized per thread, with the
 * thread count lowered so a run's scratch stays within SCRATCH_BUDGET.
 *
 * Errors: no driver or device -> RJ_ERR_NO_DEVICE; NVRTC missing -> RJ_ERR_NO_DEVICE; a CUDA
 * call failing while compiling -> RJ_ERR_COMPILE, while running -> RJ_ERR_INTERNAL (device
 * out of memory -> RJ_ERR_NOMEM), always naming the call and its error code. Host memory
 * goes through the context's allocator.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../ir/pipeline.h"
#include "../../runtime/runtime.h"
#include "cuda_backend.h"

/* ---- the CUDA declarations we need ------------------------------------------------------- */

typedef int CUresult;
typedef int CUdevice;
typedef int CUjit_option;
typedef int nvrtcResult;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef unsigned long long CUdeviceptr;
typedef struct _nvrtcProgram *nvrtcProgram;

enum {
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_JIT_ERROR_LOG_BUFFER = 5,
    CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
};

/* dlsym returns an object pointer; copying its bits is the POSIX-sanctioned way to get a
 * function pointer without the cast ISO C forbids. */
_Static_assert(sizeof(void *) == sizeof(void (*)(void)), "function pointers are not data sized");

static bool load_sym(void *lib, const char *name, void *fnptr) {
    void *s = dlsym(lib, name);
    if (!s) return false;
    memcpy(fnptr, &s, sizeof s);
    return true;
}

/* ---- NVRTC -------------------------------------------------------------------------------- */

typedef struct nvrtc_api {
    bool ok;
    char err[384];
    nvrtcResult (*CreateProgram)(nvrtcProgram *, const char *, const char *, int,
                                 const char *const *, const char *const *);
    nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char *const *);
    nvrtcResult (*GetProgramLogSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetProgramLog)(nvrtcProgram, char *);
    nvrtcResult (*GetPTXSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetPTX)(nvrtcProgram, char *);
    nvrtcResult (*DestroyProgram)(nvrtcProgram *);
    const char *(*GetErrorString)(nvrtcResult);             /* optional */
    nvrtcResult (*GetNumSupportedArchs)(int *);             /* optional (CUDA >= 11.2) */
    nvrtcResult (*GetSupportedArchs)(int *);                /* optional */
} nvrtc_api;

static nvrtc_api nv;
static pthread_once_t nv_once = PTHREAD_ONCE_INIT;

static void nvrtc_load(void) {
    /* /usr/local/cuda/lib64 is often not on the loader path */
    static const char *const names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so",
                                        "/usr/local/cuda/lib64/libnvrtc.so.13",
                                        "/usr/local/cuda/lib64/libnvrtc.so.12",
                                        "/usr/local/cuda/lib64/libnvrtc.so"};
    for (size_t i = 0; i < RJ_ARRAY_LEN(names); i++) {
        void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            if (i == 0) snprintf(nv.err, sizeof nv.err, "%s", dlerror()); /* the preferred one */
            continue;
        }
        const char *missing = NULL;
        if (!load_sym(lib, "nvrtcCreateProgram", &nv.CreateProgram)) missing = "nvrtcCreateProgram";
        else if (!load_sym(lib, "nvrtcCompileProgram", &nv.CompileProgram)) missing = "nvrtcCompileProgram";
        else if (!load_sym(lib, "nvrtcGetProgramLogSize", &nv.GetProgramLogSize)) missing = "nvrtcGetProgramLogSize";
        else if (!load_sym(lib, "nvrtcGetProgramLog", &nv.GetProgramLog)) missing = "nvrtcGetProgramLog";
        else if (!load_sym(lib, "nvrtcGetPTXSize", &nv.GetPTXSize)) missing = "nvrtcGetPTXSize";
        else if (!load_sym(lib, "nvrtcGetPTX", &nv.GetPTX)) missing = "nvrtcGetPTX";
        else if (!load_sym(lib, "nvrtcDestroyProgram", &nv.DestroyProgram)) missing = "nvrtcDestroyProgram";
        if (missing) {
            snprintf(nv.err, sizeof nv.err, "%s lacks %s", names[i], missing);
            dlclose(lib);
            continue;
        }
        load_sym(lib, "nvrtcGetErrorString", &nv.GetErrorString);
        if (!load_sym(lib, "nvrtcGetNumSupportedArchs", &nv.GetNumSupportedArchs) ||
            !load_sym(lib, "nvrtcGetSupportedArchs", &nv.GetSupportedArchs))
            nv.GetNumSupportedArchs = NULL, nv.GetSupportedArchs = NULL;
        nv.ok = true;
        return; /* kept for the life of the process */
    }
}

static const char *nvrtc_errstr(nvrtcResult r) {
    const char *s = nv.GetErrorString ? nv.GetErrorString(r) : NULL;
    return s ? s : "unknown error";
}

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
        if (!load_sym(lib, syms[i].name, slot) && !(syms[i].alt && load_sym(lib, syms[i].alt, slot))) {
            snprintf(cu.err, sizeof cu.err, "no CUDA device: libcuda.so.1 lacks %s", syms[i].name);
            dlclose(lib); /* cu.loaded stays false: nothing below is called */
            return;
        }
    }
    load_sym(lib, "cuGetErrorName", &cu.GetErrorName);
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

/* ---- PTX ---------------------------------------------------------------------------------- */

/* The highest architecture NVRTC supports at or below `want`; 0 if none. */
static int pick_arch(rj_ctx *ctx, int want, int *lowest) {
    *lowest = 0;
    if (!nv.GetNumSupportedArchs) return want; /* an old NVRTC: trust the request */
    int n = 0;
    if (nv.GetNumSupportedArchs(&n) || n <= 0) return want;
    int *a = mem_alloc(ctx, sizeof(int) * (size_t)n);
    if (!a) return -1;
    int best = 0;
    if (nv.GetSupportedArchs(a)) {
        best = want;
    } else {
        *lowest = a[0];
        for (int i = 0; i < n; i++) {
            if (a[i] <= want && a[i] > best) best = a[i];
            if (a[i] < *lowest) *lowest = a[i];
        }
    }
    mem_free(ctx, a, sizeof(int) * (size_t)n);
    return best;
}

/* The first lines of a compiler log, for an error message. */
static void log_head(char *dst, size_t n, const char *log) {
    size_t j = 0;
    int lines = 0;
    for (const char *s = log; *s && j + 1 < n; s++) {
        if (*s != '\n') {
            dst[j++] = *s;
            continue;
        }
        if (++lines == 8 || !s[1] || j + 4 >= n) break;
        memcpy(dst + j, " | ", 3); /* one line in the message */
        j += 3;
    }
    dst[j] = 0;
}

char *cuda_ptx(rj_ctx *ctx, const lprog *p, int arch) {
    if (!ctx) return NULL;
    char *src = cuda_source(ctx, p);
    if (!src) return NULL;
    pthread_once(&nv_once, nvrtc_load);
    if (!nv.ok) {
        rj_string_free(ctx, src);
        ctx_fail(ctx, RJ_ERR_NO_DEVICE, "NVRTC is not available (%s)", nv.err[0] ? nv.err : "not found");
        return NULL;
    }
    int want = arch > 0 ? arch : device_arch();
    if (want <= 0) want = 90;
    int lowest, use = pick_arch(ctx, want, &lowest);
    if (use <= 0) {
        rj_string_free(ctx, src);
        if (use == 0)
            ctx_fail(ctx, RJ_ERR_COMPILE, "NVRTC cannot compile for compute capability %d.%d "
                     "(the oldest it supports is %d.%d)", want / 10, want % 10, lowest / 10, lowest % 10);
        return NULL;
    }
    char archopt[48];
    snprintf(archopt, sizeof archopt, "--gpu-architecture=compute_%d", use);
    const char *opts[] = {archopt, "--fmad=false"};
    nvrtcProgram prog = NULL;
    nvrtcResult r = nv.CreateProgram(&prog, src, "ragjit.cu", 0, NULL, NULL);
    rj_string_free(ctx, src);
    if (r) {
        ctx_fail(ctx, RJ_ERR_COMPILE, "NVRTC: nvrtcCreateProgram failed: %s", nvrtc_errstr(r));
        return NULL;
    }
    char *text = NULL;
    r = nv.CompileProgram(prog, (int)RJ_ARRAY_LEN(opts), opts);
    if (r) {
        size_t n = 0;
        char *log = NULL;
        if (!nv.GetProgramLogSize(prog, &n) && n > 0 && (log = mem_alloc(ctx, n)) &&
            nv.GetProgramLog(prog, log))
            log[0] = 0;
        char head[640] = "";
        if (log) {
            log[n - 1] = 0;
            log_head(head, sizeof head, log);
            mem_free(ctx, log, n);
        }
        ctx_fail(ctx, RJ_ERR_COMPILE, "NVRTC failed to compile the generated CUDA C for "
                 "compute_%d (%s): %s", use, nvrtc_errstr(r), head[0] ? head : "no log");
    } else {
        size_t n = 0;
        char *ptx = NULL;
        if ((r = nv.GetPTXSize(prog, &n)) || n == 0) {
            ctx_fail(ctx, RJ_ERR_COMPILE, "NVRTC: nvrtcGetPTXSize failed: %s", nvrtc_errstr(r));
        } else if ((ptx = mem_alloc(ctx, n))) {
            if ((r = nv.GetPTX(prog, ptx))) {
                ctx_fail(ctx, RJ_ERR_COMPILE, "NVRTC: nvrtcGetPTX failed: %s", nvrtc_errstr(r));
            } else {
                ptx[n - 1] = 0;
                sbuf b;
                sbuf_init(&b, ctx);
                sbuf_puts(&b, ptx);
                text = sbuf_finish(&b);
            }
            mem_free(ctx, ptx, n);
        }
    }
    nv.DestroyProgram(&prog);
    return text;
}

/* ---- the backend: compile ----------------------------------------------------------------- */

typedef struct cuda_prog {
    compiled comp;
    CUdevice dev;
    CUcontext cuctx;   /* the device's primary context, retained */
    bool retained;
    CUmodule mod;
    CUfunction *fns;   /* per kernel */
    int32_t nfns;
} cuda_prog;

static void cuda_release(rj_program *p) {
    cuda_prog *cp = p->impl;
    if (!cp) return;
    rj_ctx *ctx = p->ctx;
    if (cp->mod && !cu.CtxSetCurrent(cp->cuctx)) cu.ModuleUnload(cp->mod);
    if (cp->retained) cu.DevicePrimaryCtxRelease(cp->dev);
    mem_free(ctx, cp->fns, sizeof(CUfunction) * (size_t)(cp->nfns ? cp->nfns : 1));
    compiled_free(&cp->comp);
    mem_free(ctx, cp, sizeof *cp);
    p->impl = NULL;
}

static rj_status cuda_compile(rj_program *p) {
    rj_ctx *ctx = p->ctx;
    CUdevice dev;
    rj_status s = driver_device(ctx, &dev); /* the common case: stop here, cheaply */
    if (s) return s;
    cuda_prog *cp = mem_zalloc(ctx, sizeof *cp);
    if (!cp) return RJ_ERR_NOMEM;
    p->impl = cp; /* released by rj_program_free on failure */
    cp->dev = dev;
    if ((s = pipeline_run(p->g, target_desc_for(RJ_TARGET_CUDA), &cp->comp))) return s;
    CUresult r = cu.DevicePrimaryCtxRetain(&cp->cuctx, dev);
    if (r) return cu_fail(ctx, RJ_ERR_COMPILE, "cuDevicePrimaryCtxRetain", r, NULL);
    cp->retained = true;
    if ((r = cu.CtxSetCurrent(cp->cuctx))) return cu_fail(ctx, RJ_ERR_COMPILE, "cuCtxSetCurrent", r, NULL);
    char *ptx = cuda_ptx(ctx, &cp->comp.lp, device_arch());
    if (!ptx) return ctx_last_status(ctx) ? ctx_last_status(ctx) : RJ_ERR_COMPILE;
    char log[2048] = "";
    CUjit_option jo[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *jv[] = {log, (void *)(uintptr_t)sizeof log};
    r = cu.ModuleLoadDataEx(&cp->mod, ptx, 2, jo, jv);
    rj_string_free(ctx, ptx);
    if (r) {
        cp->mod = NULL;
        log[sizeof log - 1] = 0;
        return ctx_fail(ctx, RJ_ERR_COMPILE, "CUDA: cuModuleLoadDataEx failed with error %d%s%s%.600s", r,
                        r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION ? " (the driver is older than NVRTC)" : "",
                        log[0] ? ": " : "", log);
    }
    int32_t nk = cp->comp.lp.nkernels;
    if (!(cp->fns = mem_zalloc(ctx, sizeof(CUfunction) * (size_t)(nk ? nk : 1)))) return RJ_ERR_NOMEM;
    cp->nfns = nk;
    for (int32_t i = 0; i < nk; i++) {
        const char *name = cp->comp.lp.kernels[i].name;
        if ((r = cu.ModuleGetFunction(&cp->fns[i], cp->mod, name)))
            return cu_fail(ctx, RJ_ERR_COMPILE, "cuModuleGetFunction", r, name);
    }
    return RJ_OK;
}

/* ---- the backend: run --------------------------------------------------------------------- */

#define BLOCK 128
#define MAX_THREADS 65536
#define SCRATCH_BUDGET ((int64_t)256 << 20) /* bytes of per-thread scratch per launch */

typedef struct run {
    rj_ctx *ctx;
    rj_program *p;
    rj_bind *b;
    cuda_prog *cp;
    const lprog *lp;
    int32_t nsym;
    CUdeviceptr *dbuf;     /* per loop-IR buffer */
    CUdeviceptr *doff;     /* per symbol: its offsets on the device */
    CUdeviceptr *dloff;    /* per symbol (class root): logical offsets on the device */
    CUdeviceptr scratch;
    int64_t scratch_bytes;
} run;

/* At least MIN_ALLOC bytes: 0 is an error to CUDA, and some kernels read element 0 of an
 * empty buffer (layer_norm's shift value) without using it. */
#define MIN_ALLOC 64

static rj_status dev_alloc(run *r, CUdeviceptr *d, int64_t bytes, const char *what) {
    CUresult e = cu.MemAlloc(d, bytes > MIN_ALLOC ? (size_t)bytes : MIN_ALLOC);
    if (e) {
        *d = 0;
        char detail[160];
        snprintf(detail, sizeof detail, "allocating %lld bytes for %s", (long long)bytes, what);
        return cu_fail(r->ctx, RJ_ERR_INTERNAL, "cuMemAlloc_v2", e, detail);
    }
    return RJ_OK;
}

static rj_status upload(run *r, CUdeviceptr *d, const void *src, int64_t bytes, const char *what) {
    rj_status s = dev_alloc(r, d, bytes, what);
    if (s || bytes <= 0) return s;
    CUresult e = cu.MemcpyHtoD(*d, src, (size_t)bytes);
    return e ? cu_fail(r->ctx, RJ_ERR_INTERNAL, "cuMemcpyHtoD_v2", e, what) : RJ_OK;
}

static rj_status dims_numel(run *r, const rj_dim *dims, int n, int64_t *out) {
    int64_t c = 1;
    for (int k = 0; k < n; k++)
        if (!mul_i64(c, bind_dim_value(r->b, dims[k]), &c))
            return ctx_fail(r->ctx, RJ_ERR_OVERFLOW, "CUDA run: a size overflows");
    *out = c;
    return RJ_OK;
}

/* The class's logical offsets (computed by bind_prepare), or an internal error if absent. */
static rj_status class_loff(run *r, int32_t cls, const int64_t **lo, int64_t *B) {
    if (cls < 0 || cls >= r->nsym || !r->b->loff[cls])
        return ctx_fail(r->ctx, RJ_ERR_INTERNAL, "CUDA run: no offsets for ragged class %d", (int)cls);
    *lo = r->b->loff[cls];
    *B = r->b->cbatch[cls];
    return RJ_OK;
}

/* Device memory for every loop-IR buffer; inputs copied in. An output laid out as a view with
 * holes is copied in too: kernels write only the rows inside items, and the rows in the holes
 * must come back as they were (as on the CPU, which writes the caller's memory in place). */
static rj_status buffers(run *r) {
    const lprog *lp = r->lp;
    const rj_graph *g = r->p->g;
    bool holes = false;
    for (int32_t s = 0; s < r->nsym; s++) holes |= r->b->rag[s].set && r->b->rag[s].len;
    for (int32_t i = 0; i < lp->nbufs; i++) {
        const lbuf *lb = &lp->bufs[i];
        size_t es = rj_dtype_size((rj_dtype)lb->dtype);
        int64_t n = 0;
        rj_status s = RJ_OK;
        if (lb->kind == LB_INPUT) {
            n = r->b->in[lb->index].numel;
        } else if (lb->kind == LB_OUTPUT) {
            n = r->b->out[lb->index].numel;
        } else {
            const sym *sy = lb->rank > 1 ? graph_sym(g, lb->dims[1]) : NULL;
            if (sy && sy->kind == SYM_RAGGED) {
                const int64_t *lo = NULL;
                int64_t B = 0, inner = 1;
                int32_t cls = sym_root(g, dim_sym(lb->dims[1]));
                if ((s = class_loff(r, cls, &lo, &B)) || (s = dims_numel(r, lb->dims + 2, lb->rank - 2, &inner)))
                    return s;
                if (!mul_i64(lo[B], inner, &n))
                    return ctx_fail(r->ctx, RJ_ERR_OVERFLOW, "temporary %d is too large", lb->index);
            } else if ((s = dims_numel(r, lb->dims, lb->rank, &n))) {
                return s;
            }
        }
        size_t bytes;
        if (!bytes_of(n, es, &bytes))
            return ctx_fail(r->ctx, RJ_ERR_OVERFLOW, "CUDA run: buffer %d is too large", (int)i);
        if (lb->kind == LB_INPUT)
            s = upload(r, &r->dbuf[i], r->b->in[lb->index].data, (int64_t)bytes, "an input");
        else if (lb->kind == LB_OUTPUT && holes)
            s = upload(r, &r->dbuf[i], r->b->out[lb->index].data, (int64_t)bytes, "an output");
        else
            s = dev_alloc(r, &r->dbuf[i], (int64_t)bytes, lb->kind == LB_OUTPUT ? "an output" : "a temporary");
        if (s) return s;
    }
    return RJ_OK;
}

/* How one kernel is launched. */
typedef struct plan {
    int64_t units, tile, blo, bhi;
    int64_t stride;   /* scratch elements per thread */
    int64_t threads;  /* threads launched (a multiple of the block size) */
} plan;

static rj_status plan_kernel(run *r, const lkernel *k, plan *pk) {
    memset(pk, 0, sizeof *pk);
    const int64_t *lo = NULL;
    int64_t B = 0, maxlen = 0;
    rj_status s;
    switch (k->domain) {
    case UD_ROWS:
        if ((s = class_loff(r, k->dom_class, &lo, &B))) return s;
        pk->units = lo[B];
        pk->blo = item_at_or_before(lo, B, 0);
        pk->bhi = item_at_or_after(lo, B, pk->units);
        break;
    case UD_ITEMS: {
        int64_t N;
        if ((s = class_loff(r, k->dom_class, &lo, &B)) || (s = dims_numel(r, k->dom_dims, k->dom_rank, &N)))
            return s;
        /* whole items, no column tiles: one unit per item (nothing to do when N is 0) */
        pk->tile = N > 0 ? N : 1;
        pk->units = N > 0 ? B : 0;
        for (int64_t b = 0; b < B; b++)
            if (lo[b + 1] - lo[b] > maxlen) maxlen = lo[b + 1] - lo[b];
        break;
    }
    default:
        if ((s = dims_numel(r, k->dom_dims, k->dom_rank, &pk->units))) return s;
        break;
    }
    int64_t threads = pk->units < MAX_THREADS ? pk->units : MAX_THREADS;
    if (k->scratch_per_tile > 0) {
        int64_t per = k->scratch_per_tile, es = 8;
        for (int32_t i = 0; i < k->nparams; i++)
            if (k->params[i].kind == PK_SCRATCH) es = (int64_t)rj_dtype_size((rj_dtype)k->params[i].dtype);
        if (k->scratch_per_row && k->domain == UD_ITEMS && !add_i64(per, maxlen, &per))
            return ctx_fail(r->ctx, RJ_ERR_OVERFLOW, "CUDA run: scratch size overflows");
        int64_t bytes;
        if (!mul_i64(per, pk->tile > 0 ? pk->tile : 1, &pk->stride) || !mul_i64(pk->stride, es, &bytes))
            return ctx_fail(r->ctx, RJ_ERR_OVERFLOW, "CUDA run: scratch size overflows");
        int64_t cap = bytes > 0 ? SCRATCH_BUDGET / bytes : threads;
        if (threads > cap) threads = cap > 0 ? cap : 1;
    }
    pk->threads = (threads + BLOCK - 1) / BLOCK * BLOCK;
    return RJ_OK;
}

/* Device scratch of at least `bytes`. */
static rj_status scratch(run *r, int64_t bytes) {
    if (bytes <= r->scratch_bytes) return RJ_OK;
    if (r->scratch) cu.MemFree(r->scratch);
    r->scratch = 0;
    r->scratch_bytes = 0;
    rj_status s = dev_alloc(r, &r->scratch, bytes, "per-thread scratch");
    if (!s) r->scratch_bytes = bytes;
    return s;
}

typedef union slot {
    CUdeviceptr d;
    long long i;
} slot;

static rj_status launch(run *r, int32_t ki) {
    const lkernel *k = &r->lp->kernels[ki];
    rj_ctx *ctx = r->ctx;
    plan pk;
    rj_status s = plan_kernel(r, k, &pk);
    if (s || pk.units <= 0) return s;
    for (int32_t a = 0; a < k->nparams; a++) {
        const lparam *pm = &k->params[a];
        if (pm->kind == PK_SCRATCH) {
            int64_t bytes;
            if (!mul_i64(pk.stride, pk.threads, &bytes) ||
                !mul_i64(bytes, (int64_t)rj_dtype_size((rj_dtype)pm->dtype), &bytes))
                return ctx_fail(ctx, RJ_ERR_OVERFLOW, "CUDA run: scratch size overflows");
            if ((s = scratch(r, bytes))) return s;
        }
    }
    /* argument values, and a pointer to each (a scratch pointer is followed by its stride) */
    size_t nslots = (size_t)k->nparams * 2 + 1;
    slot *vals = mem_zalloc(ctx, sizeof(slot) * nslots);
    void **args = mem_zalloc(ctx, sizeof(void *) * nslots);
    if (!vals || !args) {
        s = RJ_ERR_NOMEM;
        goto done;
    }
    size_t n = 0;
    for (int32_t a = 0; a < k->nparams && !s; a++) {
        const lparam *pm = &k->params[a];
        slot *v = &vals[n];
        args[n] = v;
        n++;
        switch (pm->kind) {
        case PK_BUF: v->d = r->dbuf[pm->ref]; break;
        case PK_OFF: {
            const rag_bind *rb = pm->ref >= 0 && pm->ref < r->nsym ? &r->b->rag[pm->ref] : NULL;
            if (!rb || !rb->set) {
                s = ctx_fail(ctx, RJ_ERR_INTERNAL, "CUDA run: no offsets bound for %s", pm->name);
                break;
            }
            if (!r->doff[pm->ref])
                s = upload(r, &r->doff[pm->ref], rb->off, (int64_t)sizeof(int64_t) * (rb->batch + 1), pm->name);
            v->d = r->doff[pm->ref];
            break;
        }
        case PK_LOFF: {
            const int64_t *lo = NULL;
            int64_t B = 0;
            if ((s = class_loff(r, pm->ref, &lo, &B))) break;
            if (!r->dloff[pm->ref])
                s = upload(r, &r->dloff[pm->ref], lo, (int64_t)sizeof(int64_t) * (B + 1), pm->name);
            v->d = r->dloff[pm->ref];
            break;
        }
        case PK_SIZE: v->i = r->b->val[pm->ref]; break;
        case PK_LO: v->i = 0; break;
        case PK_HI: v->i = pk.units; break;
        case PK_TILE: v->i = pk.tile; break;
        case PK_SCRATCH:
            v->d = r->scratch;
            vals[n].i = pk.stride;
            args[n] = &vals[n];
            n++;
            break;
        case PK_NT: v->i = 0; break;
        case PK_BLO: v->i = pk.blo; break;
        case PK_BHI: v->i = pk.bhi; break;
        default: s = ctx_fail(ctx, RJ_ERR_INTERNAL, "CUDA run: unknown parameter kind %d", pm->kind); break;
        }
    }
    if (!s) {
        unsigned blocks = (unsigned)(pk.threads / BLOCK);
        CUresult e = cu.LaunchKernel(r->cp->fns[ki], blocks, 1, 1, BLOCK, 1, 1, 0, NULL, args, NULL);
        if (e) s = cu_fail(ctx, RJ_ERR_INTERNAL, "cuLaunchKernel", e, k->name);
    }
done:
    mem_free(ctx, vals, sizeof(slot) * nslots);
    mem_free(ctx, args, sizeof(void *) * nslots);
    return s;
}

static rj_status cuda_run(rj_program *p, rj_bind *b) {
    rj_ctx *ctx = p->ctx;
    cuda_prog *cp = p->impl;
    if (!cp || !cp->mod) return ctx_fail(ctx, RJ_ERR_INTERNAL, "CUDA run: the program is not compiled");
    run r = {.ctx = ctx, .p = p, .b = b, .cp = cp, .lp = &cp->comp.lp, .nsym = p->g->nsym};
    size_t ns = (size_t)(r.nsym ? r.nsym : 1), nb = (size_t)(r.lp->nbufs ? r.lp->nbufs : 1);
    r.doff = mem_zalloc(ctx, sizeof(CUdeviceptr) * ns);
    r.dloff = mem_zalloc(ctx, sizeof(CUdeviceptr) * ns);
    r.dbuf = mem_zalloc(ctx, sizeof(CUdeviceptr) * nb);
    rj_status s = RJ_OK;
    CUresult e;
    if (!r.doff || !r.dloff || !r.dbuf) s = RJ_ERR_NOMEM;
    else if ((e = cu.CtxSetCurrent(cp->cuctx))) s = cu_fail(ctx, RJ_ERR_INTERNAL, "cuCtxSetCurrent", e, NULL);
    if (!s) s = buffers(&r);
    for (int32_t ki = 0; !s && ki < r.lp->nkernels; ki++) s = launch(&r, ki);
    if (!s && (e = cu.CtxSynchronize())) s = cu_fail(ctx, RJ_ERR_INTERNAL, "cuCtxSynchronize", e, "(a kernel failed)");
    for (int32_t i = 0; !s && i < r.lp->nbufs; i++) {
        const lbuf *lb = &r.lp->bufs[i];
        if (lb->kind != LB_OUTPUT) continue;
        const out_bind *ob = &b->out[lb->index];
        size_t bytes;
        if (!bytes_of(ob->numel, rj_dtype_size((rj_dtype)lb->dtype), &bytes))
            s = ctx_fail(ctx, RJ_ERR_OVERFLOW, "CUDA run: output %d is too large", lb->index);
        else if (bytes && (e = cu.MemcpyDtoH(ob->data, r.dbuf[i], bytes)))
            s = cu_fail(ctx, RJ_ERR_INTERNAL, "cuMemcpyDtoH_v2", e, "copying an output back");
    }
    /* teardown; after a failed launch the context may be unusable, and frees may fail too */
    if (r.dbuf)
        for (int32_t i = 0; i < r.lp->nbufs; i++)
            if (r.dbuf[i]) cu.MemFree(r.dbuf[i]);
    for (size_t i = 0; i < ns; i++) {
        if (r.doff && r.doff[i]) cu.MemFree(r.doff[i]);
        if (r.dloff && r.dloff[i]) cu.MemFree(r.dloff[i]);
    }
    if (r.scratch) cu.MemFree(r.scratch);
    mem_free(ctx, r.doff, sizeof(CUdeviceptr) * ns);
    mem_free(ctx, r.dloff, sizeof(CUdeviceptr) * ns);
    mem_free(ctx, r.dbuf, sizeof(CUdeviceptr) * nb);
    return s;
}

const backend backend_cuda = {"cuda", cuda_compile, cuda_run, cuda_release};
