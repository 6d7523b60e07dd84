/*
 * looper_hang.c — a program that hangs, to be looked at with
 * `info coroutines` (Chapter 4's lesson, "Pitfalls"; tools/gdb_test.sh).
 *
 * A coroutine on a looper parks until a reply wakes it. Nothing ever
 * sends the reply, and coro_looper_stop() waits for every coroutine of
 * the looper to finish: for ever. Build it against Chapter 4 or 5.
 */
#include <stdio.h>

#include "coro.h"

static void *wait_for_reply(void *arg)
{
    (void)arg;
    coro_park(); /* until the reply's coro_wake(): never */
    printf("reply received\n");
    return NULL;
}

int main(void)
{
    coro_looper *l = coro_looper_start("replies");

    if (l == NULL || coro_go(coro_looper_sched(l), wait_for_reply, NULL) != 0)
        return 1;
    printf("stopping the looper\n");
    fflush(stdout);
    return coro_looper_stop(l) == 0 ? 0 : 1; /* waits for wait_for_reply */
}
