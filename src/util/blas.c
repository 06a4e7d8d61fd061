/*
 * blas.c — the host's BLAS, loaded at run time: the GEMM core of matrix products on the CPU.
 *
 * A well-kept BLAS (OpenBLAS, chosen by measurement on Debian 12: 160 GFLOP/s single-threaded
 * sgemm at K=256, N=1024 on this project's machines against BLIS's 115) beats anything a
 * generic JIT kernel does for the core of a GEMM, so the CPU target calls it and fuses what
 * surrounds it (loop IR, lower/gemm_lib.c). It is loaded with dlopen, like NVRTC: ragjit builds and runs
 * where no BLAS is installed, and matrix products then use the JIT's own kernel. The library
 * is asked to run single-threaded: ragjit gives each of its worker threads its own chunk of
 * rows, so that the product of a chunk and the fused work after it share the cache.
 *
 * RAGJIT_BLAS selects the library: a path or soname, or "off" for none (what tests of the
 * fallback use). It is read once per process, as the library is loaded once.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static blas_fns blas;
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

static bool try_load(const char *name) {
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!h) return false;
    blas_fns f = {.name = name};
    if (!dl_sym(h, "cblas_sgemm", &f.sgemm) || !dl_sym(h, "cblas_dgemm", &f.dgemm)) {
        dlclose(h);
        return false;
    }
    void (*threads)(int) = NULL;
    if (dl_sym(h, "openblas_set_num_threads", &threads) || dl_sym(h, "goto_set_num_threads", &threads))
        threads(1);
    void (*bli)(long) = NULL;
    if (dl_sym(h, "bli_thread_set_num_threads", &bli)) bli(1);
    blas = f; /* the handle stays open for the process */
    return true;
}

static void load(void) {
    const char *env = getenv("RAGJIT_BLAS");
    if (env && !strcmp(env, "off")) return;
    if (env && *env) {
        try_load(env);
        return;
    }
    static const char *const names[] = {"libopenblas.so.0", "libblis.so.4", "libblas.so.3"};
    for (size_t i = 0; i < RJ_ARRAY_LEN(names) && !blas.sgemm; i++) try_load(names[i]);
}

const blas_fns *blas_get(void) {
    pthread_once(&blas_once, load);
    return blas.sgemm ? &blas : NULL;
}
