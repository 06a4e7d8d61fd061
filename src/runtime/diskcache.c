/*
 * diskcache.c — compiled kernels kept on disk, shared by every process that meets a graph.
 *
 * Compiling a fused kernel costs tens of milliseconds (LLVM's optimiser and code generator, or
 * NVRTC and the driver), and a model runtime that starts many processes, or meets a graph on a
 * request path, pays it each time. A backend therefore asks here before compiling: the entry
 * for its key holds the compiled code (CPU object code, a CUDA image, OpenCL program
 * binaries), and loading it skips the compiler.
 *
 * The key is everything the code depends on: the loop IR's fingerprint (lprog_fingerprint:
 * every field a backend reads), the backend's identity (target triple, CPU and its features,
 * LLVM's version and pass pipeline; or the device, its architecture and driver), and the
 * identity of this build of ragjit (the GNU build-id of the loaded library, so a changed code
 * generator never meets code from the old one). An entry file is named by a 64-bit hash of
 * the key, and holds the whole key: it is loaded only when its key equals the one asked for
 * byte for byte, its checksum holds and its sizes add up. Anything else (a truncated file, a
 * foreign or corrupt one, a hash collision) is a miss; the compile that follows replaces it.
 *
 * Entries are code, so only files of this user that nobody else can write, in a directory of
 * this user's (or root's) that nobody else can write, are loaded: a cache directory shared with
 * other users (RAGJIT_CACHE_DIR=/tmp/cache) is written but never read from.
 *
 * Writers never expose a partial entry: each writes a temporary file of its own (O_EXCL, a
 * name with its pid and a counter) and renames it over the entry, which is atomic within a
 * directory, so concurrent writers of one entry leave one complete copy, and readers see the
 * old file or the new one. Failures to create the directory or write (read-only, full, not a
 * directory) cost nothing but the cache: compiles never fail because of it.
 *
 * Where: rj_ctx_set_cache_dir, else RAGJIT_CACHE_DIR, else $XDG_CACHE_HOME/ragjit, else
 * $HOME/.cache/ragjit; "off" (or an empty setting) turns the cache off. The entries are kept
 * below RAGJIT_CACHE_MAX_MB (1024 by default): after each store the least recently used go.
 * The directory may be deleted at any time.
 *
 * File layout (integers little-endian u64): "RJKC0001", key length, payload length,
 * checksum (of the key, continued over the payload), the key, the payload.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runtime.h"

#define MAGIC "RJKC0001"
#define HEADER 32
#define MAX_ENTRY ((size_t)1 << 30) /* a larger file is not one of ours */

/* ---- this build's identity ------------------------------------------------------------------ */

static char build_id[80];
static pthread_once_t build_once = PTHREAD_ONCE_INIT;

typedef struct find_id {
    uintptr_t addr; /* an address inside this library */
    char *out;
} find_id;

/* dl_iterate_phdr callback: the NT_GNU_BUILD_ID note of the object containing f->addr. */
static int note_of(struct dl_phdr_info *info, size_t size, void *ud) {
    RJ_UNUSED(size);
    find_id *f = ud;
    bool mine = false;
    for (int i = 0; i < info->dlpi_phnum && !mine; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        mine = ph->p_type == PT_LOAD && f->addr >= lo && f->addr < lo + ph->p_memsz;
    }
    if (!mine) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE) continue;
        const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
        const unsigned char *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)(const void *)p;
            const unsigned char *name = p + sizeof *n;
            const unsigned char *desc = name + ((n->n_namesz + 3) & ~3u);
            if (desc + n->n_descsz > end) break;
            if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && !memcmp(name, "GNU", 4)) {
                size_t k = 0;
                for (uint32_t j = 0; j < n->n_descsz && k + 3 < sizeof build_id; j++)
                    k += (size_t)snprintf(f->out + k, 3, "%02x", desc[j]);
                return 1;
            }
            p = desc + ((n->n_descsz + 3) & ~3u);
        }
    }
    return 1;
}

/* The GNU build-id of the object ragjit is linked into (the shared library, or a program
 * linking it statically); without one, the size and time of that file, read once. */
static void find_build_id(void) {
    static const char anchor = 0; /* an address inside this library's image */
    find_id f = {.addr = (uintptr_t)&anchor, .out = build_id};
    dl_iterate_phdr(note_of, &f);
    if (build_id[0]) return;
    Dl_info di;
    struct stat st;
    if (dladdr(&anchor, &di) && di.dli_fname && stat(di.dli_fname, &st) == 0)
        snprintf(build_id, sizeof build_id, "file-%lld-%lld-%lld", (long long)st.st_size,
                 (long long)st.st_mtime, (long long)st.st_ino);
}

const char *disk_build_id(void) {
    pthread_once(&build_once, find_build_id);
    return build_id[0] ? build_id : NULL;
}

/* ---- where ---------------------------------------------------------------------------------- */

/* The directory for this context into buf, or false when the cache is off (or has nowhere
 * to go). Called under the context's lock (rj_ctx_set_cache_dir takes it too). */
static bool cache_dir(rj_ctx *ctx, char *buf, size_t n) {
    const char *dir = ctx->cache_dir_set ? ctx->cache_dir : getenv("RAGJIT_CACHE_DIR");
    if (dir) {
        if (!dir[0] || !strcmp(dir, "off")) return false;
        return (size_t)snprintf(buf, n, "%s", dir) < n;
    }
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int w;
    if (xdg && xdg[0] == '/') w = snprintf(buf, n, "%s/ragjit", xdg);
    else if (home && home[0] == '/') w = snprintf(buf, n, "%s/.cache/ragjit", home);
    else return false;
    return w > 0 && (size_t)w < n;
}

rj_status rj_ctx_set_cache_dir(rj_ctx *ctx, const char *dir) {
    if (!ctx) return RJ_ERR_ARG;
    char *copy = NULL;
    if (dir && !(copy = mem_strdup(ctx, dir))) return RJ_ERR_NOMEM;
    ctx_lock(ctx);
    mem_strfree(ctx, ctx->cache_dir);
    ctx->cache_dir = copy;
    ctx->cache_dir_set = dir != NULL;
    ctx_unlock(ctx);
    return RJ_OK;
}

bool disk_enabled(rj_ctx *ctx) {
    char dir[4096];
    return disk_build_id() && cache_dir(ctx, dir, sizeof dir);
}

rj_status disk_key(rj_ctx *ctx, sbuf *key, const lprog *lp, const char *ident) {
    sbuf_init(key, ctx);
    if (!disk_enabled(ctx)) return RJ_OK;
    sbuf_printf(key, "ragjit build %s\n%s", disk_build_id(), ident);
    lprog_fingerprint(lp, key);
    if (!key->failed) return RJ_OK;
    sbuf_free(key);
    return ctx_fail(ctx, RJ_ERR_NOMEM, "out of memory compiling");
}

/* mkdir -p, owner only for what it creates; true if path is a directory now. */
static bool make_dirs(char *path) {
    struct stat st;
    if (stat(path, &st) == 0) return S_ISDIR(st.st_mode);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        bool ok = mkdir(path, 0700) == 0 || errno == EEXIST;
        *p = '/';
        if (!ok) return false;
    }
    return (mkdir(path, 0700) == 0 || errno == EEXIST) && stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* ---- entries -------------------------------------------------------------------------------- */

/* FNV-1a over 8-byte words (then the tail's bytes): a corrupted entry's check, not a
 * defence against a forger (whoever can write the directory can write code anyway). */
static uint64_t checksum(const unsigned char *p, size_t n, uint64_t h) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    for (; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t key_hash(const char *target, const void *key, size_t keylen) {
    uint64_t h = checksum((const unsigned char *)target, strlen(target), 0xcbf29ce484222325ull);
    return checksum(key, keylen, h);
}


/* dir/target-hash.rjk into buf; false if it does not fit. */
static bool entry_path(rj_ctx *ctx, const char *target, const void *key, size_t keylen, char *buf,
                       size_t n, size_t *dirlen) {
    if (!cache_dir(ctx, buf, n)) return false;
    *dirlen = strlen(buf);
    int w = snprintf(buf + *dirlen, n - *dirlen, "/%s-%016llx.rjk", target,
                     (unsigned long long)key_hash(target, key, keylen));
    return w > 0 && (size_t)w < n - *dirlen;
}

static bool read_all(int fd, unsigned char *p, size_t n) {
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        p += r, n -= (size_t)r;
    }
    return true;
}

static bool write_all(int fd, const unsigned char *p, size_t n) {
    while (n) {
        ssize_t r = write(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        p += r, n -= (size_t)r;
    }
    return true;
}

/* The directory holding entries must be this user's (or root's) and writable by no one else,
 * or anyone could rename their own file over an entry. */
static bool dir_trusted(char *path, size_t dirlen) {
    char c = path[dirlen];
    path[dirlen] = 0;
    struct stat st;
    bool ok = stat(path, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_uid == geteuid() || st.st_uid == 0) &&
              !(st.st_mode & (S_IWGRP | S_IWOTH));
    path[dirlen] = c;
    return ok;
}

bool disk_load(rj_ctx *ctx, const char *target, const void *key, size_t keylen, void **data, size_t *len) {
    char path[4096];
    size_t dl;
    *data = NULL;
    *len = 0;
    if (!entry_path(ctx, target, key, keylen, path, sizeof path, &dl) || !dir_trusted(path, dl)) return false;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat st;
    unsigned char *buf = NULL;
    size_t size = 0;
    /* code is loaded only from files this user wrote and nobody else may change: an entry
     * another user could have put or altered is someone else's code */
    bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
        !(st.st_mode & (S_IWGRP | S_IWOTH)) && st.st_size >= HEADER &&
        (uint64_t)st.st_size <= MAX_ENTRY && (size = (size_t)st.st_size) > 0 &&
        (buf = mem_alloc(ctx, size)) && read_all(fd, buf, size);
    close(fd);
    if (!ok) {
        if (buf) mem_free(ctx, buf, size);
        ctx_clear_error(ctx); /* a failed allocation here is a miss, not an error */
        return false;
    }
    uint64_t kl = le_get_u64(buf + 8), pl = le_get_u64(buf + 16), sum = le_get_u64(buf + 24);
    ok = !memcmp(buf, MAGIC, 8) && kl == keylen && pl > 0 && pl <= size && HEADER + kl <= size &&
         HEADER + kl + pl == size && !memcmp(buf + HEADER, key, keylen) &&
         checksum(buf + HEADER + kl, pl, checksum(buf + HEADER, kl, 0xcbf29ce484222325ull)) == sum;
    if (!ok) {
        mem_free(ctx, buf, size);
        return false;
    }
    void *out = mem_alloc(ctx, (size_t)pl);
    if (out) memcpy(out, buf + HEADER + kl, (size_t)pl);
    mem_free(ctx, buf, size);
    if (!out) {
        ctx_clear_error(ctx);
        return false;
    }
    *data = out;
    *len = (size_t)pl;
    utimensat(AT_FDCWD, path, NULL, 0); /* used now: the last to be evicted */
    return true;
}

/* ---- eviction ------------------------------------------------------------------------------ */

typedef struct entry_stat {
    char name[64];
    int64_t bytes;
    struct timespec used; /* mtime: written, or last loaded */
} entry_stat;

static int older_first(const void *a, const void *b) {
    const struct timespec *x = &((const entry_stat *)a)->used, *y = &((const entry_stat *)b)->used;
    return x->tv_sec != y->tv_sec ? (x->tv_sec > y->tv_sec) - (x->tv_sec < y->tv_sec)
                                  : (x->tv_nsec > y->tv_nsec) - (x->tv_nsec < y->tv_nsec);
}

/* RAGJIT_CACHE_MAX_MB, read at each store: the most the entries may hold (default 1024; 0: no
 * limit). */
static int64_t cache_limit(void) {
    const char *v = getenv("RAGJIT_CACHE_MAX_MB");
    if (!v || !*v) return (int64_t)1024 << 20;
    char *end;
    errno = 0;
    long long mb = strtoll(v, &end, 10);
    if (errno || *end || mb < 0 || mb > ((int64_t)1 << 40)) return (int64_t)1024 << 20;
    return mb ? (int64_t)mb << 20 : -1;
}

/* After a store: entries beyond the size limit go, least recently used first (a load touches
 * its entry), down to 90% of the limit; temporary files a killed writer left an hour ago go
 * too. Another process may evict at the same time: files already gone are no error, and a
 * reader that has an entry open keeps reading it. */
static void evict(rj_ctx *ctx, const char *dir) {
    int64_t limit = cache_limit();
    DIR *d = opendir(dir);
    if (!d) return;
    int dfd = dirfd(d);
    entry_stat *es = NULL;
    int32_t n = 0, cap = 0;
    int64_t total = 0;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    for (struct dirent *de; (de = readdir(d));) {
        size_t l = strlen(de->d_name);
        struct stat st;
        if (l >= sizeof es->name || fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode) ||
            st.st_uid != geteuid())
            continue;
        if (!strncmp(de->d_name, ".tmp-", 5)) {
            if (now.tv_sec - st.st_mtim.tv_sec > 3600) unlinkat(dfd, de->d_name, 0);
            continue;
        }
        if (limit < 0 || l < 5 || strcmp(de->d_name + l - 4, ".rjk")) continue;
        if (n == cap && !mem_grow(ctx, (void **)&es, &cap, n + 1, sizeof *es)) break;
        memcpy(es[n].name, de->d_name, l + 1);
        es[n].bytes = (int64_t)st.st_size;
        es[n].used = st.st_mtim;
        total += es[n++].bytes;
    }
    if (limit >= 0 && total > limit) {
        qsort(es, (size_t)n, sizeof *es, older_first);
        for (int32_t i = 0; i < n && total > limit / 10 * 9; i++)
            if (!unlinkat(dfd, es[i].name, 0) || errno == ENOENT) total -= es[i].bytes;
    }
    mem_free(ctx, es, sizeof *es * (size_t)cap);
    ctx_clear_error(ctx); /* a failed allocation only stops the eviction */
    closedir(d);
}

void disk_store(rj_ctx *ctx, const char *target, const void *key, size_t keylen, const void *data, size_t len) {
    char path[4096], tmp[4096 + 64];
    size_t dl;
    if (!len || HEADER + keylen + len > MAX_ENTRY || !entry_path(ctx, target, key, keylen, path, sizeof path, &dl))
        return;
    path[dl] = 0;
    bool dir = make_dirs(path);
    path[dl] = '/';
    if (!dir) return;
    static uint64_t serial;
    snprintf(tmp, sizeof tmp, "%.*s/.tmp-%ld-%llu", (int)dl, path, (long)getpid(),
             (unsigned long long)__atomic_add_fetch(&serial, 1, __ATOMIC_RELAXED));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return;
    unsigned char h[HEADER];
    memcpy(h, MAGIC, 8);
    le_put_u64(h + 8, keylen);
    le_put_u64(h + 16, len);
    uint64_t sum = checksum(key, keylen, 0xcbf29ce484222325ull);
    le_put_u64(h + 24, checksum(data, len, sum));
    bool ok = write_all(fd, h, HEADER) && write_all(fd, key, keylen) && write_all(fd, data, len);
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) unlink(tmp);
    path[dl] = 0;
    evict(ctx, path);
}
