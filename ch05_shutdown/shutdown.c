/*
 * shutdown.c — stopping a scheduler: members, cancel and close, abandon,
 * shutdown.
 *
 * Every coroutine of the scheduler that is alive, or done but not yet
 * destroyed, is on the `members` list, so closing can cancel them all and
 * a shutdown can abandon the rest:
 *
 *   close ──> closed = true; cancel every member (end its wait: ECANCELED)
 *   shutdown ──> close; pump until nothing is alive or the deadline;
 *                abandon the rest (cleanups run, never resumed); run the
 *                posts; wait for requests still owed to the abandoned
 *
 * "Owed": a wake, an event set or a cancel from another thread that won
 * its race before the coroutine finished still has its request on the
 * way through the inbox. The coroutine's memory must not be reused before
 * that request has arrived, so each coroutine counts what it is owed and
 * is recycled only at zero.
 *
 * Owns: the members list, `closed`, the close request and its arrival
 * (close_arrived), the owed counts, and the abandoning of struct
 * coro_sched. Thread: the owner, except coro__is_closed(),
 * coro__sched_cancel(), coro_sched_close() and coro__sched_close_async(),
 * which any thread may call (a cancel or close from another thread
 * travels to the owner through the inbox).
 */
#define _GNU_SOURCE
#include "sched_impl.h"

#include <errno.h>
#include <stddef.h>

/* ── Members: every coroutine not in the cache ────────────────────────── */

void coro__member_link(coro_sched *s, coro *c)
{
    c->member_prev = NULL;
    c->member_next = s->members;
    if (s->members != NULL)
        s->members->member_prev = c;
    s->members = c;
}

void coro__member_unlink(coro_sched *s, coro *c)
{
    if (c->member_prev != NULL)
        c->member_prev->member_next = c->member_next;
    else
        s->members = c->member_next;
    if (c->member_next != NULL)
        c->member_next->member_prev = c->member_prev;
    c->member_next = c->member_prev = NULL;
}

void coro__members_free(coro_sched *s)
{
    while (s->members != NULL) {
        coro *c = s->members;
        coro__member_unlink(s, c);
        coro__shell_free(c);
    }
}

void coro__retire_if_released(coro_sched *s, coro *c)
{
    if (!c->detached || c->owed > 0)
        return;
    coro__member_unlink(s, c);
    coro__shell_put(s, c);
}

/* coro_destroy() of a joinable coroutine of a scheduler: it is released
 * to the scheduler, and retired once nothing is owed to it. */
int coro__sched_destroy_coroutine(coro *c)
{
    coro_sched *s = c->sched;

    if (c->detached)
        return EINVAL; /* the scheduler owns it; this handle is stale */
    if (c->queued || c->state != CORO_DONE)
        return EBUSY;
    s->handles--;
    c->detached = true; /* a stale handle to it now fails as above */
    coro__retire_if_released(s, c);
    return 0;
}

void coro__owe(coro_sched *s, coro *c)
{
    c->owed++;
    s->owed++;
}

void coro__owed_paid(coro_sched *s, coro *c)
{
    c->owed--;
    s->owed--;
    coro__retire_if_released(s, c);
}

/* seq_cst, with the seq_cst counting that precedes it in
 * coro__start_remote() and coro_post(): either this load sees the close,
 * or the shutdown's final look at the counts sees the work (see
 * abandon_rest()). */
bool coro__is_closed(const coro_sched *s)
{
    return atomic_load(&s->closed);
}

/* ── Cancellation and closing ─────────────────────────────────────────── */

/* Owner: `c` was cancelled; if it waits, end the wait with ECANCELED. A
 * wake or a set from another thread may have ended the wait already (its
 * request is on the way): then that result stands. */
void coro__end_wait_canceled(coro *c)
{
    int parked = CORO_PARK_PARKED;

    switch (c->waiting) {
    case CORO_WAIT_NONE:
        return; /* queued or running: its next blocking call sees it */
    case CORO_WAIT_SLEEP:
        break;
    case CORO_WAIT_PARK:
        if (!atomic_compare_exchange_strong_explicit(
                &c->park_word, &parked, CORO_PARK_EMPTY,
                memory_order_acq_rel, memory_order_acquire))
            return; /* a wake won */
        break;
    case CORO_WAIT_EVENT:
        if (!coro__event_timeout(c))
            return; /* a set won */
        break;
    }
    coro__make_ready(c, ECANCELED);
}

/* Set CORO_CANCEL_CANCELED (and `extra`) unless `c` is cancelled or
 * finished already. Returns 0 if this call cancelled it, else 1 (already
 * cancelled) or EINVAL (finished). */
static int mark_canceled(coro *c, unsigned extra)
{
    unsigned word = atomic_load_explicit(&c->cancel_word,
                                         memory_order_relaxed);

    do {
        if (word & CORO_CANCEL_FINISHED)
            return EINVAL;
        if (word & CORO_CANCEL_CANCELED)
            return 1;
    } while (!atomic_compare_exchange_weak_explicit(
        &c->cancel_word, &word, word | CORO_CANCEL_CANCELED | extra,
        memory_order_acq_rel, memory_order_relaxed));
    return 0;
}

int coro__sched_cancel(coro *c)
{
    int marked;

    if (coro__tracing()) /* another thread's may not read c's trace id */
        coro__trace_note(c->sched, CORO_TRACE_CANCEL,
                         coro__on_owner_thread(c) ? c : NULL, 0);
    if (coro__on_owner_thread(c)) {
        marked = mark_canceled(c, 0);
        if (marked == 0)
            coro__end_wait_canceled(c);
    } else {
        /* The owner ends the wait: the request carries it there. */
        marked = mark_canceled(c, CORO_CANCEL_IN_FLIGHT);
        if (marked == 0) {
            c->cancel_remote.kind = CORO_REMOTE_CANCEL;
            coro__inbox_push(&c->sched->inbox, &c->cancel_remote);
        }
    }
    return marked == EINVAL ? EINVAL : 0;
}

void coro__cancel_members(coro_sched *s)
{
    for (coro *c = s->members; c != NULL; c = c->member_next)
        if (c->state != CORO_DONE && mark_canceled(c, 0) == 0)
            coro__end_wait_canceled(c);
}

void coro__sched_close_async(coro_sched *s, int signo)
{
    /* Relaxed: the request's push below publishes it (release). */
    atomic_store_explicit(&s->close_signo, signo, memory_order_relaxed);
    atomic_store(&s->closed, true); /* seq_cst: see coro__is_closed() */
    /* Exchange: the one embedded request goes out at most once. */
    if (!atomic_exchange(&s->close_sent, true)) {
        s->close_remote.kind = CORO_REMOTE_CLOSE;
        coro__inbox_push(&s->inbox, &s->close_remote);
    }
}

/*
 * The close request arrives (take_in() in remote.c). Its cancels may make
 * nothing ready (no coroutine alive), and a poll that then slept would
 * sleep to its deadline, closed: a `while (running) coro_sched_poll_for()`
 * loop would see the close a whole timeout late. So the poll that takes
 * it in returns without sleeping (close_arrived, coro_sched_poll_until()),
 * and the loop looks at its condition. Only that poll: the next one clears
 * the flag and sleeps as an idle poll does, so a closed pump never spins.
 * The owner's own close needs no flag: inside a poll, a coroutine, a post
 * or the hook makes it, and the poll does not sleep after those anyway.
 */
void coro__take_in_close(coro_sched *s)
{
    if (coro__tracing()) /* acquired with the request (inbox.c) */
        coro__trace_note(s, CORO_TRACE_CLOSE_IN, NULL,
                         (uint64_t)atomic_load_explicit(
                             &s->close_signo, memory_order_relaxed));
    s->close_arrived = true;
    coro__cancel_members(s);
}

int coro_sched_close(coro_sched *s)
{
    if (s == NULL)
        return EINVAL;
    if (coro__tracing())
        coro__trace_note(s, CORO_TRACE_CLOSE, NULL, 0);
    if (!coro__sched_on_owner_thread(s)) {
        coro__sched_close_async(s, 0); /* the owner's pump cancels them */
        return 0;
    }
    atomic_store(&s->closed, true); /* seq_cst: see coro__is_closed() */
    coro__cancel_members(s);
    return 0;
}

/* ── Shutdown ─────────────────────────────────────────────────────────── */

/*
 * Abandon `c`, alive and suspended: it will never be resumed. Undo every
 * reference to it (its timer, its place on an event's list, its park),
 * run its cleanups here, and retire it unless a request is still owed to
 * it. Its stack is simply reused or unmapped later: no frame on it ever
 * runs again.
 */
void coro__abandon_one(coro_sched *s, coro *c)
{
    if (coro__tracing())
        coro__trace_note(s, CORO_TRACE_ABANDON, c, 0);
    int parked = CORO_PARK_PARKED;

    if (c->waiting != CORO_WAIT_NONE && c->deadline != CORO_FOREVER)
        coro__timers_remove(&s->timers, c);
    if (c->waiting == CORO_WAIT_PARK &&
        !atomic_compare_exchange_strong_explicit(
            &c->park_word, &parked, CORO_PARK_EMPTY, memory_order_acq_rel,
            memory_order_acquire))
        coro__owe(s, c); /* a wake won the race: its request is coming */
    if (c->waiting == CORO_WAIT_EVENT && !coro__event_timeout(c))
        coro__owe(s, c); /* a set won the race: its request is coming */
    c->waiting = CORO_WAIT_NONE;
    c->queued = false;
    coro__run_cleanups(c);
    if (atomic_fetch_or(&c->cancel_word, CORO_CANCEL_FINISHED) &
        CORO_CANCEL_IN_FLIGHT)
        coro__owe(s, c); /* a cancel request is coming */
    c->state = CORO_DONE;
    c->result = NULL;
    coro__alive_add(s, -1);
    atomic_store_explicit(&c->finished, true, memory_order_release);
    s->abandoned++;
    coro__retire_if_released(s, c);
}

/*
 * The grace period is over: abandon every alive coroutine, run the posts,
 * and wait for what is still on its way — coroutines and posts other
 * threads committed to before they saw the close (they counted themselves
 * in `arriving` or `posts_pending` first, see coro__is_closed()), and requests
 * owed to the abandoned. Those arrive within moments: each comes from a
 * thread that has already won its race and has only the push left to do.
 */
static void abandon_rest(coro_sched *s)
{
    coro_ready *posts = NULL, **tail = &posts, *entry;
    coro *c, *next;

    /* The statistics' window ends first: it may name the coroutine of its
     * first resume (window_first), which is about to be freed. */
    coro__timing_pause(s);
    s->abandoning = true; /* from here arrivals are abandoned on the way in */
    coro__drain_inbox(s);
    /* The ready queue: keep the posts, in order; the coroutines in it are
     * members, abandoned below. */
    while ((entry = coro__ready_pop(s)) != NULL) {
        if (entry->coroutine != NULL)
            continue;
        entry->next = NULL;
        *tail = entry;
        tail = &entry->next;
    }
    for (c = s->members; c != NULL; c = next) {
        next = c->member_next; /* coro__abandon_one() may unlink c */
        if (c->state != CORO_DONE)
            coro__abandon_one(s, c);
    }
    while (posts != NULL) {
        entry = posts;
        posts = entry->next;
        coro__ready_push(s, entry, 0);
    }
    for (;;) {
        coro__drain_inbox(s);
        if (coro__run_one(s))
            continue;
        /* Looked at after the drain: what it took in may have ended the
         * work without queueing anything. */
        if (!coro__work_remains(s) && s->backlog == NULL)
            break;
        if (s->backlog == NULL)
            coro__inbox_wait(&s->inbox, CORO_FOREVER);
    }
}

size_t coro__sched_shutdown_until(coro_sched *s, uint64_t deadline)
{
    coro_sched *outer;
    size_t before;

    if (s == NULL || !coro__may_pump(s)) {
        errno = s == NULL ? EINVAL : EPERM;
        return 0;
    }
    coro_sched_close(s);
    before = s->abandoned;
    if (coro__tracing())
        coro__trace_note(s, CORO_TRACE_DRAIN, NULL, 0);
    outer = coro__pump_enter(s);
    coro__pump_until(s, deadline, true);
    abandon_rest(s);
    coro__pump_leave(s, outer);
    s->shut_down = true;
    if (coro__tracing())
        coro__trace_note(s, CORO_TRACE_DRAINED, NULL, s->abandoned - before);
    return s->abandoned - before;
}

size_t coro_sched_shutdown(coro_sched *s, uint64_t grace_ns)
{
    return coro__sched_shutdown_until(s, coro__deadline_after(grace_ns));
}
