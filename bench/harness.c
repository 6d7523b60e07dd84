/*
 * harness.c — warm-up, calibration, timed rounds and the median.
 * See harness.h for the command line and the output format.
 */
#define _POSIX_C_SOURCE 200809L

#include "harness.h"

#include <fenv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Bazel's compilation mode (opt, fastbuild, dbg), set in BUILD. It is the
 * mode the library under test was built in: the benchmark code itself is
 * always -O2. */
#ifndef BENCH_COMPILATION_MODE
#define BENCH_COMPILATION_MODE unknown
#endif
#define STRINGIFY(word) #word
#define EXPAND_AND_STRINGIFY(macro) STRINGIFY(macro)
#define COMPILATION_MODE EXPAND_AND_STRINGIFY(BENCH_COMPILATION_MODE)

#define DEFAULT_ROUNDS 9
#define DEFAULT_ROUND_MS 60
#define MAX_ROUNDS 1000

/* Settings taken from the command line. */
typedef struct {
    unsigned rounds;
    unsigned round_ms;
    int lockstep;
} bench_options;

uint64_t bench_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Runs the operation n times; returns how long that took, in ns. The
 * floating-point flags are cleared first: see harness.h. */
static uint64_t time_ops(const bench_spec *s, uint64_t n) {
    feclearexcept(FE_ALL_EXCEPT);
    uint64_t start = bench_now_ns();
    s->run(s->ctx, n);
    return bench_now_ns() - start;
}

/*
 * Warm-up and calibration in one: grow n until n operations last at least
 * round_ns, and return that n. Runs shorter than 1% of a round are too
 * noisy to extrapolate from, so n grows tenfold; after that it jumps
 * straight to 1.2x the estimate. The last run is itself a full-length
 * warm-up (caches, branch predictors, CPU frequency).
 */
static uint64_t calibrate(const bench_spec *s, uint64_t round_ns) {
    uint64_t n = 1;
    for (;;) {
        uint64_t ns = time_ops(s, n);
        if (ns >= round_ns)
            return n;
        if (ns < round_ns / 100)
            n *= 10;
        else
            n = (uint64_t)((double)n * 1.2 * (double)round_ns / (double)ns) + 1;
    }
}

/* Times one round of n operations, prints its line, returns ns per unit. */
static double run_round(const bench_spec *s, uint64_t n, unsigned index) {
    uint64_t ns = time_ops(s, n);
    double per_unit = (double)ns / ((double)n * s->units_per_op);
    printf("round name=%s index=%u ops=%llu ns=%llu ns_per_unit=%.3f\n",
           s->name, index, (unsigned long long)n, (unsigned long long)ns,
           per_unit);
    fflush(stdout);
    return per_unit;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..count-1]; sorts v in place. */
static double median(double *v, unsigned count) {
    qsort(v, count, sizeof v[0], compare_doubles);
    if (count % 2)
        return v[count / 2];
    return (v[count / 2 - 1] + v[count / 2]) / 2;
}

/* Parses a positive decimal number no larger than max; 0 if invalid. */
static unsigned parse_count(const char *text, unsigned max) {
    char *end;
    unsigned long value = strtoul(text, &end, 10);
    if (*text == '\0' || *end != '\0' || value == 0 || value > max)
        return 0;
    return (unsigned)value;
}

/* Fills *o from argv; returns 0, or -1 after printing the usage. */
static int parse_options(int argc, char **argv, bench_options *o) {
    o->rounds = DEFAULT_ROUNDS;
    o->round_ms = DEFAULT_ROUND_MS;
    o->lockstep = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--lockstep") == 0) {
            o->lockstep = 1;
        } else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
            if ((o->rounds = parse_count(argv[++i], MAX_ROUNDS)) == 0)
                goto usage;
        } else if (strcmp(argv[i], "--round-ms") == 0 && i + 1 < argc) {
            if ((o->round_ms = parse_count(argv[++i], 60000)) == 0)
                goto usage;
        } else {
            goto usage;
        }
    }
    return 0;
usage:
    fprintf(stderr, "usage: %s [--rounds N] [--round-ms MS] [--lockstep]\n",
            argv[0]);
    return -1;
}

/* Stand-alone mode: all rounds back to back, then the median. */
static void run_standalone(const bench_spec *s, uint64_t n, unsigned rounds) {
    double results[MAX_ROUNDS];
    for (unsigned i = 0; i < rounds; i++)
        results[i] = run_round(s, n, i + 1);
    printf("median name=%s rounds=%u ns_per_unit=%.3f\n", s->name, rounds,
           median(results, rounds));
}

/* Lockstep mode: one round per line on stdin, until end of input. */
static void run_lockstep(const bench_spec *s, uint64_t n) {
    char line[64];
    unsigned index = 0;
    while (fgets(line, sizeof line, stdin) != NULL)
        run_round(s, n, ++index);
}

int bench_main(int argc, char **argv, const bench_spec *spec) {
    bench_options o;
    if (parse_options(argc, argv, &o) != 0)
        return 2;
    feclearexcept(FE_ALL_EXCEPT);
    if (spec->setup != NULL && spec->setup(spec->ctx) != 0)
        return 1;
    uint64_t n = calibrate(spec, (uint64_t)o.round_ms * 1000000u);
    printf("ready name=%s ops_per_round=%llu unit=%s units_per_op=%u "
           "mode=%s\n",
           spec->name, (unsigned long long)n, spec->unit, spec->units_per_op,
           COMPILATION_MODE);
    fflush(stdout);
    if (o.lockstep)
        run_lockstep(spec, n);
    else
        run_standalone(spec, n, o.rounds);
    if (spec->teardown != NULL && spec->teardown(spec->ctx) != 0)
        return 1;
    return 0;
}
