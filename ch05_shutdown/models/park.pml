/*
 * park.pml — the park/wake permit across threads (park.c, and the
 * timeout's side of it in wait.c).
 *
 * Models:
 *   coro_park_until()  the exchange that takes a permit, the compare-
 *                      exchange EMPTY -> PARKED, and what it does when a
 *                      wake beat it there;
 *   coro_wake()        from another thread;
 *   timeout_wins()     the pump, on the owner's thread, ending a timed
 *                      park: compare-exchange PARKED -> EMPTY.
 * The caller around them is the loop every user of park writes (and the
 * test CrossThreadWake.PingPongWithAPlainThreadLosesNoWake runs): the
 * waker publishes a request (asked++) and wakes; the coroutine serves
 * requests while there are some and parks when there are none.
 *
 * Abstracts: the inbox and the pump's ready queue become one counter,
 * `readied` (the inbox has a model of its own, inbox.pml); a timed park's
 * deadline is "the timer may fire at any moment while parked".
 *
 * Proves, for ROUNDS requests and every interleaving and store-buffer
 * drain order of x86-TSO:
 *   - no lost wake: the run always ends with every request served (a lost
 *     wake is an invalid end state: the coroutine parked for good, the
 *     waker waiting for an answer);
 *   - no double ready: at most one of a wake and a timeout ends each park,
 *     and the coroutine is made ready at most once per park.
 *
 * Mutants (each must fail):
 *   -DMUTANT  the code as it shipped before the fix: when the compare-
 *       exchange finds a permit, the park consumes it with a plain store
 *       of EMPTY, and a wake that reads PERMIT returns at once. SPIN finds
 *       the lost wake: the store waits in the owner's store buffer while
 *       its loads of `asked` go ahead, and the waker still reads PERMIT.
 *   -DMUTANT_PLAIN_CHECK -DPLAIN_PUBLISH  only the wake's half of the old
 *       code (a plain load of PERMIT, then return), with a waker that
 *       publishes its request by a plain store (asked = asked + 1, as a
 *       release store compiles on x86) instead of a locked add. The
 *       store of `asked` waits in the waker's buffer while it reads the
 *       stale PERMIT, and the coroutine parks for good. (With a locked add
 *       the x86 model cannot see this half: the add drains the buffer.
 *       C11 and AArch64 can, which is why the code's wake is a CAS even
 *       when it finds PERMIT; the model with PLAIN_PUBLISH alone passes.)
 */
#define NTHREADS 2
#define OWNER 0
#define WAKER 1

#define PARK_WORD 0
#define ASKED 1
#define SERVED 2
#define READIED 3  /* the wake's delivery: the inbox and the ready queue */
#define NWORDS 4

#include "memory.pml"

#ifndef ROUNDS
#define ROUNDS 2
#endif

#define EMPTY 0
#define PERMIT 1
#define PARKED 2

bool timer_armed;  /* it is parked with a deadline */

/* The wake's delivery travels through the inbox: a push (a seq_cst CAS,
 * which releases) and the pump's take (an acquire exchange), so the owner
 * sees what the waker did before the wake (inbox.pml proves the inbox). */
#define DELIVER() mm_rmw(WAKER, READIED, old, old + 1, MM_SC)
#define RECEIVE() mm_await_rmw(OWNER, READIED, mem[READIED] > 0, old, old - 1, MM_ACQ)

/* The orders of park.c; the mutants weaken one each. */
#ifdef MUTANT_WEAK_TAKE
#define TAKE_ORDER MM_RLX /* the park's exchange that takes a permit */
#else
#define TAKE_ORDER MM_ACQ
#endif
#ifdef MUTANT_WEAK_WAKE
#define WAKE_ORDER MM_ACQ /* the wake's CAS without its release */
#else
#define WAKE_ORDER MM_ACQ_REL
#endif

/* coro_park_until(); rc: 0 woken or permit, 1 timed out. */
inline park(timed, rc) {
    mm_xchg(OWNER, PARK_WORD, EMPTY, old, TAKE_ORDER);
    if
    :: old == PERMIT -> rc = 0
    :: else ->
        word = EMPTY;
        mm_cas(OWNER, PARK_WORD, word, PARKED, ok, MM_ACQ_REL);
        if
        :: !ok ->
            assert(word == PERMIT); /* only a wake can change EMPTY */
#ifdef MUTANT
            mm_store(OWNER, PARK_WORD, EMPTY, MM_RLX);
#else
            mm_xchg(OWNER, PARK_WORD, EMPTY, old, TAKE_ORDER);
            assert(old == PERMIT);
#endif
            rc = 0
        :: else ->
            /* Suspended. The pump (same thread) runs until the wake's
             * delivery arrives or, for a timed park, the timer fires. */
            timer_armed = timed;
            if
            :: RECEIVE(); timer_armed = false; rc = 0
            :: timer_armed ->
                /* timeout_wins() */
                word = PARKED;
                mm_cas(OWNER, PARK_WORD, word, EMPTY, ok, MM_ACQ_REL);
                timer_armed = false;
                if
                :: ok -> rc = 1
                :: else -> /* a wake won: its delivery is on the way */
                    RECEIVE(); rc = 0
                fi
            fi
        fi
    fi
}

/* coro_wake() */
inline wake() {
#if defined(MUTANT) || defined(MUTANT_PLAIN_CHECK)
    mm_load(WAKER, PARK_WORD, w, MM_RLX);
    do
    :: w == PERMIT -> break
    :: w == EMPTY ->
        mm_cas(WAKER, PARK_WORD, w, PERMIT, wok, WAKE_ORDER);
        if :: wok -> break :: else -> skip fi
    :: w == PARKED ->
        mm_cas(WAKER, PARK_WORD, w, EMPTY, wok, WAKE_ORDER);
        if
        :: wok -> assert(mem[READIED] == 0); DELIVER(); break
        :: else -> skip
        fi
    od
#else
    mm_load(WAKER, PARK_WORD, w, MM_RLX);
    do
    :: w == PARKED ->
        mm_cas(WAKER, PARK_WORD, w, EMPTY, wok, WAKE_ORDER);
        if
        :: wok -> assert(mem[READIED] == 0); DELIVER(); break
        :: else -> skip
        fi
    :: else -> /* EMPTY or PERMIT: leave (or keep) a permit, by a RMW */
        mm_cas(WAKER, PARK_WORD, w, PERMIT, wok, WAKE_ORDER);
        if :: wok -> break :: else -> skip fi
    od
#endif
}

active proctype coroutine() {
    int old, word, a, s;
    bool ok;
    byte rc, i;

    for (i : 1 .. ROUNDS) {
        do
        :: mm_load(OWNER, ASKED, a, MM_RLX);
           mm_load(OWNER, SERVED, s, MM_RLX);
           if
           :: a != s -> break
           :: else ->
               if
               :: park(false, rc)
               :: park(true, rc)
               fi
           fi
        od;
        mm_fetch_add(OWNER, SERVED, 1, old, MM_RLX)
    }
}

active proctype waker() {
    int old, w;
    bool wok;
    byte i;

    for (i : 1 .. ROUNDS) {
#ifdef PLAIN_PUBLISH
        mm_load(WAKER, ASKED, old, MM_RLX);
        mm_store(WAKER, ASKED, old + 1, MM_RLX);
#else
        mm_fetch_add(WAKER, ASKED, 1, old, MM_RLX);
#endif
        wake();
        mm_await(WAKER, SERVED, mem[SERVED] == i, old, MM_RLX) /* the answer */
    }
}

init {
    run mm_flusher(OWNER);
    run mm_flusher(WAKER)
}

/* At the end, nothing is left in the ready queue that no park consumes. */
