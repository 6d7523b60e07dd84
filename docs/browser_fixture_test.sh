#!/usr/bin/env bash
# browser_fixture_test — proves that the browser test bites.
#
# docs/testdata/browser/ is a made-up course site of two chapters, with
# their sources. As it is, docs/browser_check.py must pass on it (code that
# holds `**` or a backquote is not markup). Then each case below breaks one
# thing in a fresh copy, and the check must fail with that defect's message.
# The fixture's chapters have labs (sources/CHAPTER/lab/): the unbroken site
# has their instructors' pages, linked from the landing page only, and a
# diff page that leaves ch02_b's lab/checks/b_check.c out.
set -euo pipefail
python=python3
[[ -x /usr/bin/python3 ]] && python=/usr/bin/python3
work=${TEST_TMPDIR:-$(mktemp -d)}
fixture=docs/testdata/browser
failures=0

# check NAME: run the browser check on $work/NAME; output in $work/NAME.log.
check() {
  "$python" docs/browser_check.py --site "$work/$1/site" --sources "$work/$1/sources" \
    ch01_a ch02_b > "$work/$1.log" 2>&1
}

# fresh NAME: a copy of the fixture in $work/NAME.
fresh() {
  rm -rf "${work:?}/$1"
  cp -rL "$fixture" "$work/$1"
  chmod -R u+w "$work/$1"
}

# case NAME FILE PERL-EDIT EXPECTED: the check must fail on the fixture
# with FILE (under site/) edited, printing a line that matches EXPECTED.
case_() {
  local name=$1 file=$2 edit=$3 expected=$4
  fresh "$name"
  perl -0pi -e "$edit" "$work/$name/site/$file"
  if check "$name"; then
    echo "FAIL $name: the check passed, although $file was broken"
    failures=$((failures + 1))
  elif ! grep -E "$expected" "$work/$name.log" > /dev/null; then
    echo "FAIL $name: the check failed, but not with /$expected/:"
    cat "$work/$name.log"
    failures=$((failures + 1))
  else
    echo "ok   $name: $(grep -E -m1 "$expected" "$work/$name.log")"
  fi
}

fresh good
if check good; then
  echo "ok   good: the unbroken fixture passes"
else
  echo "FAIL good: the check fails on the unbroken fixture:"
  cat "$work/good.log"
  failures=$((failures + 1))
fi

case_ bold ch02_b/html/index.html 's#<!--CASE-->#<p>**`coro_create()`** rounds the size.</p>#' \
  'literal markup \(Markdown bold'
case_ tag_in_heading ch02_b/html/index.html 's#<!--CASE-->#<h2>x86-64 (&lt;tt&gt;switch.S&lt;/tt&gt;)</h2>#' \
  'literal markup \(an HTML tag as text\)'
case_ markdown_link ch02_b/html/index.html 's#<!--CASE-->#<p>See [the lesson](README.md).</p>#' \
  'literal markup \(a Markdown link'
case_ broken_link ch02_b/html/index.html 's#<!--CASE-->#<p><a href="missing.html">gone</a></p>#' \
  'broken link .*missing.html.*no such file'
case_ broken_anchor ch02_b/html/index.html 's#<!--CASE-->#<p><a href="../../ch01_a/html/index.html\#nowhere">gone</a></p>#' \
  'broken link .*#nowhere.*no such anchor'
case_ broken_image ch02_b/html/index.html 's#<!--CASE-->#<p><img src="missing.png" alt="a picture"/></p>#' \
  'broken image .*missing.png'
case_ no_previous ch02_b/html/index.html 's#<a href="../../ch01_a/html/index.html">Previous</a>##' \
  'ch02_b/html/index.html: no link to the previous chapter'
case_ no_index ch01_a/html/changes.html 's#<a href="../../index.html">The course</a>##' \
  'ch01_a/html/changes.html: no link to the course index'
case_ new_file_missing ch02_b/html/changes.html 's#<p><a href="\#file-b-c">b.c</a></p>##' \
  'the new file b.c is not in the list of files'
case_ new_file_cut ch02_b/html/changes.html 's#\+    return 2;\n##' \
  'the new file b.c is not shown whole: 1 lines missing'
case_ no_instructors_link index.html 's#,\n<a href="ch02_b/html/md_lab_instructors.html">two</a>##' \
  "index.html: no link to the instructors' page of ch02_b"
case_ lesson_links_instructors ch02_b/html/index.html 's#<!--CASE-->#<p><a href="md_lab_instructors.html">notes</a></p>#' \
  "ch02_b/html/index.html: the lesson links to the instructors' page of ch02_b"
case_ lab_file_in_diff ch02_b/html/changes.html 's#(<p><a href="\#file-b-c">b.c</a></p>)#$1\n<p><a href="\#file-b-c">lab/checks/b_check.c</a></p>#' \
  "the lab's file lab/checks/b_check.c is listed as a change of the chapter"

if ((failures)); then
  echo "browser_fixture_test: $failures case(s) failed" >&2
  exit 1
fi
echo "PASS: the browser check passes on the good fixture and fails on each broken one"
