/*
 * run_with_timeout.c — the reference answer of Chapter 5's exercise 2:
 * run fn(arg) on a scheduler, and cancel it if it has not finished after
 * `ns` nanoseconds.
 *
 * Two coroutines on `s`, both joinable (coro_spawn()):
 *
 *   work:   fn(arg), the caller's function;
 *   timer:  sleeps `ns`, then coro_cancel(work). Only a cancel that
 *           returns 0 counts as a timeout.
 *
 * The caller pumps `s` until work is done. Then the timer must go: it is
 * cancelled (its sleep returns ECANCELED and it returns without touching
 * work), and pumped until it has returned, and only then are the two
 * handles destroyed. Nothing of ours is left alive on `s`, and no cancel
 * of ours can come later.
 *
 * What does coro_cancel() return when fn finished at the same instant?
 * Say work returned in the same turn in which the timer's sleep ended,
 * just before the timer ran. The timer's coro_cancel(work) is on the
 * owner thread, after the finish: EINVAL, "finished". So the timer does
 * not report a timeout, and run_with_timeout() returns 0, which is true:
 * fn finished before anything cancelled it.
 *
 * Why is that safe with a joinable handle? Because `work` is still ours:
 * a finished joinable coroutine stays in its scheduler, DONE, until
 * coro_destroy(), so the handle names it and nothing else, and its cancel
 * word says FINISHED. A detached one (coro_go()) is retired the moment it
 * returns: its struct and stack go back to the cache and the next
 * coro_go() on `s` gets them. A late coro_cancel() through the old
 * pointer would then cancel that stranger, which has a fresh cancel word.
 * That is also why the timer is stopped, and pumped to its end, before
 * the handle is destroyed.
 *
 * The timer is spawned first: if spawning the work then fails, the timer
 * can be cancelled and reaped, and nothing of the caller's ever ran.
 *
 * The check: `tools/lab check ch05 run_with_timeout`.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "coro.h"

int run_with_timeout(coro_sched *s, coro_fn fn, void *arg, uint64_t ns);

struct timeout {
    coro *work;   /* set before the pump first runs the timer */
    uint64_t ns;
    bool fired;   /* the timer's cancel reached work before it finished */
};

static void *timer_body(void *arg)
{
    struct timeout *t = arg;

    /* ECANCELED: we are told to stop, work has finished. */
    if (coro_sleep(t->ns) == 0 && t->work != NULL &&
        coro_cancel(t->work) == 0)
        t->fired = true;
    return NULL;
}

/* Pump `s` until `c` is done. A poll sleeps while nothing is ready, so
 * waiting for a timer costs no CPU. */
static void pump_until_done(coro_sched *s, coro *c)
{
    while (coro_status(c) != CORO_DONE)
        coro_sched_poll_for(s, CORO_SEC);
}

static void stop_timer(coro_sched *s, coro *timer)
{
    coro_cancel(timer); /* EINVAL if it has returned already: fine */
    pump_until_done(s, timer);
    coro_destroy(timer);
}

int run_with_timeout(coro_sched *s, coro_fn fn, void *arg, uint64_t ns)
{
    struct timeout t = {NULL, ns, false};
    coro *timer, *work;

    if (s == NULL || fn == NULL)
        return EINVAL;
    timer = coro_spawn(s, timer_body, &t);
    if (timer == NULL)
        return errno;
    work = coro_spawn(s, fn, arg);
    if (work == NULL) {
        int err = errno;

        stop_timer(s, timer);
        return err;
    }
    t.work = work;
    pump_until_done(s, work);
    stop_timer(s, timer);
    coro_destroy(work);
    return t.fired ? ETIMEDOUT : 0;
}
