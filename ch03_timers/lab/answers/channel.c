/*
 * channel.c — the reference answer of Chapter 3's exercise 1: a channel
 * of capacity N, made of a ring buffer and two auto-reset events.
 *
 *   not_empty: set after every send  ("look again, there may be an item")
 *   not_full:  set after every receive ("look again, there may be room")
 *
 * An auto-reset event does not count its sets: one set with nobody
 * waiting leaves it set once, however many items arrived. So an event
 * here is only a reason to look again, never the item itself: each side
 * waits in a loop around the real condition (the count), as a park does
 * in the lesson's "Park, wake, and why a permit is needed". A set that
 * finds the condition already used up (a stale set) costs one more turn
 * of the loop, nothing else.
 *
 * The checks of tools/lab: `tools/lab check ch03 channel`.
 */
#include <errno.h>
#include <stdlib.h>

#include "coro.h"

typedef struct channel {
    void **ring;          /* capacity slots */
    size_t capacity;
    size_t head;          /* the slot the next receive takes */
    size_t count;         /* items in the ring */
    size_t waiting;       /* coroutines blocked in send or receive */
    coro_event not_empty; /* auto reset */
    coro_event not_full;  /* auto reset */
} channel;

channel *channel_create(size_t capacity);
int channel_send(channel *ch, void *item);
int channel_recv(channel *ch, void **item);
int channel_destroy(channel *ch);

channel *channel_create(size_t capacity)
{
    channel *ch;

    if (capacity == 0) {
        errno = EINVAL;
        return NULL;
    }
    ch = calloc(1, sizeof *ch);
    if (ch == NULL)
        return NULL; /* errno is ENOMEM */
    ch->ring = calloc(capacity, sizeof *ch->ring);
    if (ch->ring == NULL) {
        free(ch);
        errno = ENOMEM;
        return NULL;
    }
    ch->capacity = capacity;
    coro_event_init(&ch->not_empty, false, false);
    coro_event_init(&ch->not_full, false, false);
    return ch;
}

/* Wait on `e` until `ready(ch)` holds. */
static int wait_until(channel *ch, coro_event *e, bool (*ready)(const channel *))
{
    while (!ready(ch)) {
        int err;

        ch->waiting++;
        err = coro_event_await(e);
        ch->waiting--;
        if (err != 0)
            return err; /* EPERM: nobody to wait for us outside a coroutine */
    }
    return 0;
}

static bool has_room(const channel *ch)
{
    return ch->count < ch->capacity;
}

static bool has_item(const channel *ch)
{
    return ch->count > 0;
}

int channel_send(channel *ch, void *item)
{
    int err;

    if (ch == NULL)
        return EINVAL;
    err = wait_until(ch, &ch->not_full, has_room);
    if (err != 0)
        return err;
    ch->ring[(ch->head + ch->count) % ch->capacity] = item;
    ch->count++;
    coro_event_set(&ch->not_empty);
    return 0;
}

int channel_recv(channel *ch, void **item)
{
    int err;

    if (ch == NULL || item == NULL)
        return EINVAL;
    err = wait_until(ch, &ch->not_empty, has_item);
    if (err != 0)
        return err;
    *item = ch->ring[ch->head];
    ch->head = (ch->head + 1) % ch->capacity;
    ch->count--;
    coro_event_set(&ch->not_full);
    return 0;
}

int channel_destroy(channel *ch)
{
    if (ch == NULL)
        return EINVAL;
    /* A blocked sender or receiver waits on one of the events, and
     * coro_event_destroy() would refuse it: refuse before touching
     * either, so that a refused destroy leaves the channel whole. */
    if (ch->waiting > 0)
        return EBUSY;
    coro_event_destroy(&ch->not_empty);
    coro_event_destroy(&ch->not_full);
    free(ch->ring);
    free(ch);
    return 0;
}
