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
 *
 * Stopping (this stage). Every coroutine of the scheduler that is alive, or
 * done but not yet destroyed, is on the `members` list, so closing can
 * cancel them all and a shutdown can abandon the rest:
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

    /* Stopping. */
    atomic_bool closed;         /* shared: no new work (ESHUTDOWN) */
    atomic_bool close_sent;     /* shared: close_remote was pushed (once) */
    coro_remote close_remote;   /* another thread's (or a signal's) close */
    coro *members;              /* alive, or done and not destroyed */
    size_t owed;                /* requests still owed to finished ones */
    bool abandoning;            /* shutdown's grace is over */
    bool shut_down;             /* shutdown done: destroy frees handles */
    size_t abandoned;           /* coroutines abandoned, ever */

    /* Statistics, in ticks of coro__ticks(); owner only. A resume is
     * timed from its start to the pump's next clock reading (the next
     * resume, a post, or the pump going idle): one reading per turn. */
    uint64_t ticks_hint;        /* the pump's latest reading */
    uint64_t resume_start;      /* of the resume being timed */
    bool resume_open;           /* a resume is being timed */
    coro *requeued;             /* it yielded: ready from when timing ends */
    uint64_t resumes;
    uint64_t longest_resume;
    uint64_t latency_samples;   /* resumes whose wait was measured */
    uint64_t latency_max;
    uint64_t latency_sum;

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
    /* seq_cst, not just acquire: the shutdown's last look at the counts
     * is one side of the close handshake (see is_closed()). With acquire
     * alone, C11 (and AArch64's LDAPR) would let this load read 0 while a
     * producer counted in still reads `closed` as false. A seq_cst load
     * costs a plain mov on x86 and an LDAR on AArch64. */
    size_t arriving = atomic_load_explicit(&s->arriving, memory_order_seq_cst);

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
    /* seq_cst: the other side of the close handshake for posts, as in
     * alive_count(). */
    return atomic_load_explicit(&s->posts_pending, memory_order_seq_cst);
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

/* Sentinel for ready_at: it became ready while no pump was running, so no
 * pump was late for it; its wait is not measured. */
#define READY_OUTSIDE_PUMP 0

/* A reading of the stats clock for "became ready now": inside the pump,
 * the turn's reading (no clock read on the pump's path). */
static uint64_t ready_stamp(const coro_sched *s)
{
    return s->pumping ? s->ticks_hint : READY_OUTSIDE_PUMP;
}

static void queue_coroutine(coro_sched *s, coro *c)
{
    c->queued = true;
    c->ready_at = ready_stamp(s);
    ready_push(s, &c->ready, c->priority);
}

/* ── Members: every coroutine not in the cache ────────────────────────── */

static void member_link(coro_sched *s, coro *c)
{
    c->member_prev = NULL;
    c->member_next = s->members;
    if (s->members != NULL)
        s->members->member_prev = c;
    s->members = c;
}

static void member_unlink(coro_sched *s, coro *c)
{
    if (c->member_prev != NULL)
        c->member_prev->member_next = c->member_next;
    else
        s->members = c->member_next;
    if (c->member_next != NULL)
        c->member_next->member_prev = c->member_prev;
    c->member_next = c->member_prev = NULL;
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

/* A finished coroutine leaves the scheduler if nobody holds it any more:
 * no handle (detached) and no request on its way to it (owed). */
static void retire_if_released(coro_sched *s, coro *c)
{
    if (!c->detached || c->owed > 0)
        return;
    member_unlink(s, c);
    shell_put(s, c);
}

/* One more request will arrive for the finished coroutine `c`. */
static void owe(coro_sched *s, coro *c)
{
    c->owed++;
    s->owed++;
}

/* A request owed to `c` has arrived. */
static void owed_paid(coro_sched *s, coro *c)
{
    c->owed--;
    s->owed--;
    retire_if_released(s, c);
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

/* seq_cst, with the seq_cst counting that precedes it in start_remote()
 * and coro_post(): either this load sees the close, or the shutdown's
 * final look at the counts sees the work (see abandon_rest()). */
static bool is_closed(const coro_sched *s)
{
    return atomic_load(&s->closed);
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
    c->owed = 0;
}

/* Another thread's coro_go/coro_spawn: build the coroutine here, with a
 * stack of its own (the cache is the owner's), and send it over. */
static int start_remote(coro_sched *s, coro_fn fn, void *arg, bool detached,
                        coro_cleanup *cleanup, coro **out)
{
    coro *c = shell_new(s);
    bool refused;

    if (c == NULL)
        return ENOMEM;
    coro__prepare(c, fn, arg, false);
    init_scheduled(s, c, detached);
    if (cleanup != NULL)
        coro__cleanup_push(c, cleanup);
    atomic_fetch_add(&s->arriving, 1); /* seq_cst: see is_closed() */
    /* Counted, so it travels even if refused: the owner gives the count
     * back and frees it (take_in()). */
    refused = is_closed(s);
    c->remote.kind = refused ? CORO_REMOTE_REFUSED_START : CORO_REMOTE_START;
    if (!refused)
        *out = c;
    coro__inbox_push(&s->inbox, &c->remote); /* c is the owner's now */
    return refused ? ESHUTDOWN : 0;
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
    if (is_closed(s))
        return ESHUTDOWN;
    if (!on_owner_thread(s))
        return start_remote(s, fn, arg, detached, cleanup, out);
    if (reserve_one_more(s) != 0)
        return ENOMEM;
    c = shell_get(s, &reused);
    if (c == NULL)
        return ENOMEM;
    coro__prepare(c, fn, arg, reused);
    init_scheduled(s, c, detached);
    if (cleanup != NULL)
        coro__cleanup_push(c, cleanup);
    alive_add(s, +1);
    if (!detached)
        s->handles++;
    member_link(s, c);
    coro__overflow_prepare_thread();
    queue_coroutine(s, c);
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

/* Count one more pending post if the limit allows it. Any thread: the
 * count is one atomic, so the limit holds across threads. A CAS, not an
 * add-then-undo: the count must never move up and back down without a
 * request behind it, or a pump that saw it up would wait for a post that
 * never comes. (seq_cst on success: see is_closed().) */
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
        &s->posts_pending, &before, before + 1, memory_order_seq_cst,
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
 * that once counted it always reaches the owner — even when it is refused
 * because the scheduler closed meanwhile: the refusal travels as a
 * request too, and the owner takes the count back (take_in()). A pump
 * that saw the count up is waiting for exactly that. */
static int post_remote(coro_sched *s, coro_post_fn fn, void *arg,
                       bool even_if_closed)
{
    struct post *p = post_node_get(s);
    bool refused;

    if (p == NULL)
        return ENOMEM;
    if (!post_admit(s)) {
        post_node_put(p);
        return EAGAIN;
    }
    p->from_other_thread = true;
    /* Looked at after counting: see is_closed(). */
    refused = !even_if_closed && is_closed(s);
    p->ready.coroutine = NULL;
    p->fn = fn;
    p->arg = arg;
    p->remote.kind = refused ? CORO_REMOTE_REFUSED_POST : CORO_REMOTE_POST;
    coro__inbox_push(&s->inbox, &p->remote);
    return refused ? ESHUTDOWN : 0;
}

/* coro_post(); `even_if_closed` for the library's own stop requests. */
static int post_checked(coro_sched *s, coro_post_fn fn, void *arg,
                        bool even_if_closed)
{
    int err = check_caller(s, (const void *)fn);
    struct post *p;

    if (err != 0)
        return err;
    if (!even_if_closed && is_closed(s))
        return ESHUTDOWN;
    if (!on_owner_thread(s))
        return post_remote(s, fn, arg, even_if_closed);
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

int coro_post(coro_sched *s, coro_post_fn fn, void *arg)
{
    return post_checked(s, fn, arg, false);
}

int coro__post_always(coro_sched *s, coro_post_fn fn, void *arg)
{
    return post_checked(s, fn, arg, true);
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

static coro *cancel_request_coroutine(coro_remote *r)
{
    return (coro *)((char *)r - offsetof(coro, cancel_remote));
}

static void abandon_one(coro_sched *s, coro *c);
static void end_wait_canceled(coro *c);
static void cancel_members(coro_sched *s);

/* A coroutine handed over by another thread arrives. */
static void take_in_start(coro_sched *s, coro *c)
{
    alive_add(s, +1); /* counted here before it leaves `arriving` */
    atomic_fetch_sub_explicit(&s->arriving, 1, memory_order_release);
    if (!c->detached)
        s->handles++;
    member_link(s, c);
    if (s->abandoning) {
        abandon_one(s, c); /* too late to run: counted, never started */
        return;
    }
    if (is_closed(s)) /* it raced with the close: cancelled on arrival */
        atomic_fetch_or(&c->cancel_word, CORO_CANCEL_CANCELED);
    queue_coroutine(s, c);
}

/* Another thread's cancel request for `c` arrives. */
static void take_in_cancel(coro_sched *s, coro *c)
{
    unsigned word = atomic_fetch_and(&c->cancel_word,
                                     ~(unsigned)CORO_CANCEL_IN_FLIGHT);

    if (word & CORO_CANCEL_FINISHED)
        owed_paid(s, c); /* it finished while the request travelled */
    else
        end_wait_canceled(c);
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
        take_in_start(s, remote_coroutine(r));
        return true;
    case CORO_REMOTE_READY:
        c = remote_coroutine(r);
        if (c->state == CORO_DONE)
            owed_paid(s, c); /* abandoned while the wake travelled */
        else
            coro__make_ready(c, 0);
        return true;
    case CORO_REMOTE_POST:
        if (levels_reserve(s, alive_count(s) + posts_pending(s)) != 0)
            return false;
        ready_push(s, &remote_post(r)->ready, 0);
        return true;
    case CORO_REMOTE_CANCEL:
        take_in_cancel(s, cancel_request_coroutine(r));
        return true;
    case CORO_REMOTE_CLOSE:
        cancel_members(s);
        return true;
    case CORO_REMOTE_REFUSED_START: /* refused: give its count back */
        atomic_fetch_sub_explicit(&s->arriving, 1, memory_order_release);
        shell_free(remote_coroutine(r));
        return true;
    case CORO_REMOTE_REFUSED_POST:
        post_unadmit(s);
        post_node_return(s, remote_post(r));
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
    s->ticks_hint = coro__ticks(); /* what arrives becomes ready now */
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
    if (coro__timers_next(&s->timers) <= now)
        s->ticks_hint = coro__ticks(); /* what fires becomes ready now */
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

/* ── Cancellation and closing ─────────────────────────────────────────── */

/* Owner: `c` was cancelled; if it waits, end the wait with ECANCELED. A
 * wake or a set from another thread may have ended the wait already (its
 * request is on the way): then that result stands. */
static void end_wait_canceled(coro *c)
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

    if (coro__on_owner_thread(c)) {
        marked = mark_canceled(c, 0);
        if (marked == 0)
            end_wait_canceled(c);
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

/* Owner: cancel every alive coroutine. */
static void cancel_members(coro_sched *s)
{
    for (coro *c = s->members; c != NULL; c = c->member_next)
        if (c->state != CORO_DONE && mark_canceled(c, 0) == 0)
            end_wait_canceled(c);
}

void coro__sched_close_async(coro_sched *s)
{
    atomic_store(&s->closed, true); /* seq_cst: see is_closed() */
    /* Exchange: the one embedded request goes out at most once. */
    if (!atomic_exchange(&s->close_sent, true)) {
        s->close_remote.kind = CORO_REMOTE_CLOSE;
        coro__inbox_push(&s->inbox, &s->close_remote);
    }
}

int coro_sched_close(coro_sched *s)
{
    if (s == NULL)
        return EINVAL;
    if (!on_owner_thread(s)) {
        coro__sched_close_async(s); /* the owner's pump cancels them */
        return 0;
    }
    atomic_store(&s->closed, true); /* seq_cst: see is_closed() */
    cancel_members(s);
    return 0;
}

/* ── Statistics ───────────────────────────────────────────────────────── */

/* End the timing of the resume in progress at `now`. */
static void timing_close(coro_sched *s, uint64_t now)
{
    uint64_t length;

    if (!s->resume_open)
        return;
    length = now - s->resume_start;
    if (length > s->longest_resume)
        s->longest_resume = length;
    if (s->requeued != NULL) { /* it yielded: ready since it stopped */
        s->requeued->ready_at = now;
        s->requeued = NULL;
    }
    s->resume_open = false;
}

/* The pump turns to something else than a resume (a post, or sleep). */
static void timing_pause(coro_sched *s)
{
    if (s->resume_open) {
        s->ticks_hint = coro__ticks();
        timing_close(s, s->ticks_hint);
    }
}

/* A resume of `c` starts: one clock reading ends the previous timing,
 * measures how long `c` waited, and starts timing `c`. */
static void timing_open(coro_sched *s, coro *c)
{
    uint64_t now = coro__ticks(), latency;

    timing_close(s, now);
    s->ticks_hint = now;
    s->resumes++;
    if (c->ready_at != READY_OUTSIDE_PUMP) {
        latency = now > c->ready_at ? now - c->ready_at : 0;
        s->latency_samples++;
        s->latency_sum += latency;
        if (latency > s->latency_max)
            s->latency_max = latency;
    }
    s->resume_start = now;
    s->resume_open = true;
}

int coro_sched_stats(const coro_sched *s, coro_stats *out)
{
    if (s == NULL || out == NULL)
        return EINVAL;
    if (!on_owner_thread(s))
        return EPERM;
    out->alive = alive_count(s);
    out->ready = s->ready_count;
    out->posts_pending = posts_pending(s);
    out->posts_rejected = atomic_load(&s->posts_rejected);
    out->timers_pending = s->timers.count;
    out->resumes = s->resumes;
    out->longest_resume_ns = coro__ticks_to_ns(s->longest_resume);
    out->wake_latency_max_ns = coro__ticks_to_ns(s->latency_max);
    out->wake_latency_mean_ns =
        s->latency_samples
            ? coro__ticks_to_ns(s->latency_sum / s->latency_samples)
            : 0;
    out->closed = is_closed(s);
    return 0;
}

/* ── The pump ─────────────────────────────────────────────────────────── */

/* Resume one coroutine; afterwards, requeue it, leave it waiting, or
 * retire it. */
static void run_coroutine(coro_sched *s, coro *c)
{
    c->queued = false;
    timing_open(s, c);
    coro__resume(c);
    if (c->state != CORO_DONE) {
        if (c->waiting == CORO_WAIT_NONE) {
            queue_coroutine(s, c); /* it yielded: behind everything ready */
            s->requeued = c;       /* (its ready time: when timing ends) */
        }
        return;
    }
    alive_add(s, -1);
    /* release: a wake from another thread that sees `finished` sees the
     * coroutine's last writes too. */
    atomic_store_explicit(&c->finished, true, memory_order_release);
    /* FINISHED is set (coroutine_main()): no cancel request can start
     * now, but one that started before may still be on its way. */
    if (atomic_load_explicit(&c->cancel_word, memory_order_acquire) &
        CORO_CANCEL_IN_FLIGHT)
        owe(s, c);
    retire_if_released(s, c); /* a joinable one waits for coro_destroy() */
}

/* Run one post. Its entry is recycled before the call, so the post may
 * post again even under a limit of one. */
static void run_post(coro_sched *s, struct post *p)
{
    coro_post_fn fn = p->fn;
    void *arg = p->arg;

    timing_pause(s);
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
    timing_pause(s);
    s->pumping = false;
    pumping_now = outer;
}

/* Whether anything is left to do: coroutines alive, posts pending, or a
 * request still owed to a finished coroutine (it must arrive before the
 * coroutine's memory is reused or freed). */
static bool work_remains(const coro_sched *s)
{
    return alive_count(s) > 0 || posts_pending(s) > 0 || s->owed > 0;
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
        /* What was taken in may have ended the work without queueing
         * anything (a refused request giving its count back, a request
         * owed to a finished coroutine): look again before sleeping. */
        if (!work_remains(s))
            break;
        timing_pause(s); /* a sleep is not part of the last resume */
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

        timing_pause(s);
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

/* ── Shutdown ─────────────────────────────────────────────────────────── */

/*
 * Abandon `c`, alive and suspended: it will never be resumed. Undo every
 * reference to it (its timer, its place on an event's list, its park),
 * run its cleanups here, and retire it unless a request is still owed to
 * it. Its stack is simply reused or unmapped later: no frame on it ever
 * runs again.
 */
static void abandon_one(coro_sched *s, coro *c)
{
    int parked = CORO_PARK_PARKED;

    if (c->waiting != CORO_WAIT_NONE && c->deadline != CORO_FOREVER)
        coro__timers_remove(&s->timers, c);
    if (c->waiting == CORO_WAIT_PARK &&
        !atomic_compare_exchange_strong_explicit(
            &c->park_word, &parked, CORO_PARK_EMPTY, memory_order_acq_rel,
            memory_order_acquire))
        owe(s, c); /* a wake won the race: its request is coming */
    if (c->waiting == CORO_WAIT_EVENT && !coro__event_timeout(c))
        owe(s, c); /* a set won the race: its request is coming */
    c->waiting = CORO_WAIT_NONE;
    c->queued = false;
    coro__run_cleanups(c);
    if (atomic_fetch_or(&c->cancel_word, CORO_CANCEL_FINISHED) &
        CORO_CANCEL_IN_FLIGHT)
        owe(s, c); /* a cancel request is coming */
    c->state = CORO_DONE;
    c->result = NULL;
    alive_add(s, -1);
    atomic_store_explicit(&c->finished, true, memory_order_release);
    s->abandoned++;
    retire_if_released(s, c);
}

/*
 * The grace period is over: abandon every alive coroutine, run the posts,
 * and wait for what is still on its way — coroutines and posts other
 * threads committed to before they saw the close (they counted themselves
 * in `arriving` or `posts_pending` first, see is_closed()), and requests
 * owed to the abandoned. Those arrive within moments: each comes from a
 * thread that has already won its race and has only the push left to do.
 */
static void abandon_rest(coro_sched *s)
{
    coro_ready *posts = NULL, **tail = &posts, *entry;
    coro *c, *next;

    s->abandoning = true; /* from here arrivals are abandoned on the way in */
    drain_inbox(s);
    /* The ready queue: keep the posts, in order; the coroutines in it are
     * members, abandoned below. */
    while ((entry = ready_pop(s)) != NULL) {
        if (entry->coroutine != NULL)
            continue;
        entry->next = NULL;
        *tail = entry;
        tail = &entry->next;
    }
    for (c = s->members; c != NULL; c = next) {
        next = c->member_next; /* abandon_one() may unlink c */
        if (c->state != CORO_DONE)
            abandon_one(s, c);
    }
    while (posts != NULL) {
        entry = posts;
        posts = entry->next;
        ready_push(s, entry, 0);
    }
    for (;;) {
        drain_inbox(s);
        if (run_one(s))
            continue;
        /* Looked at after the drain: what it took in may have ended the
         * work without queueing anything. */
        if (!work_remains(s) && s->backlog == NULL)
            break;
        if (s->backlog == NULL)
            coro__inbox_wait(&s->inbox, CORO_FOREVER);
    }
}

size_t coro__sched_shutdown_until(coro_sched *s, uint64_t deadline)
{
    coro_sched *outer;
    size_t before;

    if (s == NULL || !may_pump(s)) {
        errno = s == NULL ? EINVAL : EPERM;
        return 0;
    }
    coro_sched_close(s);
    before = s->abandoned;
    outer = pump_enter(s);
    pump_until(s, deadline, true);
    abandon_rest(s);
    pump_leave(s, outer);
    s->shut_down = true;
    return s->abandoned - before;
}

size_t coro_sched_shutdown(coro_sched *s, uint64_t grace_ns)
{
    return coro__sched_shutdown_until(s, coro__deadline_after(grace_ns));
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
    if (!s->pumping)
        drain_inbox(s); /* refusals that raced with a shutdown, say */
    if (s->pumping || work_remains(s) || (s->handles > 0 && !s->shut_down))
        return EBUSY;
    coro__signal_forget(s); /* no signal handler can reach s now */

    while (s->members != NULL) { /* after a shutdown: undestroyed handles */
        coro *c = s->members;
        member_unlink(s, c);
        shell_free(c);
    }
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
    retire_if_released(s, c);
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
