/*
 * check run_with_timeout — Chapter 5, exercise 2.
 *
 * The exercise: write run_with_timeout(s, fn, arg, ns): spawn fn, plus a
 * coroutine that cancels it after ns. What does coro_cancel() return when
 * fn finished at the same instant, and why is that safe with a joinable
 * handle but not with a detached one?
 *
 * What you provide: the file answers/run_with_timeout.c in your lab
 * directory, built with your library, defining (the check declares it
 * itself):
 *
 *   int run_with_timeout(coro_sched *s, coro_fn fn, void *arg, uint64_t ns);
 *
 *   Called on the thread that owns `s`, outside its pump (not from one of
 *   its coroutines or posts). Runs fn(arg) as a coroutine of `s`, plus a
 *   coroutine of your own that cancels it (coro_cancel()) `ns`
 *   nanoseconds later if it has not finished. Pumps `s` until fn has
 *   returned, and no longer than that needs: other coroutines of `s` may
 *   still be alive, and it must not wait for them. Before it returns,
 *   nothing it started is alive on `s` any more (the canceller is gone
 *   too, and no cancel of its own can come later), and no handle of its
 *   own is left (coro_sched_destroy() must succeed afterwards).
 *   Returns:
 *     0          fn finished without being cancelled;
 *     ETIMEDOUT  the canceller cancelled fn (fn still ran until it
 *                returned: run_with_timeout() waits for that);
 *     EINVAL     `s` or `fn` is NULL;
 *     the error of coro_spawn() or coro_go() (ESHUTDOWN: `s` is
 *     closed), with nothing left behind and fn never run.
 *
 * What it verifies, each case in a child process of its own (a crash or a
 * hang is reported as that case's failure):
 *   - errors:        NULL `s` and NULL `fn` are EINVAL; on a closed
 *                    scheduler ESHUTDOWN, fn never runs, nothing is alive.
 *   - finishes first: fn returns at once, the timeout is an hour, and a
 *                    bystander coroutine of `s` is parked: 0, fn ran once
 *                    and was never cancelled, and right after the call
 *                    only the bystander is alive (your canceller is not:
 *                    it did not wait out its hour, nor is it left
 *                    sleeping). A coroutine started afterwards is not
 *                    cancelled by anything.
 *   - times out:     fn sleeps in a loop until a sleep fails, then makes
 *                    three more calls before it returns; timeout 20 ms:
 *                    ETIMEDOUT, fn's sleep returned ECANCELED, fn had
 *                    returned when the call did, and not before 20 ms.
 *   - same instant:  fn's sleep, a helper's and your canceller's end in
 *                    one look of the pump, fn's first: fn returns, the
 *                    helper starts a new coroutine with coro_go() (it
 *                    reuses the stack of the last coroutine to finish),
 *                    then your canceller runs. The result must agree with
 *                    fn (ETIMEDOUT exactly when fn saw itself cancelled),
 *                    and the new coroutine must never be cancelled. Ten
 *                    rounds.
 *   Every case ends with coro_sched_destroy() == 0. A case still running
 *   after 10 s is killed and reported: usually a call that pumps until
 *   every coroutine of `s` has finished (coro_sched_run()), one that
 *   waits out the canceller's whole sleep, or a canceller that never
 *   cancels.
 *
 * The usual wrong answers, and the case that reports each:
 *   - the canceller left sleeping when fn finishes first: finishes first
 *     ("2 coroutines are alive"), then coro_sched_destroy() is EBUSY;
 *   - ETIMEDOUT whenever the canceller's sleep ended, whatever
 *     coro_cancel() returned: same instant;
 *   - fn run detached (coro_go()) and cancelled through the handle it
 *     had while it ran: same instant, which sees the coroutine that
 *     reused fn's struct cancelled;
 *   - a canceller that only sleeps: times out never ends (killed).
 * The one time measured is a lower bound (a sleep never ends early). Prints
 * `check run_with_timeout: ok` and exits 0, or one
 * `check run_with_timeout: FAIL: ...` line per failed case and exits 1.
 */
#define CHECK_NAME "run_with_timeout"
#include "lab_check.h"

#include <stdbool.h>
#include <stdint.h>

#include "coro.h"

int run_with_timeout(coro_sched *s, coro_fn fn, void *arg, uint64_t ns);

static coro_sched *new_sched(void)
{
    coro_sched *s = coro_sched_create();

    CHECK(s != NULL, "coro_sched_create() failed");
    return s;
}

static void destroy_sched(coro_sched *s)
{
    int err = coro_sched_destroy(s);

    CHECK(err == 0,
          "coro_sched_destroy() after the call returned %s: a coroutine or a "
          "joinable handle of run_with_timeout() is left on the scheduler",
          check_err_name(err));
}

/* ── The functions handed to run_with_timeout() ───────────────────────── */

struct job {
    int runs;          /* how many times fn started */
    bool returned;     /* fn reached its return */
    bool canceled;     /* coro_canceled() just before fn returned */
    int sleep_err;     /* the sleep that ended fn's loop */
    coro_sched *s;     /* same instant: where to start the helpers */
    uint64_t ns;       /* same instant: the timeout given */
    bool stranger_canceled; /* same instant: the new coroutine was */
    bool stranger_ran;
};

static void *returns_at_once(void *arg)
{
    struct job *j = arg;

    j->runs++;
    j->canceled = coro_canceled();
    j->returned = true;
    return (void *)42;
}

static void *sleeps_until_cancelled(void *arg)
{
    struct job *j = arg;
    int err;

    j->runs++;
    while ((err = coro_sleep(CORO_SEC)) == 0)
        continue;
    j->sleep_err = err;
    /* Cancelled coroutines may take their time: three more calls, each
     * ECANCELED after a yield, before fn returns. */
    for (int i = 0; i < 3; i++)
        coro_yield();
    j->canceled = coro_canceled();
    j->returned = true;
    return NULL;
}

/* Same instant. fn starts `recycler` and `hog`, then sleeps ns/2. The
 * recycler sleeps 3ns/4, the canceller (started before fn ran, or just
 * after) sleeps ns. The hog then spins past all three deadlines without
 * yielding, so the pump's next look fires all three timers at once, in
 * deadline order: fn runs and returns, the recycler starts a stranger
 * with coro_go() (which takes the last finished stack from the cache),
 * and only then does the canceller run. */
static void *stranger(void *arg)
{
    struct job *j = arg;

    j->stranger_ran = true;
    for (int i = 0; i < 3; i++) {
        if (coro_yield() != 0 || coro_canceled())
            j->stranger_canceled = true;
    }
    if (coro_park_for(CORO_MSEC) == ECANCELED || coro_canceled())
        j->stranger_canceled = true;
    return NULL;
}

static void *recycler(void *arg)
{
    struct job *j = arg;

    if (coro_sleep(j->ns / 4 * 3) == 0)
        CHECK(coro_go(j->s, stranger, j) == 0, "coro_go() of the stranger failed");
    return NULL;
}

static void *hog(void *arg)
{
    struct job *j = arg;
    uint64_t until = coro_now() + j->ns + CORO_MSEC;

    while (coro_now() < until)
        continue; /* holds the pump: no yield */
    return NULL;
}

static void *finishes_with_the_timeout(void *arg)
{
    struct job *j = arg;

    j->runs++;
    CHECK(coro_go(j->s, recycler, j) == 0, "coro_go() of a helper failed");
    CHECK(coro_go(j->s, hog, j) == 0, "coro_go() of a helper failed");
    coro_sleep(j->ns / 2);
    j->canceled = coro_canceled();
    j->returned = true;
    return NULL;
}

/* A coroutine of the check that stays parked while run_with_timeout()
 * works: it must not wait for it. */
static bool bystander_go_on;

static void *bystander(void *arg)
{
    (void)arg;
    while (!bystander_go_on)
        coro_park();
    return NULL;
}

static void *parks_briefly(void *arg)
{
    int *err = arg;

    *err = coro_park_for(30 * CORO_MSEC);
    if (coro_canceled())
        *err = ECANCELED;
    return NULL;
}

/* ── The cases ────────────────────────────────────────────────────────── */

static void case_errors(void)
{
    coro_sched *s = new_sched();
    struct job j = {0};
    int err;

    err = run_with_timeout(NULL, returns_at_once, &j, CORO_MSEC);
    CHECK(err == EINVAL, "a NULL scheduler returned %s, not EINVAL", check_err_name(err));
    err = run_with_timeout(s, NULL, &j, CORO_MSEC);
    CHECK(err == EINVAL, "a NULL fn returned %s, not EINVAL", check_err_name(err));
    CHECK(coro_sched_alive(s) == 0, "after the EINVAL calls %zu coroutines are alive",
          coro_sched_alive(s));
    CHECK(coro_sched_close(s) == 0, "coro_sched_close() failed");
    err = run_with_timeout(s, returns_at_once, &j, CORO_MSEC);
    CHECK(err == ESHUTDOWN, "on a closed scheduler it returned %s, not ESHUTDOWN",
          check_err_name(err));
    CHECK(j.runs == 0, "on a closed scheduler fn ran %d times", j.runs);
    CHECK(coro_sched_alive(s) == 0,
          "after ESHUTDOWN %zu coroutines are alive (a canceller left behind?)",
          coro_sched_alive(s));
    coro_sched_run(s);
    destroy_sched(s);
}

static void case_finishes_first(void)
{
    coro_sched *s = new_sched();
    coro *by = coro_spawn(s, bystander, NULL);
    struct job j = {0};
    int err, parked = -1;

    CHECK(by != NULL, "coro_spawn() of the bystander failed");
    /* The bystander parks before the call begins. */
    CHECK(coro_sched_step(s), "the bystander did not run");
    err = run_with_timeout(s, returns_at_once, &j, 3600 * CORO_SEC);
    CHECK(err == 0, "fn returned at once and the timeout is an hour: got %s, not 0",
          check_err_name(err));
    CHECK(j.runs == 1, "fn ran %d times, not once", j.runs);
    CHECK(!j.canceled, "fn was cancelled although it returned at once");
    CHECK(coro_sched_alive(s) == 1,
          "right after the call %zu coroutines are alive, not 1 (the bystander): "
          "the canceller is still there",
          coro_sched_alive(s));
    /* Nothing of the call may cancel anyone later, either. */
    CHECK(coro_go(s, parks_briefly, &parked) == 0, "coro_go() failed");
    bystander_go_on = true;
    coro_wake(by);
    err = coro_sched_run(s);
    CHECK(err == 0, "coro_sched_run() afterwards returned %s", check_err_name(err));
    CHECK(parked == ETIMEDOUT,
          "a coroutine started after the call had its 30 ms park end with %s, "
          "not ETIMEDOUT (a late cancel from the call?)",
          check_err_name(parked));
    CHECK(coro_status(by) == CORO_DONE, "the bystander did not finish");
    CHECK(coro_destroy(by) == 0, "coro_destroy() of the bystander failed");
    destroy_sched(s);
}

static void case_times_out(void)
{
    coro_sched *s = new_sched();
    struct job j = {0};
    uint64_t start, took;
    int err;

    start = coro_now();
    err = run_with_timeout(s, sleeps_until_cancelled, &j, 20 * CORO_MSEC);
    took = coro_now() - start;
    CHECK(j.runs == 1, "fn ran %d times, not once", j.runs);
    CHECK(j.returned,
          "run_with_timeout() returned before fn did: it must wait until the "
          "cancelled fn returns");
    CHECK(j.sleep_err == ECANCELED, "fn's sleep ended with %s, not ECANCELED",
          check_err_name(j.sleep_err));
    CHECK(err == ETIMEDOUT, "fn was cancelled by the timeout: got %s, not ETIMEDOUT",
          check_err_name(err));
    CHECK(took >= 20 * CORO_MSEC,
          "the timeout was 20 ms, yet the call returned after %.3f ms: fn was "
          "cancelled early (ns taken in another unit?)",
          (double)took / 1e6);
    CHECK(coro_sched_alive(s) == 0, "right after the call %zu coroutines are alive, not 0",
          coro_sched_alive(s));
    destroy_sched(s);
}

static void case_same_instant(void)
{
    for (int round = 0; round < 10; round++) {
        coro_sched *s = new_sched();
        struct job j = {0};
        int err, want;

        j.s = s;
        j.ns = 8 * CORO_MSEC;
        err = run_with_timeout(s, finishes_with_the_timeout, &j, j.ns);
        CHECK(j.runs == 1 && j.returned, "round %d: fn ran %d times, returned: %s", round,
              j.runs, j.returned ? "yes" : "no");
        CHECK(coro_sched_run(s) == 0, "round %d: coro_sched_run() failed", round);
        CHECK(j.stranger_ran, "round %d: the helper's coroutine never ran", round);
        CHECK(!j.stranger_canceled,
              "round %d: a coroutine started with coro_go() just after fn finished "
              "was cancelled: the canceller cancelled through a handle that had "
              "been recycled (fn run detached?)",
              round);
        want = j.canceled ? ETIMEDOUT : 0;
        CHECK(err == want,
              "round %d: got %s, but fn %s cancelled when it returned: a timeout "
              "is reported exactly when the cancel reached fn (what did the "
              "canceller's coro_cancel() return?)",
              round, check_err_name(err), j.canceled ? "was" : "was not");
        destroy_sched(s);
    }
}

int main(void)
{
    static const check_case cases[] = {
        {"errors", case_errors},
        {"finishes first", case_finishes_first},
        {"times out", case_times_out},
        {"same instant", case_same_instant},
    };

    return check_main(cases, sizeof cases / sizeof cases[0]);
}
