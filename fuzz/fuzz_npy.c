/*
 * fuzz_npy.c — the fuzzer's bytes as a .npy file.
 *
 * .npy files come from anywhere (NumPy, other tools, truncated downloads), and `ragjit run`
 * reads whatever is in its data directory, so the reader must refuse every malformed file
 * with RJ_ERR_IO and a message naming it, never read past what it allocated, and never
 * allocate what a corrupted header claims before checking it against the file's size.
 *
 * The bytes are written to a file of this process's own (in /dev/shm when there is one, so
 * the disk is never touched) and read through the public rj_npy_read, exactly as an embedder
 * would. A file that reads must survive a round trip: written back with rj_npy_write and read
 * again, it gives the same dtype, shape and bytes; written a second time, the same file, byte
 * for byte (the writer is a function of the array alone).
 *
 * A read makes few allocations, so after a successful round trip the harness replays it
 * failing each allocation in turn: every one must give RJ_ERR_NOMEM (or, for the writer's
 * callers, a clean failure) and leave nothing allocated.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"

static char path_in[256], path_a[256], path_b[256];

static void remove_files(void) {
    unlink(path_in);
    unlink(path_a);
    unlink(path_b);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    int pid = (int)getpid();
    snprintf(path_in, sizeof path_in, "%s/ragjit-fuzz-npy-%d-in.npy", dir, pid);
    snprintf(path_a, sizeof path_a, "%s/ragjit-fuzz-npy-%d-a.npy", dir, pid);
    snprintf(path_b, sizeof path_b, "%s/ragjit-fuzz-npy-%d-b.npy", dir, pid);
    atexit(remove_files);
    return 0;
}

static bool write_file(const char *path, const uint8_t *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(p, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

/* The whole file, malloc'd; NULL if it cannot be read. */
static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0, got;
    do {
        if (len == cap) {
            uint8_t *nb = realloc(buf, cap = cap ? 2 * cap : 4096);
            if (!nb) break;
            buf = nb;
        }
        got = fread(buf + len, 1, cap - len, f);
        len += got;
    } while (got);
    fclose(f);
    *n = len;
    return buf;
}

static size_t tensor_bytes(const rj_tensor_info *ti) {
    return (size_t)ti->rows * rj_dtype_size(ti->dtype);
}

/* A failed read: RJ_ERR_IO naming the file, or RJ_ERR_NOMEM under an injected failure. */
static void check_read_failure(rj_ctx *ctx, const char *path, long fail_at) {
    fz_failed(ctx, "rj_npy_read");
    rj_status s = rj_ctx_status(ctx);
    if (s != RJ_ERR_IO && !(fail_at && s == RJ_ERR_NOMEM))
        fz_die("rj_npy_read failed with %s, not RJ_ERR_IO: %s", rj_status_str(s),
               rj_ctx_error(ctx));
    if (!strstr(rj_ctx_error(ctx), path))
        fz_die("rj_npy_read's message does not name the file: %s", rj_ctx_error(ctx));
}

/* Reads path_in; on success, the round trip. Returns the allocation attempts made, and in
 * *read_ok whether the file was read. */
static long read_and_round_trip(long fail_at, bool *read_ok) {
    fz_mem m = {.tr = {.fail_at = fail_at}};
    rj_ctx *ctx = fz_ctx_new(&m);
    *read_ok = false;
    if (!ctx) return m.tr.attempts;
    fz_clear(ctx);
    rj_tensor *t = rj_npy_read(ctx, path_in), *t2 = NULL;
    if (!t) {
        check_read_failure(ctx, path_in, fail_at);
        goto done;
    }
    *read_ok = true;
    fz_touch_tensor(t);
    rj_tensor_info a, b;
    rj_tensor_get_info(t, &a);
    if (a.ragged_dim != -1) fz_die("rj_npy_read gave a jagged tensor");
    fz_clear(ctx);
    if (rj_npy_write(ctx, path_a, a.dtype, a.rank, a.shape, a.values) != RJ_OK) {
        fz_failed(ctx, "rj_npy_write");
        if (!fail_at) fz_die("writing back what was read failed: %s", rj_ctx_error(ctx));
        goto done;
    }
    fz_clear(ctx);
    if (!(t2 = rj_npy_read(ctx, path_a))) {
        check_read_failure(ctx, path_a, fail_at);
        if (!fail_at) fz_die("reading back what was written failed: %s", rj_ctx_error(ctx));
        goto done;
    }
    rj_tensor_get_info(t2, &b);
    if (a.dtype != b.dtype || a.rank != b.rank || a.rows != b.rows ||
        memcmp(a.shape, b.shape, sizeof(int64_t) * (size_t)a.rank) ||
        (tensor_bytes(&a) && memcmp(a.values, b.values, tensor_bytes(&a))))
        fz_die("the round trip changed the array (dtype %d -> %d, rank %d -> %d)", (int)a.dtype,
               (int)b.dtype, a.rank, b.rank);
    fz_clear(ctx);
    if (rj_npy_write(ctx, path_b, b.dtype, b.rank, b.shape, b.values) != RJ_OK) {
        fz_failed(ctx, "rj_npy_write");
        if (!fail_at) fz_die("writing a second time failed: %s", rj_ctx_error(ctx));
        goto done;
    }
    if (!fail_at) {
        size_t na = 0, nb = 0;
        uint8_t *fa = slurp(path_a, &na), *fb = slurp(path_b, &nb);
        if (fa && fb && (na != nb || memcmp(fa, fb, na)))
            fz_die("writing the same array twice gave different files (%zu and %zu bytes)", na, nb);
        free(fa);
        free(fb);
    }
done:
    rj_tensor_free(t);
    rj_tensor_free(t2);
    return fz_ctx_free(ctx, &m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!write_file(path_in, data, size)) fz_die("cannot write %s", path_in);
    bool read_ok;
    long attempts = read_and_round_trip(0, &read_ok);
    for (long n = 1; read_ok && n <= attempts; n++) {
        bool ok;
        read_and_round_trip(n, &ok);
    }
    return 0;
}
