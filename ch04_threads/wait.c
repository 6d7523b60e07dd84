/*
 * wait.c — waiting: a coroutine of a scheduler out of the ready queue.
 *
 * Waiting coroutines are in neither structure's queue but the timers':
 *
 *   ready queue ──pump──> running ──yield──> ready queue
 *                            │
 *                            └──sleep/park/await──> waiting (+ a timer)
 *                                                      │
 *          ready queue <──timer fires / wake / set─────┘
 *
 * coro__wait() takes the running coroutine out, with a reason (park.c's
 * sleep and park, event.c's await) and, if it has a deadline, a timer in
 * the scheduler's heap (timer.c). coro__make_ready() puts it back; the
 * pump calls coro__fire_due_timers() on every turn for the timeouts.
 *
 * The timer heap keeps room for one timer per alive coroutine (and as
 * many cancelled ones: timer.c), for the same reason as the ready queue's
 * levels (the invariant in ready.c): coro_sleep() cannot fail for lack of
 * memory.
 *
 * A wake or an event set from another thread (chapter 4) races with the
 * timeout: timeout_wins() takes part in the race, and only the winner
 * makes the coroutine ready. A wake that wins arrives through the inbox
 * (remote.c).
 *
 * Owns: the `timers` heap of struct coro_sched, and each coroutine's
 * waiting, wait_result and deadline. Thread: the scheduler's owner only.
 */
#include "sched_impl.h"

#include <errno.h>
#include <stdint.h>

int coro__wait(coro *self, coro_wait why, uint64_t deadline)
{
    self->waiting = why;
    self->wait_result = 0;
    self->deadline = deadline;
    if (deadline != CORO_FOREVER)
        coro__timers_add(&self->sched->timers, self, deadline);
    if (coro__tracing())
        coro__trace_wait(self, why, deadline);
    coro__yield_to_wait(); /* the pump does not requeue it */
    return self->wait_result;
}

void coro__make_ready(coro *c, int result)
{
    coro_sched *s = c->sched;

    if (c->deadline != CORO_FOREVER)
        coro__timers_remove(&s->timers, c);
    c->waiting = CORO_WAIT_NONE;
    c->wait_result = result;
    coro__queue_coroutine(s, c);
    if (coro__tracing())
        coro__trace_woken(s, c);
}

/* A timer fired for `c`. Does the timeout end the wait, or did a wake (or
 * an event set) from another thread end it first? */
static bool timeout_wins(coro *c)
{
    int parked = CORO_PARK_PARKED;

    switch (c->waiting) {
    case CORO_WAIT_PARK:
        return atomic_compare_exchange_strong_explicit(
            &c->park_word, &parked, CORO_PARK_EMPTY, memory_order_acq_rel,
            memory_order_acquire);
    case CORO_WAIT_EVENT:
        return coro__event_timeout(c);
    default:
        return true; /* only time ends a sleep */
    }
}

/* How many due timers coro__read_clock_and_fire_timers() takes from the heap at a
 * time. */
enum { FIRE_BATCH = 16 };

/* Due timers come off the heap in batches, and the pump asks for every
 * coroutine of a batch (a cache miss each, with many) before it reads the
 * first: the loads of a batch overlap instead of each stalling the loop in
 * turn. The asking is here, not in the heap: the heap never reads a
 * coroutine, and its benchmark (//bench:timers_structure) then measures
 * the heap alone. */
void coro__read_clock_and_fire_timers(coro_sched *s)
{
    coro *due[FIRE_BATCH];
    size_t n;
    uint64_t now = coro_now();

    do {
        n = coro__timers_pop_due(&s->timers, now, due, FIRE_BATCH);
        for (size_t i = 0; i < n; i++)
            __builtin_prefetch(&due[i]->waiting);
        for (size_t i = 0; i < n; i++) {
            coro *c = due[i];

            c->deadline = CORO_FOREVER; /* its timer is gone already */
            if (coro__tracing())
                coro__trace_timer(s, c);
            if (timeout_wins(c))
                coro__make_ready(c, c->waiting == CORO_WAIT_SLEEP
                                        ? 0 : ETIMEDOUT);
            /* else a wake or a set won the race: its request is on the
             * way */
        }
    } while (n == FIRE_BATCH);
}
