/*
 * The harness of the exercise checks (tools/lab_check.h) on cases whose
 * outcome is known: tools/lab_check_test.sh runs this program and asserts
 * the report. With no argument every case passes; with "bad" it adds a
 * case that fails a CHECK, one that crashes and one that hangs, and the
 * harness must report each and still run the rest.
 */
#define CHECK_NAME "demo"
#define CHECK_CASE_SECONDS 1
#include "lab_check.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static void case_passes(void)
{
    CHECK(1 + 1 == 2, "arithmetic is broken");
    CHECK(strcmp(check_err_name(EINVAL), "EINVAL") == 0,
          "check_err_name(EINVAL) is %s", check_err_name(EINVAL));
}

static void case_fails(void)
{
    int got = 2;

    CHECK(got == 3, "got %d, wanted 3", got);
}

static void case_crashes(void)
{
    raise(SIGSEGV);
}

static void case_hangs(void)
{
    for (;;)
        pause();
}

int main(int argc, char **argv)
{
    static const check_case good[] = {{"passes", case_passes}};
    static const check_case all[] = {
        {"passes", case_passes},
        {"fails", case_fails},
        {"crashes", case_crashes},
        {"hangs", case_hangs},
        {"passes_after", case_passes},
    };

    if (argc > 1 && strcmp(argv[1], "bad") == 0)
        return check_main(all, sizeof all / sizeof all[0]);
    return check_main(good, sizeof good / sizeof good[0]);
}
