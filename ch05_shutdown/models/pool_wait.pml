/*
 * pool_wait.pml — coro_pool_wait() against the finish of the pool's last
 * piece of work (pool.c: coro_pool_wait(), finish_one()).
 *
 * Models:
 *   finish_one()      on a worker, after a task ran: fetch_sub of
 *                     `outstanding` (seq_cst) outside the lock; the one
 *                     that takes it to 0 broadcasts `all_done` holding
 *                     p->lock (and, with use_caller, posts a wake_up to
 *                     worker 0);
 *   coro_pool_wait()  under p->lock: while `outstanding` (seq_cst load) is
 *                     not 0, pthread_cond_wait(all_done). With
 *                     -DUSE_CALLER: no lock; while `outstanding` is not 0,
 *                     a worker_turn() of worker 0.
 * Two tasks are outstanding when the wait starts; each runs on a worker
 * of its own and writes a word of its result (relaxed, as plain data).
 *
 * Abstracts:
 *   - p->lock is a word taken by an acquire RMW (0 -> 1) and given back by
 *     a release store. pthread_cond_wait() releases it and blocks in one
 *     step, and retakes it once woken; a broadcast wakes every blocked
 *     waiter. The condition variable is a plain flag: it orders nothing by
 *     itself (the retaken lock does). A wait may also wake up for no
 *     reason (POSIX allows it), once per run here.
 *   - With use_caller, worker 0 runs no task of its own here; a
 *     worker_turn() returns once a post has arrived (a word: the push is a
 *     seq_cst RMW, the pump's take an acquire RMW; inbox.pml and
 *     post_admit.pml prove that the pump never sleeps through one).
 *
 * Proves, for every interleaving, under x86-TSO and the weak model:
 *   - no lost wake-up: the wait always returns (a waiter blocked for good
 *     is an invalid end state);
 *   - never early: it returns only once both tasks have finished;
 *   - what the tasks wrote is visible once it returns (both, not only the
 *     last one's: the first one's reaches the waiter through the
 *     decrements).
 * (Neither seq_cst is needed here: the wait's load needs acquire, the
 * decrement release (the last decrement carries the first one's release
 * on: a release sequence). -DLOAD_ORDER=MM_ACQ -DSUB_ORDER=MM_REL passes
 * too.)
 *
 * Mutants (each must fail):
 *   MUTANT_BROADCAST_UNLOCKED  the last finish broadcasts without taking
 *                        p->lock (TSO and weak): between the waiter's
 *                        check and its block, nobody is blocked yet: the
 *                        wake-up is lost.
 *   MUTANT_CHECK_OUTSIDE the waiter checks `outstanding` before it takes
 *                        the lock, then waits (TSO and weak): the same
 *                        window, from the other side.
 *   MUTANT_IF            `if`, not `while`, around pthread_cond_wait()
 *                        (TSO and weak): a spurious wake-up returns early.
 *   MUTANT_RELAXED_SUB   the decrement relaxed (weak only): the first
 *                        task's result is not visible to the waiter.
 *   MUTANT_RELAXED_LOAD  the waiter's load relaxed (weak only): it may
 *                        read the last decrement's 0 before that task
 *                        takes the lock, and see neither task's result.
 *   With -DUSE_CALLER:
 *   MUTANT_POST_FIRST    the finish posts the wake_up first, if it reads
 *                        `outstanding` as 1, and then counts down (TSO and
 *                        weak): two finishes both read 2 and nobody posts,
 *                        or worker 0 takes the post, still reads 1, and
 *                        sleeps for good.
 *   MUTANT_RELAXED_SUB, MUTANT_RELAXED_LOAD  as above (weak only).
 */
#define NTHREADS 3
#define WAITER 0
#define F1 1
#define F2 2

#define LOCK 0        /* p->lock */
#define OUTSTANDING 1 /* p->outstanding */
#define DATA1 2       /* what task 1 wrote */
#define DATA2 3       /* what task 2 wrote */
#define POSTS 4       /* posts to worker 0 not taken yet (use_caller) */
#define NWORDS 5

#include "memory.pml"

#ifndef LOAD_ORDER
#ifdef MUTANT_RELAXED_LOAD
#define LOAD_ORDER MM_RLX
#else
#define LOAD_ORDER MM_SC
#endif
#endif
#ifndef SUB_ORDER
#ifdef MUTANT_RELAXED_SUB
#define SUB_ORDER MM_RLX
#else
#define SUB_ORDER MM_SC
#endif
#endif

bool blocked;     /* the waiter is blocked in pthread_cond_wait() */
bool spurious;    /* its one spurious wake-up is used */
byte finished;    /* finish_one() decrements done (ghost) */

#define LOCK_TAKE(t) mm_await_rmw(t, LOCK, mem[LOCK] == 0, old, 1, MM_ACQ)
#define LOCK_GIVE(t) mm_store(t, LOCK, 0, MM_REL)

/* pthread_cond_wait(all_done, lock) */
inline cond_wait() {
    atomic { blocked = true; LOCK_GIVE(WAITER) };
    if
    :: !blocked -> skip                       /* broadcast */
    :: blocked && !spurious ->                /* for no reason */
        blocked = false; spurious = true
    fi;
    LOCK_TAKE(WAITER)
}

/* A task finishes on worker t: its result, then finish_one(). */
proctype finisher(byte t; byte data) {
    int old;

    mm_store(t, data, 1, MM_RLX);
#ifdef MUTANT_POST_FIRST
    mm_load(t, OUTSTANDING, old, MM_SC);
    if
    :: old == 1 -> mm_rmw(t, POSTS, old, old + 1, MM_SC)
    :: else -> skip
    fi;
#endif
    atomic {
        mm_fetch_add(t, OUTSTANDING, -1, old, SUB_ORDER);
        finished++
    };
    if
    :: old == 1 ->
#ifndef MUTANT_BROADCAST_UNLOCKED
        LOCK_TAKE(t);
#endif
        blocked = false; /* pthread_cond_broadcast() */
#ifndef MUTANT_BROADCAST_UNLOCKED
        LOCK_GIVE(t);
#endif
#if defined(USE_CALLER) && !defined(MUTANT_POST_FIRST)
        mm_rmw(t, POSTS, old, old + 1, MM_SC) /* coro_post(w0, wake_up) */
#else
        skip
#endif
    :: else -> skip
    fi
}

proctype waiter() {
    int old, n, d1, d2;

#ifdef USE_CALLER
    /* while (outstanding > 0) worker_turn(w0) */
    do
    :: mm_load(WAITER, OUTSTANDING, n, LOAD_ORDER);
       if
       :: n == 0 -> break
       :: else ->
           mm_await_rmw(WAITER, POSTS, mem[POSTS] > 0, old, old - 1, MM_ACQ)
       fi
    od;
#elif defined(MUTANT_CHECK_OUTSIDE)
    do
    :: mm_load(WAITER, OUTSTANDING, n, LOAD_ORDER);
       if
       :: n == 0 -> break
       :: else -> LOCK_TAKE(WAITER); cond_wait(); LOCK_GIVE(WAITER)
       fi
    od;
#else
    LOCK_TAKE(WAITER);
#ifdef MUTANT_IF
    mm_load(WAITER, OUTSTANDING, n, LOAD_ORDER);
    if
    :: n != 0 -> cond_wait()
    :: else -> skip
    fi;
#else
    do
    :: mm_load(WAITER, OUTSTANDING, n, LOAD_ORDER);
       if
       :: n == 0 -> break
       :: else -> cond_wait()
       fi
    od;
#endif
    LOCK_GIVE(WAITER);
#endif
    /* coro_pool_wait() has returned */
    assert(finished == 2);
    mm_load(WAITER, DATA1, d1, MM_RLX);
    mm_load(WAITER, DATA2, d2, MM_RLX);
    assert(d1 == 1 && d2 == 1)
}

init {
    atomic {
        mem[OUTSTANDING] = 2; /* handed in before the wait */
        run waiter();
        run finisher(F1, DATA1);
        run finisher(F2, DATA2);
        run mm_flusher(WAITER);
        run mm_flusher(F1);
        run mm_flusher(F2)
    }
}
