#!/usr/bin/env bash
# stage_diff_test — tools/stage_diff on small made-up repositories.
#
# Each case builds a repository of fixture chapters under $TEST_TMPDIR, all
# copied from tools/testdata/base (a chapter full of tricky but valid C and
# assembly), changes what the case is about, and checks what
# `stage_diff --check` (or the diff mode) says. Run by `bazel test
# //tools:stage_diff_test`, or by hand: tools/stage_diff_test.sh
set -uo pipefail

# --------------------------------------------------------------------------
# Where things are
# --------------------------------------------------------------------------

if [[ -n "${TEST_SRCDIR:-}" ]]; then
  tools="$TEST_SRCDIR/$TEST_WORKSPACE/tools"
else
  tools="$(cd "$(dirname "$0")" && pwd)"
fi
tool="$tools/stage_diff"
base="$tools/testdata/base"
work="${TEST_TMPDIR:-$(mktemp -d)}/stage_diff_test"
rm -rf "$work" && mkdir -p "$work"

# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------

failures=0
current=""

# case_ NAME: start a case (its repository is $work/NAME).
case_() {
  current="$1"
  repo="$work/$1"
  mkdir -p "$repo"
  echo "--- $1"
}

pass() { echo "PASS  $current: $*"; }
fail() { echo "FAIL  $current: $*"; failures=$((failures + 1)); }

# chapter DIR: a fresh copy of the base chapter as $repo/DIR.
chapter() {
  rm -rf "${repo:?}/$1"
  cp -RL "$base" "$repo/$1"
  chmod -R u+w "$repo/$1"
}

# lesson DIR TEXT: the chapter's README, with TEXT under "What changed".
# Names in the sections around it must not count, so both mention `add`.
lesson() {
  cat > "$repo/$1/README.md" <<EOF
# A lesson

## The code walk

Here we talk about add() and coro_switch, which do not count.

## What changed

$2

## Exercises

Make add() and coro_switch faster. (Not part of "What changed".)
EOF
}

# edit FILE OLD NEW: replace the one occurrence of OLD in FILE by NEW.
edit() {
  python3 - "$1" "$2" "$3" <<'EOF' || fail "edit of $1 failed"
import sys
path, old, new = sys.argv[1:]
text = open(path).read()
if text.count(old) != 1:
    sys.exit("edit: %r occurs %d times in %s" % (old, text.count(old), path))
open(path, "w").write(text.replace(old, new))
EOF
}

# run ARGS...: run stage_diff on $repo; sets $out and $status.
run() {
  out="$("$tool" --root "$repo" "$@" 2>&1)"
  status=$?
}

expect_status() {
  if [[ "$status" == "$1" ]]; then pass "$2 (exit $1)"
  else fail "$2: expected exit $1, got $status"; echo "$out"; fi
}

# expect_line REGEX WHAT: some output line matches REGEX (extended).
expect_line() {
  if grep -Eq -- "$1" <<<"$out"; then pass "$2"
  else fail "$2: no line matches /$1/"; echo "$out"; fi
}

# expect_no_line REGEX WHAT: no output line matches REGEX.
expect_no_line() {
  if grep -Eq -- "$1" <<<"$out"; then fail "$2: a line matches /$1/"; echo "$out"
  else pass "$2"; fi
}

# The report line for one unnamed function: kind, name, file.
unnamed() { echo "^ +$1 +$2 +[^ ]*/$3:[0-9]+$"; }

# line_of REGEX: the number of the first output line matching REGEX, or 0.
line_of() {
  local n
  n="$(grep -Enm1 -- "$1" <<<"$out" | cut -d: -f1)"
  echo "${n:-0}"
}

# expect_order WHAT REGEX...: each REGEX matches a line, each one after the
# previous one's first match.
expect_order() {
  local what="$1" previous=0 previous_regex="(the start)" regex n
  shift
  for regex in "$@"; do
    n="$(line_of "$regex")"
    if ((n == 0)); then
      fail "$what: no line matches /$regex/"; echo "$out"; return
    fi
    if ((n <= previous)); then
      fail "$what: /$regex/ (line $n) is not after /$previous_regex/" \
           "(line $previous)"
      echo "$out"; return
    fi
    previous=$n previous_regex=$regex
  done
  pass "$what"
}

# --------------------------------------------------------------------------
# (a) identical chapters pass; one chapter passes vacuously; none is an error
# --------------------------------------------------------------------------

case_ a_identical
chapter ch01_base
run --check
expect_status 0 "one chapter"
expect_line "only one chapter" "one chapter is vacuous"
chapter ch02_same
rm "$repo/ch02_same/README.md"          # no lesson needed: nothing changed
run --check
expect_status 0 "identical chapters"
expect_line "^ok +ch01_base -> ch02_same: no function differs" "pair reported"

case_ a_empty
run --check
expect_status 2 "no chapter at all"

# --------------------------------------------------------------------------
# (b) a changed function that the lesson does not name fails, naming it
# --------------------------------------------------------------------------

case_ b_unlisted
chapter ch01_base
chapter ch02_next
edit "$repo/ch02_next/coro.c" "return a + b;" "return b + a;"
lesson ch02_next "pick() and add_numbers() changed."   # not add: a whole word
run --check
expect_status 1 "changed, not named"
expect_line "$(unnamed changed add coro.c)" "names add, its file, 'changed'"
expect_line "1 function\(s\) or example file\(s\) differ" "only that function"

case_ b_no_section
chapter ch01_base
chapter ch02_next
edit "$repo/ch02_next/coro.c" "return a + b;" "return b + a;"
echo "# A lesson without the section" > "$repo/ch02_next/README.md"
run --check
expect_status 1 "changed, lesson has no section"
expect_line 'has no "What changed" section' "says the section is missing"
expect_line "$(unnamed changed add coro.c)" "names add"

# --------------------------------------------------------------------------
# (c) the same change, named, passes (any heading level; subsections count)
# --------------------------------------------------------------------------

case_ c_listed
chapter ch01_base
chapter ch02_next
edit "$repo/ch02_next/coro.c" "return a + b;" "return b + a;"
lesson ch02_next "\`add()\` now adds the other way round."
run --check
expect_status 0 "changed and named"
expect_line "^ok +ch01_base -> ch02_next: 1 function\(s\) differ, all named" "summary"

cat > "$repo/ch02_next/README.md" <<'EOF'
# A lesson
## Details
### What changed since chapter 1
Some prose.
#### The small print
```sh
# What changed? (a comment in a code block is not a heading)
```
The order of add's operands.
### Pitfalls
EOF
run --check
expect_status 0 "named in a subsection of a level-3 section"

# --------------------------------------------------------------------------
# (d) a fix made in ch02 and not carried into ch03 fails ch02 -> ch03
# --------------------------------------------------------------------------

case_ d_not_carried
chapter ch01_base
chapter ch02_next
chapter ch03_last
edit "$repo/ch02_next/coro.c" "return a + b;" "return (int)((unsigned)a + (unsigned)b);"
lesson ch02_next "Fixed: add() no longer overflows."
lesson ch03_last "Only the timers: pick()."
run --check
expect_status 1 "fix not carried"
expect_line "^ok +ch01_base -> ch02_next" "ch01 -> ch02 holds"
expect_line "^FAIL +ch02_next -> ch03_last" "ch02 -> ch03 fails"
expect_line "$(unnamed changed add coro.c)" "names add"
cp "$repo/ch02_next/coro.c" "$repo/ch03_last/coro.c"
run --check
expect_status 0 "fix carried into ch03"

# --------------------------------------------------------------------------
# (e) an added and a removed function are both caught
# --------------------------------------------------------------------------

case_ e_added_removed
chapter ch01_base
chapter ch02_next
cat > "$repo/ch02_next/timer.c" <<'EOF'
#include "coro.h"

int coro_sleep(unsigned long ns)
{
    return ns ? 0 : 22;
}
EOF
edit "$repo/ch02_next/coro.c" "int last_one(void)
{
    return 0;
} /* trailing */" ""
lesson ch02_next "Nothing yet."
run --check
expect_status 1 "added and removed, not named"
expect_line "$(unnamed added coro_sleep timer.c)" "names the added coro_sleep"
expect_line "$(unnamed removed last_one coro.c)" "names the removed last_one"
expect_line "^ +removed .* ch01_base/coro.c:[0-9]+$" "a removal points into the old chapter"
lesson ch02_next "New: coro_sleep. Gone: last_one."
run --check
expect_status 0 "added and removed, named"

# --------------------------------------------------------------------------
# (f) a static function, an example and an assembly global label are caught
# --------------------------------------------------------------------------

case_ f_kinds
chapter ch01_base
chapter ch02_next
edit "$repo/ch02_next/coro.c" "return '}';" "return '{';"
edit "$repo/ch02_next/examples/hello.c" "puts(arg);" "puts((const char *)arg);"
edit "$repo/ch02_next/switch_x86_64.S" "    pushq %rbx" "    pushq %rbx      /* saved */"
edit "$repo/ch02_next/switch_x86_64.S" "    jmp local_label" "    jmp local_label  // again"
lesson ch02_next "Nothing yet."
run --check
expect_status 1 "static, example, assembly"
expect_line "$(unnamed changed weird_layout coro.c)" "static inline weird_layout"
expect_line "$(unnamed example hello.c examples/hello.c)" "an example: its file, not its function"
expect_line "$(unnamed changed coro_switch switch_x86_64.S)" "global label coro_switch"
expect_line "$(unnamed changed coro_trampoline switch_x86_64.S)" "a local label is inside coro_trampoline"
expect_line "4 function\(s\) or example file\(s\) differ" "nothing else"

case_ f_examples
chapter ch01_base
chapter ch02_next
edit "$repo/ch02_next/examples/hello.c" "puts(arg);" "puts((const char *)arg);"
edit "$repo/ch02_next/examples/hello.c" "return hello(" "return 0 * !hello(" 
lesson ch02_next "Examples: hello() and main() changed."
run --check
expect_status 1 "an example's functions named, but not its file"
expect_line "$(unnamed example hello.c examples/hello.c)" "asks for the file"
expect_line "1 function\(s\) or example file\(s\) differ" "once per file, not per function"
lesson ch02_next "Examples: \`hello.c\` prints its argument as a string."
run --check
expect_status 0 "the example's file named"
printf 'int extra(void)\n{\n    return 1;\n}\n' > "$repo/ch02_next/examples/extra.c"
run --check
expect_status 1 "a new example file, not named"
expect_line "$(unnamed example extra.c examples/extra.c)" "the new file"
expect_no_line "hello" "the named file is not reported"

case_ f_asm_outside
chapter ch01_base
chapter ch02_next
edit "$repo/ch02_next/switch_x86_64.S" "part of no body" "in no function"
run --check
expect_status 0 "a comment after .size belongs to no function"

# --------------------------------------------------------------------------
# (g) tricky C: the exact list of functions, and changes stay where they are
# --------------------------------------------------------------------------

case_ g_tricky
chapter ch01_base
run --list ch01_base
if [[ "$out" == "$(cat "$tools/testdata/base.functions")" ]]; then
  pass "--list finds exactly the functions in testdata/base.functions"
else
  fail "--list differs from testdata/base.functions:"
  diff <(echo "$out") "$tools/testdata/base.functions"
fi

# Changes outside every function: strings with braces, initialisers,
# typedefs, macros, comments, trailing whitespace. None is a function change.
chapter ch02_next
f="$repo/ch02_next/coro.c"
edit "$f" '"}{ \" } int not_a_function(void) {"' '"}{ \" } int not_a_function(void) { {"'
edit "$f" "{ 3, 4 }," "{ 3, 5 },"
edit "$f" "typedef int (*table_fn)(int, int);" "typedef int (*table_fn)(int a, int b);"
edit "$f" "return value;            \\" "return value + 1;        \\"
edit "$f" "/* A comment between functions belongs to neither. } */" "/* Changed. { */"
edit "$f" "    return a + b;" "    return a + b;    "
edit "$repo/ch02_next/coro.h" "#define coro_not_a_function(c) { (c); }" \
                                "#define coro_not_a_function(c) { (void)(c); }"
run --check
expect_status 0 "changes outside functions are not function changes"

# One change inside each of the functions after the traps: only they report.
edit "$f" "generated(), brace_char" "generated() + 1, brace_char"
edit "$f" "    return 0;
} /* trailing */" "    return 1;
} /* trailing */"
edit "$f" "struct point p = { 1, 2 };" "struct point p = { 2, 1 };"
edit "$f" "(void)corners; (void)scratch;" "(void)corners; /* a comment */ (void)scratch;"
edit "$repo/ch02_next/coro.h" "return s == CORO_DONE;" "return CORO_DONE == s;"
lesson ch02_next "after_macro_call, last_one, pick."
run --check
expect_status 1 "changes inside functions"
expect_line "$(unnamed changed by_value coro.c)" "by_value (a struct returned by value)"
expect_line "$(unnamed changed coro_is_done coro.h)" "coro_is_done (inside extern \"C\")"
expect_line "2 function\(s\) or example file\(s\) differ" "no neighbour is blamed"

# --------------------------------------------------------------------------
# (h) the diff mode prints the changed line
# --------------------------------------------------------------------------

case_ h_diff
chapter ch01_base
chapter ch02_next
run ch01_base ch02_next
expect_status 0 "identical chapters: no diff"
[[ -z "$out" ]] && pass "and no output" || fail "unexpected output: $out"
edit "$repo/ch02_next/coro.c" "return a + b;" "return b + a;"
echo "new file" > "$repo/ch02_next/NEWS"
run ch01_base ch02_next
expect_status 1 "chapters differ"
expect_line "^--- ch01_base/coro.c$" "old file header"
expect_line "^\+\+\+ ch02_next/coro.c$" "new file header"
expect_line "^-    return a \+ b;$" "the old line"
expect_line "^\+    return b \+ a;$" "the new line"
expect_line "^NEWS: new file, \+1 line; see --all$" "a file only in one chapter"
run --raw ch01_base ch02_next
expect_status 1 "--raw: chapters differ"
expect_line "^diff -ru ch01_base/coro.c ch02_next/coro.c$" "--raw: diff's own header"
expect_line "^-    return a \+ b;$" "--raw: the old line"
expect_line "^Only in ch02_next: NEWS$" "--raw: a file only in one chapter, as diff says it"
run ch01 ch02                            # unique prefixes work too
expect_status 1 "chapters named by prefix"
run ch01_base ch09_missing
expect_status 2 "a missing chapter"
run --all --check
expect_status 2 "--all is for the diff, not --check"

# --------------------------------------------------------------------------
# (i) the diff comes concept first: file list, new library files whole (in
#     reading order), changed code, examples, one line per other file
# --------------------------------------------------------------------------

case_ i_concept
chapter ch01_base
chapter ch02_next
n="$repo/ch02_next"
printf 'line one\nline two\nline three\nline four\n' > "$repo/ch01_base/BUILD.old"
edit "$n/coro.c" "return a + b;" "return b + a;"
printf 'int alarm_set(int when)\n{\n    return when;\n}\n' > "$n/alarm.c"
printf 'int timer_add(int when)\n{\n    return when + 1;\n}\n' > "$n/timer.c"
printf '/* timer.h */\nint timer_add(int when);\n' > "$n/timer.h"
rm "$n/switch_x86_64.S"
printf 'int main(void)\n{\n    return 0;\n}\n' > "$n/examples/tick.c"
printf 'int main(void)\n{\n    return 1;\n}\n' > "$n/examples/tock.c"
printf 'cc_library(name = "coro")\n' > "$n/BUILD"
mkdir -p "$n/models" "$n/notes"
printf 'active proctype p() { skip }\n' > "$n/models/m.pml"
printf '# A note\n\nAbout timers.\n' > "$n/notes/n.md"
for chapter_dir in "$repo/ch01_base" "$n"; do
  printf 'a\nb\nc\nd\n' > "$chapter_dir/examples/BUILD"
done
edit "$n/examples/BUILD" "c" "C"
# The lesson names tick.c first, but runs tock first; timer.c before alarm.c.
cat > "$n/README.md" <<'EOF'
# Chapter 2 — a fixture lesson

The timers live in `timer.c` (woken by `tick.c`); alarms, in `alarm.c`.

    ./tools/bazelw run //ch02_next/examples:tock
    ./tools/bazelw run //ch02_next/examples:tick

### What changed since chapter 1

add(), alarm_set(), timer_add(); `tick.c` and `tock.c`: new.
EOF
run ch01_base ch02_next
expect_status 1 "chapters differ"
expect_line "^ch01_base -> ch02_next: 13 files differ, \+[0-9]+ -[0-9]+ lines$" "a header line first"
[[ "$(head -1 <<<"$out")" == "ch01_base -> ch02_next: "* ]] \
  && pass "the header is the first line" || fail "the first line: $(head -1 <<<"$out")"
expect_order "the file list, grouped, before every diff" \
  "^Library code$" "^  timer\.h +new +\+2$" "^  timer\.c +new +\+4$" \
  "^  alarm\.c +new +\+4$" "^  coro\.c +\+1 +-1$" \
  "^  switch_x86_64\.S +removed +-27$" \
  "^Examples$" "^  examples/tock\.c +new +\+4$" "^  examples/tick\.c +new +\+4$" \
  "^Lesson, notes, models, tests and build files$" "^  BUILD +new +\+1$" \
  "^  BUILD\.old +removed +-4$" "^  README\.md +\+[0-9]+ +-[345]$" \
  "^  examples/BUILD +\+1 +-1$" "^  models/m\.pml +new +\+1$" \
  "^  notes/n\.md +new +\+3$" "^==== " "^diff "
expect_order "new library files whole, headers first, then as the lesson names them" \
  "^==== New library files" \
  "^diff -ruN ch01_base/timer\.h ch02_next/timer\.h$" "^--- /dev/null$" \
  "^\+\+\+ ch02_next/timer\.h$" "^@@ -0,0 \+1,2 @@$" "^\+/\* timer\.h \*/$" \
  "^\+int timer_add\(int when\);$" \
  "^\+\+\+ ch02_next/timer\.c$" "^\+    return when \+ 1;$" \
  "^\+\+\+ ch02_next/alarm\.c$" "^\+    return when;$"
expect_order "then the changed library code, then the examples" \
  "^\+\+\+ ch02_next/alarm\.c$" "^==== Changed library code ====$" \
  "^diff -ru ch01_base/coro\.c ch02_next/coro\.c$" "^\+    return b \+ a;$" \
  "^--- ch01_base/switch_x86_64\.S$" "^\+\+\+ /dev/null$" \
  "^==== Examples ====$" "^\+\+\+ ch02_next/examples/tock\.c$" \
  "^\+\+\+ ch02_next/examples/tick\.c$" "^==== Lesson, notes"
expect_order "then one line per other file, in path order" \
  "^==== Lesson, notes, models, tests and build files \(one line each; --all prints them\) ====$" \
  "^BUILD: new build file, \+1 line; see --all$" \
  "^BUILD\.old: file removed, -4 lines; see --all$" \
  "^README\.md: lesson rewritten, \+[0-9]+ -[345] lines; see --all$" \
  "^examples/BUILD: build file changed, \+1 -1 lines; see --all$" \
  "^models/m\.pml: new model, \+1 line; see --all$" \
  "^notes/n\.md: new note, \+3 lines; see --all$"
expect_no_line "^\+\+\+ ch02_next/(README\.md|BUILD|models/m\.pml|notes/n\.md)$" \
  "without --all, the other files are not shown"
expect_no_line "^\+### What changed" "nor the lesson's text"

run --all ch01_base ch02_next
expect_status 1 "--all: chapters differ"
expect_order "--all: the same order, the other files in full at the end" \
  "^Library code$" "^==== New library files" "^==== Changed library code" \
  "^==== Examples ====$" \
  "^==== Lesson, notes, models, tests and build files ====$" \
  "^\+\+\+ ch02_next/BUILD$" "^\+cc_library\(name = \"coro\"\)$" \
  "^--- ch01_base/BUILD\.old$" \
  "^\+\+\+ ch02_next/README\.md$" "^-Nothing: this is the first chapter\.$" \
  "^\+### What changed since chapter 1$" "^\+\+\+ ch02_next/examples/BUILD$" "^\+C$" \
  "^\+\+\+ ch02_next/models/m\.pml$" "^\+\+\+ ch02_next/notes/n\.md$" \
  "^\+About timers\.$"
expect_no_line "see --all" "--all: no summary lines"

run --raw ch01_base ch02_next
expect_status 1 "--raw: chapters differ"
expect_line "^Only in ch02_next: timer\.c$" "--raw: a new file, as diff says it"
expect_line "^Only in ch02_next: models$" "--raw: a new directory, as diff says it"
expect_no_line "^==== " "--raw: no sections"

# A binary file is listed and named, never printed.
printf 'a\0b' > "$n/blob.bin"
run ch01_base ch02_next
expect_line "^  blob\.bin +new +binary$" "a binary file in the list"
expect_line "^blob\.bin: new file \(binary\)$" "and its one line"
run --all ch01_base ch02_next
expect_line "^Binary files ch01_base/blob\.bin and ch02_next/blob\.bin differ$" \
  "--all: diff's line for a binary file"

# --------------------------------------------------------------------------
# (z) a failure caused by edits git does not know says so, and how to move
#     them to a lab copy; a failure of committed code has no such note
# --------------------------------------------------------------------------

case_ z_local_edits
chapter ch01_base
chapter ch02_next
lesson ch02_next "Nothing changed."
if git -C "$repo" init -q && git -C "$repo" add -A &&
   git -C "$repo" -c user.name=t -c user.email=t@t commit -qm base; then
  edit "$repo/ch02_next/coro.c" "return a + b;" "return b + a;"
  run --check
  expect_status 1 "an edit in a chapter's own directory"
  expect_line "^note: these chapters have edits that are not the course's" \
    "the report tells local edits apart"
  expect_line "^ +M ch02_next/coro\.c$" "and names the edited file"
  expect_line "tools/lab start ch02 \(a lab\)" "and points to a lab copy"
  expect_line "git checkout -- ch02_next$" "and says how to put it back"
  git -C "$repo" -c user.name=t -c user.email=t@t commit -qam edit
  run --check
  expect_status 1 "the same change, committed"
  expect_no_line "^note: " "no note for the course's own code"
else
  fail "could not make a git repository in $repo"
fi

# --------------------------------------------------------------------------

echo
if ((failures)); then
  echo "stage_diff_test: $failures check(s) failed"
  exit 1
fi
echo "stage_diff_test: all checks passed"
