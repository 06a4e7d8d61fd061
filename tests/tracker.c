/*
 * tracker.c — the tracking allocator (see tracker.h).
 */
#include "tracker.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define MAGIC 0x52414a4954ull /* "RAJIT" */

/* The counters are updated atomically: tests share a context between threads. */
#define ADD(field, v) __atomic_add_fetch(&(field), (v), __ATOMIC_RELAXED)

typedef struct hdr {
    uint64_t magic;
    uint64_t size;
} hdr;

void *tracking_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    tracker *t = ud;
    hdr *h = ptr ? (hdr *)ptr - 1 : NULL;
    if (h && (h->magic != MAGIC || h->size != osize)) {
        fprintf(stderr, "tracking_alloc: block %p has size %llu but ragjit says %zu%s\n", ptr,
                (unsigned long long)h->size, osize, h->magic != MAGIC ? " (bad magic)" : "");
        t->bad_size = 1;
    }
    if (nsize == 0) {
        if (h) {
            ADD(t->live_blocks, -1);
            ADD(t->live_bytes, -(long long)h->size);
            h->magic = 0;
            free(h);
        }
        return NULL;
    }
    long attempt = ADD(t->attempts, 1);
    if (t->fail_at && attempt == t->fail_at) return NULL;
    hdr *n = realloc(h, sizeof(hdr) + nsize);
    if (!n) return NULL;
    if (!h) ADD(t->live_blocks, 1);
    ADD(t->live_bytes, (long long)nsize - (long long)(h ? osize : 0));
    ADD(t->allocs, 1);
    n->magic = MAGIC;
    n->size = nsize;
    return n + 1;
}
