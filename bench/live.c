/*
 * live.c — how much memory a suspended coroutine holds, and how long it
 * takes to make a million of them. A one-shot measurement, not a harness
 * benchmark (nothing is repeated: the figure is a memory size).
 *
 *   ./tools/bazelw run -c opt //bench:live              # N = 1,000,000
 *   ./tools/bazelw run -c opt //bench:live -- 100000
 *
 * One scheduler with dense stacks of 16 KiB (coro_sched_set_stack_size(),
 * then coro_sched_use_dense_stacks()): guarded stacks stop near 32,000
 * (two mappings each against vm.max_map_count = 65530). Then:
 *
 *   1. create: coro_go() N times; nothing runs yet;
 *   2. first run: coro_sched_step() N times, each coroutine runs once and
 *      suspends in coro_yield(): N coroutines are now suspended mid-function;
 *   3. release: a global flag is set and coro_sched_run() resumes each one
 *      once more; it sees the flag and returns;
 *   4. coro_sched_destroy().
 *
 * (This chapter has no park/wake: a coroutine waiting for the flag is a
 * coroutine that yields until it is set. Here each one is resumed exactly
 * twice, so the waiting costs nothing.)
 *
 * Resident memory is VmRSS from /proc/self/status, read before step 1,
 * after step 1 and after step 2: it is everything the process touched,
 * library structures, malloc overhead and stack pages alike. Per coroutine
 * = growth / N. The time of each step is CLOCK_MONOTONIC around it.
 */
#define _POSIX_C_SOURCE 200809L

#include "coro.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Bazel's compilation mode: that of the library under test (see BUILD). */
#ifndef BENCH_COMPILATION_MODE
#define BENCH_COMPILATION_MODE unknown
#endif
#define STRINGIFY(word) #word
#define EXPAND_AND_STRINGIFY(macro) STRINGIFY(macro)
#define COMPILATION_MODE EXPAND_AND_STRINGIFY(BENCH_COMPILATION_MODE)

enum { STACK_SIZE = 16 * 1024 };
#define DEFAULT_N 1000000ul
/* The goal the course sets for a suspended coroutine, in KiB. */
#define TARGET_KIB 4.5

static volatile bool release;   /* set once every coroutine is suspended */
static unsigned long first_runs; /* coroutines that reached their yield */
static unsigned long finished;   /* coroutines that returned */

/* A coroutine: yield until released. */
static void *waiter(void *arg) {
    (void)arg;
    first_runs++;
    while (!release)
        coro_yield();
    finished++;
    return NULL;
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A "Vm...:   1234 kB" field of /proc/self/status, in KiB; -1 if absent. */
static long status_kib(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t len = strlen(field);
    long kib = -1;

    if (f == NULL)
        return -1;
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, field, len) == 0 && line[len] == ':') {
            kib = strtol(line + len + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return kib;
}

static void die(const char *what, int err) {
    fprintf(stderr, "live: %s: %s\n", what, strerror(err));
    exit(1);
}

/* One line of the timing table. */
static void print_time(const char *what, uint64_t ns, unsigned long n) {
    printf("  %-38s %9.1f ms  %8.1f ns per coroutine\n", what, ns / 1e6,
           (double)ns / (double)n);
}

/* One line of the memory table: growth from `base`, per coroutine. */
static void print_rss(const char *when, long kib, long base, unsigned long n) {
    printf("  %-38s %9.1f MiB  %+9.1f MiB  %6.2f KiB per coroutine\n", when,
           kib / 1024.0, (kib - base) / 1024.0,
           (double)(kib - base) / (double)n);
}

int main(int argc, char **argv) {
    unsigned long n = DEFAULT_N;
    coro_sched *s;
    uint64_t t0, t_create, t_first, t_release, t_destroy;
    long rss_before, rss_created, rss_suspended, vm_before, vm_suspended;
    int err;

    if (argc > 2 || (argc == 2 && (n = strtoul(argv[1], NULL, 10)) == 0)) {
        fprintf(stderr, "usage: %s [N]   (default %lu)\n", argv[0], DEFAULT_N);
        return 2;
    }

    s = coro_sched_create();
    if (s == NULL)
        die("coro_sched_create", errno);
    if ((err = coro_sched_set_stack_size(s, STACK_SIZE)) != 0)
        die("coro_sched_set_stack_size", err);
    if ((err = coro_sched_use_dense_stacks(s)) != 0)
        die("coro_sched_use_dense_stacks", err);

    rss_before = status_kib("VmRSS");
    vm_before = status_kib("VmSize");

    t0 = now_ns();
    for (unsigned long i = 0; i < n; i++) {
        if ((err = coro_go(s, waiter, NULL)) != 0) {
            fprintf(stderr, "live: coro_go number %lu: %s\n", i + 1,
                    strerror(err));
            return 1;
        }
    }
    t_create = now_ns() - t0;
    rss_created = status_kib("VmRSS");

    t0 = now_ns();
    for (unsigned long i = 0; i < n; i++) {
        if (!coro_sched_step(s)) {
            fprintf(stderr, "live: nothing ready at step %lu\n", i + 1);
            return 1;
        }
    }
    t_first = now_ns() - t0;
    rss_suspended = status_kib("VmRSS");
    vm_suspended = status_kib("VmSize");
    if (first_runs != n || coro_sched_alive(s) != n) {
        fprintf(stderr, "live: %lu of %lu coroutines ran, %zu alive\n",
                first_runs, n, coro_sched_alive(s));
        return 1;
    }

    release = true;
    t0 = now_ns();
    if ((err = coro_sched_run(s)) != 0)
        die("coro_sched_run", err);
    t_release = now_ns() - t0;
    if (finished != n) {
        fprintf(stderr, "live: %lu of %lu coroutines finished\n", finished, n);
        return 1;
    }

    t0 = now_ns();
    if ((err = coro_sched_destroy(s)) != 0)
        die("coro_sched_destroy", err);
    t_destroy = now_ns() - t0;

    printf("Live coroutines: %lu suspended at once, dense %d KiB stacks "
           "(mode=%s)\n", n, STACK_SIZE / 1024, COMPILATION_MODE);
    printf("  time\n");
    print_time("create: coro_go x N", t_create, n);
    print_time("first run: coro_sched_step x N", t_first, n);
    print_time("release: flag, coro_sched_run", t_release, n);
    print_time("coro_sched_destroy", t_destroy, n);
    printf("  resident memory (VmRSS)               total        growth\n");
    print_rss("before", rss_before, rss_before, n);
    print_rss("after create (queued, not started)", rss_created, rss_before,
              n);
    print_rss("after first run (all suspended)", rss_suspended, rss_before,
              n);
    printf("  address space (VmSize) grew %.1f MiB: %.2f KiB per coroutine\n",
           (vm_suspended - vm_before) / 1024.0,
           (double)(vm_suspended - vm_before) / (double)n);
    double per = (double)(rss_suspended - rss_before) / (double)n;
    printf("  suspended coroutine: %.2f KiB resident; target <= %.1f KiB: %s\n",
           per, TARGET_KIB, per <= TARGET_KIB ? "met" : "NOT met");
    if (strcmp(COMPILATION_MODE, "opt") != 0)
        printf("  note: built with -c %s; the times need -c opt\n",
               COMPILATION_MODE);
    return 0;
}
