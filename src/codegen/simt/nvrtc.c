/*
 * nvrtc.c — CUDA C to PTX and machine code with NVRTC, loaded with dlopen.
 *
 * ragjit must build and run where no CUDA toolkit exists, so nothing here includes a CUDA
 * header or links a CUDA library: the few types and entry points are declared below (checked
 * against the CUDA 13 headers, see shared/reference/cuda-nvrtc.md) and resolved with dlsym.
 * NVRTC is loaded once per process (pthread_once) and never unloaded: it is large and slow to
 * load. This file only compiles (and packs what it made for the persistent cache); loading
 * code onto a device and running it is the CUDA target's business (runtime/cuda.c).
 *
 * cuda_ptx compiles for a virtual architecture: the highest NVRTC supports at or below the
 * requested one. NVRTC 13 dropped everything below compute_75, so asking it for an arbitrary
 * number fails; its own list of supported architectures is the authority. cuda_image_build
 * compiles for the device itself where NVRTC supports its architecture (sm_90 for an H100):
 * NVRTC then assembles the PTX too, and the cubin it gives is machine code the driver loads
 * without translating (a process that loads it from the persistent cache runs neither NVRTC
 * nor the driver's PTX compiler); for a device newer than NVRTC knows, PTX alone, which the
 * driver translates for it. Options:
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
    nvrtcResult (*GetCUBINSize)(nvrtcProgram, size_t *);    /* optional (CUDA >= 11.1) */
    nvrtcResult (*GetCUBIN)(nvrtcProgram, char *);          /* optional */
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
        if (!dl_sym(lib, "nvrtcGetCUBINSize", &nv.GetCUBINSize) || !dl_sym(lib, "nvrtcGetCUBIN", &nv.GetCUBIN))
            nv.GetCUBINSize = NULL, nv.GetCUBIN = NULL;
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

/* NVRTC's output of a compiled program: the PTX, and with machine code the cubin. */
static rj_status take_output(rj_ctx *ctx, nvrtcProgram prog, bool machine_code, cuda_image *out) {
    size_t n = 0;
    nvrtcResult r;
    if ((r = nv.GetPTXSize(prog, &n)) || n == 0)
        return ctx_fail(ctx, RJ_ERR_COMPILE, "NVRTC: nvrtcGetPTXSize failed: %s", nvrtc_errstr(r));
    char *ptx = mem_alloc(ctx, n);
    if (!ptx) return RJ_ERR_NOMEM;
    if ((r = nv.GetPTX(prog, ptx))) {
        mem_free(ctx, ptx, n);
        return ctx_fail(ctx, RJ_ERR_COMPILE, "NVRTC: nvrtcGetPTX failed: %s", nvrtc_errstr(r));
    }
    ptx[n - 1] = 0;
    sbuf b;
    sbuf_init(&b, ctx);
    sbuf_puts(&b, ptx);
    mem_free(ctx, ptx, n);
    if (!(out->ptx = sbuf_finish(&b))) return RJ_ERR_NOMEM;
    if (!machine_code) return RJ_OK;
    if ((r = nv.GetCUBINSize(prog, &n)) || n == 0)
        return ctx_fail(ctx, RJ_ERR_COMPILE, "NVRTC: nvrtcGetCUBINSize failed: %s", nvrtc_errstr(r));
    if (!(out->cubin = mem_alloc(ctx, n))) return RJ_ERR_NOMEM;
    out->cubin_len = n;
    if ((r = nv.GetCUBIN(prog, (char *)out->cubin)))
        return ctx_fail(ctx, RJ_ERR_COMPILE, "NVRTC: nvrtcGetCUBIN failed: %s", nvrtc_errstr(r));
    return RJ_OK;
}

void cuda_image_free(rj_ctx *ctx, cuda_image *im) {
    rj_string_free(ctx, im->ptx);
    mem_free(ctx, im->cubin, im->cubin_len);
    *im = (cuda_image){0};
}

rj_status cuda_image_build(rj_ctx *ctx, const lprog *p, int arch, bool machine_code, cuda_image *out) {
    *out = (cuda_image){0};
    char *src = cuda_source(ctx, p);
    if (!src) return ctx_last_status(ctx) ? ctx_last_status(ctx) : RJ_ERR_NOMEM;
    pthread_once(&nv_once, nvrtc_load);
    if (!nv.ok) {
        rj_string_free(ctx, src);
        return ctx_fail(ctx, RJ_ERR_NO_DEVICE, "NVRTC is not available (%s)", nv.err[0] ? nv.err : "not found");
    }
    int want = arch > 0 ? arch : 90;
    int lowest, use = pick_arch(ctx, want, &lowest);
    if (use <= 0) {
        rj_string_free(ctx, src);
        if (use < 0) return RJ_ERR_NOMEM;
        return ctx_fail(ctx, RJ_ERR_COMPILE, "NVRTC cannot compile for compute capability %d.%d "
                        "(the oldest it supports is %d.%d)", want / 10, want % 10, lowest / 10, lowest % 10);
    }
    /* machine code only for the architecture asked for (SASS runs on its own major version) */
    machine_code = machine_code && use == want && nv.GetCUBIN;
    char archopt[48];
    snprintf(archopt, sizeof archopt, "--gpu-architecture=%s_%d", machine_code ? "sm" : "compute", use);
    const char *opts[] = {archopt, "--fmad=false"};
    nvrtcProgram prog = NULL;
    nvrtcResult r = nv.CreateProgram(&prog, src, "ragjit.cu", 0, NULL, NULL);
    rj_string_free(ctx, src);
    if (r) return ctx_fail(ctx, RJ_ERR_COMPILE, "NVRTC: nvrtcCreateProgram failed: %s", nvrtc_errstr(r));
    rj_status s = RJ_OK;
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
        s = ctx_fail(ctx, RJ_ERR_COMPILE, "NVRTC failed to compile the generated CUDA C for "
                     "%s (%s): %s", archopt + 19, nvrtc_errstr(r), head[0] ? head : "no log");
    } else {
        s = take_output(ctx, prog, machine_code, out);
    }
    nv.DestroyProgram(&prog);
    if (s) cuda_image_free(ctx, out);
    return s;
}

char *cuda_ptx(rj_ctx *ctx, const lprog *p, int arch) {
    if (!ctx) return NULL;
    cuda_image im;
    return cuda_image_build(ctx, p, arch, false, &im) ? NULL : im.ptx;
}

/* ---- an image as bytes ---------------------------------------------------------------------- */

/* u64 PTX length (its NUL included), the PTX, u64 cubin length (0: none), the cubin;
 * little-endian. */
rj_status cuda_image_pack(rj_ctx *ctx, const cuda_image *im, void **data, size_t *len) {
    size_t pl = strlen(im->ptx) + 1, n = 16 + pl + im->cubin_len;
    unsigned char *b = mem_alloc(ctx, n);
    if (!b) return RJ_ERR_NOMEM;
    le_put_u64(b, pl);
    memcpy(b + 8, im->ptx, pl);
    le_put_u64(b + 8 + pl, im->cubin_len);
    if (im->cubin_len) memcpy(b + 16 + pl, im->cubin, im->cubin_len);
    *data = b;
    *len = n;
    return RJ_OK;
}

bool cuda_image_unpack(rj_ctx *ctx, const void *data, size_t len, cuda_image *out) {
    *out = (cuda_image){0};
    const unsigned char *b = data;
    if (len < 16) return false;
    uint64_t pl = le_get_u64(b);
    if (pl < 1 || pl > len - 16 || strnlen((const char *)b + 8, (size_t)pl) != pl - 1) return false;
    uint64_t cl = le_get_u64(b + 8 + pl);
    if (cl != len - 16 - pl) return false;
    sbuf sb;
    sbuf_init(&sb, ctx);
    sbuf_puts(&sb, (const char *)b + 8);
    if (!(out->ptx = sbuf_finish(&sb))) return false;
    if (cl && !(out->cubin = mem_alloc(ctx, (size_t)cl))) {
        cuda_image_free(ctx, out);
        return false;
    }
    if (cl) memcpy(out->cubin, b + 16 + pl, (size_t)cl);
    out->cubin_len = (size_t)cl;
    return true;
}
