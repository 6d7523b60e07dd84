/*
 * sched.c — the scheduler: a ready queue, a pump, and a cache of stacks.
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
 * The queue is a list of levels, one per priority that has entries, sorted
 * highest first; each level is a FIFO of entries. Pushing walks the levels
 * (O(number of distinct priorities queued), O(1) in the usual case of one
 * priority); popping takes the front of the first level (O(1)).
 *
 * Invariant (no allocation on the pump's path): a push may need a new level
 * object, and requeueing a coroutine that yielded must never fail. So the
 * scheduler owns at least as many level objects as entries that can be
 * queued at once (alive coroutines + pending posts): each coro_go(),
 * coro_spawn() and coro_post() reserves one before it is accepted. The
 * timer heap keeps room for one timer per alive coroutine for the same
 * reason: coro_sleep() cannot fail for lack of memory.
 *
 * Waiting coroutines are in neither structure's queue but the timers':
 *
 *   ready queue ──pump──> running ──yield──> ready queue
 *                            │
 *                            └──sleep/park/await──> waiting (+ a timer)
 *                                                      │
 *          ready queue <──timer fires / wake / set─────┘
 */
#define _GNU_SOURCE
#include "coro_impl.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* Finished guarded stacks kept for reuse, at most (64 MiB of address
 * space at the default size). Dense stacks are always kept. */
enum { STACK_CACHE_MAX = 1024 };

/* One priority's FIFO of ready entries. */
struct ready_level {
    int priority;
    coro_ready *head, *tail;
    struct ready_level *lower; /* the next level: a strictly lower priority */
};

/* A queued function. */
struct post {
    coro_ready ready; /* ready.coroutine == NULL */
    coro_post_fn fn;
    void *arg;
    struct post *next_free;
};

struct coro_sched {
    const void *owner;          /* the owning thread (coro__thread_id()) */
    bool pumping;               /* run or step is on the stack */
    coro *pump_caller;          /* coro_self() where the pump was entered */

    /* The ready queue (see the invariant at the top of this file). */
    struct ready_level *levels; /* levels with entries, highest first */
    struct ready_level *spare_levels;
    size_t levels_owned;        /* in use + spare */
    size_t ready_count;         /* entries in the ready queue */
    coro_timers timers;         /* waiting coroutines with a deadline */

    size_t alive;               /* coroutines created, not yet finished */
    size_t handles;             /* joinable coroutines not yet destroyed */
    size_t posts_pending;       /* accepted posts not yet run */
    size_t max_posts;           /* SIZE_MAX: unlimited */
    size_t posts_rejected;      /* coro_post() calls refused with EAGAIN */
    struct post *spare_posts;

    /* Stacks: finished coroutines (struct and stack) kept for reuse. */
    size_t stack_size;
    coro *cache;
    size_t cached;
    coro_dense *dense;          /* non-NULL: dense stacks are on */
};

/* The scheduler whose pump is running on this thread (innermost). */
static _Thread_local coro_sched *pumping_now;

/* ── The ready queue ──────────────────────────────────────────────────── */

/* Make sure the scheduler owns `needed` level objects (the invariant). */
static int levels_reserve(coro_sched *s, size_t needed)
{
    while (s->levels_owned < needed) {
        struct ready_level *level = malloc(sizeof *level);

        if (level == NULL)
            return ENOMEM;
        level->lower = s->spare_levels;
        s->spare_levels = level;
        s->levels_owned++;
    }
    return 0;
}

/* Queue an entry behind every entry of the same or higher priority. */
static void ready_push(coro_sched *s, coro_ready *entry, int priority)
{
    struct ready_level **link = &s->levels;
    struct ready_level *level;

    while (*link != NULL && (*link)->priority > priority)
        link = &(*link)->lower;
    level = *link;
    if (level == NULL || level->priority != priority) {
        level = s->spare_levels; /* never NULL: see the invariant */
        if (level == NULL)
            abort();
        s->spare_levels = level->lower;
        level->priority = priority;
        level->head = level->tail = NULL;
        level->lower = *link;
        *link = level;
    }
    entry->next = NULL;
    if (level->tail != NULL)
        level->tail->next = entry;
    else
        level->head = entry;
    level->tail = entry;
    s->ready_count++;
}

/* Take the front entry, or NULL if nothing is ready. */
static coro_ready *ready_pop(coro_sched *s)
{
    struct ready_level *level = s->levels;
    coro_ready *entry;

    if (level == NULL)
        return NULL;
    entry = level->head;
    level->head = entry->next;
    s->ready_count--;
    if (level->head == NULL) {
        s->levels = level->lower;
        level->lower = s->spare_levels;
        s->spare_levels = level;
    }
    return entry;
}

static void queue_coroutine(coro_sched *s, coro *c)
{
    c->queued = true;
    ready_push(s, &c->ready, c->priority);
}

/* ── Stacks: the cache ────────────────────────────────────────────────── */

/* Free a cached coroutine for good. */
static void shell_free(coro *c)
{
    coro__stack_destroyed(c);
    if (c->map != NULL)
        coro__stack_unmap(c);
    free(c);
}

/* A new coroutine with a stack of its own: dense or guarded. */
static coro *shell_new(coro_sched *s)
{
    coro *c = calloc(1, sizeof *c);
    int err;

    if (c == NULL)
        return NULL;
    err = s->dense ? coro__dense_carve(s->dense, c)
                   : coro__stack_map(c, s->stack_size);
    if (err != 0) {
        free(c);
        return NULL;
    }
    coro__stack_created(c);
    return c;
}

/* A coroutine with a stack: from the cache, or new. */
static coro *shell_get(coro_sched *s, bool *reused)
{
    coro *c = s->cache;

    if (c != NULL) {
        s->cache = c->next_free;
        s->cached--;
        *reused = true;
        return c;
    }
    *reused = false;
    return shell_new(s);
}

/* A finished coroutine goes back to the cache (or, past its limit, away). */
static void shell_put(coro_sched *s, coro *c)
{
    if (s->dense == NULL &&
        (s->cached >= STACK_CACHE_MAX || c->stack_size != s->stack_size)) {
        shell_free(c);
        return;
    }
    c->next_free = s->cache;
    s->cache = c;
    s->cached++;
}

/* Release every cached guarded stack (its size changed, or destroy). */
static void cache_flush(coro_sched *s)
{
    while (s->cache != NULL) {
        coro *c = s->cache;
        s->cache = c->next_free;
        shell_free(c);
    }
    s->cached = 0;
}

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
    if (levels_reserve(s, s->alive + s->posts_pending + 1) != 0 ||
        coro__timers_reserve(&s->timers, s->alive + 1) != 0)
        return ENOMEM;
    c = shell_get(s, &reused);
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
    queue_coroutine(s, c);
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
    if (levels_reserve(s, s->alive + s->posts_pending + 1) != 0)
        return ENOMEM;
    p = s->spare_posts;
    if (p != NULL)
        s->spare_posts = p->next_free;
    else if ((p = malloc(sizeof *p)) == NULL)
        return ENOMEM;
    p->ready.coroutine = NULL;
    p->fn = fn;
    p->arg = arg;
    s->posts_pending++;
    ready_push(s, &p->ready, 0);
    return 0;
}

/* ── Waiting ──────────────────────────────────────────────────────────── */

int coro__wait(coro *self, coro_wait why, uint64_t deadline)
{
    self->waiting = why;
    self->wait_result = 0;
    self->deadline = deadline;
    if (deadline != CORO_FOREVER)
        coro__timers_add(&self->sched->timers, self, deadline);
    coro_yield(); /* to the pump, which does not requeue a waiting one */
    return self->wait_result;
}

void coro__make_ready(coro *c, int result)
{
    coro_sched *s = c->sched;

    if (c->deadline != CORO_FOREVER)
        coro__timers_remove(&s->timers, c);
    c->waiting = CORO_WAIT_NONE;
    c->wait_result = result;
    queue_coroutine(s, c);
}

/* How many due timers fire_due_timers() takes from the heap at a time. */
enum { FIRE_BATCH = 16 };

/* Move every coroutine whose deadline has come to the ready queue, in
 * deadline order. A sleep ends normally; a park or event wait times out.
 * Due timers come off the heap in batches: the heap starts loading each
 * coroutine as it hands it over (a cache miss, with many), so the loads of
 * a batch overlap instead of each stalling the loop in turn. */
static void fire_due_timers(coro_sched *s)
{
    coro *due[FIRE_BATCH];
    size_t n;
    uint64_t now;

    if (s->timers.count == 0)
        return; /* no clock read when nobody waits on time */
    now = coro_now();
    do {
        n = coro__timers_pop_due(&s->timers, now, due, FIRE_BATCH);
        for (size_t i = 0; i < n; i++) {
            coro *c = due[i];
            int result = c->waiting == CORO_WAIT_SLEEP ? 0 : ETIMEDOUT;

            if (c->waiting == CORO_WAIT_EVENT)
                coro__event_unlink(c);
            c->deadline = CORO_FOREVER; /* its timer is gone already */
            coro__make_ready(c, result);
        }
    } while (n == FIRE_BATCH);
}

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

/* ── The pump ─────────────────────────────────────────────────────────── */

/* Resume one coroutine; afterwards, requeue it, leave it waiting, or
 * retire it. */
static void run_coroutine(coro_sched *s, coro *c)
{
    c->queued = false;
    coro__resume(c);
    if (c->state != CORO_DONE) {
        if (c->waiting == CORO_WAIT_NONE)
            queue_coroutine(s, c); /* it yielded: behind everything ready */
        return;
    }
    s->alive--;
    if (c->detached)
        shell_put(s, c);
    /* A joinable one waits for coro_destroy(). */
}

/* Run one post. Its entry is recycled before the call, so the post may
 * post again even under a limit of one. */
static void run_post(coro_sched *s, struct post *p)
{
    coro_post_fn fn = p->fn;
    void *arg = p->arg;

    p->next_free = s->spare_posts;
    s->spare_posts = p;
    s->posts_pending--;
    fn(s, arg);
}

/* Run the front entry, if any. The caller holds the pump (s->pumping). */
static bool run_one(coro_sched *s)
{
    coro_ready *entry = ready_pop(s);

    if (entry == NULL)
        return false;
    if (entry->coroutine != NULL)
        run_coroutine(s, entry->coroutine);
    else
        run_post(s, (struct post *)entry);
    return true;
}

/* Whether this thread may drive `s` now: it owns it and is not already
 * inside its pump. */
static bool may_pump(const coro_sched *s)
{
    return s->owner == coro__thread_id() && !s->pumping;
}

static coro_sched *pump_enter(coro_sched *s)
{
    coro_sched *outer = pumping_now;

    s->pumping = true;
    s->pump_caller = coro_self();
    pumping_now = s;
    return outer;
}

static void pump_leave(coro_sched *s, coro_sched *outer)
{
    s->pumping = false;
    pumping_now = outer;
}

/*
 * The loop behind coro_sched_run() and coro_sched_run_until(): run until
 * nothing is alive and no post is pending, sleeping the thread while
 * nothing is ready. Every alive coroutine is queued or waiting, so when the
 * queue is empty either a timer will fire, or nothing can ever wake them:
 * that is EDEADLK for run, and a wait for the deadline for run_until.
 */
static int pump_until(coro_sched *s, uint64_t deadline, bool until_deadline)
{
    while (s->alive > 0 || s->posts_pending > 0) {
        uint64_t wake_at;

        fire_due_timers(s);
        /* Checked on every turn, not only when idle: coroutines that keep
         * yielding must not keep run_until past its deadline. */
        if (until_deadline && deadline <= coro_now())
            return ETIMEDOUT;
        if (run_one(s))
            continue;
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
    if (!may_pump(s))
        return EPERM;
    outer = pump_enter(s);
    result = pump_until(s, deadline, until_deadline);
    pump_leave(s, outer);
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

    if (s == NULL || !may_pump(s))
        return false;
    outer = pump_enter(s);
    fire_due_timers(s);
    ran = run_one(s);
    pump_leave(s, outer);
    return ran;
}

/* Run the entries that are ready now (not those they make ready). */
static size_t run_ready(coro_sched *s)
{
    size_t batch, ran = 0;

    fire_due_timers(s);
    batch = s->ready_count;
    while (ran < batch && run_one(s))
        ran++;
    return ran;
}

size_t coro_sched_poll_until(coro_sched *s, uint64_t deadline)
{
    coro_sched *outer;
    size_t ran;

    if (s == NULL || !may_pump(s))
        return 0;
    outer = pump_enter(s);
    ran = run_ready(s);
    if (ran == 0) {
        uint64_t wake_at = coro__timers_next(&s->timers);

        if (deadline < wake_at)
            wake_at = deadline;
        if (wake_at > coro_now())
            sleep_until(wake_at);
        ran = run_ready(s);
    }
    pump_leave(s, outer);
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

int coro_sched_set_stack_size(coro_sched *s, size_t stack_size)
{
    size_t usable = coro__usable_stack_size(stack_size);

    if (s == NULL || usable == 0)
        return EINVAL;
    if (s->owner != coro__thread_id())
        return EPERM;
    if (s->dense != NULL) {
        /* In place: the dense object is never replaced, so dense mode
         * stays on whatever happens here. */
        int err = coro__dense_resize(s->dense, usable);
        if (err != 0)
            return err;
    }
    s->stack_size = usable;
    cache_flush(s);
    return 0;
}

int coro_sched_use_dense_stacks(coro_sched *s)
{
    if (s == NULL)
        return EINVAL;
    if (s->owner != coro__thread_id())
        return EPERM;
    if (s->dense != NULL)
        return 0;
    if (s->alive > 0 || s->handles > 0)
        return EBUSY; /* guarded stacks in use */
    cache_flush(s);
    s->dense = coro__dense_create(s->stack_size);
    return s->dense != NULL ? 0 : ENOMEM;
}

int coro_sched_destroy(coro_sched *s)
{
    if (s == NULL)
        return EINVAL;
    if (s->owner != coro__thread_id())
        return EPERM;
    if (s->pumping || s->alive > 0 || s->posts_pending > 0 || s->handles > 0)
        return EBUSY;

    cache_flush(s);
    coro__timers_free(&s->timers);
    if (s->dense != NULL)
        coro__dense_destroy(s->dense);
    while (s->spare_levels != NULL) {
        struct ready_level *level = s->spare_levels;
        s->spare_levels = level->lower;
        free(level);
    }
    while (s->spare_posts != NULL) {
        struct post *p = s->spare_posts;
        s->spare_posts = p->next_free;
        free(p);
    }
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
    shell_put(s, c);
    return 0;
}

int coro_set_priority(coro *c, int priority)
{
    if (c == NULL)
        return EINVAL;
    if (c->owner != coro__thread_id())
        return EPERM;
    if (c->state == CORO_DONE)
        return EINVAL;
    c->priority = priority;
    return 0;
}

int coro_priority(const coro *c)
{
    return c ? c->priority : 0;
}
