/*
 * semaphore.c — the reference answer of Chapter 3's exercise 2: a
 * counting semaphore on coro_park() / coro_wake() and a FIFO of waiters.
 *
 * Why the permit is not enough on its own. A permit is one bit per
 * coroutine: it does not count (two wakes leave one permit), so it cannot
 * hold a semaphore's value, and it belongs to a coroutine, not to the
 * semaphore, so a wake sent for some other reason (anyone may call
 * coro_wake() on any coroutine) looks exactly like a release. So the
 * semaphore keeps its own state, the value and the queue, and uses the
 * park only to stop until that state may have changed for us:
 *
 *   - release with a waiter hands the unit straight to the first one
 *     (marks it granted, takes it off the queue, wakes it) and the value
 *     does not move: a coroutine that acquires between the release and the
 *     waiter's resume finds 0 and queues behind. Raising the value and
 *     letting the woken waiter take it would let that late comer overtake.
 *   - a waiter parks in a loop until it is granted: a stray wake, or a
 *     permit left from before, only makes it look again.
 *
 * The checks of tools/lab: `tools/lab check ch03 semaphore`.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "coro.h"

/* A waiter: on the waiting coroutine's own stack while it waits. */
struct waiter {
    coro *self;
    bool granted;
    struct waiter *next;
};

typedef struct semaphore {
    unsigned value;
    struct waiter *first, *last; /* FIFO */
} semaphore;

semaphore *semaphore_create(unsigned value);
int semaphore_acquire(semaphore *s);
int semaphore_release(semaphore *s);
int semaphore_destroy(semaphore *s);

semaphore *semaphore_create(unsigned value)
{
    semaphore *s = calloc(1, sizeof *s);

    if (s == NULL)
        return NULL; /* errno is ENOMEM */
    s->value = value;
    return s;
}

int semaphore_acquire(semaphore *s)
{
    struct waiter me = {0};

    if (s == NULL)
        return EINVAL;
    /* Take a unit only if nobody queued before us. */
    if (s->value > 0 && s->first == NULL) {
        s->value--;
        return 0;
    }
    me.self = coro_self();
    if (me.self == NULL || coro_sched_self() == NULL)
        return EPERM; /* coro_park() would say so too, but after we queued */
    if (s->last != NULL)
        s->last->next = &me;
    else
        s->first = &me;
    s->last = &me;
    while (!me.granted) {
        int err = coro_park();

        if (err != 0 && !me.granted) {
            /* Cannot wait here (a post, a hand-made coroutine): leave
             * the queue again. We are still in it: nobody granted us. */
            struct waiter **link = &s->first, *prev = NULL;

            while (*link != &me) {
                prev = *link;
                link = &(*link)->next;
            }
            *link = me.next;
            if (s->last == &me)
                s->last = prev;
            return err;
        }
    }
    return 0;
}

int semaphore_release(semaphore *s)
{
    struct waiter *w;

    if (s == NULL)
        return EINVAL;
    w = s->first;
    if (w == NULL) {
        s->value++;
        return 0;
    }
    /* Hand the unit to the longest waiting, not to whoever asks next. */
    s->first = w->next;
    if (s->first == NULL)
        s->last = NULL;
    w->granted = true;
    return coro_wake(w->self);
}

int semaphore_destroy(semaphore *s)
{
    if (s == NULL)
        return EINVAL;
    if (s->first != NULL)
        return EBUSY;
    free(s);
    return 0;
}
