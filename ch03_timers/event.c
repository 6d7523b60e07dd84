/*
 * event.c — events: a flag that coroutines wait on.
 *
 *   manual reset:  set ──> every waiter wakes; stays set until reset
 *   auto reset:    set ──> exactly one waiter wakes (the longest waiting);
 *                          with no waiter, stays set until one wait takes it
 *
 * Waiters form a FIFO, doubly linked through the coroutines themselves
 * (event_next, event_prev), so a waiter whose timeout fires leaves the
 * middle of the list in O(1). A waiting coroutine is parked with the
 * reason CORO_WAIT_EVENT: coro_wake() does not disturb it.
 */
#include "coro_impl.h"

#include <errno.h>

/* Marks an initialised event (an uninitialised one is unlikely to hold it). */
#define EVENT_MAGIC 0xe7e47u

static bool event_valid(const coro_event *e)
{
    return e != NULL && e->magic == EVENT_MAGIC;
}

static void waiters_append(coro_event *e, coro *c)
{
    c->event = e;
    c->event_next = NULL;
    c->event_prev = e->last_waiter;
    if (e->last_waiter != NULL)
        e->last_waiter->event_next = c;
    else
        e->first_waiter = c;
    e->last_waiter = c;
}

void coro__event_unlink(coro *c)
{
    coro_event *e = c->event;

    if (c->event_prev != NULL)
        c->event_prev->event_next = c->event_next;
    else
        e->first_waiter = c->event_next;
    if (c->event_next != NULL)
        c->event_next->event_prev = c->event_prev;
    else
        e->last_waiter = c->event_prev;
    c->event = NULL;
    c->event_next = c->event_prev = NULL;
}

/* Wake the longest-waiting coroutine. */
static void wake_first(coro_event *e)
{
    coro *c = e->first_waiter;

    coro__event_unlink(c);
    coro__make_ready(c, 0);
}

int coro_event_init(coro_event *e, bool manual_reset, bool initially_set)
{
    if (e == NULL)
        return EINVAL;
    e->magic = EVENT_MAGIC;
    e->manual_reset = manual_reset;
    e->is_set = initially_set;
    e->first_waiter = e->last_waiter = NULL;
    return 0;
}

int coro_event_set(coro_event *e)
{
    if (!event_valid(e))
        return EINVAL;
    if (e->manual_reset) {
        e->is_set = true;
        while (e->first_waiter != NULL)
            wake_first(e);
    } else if (e->first_waiter != NULL) {
        wake_first(e); /* handed straight to one waiter: stays unset */
    } else {
        e->is_set = true;
    }
    return 0;
}

int coro_event_reset(coro_event *e)
{
    if (!event_valid(e))
        return EINVAL;
    e->is_set = false;
    return 0;
}

/* Wait for `e` until `deadline`. */
static int event_wait(coro_event *e, uint64_t deadline)
{
    coro *self = coro__scheduled_self();

    if (!event_valid(e))
        return EINVAL;
    if (self == NULL)
        return EPERM;
    if (e->is_set) {
        if (!e->manual_reset)
            e->is_set = false; /* this wait takes it */
        return 0;
    }
    if (deadline != CORO_FOREVER && deadline <= coro_now())
        return ETIMEDOUT;
    waiters_append(e, self);
    return coro__wait(self, CORO_WAIT_EVENT, deadline);
}

int coro_event_await(coro_event *e)
{
    return event_wait(e, CORO_FOREVER);
}

int coro_event_await_for(coro_event *e, uint64_t ns)
{
    return event_wait(e, coro__deadline_after(ns));
}

int coro_event_destroy(coro_event *e)
{
    if (!event_valid(e))
        return EINVAL;
    if (e->first_waiter != NULL)
        return EBUSY;
    e->magic = 0;
    return 0;
}
