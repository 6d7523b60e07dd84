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
#define NWORDS 3

#include "tso.pml"

#ifndef ROUNDS
#define ROUNDS 2
#endif

#define EMPTY 0
#define PERMIT 1
#define PARKED 2

byte readied;      /* the coroutine is in the ready queue (or inbox) */
bool timer_armed;  /* it is parked with a deadline */

/* coro_park_until(); rc: 0 woken or permit, 1 timed out. */
inline park(timed, rc) {
    tso_xchg(OWNER, PARK_WORD, EMPTY, old);
    if
    :: old == PERMIT -> rc = 0
    :: else ->
        word = EMPTY;
        tso_cas(OWNER, PARK_WORD, word, PARKED, ok);
        if
        :: !ok ->
            assert(word == PERMIT); /* only a wake can change EMPTY */
#ifdef MUTANT
            tso_store(OWNER, PARK_WORD, EMPTY);
#else
            tso_xchg(OWNER, PARK_WORD, EMPTY, old);
            assert(old == PERMIT);
#endif
            rc = 0
        :: else ->
            /* Suspended. The pump (same thread) runs until the wake's
             * delivery arrives or, for a timed park, the timer fires. */
            timer_armed = timed;
            if
            :: d_step { readied > 0 -> readied--; timer_armed = false }; rc = 0
            :: timer_armed ->
                /* timeout_wins() */
                word = PARKED;
                tso_cas(OWNER, PARK_WORD, word, EMPTY, ok);
                timer_armed = false;
                if
                :: ok -> rc = 1
                :: else -> /* a wake won: its delivery is on the way */
                    d_step { readied > 0 -> readied-- }; rc = 0
                fi
            fi
        fi
    fi
}

/* coro_wake() */
inline wake() {
#if defined(MUTANT) || defined(MUTANT_PLAIN_CHECK)
    tso_load(WAKER, PARK_WORD, w);
    do
    :: w == PERMIT -> break
    :: w == EMPTY ->
        tso_cas(WAKER, PARK_WORD, w, PERMIT, wok);
        if :: wok -> break :: else -> skip fi
    :: w == PARKED ->
        tso_cas(WAKER, PARK_WORD, w, EMPTY, wok);
        if
        :: wok -> d_step { assert(readied == 0); readied++ }; break
        :: else -> skip
        fi
    od
#else
    tso_load(WAKER, PARK_WORD, w);
    do
    :: w == PARKED ->
        tso_cas(WAKER, PARK_WORD, w, EMPTY, wok);
        if
        :: wok -> d_step { assert(readied == 0); readied++ }; break
        :: else -> skip
        fi
    :: else -> /* EMPTY or PERMIT: leave (or keep) a permit, by a RMW */
        tso_cas(WAKER, PARK_WORD, w, PERMIT, wok);
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
        :: tso_load(OWNER, ASKED, a);
           tso_load(OWNER, SERVED, s);
           if
           :: a != s -> break
           :: else ->
               if
               :: park(false, rc)
               :: park(true, rc)
               fi
           fi
        od;
        tso_fetch_add(OWNER, SERVED, 1, old)
    }
}

active proctype waker() {
    int old, w;
    bool wok;
    byte i;

    for (i : 1 .. ROUNDS) {
#ifdef PLAIN_PUBLISH
        tso_load(WAKER, ASKED, old);
        tso_store(WAKER, ASKED, old + 1);
#else
        tso_fetch_add(WAKER, ASKED, 1, old);
#endif
        wake();
        mem[SERVED] == i /* the owner's served++ is a locked add: in memory */
    }
}

init {
    run tso_flusher(OWNER);
    run tso_flusher(WAKER)
}

/* At the end, nothing is left in the ready queue that no park consumes. */
