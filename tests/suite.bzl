"""The test harness: one suite per concept, run against every later chapter.

    coro_suite(name = "context", srcs = ["context_test.cc"], first_chapter = 1)

expands into one cc_test per (chapter >= first_chapter) x (back-end), named
`<name>_on_chNN_<backend>` (for example `context_on_ch03_ucontext`), plus a
test_suite `<name>` that holds them all. Each test is compiled with

    CORO_CHAPTER   the chapter number it runs against (1, 2, ...)
    CORO_UCONTEXT  1 for the ucontext back-end, 0 for the assembly one

so a test that a later chapter supersedes on purpose can say so where it
skips (see CORO_SKIP_FROM_CHAPTER in harness.h).
"""

load(":chapters.bzl", "BACKENDS", "CHAPTERS")

WARNINGS = ["-Wall", "-Wextra", "-Werror"]

# The suites are C++17 (GoogleTest); the libraries under test are C11.
CXXOPTS = ["-std=c++17"]

def coro_suite(name, srcs, first_chapter, deps = [], size = "small", tags = [], **kwargs):
    tests = []
    for number, directory in CHAPTERS:
        if number < first_chapter:
            continue
        for backend, library in BACKENDS:
            # Starlark has no "%02d": pad the chapter number by hand.
            chapter = ("0%d" if number < 10 else "%d") % number
            test_name = "%s_on_ch%s_%s" % (name, chapter, backend)
            objects = test_name + "_objects"
            _suite_objects(objects, srcs, number, directory, backend, deps)
            native.cc_test(
                name = test_name,
                deps = [
                    ":" + objects,
                    "//%s:%s" % (directory, library),
                    "@googletest//:gtest_main",
                ],
                size = size,
                tags = tags,
                # tools/lab grades the reference with these very binaries.
                visibility = ["//visibility:public"],
                **kwargs
            )
            tests.append(":" + test_name)
    native.test_suite(name = name, tests = tests)

# The cumulative suites: (name, source, the chapter whose concept it holds,
# size). Each runs against its chapter and every later one (coro_suites),
# and grades a student's lab of any chapter from its own on (lab_suites).
SUITES = [
    # Chapter 1: create / resume / yield on our own stacks.
    ("context", "context_test.cc", 1, "small"),
    # Chapter 2: the scheduler (ready queue, posts, priorities, stacks).
    ("scheduler", "scheduler_test.cc", 2, "medium"),
    # Chapter 3: timers, parking, events, pumps that wait.
    ("timers", "timers_test.cc", 3, "medium"),
    # Chapter 4: one scheduler per thread, cross-thread work, loopers, pools.
    ("threads", "threads_test.cc", 4, "medium"),
    # Chapter 5: cancellation, closing, draining, signals, stats.
    ("shutdown", "shutdown_test.cc", 5, "medium"),
    # Chapter 5's wait hook: the pump waits in the application's epoll set
    # (coro_sched_set_wait) and still wakes for other threads' work.
    ("wait_hook", "wait_hook_test.cc", 5, "medium"),
]

def _suite_objects(name, srcs, number, directory, backend, deps = []):
    """A suite's compiled tests for one chapter and back-end, without the
    library: the suite and the lab graders of that chapter link these very
    objects, with the chapter's library or with a student's.

    They see the chapter's public headers only (coro.h, and context.h for
    the switch's MXCSR modes), which a lab keeps as they are: so one
    compile serves the reference and every lab, and grading a lab compiles
    none of the (large) suites. alwayslink: GoogleTest registers each test
    from a static initializer, which the linker would otherwise drop."""
    native.cc_library(
        name = name,
        testonly = True,
        srcs = srcs + ["//%s:coro.h" % directory, "//%s:context.h" % directory],
        copts = CXXOPTS + WARNINGS + [
            "-DCORO_CHAPTER=%d" % number,
            "-DCORO_UCONTEXT=%d" % (1 if backend == "ucontext" else 0),
            "-I" + directory,
        ] + (["-DCORO_SWITCH_UCONTEXT"] if backend == "ucontext" else []),
        deps = deps + [":harness", ":trace_events", "@googletest//:gtest"],
        alwayslink = True,
        visibility = ["//visibility:public"],
    )

def coro_suites():
    """Every suite of SUITES, against every chapter from its own on."""
    for name, src, first_chapter, size in SUITES:
        coro_suite(name = name, srcs = [src], first_chapter = first_chapter, size = size)

def lab_suites(chapter, package):
    """A lab's grader: the suites chapter `chapter` passes, against the
    library in `package` (a student's copy, or the reference itself).

    For each suite and back-end, a test binary built exactly as coro_suite
    builds it: the very objects of the suite (`_suite_objects`, compiled
    once, against the chapter's public headers), linked with the package's
    library instead of the chapter's; and a
    test `<suite>_<backend>` that runs it one test group at a time, each
    in a process of its own under a watchdog (tools/lab_groups.sh): a stub
    that aborts, or a hang, fails its group and no other. From chapter 3
    on, the timer heap's own test (tests/timer_heap_test.c) grades the
    package's timer.c too. Everything is "manual": a lab in progress never
    enters //... .
    """
    tags = ["manual", "lab"]
    for name, src, first_chapter, size in SUITES:
        if first_chapter > chapter:
            continue
        for backend, library in BACKENDS:
            if package == _directory(chapter):
                # The reference itself: the very binary coro_suite built.
                binary = "//tests:%s_on_ch%s_%s" % (
                    name, ("0%d" if chapter < 10 else "%d") % chapter, backend)
                _lab_groups_test("%s_%s" % (name, backend), binary, size, tags)
                continue
            binary = "%s_%s_bin" % (name, backend)
            native.cc_binary(
                name = binary,
                testonly = True,
                deps = [
                    # The suite's tests as compiled for the reference.
                    "//tests:%s_on_ch%s_%s_objects" % (
                        name, ("0%d" if chapter < 10 else "%d") % chapter, backend),
                    "//%s:%s" % (package, library),
                    "@googletest//:gtest_main",
                ],
                tags = tags,
            )
            _lab_groups_test("%s_%s" % (name, backend), ":" + binary, size, tags)
    if chapter >= 3:
        native.cc_binary(
            name = "timer_heap_bin",
            testonly = True,
            srcs = ["//tests:timer_heap_test.c"] + [
                "//%s:%s" % (package, f)
                for f in ["context.h", "coro.h", "coro_impl.h", "timer.c"]
            ],
            copts = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-I" + package],
            tags = tags,
        )
        _lab_groups_test("timer_heap", ":timer_heap_bin", "small", tags, ["--plain", "TimerHeap"])

def _directory(number):
    return [d for n, d in CHAPTERS if n == number][0]

def _lab_groups_test(name, binary, size, tags, plain = []):
    native.sh_test(
        name = name,
        srcs = ["//tools:lab_groups.sh"],
        args = plain + ["$(rootpath %s)" % binary],
        data = [binary],
        size = size,
        tags = tags,
    )
