/*
 * pool_gate.pml — the pool's gate: calls into a pool racing with its
 * shutdown never touch a worker's scheduler once it is freed (pool.c).
 *
 * Models (pool.c):
 *   pool_enter(), pool_leave()   the gate: callers++ (a locked add), then
 *                                a look at `closing`;
 *   pool_go() (coro_pool_go, and coro_pool_call, which is pool_go with a
 *                                dropped hook and then waits for its event),
 *   queue_push(), wake_an_idle_worker(),
 *   coro_pool_go_on(), coro_pool_post()  a start or post straight into one
 *                                worker's scheduler;
 *   queue_close(), coro_pool_shutdown()  closing = true under the lock,
 *                                take the queue, wait for callers == 0,
 *                                drop what never started, send the stops,
 *                                worker 0's shutdown here (use_caller),
 *                                join, and only then destroy worker 0;
 *   coro_pool_destroy()          after coro_pool_wait(): stop, join, then
 *                                destroy worker 0;
 *   send_stop_requests(), stop_request(), worker_main(), worker_turn(),
 *   take_tasks(), queue_pop(), drain_and_destroy(), finish_one(),
 *   task_drop(), task_done()     the workers' side and the counting.
 *
 * The threads: SHUT calls coro_pool_shutdown() or coro_pool_destroy()
 * (with use_caller it is also worker 0, the creator, whose scheduler it
 * drives and destroys); W1 is a worker thread (without use_caller the
 * pool's only worker); CALLER makes one call into the pool — from another
 * thread, or from a coroutine of another scheduler — at any moment while
 * the pool exists. Whether the pool uses the caller, whether it is shut
 * down or destroyed, and which call is made are chosen at the start, so
 * one search covers every combination.
 *
 * Abstracts:
 *   - A worker's scheduler is an inbox of at most one item of each kind
 *     (the caller's start or post, a wake_up post, the stop request) and
 *     two flags, closed and freed. Accepting or refusing an item (is the
 *     scheduler closed?) is one step: how a post counted just before a
 *     close still arrives and keeps coro_sched_destroy() busy is the close
 *     counting protocol, proven by its own model. A destroy here frees the
 *     scheduler once its inbox is empty (drain_and_destroy()'s loop).
 *   - Touching a scheduler: a call into it (coro_post, task_start) asserts
 *     `!freed` when it starts reading the scheduler and again when it
 *     pushes into the inbox (its last touch; the inbox's wake cell is
 *     never freed, see inbox.c). So a destroy between the two is caught.
 *     Such a call may also find no memory (ENOMEM): it has read the
 *     scheduler, and pushes nothing.
 *   - A touch must also happen before the free, in C11's sense: on the
 *     weak model a free that comes later in the interleaving can still
 *     race with an access it has not "seen". So the caller's touches are
 *     a word, TOUCHED, that it writes (relaxed) as it touches, and the
 *     thread that frees a scheduler then loads it (relaxed) and asserts
 *     it sees every touch made so far: it can only if something ordered
 *     the touch before the free (check_free()). On x86-TSO the same check
 *     fails if the caller's store still waits in its buffer.
 *   - What orders things between threads in the code orders them here
 *     too, so the weak model sees the views the code relies on: a push
 *     into a worker's inbox is a seq_cst RMW of its word INBOX0/INBOX1
 *     (the inbox's CAS), a pump's take an acquire exchange of it;
 *     pthread_join() of W1 an acquire of ENDED, which W1's end releases;
 *     the user's coro_pool_destroy() comes after the call returned, an
 *     acquire of RETURNED, which the return releases.
 *   - A task runs to the end as soon as a worker has it (the coroutine,
 *     then its cleanups: call_finished, task_done). Whether it ran or was
 *     abandoned by a worker's shutdown makes no difference to the gate:
 *     both end in one task_done() and one finish_one().
 *   - p->lock is a word: taking it an acquire RMW that finds it free,
 *     giving it back a release store (on x86 glibc's unlock is a locked
 *     instruction too; as a plain store it allows the model a little more
 *     than x86 does). The queue is a length under it. The pool itself is never freed here: a call
 *     that starts after pool_free() is the user's bug.
 *   - Worker 0 (use_caller) takes nothing from the pool queue here (W1
 *     takes everything); coro_pool_wait() is "until outstanding is 0,
 *     running what arrives at worker 0 meanwhile".
 *   - queue_close()'s wait for the callers is a load that may read any
 *     value the memory model allows (0 too, on the weak model, while a
 *     newer count says a caller is in); after a load that sees a caller,
 *     it loads again once the newest count is 0 (sched_yield()).
 *
 * The orders: every atomic of pool.c is seq_cst (the plain atomic_*()
 * calls), and has that order here (memory.pml). Two handshakes need it,
 * as the comments in pool.c say, each a store-buffering pattern:
 *   - the gate: pool_enter() counts in (fetch_add callers), then loads
 *     `closing`; queue_close() stores `closing`, then loads `callers`.
 *     With all four seq_cst, one of them sees the other; weaken any one
 *     (a relaxed add, an acquire load, a release store) and C11 lets both
 *     miss: the call goes in while the shutdown goes on. Plus the release
 *     of pool_leave()'s fetch_sub, which the shutdown's load acquires:
 *     it orders the call's touches before any free (a push the worker
 *     takes orders them too, but a call that found no memory pushed
 *     nothing);
 *   - the idle handshake: worker_turn() stores idle = true, then loads
 *     `queued`; queue_push() adds to `queued` (under the lock), then
 *     wake_an_idle_worker() loads `idle`. Weaken any one, and the worker
 *     sleeps while the task it missed waits in the queue.
 * The other seq_cst orders of pool.c are more than these protocols need
 * (the model passes on the weak model with each of them relaxed):
 * queue_push()'s load of `closing` (under the lock, which orders it),
 * wake_an_idle_worker()'s exchange of `idle` (atomicity only: one caller
 * wakes the worker), worker_turn()'s store idle = false, queue_pop()'s
 * look at `queued` without the lock and its fetch_sub, queue_close()'s
 * store of queued = 0 (a stale count costs a look under the lock or a
 * turn; the idle handshake's own look decides the sleep), and
 * worker_main()'s load of `closing` (the stop request's push and take
 * order the store before it). `outstanding` orders the tasks' own writes
 * before coro_pool_wait() returns, which is not modelled.
 *
 * Proves, for every interleaving, on x86-TSO (every store-buffer drain
 * order) and on the weak model (every value C11 lets each load read):
 *   - no use of a freed scheduler: no call (nor a task's finish_one(),
 *     nor a stop request) touches a worker's scheduler after it is freed,
 *     and every touch of the call happens before the free; with
 *     use_caller, worker 0 is destroyed only after the others are joined
 *     (their last finish_one() may post to it);
 *   - a call is either refused with ESHUTDOWN or fails with ENOMEM (its
 *     task never runs, no dropped hook, and its count is given back) or
 *     accepted, and then its task ends exactly once (runs, is abandoned,
 *     or is dropped with its hook — so a coro_pool_call() always gets its
 *     answer);
 *   - nothing is lost: at the end `outstanding` is 0 and each counted task
 *     had exactly one finish_one();
 *   - no one waits forever: the shutdown's wait for the callers, the
 *     joins, the destroys and a coro_pool_call()'s wait all end (a stuck
 *     one is an invalid end state). That includes the idle handshake: a
 *     worker going to sleep never misses a task just queued.
 *
 * Mutants (each must fail, on both memory models):
 *   MUTANT_PLAIN_ENTER   pool_enter counts itself with a plain store
 *                        (callers = callers + 1, relaxed or release),
 *                        not a locked add: the store waits in the caller's
 *                        store buffer while it reads `closing` as false,
 *                        and the shutdown reads callers == 0: the caller
 *                        then touches a worker scheduler while it is
 *                        freed (the free does not see the touch).
 *   MUTANT_CHECK_FIRST   queue_close waits for callers == 0 before it sets
 *                        `closing`: a call enters in between.
 *   MUTANT_NO_RECHECK    pool_enter counts itself but never looks at
 *                        `closing`: a call that comes after the wait goes
 *                        straight into a worker's scheduler.
 *   MUTANT_EARLY_W0      with use_caller, worker 0's scheduler is
 *                        destroyed before the other workers are joined:
 *                        the last task's finish_one() on worker 1 posts to
 *                        it after it is freed.
 *   MUTANT_RELEASE_IDLE  worker_turn()'s store idle = true is release, not
 *                        seq_cst: on x86 a plain mov, and its load of
 *                        `queued` passes it; so x86 shows this one too.
 *                        The worker reads queued == 0 and sleeps, the
 *                        caller reads idle == false and wakes no one: a
 *                        coro_pool_call() waits forever (MODE_DESTROY).
 * Weak mutants (pass on x86-TSO, where each is still a locked instruction
 * or is followed by an mfence, and fail on the weak model), each one
 * order of the two handshakes weakened:
 *   MUTANT_RELAXED_ENTER   pool_enter()'s fetch_add relaxed;
 *   MUTANT_ACQUIRE_CHECK   pool_enter()'s load of `closing` acquire;
 *   MUTANT_RELEASE_CLOSE   queue_close()'s store of `closing` release (on
 *                          x86 the seq_cst store of `queued` after it
 *                          drains the buffer; C11 does not order a release
 *                          store before a later seq_cst load, though
 *                          ARMv8 would not show it: its LDAR waits for
 *                          every earlier STLR);
 *   MUTANT_ACQUIRE_WAIT    queue_close()'s load of `callers` acquire: with
 *                          any of these four, the shutdown's look reads a
 *                          count from before the call came in while the
 *                          call reads `closing` as false; the call finds
 *                          no memory, leaves, and W1 frees its scheduler
 *                          without the call's read of it ordered before;
 *   MUTANT_RELAXED_LEAVE   pool_leave()'s fetch_sub relaxed: the shutdown
 *                          sees the call out, but not what it did inside
 *                          (the same run, the call done first);
 *   MUTANT_RELAXED_QUEUE   queue_push()'s fetch_add of `queued` relaxed;
 *   MUTANT_ACQUIRE_FIND    wake_an_idle_worker()'s load of `idle` acquire;
 *   MUTANT_ACQUIRE_LOOK    worker_turn()'s load of `queued` acquire: with
 *                          any of these three (or RELEASE_IDLE), the lost
 *                          wake of RELEASE_IDLE.
 */
#define NTHREADS 3
#define SHUT 0   /* coro_pool_shutdown / coro_pool_destroy (+ worker 0) */
#define W1 1     /* worker thread 1 */
#define CALLER 2 /* makes one call into the pool */

#define CALLERS 0     /* p->callers */
#define CLOSING 1     /* p->closing */
#define QUEUED 2      /* p->queued */
#define OUTSTANDING 3 /* p->outstanding */
#define IDLE1 4       /* p->workers[1].idle */
#define LOCK 5        /* p->lock: 0 free, else the holder's thread + 1 */
#define INBOX0 6      /* worker 0's inbox: pushes not yet taken */
#define INBOX1 7      /* worker 1's inbox */
#define ENDED 8       /* W1's thread has returned: pthread_join() */
#define RETURNED 9    /* the call has returned (the user then destroys) */
#define TOUCHED 10    /* the caller's accesses to the workers' schedulers */
#define NWORDS 11

#include "memory.pml"

/* The orders of pool.c (all seq_cst: its atomics are the plain
 * atomic_*() calls); each weak mutant weakens one. */
#ifdef MUTANT_RELAXED_ENTER
#define ENTER_ORDER MM_RLX  /* pool_enter(): fetch_add(callers) */
#else
#define ENTER_ORDER MM_SC
#endif
#ifdef MUTANT_ACQUIRE_CHECK
#define CHECK_ORDER MM_ACQ  /* pool_enter(): load(closing) */
#else
#define CHECK_ORDER MM_SC
#endif
#ifdef MUTANT_RELAXED_LEAVE
#define LEAVE_ORDER MM_RLX  /* pool_leave(): fetch_sub(callers) */
#else
#define LEAVE_ORDER MM_SC
#endif
#ifdef MUTANT_RELEASE_CLOSE
#define CLOSE_ORDER MM_REL  /* queue_close(): store(closing, true) */
#else
#define CLOSE_ORDER MM_SC
#endif
#ifdef MUTANT_ACQUIRE_WAIT
#define WAIT_ORDER MM_ACQ   /* queue_close(): load(callers) */
#else
#define WAIT_ORDER MM_SC
#endif
#ifdef MUTANT_RELAXED_QUEUE
#define QUEUE_ORDER MM_RLX  /* queue_push(): fetch_add(queued) */
#else
#define QUEUE_ORDER MM_SC
#endif
#ifdef MUTANT_ACQUIRE_FIND
#define FIND_ORDER MM_ACQ   /* wake_an_idle_worker(): load(idle) */
#else
#define FIND_ORDER MM_SC
#endif
#ifdef MUTANT_RELEASE_IDLE
#define IDLE_ORDER MM_REL   /* worker_turn(): store(idle, true) */
#else
#define IDLE_ORDER MM_SC
#endif
#ifdef MUTANT_ACQUIRE_LOOK
#define LOOK_ORDER MM_ACQ   /* worker_turn(): load(queued) */
#else
#define LOOK_ORDER MM_SC
#endif

/* The call the caller makes. */
#define OP_CALL 0   /* coro_pool_call (pool_go + wait); covers coro_pool_go */
#define OP_INTO1 1  /* coro_pool_go_on(1), or coro_pool_post (which, with
                       use_caller, goes to worker 1; without, this is the
                       only worker) */
#define OP_INTO0 2  /* coro_pool_go_on(0) with use_caller: into worker 0,
                       the creator's scheduler */

#define MODE_SHUTDOWN 0 /* coro_pool_shutdown, racing with the call */
#define MODE_DESTROY 1  /* coro_pool_wait, then coro_pool_destroy */

bool use_caller;
byte mode;
byte op;

byte queue_len;   /* p->head .. p->tail, under the lock */

/* The workers' schedulers: [0] worker 0 with use_caller (SHUT's), [1] W1's. */
bool freed[2];
bool closed[2];
bool in_task[2]; /* the caller's start or post waits in its inbox */
bool in_wake[2]; /* a wake_up post waits in its inbox */
bool in_stop;    /* W1's stop request waits in its inbox */
bool stop1;      /* p->workers[1].stop */

/* What happened to the caller's task, for the checks at the end. */
byte task_made;     /* counted in `outstanding` */
byte task_finished; /* finish_one() calls (there is one task) */
byte task_ends;     /* it ran or was abandoned or dropped: its hook/event */
bool accepted;      /* the call returned 0 */
bool refused;       /* the call returned ESHUTDOWN */
bool nomem;         /* the call returned ENOMEM */
bool call_returned;
bool shut_done;
byte touched;       /* bit w: the caller has touched worker w's scheduler */

/* pthread_mutex_lock / unlock: an acquire RMW that finds it free (on
 * x86 a locked instruction: it drains the buffer), a release store. */
inline mutex_lock(t) {
    mm_await_rmw(t, LOCK, mem[LOCK] == 0, lk, t + 1, MM_ACQ)
}
inline mutex_unlock(t) {
    mm_store(t, LOCK, 0, MM_REL)
}

/* The caller touches worker w's scheduler (reads or writes it): a relaxed
 * store of every bit it has touched so far. Its free must come after
 * (check_free()). */
inline touch(w) {
    atomic {
        mm_store(CALLER, TOUCHED, touched | (1 << w), MM_RLX);
        touched = touched | (1 << w)
    }
}

/* Thread t has just freed worker w's scheduler; `seen`: the caller's
 * touches before the free. Each must happen before it (in C11 terms:
 * else the free races with the caller's access): then t's view has the
 * store of touch(), and no load of t can read an older one. */
inline check_free(t, w, seen) {
    mm_load(t, TOUCHED, v, MM_RLX);
    assert((seen & (1 << w)) == 0 || (v & (1 << w)) != 0)
}

/* A push into worker w's inbox (coro__inbox_push(): a seq_cst CAS), in
 * the step that decides it; `flag` is the kind of item pushed. */
#define PUSH(t, w, flag) mm_rmw(t, INBOX0 + (w), ib, ib + 1, MM_SC); flag = true

/* coro_post(workers[w].sched, wake_up, NULL) on thread t: the scheduler
 * is read, and the post is queued unless it is closed (then ESHUTDOWN,
 * ignored). */
inline post_wake(t, w) {
    if
    :: t == CALLER -> touch(w)
    :: else -> skip
    fi;
    atomic {
        assert(!freed[w]);
        if
        :: !closed[w] -> PUSH(t, w, in_wake[w])
        :: else -> skip
        fi
    }
}

/* finish_one(): the last piece of work wakes coro_pool_wait(): with
 * use_caller by a post to worker 0 (the broadcast under p->lock touches
 * only the pool). */
inline finish_one(t) {
    mm_fetch_add(t, OUTSTANDING, -1, fo_old, MM_SC);
    task_finished++;
    if
    :: fo_old == 1 && use_caller -> post_wake(t, 0)
    :: else -> skip
    fi
}

/* send_stop_requests() for W1: coro__post_always(), even if closed. W1
 * cannot free its scheduler before this post has been delivered. */
inline send_stop() {
    assert(!freed[1]);
    atomic { assert(!freed[1]); PUSH(SHUT, 1, in_stop) }
}

/* W1's pump runs what has arrived (coro_sched_poll_until / run): the
 * take is an acquire exchange of the inbox's head. */
inline w1_poll() {
    atomic {
        mm_xchg(W1, INBOX1, 0, ib, MM_ACQ);
        got_task = in_task[1];
        got_stop = in_stop;
        in_task[1] = false;
        in_wake[1] = false;
        in_stop = false
    }
    if
    :: got_task -> task_ends++; finish_one(W1) /* runs, or is abandoned */
    :: else -> skip
    fi;
    if
    :: got_stop -> stop1 = true /* stop_request() */
    :: else -> skip
    fi
}

/* Worker 0's pump, on SHUT's thread. */
inline w0_poll() {
    atomic {
        mm_xchg(SHUT, INBOX0, 0, ib, MM_ACQ);
        got_task = in_task[0];
        in_task[0] = false;
        in_wake[0] = false
    }
    if
    :: got_task -> task_ends++; finish_one(SHUT)
    :: else -> skip
    fi
}

/* drain_and_destroy(workers[0].sched): run, destroy; EBUSY while
 * something is left. */
inline w0_drain_and_destroy() {
    do
    :: d_step { !in_task[0] && !in_wake[0] -> freed[0] = true; seen = touched }; break
    :: else -> w0_poll()
    od;
    check_free(SHUT, 0, seen)
}

/* queue_close()'s wait: while (atomic_load(&p->callers) != 0)
 * sched_yield(); A load may read an older value (0 too: the weak
 * mutants' bug); after one that reads callers in, the loop comes round
 * again once the newest value is 0 (or forever: an invalid end state). */
inline wait_callers() {
    do
    :: mm_load(SHUT, CALLERS, v, WAIT_ORDER);
       if
       :: v == 0 -> break
       :: else -> mem[CALLERS] == 0 /* sched_yield() */
       fi
    od
}

proctype caller() {
    int v, fo_old, ib, lk;
    byte w;

    /* pool_enter() */
#ifdef MUTANT_PLAIN_ENTER
    mm_load(CALLER, CALLERS, v, MM_RLX);
    mm_store(CALLER, CALLERS, v + 1, MM_RLX);
#else
    mm_fetch_add(CALLER, CALLERS, 1, v, ENTER_ORDER);
#endif
#ifdef MUTANT_NO_RECHECK
    v = 0;
#else
    mm_load(CALLER, CLOSING, v, CHECK_ORDER);
#endif
    if
    :: v != 0 ->
        refused = true;
        mm_fetch_add(CALLER, CALLERS, -1, v, MM_SC); /* ESHUTDOWN */
        goto out
    :: else -> skip
    fi;

    /* Inside the gate: the shutdown waits for us before any worker may
     * free its scheduler. */
    mm_fetch_add(CALLER, OUTSTANDING, 1, v, MM_SC);
    task_made = 1;
    if
    :: op == OP_CALL ->
        /* queue_push(): refused once closing, under the lock. */
        mutex_lock(CALLER);
        mm_load(CALLER, CLOSING, v, MM_SC);
        if
        :: v != 0 ->
            mutex_unlock(CALLER);
            finish_one(CALLER); /* free(t), no dropped hook: ESHUTDOWN */
            refused = true
        :: else ->
            queue_len++;
            mm_fetch_add(CALLER, QUEUED, 1, v, QUEUE_ORDER);
            mutex_unlock(CALLER);
            /* wake_an_idle_worker(): worker 0 of use_caller is idle only
             * inside coro_pool_wait(), which does not take from the queue
             * here; so only W1 is looked at. */
            mm_load(CALLER, IDLE1, v, FIND_ORDER);
            if
            :: v != 0 ->
                mm_xchg(CALLER, IDLE1, 0, v, MM_SC);
                if
                :: v != 0 ->
                    assert(!freed[1]); /* coro_post() starts reading it */
                    post_wake(CALLER, 1)
                :: else -> skip
                fi
            :: else -> skip
            fi;
            accepted = true
        fi
    :: else ->
        /* coro_pool_go_on() / coro_pool_post(): task_start() or
         * coro_post() into that worker's scheduler. */
        if
        :: op == OP_INTO0 -> w = 0
        :: else -> w = 1
        fi;
        assert(!freed[w]); /* it reads the scheduler (closed?) ... */
        touch(w);
        atomic {
            assert(!freed[w]); /* ... and pushes into its inbox */
            if
            :: !closed[w] -> PUSH(CALLER, w, in_task[w]); accepted = true
            :: !closed[w] -> nomem = true /* ENOMEM: read, nothing pushed */
            :: else -> refused = true /* the worker's ESHUTDOWN */
            fi
        }
        if
        :: !accepted -> finish_one(CALLER) /* free(t) */
        :: else -> skip
        fi
    fi;
    mm_fetch_add(CALLER, CALLERS, -1, v, LEAVE_ORDER); /* pool_leave() */

    if
    :: op == OP_CALL && accepted ->
        (task_ends > 0) /* coro_event_await(&call->done) */
    :: else -> skip
    fi;
out:
    /* The call returns; the user's coro_pool_destroy() comes after it
     * (a release the user's own synchronization gives) */
    atomic { mm_rmw(CALLER, RETURNED, v, 1, MM_REL); call_returned = true }
}

proctype worker1() {
    int v, fo_old, ib, lk;
    bool got_task, got_stop;
    byte seen;

    /* worker_main(): while (!w->stop) worker_turn(w); */
    do
    :: stop1 -> break
    :: else ->
        /* take_tasks(w, 1) -> queue_pop(): a look without the lock first */
        got_task = false;
        mm_load(W1, QUEUED, v, MM_SC);
        if
        :: v != 0 ->
            mutex_lock(W1);
            if
            :: queue_len > 0 ->
                queue_len--;
                mm_fetch_add(W1, QUEUED, -1, v, MM_SC);
                got_task = true
            :: else -> skip
            fi;
            mutex_unlock(W1)
        :: else -> skip
        fi;
        if
        :: got_task ->
            /* task_start() on its own scheduler; the poll runs it */
            task_ends++;
            finish_one(W1)
        :: else ->
            if
            :: in_task[1] || in_wake[1] || in_stop -> w1_poll()
            :: else ->
                /* Nothing ran: idle = true, then look at the queue. */
                mm_store(W1, IDLE1, 1, IDLE_ORDER);
                mm_load(W1, QUEUED, v, LOOK_ORDER);
                if
                :: v == 0 && !stop1 ->
                    /* coro__sched_idle_wait(): until something arrives */
                    (in_task[1] || in_wake[1] || in_stop)
                :: else -> skip
                fi;
                mm_store(W1, IDLE1, 0, MM_SC)
            fi
        fi
    od;
    mm_load(W1, CLOSING, v, MM_SC);
    if
    :: v != 0 -> closed[1] = true /* coro__sched_shutdown_until() closes */
    :: else -> skip
    fi;
    /* drain_and_destroy(): what still arrives runs (or is abandoned) */
    do
    :: d_step { !in_task[1] && !in_wake[1] && !in_stop -> freed[1] = true; seen = touched }; break
    :: else -> w1_poll()
    od;
    check_free(W1, 1, seen);
    mm_rmw(W1, ENDED, v, 1, MM_REL) /* the thread returns */
}

proctype shutter() {
    int v, fo_old, ib, lk;
    byte dropped, seen;
    bool got_task;

    if
    :: mode == MODE_SHUTDOWN ->
        /* coro_pool_shutdown() -> queue_close() */
#ifdef MUTANT_CHECK_FIRST
        wait_callers();
#endif
        mutex_lock(SHUT);
        mm_store(SHUT, CLOSING, 1, CLOSE_ORDER);
        dropped = queue_len;
        queue_len = 0;
        mm_store(SHUT, QUEUED, 0, MM_SC);
        mutex_unlock(SHUT);
#ifndef MUTANT_CHECK_FIRST
        wait_callers();
#endif
        if
        :: dropped > 0 ->
            /* task_drop(): the dropped hook (call_finished), finish_one */
            task_ends++;
            finish_one(SHUT)
        :: else -> skip
        fi;
        send_stop();
        if
        :: use_caller ->
            /* coro__sched_shutdown_until(workers[0].sched): close, pump */
            closed[0] = true;
            w0_poll()
        :: else -> skip
        fi;
#ifdef MUTANT_EARLY_W0
        if
        :: use_caller -> w0_drain_and_destroy()
        :: else -> skip
        fi;
#endif
        mm_await(SHUT, ENDED, mem[ENDED] != 0, v, MM_ACQ); /* pthread_join() */
#ifndef MUTANT_EARLY_W0
        if
        :: use_caller -> w0_drain_and_destroy()
        :: else -> skip
        fi
#endif
    :: mode == MODE_DESTROY ->
        /* The user's coro_pool_wait(), after the call has returned
         * (coro_pool_destroy is not called while calls are made). */
        do
        :: mm_await(SHUT, RETURNED, mem[RETURNED] != 0 && mem[OUTSTANDING] == 0,
                    v, MM_ACQ) -> break
        :: use_caller && (in_task[0] || in_wake[0]) -> w0_poll()
        od;
        /* coro_pool_destroy(): outstanding is 0, or EBUSY */
        mm_load(SHUT, OUTSTANDING, v, MM_SC);
        assert(v == 0);
#ifdef MUTANT_EARLY_W0
        if
        :: use_caller -> w0_drain_and_destroy()
        :: else -> skip
        fi;
#endif
        send_stop();  /* stop_workers(): send, */
        mm_await(SHUT, ENDED, mem[ENDED] != 0, v, MM_ACQ); /* join */
#ifndef MUTANT_EARLY_W0
        if
        :: use_caller -> w0_drain_and_destroy()
        :: else -> skip
        fi
#endif
    fi;
    shut_done = true
}

/* The checks once everything is over. */
proctype checker() {
    (shut_done && call_returned);
    assert(accepted + refused + nomem == 1); /* 0, ESHUTDOWN or ENOMEM */
    assert(mem[OUTSTANDING] == 0);       /* nothing counted is left */
    assert(task_finished == task_made);  /* one finish_one() per task */
    assert(accepted || task_ends == 0);  /* refused: never runs, no hook */
    assert(!accepted || task_ends == 1); /* accepted: ends exactly once */
    assert(freed[1] && (!use_caller || freed[0]))
}

init {
    if
    :: use_caller = false
    :: use_caller = true
    fi;
    if
    :: mode = MODE_SHUTDOWN
    :: mode = MODE_DESTROY
    fi;
    if
    :: op = OP_CALL
    :: op = OP_INTO1
    :: use_caller -> op = OP_INTO0
    fi;
    atomic {
        run mm_flusher(SHUT);
        run mm_flusher(W1);
        run mm_flusher(CALLER);
        run shutter();
        run worker1();
        run caller();
        run checker()
    }
}
