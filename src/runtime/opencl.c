/*
 * opencl.c — the OpenCL target: the SIMT kernels spelled in OpenCL C 1.2 (codegen/simt), built
 * by the device's own compiler and run through the ICD loader, loaded with dlopen.
 *
 * Why OpenCL at all: the same kernels run on AMD, Intel and other GPUs, and on any CPU
 * through PoCL, so a machine without a GPU (CI) executes the GPU-shaped kernels against the
 * interpreter. ragjit must build and run where no OpenCL exists, so the few types, constants
 * and entry points of OpenCL 1.2 are declared below (checked against Khronos' cl.h) and
 * resolved with dlsym. The loader — libOpenCL.so.1, or the file RAGJIT_OPENCL_LIBRARY names
 * (tests point it at a missing file to see ragjit without OpenCL) — is loaded once per process
 * under pthread_once and never unloaded: it must outlive every context created through it.
 *
 * It is loaded into a link-map namespace of its own (dlmopen), because drivers bring their own
 * compilers: PoCL links LLVM 15 and clang 15, while ragjit's LLVM 16 sits in the process's
 * global scope, where clang's unversioned C++ template symbols (pass-model vtables) would bind
 * to LLVM 16's and crash its first build of a new source. In a namespace of its own, the
 * loader and every driver it opens see only their own dependencies. Where the C library cannot
 * open a new namespace, the loader is opened the ordinary way.
 *
 * The device is chosen once, at that load: every device of every platform is listed in order,
 * and RAGJIT_OPENCL_DEVICE=<index> picks one of that list; without it the first GPU, else the
 * first device (PoCL's CPU device where it is the only driver). What the compiler and the
 * launches need to know about it (its largest work-group and allocation, double precision,
 * correctly rounded division) is read then too. available() reports "no OpenCL device" with
 * the reason: no loader, no platform, no device, or a bad index.
 *
 * Per ragjit context, an OpenCL context and one in-order command queue (with profiling, for
 * kernel times) live in the context's slot and are released with it; compile() creates them
 * on first use, under the context's lock that program.c holds. compile() builds the program
 * with -cl-std=CL1.2 (plus correctly rounded f32 division and square root where the device
 * offers them, as the CPU and CUDA targets compute them), fails with the first lines of the
 * build log, and creates one cl_kernel per loop-IR kernel. A program that computes in f64 on a
 * device without cl_khr_fp64 is refused before building. The "opencl" dump needs no device.
 *
 * A run is launch.c's device_run with OpenCL's calls: buffers created and written (blocking,
 * so no host memory is referenced after its call returns), kernels enqueued in order, clFinish,
 * outputs read back. Each kernel runs in work-groups of its launch shape, capped by what the
 * device and the kernel allow: the generated code's thread slices make any size correct, except
 * for a kernel with block-shared memory or barriers, which is refused when the device cannot
 * give it its size. Runs may come from several threads and share the queue (enqueueing is
 * thread-safe), but a cl_kernel's arguments are not: they are set and the kernel enqueued
 * under a lock per program, and everything else a run owns is its own.
 *
 * Errors name the call and its code: while compiling RJ_ERR_COMPILE, while running
 * RJ_ERR_INTERNAL, device or host memory exhausted RJ_ERR_NOMEM. Host memory goes through the
 * context's allocator; device allocations are counted with run_reserve first.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../codegen/simt/simt.h"
#include "launch.h"

/* ---- the OpenCL declarations we need ------------------------------------------------------ */

typedef int32_t cl_int;
typedef uint32_t cl_uint;
typedef uint64_t cl_ulong;
typedef cl_ulong cl_bitfield;
typedef struct _cl_platform_id *cl_platform_id;
typedef struct _cl_device_id *cl_device_id;
typedef struct _cl_context *cl_context;
typedef struct _cl_command_queue *cl_command_queue;
typedef struct _cl_mem *cl_mem;
typedef struct _cl_program *cl_program;
typedef struct _cl_kernel *cl_kernel;
typedef struct _cl_event *cl_event;
typedef intptr_t cl_context_properties;

enum {
    CL_SUCCESS = 0,
    CL_MEM_OBJECT_ALLOCATION_FAILURE = -4,
    CL_OUT_OF_HOST_MEMORY = -6,
    CL_PLATFORM_NOT_FOUND_KHR = -1001,
    CL_TRUE = 1,
    CL_PLATFORM_VERSION = 0x0901,
    CL_PLATFORM_NAME = 0x0902,
    CL_DEVICE_TYPE = 0x1000,
    CL_DEVICE_MAX_WORK_GROUP_SIZE = 0x1004,
    CL_DEVICE_MAX_MEM_ALLOC_SIZE = 0x1010,
    CL_DEVICE_SINGLE_FP_CONFIG = 0x101B,
    CL_DEVICE_NAME = 0x102B,
    CL_DRIVER_VERSION = 0x102D,
    CL_DEVICE_VERSION = 0x102F,
    CL_DEVICE_EXTENSIONS = 0x1030,
    CL_PROGRAM_BINARY_SIZES = 0x1165,
    CL_PROGRAM_BINARIES = 0x1166,
    CL_PROGRAM_BUILD_LOG = 0x1183,
    CL_KERNEL_WORK_GROUP_SIZE = 0x11B0,
    CL_MEM_SIZE = 0x1102,
    CL_PROFILING_COMMAND_START = 0x1282,
    CL_PROFILING_COMMAND_END = 0x1283,
};
#define CL_DEVICE_TYPE_GPU ((cl_bitfield)1 << 2)
#define CL_DEVICE_TYPE_ALL ((cl_bitfield)0xFFFFFFFF)
#define CL_QUEUE_PROFILING_ENABLE ((cl_bitfield)1 << 1)
#define CL_MEM_READ_WRITE ((cl_bitfield)1 << 0)
#define CL_MEM_USE_HOST_PTR ((cl_bitfield)1 << 3)
#define CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT ((cl_bitfield)1 << 7)

/* ---- the loader and the device ----------------------------------------------------------- */

#define MAX_PLATFORMS 16
#define MAX_DEVICES 64

typedef struct opencl_api {
    bool ok;                 /* the loader, every symbol, and a chosen device */
    char err[512];           /* why there is no device */
    cl_device_id dev;
    char name[256];          /* "<device> (<platform>)", for messages */
    size_t max_group;        /* CL_DEVICE_MAX_WORK_GROUP_SIZE */
    cl_ulong max_alloc;      /* CL_DEVICE_MAX_MEM_ALLOC_SIZE */
    bool fp64;               /* cl_khr_fp64 */
    bool exact_div_sqrt;     /* f32 division and sqrt may be built correctly rounded */
    char ident[1024];        /* device, platform and driver versions: the persistent cache's key */
    uint64_t disk_hits;      /* programs built from the persistent cache's binaries (atomic) */
    cl_int (*GetPlatformIDs)(cl_uint, cl_platform_id *, cl_uint *);
    cl_int (*GetPlatformInfo)(cl_platform_id, cl_uint, size_t, void *, size_t *);
    cl_int (*GetDeviceIDs)(cl_platform_id, cl_bitfield, cl_uint, cl_device_id *, cl_uint *);
    cl_int (*GetDeviceInfo)(cl_device_id, cl_uint, size_t, void *, size_t *);
    cl_context (*CreateContext)(const cl_context_properties *, cl_uint, const cl_device_id *,
                                void (*)(const char *, const void *, size_t, void *), void *, cl_int *);
    cl_int (*ReleaseContext)(cl_context);
    cl_command_queue (*CreateCommandQueue)(cl_context, cl_device_id, cl_bitfield, cl_int *);
    cl_int (*ReleaseCommandQueue)(cl_command_queue);
    cl_program (*CreateProgramWithSource)(cl_context, cl_uint, const char **, const size_t *, cl_int *);
    cl_int (*BuildProgram)(cl_program, cl_uint, const cl_device_id *, const char *,
                           void (*)(cl_program, void *), void *);
    cl_int (*GetProgramBuildInfo)(cl_program, cl_device_id, cl_uint, size_t, void *, size_t *);
    cl_int (*ReleaseProgram)(cl_program);
    cl_program (*CreateProgramWithBinary)(cl_context, cl_uint, const cl_device_id *, const size_t *,
                                          const unsigned char **, cl_int *, cl_int *);
    cl_int (*GetProgramInfo)(cl_program, cl_uint, size_t, void *, size_t *);
    cl_kernel (*CreateKernel)(cl_program, const char *, cl_int *);
    cl_int (*GetKernelWorkGroupInfo)(cl_kernel, cl_device_id, cl_uint, size_t, void *, size_t *);
    cl_int (*ReleaseKernel)(cl_kernel);
    cl_int (*SetKernelArg)(cl_kernel, cl_uint, size_t, const void *);
    cl_mem (*CreateBuffer)(cl_context, cl_bitfield, size_t, void *, cl_int *);
    cl_int (*ReleaseMemObject)(cl_mem);
    cl_int (*EnqueueWriteBuffer)(cl_command_queue, cl_mem, cl_uint, size_t, size_t, const void *,
                                 cl_uint, const cl_event *, cl_event *);
    cl_int (*EnqueueReadBuffer)(cl_command_queue, cl_mem, cl_uint, size_t, size_t, void *, cl_uint,
                                const cl_event *, cl_event *);
    cl_int (*EnqueueNDRangeKernel)(cl_command_queue, cl_kernel, cl_uint, const size_t *, const size_t *,
                                   const size_t *, cl_uint, const cl_event *, cl_event *);
    cl_int (*Finish)(cl_command_queue);
    cl_int (*EnqueueCopyBuffer)(cl_command_queue, cl_mem, cl_mem, size_t, size_t, size_t, cl_uint,
                                const cl_event *, cl_event *);
    cl_int (*GetEventProfilingInfo)(cl_event, cl_uint, size_t, void *, size_t *);
    cl_int (*ReleaseEvent)(cl_event);
    cl_int (*GetMemObjectInfo)(cl_mem, cl_uint, size_t, void *, size_t *);
    cl_int (*SetMemObjectDestructorCallback)(cl_mem, void (*)(cl_mem, void *), void *); /* guards */
    bool guard;              /* RAGJIT_OPENCL_GUARD=1: every run's buffers between guards */
} opencl_api;

static opencl_api cl;
static pthread_once_t cl_once = PTHREAD_ONCE_INIT;

/* The name of an error code, for messages (the common ones; others print as numbers). */
static const char *cl_errname(cl_int e) {
    static const struct {
        cl_int code;
        const char *name;
    } names[] = {
        {-1, "CL_DEVICE_NOT_FOUND"}, {-2, "CL_DEVICE_NOT_AVAILABLE"}, {-3, "CL_COMPILER_NOT_AVAILABLE"},
        {-4, "CL_MEM_OBJECT_ALLOCATION_FAILURE"}, {-5, "CL_OUT_OF_RESOURCES"}, {-6, "CL_OUT_OF_HOST_MEMORY"},
        {-11, "CL_BUILD_PROGRAM_FAILURE"}, {-30, "CL_INVALID_VALUE"}, {-32, "CL_INVALID_PLATFORM"},
        {-33, "CL_INVALID_DEVICE"}, {-34, "CL_INVALID_CONTEXT"}, {-36, "CL_INVALID_COMMAND_QUEUE"},
        {-38, "CL_INVALID_MEM_OBJECT"}, {-43, "CL_INVALID_BUILD_OPTIONS"}, {-44, "CL_INVALID_PROGRAM"},
        {-45, "CL_INVALID_PROGRAM_EXECUTABLE"}, {-46, "CL_INVALID_KERNEL_NAME"}, {-48, "CL_INVALID_KERNEL"},
        {-49, "CL_INVALID_ARG_INDEX"}, {-50, "CL_INVALID_ARG_VALUE"}, {-51, "CL_INVALID_ARG_SIZE"},
        {-52, "CL_INVALID_KERNEL_ARGS"}, {-54, "CL_INVALID_WORK_GROUP_SIZE"},
        {-55, "CL_INVALID_WORK_ITEM_SIZE"}, {-59, "CL_INVALID_OPERATION"}, {-61, "CL_INVALID_BUFFER_SIZE"},
        {-63, "CL_INVALID_GLOBAL_WORK_SIZE"}, {-1001, "CL_PLATFORM_NOT_FOUND_KHR"},
    };
    for (size_t i = 0; i < RJ_ARRAY_LEN(names); i++)
        if (names[i].code == e) return names[i].name;
    return NULL;
}

/* A failed call as an error naming the call, its code, and what it was for (or NULL). */
static rj_status cl_fail(rj_ctx *ctx, rj_status s, const char *fn, cl_int e, const char *what) {
    const char *name = cl_errname(e);
    if (e == CL_MEM_OBJECT_ALLOCATION_FAILURE || e == CL_OUT_OF_HOST_MEMORY) s = RJ_ERR_NOMEM;
    return ctx_fail(ctx, s, "OpenCL: %s failed with error %d%s%s%s%s%s", fn, (int)e, name ? " (" : "",
                    name ? name : "", name ? ")" : "", what ? " " : "", what ? what : "");
}

/* A string property of a platform or device, always terminated ("" if unknown). */
static void platform_text(cl_platform_id p, cl_uint what, char *out, size_t n) {
    out[0] = 0;
    if (cl.GetPlatformInfo(p, what, n, out, NULL)) out[0] = 0;
    out[n - 1] = 0;
}

static void device_text(cl_device_id d, cl_uint what, char *out, size_t n) {
    out[0] = 0;
    if (cl.GetDeviceInfo(d, what, n, out, NULL)) out[0] = 0;
    out[n - 1] = 0;
}

/* RAGJIT_OPENCL_DEVICE as an index below n, or -1 (unset); -2 for anything else. */
static int device_index_env(int n) {
    const char *s = getenv("RAGJIT_OPENCL_DEVICE");
    if (!s || !*s) return -1;
    char *end;
    long v = strtol(s, &end, 10);
    return *end || v < 0 || v >= n ? -2 : (int)v;
}

/* Lists the devices of every platform and picks one (see the top of the file). */
static void choose_device(void) {
    cl_platform_id plat[MAX_PLATFORMS];
    cl_device_id devs[MAX_DEVICES];
    cl_platform_id devplat[MAX_DEVICES];
    cl_uint np = 0;
    cl_int e = cl.GetPlatformIDs(MAX_PLATFORMS, plat, &np);
    if (e == CL_PLATFORM_NOT_FOUND_KHR || (!e && np == 0)) {
        snprintf(cl.err, sizeof cl.err, "no OpenCL device: the ICD loader finds no platform (install "
                 "a driver: a GPU vendor's, or pocl-opencl-icd for the CPU)");
        return;
    }
    if (e) {
        snprintf(cl.err, sizeof cl.err, "no OpenCL device: clGetPlatformIDs failed with error %d", (int)e);
        return;
    }
    if (np > MAX_PLATFORMS) np = MAX_PLATFORMS;
    int n = 0;
    for (cl_uint p = 0; p < np && n < MAX_DEVICES; p++) {
        cl_uint nd = 0;
        if (cl.GetDeviceIDs(plat[p], CL_DEVICE_TYPE_ALL, (cl_uint)(MAX_DEVICES - n), devs + n, &nd)) continue;
        if (nd > (cl_uint)(MAX_DEVICES - n)) nd = (cl_uint)(MAX_DEVICES - n);
        for (cl_uint i = 0; i < nd; i++) devplat[n + (int)i] = plat[p];
        n += (int)nd;
    }
    if (n == 0) {
        snprintf(cl.err, sizeof cl.err, "no OpenCL device: %u platform%s but no device", (unsigned)np,
                 np == 1 ? "" : "s");
        return;
    }
    int pick = device_index_env(n);
    if (pick == -2) {
        snprintf(cl.err, sizeof cl.err, "no OpenCL device: RAGJIT_OPENCL_DEVICE=%s is not a device "
                 "index (there %s %d device%s: 0..%d)", getenv("RAGJIT_OPENCL_DEVICE"), n == 1 ? "is" : "are",
                 n, n == 1 ? "" : "s", n - 1);
        return;
    }
    for (int i = 0; i < n && pick < 0; i++) {
        cl_bitfield type = 0;
        if (!cl.GetDeviceInfo(devs[i], CL_DEVICE_TYPE, sizeof type, &type, NULL) && (type & CL_DEVICE_TYPE_GPU))
            pick = i;
    }
    if (pick < 0) pick = 0;
    cl.dev = devs[pick];
    char dname[128], pname[112], ext[4096];
    device_text(cl.dev, CL_DEVICE_NAME, dname, sizeof dname);
    platform_text(devplat[pick], CL_PLATFORM_NAME, pname, sizeof pname);
    snprintf(cl.name, sizeof cl.name, "%s (%s)", dname, pname);
    char pver[128], dver[128], drv[128];
    platform_text(devplat[pick], CL_PLATFORM_VERSION, pver, sizeof pver);
    device_text(cl.dev, CL_DEVICE_VERSION, dver, sizeof dver);
    device_text(cl.dev, CL_DRIVER_VERSION, drv, sizeof drv);
    snprintf(cl.ident, sizeof cl.ident, "opencl\n%s\n%s\n%s\n%s\n%s\n", dname, pname, pver, dver, drv);
    size_t group = 0;
    cl_ulong alloc = 0;
    cl_bitfield fp = 0;
    if (cl.GetDeviceInfo(cl.dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof group, &group, NULL) || group == 0)
        group = 1;
    if (cl.GetDeviceInfo(cl.dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof alloc, &alloc, NULL)) alloc = 0;
    if (cl.GetDeviceInfo(cl.dev, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp, &fp, NULL)) fp = 0;
    device_text(cl.dev, CL_DEVICE_EXTENSIONS, ext, sizeof ext);
    cl.max_group = group;
    cl.max_alloc = alloc;
    cl.exact_div_sqrt = (fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
    cl.fp64 = strstr(ext, "cl_khr_fp64") != NULL;
    cl.ok = true;
}

static void loader_load(void) {
    const char *path = getenv("RAGJIT_OPENCL_LIBRARY");
    if (!path || !*path) path = "libOpenCL.so.1";
    void *lib = dlmopen(LM_ID_NEWLM, path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        char why[256];
        snprintf(why, sizeof why, "%s", dlerror());
        if (!(lib = dlopen(path, RTLD_NOW | RTLD_LOCAL))) {
            snprintf(cl.err, sizeof cl.err, "no OpenCL device: %s not found (%s); install an ICD loader "
                     "and a driver (Debian: ocl-icd-libopencl1 and pocl-opencl-icd)", path, why);
            return;
        }
    }
    static const struct {
        const char *name;
        size_t off;
    } syms[] = {
        {"clGetPlatformIDs", offsetof(opencl_api, GetPlatformIDs)},
        {"clGetPlatformInfo", offsetof(opencl_api, GetPlatformInfo)},
        {"clGetDeviceIDs", offsetof(opencl_api, GetDeviceIDs)},
        {"clGetDeviceInfo", offsetof(opencl_api, GetDeviceInfo)},
        {"clCreateContext", offsetof(opencl_api, CreateContext)},
        {"clReleaseContext", offsetof(opencl_api, ReleaseContext)},
        {"clCreateCommandQueue", offsetof(opencl_api, CreateCommandQueue)},
        {"clReleaseCommandQueue", offsetof(opencl_api, ReleaseCommandQueue)},
        {"clCreateProgramWithSource", offsetof(opencl_api, CreateProgramWithSource)},
        {"clBuildProgram", offsetof(opencl_api, BuildProgram)},
        {"clGetProgramBuildInfo", offsetof(opencl_api, GetProgramBuildInfo)},
        {"clReleaseProgram", offsetof(opencl_api, ReleaseProgram)},
        {"clCreateProgramWithBinary", offsetof(opencl_api, CreateProgramWithBinary)},
        {"clGetProgramInfo", offsetof(opencl_api, GetProgramInfo)},
        {"clCreateKernel", offsetof(opencl_api, CreateKernel)},
        {"clGetKernelWorkGroupInfo", offsetof(opencl_api, GetKernelWorkGroupInfo)},
        {"clReleaseKernel", offsetof(opencl_api, ReleaseKernel)},
        {"clSetKernelArg", offsetof(opencl_api, SetKernelArg)},
        {"clCreateBuffer", offsetof(opencl_api, CreateBuffer)},
        {"clReleaseMemObject", offsetof(opencl_api, ReleaseMemObject)},
        {"clEnqueueWriteBuffer", offsetof(opencl_api, EnqueueWriteBuffer)},
        {"clEnqueueReadBuffer", offsetof(opencl_api, EnqueueReadBuffer)},
        {"clEnqueueNDRangeKernel", offsetof(opencl_api, EnqueueNDRangeKernel)},
        {"clFinish", offsetof(opencl_api, Finish)},
        {"clEnqueueCopyBuffer", offsetof(opencl_api, EnqueueCopyBuffer)},
        {"clGetEventProfilingInfo", offsetof(opencl_api, GetEventProfilingInfo)},
        {"clReleaseEvent", offsetof(opencl_api, ReleaseEvent)},
        {"clGetMemObjectInfo", offsetof(opencl_api, GetMemObjectInfo)},
    };
    for (size_t i = 0; i < RJ_ARRAY_LEN(syms); i++)
        if (!dl_sym(lib, syms[i].name, (char *)&cl + syms[i].off)) {
            snprintf(cl.err, sizeof cl.err, "no OpenCL device: %s lacks %s", path, syms[i].name);
            dlclose(lib); /* cl.ok stays false: nothing below is called */
            return;
        }
    choose_device(); /* the library stays loaded either way: its platforms may hold it */
    const char *g = getenv("RAGJIT_OPENCL_GUARD");
    cl.guard = cl.ok && g && !strcmp(g, "1") &&
               dl_sym(lib, "clSetMemObjectDestructorCallback", (char *)&cl + offsetof(opencl_api, SetMemObjectDestructorCallback));
}

static rj_status opencl_available(rj_ctx *ctx) {
    pthread_once(&cl_once, loader_load);
    return cl.ok ? RJ_OK : ctx_fail(ctx, RJ_ERR_NO_DEVICE, "%s", cl.err);
}

/* ---- the context's OpenCL context and queue ---------------------------------------------- */

typedef struct cl_state {
    cl_context cx;
    cl_command_queue q;
} cl_state;

static void state_release(rj_ctx *ctx, void *p) {
    cl_state *st = p;
    if (st->q) cl.ReleaseCommandQueue(st->q);
    if (st->cx) cl.ReleaseContext(st->cx);
    mem_free(ctx, st, sizeof *st);
}

/* The context's state, created on first use; the caller holds the context's lock. */
static rj_status state_get(rj_ctx *ctx, cl_state **out) {
    ctx_slot *sl = &ctx->slot[SLOT_OPENCL];
    if (!sl->state) {
        cl_state *st = mem_zalloc(ctx, sizeof *st);
        if (!st) return RJ_ERR_NOMEM;
        cl_int e = CL_SUCCESS;
        st->cx = cl.CreateContext(NULL, 1, &cl.dev, NULL, NULL, &e);
        if (!st->cx || e) {
            st->cx = NULL;
            state_release(ctx, st);
            return cl_fail(ctx, RJ_ERR_COMPILE, "clCreateContext", e, cl.name);
        }
        st->q = cl.CreateCommandQueue(st->cx, cl.dev, CL_QUEUE_PROFILING_ENABLE, &e);
        if (!st->q || e) {
            st->q = NULL;
            state_release(ctx, st);
            return cl_fail(ctx, RJ_ERR_COMPILE, "clCreateCommandQueue", e, cl.name);
        }
        sl->state = st;
        sl->release = state_release;
    }
    *out = sl->state;
    return RJ_OK;
}

/* ---- compile ------------------------------------------------------------------------------ */

typedef struct cl_code {
    cl_state *st;            /* the context's (released after every program: slot order) */
    cl_program prog;
    cl_kernel *kern;         /* per kernel */
    size_t *group;           /* per kernel: work-items per work-group */
    int32_t nk;
    cl_kernel check;         /* rj_check_offsets */
    pthread_mutex_t lock;    /* a kernel's arguments are set and its launch queued under it */
    bool lock_made;
} cl_code;

static void opencl_code_free(rj_ctx *ctx, void *p) {
    cl_code *c = p;
    if (!c) return;
    size_t nk = (size_t)(c->nk ? c->nk : 1);
    for (int32_t i = 0; c->kern && i < c->nk; i++)
        if (c->kern[i]) cl.ReleaseKernel(c->kern[i]);
    if (c->check) cl.ReleaseKernel(c->check);
    if (c->prog) cl.ReleaseProgram(c->prog);
    if (c->lock_made) pthread_mutex_destroy(&c->lock);
    mem_free(ctx, c->kern, sizeof(cl_kernel) * nk);
    mem_free(ctx, c->group, sizeof(size_t) * nk);
    mem_free(ctx, c, sizeof *c);
}

/* The error of a failed build, with the first lines of the device compiler's log. */
static rj_status build_failed(rj_ctx *ctx, cl_program prog, cl_int e) {
    size_t n = 0;
    char *log = NULL, head[1024] = "";
    if (!cl.GetProgramBuildInfo(prog, cl.dev, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) && n > 0 &&
        (log = mem_alloc(ctx, n))) {
        if (cl.GetProgramBuildInfo(prog, cl.dev, CL_PROGRAM_BUILD_LOG, n, log, NULL)) log[0] = 0;
        log[n - 1] = 0;
        text_head(head, sizeof head, log);
        mem_free(ctx, log, n);
    } else if (n > 0) {
        return RJ_ERR_NOMEM;
    }
    const char *name = cl_errname(e);
    return ctx_fail(ctx, RJ_ERR_COMPILE, "OpenCL: clBuildProgram failed with error %d%s%s%s for %s: %s",
                    (int)e, name ? " (" : "", name ? name : "", name ? ")" : "", cl.name,
                    head[0] ? head : "no build log");
}

/* Does the kernel rely on its work-group size (block-shared memory or barriers)? */
static bool needs_its_block(const lkernel *k) {
    if (k->launch.simt && k->launch.group > 1 && k->launch.group == k->launch.block) return true;
    for (int32_t i = 0; i < k->nlocals; i++)
        if (k->locals[i].scope == LL_BLOCK) return true;
    for (int32_t i = 0; i < k->nst; i++)
        if (k->st[i].kind == LS_BARRIER) return true;
    return false;
}

#define BLOCK 128 /* work-items per work-group where the kernel's launch shape names none */

/* The built program's binary for the device, to the persistent cache (nothing if the driver
 * gives none). */
static void store_binary(rj_ctx *ctx, cl_program prog, const sbuf *key) {
    size_t n = 0;
    if (cl.GetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof n, &n, NULL) || n == 0) return;
    unsigned char *bin = mem_alloc(ctx, n);
    if (!bin) {
        ctx_clear_error(ctx);
        return;
    }
    if (!cl.GetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL))
        disk_store(ctx, "opencl", key->s, key->len, bin, n);
    mem_free(ctx, bin, n);
}

uint64_t opencl_disk_hit_count(void) { return __atomic_load_n(&cl.disk_hits, __ATOMIC_RELAXED); }

static rj_status build(rj_ctx *ctx, const lprog *lp, cl_code *c) {
    rj_status s;
    if (simt_uses_f64(lp) && !cl.fp64)
        return ctx_fail(ctx, RJ_ERR_UNSUPPORTED, "OpenCL: the program computes in f64, but %s has no "
                        "double precision (cl_khr_fp64); choose another device with "
                        "RAGJIT_OPENCL_DEVICE or compute in f32", cl.name);
    if ((s = state_get(ctx, &c->st))) return s;
    const char *opts = cl.exact_div_sqrt ? "-cl-std=CL1.2 -cl-fp32-correctly-rounded-divide-sqrt"
                                         : "-cl-std=CL1.2";
    cl_int e = CL_SUCCESS;
    /* the persistent cache: the driver's binary of an earlier process, keyed by this build of
     * ragjit, the device and driver, the options and the loop IR */
    char ident[sizeof cl.ident + 128];
    snprintf(ident, sizeof ident, "%s%s\n", cl.ident, opts);
    sbuf key;
    if ((s = disk_key(ctx, &key, lp, ident))) return s;
    bool on = key.len > 0;
    void *bin = NULL;
    size_t blen = 0;
    if (on && disk_load(ctx, "opencl", key.s, key.len, &bin, &blen)) {
        const unsigned char *bp = bin;
        cl_int bst = CL_SUCCESS;
        c->prog = cl.CreateProgramWithBinary(c->st->cx, 1, &cl.dev, &blen, &bp, &bst, &e);
        if (c->prog && (e || bst || cl.BuildProgram(c->prog, 1, &cl.dev, opts, NULL, NULL))) {
            cl.ReleaseProgram(c->prog); /* the driver does not take it back: compile */
            c->prog = NULL;
        }
        mem_free(ctx, bin, blen);
        if (c->prog) __atomic_add_fetch(&cl.disk_hits, 1, __ATOMIC_RELAXED);
    }
    if (!c->prog) {
        char *src = opencl_source(ctx, lp);
        if (!src) {
            sbuf_free(&key);
            return ctx_last_status(ctx) ? ctx_last_status(ctx) : RJ_ERR_COMPILE;
        }
        const char *text = src;
        c->prog = cl.CreateProgramWithSource(c->st->cx, 1, &text, NULL, &e);
        rj_string_free(ctx, src);
        if (!c->prog || e) {
            c->prog = NULL;
            sbuf_free(&key);
            return cl_fail(ctx, RJ_ERR_COMPILE, "clCreateProgramWithSource", e, NULL);
        }
        if ((e = cl.BuildProgram(c->prog, 1, &cl.dev, opts, NULL, NULL))) {
            sbuf_free(&key);
            return build_failed(ctx, c->prog, e);
        }
        if (on) store_binary(ctx, c->prog, &key);
    }
    sbuf_free(&key);
    size_t nk = (size_t)(lp->nkernels ? lp->nkernels : 1);
    c->nk = lp->nkernels; /* before allocating: code_free frees by it */
    if (!(c->kern = mem_zalloc(ctx, sizeof(cl_kernel) * nk)) || !(c->group = mem_zalloc(ctx, sizeof(size_t) * nk)))
        return RJ_ERR_NOMEM;
    for (int32_t i = 0; i < lp->nkernels; i++) {
        const lkernel *k = &lp->kernels[i];
        c->kern[i] = cl.CreateKernel(c->prog, k->name, &e);
        if (!c->kern[i] || e) {
            c->kern[i] = NULL;
            return cl_fail(ctx, RJ_ERR_COMPILE, "clCreateKernel", e, k->name);
        }
        size_t want = k->launch.simt && k->launch.block > 0 ? (size_t)k->launch.block : BLOCK, most = 0;
        if (cl.GetKernelWorkGroupInfo(c->kern[i], cl.dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof most, &most, NULL) ||
            most == 0 || most > cl.max_group)
            most = cl.max_group;
        if (want > most && needs_its_block(k))
            return ctx_fail(ctx, RJ_ERR_UNSUPPORTED, "OpenCL: kernel %s needs work-groups of %zu "
                            "work-items, but %s allows %zu", k->name, want, cl.name, most);
        size_t g = want < most ? want : most;
        while (g & (g - 1)) g &= g - 1; /* a power of two: a multiple of the kernel's thread groups */
        c->group[i] = g;
    }
    c->check = cl.CreateKernel(c->prog, "rj_check_offsets", &e);
    if (!c->check || e) {
        c->check = NULL;
        return cl_fail(ctx, RJ_ERR_COMPILE, "clCreateKernel", e, "rj_check_offsets");
    }
    if (pthread_mutex_init(&c->lock, NULL))
        return ctx_fail(ctx, RJ_ERR_INTERNAL, "OpenCL: cannot create a mutex");
    c->lock_made = true;
    return RJ_OK;
}

static rj_status opencl_compile(rj_ctx *ctx, const lprog *lp, void **out) {
    rj_status s = opencl_available(ctx);
    if (s) return s;
    cl_code *c = mem_zalloc(ctx, sizeof *c);
    if (!c) return RJ_ERR_NOMEM;
    if ((s = build(ctx, lp, c))) {
        opencl_code_free(ctx, c);
        return s;
    }
    *out = c;
    return RJ_OK;
}

static rj_status opencl_dump(rj_ctx *ctx, const lprog *lp, const void *code, int st, char **text) {
    (void)code;
    text[st] = opencl_source(ctx, lp);
    return text[st] ? RJ_OK : ctx_last_status(ctx);
}

/* ---- run ---------------------------------------------------------------------------------- */

#define MAX_THREADS 65536
#define SCRATCH_BUDGET ((int64_t)256 << 20) /* bytes of per-thread scratch per launch */
/* At least MIN_ALLOC bytes: an empty buffer is an error to OpenCL, and some kernels read
 * element 0 of an empty buffer (layer_norm's shift value) without using it. */
#define MIN_ALLOC 64

typedef struct run {
    rj_ctx *ctx;
    cl_code *c;
    const lprog *lp;
    cl_command_queue q;   /* the binding's queue, or the context's */
    cl_event first, last; /* the first and the last kernel's events (profiling) */
} run;

/* Nanoseconds from the start of `a` to the end of `b` by the device's profiling timer. */
static bool span_ms(cl_event a, cl_event b, double *ms) {
    cl_ulong t0 = 0, t1 = 0;
    if (!a || !b || cl.GetEventProfilingInfo(a, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL) ||
        cl.GetEventProfilingInfo(b, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL) || t1 < t0)
        return false;
    *ms = (double)(t1 - t0) * 1e-6;
    return true;
}

/* ---- guarded buffers (RAGJIT_OPENCL_GUARD=1) ----
 * A debugging aid for the generated kernels: each buffer of a run is host memory handed to
 * the driver (CL_MEM_USE_HOST_PTR, which a CPU device such as PoCL uses in place) with GUARD
 * bytes of a known pattern on either side, and after every run the guards of every live
 * buffer are compared: a kernel that wrote outside its buffer fails the run, naming the
 * buffer, where ASan sees nothing (PoCL's kernels are not instrumented) and the damage would
 * otherwise surface later as a corrupt heap. The memory is freed when the driver destroys the
 * buffer (its destructor callback). Plain malloc: a debugging mode outside the allocator hook. */
#define GUARD 4096
#define GUARD_BYTE 0xa5

typedef struct guarded {
    struct guarded *next;
    unsigned char *base; /* guard_block(n) bytes */
    size_t n;
    char what[96];
} guarded;

/* The bytes of a guarded block: GUARD, the buffer's n bytes rounded up to GUARD, GUARD. */
static size_t guard_block(size_t n) { return (n + GUARD - 1) / GUARD * GUARD + 2 * GUARD; }

static guarded *guards;
static pthread_mutex_t guards_lock = PTHREAD_MUTEX_INITIALIZER;

static void guard_release(cl_mem m, void *ud) {
    (void)m;
    guarded *g = ud;
    pthread_mutex_lock(&guards_lock);
    for (guarded **p = &guards; *p; p = &(*p)->next)
        if (*p == g) {
            *p = g->next;
            break;
        }
    pthread_mutex_unlock(&guards_lock);
    free(g->base);
    free(g);
}

static rj_status guard_alloc(run *r, uint64_t *d, size_t n, const char *what) {
    guarded *g = malloc(sizeof *g);
    unsigned char *base = g ? aligned_alloc(GUARD, guard_block(n)) : NULL;
    if (!base) {
        free(g);
        return ctx_fail(r->ctx, RJ_ERR_NOMEM, "OpenCL run: out of memory for a guarded buffer of %zu bytes", n);
    }
    memset(base, GUARD_BYTE, guard_block(n));
    *g = (guarded){.base = base, .n = n};
    snprintf(g->what, sizeof g->what, "%s", what ? what : "a buffer");
    cl_int e = CL_SUCCESS;
    cl_mem m = cl.CreateBuffer(r->c->st->cx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, n, base + GUARD, &e);
    if (!m || e || cl.SetMemObjectDestructorCallback(m, guard_release, g)) {
        if (m) cl.ReleaseMemObject(m);
        free(base);
        free(g);
        return cl_fail(r->ctx, RJ_ERR_INTERNAL, "clCreateBuffer", e ? e : CL_MEM_OBJECT_ALLOCATION_FAILURE,
                       "(a guarded buffer, RAGJIT_OPENCL_GUARD)");
    }
    pthread_mutex_lock(&guards_lock);
    g->next = guards;
    guards = g;
    pthread_mutex_unlock(&guards_lock);
    *d = (uint64_t)(uintptr_t)m;
    return RJ_OK;
}

/* After a run: the first guard byte of a live buffer that a kernel overwrote, as an error. */
static rj_status guard_check(rj_ctx *ctx) {
    rj_status st = RJ_OK;
    pthread_mutex_lock(&guards_lock);
    for (guarded *g = guards; g && st == RJ_OK; g = g->next) {
        size_t end = guard_block(g->n);
        for (size_t j = GUARD; j-- > 0 && st == RJ_OK;) /* nearest the buffer first */
            if (g->base[j] != GUARD_BYTE)
                st = ctx_fail(ctx, RJ_ERR_INTERNAL, "OpenCL run: a kernel wrote outside %s (%zu bytes), "
                              "%zu bytes before its start (RAGJIT_OPENCL_GUARD)", g->what, g->n, GUARD - j);
        for (size_t j = GUARD + g->n; j < end && st == RJ_OK; j++)
            if (g->base[j] != GUARD_BYTE)
                st = ctx_fail(ctx, RJ_ERR_INTERNAL, "OpenCL run: a kernel wrote outside %s (%zu bytes), "
                              "%zu bytes past its end (RAGJIT_OPENCL_GUARD)", g->what, g->n, j - GUARD - g->n + 1);
    }
    pthread_mutex_unlock(&guards_lock);
    return st;
}

static rj_status run_alloc(void *ud, uint64_t *d, int64_t bytes, const char *what) {
    run *r = ud;
    size_t n = bytes > MIN_ALLOC ? (size_t)bytes : MIN_ALLOC;
    *d = 0;
    if (cl.max_alloc && n > cl.max_alloc)
        return ctx_fail(r->ctx, RJ_ERR_NOMEM, "OpenCL run: %zu bytes for %s are more than %s allocates at "
                        "once (%llu bytes)", n, what, cl.name, (unsigned long long)cl.max_alloc);
    if (cl.guard) return guard_alloc(r, d, n, what);
    cl_int e = CL_SUCCESS;
    cl_mem m = cl.CreateBuffer(r->c->st->cx, CL_MEM_READ_WRITE, n, NULL, &e);
    if (!m || e) {
        char detail[160];
        snprintf(detail, sizeof detail, "allocating %zu bytes for %s", n, what);
        return cl_fail(r->ctx, RJ_ERR_INTERNAL, "clCreateBuffer", e ? e : CL_MEM_OBJECT_ALLOCATION_FAILURE, detail);
    }
    *d = (uint64_t)(uintptr_t)m;
    return RJ_OK;
}

static void run_release(void *ud, uint64_t d) {
    (void)ud;
    cl.ReleaseMemObject((cl_mem)(uintptr_t)d);
}

static rj_status run_write(void *ud, uint64_t d, const void *src, size_t bytes, const char *what) {
    run *r = ud;
    cl_int e = cl.EnqueueWriteBuffer(r->q, (cl_mem)(uintptr_t)d, CL_TRUE, 0, bytes, src, 0, NULL, NULL);
    return e ? cl_fail(r->ctx, RJ_ERR_INTERNAL, "clEnqueueWriteBuffer", e, what) : RJ_OK;
}

static rj_status run_read(void *ud, void *dst, uint64_t d, size_t bytes, const char *what) {
    run *r = ud;
    cl_int e = cl.EnqueueReadBuffer(r->q, (cl_mem)(uintptr_t)d, CL_TRUE, 0, bytes, dst, 0, NULL, NULL);
    return e ? cl_fail(r->ctx, RJ_ERR_INTERNAL, "clEnqueueReadBuffer", e, what) : RJ_OK;
}

static int64_t run_block(void *ud, int32_t ki) { return (int64_t)((run *)ud)->c->group[ki]; }

static bool is_pointer(int kind) {
    return kind == PK_BUF || kind == PK_OFF || kind == PK_LOFF || kind == PK_SCRATCH || kind == PK_PITEM ||
                kind == PK_PSTART || kind == PK_SQOFF;
}

/* Pointers are cl_mem objects, every other value (and a scratch pointer's stride) a long. */
static rj_status run_launch(void *ud, int32_t ki, int64_t block, int64_t threads, uint64_t *args) {
    run *r = ud;
    const lkernel *k = &r->lp->kernels[ki];
    cl_kernel kn = r->c->kern[ki];
    const char *call = "clSetKernelArg";
    cl_int e = CL_SUCCESS;
    cl_uint n = 0;
    pthread_mutex_lock(&r->c->lock);
    for (int32_t a = 0; !e && a < k->nparams; a++) {
        int kind = k->params[a].kind;
        if (is_pointer(kind)) {
            cl_mem m = (cl_mem)(uintptr_t)args[n];
            e = cl.SetKernelArg(kn, n, sizeof m, &m);
        } else {
            e = cl.SetKernelArg(kn, n, sizeof args[n], &args[n]);
        }
        n++;
        if (!e && kind == PK_SCRATCH) e = cl.SetKernelArg(kn, n, sizeof args[n], &args[n]), n++;
    }
    if (!e) {
        size_t global = (size_t)threads, local = (size_t)block;
        call = "clEnqueueNDRangeKernel";
        cl_event ev = NULL;
        e = cl.EnqueueNDRangeKernel(r->q, kn, 1, NULL, &global, &local, 0, NULL, &ev);
        if (!e && ev) { /* keep the first and the last */
            if (!r->first) r->first = ev;
            else if (r->last) cl.ReleaseEvent(r->last), r->last = ev;
            else r->last = ev;
        }
    }
    pthread_mutex_unlock(&r->c->lock);
    return e ? cl_fail(r->ctx, RJ_ERR_INTERNAL, call, e, k->name) : RJ_OK;
}

static rj_status run_check(void *ud, uint64_t off, uint64_t ref, int64_t B, int64_t rows, int64_t maxlen,
                           uint64_t err, int64_t symbol) {
    run *r = ud;
    cl_kernel kn = r->c->check;
    cl_mem mo = (cl_mem)(uintptr_t)off, mr = (cl_mem)(uintptr_t)ref, me = (cl_mem)(uintptr_t)err;
    int64_t v[4] = {B, rows, maxlen, symbol};
    pthread_mutex_lock(&r->c->lock);
    cl_int e = cl.SetKernelArg(kn, 0, sizeof mo, &mo);
    if (!e) e = cl.SetKernelArg(kn, 1, sizeof mr, ref ? (const void *)&mr : NULL); /* NULL: no `same` reference */
    for (cl_uint i = 0; !e && i < 3; i++) e = cl.SetKernelArg(kn, 2 + i, sizeof v[i], &v[i]);
    if (!e) e = cl.SetKernelArg(kn, 5, sizeof me, &me);
    if (!e) e = cl.SetKernelArg(kn, 6, sizeof v[3], &v[3]);
    size_t local = 64, global = (size_t)((B + 1 + 63) / 64 * 64);
    if (global > 65536) global = 65536; /* grid-stride beyond */
    cl_event ev = NULL;
    if (!e) e = cl.EnqueueNDRangeKernel(r->q, kn, 1, NULL, &global, &local, 0, NULL, &ev);
    if (!e && ev) { /* the run's first kernel, for the profiling span */
        if (!r->first) r->first = ev;
        else cl.ReleaseEvent(ev);
    }
    pthread_mutex_unlock(&r->c->lock);
    return e ? cl_fail(r->ctx, RJ_ERR_INTERNAL, "rj_check_offsets", e, NULL) : RJ_OK;
}

/* Returning early: the run's events go to the binding (opencl_run), rj_bind_wait finishes. */
static rj_status run_leave(void *ud) {
    (void)ud;
    return RJ_OK;
}

static rj_status run_finish(void *ud, double *kernel_ms) {
    run *r = ud;
    cl_int e = cl.Finish(r->q);
    if (e) return cl_fail(r->ctx, RJ_ERR_INTERNAL, "clFinish", e, "(a kernel failed)");
    if (cl.guard) {
        rj_status st = guard_check(r->ctx);
        if (st) return st;
    }
    double ms;
    if (span_ms(r->first, r->last ? r->last : r->first, &ms)) *kernel_ms = ms;
    return RJ_OK;
}

static const device_ops opencl_ops = {
    .what = "OpenCL run",
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
};

static void opencl_async_release(run_async *a);

static rj_status opencl_run(const run_view *v) {
    cl_code *c = v->code;
    if (!c || !c->prog) return ctx_fail(v->ctx, RJ_ERR_INTERNAL, "OpenCL run: the program is not compiled");
    run r = {.ctx = v->ctx, .c = c, .lp = v->lp, .q = v->stream ? (cl_command_queue)v->stream : c->st->q};
    run_async *a = v->async;
    if (!a->pending) opencl_async_release(a); /* else kept: the run may have to wait on them */
    rj_status s = device_run(v, &opencl_ops, &r);
    if (s) cl.Finish(r.q); /* nothing of this run is left queued when it returns */
    if (!s && a->pending) { /* returned early: rj_bind_wait waits on these */
        opencl_async_release(a);
        a->events[0] = r.first;
        a->events[1] = r.last ? r.last : r.first;
        a->queue = r.q;
        return s;
    }
    if (r.first) cl.ReleaseEvent(r.first);
    if (r.last) cl.ReleaseEvent(r.last);
    return s;
}

/* rj_bind_wait: the last kernel's event of the binding's last run, and its profiling span. */
static rj_status opencl_wait(rj_ctx *ctx, run_async *a, double *kernel_ms) {
    cl_event first = a->events[0], last = a->events[1];
    cl_int e = a->queue ? cl.Finish((cl_command_queue)a->queue) : 0;
    if (e) return cl_fail(ctx, RJ_ERR_INTERNAL, "clFinish", e, "(a kernel of the run failed)");
    double ms;
    if (span_ms(first, last, &ms)) *kernel_ms = ms;
    opencl_async_release(a);
    return RJ_OK;
}

/* ---- device memory of bindings ------------------------------------------------------------- */

static void opencl_async_release(run_async *a) {
    cl_event first = a->events[0], last = a->events[1];
    if (first) cl.ReleaseEvent(first);
    if (last && last != first) cl.ReleaseEvent(last);
    a->events[0] = a->events[1] = NULL;
    a->queue = NULL;
}

static rj_status opencl_dev_read(rj_ctx *ctx, void *stream, void *dst, uint64_t src, size_t bytes) {
    cl_state *st = NULL;
    rj_status s = state_get(ctx, &st);
    if (s) return s;
    cl_command_queue q = stream ? (cl_command_queue)stream : st->q; /* in order: after its kernels */
    cl_int e = cl.EnqueueReadBuffer(q, (cl_mem)(uintptr_t)src, CL_TRUE, 0, bytes, dst, 0, NULL, NULL);
    return e ? cl_fail(ctx, RJ_ERR_INTERNAL, "clEnqueueReadBuffer", e, "(reading device offsets)") : RJ_OK;
}

static void opencl_dev_free(rj_ctx *ctx, uint64_t addr) {
    (void)ctx;
    if (addr) cl.ReleaseMemObject((cl_mem)(uintptr_t)addr);
}

/* A cl_mem holds at least `bytes`; a host pointer cannot be told from a cl_mem handle without
 * dereferencing it, so only device bindings are checked. */
static rj_status opencl_dev_check(rj_ctx *ctx, uint64_t addr, size_t bytes, bool device, const char *what) {
    if (!device || !addr) return RJ_OK;
    size_t size = 0;
    cl_int e = cl.GetMemObjectInfo((cl_mem)(uintptr_t)addr, CL_MEM_SIZE, sizeof size, &size, NULL);
    if (e) return cl_fail(ctx, RJ_ERR_ARG, "clGetMemObjectInfo", e, what);
    if (size < bytes)
        return ctx_fail(ctx, RJ_ERR_SIZE, "%s: the cl_mem holds %zu bytes but the binding needs %zu", what, size,
                        bytes);
    return RJ_OK;
}

static rj_status opencl_handles(rj_ctx *ctx, void **context, void **queue) {
    cl_state *st = NULL;
    rj_status s = state_get(ctx, &st);
    if (s) return s;
    if (context) *context = st->cx;
    if (queue) *queue = st->q;
    return RJ_OK;
}

/* rj_device_copy_bandwidth: one copy between two fresh buffers, timed by its event. */
static rj_status opencl_copy_probe(rj_ctx *ctx, int64_t bytes, double *ms) {
    cl_state *st = NULL;
    rj_status s = state_get(ctx, &st);
    if (s) return s;
    if ((cl_ulong)bytes > cl.max_alloc)
        return ctx_fail(ctx, RJ_ERR_ARG, "rj_device_copy_bandwidth: %lld bytes exceed %s's largest buffer "
                        "(%llu bytes)", (long long)bytes, cl.name, (unsigned long long)cl.max_alloc);
    cl_int e = CL_SUCCESS;
    const char *call = "clCreateBuffer";
    cl_mem a = cl.CreateBuffer(st->cx, CL_MEM_READ_WRITE, (size_t)bytes, NULL, &e), b = NULL;
    cl_event ev = NULL;
    if (a && !e) b = cl.CreateBuffer(st->cx, CL_MEM_READ_WRITE, (size_t)bytes, NULL, &e);
    if (b && !e) {
        call = "clEnqueueCopyBuffer";
        e = cl.EnqueueCopyBuffer(st->q, a, b, 0, 0, (size_t)bytes, 0, NULL, &ev);
        if (!e) call = "clFinish", e = cl.Finish(st->q);
        if (!e && !span_ms(ev, ev, ms)) call = "clGetEventProfilingInfo", e = -59; /* CL_INVALID_OPERATION */
    }
    if (ev) cl.ReleaseEvent(ev);
    if (a) cl.ReleaseMemObject(a);
    if (b) cl.ReleaseMemObject(b);
    if (!e && (!a || !b)) e = CL_MEM_OBJECT_ALLOCATION_FAILURE;
    return e ? cl_fail(ctx, RJ_ERR_INTERNAL, call, e, "(the copy probe)") : RJ_OK;
}

const backend backend_opencl = {
    .name = "opencl",
    .target = RJ_TARGET_OPENCL,
    .available = opencl_available,
    .compile = opencl_compile,
    .code_free = opencl_code_free,
    .dump = opencl_dump,
    .run = opencl_run,
    .copy_probe = opencl_copy_probe,
    .dev_read = opencl_dev_read,
    .dev_free = opencl_dev_free,
    .dev_check = opencl_dev_check,
    .handles = opencl_handles,
    .wait = opencl_wait,
    .async_release = opencl_async_release,
};
