/*
 * check ready_count — Chapter 2, exercise 1.
 *
 * The exercise: add coro_sched_ready(s), the number of entries in the
 * ready queue. Is the coroutine the pump is running in the queue? Should
 * it count?
 *
 * What you provide: a change to the library in your lab (no answers/
 * file). Add to it
 *
 *     size_t coro_sched_ready(const coro_sched *s);
 *
 * declared in coro.h (with its documentation, like every public call) and
 * defined in the library. It returns how many entries (coroutines and
 * posts) wait in the ready queue of `s`, and 0 for NULL. This check
 * declares the prototype itself, so it builds once the function exists.
 *
 * What it verifies, with coro_go(), coro_post(), coro_sched_step() and
 * coro_sched_run():
 *   - 0 for NULL and for a new scheduler;
 *   - queued work counts, coroutines and posts alike;
 *   - the coroutine or post the pump is running does not count: it was
 *     taken out of the queue (coro_sched_alive() is a different count);
 *   - entries count, not priority levels: five coroutines over three
 *     priorities are five;
 *   - a coroutine that yields counts again once requeued, one that
 *     returns does not, nor a finished joinable one awaiting
 *     coro_destroy();
 *   - a thousand posts count a thousand, and 0 is left after the run.
 * Each of the three parts is a case run in a child process of its own (a
 * crash or a hang is reported as that case's failure). Prints
 * `check ready_count: ok` and exits 0, or one
 * `check ready_count: FAIL: CASE: ...` line per failed case and exits 1.
 */
#define CHECK_NAME "ready_count"
#include "lab_check.h"

#include "coro.h"

size_t coro_sched_ready(const coro_sched *s);

static void expect(size_t got, size_t want, const char *where)
{
    if (got != want)
        check_fail("%s, coro_sched_ready() said %zu, not %zu", where, got,
                   want);
}

/* ── 1. What the running entry sees ───────────────────────────────────── */

static coro_sched *sched;
static size_t seen[8];
static size_t alive_seen[8];

static void *first_run(void *arg)
{
    int index = *(int *)arg;

    seen[index] = coro_sched_ready(sched);
    alive_seen[index] = coro_sched_alive(sched);
    coro_yield();
    return NULL;
}

static void post_sees(coro_sched *s, void *arg)
{
    seen[*(int *)arg] = coro_sched_ready(s);
}

static void running_entry_not_counted(void)
{
    static int index[4] = {0, 1, 2, 3};

    sched = coro_sched_create();
    if (sched == NULL)
        check_fail("coro_sched_create() returned NULL");
    expect(coro_sched_ready(NULL), 0, "for NULL");
    expect(coro_sched_ready(sched), 0, "on a new scheduler");
    for (int i = 0; i < 3; i++)
        if (coro_go(sched, first_run, &index[i]) != 0)
            check_fail("coro_go() failed");
    expect(coro_sched_ready(sched), 3, "after three coro_go() calls");
    if (coro_post(sched, post_sees, &index[3]) != 0)
        check_fail("coro_post() failed");
    expect(coro_sched_ready(sched), 4,
           "after three coro_go() and a coro_post()");
    if (coro_sched_run(sched) != 0)
        check_fail("coro_sched_run() failed");
    for (int i = 0; i < 3; i++) {
        if (seen[i] > 3)
            check_fail(
                "inside coroutine %d's first run (three coroutines and a "
                "post queued, coro_sched_alive() %zu), coro_sched_ready() "
                "said %zu, not 3: the coroutine the pump is running is not "
                "in the queue, and must not be counted",
                i + 1, alive_seen[i], seen[i]);
        if (seen[i] < 3)
            check_fail(
                "inside coroutine %d's first run, coro_sched_ready() said "
                "%zu, not 3 (the two others and the post, or the coroutines "
                "before it, which yielded and were requeued): count every "
                "push, the requeue of a yield too",
                i + 1, seen[i]);
    }
    if (seen[3] != 3)
        check_fail(
            "inside the post (three coroutines requeued behind it), "
            "coro_sched_ready() said %zu, not 3: the running post is not in "
            "the queue",
            seen[3]);
    expect(coro_sched_ready(sched), 0, "after coro_sched_run()");
    if (coro_sched_destroy(sched) != 0)
        check_fail("coro_sched_destroy() failed");
}

/* ── 2. Entries, not levels; yields, returns, joinable ones ──────────── */

static const int priorities[5] = {0, 0, 0, -1, 7};

static void *set_priority_then_yield(void *arg)
{
    int which = *(const int *)arg; /* 1 to 5 */

    coro_set_priority(coro_self(), priorities[which - 1]);
    for (int i = 0; i < 3; i++)
        coro_yield();
    return NULL;
}

static void *returns_at_once(void *arg)
{
    return arg;
}

static void step(coro_sched *s, const char *what)
{
    if (!coro_sched_step(s))
        check_fail("coro_sched_step() ran nothing (%s)", what);
}

static void entries_not_levels(void)
{
    static const int which[5] = {1, 2, 3, 4, 5};
    coro_sched *s = coro_sched_create();
    coro *joinable;

    if (s == NULL)
        check_fail("coro_sched_create() returned NULL");
    for (int i = 0; i < 5; i++)
        if (coro_go(s, set_priority_then_yield, (void *)&which[i]) != 0)
            check_fail("coro_go() failed");
    for (int i = 0; i < 5; i++)
        step(s, "five coroutines queued");
    /* Each has run once and yielded at priority 0, 0, 0, -1 or 7. */
    expect(coro_sched_ready(s), 5,
           "with five yielded coroutines queued at priorities 0, 0, 0, -1 "
           "and 7 (three levels)");
    step(s, "a yield");
    expect(coro_sched_ready(s), 5,
           "after a step whose coroutine yielded (it is requeued)");

    joinable = coro_spawn(s, returns_at_once, NULL);
    if (joinable == NULL)
        check_fail("coro_spawn() failed");
    expect(coro_sched_ready(s), 6, "after a coro_spawn()");
    while (coro_status(joinable) != CORO_DONE)
        step(s, "until the joinable one returned");
    if (coro_sched_run(s) != 0)
        check_fail("coro_sched_run() failed");
    expect(coro_sched_ready(s), 0,
           "after the run, a finished joinable coroutine not yet destroyed");
    if (coro_destroy(joinable) != 0)
        check_fail("coro_destroy() failed");

    for (int i = 0; i < 3; i++)
        if (coro_go(s, returns_at_once, NULL) != 0)
            check_fail("coro_go() failed");
    step(s, "a coroutine that returns");
    expect(coro_sched_ready(s), 2,
           "after a step whose coroutine returned (of three queued)");
    if (coro_sched_run(s) != 0)
        check_fail("coro_sched_run() failed");
    if (coro_sched_destroy(s) != 0)
        check_fail("coro_sched_destroy() failed");
}

/* ── 3. Many posts ────────────────────────────────────────────────────── */

static void nothing(coro_sched *s, void *arg)
{
    (void)s;
    (void)arg;
}

static void many_posts(void)
{
    coro_sched *s = coro_sched_create();

    if (s == NULL)
        check_fail("coro_sched_create() returned NULL");
    for (int i = 0; i < 1000; i++)
        if (coro_post(s, nothing, NULL) != 0)
            check_fail("coro_post() failed");
    expect(coro_sched_ready(s), 1000, "after a thousand posts");
    step(s, "a thousand posts");
    expect(coro_sched_ready(s), 999, "after one step of a thousand posts");
    if (coro_sched_run(s) != 0)
        check_fail("coro_sched_run() failed");
    expect(coro_sched_ready(s), 0, "after running a thousand posts");
    if (coro_sched_destroy(s) != 0)
        check_fail("coro_sched_destroy() failed");
}

int main(void)
{
    static const check_case cases[] = {
        {"running entry", running_entry_not_counted},
        {"entries not levels", entries_not_levels},
        {"many posts", many_posts},
    };

    return check_main(cases, sizeof cases / sizeof cases[0]);
}
