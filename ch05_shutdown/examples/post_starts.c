/*
 * post_starts.c — posts: plain functions on the pump, and backpressure.
 *
 * A post is the lightest unit of work: a function call queued behind the
 * coroutines, run on the pump's own stack. Here one post starts three
 * coroutines. The scheduler is created with a limit of two pending posts,
 * so the third coro_post() is refused with EAGAIN instead of letting the
 * queue grow without bound: the caller learns at once that it must slow
 * down, and nothing it was told was accepted is ever dropped.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "coro.h"

static void *worker(void *arg)
{
    printf("  worker %d starts\n", *(int *)arg);
    coro_yield();
    printf("  worker %d finishes\n", *(int *)arg);
    return NULL;
}

/* A post: runs on the pump, may start coroutines, must not yield. */
static void start_workers(coro_sched *s, void *arg)
{
    int *ids = arg;

    printf("  post: starting three workers\n");
    for (int i = 0; i < 3; i++)
        coro_go(s, worker, &ids[i]);
}

static void say(coro_sched *s, void *arg)
{
    (void)s;
    printf("  post: %s\n", (const char *)arg);
}

int main(void)
{
    static int ids[3] = {1, 2, 3};
    coro_sched *s = coro_sched_create_limit(2);
    int err;

    if (s == NULL)
        return 1;
    coro_post(s, start_workers, ids);
    coro_post(s, say, "hello from the second post");
    err = coro_post(s, say, "this one is refused");
    printf("third post: %s (%s)\n", err == EAGAIN ? "EAGAIN" : "accepted",
           strerror(err));
    if (coro_sched_run(s) != 0)
        return 1;
    return coro_sched_destroy(s) == 0 ? 0 : 1;
}
