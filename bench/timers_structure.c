/*
 * timers_structure.c — //bench:timers_structure: the timer heap of
 * ch03_timers alone (timer.c, compiled into this program), without
 * coroutines, beside a plain binary heap (timers_heap.cc), in the same run.
 *
 *   ./tools/bazelw run -c opt //bench:timers_structure            # 1M, 100k
 *   bazel-bin/bench/timers_structure --n 1000000 --rounds 9
 *
 * //bench:timers measures set + fire end to end, with a coroutine behind
 * every timer: its figure is a difference of two large, noisy times (every
 * coroutine's stack and struct is a cache and TLB miss). This one isolates
 * what the data structure costs. A round: N timers with random deadlines
 * (uniform over N x 50 ns, a seeded PRNG), added in order, then every one
 * popped (coro__timers_pop_due with a `now` past them all), checked in
 * (deadline, set order) order, 16 at a time as the pump takes them. The
 * timers belong to N stand-in coroutines (an array of `struct coro`, 192
 * bytes each, never read here: their index is their address). The heap
 * never reads a coroutine, and the misses a pump takes on them are not
 * counted (the pump, not the heap, asks for a due coroutine's memory; the
 * set loop brings each one's line in ahead, as the running coroutine's
 * would be: see round_ours()).
 * The baseline: the same N deadlines through std::push_heap / pop_heap on a
 * std::vector of (deadline, seq). The two alternate round by round; the
 * figures are medians.
 */
#define _GNU_SOURCE
#include "coro_impl.h"
#include "timers_heap.h"

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

enum { MAX_ROUNDS = 100 };
#define WINDOW_NS_PER_TIMER 50

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t prng_state;
static uint64_t prng_next(void) { /* splitmix64 */
    uint64_t z = (prng_state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static void *checked_calloc(size_t count, size_t size) {
    void *p = calloc(count, size);
    if (p == NULL) {
        fprintf(stderr, "timers_structure: out of memory\n");
        exit(2);
    }
    return p;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, unsigned count) {
    qsort(v, count, sizeof v[0], compare_doubles);
    return count % 2 ? v[count / 2] : (v[count / 2 - 1] + v[count / 2]) / 2;
}

typedef struct {
    double set[MAX_ROUNDS], fire[MAX_ROUNDS], total[MAX_ROUNDS];
} timings;

/* One round of ours. Returns how many timers came out of order. The pops
 * are only recorded while timed (`order`, written in sequence) and checked
 * after: reading their deadlines while timed would add a cache miss per
 * timer that the baseline does not pay. */
static size_t round_ours(coro_timers *t, coro *coros, const uint64_t *dl,
                         uint32_t *order, size_t n, timings *out,
                         unsigned r) {
    size_t wrong = 0, popped = 0, got;
    coro *due[16]; /* batches of 16, as the pump takes them */

    uint64_t t0 = now_ns();
    for (size_t i = 0; i < n; i++) {
        /* Adding writes the timer's id into its coroutine. In a pump that
         * coroutine is the running one, its struct in the cache; a cold
         * stand-in would charge the heap a store miss per timer (about 20
         * to 30 ns at a million) that a pump does not pay. So ask for the
         * stand-in's line a few timers ahead. */
        __builtin_prefetch(&coros[i + 16 < n ? i + 16 : i].timer_id, 1);
        coro__timers_add(t, &coros[i], dl[i]);
    }
    uint64_t t1 = now_ns();
    while ((got = coro__timers_pop_due(t, UINT64_MAX, due, 16)) > 0) {
        for (size_t k = 0; k < got && popped + k < n; k++)
            order[popped + k] = (uint32_t)(due[k] - coros); /* set order */
        popped += got;
    }
    uint64_t t2 = now_ns();
    for (size_t k = 1; k < n && popped == n; k++) {
        uint32_t a = order[k - 1], b = order[k];
        wrong += dl[b] < dl[a] || (dl[b] == dl[a] && b < a);
    }
    out->set[r] = (double)(t1 - t0) / (double)n;
    out->fire[r] = (double)(t2 - t1) / (double)n;
    out->total[r] = (double)(t2 - t0) / (double)n;
    return wrong + (popped != n);
}

static size_t round_heap(const uint64_t *dl, size_t n, timings *out,
                         unsigned r) {
    uint64_t sum;
    uint64_t t0 = now_ns();
    timers_heap_push_all(dl, n);
    uint64_t t1 = now_ns();
    size_t wrong = timers_heap_pop_all(&sum);
    uint64_t t2 = now_ns();
    out->set[r] = (double)(t1 - t0) / (double)n;
    out->fire[r] = (double)(t2 - t1) / (double)n;
    out->total[r] = (double)(t2 - t0) / (double)n;
    return wrong + (sum != (uint64_t)n * (n - 1) / 2);
}

/* Measure N timers; prints two rows and the ratio. Returns failures. */
static int measure(size_t n, unsigned rounds, uint64_t seed) {
    coro *coros = checked_calloc(n, sizeof *coros);
    uint64_t *dl = checked_calloc(n, sizeof *dl);
    uint32_t *order = checked_calloc(n, sizeof *order);
    coro_timers t = {0};
    timings ours, heap;
    size_t wrong_ours = 0, wrong_heap = 0;

    if (coro__timers_reserve(&t, n) != 0 || timers_heap_reserve(n) != 0) {
        fprintf(stderr, "timers_structure: out of memory\n");
        exit(2);
    }
    for (unsigned r = 0; r <= rounds; r++) { /* round 0: warm-up */
        unsigned k = r == 0 ? 0 : r - 1;
        prng_state = seed * 1000003u + r;
        for (size_t i = 0; i < n; i++)
            dl[i] = 1000 + prng_next() % (n * WINDOW_NS_PER_TIMER);
        if (r % 2) {
            wrong_ours += round_ours(&t, coros, dl, order, n, &ours, k);
            wrong_heap += round_heap(dl, n, &heap, k);
        } else {
            wrong_heap += round_heap(dl, n, &heap, k);
            wrong_ours += round_ours(&t, coros, dl, order, n, &ours, k);
        }
    }
    double o_set = median(ours.set, rounds), o_fire = median(ours.fire, rounds);
    double o_total = median(ours.total, rounds);
    double h_set = median(heap.set, rounds), h_fire = median(heap.fire, rounds);
    double h_total = median(heap.total, rounds);
    printf("  %-44s %9zu %8.1f %8.1f %11.1f\n", "4-ary heap, timer.c (ours)",
           n, o_set, o_fire, o_total);
    printf("  %-44s %9zu %8.1f %8.1f %11.1f\n",
           "binary heap, std::push/pop_heap (baseline)", n, h_set, h_fire,
           h_total);
    /* The course's target: ours at most the binary heap. */
    printf("  structure, %zu timers: %.1f ns per timer set + fire; "
           "ours / binary heap: %.2fx; target <= 1: %s\n", n, o_total,
           o_total / h_total, o_total <= h_total ? "met" : "NOT met");
    printf("  %s order check, %zu timers: ours %zu wrong, baseline %zu "
           "wrong\n", wrong_ours || wrong_heap ? "FAIL" : "PASS", n,
           wrong_ours, wrong_heap);
    free(coros);
    free(dl);
    free(order);
    coro__timers_free(&t);
    return wrong_ours || wrong_heap;
}

static unsigned long parse_number(const char *text) {
    char *end;
    unsigned long value = strtoul(text, &end, 10);
    return (*text == '\0' || *end != '\0') ? 0 : value;
}

int main(int argc, char **argv) {
    unsigned long n = 0, rounds = 9, seed = 1;
    int failures = 0;

    for (int i = 1; i < argc; i++) {
        unsigned long *target = NULL;
        if (strcmp(argv[i], "--n") == 0)
            target = &n;
        else if (strcmp(argv[i], "--rounds") == 0)
            target = &rounds;
        else if (strcmp(argv[i], "--seed") == 0)
            target = &seed;
        if (target == NULL || i + 1 == argc ||
            (*target = parse_number(argv[++i])) == 0) {
            fprintf(stderr, "usage: %s [--n N] [--rounds R (<= %d)] "
                    "[--seed S]\n", argv[0], MAX_ROUNDS);
            return 2;
        }
    }
    if (rounds > MAX_ROUNDS || (n != 0 && (n < 2 || n >= UINT32_MAX)))
        return 2;
    printf("Timer structure alone: N random deadlines over N x %d ns, added "
           "then all popped; mode=%s; median of %lu interleaved rounds\n",
           WINDOW_NS_PER_TIMER, COMPILATION_MODE, rounds);
    printf("  %-44s %9s %8s %8s %11s\n", "ns per timer", "N", "set", "fire",
           "set + fire");
    if (n != 0) {
        failures += measure(n, (unsigned)rounds, seed);
    } else {
        failures += measure(100000, (unsigned)rounds, seed);
        failures += measure(1000000, (unsigned)rounds, seed);
    }
    return failures ? 1 : 0;
}
