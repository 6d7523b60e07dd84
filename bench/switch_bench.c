/*
 * switch_bench.c — what one context switch of our library costs.
 *
 * One coroutine yields in a loop; the thread resumes it again and again.
 * Each coro_resume() + coro_yield() round trip is two switches: thread ->
 * coroutine, coroutine -> thread. The harness reports ns per switch.
 *
 * The same source is linked against each switch back-end (see BUILD):
 * `switch_asm` against //ch01_context:coro, `switch_ucontext` against
 * //ch01_context:coro_ucontext; and `sched_resume_asm` against the
 * scheduler chapter's library, a reference row of //bench:sched.
 * BENCH_BACKEND says which one this binary is (a bare word,
 * -DBENCH_BACKEND=asm, turned into a string here).
 *
 * Nothing here can be optimised away: coro_resume() and coro_yield() live
 * in another translation unit, and the coroutine's yield count is checked
 * against the number of resumes at the end.
 */
#include "coro.h"
#include "harness.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef BENCH_BACKEND
#error "BENCH_BACKEND must name the back-end, e.g. -DBENCH_BACKEND=asm"
#endif
#define STRINGIFY(word) #word
#define EXPAND_AND_STRINGIFY(macro) STRINGIFY(macro)
#define BENCH_NAME EXPAND_AND_STRINGIFY(BENCH_BACKEND)

/* State shared by the driving thread and the coroutine. */
typedef struct {
    coro *c;          /* the coroutine being ping-ponged */
    int stop;         /* set by the thread to let the coroutine return */
    uint64_t resumes; /* counted by the thread */
    uint64_t yields;  /* counted by the coroutine */
} pingpong;

/* The coroutine: yield back to the thread until told to stop. */
static void *yielder(void *arg) {
    pingpong *p = arg;
    while (!p->stop) {
        p->yields++;
        coro_yield();
    }
    return NULL;
}

/* Set-up: the coroutine, created suspended (it first runs in a round). */
static int start(void *ctx) {
    pingpong *p = ctx;
    p->c = coro_create(yielder, p, 0);
    if (p->c == NULL) {
        perror(BENCH_NAME ": coro_create");
        return 1;
    }
    return 0;
}

/* The measured operation: n round trips, 2n switches. */
static void round_trips(void *ctx, uint64_t n) {
    pingpong *p = ctx;
    for (uint64_t i = 0; i < n; i++) {
        if (coro_resume(p->c) != 0)
            abort(); /* cannot happen: the coroutine never finishes here */
    }
    p->resumes += n;
}

/* Tear-down: let the coroutine return, check the counts, free it. */
static int finish(void *ctx) {
    pingpong *p = ctx;
    p->stop = 1;
    if (coro_resume(p->c) != 0 || coro_status(p->c) != CORO_DONE) {
        fprintf(stderr, "%s: the coroutine did not finish\n", BENCH_NAME);
        return 1;
    }
    if (p->yields != p->resumes) {
        fprintf(stderr, "%s: %llu resumes but %llu yields\n", BENCH_NAME,
                (unsigned long long)p->resumes,
                (unsigned long long)p->yields);
        return 1;
    }
    return coro_destroy(p->c) == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    pingpong p = {0};
    bench_spec spec = {
        .name = BENCH_NAME,
        .unit = "switch",
        .units_per_op = 2,
        .setup = start,
        .run = round_trips,
        .teardown = finish,
        .ctx = &p,
    };
    return bench_main(argc, argv, &spec);
}
