/*
 * strmap.c — a map from names to small integers, for the tables that programs fill.
 *
 * A program may declare a hundred thousand names, and a linear search per lookup makes
 * parsing or printing it quadratic: minutes of CPU for a file of a few megabytes, which is a
 * hang to whoever loads it. This is the plainest table that avoids that: open addressing with
 * linear probing over a power-of-two array kept at most half full, keys copied in (the
 * callers' own name storage moves as it grows), every byte through the context's allocator.
 * There is no removal; callers replace a key's value instead.
 */
#include <string.h>

#include "util.h"

void strmap_init(strmap *m, rj_ctx *ctx) {
    memset(m, 0, sizeof *m);
    m->ctx = ctx;
}

void strmap_free(strmap *m) {
    for (int32_t i = 0; i < m->cap; i++) mem_strfree(m->ctx, m->keys[i]);
    mem_free(m->ctx, m->keys, sizeof(char *) * (size_t)m->cap);
    mem_free(m->ctx, m->vals, sizeof(int32_t) * (size_t)m->cap);
    strmap_init(m, m->ctx);
}

/* The slot holding key, or the empty slot where it would go (cap > 0). */
static int32_t slot_of(const strmap *m, const char *key) {
    uint32_t mask = (uint32_t)m->cap - 1, i = (uint32_t)hash_str(0x7f4a7c15, key) & mask;
    while (m->keys[i] && strcmp(m->keys[i], key)) i = (i + 1) & mask;
    return (int32_t)i;
}

int32_t strmap_get(const strmap *m, const char *key) {
    if (!m->cap) return -1;
    int32_t i = slot_of(m, key);
    return m->keys[i] ? m->vals[i] : -1;
}

/* Doubles the table, moving every key (their copies are kept, not made again). */
static bool grow(strmap *m) {
    int32_t ncap = m->cap ? m->cap * 2 : 16;
    if (ncap <= 0 || ncap > (1 << 29)) {
        ctx_fail(m->ctx, RJ_ERR_OVERFLOW, "too many names (%d)", (int)m->n);
        return false;
    }
    strmap old = *m;
    m->keys = mem_zalloc(m->ctx, sizeof(char *) * (size_t)ncap);
    m->vals = mem_alloc(m->ctx, sizeof(int32_t) * (size_t)ncap);
    if (!m->keys || !m->vals) {
        mem_free(m->ctx, m->keys, sizeof(char *) * (size_t)ncap);
        mem_free(m->ctx, m->vals, sizeof(int32_t) * (size_t)ncap);
        m->keys = old.keys;
        m->vals = old.vals;
        return false;
    }
    m->cap = ncap;
    for (int32_t i = 0; i < old.cap; i++)
        if (old.keys[i]) {
            int32_t s = slot_of(m, old.keys[i]);
            m->keys[s] = old.keys[i];
            m->vals[s] = old.vals[i];
        }
    mem_free(m->ctx, old.keys, sizeof(char *) * (size_t)old.cap);
    mem_free(m->ctx, old.vals, sizeof(int32_t) * (size_t)old.cap);
    return true;
}

bool strmap_put(strmap *m, const char *key, int32_t val) {
    if ((m->n + 1) * 2 > m->cap && !grow(m)) return false;
    int32_t i = slot_of(m, key);
    if (!m->keys[i]) {
        if (!(m->keys[i] = mem_strdup(m->ctx, key))) return false;
        m->n++;
    }
    m->vals[i] = val;
    return true;
}
