/*
 * kshare.c — a context's compiled kernels by their code, shared across its programs.
 *
 * A model is many programs of one context as often as it is one program: a layer per
 * program, a prefill and a decode step, the same block at other sizes. Their kernels repeat
 * (a layer's norm, its activation, its attention), and a kernel's machine code depends only
 * on its loop IR with the names and launch bindings left out (lprog_kernel_code_key). So a
 * backend keeps its live kernels here by that key: a program compiling a kernel whose code
 * some live program already has takes that function instead of compiling it again, and holds
 * a reference to the code that owns it (the backend's business: the table only records the
 * owner), so the function outlives the program it came from for as long as it is used.
 *
 * Entries belong to their owner and go with it (kshare_drop). Lookups compare the whole key,
 * after a 64-bit hash. The table is small (a context's distinct kernels), so it is a plain
 * array searched linearly; compiles, the only callers, hold the context's lock.
 */
#include <string.h>

#include "runtime.h"

static uint64_t key_hash(const sbuf *key) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < key->len; i++) h = (h ^ (unsigned char)key->s[i]) * 0x100000001b3ull;
    return h;
}

void *kshare_find(const kshare *t, const sbuf *key, void **owner) {
    uint64_t h = key_hash(key);
    for (int32_t i = 0; i < t->n; i++) {
        const kshare_entry *e = &t->e[i];
        if (e->hash == h && e->key.len == key->len && !memcmp(e->key.s, key->s, key->len)) {
            *owner = e->owner;
            return e->fn;
        }
    }
    return NULL;
}

/* key is taken (left empty; freed here when not kept). A key already present keeps its first
 * entry. */
rj_status kshare_add(rj_ctx *ctx, kshare *t, sbuf *key, void *fn, void *owner) {
    void *other;
    if (kshare_find(t, key, &other)) {
        sbuf_free(key);
        return RJ_OK;
    }
    if (t->n == t->cap) {
        int32_t cap = t->cap ? 2 * t->cap : 32;
        kshare_entry *e = mem_realloc(ctx, t->e, sizeof *e * (size_t)t->cap, sizeof *e * (size_t)cap);
        if (!e) {
            sbuf_free(key);
            return RJ_ERR_NOMEM;
        }
        t->e = e, t->cap = cap;
    }
    t->e[t->n++] = (kshare_entry){.hash = key_hash(key), .key = *key, .fn = fn, .owner = owner};
    key->s = NULL;
    key->len = key->cap = 0;
    return RJ_OK;
}

void kshare_drop(kshare *t, const void *owner) {
    int32_t k = 0;
    for (int32_t i = 0; i < t->n; i++) {
        if (t->e[i].owner == owner) sbuf_free(&t->e[i].key);
        else t->e[k++] = t->e[i];
    }
    t->n = k;
}

void kshare_free(rj_ctx *ctx, kshare *t) {
    for (int32_t i = 0; i < t->n; i++) sbuf_free(&t->e[i].key);
    mem_free(ctx, t->e, sizeof *t->e * (size_t)t->cap);
    *t = (kshare){0};
}
