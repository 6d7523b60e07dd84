/*
 * pool_parallel.c — a pool computing in parallel.
 *
 * Eight coroutines each count the primes in a slice of [1, 1,000,000).
 * The pool's two workers take them as they have room; each coroutine
 * runs to the end on the worker that started it. coro_pool_wait() returns
 * when all eight have finished. (The figures depend on the machine; the
 * count must not.)
 */
#include <stdio.h>

#include "coro.h"

enum { SLICES = 8, LIMIT = 1000000 };

struct slice {
    long from, to;
    long primes;
};

static int is_prime(long n)
{
    if (n < 2)
        return 0;
    for (long d = 2; d * d <= n; d++)
        if (n % d == 0)
            return 0;
    return 1;
}

static void *count_primes(void *arg)
{
    struct slice *sl = arg;

    for (long n = sl->from; n < sl->to; n++) {
        sl->primes += is_prime(n);
        if (n % 65536 == 0)
            coro_yield(); /* be fair to the other coroutines on this worker */
    }
    return NULL;
}

int main(void)
{
    static struct slice slices[SLICES];
    coro_pool *p = coro_pool_create(2, false);
    uint64_t start = coro_now();
    long total = 0;

    if (p == NULL)
        return 1;
    for (int i = 0; i < SLICES; i++) {
        slices[i].from = (long)i * LIMIT / SLICES;
        slices[i].to = (long)(i + 1) * LIMIT / SLICES;
        coro_pool_go(p, count_primes, &slices[i]);
    }
    coro_pool_wait(p);
    for (int i = 0; i < SLICES; i++)
        total += slices[i].primes;
    printf("  primes below %d: %ld (in %llu ms on 2 workers)\n", LIMIT, total,
           (unsigned long long)((coro_now() - start) / CORO_MSEC));
    return coro_pool_destroy(p) == 0 && total == 78498 ? 0 : 1;
}
