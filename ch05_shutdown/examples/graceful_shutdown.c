/*
 * graceful_shutdown.c — close, drain with a deadline, abandon the rest.
 *
 * Five coroutines serve "requests" (a sleep of 20 ms each, in a loop). A
 * sixth is stubborn: it works in slices of a millisecond, yields between
 * them, and ignores cancellation. Then:
 *
 *   coro_sched_shutdown(s, 200 ms)
 *     close: no new work (coro_go() now says ESHUTDOWN), every coroutine
 *            is cancelled: the five finish the request in hand and return
 *     drain: pump until nothing is alive — or the grace period ends
 *     abandon: the stubborn one is never resumed again; its cleanup runs
 *
 * and the stats say what the pump did meanwhile.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "coro.h"

static void *server(void *arg)
{
    int id = (int)(long)arg, served = 0;
    char name[CORO_NAME_MAX + 1];

    snprintf(name, sizeof name, "server %d", id); /* for a trace */
    coro_set_name(coro_self(), name);

    while (coro_sleep(20 * CORO_MSEC) == 0) /* ECANCELED ends the loop */
        served++;
    printf("  server %d: cancelled after %d requests, returning\n", id,
           served);
    return NULL;
}

static void stubborn_cleanup(void *arg)
{
    (void)arg;
    printf("  stubborn: cleanup ran (it was abandoned, never resumed)\n");
}

/* Work that holds the pump: nothing else runs on it meanwhile. */
static void crunch_for(uint64_t ns)
{
    uint64_t end = coro_now() + ns;

    while (coro_now() < end)
        continue;
}

static void *stubborn(void *arg)
{
    (void)arg;
    coro_set_name(coro_self(), "stubborn");
    coro_defer(stubborn_cleanup, NULL);
    for (;;) {
        crunch_for(CORO_MSEC); /* a slice of its work */
        coro_yield(); /* ignores ECANCELED: the pump still runs others */
    }
    return NULL;
}

static void print_stats(coro_sched *s)
{
    coro_stats stats;

    coro_sched_stats(s, &stats);
    printf("  stats: alive %zu, resumes %llu, longest resume %llu ns,\n"
           "         wake latency max %llu ns, mean %llu ns, closed %s\n",
           stats.alive, (unsigned long long)stats.resumes,
           (unsigned long long)stats.longest_resume_ns,
           (unsigned long long)stats.wake_latency_max_ns,
           (unsigned long long)stats.wake_latency_mean_ns,
           stats.closed ? "yes" : "no");
}

int main(void)
{
    coro_sched *s = coro_sched_create();
    size_t abandoned;
    uint64_t start;

    if (s == NULL) {
        perror("coro_sched_create");
        return 1;
    }
    for (long id = 1; id <= 5; id++)
        if (coro_go(s, server, (void *)id) != 0)
            return 1;
    if (coro_go(s, stubborn, NULL) != 0)
        return 1;
    coro_sched_run_until(s, coro_now() + 100 * CORO_MSEC); /* serve a while */

    printf("  shutting down with a 200 ms grace period\n");
    start = coro_now();
    abandoned = coro_sched_shutdown(s, 200 * CORO_MSEC);
    printf("  shutdown: %zu abandoned, after %llu ms\n", abandoned,
           (unsigned long long)((coro_now() - start) / CORO_MSEC));
    printf("  coro_go now: %s\n",
           coro_go(s, server, NULL) == ESHUTDOWN ? "ESHUTDOWN" : "accepted?");
    print_stats(s);
    printf("  destroy: %s\n", coro_sched_destroy(s) == 0 ? "ok" : "busy");
    return 0;
}
