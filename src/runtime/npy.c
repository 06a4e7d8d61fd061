/*
 * npy.c — NumPy .npy files: the exchange format of the `ragjit run` command and the tests.
 *
 * A .npy file is a preamble, a header and the raw array bytes:
 *
 *   "\x93NUMPY" major minor   6 + 2 bytes
 *   header length             u16 little-endian for 1.x, u32 for 2.x and 3.x
 *   header                    a Python dict literal, ASCII (3.0: UTF-8), e.g.
 *                             {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
 *                             padded with spaces and a final '\n'
 *   data                      product(shape) elements in C order, nothing after them
 *
 * NumPy reads the header with ast.literal_eval. We cannot, so the reader is a small
 * recursive-descent parser for the part of Python's literal syntax that real files use: keys
 * in any order, either quote, whitespace anywhere, optional trailing commas, and Python 2's
 * `3L` integers (NumPy still reads those for 1.x/2.x files). Values of keys we do not know
 * are skipped structurally, with a depth limit so a hostile header cannot exhaust the stack.
 * Duplicate keys are rejected instead of letting the last one win: in a file that is meant to
 * describe one array they are more likely a sign of corruption than of intent.
 *
 * The reader trusts nothing in the file. Only regular files are read or written: a FIFO
 * would block, a device may never end, and the check is fstat on the descriptor actually
 * opened (file_open_regular), never a separate stat that the file could change after. Sizes are
 * computed with the checked helpers, the header is capped at 1 MiB (far above NumPy's own
 * 10000-character default; the cap only bounds what a corrupted length field can make us
 * allocate), and the data size the header claims is compared with the file's size *before*
 * anything is allocated for it, so a corrupted shape fails as "truncated" instead of asking
 * for terabytes. Data must end exactly at the end of the file: trailing bytes usually mean a
 * header from one array glued to the data of another, and ignoring them would hide that.
 *
 * Only what the compiler computes with is supported: little-endian f4/f8/i4/i8 ('=' accepted
 * too, since we refuse to build on big-endian hosts) and bools. '|u1' is read as bool only
 * when every byte is 0 or 1, so a uint8 image is not silently turned into a mask. Bool bytes
 * are normalised to 0/1 on both read and write, because generated code may assume it.
 *
 * The writer reproduces NumPy's own bytes: keys sorted, Python's tuple repr, the spare spaces
 * NumPy leaves after the dict so the shape can grow in place (21 minus the digits of the first
 * dim), and padding so that the data starts at a multiple of 64. Matching byte for byte makes
 * files from ragjit and from np.save interchangeable and diffable.
 *
 * The public calls (rj_npy_read, rj_npy_write) are thin: reading hands the data buffer to a
 * dense rj_tensor instead of copying it, so embedders get the same object the rest of the API
 * takes, and a file costs its size in memory once.
 */
#include <errno.h>
#include <string.h>

#include "npy.h"
#include "runtime.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "npy.c reads and writes little-endian data in place; port it before using a big-endian host"
#endif

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_ALIGN 64
#define NPY_MAX_HEADER ((uint32_t)1 << 20)
#define NPY_GROWTH_DIGITS 21 /* NumPy's GROWTH_AXIS_MAX_DIGITS */
#define NPY_MAX_DEPTH 32     /* nesting allowed inside values of unknown keys */
#define NPY_SUPPORTED "(supported: <f4 <f8 <f2 <i4 <i8 |b1, and <V2 for bf16)"

/* ---- dtypes ---------------------------------------------------------------------------- */

typedef struct descr_entry {
    const char *descr;
    rj_dtype dtype;
    bool only01; /* '|u1': readable as bool only when every byte is 0 or 1 */
} descr_entry;

static const descr_entry descr_table[] = {
    {"<f4", RJ_F32, false}, {"=f4", RJ_F32, false}, {"<f8", RJ_F64, false},
    {"=f8", RJ_F64, false}, {"<i4", RJ_I32, false}, {"=i4", RJ_I32, false},
    {"<i8", RJ_I64, false}, {"=i8", RJ_I64, false}, {"|b1", RJ_BOOL, false},
    {"|u1", RJ_BOOL, true}, {"<f2", RJ_F16, false}, {"=f2", RJ_F16, false},
    /* bf16: NumPy has no such type; ml_dtypes.bfloat16 arrays are saved with descr '<V2' (and
     * np.load gives them back as '|V2', to be .view(ml_dtypes.bfloat16)'d): 2-byte opaque
     * items, read here as bf16 bits */
    {"<V2", RJ_BF16, false}, {"|V2", RJ_BF16, false},
};

static const descr_entry *descr_find(const char *s, size_t n) {
    for (size_t i = 0; i < RJ_ARRAY_LEN(descr_table); i++)
        if (strlen(descr_table[i].descr) == n && memcmp(descr_table[i].descr, s, n) == 0)
            return &descr_table[i];
    return NULL;
}

static const char *descr_of(rj_dtype t) {
    static const char *const names[RJ_DTYPE_COUNT] = {
        [RJ_BOOL] = "|b1", [RJ_I32] = "<i4", [RJ_I64] = "<i8", [RJ_F32] = "<f4", [RJ_F64] = "<f8",
        [RJ_F16] = "<f2", [RJ_BF16] = "<V2"};
    return names[t];
}

/* Text from the file, made safe for a one-line message: short, printable. */
static void sanitize(char *out, size_t cap, const char *s, size_t n) {
    size_t keep = n < cap - 4 ? n : cap - 4, j = 0;
    for (size_t i = 0; i < keep; i++) {
        unsigned char c = (unsigned char)s[i];
        out[j++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    if (keep < n) out[j++] = '.', out[j++] = '.', out[j++] = '.';
    out[j] = 0;
}

/* Python's repr of a tuple of ints: "()", "(5,)", "(2, 3)". */
static void shape_repr(char *out, size_t cap, int rank, const int64_t *shape) {
    size_t len = (size_t)snprintf(out, cap, "(");
    for (int i = 0; i < rank && len < cap; i++)
        len += (size_t)snprintf(out + len, cap - len, "%s%lld", i ? ", " : "",
                                (long long)shape[i]);
    if (len < cap) snprintf(out + len, cap - len, rank == 1 ? ",)" : ")");
}

/* ---- header parsing -------------------------------------------------------------------- */

/* What the header says, before it is checked against what we support. */
typedef struct npy_header {
    const char *descr; /* points into the header text; NULL if the key is missing */
    size_t descr_len;
    bool descr_is_string;
    int fortran; /* -1 missing, else 0/1 */
    bool has_shape;
    int rank; /* may exceed RJ_MAX_RANK; only the first RJ_MAX_RANK dims are stored */
    int64_t shape[RJ_MAX_RANK];
} npy_header;

typedef struct hparse {
    rj_ctx *ctx;
    const char *path;
    const char *s;
    size_t n, i;
} hparse;

static rj_status bad_header(hparse *p, const char *fmt, ...) RJ_PRINTF(2, 3);
static rj_status bad_header(hparse *p, const char *fmt, ...) {
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return ctx_fail(p->ctx, RJ_ERR_IO, "%s: bad header: %s (at byte %zu of the header)", p->path,
                    what, p->i);
}

static int peek(const hparse *p) {
    return p->i < p->n ? (unsigned char)p->s[p->i] : -1;
}

static void skip_ws(hparse *p) {
    while (p->i < p->n && strchr(" \t\r\n\f\v", p->s[p->i]) && p->s[p->i]) p->i++;
}

static bool is_word_char(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '.';
}

/* A quoted string; str and len get its raw contents. Escapes are only stepped over: the values
 * we interpret never contain them, and anything that does is unsupported anyway. */
static rj_status parse_string(hparse *p, const char **str, size_t *len) {
    int q = peek(p);
    if (q != '\'' && q != '"') return bad_header(p, "expected a quoted string");
    size_t start = ++p->i;
    while (p->i < p->n && p->s[p->i] != q) {
        if (p->s[p->i] == '\n') return bad_header(p, "unterminated string");
        p->i += p->s[p->i] == '\\' ? 2 : 1;
    }
    if (p->i >= p->n) return bad_header(p, "unterminated string");
    *str = p->s + start;
    *len = p->i - start;
    p->i++;
    return RJ_OK;
}

static rj_status skip_value(hparse *p, int depth);

/* The rest of a (...), [...] or {...} after its opening bracket. */
static rj_status skip_container(hparse *p, char close, int depth) {
    for (;;) {
        skip_ws(p);
        if (peek(p) == close) break;
        if (skip_value(p, depth + 1)) return RJ_ERR_IO;
        skip_ws(p);
        if (close == '}') {
            if (peek(p) != ':') return bad_header(p, "expected ':' in a nested dict");
            p->i++;
            skip_ws(p);
            if (skip_value(p, depth + 1)) return RJ_ERR_IO;
            skip_ws(p);
        }
        if (peek(p) == close) break;
        if (peek(p) != ',') return bad_header(p, "expected ',' or '%c'", close);
        p->i++;
    }
    p->i++;
    return RJ_OK;
}

/* Any literal, for keys we ignore. */
static rj_status skip_value(hparse *p, int depth) {
    if (depth > NPY_MAX_DEPTH) return bad_header(p, "values nested too deeply");
    int c = peek(p);
    const char *s;
    size_t n;
    if (c == '\'' || c == '"') return parse_string(p, &s, &n);
    if (c == '(' || c == '[' || c == '{') {
        p->i++;
        return skip_container(p, c == '(' ? ')' : c == '[' ? ']' : '}', depth);
    }
    size_t start = p->i;
    if (c == '-' || c == '+') p->i++;
    while (is_word_char(peek(p))) p->i++;
    if (p->i == start) return bad_header(p, "unexpected character");
    return RJ_OK;
}

static rj_status parse_bool(hparse *p, int *out) {
    size_t start = p->i;
    while (is_word_char(peek(p))) p->i++;
    size_t n = p->i - start;
    if (n == 4 && memcmp(p->s + start, "True", 4) == 0) *out = 1;
    else if (n == 5 && memcmp(p->s + start, "False", 5) == 0) *out = 0;
    else {
        p->i = start;
        return bad_header(p, "'fortran_order' is not True or False");
    }
    return RJ_OK;
}

/* One dim: a non-negative decimal integer, optionally with Python 2's L suffix. */
static rj_status parse_dim(hparse *p, int index, int64_t *out) {
    bool neg = peek(p) == '-';
    if (neg) {
        p->i++;
        skip_ws(p);
    }
    size_t start = p->i;
    int64_t v = 0;
    while (peek(p) >= '0' && peek(p) <= '9') {
        int d = peek(p) - '0';
        if (v > (INT64_MAX - d) / 10)
            return bad_header(p, "dim %d of 'shape' is too large for 64 bits", index);
        v = v * 10 + d;
        p->i++;
    }
    if (p->i == start) return bad_header(p, "'shape' must be a tuple of integers");
    if (peek(p) == 'L' || peek(p) == 'l') p->i++;
    if (is_word_char(peek(p))) return bad_header(p, "dim %d of 'shape' is not an integer", index);
    if (neg && v != 0)
        return bad_header(p, "dim %d of 'shape' is negative (-%lld)", index, (long long)v);
    *out = v;
    return RJ_OK;
}

/* A tuple of dims. "(5)" is an int in Python, not a tuple, so it is refused like NumPy does. */
static rj_status parse_shape(hparse *p, npy_header *h) {
    if (peek(p) != '(') return bad_header(p, "'shape' is not a tuple");
    p->i++;
    skip_ws(p);
    h->rank = 0;
    bool comma = false;
    while (peek(p) != ')') {
        int64_t d = 0;
        if (parse_dim(p, h->rank, &d)) return RJ_ERR_IO;
        if (h->rank < RJ_MAX_RANK) h->shape[h->rank] = d;
        h->rank++;
        skip_ws(p);
        comma = peek(p) == ',';
        if (comma) {
            p->i++;
            skip_ws(p);
        } else if (peek(p) != ')') {
            return bad_header(p, "expected ',' or ')' in 'shape'");
        }
    }
    if (h->rank == 1 && !comma)
        return bad_header(p, "'shape' is not a tuple (a 1-tuple needs a trailing comma)");
    p->i++;
    h->has_shape = true;
    return RJ_OK;
}

static bool key_is(const char *k, size_t n, const char *name) {
    return strlen(name) == n && memcmp(k, name, n) == 0;
}

static rj_status parse_entry(hparse *p, npy_header *h) {
    const char *k;
    size_t kn;
    if (peek(p) != '\'' && peek(p) != '"') return bad_header(p, "expected a quoted key or '}'");
    if (parse_string(p, &k, &kn)) return RJ_ERR_IO;
    skip_ws(p);
    if (peek(p) != ':') return bad_header(p, "expected ':' after a key");
    p->i++;
    skip_ws(p);
    bool dup = (key_is(k, kn, "descr") && h->descr) ||
               (key_is(k, kn, "fortran_order") && h->fortran >= 0) ||
               (key_is(k, kn, "shape") && h->has_shape);
    if (dup) return bad_header(p, "duplicate key '%.*s'", (int)kn, k);
    if (key_is(k, kn, "descr")) {
        h->descr = p->s + p->i;
        h->descr_is_string = peek(p) == '\'' || peek(p) == '"';
        if (h->descr_is_string) return parse_string(p, &h->descr, &h->descr_len);
        if (skip_value(p, 0)) return RJ_ERR_IO;
        h->descr_len = (size_t)(p->s + p->i - h->descr);
        return RJ_OK;
    }
    if (key_is(k, kn, "fortran_order")) return parse_bool(p, &h->fortran);
    if (key_is(k, kn, "shape")) return parse_shape(p, h);
    return skip_value(p, 0);
}

static rj_status parse_header(hparse *p, npy_header *h) {
    *h = (npy_header){.fortran = -1};
    skip_ws(p);
    if (peek(p) != '{') return bad_header(p, "header is not a dict (expected '{')");
    p->i++;
    for (;;) {
        skip_ws(p);
        if (peek(p) == '}') break;
        if (parse_entry(p, h)) return RJ_ERR_IO;
        skip_ws(p);
        if (peek(p) == '}') break;
        if (peek(p) != ',') return bad_header(p, "expected ',' or '}' after a value");
        p->i++;
    }
    p->i++;
    skip_ws(p);
    if (p->i != p->n) return bad_header(p, "unexpected text after the dict");
    if (!h->descr) return bad_header(p, "missing key 'descr'");
    if (h->fortran < 0) return bad_header(p, "missing key 'fortran_order'");
    if (!h->has_shape) return bad_header(p, "missing key 'shape'");
    return RJ_OK;
}

/* ---- reading --------------------------------------------------------------------------- */

/* What the header means for us: dtype, shape and the exact size of the data. */
typedef struct npy_layout {
    const descr_entry *type;
    int rank;
    int64_t shape[RJ_MAX_RANK];
    size_t nbytes;
} npy_layout;

static rj_status check_header(rj_ctx *ctx, const char *path, const npy_header *h,
                              npy_layout *lay) {
    char text[48];
    sanitize(text, sizeof text, h->descr, h->descr_len);
    if (!h->descr_is_string)
        return ctx_fail(ctx, RJ_ERR_IO, "%s: unsupported dtype %s (structured dtypes are not "
                        "supported) " NPY_SUPPORTED, path, text);
    if (!(lay->type = descr_find(h->descr, h->descr_len)))
        return ctx_fail(ctx, RJ_ERR_IO, "%s: unsupported dtype '%s' " NPY_SUPPORTED, path, text);
    if (h->fortran)
        return ctx_fail(ctx, RJ_ERR_IO, "%s: Fortran-order arrays are not supported "
                        "(fortran_order is True); save a C-order copy", path);
    if (h->rank > RJ_MAX_RANK)
        return ctx_fail(ctx, RJ_ERR_IO, "%s: rank %d is more than the maximum rank %d", path,
                        h->rank, RJ_MAX_RANK);
    lay->rank = h->rank;
    memcpy(lay->shape, h->shape, sizeof lay->shape);
    /* NumPy's rule, so that we read exactly what np.load reads: a zero dim makes the array
     * empty, but the other dims (times the item size) must still fit, or NumPy calls the
     * array too big; such a file cannot come from NumPy */
    int64_t numel, nonzero;
    size_t bytes;
    char sh[RJ_MAX_RANK * 22 + 4];
    shape_repr(sh, sizeof sh, h->rank, h->shape);
    if (!shape_count(h->rank, h->shape, &numel, &nonzero))
        return ctx_fail(ctx, RJ_ERR_IO, "%s: shape %s has too many elements (overflow)",
                        path, sh);
    if (!bytes_of(nonzero, rj_dtype_size(lay->type->dtype), &bytes))
        return ctx_fail(ctx, RJ_ERR_IO, "%s: shape %s is too large: %lld elements of %zu bytes "
                        "overflow the address space", path, sh, (long long)nonzero,
                        rj_dtype_size(lay->type->dtype));
    lay->nbytes = numel ? bytes : 0;
    return RJ_OK;
}

/* Reads exactly n bytes; a short read is an I/O error or a file that shrank under us. */
static rj_status read_exact(rj_ctx *ctx, const char *path, FILE *f, void *buf, size_t n,
                            const char *what) {
    size_t got = n ? fread(buf, 1, n, f) : 0;
    if (got == n) return RJ_OK;
    if (ferror(f))
        return ctx_fail(ctx, RJ_ERR_IO, "%s: read error in the %s: %s", path, what,
                        strerror(errno));
    return ctx_fail(ctx, RJ_ERR_IO, "%s: truncated: the file ends inside the %s", path, what);
}

/* Magic, version and header length; leaves f at the start of the header. */
static rj_status read_preamble(rj_ctx *ctx, const char *path, FILE *f, int64_t fsize,
                               uint32_t *hlen, int *major) {
    unsigned char b[12];
    if (fsize < 8 || read_exact(ctx, path, f, b, 8, "preamble") ||
        memcmp(b, NPY_MAGIC, NPY_MAGIC_LEN) != 0)
        return ctx_fail(ctx, RJ_ERR_IO, "%s: not a .npy file (bad magic)", path);
    *major = b[6];
    if (b[6] < 1 || b[6] > 3 || b[7] != 0)
        return ctx_fail(ctx, RJ_ERR_IO, "%s: unsupported .npy format version %u.%u "
                        "(supported: 1.0, 2.0, 3.0)", path, b[6], b[7]);
    size_t lsize = b[6] == 1 ? 2 : 4;
    if (read_exact(ctx, path, f, b + 8, lsize, "header length")) return RJ_ERR_IO;
    *hlen = (uint32_t)b[8] | (uint32_t)b[9] << 8;
    if (lsize == 4) *hlen |= (uint32_t)b[10] << 16 | (uint32_t)b[11] << 24;
    if (*hlen > NPY_MAX_HEADER)
        return ctx_fail(ctx, RJ_ERR_IO, "%s: header length %lu is more than the 1 MiB limit",
                        path, (unsigned long)*hlen);
    if ((int64_t)(8 + lsize + *hlen) > fsize)
        return ctx_fail(ctx, RJ_ERR_IO, "%s: header length %lu is beyond the end of the file "
                        "(%lld bytes)", path, (unsigned long)*hlen, (long long)fsize);
    return RJ_OK;
}

/* Reads and parses the header text (the buffer lives only as long as the parse needs it). */
static rj_status read_header(rj_ctx *ctx, const char *path, FILE *f, uint32_t hlen,
                             npy_layout *lay) {
    char *text = mem_alloc(ctx, hlen);
    if (!text)
        return ctx_fail(ctx, RJ_ERR_NOMEM, "%s: out of memory reading a %lu-byte header", path,
                        (unsigned long)hlen);
    rj_status st = read_exact(ctx, path, f, text, hlen, "header");
    if (!st) {
        hparse p = {.ctx = ctx, .path = path, .s = text, .n = hlen};
        npy_header h;
        st = parse_header(&p, &h);
        if (!st) st = check_header(ctx, path, &h, lay);
    }
    mem_free(ctx, text, hlen);
    return st;
}

static rj_status check_bool(rj_ctx *ctx, const char *path, unsigned char *d, size_t n,
                            bool only01) {
    for (size_t i = 0; i < n; i++) {
        if (only01 && d[i] > 1)
            return ctx_fail(ctx, RJ_ERR_IO, "%s: '|u1' data can only be read as bool when every "
                            "byte is 0 or 1, but element %zu is %u", path, i, d[i]);
        d[i] = d[i] != 0;
    }
    return RJ_OK;
}

static rj_status read_open_file(rj_ctx *ctx, const char *path, FILE *f, int64_t fsize,
                                npy_array *out) {
    int64_t avail;
    uint32_t hlen = 0;
    int major = 0;
    npy_layout lay = {0};
    if (read_preamble(ctx, path, f, fsize, &hlen, &major) || read_header(ctx, path, f, hlen, &lay))
        return ctx_last_status(ctx);
    avail = fsize - (major == 1 ? 10 : 12) - (int64_t)hlen;
    if ((uint64_t)avail < lay.nbytes)
        return ctx_fail(ctx, RJ_ERR_IO, "%s: truncated: header says %zu bytes of data, file has "
                        "%lld", path, lay.nbytes, (long long)avail);
    if ((uint64_t)avail > lay.nbytes)
        return ctx_fail(ctx, RJ_ERR_IO, "%s: %lld trailing bytes after the data", path,
                        (long long)(avail - (int64_t)lay.nbytes));
    /* mem_alloc_data and mem_free_data both treat 0 bytes as 1, so an empty array still has
     * a block and bytes = 0 frees it exactly; aligned, as every tensor's data */
    if (!(out->data = mem_alloc_data(ctx, lay.nbytes)))
        return ctx_fail(ctx, RJ_ERR_NOMEM, "%s: out of memory reading %zu bytes of data", path,
                        lay.nbytes);
    out->bytes = lay.nbytes;
    out->dtype = lay.type->dtype;
    out->rank = lay.rank;
    memcpy(out->shape, lay.shape, sizeof out->shape);
    if (read_exact(ctx, path, f, out->data, lay.nbytes, "data")) return RJ_ERR_IO;
    if (out->dtype == RJ_BOOL) return check_bool(ctx, path, out->data, out->bytes,
                                                 lay.type->only01);
    return RJ_OK;
}

rj_status npy_read(rj_ctx *ctx, const char *path, npy_array *out) {
    if (out) memset(out, 0, sizeof *out);
    if (!ctx) return RJ_ERR_ARG;
    if (!path || !out)
        return ctx_fail(ctx, RJ_ERR_ARG, "npy_read: %s is NULL", path ? "out" : "path");
    int64_t fsize = 0;
    FILE *f = file_open_regular(ctx, path, false, &fsize);
    if (!f) return RJ_ERR_IO;
    rj_status st = read_open_file(ctx, path, f, fsize, out);
    fclose(f); /* read-only: nothing to lose if closing fails */
    if (st != RJ_OK) npy_free(ctx, out);
    return st;
}

void npy_free(rj_ctx *ctx, npy_array *a) {
    if (!a) return;
    if (ctx && a->data) mem_free_data(ctx, a->data, a->bytes);
    memset(a, 0, sizeof *a);
}

/* ---- writing --------------------------------------------------------------------------- */

/* The whole header block as np.save writes it; returns its length (a multiple of 64). The dict
 * is at most ~250 bytes with rank <= 8, so 512 always suffices and version 2.0 (for headers
 * over 64 KiB) can never be needed; the choice is kept so the rule stays visible. */
enum { NPY_HEADER_CAP = 512 };

static size_t format_header(char *out, rj_dtype dtype, int rank, const int64_t *shape) {
    char sh[RJ_MAX_RANK * 22 + 4], dict[NPY_HEADER_CAP];
    shape_repr(sh, sizeof sh, rank, shape);
    int len = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                       descr_of(dtype), sh);
    if (rank > 0) {
        char first[24];
        int growth = NPY_GROWTH_DIGITS - snprintf(first, sizeof first, "%lld",
                                                  (long long)shape[0]);
        len += snprintf(dict + len, sizeof dict - (size_t)len, "%*s", growth, "");
    }
    /* NumPy pads by ALIGN - (total % ALIGN), which is a full 64 when already aligned */
    int major = 1;
    size_t prefix = 10, pad = NPY_ALIGN - (prefix + (size_t)len + 1) % NPY_ALIGN;
    if ((size_t)len + pad + 1 > 65535) {
        major = 2, prefix = 12;
        pad = NPY_ALIGN - (prefix + (size_t)len + 1) % NPY_ALIGN;
    }
    size_t hlen = (size_t)len + pad + 1;
    memcpy(out, NPY_MAGIC, NPY_MAGIC_LEN);
    out[6] = (char)major;
    out[7] = 0;
    for (size_t i = 0; i < prefix - 8; i++) out[8 + i] = (char)(hlen >> (8 * i) & 0xff);
    memcpy(out + prefix, dict, (size_t)len);
    memset(out + prefix + len, ' ', pad);
    out[prefix + hlen - 1] = '\n';
    return prefix + hlen;
}

static rj_status check_write_args(rj_ctx *ctx, const char *path, rj_dtype dtype, int rank,
                                  const int64_t *shape, const void *data, size_t *nbytes) {
    if ((unsigned)dtype >= RJ_DTYPE_COUNT)
        return ctx_fail(ctx, RJ_ERR_ARG, "%s: cannot write: invalid dtype %d", path, (int)dtype);
    if (rank < 0 || rank > RJ_MAX_RANK || (rank > 0 && !shape))
        return ctx_fail(ctx, RJ_ERR_ARG, "%s: cannot write: rank %d is out of range 0..%d%s",
                        path, rank, RJ_MAX_RANK, rank > 0 && !shape ? " or shape is NULL" : "");
    int64_t numel, nonzero;
    for (int i = 0; i < rank; i++)
        if (shape[i] < 0)
            return ctx_fail(ctx, RJ_ERR_ARG, "%s: cannot write: dim %d is negative (%lld)", path,
                            i, (long long)shape[i]);
    /* the reader's rule: never write a file that cannot be read back */
    if (!shape_count(rank, shape, &numel, &nonzero))
        return ctx_fail(ctx, RJ_ERR_OVERFLOW, "%s: cannot write: the element count "
                        "overflows", path);
    if (!bytes_of(nonzero, rj_dtype_size(dtype), nbytes))
        return ctx_fail(ctx, RJ_ERR_OVERFLOW, "%s: cannot write: %lld elements overflow the "
                        "address space", path, (long long)nonzero);
    if (!numel) *nbytes = 0;
    if (!data && *nbytes)
        return ctx_fail(ctx, RJ_ERR_ARG, "%s: cannot write: data is NULL", path);
    return RJ_OK;
}

/* Bools go through a small buffer so that whatever nonzero bytes the caller has become 1. */
static bool write_data(FILE *f, rj_dtype dtype, const void *data, size_t n) {
    if (dtype != RJ_BOOL) return n == 0 || fwrite(data, 1, n, f) == n;
    const unsigned char *src = data;
    unsigned char buf[4096];
    for (size_t done = 0; done < n;) {
        size_t k = n - done < sizeof buf ? n - done : sizeof buf;
        for (size_t i = 0; i < k; i++) buf[i] = src[done + i] != 0;
        if (fwrite(buf, 1, k, f) != k) return false;
        done += k;
    }
    return true;
}

rj_status npy_write(rj_ctx *ctx, const char *path, rj_dtype dtype, int rank, const int64_t *shape,
                    const void *data) {
    if (!ctx) return RJ_ERR_ARG;
    if (!path) return ctx_fail(ctx, RJ_ERR_ARG, "npy_write: path is NULL");
    size_t nbytes = 0;
    if (check_write_args(ctx, path, dtype, rank, shape, data, &nbytes)) return ctx_last_status(ctx);
    char header[NPY_HEADER_CAP + 16];
    size_t hlen = format_header(header, dtype, rank, shape);
    FILE *f = file_open_regular(ctx, path, true, NULL);
    if (!f) return RJ_ERR_IO;
    /* errors are sticky in the stream, and buffered ones only surface at fclose, so both
     * results count; the partial file is left alone (path may not be a file we own) */
    errno = 0;
    bool ok = fwrite(header, 1, hlen, f) == hlen && write_data(f, dtype, data, nbytes);
    int err = errno;
    if (fclose(f) != 0 && ok) ok = false, err = errno;
    if (!ok) return ctx_fail(ctx, RJ_ERR_IO, "%s: write failed: %s", path,
                             strerror(err ? err : EIO));
    return RJ_OK;
}

/* ---- public API ------------------------------------------------------------------------ */

rj_tensor *rj_npy_read(rj_ctx *ctx, const char *path) {
    if (!ctx) return NULL;
    if (!path) {
        ctx_fail(ctx, RJ_ERR_ARG, "rj_npy_read: path is NULL");
        return NULL;
    }
    npy_array a;
    if (npy_read(ctx, path, &a)) return NULL;
    rj_tensor *t = tensor_adopt_dense(ctx, a.dtype, a.rank, a.shape, a.data, a.bytes);
    /* after a valid header only the tensor's own block can fail; name the file, as every
     * other message of the reader does */
    if (!t && ctx_last_status(ctx) == RJ_ERR_NOMEM)
        ctx_fail(ctx, RJ_ERR_NOMEM, "%s: out of memory for the tensor", path);
    return t;
}

rj_status rj_npy_write(rj_ctx *ctx, const char *path, rj_dtype dtype, int rank,
                       const int64_t *shape, const void *data) {
    if (!ctx) return RJ_ERR_ARG;
    if (!path) return ctx_fail(ctx, RJ_ERR_ARG, "rj_npy_write: path is NULL");
    return npy_write(ctx, path, dtype, rank, shape, data);
}
