/*
 * looper.c — a thread whose whole life is a pump.
 *
 *   coro_looper_start()                       the looper's thread
 *   ───────────────────                       ───────────────────
 *   create the thread ───────────────────────> s = coro_sched_create()
 *   wait until it reports its scheduler <───── report s
 *                                              while (!stopping)
 *   any thread: coro_go(s, ...) ──inbox──────>     coro_sched_poll_until(s, forever)
 *               coro_post(s, ...)                  (sleeps in the kernel when idle)
 *   coro_looper_stop(): post "stop" ─────────> stopping = true (on its thread)
 *   coro_looper_shutdown(): the same, with    (shutdown: coro_sched_shutdown(s,
 *     a deadline                                  until the deadline))
 *                                              coro_sched_run(s): finish the rest
 *   join the thread <───────────────────────── coro_sched_destroy(s); exit
 *
 * Built on the public API, plus one internal call: the stop request is
 * posted even if the scheduler is closed already (by a signal, say), when
 * coro_post() would refuse it with ESHUTDOWN.
 */
#define _GNU_SOURCE
#include "coro_impl.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct coro_looper {
    pthread_t thread;
    char name[16];          /* the kernel keeps 15 characters and a NUL */
    bool stopping;          /* the looper's thread only: stop_request() */

    /* The start-up hand-shake: the thread reports its scheduler. */
    pthread_mutex_t lock;
    pthread_cond_t started_cond;
    bool started;
    coro_sched *sched;      /* NULL after start: creation failed */

    /* Set by coro_looper_shutdown() before it posts the stop request
     * (which publishes them to the looper's thread). */
    bool shutdown;
    uint64_t deadline;
    size_t abandoned;       /* written by the looper's thread before exit */
};

/* The stop request, run on the looper's own thread. Sending it as a post
 * wakes the pump, and no post sent before it can be missed: the looper
 * sees `stopping` only after running this, and then runs the rest.
 * `stopping` never crosses threads (only the looper's thread stores and
 * loads it), so it is a plain bool. What crosses threads
 * are the posts: a push wakes the pump (models/inbox.pml), and a post is
 * counted until it has run, so coro_sched_destroy() stays busy while one
 * is on its way (models/post_admit.pml); and then the join. */
static void stop_request(coro_sched *s, void *arg)
{
    coro_looper *l = arg;

    (void)s;
    l->stopping = true;
}

static void report_started(coro_looper *l, coro_sched *s)
{
    pthread_mutex_lock(&l->lock);
    l->sched = s;
    l->started = true;
    pthread_cond_signal(&l->started_cond);
    pthread_mutex_unlock(&l->lock);
}

static void *looper_main(void *arg)
{
    coro_looper *l = arg;
    coro_sched *s;

    /* Named first: its scheduler's lane in a trace takes the name. */
    if (l->name[0] != '\0')
        pthread_setname_np(pthread_self(), l->name);
    s = coro_sched_create();
    report_started(l, s);
    if (s == NULL)
        return NULL;
    while (!l->stopping)
        coro_sched_poll_until(s, UINT64_MAX); /* no deadline: sleep until work */
    if (l->shutdown)
        l->abandoned = coro__sched_shutdown_until(s, l->deadline);
    /* Stopping: let what was queued finish. A post that raced with the
     * stop may still arrive; run again until the scheduler is empty. */
    do
        coro_sched_run(s);
    while (coro_sched_destroy(s) == EBUSY);
    coro_thread_detach();
    return NULL;
}

coro_looper *coro_looper_start(const char *name)
{
    coro_looper *l = calloc(1, sizeof *l);
    int err;

    if (l == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    if (name != NULL)
        strncpy(l->name, name, sizeof l->name - 1);
    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->started_cond, NULL);
    err = pthread_create(&l->thread, NULL, looper_main, l);
    if (err != 0)
        goto fail;
    pthread_mutex_lock(&l->lock);
    while (!l->started)
        pthread_cond_wait(&l->started_cond, &l->lock);
    pthread_mutex_unlock(&l->lock);
    if (l->sched == NULL) {
        pthread_join(l->thread, NULL);
        err = ENOMEM;
        goto fail;
    }
    return l;
fail:
    pthread_cond_destroy(&l->started_cond);
    pthread_mutex_destroy(&l->lock);
    free(l);
    errno = err == ENOMEM ? ENOMEM : EAGAIN;
    return NULL;
}

coro_sched *coro_looper_sched(coro_looper *l)
{
    return l ? l->sched : NULL;
}

/* Send the stop request, join the thread, free the looper. Returns how
 * many coroutines its shutdown abandoned (0 without one). */
static size_t stop_and_join(coro_looper *l)
{
    const struct timespec a_moment = {0, 1000 * 1000};
    size_t abandoned;

    /* Without memory for the post, try again shortly: the stop must not
     * be lost. */
    while (coro__post_always(l->sched, stop_request, l) == ENOMEM)
        nanosleep(&a_moment, NULL);
    pthread_join(l->thread, NULL);
    abandoned = l->abandoned;
    pthread_cond_destroy(&l->started_cond);
    pthread_mutex_destroy(&l->lock);
    free(l);
    return abandoned;
}

int coro_looper_stop(coro_looper *l)
{
    if (l == NULL)
        return EINVAL;
    if (pthread_equal(pthread_self(), l->thread))
        return EPERM;
    stop_and_join(l);
    return 0;
}

size_t coro_looper_shutdown(coro_looper *l, uint64_t grace_ns)
{
    if (l == NULL || pthread_equal(pthread_self(), l->thread)) {
        errno = l == NULL ? EINVAL : EPERM;
        return 0;
    }
    l->shutdown = true;
    l->deadline = coro__deadline_after(grace_ns); /* counted from now */
    return stop_and_join(l);
}
