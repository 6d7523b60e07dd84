/*
 * priorities.c — three coroutines of 5, 1 and 4 steps, each lowering its
 * own priority by one after every step.
 *
 * All three start at the default priority 0. Higher priority runs first and
 * a new priority applies when the coroutine is next queued, so a coroutine
 * that has just run (and lowered itself) goes behind every coroutine that
 * has run fewer steps: the others catch up before it runs again. Among
 * equal priorities the queue is first in, first out.
 *
 * The order this prints is worked out step by step in the lesson.
 */
#include <stdio.h>

#include "coro.h"

static void *task(void *arg)
{
    int steps = *(const int *)arg;

    printf("  task(%d) starts\n", steps);
    for (int step = 1; step <= steps; step++) {
        int priority = coro_priority(coro_self());

        printf("  task(%d): step %d at priority %d\n", steps, step, priority);
        coro_set_priority(coro_self(), priority - 1);
        coro_yield(); /* requeued at the new, lower priority */
    }
    printf("  task(%d) ends\n", steps);
    return NULL;
}

int main(void)
{
    static const int steps[] = {5, 1, 4};
    coro_sched *s = coro_sched_create();

    if (s == NULL)
        return 1;
    for (int i = 0; i < 3; i++)
        if (coro_go(s, task, (void *)&steps[i]) != 0)
            return 1;
    if (coro_sched_run(s) != 0)
        return 1;
    return coro_sched_destroy(s) == 0 ? 0 : 1;
}
