/*
 * launch.h — launch planning shared by every target: how big each buffer is in this run, how
 * many units a kernel has and how they are split among workers, how much scratch each worker
 * needs, and the value of every kernel parameter.
 *
 * A dispatcher (cpu.c: OpenMP threads calling through libffi; cuda.c: a grid on a stream)
 * only decides where memory lives and launches; the arithmetic of a run is written once,
 * here, so the targets cannot disagree about it.
 */
#ifndef RJ_LAUNCH_H
#define RJ_LAUNCH_H

#include "runtime.h"

/* Elements of loop-IR buffer lb in this run: inputs and outputs as bound, temporaries sized
 * from the run's sizes (a jagged temporary holds the logical rows of its class). */
rj_status launch_buf_elems(rj_bind *b, const lbuf *lb, int64_t *n);

#define LAUNCH_MAX_CHUNKS 1024

typedef struct launch_opts {
    int workers;             /* threads that take chunks (CPU), or most threads (SIMT) */
    int chunks_per_worker;   /* > 1: more chunks than workers, taken dynamically; 0: no split */
    int64_t small_work;      /* runs with less work than this use one worker */
    int64_t tile_bytes;      /* multi-pass item kernels keep one tile's columns of an item
                                within this many bytes (0: no cache tiling) */
    bool split_items;        /* tile columns so that one long item is shared by workers */
    int64_t scratch_budget;  /* most scratch bytes for all workers together (0: no limit) */
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

rj_status launch_plan_kernel(rj_bind *b, const lkernel *k, const launch_opts *o, launch_plan *pl);

/* Addresses of the run's memory as the kernels see it: host pointers on a CPU, device
 * addresses on a GPU. Offsets pointers are indexed by symbol, logical offsets by class root. */
typedef struct launch_mem {
    const uint64_t *buf;     /* per loop-IR buffer */
    const uint64_t *off;     /* per symbol */
    const uint64_t *loff;    /* per class root */
    uint64_t scratch;        /* worker w's scratch is at scratch + w * plan.scratch_bytes */
} launch_mem;

/* One value per kernel parameter for units [lo, hi) run by `worker`. */
void launch_args(rj_bind *b, const lkernel *k, const launch_plan *pl, const launch_mem *m,
                 int64_t lo, int64_t hi, int worker, bool nt, uint64_t *vals);

/* Host memory that a binding keeps across runs for temporaries and scratch (CPU runs): grown
 * as needed, freed with the binding. */
typedef struct host_block {
    void *p;
    size_t bytes;
} host_block;

typedef struct host_mem {
    host_block *temp;        /* per temporary */
    int32_t ntemp;
    host_block scratch;
    host_block addrs;        /* the launch_mem arrays */
} host_mem;

/* At least `bytes` (plus 64 for alignment) in blk; the address, 64-byte aligned. */
void *host_block_get(rj_ctx *ctx, host_block *blk, size_t bytes);
void host_mem_free(rj_ctx *ctx, host_mem *m);

#endif
