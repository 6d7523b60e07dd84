/*
 * signal_hook.pml — a signal's close on the pump's own thread while the
 * pump waits in its wait hook: the capstone's path (examples/http_server.c:
 * coro_sched_close_on_signal(), coro_sched_set_wait() with an epoll_wait
 * hook, then coro_sched_run()). signal.pml has the signal while the pump
 * sleeps on the futex; inbox_hook.pml has the hook woken by producers on
 * other threads. Here the producer is a signal handler that interrupts the
 * owner itself.
 *
 * Models (each atomic with the C11 order the code gives it):
 *   signal.c:close_registered() -> shutdown.c:coro__sched_close_async()
 *                 closed = true (seq_cst), exchange close_sent (seq_cst);
 *                 the one that finds it false sets the embedded request's
 *                 kind (a plain store) and pushes it;
 *   inbox.c:coro__inbox_push()  relaxed load of head, node->next = head,
 *                 the CAS (seq_cst), the load (seq_cst) and the exchange
 *                 (seq_cst) of `sleeping`, and the winner's
 *                 write(eventfd, 1) (the hook is installed throughout, so
 *                 wait_fd, read relaxed after the exchange, is always the
 *                 eventfd: left out);
 *   inbox.c:wait_in_hook()  sleeping = 1 (seq_cst), check head (seq_cst),
 *                 the hook, sleeping = 0 (relaxed), read(eventfd);
 *   the hook      an epoll_wait on a set that holds the eventfd, without
 *                 deadline: it returns when the eventfd is readable; and
 *                 when a signal handler ran while it waited, it may return
 *                 at once (EINTR, as the capstone's hook does) or wait on
 *                 (a hook that retries on EINTR);
 *   sched.c:coro__pump_until()  drain the inbox (coro__inbox_empty(),
 *                 acquire; coro__inbox_take(), an acquire exchange; the
 *                 walk reads each node's next and fields), and with
 *                 nothing run, wait; remote.c:take_in() of the close
 *                 request reads the scheduler closed.
 *
 * The threads: OWNER pumps until it has taken both requests: the close
 * request and OTHER's post. OTHER, another thread, pushes its post (a
 * request like any, inbox_hook.pml's producer) and then, with
 * -DCROSS_CLOSE=1 (the default), calls coro_sched_close() too, from its
 * thread: coro__sched_close_async(). A signal is delivered to OWNER at any
 * moment while it pumps, once surely and a second time maybe (SIGNALS 2:
 * a second Ctrl-C): its handler runs close_registered() on OWNER's
 * thread. It uses OWNER's store buffer and view, and the owner does not
 * move while it runs (the `provided` clause): it runs between any two
 * steps of the owner, between `sleeping = 1` and its mfence, between the
 * check of head and the epoll_wait, inside the epoll_wait. A signal is
 * blocked in its own handler, so the two deliveries do not nest.
 *
 * Abstracts: the registry (signal.pml's), the scheduler's destroy (the
 * signal comes while it pumps), the futex, the spin and mode changes
 * (inbox.pml, inbox_hook.pml), the poll of the hook while work is ready
 * (it does not block), what the close does once taken (cancel_members():
 * nothing alive here). A request's fields are one word set before its
 * push (the close request's kind; the post's). The eventfd's counter is a
 * word, 0 or 1; write and read are RMWs under its lock (acq_rel), the
 * hook's return on readable an acquire wait on it.
 *
 * Proves, for every interleaving and every moment of delivery, on x86-TSO
 * (every store-buffer drain order) and on the weak model (-DMM_WEAK:
 * every value C11 lets each load read):
 *   - the owner never waits for good in the hook with a request in the
 *     inbox (an invalid end state), whether the hook returns on EINTR or
 *     retries;
 *   - the close request is pushed and taken exactly once, whoever closes
 *     (one or two signals, and OTHER), and every request is taken once
 *     with the fields its pusher wrote; who takes the close request reads
 *     the scheduler closed.
 *
 * The same thread versus another thread. The handler's half of the
 * handshake (push; load `sleeping`; exchange) runs in the owner's program
 * order, between two of the owner's own steps: it sees the owner's last
 * store of `sleeping` (its own store buffer on x86; its own view under
 * C11), so the store-buffering race that the seq_cst orders close for a
 * producer on another thread cannot happen between a handler and its own
 * thread: -DHANDLER_RELAXED (every atomic of the handler relaxed) passes
 * on both models. What the handler can do is run where no other thread
 * could: after the owner's check of head found it empty and before the
 * epoll_wait: the handler's push then finds `sleeping` true (the owner's
 * own store), and its write to the eventfd is what makes the epoll_wait
 * return at once. The eventfd being sticky, emptied only after the hook,
 * and the handler writing it although it runs on the owner's thread, are
 * what this model checks; and that a hook returning on EINTR is woken
 * twice at worst, never lost.
 *
 * Mutants, x86-TSO and weak (each must fail):
 *   -DMUTANT_SAME_THREAD_NO_WAKE  a push on the owner's thread skips the
 *       wake ("the owner runs this code, so it is not asleep": true for a
 *       coroutine's push, the shortcut coro__deliver_ready() takes, wrong
 *       for a signal handler). The handler runs between the check and the
 *       epoll_wait (or in it, under a hook that retries on EINTR), pushes
 *       without writing the eventfd, and the hook waits for good.
 *   -DMUTANT_DRAIN_EARLY  the library empties the eventfd after its check
 *       of head and before calling the hook: a handler between the two
 *       writes it, the emptying throws the write away. Lost wake.
 *   -DMUTANT_NO_CLOSE_SENT  every close pushes the embedded request (no
 *       exchange on close_sent): a second signal, or OTHER's close, pushes
 *       it again, while it is still in the inbox (node->next = the node
 *       itself) or after the owner took it. Taken twice (assert).
 * Weak mutants (x86-TSO passes them: the same instructions):
 *   -DMUTANT_RELAXED_SLEEPING_LOAD  the push's load of `sleeping` relaxed,
 *       for every pusher: OTHER's push reads the 0 from before the owner's
 *       `sleeping = 1` while the owner's check reads the head from before
 *       the push. Lost wake. (Relaxed for the handler only: passes, see
 *       HANDLER_RELAXED.)
 *   -DMUTANT_PUSH_NO_RELEASE  the push's CAS acquire only, for every
 *       pusher: the owner may take OTHER's request (or the close request
 *       OTHER pushed) and read its fields, or `closed`, from before they
 *       were written: the payload assert (pan -E shows it). SPIN's first
 *       error is the other way it fails: the CAS is no longer seq_cst, the
 *       owner's check reads the head from before it. Lost wake.
 */
#define NTHREADS 2
#define OWNER 0
#define OTHER 1

#define HEAD 0        /* the inbox's head */
#define SLEEPING 1    /* the wake cell: sleeping */
#define EFD 2         /* the eventfd's counter: 0 or 1 (readable) */
#define CLOSED 3      /* s->closed */
#define CLOSE_SENT 4  /* s->close_sent */
#define CLOSE_NODE 1  /* s->close_remote, embedded in the scheduler */
#define POST_NODE 2   /* OTHER's request */
#define NNODES 2
#define NEXT(n) (4 + (n))             /* node n's next pointer: 5, 6 */
#define PAYLOAD(n) (4 + NNODES + (n)) /* node n's fields: 7, 8 */
#define NWORDS 9

#define NIL 0

#include "memory.pml"

/* Deliveries to the owner, the first one surely. The weak model's search,
 * larger, has one (a second handler on the same thread is program order
 * after the first: it reads its own close_sent); -DSIGNALS=2 passes
 * there too, in 5.3 million states. */
#ifndef SIGNALS
#ifdef MM_WEAK
#define SIGNALS 1
#else
#define SIGNALS 2
#endif
#endif
#ifndef CROSS_CLOSE
#define CROSS_CLOSE 1 /* OTHER also calls coro_sched_close() */
#endif

/* The orders of inbox.c and shutdown.c, for a push by thread t. */
#ifdef MUTANT_RELAXED_SLEEPING_LOAD
#define SLEEPING_LOAD_ORDER(t) MM_RLX
#else
#define SLEEPING_LOAD_ORDER(t) ORD(t, MM_SC)
#endif
#ifdef MUTANT_PUSH_NO_RELEASE
#define PUSH_ORDER(t) MM_ACQ
#else
#define PUSH_ORDER(t) ORD(t, MM_SC)
#endif
/* -DHANDLER_RELAXED: every atomic of the handler relaxed (passes). */
#ifdef HANDLER_RELAXED
#define ORD(t, o) ((t) == OWNER -> MM_RLX : (o))
#else
#define ORD(t, o) (o)
#endif

bool in_handler;      /* a signal handler interrupts the owner */
byte deliveries;      /* signals delivered so far */
bool pumping = true;  /* the owner is in its pump */
bool in_hook;         /* the owner is inside the hook's epoll_wait */
bool eintr;           /* a handler ran while it was: EINTR */
byte pushed[NNODES + 1]; /* how many times node n was pushed */
byte taken[NNODES + 1];  /* how many times the owner took node n */

/* coro__inbox_push(node n) by thread t (the handler: t == OWNER). */
inline push(t, n) {
    mm_store(t, PAYLOAD(n), 1, MM_RLX); /* its fields: plain stores */
    mm_load(t, HEAD, h, MM_RLX);
    do
    :: mm_store(t, NEXT(n), h, MM_RLX); /* node->next = head: plain */
       atomic {
           mm_cas(t, HEAD, h, n, ok, PUSH_ORDER(t)); /* seq_cst CAS */
           if
           :: ok -> pushed[n]++; assert(pushed[n] == 1) /* pushed once */
           :: else -> skip
           fi
       };
       if :: ok -> break :: else -> skip fi
    od;
#ifdef MUTANT_SAME_THREAD_NO_WAKE
    if
    :: t == OWNER -> s = 0 /* "on the owner's thread: it is awake" */
    :: else -> mm_load(t, SLEEPING, s, SLEEPING_LOAD_ORDER(t))
    fi;
#else
    mm_load(t, SLEEPING, s, SLEEPING_LOAD_ORDER(t)); /* seq_cst */
#endif
    if
    :: s != 0 ->
        mm_xchg(t, SLEEPING, 0, old, ORD(t, MM_SC));
        if
        :: old != 0 -> mm_rmw(t, EFD, x, 1, MM_ACQ_REL) /* write(efd, 1) */
        :: else -> skip /* another pusher wakes the owner */
        fi
    :: else -> skip /* the owner is awake */
    fi;
    d_step { h = 0; s = 0; old = 0; x = 0; ok = false } /* scratch */
}

/* coro__sched_close_async() by thread t */
inline close_async(t) {
    mm_store(t, CLOSED, 1, ORD(t, MM_SC));
#ifdef MUTANT_NO_CLOSE_SENT
    old = 0;
#else
    mm_xchg(t, CLOSE_SENT, 1, old, ORD(t, MM_SC));
#endif
    if
    :: old == 0 -> old = 0; push(t, CLOSE_NODE) /* kind = CLOSE; push */
    :: else -> old = 0 /* sent already */
    fi
}

/* The handler: close_registered() for the scheduler's slot, on OWNER's
 * thread. The first signal comes surely while the owner pumps; a second
 * may. */
proctype handler() {
    int h, s, old, x;
    bool ok;

    do
    :: atomic {
           pumping && deliveries < SIGNALS ->
           in_handler = true; deliveries++;
           eintr = in_hook /* it interrupts the epoll_wait */
       };
       close_async(OWNER);
       in_handler = false
    :: deliveries >= 1 || !pumping -> break
    od
}

/* The owner takes node n and reads its fields. */
inline take_one(n) {
    d_step {
        assert(n >= 1 && n <= NNODES);
        assert(pushed[n] >= 1);
        assert(taken[n] == 0); /* taken once */
        taken[n]++
    };
    mm_load(OWNER, PAYLOAD(n), v, MM_RLX);
    assert(v == 1); /* what its pusher wrote before the push */
    if
    :: n == CLOSE_NODE -> /* take_in(): the close came after closed */
        mm_load(OWNER, CLOSED, v, MM_RLX);
        assert(v == 1)
    :: else -> skip
    fi;
    v = 0
}

/* inbox.c:wait_in_hook() */
inline hook_wait() {
    mm_store(OWNER, SLEEPING, 1, MM_SC);
    mm_load(OWNER, HEAD, h, MM_SC);
    if
    :: h == NIL ->
#ifdef MUTANT_DRAIN_EARLY
        mm_rmw(OWNER, EFD, old, 0, MM_ACQ_REL); /* read(eventfd) */
#endif
        in_hook = true; /* in epoll_wait */
        if
        :: mm_await(OWNER, EFD, mem[EFD] != 0, old, MM_ACQ) /* readable */
        :: eintr -> skip /* a handler ran: EINTR, and this hook returns */
        fi;
        d_step { in_hook = false; eintr = false }
    :: else -> skip
    fi;
    mm_store(OWNER, SLEEPING, 0, MM_RLX);
#ifndef MUTANT_DRAIN_EARLY
    mm_rmw(OWNER, EFD, old, 0, MM_ACQ_REL); /* read(eventfd): empty it */
#endif
    d_step { h = 0; old = 0 }
}

proctype owner() provided (!in_handler) {
    int h, list, next, old, v;
    byte got;

    do
    :: got == NNODES -> break
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
                mm_load(OWNER, NEXT(list), next, MM_RLX);
                d_step { list = next; next = 0 }
            :: else -> break
            od
        :: else -> h = 0; hook_wait()
        fi
    od;
    pumping = false;
    /* Both taken once; the close request pushed once. */
    assert(taken[CLOSE_NODE] == 1 && taken[POST_NODE] == 1);
    assert(pushed[CLOSE_NODE] == 1);
    assert(mem[HEAD] == NIL)
}

proctype other() {
    int h, s, old, x;
    bool ok;

    push(OTHER, POST_NODE)
#if CROSS_CLOSE
    ;
    close_async(OTHER) /* coro_sched_close() from another thread */
#endif
}

init {
    atomic {
        run owner();
        run handler();
        run other();
        run mm_flusher(OWNER);
        run mm_flusher(OTHER)
    }
}
