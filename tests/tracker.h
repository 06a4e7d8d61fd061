/*
 * tracker.h — the tracking allocator shared by the tests and the fuzzers (no cmocka here, so
 * the fuzz harnesses can link it too).
 *
 * It records each block's size in a header and checks it against the osize ragjit passes
 * back, counts live blocks, and can fail the Nth allocation. A test or a fuzz run that ends
 * with live blocks has leaked; one with bad_size set misreported a size to the hook.
 */
#ifndef RJ_TEST_TRACKER_H
#define RJ_TEST_TRACKER_H

#include <stddef.h>

typedef struct tracker {
    long live_blocks;
    long long live_bytes;
    long allocs;      /* successful allocations (incl. reallocs that move) so far */
    long fail_at;     /* fail the allocation with this 1-based number; 0 = never */
    long attempts;    /* allocation attempts counted for fail_at */
    int bad_size;     /* an osize did not match the recorded size */
} tracker;

/* An rj_alloc_fn; ud is a tracker. */
void *tracking_alloc(void *ud, void *ptr, size_t osize, size_t nsize);

#endif
