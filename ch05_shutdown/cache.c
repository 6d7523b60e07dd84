/*
 * cache.c — where a scheduler's coroutines get their stacks.
 *
 *   coro_go / coro_spawn ──shell_get──> a cached coroutine, or a new one
 *                                        (guarded stack, or dense)
 *   finished / destroyed ──shell_put──> the cache (past its limit: freed)
 *
 * Mapping a stack is a system call or two (mmap, mprotect for the guard
 * page); a finished coroutine keeps its stack, so the next coroutine can
 * take over the whole "shell" — struct and stack — with no system call.
 * The cache holds guarded stacks of the current size only: changing the
 * size (coro_sched_set_stack_size()) flushes it. Dense stacks
 * (coro_sched_use_dense_stacks(); carved side by side by stack.c) are
 * always kept.
 *
 * Owns: the cache, the stack size and the dense object of struct
 * coro_sched. Thread: the scheduler's owner only, except
 * coro__shell_new(): another thread's coro_go builds its coroutine with a
 * stack of its own (remote.c), reading the stack size and the dense
 * object, which are shared for that.
 */
#include "sched_impl.h"

#include <errno.h>
#include <stdlib.h>

/* Finished guarded stacks kept for reuse, at most (64 MiB of address
 * space at the default size). Dense stacks are always kept. */
enum { STACK_CACHE_MAX = 1024 };

void coro__shell_free(coro *c)
{
    coro__stack_destroyed(c);
    if (c->map != NULL)
        coro__stack_unmap(c);
    free(c);
}

/* relaxed: only the owner ever writes `dense`, so it always sees its own
 * last write. */
coro_dense *coro__owner_dense(const coro_sched *s)
{
    return atomic_load_explicit(&s->dense, memory_order_relaxed);
}

coro *coro__shell_new(coro_sched *s)
{
    coro *c = calloc(1, sizeof *c);
    /* acquire: pairs with the release in coro_sched_use_dense_stacks(),
     * so a dense object we see is fully built. A coro_go racing with that
     * call may still see NULL and map a guarded stack: harmless, such a
     * coroutine is cached and freed like any other. */
    coro_dense *dense = atomic_load_explicit(&s->dense, memory_order_acquire);
    int err;

    if (c == NULL)
        return NULL;
    err = dense != NULL ? coro__dense_carve(dense, c)
                        : coro__stack_map(c, atomic_load(&s->stack_size));
    if (err != 0) {
        free(c);
        return NULL;
    }
    coro__stack_created(c);
    return c;
}

coro *coro__shell_get(coro_sched *s, bool *reused)
{
    coro *c = s->cache;

    if (c != NULL) {
        s->cache = c->next_free;
        s->cached--;
        *reused = true;
        return c;
    }
    *reused = false;
    return coro__shell_new(s);
}

void coro__shell_put(coro_sched *s, coro *c)
{
    if (coro__owner_dense(s) == NULL &&
        (s->cached >= STACK_CACHE_MAX ||
                             c->stack_size != atomic_load(&s->stack_size))) {
        coro__shell_free(c);
        return;
    }
    c->next_free = s->cache;
    s->cache = c;
    s->cached++;
}

void coro__cache_flush(coro_sched *s)
{
    while (s->cache != NULL) {
        coro *c = s->cache;
        s->cache = c->next_free;
        coro__shell_free(c);
    }
    s->cached = 0;
}

int coro_sched_set_stack_size(coro_sched *s, size_t stack_size)
{
    size_t usable = coro__usable_stack_size(stack_size);
    coro_dense *dense;

    if (s == NULL || usable == 0)
        return EINVAL;
    if (s->owner != coro__thread_id())
        return EPERM;
    dense = coro__owner_dense(s);
    if (dense != NULL) {
        /* In place, under the dense object's lock: another thread's
         * coro_go may be carving from it right now, so it is never
         * replaced (and dense mode stays on whatever happens here). */
        int err = coro__dense_resize(dense, usable);
        if (err != 0)
            return err;
    }
    atomic_store(&s->stack_size, usable);
    coro__cache_flush(s);
    return 0;
}

int coro_sched_use_dense_stacks(coro_sched *s)
{
    coro_dense *dense;

    if (s == NULL)
        return EINVAL;
    if (s->owner != coro__thread_id())
        return EPERM;
    if (coro__owner_dense(s) != NULL)
        return 0;
    if (coro__alive_count(s) > 0 || s->handles > 0)
        return EBUSY; /* guarded stacks in use */
    coro__cache_flush(s);
    dense = coro__dense_create(atomic_load(&s->stack_size));
    if (dense == NULL)
        return ENOMEM;
    /* release: the object is complete before another thread's coro_go
     * can see it (the acquire in coro__shell_new()). */
    atomic_store_explicit(&s->dense, dense, memory_order_release);
    return 0;
}
