/*
 * knobs.c (SIMT) — settings from the environment for experiments on a GPU.
 *
 * RAGJIT_SIMT_UNROLL_LANES=N  the unroll hint of every lanes loop spread across a group (0: none;
 *                             unset: stmt.c's rule, a full unroll of 2..16 iterations a thread)
 * RAGJIT_SIMT_UNROLL_SERIAL=N an unroll hint on innermost serial loops (unset: none)
 * RAGJIT_SIMT_SM_THREADS=N    the threads a multiprocessor is planned for in __launch_bounds__
 *                             (unset: kernel.c's 512 or 1024)
 *
 * A default changes only after the settings were measured against each other on a device
 * (bench/device_session.sh run knobs; bench/NOTES.md). They are read when a kernel is printed,
 * so they hold for a context's kernels from their first compile, and they join the CUDA
 * persistent cache's key (simt_knobs), so no setting loads code made under another.
 */
#include <stdio.h>
#include <stdlib.h>

#include "emit.h"

int cem_knob(const char *name) {
    char var[64];
    snprintf(var, sizeof var, "RAGJIT_SIMT_%s", name);
    const char *v = getenv(var);
    if (!v || !*v) return -1;
    char *end;
    long n = strtol(v, &end, 10);
    return *end || n < 0 || n > 4096 ? -1 : (int)n;
}

void simt_knobs(char *buf, size_t n) {
    static const char *const names[] = {"UNROLL_LANES", "UNROLL_SERIAL", "SM_THREADS"};
    size_t at = 0;
    buf[0] = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && at < n; i++) {
        int v = cem_knob(names[i]);
        if (v >= 0) at += (size_t)snprintf(buf + at, n - at, "simt %s %d\n", names[i], v);
    }
}
