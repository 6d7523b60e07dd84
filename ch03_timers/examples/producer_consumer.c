/*
 * producer_consumer.c — a producer and a consumer meeting through events.
 *
 * One slot holds one item. Two auto-reset events say what the slot needs:
 * `filled` (the consumer may take) and `emptied` (the producer may put).
 * Each side waits for its event, acts, and sets the other's: a hand-off
 * with no spinning and no lost signal — an auto-reset event set with nobody
 * waiting stays set until the next wait takes it.
 */
#include <stdio.h>

#include "coro.h"

enum { ITEMS = 5 };

struct channel {
    int slot;
    coro_event filled;  /* auto reset: one item for one taker */
    coro_event emptied; /* auto reset: room for one item */
};

static void *producer(void *arg)
{
    struct channel *ch = arg;

    coro_set_name(coro_self(), "producer"); /* what a trace calls it */

    for (int i = 1; i <= ITEMS; i++) {
        coro_event_await(&ch->emptied);
        coro_sleep(10 * CORO_MSEC); /* "produce" */
        ch->slot = i * i;
        printf("  producer: put %d\n", ch->slot);
        coro_event_set(&ch->filled);
    }
    return NULL;
}

static void *consumer(void *arg)
{
    struct channel *ch = arg;

    coro_set_name(coro_self(), "consumer"); /* what a trace calls it */

    for (int i = 1; i <= ITEMS; i++) {
        coro_event_await(&ch->filled);
        printf("  consumer: took %d\n", ch->slot);
        coro_event_set(&ch->emptied);
    }
    return NULL;
}

int main(void)
{
    struct channel ch;
    coro_sched *s = coro_sched_create();

    if (s == NULL)
        return 1;
    coro_event_init(&ch.filled, false, false);
    coro_event_init(&ch.emptied, false, true); /* the slot starts empty */
    coro_go(s, consumer, &ch);
    coro_go(s, producer, &ch);
    if (coro_sched_run(s) != 0)
        return 1;
    coro_event_destroy(&ch.filled);
    coro_event_destroy(&ch.emptied);
    return coro_sched_destroy(s) == 0 ? 0 : 1;
}
