/*
 * close.pml — closing a scheduler against other threads' coro_go() and
 * coro_post() (sched.c, remote.c and shutdown.c of this stage).
 *
 * Models:
 *   sched.c  sched_start() + start_remote() (remote.c)   another thread's
 *                          coro_go(): the fast-path is_closed() check,
 *                          then count in (fetch_add `arriving`, seq_cst),
 *                          then check `closed` again (seq_cst load); the
 *                          request is pushed either way: START, or
 *                          REFUSED_START (ESHUTDOWN) carrying only its
 *                          count back;
 *            post_checked() + post_admit() + post_remote() (remote.c)
 *                          another thread's coro_post(): the same,
 *                          counting in `posts_pending` (a
 *                          compare-exchange, seq_cst);
 *            coro_sched_alive() from another thread: `arriving`
 *                          (seq_cst), then `alive_local` (relaxed);
 *   shutdown.c coro__sched_close_async()   a close from another thread (or
 *                          a signal): seq_cst store of `closed`, push of
 *                          the close request;
 *            coro_sched_close()   on the owner: seq_cst store of
 *                          `closed`, then cancel_members();
 *   remote.c take_in() / take_in_start()   the owner takes requests in: a
 *                          START moves from `arriving` to alive
 *                          (alive_local += 1, then arriving -= 1 with
 *                          release; cancelled on arrival after a close,
 *                          abandoned on arrival once the shutdown
 *                          abandons); the refused ones give their count
 *                          back; CLOSE runs cancel_members();
 *   sched.c  run_coroutine(), run_post()   (post_unadmit() gives the count
 *                          back);
 *   shutdown.c coro__sched_shutdown_until(): close, pump_until() with the
 *                          deadline (work_remains() on every turn),
 *                          abandon_rest() (abandoning = true, abandon the
 *                          alive, run the posts, then wait, with no
 *                          deadline, until no work remains);
 *   sched.c  coro_sched_destroy(): drain the inbox, EBUSY while work
 *                          remains, else free.
 *
 * The actors: the owner's thread (it pumps for a while, then calls
 * coro_sched_shutdown(), then coro_sched_destroy() until it succeeds); one
 * thread that calls coro_go() once; one thread that calls coro_post() once;
 * one thread that calls coro_sched_close() once; one thread that calls
 * coro_sched_alive() once.
 *
 * Each atomic has the C11 order of the code (memory.pml): the model runs on
 * x86-TSO and on the weak model (-DMM_WEAK).
 *
 * Abstracts:
 *   - The inbox is one word per embedded node (the go's c->remote, the
 *     post's p->remote, s->close_remote): pushing is a seq_cst RMW (the
 *     compare-exchange on the head), taking an acquire RMW (the exchange),
 *     so a take sees what its producer did before the push, as in the
 *     code; the owner takes requests one at a time in any order, which
 *     covers every order the real inbox gives, and may take one at any
 *     moment. Its sleep/wake protocol is modelled elsewhere: here a pump
 *     with nothing to do blocks until a request is there. The shutdown's
 *     deadline may pass at any moment, so pump_until() may end at any
 *     moment and its own look at work_remains() changes nothing here;
 *     abandon_rest(), which has no deadline, does look, and blocks.
 *   - The go's coroutine, when resumed, either returns or yields (it may
 *     ignore its cancellation); a wait is just "not run yet". Its cancel
 *     word (GO_CW) is touched only by the owner here.
 *   - post_admit() has no limit (max_posts = SIZE_MAX): its
 *     compare-exchange loop is one seq_cst increment. Memory never runs
 *     out (no backlog).
 *   - The user's side of the contract, as the lesson states it: the owner
 *     tries coro_sched_destroy() only once no call of the other threads is
 *     still about to count itself in or to read the counts (each has
 *     counted in, or returned). The library's side is that destroy then
 *     answers EBUSY until no counted request is left to push — and
 *     succeeds once they have all returned.
 *
 * Proves, for every interleaving, on x86-TSO (every store-buffer drain
 * order) and on the weak model (every value C11 lets each load read):
 *   - nothing accepted is dropped: a coro_go() that returned 0 is run or
 *     abandoned (counted) by the shutdown, a coro_post() that returned 0
 *     runs, before the shutdown returns; no request is accepted after the
 *     shutdown returned (asserted);
 *   - a shutdown never waits forever: no count without a request behind it
 *     (a pump waiting for a push that never comes is an invalid end state);
 *   - no use of a freed scheduler: destroy never succeeds while a thread
 *     that counted itself in has still to touch the scheduler (its load of
 *     `closed`, its push) — each producer asserts the scheduler is not
 *     destroyed at each of those touches; and after the shutdown and the
 *     join, destroy succeeds (the refused stragglers are drained by it);
 *   - a close cancels: the go's coroutine, whenever it runs after the
 *     owner closed s or took the close request in, is cancelled (it was a
 *     member then, or it is cancelled on arrival);
 *   - coro_sched_alive() from another thread is never low: while the go's
 *     coroutine is counted (from its count in until it finishes, is
 *     abandoned, or its refusal is taken back) for the whole call, the
 *     answer is at least 1.
 *
 * Mutants, each a known-bad variant the search must catch. On x86-TSO:
 *   MUTANT_CHECK_FIRST    the producers check `closed` before counting in,
 *                         and not after: the shutdown's last look at the
 *                         counts misses a producer that saw "open" and
 *                         counts in a moment later (accepted after the
 *                         shutdown returned).
 *   MUTANT_RELAXED_CLOSE  the owner's store of `closed` is relaxed: a
 *                         plain mov that waits in the store buffer while
 *                         the owner's loads of the counts go ahead — the
 *                         store-buffering litmus test: the owner sees no
 *                         count, the producer sees "open". (The producer's
 *                         side cannot be weakened on x86: its count is a
 *                         locked instruction whatever the order asked, and
 *                         its seq_cst load already is a plain mov. The
 *                         remote close is followed by a locked push, which
 *                         drains the store buffer anyway.)
 *   MUTANT_UNCOUNT        a refused request takes its count back itself
 *                         (fetch_sub) instead of travelling to the owner:
 *                         a pump that saw the count up waits for a push
 *                         that never comes.
 *   MUTANT_NO_ARRIVAL_CHECK  take_in_start() does not look at `closed`: a
 *                         go that counted in before the close, and so was
 *                         accepted, arrives after cancel_members() ran and
 *                         runs uncancelled.
 * (Each of these fails on the weak model too.)
 * On the weak model (each is the same instructions as the code on x86, or
 * fails there too; C11 and ARMv8 show the store-buffering outcome):
 *   MUTANT_RELEASE_CLOSE      the owner's store of `closed` is release,
 *                             not seq_cst;
 *   MUTANT_ACQUIRE_ARRIVING   the shutdown's load of `arriving`
 *                             (coro__alive_count()) is acquire: it reads 0
 *                             while the goer, counted in, reads "open" —
 *                             the case the comment in alive_count() names;
 *   MUTANT_ACQUIRE_POSTS      the same for `posts_pending`
 *                             (coro__posts_pending());
 *   MUTANT_ACQ_REL_ARRIVE     the goer counts itself in with an acq_rel
 *                             fetch_add, not seq_cst;
 *   MUTANT_ACQUIRE_GO_CHECK   the goer's is_closed() after counting is an
 *                             acquire load;
 *   MUTANT_ACQ_REL_ADMIT      post_admit()'s compare-exchange is acq_rel;
 *   MUTANT_ACQUIRE_POST_CHECK the poster's is_closed() is an acquire load;
 *   (each of these five: a go or post accepted after the shutdown returned)
 *   MUTANT_RELAXED_ARRIVED    take_in_start()'s fetch_sub of `arriving` is
 *                             relaxed: coro_sched_alive() on another thread
 *                             reads the decrement but not the alive_local
 *                             += 1 before it, and answers 0 for a live
 *                             coroutine.
 *
 * Orders of the code this model shows are not needed (each weakened to
 * relaxed, the search still passes on the weak model):
 *   - coro__sched_close_async()'s seq_cst store of `closed`: that thread
 *     loads no count after it, so it is no side of a store-buffering
 *     handshake (the shutdown's own close, on the owner, is); and its
 *     push, a seq_cst RMW after it, carries it to the owner's take
 *     (acquire) anyway. (Relaxed take and relaxed store together do fail.)
 *   - take_in_start()'s seq_cst look at `closed`: the owner either made
 *     the close itself or took the close request in (acquire) before it.
 *   - the fast-path look of sched_start() and post_checked(): an early
 *     exit only; the look after counting decides.
 *   - the release of a refused start's fetch_sub: a refused coroutine is
 *     never alive, so nothing needs publishing with it.
 */
#define OWNER 0
#define GOER 1
#define POSTER 2
#define CLOSER 3
#define PROBE 4
#define NTHREADS 5

#define CLOSED 0   /* s->closed */
#define ARRIVING 1 /* s->arriving */
#define POSTS 2    /* s->posts_pending */
#define IN_GO 3    /* the go's c->remote in the inbox: 0, START or REFUSED */
#define IN_POST 4  /* the post's p->remote in the inbox: 0, POST or REFUSED */
#define IN_CLOSE 5 /* s->close_remote in the inbox */
#define ALIVE 6    /* s->alive_local (written by the owner only) */
#define GO_CW 7    /* the go's c->cancel_word (the owner's only, here) */
#define NWORDS 8

#ifndef PROBES
#define PROBES 1
#endif

#include "memory.pml"

/* The orders of the close handshake; the weak mutants weaken one each. */
#ifdef MUTANT_RELAXED_CLOSE
#define CLOSE_ORDER MM_RLX
#elif defined(MUTANT_RELEASE_CLOSE)
#define CLOSE_ORDER MM_REL
#else
#define CLOSE_ORDER MM_SC   /* coro_sched_close(): atomic_store */
#endif
#ifdef MUTANT_ACQUIRE_ARRIVING
#define ARRIVING_LOOK MM_ACQ
#else
#define ARRIVING_LOOK MM_SC /* coro__alive_count() */
#endif
#ifdef MUTANT_ACQUIRE_POSTS
#define POSTS_LOOK MM_ACQ
#else
#define POSTS_LOOK MM_SC    /* coro__posts_pending() */
#endif
#ifdef MUTANT_ACQ_REL_ARRIVE
#define ARRIVE_ORDER MM_ACQ_REL
#else
#define ARRIVE_ORDER MM_SC  /* coro__start_remote(): atomic_fetch_add */
#endif
#ifdef MUTANT_ACQUIRE_GO_CHECK
#define GO_CHECK MM_ACQ
#else
#define GO_CHECK MM_SC      /* coro__is_closed() */
#endif
#ifdef MUTANT_ACQ_REL_ADMIT
#define ADMIT_ORDER MM_ACQ_REL
#else
#define ADMIT_ORDER MM_SC   /* coro__post_admit(): success order */
#endif
#ifdef MUTANT_ACQUIRE_POST_CHECK
#define POST_CHECK MM_ACQ
#else
#define POST_CHECK MM_SC
#endif
#ifdef MUTANT_RELAXED_ARRIVED
#define ARRIVED_ORDER MM_RLX
#else
#define ARRIVED_ORDER MM_REL /* take_in_start(): fetch_sub, release */
#endif

/* Request kinds (coro_remote_kind). */
#define ACCEPTED 1 /* CORO_REMOTE_START / CORO_REMOTE_POST */
#define REFUSED 2  /* CORO_REMOTE_REFUSED_START / _REFUSED_POST */

/* The cancel word's bits (coro_impl.h). */
#define CANCELED 1
#define FINISHED 4

/* Where a producer's call is (ghost). */
#define P_BEFORE 0   /* not counted in yet: the user must not destroy s */
#define P_COUNTED 1  /* counted in, not pushed yet: s must stay */
#define P_RETURNED 2 /* pushed (or refused early): touches s no more */

byte go_phase, post_phase;
bool go_accepted, post_accepted; /* coro_go / coro_post returned 0 */
bool go_handled;    /* the go's coroutine finished or was abandoned */
bool go_counted;    /* ghost: the go is counted in arriving or alive */
bool post_ran;
bool closer_done;
bool probe_done;
bool shut_down;     /* coro_sched_shutdown() returned */
bool destroyed;     /* coro_sched_destroy() succeeded: s is freed */

/* ── The owner ──────────────────────────────────────────────────────── */

/* Each atomic access is one step, with the local work that follows it (an
 * `atomic` block): no other thread sees local work, so the grouping loses
 * no interleaving. */

/* alive_local changes: the owner's relaxed load and store (its own copy,
 * `alive_local`, is what it loads). */
inline alive_add(d) {
    alive_local = alive_local + d;
    mm_store(OWNER, ALIVE, alive_local, MM_RLX)
}

/* The go's coroutine is done: it finished (coroutine_main()'s fetch_or,
 * acq_rel) or is abandoned (abandon_one()'s fetch_or, seq_cst). */
inline go_done(ord) {
    atomic {
        mm_rmw(OWNER, GO_CW, v, v | FINISHED, ord);
        v = 0;
        go_queued = false;
        member = false;
        go_handled = true;
        go_counted = false
    };
    alive_add(-1)
}

/* mark_canceled(c, 0) (a compare-exchange, acq_rel) of the go's coroutine;
 * end_wait_canceled() has nothing to do for a queued coroutine. */
inline cancel_go() {
    atomic {
        mm_rmw(OWNER, GO_CW, v, v | CANCELED, MM_ACQ_REL);
        v = 0;
        go_canceled = true
    }
}

/* cancel_members() */
inline cancel_members() {
    if
    :: member && !go_canceled -> cancel_go()
    :: else -> skip
    fi
}

/* take_in() of the go's request. */
inline take_in_go(kind) {
    if
    :: kind == ACCEPTED ->
        /* take_in_start(): counted alive here before it leaves `arriving`
         * (release: coro_sched_alive() on another thread that reads the
         * decrement sees the increment, see coro__alive_count()) */
        alive_add(1);
        atomic {
            mm_fetch_add(OWNER, ARRIVING, -1, v, ARRIVED_ORDER);
            v = 0;
            member = true
        };
        if
        :: abandoning -> go_done(MM_SC) /* abandon_one(): counted, never started */
        :: else ->
            mm_load(OWNER, CLOSED, v, MM_SC); /* coro__is_closed() */
#ifdef MUTANT_NO_ARRIVAL_CHECK
            v = 0;
#endif
            if
            :: v != 0 -> /* cancelled on arrival: fetch_or, seq_cst */
                atomic {
                    mm_rmw(OWNER, GO_CW, v, v | CANCELED, MM_SC);
                    v = 0;
                    go_canceled = true
                }
            :: else -> v = 0
            fi;
            go_queued = true
        fi
    :: kind == REFUSED -> /* give its count back (fetch_sub, release) */
        atomic {
            mm_fetch_add(OWNER, ARRIVING, -1, v, MM_REL);
            v = 0;
            go_counted = false
        }
    fi
}

/* take_in() of the post's request. */
inline take_in_post(kind) {
    if
    :: kind == ACCEPTED -> post_queued = true
    :: kind == REFUSED -> /* post_unadmit(): fetch_sub, relaxed */
        atomic { mm_fetch_add(OWNER, POSTS, -1, v, MM_RLX); v = 0 }
    fi
}

/* work_remains(): alive_count() (arriving, then alive_local: the owner
 * reads its own), then posts_pending — loads, in that order, as in the
 * code. */
inline work_remains(r) {
    mm_load(OWNER, ARRIVING, v, ARRIVING_LOOK);
    d_step { r = v + alive_local > 0; v = 0 };
    if
    :: r -> skip
    :: else ->
        mm_load(OWNER, POSTS, v, POSTS_LOOK);
        d_step { r = v > 0; v = 0 }
    fi
}

#define INBOX_EMPTY (mem[IN_GO] == 0 && mem[IN_POST] == 0 && mem[IN_CLOSE] == 0)

/* Where the owner is. */
#define S_RUNNING 0 /* the pump as usual, before coro_sched_shutdown() */
#define S_DRAIN 1   /* the shutdown's pump_until(), with its deadline */
#define S_ABANDON 2 /* abandon_rest(): waiting for what is still owed */
#define S_SHUT 3    /* the shutdown returned */
#define S_DESTROY 4 /* in coro_sched_destroy(), draining its inbox */

active proctype owner() {
    /* The scheduler as its owner sees it (owner thread only). */
    byte phase;         /* S_* */
    byte alive_local;   /* coroutines taken in, not finished */
    bool member;        /* the go's coroutine is alive here */
    bool go_queued, go_canceled, post_queued;
    bool abandoning;
    bool close_known;   /* ghost: the owner closed s, or took the close in */
    bool after_join;    /* ghost: this destroy began after every other
                           thread had returned */
    /* Scratch, cleared after use (fewer states). */
    int v;
    byte kind;
    bool r;

    do
    /* drain_inbox(), in every phase: take one request in (the exchange on
     * the inbox's head, acquire). */
    :: mm_await_rmw(OWNER, IN_GO, mem[IN_GO] != 0, kind, 0, MM_ACQ);
       take_in_go(kind);
       kind = 0
    :: mm_await_rmw(OWNER, IN_POST, mem[IN_POST] != 0, kind, 0, MM_ACQ);
       take_in_post(kind);
       kind = 0
    :: atomic {
           mm_await_rmw(OWNER, IN_CLOSE, mem[IN_CLOSE] != 0, kind, 0, MM_ACQ);
           kind = 0;
           close_known = true;
           cancel_members()
       }

    /* run_one(): resume the go's coroutine (it returns, or yields and is
     * queued again; it may ignore its cancellation), or run the post
     * (post_unadmit() first: fetch_sub, relaxed). */
    :: phase <= S_DRAIN && go_queued ->
        /* Every coroutine is cancelled by a close the owner knows of. */
        assert(!close_known || go_canceled);
        if
        :: go_done(MM_ACQ_REL) /* it returned */
        :: skip /* it yielded: still queued */
        fi
    :: phase <= S_ABANDON && post_queued ->
        atomic {
            mm_fetch_add(OWNER, POSTS, -1, v, MM_RLX);
            v = 0;
            post_queued = false;
            post_ran = true
        }

    /* The owner calls coro_sched_shutdown(): coro_sched_close(s), the
     * owner's branch. seq_cst: with the producers' seq_cst count and
     * check, either a producer sees the close or the shutdown's look at
     * the counts sees the producer (see coro__is_closed()). */
    :: phase == S_RUNNING ->
        mm_store(OWNER, CLOSED, 1, CLOSE_ORDER);
        close_known = true;
        cancel_members();
        phase = S_DRAIN

    /* pump_until() returns: nothing alive, or the deadline passed — which
     * may happen at any moment, so the model does not need the check.
     * abandon_rest(): arrivals from now on are abandoned as they come in;
     * the ready queue is emptied, the post kept (it runs in S_ABANDON),
     * the coroutine, a member, abandoned. */
    :: phase == S_DRAIN ->
        abandoning = true;
        if
        :: member -> go_done(MM_SC) /* abandon_one() */
        :: else -> skip
        fi;
        phase = S_ABANDON

    /* abandon_rest()'s loop: run_one() found nothing; done when no work
     * remains, else coro__inbox_wait(FOREVER): until a push. A count with
     * no request behind it leaves the owner blocked here for good. */
    :: phase == S_ABANDON && !post_queued ->
        work_remains(r);
        if
        :: !r ->
            /* The shutdown returns. Nothing accepted was dropped: it ran
             * or abandoned every coroutine and post that was accepted. */
            shut_down = true;
            assert(!go_accepted || go_handled);
            assert(!post_accepted || post_ran);
            phase = S_SHUT
        :: else -> r = false; !INBOX_EMPTY
        fi

    /* coro_sched_destroy(), tried until it succeeds. The user's side:
     * never while another thread's call may still be about to count in, or
     * is reading the counts. It drains the inbox (the refusals that raced:
     * the takes above), then answers EBUSY while work remains. */
    :: phase == S_SHUT && closer_done && (probe_done || PROBES == 0) &&
       go_phase != P_BEFORE && post_phase != P_BEFORE ->
        after_join = go_phase == P_RETURNED && post_phase == P_RETURNED;
        phase = S_DESTROY
    :: phase == S_DESTROY && INBOX_EMPTY ->
        work_remains(r);
        if
        :: !r -> break /* success: s is freed */
        :: else ->
            /* EBUSY. After the shutdown and the join, never. */
            assert(!after_join);
            r = false;
            phase = S_SHUT
        fi
    od;
    destroyed = true;
    /* No producer still to push into the freed scheduler. */
    assert(go_phase != P_COUNTED && post_phase != P_COUNTED);
    assert(!member && !go_queued && !post_queued)
}

/* ── Other threads ──────────────────────────────────────────────────── */

/* Another thread's coro_go(s): sched_start() and start_remote(). */
active proctype goer() {
    int v;
    bool refused, late;

    /* sched_start(): the fast path, before any counting (seq_cst load). */
    mm_load(GOER, CLOSED, v, MM_SC);
    d_step { refused = v != 0; v = 0 };
    if
    :: refused -> go_phase = P_RETURNED /* ESHUTDOWN: nothing counted */
    :: else ->
#ifdef MUTANT_CHECK_FIRST
        /* The fast-path check was the only one. */
        atomic {
            assert(!destroyed);
            mm_fetch_add(GOER, ARRIVING, 1, v, ARRIVE_ORDER);
            v = 0;
            go_phase = P_COUNTED;
            go_counted = true;
            assert(!shut_down); /* accepted after the shutdown returned */
            go_accepted = true
        };
#else
        atomic { /* fetch_add(&s->arriving, 1): seq_cst */
            assert(!destroyed);
            mm_fetch_add(GOER, ARRIVING, 1, v, ARRIVE_ORDER);
            v = 0;
            go_phase = P_COUNTED;
            go_counted = true
        };
        atomic { /* refused = is_closed(s): seq_cst load */
            assert(!destroyed);
            late = shut_down; /* ghost: as the load happens */
            mm_load(GOER, CLOSED, v, GO_CHECK)
        };
        d_step {
            refused = v != 0;
            v = 0;
            assert(refused || !late); /* accepted after the shutdown */
            late = false;
            go_accepted = !refused
        };
#endif
#ifdef MUTANT_UNCOUNT
        if
        :: refused -> /* take the count back here, send nothing */
            atomic {
                mm_fetch_add(GOER, ARRIVING, -1, v, MM_REL);
                v = 0;
                go_counted = false;
                go_phase = P_RETURNED
            }
        :: else ->
#endif
            atomic { /* coro__inbox_push(): a seq_cst compare-exchange; then
                      * only the wake cell, which is never freed */
                assert(!destroyed);
                mm_rmw(GOER, IN_GO, v, (refused -> REFUSED : ACCEPTED), MM_SC);
                assert(v == 0); /* the node is not in the inbox already */
                v = 0;
                go_phase = P_RETURNED
            }
#ifdef MUTANT_UNCOUNT
        fi
#endif
    fi;
    refused = false
}

/* Another thread's coro_post(s): post_checked() and post_remote(). */
active proctype poster() {
    int v;
    bool refused, late;

    mm_load(POSTER, CLOSED, v, MM_SC);
    d_step { refused = v != 0; v = 0 };
    if
    :: refused -> post_phase = P_RETURNED
    :: else ->
#ifdef MUTANT_CHECK_FIRST
        atomic {
            assert(!destroyed);
            mm_fetch_add(POSTER, POSTS, 1, v, ADMIT_ORDER);
            v = 0;
            post_phase = P_COUNTED;
            assert(!shut_down);
            post_accepted = true
        };
#else
        atomic { /* post_admit(): compare-exchange posts_pending + 1 */
            assert(!destroyed);
            mm_fetch_add(POSTER, POSTS, 1, v, ADMIT_ORDER);
            v = 0;
            post_phase = P_COUNTED
        };
        atomic { /* refused = is_closed(s) */
            assert(!destroyed);
            late = shut_down;
            mm_load(POSTER, CLOSED, v, POST_CHECK)
        };
        d_step {
            refused = v != 0;
            v = 0;
            assert(refused || !late);
            late = false;
            post_accepted = !refused
        };
#endif
#ifdef MUTANT_UNCOUNT
        if
        :: refused ->
            atomic {
                mm_fetch_add(POSTER, POSTS, -1, v, MM_RLX);
                v = 0;
                post_phase = P_RETURNED
            }
        :: else ->
#endif
            atomic {
                assert(!destroyed);
                mm_rmw(POSTER, IN_POST, v, (refused -> REFUSED : ACCEPTED), MM_SC);
                assert(v == 0);
                v = 0;
                post_phase = P_RETURNED
            }
#ifdef MUTANT_UNCOUNT
        fi
#endif
    fi;
    refused = false
}

/* Another thread's coro_sched_close(s): coro__sched_close_async(). (Its
 * exchange on close_sent, which sends the one request at most once, is
 * left out: there is one closer here.) The push, a seq_cst RMW, comes
 * after the store in program order. */
active proctype closer() {
    int v;

    mm_store(CLOSER, CLOSED, 1, MM_SC); /* atomic_store: seq_cst */
    atomic {
        assert(!destroyed);
        mm_rmw(CLOSER, IN_CLOSE, v, 1, MM_SC);
        assert(v == 0);
        v = 0;
        closer_done = true
    }
}

/* Another thread's coro_sched_alive(s): coro__alive_count(). Never low:
 * if the go's coroutine is counted for the whole call, the answer is at
 * least 1 (it may be 2: counted in both words for a moment). The call is
 * made while the go is counted (other moments prove nothing, and only
 * cost states), or not at all. */
active [PROBES] proctype probe() {
    int a, l;
    bool counted_after; /* ghost: counted still as the second load happens */

    if
    :: atomic { go_counted -> mm_load(PROBE, ARRIVING, a, MM_SC) };
       atomic {
           counted_after = go_counted;
           mm_load(PROBE, ALIVE, l, MM_RLX)
       };
       d_step {
           assert(!counted_after || a + l >= 1);
           a = 0;
           l = 0;
           counted_after = false
       }
    :: skip
    fi;
    probe_done = true
}

init {
    byte t;

    atomic {
        for (t : 0 .. NTHREADS - 1) {
            run mm_flusher(t)
        }
    }
}
