/**
 * @file coro.h
 * @brief Stackful coroutines: the public API of this stage of the course.
 *
 * Read this header top to bottom: it tells the chapter's story.
 *
 * A coroutine is a function that runs on a stack of its own. It can stop in
 * the middle (coro_yield()) and continue later from exactly that point
 * (coro_resume()), because everything it had in flight — its local
 * variables, its return addresses, the registers a function must preserve —
 * stays on its stack and in a small saved context while it is suspended.
 *
 * The parts below are the chapters of the course so far, one each; the
 * last one is this stage's.
 *
 * Part one, manual resume: the caller is the scheduler. It decides, by
 * hand, which coroutine runs next by calling coro_resume().
 *
 * Part two, the scheduler: a coro_sched takes that job. It holds a ready
 * queue of coroutines and plain functions ("posts") and a pump
 * (coro_sched_run(), coro_sched_step()) that takes the next item and runs
 * it. coro_go() and coro_spawn() create coroutines that the pump resumes;
 * in them, coro_yield() means "let the others run, then me again".
 *
 * Part three, waiting: a coroutine can leave the ready queue until a
 * deadline passes (coro_sleep()) or until someone wakes it (coro_park(),
 * coro_wake(), events). The pump keeps the timers, and when nothing is
 * ready it puts the thread to sleep until the next deadline instead of
 * spinning.
 *
 * Part four, threads: each scheduler belongs to one thread; other threads
 * talk to it only by handing it work (coro_go(), coro_spawn(),
 * coro_post()) and by waking its coroutines (coro_wake(),
 * coro_event_set()), which are safe from any thread. A looper is a thread
 * whose life is a pump; a pool runs many, and spreads coroutines over them.
 *
 * Conventions, for every function here:
 * - A function returning `int` returns 0 on success or a positive `errno`
 *   value (like pthreads). It never sets `errno`.
 * - A function returning a pointer returns NULL on failure and sets `errno`.
 * - Bad input from the caller is reported, never punished with a crash. The
 *   library aborts only on a broken internal invariant or a stack overflow.
 * - A coroutine belongs to its scheduler's thread: it runs there, and
 *   only that thread may inspect or destroy its handle.
 */
#ifndef CORO_H
#define CORO_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @defgroup coro_context Coroutines and manual resume
 * @brief Create a coroutine, resume it, let it yield, read its result.
 * @{
 */

/** @brief A coroutine: a function, its argument, its own stack and its state. */
typedef struct coro coro;

/**
 * @brief The body of a coroutine.
 *
 * @param arg the pointer given to coro_create().
 * @return any pointer; it becomes the coroutine's result (coro_result()).
 */
typedef void *(*coro_fn)(void *arg);

/**
 * @brief The four states of a coroutine (the same four as Lua's).
 *
 * @code
 *   coro_create ──> SUSPENDED ──resume──> RUNNING ──return──> DONE
 *                      ^                  |     ^
 *                      └──────yield───────┘     │ (the one it resumed
 *                                               │  yields or returns)
 *                                  resume other v
 *                                            NORMAL
 * @endcode
 */
typedef enum {
    /** Created and not started, or stopped in coro_yield(). */
    CORO_SUSPENDED,
    /** The coroutine that is executing now on this thread. */
    CORO_RUNNING,
    /** It resumed another coroutine, which has not yielded back yet. */
    CORO_NORMAL,
    /** Its function has returned; coro_result() holds the value. */
    CORO_DONE
} coro_state;

/** @brief Stack size used when coro_create() is given 0: 64 KiB. */
#define CORO_STACK_DEFAULT ((size_t)64 * 1024)

/**
 * @brief The smallest usable stack: 16 KiB.
 *
 * Smaller requests are raised to this. Enough for a few levels of ordinary
 * calls and one `printf`; not for large local arrays.
 */
#define CORO_STACK_MIN ((size_t)16 * 1024)

/**
 * @brief Create a suspended coroutine that will run `fn(arg)`.
 *
 * The stack is mapped with `mmap`, with one inaccessible guard page below
 * it: running off the end faults instead of corrupting memory. Nothing runs
 * until the first coro_resume().
 *
 * @param fn         the body; must not be NULL.
 * @param arg        passed to `fn` unchanged.
 * @param stack_size usable stack bytes; 0 means #CORO_STACK_DEFAULT. Rounded
 *                   up to whole pages and raised to at least #CORO_STACK_MIN.
 * @return the new coroutine, owned by the calling thread; NULL on failure
 *         with `errno` set to:
 *         - `EINVAL`: `fn` is NULL, or `stack_size` is too large to map;
 *         - `ENOMEM`: no memory for the coroutine or its stack.
 *
 * Thread-safety: safe to call from any thread; the coroutine belongs to the
 * caller's thread.
 */
coro *coro_create(coro_fn fn, void *arg, size_t stack_size);

/**
 * @brief Run `c` until it yields or returns.
 *
 * The caller (a thread or another coroutine) stops here while `c` runs;
 * when `c` calls coro_yield() or returns, control comes back to this call.
 * A coroutine that resumes another becomes #CORO_NORMAL until that one
 * yields or returns.
 *
 * @param c the coroutine to run.
 * @return 0 once `c` has yielded or finished (check coro_status()), or:
 *         - `EINVAL`: `c` is NULL or already #CORO_DONE;
 *         - `EBUSY`:  `c` is running or on the current resume chain (it is
 *           #CORO_RUNNING or #CORO_NORMAL): resuming it would re-enter a
 *           stack that is in use;
 *         - `EPERM`:  `c` belongs to another thread, or to a scheduler
 *           (coro_go(), coro_spawn()): its pump resumes it.
 *
 * Thread-safety: only from the thread that owns `c`.
 */
int coro_resume(coro *c);

/**
 * @brief Suspend the running coroutine and return to whoever resumed it.
 *
 * Returns when the coroutine is next resumed. In a coroutine of a
 * scheduler, the pump resumed it: the coroutine goes to the back of the
 * ready queue (behind everything ready at its priority) and the pump runs
 * the others first.
 *
 * @return 0 after being resumed again, or `EPERM` when called outside any
 *         coroutine (on a thread's own stack).
 *
 * Thread-safety: acts on the calling thread's running coroutine.
 */
int coro_yield(void);

/**
 * @brief The coroutine running on this thread.
 * @return the running coroutine, or NULL on a thread's own stack.
 *
 * Thread-safety: safe from any thread; answers for the calling thread.
 */
coro *coro_self(void);

/**
 * @brief The state of `c`.
 * @param c a coroutine, or NULL.
 * @return its #coro_state; #CORO_DONE for NULL (there is nothing to resume).
 *
 * Thread-safety: call it from the thread that owns `c`.
 */
coro_state coro_status(const coro *c);

/**
 * @brief The value `c`'s function returned.
 * @param c a coroutine, or NULL.
 * @return the return value once `c` is #CORO_DONE; NULL before that, and
 *         NULL for a NULL `c`.
 *
 * Thread-safety: call it from the thread that owns `c`.
 */
void *coro_result(const coro *c);

/**
 * @brief Free `c` and its stack.
 *
 * Allowed only while `c`'s stack holds nothing live: when it is
 * #CORO_DONE, or #CORO_SUSPENDED and never started. A joinable coroutine
 * of a scheduler (coro_spawn()) can be destroyed once done; its stack goes
 * back to the scheduler's cache. One still in the ready queue is `EBUSY`.
 *
 * @param c the coroutine to free.
 * @return 0 on success, or:
 *         - `EINVAL`: `c` is NULL, or is a coroutine its scheduler owns: one
 *           started with coro_go() (coro_self() inside it), or a
 *           coro_spawn() handle already destroyed;
 *         - `EBUSY`:  `c` is running, normal, or suspended in the middle of
 *           its function (its stack holds live frames);
 *         - `EPERM`:  `c` belongs to another thread.
 *
 * Thread-safety: only from the thread that owns `c`.
 */
int coro_destroy(coro *c);

/**
 * @brief Report stack overflows by name before aborting (opt-in).
 *
 * Without this, a coroutine that runs off its stack touches the guard page
 * and the process dies of an ordinary `SIGSEGV`. With it, a `SIGSEGV` or
 * `SIGBUS` whose address lies in the running coroutine's guard page prints
 * `coro: stack overflow in coroutine 0x... (stack N bytes)` to stderr and
 * calls `abort()`. Any other fault is handed back to whatever handled the
 * signal before this call (the default action, unless the program had a
 * handler of its own), and the faulting instruction runs again under it.
 *
 * The handler runs on an alternate signal stack (the faulting stack is
 * full). The calling thread gets its own alternate stack now; any other
 * thread, the first time it creates a coroutine after this call.
 *
 * @return 0 on success (also when already installed), or:
 *         - `ENOMEM`: no memory for the alternate signal stack;
 *         - another `errno` value from `sigaltstack` or `sigaction`.
 *
 * Thread-safety: safe from any thread; installs a process-wide handler.
 */
int coro_overflow_handler_install(void);

/** @} */

/**
 * @defgroup coro_scheduler The scheduler: a ready queue and a pump
 * @brief Who calls resume: queue coroutines and functions, then pump.
 *
 * A scheduler belongs to the thread that created it, and so do its
 * coroutines. Its ready queue holds two kinds of items:
 *
 * - **coroutines** created with coro_go() (detached: the scheduler frees
 *   them when they return) or coro_spawn() (joinable: the caller reads the
 *   result, then calls coro_destroy());
 * - **posts**: plain functions queued with coro_post(); they run on the
 *   pump itself, not in a coroutine, so they must not yield.
 *
 * The queue is ordered by priority (higher first, default 0) and, among
 * equal priorities, first in, first out. The pump takes the item at the
 * front and runs it: a coroutine until it yields or returns, a post to
 * completion. A coroutine that yields goes to the back of its priority's
 * queue, behind everything that is ready.
 * @{
 */

/** @brief A scheduler: a ready queue, a pump, and a cache of stacks. */
typedef struct coro_sched coro_sched;

/**
 * @brief A posted function: runs on the pump of scheduler `s`.
 *
 * @param s   the scheduler running it (so it can coro_go() more work).
 * @param arg the pointer given to coro_post().
 */
typedef void (*coro_post_fn)(coro_sched *s, void *arg);

/**
 * @brief Create a scheduler owned by the calling thread; posts unlimited.
 *
 * @return the scheduler, or NULL with `errno` = `ENOMEM`.
 *
 * Thread-safety: any thread; the scheduler belongs to the caller's thread.
 */
coro_sched *coro_sched_create(void);

/**
 * @brief Create a scheduler that holds at most `max_posts` pending posts.
 *
 * Backpressure: when `max_posts` posts are queued and not yet run, the
 * next coro_post() fails with `EAGAIN` (and is counted as rejected) instead
 * of letting the queue grow without bound. Coroutines are not limited.
 *
 * @param max_posts the most posts that may be pending at once; at least 1.
 * @return the scheduler, or NULL with `errno` set to:
 *         - `EINVAL`: `max_posts` is 0;
 *         - `ENOMEM`: no memory.
 *
 * Thread-safety: as coro_sched_create().
 */
coro_sched *coro_sched_create_limit(size_t max_posts);

/**
 * @brief Create a detached coroutine running `fn(arg)` and queue it.
 *
 * The scheduler frees the coroutine when `fn` returns; its return value is
 * discarded. Its stack comes from the scheduler's cache when one is free.
 *
 * From another thread the coroutine is created there and handed to the
 * scheduler's thread through its inbox (see "Threads" below); it starts,
 * runs and finishes on the scheduler's thread.
 *
 * @param s   the scheduler.
 * @param fn  the body.
 * @param arg passed to `fn`.
 * @return 0 once queued, or:
 *         - `EINVAL`: `s` or `fn` is NULL;
 *         - `ENOMEM`: no memory for the coroutine or its stack.
 *
 * Thread-safety: any thread. A blocked pump of `s` wakes up for it.
 */
int coro_go(coro_sched *s, coro_fn fn, void *arg);

/**
 * @brief Create a joinable coroutine running `fn(arg)` and queue it.
 *
 * Once coro_status() says #CORO_DONE, read coro_result(), then free it with
 * coro_destroy(). A joinable coroutine keeps its scheduler busy
 * (coro_sched_destroy() says `EBUSY`) until it is destroyed.
 *
 * @param s   the scheduler.
 * @param fn  the body.
 * @param arg passed to `fn`.
 * @return the coroutine, or NULL with `errno` set as for coro_go().
 *
 * Thread-safety: any thread. The handle's coro_status(), coro_result()
 * and coro_destroy() belong to the scheduler's thread, like the coroutine.
 */
coro *coro_spawn(coro_sched *s, coro_fn fn, void *arg);

/**
 * @brief Queue `fn(s, arg)` to run on the pump.
 *
 * A post runs on the pump's own stack, between coroutines, in queue order
 * (priority 0). It may create coroutines and posts; it must not yield.
 * Nothing accepted is ever dropped: every accepted post runs before
 * coro_sched_run() returns.
 *
 * @param s   the scheduler.
 * @param fn  the function.
 * @param arg passed to `fn`.
 * @return 0 once queued, or:
 *         - `EINVAL`: `s` or `fn` is NULL;
 *         - `EAGAIN`: the scheduler's post limit is reached (counted);
 *         - `ENOMEM`: no memory for the queue entry.
 *
 * Thread-safety: any thread. A blocked pump of `s` wakes up for it.
 * Posts from one thread run in the order they were posted.
 */
int coro_post(coro_sched *s, coro_post_fn fn, void *arg);

/**
 * @brief Pump until no coroutine is alive and no post is pending.
 *
 * While nothing is ready, the thread sleeps until the next deadline or
 * until another thread hands the scheduler work or wakes one of its
 * coroutines (no CPU is used). With only waiting coroutines (parked, or
 * on an event) and no timer, it waits for such a wake or event: another
 * thread may still send one. (In the previous stage, with one thread,
 * that case returned `EDEADLK`.)
 *
 * @param s the scheduler.
 * @return 0 when everything has finished, or:
 *         - `EINVAL`: `s` is NULL;
 *         - `EPERM`:  `s` belongs to another thread, or this call is made
 *           from inside `s`'s own pump (a coroutine or post of `s`).
 *
 * Thread-safety: only from the thread that owns `s`.
 */
int coro_sched_run(coro_sched *s);

/**
 * @brief Run at most one ready item (one resume, or one post).
 *
 * The building block for embedding the pump in another loop. Timers that
 * are due are moved to the ready queue first. It never sleeps.
 *
 * @param s the scheduler; NULL is allowed.
 * @return true if an item ran; false if nothing was ready, `s` is NULL,
 *         `s` belongs to another thread, or the call is made from inside
 *         `s`'s own pump.
 *
 * Thread-safety: only from the thread that owns `s`.
 */
bool coro_sched_step(coro_sched *s);

/**
 * @brief How many coroutines of `s` have been created and not finished.
 *
 * Joinable coroutines count until they return (not until destroyed).
 *
 * @param s the scheduler; NULL is allowed.
 * @return the count; 0 for NULL. From another thread the count may be
 *         momentarily high (a coroutine being handed over counts twice),
 *         never low.
 *
 * Thread-safety: any thread.
 */
size_t coro_sched_alive(const coro_sched *s);

/**
 * @brief The scheduler running the caller.
 *
 * @return inside a coroutine of a scheduler, or a post running on its pump:
 *         that scheduler; otherwise NULL.
 *
 * Thread-safety: any thread; answers for the calling thread.
 */
coro_sched *coro_sched_self(void);

/**
 * @brief Set the stack size of coroutines created from now on.
 *
 * Sizes are rounded and bounded as in coro_create(); 0 restores the
 * default. Stacks cached at the old size are released.
 *
 * @param s          the scheduler.
 * @param stack_size usable stack bytes, or 0 for #CORO_STACK_DEFAULT.
 * @return 0, or:
 *         - `EINVAL`: `s` is NULL, or `stack_size` is too large;
 *         - `EPERM`:  `s` belongs to another thread;
 *         - `EBUSY`:  dense stacks are on and some are carved already
 *           (their size is fixed).
 *
 * Thread-safety: only from the thread that owns `s`.
 */
int coro_sched_set_stack_size(coro_sched *s, size_t stack_size);

/**
 * @brief Turn on dense stacks: many coroutines, no guard pages.
 *
 * By default every coroutine's stack is its own mapping with a guard page
 * below it: an overflow faults. That costs two memory mappings per stack,
 * and Linux allows a process about 65,000 (`vm.max_map_count`), so about
 * 32,000 coroutines can be suspended at once.
 *
 * Dense stacks are carved side by side from large mappings (regions) of
 * many stacks each, with no guard pages: a million suspended coroutines
 * fit. What is given up: an overflow is no longer stopped by a fault. It
 * runs into the neighbouring coroutine's stack. Just below every dense
 * stack lie 16 bytes of canary, a pattern written when the stack is
 * carved (so each stack is its slot of the stack size less 16 bytes); the
 * library checks it each time the coroutine is switched out, and a damaged
 * canary aborts with a message — but by then the neighbour may already be
 * corrupt, and an overflow that jumps past the canary is not seen. Use
 * dense stacks only for code whose stack depth you know.
 *
 * Finished dense stacks are all kept, and reused in the order they were
 * carved (address order within each region): however a crowd of
 * coroutines ended, the next one gets its stacks in memory order, which
 * the TLB and the CPU's caches reward.
 *
 * Must be called before the scheduler creates its first coroutine.
 *
 * @param s the scheduler.
 * @return 0 (also if already on), or:
 *         - `EINVAL`: `s` is NULL;
 *         - `EPERM`:  `s` belongs to another thread;
 *         - `EBUSY`:  the scheduler already has guarded stacks in use;
 *         - `ENOMEM`: no memory for the dense-stack bookkeeping (dense
 *           stacks stay off).
 *
 * Thread-safety: only from the thread that owns `s`.
 */
int coro_sched_use_dense_stacks(coro_sched *s);

/**
 * @brief Free a scheduler and its cached stacks.
 *
 * @param s the scheduler.
 * @return 0, or:
 *         - `EINVAL`: `s` is NULL;
 *         - `EPERM`:  `s` belongs to another thread;
 *         - `EBUSY`:  coroutines are alive, posts are pending, a joinable
 *           coroutine has not been destroyed, or its pump is running.
 *
 * Thread-safety: only from the thread that owns `s`.
 */
int coro_sched_destroy(coro_sched *s);

/**
 * @brief Set the priority `c` is queued with from now on.
 *
 * Higher runs first; the default is 0; any `int` is valid. The new value
 * applies the next time `c` is queued: a coroutine already waiting in the
 * ready queue keeps its place. So `coro_set_priority(coro_self(), -1);
 * coro_yield();` lets every priority-0 item run first.
 *
 * @param c        the coroutine.
 * @param priority the new priority.
 * @return 0, or:
 *         - `EINVAL`: `c` is NULL or #CORO_DONE;
 *         - `EPERM`:  `c` belongs to another thread.
 *
 * Thread-safety: only from the thread that owns `c`.
 */
int coro_set_priority(coro *c, int priority);

/**
 * @brief The priority of `c`.
 * @param c the coroutine, or NULL.
 * @return its priority; 0 for NULL.
 *
 * Thread-safety: only from the thread that owns `c`.
 */
int coro_priority(const coro *c);

/** @} */

/**
 * @defgroup coro_timers Timers, parking and events
 * @brief Waiting without spinning: sleep, park and wake, events, and pumps
 *        that sleep the thread until the next deadline.
 *
 * Time is `uint64_t` nanoseconds of `CLOCK_MONOTONIC`. Functions named
 * `_for` take a duration, functions named `_until` an absolute deadline
 * (compare with coro_now()). A deadline is never early: a coroutine waiting
 * until `d` resumes at some time `t >= d`. Timers with equal deadlines fire
 * in the order they were set. Late is possible: the pump looks at its
 * timers at the start of each turn, a turn being the entries that were
 * ready when it began, and at least 16 resumes.
 *
 * Waiting is only for coroutines run by a scheduler (coro_go(),
 * coro_spawn()); anywhere else these calls return `EPERM`. A waiting
 * coroutine is out of the ready queue: the pump runs the others meanwhile.
 * @{
 */

/** @brief Nanoseconds in a microsecond: `coro_sleep(250 * CORO_USEC)`. */
#define CORO_USEC ((uint64_t)1000)
/** @brief Nanoseconds in a millisecond. */
#define CORO_MSEC ((uint64_t)1000 * 1000)
/** @brief Nanoseconds in a second. */
#define CORO_SEC ((uint64_t)1000 * 1000 * 1000)

/**
 * @brief The current time: nanoseconds of `CLOCK_MONOTONIC`.
 * @return the time now.
 *
 * Thread-safety: any thread.
 */
uint64_t coro_now(void);

/**
 * @brief Suspend the running coroutine for at least `ns` nanoseconds.
 *
 * Only time ends a sleep: coro_wake() does not (its permit is kept for the
 * next park). `coro_sleep(0)` lets every ready coroutine run first: its
 * timer fires when the pump next looks at its timers, as its next turn
 * begins (a turn runs the entries that were ready when it began).
 *
 * @param ns the duration; a deadline past the end of time is "never".
 * @return 0 after the deadline, or `EPERM` outside a scheduled coroutine.
 *
 * Thread-safety: acts on the calling thread's running coroutine.
 */
int coro_sleep(uint64_t ns);

/**
 * @brief Suspend the running coroutine until coro_wake().
 *
 * If a wake came earlier and was not used (a permit is held), it is
 * consumed and coro_park() returns 0 at once.
 *
 * @return 0 when woken, or `EPERM` outside a scheduled coroutine.
 *
 * Thread-safety: acts on the calling thread's running coroutine.
 */
int coro_park(void);

/**
 * @brief coro_park() with a timeout of `ns` nanoseconds.
 * @param ns the longest time to wait.
 * @return 0 when woken (or a permit was held), `ETIMEDOUT` when the
 *         deadline came first, or `EPERM` outside a scheduled coroutine.
 *
 * Thread-safety: acts on the calling thread's running coroutine.
 */
int coro_park_for(uint64_t ns);

/**
 * @brief coro_park() until the absolute time `deadline` at the latest.
 * @param deadline a coro_now() time; one already past times out at once
 *                 unless a permit is held.
 * @return 0 when woken (or a permit was held), `ETIMEDOUT` when the
 *         deadline came first, or `EPERM` outside a scheduled coroutine.
 *
 * Thread-safety: acts on the calling thread's running coroutine.
 */
int coro_park_until(uint64_t deadline);

/**
 * @brief Wake `c` from coro_park(), or leave it a permit.
 *
 * Permit semantics: if `c` is parked, it becomes ready (its park returns
 * 0). Otherwise `c` keeps one permit, and its next park returns 0 at once.
 * Permits do not add up: two wakes before a park leave one permit. A
 * sleeping coroutine is not woken (its permit waits for its next park),
 * and neither is one waiting on an event.
 *
 * From another thread, a parked coroutine is made ready through its
 * scheduler's inbox, waking the scheduler's pump if it sleeps.
 *
 * @param c a coroutine of a scheduler; it must not have been freed (a
 *          detached coroutine is freed when it returns).
 * @return 0, or `EINVAL` if `c` is NULL, finished, or not run by a
 *         scheduler.
 *
 * Thread-safety: any thread.
 */
int coro_wake(coro *c);

/**
 * @brief Pump until nothing is alive, or until `deadline`.
 *
 * Like coro_sched_run(), but it returns when the deadline passes (looked
 * at when each turn of the pump begins, as the timers are). With
 * only waiting coroutines (parked, or on an event) and no timers it
 * waits for a wake or an event from another thread, or the deadline.
 *
 * @param s        the scheduler.
 * @param deadline a coro_now() time.
 * @return 0 when nothing is alive and no post is pending, or:
 *         - `ETIMEDOUT`: the deadline came first (work remains);
 *         - `EINVAL`: `s` is NULL;
 *         - `EPERM`:  other thread, or inside `s`'s own pump.
 *
 * Thread-safety: only from the thread that owns `s`.
 */
int coro_sched_run_until(coro_sched *s, uint64_t deadline);

/**
 * @brief Run what is ready; if nothing is, sleep until the next timer, work
 *        from another thread, or `ns` from now, whichever is first, then
 *        run what became ready.
 *
 * For an event loop that owns the thread: `while (running)
 * coro_sched_poll_for(s, 10 * CORO_MSEC);`. Each call runs at most the
 * entries that were ready when it looked, so a coroutine that yields in a
 * loop runs once per call and the loop keeps control.
 *
 * @param s  the scheduler.
 * @param ns the longest time to sleep when nothing is ready.
 * @return how many entries ran (resumes plus posts); 0 also when `s` is
 *         NULL, belongs to another thread, or this is inside its pump.
 *
 * Thread-safety: only from the thread that owns `s`.
 */
size_t coro_sched_poll_for(coro_sched *s, uint64_t ns);

/**
 * @brief coro_sched_poll_for() with an absolute deadline.
 * @param s        the scheduler.
 * @param deadline a coro_now() time; if it has passed, nothing sleeps.
 * @return how many entries ran; 0 also for the errors of
 *         coro_sched_poll_for().
 *
 * Thread-safety: only from the thread that owns `s`.
 */
size_t coro_sched_poll_until(coro_sched *s, uint64_t deadline);

/**
 * @brief An event: coroutines wait until it is set.
 *
 * A complete type, so an event can live on a stack or inside a struct;
 * its fields are private to the library. Initialise with
 * coro_event_init(), end with coro_event_destroy().
 */
typedef struct coro_event {
    /** @cond PRIVATE */
    unsigned magic;       /* marks an initialised event */
    pthread_mutex_t lock; /* guards the rest: set from any thread */
    bool manual_reset;
    bool is_set;
    coro *first_waiter;   /* FIFO of waiting coroutines */
    coro *last_waiter;
    /** @endcond */
} coro_event;

/**
 * @brief Initialise an event.
 *
 * - Manual reset: once set, it stays set (every wait returns at once)
 *   until coro_event_reset(); setting it wakes every waiter.
 * - Auto reset: setting it wakes exactly one waiter, the longest waiting;
 *   with no waiter, it stays set until one wait consumes it.
 *
 * @param e             the event.
 * @param manual_reset  true for manual reset, false for auto reset.
 * @param initially_set whether it starts set.
 * @return 0, or:
 *         - `EINVAL`: `e` is NULL;
 *         - `ENOMEM`: the system could not initialise the event's lock
 *           (pthread_mutex_init() failed; glibc's default mutex needs no
 *           memory, so on Linux this does not happen).
 *
 * Thread-safety: not while other calls use `e`.
 */
int coro_event_init(coro_event *e, bool manual_reset, bool initially_set);

/**
 * @brief Set the event, waking every waiter (manual) or one (auto).
 *
 * Waiters may belong to schedulers of other threads: each is woken on its
 * own thread.
 *
 * @param e the event.
 * @return 0, or `EINVAL` if `e` is NULL or not initialised.
 *
 * Thread-safety: any thread.
 */
int coro_event_set(coro_event *e);

/**
 * @brief Clear the event.
 * @param e the event.
 * @return 0, or `EINVAL` if `e` is NULL or not initialised.
 *
 * Thread-safety: any thread.
 */
int coro_event_reset(coro_event *e);

/**
 * @brief Wait until the event is set.
 *
 * Returns at once if it is set (an auto-reset event is then cleared).
 * Otherwise the coroutine waits, first come first served.
 *
 * @param e the event.
 * @return 0, or:
 *         - `EINVAL`: `e` is NULL or not initialised;
 *         - `EPERM`:  outside a scheduled coroutine.
 *
 * Thread-safety: acts on the calling thread's running coroutine.
 */
int coro_event_await(coro_event *e);

/**
 * @brief coro_event_await() with a timeout of `ns` nanoseconds.
 * @param e  the event.
 * @param ns the longest time to wait.
 * @return 0 when the event was set, `ETIMEDOUT` when the timeout came
 *         first, or the errors of coro_event_await().
 *
 * Thread-safety: acts on the calling thread's running coroutine.
 */
int coro_event_await_for(coro_event *e, uint64_t ns);

/**
 * @brief End the event's life.
 * @param e the event.
 * @return 0, or:
 *         - `EINVAL`: `e` is NULL or not initialised (or destroyed);
 *         - `EBUSY`:  coroutines are waiting on it.
 *
 * Thread-safety: not while other calls use `e`.
 */
int coro_event_destroy(coro_event *e);

/** @} */

/**
 * @defgroup coro_threads Threads: loopers and pools
 * @brief One scheduler per thread, and the ways threads hand each other
 *        work.
 *
 * The rule of this stage: a scheduler, its coroutines and their stacks
 * belong to the thread that created the scheduler. A started coroutine
 * never moves to another thread (its stack holds pointers to its
 * thread-local data, `errno` and locks it took). Other threads only hand
 * work over: coro_go(), coro_spawn(), coro_post(), coro_wake(),
 * coro_event_set() and coro_sched_alive() are safe from any thread;
 * running, stepping, polling and destroying a scheduler are for its own
 * thread (`EPERM` elsewhere).
 * @{
 */

/**
 * @brief Free the calling thread's per-thread library state.
 *
 * Releases the thread's alternate signal stack (see
 * coro_overflow_handler_install()) and its cache of post nodes (the
 * nodes of coro_post() calls to other threads' schedulers, recycled) now
 * rather than when the thread exits: for a long-lived thread that is done
 * with coroutines. The thread must
 * have no coroutine running; if one is, nothing is freed. Using coroutines
 * on the thread again afterwards is allowed.
 *
 * Thread-safety: acts on the calling thread.
 */
void coro_thread_detach(void);

/** @brief A looper: a thread whose whole life is a scheduler's pump. */
typedef struct coro_looper coro_looper;

/**
 * @brief Start a thread that runs a scheduler until stopped.
 *
 * The thread creates its scheduler and pumps it (`while running: poll`),
 * sleeping when idle. Hand it work from any thread with coro_go() and
 * coro_post() on coro_looper_sched().
 *
 * @param name the thread's name (up to 15 characters are kept, as the
 *             kernel allows), or NULL.
 * @return the looper, running, or NULL with `errno` set to `ENOMEM`, or
 *         `EAGAIN` if no thread could be created.
 *
 * Thread-safety: any thread.
 */
coro_looper *coro_looper_start(const char *name);

/**
 * @brief The looper's scheduler, to hand it work.
 * @param l the looper, or NULL.
 * @return its scheduler; NULL for NULL.
 *
 * Thread-safety: any thread.
 */
coro_sched *coro_looper_sched(coro_looper *l);

/**
 * @brief Let queued work finish, then stop the thread and free the looper.
 *
 * The looper keeps pumping until nothing is alive and no post is pending,
 * then its scheduler is destroyed and the thread joined. (Parked
 * coroutines that nobody wakes keep it waiting: the next stage adds a
 * shutdown with a deadline.)
 *
 * @param l the looper.
 * @return 0, or:
 *         - `EINVAL`: `l` is NULL;
 *         - `EPERM`:  called on the looper's own thread (it cannot join
 *           itself).
 *
 * Thread-safety: any thread but the looper's own; once.
 */
int coro_looper_stop(coro_looper *l);

/** @brief A pool: worker threads, each with its own scheduler (N:M). */
typedef struct coro_pool coro_pool;

/**
 * @brief Start a pool of `workers` threads, each with its own scheduler.
 *
 * With `use_caller`, the calling thread is worker 0 (only `workers - 1`
 * threads are started) and does its share of the work while it is inside
 * coro_pool_wait().
 *
 * @param workers    how many workers, at least 1.
 * @param use_caller whether the calling thread is one of them.
 * @return the pool, or NULL with `errno` set to `EINVAL` (0 workers),
 *         `ENOMEM`, or `EAGAIN` (no thread could be created).
 *
 * Thread-safety: any thread; with `use_caller`, that thread becomes worker
 * 0 and must be the one to call coro_pool_wait() and coro_pool_destroy().
 */
coro_pool *coro_pool_create(size_t workers, bool use_caller);

/**
 * @brief Run `fn(arg)` as a coroutine on whichever worker gets to it first.
 *
 * The coroutine waits in the pool's queue until a worker with room takes
 * it; a worker busy in a long blocking call takes nothing, so others take
 * what is queued. Once started, it stays on its worker's thread.
 *
 * @param p   the pool.
 * @param fn  the body; its result is discarded.
 * @param arg passed to `fn`.
 * @return 0, or `EINVAL` (NULL `p` or `fn`), or `ENOMEM`.
 *
 * Thread-safety: any thread.
 */
int coro_pool_go(coro_pool *p, coro_fn fn, void *arg);

/**
 * @brief Run `fn(arg)` as a coroutine pinned to worker `worker`.
 * @param p      the pool.
 * @param worker the worker's index, below the number of workers.
 * @param fn     the body; its result is discarded.
 * @param arg    passed to `fn`.
 * @return 0, or `EINVAL` (NULL `p` or `fn`, `worker` out of range), or
 *         `ENOMEM`.
 *
 * Thread-safety: any thread.
 */
int coro_pool_go_on(coro_pool *p, size_t worker, coro_fn fn, void *arg);

/**
 * @brief Run `fn(s, arg)` as a post on one of the workers.
 * @param p   the pool.
 * @param fn  the function; `s` is the worker's scheduler.
 * @param arg passed to `fn`.
 * @return 0, or `EINVAL` (NULL `p` or `fn`), or `ENOMEM`.
 *
 * Thread-safety: any thread.
 */
int coro_pool_post(coro_pool *p, coro_post_fn fn, void *arg);

/**
 * @brief From a coroutine: run `fn(arg)` on the pool and wait for it.
 *
 * The calling coroutine parks (its scheduler runs the others) while a pool
 * worker runs `fn` in a coroutine of its own; then it is woken, on its own
 * thread, with the result. This is how blocking or heavy work is kept off
 * a pump.
 *
 * @param p      the pool.
 * @param fn     the function to run on the pool.
 * @param arg    passed to `fn`.
 * @param result where `fn`'s return value is stored; may be NULL.
 * @return 0, or:
 *         - `EINVAL`: `p` or `fn` is NULL;
 *         - `EPERM`:  not called from a coroutine run by a scheduler;
 *         - `ENOMEM`.
 *
 * Thread-safety: from a scheduled coroutine on any thread.
 */
int coro_pool_call(coro_pool *p, coro_fn fn, void *arg, void **result);

/**
 * @brief Wait until nothing is alive in the pool.
 *
 * Returns when every coroutine and post handed to the pool has finished.
 * With `use_caller`, the calling thread works as worker 0 meanwhile.
 *
 * @param p the pool.
 * @return 0, or:
 *         - `EINVAL`: `p` is NULL;
 *         - `EPERM`:  called from one of the pool's workers (it would wait
 *           for itself), or, with `use_caller`, from another thread than
 *           the creator.
 *
 * Thread-safety: any thread but the pool's workers.
 */
int coro_pool_wait(coro_pool *p);

/**
 * @brief Stop the workers and free the pool.
 * @param p the pool.
 * @return 0, or:
 *         - `EINVAL`: `p` is NULL;
 *         - `EBUSY`:  work is still alive in the pool (coro_pool_wait()
 *           first);
 *         - `EPERM`:  called from one of the pool's workers, or, with
 *           `use_caller`, from another thread than the creator.
 *
 * Thread-safety: any thread but the pool's workers; once.
 */
int coro_pool_destroy(coro_pool *p);

/** @} */

/**
 * @defgroup coro_trace Seeing it run: a trace of the scheduling
 * @brief Record which coroutine ran when, on which thread, and draw it.
 *
 * A trace records what the pumps do, as Chrome's Trace Event JSON, which
 * Perfetto UI (ui.perfetto.dev, "Open trace file") and chrome://tracing
 * open as it is; `tools/timeline TRACE.json -o TRACE.svg` draws it. Each
 * thread that pumps is a lane; each resume of a coroutine is a slice on
 * its lane, named after the coroutine (coro_set_name(), else "coro ID"),
 * with `args.id` and `args.left` (how it left: "yielded", "parked" or
 * "finished"); each coro_go() and coro_spawn() is an instant, and each
 * post an arrow from where it was posted to the slice where it ran.
 *
 * Two ways to record: run the program with `CORO_TRACE=out.json` in its
 * environment (the trace starts when the first scheduler is created and
 * is written out at exit()), or call coro_trace_start() and
 * coro_trace_stop() around the part to see.
 *
 * Off, a trace costs a test of a flag where the pump chooses its loop
 * (at the start of each turn, and each coro_sched_step()), and one where
 * work is created or a coroutine waits or is woken: the pump's own loop
 * has none.
 * On, each event costs the pump a copy into its scheduler's buffer; the
 * formatting and the file's I/O happen on a thread of the trace's own.
 * If that thread falls behind, whole buffers of events are dropped and
 * counted (never the program held up), and the count is printed when the
 * trace stops. A trace that cannot be written is reported once, on
 * stderr or as coro_trace_start()'s error, and never stops the program.
 * @{
 */

/** @brief The longest name coro_set_name() keeps, in bytes. */
#define CORO_NAME_MAX 23

/**
 * @brief Start recording a trace into the file `path`.
 *
 * The file is created, or truncated, now; events are written to it as
 * the trace goes, and it is a complete JSON document once
 * coro_trace_stop() returns. Every scheduler of the process records,
 * whichever thread it runs on.
 *
 * @param path the file to write.
 * @return 0, or:
 *         - `EINVAL`:   `path` is NULL or empty;
 *         - `EBUSY`:    a trace is recording already;
 *         - the error opening `path` gave (`ENOENT`, `EACCES`, `EISDIR`...);
 *         - `EAGAIN` or `ENOMEM`: the writer thread could not start.
 *
 * Thread-safety: any thread.
 */
int coro_trace_start(const char *path);

/**
 * @brief Stop the trace: collect what every scheduler recorded, write it
 * out, and close the file.
 *
 * Returns when the file is complete. What a pump records while the stop
 * runs may be left out. Called while no trace records (or in a child of
 * fork(), which never records its parent's trace), it does nothing.
 *
 * @return 0: the trace is complete in its file, or none was recording;
 *         else the error that stopped the writing (`ENOSPC`, `EIO`...),
 *         which was also printed on stderr when it happened.
 *
 * Thread-safety: any thread, also from a coroutine (it blocks the thread
 * until the file is written).
 */
int coro_trace_stop(void);

/**
 * @brief Name a coroutine, for the trace (its slices carry the name) and
 * the debugger (`info coroutines`).
 *
 * The name is copied: at most #CORO_NAME_MAX bytes are kept, and any
 * character but printable ASCII, as well as `"` and `\`, becomes `?`.
 * The empty string takes the name away. A coroutine created again on a
 * reused stack starts without a name.
 *
 * @param c    the coroutine.
 * @param name its new name.
 * @return 0, or:
 *         - `EINVAL`: `c` or `name` is NULL, or `c` is #CORO_DONE;
 *         - `EPERM`:  `c` belongs to another thread.
 *
 * Thread-safety: only from the thread that owns `c`.
 */
int coro_set_name(coro *c, const char *name);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* CORO_H */
