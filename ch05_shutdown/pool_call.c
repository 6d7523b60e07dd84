/*
 * pool_call.c — coro_pool_call(): a coroutine on any scheduler hands a
 * function to a pool and waits for its result without blocking its
 * thread.
 *
 *   caller (a coroutine, any scheduler)        the pool
 *     coro_pool_call(p, fn, arg, &r) ──go──>   a worker's coroutine:
 *       parks on `done`                           result = fn(arg)
 *       <──────────── event set ──────────────    set `done`
 *     r = result
 *
 * Built on the public API (events), plus a few internal calls: the
 * pool's go with a hook for a task that never starts (coro__pool_go(),
 * pool.c), cleanups, and whether the caller is a scheduled coroutine.
 *
 * Owns: the call record. Thread: the caller's side runs on its own
 * scheduler's thread, the pool's side on a worker; they meet only through
 * the event.
 */
#include "coro_impl.h"

#include <errno.h>
#include <stdlib.h>

/*
 * The call record is shared by the caller and the pool's coroutine, and
 * either may be the last to touch it: the caller may be cancelled and
 * leave while `fn` still runs, and the pool may finish after the caller
 * is gone. So it lives on the heap with two references, and the last one
 * released frees it.
 *
 * The pool's side sets `done`, a manual-reset event, when it finishes —
 * from a cleanup, so that a coroutine abandoned by a pool shutdown (or a
 * task that never starts) still wakes the caller, with ESHUTDOWN. An
 * event, not coro_wake(): a wake that arrives before the caller parks
 * would stay behind as a permit and make the caller's next, unrelated
 * coro_park() return at once.
 */
struct pool_call {
    coro_fn fn;
    void *arg;
    void *result;
    int status;             /* ESHUTDOWN until fn has returned */
    coro_event done;
    _Atomic int references; /* the caller's and the pool's */
    coro_cleanup pool_side; /* the pool coroutine's cleanup: call_finished */
};

static void call_release(void *arg)
{
    struct pool_call *call = arg;

    if (atomic_fetch_sub(&call->references, 1) == 1) {
        coro_event_destroy(&call->done);
        free(call);
    }
}

/* The pool's side is over, whether fn returned or not. */
static void call_finished(void *arg)
{
    struct pool_call *call = arg;

    coro_event_set(&call->done);
    call_release(call);
}

static void *call_body(void *arg)
{
    struct pool_call *call = arg;

    call->pool_side = (coro_cleanup){call_finished, call, NULL, false};
    coro__cleanup_push(coro_self(), &call->pool_side);
    call->result = call->fn(call->arg);
    call->status = 0;
    return NULL; /* call_finished() runs as the coroutine finishes */
}

int coro_pool_call(coro_pool *p, coro_fn fn, void *arg, void **result)
{
    coro *self = coro__scheduled_self();
    coro_cleanup caller_side = {call_release, NULL, NULL, false};
    struct pool_call *call;
    int err;

    if (p == NULL || fn == NULL)
        return EINVAL;
    if (self == NULL)
        return EPERM;
    if (coro_canceled())
        return coro__refuse_canceled();
    call = calloc(1, sizeof *call);
    if (call == NULL)
        return ENOMEM;
    call->fn = fn;
    call->arg = arg;
    call->status = ESHUTDOWN;
    atomic_init(&call->references, 2);
    err = coro_event_init(&call->done, true, false);
    if (err != 0) {
        free(call);
        return err;
    }
    err = coro__pool_go(p, call_body, call, call_finished);
    if (err != 0) {
        coro_event_destroy(&call->done);
        free(call);
        return err;
    }
    /* If this coroutine is abandoned while it waits, its reference is
     * released by the shutdown. */
    caller_side.arg = call;
    coro__cleanup_push(self, &caller_side);
    err = coro_event_await(&call->done); /* parks: the pump runs others */
    coro__cleanup_pop(self, &caller_side);
    if (err == 0) {
        err = call->status;
        if (err == 0 && result != NULL)
            *result = call->result;
    }
    call_release(call);
    return err;
}
