/*
 * test_npy.c — NumPy .npy reading and writing: round trips of every dtype and rank, files
 * written by hand in every format version and header spelling, the exact bytes np.save
 * writes, every error with its status and message, and robustness against corrupted or
 * truncated files and failing allocations; then the same through the public rj_npy_ calls.
 *
 * Files live in a private mkdtemp directory that the group teardown removes.
 */
#include "harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../src/runtime/npy.h"

static char tmpdir[64];

static int group_setup(void **state) {
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ragjit-npy-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int group_teardown(void **state) {
    (void)state;
    DIR *d = opendir(tmpdir);
    if (!d) return -1;
    struct dirent *e;
    char p[512];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
            unlink(p);
        }
    closedir(d);
    return rmdir(tmpdir);
}

/* Path of a file in the temporary directory (one static buffer per name slot). */
static const char *tpath(const char *name) {
    static char buf[4][512];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, sizeof buf[0], "%s/%s", tmpdir, name);
    return p;
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* The whole file, malloc'd. */
static unsigned char *read_bytes(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    unsigned char *buf = malloc(1 << 16);
    *n = fread(buf, 1, 1 << 16, f);
    fclose(f);
    return buf;
}

/* A .npy file whose header text is exactly `header` (no padding added): the length field is
 * u16 for major 1 and u32 otherwise, as the format says. */
static void write_npy_raw(const char *path, int major, int minor, const char *header,
                          const void *data, size_t n) {
    size_t hl = strlen(header), lsize = major == 1 ? 2 : 4;
    unsigned char *buf = malloc(12 + hl + n + 1);
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (unsigned char)major;
    buf[7] = (unsigned char)minor;
    for (size_t i = 0; i < lsize; i++) buf[8 + i] = (unsigned char)(hl >> (8 * i));
    memcpy(buf + 8 + lsize, header, hl);
    if (n) memcpy(buf + 8 + lsize + hl, data, n);
    write_bytes(path, buf, 8 + lsize + hl + n);
    free(buf);
}

static void assert_zeroed(const npy_array *a) {
    static const npy_array zero;
    assert_memory_equal(a, &zero, sizeof zero);
}

/* npy_read of path must fail with status want and a message that starts with the path and
 * contains needle, leaving *out zeroed. */
static void expect_read_fail(rj_ctx *ctx, const char *path, rj_status want, const char *needle) {
    npy_array a;
    memset(&a, 0x5a, sizeof a);
    rj_status st = npy_read(ctx, path, &a);
    if (st != want)
        fail_msg("%s: status %s, expected %s (%s)", path, rj_status_str(st), rj_status_str(want),
                 rj_ctx_error(ctx));
    assert_zeroed(&a);
    assert_error_contains(ctx, needle);
    assert_memory_equal(rj_ctx_error(ctx), path, strlen(path));
}

/* A v1.0 file with this header (padded like NumPy) and data that must be rejected. */
static void expect_header_fail(rj_ctx *ctx, const char *header, const void *data, size_t n,
                               const char *needle) {
    char padded[512];
    snprintf(padded, sizeof padded, "%-117s\n", header);
    const char *p = tpath("bad.npy");
    write_npy_raw(p, 1, 0, padded, data, n);
    expect_read_fail(ctx, p, RJ_ERR_IO, needle);
}

static int64_t numel_of(int rank, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= shape[i];
    return n;
}

/* ---- round trips ----------------------------------------------------------------------- */

/* The public calls on a case npy_write just wrote to p: rj_npy_write writes the same bytes,
 * and rj_npy_read hands the data back as a dense tensor (element count in rows). */
static void public_round_trip(fixture *f, const char *p, rj_dtype t, int rank,
                              const int64_t *shape, const void *data) {
    const char *q = tpath("pub.npy");
    assert_ok(f->ctx, rj_npy_write(f->ctx, q, t, rank, shape, data));
    size_t np_, nq;
    unsigned char *bp = read_bytes(p, &np_), *bq = read_bytes(q, &nq);
    assert_int_equal(np_, nq);
    assert_memory_equal(bp, bq, nq);
    free(bp);
    free(bq);
    rj_tensor *tt = rj_npy_read(f->ctx, q);
    if (!tt) fail_msg("%s", rj_ctx_error(f->ctx));
    rj_tensor_info in;
    assert_ok(f->ctx, rj_tensor_get_info(tt, &in));
    assert_int_equal(in.dtype, t);
    assert_int_equal(in.rank, rank);
    assert_int_equal(in.ragged_dim, -1);
    assert_int_equal(in.rows, numel_of(rank, shape));
    for (int i = 0; i < rank; i++) assert_int_equal(in.shape[i], shape[i]);
    assert_non_null(in.values);
    assert_int_equal((uintptr_t)in.values % 64, 0); /* ragjit.h: values it allocates are aligned */
    if (in.rows) assert_memory_equal(in.values, data, (size_t)in.rows * rj_dtype_size(t));
    rj_tensor_free(tt);
}

/* Every dtype and rank, empty arrays included, through the internal and the public calls. */
static void test_round_trip(void **state) {
    fixture *f = *state;
    static const struct {
        int rank;
        int64_t shape[4];
    } shapes[] = {{0, {0}},       {1, {5}},       {1, {0}},          {2, {3, 4}},
                  {2, {0, 3}},    {2, {3, 0}},    {4, {2, 3, 1, 2}}, {4, {2, 1, 0, 3}}};
    uint64_t seed = 42;
    for (int t = 0; t < RJ_DTYPE_COUNT; t++)
        for (size_t s = 0; s < RJ_ARRAY_LEN(shapes); s++) {
            int rank = shapes[s].rank;
            const int64_t *shape = shapes[s].shape;
            int64_t n = numel_of(rank, shape);
            size_t bytes = (size_t)n * rj_dtype_size((rj_dtype)t);
            void *data = random_values((rj_dtype)t, n, &seed);
            const char *p = tpath("rt.npy");
            assert_ok(f->ctx, npy_write(f->ctx, p, (rj_dtype)t, rank, shape, data));
            size_t fsize;
            free(read_bytes(p, &fsize));
            assert_int_equal(fsize, 128 + bytes); /* all these headers fit one 128-byte block */
            npy_array a;
            assert_ok(f->ctx, npy_read(f->ctx, p, &a));
            assert_int_equal(a.dtype, t);
            assert_int_equal(a.rank, rank);
            for (int i = 0; i < rank; i++) assert_int_equal(a.shape[i], shape[i]);
            assert_int_equal(a.bytes, bytes);
            assert_non_null(a.data);
            if (bytes) assert_memory_equal(a.data, data, bytes);
            npy_free(f->ctx, &a);
            assert_zeroed(&a);
            public_round_trip(f, p, (rj_dtype)t, rank, shape, data);
            free(data);
        }
}

static void test_bool_normalised(void **state) {
    fixture *f = *state;
    static const unsigned char v[] = {0, 1, 2, 255, 0x80};
    const char *p = tpath("bool.npy");
    assert_ok(f->ctx, npy_write(f->ctx, p, RJ_BOOL, 1, (int64_t[]){5}, v));
    size_t n;
    unsigned char *file = read_bytes(p, &n);
    assert_int_equal(n, 128 + 5);
    assert_memory_equal(file + 10, "{'descr': '|b1',", 16);
    assert_memory_equal(file + 128, "\0\1\1\1\1", 5);
    free(file);
    /* a hand-made '|b1' file with nonzero bytes other than 1 reads as 0/1 */
    write_npy_raw(p, 1, 0, "{'descr': '|b1', 'fortran_order': False, 'shape': (4,), }\n",
                  "\0\7\1\xff", 4);
    npy_array a;
    assert_ok(f->ctx, npy_read(f->ctx, p, &a));
    assert_int_equal(a.dtype, RJ_BOOL);
    assert_memory_equal(a.data, "\0\1\1\1", 4);
    npy_free(f->ctx, &a);
}

/* f16 is NumPy's '<f2'; bf16 is written as ml_dtypes.bfloat16 arrays are saved ('<V2': NumPy
 * has no bf16, so the items are 2-byte voids), and read from '<V2' or from '|V2' (what
 * np.save writes for the .view('V2') of bf16 bits and np.load gives back). */
static void test_half_descr(void **state) {
    fixture *f = *state;
    static const uint16_t v[] = {0x3c00, 0x8001, 0x7c00, 0x7e00}; /* 1, -2^-24, inf, NaN in f16 */
    static const char *const dicts[] = {"{'descr': '<f2',", "{'descr': '<V2',"};
    const char *p = tpath("half.npy");
    for (int k = 0; k < 2; k++) {
        rj_dtype t = k ? RJ_BF16 : RJ_F16;
        assert_ok(f->ctx, npy_write(f->ctx, p, t, 1, (int64_t[]){4}, v));
        size_t n;
        unsigned char *file = read_bytes(p, &n);
        assert_int_equal(n, 128 + 8);
        assert_memory_equal(file + 10, dicts[k], strlen(dicts[k]));
        assert_memory_equal(file + 128, v, 8);
        free(file);
    }
    write_npy_raw(p, 1, 0, "{'descr': '|V2', 'fortran_order': False, 'shape': (2,), }\n", "\x80\x3f\xc0\x7f", 4);
    npy_array a;
    assert_ok(f->ctx, npy_read(f->ctx, p, &a));
    assert_int_equal(a.dtype, RJ_BF16);
    assert_true(rj_value_get(RJ_BF16, a.data, 0) == 1.0);
    assert_true(isnan(rj_value_get(RJ_BF16, a.data, 1)));
    npy_free(f->ctx, &a);
    /* other 2-byte voids or unsigned ints are not 16-bit floats */
    write_npy_raw(p, 1, 0, "{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }\n", "\0\0\0\0", 4);
    assert_int_not_equal(npy_read(f->ctx, p, &a), RJ_OK);
}

/* ---- the bytes np.save writes ---------------------------------------------------------- */

/* The header block must be magic, version 1.0, the length, the dict, spaces, '\n', with the
 * total taken from NumPy 2.4 writing the same array. */
static void check_header_block(const unsigned char *file, const char *dict, size_t total) {
    size_t dl = strlen(dict);
    assert_memory_equal(file, "\x93NUMPY\x01\x00", 8);
    assert_int_equal(file[8] | file[9] << 8, total - 10);
    assert_memory_equal(file + 10, dict, dl);
    for (size_t i = 10 + dl; i < total - 1; i++)
        if (file[i] != ' ') fail_msg("byte %zu of the header is 0x%02x, not a space", i, file[i]);
    assert_int_equal(file[total - 1], '\n');
}

static void test_header_bytes_match_numpy(void **state) {
    fixture *f = *state;
    static const float v[6] = {0, 1, 2, 3, 4, 5};
    const char *p = tpath("hdr.npy");
    assert_ok(f->ctx, npy_write(f->ctx, p, RJ_F32, 2, (int64_t[]){2, 3}, v));
    size_t n;
    unsigned char *file = read_bytes(p, &n);
    static const char want[] = "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, "
                               "'shape': (2, 3), }";
    assert_int_equal(n, 128 + sizeof v);
    assert_memory_equal(file, want, sizeof want - 1);
    for (size_t i = sizeof want - 1; i < 127; i++) assert_int_equal(file[i], ' ');
    assert_int_equal(file[127], '\n');
    assert_memory_equal(file + 128, v, sizeof v);
    free(file);

    /* more shapes, with header sizes from np.save; the last one only needs a second 64-byte
     * block because of the 20 spare spaces NumPy leaves after the dict for shape[0] to grow */
    static const struct {
        rj_dtype t;
        int rank;
        int64_t shape[8];
        const char *dict;
        size_t total;
    } cases[] = {
        {RJ_I64, 0, {0}, "{'descr': '<i8', 'fortran_order': False, 'shape': (), }", 128},
        {RJ_BOOL, 1, {5}, "{'descr': '|b1', 'fortran_order': False, 'shape': (5,), }", 128},
        {RJ_F64, 4, {1, 2, 3, 4},
         "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 2, 3, 4), }", 128},
        {RJ_I32, 1, {0}, "{'descr': '<i4', 'fortran_order': False, 'shape': (0,), }", 128},
        {RJ_F32, 2, {1234567, 0},
         "{'descr': '<f4', 'fortran_order': False, 'shape': (1234567, 0), }", 128},
        /* the longest header an array NumPy can make has (rank 8, every dim as wide as the
         * element count allows) */
        {RJ_F32, 8, {1, 0, 1000, 1000, 1000, 1000, 1000, 1000},
         "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 0, 1000, 1000, 1000, 1000, "
         "1000, 1000), }", 128},
    };
    static const char zeros[8 * 24];
    for (size_t i = 0; i < RJ_ARRAY_LEN(cases); i++) {
        assert_ok(f->ctx, npy_write(f->ctx, p, cases[i].t, cases[i].rank, cases[i].shape, zeros));
        file = read_bytes(p, &n);
        check_header_block(file, cases[i].dict, cases[i].total);
        size_t data = (size_t)numel_of(cases[i].rank, cases[i].shape) * rj_dtype_size(cases[i].t);
        assert_int_equal(n, cases[i].total + data);
        free(file);
        npy_array a;
        assert_ok(f->ctx, npy_read(f->ctx, p, &a));
        assert_int_equal(a.rank, cases[i].rank);
        npy_free(f->ctx, &a);
    }
}

/* ---- hand-made files ------------------------------------------------------------------- */

static void test_read_v1_handmade(void **state) {
    fixture *f = *state;
    static const int32_t v[6] = {1, -2, 3, -4, 5, 2147483647};
    const char *p = tpath("v1.npy");
    write_npy_raw(p, 1, 0,
                  "  {\"shape\" : ( 2 ,  3 ) ,\t\"descr\":\"<i4\" ,\n \"fortran_order\" :False}"
                  "      \n",
                  v, sizeof v);
    npy_array a;
    assert_ok(f->ctx, npy_read(f->ctx, p, &a));
    assert_int_equal(a.dtype, RJ_I32);
    assert_int_equal(a.rank, 2);
    assert_int_equal(a.shape[0], 2);
    assert_int_equal(a.shape[1], 3);
    assert_int_equal(a.bytes, sizeof v);
    assert_memory_equal(a.data, v, sizeof v);
    npy_free(f->ctx, &a);
}

static void test_read_v2_handmade(void **state) {
    fixture *f = *state;
    static const double v[4] = {0.5, -1.25, 1e300, -0.0};
    const char *p = tpath("v2.npy");
    write_npy_raw(p, 2, 0, "{ 'fortran_order' : False , 'shape':(4,),'descr':'<f8' }\n", v,
                  sizeof v);
    npy_array a;
    assert_ok(f->ctx, npy_read(f->ctx, p, &a));
    assert_int_equal(a.dtype, RJ_F64);
    assert_int_equal(a.rank, 1);
    assert_int_equal(a.shape[0], 4);
    assert_memory_equal(a.data, v, sizeof v);
    npy_free(f->ctx, &a);
}

static void test_read_v3_handmade(void **state) {
    fixture *f = *state;
    static const int64_t v[1] = {-9000000000000000000};
    const char *p = tpath("v3.npy");
    /* UTF-8 in a key we do not know, nested values, '=' byte order, a rank-0 shape */
    write_npy_raw(p, 3, 0,
                  "{'descr': '=i8', 'note': 'h\xc3\xa9llo \xe2\x9c\x93', 'meta': {'a': [1, 2.5, "
                  "(3,), -4], \"b\": None, 'c': 'x\\'y'}, 'shape': (), 'fortran_order': False,}"
                  "\n",
                  v, sizeof v);
    npy_array a;
    assert_ok(f->ctx, npy_read(f->ctx, p, &a));
    assert_int_equal(a.dtype, RJ_I64);
    assert_int_equal(a.rank, 0);
    assert_int_equal(a.bytes, 8);
    assert_memory_equal(a.data, v, sizeof v);
    npy_free(f->ctx, &a);
}

static void test_read_variants(void **state) {
    fixture *f = *state;
    const char *p = tpath("var.npy");
    npy_array a;
    /* Python 2's long suffix, as NumPy still accepts for 1.x files; no trailing newline */
    static const float fv[6] = {1, 2, 3, 4, 5, 6};
    write_npy_raw(p, 1, 0, "{'descr': '=f4', 'fortran_order': False, 'shape': (3L, 2L), }", fv,
                  sizeof fv);
    assert_ok(f->ctx, npy_read(f->ctx, p, &a));
    assert_int_equal(a.dtype, RJ_F32);
    assert_int_equal(a.shape[0], 3);
    assert_int_equal(a.shape[1], 2);
    npy_free(f->ctx, &a);
    /* '|u1' holding only 0 and 1 is a bool */
    write_npy_raw(p, 1, 0, "{'descr': '|u1', 'fortran_order': False, 'shape': (2, 2), }\n",
                  "\1\0\0\1", 4);
    assert_ok(f->ctx, npy_read(f->ctx, p, &a));
    assert_int_equal(a.dtype, RJ_BOOL);
    assert_memory_equal(a.data, "\1\0\0\1", 4);
    npy_free(f->ctx, &a);
    /* an empty array is empty whatever its other (fitting) dims are */
    write_npy_raw(p, 1, 0,
                  "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 4294967296, "
                  "1048576), }\n",
                  NULL, 0);
    assert_ok(f->ctx, npy_read(f->ctx, p, &a));
    assert_int_equal(a.rank, 3);
    assert_int_equal(a.bytes, 0);
    assert_non_null(a.data);
    npy_free(f->ctx, &a);
    /* rank 8 is the maximum and fine */
    write_npy_raw(p, 1, 0,
                  "{'descr': '<i4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 2), "
                  "}\n",
                  "\1\0\0\0\2\0\0\0", 8);
    assert_ok(f->ctx, npy_read(f->ctx, p, &a));
    assert_int_equal(a.rank, 8);
    assert_int_equal(a.shape[7], 2);
    npy_free(f->ctx, &a);
}

/* ---- errors ---------------------------------------------------------------------------- */

static void test_error_open(void **state) {
    fixture *f = *state;
    expect_read_fail(f->ctx, tpath("missing.npy"), RJ_ERR_IO,
                     "missing.npy: cannot open: No such file or directory");
    expect_read_fail(f->ctx, tmpdir, RJ_ERR_IO, ": cannot read: Is a directory");
}

/* Only regular files are read or written, and neither opening nor reading waits: a FIFO
 * (which blocked open forever), a device (/dev/zero never ends) or a directory is refused at
 * once with a message naming it. */
static void test_error_not_regular(void **state) {
    fixture *f = *state;
    static const float v[2] = {1, 2};
    const char *fifo = tpath("fifo.npy");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    expect_read_fail(f->ctx, fifo, RJ_ERR_IO, "fifo.npy: cannot read: not a regular file");
    assert_int_equal(npy_write(f->ctx, fifo, RJ_F32, 1, (int64_t[]){2}, v), RJ_ERR_IO);
    assert_error_contains(f->ctx, "fifo.npy: cannot write: not a regular file");
    /* with a reader at the other end the open succeeds; the check still refuses it */
    int rd = open(fifo, O_RDONLY | O_NONBLOCK);
    assert_true(rd >= 0);
    assert_int_equal(npy_write(f->ctx, fifo, RJ_F32, 1, (int64_t[]){2}, v), RJ_ERR_IO);
    assert_error_contains(f->ctx, "fifo.npy: cannot write: not a regular file");
    close(rd);
    unlink(fifo);
    expect_read_fail(f->ctx, "/dev/zero", RJ_ERR_IO, "/dev/zero: cannot read: not a regular file");
    assert_int_equal(npy_write(f->ctx, "/dev/null", RJ_F32, 1, (int64_t[]){2}, v), RJ_ERR_IO);
    assert_error_contains(f->ctx, "/dev/null: cannot write: not a regular file");
    /* through a link, what counts is the file opened */
    const char *link = tpath("link.npy");
    assert_int_equal(symlink("/dev/zero", link), 0);
    expect_read_fail(f->ctx, link, RJ_ERR_IO, "link.npy: cannot read: not a regular file");
    unlink(link);
}

static void test_error_preamble(void **state) {
    fixture *f = *state;
    const char *p = tpath("pre.npy");
    write_bytes(p, "hello, world", 12);
    expect_read_fail(f->ctx, p, RJ_ERR_IO, "pre.npy: not a .npy file (bad magic)");
    write_bytes(p, "", 0);
    expect_read_fail(f->ctx, p, RJ_ERR_IO, "not a .npy file (bad magic)");
    write_bytes(p, "\x93NUM", 4);
    expect_read_fail(f->ctx, p, RJ_ERR_IO, "not a .npy file (bad magic)");
    static const char hdr[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (), }\n";
    write_npy_raw(p, 4, 0, hdr, "\0\0\0\0", 4);
    expect_read_fail(f->ctx, p, RJ_ERR_IO,
                     "unsupported .npy format version 4.0 (supported: 1.0, 2.0, 3.0)");
    write_npy_raw(p, 1, 1, hdr, "\0\0\0\0", 4);
    expect_read_fail(f->ctx, p, RJ_ERR_IO, "unsupported .npy format version 1.1");
    write_npy_raw(p, 0, 0, hdr, "\0\0\0\0", 4);
    expect_read_fail(f->ctx, p, RJ_ERR_IO, "unsupported .npy format version 0.0");
    /* the length field itself is cut off */
    write_bytes(p, "\x93NUMPY\x02\x00\x10\x00", 10);
    expect_read_fail(f->ctx, p, RJ_ERR_IO, "truncated: the file ends inside the header length");
    /* header length beyond the file, and beyond the 1 MiB cap */
    write_bytes(p, "\x93NUMPY\x01\x00\xc8\x00{'descr'", 18);
    expect_read_fail(f->ctx, p, RJ_ERR_IO,
                     "header length 200 is beyond the end of the file (18 bytes)");
    write_bytes(p, "\x93NUMPY\x02\x00\x00\x00\x20\x00{}", 14);
    expect_read_fail(f->ctx, p, RJ_ERR_IO, "header length 2097152 is more than the 1 MiB limit");
    write_bytes(p, "\x93NUMPY\x03\x00\xff\xff\xff\xff{}", 14);
    expect_read_fail(f->ctx, p, RJ_ERR_IO, "header length 4294967295 is more than the 1 MiB");
}

static void test_error_header_syntax(void **state) {
    fixture *f = *state;
    rj_ctx *c = f->ctx;
    expect_header_fail(c, "[1, 2]", NULL, 0, "bad header: header is not a dict (expected '{')");
    expect_header_fail(c, "", NULL, 0, "header is not a dict");
    expect_header_fail(c, "'descr': '<f4'", NULL, 0, "header is not a dict");
    const char *p = tpath("empty-header.npy");
    write_npy_raw(p, 1, 0, "", NULL, 0);
    expect_read_fail(c, p, RJ_ERR_IO, "header is not a dict");
    expect_header_fail(c, "{'descr': '<f4, 'fortran_order': False, 'shape': (), }", NULL, 0,
                       "expected ',' or '}' after a value");
    expect_header_fail(c, "{'descr': '<f4', 'fortran_order': False, 'shape': (), } x", NULL, 0,
                       "unexpected text after the dict");
    expect_header_fail(c, "{'descr' '<f4', 'fortran_order': False, 'shape': ()}", NULL, 0,
                       "expected ':' after a key (at byte 9 of the header)");
    expect_header_fail(c, "{'descr': '<f4' 'fortran_order': False, 'shape': ()}", NULL, 0,
                       "expected ',' or '}' after a value");
    expect_header_fail(c, "{'descr': '<f4', , 'shape': ()}", NULL, 0,
                       "expected a quoted key or '}'");
    expect_header_fail(c, "{'descr': '<f4', 'fortran_order': False, 'shape': ()", NULL, 0,
                       "expected ',' or '}' after a value");
    expect_header_fail(c, "{'descr': '<f4', 'fortran_order': False, 'shape': (), 'x': [[[[[[[["
                          "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]"
                          "]]]]]]]]]]]]]]]]]]]]]]]}",
                       NULL, 0, "values nested too deeply");
    expect_header_fail(c, "{'descr': '<f4', 'fortran_order': False, 'shape': (), 'x': ?}", NULL,
                       0, "unexpected character");
    expect_header_fail(c, "{'descr': '<f4', 'fortran_order': False, 'shape': (), 'descr': '<f4'}",
                       NULL, 0, "duplicate key 'descr'");
    p = tpath("nul.npy");
    /* NUL padding is not Python: the header length covers it, so it is text after the dict */
    static const char nulhdr[] = "\x93NUMPY\x01\x00\x3f\x00{'descr': '<f4', 'fortran_order': "
                                 "False, 'shape': (), }\0\0\0\0\0\0\0\0\0\0\0\0";
    write_bytes(p, nulhdr, sizeof nulhdr - 1);
    expect_read_fail(c, p, RJ_ERR_IO, "unexpected text after the dict");
}

static void test_error_missing_keys(void **state) {
    fixture *f = *state;
    expect_header_fail(f->ctx, "{'fortran_order': False, 'shape': (), }", NULL, 0,
                       "bad header: missing key 'descr'");
    expect_header_fail(f->ctx, "{'descr': '<f4', 'fortran_order': False, }", NULL, 0,
                       "bad header: missing key 'shape'");
    expect_header_fail(f->ctx, "{'descr': '<f4', 'shape': (), }", NULL, 0,
                       "bad header: missing key 'fortran_order'");
    expect_header_fail(f->ctx, "{}", NULL, 0, "missing key 'descr'");
}

static void test_error_dtype(void **state) {
    fixture *f = *state;
    const char *p = tpath("dt.npy");
    write_npy_raw(p, 1, 0, "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }\n",
                  "\0\0\0\0", 4);
    expect_read_fail(f->ctx, p, RJ_ERR_IO,
                     "dt.npy: unsupported dtype '>f4' (supported: <f4 <f8 <f2 <i4 <i8 |b1, and <V2 for bf16)");
    expect_header_fail(f->ctx, "{'descr': '>f2', 'fortran_order': False, 'shape': (1,), }",
                       "\0\0", 2, "unsupported dtype '>f2'");
    expect_header_fail(f->ctx, "{'descr': '<V4', 'fortran_order': False, 'shape': (1,), }",
                       "\0\0\0\0", 4, "unsupported dtype '<V4'");
    expect_header_fail(f->ctx, "{'descr': '|i1', 'fortran_order': False, 'shape': (1,), }", "\0",
                       1, "unsupported dtype '|i1'");
    expect_header_fail(f->ctx, "{'descr': '<U3\x01', 'fortran_order': False, 'shape': (1,), }",
                       "\0", 1, "unsupported dtype '<U3?'");
    expect_header_fail(f->ctx,
                       "{'descr': [('a', '<f4'), ('b', '<i4')], 'fortran_order': False, "
                       "'shape': (1,), }",
                       "\0\0\0\0\0\0\0\0", 8, "structured dtypes are not supported");
}

static void test_error_fortran(void **state) {
    fixture *f = *state;
    expect_header_fail(f->ctx, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
                       "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 16,
                       "Fortran-order arrays are not supported (fortran_order is True)");
    expect_header_fail(f->ctx, "{'descr': '<f4', 'fortran_order': 0, 'shape': (), }", "\0\0\0\0",
                       4, "'fortran_order' is not True or False");
    expect_header_fail(f->ctx, "{'descr': '<f4', 'fortran_order': Falsey, 'shape': (), }",
                       "\0\0\0\0", 4, "'fortran_order' is not True or False");
}

static void test_error_shape_text(void **state) {
    fixture *f = *state;
    rj_ctx *c = f->ctx;
    static const struct {
        const char *shape, *needle;
    } cases[] = {
        {"'abc'", "'shape' is not a tuple"},
        {"[2, 3]", "'shape' is not a tuple"},
        {"5", "'shape' is not a tuple"},
        {"(5)", "'shape' is not a tuple (a 1-tuple needs a trailing comma)"},
        {"(2.5,)", "dim 0 of 'shape' is not an integer"},
        {"(2, 3e2)", "dim 1 of 'shape' is not an integer"},
        {"(2, 0x10)", "dim 1 of 'shape' is not an integer"},
        {"(2 3)", "expected ',' or ')' in 'shape'"},
        {"(,)", "'shape' must be a tuple of integers"},
        {"(2,,3)", "'shape' must be a tuple of integers"},
        {"(2, None)", "'shape' must be a tuple of integers"},
        {"(2, 3 ]", "expected ',' or ')' in 'shape'"},
        {"(2, -3)", "dim 1 of 'shape' is negative (-3)"},
        {"(-1,)", "dim 0 of 'shape' is negative (-1)"},
        {"(1, 1, 1, 1, 1, 1, 1, 1, 1)", "rank 9 is more than the maximum rank 8"},
        {"(99999999999999999999,)", "dim 0 of 'shape' is too large for 64 bits"},
        {"(4294967296, 4294967296)", "shape (4294967296, 4294967296) has too many elements"},
        /* NumPy's rule: a zero dim does not excuse the others (np.empty calls it too big) */
        {"(0, 4294967296, 4294967296)", "shape (0, 4294967296, 4294967296) has too many elements"},
        {"(4294967296, 4294967296, 0)", "shape (4294967296, 4294967296, 0) has too many elements"},
        {"(0, 2305843009213693952)", "shape (0, 2305843009213693952) is too large"},
        {"(2305843009213693952,)", "shape (2305843009213693952,) is too large"},
    };
    char header[256];
    for (size_t i = 0; i < RJ_ARRAY_LEN(cases); i++) {
        snprintf(header, sizeof header, "{'descr': '<f8', 'fortran_order': False, 'shape': %s, }",
                 cases[i].shape);
        expect_header_fail(c, header, NULL, 0, cases[i].needle);
    }
}

static void test_error_data_size(void **state) {
    fixture *f = *state;
    static char data[1203];
    expect_header_fail(f->ctx, "{'descr': '<f4', 'fortran_order': False, 'shape': (300,), }",
                       data, 800,
                       "bad.npy: truncated: header says 1200 bytes of data, file has 800");
    expect_header_fail(f->ctx, "{'descr': '<f4', 'fortran_order': False, 'shape': (300,), }",
                       data, 0, "truncated: header says 1200 bytes of data, file has 0");
    expect_header_fail(f->ctx, "{'descr': '<f4', 'fortran_order': False, 'shape': (300,), }",
                       data, 1203, "bad.npy: 3 trailing bytes after the data");
    expect_header_fail(f->ctx, "{'descr': '<f4', 'fortran_order': False, 'shape': (0,), }", data,
                       1, "1 trailing bytes after the data");
    /* a huge shape fails on the file size before anything is allocated for it */
    expect_header_fail(f->ctx,
                       "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000,), }",
                       data, 8, "truncated: header says 8000000000000 bytes of data, file has 8");
    expect_header_fail(f->ctx, "{'descr': '|u1', 'fortran_order': False, 'shape': (4,), }",
                       "\0\1\2\1", 4, "'|u1' data can only be read as bool when every byte is 0 "
                                      "or 1, but element 2 is 2");
}

static void test_error_write(void **state) {
    fixture *f = *state;
    static const float v[2] = {1, 2};
    const char *p = tpath("no-such-dir/x.npy");
    assert_int_equal(npy_write(f->ctx, p, RJ_F32, 1, (int64_t[]){2}, v), RJ_ERR_IO);
    assert_error_contains(f->ctx, "no-such-dir/x.npy: cannot open for writing: No such file or "
                                  "directory");
    assert_int_equal(npy_write(f->ctx, tmpdir, RJ_F32, 1, (int64_t[]){2}, v), RJ_ERR_IO);
    assert_error_contains(f->ctx, "cannot open for writing: Is a directory");
    /* a write that fails (here: over the file size limit, whose signal is ignored) is
     * reported, even when the buffered bytes only fail at fclose */
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 100;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    static const float big[64];
    rj_status st = npy_write(f->ctx, tpath("big.npy"), RJ_F32, 1, (int64_t[]){64}, big);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    assert_int_equal(st, RJ_ERR_IO);
    assert_error_contains(f->ctx, "big.npy: write failed: File too large");
    /* bad arguments create no file */
    p = tpath("args.npy");
    assert_int_equal(npy_write(f->ctx, p, (rj_dtype)9, 1, (int64_t[]){2}, v), RJ_ERR_ARG);
    assert_error_contains(f->ctx, "args.npy: cannot write: invalid dtype 9");
    assert_int_equal(npy_write(f->ctx, p, RJ_F32, 9, (int64_t[9]){0}, v), RJ_ERR_ARG);
    assert_error_contains(f->ctx, "rank 9 is out of range 0..8");
    assert_int_equal(npy_write(f->ctx, p, RJ_F32, 1, NULL, v), RJ_ERR_ARG);
    assert_error_contains(f->ctx, "or shape is NULL");
    assert_int_equal(npy_write(f->ctx, p, RJ_F32, 2, (int64_t[]){2, -1}, v), RJ_ERR_ARG);
    assert_error_contains(f->ctx, "dim 1 is negative (-1)");
    assert_int_equal(npy_write(f->ctx, p, RJ_F32, 1, (int64_t[]){2}, NULL), RJ_ERR_ARG);
    assert_error_contains(f->ctx, "data is NULL");
    assert_int_equal(npy_write(f->ctx, p, RJ_F32, 2, (int64_t[]){INT64_MAX, 2}, v),
                     RJ_ERR_OVERFLOW);
    assert_int_equal(npy_write(f->ctx, p, RJ_F64, 1, (int64_t[]){INT64_MAX / 4}, v),
                     RJ_ERR_OVERFLOW);
    assert_int_equal(access(p, F_OK), -1);
    /* NULL data is fine when there is nothing to write */
    assert_ok(f->ctx, npy_write(f->ctx, p, RJ_F32, 2, (int64_t[]){2, 0}, NULL));
}

static void test_null_args(void **state) {
    fixture *f = *state;
    npy_array a = {0};
    assert_int_equal(npy_read(NULL, "x.npy", &a), RJ_ERR_ARG);
    assert_int_equal(npy_read(f->ctx, NULL, &a), RJ_ERR_ARG);
    assert_error_contains(f->ctx, "npy_read: path is NULL");
    assert_int_equal(npy_read(f->ctx, "x.npy", NULL), RJ_ERR_ARG);
    assert_int_equal(npy_write(NULL, "x.npy", RJ_F32, 0, NULL, &a), RJ_ERR_ARG);
    assert_int_equal(npy_write(f->ctx, NULL, RJ_F32, 0, NULL, &a), RJ_ERR_ARG);
    npy_free(f->ctx, &a);
    npy_free(f->ctx, NULL);
    assert_zeroed(&a);
}

/* ---- robustness ------------------------------------------------------------------------ */

/* Reads p and requires success or RJ_ERR_IO with a message naming the file, and no block
 * left behind either way. Returns whether it succeeded. */
static bool read_survives(fixture *f, const char *p) {
    long live = f->tr.live_blocks;
    npy_array a;
    rj_status st = npy_read(f->ctx, p, &a);
    if (st == RJ_OK) {
        assert_true(a.bytes == 0 || a.data);
        npy_free(f->ctx, &a);
    } else {
        if (st != RJ_ERR_IO) fail_msg("status %s: %s", rj_status_str(st), rj_ctx_error(f->ctx));
        assert_zeroed(&a);
        assert_memory_equal(rj_ctx_error(f->ctx), p, strlen(p));
    }
    if (f->tr.live_blocks != live) fail_msg("%ld blocks leaked", f->tr.live_blocks - live);
    return st == RJ_OK;
}

static void test_corrupt_every_byte(void **state) {
    fixture *f = *state;
    static const float v[6] = {1, 2, 3, 4, 5, 6};
    const char *good = tpath("good.npy"), *p = tpath("corrupt.npy");
    assert_ok(f->ctx, npy_write(f->ctx, good, RJ_F32, 2, (int64_t[]){2, 3}, v));
    size_t n;
    unsigned char *file = read_bytes(good, &n), *buf = malloc(n);
    static const unsigned char subst[] = {0x00, 0xff, 0x80, ' ', '\n', '(', ')', '\'', '"', ',',
                                          ':',  '{',  '}',  '[', '-',  '9', '0', 'L',  '\\', 'x'};
    long ok = 0, failed = 0;
    for (size_t pos = 0; pos < 128; pos++)
        for (size_t s = 0; s < sizeof subst; s++) {
            if (file[pos] == subst[s]) continue;
            memcpy(buf, file, n);
            buf[pos] = subst[s];
            write_bytes(p, buf, n);
            read_survives(f, p) ? ok++ : failed++;
        }
    /* every truncation loses data (or more), so every one must fail */
    for (size_t len = 0; len < n; len++) {
        write_bytes(p, file, len);
        if (read_survives(f, p))
            fail_msg("a file truncated to %zu of %zu bytes was accepted", len, n);
    }
    /* random multi-byte damage to the header */
    uint64_t seed = 7;
    for (int it = 0; it < 3000; it++) {
        memcpy(buf, file, n);
        for (int k = (int)rng_int(&seed, 1, 4); k > 0; k--)
            buf[rng_int(&seed, 0, 127)] = (unsigned char)rng_int(&seed, 0, 255);
        write_bytes(p, buf, n);
        read_survives(f, p) ? ok++ : failed++;
    }
    assert_true(ok > 0 && failed > 0);
    free(buf);
    free(file);
}

/* One read on a fresh context over tr, through the internal reader or the public call; the
 * status of the read (or NOMEM if even the context could not be made). */
static rj_status read_on_tracker(tracker *tr, const char *p, const double *want, bool public) {
    rj_ctx *ctx = rj_ctx_new(tracking_alloc, tr);
    if (!ctx) return RJ_ERR_NOMEM;
    npy_array a = {0};
    rj_tensor *t = NULL;
    rj_status st;
    if (public) {
        t = rj_npy_read(ctx, p);
        st = t ? RJ_OK : rj_ctx_status(ctx);
        if (t) {
            rj_tensor_info info;
            assert_ok(ctx, rj_tensor_get_info(t, &info));
            a.dtype = info.dtype;
            a.data = info.values;
        }
    } else {
        st = npy_read(ctx, p, &a);
    }
    if (st == RJ_OK) {
        assert_int_equal(a.dtype, RJ_F64);
        assert_memory_equal(a.data, want, 12 * sizeof(double));
        if (!public) npy_free(ctx, &a);
        rj_tensor_free(t);
    } else {
        if (!public) assert_zeroed(&a);
        if (st == RJ_ERR_NOMEM) assert_error_contains(ctx, "out of memory");
        assert_memory_equal(rj_ctx_error(ctx), p, strlen(p));
    }
    rj_ctx_free(ctx);
    return st;
}

static void alloc_sweep(const char *p, const double *want, bool public) {
    tracker clean = {0};
    assert_int_equal(read_on_tracker(&clean, p, want, public), RJ_OK);
    assert_int_equal(clean.live_blocks, 0);
    long total = clean.attempts;
    assert_true(total >= (public ? 4 : 3)); /* context, header, data (, tensor) */
    for (long nth = 1; nth <= total + 1; nth++) {
        tracker tr = {.fail_at = nth};
        rj_status st = read_on_tracker(&tr, p, want, public);
        if (st != (nth <= total ? RJ_ERR_NOMEM : RJ_OK))
            fail_msg("failing allocation %ld of %ld gave %s", nth, total, rj_status_str(st));
        if (tr.live_blocks != 0 || tr.bad_size)
            fail_msg("failing allocation %ld of %ld leaked %ld blocks", nth, total,
                     tr.live_blocks);
    }
}

static void test_alloc_failure(void **state) {
    fixture *f = *state;
    double v[12];
    for (int i = 0; i < 12; i++) v[i] = i * 0.25 - 1;
    const char *p = tpath("alloc.npy");
    assert_ok(f->ctx, npy_write(f->ctx, p, RJ_F64, 2, (int64_t[]){3, 4}, v));
    alloc_sweep(p, v, false);
    alloc_sweep(p, v, true);
    /* writing needs no memory at all */
    long attempts = f->tr.attempts;
    f->tr.fail_at = attempts + 1;
    assert_ok(f->ctx, rj_npy_write(f->ctx, p, RJ_F64, 2, (int64_t[]){3, 4}, v));
    assert_int_equal(f->tr.attempts, attempts);
    f->tr.fail_at = 0;
}

/* ---- the public calls ------------------------------------------------------------------ */

/* The pattern the header suggests for jagged data: a values file and an offsets file. */
static void test_public_jagged_from_files(void **state) {
    fixture *f = *state;
    static const float v[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    static const int64_t off[4] = {0, 2, 2, 5};
    const char *pv = tpath("values.npy"), *po = tpath("offsets.npy");
    assert_ok(f->ctx, rj_npy_write(f->ctx, pv, RJ_F32, 2, (int64_t[]){5, 2}, v));
    assert_ok(f->ctx, rj_npy_write(f->ctx, po, RJ_I64, 1, (int64_t[]){4}, off));
    rj_tensor *tv = rj_npy_read(f->ctx, pv), *to = rj_npy_read(f->ctx, po);
    assert_non_null(tv);
    assert_non_null(to);
    rj_tensor_info iv, io, ij;
    rj_tensor_get_info(tv, &iv);
    rj_tensor_get_info(to, &io);
    rj_tensor *j = rj_tensor_from_values(f->ctx, RJ_F32, 1, &iv.shape[1], iv.values, iv.shape[0],
                                         io.values, io.shape[0] - 1);
    if (!j) fail_msg("%s", rj_ctx_error(f->ctx));
    assert_ok(f->ctx, rj_tensor_get_info(j, &ij));
    assert_int_equal(ij.ragged_dim, 1);
    assert_int_equal(ij.shape[0], 3);
    assert_int_equal(ij.shape[1], 3); /* the longest row */
    assert_int_equal(ij.shape[2], 2);
    assert_true(ij.values == iv.values); /* borrowed, not copied */
    rj_tensor_free(j);
    rj_tensor_free(to);
    rj_tensor_free(tv);
}

/* Each failure is a status and a message (naming the file where there is one); nothing is
 * left allocated and no file is created by a refused write. */
static void test_public_errors(void **state) {
    fixture *f = *state;
    long live = f->tr.live_blocks;
    static const float v[4] = {1, 2, 3, 4};
    assert_null(rj_npy_read(NULL, "x.npy"));
    assert_int_equal(rj_npy_write(NULL, "x.npy", RJ_F32, 1, (int64_t[]){4}, v), RJ_ERR_ARG);
    assert_null(rj_npy_read(f->ctx, NULL));
    assert_int_equal(rj_ctx_status(f->ctx), RJ_ERR_ARG);
    assert_string_equal(rj_ctx_error(f->ctx), "rj_npy_read: path is NULL");
    assert_int_equal(rj_npy_write(f->ctx, NULL, RJ_F32, 1, (int64_t[]){4}, v), RJ_ERR_ARG);
    assert_string_equal(rj_ctx_error(f->ctx), "rj_npy_write: path is NULL");

    const char *missing = tpath("missing.npy");
    assert_null(rj_npy_read(f->ctx, missing));
    assert_int_equal(rj_ctx_status(f->ctx), RJ_ERR_IO);
    assert_memory_equal(rj_ctx_error(f->ctx), missing, strlen(missing));
    assert_error_contains(f->ctx, "cannot open: No such file or directory");
    const char *junk = tpath("junk.npy");
    static const char zip[] = "PK\3\4 not numpy at all";
    write_bytes(junk, zip, sizeof zip - 1);
    assert_null(rj_npy_read(f->ctx, junk));
    assert_int_equal(rj_ctx_status(f->ctx), RJ_ERR_IO);
    assert_error_contains(f->ctx, "junk.npy: not a .npy file (bad magic)");
    expect_header_fail(f->ctx, "{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }",
                       v, 4, "unsupported dtype '<u2'");
    assert_null(rj_npy_read(f->ctx, tpath("bad.npy")));
    assert_error_contains(f->ctx, "bad.npy: unsupported dtype '<u2'");

    const char *p = tpath("refused.npy");
    assert_int_equal(rj_npy_write(f->ctx, p, (rj_dtype)99, 1, (int64_t[]){4}, v), RJ_ERR_ARG);
    assert_error_contains(f->ctx, "refused.npy: cannot write: invalid dtype 99");
    assert_int_equal(rj_npy_write(f->ctx, p, RJ_F32, RJ_MAX_RANK + 1, (int64_t[9]){0}, v),
                     RJ_ERR_ARG);
    assert_error_contains(f->ctx, "rank 9 is out of range 0..8");
    assert_int_equal(rj_npy_write(f->ctx, p, RJ_F32, 2, NULL, v), RJ_ERR_ARG);
    assert_error_contains(f->ctx, "shape is NULL");
    assert_int_equal(rj_npy_write(f->ctx, p, RJ_F32, 1, (int64_t[]){4}, NULL), RJ_ERR_ARG);
    assert_error_contains(f->ctx, "data is NULL");
    assert_int_equal(access(p, F_OK), -1);
    char nodir[600];
    snprintf(nodir, sizeof nodir, "%s/no/such/dir.npy", tmpdir);
    assert_int_equal(rj_npy_write(f->ctx, nodir, RJ_F32, 1, (int64_t[]){4}, v), RJ_ERR_IO);
    assert_error_contains(f->ctx, "dir.npy: cannot open for writing: No such file or directory");
    assert_int_equal(f->tr.live_blocks, live);
}

/* Found by fuzz/fuzz_npy: an empty array whose other dims overflow when multiplied was read
 * (a zero dim was taken to excuse them), and then refused by the tensor it became, with
 * RJ_ERR_OVERFLOW and a message that did not name the file; in the other dim order the
 * tensor took it. Both now follow NumPy's rule and the reader refuses the file. */
static void test_fuzz_empty_shape_overflow(void **state) {
    fixture *f = *state;
    static const unsigned char input[] =
        "\x93NUMPY\x01\x00\x76\x00"
        "{'descr': '<f4', 'fortran_order': False, 'shape': "
        "(4611686018427387903, 11686018427387903, 0), }                     \n";
    assert_int_equal(sizeof input - 1, 128);
    const char *p = tpath("fuzz-empty.npy");
    write_bytes(p, input, sizeof input - 1);
    assert_null(rj_npy_read(f->ctx, p));
    assert_int_equal(rj_ctx_status(f->ctx), RJ_ERR_IO);
    assert_memory_equal(rj_ctx_error(f->ctx), p, strlen(p));
    assert_error_contains(f->ctx, "has too many elements");
    /* the tensor calls agree, whatever the order of the dims */
    static const int64_t a[3] = {0, INT64_C(4611686018427387903), 4}, b[3] = {a[1], 4, 0};
    assert_null(rj_tensor_dense(f->ctx, RJ_F32, 3, a, NULL));
    assert_int_equal(rj_ctx_status(f->ctx), RJ_ERR_OVERFLOW);
    assert_null(rj_tensor_dense(f->ctx, RJ_F32, 3, b, NULL));
    assert_int_equal(rj_ctx_status(f->ctx), RJ_ERR_OVERFLOW);
    /* and the writer never writes what the reader refuses */
    assert_int_equal(rj_npy_write(f->ctx, tpath("w.npy"), RJ_F32, 3, b, NULL), RJ_ERR_OVERFLOW);
    static const int64_t ok[3] = {0, 4294967296, 5};
    rj_tensor *t = rj_tensor_dense(f->ctx, RJ_F32, 3, ok, NULL);
    assert_non_null(t);
    rj_tensor_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        FX(test_round_trip),
        FX(test_bool_normalised), FX(test_half_descr),
        FX(test_header_bytes_match_numpy),
        FX(test_read_v1_handmade),
        FX(test_read_v2_handmade),
        FX(test_read_v3_handmade),
        FX(test_read_variants),
        FX(test_error_open), FX(test_error_not_regular),
        FX(test_error_preamble),
        FX(test_error_header_syntax),
        FX(test_error_missing_keys),
        FX(test_error_dtype),
        FX(test_error_fortran),
        FX(test_error_shape_text),
        FX(test_error_data_size),
        FX(test_error_write),
        FX(test_null_args),
        FX(test_corrupt_every_byte),
        FX(test_alloc_failure),
        FX(test_public_jagged_from_files),
        FX(test_public_errors),
        FX(test_fuzz_empty_shape_overflow),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
