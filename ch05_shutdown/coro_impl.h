/*
 * coro_impl.h — what the library's own files share. Not for users.
 *
 * Names with two underscores (coro__*) have external linkage only so that
 * the library's files can call each other; they are not part of the API.
 */
#ifndef CORO_IMPL_H
#define CORO_IMPL_H

#include "context.h"
#include "coro.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ── Tools that watch memory and stacks ─────────────────────────────────
 *
 * AddressSanitizer and ThreadSanitizer track "the current stack" per
 * thread; a stack switch they do not see looks to them like memory
 * corruption or a data race. Each offers a fiber API: we announce every
 * switch. Valgrind needs each stack registered once.
 */
#if defined(__SANITIZE_ADDRESS__)
#define CORO_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define CORO_TSAN 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CORO_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define CORO_TSAN 1
#endif
#endif

#ifdef CORO_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef CORO_TSAN
#include <sanitizer/tsan_interface.h>
#endif
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define CORO_VALGRIND 1
#endif
#endif

/* ── The coroutine ────────────────────────────────────────────────────── */

/*
 * An entry of a scheduler's ready queue: a coroutine (embedded in struct
 * coro) or a post (embedded in struct post, sched_impl.h).
 */
typedef struct coro_ready {
    struct coro_ready *next;  /* the next entry of the same priority */
    coro *coroutine;          /* the coroutine to resume; NULL: a post */
} coro_ready;

/*
 * A request from another thread to a scheduler's thread (inbox.c). It is
 * embedded in what it carries, so sending one never allocates: a coroutine
 * carries one (to be started, or made ready), a post carries one.
 */
typedef enum {
    CORO_REMOTE_START,  /* a coroutine created by another thread: queue it */
    CORO_REMOTE_READY,  /* a parked coroutine another thread woke */
    CORO_REMOTE_POST,   /* a post from another thread */
    CORO_REMOTE_CANCEL, /* another thread cancelled this coroutine */
    CORO_REMOTE_CLOSE,  /* another thread (or a signal) closed the scheduler */
    /* Refused with ESHUTDOWN after being counted: only the count travels
     * (the owner gives it back and frees the request). */
    CORO_REMOTE_REFUSED_START,
    CORO_REMOTE_REFUSED_POST
} coro_remote_kind;

typedef struct coro_remote {
    struct coro_remote *next;
    coro_remote_kind kind;
    uint64_t trace_arrow; /* a wake's arrow in the trace; 0: none */
} coro_remote;

/* The permit word of a coroutine: what coro_park() and coro_wake() agree
 * on with compare-and-swap, from any thread (park.c). */
enum { CORO_PARK_EMPTY, CORO_PARK_PERMIT, CORO_PARK_PARKED };

/* The cancel word of a coroutine (bits; shutdown.c). CANCELED is set once
 * and never cleared. IN_FLIGHT: another thread's cancel request (the
 * embedded cancel_remote node) is in the scheduler's inbox, so the
 * coroutine must not be recycled before the pump has taken it in.
 * FINISHED: the coroutine is done; set by the owner with one atomic
 * read-modify-write, so a canceller either gets in before it (and its
 * request will arrive) or sees it (and returns EINVAL). */
enum {
    CORO_CANCEL_CANCELED = 1u << 0,
    CORO_CANCEL_IN_FLIGHT = 1u << 1,
    CORO_CANCEL_FINISHED = 1u << 2
};

/* A cleanup of coro_defer(): a LIFO list threaded through the coroutine.
 * The library embeds some in its own records (no allocation); those of
 * coro_defer() are malloc'd (`on_heap`). */
typedef struct coro_cleanup {
    void (*fn)(void *arg);
    void *arg;
    struct coro_cleanup *next;
    bool on_heap;
} coro_cleanup;

/* Dense stacks: a region of stacks side by side, no guard pages (stack.c). */
typedef struct coro_dense coro_dense;

/* Why a coroutine of a scheduler is out of the ready queue (park.c). */
typedef enum {
    CORO_WAIT_NONE,  /* not waiting: queued, running, or done */
    CORO_WAIT_SLEEP, /* coro_sleep(): only its timer ends it */
    CORO_WAIT_PARK,  /* coro_park*(): coro_wake() or its timer ends it */
    CORO_WAIT_EVENT  /* coro_event_await*(): the event or its timer */
} coro_wait;

/* A deadline that never comes. */
#define CORO_FOREVER UINT64_MAX

/* How a coroutine of a scheduler left its resume: the value its switch
 * back to the pump carries, which coro__resume() returns. The pump reads
 * it from a register instead of asking the coroutine's state and then its
 * `waiting` (sched.c, run_coroutine()). A coroutine of coro_create() always
 * leaves with 0, which is what coro_resume() returns. */
typedef enum {
    CORO_LEFT_YIELDED = 0, /* coro_yield(): ready again at once */
    CORO_LEFT_TO_WAIT,     /* coro__wait(): what wakes it queues it */
    CORO_LEFT_FINISHED     /* its function returned */
} coro_left;

struct coro {
    coro_context ctx;   /* saved registers while not running */
    coro_fn fn;
    void *arg;
    void *result;       /* fn's return value; NULL until DONE */
    coro_state state;
    bool started;       /* it has run: a SUSPENDED stack may hold frames */
    coro *resumer;      /* who resumed it; NULL = the thread's own stack.
                           Meaningful only while RUNNING or NORMAL. */
    const void *owner;  /* the owning thread's identity (thread_self()) */

    /* Scheduling. `sched` is NULL for a coroutine of coro_create(). */
    coro_sched *sched;
    int priority;       /* applied the next time it is queued */
    bool detached;      /* coro_go(): the pump frees it when DONE */
    bool queued;        /* in the ready queue */
    coro_ready ready;   /* its ready-queue entry (ready.coroutine == self) */
    coro *next_free;    /* link in the scheduler's cache of finished ones */

    /* Waiting. Invariant: waiting != NONE exactly while the coroutine is
     * suspended out of the ready queue; it then has a timer iff its
     * deadline is not CORO_FOREVER. Owner thread only. */
    coro_wait waiting;
    int wait_result;    /* how the wait ended: 0, ETIMEDOUT or ECANCELED */
    uint64_t deadline;  /* of the wait, or CORO_FOREVER */
    uint32_t timer_id;  /* its timer's id in the scheduler's heap */
    coro_event *event;  /* the event it waits on (CORO_WAIT_EVENT) */

    /* Shared with other threads. */
    _Atomic int park_word;  /* CORO_PARK_EMPTY, _PERMIT or _PARKED */
    atomic_bool finished;   /* DONE: other threads' wakes are EINVAL */
    coro_remote remote;     /* its request in a scheduler's inbox */
    _Atomic unsigned cancel_word; /* CORO_CANCEL_* bits */
    coro_remote cancel_remote;    /* another thread's cancel request */
    bool event_linked;      /* on its event's waiter list (event's lock) */
    coro *event_next;       /* the event's waiter list: FIFO, doubly */
    coro *event_prev;       /* linked (under the event's lock) */

    /* Stopping (owner thread only). */
    coro_cleanup *cleanups;   /* coro_defer(): newest first */
    coro *member_next;        /* the scheduler's list of its coroutines */
    coro *member_prev;        /* (alive, or done and not yet destroyed) */
    unsigned owed;            /* abandoned: READY requests still to come */
    uint64_t ready_at;        /* ticks when it last became ready (stats) */

    /* The mapping: [map, map + page) is the guard, above it the stack,
     * [stack_lo, stack_lo + stack_size). */
    char *map;          /* NULL for a dense stack: no mapping of its own */
    size_t map_size;
    char *stack_lo;
    size_t stack_size;
    uint32_t dense_number; /* a dense stack's: 0, 1, 2 ... as carved */

    /* What the trace and the debugger call it (trace.c): its id in the
     * trace, 0 until first recorded, and coro_set_name()'s name; and the
     * arrow of the wake that made it ready, to end at its next resume (0:
     * none). */
    uint64_t trace_id;
    char name[CORO_NAME_MAX + 1];
    uint64_t trace_arrow;

    /* On the registry of every stack, for the debugger (coro.c). */
    coro *registry_prev;
    coro *registry_next;

#ifdef CORO_ASAN
    void *asan_fake_stack;
#endif
#ifdef CORO_TSAN
    void *tsan_fiber;
#endif
#ifdef CORO_VALGRIND
    unsigned valgrind_stack_id;
#endif
};

/* ── Stacks and the overflow handler (stack.c) ────────────────────────── */

/* The system page size. */
size_t coro__page_size(void);

/* The usable stack size for a coro_create() request, or 0 if too large. */
size_t coro__usable_stack_size(size_t requested);

/* Map guard page + stack for `c` (sets map, map_size, stack_lo and
 * stack_size). Returns 0 or an errno value. */
int coro__stack_map(coro *c, size_t stack_size);

/* Unmap `c`'s guard page and stack. */
void coro__stack_unmap(coro *c);

/* After coro_overflow_handler_install(), give the calling thread an
 * alternate signal stack if it has none. Cheap when there is nothing to do. */
void coro__overflow_prepare_thread(void);

/* Dense stacks in slots of `stack_size` bytes each (a multiple of the page
 * size): each stack is its slot less the 16-byte canary of the stack above
 * it. Returns NULL when out of memory. */
coro_dense *coro__dense_create(size_t stack_size);

/* Carve the next stack from `d` for `c` (sets stack_lo, stack_size and
 * dense_number, and writes its canary; map stays NULL). Returns 0 or
 * ENOMEM. Stacks are never given back one by one: a finished coroutine
 * keeps its stack for reuse. */
int coro__dense_carve(coro_dense *d, coro *c);

/* Give the stacks carved from `d` from now on slots of `stack_size` bytes
 * (a multiple of the page size). Returns 0, or EBUSY once any stack has
 * been carved (they all share the regions' layout). Never fails for
 * memory: dense mode stays on whatever it returns. */
int coro__dense_resize(coro_dense *d, size_t stack_size);

/* Unmap every region of `d` and free it. */
void coro__dense_destroy(coro_dense *d);

/* A dense stack's canary (the 16 bytes just below stack_lo, still as
 * written when it was carved) is intact. Only for dense stacks (map ==
 * NULL). */
bool coro__stack_canary_intact(const coro *c);

/* Write the overflow message for `c` and abort(). Async-signal-safe. */
void coro__overflow_abort(const coro *c);

/* ── Coroutines, for the scheduler (coro.c) ───────────────────────────── */

/* The calling thread's identity, as stored in `owner`. */
const void *coro__thread_id(void);

/* Set `c` (whose stack is set) up to run fn(arg) from the start: fields,
 * first frame, and the tools' view of the stack. `reused`: the stack has
 * run a coroutine before. */
void coro__prepare(coro *c, coro_fn fn, void *arg, bool reused);

/* Announce a new stack to the tools / a stack about to be freed. */
void coro__stack_created(coro *c);
void coro__stack_destroyed(coro *c);

/* Resume `c` with no checks: the pump's coro_resume(). Returns when `c`
 * has yielded, waits or returned, with how it left (coro_left; always 0
 * for a coroutine of coro_create()). */
int coro__resume(coro *c);

/* The running coroutine, about to wait (coro__wait()), goes back to the
 * pump as coro_yield() would, but leaves with CORO_LEFT_TO_WAIT. Returns
 * what its resumer passes, as coro_yield() does. */
int coro__yield_to_wait(void);

/* Run `c`'s cleanups, newest first, and empty the list. */
void coro__run_cleanups(coro *c);

/* Push / pop a cleanup the caller owns (for the library's own records). */
void coro__cleanup_push(coro *c, coro_cleanup *cleanup);
void coro__cleanup_pop(coro *c, coro_cleanup *cleanup);

/* Whether `c` has been cancelled. Any thread. */
bool coro__is_canceled(const coro *c);

/* A blocking call in a cancelled coroutine: yield once (the others run),
 * then return ECANCELED. */
int coro__refuse_canceled(void);

/* ── The scheduler, for coro.c (sched.c) ──────────────────────────────── */

/* coro_destroy() of a joinable coroutine of a scheduler (done, or never
 * started and not queued). Returns 0 or an errno value. */
int coro__sched_destroy_coroutine(coro *c);

/* Owner, for the pool: if nothing is ready, sleep until a request arrives
 * or a timer is due — without running anything. */
void coro__sched_idle_wait(coro_sched *s);

/* coro_go() with a cleanup already pushed when the coroutine is created:
 * it runs even if the coroutine is abandoned before it starts. */
int coro__go_with_cleanup(coro_sched *s, coro_fn fn, void *arg,
                          coro_cleanup *cleanup);

/* coro_cancel() of a coroutine of a scheduler (not finished, not NULL;
 * shutdown.c). */
int coro__sched_cancel(coro *c);

/* Free the calling thread's cache of post nodes (remote.c), for
 * coro_thread_detach(). */
void coro__post_cache_release(void);

/* coro_post() that ignores the scheduler being closed: for the library's
 * own stop requests (looper.c, pool.c), which must get through. */
int coro__post_always(coro_sched *s, coro_post_fn fn, void *arg);

/* coro_sched_shutdown() with an absolute deadline (shutdown.c). */
size_t coro__sched_shutdown_until(coro_sched *s, uint64_t deadline);

/* Async-signal-safe: mark `s` closed and push its close request
 * (shutdown.c); `signo`: the signal that closes it, or 0 (for the trace). */
void coro__sched_close_async(coro_sched *s, int signo);

/* Forget every coro_sched_close_on_signal() registration of `s` (signal.c),
 * before it is freed. */
void coro__signal_forget(coro_sched *s);

/* ── The inbox (inbox.c) ──────────────────────────────────────────────── */

/* What a producer may still touch after its push: the owner's sleeping
 * flag, the futex word and the eventfd of the wait hook. Cells are
 * recycled, never freed, and their eventfds never closed (inbox.c). */
typedef struct coro_wake_cell coro_wake_cell;

/* A scheduler's inbox: a lock-free stack of requests, the cell with the
 * futex word its owner sleeps on, and the owner's wait hook, if any
 * (coro_sched_set_wait(); owner only). */
typedef struct coro_inbox {
    _Atomic(coro_remote *) head;
    coro_wake_cell *cell;
    coro_wait_fn wait_fn; /* NULL: sleep on the futex */
    void *wait_arg;
    unsigned spin_skip;    /* owner: waits left to sleep without a spin */
    unsigned spin_backoff; /* owner: spin_skip after the next failed spin */
} coro_inbox;

/* Owner: set up / tear down an inbox. init returns 0 or ENOMEM. */
int coro__inbox_init(coro_inbox *in);
void coro__inbox_fini(coro_inbox *in);

/* Any thread: add `node` and wake the owner if it sleeps. */
void coro__inbox_push(coro_inbox *in, coro_remote *node);

/* Owner: take every request, oldest first (per producer). */
coro_remote *coro__inbox_take(coro_inbox *in);

/* Owner: whether the inbox holds nothing. Inline: the pump asks at the
 * start of every turn. (Acquire, though a "no" is all the pump acts on here: a
 * "yes" is followed by coro__inbox_take(), whose exchange acquires what
 * the producers wrote. On x86-64 and AArch64 an acquire load costs what a
 * plain one does.) */
static inline bool coro__inbox_empty(coro_inbox *in)
{
    return atomic_load_explicit(&in->head, memory_order_acquire) == NULL;
}

/* Owner: sleep until a push or `deadline` (CORO_FOREVER: no deadline), on
 * the futex or, with a wait hook, in the hook. May return early; the
 * caller looks again. */
void coro__inbox_wait(coro_inbox *in, uint64_t deadline);

/* Owner: install the wait hook `fn` (NULL: back to the futex), creating
 * the cell's eventfd the first time; *wake_fd gets it (-1 for NULL).
 * Returns 0 or eventfd()'s errno. Never while the owner waits. */
int coro__inbox_set_wait(coro_inbox *in, coro_wait_fn fn, void *arg,
                         int *wake_fd);

/* Owner, while work is ready: call the wait hook with a deadline already
 * passed (a poll that must not block). */
void coro__inbox_poll_hook(coro_inbox *in);

/* Owner: whether a wait hook is installed. Inline: the pump asks before
 * every resume, and most schedulers have none. */
static inline bool coro__inbox_has_hook(const coro_inbox *in)
{
    return in->wait_fn != NULL;
}

/* The same poll, if there is a hook. */
static inline void coro__inbox_poll(coro_inbox *in)
{
    if (coro__inbox_has_hook(in))
        coro__inbox_poll_hook(in);
}


/* ── Waiting (wait.c, remote.c), for park.c and event.c ───────────────── */

/* The running coroutine leaves the ready queue until coro__make_ready()
 * (or its deadline, unless CORO_FOREVER). Returns its wait_result, or EPERM
 * outside a scheduled coroutine. */
int coro__wait(coro *self, coro_wait why, uint64_t deadline);

/* End the wait of `c` (waiting != NONE) with `result`: cancel its timer and
 * queue it. Owner thread only. */
void coro__make_ready(coro *c, int result);

/* Any thread: `c`'s wait (park or event) was ended by a wake or a set, and
 * this caller won the right to deliver it: make `c` ready with result 0,
 * directly on its own thread, through its scheduler's inbox elsewhere. */
void coro__deliver_ready(coro *c);

/* Ticks of the stats clock (the cycle counter where there is one), and
 * their conversion to nanoseconds (stats.c). */
uint64_t coro__ticks(void);
uint64_t coro__ticks_to_ns(uint64_t ticks);
/* Find the counter's rate, once a process (2 ms against CLOCK_MONOTONIC on
 * x86-64; read from a register on AArch64): called by every scheduler's
 * creation, so no pump measures it inside a resume's window. */
void coro__ticks_rate_measure(void);

/* Whether the calling thread owns `c`. */
bool coro__on_owner_thread(const coro *c);

/* The running coroutine if it is run by a scheduler and is what runs now
 * (not a post of a pump it entered), else NULL: the one that may wait. */
coro *coro__scheduled_self(void);

/* now + ns, or CORO_FOREVER if that is past the end of time. */
uint64_t coro__deadline_after(uint64_t ns);

/* ── Events (event.c), for the pump ───────────────────────────────────── */

/* Owner: `c`'s event wait timed out. If `c` is still on the waiter list,
 * take it off and return true; false if a set already took it (and its
 * ready request is on the way). */
bool coro__event_timeout(coro *c);

/* ── The timer heap (timer.c) ─────────────────────────────────────────── */

/* One timer: its deadline, and `id`, which names its coroutine in `owner`.
 * `seq` breaks ties between equal deadlines: first set, first fired. 16
 * bytes, so that four fill a cache line. */
typedef struct coro_timer {
    uint64_t deadline;
    uint32_t seq;
    uint32_t id;
} coro_timer;

/* A 4-ary min-heap of timers, ordered by (deadline, seq). Each timer in
 * the heap has an id (its coroutine keeps it in timer_id); owner[id] is
 * the coroutine, or NULL once the timer is cancelled: a cancelled timer
 * stays in the heap, dead, until it reaches the top (timer.c says why,
 * and how many can pile up). Unused ids below ids_used wait on the
 * free_ids stack. A zeroed struct is an empty heap. */
typedef struct coro_timers {
    coro_timer *heap;   /* [0, size): the heap, dead timers included */
    coro **owner;       /* by id: the timer's coroutine, NULL if dead */
    uint32_t *free_ids; /* [0, free_count): ids free for reuse */
    void *heap_memory;  /* the allocation `heap` points into */
    size_t count;       /* pending timers (the dead ones not counted) */
    size_t size;        /* timers in the heap, dead ones included */
    size_t free_count;
    size_t ids_used;    /* ids handed out so far: [0, ids_used) */
    size_t capacity;    /* of each array */
    uint32_t next_seq;
} coro_timers;

/* Room for `n` coroutines' timers (and as many dead ones), so that adding
 * never fails. 0 or ENOMEM. */
int coro__timers_reserve(coro_timers *t, size_t n);

/* Add `c`'s timer at `deadline` (room must have been reserved). */
void coro__timers_add(coro_timers *t, coro *c, uint64_t deadline);

/* Cancel `c`'s pending timer: it will never fire. */
void coro__timers_remove(coro_timers *t, coro *c);

/* The earliest pending deadline, or CORO_FOREVER if no timer is pending.
 * (It drops the dead timers at the top of the heap.) */
uint64_t coro__timers_next(coro_timers *t);

/* Remove up to `max` pending timers whose deadline is at or before `now`,
 * earliest first, and store their coroutines in due[0..]; returns how
 * many. (Dead timers on the way are dropped, and not counted.) */
size_t coro__timers_pop_due(coro_timers *t, uint64_t now, coro **due,
                            size_t max);

/* Free the heap's memory. */
void coro__timers_free(coro_timers *t);

/* ── The pool (pool.c), for pool_call.c ───────────────────────────────── */

/* coro_pool_go(), with a hook for a task that never starts. */
int coro__pool_go(coro_pool *p, coro_fn fn, void *arg,
                  void (*dropped)(void *arg));

#endif /* CORO_IMPL_H */
