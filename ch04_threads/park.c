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
 * Memory order. Every write to park_word after the coroutine is created
 * is a read-modify-write (exchange or compare-and-swap), including the
 * wake that finds a permit already there (PERMIT -> PERMIT) and the park
 * that consumes one. That is the whole argument, and it holds on any
 * processor:
 *
 *   - Read-modify-writes of one word happen one after another in a single
 *     order, and each reads the value the previous one left.
 *   - So a wake either comes before the park's consuming exchange in that
 *     order — the exchange (acquire) then reads what the wake (release)
 *     wrote, or what later read-modify-writes made of it, and everything
 *     the waker did before its wake (publishing the reason: a request, a
 *     flag) is visible to the code after the park returns — or it comes
 *     after, finds EMPTY or PARKED, and leaves a new permit or ends the
 *     park. A wake can never be absorbed by a permit that is already
 *     being consumed.
 *
 * What went wrong before (ch04 lesson, "Proving the handshake"): the park
 * consumed a permit it found late with a plain store of EMPTY, and the
 * wake checked for "already a permit" with a plain load. On x86 the store
 * waits in the store buffer while the coroutine's next loads run ahead:
 * it re-read its condition, saw nothing new, parked again — while a waker
 * that published a new request read the stale PERMIT and returned. Nobody
 * woke the coroutine. models/park.pml finds that interleaving, and proves
 * the exchange closes it. On AArch64 plain loads and stores are weaker
 * still, and only the read-modify-write argument above (or seq_cst on
 * both sides) holds; a lock-free read-modify-write costs about the same
 * there (one CASAL or LDAXR/STLXR pair).
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
    int word = CORO_PARK_EMPTY;

    if (self == NULL)
        return EPERM;
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
        /* Consume it with an exchange, never a plain store: see "Memory
         * order" at the top of this file. */
        atomic_exchange_explicit(&self->park_word, CORO_PARK_EMPTY,
                                 memory_order_acquire);
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
    int word, next;

    if (c == NULL || c->sched == NULL ||
        atomic_load_explicit(&c->finished, memory_order_acquire))
        return EINVAL;
    word = atomic_load_explicit(&c->park_word, memory_order_relaxed);
    do {
        /* PARKED -> EMPTY ends the park; EMPTY or PERMIT -> PERMIT leaves
         * the one permit (they do not add up). Even the second, when it
         * changes nothing, is a read-modify-write, so that it takes its
         * place in the word's order (see the top of this file).
         * release: what we did before this wake is visible to the park
         * that consumes the permit, or to the coroutine we make ready.
         * acquire: the park's PARKED was written with release, so the
         * owner is done with c->remote (its last request) before we
         * reuse it in coro__deliver_ready(). */
        next = word == CORO_PARK_PARKED ? CORO_PARK_EMPTY : CORO_PARK_PERMIT;
    } while (!atomic_compare_exchange_weak_explicit(
        &c->park_word, &word, next, memory_order_acq_rel,
        memory_order_relaxed));
    if (word == CORO_PARK_PARKED)
        coro__deliver_ready(c); /* we won: we end its park */
    return 0;
}
