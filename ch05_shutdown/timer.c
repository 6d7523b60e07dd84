/*
 * timer.c — the timers: a 4-ary min-heap ordered by (deadline, seq).
 *
 *                         [0] earliest
 *              ┌──────┬─────┴─┬───────┐
 *             [1]    [2]     [3]     [4]        children of i:
 *          ┌─┬─┴┬──┐                             4i+1 .. 4i+4
 *         [5][6][7][8] ...                      parent of i: (i-1)/4
 *
 * Every node is earlier than its children, so the earliest timer is always
 * heap[0]. Adding puts the timer at the end and moves it up past later
 * parents; removing moves the last timer into the hole and lets it settle
 * up or down. Both are O(log4 n): a million timers are ten levels deep.
 *
 * Why four children instead of two: half as many levels, and the four
 * children sit next to each other in memory (one or two cache lines), so
 * the extra comparisons per level are cheap while the levels saved are
 * cache misses saved. The keys live in the heap array itself, so comparing
 * never follows a pointer to a coroutine.
 *
 * `seq` makes the order total: two timers with the same deadline fire in
 * the order they were set (first in, first out), as libuv's timers do.
 */
#include "coro_impl.h"

#include <errno.h>
#include <stdlib.h>

enum { ARITY = 4 };

/* Whether timer a fires before timer b. */
static bool earlier(const coro_timer *a, const coro_timer *b)
{
    if (a->deadline != b->deadline)
        return a->deadline < b->deadline;
    return a->seq < b->seq;
}

/* Put `timer` at `slot` and tell its coroutine where it is. */
static void place(coro_timers *t, size_t slot, coro_timer timer)
{
    t->heap[slot] = timer;
    timer.c->timer_slot = slot;
}

/* Move `timer`, destined for `slot`, up past every later parent. */
static void sift_up(coro_timers *t, size_t slot, coro_timer timer)
{
    while (slot > 0) {
        size_t parent = (slot - 1) / ARITY;

        if (!earlier(&timer, &t->heap[parent]))
            break;
        place(t, slot, t->heap[parent]);
        slot = parent;
    }
    place(t, slot, timer);
}

/* Move `timer`, destined for `slot`, down past every earlier child. */
static void sift_down(coro_timers *t, size_t slot, coro_timer timer)
{
    for (;;) {
        size_t first = slot * ARITY + 1;
        size_t best = first;

        if (first >= t->count)
            break;
        for (size_t i = first + 1; i < first + ARITY && i < t->count; i++)
            if (earlier(&t->heap[i], &t->heap[best]))
                best = i;
        if (!earlier(&t->heap[best], &timer))
            break;
        place(t, slot, t->heap[best]);
        slot = best;
    }
    place(t, slot, timer);
}

int coro__timers_reserve(coro_timers *t, size_t n)
{
    size_t capacity = t->capacity ? t->capacity : 64;
    coro_timer *heap;

    if (n <= t->capacity)
        return 0;
    while (capacity < n)
        capacity *= 2;
    heap = realloc(t->heap, capacity * sizeof *heap);
    if (heap == NULL)
        return ENOMEM;
    t->heap = heap;
    t->capacity = capacity;
    return 0;
}

void coro__timers_add(coro_timers *t, coro *c, uint64_t deadline)
{
    coro_timer timer = {deadline, t->next_seq++, c};

    if (t->count == t->capacity)
        abort(); /* broken invariant: room is reserved per coroutine */
    sift_up(t, t->count++, timer);
}

void coro__timers_remove(coro_timers *t, coro *c)
{
    size_t slot = c->timer_slot;
    coro_timer last = t->heap[--t->count];

    if (slot == t->count)
        return; /* it was the last one */
    /* The last timer fills the hole; it may belong above or below it. */
    if (slot > 0 && earlier(&last, &t->heap[(slot - 1) / ARITY]))
        sift_up(t, slot, last);
    else
        sift_down(t, slot, last);
}

uint64_t coro__timers_next(const coro_timers *t)
{
    return t->count > 0 ? t->heap[0].deadline : CORO_FOREVER;
}

coro *coro__timers_pop_due(coro_timers *t, uint64_t now)
{
    coro *c;

    if (t->count == 0 || t->heap[0].deadline > now)
        return NULL;
    c = t->heap[0].c;
    coro__timers_remove(t, c);
    return c;
}

void coro__timers_free(coro_timers *t)
{
    free(t->heap);
    t->heap = NULL;
    t->count = t->capacity = 0;
}
