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
 * parents; popping moves the last timer to the top and lets it sink. Both
 * are O(log4 n): a million timers are ten levels deep.
 *
 * Why four children instead of two: half as many levels, and a timer is 16
 * bytes, so four brothers fill exactly one 64-byte cache line (the array
 * is placed so that heap[1] starts a line: see heap_memory below). Going
 * down one level costs one cache miss, as in a binary heap, but there are
 * half as many levels. The keys live in the heap array itself, so
 * comparing never follows a pointer to a coroutine.
 *
 * `seq` makes the order total: two timers with the same deadline fire in
 * the order they were set (first in, first out), as libuv's timers do. It
 * is 32 bits, to keep a timer at 16 bytes; when it runs out (after four
 * billion timers) renumber() gives the pending timers new numbers in the
 * same order.
 *
 * Cancelling a timer (a parked coroutine woken before its deadline) does
 * not take it out of the heap: that would need to know where the sifts
 * have moved it, and keeping that up to date costs a write at every move.
 * Instead each timer has a small number, its id, and `owner[id]` is its
 * coroutine. The coroutine keeps the id; cancelling sets owner[id] to
 * NULL, and the dead timer stays in the heap until it comes to the top,
 * where it is dropped without firing:
 *
 *     heap:   [0] d=5 id=2   [1] d=9 id=0   [2] d=7 id=1
 *     owner:  [0] c7         [1] NULL       [2] c3    (id 1 was cancelled)
 *
 * A dead timer never reads its coroutine (which may be freed by now): only
 * owner[id], which belongs to the timer until it leaves the heap. Its id
 * is freed then, so an id is never shared by two timers.
 *
 * How many dead timers can pile up: the arrays have room for at least two
 * timers per coroutine (coro__timers_reserve()). Pending timers are at
 * most one per coroutine, so when the heap is full at least half of it is
 * dead: purge() then drops every dead timer, in one pass over the heap.
 * So the heap never holds more than that room (twice the most coroutines
 * alive at once, rounded up to a power of two), and each purge is paid
 * for by the cancels that filled it: O(1) per cancel. When no timer is
 * pending, every timer left is dead, and the heap is simply emptied.
 *
 * Waiting for memory. With a million timers the heap is 16 MB: each level
 * near the bottom is a cache miss, and so is every coroutine the pump then
 * touches. Prefetches (hints that never change a result) let those waits
 * overlap instead of queueing one behind the other: see sift_down() and
 * coro__timers_pop_due().
 */
#include "coro_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum { ARITY = 4 };

/* The size of a cache line on the machines we run on (x86-64, arm64). */
enum { CACHE_LINE = 64 };

/* The sequence number after the last one a timer may take: past it,
 * renumber(). (A test build lowers it, to reach renumber() quickly.) */
#ifndef CORO_TIMER_SEQ_END
#define CORO_TIMER_SEQ_END UINT32_MAX
#endif

/* Whether timer a fires before timer b. */
static bool earlier(const coro_timer *a, const coro_timer *b)
{
    if (a->deadline != b->deadline)
        return a->deadline < b->deadline;
    return a->seq < b->seq;
}

/* Move `timer`, destined for `slot`, up past every later parent. */
static void sift_up(coro_timers *t, size_t slot, coro_timer timer)
{
    while (slot > 0) {
        size_t parent = (slot - 1) / ARITY;

        if (!earlier(&timer, &t->heap[parent]))
            break;
        t->heap[slot] = t->heap[parent];
        slot = parent;
    }
    t->heap[slot] = timer;
}

/* Move `timer`, destined for `slot`, down past every earlier child. */
static void sift_down(coro_timers *t, size_t slot, coro_timer timer)
{
    for (;;) {
        size_t first = slot * ARITY + 1;
        size_t best = first;

        if (first >= t->size)
            break;
        /* While we compare the four children, let memory bring in the
         * next level: the 16 grandchildren, four cache lines side by
         * side, among which are the winner's four children. (The loop
         * stays here: GCC deletes a call to a helper whose only work is
         * prefetching.) */
        if (first * ARITY + 1 + ARITY * ARITY <= t->size) {
            const char *block = (const char *)&t->heap[first * ARITY + 1];
            size_t size = ARITY * ARITY * sizeof(coro_timer);

            for (size_t at = 0; at < size; at += CACHE_LINE)
                __builtin_prefetch(block + at);
        }
        for (size_t i = first + 1; i < first + ARITY && i < t->size; i++)
            if (earlier(&t->heap[i], &t->heap[best]))
                best = i;
        if (!earlier(&t->heap[best], &timer))
            break;
        t->heap[slot] = t->heap[best];
        slot = best;
    }
    t->heap[slot] = timer;
}

/* Take the earliest timer off the heap: the last one takes its place at
 * the top and sinks. (The timer's id is the caller's to free.) */
static void remove_top(coro_timers *t)
{
    coro_timer last = t->heap[--t->size];

    if (t->size > 0)
        sift_down(t, 0, last);
}

/* Id `id` no longer names a timer in the heap: it may be reused. */
static void free_id(coro_timers *t, uint32_t id)
{
    t->free_ids[t->free_count++] = id;
}

/* Drop every dead timer from the heap, then put the rest back in heap
 * order (Floyd's way: sink each parent, from the last one up to the top,
 * O(n) in all). */
static void purge(coro_timers *t)
{
    size_t kept = 0;

    for (size_t i = 0; i < t->size; i++) {
        if (t->owner[t->heap[i].id] != NULL)
            t->heap[kept++] = t->heap[i];
        else
            free_id(t, t->heap[i].id);
    }
    t->size = kept;
    /* The last timer with a child is the parent of the last timer. */
    if (kept > 1)
        for (size_t i = (kept - 2) / ARITY + 1; i-- > 0;)
            sift_down(t, i, t->heap[i]);
}

/* The sequence numbers ran out: number the pending timers again, 0, 1, 2
 * ..., in the order they fire, so that the order of every pair stays as
 * it was. Sorting by that order is a heap sort: take the earliest off the
 * top again and again, each into the place at the end that the shrinking
 * heap just gave up (latest ends up first), then reverse. A sorted array
 * is a heap, so nothing else has to move. O(n log n), once every four
 * billion timers. */
static void renumber(coro_timers *t)
{
    size_t n;

    purge(t);
    n = t->size;
    while (t->size > 1) {
        coro_timer top = t->heap[0];

        remove_top(t);
        t->heap[t->size] = top;
    }
    t->size = n;
    for (size_t i = 0; i < n / 2; i++) {
        coro_timer swap = t->heap[i];

        t->heap[i] = t->heap[n - 1 - i];
        t->heap[n - 1 - i] = swap;
    }
    for (size_t i = 0; i < n; i++)
        t->heap[i].seq = (uint32_t)i;
    t->next_seq = (uint32_t)n;
}

int coro__timers_reserve(coro_timers *t, size_t n)
{
    size_t capacity = t->capacity ? t->capacity : 64;
    coro **owner;
    uint32_t *free_ids;
    void *memory;
    size_t bytes;

    /* Room for two timers per coroutine: see "How many dead timers" at
     * the top. */
    if (n > SIZE_MAX / 2)
        return ENOMEM;
    n *= 2;
    if (n <= t->capacity)
        return 0;
    while (capacity < n)
        capacity *= 2;
    if (capacity > UINT32_MAX)
        return ENOMEM; /* ids are 32 bits */
    /* A failure part way leaves some arrays larger than `capacity`, which
     * is harmless: the next call grows the others. */
    owner = realloc(t->owner, capacity * sizeof *owner);
    if (owner == NULL)
        return ENOMEM;
    t->owner = owner;
    free_ids = realloc(t->free_ids, capacity * sizeof *free_ids);
    if (free_ids == NULL)
        return ENOMEM;
    t->free_ids = free_ids;
    /* The heap starts one timer short of a cache line's start, so that
     * heap[1] starts a line, and with it every group of four brothers
     * (4i+1 .. 4i+4). aligned_alloc() wants a multiple of the line. */
    bytes = (capacity + CACHE_LINE / sizeof(coro_timer)) * sizeof(coro_timer);
    memory = aligned_alloc(CACHE_LINE, bytes);
    if (memory == NULL)
        return ENOMEM;
    if (t->size > 0)
        memcpy((char *)memory + CACHE_LINE - sizeof(coro_timer), t->heap,
               t->size * sizeof(coro_timer));
    free(t->heap_memory);
    t->heap_memory = memory;
    t->heap = (coro_timer *)((char *)memory + CACHE_LINE - sizeof(coro_timer));
    t->capacity = capacity;
    return 0;
}

void coro__timers_add(coro_timers *t, coro *c, uint64_t deadline)
{
    coro_timer timer;

    if (t->size == t->capacity)
        purge(t); /* at least half of it is dead: see the top */
    if (t->size == t->capacity)
        abort(); /* broken invariant: room is reserved per coroutine */
    if (t->next_seq == CORO_TIMER_SEQ_END)
        renumber(t);
    timer.deadline = deadline;
    timer.seq = t->next_seq++;
    /* A free id if there is one, else one never used: size < capacity,
     * so one of the two exists. */
    if (t->free_count > 0)
        timer.id = t->free_ids[--t->free_count];
    else
        timer.id = (uint32_t)t->ids_used++;
    t->owner[timer.id] = c;
    c->timer_id = timer.id;
    t->count++;
    sift_up(t, t->size++, timer);
}

void coro__timers_remove(coro_timers *t, coro *c)
{
    /* Dead, not removed: it leaves the heap when it reaches the top. */
    t->owner[c->timer_id] = NULL;
    t->count--;
}

uint64_t coro__timers_next(coro_timers *t)
{
    if (t->count == 0) {
        /* Every timer left is dead: forget them all, ids included. */
        t->size = 0;
        t->free_count = 0;
        t->ids_used = 0;
        return CORO_FOREVER;
    }
    /* Drop the dead timers at the top: the earliest one is pending. */
    while (t->owner[t->heap[0].id] == NULL) {
        free_id(t, t->heap[0].id);
        remove_top(t);
    }
    return t->heap[0].deadline;
}

size_t coro__timers_pop_due(coro_timers *t, uint64_t now, coro **due,
                            size_t max)
{
    size_t n = 0;

    while (n < max && t->size > 0 && t->heap[0].deadline <= now) {
        uint32_t id = t->heap[0].id;
        coro *c;

        /* owner[id] is a cache miss with many timers: ask for it now, and
         * read it after the sift below, which takes longer. */
        __builtin_prefetch(&t->owner[id]);
        remove_top(t);
        c = t->owner[id];
        free_id(t, id);
        if (c == NULL)
            continue; /* cancelled: dropped, nothing fires */
        t->count--;
        due[n++] = c; /* (the caller asks for c's memory: see wait.c) */
    }
    if (t->size == 0) {
        /* Nothing left, dead or alive: ids start again from 0, so the
         * next timers use the start of `owner`, side by side. */
        t->free_count = 0;
        t->ids_used = 0;
    }
    return n;
}

void coro__timers_free(coro_timers *t)
{
    free(t->heap_memory);
    free(t->owner);
    free(t->free_ids);
    *t = (coro_timers){0};
}
