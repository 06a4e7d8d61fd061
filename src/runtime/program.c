/*
 * program.c — programs: the pipeline drives the backends; one cache for every target.
 *
 * rj_program_new runs the target-neutral pipeline once per (graph, target) — verify,
 * canonicalise, eliminate pads, fuse, lower for the target's descriptor — and hands the
 * finished loop IR to the target's compile hook (runtime.h's backend table). Backends never
 * run the pipeline and never see a graph.
 *
 * The cache. An artifact is a graph compiled for one target: the pipeline's results and the
 * text of every stage produced so far, so dumps and RAGJIT_DUMP print what was compiled and
 * never compile again. Artifacts are keyed by the exact graph (names included: texts print
 * them); their machine code lives in code entries keyed by structure alone, so a graph built
 * again under other names reuses the code and only re-runs the (cheap) pipeline. Unused
 * artifacts stay cached until there are more than MAX_CACHED, oldest evicted first.
 *
 * Threads. The cache is shared by every thread using the context and guarded by the
 * context's lock, held while a graph is looked up, compiled or dumped: compiles of one
 * context are serialised (LLVM's TargetMachine is not to be shared by concurrent code
 * generation) and a graph asked for by several threads at once compiles once. Runs take no
 * lock: a compiled artifact is immutable, and everything a run writes lives in its binding.
 * (One exception, inside the CPU backend: kernels compiled by the first run that needs them,
 * which takes the lock for that compile; see cpu.c.)
 *
 * A program reads the artifact's copy of the graph (node ids preserved), so callers may free
 * or keep extending theirs and bind by the ids they hold. Bindings hold a reference to the
 * artifact too, so programs and bindings may be freed in any order.
 *
 * The plan. With the code, an artifact gets the plan of its runs (plan.c): the graph's
 * symbols, inputs, outputs, pads, buffers and checks as flat arrays, made here once, under
 * the lock, so that runs (run.c, resolve.c, launch.c) read it and never the graph. This file
 * is the compile-time side of the runtime: nothing in it is called by a run.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ir/target.h"
#include "runtime.h"

#define MAX_CACHED 64

#define STAGE_ROW(e, name, ext, owner) {name, ext, owner},
const stage_info stage_table[STAGE_COUNT] = {STAGES(STAGE_ROW)};
#undef STAGE_ROW

static const backend *const backends[] = {
    [RJ_TARGET_REFERENCE] = &backend_reference,
    [RJ_TARGET_CPU] = &backend_cpu,
    [RJ_TARGET_CUDA] = &backend_cuda,
    [RJ_TARGET_OPENCL] = &backend_opencl,
};

typedef struct cache {
    artifact *arts;    /* most recently created first */
    int32_t narts;
    code_entry *codes;
} cache;

/* ---- the cache --------------------------------------------------------------------------- */

static void code_release(rj_ctx *ctx, cache *c, code_entry *ce) {
    if (!ce || --ce->refs > 0) return;
    for (code_entry **pp = &c->codes; *pp; pp = &(*pp)->next)
        if (*pp == ce) {
            *pp = ce->next;
            break;
        }
    backends[ce->target]->code_free(ctx, ce->code);
    rj_graph_free(ce->key);
    mem_free(ctx, ce, sizeof *ce);
}

static void artifact_free(rj_ctx *ctx, cache *c, artifact *a) {
    code_release(ctx, c, a->ce);
    if (a->planned) plan_free(ctx, &a->plan);
    for (int i = 0; i < STAGE_COUNT; i++) rj_string_free(ctx, a->text[i]);
    compiled_free(&a->comp);
    rj_graph_free(a->key);
    mem_free(ctx, a, sizeof *a);
}

static void cache_release(rj_ctx *ctx, void *p) {
    cache *c = p;
    while (c->arts) {
        artifact *a = c->arts;
        c->arts = a->next;
        artifact_free(ctx, c, a);
    }
    mem_free(ctx, c, sizeof *c);
}

static cache *cache_get(rj_ctx *ctx) {
    ctx_slot *sl = &ctx->slot[SLOT_CACHE];
    if (!sl->state) {
        if (!(sl->state = mem_zalloc(ctx, sizeof(cache)))) return NULL;
        sl->release = cache_release;
    }
    return sl->state;
}

/* Frees the oldest unused artifacts beyond MAX_CACHED. */
static void cache_evict(rj_ctx *ctx, cache *c) {
    while (c->narts > MAX_CACHED) {
        artifact **victim = NULL;
        for (artifact **pp = &c->arts; *pp; pp = &(*pp)->next)
            if ((*pp)->refs == 0) victim = pp;
        if (!victim) return;
        artifact *a = *victim;
        *victim = a->next;
        c->narts--;
        artifact_free(ctx, c, a);
    }
}

/* The artifact of (g, target), created on a miss; a reference for the caller. */
static artifact *artifact_get(rj_ctx *ctx, const rj_graph *g, rj_target target) {
    cache *c = cache_get(ctx);
    if (!c) return NULL;
    uint64_t h = hash_mix(graph_hash(g), graph_names_hash(g));
    for (artifact *a = c->arts; a; a = a->next)
        if (a->hash == h && a->target == target && graph_equal(a->key, g, true)) {
            a->refs++;
            return a;
        }
    artifact *a = mem_zalloc(ctx, sizeof *a);
    if (!a) return NULL;
    if (!(a->key = graph_clone(ctx, g))) {
        mem_free(ctx, a, sizeof *a);
        return NULL;
    }
    a->hash = h;
    a->target = target;
    a->refs = 1;
    a->next = c->arts;
    c->arts = a;
    c->narts++;
    cache_evict(ctx, c);
    return a;
}

static void release_locked(rj_ctx *ctx, artifact *a) {
    if (!a) return;
    a->refs--;
    cache_evict(ctx, ctx->slot[SLOT_CACHE].state);
}

void artifact_retain(rj_ctx *ctx, artifact *a) {
    ctx_lock(ctx);
    a->refs++;
    ctx_unlock(ctx);
}

void artifact_release(rj_ctx *ctx, artifact *a) {
    ctx_lock(ctx);
    release_locked(ctx, a);
    ctx_unlock(ctx);
}

/* The pipeline, once per artifact. The reference target lowers too (for its dumps), with the
 * host's descriptor. */
static rj_status artifact_lower(artifact *a) {
    if (a->lowered) return RJ_OK;
    rj_status s = pipeline_run(a->key, target_desc_for(a->target), &a->comp);
    a->lowered = s == RJ_OK;
    return s;
}

/* Machine code for the artifact: shared with a structurally equal one, or compiled. */
static rj_status artifact_compile(rj_ctx *ctx, artifact *a) {
    const backend *be = backends[a->target];
    rj_status s;
    if (a->ce || !be->compile) return RJ_OK;
    if ((s = artifact_lower(a))) return s;
    cache *c = ctx->slot[SLOT_CACHE].state;
    uint64_t h = graph_hash(a->key);
    for (code_entry *ce = c->codes; ce; ce = ce->next)
        if (ce->hash == h && ce->target == a->target && graph_equal(ce->key, a->key, false)) {
            ce->refs++;
            a->ce = ce;
            return RJ_OK;
        }
    code_entry *ce = mem_zalloc(ctx, sizeof *ce);
    if (!ce) return RJ_ERR_NOMEM;
    if (!(ce->key = graph_clone(ctx, a->key))) {
        mem_free(ctx, ce, sizeof *ce);
        return RJ_ERR_NOMEM;
    }
    if ((s = be->compile(ctx, &a->comp.lp, &ce->code))) {
        rj_graph_free(ce->key);
        mem_free(ctx, ce, sizeof *ce);
        return s;
    }
    ce->hash = h;
    ce->target = a->target;
    ce->refs = 1;
    ce->next = c->codes;
    c->codes = ce;
    a->ce = ce;
    return RJ_OK;
}

/* The plan of the artifact's runs, once (with its code: a reference artifact has none, and
 * launches no kernels). */
static rj_status artifact_plan(rj_ctx *ctx, artifact *a) {
    if (a->planned) return RJ_OK;
    rj_status s = plan_make(ctx, a->key, a->ce ? &a->comp.lp : NULL, &a->plan);
    a->planned = s == RJ_OK;
    return s;
}

/* ---- stage texts ------------------------------------------------------------------------- */

static int stage_find(const char *name) {
    for (int i = 0; i < STAGE_COUNT; i++)
        if (!strcmp(stage_table[i].name, name)) return i;
    return -1;
}

/* The kept text of stage st of a (never GRAPH, which prints the caller's own graph). */
static const char *artifact_text(rj_ctx *ctx, artifact *a, int st) {
    if (a->text[st]) return a->text[st];
    rj_status s = artifact_lower(a);
    if (s) return NULL;
    int owner = stage_table[st].owner;
    if (owner >= 0) {
        const backend *be = backends[owner];
        s = be->dump(ctx, &a->comp.lp, a->ce ? a->ce->code : NULL, st, a->text);
        if (!a->text[st] && !s) s = ctx_fail(ctx, RJ_ERR_INTERNAL, "the %s backend produced no %s text",
                                             be->name, stage_table[st].name);
        return a->text[st];
    }
    sbuf b;
    sbuf_init(&b, ctx);
    switch (st) {
    case STAGE_OPT: print_graph(&b, a->comp.opt); break;
    case STAGE_FUSED: print_fuse_plan(&b, a->comp.opt, &a->comp.plan); break;
    case STAGE_LOOPS: print_lprog(&b, a->comp.opt, &a->comp.lp); break;
    case STAGE_DOT: print_dot(&b, a->comp.opt, &a->comp.plan); break;
    default: break;
    }
    return a->text[st] = sbuf_finish(&b);
}

static char *copy_text(rj_ctx *ctx, const char *t) {
    if (!t) return NULL;
    sbuf b;
    sbuf_init(&b, ctx);
    sbuf_puts(&b, t);
    return sbuf_finish(&b);
}

/* Stage st of g for target, from the cache; the text of a backend's own stage comes from that
 * backend, whatever `target` is. */
static char *graph_text(const rj_graph *g, artifact *own, rj_target target, int st) {
    rj_ctx *ctx = g->ctx;
    if (st == STAGE_GRAPH) {
        sbuf b;
        sbuf_init(&b, ctx);
        print_graph(&b, g);
        return sbuf_finish(&b);
    }
    int owner = stage_table[st].owner;
    if (owner >= 0 && owner != (int)target) own = NULL, target = (rj_target)owner;
    ctx_lock(ctx);
    artifact *a = own ? own : artifact_get(ctx, g, target);
    char *t = a ? copy_text(ctx, artifact_text(ctx, a, st)) : NULL;
    if (!own) release_locked(ctx, a);
    ctx_unlock(ctx);
    return t;
}

static int stage_arg(rj_ctx *ctx, const char *call, const char *stage) {
    int st = stage ? stage_find(stage) : -1;
    if (st < 0) {
        sbuf names;
        sbuf_init(&names, ctx);
        for (int i = 0; i < STAGE_COUNT; i++) sbuf_printf(&names, "%s%s", i ? ", " : "", stage_table[i].name);
        char *n = sbuf_finish(&names);
        ctx_fail(ctx, RJ_ERR_ARG, stage ? "%s: unknown stage '%s' (%s)" : "%s: stage is NULL%.0s (%s)", call,
                 stage ? stage : "", n ? n : "");
        rj_string_free(ctx, n);
    }
    return st;
}

char *rj_program_dump(rj_program *p, const char *stage) {
    if (!p) return NULL;
    int st = stage_arg(p->ctx, "rj_program_dump", stage);
    return st < 0 ? NULL : graph_text(p->g, p->art, p->target, st);
}

static bool target_ok(rj_ctx *ctx, const char *call, rj_target target) {
    if ((unsigned)target < RJ_ARRAY_LEN(backends) && backends[target]) return true;
    ctx_fail(ctx, RJ_ERR_ARG, "%s: invalid target %d", call, (int)target);
    return false;
}

static bool graph_ok(rj_graph *g) {
    if (g->status != RJ_OK) {
        ctx_fail(g->ctx, g->status, "the graph has errors: %s", g->first_err);
        return false;
    }
    if (g->noutputs == 0) {
        ctx_fail(g->ctx, RJ_ERR_ARG, "the graph has no outputs");
        return false;
    }
    return verify_graph(g) == RJ_OK;
}

char *rj_graph_dump(rj_graph *g, rj_target target, const char *stage) {
    if (!g) return NULL;
    int st = stage_arg(g->ctx, "rj_graph_dump", stage);
    if (st < 0 || !target_ok(g->ctx, "rj_graph_dump", target) || !graph_ok(g)) return NULL;
    return graph_text(g, NULL, target, st);
}

/* ---- programs ---------------------------------------------------------------------------- */

static void dump_all(rj_program *p, const char *dir);

rj_program *rj_program_new(rj_graph *g, rj_target target) {
    if (!g) return NULL;
    rj_ctx *ctx = g->ctx;
    if (!target_ok(ctx, "rj_program_new", target) || !graph_ok(g)) return NULL;
    const backend *be = backends[target];
    if (be->available && be->available(ctx)) return NULL;
    rj_program *p = mem_zalloc(ctx, sizeof *p);
    if (!p) return NULL;
    static uint64_t serial;
    p->ctx = ctx;
    p->id = __atomic_add_fetch(&serial, 1, __ATOMIC_RELAXED);
    p->target = target;
    p->be = be;
    ctx_lock(ctx); /* one compile of a graph, however many threads ask for it */
    bool ok = (p->art = artifact_get(ctx, g, target)) && !artifact_compile(ctx, p->art) && !artifact_plan(ctx, p->art);
    ctx_unlock(ctx);
    if (!ok) {
        rj_program_free(p);
        return NULL;
    }
    p->g = p->art->key;
    const char *dir = getenv("RAGJIT_DUMP");
    if (dir && *dir) dump_all(p, dir);
    return p;
}

/* RAGJIT_DUMP=<dir>: every stage of every program, one file each, named after the program's
 * first output: 0003-attn.loops.txt. A dump is a debugging aid: failing to write one prints a
 * warning and leaves the program and the context's last error untouched. */
static void dump_all(rj_program *p, const char *dir) {
    static int counter;
    rj_ctx *ctx = p->ctx;
    ctx_error saved;
    ctx_error_save(ctx, &saved);
    int id = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    for (int st = 0; st < STAGE_COUNT; st++) {
        char *text = graph_text(p->g, p->art, p->target, st);
        if (!text) continue; /* e.g. no NVRTC for ptx */
        char path[4096];
        snprintf(path, sizeof path, "%s/%04d-%s.%s", dir, id, p->g->outputs[0].name, stage_table[st].ext);
        /* a regular file only: a FIFO left in the directory would block the compile */
        FILE *f = file_open_regular(ctx, path, true, NULL);
        errno = 0;
        bool ok = f && fputs(text, f) >= 0;
        int err = errno;
        if (f && fclose(f) && ok) ok = false, err = errno;
        rj_string_free(ctx, text);
        if (!ok) {
            if (f) fprintf(stderr, "ragjit: RAGJIT_DUMP: cannot write %s: %s\n", path,
                           strerror(err ? err : EIO));
            else fprintf(stderr, "ragjit: RAGJIT_DUMP: %s\n", rj_ctx_error(ctx));
            break;
        }
    }
    ctx_error_restore(ctx, &saved);
}

void rj_program_free(rj_program *p) {
    if (!p) return;
    artifact_release(p->ctx, p->art);
    mem_free(p->ctx, p, sizeof *p);
}

/* The backend of a target a device call names, or NULL after reporting. */
static const backend *device_backend(rj_ctx *ctx, rj_target target, const char *call) {
    if ((unsigned)target >= RJ_ARRAY_LEN(backends) || !backends[target]) {
        ctx_fail(ctx, RJ_ERR_ARG, "%s: unknown target %d", call, (int)target);
        return NULL;
    }
    const backend *be = backends[target];
    if (!be->handles) {
        ctx_fail(ctx, RJ_ERR_UNSUPPORTED, "%s: the %s target has no device (bench/ measures host bandwidth)", call,
                 be->name);
        return NULL;
    }
    return be;
}

rj_status rj_device_handles(rj_ctx *ctx, rj_target target, void **context, void **queue) {
    if (!ctx) return RJ_ERR_ARG;
    if (context) *context = NULL;
    if (queue) *queue = NULL;
    const backend *be = device_backend(ctx, target, "rj_device_handles");
    if (!be) return ctx_last_status(ctx);
    rj_status s = be->available(ctx);
    return s ? s : be->handles(ctx, context, queue);
}

rj_status rj_device_copy_bandwidth(rj_ctx *ctx, rj_target target, int64_t bytes, double *gb_per_s) {
    if (!ctx) return RJ_ERR_ARG;
    if (!gb_per_s) return ctx_fail(ctx, RJ_ERR_ARG, "rj_device_copy_bandwidth: gb_per_s is NULL");
    *gb_per_s = 0;
    const backend *be = device_backend(ctx, target, "rj_device_copy_bandwidth");
    if (!be) return ctx_last_status(ctx);
    if (bytes <= 0 || bytes > ((int64_t)1 << 40))
        return ctx_fail(ctx, RJ_ERR_ARG, "rj_device_copy_bandwidth: %lld bytes (1 .. 2^40)", (long long)bytes);
    rj_status s = be->available(ctx);
    if (s) return s;
    double t[5];
    for (int i = -1; i < 5; i++) { /* a warm-up copy, then five */
        double ms = 0;
        if ((s = be->copy_probe(ctx, bytes, &ms))) return s;
        if (i >= 0) t[i] = ms;
    }
    for (int i = 1; i < 5; i++) /* median of five */
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double x = t[j];
            t[j] = t[j - 1], t[j - 1] = x;
        }
    *gb_per_s = t[2] > 0 ? 2.0 * (double)bytes / (t[2] * 1e-3) / 1e9 : 0;
    return RJ_OK;
}
