/*
 * inbox_hook.pml — the inbox's sleep/wake handshake when the owner waits
 * in a wait hook (coro_sched_set_wait()) and producers wake it through the
 * wake cell's eventfd, with the owner switching between the futex and the
 * hook while producers push (inbox.c, sched.c).
 *
 * Models:
 *   inbox.c:coro__inbox_push()   the CAS push (seq_cst), the load and the
 *                                exchange of `sleeping`, then, for the
 *                                winner, a relaxed load of `wait_fd`: the
 *                                eventfd -> write(eventfd, 1); -1 ->
 *                                wake_seq++ and futex wake;
 *   inbox.c:wait_in_hook()       store sleeping = 1 (seq_cst: mov +
 *                                mfence), check head, call the hook (an
 *                                epoll_wait that returns when the eventfd
 *                                is readable), store sleeping = 0
 *                                (relaxed), read(eventfd) to empty it;
 *   inbox.c:coro__inbox_wait()   the futex wait, as in inbox.pml;
 *   inbox.c:coro__inbox_set_wait()   the owner's relaxed store of
 *                                `wait_fd`, between two waits;
 *   sched.c:coro_sched_set_wait() refuses inside the pump, so the mode
 *                                changes only between the owner's loops;
 *   sched.c:pump_until()         the owner's loop: drain the inbox, run
 *                                what it took, with nothing run wait.
 *
 * The run: producers P1 and P2 push two requests each, whenever they
 * like. The owner pumps on the futex until it has taken one request,
 * installs the hook (wait_fd = the eventfd), pumps until it has taken
 * three, uninstalls it (wait_fd = -1), and pumps until it has all four.
 * So each mode change races with pushes and wakes in flight: a producer
 * may read `sleeping` before a change and `wait_fd` after it.
 *
 * Abstracts: a request is a node number; what the owner does with one is
 * "take it". The eventfd's counter is a bool (readable or not: the value
 * never matters, only whether it is zero). The hook is an epoll_wait
 * without a timeout on a set that holds the eventfd: it returns when the
 * eventfd is readable (a guard: blocked there for good is an invalid end
 * state), never spuriously. eventfd write and read are kernel operations
 * under the eventfd's lock: one atomic step each, after draining the
 * calling thread's store buffer (the lock is a locked instruction). The
 * futex is modelled as in inbox.pml. Every wait is without deadline (a
 * deadline only makes the wait return, which could hide a lost wake). The
 * recycled wake cell and the late producer are inbox.pml's: the eventfd
 * belongs to the cell exactly as wake_seq does, so a late write is the
 * same one spurious wake. All three threads' plain stores go through
 * x86-TSO store buffers (tso.pml). TSO never reorders two stores, so the
 * relaxed store of wait_fd reaching memory before `sleeping = 1` is
 * x86's; the C11 argument (release/acquire through `sleeping`) is in
 * inbox.c.
 *
 * Proves, for every interleaving and store-buffer drain order:
 *   - no lost wake in either mode, across mode changes: the owner never
 *     waits for good (in the futex or in the hook) on a non-empty inbox
 *     once the producers are done (an invalid end state);
 *   - every request is taken exactly once (asserts in take_one and at
 *     the end).
 *
 * Mutants (each must fail):
 *   -DMUTANT_DRAIN_EARLY  the owner empties the eventfd after checking the
 *       inbox and before the hook's epoll_wait, instead of after the hook
 *       returns: it throws away the write of a producer that pushed just
 *       after the check. Lost wake (invalid end state).
 *   -DMUTANT_HOOK_PLAIN_SLEEPING  in the hook's wait, `sleeping = 1` is a
 *       plain store (no mfence): the producer still reads 0 while the
 *       owner's check of head goes ahead. Lost wake.
 *   -DMUTANT_MODE_FIRST  the producer reads `wait_fd` before its push (and
 *       so before the exchange that orders it): it may wake the owner the
 *       way of before a mode change. SPIN's trail: P reads the hook's
 *       eventfd, the owner uninstalls the hook and sleeps on the futex,
 *       P's push finds it sleeping and writes the eventfd nobody waits
 *       on. Lost wake.
 */
#define NTHREADS 3
#define OWNER 0
#define P1 1
#define P2 2

#define HEAD 0       /* the inbox's head */
#define SLEEPING 1   /* the wake cell: sleeping */
#define WAKE_SEQ 2   /* the wake cell: wake_seq, the futex word */
#define WAIT_FD 3    /* the wake cell: wait_fd; 1: the eventfd, 0: -1 */
#define NEXT0 4      /* node n's next pointer is mem[NEXT0 + n] */
#define NNODES 4     /* 1, 3: P1's; 2, 4: P2's */
#define NWORDS 9     /* NEXT0 + NNODES + 1 */

#define NIL 0

#include "tso.pml"

byte pushed[NNODES + 1]; /* node n was pushed */
byte taken[NNODES + 1];  /* how many times the owner took node n */
bool futex_blocked;      /* the owner sleeps in futex_wait on wake_seq */
bool efd_readable;       /* the eventfd's counter is not zero */

/* The kernel's futex_wait(&wake_seq, seen): compare and block as one step,
 * or return at once (EAGAIN). */
inline futex_wait(seen) {
    d_step {
        if
        :: mem[WAKE_SEQ] == seen -> futex_blocked = true
        :: else -> skip
        fi
    };
    !futex_blocked /* a lost wake blocks here for good */
}

/* coro__inbox_wait() on the futex (no hook). */
inline futex_mode_wait() {
    /* spin_finds_work(): the spin before the handshake, loads of head
     * (relaxed: plain movs). One that sees a request returns, and the
     * pump looks again; one that times out (or is skipped) goes on. */
    spun = false;
    if
    :: tso_load(OWNER, HEAD, h); spun = (h != NIL)
    :: skip
    fi;
    if
    :: spun -> skip
    :: else ->
    tso_load(OWNER, WAKE_SEQ, seen);
    tso_store(OWNER, SLEEPING, 1);
    tso_fence(OWNER); /* seq_cst store */
    tso_load(OWNER, HEAD, h);
    if
    :: h == NIL -> futex_wait(seen)
    :: else -> skip
    fi;
    tso_store(OWNER, SLEEPING, 0) /* relaxed */
    fi
}

/* inbox.c:wait_in_hook(): the hook's epoll_wait on the eventfd. */
inline hook_mode_wait() {
    tso_store(OWNER, SLEEPING, 1);
#ifndef MUTANT_HOOK_PLAIN_SLEEPING
    tso_fence(OWNER); /* seq_cst store */
#endif
    tso_load(OWNER, HEAD, h); /* seq_cst load: a plain mov */
    if
    :: h == NIL ->
#ifdef MUTANT_DRAIN_EARLY
        d_step { tso_drain_all(OWNER); efd_readable = false };
#endif
        /* the hook: epoll_wait(..., -1) returns once the eventfd is
         * readable (the application's other descriptors: never) */
        efd_readable
    :: else -> skip
    fi;
    tso_store(OWNER, SLEEPING, 0); /* relaxed */
#ifndef MUTANT_DRAIN_EARLY
    /* read(eventfd): empty the counter, after the hook returned */
    d_step { tso_drain_all(OWNER); efd_readable = false }
#endif
}

/* The owner takes node n. */
inline take_one(n) {
    d_step {
        assert(n >= 1 && n <= NNODES);
        assert(pushed[n]);     /* it was pushed */
        assert(taken[n] == 0); /* taken once */
        taken[n]++
    }
}

/* sched.c:pump_until() until `expected` requests in all were taken; the
 * way of waiting is the owner's own `hook` (in->wait_fn != NULL). */
inline pump(expected) {
    do
    :: got >= expected -> break
    :: else ->
        tso_load(OWNER, HEAD, h);
        if
        :: h != NIL ->
            tso_xchg(OWNER, HEAD, NIL, list);
            do
            :: list != NIL ->
                take_one(list);
                got++;
                tso_load(OWNER, NEXT0 + list, list)
            :: else -> break
            od
        :: else ->
            if
            :: hook -> hook_mode_wait()
            :: else -> futex_mode_wait()
            fi
        fi
    od
}

proctype owner() {
    int seen, h, list;
    bool spun;
    byte got;
    bool hook;

    got = 0;
    hook = false;
    pump(1);
    /* coro_sched_set_wait(s, fn, ...): outside the pump, not waiting. */
    hook = true;
    tso_store(OWNER, WAIT_FD, 1); /* relaxed */
    pump(3);
    /* coro_sched_set_wait(s, NULL, ...): back to the futex. */
    hook = false;
    tso_store(OWNER, WAIT_FD, 0); /* relaxed */
    pump(4);

    assert(taken[1] == 1 && taken[2] == 1 && taken[3] == 1 && taken[4] == 1);
    assert(mem[HEAD] == NIL)
}

/* coro__inbox_push(node n) by thread t */
inline push(t, n) {
#ifdef MUTANT_MODE_FIRST
    tso_load(t, WAIT_FD, fd);
#endif
    tso_load(t, HEAD, h);
    do
    :: tso_store(t, NEXT0 + n, h); /* node->next = head: a plain store */
       atomic {
           tso_cas(t, HEAD, h, n, ok); /* seq_cst CAS */
           if :: ok -> pushed[n] = 1 :: else -> skip fi
       };
       if :: ok -> break :: else -> skip fi
    od;
    tso_load(t, SLEEPING, s); /* seq_cst load: a plain mov */
    if
    :: s != 0 ->
        tso_xchg(t, SLEEPING, 0, old);
        if
        :: old != 0 ->
#ifndef MUTANT_MODE_FIRST
            tso_load(t, WAIT_FD, fd); /* relaxed, after the exchange */
#endif
            if
            :: fd != 0 ->
                /* write(eventfd, 1) */
                d_step { tso_drain_all(t); efd_readable = true }
            :: else ->
                tso_fetch_add(t, WAKE_SEQ, 1, x);
                futex_blocked = false /* futex_wake */
            fi
        :: else -> skip /* another producer wakes the owner */
        fi
    :: else -> skip /* the owner is awake */
    fi
}

proctype producer1() {
    int h, s, old, x, fd;
    bool ok;

    push(P1, 1);
    push(P1, 3)
}

proctype producer2() {
    int h, s, old, x, fd;
    bool ok;

    push(P2, 2);
    push(P2, 4)
}

init {
    atomic {
        run owner();
        run producer1();
        run producer2();
        run tso_flusher(OWNER);
        run tso_flusher(P1);
        run tso_flusher(P2)
    }
}
