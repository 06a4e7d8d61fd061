/*
 * test_cache.c — the persistent kernel cache (runtime/diskcache.c) on the CPU target.
 *
 * Processes are real: the test starts copies of itself (/proc/self/exe --child DIR CHAIN)
 * that compile a standard chain into a cache directory and exit, so "another process" has its
 * own JIT and its own address space (no fork of a process that has started OpenMP's threads).
 * What must hold (on the CPU, and for OpenCL where a device exists):
 *   - a graph compiled by one process is loaded, not compiled, by the next (the CPU backend's
 *     counters tell), and computes what the reference interpreter computes on every length
 *     pattern;
 *   - a corrupt entry, a truncated one, and an entry of another graph copied under this
 *     graph's name are never loaded: the graph compiles and the entry is rewritten;
 *   - an entry other users could have written (by its mode, or its directory's) is not loaded;
 *   - concurrent writers of one entry leave one complete entry and no temporary files;
 *   - beyond RAGJIT_CACHE_MAX_MB the least recently used entries are deleted;
 *   - a directory that cannot be written costs only the cache; one that can only be read
 *     still gives hits; "" turns the cache off;
 *   - kernels compiled late (cpu.c) have an entry of their own, loaded when a run needs them.
 */
#include "stdenv.h"

#include <dirent.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "../src/runtime/runtime.h"

extern char **environ;

static const char *const chains[] = {"softmax(relu(x*w+v), dim=1)", "silu(gelu_tanh(x))"};

/* Compiles chain c with the cache in dir (the context's setting) and, when check, compares
 * with the interpreter on every length pattern. Returns the program's compile counters. */
static void compile_for(rj_ctx *ctx, rj_target target, const char *dir, int c, bool check,
                        uint64_t *compiles, uint64_t *hits) {
    assert_ok(ctx, rj_ctx_set_cache_dir(ctx, dir));
    uint64_t c0 = cpu_compile_count(ctx), h0 = cpu_disk_hit_count(ctx), o0 = opencl_disk_hit_count();
    env e = env_new(ctx, RJ_F32);
    std_chain_add(&e, chains[c]);
    rj_program *p = rj_program_new(e.g, target), *pr = rj_program_new(e.g, RJ_TARGET_REFERENCE);
    if (!p || !pr) fail_msg("compiling %s: %s", chains[c], rj_ctx_error(ctx));
    *compiles = cpu_compile_count(ctx) - c0;
    *hits = target == RJ_TARGET_CPU ? cpu_disk_hit_count(ctx) - h0 : opencl_disk_hit_count() - o0;
    for (int pat = 0; check && pat < LEN_PATTERN_COUNT; pat++) {
        data d = data_new((len_pattern)pat, RJ_F32, 5);
        rj_bind *b = rj_bind_new(p), *br = rj_bind_new(pr);
        bind_all(ctx, b, &e, &d, NULL);
        bind_all(ctx, br, &e, &d, NULL);
        assert_ok(ctx, rj_program_run(p, b));
        assert_ok(ctx, rj_program_run(pr, br));
        for (int o = 0; o < rj_graph_output_count(e.g); o++) {
            rj_tensor_info got, want;
            rj_node n = rj_graph_output_at(e.g, o);
            rj_tensor_get_info(rj_bind_result(b, n), &got);
            rj_tensor_get_info(rj_bind_result(br, n), &want);
            compare(chains[c], &got, &want);
        }
        rj_bind_free(b);
        rj_bind_free(br);
        data_free(&d);
    }
    rj_program_free(p);
    rj_program_free(pr);
    rj_graph_free(e.g);
}

static void compile_chain(rj_ctx *ctx, const char *dir, int c, bool check, uint64_t *compiles,
                          uint64_t *hits) {
    compile_for(ctx, RJ_TARGET_CPU, dir, c, check, compiles, hits);
}

/* The child: compile chain c into dir (for OpenCL when `which` starts with 'o'), exit 0 on
 * success. */
static int child_main(const char *dir, const char *which) {
    rj_ctx *ctx = rj_ctx_new(NULL, NULL);
    if (!ctx || rj_ctx_set_cache_dir(ctx, dir)) return 3;
    rj_target target = which[0] == 'o' ? RJ_TARGET_OPENCL : RJ_TARGET_CPU;
    int c = atoi(which + (which[0] == 'o'));
    env e = env_new(ctx, RJ_F32);
    std_chain_add(&e, chains[c]);
    rj_program *p = rj_program_new(e.g, target);
    int r = p ? 0 : 4;
    if (!p) fprintf(stderr, "child: %s\n", rj_ctx_error(ctx));
    rj_program_free(p);
    rj_graph_free(e.g);
    rj_ctx_free(ctx);
    return r;
}

static pid_t spawn_for(const char *dir, int c, bool opencl) {
    char which[8];
    snprintf(which, sizeof which, "%s%d", opencl ? "o" : "", c);
    char *argv[] = {"test_cache", "--child", (char *)dir, which, NULL};
    pid_t pid;
    if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ)) fail_msg("posix_spawn failed");
    return pid;
}

static pid_t spawn_child(const char *dir, int c) { return spawn_for(dir, c, false); }

static void wait_ok(pid_t pid) {
    int st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("child %d failed (status %d)", (int)pid, st);
}

/* Entries (*.rjk) and temporary files in dir; the path of the last entry in path. */
static int count_files(const char *dir, int *tmps, char *path, size_t n) {
    DIR *d = opendir(dir);
    int k = 0;
    *tmps = 0;
    if (!d) return 0;
    for (struct dirent *de; (de = readdir(d));) {
        size_t l = strlen(de->d_name);
        if (l > 4 && !strcmp(de->d_name + l - 4, ".rjk")) {
            k++;
            if (path) snprintf(path, n, "%s/%s", dir, de->d_name);
        } else if (!strncmp(de->d_name, ".tmp", 4)) {
            (*tmps)++;
        }
    }
    closedir(d);
    return k;
}

static char *new_dir(void) {
    char *t = malloc(64);
    snprintf(t, 64, "/tmp/ragjit-cache-test-XXXXXX");
    if (!mkdtemp(t)) fail_msg("mkdtemp failed");
    return t;
}

static void remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    char p[512];
    for (struct dirent *de; (de = readdir(d));) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

static void *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot read %s", path);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = malloc(*n);
    if (fread(p, 1, *n, f) != *n) fail_msg("short read of %s", path);
    fclose(f);
    return p;
}

static void write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) fail_msg("cannot write %s", path);
    fclose(f);
}

/* A process compiles; the next loads, and computes the same as the interpreter. */
static void test_hit_across_processes(void **state) {
    fixture *f = *state;
    char *dir = new_dir();
    wait_ok(spawn_child(dir, 0));
    int tmps;
    assert_int_equal(count_files(dir, &tmps, NULL, 0), 1);
    assert_int_equal(tmps, 0);
    uint64_t compiles, hits;
    compile_chain(f->ctx, dir, 0, true, &compiles, &hits);
    assert_int_equal(compiles, 0);
    assert_int_equal(hits, 1);
    /* a JIT that has only loaded code makes its TargetMachine when it must: an assembly dump */
    env e = env_new(f->ctx, RJ_F32);
    std_chain_add(&e, chains[0]);
    rj_program *p = rj_program_new(e.g, RJ_TARGET_CPU);
    char *text = p ? rj_program_dump(p, "asm") : NULL;
    if (!text) fail_msg("assembly after a load: %s", rj_ctx_error(f->ctx));
    assert_non_null(strstr(text, "\tret"));
    rj_string_free(f->ctx, text);
    rj_program_free(p);
    rj_graph_free(e.g);
    /* another graph is another entry */
    compile_chain(f->ctx, dir, 1, true, &compiles, &hits);
    assert_int_equal(compiles, 1);
    assert_int_equal(hits, 0);
    assert_int_equal(count_files(dir, &tmps, NULL, 0), 2);
    remove_dir(dir);
    free(dir);
}

/* Kernels compiled late (a softmax's twin of runtime tiles, by the first run that needs it)
 * have an entry of their own: a context that loads the program from the cache loads them
 * too, when a run needs them, and compiles nothing. */
static void test_late_kernels_entry(void **state) {
    (void)state;
    char *dir = new_dir();
    static const int64_t len[] = {3, 300, 0, 5}; /* 300 rows overflow a 64 KiB stash */
    assert_int_equal(setenv("RAGJIT_STASH_BYTES", "65536", 1), 0);
    for (int round = 0; round < 2; round++) {
        rj_ctx *ctx = rj_ctx_new(NULL, NULL); /* a context of its own: nothing live to share */
        assert_ok(ctx, rj_ctx_set_cache_dir(ctx, dir));
        assert_ok(ctx, rj_ctx_set_threads(ctx, 1));
        int64_t n;
        rj_graph *g = late_graph(ctx, &n);
        rj_program *p = rj_program_new(g, RJ_TARGET_CPU), *pr = rj_program_new(g, RJ_TARGET_REFERENCE);
        if (!p || !pr) fail_msg("%s", rj_ctx_error(ctx));
        assert_int_equal(cpu_compile_count(ctx), round == 0);
        late_check(ctx, g, p, pr, len, 4, n);
        uint64_t lc, lh;
        cpu_late_counts(ctx, &lc, &lh);
        if (lc != (round == 0) || lh != (round == 1))
            fail_msg("round %d: %llu late compiles, %llu late loads", round, (unsigned long long)lc,
                     (unsigned long long)lh);
        int tmps;
        assert_int_equal(count_files(dir, &tmps, NULL, 0), 2); /* the program's and the late one's */
        rj_program_free(p);
        rj_program_free(pr);
        rj_graph_free(g);
        rj_ctx_free(ctx);
    }
    unsetenv("RAGJIT_STASH_BYTES");
    remove_dir(dir);
    free(dir);
}

/* Damaged and foreign entries are compiled over, never loaded. */
static void test_corrupt_and_foreign_entries(void **state) {
    fixture *f = *state;
    char *dir = new_dir();
    char path0[512], path1[512];
    int tmps;
    wait_ok(spawn_child(dir, 0));
    assert_int_equal(count_files(dir, &tmps, path0, sizeof path0), 1);
    size_t n;
    unsigned char *good = read_file(path0, &n);
    assert_true(n > 64);
    static const int damage[] = {0, 1, 2}; /* a flipped payload byte, a flipped key byte, truncated */
    for (size_t k = 0; k < sizeof damage / sizeof damage[0]; k++) {
        unsigned char *bad = malloc(n);
        memcpy(bad, good, n);
        size_t m = n;
        if (damage[k] == 0) bad[n - 10] ^= 0x40;
        else if (damage[k] == 1) bad[40] ^= 0x01;
        else m = n / 2;
        write_file(path0, bad, m);
        free(bad);
        rj_ctx *ctx = rj_ctx_new(NULL, NULL);
        uint64_t compiles, hits;
        compile_chain(ctx, dir, 0, true, &compiles, &hits);
        if (compiles != 1 || hits != 0) fail_msg("damage %d: %llu compiles, %llu hits", damage[k],
                                                  (unsigned long long)compiles, (unsigned long long)hits);
        rj_ctx_free(ctx);
        /* rewritten whole: the next process hits it again */
        size_t n2;
        unsigned char *again = read_file(path0, &n2);
        assert_int_equal(n2, n);
        assert_memory_equal(again, good, n);
        free(again);
    }
    /* chain 0's entry under chain 1's name: its key does not match, so chain 1 compiles */
    uint64_t compiles, hits;
    compile_chain(f->ctx, dir, 1, false, &compiles, &hits);
    assert_int_equal(count_files(dir, &tmps, NULL, 0), 2);
    DIR *d = opendir(dir);
    for (struct dirent *de; (de = readdir(d));)
        if (strstr(de->d_name, ".rjk") && strcmp(strrchr(path0, '/') + 1, de->d_name))
            snprintf(path1, sizeof path1, "%s/%s", dir, de->d_name);
    closedir(d);
    write_file(path1, good, n);
    rj_ctx *ctx = rj_ctx_new(NULL, NULL);
    compile_chain(ctx, dir, 1, true, &compiles, &hits);
    assert_int_equal(compiles, 1);
    assert_int_equal(hits, 0);
    rj_ctx_free(ctx);
    free(good);
    remove_dir(dir);
    free(dir);
}

/* An entry others could have written, or one in a directory others can write, is not code
 * to run: it is compiled over. */
static void test_untrusted_entries(void **state) {
    fixture *f = *state;
    (void)f;
    char *dir = new_dir();
    char path[512];
    int tmps;
    wait_ok(spawn_child(dir, 0));
    assert_int_equal(count_files(dir, &tmps, path, sizeof path), 1);
    uint64_t compiles, hits;
    static const struct { mode_t file, dir; } cases[] = {{0666, 0700}, {0620, 0700}, {0600, 0777}, {0600, 0770}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        chmod(path, cases[k].file);
        chmod(dir, cases[k].dir);
        rj_ctx *ctx = rj_ctx_new(NULL, NULL);
        compile_chain(ctx, dir, 0, k == 0, &compiles, &hits);
        if (hits != 0) fail_msg("file mode %o, directory mode %o: loaded", (unsigned)cases[k].file, (unsigned)cases[k].dir);
        rj_ctx_free(ctx);
    }
    chmod(dir, 0700);
    chmod(path, 0600); /* the rewrite made it 0600 anyway; a trusted entry loads again */
    rj_ctx *ctx = rj_ctx_new(NULL, NULL);
    compile_chain(ctx, dir, 0, false, &compiles, &hits);
    assert_int_equal(hits, 1);
    rj_ctx_free(ctx);
    remove_dir(dir);
    free(dir);
}

/* A file of `kb` KiB at dir/name, last modified `age` seconds ago. */
static void old_file(const char *dir, const char *name, int kb, int age) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f) fail_msg("cannot create %s", p);
    static char block[1024];
    for (int i = 0; i < kb; i++) fwrite(block, 1, sizeof block, f);
    fclose(f);
    chmod(p, 0600);
    struct timespec t[2];
    clock_gettime(CLOCK_REALTIME, &t[0]);
    t[0].tv_sec -= age;
    t[1] = t[0];
    utimensat(AT_FDCWD, p, t, 0);
}

static bool exists(const char *dir, const char *name) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

/* Beyond RAGJIT_CACHE_MAX_MB the least recently used entries go; so do temporary files a
 * killed writer left long ago. */
static void test_eviction(void **state) {
    fixture *f = *state;
    char *dir = new_dir();
    wait_ok(spawn_child(dir, 0)); /* a real entry, just written */
    old_file(dir, "cpu-0000000000000001.rjk", 600, 3 * 3600);
    old_file(dir, "cpu-0000000000000002.rjk", 600, 2 * 3600);
    old_file(dir, "cpu-0000000000000003.rjk", 600, 3600);
    old_file(dir, ".tmp-1-1", 1, 2 * 3600);
    old_file(dir, ".tmp-1-2", 1, 10);
    setenv("RAGJIT_CACHE_MAX_MB", "1", 1);
    uint64_t compiles, hits;
    compile_chain(f->ctx, dir, 1, false, &compiles, &hits); /* a store: 1.8 MB + two entries */
    unsetenv("RAGJIT_CACHE_MAX_MB");
    assert_int_equal(compiles, 1);
    assert_false(exists(dir, "cpu-0000000000000001.rjk"));
    assert_false(exists(dir, "cpu-0000000000000002.rjk"));
    assert_true(exists(dir, "cpu-0000000000000003.rjk")); /* 0.6 MB + entries: below 0.9 MB */
    assert_false(exists(dir, ".tmp-1-1"));
    assert_true(exists(dir, ".tmp-1-2")); /* maybe a writer at work */
    int tmps;
    assert_int_equal(count_files(dir, &tmps, NULL, 0), 3);
    /* both real entries are still there and load */
    rj_ctx *ctx = rj_ctx_new(NULL, NULL);
    compile_chain(ctx, dir, 0, false, &compiles, &hits);
    assert_int_equal(hits, 1);
    compile_chain(ctx, dir, 1, false, &compiles, &hits);
    assert_int_equal(hits, 1);
    rj_ctx_free(ctx);
    remove_dir(dir);
    free(dir);
}

/* Four processes compile the same graph into an empty directory at once. */
static void test_concurrent_writers(void **state) {
    fixture *f = *state;
    char *dir = new_dir();
    pid_t pids[4];
    for (int i = 0; i < 4; i++) pids[i] = spawn_child(dir, 1);
    for (int i = 0; i < 4; i++) wait_ok(pids[i]);
    int tmps;
    assert_int_equal(count_files(dir, &tmps, NULL, 0), 1);
    assert_int_equal(tmps, 0);
    uint64_t compiles, hits;
    compile_chain(f->ctx, dir, 1, true, &compiles, &hits);
    assert_int_equal(compiles, 0);
    assert_int_equal(hits, 1);
    remove_dir(dir);
    free(dir);
}

/* An unwritable place costs only the cache; a read-only directory still gives hits; "" is
 * off. */
static void test_unwritable_and_off(void **state) {
    fixture *f = *state;
    uint64_t compiles, hits;
    /* nobody, root included, can create a directory under /proc/self */
    compile_chain(f->ctx, "/proc/self/ragjit-cache", 0, true, &compiles, &hits);
    assert_int_equal(compiles, 1);
    /* a path through a regular file */
    compile_chain(f->ctx, "/proc/self/status/cache", 1, true, &compiles, &hits);
    assert_int_equal(compiles, 1);

    char *dir = new_dir();
    wait_ok(spawn_child(dir, 0));
    chmod(dir, 0555);
    rj_ctx *ctx = rj_ctx_new(NULL, NULL);
    compile_chain(ctx, dir, 0, true, &compiles, &hits);
    assert_int_equal(hits, 1);
    compile_chain(ctx, dir, 1, true, &compiles, &hits);
    assert_int_equal(compiles, 1);
    int tmps;
    if (geteuid() != 0) assert_int_equal(count_files(dir, &tmps, NULL, 0), 1); /* root writes anyway */
    rj_ctx_free(ctx);
    chmod(dir, 0700);
    remove_dir(dir);

    /* off: nothing read, nothing written */
    dir = (free(dir), new_dir());
    ctx = rj_ctx_new(NULL, NULL);
    assert_ok(ctx, rj_ctx_set_cache_dir(ctx, dir));
    assert_ok(ctx, rj_ctx_set_cache_dir(ctx, ""));
    env e = env_new(ctx, RJ_F32);
    std_chain_add(&e, chains[0]);
    rj_program *p = rj_program_new(e.g, RJ_TARGET_CPU);
    assert_non_null(p);
    assert_int_equal(count_files(dir, &tmps, NULL, 0), 0);
    rj_program_free(p);
    rj_graph_free(e.g);
    rj_ctx_free(ctx);
    remove_dir(dir);
    free(dir);
    assert_int_equal(rj_ctx_set_cache_dir(NULL, "x"), RJ_ERR_ARG);
}

/* OpenCL (PoCL in CI): the driver's program binary comes back in the next process. */
static void test_opencl_hit(void **state) {
    fixture *f = *state;
    env e = env_new(f->ctx, RJ_F32);
    std_chain_add(&e, chains[1]);
    assert_ok(f->ctx, rj_ctx_set_cache_dir(f->ctx, ""));
    rj_program *probe = rj_program_new(e.g, RJ_TARGET_OPENCL);
    rj_graph_free(e.g);
    if (!probe && rj_ctx_status(f->ctx) == RJ_ERR_NO_DEVICE) {
        printf("skipped: no OpenCL device (%s)\n", rj_ctx_error(f->ctx));
        skip();
    }
    if (!probe) fail_msg("OpenCL: %s", rj_ctx_error(f->ctx));
    rj_program_free(probe);
    char *dir = new_dir();
    wait_ok(spawn_for(dir, 0, true));
    int tmps;
    assert_int_equal(count_files(dir, &tmps, NULL, 0), 1);
    uint64_t compiles, hits;
    compile_for(f->ctx, RJ_TARGET_OPENCL, dir, 0, true, &compiles, &hits);
    assert_int_equal(hits, 1);
    remove_dir(dir);
    free(dir);
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--child")) return child_main(argv[2], argv[3]);
    const struct CMUnitTest tests[] = {
        FX(test_hit_across_processes),
        FX(test_corrupt_and_foreign_entries),
        FX(test_untrusted_entries),
        FX(test_concurrent_writers),
        FX(test_eviction),
        FX(test_unwritable_and_off),
        FX(test_opencl_hit),
        FX(test_late_kernels_entry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
