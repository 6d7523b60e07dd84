/*
 * inbox.pml — the inbox's sleep/wake handshake, and its recycled wake
 * cells (inbox.c), with the owner's loop of the pump (sched.c).
 *
 * Models:
 *   inbox.c:coro__inbox_push()   read in->cell, then the CAS push (seq_cst),
 *                                then load + exchange of `sleeping`, and the
 *                                winner's wake_seq++ and futex wake;
 *   inbox.c:coro__inbox_wait()   the spin (spin_finds_work(): loads of
 *                                head; one that sees a request returns),
 *                                or: read wake_seq (`seen`), store sleeping = 1
 *                                (seq_cst: mov + mfence), check head,
 *                                futex_wait(wake_seq, seen), store
 *                                sleeping = 0 (relaxed: a buffered store);
 *   inbox.c:coro__inbox_empty(), coro__inbox_take()   a load of head, then
 *                                one exchange that takes the whole list;
 *   inbox.c:coro__inbox_init(), coro__inbox_fini()    the wake cell goes back
 *                                to the pool when the owner destroys its
 *                                inbox, and the next inbox gets it again:
 *                                same wake_seq, sleeping stored false.
 *   sched.c:pump_until()         the owner's loop: while work remains,
 *                                drain_inbox() (empty? else take and run
 *                                what it took); with nothing run, wait.
 *                                coro_sched_poll_until() and
 *                                coro__sched_idle_wait() call the same wait
 *                                after the same "nothing to run" check.
 *
 * The run: the owner creates inbox 1, pumps until it has taken the two
 * requests it expects (producer P1's and P2's: the work that keeps its
 * work_remains() true), destroys inbox 1 and creates inbox 2, which gets
 * the recycled cell, and pumps until it has taken P2's second request. P1
 * may do the rest of its push — the look at `sleeping`, the exchange, the
 * wake_seq++ and the futex wake — at any moment, also long after inbox 1
 * is gone, on the cell that now belongs to inbox 2: the late producer.
 *
 * Abstracts: a request is a node number (its next pointer a word in mem[]);
 * what the owner does with a request is "take it"; the two inboxes are
 * two head words; there is one wake cell (the pool holds it between the
 * two inboxes, so both get it). Every wait is without deadline (a wait
 * with a deadline returns anyway, which could only hide a lost wake); the
 * futex never returns spuriously. The futex is modelled exactly:
 * futex_wait compares the word with `seen` and blocks, as one step (the
 * kernel does both under its lock), or returns at once if they differ;
 * futex_wake wakes the waiter blocked on the word, if there is one. The
 * owner is one thread throughout (a new scheduler on another thread
 * changes nothing: the pool's mutex drains the old owner's buffer).
 * All four threads' plain stores go through x86-TSO store buffers
 * (tso.pml): the owner's `sleeping` stores, the producers' node->next.
 *
 * Proves, for every interleaving and store-buffer drain order:
 *   - no lost wake: the owner never sleeps for good on a non-empty inbox
 *     once the producers are done (that is an invalid end state: the
 *     owner blocked in futex_wait, everyone else finished);
 *   - every pushed request is taken exactly once, by the owner of the
 *     inbox it was pushed to (asserts in take_one, and at the end);
 *   - a producer touches the inbox itself (in->cell, head) only while the
 *     inbox exists; after its push it touches only the cell;
 *   - with the recycled cell: the late producer's exchange, wake_seq++
 *     and futex wake on the cell of inbox 2 never make inbox 2's owner
 *     miss a wake (at worst it wakes once for nothing and looks again —
 *     compile with -DWITNESS_SPURIOUS to have SPIN show such a run).
 *
 * Mutants (each must fail):
 *   -DMUTANT_PLAIN_SLEEPING  the owner's `sleeping = 1` is a plain store
 *       (no mfence): it waits in the store buffer while the owner's load
 *       of head goes ahead; the producer's load of `sleeping` still reads
 *       0. Lost wake (invalid end state).
 *   -DMUTANT_LOOK_FIRST  the producer reads `sleeping` before its push.
 *       It reads 0, the owner announces, checks, sleeps, then the push
 *       lands without a wake. Lost wake.
 *   -DMUTANT_NO_SEQ_CHECK  futex_wait blocks without comparing wake_seq
 *       with `seen`: a wake between the owner's check and its wait is
 *       lost. Lost wake.
 *   -DMUTANT_CELL_AFTER_PUSH  the producer reads in->cell after its push:
 *       by then the owner may have taken the request and destroyed the
 *       inbox. Use after free (assert).
 */
#define NTHREADS 3
#define OWNER 0
#define P1 1
#define P2 2

#define HEAD1 0      /* inbox 1's head */
#define HEAD2 1      /* inbox 2's head */
#define SLEEPING 2   /* the wake cell: sleeping */
#define WAKE_SEQ 3   /* the wake cell: wake_seq, the futex word */
#define NEXT0 4      /* node n's next pointer is mem[NEXT0 + n] */
#define NNODES 4     /* node n: 1: P1 -> inbox 1, 2: P2 -> inbox 1,
                                3: P2 -> inbox 2, 4: P1 -> inbox 2 */
#define NWORDS 9     /* NEXT0 + NNODES + 1 */

#define NIL 0

#include "tso.pml"

bool alive[3];          /* alive[i]: inbox i exists (1, 2; 0 unused) */
byte pushed_to[NNODES + 1]; /* the inbox node n was pushed to, 0: not yet */
byte taken[NNODES + 1];     /* how many times the owner took node n */
bool futex_blocked;     /* the owner sleeps in futex_wait on wake_seq */
bool woke_for_nothing;  /* ghost: a futex return of inbox 2's owner with
                           nothing in inbox 2 */

/* The kernel's futex_wait(&wake_seq, seen): compare and block in one step,
 * or return at once (EAGAIN) if the word moved on. It reads memory: the
 * owner never writes wake_seq, so its own buffer holds nothing for it. */
inline futex_wait(seen) {
    d_step {
#ifdef MUTANT_NO_SEQ_CHECK
        futex_blocked = true
#else
        if
        :: mem[WAKE_SEQ] == seen -> futex_blocked = true
        :: else -> skip /* EAGAIN */
        fi
#endif
    };
    /* Asleep until a futex_wake. Not an end state: an owner that sleeps
     * here for good, with the producers done, is a lost wake. */
    !futex_blocked
}

/* The kernel's futex_wake(&wake_seq, 1): wakes the waiter, if any. */
inline futex_wake() {
    futex_blocked = false
}

/* coro__inbox_wait(in, CORO_FOREVER) */
inline inbox_wait(head_word, g) {
    /* spin_finds_work(): the spin before the handshake, loads of head
     * (relaxed: plain movs). One that sees a request returns, and the
     * pump looks again; one that times out (or is skipped) goes on. */
    spun = false;
    if
    :: tso_load(OWNER, head_word, h); spun = (h != NIL)
    :: skip
    fi;
    if
    :: spun -> skip
    :: else ->
    tso_load(OWNER, WAKE_SEQ, seen);
    tso_store(OWNER, SLEEPING, 1);
#ifndef MUTANT_PLAIN_SLEEPING
    tso_fence(OWNER); /* seq_cst store: the mfence after the mov */
#endif
    tso_load(OWNER, head_word, h); /* seq_cst load: a plain mov */
    if
    :: h == NIL ->
        futex_wait(seen);
#ifdef WITNESS_SPURIOUS
        /* Not a bug: shows that a late producer can wake the owner of
         * inbox 2 when nothing is there for it. */
        assert(!(g == 2 && mem[HEAD2] == NIL && pushed_to[3] == 0 &&
                 pushed_to[4] == 0))
#endif
    :: else -> skip
    fi;
    tso_store(OWNER, SLEEPING, 0) /* relaxed: stays buffered a while */
    fi
}

/* The owner takes node n from the list it took out of inbox g. */
inline take_one(n, g) {
    d_step {
        assert(n >= 1 && n <= NNODES);
        assert(pushed_to[n] == g); /* pushed to this inbox, nowhere else */
        assert(taken[n] == 0);     /* taken once */
        taken[n]++
    }
}

/* sched.c:pump_until() on inbox g, whose work is `expected` requests:
 * work_remains() is true until they are all taken. */
inline pump(head_word, g, expected) {
    got = 0;
    do
    :: got == expected -> break /* work_remains() is false */
    :: else ->
        /* drain_inbox(): coro__inbox_empty(), then coro__inbox_take() */
        tso_load(OWNER, head_word, h);
        if
        :: h != NIL ->
            tso_xchg(OWNER, head_word, NIL, list);
            do /* the walk of the list (the reversal is the owner's own) */
            :: list != NIL ->
                take_one(list, g);
                got++;
                tso_load(OWNER, NEXT0 + list, list)
            :: else -> break
            od
            /* run_one() runs them; then the loop looks again */
        :: else ->
            /* run_one() found nothing: sleep until a push */
            inbox_wait(head_word, g)
        fi
    od
}

proctype owner() {
    int seen, h, list;
    bool spun;
    byte got;

    /* inbox 1 exists (init below): a new cell, wake_seq 0, sleeping 0 */
    pump(HEAD1, 1, 2);

    /* coro_sched_destroy() -> coro__inbox_fini(): the cell goes back to
     * the pool, under pool_lock (a locked instruction: drains the owner's
     * buffer). The inbox is freed. */
    atomic { tso_fence(OWNER); alive[1] = false };

    /* A new scheduler: coro__inbox_init() takes the same cell from the
     * pool; it keeps its wake_seq; sleeping = false is a seq_cst store. */
    tso_store(OWNER, SLEEPING, 0);
    tso_fence(OWNER);
    alive[2] = true;
    pump(HEAD2, 2, 2);

    /* Every request taken exactly once, nothing left behind. */
    assert(taken[1] == 1 && taken[2] == 1 && taken[3] == 1 && taken[4] == 1);
    assert(mem[HEAD2] == NIL)
}

/* coro__inbox_push(inbox g, node n) by thread t */
inline push(t, head_word, g, n) {
#ifdef MUTANT_LOOK_FIRST
    tso_load(t, SLEEPING, s);
#endif
#ifndef MUTANT_CELL_AFTER_PUSH
    assert(alive[g]); /* cell = in->cell: the inbox must still exist */
#endif
    assert(alive[g]); /* and for the relaxed load of head: */
    tso_load(t, head_word, h);
    do
    :: tso_store(t, NEXT0 + n, h); /* node->next = head: a plain store */
       atomic {
           assert(alive[g]);
           tso_cas(t, head_word, h, n, ok); /* seq_cst CAS: lock cmpxchg */
           if :: ok -> pushed_to[n] = g :: else -> skip fi
       };
       if :: ok -> break :: else -> skip /* h holds the new head */ fi
    od;
#ifdef MUTANT_CELL_AFTER_PUSH
    assert(alive[g]); /* cell = in->cell, too late */
#endif
    /* From here on only the cell: the inbox may be gone, the cell may
     * belong to the next inbox. */
#ifndef MUTANT_LOOK_FIRST
    tso_load(t, SLEEPING, s); /* seq_cst load: a plain mov */
#endif
    if
    :: s != 0 ->
        tso_xchg(t, SLEEPING, 0, old);
        if
        :: old != 0 ->
            tso_fetch_add(t, WAKE_SEQ, 1, x);
            futex_wake()
        :: else -> skip /* another producer wakes the owner */
        fi
    :: else -> skip /* the owner is awake */
    fi
}

proctype producer1() {
    int h, s, old, x;
    bool ok;

    push(P1, HEAD1, 1, 1);
    alive[2];
    push(P1, HEAD2, 2, 4)
}

proctype producer2() {
    int h, s, old, x;
    bool ok;

    push(P2, HEAD1, 1, 2);
    /* It gets hold of the new scheduler once it exists. */
    alive[2];
    push(P2, HEAD2, 2, 3)
}

/* coro__inbox_init() of inbox 1 comes first: the producers are handed
 * the scheduler once it exists. */
init {
    atomic {
        alive[1] = true;
        run owner();
        run producer1();
        run producer2();
        run tso_flusher(OWNER);
        run tso_flusher(P1);
        run tso_flusher(P2)
    }
}
