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
#define _GNU_SOURCE
#include "coro.h"
#include "context.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ── Tools that watch memory and stacks ─────────────────────────────────
 *
 * AddressSanitizer and ThreadSanitizer track "the current stack" per
 * thread; a stack switch they do not see looks to them like memory
 * corruption or a data race. Each offers a fiber API: we announce every
 * switch. Valgrind needs each stack registered once.
 */
#if defined(__SANITIZE_ADDRESS__)
#define CORO_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define CORO_TSAN 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CORO_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define CORO_TSAN 1
#endif
#endif

#ifdef CORO_ASAN
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef CORO_TSAN
#include <sanitizer/tsan_interface.h>
#endif
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define CORO_VALGRIND 1
#endif
#endif

/* ── The data ─────────────────────────────────────────────────────────── */

struct coro {
    coro_context ctx;   /* saved registers while not running */
    coro_fn fn;
    void *arg;
    void *result;       /* fn's return value; NULL until DONE */
    coro_state state;
    bool started;       /* it has run: a SUSPENDED stack may hold frames */
    coro *resumer;      /* who resumed it; NULL = the thread's own stack.
                           Meaningful only while RUNNING or NORMAL. */
    const void *owner;  /* the owning thread's identity (thread_self()) */

    /* The mapping: [map, map + page) is the guard, above it the stack. */
    char *map;
    size_t map_size;
    size_t stack_size;  /* usable bytes: map_size - one page */

#ifdef CORO_ASAN
    void *asan_fake_stack;
#endif
#ifdef CORO_TSAN
    void *tsan_fiber;
#endif
#ifdef CORO_VALGRIND
    unsigned valgrind_stack_id;
#endif
};

/*
 * What each thread knows. Invariant: `current` is the only coroutine of
 * this thread in state RUNNING; following `resumer` from it visits exactly
 * the NORMAL ones, and ends at NULL (the thread's own stack).
 */
struct coro_thread {
    coro *current;          /* the running coroutine, NULL on own stack */
    coro_context native;    /* the thread's own stack, while it is away */
    bool has_altstack;      /* an alternate signal stack is set up */
#ifdef CORO_ASAN
    void *asan_fake_stack;
    const void *stack_bottom; /* the thread's own stack, learnt on the */
    size_t stack_size;        /* first switch away from it */
#endif
#ifdef CORO_TSAN
    void *tsan_fiber;
#endif
};

static _Thread_local struct coro_thread this_thread;

/* A thread's identity is the address of its own coro_thread. */
static const void *thread_self(void)
{
    return &this_thread;
}

static size_t page_size(void)
{
    static size_t cached;

    if (cached == 0)
        cached = (size_t)sysconf(_SC_PAGESIZE);
    return cached;
}

/* ── Telling the tools about stacks and switches ─────────────────────── */

static void tools_stack_created(coro *c)
{
#ifdef CORO_TSAN
    c->tsan_fiber = __tsan_create_fiber(0);
#endif
#ifdef CORO_VALGRIND
    c->valgrind_stack_id = VALGRIND_STACK_REGISTER(
        c->map + page_size(), c->map + c->map_size);
#endif
    (void)c;
}

static void tools_stack_destroyed(coro *c)
{
#ifdef CORO_TSAN
    __tsan_destroy_fiber(c->tsan_fiber);
#endif
#ifdef CORO_VALGRIND
    VALGRIND_STACK_DEREGISTER(c->valgrind_stack_id);
#endif
    (void)c;
}

/* Just before leaving `from` for `to` (NULL = the thread's own stack).
 * A finished coroutine never comes back: ASan may drop its fake stack. */
static void tools_before_switch(struct coro_thread *t, coro *from, coro *to)
{
#ifdef CORO_ASAN
    void **fake = from ? &from->asan_fake_stack : &t->asan_fake_stack;
    bool finished = from && from->state == CORO_DONE;

    if (to)
        __sanitizer_start_switch_fiber(finished ? NULL : fake,
                                       to->map + page_size(), to->stack_size);
    else
        __sanitizer_start_switch_fiber(finished ? NULL : fake,
                                       t->stack_bottom, t->stack_size);
#endif
#ifdef CORO_TSAN
    if (t->tsan_fiber == NULL)
        t->tsan_fiber = __tsan_get_current_fiber();
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
    if (self && self->resumer == NULL) {
        t->stack_bottom = came_from_bottom;
        t->stack_size = came_from_size;
    }
#endif
    (void)t;
    (void)self;
}

/* ── Switching ────────────────────────────────────────────────────────── */

/* Leave `from` for `to`; either may be NULL for the thread's own stack.
 * Returns when something switches back to `from`. */
static void switch_to(struct coro_thread *t, coro *from, coro *to)
{
    tools_before_switch(t, from, to);
    coro_context_switch(from ? &from->ctx : &t->native,
                        to ? &to->ctx : &t->native);
    tools_after_switch(t, from);
}

/* The running coroutine `self` stops (SUSPENDED or DONE) and control goes
 * back to whoever resumed it, which becomes RUNNING again. */
static void return_to_resumer(struct coro_thread *t, coro *self,
                              coro_state new_state)
{
    coro *back = self->resumer;

    self->state = new_state;
    self->resumer = NULL;
    t->current = back;
    if (back)
        back->state = CORO_RUNNING;
    switch_to(t, self, back);
}

/* The first code to run on a new coroutine's stack (see context.h). */
static void coroutine_main(void *arg)
{
    coro *self = arg;
    struct coro_thread *t = &this_thread;

    tools_after_switch(t, self);
    self->result = self->fn(self->arg);
    return_to_resumer(t, self, CORO_DONE);
    abort(); /* a DONE coroutine is never switched back to */
}

/* ── Stacks ───────────────────────────────────────────────────────────── */

/* The usable size for a request, or 0 if it cannot be represented. */
static size_t usable_stack_size(size_t requested)
{
    size_t page = page_size();
    size_t size = requested == 0 ? CORO_STACK_DEFAULT : requested;

    if (size < CORO_STACK_MIN)
        size = CORO_STACK_MIN;
    if (size > SIZE_MAX - 2 * page)
        return 0;
    return (size + page - 1) / page * page;
}

/* Map guard page + stack. Returns 0 or an errno value. */
static int stack_map(coro *c, size_t stack_size)
{
    size_t page = page_size();
    size_t map_size = stack_size + page;
    void *map = mmap(NULL, map_size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);

    if (map == MAP_FAILED)
        return ENOMEM;
    if (mprotect(map, page, PROT_NONE) != 0) {
        int err = errno;
        munmap(map, map_size);
        return err;
    }
    c->map = map;
    c->map_size = map_size;
    c->stack_size = stack_size;
    return 0;
}

static void stack_unmap(coro *c)
{
    munmap(c->map, c->map_size);
}

/* ── The overflow handler ─────────────────────────────────────────────── */

static pthread_mutex_t overflow_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool overflow_installed;
static struct sigaction previous_segv, previous_bus;
static size_t overflow_page; /* page_size(), read safely in the handler */

/* Alternate signal stacks are mmap'd (not malloc'd) and live as long as
 * their thread. A thread that already has one keeps its own. */
static int altstack_ensure(struct coro_thread *t)
{
    const size_t size = 64 * 1024;
    stack_t current, alt;

    if (t->has_altstack)
        return 0;
    if (sigaltstack(NULL, &current) == 0 && !(current.ss_flags & SS_DISABLE)) {
        t->has_altstack = true;
        return 0;
    }
    alt.ss_sp = mmap(NULL, size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (alt.ss_sp == MAP_FAILED)
        return ENOMEM;
    alt.ss_size = size;
    alt.ss_flags = 0;
    if (sigaltstack(&alt, NULL) != 0) {
        int err = errno;
        munmap(alt.ss_sp, size);
        return err;
    }
    t->has_altstack = true;
    return 0;
}

/* Async-signal-safe text building: no printf in a signal handler. */
static char *put_text(char *out, const char *text)
{
    while (*text)
        *out++ = *text++;
    return out;
}

static char *put_number(char *out, uintptr_t value, unsigned base)
{
    char digits[3 * sizeof value]; /* 20 decimal digits fit in 24 */
    int n = 0;

    do {
        digits[n++] = "0123456789abcdef"[value % base];
        value /= base;
    } while (value != 0);
    while (n > 0)
        *out++ = digits[--n];
    return out;
}

static void overflow_report(const coro *c)
{
    char line[160];
    char *p = line;

    p = put_text(p, "coro: stack overflow in coroutine 0x");
    p = put_number(p, (uintptr_t)c, 16);
    p = put_text(p, " (stack ");
    p = put_number(p, c->stack_size, 10);
    p = put_text(p, " bytes)\n");
    (void)!write(STDERR_FILENO, line, (size_t)(p - line));
}

static void overflow_signal(int signo, siginfo_t *info, void *ucontext)
{
    const coro *c = this_thread.current;
    uintptr_t addr = (uintptr_t)info->si_addr;

    (void)ucontext;
    if (c && addr >= (uintptr_t)c->map
          && addr < (uintptr_t)c->map + overflow_page) {
        overflow_report(c);
        abort();
    }
    /* Not a coroutine overflow: put back whatever handled this signal
     * before us and return. The faulting instruction runs again and meets
     * that handler (or the default action: a core dump). */
    sigaction(signo, signo == SIGSEGV ? &previous_segv : &previous_bus, NULL);
}

int coro_overflow_handler_install(void)
{
    struct sigaction action;
    int err = 0;

    pthread_mutex_lock(&overflow_lock);
    err = altstack_ensure(&this_thread);
    if (err != 0 || atomic_load(&overflow_installed))
        goto out;
    overflow_page = page_size();
    memset(&action, 0, sizeof action);
    action.sa_sigaction = overflow_signal;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGSEGV, &action, &previous_segv) != 0 ||
        sigaction(SIGBUS, &action, &previous_bus) != 0) {
        err = errno;
        goto out;
    }
    atomic_store(&overflow_installed, true);
out:
    pthread_mutex_unlock(&overflow_lock);
    return err;
}

/* Each thread that runs coroutines needs its own alternate signal stack
 * for the handler to run on. If one cannot be had, an overflow still
 * faults; it is just not reported by name. */
static void overflow_prepare_thread(struct coro_thread *t)
{
    if (!t->has_altstack && atomic_load_explicit(&overflow_installed,
                                                 memory_order_relaxed))
        (void)altstack_ensure(t);
}

/* ── The API ──────────────────────────────────────────────────────────── */

coro *coro_create(coro_fn fn, void *arg, size_t stack_size)
{
    size_t usable = usable_stack_size(stack_size);
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
    err = stack_map(c, usable);
    if (err != 0) {
        free(c);
        errno = err;
        return NULL;
    }
    c->fn = fn;
    c->arg = arg;
    c->state = CORO_SUSPENDED;
    c->owner = thread_self();
    coro_context_make(&c->ctx, c->map + page_size(), c->stack_size,
                      coroutine_main, c);
    tools_stack_created(c);
    overflow_prepare_thread(&this_thread);
    return c;
}

int coro_resume(coro *c)
{
    struct coro_thread *t = &this_thread;
    coro *caller;

    if (c == NULL)
        return EINVAL;
    if (c->owner != thread_self())
        return EPERM; /* checked first: its state is another thread's */
    if (c->state == CORO_DONE)
        return EINVAL;
    if (c->state != CORO_SUSPENDED)
        return EBUSY; /* RUNNING or NORMAL: its stack is in use */

    overflow_prepare_thread(t);
    caller = t->current;
    if (caller)
        caller->state = CORO_NORMAL;
    c->resumer = caller;
    c->state = CORO_RUNNING;
    c->started = true;
    t->current = c;
    switch_to(t, caller, c);
    /* Back: c yielded or returned, and return_to_resumer() has made the
     * caller current and RUNNING again. */
    return 0;
}

int coro_yield(void)
{
    struct coro_thread *t = &this_thread;

    if (t->current == NULL)
        return EPERM;
    return_to_resumer(t, t->current, CORO_SUSPENDED);
    return 0;
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

    tools_stack_destroyed(c);
    stack_unmap(c);
    free(c);
    return 0;
}
