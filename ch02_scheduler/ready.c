/*
 * ready.c — the ready queue: what the pump runs next.
 *
 *   ready queue, highest priority first:
 *     prio 5: [c7]
 *     prio 0: [c1] -> [post] -> [c4] -> ...
 *     prio -1: [c2]
 *
 * The queue is a list of levels, one per priority that has entries, sorted
 * highest first; each level is a FIFO of entries. Pushing walks the levels
 * (O(number of distinct priorities queued), O(1) in the usual case of one
 * priority); popping takes the front of the first level (O(1)).
 *
 * Invariant (no allocation on the pump's path): a push may need a new level
 * object, and requeueing a coroutine that yielded must never fail. So the
 * scheduler owns at least as many level objects as levels that can be in
 * use at once: one per alive coroutine (each is queued at most once), and
 * one for all the posts (LEVELS_FOR_POSTS: they are all queued at priority
 * 0). coro_go() and coro_spawn() reserve them before they accept a
 * coroutine, coro_post() before it accepts a post. (Counting one level per
 * pending post instead, as this file once did, made a burst of a million
 * posts allocate a million levels, and made the pump read the count of
 * pending posts, which other threads write, for every post it took in.)
 *
 * Owns: the levels (in use and spare) of struct coro_sched, and each
 * coroutine's priority (coro_set_priority()). Thread: the scheduler's
 * owner only, like everything of the queue.
 */
#include "sched_impl.h"

#include <errno.h>
#include <stdlib.h>

/*
 * Level objects come in blocks of at least a page: one aligned_alloc() per
 * block, not per level, so a level's cache line of its own (struct
 * ready_level says why) costs the line and nothing more. A block's first
 * line links it to the next; the blocks are freed when the scheduler is.
 */
struct level_block {
    struct level_block *next;
    struct ready_level levels[]; /* from the block's second line on */
};

enum { LEVELS_PER_BLOCK = 4096 / sizeof(struct ready_level) - 1 };

int coro__levels_reserve(coro_sched *s, size_t needed)
{
    struct level_block *block;
    size_t count;

    if (s->levels_owned >= needed)
        return 0;
    count = needed - s->levels_owned;
    if (count < LEVELS_PER_BLOCK)
        count = LEVELS_PER_BLOCK;
    if (count > (SIZE_MAX - sizeof *block) / sizeof block->levels[0])
        return ENOMEM; /* the block's size would not fit in a size_t */
    block = aligned_alloc(_Alignof(struct ready_level),
                          sizeof *block + count * sizeof block->levels[0]);
    if (block == NULL)
        return ENOMEM;
    block->next = s->level_blocks;
    s->level_blocks = block;
    for (size_t i = 0; i < count; i++) {
        block->levels[i].lower = s->spare_levels;
        s->spare_levels = &block->levels[i];
    }
    s->levels_owned += count;
    return 0;
}

void coro__levels_free(coro_sched *s)
{
    while (s->level_blocks != NULL) {
        struct level_block *block = s->level_blocks;

        s->level_blocks = block->next;
        free(block);
    }
    s->levels = NULL;
    s->spare_levels = NULL;
    s->levels_owned = 0;
}

void coro__ready_push(coro_sched *s, coro_ready *entry, int priority)
{
    struct ready_level **link = &s->levels;
    struct ready_level *level;

    while (*link != NULL && (*link)->priority > priority)
        link = &(*link)->lower;
    level = *link;
    if (level == NULL || level->priority != priority) {
        level = s->spare_levels; /* never NULL: see the invariant */
        if (level == NULL)
            abort();
        s->spare_levels = level->lower;
        level->priority = priority;
        level->head = level->tail = NULL;
        level->lower = *link;
        *link = level;
    }
    entry->next = NULL;
    if (level->tail != NULL)
        level->tail->next = entry;
    else
        level->head = entry;
    level->tail = entry;
}

coro_ready *coro__ready_pop(coro_sched *s)
{
    struct ready_level *level = s->levels;
    coro_ready *entry;

    if (level == NULL)
        return NULL;
    entry = level->head;
    level->head = entry->next;
    if (level->head == NULL) {
        s->levels = level->lower;
        level->lower = s->spare_levels;
        s->spare_levels = level;
    }
    return entry;
}

void coro__queue_coroutine(coro_sched *s, coro *c)
{
    c->queued = true;
    coro__ready_push(s, &c->ready, c->priority);
}

/* ── Priorities: the order of the queue ───────────────────────────────── */

int coro_set_priority(coro *c, int priority)
{
    if (c == NULL)
        return EINVAL;
    if (c->owner != coro__thread_id())
        return EPERM;
    if (c->state == CORO_DONE)
        return EINVAL;
    c->priority = priority;
    return 0;
}

int coro_priority(const coro *c)
{
    return c ? c->priority : 0;
}
