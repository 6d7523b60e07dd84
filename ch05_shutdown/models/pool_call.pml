/*
 * pool_call.pml — coro_pool_call(): the call record shared by the caller
 * and the pool's coroutine, its event and its reference count
 * (pool_call.c, with event.c's set, wait, timeout and destroy).
 *
 * Models (this stage's pool_call.c):
 *   the caller     coro_event_await(&call->done) (event_wait(): refused
 *                  at once if already cancelled; else, under the event's
 *                  lock, return if set, or join the waiter list, unlock
 *                  and park); while parked it may be woken by the set's
 *                  wake-up, cancelled (coro__end_wait_canceled(): under
 *                  the lock, leave the list, unless a set took it off
 *                  first: then the set's wake-up stands), or abandoned
 *                  by its scheduler's shutdown (coro__abandon_one(): the
 *                  same look under the lock, then its cleanup,
 *                  call_release(), and it never runs again); once back,
 *                  with 0 it reads `status` and, if 0, `result`; then
 *                  call_release();
 *   the pool's side  fn runs and writes `result` and `status` = 0, or the
 *                  task never starts or is abandoned (status stays
 *                  ESHUTDOWN); either way call_finished(): the event's set
 *                  (under the lock: is_set, take the caller off the list;
 *                  after the unlock, its wake-up), then call_release();
 *   call_release() fetch_sub of `references` (seq_cst); the one that
 *                  takes it to 0 destroys the event (under its lock: no
 *                  waiter may be left) and frees the record.
 * With -DCH04, chapter 4's pool_call.c instead: no cancellation, fn always
 * runs, no reference count: the record is on the caller's stack, and the
 * caller destroys the event and reads `result` once the wait returns, and
 * then its frame is gone.
 *
 * Abstracts:
 *   - The model starts once coro__pool_go() has handed the task in: the
 *     record's first values (references 2, status ESHUTDOWN) are in memory
 *     before either side starts (the pool's queue lock publishes them).
 *   - The event's lock is a word taken by an acquire RMW (0 -> 1) and
 *     given back by a release store; is_set and the caller's place on the
 *     waiter list are words under it.
 *   - The set's wake-up (coro__deliver_ready()) is a word: a seq_cst RMW
 *     (the inbox push), and an acquire RMW where the caller's pump takes
 *     it (inbox.pml proves the inbox). A wake-up owed to an abandoned
 *     caller is taken later by its pump (cancel.pml proves the owing).
 *   - Freeing the record is a ghost flag: every touch of the record
 *     asserts it is not freed. That catches a touch after the free; a
 *     touch before it must also happen before it (or the free races with
 *     it). So each side also stores a word at its last touch of the
 *     record (the pool's side: inside the set, before its unlock, after
 *     which it touches only the caller's coroutine; the caller: just
 *     before its decrement, after its reads of status and result or its
 *     look at the event), and the free asserts that it reads the other
 *     side's: a relaxed load may return any store not ordered before it.
 *
 * Proves, for every interleaving, under x86-TSO and the weak model:
 *   - the record is freed exactly once, and never touched after it is
 *     freed, by the caller (woken, cancelled or abandoned) or by the
 *     pool's side; both sides' touches happen before the free;
 *   - no waiter is left on the event when it is destroyed;
 *   - the caller's wait ends exactly once: a set that took it off the
 *     list wakes it once, and no wake-up arrives when it is not parked
 *     (each delivered wake-up is taken: none is left at the end); no lost
 *     wake: a caller parked for good is an invalid end state;
 *   - a caller woken with 0 reads status 0 and the result if fn ran, and
 *     ESHUTDOWN if not.
 * (The count needs acquire and release, not seq_cst: -DREF_ORDER=MM_ACQ_REL
 * passes too.)
 *
 * Mutants (each must fail):
 *   MUTANT_RELEASE_FIRST  call_finished() releases its reference before it
 *                     sets the event (TSO and weak): the caller, cancelled,
 *                     frees the record, and the set touches it.
 *   MUTANT_SET_FIRST  the pool's side sets the event before it writes
 *                     status (and result) (TSO and weak; also with -DCH04):
 *                     the woken caller reads ESHUTDOWN, or the write lands
 *                     in a freed record.
 *   MUTANT_NO_COUNT   the caller frees the record when its wait ends, as
 *                     chapter 4 did (TSO and weak): a cancelled caller
 *                     frees it under the pool's side.
 *   MUTANT_PLAIN_COUNT the decrement as a load and a store (TSO and weak):
 *                     both read 2, and the record is never freed.
 *   MUTANT_RELAXED_COUNT  the decrement relaxed (weak only): the pool's
 *                     side frees the record, and the caller's last touch
 *                     (its reads, or its look at the event) is not ordered
 *                     before the free.
 *   MUTANT_COUNT_NO_ACQUIRE  the decrement release only (weak only).
 *   MUTANT_COUNT_NO_RELEASE  the decrement acquire only (weak only).
 */
#define NTHREADS 2
#define CALLER 0 /* the caller's scheduler's thread */
#define WORKER 1 /* the pool's worker (or the shutdown's thread) */

#define LOCK 0    /* call->done.lock */
#define IS_SET 1  /* call->done.is_set */
#define LINKED 2  /* the caller on call->done's waiter list */
#define READY 3   /* the set's wake-up, on its way to the caller's pump */
#define REFS 4    /* call->references */
#define STATUS 5  /* call->status */
#define RESULT 6  /* call->result */
#define TOUCH_C 7 /* the caller's last touch of the record */
#define TOUCH_W 8 /* the pool side's last touch */
#define NWORDS 9

#include "memory.pml"

#define ESHUTDOWN 2
#define ECANCELED 3
#define RESULT_VALUE 1

#ifndef REF_ORDER
#if defined(MUTANT_RELAXED_COUNT)
#define REF_ORDER MM_RLX
#elif defined(MUTANT_COUNT_NO_ACQUIRE)
#define REF_ORDER MM_REL
#elif defined(MUTANT_COUNT_NO_RELEASE)
#define REF_ORDER MM_ACQ
#else
#define REF_ORDER MM_SC
#endif
#endif

bool freed;  /* the record */
bool fn_ran; /* fn has returned (status 0 is on its way) */
byte done;   /* both sides are over */

#define LOCK_TAKE(t) mm_await_rmw(t, LOCK, mem[LOCK] == 0, old, 1, MM_ACQ)
#define LOCK_GIVE(t) mm_store(t, LOCK, 0, MM_REL)
#define REC() assert(!freed)
#define DELIVER() mm_rmw(WORKER, READY, old, old + 1, MM_SC)
#define RECEIVE() mm_await_rmw(CALLER, READY, mem[READY] > 0, old, old - 1, MM_ACQ)

/* coro_event_destroy() and free(), by thread t; `other` is the other
 * side's last-touch word. */
inline destroy_and_free(t, other) {
    LOCK_TAKE(t);
    REC();
    mm_load(t, LINKED, v, MM_RLX);
    assert(v == 0); /* else EBUSY, and the free would leave a waiter */
    LOCK_GIVE(t);
    mm_load(t, other, v, MM_RLX);
    assert(v == 1); /* the other side's touches happen before the free */
    freed = true
}

/* call_release(), by thread t. */
inline call_release(t, other) {
    REC();
#ifdef MUTANT_PLAIN_COUNT
    mm_load(t, REFS, old, MM_RLX);
    mm_store(t, REFS, old - 1, MM_RLX);
#else
    mm_fetch_add(t, REFS, -1, old, REF_ORDER);
#endif
    if
    :: old == 1 -> destroy_and_free(t, other)
    :: else -> skip
    fi
}

/* The pool's side: fn (or not), then call_finished(). */
proctype pool_side() {
    int old, v;
    bool woken;

#ifdef CH04
#ifndef MUTANT_SET_FIRST
    mm_store(WORKER, RESULT, RESULT_VALUE, MM_RLX);
#endif
    fn_ran = true;
#else
    if
    :: /* fn runs and returns */
#ifndef MUTANT_SET_FIRST
        REC();
        mm_store(WORKER, RESULT, RESULT_VALUE, MM_RLX);
        mm_store(WORKER, STATUS, 0, MM_RLX);
#endif
        fn_ran = true
    :: skip /* never started, or abandoned: status stays ESHUTDOWN */
    fi;
#endif
#if defined(MUTANT_RELEASE_FIRST) && !defined(CH04)
    call_release(WORKER, TOUCH_C);
#endif
    /* coro_event_set() */
    LOCK_TAKE(WORKER);
    REC();
    mm_store(WORKER, IS_SET, 1, MM_RLX);
    mm_load(WORKER, LINKED, v, MM_RLX);
    if
    :: v == 1 -> mm_store(WORKER, LINKED, 0, MM_RLX); woken = true
    :: else -> skip
    fi;
    mm_store(WORKER, TOUCH_W, 1, MM_RLX);
    LOCK_GIVE(WORKER);
    if
    :: woken -> DELIVER()
    :: else -> skip
    fi;
#ifdef MUTANT_SET_FIRST
    if
    :: fn_ran ->
        REC();
        mm_store(WORKER, RESULT, RESULT_VALUE, MM_RLX);
#ifndef CH04
        mm_store(WORKER, STATUS, 0, MM_RLX)
#endif
    :: else -> skip
    fi;
#endif
#if !defined(MUTANT_RELEASE_FIRST) && !defined(MUTANT_NO_COUNT) && !defined(CH04)
    call_release(WORKER, TOUCH_C);
#endif
    done++
}

proctype caller() {
    int old, v, st, r, still;
    byte err;

    /* coro_event_await(&call->done): event_wait() */
    if
#ifndef CH04
    :: REC(); err = ECANCELED /* cancelled already: refused, no wait */
#endif
    :: LOCK_TAKE(CALLER);
       REC();
       mm_load(CALLER, IS_SET, v, MM_RLX);
       if
       :: v == 1 -> LOCK_GIVE(CALLER); err = 0
       :: else ->
           mm_store(CALLER, LINKED, 1, MM_RLX);
           LOCK_GIVE(CALLER);
           /* coro__wait(): parked until one of these ends it */
           if
           :: RECEIVE(); err = 0 /* the set's wake-up */
#ifndef CH04
           :: /* cancelled: coro__end_wait_canceled() -> event_timeout() */
               LOCK_TAKE(CALLER);
               REC();
               mm_load(CALLER, LINKED, still, MM_RLX);
               if
               :: still == 1 -> mm_store(CALLER, LINKED, 0, MM_RLX)
               :: else -> skip
               fi;
               LOCK_GIVE(CALLER);
               if
               :: still == 1 -> err = ECANCELED
               :: else -> RECEIVE(); err = 0 /* a set won: its wake-up */
               fi
           :: /* abandoned: coro__abandon_one() */
               LOCK_TAKE(CALLER);
               REC();
               mm_load(CALLER, LINKED, still, MM_RLX);
               if
               :: still == 1 -> mm_store(CALLER, LINKED, 0, MM_RLX)
               :: else -> skip
               fi;
               LOCK_GIVE(CALLER);
               /* its cleanup, caller_side: call_release() */
               mm_store(CALLER, TOUCH_C, 1, MM_RLX);
#ifndef MUTANT_NO_COUNT
               call_release(CALLER, TOUCH_W);
#else
               destroy_and_free(CALLER, TOUCH_W);
#endif
               if
               :: still == 0 -> RECEIVE() /* owed: the pump takes it later */
               :: else -> skip
               fi;
               goto over
#endif
           fi
       fi
    fi;
#ifdef CH04
    /* coro_event_destroy(), then *result = call.result, and return */
    LOCK_TAKE(CALLER);
    mm_load(CALLER, LINKED, v, MM_RLX);
    assert(v == 0);
    LOCK_GIVE(CALLER);
    mm_load(CALLER, RESULT, r, MM_RLX);
    assert(r == RESULT_VALUE);
    mm_load(CALLER, TOUCH_W, v, MM_RLX);
    assert(v == 1); /* the worker's touches happen before the frame goes */
    freed = true;
#else
    if
    :: err == 0 ->
        REC();
        mm_load(CALLER, STATUS, st, MM_RLX);
        if
        :: st == 0 ->
            mm_load(CALLER, RESULT, r, MM_RLX);
            assert(r == RESULT_VALUE)
        :: else -> assert(st == ESHUTDOWN)
        fi;
        assert((st == 0) == fn_ran) /* the pool's side is over */
    :: else -> skip
    fi;
    mm_store(CALLER, TOUCH_C, 1, MM_RLX);
#ifndef MUTANT_NO_COUNT
    call_release(CALLER, TOUCH_W);
#else
    destroy_and_free(CALLER, TOUCH_W);
#endif
#endif
over:
    done++
}

init {
    atomic {
        mem[REFS] = 2;
        mem[STATUS] = ESHUTDOWN;
        run caller();
        run pool_side();
        run mm_flusher(CALLER);
        run mm_flusher(WORKER)
    };
    done == 2;
    assert(freed);         /* exactly once: a second free asserts in REC */
    assert(mem[READY] == 0) /* every wake-up was taken */
}
