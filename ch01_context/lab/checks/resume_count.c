/*
 * check resume_count — Chapter 1, exercise 1.
 *
 * The exercise: add a counter to `struct coro` and print how many times
 * each coroutine of ping_pong was resumed. Where is the single right place
 * to count?
 *
 * What you provide: a change to the library in your lab (no answer file).
 * Add the counter to `struct coro` (coro_impl.h), count where a resume
 * really happens, and add this accessor to coro.c (declare it in coro.h
 * too, for ping_pong; this check declares it itself):
 *
 *     unsigned long coro_resume_count(const coro *c);
 *
 * It returns how many times coro_resume(c) has run `c`: every resume that
 * passes coro_resume()'s checks counts, from the moment it switches to `c`
 * (so a coroutine already counts its current run while it runs, and while
 * it is NORMAL). 0 for a new coroutine, and 0 for NULL. Then make
 * examples/ping_pong.c print the count of each player before it destroys
 * them.
 *
 * What this check verifies, on the lab's library:
 *   - a new coroutine has count 0, and NULL gives 0;
 *   - each good resume adds exactly one, including the last one, the
 *     resume during which the function returns;
 *   - a refused resume adds nothing: EINVAL (a finished coroutine),
 *     EBUSY (a coroutine resuming itself, or resuming the NORMAL one that
 *     resumed it) and EPERM (another thread's coroutine);
 *   - coming back to a coroutine when the one it resumed yields is not a
 *     resume of it: its count does not move;
 *   - the ping_pong referee loop gives each player 4 resumes (3 rounds
 *     that yield, then the one in which it returns).
 *
 * Each of these is a case run in a child process of its own (a crash or
 * a hang is reported as that case's failure). Built by `tools/lab check
 * ch01 resume_count` with the lab's library sources; it needs nothing but
 * this file. Prints `check resume_count: ok` and exits 0, or one
 * `check resume_count: FAIL: CASE: ...` line per failed case and exits 1.
 */
#define CHECK_NAME "resume_count"
#include "lab_check.h"

#include <pthread.h>

#include "coro.h"

unsigned long coro_resume_count(const coro *c);

static void expect_count(const coro *c, unsigned long want, const char *what)
{
    unsigned long got = coro_resume_count(c);

    CHECK(got == want, "%s: coro_resume_count() is %lu, expected %lu", what,
          got, want);
}

static coro *new_coro(coro_fn fn, void *arg)
{
    coro *c = coro_create(fn, arg, 0);

    CHECK(c != NULL, "coro_create: errno %d", errno);
    return c;
}

/* Yields three times, then returns. */
static void *yield_three_times(void *arg)
{
    (void)arg;
    for (int i = 0; i < 3; i++)
        coro_yield();
    return NULL;
}

/* ── new: a new coroutine, and NULL ───────────────────────────────────── */

static void case_new(void)
{
    coro *c = new_coro(yield_three_times, NULL);

    expect_count(NULL, 0, "for NULL");
    expect_count(c, 0, "a new coroutine");
    CHECK(coro_destroy(c) == 0,
          "coro_destroy refused a never-started coroutine");
}

/* ── resumes: each good one counts, a refused one (EINVAL) does not ───── */

static void case_resumes(void)
{
    coro *c = new_coro(yield_three_times, NULL);
    int err;

    for (unsigned long i = 1; i <= 4; i++) {
        err = coro_resume(c);
        CHECK(err == 0, "resume %lu returned %d", i, err);
        expect_count(c, i, i < 4 ? "after a resume that ends in coro_yield()"
                                 : "after the resume in which the function "
                                   "returns");
    }
    CHECK(coro_status(c) == CORO_DONE,
          "the coroutine should be DONE after 4 resumes");
    err = coro_resume(c);
    CHECK(err == EINVAL,
          "resuming a finished coroutine returned %d, expected EINVAL", err);
    expect_count(c, 4, "after a refused resume (EINVAL, finished)");
    CHECK(coro_destroy(c) == 0, "coro_destroy refused a finished coroutine");
}

/* ── another thread: its resume is refused with EPERM, not counted ────── */

static void *resume_from_other_thread(void *arg)
{
    static int result;

    result = coro_resume(arg);
    return &result;
}

static void case_other_thread(void)
{
    coro *never = new_coro(yield_three_times, NULL);
    pthread_t thread;
    void *other;
    int err;

    err = pthread_create(&thread, NULL, resume_from_other_thread, never);
    CHECK(err == 0 && pthread_join(thread, &other) == 0, "pthread_create: %d",
          err);
    CHECK(*(int *)other == EPERM,
          "another thread's resume returned %d, expected EPERM", *(int *)other);
    expect_count(never, 0, "after another thread's refused resume (EPERM)");
    CHECK(coro_destroy(never) == 0,
          "coro_destroy refused a never-started coroutine");
}

/* ── nesting: outer resumes inner, inner tries to resume outer ────────── */

static coro *outer, *inner;
static int inner_saw = -1;     /* what coro_resume(outer) returned in inner */
static int outer_self = -1;    /* what coro_resume(outer) returned in outer */
static unsigned long outer_count_in_inner = 99;

static void *inner_body(void *arg)
{
    (void)arg;
    inner_saw = coro_resume(outer);            /* outer is NORMAL: EBUSY */
    outer_count_in_inner = coro_resume_count(outer);
    coro_yield();
    return NULL;
}

static void *outer_body(void *arg)
{
    (void)arg;
    outer_self = coro_resume(outer);           /* itself, RUNNING: EBUSY */
    coro_resume(inner);   /* inner yields: back here, not a resume of us */
    coro_resume(inner);   /* inner returns */
    return NULL;
}

static void case_nesting(void)
{
    outer = new_coro(outer_body, NULL);
    inner = new_coro(inner_body, NULL);
    coro_resume(outer);
    CHECK(outer_self == EBUSY && inner_saw == EBUSY,
          "the refused resumes returned %d and %d, expected EBUSY twice",
          outer_self, inner_saw);
    CHECK(outer_count_in_inner == 1,
          "a coroutine that resumed another, after the other's refused resume "
          "of it (EBUSY, NORMAL): coro_resume_count() is %lu, expected 1",
          outer_count_in_inner);
    expect_count(outer, 1, "a coroutine resumed once, which resumed "
                           "another twice (coming back to it when the other "
                           "yields is not a resume)");
    expect_count(inner, 2, "a coroutine resumed twice by another coroutine");
    CHECK(coro_destroy(outer) == 0 && coro_destroy(inner) == 0,
          "coro_destroy refused a finished coroutine");
}

/* ── ping_pong's players and referee ──────────────────────────────────── */

static void *player(void *arg)
{
    (void)arg;
    for (int round = 1; round <= 3; round++)
        coro_yield();
    return NULL;
}

static void case_ping_pong(void)
{
    coro *ping = new_coro(player, "ping");
    coro *pong = new_coro(player, "pong");

    /* The referee, as in examples/ping_pong.c. */
    while (coro_status(ping) != CORO_DONE || coro_status(pong) != CORO_DONE) {
        if (coro_status(ping) != CORO_DONE)
            coro_resume(ping);
        if (coro_status(pong) != CORO_DONE)
            coro_resume(pong);
    }
    expect_count(ping, 4, "ping_pong's ping (3 rounds, then it returns)");
    expect_count(pong, 4, "ping_pong's pong (3 rounds, then it returns)");
    CHECK(coro_destroy(ping) == 0 && coro_destroy(pong) == 0,
          "coro_destroy refused a finished coroutine");
}

int main(void)
{
    static const check_case cases[] = {
        {"new", case_new},
        {"resumes", case_resumes},
        {"other thread", case_other_thread},
        {"nesting", case_nesting},
        {"ping_pong", case_ping_pong},
    };

    return check_main(cases, sizeof cases / sizeof cases[0]);
}
