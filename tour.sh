#!/usr/bin/env bash
# tour.sh — run every chapter's examples in order (see //:tour in BUILD).
#
# Arguments: --chapter DIR EXAMPLE... [--chapter DIR EXAMPLE...]...
# The heading of each chapter is the first line of its lesson.
set -euo pipefail

run_example() {
  local path=$1
  echo
  echo "\$ ${path##*/}"
  "$path"
}

while (($#)); do
  if [[ $1 == --chapter ]]; then
    lesson="$2/README.md"
    echo
    echo "════════════════════════════════════════════════════════════════════"
    if [[ -f $lesson ]]; then
      head -n 1 "$lesson" | sed 's/^# *//'
    else
      echo "$2"
    fi
    echo "════════════════════════════════════════════════════════════════════"
    shift 2
  else
    run_example "$1"
    shift
  fi
done
echo
echo "Tour complete."
