/*
 * check channel — Chapter 3, exercise 1.
 *
 * The exercise: write a channel of capacity N with two events and a ring
 * buffer, and use it for a pipeline of three coroutines.
 *
 * What you provide: the file answers/channel.c in your lab directory,
 * built with your library, defining these four functions (the check
 * declares them itself; `channel` is your own struct):
 *
 *   typedef struct channel channel;
 *   channel *channel_create(size_t capacity);
 *       a channel that holds up to `capacity` items (void pointers);
 *       NULL with errno = EINVAL when capacity is 0 (ENOMEM: no memory).
 *   int channel_send(channel *ch, void *item);
 *       puts `item` at the back; while the channel is full, the caller
 *       waits (only a coroutine of a scheduler can: from anywhere else a
 *       send that would have to wait returns EPERM). 0 once sent.
 *   int channel_recv(channel *ch, void **item);
 *       takes the front item into *item; while the channel is empty, the
 *       caller waits (EPERM as for send). 0 once received.
 *   int channel_destroy(channel *ch);
 *       0 and frees it; EBUSY (and nothing freed) while a coroutine is
 *       blocked in a send or a receive on it.
 *   EINVAL for a NULL channel (or a NULL `item` pointer in recv).
 *
 * What it verifies, each case in a child process of its own (a crash or a
 * hang in one case is reported as that case's failure):
 *   - capacity:    create(0) fails with EINVAL; a lone sender completes
 *                  exactly N sends and then waits (coro_sched_run() returns
 *                  EDEADLK), for N = 1, 3 and 8; destroy is then EBUSY; a
 *                  receiver started afterwards gets every item, in order.
 *   - wrap-around: items keep their order through a ring that wraps many
 *                  times, the receiver slower than the sender.
 *   - stale set:   after two sends with no receiver, a receiver that takes
 *                  three items gets exactly two and then waits, although an
 *                  event was set while nobody waited; the third send
 *                  reaches it.
 *   - two waiters: two receivers wait on an empty channel and two items
 *                  arrive back to back: both receivers get one; and two
 *                  senders wait on a full channel of 2 and two receives
 *                  come back to back: both senders go on. (A set sent only
 *                  when the count leaves 0, or leaves full, wakes one.)
 *   - pipeline:    three coroutines, producer -> doubler -> consumer over
 *                  two channels of capacity 2: 1000 values, all doubled,
 *                  in order.
 *   - crowd:       4 senders and 3 receivers on one channel of capacity 2,
 *                  each receiver with a fixed quota: every item arrives
 *                  exactly once, each sender's items in the order it sent
 *                  them, and nobody is left waiting (no lost wake-up).
 *   - eperm:       on the thread's own stack, a send to a full channel and
 *                  a receive from an empty one return EPERM.
 * No timing is measured. Prints `check channel: ok` and exits 0, or one
 * `check channel: FAIL: ...` line per failed case and exits 1.
 */
#define CHECK_NAME "channel"
#include "lab_check.h"

#include <inttypes.h>
#include <stdint.h>

#include "coro.h"

typedef struct channel channel;
channel *channel_create(size_t capacity);
int channel_send(channel *ch, void *item);
int channel_recv(channel *ch, void **item);
int channel_destroy(channel *ch);

static coro_sched *new_sched(void)
{
    coro_sched *s = coro_sched_create();

    CHECK(s != NULL, "coro_sched_create() failed");
    return s;
}

static void *item_of(uintptr_t n)
{
    return (void *)(n + 1); /* never NULL, so a missing item shows */
}

static uintptr_t number_of(void *item)
{
    return (uintptr_t)item - 1;
}

/* ── capacity ─────────────────────────────────────────────────────────── */

struct sender {
    channel *ch;
    uintptr_t first, count;
    uintptr_t yield_every; /* yield after every so many sends; 0: never */
    uintptr_t sent;
    int err;
};

static void *send_all(void *arg)
{
    struct sender *p = arg;

    for (uintptr_t i = 0; i < p->count; i++) {
        int err = channel_send(p->ch, item_of(p->first + i));

        if (err != 0) {
            p->err = err;
            return NULL;
        }
        p->sent++;
        if (p->yield_every != 0 && i % p->yield_every == 0)
            coro_yield();
    }
    return NULL;
}

struct receiver {
    channel *ch;
    uintptr_t count;
    uintptr_t got;
    uintptr_t *items; /* count of them */
    int err;
    int yields;       /* between receives: a slow receiver */
};

static void *recv_all(void *arg)
{
    struct receiver *p = arg;

    for (uintptr_t i = 0; i < p->count; i++) {
        void *item = NULL;
        int err = channel_recv(p->ch, &item);

        if (err != 0) {
            p->err = err;
            return NULL;
        }
        p->items[p->got++] = number_of(item);
        for (int y = 0; y < p->yields; y++)
            coro_yield();
    }
    return NULL;
}

static void capacity_of(size_t n)
{
    coro_sched *s = new_sched();
    channel *ch = channel_create(n);
    uintptr_t total = n + 5;
    struct sender snd = {.ch = ch, .first = 0, .count = total};
    uintptr_t items[64];
    struct receiver rcv = {.ch = ch, .count = total, .items = items};
    int err;

    CHECK(ch != NULL, "channel_create(%zu) returned NULL", n);
    CHECK(coro_go(s, send_all, &snd) == 0, "coro_go failed");
    err = coro_sched_run(s);
    CHECK(err == EDEADLK,
          "capacity %zu: a lone sender of %" PRIuPTR " items should block once the channel is full "
          "(coro_sched_run() returning EDEADLK), but run returned %s after %" PRIuPTR " sends",
          n, total, check_err_name(err), snd.sent);
    CHECK(snd.sent == n,
          "capacity %zu: a lone sender completed %" PRIuPTR
          " sends before blocking, expected exactly %zu",
          n, snd.sent, n);
    CHECK(snd.err == 0, "capacity %zu: channel_send returned %s", n, check_err_name(snd.err));
    err = channel_destroy(ch);
    CHECK(err == EBUSY,
          "capacity %zu: channel_destroy() with a sender blocked on it returned %s, expected EBUSY",
          n, check_err_name(err));
    CHECK(coro_go(s, recv_all, &rcv) == 0, "coro_go failed");
    err = coro_sched_run(s);
    CHECK(err == 0,
          "capacity %zu: once a receiver of all %" PRIuPTR " items started, run returned %s "
          "(sent %" PRIuPTR ", received %" PRIuPTR ")",
          n, total, check_err_name(err), snd.sent, rcv.got);
    CHECK(rcv.err == 0 && snd.err == 0, "capacity %zu: send %s, recv %s", n,
          check_err_name(snd.err), check_err_name(rcv.err));
    for (uintptr_t i = 0; i < total; i++)
        CHECK(items[i] == i,
              "capacity %zu: item %" PRIuPTR " received was %" PRIuPTR ", expected %" PRIuPTR
              " (first in, first out)",
              n, i, items[i], i);
    CHECK(channel_destroy(ch) == 0, "channel_destroy() of an idle channel did not return 0");
    CHECK(coro_sched_destroy(s) == 0, "coro_sched_destroy failed");
}

static void case_capacity(void)
{
    errno = 0;
    CHECK(channel_create(0) == NULL && errno == EINVAL,
          "channel_create(0) should return NULL with errno EINVAL (errno was %s)",
          check_err_name(errno));
    CHECK(channel_send(NULL, item_of(0)) == EINVAL, "channel_send(NULL, ...) is not EINVAL");
    capacity_of(1);
    capacity_of(3);
    capacity_of(8);
}

/* ── wrap-around ──────────────────────────────────────────────────────── */

static void case_wrap(void)
{
    enum { N = 200 };
    coro_sched *s = new_sched();
    channel *ch = channel_create(3);
    uintptr_t items[N];
    struct sender snd = {.ch = ch, .first = 0, .count = N};
    struct receiver rcv = {.ch = ch, .count = N, .items = items, .yields = 2};
    int err;

    CHECK(ch != NULL, "channel_create(3) returned NULL");
    coro_go(s, recv_all, &rcv);
    coro_go(s, send_all, &snd);
    err = coro_sched_run(s);
    CHECK(err == 0, "run returned %s (sent %" PRIuPTR ", received %" PRIuPTR " of %d)",
          check_err_name(err), snd.sent, rcv.got, N);
    for (uintptr_t i = 0; i < N; i++)
        CHECK(items[i] == i,
              "through a ring of 3, item %" PRIuPTR " received was %" PRIuPTR " (the ring's index "
              "does not wrap, or the order is lost)",
              i, items[i]);
    CHECK(channel_destroy(ch) == 0, "channel_destroy() did not return 0");
    coro_sched_destroy(s);
}

/* ── stale set ────────────────────────────────────────────────────────── */

static void case_stale(void)
{
    coro_sched *s = new_sched();
    channel *ch = channel_create(4);
    uintptr_t items[3] = {99, 99, 99};
    struct sender two = {.ch = ch, .first = 0, .count = 2};
    struct sender third = {.ch = ch, .first = 2, .count = 1};
    struct receiver rcv = {.ch = ch, .count = 3, .items = items};
    int err;

    CHECK(ch != NULL, "channel_create(4) returned NULL");
    coro_go(s, send_all, &two);
    err = coro_sched_run(s);
    CHECK(err == 0 && two.sent == 2, "two sends into a channel of 4: run %s, %" PRIuPTR " sent",
          check_err_name(err), two.sent);
    coro_go(s, recv_all, &rcv);
    err = coro_sched_run(s);
    CHECK(rcv.got == 2,
          "after two sends, a receiver of three items got %" PRIuPTR
          " before waiting, expected 2 (a wait that returns on a stale set must look at the "
          "count again)",
          rcv.got);
    CHECK(err == EDEADLK,
          "a receiver waiting on an empty channel should leave run with EDEADLK, run returned %s",
          check_err_name(err));
    coro_go(s, send_all, &third);
    err = coro_sched_run(s);
    CHECK(err == 0 && rcv.got == 3,
          "the third send did not reach the waiting receiver (run %s, got %" PRIuPTR ")",
          check_err_name(err), rcv.got);
    for (uintptr_t i = 0; i < 3; i++)
        CHECK(items[i] == i, "item %" PRIuPTR " received was %" PRIuPTR, i, items[i]);
    CHECK(channel_destroy(ch) == 0, "channel_destroy() did not return 0");
    coro_sched_destroy(s);
}

/* ── two waiters ─────────────────────────────────────────────────────── */

static void case_two_waiters(void)
{
    coro_sched *s = new_sched();
    channel *ch = channel_create(2);
    uintptr_t a[1] = {99}, b[1] = {99}, c[2] = {99, 99};
    struct receiver r1 = {.ch = ch, .count = 1, .items = a};
    struct receiver r2 = {.ch = ch, .count = 1, .items = b};
    struct sender both = {.ch = ch, .first = 0, .count = 2};
    struct sender s1 = {.ch = ch, .first = 10, .count = 1};
    struct sender s2 = {.ch = ch, .first = 11, .count = 1};
    struct receiver r3 = {.ch = ch, .count = 2, .items = c};
    struct sender fill = {.ch = ch, .first = 0, .count = 2};
    int err;

    CHECK(ch != NULL, "channel_create(2) returned NULL");
    coro_go(s, recv_all, &r1);
    coro_go(s, recv_all, &r2);
    err = coro_sched_run(s);
    CHECK(err == EDEADLK && r1.got == 0 && r2.got == 0,
          "two receivers on an empty channel should both wait: run %s, got %" PRIuPTR
          " and %" PRIuPTR,
          check_err_name(err), r1.got, r2.got);
    coro_go(s, send_all, &both); /* two sends, no wait between them */
    err = coro_sched_run(s);
    CHECK(err == 0,
          "two receivers waited and two items were sent back to back: run returned %s, "
          "the receivers got %" PRIuPTR " and %" PRIuPTR " (each should get one: every send "
          "must wake a waiting receiver)",
          check_err_name(err), r1.got, r2.got);
    CHECK(a[0] == 0 && b[0] == 1, "the first waiter got item %" PRIuPTR ", the second %" PRIuPTR
          " (expected 0 and 1)", a[0], b[0]);

    /* Full, and two senders waiting. */
    coro_go(s, send_all, &fill);
    CHECK(coro_sched_run(s) == 0 && fill.sent == 2, "two sends into an empty channel of 2 failed");
    coro_go(s, send_all, &s1);
    coro_go(s, send_all, &s2);
    err = coro_sched_run(s);
    CHECK(err == EDEADLK && s1.sent == 0 && s2.sent == 0,
          "two senders on a full channel should both wait: run %s", check_err_name(err));
    coro_go(s, recv_all, &r3); /* two receives, no wait between them */
    err = coro_sched_run(s);
    CHECK(err == 0,
          "two senders waited and two items were received back to back: run returned %s, "
          "the senders sent %" PRIuPTR " and %" PRIuPTR
          " (every receive must wake a waiting sender)",
          check_err_name(err), s1.sent, s2.sent);
    CHECK(channel_destroy(ch) == 0, "channel_destroy() did not return 0");
    coro_sched_destroy(s);
}

/* ── pipeline ─────────────────────────────────────────────────────────── */

enum { PIPE_N = 1000 };

struct pipe {
    channel *a, *b;
    uintptr_t out[PIPE_N];
    uintptr_t got;
    int err;
};

static void *producer(void *arg)
{
    struct pipe *p = arg;

    for (uintptr_t i = 0; i < PIPE_N; i++)
        if (channel_send(p->a, item_of(i)) != 0) {
            p->err = 1;
            return NULL;
        }
    return NULL;
}

static void *doubler(void *arg)
{
    struct pipe *p = arg;

    for (uintptr_t i = 0; i < PIPE_N; i++) {
        void *item;

        if (channel_recv(p->a, &item) != 0 ||
            channel_send(p->b, item_of(2 * number_of(item))) != 0) {
            p->err = 2;
            return NULL;
        }
    }
    return NULL;
}

static void *consumer(void *arg)
{
    struct pipe *p = arg;

    for (uintptr_t i = 0; i < PIPE_N; i++) {
        void *item;

        if (channel_recv(p->b, &item) != 0) {
            p->err = 3;
            return NULL;
        }
        p->out[p->got++] = number_of(item);
    }
    return NULL;
}

static void case_pipeline(void)
{
    static struct pipe p;
    coro_sched *s = new_sched();
    int err;

    p.a = channel_create(2);
    p.b = channel_create(2);
    CHECK(p.a != NULL && p.b != NULL, "channel_create(2) returned NULL");
    coro_go(s, consumer, &p);
    coro_go(s, doubler, &p);
    coro_go(s, producer, &p);
    err = coro_sched_run(s);
    CHECK(err == 0, "the pipeline's run returned %s with %" PRIuPTR " of %d values out",
          check_err_name(err), p.got, PIPE_N);
    CHECK(p.err == 0, "a stage's send or receive failed (stage %d)", p.err);
    for (uintptr_t i = 0; i < PIPE_N; i++)
        CHECK(p.out[i] == 2 * i,
              "value %" PRIuPTR " out of the pipeline was %" PRIuPTR ", expected %" PRIuPTR, i,
              p.out[i], 2 * i);
    CHECK(channel_destroy(p.a) == 0 && channel_destroy(p.b) == 0,
          "channel_destroy() did not return 0");
    coro_sched_destroy(s);
}

/* ── crowd ────────────────────────────────────────────────────────────── */

enum { SENDERS = 4, PER_SENDER = 250, RECEIVERS = 3 };
enum { TOTAL = SENDERS * PER_SENDER };

struct crowd_recv {
    channel *ch;
    int quota;
    int got;
    uintptr_t *seen;  /* TOTAL counters */
    uintptr_t *last;  /* per sender: the last index +1 this receiver saw */
    int err;
    int order_broken;
};

static void *crowd_receiver(void *arg)
{
    struct crowd_recv *p = arg;

    for (int i = 0; i < p->quota; i++) {
        void *item;
        uintptr_t n, who, index;
        int err = channel_recv(p->ch, &item);

        if (err != 0) {
            p->err = err;
            return NULL;
        }
        n = number_of(item);
        if (n >= TOTAL) {
            p->err = -1;
            return NULL;
        }
        p->seen[n]++;
        who = n / PER_SENDER;
        index = n % PER_SENDER;
        if (index + 1 <= p->last[who])
            p->order_broken = 1;
        p->last[who] = index + 1;
        p->got++;
        if (i % 5 == 0)
            coro_yield();
    }
    return NULL;
}

static void case_crowd(void)
{
    static uintptr_t seen[TOTAL];
    static uintptr_t last[RECEIVERS][SENDERS];
    struct sender snd[SENDERS];
    struct crowd_recv rcv[RECEIVERS];
    int quotas[RECEIVERS] = {500, 300, 200};
    coro_sched *s = new_sched();
    channel *ch = channel_create(2);
    int err, got = 0;

    CHECK(ch != NULL, "channel_create(2) returned NULL");
    for (int r = 0; r < RECEIVERS; r++) {
        rcv[r] = (struct crowd_recv){.ch = ch, .quota = quotas[r], .seen = seen, .last = last[r]};
        coro_go(s, crowd_receiver, &rcv[r]);
    }
    for (int i = 0; i < SENDERS; i++) {
        snd[i] = (struct sender){.ch = ch,
                                 .first = (uintptr_t)i * PER_SENDER,
                                 .count = PER_SENDER,
                                 .yield_every = 7};
        coro_go(s, send_all, &snd[i]);
    }
    err = coro_sched_run(s);
    for (int r = 0; r < RECEIVERS; r++)
        got += rcv[r].got;
    CHECK(err == 0,
          "4 senders, 3 receivers, capacity 2: run returned %s with %d of %d items received "
          "(a wake-up lost: someone waits although the channel has room or items)",
          check_err_name(err), got, TOTAL);
    for (int r = 0; r < RECEIVERS; r++) {
        CHECK(rcv[r].err == 0, "receiver %d: channel_recv failed or gave a foreign item (%d)", r,
              rcv[r].err);
        CHECK(!rcv[r].order_broken,
              "receiver %d saw one sender's items out of the order they were sent", r);
    }
    for (int i = 0; i < TOTAL; i++)
        CHECK(seen[i] == 1, "item %d was received %" PRIuPTR " times, expected once", i, seen[i]);
    CHECK(channel_destroy(ch) == 0, "channel_destroy() did not return 0");
    coro_sched_destroy(s);
}

/* ── eperm ────────────────────────────────────────────────────────────── */

static void case_eperm(void)
{
    channel *ch = channel_create(1);
    void *item = NULL;
    int err;

    CHECK(ch != NULL, "channel_create(1) returned NULL");
    err = channel_recv(ch, &item);
    CHECK(
        err == EPERM,
        "channel_recv() on an empty channel from the thread's own stack returned %s, expected EPERM",
        check_err_name(err));
    /* A send with room needs no wait: it may succeed here. */
    err = channel_send(ch, item_of(0));
    if (err == 0) {
        err = channel_send(ch, item_of(1));
        CHECK(
            err == EPERM,
            "channel_send() on a full channel from the thread's own stack returned %s, expected EPERM",
            check_err_name(err));
    } else {
        CHECK(err == EPERM, "channel_send() with room, outside a coroutine, returned %s",
              check_err_name(err));
    }
}

int main(void)
{
    static const check_case cases[] = {
        {"capacity", case_capacity},
        {"wrap-around", case_wrap},
        {"stale set", case_stale},
        {"two waiters", case_two_waiters},
        {"pipeline", case_pipeline},
        {"crowd", case_crowd},
        {"eperm", case_eperm},
    };

    return check_main(cases, sizeof cases / sizeof cases[0]);
}
