/*
 * blas.c — the core of CPU matrix products: the host's BLAS, loaded at run time, or ragjit's own.
 *
 * A well-kept BLAS (OpenBLAS, chosen by measurement on Debian 12: 160 GFLOP/s single-threaded
 * sgemm at K=256, N=1024 on this project's machines against BLIS's 115) is what the CPU target
 * calls for the core of a GEMM, fusing what surrounds it (loop IR, lower/gemm_lib.c). It is
 * loaded with dlopen, like NVRTC: ragjit builds and runs where no BLAS is installed, and f32
 * products then use ragjit's own packed sgemm (gemm.c), which runs at 0.7-1.3x OpenBLAS on the
 * shapes ragjit gives it (bench/NOTES.md); f64 products, which it does not cover, use the JIT's loop template
 * (lower/matmul.c). The library is asked to run single-threaded: ragjit gives each of its
 * worker threads its own chunk of rows, so that the product of a chunk and the fused work
 * after it share the cache.
 *
 * Chosen on purpose, never whatever the loader finds first: optimised libraries are tried
 * first (OpenBLAS, MKL, BLIS, FlexiBLAS), then Debian's libblas.so.3, which is an alternative
 * that may be OpenBLAS or the netlib reference. A loaded library is identified by what it
 * exports (openblas_get_config, MKL_Get_Version_String, bli_info_get_version_str,
 * flexiblas_current_backend); one that is none of these is the reference BLAS, 27 times slower
 * than OpenBLAS and far slower than ragjit's own sgemm, so a search that finds only it leaves
 * it unused and says so once on stderr (a silent fallback is how a machine ran 27 times slower
 * unnoticed, issue 36). rj_blas_info says which serves and why (`ragjit --version` and bench
 * print it).
 *
 * RAGJIT_BLAS selects: a path or soname (used even if it is the reference BLAS: the user asked
 * for it), "off" for no library (ragjit's own sgemm: what the tests of the fallback use), or
 * "loops" for neither (products as JIT loops: the template the golden dumps keep); RAGJIT_SGEMM
 * picks ragjit's own kernel (use_own). Both are read once per process, as the library is
 * loaded once. Every symbol is also looked up with the prefix "scipy_": the OpenBLAS that
 * PyPI's scipy-openblas32 wheel ships exports its names so (so as not to clash with another
 * BLAS in the process), and the Python package, which depends on that wheel, points
 * RAGJIT_BLAS at it where the system has no OpenBLAS.
 *
 * A library built with bf16 support also exports cblas_sbgemm (bf16 operands, f32 products),
 * which bf16 products then use in place of widening their operands for sgemm (lower/gemm_lib.c);
 * neither Debian 12's OpenBLAS 0.3.21 nor the scipy-openblas32 wheel exports it. Where the
 * library has none and the CPU has AMX-BF16, amx.c's serves instead (RAGJIT_AMX=0: not), and
 * on a CPU with AVX512-BF16 and no AMX (AMD Zen 4), bf16dot.c's (RAGJIT_AVX512BF16=0: not).
 * RAGJIT_NO_SBGEMM set ignores all three (to compare with the widened path).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static blas_fns blas;
static char blas_desc[256];
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

/* dl_sym of name, or else of "scipy_" name (see the top of the file). */
static bool sym(void *h, const char *name, void *fnptr) {
    char prefixed[64];
    if (dl_sym(h, name, fnptr)) return true;
    snprintf(prefixed, sizeof prefixed, "scipy_%s", name);
    return dl_sym(h, prefixed, fnptr);
}

/* What the library at h is, from what it exports: "OpenBLAS 0.3.21 ...", or "" for none of
 * the optimised libraries ragjit knows (the reference BLAS, or an unknown one). */
static void identify(void *h, char *out, size_t n) {
    char *(*openblas)(void) = NULL;
    const char *(*bli)(void) = NULL;
    void (*mkl)(char *, int) = NULL;
    size_t (*flexi)(char *, size_t) = NULL;
    out[0] = 0;
    if (sym(h, "openblas_get_config", &openblas)) {
        snprintf(out, n, "%s", openblas());
        if (strncmp(out, "OpenBLAS", 8)) snprintf(out, n, "OpenBLAS");
    } else if (sym(h, "MKL_Get_Version_String", &mkl)) {
        mkl(out, (int)n);
        out[n - 1] = 0;
    } else if (sym(h, "bli_info_get_version_str", &bli)) {
        snprintf(out, n, "BLIS %s", bli());
    } else if (sym(h, "flexiblas_current_backend", &flexi)) {
        char be[96] = "";
        flexi(be, sizeof be);
        snprintf(out, n, "FlexiBLAS (backend %s)", be);
    }
}

/* Loads `name`; with `any`, whatever it is, else only an optimised library. */
static bool try_load(const char *name, bool any, bool *reference) {
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!h) return false;
    blas_fns f = {.name = name};
    char what[160];
    identify(h, what, sizeof what);
    if (!sym(h, "cblas_sgemm", &f.sgemm) || !sym(h, "cblas_dgemm", &f.dgemm) || (!what[0] && !any)) {
        if (f.sgemm && !what[0]) *reference = true;
        dlclose(h);
        return false;
    }
    if (!getenv("RAGJIT_NO_SBGEMM")) sym(h, "cblas_sbgemm", &f.sbgemm); /* optional (the tests' switch) */
    void (*threads)(int) = NULL;
    if (sym(h, "openblas_set_num_threads", &threads) || sym(h, "goto_set_num_threads", &threads) ||
        sym(h, "MKL_Set_Num_Threads", &threads))
        threads(1);
    void (*bli)(long) = NULL;
    if (sym(h, "bli_thread_set_num_threads", &bli)) bli(1);
    snprintf(blas_desc, sizeof blas_desc, "%s (%s)", what[0] ? what : "the reference BLAS, slow", name);
    blas = f; /* the handle stays open for the process */
    return true;
}

/* ragjit's own sgemm serves, for `why`: the best kernel this CPU runs, or the one
 * RAGJIT_SGEMM names (avx512, avx2, portable: what tests of a smaller CPU's kernel use) if the
 * CPU runs it. */
static void use_own(const char *why) {
    const char *env = getenv("RAGJIT_SGEMM");
    int isa = !env ? SGEMM_BEST : !strcmp(env, "avx512") ? SGEMM_AVX512 : !strcmp(env, "avx2") ? SGEMM_AVX2
            : !strcmp(env, "portable") ? SGEMM_PORTABLE : SGEMM_BEST;
    const sgemm_kernel *k = sgemm_kernel_get(isa);
    if (!k) k = sgemm_kernel_get(SGEMM_BEST);
    blas = (blas_fns){.name = "ragjit", .own = k};
    snprintf(blas_desc, sizeof blas_desc, "ragjit's own sgemm (%s%s): %s", k->name,
             env && k->isa != isa ? ", not RAGJIT_SGEMM's" : "", why);
}

static void load(void) {
    const char *env = getenv("RAGJIT_BLAS");
    bool reference = false;
    if (env && !strcmp(env, "loops")) {
        snprintf(blas_desc, sizeof blas_desc, "none: products as JIT loops (RAGJIT_BLAS=loops)");
        return;
    }
    if (env && !strcmp(env, "off")) {
        use_own("RAGJIT_BLAS=off");
        return;
    }
    if (env && *env) {
        if (!try_load(env, true, &reference)) {
            char why[200];
            snprintf(why, sizeof why, "RAGJIT_BLAS=%.120s does not load as a CBLAS", env);
            use_own(why);
        }
        return;
    }
    static const char *const names[] = {"libopenblas.so.0", "libmkl_rt.so.2", "libmkl_rt.so", "libblis.so.4",
                                        "libblis.so.3", "libflexiblas.so.3", "libblas.so.3"};
    for (size_t i = 0; i < RJ_ARRAY_LEN(names) && !blas.sgemm; i++) try_load(names[i], false, &reference);
    if (blas.sgemm) return;
    use_own(reference ? "only the reference BLAS was found, which is slower (install OpenBLAS: libopenblas0-pthread)"
                      : "no optimised BLAS found (install OpenBLAS: libopenblas0-pthread)");
    if (reference)
        fprintf(stderr, "ragjit: only the reference BLAS (libblas.so.3) was found, 27x slower than OpenBLAS; "
                "ragjit's own sgemm serves instead (install libopenblas0-pthread, or set RAGJIT_BLAS)\n");
}

/* bf16 products by AMX tiles (amx.c), else by AVX512-BF16 (bf16dot.c), where the library has
 * no sbgemm of its own. */
static void load_all(void) {
    load();
    if (!(blas.sgemm || blas.own) || blas.sbgemm || getenv("RAGJIT_NO_SBGEMM")) return;
    const char *how = "AMX";
    if ((blas.sbgemm = amx_sbgemm_get())) blas.sbgemm_kernel = amx_kernel();
    else if ((blas.sbgemm = bf16dot_sbgemm_get())) blas.sbgemm_kernel = bf16dot_kernel(), how = "AVX512-BF16";
    if (!blas.sbgemm) return;
    size_t n = strlen(blas_desc);
    snprintf(blas_desc + n, sizeof blas_desc - n, "; bf16 products by %s", how);
}

const blas_fns *blas_get(void) {
    pthread_once(&blas_once, load_all);
    return blas.sgemm || blas.own ? &blas : NULL;
}

const char *blas_info(void) {
    pthread_once(&blas_once, load_all);
    return blas_desc;
}
