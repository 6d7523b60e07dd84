#!/usr/bin/env bash
# lesson_lengths_fixture_test — tools/lesson_lengths.py bites: on made-up
# lessons it passes when they are even, and fails, naming the longest and
# the shortest lesson, when one is too long in words or in lines.
#
# By hand: tools/lesson_lengths_fixture_test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
work=${TEST_TMPDIR:-$(mktemp -d)}
tool=tools/lesson_lengths.py
python=python3
[[ -x /usr/bin/python3 ]] && python=/usr/bin/python3

# lesson DIR CHAPTER LINES WORDS_PER_LINE: a README.md of that shape.
lesson() {
  mkdir -p "$1/$2"
  local i
  for ((i = 0; i < $3; i++)); do
    printf 'word%.0s ' $(seq "$4"); echo
  done > "$1/$2/README.md"
}

failed=0
expect() {      # expect STATUS WHAT DIR [PATTERN...]: run, check status and output
  local want=$1 what=$2 dir=$3 status=0 pattern
  shift 3
  "$python" "$tool" --root "$dir" > "$work/out" 2>&1 || status=$?
  if [[ $status != "$want" ]]; then
    cat "$work/out"
    echo "FAIL: $what: exit $status, expected $want" >&2
    failed=1
    return
  fi
  for pattern in "$@"; do
    if ! grep -q -- "$pattern" "$work/out"; then
      cat "$work/out"
      echo "FAIL: $what: no line matching '$pattern'" >&2
      failed=1
      return
    fi
  done
  echo "PASS: $what"
}

# Even lessons: 100 lines of 10 words against 120 of 10 (1.2x): ok.
lesson "$work/even" ch01_a 100 10
lesson "$work/even" ch02_b 120 10
expect 0 "lessons within 1.3x pass" "$work/even" "lesson_lengths: ok"

# One lesson 1.5x another in words and in lines: both named.
lesson "$work/long" ch01_a 100 10
lesson "$work/long" ch02_b 150 10
lesson "$work/long" ch03_c 110 10
expect 1 "a lesson 1.5x another fails" "$work/long" \
  "FAIL in words: the longest lesson, ch02_b/README.md (1500 words), is 1.50x the shortest, ch01_a/README.md (1000 words)" \
  "FAIL in lines: the longest lesson, ch02_b/README.md (150 lines), is 1.50x the shortest, ch01_a/README.md (100 lines)"

# The same words, but one lesson has 1.4x the lines (shorter lines):
# the line count alone fails it.
lesson "$work/lines" ch01_a 100 14
lesson "$work/lines" ch02_b 140 10
expect 1 "a lesson with 1.4x the lines fails on lines only" "$work/lines" \
  "words: longest / shortest = 1400 / 1400 = 1.00" \
  "FAIL in lines: the longest lesson, ch02_b/README.md (140 lines), is 1.40x the shortest, ch01_a/README.md (100 lines)"
if grep -q "FAIL in words" "$work/out"; then
  echo "FAIL: equal word counts reported as too long" >&2
  failed=1
fi

exit $failed
