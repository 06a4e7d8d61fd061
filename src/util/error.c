/*
 * error.c — the last error of a context, per thread, and the names of status codes.
 *
 * Every public function returns a small status code and leaves a sentence saying what was
 * wrong (naming the object and, for data errors, the first bad index), so callers can both
 * branch on the code and show the message. A model runtime runs one program from many
 * threads on one context, so the message is kept per thread: a failure on one thread never
 * changes what another reads. The message is formatted into a local buffer first because its
 * arguments may point into the previous message.
 */
#include <stdio.h>
#include <string.h>

#include "util.h"


/* Each thread keeps the last error of the few contexts it used most recently, keyed by the
 * context's id (not its address, which a new context may reuse). A thread that fails on more
 * contexts than this forgets the oldest one's message, never another context's status. */
enum { THREAD_ERRORS = 4 };

typedef struct thread_error {
    uint64_t ctx_id;
    ctx_error e;
} thread_error;

static _Thread_local thread_error errors[THREAD_ERRORS];
static _Thread_local unsigned next_error;

static thread_error *find(const rj_ctx *ctx) {
    for (int i = 0; i < THREAD_ERRORS; i++)
        if (errors[i].ctx_id == ctx->id) return &errors[i];
    return NULL;
}

static thread_error *find_or_add(const rj_ctx *ctx) {
    thread_error *t = find(ctx);
    if (t) return t;
    t = &errors[next_error++ % THREAD_ERRORS];
    t->ctx_id = ctx->id;
    return t;
}

rj_status ctx_failv(rj_ctx *ctx, rj_status s, const char *fmt, va_list ap) {
    if (!ctx) return s;
    thread_error *t = find_or_add(ctx);
    char msg[sizeof t->e.msg]; /* the arguments may point into the previous message */
    vsnprintf(msg, sizeof msg, fmt, ap);
    memcpy(t->e.msg, msg, sizeof msg);
    t->e.status = s;
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
    thread_error *t = find(ctx);
    if (t) t->e.msg[0] = 0, t->e.status = RJ_OK;
}

rj_status ctx_last_status(const rj_ctx *ctx) {
    const thread_error *t = find(ctx);
    return t ? t->e.status : RJ_OK;
}

const char *ctx_last_error(const rj_ctx *ctx) {
    const thread_error *t = find(ctx);
    return t ? t->e.msg : "";
}

void ctx_error_save(const rj_ctx *ctx, ctx_error *e) {
    const thread_error *t = find(ctx);
    if (t) *e = t->e;
    else e->status = RJ_OK, e->msg[0] = 0;
}

void ctx_error_restore(rj_ctx *ctx, const ctx_error *e) {
    thread_error *t = find_or_add(ctx);
    t->e = *e;
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
        [RJ_ERR_INDEX] = "index out of range",
    };
    if ((unsigned)s >= RJ_STATUS_COUNT) return "unknown status";
    return names[s];
}
