/*
 * sched.c — the scheduler: creating work, and the pump that runs it.
 *
 *   coro_go / coro_spawn / coro_post           coro_sched_run / _step
 *              │                                        │
 *              v                                        v
 *   ready queue, highest priority first:      pop the front entry:
 *     prio 5: [c7]                              - coroutine: resume it;
 *     prio 0: [c1] -> [post] -> [c4] -> ...       yielded -> push it back,
 *     prio -1: [c2]                               done -> free or keep
 *                                               - post: call it
 *
 * The queue itself (and the priorities that order it) is in ready.c, the
 * stacks in cache.c, the trace in trace.c; struct coro_sched, which they
 * all share, is in sched_impl.h.
 *
 * Owns: the counts (alive, handles, posts) and the spare post entries of
 * struct coro_sched, and the scheduler's life from create to destroy.
 * Thread: the scheduler's owner only; every entry point checks it.
 */
#include "sched_impl.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

/* Run posts kept for reuse, at most. */
enum { SPARE_POSTS_MAX = 1024 };

/* The scheduler whose pump is running on this thread (innermost). */
static _Thread_local coro_sched *pumping_now;

/* ── Creating work ────────────────────────────────────────────────────── */

/* Checks shared by coro_go, coro_spawn and coro_post. */
static int check_caller(const coro_sched *s, const void *fn)
{
    if (s == NULL || fn == NULL)
        return EINVAL;
    if (s->owner != coro__thread_id())
        return EPERM;
    return 0;
}

/* Create a coroutine of `s` and queue it. Returns 0 or an errno value. */
static int sched_start(coro_sched *s, coro_fn fn, void *arg, bool detached,
                       coro **out)
{
    int err = check_caller(s, (const void *)fn);
    bool reused;
    coro *c;

    if (err != 0)
        return err;
    /* The new coroutine's level, and the posts' (see ready.c). */
    if (coro__levels_reserve(s, s->alive + 1 + LEVELS_FOR_POSTS) != 0)
        return ENOMEM;
    c = coro__shell_get(s, &reused);
    if (c == NULL)
        return ENOMEM;
    coro__prepare(c, fn, arg, reused);
    c->sched = s;
    c->priority = 0;
    c->detached = detached;
    c->ready.coroutine = c;
    s->alive++;
    if (!detached)
        s->handles++;
    coro__overflow_prepare_thread();
    coro__queue_coroutine(s, c);
    if (coro__tracing())
        coro__trace_created(s, c, detached);
    *out = c;
    return 0;
}

int coro_go(coro_sched *s, coro_fn fn, void *arg)
{
    coro *c;

    return sched_start(s, fn, arg, true, &c);
}

coro *coro_spawn(coro_sched *s, coro_fn fn, void *arg)
{
    coro *c = NULL;
    int err = sched_start(s, fn, arg, false, &c);

    if (err != 0) {
        errno = err;
        return NULL;
    }
    return c;
}

int coro_post(coro_sched *s, coro_post_fn fn, void *arg)
{
    int err = check_caller(s, (const void *)fn);
    struct post *p;

    if (err != 0)
        return err;
    if (s->posts_pending >= s->max_posts) {
        s->posts_rejected++;
        return EAGAIN;
    }
    if (coro__levels_reserve(s, s->alive + LEVELS_FOR_POSTS) != 0)
        return ENOMEM;
    p = s->spare_posts;
    if (p != NULL) {
        s->spare_posts = p->next_free;
        s->spare_count--;
    } else if ((p = malloc(sizeof *p)) == NULL) {
        return ENOMEM;
    }
    p->ready.coroutine = NULL;
    p->fn = fn;
    p->arg = arg;
    p->trace_number = coro__tracing() ? coro__trace_posted(s) : 0;
    s->posts_pending++;
    coro__ready_push(s, &p->ready, 0);
    return 0;
}

/* ── The pump ─────────────────────────────────────────────────────────── */

/*
 * Resume one coroutine; afterwards, requeue it or retire it. The yield,
 * the pump's most common case, is marked as expected, so that the compiler
 * lays it out straight on: otherwise it jumped away to the requeue and
 * back (a scheduled yield, paired rounds on an Intel Xeon: about 3
 * percent).
 *
 * A dense stack's canary (stack.c) is checked here, each time its
 * coroutine comes back, and not by the coroutine as it leaves: a call in
 * return_to_resumer() made the compiler give every switch out a stack
 * frame of its own, dense stack or not (seven instructions more per
 * yield), where the pump's frame is there already. Every switch out of a
 * scheduler's coroutine comes back here: nothing else resumes one.
 *
 * `traced`: record the resume (trace.c). Always a constant, so that the
 * pump has two loops: its own, with no trace in it, and run_traced()'s.
 */
static inline __attribute__((always_inline)) void
run_coroutine(coro_sched *s, coro *c, bool traced)
{
    uint64_t began = traced ? coro__trace_clock() : 0;

    c->queued = false;
    coro__resume(c);
    if (c->map == NULL && !coro__stack_canary_intact(c))
        coro__overflow_abort(c); /* its dense stack ran over its end */
    if (__builtin_expect(c->state != CORO_DONE, 1)) {
        if (traced)
            coro__trace_resume(s, c, began, CORO_TRACE_YIELDED);
        coro__queue_coroutine(s, c); /* it yielded: behind everything ready */
        return;
    }
    if (traced)
        coro__trace_resume(s, c, began, CORO_TRACE_FINISHED);
    s->alive--;
    if (c->detached)
        coro__shell_put(s, c);
    /* A joinable one waits for coro_destroy(). */
}

/* Run one post. Its entry is recycled before the call, so the post may
 * post again even under a limit of one. */
static void run_post(coro_sched *s, struct post *p)
{
    coro_post_fn fn = p->fn;
    void *arg = p->arg;
    uint64_t number = p->trace_number, began = 0;

    if (s->spare_count < SPARE_POSTS_MAX) {
        p->next_free = s->spare_posts;
        s->spare_posts = p;
        s->spare_count++;
    } else {
        free(p);
    }
    s->posts_pending--;
    if (number != 0)
        began = coro__trace_clock();
    fn(s, arg);
    if (number != 0)
        coro__trace_post_ran(s, number, began);
}

/*
 * Run the front entry, if any; false if nothing was ready. The caller
 * holds the pump (s->pumping).
 *
 * Always inlined, and so is run_coroutine(): the call to coro__resume()
 * must sit in the body of the pump's loop, not in a function the loop
 * calls. coro__resume() does not come back through a `ret`: the
 * coroutine's switch back jumps to the instruction after the call
 * (switch_to() in coro.c says why). The CPU predicts each `ret` from its
 * return-stack buffer, which meanwhile saw the coroutine's own call of
 * coro_yield(); so the next `ret` on the pump's stack is predicted to go
 * back into the coroutine, and is wrong. Were that `ret` a helper's, every
 * resume would pay for it (a scheduled yield, //bench:sched on an AMD
 * EPYC: 12.4 ns per switch, against 8.2 to 9.0 with the call in the
 * loop). In the loop, the next `ret` is the pump's own, once per run.
 *
 * `traced`: record what runs (run_coroutine() says how).
 */
static inline __attribute__((always_inline)) bool run_one(coro_sched *s,
                                                          bool traced)
{
    coro_ready *entry = coro__ready_pop(s);

    if (entry == NULL)
        return false;
    if (entry->coroutine != NULL)
        run_coroutine(s, entry->coroutine, traced);
    else
        run_post(s, (struct post *)entry);
    return true;
}

/* Whether coro_sched_run() has work left. Every alive coroutine is queued
 * while the pump runs, and so is every pending post: while there is
 * work, there is always something to run. */
static bool work_remains(const coro_sched *s)
{
    return s->alive > 0 || s->posts_pending > 0;
}

/*
 * The pump's loop while a trace records, until the work is done or the
 * trace stops: a loop of its own, out of line and marked cold, so that
 * the pump's usual loop has no test of the trace in it at all. The price:
 * a trace that starts while coro_sched_run() is running (a coroutine
 * started it, or another thread) is seen at the pump's next entry, not in
 * this run. (Chapter 3's pump looks at the start of every turn.)
 */
static __attribute__((noinline, cold)) void run_traced(coro_sched *s)
{
    while (work_remains(s) && coro__tracing()) {
        if (!run_one(s, true))
            abort();
    }
}

bool coro__may_pump(const coro_sched *s)
{
    return s->owner == coro__thread_id() && !s->pumping;
}

coro_sched *coro__pump_enter(coro_sched *s)
{
    coro_sched *outer = pumping_now;

    s->pumping = true;
    s->pump_caller = coro_self();
    pumping_now = s;
    return outer;
}

void coro__pump_leave(coro_sched *s, coro_sched *outer)
{
    s->pumping = false;
    pumping_now = outer;
}

int coro_sched_run(coro_sched *s)
{
    coro_sched *outer;

    if (s == NULL)
        return EINVAL;
    if (!coro__may_pump(s))
        return EPERM;
    outer = coro__pump_enter(s);
    if (coro__tracing())
        run_traced(s);
    while (work_remains(s)) {
        if (!run_one(s, false))
            abort();
    }
    coro__pump_leave(s, outer);
    return 0;
}

bool coro_sched_step(coro_sched *s)
{
    coro_sched *outer;
    bool ran;

    if (s == NULL || !coro__may_pump(s))
        return false;
    outer = coro__pump_enter(s);
    ran = run_one(s, coro__tracing());
    coro__pump_leave(s, outer);
    return ran;
}

/* ── The scheduler itself ─────────────────────────────────────────────── */

coro_sched *coro_sched_create_limit(size_t max_posts)
{
    coro_sched *s;

    if (max_posts == 0) {
        errno = EINVAL;
        return NULL;
    }
    s = calloc(1, sizeof *s);
    if (s == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    s->owner = coro__thread_id();
    s->max_posts = max_posts;
    s->stack_size = coro__usable_stack_size(0);
    coro__trace_sched_created(s);
    return s;
}

coro_sched *coro_sched_create(void)
{
    return coro_sched_create_limit(SIZE_MAX);
}

size_t coro_sched_alive(const coro_sched *s)
{
    return s ? s->alive : 0;
}

coro_sched *coro_sched_self(void)
{
    coro *c = coro_self();

    /* In a post, the stack is the pump's: the running coroutine, if any,
     * is the one that entered the pump (a coroutine of another scheduler
     * pumping this one), so the answer is the pump's scheduler. */
    if (pumping_now != NULL && c == pumping_now->pump_caller)
        return pumping_now;
    if (c != NULL && c->sched != NULL)
        return c->sched;
    return pumping_now;
}

int coro_sched_destroy(coro_sched *s)
{
    if (s == NULL)
        return EINVAL;
    if (s->owner != coro__thread_id())
        return EPERM;
    if (s->pumping || s->alive > 0 || s->posts_pending > 0 || s->handles > 0)
        return EBUSY;

    coro__cache_flush(s);
    if (s->dense != NULL)
        coro__dense_destroy(s->dense);
    coro__levels_free(s);
    while (s->spare_posts != NULL) {
        struct post *p = s->spare_posts;
        s->spare_posts = p->next_free;
        free(p);
    }
    coro__trace_sched_destroyed(s);
    free(s);
    return 0;
}

/* ── Coroutines of a scheduler ────────────────────────────────────────── */

int coro__sched_destroy_coroutine(coro *c)
{
    coro_sched *s = c->sched;

    if (c->detached)
        return EINVAL; /* the scheduler owns it; this handle is stale */
    if (c->queued || c->state != CORO_DONE)
        return EBUSY;
    s->handles--;
    c->detached = true; /* a stale handle to it now fails as above */
    coro__shell_put(s, c);
    return 0;
}
