/*
 * sleepers.c — three tasks sleep 3, 1 and 2 units; they wake in deadline
 * order, whatever order they were started in.
 *
 * While all three sleep, nothing is ready: the pump does not spin, it puts
 * the thread to sleep until the earliest deadline (watch the CPU time
 * printed at the end: almost nothing, for a program that ran 300 ms).
 */
#include <stdio.h>
#include <sys/resource.h>

#include "coro.h"

static const uint64_t UNIT = 100 * CORO_MSEC;

static void *sleeper(void *arg)
{
    int units = *(const int *)arg;
    uint64_t start = coro_now();

    coro_sleep((uint64_t)units * UNIT);
    printf("  slept %d unit(s): woke after %3llu ms\n", units,
           (unsigned long long)((coro_now() - start) / CORO_MSEC));
    return NULL;
}

static double cpu_seconds(void)
{
    struct rusage usage;

    getrusage(RUSAGE_SELF, &usage);
    return (double)usage.ru_utime.tv_sec + (double)usage.ru_stime.tv_sec +
           ((double)usage.ru_utime.tv_usec + (double)usage.ru_stime.tv_usec) / 1e6;
}

int main(void)
{
    static const int units[] = {3, 1, 2};
    coro_sched *s = coro_sched_create();
    uint64_t start = coro_now();

    if (s == NULL)
        return 1;
    for (int i = 0; i < 3; i++)
        coro_go(s, sleeper, (void *)&units[i]);
    if (coro_sched_run(s) != 0)
        return 1;
    printf("wall %llu ms, CPU %.3f s\n",
           (unsigned long long)((coro_now() - start) / CORO_MSEC), cpu_seconds());
    return coro_sched_destroy(s) == 0 ? 0 : 1;
}
