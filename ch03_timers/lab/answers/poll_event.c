/*
 * poll_event.c — the reference answer of Chapter 3's exercise 5: a poll
 * that returns as soon as a given event is set, with no new API.
 *
 * coro_sched_poll_until() cannot watch an event, but a coroutine can: a
 * watcher awaits the event (with the caller's timeout as its own)
 * and, when it comes back, marks the watch finished. The caller polls
 * until the watcher has finished. Each poll returns once it has run what
 * was ready, so the caller sees the mark one poll after the set at most:
 * the set readies the watcher, and the next poll runs it.
 *
 * The watch lives on the caller's stack, so the watcher must be finished
 * before the call returns; it always is: it ends by the set or by its own
 * timeout, and the caller polls until it has ended. So nothing is left
 * behind, not even on a timeout (a watcher that awaited with no timeout
 * would stay on the event's list: coro_event_destroy() would say EBUSY).
 *
 * Meant for a manual-reset event (a gate: "set" is a state). On an
 * auto-reset event the watcher would take the one hand-off that a set
 * gives; see the instructors' notes.
 *
 * The checks of tools/lab: `tools/lab check ch03 poll_event`.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "coro.h"

int poll_for_event(coro_sched *s, coro_event *e, uint64_t ns);

struct watch {
    coro_event *e;
    uint64_t ns;
    int result;
    bool finished;
};

static void *watcher(void *arg)
{
    struct watch *w = arg;

    w->result = coro_event_await_for(w->e, w->ns);
    w->finished = true;
    return NULL;
}

int poll_for_event(coro_sched *s, coro_event *e, uint64_t ns)
{
    struct watch w = {.e = e, .ns = ns, .result = EINVAL};
    int err;

    if (s == NULL || e == NULL)
        return EINVAL;
    /* Inside s's own pump every poll would return 0 at once: never done. */
    if (coro_sched_self() == s)
        return EPERM;
    err = coro_go(s, watcher, &w);
    if (err != 0)
        return err; /* EPERM: another thread's scheduler; ENOMEM */
    /* No deadline of our own: the watcher's timeout is the pump's next
     * timer at the latest, so an idle poll sleeps until then and no
     * longer. (Our own deadline, a little earlier than the watcher's,
     * would make the last polls spin until the watcher's came.) */
    while (!w.finished)
        coro_sched_poll_until(s, UINT64_MAX);
    return w.result;
}
