/*
 * cancel.pml — the cancel word and cancel requests from other threads
 * (coro.c, the scheduler's sched.c, shutdown.c, remote.c and wait.c,
 * park.c of this stage).
 *
 * Models:
 *   coro.c    coroutine_main()       the one fetch_or that sets FINISHED;
 *   sched.c   run_coroutine()        after a finish: `finished` = true, and
 *                                    owe() if a cancel request is IN_FLIGHT;
 *   shutdown.c (and remote.c: take_in_cancel(), take_in(); wait.c:
 *   timeout_wins(), coro__make_ready()):
 *             coro__sched_cancel()   from another thread: mark_canceled()
 *                                    with IN_FLIGHT (a compare-exchange loop
 *                                    that gives up on FINISHED or CANCELED),
 *                                    then the push of c->cancel_remote;
 *                                    on the owner's thread: mark_canceled()
 *                                    then end_wait_canceled() directly (the
 *                                    same as cancel_members() of a close);
 *             take_in_cancel()       the owner takes the request in: clears
 *                                    IN_FLIGHT with fetch_and; a finished
 *                                    coroutine is paid (owed_paid()), any
 *                                    other has its wait ended;
 *             end_wait_canceled()    a sleep ends with ECANCELED; a park
 *                                    only if the compare-exchange PARKED ->
 *                                    EMPTY wins (else a wake won);
 *             take_in() READY        a wake's delivery: make ready, or pay
 *                                    a finished (abandoned) coroutine;
 *             timeout_wins(), coro__make_ready(), owe(), owed_paid(),
 *             retire_if_released(), coro__sched_destroy_coroutine(),
 *             abandon_one()          (the shutdown giving up on it);
 *   park.c    coro_park_until()      the check of CANCELED first (then
 *                                    coro__refuse_canceled(): yield once,
 *                                    ECANCELED), the exchange that takes a
 *                                    permit, EMPTY -> PARKED;
 *             coro_sleep()           the check, then a wait only a timer
 *                                    or a cancel ends;
 *             coro_wake()            from another thread: `finished`, then
 *                                    the compare-exchange loop on park_word;
 *   coro.c    coro_canceled()        (checked at the top of each round).
 *
 * The actors: one coroutine C of a scheduler, joinable (coro_spawn()), on
 * the owner's thread; the owner's pump; NCANCEL threads that each call
 * coro_cancel(C) once; one thread that calls coro_wake(C) WAKES times. The
 * coroutine makes up to ROUNDS blocking calls, each a park (with or without
 * a deadline) or a sleep, and returns early when one says ECANCELED. The
 * other threads hold the handle while they use it; the owner calls
 * coro_destroy() (and the memory may be recycled) only after they have all
 * returned — that is the user's side of the contract. The library's side is
 * what this model checks.
 *
 * Abstracts:
 *   - The inbox is one flag per embedded node (c->cancel_remote, c->remote):
 *     a push is a locked compare-exchange (it drains the pusher's store
 *     buffer), the owner's take a locked exchange. The owner takes requests
 *     in one at a time in any order: every order the real inbox can
 *     produce, and more. Its own sleep/wake protocol is not modelled here:
 *     the pump simply blocks until something is there.
 *   - The coroutine and the pump are one process (they share the owner's
 *     thread and its store buffer): when C suspends, the process goes back
 *     to the pump's loop, which resumes C where it stopped (`pc`) once it
 *     is queued; so the pump takes requests in only between two resumes,
 *     exactly as in the code.
 *   - A deadline is "the timer may fire at any moment while armed". Event
 *     waits are not modelled (their race with a cancel is the event's lock,
 *     not an atomic). The memory itself is a flag, `retired`: recycling it
 *     is when coro__prepare() would clear the cancel word of a stranger.
 *   - The shutdown's abandon_one() may happen (in the runs where
 *     `may_abandon` is chosen) at any moment the pump runs, not only after
 *     a grace period.
 *
 * Proves, for every interleaving and store-buffer drain order of x86-TSO:
 *   - a cancel ends a wait promptly: when the owner takes the request in,
 *     the wait ends there with ECANCELED, or it had already ended — a wake
 *     that won PARKED -> EMPTY has its delivery on the way and the park
 *     returns 0 (asserted); every later blocking call sees CANCELED and
 *     refuses, and coro_canceled() says true (asserted); a coroutine
 *     parked without a deadline is never left parked by a cancel (a lost
 *     cancel is an invalid end state: the pump blocked for good);
 *   - no double ready: exactly one of a wake, the timer and a cancel ends a
 *     park (coro__make_ready() of a coroutine that is not waiting, or a
 *     second delivery, fails an assertion);
 *   - no cancel request lost, nor pushed twice: the node is never pushed
 *     while it is in the inbox, every request pushed is taken in, and the
 *     run ends with the inbox empty;
 *   - no use after free: the coroutine is never retired (recycled) while a
 *     cancel request or a wake's delivery for it is on its way — from the
 *     compare-exchange that committed to it until the owner took it in;
 *     and a request owed is paid exactly once (owed never goes below 0);
 *   - a cancel that starts after the finish returns EINVAL and changes
 *     nothing (it pushes nothing and sets no bit).
 *
 * Mutants, each a known-bad variant the search must catch:
 *   MUTANT_NO_IN_FLIGHT   run_coroutine() does not look at IN_FLIGHT after
 *                         the finish (no owe()): the request then arrives
 *                         for a coroutine owed nothing (c->owed would wrap
 *                         below zero) — or, once its handle is destroyed,
 *                         the coroutine is recycled while the request is
 *                         still in the inbox.
 *   MUTANT_PLAIN_FINISH   coroutine_main() sets FINISHED with a load and a
 *                         plain store instead of one fetch_or: a canceller's
 *                         CAS slips in between (or the store waits in the
 *                         store buffer), IN_FLIGHT is overwritten, and the
 *                         request arrives for a coroutine owed nothing.
 *   MUTANT_NO_RECHECK     end_wait_canceled() ends a park without its own
 *                         compare-exchange PARKED -> EMPTY (it trusts
 *                         `waiting`): a wake can still win the park word
 *                         and delivers a second ready (to a coroutine that
 *                         is running, in a later wait, or has returned).
 *   MUTANT_NO_CHECK       coro_park_until() does not check CANCELED before
 *                         it parks: a cancel taken in while the coroutine
 *                         was queued is lost, and it parks for good.
 */
#ifndef NCANCEL
#define NCANCEL 2  /* threads that cancel (two: the node is pushed once) */
#endif
#ifndef WAKES
#define WAKES 1
#endif
#ifndef ROUNDS
#define ROUNDS 2
#endif

#define OWNER 0
#define WAKER 1
#define NTHREADS (2 + NCANCEL) /* cancellers are threads 2 .. */

#define CW 0        /* c->cancel_word */
#define PW 1        /* c->park_word */
#define FIN 2       /* c->finished (coro_wake() reads it) */
#define IN_CANCEL 3 /* c->cancel_remote is in the inbox */
#define IN_READY 4  /* c->remote (a wake's READY) is in the inbox */
#define NWORDS 5

#include "tso.pml"

/* The cancel word's bits (coro_impl.h). */
#define CANCELED 1
#define IN_FLIGHT 2
#define FINISHED 4
#define ALL_BUT_IN_FLIGHT (CANCELED | FINISHED) /* ~IN_FLIGHT, in 3 bits */

/* park_word */
#define EMPTY 0
#define PERMIT 1
#define PARKED 2

/* c->waiting */
#define W_NONE 0
#define W_SLEEP 1
#define W_PARK 2

/* Results. */
#define R_OK 0
#define R_ETIMEDOUT 1
#define R_ECANCELED 2
#define R_EINVAL 3
#define R_ALREADY 4 /* mark_canceled(): cancelled already (coro_cancel() says 0) */
#define R_RETRY 5   /* the compare-exchange failed: look again */

/* The owner's view of C lives in the owner process (locals: SPIN's partial
 * order reduction then knows no other thread touches it). Shared: */
bool retired;       /* retire_if_released() recycled C's memory */

/* Ghosts: what the proof talks about, not in the code. */
byte cancel_coming; /* cancel requests committed (CAS won), not taken in */
bool ready_coming;  /* a wake won PARKED -> EMPTY, READY not taken in */
byte returned;      /* other threads done with the handle */

/* ── Owner-side steps ───────────────────────────────────────────────── */

/* How steps are grouped, here and in the other threads: each locked
 * instruction or load is one step, together with the local work that
 * follows it (an `atomic` block). No other thread can see local work, so
 * the grouping loses no interleaving; it only spares states. */

/* A locked `or` / `and` (lock or, lock and, or a lock cmpxchg loop): the
 * store buffer drains, then one step on memory. tso.pml has no such
 * instruction; this is the same shape as its tso_fetch_add. */
inline rmw_or(rmw_t, rmw_w, rmw_bits, rmw_old) {
    d_step { tso_drain_all(rmw_t); rmw_old = mem[rmw_w]; mem[rmw_w] = rmw_old | rmw_bits }
}
inline rmw_and(rmw_t, rmw_w, rmw_bits, rmw_old) {
    d_step { tso_drain_all(rmw_t); rmw_old = mem[rmw_w]; mem[rmw_w] = rmw_old & rmw_bits }
}

/* coro__make_ready(): cancel its timer, end the wait, queue it. */
inline make_ready(result) {
    assert(waiting != W_NONE && !queued && !done); /* no double ready */
    timer_armed = false;
    waiting = W_NONE;
    wait_result = result;
    queued = true
}

/* retire_if_released(): a finished C leaves once nobody holds it. */
inline retire_if_released() {
    if
    :: !handle_held && owed == 0 ->
        assert(done);
        /* No use after free: nothing is on its way to this memory. */
        assert(cancel_coming == 0 && !ready_coming);
        retired = true
    :: else -> skip
    fi
}

/* owe() and owed_paid() */
inline owe() { owed++ }
inline owed_paid() {
    assert(owed > 0); /* paid once per debt: never a request owed nothing */
    owed--;
    retire_if_released()
}

/* end_wait_canceled() */
inline end_wait_canceled() {
    if
    :: waiting == W_NONE -> skip /* queued or running: its next call sees it */
    :: waiting == W_SLEEP -> make_ready(R_ECANCELED)
    :: waiting == W_PARK ->
#ifdef MUTANT_NO_RECHECK
        make_ready(R_ECANCELED)
#else
        atomic {
            word = PARKED;
            tso_cas(OWNER, PW, word, EMPTY, ok);
            if
            :: ok -> make_ready(R_ECANCELED)
            :: else -> skip /* a wake won: its result stands */
            fi;
            word = 0;
            ok = false
        }
#endif
    fi;
    /* Promptly: the wait is over now, or a wake's delivery is coming. */
    assert(waiting == W_NONE || ready_coming)
}

/* take_in_cancel(), after the request came off the inbox. */
inline take_in_cancel() {
    atomic {
        rmw_and(OWNER, CW, ALL_BUT_IN_FLIGHT, w);
        finished_seen = (w & FINISHED) != 0;
        w = 0
    };
    if
    :: finished_seen -> finished_seen = false; owed_paid() /* it finished
                                                 while the request travelled */
    :: else -> cancel_seen = true; end_wait_canceled()
    fi
}

/* take_in(), kind READY, after the request came off the inbox. */
inline take_in_ready() {
    if
    :: done -> owed_paid() /* abandoned while the wake travelled */
    :: else -> make_ready(R_OK)
    fi
}

/* The owner's coro_cancel(C) (coro__sched_cancel(), owner branch), or a
 * close's cancel_members(): mark_canceled(c, 0), end the wait directly. */
inline local_cancel() {
    local_cancel_done = true;
    tso_load(OWNER, CW, w);
    do
    :: (w & FINISHED) -> assert(false) /* C is alive here */
    :: (w & CANCELED) && !(w & FINISHED) -> cancel_seen = true; w = 0; break
    :: !(w & (CANCELED | FINISHED)) ->
        atomic {
            tso_cas(OWNER, CW, w, w | CANCELED, ok);
            if
            :: ok -> w = 0
            :: else -> skip /* w reloaded */
            fi
        };
        if
        :: ok -> ok = false; cancel_seen = true; end_wait_canceled(); break
        :: else -> skip
        fi
    od
}

/* The timer fires: fire_due_timers() and timeout_wins(). */
inline fire_timer() {
    timer_armed = false; /* off the heap: c->deadline = CORO_FOREVER */
    if
    :: waiting == W_SLEEP -> make_ready(R_OK)
    :: waiting == W_PARK ->
        atomic {
            word = PARKED;
            tso_cas(OWNER, PW, word, EMPTY, ok);
            if
            :: ok -> make_ready(R_ETIMEDOUT)
            :: else -> skip /* a wake won: its delivery is on the way */
            fi;
            word = 0;
            ok = false
        }
    fi
}

/* coro__is_canceled(self), in a blocking call or coro_canceled(): an
 * acquire load (a plain mov). Once the owner has set or taken in the flag,
 * it must see it. */
inline check_canceled(r) {
    atomic {
        tso_load(OWNER, CW, w);
        r = (w & CANCELED) != 0;
        assert(r || !cancel_seen);
        w = 0
    }
}

/* abandon_one(): C, suspended (waiting or queued), is given up on by the
 * shutdown: never resumed again. */
inline abandon_one() {
    timer_armed = false;
    if
    :: waiting == W_PARK ->
        atomic {
            word = PARKED;
            tso_cas(OWNER, PW, word, EMPTY, ok);
            if
            :: !ok -> assert(ready_coming); owe() /* a wake won */
            :: else -> skip
            fi;
            word = 0;
            ok = false
        }
    :: else -> skip
    fi;
    d_step { waiting = W_NONE; queued = false; pc = 0; i = 0 };
    atomic {
        rmw_or(OWNER, CW, FINISHED, w);
        if
        :: (w & IN_FLIGHT) -> owe() /* a cancel request is coming */
        :: else -> skip
        fi;
        w = 0;
        done = true
    };
    tso_store(OWNER, FIN, 1);
    retire_if_released()
}

/* ── The owner's thread: the pump, and C when the pump resumes it ─────── */

/* Where C is suspended, to go on from there when resumed. */
#define PC_START 0   /* not started */
#define PC_WAITED 1  /* in coro__wait(): a park or a sleep */
#define PC_YIELDED 2 /* in coro__refuse_canceled()'s yield */

/* The blocking call C makes. */
#define K_PARK 1
#define K_PARK_TIMED 2
#define K_SLEEP 3

active proctype owner() {
    /* C as its owner sees it (owner thread only: no store buffer needed). */
    byte waiting;       /* W_NONE, W_SLEEP or W_PARK */
    bool queued;        /* in the ready queue */
    bool timer_armed;   /* its wait has a deadline, the timer not fired yet */
    byte wait_result;
    bool done;          /* state DONE (finished or abandoned) */
    byte owed;          /* c->owed: requests still to come to a finished C */
    bool handle_held;   /* coro_destroy() not called yet */
    bool may_abandon;   /* this run may end C by abandon_one() */
    bool local_cancel_done; /* the owner's own coro_cancel (or close) ran */
    bool cancel_seen;   /* ghost: the owner set or took in CANCELED, C alive */
    byte pc;            /* where C is suspended: PC_* */
    byte i;             /* C's blocking calls so far */
    /* Scratch, cleared after use (fewer states). */
    int w, old, word;
    bool ok, canceled, finished_seen;
    byte rc, kind;

    handle_held = true;
    if :: may_abandon = true :: skip fi;
    queued = true; /* coro_spawn() queued C */
    pc = PC_START;

pump:
    /* The pump's turns while C is not running: take requests in, fire the
     * timer, run the owner's own cancel, maybe abandon C; resume C once it
     * is queued. Once C is done: take in what is still owed, coro_destroy()
     * once the other threads have given the handle back, and stop when
     * nothing is owed. With nothing to do it blocks (sleeps on its inbox):
     * if that lasts for ever, SPIN reports an invalid end state. */
    do
    :: !done && queued -> queued = false; break /* run_one(): resume C */
    :: d_step { /* the owner's locked exchange takes the request */
           mem[IN_CANCEL] == 1 -> tso_drain_all(OWNER); mem[IN_CANCEL] = 0;
           cancel_coming--
       };
       take_in_cancel()
    :: atomic {
           d_step {
               mem[IN_READY] == 1 -> tso_drain_all(OWNER); mem[IN_READY] = 0;
               ready_coming = false
           };
           take_in_ready()
       }
    :: !done && timer_armed -> fire_timer()
    :: !done && !local_cancel_done -> local_cancel()
    :: !done && may_abandon -> abandon_one()
    :: done && handle_held && returned == NCANCEL + 1 ->
        handle_held = false; /* coro__sched_destroy_coroutine() */
        retire_if_released()
    :: done && !handle_held && owed == 0 -> goto gone
    od;

    /* C runs again, from where it stopped. */
    if
    :: pc == PC_START -> skip
    :: pc == PC_YIELDED -> rc = R_ECANCELED; goto call_returned
    :: pc == PC_WAITED -> rc = wait_result; goto call_returned
    fi;

next_call:
    /* C's function: up to ROUNDS blocking calls, then it returns. */
    if
    :: i == ROUNDS -> goto finish
    :: else -> i++
    fi;
    check_canceled(canceled); /* coro_canceled(), for the assertion */
    canceled = false;
    if
    :: kind = K_PARK
    :: kind = K_PARK_TIMED
    :: kind = K_SLEEP
    fi;

    /* coro_park_until() / coro_sleep(): first the check. */
    check_canceled(canceled);
#ifdef MUTANT_NO_CHECK
    canceled = canceled && kind == K_SLEEP; /* only the park forgets it */
#endif
    if
    :: canceled -> /* coro__refuse_canceled(): yield once (the pump
                    * requeues it, others run), then ECANCELED. A permit
                    * stays for later. */
        d_step { canceled = false; kind = 0; queued = true; pc = PC_YIELDED };
        goto pump
    :: !canceled && kind == K_SLEEP -> /* coro__wait(): suspended */
        d_step {
            kind = 0;
            waiting = W_SLEEP;
            wait_result = R_OK;
            timer_armed = true;
            pc = PC_WAITED
        };
        goto pump
    :: !canceled && kind != K_SLEEP -> skip
    fi;
    /* coro_park_until(), not cancelled: take a permit, or park. */
    atomic {
        tso_xchg(OWNER, PW, EMPTY, old);
        assert(old != PARKED); /* no stale PARKED of an earlier park */
        ok = old == PERMIT;
        old = 0
    };
    if
    :: ok -> d_step { ok = false; kind = 0; rc = R_OK }; goto call_returned
    :: else -> skip
    fi;
    atomic {
        word = EMPTY;
        tso_cas(OWNER, PW, word, PARKED, ok);
        assert(ok || word == PERMIT); /* only a wake changes EMPTY */
        word = 0
    };
    if
    :: !ok ->
        /* A wake came in between: consume its permit, by an exchange. */
        atomic {
            tso_xchg(OWNER, PW, EMPTY, old);
            assert(old == PERMIT);
            old = 0;
            kind = 0;
            rc = R_OK
        };
        goto call_returned
    :: else ->
        /* coro__wait(): suspended, with a timer if it has a deadline. */
        d_step {
            ok = false;
            waiting = W_PARK;
            wait_result = R_OK;
            timer_armed = kind == K_PARK_TIMED;
            kind = 0;
            pc = PC_WAITED
        };
        goto pump
    fi;

call_returned:
    assert(rc != R_ECANCELED || (mem[CW] & CANCELED));
    if
    :: rc == R_ECANCELED -> rc = 0; goto finish /* C returns */
    :: else -> rc = 0; goto next_call
    fi;

finish:
    /* coroutine_main(): the function returned; cleanups; FINISHED. */
#ifdef MUTANT_PLAIN_FINISH
    tso_load(OWNER, CW, w);
    tso_store(OWNER, CW, w | FINISHED);
#else
    rmw_or(OWNER, CW, FINISHED, w);
#endif
    /* run_coroutine(), after the resume: C is done. */
    d_step { done = true; pc = 0; i = 0; w = 0 };
    tso_store(OWNER, FIN, 1); /* release store: a plain mov */
    atomic {
        tso_load(OWNER, CW, w);
#ifndef MUTANT_NO_IN_FLIGHT
        if
        :: (w & IN_FLIGHT) -> owe() /* its request is on the way */
        :: else -> skip
        fi;
#endif
        w = 0;
        retire_if_released() /* joinable: not before coro_destroy() */
    };
    goto pump;

gone:
    /* Nothing lost: every request pushed has been taken in. */
    assert(retired && mem[IN_CANCEL] == 0 && mem[IN_READY] == 0);
    assert(cancel_coming == 0 && !ready_coming)
}

/* ── Other threads ──────────────────────────────────────────────────── */

/* coro_cancel(C) from another thread: coro__sched_cancel(). Each locked
 * instruction is one step, together with the local decisions that follow
 * it (no other thread can see those). */
proctype canceller(byte t) {
    int word;
    byte rc;
    bool finished_before;

    /* mark_canceled(c, IN_FLIGHT): a relaxed load, then the CAS loop. The
     * ghost notes whether C had finished before this call began (FINISHED
     * is set by a locked instruction: memory is the truth). */
    d_step {
        finished_before = (mem[CW] & FINISHED) != 0;
        tso_load(t, CW, word)
    };
    do
    :: atomic {
        d_step {
            if
            :: (word & FINISHED) -> rc = R_EINVAL
            :: (word & CANCELED) && !(word & FINISHED) -> rc = R_ALREADY
            :: !(word & (CANCELED | FINISHED)) ->
                /* lock cmpxchg; the ghost notes the commitment */
                tso_drain_all(t);
                if
                :: mem[CW] == word ->
                    mem[CW] = word | CANCELED | IN_FLIGHT;
                    cancel_coming++;
                    rc = R_OK
                :: else -> word = mem[CW]; rc = R_RETRY /* reloaded */
                fi
            fi
        };
        if
        :: rc != R_RETRY -> break
        :: else -> skip
        fi
       }
    od;
    atomic {
        if
        :: rc == R_OK ->
            d_step { /* c->cancel_remote onto the inbox (a locked CAS) */
                tso_drain_all(t);
                assert(!retired);
                assert(mem[IN_CANCEL] == 0); /* a node is never in it twice */
                mem[IN_CANCEL] = 1
            }
        :: else -> skip /* already cancelled (0) or EINVAL: nothing sent */
        fi;
        /* After the finish: EINVAL, and nothing was touched. */
        assert(!finished_before || rc == R_EINVAL);
        assert(rc != R_EINVAL || (mem[CW] & FINISHED));
        /* Returned: the handle is given back. (Merging the push and the
         * return into one step loses no behaviour of the owner's: the
         * return only lets the owner call coro_destroy(), which it may
         * also put off.) Scratch cleared: fewer states. */
        returned++;
        word = 0;
        rc = 0;
        finished_before = false
    }
}

/* coro_wake(C) from another thread. */
active proctype waker() {
    int w;
    bool ok;
    byte i;

    for (i : 1 .. WAKES) {
        atomic {
            tso_load(WAKER, FIN, w);
            ok = w != 0; /* EINVAL: finished */
            w = 0
        };
        if
        :: ok -> ok = false
        :: else ->
            tso_load(WAKER, PW, w);
            do
            :: atomic {
                d_step { /* lock cmpxchg: PARKED -> EMPTY, else -> PERMIT */
                    tso_drain_all(WAKER);
                    if
                    :: mem[PW] == w ->
                        mem[PW] = (w == PARKED -> EMPTY : PERMIT);
                        ok = true;
                        if
                        :: w == PARKED -> assert(!ready_coming); ready_coming = true
                        :: else -> skip
                        fi
                    :: else -> w = mem[PW]; ok = false
                    fi
                };
                if
                :: ok -> break
                :: else -> skip
                fi
               }
            od;
            atomic {
                if
                :: w == PARKED ->
                    d_step { /* coro__deliver_ready(): push c->remote */
                        tso_drain_all(WAKER);
                        assert(!retired);
                        assert(mem[IN_READY] == 0);
                        mem[IN_READY] = 1
                    }
                :: else -> skip
                fi;
                w = 0;
                ok = false
            }
        fi
    };
    returned++
}

init {
    byte t;

    atomic {
        for (t : 0 .. NTHREADS - 1) {
            run tso_flusher(t)
        };
        for (t : 2 .. NTHREADS - 1) {
            run canceller(t)
        }
    }
}
