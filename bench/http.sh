#!/usr/bin/env bash
# //bench:http — the capstone HTTP server (ch05_shutdown/examples/
# http_server) against nginx with one worker, under wrk, in the same run:
# req/s, p50 and p99 latency, CPU time per request and threads, at wrk
# -t1 -c64 and -t2 -c256, rounds alternating between the two servers
# (bench/http_bench.py does the work). Extra arguments go to
# bench/http_bench.py, e.g.
# `./tools/bazelw run -c opt //bench:http -- --rounds 5 --seconds 10`.
set -euo pipefail

# Paths below are relative to the runfiles root. `bazel run` starts us
# there, and so does //bench:all (its runfiles hold the same paths). (The
# file looked for is a generated one: the source tree does not have it.)
if [[ ! -f bench/http_mode.txt ]]; then
  cd "${RUNFILES_DIR:-$0.runfiles}/coro_course"
fi

exec python3 bench/http_bench.py \
  --server ch05_shutdown/examples/http_server \
  --mode "$(cat bench/http_mode.txt)" \
  "$@"
