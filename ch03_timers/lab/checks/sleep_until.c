/*
 * check sleep_until — Chapter 3, exercise 3.
 *
 * The exercise: add coro_sleep_until(deadline). Which functions change?
 *
 * What you provide: a change to the library in your lab directory (no
 * file under answers/): the function
 *
 *   int coro_sleep_until(uint64_t deadline);
 *
 * declared in coro.h (documented, as every public function is) and
 * defined in the library. It is coro_sleep() with an absolute deadline, a
 * coro_now() time instead of a duration:
 *   - only time ends it: a coro_wake() sent meanwhile does not, and stays
 *     as a permit for the coroutine's next park;
 *   - it returns 0, never before `deadline` (coro_now() >= deadline when it
 *     returns), also for a deadline already past;
 *   - sleepers wake in deadline order; equal deadlines in the order they
 *     went to sleep;
 *   - EPERM outside a scheduled coroutine: on the thread's own stack, in a
 *     post, in a hand-made coroutine (coro_create()).
 * coro_sleep() must keep working as before.
 *
 * What it verifies: exactly the list above, each case in a child process
 * of its own (a crash or a hang is reported as that case's failure). The
 * only times it compares are "not before the deadline", which a loaded
 * machine cannot break. Prints `check sleep_until: ok` and exits 0, or one
 * `check sleep_until: FAIL: ...` line per failed case and exits 1.
 */
#define CHECK_NAME "sleep_until"
#include "lab_check.h"

#include <inttypes.h>
#include <stdint.h>

#include "coro.h"

/* Weak: without the function the check still links, and says so. */
int coro_sleep_until(uint64_t deadline) __attribute__((weak));

static coro_sched *new_sched(void)
{
    coro_sched *s = coro_sched_create();

    CHECK(s != NULL, "coro_sched_create() failed");
    return s;
}

static void run_to_end(coro_sched *s, const char *what)
{
    int err = coro_sched_run(s);

    CHECK(err == 0, "%s: coro_sched_run() returned %s%s", what, check_err_name(err),
          err == EDEADLK ? " (a sleeper was left with no timer: a deadline turned into "
                           "\"never\"?)"
                         : "");
}

/* ── eperm ────────────────────────────────────────────────────────────── */

static int post_result = -1;

static void post_sleeps(coro_sched *s, void *arg)
{
    (void)s;
    (void)arg;
    post_result = coro_sleep_until(coro_now());
}

static void *handmade(void *arg)
{
    *(int *)arg = coro_sleep_until(coro_now());
    return NULL;
}

static void case_eperm(void)
{
    coro_sched *s = new_sched();
    coro *c;
    int err, result = -1;

    err = coro_sleep_until(coro_now() + CORO_MSEC);
    CHECK(err == EPERM, "on the thread's own stack it returned %s, expected EPERM",
          check_err_name(err));
    CHECK(coro_post(s, post_sleeps, NULL) == 0, "coro_post failed");
    run_to_end(s, "a post");
    CHECK(post_result == EPERM, "in a post it returned %s, expected EPERM",
          check_err_name(post_result));
    c = coro_create(handmade, &result, 0);
    CHECK(c != NULL, "coro_create failed");
    CHECK(coro_resume(c) == 0 && coro_status(c) == CORO_DONE,
          "a hand-made coroutine calling coro_sleep_until() did not come straight back");
    CHECK(result == EPERM, "in a hand-made coroutine it returned %s, expected EPERM",
          check_err_name(result));
    coro_destroy(c);
    coro_sched_destroy(s);
}

/* ── not early ────────────────────────────────────────────────────────── */

struct sleeper {
    uint64_t deadline;
    int result;
    uint64_t woke;
    int order;
    int *clock;
    coro *self;
};

static void *sleep_once(void *arg)
{
    struct sleeper *p = arg;

    p->self = coro_self();
    p->result = coro_sleep_until(p->deadline);
    p->woke = coro_now();
    if (p->clock != NULL)
        p->order = ++*p->clock;
    return NULL;
}

static void case_not_early(void)
{
    coro_sched *s = new_sched();
    uint64_t now = coro_now();
    struct sleeper future = {.deadline = now + 3 * CORO_MSEC, .result = -1};
    struct sleeper past = {.deadline = now - CORO_MSEC, .result = -1};
    struct sleeper zero = {.deadline = 0, .result = -1};

    coro_go(s, sleep_once, &future);
    coro_go(s, sleep_once, &past);
    coro_go(s, sleep_once, &zero);
    run_to_end(s, "sleepers until now + 3 ms, now - 1 ms and 0");
    CHECK(future.result == 0, "coro_sleep_until(now + 3 ms) returned %s, expected 0 (a sleep "
          "ends only by time, so it always returns 0)", check_err_name(future.result));
    CHECK(future.woke >= future.deadline,
          "coro_sleep_until(now + 3 ms) returned %" PRIu64 " ns before its deadline",
          future.deadline - future.woke);
    CHECK(past.result == 0, "coro_sleep_until(a deadline 1 ms past) returned %s, expected 0",
          check_err_name(past.result));
    CHECK(zero.result == 0, "coro_sleep_until(0) returned %s, expected 0",
          check_err_name(zero.result));
    coro_sched_destroy(s);
}

/* ── order ────────────────────────────────────────────────────────────── */

static void case_order(void)
{
    enum { N = 7 };
    /* Deadlines, in units of 1 ms from a base; the ones with equal units
     * must wake in the order they were started (their index). */
    static const int units[N] = {3, 1, 2, 1, 3, 2, 1};
    static const int expected[N] = {6, 1, 4, 2, 7, 5, 3}; /* wake turn of each */
    coro_sched *s = new_sched();
    struct sleeper p[N];
    uint64_t base = coro_now() + CORO_MSEC;
    int clock = 0;

    for (int i = 0; i < N; i++) {
        p[i] = (struct sleeper){.deadline = base + (uint64_t)units[i] * CORO_MSEC,
                                .result = -1, .clock = &clock};
        coro_go(s, sleep_once, &p[i]);
    }
    run_to_end(s, "seven sleepers");
    for (int i = 0; i < N; i++) {
        CHECK(p[i].result == 0, "sleeper %d returned %s", i, check_err_name(p[i].result));
        CHECK(p[i].woke >= p[i].deadline, "sleeper %d woke before its deadline", i);
        CHECK(p[i].order == expected[i],
              "sleeper %d (deadline base + %d ms) woke %d-th, expected %d-th (deadline order; "
              "equal deadlines in the order they went to sleep)",
              i, units[i], p[i].order, expected[i]);
    }
    coro_sched_destroy(s);
}

/* ── a wake does not end it ───────────────────────────────────────────── */

struct keeps_permit {
    uint64_t deadline;
    int result, park_result;
    uint64_t woke;
    coro *self;
};

static void *sleep_then_park(void *arg)
{
    struct keeps_permit *p = arg;

    p->self = coro_self();
    p->result = coro_sleep_until(p->deadline);
    p->woke = coro_now();
    /* With the permit kept, a park with a past deadline returns 0 at once;
     * without it, ETIMEDOUT. */
    p->park_result = coro_park_until(0);
    return NULL;
}

static void *wake_target(void *arg)
{
    struct keeps_permit *p = arg;

    coro_wake(p->self);
    return NULL;
}

static void case_wake(void)
{
    coro_sched *s = new_sched();
    struct keeps_permit p = {.deadline = coro_now() + 20 * CORO_MSEC, .result = -1,
                             .park_result = -1};

    coro_go(s, sleep_then_park, &p);
    coro_go(s, wake_target, &p); /* runs once the sleeper sleeps */
    run_to_end(s, "a sleeper sent a coro_wake()");
    CHECK(p.woke >= p.deadline,
          "a coro_wake() ended coro_sleep_until() %" PRIu64 " ns before its deadline (it waits "
          "like a park: a sleep is ended only by time)",
          p.deadline - p.woke);
    CHECK(p.result == 0, "the woken sleeper's coro_sleep_until() returned %s, expected 0",
          check_err_name(p.result));
    CHECK(p.park_result == 0,
          "the wake sent during the sleep should stay as a permit for the next park, but "
          "coro_park_until(0) afterwards returned %s",
          check_err_name(p.park_result));
    coro_sched_destroy(s);
}

/* ── coro_sleep still works ───────────────────────────────────────────── */

struct plain {
    uint64_t start, woke;
    int result;
};

static void *sleep_plain(void *arg)
{
    struct plain *p = arg;

    p->start = coro_now();
    p->result = coro_sleep(2 * CORO_MSEC);
    p->woke = coro_now();
    return NULL;
}

static void case_sleep(void)
{
    coro_sched *s = new_sched();
    struct plain p = {.result = -1};

    coro_go(s, sleep_plain, &p);
    run_to_end(s, "coro_sleep(2 ms)");
    CHECK(p.result == 0 && p.woke - p.start >= 2 * CORO_MSEC,
          "coro_sleep(2 ms) returned %s after %" PRIu64 " ns", check_err_name(p.result),
          p.woke - p.start);
    CHECK(coro_sleep(CORO_MSEC) == EPERM, "coro_sleep() on the thread's own stack is not EPERM");
    coro_sched_destroy(s);
}

int main(void)
{
    static const check_case cases[] = {
        {"eperm", case_eperm},
        {"not early", case_not_early},
        {"order", case_order},
        {"a wake", case_wake},
        {"coro_sleep", case_sleep},
    };

    if (coro_sleep_until == NULL) {
        printf("check sleep_until: FAIL: the library defines no coro_sleep_until(): add it (and "
               "its declaration in coro.h)\n");
        return 1;
    }
    return check_main(cases, sizeof cases / sizeof cases[0]);
}
