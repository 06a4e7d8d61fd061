/*
 * launch.h — launch planning shared by every target: how big each buffer is in this run, how
 * many units a kernel has and how they are split among workers, how much scratch each worker
 * needs, and the value of every kernel parameter.
 *
 * A dispatcher (cpu.c: its pool's threads calling through libffi; cuda.c: a grid on a stream;
 * opencl.c: an NDRange on a queue) only decides where memory lives and launches; the
 * arithmetic of a run is written once, here, so the targets cannot disagree about it.
 */
#ifndef RJ_LAUNCH_H
#define RJ_LAUNCH_H

#include "runtime.h"

/* Elements of loop-IR buffer i in this run: inputs and outputs as resolved, temporaries sized
 * from the run's sizes by the plan's shape (a jagged temporary holds the logical rows of its
 * class). */
rj_status launch_buf_elems(const run_view *v, int32_t i, int64_t *n);

#define LAUNCH_MAX_CHUNKS 1024

typedef struct launch_opts {
    int workers;             /* threads that take chunks (CPU), or most threads (SIMT) */
    int chunks_per_worker;   /* > 1: more chunks than workers, taken dynamically; 0: no split */
    int64_t small_work;      /* runs with less work than this use one worker */
    int64_t tile_bytes;      /* multi-pass item kernels keep one tile's columns of an item
                                within this many bytes (0: no cache tiling) */
    bool split_items;        /* tile columns so that one long item is shared by workers */
    int64_t scratch_budget;  /* most scratch bytes for all workers together (0: no limit) */
    const int64_t *pieces;   /* UD_PIECES: pieces of each class root (launch_pieces) */
    bool dry;                /* CPU: size the run's memory and launch nothing (rj_bind_prepare) */
} launch_opts;

typedef struct launch_plan {
    int64_t units;           /* 0: nothing to launch */
    int64_t tile, ntiles;    /* UD_ITEMS: inner elements per unit, units per item */
    int workers;             /* workers that take part (1 <= workers <= opts.workers) */
    int nchunks;             /* chunk c is units chunk[c] .. chunk[c+1] */
    int64_t chunk[LAUNCH_MAX_CHUNKS + 1];
    int64_t scratch_elems;   /* per worker */
    int64_t scratch_bytes;   /* per worker, rounded up to 64 bytes (a cache line) */
} launch_plan;

rj_status launch_plan_kernel(const run_view *v, const lkernel *k, const launch_opts *o, launch_plan *pl);

/* Whether kernel k takes part in this run: false for one of a softmax's two variants
 * (lkernel.tiling.stash_variant), the one whose stash of the longest item is on the wrong side of
 * the budget o->tile_bytes. */
bool launch_variant_runs(const run_view *v, const lkernel *k, const launch_opts *o);

/* The pieces of a class's items for UD_PIECES kernels (loopir.h): every item cut into pieces
 * of at most `rows` rows, at least one an item. rows is chosen so that a typical item is one
 * piece (twice the mean length) while the longest items become enough pieces to occupy
 * `blocks` blocks of eight column tiles; never fewer than 64 rows. item[p] is the item of
 * piece p (count entries), start[b] the first piece of item b (B + 1 entries), both allocated
 * from the context (launch_pieces_free). */
typedef struct launch_pieces {
    int64_t rows, count, batch;
    int64_t *item, *start;
} launch_pieces;

rj_status launch_pieces_make(const run_view *v, int32_t cls, int64_t blocks, launch_pieces *lp);
void launch_pieces_free(rj_ctx *ctx, launch_pieces *lp);

/* Addresses of the run's memory as the kernels see it: host pointers on a CPU, device
 * addresses on a GPU. Offsets pointers are indexed by symbol, logical offsets by class root. */
typedef struct launch_mem {
    const uint64_t *buf;     /* per loop-IR buffer */
    const uint64_t *off;     /* per symbol */
    const uint64_t *loff;    /* per class root */
    uint64_t scratch;        /* worker w's scratch is at scratch + w * plan.scratch_bytes */
    const uint64_t *pitem, *pstart; /* per class root: launch_pieces' tables */
    const int64_t *prows;    /* per class root: rows per piece */
    uint64_t err;            /* the device check's words (PK_ERR), or 0 */
    const uint64_t *sqoff;   /* per plan_pair: the blocks of pair tensors (PK_SQOFF) */
} launch_mem;

/* One value per kernel parameter for units [lo, hi) run by `worker`. */
void launch_args(const run_view *v, const lkernel *k, const launch_plan *pl, const launch_mem *m,
                 int64_t lo, int64_t hi, int worker, bool nt, uint64_t *vals);

/* ---- host bindings run on a device ----------------------------------------------------------
 * A GPU target given host memory copies in, launches, and copies out; what needs device memory,
 * what is copied each way, how scratch grows and how a kernel's threads and parameters are
 * laid out is the same for every such target, so device_run does it and the target supplies
 * the calls. Device memory is kept across runs in slots of the binding's run state
 * (run_mem.dmem), grown when a run needs more. A device address is the target's handle as 64 bits (a CUDA
 * device pointer, an OpenCL cl_mem), 0 for none. */
typedef struct device_ops {
    const char *what;          /* "CUDA run", "OpenCL run": the start of messages */
    int max_threads;           /* most threads in one launch */
    int64_t scratch_budget;    /* most bytes of per-thread scratch in one launch */
    /* Device memory for `bytes` (0 allowed; run_reserve has counted it). */
    rj_status (*alloc)(void *ud, uint64_t *addr, int64_t bytes, const char *what);
    void (*release)(void *ud, uint64_t addr);
    rj_status (*write)(void *ud, uint64_t addr, const void *src, size_t bytes, const char *what);
    rj_status (*read)(void *ud, void *dst, uint64_t addr, size_t bytes, const char *what);
    /* Threads per block of kernel ki. */
    int64_t (*block)(void *ud, int32_t ki);
    /* Queues kernel ki over `threads` threads (a multiple of block) with one value per
     * parameter in order, each scratch pointer followed by its stride (elements per thread). */
    rj_status (*launch)(void *ud, int32_t ki, int64_t block, int64_t threads, uint64_t *args);
    /* Waits for the queued kernels; *kernel_ms: their time by the device's timers, from the
     * first one's start to the last one's end (left negative where there are none). */
    rj_status (*finish)(void *ud, double *kernel_ms);
    /* The device check of offsets: rj_check_offsets(off, ref, B, rows, maxlen, err, sym) queued
     * before the run's kernels (codegen/simt/emit.c). */
    rj_status (*check)(void *ud, uint64_t off, uint64_t ref, int64_t B, int64_t rows, int64_t maxlen, uint64_t err,
                       int64_t sym);
    /* Instead of finish when nothing is copied back: marks the end of the run's kernels for
     * backend.wait and returns without waiting (NULL: runs always wait). */
    rj_status (*leave)(void *ud);
    /* The most threads for a launch on this run's device (NULL: max_threads). */
    int64_t (*threads)(void *ud);
} device_ops;

/* Runs the view's loop IR through ops: device copies of inputs, offsets and logical
 * offsets, device outputs, temporaries and per-thread scratch, the kernels in order, and the
 * outputs copied back into host memory (or, all outputs on the device, a return as soon as the
 * kernels are queued: v->async).
 * When some input is a view with holes, outputs are copied in as well: kernels write only the
 * rows inside items, and the rows in the holes must come back as they were (as the CPU leaves
 * them in the caller's memory). */
rj_status device_run(const run_view *v, const device_ops *ops, void *ud);

/* Waits for a device run that returned early (v->async->pending) and judges its device checks
 * (rj_bind_wait; a run first settles its binding's previous one). *checked: it had checks. */
rj_status device_settle(const run_view *v, bool *checked);

#endif
