"""The suites on AArch64: cross-compiled here, run under qemu-user.

    aarch64_suite(suite = "context", chapter = 5)

compiles `<suite>_test.cc` for AArch64 against chapter 5, once per switch
back-end (asm and ucontext), links each into a binary
`<suite>_on_ch05_aarch64_<backend>`, and declares one sh_test
`<suite>_on_ch05_aarch64_qemu` that runs both binaries under qemu-aarch64
(tests/run_under_qemu_aarch64.sh). The suites are compiled with the same
CORO_CHAPTER and CORO_UCONTEXT macros as on the host (see suite.bzl).

Why genrules, and not cc_library / cc_test: Bazel's C++ toolchain here is
the host's (x86-64 gcc), and this Bazel (4.2, offline) has no AArch64
toolchain to switch to. So the cross build calls Debian's
aarch64-linux-gnu-gcc itself, in genrules: plain shell commands that Bazel
runs and caches like any other action.

The pieces, each its own genrule so that Bazel builds them in parallel and
rebuilds only what an edit touches:

    gtest_aarch64.a                    GoogleTest and its main(): once, for all
    coro_chNN_aarch64_<backend>.a      a chapter's library, per back-end
    <suite>_on_chNN_aarch64_<backend>.o    a suite, compiled (needs coro.h only)
    <suite>_on_chNN_aarch64_<backend>      ... linked with the two archives

The first aarch64_suite that needs an archive declares it; later suites
find it already declared and reuse it.
"""

load(":chapters.bzl", "BACKENDS", "CHAPTERS")

# The cross toolchain, as every genrule below uses it. valgrind.h (used by
# the library and the harness) is architecture-neutral and lives in the
# host's /usr/include, which the cross compiler never reads; a private
# include directory that links to it is searched last (-idirafter), so the
# AArch64 system headers always come first. Everything is compiled and
# linked with -pthread, as the chapters' libraries are.
_TOOLCHAIN = """
set -eu
WORK=$$(mktemp -d)
trap 'rm -rf "$$WORK"' EXIT
mkdir -p "$$WORK/include"
ln -s /usr/include/valgrind "$$WORK/include/valgrind"
CC="aarch64-linux-gnu-gcc -pthread -idirafter $$WORK/include"
CXX="aarch64-linux-gnu-g++ -pthread -idirafter $$WORK/include"
AR="aarch64-linux-gnu-ar"
"""

# Where GoogleTest's sources are: the directory above src/gtest-all.cc.
_FIND_GTEST = """
GTEST=$$(dirname $$(dirname $$(for f in $(locations @googletest//:sources); do echo $$f; done | grep '/src/gtest-all.cc$$')))
"""

# The same warnings and language levels as the host build (suite.bzl and
# the chapters' BUILD files). The library and GoogleTest are optimised
# (-O2): qemu runs every instruction 10-50 times slower, and they are
# compiled once. The suites get -O1: at -O2 a suite takes three to four times
# as long to compile, and a test spends its time in the library anyway.
_CFLAGS = "-O2 -std=c11 -Wall -Wextra -Werror"
_CXXFLAGS = "-O1 -std=c++17 -Wall -Wextra -Werror"

# Every target below is tagged like the tests: "aarch64" selects them;
# "nosan" marks them as nothing the sanitizer and Valgrind configurations
# need (those instrument host code only: with --build_tag_filters=-nosan
# such a configuration does not cross-build them again for nothing); and
# "manual" keeps them out of `//...`. The cross build and qemu are about a
# third of the cold `bazel test //...` (400 of 1,350 action-seconds on 2
# cores), and the host runs the same suites: so the README's test command
# leaves them to `//tests:aarch64` (aarch64_test_suite() below), a CI step
# of its own.
_TAGS = [
    "aarch64",
    "nosan",
    "manual",
]

def _padded(number):
    # Starlark has no "%02d": pad the chapter number by hand.
    return ("0%d" if number < 10 else "%d") % number

def _directory(chapter):
    for number, directory in CHAPTERS:
        if number == chapter:
            return directory
    fail("no chapter %d in tests/chapters.bzl" % chapter)

def _aarch64_gtest():
    """GoogleTest (gtest-all.cc and gtest_main.cc) as one AArch64 archive."""
    if native.existing_rule("gtest_aarch64"):
        return
    native.genrule(
        name = "gtest_aarch64",
        testonly = True,
        tags = _TAGS,
        srcs = ["@googletest//:sources"],
        outs = ["gtest_aarch64.a"],
        cmd = _TOOLCHAIN + _FIND_GTEST + """
# The two files compile at the same time: gtest-all.cc is the slow one.
$$CXX -O2 -I$$GTEST/include -I$$GTEST -c $$GTEST/src/gtest-all.cc -o $$WORK/gtest-all.o &
GTEST_ALL=$$!
$$CXX -O2 -I$$GTEST/include -c $$GTEST/src/gtest_main.cc -o $$WORK/gtest_main.o
wait $$GTEST_ALL
$$AR rcs $@ $$WORK/gtest-all.o $$WORK/gtest_main.o
""",
    )

def _aarch64_library(chapter, backend):
    """Chapter `chapter`'s library with one back-end, as an AArch64 archive.

    Returns the genrule's name.
    """
    name = "coro_ch%s_aarch64_%s" % (_padded(chapter), backend)
    if native.existing_rule(name):
        return name
    directory = _directory(chapter)

    # The ucontext back-end's struct in context.h depends on this macro,
    # exactly as the chapter's context_ucontext target defines it.
    defines = "-DCORO_SWITCH_UCONTEXT" if backend == "ucontext" else ""

    native.genrule(
        name = name,
        testonly = True,
        tags = _TAGS,
        srcs = ["//%s:sources" % directory],
        outs = [name + ".a"],
        cmd = _TOOLCHAIN + """
CHAPTER=$$(dirname $$(for f in $(locations //{directory}:sources); do echo $$f; done | grep '/coro.c$$'))

# The library's sources: every .c file of the chapter directory (not of
# examples/), with the back-end's own context_*.c and, for the assembly
# back-end, both .S files (each is empty on the other architecture).
SOURCES=""
for f in $(locations //{directory}:sources); do
  [ "$$(dirname $$f)" = "$$CHAPTER" ] || continue
  case $$(basename $$f) in
    context_asm.c | *.S) KIND=asm ;;
    context_ucontext.c) KIND=ucontext ;;
    *.c) KIND=common ;;
    *) KIND=none ;;
  esac
  if [ $$KIND = common ] || [ $$KIND = {backend} ]; then
    SOURCES="$$SOURCES $$f"
  fi
done

for f in $$SOURCES; do
  $$CC {cflags} {defines} -c $$f -o $$WORK/$$(basename $$f).o
done
$$AR rcs $@ $$WORK/*.o
""".format(
            backend = backend,
            cflags = _CFLAGS,
            defines = defines,
            directory = directory,
        ),
    )
    return name

def aarch64_suite(suite, chapter, size = "medium", timeout = None):
    """`<suite>_test.cc` against chapter `chapter`, on AArch64 under qemu.

    Args:
      suite: the suite's name, as in coro_suite ("context", "threads", ...).
      chapter: the chapter number the suite runs against (see chapters.bzl).
      size: the sh_test's size.
      timeout: the sh_test's timeout, if not the size's default.
    """
    _aarch64_gtest()
    directory = _directory(chapter)
    prefix = "%s_on_ch%s_aarch64" % (suite, _padded(chapter))
    test_source = "%s_test.cc" % suite

    binaries = []
    for backend, _library in BACKENDS:
        library = _aarch64_library(chapter, backend)
        binary = "%s_%s" % (prefix, backend)
        defines = "-DCORO_CHAPTER=%d -DCORO_UCONTEXT=%d" % (
            chapter,
            1 if backend == "ucontext" else 0,
        )

        # The suite, compiled. It includes only coro.h, harness.h and
        # trace_events.h, so an edit to the library's .c files does not
        # compile it again.
        native.genrule(
            name = binary + "_object",
            testonly = True,
            tags = _TAGS,
            srcs = [
                test_source,
                "harness.h",
                "trace_events.h",
                "//%s:coro.h" % directory,
                "@googletest//:sources",
            ],
            outs = [binary + ".o"],
            cmd = _TOOLCHAIN + _FIND_GTEST + """
CHAPTER=$$(dirname $(location //{directory}:coro.h))
TESTS=$$(dirname $(location {test_source}))
$$CXX {cxxflags} {defines} -I$$CHAPTER -I$$TESTS -I$$GTEST/include \\
  -c $(location {test_source}) -o $@
""".format(
                cxxflags = _CXXFLAGS,
                defines = defines,
                directory = directory,
                test_source = test_source,
            ),
        )

        # ... linked. The library's archive comes after the suite, and
        # GoogleTest's (which holds main()) last: the linker takes from an
        # archive only what the files before it still need.
        native.genrule(
            name = binary + "_binary",
            testonly = True,
            tags = _TAGS,
            srcs = [
                ":%s_object" % binary,
                ":" + library,
                ":gtest_aarch64",
            ],
            outs = [binary],
            cmd = _TOOLCHAIN + """
$$CXX $(location :{binary}_object) $(location :{library}) \\
  $(location :gtest_aarch64) -o $@
""".format(
                binary = binary,
                library = library,
            ),
        )
        binaries.append(binary)

    # Runs both binaries under qemu-aarch64. Not under the sanitizer or
    # Valgrind configurations (tag "nosan", see _TAGS).
    native.sh_test(
        name = prefix + "_qemu",
        size = size,
        timeout = timeout,
        srcs = ["run_under_qemu_aarch64.sh"],
        args = ["$(location %s)" % b for b in binaries],
        data = binaries,
        tags = _TAGS,
    )

def aarch64_test_suite(name = "aarch64"):
    """The test suite of every aarch64_suite() declared so far (call it
    last): `bazel test //tests:aarch64`. Manual, like its tests."""
    native.test_suite(
        name = name,
        tests = sorted([
            ":" + rule["name"]
            for rule in native.existing_rules().values()
            if rule["kind"] == "sh_test" and "aarch64" in rule.get("tags", [])
        ]),
        tags = ["manual"],
    )
