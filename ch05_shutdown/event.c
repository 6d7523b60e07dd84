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
 *
 * Any thread may set an event, and its waiters may belong to schedulers of
 * several threads, so the flag and the list are guarded by the event's
 * mutex. A set takes its waiters off the list under the lock and delivers
 * their wake-ups after it (coro__deliver_ready()); a waiter whose timeout
 * fires checks, under the same lock, whether it is still on the list. If
 * not, a set got there first, and its wake-up is on the way.
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
    c->event_linked = true;
    c->event_next = NULL;
    c->event_prev = e->last_waiter;
    if (e->last_waiter != NULL)
        e->last_waiter->event_next = c;
    else
        e->first_waiter = c;
    e->last_waiter = c;
}

/* Take `c` off its event's waiter list (the event's lock is held). */
static void waiters_remove(coro *c)
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
    c->event_linked = false;
    c->event_next = c->event_prev = NULL;
}

bool coro__event_timeout(coro *c)
{
    coro_event *e = c->event;
    bool still_waiting;

    pthread_mutex_lock(&e->lock);
    still_waiting = c->event_linked;
    if (still_waiting)
        waiters_remove(c);
    pthread_mutex_unlock(&e->lock);
    return still_waiting;
}

/* Reverse a list threaded through event_next. */
static coro *reverse_woken(coro *list)
{
    coro *reversed = NULL;

    while (list != NULL) {
        coro *next = list->event_next;
        list->event_next = reversed;
        reversed = list;
        list = next;
    }
    return reversed;
}

/* Take the longest-waiting coroutine off the list (the lock is held) and
 * add it to `woken`, a list threaded through event_next. */
static void take_first(coro_event *e, coro **woken)
{
    coro *c = e->first_waiter;

    waiters_remove(c);
    c->event_next = *woken;
    *woken = c;
}

int coro_event_init(coro_event *e, bool manual_reset, bool initially_set)
{
    if (e == NULL)
        return EINVAL;
    if (pthread_mutex_init(&e->lock, NULL) != 0)
        return ENOMEM;
    e->magic = EVENT_MAGIC;
    e->manual_reset = manual_reset;
    e->is_set = initially_set;
    e->first_waiter = e->last_waiter = NULL;
    return 0;
}

int coro_event_set(coro_event *e)
{
    coro *woken = NULL;

    if (!event_valid(e))
        return EINVAL;
    pthread_mutex_lock(&e->lock);
    if (e->manual_reset) {
        e->is_set = true;
        while (e->first_waiter != NULL)
            take_first(e, &woken);
    } else if (e->first_waiter != NULL) {
        take_first(e, &woken); /* handed straight to one waiter: unset */
    } else {
        e->is_set = true;
    }
    pthread_mutex_unlock(&e->lock);
    /* Deliver outside the lock: each waiter is ours alone now. (`woken` is
     * newest-first; the queue order of simultaneous wake-ups across
     * threads is not part of the contract, but on one thread keep FIFO.) */
    woken = reverse_woken(woken);
    while (woken != NULL) {
        coro *c = woken;
        woken = c->event_next;
        c->event_next = NULL;
        coro__deliver_ready(c);
    }
    return 0;
}

int coro_event_reset(coro_event *e)
{
    if (!event_valid(e))
        return EINVAL;
    pthread_mutex_lock(&e->lock);
    e->is_set = false;
    pthread_mutex_unlock(&e->lock);
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
    if (coro__is_canceled(self))
        return coro__refuse_canceled(); /* a set event is not taken */
    pthread_mutex_lock(&e->lock);
    if (e->is_set) {
        if (!e->manual_reset)
            e->is_set = false; /* this wait takes it */
        pthread_mutex_unlock(&e->lock);
        return 0;
    }
    if (deadline != CORO_FOREVER && deadline <= coro_now()) {
        pthread_mutex_unlock(&e->lock);
        return ETIMEDOUT;
    }
    waiters_append(e, self);
    pthread_mutex_unlock(&e->lock);
    /* A set on another thread may take us off the list from here on; its
     * wake-up reaches us through the pump, after we have suspended. */
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
    bool waiters;

    if (!event_valid(e))
        return EINVAL;
    pthread_mutex_lock(&e->lock);
    waiters = e->first_waiter != NULL;
    pthread_mutex_unlock(&e->lock);
    if (waiters)
        return EBUSY;
    e->magic = 0;
    pthread_mutex_destroy(&e->lock);
    return 0;
}
