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
 * stacks in cache.c, the trace in trace.c, waiting in wait.c, other
 * threads' requests in remote.c, stopping in shutdown.c, statistics in
 * stats.c; struct coro_sched, which they all share, is in sched_impl.h.
 *
 * Owns: the count of handles and the spare post entries of struct
 * coro_sched, and the scheduler's life from create to destroy (the
 * counts other threads read are remote.c's).
 * Thread: the scheduler's owner only; every entry point checks it, and
 * coro_go / coro_spawn / coro_post from another thread hand over to
 * remote.c, which sends the work through the inbox.
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
    return 0;
}

bool coro__sched_on_owner_thread(const coro_sched *s)
{
    return s->owner == coro__thread_id();
}

int coro__reserve_one_more(coro_sched *s)
{
    size_t alive = coro__alive_count(s);

    /* The new coroutine's level, and the posts' (see ready.c). */
    if (coro__levels_reserve(s, alive + 1 + LEVELS_FOR_POSTS) != 0 ||
        coro__timers_reserve(&s->timers, alive + 1) != 0)
        return ENOMEM;
    return 0;
}

void coro__init_scheduled(coro_sched *s, coro *c, bool detached)
{
    c->owner = s->owner; /* also when created on another thread */
    c->sched = s;
    c->priority = 0;
    c->detached = detached;
    c->ready.coroutine = c;
    c->waiting = CORO_WAIT_NONE;
    c->event = NULL;
    c->event_linked = false;
    atomic_store_explicit(&c->park_word, CORO_PARK_EMPTY, memory_order_relaxed);
    atomic_store_explicit(&c->finished, false, memory_order_relaxed);
    c->owed = 0;
}

/* Create a coroutine of `s` (with a first cleanup, if not NULL) and
 * queue it. Returns 0 or an errno value. */
static int sched_start(coro_sched *s, coro_fn fn, void *arg, bool detached,
                       coro_cleanup *cleanup, coro **out)
{
    int err = check_caller(s, (const void *)fn);
    bool reused;
    coro *c;

    if (err != 0)
        return err;
    if (coro__is_closed(s))
        return ESHUTDOWN;
    if (!coro__sched_on_owner_thread(s))
        return coro__start_remote(s, fn, arg, detached, cleanup, out);
    if (coro__reserve_one_more(s) != 0)
        return ENOMEM;
    c = coro__shell_get(s, &reused);
    if (c == NULL)
        return ENOMEM;
    coro__prepare(c, fn, arg, reused);
    coro__init_scheduled(s, c, detached);
    if (cleanup != NULL)
        coro__cleanup_push(c, cleanup);
    coro__alive_add(s, +1);
    if (!detached)
        s->handles++;
    coro__member_link(s, c);
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

    return sched_start(s, fn, arg, true, NULL, &c);
}

int coro__go_with_cleanup(coro_sched *s, coro_fn fn, void *arg,
                          coro_cleanup *cleanup)
{
    coro *c;

    return sched_start(s, fn, arg, true, cleanup, &c);
}

coro *coro_spawn(coro_sched *s, coro_fn fn, void *arg)
{
    coro *c = NULL;
    int err = sched_start(s, fn, arg, false, NULL, &c);

    if (err != 0) {
        errno = err;
        return NULL;
    }
    return c;
}

/* coro_post(); `even_if_closed` for the library's own stop requests. */
static int post_checked(coro_sched *s, coro_post_fn fn, void *arg,
                        bool even_if_closed)
{
    int err = check_caller(s, (const void *)fn);
    struct post *p;

    if (err != 0)
        return err;
    if (!even_if_closed && coro__is_closed(s))
        return ESHUTDOWN;
    if (!coro__sched_on_owner_thread(s))
        return coro__post_remote(s, fn, arg, even_if_closed);
    if (!coro__post_admit(s))
        return EAGAIN;
    if (coro__levels_reserve(s, coro__alive_count(s) +
                                    LEVELS_FOR_POSTS) != 0)
        goto no_memory;
    p = s->spare_posts;
    if (p != NULL) {
        s->spare_posts = p->next_free;
        s->spare_count--;
    } else if ((p = malloc(sizeof *p)) == NULL) {
        goto no_memory;
    }
    p->from_other_thread = false;
    p->ready.coroutine = NULL;
    p->fn = fn;
    p->arg = arg;
    p->trace_number = coro__tracing() ? coro__trace_posted(s) : 0;
    coro__ready_push(s, &p->ready, 0);
    return 0;
no_memory:
    coro__post_unadmit(s);
    return ENOMEM;
}

int coro_post(coro_sched *s, coro_post_fn fn, void *arg)
{
    return post_checked(s, fn, arg, false);
}

int coro__post_always(coro_sched *s, coro_post_fn fn, void *arg)
{
    return post_checked(s, fn, arg, true);
}

/* ── The pump ─────────────────────────────────────────────────────────── */

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
 * `room`: the statistics window's count, which the loop that resumes
 * keeps (run_one() says why). `traced`: record the resume (trace.c);
 * a constant in the pump's loops, so that the pump has two: its own, with
 * no trace in it, and run_turn_traced()'s. */
static inline __attribute__((always_inline)) void
run_coroutine(coro_sched *s, coro *c, int *room, bool traced)
{
    uint64_t began = traced ? coro__trace_clock() : 0;
    coro_left left;

    c->queued = false;
    coro__timing_open(s, c, room);
    left = coro__resume(c);
    if (c->map == NULL && !coro__stack_canary_intact(c))
        coro__overflow_abort(c); /* its dense stack ran over its end */
    if (__builtin_expect(left == CORO_LEFT_YIELDED, 1)) {
        if (traced)
            coro__trace_resume(s, c, began, CORO_TRACE_YIELDED);
        /* Behind everything ready. Its ready time is the reading its
         * resume started at, which it carries already
         * (coro__timing_open() says why no stamp is needed). */
        coro__ready_put_back(s, c);
        return;
    }
    if (traced)
        coro__trace_resume(s, c, began, left == CORO_LEFT_TO_WAIT
                                            ? CORO_TRACE_PARKED
                                            : CORO_TRACE_FINISHED);
    s->ready_count--;
    if (left == CORO_LEFT_TO_WAIT)
        return; /* what wakes it queues it */
    if (s->window_first == c)
        s->window_first = NULL; /* it may be freed below */
    coro__alive_add(s, -1);
    /* release: a wake from another thread that sees `finished` sees the
     * coroutine's last writes too. */
    atomic_store_explicit(&c->finished, true, memory_order_release);
    /* FINISHED is set (coroutine_main()): no cancel request can start
     * now, but one that started before may still be on its way. */
    if (atomic_load_explicit(&c->cancel_word, memory_order_acquire) &
        CORO_CANCEL_IN_FLIGHT)
        coro__owe(s, c);
    /* a joinable one waits for coro_destroy() */
    coro__retire_if_released(s, c);
}

/* Run one post. Its entry is recycled before the call, so the post may
 * post again even under a limit of one. */
static void run_post(coro_sched *s, struct post *p)
{
    coro_post_fn fn = p->fn;
    void *arg = p->arg;
    uint64_t number = p->trace_number, began = 0;

    coro__timing_pause(s);
    if (p->from_other_thread) {
        coro__post_node_return(s, p); /* back to the producers */
    } else if (s->spare_count < SPARE_POSTS_MAX) {
        p->next_free = s->spare_posts;
        s->spare_posts = p;
        s->spare_count++;
    } else {
        free(p);
    }
    coro__post_unadmit(s);
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
 * `room` is the statistics window's count (window_left in struct
 * coro_sched), which the loop keeps in a local while it runs entries:
 * a register, where the count in the scheduler was a store to memory
 * per resume, and that store cost a scheduled yield 3 to 15 percent
 * (notes/statistics.md has the figures). The loop reads window_left
 * when it starts and writes it back when it stops; a post, which ends
 * the window (coro__timing_pause()), gets it written back first.
 *
 * `traced`: record what runs (run_coroutine() says how).
 */
static inline __attribute__((always_inline)) bool
run_one(coro_sched *s, int *room, bool traced)
{
    coro_ready *entry = coro__ready_take(s);

    if (entry == NULL)
        return false;
    if (entry->coroutine != NULL) {
        run_coroutine(s, entry->coroutine, room, traced);
    } else {
        s->ready_count--; /* a post leaves the queue for good */
        s->window_left = *room;
        run_post(s, (struct post *)entry);
        *room = s->window_left; /* 0: the post ended the window */
    }
    return true;
}

bool coro__run_one(coro_sched *s)
{
    int room = s->window_left;
    bool ran = run_one(s, &room, coro__tracing());

    s->window_left = room;
    return ran;
}

bool coro__may_pump(const coro_sched *s)
{
    return s->owner == coro__thread_id() && !s->pumping;
}

coro_sched *coro__pump_enter(coro_sched *s)
{
    coro_sched *outer = pumping_now;

    coro__overflow_prepare_thread(); /* coroutines run on this thread */
    s->pumping = true;
    s->pump_caller = coro_self();
    pumping_now = s;
    return outer;
}

void coro__pump_leave(coro_sched *s, coro_sched *outer)
{
    coro__timing_pause(s);
    s->pumping = false;
    pumping_now = outer;
}

bool coro__work_remains(const coro_sched *s)
{
    return coro__alive_count(s) > 0 || coro__posts_pending(s) > 0 ||
           s->owed > 0;
}

/* When an idle pump wakes up by itself: at the next timer or `deadline`,
 * whichever is first — and within a millisecond while requests wait in
 * the backlog for memory (take_in() failed). No push is coming for those,
 * so nothing else would make the pump try them again. */
static uint64_t idle_until(coro_sched *s, uint64_t deadline)
{
    uint64_t wake_at = coro__timers_next(&s->timers);

    if (deadline < wake_at)
        wake_at = deadline;
    if (s->backlog != NULL) {
        uint64_t retry = coro__deadline_after(CORO_MSEC);
        if (retry < wake_at)
            wake_at = retry;
    }
    return wake_at;
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
    int room = s->window_left; /* in a register meanwhile: run_one() */

    while (ran < length && run_one(s, &room, traced))
        ran++;
    s->window_left = room;
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
 * nothing is ready. Every alive coroutine is queued, waiting, or on its
 * way through the inbox; when the queue is empty the pump sleeps until the
 * next timer, the deadline, or a push to its inbox — another thread may
 * still wake a parked coroutine, so there is no EDEADLK any more.
 *
 * The pump works in turns: a turn runs the entries that were ready when
 * it began, and the pump reads the clock once per turn, at its start: due
 * timers fire then, and run_until's deadline is checked then. (Read before
 * every resume, the clock cost a loop with timers set one read per
 * resume, about 40 ns on the course's benchmark machine.) A timer that
 * comes due during a turn fires when the turn ends, so it is never early,
 * and late by at most a turn: the entries that were ready before it, or
 * TURN_MIN_ENTRIES resumes if fewer were (turn_length() says why).
 *
 * Other threads' requests come in at the start of a turn too, with one
 * look at the inbox. Not before every resume: a look reads the inbox's
 * head, which the producers write, and takes its cache line away from
 * them, so that the next push waits for the line to come back (a round
 * trip between two cores, up to 120 ns on a VM). Looking once a turn, the
 * pump takes what arrived meanwhile as one batch: posts from another
 * thread (bench/threads_post.c, Chapter 4, 21 interleaved rounds on an AMD
 * EPYC), 109 ns per item before, 57 after. A request waits for the turn
 * in progress to end, as a timer does.
 */
int coro__pump_until(coro_sched *s, uint64_t deadline, bool until_deadline)
{
    /* With a wait hook (coro_sched_set_wait()), a pump that always has
     * work would never wait, so the hook would never see readiness. So
     * each turn also begins with a poll of the hook (its deadline already
     * passed), while work is ready. Polling more often would cost system
     * calls without running anything sooner: what the poll makes ready
     * queues behind the entries already ready. Less often, and a turn
     * could end without a look. A turn that begins right after a wait
     * skips the poll: the wait was one. */
    bool looked = false; /* the hook just waited: no poll needed */

    /* (An entry in the queue is work, so the loop asks the counters only
     * when the queue is empty: the call stays off a busy pump's path, and
     * the counters, which other threads write, off the path of a post.) */
    while (s->ready_count > 0 || coro__work_remains(s)) {
        /* A turn: one look around, then the entries. */
        coro__drain_inbox(s);
        coro__fire_due_timers(s);
        /* Checked on every turn, not only when idle: coroutines that
         * keep yielding must not keep run_until past its deadline. */
        if (until_deadline && deadline <= coro_now())
            return ETIMEDOUT;
        if (coro__inbox_has_hook(&s->inbox) && !looked &&
            s->ready_count > 0) /* the hook first: the rare case */
            coro__inbox_poll(&s->inbox);
        looked = false;
        if ((coro__tracing() ? run_turn_traced(s) : run_turn(s, false)) > 0)
            continue;
        /* Nothing was ready. What was taken in may have ended the work
         * without queueing anything (a refused request giving its count
         * back, a request owed to a finished coroutine): look again before
         * sleeping. */
        if (!coro__work_remains(s))
            break;
        coro__timing_sleep(s); /* a sleep is not part of the last resume */
        coro__inbox_wait(&s->inbox, idle_until(s, deadline));
        looked = true;
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
    coro__drain_inbox(s);
    coro__fire_due_timers(s);
    ran = coro__run_one(s);
    coro__pump_leave(s, outer);
    return ran;
}

/* Run the entries that are ready now (not those they make ready). */
static size_t run_ready(coro_sched *s)
{
    size_t batch, ran = 0;
    bool traced = coro__tracing();
    int room;

    coro__drain_inbox(s);
    coro__fire_due_timers(s);
    batch = s->ready_count;
    room = s->window_left; /* in a register meanwhile: run_one() */
    while (ran < batch && run_one(s, &room, traced))
        ran++;
    s->window_left = room;
    return ran;
}

size_t coro_sched_poll_until(coro_sched *s, uint64_t deadline)
{
    coro_sched *outer;
    size_t ran;

    if (s == NULL || !coro__may_pump(s))
        return 0;
    outer = coro__pump_enter(s);
    s->close_arrived = false; /* set if this call takes a close in */
    ran = run_ready(s);
    if (ran == 0 && !s->close_arrived) {
        uint64_t wake_at = idle_until(s, deadline);

        coro__timing_sleep(s);
        if (wake_at > coro_now())
            coro__inbox_wait(&s->inbox, wake_at);
        else
            coro__inbox_poll(&s->inbox); /* a hook still looks */
        ran = run_ready(s);
    } else {
        /* Work was ready, or a close came in (it ends the call at once:
         * coro__take_in_close()), so nothing waited: a hook still gets its
         * look (what it makes ready runs at the next call). */
        coro__inbox_poll(&s->inbox);
    }
    coro__pump_leave(s, outer);
    return ran;
}

void coro__sched_idle_wait(coro_sched *s)
{
    uint64_t wake_at;

    if (s->ready_count > 0 || s->backlog != NULL)
        return;
    wake_at = coro__timers_next(&s->timers);
    if (wake_at > coro_now())
        coro__inbox_wait(&s->inbox, wake_at);
}

size_t coro_sched_poll_for(coro_sched *s, uint64_t ns)
{
    return coro_sched_poll_until(s, coro__deadline_after(ns));
}

int coro_sched_set_wait(coro_sched *s, coro_wait_fn fn, void *arg,
                        int *wake_fd)
{
    if (s == NULL)
        return EINVAL;
    /* Inside the pump (a coroutine, a post, the hook itself) the owner may
     * be about to wait, or waiting: the way it is woken must not change
     * under a producer then (inbox.c). */
    if (!coro__may_pump(s))
        return EPERM;
    return coro__inbox_set_wait(&s->inbox, fn, arg, wake_fd);
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
    if (coro__inbox_init(&s->inbox) != 0) {
        free(s);
        errno = ENOMEM;
        return NULL;
    }
    s->owner = coro__thread_id();
    s->max_posts = max_posts;
    atomic_init(&s->stack_size, coro__usable_stack_size(0));
    coro__ticks_rate_measure(); /* the first time: 2 ms, outside any pump */
    coro__trace_sched_created(s);
    return s;
}

coro_sched *coro_sched_create(void)
{
    return coro_sched_create_limit(SIZE_MAX);
}

size_t coro_sched_alive(const coro_sched *s)
{
    return s ? coro__alive_count(s) : 0;
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
    if (!s->pumping)
        coro__drain_inbox(s); /* refusals that raced with a shutdown, say */
    if (s->pumping || coro__work_remains(s) ||
        (s->handles > 0 && !s->shut_down))
        return EBUSY;
    coro__signal_forget(s); /* no signal handler can reach s now */
    coro__members_free(s);  /* after a shutdown: undestroyed handles */
    coro__cache_flush(s);
    coro__timers_free(&s->timers);
    if (coro__owner_dense(s) != NULL)
        coro__dense_destroy(coro__owner_dense(s));
    coro__levels_free(s);
    while (s->spare_posts != NULL) {
        struct post *p = s->spare_posts;
        s->spare_posts = p->next_free;
        free(p);
    }
    for (struct post *p = atomic_load(&s->returned), *next; p; p = next) {
        next = p->next_free;
        free(p);
    }
    coro__inbox_fini(&s->inbox); /* a late producer may still touch its
                                    wake cell: cells are never freed */
    coro__trace_sched_destroyed(s);
    free(s);
    return 0;
}
