/*
 * host_loop.c — a pump embedded in somebody else's loop.
 *
 * Many programs already have a main loop (a game's frame loop, a GUI's idle
 * handler). Instead of giving the thread to coro_sched_run(), such a loop
 * calls coro_sched_poll_for() once per turn: it runs what is ready and, if
 * nothing is, sleeps at most the time the host allows — here a "frame" of
 * 20 ms. The coroutines sleep across frames without the host noticing.
 */
#include <stdio.h>

#include "coro.h"

static void *blinker(void *arg)
{
    const char *name = arg;

    for (int i = 0; i < 3; i++) {
        coro_sleep(45 * CORO_MSEC);
        printf("    %s blinks\n", name);
    }
    return NULL;
}

int main(void)
{
    coro_sched *s = coro_sched_create();
    int frame = 0;

    if (s == NULL)
        return 1;
    coro_go(s, blinker, "lamp A");
    coro_go(s, blinker, "lamp B");
    while (coro_sched_alive(s) > 0) {
        size_t ran = coro_sched_poll_for(s, 20 * CORO_MSEC);
        printf("  frame %2d: the pump ran %zu item(s)\n", ++frame, ran);
    }
    return coro_sched_destroy(s) == 0 ? 0 : 1;
}
