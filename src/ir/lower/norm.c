/*
 * lower/norm.c — layer_norm and rms_norm, one unit per normalised row (two on the CPU over the
 * rows of a jagged tensor: norm_pairs).
 *
 * A row's statistics are summed in one pass (shifted by its first element; summed again where
 * that loses bits or overflows: the essay above norm_row), then the row is written. On the CPU a row
 * of at most ROW_STASH elements is kept from the statistics pass for the write pass.
 */
#include "kit.h"

typedef struct norm_ctx {
    const node *root, *x;
    int lead;          /* first normalised dim */
} norm_ctx;

typedef struct norm_pass {
    norm_ctx *nc;
    int pass;          /* 0: statistics, 1: write */
    int32_t acc, acc2; /* sum of (x s - k) and of its squares (layer_norm); of (x s)^2 (rms_norm) */
    int32_t part, part2; /* the same over one block of the innermost dim (norm_stats_row) */
    int32_t c, c2;     /* their compensations (kahan_add) */
    int32_t shift;     /* variable k: the shift of the sums (norm_unit) */
    int32_t scale;     /* variable s: 1, or the power of two that keeps a big row's squares finite */
    bool scaled;       /* the statistics pass reads s (norm_unit's second try), else takes s = 1 */
    int32_t mean, rstd; /* variables: m1, the mean of x s - k (layer_norm), and 1 / sqrt(var + eps) */
    int32_t row;       /* layer_norm of one line of a constant length: a thread-local array the
                        * statistics passes store x s - k in, which the write pass reads (-1: none) */
    char sfx[4];       /* the variables' names end in it: "" or, for a pair's second row, "_2" */
} norm_pass;

/* A variable of the row np works on: name, and np's suffix. */
static int32_t pvar(lower *L, const norm_pass *np, const char *name, rj_dtype t) {
    char n[24];
    snprintf(n, sizeof n, "%s%s", name, np->sfx);
    return newvar(L, n, t);
}

/* The write pass's element from r, the row's x s - k (layer_norm) or x (rms_norm):
 * layer_norm ((x s - k) - m1) rstd, not (x - (k + m1)) rstd: x - k is exact wherever x is within
 * a factor of 2 of k, and m1 keeps the mean's digits below k's ulp, which a mean rounded to f32
 * loses (data around 1e4 with a spread of 1: a shift of 1e-3 in every result). The subtraction
 * costs a little; an fma of (x s - k), rstd and -m1 rstd would save it, but its -m1 rstd waits
 * for rstd (bench/NOTES.md, "Row norms"). rms_norm: x (s rstd). Then the weight and bias. */
static void norm_write(lower *L, blk *b, at *a, const norm_pass *np, int32_t r) {
    const node *root = np->nc->root;
    rj_dtype t = root->dtype;
    int32_t y = root->op == RJ_OP_LAYER_NORM
                    ? xbin(L, RJ_OP_MUL, t, xbin(L, RJ_OP_SUB, t, r, xvar(L, np->mean)), xvar(L, np->rstd))
                    : xbin(L, RJ_OP_MUL, t, r, xvar(L, np->rstd));
    int k = 1;
    if (root->ival & 1) y = xbin(L, RJ_OP_MUL, t, y, operand(L, root, k++, a, t));
    if (root->ival & 2) y = xbin(L, RJ_OP_ADD, t, y, operand(L, root, k++, a, t));
    store_group(L, b, (int32_t)(root - L->g->nodes), y, a, ROWS_ANY, LF_NT);
}

static void norm_inner(lower *L, blk *b, at *a, void *ud) {
    norm_pass *np = ud;
    const node *root = np->nc->root;
    rj_dtype t = root->dtype;
    bool layer = root->op == RJ_OP_LAYER_NORM;
    int32_t at_row = np->row >= 0 ? a->idx[np->nc->x->rank - 1] : -1;
    if (np->pass == 1 && np->row >= 0) { /* x s - k (rms_norm: x) as the statistics pass left it */
        norm_write(L, b, a, np, xlocal(L, np->row, at_row));
        return;
    }
    L->memo_n = 0;
    int32_t v = xcast(L, t, value(L, root->in[0], a));
    /* layer_norm: x s - k in one fma (with s = 1, x - k rounded once) */
    int32_t c = !layer ? -1
              : np->pass == 0 && !np->scaled ? xbin(L, RJ_OP_SUB, t, v, xvar(L, np->shift))
              : xfma(L, t, v, xvar(L, np->scale), xun(L, RJ_OP_NEG, t, xvar(L, np->shift)));
    if (np->pass == 0) {
        if (np->row >= 0) s_store_local(L, b, np->row, at_row, layer ? c : v);
        if (layer) {
            s_accum(L, b, np->part, RJ_OP_ADD, c);
            s_accum_fma(L, b, np->part2, c, c);
        } else {
            int32_t vs = np->scaled ? xbin(L, RJ_OP_MUL, t, v, xvar(L, np->scale)) : v;
            s_accum_fma(L, b, np->part2, vs, vs);
        }
    } else {
        norm_write(L, b, a, np, layer ? c : v);
    }
}

/* The statistics of one line of the innermost normalised dim: summed by the vectorised loop
 * in blocks of SUM_BLOCK elements into partials, which are added to the row's sums with
 * compensation (kahan_add), so the statistics of a long row are as accurate as a sum's. */
static void norm_stats_row(lower *L, blk *b, at *a, void *ud) {
    norm_pass *np = ud;
    const node *root = np->nc->root, *x = np->nc->x;
    rj_dtype t = root->dtype;
    int d = x->rank - 1;
    bool layer = root->op == RJ_OP_LAYER_NORM;
    int32_t ext = x->dims[d] == 1 ? xi(L, 1) : xsize(L, x->dims[d]);
    bool one_block = x->dims[d] >= 0 && x->dims[d] <= SUM_ONE_BLOCK;
    blk *into = b, bb = NEWBLK;
    int32_t fb = -1, lo = xi(L, 0), hi = ext;
    if (!one_block) {
        int32_t vkb = newvar(L, "kb", RJ_I64);
        int32_t nb = xbin(L, LOP_IDIV, RJ_I64, xadd(L, ext, xi(L, SUM_BLOCK - 1)), xi(L, SUM_BLOCK));
        fb = s_for(L, b, vkb, xi(L, 0), nb, LM_SERIAL);
        lo = xmul(L, xvar(L, vkb), xi(L, SUM_BLOCK));
        hi = xmin(L, xadd(L, lo, xi(L, SUM_BLOCK)), ext);
        into = &bb;
    }
    if (layer) s_set(L, into, np->part, xconst(L, t, 0));
    s_set(L, into, np->part2, xconst(L, t, 0));
    char name[16];
    snprintf(name, sizeof name, "d%d", d);
    int32_t vk = newvar(L, name, RJ_I64);
    blk ib = NEWBLK;
    int32_t fk = s_for(L, into, vk, lo, hi, LM_LANES);
    a->idx[d] = xvar(L, vk);
    L->lanes++;
    norm_inner(L, &ib, a, np);
    L->lanes--;
    close_body(L, fk, &ib);
    if (layer) kahan_add(L, into, t, (place){-1, np->acc}, (place){-1, np->c}, xvar(L, np->part));
    kahan_add(L, into, t, (place){-1, np->acc2}, (place){-1, np->c2}, xvar(L, np->part2));
    if (fb >= 0) close_body(L, fb, &bb);
}

/* The statistics of one row into np's sums, shifted by k and scaled by s (norm_unit). */
static void norm_stats(lower *L, blk *b, at *a, norm_pass *np) {
    const norm_ctx *nc = np->nc;
    const node *root = nc->root, *x = nc->x;
    rj_dtype t = root->dtype;
    bool layer = root->op == RJ_OP_LAYER_NORM;
    int last = x->rank - 1;
    /* one line of a size known to fit one block: the statistics are its sums, as they are */
    bool plain = nc->lead == last && x->dims[last] >= 0 && x->dims[last] <= SUM_ONE_BLOCK;
    if (layer) s_set(L, b, np->acc, xconst(L, t, 0));
    s_set(L, b, np->acc2, xconst(L, t, 0));
    np->pass = 0;
    if (plain) {
        np->part = np->acc, np->part2 = np->acc2;
        loops(L, b, a, x->dims, nc->lead, x->rank, norm_inner, np);
        return;
    }
    if (np->c < 0) { /* the first statistics pass of the row makes them, the second reuses them */
        np->part = pvar(L, np, "part", t);
        np->part2 = pvar(L, np, "part2", t);
        np->c = pvar(L, np, "c", t);
        np->c2 = pvar(L, np, "c2", t);
    }
    if (layer) s_set(L, b, np->c, xconst(L, t, 0));
    s_set(L, b, np->c2, xconst(L, t, 0));
    loops_v(L, b, a, x->dims, nc->lead, last, norm_stats_row, np, false);
    if (layer) s_set(L, b, np->acc, xbin(L, RJ_OP_SUB, t, xvar(L, np->acc), xvar(L, np->c)));
    s_set(L, b, np->acc2, xbin(L, RJ_OP_SUB, t, xvar(L, np->acc2), xvar(L, np->c2)));
}

/* A norm over one line of at most this many elements keeps the line's x s - k (rms_norm: x),
 * in f32, in a thread-local array (on the stack) from its statistics pass for the write pass,
 * which then neither reads x again nor recomputes it (a fused producer: layer_norm(h + a); a
 * 16-bit input's widening) nor layer_norm's fma: the write pass is the subtraction of the mean,
 * the scaling and the store. CPU only: on a SIMT target the array would be each thread's registers or local
 * memory. */
#define ROW_STASH 4096

/* One row: its statistics in one pass over the normalised block, then the write pass.
 *
 * layer_norm's variance comes from sums shifted by k, the row's first element,
 *   var = E[(x - k)^2] - E[x - k]^2,
 * which avoids the cancellation of E[x^2] - E[x]^2 whenever k is near the mean, and saves
 * the separate pass a textbook two-pass variance needs. Two kinds of row break that, and
 * are summed again (in a pass loop, as softmax's, so that the code exists once):
 * - k far from the mean. E[(x - k)^2] and E[x - k]^2 are then both about (mean - k)^2, and
 *   their difference keeps only var / E[(x - k)^2] of their precision: with the first
 *   element an outlier (a feature with massive activations, 1000 among values of spread 1
 *   in a row of 4096) 12 bits were lost, and results were off by 1e-2. Where
 *   (mean - k)^2 > 15/16 E[(x - k)^2] (more than 4 bits lost; k more than 3.9 standard
 *   deviations from the mean) the sums are taken again around k + m1, the mean.
 * - Large values. The sum of squares overflows where |x - k| (rms_norm: |x|) passes about
 *   1.8e19 / sqrt(n) in f32, and the row was NaN or 0 where its results are of the order of
 *   1. Where the sums are not finite, they are taken again on x s, s = 2^-80 (f64: 2^-600):
 *   exact scaling by a power of two, which keeps every square and sum in range; the write
 *   pass then computes ((x s - k) - m1) rstd with rstd that of the scaled row (rms_norm:
 *   x (s rstd)), the same values. Elements that become subnormal when scaled lose
 *   precision, but beside the row's big ones they do not change its statistics. A row with
 *   an infinity or a NaN ends with the sums it had (what the interpreter makes of it).
 * An ordinary row pays a compare and a branch, and its write pass a subtraction (the mean's
 * digits, above): a few percent of W5 from the caches. The second statistics loop makes the
 * kernel's code longer and its compile a few ms longer: paid once per graph (the disk cache
 * keeps the code), where the row's speed is paid at every run (bench/NOTES.md, "Row norms"). */
typedef struct norm_row {
    norm_pass np;
    at a;          /* the row's index */
    int32_t vk0;   /* layer_norm: its first element */
    int32_t retry; /* variable: 1 where the first sums must be taken again (row_stats) */
} norm_row;

/* A row's variables (their names ending in sfx), for the phases below, and its stash: `stash`,
 * or one of its own (-2). */
static void row_begin(lower *L, norm_ctx *nc, norm_row *r, const at *a, int32_t stash, const char *sfx) {
    const node *x = nc->x;
    rj_dtype t = dtype_compute(nc->root->dtype); /* 16-bit: f32 statistics (PyTorch's opmath) */
    r->a = *a;
    r->vk0 = -1;
    r->np = (norm_pass){.nc = nc, .c = -1, .row = -1};
    snprintf(r->np.sfx, sizeof r->np.sfx, "%s", sfx);
    norm_pass *np = &r->np;
    np->acc = pvar(L, np, "acc", t), np->acc2 = pvar(L, np, "acc2", t), np->shift = pvar(L, np, "k", t);
    np->scale = pvar(L, np, "s", t), np->mean = pvar(L, np, "m1", t), np->rstd = pvar(L, np, "rstd", t);
    int last = x->rank - 1;
    if (stash >= 0) {
        r->np.row = stash;
    } else if (!L->desc->simt && nc->lead == last && x->dims[last] > 0 && x->dims[last] <= ROW_STASH && !L->err) {
        char name[8];
        snprintf(name, sizeof name, "row%s", sfx);
        r->np.row = lk_local(L->k, name, LL_THREAD, t);
        if (r->np.row < 0) L->err = RJ_ERR_NOMEM;
        else L->k->locals[r->np.row].elems = x->dims[last];
    }
}

/* The row's elements, as a float of the statistics' type. */
static int32_t row_count(lower *L, const norm_ctx *nc, rj_dtype t) {
    int32_t n = xi(L, 1);
    for (int d = nc->lead; d < nc->x->rank; d++) n = xmul(L, n, xsize(L, nc->x->dims[d]));
    return xcast(L, t, n);
}

/* Phase: the row's statistics, summed again where they must be (below; with `again` false r->retry
 * says so and nothing is summed again). */
static void row_stats(lower *L, blk *b, norm_row *r, bool again) {
    norm_ctx *nc = r->np.nc;
    norm_pass *np = &r->np;
    const node *root = nc->root, *x = nc->x;
    rj_dtype t = dtype_compute(root->dtype);
    int32_t fn = row_count(L, nc, t);
    bool layer = root->op == RJ_OP_LAYER_NORM;
    double big = t == RJ_F32 ? 3.4028234663852886e38 : 1.7976931348623157e308;
    double small = t == RJ_F32 ? 0x1p-80 : 0x1p-600;
    if (layer) {
        at first = r->a; /* guarded: the block may be empty */
        int32_t n = xi(L, 1);
        for (int d = nc->lead; d < x->rank; d++) first.idx[d] = xi(L, 0), n = xmul(L, n, xsize(L, x->dims[d]));
        first.guard = xcmp(L, RJ_OP_GT, n, xi(L, 0));
        L->memo_n = 0;
        r->vk0 = pvar(L, np, "k0", t);
        s_set(L, b, r->vk0, xcast(L, t, value(L, root->in[0], &first)));
        s_set(L, b, np->shift, xvar(L, r->vk0));
    }
    s_set(L, b, np->scale, xconst(L, t, 1));
    norm_stats(L, b, &r->a, np);
    if (layer) s_set(L, b, np->mean, xbin(L, RJ_OP_DIV, t, xvar(L, np->acc), fn));
    /* are the sums finite, and (layer_norm) k near the mean? One compare for both sums (an &&
     * of two was two branches, which serialised their horizontal additions: 4% on W5) */
    int32_t both = xvar(L, np->acc2);
    if (layer) both = xbin(L, RJ_OP_ADD, t, both, xun(L, RJ_OP_ABS, t, xvar(L, np->acc)));
    int32_t ok = xcmp(L, RJ_OP_LE, both, xconst(L, t, big)), done = ok;
    if (layer) {
        int32_t m1 = xvar(L, np->mean), ms = xbin(L, RJ_OP_DIV, t, xvar(L, np->acc2), fn);
        int32_t far = xcmp(L, RJ_OP_GT, xbin(L, RJ_OP_MUL, t, m1, m1), xbin(L, RJ_OP_MUL, t, xconst(L, t, 0.9375), ms));
        done = xbin(L, RJ_OP_LOGICAL_AND, RJ_BOOL, ok, xcmp(L, RJ_OP_EQ, far, xconst(L, RJ_BOOL, 0)));
    }
    /* else up to two more passes: scaled, then (layer_norm) around the mean */
    int32_t vretry = pvar(L, np, "retry", RJ_I64), vpass = pvar(L, np, "pass", RJ_I64);
    s_set(L, b, vretry, xsel(L, done, xi(L, 0), xi(L, 1)));
    r->retry = vretry;
    if (!again) return;
    blk rb, pb = NEWBLK, ib;
    int32_t fr = s_if(L, b, &rb, xcmp(L, RJ_OP_NE, xvar(L, vretry), xi(L, 0)));
    int32_t fp = s_for(L, &rb, vpass, xi(L, 0), xi(L, 2), LM_SERIAL);
    if (!L->err) L->k->st[fp].flags |= LF_NOUNROLL;
    int32_t fi = s_if(L, &pb, &ib, xcmp(L, RJ_OP_NE, xvar(L, vretry), xi(L, 0)));
    /* ok and far are of the sums before this pass */
    if (layer)
        s_set(L, &ib, np->shift, xsel(L, ok, xbin(L, RJ_OP_ADD, t, xvar(L, np->shift), xvar(L, np->mean)),
                                      xbin(L, RJ_OP_MUL, t, xvar(L, r->vk0), xconst(L, t, small))));
    s_set(L, &ib, np->scale, xsel(L, ok, xvar(L, np->scale), xconst(L, t, small)));
    np->scaled = true;
    norm_stats(L, &ib, &r->a, np);
    np->scaled = false;
    if (layer) s_set(L, &ib, np->mean, xbin(L, RJ_OP_DIV, t, xvar(L, np->acc), fn));
    s_set(L, &ib, vretry, xsel(L, done, xi(L, 0), xi(L, 1)));
    close_body(L, fi, &ib);
    close_body(L, fp, &pb);
    close_body(L, fr, &rb);
}

/* Phase: rstd of the row as summed (scaled: eps scaled to match, which is 0 in f32). */
static void row_rstd(lower *L, blk *b, norm_row *r) {
    const node *root = r->np.nc->root;
    norm_pass *np = &r->np;
    rj_dtype t = dtype_compute(root->dtype);
    bool layer = root->op == RJ_OP_LAYER_NORM;
    double eps = root->fval >= 0 ? root->fval : (t == RJ_F32 ? 1.1920928955078125e-07 : 2.220446049250313e-16);
    int32_t var = xbin(L, RJ_OP_DIV, t, xvar(L, np->acc2), row_count(L, np->nc, t));
    if (layer) {
        int32_t m1 = xvar(L, np->mean);
        var = xbin(L, RJ_OP_MAXIMUM, t, xbin(L, RJ_OP_SUB, t, var, xbin(L, RJ_OP_MUL, t, m1, m1)), xconst(L, t, 0));
    }
    int32_t sc = xvar(L, np->scale);
    int32_t e = xbin(L, RJ_OP_MUL, t, xconst(L, t, eps), xbin(L, RJ_OP_MUL, t, sc, sc));
    s_set(L, b, np->rstd, xun(L, RJ_OP_RSQRT, t, xbin(L, RJ_OP_ADD, t, var, e)));
    if (!layer) s_set(L, b, np->rstd, xbin(L, RJ_OP_MUL, t, sc, xvar(L, np->rstd)));
}

/* Phase: the row written. */
static void row_write(lower *L, blk *b, norm_row *r) {
    const norm_ctx *nc = r->np.nc;
    r->np.pass = 1;
    loops(L, b, &r->a, nc->x->dims, nc->lead, nc->x->rank, norm_inner, &r->np);
}

/* One row, with its stash (-2: its own). */
static void norm_row_all(lower *L, blk *b, at *a, norm_ctx *nc, int32_t stash) {
    norm_row r;
    row_begin(L, nc, &r, a, stash, "");
    row_stats(L, b, &r, true);
    row_rstd(L, b, &r);
    row_write(L, b, &r);
}

static void norm_unit(lower *L, blk *b, at *a, void *ud) { norm_row_all(L, b, a, ud, -2); }

/* Two rows a unit on a CPU, phase by phase (statistics of both, then their rstd, then their
 * writes): a row's write waits on its statistics' horizontal sums, square root and division,
 * a chain of dependent instructions that left the core idle between rows; the other row's
 * work fills it (W5 in bf16 1.2x on a Zen 4, bench/NOTES.md). A pair either of whose rows must
 * be summed again, and an odd last row, go row by row through the one-row code (a serial loop
 * over one copy of it, which keeps the kernel's code and compile time down). Only where the
 * unit is one row of a ragged class (the normalised dims are all those after it). */
static void norm_pairs(lower *L, blk *top, norm_ctx *nc) {
    at a = {.rank = nc->x->rank, .inclass = -1, .outclass = -1, .guard = -1};
    rows_nest rn;
    blk *in = rows_open_pairs(L, top, &a, root_of(L->g, nc->x->dims[1]), &rn);
    at a2 = a;
    a2.idx[1] = xadd(L, a.idx[1], xi(L, 1));
    int32_t vtwo = newvar(L, "two", RJ_I64), vslow = newvar(L, "slow", RJ_I64), vq = newvar(L, "q", RJ_I64);
    s_set(L, in, vtwo, xsel(L, xcmp(L, RJ_OP_GE, rn.left, xi(L, 2)), xi(L, 1), xi(L, 0)));
    s_set(L, in, vslow, xi(L, 1));
    blk pb, fb;
    int32_t fp = s_if(L, in, &pb, xcmp(L, RJ_OP_NE, xvar(L, vtwo), xi(L, 0)));
    norm_row r[2];
    row_begin(L, nc, &r[0], &a, -2, "");
    row_begin(L, nc, &r[1], &a2, -2, "_2");
    for (int k = 0; k < 2; k++) row_stats(L, &pb, &r[k], false);
    s_set(L, &pb, vslow, xmax(L, xvar(L, r[0].retry), xvar(L, r[1].retry)));
    int32_t ff = s_if(L, &pb, &fb, xcmp(L, RJ_OP_EQ, xvar(L, vslow), xi(L, 0)));
    for (int k = 0; k < 2; k++) row_rstd(L, &fb, &r[k]);
    for (int k = 0; k < 2; k++) row_write(L, &fb, &r[k]);
    close_body(L, ff, &fb);
    close_body(L, fp, &pb);
    /* row by row: the pair's two rows, the last row alone, or none */
    int32_t cnt = xsel(L, xcmp(L, RJ_OP_NE, xvar(L, vslow), xi(L, 0)), xadd(L, xvar(L, vtwo), xi(L, 1)), xi(L, 0));
    blk qb = NEWBLK;
    int32_t fq = s_for(L, in, vq, xi(L, 0), cnt, LM_SERIAL);
    if (!L->err) L->k->st[fq].flags |= LF_NOUNROLL;
    at aq = a;
    aq.idx[1] = xadd(L, a.idx[1], xvar(L, vq));
    norm_row_all(L, &qb, &aq, nc, r[0].np.row);
    close_body(L, fq, &qb);
    rows_close(L, &rn);
}

void lower_norm(lower *L, const fuse_group *gr) {
    const rj_graph *g = L->g;
    norm_ctx nc = {.root = &g->nodes[gr->root]};
    nc.x = &g->nodes[nc.root->in[0]];
    nc.lead = nc.x->rank - nc.root->axis;
    sbuf w;
    sbuf_init(&w, L->ctx);
    sbuf_printf(&w, "%s over the last %d dims of ", op_table[nc.root->op].name, nc.root->axis);
    print_node_type(&w, g, nc.x);
    set_what(L, &w);
    blk top = NEWBLK;
    /* a unit writes (and reads) the normalised dims and nothing else: none where they hold no
     * element (a [B, j1, 0] of 2^40 rows would otherwise run 2^40 units of nothing) */
    const sym *js = nc.x->rank > 2 ? graph_sym(g, nc.x->dims[1]) : NULL;
    if (!L->desc->simt && js && js->kind == SYM_RAGGED && nc.lead == 2) {
        norm_pairs(L, &top, &nc);
        unit_extent(L, nc.x->dims, 2, nc.x->rank);
    } else {
        int first = leading_units(L, &top, nc.x->dims, nc.x->rank, nc.lead, nc.lead, norm_unit, &nc);
        unit_extent(L, nc.x->dims, first, nc.x->rank);
    }
    L->k->body = top.first;
}
