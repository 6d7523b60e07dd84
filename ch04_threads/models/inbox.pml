/*
 * inbox.pml — the inbox's sleep/wake handshake, and its recycled wake
 * cells (inbox.c), with the owner's loop of the pump (sched.c).
 *
 * Models (each atomic with the C11 order the code gives it):
 *   inbox.c:coro__inbox_push()   the request's fields (plain stores), read
 *                                in->cell, a relaxed load of head, then
 *                                node->next = head and the CAS push
 *                                (seq_cst), then the load (seq_cst) and
 *                                the exchange (seq_cst) of `sleeping`,
 *                                and the winner's wake_seq++ (release)
 *                                and futex wake;
 *   inbox.c:coro__inbox_wait()   the spin (spin_finds_work(): relaxed
 *                                loads of head; one that sees a request
 *                                returns), or: read wake_seq (`seen`,
 *                                acquire), store sleeping = 1 (seq_cst),
 *                                check head (seq_cst), futex_wait(wake_seq,
 *                                seen), store sleeping = 0 (relaxed);
 *   coro_impl.h:coro__inbox_empty(), inbox.c:coro__inbox_take()   a load
 *                                of head (acquire), then one exchange that
 *                                takes the whole list (acquire); the walk
 *                                reads each node's next and fields;
 *   inbox.c:coro__inbox_init(), coro__inbox_fini()    the wake cell goes back
 *                                to the pool when the owner destroys its
 *                                inbox, and the next inbox gets it again
 *                                (under pool_lock): same wake_seq,
 *                                sleeping stored false (seq_cst).
 *   sched.c's pump loop          (pump_until(), coro__pump_until() in
 *                                Chapter 5): while work remains,
 *                                drain_inbox() (empty? else take and run
 *                                what it took); with nothing run, wait.
 *                                coro_sched_poll_until() and
 *                                coro__sched_idle_wait() call the same wait
 *                                after the same "nothing to run" check.
 *
 * The run: the owner creates inbox 1, pumps until it has taken the two
 * requests it expects (producer P1's and P2's: the work that keeps its
 * work_remains() true), destroys inbox 1 and creates inbox 2, which gets
 * the recycled cell, and pumps until it has taken the requests of inbox 2:
 * P2's second and P1's second. P1 may do the rest of its first push — the
 * look at `sleeping`, the exchange, the wake_seq++ and the futex wake — at
 * any moment, also long after inbox 1 is gone, on the cell that now
 * belongs to inbox 2: the late producer. On the weak model (-DMM_WEAK),
 * whose search is far larger, P1 pushes only its first request (NNODES 3:
 * P1 is only the late producer) and each word keeps its last two stores
 * (HIST 2); the search with HIST 3 also passes (9.3 million states, 8 GB).
 *
 * Abstracts: a request is a node number: its next pointer is a word, and
 * its fields (the kind, the coroutine it names) are one word, `payload`,
 * that the producer sets (a plain store, relaxed) before its push and the
 * owner reads after its take: it must read it set. What the owner does
 * with a request is "take it"; the two inboxes are two head words; there
 * is one wake cell (the pool holds it between the two inboxes, so both get
 * it). pool_lock is a word (taking it an acquire RMW, giving it back a
 * release RMW, as glibc does); only the owner takes it here. How the
 * producers get hold of the new scheduler is a ghost guard: nothing here
 * relies on what that hand-off orders. Every wait is without deadline (a
 * wait with a deadline returns anyway, which could only hide a lost
 * wake); the futex never returns spuriously. The futex is modelled
 * exactly: futex_wait compares the word with `seen` and blocks, as one
 * step (the kernel does both under its lock, and reads the newest value),
 * or returns at once if they differ; futex_wake wakes the waiter blocked
 * on the word, if there is one (the model gives the wake no view: the
 * owner's next look at head goes through the seq_cst handshake anyway).
 * The owner is one thread throughout (a new scheduler on another thread
 * changes nothing: the pool's mutex orders the old owner before the new
 * one). A failed CAS reads with the success order here, the code's is
 * relaxed: either way it only retries.
 *
 * Proves, for every interleaving, on x86-TSO (every store-buffer drain
 * order) and on the weak model (-DMM_WEAK: every value C11 lets each load
 * read):
 *   - no lost wake: the owner never sleeps for good on a non-empty inbox
 *     once the producers are done (that is an invalid end state: the
 *     owner blocked in futex_wait, everyone else finished);
 *   - every pushed request is taken exactly once, by the owner of the
 *     inbox it was pushed to, and with the fields its producer wrote
 *     (asserts in take_one, and at the end);
 *   - a producer touches the inbox itself (in->cell, head) only while the
 *     inbox exists; after its push it touches only the cell;
 *   - with the recycled cell: the late producer's exchange, wake_seq++
 *     and futex wake on the cell of inbox 2 never make inbox 2's owner
 *     miss a wake (at worst it wakes once for nothing and looks again —
 *     compile with -DWITNESS_SPURIOUS to have SPIN show such a run).
 *
 * Mutants, x86-TSO (each must fail):
 *   -DMUTANT_PLAIN_SLEEPING  the owner's `sleeping = 1` is a release store
 *       (a plain mov, no mfence): it waits in the store buffer while the
 *       owner's load of head goes ahead; the producer's load of `sleeping`
 *       still reads 0. Lost wake (invalid end state). Fails on the weak
 *       model too: a release store is not in the seq_cst order.
 *   -DMUTANT_LOOK_FIRST  the producer reads `sleeping` before its push.
 *       It reads 0, the owner announces, checks, sleeps, then the push
 *       lands without a wake. Lost wake.
 *   -DMUTANT_NO_SEQ_CHECK  futex_wait blocks without comparing wake_seq
 *       with `seen`: a wake between the owner's check and its wait is
 *       lost. Lost wake.
 *   -DMUTANT_CELL_AFTER_PUSH  the producer reads in->cell after its push:
 *       by then the owner may have taken the request and destroyed the
 *       inbox. Use after free (assert).
 *
 * Weak mutants (each compiles on x86 to the same instructions as the
 * code, so x86-TSO passes them; each must fail on the weak model):
 *   -DMUTANT_RELAXED_SLEEPING_LOAD  the push's load of `sleeping` is
 *       relaxed: it may read the 0 from before the owner's seq_cst
 *       `sleeping = 1` while the owner's check reads the head from before
 *       the push (store buffering: on ARMv8 a plain LDR after the CASAL).
 *       Lost wake.
 *   -DMUTANT_PUSH_NO_RELEASE  the push's CAS is acquire only: its
 *       successful store carries nothing the producer wrote before it,
 *       so the owner may read the node's payload (or its next pointer)
 *       from before it was written. The payload assert. (It also leaves
 *       the seq_cst order, so a lost wake is another way it can fail.)
 *   -DMUTANT_RELAXED_TAKE  the owner's take is a relaxed exchange: it
 *       reads the pushes but takes none of their views. SPIN's first
 *       error: the walk reads a node's next pointer from before it was
 *       written, NIL, and the request behind it is lost (the owner waits
 *       for it for good); with pan -E, the payload assert.
 *   -DMUTANT_PLAIN_SLEEPING  (above) the owner's `sleeping = 1` release.
 *   -DMUTANT_ACQUIRE_CHECK  the owner's check of head after
 *       `sleeping = 1` is an acquire load: it may read the empty head
 *       from before a push that the producer's seq_cst load of
 *       `sleeping` already ordered after the announcement. Lost wake.
 *
 * The other orders of the code, which the model checks are not needed
 * for these properties (each passes on both memory models with the
 * define; the code keeps them, at no cost on x86-64 and AArch64 for the
 * loads):
 *   -DSEEN_ORDER=MM_RLX   the owner's load of wake_seq: a stale `seen`
 *       only makes futex_wait return at once (the kernel compares with
 *       the newest value);
 *   -DWAKE_ADD_ORDER=MM_RLX   the producer's wake_seq++: what the woken
 *       owner reads next it reads through the seq_cst handshake or its
 *       acquire take, not through wake_seq;
 *   -DEMPTY_ORDER=MM_RLX   coro__inbox_empty(): a "not empty" is
 *       followed by the take, whose exchange acquires (as its comment in
 *       coro_impl.h says);
 *   -DSLEEPING_XCHG_ORDER=MM_RLX   the push's exchange of `sleeping`: an
 *       RMW reads the newest value anyway; its acquire matters only for
 *       wait_fd, which inbox_hook.pml models;
 *   -DINIT_SLEEPING_ORDER=MM_RLX   coro__inbox_init()'s sleeping =
 *       false: the pool's mutex orders it after the old owner's stores,
 *       and a late producer's stale `true` is harmless (one spurious
 *       wake).
 */
#define NTHREADS 3
#define OWNER 0
#define P1 1
#define P2 2

#define HEAD1 0      /* inbox 1's head */
#define HEAD2 1      /* inbox 2's head */
#define SLEEPING 2   /* the wake cell: sleeping */
#define WAKE_SEQ 3   /* the wake cell: wake_seq, the futex word */
#define POOL_LOCK 4  /* pool_lock */
/* node n: 1: P1 -> inbox 1, 2: P2 -> inbox 1, 3: P2 -> inbox 2,
 * 4: P1 -> inbox 2. The weak model's search, far larger, leaves out node 4
 * (NNODES 3): P1 is then only the late producer. */
#ifndef NNODES
#ifdef MM_WEAK
#define NNODES 3
#else
#define NNODES 4
#endif
#endif
#define NEXT(n) (4 + (n))             /* node n's next pointer */
#define PAYLOAD(n) (4 + NNODES + (n)) /* node n's fields */
#define NWORDS (5 + 2 * NNODES)

#define NIL 0

/* The weak model keeps the last two stores of each word (weak.pml's HIST):
 * a load may read the newest or the one before it, which every
 * store-buffering and message-passing outcome here needs, and the search
 * stays within a couple of million states. */
#if defined(MM_WEAK) && !defined(HIST)
#define HIST 2
#endif

#include "memory.pml"

/* The orders of inbox.c (and coro_impl.h); each mutant weakens one. */
#ifdef MUTANT_PLAIN_SLEEPING
#define SLEEP_ORDER MM_REL  /* the owner's sleeping = 1 */
#else
#define SLEEP_ORDER MM_SC
#endif
#ifdef MUTANT_ACQUIRE_CHECK
#define CHECK_ORDER MM_ACQ  /* the owner's check of head after it */
#else
#define CHECK_ORDER MM_SC
#endif
#ifdef MUTANT_RELAXED_SLEEPING_LOAD
#define SLEEPING_LOAD_ORDER MM_RLX /* the push's look at sleeping */
#else
#define SLEEPING_LOAD_ORDER MM_SC
#endif
#ifdef MUTANT_PUSH_NO_RELEASE
#define PUSH_ORDER MM_ACQ   /* the push's CAS */
#else
#define PUSH_ORDER MM_SC
#endif
#ifdef MUTANT_RELAXED_TAKE
#define TAKE_ORDER MM_RLX   /* the owner's exchange that takes the list */
#else
#define TAKE_ORDER MM_ACQ
#endif
/* Orders the model finds not needed (see the top): */
#ifndef SEEN_ORDER
#define SEEN_ORDER MM_ACQ
#endif
#ifndef WAKE_ADD_ORDER
#define WAKE_ADD_ORDER MM_REL
#endif
#ifndef EMPTY_ORDER
#define EMPTY_ORDER MM_ACQ
#endif
#ifndef SLEEPING_XCHG_ORDER
#define SLEEPING_XCHG_ORDER MM_SC
#endif
#ifndef INIT_SLEEPING_ORDER
#define INIT_SLEEPING_ORDER MM_SC
#endif

bool alive[3];          /* alive[i]: inbox i exists (1, 2; 0 unused) */
byte pushed_to[NNODES + 1]; /* the inbox node n was pushed to, 0: not yet */
byte taken[NNODES + 1];     /* how many times the owner took node n */
bool futex_blocked;     /* the owner sleeps in futex_wait on wake_seq */

/* The kernel's futex_wait(&wake_seq, seen): compare and block in one step,
 * or return at once (EAGAIN) if the word moved on. The kernel reads the
 * newest value (mem[]). */
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

/* pthread_mutex_lock/unlock(&pool_lock) */
inline pool_lock() {
    mm_await_rmw(OWNER, POOL_LOCK, mem[POOL_LOCK] == 0, old, 1, MM_ACQ)
}
inline pool_unlock() {
    mm_rmw(OWNER, POOL_LOCK, old, 0, MM_REL);
    old = 0
}

/* coro__inbox_wait(in, CORO_FOREVER) */
inline inbox_wait(head_word, g) {
    /* spin_finds_work(): the spin before the handshake, relaxed loads of
     * head. One that sees a request returns, and the pump looks again;
     * one that times out (or is skipped) goes on. */
    spun = false;
    if
    :: mm_load(OWNER, head_word, h, MM_RLX); spun = (h != NIL)
    :: skip
    fi;
    if
    :: spun -> skip
    :: else ->
    mm_load(OWNER, WAKE_SEQ, seen, SEEN_ORDER);
    /* seq_cst store, then seq_cst load: the owner's half of the
     * handshake (on x86 the store is mov + mfence, the load a mov). */
    mm_store(OWNER, SLEEPING, 1, SLEEP_ORDER);
    mm_load(OWNER, head_word, h, CHECK_ORDER);
    if
    :: h == NIL ->
        futex_wait(seen);
#ifdef WITNESS_SPURIOUS
        /* Not a bug: shows that a late producer can wake the owner of
         * inbox 2 when nothing is there for it. */
        assert(!(g == 2 && mem[HEAD2] == NIL && pushed_to[3] == 0 &&
                 pushed_to[NNODES] == 0))
#endif
    :: else -> skip
    fi;
    mm_store(OWNER, SLEEPING, 0, MM_RLX) /* relaxed: see inbox.c */
    fi;
    d_step { seen = 0; h = 0; spun = false } /* scratch: fewer states */
}

/* The owner takes node n from the list it took out of inbox g, and reads
 * its fields. */
inline take_one(n, g) {
    d_step {
        assert(n >= 1 && n <= NNODES);
        assert(pushed_to[n] == g); /* pushed to this inbox, nowhere else */
        assert(taken[n] == 0);     /* taken once */
        taken[n]++
    };
    mm_load(OWNER, PAYLOAD(n), v, MM_RLX); /* plain reads of the fields */
    assert(v == 1); /* what its producer wrote before the push */
    v = 0
}

/* sched.c's pump loop on inbox g, whose work is `expected` requests:
 * work_remains() is true until they are all taken. */
inline pump(head_word, g, expected) {
    got = 0;
    do
    :: got == expected -> break /* work_remains() is false */
    :: else ->
        /* drain_inbox(): coro__inbox_empty(), then coro__inbox_take() */
        mm_load(OWNER, head_word, h, EMPTY_ORDER);
        if
        :: h != NIL ->
            h = 0;
            mm_xchg(OWNER, head_word, NIL, list, TAKE_ORDER);
            do /* the walk of the list (the reversal is the owner's own) */
            :: list != NIL ->
                take_one(list, g);
                got++;
                /* a plain read (into `next`: `list` names the word) */
                mm_load(OWNER, NEXT(list), next, MM_RLX);
                d_step { list = next; next = 0 }
            :: else -> break
            od
            /* run_one() runs them; then the loop looks again */
        :: else ->
            /* run_one() found nothing: sleep until a push */
            h = 0;
            inbox_wait(head_word, g)
        fi
    od
}

proctype owner() {
    int seen, h, list, next, old, v;
    bool spun;
    byte got;

    /* inbox 1 exists (init below): a new cell, wake_seq 0, sleeping 0 */
    pump(HEAD1, 1, 2);

    /* coro_sched_destroy() -> coro__inbox_fini(): the cell goes back to
     * the pool, under pool_lock. The inbox is freed. */
    pool_lock();
    pool_unlock();
    alive[1] = false;

    /* A new scheduler: coro__inbox_init() takes the same cell from the
     * pool; it keeps its wake_seq; sleeping = false is a seq_cst store. */
    pool_lock();
    pool_unlock();
    mm_store(OWNER, SLEEPING, 0, INIT_SLEEPING_ORDER);
    alive[2] = true;
    pump(HEAD2, 2, NNODES - 2);

    /* Every request taken exactly once, nothing left behind. */
    assert(taken[1] == 1 && taken[2] == 1 && taken[3] == 1);
    assert(NNODES == 3 || taken[4] == 1);
    assert(mem[HEAD2] == NIL)
}

/* coro__inbox_push(inbox g, node n) by thread t */
inline push(t, head_word, g, n) {
    /* The request's fields, before the push (remote.c): plain stores. */
    mm_store(t, PAYLOAD(n), 1, MM_RLX);
#ifdef MUTANT_LOOK_FIRST
    mm_load(t, SLEEPING, s, SLEEPING_LOAD_ORDER);
#endif
#ifndef MUTANT_CELL_AFTER_PUSH
    assert(alive[g]); /* cell = in->cell: the inbox must still exist */
#endif
    assert(alive[g]); /* and for the relaxed load of head: */
    mm_load(t, head_word, h, MM_RLX);
    do
    :: mm_store(t, NEXT(n), h, MM_RLX); /* node->next = head: plain */
       atomic {
           assert(alive[g]);
           /* seq_cst CAS: the release publishes the node's fields and
            * next; seq_cst orders the push before the look at sleeping */
           mm_cas(t, head_word, h, n, ok, PUSH_ORDER);
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
    /* seq_cst: the producer's half of the handshake */
    mm_load(t, SLEEPING, s, SLEEPING_LOAD_ORDER);
#endif
    if
    :: s != 0 ->
        mm_xchg(t, SLEEPING, 0, old, SLEEPING_XCHG_ORDER);
        if
        :: old != 0 ->
            mm_fetch_add(t, WAKE_SEQ, 1, x, WAKE_ADD_ORDER);
            futex_wake()
        :: else -> skip /* another producer wakes the owner */
        fi
    :: else -> skip /* the owner is awake */
    fi;
    d_step { h = 0; s = 0; old = 0; x = 0; ok = false } /* scratch */
}

proctype producer1() {
    int h, s, old, x;
    bool ok;

    push(P1, HEAD1, 1, 1)
#if NNODES == 4
    ;
    alive[2];
    push(P1, HEAD2, 2, 4)
#endif
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
        run mm_flusher(OWNER);
        run mm_flusher(P1);
        run mm_flusher(P2)
    }
}
