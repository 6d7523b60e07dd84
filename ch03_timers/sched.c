/*
 * sched.c — the scheduler: creating work, and the pump that runs it.
 *
 *   coro_go / coro_spawn / coro_post           coro_sched_run / _step
 *              │                                        │
 *              v                                        v
 *   ready queue, highest priority first:      pop the front entry:
 *     prio 5: [c7]                              - coroutine: resume it;
 *     prio 0: [c1] -> [post] -> [c4] -> ...       yielded -> push it back,
 *     prio -1: [c2]                               done -> free or keep
 *                                               - post: call it
 *
 * The queue itself (and the priorities that order it) is in ready.c, the
 * stacks in cache.c, the trace in trace.c, waiting in wait.c; struct
 * coro_sched, which they all share, is in sched_impl.h.
 *
 * Owns: the counts (alive, handles, posts) and the spare post entries of
 * struct coro_sched, and the scheduler's life from create to destroy.
 * Thread: the scheduler's owner only; every entry point checks it.
 */
#define _GNU_SOURCE
#include "sched_impl.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* Run posts kept for reuse, at most. */
enum { SPARE_POSTS_MAX = 1024 };

/* The scheduler whose pump is running on this thread (innermost). */
static _Thread_local coro_sched *pumping_now;

/* ── Creating work ────────────────────────────────────────────────────── */

/* Checks shared by coro_go, coro_spawn and coro_post. */
static int check_caller(const coro_sched *s, const void *fn)
{
    if (s == NULL || fn == NULL)
        return EINVAL;
    if (s->owner != coro__thread_id())
        return EPERM;
    return 0;
}

/* Create a coroutine of `s` and queue it. Returns 0 or an errno value. */
static int sched_start(coro_sched *s, coro_fn fn, void *arg, bool detached,
                       coro **out)
{
    int err = check_caller(s, (const void *)fn);
    bool reused;
    coro *c;

    if (err != 0)
        return err;
    /* The new coroutine's level, and the posts' (see ready.c). */
    if (coro__levels_reserve(s, s->alive + 1 + LEVELS_FOR_POSTS) != 0 ||
        coro__timers_reserve(&s->timers, s->alive + 1) != 0)
        return ENOMEM;
    c = coro__shell_get(s, &reused);
    if (c == NULL)
        return ENOMEM;
    coro__prepare(c, fn, arg, reused);
    c->sched = s;
    c->priority = 0;
    c->detached = detached;
    c->ready.coroutine = c;
    c->waiting = CORO_WAIT_NONE;
    c->permit = false;
    c->event = NULL;
    s->alive++;
    if (!detached)
        s->handles++;
    coro__overflow_prepare_thread();
    coro__queue_coroutine(s, c);
    if (coro__tracing())
        coro__trace_created(s, c, detached);
    *out = c;
    return 0;
}

int coro_go(coro_sched *s, coro_fn fn, void *arg)
{
    coro *c;

    return sched_start(s, fn, arg, true, &c);
}

coro *coro_spawn(coro_sched *s, coro_fn fn, void *arg)
{
    coro *c = NULL;
    int err = sched_start(s, fn, arg, false, &c);

    if (err != 0) {
        errno = err;
        return NULL;
    }
    return c;
}

int coro_post(coro_sched *s, coro_post_fn fn, void *arg)
{
    int err = check_caller(s, (const void *)fn);
    struct post *p;

    if (err != 0)
        return err;
    if (s->posts_pending >= s->max_posts) {
        s->posts_rejected++;
        return EAGAIN;
    }
    if (coro__levels_reserve(s, s->alive + LEVELS_FOR_POSTS) != 0)
        return ENOMEM;
    p = s->spare_posts;
    if (p != NULL) {
        s->spare_posts = p->next_free;
        s->spare_count--;
    } else if ((p = malloc(sizeof *p)) == NULL) {
        return ENOMEM;
    }
    p->ready.coroutine = NULL;
    p->fn = fn;
    p->arg = arg;
    p->trace_number = coro__tracing() ? coro__trace_posted(s) : 0;
    s->posts_pending++;
    coro__ready_push(s, &p->ready, 0);
    return 0;
}

/* ── The pump ─────────────────────────────────────────────────────────── */

/* Block the thread until `deadline` (CLOCK_MONOTONIC): no CPU meanwhile. */
static void sleep_until(uint64_t deadline)
{
    struct timespec ts = {
        .tv_sec = (time_t)(deadline / CORO_SEC),
        .tv_nsec = (long)(deadline % CORO_SEC),
    };

    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        continue;
}

/* Resume one coroutine; afterwards, requeue it, leave it waiting, or
 * retire it. Its entry is still in ready_count (coro__ready_take()): a
 * coroutine that yielded goes back as it is, one that waits or ended
 * leaves the count.
 *
 * How it left comes back from the resume itself (coro_left in
 * coro_impl.h): one test of a register, where asking the coroutine was two
 * loads and two tests (its state, then its `waiting`). The yield, the
 * pump's most common case, is the first branch and is marked as expected,
 * so that the compiler lays it out straight on: otherwise it jumped away
 * to the requeue and back (a scheduled yield, paired rounds on an Intel
 * Xeon: about 3 percent for each of the two changes).
 *
 * A dense stack's canary (stack.c) is checked here, each time its
 * coroutine comes back, and not by the coroutine as it leaves: a call in
 * return_to_resumer() made the compiler give every switch out a stack
 * frame of its own, dense stack or not (seven instructions more per
 * yield), where the pump's frame is there already. Every switch out of a
 * scheduler's coroutine comes back here: nothing else resumes one.
 *
 * `traced`: record the resume (trace.c); a constant in the pump's loops,
 * so that the pump has two: its own, with no trace in it, and
 * run_turn_traced()'s. */
static inline __attribute__((always_inline)) void
run_coroutine(coro_sched *s, coro *c, bool traced)
{
    uint64_t began = traced ? coro__trace_clock() : 0;
    coro_left left;

    c->queued = false;
    left = coro__resume(c);
    if (c->map == NULL && !coro__stack_canary_intact(c))
        coro__overflow_abort(c); /* its dense stack ran over its end */
    if (__builtin_expect(left == CORO_LEFT_YIELDED, 1)) {
        if (traced)
            coro__trace_resume(s, c, began, CORO_TRACE_YIELDED);
        coro__ready_put_back(s, c); /* behind the others */
        return;
    }
    if (traced)
        coro__trace_resume(s, c, began, left == CORO_LEFT_TO_WAIT
                                            ? CORO_TRACE_PARKED
                                            : CORO_TRACE_FINISHED);
    s->ready_count--;
    if (left == CORO_LEFT_TO_WAIT)
        return; /* what wakes it queues it */
    s->alive--;
    if (c->detached)
        coro__shell_put(s, c);
    /* A joinable one waits for coro_destroy(). */
}

/* Run one post. Its entry is recycled before the call, so the post may
 * post again even under a limit of one. */
static void run_post(coro_sched *s, struct post *p)
{
    coro_post_fn fn = p->fn;
    void *arg = p->arg;
    uint64_t number = p->trace_number, began = 0;

    if (s->spare_count < SPARE_POSTS_MAX) {
        p->next_free = s->spare_posts;
        s->spare_posts = p;
        s->spare_count++;
    } else {
        free(p);
    }
    s->posts_pending--;
    if (number != 0)
        began = coro__trace_clock();
    fn(s, arg);
    if (number != 0)
        coro__trace_post_ran(s, number, began);
}

/*
 * Run the front entry, if any; false if nothing was ready. The caller
 * holds the pump (s->pumping).
 *
 * Always inlined, and so is run_coroutine(): the call to coro__resume()
 * must sit in the body of the pump's loop, not in a function the loop
 * calls. coro__resume() does not come back through a `ret`: the
 * coroutine's switch back jumps to the instruction after the call
 * (switch_to() in coro.c says why). The CPU predicts each `ret` from its
 * return-stack buffer, which meanwhile saw the coroutine's own call of
 * coro_yield(); so the next `ret` on the pump's stack is predicted to go
 * back into the coroutine, and is wrong. Were that `ret` a helper's, every
 * resume would pay for it (a scheduled yield, //bench:sched on an AMD
 * EPYC: 12.4 ns per switch, against 8.2 to 9.0 with the call in the
 * loop). In the loop, the next `ret` is the pump's own, once per run.
 *
 * `traced`: record what runs (run_coroutine() says how).
 */
static inline __attribute__((always_inline)) bool run_one(coro_sched *s,
                                                          bool traced)
{
    coro_ready *entry = coro__ready_take(s);

    if (entry == NULL)
        return false;
    if (entry->coroutine != NULL) {
        run_coroutine(s, entry->coroutine, traced);
    } else {
        s->ready_count--; /* a post leaves the queue for good */
        run_post(s, (struct post *)entry);
    }
    return true;
}

bool coro__may_pump(const coro_sched *s)
{
    return s->owner == coro__thread_id() && !s->pumping;
}

coro_sched *coro__pump_enter(coro_sched *s)
{
    coro_sched *outer = pumping_now;

    s->pumping = true;
    s->pump_caller = coro_self();
    pumping_now = s;
    return outer;
}

void coro__pump_leave(coro_sched *s, coro_sched *outer)
{
    s->pumping = false;
    pumping_now = outer;
}

/*
 * A turn runs the entries that were ready when it began, and at least
 * TURN_MIN_ENTRIES: a coroutine that yields while fewer are ready runs
 * again within the same turn. Without the minimum, a turn of one entry
 * would be a look per resume: with one coroutine yielding and one timer
 * set, the clock read at every turn's start cost more than the yield
 * itself. Sixteen resumes share one look instead, and a timer is late by
 * at most sixteen short resumes more. (Go's and Tokio's schedulers make
 * the same trade: they look at their other sources every 61 tasks.)
 */
enum { TURN_MIN_ENTRIES = 16 };

static size_t turn_length(const coro_sched *s)
{
    return s->ready_count > TURN_MIN_ENTRIES ? s->ready_count
                                             : TURN_MIN_ENTRIES;
}

/* Run one turn's entries: turn_length() of them, fewer if the queue
 * empties first. Returns how many ran. Always inlined, as run_one() is
 * (it says why): the loop that resumes is this one. */
static inline __attribute__((always_inline)) size_t
run_turn(coro_sched *s, bool traced)
{
    size_t length = turn_length(s);
    size_t ran = 0;

    while (ran < length && run_one(s, traced))
        ran++;
    return ran;
}

/* A turn while a trace records: a loop of its own, out of line and marked
 * cold, so that the pump's usual loop has no test of the trace in it at
 * all; the pump chooses between the two once per turn. A trace that
 * starts while the pump runs so shows from the pump's next turn. */
static __attribute__((noinline, cold)) size_t run_turn_traced(coro_sched *s)
{
    return run_turn(s, true);
}

/*
 * The loop behind coro_sched_run() and coro_sched_run_until(): run until
 * nothing is alive and no post is pending, sleeping the thread while
 * nothing is ready. Every alive coroutine is queued or waiting, so when the
 * queue is empty either a timer will fire, or nothing can ever wake them:
 * that is EDEADLK for run, and a wait for the deadline for run_until.
 *
 * The pump works in turns: a turn runs the entries that were ready when
 * it began, and the pump reads the clock once per turn, at its start: due
 * timers fire then, and run_until's deadline is checked then. (Read before
 * every resume, the clock cost a loop with timers set one read per
 * resume, about 40 ns on the course's benchmark machine.) A timer that
 * comes due during a turn fires when the turn ends, so it is never early,
 * and late by at most a turn: the entries that were ready before it, or
 * TURN_MIN_ENTRIES resumes if fewer were (turn_length() says why).
 */
int coro__pump_until(coro_sched *s, uint64_t deadline, bool until_deadline)
{
    while (s->alive > 0 || s->posts_pending > 0) {
        uint64_t wake_at;

        /* A turn: one look at the clock, then the entries. */
        coro__fire_due_timers(s);
        /* Checked on every turn, not only when idle: coroutines that
         * keep yielding must not keep run_until past its deadline. */
        if (until_deadline && deadline <= coro_now())
            return ETIMEDOUT;
        if ((coro__tracing() ? run_turn_traced(s) : run_turn(s, false)) > 0)
            continue;
        /* nothing was ready */
        wake_at = coro__timers_next(&s->timers);
        if (wake_at == CORO_FOREVER && !until_deadline)
            return EDEADLK;
        sleep_until(wake_at < deadline ? wake_at : deadline);
    }
    return 0;
}

static int run_checked(coro_sched *s, uint64_t deadline, bool until_deadline)
{
    coro_sched *outer;
    int result;

    if (s == NULL)
        return EINVAL;
    if (!coro__may_pump(s))
        return EPERM;
    outer = coro__pump_enter(s);
    result = coro__pump_until(s, deadline, until_deadline);
    coro__pump_leave(s, outer);
    return result;
}

int coro_sched_run(coro_sched *s)
{
    return run_checked(s, CORO_FOREVER, false);
}

int coro_sched_run_until(coro_sched *s, uint64_t deadline)
{
    return run_checked(s, deadline, true);
}

bool coro_sched_step(coro_sched *s)
{
    coro_sched *outer;
    bool ran;

    if (s == NULL || !coro__may_pump(s))
        return false;
    outer = coro__pump_enter(s);
    coro__fire_due_timers(s);
    ran = run_one(s, coro__tracing());
    coro__pump_leave(s, outer);
    return ran;
}

/* Run the entries that are ready now (not those they make ready). */
static size_t run_ready(coro_sched *s)
{
    size_t batch, ran = 0;
    bool traced = coro__tracing();

    coro__fire_due_timers(s);
    batch = s->ready_count;
    while (ran < batch && run_one(s, traced))
        ran++;
    return ran;
}

size_t coro_sched_poll_until(coro_sched *s, uint64_t deadline)
{
    coro_sched *outer;
    size_t ran;

    if (s == NULL || !coro__may_pump(s))
        return 0;
    outer = coro__pump_enter(s);
    ran = run_ready(s);
    if (ran == 0) {
        uint64_t wake_at = coro__timers_next(&s->timers);

        if (deadline < wake_at)
            wake_at = deadline;
        if (wake_at > coro_now())
            sleep_until(wake_at);
        ran = run_ready(s);
    }
    coro__pump_leave(s, outer);
    return ran;
}

size_t coro_sched_poll_for(coro_sched *s, uint64_t ns)
{
    return coro_sched_poll_until(s, coro__deadline_after(ns));
}

/* ── The scheduler itself ─────────────────────────────────────────────── */

coro_sched *coro_sched_create_limit(size_t max_posts)
{
    coro_sched *s;

    if (max_posts == 0) {
        errno = EINVAL;
        return NULL;
    }
    s = calloc(1, sizeof *s);
    if (s == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    s->owner = coro__thread_id();
    s->max_posts = max_posts;
    s->stack_size = coro__usable_stack_size(0);
    coro__trace_sched_created(s);
    return s;
}

coro_sched *coro_sched_create(void)
{
    return coro_sched_create_limit(SIZE_MAX);
}

size_t coro_sched_alive(const coro_sched *s)
{
    return s ? s->alive : 0;
}

coro_sched *coro_sched_self(void)
{
    coro *c = coro_self();

    /* In a post, the stack is the pump's: the running coroutine, if any,
     * is the one that entered the pump (a coroutine of another scheduler
     * pumping this one), so the answer is the pump's scheduler. */
    if (pumping_now != NULL && c == pumping_now->pump_caller)
        return pumping_now;
    if (c != NULL && c->sched != NULL)
        return c->sched;
    return pumping_now;
}

int coro_sched_destroy(coro_sched *s)
{
    if (s == NULL)
        return EINVAL;
    if (s->owner != coro__thread_id())
        return EPERM;
    if (s->pumping || s->alive > 0 || s->posts_pending > 0 || s->handles > 0)
        return EBUSY;

    coro__cache_flush(s);
    coro__timers_free(&s->timers);
    if (s->dense != NULL)
        coro__dense_destroy(s->dense);
    coro__levels_free(s);
    while (s->spare_posts != NULL) {
        struct post *p = s->spare_posts;
        s->spare_posts = p->next_free;
        free(p);
    }
    coro__trace_sched_destroyed(s);
    free(s);
    return 0;
}

/* ── Coroutines of a scheduler ────────────────────────────────────────── */

int coro__sched_destroy_coroutine(coro *c)
{
    coro_sched *s = c->sched;

    if (c->detached)
        return EINVAL; /* the scheduler owns it; this handle is stale */
    if (c->queued || c->state != CORO_DONE)
        return EBUSY;
    s->handles--;
    c->detached = true; /* a stale handle to it now fails as above */
    coro__shell_put(s, c);
    return 0;
}
