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
 *   remote.c  other threads' requests: starts, posts and wakes through
 *             the inbox, and the post nodes that travel back
 *   shutdown.c
 *             stopping: the members, cancel and close, abandon, and
 *             shutdown
 *   stats.c   statistics: timing the pump's resumes, and the tick clock
 *
 * A scheduler belongs to the thread that created it (`owner`), and every
 * function declared here runs on that thread unless it says "any thread".
 * The few fields other threads do read or write are atomics, marked
 * "shared" below.
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
    coro_ready ready;   /* ready.coroutine == NULL */
    coro_remote remote; /* its request, when posted from another thread */
    coro_post_fn fn;
    void *arg;
    bool from_other_thread; /* its node goes back to the producers */
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

    /* Counts. alive_local is written by the owner only (no atomic
     * read-modify-write on the pump's path); coroutines created on other
     * threads count in `arriving` until the pump takes them in. */
    _Atomic size_t alive_local; /* shared: started here, not finished */
    _Atomic size_t arriving;    /* shared: sent by other threads */
    size_t handles;             /* joinable coroutines not yet destroyed */
    _Atomic size_t posts_pending; /* shared: accepted posts not yet run */
    /* Shared: no new work (ESHUTDOWN). Here, not with the other stopping
     * fields: every coro_post() and coro_go() from another thread reads
     * it just after writing posts_pending or `arriving`, whose cache line
     * is then in its cache; beside the pump's statistics below, it lost
     * its line to the pump at every turn (posts from another thread, 72
     * to 59 ns each). */
    atomic_bool closed;
    size_t max_posts;           /* SIZE_MAX: unlimited (never changes) */
    _Atomic size_t posts_rejected; /* shared: refused with EAGAIN */
    struct post *spare_posts;
    size_t spare_count;         /* entries in spare_posts */

    /* Other threads' requests, and those the pump could not take in yet
     * for lack of memory (it retries; nothing accepted is dropped). */
    coro_inbox inbox;
    coro_remote *backlog;
    _Atomic(struct post *) returned; /* shared: other threads' posts, run:
                                        their nodes, for producers to reuse */

    /* Stopping (and `closed`, above). */
    atomic_bool close_sent;     /* shared: close_remote was pushed (once) */
    coro_remote close_remote;   /* another thread's (or a signal's) close */
    atomic_int close_signo;     /* shared: the signal that sent it, or 0;
                                   for the trace (coro__take_in_close()) */
    coro *members;              /* alive, or done and not destroyed */
    size_t owed;                /* requests still owed to finished ones */
    bool abandoning;            /* shutdown's grace is over */
    bool shut_down;             /* shutdown done: destroy frees handles */
    bool close_arrived;         /* close_remote came in during this poll
                                   (coro__take_in_close()) */
    size_t abandoned;           /* coroutines abandoned, ever */

    /* Statistics, in ticks of coro__ticks(); owner only. Resumes are
     * timed in windows: one clock reading, then up to window_size resumes,
     * then the next reading (or a post, or the pump going idle); see
     * stats.c. */
    uint64_t ticks_hint;        /* the pump's latest reading */
    bool hint_stale;            /* the pump slept since: read the clock */
    uint64_t window_start;      /* the reading that opened the window */
    int window_size;            /* resumes it may hold (0 before the first) */
    int window_left;            /* resumes it may still take; a resume that
                                   takes it below 0 finds it full (a closed
                                   window has 0 left) and opens the next.
                                   While a loop runs entries, the loop's
                                   local `room` holds it (run_one()). */
    bool window_open;           /* a window is being timed */
    coro *window_first;         /* the resume that opened it, while alive */
    uint64_t resumes;           /* in the windows closed so far */
    uint64_t longest_resume;
    uint64_t unmeasured;        /* resumes whose wait was not measured
                                   (CORO_READY_OUTSIDE_PUMP): counted,
                                   being rare, instead of the others */
    uint64_t latency_max;
    uint64_t latency_sum;

    /* Stacks: finished coroutines (struct and stack) kept for reuse,
     * guarded ones on a list, newest first, and dense ones by number
     * (cache.c says why). */
    _Atomic size_t stack_size;  /* shared: read by other threads' coro_go */
    coro *cache;
    size_t cached;              /* on the list */
    struct dense_cache dense_cache;
    /* Shared: non-NULL once dense stacks are on; other threads' coro_go
     * carves from it. Set once by the owner and never replaced or freed
     * before the scheduler is: coro_sched_set_stack_size() resizes it in
     * place. */
    _Atomic(coro_dense *) dense;

    struct sched_trace trace;   /* its buffer and lane (trace.c) */
};

/* ── Counts (remote.c) ────────────────────────────────────────────────── */

/* Any thread: coroutines alive, created (here or elsewhere) and not
 * finished. */
size_t coro__alive_count(const coro_sched *s);

/* Owner only: add `delta` (+1 or -1) to alive_local without an atomic
 * read-modify-write (nobody else writes it). */
void coro__alive_add(coro_sched *s, int delta);

/* Any thread: accepted posts not yet run. */
size_t coro__posts_pending(const coro_sched *s);

/* Whether anything is left to do: coroutines alive, posts pending, or a
 * request still owed to a finished coroutine (it must arrive before the
 * coroutine's memory is reused or freed). sched.c. */
bool coro__work_remains(const coro_sched *s);

/* Any thread: whether the calling thread owns `s`. */
bool coro__sched_on_owner_thread(const coro_sched *s);

/* Room for one more queued entry (and timer): the invariant. Returns 0 or
 * ENOMEM. */
int coro__reserve_one_more(coro_sched *s);

/* Any thread: fill in what a coroutine of `s` needs besides
 * coro__prepare(). */
void coro__init_scheduled(coro_sched *s, coro *c, bool detached);

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

/* Queue the coroutine `c` at its priority (c->queued: in the queue), and
 * stamp when it became ready (stats). */
void coro__queue_coroutine(coro_sched *s, coro *c);

/* ── Stacks (cache.c) ─────────────────────────────────────────────────── */

/* Free a cached coroutine for good. */
void coro__shell_free(coro *c);

/* Any thread: a new coroutine with a stack of its own, dense or guarded;
 * NULL if out of memory. */
coro *coro__shell_new(coro_sched *s);

/* A coroutine with a stack: from the cache (*reused = true), or new; NULL
 * if out of memory. */
coro *coro__shell_get(coro_sched *s, bool *reused);

/* A finished coroutine goes back to the cache (or, past its limit, away). */
void coro__shell_put(coro_sched *s, coro *c);

/* Release every cached stack (its size changed, or destroy). */
void coro__cache_flush(coro_sched *s);

/* The dense object (NULL: dense stacks are off), read on the owner's
 * thread. */
coro_dense *coro__owner_dense(const coro_sched *s);

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

/* ── Other threads' requests (remote.c) ───────────────────────────────── */

/* Another thread's coro_go/coro_spawn: build the coroutine here, with a
 * stack of its own (the cache is the owner's), and send it over. */
int coro__start_remote(coro_sched *s, coro_fn fn, void *arg, bool detached,
                       coro_cleanup *cleanup, coro **out);

/* Any thread: count one more pending post if the limit allows it (false:
 * refused, and counted in posts_rejected). */
bool coro__post_admit(coro_sched *s);

/* Any thread: one pending post fewer (run, or refused after admission). */
void coro__post_unadmit(coro_sched *s);

/* coro_post() on a thread other than the owner's: through the inbox.
 * Returns 0 or an errno value. */
int coro__post_remote(coro_sched *s, coro_post_fn fn, void *arg,
                      bool even_if_closed);

/* The pump, done with another thread's post: its node goes back. */
void coro__post_node_return(coro_sched *s, struct post *p);

/* The slow path of coro__drain_inbox() below, for requests waiting:
 * move every request from the inbox (after any backlog) into the ready
 * queue, oldest first. */
void coro__take_in_requests(coro_sched *s);

/* The pump's look at the inbox, at the start of every turn. Inline,
 * because most often nothing waits there: then the look is one load and
 * no call. */
static inline void coro__drain_inbox(coro_sched *s)
{
    if (s->backlog != NULL || !coro__inbox_empty(&s->inbox))
        coro__take_in_requests(s);
}

/* ── Stopping (shutdown.c) ────────────────────────────────────────────── */

/* Add `c` to / take it off the scheduler's list of members (alive, or
 * done and not destroyed). */
void coro__member_link(coro_sched *s, coro *c);
void coro__member_unlink(coro_sched *s, coro *c);

/* A finished coroutine leaves the scheduler if nobody holds it any more:
 * no handle (detached) and no request on its way to it (owed). */
void coro__retire_if_released(coro_sched *s, coro *c);

/* One more request will arrive for the finished coroutine `c`. */
void coro__owe(coro_sched *s, coro *c);

/* A request owed to `c` has arrived. */
void coro__owed_paid(coro_sched *s, coro *c);

/* Any thread: whether `s` is closed (no new work: ESHUTDOWN). */
bool coro__is_closed(const coro_sched *s);

/* `c` was cancelled; if it waits, end the wait with ECANCELED. */
void coro__end_wait_canceled(coro *c);

/* Cancel every alive coroutine. */
void coro__cancel_members(coro_sched *s);

/* The close request (another thread's or a signal's) arrives: cancel
 * every alive coroutine, and end the poll in progress (close_arrived). */
void coro__take_in_close(coro_sched *s);

/* At destroy: free the members left (after a shutdown, the joinable
 * coroutines whose handles were never destroyed). */
void coro__members_free(coro_sched *s);

/* Abandon `c`, alive and suspended: it will never be resumed. */
void coro__abandon_one(coro_sched *s, coro *c);

/* ── Statistics (stats.c) ─────────────────────────────────────────────── */

/* Sentinel for ready_at: it became ready while no pump was running, so no
 * pump was late for it; its wait is not measured. */
#define CORO_READY_OUTSIDE_PUMP 0

/* The slow paths of the two inline functions below: the first two read
 * the clock; the third measures a wait. */
void coro__timing_refresh(coro_sched *s);
int coro__timing_new_window(coro_sched *s, coro *c);
void coro__timing_waited(coro_sched *s, coro *c);

/*
 * The pump's timing steps when something becomes ready and at every
 * resume. They are here, inline, because they run on the pump's hottest
 * path, so that their common case costs no call. stats.c explains the
 * windows.
 */

/* A reading of the stats clock for "became ready now": inside the pump,
 * the window's reading (no clock read on the pump's path), unless the
 * pump slept since (then the first stamp reads the clock). */
static inline uint64_t coro__ready_stamp(coro_sched *s)
{
    if (!s->pumping)
        return CORO_READY_OUTSIDE_PUMP;
    if (s->hint_stale)
        coro__timing_refresh(s);
    return s->ticks_hint;
}

/*
 * A resume of `c` starts: inside the window open (while it has room) it
 * starts at the window's reading, else it opens a new window. One counter
 * answers "is there room?": `room`, the resumes the window may still
 * take, kept in a local of the loop that resumes (run_one() in sched.c
 * says why); the resume that takes it below 0 finds the window full, or
 * closed (a closed window has 0 left), and the new window's room replaces
 * it.
 *
 * Then: how long `c` waited. Stamped with the pump's latest reading, it
 * waited 0 (as near as the pump can tell). Else coro__timing_waited()
 * measures the wait and stamps `c` with that reading.
 *
 * So a coroutine that yields needs no stamp of its own: it still carries
 * the reading its resume started at, and the reading does not change
 * during a resume (only the pump, between resumes, reads the clock). That
 * keeps the pump's hottest path, a yield and its requeue, free of stores
 * for the statistics. One case needs care: a window that
 * held this resume alone (resumes of WINDOW_NS or more get a window each)
 * ends right after it, so the coroutine became ready when the window
 * ended, not when it began; the window's end restamps it (window_close()
 * in stats.c), or every long resume would count its own length as its
 * next wait. In a window of several resumes, every wait is off by less
 * than the window's length, the last one's as the others'.
 */
static inline void coro__timing_open(coro_sched *s, coro *c, int *room)
{
    if (--*room < 0)
        *room = coro__timing_new_window(s, c);
    if (c->ready_at != s->ticks_hint)
        coro__timing_waited(s, c);
}

/* The pump turns to something else than a resume (a post, or sleep). */
void coro__timing_pause(coro_sched *s);

/* The pump is about to sleep (on its futex or in the wait hook): the
 * timing pauses, and the next stamp reads the clock. */
void coro__timing_sleep(coro_sched *s);

/* ── The pump (sched.c), in steps ─────────────────────────────────────── */

/* Whether this thread may drive `s` now: it owns it and is not already
 * inside its pump. */
bool coro__may_pump(const coro_sched *s);

/* Enter / leave the pump of `s`; enter returns the scheduler that was
 * pumping on this thread before, for leave to restore. */
coro_sched *coro__pump_enter(coro_sched *s);
void coro__pump_leave(coro_sched *s, coro_sched *outer);

/* Run the front entry, if any; false if nothing was ready. The caller
 * holds the pump (s->pumping). For loops outside sched.c (shutdown.c):
 * the pump's own loops call an inlined copy (run_one() says why). */
bool coro__run_one(coro_sched *s);

/* Run while coro__work_remains() (then 0), or, with `until_deadline`,
 * until `deadline` (ETIMEDOUT); the thread sleeps while nothing is ready.
 * The caller holds the pump. */
int coro__pump_until(coro_sched *s, uint64_t deadline, bool until_deadline);

#endif /* CORO_SCHED_IMPL_H */
