/*
 * check dense_guard — Chapter 2, exercise 5.
 *
 * The exercise: give dense stacks a guard page every 64 stacks. What does
 * it cost in mappings, and which overflows does it catch?
 *
 * What you provide: a change to the library in your lab (stack.c, and
 * whatever else it needs; no answers/ file and no new function). In dense
 * mode (coro_sched_use_dense_stacks()), at least one stack of every 64
 * consecutive ones, as carved, has an inaccessible guard page just below
 * its end, so that its overflow faults at once, as a guarded stack's does.
 * Every other dense stack keeps its canary: its overflow is still caught
 * when the pump checks the canary (the "stack overflow" abort). Stacks
 * that do not overflow must work as before, with their full size.
 *
 * What it verifies, on a dense scheduler with 16 KiB stacks, in two cases
 * (each in a child process of its own, and each stack in a child of the
 * case's, since an overflow must kill it):
 *   - 3,000 coroutines that each use 12 KiB of their stack, and yield,
 *     run to the end (no guard page overlaps a stack);
 *   - for each stack number k from 0 to 255: k coroutines are started
 *     before it (so that it is the k-th stack carved), then it recurses
 *     about 6 KiB past the end of its stack, writing every page on the
 *     way. If it comes back from that, it says so, and the canary must
 *     then abort the child (SIGABRT); if it does not come back, the child
 *     must have died of a signal: the overflow was caught at once. An
 *     overflow that nothing notices fails the check;
 *   - among stacks 0 to 255, every 64 consecutive ones include one whose
 *     overflow was caught at once.
 * It prints, when it passes, which stacks fault at once and how many
 * mappings 1,024 dense stacks add: the exercise's question about cost.
 * Prints `check dense_guard: ok` and exits 0, or one
 * `check dense_guard: FAIL: CASE: ...` line per failed case and exits 1.
 */
#define CHECK_NAME "dense_guard"
#include "lab_check.h"

#include <fcntl.h>
#include <stdint.h>
#include <sys/resource.h>

#include "coro.h"

enum {
    STACK_SIZE = 16 * 1024,
    OVERRUN = 6 * 1024, /* how far past its end a stack overflows */
    NUMBERS = 256,      /* the stack numbers tried */
    WINDOW = 64
};

/* ── In the child ─────────────────────────────────────────────────────── */

static int report_fd; /* the pipe to the parent */

/* Recurse until a local lies below `floor`. Each frame writes all of its
 * 512-byte array, as a real overflow would, so no page on the way is
 * skipped and a canary on the way is overwritten. */
static __attribute__((noinline)) int dig(uintptr_t floor, int depth)
{
    volatile char pad[512];

    for (size_t i = 0; i < sizeof pad; i++)
        pad[i] = (char)(depth + 1);
    if ((uintptr_t)&pad[0] > floor)
        return dig(floor, depth + 1) + pad[0];
    return pad[sizeof pad - 1];
}

static void *overflow(void *arg)
{
    volatile char top = 0;

    (void)arg;
    /* &top is near the top of this stack: its end is STACK_SIZE below. */
    (void)dig((uintptr_t)&top - STACK_SIZE - OVERRUN, 0);
    (void)!write(report_fd, "R", 1); /* came back: not caught at once */
    return NULL;
}

static void *quiet(void *arg)
{
    return arg;
}

static void *deep_and_yield(void *arg)
{
    volatile char top = 0;

    (void)arg;
    (void)dig((uintptr_t)&top - 12 * 1024, 0);
    coro_yield();
    (void)dig((uintptr_t)&top - 12 * 1024, 0);
    return NULL;
}

static coro_sched *dense_sched(void)
{
    coro_sched *s = coro_sched_create();

    if (s == NULL || coro_sched_use_dense_stacks(s) != 0 ||
        coro_sched_set_stack_size(s, STACK_SIZE) != 0)
        _exit(3);
    return s;
}

/* Stack number k overflows; the k before it are carved first. */
static void child_overflow(int k)
{
    coro_sched *s = dense_sched();

    for (int i = 0; i < k; i++)
        if (coro_go(s, quiet, NULL) != 0)
            _exit(3);
    if (coro_go(s, overflow, NULL) != 0)
        _exit(3);
    (void)coro_sched_run(s);
    _exit(0); /* the overflow went unnoticed */
}

static void child_no_overflow(void)
{
    coro_sched *s = dense_sched();

    for (int i = 0; i < 3000; i++)
        if (coro_go(s, deep_and_yield, NULL) != 0)
            _exit(3);
    if (coro_sched_run(s) != 0 || coro_sched_destroy(s) != 0)
        _exit(4);
    _exit(0);
}

/* ── In the parent ────────────────────────────────────────────────────── */

struct outcome {
    bool came_back; /* the overflowing coroutine returned from dig() */
    int status;     /* from waitpid() */
};

static struct outcome in_child(int k)
{
    struct outcome o = {false, 0};
    int fds[2];
    pid_t pid;
    char byte;

    fflush(stdout);
    if (pipe(fds) != 0)
        check_fail("pipe() failed");
    pid = fork();
    if (pid < 0)
        check_fail("fork() failed");
    if (pid == 0) {
        struct rlimit no_core = {0, 0};
        int null = open("/dev/null", O_WRONLY);

        setrlimit(RLIMIT_CORE, &no_core);
        if (null >= 0)
            dup2(null, STDERR_FILENO); /* the canary's message */
        close(fds[0]);
        report_fd = fds[1];
        if (k < 0)
            child_no_overflow();
        child_overflow(k);
    }
    close(fds[1]);
    o.came_back = read(fds[0], &byte, 1) == 1;
    close(fds[0]);
    if (waitpid(pid, &o.status, 0) != pid)
        check_fail("waitpid() failed");
    return o;
}

static size_t count_mappings(void)
{
    FILE *maps = fopen("/proc/self/maps", "r");
    size_t lines = 0;
    int ch;

    if (maps == NULL)
        return 0;
    while ((ch = fgetc(maps)) != EOF)
        lines += ch == '\n';
    fclose(maps);
    return lines;
}

static void *yield_once(void *arg)
{
    coro_yield();
    return arg;
}

/* How many mappings 1,024 dense stacks add (all suspended at once). */
static size_t region_mappings(void)
{
    static size_t during;
    coro_sched *s = coro_sched_create();
    size_t before;

    if (s == NULL || coro_sched_use_dense_stacks(s) != 0 ||
        coro_sched_set_stack_size(s, STACK_SIZE) != 0)
        check_fail("could not make a dense scheduler with 16 KiB stacks");
    before = count_mappings();
    for (int i = 0; i < 1024; i++)
        if (coro_go(s, yield_once, NULL) != 0)
            check_fail("coro_go() failed on a dense scheduler");
    during = count_mappings();
    if (coro_sched_run(s) != 0 || coro_sched_destroy(s) != 0)
        check_fail("coro_sched_run() or coro_sched_destroy() failed");
    return during > before ? during - before : 0;
}

static const char *describe(int status, char *out, size_t size)
{
    if (WIFEXITED(status))
        snprintf(out, size, "exited with %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(out, size, "died of signal %d", WTERMSIG(status));
    else
        snprintf(out, size, "status %d", status);
    return out;
}

static void case_no_overflow(void)
{
    char text[64];
    struct outcome o = in_child(-1);

    if (!WIFEXITED(o.status) || WEXITSTATUS(o.status) != 0)
        check_fail("3,000 dense coroutines that each use 12 KiB of their 16 "
                   "KiB stack, and never overflow, did not run to the end (the "
                   "child %s): does a guard page take part of a stack?",
                   describe(o.status, text, sizeof text));
}

static void case_overflows(void)
{
    bool at_once[NUMBERS];
    char text[64], list[256] = "";
    struct outcome o;
    int last = -1;

    for (int k = 0; k < NUMBERS; k++) {
        o = in_child(k);
        if (WIFEXITED(o.status) && WEXITSTATUS(o.status) == 3)
            check_fail("could not set up dense stack %d (a dense scheduler "
                       "with 16 KiB stacks, and %d coroutines before it)", k,
                       k);
        if (!WIFSIGNALED(o.status))
            check_fail("dense stack %d overflowed by %d KiB and nothing "
                       "noticed (the child %s): a stack without a guard page "
                       "must keep its canary", k, OVERRUN / 1024,
                       describe(o.status, text, sizeof text));
        if (o.came_back && WTERMSIG(o.status) != SIGABRT)
            check_fail("dense stack %d overflowed, came back, and the child "
                       "then %s, not SIGABRT from the canary check",
                       k, describe(o.status, text, sizeof text));
        at_once[k] = !o.came_back;
    }
    for (int k = 0; k < NUMBERS; k++) {
        if (at_once[k]) {
            if (strlen(list) < sizeof list - 8)
                snprintf(list + strlen(list), sizeof list - strlen(list),
                         "%s%d", last < 0 ? "" : ", ", k);
            last = k;
        }
        if (k - last >= WINDOW && last < 0)
            check_fail("no overflow of dense stacks 0 to %d faulted at once "
                       "(each was seen only by its canary, after the fact): "
                       "at least one stack in every %d needs a guard page "
                       "just below it", k, WINDOW);
        if (k - last >= WINDOW)
            check_fail("no overflow of dense stacks %d to %d faulted at once "
                       "(the ones that did: %s): at least one stack in every "
                       "%d needs a guard page just below it", k - WINDOW + 1,
                       k, list, WINDOW);
    }
    printf("dense_guard: overflows caught at once: stacks %s; 1,024 dense "
           "stacks add %zu mappings\n", list, region_mappings());
}

int main(void)
{
    static const check_case cases[] = {
        {"no overflow", case_no_overflow},
        {"overflows", case_overflows},
    };

    return check_main(cases, sizeof cases / sizeof cases[0]);
}
