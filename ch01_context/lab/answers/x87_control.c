/*
 * answers/x87_control.c — a reference answer to Chapter 1, exercise 3
 * (check: tools/lab check ch01 x87_control).
 *
 * The x87 control word's precision control (bits 8-9) says how many
 * mantissa bits x87 arithmetic rounds each result to: 11 = 64 bits (the
 * Linux default, the full `long double`), 10 = 53, 00 = 24. On x86-64
 * only `long double` uses x87; `float` and `double` use SSE and MXCSR, so
 * a test with `double` would not see the x87 word at all.
 *
 * The test: a coroutine lowers its own precision to 24 bits and yields.
 * Back on the thread's own stack, 1/3 in `long double` must still come out
 * with 64 bits. With fnstcw and fldcw removed from the switch, the
 * coroutine's control word stays loaded after the switch back, and main's
 * 1/3 is rounded to 24 bits. The coroutine checks its own side too: after
 * main resumes it, its 24 bits are still in force.
 */
#include "coro.h"

int x87_control_test(void);

#if defined(__x86_64__)

#define PRECISION_MASK 0x0300u
#define PRECISION_24 0x0000u

static unsigned short x87_control_get(void)
{
    unsigned short control;

    __asm__ volatile("fnstcw %0" : "=m"(control) : : "memory");
    return control;
}

static void x87_control_set(unsigned short control)
{
    __asm__ volatile("fldcw %0" : : "m"(control) : "memory");
}

/* 1/3 computed at run time, in the precision in force at the call:
 * volatile operands, so the compiler cannot fold the division into a
 * constant; a volatile result and "memory" on the asm above, so it cannot
 * move the division across a change of the control word. */
static long double one_third(void)
{
    volatile long double one = 1.0L, three = 3.0L, third;

    third = one / three;
    return third;
}

struct seen {
    long double coroutine_third; /* computed after main resumed us */
};

static void *lower_precision(void *arg)
{
    struct seen *seen = arg;

    x87_control_set((unsigned short)((x87_control_get() & ~PRECISION_MASK) |
                                     PRECISION_24));
    coro_yield(); /* main computes with its own word meanwhile */
    seen->coroutine_third = one_third();
    return NULL;
}

int x87_control_test(void)
{
    struct seen seen = {0};
    long double before = one_third(), after, single;
    unsigned short mine = x87_control_get();
    coro *c = coro_create(lower_precision, &seen, 0);
    int ok;

    if (c == NULL)
        return 2;
    coro_resume(c);            /* the coroutine set 24 bits and yielded */
    after = one_third();       /* main's own precision: still the same? */
    coro_resume(c);            /* the coroutine computes and returns */
    coro_destroy(c);

    /* What 24 bits give, to compare the coroutine's result against. */
    x87_control_set((unsigned short)((mine & ~PRECISION_MASK) | PRECISION_24));
    single = one_third();
    x87_control_set(mine);

    ok = after == before && seen.coroutine_third == single && single != before;
    x87_control_set(mine); /* leave the thread as we found it */
    return ok ? 0 : 1;
}

#else

int x87_control_test(void)
{
    return 1; /* there is no x87 unit: the exercise is x86-64 only */
}

#endif
