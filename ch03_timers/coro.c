/*
 * coro.c — coroutines with their own stacks, resumed by hand.
 *
 * The whole chapter in one picture (one thread):
 *
 *      thread stack            coroutine A            coroutine B
 *      ────────────            ───────────            ───────────
 *      coro_resume(A) ───────> runs ...
 *                              coro_resume(B) ──────> runs ...
 *                                                     coro_yield()
 *                              ... continues <─────── (suspended)
 *                              coro_yield()
 *      ... continues <──────── (suspended)
 *
 * Each arrow is one coro_context_switch(). Every coroutine remembers who
 * resumed it (`resumer`), so coro_yield() knows where to go back to: the
 * chain of resumers is a stack of coroutines, the "resume chain".
 */
#define _POSIX_C_SOURCE 200809L /* pthread_sigmask(), for the TSan build */
#include "coro_impl.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

/* ── The thread ───────────────────────────────────────────────────────── */

/*
 * What each thread knows. Invariant: `current` is the only coroutine of
 * this thread in state RUNNING; following `resumer` from it visits exactly
 * the NORMAL ones, and ends at NULL (the thread's own stack).
 */
struct coro_thread {
    coro *current;          /* the running coroutine, NULL on own stack */
    coro_context native;    /* the thread's own stack, while it is away */
#ifdef CORO_ASAN
    void *asan_fake_stack;
    const void *stack_bottom; /* the thread's own stack, learnt again */
    size_t stack_size;        /* on each switch away from it */
    bool leaving_own_stack;   /* the switch in progress starts there */
#endif
#ifdef CORO_TSAN
    void *tsan_fiber;
    sigset_t mask_across_switch; /* put back by the side that arrives */
#endif
};

static _Thread_local struct coro_thread this_thread;

/* A thread's identity is the address of its own coro_thread. */
static const void *thread_self(void)
{
    return &this_thread;
}

const void *coro__thread_id(void)
{
    return thread_self();
}

/* ── The registry: every stack, for the debugger ──────────────────────── */

/*
 * A suspended coroutine is on no thread's stack, so a debugger looking at
 * a stopped process (or a core file) has no way to find it. So every
 * coroutine stack is on this list, from the moment it is made until it is
 * freed, and `info coroutines` (tools/gdb/coro.py) walks it. The debugger
 * only reads the list, with the process stopped; the lock is for threads
 * that make or free stacks at the same time. Cost: a lock and a few
 * pointer writes per stack made or freed; nothing on a resume or a switch.
 */
static struct {
    pthread_mutex_t lock;
    coro *newest;  /* doubly linked through registry_prev and _next */
    size_t stacks; /* how many are on it */
} registry __attribute__((used)) = {PTHREAD_MUTEX_INITIALIZER, NULL, 0};

static void registry_link(coro *c)
{
    pthread_mutex_lock(&registry.lock);
    c->registry_prev = NULL;
    c->registry_next = registry.newest;
    if (registry.newest != NULL)
        registry.newest->registry_prev = c;
    registry.newest = c;
    registry.stacks++;
    pthread_mutex_unlock(&registry.lock);
}

static void registry_unlink(coro *c)
{
    pthread_mutex_lock(&registry.lock);
    if (c->registry_prev != NULL)
        c->registry_prev->registry_next = c->registry_next;
    else
        registry.newest = c->registry_next;
    if (c->registry_next != NULL)
        c->registry_next->registry_prev = c->registry_prev;
    registry.stacks--;
    pthread_mutex_unlock(&registry.lock);
}

/* ── Telling the tools about stacks and switches ─────────────────────── */

void coro__stack_created(coro *c)
{
    registry_link(c);
#ifdef CORO_TSAN
    c->tsan_fiber = __tsan_create_fiber(0);
#endif
#ifdef CORO_VALGRIND
    c->valgrind_stack_id = VALGRIND_STACK_REGISTER(
        c->stack_lo, c->stack_lo + c->stack_size);
#endif
    (void)c;
}

void coro__stack_destroyed(coro *c)
{
    registry_unlink(c);
#ifdef CORO_TSAN
    __tsan_destroy_fiber(c->tsan_fiber);
#endif
#ifdef CORO_VALGRIND
    VALGRIND_STACK_DEREGISTER(c->valgrind_stack_id);
#endif
    (void)c;
}

/* A stack that ran a coroutine to its end is about to run a new one. The
 * old coroutine's last frames never returned, so ASan still has them
 * poisoned; TSan gets a fresh fiber for the new coroutine. */
static void tools_stack_reused(coro *c)
{
#ifdef CORO_ASAN
    __asan_unpoison_memory_region(c->stack_lo, c->stack_size);
#endif
#ifdef CORO_TSAN
    __tsan_destroy_fiber(c->tsan_fiber);
    c->tsan_fiber = __tsan_create_fiber(0);
#endif
    (void)c;
}

#ifdef CORO_TSAN
/*
 * ThreadSanitizer runs a signal handler at once only while the thread is
 * in a blocking call (epoll_wait(), read() ...). A signal that arrives
 * elsewhere is queued in the state of the fiber that runs, and handled at
 * that fiber's next intercepted call. A coroutine that switches away and
 * never makes one again (parked for good, or freed) would keep the signal
 * queued forever: a server's SIGTERM was seen to go unanswered that way.
 *
 * So no signal may arrive during a switch. The side that leaves blocks the
 * asynchronous ones, and TSan's wrapper of pthread_sigmask() runs, on its
 * way out, any signal queued in the leaving fiber, on that fiber's stack.
 * The side that arrives puts the mask back (tools_after_switch()); a
 * signal that came meanwhile is delivered then, to the new fiber. Faults
 * stay unblocked: a blocked fault kills the process without a report.
 * Two system calls per switch, in the TSan build only.
 */
static void tsan_block_signals_across_switch(struct coro_thread *t)
{
    sigset_t asynchronous;

    sigfillset(&asynchronous);
    sigdelset(&asynchronous, SIGSEGV);
    sigdelset(&asynchronous, SIGBUS);
    sigdelset(&asynchronous, SIGILL);
    sigdelset(&asynchronous, SIGFPE);
    sigdelset(&asynchronous, SIGTRAP);
    sigdelset(&asynchronous, SIGSYS);
    pthread_sigmask(SIG_BLOCK, &asynchronous, &t->mask_across_switch);
}
#endif

/* Just before leaving `from` for `to` (NULL = the thread's own stack).
 * A finished coroutine never comes back: ASan may drop its fake stack. */
static void tools_before_switch(struct coro_thread *t, coro *from, coro *to)
{
#ifdef CORO_ASAN
    void **fake = from ? &from->asan_fake_stack : &t->asan_fake_stack;
    bool finished = from && from->state == CORO_DONE;

    t->leaving_own_stack = from == NULL;
    if (to)
        __sanitizer_start_switch_fiber(finished ? NULL : fake,
                                       to->stack_lo, to->stack_size);
    else
        __sanitizer_start_switch_fiber(finished ? NULL : fake,
                                       t->stack_bottom, t->stack_size);
#endif
#ifdef CORO_TSAN
    if (t->tsan_fiber == NULL)
        t->tsan_fiber = __tsan_get_current_fiber();
    tsan_block_signals_across_switch(t);
    __tsan_switch_to_fiber(to ? to->tsan_fiber : t->tsan_fiber, 0);
#endif
    (void)t;
    (void)from;
    (void)to;
}

/* Just after arriving on `self` (NULL = the thread's own stack). When we
 * came from the thread's own stack, ASan tells us where that stack is. */
static void tools_after_switch(struct coro_thread *t, coro *self)
{
#ifdef CORO_ASAN
    const void *came_from_bottom;
    size_t came_from_size;

    __sanitizer_finish_switch_fiber(
        self ? self->asan_fake_stack : t->asan_fake_stack,
        &came_from_bottom, &came_from_size);
    if (t->leaving_own_stack) {
        t->stack_bottom = came_from_bottom;
        t->stack_size = came_from_size;
    }
#endif
#ifdef CORO_TSAN
    pthread_sigmask(SIG_SETMASK, &t->mask_across_switch, NULL);
#endif
    (void)t;
    (void)self;
}

/* ── Switching ────────────────────────────────────────────────────────── */

/* Leave `from` for `to`; either may be NULL for the thread's own stack.
 * `value` is what `to`'s own call of switch_to() returns when it wakes up.
 * Returns when something switches back to `from`, with that switch's value.
 *
 * Why a value travels with the switch: coro_resume() and coro_yield() end
 * with `return switch_to(...)`, and once the tools' hooks below compile to
 * nothing (the normal build), the compiler turns that last call into a
 * jump (a tail call). The switch then saves, as `from`'s place to come
 * back to, the address in *our caller* that called coro_resume() or
 * coro_yield(), and the other side, when it switches back, jumps straight
 * there. No `ret` runs on the way back. A `ret` here would be predicted
 * from the CPU's return-stack buffer, which only saw the calls made on the
 * *other* stack: wrong on every switch (Chapter 1's notes/performance.md
 * has the figures).
 * For that, nothing may be left to do after the switch: so the side that
 * leaves does all the bookkeeping for the side that arrives (states,
 * current coroutine, the result its call returns) before it jumps. */
static int switch_to(struct coro_thread *t, coro *from, coro *to, int value)
{
    int result;

    tools_before_switch(t, from, to);
    result = coro_context_switch(from ? &from->ctx : &t->native,
                                 to ? &to->ctx : &t->native, value);
    tools_after_switch(t, from);
    return result;
}

/* The running coroutine `self` stops (SUSPENDED or DONE) and control goes
 * back to whoever resumed it, which becomes RUNNING again and whose
 * coro_resume() (or the pump's coro__resume()) returns `left`: how `self`
 * left (coro_left). Returns, once `self` is resumed again, what its
 * resumer passed: the result of its coro_yield(). */
static int return_to_resumer(struct coro_thread *t, coro *self,
                             coro_state new_state, coro_left left)
{
    coro *back = self->resumer;

    self->state = new_state;
    self->resumer = NULL;
    t->current = back;
    if (back)
        back->state = CORO_RUNNING;
    return switch_to(t, self, back, (int)left);
}

/* The first code to run on a new coroutine's stack (see context.h). */
static void coroutine_main(void *arg)
{
    coro *self = arg;
    struct coro_thread *t = &this_thread;

    tools_after_switch(t, self);
    self->started = true; /* here, once, not at every resume */
    self->result = self->fn(self->arg);
    /* The pump learns it finished; to coro_resume(), which resumes only
     * coroutines of coro_create(), it leaves with 0 as ever. */
    return_to_resumer(t, self, CORO_DONE,
                      self->sched ? CORO_LEFT_FINISHED : 0);
    abort(); /* a DONE coroutine is never switched back to */
}

/* ── Shared with the scheduler ────────────────────────────────────────── */

void coro__prepare(coro *c, coro_fn fn, void *arg, bool reused)
{
    c->fn = fn;
    c->arg = arg;
    c->result = NULL;
    c->state = CORO_SUSPENDED;
    c->started = false;
    c->resumer = NULL;
    c->owner = thread_self();
    c->trace_id = 0;    /* a new coroutine to the trace, */
    c->name[0] = '\0';  /* and to the debugger */
    c->trace_arrow = 0;
#ifdef CORO_ASAN
    c->asan_fake_stack = NULL;
#endif
    if (reused)
        tools_stack_reused(c);
    coro_context_make(&c->ctx, c->stack_lo, c->stack_size,
                      coroutine_main, c);
}

int coro__resume(coro *c)
{
    struct coro_thread *t = &this_thread;
    coro *caller = t->current;

    if (caller)
        caller->state = CORO_NORMAL;
    c->resumer = caller;
    c->state = CORO_RUNNING;
    t->current = c;
    /* c's coro_yield() returns 0. Back here when c yielded, waits or
     * returned: return_to_resumer() has made the caller current and
     * RUNNING again, and passed how c left, which we return. */
    return switch_to(t, caller, c, 0);
}

/* ── The API ──────────────────────────────────────────────────────────── */

coro *coro_create(coro_fn fn, void *arg, size_t stack_size)
{
    size_t usable = coro__usable_stack_size(stack_size);
    coro *c;
    int err;

    if (fn == NULL || usable == 0) {
        errno = EINVAL;
        return NULL;
    }
    c = calloc(1, sizeof *c);
    if (c == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    err = coro__stack_map(c, usable);
    if (err != 0) {
        free(c);
        errno = err;
        return NULL;
    }
    coro__stack_created(c);
    coro__prepare(c, fn, arg, false);
    coro__overflow_prepare_thread();
    return c;
}

/* Why coro_resume(c) refuses `c`: the error it returns. Out of line and
 * marked cold, so that the good resume runs straight through its tests
 * (coro_resume() says why). */
static __attribute__((noinline, cold)) int resume_refused(const coro *c)
{
    if (c == NULL)
        return EINVAL;
    if (c->owner != thread_self())
        return EPERM; /* checked first: its state is another thread's */
    if (c->state == CORO_DONE)
        return EINVAL;
    if (c->sched != NULL)
        return EPERM; /* its scheduler's pump resumes it */
    return EBUSY;     /* RUNNING or NORMAL: its stack is in use */
}

/*
 * The tests a good resume passes are one condition, expected false: the
 * compiler lays the good path out as one straight run of instructions and
 * puts the rest in resume_refused(), which sorts out the error. Written
 * as a test and a return per error, the good path jumped over each
 * error's `return` (a coro_resume() + coro_yield() round trip, paired
 * rounds on an Intel Xeon: about 5 percent slower).
 */
int coro_resume(coro *c)
{
    if (__builtin_expect(c == NULL || c->owner != thread_self() ||
                         c->sched != NULL || c->state != CORO_SUSPENDED, 0))
        return resume_refused(c);
    return coro__resume(c); /* 0 */
}

int coro_yield(void)
{
    struct coro_thread *t = &this_thread;

    if (t->current == NULL)
        return EPERM;
    return return_to_resumer(t, t->current, CORO_SUSPENDED,
                             CORO_LEFT_YIELDED); /* 0 */
}

int coro__yield_to_wait(void)
{
    struct coro_thread *t = &this_thread;

    return return_to_resumer(t, t->current, CORO_SUSPENDED,
                             CORO_LEFT_TO_WAIT);
}

coro *coro_self(void)
{
    return this_thread.current;
}

coro_state coro_status(const coro *c)
{
    return c ? c->state : CORO_DONE;
}

void *coro_result(const coro *c)
{
    return c ? c->result : NULL;
}

int coro_destroy(coro *c)
{
    if (c == NULL)
        return EINVAL;
    if (c->owner != thread_self())
        return EPERM;
    if (c->state == CORO_RUNNING || c->state == CORO_NORMAL ||
        (c->state == CORO_SUSPENDED && c->started))
        return EBUSY; /* live frames on its stack */
    if (c->sched != NULL)
        return coro__sched_destroy_coroutine(c);

    coro__stack_destroyed(c);
    coro__stack_unmap(c);
    free(c);
    return 0;
}
