/*
 * cancel_group.c — the reference answer of Chapter 5's exercise 3: cancel
 * groups on top of the public API. coro_group_cancel(g) cancels every
 * member of `g`, and nothing else: the scheduler stays open, its other
 * coroutines run on.
 *
 * Where the list lives. In the group: a doubly linked list of member
 * records under the group's mutex, one record per coroutine started with
 * coro_group_go(). A record enters the list before its coroutine is
 * queued and leaves it in a cleanup of the member (coro_defer()), which
 * runs when the member returns and also when a shutdown abandons it. So
 * the list holds exactly the members that have not finished, and the
 * group counts them.
 *
 * A member's handle is known only once it runs (coro_go() returns no
 * handle), so the record's `self` is NULL until then; the group's
 * `canceled` flag covers that gap: a member that starts in a cancelled
 * group cancels itself before it calls fn. A member queued before the
 * cancel therefore sees ECANCELED at its first blocking call, as a
 * coroutine does after coro_sched_close().
 *
 * A member finishing while another thread cancels the group. The member
 * is detached: once it has finished, its struct and stack go back to the
 * scheduler's cache and the next coro_go() reuses them, so a cancel
 * through its old handle would cancel a stranger. The mutex orders the
 * two. The canceller calls coro_cancel() on each listed member with the
 * lock held. The member unlinks itself in its cleanup, with the lock
 * held, and the library runs cleanups *before* it marks the coroutine
 * FINISHED and retires it. So the canceller only ever names a coroutine
 * that has not finished yet: either the cancel comes first (the member's
 * cancel word gets CANCELED and IN_FLIGHT, and the library keeps the
 * struct until its request has arrived: the member is "owed"), or the
 * unlink comes first and the canceller never sees the member. Copying
 * the handles under the lock and cancelling after unlocking would open
 * exactly the window the lock closes.
 *
 * The lock is held for a few pointer writes, or a few compare-and-swaps
 * and inbox pushes, never across a wait: the cleanup that takes it cannot
 * block for long, and nobody holding it ever waits for the pump.
 *
 * Not covered: a member abandoned by a shutdown before it ever ran has
 * not registered its cleanup, and stays counted. The instructors' page
 * discusses it.
 *
 * The check: `tools/lab check ch05 cancel_group`.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "coro.h"

typedef struct coro_group coro_group;
coro_group *coro_group_create(coro_sched *s);
int coro_group_go(coro_group *g, coro_fn fn, void *arg);
int coro_group_cancel(coro_group *g);
size_t coro_group_alive(coro_group *g);
int coro_group_destroy(coro_group *g);

struct member {
    struct member *prev, *next;
    coro_group *group;
    coro *self; /* NULL until the member runs */
    coro_fn fn;
    void *arg;
};

struct coro_group {
    pthread_mutex_t lock; /* guards everything below */
    coro_sched *sched;
    struct member *members;
    size_t alive;
    bool canceled;
};

static void link_member(coro_group *g, struct member *m)
{
    m->prev = NULL;
    m->next = g->members;
    if (g->members != NULL)
        g->members->prev = m;
    g->members = m;
    g->alive++;
}

static void unlink_member(coro_group *g, struct member *m)
{
    if (m->prev != NULL)
        m->prev->next = m->next;
    else
        g->members = m->next;
    if (m->next != NULL)
        m->next->prev = m->prev;
    g->alive--;
}

/* The member's cleanup: runs when it returns or is abandoned, before the
 * library marks it finished. */
static void member_done(void *arg)
{
    struct member *m = arg;
    coro_group *g = m->group;

    pthread_mutex_lock(&g->lock);
    unlink_member(g, m);
    pthread_mutex_unlock(&g->lock);
    free(m);
}

static void *member_main(void *arg)
{
    struct member *m = arg;
    coro_group *g = m->group;
    coro_fn fn = m->fn;
    void *fn_arg = m->arg, *result;
    /* Without memory for the cleanup, unlink by hand at the return (an
     * abandoned member would then stay counted). */
    bool deferred = coro_defer(member_done, m) == 0;
    bool canceled;

    pthread_mutex_lock(&g->lock);
    m->self = coro_self();
    canceled = g->canceled;
    pthread_mutex_unlock(&g->lock);
    if (canceled)
        coro_cancel(coro_self()); /* queued before the cancel: told now */
    result = fn(fn_arg);
    if (!deferred)
        member_done(m);
    return result; /* member_done() frees m as the member finishes */
}

coro_group *coro_group_create(coro_sched *s)
{
    coro_group *g;

    if (s == NULL) {
        errno = EINVAL;
        return NULL;
    }
    g = calloc(1, sizeof *g);
    if (g == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    if (pthread_mutex_init(&g->lock, NULL) != 0) {
        free(g);
        errno = ENOMEM;
        return NULL;
    }
    g->sched = s;
    return g;
}

int coro_group_go(coro_group *g, coro_fn fn, void *arg)
{
    struct member *m;
    int err;

    if (g == NULL || fn == NULL)
        return EINVAL;
    m = malloc(sizeof *m);
    if (m == NULL)
        return ENOMEM;
    m->group = g;
    m->self = NULL;
    m->fn = fn;
    m->arg = arg;
    pthread_mutex_lock(&g->lock);
    if (g->canceled) {
        pthread_mutex_unlock(&g->lock);
        free(m);
        return ECANCELED;
    }
    link_member(g, m); /* before it is queued: a cancel now still counts */
    pthread_mutex_unlock(&g->lock);
    err = coro_go(g->sched, member_main, m);
    if (err != 0) {
        pthread_mutex_lock(&g->lock);
        unlink_member(g, m);
        pthread_mutex_unlock(&g->lock);
        free(m);
    }
    return err;
}

int coro_group_cancel(coro_group *g)
{
    if (g == NULL)
        return EINVAL;
    pthread_mutex_lock(&g->lock);
    g->canceled = true;
    /* With the lock held: no listed member can pass its cleanup, so none
     * has finished, and coro_cancel() names the right coroutine. */
    for (struct member *m = g->members; m != NULL; m = m->next)
        if (m->self != NULL)
            coro_cancel(m->self);
    pthread_mutex_unlock(&g->lock);
    return 0;
}

size_t coro_group_alive(coro_group *g)
{
    size_t n;

    if (g == NULL)
        return 0;
    pthread_mutex_lock(&g->lock);
    n = g->alive;
    pthread_mutex_unlock(&g->lock);
    return n;
}

int coro_group_destroy(coro_group *g)
{
    if (g == NULL)
        return EINVAL;
    pthread_mutex_lock(&g->lock);
    if (g->alive > 0) {
        pthread_mutex_unlock(&g->lock);
        return EBUSY;
    }
    pthread_mutex_unlock(&g->lock);
    pthread_mutex_destroy(&g->lock);
    free(g);
    return 0;
}
