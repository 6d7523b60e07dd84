/*
 * check semaphore — Chapter 3, exercise 2.
 *
 * The exercise: implement a counting semaphore with coro_park() /
 * coro_wake() and a FIFO of waiters. Why is the permit not enough on its
 * own?
 *
 * What you provide: the file answers/semaphore.c in your lab directory,
 * built with your library, defining these four functions (the check
 * declares them itself; `semaphore` is your own struct):
 *
 *   typedef struct semaphore semaphore;
 *   semaphore *semaphore_create(unsigned value);
 *       a semaphore holding `value` units; NULL with errno ENOMEM.
 *   int semaphore_acquire(semaphore *s);
 *       takes a unit; while none is free, or others queued first, the
 *       caller waits its turn (first come, first served). 0 once it holds
 *       a unit. A wait is only for a coroutine of a scheduler: an acquire
 *       that would have to wait anywhere else returns EPERM.
 *   int semaphore_release(semaphore *s);
 *       gives a unit back: to the longest waiting coroutine if there is
 *       one, else to the count. Callable from a coroutine, a post, or the
 *       thread's own stack (of the thread that owns the coroutines). 0.
 *   int semaphore_destroy(semaphore *s);
 *       0 and frees it; EBUSY (nothing freed) while coroutines wait on it.
 *   EINVAL for a NULL semaphore.
 *
 * What it verifies, each case in a child process of its own (a crash or a
 * hang is reported as that case's failure):
 *   - counting:    a semaphore of 3 lets exactly 3 acquires through, the
 *                  4th waits (coro_sched_run() returns EDEADLK); releases
 *                  made with nobody waiting add up (3 releases, then 3
 *                  acquires pass and the 4th waits); destroy with a waiter
 *                  is EBUSY; a release from the thread's own stack lets the
 *                  waiter go on.
 *   - fifo:        A, B, C wait in that order; a coroutine that releases
 *                  one unit and then at once asks for one itself must not
 *                  get it before A; all get their units in the order
 *                  A, B, C, then the late comer.
 *   - stray wake:  a coroutine waiting in acquire is sent a coro_wake()
 *                  by someone else: it must go on waiting.
 *   - old permit:  a coroutine that holds a permit (woken while it was not
 *                  parked) and then acquires a semaphore of 0 must wait.
 *   - crowd:       50 coroutines take and give back a semaphore of 3, 20
 *                  times each, yielding while they hold it: never more than
 *                  3 hold it at once, and all finish.
 *   - eperm:       an acquire of a semaphore of 0 on the thread's own stack
 *                  returns EPERM, and leaves nothing queued (destroy is 0).
 * No timing is measured. Prints `check semaphore: ok` and exits 0, or one
 * `check semaphore: FAIL: ...` line per failed case and exits 1.
 */
#define CHECK_NAME "semaphore"
#include "lab_check.h"

#include "coro.h"

typedef struct semaphore semaphore;
semaphore *semaphore_create(unsigned value);
int semaphore_acquire(semaphore *s);
int semaphore_release(semaphore *s);
int semaphore_destroy(semaphore *s);

static coro_sched *new_sched(void)
{
    coro_sched *s = coro_sched_create();

    CHECK(s != NULL, "coro_sched_create() failed");
    return s;
}

static semaphore *new_sem(unsigned value)
{
    semaphore *sem = semaphore_create(value);

    CHECK(sem != NULL, "semaphore_create(%u) returned NULL", value);
    return sem;
}

/* A coroutine that acquires once and records when, by a shared counter. */
struct taker {
    semaphore *sem;
    const char *name;
    int *clock;      /* shared: how many acquires have completed */
    int at;          /* this one's turn, 0 = not yet */
    int err;
    coro *self;
};

static void *take_once(void *arg)
{
    struct taker *t = arg;

    t->self = coro_self();
    t->err = semaphore_acquire(t->sem);
    if (t->err == 0)
        t->at = ++*t->clock;
    return NULL;
}

/* ── counting ─────────────────────────────────────────────────────────── */

static void case_counting(void)
{
    coro_sched *s = new_sched();
    semaphore *sem = new_sem(3);
    int clock = 0, err;
    struct taker t[4];

    for (int i = 0; i < 4; i++) {
        t[i] = (struct taker){.sem = sem, .clock = &clock};
        coro_go(s, take_once, &t[i]);
    }
    err = coro_sched_run(s);
    CHECK(err == EDEADLK && clock == 3,
          "a semaphore of 3 and 4 acquires: expected 3 through and the 4th waiting (run "
          "EDEADLK), got %d through and run %s",
          clock, check_err_name(err));
    CHECK(t[3].at == 0, "the 4th acquire went through a semaphore of 3");
    err = semaphore_destroy(sem);
    CHECK(err == EBUSY, "semaphore_destroy() with a waiter returned %s, expected EBUSY",
          check_err_name(err));
    err = semaphore_release(sem); /* from the thread's own stack */
    CHECK(err == 0, "semaphore_release() from the thread's own stack returned %s",
          check_err_name(err));
    err = coro_sched_run(s);
    CHECK(err == 0 && t[3].at == 4,
          "after a release the waiter should go on: run %s, the waiter %s",
          check_err_name(err), t[3].at ? "went on" : "still waits");

    /* Releases with nobody waiting add up: the value is a count. */
    for (int i = 0; i < 3; i++)
        CHECK(semaphore_release(sem) == 0, "semaphore_release() did not return 0");
    clock = 0;
    for (int i = 0; i < 4; i++) {
        t[i] = (struct taker){.sem = sem, .clock = &clock};
        coro_go(s, take_once, &t[i]);
    }
    err = coro_sched_run(s);
    CHECK(clock == 3 && err == EDEADLK,
          "a semaphore of 0 released 3 times with nobody waiting, then 4 acquires: expected 3 "
          "through and the 4th waiting, got %d through and run %s (releases must add up: one "
          "permit does not)",
          clock, check_err_name(err));
    CHECK(semaphore_release(sem) == 0 && coro_sched_run(s) == 0, "the last waiter did not go on");
    CHECK(semaphore_destroy(sem) == 0, "semaphore_destroy() with nobody waiting did not return 0");
    CHECK(semaphore_release(NULL) == EINVAL && semaphore_acquire(NULL) == EINVAL,
          "a NULL semaphore is not EINVAL");
    coro_sched_destroy(s);
}

/* ── fifo ─────────────────────────────────────────────────────────────── */

struct late_comer {
    semaphore *sem;
    int *clock;
    int at;
    int err;
};

static void *release_then_acquire(void *arg)
{
    struct late_comer *l = arg;

    l->err = semaphore_release(l->sem); /* meant for A, the first waiter */
    if (l->err != 0)
        return NULL;
    l->err = semaphore_acquire(l->sem); /* must queue behind A, B, C */
    if (l->err == 0)
        l->at = ++*l->clock;
    return NULL;
}

static void case_fifo(void)
{
    coro_sched *s = new_sched();
    semaphore *sem = new_sem(0);
    int clock = 0, err;
    struct taker a = {.sem = sem, .name = "A", .clock = &clock};
    struct taker b = {.sem = sem, .name = "B", .clock = &clock};
    struct taker c = {.sem = sem, .name = "C", .clock = &clock};
    struct late_comer late = {.sem = sem, .clock = &clock};

    coro_go(s, take_once, &a);
    coro_go(s, take_once, &b);
    coro_go(s, take_once, &c);
    err = coro_sched_run(s);
    CHECK(err == EDEADLK && clock == 0,
          "A, B, C on a semaphore of 0 should all wait: run %s, %d through", check_err_name(err),
          clock);
    coro_go(s, release_then_acquire, &late);
    err = coro_sched_run(s);
    CHECK(late.err == 0 || late.at == 0, "the late comer's release or acquire returned %s",
          check_err_name(late.err));
    CHECK(late.at == 0,
          "a coroutine released one unit while A, B, C waited and then asked for one itself: it "
          "got it (turn %d) and A %s: the late comer overtook the waiters (hand the unit to the "
          "first waiter, do not put it back in the count)",
          late.at, a.at ? "got one too" : "went back to waiting");
    CHECK(a.at == 1 && b.at == 0 && c.at == 0,
          "one release with A, B, C waiting: expected A through and B, C waiting; A %d, B %d, C %d",
          a.at, b.at, c.at);
    CHECK(err == EDEADLK, "B, C and the late comer should wait: run returned %s",
          check_err_name(err));
    for (int i = 0; i < 3; i++)
        CHECK(semaphore_release(sem) == 0, "semaphore_release() did not return 0");
    err = coro_sched_run(s);
    CHECK(err == 0, "three more releases should let everyone through: run %s", check_err_name(err));
    CHECK(a.at == 1 && b.at == 2 && c.at == 3 && late.at == 4,
          "the order of acquires should be A 1, B 2, C 3, late comer 4; it was A %d, B %d, C %d, "
          "late comer %d",
          a.at, b.at, c.at, late.at);
    CHECK(semaphore_destroy(sem) == 0, "semaphore_destroy() did not return 0");
    coro_sched_destroy(s);
}

/* ── stray wake ───────────────────────────────────────────────────────── */

static void *wake_it(void *arg)
{
    struct taker *t = arg;

    if (t->self != NULL)
        coro_wake(t->self);
    return NULL;
}

static void case_stray_wake(void)
{
    coro_sched *s = new_sched();
    semaphore *sem = new_sem(0);
    int clock = 0, err;
    struct taker a = {.sem = sem, .clock = &clock};

    coro_go(s, take_once, &a);
    coro_go(s, wake_it, &a); /* runs once A waits */
    err = coro_sched_run(s);
    CHECK(a.at == 0,
          "A waited on a semaphore of 0 and another coroutine called coro_wake(A): A's acquire "
          "returned %s with no unit released (a wake is not a release: check your own state "
          "again after every park)",
          check_err_name(a.err));
    CHECK(err == EDEADLK, "A should still wait after a stray wake: run returned %s",
          check_err_name(err));
    CHECK(semaphore_release(sem) == 0 && coro_sched_run(s) == 0 && a.at == 1,
          "after a real release A did not go on");
    CHECK(semaphore_destroy(sem) == 0, "semaphore_destroy() did not return 0");
    coro_sched_destroy(s);
}

/* ── old permit ───────────────────────────────────────────────────────── */

static void *yield_then_take(void *arg)
{
    struct taker *t = arg;

    t->self = coro_self();
    coro_yield(); /* meanwhile it is woken: a permit */
    t->err = semaphore_acquire(t->sem);
    if (t->err == 0)
        t->at = ++*t->clock;
    return NULL;
}

static void case_old_permit(void)
{
    coro_sched *s = new_sched();
    semaphore *sem = new_sem(0);
    int clock = 0, err;
    struct taker a = {.sem = sem, .clock = &clock};

    coro_go(s, yield_then_take, &a);
    coro_go(s, wake_it, &a); /* A is in the ready queue: a permit */
    err = coro_sched_run(s);
    CHECK(a.at == 0,
          "A held a permit (a wake while it was not parked) and then acquired a semaphore of 0: "
          "the acquire returned %s at once (its first park used the old permit: loop until the "
          "unit is yours)",
          check_err_name(a.err));
    CHECK(err == EDEADLK, "A should wait: run returned %s", check_err_name(err));
    CHECK(semaphore_release(sem) == 0 && coro_sched_run(s) == 0 && a.at == 1,
          "after a real release A did not go on");
    CHECK(semaphore_destroy(sem) == 0, "semaphore_destroy() did not return 0");
    coro_sched_destroy(s);
}

/* ── crowd ────────────────────────────────────────────────────────────── */

enum { CROWD = 50, ROUNDS = 20, UNITS = 3 };

struct crowd {
    semaphore *sem;
    int holding, most, done, errors;
};

static void *take_and_give(void *arg)
{
    struct crowd *c = arg;

    for (int r = 0; r < ROUNDS; r++) {
        if (semaphore_acquire(c->sem) != 0) {
            c->errors++;
            return NULL;
        }
        if (++c->holding > c->most)
            c->most = c->holding;
        for (int y = 0; y < (r % 3); y++)
            coro_yield();
        c->holding--;
        if (semaphore_release(c->sem) != 0)
            c->errors++;
        coro_yield();
    }
    c->done++;
    return NULL;
}

static void case_crowd(void)
{
    coro_sched *s = new_sched();
    struct crowd c = {.sem = new_sem(UNITS)};
    int err;

    for (int i = 0; i < CROWD; i++)
        coro_go(s, take_and_give, &c);
    err = coro_sched_run(s);
    CHECK(err == 0 && c.done == CROWD,
          "50 coroutines sharing a semaphore of 3: run returned %s with %d of 50 finished",
          check_err_name(err), c.done);
    CHECK(c.errors == 0, "%d acquires or releases failed", c.errors);
    CHECK(c.most <= UNITS, "%d coroutines held a semaphore of 3 at once", c.most);
    CHECK(c.most == UNITS, "at most %d held a semaphore of 3 at once: units were lost", c.most);
    CHECK(semaphore_destroy(c.sem) == 0, "semaphore_destroy() did not return 0");
    coro_sched_destroy(s);
}

/* ── eperm ────────────────────────────────────────────────────────────── */

static void case_eperm(void)
{
    semaphore *sem = new_sem(0);
    int err = semaphore_acquire(sem);

    CHECK(err == EPERM,
          "semaphore_acquire() of a semaphore of 0 on the thread's own stack returned %s, "
          "expected EPERM (nothing could ever release it to this caller)",
          check_err_name(err));
    err = semaphore_destroy(sem);
    CHECK(err == 0, "after a refused acquire, semaphore_destroy() returned %s: the refused "
          "caller was left in the queue", check_err_name(err));
}

int main(void)
{
    static const check_case cases[] = {
        {"counting", case_counting},
        {"fifo", case_fifo},
        {"stray wake", case_stray_wake},
        {"old permit", case_old_permit},
        {"crowd", case_crowd},
        {"eperm", case_eperm},
    };

    return check_main(cases, sizeof cases / sizeof cases[0]);
}
