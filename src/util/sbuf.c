/*
 * sbuf.c — growable text buffers and number formatting for printers and error messages.
 *
 * Printers append freely and check once at the end: the first failed allocation marks the
 * buffer failed and later appends are ignored. Strings handed to users carry their allocation
 * size in a header word so rj_string_free can give the allocator hook the exact size back.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

void sbuf_init(sbuf *b, rj_ctx *ctx) {
    b->ctx = ctx;
    b->s = NULL;
    b->len = b->cap = 0;
    b->failed = false;
}

/* The buffer's first sizeof(size_t) bytes record the allocation size (see rj_string_free). */
#define HDR sizeof(size_t)

static bool sbuf_reserve(sbuf *b, size_t extra) {
    if (b->failed) return false;
    size_t need = b->len + extra + 1;
    if (need <= b->cap) return true;
    size_t ncap = b->cap ? b->cap : 64;
    while (ncap < need) ncap *= 2;
    char *raw = b->s ? b->s - HDR : NULL;
    char *n = mem_realloc(b->ctx, raw, b->cap ? b->cap + HDR : 0, ncap + HDR);
    if (!n) {
        b->failed = true;
        return false;
    }
    b->s = n + HDR;
    b->cap = ncap;
    return true;
}

void sbuf_puts(sbuf *b, const char *s) {
    size_t n = strlen(s);
    if (!sbuf_reserve(b, n)) return;
    memcpy(b->s + b->len, s, n + 1);
    b->len += n;
}

void sbuf_put(sbuf *b, const void *data, size_t n) {
    if (!sbuf_reserve(b, n)) return;
    if (n) memcpy(b->s + b->len, data, n);
    b->len += n;
    b->s[b->len] = 0;
}

void sbuf_putc(sbuf *b, char c) {
    if (!sbuf_reserve(b, 1)) return;
    b->s[b->len++] = c;
    b->s[b->len] = 0;
}

void sbuf_vprintf(sbuf *b, const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0 || !sbuf_reserve(b, (size_t)n)) return;
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void sbuf_printf(sbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    sbuf_vprintf(b, fmt, ap);
    va_end(ap);
}

char *sbuf_finish(sbuf *b) {
    if (!b->failed && !sbuf_reserve(b, 0)) b->failed = true;
    if (b->failed) {
        sbuf_free(b);
        ctx_fail(b->ctx, RJ_ERR_NOMEM, "out of memory while formatting text");
        return NULL;
    }
    char *s = b->s;
    memcpy(s - HDR, &(size_t){b->cap + HDR}, HDR);
    b->s = NULL;
    b->len = b->cap = 0;
    return s;
}

void sbuf_free(sbuf *b) {
    if (b->s) mem_free(b->ctx, b->s - HDR, b->cap + HDR);
    b->s = NULL;
    b->len = b->cap = 0;
}

void rj_string_free(rj_ctx *ctx, char *s) {
    if (!ctx || !s) return;
    size_t n;
    memcpy(&n, s - HDR, HDR);
    mem_free(ctx, s - HDR, n);
}

void fmt_double(char *out, size_t n, double v) {
    if (isnan(v)) {
        snprintf(out, n, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(out, n, v > 0 ? "inf" : "-inf");
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(out, n, "%.*g", prec, v);
        if (strtod(out, NULL) == v) break;
    }
    /* Keep a float literal recognisable as one ("2" -> "2.0"). */
    if (!strpbrk(out, ".eEn") && strlen(out) + 3 < n) strcat(out, ".0");
}

uint64_t hash_str(uint64_t h, const char *s) {
    if (!s) return hash_mix(h, 0x5a5a);
    for (; *s; s++) h = hash_mix(h, (unsigned char)*s);
    return hash_mix(h, 0);
}

void text_head(char *dst, size_t n, const char *log) {
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
