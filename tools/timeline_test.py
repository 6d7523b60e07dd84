#!/usr/bin/env python3
"""timeline_test — tools/timeline on traces whose picture is known.

Run by `bazel test //tools:timeline_test`, or by hand:
tools/timeline_test.py. Each case writes a trace (or uses
testdata/timeline/two_threads.json), draws it, parses the SVG as XML and
checks what a reader must see: the lanes and their names, a bar per resume
in its coroutine's colour, the wake arrow from the waker's lane to the
wakee's, the timer mark, the axis; a long trace windowed with a note; a
trace whose first event is late drawn on the file's own clock (the axis,
the details and --window, --focus use its ts); a broken trace refused
with exit status 2.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "timeline")
FIXTURE = os.path.join(HERE, "testdata", "timeline", "two_threads.json")
SVG = "{http://www.w3.org/2000/svg}"
WORK = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
failures = []


def check(condition, what):
    print("%s  %s" % ("PASS" if condition else "FAIL", what))
    if not condition:
        failures.append(what)


def draw(trace_path, *options):
    out = os.path.join(WORK, os.path.basename(trace_path) + ".svg")
    result = subprocess.run([sys.executable, TOOL, trace_path, "-o", out]
                            + list(options), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    root = ET.parse(out).getroot() if result.returncode == 0 else None
    return result, root


def by_class(root, tag, cls):
    return [e for e in root.iter(SVG + tag)
            if cls in (e.get("class") or "").split()]


def texts(root):
    return [e.text or "" for e in root.iter(SVG + "text")]


def lane_centre(root, label):
    """The y of the middle of the lane whose label is `label`."""
    for e in by_class(root, "text", "lane-label"):
        if e.text == label:
            return float(e.get("y")) - 4
    return None


def two_threads():
    result, root = draw(FIXTURE, "--title", "two threads")
    check(result.returncode == 0, "the fixture is drawn (exit 0)")
    if root is None:
        print(result.stderr)
        return
    labels = [e.text for e in by_class(root, "text", "lane-label")]
    check(labels == ["scheduler 1 (main)", "scheduler 2 (worker)"],
          "one lane per thread, named by thread_name: %s" % labels)
    bars = by_class(root, "rect", "resume")
    check(len(bars) == 4, "a bar per resume, the B/E pair too: %d" % len(bars))
    fills = {}
    for bar in bars:
        title = bar.find(SVG + "title").text
        fills.setdefault(title.split(":")[0], set()).add(bar.get("fill"))
    check(len(fills) == 2 and all(len(f) == 1 for f in fills.values())
          and len(set.union(*fills.values())) == 2,
          "one colour per coroutine, different coroutines apart: %s" % fills)
    first = [b for b in bars if "at 0 µs" in b.find(SVG + "title").text]
    check(len(first) == 1 and "left=yielded" in first[0].find(SVG + "title").text,
          "a bar's title says how the resume left")
    arrows = by_class(root, "path", "arrow-wake")
    check(len(arrows) == 1, "the wake is one arrow")
    if arrows:
        numbers = [float(v) for v in re.findall(r"-?[\d.]+", arrows[0].get("d"))]
        x1, y1, x2, y2 = numbers
        check(abs(y1 - lane_centre(root, "scheduler 1 (main)")) < 1 and
              abs(y2 - lane_centre(root, "scheduler 2 (worker)")) < 1,
              "the arrow goes from the waker's lane to the wakee's")
        check(x2 > x1, "the arrow goes forward in time")
        check(arrows[0].get("marker-end") == "url(#arrow-wake)",
              "the arrow has its head at the wakee")
    check(len(by_class(root, "path", "timer")) == 1, "the timer fire is marked")
    check(len(by_class(root, "line", "mark")) == 1, "the go is a tick")
    ticks = [e.text for e in by_class(root, "text", "tick")]
    check(ticks[:3] == ["0", "20", "40"] and ticks[-1] == "120",
          "the axis counts µs on the trace's clock: %s" % ticks)
    check("time (µs)" in texts(root), "the axis says its unit")
    check(any("wake (arrow" in t for t in texts(root)) and
          any("timer fired" in t for t in texts(root)),
          "the legend explains the arrow and the mark")
    check("drawn" in result.stdout and "1 arrows" in result.stdout,
          "it says what it drew: %s" % result.stdout.strip())


def long_trace():
    events = [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1,
               "args": {"name": "scheduler 1"}}]
    for i in range(50000):
        events.append({"ph": "X", "name": "coro %d" % (i % 3 + 1), "pid": 1,
                       "tid": 1, "ts": i * 0.03, "dur": 0.02,
                       "args": {"id": i % 3 + 1}})
    path = os.path.join(WORK, "long.json")
    with open(path, "w") as f:
        json.dump({"traceEvents": events}, f)
    result, root = draw(path)
    check(result.returncode == 0, "a trace of 50,000 resumes is drawn")
    if root is None:
        return
    bars = by_class(root, "rect", "resume")
    check(0 < len(bars) <= 4000, "windowed: %d bars, not 50,000" % len(bars))
    widths = [float(b.get("width")) for b in bars]
    check(min(widths) >= 1.0, "every bar drawn is visible (>= 1 px)")
    notes = [e.text for e in by_class(root, "text", "note")]
    check(len(notes) == 1 and "of 50000 resumes" in notes[0],
          "a note says what part is shown: %s" % notes)
    result, root = draw(path, "--window", "0:1500", "--max-slices", "100000")
    merged = by_class(root, "rect", "merged") if root is not None else []
    check(result.returncode == 0 and merged and
          len(by_class(root, "rect", "resume")) == 0,
          "resumes too short to see become grey bars: %d" % len(merged))
    check(merged and "short resumes" in merged[0].find(SVG + "title").text,
          "a grey bar says how many resumes it holds")


def late_start():
    """A trace whose first event comes 30 ms after its start (ts 30,000):
    the picture starts at that event, but every number in it is the
    file's ts, so a reader can look an event up in the file, and give
    --window in the same numbers."""
    events = [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1,
               "args": {"name": "scheduler 1"}}]
    for i in range(8):
        events.append({"ph": "X", "name": "coro %d" % (i % 2 + 1), "pid": 1,
                       "tid": 1, "ts": 30000.125 + i * 0.5, "dur": 0.4,
                       "args": {"id": i % 2 + 1}})
    events.append({"ph": "i", "s": "t", "cat": "timer", "name": "timer",
                   "pid": 1, "tid": 1, "ts": 30002.0})
    path = os.path.join(WORK, "late.json")
    with open(path, "w") as f:
        json.dump({"traceEvents": events}, f)
    result, root = draw(path)
    check(result.returncode == 0, "a trace that starts late is drawn")
    if root is None:
        return
    ticks = [e.text for e in by_class(root, "text", "tick")]
    check(ticks and ticks[0].startswith("30,000.") and
          len(set(ticks)) == len(ticks),
          "its ticks are the file's ts, with the decimals they need: %s"
          % ticks)
    titles = [b.find(SVG + "title").text
              for b in by_class(root, "rect", "resume")]
    check(any("at 30,000.125 µs" in t for t in titles),
          "a bar's details give its ts as the file has it: %s" % titles[:1])
    result, root = draw(path, "--window", "30001:30002.5")
    bars = by_class(root, "rect", "resume") if root is not None else []
    check(result.returncode == 0 and 2 <= len(bars) <= 4,
          "--window takes the file's ts: %d bars in 30,001 to 30,002.5"
          % len(bars))
    result, root = draw(path, "--focus", "timer", "--span", "1")
    ticks = [e.text for e in by_class(root, "text", "tick")] if root else []
    check(result.returncode == 0 and
          any(t.startswith("30,002") for t in ticks),
          "--focus draws around the event, on the same clock: %s" % ticks)


def bad_input():
    path = os.path.join(WORK, "broken.json")
    with open(path, "w") as f:
        f.write('{"traceEvents": [')
    result, _ = draw(path)
    check(result.returncode == 2 and "is not JSON" in result.stderr,
          "a broken file is refused, exit 2: %s" % result.stderr.strip())
    with open(path, "w") as f:
        f.write('{"events": []}')
    result, _ = draw(path)
    check(result.returncode == 2 and "no list of trace events" in result.stderr,
          "JSON that is not a trace is refused, exit 2")
    with open(path, "w") as f:
        f.write('[{"ph": "X", "name": "c", "ts": "soon", "dur": 1}]')
    result, _ = draw(path)
    check(result.returncode == 2 and "'ts'" in result.stderr,
          "an event without a numeric ts is refused, naming the field")


two_threads()
long_trace()
late_start()
bad_input()
print()
if failures:
    print("timeline_test: %d check(s) failed" % len(failures))
    sys.exit(1)
print("timeline_test: all checks passed")
