/*
 * tso.pml — x86-TSO store buffers, shared by the models in this directory.
 *
 * On x86 a plain store (what a relaxed, release or even seq_cst-by-mov
 * store compiles to) does not reach memory at once: it waits in its
 * processor's store buffer, first in first out, while that processor's
 * later loads go ahead. The processor sees its own buffered stores (store
 * forwarding); the others see them only once they drain. A locked
 * instruction (xchg, lock cmpxchg, lock xadd) and mfence drain the buffer
 * first and then act on memory as one step. That is the whole of x86-TSO
 * (Sewell et al., "x86-TSO", CACM 2010), and all these inlines model.
 *
 * A model that includes this file first defines:
 *   NTHREADS  the number of hardware threads with a buffer (0, 1, ...)
 *   NWORDS    the number of shared words; each is an index into mem[]
 * and starts one flusher per thread: run tso_flusher(t). The flusher
 * drains the oldest store whenever it likes, which is how the model
 * explores every moment a store may become visible.
 */
#ifndef SB_DEPTH
#define SB_DEPTH 2 /* buffered stores per thread; a store waits for room */
#endif

int mem[NWORDS];
byte sb_word[NTHREADS * SB_DEPTH];
int sb_val[NTHREADS * SB_DEPTH];
byte sb_len[NTHREADS];
hidden byte tso_i; /* scratch, only inside d_step */

/* A plain load: the newest buffered store of this thread to the word, or
 * memory. */
inline tso_load(tso_t, tso_w, tso_r) {
    d_step {
        tso_r = mem[tso_w];
        tso_i = 0;
        do
        :: tso_i < sb_len[tso_t] ->
            if
            :: sb_word[tso_t * SB_DEPTH + tso_i] == tso_w -> tso_r = sb_val[tso_t * SB_DEPTH + tso_i]
            :: else -> skip
            fi;
            tso_i++
        :: else -> break
        od;
        tso_i = 0
    }
}

/* A plain store: into the buffer. */
inline tso_store(tso_t, tso_w, tso_v) {
    d_step {
        sb_len[tso_t] < SB_DEPTH;
        sb_word[tso_t * SB_DEPTH + sb_len[tso_t]] = tso_w;
        sb_val[tso_t * SB_DEPTH + sb_len[tso_t]] = tso_v;
        sb_len[tso_t]++
    }
}

/* Inside a d_step only: the oldest buffered store reaches memory. */
inline tso_drain_oldest(tso_t) {
    mem[sb_word[tso_t * SB_DEPTH]] = sb_val[tso_t * SB_DEPTH];
    tso_i = 1;
    do
    :: tso_i < sb_len[tso_t] ->
        sb_word[tso_t * SB_DEPTH + tso_i - 1] = sb_word[tso_t * SB_DEPTH + tso_i];
        sb_val[tso_t * SB_DEPTH + tso_i - 1] = sb_val[tso_t * SB_DEPTH + tso_i];
        tso_i++
    :: else -> break
    od;
    sb_len[tso_t]--;
    sb_word[tso_t * SB_DEPTH + sb_len[tso_t]] = 0; /* one state per content */
    sb_val[tso_t * SB_DEPTH + sb_len[tso_t]] = 0;
    tso_i = 0
}

/* Inside a d_step only: what a locked instruction does first. */
inline tso_drain_all(tso_t) {
    do
    :: sb_len[tso_t] > 0 -> tso_drain_oldest(tso_t)
    :: else -> break
    od
}

/* mfence (and a seq_cst store, which GCC compiles to a store + mfence or
 * an xchg). */
inline tso_fence(tso_t) {
    d_step { tso_drain_all(tso_t) }
}

/* lock cmpxchg: on success tso_ok = 1; on failure tso_ok = 0 and `tso_exp`
 * holds the value found, as in C11. */
inline tso_cas(tso_t, tso_w, tso_exp, tso_des, tso_ok) {
    d_step {
        tso_drain_all(tso_t);
        if
        :: mem[tso_w] == tso_exp -> mem[tso_w] = tso_des; tso_ok = 1
        :: else -> tso_exp = mem[tso_w]; tso_ok = 0
        fi
    }
}

/* xchg: `tso_old` gets the value replaced. */
inline tso_xchg(tso_t, tso_w, tso_v, tso_old) {
    d_step {
        tso_drain_all(tso_t);
        tso_old = mem[tso_w];
        mem[tso_w] = tso_v
    }
}

/* lock xadd: `tso_old` gets the value before the add. */
inline tso_fetch_add(tso_t, tso_w, tso_d, tso_old) {
    d_step {
        tso_drain_all(tso_t);
        tso_old = mem[tso_w];
        mem[tso_w] = mem[tso_w] + tso_d
    }
}

/* The store buffer of thread tso_t drains at moments of its own choosing. An
 * empty buffer is a valid place to end. */
proctype tso_flusher(byte tso_t) {
end:
    do
    :: d_step { sb_len[tso_t] > 0 -> tso_drain_oldest(tso_t) }
    od
}

/* ── memory.pml's interface on x86-TSO ────────────────────────────────── */

/* Every load is a plain mov, whatever its order. */
inline mm_load(mm_t, mm_w, mm_r, mm_ord) {
    tso_load(mm_t, mm_w, mm_r)
}

/* A relaxed or release store is a plain mov into the buffer; a seq_cst
 * store is mov + mfence (GCC), which drains the buffer after it. */
inline mm_store(mm_t, mm_w, mm_v, mm_ord) {
    tso_store(mm_t, mm_w, mm_v);
    if
    :: mm_ord == MM_SC -> d_step { tso_drain_all(mm_t); tso_i = 0 }
    :: else -> skip
    fi
}

/* Every RMW is a locked instruction, whatever its order. */
inline mm_cas(mm_t, mm_w, mm_exp, mm_des, mm_ok, mm_ord) {
    tso_cas(mm_t, mm_w, mm_exp, mm_des, mm_ok)
}

inline mm_xchg(mm_t, mm_w, mm_v, mm_old, mm_ord) {
    tso_xchg(mm_t, mm_w, mm_v, mm_old)
}

inline mm_fetch_add(mm_t, mm_w, mm_d, mm_old, mm_ord) {
    tso_fetch_add(mm_t, mm_w, mm_d, mm_old)
}

inline mm_rmw(mm_t, mm_w, mm_old, MM_NEWV, mm_ord) {
    d_step {
        tso_drain_all(mm_t);
        mm_old = mem[mm_w];
        mem[mm_w] = MM_NEWV
    }
}

inline mm_await_rmw(mm_t, mm_w, MM_COND, mm_old, MM_NEWV, mm_ord) {
    d_step {
        MM_COND ->
        tso_drain_all(mm_t);
        mm_old = mem[mm_w];
        mem[mm_w] = MM_NEWV
    }
}

/* The awaited value is in memory (the waiting thread has no store of its
 * own to the word in its buffer: models use it so). */
inline mm_await(mm_t, mm_w, MM_COND, mm_r, mm_ord) {
    d_step { MM_COND -> mm_r = mem[mm_w] }
}

/* Only a seq_cst fence is an instruction (mfence); acquire and release
 * fences only keep the compiler from moving accesses. */
inline mm_fence(mm_t, mm_ord) {
    if
    :: mm_ord == MM_SC -> d_step { tso_drain_all(mm_t); tso_i = 0 }
    :: else -> skip
    fi
}

proctype mm_flusher(byte mm_t) {
end:
    do
    :: d_step { sb_len[mm_t] > 0 -> tso_drain_oldest(mm_t) }
    od
}
