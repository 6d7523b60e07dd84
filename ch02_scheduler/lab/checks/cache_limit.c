/*
 * check cache_limit — Chapter 2, exercise 3.
 *
 * The exercise: make the stack cache's limit (STACK_CACHE_MAX in cache.c,
 * 1,024 finished guarded stacks) a parameter, and measure //bench:sched
 * with a cache of 0, where every coro_go() maps a new stack.
 *
 * What you provide: a change to the library in your lab (no answers/
 * file). Add
 *
 *     int coro_sched_set_cache_limit(coro_sched *s, size_t max_stacks);
 *
 * declared and documented in coro.h. It sets how many finished guarded
 * stacks `s` keeps for reuse from now on:
 *   - the default stays 1,024;
 *   - 0 keeps none: a finished coroutine's stack is unmapped at once (0 is
 *     not "the default" here, unlike coro_sched_set_stack_size());
 *   - the cache never holds more than the limit: lowering it below the
 *     number kept releases the extra stacks at once;
 *   - returns 0, EINVAL for a NULL scheduler, EPERM on a thread that does
 *     not own it. (Dense stacks are not checked: they are always kept.)
 * This check declares the prototype itself.
 *
 * What it verifies: each coroutine notes an address on its own stack;
 * once the coroutines have finished, the check asks the kernel (mincore())
 * which of those stacks are still mapped, that is, kept in the cache:
 * all 20 by default, none with a limit of 0, exactly 3 with a limit of
 * 3, 5 and then none when a limit is lowered on a full cache, and 1,024 of
 * 1,100 by default. The measurement part of the exercise is not checked.
 * Each part, and the errors, is a case run in a child process of its own
 * (a crash or a hang is reported as that case's failure). Prints
 * `check cache_limit: ok` and exits 0, or one
 * `check cache_limit: FAIL: CASE: ...` line per failed case and exits 1.
 */
#define CHECK_NAME "cache_limit"
#include "lab_check.h"

#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>

#include "coro.h"

int coro_sched_set_cache_limit(coro_sched *s, size_t max_stacks);

enum { MAX_COROUTINES = 1100 };

static uintptr_t stack_address[MAX_COROUTINES];

/* Note an address on this coroutine's own stack, let the others start
 * (so that all are alive at once, each on a stack of its own), return. */
static void *note_stack(void *arg)
{
    volatile char on_stack = 0;

    stack_address[(intptr_t)arg] = (uintptr_t)&on_stack;
    coro_yield();
    return NULL;
}

static bool mapped(uintptr_t address)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    unsigned char resident;

    if (mincore((void *)(address & ~(page - 1)), 1, &resident) == 0)
        return true;
    if (errno != ENOMEM)
        check_fail("mincore() failed unexpectedly (errno %d)", errno);
    return false;
}

/* Run n coroutines on `s` together; how many of their stacks are still
 * mapped once all have finished. */
static int run_and_count(coro_sched *s, int n)
{
    int kept = 0;

    for (int i = 0; i < n; i++)
        if (coro_go(s, note_stack, (void *)(intptr_t)i) != 0)
            check_fail("coro_go() failed");
    if (coro_sched_run(s) != 0)
        check_fail("coro_sched_run() failed");
    for (int i = 0; i < n; i++)
        kept += mapped(stack_address[i]);
    return kept;
}

static int count_mapped(int n)
{
    int kept = 0;

    for (int i = 0; i < n; i++)
        kept += mapped(stack_address[i]);
    return kept;
}

static coro_sched *new_sched(void)
{
    coro_sched *s = coro_sched_create();

    if (s == NULL)
        check_fail("coro_sched_create() returned NULL");
    return s;
}

static void destroy(coro_sched *s)
{
    if (coro_sched_destroy(s) != 0)
        check_fail("coro_sched_destroy() failed");
}

static void set_limit(coro_sched *s, size_t limit)
{
    int err = coro_sched_set_cache_limit(s, limit);

    if (err != 0)
        check_fail("coro_sched_set_cache_limit(s, %zu) returned %d, not 0",
                   limit, err);
}

static void *from_another_thread(void *arg)
{
    return (void *)(intptr_t)coro_sched_set_cache_limit(arg, 0);
}

static void case_errors(void)
{
    coro_sched *s;
    pthread_t thread;
    void *result;

    if (coro_sched_set_cache_limit(NULL, 1) != EINVAL)
        check_fail("coro_sched_set_cache_limit(NULL, 1) did not return EINVAL");
    s = new_sched();
    if (pthread_create(&thread, NULL, from_another_thread, s) != 0 ||
        pthread_join(thread, &result) != 0)
        check_fail("pthread_create() or pthread_join() failed");
    if ((intptr_t)result != EPERM)
        check_fail("coro_sched_set_cache_limit() from a thread that does not "
                   "own the scheduler returned %d, not EPERM",
                   (int)(intptr_t)result);
    destroy(s);
}

static void case_lowered(void)
{
    coro_sched *s = new_sched();
    int kept;

    /* The default keeps every finished stack (up to 1,024). */
    kept = run_and_count(s, 20);
    if (kept != 20)
        check_fail("with the default limit, %d of 20 finished stacks are still "
                   "mapped, not all 20 (the cache keeps them)", kept);

    /* Lowering the limit on a full cache releases the extra stacks. */
    set_limit(s, 5);
    kept = count_mapped(20);
    if (kept != 5)
        check_fail(
            "20 stacks cached, then coro_sched_set_cache_limit(s, 5): %d "
            "are still mapped, not 5 (the cache must never hold more "
            "than its limit)",
            kept);
    set_limit(s, 0);
    kept = count_mapped(20);
    if (kept != 0)
        check_fail("then coro_sched_set_cache_limit(s, 0): %d stacks are still "
                   "mapped, not 0", kept);
    destroy(s);
}

/* A limit of `limit` keeps exactly that many, of a crowd of 20 and then of
 * a second crowd of `again`; and coroutines still run. */
static void keeps_exactly(size_t limit, int again)
{
    coro_sched *s = new_sched();
    int kept;

    set_limit(s, limit);
    kept = run_and_count(s, 20);
    if (kept != (int)limit)
        check_fail("with a limit of %zu, %d of 20 finished stacks are still "
                   "mapped, not %zu%s", limit, kept, limit,
                   limit == 0 && kept == 20
                       ? " (0 must mean no cache, not the default)"
                   : kept == (int)limit + 1 || limit == 0
                       ? " (is the test against the limit off by one?)"
                       : "");
    kept = run_and_count(s, again);
    if (kept != (int)limit)
        check_fail("with a limit of %zu, after a second crowd of %d, %d "
                   "stacks are still mapped, not %zu", limit, again, kept,
                   limit);
    destroy(s);
}

static void case_zero(void)
{
    keeps_exactly(0, 1);
}

static void case_three(void)
{
    keeps_exactly(3, 20);
}

/* The default is still 1,024. */
static void case_default(void)
{
    coro_sched *s = new_sched();
    int kept = run_and_count(s, MAX_COROUTINES);

    if (kept != 1024)
        check_fail("with the default limit, %d of 1,100 finished stacks are "
                   "still mapped, not 1,024 (the default must stay 1,024)",
                   kept);
    destroy(s);
}

int main(void)
{
    static const check_case cases[] = {
        {"errors", case_errors},
        {"lowered", case_lowered},
        {"limit 0", case_zero},
        {"limit 3", case_three},
        {"default", case_default},
    };

    return check_main(cases, sizeof cases / sizeof cases[0]);
}
