/*
 * inbox_hook.pml — the inbox's sleep/wake handshake when the owner waits
 * in a wait hook (coro_sched_set_wait()) and producers wake it through the
 * wake cell's eventfd, with the owner switching between the futex and the
 * hook while producers push (inbox.c, sched.c).
 *
 * Models (each atomic with the C11 order the code gives it):
 *   inbox.c:coro__inbox_push()   the CAS push (seq_cst), the load
 *                                (seq_cst) and the exchange (seq_cst) of
 *                                `sleeping`, then, for the winner, a
 *                                relaxed load of `wait_fd`: the eventfd ->
 *                                write(eventfd, 1); -1 -> wake_seq++
 *                                (release) and futex wake;
 *   inbox.c:wait_in_hook()       store sleeping = 1 (seq_cst), check head
 *                                (seq_cst), call the hook (an epoll_wait
 *                                that returns when the eventfd is
 *                                readable), store sleeping = 0 (relaxed),
 *                                read(eventfd) to empty it;
 *   inbox.c:coro__inbox_wait()   the futex wait, as in inbox.pml;
 *   inbox.c:coro__inbox_set_wait()   the owner's relaxed store of
 *                                `wait_fd`, between two waits;
 *   sched.c:coro_sched_set_wait() refuses inside the pump, so the mode
 *                                changes only between the owner's loops;
 *   sched.c:coro__pump_until()   the owner's loop: drain the inbox
 *                                (coro__inbox_empty(), acquire; the take,
 *                                an acquire exchange), run what it took,
 *                                with nothing run wait.
 *
 * The run, on x86-TSO: producers P1 and P2 push two requests each,
 * whenever they like. The owner pumps on the futex until it has taken one
 * request, installs the hook (wait_fd = the eventfd), pumps until it has
 * taken three, uninstalls it (wait_fd = -1), and pumps until it has all
 * four. So each mode change races with pushes and wakes in flight: a
 * producer may read `sleeping` before a change and `wait_fd` after it.
 * On the weak model (-DMM_WEAK) the search is far larger: each producer
 * pushes one request (NNODES 2), and the owner changes mode once, after
 * the first: futex -> hook, or with -DFIRST_HOOK=1 hook -> futex (a
 * second test). -DFIRST_HOOK=1 on x86-TSO: hook -> futex -> hook.
 *
 * Abstracts: a request is a node number; what the owner does with one is
 * "take it" (its fields, and the orders that publish them, are
 * inbox.pml's). The eventfd's counter is a word, 0 or 1 (readable or not:
 * the value never matters, only whether it is zero); write and read are
 * kernel operations under the eventfd's lock: one RMW each (acq_rel;
 * on x86 a locked instruction, which drains the caller's store buffer).
 * The hook is an epoll_wait without a timeout on a set that holds the
 * eventfd: it returns when the eventfd is readable (a wait on the word,
 * acquire: the kernel's wake-up orders the writer before it; blocked
 * there for good is an invalid end state), never spuriously. The futex is
 * modelled as in inbox.pml. Every wait is without deadline (a deadline
 * only makes the wait return, which could hide a lost wake). The recycled
 * wake cell and the late producer are inbox.pml's: the eventfd belongs to
 * the cell exactly as wake_seq does, so a late write is the same one
 * spurious wake. On x86-TSO, which never reorders two stores, the relaxed
 * store of wait_fd always reaches memory before `sleeping = 1`; on the
 * weak model it need not, and the exchange's acquire (against the seq_cst
 * store's release) is what makes the producer read the mode of the wait
 * it found (inbox.c, "Which way a producer wakes").
 *
 * Proves, for every interleaving, on x86-TSO (every store-buffer drain
 * order) and on the weak model (every value C11 lets each load read):
 *   - no lost wake in either mode, across mode changes: the owner never
 *     waits for good (in the futex or in the hook) on a non-empty inbox
 *     once the producers are done (an invalid end state);
 *   - every request is taken exactly once (asserts in take_one and at
 *     the end).
 *
 * Mutants, x86-TSO (each must fail; each fails on the weak model too):
 *   -DMUTANT_DRAIN_EARLY  the owner empties the eventfd after checking the
 *       inbox and before the hook's epoll_wait, instead of after the hook
 *       returns: it throws away the write of a producer that pushed just
 *       after the check. Lost wake (invalid end state).
 *   -DMUTANT_HOOK_PLAIN_SLEEPING  in the hook's wait, `sleeping = 1` is a
 *       release store (a plain mov, no mfence): the producer still reads
 *       0 while the owner's check of head goes ahead. Lost wake.
 *   -DMUTANT_MODE_FIRST  the producer reads `wait_fd` before its push (and
 *       so before the exchange that orders it): it may wake the owner the
 *       way of before a mode change. SPIN's trail: P reads the hook's
 *       eventfd, the owner uninstalls the hook and sleeps on the futex,
 *       P's push finds it sleeping and writes the eventfd nobody waits
 *       on. Lost wake.
 *
 * Weak mutants (the same x86 instructions as the code, so x86-TSO passes
 * them; each must fail on the weak model, in both directions):
 *   -DMUTANT_HOOK_PLAIN_SLEEPING  (above): a release store is not in the
 *       seq_cst order, so the producer's seq_cst load may read the 0
 *       before it. Lost wake.
 *   -DMUTANT_HOOK_ACQUIRE_CHECK  wait_in_hook()'s check of head is an
 *       acquire load: it may read the empty head from before a push that
 *       the producer's seq_cst load of `sleeping` ordered after the
 *       announcement; the producer reads 0, the owner waits in the hook.
 *       Lost wake.
 *   -DMUTANT_XCHG_NO_ACQUIRE  the push's exchange of `sleeping` is
 *       release only: its relaxed load of wait_fd may then read the mode
 *       from before the owner's change (SPIN: P2 wins the exchange, reads
 *       wait_fd = -1 while the newest is the eventfd, and bumps the futex
 *       while the owner waits in the hook). Lost wake.
 *
 * Checked, not needed: -DXCHG_ORDER=MM_ACQ (the exchange acquire only)
 * passes on both models: what the exchange needs is its acquire; its
 * seq_cst is the code's for simplicity (an RMW costs the same either way
 * on x86-64 and AArch64). The orders of the futex path are inbox.pml's.
 */
#define NTHREADS 3
#define OWNER 0
#define P1 1
#define P2 2

#define HEAD 0       /* the inbox's head */
#define SLEEPING 1   /* the wake cell: sleeping */
#define WAKE_SEQ 2   /* the wake cell: wake_seq, the futex word */
#define WAIT_FD 3    /* the wake cell: wait_fd; 1: the eventfd, 0: -1 */
#define EFD 4        /* the eventfd's counter: 0 or 1 (readable) */
/* 1, 3: P1's; 2, 4: P2's. The weak model's search, far larger, has one
 * request per producer (NNODES 2: nodes 1 and 2) and so one mode change
 * (see the top). */
#ifndef NNODES
#ifdef MM_WEAK
#define NNODES 2
#else
#define NNODES 4
#endif
#endif
#ifndef FIRST_HOOK
#define FIRST_HOOK 0 /* the first mode: 0 the futex, 1 the hook */
#endif
#define NEXT(n) (EFD + (n)) /* node n's next pointer */
#define NWORDS (EFD + NNODES + 1)

#define NIL 0

#include "memory.pml"

/* The orders of inbox.c; each weak mutant weakens one. */
#ifdef MUTANT_HOOK_PLAIN_SLEEPING
#define HOOK_SLEEP_ORDER MM_REL /* wait_in_hook()'s sleeping = 1 */
#else
#define HOOK_SLEEP_ORDER MM_SC
#endif
#ifdef MUTANT_HOOK_ACQUIRE_CHECK
#define HOOK_CHECK_ORDER MM_ACQ /* wait_in_hook()'s check of head */
#else
#define HOOK_CHECK_ORDER MM_SC
#endif
#ifdef MUTANT_XCHG_NO_ACQUIRE
#define XCHG_ORDER MM_REL /* the push's exchange of sleeping */
#else
#ifndef XCHG_ORDER
#define XCHG_ORDER MM_SC
#endif
#endif

byte pushed[NNODES + 1]; /* node n was pushed */
byte taken[NNODES + 1];  /* how many times the owner took node n */
bool futex_blocked;      /* the owner sleeps in futex_wait on wake_seq */

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
    :: mm_load(OWNER, HEAD, h, MM_RLX); spun = (h != NIL)
    :: skip
    fi;
    if
    :: spun -> skip
    :: else ->
    mm_load(OWNER, WAKE_SEQ, seen, MM_ACQ);
    mm_store(OWNER, SLEEPING, 1, MM_SC);
    mm_load(OWNER, HEAD, h, MM_SC);
    if
    :: h == NIL -> futex_wait(seen)
    :: else -> skip
    fi;
    mm_store(OWNER, SLEEPING, 0, MM_RLX)
    fi;
    d_step { seen = 0; h = 0; spun = false } /* scratch: fewer states */
}

/* inbox.c:wait_in_hook(): the hook's epoll_wait on the eventfd. */
inline hook_mode_wait() {
    /* seq_cst store, then seq_cst load (x86: mov + mfence, then mov) */
    mm_store(OWNER, SLEEPING, 1, HOOK_SLEEP_ORDER);
    mm_load(OWNER, HEAD, h, HOOK_CHECK_ORDER);
    if
    :: h == NIL ->
#ifdef MUTANT_DRAIN_EARLY
        mm_rmw(OWNER, EFD, old, 0, MM_ACQ_REL); /* read(eventfd) */
#endif
        /* the hook: epoll_wait(..., -1) returns once the eventfd is
         * readable (the application's other descriptors: never); the
         * kernel's wake-up orders the writer's steps before it */
        mm_await(OWNER, EFD, mem[EFD] != 0, old, MM_ACQ)
    :: else -> skip
    fi;
    mm_store(OWNER, SLEEPING, 0, MM_RLX); /* relaxed */
#ifndef MUTANT_DRAIN_EARLY
    /* read(eventfd): empty the counter, after the hook returned */
    mm_rmw(OWNER, EFD, old, 0, MM_ACQ_REL);
#endif
    d_step { h = 0; old = 0 } /* scratch */
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

/* sched.c:coro__pump_until() until `expected` requests in all were taken; the
 * way of waiting is the owner's own `hook` (in->wait_fn != NULL). */
inline pump(expected) {
    do
    :: got >= expected -> break
    :: else ->
        mm_load(OWNER, HEAD, h, MM_ACQ); /* coro__inbox_empty() */
        if
        :: h != NIL ->
            h = 0;
            mm_xchg(OWNER, HEAD, NIL, list, MM_ACQ); /* coro__inbox_take() */
            do
            :: list != NIL ->
                take_one(list);
                got++;
                mm_load(OWNER, NEXT(list), next, MM_RLX); /* plain */
                d_step { list = next; next = 0 }
            :: else -> break
            od
        :: else ->
            h = 0;
            if
            :: hook -> hook_mode_wait()
            :: else -> futex_mode_wait()
            fi
        fi
    od
}

/* coro_sched_set_wait(s, fn, ...) or (s, NULL, ...): outside the pump,
 * not waiting. The relaxed store of wait_fd (see inbox.c). */
inline switch_mode() {
    hook = !hook;
    mm_store(OWNER, WAIT_FD, hook, MM_RLX)
}

proctype owner() {
    int seen, h, list, next, old;
    bool spun;
    byte got;
    bool hook;

    got = 0;
    hook = FIRST_HOOK;
    if /* a hook installed before the first pump */
    :: hook -> mm_store(OWNER, WAIT_FD, 1, MM_RLX)
    :: else -> skip
    fi;
    pump(1);
    switch_mode();
#if NNODES == 4
    pump(3);
    switch_mode();
#endif
    pump(NNODES);

    assert(taken[1] == 1 && taken[2] == 1);
    assert(NNODES == 2 || (taken[3] == 1 && taken[4] == 1));
    assert(mem[HEAD] == NIL)
}

/* coro__inbox_push(node n) by thread t */
inline push(t, n) {
#ifdef MUTANT_MODE_FIRST
    mm_load(t, WAIT_FD, fd, MM_RLX);
#endif
    mm_load(t, HEAD, h, MM_RLX);
    do
    :: mm_store(t, NEXT(n), h, MM_RLX); /* node->next = head: plain */
       atomic {
           mm_cas(t, HEAD, h, n, ok, MM_SC); /* seq_cst CAS */
           if :: ok -> pushed[n] = 1 :: else -> skip fi
       };
       if :: ok -> break :: else -> skip fi
    od;
    mm_load(t, SLEEPING, s, MM_SC); /* seq_cst load */
    if
    :: s != 0 ->
        /* the exchange: acquire, so that the load of wait_fd below reads
         * the owner's last change of it or a later one */
        mm_xchg(t, SLEEPING, 0, old, XCHG_ORDER);
        if
        :: old != 0 ->
#ifndef MUTANT_MODE_FIRST
            mm_load(t, WAIT_FD, fd, MM_RLX); /* relaxed, after the exchange */
#endif
            if
            :: fd != 0 ->
                /* write(eventfd, 1): under the eventfd's lock */
                mm_rmw(t, EFD, x, 1, MM_ACQ_REL)
            :: else ->
                mm_fetch_add(t, WAKE_SEQ, 1, x, MM_REL);
                futex_blocked = false /* futex_wake */
            fi
        :: else -> skip /* another producer wakes the owner */
        fi
    :: else -> skip /* the owner is awake */
    fi;
    d_step { h = 0; s = 0; old = 0; x = 0; fd = 0; ok = false } /* scratch */
}

proctype producer1() {
    int h, s, old, x, fd;
    bool ok;

    push(P1, 1)
#if NNODES == 4
    ;
    push(P1, 3)
#endif
}

proctype producer2() {
    int h, s, old, x, fd;
    bool ok;

    push(P2, 2)
#if NNODES == 4
    ;
    push(P2, 4)
#endif
}

init {
    atomic {
        run owner();
        run producer1();
        run producer2();
        run mm_flusher(OWNER);
        run mm_flusher(P1);
        run mm_flusher(P2)
    }
}
