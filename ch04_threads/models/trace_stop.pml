/*
 * trace_stop.pml — coro_trace_stop() against a pump that records
 * (trace.c: append(), coro_trace_stop()).
 *
 * Models:
 *   append()          on the pump's thread: coro__tracing() (a relaxed
 *                     load of coro__trace_on, outside any lock: "try to
 *                     record"); then, under the scheduler's trace lock,
 *                     the session loaded again (relaxed), a buffer of an
 *                     older session thrown away if a newer one records,
 *                     and the record kept in the buffer if the session is
 *                     not 0. Two records.
 *   coro_trace_stop() on another thread: coro__trace_on = 0 (relaxed),
 *                     then, under the scheduler's lock, the buffer taken:
 *                     what it holds goes to the writer and into the file.
 *
 * Abstracts:
 *   - The scheduler's trace lock is a word taken by an acquire RMW
 *     (0 -> 1) and given back by a release store, as a mutex does. The
 *     buffer (its session and how many records it holds) is data the
 *     lock guards: ghost variables, changed only inside it.
 *   - One trace, session 1, recording when both start. The writer, and
 *     what it does with a collected buffer, are left out: a buffer the
 *     stop collects is written.
 *
 * Proves, for every interleaving, under x86-TSO and the weak model:
 *   - nothing kept is lost: every record kept for the trace is in the
 *     buffer the stop collected. (A record that is not kept is allowed:
 *     "what a pump records while the stop runs may be left out". A record
 *     kept after the collection would sit in a buffer of a trace that is
 *     over, never written and never counted.)
 *
 * Mutants (each must fail):
 *   MUTANT_OFF_LAST       the stop clears coro__trace_on after it collects
 *                         the buffer (TSO and weak): a record taken in
 *                         between is kept in a new buffer nobody collects.
 *   MUTANT_DECIDE_OUTSIDE the pump keeps the record on what it loaded
 *                         outside the lock (TSO and weak): the stop may
 *                         clear the flag and collect between the two.
 *   MUTANT_DISCARD_WHEN_OFF a record that reads the flag as 0 under the
 *                         lock throws away the buffer as "an older
 *                         trace's" (TSO and weak): the records kept before
 *                         it, which the stop is on its way to collect,
 *                         are lost. The code did this as first written;
 *                         this model found it.
 *   MUTANT_RELAXED_UNLOCK the lock is given back by a relaxed store (weak
 *                         only): the pump may take the lock after the
 *                         collection and still read the flag as 1.
 */
#define NTHREADS 2
#define PUMP 0
#define STOPPER 1

#define ON 0          /* coro__trace_on */
#define SLOCK 1       /* the scheduler's trace lock */
#define NWORDS 2

#define SESSION 1

#include "memory.pml"

#ifdef MUTANT_RELAXED_UNLOCK
#define UNLOCK_ORDER MM_RLX
#else
#define UNLOCK_ORDER MM_REL
#endif

#define LOCK_TAKE(t) mm_await_rmw(t, SLOCK, mem[SLOCK] == 0, old, 1, MM_ACQ)
#define LOCK_GIVE(t) mm_store(t, SLOCK, 0, UNLOCK_ORDER)

byte buffer_session; /* the scheduler's buffer: its trace, 0 if none */
byte buffer_records; /* ...and the records it holds */
byte kept;           /* records kept for the trace (ghost) */
byte collected;      /* records in the buffer the stop took (ghost) */
bool pump_done, stop_done;

proctype pump() {
    int old, on, session;
    byte n;

    for (n : 1 .. 2) {
        mm_load(PUMP, ON, on, MM_RLX);       /* coro__tracing() */
        if
        :: on != 0 ->
            LOCK_TAKE(PUMP);
#ifdef MUTANT_DECIDE_OUTSIDE
            session = on;
#else
            mm_load(PUMP, ON, session, MM_RLX);
#endif
            atomic {
                if
#ifdef MUTANT_DISCARD_WHEN_OFF
                :: buffer_session != 0 && buffer_session != session ->
#else
                :: buffer_session != 0 && session != 0 &&
                   buffer_session != session ->
#endif
                    buffer_session = 0;       /* an older trace's */
                    buffer_records = 0
                :: else -> skip
                fi;
                if
                :: session != 0 ->
                    buffer_session = session;
                    buffer_records++;
                    kept++
                :: else -> skip
                fi
            };
            LOCK_GIVE(PUMP)
        :: else -> skip
        fi
    }
    pump_done = true
}

proctype stopper() {
    int old;

#ifndef MUTANT_OFF_LAST
    mm_store(STOPPER, ON, 0, MM_RLX);
#endif
    LOCK_TAKE(STOPPER);
    atomic {
        if
        :: buffer_session == SESSION -> collected = buffer_records
        :: else -> skip
        fi;
        buffer_session = 0;
        buffer_records = 0
    };
    LOCK_GIVE(STOPPER);
#ifdef MUTANT_OFF_LAST
    mm_store(STOPPER, ON, 0, MM_RLX);
#endif
    stop_done = true
}

init {
    atomic {
        mem[ON] = SESSION; /* recording, since before both start */
        run pump();
        run stopper();
        run mm_flusher(PUMP);
        run mm_flusher(STOPPER)
    };
    (pump_done && stop_done);
    assert(kept == collected)
}
