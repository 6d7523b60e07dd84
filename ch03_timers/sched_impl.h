/*
 * sched_impl.h — the scheduler's own header: struct coro_sched, and the
 * calls its files make to each other. Not for users, and not for the
 * rest of the library either (coro_impl.h is what every file shares).
 *
 * The scheduler is one concept in a few files, one part each, the way
 * xv6 pairs proc.h with proc.c:
 *
 *   sched.c   creating work, the pump (run / step), the scheduler itself
 *   ready.c   the ready queue: one FIFO per priority, and its invariant
 *   cache.c   stacks: finished coroutines ("shells") kept for reuse, the
 *             stack size, dense stacks
 *   trace.c   the trace: what the pump ran, recorded (trace_impl.h)
 *   wait.c    waiting: out of the ready queue until a timer fires or
 *             something makes the coroutine ready again
 *
 * A scheduler belongs to the thread that created it (`owner`), and every
 * function declared here runs on that thread.
 */
#ifndef CORO_SCHED_IMPL_H
#define CORO_SCHED_IMPL_H

#include "coro_impl.h"
#include "trace_impl.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One priority's FIFO of ready entries, on a cache line of its own: the
 * pump writes it at every push and pop. In a build whose queue used a
 * level that malloc() had put across two lines (and two pages), a
 * scheduled yield cost 11 to 13 ns instead of 7 to 10 (//bench:sched,
 * Chapter 3, an AMD EPYC), in every run; on a line of its own, not.
 * Where malloc() puts it must not decide what a yield costs.
 * (ready.c carves levels from blocks: 64 bytes each, 48 before.) */
struct ready_level {
    _Alignas(64) int priority;
    coro_ready *head, *tail;
    struct ready_level *lower; /* the next level: a strictly lower priority */
};

/* A queued function. */
struct post {
    coro_ready ready; /* ready.coroutine == NULL */
    coro_post_fn fn;
    void *arg;
    struct post *next_free;
    uint64_t trace_number; /* its number in the trace; 0: not recorded */
};

/* The finished dense stacks, by number (dense_number): bit n of `free` is
 * set while dense stack n is cached, and shell[n] is then its coroutine;
 * bit w of `nonzero` is set while word w of `free` is not zero. A zeroed
 * struct is an empty cache. */
struct dense_cache {
    coro **shell;      /* by number */
    uint64_t *free;    /* a bit per number */
    uint64_t *nonzero; /* a bit per word of `free` */
    size_t numbers;    /* room for [0, numbers): a multiple of 64 x 64 */
    size_t lowest;     /* no word of `nonzero` below this one is set */
};

struct coro_sched {
    const void *owner;          /* the owning thread (coro__thread_id()) */
    bool pumping;               /* run or step is on the stack */
    coro *pump_caller;          /* coro_self() where the pump was entered */

    /* The ready queue (see the invariant at the top of ready.c). */
    struct ready_level *levels; /* levels with entries, highest first */
    struct ready_level *spare_levels;
    size_t levels_owned;        /* in use + spare */
    struct level_block *level_blocks; /* the memory of all of them */
    size_t ready_count;         /* entries in the ready queue, and the one
                                 * the pump has taken and runs (ready.c,
                                 * coro__ready_take()) */
    coro_timers timers;         /* waiting coroutines with a deadline */

    size_t alive;               /* coroutines created, not yet finished */
    size_t handles;             /* joinable coroutines not yet destroyed */
    size_t posts_pending;       /* accepted posts not yet run */
    size_t max_posts;           /* SIZE_MAX: unlimited */
    size_t posts_rejected;      /* coro_post() calls refused with EAGAIN */
    struct post *spare_posts;
    size_t spare_count;         /* entries in spare_posts */

    /* Stacks: finished coroutines (struct and stack) kept for reuse,
     * guarded ones on a list, newest first, and dense ones by number
     * (cache.c says why). */
    size_t stack_size;
    coro *cache;
    size_t cached;              /* on the list */
    struct dense_cache dense_cache;
    coro_dense *dense;          /* non-NULL: dense stacks are on */

    struct sched_trace trace;   /* its buffer and lane (trace.c) */
};

/* ── The ready queue (ready.c) ────────────────────────────────────────── */

/* Make sure the scheduler owns `needed` level objects (the invariant).
 * Returns 0 or ENOMEM. */
int coro__levels_reserve(coro_sched *s, size_t needed);

/* Free every level object (at coro_sched_destroy(), the queue empty). */
void coro__levels_free(coro_sched *s);

/* The level objects all posts need together: every post is queued at
 * priority 0, so they share one level, however many are pending. */
enum { LEVELS_FOR_POSTS = 1 };

/* Queue an entry behind every entry of the same or higher priority. Never
 * fails: the caller reserved its level. */
void coro__ready_push(coro_sched *s, coro_ready *entry, int priority);

/* Take the front entry, or NULL if nothing is ready. */
coro_ready *coro__ready_pop(coro_sched *s);

/* The pump's pop and push (sched.c): take the front entry, or NULL, and
 * leave it in ready_count while it runs; queue a coroutine that yielded
 * back at its priority, not counted again (c->queued: in the queue). The
 * pump lowers ready_count itself for an entry that does not come back. */
coro_ready *coro__ready_take(coro_sched *s);
void coro__ready_put_back(coro_sched *s, coro *c);

/* Queue the coroutine `c` at its priority (c->queued: in the queue). */
void coro__queue_coroutine(coro_sched *s, coro *c);

/* ── Stacks (cache.c) ─────────────────────────────────────────────────── */

/* Free a cached coroutine for good. */
void coro__shell_free(coro *c);

/* A new coroutine with a stack of its own, dense or guarded; NULL if out
 * of memory. */
coro *coro__shell_new(coro_sched *s);

/* A coroutine with a stack: from the cache (*reused = true), or new; NULL
 * if out of memory. */
coro *coro__shell_get(coro_sched *s, bool *reused);

/* A finished coroutine goes back to the cache (or, past its limit, away). */
void coro__shell_put(coro_sched *s, coro *c);

/* Release every cached stack (its size changed, or destroy). */
void coro__cache_flush(coro_sched *s);

/* ── Waiting (wait.c) ─────────────────────────────────────────────────── */

/* The slow path of coro__fire_due_timers() below, for a scheduler with
 * timers set: read the clock, and move every coroutine whose deadline has
 * come to the ready queue, in deadline order. A sleep ends normally; a
 * park or event wait times out. */
void coro__read_clock_and_fire_timers(coro_sched *s);

/* The pump's look at the timers, at the start of every turn. Inline, because
 * most often no timer is set at all: then the look costs no call and no
 * clock read. */
static inline void coro__fire_due_timers(coro_sched *s)
{
    if (s->timers.count > 0)
        coro__read_clock_and_fire_timers(s);
}

/* ── The pump (sched.c), in steps ─────────────────────────────────────── */

/* Whether this thread may drive `s` now: it owns it and is not already
 * inside its pump. */
bool coro__may_pump(const coro_sched *s);

/* Enter / leave the pump of `s`; enter returns the scheduler that was
 * pumping on this thread before, for leave to restore. */
coro_sched *coro__pump_enter(coro_sched *s);
void coro__pump_leave(coro_sched *s, coro_sched *outer);

/* Run until nothing is alive and no post is pending (0), or, with
 * `until_deadline`, until `deadline` (ETIMEDOUT); the thread sleeps while
 * nothing is ready, and without a deadline EDEADLK means nothing is ready
 * and no timer is left to wake anyone. The caller holds the pump. */
int coro__pump_until(coro_sched *s, uint64_t deadline, bool until_deadline);

#endif /* CORO_SCHED_IMPL_H */
