#!/usr/bin/env python3
"""lesson_lengths.py — no chapter lesson is longer than 1.3 times another.

SPEC.md: "Lessons are written for a student ... No lesson longer than 1.3x
another's." A lesson is a chapter's README.md (chNN_*/README.md). This
checks the rule twice, once in words and once in lines, over every lesson
at once (the longest against the shortest, not each against the one
before it):

    tools/lesson_lengths.py [--root DIR] [--max-ratio R] [CHAPTER...]

Words are counted as `wc -w` counts them (runs of non-blank characters),
lines as `wc -l` does. Without CHAPTERs it checks every chNN_* directory
under DIR (default: the repository this script is in; under `bazel test`,
the runfiles tree, and //tools:lesson_lengths_test passes every chapter
of tests/chapters.bzl, so a chapter missing from its data fails). It prints a table
of every lesson, then either "ok" or, for each measure that breaks the
rule, the longest and the shortest lesson and their ratio; the exit status
is 0 if both ratios are at most R (default 1.3), 1 if not, 2 on a usage
error.

A lesson that has grown too long keeps its concept, picture, code walk,
contract, "What changed", pitfalls and exercises, and moves a long deep
dive into a companion page of its chapter (chNN_*/notes/*.md), linked from
the lesson with a relative link (see docs/build_docs.sh).
"""

import argparse
import glob
import os
import sys

SPEC_RATIO = 1.3


def measure(path):
    """(words, lines) of a file, as `wc -w` and `wc -l` count them."""
    with open(path, "rb") as f:
        data = f.read()
    return len(data.split()), data.count(b"\n")


def check(lessons, max_ratio):
    """lessons: [(name, words, lines)]. Returns the failure messages."""
    failures = []
    for index, unit in ((1, "words"), (2, "lines")):
        longest = max(lessons, key=lambda lesson: lesson[index])
        shortest = min(lessons, key=lambda lesson: lesson[index])
        if shortest[index] == 0:
            failures.append("%s is empty" % shortest[0])
            continue
        ratio = longest[index] / shortest[index]
        if ratio > max_ratio:
            failures.append(
                "in %s: the longest lesson, %s (%d %s), is %.2fx the shortest, "
                "%s (%d %s); the limit is %.2fx. Move a deep-dive section into a "
                "companion page (CHAPTER/notes/*.md), or give the short one what "
                "a student is missing."
                % (unit, longest[0], longest[index], unit, ratio,
                   shortest[0], shortest[index], unit, max_ratio))
    return failures


def default_root():
    """Under `bazel test`, the runfiles tree (the lessons the test's data
    brought); by hand, the repository this script is in."""
    if os.environ.get("TEST_SRCDIR"):
        return os.path.join(os.environ["TEST_SRCDIR"], os.environ.get("TEST_WORKSPACE", ""))
    return os.path.join(os.path.dirname(os.path.realpath(__file__)), "..")


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=default_root(), help="the directory holding the chapters")
    parser.add_argument("--max-ratio", type=float, default=SPEC_RATIO)
    parser.add_argument("chapters", nargs="*", help="chapter directories (default: every chNN_*)")
    args = parser.parse_args(argv)

    chapters = args.chapters or sorted(
        os.path.basename(os.path.dirname(path))
        for path in glob.glob(os.path.join(args.root, "ch[0-9][0-9]_*", "README.md")))
    if len(chapters) < 2:
        print("lesson_lengths: fewer than two lessons under %s" % args.root, file=sys.stderr)
        return 2
    lessons = []
    for chapter in chapters:
        path = os.path.join(args.root, chapter, "README.md")
        if not os.path.isfile(path):
            print("lesson_lengths: %s has no README.md" % chapter, file=sys.stderr)
            return 2
        words, lines = measure(path)
        lessons.append(("%s/README.md" % chapter, words, lines))

    print("%-28s %7s %7s" % ("lesson", "words", "lines"))
    for name, words, lines in lessons:
        print("%-28s %7d %7d" % (name, words, lines))
    for index, unit in ((1, "words"), (2, "lines")):
        values = [lesson[index] for lesson in lessons]
        print("%s: longest / shortest = %d / %d = %.2f (limit %.2f)"
              % (unit, max(values), min(values), max(values) / max(min(values), 1),
                 args.max_ratio))
    failures = check(lessons, args.max_ratio)
    for failure in failures:
        print("FAIL %s" % failure)
    if not failures:
        print("lesson_lengths: ok, no lesson longer than %.2fx another" % args.max_ratio)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
