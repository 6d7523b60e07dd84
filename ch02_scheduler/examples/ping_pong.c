/*
 * ping_pong.c — two coroutines taking turns, with main as the referee.
 *
 * Asymmetric coroutines never switch to each other directly: each yields
 * back to whoever resumed it (here: main), and main decides who goes next.
 * That hand-written loop in main is a scheduler, written by hand: the
 * scheduler of chapter 2 (coro_sched) does the same job for any number of
 * coroutines.
 */
#include <stdio.h>

#include "coro.h"

enum { ROUNDS = 3 };

static void *player(void *arg)
{
    const char *word = arg;

    for (int round = 1; round <= ROUNDS; round++) {
        printf("  %s (round %d)\n", word, round);
        coro_yield();
    }
    return NULL;
}

int main(void)
{
    coro *ping = coro_create(player, "ping", 0);
    coro *pong = coro_create(player, "pong", 0);

    if (ping == NULL || pong == NULL) {
        perror("coro_create");
        return 1;
    }
    /* The referee: resume each in turn until both have finished. */
    while (coro_status(ping) != CORO_DONE || coro_status(pong) != CORO_DONE) {
        if (coro_status(ping) != CORO_DONE)
            coro_resume(ping);
        if (coro_status(pong) != CORO_DONE)
            coro_resume(pong);
    }
    printf("both players finished\n");
    return coro_destroy(ping) == 0 && coro_destroy(pong) == 0 ? 0 : 1;
}
