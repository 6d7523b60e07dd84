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
 *
 * Other threads (this stage) never touch any of this. They push requests
 * onto the scheduler's inbox (inbox.c) — a coroutine to start, a post, a
 * parked coroutine to make ready — and the pump moves them in with
 * drain_inbox() at the top of every turn. The few fields other threads do
 * read or write are atomics, marked "shared" below.
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

/* Run posts kept for reuse, at most. */
enum { SPARE_POSTS_MAX = 1024 };

/* One priority's FIFO of ready entries. */
struct ready_level {
    int priority;
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

    /* Counts. alive_local is written by the owner only (no atomic
     * read-modify-write on the pump's path); coroutines created on other
     * threads count in `arriving` until the pump takes them in. */
    _Atomic size_t alive_local; /* shared: started here, not finished */
    _Atomic size_t arriving;    /* shared: sent by other threads */
    size_t handles;             /* joinable coroutines not yet destroyed */
    _Atomic size_t posts_pending; /* shared: accepted posts not yet run */
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

    /* Stacks: finished coroutines (struct and stack) kept for reuse. */
    _Atomic size_t stack_size;  /* shared: read by other threads' coro_go */
    coro *cache;
    size_t cached;
    /* Shared: non-NULL once dense stacks are on; other threads' coro_go
     * carves from it. Set once by the owner and never replaced or freed
     * before the scheduler is: coro_sched_set_stack_size() resizes it in
     * place. */
    _Atomic(coro_dense *) dense;
};

/* Coroutines alive: created (here or elsewhere) and not finished.
 *
 * A coroutine sent by another thread moves from `arriving` to
 * `alive_local` in take_in(): alive_local += 1, then arriving -= 1 with
 * release. Reading arriving first, with acquire, means: if we see the
 * decrement, we also see the increment before it. So the sum may count
 * the coroutine twice, never zero times. */
static size_t alive_count(const coro_sched *s)
{
    size_t arriving = atomic_load_explicit(&s->arriving, memory_order_acquire);

    return arriving +
           atomic_load_explicit(&s->alive_local, memory_order_relaxed);
}

/* Owner only: add `delta` (+1 or -1) to alive_local without an atomic
 * read-modify-write (nobody else writes it). */
static void alive_add(coro_sched *s, int delta)
{
    size_t now = atomic_load_explicit(&s->alive_local, memory_order_relaxed);

    atomic_store_explicit(&s->alive_local, now + (size_t)(ptrdiff_t)delta,
                          memory_order_relaxed);
}

static size_t posts_pending(const coro_sched *s)
{
    return atomic_load_explicit(&s->posts_pending, memory_order_relaxed);
}

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

/* The dense object, read on the owner's thread. relaxed: only the owner
 * ever writes `dense`, so it always sees its own last write. */
static coro_dense *owner_dense(const coro_sched *s)
{
    return atomic_load_explicit(&s->dense, memory_order_relaxed);
}

/* A new coroutine with a stack of its own: dense or guarded. */
static coro *shell_new(coro_sched *s)
{
    coro *c = calloc(1, sizeof *c);
    /* acquire: pairs with the release in coro_sched_use_dense_stacks(),
     * so a dense object we see is fully built. A coro_go racing with that
     * call may still see NULL and map a guarded stack: harmless, such a
     * coroutine is cached and freed like any other. */
    coro_dense *dense = atomic_load_explicit(&s->dense, memory_order_acquire);
    int err;

    if (c == NULL)
        return NULL;
    err = dense != NULL ? coro__dense_carve(dense, c)
                        : coro__stack_map(c, atomic_load(&s->stack_size));
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
    if (owner_dense(s) == NULL &&
        (s->cached >= STACK_CACHE_MAX ||
                             c->stack_size != atomic_load(&s->stack_size))) {
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
    return 0;
}

static bool on_owner_thread(const coro_sched *s)
{
    return s->owner == coro__thread_id();
}

/* Room for one more queued entry (and timer): the invariant. */
static int reserve_one_more(coro_sched *s)
{
    size_t alive = alive_count(s);

    if (levels_reserve(s, alive + posts_pending(s) + 1) != 0 ||
        coro__timers_reserve(&s->timers, alive + 1) != 0)
        return ENOMEM;
    return 0;
}

/* Fill in what a coroutine of `s` needs besides coro__prepare(). */
static void init_scheduled(coro_sched *s, coro *c, bool detached)
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
}

/* Another thread's coro_go/coro_spawn: build the coroutine here, with a
 * stack of its own (the cache is the owner's), and send it over. */
static int start_remote(coro_sched *s, coro_fn fn, void *arg, bool detached,
                        coro **out)
{
    coro *c = shell_new(s);

    if (c == NULL)
        return ENOMEM;
    coro__prepare(c, fn, arg, false);
    init_scheduled(s, c, detached);
    c->remote.kind = CORO_REMOTE_START;
    atomic_fetch_add_explicit(&s->arriving, 1, memory_order_relaxed);
    *out = c;
    coro__inbox_push(&s->inbox, &c->remote); /* c is the owner's now */
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
    if (!on_owner_thread(s))
        return start_remote(s, fn, arg, detached, out);
    if (reserve_one_more(s) != 0)
        return ENOMEM;
    c = shell_get(s, &reused);
    if (c == NULL)
        return ENOMEM;
    coro__prepare(c, fn, arg, reused);
    init_scheduled(s, c, detached);
    alive_add(s, +1);
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

/* Count one more pending post if the limit allows it. Any thread: the
 * count is one atomic, so the limit holds across threads. A CAS, not an
 * add-then-undo: the count must never move up and back down without a
 * request behind it, or a pump that saw it up would wait for a post that
 * never comes. */
static bool post_admit(coro_sched *s)
{
    size_t before = atomic_load_explicit(&s->posts_pending,
                                         memory_order_relaxed);

    do {
        if (before >= s->max_posts) {
            atomic_fetch_add_explicit(&s->posts_rejected, 1,
                                      memory_order_relaxed);
            return false;
        }
    } while (!atomic_compare_exchange_weak_explicit(
        &s->posts_pending, &before, before + 1, memory_order_relaxed,
        memory_order_relaxed));
    return true;
}

static void post_unadmit(coro_sched *s)
{
    atomic_fetch_sub_explicit(&s->posts_pending, 1, memory_order_relaxed);
}

/*
 * Nodes for posts from other threads. A post from another thread is
 * allocated on the producer's thread and run on the pump's; with malloc()
 * and free() every post would be a free() of another thread's memory,
 * which the allocator handles slowly (its per-thread caches do not help).
 * So nodes travel back instead:
 *
 *   producer: node = its thread's cache, else take the scheduler's whole
 *             `returned` stack into its cache (one exchange), else malloc
 *   pump:     after running the post, push its node onto `returned`
 *
 * `returned` sees only single pushes and take-everything exchanges, never
 * a pop of one node, so the lock-free stack has no ABA problem (the same
 * reasoning as the inbox). Nodes are all alike: a cache may feed posts to
 * any scheduler. A thread's cache is freed when the thread exits or calls
 * coro_thread_detach().
 */
static _Thread_local struct post *post_cache;
static pthread_once_t post_cache_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t post_cache_key;

static void post_cache_free(void *unused)
{
    (void)unused;
    while (post_cache != NULL) {
        struct post *p = post_cache;
        post_cache = p->next_free;
        free(p);
    }
}

static void post_cache_key_create(void)
{
    (void)pthread_key_create(&post_cache_key, post_cache_free);
}

void coro__post_cache_release(void)
{
    post_cache_free(NULL);
}

static struct post *post_node_get(coro_sched *s)
{
    struct post *p = post_cache;

    if (p == NULL) {
        /* acquire: the pump's last writes to these nodes come first. */
        p = atomic_exchange_explicit(&s->returned, NULL, memory_order_acquire);
        if (p == NULL)
            return malloc(sizeof *p);
        pthread_once(&post_cache_key_once, post_cache_key_create);
        pthread_setspecific(post_cache_key, &post_cache); /* freed at exit */
    }
    post_cache = p->next_free;
    return p;
}

static void post_node_put(struct post *p)
{
    p->next_free = post_cache;
    post_cache = p;
}

/* The pump, done with another thread's post: its node goes back. */
static void post_node_return(coro_sched *s, struct post *p)
{
    struct post *head = atomic_load_explicit(&s->returned,
                                             memory_order_relaxed);

    do {
        p->next_free = head;
    } while (!atomic_compare_exchange_weak_explicit(
        &s->returned, &head, p, memory_order_release, memory_order_relaxed));
}

/* A post from another thread: its node is taken before it is counted, so
 * that once counted it always reaches the owner. */
static int post_remote(coro_sched *s, coro_post_fn fn, void *arg)
{
    struct post *p = post_node_get(s);

    if (p == NULL)
        return ENOMEM;
    if (!post_admit(s)) {
        post_node_put(p);
        return EAGAIN;
    }
    p->from_other_thread = true;
    p->ready.coroutine = NULL;
    p->fn = fn;
    p->arg = arg;
    p->remote.kind = CORO_REMOTE_POST;
    coro__inbox_push(&s->inbox, &p->remote);
    return 0;
}

int coro_post(coro_sched *s, coro_post_fn fn, void *arg)
{
    int err = check_caller(s, (const void *)fn);
    struct post *p;

    if (err != 0)
        return err;
    if (!on_owner_thread(s))
        return post_remote(s, fn, arg);
    if (!post_admit(s))
        return EAGAIN;
    if (levels_reserve(s, alive_count(s) + posts_pending(s)) != 0)
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
    ready_push(s, &p->ready, 0);
    return 0;
no_memory:
    post_unadmit(s);
    return ENOMEM;
}

/* ── Requests from other threads ──────────────────────────────────────── */

static coro *remote_coroutine(coro_remote *r)
{
    return (coro *)((char *)r - offsetof(coro, remote));
}

static struct post *remote_post(coro_remote *r)
{
    return (struct post *)((char *)r - offsetof(struct post, remote));
}

/* Take one request in. Returns false if memory for it is lacking (the
 * caller keeps it for later). */
static bool take_in(coro_sched *s, coro_remote *r)
{
    coro *c;

    switch (r->kind) {
    case CORO_REMOTE_START:
        if (reserve_one_more(s) != 0)
            return false;
        c = remote_coroutine(r);
        alive_add(s, +1); /* counted here before it leaves `arriving` */
        atomic_fetch_sub_explicit(&s->arriving, 1, memory_order_release);
        if (!c->detached)
            s->handles++;
        queue_coroutine(s, c);
        return true;
    case CORO_REMOTE_READY:
        coro__make_ready(remote_coroutine(r), 0);
        return true;
    case CORO_REMOTE_POST:
        if (levels_reserve(s, alive_count(s) + posts_pending(s)) != 0)
            return false;
        ready_push(s, &remote_post(r)->ready, 0);
        return true;
    }
    abort(); /* no other kind exists */
}

/* Move every request from the inbox (after any backlog) into the ready
 * queue, oldest first. */
static void drain_inbox(coro_sched *s)
{
    coro_remote *list, *tail;

    if (s->backlog == NULL && coro__inbox_empty(&s->inbox))
        return; /* the common case: one atomic load */
    list = coro__inbox_take(&s->inbox);
    if (s->backlog != NULL) {
        for (tail = s->backlog; tail->next != NULL; tail = tail->next)
            continue;
        tail->next = list;
        list = s->backlog;
    }
    while (list != NULL) {
        coro_remote *next = list->next;

        if (!take_in(s, list))
            break; /* out of memory: keep the rest for the next turn */
        list = next;
    }
    s->backlog = list;
}

void coro__deliver_ready(coro *c)
{
    if (coro__on_owner_thread(c)) {
        coro__make_ready(c, 0);
        return;
    }
    c->remote.kind = CORO_REMOTE_READY;
    coro__inbox_push(&c->sched->inbox, &c->remote);
}

bool coro__on_owner_thread(const coro *c)
{
    return c->owner == coro__thread_id();
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

/* A timer fired for `c`. Does the timeout end the wait, or did a wake (or
 * an event set) from another thread end it first? */
static bool timeout_wins(coro *c)
{
    int parked = CORO_PARK_PARKED;

    switch (c->waiting) {
    case CORO_WAIT_PARK:
        return atomic_compare_exchange_strong_explicit(
            &c->park_word, &parked, CORO_PARK_EMPTY, memory_order_acq_rel,
            memory_order_acquire);
    case CORO_WAIT_EVENT:
        return coro__event_timeout(c);
    default:
        return true; /* only time ends a sleep */
    }
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

            c->deadline = CORO_FOREVER; /* its timer is gone already */
            if (timeout_wins(c))
                coro__make_ready(c, c->waiting == CORO_WAIT_SLEEP
                                        ? 0 : ETIMEDOUT);
            /* else a wake or a set won the race: its request is on the
             * way */
        }
    } while (n == FIRE_BATCH);
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
    alive_add(s, -1);
    /* release: a wake from another thread that sees `finished` sees the
     * coroutine's last writes too. */
    atomic_store_explicit(&c->finished, true, memory_order_release);
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

    if (p->from_other_thread) {
        post_node_return(s, p); /* back to the producers */
    } else if (s->spare_count < SPARE_POSTS_MAX) {
        p->next_free = s->spare_posts;
        s->spare_posts = p;
        s->spare_count++;
    } else {
        free(p);
    }
    post_unadmit(s);
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

    coro__overflow_prepare_thread(); /* coroutines run on this thread */
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

/* Whether anything is left to do: coroutines alive or posts pending. */
static bool work_remains(const coro_sched *s)
{
    return alive_count(s) > 0 || posts_pending(s) > 0;
}

/*
 * The loop behind coro_sched_run() and coro_sched_run_until(): run until
 * nothing is alive and no post is pending, sleeping the thread while
 * nothing is ready. Every alive coroutine is queued, waiting, or on its
 * way through the inbox; when the queue is empty the pump sleeps until the
 * next timer, the deadline, or a push to its inbox — another thread may
 * still wake a parked coroutine, so there is no EDEADLK any more.
 */
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

static int pump_until(coro_sched *s, uint64_t deadline, bool until_deadline)
{
    while (work_remains(s)) {
        drain_inbox(s);
        fire_due_timers(s);
        /* Checked on every turn, not only when idle: coroutines that keep
         * yielding must not keep run_until past its deadline. */
        if (until_deadline && deadline <= coro_now())
            return ETIMEDOUT;
        if (run_one(s))
            continue;
        coro__inbox_wait(&s->inbox, idle_until(s, deadline));
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
    drain_inbox(s);
    fire_due_timers(s);
    ran = run_one(s);
    pump_leave(s, outer);
    return ran;
}

/* Run the entries that are ready now (not those they make ready). */
static size_t run_ready(coro_sched *s)
{
    size_t batch, ran = 0;

    drain_inbox(s);
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
        uint64_t wake_at = idle_until(s, deadline);

        if (wake_at > coro_now())
            coro__inbox_wait(&s->inbox, wake_at);
        ran = run_ready(s);
    }
    pump_leave(s, outer);
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
    return s;
}

coro_sched *coro_sched_create(void)
{
    return coro_sched_create_limit(SIZE_MAX);
}

size_t coro_sched_alive(const coro_sched *s)
{
    return s ? alive_count(s) : 0;
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
    coro_dense *dense;

    if (s == NULL || usable == 0)
        return EINVAL;
    if (s->owner != coro__thread_id())
        return EPERM;
    dense = owner_dense(s);
    if (dense != NULL) {
        /* In place, under the dense object's lock: another thread's
         * coro_go may be carving from it right now, so it is never
         * replaced (and dense mode stays on whatever happens here). */
        int err = coro__dense_resize(dense, usable);
        if (err != 0)
            return err;
    }
    atomic_store(&s->stack_size, usable);
    cache_flush(s);
    return 0;
}

int coro_sched_use_dense_stacks(coro_sched *s)
{
    coro_dense *dense;

    if (s == NULL)
        return EINVAL;
    if (s->owner != coro__thread_id())
        return EPERM;
    if (owner_dense(s) != NULL)
        return 0;
    if (alive_count(s) > 0 || s->handles > 0)
        return EBUSY; /* guarded stacks in use */
    cache_flush(s);
    dense = coro__dense_create(atomic_load(&s->stack_size));
    if (dense == NULL)
        return ENOMEM;
    /* release: the object is complete before another thread's coro_go
     * can see it (the acquire in shell_new()). */
    atomic_store_explicit(&s->dense, dense, memory_order_release);
    return 0;
}

int coro_sched_destroy(coro_sched *s)
{
    if (s == NULL)
        return EINVAL;
    if (s->owner != coro__thread_id())
        return EPERM;
    if (s->pumping || work_remains(s) || s->handles > 0)
        return EBUSY;

    cache_flush(s);
    coro__timers_free(&s->timers);
    if (owner_dense(s) != NULL)
        coro__dense_destroy(owner_dense(s));
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
    for (struct post *p = atomic_load(&s->returned), *next; p; p = next) {
        next = p->next_free;
        free(p);
    }
    coro__inbox_fini(&s->inbox); /* a late producer may still touch its
                                    wake cell: cells are never freed */
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
