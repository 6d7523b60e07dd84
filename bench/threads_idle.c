/*
 * threads_idle.c — what a waiting pump costs: the CPU time of a thread
 * whose scheduler has nothing to do for 5 seconds. A one-shot
 * measurement (a CPU time over a fixed wall time), not a harness
 * benchmark.
 *
 *   bazel-bin/bench/threads_idle [--seconds S]      (default 5)
 *
 * Three threads wait at the same time, for the same S seconds:
 *
 *   run      a scheduler with one coroutine parked in coro_park(), pumped
 *            by coro_sched_run(); at S seconds the main thread coro_wake()s
 *            it from outside, it returns and coro_sched_run() with it;
 *   poll     a scheduler with nothing in it, pumped by
 *            `while (now < end) coro_sched_poll_for(s, 10 ms)`: the
 *            event-loop shape, waking up 100 times a second;
 *   condvar  baseline: a plain thread in pthread_cond_wait(), signalled at
 *            S seconds.
 *
 * Each thread reads its own CPU time (getrusage(RUSAGE_THREAD), user +
 * system) and wall time around its wait; the report is CPU time / wall
 * time, as a percentage of one core. For run and condvar it also says how
 * long after the main thread's wake or signal the waiter ran.
 */
#define _GNU_SOURCE
#include "coro.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#ifndef BENCH_COMPILATION_MODE
#define BENCH_COMPILATION_MODE unknown
#endif
#define STRINGIFY(word) #word
#define EXPAND_AND_STRINGIFY(macro) STRINGIFY(macro)
#define COMPILATION_MODE EXPAND_AND_STRINGIFY(BENCH_COMPILATION_MODE)

/* The course's goal for an idle pump, in percent of a core. */
#define TARGET_PERCENT 1.0

/* What one waiting thread measured. */
typedef struct {
    uint64_t cpu_ns;   /* getrusage(RUSAGE_THREAD): user + system */
    uint64_t wall_ns;
    uint64_t woke_at;  /* coro_now() when the waiter ran again; 0: n/a */
    unsigned long polls;
    int error;
} measure;

static struct {
    uint64_t seconds;
    uint64_t end;                /* the poll loop stops here */
    pthread_barrier_t ready;     /* all three waiting, main starts the clock */
    coro *_Atomic waiter;        /* the parked coroutine of `run` */
    uint64_t woken_at;           /* main: coro_now() just before its wake */
    pthread_mutex_t lock;        /* condvar baseline */
    pthread_cond_t cond;
    bool signalled;
    uint64_t signalled_at;       /* main: coro_now() just before signal */
    measure run, poll, condvar;
} g;

static uint64_t thread_cpu_ns(void) {
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * CORO_SEC +
           (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * CORO_USEC;
}

/* The parked coroutine of `run`. */
static void *waiter_fn(void *arg) {
    measure *m = arg;
    if (coro_park() != 0)
        m->error = 1;
    m->woke_at = coro_now();
    return NULL;
}

static void *run_thread(void *arg) {
    measure *m = arg;
    coro_sched *s = coro_sched_create();
    coro *w;
    uint64_t cpu0, t0;

    if (s == NULL || (w = coro_spawn(s, waiter_fn, m)) == NULL) {
        m->error = 1;
        pthread_barrier_wait(&g.ready);
        return NULL;
    }
    atomic_store(&g.waiter, w);
    pthread_barrier_wait(&g.ready);
    cpu0 = thread_cpu_ns();
    t0 = coro_now();
    if (coro_sched_run(s) != 0)
        m->error = 1;
    m->wall_ns = coro_now() - t0;
    m->cpu_ns = thread_cpu_ns() - cpu0;
    if (coro_destroy(w) != 0 || coro_sched_destroy(s) != 0)
        m->error = 1;
    coro_thread_detach();
    return NULL;
}

static void *poll_thread(void *arg) {
    measure *m = arg;
    coro_sched *s = coro_sched_create();
    uint64_t cpu0, t0;

    if (s == NULL)
        m->error = 1;
    pthread_barrier_wait(&g.ready);
    if (s == NULL)
        return NULL;
    cpu0 = thread_cpu_ns();
    t0 = coro_now();
    while (coro_now() < g.end) {
        coro_sched_poll_for(s, 10 * CORO_MSEC);
        m->polls++;
    }
    m->wall_ns = coro_now() - t0;
    m->cpu_ns = thread_cpu_ns() - cpu0;
    if (coro_sched_destroy(s) != 0)
        m->error = 1;
    coro_thread_detach();
    return NULL;
}

static void *condvar_thread(void *arg) {
    measure *m = arg;
    uint64_t cpu0, t0;

    pthread_barrier_wait(&g.ready);
    cpu0 = thread_cpu_ns();
    t0 = coro_now();
    pthread_mutex_lock(&g.lock);
    while (!g.signalled)
        pthread_cond_wait(&g.cond, &g.lock);
    pthread_mutex_unlock(&g.lock);
    m->woke_at = coro_now();
    m->wall_ns = m->woke_at - t0;
    m->cpu_ns = thread_cpu_ns() - cpu0;
    return NULL;
}

static void print_row(const char *label, const measure *m, uint64_t woken) {
    double percent = 100.0 * (double)m->cpu_ns / (double)m->wall_ns;
    char after[32] = "-", share[32] = "< 0.001%";
    if (percent >= 0.001)
        snprintf(share, sizeof share, "%.3f%%", percent);
    if (m->woke_at != 0)
        snprintf(after, sizeof after, "%.0f us",
                 (double)(m->woke_at - woken) / 1e3);
    printf("  %-56s %8.3f %10s %10s   %s\n", label, m->cpu_ns / 1e6,
           share, after, percent <= TARGET_PERCENT ? "met" : "NOT met");
}

int main(int argc, char **argv) {
    pthread_t threads[3];
    void *(*bodies[3])(void *) = {run_thread, poll_thread, condvar_thread};
    measure *measures[3] = {&g.run, &g.poll, &g.condvar};
    struct timespec until;

    g.seconds = 5;
    if (argc == 3 && strcmp(argv[1], "--seconds") == 0)
        g.seconds = strtoull(argv[2], NULL, 10);
    if ((argc != 1 && argc != 3) || g.seconds == 0) {
        fprintf(stderr, "usage: %s [--seconds S]   (default 5)\n", argv[0]);
        return 2;
    }

    pthread_barrier_init(&g.ready, NULL, 4);
    pthread_mutex_init(&g.lock, NULL);
    pthread_cond_init(&g.cond, NULL);
    for (int i = 0; i < 3; i++) {
        if (pthread_create(&threads[i], NULL, bodies[i], measures[i]) != 0) {
            fprintf(stderr, "idle: pthread_create failed\n");
            return 1;
        }
    }
    /* The end of the wait, set before the barrier lets anyone read it. */
    g.end = coro_now() + g.seconds * CORO_SEC;
    pthread_barrier_wait(&g.ready);

    /* Sleep S seconds, then end both waits. */
    until.tv_sec = (time_t)(g.end / CORO_SEC);
    until.tv_nsec = (long)(g.end % CORO_SEC);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) ==
           EINTR)
        continue;
    g.woken_at = coro_now();
    if (g.run.error == 0 && coro_wake(atomic_load(&g.waiter)) != 0)
        g.run.error = 1;
    pthread_mutex_lock(&g.lock);
    g.signalled_at = coro_now();
    g.signalled = true;
    pthread_cond_signal(&g.cond);
    pthread_mutex_unlock(&g.lock);
    for (int i = 0; i < 3; i++)
        pthread_join(threads[i], NULL);

    if (g.run.error || g.poll.error) {
        fprintf(stderr, "idle: a scheduler call failed\n");
        return 1;
    }
    printf("Idle pump: %llu s with nothing to do; CPU time of each waiting "
           "thread (getrusage RUSAGE_THREAD), all three at once (mode=%s)\n",
           (unsigned long long)g.seconds, COMPILATION_MODE);
    printf("  %-56s %8s %10s %10s   %s\n", "case", "CPU ms", "of a core",
           "woke after", "target <= 1%");
    print_row("coro_sched_run, 1 coroutine parked, coro_wake at the end",
              &g.run, g.woken_at);
    char label[80];
    snprintf(label, sizeof label,
             "coro_sched_poll_for(10 ms) loop (%lu polls)", g.poll.polls);
    print_row(label, &g.poll, 0);
    print_row("pthread_cond_wait, signalled at the end (baseline)",
              &g.condvar, g.signalled_at);
    return 0;
}
