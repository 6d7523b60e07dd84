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

    /* The mapping: [map, map + page) is the guard, above it the stack,
     * [stack_lo, stack_lo + stack_size). */
    char *map;
    size_t map_size;
    char *stack_lo;
    size_t stack_size;

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

#endif /* CORO_IMPL_H */
