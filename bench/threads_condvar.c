/*
 * threads_condvar.c — the baseline of threads_wake.c: the same ping-pong
 * between two plain threads, with a mutex, a `turn` variable and one
 * condition variable per side.
 *
 *   thread A (the harness's), per round trip:   thread B, forever:
 *     turn = B; signal(to_b)                      while turn != B: wait(to_b)
 *     while turn != A: wait(to_a)                 turn = A; signal(to_a)
 *
 * A round trip is two one-way wakes; ns per wake.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum { SIDE_A, SIDE_B };

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t to_a, to_b;
    int turn;
    bool stop;
    uint64_t asked, pings, pongs;
    pthread_t b;
} state;

static void *thread_b(void *arg) {
    state *p = arg;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (p->turn != SIDE_B && !p->stop)
            pthread_cond_wait(&p->to_b, &p->lock);
        if (p->stop)
            break;
        p->pongs++;
        p->turn = SIDE_A;
        pthread_cond_signal(&p->to_a);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

static int setup(void *ctx) {
    state *p = ctx;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->to_a, NULL);
    pthread_cond_init(&p->to_b, NULL);
    p->turn = SIDE_A;
    if (pthread_create(&p->b, NULL, thread_b, p) != 0) {
        fprintf(stderr, "condvar: pthread_create failed\n");
        return 1;
    }
    return 0;
}

/* n round trips: 2n one-way wakes. */
static void ping_pong(void *ctx, uint64_t n) {
    state *p = ctx;
    pthread_mutex_lock(&p->lock);
    for (uint64_t i = 0; i < n; i++) {
        p->turn = SIDE_B;
        pthread_cond_signal(&p->to_b);
        while (p->turn != SIDE_A)
            pthread_cond_wait(&p->to_a, &p->lock);
        p->pings++;
    }
    pthread_mutex_unlock(&p->lock);
    p->asked += n;
}

static int teardown(void *ctx) {
    state *p = ctx;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_signal(&p->to_b);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->b, NULL);
    if (p->pings != p->asked || p->pongs != p->asked) {
        fprintf(stderr, "condvar: asked %llu round trips; A made %llu, B "
                "answered %llu\n", (unsigned long long)p->asked,
                (unsigned long long)p->pings, (unsigned long long)p->pongs);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    static state p;
    bench_spec spec = {
        .name = "condvar",
        .unit = "wake",
        .units_per_op = 2,
        .setup = setup,
        .run = ping_pong,
        .teardown = teardown,
        .ctx = &p,
    };
    return bench_main(argc, argv, &spec);
}
