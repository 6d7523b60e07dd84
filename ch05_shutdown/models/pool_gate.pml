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
 *   - A task runs to the end as soon as a worker has it (the coroutine,
 *     then its cleanups: call_finished, task_done). Whether it ran or was
 *     abandoned by a worker's shutdown makes no difference to the gate:
 *     both end in one task_done() and one finish_one().
 *   - p->lock is a real lock (taking and releasing it are locked
 *     instructions: they drain the store buffer). The queue is a length
 *     under it. The pool itself is never freed here: a call that starts
 *     after pool_free() is the user's bug.
 *   - Worker 0 (use_caller) takes nothing from the pool queue here (W1
 *     takes everything); coro_pool_wait() is "until outstanding is 0,
 *     running what arrives at worker 0 meanwhile".
 *   - seq_cst stores are a store and an mfence (GCC on x86-64), one step
 *     as the thread does nothing between the two; seq_cst loads are plain
 *     loads; the counters are locked read-modify-writes.
 *
 * Proves, for every interleaving and store-buffer drain order of x86-TSO:
 *   - no use of a freed scheduler: no call (nor a task's finish_one(),
 *     nor a stop request) touches a worker's scheduler after it is freed;
 *     with use_caller, worker 0 is destroyed only after the others are
 *     joined (their last finish_one() may post to it);
 *   - a call is either refused with ESHUTDOWN (its task never runs, no
 *     dropped hook, and its count is given back) or accepted, and then its
 *     task ends exactly once (runs, is abandoned, or is dropped with its
 *     hook — so a coro_pool_call() always gets its answer);
 *   - nothing is lost: at the end `outstanding` is 0 and each counted task
 *     had exactly one finish_one();
 *   - no one waits forever: the shutdown's wait for the callers, the
 *     joins, the destroys and a coro_pool_call()'s wait all end (a stuck
 *     one is an invalid end state). That includes the idle handshake: a
 *     worker going to sleep never misses a task just queued.
 *
 * Mutants (each must fail):
 *   MUTANT_PLAIN_ENTER   pool_enter counts itself with a plain store
 *                        (callers = callers + 1, relaxed or release),
 *                        not a locked add: the store waits in the caller's
 *                        store buffer while it reads `closing` as false,
 *                        and the shutdown reads callers == 0: the caller
 *                        then touches a freed worker scheduler.
 *   MUTANT_CHECK_FIRST   queue_close waits for callers == 0 before it sets
 *                        `closing`: a call enters in between.
 *   MUTANT_NO_RECHECK    pool_enter counts itself but never looks at
 *                        `closing`: a call that comes after the wait goes
 *                        straight into a worker's scheduler.
 *   MUTANT_EARLY_W0      with use_caller, worker 0's scheduler is
 *                        destroyed before the other workers are joined:
 *                        the last task's finish_one() on worker 1 posts to
 *                        it after it is freed.
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
#define NWORDS 5

#include "tso.pml"

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

byte lock_holder; /* p->lock: 0 free, else the holder's thread + 1 */
byte queue_len;   /* p->head .. p->tail, under the lock */

/* The workers' schedulers: [0] worker 0 with use_caller (SHUT's), [1] W1's. */
bool freed[2];
bool closed[2];
bool in_task[2]; /* the caller's start or post waits in its inbox */
bool in_wake[2]; /* a wake_up post waits in its inbox */
bool in_stop;    /* W1's stop request waits in its inbox */
bool stop1;      /* p->workers[1].stop */
bool w1_exited;  /* W1's thread has returned: pthread_join() returns */

/* What happened to the caller's task, for the checks at the end. */
byte task_made;     /* counted in `outstanding` */
byte task_finished; /* finish_one() calls (there is one task) */
byte task_ends;     /* it ran or was abandoned or dropped: its hook/event */
bool accepted;      /* the call returned 0 */
bool refused;       /* the call returned ESHUTDOWN */
bool call_returned;
bool shut_done;

/* pthread_mutex_lock / unlock: locked instructions, they drain the buffer. */
inline mutex_lock(t) {
    d_step { lock_holder == 0 -> tso_drain_all(t); lock_holder = t + 1 }
}
inline mutex_unlock(t) {
    d_step { tso_drain_all(t); lock_holder = 0 }
}

/* A seq_cst store: GCC's mov + mfence. The thread does nothing between
 * the two, so it is one step: drain the buffer, then the store reaches
 * memory (as an xchg would). */
inline sc_store(t, w, v) {
    d_step { tso_drain_all(t); mem[w] = v }
}

/* coro_post(workers[w].sched, wake_up, NULL): the scheduler is read, and
 * the post is queued unless it is closed (then ESHUTDOWN, ignored). */
inline post_wake(w) {
    d_step {
        assert(!freed[w]);
        if
        :: !closed[w] -> in_wake[w] = true
        :: else -> skip
        fi
    }
}

/* finish_one(): the last piece of work wakes coro_pool_wait(): with
 * use_caller by a post to worker 0 (the broadcast under p->lock touches
 * only the pool). */
inline finish_one(t) {
    tso_fetch_add(t, OUTSTANDING, -1, fo_old);
    task_finished++;
    if
    :: fo_old == 1 && use_caller -> post_wake(0)
    :: else -> skip
    fi
}

/* send_stop_requests() for W1: coro__post_always(), even if closed. W1
 * cannot free its scheduler before this post has been delivered. */
inline send_stop() {
    assert(!freed[1]);
    d_step { assert(!freed[1]); in_stop = true }
}

/* W1's pump runs what has arrived (coro_sched_poll_until / run). */
inline w1_poll() {
    d_step {
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
    d_step {
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
    :: d_step { !in_task[0] && !in_wake[0] -> freed[0] = true }; break
    :: else -> w0_poll()
    od
}

proctype caller() {
    int v, fo_old;
    byte w;
    bool ok;

    /* pool_enter() */
#ifdef MUTANT_PLAIN_ENTER
    tso_load(CALLER, CALLERS, v);
    tso_store(CALLER, CALLERS, v + 1);
#else
    tso_fetch_add(CALLER, CALLERS, 1, v);
#endif
#ifdef MUTANT_NO_RECHECK
    v = 0;
#else
    tso_load(CALLER, CLOSING, v);
#endif
    if
    :: v != 0 ->
        refused = true;
        tso_fetch_add(CALLER, CALLERS, -1, v); /* ESHUTDOWN */
        goto out
    :: else -> skip
    fi;

    /* Inside the gate: the shutdown waits for us before any worker may
     * free its scheduler. */
    tso_fetch_add(CALLER, OUTSTANDING, 1, v);
    task_made = 1;
    if
    :: op == OP_CALL ->
        /* queue_push(): refused once closing, under the lock. */
        mutex_lock(CALLER);
        tso_load(CALLER, CLOSING, v);
        if
        :: v != 0 ->
            mutex_unlock(CALLER);
            finish_one(CALLER); /* free(t), no dropped hook: ESHUTDOWN */
            refused = true
        :: else ->
            queue_len++;
            tso_fetch_add(CALLER, QUEUED, 1, v);
            mutex_unlock(CALLER);
            /* wake_an_idle_worker(): worker 0 of use_caller is idle only
             * inside coro_pool_wait(), which does not take from the queue
             * here; so only W1 is looked at. */
            tso_load(CALLER, IDLE1, v);
            if
            :: v != 0 ->
                tso_xchg(CALLER, IDLE1, 0, v);
                if
                :: v != 0 ->
                    assert(!freed[1]); /* coro_post() starts reading it */
                    post_wake(1)
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
        d_step {
            assert(!freed[w]); /* ... and pushes into its inbox */
            if
            :: !closed[w] -> in_task[w] = true; ok = true
            :: else -> ok = false
            fi
        }
        if
        :: ok -> accepted = true
        :: else -> finish_one(CALLER); refused = true /* the worker's ESHUTDOWN */
        fi
    fi;
    tso_fetch_add(CALLER, CALLERS, -1, v); /* pool_leave() */

    if
    :: op == OP_CALL && accepted ->
        (task_ends > 0) /* coro_event_await(&call->done) */
    :: else -> skip
    fi;
out:
    call_returned = true
}

proctype worker1() {
    int v, fo_old;
    bool got_task, got_stop;

    /* worker_main(): while (!w->stop) worker_turn(w); */
    do
    :: stop1 -> break
    :: else ->
        /* take_tasks(w, 1) -> queue_pop(): a look without the lock first */
        got_task = false;
        tso_load(W1, QUEUED, v);
        if
        :: v != 0 ->
            mutex_lock(W1);
            if
            :: queue_len > 0 ->
                queue_len--;
                tso_fetch_add(W1, QUEUED, -1, v);
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
                sc_store(W1, IDLE1, 1);
                tso_load(W1, QUEUED, v);
                if
                :: v == 0 && !stop1 ->
                    /* coro__sched_idle_wait(): until something arrives */
                    (in_task[1] || in_wake[1] || in_stop)
                :: else -> skip
                fi;
                sc_store(W1, IDLE1, 0)
            fi
        fi
    od;
    tso_load(W1, CLOSING, v);
    if
    :: v != 0 -> closed[1] = true /* coro__sched_shutdown_until() closes */
    :: else -> skip
    fi;
    /* drain_and_destroy(): what still arrives runs (or is abandoned) */
    do
    :: d_step { !in_task[1] && !in_wake[1] && !in_stop -> freed[1] = true }; break
    :: else -> w1_poll()
    od;
    w1_exited = true
}

proctype shutter() {
    int v, fo_old;
    byte dropped;
    bool got_task;

    if
    :: mode == MODE_SHUTDOWN ->
        /* coro_pool_shutdown() -> queue_close() */
#ifdef MUTANT_CHECK_FIRST
        (mem[CALLERS] == 0);
#endif
        mutex_lock(SHUT);
        sc_store(SHUT, CLOSING, 1);
        dropped = queue_len;
        queue_len = 0;
        sc_store(SHUT, QUEUED, 0);
        mutex_unlock(SHUT);
#ifndef MUTANT_CHECK_FIRST
        /* while (atomic_load(&p->callers) != 0) sched_yield(); — SHUT
         * never stores `callers`, so its load reads memory. */
        (mem[CALLERS] == 0);
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
        (w1_exited); /* pthread_join() */
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
        :: call_returned && mem[OUTSTANDING] == 0 -> break
        :: use_caller && (in_task[0] || in_wake[0]) -> w0_poll()
        od;
        /* coro_pool_destroy(): outstanding is 0, or EBUSY */
        assert(mem[OUTSTANDING] == 0);
#ifdef MUTANT_EARLY_W0
        if
        :: use_caller -> w0_drain_and_destroy()
        :: else -> skip
        fi;
#endif
        send_stop();  /* stop_workers(): send, */
        (w1_exited);  /* join */
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
    assert(accepted != refused);         /* 0 or ESHUTDOWN, one of them */
    assert(mem[OUTSTANDING] == 0);       /* nothing counted is left */
    assert(task_finished == task_made);  /* one finish_one() per task */
    assert(!refused || task_ends == 0);  /* refused: never runs, no hook */
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
        run tso_flusher(SHUT);
        run tso_flusher(W1);
        run tso_flusher(CALLER);
        run shutter();
        run worker1();
        run caller();
        run checker()
    }
}
