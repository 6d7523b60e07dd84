/*
 * check poll_event — Chapter 3, exercise 5.
 *
 * The exercise: make coro_sched_poll_for() return as soon as a given
 * event is set, without a new API (hint: a coroutine that awaits the
 * event).
 *
 * What you provide: the file answers/poll_event.c in your lab directory,
 * built with your library (unchanged), defining
 *
 *   int poll_for_event(coro_sched *s, coro_event *e, uint64_t ns);
 *
 * Called on the thread that owns `s`, outside `s`'s pump, with a
 * manual-reset event `e`: it runs `s`'s coroutines and posts as
 * coro_sched_poll_for() does, for up to `ns` nanoseconds, and returns
 *   - 0 as soon as `e` is set (at once if it is set already): the entries
 *     that were ready when the set happened may finish their turn, but the
 *     call must not keep pumping until `ns` has passed;
 *   - ETIMEDOUT when `ns` has passed first (and not before);
 *   - EINVAL when `s` or `e` is NULL.
 * It leaves nothing behind: when it returns, no coroutine it started is
 * alive, and none waits on `e` (coro_event_destroy(e) returns 0).
 *
 * What it verifies, each case in a child process of its own (a crash or a
 * hang is reported as that case's failure):
 *   - einval:      NULL scheduler or event.
 *   - already set: 0, and nothing left alive.
 *   - busy:        a coroutine Y yields in a loop all the while; another
 *                  sets `e` after 50 yields of its own. The call returns 0,
 *                  only after the set, and Y ran at most 16 more times
 *                  between the set and the return (a pump that kept going
 *                  until `ns`, 2 s here, runs Y hundreds of thousands of
 *                  times); only Y is still alive.
 *   - idle:        the only other coroutine sleeps 5 ms, then sets `e`: 0,
 *                  after the set, nothing left alive.
 *   - timeout:     nobody sets `e`; ns = 20 ms: ETIMEDOUT, not before 20
 *                  ms, nothing alive, nothing waiting on `e`.
 * The only times it compares are "not before", which a loaded machine
 * cannot break. Prints `check poll_event: ok` and exits 0, or one
 * `check poll_event: FAIL: ...` line per failed case and exits 1.
 */
#define CHECK_NAME "poll_event"
#include "lab_check.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>

#include "coro.h"

int poll_for_event(coro_sched *s, coro_event *e, uint64_t ns);

static coro_sched *new_sched(void)
{
    coro_sched *s = coro_sched_create();

    CHECK(s != NULL, "coro_sched_create() failed");
    return s;
}

static void new_gate(coro_event *e, bool set)
{
    CHECK(coro_event_init(e, true, set) == 0, "coro_event_init failed");
}

static void nothing_left(coro_sched *s, coro_event *e, size_t alive_expected, const char *what)
{
    size_t alive = coro_sched_alive(s);
    int err;

    CHECK(alive == alive_expected,
          "%s: %zu coroutine(s) alive when poll_for_event() returned, expected %zu (the "
          "watcher must have finished: its state may live on poll_for_event()'s stack)",
          what, alive, alive_expected);
    err = coro_event_destroy(e);
    CHECK(err == 0,
          "%s: coro_event_destroy() after poll_for_event() returned %s: a coroutine still "
          "waits on the event",
          what, check_err_name(err));
}

/* ── einval, already set ──────────────────────────────────────────────── */

static void case_einval(void)
{
    coro_sched *s = new_sched();
    coro_event e;
    int err;

    new_gate(&e, false);
    err = poll_for_event(NULL, &e, CORO_MSEC);
    CHECK(err == EINVAL, "poll_for_event(NULL, e, ...) returned %s, expected EINVAL",
          check_err_name(err));
    err = poll_for_event(s, NULL, CORO_MSEC);
    CHECK(err == EINVAL, "poll_for_event(s, NULL, ...) returned %s, expected EINVAL",
          check_err_name(err));
    coro_event_destroy(&e);
    coro_sched_destroy(s);
}

static void case_already_set(void)
{
    coro_sched *s = new_sched();
    coro_event e;
    int err;

    new_gate(&e, true);
    err = poll_for_event(s, &e, 2 * CORO_SEC);
    CHECK(err == 0, "with the event set already it returned %s, expected 0", check_err_name(err));
    nothing_left(s, &e, 0, "set already");
    CHECK(coro_sched_destroy(s) == 0, "coro_sched_destroy() failed");
}

/* ── busy ─────────────────────────────────────────────────────────────── */

struct busy {
    coro_event *e;
    bool stop;
    unsigned long y_runs;      /* Y's resumes so far */
    unsigned long y_at_set;    /* Y's resumes when the set happened */
    bool set_done;
};

static void *yielder(void *arg)
{
    struct busy *b = arg;

    while (!b->stop) {
        b->y_runs++;
        coro_yield();
    }
    return NULL;
}

static void *setter_after_yields(void *arg)
{
    struct busy *b = arg;

    for (int i = 0; i < 50; i++)
        coro_yield();
    b->y_at_set = b->y_runs;
    b->set_done = true;
    coro_event_set(b->e);
    return NULL;
}

static void case_busy(void)
{
    coro_sched *s = new_sched();
    coro_event e;
    struct busy b = {.e = &e};
    unsigned long after;
    int err;

    new_gate(&e, false);
    coro_go(s, yielder, &b);
    coro_go(s, setter_after_yields, &b);
    err = poll_for_event(s, &e, 2 * CORO_SEC);
    CHECK(b.set_done,
          "poll_for_event() returned %s before the event was set (one poll is not enough: "
          "a coroutine yields, so every poll has something to run)",
          check_err_name(err));
    CHECK(err == 0, "the event was set, but poll_for_event() returned %s", check_err_name(err));
    after = b.y_runs - b.y_at_set;
    CHECK(after <= 16,
          "between the set and the return, the yielding coroutine ran %lu more times: the call "
          "did not return as soon as the event was set",
          after);
    nothing_left(s, &e, 1, "busy");
    b.stop = true;
    CHECK(coro_sched_run(s) == 0, "the yielder did not finish");
    CHECK(coro_sched_destroy(s) == 0, "coro_sched_destroy() failed");
}

/* ── idle ─────────────────────────────────────────────────────────────── */

static void *setter_after_sleep(void *arg)
{
    struct busy *b = arg;

    coro_sleep(5 * CORO_MSEC);
    b->set_done = true;
    coro_event_set(b->e);
    return NULL;
}

static void case_idle(void)
{
    coro_sched *s = new_sched();
    coro_event e;
    struct busy b = {.e = &e};
    int err;

    new_gate(&e, false);
    coro_go(s, setter_after_sleep, &b);
    err = poll_for_event(s, &e, 2 * CORO_SEC);
    CHECK(b.set_done, "poll_for_event() returned %s before the event was set", check_err_name(err));
    CHECK(err == 0, "the event was set after 5 ms, but poll_for_event() returned %s",
          check_err_name(err));
    nothing_left(s, &e, 0, "idle");
    CHECK(coro_sched_destroy(s) == 0, "coro_sched_destroy() failed");
}

/* ── timeout ──────────────────────────────────────────────────────────── */

static void case_timeout(void)
{
    coro_sched *s = new_sched();
    coro_event e;
    uint64_t start, took;
    int err;

    new_gate(&e, false);
    start = coro_now();
    err = poll_for_event(s, &e, 20 * CORO_MSEC);
    took = coro_now() - start;
    CHECK(err == ETIMEDOUT, "nobody set the event: poll_for_event(20 ms) returned %s, expected "
          "ETIMEDOUT", check_err_name(err));
    CHECK(took >= 20 * CORO_MSEC, "poll_for_event(20 ms) timed out after only %" PRIu64 " us",
          took / CORO_USEC);
    nothing_left(s, &e, 0, "timeout");
    CHECK(coro_sched_destroy(s) == 0, "coro_sched_destroy() failed");
}

int main(void)
{
    static const check_case cases[] = {
        {"einval", case_einval},
        {"already set", case_already_set},
        {"busy", case_busy},
        {"idle", case_idle},
        {"timeout", case_timeout},
    };

    return check_main(cases, sizeof cases / sizeof cases[0]);
}
