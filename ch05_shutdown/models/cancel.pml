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
 * Each atomic has the C11 order of the code (memory.pml): the model runs on
 * x86-TSO and on the weak model (-DMM_WEAK). A compare-exchange loop of
 * another thread (mark_canceled(), coro_wake(): compare_exchange_weak,
 * relaxed on failure) is an RMW that succeeds while the value it expects
 * is the newest, or a relaxed load that reloads it.
 *
 * With -DPUBLISH (one canceller, two wakes; the `cancel_publish` tests),
 * the model also carries the plain data the orders are there for: what
 * C writes last before it finishes (RESULT), what a canceller writes
 * before its coro_cancel() (REASON), and the fields of c->remote, which a
 * second wake writes again (RNODE).
 *
 * Abstracts:
 *   - The inbox is one word per embedded node (c->cancel_remote,
 *     c->remote): a push is a seq_cst RMW (the compare-exchange on the
 *     head), the owner's take an acquire RMW (the exchange). The owner
 *     takes requests in one at a time in any order: every order the real
 *     inbox can produce, and more. Its own sleep/wake protocol is not
 *     modelled here: the pump simply blocks until something is there.
 *   - The coroutine and the pump are one process (they share the owner's
 *     thread, its store buffer and its view): when C suspends, the process
 *     goes back to the pump's loop, which resumes C where it stopped (`pc`)
 *     once it is queued; so the pump takes requests in only between two
 *     resumes, exactly as in the code.
 *   - A deadline is "the timer may fire at any moment while armed". Event
 *     waits are not modelled (their race with a cancel is the event's lock,
 *     not an atomic). The memory itself is a flag, `retired`: recycling it
 *     is when coro__prepare() would clear the cancel word of a stranger.
 *   - The shutdown's abandon_one() may happen (in the runs where
 *     `may_abandon` is chosen) at any moment the pump runs, not only after
 *     a grace period.
 *
 * Proves, for every interleaving, on x86-TSO (every store-buffer drain
 * order) and on the weak model (every value C11 lets each load read):
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
 *   - a cancel that starts after the finish changes nothing (it pushes
 *     nothing and sets no bit), and on x86 returns EINVAL (on the weak
 *     model it may also say 0, cancelled already: see canceller());
 *   - with PUBLISH, what the orders publish: a waker that finds C
 *     finished (EINVAL) sees C's last writes (`finished`: release store,
 *     acquire load); a coroutine that sees CANCELED sees what the
 *     canceller wrote before its coro_cancel() (mark_canceled()'s CAS
 *     releases, coro__is_canceled() acquires); a wake that pushes
 *     c->remote again writes it only after the owner has read the last
 *     request in it (the park's EMPTY -> PARKED releases, the wake's CAS
 *     that reads PARKED acquires: the "acquire" comment of coro_wake()).
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
 * Each fails on x86-TSO and on the weak model. Weak mutants, with PUBLISH
 * (x86 runs each of them as the code: they pass on tso.pml):
 *   MUTANT_WEAK_MARK          mark_canceled()'s CAS is acquire, not
 *                             acq_rel: C sees CANCELED but not the
 *                             canceller's REASON.
 *   MUTANT_RELAXED_IS_CANCELED   coro__is_canceled() loads relaxed: the
 *                             same.
 *   MUTANT_RELAXED_FINISHED   run_coroutine() and abandon_one() store
 *                             `finished` relaxed: a waker gets EINVAL but
 *                             not C's RESULT.
 *   MUTANT_RELAXED_FINISHED_LOAD  coro_wake() loads `finished` relaxed:
 *                             the same.
 *   MUTANT_WAKE_NO_ACQUIRE    coro_wake()'s CAS is release, not acq_rel:
 *                             the second wake writes c->remote while the
 *                             owner may still be reading the first request
 *                             in it.
 *   MUTANT_PARK_NO_RELEASE    the park's EMPTY -> PARKED is acquire, not
 *                             acq_rel: the same.
 *
 * Orders of the code this model shows are not needed (each weakened to
 * relaxed, or its unneeded half dropped, both runs still pass on the weak
 * model):
 *   - coroutine_main()'s fetch_or of FINISHED (acq_rel) and
 *     abandon_one()'s (seq_cst): what makes the IN_FLIGHT handshake work
 *     is that it is one RMW (MUTANT_PLAIN_FINISH), not its order: a
 *     canceller's CAS comes before it in the word's order (its IN_FLIGHT
 *     is read back) or after (it fails); nobody acquires it (a failed
 *     CAS is relaxed), and the owner's own earlier cancel is its own
 *     thread's. Relaxed would do.
 *   - mark_canceled()'s acquire half: the canceller reads nothing after
 *     it that the owner published (its request's node is written after
 *     the CAS and published by the push).
 *   - run_coroutine()'s acquire load of IN_FLIGHT: it reads back the
 *     owner's own fetch_or (no other thread can change the word after
 *     FINISHED), so relaxed gives the same value.
 *   - take_in_cancel()'s seq_cst fetch_and: the request came through the
 *     inbox (acquire), and an RMW reads the newest value whatever its
 *     order.
 *   - the owner's acq_rel on PARKED -> EMPTY (end_wait_canceled(),
 *     timeout_wins(), abandon_one()): if it wins it read its own PARKED;
 *     if it loses, the wake's request comes through the inbox; and a wake
 *     that later reads its EMPTY only leaves a permit, whose consumer
 *     acquires the wake's own release (park.pml).
 */
#ifdef PUBLISH /* one canceller is enough; two wakes reuse c->remote */
#ifndef NCANCEL
#define NCANCEL 1
#endif
#ifndef WAKES
#define WAKES 2
#endif
#endif
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
/* With PUBLISH, plain data, written before a release and read after the
 * acquire that must carry it (what the orders are for): */
#define RESULT 5    /* what C wrote last (its result, its cleanups' work) */
#define REASON 6    /* what a canceller wrote before its coro_cancel() */
#define RNODE 7     /* c->remote's fields: 1 written by the waker, 0 once
                       the owner has read them */
#ifdef PUBLISH
#define NWORDS 8
#else
#define NWORDS 5
#endif

#include "memory.pml"

/* The orders of the code; each weak mutant weakens one. */
#ifdef MUTANT_WEAK_MARK
#define MARK_ORDER MM_ACQ    /* mark_canceled()'s CAS without its release */
#else
#define MARK_ORDER MM_ACQ_REL
#endif
#ifdef MUTANT_RELAXED_IS_CANCELED
#define IS_CANCELED_ORDER MM_RLX
#else
#define IS_CANCELED_ORDER MM_ACQ /* coro__is_canceled() */
#endif
#ifdef MUTANT_RELAXED_FINISHED
#define FINISHED_STORE MM_RLX
#else
#define FINISHED_STORE MM_REL /* run_coroutine(), abandon_one() */
#endif
#ifdef MUTANT_RELAXED_FINISHED_LOAD
#define FINISHED_LOAD MM_RLX
#else
#define FINISHED_LOAD MM_ACQ  /* coro_wake() */
#endif
#ifndef FINISH_ORDER
#define FINISH_ORDER MM_ACQ_REL /* coroutine_main()'s fetch_or */
#endif
#ifdef MUTANT_WAKE_NO_ACQUIRE
#define WAKE_ORDER MM_REL     /* coro_wake()'s CAS without its acquire */
#else
#define WAKE_ORDER MM_ACQ_REL
#endif
#ifdef MUTANT_PARK_NO_RELEASE
#define PARK_ORDER MM_ACQ     /* the park's EMPTY -> PARKED without release */
#else
#define PARK_ORDER MM_ACQ_REL
#endif

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

/* PUBLISH: thread t writes data word d (relaxed) ... */
inline publish(t, d) {
#ifdef PUBLISH
    mm_store(t, d, 1, MM_RLX)
#else
    skip
#endif
}

/* ... and a thread that must see it reads it (relaxed, into `r`): the
 * order that carries it lets it read nothing older. */
inline must_see(t, d, r) {
#ifdef PUBLISH
    mm_load(t, d, r, MM_RLX);
    assert(r == 1);
    r = 0
#else
    skip
#endif
}

/* ── Owner-side steps ───────────────────────────────────────────────── */

/* How steps are grouped, here and in the other threads: each atomic
 * access is one step, together with the local work that follows it (an
 * `atomic` block) where memory.pml allows (a load or a compare-exchange
 * must end its atomic block: the local work after it is a step of its
 * own). No other thread can see local work, so the grouping loses no
 * interleaving; it only spares states. */

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

/* The owner's compare-exchange PARKED -> EMPTY on the park word (acq_rel,
 * failure acquire): end_wait_canceled(), timeout_wins(), abandon_one().
 * ok: it won, the park is ended here; else a wake won. */
inline end_park(ok) {
    word = PARKED;
    mm_cas(OWNER, PW, word, EMPTY, ok, MM_ACQ_REL);
    word = 0
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
        end_park(ok);
        if
        :: ok -> ok = false; make_ready(R_ECANCELED)
        :: else -> skip /* a wake won: its result stands */
        fi
#endif
    fi;
    /* Promptly: the wait is over now, or a wake's delivery is coming. */
    assert(waiting == W_NONE || ready_coming)
}

/* take_in_cancel(), after the request came off the inbox: fetch_and
 * (seq_cst). */
inline take_in_cancel() {
    atomic {
        mm_rmw(OWNER, CW, w, w & ALL_BUT_IN_FLIGHT, MM_SC);
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
 * close's cancel_members(): mark_canceled(c, 0), end the wait directly.
 * The owner writes its reason first, as a canceller does. */
inline local_cancel() {
    local_cancel_done = true;
    publish(OWNER, REASON);
    mm_load(OWNER, CW, w, MM_RLX);
    do
    :: (w & FINISHED) -> assert(false) /* C is alive here */
    :: (w & CANCELED) && !(w & FINISHED) -> cancel_seen = true; w = 0; break
    :: !(w & (CANCELED | FINISHED)) ->
        mm_cas(OWNER, CW, w, w | CANCELED, ok, MARK_ORDER); /* w reloaded
                                                             if it fails */
        if
        :: ok -> d_step { ok = false; w = 0; cancel_seen = true };
            end_wait_canceled(); break
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
        end_park(ok);
        if
        :: ok -> ok = false; make_ready(R_ETIMEDOUT)
        :: else -> skip /* a wake won: its delivery is on the way */
        fi
    fi
}

/* coro__is_canceled(self), in a blocking call or coro_canceled(): an
 * acquire load. Once the owner has set or taken in the flag, it must see
 * it; and once it sees it, it sees what the canceller wrote before its
 * coro_cancel() (the CAS's release). */
inline check_canceled(r) {
    mm_load(OWNER, CW, w, IS_CANCELED_ORDER);
    r = (w & CANCELED) != 0;
    assert(r || !cancel_seen);
    if
    :: r -> must_see(OWNER, REASON, w)
    :: else -> skip
    fi;
    w = 0
}

/* abandon_one(): C, suspended (waiting or queued), is given up on by the
 * shutdown: never resumed again. */
inline abandon_one() {
    timer_armed = false;
    if
    :: waiting == W_PARK ->
        end_park(ok);
        if
        :: !ok -> assert(ready_coming); owe() /* a wake won */
        :: else -> ok = false
        fi
    :: else -> skip
    fi;
    d_step { waiting = W_NONE; queued = false; pc = 0; i = 0 };
    publish(OWNER, RESULT); /* its cleanups run */
    atomic {
        mm_rmw(OWNER, CW, w, w | FINISHED, MM_SC); /* atomic_fetch_or */
        if
        :: (w & IN_FLIGHT) -> owe() /* a cancel request is coming */
        :: else -> skip
        fi;
        w = 0;
        done = true
    };
    mm_store(OWNER, FIN, 1, FINISHED_STORE);
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
    /* C as its owner sees it (owner thread only: no atomics needed). */
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
    :: atomic { /* the owner's exchange on the inbox (acquire) takes it */
           mm_await_rmw(OWNER, IN_CANCEL, mem[IN_CANCEL] == 1, old, 0, MM_ACQ);
           old = 0;
           cancel_coming--
       };
       take_in_cancel()
    :: atomic {
           mm_await_rmw(OWNER, IN_READY, mem[IN_READY] == 1, old, 0, MM_ACQ);
           old = 0;
           ready_coming = false
       };
       /* PUBLISH: take_in() reads c->remote's fields (the push carried
        * them), then is done with them. */
       must_see(OWNER, RNODE, w);
#ifdef PUBLISH
       mm_store(OWNER, RNODE, 0, MM_RLX);
#endif
       take_in_ready()
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
    /* coro_park_until(), not cancelled: take a permit (exchange, acquire),
     * or park. */
    atomic {
        mm_xchg(OWNER, PW, EMPTY, old, MM_ACQ);
        assert(old != PARKED); /* no stale PARKED of an earlier park */
        ok = old == PERMIT;
        old = 0
    };
    if
    :: ok -> d_step { ok = false; kind = 0; rc = R_OK }; goto call_returned
    :: else -> skip
    fi;
    word = EMPTY;
    mm_cas(OWNER, PW, word, PARKED, ok, PARK_ORDER); /* EMPTY -> PARKED */
    assert(ok || word == PERMIT); /* only a wake changes EMPTY */
    word = 0;
    if
    :: !ok ->
        /* A wake came in between: consume its permit, by an exchange. */
        atomic {
            mm_xchg(OWNER, PW, EMPTY, old, MM_ACQ);
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
    /* coroutine_main(): the function returned (its result, its cleanups:
     * plain writes); then FINISHED. */
    publish(OWNER, RESULT);
#ifdef MUTANT_PLAIN_FINISH
    mm_load(OWNER, CW, w, MM_RLX);
    mm_store(OWNER, CW, w | FINISHED, MM_RLX);
#else
    mm_rmw(OWNER, CW, w, w | FINISHED, FINISH_ORDER);
#endif
    /* run_coroutine(), after the resume: C is done. `finished` with
     * release, then the cancel word (acquire) for IN_FLIGHT. */
    d_step { done = true; pc = 0; i = 0; w = 0 };
    mm_store(OWNER, FIN, 1, FINISHED_STORE);
    mm_load(OWNER, CW, w, MM_ACQ);
#ifndef MUTANT_NO_IN_FLIGHT
    if
    :: (w & IN_FLIGHT) -> owe() /* its request is on the way */
    :: else -> skip
    fi;
#endif
    w = 0;
    retire_if_released(); /* joinable: not before coro_destroy() */
    goto pump;

gone:
    /* Nothing lost: every request pushed has been taken in. */
    assert(retired && mem[IN_CANCEL] == 0 && mem[IN_READY] == 0);
    assert(cancel_coming == 0 && !ready_coming)
}

/* ── Other threads ──────────────────────────────────────────────────── */

/* coro_cancel(C) from another thread: coro__sched_cancel(). */
proctype canceller(byte t) {
    int word, old;
    byte rc;
    bool finished_before;

    /* The canceller's own reason to cancel, written before the call: the
     * coroutine that sees CANCELED must see it. */
    publish(t, REASON);
    /* mark_canceled(c, IN_FLIGHT): a relaxed load, then the CAS loop. The
     * ghost notes whether C had finished before this call began (FINISHED
     * is set by an RMW: the newest value is the truth). */
    atomic {
        finished_before = (mem[CW] & FINISHED) != 0;
        mm_load(t, CW, word, MM_RLX)
    };
    do
    :: (word & FINISHED) -> rc = R_EINVAL; break
    :: (word & CANCELED) && !(word & FINISHED) -> rc = R_ALREADY; break
    :: !(word & (CANCELED | FINISHED)) ->
        /* compare_exchange_weak (acq_rel; relaxed on failure): it succeeds
         * if `word` is still the newest value — the ghost notes the
         * commitment in the same step — or fails (also spuriously) and
         * reloads `word`. */
        if
        :: atomic {
               mm_await_rmw(t, CW, mem[CW] == word, old,
                            old | CANCELED | IN_FLIGHT, MARK_ORDER);
               cancel_coming++;
               old = 0;
               rc = R_OK
           };
           break
        :: atomic { mem[CW] != word -> mm_load(t, CW, word, MM_RLX) }
        fi
    od;
    if
    :: rc == R_OK ->
        atomic { /* c->cancel_remote onto the inbox (a seq_cst CAS) */
            assert(!retired);
            mm_rmw(t, IN_CANCEL, old, 1, MM_SC);
            assert(old == 0); /* a node is never in it twice */
            old = 0
        }
    :: else -> skip /* already cancelled (0) or EINVAL: nothing sent */
    fi;
    /* After the finish: nothing was touched. On x86 FINISHED, set by a
     * locked instruction, is in memory for every later load, so the call
     * says EINVAL; C11 promises that only to a cancel that happens after
     * the finish, and a relaxed load may still read the word from before
     * it, find CANCELED and say 0 (cancelled already). */
#ifdef MM_WEAK
    assert(!finished_before || rc != R_OK);
#else
    assert(!finished_before || rc == R_EINVAL);
#endif
    assert(rc != R_EINVAL || (mem[CW] & FINISHED));
    /* Returned: the handle is given back. Scratch cleared: fewer
     * states. */
    d_step {
        returned++;
        word = 0;
        rc = 0;
        finished_before = false
    }
}

/* coro_wake(C) from another thread. */
active proctype waker() {
    int w, old;
    bool ok;
    byte i;

    for (i : 1 .. WAKES) {
        mm_load(WAKER, FIN, w, FINISHED_LOAD);
        if
        :: w != 0 -> /* EINVAL: finished; and C's last writes are seen */
            must_see(WAKER, RESULT, w);
            w = 0
        :: else ->
            mm_load(WAKER, PW, w, MM_RLX);
            do
            :: /* compare_exchange_weak: PARKED -> EMPTY, else -> PERMIT
                * (acq_rel; relaxed on failure, which reloads w) */
               atomic {
                   mm_await_rmw(WAKER, PW, mem[PW] == w, old,
                                (w == PARKED -> EMPTY : PERMIT), WAKE_ORDER);
                   old = 0;
                   if
                   :: w == PARKED -> assert(!ready_coming); ready_coming = true
                   :: else -> skip
                   fi
               };
               break
            :: atomic { mem[PW] != w -> mm_load(WAKER, PW, w, MM_RLX) }
            od;
            if
            :: w == PARKED ->
#ifdef PUBLISH
                /* c->remote is written again: the owner must be done
                 * with its last request (it has read its fields), which
                 * the CAS's acquire of the park's PARKED (release) gives. */
                mm_load(WAKER, RNODE, old, MM_RLX);
                assert(old == 0);
                mm_store(WAKER, RNODE, 1, MM_RLX);
#endif
                atomic { /* coro__deliver_ready(): push c->remote */
                    assert(!retired);
                    mm_rmw(WAKER, IN_READY, old, 1, MM_SC);
                    assert(old == 0);
                    old = 0
                }
            :: else -> skip
            fi;
            w = 0
        fi
    };
    returned++
}

init {
    byte t;

    atomic {
        for (t : 0 .. NTHREADS - 1) {
            run mm_flusher(t)
        };
        for (t : 2 .. NTHREADS - 1) {
            run canceller(t)
        }
    }
}
