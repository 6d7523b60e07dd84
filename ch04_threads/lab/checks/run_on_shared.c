/*
 * check run_on_shared: Chapter 4, exercise 3.
 *
 * The exercise: build a "shared looper" executor: a process-wide looper
 * created on first use, and a run_on_shared(fn, arg) helper. What must
 * happen at exit?
 *
 * What you provide: the file answers/run_on_shared.c in your lab
 * directory, built with your library, defining these two functions (the
 * check declares them itself):
 *
 *   coro_sched *shared_sched(void);
 *       the scheduler of the one shared looper of the process. The first
 *       call starts the looper (coro_looper_start()); every later call,
 *       from any thread, returns the same scheduler. Many threads may make
 *       the first call at the same moment: still exactly one looper.
 *       NULL with errno set when the looper cannot start (ENOMEM, EAGAIN),
 *       and NULL with errno = ESHUTDOWN once the process is exiting (see
 *       below), except on the looper's own thread.
 *   int run_on_shared(coro_fn fn, void *arg);
 *       starts fn(arg) as a detached coroutine on the shared looper
 *       (coro_go()), from any thread. 0, or: EINVAL for a NULL fn; the
 *       errno of shared_sched() when it returns NULL (ESHUTDOWN once the
 *       process is exiting).
 *   At exit (main returns, or exit() is called) the looper is stopped
 *   the way coro_looper_stop() stops one: what was queued on it runs to
 *   the end before the process ends (register an atexit() handler when
 *   the looper starts). Once that stop has begun, a call from another
 *   thread (or from a later atexit handler) returns ESHUTDOWN; a call
 *   made by work still draining on the looper's own thread may go onto
 *   the looper or return ESHUTDOWN (both are accepted). If exit() is
 *   called on the looper's own thread, the process must still exit (the
 *   looper cannot join itself: coro_looper_stop() says EPERM there).
 *
 * What it verifies, each case in a child process of its own (a crash or a
 * hang in one case is that case's failure, and the other cases still
 * run). A wait still unfinished after 8 s fails with what it waited for;
 * a case still running after 10 s is killed and reported as hung (38 s
 * and 40 s under ThreadSanitizer, which is slow to start threads). The
 * cases that test the exit run the process that exits as a child of the
 * case, and read what it wrote to a pipe:
 *   - one_looper:  shared_sched() is not NULL and the same on every call;
 *                  a coroutine from run_on_shared() gets its argument and
 *                  runs on a thread that is not the caller's, with
 *                  coro_sched_self() == shared_sched(); a second one runs
 *                  on the same thread; one started by run_on_shared()
 *                  inside a coroutine on the looper runs there too;
 *                  run_on_shared(NULL, ...) is EINVAL.
 *   - first_use:   in 12 fresh processes (4 under ThreadSanitizer, which
 *                  watches for the race itself), 8 threads make their first call
 *                  at once (half shared_sched(), half run_on_shared()),
 *                  then 50 run_on_shared() calls each: every thread got the
 *                  same scheduler, and all 400 coroutines ran, on one
 *                  thread, with that scheduler as coro_sched_self().
 *   - exit_drains: 5 coroutines that sleep 30 ms and then write a byte,
 *                  and one that sleeps 10 ms and then calls run_on_shared()
 *                  once more, are queued; the child then calls exit(0) at
 *                  once. Every byte must arrive (the 5, and the sixth
 *                  coroutine's if its call was accepted), and the exit
 *                  status must be 0.
 *   - after_exit:  an atexit handler registered before the first use (so
 *                  it runs after yours) calls run_on_shared() and
 *                  shared_sched(): ESHUTDOWN, and NULL with errno =
 *                  ESHUTDOWN, and the refused coroutine never runs.
 *   - exit_on_looper: a coroutine on the shared looper calls exit(7): the
 *                  process exits with status 7.
 * The usual wrong answers it catches: no stop at exit, so queued work is
 * cut off (exit_drains); a first use that is not under a lock or a
 * once, so two loopers start (first_use, often only in some of its 12
 * rounds); a call after the stop that starts a second looper, or goes
 * to the stopped one (after_exit); a stop at exit that joins the looper
 * from its own thread, or waits for it while holding the lock the
 * draining work needs (exit_on_looper, exit_drains: a hang).
 * No timing is measured (the sleeps only make sure the work is still
 * queued when exit() comes; the deadlines only turn a hang into a
 * message). Prints `check run_on_shared: ok` and exits 0, or one
 * `check run_on_shared: FAIL: CASE: ...` line per failed case and exits 1.
 */
#define CHECK_NAME "run_on_shared"
/* Under ThreadSanitizer a thread's start and a fork are slow (a round of
 * first_use takes over a second): more time, and fewer rounds. */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifdef UNDER_TSAN
#define CHECK_CASE_SECONDS 40
#endif
#include "lab_check.h"

#include "coro.h"

#include <pthread.h>
#include <stdbool.h>
#include <time.h>

coro_sched *shared_sched(void);
int run_on_shared(coro_fn fn, void *arg);

/* A wait gives up this many seconds after it began: before the harness's
 * kill, so that the failure says what never came. */
#define GIVE_UP_S (CHECK_CASE_SECONDS - 2)

/* ── A count that coroutines raise and the main thread waits for ──────── */

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int count;
} counter;

#define COUNTER_INIT {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0}

static void counter_add(counter *c)
{
    pthread_mutex_lock(&c->lock);
    c->count++;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

/* Wait until the count reaches n; fail saying `what` if it never does. */
static void counter_wait(counter *c, int n, const char *what)
{
    struct timespec until;
    int got;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += GIVE_UP_S;
    pthread_mutex_lock(&c->lock);
    while (c->count < n)
        if (pthread_cond_timedwait(&c->cond, &c->lock, &until) == ETIMEDOUT)
            break;
    got = c->count;
    pthread_mutex_unlock(&c->lock);
    CHECK(got >= n, "gave up after %d s: %d of %d %s", GIVE_UP_S, got, n, what);
}

/* ── A process that exits, as a child of the case ─────────────────────── */

static int pipe_w = -1; /* in that child: where it reports */

static void pipe_put(char ch)
{
    ssize_t ignored = write(pipe_w, &ch, 1);
    (void)ignored;
}

/* Runs `body` in a child process, which must end itself with exit() (the
 * stop at exit is what is tested) and with status `status`. `out`
 * receives what it wrote with pipe_put(), as a string. `what` says, for a
 * hang, where it was. A failure found inside the child is reported by the
 * child and fails the case. */
static void run_exiting(void (*body)(void), int status, char *out, size_t out_size,
                        const char *what)
{
    int fds[2], st;
    pid_t pid;
    size_t got = 0;

    CHECK(pipe(fds) == 0, "pipe: %s", strerror(errno));
    fflush(stdout);
    pid = fork();
    CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        close(fds[0]);
        pipe_w = fds[1];
        alarm(GIVE_UP_S); /* its own: an alarm is not inherited */
        body();
        check_fail("the case's process returned instead of exiting");
    }
    close(fds[1]);
    for (;;) {
        char buf[64];
        ssize_t n = read(fds[0], buf, sizeof buf);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        for (ssize_t i = 0; i < n; i++)
            if (got + 1 < out_size)
                out[got++] = buf[i];
    }
    out[got] = '\0';
    close(fds[0]);
    while (waitpid(pid, &st, 0) < 0)
        CHECK(errno == EINTR, "waitpid: %s", strerror(errno));
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
        check_fail("the process had not ended %d s after it began, %s (wrote \"%s\")",
                   GIVE_UP_S, what, out);
    CHECK(!WIFSIGNALED(st), "the process died of signal %d (%s), %s", WTERMSIG(st),
          strsignal(WTERMSIG(st)), what);
    if (WEXITSTATUS(st) == status)
        return;
    if (WEXITSTATUS(st) == 1)
        _exit(1); /* the child has said why */
    check_fail("the process exited with status %d, not %d, %s", WEXITSTATUS(st), status,
               what);
}

/* ── one_looper ───────────────────────────────────────────────────────── */

typedef struct {
    void *arg;
    pthread_t thread;
    coro_sched *self;
} probe;

static probe probes[3];
static counter probes_done = COUNTER_INIT;
static counter nested_done = COUNTER_INIT;
static int nested_rc = -1; /* written before nested_done is raised */

static void *record(void *arg)
{
    probe *p = arg;

    p->arg = arg;
    p->thread = pthread_self();
    p->self = coro_sched_self();
    counter_add(&probes_done);
    return NULL;
}

static void *start_nested(void *arg)
{
    (void)arg;
    nested_rc = run_on_shared(record, &probes[2]);
    counter_add(&nested_done);
    return NULL;
}

static void case_one_looper(void)
{
    coro_sched *s = shared_sched(), *again = shared_sched();
    int rc;

    CHECK(s != NULL, "shared_sched() returned NULL (errno %s)", check_err_name(errno));
    CHECK(again == s, "shared_sched() returned %p, then %p: not one looper", (void *)s,
          (void *)again);
    rc = run_on_shared(record, &probes[0]);
    CHECK(rc == 0, "run_on_shared() returned %s", check_err_name(rc));
    counter_wait(&probes_done, 1, "coroutines of run_on_shared() ran");
    rc = run_on_shared(record, &probes[1]);
    CHECK(rc == 0, "the second run_on_shared() returned %s", check_err_name(rc));
    counter_wait(&probes_done, 2, "coroutines of run_on_shared() ran");
    rc = run_on_shared(start_nested, NULL);
    CHECK(rc == 0, "run_on_shared(start_nested) returned %s", check_err_name(rc));
    counter_wait(&nested_done, 1, "coroutines calling run_on_shared() on the looper ran");
    CHECK(nested_rc == 0, "run_on_shared() inside a coroutine on the looper returned %s",
          check_err_name(nested_rc));
    counter_wait(&probes_done, 3, "coroutines of run_on_shared() ran");
    for (int i = 0; i < 3; i++) {
        CHECK(probes[i].arg == &probes[i], "coroutine %d got arg %p, not %p", i,
              probes[i].arg, (void *)&probes[i]);
        CHECK(probes[i].self == s,
              "coroutine %d ran with coro_sched_self() = %p, not shared_sched() = %p", i,
              (void *)probes[i].self, (void *)s);
        CHECK(pthread_equal(probes[i].thread, probes[0].thread),
              "coroutine %d ran on another thread than coroutine 0: not one looper", i);
    }
    CHECK(!pthread_equal(probes[0].thread, pthread_self()),
          "the coroutine ran on the caller's thread, not on a looper");
    rc = run_on_shared(NULL, NULL);
    CHECK(rc == EINVAL, "run_on_shared(NULL, NULL) returned %s, not EINVAL",
          check_err_name(rc));
}

/* ── first_use ────────────────────────────────────────────────────────── */

#ifdef UNDER_TSAN
enum { THREADS = 8, CALLS = 50, FIRST_USE_ROUNDS = 4 };
#else
enum { THREADS = 8, CALLS = 50, FIRST_USE_ROUNDS = 12 };
#endif

static pthread_barrier_t barrier;
static coro_sched *seen[THREADS];
static int first_rc[THREADS];
static pthread_t ran_on[THREADS * CALLS];
static coro_sched *ran_with[THREADS * CALLS];
static counter ran = COUNTER_INIT;

static void *note_where(void *arg)
{
    size_t i = (size_t)arg;

    ran_on[i] = pthread_self();
    ran_with[i] = coro_sched_self();
    counter_add(&ran);
    return NULL;
}

static void *first_user(void *arg)
{
    size_t t = (size_t)arg;

    pthread_barrier_wait(&barrier);
    if (t % 2 == 0) {
        seen[t] = shared_sched();
        first_rc[t] = seen[t] == NULL ? errno : 0;
    }
    for (size_t k = 0; k < CALLS; k++) {
        int rc = run_on_shared(note_where, (void *)(t * CALLS + k));

        if (rc != 0) {
            first_rc[t] = rc;
            counter_add(&ran); /* keep the count: it will not run */
        }
    }
    if (t % 2 == 1)
        seen[t] = shared_sched();
    return NULL;
}

/* One round, in a fresh process: no looper started yet. */
static void first_use_round(int round)
{
    pthread_t threads[THREADS];
    coro_sched *s;

    pthread_barrier_init(&barrier, NULL, THREADS);
    for (size_t t = 0; t < THREADS; t++)
        CHECK(pthread_create(&threads[t], NULL, first_user, (void *)t) == 0,
              "pthread_create failed");
    for (size_t t = 0; t < THREADS; t++)
        pthread_join(threads[t], NULL);
    counter_wait(&ran, THREADS * CALLS, "coroutines of the 8 first users ran");
    s = shared_sched();
    for (size_t t = 0; t < THREADS; t++) {
        CHECK(first_rc[t] == 0, "round %d, thread %zu: a call failed with %s", round, t,
              check_err_name(first_rc[t]));
        CHECK(seen[t] == s,
              "round %d: thread %zu got scheduler %p, the others %p: two loopers "
              "started (the first use is a race)",
              round, t, (void *)seen[t], (void *)s);
    }
    for (size_t i = 0; i < THREADS * CALLS; i++)
        CHECK(ran_with[i] == s && pthread_equal(ran_on[i], ran_on[0]),
              "round %d: the coroutines ran on more than one thread or scheduler "
              "(coroutine %zu): two loopers started",
              round, i);
}

static void case_first_use(void)
{
    for (int round = 1; round <= FIRST_USE_ROUNDS; round++) {
        int st;
        pid_t pid;

        fflush(stdout);
        pid = fork();
        CHECK(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
            alarm(GIVE_UP_S); /* its own: an alarm is not inherited */
            first_use_round(round);
            _exit(0); /* no exit handlers: the looper is simply dropped */
        }
        while (waitpid(pid, &st, 0) < 0)
            CHECK(errno == EINTR, "waitpid: %s", strerror(errno));
        if (WIFEXITED(st) && WEXITSTATUS(st) == 1)
            _exit(1); /* the round has said why */
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "round %d %s", round,
              WIFEXITED(st) ? "exited with an unexpected status"
              : WTERMSIG(st) == SIGALRM ? "hung"
                                        : strsignal(WTERMSIG(st)));
    }
}

/* ── exit_drains ──────────────────────────────────────────────────────── */

static void *slow_writer(void *arg)
{
    coro_sleep(30 * CORO_MSEC);
    pipe_put((char)(size_t)arg);
    return NULL;
}

static void *chain(void *arg)
{
    (void)arg;
    coro_sleep(10 * CORO_MSEC);
    /* By now exit() has most likely begun: the stop may accept this or
     * refuse it. */
    pipe_put(run_on_shared(slow_writer, (void *)(size_t)'c') == 0 ? 'y' : 'n');
    return NULL;
}

static void drains_then_exits(void)
{
    for (int i = 0; i < 5; i++)
        CHECK(run_on_shared(slow_writer, (void *)(size_t)'x') == 0,
              "run_on_shared() failed");
    CHECK(run_on_shared(chain, NULL) == 0, "run_on_shared() failed");
    exit(0);
}

static void case_exit_drains(void)
{
    char out[256];
    int x = 0, c = 0, y = 0, n = 0;

    run_exiting(drains_then_exits, 0, out, sizeof out,
                "in exit(0) with work queued on the shared looper");
    for (char *p = out; *p; p++) {
        x += *p == 'x';
        c += *p == 'c';
        y += *p == 'y';
        n += *p == 'n';
    }
    CHECK(x == 5,
          "%d of the 5 coroutines queued before exit(0) finished: the looper was "
          "not stopped (and drained) at exit",
          x);
    CHECK(y + n == 1 && c == y,
          "the coroutine that called run_on_shared() during the exit did not finish "
          "as it should (got \"%s\": %s)",
          out, y + n != 1 ? "it never finished" : "its call was accepted but never ran");
}

/* ── after_exit ───────────────────────────────────────────────────────── */

static counter quick_done = COUNTER_INIT;

static void *quick(void *arg)
{
    (void)arg;
    counter_add(&quick_done);
    return NULL;
}

static void *must_not_run(void *arg)
{
    (void)arg;
    pipe_put('!');
    return NULL;
}

static void late_user(void)
{
    int rc, err;
    coro_sched *s;
    char report[64];

    rc = run_on_shared(must_not_run, NULL);
    errno = 0;
    s = shared_sched();
    err = errno;
    snprintf(report, sizeof report, "rc=%d s=%s errno=%d.", rc, s == NULL ? "NULL" : "set",
             err);
    for (char *p = report; *p; p++)
        pipe_put(*p);
    /* Give a coroutine that was (wrongly) accepted the time to run. */
    nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
}

static void uses_then_exits(void)
{
    atexit(late_user); /* before the first use: it runs after the answer's */
    CHECK(run_on_shared(quick, NULL) == 0, "run_on_shared() failed");
    counter_wait(&quick_done, 1, "coroutines on the shared looper ran");
    exit(0);
}

static void case_after_exit(void)
{
    char out[256], want[64];

    run_exiting(uses_then_exits, 0, out, sizeof out,
                "in exit(0), or in a later atexit handler calling run_on_shared()");
    snprintf(want, sizeof want, "rc=%d s=NULL errno=%d.", ESHUTDOWN, ESHUTDOWN);
    CHECK(strchr(out, '!') == NULL,
          "a later atexit handler's run_on_shared() was accepted and its coroutine "
          "ran (got \"%s\"): the looper was not stopped at exit, or a call after the "
          "stop was not refused",
          out);
    CHECK(strcmp(out, want) == 0,
          "after the stop at exit, run_on_shared() and shared_sched() gave \"%s\", not "
          "\"%s\" (ESHUTDOWN is %d)",
          out, want, ESHUTDOWN);
}

/* ── exit_on_looper ───────────────────────────────────────────────────── */

static void *call_exit(void *arg)
{
    (void)arg;
    exit(7);
}

static void exits_on_looper(void)
{
    CHECK(run_on_shared(call_exit, NULL) == 0, "run_on_shared() failed");
    for (;;)
        pause();
}

static void case_exit_on_looper(void)
{
    char out[8];

    run_exiting(exits_on_looper, 7, out, sizeof out,
                "in exit(7), called by a coroutine on the shared looper");
}

/* ── main ─────────────────────────────────────────────────────────────── */

int main(void)
{
    static const check_case cases[] = {
        {"one_looper", case_one_looper},   {"first_use", case_first_use},
        {"exit_drains", case_exit_drains}, {"after_exit", case_after_exit},
        {"exit_on_looper", case_exit_on_looper},
    };

    return check_main(cases, sizeof cases / sizeof cases[0]);
}
