/*
 * sleepers_main.c — the driver of sleepers.h: offsets, lead, CPU time,
 * lockstep lines, checks.
 */
#define _GNU_SOURCE
#include "sleepers.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef BENCH_COMPILATION_MODE
#define BENCH_COMPILATION_MODE unknown
#endif
#define STRINGIFY(word) #word
#define EXPAND_AND_STRINGIFY(macro) STRINGIFY(macro)
#define COMPILATION_MODE EXPAND_AND_STRINGIFY(BENCH_COMPILATION_MODE)

#define WINDOW_NS_PER_SLEEPER 50
#define SEED 1

uint64_t sleepers_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* splitmix64, as in timers.c: the same offsets in both benchmarks. */
static uint64_t prng_state;
static uint64_t prng_next(void) {
    uint64_t z = (prng_state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* The lead before the first deadline: a quarter more than the set phase
 * last seen (the machine is noisy), plus 50 ms. */
static uint64_t lead_after(uint64_t set_ns) {
    return set_ns + set_ns / 4 + 50u * 1000 * 1000;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int sleepers_main(int argc, char **argv, const sleepers_spec *spec) {
    const char *name = spec->name;
    size_t n = spec->n;
    unsigned long rounds = 5;
    bool lockstep = false;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--lockstep") == 0) {
            lockstep = true;
        } else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
            rounds = strtoul(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--round-ms") == 0 && i + 1 < argc) {
            i++; /* a round is N sleepers, however long that takes */
        } else {
            fprintf(stderr, "usage: %s [--rounds R] [--lockstep]\n", argv[0]);
            return 2;
        }
    }
    if (rounds < 1 || rounds > 1000) {
        fprintf(stderr, "%s: --rounds must be 1 to 1000\n", name);
        return 2;
    }

    uint64_t *offset = calloc(n, sizeof *offset);
    double *per_sleeper = calloc(rounds, sizeof *per_sleeper);
    if (offset == NULL || per_sleeper == NULL) {
        fprintf(stderr, "%s: out of memory\n", name);
        return 1;
    }
    if (spec->setup != NULL && spec->setup(n) != 0)
        return 1;

    size_t slept = 0, early = 0, expected = 0;
    uint64_t lead = 100u * 1000 * 1000; /* the warm-up's: generous */
    uint64_t window = n * WINDOW_NS_PER_SLEEPER;
    sleepers_round r;

    /* Round 0 is the warm-up; then one round per line read (lockstep) or
     * `rounds` rounds. */
    for (unsigned long index = 0;; index++) {
        if (index == 1 && lockstep) {
            printf("ready name=%s ops_per_round=1 unit=sleeper "
                   "units_per_op=%zu mode=%s\n", name, n, COMPILATION_MODE);
            fflush(stdout);
        }
        if (index >= 1) {
            if (lockstep) {
                int c;
                while ((c = getchar()) != '\n' && c != EOF)
                    ;
                if (c == EOF)
                    break;
            } else if (index > rounds) {
                break;
            }
        }
        /* The round's deadlines: the same for both benchmarks. */
        prng_state = SEED * 1000003u + index;
        for (size_t i = 0; i < n; i++)
            offset[i] = prng_next() % window;

        uint64_t cpu0 = sleepers_cpu_ns();
        spec->round(n, offset, lead, &r);
        uint64_t cpu = sleepers_cpu_ns() - cpu0;

        lead = lead_after(r.set_ns);
        slept += r.slept;
        early += r.early;
        expected += n;
        if (index == 0)
            continue;
        double ns = (double)cpu / (double)n;
        if (index <= rounds)
            per_sleeper[index - 1] = ns;
        printf("round name=%s index=%lu ops=1 ns=%llu ns_per_unit=%.3f\n",
               name, index, (unsigned long long)cpu, ns);
        fflush(stdout);
    }
    if (!lockstep) {
        qsort(per_sleeper, rounds, sizeof *per_sleeper, compare_doubles);
        printf("median name=%s rounds=%lu ns_per_unit=%.3f\n", name, rounds,
               per_sleeper[rounds / 2]);
    }
    free(offset);
    free(per_sleeper);
    if (slept != expected || early != 0) {
        fprintf(stderr, "%s: %zu of %zu sleepers woke, %zu early\n", name,
                slept, expected, early);
        return 1;
    }
    return 0;
}
