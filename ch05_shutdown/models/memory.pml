/*
 * memory.pml — the memory model a model runs on, and the one interface
 * to it. Each model of this directory describes its code's atomics with
 * the C11 order the code uses, and runs twice (tools/spin.bzl):
 *
 *   tso.pml   x86-TSO: store buffers, first in first out; a locked
 *             instruction or mfence drains them. What x86 machines do.
 *   weak.pml  (-DMM_WEAK) views: what C11's relaxed, acquire, release and
 *             seq_cst allow, as ARMv8 can show it. Stores to different
 *             words may become visible out of order; relaxed loads may
 *             be satisfied early, with an older value.
 *
 * On x86 several C11 orders compile to the same instruction (a seq_cst
 * load and a relaxed load are both a plain mov; every RMW is locked and
 * so acts as seq_cst), so a weakened order can pass under tso.pml and
 * still be a bug on ARMv8. Under weak.pml it is not.
 *
 * A model defines NTHREADS (hardware threads: a signal handler runs on
 * its thread's) and NWORDS (shared words, indexes into mem[]), includes
 * this file, and starts one mm_flusher(t) per thread. Then, with `ord`
 * one of the orders below:
 *
 *   mm_load(t, w, r, ord)              r = atomic_load_explicit(w, ord)
 *   mm_store(t, w, v, ord)             atomic_store_explicit(w, v, ord)
 *   mm_cas(t, w, exp, des, ok, ord)    ok = compare_exchange_strong(w,
 *                                      &exp, des, ord, ord without release)
 *   mm_xchg(t, w, v, old, ord)         old = atomic_exchange(w, v)
 *   mm_fetch_add(t, w, d, old, ord)    old = atomic_fetch_add(w, d)
 *   mm_rmw(t, w, old, NEWV, ord)       any RMW: old = w; w = NEWV, where
 *                                      NEWV is an expression of `old`
 *   mm_fence(t, ord)                   atomic_thread_fence(ord)
 *   mm_await(t, w, COND, r, ord)       wait until COND (on mem[w]) holds,
 *                                      then load it: a spin loop, or the
 *                                      kernel's compare in futex_wait
 *   mm_await_rmw(t, w, COND, old, NEWV, ord)   the same, as an RMW
 *
 * mem[w] is the newest value of word w (in tso.pml: memory, without the
 * stores still buffered). Read it directly only where the real code does
 * not load at all: a guard that stands for "eventually", a ghost
 * assertion, the final check.
 */
#define MM_RLX 0
#define MM_ACQ 1
#define MM_REL 2
#define MM_ACQ_REL 3
#define MM_SC 4

#define MM_IS_ACQ(o) ((o) == MM_ACQ || (o) == MM_ACQ_REL || (o) == MM_SC)
#define MM_IS_REL(o) ((o) == MM_REL || (o) == MM_ACQ_REL || (o) == MM_SC)

#ifdef MM_WEAK
#include "weak.pml"
#else
#include "tso.pml"
#endif
