#!/usr/bin/env python3
"""trace_test — the examples' traces, as a viewer reads them.

Run by `bazel test //tests:trace_test`, which passes the examples it
runs (built in the test's configuration: under --config=asan, ubsan or
tsan they carry the sanitizer):

    trace_test.py --timeline PATH --pool-parallel PATH
                  --interleave CHAPTER=PATH [--interleave CHAPTER=PATH ...]

Each case runs an example with CORO_TRACE set, as a user would, and
checks the file with Python's own JSON parser:

  - every event has the fields Perfetto's JSON importer needs for its
    phase (ph, name, pid, tid; ts for all but metadata; dur for "X"; id
    for the "s"/"f" ends of an arrow; the scope "s" of an "i" instant;
    args.name for "M"), with times that are numbers >= 0;
  - interleave (each chapter 2 to 5): three gos, then the resumes A B C
    round-robin on one lane, each coroutine's last one "finished", the
    others "yielded"; the output is the same as without a trace;
  - pool_parallel (chapter 4): the resumes are on both workers' lanes
    (slice 0 blocks its worker for 100 ms, so the other takes the rest),
    every coroutine stays on one, and tools/timeline draws both lanes
    with bars;
  - a CORO_TRACE that cannot be opened or written: the one-line report
    on stderr, and the example still runs as usual and exits 0.

The gtest group scheduler.Trace (tests/scheduler_test.cc) checks the
API: its error codes, and what a trace holds, event by event.
"""

import argparse
import json
import numbers
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
failures = []


def check(condition, what):
    print("%s  %s" % ("PASS" if condition else "FAIL", what))
    if not condition:
        failures.append(what)
    return condition


def run(program, trace=None):
    """Runs `program` (with CORO_TRACE=trace, if given): the result."""
    env = dict(os.environ)
    env.pop("CORO_TRACE", None)
    if trace is not None:
        env["CORO_TRACE"] = trace
    return subprocess.run([program], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=120)


def is_time(value):
    return (isinstance(value, numbers.Real) and not isinstance(value, bool)
            and value >= 0)


def field_problems(event):
    """What Perfetto's JSON importer would miss in `event`, by its phase."""
    problems = []
    ph = event.get("ph")
    if ph not in ("M", "X", "i", "s", "f"):
        return ["an unknown phase %r" % ph]
    if not isinstance(event.get("name"), str):
        problems.append("no name")
    for key in ("pid", "tid"):
        if not isinstance(event.get(key), int) or isinstance(event.get(key), bool):
            problems.append("no integer %s" % key)
    if ph == "M":
        args = event.get("args")
        if event.get("name") not in ("process_name", "thread_name"):
            problems.append("metadata %r" % event.get("name"))
        if not isinstance(args, dict) or not isinstance(args.get("name"), str):
            problems.append("no args.name")
        return problems
    if not is_time(event.get("ts")):
        problems.append("no ts >= 0")
    if ph == "X" and not is_time(event.get("dur")):
        problems.append("no dur >= 0")
    if ph in ("s", "f") and not isinstance(event.get("id"), (int, str)):
        problems.append("no id")
    if ph == "f" and event.get("bp") not in (None, "e"):
        problems.append("a binding point %r" % event.get("bp"))
    if ph == "i" and event.get("s") not in ("g", "p", "t"):
        problems.append("no scope s")
    if "args" in event and not isinstance(event["args"], dict):
        problems.append("args not an object")
    return problems


def load(path, what):
    """The trace in `path`, checked as a whole and event by event; None
    if it cannot be read."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        check(False, "%s: the trace is JSON (%s)" % (what, e))
        return None
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not check(isinstance(events, list) and events,
                 "%s: the trace is an object with a list of events" % what):
        return None
    check(doc.get("displayTimeUnit") == "ns"
          and doc.get("otherData", {}).get("dropped_events") == 0,
          "%s: displayTimeUnit ns, no event dropped: %s"
          % (what, {k: v for k, v in doc.items() if k != "traceEvents"}))
    bad = [(e, p) for e in events for p in [field_problems(e)] if p]
    check(not bad, "%s: every event of %d has its phase's fields%s"
          % (what, len(events), ": %s" % bad[:3] if bad else ""))
    pids = {e.get("pid") for e in events}
    check(len(pids) == 1, "%s: one process: %s" % (what, pids))
    check(events[0].get("ph") == "M" and events[0].get("name") == "process_name",
          "%s: the process's name comes first" % what)
    named = [e.get("tid") for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"]
    used = {e.get("tid") for e in events if e.get("ph") != "M"}
    check(len(named) == len(set(named)) and used <= set(named),
          "%s: every lane is named, once: %s for %s" % (what, named, sorted(used)))
    return events


def resumes(events):
    """The resumes ("X" of cat resume), in time order per lane:
    {tid: [event, ...]}."""
    lanes = {}
    for e in sorted((e for e in events
                     if e.get("ph") == "X" and e.get("cat") == "resume"),
                    key=lambda e: e["ts"]):
        lanes.setdefault(e["tid"], []).append(e)
    return lanes


def take_turns(slices):
    """Whether slices of one lane (in time order) never overlap (to the
    nanosecond: the times have three decimals)."""
    ends = [round((e["ts"] + e["dur"]) * 1000) for e in slices]
    starts = [round(e["ts"] * 1000) for e in slices]
    return all(starts[i] >= ends[i - 1] for i in range(1, len(slices)))


def interleave(chapter, program, work):
    what = "%s interleave" % chapter
    plain = run(program)
    trace = os.path.join(work, chapter + "_interleave.json")
    traced = run(program, trace)
    check(plain.returncode == 0 and traced.returncode == 0,
          "%s: exits 0 with and without a trace (%d, %d)"
          % (what, plain.returncode, traced.returncode))
    check(traced.stdout == plain.stdout and "A: step 1" in plain.stdout,
          "%s: the same output with a trace" % what)
    check(traced.stderr == "", "%s: nothing on stderr: %r" % (what, traced.stderr))
    events = load(trace, what)
    if events is None:
        return
    lanes = resumes(events)
    if not check(len(lanes) == 1, "%s: one lane: %s" % (what, sorted(lanes))):
        return
    (tid, slices), = lanes.items()
    order = [(e["name"], e["args"]["left"]) for e in slices]
    expected = ([(n, "yielded") for n in "ABC"] * 3 +
                [(n, "finished") for n in "ABC"])
    check(order == expected, "%s: resumes A B C in turn, then each finishes: %s"
          % (what, " ".join("%s:%s" % o for o in order)))
    check(take_turns(slices), "%s: the slices of the lane take turns" % what)
    gos = [e for e in events if e.get("ph") == "i" and e.get("name") == "go"]
    ids = {e["name"]: e["args"]["id"] for e in slices}
    check([e["args"]["coroutine"] for e in gos] == [ids.get(n) for n in "ABC"]
          and all(e["ts"] <= slices[0]["ts"] for e in gos),
          "%s: three gos, A B C, before the first resume" % what)
    check(events[0]["args"]["name"] == "interleave",
          "%s: the process is named after the program" % what)


def pool_parallel(program, timeline, work):
    what = "ch04 pool_parallel"
    trace = os.path.join(work, "pool_parallel.json")
    result = run(program, trace)
    check(result.returncode == 0 and "primes below 1000000: 78498" in result.stdout,
          "%s: exits 0 with its count of primes (%d)" % (what, result.returncode))
    check(result.stderr == "", "%s: nothing on stderr: %r" % (what, result.stderr))
    events = load(trace, what)
    if events is None:
        return
    lanes = resumes(events)
    check(len(lanes) >= 2, "%s: resumes on %d threads (2 workers)" % (what, len(lanes)))
    lane_of = {}
    for tid, slices in lanes.items():
        check(take_turns(slices), "%s: the slices of lane %d take turns" % (what, tid))
        for e in slices:
            lane_of.setdefault(e["args"]["id"], set()).add(tid)
    check(len(lane_of) == 8 and all(len(t) == 1 for t in lane_of.values()),
          "%s: 8 coroutines, each on one thread only: %s" % (what, lane_of))
    finished = [e["args"]["id"] for s in lanes.values() for e in s
                if e["args"]["left"] == "finished"]
    check(sorted(finished) == sorted(lane_of),
          "%s: each coroutine finished once" % what)

    # The picture: a lane per thread named in the trace (the main thread
    # has one too when it posted to the workers: the arrows start there);
    # every lane that has resumes has bars.
    named = {e["tid"] for e in events if e.get("ph") == "M" and e["tid"] != 0}
    svg = os.path.join(work, "pool_parallel.svg")
    drawn = subprocess.run([sys.executable, timeline, trace, "-o", svg],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    check(drawn.returncode == 0 and drawn.stdout.startswith(
        "timeline: %d lanes, " % len(named)),
        "%s: tools/timeline draws it: %s" % (what, drawn.stdout.strip() or drawn.stderr))
    if drawn.returncode != 0:
        return
    root = ET.parse(svg).getroot()
    labels = [e for e in root.iter(SVG + "text")
              if "lane-label" in (e.get("class") or "").split()]
    bars = [e for e in root.iter(SVG + "rect")
            if (e.get("class") or "") in ("resume", "merged")]
    per_lane = []
    for label in labels:
        centre = float(label.get("y")) - 4
        per_lane.append(sum(
            1 for b in bars
            if abs(float(b.get("y")) + float(b.get("height")) / 2 - centre) < 1))
    check(len(labels) == len(named) and
          sum(1 for n in per_lane if n > 0) == len(lanes) >= 2,
          "%s: both workers' lanes have bars (bars per lane: %s)" % (what, per_lane))


def unwritable(chapter, program, work):
    """A CORO_TRACE that cannot be opened (a missing directory, a
    directory) or written (/dev/full): one line on stderr, the program as
    usual."""
    what = "%s interleave" % chapter
    plain = run(program)
    directory = os.path.join(work, "a_directory")
    os.makedirs(directory, exist_ok=True)
    cases = [
        (os.path.join(work, "missing", "trace.json"),
         "coro trace: cannot open CORO_TRACE=%s: No such file or directory; "
         "not tracing\n"),
        (directory, "coro trace: cannot open CORO_TRACE=%s: Is a directory; "
                    "not tracing\n"),
    ]
    if os.access("/dev/full", os.W_OK):
        cases.append(("/dev/full", "coro trace: cannot write %s: No space left "
                                   "on device; recording stops\n"))
    for path, report in cases:
        result = run(program, path)
        check(result.returncode == 0 and result.stdout == plain.stdout,
              "%s, CORO_TRACE=%s: exits 0 with its usual output (%d)"
              % (what, path, result.returncode))
        check(result.stderr == report % path,
              "%s, CORO_TRACE=%s: the one-line report: %r"
              % (what, path, result.stderr))
    check(not os.path.exists(os.path.join(work, "missing")),
          "%s: no directory made for the trace" % what)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--timeline", required=True)
    parser.add_argument("--pool-parallel", required=True)
    parser.add_argument("--interleave", action="append", default=[],
                        metavar="CHAPTER=PATH")
    args = parser.parse_args()
    work = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
    examples = [item.split("=", 1) for item in args.interleave]
    check(len(examples) == 4, "interleave of chapters 2 to 5: %s"
          % [c for c, _ in examples])
    for chapter, program in examples:
        interleave(chapter, program, work)
    pool_parallel(args.pool_parallel, args.timeline, work)
    for chapter, program in examples:
        unwritable(chapter, program, work)
    if failures:
        print("\n%d check(s) failed:" % len(failures))
        for what in failures:
            print("  " + what)
        return 1
    print("\nall checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
