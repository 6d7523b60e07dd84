/*
 * answers/run_on_shared.c — Chapter 4, exercise 3: a shared looper.
 *
 * One looper for the whole process, started by the first call that needs
 * it (from whichever thread that is, even when many threads ask at once),
 * and stopped at exit, so that the work queued on it finishes before the
 * process ends. The contract is the opening comment of
 * lab/checks/run_on_shared.c.
 *
 * At exit. A process ends when main returns or someone calls exit(): the
 * atexit handlers run, then the whole process goes, threads included. A
 * looper left running would be cut off in the middle of its work, while
 * exit() is already flushing and freeing what that work uses. So the
 * first start registers stop_at_exit(), which stops the looper the way
 * coro_looper_stop() does (queued work finishes, then the thread is
 * joined). Two cases need care:
 *   - exit() called on the looper's own thread (by one of its
 *     coroutines): the looper cannot join itself (coro_looper_stop()
 *     says EPERM), so the handler leaves it; the process ends with it.
 *   - a call after the stop began: from the looper's own thread (work
 *     still draining starts more work) it still goes onto the looper;
 *     from anywhere else it is refused with ESHUTDOWN, never sent to a
 *     looper that is going away (and never starts a second looper that
 *     nobody would stop).
 */
#define _POSIX_C_SOURCE 200809L
#include "coro.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

coro_sched *shared_sched(void);
int run_on_shared(coro_fn fn, void *arg);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static coro_looper *looper;   /* under lock: the shared looper, once started */
static coro_sched *sched;     /* under lock: its scheduler */
static bool exiting;          /* under lock: stop_at_exit() has begun */

static void stop_at_exit(void)
{
    coro_looper *l;

    pthread_mutex_lock(&lock);
    exiting = true;
    l = looper;
    pthread_mutex_unlock(&lock);
    if (l == NULL)
        return;
    /* Not under the lock: the work still draining may call
     * run_on_shared() itself. */
    if (coro_looper_stop(l) != 0)
        return; /* EPERM: exit() on the looper's own thread */
    pthread_mutex_lock(&lock);
    looper = NULL;
    sched = NULL;
    pthread_mutex_unlock(&lock);
}

coro_sched *shared_sched(void)
{
    coro_sched *s = NULL;
    int err = 0;

    pthread_mutex_lock(&lock);
    if (exiting) {
        /* Only the work draining on the looper may still add to it. */
        if (sched != NULL && coro_sched_self() == sched)
            s = sched;
        else
            err = ESHUTDOWN;
    } else if (looper == NULL) {
        coro_looper *l = coro_looper_start("shared-looper");

        if (l == NULL) {
            err = errno; /* ENOMEM or EAGAIN */
        } else if (atexit(stop_at_exit) != 0) {
            coro_looper_stop(l); /* nothing would stop it at exit */
            err = ENOMEM;
        } else {
            looper = l;
            sched = s = coro_looper_sched(l);
        }
    } else {
        s = sched;
    }
    pthread_mutex_unlock(&lock);
    if (s == NULL)
        errno = err;
    return s;
}

int run_on_shared(coro_fn fn, void *arg)
{
    coro_sched *s;

    if (fn == NULL)
        return EINVAL;
    s = shared_sched();
    if (s == NULL)
        return errno;
    return coro_go(s, fn, arg);
}
