/*
 * litmus.pml — the memory models themselves, checked against the classic
 * litmus tests. Each test is a tiny program whose one interesting outcome
 * a memory model either allows or forbids; the assertion says "this
 * outcome never happens", so a model that allows it fails the search.
 * tools/spin.bzl runs each test under tso.pml and weak.pml, expecting
 * what x86 and C11 (on ARMv8) say:
 *
 *   test (orders)                      outcome           x86    C11/ARMv8
 *   SB   store; load (relaxed)         r0 == r1 == 0     seen   seen
 *   SB   store; load (seq_cst)         r0 == r1 == 0     never  never
 *   SB   RMW (seq_cst); load (relaxed) r0 == r1 == 0     never  seen
 *   SB   relaxed, seq_cst fences       r0 == r1 == 0     never  never
 *   MP   data; flag (relaxed)          flag 1, data 0    never  seen
 *   MP   data; flag (release/acquire)  flag 1, data 0    never  never
 *   MP   through a relaxed RMW         flag 2, data 0    never  never
 *        (the release sequence)
 *   CoRR two loads of one word         new, then old     never  never
 *
 * SB (store buffering) is the shape of every sleep/wake handshake here:
 * x is "I am going to sleep", y is "there is work". MP (message passing)
 * is the shape of every publication: data is the request, flag the
 * pointer to it.
 *
 * -DTEST_SB, -DTEST_SB_RMW, -DTEST_SB_FENCE, -DTEST_MP, -DTEST_MP_RMW,
 * -DTEST_CORR pick the test; -DST=..., -DLD=... its orders.
 */
#define NTHREADS 3
#define X 0
#define Y 1
#define NWORDS 2

#include "memory.pml"

#ifndef ST
#define ST MM_RLX
#endif
#ifndef LD
#define LD MM_RLX
#endif

int r0 = -1, r1 = -1, r2 = -1;

#if defined(TEST_SB) || defined(TEST_SB_RMW) || defined(TEST_SB_FENCE)
/* SB: each thread writes its word, then reads the other's. */
active proctype t0() {
    int old;
#if defined(TEST_SB_RMW)
    mm_xchg(0, X, 1, old, MM_SC);
#else
    mm_store(0, X, 1, ST);
#endif
#ifdef TEST_SB_FENCE
    mm_fence(0, MM_SC);
#endif
    mm_load(0, Y, r0, LD)
}

active proctype t1() {
    mm_store(1, Y, 1, ST);
#ifdef TEST_SB_FENCE
    mm_fence(1, MM_SC);
#endif
    mm_load(1, X, r1, LD)
}

active proctype check() {
    r0 >= 0 && r1 >= 0;
    assert(!(r0 == 0 && r1 == 0))
}
#endif

#ifdef TEST_MP
/* MP: t0 writes the data, then the flag; t1 reads the flag, then the
 * data. */
active proctype t0() {
    mm_store(0, X, 1, MM_RLX);
    mm_store(0, Y, 1, ST)
}

active proctype t1() {
    mm_load(1, Y, r1, LD);
    mm_load(1, X, r0, MM_RLX);
    assert(!(r1 == 1 && r0 == 0))
}
#endif

#ifdef TEST_MP_RMW
/* MP through a relaxed RMW of a third thread: the flag's release store,
 * then t2's relaxed increment; t1 reads the incremented flag with
 * acquire, and so synchronizes with t0 (the increment continues t0's
 * release sequence). */
active proctype t0() {
    mm_store(0, X, 1, MM_RLX);
    mm_store(0, Y, 1, MM_REL)
}

active proctype t2() {
    int old;
    mm_fetch_add(2, Y, 1, old, MM_RLX)
}

active proctype t1() {
    mm_load(1, Y, r1, MM_ACQ);
    mm_load(1, X, r0, MM_RLX);
    assert(!(r1 == 2 && r0 == 0))
}
#endif

#ifdef TEST_CORR
/* CoRR: loads of one word never go back in its coherence order. */
active proctype t0() {
    mm_store(0, X, 1, MM_RLX);
    mm_store(0, X, 2, MM_RLX)
}

active proctype t1() {
    mm_load(1, X, r0, MM_RLX);
    mm_load(1, X, r1, MM_RLX);
    assert(!(r0 == 2 && r1 == 1))
}
#endif

init {
    run mm_flusher(0);
    run mm_flusher(1);
    run mm_flusher(2)
}
