/*
 * remote.c — requests from other threads.
 *
 *   another thread:                          the owner's pump, every turn:
 *     coro_go / coro_spawn ──> START  ─┐
 *     coro_post            ──> POST   ─┼──> inbox ──> coro__drain_inbox():
 *     coro_wake, event set ──> READY  ─┘               take_in() each one
 *
 * Other threads (chapter 4) never touch the scheduler's structures. They
 * push requests onto the scheduler's inbox (inbox.c) — a coroutine to
 * start, a post, a parked coroutine to make ready — and the pump moves
 * them in with coro__drain_inbox() at the top of every turn. The few
 * fields other threads do read or write are atomics, marked "shared" in
 * struct coro_sched (sched_impl.h).
 *
 * Stopping (chapter 5) adds requests of its own: another thread's cancel
 * of a coroutine and close of the scheduler, and the refusals of starts
 * and posts that counted themselves in before they saw the close — a
 * refusal travels too, so that the owner gives the count back
 * (shutdown.c explains why they count first).
 *
 * Owns: the inbox and the backlog of struct coro_sched, the post nodes
 * that travel between threads (`returned`, and each thread's cache), the
 * admission count of posts (posts_pending, posts_rejected), and the count
 * of coroutines alive that other threads read (arriving + alive_local:
 * coro__alive_count()). Thread:
 * coro__start_remote(), coro__post_admit() / _unadmit(),
 * coro__post_remote() and coro__deliver_ready() run on any thread; the
 * rest on the owner's.
 */
#define _GNU_SOURCE
#include "sched_impl.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>

/* ── Counts ───────────────────────────────────────────────────────────── */

/* Coroutines alive: created (here or elsewhere) and not finished.
 *
 * A coroutine sent by another thread moves from `arriving` to
 * `alive_local` in take_in(): alive_local += 1, then arriving -= 1 with
 * release. Reading arriving first, with acquire, means: if we see the
 * decrement, we also see the increment before it. So the sum may count
 * the coroutine twice, never zero times. */
size_t coro__alive_count(const coro_sched *s)
{
    /* seq_cst, not just acquire: the shutdown's last look at the counts
     * is one side of the close handshake (see coro__is_closed()). With
     * acquire alone, C11 (and AArch64's LDAPR) would let this load read 0
     * while a producer counted in still reads `closed` as false. A seq_cst
     * load costs a plain mov on x86 and an LDAR on AArch64. */
    size_t arriving = atomic_load_explicit(&s->arriving, memory_order_seq_cst);

    return arriving +
           atomic_load_explicit(&s->alive_local, memory_order_relaxed);
}

void coro__alive_add(coro_sched *s, int delta)
{
    size_t now = atomic_load_explicit(&s->alive_local, memory_order_relaxed);

    atomic_store_explicit(&s->alive_local, now + (size_t)(ptrdiff_t)delta,
                          memory_order_relaxed);
}

size_t coro__posts_pending(const coro_sched *s)
{
    /* seq_cst: the other side of the close handshake for posts, as in
     * coro__alive_count(). */
    return atomic_load_explicit(&s->posts_pending, memory_order_seq_cst);
}

/* ── Starting a coroutine from another thread ─────────────────────────── */

int coro__start_remote(coro_sched *s, coro_fn fn, void *arg, bool detached,
                       coro_cleanup *cleanup, coro **out)
{
    coro *c = coro__shell_new(s);
    bool refused;

    if (c == NULL)
        return ENOMEM;
    coro__prepare(c, fn, arg, false);
    coro__init_scheduled(s, c, detached);
    if (cleanup != NULL)
        coro__cleanup_push(c, cleanup);
    if (coro__tracing()) /* an arrow to its first resume */
        c->trace_arrow = coro__trace_sent(s, CORO_TRACE_SENT_GO);
    atomic_fetch_add(&s->arriving, 1); /* seq_cst: see coro__is_closed() */
    /* Counted, so it travels even if refused: the owner gives the count
     * back and frees it (take_in()). */
    refused = coro__is_closed(s);
    c->remote.kind = refused ? CORO_REMOTE_REFUSED_START : CORO_REMOTE_START;
    if (!refused)
        *out = c;
    coro__inbox_push(&s->inbox, &c->remote); /* c is the owner's now */
    return refused ? ESHUTDOWN : 0;
}


/* ── Posts from any thread ────────────────────────────────────────────── */

/* Count one more pending post if the limit allows it. Any thread: the
 * count is one atomic, so the limit holds across threads. A CAS, not an
 * add-then-undo: the count must never move up and back down without a
 * request behind it, or a pump that saw it up would wait for a post that
 * never comes. (seq_cst on success: see coro__is_closed().) */
bool coro__post_admit(coro_sched *s)
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

void coro__post_unadmit(coro_sched *s)
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
    /* The next node was last written by the pump, on its core: ask for
     * its line now (for writing, where the processor has such a hint), so
     * that it arrives while this post goes out instead of stalling the
     * next one. */
    if (post_cache != NULL)
        __builtin_prefetch(post_cache, 1);
    return p;
}

static void post_node_put(struct post *p)
{
    p->next_free = post_cache;
    post_cache = p;
}

void coro__post_node_return(coro_sched *s, struct post *p)
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
int coro__post_remote(coro_sched *s, coro_post_fn fn, void *arg,
                      bool even_if_closed)
{
    struct post *p = post_node_get(s);
    bool refused;

    if (p == NULL)
        return ENOMEM;
    if (!coro__post_admit(s)) {
        post_node_put(p);
        return EAGAIN;
    }
    p->from_other_thread = true;
    p->trace_number =
        coro__tracing() ? coro__trace_sent(s, CORO_TRACE_SENT_POST) : 0;
    /* Looked at after counting: see coro__is_closed(). */
    refused = !even_if_closed && coro__is_closed(s);
    p->ready.coroutine = NULL;
    p->fn = fn;
    p->arg = arg;
    p->remote.kind = refused ? CORO_REMOTE_REFUSED_POST : CORO_REMOTE_POST;
    coro__inbox_push(&s->inbox, &p->remote);
    return refused ? ESHUTDOWN : 0;
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

/* A coroutine handed over by another thread arrives. */
static void take_in_start(coro_sched *s, coro *c)
{
    coro__alive_add(s, +1); /* counted here before it leaves `arriving` */
    atomic_fetch_sub_explicit(&s->arriving, 1, memory_order_release);
    if (!c->detached)
        s->handles++;
    coro__member_link(s, c);
    if (s->abandoning) {
        coro__abandon_one(s, c); /* too late to run: counted, never started */
        return;
    }
    if (coro__is_closed(s)) /* it raced with the close: cancelled on arrival */
        atomic_fetch_or(&c->cancel_word, CORO_CANCEL_CANCELED);
    coro__queue_coroutine(s, c);
}

/* Another thread's cancel request for `c` arrives. */
static void take_in_cancel(coro_sched *s, coro *c)
{
    unsigned word = atomic_fetch_and(&c->cancel_word,
                                     ~(unsigned)CORO_CANCEL_IN_FLIGHT);

    if (word & CORO_CANCEL_FINISHED)
        coro__owed_paid(s, c); /* it finished while the request travelled */
    else
        coro__end_wait_canceled(c);
}

/* Take one request in. Returns false if memory for it is lacking (the
 * caller keeps it for later). */
static bool take_in(coro_sched *s, coro_remote *r)
{
    coro *c;

    switch (r->kind) {
    case CORO_REMOTE_START:
        if (coro__reserve_one_more(s) != 0)
            return false;
        take_in_start(s, remote_coroutine(r));
        return true;
    case CORO_REMOTE_READY:
        c = remote_coroutine(r);
        if (r->trace_arrow != 0)
            coro__trace_arrived(s, r->trace_arrow);
        if (c->state == CORO_DONE)
            coro__owed_paid(s, c); /* abandoned while the wake travelled */
        else
            coro__make_ready(c, 0);
        return true;
    case CORO_REMOTE_POST:
        if (coro__levels_reserve(s, coro__alive_count(s) +
                                        LEVELS_FOR_POSTS) != 0)
            return false;
        coro__ready_push(s, &remote_post(r)->ready, 0);
        return true;
    case CORO_REMOTE_CANCEL:
        take_in_cancel(s, cancel_request_coroutine(r));
        return true;
    case CORO_REMOTE_CLOSE:
        coro__take_in_close(s);
        return true;
    case CORO_REMOTE_REFUSED_START: /* refused: give its count back */
        atomic_fetch_sub_explicit(&s->arriving, 1, memory_order_release);
        coro__shell_free(remote_coroutine(r));
        return true;
    case CORO_REMOTE_REFUSED_POST:
        coro__post_unadmit(s);
        coro__post_node_return(s, remote_post(r));
        return true;
    }
    abort(); /* no other kind exists */
}

void coro__take_in_requests(coro_sched *s)
{
    coro_remote *list, *tail;

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
    c->remote.trace_arrow =
        coro__tracing() ? coro__trace_sent(c->sched, CORO_TRACE_SENT_WAKE) : 0;
    coro__inbox_push(&c->sched->inbox, &c->remote);
}

bool coro__on_owner_thread(const coro *c)
{
    return c->owner == coro__thread_id();
}
