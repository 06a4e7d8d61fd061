/*
 * device.c — device-resident runs: the data stays on the GPU, ragjit copies nothing.
 *
 * A model runtime keeps its tensors in device memory. This program allocates them with the
 * CUDA driver API (cuMemAlloc in the device's primary context, where the CUDA runtime and
 * PyTorch allocate too), binds them to a program compiled once, and runs batch after batch
 * with new offsets on one stream: offsets are uploaded by the caller, the kernels read and
 * write device memory in place, and nothing is recompiled. Only the checksums at the end come
 * back to the host. Where there is no CUDA device it does the same with OpenCL buffers in
 * ragjit's OpenCL context (PoCL's CPU device in CI).
 *
 * The driver is loaded with dlopen, so the example builds without CUDA or OpenCL headers:
 *   cc device.c $(pkg-config --cflags --libs ragjit) -ldl -o device && ./device
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */
#include <dlfcn.h>
#include <ragjit.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define D 64
#define MAX_ROWS 8192
#define MAX_ITEMS 128
#define BATCHES 100

/* The few device calls of a runtime: allocate, copy in, copy out, free. */
typedef struct device {
    const char *name;
    rj_target target;
    void *lib, *cx, *q;
    /* CUDA driver */
    int (*cuInit)(unsigned);
    int (*cuDeviceGet)(int *, int);
    int (*cuDevicePrimaryCtxRetain)(void **, int);
    int (*cuCtxSetCurrent)(void *);
    int (*cuMemAlloc)(uint64_t *, size_t);
    int (*cuMemFree)(uint64_t);
    int (*cuMemcpyHtoD)(uint64_t, const void *, size_t);
    int (*cuMemcpyDtoH)(void *, uint64_t, size_t);
    /* OpenCL */
    void *(*clCreateBuffer)(void *, uint64_t, size_t, void *, int32_t *);
    int32_t (*clReleaseMemObject)(void *);
    int32_t (*clEnqueueWriteBuffer)(void *, void *, uint32_t, size_t, size_t, const void *, uint32_t, const void *,
                                    void *);
    int32_t (*clEnqueueReadBuffer)(void *, void *, uint32_t, size_t, size_t, void *, uint32_t, const void *, void *);
} device;

#define SYM(lib, f) (*(void **)&dev->f = dlsym(lib, #f))

static int open_cuda(device *dev, rj_ctx *ctx) {
    if (!(dev->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL))) return 0;
    if (!SYM(dev->lib, cuInit) || !SYM(dev->lib, cuDeviceGet) || !SYM(dev->lib, cuDevicePrimaryCtxRetain) ||
        !SYM(dev->lib, cuCtxSetCurrent) || !(*(void **)&dev->cuMemAlloc = dlsym(dev->lib, "cuMemAlloc_v2")) ||
        !(*(void **)&dev->cuMemFree = dlsym(dev->lib, "cuMemFree_v2")) ||
        !(*(void **)&dev->cuMemcpyHtoD = dlsym(dev->lib, "cuMemcpyHtoD_v2")) ||
        !(*(void **)&dev->cuMemcpyDtoH = dlsym(dev->lib, "cuMemcpyDtoH_v2")))
        return 0;
    int d;
    if (dev->cuInit(0) || dev->cuDeviceGet(&d, 0) || dev->cuDevicePrimaryCtxRetain(&dev->cx, d) ||
        dev->cuCtxSetCurrent(dev->cx))
        return 0;
    dev->name = "CUDA";
    dev->target = RJ_TARGET_CUDA;
    (void)ctx;
    return 1;
}

static int open_opencl(device *dev, rj_ctx *ctx) {
    if (rj_device_handles(ctx, RJ_TARGET_OPENCL, &dev->cx, &dev->q) != RJ_OK) return 0;
    if (!(dev->lib = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL))) return 0;
    if (!SYM(dev->lib, clCreateBuffer) || !SYM(dev->lib, clReleaseMemObject) ||
        !SYM(dev->lib, clEnqueueWriteBuffer) || !SYM(dev->lib, clEnqueueReadBuffer))
        return 0;
    dev->name = "OpenCL";
    dev->target = RJ_TARGET_OPENCL;
    return 1;
}

static rj_devptr dev_alloc(device *dev, size_t bytes) {
    if (dev->target == RJ_TARGET_CUDA) {
        uint64_t p = 0;
        return dev->cuMemAlloc(&p, bytes) ? 0 : p;
    }
    int32_t e = 0;
    void *m = dev->clCreateBuffer(dev->cx, 1 /* CL_MEM_READ_WRITE */, bytes, NULL, &e);
    return e ? 0 : (rj_devptr)(uintptr_t)m;
}

static int dev_put(device *dev, rj_devptr d, const void *src, size_t bytes) {
    if (dev->target == RJ_TARGET_CUDA) return dev->cuMemcpyHtoD(d, src, bytes) == 0;
    return dev->clEnqueueWriteBuffer(dev->q, (void *)(uintptr_t)d, 1, 0, bytes, src, 0, NULL, NULL) == 0;
}

static int dev_get(device *dev, void *dst, rj_devptr d, size_t bytes) {
    if (dev->target == RJ_TARGET_CUDA) return dev->cuMemcpyDtoH(dst, d, bytes) == 0;
    return dev->clEnqueueReadBuffer(dev->q, (void *)(uintptr_t)d, 1, 0, bytes, dst, 0, NULL, NULL) == 0;
}

static void dev_free(device *dev, rj_devptr d) {
    if (dev->target == RJ_TARGET_CUDA) dev->cuMemFree(d);
    else dev->clReleaseMemObject((void *)(uintptr_t)d);
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static int fail(rj_ctx *ctx, const char *what) {
    fprintf(stderr, "device: %s: %s\n", what, rj_ctx_error(ctx));
    return 1;
}

int main(void) {
    rj_ctx *ctx = rj_ctx_new(NULL, NULL);
    device dev = {0};
    if (!open_cuda(&dev, ctx)) {
        if (dev.lib) dlclose(dev.lib);
        memset(&dev, 0, sizeof dev);
        if (!open_opencl(&dev, ctx)) {
            printf("device: no CUDA device and no OpenCL device: nothing to show (%s)\n", rj_ctx_error(ctx));
            rj_ctx_free(ctx);
            return 0;
        }
    }
    /* attention-style pooling: softmax over each sequence, weighted sum of its rows */
    rj_graph *g = rj_graph_parse(ctx,
                                 "ragged tokens : B\n"
                                 "input h : f32[B, tokens, 64]\n"
                                 "input q : f32[64]\n"
                                 "a = softmax(h * q, dim=1)\n"
                                 "pooled = sum(a * h, dim=1)\n"
                                 "output pooled\n",
                                 "pool.rj");
    if (!g) return fail(ctx, "parse");
    double t0 = now_ms();
    rj_program *p = rj_program_new(g, dev.target);
    if (!p) return fail(ctx, "compile");
    printf("device: %s; compiled in %.1f ms\n", dev.name, now_ms() - t0);
    rj_node h = rj_graph_find(g, "h"), q = rj_graph_find(g, "q"), pooled = rj_graph_find(g, "pooled");
    rj_dim tokens = rj_graph_find_dim(g, "tokens");

    /* the runtime's device buffers, sized for the largest batch, allocated once */
    rj_devptr dh = dev_alloc(&dev, sizeof(float) * MAX_ROWS * D), dq = dev_alloc(&dev, sizeof(float) * D);
    rj_devptr doff = dev_alloc(&dev, sizeof(int64_t) * (MAX_ITEMS + 1));
    rj_devptr dout = dev_alloc(&dev, sizeof(float) * MAX_ITEMS * D);
    if (!dh || !dq || !doff || !dout) return fail(ctx, "device allocation");
    float *hv = malloc(sizeof(float) * MAX_ROWS * D), qv[D];
    for (int i = 0; i < MAX_ROWS * D; i++) hv[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    for (int i = 0; i < D; i++) qv[i] = 0.25f + (float)i / D;
    if (!dev_put(&dev, dh, hv, sizeof(float) * MAX_ROWS * D) || !dev_put(&dev, dq, qv, sizeof qv))
        return fail(ctx, "upload");

    rj_bind *b = rj_bind_new(p);
    if (rj_bind_input_device(b, q, dq, D) || rj_bind_output_device(b, pooled, dout, MAX_ITEMS * D))
        return fail(ctx, "bind");
    int64_t off[MAX_ITEMS + 1];
    uint64_t seed = 1;
    double run_ms = 0, kernel_ms = 0, checksum = 0;
    for (int batch = 0; batch < BATCHES; batch++) {
        /* a new batch: its sizes and its offsets (a runtime would compute these on the device) */
        int64_t B = 1 + (int64_t)(batch * 7 % MAX_ITEMS), rows = 0, maxlen = 0;
        off[0] = 0;
        for (int64_t i = 0; i < B; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            int64_t len = (int64_t)(seed >> 33) % (MAX_ROWS / MAX_ITEMS + 1);
            off[i + 1] = off[i] + len;
            if (len > maxlen) maxlen = len;
        }
        rows = off[B];
        if (!dev_put(&dev, doff, off, sizeof(int64_t) * (size_t)(B + 1))) return fail(ctx, "offsets upload");
        /* the facts the host needs come with the offsets: nothing is read back */
        if (rj_bind_offsets_device(b, tokens, B, doff, 0) || rj_bind_offsets_info(b, tokens, rows, maxlen) ||
            rj_bind_trust_offsets(b, true) || rj_bind_input_device(b, h, dh, rows * D))
            return fail(ctx, "bind batch");
        double r0 = now_ms();
        if (rj_program_run(p, b) || rj_bind_wait(b)) return fail(ctx, "run");
        run_ms += now_ms() - r0;
        rj_run_stats st;
        rj_bind_stats(b, &st);
        kernel_ms += st.kernel_ms;
        if (batch == BATCHES - 1) { /* only now does anything come back to the host */
            float out[MAX_ITEMS * D];
            if (!dev_get(&dev, out, dout, sizeof(float) * (size_t)(B * D))) return fail(ctx, "download");
            for (int64_t i = 0; i < B * D; i++) checksum += out[i];
            /* the same batch on the CPU, from host memory, for comparison */
            rj_program *pc = rj_program_new(g, RJ_TARGET_CPU);
            rj_bind *bc = pc ? rj_bind_new(pc) : NULL;
            if (!bc || rj_bind_offsets(bc, tokens, B, off, NULL) || rj_bind_input(bc, h, hv, rows * D) ||
                rj_bind_input(bc, q, qv, D) || rj_program_run(pc, bc))
                return fail(ctx, "CPU run");
            const float *want = NULL;
            rj_tensor_info ti;
            if (rj_tensor_get_info(rj_bind_result(bc, pooled), &ti) == RJ_OK) want = ti.values;
            double err = 0;
            for (int64_t i = 0; want && i < B * D; i++) {
                double e = out[i] > want[i] ? out[i] - want[i] : want[i] - out[i];
                if (e > err) err = e;
            }
            printf("device: last batch B=%lld, %lld rows; checksum %.6f; max |device - CPU| = %.3g\n", (long long)B,
                   (long long)rows, checksum, err);
            rj_bind_free(bc);
            rj_program_free(pc);
            if (!want || err > 1e-4) return fail(ctx, "the device and the CPU disagree");
        }
    }
    printf("device: %d batches, one program, no recompilation, no host copy of the data: "
           "%.3f ms per run (kernels %.3f ms)\n", BATCHES, run_ms / BATCHES, kernel_ms / BATCHES);
    rj_bind_free(b);
    dev_free(&dev, dh), dev_free(&dev, dq), dev_free(&dev, doff), dev_free(&dev, dout);
    free(hv);
    rj_program_free(p);
    rj_graph_free(g);
    rj_ctx_free(ctx);
    dlclose(dev.lib);
    return 0;
}
