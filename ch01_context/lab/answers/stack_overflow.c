/*
 * answers/stack_overflow.c — a reference answer to Chapter 1, exercise 4,
 * its first two parts (check: tools/lab check ch01 stack_overflow).
 *
 * A recursion the compiler must keep as a recursion:
 *   - each call uses its frame after the recursive call returns (it adds
 *     the frame's bytes to the result), so the call is not the function's
 *     last act and cannot become a jump (a tail call) that reuses the frame;
 *   - the frame is volatile memory, so it is really written and cannot be
 *     optimised away;
 *   - it stops at a depth read from a volatile variable that is never
 *     reached: without some stop, GCC's -Winfinite-recursion (in -Wall)
 *     refuses to compile it under -Werror, and without a volatile one the
 *     compiler could reason about it.
 * Each frame is a few hundred bytes, well under the 4 KiB guard page, so
 * the first access past the stack's bottom lands in the guard page.
 */
#include <stdint.h>

#include "coro.h"

void *recurse_until_overflow(void *arg);

static volatile long never_this_deep = -1;

static long recurse(long depth)
{
    volatile char frame[256];

    frame[0] = (char)depth;
    frame[sizeof frame - 1] = (char)depth;
    if (depth == never_this_deep)
        return 0;
    return recurse(depth + 1) + frame[0] + frame[sizeof frame - 1];
}

void *recurse_until_overflow(void *arg)
{
    (void)arg;
    return (void *)(intptr_t)recurse(0);
}
