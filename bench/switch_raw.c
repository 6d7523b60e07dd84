/*
 * switch_raw.c — the bare switch of a back-end, without the library around it.
 *
 * The same ping-pong as switch_boost.cc, written against the back-end's own
 * two functions (context.h): coro_context_make() and coro_context_switch().
 * No state checks, no resume chain, no API call: this is the figure to hold
 * against Boost's jump_fcontext, which is also a bare switch. The difference
 * between this and switch_bench.c is what the API layer costs.
 *
 * Linked against each back-end (see BUILD): `switch_raw_asm` against
 * //ch01_context:context_asm, `switch_raw_ucontext` against
 * //ch01_context:context_ucontext; and `sched_raw_asm` against the
 * scheduler chapter's context_asm, a reference row of //bench:sched. The
 * `switch_raw_asm_{compare,load}[_flags]` variants force one of the x86-64
 * switch's two ways of restoring MXCSR (BENCH_MXCSR_MODE).
 */
#define _DEFAULT_SOURCE
#include "context.h"
#include "harness.h"

#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>

#ifndef BENCH_BACKEND
#error "BENCH_BACKEND must name the back-end, e.g. -DBENCH_BACKEND=raw_asm"
#endif
#define STRINGIFY(word) #word
#define EXPAND_AND_STRINGIFY(macro) STRINGIFY(macro)
#define BENCH_NAME EXPAND_AND_STRINGIFY(BENCH_BACKEND)

enum { STACK_SIZE = 64 * 1024 };

/* State shared by the driving thread and the context. */
typedef struct {
    coro_context thread;  /* the thread's own stack, while it is away */
    coro_context body;    /* the context being ping-ponged */
    void *stack;
    uint64_t resumes;     /* counted by the thread */
    uint64_t yields;      /* counted by the context */
} pingpong;

/* The context's body: switch back to the thread, forever. It is never
 * finished: its stack is simply unmapped at the end. */
static void yielder(void *arg) {
    pingpong *p = arg;
    for (;;) {
        p->yields++;
        coro_context_switch(&p->body, &p->thread, 0);
    }
}

static int start(void *ctx) {
    pingpong *p = ctx;
    p->stack = mmap(NULL, STACK_SIZE, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p->stack == MAP_FAILED) {
        perror(BENCH_NAME ": mmap");
        return 1;
    }
    coro_context_make(&p->body, p->stack, STACK_SIZE, yielder, p);
#ifdef BENCH_MXCSR_MODE
    /* One way of restoring MXCSR (context.h), whatever this CPU's vendor
     * chose: the rows that show whether the choice holds here. */
    coro_context_set_mxcsr_mode(BENCH_MXCSR_MODE);
#endif
    return 0;
}

/* The measured operation: n round trips, 2n switches. */
static void round_trips(void *ctx, uint64_t n) {
    pingpong *p = ctx;
#ifdef BENCH_FLAGS_DIFFER
    /* The thread's "inexact" flag set in MXCSR, the context's clear (the
     * harness has just cleared them): our switch does not carry status
     * flags, so it should not care. One SSE division does it (glibc's
     * feraiseexcept(FE_INEXACT) sets the x87 flag, not MXCSR's). See
     * harness.h, "Floating-point status flags". */
    volatile double one = 1.0, three = 3.0, third = one / three;
    (void)third;
#endif
    for (uint64_t i = 0; i < n; i++)
        coro_context_switch(&p->thread, &p->body, 0);
    p->resumes += n;
}

static int finish(void *ctx) {
    pingpong *p = ctx;
    munmap(p->stack, STACK_SIZE);
    if (p->yields != p->resumes) {
        fprintf(stderr, "%s: %llu resumes but %llu yields\n", BENCH_NAME,
                (unsigned long long)p->resumes,
                (unsigned long long)p->yields);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    static pingpong p;
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
