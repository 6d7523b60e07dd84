/*
 * signal.pml — the signal registry: a signal closes the schedulers
 * registered for it, and a handler never touches one already freed
 * (signal.c, and the pump's side in shutdown.c and inbox.c).
 *
 * Models:
 *   signal.c:coro_sched_close_on_signal()  under registry_lock: a free
 *                slot, the scheduler stored first, then the signal number
 *                that makes the handler look at it (both seq_cst);
 *   signal.c:close_registered()  the handler: handlers_running++, for the
 *                slot: signo? then sched, coro__sched_close_async(s),
 *                handlers_running--;
 *   shutdown.c:coro__sched_close_async()  closed = true (seq_cst), the
 *                exchange on close_sent, the push of the embedded close
 *                request;
 *   inbox.c:coro__inbox_push()  the compare-exchange on the head, then
 *                the owner's wake: sleeping? exchange it, wake_seq++,
 *                futex_wake;
 *   sched.c:coro_sched_poll_until()  the owner's pump, called in the
 *                application's loop `while (!stats.closed)
 *                { coro_sched_poll_for(s, long); coro_sched_stats(); }`
 *                (examples/http_server.c) with no coroutine alive:
 *                close_arrived = false; run_ready() (drain the inbox;
 *                nothing runs); if nothing ran and no close arrived, wait
 *                with the deadline, then run_ready() again; return;
 *   remote.c:take_in() of CORO_REMOTE_CLOSE, shutdown.c:
 *                coro__take_in_close()  close_arrived = true (owner only),
 *                cancel_members() (nobody to cancel here);
 *   inbox.c:coro__inbox_take(), coro__inbox_wait()  take the inbox (an
 *                acquire exchange); or wake_seq read, sleeping = 1
 *                (seq_cst), inbox empty? futex_wait(wake_seq, seen),
 *                sleeping = 0;
 *   signal.c:coro__signal_forget() from sched.c:coro_sched_destroy()
 *                under the lock: clear the slot (signo first, seq_cst),
 *                registered--; then wait until handlers_running is 0;
 *                then the scheduler is freed.
 *
 * The threads: OWNER creates scheduler S, registers it for signal A,
 * polls until it sees S closed (or does not wait for it: the program
 * ends without a signal), and destroys S. OTHER is another
 * thread; in some runs ("reuse" runs) it registers a second scheduler S2
 * for signal B, at any moment after S was registered (it gets the slot if
 * S has left it). THIRD is any other thread of the process. Signal A is
 * delivered at any moment (and when the owner waits for it, surely, some
 * time after the registration), on OWNER, THIRD or, in reuse runs, OTHER;
 * except in reuse runs, a second delivery may come at any moment too, on
 * THIRD (OTHER does nothing then, so THIRD stands for it; keeping the
 * second one to one thread keeps the search to seconds). A handler
 * interrupts its thread: that thread's process does not move while the
 * handler runs (the `provided` clauses), and the handler uses that
 * thread's store buffer and view (it sees the thread's own stores). A signal
 * is blocked in its own handler, so two handlers never run on the same
 * thread at once.
 *
 * Abstracts:
 *   - The registry has one slot: the handler looks at each of the 64 in
 *     the same way, one after the other, and a freed slot is reused by
 *     the next registration (find_slot() takes the first free one).
 *   - The users[] count and sigaction() calls (under the lock, never seen
 *     by the handler), errno saving, the close request's fields (written
 *     before the compare-exchange that publishes it) and the futex_wake
 *     itself: futex_wait(wake_seq, seen) is "block until wake_seq !=
 *     seen", which is what the kernel's check and wake give (without the
 *     spurious returns, which only cost one more look).
 *   - registry_lock is a word: taking it is an acquire RMW, giving it
 *     back a release RMW (glibc's unlock is an exchange; on x86 both
 *     drain the store buffer). In this model only the close request is
 *     ever pushed.
 *   - The poll's deadline never comes: a poll that sleeps until it, with
 *     no wake on its way, is an invalid end state (the owner asleep for
 *     good). Timers, the spin before the sleep and the wait hook are left
 *     out (inbox.pml and inbox_hook.pml have the wait).
 *   - Each atomic has the C11 order of the code (memory.pml): the model
 *     runs on x86-TSO and on the weak model (-DMM_WEAK).
 *   - Touching S: a handler holds S from the moment it has read the
 *     pointer out of the slot until its compare-exchange has pushed the
 *     request (after it, only the inbox's wake cell is touched, and cells
 *     are never freed, see inbox.c). The free asserts that no handler
 *     holds S, and a handler asserts S is not freed when it starts to
 *     hold it; and that every handler's touch of S happens before the
 *     free (the freeing thread's relaxed loads of S's words read their
 *     newest values: a touch not ordered before the free would leave an
 *     older one readable — on the weak model; x86 orders them anyway).
 *
 * Proves, for every interleaving and every moment of delivery on each
 * thread above, on x86-TSO (every store-buffer drain order) and on the
 * weak model (every value C11 lets each load read):
 *   - no use of a freed scheduler: once coro__signal_forget() has
 *     returned and S is freed, no handler holds S or starts to;
 *   - a signal delivered while S is registered closes it: a handler that
 *     runs entirely between the registration's return and the start of
 *     the destroy leaves closed = true and the close request sent;
 *   - its pump is woken and sees it: the poll loop always ends, having
 *     seen S closed (a missed wake is an invalid end state: the owner
 *     asleep in futex_wait for good) — also when the handler interrupts
 *     the pump's own thread between its look at the inbox and its
 *     futex_wait;
 *   - a close does not wait for the deadline: a poll that
 *     takes the close request in returns without sleeping, so after the
 *     push the current poll (woken by the push, or returning after its
 *     first drain took it) or the next one returns, and the loop sees S
 *     closed; with a deadline that never comes, any poll that slept past
 *     the close would sleep for good;
 *   - the destroy never waits forever for handlers_running;
 *   - a handler for A closes only a scheduler registered for A (never S2,
 *     registered for B in the slot S has just left).
 *
 * The last property once failed (MUTANT_SLOT_REUSE is that code): this
 * model found it, and coro__signal_forget() now waits for the handlers
 * before it releases the lock.
 *
 * Mutants (each must fail):
 *   MUTANT_NO_WAIT       coro__signal_forget() does not wait for
 *                        handlers_running: a handler that read the slot
 *                        before it was cleared still closes S after it is
 *                        freed.
 *   MUTANT_LATE_COUNT    the handler counts itself in handlers_running
 *                        after reading the slot: the forget clears the
 *                        slot, sees 0 and frees S between the handler's
 *                        read and its count.
 *   MUTANT_PLAIN_COUNT   the handler counts itself with a plain store
 *                        (handlers_running = handlers_running + 1,
 *                        relaxed or release), not a locked add: the store
 *                        waits in the interrupted thread's buffer while the
 *                        handler reads the slot, and the forget, having
 *                        cleared it, reads 0 and frees S under the handler.
 *                        (SPIN may report first the other way it fails:
 *                        two handlers lose an increment, the count ends at
 *                        -1 and the destroy waits forever.)
 *   MUTANT_SLOT_REUSE    the code before the fix: the forget waits for the
 *                        handlers after releasing registry_lock. Another
 *                        thread may then register S2 for signal B in the
 *                        slot just cleared while a handler for A that read
 *                        signo == A before the clear reads the slot's
 *                        sched after the reuse: it closes S2, which never
 *                        asked for A. (No scheduler is freed under it —
 *                        S2's own destroy would wait for the handler — but
 *                        the wrong scheduler is closed.)
 *   MUTANT_LATE_CLOSE    coro_sched_poll_until() as it first shipped: it
 *                        sleeps whenever nothing ran. The signal
 *                        comes before the poll's first drain, the drain
 *                        takes the close in (nothing becomes ready), and
 *                        the poll sleeps until its deadline with S closed
 *                        already: here, for good.
 * Each fails on x86-TSO and on the weak model. Weak mutants (x86 runs
 * each of them as the code):
 *   MUTANT_RELEASE_SIGNO      the registration stores signo with release,
 *                             not seq_cst: a handler that runs after the
 *                             registration returned may still read the
 *                             slot free (it has no happens-before with the
 *                             registration: only the single order of
 *                             seq_cst puts it after), and S is not closed.
 *   MUTANT_ACQUIRE_SIGNO_LOAD the handler loads signo with acquire: the
 *                             same, and the store-buffering pair with the
 *                             forget breaks (below).
 *   MUTANT_ACQ_REL_COUNT      the handler's handlers_running++ is acq_rel,
 *                             not seq_cst: it and the forget's clear (then
 *                             its load of handlers_running) are a
 *                             store-buffering pair; the forget reads 0
 *                             while the handler reads the old slot, and S
 *                             is freed under it.
 *   MUTANT_RELEASE_CLEAR      the forget's clear of signo is release: the
 *                             same pair, from the other side (SPIN shows
 *                             it as the slot's reuse: S2 closed by A).
 *   MUTANT_ACQUIRE_RUNNING    the forget's load of handlers_running is
 *                             acquire: the same pair again.
 *   MUTANT_RELAXED_LEAVE      the handler's handlers_running-- is relaxed:
 *                             the forget reads 0 without the handler's
 *                             touches of S happening before the free.
 *
 * Orders of the code this model shows are not needed (each weakened to
 * relaxed, the search still passes on the weak model):
 *   - the seq_cst of the slot's `sched` (the registration's and the
 *     forget's stores, the handler's load): the store of signo after it
 *     (seq_cst, so release), and the handler's load of signo before its
 *     load of sched (seq_cst, so acquire), order it;
 *   - the `registered` count and the loads of the slot under the lock:
 *     the lock orders them (the count is only the forget's fast path, and
 *     only the registering thread's own, or the user's hand-over, makes a
 *     slot S's);
 *   - coro__sched_close_async()'s seq_cst store of `closed` and exchange
 *     on close_sent: the push after them (a seq_cst CAS, so a release)
 *     carries them to the pump's take (acquire); the exchange needs only
 *     to be one RMW, so that exactly one handler pushes;
 *   - the seq_cst of the handler's handlers_running-- : release would do
 *     (the forget's seq_cst load acquires it; the store-buffering pair is
 *     the count in, not the count out).
 * The inbox's own orders (the push, sleeping, wake_seq) are inbox.pml's.
 */
#define NTHREADS 3
#define OWNER 0
#define OTHER 1
#define THIRD 2 /* any other thread of the process: it does nothing here */

#define SLOT_SIGNO 0  /* registry[0].signo */
#define SLOT_SCHED 1  /* registry[0].sched */
#define REGISTERED 2  /* registered */
#define RUNNING 3     /* handlers_running */
#define CLOSED 4      /* S->closed */
#define CLOSE_SENT 5  /* S->close_sent */
#define HEAD 6        /* S->inbox.head: 1 = the close request is in it */
#define SLEEPING 7    /* S's wake cell: sleeping */
#define WAKE_SEQ 8    /* S's wake cell: wake_seq, the futex word */
#define LOCK 9        /* registry_lock: 0 free, else thread + 1 */
#define NWORDS 10

#include "memory.pml"

/* The orders of signal.c; each weak mutant weakens one. */
#ifdef MUTANT_RELEASE_SIGNO
#define SIGNO_STORE MM_REL   /* the registration's store of signo */
#else
#define SIGNO_STORE MM_SC
#endif
#ifdef MUTANT_ACQUIRE_SIGNO_LOAD
#define SIGNO_LOAD MM_ACQ    /* the handler's load of signo */
#else
#define SIGNO_LOAD MM_SC
#endif
#ifdef MUTANT_ACQ_REL_COUNT
#define COUNT_ORDER MM_ACQ_REL /* the handler's handlers_running++ */
#else
#define COUNT_ORDER MM_SC
#endif
#ifdef MUTANT_RELAXED_LEAVE
#define LEAVE_ORDER MM_RLX   /* the handler's handlers_running-- */
#else
#define LEAVE_ORDER MM_SC
#endif
#ifdef MUTANT_RELEASE_CLEAR
#define CLEAR_ORDER MM_REL   /* the forget's store of signo = 0 */
#else
#define CLEAR_ORDER MM_SC
#endif
#ifdef MUTANT_ACQUIRE_RUNNING
#define RUNNING_LOOK MM_ACQ  /* the forget's load of handlers_running */
#else
#define RUNNING_LOOK MM_SC
#endif

#define SIG_A 1
#define SIG_B 2
#define S 1  /* the scheduler pointers: 0 is NULL */
#define S2 2

bool wait_mode;         /* the owner pumps until it sees S closed */
bool reuse_mode;        /* OTHER registers S2 for signal B */
bool in_handler[NTHREADS]; /* a handler interrupts this thread */

/* Ghosts for the checks. */
bool registered_window; /* S's registration has returned, its destroy
                           has not started */
bool s_registered_once;
bool freed;             /* S is freed */
byte holders;           /* handlers holding S (read out of the slot) */

/* registry_lock: taking it is an acquire RMW, giving it back a release
 * RMW (glibc's unlock is an exchange). */
inline lock_take(t) {
    mm_await_rmw(t, LOCK, mem[LOCK] == 0, lk, t + 1, MM_ACQ);
    lk = 0
}
inline lock_release(t) {
    mm_xchg(t, LOCK, 0, lk, MM_REL);
    lk = 0
}

/* close_registered(), the handler, on thread t. */
inline handler_body(t) {
#if defined(MUTANT_PLAIN_COUNT)
    mm_load(t, RUNNING, old, MM_RLX);
    mm_store(t, RUNNING, old + 1, MM_RLX);
#elif !defined(MUTANT_LATE_COUNT)
    mm_fetch_add(t, RUNNING, 1, old, COUNT_ORDER);
#endif
    /* seq_cst, against the forget's seq_cst clear then look at
     * handlers_running: either the forget sees this handler counted, or
     * this handler reads the cleared slot. */
    mm_load(t, SLOT_SIGNO, v, SIGNO_LOAD);
    if
    :: v == SIG_A -> mm_load(t, SLOT_SCHED, sp, MM_SC)
    :: else -> sp = 0
    fi;
#ifdef MUTANT_LATE_COUNT
    mm_fetch_add(t, RUNNING, 1, old, COUNT_ORDER);
#endif
    if
    :: sp != 0 ->
        assert(sp == S); /* S2 is registered for signal B only */
        d_step { assert(!freed); holders++ }
        /* coro__sched_close_async(s) */
        mm_store(t, CLOSED, 1, MM_SC);
        mm_xchg(t, CLOSE_SENT, 1, old, MM_SC);
        if
        :: old == 0 ->
            /* coro__inbox_push(): the cell's address is read first; the
             * head (relaxed: only this request is ever pushed here, so it
             * is 0), then the compare-exchange, seq_cst */
            mm_load(t, HEAD, v, MM_RLX);
            mm_cas(t, HEAD, v, 1, ok, MM_SC);
            assert(ok);
            holders--; /* from here on only the wake cell */
            mm_load(t, SLEEPING, v, MM_SC);
            if
            :: v != 0 ->
                mm_xchg(t, SLEEPING, 0, old, MM_SC);
                if
                :: old != 0 -> /* wake_seq++ (release), futex_wake */
                    mm_fetch_add(t, WAKE_SEQ, 1, old, MM_REL)
                :: else -> skip
                fi
            :: else -> skip
            fi
        :: else -> holders-- /* sent already: nothing more to do with s */
        fi
    :: else -> skip
    fi;
    mm_fetch_add(t, RUNNING, -1, old, LEAVE_ORDER)
}

/* One delivery of signal A, or none unless `must` (then it comes after
 * S's registration). `first`: the first of the two deliveries, on any of
 * the threads; the second only on THIRD, and not in reuse runs. */
proctype signal_a(bool first; bool must) {
    int v, old;
    byte sp, t;
    bool ok, in_window;

    if
    :: !must -> goto done /* this one is never delivered */
    :: d_step {
           first && (!must || s_registered_once) && !in_handler[OWNER] ->
           in_handler[OWNER] = true; t = OWNER; in_window = registered_window
       }
    :: d_step {
           first && reuse_mode && (!must || s_registered_once) && !in_handler[OTHER] ->
           in_handler[OTHER] = true; t = OTHER; in_window = registered_window
       }
    :: d_step {
           (first || !reuse_mode) && (!must || s_registered_once) && !in_handler[THIRD] ->
           in_handler[THIRD] = true; t = THIRD; in_window = registered_window
       }
    fi;
    handler_body(t);
    d_step {
        /* Ran entirely while S was registered: S is closed, its close
         * request sent (by this handler or the other one). */
        assert(!(in_window && registered_window) ||
               (mem[CLOSED] == 1 && mem[CLOSE_SENT] == 1));
        in_handler[t] = false
    }
done:
    skip
}

/* The owner's drain of the inbox (run_ready()'s coro__drain_inbox():
 * coro__inbox_take(), an acquire exchange). If the close request is in
 * it, take_in() runs coro__take_in_close(): close_arrived = true, and
 * cancel_members() (no coroutine is alive here: nothing becomes ready). */
inline drain() {
    mm_xchg(OWNER, HEAD, 0, v, MM_ACQ);
    if
    :: v != 0 -> close_arrived = true
    :: else -> skip
    fi;
    v = 0
}

/* Whether coro_sched_poll_until() sleeps once its first run_ready() ran
 * nothing. */
#ifdef MUTANT_LATE_CLOSE
#define POLL_SLEEPS true /* the code before the fix: whenever nothing ran */
#else
#define POLL_SLEEPS (!close_arrived)
#endif

/* coro__inbox_wait(), with a deadline that never comes: only a wake ends
 * the futex_wait. */
inline inbox_wait() {
    mm_load(OWNER, WAKE_SEQ, seen, MM_ACQ);
    mm_store(OWNER, SLEEPING, 1, MM_SC);
    mm_load(OWNER, HEAD, v, MM_SC);
    if
    :: v == 0 -> (mem[WAKE_SEQ] != seen) /* futex_wait: the kernel's compare */
    :: else -> skip
    fi;
    mm_store(OWNER, SLEEPING, 0, MM_RLX);
    v = 0;
    seen = 0
}

proctype owner() provided (!in_handler[OWNER]) {
    int v, seen, lk;
    byte sp;
    bool close_arrived; /* s->close_arrived: owner only */

    /* coro_sched_close_on_signal(S, SIG_A): the slot is free (OTHER
     * registers only after this). The scheduler first, then the signal
     * number that makes the handler look at the slot (seq_cst both). */
    lock_take(OWNER);
    mm_store(OWNER, SLOT_SCHED, S, MM_SC);
    mm_store(OWNER, SLOT_SIGNO, SIG_A, SIGNO_STORE);
    mm_fetch_add(OWNER, REGISTERED, 1, v, MM_SC);
    lock_release(OWNER);
    d_step { registered_window = true; s_registered_once = true; v = 0 }

    if
    :: wait_mode ->
        /* The application's loop, as examples/http_server.c's:
         *   while (!stats.closed) { coro_sched_poll_for(s, long);
         *                           coro_sched_stats(s, &stats); }
         * with no coroutine alive. The deadline never comes: a poll that
         * sleeps until it is an invalid end state. */
        do
        :: /* coro_sched_poll_until() */
           close_arrived = false;
           drain(); /* run_ready(): ran == 0 */
           if
           :: POLL_SLEEPS -> inbox_wait(); drain()
           :: else -> skip /* a close came in: return at once */
           fi;
           close_arrived = false;
           /* coro_sched_stats(): stats.closed = coro__is_closed(s) */
           mm_load(OWNER, CLOSED, v, MM_SC);
           if
           :: v != 0 -> v = 0; break
           :: else -> skip
           fi
        od
    :: else -> skip
    fi;

    /* coro_sched_destroy(S) -> coro__signal_forget(S) */
    registered_window = false;
    mm_load(OWNER, REGISTERED, v, MM_SC);
    if
    :: v != 0 ->
        lock_take(OWNER);
        mm_load(OWNER, SLOT_SIGNO, v, MM_SC);
        mm_load(OWNER, SLOT_SCHED, sp, MM_SC);
        if
        :: v != 0 && sp == S ->
            mm_store(OWNER, SLOT_SIGNO, 0, CLEAR_ORDER);
            mm_store(OWNER, SLOT_SCHED, 0, MM_SC);
            mm_fetch_add(OWNER, REGISTERED, -1, v, MM_SC)
        :: else -> skip
        fi;
        v = 0;
        sp = 0;
#if !defined(MUTANT_NO_WAIT) && !defined(MUTANT_SLOT_REUSE)
        /* Wait for the handlers before releasing the lock, so that no
         * registration reuses the slot while a handler that read it before
         * the clear still runs. A load (seq_cst: the other side of the
         * handler's count then look); while it reads a count, the thread
         * yields until the count has changed. */
        do
        :: mm_load(OWNER, RUNNING, v, RUNNING_LOOK);
           if
           :: v == 0 -> break
           :: else -> (mem[RUNNING] == 0) /* sched_yield() meanwhile */
           fi
        od;
#endif
        lock_release(OWNER)
#ifdef MUTANT_SLOT_REUSE
        ;
        do /* the old code: after the release */
        :: mm_load(OWNER, RUNNING, v, RUNNING_LOOK);
           if
           :: v == 0 -> break
           :: else -> (mem[RUNNING] == 0)
           fi
        od
#endif
    :: else -> skip
    fi;
    /* free(s): no handler holds S (now), and every handler's touch of S
     * happened before the free — this thread reads the newest value of
     * each of S's words (a relaxed load would read an older one if a
     * touch were not ordered before). */
    mm_load(OWNER, CLOSED, v, MM_RLX);
    assert(v == mem[CLOSED]);
    mm_load(OWNER, CLOSE_SENT, v, MM_RLX);
    assert(v == mem[CLOSE_SENT]);
    mm_load(OWNER, HEAD, v, MM_RLX);
    assert(v == mem[HEAD]);
    d_step { assert(holders == 0); freed = true; v = 0 }
}

/* OTHER: coro_sched_close_on_signal(S2, SIG_B), after S's registration. */
proctype other() provided (!in_handler[OTHER]) {
    int v, lk;

    s_registered_once;
    lock_take(OTHER);
    mm_load(OTHER, SLOT_SIGNO, v, MM_SC); /* find_slot(.., true): a free one? */
    if
    :: v == 0 ->
        mm_store(OTHER, SLOT_SCHED, S2, MM_SC);
        mm_store(OTHER, SLOT_SIGNO, SIG_B, SIGNO_STORE);
        mm_fetch_add(OTHER, REGISTERED, 1, v, MM_SC)
    :: else -> skip /* EAGAIN: the one slot is S's */
    fi;
    lock_release(OTHER)
}

init {
    if
    :: wait_mode = true
    :: wait_mode = false
    fi;
    if
    :: reuse_mode = true
    :: reuse_mode = false
    fi;
    atomic {
        run mm_flusher(OWNER);
        run mm_flusher(OTHER);
        run mm_flusher(THIRD);
        run owner();
        if
        :: reuse_mode -> run other()
        :: else -> skip
        fi;
        run signal_a(true, wait_mode); /* must come if the owner waits */
        run signal_a(false, false)
    }
}
