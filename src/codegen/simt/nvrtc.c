/*
 * nvrtc.c — CUDA C to PTX with NVRTC, loaded with dlopen.
 *
 * ragjit must build and run where no CUDA toolkit exists, so nothing here includes a CUDA
 * header or links a CUDA library: the few types and entry points are declared below (checked
 * against the CUDA 13 headers, see shared/reference/cuda-nvrtc.md) and resolved with dlsym.
 * NVRTC is loaded once per process (pthread_once) and never unloaded: it is large and slow to
 * load. This file only compiles; loading PTX onto a device and running it is the CUDA
 * target's business (runtime/cuda.c).
 *
 * cuda_ptx compiles for a virtual architecture: the highest NVRTC supports at or below the
 * requested one. NVRTC 13 dropped everything below compute_75, so asking it for an arbitrary
 * number fails; its own list of supported architectures is the authority. Options:
 * --fmad=false, so the GPU rounds every multiply and add separately as the CPU backend does
 * (an explicit fma in the loop IR stays an fma); the IEEE defaults (no flush-to-zero,
 * precise division and square root) are NVRTC's own. A failed compile is a bug in the
 * emitter: the error carries the first lines of NVRTC's log.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simt.h"

typedef int nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;

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
        if (!dl_sym(lib, "nvrtcCreateProgram", &nv.CreateProgram)) missing = "nvrtcCreateProgram";
        else if (!dl_sym(lib, "nvrtcCompileProgram", &nv.CompileProgram)) missing = "nvrtcCompileProgram";
        else if (!dl_sym(lib, "nvrtcGetProgramLogSize", &nv.GetProgramLogSize)) missing = "nvrtcGetProgramLogSize";
        else if (!dl_sym(lib, "nvrtcGetProgramLog", &nv.GetProgramLog)) missing = "nvrtcGetProgramLog";
        else if (!dl_sym(lib, "nvrtcGetPTXSize", &nv.GetPTXSize)) missing = "nvrtcGetPTXSize";
        else if (!dl_sym(lib, "nvrtcGetPTX", &nv.GetPTX)) missing = "nvrtcGetPTX";
        else if (!dl_sym(lib, "nvrtcDestroyProgram", &nv.DestroyProgram)) missing = "nvrtcDestroyProgram";
        if (missing) {
            snprintf(nv.err, sizeof nv.err, "%s lacks %s", names[i], missing);
            dlclose(lib);
            continue;
        }
        dl_sym(lib, "nvrtcGetErrorString", &nv.GetErrorString);
        if (!dl_sym(lib, "nvrtcGetNumSupportedArchs", &nv.GetNumSupportedArchs) ||
            !dl_sym(lib, "nvrtcGetSupportedArchs", &nv.GetSupportedArchs))
            nv.GetNumSupportedArchs = NULL, nv.GetSupportedArchs = NULL;
        nv.ok = true;
        return; /* kept for the life of the process */
    }
}

static const char *nvrtc_errstr(nvrtcResult r) {
    const char *s = nv.GetErrorString ? nv.GetErrorString(r) : NULL;
    return s ? s : "unknown error";
}


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
    int want = arch > 0 ? arch : 90;
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
            text_head(head, sizeof head, log);
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
