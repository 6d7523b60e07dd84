/*
 * dense_publish.pml — the dense-stack object, built by the owner and used
 * by another thread's coro_go() (cache.c, stack.c).
 *
 * Models:
 *   coro_sched_use_dense_stacks()  the owner builds the object
 *                      (coro__dense_create(): its slot size, a plain
 *                      field) and publishes it: a release store of
 *                      s->dense;
 *   coro_sched_set_stack_size()    then, on the owner, a new size: the
 *                      object is resized in place under its lock
 *                      (coro__dense_resize(): refused once a region is
 *                      mapped), and s->stack_size is stored (seq_cst);
 *   coro__shell_new()  another thread's coro_go(), twice (remote.c): an
 *                      acquire load of s->dense; with an object, a carve
 *                      under its lock (coro__dense_carve(): the first maps
 *                      a region of slots of the object's size); without
 *                      one, a guarded stack of s->stack_size.
 *
 * Abstracts: the object's fields are two words, its slot size and its
 * region (0: none yet; else the slot size the region was mapped with);
 * its lock is a word taken by an acquire RMW (0 -> 1) and given back by a
 * release store, as pthread mutexes order memory. The object is never
 * freed here (only coro_sched_destroy() frees it, once no other thread's
 * coro_go can still come: close.pml's contract). The owner's own loads of
 * s->dense and s->stack_size read its own last stores (they are not
 * modelled).
 *
 * Proves, for every interleaving, under x86-TSO and the weak model:
 *   - a coro_go that sees the object sees it built: its slot size is
 *     there (not the 0 of calloc);
 *   - every stack is carved with the slot size of the region it comes
 *     from: a resize either comes before the first carve, or is refused;
 *   - a guarded stack gets one of the sizes the owner stored.
 * (s->stack_size publishes nothing but itself: its seq_cst is more than
 * it needs; -DRELAXED_STACK_SIZE passes too.)
 *
 * Mutants (each must fail):
 *   MUTANT_PUBLISH_FIRST    s->dense is stored before the slot size
 *                           (TSO and weak): a coro_go carves with size 0.
 *   MUTANT_RESIZE_UNLOCKED  the resize checks for a region and changes the
 *                           size without the object's lock (TSO and
 *                           weak): a coro_go maps a region between the
 *                           check and the change, and its next stack is
 *                           carved with the new size from the old region.
 *   MUTANT_RELAXED_PUBLISH  the publishing store relaxed, not release
 *                           (weak only: x86 keeps stores in order).
 *   MUTANT_RELAXED_LOAD     coro__shell_new()'s load relaxed, not acquire
 *                           (weak only).
 */
#define NTHREADS 2
#define OWNER 0
#define REMOTE 1

#define DENSE 0      /* s->dense: 0 (NULL) or 1 */
#define SLOT 1       /* d->stack_size */
#define REGION 2     /* d->regions: 0, or the slot size it was mapped with */
#define LOCK 3       /* d->lock */
#define STACK_SIZE 4 /* s->stack_size */
#define NWORDS 5

#include "memory.pml"

#define SIZE_A 1     /* the size at the start */
#define SIZE_B 2     /* the owner's coro_sched_set_stack_size() */

#ifdef MUTANT_RELAXED_PUBLISH
#define PUBLISH_ORDER MM_RLX
#else
#define PUBLISH_ORDER MM_REL
#endif
#ifdef MUTANT_RELAXED_LOAD
#define READ_ORDER MM_RLX
#else
#define READ_ORDER MM_ACQ
#endif
#ifdef RELAXED_STACK_SIZE
#define SIZE_ORDER MM_RLX
#else
#define SIZE_ORDER MM_SC
#endif

#define LOCK_TAKE(t) mm_await_rmw(t, LOCK, mem[LOCK] == 0, old, 1, MM_ACQ)
#define LOCK_GIVE(t) mm_store(t, LOCK, 0, MM_REL)

proctype owner() {
    int old, r;

    /* coro_sched_use_dense_stacks(): coro__dense_create(stack_size) */
#ifdef MUTANT_PUBLISH_FIRST
    mm_store(OWNER, DENSE, 1, PUBLISH_ORDER);
    mm_store(OWNER, SLOT, SIZE_A, MM_RLX);
#else
    mm_store(OWNER, SLOT, SIZE_A, MM_RLX);
    mm_store(OWNER, DENSE, 1, PUBLISH_ORDER); /* the object is complete */
#endif

    /* coro_sched_set_stack_size(SIZE_B): coro__dense_resize() */
#ifndef MUTANT_RESIZE_UNLOCKED
    LOCK_TAKE(OWNER);
#endif
    mm_load(OWNER, REGION, r, MM_RLX);
    if
    :: r != 0 -> skip /* EBUSY: the size stays */
    :: else ->
        mm_store(OWNER, SLOT, SIZE_B, MM_RLX)
    fi;
#ifndef MUTANT_RESIZE_UNLOCKED
    LOCK_GIVE(OWNER);
#endif
    if
    :: r == 0 -> mm_store(OWNER, STACK_SIZE, SIZE_B, SIZE_ORDER)
    :: else -> skip
    fi
}

proctype remote() {
    int old, d, slot, region, size;
    byte i;

    for (i : 1 .. 2) {
        /* coro__shell_new() */
        mm_load(REMOTE, DENSE, d, READ_ORDER);
        if
        :: d != 0 ->
            /* coro__dense_carve() */
            LOCK_TAKE(REMOTE);
            mm_load(REMOTE, SLOT, slot, MM_RLX);
            assert(slot != 0); /* the object is built */
            mm_load(REMOTE, REGION, region, MM_RLX);
            if
            :: region == 0 -> /* dense_grow() */
                mm_store(REMOTE, REGION, slot, MM_RLX);
                region = slot
            :: else -> skip
            fi;
            assert(region == slot); /* the stack fits its region's slot */
            LOCK_GIVE(REMOTE)
        :: else ->
            /* coro__stack_map(c, stack_size) */
            mm_load(REMOTE, STACK_SIZE, size, SIZE_ORDER);
            assert(size == SIZE_A || size == SIZE_B)
        fi
    }
}

init {
    atomic {
        mem[STACK_SIZE] = SIZE_A; /* coro_sched_create(): before any coro_go */
        run owner();
        run remote();
        run mm_flusher(OWNER);
        run mm_flusher(REMOTE)
    }
}
