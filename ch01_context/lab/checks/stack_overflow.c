/*
 * check stack_overflow — Chapter 1, exercise 4 (its first two parts).
 *
 * The exercise: make a coroutine recurse until it overflows, first without
 * and then with coro_overflow_handler_install(). Then give the recursive
 * function an 8 KiB local array and see whether the guard page still
 * catches it, and whether the handler still names the coroutine. The third
 * part is an observation: the lesson says what to expect, and this check
 * does not grade it.
 *
 * What you provide: the file `answers/stack_overflow.c` in your lab, with
 *
 *     void *recurse_until_overflow(void *arg);
 *
 * a coroutine body (a coro_fn) that recurses until it runs off its stack.
 * It must never return; its frames must be smaller than a page (4 KiB),
 * so that the overflow touches the guard page (the 8 KiB frames are the
 * third part). `arg` is NULL.
 *
 * What this check verifies, each a case of its own; a case runs the body
 * in a child process of its own, which must die (no core file; a child
 * still running after 3 s is killed):
 *   1. without the handler: a coroutine of the default stack size running
 *      your body dies of SIGSEGV (the guard page), and does not come back
 *      from coro_resume();
 *   2. after coro_overflow_handler_install(): the same dies of SIGABRT,
 *      having written to stderr the line
 *        coro: stack overflow in coroutine 0x<that coroutine> (stack 65536 bytes)
 *      naming the very coroutine that ran your body.
 * The usual wrong answers: a recursion the compiler turns into a loop (a
 * tail call reuses its frame: the child never overflows and is killed
 * after 3 s), one it can prove pointless and removes (the body returns),
 * and frames bigger than the guard page (the fault lands below it: a
 * plain SIGSEGV in part 2, and no line naming the coroutine).
 *
 * Built by `tools/lab check ch01 stack_overflow` with the lab's library
 * sources and answers/stack_overflow.c, at -O2 (the scope's copts), so
 * that a tail call is made into a loop as a release build would. Prints
 * `check stack_overflow: ok` and exits 0, or one
 * `check stack_overflow: FAIL: CASE: ...` line per failed case and exits 1.
 */
#define CHECK_NAME "stack_overflow"
#include "lab_check.h"

#include <stdint.h>
#include <sys/resource.h>

#include "coro.h"

void *recurse_until_overflow(void *arg);

enum { CHILD_SECONDS = 3, CHILD_NO_FAULT = 3, CHILD_SETUP = 4 };

/* In the child: run the body in a new coroutine; report its address on
 * `address_fd` first. Returns only if coro_resume() comes back. */
static void overflow_in_child(int with_handler, int address_fd)
{
    struct rlimit no_core = {0, 0};
    uintptr_t address;
    coro *c;

    setrlimit(RLIMIT_CORE, &no_core);
    signal(SIGSEGV, SIG_DFL);
    signal(SIGBUS, SIG_DFL);
    alarm(CHILD_SECONDS);
    if (with_handler && coro_overflow_handler_install() != 0)
        _exit(CHILD_SETUP);
    c = coro_create(recurse_until_overflow, NULL, 0);
    if (c == NULL)
        _exit(CHILD_SETUP);
    address = (uintptr_t)c;
    if (write(address_fd, &address, sizeof address) != sizeof address)
        _exit(CHILD_SETUP);
    coro_resume(c);
    _exit(CHILD_NO_FAULT);
}

struct outcome {
    int status;        /* the child's wait status */
    uintptr_t address; /* the coroutine it created, 0 if none */
    char err[512];     /* what it wrote to stderr */
};

static void run_child(int with_handler, struct outcome *out)
{
    int address_pipe[2], err_pipe[2];
    size_t used = 0;
    ssize_t n;
    pid_t pid;

    memset(out, 0, sizeof *out);
    CHECK(pipe(address_pipe) == 0 && pipe(err_pipe) == 0, "pipe: %s",
          strerror(errno));
    fflush(stdout);
    pid = fork();
    CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        close(address_pipe[0]);
        close(err_pipe[0]);
        dup2(err_pipe[1], STDERR_FILENO);
        overflow_in_child(with_handler, address_pipe[1]);
    }
    close(address_pipe[1]);
    close(err_pipe[1]);
    if (read(address_pipe[0], &out->address, sizeof out->address) !=
        sizeof out->address)
        out->address = 0;
    while (used < sizeof out->err - 1 &&
           (n = read(err_pipe[0], out->err + used,
                     sizeof out->err - 1 - used)) > 0)
        used += (size_t)n;
    close(address_pipe[0]);
    close(err_pipe[0]);
    CHECK(waitpid(pid, &out->status, 0) == pid, "waitpid: %s", strerror(errno));
}

static void describe(int status, char *text, size_t size)
{
    if (WIFEXITED(status) && WEXITSTATUS(status) == CHILD_NO_FAULT)
        snprintf(text, size, "came back from coro_resume(): your "
                 "function returned instead of overflowing (did the compiler "
                 "remove the recursion, or does it stop?)");
    else if (WIFEXITED(status) && WEXITSTATUS(status) == CHILD_SETUP)
        snprintf(text, size, "could not set up (coro_create or "
                 "coro_overflow_handler_install failed)");
    else if (WIFEXITED(status))
        snprintf(text, size, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
        snprintf(text, size, "was still running after %d s: the recursion "
                 "never overflowed (a tail call the compiler made into a "
                 "loop?)",
                 CHILD_SECONDS);
    else if (WIFSIGNALED(status))
        snprintf(text, size, "died of signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(text, size, "ended with wait status %d", status);
}

static void case_without_handler(void)
{
    struct outcome plain;
    char what[200];

    run_child(0, &plain);
    if (!WIFSIGNALED(plain.status) ||
        (WTERMSIG(plain.status) != SIGSEGV &&
         WTERMSIG(plain.status) != SIGBUS)) {
        describe(plain.status, what, sizeof what);
        check_fail("without the handler the child should die of SIGSEGV; it "
                   "%s", what);
    }
}

static void case_with_handler(void)
{
    struct outcome handled;
    char what[200], expected[128];

    run_child(1, &handled);
    snprintf(expected, sizeof expected,
             "coro: stack overflow in coroutine 0x%lx (stack %lu bytes)\n",
             (unsigned long)handled.address,
             (unsigned long)CORO_STACK_DEFAULT);
    if (!WIFSIGNALED(handled.status) || WTERMSIG(handled.status) != SIGABRT) {
        describe(handled.status, what, sizeof what);
        check_fail("with the handler the child should die of SIGABRT after "
                   "naming the coroutine; it %s%s", what,
                   WIFSIGNALED(handled.status) &&
                           WTERMSIG(handled.status) == SIGSEGV
                       ? " (a fault outside the guard page: are your frames "
                         "bigger than a page?)"
                       : "");
    }
    CHECK(strstr(handled.err, expected) != NULL,
          "with the handler, stderr should hold the line \"%.*s\"; it held "
          "\"%s\"", (int)strlen(expected) - 1, expected, handled.err);
}

int main(void)
{
    static const check_case cases[] = {
        {"without the handler", case_without_handler},
        {"with the handler", case_with_handler},
    };

    return check_main(cases, sizeof cases / sizeof cases[0]);
}
