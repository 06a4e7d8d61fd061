/*
 * kernel.c (SIMT) — a kernel: its signature, the thread's share of the launch, its locals.
 *
 * Launch scheme. A kernel processes the unit range [lo, hi) given by its PK_LO/PK_HI
 * parameters. On the GPU every thread (or every group of threads, where the kernel's launch
 * shape has groups: group.c) takes one contiguous slice of it: with T of them in the (1-D)
 * grid, number t handles [lo + t*c, lo + (t+1)*c) clipped to hi, c = ceil((hi-lo)/T). The
 * generated code shadows lo/hi with the slice, so the loop-IR body runs unchanged; for UD_ROWS
 * kernels it also recomputes blo/bhi for the slice by binary search over the class's logical
 * offsets (searching within the whole launch's [blo, bhi], which the runtime passes, so the
 * kernel needs no batch size). Per-thread scratch is one slice of a shared array: each scratch
 * pointer parameter is followed by an extra `stride` parameter (elements per slice). PK_NT is
 * accepted and ignored: there are no streaming stores here. The slice scheme keeps correctness
 * independent of the grid size, so the runtime can pick any launch shape. Both spellings take
 * the same parameters in the same order, so one launch planner fills them. A kernel whose run
 * found its device offsets bad (PK_ERR) returns at once.
 *
 * A thread-scope local whose storage a parameter passes in is that slice of the scratch array;
 * other locals are arrays of their constant size, block-shared (`__shared__`, `__local`) for
 * block scope. Variables are locals declared at the top of the kernel; those no statement
 * reads are left out, with their assignments (NVRTC would warn, and the values are pure).
 */
#include "emit.h"

/* Text for a // comment: no line breaks, and no trailing backslash that would splice lines. */
static void put_comment_text(sbuf *b, const char *s) {
    for (; *s; s++) sbuf_putc(b, *s == '\n' || *s == '\r' ? ' ' : *s == '\\' ? '/' : *s);
}

static bool mark_read(const lkernel *k, int32_t id, void *ud) {
    cem *C = ud;
    if (k->ex[id].kind == LX_VAR) C->vread[k->ex[id].ref] = 1;
    return false;
}

/* Marks the variables the statements read (and loop variables, and what a reduce updates)
 * in vread; one walk for the kernel, so each expression is visited once. */
static void mark_reads(cem *C, int32_t s) {
    for (; s >= 0; s = C->k->st[s].next) {
        const ls *st = &C->k->st[s];
        int32_t ex[2];
        int n = ls_exprs(st, ex);
        for (int i = 0; i < n; i++) lx_visit(C->k, ex[i], mark_read, C, C->seen, C->walk);
        if (st->kind == LS_FOR || st->kind == LS_REDUCE) C->vread[st->var] = 1;
        if (st->kind == LS_FOR || st->kind == LS_IF) {
            mark_reads(C, st->body);
            mark_reads(C, st->els);
        }
    }
}

static const char *const domain_text[] = {"logical rows of a ragged class",
                                          "(item, inner tile) pairs of a ragged class",
                                          "flattened dense indices",
                                          "(piece of an item, inner tile) pairs of a ragged class"};

static int32_t find_param(const lkernel *k, int kind, int32_t ref) {
    for (int32_t i = 0; i < k->nparams; i++)
        if (k->params[i].kind == kind && (ref < 0 || k->params[i].ref == ref)) return i;
    return -1;
}

static void signature(cem *C) {
    const lkernel *k = C->k;
    sbuf *b = C->b;
    const spelling *sp = C->sp;
    sbuf_puts(b, sp->kernel);
    /* registers for half the multiprocessor's 2048 threads: enough warps to keep loads in
     * flight, and 64 registers per thread at 256 threads a block (full occupancy would allow
     * 32, and ptxas then spills the math functions' slow paths); a kernel writing many
     * buffers at once (a fused fan-out) keeps many values live, and gets twice that, as does
     * a product's loop around inlined producers (lkernel.heavy); a kernel that keeps rows in
     * registers names its own count (launch_shape.sm_threads) */
    int nbuf = 0;
    for (int32_t i = 0; i < k->nparams; i++) nbuf += k->params[i].kind == PK_BUF;
    int knob = cem_knob("SM_THREADS"); /* an experiment's plan for the plain kernels (knobs.c) */
    int threads = k->launch.sm_threads > 0 ? k->launch.sm_threads : nbuf > 16 || k->heavy ? 512 : knob > 0 ? knob : 1024;
    if (sp->bounds && k->launch.simt && k->launch.block > 0)
        sbuf_printf(b, sp->bounds, (int)k->launch.block,
                    k->launch.block >= threads ? 1 : (int)(threads / k->launch.block));
    sbuf_printf(b, "%s(", k->name);
    for (int32_t i = 0; i < k->nparams; i++) {
        const lparam *p = &k->params[i];
        sbuf_puts(b, i ? ",\n        " : "");
        switch (p->kind) {
        case PK_BUF:
            sbuf_printf(b, "%s%s%s *%s", sp->global, p->written ? "" : "const ", mtype(C, p->dtype), sp->restrict_kw);
            cem_put_param(C, i);
            break;
        case PK_OFF:
        case PK_LOFF:
        case PK_PITEM:
        case PK_PSTART:
        case PK_SQOFF:
            sbuf_printf(b, "%sconst %s *%s", sp->global, sp->i64, sp->restrict_kw);
            cem_put_param(C, i);
            break;
        case PK_ERR:
            sbuf_printf(b, "%sconst %s *", sp->global, sp->u32);
            cem_put_param(C, i);
            break;
        case PK_SCRATCH:
            sbuf_printf(b, "%s%s *%s", sp->global, mtype(C, p->dtype), sp->restrict_kw);
            cem_put_param(C, i);
            sbuf_printf(b, "_base, %s ", sp->i64);
            cem_put_param(C, i);
            sbuf_puts(b, "_stride");
            break;
        case PK_LO:
        case PK_HI:
        case PK_BLO:
        case PK_BHI:
            sbuf_printf(b, "%s ", sp->i64);
            cem_put_param(C, i);
            sbuf_puts(b, "_all");
            break;
        default:
            sbuf_printf(b, "%s ", sp->i64);
            cem_put_param(C, i);
            break;
        }
    }
    sbuf_puts(b, ")\n");
}

/* The thread's slice of the launch: shadows lo/hi (and blo/bhi, scratch). */
static bool prologue(cem *C) {
    const lkernel *k = C->k;
    sbuf *b = C->b;
    int32_t lo = find_param(k, PK_LO, -1), hi = find_param(k, PK_HI, -1);
    int32_t blo = find_param(k, PK_BLO, -1), bhi = find_param(k, PK_BHI, -1);
    const spelling *sp = C->sp;
    const char *i64 = sp->i64;
    int32_t err = find_param(k, PK_ERR, -1);
    if (err >= 0) { /* the run's device offsets failed their check: touch nothing */
        sbuf_puts(b, "    if (");
        cem_put_param(C, err);
        sbuf_puts(b, " && *");
        cem_put_param(C, err);
        sbuf_puts(b, " != 0xffffffffu) return;\n");
    }
    if (C->group <= 1) {
        sbuf_printf(b, "    const %s rj_tid = (%s)%s * %s + %s;\n", i64, i64, sp->group_id, sp->local_size,
                    sp->local_id);
        sbuf_printf(b, "    const %s rj_nth = (%s)%s * %s;\n", i64, i64, sp->num_groups, sp->local_size);
    } else { /* rj_tid, rj_nth: the group and the number of groups; rj_lane: the thread in it */
        sbuf_printf(b, "    const %s rj_gtid = (%s)%s * %s + %s;\n", i64, i64, sp->group_id, sp->local_size,
                    sp->local_id);
        sbuf_printf(b, "    const %s rj_tid = rj_gtid / %d;\n", i64, (int)C->group);
        sbuf_printf(b, "    const %s rj_lane = rj_gtid %% %d;\n", i64, (int)C->group);
        sbuf_printf(b, "    const %s rj_nth = (%s)%s * %s / %d;\n", i64, i64, sp->num_groups, sp->local_size,
                    (int)C->group);
        if (C->shuffle && C->group >= 32)
            sbuf_puts(b, "    const unsigned rj_mask = 0xffffffffu;\n");
        else if (C->shuffle) /* the group's lanes of its warp */
            sbuf_printf(b, "    const unsigned rj_mask = ((1u << %d) - 1u) << ((unsigned)rj_gtid & %uu);\n",
                        (int)C->group, 31u & ~(unsigned)(C->group - 1));
    }
    if (lo >= 0 && hi >= 0) {
        sbuf_printf(b, "    const %s rj_n = ", i64);
        cem_put_param(C, hi);
        sbuf_puts(b, "_all - ");
        cem_put_param(C, lo);
        sbuf_puts(b, "_all;\n    if (rj_n <= 0) return;\n");
        sbuf_printf(b, "    const %s rj_chunk = (rj_n + rj_nth - 1) / rj_nth;\n", i64);
        for (int w = 0; w < 2; w++) {
            sbuf_printf(b, "    const %s ", i64);
            cem_put_param(C, w ? hi : lo);
            sbuf_puts(b, " = ");
            cem_put_param(C, lo);
            sbuf_puts(b, "_all + ");
            cem_put_helper(C, "rj_min", RJ_I64);
            sbuf_puts(b, w ? "((rj_tid + 1) * rj_chunk, rj_n);\n" : "(rj_tid * rj_chunk, rj_n);\n");
        }
        sbuf_puts(b, "    if (");
        cem_put_param(C, lo);
        sbuf_puts(b, " >= ");
        cem_put_param(C, hi);
        sbuf_puts(b, ") return;\n");
    } else {
        if (lo >= 0 || hi >= 0 || blo >= 0 || bhi >= 0) return false;
        sbuf_puts(b, "    if (rj_tid != 0) return; // no unit range: one thread runs it all\n");
    }
    if (blo >= 0 || bhi >= 0) {
        int32_t loff = k->domain == UD_ROWS ? find_param(k, PK_LOFF, k->dom_class) : -1;
        if (blo < 0 || bhi < 0 || loff < 0) return false;
        for (int w = 0; w < 2; w++) {
            sbuf_printf(b, "    const %s ", i64);
            cem_put_param(C, w ? bhi : blo);
            sbuf_printf(b, " = %s(", w ? "rj_lower_item" : "rj_upper_item");
            cem_put_param(C, loff);
            sbuf_puts(b, ", ");
            cem_put_param(C, blo);
            sbuf_puts(b, "_all, ");
            cem_put_param(C, bhi);
            sbuf_puts(b, "_all, ");
            cem_put_param(C, w ? hi : lo);
            sbuf_puts(b, ");\n");
        }
    }
    for (int32_t i = 0; i < k->nparams; i++) {
        if (k->params[i].kind != PK_SCRATCH) continue;
        sbuf_printf(b, "    %s%s *const ", sp->global, mtype(C, k->params[i].dtype));
        cem_put_param(C, i);
        sbuf_puts(b, " = ");
        cem_put_param(C, i);
        sbuf_puts(b, "_base + rj_tid * ");
        cem_put_param(C, i);
        sbuf_puts(b, "_stride;\n");
    }
    return true;
}

/* Locals the kernel declares itself: per-thread arrays, and block-shared ones for block scope.
 * A block-scope local cannot live in per-thread scratch: false for the inconsistency. */
static bool declare_locals(cem *C) {
    const lkernel *k = C->k;
    for (int32_t l = 0; l < k->nlocals; l++) {
        const llocal *lc = &k->locals[l];
        if (lc->param >= 0) {
            if (lc->scope == LL_BLOCK) return false;
            continue;
        }
        sbuf_printf(C->b, "    %s%s ", lc->scope == LL_BLOCK ? C->sp->shared : "", mtype(C, lc->dtype));
        cem_put_mem(C, MEM_LOCAL, l);
        sbuf_printf(C->b, "[%lld];\n", (long long)lc->elems);
    }
    return true;
}

bool cem_kernel(cem *C, const lkernel *k) {
    sbuf *b = C->b;
    C->k = k;
    C->depth = 1;
    C->group = k->launch.simt && k->launch.group > 1 ? k->launch.group : 1;
    C->shuffle = C->sp->shuffle && C->group <= 32;
    C->nred = 0;
    size_t ne = (size_t)(k->nex ? k->nex : 1), nv = (size_t)(k->nvars ? k->nvars : 1);
    bool ok = cem_binder_init(C, k);
    C->seen = mem_zalloc(C->ctx, sizeof(uint32_t) * ne);
    C->vset = mem_zalloc(C->ctx, nv);
    C->vread = mem_zalloc(C->ctx, nv);
    C->walk = 0;
    ok = ok && C->seen && C->vset && C->vread;
    bool shape = true;
    if (ok) {
        sbuf_puts(b, "\n// ");
        put_comment_text(b, k->name);
        sbuf_puts(b, ": ");
        put_comment_text(b, k->what);
        sbuf_printf(b, "\n// units: %s\n", domain_text[k->domain <= UD_PIECES ? k->domain : UD_DENSE]);
        signature(C);
        sbuf_puts(b, "{\n");
        shape = prologue(C) && declare_locals(C);
        cem_declare_group_arrays(C);
        /* only variables something reads are declared: NVRTC warns about the others, and
         * assignments to them are dropped (pure expressions, nothing else changes) */
        C->walk++;
        mark_reads(C, k->body);
        for (int32_t v = 0; v < k->nvars; v++) {
            if (!C->vread[v]) continue;
            sbuf_printf(b, "    %s ", ctype(C, k->vars[v].type));
            cem_put_var(C, v);
            sbuf_puts(b, " = 0;\n");
        }
        if (shape) cem_block(C, k->body);
        sbuf_puts(b, "}\n");
    }
    lx_binder_free(&C->bd);
    mem_free(C->ctx, C->seen, sizeof(uint32_t) * ne);
    mem_free(C->ctx, C->vset, nv);
    mem_free(C->ctx, C->vread, nv);
    if (!ok) return false; /* out of memory: recorded by mem_alloc */
    if (!shape) {
        ctx_fail(C->ctx, RJ_ERR_INTERNAL, "%s emit: kernel %s has an inconsistent unit range "
                 "(lo/hi/blo/bhi/offsets parameters) or a block-scope local in scratch", C->sp->lang,
                 k->name);
        return false;
    }
    if (C->bad) {
        ctx_fail(C->ctx, RJ_ERR_INTERNAL, "%s emit: kernel %s uses an operation the %s "
                 "backend does not implement", C->sp->lang, k->name, C->sp->lang);
        return false;
    }
    return true;
}
