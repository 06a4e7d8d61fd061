/*
 * harness.c — fixtures and random ragged data used by every test (the tracking allocator is
 * tracker.c).
 */
#include "harness.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int fx_setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    if (!f) return -1;
    f->ctx = rj_ctx_new(tracking_alloc, &f->tr);
    if (!f->ctx) return -1;
    *state = f;
    return 0;
}

int fx_teardown(void **state) {
    fixture *f = *state;
    rj_ctx_free(f->ctx);
    long live = f->tr.live_blocks;
    int bad = f->tr.bad_size;
    free(f);
    if (live != 0) fprintf(stderr, "LEAK: %ld blocks still allocated after the test\n", live);
    if (bad) fprintf(stderr, "BAD SIZE: ragjit misreported a block size\n");
    return live != 0 || bad ? -1 : 0;
}

/* ---- running a group, or a part of it -------------------------------------------------- */

static long shard_k = 1, shard_n = 1; /* this process's shard, K of N */

int fx_setup_sliced(void **state) { return fx_setup(state); }

bool in_shard(uint64_t i) { return i % (uint64_t)shard_n == (uint64_t)(shard_k - 1); }

int run_group_part(const char *group, const struct CMUnitTest *tests, size_t n,
                   CMFixtureFunction setup, CMFixtureFunction teardown, int argc, char **argv) {
    bool list = false, only = false;
    bool *pick = calloc(n ? n : 1, sizeof *pick);
    struct CMUnitTest *part = malloc(sizeof *part * (n ? n : 1));
    if (!pick || !part) {
        fprintf(stderr, "%s: out of memory\n", group);
        return 2;
    }
    for (int a = 1; a < argc; a++) {
        char *end;
        if (!strcmp(argv[a], "--list")) {
            list = true;
        } else if (!strcmp(argv[a], "--shard") && a + 1 < argc) {
            shard_k = strtol(argv[++a], &end, 10);
            shard_n = *end == '/' ? strtol(end + 1, &end, 10) : 0;
            if (*end || shard_n < 1 || shard_k < 1 || shard_k > shard_n) {
                fprintf(stderr, "%s: --shard takes K/N with 1 <= K <= N, not '%s'\n", group, argv[a]);
                return 2;
            }
        } else if (!strcmp(argv[a], "--only") && a + 1 < argc) {
            size_t i = 0;
            while (i < n && strcmp(tests[i].name, argv[a + 1])) i++;
            if (i == n) {
                fprintf(stderr, "%s: no test named '%s' (--list lists them)\n", group, argv[a + 1]);
                return 2;
            }
            pick[i] = only = true;
            a++;
        } else {
            fprintf(stderr, "%s: unknown argument '%s' (--shard K/N, --only NAME, --list)\n", group,
                    argv[a]);
            return 2;
        }
    }
    size_t m = 0;
    for (size_t i = 0, plain = 0; i < n; i++) {
        bool sliced = tests[i].setup_func == fx_setup_sliced;
        bool mine = sliced || (long)(plain % (size_t)shard_n) == shard_k - 1;
        if (!sliced) plain++;
        if (!mine || (only && !pick[i])) continue;
        if (list) printf("%s\n", tests[i].name);
        part[m++] = tests[i];
    }
    int failed = 0;
    if (!list) {
        char name[256];
        if (shard_n > 1) snprintf(name, sizeof name, "%s (shard %ld of %ld)", group, shard_k, shard_n);
        else snprintf(name, sizeof name, "%s", group);
        failed = _cmocka_run_group_tests(name, part, m, setup, teardown);
    }
    free(part);
    free(pick);
    return failed;
}

/* ---- random data ----------------------------------------------------------------------- */

uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double rng_uniform(uint64_t *s, double lo, double hi) {
    return lo + (hi - lo) * (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

int64_t rng_int(uint64_t *s, int64_t lo, int64_t hi) {
    return lo + (int64_t)(rng_next(s) % (uint64_t)(hi - lo + 1));
}

const char *const len_pattern_names[LEN_PATTERN_COUNT] = {
    "uniform", "B=1", "empty rows", "all empty", "one row 1000x longer", "skewed", "B=0"};

int64_t make_offsets(len_pattern p, uint64_t *seed, int64_t **offsets) {
    int64_t B;
    switch (p) {
    case LEN_B1: B = 1; break;
    case LEN_ALL_EMPTY: B = 4; break;
    case LEN_ONE_LONG: B = 5; break;
    case LEN_SKEWED: B = 12; break;
    case LEN_B0: B = 0; break;
    default: B = 7; break;
    }
    int64_t *off = malloc(sizeof(int64_t) * (size_t)(B + 1));
    off[0] = 0;
    int64_t longone = rng_int(seed, 0, B > 0 ? B - 1 : 0);
    for (int64_t b = 0; b < B; b++) {
        int64_t len;
        switch (p) {
        case LEN_B1: len = rng_int(seed, 1, 12); break;
        case LEN_EMPTY: len = (b == 0 || b == B - 1 || b % 3 == 1) ? 0 : rng_int(seed, 1, 6); break;
        case LEN_ALL_EMPTY: len = 0; break;
        case LEN_ONE_LONG: len = b == longone ? 1000 : 1; break;
        case LEN_SKEWED: len = (int64_t)1 << rng_int(seed, 0, 7); break;
        default: len = rng_int(seed, 0, 9); break;
        }
        off[b + 1] = off[b] + len;
    }
    *offsets = off;
    return B;
}

void *random_values(rj_dtype t, int64_t n, uint64_t *seed) {
    size_t es = rj_dtype_size(t);
    void *p = malloc(es * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) {
        switch (t) {
        case RJ_BOOL: ((uint8_t *)p)[i] = (uint8_t)(rng_next(seed) & 1); break;
        case RJ_I32: ((int32_t *)p)[i] = (int32_t)rng_int(seed, -5, 5); break;
        case RJ_I64: ((int64_t *)p)[i] = rng_int(seed, -5, 5); break;
        default: rj_value_set(t, p, i, rng_uniform(seed, -2, 2)); break; /* floats, rounded */
        }
    }
    return p;
}

double elem_get(const void *p, rj_dtype t, int64_t i) {
    return rj_value_get(t, p, i);
}

void assert_close_f(const char *what, const void *got, rj_dtype t, const double *want,
                    int64_t n, double atol, double rtol) {
    for (int64_t i = 0; i < n; i++) {
        double g = elem_get(got, t, i), w = want[i];
        if (isnan(w) && isnan(g)) continue;
        if (isinf(w) && g == w) continue;
        if (fabs(g - w) <= atol + rtol * fabs(w)) continue;
        fail_msg("%s: element %lld is %.9g, expected %.9g", what, (long long)i, g, w);
    }
}

void assert_error_contains(rj_ctx *ctx, const char *needle) {
    const char *msg = rj_ctx_error(ctx);
    if (!strstr(msg, needle)) fail_msg("expected an error containing \"%s\", got \"%s\"", needle, msg);
}

/* ---- generated source ------------------------------------------------------------------ */

/* Does s contain `word` as a whole C token outside // comments? */
bool has_code_word(const char *s, const char *word) {
    size_t n = strlen(word);
    for (const char *p = s; (p = strstr(p, word)); p++) {
        const char *line = p;
        while (line > s && line[-1] != '\n') line--;
        const char *c = strstr(line, "//");
        if (c && c < p) continue;
        bool before = p > s && (isalnum((unsigned char)p[-1]) || p[-1] == '_');
        bool after = isalnum((unsigned char)p[n]) || p[n] == '_';
        if (!before && !after) return true;
    }
    return false;
}

int count_substr(const char *s, const char *needle) {
    int n = 0;
    for (; (s = strstr(s, needle)); s += strlen(needle)) n++;
    return n;
}
