/*
 * sched_yield.c — what a yield costs when the scheduler's pump drives it.
 *
 * N coroutines of one scheduler loop on coro_yield(). Each yield is one
 * trip through the pump: pump -> coroutine (resume), coroutine -> pump
 * (yield), then the pump requeues the coroutine behind the others and
 * takes the next one. That is two switches, plus the queue work; the
 * harness reports ns per switch (units_per_op = 2), so the figure sits
 * beside the bare switch and the manual coro_resume() ping-pong.
 *
 * Built once per case (see BUILD), chosen by three defines:
 *
 *   BENCH_NAME      the row's name, a bare word (yield1, yield100, ...)
 *   BENCH_YIELDERS  N, the coroutines taking turns
 *   BENCH_TIMER     (optional, chapters 3 to 5) 1: a coroutine parked with
 *                   a deadline an hour away sits beside the yielders, so a
 *                   timer is set while they yield, as in any program with
 *                   a timeout pending; the last yielder to finish wakes it.
 *                   What a pump pays for looking at its timers.
 *   BENCH_TRACE     (optional) 1: a trace records the whole run, into
 *                   /dev/null (coro_trace_start()): what recording costs
 *                   the pump, one event per resume. Compare the library
 *                   built without a trace (:coro_untraced) for what the
 *                   trace costs while off.
 *   BENCH_PUMP_STEP 0: one coro_sched_run() per round. The round's N
 *                   coroutines share a budget of n yields, then return, and
 *                   coro_sched_run() comes back. Each round so also pays
 *                   for N coro_go() and N finishing coroutines: with n in
 *                   the millions and N <= 100 that is under 0.01%.
 *                   1: the N coroutines are created once, in set-up, and
 *                   every yield is one coro_sched_step() call from here.
 *
 * Nothing can be optimised away: the pump and coro_yield() live in the
 * library, and the yields the coroutines count are checked in tear-down
 * against the yields the rounds asked for.
 */
#include "coro.h"
#include "harness.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#if !defined(BENCH_NAME) || !defined(BENCH_YIELDERS) || \
    !defined(BENCH_PUMP_STEP)
#error "define BENCH_NAME, BENCH_YIELDERS and BENCH_PUMP_STEP (see BUILD)"
#endif
#define STRINGIFY(word) #word
#define EXPAND_AND_STRINGIFY(macro) STRINGIFY(macro)
#define NAME EXPAND_AND_STRINGIFY(BENCH_NAME)
#ifndef BENCH_TIMER
#define BENCH_TIMER 0
#endif
#ifndef BENCH_TRACE
#define BENCH_TRACE 0
#endif
#if BENCH_TIMER && BENCH_PUMP_STEP
#error "BENCH_TIMER needs a coro_sched_run() per round (BENCH_PUMP_STEP 0)"
#endif

typedef struct {
    coro_sched *s;
    uint64_t budget;   /* yields left to make; the coroutines return at 0 */
    uint64_t asked;    /* yields the rounds asked for, in total */
    uint64_t yields;   /* yields made, counted by the coroutines */
    uint64_t finished; /* coroutines that returned */
    uint64_t started;  /* coroutines created */
    coro *parked;      /* BENCH_TIMER: the parked coroutine, while parked */
} state;

/* A coroutine of the scheduler: yield until the budget is spent. */
static void *yielder(void *arg) {
    state *p = arg;
    while (p->budget > 0) {
        p->budget--;
        p->yields++;
        coro_yield();
    }
    p->finished++;
#if BENCH_TIMER
    if (p->finished == p->started && p->parked != NULL)
        coro_wake(p->parked); /* the round's last yielder: the round ends */
#endif
    return NULL;
}

#if BENCH_TIMER
/* Parked with a deadline an hour away: a timer set for the whole round. */
static void *parker(void *arg) {
    state *p = arg;
    p->parked = coro_self();
    if (coro_park_for(3600 * CORO_SEC) != 0)
        abort(); /* a timeout after an hour, or an error: neither happens */
    p->parked = NULL;
    return NULL;
}
#endif

/* Queue the N coroutines. */
static void start_yielders(state *p) {
    for (int i = 0; i < BENCH_YIELDERS; i++) {
        if (coro_go(p->s, yielder, p) != 0) {
            fprintf(stderr, "%s: coro_go failed\n", NAME);
            exit(1);
        }
    }
    p->started += BENCH_YIELDERS;
}

static int setup(void *ctx) {
    state *p = ctx;
#if BENCH_TRACE
    int err = coro_trace_start("/dev/null");
    if (err != 0) {
        fprintf(stderr, "%s: coro_trace_start: error %d\n", NAME, err);
        return 1;
    }
#endif
    p->s = coro_sched_create();
    if (p->s == NULL) {
        perror(NAME ": coro_sched_create");
        return 1;
    }
#if BENCH_PUMP_STEP
    p->budget = UINT64_MAX; /* until tear-down */
    start_yielders(p);
#endif
    return 0;
}

#if BENCH_PUMP_STEP
/* n yields: n steps of the pump, each one resume + one yield. */
static void yields(void *ctx, uint64_t n) {
    state *p = ctx;
    for (uint64_t i = 0; i < n; i++) {
        if (!coro_sched_step(p->s))
            abort(); /* cannot happen: the coroutines are always ready */
    }
    p->asked += n;
}
#else
/* n yields shared by N fresh coroutines, under one coro_sched_run(). */
static void yields(void *ctx, uint64_t n) {
    state *p = ctx;
    p->budget = n;
#if BENCH_TIMER
    if (coro_go(p->s, parker, p) != 0) /* queued first: parks at once */
        abort();
#endif
    start_yielders(p);
    if (coro_sched_run(p->s) != 0)
        abort();
    p->asked += n;
}
#endif

static int teardown(void *ctx) {
    state *p = ctx;
    uint64_t yielded = p->yields;

    p->budget = 0; /* the step case's coroutines return now */
    if (coro_sched_run(p->s) != 0) {
        fprintf(stderr, "%s: coro_sched_run failed\n", NAME);
        return 1;
    }
    if (yielded != p->asked || p->finished != p->started) {
        fprintf(stderr, "%s: asked %llu yields, got %llu; %llu of %llu "
                "coroutines finished\n", NAME,
                (unsigned long long)p->asked, (unsigned long long)yielded,
                (unsigned long long)p->finished,
                (unsigned long long)p->started);
        return 1;
    }
    if (coro_sched_destroy(p->s) != 0) {
        fprintf(stderr, "%s: coro_sched_destroy failed\n", NAME);
        return 1;
    }
#if BENCH_TRACE
    if (coro_trace_stop() != 0) {
        fprintf(stderr, "%s: coro_trace_stop failed\n", NAME);
        return 1;
    }
#endif
    return 0;
}

int main(int argc, char **argv) {
    static state p;
    bench_spec spec = {
        .name = NAME,
        .unit = "switch",
        .units_per_op = 2,
        .setup = setup,
        .run = yields,
        .teardown = teardown,
        .ctx = &p,
    };
    return bench_main(argc, argv, &spec);
}
