/*
 * generator.c — a coroutine as a generator.
 *
 * The coroutine computes Fibonacci numbers one at a time. It hands each
 * one out through a shared slot and yields; the caller resumes it whenever
 * it wants the next value. The generator's local variables (a, b) survive
 * between values because they live on the coroutine's own stack.
 */
#include <stdio.h>

#include "coro.h"

struct fib_state {
    unsigned limit;              /* how many numbers to produce */
    unsigned long long value;    /* the slot the generator writes to */
};

static void *fibonacci(void *arg)
{
    struct fib_state *st = arg;
    unsigned long long a = 0, b = 1;

    for (unsigned i = 0; i < st->limit; i++) {
        st->value = a;
        coro_yield(); /* hand the value out; continue here next time */
        unsigned long long next = a + b;
        a = b;
        b = next;
    }
    return "exhausted";
}

int main(void)
{
    struct fib_state st = {.limit = 12};
    coro *gen = coro_create(fibonacci, &st, 0);

    if (gen == NULL) {
        perror("coro_create");
        return 1;
    }
    printf("first %u Fibonacci numbers:", st.limit);
    /* Each resume runs the generator up to its next yield. */
    while (coro_resume(gen) == 0 && coro_status(gen) != CORO_DONE)
        printf(" %llu", st.value);
    printf("\ngenerator says: %s\n", (const char *)coro_result(gen));
    return coro_destroy(gen) == 0 ? 0 : 1;
}
