/*
 * check repost — Chapter 2, exercise 4.
 *
 * The exercise: write a post that re-posts itself 10 times under
 * coro_sched_create_limit(1): it never gets EAGAIN. Then move
 * `s->posts_pending--` in run_post() after `fn(s, arg)`. What does the
 * re-post get, and which test of //tests:scheduler says so?
 *
 * What you provide: answers/repost.c in your lab, defining
 *
 *     int repost_ten(coro_sched *s, int *runs);
 *
 * It posts, on `s`, a post that re-posts itself each time it runs until
 * it has re-posted 10 times, so that it runs 11 times in all (the first
 * post and 10 re-posts); then it runs `s` with coro_sched_run(). It stores
 * in *runs how many times the post ran, and returns 0 if every coro_post()
 * and the run returned 0, or else the first error one of them returned.
 * A post must not wait, so when a coro_post() is refused the post records
 * the error and stops re-posting (no retry loop). Keep the count in memory
 * the post's argument points to, not in a static: repost_ten() is called
 * more than once. This check declares the prototype itself.
 *
 * What it verifies: under a limit of one, repost_ten() returns 0 and the
 * post runs 11 times; the scheduler is then empty (nothing alive, no post
 * pending: it can be destroyed); the same again on a second scheduler, and
 * on one with no limit. For the second half of the exercise, run the check
 * again after moving the line: it fails, and says what the re-post got.
 * Each of the three is a case run in a child process of its own (a crash
 * or a hang is reported as that case's failure); the second and third call
 * repost_ten() once first, so that a count kept in a static shows. Prints
 * `check repost: ok` and exits 0, or one `check repost: FAIL: CASE: ...`
 * line per failed case and exits 1.
 */
#define CHECK_NAME "repost"
#include "lab_check.h"

#include <stdbool.h>

#include "coro.h"

int repost_ten(coro_sched *s, int *runs);

/* The check's own probe: does this library let a post re-post itself
 * under a limit of one? Returns what the re-post got. */
static bool probe_again;
static int probe_result;

static void probe_post(coro_sched *s, void *arg)
{
    (void)arg;
    if (!probe_again)
        return;
    probe_again = false;
    probe_result = coro_post(s, probe_post, NULL);
}

static int library_refuses_a_repost(void)
{
    coro_sched *s = coro_sched_create_limit(1);

    if (s == NULL)
        check_fail("coro_sched_create_limit(1) returned NULL");
    probe_again = true;
    probe_result = 0;
    if (coro_post(s, probe_post, NULL) != 0)
        check_fail("the first coro_post() under a limit of one was refused");
    if (coro_sched_run(s) != 0 || coro_sched_destroy(s) != 0)
        check_fail("coro_sched_run() or coro_sched_destroy() failed");
    return probe_result;
}

static void one_round(coro_sched *s, const char *which, const char *hint)
{
    int runs = -1;
    int err = repost_ten(s, &runs);

    if (err == EAGAIN) {
        int refused = library_refuses_a_repost();

        if (refused == EAGAIN)
            check_fail(
                "%s: a re-post got EAGAIN (%s) after %d run(s) of the "
                "post. This library refuses a post's coro_post() under a "
                "limit of one: the post that is running still counts as "
                "pending (does run_post() drop posts_pending only after "
                "fn(s, arg) returns?). //tests:scheduler fails the same "
                "way: PostLimit.APostCanRepostItselfUnderALimitOfOne, and "
                "the model test Random.OperationsMatchAModelOfTheQueue. Put "
                "the line back before fn(s, arg) when you have seen this.",
                which, strerror(EAGAIN), runs);
        check_fail(
            "%s: repost_ten() returned EAGAIN (the post ran %d time(s)), "
            "but the library lets a post re-post itself under this limit: "
            "does the answer have two posts pending at once (posting twice "
            "in a run, or posting again before the run)?",
            which, runs);
    }
    if (err != 0)
        check_fail("%s: repost_ten() returned %d (%s), not 0", which, err,
                   strerror(err));
    if (runs != 11)
        check_fail("%s: the post ran %d time(s), not 11 (the first post and 10 "
                   "re-posts)%s", which, runs,
                   runs == 10 ? ": is it re-posting 9 times?" : hint);
    if (coro_sched_alive(s) != 0 || coro_sched_step(s))
        check_fail(
            "%s: after repost_ten(), work is still left on the scheduler",
            which);
    if (coro_sched_destroy(s) != 0)
        check_fail("%s: coro_sched_destroy() after repost_ten() failed (a post "
                   "still pending?)", which);
}

static coro_sched *limited_sched(void)
{
    coro_sched *s = coro_sched_create_limit(1);

    if (s == NULL)
        check_fail("coro_sched_create_limit(1) returned NULL");
    return s;
}

static void case_limit_of_one(void)
{
    one_round(limited_sched(), "under a limit of one", "");
}

/* A first call whose outcome the first case judges: what it leaves
 * behind in a static, the next call shows. */
static void first_call(void)
{
    coro_sched *s = limited_sched();
    int runs;

    (void)repost_ten(s, &runs);
    (void)coro_sched_destroy(s);
}

static void case_second_call(void)
{
    first_call();
    one_round(limited_sched(),
              "a second call, on a new scheduler with a limit of one",
              ": is the count kept in a static?");
}

static void case_no_limit(void)
{
    coro_sched *s;

    first_call();
    s = coro_sched_create();
    if (s == NULL)
        check_fail("coro_sched_create() returned NULL");
    one_round(s, "with no limit", ": is the count kept in a static?");
}

int main(void)
{
    static const check_case cases[] = {
        {"limit of one", case_limit_of_one},
        {"second call", case_second_call},
        {"no limit", case_no_limit},
    };

    return check_main(cases, sizeof cases / sizeof cases[0]);
}
