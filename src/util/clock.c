/*
 * clock.c — the monotonic clock, for the timings a run reports (rj_bind_stats).
 *
 * Device targets time their kernels with the device's own timers; what the host sees (a
 * whole run, the copies of a run with host pointers) is measured here, on CLOCK_MONOTONIC so
 * that a change of the wall clock during a run cannot make it negative.
 */
#include <time.h>

#include "util.h"

double clock_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}
