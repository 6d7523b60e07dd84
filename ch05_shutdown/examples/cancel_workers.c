/*
 * cancel_workers.c — cooperative cancellation and cleanups.
 *
 * Three workers each hold a "resource" (here, a line of output that says
 * it was released) and wait in a different way: one sleeps, one parks,
 * one waits on an event. A supervisor cancels them all after 50 ms.
 *
 * Nothing is killed. Each worker's blocking call returns ECANCELED, the
 * worker decides to stop, and its cleanups (coro_defer()) run last-in
 * first-out as it returns. A fourth worker is cancelled while it counts
 * with coro_yield(): its yield still lets the others run, then says
 * ECANCELED, and it stops at the next look.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "coro.h"

static coro_event never_set;

static void release(void *what)
{
    printf("  cleanup: released %s\n", (const char *)what);
}

static void report(const char *who, int err)
{
    printf("  %-8s returned %s\n", who,
           err == ECANCELED ? "ECANCELED" : strerror(err));
}

static void *sleeper(void *arg)
{
    (void)arg;
    coro_defer(release, "the sleeper's file");
    report("sleeper", coro_sleep(10 * CORO_SEC));
    return NULL;
}

static void *parker(void *arg)
{
    (void)arg;
    coro_defer(release, "the parker's socket");
    coro_defer(release, "the parker's buffer"); /* released first: LIFO */
    report("parker", coro_park());
    return NULL;
}

static void *waiter(void *arg)
{
    (void)arg;
    coro_defer(release, "the waiter's lock");
    report("waiter", coro_event_await(&never_set));
    return NULL;
}

static void *counter(void *arg)
{
    int err;

    (void)arg;
    while ((err = coro_yield()) == 0)
        continue; /* counting, in a real program */
    report("counter", err); /* ECANCELED, from coro_yield() */
    return NULL;
}

static void *supervisor(void *arg)
{
    coro **workers = arg;

    coro_sleep(50 * CORO_MSEC);
    printf("  supervisor: cancelling every worker\n");
    for (int i = 0; i < 4; i++)
        coro_cancel(workers[i]);
    return NULL;
}

int main(void)
{
    coro_sched *s = coro_sched_create();
    coro_fn bodies[4] = {sleeper, parker, waiter, counter};
    coro *workers[4];

    if (s == NULL || coro_event_init(&never_set, false, false) != 0) {
        perror("cancel_workers: set-up");
        return 1;
    }
    for (int i = 0; i < 4; i++)
        if ((workers[i] = coro_spawn(s, bodies[i], NULL)) == NULL)
            return 1;
    if (coro_go(s, supervisor, workers) != 0)
        return 1;
    coro_sched_run(s);
    for (int i = 0; i < 4; i++)
        coro_destroy(workers[i]);
    coro_event_destroy(&never_set);
    coro_sched_destroy(s);
    return 0;
}
