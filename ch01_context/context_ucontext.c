/*
 * context_ucontext.c — the portable back-end: POSIX ucontext.
 *
 * getcontext/makecontext/swapcontext do everything for us, at a price:
 * swapcontext saves and restores the signal mask, which is a system call
 * (rt_sigprocmask) on every switch. That is why this back-end is the slow
 * baseline the assembly one is measured against.
 */
#define _GNU_SOURCE
#include "context.h"

#include <stdint.h>
#include <stdlib.h>

/* makecontext passes only `int` arguments, so the context pointer travels
 * as two 32-bit halves and is put back together here. */
static void context_start(unsigned int high, unsigned int low)
{
    uintptr_t bits = ((uintptr_t)high << 16 << 16) | (uintptr_t)low;
    coro_context *ctx = (coro_context *)bits;

    ctx->entry(ctx->arg);
    abort(); /* unreachable: an entry function never returns */
}

void coro_context_make(coro_context *ctx, void *stack_lo, size_t size,
                       coro_context_entry entry, void *arg)
{
    uintptr_t bits = (uintptr_t)ctx;

    if (getcontext(&ctx->uc) != 0)
        abort(); /* cannot fail for a valid pointer */
    ctx->uc.uc_stack.ss_sp = stack_lo;
    ctx->uc.uc_stack.ss_size = size;
    ctx->uc.uc_link = NULL;
    ctx->entry = entry;
    ctx->arg = arg;
    makecontext(&ctx->uc, (void (*)(void))context_start, 2,
                (unsigned int)(bits >> 16 >> 16), (unsigned int)bits);
}

int coro_context_switch(coro_context *from, coro_context *to, int value)
{
    to->value = value; /* for the swapcontext() that suspended `to` */
    if (swapcontext(&from->uc, &to->uc) != 0)
        abort(); /* cannot fail for valid contexts */
    return from->value; /* set by whoever switched back to us */
}
