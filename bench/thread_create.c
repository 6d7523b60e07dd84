/*
 * thread_create.c — the baseline for sched_go.c: pthread_create() of an
 * empty thread, then pthread_join(), one thread at a time; ns per thread.
 *
 * Default attributes (glibc: an 8 MiB stack with a guard page). glibc keeps
 * the stacks of joined threads in a cache and reuses them, so after the
 * calibration (the warm-up) no round maps a new stack: the same steady
 * state as the coroutine scheduler's stack cache. What remains is the
 * kernel's clone() and exit, and waking the joiner.
 */
#include "harness.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t asked; /* threads created */
    uint64_t ran;   /* threads that ran, counted by themselves; the join
                       orders each increment before the next thread */
} state;

/* The thread: count itself and return its argument. */
static void *empty(void *arg) {
    state *p = arg;
    p->ran++;
    return arg;
}

static void create_and_join(void *ctx, uint64_t n) {
    state *p = ctx;
    for (uint64_t i = 0; i < n; i++) {
        pthread_t t;
        void *result;
        int err = pthread_create(&t, NULL, empty, p);
        if (err != 0) {
            fprintf(stderr, "pthread: pthread_create: %s\n", strerror(err));
            exit(1);
        }
        if (pthread_join(t, &result) != 0 || result != p)
            abort();
    }
    p->asked += n;
}

static int teardown(void *ctx) {
    state *p = ctx;
    if (p->ran != p->asked) {
        fprintf(stderr, "pthread: created %llu threads, %llu ran\n",
                (unsigned long long)p->asked, (unsigned long long)p->ran);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    static state p;
    bench_spec spec = {
        .name = "pthread",
        .unit = "thread",
        .units_per_op = 1,
        .setup = NULL,
        .run = create_and_join,
        .teardown = teardown,
        .ctx = &p,
    };
    return bench_main(argc, argv, &spec);
}
