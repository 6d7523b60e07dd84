/*
 * lab_check.h — the harness every exercise check (chNN/lab/checks/NAME.c)
 * is written with.
 *
 * A check is a plain C program built by `tools/lab check CHAPTER NAME`
 * from the check, the student's answers/NAME.c (when the exercise asks for
 * one) and the lab's library. It runs each of its cases in a child process
 * of its own, so that a crash or a hang in one case is reported as that
 * case's failure and the other cases still run. A case that is still
 * running after its time is killed (a hang is a failure, never a stuck
 * terminal). No case asserts a time bound of its own: the machines are
 * shared and noisy.
 *
 * Output, the contract tools/lab reads:
 *   check NAME: FAIL: CASE: what was wrong      one line per failed case
 *   check NAME: ok                              when every case passed
 * and the exit status is 0 only when every case passed.
 *
 * Usage:
 *   #define CHECK_NAME "semaphore"
 *   #include "lab_check.h"
 *   static void case_counting(void) { CHECK(x == 3, "got %d", x); }
 *   int main(void)
 *   {
 *       static const check_case cases[] = {{"counting", case_counting}};
 *       return check_main(cases, sizeof cases / sizeof cases[0]);
 *   }
 *
 * Include it before any system header: it asks for the POSIX and BSD
 * names (strsignal()) the cases use. Header only (every function is
 * static), so that a check is one file.
 */
#ifndef LAB_CHECK_H
#define LAB_CHECK_H

#ifndef CHECK_NAME
#error "define CHECK_NAME (the check's name) before including lab_check.h"
#endif

#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE
#endif
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/** Seconds a case may run before it is killed, unless the check defines
 *  CHECK_CASE_SECONDS itself. */
#ifndef CHECK_CASE_SECONDS
#define CHECK_CASE_SECONDS 10
#endif

/** One case: a name for the report and the function that runs it. The
 *  function returns when the case passed; it calls check_fail() (or
 *  CHECK()) when it did not. */
typedef struct check_case {
    const char *name;
    void (*run)(void);
} check_case;

/* The case running in this process (the child's), for check_fail(). */
static const char *check_current_case = "?";

/** Reports the running case as failed, with a printf-style message, and
 *  ends its child process with status 1. */
static void check_fail(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn, unused));
static void check_fail(const char *fmt, ...)
{
    va_list ap;

    printf("check %s: FAIL: %s: ", CHECK_NAME, check_current_case);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    _exit(1);
}

/** Fails the running case with the message unless `cond` holds. */
#define CHECK(cond, ...)           \
    do {                           \
        if (!(cond))               \
            check_fail(__VA_ARGS__); \
    } while (0)

/** The name of an error code as the lessons write it ("EPERM"), for
 *  messages; "0" for success. */
static __attribute__((unused)) const char *check_err_name(int err)
{
    switch (err) {
    case 0: return "0";
    case EINVAL: return "EINVAL";
    case EPERM: return "EPERM";
    case EBUSY: return "EBUSY";
    case EDEADLK: return "EDEADLK";
    case ETIMEDOUT: return "ETIMEDOUT";
    case ENOMEM: return "ENOMEM";
    case ECANCELED: return "ECANCELED";
    case ESRCH: return "ESRCH";
    case EAGAIN: return "EAGAIN";
    case EALREADY: return "EALREADY";
    case ESHUTDOWN: return "ESHUTDOWN";
    default: return strerror(err);
    }
}

/** Runs one case in a child process, under a watchdog of `seconds`.
 *  Returns 0 when it passed, 1 (having printed why) when it did not. */
static int check_run_case(const check_case *c, unsigned seconds)
{
    pid_t pid;
    int status;

    fflush(stdout);
    pid = fork();
    if (pid < 0) {
        printf("check %s: FAIL: %s: fork: %s\n", CHECK_NAME, c->name, strerror(errno));
        return 1;
    }
    if (pid == 0) {
        check_current_case = c->name;
        alarm(seconds);
        c->run();
        fflush(stdout);
        _exit(0);
    }
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            printf("check %s: FAIL: %s: waitpid: %s\n", CHECK_NAME, c->name,
                   strerror(errno));
            return 1;
        }
    }
    if (WIFEXITED(status))
        return WEXITSTATUS(status) != 0;
    if (WTERMSIG(status) == SIGALRM)
        printf("check %s: FAIL: %s: did not finish within %u s (a coroutine waiting "
               "forever, or a loop that never waits?)\n",
               CHECK_NAME, c->name, seconds);
    else
        printf("check %s: FAIL: %s: died of signal %d (%s)\n", CHECK_NAME, c->name,
               WTERMSIG(status), strsignal(WTERMSIG(status)));
    return 1;
}

/** Runs every case, each in its own child; prints `check NAME: ok` when
 *  all passed. Returns the exit status for main(): 0 when all passed. */
static int check_main(const check_case *cases, size_t count)
{
    int failed = 0;

    setvbuf(stdout, NULL, _IOLBF, 0);
    for (size_t i = 0; i < count; i++)
        failed += check_run_case(&cases[i], CHECK_CASE_SECONDS);
    if (failed)
        return 1;
    printf("check %s: ok\n", CHECK_NAME);
    return 0;
}

#endif /* LAB_CHECK_H */
