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
 * children sit next to each other in memory (two cache lines), so the
 * extra comparisons per level are cheap while the levels saved are cache
 * misses saved. The keys live in the heap array itself, so comparing never
 * follows a pointer to a coroutine.
 *
 * `seq` makes the order total: two timers with the same deadline fire in
 * the order they were set (first in, first out), as libuv's timers do.
 *
 * Where a timer is. Removing a timer from the middle (a parked coroutine
 * woken before its deadline) needs its index, and sifts move timers
 * around. So every pending timer has a small number, its id; the
 * coroutine keeps the id, and `where[id]` is the timer's index, updated at
 * every move:
 *
 *     heap:   [0] d=5 id=2   [1] d=9 id=0   [2] d=7 id=1
 *     where:  [0] 1          [1] 2          [2] 0
 *
 * Keeping the index in the coroutine itself would be simpler, but then a
 * sift writes into every coroutine it moves, each a cache miss (with a
 * million coroutines, a TLB miss too): measured, four fifths of the time
 * spent removing a timer went there. `where` is one dense array of 4-byte
 * entries. Free ids wait on a stack, so `where` is only as long as the
 * most timers ever pending at once.
 *
 * Waiting for memory. With a million timers the heap is 32 MB: each level
 * near the bottom is a cache miss, and so is every coroutine the pump then
 * touches. Prefetches (hints that never change a result) let those waits
 * overlap instead of queueing one behind the other: see sift_down() and
 * coro__timers_pop_due().
 */
#include "coro_impl.h"

#include <errno.h>
#include <stdlib.h>

enum { ARITY = 4 };

/* The size of a cache line on the machines we run on (x86-64, arm64). */
enum { CACHE_LINE = 64 };

/* Whether timer a fires before timer b. */
static bool earlier(const coro_timer *a, const coro_timer *b)
{
    if (a->deadline != b->deadline)
        return a->deadline < b->deadline;
    return a->seq < b->seq;
}

/* Put `timer` at `slot` and record where it is. */
static void place(coro_timers *t, size_t slot, coro_timer timer)
{
    t->heap[slot] = timer;
    t->where[timer.id] = (uint32_t)slot;
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
        /* While we compare the four children, let memory bring in the
         * next level: the 16 grandchildren, 512 bytes side by side, among
         * which are the winner's four children. (The loop stays here: GCC
         * deletes a call to a helper whose only work is prefetching.) */
        if (first * ARITY + 1 + ARITY * ARITY <= t->count) {
            const char *block = (const char *)&t->heap[first * ARITY + 1];
            size_t size = ARITY * ARITY * sizeof(coro_timer);

            for (size_t at = 0; at < size; at += CACHE_LINE)
                __builtin_prefetch(block + at);
            __builtin_prefetch(block + size - 1); /* a ninth line? */
        }
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

/* Remove the timer at `slot`; its id becomes free. */
static void remove_at(coro_timers *t, size_t slot)
{
    coro_timer last = t->heap[--t->count];

    t->free_ids[t->free_count++] = t->heap[slot].id;
    if (slot == t->count)
        return; /* it was the last one */
    /* The last timer fills the hole; it may belong above or below it. */
    if (slot > 0 && earlier(&last, &t->heap[(slot - 1) / ARITY]))
        sift_up(t, slot, last);
    else
        sift_down(t, slot, last);
}

int coro__timers_reserve(coro_timers *t, size_t n)
{
    size_t capacity = t->capacity ? t->capacity : 64;
    coro_timer *heap;
    uint32_t *where, *free_ids;

    if (n <= t->capacity)
        return 0;
    while (capacity < n)
        capacity *= 2;
    if (capacity > UINT32_MAX)
        return ENOMEM; /* ids and indices are 32 bits */
    /* A failure part way leaves some arrays larger than `capacity`, which
     * is harmless: the next call grows the others. */
    heap = realloc(t->heap, capacity * sizeof *heap);
    if (heap == NULL)
        return ENOMEM;
    t->heap = heap;
    where = realloc(t->where, capacity * sizeof *where);
    if (where == NULL)
        return ENOMEM;
    t->where = where;
    free_ids = realloc(t->free_ids, capacity * sizeof *free_ids);
    if (free_ids == NULL)
        return ENOMEM;
    t->free_ids = free_ids;
    t->capacity = capacity;
    return 0;
}

void coro__timers_add(coro_timers *t, coro *c, uint64_t deadline)
{
    coro_timer timer = {deadline, t->next_seq++, c, 0};

    if (t->count == t->capacity)
        abort(); /* broken invariant: room is reserved per coroutine */
    /* A free id if there is one, else one never used: count < capacity,
     * so one of the two exists. */
    if (t->free_count > 0)
        timer.id = t->free_ids[--t->free_count];
    else
        timer.id = (uint32_t)t->ids_used++;
    c->timer_id = timer.id;
    sift_up(t, t->count++, timer);
}

void coro__timers_remove(coro_timers *t, coro *c)
{
    remove_at(t, t->where[c->timer_id]);
}

uint64_t coro__timers_next(const coro_timers *t)
{
    return t->count > 0 ? t->heap[0].deadline : CORO_FOREVER;
}

size_t coro__timers_pop_due(coro_timers *t, uint64_t now, coro **due,
                            size_t max)
{
    size_t n = 0;

    while (n < max && t->count > 0 && t->heap[0].deadline <= now) {
        coro *c = t->heap[0].c;

        /* The caller reads c->waiting next: with many coroutines, a cache
         * miss. Start it now, so that it overlaps with the heap work for
         * the rest of the batch instead of stalling the caller on each
         * coroutine in turn. */
        __builtin_prefetch(&c->waiting);
        due[n++] = c;
        remove_at(t, 0);
    }
    return n;
}

void coro__timers_free(coro_timers *t)
{
    free(t->heap);
    free(t->where);
    free(t->free_ids);
    *t = (coro_timers){0};
}
