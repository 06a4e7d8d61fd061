/*
 * harness.h — shared test support: fixtures over the tracking allocator (tracker.h), random
 * ragged data, and helpers to run graphs and compare results.
 *
 * Every test runs on a context whose allocator records each block's size in a header and
 * checks it against the osize ragjit passes back, counts live blocks, and can fail the Nth
 * allocation. The teardown fails the test if anything leaked or a size was misreported.
 *
 * Length patterns cover the shapes of real ragged batches that break naive code: B = 1, B = 0,
 * empty rows, all rows empty, one row 1000x longer than the rest, and skewed (geometric)
 * lengths.
 */
#ifndef RJ_TEST_HARNESS_H
#define RJ_TEST_HARNESS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ragjit.h"
#include "tracker.h"

/* Fixture state: a tracker and a context using it. */
typedef struct fixture {
    tracker tr;
    rj_ctx *ctx;
} fixture;

int fx_setup(void **state);
int fx_teardown(void **state);
#define FX(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)

/* ---- running a group, or a part of it -------------------------------------------------- */

/*
 * run_group(tests, setup, teardown, argc, argv) runs a cmocka group, as cmocka_run_group_tests
 * does, or the part of it that the command line names, so that a slow program can be
 * registered as several meson tests that run in parallel (tests/meson.build: jit-1of8 ...):
 *
 *   --shard K/N    shard K of N: of the plain tests, those whose index i among them (0-based,
 *                  in the group's order) has i % N == K - 1; and every sliced test (FX_SLICED),
 *                  which does the part of its own loop that in_shard() gives it
 *   --only NAME    the test named NAME (repeatable; a NAME that is no test is an error)
 *   --list         print the names of the tests it would run, one a line, and run nothing
 *
 * The N shards together check exactly what the whole group checks, each test and each item of
 * a sliced test's loop in one shard. Call it after the program's own modes (children started
 * with --child and the like): an argument it does not know is an error. Returns cmocka's count
 * of failed tests, or 2 for a bad command line.
 */
int run_group_part(const char *group, const struct CMUnitTest *tests, size_t n,
                   CMFixtureFunction setup, CMFixtureFunction teardown, int argc, char **argv);

/* A test whose loop is too slow for one shard: it runs in every shard and does there the items
 * i of its loop for which in_shard(i) holds (all of them when the program runs whole). A loop
 * of heavy items should be sliced so rather than cut into tests of its own, which round-robin
 * could hand to one shard together. */
int fx_setup_sliced(void **state);
#define FX_SLICED(f) cmocka_unit_test_setup_teardown(f, fx_setup_sliced, fx_teardown)
bool in_shard(uint64_t i);
#define run_group(tests, setup, teardown, argc, argv)                                          \
    run_group_part(#tests, tests, sizeof(tests) / sizeof((tests)[0]), setup, teardown, argc, argv)

/* ---- random data ----------------------------------------------------------------------- */

uint64_t rng_next(uint64_t *s);
double rng_uniform(uint64_t *s, double lo, double hi); /* [lo, hi) */
int64_t rng_int(uint64_t *s, int64_t lo, int64_t hi);  /* [lo, hi] */

typedef enum {
    LEN_UNIFORM,   /* B = 7, lengths 0..9 */
    LEN_B1,        /* B = 1 */
    LEN_EMPTY,     /* some rows empty, including the first and last */
    LEN_ALL_EMPTY, /* every row empty */
    LEN_ONE_LONG,  /* one row 1000x longer than the others */
    LEN_SKEWED,    /* geometric lengths */
    LEN_B0,        /* no items at all */
    LEN_PATTERN_COUNT
} len_pattern;

extern const char *const len_pattern_names[LEN_PATTERN_COUNT];

/* Offsets for a pattern (malloc'd, B+1 entries); returns B. */
int64_t make_offsets(len_pattern p, uint64_t *seed, int64_t **offsets);
/* n random values of dtype t, malloc'd; floats in [-2, 2), ints in [-5, 5], bools 50/50. */
void *random_values(rj_dtype t, int64_t n, uint64_t *seed);

/* ---- running --------------------------------------------------------------------------- */

/* Element as double, whatever the dtype. */
double elem_get(const void *p, rj_dtype t, int64_t i);

/* Asserts |a - b| <= atol + rtol |b| elementwise (NaNs must match, infs must be equal). */
void assert_close_f(const char *what, const void *got, rj_dtype t, const double *want,
                    int64_t n, double atol, double rtol);

/* Fails the test with the context's message when s != RJ_OK. */
#define assert_ok(ctx, s)                                                                     \
    do {                                                                                      \
        rj_status s_ = (s);                                                                   \
        if (s_ != RJ_OK) fail_msg("%s: %s", rj_status_str(s_), rj_ctx_error(ctx));            \
    } while (0)

/* Asserts that the context's last message contains `needle`. */
void assert_error_contains(rj_ctx *ctx, const char *needle);

/* ---- generated source ------------------------------------------------------------------ */

/* Does s contain `word` as a whole C token outside // comments? */
bool has_code_word(const char *s, const char *word);
int count_substr(const char *s, const char *needle);

#endif
