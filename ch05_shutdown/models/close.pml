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
 *                          compare-exchange);
 *   shutdown.c coro__sched_close_async()   a close from another thread (or
 *                          a signal): seq_cst store of `closed`, push of
 *                          the close request;
 *            coro_sched_close()   on the owner: seq_cst store of
 *                          `closed`, then cancel_members();
 *   remote.c take_in() / take_in_start()   the owner takes requests in: a
 *                          START moves from `arriving` to alive (cancelled
 *                          on arrival after a close, abandoned on arrival
 *                          once the shutdown abandons); the refused ones
 *                          give their count back; CLOSE runs
 *                          cancel_members();
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
 * one thread that calls coro_sched_close() once.
 *
 * Abstracts:
 *   - The inbox is one word per embedded node (the go's c->remote, the
 *     post's p->remote, s->close_remote): pushing is a locked
 *     compare-exchange, taking a locked exchange; the owner takes requests
 *     one at a time in any order, which covers every order the real inbox
 *     gives, and may take one at any moment. Its sleep/wake protocol is
 *     modelled elsewhere: here a pump with nothing to do blocks until a
 *     request is there. The shutdown's deadline may pass at any moment, so
 *     pump_until() may end at any moment and its own look at
 *     work_remains() changes nothing here; abandon_rest(), which has no
 *     deadline, does look, and blocks.
 *   - The go's coroutine, when resumed, either returns or yields (it may
 *     ignore its cancellation); a wait is just "not run yet". Its cancel
 *     and finish are locked instructions on its own cancel word: here only
 *     their effect on the owner's store buffer (they drain it) is kept.
 *   - post_admit() has no limit (max_posts = SIZE_MAX): its
 *     compare-exchange loop is one locked increment. Memory never runs out
 *     (no backlog).
 *   - The user's side of the contract, as the lesson states it: the owner
 *     tries coro_sched_destroy() only once no call of the other threads is
 *     still about to count itself in (each has counted in, or returned).
 *     The library's side is that destroy then answers EBUSY until no
 *     counted request is left to push — and succeeds once they have all
 *     returned.
 *
 * Proves, for every interleaving and store-buffer drain order of x86-TSO:
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
 *     join, destroy succeeds (the refused stragglers are drained by it).
 *
 * Mutants, each a known-bad variant the search must catch:
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
 */
#define OWNER 0
#define GOER 1
#define POSTER 2
#define CLOSER 3
#define NTHREADS 4

#define CLOSED 0   /* s->closed */
#define ARRIVING 1 /* s->arriving */
#define POSTS 2    /* s->posts_pending */
#define IN_GO 3    /* the go's c->remote in the inbox: 0, START or REFUSED */
#define IN_POST 4  /* the post's p->remote in the inbox: 0, POST or REFUSED */
#define IN_CLOSE 5 /* s->close_remote in the inbox */
#define NWORDS 6

#include "tso.pml"

/* Request kinds (coro_remote_kind). */
#define ACCEPTED 1 /* CORO_REMOTE_START / CORO_REMOTE_POST */
#define REFUSED 2  /* CORO_REMOTE_REFUSED_START / _REFUSED_POST */

/* Where a producer's call is (ghost). */
#define P_BEFORE 0   /* not counted in yet: the user must not destroy s */
#define P_COUNTED 1  /* counted in, not pushed yet: s must stay */
#define P_RETURNED 2 /* pushed (or refused early): touches s no more */

byte go_phase, post_phase;
bool go_accepted, post_accepted; /* coro_go / coro_post returned 0 */
bool go_handled;    /* the go's coroutine finished or was abandoned */
bool post_ran;
bool closer_done;
bool shut_down;     /* coro_sched_shutdown() returned */
bool destroyed;     /* coro_sched_destroy() succeeded: s is freed */

/* ── The owner ──────────────────────────────────────────────────────── */

/* Each locked instruction or load is one step, with the local work that
 * follows it (an `atomic` block): no other thread sees local work, so the
 * grouping loses no interleaving. */

/* The go's coroutine is abandoned (abandon_one()): never resumed again;
 * its fetch_or of FINISHED is a locked instruction. */
inline abandon_go() {
    atomic {
        tso_fence(OWNER);
        go_queued = false;
        member = false;
        alive_local--;
        go_handled = true
    }
}

/* cancel_members(): the alive member not cancelled yet gets its CANCELED
 * by a compare-exchange (a locked instruction; end_wait_canceled() has
 * nothing to do for a queued coroutine). */
inline cancel_members() {
    if
    :: member && !go_canceled -> atomic { tso_fence(OWNER); go_canceled = true }
    :: else -> skip
    fi
}

/* take_in() of the go's request. */
inline take_in_go(kind) {
    if
    :: kind == ACCEPTED ->
        /* take_in_start(): counted alive here before it leaves
         * `arriving` (fetch_sub, release: a locked instruction) */
        atomic {
            tso_fetch_add(OWNER, ARRIVING, -1, v);
            v = 0;
            alive_local++;
            member = true
        };
        if
        :: abandoning -> abandon_go() /* too late to run: counted, never started */
        :: else ->
            atomic {
                tso_load(OWNER, CLOSED, v);
                r = v != 0;
                v = 0
            };
            if
            :: r -> r = false; atomic { tso_fence(OWNER); go_canceled = true } /* fetch_or */
            :: else -> skip
            fi;
            go_queued = true
        fi
    :: kind == REFUSED -> /* give its count back */
        atomic { tso_fetch_add(OWNER, ARRIVING, -1, v); v = 0 }
    fi
}

/* take_in() of the post's request. */
inline take_in_post(kind) {
    if
    :: kind == ACCEPTED -> post_queued = true
    :: kind == REFUSED -> /* post_unadmit() */
        atomic { tso_fetch_add(OWNER, POSTS, -1, v); v = 0 }
    fi
}

/* work_remains(): alive_count() (arriving, then alive_local), then
 * posts_pending — loads, in that order, as in the code. */
inline work_remains(r) {
    atomic {
        tso_load(OWNER, ARRIVING, v);
        r = v + alive_local > 0;
        v = 0
    };
    if
    :: r -> skip
    :: else ->
        atomic {
            tso_load(OWNER, POSTS, v);
            r = v > 0;
            v = 0
        }
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
    bool after_join;    /* ghost: this destroy began after every other
                           thread had returned */
    /* Scratch, cleared after use (fewer states). */
    int v;
    byte kind;
    bool r;

    do
    /* drain_inbox(), in every phase: take one request in. */
    :: atomic {
           d_step { /* the owner's locked exchange */
               mem[IN_GO] != 0 -> tso_drain_all(OWNER); kind = mem[IN_GO]; mem[IN_GO] = 0
           };
           take_in_go(kind);
           kind = 0
       }
    :: atomic {
           d_step {
               mem[IN_POST] != 0 -> tso_drain_all(OWNER); kind = mem[IN_POST]; mem[IN_POST] = 0
           };
           take_in_post(kind);
           kind = 0
       }
    :: atomic {
           d_step { mem[IN_CLOSE] != 0 -> tso_drain_all(OWNER); mem[IN_CLOSE] = 0 };
           cancel_members()
       }

    /* run_one(): resume the go's coroutine (it returns, or yields and is
     * queued again; it may ignore its cancellation), or run the post
     * (post_unadmit() first). */
    :: phase <= S_DRAIN && go_queued ->
        if
        :: atomic {
               tso_fence(OWNER); /* its fetch_or of FINISHED */
               go_queued = false;
               member = false;
               alive_local--;
               go_handled = true
           }
        :: skip /* it yielded: still queued */
        fi
    :: phase <= S_ABANDON && post_queued ->
        atomic {
            tso_fetch_add(OWNER, POSTS, -1, v);
            v = 0;
            post_queued = false;
            post_ran = true
        }

    /* The owner calls coro_sched_shutdown(): coro_sched_close(s), the
     * owner's branch. */
    :: phase == S_RUNNING ->
#ifdef MUTANT_RELAXED_CLOSE
        tso_store(OWNER, CLOSED, 1);
#else
        atomic { tso_xchg(OWNER, CLOSED, 1, v); v = 0 } /* seq_cst store */
#endif
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
        :: member -> abandon_go()
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
     * never while another thread's call may still be about to count in.
     * It drains the inbox (the refusals that raced: the takes above), then
     * answers EBUSY while work remains. */
    :: phase == S_SHUT && closer_done && go_phase != P_BEFORE &&
       post_phase != P_BEFORE ->
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
    bool refused;

    /* sched_start(): the fast path, before any counting. */
    atomic {
        tso_load(GOER, CLOSED, v);
        refused = v != 0;
        v = 0
    };
    if
    :: refused -> go_phase = P_RETURNED /* ESHUTDOWN: nothing counted */
    :: else ->
#ifdef MUTANT_CHECK_FIRST
        /* The fast-path check was the only one. */
        d_step {
            tso_drain_all(GOER);
            assert(!destroyed);
            mem[ARRIVING]++;
            go_phase = P_COUNTED;
            assert(!shut_down); /* accepted after the shutdown returned */
            go_accepted = true
        };
#else
        d_step { /* fetch_add(&s->arriving, 1): seq_cst, locked */
            tso_drain_all(GOER);
            assert(!destroyed);
            mem[ARRIVING]++;
            go_phase = P_COUNTED
        };
        atomic { /* refused = is_closed(s): seq_cst load, a plain mov */
            assert(!destroyed);
            tso_load(GOER, CLOSED, v);
            refused = v != 0;
            v = 0;
            assert(refused || !shut_down); /* accepted after the shutdown */
            go_accepted = !refused
        };
#endif
#ifdef MUTANT_UNCOUNT
        if
        :: refused -> /* take the count back here, send nothing */
            d_step { tso_drain_all(GOER); mem[ARRIVING]--; go_phase = P_RETURNED }
        :: else ->
#endif
            d_step { /* coro__inbox_push(): a locked CAS; then only the
                      * wake cell, which is never freed */
                tso_drain_all(GOER);
                assert(!destroyed);
                assert(mem[IN_GO] == 0);
                mem[IN_GO] = (refused -> REFUSED : ACCEPTED);
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
    bool refused;

    atomic {
        tso_load(POSTER, CLOSED, v);
        refused = v != 0;
        v = 0
    };
    if
    :: refused -> post_phase = P_RETURNED
    :: else ->
#ifdef MUTANT_CHECK_FIRST
        d_step {
            tso_drain_all(POSTER);
            assert(!destroyed);
            mem[POSTS]++;
            post_phase = P_COUNTED;
            assert(!shut_down);
            post_accepted = true
        };
#else
        d_step { /* post_admit(): compare-exchange posts_pending + 1 */
            tso_drain_all(POSTER);
            assert(!destroyed);
            mem[POSTS]++;
            post_phase = P_COUNTED
        };
        atomic { /* refused = is_closed(s) */
            assert(!destroyed);
            tso_load(POSTER, CLOSED, v);
            refused = v != 0;
            v = 0;
            assert(refused || !shut_down);
            post_accepted = !refused
        };
#endif
#ifdef MUTANT_UNCOUNT
        if
        :: refused ->
            d_step { tso_drain_all(POSTER); mem[POSTS]--; post_phase = P_RETURNED }
        :: else ->
#endif
            d_step {
                tso_drain_all(POSTER);
                assert(!destroyed);
                assert(mem[IN_POST] == 0);
                mem[IN_POST] = (refused -> REFUSED : ACCEPTED);
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
 * left out: there is one closer here. Being a locked instruction, it
 * drains the store buffer like the push after it.) */
active proctype closer() {
    int v;

    atomic { tso_xchg(CLOSER, CLOSED, 1, v); v = 0 }; /* seq_cst store */
    d_step {
        tso_drain_all(CLOSER);
        assert(!destroyed);
        mem[IN_CLOSE] = 1;
        closer_done = true
    }
}

init {
    byte t;

    atomic {
        for (t : 0 .. NTHREADS - 1) {
            run tso_flusher(t)
        }
    }
}
