/*
 * interleave.c — three tasks taking turns, and nobody writing the loop.
 *
 * Chapter 1's ping-pong needed a hand-written loop in main deciding who
 * runs next. Here the scheduler's pump does it: each coro_yield() puts the
 * task at the back of the ready queue, so the three interleave round-robin.
 *
 * To see it: CORO_TRACE=$PWD/interleave.json runs it with a trace (an
 * absolute path: `bazel run` starts it in a directory of its own), and
 * tools/timeline interleave.json -o interleave.svg draws it.
 */
#include <stdio.h>

#include "coro.h"

static void *task(void *arg)
{
    const char *name = arg;

    coro_set_name(coro_self(), name); /* what a trace calls it */
    for (int step = 1; step <= 3; step++) {
        printf("  %s: step %d\n", name, step);
        coro_yield(); /* to the back of the queue: the others go first */
    }
    return NULL;
}

int main(void)
{
    coro_sched *s = coro_sched_create();

    if (s == NULL) {
        perror("coro_sched_create");
        return 1;
    }
    coro_go(s, task, "A");
    coro_go(s, task, "B");
    coro_go(s, task, "C");
    if (coro_sched_run(s) != 0) /* until all three have returned */
        return 1;
    printf("all tasks finished; alive = %zu\n", coro_sched_alive(s));
    return coro_sched_destroy(s) == 0 ? 0 : 1;
}
