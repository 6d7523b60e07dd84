#!/usr/bin/env bash
# build_docs.sh — the reference HTML of the course: one Doxygen run per chapter.
#
#   ./tools/bazelw run //docs:html                         # every chapter
#   ./tools/bazelw run //docs:html -- --only ch01_context  # one chapter
#   docs/build_docs.sh [--out DIR] [--only CHAPTER] [CHAPTER...]   # by hand
#
# CHAPTERs are chapter directories in course order (each one is compared with
# the one before it); by hand, the default is every chNN_* directory. For each
# chapter it writes, under DIR (default: docs/_build of the workspace):
#
#   CHAPTER/pages/   the pages generated for it: changes.md (+ changes.diff),
#                    course.md (docs/index.md with links into the HTML)
#   CHAPTER/html/    Doxygen's HTML: the lesson as main page, coro.h, the
#                    states diagram (docs/states.md), the changes, the course
#   index.html       links to every chapter built so far
#
# Doxygen's settings are in docs/Doxyfile; this script only fills in the
# chapter through environment variables. Any Doxygen warning (an undocumented
# public item, a parameter without @param, a broken reference, ...) makes the
# script exit 1 after every chapter has been tried: //docs:doxygen_warnings_test
# is this script run into a scratch directory.
set -euo pipefail

die() { echo "build_docs: $*" >&2; exit 2; }

# --- Arguments ---------------------------------------------------------------
out="" only="" chapters=()
while (($#)); do
  case $1 in
    --out)  out=${2:?--out needs a directory}; shift 2 ;;
    --only) only=${2:?--only needs a chapter}; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option $1 (try --help)" ;;
    *)  chapters+=("${1%/}"); shift ;;
  esac
done

# Work from the directory that holds docs/ and the chapters: under Bazel that
# is the current directory (the runfiles tree), by hand the repository root.
[[ -f docs/Doxyfile ]] || cd "$(dirname "$0")/.."
root=$PWD

if ((${#chapters[@]} == 0)); then
  for dir in ch[0-9][0-9]_*/; do chapters+=("${dir%/}"); done
fi
((${#chapters[@]})) || die "no chapters found in $root"

# `bazel run` starts us in the runfiles tree; write into the real workspace.
out=${out:-${BUILD_WORKSPACE_DIRECTORY:-$root}/docs/_build}
mkdir -p "$out"
out=$(cd "$out" && pwd)

# --- Helpers -----------------------------------------------------------------

# The chapter's title: the first "# " heading of its lesson.
chapter_title() {
  local title
  title=$(sed -n 's/^#[[:space:]]\{1,\}//p' "$1/README.md" | head -n 1)
  title=${title%%\{#*}                  # drop a Doxygen label "{#name}"
  echo "${title:-$1}"
}

# The page "Changes from the previous stage": `diff -ru previous chapter`.
# The diff goes in a file that the page pulls in with \verbinclude, so
# nothing in it (a "@endcode" in a changed comment, say) is read as Doxygen
# markup. $1 = previous chapter ("" for the first), $2 = chapter, $3 = pages dir.
write_changes_page() {
  local prev=$1 chapter=$2 pages=$3
  {
    echo "# Changes from the previous stage {#changes}"
    echo
    if [[ -z $prev ]]; then
      echo "This is the first stage of the course: there is no previous stage"
      echo "to compare it with. Start with the lesson (the main page)."
      return
    fi
    # diff exits 1 when the directories differ: that is not an error.
    # The timestamps after each file name say nothing here: drop them.
    (cd "$root" && diff -ru "$prev" "$chapter") > "$pages/changes.diff" || (($? == 1))
    sed -i -E 's/^((---|\+\+\+) [^\t]*)\t.*$/\1/' "$pages/changes.diff"
    echo "What \`diff -ru $prev $chapter\` prints: everything this stage adds,"
    echo "changes or removes. The lesson's section \"What changed\" explains it."
    echo
    if [[ -s $pages/changes.diff ]]; then
      printf '%s\n' '\verbinclude changes.diff'
    else
      echo "(No differences.)"
    fi
  } > "$pages/changes.md"
}

# The course page: docs/index.md, with each link to a lesson on disk
# (../chNN_name/README.md) turned into a link to that chapter's HTML.
write_course_page() {
  sed -E 's#\]\(\.\./(ch[0-9][0-9]_[A-Za-z0-9_]+)/README\.md\)#](../../\1/html/index.html)#g' \
    "$root/docs/index.md" > "$1/course.md"
}

# One Doxygen run: $1 = chapter, $2 = previous chapter or "". Returns 1 on
# any warning, after printing them (paths relative to the repository).
build_chapter() {
  local chapter=$1 prev=$2
  [[ $chapter =~ ^ch[0-9][0-9]_[A-Za-z0-9_]+$ ]] || die "not a chapter name: $chapter"
  [[ -f $chapter/README.md && -f $chapter/coro.h ]] || die "$chapter: no README.md and coro.h"
  local dest=$out/$chapter
  rm -rf "$dest"                          # no stale pages from an older run
  mkdir -p "$dest/pages"
  write_changes_page "$prev" "$chapter" "$dest/pages"
  write_course_page "$dest/pages"

  local status=0
  CORO_DOC_CHAPTER=$chapter \
  CORO_DOC_TITLE=$(chapter_title "$chapter") \
  CORO_DOC_SRC=$root/$chapter \
  CORO_DOC_PAGES=$dest/pages \
  CORO_DOC_DIR=$root/docs \
  CORO_DOC_OUT=$dest \
    doxygen "$root/docs/Doxyfile" > "$dest/doxygen.log" 2>&1 || status=$?
  sed "s#$root/##g" "$dest/doxygen.log" >&2
  if ((status)); then
    echo "build_docs: $chapter: Doxygen failed (warnings above, log in $dest/doxygen.log)" >&2
    return 1
  fi
  echo "build_docs: wrote $dest/html/index.html"
}

# The top page: one line per chapter whose HTML exists.
write_index() {
  local chapter title first=""
  {
    cat <<'EOF'
<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>Coroutines in C, chapter by chapter</title>
<style>
  body { font-family: sans-serif; max-width: 50em; margin: 2em auto; line-height: 1.4; }
  td { padding: 0.3em 1em 0.3em 0; vertical-align: top; }
</style></head>
<body>
<h1>Coroutines in C, chapter by chapter</h1>
<p>The reference documentation of each stage of the course: its lesson, its
API (<code>coro.h</code>), the coroutine states and the diff from the previous
stage. Read the chapters in order.</p>
<table>
EOF
    for chapter in "${chapters[@]}"; do
      [[ -f $out/$chapter/html/index.html ]] || continue
      first=${first:-$chapter}
      # Escape the title for HTML.
      title=$(chapter_title "$chapter" | sed 's/&/\&amp;/g; s/</\&lt;/g; s/>/\&gt;/g')
      echo "<tr><td><a href=\"$chapter/html/index.html\">$title</a></td>"
      echo "    <td><a href=\"$chapter/html/states.html\">states</a></td>"
      echo "    <td><a href=\"$chapter/html/changes.html\">changes from the previous stage</a></td></tr>"
    done
    echo "</table>"
    echo "<p>How to read a stage, and the map of the course: <a href=\"$first/html/course.html\">the course page</a>"
    echo "(also in every chapter's reference, and as <code>docs/index.md</code>).</p>"
    echo "</body>"
    echo "</html>"
  } > "$out/index.html"
}

# --- Main --------------------------------------------------------------------
if [[ -n $only && " ${chapters[*]} " != *" $only "* ]]; then
  die "--only $only: not one of: ${chapters[*]}"
fi

failed=()
prev=""
for chapter in "${chapters[@]}"; do
  if [[ -z $only || $only == "$chapter" ]]; then
    build_chapter "$chapter" "$prev" || failed+=("$chapter")
  fi
  prev=$chapter
done

write_index
echo "build_docs: open $out/index.html"

if ((${#failed[@]})); then
  echo "build_docs: Doxygen warnings in: ${failed[*]}" >&2
  exit 1
fi
