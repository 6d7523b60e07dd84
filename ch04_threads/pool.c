/*
 * pool.c — the N:M model: many coroutines over a few worker threads.
 *
 *   coro_pool_go ──> pool queue (not-yet-started coroutines, one lock)
 *                       │          │          │
 *                 worker 0    worker 1    worker 2     each: a thread and
 *                 scheduler   scheduler   scheduler    its own scheduler
 *                 (use_caller: the creating thread, inside coro_pool_wait)
 *
 * A worker takes one queued coroutine per turn and starts it on its own
 * scheduler. From then on the coroutine belongs to that worker's thread
 * and never moves. So a worker stuck in a long blocking call takes
 * nothing more, and whatever is queued behind it goes to the others: the
 * work is shared out before it starts, never after.
 *
 * Idle workers sleep in their pump. coro_pool_go() wakes one, using the
 * same store-then-check handshake as the inbox (inbox.c): the worker
 * announces `idle` and then looks at the queue; the producer adds to the
 * queue and then looks for an idle worker. With sequentially consistent
 * atomics on both sides, at least one of them sees the other.
 *
 * Built on the public API, plus two internal calls: a worker's wait in its
 * pump for the next post, without running anything
 * (coro__sched_idle_wait), and the calling thread's identity
 * (coro__thread_id). coro_pool_call() is in pool_call.c.
 */
#define _GNU_SOURCE
#include "coro_impl.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* A worker takes one queued coroutine per turn: taking more at once would
 * tie the others to this worker even if the first one blocks it. */
enum { TAKE_PER_TURN = 1 };

/* Something handed to the pool: a coroutine to start, or a post. */
struct pool_task {
    struct pool_task *next;
    coro_pool *pool;
    coro_fn fn;             /* a coroutine's body... */
    coro_post_fn post_fn;   /* ...or a post's function */
    void *arg;
};

struct pool_worker {
    coro_pool *pool;
    size_t index;
    pthread_t thread;       /* unused for worker 0 with use_caller */
    coro_sched *sched;
    atomic_bool idle;       /* sleeping in coro__sched_idle_wait() */
    bool stop;              /* set on its own thread by stop_request() */
};

struct coro_pool {
    size_t count;
    bool use_caller;
    const void *creator;    /* the creating thread (use_caller) */
    struct pool_worker *workers;

    pthread_mutex_t lock;   /* guards the queue and `all_done` */
    struct pool_task *head, *tail;
    _Atomic size_t queued;  /* tasks in the queue */
    pthread_cond_t all_done;

    _Atomic size_t outstanding; /* handed in, not finished */
    _Atomic size_t next_post;   /* round-robin for coro_pool_post */

    /* Start-up: each worker thread reports its scheduler. */
    pthread_cond_t started_cond;
    size_t started;
    bool start_failed;
};

/* The worker this thread is, if any (EPERM checks). */
static _Thread_local struct pool_worker *this_worker;

/* A post that does nothing: its arrival is what wakes a worker's pump. */
static void wake_up(coro_sched *s, void *arg)
{
    (void)s;
    (void)arg;
}

/* The stop, run on the worker's own thread (as a post, like the looper's):
 * the worker cannot see it, finish and free its scheduler before the post
 * that carries it has been delivered. */
static void stop_request(coro_sched *s, void *arg)
{
    struct pool_worker *w = arg;

    (void)s;
    w->stop = true;
}

/* ── Counting work ────────────────────────────────────────────────────── */

/* One piece of work finished. The last one wakes coro_pool_wait(). */
static void finish_one(coro_pool *p)
{
    if (atomic_fetch_sub(&p->outstanding, 1) != 1)
        return;
    pthread_mutex_lock(&p->lock);
    pthread_cond_broadcast(&p->all_done);
    pthread_mutex_unlock(&p->lock);
    if (p->use_caller)
        coro_post(p->workers[0].sched, wake_up, NULL);
}

static void *task_coroutine(void *arg)
{
    struct pool_task *t = arg;
    coro_pool *p = t->pool;

    t->fn(t->arg);
    free(t);
    finish_one(p);
    return NULL;
}

static void task_post(coro_sched *s, void *arg)
{
    struct pool_task *t = arg;
    coro_pool *p = t->pool;

    t->post_fn(s, t->arg);
    free(t);
    finish_one(p);
}

static struct pool_task *task_new(coro_pool *p, coro_fn fn,
                                  coro_post_fn post_fn, void *arg)
{
    struct pool_task *t = calloc(1, sizeof *t);

    if (t != NULL) {
        t->pool = p;
        t->fn = fn;
        t->post_fn = post_fn;
        t->arg = arg;
    }
    return t;
}

/* ── The queue of not-yet-started coroutines ──────────────────────────── */

static void queue_push(coro_pool *p, struct pool_task *t, bool at_front)
{
    pthread_mutex_lock(&p->lock);
    if (at_front) {
        t->next = p->head;
        p->head = t;
        if (p->tail == NULL)
            p->tail = t;
    } else {
        t->next = NULL;
        if (p->tail != NULL)
            p->tail->next = t;
        else
            p->head = t;
        p->tail = t;
    }
    atomic_fetch_add(&p->queued, 1); /* seq_cst: see the top of the file */
    pthread_mutex_unlock(&p->lock);
}

static struct pool_task *queue_pop(coro_pool *p)
{
    struct pool_task *t;

    if (atomic_load(&p->queued) == 0)
        return NULL;
    pthread_mutex_lock(&p->lock);
    t = p->head;
    if (t != NULL) {
        p->head = t->next;
        if (p->head == NULL)
            p->tail = NULL;
        atomic_fetch_sub(&p->queued, 1);
    }
    pthread_mutex_unlock(&p->lock);
    return t;
}

/* Wake one idle worker, if any, to take what was just queued. */
static void wake_an_idle_worker(coro_pool *p)
{
    for (size_t i = 0; i < p->count; i++) {
        struct pool_worker *w = &p->workers[i];

        if (atomic_load(&w->idle) && atomic_exchange(&w->idle, false)) {
            coro_post(w->sched, wake_up, NULL);
            return;
        }
    }
}

/* Start up to `max` queued coroutines on this worker. */
static size_t take_tasks(struct pool_worker *w, size_t max)
{
    size_t taken = 0;
    struct pool_task *t;

    while (taken < max && (t = queue_pop(w->pool)) != NULL) {
        if (coro_go(w->sched, task_coroutine, t) != 0) {
            queue_push(w->pool, t, true); /* no memory: later, or others */
            break;
        }
        taken++;
    }
    return taken;
}

/* One turn of a worker: take a queued coroutine, run what is ready; with
 * nothing at all to do, sleep until something arrives. `idle` is true
 * only while the worker sleeps, so coro_pool_go() wakes a sleeping worker,
 * never one busy (or blocked) running a coroutine. */
static void worker_turn(struct pool_worker *w)
{
    take_tasks(w, TAKE_PER_TURN);
    if (coro_sched_poll_until(w->sched, 0) > 0) /* run, do not sleep */
        return;
    atomic_store(&w->idle, true);
    if (atomic_load(&w->pool->queued) == 0 && !w->stop)
        coro__sched_idle_wait(w->sched);
    atomic_store(&w->idle, false);
}

/* ── Workers ──────────────────────────────────────────────────────────── */

static void report_started(coro_pool *p, bool ok)
{
    pthread_mutex_lock(&p->lock);
    p->started++;
    if (!ok)
        p->start_failed = true;
    pthread_cond_broadcast(&p->started_cond);
    pthread_mutex_unlock(&p->lock);
}

static void *worker_main(void *arg)
{
    struct pool_worker *w = arg;
    coro_pool *p = w->pool;
    char name[16];

    /* Its name in a debugger, top, and a trace's lanes: pool-0, pool-1...
     * (coro_pool_go_on()'s numbers). */
    snprintf(name, sizeof name, "pool-%zu", w->index);
    pthread_setname_np(pthread_self(), name);
    this_worker = w;
    w->sched = coro_sched_create();
    report_started(p, w->sched != NULL);
    if (w->sched == NULL)
        return NULL;
    while (!w->stop)
        worker_turn(w);
    do
        coro_sched_run(w->sched);
    while (coro_sched_destroy(w->sched) == EBUSY);
    coro_thread_detach();
    return NULL;
}

/* Stop and join worker threads [first, last). */
static void stop_workers(coro_pool *p, size_t first, size_t last)
{
    const struct timespec a_moment = {0, 1000 * 1000};

    for (size_t i = first; i < last; i++) {
        struct pool_worker *w = &p->workers[i];

        /* Without memory for the post, try again: a stop must not be lost. */
        while (w->sched != NULL && coro_post(w->sched, stop_request, w) == ENOMEM)
            nanosleep(&a_moment, NULL);
    }
    for (size_t i = first; i < last; i++)
        pthread_join(p->workers[i].thread, NULL);
}

static void pool_free(coro_pool *p)
{
    pthread_cond_destroy(&p->started_cond);
    pthread_cond_destroy(&p->all_done);
    pthread_mutex_destroy(&p->lock);
    free(p->workers);
    free(p);
}

/* Start the worker threads; returns how many started, all or not. */
static size_t start_threads(coro_pool *p, size_t first)
{
    size_t i;

    for (i = first; i < p->count; i++)
        if (pthread_create(&p->workers[i].thread, NULL, worker_main,
                           &p->workers[i]) != 0)
            break;
    pthread_mutex_lock(&p->lock);
    while (p->started < i - first)
        pthread_cond_wait(&p->started_cond, &p->lock);
    pthread_mutex_unlock(&p->lock);
    return i;
}

coro_pool *coro_pool_create(size_t workers, bool use_caller)
{
    coro_pool *p;
    size_t first = use_caller ? 1 : 0, started;

    if (workers == 0) {
        errno = EINVAL;
        return NULL;
    }
    p = calloc(1, sizeof *p);
    if (p == NULL || (p->workers = calloc(workers, sizeof *p->workers)) == NULL) {
        free(p);
        errno = ENOMEM;
        return NULL;
    }
    p->count = workers;
    p->use_caller = use_caller;
    p->creator = coro__thread_id();
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->all_done, NULL);
    pthread_cond_init(&p->started_cond, NULL);
    for (size_t i = 0; i < workers; i++) {
        p->workers[i].pool = p;
        p->workers[i].index = i;
    }
    if (use_caller && (p->workers[0].sched = coro_sched_create()) == NULL) {
        pool_free(p);
        errno = ENOMEM;
        return NULL;
    }
    started = start_threads(p, first);
    if (started < workers || p->start_failed) {
        int err = p->start_failed ? ENOMEM : EAGAIN;

        stop_workers(p, first, started);
        if (use_caller)
            coro_sched_destroy(p->workers[0].sched);
        pool_free(p);
        errno = err;
        return NULL;
    }
    return p;
}

/* ── Handing work to the pool ─────────────────────────────────────────── */

int coro_pool_go(coro_pool *p, coro_fn fn, void *arg)
{
    struct pool_task *t;

    if (p == NULL || fn == NULL)
        return EINVAL;
    t = task_new(p, fn, NULL, arg);
    if (t == NULL)
        return ENOMEM;
    atomic_fetch_add(&p->outstanding, 1);
    queue_push(p, t, false);
    wake_an_idle_worker(p);
    return 0;
}

int coro_pool_go_on(coro_pool *p, size_t worker, coro_fn fn, void *arg)
{
    struct pool_task *t;
    int err;

    if (p == NULL || fn == NULL || worker >= p->count)
        return EINVAL;
    t = task_new(p, fn, NULL, arg);
    if (t == NULL)
        return ENOMEM;
    atomic_fetch_add(&p->outstanding, 1);
    err = coro_go(p->workers[worker].sched, task_coroutine, t);
    if (err != 0) {
        free(t);
        finish_one(p);
    }
    return err;
}

int coro_pool_post(coro_pool *p, coro_post_fn fn, void *arg)
{
    struct pool_task *t;
    size_t worker;
    int err;

    if (p == NULL || fn == NULL)
        return EINVAL;
    t = task_new(p, NULL, fn, arg);
    if (t == NULL)
        return ENOMEM;
    /* Round-robin; with use_caller, worker 0 only runs inside
     * coro_pool_wait(), so posts go to the others when there are any. */
    worker = atomic_fetch_add(&p->next_post, 1) % p->count;
    if (p->use_caller && p->count > 1 && worker == 0)
        worker = 1;
    atomic_fetch_add(&p->outstanding, 1);
    err = coro_post(p->workers[worker].sched, task_post, t);
    if (err != 0) {
        free(t);
        finish_one(p);
    }
    return err;
}

/* ── Waiting and destroying ───────────────────────────────────────────── */

/* Whether the calling thread may wait for or destroy `p`. */
static bool may_wait(const coro_pool *p)
{
    if (this_worker != NULL && this_worker->pool == p)
        return false; /* a worker would wait for itself */
    if (p->use_caller && (p->creator != coro__thread_id() ||
                          coro_sched_self() == p->workers[0].sched))
        return false;
    return true;
}

int coro_pool_wait(coro_pool *p)
{
    if (p == NULL)
        return EINVAL;
    if (!may_wait(p))
        return EPERM;
    if (p->use_caller) {
        /* Work as worker 0 until everything handed in has finished. */
        while (atomic_load(&p->outstanding) > 0)
            worker_turn(&p->workers[0]);
        return 0;
    }
    pthread_mutex_lock(&p->lock);
    while (atomic_load(&p->outstanding) > 0)
        pthread_cond_wait(&p->all_done, &p->lock);
    pthread_mutex_unlock(&p->lock);
    return 0;
}

int coro_pool_destroy(coro_pool *p)
{
    if (p == NULL)
        return EINVAL;
    if (!may_wait(p))
        return EPERM;
    if (atomic_load(&p->outstanding) > 0)
        return EBUSY;
    stop_workers(p, p->use_caller ? 1 : 0, p->count);
    if (p->use_caller) {
        do
            coro_sched_run(p->workers[0].sched);
        while (coro_sched_destroy(p->workers[0].sched) == EBUSY);
    }
    pool_free(p);
    return 0;
}
