/*
 * post_admit.pml — posts under a limit, across threads (remote.c,
 * sched.c).
 *
 * Models:
 *   remote.c:post_admit()    load posts_pending, then a CAS before -> before+1
 *                            while before < max_posts; at the limit,
 *                            posts_rejected++ and refuse;
 *   remote.c:post_unadmit()  posts_pending--;
 *   remote.c:post_remote()   another thread's coro_post(): take a node
 *                            (post_node_get(), which may fail: ENOMEM),
 *                            then admit (refused: the node goes back,
 *                            EAGAIN), then push the post onto the inbox;
 *   sched.c:coro_post()      on the owner's thread (here: from inside a
 *                            post the pump runs): admit, reserve a level
 *                            (may fail: unadmit, ENOMEM), queue it;
 *   sched.c:run_post()       the pump runs a post: post_unadmit() first,
 *                            then the post's function;
 *   sched.c:pump_until()     while work_remains() (posts_pending > 0 here):
 *                            drain_inbox() (take_in() may lack memory for a
 *                            level: the rest stays in the backlog), run_one(),
 *                            with nothing run coro__inbox_wait();
 *   sched.c:coro_sched_run(), coro_sched_destroy()   the owner's last loop,
 *                            as in looper.c and pool.c: do run while
 *                            destroy says EBUSY (work_remains()).
 *
 * The run: producers PA (two posts) and PB (one post) post to the owner's
 * scheduler, whose limit is MAX_POSTS (1). The owner runs coro_sched_run()
 * while they post, and once they are done, runs until destroy succeeds.
 * A post the pump runs may itself post once, on the owner's thread.
 *
 * Abstracts: no coroutines are alive (work_remains() is posts_pending > 0;
 * alive_count() adds nothing to the handshake); the inbox is a counter of
 * requests (a word: the push is a seq_cst RMW, the pump's take an acquire
 * exchange, as in inbox.c, so the take sees what the producer did before
 * its push), and coro__inbox_wait() is "block until the inbox is not
 * empty" (inbox.pml proves the real handshake gives exactly that); the
 * node's travels are in returned.pml. The owner's wait for the producers
 * is a join: each producer's end is a release, the owner's wait an
 * acquire. No thread makes a plain store, so tso.pml's store buffers stay
 * empty. A failed allocation is a choice the search makes; take_in() lacks
 * memory at most NOMEM_TAKE_IN times in a run.
 *
 * The orders (memory.pml): every atomic has the C11 order of the code.
 * post_admit()'s compare-exchange and work_remains()'s load of
 * posts_pending are relaxed in ch04_threads (its BUILD passes
 * -DADMIT_ORDER=MM_RLX -DLOOK_ORDER=MM_RLX) and seq_cst in ch05_shutdown,
 * where they are the two sides of the close handshake (close.pml, whose
 * weak mutants weaken them). For what this model proves they are not
 * needed, and it passes with either: the limit and the exact count rest
 * on the atomicity of the read-modify-writes of one word (every change of
 * posts_pending is one, and each reads the newest value, whatever its
 * order); a pump that reads an old count either stops early in
 * coro_sched_run() (harmless: the owner runs again) or waits on the
 * inbox, whose own handshake wakes it; and the owner's last look comes
 * after the joins, which order every producer's count before it.
 *
 * Proves, for every interleaving, on x86-TSO and on the weak model (every
 * value C11 lets each load read):
 *   - at most MAX_POSTS pending, ever: the counter itself never goes over
 *     (assert after every change);
 *   - the counter is exactly the number of admitted posts not yet run: a
 *     refused post is never counted, and the counter never rises and falls
 *     back without a request behind it (assert after every change);
 *   - nothing admitted is dropped: every accepted post runs (at the end,
 *     posts run == posts accepted, and inbox, backlog and ready queue are
 *     empty); and the pump never sleeps for good while a counted post is on
 *     its way or in its backlog (an invalid end state: the owner blocked in
 *     its wait);
 *   - posts_rejected is the number of posts refused with EAGAIN.
 *
 * The backlog (a bug this model found): when take_in() lacks memory, the
 * request stays in s->backlog and run_one() finds nothing. The pump used
 * to sleep in coro__inbox_wait() until the next timer — with no timer,
 * forever — though the backlog held a post. Now (sched.c, idle_until())
 * the wait ends within a millisecond while the backlog is not empty, so
 * the pump tries again: here, the wait may return with the inbox still
 * empty.
 *
 * Mutants (each must fail, on both memory models; none is about an order,
 * so there are no weak mutants, see above):
 *   -DMUTANT_ADD_THEN_UNDO  the old post_admit() (before commit 30a2e8c):
 *       fetch_add, and on overflow fetch_sub and refuse. The counter goes
 *       over the limit and counts a refused post (assert). With
 *       -DNO_COUNT_CHECK too, the asserts on the counter are off and SPIN
 *       finds what the bug did: the pump saw the count up, found nothing
 *       to run and slept; the count fell back and nothing ever came.
 *   -DMUTANT_COUNT_BEFORE_NODE  the post is counted before its node is
 *       allocated (the old post_remote(): admit, then malloc, which may fail
 *       and unadmit). Same hang: the pump waits for a post that never comes.
 *   -DMUTANT_BACKLOG_SLEEPS  the code before idle_until(): the pump's
 *       wait ignores the backlog. The pump sleeps for good with a post in
 *       its backlog.
 */
#define NTHREADS 3
#define OWNER 0
#define PA 1
#define PB 2

#define PENDING 0   /* s->posts_pending */
#define REJECTED 1  /* s->posts_rejected */
#define INBOX 2     /* the inbox: requests pushed, not yet taken */
#define DONE 3      /* producers finished: what the owner's joins see */
#define NWORDS 4

#include "memory.pml"

#ifndef MAX_POSTS
#define MAX_POSTS 1
#endif
#ifndef NOMEM_TAKE_IN
#define NOMEM_TAKE_IN 1
#endif

/* The orders of remote.c and sched.c: ch05's by default (see the top). */
#ifndef ADMIT_ORDER
#define ADMIT_ORDER MM_SC /* post_admit()'s compare-exchange, on success */
#endif
#ifndef LOOK_ORDER
#define LOOK_ORDER MM_SC  /* coro__posts_pending(), in work_remains() */
#endif

/* The owner's structures (its thread only). */
byte backlog;   /* taken, not yet in the ready queue (s->backlog) */
byte ready;     /* posts in the ready queue */
byte nomem_left = NOMEM_TAKE_IN; /* take_in() failures still allowed */
bool local_posted; /* a post has posted on the owner's thread already */

/* Ghosts: what really happened, to check the counters against. */
byte counted;   /* posts admitted and not yet run (or unadmitted) */
byte accepted;  /* posts accepted (coro_post() returned 0), in all */
byte ran;       /* posts run, in all */
byte refused;   /* posts refused with EAGAIN, in all */

/* The counter against the truth: after every change of posts_pending. */
inline check_count() {
#ifndef NO_COUNT_CHECK
    assert(mem[PENDING] <= MAX_POSTS);
    assert(mem[PENDING] == counted)
#else
    skip
#endif
}

/* post_admit() on thread t: admit = 1 (counted) or 0 (refused). */
inline post_admit(t, admit) {
#ifdef MUTANT_ADD_THEN_UNDO
    atomic {
        mm_fetch_add(t, PENDING, 1, before, ADMIT_ORDER);
        if
        :: before < MAX_POSTS -> counted++
        :: else -> skip
        fi;
        check_count()
    };
    if
    :: before < MAX_POSTS -> admit = 1
    :: else ->
        atomic { mm_fetch_add(t, PENDING, -1, x, MM_RLX); check_count() };
        atomic { mm_fetch_add(t, REJECTED, 1, x, MM_RLX); refused++ };
        admit = 0
    fi
#else
    mm_load(t, PENDING, before, MM_RLX);
    do
    :: before >= MAX_POSTS ->
        atomic { mm_fetch_add(t, REJECTED, 1, x, MM_RLX); refused++ };
        admit = 0;
        break
    :: else ->
        atomic {
            /* its failure order, relaxed in the code, is here the success
             * order without its release (mm_cas): a failed compare only
             * gives the loop a newer `before` */
            mm_cas(t, PENDING, before, before + 1, admit, ADMIT_ORDER);
            if :: admit -> counted++; check_count() :: else -> skip fi
        };
        if :: admit -> break :: else -> skip /* before holds the new count */ fi
    od
#endif
}

/* post_unadmit() on thread t */
inline post_unadmit(t) {
    atomic { mm_fetch_add(t, PENDING, -1, x, MM_RLX); counted--; check_count() }
}

/* coro__inbox_push() on thread t: the request is in the inbox (a seq_cst
 * compare-exchange on its head, which releases) and the owner, if it
 * sleeps, wakes (inbox.pml). */
inline inbox_push(t) {
    atomic { mm_rmw(t, INBOX, x, x + 1, MM_SC); accepted++ }
}

/* post_remote() on producer thread t */
inline post_remote(t) {
#ifdef MUTANT_COUNT_BEFORE_NODE
    post_admit(t, admit);
    if
    :: admit ->
        if
        :: post_unadmit(t) /* malloc failed: ENOMEM */
        :: inbox_push(t)
        fi
    :: else -> skip /* EAGAIN */
    fi
#else
    if
    :: skip /* post_node_get() failed: ENOMEM, nothing counted */
    :: post_admit(t, admit);
       if
       :: admit -> inbox_push(t)
       :: else -> skip /* EAGAIN: post_node_put(), the node is kept */
       fi
    fi
#endif
}

/* coro_post() on the owner's thread, from inside a post */
inline post_local() {
    post_admit(OWNER, admit);
    if
    :: admit ->
        if
        :: post_unadmit(OWNER) /* levels_reserve() failed: ENOMEM */
        :: d_step { ready++; accepted++ } /* ready_push() */
        fi
    :: else -> skip /* EAGAIN */
    fi
}

/* run_post(): unadmit first, then call the function, which may post. */
inline run_post() {
    d_step { assert(counted > 0); ran++ };
    post_unadmit(OWNER);
    if
    :: !local_posted -> local_posted = true; post_local()
    :: skip
    fi
}

/* coro__inbox_wait(&s->inbox, wake_at) with no timer: until a push. */
inline inbox_wait() {
    if
    :: mem[INBOX] > 0 -> skip /* a push woke us (or was there already) */
#ifndef MUTANT_BACKLOG_SLEEPS
    :: backlog > 0 -> skip /* idle_until(): a short deadline while the
                            * backlog waits for memory; it expires */
#endif
    fi
}

/* pump_until(s, CORO_FOREVER, false) */
inline pump_until() {
    do
    :: mm_load(OWNER, PENDING, p, LOOK_ORDER); /* work_remains() */
       if
       :: p == 0 -> break
       :: else -> skip
       fi;
       /* drain_inbox(): the backlog first, then what the inbox holds
        * (coro__inbox_take(): an acquire exchange of its head) */
       atomic { mm_xchg(OWNER, INBOX, 0, x, MM_ACQ); backlog = backlog + x };
       do
       :: backlog > 0 ->
           if
           :: nomem_left > 0 -> nomem_left--; break /* take_in() false */
           :: backlog--; ready++                    /* take_in(): queued */
           fi
       :: else -> break
       od;
       /* run_one() */
       if
       :: ready > 0 -> ready--; run_post()
       :: else -> inbox_wait()
       fi
    od
}

proctype owner() {
    int p, before, x;
    bool admit;

    pump_until(); /* coro_sched_run() while the producers post */
    /* The producers have finished: pthread_join() (acquire) */
    mm_await(OWNER, DONE, mem[DONE] == 2, p, MM_ACQ);
    /* do coro_sched_run(s); while (coro_sched_destroy(s) == EBUSY); */
    do
    :: pump_until();
       mm_load(OWNER, PENDING, p, LOOK_ORDER); /* destroy: work_remains()? */
       if
       :: p == 0 -> break
       :: else -> skip /* EBUSY */
       fi
    od;

    /* Every accepted post ran, nothing is left anywhere, and the counts
     * are right. */
    assert(ran == accepted);
    assert(counted == 0 && mem[PENDING] == 0);
    assert(mem[INBOX] == 0 && backlog == 0 && ready == 0);
    assert(mem[REJECTED] == refused)
}

proctype producer(byte t; byte posts) {
    int before, x;
    bool admit;
    byte i;

    for (i : 1 .. posts) {
        post_remote(t)
    }
    mm_fetch_add(t, DONE, 1, x, MM_REL) /* the thread ends: join sees it */
}

init {
    atomic {
        run mm_flusher(OWNER);
        run mm_flusher(PA);
        run mm_flusher(PB);
        run owner();
        run producer(PA, 2);
        run producer(PB, 1)
    }
}
