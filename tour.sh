#!/usr/bin/env bash
# tour.sh — run every chapter's examples in order (see //:tour in BUILD).
#
# Arguments: --chapter DIR EXAMPLE... [--chapter DIR EXAMPLE...]...
# An EXAMPLE is a path, optionally followed by its arguments (one word).
# The heading of each chapter is the first line of its lesson.
set -euo pipefail

# One example: its path, then any arguments, in one word-split string.
run_example() {
  local -a command
  read -ra command <<<"$1"
  echo
  echo "\$ ${command[0]##*/}${command[1]:+ ${command[*]:1}}"
  "${command[@]}"
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
