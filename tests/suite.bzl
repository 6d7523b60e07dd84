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
            native.cc_test(
                name = test_name,
                srcs = srcs,
                copts = CXXOPTS + WARNINGS + [
                    "-DCORO_CHAPTER=%d" % number,
                    "-DCORO_UCONTEXT=%d" % (1 if backend == "ucontext" else 0),
                ],
                deps = deps + [
                    ":harness",
                    "//%s:%s" % (directory, library),
                    "@googletest//:gtest_main",
                ],
                size = size,
                tags = tags,
                **kwargs
            )
            tests.append(":" + test_name)
    native.test_suite(name = name, tests = tests)
