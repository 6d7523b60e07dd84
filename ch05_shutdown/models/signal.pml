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
 *   inbox.c:coro__inbox_take(), coro__inbox_wait()  the owner's pump:
 *                take the inbox; or wake_seq read, sleeping = 1 (seq_cst),
 *                inbox empty? futex_wait(wake_seq, seen), sleeping = 0;
 *   signal.c:coro__signal_forget() from sched.c:coro_sched_destroy()
 *                under the lock: clear the slot (signo first, seq_cst),
 *                registered--; then wait until handlers_running is 0;
 *                then the scheduler is freed.
 *
 * The threads: OWNER creates scheduler S, registers it for signal A,
 * pumps until the close request arrives (or does not wait for one: the
 * program ends without a signal), and destroys S. OTHER is another
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
 * thread's store buffer (it sees the thread's buffered stores). A signal
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
 *   - registry_lock is a real lock (taking and releasing it drain the
 *     buffer). In this model only the close request is ever pushed.
 *   - Touching S: a handler holds S from the moment it has read the
 *     pointer out of the slot until its compare-exchange has pushed the
 *     request (after it, only the inbox's wake cell is touched, and cells
 *     are never freed, see inbox.c). The free asserts that no handler
 *     holds S, and a handler asserts S is not freed when it starts to
 *     hold it.
 *
 * Proves, for every interleaving, every moment of delivery on each
 * thread above, and every store-buffer drain order of x86-TSO:
 *   - no use of a freed scheduler: once coro__signal_forget() has
 *     returned and S is freed, no handler holds S or starts to;
 *   - a signal delivered while S is registered closes it: a handler that
 *     runs entirely between the registration's return and the start of
 *     the destroy leaves closed = true and the close request sent;
 *   - its pump is woken: a pump sleeping for the close request always
 *     gets it and finds S closed (a missed wake is an invalid end state:
 *     the owner asleep in futex_wait for good) — also when the handler
 *     interrupts the pump's own thread between its look at the inbox and
 *     its futex_wait;
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
#define NWORDS 9

#include "tso.pml"

#define SIG_A 1
#define SIG_B 2
#define S 1  /* the scheduler pointers: 0 is NULL */
#define S2 2

bool wait_mode;         /* the owner pumps until the close request arrives */
bool reuse_mode;        /* OTHER registers S2 for signal B */
bool in_handler[NTHREADS]; /* a handler interrupts this thread */
byte reg_lock;          /* registry_lock: 0 free, else thread + 1 */

/* Ghosts for the checks. */
bool registered_window; /* S's registration has returned, its destroy
                           has not started */
bool s_registered_once;
bool freed;             /* S is freed */
byte holders;           /* handlers holding S (read out of the slot) */

inline lock_take(t) {
    d_step { reg_lock == 0 -> tso_drain_all(t); reg_lock = t + 1 }
}
inline lock_release(t) {
    d_step { tso_drain_all(t); reg_lock = 0 }
}

/* A seq_cst store: GCC's mov + mfence. The thread does nothing between
 * the two, so it is one step: drain the buffer, then the store reaches
 * memory (as an xchg would). */
inline sc_store(t, w, v) {
    d_step { tso_drain_all(t); mem[w] = v }
}

/* close_registered(), the handler, on thread t. */
inline handler_body(t) {
#if defined(MUTANT_PLAIN_COUNT)
    tso_load(t, RUNNING, old);
    tso_store(t, RUNNING, old + 1);
#elif !defined(MUTANT_LATE_COUNT)
    tso_fetch_add(t, RUNNING, 1, old);
#endif
    tso_load(t, SLOT_SIGNO, v);
    if
    :: v == SIG_A -> tso_load(t, SLOT_SCHED, sp)
    :: else -> sp = 0
    fi;
#ifdef MUTANT_LATE_COUNT
    tso_fetch_add(t, RUNNING, 1, old);
#endif
    if
    :: sp != 0 ->
        assert(sp == S); /* S2 is registered for signal B only */
        d_step { assert(!freed); holders++ }
        /* coro__sched_close_async(s) */
        sc_store(t, CLOSED, 1);
        tso_xchg(t, CLOSE_SENT, 1, old);
        if
        :: old == 0 ->
            /* coro__inbox_push(): the cell's address is read first; the
             * head (only this request is ever pushed here: it is 0) */
            tso_load(t, HEAD, v);
            tso_cas(t, HEAD, v, 1, ok);
            assert(ok);
            holders--; /* from here on only the wake cell */
            tso_load(t, SLEEPING, v);
            if
            :: v != 0 ->
                tso_xchg(t, SLEEPING, 0, old);
                if
                :: old != 0 -> tso_fetch_add(t, WAKE_SEQ, 1, old) /* futex_wake */
                :: else -> skip
                fi
            :: else -> skip
            fi
        :: else -> holders-- /* sent already: nothing more to do with s */
        fi
    :: else -> skip
    fi;
    tso_fetch_add(t, RUNNING, -1, old)
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

proctype owner() provided (!in_handler[OWNER]) {
    int v, seen;
    byte sp;

    /* coro_sched_close_on_signal(S, SIG_A): the slot is free (OTHER
     * registers only after this). */
    lock_take(OWNER);
    sc_store(OWNER, SLOT_SCHED, S);
    sc_store(OWNER, SLOT_SIGNO, SIG_A);
    tso_fetch_add(OWNER, REGISTERED, 1, v);
    lock_release(OWNER);
    d_step { registered_window = true; s_registered_once = true }

    if
    :: wait_mode ->
        /* The pump, until the close request comes in. */
        do
        :: tso_xchg(OWNER, HEAD, 0, v); /* coro__inbox_take() */
           if
           :: v != 0 -> break
           :: else ->
               /* coro__inbox_wait() */
               tso_load(OWNER, WAKE_SEQ, seen);
               sc_store(OWNER, SLEEPING, 1);
               tso_load(OWNER, HEAD, v);
               if
               :: v == 0 -> (mem[WAKE_SEQ] != seen) /* futex_wait */
               :: else -> skip
               fi;
               tso_store(OWNER, SLEEPING, 0) /* relaxed */
           fi
        od;
        tso_load(OWNER, CLOSED, v);
        assert(v == 1) /* the request comes from a close */
    :: else -> skip
    fi;

    /* coro_sched_destroy(S) -> coro__signal_forget(S) */
    registered_window = false;
    tso_load(OWNER, REGISTERED, v);
    if
    :: v != 0 ->
        lock_take(OWNER);
        tso_load(OWNER, SLOT_SIGNO, v);
        tso_load(OWNER, SLOT_SCHED, sp);
        if
        :: v != 0 && sp == S ->
            sc_store(OWNER, SLOT_SIGNO, 0);
            sc_store(OWNER, SLOT_SCHED, 0);
            tso_fetch_add(OWNER, REGISTERED, -1, v)
        :: else -> skip
        fi;
#if !defined(MUTANT_NO_WAIT) && !defined(MUTANT_SLOT_REUSE)
        /* Wait for the handlers before releasing the lock,
         * so that no registration reuses the slot while a handler that
         * read it before the clear still runs. (OWNER never stores
         * handlers_running: its load reads memory.) */
        (mem[RUNNING] == 0);
#endif
        lock_release(OWNER)
#ifdef MUTANT_SLOT_REUSE
        ;
        (mem[RUNNING] == 0) /* the old code: after the release */
#endif
    :: else -> skip
    fi;
    d_step { assert(holders == 0); freed = true } /* free(s) */
}

/* OTHER: coro_sched_close_on_signal(S2, SIG_B), after S's registration. */
proctype other() provided (!in_handler[OTHER]) {
    int v;

    s_registered_once;
    lock_take(OTHER);
    tso_load(OTHER, SLOT_SIGNO, v); /* find_slot(.., true): a free one? */
    if
    :: v == 0 ->
        sc_store(OTHER, SLOT_SCHED, S2);
        sc_store(OTHER, SLOT_SIGNO, SIG_B);
        tso_fetch_add(OTHER, REGISTERED, 1, v)
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
        run tso_flusher(OWNER);
        run tso_flusher(OTHER);
        run tso_flusher(THIRD);
        run owner();
        if
        :: reuse_mode -> run other()
        :: else -> skip
        fi;
        run signal_a(true, wait_mode); /* must come if the owner waits */
        run signal_a(false, false)
    }
}
