/*
 * pool_parallel.c — a pool computing in parallel: N coroutines on M threads.
 *
 * Eight coroutines each count the primes in a slice of [1, 1,000,000) on a
 * pool of two workers. What to watch in the output:
 *
 *  - Which worker ran what. Each coroutine notes the thread it runs on,
 *    at its start and at every yield: it starts on whichever worker takes
 *    it from the pool's queue, and stays there to the end.
 *  - How the queue balances. Slice 0 first makes a blocking call (a plain
 *    nanosleep, not coro_sleep): it holds its worker's thread for 100 ms,
 *    so nothing else can run there. Meanwhile the other worker goes on
 *    taking slices from the shared queue, one per turn of its pump.
 *    Started coroutines never move; only the ones not yet started go to
 *    whoever has room.
 *
 * coro_pool_wait() returns when all eight have finished. (Which worker
 * takes which slice depends on timing; the count of primes must not.)
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "coro.h"

enum { SLICES = 8, LIMIT = 1000000, WORKERS = 2 };

struct slice {
    long from, to;
    long primes;
    int worker;        /* the worker (1, 2) that started it */
    int moved;         /* 1 if it ever ran on another worker */
    int order;         /* the order in which the slices started */
    uint64_t start_ms; /* when it started, from the program's start */
};

static uint64_t program_start;
static atomic_int workers_seen;
static atomic_int slices_started;

/* This thread's worker number, 1 or 2: the order in which the workers
 * first ran a slice. */
static int this_worker(void)
{
    static _Thread_local int number;

    if (number == 0)
        number = atomic_fetch_add(&workers_seen, 1) + 1;
    return number;
}

static int is_prime(long n)
{
    if (n < 2)
        return 0;
    for (long d = 2; d * d <= n; d++)
        if (n % d == 0)
            return 0;
    return 1;
}

/* A call that blocks the thread: the worker's scheduler cannot run
 * anything else meanwhile. (coro_sleep would let it.) */
static void blocking_call(void)
{
    struct timespec t = {0, 100 * 1000 * 1000};

    nanosleep(&t, NULL);
}

static void *count_primes(void *arg)
{
    struct slice *sl = arg;
    char name[CORO_NAME_MAX + 1];

    /* Its name in a trace (CORO_TRACE=$PWD/pool.json): slice 0, 1... */
    snprintf(name, sizeof name, "slice %ld", sl->from / (LIMIT / SLICES));
    coro_set_name(coro_self(), name);
    sl->worker = this_worker();
    sl->order = atomic_fetch_add(&slices_started, 1) + 1;
    sl->start_ms = (coro_now() - program_start) / CORO_MSEC;
    if (sl->from == 0)
        blocking_call();
    for (long n = sl->from; n < sl->to; n++) {
        sl->primes += is_prime(n);
        if (n % 65536 == 0) {
            coro_yield(); /* be fair to the other coroutines on this worker */
            if (this_worker() != sl->worker)
                sl->moved = 1;
        }
    }
    return NULL;
}

int main(void)
{
    static struct slice slices[SLICES];
    coro_pool *p = coro_pool_create(WORKERS, false);
    long total = 0;
    int moved = 0, ran[WORKERS + 1] = {0};

    if (p == NULL) {
        perror("coro_pool_create");
        return 1;
    }
    program_start = coro_now();
    for (int i = 0; i < SLICES; i++) {
        slices[i].from = (long)i * LIMIT / SLICES;
        slices[i].to = (long)(i + 1) * LIMIT / SLICES;
        if (coro_pool_go(p, count_primes, &slices[i]) != 0)
            return 1;
    }
    coro_pool_wait(p);
    printf("  slice  range              primes  worker  order  started at\n");
    for (int i = 0; i < SLICES; i++) {
        const struct slice *sl = &slices[i];

        printf("  %5d  [%6ld, %7ld)  %6ld  %6d  %5d  %7llu ms%s\n", i,
               sl->from, sl->to, sl->primes, sl->worker, sl->order,
               (unsigned long long)sl->start_ms,
               sl->from == 0 ? "  (blocked its worker 100 ms)" : "");
        total += sl->primes;
        moved += sl->moved;
        if (sl->worker >= 1 && sl->worker <= WORKERS)
            ran[sl->worker]++;
    }
    printf("  worker 1 ran %d slices, worker 2 ran %d; none changed worker: %s\n",
           ran[1], ran[2], moved == 0 ? "yes" : "NO");
    printf("  primes below %d: %ld (in %llu ms on %d workers)\n", LIMIT, total,
           (unsigned long long)((coro_now() - program_start) / CORO_MSEC),
           WORKERS);
    return coro_pool_destroy(p) == 0 && total == 78498 && moved == 0 ? 0 : 1;
}
