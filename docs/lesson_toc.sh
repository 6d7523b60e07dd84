#!/bin/sh
# lesson_toc.sh — Doxygen's input filter for a lesson (FILTER_PATTERNS in
# docs/Doxyfile): the lesson as it is, with a table of contents ([TOC])
# under its title.
#
# The README.md on disk stays free of Doxygen markup (GitHub would show
# "[TOC]" as text). [TOC] takes the blank line after the title, so every
# line keeps its number and Doxygen's warnings point at the right line; if
# the title is not followed by a blank line, [TOC] is inserted.
exec awk '
  toc == 1 { toc = 2; print "[TOC]"; if ($0 ~ /^[ \t]*$/) next }
  { print }
  toc == 0 && /^# / { toc = 1 }
' "$1"
