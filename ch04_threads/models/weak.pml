/*
 * weak.pml — a memory model weaker than x86: what C11's relaxed, acquire,
 * release and seq_cst orders allow, as ARMv8 can show it. The other model
 * of this directory, tso.pml, is x86 only; memory.pml picks one of the
 * two (-DMM_WEAK picks this one).
 *
 * The idea: views. Every store to a word gets the next timestamp of that
 * word (its place in the word's coherence order), and the last HIST
 * stores of each word are kept. A thread has a view: for each word, the
 * oldest timestamp it may still read. A load may read any kept store at
 * or after its view, the newest or an older one, and then its view
 * moves up to what it read: it never reads older again (coherence).
 * Reading an older store is what a load "satisfied early" does on ARMv8
 * (before the newer store reached it), and what a load does while the
 * other thread's stores are still on their way.
 *
 * What carries a view from thread to thread:
 *   release  a release store (or RMW) attaches the writer's whole view to
 *            its message;
 *   acquire  an acquire load (or RMW) that reads that message takes the
 *            attached view: everything the writer had seen or written
 *            before the release is now visible to the reader, never
 *            older. That is C11's happens-before through
 *            synchronizes-with;
 *   relaxed  a relaxed store attaches only itself (plus the view of the
 *            writer's last release fence); a relaxed load takes nothing
 *            at once (an acquire fence later takes what it gathered).
 *            So two relaxed stores of one thread to different words can
 *            become visible to another thread in either order: message
 *            passing (MP) with relaxed orders fails, as C11 and ARMv8
 *            allow;
 *   RMW      an atomic read-modify-write always reads the newest store of
 *            its word and writes the next one (atomicity), and its
 *            message also carries the view of the one it read (C11's
 *            release sequences);
 *   seq_cst  a seq_cst store, RMW or fence also records itself in a
 *            global view, `mm_scv`, and a seq_cst load or fence may read
 *            nothing older than that view. With both sides of a
 *            store-buffering test (SB: x = 1; r1 = y  ||  y = 1; r2 = x)
 *            seq_cst, one of them comes second in the global order and
 *            reads the other's store: r1 == r2 == 0 is impossible, as
 *            C11 promises (and ARMv8's STLR then LDAR gives). Weaken
 *            either load to relaxed or acquire, and it may read the old
 *            value: r1 == r2 == 0, the lost wake of a sleep/wake
 *            handshake. x86 cannot show that outcome for an RMW
 *            followed by a load (the locked instruction drains the
 *            store buffer); ARMv8 can (CASAL then a plain LDR).
 *
 * Like tso.pml, this is a bounded approximation, chosen to find the bugs
 * these protocols can have and to report none that C11 forbids:
 *   - stores always take the newest timestamp of their word (C11 lets a
 *     store slot in before a concurrent one; none of our protocols
 *     depends on that: every contended word is written by RMWs or by one
 *     thread);
 *   - no load buffering: a load never reads a store that comes later in
 *     its own thread's future (C11 relaxed allows it, ARMv8 hardly ever
 *     shows it, and it needs "promises" to model);
 *   - seq_cst is the global view above, close to RC11's corrected
 *     seq_cst; C11's first wording allowed a little more;
 *   - only the last HIST stores of a word are kept: a thread whose view
 *     is older than the oldest kept one is moved up to it, as if it had
 *     seen it (a restriction, like tso.pml's bounded store buffer).
 *
 * The interface is memory.pml's (mm_load(), mm_store(), mm_cas(), ...).
 * `mem[w]` is the newest value of word w, as in tso.pml it is memory: a
 * guard on it stands for "eventually a load sees it", and mm_await()
 * turns such a guard into a load.
 */
#ifndef HIST
#define HIST 3 /* stores kept per word */
#endif

int mem[NWORDS];                  /* the newest value of each word */
byte mm_ts[NWORDS];               /* the newest store's timestamp */
int mm_hval[NWORDS * HIST];       /* the value of timestamp ts < mm_ts[w],
                                     at [w * HIST + ts % HIST] */
byte mm_msg[NWORDS * HIST * NWORDS]; /* the view store (w, ts) carries,
                                     at [(w * HIST + ts % HIST) * NWORDS] */
byte mm_cur[NTHREADS * NWORDS];   /* each thread's view */
byte mm_acq[NTHREADS * NWORDS];   /* its view plus what its relaxed loads
                                     read: an acquire fence takes it */
byte mm_rel[NTHREADS * NWORDS];   /* its view at its last release fence */
byte mm_scv[NWORDS];              /* the seq_cst view */
byte mm_pick;                     /* scratch: the timestamp a load reads */
hidden byte mm_i;                 /* scratch, only inside d_step */
hidden int mm_prev;

#define MM_CUR(t, w) mm_cur[(t) * NWORDS + (w)]
#define MM_ACQV(t, w) mm_acq[(t) * NWORDS + (w)]
#define MM_RELV(t, w) mm_rel[(t) * NWORDS + (w)]
#define MM_SLOT(w, ts) ((w) * HIST + (ts) % HIST)
#define MM_MSG(w, ts, x) mm_msg[MM_SLOT(w, ts) * NWORDS + (x)]
#define MM_MAX(a, b) ((a) > (b) -> (a) : (b))

/* Inside a d_step: thread t's view takes the view store (w, ts) carries;
 * its acquire-fence view too. */
inline mm_take_msg(mm_t, mm_w, mm_at) {
    mm_i = 0;
    do
    :: mm_i < NWORDS ->
        MM_CUR(mm_t, mm_i) = MM_MAX(MM_CUR(mm_t, mm_i), MM_MSG(mm_w, mm_at, mm_i));
        MM_ACQV(mm_t, mm_i) = MM_MAX(MM_ACQV(mm_t, mm_i), MM_CUR(mm_t, mm_i));
        mm_i++
    :: else -> break
    od;
    mm_i = 0
}

/* Inside a d_step: the acquire-fence view of thread t gathers the view of
 * store (w, ts), read by a relaxed load. */
inline mm_gather_msg(mm_t, mm_w, mm_at) {
    mm_i = 0;
    do
    :: mm_i < NWORDS ->
        MM_ACQV(mm_t, mm_i) = MM_MAX(MM_ACQV(mm_t, mm_i), MM_MSG(mm_w, mm_at, mm_i));
        mm_i++
    :: else -> break
    od;
    mm_i = 0
}

/* Inside a d_step: thread t has read store (w, ts) with order ord. */
inline mm_read_at(mm_t, mm_w, mm_at, mm_ord) {
    MM_CUR(mm_t, mm_w) = MM_MAX(MM_CUR(mm_t, mm_w), mm_at);
    MM_ACQV(mm_t, mm_w) = MM_MAX(MM_ACQV(mm_t, mm_w), MM_CUR(mm_t, mm_w));
    if
    :: MM_IS_ACQ(mm_ord) -> mm_take_msg(mm_t, mm_w, mm_at)
    :: else -> mm_gather_msg(mm_t, mm_w, mm_at)
    fi
}

/* Inside a d_step, after a store to w: forget the stores of w older than
 * the last HIST. A view that still allowed reading one now starts at the
 * oldest kept store (for a thread's view, a restriction: as if it had
 * seen that store; for the other views, which are only lower bounds,
 * nothing changes). Then, once all of them are HIST or more, every
 * timestamp of w moves down by HIST, the slots they name staying the
 * same: timestamps stay below 2 * HIST, and states that differ only by
 * how many stores came before are one state. */
inline mm_forget_oldest(mm_w) {
    if
    :: mm_ts[mm_w] >= HIST ->
        mm_prev = mm_ts[mm_w] - HIST + 1; /* the oldest kept */
        mm_i = 0;
        do
        :: mm_i < NTHREADS ->
            mm_cur[mm_i * NWORDS + mm_w] = MM_MAX(mm_cur[mm_i * NWORDS + mm_w], mm_prev);
            mm_acq[mm_i * NWORDS + mm_w] = MM_MAX(mm_acq[mm_i * NWORDS + mm_w], mm_prev);
            mm_rel[mm_i * NWORDS + mm_w] = MM_MAX(mm_rel[mm_i * NWORDS + mm_w], mm_prev);
            mm_i++
        :: else -> break
        od;
        mm_scv[mm_w] = MM_MAX(mm_scv[mm_w], mm_prev);
        mm_i = 0;
        do
        :: mm_i < NWORDS * HIST ->
            mm_msg[mm_i * NWORDS + mm_w] = MM_MAX(mm_msg[mm_i * NWORDS + mm_w], mm_prev);
            mm_i++
        :: else -> break
        od;
        if
        :: mm_prev >= HIST ->
            mm_ts[mm_w] = mm_ts[mm_w] - HIST;
            mm_scv[mm_w] = mm_scv[mm_w] - HIST;
            mm_i = 0;
            do
            :: mm_i < NTHREADS ->
                mm_cur[mm_i * NWORDS + mm_w] = mm_cur[mm_i * NWORDS + mm_w] - HIST;
                mm_acq[mm_i * NWORDS + mm_w] = mm_acq[mm_i * NWORDS + mm_w] - HIST;
                mm_rel[mm_i * NWORDS + mm_w] = mm_rel[mm_i * NWORDS + mm_w] - HIST;
                mm_i++
            :: else -> break
            od;
            mm_i = 0;
            do
            :: mm_i < NWORDS * HIST ->
                mm_msg[mm_i * NWORDS + mm_w] = mm_msg[mm_i * NWORDS + mm_w] - HIST;
                mm_i++
            :: else -> break
            od
        :: else -> skip
        fi;
        mm_i = 0;
        mm_prev = 0
    :: else -> skip
    fi
}

/* Inside a d_step: thread t writes `v` to w as the newest store, with
 * order ord. `from_rmw`: the store of an RMW, which also passes on the
 * view of the store it replaced (C11's release sequence). Moves up every
 * view that still pointed at the store now forgotten. */
inline mm_write_newest(mm_t, mm_w, mm_v, mm_ord, mm_from_rmw) {
    mm_hval[MM_SLOT(mm_w, mm_ts[mm_w])] = mem[mm_w];
    mm_prev = mm_ts[mm_w]; /* the store replaced */
    mm_ts[mm_w]++;
    mem[mm_w] = mm_v;
    MM_CUR(mm_t, mm_w) = mm_ts[mm_w];
    MM_ACQV(mm_t, mm_w) = mm_ts[mm_w];
    /* The view the new store carries: everything the writer has seen
     * (release), or only what its last release fence saw. An RMW also
     * passes on what the store it replaced carried. */
    mm_i = 0;
    do
    :: mm_i < NWORDS ->
        if
        :: mm_from_rmw ->
            MM_MSG(mm_w, mm_ts[mm_w], mm_i) =
                MM_MAX((MM_IS_REL(mm_ord) -> MM_CUR(mm_t, mm_i) : MM_RELV(mm_t, mm_i)),
                       MM_MSG(mm_w, mm_prev, mm_i))
        :: else ->
            MM_MSG(mm_w, mm_ts[mm_w], mm_i) =
                (MM_IS_REL(mm_ord) -> MM_CUR(mm_t, mm_i) : MM_RELV(mm_t, mm_i))
        fi;
        mm_i++
    :: else -> break
    od;
    MM_MSG(mm_w, mm_ts[mm_w], mm_w) = mm_ts[mm_w];
    if
    :: mm_ord == MM_SC -> mm_scv[mm_w] = mm_ts[mm_w]
    :: else -> skip
    fi;
    mm_forget_oldest(mm_w);
    mm_i = 0;
    mm_prev = 0
}

/* The value of store (w, ts). */
#define MM_VALUE(w, ts) ((ts) == mm_ts[w] -> mem[w] : mm_hval[MM_SLOT(w, ts)])

/* A load: any kept store of w at or after the thread's view (and, for
 * seq_cst, the seq_cst view), chosen by the search. */
inline mm_load(mm_t, mm_w, mm_r, mm_ord) {
    atomic {
        mm_pick = MM_CUR(mm_t, mm_w);
        if
        :: mm_ord == MM_SC && mm_scv[mm_w] > mm_pick -> mm_pick = mm_scv[mm_w]
        :: else -> skip
        fi;
        do
        :: mm_pick < mm_ts[mm_w] -> mm_pick++
        :: break
        od;
        skip; /* a break lands here, not inside the d_step */
        d_step {
            mm_r = MM_VALUE(mm_w, mm_pick);
            mm_read_at(mm_t, mm_w, mm_pick, mm_ord);
            mm_pick = 0
        }
    }
}

/* A store. */
inline mm_store(mm_t, mm_w, mm_v, mm_ord) {
    d_step { mm_write_newest(mm_t, mm_w, mm_v, mm_ord, false) }
}

/* Inside a d_step: the read half of an RMW, which reads the newest store.
 * (A seq_cst RMW does not make the thread's later relaxed loads see any
 * newer: on ARMv8 a plain LDR after a CASAL may still be satisfied
 * before the CASAL's store is visible.) */
inline mm_rmw_read(mm_t, mm_w, mm_ord) {
    mm_read_at(mm_t, mm_w, mm_ts[mm_w], mm_ord)
}

/* Any RMW: `old` gets the newest value, `NEWV` (an expression that may
 * use `old`) is stored. */
inline mm_rmw(mm_t, mm_w, mm_old, MM_NEWV, mm_ord) {
    d_step {
        mm_old = mem[mm_w];
        mm_rmw_read(mm_t, mm_w, mm_ord);
        mm_write_newest(mm_t, mm_w, MM_NEWV, mm_ord, true)
    }
}

/* An RMW that waits until `COND` (an expression on mem[w]) holds. */
inline mm_await_rmw(mm_t, mm_w, MM_COND, mm_old, MM_NEWV, mm_ord) {
    d_step {
        MM_COND ->
        mm_old = mem[mm_w];
        mm_rmw_read(mm_t, mm_w, mm_ord);
        mm_write_newest(mm_t, mm_w, MM_NEWV, mm_ord, true)
    }
}

/* A load that waits until `COND` (an expression on mem[w]) holds, and
 * then reads that newest store. */
inline mm_await(mm_t, mm_w, MM_COND, mm_r, mm_ord) {
    d_step {
        MM_COND ->
        mm_r = mem[mm_w];
        mm_read_at(mm_t, mm_w, mm_ts[mm_w], mm_ord)
    }
}

/* compare-exchange, strong: on success ok = 1; on failure ok = 0 and
 * `exp` holds the value found, read as a load with the failure order
 * (ord without its release). A failed compare may read an older store;
 * a successful one reads the newest. */
inline mm_cas(mm_t, mm_w, mm_exp, mm_des, mm_ok, mm_ord) {
    atomic {
        mm_pick = MM_CUR(mm_t, mm_w);
        if
        :: mm_ord == MM_SC && mm_scv[mm_w] > mm_pick -> mm_pick = mm_scv[mm_w]
        :: else -> skip
        fi;
        do
        :: mm_pick < mm_ts[mm_w] -> mm_pick++
        :: mm_pick == mm_ts[mm_w] || MM_VALUE(mm_w, mm_pick) != mm_exp -> break
        od;
        skip; /* a break lands here, not inside the d_step */
        d_step {
            if
            :: MM_VALUE(mm_w, mm_pick) == mm_exp ->
                /* mm_pick is the newest */
                mm_rmw_read(mm_t, mm_w, mm_ord);
                mm_write_newest(mm_t, mm_w, mm_des, mm_ord, true);
                mm_ok = 1
            :: else ->
                mm_exp = MM_VALUE(mm_w, mm_pick);
                mm_read_at(mm_t, mm_w, mm_pick,
                           (mm_ord == MM_ACQ_REL -> MM_ACQ :
                            (mm_ord == MM_REL -> MM_RLX : mm_ord)));
                mm_ok = 0
            fi;
            mm_pick = 0
        }
    }
}

inline mm_xchg(mm_t, mm_w, mm_v, mm_old, mm_ord) {
    mm_rmw(mm_t, mm_w, mm_old, mm_v, mm_ord)
}

inline mm_fetch_add(mm_t, mm_w, mm_d, mm_old, mm_ord) {
    mm_rmw(mm_t, mm_w, mm_old, mm_old + mm_d, mm_ord)
}

/* A fence. acquire: take what relaxed loads read; release: later relaxed
 * stores carry today's view; seq_cst: both, and the seq_cst view both
 * ways (the two fences of an SB test with fences order it). */
inline mm_fence(mm_t, mm_ord) {
    d_step {
        mm_i = 0;
        do
        :: mm_i < NWORDS ->
            if
            :: MM_IS_ACQ(mm_ord) ->
                MM_CUR(mm_t, mm_i) = MM_MAX(MM_CUR(mm_t, mm_i), MM_ACQV(mm_t, mm_i))
            :: else -> skip
            fi;
            if
            :: mm_ord == MM_SC ->
                MM_CUR(mm_t, mm_i) = MM_MAX(MM_CUR(mm_t, mm_i), mm_scv[mm_i]);
                mm_scv[mm_i] = MM_CUR(mm_t, mm_i);
                MM_ACQV(mm_t, mm_i) = MM_MAX(MM_ACQV(mm_t, mm_i), MM_CUR(mm_t, mm_i))
            :: else -> skip
            fi;
            if
            :: MM_IS_REL(mm_ord) -> MM_RELV(mm_t, mm_i) = MM_CUR(mm_t, mm_i)
            :: else -> skip
            fi;
            mm_i++
        :: else -> break
        od;
        mm_i = 0
    }
}

/* Nothing to drain: stores are placed at once, views do the rest. */
proctype mm_flusher(byte mm_t) {
    skip
}
