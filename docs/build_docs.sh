#!/usr/bin/env bash
# build_docs.sh — the course site: one Doxygen run per chapter, one for the
# landing page.
#
#   ./tools/bazelw run //docs:html                         # every chapter
#   ./tools/bazelw run //docs:html -- --only ch01_context  # one chapter
#   docs/build_docs.sh [--out DIR] [--only CHAPTER] [--sources DIR] [CHAPTER...]
#
# CHAPTERs are chapter directories in course order (each one is compared with
# the one before it); by hand, the default is every chNN_* directory. It
# writes one site under DIR (default: docs/_build of the workspace):
#
#   index.html       the landing page: docs/index.md, its chapter map linked
#                    to every chapter's lesson, API, states and diff, and
#                    its links to every chapter's instructors' notes
#   search_course.html, course_index.js   the search of the whole course
#   CHAPTER/pages/   the pages generated for a chapter by docs/site.py:
#                    changes.md (+ changes_body.html), header.html and
#                    footer.html (the course bar and the pager), coro.tag
#   CHAPTER/html/    Doxygen's HTML: the lesson as main page (with a table
#                    of contents and, from Chapter 2 on, its timeline:
#                    docs/timelines/CHAPTER.svg, which //docs:timelines
#                    draws when Bazel runs this), coro.h, the states diagram
#                    (docs/states.md), the changes from the previous chapter,
#                    and the lesson's companion pages (CHAPTER/notes/*.md,
#                    CHAPTER/examples/*.md), each reached from a relative
#                    link in the lesson, as on GitHub; and the instructors'
#                    notes of the chapter's lab (CHAPTER/lab/instructors.md
#                    -> md_lab_instructors.html), linked from the landing
#                    page only, never from the lesson
#
# Every page has the course bar (the course index, every chapter, the
# chapter's pages, the search box) and, at the bottom, the previous and next
# chapter. The diff page compares the chapters' files as they are on disk:
# under `bazel run`, the workspace's (every file, also those of packages
# such as models/ that Bazel's runfiles leave out); `--sources DIR` reads
# them from DIR instead.
#
# Doxygen's settings are in docs/Doxyfile (and docs/course.doxyfile for the
# landing page); this script only fills in the chapter through environment
# variables. Any Doxygen warning (an undocumented public item, a parameter
# without @param, a broken reference, ...) makes the script exit 1 after
# every page has been tried: //docs:doxygen_warnings_test is this script run
# into a scratch directory, and //docs:browser_test opens what it writes.
set -euo pipefail

die() { echo "build_docs: $*" >&2; exit 2; }

# --- Arguments ---------------------------------------------------------------
out="" only="" sources="" chapters=()
while (($#)); do
  case $1 in
    --out)  out=${2:?--out needs a directory}; shift 2 ;;
    --only) only=${2:?--only needs a chapter}; shift 2 ;;
    --sources) sources=${2:?--sources needs a directory}; shift 2 ;;
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

# `bazel run` starts us in the runfiles tree; write into the real workspace,
# and diff the chapters as they are there.
out=${out:-${BUILD_WORKSPACE_DIRECTORY:-$root}/docs/_build}
mkdir -p "$out"
out=$(cd "$out" && pwd)
sources=$(cd "${sources:-${BUILD_WORKSPACE_DIRECTORY:-$root}}" && pwd)

# Debian's Python, where python3-pygments lives (a python3 earlier on the
# PATH may not have it).
python=python3
[[ -x /usr/bin/python3 ]] && python=/usr/bin/python3
site() { "$python" "$root/docs/site.py" "$@" --root "$root" --chapters "${chapters[@]}"; }

# --- Helpers -----------------------------------------------------------------

# The chapter's title: the first "# " heading of its lesson.
chapter_title() {
  local title
  title=$(sed -n 's/^#[[:space:]]\{1,\}//p' "$1/README.md" | head -n 1)
  title=${title%%\{#*}                  # drop a Doxygen label "{#name}"
  echo "${title:-$1}"
}

# One Doxygen run. $1 = the Doxyfile, $2 = what it makes (for messages),
# $3 = the run's log; the environment names the chapter. Prints the
# warnings with paths relative to the repository; returns 1 on any.
run_doxygen() {
  local status=0
  doxygen "$1" > "$3" 2>&1 || status=$?
  sed "s#$root/##g" "$3" >&2
  if ((status)); then
    echo "build_docs: $2: Doxygen failed (warnings above, log in $3)" >&2
    return 1
  fi
}

# One chapter: its pages (docs/site.py), then its Doxygen run.
build_chapter() {
  local chapter=$1
  [[ $chapter =~ ^ch[0-9][0-9]_[A-Za-z0-9_]+$ ]] || die "not a chapter name: $chapter"
  [[ -f $chapter/README.md && -f $chapter/coro.h ]] || die "$chapter: no README.md and coro.h"
  local dest=$out/$chapter
  rm -rf "$dest"                          # no stale pages from an older run
  mkdir -p "$dest/pages"
  site chapter --chapter "$chapter" --sources "$sources" --pages "$dest/pages"
  # Its timeline, drawn by //docs:timelines from a trace of one of its
  # examples run on the current code; the lesson shows it as timeline.svg.
  if [[ -f $root/docs/timelines/$chapter.svg ]]; then
    cp "$root/docs/timelines/$chapter.svg" "$dest/pages/timeline.svg"
  fi

  # The lesson's companion pages: the deep dives it links to
  # (notes/*.md) and the longer pages of its examples (examples/*.md);
  # and the instructors' notes of its lab (lab/*.md), which only the
  # landing page links to.
  local extra=() page
  for page in "$chapter"/notes/*.md "$chapter"/examples/*.md "$chapter"/lab/*.md; do
    [[ -f $page ]] && extra+=("$root/$page")
  done

  CORO_DOC_CHAPTER=$chapter \
  CORO_DOC_EXTRA=${extra[*]:-} \
  CORO_DOC_TITLE=$(chapter_title "$chapter") \
  CORO_DOC_SRC=$root/$chapter \
  CORO_DOC_PAGES=$dest/pages \
  CORO_DOC_DIR=$root/docs \
  CORO_DOC_OUT=$dest \
    run_doxygen "$root/docs/Doxyfile" "$chapter" "$dest/doxygen.log" || return 1
  # Beside the lesson's page, for its <img src="timeline.svg">.
  if [[ -f $dest/pages/timeline.svg ]]; then
    cp "$dest/pages/timeline.svg" "$dest/html/timeline.svg"
  fi
  echo "build_docs: wrote $dest/html/index.html"
}

# The landing page and the search page, at the site's root.
build_course() {
  mkdir -p "$out/pages"
  site course --pages "$out/pages"
  CORO_DOC_PAGES=$out/pages \
  CORO_DOC_DIR=$root/docs \
  CORO_DOC_OUT=$out \
    run_doxygen "$root/docs/course.doxyfile" "the landing page" "$out/pages/doxygen.log" || return 1
}

# --- Main --------------------------------------------------------------------
if [[ -n $only && " ${chapters[*]} " != *" $only "* ]]; then
  die "--only $only: not one of: ${chapters[*]}"
fi

failed=()
for chapter in "${chapters[@]}"; do
  if [[ -z $only || $only == "$chapter" ]]; then
    build_chapter "$chapter" || failed+=("$chapter")
  fi
done
build_course || failed+=("the landing page")
# After every run: the search index of the course, and links on API calls
# written with their arguments.
site finish --out "$out"
echo "build_docs: open $out/index.html"

if ((${#failed[@]})); then
  echo "build_docs: Doxygen warnings in: ${failed[*]}" >&2
  exit 1
fi
