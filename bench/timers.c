/*
 * timers.c — //bench:timers: what a timer costs when a million coroutines
 * sleep at once, and whether they wake in deadline order and never early.
 *
 *   ./tools/bazelw run -c opt //bench:timers                 # N = 1,000,000
 *   bazel-bin/bench/timers --n 100000 --rounds 9 --seed 7 [--time-until]
 *
 * Options: --n N (default 1,000,000), --rounds R (default 5), --window-ms W
 * (the spread of the deadlines, default N x 50 ns), --seed S (default 1),
 * --time-until (also time the until case, which otherwise runs once, in
 * the warm-up, for its checks).
 *
 * One scheduler with dense 16 KiB stacks (a million guarded stacks would
 * need two million mappings). A round of a coroutine case: coro_go() N
 * coroutines, then one coro_sched_run(). Coroutine i, the first time it
 * runs, reads the clock, computes its deadline D_i = base + offset_i (the
 * offsets are random over a window, 50 ms for a million, from a seeded
 * PRNG; `base` lies past the end of the set phase, so all N timers are
 * pending at once), waits, and on waking records the wake time and its
 * place in the wake order. The cases, run in the same process, interleaved
 * round by round:
 *
 *   sleep  coro_sleep(D_i - now): the relative API, what the issue names;
 *   until  coro_park_until(D_i) with nobody waking it (it times out): the
 *          same timer heap given an exact absolute deadline, so the order
 *          check below is exact, ties included (warm-up only, unless
 *          --time-until);
 *   yield  baseline: the same coroutines and bookkeeping, with coro_yield()
 *          once instead of a wait. sleep - yield = what the timer costs;
 *   heap   baseline: the timer structure alone, a plain binary heap of
 *          (deadline, seq) (std::push_heap / std::pop_heap on a kept
 *          std::vector, timers_heap.cc): N pushes in set order, N pops.
 *
 * Each round has two busy phases and, for sleep and until, an idle gap
 * between them (the pump sleeps until the first deadline). Per timer:
 *
 *   set   from the first coro_go() to the last coroutine's wait call
 *         (coro_go + first resume + the clock read + setting the timer);
 *   fire  from the first wake to the return of coro_sched_run() (popping
 *         the timer, queueing, resuming, the coroutine returning);
 *   CPU   the thread's CPU time over the whole round
 *         (CLOCK_THREAD_CPUTIME_ID): set + fire + the one idle wait.
 *
 * The deadlines fall within a window (N x 50 ns) shorter than firing them
 * takes, so the fire phase is CPU-bound: timers come due faster than the
 * pump fires them, and the pump does not sleep between them. The lead
 * before the first deadline follows the last set phase measured (x 1.25 +
 * 50 ms); a round whose set phase outruns it is reported in a note.
 *
 * Checks, every round (PASS/FAIL lines; any FAIL -> exit status 1):
 *
 *   until: wake >= D_i for every timer (never early), and the wake order
 *          is the order of (D_i, set order) exactly (deadline order, ties
 *          in the order they were set).
 *   sleep: coro_sleep(ns) computes its deadline from its own clock read,
 *          a few tens of ns after ours, so the library's deadline is only
 *          known to lie in [lo, hi]: lo = our read + ns, hi = the next
 *          clock read any coroutine made after this one suspended + ns.
 *          FAIL means provably wrong: a wake before lo, or a timer that
 *          woke after another whose lo is above its own hi. Pairs closer
 *          than the bracket are counted as "too close to tell", not failed.
 *   heap:  the pops come out sorted.
 *   all:   every coroutine set and woke once, with the expected result.
 */
#define _GNU_SOURCE
#include "coro.h"
#include "timers_heap.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Bazel's compilation mode (that of the library under test) and the
 * library's package, both set in BUILD. */
#ifndef BENCH_COMPILATION_MODE
#define BENCH_COMPILATION_MODE unknown
#endif
#ifndef BENCH_LIBRARY
#define BENCH_LIBRARY "the library"
#endif
#define STRINGIFY(word) #word
#define EXPAND_AND_STRINGIFY(macro) STRINGIFY(macro)
#define COMPILATION_MODE EXPAND_AND_STRINGIFY(BENCH_COMPILATION_MODE)
#define LIBRARY BENCH_LIBRARY

enum { STACK_SIZE = 16 * 1024, MAX_ROUNDS = 100 };
#define DEFAULT_N 1000000ul
#define DEFAULT_ROUNDS 5
/* Default window of deadlines: N x 50 ns (50 ms for a million). */
#define WINDOW_NS_PER_TIMER 50

typedef enum { SLEEP, UNTIL, YIELD, WAKE, HEAP, CASES } case_id;

static const char *const case_label[CASES] = {
    "coro_sleep(ns) (ours)",
    "coro_park_until(deadline), times out (ours)",
    "coro_yield() once, no timer (baseline)",
    "coro_park(), woken in deadline order (baseline)",
    "binary heap push + pop, no coroutine (baseline)",
};

/* One round of one case. Times in ns, for the whole round (not per timer). */
typedef struct {
    uint64_t set_ns;  /* wall time of the set phase */
    uint64_t fire_ns; /* wall time of the fire phase */
    uint64_t cpu_ns;  /* thread CPU time of the round */
    size_t peak;      /* most timers pending at once */
} round_result;

/* What the checks found, summed over every round (warm-ups included). */
typedef struct {
    size_t rounds[CASES];
    size_t wrong_count;     /* rounds where not every coroutine set + woke */
    size_t bad_result;      /* waits that returned an unexpected code */
    size_t until_early, until_order, until_ties, until_immediate;
    size_t sleep_early, sleep_early_unsure, sleep_order, sleep_order_unsure;
    size_t heap_order, heap_sum;
    size_t short_peak;      /* timed rounds where fewer than N were pending */
} checks;

static struct {
    coro_sched *s;
    size_t n;
    uint64_t window;

    /* Per coroutine, by index. */
    uint64_t *offset;   /* its deadline, from base */
    uint64_t *due;      /* sleep: lo; until: D_i (exact) */
    uint64_t *hi;       /* sleep: upper bound of the library's deadline */
    uint64_t *wake;     /* clock read when it woke */
    uint32_t *set_seq;  /* order it set its timer */
    uint32_t *wake_seq; /* order it woke */
    unsigned char *immediate; /* until: returned without suspending */
    uint32_t *by_wake;  /* scratch for the checks */
    uint64_t *deadline; /* heap baseline input */
    uint32_t *by_deadline; /* indices in (offset, index) order */
    coro **handle;      /* wake baseline: each parked coroutine */

    /* The round. */
    case_id mode;
    uint64_t base;      /* D_i = base + offset[i] */
    size_t sets, wakes, peak, bad_result;
    uint64_t readings;  /* clock reads made by coroutines, in order */
    uint64_t *pending_hi; /* sleep: the bracket the next read closes */
    uint64_t pending_ns;
    uint64_t t_last_set, t_first_wake;
} g;

static void die(const char *what, int err) {
    fprintf(stderr, "timers: %s: %s\n", what, strerror(err));
    exit(2);
}

static uint64_t cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* splitmix64: a small seeded PRNG (same sequence everywhere). */
static uint64_t prng_state;
static uint64_t prng_next(void) {
    uint64_t z = (prng_state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* A coroutine's clock read. It also closes the bracket of the previous
 * sleeper: the library read its clock after that sleeper's read and
 * before this one. */
static inline uint64_t clock_read(void) {
    uint64_t t = coro_now();
    g.readings++;
    if (g.pending_hi != NULL) {
        *g.pending_hi = t + g.pending_ns;
        g.pending_hi = NULL;
    }
    return t;
}

/* The body of every coroutine case: set a timer (or yield), wake, record. */
static void *sleeper(void *arg) {
    size_t i = (size_t)(uintptr_t)arg;
    uint64_t t = clock_read();
    uint64_t read_before = g.readings;
    uint64_t deadline = g.base + g.offset[i];
    int err, expected = 0;

    g.set_seq[i] = (uint32_t)g.sets++;
    if (g.sets - g.wakes > g.peak)
        g.peak = g.sets - g.wakes;
    if (g.sets == g.n)
        g.t_last_set = t;
    switch (g.mode) {
    case SLEEP: {
        uint64_t ns = deadline > t ? deadline - t : 0;
        g.due[i] = t + ns;
        g.pending_hi = &g.hi[i];
        g.pending_ns = ns;
        err = coro_sleep(ns);
        break;
    }
    case UNTIL:
        g.due[i] = deadline;
        expected = ETIMEDOUT; /* nobody wakes it */
        err = coro_park_until(deadline);
        break;
    case WAKE:
        g.due[i] = t;
        g.handle[i] = coro_self();
        err = coro_park(); /* the sentinel wakes it */
        break;
    default:
        g.due[i] = t;
        err = coro_yield();
        break;
    }
    uint64_t w = clock_read();
    if (err != expected)
        g.bad_result++;
    /* No other coroutine read the clock in between: it did not suspend
     * (coro_park_until found its deadline already past). */
    g.immediate[i] = g.readings == read_before + 1;
    g.wake[i] = w;
    g.wake_seq[i] = (uint32_t)g.wakes++;
    if (g.wakes == 1 && g.mode != WAKE)
        g.t_first_wake = w;
    return NULL;
}

/* Created after the N others: the first coroutine to run after the last
 * one has set its timer. Its clock read closes that one's bracket, and
 * guarantees that a coroutine that did suspend sees another read before
 * its own wake (so "no read in between" means "did not suspend"). */
static void *sentinel(void *arg) {
    (void)arg;
    uint64_t t = clock_read();
    /* The wake baseline: the sentinel plays the timers' part, ending every
     * wait in deadline order, so the coroutines are resumed in the same
     * order (and so touch memory in the same order) as the sleepers. */
    if (g.mode == WAKE) {
        g.t_first_wake = t;
        for (size_t k = 0; k < g.n; k++)
            if (coro_wake(g.handle[g.by_deadline[k]]) != 0)
                g.bad_result++;
    }
    return NULL;
}

/* Order of two coroutine indices by (offset, index): the order their
 * timers fire in (coroutine i sets its timer i-th). */
static int compare_by_deadline(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    if (g.offset[x] != g.offset[y])
        return g.offset[x] < g.offset[y] ? -1 : 1;
    return (x > y) - (x < y);
}

/* Deadline offsets for one round: uniform over the window. Also sorts the
 * indices into firing order, for the wake baseline. */
static void draw_offsets(uint64_t seed, unsigned round) {
    prng_state = seed * 1000003u + round;
    for (size_t i = 0; i < g.n; i++) {
        g.offset[i] = prng_next() % g.window;
        g.by_deadline[i] = (uint32_t)i;
    }
    qsort(g.by_deadline, g.n, sizeof g.by_deadline[0], compare_by_deadline);
}

static void run_coroutines(case_id mode, uint64_t lead, round_result *r) {
    uint64_t cpu0, t0, t_end;
    int err;

    g.mode = mode;
    g.sets = g.wakes = g.peak = g.bad_result = 0;
    g.readings = 0;
    g.pending_hi = NULL;
    cpu0 = cpu_now();
    t0 = coro_now();
    g.base = t0 + lead;
    for (size_t i = 0; i < g.n; i++)
        if ((err = coro_go(g.s, sleeper, (void *)(uintptr_t)i)) != 0)
            die("coro_go", err);
    if ((err = coro_go(g.s, sentinel, NULL)) != 0)
        die("coro_go", err);
    if ((err = coro_sched_run(g.s)) != 0)
        die("coro_sched_run", err);
    t_end = coro_now();
    r->cpu_ns = cpu_now() - cpu0;
    r->set_ns = g.t_last_set - t0;
    r->fire_ns = t_end - g.t_first_wake;
    r->peak = g.peak;
}

static void run_heap(round_result *r) {
    uint64_t cpu0, t0, t1, sum;
    size_t bad;

    g.base = coro_now();
    for (size_t i = 0; i < g.n; i++)
        g.deadline[i] = g.base + g.offset[i];
    cpu0 = cpu_now();
    t0 = coro_now();
    timers_heap_push_all(g.deadline, g.n);
    t1 = coro_now();
    bad = timers_heap_pop_all(&sum);
    r->fire_ns = coro_now() - t1;
    r->cpu_ns = cpu_now() - cpu0;
    r->set_ns = t1 - t0;
    r->peak = g.n;
    g.bad_result = bad;
    g.wakes = sum == (uint64_t)g.n * (g.n - 1) / 2 ? g.n : 0;
}

/* ── Checks ───────────────────────────────────────────────────────────── */

static void check_round(case_id mode, checks *c) {
    size_t n = g.n;

    c->rounds[mode]++;
    if (mode == HEAP) {
        c->heap_order += g.bad_result;
        c->heap_sum += g.wakes != n;
        return;
    }
    if (g.sets != n || g.wakes != n)
        c->wrong_count++;
    c->bad_result += g.bad_result;
    if (mode == YIELD || mode == WAKE)
        return;
    for (size_t i = 0; i < n; i++)
        g.by_wake[g.wake_seq[i]] = (uint32_t)i;

    if (mode == UNTIL) {
        bool have_prev = false;
        uint64_t prev_due = 0;
        uint32_t prev_set = 0;
        for (size_t i = 0; i < n; i++) {
            c->until_early += g.wake[i] < g.due[i];
            c->until_immediate += g.immediate[i];
        }
        for (size_t k = 0; k < n; k++) {
            uint32_t b = g.by_wake[k];
            if (g.immediate[b])
                continue; /* never was a timer */
            if (have_prev) {
                if (g.due[b] < prev_due ||
                    (g.due[b] == prev_due && g.set_seq[b] < prev_set))
                    c->until_order++;
                else if (g.due[b] == prev_due)
                    c->until_ties++;
            }
            have_prev = true;
            prev_due = g.due[b];
            prev_set = g.set_seq[b];
        }
        return;
    }

    /* SLEEP: the library's deadline of i lies in [due[i], hi[i]]. */
    uint64_t max_lo = 0;
    for (size_t i = 0; i < n; i++) {
        if (g.wake[i] < g.due[i])
            c->sleep_early++;
        else if (g.wake[i] < g.hi[i])
            c->sleep_early_unsure++;
    }
    for (size_t k = 0; k < n; k++) {
        uint32_t b = g.by_wake[k];
        if (max_lo > g.hi[b])
            c->sleep_order++; /* an earlier wake had a surely later deadline */
        else if (max_lo > g.due[b])
            c->sleep_order_unsure++;
        if (g.due[b] > max_lo)
            max_lo = g.due[b];
    }
}

static void run_case(case_id mode, uint64_t lead, round_result *r,
                     checks *c) {
    if (mode == HEAP)
        run_heap(r);
    else
        run_coroutines(mode, lead, r);
    check_round(mode, c);
}

/* ── Report ───────────────────────────────────────────────────────────── */

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, unsigned count) {
    qsort(v, count, sizeof v[0], compare_doubles);
    if (count % 2)
        return v[count / 2];
    return (v[count / 2 - 1] + v[count / 2]) / 2;
}

typedef struct {
    double set, fire, total, fastest, slowest, cpu;
} summary;

/* The median over the rounds of case a's CPU time minus case b's, per
 * timer. Each round runs every case once, one after the other, so the two
 * figures of a round met the same machine: their difference is steadier
 * than the difference of the two medians (a paired comparison). The
 * rounds' differences go to `each` (unsorted), for the report. */
static double paired_cpu_median(const round_result *a, const round_result *b,
                                unsigned rounds, size_t n, double *each) {
    double diff[MAX_ROUNDS];

    for (unsigned i = 0; i < rounds; i++) {
        each[i] = ((double)a[i].cpu_ns - (double)b[i].cpu_ns) / (double)n;
        diff[i] = each[i];
    }
    return median(diff, rounds);
}

static summary summarise(const round_result *r, unsigned rounds, size_t n) {
    double set[MAX_ROUNDS], fire[MAX_ROUNDS], total[MAX_ROUNDS],
        cpu[MAX_ROUNDS];
    summary s;

    for (unsigned i = 0; i < rounds; i++) {
        set[i] = (double)r[i].set_ns / (double)n;
        fire[i] = (double)r[i].fire_ns / (double)n;
        total[i] = set[i] + fire[i];
        cpu[i] = (double)r[i].cpu_ns / (double)n;
    }
    s.set = median(set, rounds);
    s.fire = median(fire, rounds);
    s.total = median(total, rounds); /* sorted now */
    s.fastest = total[0];
    s.slowest = total[rounds - 1];
    s.cpu = median(cpu, rounds);
    return s;
}

static void pass_fail(bool ok, int *failures, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void pass_fail(bool ok, int *failures, const char *fmt, ...) {
    va_list ap;
    printf("  %s ", ok ? "PASS" : "FAIL");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    if (!ok)
        (*failures)++;
}

static void print_cost(const char *what, double ns) {
    printf("  %s: %.1f ns per timer set + fire\n", what, ns);
}

/* ── Main ─────────────────────────────────────────────────────────────── */

static unsigned long parse_number(const char *text) {
    char *end;
    unsigned long value = strtoul(text, &end, 10);
    return (*text == '\0' || *end != '\0') ? 0 : value;
}

static void *checked_calloc(size_t count, size_t size) {
    void *p = calloc(count, size);
    if (p == NULL)
        die("calloc", ENOMEM);
    return p;
}

/* The lead before the first deadline: a quarter more than the set phase
 * just seen (the machine is noisy), plus 50 ms. */
static uint64_t lead_after(uint64_t set_ns) {
    return set_ns + set_ns / 4 + 50 * CORO_MSEC;
}

int main(int argc, char **argv) {
    unsigned long n = DEFAULT_N, rounds = DEFAULT_ROUNDS, seed = 1;
    unsigned long window_ms = 0;
    bool time_until = false;
    round_result results[CASES][MAX_ROUNDS], warm;
    uint64_t lead;
    checks c = {0};
    int err, failures = 0;

    for (int i = 1; i < argc; i++) {
        unsigned long *target = NULL;
        if (strcmp(argv[i], "--time-until") == 0) {
            time_until = true;
            continue;
        }
        if (strcmp(argv[i], "--n") == 0)
            target = &n;
        else if (strcmp(argv[i], "--rounds") == 0)
            target = &rounds;
        else if (strcmp(argv[i], "--seed") == 0)
            target = &seed;
        else if (strcmp(argv[i], "--window-ms") == 0)
            target = &window_ms;
        if (target == NULL || i + 1 == argc ||
            (*target = parse_number(argv[++i])) == 0)
            goto usage;
    }
    if (n < 2 || n >= UINT32_MAX || rounds > MAX_ROUNDS)
        goto usage;

    /* The timed cases, in the order of the first round. */
    case_id timed[CASES];
    int ntimed = 0;
    timed[ntimed++] = SLEEP;
    if (time_until)
        timed[ntimed++] = UNTIL;
    timed[ntimed++] = YIELD;
    timed[ntimed++] = WAKE;
    timed[ntimed++] = HEAP;

    g.n = n;
    g.window = window_ms ? window_ms * CORO_MSEC : n * WINDOW_NS_PER_TIMER;
    g.offset = checked_calloc(n, sizeof *g.offset);
    g.due = checked_calloc(n, sizeof *g.due);
    g.hi = checked_calloc(n, sizeof *g.hi);
    g.wake = checked_calloc(n, sizeof *g.wake);
    g.set_seq = checked_calloc(n, sizeof *g.set_seq);
    g.wake_seq = checked_calloc(n, sizeof *g.wake_seq);
    g.immediate = checked_calloc(n, sizeof *g.immediate);
    g.by_wake = checked_calloc(n, sizeof *g.by_wake);
    g.deadline = checked_calloc(n, sizeof *g.deadline);
    g.by_deadline = checked_calloc(n, sizeof *g.by_deadline);
    g.handle = checked_calloc(n, sizeof *g.handle);
    if (timers_heap_reserve(n) != 0)
        die("timers_heap_reserve", ENOMEM);

    g.s = coro_sched_create();
    if (g.s == NULL)
        die("coro_sched_create", errno);
    if ((err = coro_sched_set_stack_size(g.s, STACK_SIZE)) != 0)
        die("coro_sched_set_stack_size", err);
    if ((err = coro_sched_use_dense_stacks(g.s)) != 0)
        die("coro_sched_use_dense_stacks", err);

    /* Warm-up, untimed but checked: every case once. The yield round maps
     * and first touches the N stacks (the slow part: page faults) and
     * gives a first, generous, length of the set phase for the lead; the
     * until round is the exact order check; after them the timer heap and
     * the scheduler's queue have grown to N, so later rounds allocate
     * nothing. */
    fprintf(stderr, "timers: warming up: %lu coroutines on dense stacks...\n",
            n);
    draw_offsets(seed, 0);
    run_case(YIELD, 0, &warm, &c);
    lead = lead_after(warm.set_ns);
    run_case(UNTIL, lead, &warm, &c);
    lead = lead_after(warm.set_ns);
    run_case(SLEEP, lead, &warm, &c);
    lead = lead_after(warm.set_ns);
    run_case(WAKE, 0, &warm, &c);
    run_case(HEAP, 0, &warm, &c);

    fprintf(stderr, "timers: %lu interleaved rounds...\n", rounds);
    for (unsigned r = 0; r < rounds; r++) {
        draw_offsets(seed, r + 1);
        for (int j = 0; j < ntimed; j++) {
            case_id k = timed[(r + (unsigned)j) % (unsigned)ntimed];
            round_result *res = &results[k][r];
            run_case(k, lead, res, &c);
            if (k == SLEEP || k == UNTIL) {
                lead = lead_after(res->set_ns);
                if (res->peak < n)
                    c.short_peak++;
            }
        }
    }

    summary sum[CASES];
    for (int j = 0; j < ntimed; j++)
        sum[timed[j]] = summarise(results[timed[j]], (unsigned)rounds, n);

    printf("Timers: %lu sleepers per round, deadlines random over %.0f ms "
           "(seed %lu), dense %d KiB stacks, %s (mode=%s): median of %lu "
           "interleaved rounds\n",
           n, (double)g.window / 1e6, seed, STACK_SIZE / 1024, LIBRARY,
           COMPILATION_MODE, rounds);
    printf("  %-48s %8s %8s %11s %8s %8s %8s\n", "ns per timer",
           "set", "fire", "set + fire", "fastest", "slowest", "CPU");
    for (int j = 0; j < ntimed; j++) {
        case_id k = timed[j];
        printf("  %-48s %8.1f %8.1f %11.1f %8.1f %8.1f %8.1f\n",
               case_label[k], sum[k].set, sum[k].fire, sum[k].total,
               sum[k].fastest, sum[k].slowest, sum[k].cpu);
    }
    printf("  (set: first coro_go to the last wait call; fire: first wake "
           "to the end of\n   coro_sched_run; heap: push N, pop N; CPU: "
           "the thread's CPU time over the round)\n");
    double sleep_cost = sum[SLEEP].total - sum[YIELD].total;
    print_cost("coro_sleep, sleep - yield", sleep_cost);
    printf("  CPU, sleep - yield: %.1f ns per timer\n",
           sum[SLEEP].cpu - sum[YIELD].cpu);
    double ordered_cost = sum[SLEEP].total - sum[WAKE].total;
    print_cost("coro_sleep, sleep - wake in order", ordered_cost);
    double each[MAX_ROUNDS];
    double paired = paired_cpu_median(results[SLEEP], results[WAKE],
                                      (unsigned)rounds, n, each);
    printf("  CPU, sleep - wake in order: %.1f ns per timer (the median of "
           "the rounds' own\n   differences:", paired);
    for (unsigned long r = 0; r < rounds; r++)
        printf(" %.0f", each[r]);
    printf("; the medians' difference: %.1f)\n",
           sum[SLEEP].cpu - sum[WAKE].cpu);
    /* The course's target: what a timer costs (the CPU time of sleep -
     * wake in order, paired by round) at most what the binary heap's push
     * + pop costs. */
    double cpu_ratio = paired / sum[HEAP].cpu;
    printf("  CPU, (sleep - wake in order) / heap: %.2fx; target <= 1: %s\n",
           cpu_ratio, cpu_ratio <= 1.0 ? "met" : "NOT met");
    printf("  sleep / yield: %.2fx\n", sum[SLEEP].total / sum[YIELD].total);
    printf("  (sleep - yield) / heap: %.2fx\n", sleep_cost / sum[HEAP].total);
    if (time_until) {
        double until_cost = sum[UNTIL].total - sum[YIELD].total;
        print_cost("coro_park_until, until - yield", until_cost);
        printf("  (until - yield) / heap: %.2fx\n",
               until_cost / sum[HEAP].total);
    }
    if (c.short_peak > 0)
        printf("  note: in %zu timed rounds some timers fired before the "
               "last was set (the set\n   phase outran its lead): fewer "
               "than N were pending at once\n", c.short_peak);
    if (strcmp(COMPILATION_MODE, "opt") != 0)
        printf("  note: built with -c %s, so the library under test is not "
               "optimised; use -c opt for real figures\n", COMPILATION_MODE);

    size_t checked = c.rounds[SLEEP] * n, checked_until = c.rounds[UNTIL] * n;
    printf("Checks (every round, warm-ups included: %zu of sleep, %zu of "
           "until):\n", c.rounds[SLEEP], c.rounds[UNTIL]);
    pass_fail(c.wrong_count == 0 && c.bad_result == 0, &failures,
              "every coroutine set its timer once and woke once, with the "
              "expected result (%zu bad rounds, %zu bad results)",
              c.wrong_count, c.bad_result);
    pass_fail(c.until_early == 0, &failures,
              "until: none fired early: wake >= deadline for %zu of %zu "
              "timers", checked_until - c.until_early, checked_until);
    pass_fail(c.until_order == 0, &failures,
              "until: fired in deadline order, ties in set order: %zu out "
              "of order, %zu ties (%zu found their deadline passed and did "
              "not wait)",
              c.until_order, c.until_ties, c.until_immediate);
    pass_fail(c.sleep_early == 0, &failures,
              "sleep: none fired early: %zu provably early (%zu too close "
              "to tell), of %zu", c.sleep_early, c.sleep_early_unsure,
              checked);
    pass_fail(c.sleep_order == 0, &failures,
              "sleep: fired in deadline order: %zu woke after a timer with a "
              "provably later deadline (%zu too close to tell), of %zu",
              c.sleep_order, c.sleep_order_unsure, checked);
    pass_fail(c.heap_order == 0 && c.heap_sum == 0, &failures,
              "heap baseline: popped in order");

    if ((err = coro_sched_destroy(g.s)) != 0)
        die("coro_sched_destroy", err);
    return failures ? 1 : 0;

usage:
    fprintf(stderr, "usage: %s [--n N] [--rounds R (<= %d)] [--window-ms W] "
            "[--seed S] [--time-until]\n", argv[0], MAX_ROUNDS);
    return 2;
}
