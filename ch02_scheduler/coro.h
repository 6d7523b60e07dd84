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
 * Conventions, for every function here:
 * - A function returning `int` returns 0 on success or a positive `errno`
 *   value (like pthreads). It never sets `errno`.
 * - A function returning a pointer returns NULL on failure and sets `errno`.
 * - Bad input from the caller is reported, never punished with a crash. The
 *   library aborts only on a broken internal invariant or a stack overflow.
 * - A coroutine belongs to the thread that created it.
 */
#ifndef CORO_H
#define CORO_H

#include <stdbool.h>
#include <stddef.h>

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
 * @param s   the scheduler.
 * @param fn  the body.
 * @param arg passed to `fn`.
 * @return 0 once queued, or:
 *         - `EINVAL`: `s` or `fn` is NULL;
 *         - `EPERM`:  `s` belongs to another thread;
 *         - `ENOMEM`: no memory for the coroutine or its stack.
 *
 * Thread-safety: only from the thread that owns `s`.
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
 * Thread-safety: only from the thread that owns `s`.
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
 *         - `EPERM`:  `s` belongs to another thread;
 *         - `EAGAIN`: the scheduler's post limit is reached (counted);
 *         - `ENOMEM`: no memory for the queue entry.
 *
 * Thread-safety: only from the thread that owns `s`.
 */
int coro_post(coro_sched *s, coro_post_fn fn, void *arg);

/**
 * @brief Pump until no coroutine is alive and no post is pending.
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
 * The building block for embedding the pump in another loop.
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
 * @return the count; 0 for NULL.
 *
 * Thread-safety: only from the thread that owns `s`.
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
 * (as each coro_sched_run() or coro_sched_step() begins), and one in each
 * coro_go(), coro_spawn() and coro_post(): the pump's own loop has none.
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
