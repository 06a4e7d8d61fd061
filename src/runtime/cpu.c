/*
 * cpu.c — the CPU target: JIT-compiled loop IR (codegen/llvm), called through libffi on
 * ragjit's own worker threads (pool.c) or the embedder's pool.
 *
 * State. The context's CPU slot holds the LLVM JIT (created on the first compile and kept:
 * creating one costs milliseconds, adding a module to it does not), the streaming-store
 * threshold and compile counters. A compiled artifact's code is the JIT's module plus one
 * libffi call interface per kernel, prepared once from the kernel's typed signature. Code is
 * keyed by this build of ragjit, LLVM's identity and the loop IR's fingerprint: live code of
 * an equal key is shared, else the module comes from the persistent cache (diskcache.c) when
 * an earlier process stored it, else it is compiled and stored there. Within that, a kernel
 * is compiled once per context: one whose code a kernel before it in the program has (a
 * function's body in each call) or a live program of the context has (kshare.c) runs that
 * code, and the module holds only the rest. A softmax's twin of
 * runtime tiles is left out of that module and compiled (or loaded) by the first run that
 * calls it (compiled_late, cpu_late).
 *
 * Running. Kernels take only pointers and sizes, so a run only computes arguments from the
 * resolved view of the run (run_view: sizes, offsets, where inputs and outputs are), with the
 * shared launch planning (launch.c): temporaries and per-thread scratch in host memory that
 * the binding's run state keeps across runs, unit ranges balanced by work, and parameter
 * values. A kernel's
 * chunks go to the context's pool (pool.c: claimed one at a time by the calling thread and
 * whichever workers are awake, so a descheduled worker delays only its chunk); small runs
 * stay on the calling thread, where dispatch costs a few calls. A chunk may run on any
 * thread: per-thread scratch is indexed by the slot the pool gives the chunk's thread.
 * Outputs larger than the streaming threshold are written with non-temporal stores: they
 * skip the read-for-ownership of each line and do not evict the inputs from cache.
 */
#include <errno.h>
#include <ffi.h>
#include <stdlib.h>
#include <string.h>

#include "../ir/target.h"
#include "cpu.h"

/* Measured with bench/ (copy-nt vs copy); override with RAGJIT_NT_BYTES. */
#define NT_BYTES_DEFAULT (8 << 20)

/* ---- the context's CPU state ----------------------------------------------------------------- */

static void state_release(rj_ctx *ctx, void *p) {
    cpu_state *st = p;
    pool_free(ctx, st->pool);
    kshare_free(ctx, &st->kernels);
    llvm_jit_free(st->jit);
    mem_free(ctx, st, sizeof *st);
}

/* A byte count from the environment (RAGJIT_NT_BYTES, RAGJIT_STASH_BYTES), read once per
 * context (runs never call getenv). The whole value must be a non-negative integer: atoll read
 * "8MiB" as 8 and "x" as 0, silently streaming every output; anything else gives dflt. */
static int64_t env_bytes(const char *name, int64_t dflt) {
    const char *v = getenv(name);
    char *end = NULL;
    errno = 0;
    long long n = v && *v ? strtoll(v, &end, 10) : -1;
    return n >= 0 && !errno && end && !*end ? n : dflt;
}

/* Created by the first compile or dump, under the context's lock; read-only for runs. */
static cpu_state *state_get(rj_ctx *ctx) {
    ctx_slot *sl = &ctx->slot[SLOT_CPU];
    if (!sl->state) {
        cpu_state *st = mem_zalloc(ctx, sizeof(cpu_state));
        if (!st) return NULL;
        if (!(st->pool = pool_new(ctx, MAX_THREADS))) {
            mem_free(ctx, st, sizeof *st);
            return NULL;
        }
        st->l2_bytes = target_desc_for(RJ_TARGET_CPU)->l2_bytes;
        st->l3_bytes = target_desc_for(RJ_TARGET_CPU)->l3_bytes;
        st->env_stream_bytes = env_bytes("RAGJIT_NT_BYTES", NT_BYTES_DEFAULT);
        st->env_stash_bytes = env_bytes("RAGJIT_STASH_BYTES", -1);
        sl->state = st;
        sl->release = state_release;
    }
    return sl->state;
}

static rj_status jit_get(rj_ctx *ctx, struct llvm_jit **j) {
    cpu_state *st = state_get(ctx);
    if (!st) return RJ_ERR_NOMEM;
    rj_status s = st->jit ? RJ_OK : llvm_jit_new(ctx, &st->jit);
    *j = st->jit;
    return s;
}

rj_status cpu_set_stream_bytes(rj_ctx *ctx, int64_t bytes) {
    ctx_lock(ctx);
    cpu_state *st = state_get(ctx);
    if (st) __atomic_store_n(&st->stream_bytes, bytes, __ATOMIC_RELAXED);
    ctx_unlock(ctx);
    return st ? RJ_OK : RJ_ERR_NOMEM;
}

uint64_t cpu_disk_hit_count(const rj_ctx *ctx) {
    const cpu_state *st = ctx->slot[SLOT_CPU].state;
    return st ? st->disk_hits : 0;
}

uint64_t cpu_compile_count(const rj_ctx *ctx) {
    const cpu_state *st = ctx->slot[SLOT_CPU].state;
    return st ? st->compiles : 0;
}

uint64_t cpu_shared_kernel_count(const rj_ctx *ctx) {
    const cpu_state *st = ctx->slot[SLOT_CPU].state;
    return st ? st->shared : 0;
}

void cpu_late_counts(const rj_ctx *ctx, uint64_t *compiles, uint64_t *disk_hits) {
    const cpu_state *st = ctx->slot[SLOT_CPU].state;
    *compiles = st ? __atomic_load_n(&st->late_compiles, __ATOMIC_RELAXED) : 0;
    *disk_hits = st ? __atomic_load_n(&st->late_disk_hits, __ATOMIC_RELAXED) : 0;
}

/* ---- compile --------------------------------------------------------------------------------- */

static rj_status cpu_available(rj_ctx *ctx) {
    RJ_UNUSED(ctx);
    return RJ_OK;
}

static void cpu_code_free(rj_ctx *ctx, void *p) {
    cpu_code *c = p;
    if (!c || --c->refs > 0) return;
    cpu_state *st = ctx->slot[SLOT_CPU].state;
    for (cpu_code **pp = st ? &st->live : NULL; pp && *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    if (st) kshare_drop(&st->kernels, c);
    sbuf_free(&c->key);
    size_t nk = (size_t)(c->nk ? c->nk : 1);
    if (c->kern)
        for (int32_t i = 0; i < c->nk; i++)
            mem_free(ctx, c->kern[i].types, sizeof(ffi_type *) * (size_t)(c->kern[i].n + 1));
    mem_free(ctx, c->kern, sizeof(cpu_kernel) * nk);
    mem_free(ctx, c->fns, sizeof(void *) * nk);
    llvm_code_free(ctx, c->mc);
    llvm_code_free(ctx, c->mc_late);
    for (int32_t i = 0; i < c->ndeps; i++) cpu_code_free(ctx, c->deps[i]);
    mem_free(ctx, c->deps, sizeof *c->deps * nk);
    mem_free(ctx, c, sizeof *c);
}

/* Kernels compiled late: a softmax's twin of runtime tiles (lkernel.tiling.stash_variant KV_STASH_EXCEEDS), which
 * only a run with an item too long for its constant-tile sibling's stash calls (launch.c,
 * launch_variant_runs): with the default budget, an item of over a thousand rows at 256
 * columns. Compiling it with the program cost 21 of W2's 49 ms on one compile thread, and
 * the same CPU time on any number, for code most programs never run; so the program's code
 * leaves it out, and the first run that needs it compiles it (cpu_late). */
static bool compiled_late(const lkernel *k) { return k->tiling.stash_variant == KV_STASH_EXCEEDS; }

/* sel[i]: whether kernel i is compiled now (late false) or late (late true); NULL with *none
 * set when the program has no late kernel, or on NOMEM with *none clear. */
static bool *late_selection(rj_ctx *ctx, const lprog *lp, bool late, bool *none) {
    int32_t n = 0;
    for (int32_t i = 0; i < lp->nkernels; i++) n += compiled_late(&lp->kernels[i]);
    *none = n == 0;
    bool *sel = n ? mem_alloc(ctx, sizeof(bool) * (size_t)lp->nkernels) : NULL;
    for (int32_t i = 0; sel && i < lp->nkernels; i++) sel[i] = compiled_late(&lp->kernels[i]) == late;
    return sel;
}

/* Kernels whose code another kernel's is (lprog_code_dups: a function's body in each call)
 * are left out of the module: only the first is compiled. A late kernel keeps its own (the
 * late module compiles all of them). *sel (NULL: all) becomes the selection without them. */
static rj_status select_unique(rj_ctx *ctx, const lprog *lp, int32_t *dup, bool **sel) {
    bool any = false;
    for (int32_t i = 0; i < lp->nkernels; i++) {
        if (dup[i] >= 0 && (compiled_late(&lp->kernels[i]) || compiled_late(&lp->kernels[dup[i]]))) dup[i] = -1;
        any |= dup[i] >= 0;
    }
    if (!any) return RJ_OK;
    if (!*sel) {
        if (!(*sel = mem_alloc(ctx, sizeof(bool) * (size_t)lp->nkernels))) return RJ_ERR_NOMEM;
        for (int32_t i = 0; i < lp->nkernels; i++) (*sel)[i] = true;
    }
    for (int32_t i = 0; i < lp->nkernels; i++)
        if (dup[i] >= 0) (*sel)[i] = false;
    return RJ_OK;
}

/* Kernels whose code a live program of the context already has (kshare.c) are left out of
 * the module too: fns[i] is set to that code, and c holds a reference to its owner. Late
 * kernels and repeats (dup) are not looked up. keys[i] keeps each kernel's code key, for
 * share_register once this module's code exists. */
static rj_status share_lookup(rj_ctx *ctx, cpu_state *st, const lprog *lp, cpu_code *c, const int32_t *dup,
                              bool **sel, sbuf *keys) {
    for (int32_t i = 0; i < lp->nkernels; i++) {
        if (dup[i] >= 0 || (*sel && !(*sel)[i])) continue;
        sbuf_init(&keys[i], ctx);
        if (!lprog_kernel_code_key(lp, i, &keys[i])) {
            sbuf_free(&keys[i]);
            continue;
        }
        if (keys[i].failed) return RJ_ERR_NOMEM;
        void *owner = NULL, *fn = kshare_find(&st->kernels, &keys[i], &owner);
        if (!fn) continue;
        if (!*sel) {
            if (!(*sel = mem_alloc(ctx, sizeof(bool) * (size_t)lp->nkernels))) return RJ_ERR_NOMEM;
            for (int32_t k = 0; k < lp->nkernels; k++) (*sel)[k] = true;
        }
        if (!c->deps && !(c->deps = mem_zalloc(ctx, sizeof *c->deps * (size_t)lp->nkernels))) return RJ_ERR_NOMEM;
        (*sel)[i] = false;
        c->fns[i] = fn;
        st->shared++;
        int32_t d = 0;
        while (d < c->ndeps && c->deps[d] != owner) d++;
        if (d == c->ndeps) {
            c->deps[c->ndeps++] = owner;
            ((cpu_code *)owner)->refs++;
        }
    }
    return RJ_OK;
}

/* The kernels c compiled (or loaded) itself, into the context's table. */
static rj_status share_register(rj_ctx *ctx, cpu_state *st, const lprog *lp, cpu_code *c, const bool *sel,
                                sbuf *keys) {
    rj_status s = RJ_OK;
    for (int32_t i = 0; i < lp->nkernels; i++)
        if (!s && keys[i].s && (!sel || sel[i]) && c->fns[i]) s = kshare_add(ctx, &st->kernels, &keys[i], c->fns[i], c);
    return s;
}

/* The key of c's module in the persistent cache: the program's, and which kernels it holds
 * when some ran other programs' code (which live programs a context has decides that). */
static void module_key(const cpu_code *c, const lprog *lp, const bool *sel, sbuf *key) {
    sbuf_put(key, c->key.s, c->key.len);
    if (!c->ndeps) return;
    sbuf_puts(key, "\nkernels:");
    for (int32_t i = 0; i < lp->nkernels; i++) sbuf_putc(key, sel[i] ? '1' : '0');
}

static rj_status prepare_ffi(rj_ctx *ctx, const lprog *lp, cpu_code *c) {
    for (int32_t i = 0; i < lp->nkernels; i++) {
        const lkernel *k = &lp->kernels[i];
        cpu_kernel *ck = &c->kern[i];
        if (k->nparams > MAX_PARAMS)
            return ctx_fail(ctx, RJ_ERR_UNSUPPORTED, "kernel %s has more than %d parameters", k->name,
                            MAX_PARAMS);
        ck->n = k->nparams;
        if (!(ck->types = mem_alloc(ctx, sizeof(ffi_type *) * (size_t)(k->nparams + 1)))) return RJ_ERR_NOMEM;
        for (int32_t a = 0; a < k->nparams; a++) {
            int kind = k->params[a].kind;
            bool ptr = kind == PK_BUF || kind == PK_OFF || kind == PK_LOFF || kind == PK_SCRATCH || kind == PK_PITEM ||
                kind == PK_PSTART || kind == PK_SQOFF;
            ck->types[a] = ptr ? &ffi_type_pointer : &ffi_type_sint64;
        }
        if (ffi_prep_cif(&ck->cif, FFI_DEFAULT_ABI, (unsigned)k->nparams, &ffi_type_void, ck->types) != FFI_OK)
            return ctx_fail(ctx, RJ_ERR_COMPILE, "libffi: cannot prepare the call of kernel %s", k->name);
    }
    return RJ_OK;
}

/* The kernels sel of lp (all where NULL) into *mc and c->fns: loaded from the persistent cache
 * under key when an earlier process stored them there (*hit), else compiled and stored. */
static rj_status module_get(rj_ctx *ctx, struct llvm_jit *j, const lprog *lp, cpu_code *c, const sbuf *key,
                            const bool *sel, llvm_module_code **mc, bool *hit) {
    void *obj = NULL;
    size_t len = 0;
    *hit = false;
    if (c->cacheable && disk_load(ctx, "cpu", key->s, key->len, &obj, &len)) {
        *hit = llvm_load(ctx, j, lp, c->prefix, sel, obj, len, c->fns, mc) == RJ_OK;
        if (!*hit) ctx_clear_error(ctx); /* not loadable after all: compile it */
        mem_free(ctx, obj, len);
        if (*hit) return RJ_OK;
        obj = NULL;
    }
    rj_status s = llvm_object(ctx, j, lp, c->prefix, sel, ctx_threads(ctx), &obj, &len);
    if (!s) s = llvm_load(ctx, j, lp, c->prefix, sel, obj, len, c->fns, mc);
    if (!s && c->cacheable) disk_store(ctx, "cpu", key->s, key->len, obj, len);
    if (obj) mem_free(ctx, obj, len);
    return s;
}

/* The machine code of lp: shared with live code of an equal key, loaded from the persistent
 * cache, or compiled (and stored there). The key names this build of ragjit, so the disk
 * cache is off when the build cannot be identified. */
static rj_status cpu_compile(rj_ctx *ctx, const lprog *lp, void **out) {
    struct llvm_jit *j;
    rj_status s = jit_get(ctx, &j);
    if (s) return s;
    cpu_state *st = ctx->slot[SLOT_CPU].state;
    sbuf key;
    sbuf_init(&key, ctx);
    const char *build = disk_build_id();
    sbuf_printf(&key, "ragjit %d.%d.%d build %s\n", RJ_VERSION_MAJOR, RJ_VERSION_MINOR, RJ_VERSION_PATCH,
                build ? build : "unknown");
    llvm_identity(j, &key);
    lprog_fingerprint(lp, &key);
    if (key.failed) {
        sbuf_free(&key);
        return ctx_fail(ctx, RJ_ERR_NOMEM, "out of memory compiling");
    }
    for (cpu_code *c = st->live; c; c = c->next)
        if (c->key.len == key.len && !memcmp(c->key.s, key.s, key.len)) {
            sbuf_free(&key);
            c->refs++;
            *out = c;
            return RJ_OK;
        }
    cpu_code *c = mem_zalloc(ctx, sizeof *c);
    if (!c) {
        sbuf_free(&key);
        return RJ_ERR_NOMEM;
    }
    c->key = key;
    c->refs = 1;
    c->nk = lp->nkernels;
    size_t nk = (size_t)(c->nk ? c->nk : 1);
    if (!(c->fns = mem_zalloc(ctx, sizeof(void *) * nk)) || !(c->kern = mem_zalloc(ctx, sizeof(cpu_kernel) * nk)))
        s = RJ_ERR_NOMEM;
    /* symbols named by the key's hash: the same in every process that compiles the key */
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < key.len; i++) h = (h ^ (unsigned char)key.s[i]) * 0x100000001b3ull;
    snprintf(c->prefix, sizeof c->prefix, "rj%016llx_", (unsigned long long)h);
    c->cacheable = build != NULL;
    bool none = true;
    bool *sel = s ? NULL : late_selection(ctx, lp, false, &none); /* all but the late kernels */
    if (!s && !sel && !none) s = RJ_ERR_NOMEM;
    int32_t *dup = s ? NULL : mem_alloc(ctx, sizeof(int32_t) * nk);
    if (!s && (!dup || (s = lprog_code_dups(lp, dup)) || (s = select_unique(ctx, lp, dup, &sel))))
        s = s ? s : RJ_ERR_NOMEM;
    sbuf *keys = s ? NULL : mem_zalloc(ctx, sizeof(sbuf) * nk);
    if (!s) s = keys ? share_lookup(ctx, st, lp, c, dup, &sel, keys) : RJ_ERR_NOMEM;
    int32_t nsel = 0;
    for (int32_t i = 0; !s && i < lp->nkernels; i++) nsel += !sel || sel[i];
    bool hit = false;
    if (!s && nsel) { /* else every kernel runs code the context has */
        sbuf mkey;
        sbuf_init(&mkey, ctx);
        module_key(c, lp, sel, &mkey);
        s = mkey.failed ? RJ_ERR_NOMEM : module_get(ctx, j, lp, c, &mkey, sel, &c->mc, &hit);
        sbuf_free(&mkey);
    }
    for (int32_t i = 0; !s && i < lp->nkernels; i++) /* a repeat runs its first's code */
        if (dup[i] >= 0) c->fns[i] = c->fns[dup[i]], st->shared++;
    if (!s) s = share_register(ctx, st, lp, c, sel, keys);
    for (int32_t i = 0; keys && i < lp->nkernels; i++) sbuf_free(&keys[i]);
    if (keys) mem_free(ctx, keys, sizeof(sbuf) * nk);
    if (sel) mem_free(ctx, sel, sizeof(bool) * (size_t)lp->nkernels);
    if (dup) mem_free(ctx, dup, sizeof(int32_t) * nk);
    if (!s) s = prepare_ffi(ctx, lp, c);
    if (s) {
        c->next = NULL;
        cpu_code_free(ctx, c);
        return s;
    }
    if (hit) st->disk_hits++;
    else if (nsel) st->compiles++;
    c->next = st->live;
    st->live = c;
    *out = c;
    return RJ_OK;
}

/* The late kernels of c (compiled_late), compiled (or loaded from the persistent cache, under
 * the program's key and "late") by the first run that calls one of them, under the context's
 * lock, as compiles are; the program's code is otherwise immutable. Runs read a kernel's
 * address with an acquire load: NULL means not compiled yet. A failure (its message set)
 * leaves the kernels to the next run that needs them. */
static rj_status cpu_late(rj_ctx *ctx, const lprog *lp, cpu_code *c, int32_t ki) {
    if (__atomic_load_n(&c->fns[ki], __ATOMIC_ACQUIRE)) return RJ_OK;
    ctx_lock(ctx);
    rj_status s = RJ_OK;
    cpu_state *st = ctx->slot[SLOT_CPU].state;
    struct llvm_jit *j = NULL;
    bool none, hit;
    bool *sel = NULL;
    sbuf key;
    sbuf_init(&key, ctx);
    if (__atomic_load_n(&c->fns[ki], __ATOMIC_ACQUIRE)) goto out; /* another run compiled it */
    if ((s = jit_get(ctx, &j))) goto out;
    if (!(sel = late_selection(ctx, lp, true, &none))) {
        s = none ? ctx_fail(ctx, RJ_ERR_INTERNAL, "kernel %s has no code", lp->kernels[ki].name) : RJ_ERR_NOMEM;
        goto out;
    }
    sbuf_put(&key, c->key.s, c->key.len);
    sbuf_puts(&key, "late kernels\n");
    if (key.failed) {
        s = RJ_ERR_NOMEM;
        goto out;
    }
    if (!(s = module_get(ctx, j, lp, c, &key, sel, &c->mc_late, &hit)))
        __atomic_add_fetch(hit ? &st->late_disk_hits : &st->late_compiles, 1, __ATOMIC_RELAXED);
out:
    ctx_unlock(ctx);
    sbuf_free(&key);
    if (sel) mem_free(ctx, sel, sizeof(bool) * (size_t)lp->nkernels);
    return s;
}

/* LLVM IR, optimised IR and assembly come from the same steps: a request fills the texts up
 * to the stage asked for. */
static rj_status cpu_dump(rj_ctx *ctx, const lprog *lp, const void *code, int st, char **text) {
    RJ_UNUSED(code);
    struct llvm_jit *j;
    rj_status s = jit_get(ctx, &j);
    if (s) return s;
    char *ir = NULL, *opt = NULL, *asm_text = NULL;
    s = llvm_dump(ctx, j, lp, &ir, st >= STAGE_LLVM_OPT ? &opt : NULL, st >= STAGE_ASM ? &asm_text : NULL);
    if (s) return s;
    char **mine[] = {&text[STAGE_LLVM], &text[STAGE_LLVM_OPT], &text[STAGE_ASM]};
    char *made[] = {ir, opt, asm_text};
    for (int i = 0; i < 3; i++) {
        if (*mine[i]) rj_string_free(ctx, made[i]);
        else *mine[i] = made[i];
    }
    return RJ_OK;
}

/* ---- run ------------------------------------------------------------------------------------- */

static void call_chunk(void *arg, int64_t chunk, int worker) {
    const run *r = arg;
    int64_t lo = r->pl->chunk[chunk], hi = r->pl->chunk[chunk + 1];
    if (lo >= hi) return;
    uint64_t vals[MAX_PARAMS];
    void *argv[MAX_PARAMS];
    launch_args(r->v, r->k, r->pl, r->m, lo, hi, worker, r->nt, vals);
    for (int32_t a = 0; a < r->k->nparams; a++) argv[a] = &vals[a];
    ffi_call((ffi_cif *)&r->code->kern[r->ki].cif, FFI_FN(r->code->fns[r->ki]), NULL, argv);
}

static bool is_temp(const lbuf *lb) {
    return lb->kind != LB_CHUNK && lb->kind != LB_INPUT && lb->kind != LB_OUTPUT;
}

/* Offsets of the temporaries in one arena, planned by liveness (run_plan.live): largest first,
 * each at the lowest offset where no temporary placed before it and alive in a kernel of its
 * span lies (first fit over the spans that meet; temporaries of one kernel never share, nor
 * does one that a kernel writes with one a later kernel still reads). One of 64 KiB or more
 * starts on a multiple of 4096 bytes: in memory half a page past a page, as the arena starts
 * (host_block_fresh) and as outputs do (util/mem.c: no 4K aliasing against the inputs). size[i]: a
 * temporary's bytes (64-byte multiples), -1 for other buffers. work: room for 4 nbufs. Returns
 * the arena's bytes, and the offsets in off. */
static int64_t temp_at(int64_t at, int64_t size) {
    return size >= (64 << 10) ? (at + 4095) / 4096 * 4096 : at;
}

static int64_t place_temps(const run_plan *pl, const int64_t *size, int64_t *off, int64_t *work) {
    int64_t *order = work, *conf = work + pl->nbufs, total = 0;
    int32_t n = 0;
    for (int32_t i = 0; i < pl->nbufs; i++)
        if (size[i] >= 0) order[n++] = i;
    for (int32_t i = 1; i < n; i++) /* by size, largest first; ties in buffer order */
        for (int32_t j = i; j > 0 && size[order[j]] > size[order[j - 1]]; j--) {
            int64_t t = order[j];
            order[j] = order[j - 1], order[j - 1] = t;
        }
    for (int32_t i = 0; i < n; i++) {
        int64_t t = order[i], at = temp_at(0, size[t]);
        const int32_t *lt = &pl->live[2 * t];
        int32_t nc = 0;
        for (int32_t j = 0; j < i; j++) { /* placed before t and alive with it, by start */
            const int32_t *lu = &pl->live[2 * order[j]];
            if (lt[0] >= 0 && lu[0] >= 0 && (lt[1] < lu[0] || lu[1] < lt[0])) continue;
            int32_t y = nc++;
            for (; y > 0 && conf[2 * (y - 1)] > off[order[j]]; y--)
                conf[2 * y] = conf[2 * (y - 1)], conf[2 * y + 1] = conf[2 * (y - 1) + 1];
            conf[2 * y] = off[order[j]], conf[2 * y + 1] = off[order[j]] + size[order[j]];
        }
        for (int32_t x = 0; x < nc && conf[2 * x] < at + size[t]; x++)
            if (conf[2 * x + 1] > at) at = temp_at(conf[2 * x + 1], size[t]);
        off[t] = at;
        if (at + size[t] > total) total = at + size[t];
    }
    return total;
}

/* The temporaries' addresses in a: sizes from the run's dims, placed in the binding's arena
 * (kept and grown across runs), counted against the memory limit as one block. */
static rj_status host_temps(const run_view *v, const lprog *lp, host_mem *hm, uint64_t *a, bool dry) {
    rj_ctx *ctx = v->ctx;
    size_t per = sizeof(int64_t) * 6;
    if (lp->nbufs > hm->nplace) {
        int64_t *pl = mem_realloc(ctx, hm->place, per * (size_t)(hm->nplace ? hm->nplace : 1), per * (size_t)lp->nbufs);
        if (!pl) return RJ_ERR_NOMEM;
        hm->place = pl;
        hm->nplace = lp->nbufs;
    }
    int64_t *size = hm->place, *off = size + lp->nbufs;
    for (int32_t i = 0; i < lp->nbufs; i++) {
        size[i] = -1;
        if (!is_temp(&lp->bufs[i])) continue;
        int64_t elems;
        size_t bytes;
        rj_status s = launch_buf_elems(v, i, &elems);
        if (s) return s;
        if (!bytes_of(elems, (size_t)v->plan->buf[i].es, &bytes) || bytes > (size_t)INT64_MAX / 2)
            return ctx_fail(ctx, RJ_ERR_OVERFLOW, "temporary %d is too large", lp->bufs[i].index);
        size[i] = ((int64_t)bytes + 63) / 64 * 64;
    }
    int64_t total = place_temps(v->plan, size, off, off + lp->nbufs);
    rj_status s = run_reserve(v, total, "the temporaries", -1);
    if (s) return s;
    char *arena = cpu_block_get(v, &hm->arena, (size_t)(total ? total : 64), dry, &s);
    if (!arena) return s;
    for (int32_t i = 0; i < lp->nbufs; i++)
        if (size[i] >= 0) a[i] = (uint64_t)(uintptr_t)(arena + off[i]);
    hm->temp_bytes = total;
    return RJ_OK;
}

/* Host addresses of every buffer, offsets and logical offsets. */
static rj_status host_addresses(const run_view *v, const lprog *lp, host_mem *hm, launch_mem *m, bool dry) {
    rj_ctx *ctx = v->ctx;
    size_t n = (size_t)lp->nbufs + 2 * (size_t)v->plan->nsym + (size_t)v->plan->npairs;
    uint64_t *a = host_block_get(ctx, &hm->addrs, sizeof(uint64_t) * (n ? n : 1));
    if (!a) return RJ_ERR_NOMEM;
    for (int32_t i = 0; i < lp->nbufs; i++) {
        const lbuf *lb = &lp->bufs[i];
        a[i] = lb->kind == LB_INPUT ? (uint64_t)(uintptr_t)v->in[lb->index].data
             : lb->kind == LB_OUTPUT ? (uint64_t)(uintptr_t)v->out[lb->index].data
             : 0; /* chunks: per worker, from the GEMM's chunk loop (run_gemm); temporaries below */
    }
    rj_status s = host_temps(v, lp, hm, a, dry);
    if (s) return s;
    uint64_t *off = a + lp->nbufs, *loff = off + v->plan->nsym, *sq = loff + v->plan->nsym;
    for (int32_t y = 0; y < v->plan->nsym; y++) {
        off[y] = (uint64_t)(uintptr_t)v->sym[y].off;
        loff[y] = (uint64_t)(uintptr_t)v->cls[y].loff;
    }
    for (int32_t k = 0; k < v->plan->npairs; k++) sq[k] = (uint64_t)(uintptr_t)v->pair[k].sqoff;
    *m = (launch_mem){.buf = a, .off = off, .loff = loff, .sqoff = sq};
    return RJ_OK;
}

/* Streaming stores pay off when the kernel's outputs are larger than the threshold. */
static bool streams(const run_view *v, const lprog *lp, const lkernel *k) {
    if (!k->has_nt) return false;
    int64_t bytes = 0;
    for (int32_t a = 0; a < k->nparams; a++) {
        const lparam *pm = &k->params[a];
        if (pm->kind != PK_BUF || !pm->written) continue;
        const lbuf *lb = &lp->bufs[pm->ref];
        if (lb->kind == LB_OUTPUT) bytes += v->out[lb->index].numel * v->plan->buf[pm->ref].es;
    }
    return bytes > cpu_stream_threshold(v->ctx);
}

/* A run, or with dry everything of one but the kernels (cpu_prepare; the copies of constant
 * weights are made): the same walk sizes the scratch, so that what a prepared binding holds is
 * what its runs use. */
static rj_status cpu_exec(const run_view *v, bool dry) {
    rj_ctx *ctx = v->ctx;
    const lprog *lp = v->lp;
    const cpu_code *code = v->code;
    run_mem *rm = v->mem;
    if (!rm->host && !(rm->host = mem_zalloc(ctx, sizeof(host_mem)))) return RJ_ERR_NOMEM;
    launch_mem m;
    rj_status s = host_addresses(v, lp, rm->host, &m, dry);
    if (!s) s = cpu_consts_settle(v, dry);
    v->stats->temp_bytes = rm->host->temp_bytes;
    int threads = ctx_threads(ctx);
    const cpu_state *st = ctx->slot[SLOT_CPU].state;
    launch_opts o = {.workers = threads < MAX_THREADS ? threads : MAX_THREADS,
                     .chunks_per_worker = CHUNKS_PER_THREAD, .small_work = SMALL_WORK,
                     .tile_bytes = cpu_stash_bytes(st, threads), .split_items = true, .dry = dry};
    int64_t scratch_reserved = 0;
    for (int32_t ki = 0; !s && ki < lp->nkernels; ki++) {
        const lkernel *k = &lp->kernels[ki];
        if (k->inner_only) continue; /* run by its GEMM's chunk loop */
        if (k->gemm.on) {
            s = cpu_run_gemm(code, lp, ki, v, &o, &m, &scratch_reserved);
            continue;
        }
        if (!launch_variant_runs(v, k, &o)) continue; /* its twin runs */
        launch_plan pl;
        if ((s = launch_plan_kernel(v, k, &o, &pl)) || pl.units <= 0) continue;
        if (compiled_late(k) && (s = cpu_late(ctx, lp, (cpu_code *)code, ki))) continue;
        if (pl.scratch_bytes) {
            int64_t bytes;
            if (!mul_i64(pl.scratch_bytes, pl.workers, &bytes))
                return ctx_fail(ctx, RJ_ERR_OVERFLOW, "kernel %s: scratch size overflows", k->name);
            void *sc = cpu_run_scratch(v, &o, bytes, &scratch_reserved, "per-thread scratch", &s);
            if (!sc) {
                if (s) return s;
                continue; /* dry */
            }
            m.scratch = (uint64_t)(uintptr_t)sc;
        }
        if (dry) continue;
        run r = {.code = code, .k = k, .ki = ki, .v = v, .pl = &pl, .m = &m, .nt = streams(v, lp, k)};
        pool_run(ctx, st->pool, pl.nchunks, pl.workers, call_chunk, &r);
    }
    if (!s && dry && scratch_reserved) cpu_block_get(v, &rm->host->scratch, (size_t)scratch_reserved, true, &s);
    if (!s && !dry && lp->nchecks) s = index_verdict(v, (const int64_t *)(uintptr_t)m.buf[lp->checks_buf]);
    if (!dry) rm->host->ran = true;
    v->stats->const_bytes = rm->host->const_bytes;
    return s;
}

static rj_status cpu_run(const run_view *v) {
    return cpu_exec(v, false);
}

/* The workers a run will want, started; a dry run (cpu_exec); the outputs ragjit placed (in
 * resolve.c, which knows no pool) touched like the rest. */
static rj_status cpu_prepare(const run_view *v) {
    const cpu_state *st = v->ctx->slot[SLOT_CPU].state;
    int threads = ctx_threads(v->ctx);
    if (st && !v->ctx->parallel) pool_start(st->pool, threads < MAX_THREADS ? threads : MAX_THREADS);
    rj_status s = cpu_exec(v, true);
    for (int32_t i = 0; !s && i < v->plan->noutputs; i++) {
        const run_out *o = &v->out[i];
        const char *own = o->own;
        if (own && (const char *)o->data >= own && (const char *)o->data < own + o->own_bytes)
            cpu_touch(v->ctx, o->own, o->own_bytes);
    }
    return s;
}

const backend backend_cpu = {
    .name = "cpu",
    .target = RJ_TARGET_CPU,
    .available = cpu_available,
    .compile = cpu_compile,
    .code_free = cpu_code_free,
    .dump = cpu_dump,
    .run = cpu_run,
    .prepare = cpu_prepare,
};
