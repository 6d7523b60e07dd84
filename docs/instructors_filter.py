#!/usr/bin/env python3
"""instructors_filter.py — Doxygen's input filter for the instructors' notes
of a chapter's lab (CHAPTER/lab/instructors.md; FILTER_PATTERNS in
docs/Doxyfile): the page as it is, with two GitHub Markdown constructs that
Doxygen 1.9 shows as literal markup rewritten the way Doxygen reads them.

  1. Bold that starts with a code span, as in the line
         - **`coroutine_main()` returns.** When the function returns, ...
     Doxygen leaves the asterisks as text. The bold becomes an HTML <b>
     element around the same text, as the lessons write it by hand.
  2. A code span in a heading, as in
         ## Exercise 3: `coro_sleep_until()`
     Doxygen shows the <tt> tags as text. The backquotes are dropped; the
     heading keeps its words.

The notes are written for GitHub, where both constructs render, and their
authors need not know Doxygen's limits; the lessons, which hold no Doxygen
markup either, avoid both constructs instead. Fenced code blocks are left
alone, and every line keeps its number, so Doxygen's warnings point at the
right line of the file on disk.

    instructors_filter.py FILE      the filtered page on standard output
"""

import re
import sys

FENCE_RE = re.compile(r"^\s*(```|~~~)")
HEADING_RE = re.compile(r"^(#{1,6}\s)(.*)$")
# Bold whose first character is a backquote, within one paragraph (it may
# run over several lines, never over a blank one).
BOLD_CODE_RE = re.compile(r"\*\*(`(?:[^*\n]|\n(?![ \t]*\n))*?)\*\*")


def filter_text(text):
    lines = text.split("\n")
    out, chunk, fenced = [], [], False

    def flush():
        if chunk:
            prose = "\n".join(chunk)
            out.extend(BOLD_CODE_RE.sub(r"<b>\1</b>", prose).split("\n"))
            chunk.clear()

    for line in lines:
        if FENCE_RE.match(line):
            flush()
            fenced = not fenced
            out.append(line)
        elif fenced:
            out.append(line)
        else:
            heading = HEADING_RE.match(line)
            chunk.append(heading.group(1) + heading.group(2).replace("`", "")
                         if heading else line)
    flush()
    return "\n".join(out)


def main(argv):
    if len(argv) != 1:
        sys.exit("usage: instructors_filter.py FILE")
    with open(argv[0], encoding="utf-8") as f:
        sys.stdout.write(filter_text(f.read()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
