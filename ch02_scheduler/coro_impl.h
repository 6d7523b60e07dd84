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

/* Dense stacks: a region of stacks side by side, no guard pages (stack.c). */
typedef struct coro_dense coro_dense;

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

    /* The mapping: [map, map + page) is the guard, above it the stack,
     * [stack_lo, stack_lo + stack_size). */
    char *map;          /* NULL for a dense stack: no mapping of its own */
    size_t map_size;
    char *stack_lo;
    size_t stack_size;
    uint32_t dense_number; /* a dense stack's: 0, 1, 2 ... as carved */

    /* What the trace and the debugger call it (trace.c): its id in the
     * trace, 0 until first recorded, and coro_set_name()'s name. */
    uint64_t trace_id;
    char name[CORO_NAME_MAX + 1];

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

/* Resume `c` with no checks: the pump's coro_resume(). Returns 0, when
 * `c` has yielded or returned. */
int coro__resume(coro *c);

/* ── The scheduler, for coro.c (sched.c) ──────────────────────────────── */

/* coro_destroy() of a joinable coroutine of a scheduler (done, or never
 * started and not queued). Returns 0 or an errno value. */
int coro__sched_destroy_coroutine(coro *c);

#endif /* CORO_IMPL_H */
