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
 *         - `EPERM`:  `c` belongs to another thread.
 *
 * Thread-safety: only from the thread that owns `c`.
 */
int coro_resume(coro *c);

/**
 * @brief Suspend the running coroutine and return to whoever resumed it.
 *
 * Returns when the coroutine is next resumed.
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
 * #CORO_DONE, or #CORO_SUSPENDED and never started.
 *
 * @param c the coroutine to free.
 * @return 0 on success, or:
 *         - `EINVAL`: `c` is NULL;
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

#ifdef __cplusplus
}
#endif

#endif /* CORO_H */
