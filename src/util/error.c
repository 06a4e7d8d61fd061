/*
 * error.c — the context's last error, and the names of status codes.
 *
 * Every public function returns a small status code and leaves a sentence in the context
 * saying what was wrong (naming the object and, for data errors, the first bad index), so
 * callers can both branch on the code and show the message. The message is formatted into a
 * local buffer first because its arguments may point into the previous message.
 */
#include <stdio.h>
#include <string.h>

#include "util.h"


rj_status ctx_failv(rj_ctx *ctx, rj_status s, const char *fmt, va_list ap) {
    if (!ctx) return s;
    char msg[sizeof ctx->err]; /* the arguments may point into ctx->err */
    vsnprintf(msg, sizeof msg, fmt, ap);
    memcpy(ctx->err, msg, sizeof msg);
    ctx->status = s;
    return s;
}

rj_status ctx_fail(rj_ctx *ctx, rj_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ctx_failv(ctx, s, fmt, ap);
    va_end(ap);
    return s;
}

void ctx_clear_error(rj_ctx *ctx) {
    ctx->err[0] = 0;
    ctx->status = RJ_OK;
}

rj_status ctx_last_status(const rj_ctx *ctx) {
    return ctx->status;
}

const char *rj_status_str(rj_status s) {
    static const char *const names[RJ_STATUS_COUNT] = {
        [RJ_OK] = "ok",
        [RJ_ERR_NOMEM] = "out of memory",
        [RJ_ERR_ARG] = "invalid argument",
        [RJ_ERR_GRAPH] = "graph already failed or node is RJ_NONE",
        [RJ_ERR_SHAPE] = "incompatible shapes",
        [RJ_ERR_DTYPE] = "unsupported dtype",
        [RJ_ERR_UNSUPPORTED] = "not supported",
        [RJ_ERR_UNBOUND] = "missing binding",
        [RJ_ERR_SIZE] = "size mismatch",
        [RJ_ERR_BATCH] = "batch size mismatch",
        [RJ_ERR_OFFSETS_START] = "offsets do not start at 0",
        [RJ_ERR_OFFSETS_ORDER] = "offsets decrease",
        [RJ_ERR_OFFSETS_END] = "offsets do not end at the row count",
        [RJ_ERR_SAME] = "symbols declared same differ",
        [RJ_ERR_OVERFLOW] = "size overflow",
        [RJ_ERR_PAD_LEN] = "pad length too small",
        [RJ_ERR_PARSE] = "syntax error",
        [RJ_ERR_IO] = "I/O error",
        [RJ_ERR_COMPILE] = "compile error",
        [RJ_ERR_NO_DEVICE] = "no CUDA device",
        [RJ_ERR_INTERNAL] = "internal error",
    };
    if ((unsigned)s >= RJ_STATUS_COUNT) return "unknown status";
    return names[s];
}
