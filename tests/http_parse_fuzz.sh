#!/usr/bin/env bash
# http_parse_fuzz.sh — build the HTTP parser's fuzz target with clang
# (libFuzzer, AddressSanitizer, UndefinedBehaviorSanitizer) and run it for
# a bounded time over a copy of the seed corpus. //tests:http_parse_fuzz.
#
#   http_parse_fuzz.sh [--mutant NAME] TARGET.c PARSER.c PARSER.h CORPUS_FILE...
#
# The number of seconds to fuzz is $FUZZ_SECONDS (default 20):
#
#   ./tools/bazelw test //tests:http_parse_fuzz --test_env=FUZZ_SECONDS=600 \
#       --test_timeout=900 --nocache_test_results
#
# With --mutant NAME, the parser is first broken on purpose (see mutate()
# below), the fuzzer starts from an empty corpus, and the test passes only
# if the fuzzer finds the bug: a check that cannot fail proves nothing.
#
# Bazel's C toolchain is gcc, and libFuzzer comes with clang, so this script
# calls clang itself (tools/bazelw installs clang-14 and its sanitizer
# runtimes, libclang-rt-14-dev). The sanitizer configurations of .bazelrc
# change nothing here: the test is tagged "nosan".
set -euo pipefail

mutant=""
if [[ ${1-} == --mutant ]]; then
  mutant=$2
  shift 2
fi
if (($# < 3)); then
  echo "usage: http_parse_fuzz.sh [--mutant NAME] TARGET.c PARSER.c PARSER.h CORPUS_FILE..." >&2
  exit 2
fi
target=$1 parser=$2 header=$3
shift 3
seconds=${FUZZ_SECONDS:-20}

CLANG=""
for candidate in clang-14 clang; do
  if command -v "$candidate" >/dev/null 2>&1; then
    CLANG=$candidate
    break
  fi
done
if [[ -z $CLANG ]]; then
  echo "http_parse_fuzz: clang not found (Debian: apt-get install clang-14 libclang-rt-14-dev)" >&2
  exit 1
fi

# Under `bazel test` the work goes in the test's own temporary directory;
# under `bazel run` (or by hand) in a new one, kept, so that a crashing
# input can be looked at afterwards.
if [[ -n ${TEST_TMPDIR-} ]]; then
  work=$TEST_TMPDIR/fuzz
  rm -rf "$work"
else
  work=$(mktemp -d /tmp/http_parse_fuzz.XXXXXX)
fi
mkdir -p "$work/src" "$work/corpus"
# A crashing input is kept where Bazel keeps a test's outputs
# (bazel-testlogs/tests/http_parse_fuzz/test.outputs/).
artifacts=${TEST_UNDECLARED_OUTPUTS_DIR:-$work}
mkdir -p "$artifacts"

# The sources are copied so that the parser's header sits beside the
# parser, and so that a mutant can be made of the copy.
cp "$target" "$work/src/fuzz.c"
cp "$parser" "$work/src/http_parse.c"
cp "$header" "$work/src/http_parse.h"

# Each mutant is a one-line change of http_parse.c, made with sed. If the
# line is no longer there (the parser was edited), the test says so instead
# of passing or failing for the wrong reason.
#   overread   http_line_end() looks at p[1] when only p[0] is left: a
#              one-byte read beyond the buffer (AddressSanitizer's catch).
#   long_head  http_head_length() counts one byte more than the head: a
#              head that ends past its empty line, or past the buffer (the
#              target's checks catch it).
expect=""
mutate() {
  local from=$1 to=$2
  if ! grep -qF -- "$from" "$work/src/http_parse.c"; then
    echo "http_parse_fuzz: mutant $mutant: the line to change is gone from http_parse.c:" >&2
    echo "    $from" >&2
    echo "http_parse_fuzz: update the mutant in tests/http_parse_fuzz.sh" >&2
    exit 1
  fi
  # Fixed strings: escape what sed would read as a pattern.
  local from_re to_re
  from_re=$(printf '%s' "$from" | sed 's/[][\.*^$/&]/\\&/g')
  to_re=$(printf '%s' "$to" | sed 's/[\/&]/\\&/g')
  sed -i "s/$from_re/$to_re/" "$work/src/http_parse.c"
}
case $mutant in
  "") ;;
  overread)
    mutate "if (p + 1 < end && p[0] == '\\r' && p[1] == '\\n') {" \
           "if (p < end && p[0] == '\\r' && p[1] == '\\n') {"
    expect="heap-buffer-overflow"
    ;;
  long_head)
    mutate "return (size_t)(p - buf) + blank;" \
           "return (size_t)(p - buf) + blank + 1;"
    expect="http_parse_fuzz: check failed"
    ;;
  *)
    echo "http_parse_fuzz: unknown mutant '$mutant'" >&2
    exit 2
    ;;
esac

# -fsanitize=fuzzer gives both files libFuzzer's coverage instrumentation
# and links its main(); -fno-sanitize-recover=all makes any undefined
# behaviour fatal (by default UBSan prints it and goes on).
FLAGS=(-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
       -fno-omit-frame-pointer -std=c11 -Wall -Wextra)
echo "http_parse_fuzz: building with $CLANG${mutant:+ (mutant: $mutant)}"
"$CLANG" "${FLAGS[@]}" -Werror -c "$work/src/fuzz.c" -o "$work/fuzz.o"
"$CLANG" "${FLAGS[@]}" -c "$work/src/http_parse.c" -o "$work/http_parse.o"
"$CLANG" "${FLAGS[@]}" "$work/fuzz.o" "$work/http_parse.o" -o "$work/http_parse_fuzz"

# The fuzzer adds the inputs it finds to the first corpus directory: a
# copy, never the sources. A mutant starts from nothing, so that finding
# its bug is the fuzzer's work, not a seed's.
if [[ -z $mutant ]]; then
  cp "$@" "$work/corpus/"
fi

# -max_len: a little over the server's 8 KiB buffer. -timeout: one input
# taking over 10 s is a hang. -rss_limit_mb: the parser allocates nothing,
# so growing memory is a bug too. Leak checking stays on (the target frees
# its copies).
options=(-max_total_time="$seconds" -max_len=9000 -timeout=10
         -rss_limit_mb=1024 -print_final_stats=1
         -artifact_prefix="$artifacts/")
[[ -n $mutant ]] && options+=(-seed=1)
log=$work/fuzz.log
echo "http_parse_fuzz: fuzzing for $seconds s (corpus: $(ls "$work/corpus" | wc -l) seeds)"
set +e
(cd "$work" && UBSAN_OPTIONS=print_stacktrace=1 ./http_parse_fuzz "${options[@]}" corpus) >"$log" 2>&1
status=$?
set -e

# What a run did: libFuzzer's final statistics and its last status line.
summary() {
  grep -E '^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)' "$log" || true
  grep -E '^#[0-9]+' "$log" | tail -n 1 || true
  echo "http_parse_fuzz: corpus now $(ls "$work/corpus" | wc -l) inputs"
}

if [[ -z $mutant ]]; then
  if ((status != 0)); then
    cat "$log" >&2
    echo "http_parse_fuzz: FAILED: the fuzzer found an input that breaks the parser (above; kept in $artifacts)" >&2
    exit 1
  fi
  summary
  echo "http_parse_fuzz: PASS: no crash, no undefined behaviour, no failed check in $seconds s"
  exit 0
fi

# A mutant: the run must stop on the bug it carries.
if ((status != 0)) && grep -qF -- "$expect" "$log"; then
  grep -E 'ERROR: |check failed|SUMMARY: ' "$log" | head -n 3
  grep -E '^#[0-9]+' "$log" | tail -n 1 || true
  echo "http_parse_fuzz: PASS: mutant $mutant caught (\"$expect\")"
  exit 0
fi
cat "$log" >&2
echo "http_parse_fuzz: FAILED: mutant $mutant not caught in $seconds s (expected \"$expect\")" >&2
exit 1
