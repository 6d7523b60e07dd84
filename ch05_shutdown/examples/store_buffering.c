/*
 * store_buffering.c — the store-buffering litmus test, on this machine.
 *
 * Two threads, two words x and y, both 0 at the start:
 *
 *   thread 0:  x = 1;  r0 = y;        thread 1:  y = 1;  r1 = x;
 *
 * Can both loads read 0? In any interleaving of the four steps one store
 * comes first, so at least one load sees a 1. But a processor does not
 * wait for a store to reach memory: the store waits in the core's store
 * buffer while the load after it goes ahead. On x86 that is the one
 * reordering the hardware does. C11 allows the outcome for release stores
 * and acquire loads (and for relaxed ones); it forbids it when all four
 * are seq_cst, which on x86 makes the store a locked instruction (xchg)
 * that empties the store buffer before the load.
 *
 * The program runs rounds of each kind and counts the rounds in which
 * r0 == 0 and r1 == 0. A start barrier per round (both threads spin on
 * an atomic counter) makes the two threads take their two steps at about
 * the same moment. Instead of resetting x and y, round n stores n: a load
 * that reads less than n read this round's "0". The rounds come in
 * batches, each with two new threads, so that one unlucky placement of
 * the threads does not decide the whole run.
 *
 * The sleep handshake of inbox.c has this shape (x: "I am going to
 * sleep", y: "there is work for you"), and so had the park word's lost
 * wake (ch04 lesson): both loads reading the old value is a lost wake-up.
 *
 * No coroutines here: plain C11 atomics and two pthreads.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

enum { ROUNDS = 25000, BATCHES = 8 }; /* rounds a batch, batches a kind */

/* Each word on a cache line of its own, away from the barrier's. */
static _Alignas(64) atomic_uint x;
static _Alignas(64) atomic_uint y;
static _Alignas(64) atomic_uint arrived; /* the start barrier */

/* Per round, whether each load read the old value (less than the round). */
static bool r0_old[ROUNDS + 1], r1_old[ROUNDS + 1];

/* Both threads arrive, then both leave: round n starts when `arrived`
 * reaches 2n. A thread that waits long gives its processor away, in case
 * the other thread needs it. */
static void start_round(unsigned round)
{
    unsigned spins = 0;

    atomic_fetch_add(&arrived, 1);
    while (atomic_load_explicit(&arrived, memory_order_acquire) < 2 * round)
        if (++spins % 256 == 0)
            sched_yield();
}

/* One side of the test, with the orders given. The orders must be
 * constants for the compiler to emit the instructions they name, hence a
 * macro that writes one function for each side and kind. */
#define SIDE(name, mine, theirs, old, store_order, load_order)               \
    static void *name(void *unused)                                        \
    {                                                                      \
        (void)unused;                                                      \
        for (unsigned round = 1; round <= ROUNDS; round++) {               \
            start_round(round);                                            \
            atomic_store_explicit(&mine, round, store_order);              \
            old[round] = atomic_load_explicit(&theirs, load_order) < round; \
        }                                                                  \
        return NULL;                                                       \
    }

SIDE(t0_release_acquire, x, y, r0_old, memory_order_release, memory_order_acquire)
SIDE(t1_release_acquire, y, x, r1_old, memory_order_release, memory_order_acquire)
SIDE(t0_seq_cst, x, y, r0_old, memory_order_seq_cst, memory_order_seq_cst)
SIDE(t1_seq_cst, y, x, r1_old, memory_order_seq_cst, memory_order_seq_cst)

/* Run a batch of ROUNDS rounds of one kind; returns how many ended
 * r0 == r1 == 0. */
static unsigned run(void *(*side0)(void *), void *(*side1)(void *))
{
    pthread_t t0, t1;
    unsigned both_old = 0;

    atomic_store(&x, 0);
    atomic_store(&y, 0);
    atomic_store(&arrived, 0);
    if (pthread_create(&t0, NULL, side0, NULL) != 0 ||
        pthread_create(&t1, NULL, side1, NULL) != 0)
        exit(1);
    pthread_join(t0, NULL);
    pthread_join(t1, NULL);
    for (unsigned n = 1; n <= ROUNDS; n++)
        both_old += r0_old[n] && r1_old[n];
    return both_old;
}

int main(void)
{
    unsigned weak = 0, strong = 0;

    for (int batch = 0; batch < BATCHES; batch++) {
        weak += run(t0_release_acquire, t1_release_acquire);
        strong += run(t0_seq_cst, t1_seq_cst);
    }

    printf("  thread 0: x = 1; r0 = y    thread 1: y = 1; r1 = x\n");
    printf("  rounds in which r0 == 0 and r1 == 0, of %d each:\n",
           ROUNDS * BATCHES);
    printf("    release store, acquire load  %7u\n", weak);
    printf("    seq_cst store, seq_cst load  %7u\n", strong);
    if (weak > 0)
        printf("  release/acquire: both loads read the old value, %u times:\n"
               "  each store was still in its core's store buffer\n", weak);
    else
        printf("  release/acquire: not seen this run (allowed, not certain:\n"
               "  it needs both threads running at once; try again)\n");
    if (strong == 0)
        printf("  seq_cst: never, as C11 promises: one total order\n");
    else
        printf("  seq_cst: SEEN, which C11 forbids: a broken build?\n");
    return strong == 0 ? 0 : 1;
}
