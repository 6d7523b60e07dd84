/*
 * context.h — the one job of a switch back-end: move between stacks.
 *
 * Internal to the library. coro.c is written against these two functions
 * and never looks inside a coro_context; each back-end defines them:
 *
 *   context_asm.c + switch_x86_64.S / switch_aarch64.S   (the default)
 *   context_ucontext.c                                   (CORO_SWITCH_UCONTEXT)
 */
#ifndef CORO_CONTEXT_H
#define CORO_CONTEXT_H

#include <stddef.h>

/* The first function to run on a new stack. It must never return: there is
 * no frame below it to return to. */
typedef void (*coro_context_entry)(void *arg);

#ifdef CORO_SWITCH_UCONTEXT
#include <ucontext.h>

typedef struct coro_context {
    ucontext_t uc;            /* registers, signal mask, stack: all of it */
    coro_context_entry entry; /* for the first switch only */
    void *arg;
    int value;                /* what our suspended switch will return */
} coro_context;

#else

typedef struct coro_context {
    void *sp; /* while suspended: the stack pointer, pointing at the saved
                 registers (layout in the .S file of each architecture) */
} coro_context;

#endif

/*
 * Prepare `ctx` so that the first coro_context_switch() to it runs
 * entry(arg) on the stack [stack_lo, stack_lo + size).
 */
void coro_context_make(coro_context *ctx, void *stack_lo, size_t size,
                       coro_context_entry entry, void *arg);

/*
 * Save the running context in `from` and continue in `to`, where the
 * coro_context_switch() call that suspended `to` returns `value` (the first
 * switch to a new context drops it). Returns only when some later
 * coro_context_switch() names `from` as its `to`, and then returns that
 * switch's `value`.
 */
int coro_context_switch(coro_context *from, coro_context *to, int value);

#if defined(__x86_64__) && !defined(CORO_SWITCH_UCONTEXT)
/*
 * How the x86-64 switch restores MXCSR, the SSE control and status word
 * (switch_x86_64.S says why there are two ways):
 *
 *   CORO_MXCSR_COMPARE  load the arriving side's word only when one of its
 *                       control bits differs from ours; the status flags
 *                       stay the thread's. Cheap where writing a new value
 *                       into MXCSR is slow (Intel).
 *   CORO_MXCSR_LOAD     load the arriving side's word at every switch; the
 *                       status flags travel with each context. Cheap where
 *                       reading MXCSR back is slow (AMD).
 *
 * Either way every control bit (rounding, flush-to-zero, exception masks)
 * stays with its context, as the ABI requires. The mode is chosen before
 * main from the CPU's vendor: LOAD on AMD, COMPARE elsewhere. Tests and
 * benchmarks set it to run both ways on any CPU: only while no thread is
 * inside a coroutine.
 */
typedef enum { CORO_MXCSR_COMPARE, CORO_MXCSR_LOAD } coro_mxcsr_mode;

void coro_context_set_mxcsr_mode(coro_mxcsr_mode mode);
coro_mxcsr_mode coro_context_mxcsr_mode(void);
#endif

#endif /* CORO_CONTEXT_H */
