/*
 * park.c — waiting for time or for a wake: sleep, park, wake.
 *
 * A coroutine that waits is taken out of the ready queue (coro__wait() in
 * wait.c) with a reason — sleep, park or event — and, if it has a
 * deadline, a timer. It comes back when coro__make_ready() queues it: the
 * pump does that when the timer fires, coro_wake() when the reason is park.
 *
 * The permit. "Wake me when X happens" has a race built in: X may happen
 * *before* the coroutine gets to park. Without memory of that early wake,
 * the coroutine would park after it and wait forever (the lost wake-up).
 * So a wake that finds nobody parked leaves a permit, and the next park
 * consumes it and returns at once. One permit, not a count: wakes say
 * "something changed, look again", not "N things happened".
 */
#define _GNU_SOURCE
#include "coro_impl.h"

#include <errno.h>
#include <time.h>

uint64_t coro_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * CORO_SEC + (uint64_t)ts.tv_nsec;
}

uint64_t coro__deadline_after(uint64_t ns)
{
    uint64_t now = coro_now();

    return ns >= CORO_FOREVER - now ? CORO_FOREVER : now + ns;
}

coro *coro__scheduled_self(void)
{
    coro *self = coro_self();

    /* In a post of a pump that a coroutine of another scheduler entered,
     * coro_self() is that coroutine (the post runs on its stack), but the
     * code running is the post: coro_sched_self() names the pump's
     * scheduler, not the coroutine's, and the post may not wait. */
    if (self == NULL || self->sched == NULL || coro_sched_self() != self->sched)
        return NULL;
    return self;
}

int coro_sleep(uint64_t ns)
{
    coro *self = coro__scheduled_self();

    if (self == NULL)
        return EPERM;
    /* A sleep is only ended by its timer, so its result is always 0. */
    return coro__wait(self, CORO_WAIT_SLEEP, coro__deadline_after(ns));
}

int coro_park_until(uint64_t deadline)
{
    coro *self = coro__scheduled_self();

    if (self == NULL)
        return EPERM;
    if (self->permit) {
        self->permit = false;
        return 0;
    }
    if (deadline != CORO_FOREVER && deadline <= coro_now())
        return ETIMEDOUT;
    return coro__wait(self, CORO_WAIT_PARK, deadline);
}

int coro_park_for(uint64_t ns)
{
    return coro_park_until(coro__deadline_after(ns));
}

int coro_park(void)
{
    return coro_park_until(CORO_FOREVER);
}

int coro_wake(coro *c)
{
    if (c == NULL)
        return EINVAL;
    if (c->owner != coro__thread_id())
        return EPERM;
    if (c->state == CORO_DONE || c->sched == NULL)
        return EINVAL;
    if (c->waiting == CORO_WAIT_PARK)
        coro__make_ready(c, 0);
    else
        c->permit = true; /* for its next park; permits do not add up */
    return 0;
}
