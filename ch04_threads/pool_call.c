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
 * Built on the public API (coro_pool_go(), events), plus one internal
 * call to know whether the caller is a scheduled coroutine.
 *
 * Owns: the call record. Thread: the caller's side runs on its own
 * scheduler's thread, the pool's side on a worker; they meet only through
 * the event.
 */
#include "coro_impl.h"

#include <errno.h>

/*
 * The call record lives on the caller's stack, with a manual-reset event
 * that the worker sets when the result is in. An event, not coro_wake():
 * a wake that arrives before the caller parks would stay behind as a
 * permit and make the caller's next, unrelated coro_park() return at once.
 * Setting the event is the worker's last touch of the record: the caller
 * cannot return (and its stack frame cannot go) before the set has
 * released the event's lock and delivered the wake-up.
 */
struct pool_call {
    coro_fn fn;
    void *arg;
    void *result;
    coro_event done;
};

static void *call_body(void *arg)
{
    struct pool_call *call = arg;

    call->result = call->fn(call->arg);
    coro_event_set(&call->done);
    return NULL;
}

int coro_pool_call(coro_pool *p, coro_fn fn, void *arg, void **result)
{
    struct pool_call call = {fn, arg, NULL, {0}};
    int err;

    if (p == NULL || fn == NULL)
        return EINVAL;
    if (coro__scheduled_self() == NULL)
        return EPERM;
    err = coro_event_init(&call.done, true, false);
    if (err != 0)
        return err;
    err = coro_pool_go(p, call_body, &call);
    if (err == 0)
        err = coro_event_await(&call.done); /* parks: the pump runs others */
    coro_event_destroy(&call.done);
    if (err == 0 && result != NULL)
        *result = call.result;
    return err;
}
