/*
 * threads_wake.c — cross-thread wake latency: a coroutine on this thread
 * (ping, scheduler A) and one on a second thread (pong, scheduler B) take
 * turns, each waking the other with coro_wake() and then coro_park()ing.
 * A round trip is two one-way wakes; the harness reports ns per wake. Its
 * baseline is threads_condvar.c, the same ping-pong between two plain
 * threads on a condition variable.
 *
 *   thread A: coro_sched_run(A)           thread B: coro_sched_run(B)
 *     ping: coro_wake(pong) ───────────>    pong: coro_park() returns
 *           coro_park()                           coro_wake(ping)
 *           returns  <───────────────────         coro_park()
 *
 * Each wake of a coroutine parked on the other thread goes through its
 * scheduler's inbox: a compare-and-swap on the coroutine's permit word, a
 * push, and, since that pump is asleep in its futex, a FUTEX_WAKE; the
 * other thread wakes up, drains its inbox and resumes the coroutine. (A
 * wake that lands before the other side has parked leaves a permit, and
 * its park returns at once: on a loaded machine some round trips are
 * cheaper for that reason.)
 *
 * Thread B and pong live for the whole run; each round starts a new ping
 * on A for n round trips. Tear-down stops pong and checks the counts.
 */
#define _GNU_SOURCE
#include "coro.h"
#include "harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct {
    coro_sched *a;        /* this thread's scheduler */
    coro *_Atomic ping;   /* the round's ping, on A */
    coro *_Atomic pong;   /* on B, for the whole run */
    uint64_t round_trips; /* this round's n */
    uint64_t asked;       /* round trips asked for, in total */
    uint64_t pings;       /* round trips ping finished */
    uint64_t pongs;       /* wakes pong answered (thread B only) */
    atomic_bool stop;
    pthread_t b;
    int b_error;          /* thread B's failure, if any */
} state;

static void *ping_fn(void *arg) {
    state *p = arg;
    coro *pong = atomic_load(&p->pong);
    atomic_store(&p->ping, coro_self());
    for (uint64_t i = 0; i < p->round_trips; i++) {
        if (coro_wake(pong) != 0 || coro_park() != 0)
            abort();
        p->pings++;
    }
    return NULL;
}

static void *pong_fn(void *arg) {
    state *p = arg;
    for (;;) {
        if (coro_park() != 0)
            abort();
        if (atomic_load(&p->stop))
            return NULL;
        p->pongs++;
        /* The wake came from ping, which published itself first. */
        if (coro_wake(atomic_load(&p->ping)) != 0)
            abort();
    }
}

/* Thread B: its own scheduler, pong, and a pump until pong returns. */
static void *thread_b(void *arg) {
    state *p = arg;
    coro_sched *b = coro_sched_create();
    coro *pong;

    if (b == NULL || (pong = coro_spawn(b, pong_fn, p)) == NULL) {
        p->b_error = 1;
        atomic_store(&p->pong, (coro *)NULL);
        return NULL;
    }
    atomic_store(&p->pong, pong); /* published: setup may go on */
    if (coro_sched_run(b) != 0 || coro_destroy(pong) != 0 ||
        coro_sched_destroy(b) != 0)
        p->b_error = 1;
    coro_thread_detach();
    return NULL;
}

static int setup(void *ctx) {
    state *p = ctx;
    p->a = coro_sched_create();
    if (p->a == NULL) {
        perror("wake: coro_sched_create");
        return 1;
    }
    atomic_store(&p->pong, (coro *)NULL);
    if (pthread_create(&p->b, NULL, thread_b, p) != 0) {
        fprintf(stderr, "wake: pthread_create failed\n");
        return 1;
    }
    /* Wait until B has published pong (once, before any timing). */
    while (atomic_load(&p->pong) == NULL && !p->b_error)
        sched_yield();
    if (p->b_error) {
        fprintf(stderr, "wake: thread B could not start\n");
        return 1;
    }
    return 0;
}

/* n round trips: 2n one-way wakes. */
static void ping_pong(void *ctx, uint64_t n) {
    state *p = ctx;
    p->round_trips = n;
    if (coro_go(p->a, ping_fn, p) != 0 || coro_sched_run(p->a) != 0)
        abort();
    p->asked += n;
}

static int teardown(void *ctx) {
    state *p = ctx;
    atomic_store(&p->stop, true);
    coro_wake(atomic_load(&p->pong)); /* it returns, B's pump ends */
    pthread_join(p->b, NULL);
    if (p->b_error || p->pings != p->asked || p->pongs != p->asked) {
        fprintf(stderr, "wake: asked %llu round trips; ping made %llu, pong "
                "answered %llu%s\n", (unsigned long long)p->asked,
                (unsigned long long)p->pings, (unsigned long long)p->pongs,
                p->b_error ? "; thread B failed" : "");
        return 1;
    }
    if (coro_sched_destroy(p->a) != 0) {
        fprintf(stderr, "wake: coro_sched_destroy failed\n");
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    static state p;
    bench_spec spec = {
        .name = "wake",
        .unit = "wake",
        .units_per_op = 2,
        .setup = setup,
        .run = ping_pong,
        .teardown = teardown,
        .ctx = &p,
    };
    return bench_main(argc, argv, &spec);
}
