/*
 * check mpsc_inbox: Chapter 4, exercise 2.
 *
 * The exercise: implement the inbox as Dmitry Vyukov's intrusive MPSC
 * queue (one exchange per push, no retry loop). What does the consumer
 * have to do differently?
 *
 * What you provide: a change to the library in your lab directory, no
 * answers/ file. Rewrite the inbox of inbox.c (and its struct and
 * coro__inbox_empty() in coro_impl.h) so that coro__inbox_push() is one
 * atomic exchange of the newest node followed by the link from the node
 * before, and the owner takes requests from the oldest end. Keep the
 * inbox's functions and what they promise (coro_impl.h): a push from any
 * thread wakes a sleeping owner; the owner gets every request exactly
 * once, each producer's in the order it pushed them; the owner never
 * sleeps while a request waits. (The reference answer is
 * lab/answers/mpsc_inbox.patch.)
 *
 * What it verifies, through the public API only. So it cannot tell a
 * Vyukov queue from the Treiber stack it replaces: whoever grades reads
 * the push for "one exchange, no loop". Each case runs in a child process
 * of its own; a case still waiting after 8 s says how far it got (a
 * request stuck in the inbox, or a lost wake-up), and one still running
 * after 10 s is killed and reported as hung.
 *   - lone_posts:  one thread posts to a pump on another, one post at a
 *                  time, 300 times, waiting for each to run and often
 *                  letting the pump fall asleep in between: every post
 *                  runs (a queue that can only hand over a node once
 *                  another is behind it keeps the lone post forever).
 *   - lone_wakes:  a coroutine parks 300 times; another thread wakes it
 *                  each time, alone in the inbox: it always comes back.
 *   - lone_goes:   another thread starts 300 coroutines one at a time on
 *                  a pump that sleeps in between: each one runs.
 *   - crowd:       4 threads each post 20,000 numbered calls and start
 *                  250 coroutines on one pump at once: every call runs
 *                  exactly once, each thread's in the order it posted
 *                  them (a take that comes out newest first fails here),
 *                  and every coroutine runs.
 *   - ping_pong:   two coroutines on two threads' pumps wake each other
 *                  2,000 times (each pump sleeps while it waits): no
 *                  wake-up is lost.
 * The usual wrong answers it catches: the last node never handed over
 * (lone_*), a take that reverses or skips nodes (crowd), an inbox that
 * looks empty while a push is half done, so the owner sleeps on it
 * (lone_*, ping_pong). Run it under ThreadSanitizer too: a link stored
 * relaxed, or a node read before its link is acquired, shows there.
 * No timing is measured: the deadlines only turn a hang into a message.
 * Prints `check mpsc_inbox: ok` and exits 0, or one
 * `check mpsc_inbox: FAIL: CASE: ...` line per failed case and exits 1.
 */
#define CHECK_NAME "mpsc_inbox"
#include "lab_check.h"

#include "coro.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* ── Waiting, with a deadline that turns a hang into a message ────────── */

/* A wait gives up this long after the case started: before the harness's
 * kill at CHECK_CASE_SECONDS, so that the failure says what was missing. */
#define GIVE_UP_NS ((uint64_t)(CHECK_CASE_SECONDS - 2) * 1000000000u)

static uint64_t case_start; /* set by the case's first pump_start() */

static uint64_t now_ns(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static bool given_up(void)
{
    return now_ns() - case_start > GIVE_UP_NS;
}

static void pause_us(long us)
{
    struct timespec t = {us / 1000000, (us % 1000000) * 1000};

    while (nanosleep(&t, &t) != 0 && errno == EINTR)
        continue;
}

/* Wait until *v >= n, polling with short sleeps; fail with `what` (which
 * names the count and the total) if it never comes. */
static void await_count(atomic_long *v, long n, const char *what, long total)
{
    while (atomic_load(v) < n) {
        if (given_up())
            check_fail("gave up after %d s: %ld of %ld %s (a request stuck "
                       "in the inbox, or a lost wake-up)",
                       CHECK_CASE_SECONDS - 2, atomic_load(v), total, what);
        pause_us(20);
    }
}

/* ── A pump on a thread of its own ────────────────────────────────────── */

/* The pump thread creates its scheduler, starts a keeper coroutine that
 * parks until `done` (so coro_sched_run() keeps pumping, and sleeping when
 * idle), and runs. The main thread hands it work from outside. */
typedef struct {
    pthread_t thread;
    coro_sched *_Atomic sched;
    coro *_Atomic keeper;
    atomic_bool done;
    atomic_bool last_wake_made; /* keeper's handle no longer used outside */
    int run_rc;
} pump;

static void *keeper_body(void *arg)
{
    pump *p = arg;

    atomic_store(&p->keeper, coro_self());
    while (!atomic_load(&p->done))
        coro_park();
    return NULL;
}

static void *pump_main(void *arg)
{
    pump *p = arg;
    coro_sched *s = coro_sched_create();
    coro *k;

    CHECK(s != NULL, "coro_sched_create() failed");
    k = coro_spawn(s, keeper_body, p);
    CHECK(k != NULL, "coro_spawn() failed");
    atomic_store(&p->sched, s);
    p->run_rc = coro_sched_run(s);
    while (!atomic_load(&p->last_wake_made))
        pause_us(50);
    coro_destroy(k);
    CHECK(coro_sched_destroy(s) == 0, "coro_sched_destroy() after the run: not 0");
    coro_thread_detach();
    return NULL;
}

static coro_sched *pump_start(pump *p)
{
    if (case_start == 0)
        case_start = now_ns();
    memset(p, 0, sizeof *p);
    CHECK(pthread_create(&p->thread, NULL, pump_main, p) == 0, "pthread_create failed");
    while (atomic_load(&p->keeper) == NULL)
        pause_us(20);
    return atomic_load(&p->sched);
}

static void pump_stop(pump *p)
{
    atomic_store(&p->done, true);
    coro_wake(atomic_load(&p->keeper));
    atomic_store(&p->last_wake_made, true);
    pthread_join(p->thread, NULL);
    CHECK(p->run_rc == 0, "coro_sched_run() returned %s", check_err_name(p->run_rc));
}

/* Let the pump fall asleep now and then: past the spin (50 us) and its
 * backoff, into the futex. */
static void now_and_then(int i)
{
    if (i % 3 == 1)
        pause_us(100);
    else if (i % 3 == 2)
        pause_us(1000);
}

/* ── lone_posts ───────────────────────────────────────────────────────── */

enum { LONE = 300 };

static atomic_long ran;

static void count_post(coro_sched *s, void *arg)
{
    (void)s;
    (void)arg;
    atomic_fetch_add(&ran, 1);
}

static void case_lone_posts(void)
{
    pump p;
    coro_sched *s = pump_start(&p);

    for (int i = 1; i <= LONE; i++) {
        int rc = coro_post(s, count_post, NULL);

        CHECK(rc == 0, "coro_post() returned %s", check_err_name(rc));
        await_count(&ran, i, "lone posts ran", LONE);
        now_and_then(i);
    }
    pump_stop(&p);
}

/* ── lone_wakes ───────────────────────────────────────────────────────── */

static atomic_long parks_done;
static coro *_Atomic parker;

static void *parker_body(void *arg)
{
    (void)arg;
    atomic_store(&parker, coro_self());
    for (int i = 0; i < LONE; i++) {
        coro_park();
        atomic_fetch_add(&parks_done, 1);
    }
    return NULL;
}

static void go_parker(coro_sched *s, void *arg)
{
    (void)arg;
    coro_go(s, parker_body, NULL);
}

static void case_lone_wakes(void)
{
    pump p;
    coro_sched *s = pump_start(&p);
    coro *c;

    CHECK(coro_post(s, go_parker, NULL) == 0, "coro_post() failed");
    while ((c = atomic_load(&parker)) == NULL) {
        CHECK(!given_up(), "the parking coroutine, started by a post from "
                           "another thread, never ran");
        pause_us(20);
    }
    for (int i = 1; i <= LONE; i++) {
        int rc = coro_wake(c);

        CHECK(rc == 0, "coro_wake() returned %s", check_err_name(rc));
        await_count(&parks_done, i, "wakes from another thread came back", LONE);
        now_and_then(i);
    }
    pump_stop(&p);
}

/* ── lone_goes ────────────────────────────────────────────────────────── */

static void *count_coroutine(void *arg)
{
    (void)arg;
    atomic_fetch_add(&ran, 1);
    return NULL;
}

static void case_lone_goes(void)
{
    pump p;
    coro_sched *s = pump_start(&p);

    for (int i = 1; i <= LONE; i++) {
        int rc = coro_go(s, count_coroutine, NULL);

        CHECK(rc == 0, "coro_go() returned %s", check_err_name(rc));
        await_count(&ran, i, "coroutines started from another thread ran", LONE);
        now_and_then(i);
    }
    pump_stop(&p);
}

/* ── crowd ────────────────────────────────────────────────────────────── */

enum { PRODUCERS = 4, POSTS_EACH = 20000, GOES_EACH = 250 };

static coro_sched *crowd_sched;
static pthread_barrier_t crowd_start;
/* The pump's thread only (the posts run there); the main thread reads
 * them after pump_stop() has joined it. */
static long next_seq[PRODUCERS];
static long out_of_order, first_bad_producer = -1, first_bad_got, first_bad_wanted;
static atomic_long goes_ran;

static void numbered(coro_sched *s, void *arg)
{
    uintptr_t v = (uintptr_t)arg;
    long producer = (long)(v >> 24), seq = (long)(v & 0xffffff);

    (void)s;
    if (seq != next_seq[producer] && out_of_order++ == 0) {
        first_bad_producer = producer;
        first_bad_got = seq;
        first_bad_wanted = next_seq[producer];
    }
    next_seq[producer] = seq + 1;
    atomic_fetch_add(&ran, 1);
}

static void *crowd_go_body(void *arg)
{
    (void)arg;
    atomic_fetch_add(&goes_ran, 1);
    return NULL;
}

static void *crowd_producer(void *arg)
{
    uintptr_t producer = (uintptr_t)arg;

    pthread_barrier_wait(&crowd_start);
    for (uintptr_t seq = 0; seq < POSTS_EACH; seq++) {
        while (coro_post(crowd_sched, numbered, (void *)(producer << 24 | seq)) != 0)
            pause_us(10); /* only ENOMEM could refuse */
        if (seq % (POSTS_EACH / GOES_EACH) == 0)
            while (coro_go(crowd_sched, crowd_go_body, NULL) != 0)
                pause_us(10);
    }
    coro_thread_detach();
    return NULL;
}

static void case_crowd(void)
{
    enum { POSTS = PRODUCERS * POSTS_EACH, GOES = PRODUCERS * GOES_EACH };
    pump p;
    pthread_t threads[PRODUCERS];
    long got;

    crowd_sched = pump_start(&p);
    pthread_barrier_init(&crowd_start, NULL, PRODUCERS);
    for (uintptr_t i = 0; i < PRODUCERS; i++)
        CHECK(pthread_create(&threads[i], NULL, crowd_producer, (void *)i) == 0,
              "pthread_create failed");
    for (int i = 0; i < PRODUCERS; i++)
        pthread_join(threads[i], NULL);
    await_count(&ran, POSTS, "numbered posts ran", POSTS);
    await_count(&goes_ran, GOES, "coroutines started by the crowd ran", GOES);
    pump_stop(&p);
    /* After the join, the pump's counters are ours to read. */
    CHECK(out_of_order == 0,
          "%ld posts ran out of their producer's order (the first: producer "
          "%ld's post %ld ran when %ld was due): the owner must take each "
          "producer's requests oldest first",
          out_of_order, first_bad_producer, first_bad_got, first_bad_wanted);
    got = atomic_load(&ran);
    CHECK(got == POSTS, "%ld posts ran, not %d: some ran twice", got, (int)POSTS);
    for (int i = 0; i < PRODUCERS; i++)
        CHECK(next_seq[i] == POSTS_EACH, "producer %d's last post to run was %ld, not %d",
              i, next_seq[i] - 1, POSTS_EACH - 1);
    got = atomic_load(&goes_ran);
    CHECK(got == GOES, "%ld coroutines ran, not %d: some ran twice", got, (int)GOES);
}

/* ── ping_pong ────────────────────────────────────────────────────────── */

enum { ROUNDS = 2000 };

static coro *_Atomic player[2];
static atomic_long turn;         /* moves made: player 0 makes the even ones */
static atomic_long players_done; /* players that will wake nobody again */
static atomic_bool release;      /* the main thread lets them return */

static void *player_body(void *arg)
{
    long me = (long)(intptr_t)arg;
    coro *other;

    atomic_store(&player[me], coro_self());
    while ((other = atomic_load(&player[1 - me])) == NULL)
        coro_sleep(CORO_USEC * 20);
    for (;;) {
        long t = atomic_load(&turn);

        if (t >= 2 * ROUNDS)
            break;
        if (t % 2 != me) {
            coro_park(); /* the other's wake (or a stale permit) ends it */
            continue;
        }
        atomic_store(&turn, t + 1);
        coro_wake(other);
    }
    /* Stay alive until the main thread says so: the other may still be
     * inside its last coro_wake() of us. */
    atomic_fetch_add(&players_done, 1);
    while (!atomic_load(&release))
        coro_park();
    return NULL;
}

static void go_player(coro_sched *s, void *arg)
{
    coro_go(s, player_body, arg);
}

static void case_ping_pong(void)
{
    pump a, b;
    coro_sched *sa = pump_start(&a), *sb = pump_start(&b);

    CHECK(coro_post(sa, go_player, (void *)(intptr_t)0) == 0, "coro_post() failed");
    CHECK(coro_post(sb, go_player, (void *)(intptr_t)1) == 0, "coro_post() failed");
    while (atomic_load(&players_done) < 2) {
        CHECK(!given_up(),
              "gave up after %d s: %ld of %d moves made (each move is a wake "
              "from the other thread: one was lost)",
              CHECK_CASE_SECONDS - 2, atomic_load(&turn), 2 * ROUNDS);
        pause_us(100);
    }
    atomic_store(&release, true);
    coro_wake(atomic_load(&player[0]));
    coro_wake(atomic_load(&player[1]));
    pump_stop(&a);
    pump_stop(&b);
}

/* ── main ─────────────────────────────────────────────────────────────── */

int main(void)
{
    static const check_case cases[] = {
        {"lone_posts", case_lone_posts}, {"lone_wakes", case_lone_wakes},
        {"lone_goes", case_lone_goes},   {"crowd", case_crowd},
        {"ping_pong", case_ping_pong},
    };

    return check_main(cases, sizeof cases / sizeof cases[0]);
}
