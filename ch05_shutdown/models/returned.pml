/*
 * returned.pml — the nodes of other threads' posts travel back
 * (remote.c: the comment above post_node_get()).
 *
 * Models:
 *   remote.c:post_node_get()    a producer takes a node from its thread's
 *                               cache; with the cache empty it takes the
 *                               scheduler's whole `returned` stack with one
 *                               exchange (acquire) and uses its top; with
 *                               that empty too, malloc();
 *   remote.c:post_node_put()    a refused post (EAGAIN): the node goes back
 *                               onto the producer's own cache (plain
 *                               stores: the cache is thread-local);
 *   remote.c:post_remote()      the post with its node goes to the pump
 *                               through the inbox (a seq_cst CAS, and the
 *                               pump's take an acquire exchange);
 *   remote.c:post_node_return() the pump, having run the post (run_post()),
 *                               pushes the node onto `returned`:
 *                               p->next_free = head, CAS(head -> p), release.
 *
 * The run: `returned` starts with two nodes (1 -> 2), as if earlier posts
 * had come back; producers PA and PB make two posts each to the one
 * scheduler, and each post may be refused (the node goes to the cache).
 * The pump runs every post it gets and returns its node. Nodes are reused
 * while they travel: a node the pump returns may be taken by either
 * producer and come back again, also while a CAS on `returned` is in
 * flight between its load and its compare.
 *
 * Abstracts: the inbox is a channel (inbox.pml models it) with a word
 * beside it, INBOX, for what it orders: the push a seq_cst RMW (on x86 a
 * locked instruction: it drains the producer's store buffer), the take an
 * acquire RMW; the post's function and the admission are left out but for
 * the refusal (post_admit.pml); one scheduler (nodes are all alike and may
 * feed any scheduler, but only a scheduler's own pump pushes onto its
 * `returned`, so more schedulers add nothing to one stack); malloc() never
 * fails (a failure returns before a node exists). The next_free links are
 * plain memory in the code, here words written and read relaxed: on
 * x86-TSO their stores wait in store buffers, on the weak model a load of
 * one may read an older link unless an acquire has ordered the newer one
 * before it. A thread's end is a release RMW of DONE (on x86 it drains the
 * thread's buffer), so the final check reads the links as they are.
 *
 * The orders: post_node_get()'s exchange is acquire, post_node_return()'s
 * compare-exchange release, the rest relaxed, as in remote.c. They are
 * what makes a link the pump wrote visible to the producer that takes the
 * node: the pump writes p->next_free (plain), then publishes p with the
 * release CAS; the producer's acquire exchange that takes the stack reads
 * that CAS (or a later one of the pump's, which carries it: each push is
 * the pump's own, after the ones before it), so its load of p->next_free
 * reads the pump's link, never an older one.
 *
 * Proves, for every interleaving, on x86-TSO (every store-buffer drain
 * order) and on the weak model (every value C11 lets each load read):
 *   - no node is handed out twice: a producer gets only a node that is in
 *     its own cache, and `returned` holds exactly the nodes nobody holds —
 *     its list is walked after every change of it: no node in it that a
 *     producer holds, or that is on its way to the pump, no cycle;
 *   - no ABA: the pump's CAS may race with the producers' exchanges and
 *     with its own node coming back, and the list stays right (the pump is
 *     the only thread that pushes onto `returned`, and nobody pops one node;
 *     the asserts hold whatever happens between the load and the CAS);
 *   - no node lost: at the end every node that exists is in `returned`
 *     or in exactly one producer's cache (freed at thread exit), once.
 *
 * Mutants (each must fail):
 *   -DMUTANT_POP_ONE  the producer pops one node with a CAS (read head,
 *       read head->next_free, CAS head -> next) instead of taking the whole
 *       stack: the classic ABA. SPIN's run: PB pops node 1 and posts it;
 *       PA reads the head, 2, and its next_free, nil; PB pops 2 and posts
 *       it; the pump returns 1, then 2 (the head is 2 again, its next_free
 *       now 1); PA's CAS 2 -> nil succeeds, and node 1 vanishes from the
 *       stack: lost (the check of `returned` fails). With other timings the
 *       same stale CAS puts back a node a producer holds: handed out twice.
 *       Fails on both memory models.
 * Weak mutants (pass on x86-TSO, where every RMW is a locked instruction
 * whatever its order, and fail on the weak model):
 *   -DMUTANT_RELAXED_TAKE    post_node_get()'s exchange relaxed, not
 *       acquire;
 *   -DMUTANT_RELAXED_RETURN  post_node_return()'s compare-exchange relaxed,
 *       not release.
 *       Either way the pump's write of a link is not ordered before the
 *       producer's read of it. SPIN's run (the same for both): PB takes
 *       the stack 1 -> 2 and posts both; PA finds it empty, mallocs 3 and
 *       posts it; the pump returns 1 (next_free nil); PA takes the stack,
 *       node 1, and reads 1's next_free as the old link, 2: its cache now
 *       holds node 2, which is on its way to the pump and then back in
 *       `returned`: in two lists at once (the final check fails).
 */
#define NTHREADS 3
#define PUMP 0
#define PA 1
#define PB 2

#define RETURNED 0   /* s->returned */
#define NEXT0 1      /* node n's next_free is mem[NEXT0 + n] */
#define NNODES 6     /* 2 at the start + at most one malloc per post */
#define INBOX 8      /* the inbox: posts pushed, not yet taken */
#define DONE 9       /* threads ended */
#define NWORDS 10

#define NIL 0
#define POSTS 2      /* per producer */

#include "memory.pml"

/* The orders of remote.c; the weak mutants weaken one each. */
#ifdef MUTANT_RELAXED_TAKE
#define TAKE_ORDER MM_RLX   /* post_node_get()'s exchange */
#else
#define TAKE_ORDER MM_ACQ
#endif
#ifdef MUTANT_RELAXED_RETURN
#define RETURN_ORDER MM_RLX /* post_node_return()'s compare-exchange */
#else
#define RETURN_ORDER MM_REL
#endif

/* Where each node is (a ghost, to check the real lists against). */
#define UNALLOC 0    /* not yet allocated */
#define STACK 1      /* in `returned` */
#define CACHE 2      /* CACHE + t: in producer t's cache (t = 1, 2) */
#define HELD 4       /* HELD + t: producer t is using it for a post */
#define TO_PUMP 7    /* with its post, on the way to (or at) the pump */

byte where[NNODES + 1];
byte cache[NTHREADS];   /* post_cache of producers 1 and 2 (thread-local) */
byte next_new = 3;      /* the next node malloc() returns */
chan inbox = [2 * POSTS] of { byte };
byte sent;
hidden byte walk_n, walk_i, walk_c; /* scratch for the walks, in d_steps */

/* Inside an atomic step: the whole list from node `first` (links in
 * memory) has where == `was`; set it to `now`. At most NNODES nodes: a
 * longer list has a cycle. */
inline walk_list(first, was, now) {
    walk_n = first;
    walk_i = 0;
    do
    :: walk_n != NIL ->
        assert(walk_i < NNODES);       /* no cycle */
        assert(where[walk_n] == was);  /* nobody else has it */
        where[walk_n] = now;
        walk_n = mem[NEXT0 + walk_n];
        walk_i++
    :: else -> break
    od;
    walk_n = 0;
    walk_i = 0
}

/* Inside an atomic step, after any change of `returned`: its list is
 * exactly the nodes marked STACK (walk_list with was == now checks the
 * list; then count the STACK nodes). */
inline check_returned() {
    walk_list(mem[RETURNED], STACK, STACK);
    walk_c = 0;
    walk_n = 1;
    do
    :: walk_n <= NNODES -> if :: where[walk_n] == STACK -> walk_c++ :: else -> skip fi; walk_n++
    :: else -> break
    od;
    walk_n = mem[RETURNED];
    do
    :: walk_n != NIL -> walk_c--; walk_n = mem[NEXT0 + walk_n]
    :: else -> break
    od;
    assert(walk_c == 0);
    walk_n = 0
}

/* post_node_get() on producer thread t: p is the node. */
inline post_node_get(t, p) {
    p = cache[t];
    if
    :: p == NIL ->
#ifdef MUTANT_POP_ONE
        mm_load(t, RETURNED, p, MM_RLX);
        do
        :: p == NIL -> break
        :: else ->
            mm_load(t, NEXT0 + p, nxt, MM_RLX);
            atomic {
                mm_cas(t, RETURNED, p, nxt, ok, MM_ACQ); /* p: the head found */
                if
                :: ok -> assert(where[p] == STACK); where[p] = CACHE + t;
                         check_returned()
                :: else -> skip
                fi
            };
            if
            :: ok -> nxt = NIL; break /* p is ours, and our cache stays empty */
            :: else -> skip
            fi
        od;
#else
        atomic {
            /* exchange(returned, NULL), acquire: the whole stack, and
             * the pump's writes of its links */
            mm_xchg(t, RETURNED, NIL, p, TAKE_ORDER);
            walk_list(p, STACK, CACHE + t);
            check_returned()
        };
#endif
        if
        :: p == NIL -> /* malloc() */
            d_step {
                assert(next_new <= NNODES);
                p = next_new; next_new++;
                assert(where[p] == UNALLOC);
                where[p] = HELD + t
            }
        :: else -> skip
        fi
    :: else -> skip
    fi;
    if
    :: where[p] == HELD + t -> skip /* fresh from malloc() */
    :: else ->
#ifdef MUTANT_POP_ONE
        if
        :: p == cache[t] -> mm_load(t, NEXT0 + p, cache[t], MM_RLX) /* post_cache = p->next_free */
        :: else -> skip /* popped from `returned`: the cache stays empty */
        fi;
#else
        mm_load(t, NEXT0 + p, cache[t], MM_RLX); /* post_cache = p->next_free:
                                                   * a plain load */
#endif
        d_step { assert(where[p] == CACHE + t); where[p] = HELD + t }
    fi
}

/* post_node_put(p) on producer thread t */
inline post_node_put(t, p) {
    mm_store(t, NEXT0 + p, cache[t], MM_RLX); /* p->next_free = post_cache */
    d_step { assert(where[p] == HELD + t); where[p] = CACHE + t; cache[t] = p }
}

/* post_remote() on thread t: get a node; admitted: push the post (the
 * inbox's seq_cst CAS; on x86 it drains the buffer first); refused: put
 * the node back. */
proctype producer(byte t) {
    byte p, nxt, i;
    int ok, old;

    for (i : 1 .. POSTS) {
        post_node_get(t, p);
        if
        :: atomic {
               mm_rmw(t, INBOX, old, old + 1, MM_SC); /* coro__inbox_push() */
               assert(where[p] == HELD + t);
               where[p] = TO_PUMP;
               sent++;
               inbox!p
           }
        :: post_node_put(t, p) /* EAGAIN */
        fi;
        p = NIL
    }
    mm_fetch_add(t, DONE, 1, old, MM_REL) /* the thread ends */
}

/* The pump: run_post() -> post_node_return() for every post it gets. */
proctype pump() {
    byte p;
    int head, ok, old;
    byte got;

    do
    :: atomic {
           inbox?p;
           mm_rmw(PUMP, INBOX, old, old - 1, MM_ACQ) /* coro__inbox_take() */
       };
        got++;
        assert(where[p] == TO_PUMP);
        mm_load(PUMP, RETURNED, head, MM_RLX);
        do
        :: mm_store(PUMP, NEXT0 + p, head, MM_RLX); /* p->next_free = head */
           atomic {
               mm_cas(PUMP, RETURNED, head, p, ok, RETURN_ORDER);
               if
               :: ok -> assert(where[p] == TO_PUMP); where[p] = STACK;
                        check_returned()
               :: else -> skip /* head holds the value found: try again */
               fi
           };
           if :: ok -> break :: else -> skip fi
        od;
        p = NIL
    :: mem[DONE] == 2 && got == sent -> break
    od;
    mm_fetch_add(PUMP, DONE, 1, old, MM_REL) /* the thread ends */
}

/* At the end (every thread done: on x86-TSO, its store buffer drained by
 * its last RMW): each node that exists is in `returned` or in one
 * producer's cache, once. */
proctype finish() {
    byte n;

    mem[DONE] == 3;
    d_step {
        walk_list(mem[RETURNED], STACK, STACK);
        walk_list(cache[PA], CACHE + PA, CACHE + PA);
        walk_list(cache[PB], CACHE + PB, CACHE + PB);
        walk_c = 0;
        /* count the nodes that exist, then take away those in the lists */
        n = 1;
        do
        :: n <= NNODES -> if :: where[n] != UNALLOC -> walk_c++ :: else -> skip fi; n++
        :: else -> break
        od;
        n = mem[RETURNED];
        do :: n != NIL -> walk_c--; n = mem[NEXT0 + n] :: else -> break od;
        n = cache[PA];
        do :: n != NIL -> walk_c--; n = mem[NEXT0 + n] :: else -> break od;
        n = cache[PB];
        do :: n != NIL -> walk_c--; n = mem[NEXT0 + n] :: else -> break od;
        assert(walk_c == 0);
        n = 1;
        do
        :: n <= NNODES ->
            assert(where[n] == UNALLOC || where[n] == STACK ||
                   where[n] == CACHE + PA || where[n] == CACHE + PB);
            n++
        :: else -> break
        od
    }
}

init {
    atomic {
        /* returned: 1 -> 2, as if two earlier posts had come back */
        mem[RETURNED] = 1;
        mem[NEXT0 + 1] = 2;
        mem[NEXT0 + 2] = NIL;
        where[1] = STACK;
        where[2] = STACK;
        run pump();
        run producer(PA);
        run producer(PB);
        run mm_flusher(PUMP);
        run mm_flusher(PA);
        run mm_flusher(PB);
        run finish()
    }
}
