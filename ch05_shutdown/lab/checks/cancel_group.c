/*
 * check cancel_group — Chapter 5, exercise 3.
 *
 * The exercise: add cancel groups: coro_group_cancel(g) cancels every
 * member of a group without closing the scheduler, in the style of
 * libdill's bundles or Trio's nurseries. Where do you keep the list, and
 * what must happen when a member finishes while the group is being
 * cancelled from another thread?
 *
 * What you provide: the file answers/cancel_group.c in your lab directory,
 * built with your library, on top of the public API of coro.h (the check
 * declares these itself; `coro_group` is your own struct):
 *
 *   typedef struct coro_group coro_group;
 *   coro_group *coro_group_create(coro_sched *s);
 *       an empty group whose members run on `s`; NULL with errno EINVAL
 *       (`s` NULL) or ENOMEM.
 *   int coro_group_go(coro_group *g, coro_fn fn, void *arg);
 *       starts fn(arg) on the group's scheduler as a member: a detached
 *       coroutine, as coro_go() makes (a member queued is a member: it
 *       runs, even if the group is cancelled before it starts). 0;
 *       EINVAL (`g` or `fn` NULL); ECANCELED once the group has been
 *       cancelled (nothing started); coro_go()'s errors (ESHUTDOWN,
 *       ENOMEM), with nothing started or counted.
 *   int coro_group_cancel(coro_group *g);
 *       cancels every member that has not finished, as coro_cancel()
 *       does, including members queued and not yet running (their first
 *       blocking call returns ECANCELED). Nothing else: the scheduler is
 *       not closed, its other coroutines run on uncancelled. From ANY
 *       thread, while members start and finish on the scheduler's thread.
 *       0, also when called again; EINVAL for NULL.
 *   size_t coro_group_alive(coro_group *g);
 *       how many members have not finished (a member finishes when fn
 *       returns, or when a shutdown abandons it after it started). 0 for
 *       NULL.
 *   int coro_group_destroy(coro_group *g);
 *       0 and frees it; EBUSY (nothing freed) while members are alive;
 *       EINVAL for NULL. Not while another thread may still cancel it.
 *   coro_group_go(), coro_group_alive() and coro_group_destroy() are
 *   called on the scheduler's owner thread (from its coroutines, or
 *   outside its pump).
 *
 * What it verifies, each case in a child process of its own (a crash or a
 * hang is reported as that case's failure):
 *   - errors:       the NULL arguments above.
 *   - members only: three members (a sleep, a park, an event wait) and
 *                   bystanders (coroutines of the same scheduler, and a
 *                   member of a second group). Destroy is EBUSY while
 *                   members live. A bystander cancels the group: each
 *                   member's wait returns ECANCELED and it returns; no
 *                   bystander is cancelled; the scheduler is not closed
 *                   (coro_go() still works); alive reaches 0; destroy 0.
 *   - finished:     members that returned leave the group. Then new
 *                   coroutines are started with coro_go(), which reuse
 *                   the finished members' stacks, and the group is
 *                   cancelled: none of them may be cancelled.
 *   - queued:       two members are queued and the group is cancelled
 *                   before either runs: both see ECANCELED. A go on the
 *                   cancelled group is ECANCELED and starts nothing.
 *   - abandoned:    a member that ignores cancellation is abandoned by
 *                   coro_sched_shutdown(): it counts as finished, and
 *                   the group can be destroyed.
 *   - other thread: 12,000 rounds. In each, a coroutine starts members
 *                   of two groups (each yields 0 to 3 times and returns)
 *                   interleaved with other coroutines of coro_go()
 *                   ("strangers", which start more strangers: they reuse
 *                   the members' stacks as soon as those finish), while
 *                   another thread cancels the two groups, each at a
 *                   point of the round picked at random. Every go is 0
 *                   or ECANCELED, every accepted member runs and finishes,
 *                   no other coroutine is ever cancelled, alive ends at 0.
 *                   A race can slip past a stress test: the check also
 *                   builds with -fsanitize=thread (30 rounds then).
 * A case still running after 10 s (60 s under ThreadSanitizer) is killed
 * and reported: usually a member that was never cancelled, so its wait
 * goes on for ever.
 *
 * The usual wrong answers, and the case that reports each:
 *   - only members already running are cancelled (no "the group is
 *     cancelled" flag for those still queued): queued;
 *   - a member leaves the group after fn returns, in the member's own
 *     code instead of a coro_defer() cleanup, so an abandoned member
 *     stays counted: abandoned;
 *   - finished members stay in the list (only the count goes down), so
 *     the cancel reaches the strangers that reuse their structs:
 *     finished, other thread;
 *   - a member's record freed twice (at its return and in its cleanup):
 *     a crash in most cases;
 *   - the handles copied under the lock and cancelled after unlocking: a
 *     member can finish, and its struct be reused, in between. Other
 *     thread reports it in some runs, not all (the window is a few
 *     instructions wide): read the code for it.
 *
 * No timing is measured. Prints `check cancel_group: ok` and exits 0, or
 * one `check cancel_group: FAIL: ...` line per failed case and exits 1.
 */
#define CHECK_NAME "cancel_group"
#ifdef __SANITIZE_THREAD__
/* Under ThreadSanitizer a round of "other thread" costs 40 to 200 ms
 * (more on a loaded machine): more time before a case counts as hung. */
#define CHECK_CASE_SECONDS 60
#endif
#include "lab_check.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "coro.h"

typedef struct coro_group coro_group;
coro_group *coro_group_create(coro_sched *s);
int coro_group_go(coro_group *g, coro_fn fn, void *arg);
int coro_group_cancel(coro_group *g);
size_t coro_group_alive(coro_group *g);
int coro_group_destroy(coro_group *g);

static coro_sched *new_sched(void)
{
    coro_sched *s = coro_sched_create();

    CHECK(s != NULL, "coro_sched_create() failed");
    return s;
}

static coro_group *new_group(coro_sched *s)
{
    coro_group *g = coro_group_create(s);

    CHECK(g != NULL, "coro_group_create() returned NULL (errno %s)", check_err_name(errno));
    return g;
}

static void go_member(coro_group *g, coro_fn fn, void *arg)
{
    int err = coro_group_go(g, fn, arg);

    CHECK(err == 0, "coro_group_go() returned %s, not 0", check_err_name(err));
}

/* ── Coroutines the cases use ─────────────────────────────────────────── */

/* A waiter: member or bystander. It waits in its way until the wait
 * fails or `stop` is set, and records how its wait ended. */
struct waiter {
    int how;          /* 0 sleep, 1 park, 2 event wait */
    coro_event *event;
    bool *stop;
    coro *self;
    int err;          /* the result that ended its loop, or 0 */
    bool canceled;    /* coro_canceled() as it returned */
    bool done;
};

static void *wait_loop(void *arg)
{
    struct waiter *w = arg;
    int err = 0;

    w->self = coro_self();
    while (!*w->stop) {
        switch (w->how) {
        case 0: err = coro_sleep(CORO_MSEC); break;
        case 1: err = coro_park_for(CORO_MSEC); break;
        default: err = coro_event_await_for(w->event, CORO_MSEC); break;
        }
        if (err != 0 && err != ETIMEDOUT)
            break;
        err = 0;
    }
    w->err = err;
    w->canceled = coro_canceled();
    w->done = true;
    return NULL;
}

/* A coroutine outside the group that cancels it once told to. */
struct trigger {
    coro_group *g;
    bool go;
    int err;
};

static void *cancel_when_told(void *arg)
{
    struct trigger *t = arg;

    while (!t->go)
        coro_sleep(CORO_MSEC);
    t->err = coro_group_cancel(t->g);
    return NULL;
}

static void *returns_at_once(void *arg)
{
    (*(int *)arg)++;
    return NULL;
}

/* Parks until woken, and says whether it ever saw a cancellation. */
struct parked {
    coro *self;
    int err;
    bool canceled;
    bool done;
};

static void *park_once(void *arg)
{
    struct parked *p = arg;

    p->self = coro_self();
    p->err = coro_park();
    p->canceled = coro_canceled();
    p->done = true;
    return NULL;
}

static void *ignores_cancellation(void *arg)
{
    (*(int *)arg)++;
    for (;;)
        coro_yield();
    return NULL;
}

/* ── The cases ────────────────────────────────────────────────────────── */

static void case_errors(void)
{
    int err;

    errno = 0;
    CHECK(coro_group_create(NULL) == NULL && errno == EINVAL,
          "coro_group_create(NULL) must return NULL with errno EINVAL");
    err = coro_group_go(NULL, returns_at_once, NULL);
    CHECK(err == EINVAL, "coro_group_go(NULL, ...) returned %s", check_err_name(err));
    err = coro_group_cancel(NULL);
    CHECK(err == EINVAL, "coro_group_cancel(NULL) returned %s", check_err_name(err));
    err = coro_group_destroy(NULL);
    CHECK(err == EINVAL, "coro_group_destroy(NULL) returned %s", check_err_name(err));
    CHECK(coro_group_alive(NULL) == 0, "coro_group_alive(NULL) is not 0");

    coro_sched *s = new_sched();
    coro_group *g = new_group(s);

    err = coro_group_go(g, NULL, NULL);
    CHECK(err == EINVAL, "coro_group_go(g, NULL, ...) returned %s", check_err_name(err));
    CHECK(coro_group_alive(g) == 0, "a fresh group has %zu members alive",
          coro_group_alive(g));
    CHECK(coro_sched_alive(s) == 0, "a refused go left %zu coroutines alive",
          coro_sched_alive(s));
    CHECK(coro_group_destroy(g) == 0, "destroying an empty group failed");
    CHECK(coro_sched_destroy(s) == 0, "coro_sched_destroy() failed");
}

static void case_members_only(void)
{
    coro_sched *s = new_sched();
    coro_group *g = new_group(s), *other = new_group(s);
    coro_event event;
    bool stop_members = false, stop_bystanders = false;
    struct waiter members[3], bystanders[4];
    struct trigger trig = {g, false, -1};
    coro_stats st;
    int err, extra = 0;

    CHECK(coro_event_init(&event, false, false) == 0, "coro_event_init() failed");
    for (int i = 0; i < 3; i++) {
        members[i] = (struct waiter){i, &event, &stop_members, NULL, -1, false, false};
        go_member(g, wait_loop, &members[i]);
    }
    for (int i = 0; i < 4; i++)
        bystanders[i] = (struct waiter){i % 3, &event, &stop_bystanders, NULL, -1, false, false};
    for (int i = 0; i < 3; i++)
        CHECK(coro_go(s, wait_loop, &bystanders[i]) == 0, "coro_go() failed");
    go_member(other, wait_loop, &bystanders[3]); /* a member of another group */
    CHECK(coro_go(s, cancel_when_told, &trig) == 0, "coro_go() failed");

    /* Run until everyone waits; then the trigger is told. */
    for (int i = 0; i < 4; i++)
        coro_sched_poll_for(s, CORO_MSEC);
    CHECK(coro_group_alive(g) == 3, "with three members waiting, alive says %zu",
          coro_group_alive(g));
    err = coro_group_destroy(g);
    CHECK(err == EBUSY, "destroying a group with three members alive returned %s, not EBUSY",
          check_err_name(err));
    trig.go = true;
    while (!(members[0].done && members[1].done && members[2].done))
        coro_sched_poll_for(s, CORO_MSEC);
    CHECK(trig.err == 0, "coro_group_cancel() returned %s", check_err_name(trig.err));
    for (int i = 0; i < 3; i++)
        CHECK(members[i].err == ECANCELED && members[i].canceled,
              "member %d (%s) ended its wait with %s, coro_canceled() %s: "
              "it must see ECANCELED",
              i, i == 0 ? "sleep" : i == 1 ? "park" : "event wait",
              check_err_name(members[i].err), members[i].canceled ? "true" : "false");
    CHECK(coro_group_alive(g) == 0, "every member returned, yet alive says %zu",
          coro_group_alive(g));
    for (int i = 0; i < 4; i++)
        CHECK(!bystanders[i].done,
              "%s stopped waiting (%s): the group's cancel reached it",
              i < 3 ? "a coroutine outside the group" : "a member of another group",
              check_err_name(bystanders[i].err));
    CHECK(coro_sched_stats(s, &st) == 0 && !st.closed,
          "the scheduler is closed: a group's cancel must not close it");
    err = coro_go(s, returns_at_once, &extra);
    CHECK(err == 0, "coro_go() after the group's cancel returned %s", check_err_name(err));
    err = coro_group_cancel(g);
    CHECK(err == 0, "a second coro_group_cancel() returned %s, not 0", check_err_name(err));

    stop_bystanders = true;
    CHECK(coro_sched_run(s) == 0, "coro_sched_run() failed");
    for (int i = 0; i < 4; i++)
        CHECK(bystanders[i].err == 0 && !bystanders[i].canceled,
              "bystander %d was cancelled (%s)", i, check_err_name(bystanders[i].err));
    CHECK(extra == 1, "the coroutine started after the cancel did not run");
    err = coro_group_destroy(g);
    CHECK(err == 0, "destroying the cancelled, empty group returned %s", check_err_name(err));
    CHECK(coro_group_destroy(other) == 0, "destroying the other group failed");
    CHECK(coro_event_destroy(&event) == 0, "coro_event_destroy() failed");
    CHECK(coro_sched_destroy(s) == 0, "coro_sched_destroy() failed");
}

static void case_finished(void)
{
    coro_sched *s = new_sched();
    coro_group *g = new_group(s);
    struct parked strangers[3] = {{0}};
    int ran = 0;

    for (int i = 0; i < 3; i++)
        go_member(g, returns_at_once, &ran);
    CHECK(coro_sched_run(s) == 0, "coro_sched_run() failed");
    CHECK(ran == 3, "3 members were started, %d ran", ran);
    CHECK(coro_group_alive(g) == 0, "three members returned, yet alive says %zu",
          coro_group_alive(g));
    /* Their structs and stacks are in the scheduler's cache now: these
     * get them. */
    for (int i = 0; i < 3; i++)
        CHECK(coro_go(s, park_once, &strangers[i]) == 0, "coro_go() failed");
    for (int i = 0; i < 3; i++)
        coro_sched_step(s); /* each parks */
    CHECK(coro_group_cancel(g) == 0, "coro_group_cancel() failed");
    for (int i = 0; i < 3; i++)
        if (!strangers[i].done)
            coro_wake(strangers[i].self);
    CHECK(coro_sched_run(s) == 0, "coro_sched_run() failed");
    for (int i = 0; i < 3; i++)
        CHECK(strangers[i].err == 0 && !strangers[i].canceled,
              "a coroutine started with coro_go() after the members had finished "
              "was cancelled by the group's cancel (its park returned %s): the "
              "group still named a finished member, whose struct it reuses (or "
              "the cancel reached beyond the group)",
              check_err_name(strangers[i].err));
    CHECK(coro_group_destroy(g) == 0, "coro_group_destroy() failed");
    CHECK(coro_sched_destroy(s) == 0, "coro_sched_destroy() failed");
}

static void case_queued(void)
{
    coro_sched *s = new_sched();
    coro_group *g = new_group(s);
    bool stop = false;
    struct waiter members[2] = {
        {0, NULL, &stop, NULL, -1, false, false},
        {1, NULL, &stop, NULL, -1, false, false},
    };
    int ran = 0, err;
    size_t alive;

    go_member(g, wait_loop, &members[0]);
    go_member(g, wait_loop, &members[1]);
    CHECK(coro_group_alive(g) == 2, "two members queued, alive says %zu",
          coro_group_alive(g));
    CHECK(coro_group_cancel(g) == 0, "coro_group_cancel() failed");
    for (int i = 0; i < 50 && !(members[0].done && members[1].done); i++)
        coro_sched_step(s);
    for (int i = 0; i < 2; i++)
        CHECK(members[i].done && members[i].err == ECANCELED,
              "a member queued before the group's cancel, not yet running, was "
              "not cancelled: its %s %s",
              i == 0 ? "sleep" : "park",
              members[i].done ? "did not return ECANCELED" : "is still waiting");
    alive = coro_sched_alive(s);
    err = coro_group_go(g, returns_at_once, &ran);
    CHECK(err == ECANCELED, "coro_group_go() on a cancelled group returned %s, not ECANCELED",
          check_err_name(err));
    CHECK(coro_sched_alive(s) == alive, "the refused go started a coroutine");
    CHECK(coro_sched_run(s) == 0, "coro_sched_run() failed");
    CHECK(ran == 0, "the refused go's function ran");
    CHECK(coro_group_alive(g) == 0, "alive says %zu at the end", coro_group_alive(g));
    CHECK(coro_group_destroy(g) == 0, "coro_group_destroy() failed");
    CHECK(coro_sched_destroy(s) == 0, "coro_sched_destroy() failed");
}

static void case_abandoned(void)
{
    coro_sched *s = new_sched();
    coro_group *g = new_group(s);
    int started = 0;
    size_t abandoned;
    int err;

    go_member(g, ignores_cancellation, &started);
    for (int i = 0; i < 3; i++)
        coro_sched_step(s);
    CHECK(started == 1, "the member did not start");
    abandoned = coro_sched_shutdown(s, 10 * CORO_MSEC);
    CHECK(abandoned == 1, "coro_sched_shutdown() abandoned %zu, not 1", abandoned);
    CHECK(coro_group_alive(g) == 0,
          "the member was abandoned by a shutdown, yet alive says %zu: count it "
          "out in a cleanup (coro_defer()), which runs also when a coroutine is "
          "abandoned",
          coro_group_alive(g));
    err = coro_group_destroy(g);
    CHECK(err == 0, "coro_group_destroy() after the shutdown returned %s", check_err_name(err));
    CHECK(coro_sched_destroy(s) == 0, "coro_sched_destroy() failed");
}

/* ── Another thread cancels while members finish ──────────────────────── */

/* Under ThreadSanitizer (gcc -fsanitize=thread) a round costs 40 to 200
 * ms: fewer rounds, since the tool looks at every access of each. */
#ifdef __SANITIZE_THREAD__
enum { ROUNDS = 30, GROUPS = 2, PER_ROUND = 24 };
#else
enum { ROUNDS = 12000, GROUPS = 2, PER_ROUND = 24 };
#endif

struct race {
    coro_sched *s;
    coro_group *groups[GROUPS];  /* the round's groups */
    atomic_int round;            /* the round the canceller works on */
    atomic_int cancelled_round;  /* the last round it has cancelled */
    atomic_bool quit;
    atomic_bool cancel_failed;   /* a coro_group_cancel() was not 0 */
    atomic_int progress;         /* how far the round's spawner has got */
    unsigned seed;
    /* The owner thread's counts for the round. */
    int accepted, refused, other_errors;
    int member_runs, member_returns, stranger_runs, stranger_returns;
    int strangers_cancelled;
    bool spawner_done;
    int budget;    /* strangers the strangers may still start */
    int strangers; /* strangers started in the round */
};

static unsigned next_random(unsigned *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    return *x;
}

struct race_member {
    struct race *r;
    int yields;
};

static void *race_member_body(void *arg)
{
    struct race_member *m = arg;

    m->r->member_runs++;
    for (int i = 0; i < m->yields; i++)
        coro_yield();
    m->r->member_returns++;
    return NULL;
}

static void *race_stranger_body(void *arg)
{
    struct race *r = arg;
    bool canceled = false;

    r->stranger_runs++;
    for (int i = 0; i < 3; i++) {
        /* One more stranger while the round's budget lasts: so a stack a
         * member has just given back is soon taken again. */
        if (r->budget > 0) {
            r->budget--;
            r->strangers++;
            if (coro_go(r->s, race_stranger_body, r) != 0)
                r->other_errors++;
        }
        if (coro_yield() != 0 || coro_canceled())
            canceled = true;
    }
    if (canceled)
        r->strangers_cancelled++;
    r->stranger_returns++;
    return NULL;
}

static struct race_member race_members[PER_ROUND];

static void *spawner(void *arg)
{
    struct race *r = arg;

    for (int i = 0; i < PER_ROUND; i++) {
        coro_group *g = r->groups[i % GROUPS];
        struct race_member *m = &race_members[i];
        int err;

        /* The stranger first: it gets the stack of the coroutine that
         * finished last, often a member. */
        if (coro_go(r->s, race_stranger_body, r) != 0)
            r->other_errors++;
        m->r = r;
        m->yields = (int)(next_random(&r->seed) % 4);
        err = coro_group_go(g, race_member_body, m);
        if (err == 0)
            r->accepted++;
        else if (err == ECANCELED)
            r->refused++;
        else
            r->other_errors++;
        atomic_store_explicit(&r->progress, i + 1, memory_order_relaxed);
        coro_yield();
    }
    r->spawner_done = true;
    return NULL;
}

static void *canceller_thread(void *arg)
{
    struct race *r = arg;
    unsigned x = 12345;

    for (;;) {
        int round;

        while ((round = atomic_load(&r->round)) == atomic_load(&r->cancelled_round)) {
            if (atomic_load(&r->quit))
                return NULL;
            sched_yield();
        }
        /* The groups one after another, each once the spawner has got
         * to a point picked at random, while members run and finish.
         * (The groups were created before `round` was published.) */
        for (int i = 0; i < GROUPS; i++) {
            int target = (int)(next_random(&x) % PER_ROUND);

            for (unsigned spin = 1; atomic_load(&r->progress) < target; spin++)
                if (spin % 1024 == 0)
                    sched_yield(); /* the owner may share our core */
            if (coro_group_cancel(r->groups[i]) != 0)
                atomic_store(&r->cancel_failed, true);
        }
        atomic_store(&r->cancelled_round, round);
    }
}

static void case_other_thread(void)
{
    static struct race r;
    pthread_t thread;

    r.s = new_sched();
    r.seed = 2463534242u;
    atomic_init(&r.round, 0);
    atomic_init(&r.cancelled_round, 0);
    atomic_init(&r.quit, false);
    atomic_init(&r.cancel_failed, false);
    atomic_init(&r.progress, 0);
    CHECK(pthread_create(&thread, NULL, canceller_thread, &r) == 0, "pthread_create failed");
    for (int round = 1; round <= ROUNDS; round++) {
        for (int i = 0; i < GROUPS; i++)
            r.groups[i] = new_group(r.s);
        r.accepted = r.refused = r.other_errors = 0;
        r.member_runs = r.member_returns = r.stranger_runs = r.stranger_returns = 0;
        r.strangers_cancelled = 0;
        r.spawner_done = false;
        r.budget = 2 * PER_ROUND;
        r.strangers = PER_ROUND;
        atomic_store(&r.progress, 0);
        CHECK(coro_go(r.s, spawner, &r) == 0, "coro_go() of the spawner failed");
        atomic_store(&r.round, round); /* the other thread goes */
        while (!r.spawner_done || coro_sched_alive(r.s) > 0)
            coro_sched_poll_for(r.s, 100 * CORO_USEC);
        while (atomic_load(&r.cancelled_round) != round)
            sched_yield(); /* the other thread's last cancel may come late */
        CHECK(!atomic_load(&r.cancel_failed),
              "round %d: coro_group_cancel() from another thread did not return 0", round);
        CHECK(r.other_errors == 0, "round %d: a go returned neither 0 nor ECANCELED", round);
        CHECK(r.accepted + r.refused == PER_ROUND, "round %d: %d gos accounted for, not %d",
              round, r.accepted + r.refused, PER_ROUND);
        CHECK(r.member_runs == r.accepted && r.member_returns == r.accepted,
              "round %d: %d members accepted, %d ran, %d returned", round, r.accepted,
              r.member_runs, r.member_returns);
        CHECK(r.stranger_runs == r.strangers && r.stranger_returns == r.strangers,
              "round %d: the other coroutines did not all run", round);
        CHECK(r.strangers_cancelled == 0,
              "round %d: %d coroutine(s) outside the group were cancelled by the "
              "group's cancel from another thread: it reached a member that had "
              "finished and whose struct a new coroutine was using",
              round, r.strangers_cancelled);
        for (int i = 0; i < GROUPS; i++) {
            CHECK(coro_group_alive(r.groups[i]) == 0, "round %d: alive says %zu at the end",
                  round, coro_group_alive(r.groups[i]));
            CHECK(coro_group_destroy(r.groups[i]) == 0,
                  "round %d: coro_group_destroy() failed", round);
        }
    }
    atomic_store(&r.quit, true);
    pthread_join(thread, NULL);
    CHECK(coro_sched_destroy(r.s) == 0, "coro_sched_destroy() failed");
}

int main(void)
{
    static const check_case cases[] = {
        {"errors", case_errors},
        {"members only", case_members_only},
        {"finished", case_finished},
        {"queued", case_queued},
        {"abandoned", case_abandoned},
        {"other thread", case_other_thread},
    };

    return check_main(cases, sizeof cases / sizeof cases[0]);
}
