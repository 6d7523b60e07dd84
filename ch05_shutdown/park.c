/*
 * park.c — waiting for time or for a wake: sleep, park, wake.
 *
 * A coroutine that waits is taken out of the ready queue (coro__wait() in
 * sched.c) with a reason — sleep, park or event — and, if it has a
 * deadline, a timer. It comes back when coro__make_ready() queues it: the
 * pump does that when the timer fires, coro_wake() when the reason is park.
 *
 * The permit. "Wake me when X happens" has a race built in: X may happen
 * *before* the coroutine gets to park. Without memory of that early wake,
 * the coroutine would park after it and wait forever (the lost wake-up).
 * So a wake that finds nobody parked leaves a permit, and the next park
 * consumes it and returns at once. One permit, not a count: wakes say
 * "something changed, look again", not "N things happened".
 *
 * Across threads the permit is a word, park_word, changed only by
 * compare-and-swap, with three values:
 *
 *          wake                 park (no permit)
 *   EMPTY ──────> PERMIT        EMPTY ──────────> PARKED
 *     ^              │            ^                  │
 *     └── park ──────┘            └── wake / timer ──┘  (exactly one wins)
 *       (consumes it)
 *
 * Whoever moves PARKED -> EMPTY — a waker on any thread, or the pump when
 * the timeout fires — is the one, and only one, that makes the coroutine
 * ready. The loser of that race does nothing: the wake has already been
 * delivered (its request may still be in the inbox), or the timer has
 * already ended the park.
 *
 * A cancel (this stage) ends any wait too, but only ever on the owner's
 * thread (sched.c, end_wait_canceled()): for a park it takes part in the
 * same race, moving PARKED -> EMPTY like a wake or a timeout.
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

/*
 * The statistics clock (coro_sched_stats()): the processor's cycle counter
 * where there is one — a few nanoseconds to read, against about twenty for
 * clock_gettime() — converted to nanoseconds with a rate measured once
 * against CLOCK_MONOTONIC.
 */
uint64_t coro__ticks(void)
{
#if defined(__x86_64__)
    uint32_t lo, hi;

    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return (uint64_t)hi << 32 | lo;
#elif defined(__aarch64__)
    uint64_t ticks;

    __asm__ volatile("mrs %0, cntvct_el0" : "=r"(ticks));
    return ticks;
#else
    return coro_now();
#endif
}

/* Nanoseconds per tick, measured over 2 ms the first time it is needed. */
static double ns_per_tick;
static pthread_once_t ns_per_tick_once = PTHREAD_ONCE_INIT;

static void measure_ns_per_tick(void)
{
    uint64_t t0 = coro__ticks(), n0 = coro_now(), n1;

    do
        n1 = coro_now();
    while (n1 - n0 < 2 * CORO_MSEC);
    ns_per_tick = (double)(n1 - n0) / (double)(coro__ticks() - t0);
}

uint64_t coro__ticks_to_ns(uint64_t ticks)
{
    pthread_once(&ns_per_tick_once, measure_ns_per_tick);
    return (uint64_t)((double)ticks * ns_per_tick);
}

uint64_t coro__deadline_after(uint64_t ns)
{
    uint64_t now = coro_now();

    return ns >= CORO_FOREVER - now ? CORO_FOREVER : now + ns;
}

coro *coro__scheduled_self(void)
{
    coro *self = coro_self();

    return self != NULL && self->sched != NULL ? self : NULL;
}

int coro_sleep(uint64_t ns)
{
    coro *self = coro__scheduled_self();

    if (self == NULL)
        return EPERM;
    if (coro__is_canceled(self))
        return coro__refuse_canceled();
    /* A sleep is ended by its timer (0) or by a cancel (ECANCELED). */
    return coro__wait(self, CORO_WAIT_SLEEP, coro__deadline_after(ns));
}

int coro_park_until(uint64_t deadline)
{
    coro *self = coro__scheduled_self();
    int word = CORO_PARK_EMPTY;

    if (self == NULL)
        return EPERM;
    if (coro__is_canceled(self))
        return coro__refuse_canceled(); /* the permit stays for later */
    /* acquire: what the waker did before its wake is visible to us. */
    if (atomic_exchange_explicit(&self->park_word, CORO_PARK_EMPTY,
                                 memory_order_acquire) == CORO_PARK_PERMIT)
        return 0;
    if (deadline != CORO_FOREVER && deadline <= coro_now())
        return ETIMEDOUT;
    /* EMPTY -> PARKED. A wake that lands between the exchange above and
     * here leaves a permit instead, and the compare fails: use it. */
    if (!atomic_compare_exchange_strong_explicit(
            &self->park_word, &word, CORO_PARK_PARKED,
            memory_order_acq_rel, memory_order_acquire)) {
        atomic_store_explicit(&self->park_word, CORO_PARK_EMPTY,
                              memory_order_relaxed);
        return 0;
    }
    /* From here a waker may already be delivering our wake-up; it can only
     * reach us through the pump, which runs after we have suspended. */
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
    int word;

    if (c == NULL || c->sched == NULL ||
        atomic_load_explicit(&c->finished, memory_order_acquire))
        return EINVAL;
    word = atomic_load_explicit(&c->park_word, memory_order_relaxed);
    for (;;) {
        if (word == CORO_PARK_PERMIT)
            return 0; /* permits do not add up */
        if (word == CORO_PARK_EMPTY) {
            /* release: our earlier writes are visible to the park that
             * consumes this permit. */
            if (atomic_compare_exchange_weak_explicit(
                    &c->park_word, &word, CORO_PARK_PERMIT,
                    memory_order_release, memory_order_relaxed))
                return 0;
            continue; /* word was reloaded: look again */
        }
        if (atomic_compare_exchange_weak_explicit(
                &c->park_word, &word, CORO_PARK_EMPTY,
                memory_order_acq_rel, memory_order_relaxed)) {
            coro__deliver_ready(c); /* we won: we end its park */
            return 0;
        }
    }
}
