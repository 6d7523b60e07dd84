#!/usr/bin/env python3
"""The summary table of //bench:all: every target of the course, our
figure, the same-run baseline, the ratio, met or not.

    summary.py [--markdown] [--seconds S] [--load L]... DIR

DIR holds what bench/all.sh kept of each benchmark: NAME.log (its standard
output) and, for the runners built on bench/interleave.py, NAME.results
(one `result name=... median=...` line per binary, and one `ratio
name=A/B paired=...` line per ratio the runner computed). A ratio is the
runner's paired one where there is one: the median of the rounds' own
ratios (interleave.py says why). Rows whose benchmark
did not run say so. The targets are written here, once, beside the row
that measures them; a benchmark's own table also says met / NOT met for
the targets it knows. Standard library only.
"""

import argparse
import os
import re
import sys


# ── Reading what the benchmarks wrote ─────────────────────────────────────

def read(directory, name, suffix):
    path = os.path.join(directory, f"{name}.{suffix}")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return f.read()


def results(directory, name):
    """{binary name or "A/B": {field: value}} from NAME.results, or
    None."""
    text = read(directory, name, "results")
    if text is None:
        return None
    out = {}
    for line in text.splitlines():
        kind, *fields = line.split()
        if kind in ("result", "ratio"):
            row = dict(field.split("=", 1) for field in fields)
            out[row["name"]] = row
    return out


def median(res, name):
    if res is None or name not in res:
        return None
    return float(res[name]["median"])


def ratio(res, a, b):
    """a's time over b's: paired by round if the runner recorded the
    ratio ("a/b" or "b/a", of times or of rates: a ratio of rates is the
    inverse of the times'), else the ratio of the medians; None if either
    is missing."""
    if res is None:
        return None
    for name, inverse in ((f"{a}/{b}", False), (f"{b}/{a}", True)):
        if name in res:
            paired = float(res[name]["paired"])
            if res[name].get("of") == "rates":
                inverse = not inverse
            return 1 / paired if inverse else paired
    ours, base = median(res, a), median(res, b)
    if ours is None or base is None:
        return None
    return ours / base


def search(pattern, text, group=1, kind=float):
    """The first match of pattern in text (multi-line), converted; or None."""
    if text is None:
        return None
    match = re.search(pattern, text, re.MULTILINE)
    return kind(match.group(group)) if match else None


# ── Formatting ─────────────────────────────────────────────────────────────

def ns(value):
    """12.3 ns, 1.23 us, 12.3 us."""
    if value >= 10000:
        return f"{value / 1000:.1f} us"
    if value >= 1000:
        return f"{value / 1000:.2f} us"
    return f"{value:.3g} ns" if value < 100 else f"{value:.0f} ns"


def per_second(value_ns):
    rate = 1e9 / value_ns
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if rate >= scale:
            return f"{rate / scale:.3g}{suffix}/s"
    return f"{rate:.3g}/s"


def percent(value):
    return "< 0.001%" if value < 0.001 else f"{value:.3f}%"


def times(value):
    return f"{value:.2f}x" if value < 10 else f"{value:.0f}x"


class Row:
    """One line of the summary. `met` is True, False or None (not run).

    A row made with info=True has no target: it is shown for information
    ("info" in the result column) and never counted as met or missed."""

    def __init__(self, what, ours=None, base=None, ratio=None, target="",
                 met=None, base_label="", info=False, unresolved=False):
        self.what, self.ours, self.base = what, ours, base
        self.ratio, self.target, self.met = ratio, target, met
        self.base_label = base_label
        self.info = info
        # It ran, but its figure cannot be judged (a difference of two
        # noisy figures that came out at or below zero): neither met nor
        # missed.
        self.unresolved = unresolved
        if info:
            self.target = "(no target)"

    def cells(self):
        if self.met is None:
            return [self.what, "not run", "", "", self.target, "-"]
        base = self.base or "-"
        if self.base_label:
            base = f"{base} ({self.base_label})"
        if self.info:
            result = "info"
        elif self.unresolved:
            result = "unresolved"
        else:
            result = "met" if self.met else "MISSED"
        return [self.what, self.ours, base, self.ratio or "-", self.target,
                result]


def info_row(what, ours, base, ratio, base_label):
    """A row shown for information only (it ran: met is not None)."""
    return Row(what, ours, base, ratio, met=True, base_label=base_label,
               info=True)


def ratio_row(what, ours, base, target, base_label, r=None):
    """The usual row: ours / base against a target "<= X"; `target` is X.
    `r`: the ratio, if the runner paired it by round (ratio()); else
    ours / base. ours or base None: the benchmark did not run."""
    label = f"<= {target:g}x"
    if ours is None or base is None:
        return Row(what, target=label)
    if r is None:
        r = ours / base
    return Row(what, ns(ours), ns(base), times(r), label, r <= target,
               base_label)


# ── The rows ───────────────────────────────────────────────────────────────

def switch_rows(d):
    res = results(d, "switch")
    raw, boost = median(res, "raw_asm"), median(res, "boost")
    api, fiber = median(res, "asm"), median(res, "boost_fiber")
    ucontext = median(res, "raw_ucontext")
    rows = [
        ratio_row("coro_resume + coro_yield (ch01 asm) vs "
                  "boost::context::fiber", api, fiber, 1.0,
                  "fiber::resume ping-pong",
                  ratio(res, "asm", "boost_fiber")),
        ratio_row("raw switch (ch01 asm) vs Boost.Context", raw, boost, 1.0,
                  "Boost jump_fcontext", ratio(res, "raw_asm", "boost")),
    ]
    # Information only: the ucontext back-end's switch is glibc's
    # swapcontext, whose cost is its rt_sigprocmask system call, not this
    # code. (It was a target, ">= 100x faster", until the course retired
    # it.)
    what = "raw switch vs our ucontext back-end"
    if raw and ucontext:
        rows.append(info_row(what, ns(raw), ns(ucontext),
                             f"{ratio(res, 'raw_ucontext', 'raw_asm'):.1f}x "
                             "faster",
                             "ucontext switch"))
    else:
        rows.append(Row(what, info=True))
    return rows


def sched_rows(d):
    res = results(d, "sched")
    raw, yield1 = median(res, "raw_asm"), median(res, "yield1")
    yield_ch05 = median(res, "yield1_ch05")
    fiber_yield = median(res, "fiber_yield")
    go1, pthread = median(res, "go1"), median(res, "pthread")
    fiber_create = median(res, "fiber_create")
    rows = []
    # Information only (the old absolute "<= 20 ns" and "<= 4x the raw
    # switch" targets gave way to the ratios against Boost.Fiber).
    what = "scheduled yield (ch02) vs raw switch"
    if raw and yield1:
        rows.append(info_row(what, ns(yield1), ns(raw),
                             times(ratio(res, "yield1", "raw_asm")),
                             "raw switch"))
    else:
        rows.append(Row(what, info=True))
    rows.append(ratio_row("scheduled yield, ch05 vs ch02", yield_ch05,
                          yield1, 1.1, "ch02 scheduled yield",
                          ratio(res, "yield1_ch05", "yield1")))
    rows += trace_rows(d)
    # Information only: what recording costs the pump, per event (one
    # event per resume, and a yield is 2 switches: the figures are per
    # switch, so an event costs twice the difference).
    tracing = median(res, "yield1_tracing")
    what = "trace on: the pump's cost per event (ch02)"
    if tracing and yield1:
        rows.append(info_row(what, ns(tracing), ns(yield1),
                             f"+{2 * (tracing - yield1):.0f} ns per event",
                             "trace off"))
    else:
        rows.append(Row(what, info=True))
    rows.append(ratio_row("scheduled yield vs Boost.Fiber yield", yield1,
                          fiber_yield, 0.25, "this_fiber::yield",
                          ratio(res, "yield1", "fiber_yield")))
    # go + run + finish, cache warm (its old absolute target, "<= 40 ns",
    # gave way to the ratio against Boost.Fiber; the ns are in both rows).
    if go1 and pthread:
        r = pthread / go1
        rows.append(Row("go + run + finish vs pthread_create+join", ns(go1),
                        ns(pthread), f"{r:.0f}x faster", ">= 100x faster",
                        r >= 100, "pthread_create+join"))
    else:
        rows.append(Row("go + run + finish vs pthread_create+join",
                        target=">= 100x faster"))
    rows.append(ratio_row("go + run + finish vs Boost.Fiber create + join",
                          go1, fiber_create, 0.25, "fiber(fn) + join",
                          ratio(res, "go1", "fiber_create")))
    return rows


def trace_rows(d):
    """The trace (issue 34), compiled in and off against a build without
    it, paired round by round, on ch02's pump and on ch05's
    (//bench:trace, bench/trace.sh)."""
    res = results(d, "trace")
    rows = []
    for chapter, ours, base in (("ch02", "yield1", "yield1_untraced"),
                                ("ch05", "yield1_ch05",
                                 "yield1_untraced_ch05")):
        rows.append(ratio_row(f"scheduled yield, trace off vs none "
                              f"({chapter})", median(res, ours),
                              median(res, base), 1.02,
                              "built without the trace",
                              ratio(res, ours, base)))
    return rows


def sleepers_rows(d):
    """CPU time per sleeper, coro_sleep vs Boost.Fiber sleep_for."""
    res = results(d, "sleepers")
    rows = []
    for size, n, target in (("100k", 100000, None), ("1m", 1000000, 0.5)):
        ours = median(res, f"coro_{size}")
        fiber = median(res, f"fiber_{size}")
        what = f"sleepers ({n:,}): CPU per sleeper vs Boost.Fiber"
        if target is not None:
            rows.append(ratio_row(what, ours, fiber, target,
                                  "this_fiber::sleep_for",
                                  ratio(res, f"coro_{size}",
                                        f"fiber_{size}")))
        elif ours and fiber:
            rows.append(info_row(what, ns(ours), ns(fiber),
                                 times(ours / fiber),
                                 "this_fiber::sleep_for"))
        else:
            rows.append(Row(what, info=True))
    return rows


def live_rows(d):
    live = read(d, "live", "log")
    threads = read(d, "live_threads", "log")
    n = search(r"^Live coroutines: (\d+) suspended", live, kind=int)
    ours = search(r"suspended coroutine: ([\d.]+) KiB resident", live)
    base = search(r"blocked thread: ([\d.]+) KiB resident", threads)
    what = "live coroutines, resident KiB each"
    if n:
        what = f"{n:,} live coroutines, KiB resident each"
    if ours is None:
        return [Row(what, target="<= 4.5 KiB")]
    ratio = f"{ours / base:.2f}x" if base else None
    return [Row(what, f"{ours:.2f} KiB",
                f"{base:.2f} KiB" if base else None, ratio, "<= 4.5 KiB",
                ours <= 4.5, "blocked pthread" if base else "")]


def threads_rows(d):
    res = results(d, "threads")
    post, queue = median(res, "post"), median(res, "queue")
    wake, condvar = median(res, "wake"), median(res, "condvar")
    rows = []
    if post and queue:
        r = 1 / ratio(res, "post", "queue")  # throughput: ours / baseline
        rows.append(Row("cross-thread posts, 1 producer -> 1 pump",
                        per_second(post), per_second(queue),
                        f"{r:.2f}x throughput", ">= 2x throughput", r >= 2,
                        "mutex+condvar queue"))
    else:
        rows.append(Row("cross-thread posts, 1 producer -> 1 pump",
                        target=">= 2x throughput"))
    rows.append(ratio_row("cross-thread wake, ns per wake", wake, condvar,
                          1.0, "condvar ping-pong",
                          ratio(res, "wake", "condvar")))
    return rows


def timers_rows(d):
    """//bench:timers_quick (100,000 sleepers) and //bench:timers (a
    million), then the timer heap alone."""
    return (timers_rows_of(d, "timers_quick", 100000)
            + timers_rows_of(d, "timers", 1000000) + structure_rows(d))


def timers_rows_of(d, name, expected_n):
    """The rows of one run of bench/timers, kept as NAME.log."""
    log = read(d, name, "log")
    n = search(r"^Timers: (\d+) sleepers", log, kind=int)
    tag = f" ({n or expected_n:,})"
    if log is None or n is None:
        return [Row(f"timers{tag}: none fired early", target="0 early"),
                Row(f"timers{tag}: deadline order", target="0 out of order"),
                Row(f"timers{tag}: set + fire, CPU ns per timer",
                    target="<= 1x heap")]
    until_ok = search(r"until: none fired early: wake >= deadline for "
                      r"(\d+) of (\d+)", log, 1, int)
    until_all = search(r"until: none fired early: wake >= deadline for "
                       r"(\d+) of (\d+)", log, 2, int)
    sleep_early = search(r"sleep: none fired early: (\d+) provably early",
                         log, kind=int)
    sleep_all = search(r"sleep: none fired early: .* of (\d+)$", log,
                       kind=int)
    until_order = search(r"until: fired in deadline order.*: (\d+) out of "
                         r"order", log, kind=int)
    sleep_order = search(r"sleep: fired in deadline order: (\d+) woke "
                         r"after", log, kind=int)
    # The timer's own cost is a difference: sleep - the wake baseline, the
    # same coroutines parked and woken in deadline order by another
    # coroutine, so that they are resumed in the same order and touch the
    # same memory in the same order (sleep - yield, in creation order, is
    # shown beside it). A difference of two large, noisy figures; the
    # thread's CPU time leaves out the time other processes took the core,
    # so the row judges that, paired by round (the median of each round's
    # own difference). The heap baseline's CPU time is the last column of
    # its row.
    heap = search(r"^\s+binary heap push \+ pop.*\s([\d.]+)$", log)
    cost = search(r"^\s+CPU, sleep - wake in order: (-?[\d.]+) ns per "
                  r"timer", log)
    cost_yield = search(r"^\s+CPU, sleep - yield: (-?[\d.]+) ns per timer",
                        log)
    rows = []
    if None not in (until_ok, until_all, sleep_early, sleep_all):
        early = (until_all - until_ok) + sleep_early
        rows.append(Row(f"timers{tag}: none fired early",
                        f"{early} of {until_all + sleep_all:,}", None, None,
                        "0 early", early == 0))
    else:
        rows.append(Row(f"timers{tag}: none fired early", target="0 early"))
    if until_order is not None and sleep_order is not None:
        wrong = until_order + sleep_order
        rows.append(Row(f"timers{tag}: deadline order",
                        f"{wrong} out of order", None, None,
                        "0 out of order", wrong == 0))
    else:
        rows.append(Row(f"timers{tag}: deadline order",
                        target="0 out of order"))
    what = f"timers{tag}: set + fire, CPU ns per timer"
    if cost is not None and heap:
        ours = f"{cost:.0f} ns" + (f" (vs yield {cost_yield:.0f})"
                                   if cost_yield is not None else "")
        # A difference at or below zero says only that the noise was
        # larger than the timer's cost in this run: no verdict.
        rows.append(Row(what, ours, ns(heap),
                        times(cost / heap) if cost > 0 else "-",
                        "<= 1x heap", cost <= heap, "binary heap push+pop",
                        unresolved=cost <= 0))
    else:
        rows.append(Row(what, target="<= 1x heap"))
    return rows


def structure_rows(d):
    """The timer heap alone, at each N timers_structure ran (100,000 and
    1,000,000), against the binary heap."""
    log = read(d, "timers_structure", "log")
    found = re.findall(r"^\s+structure, (\d+) timers: ([\d.]+) ns per "
                       r"timer set \+ fire.*ours / binary heap: ([\d.]+)x",
                       log or "", re.MULTILINE)
    if not found:
        return [Row("timer heap alone: set + fire", target="<= 1x heap")]
    ok = "FAIL" not in log
    rows = []
    for n, ours, ratio in sorted(found, key=lambda f: int(f[0])):
        n, ours, ratio = int(n), float(ours), float(ratio)
        rows.append(Row(f"timer heap alone ({n:,}): set + fire", ns(ours),
                        ns(ours / ratio), times(ratio), "<= 1x heap",
                        ok and ratio <= 1.0, "binary heap push+pop"))
    return rows


IDLE_ROW = (r"^\s+{label}.*?\s(\d+\.\d{{3}})\s+(?:<\s*)?[\d.]+%")


def idle_rows(d):
    log = read(d, "threads", "log")
    seconds = search(r"^Idle pump: (\d+) s with nothing to do", log,
                     kind=int)
    run = search(IDLE_ROW.format(label=re.escape("coro_sched_run, 1 corou")),
                 log)
    poll = search(IDLE_ROW.format(label=re.escape("coro_sched_poll_for(")),
                  log)
    condvar = search(IDLE_ROW.format(label=re.escape("pthread_cond_wait")),
                     log)
    rows = []
    for what, ours in (("idle pump (parked coroutine), % of a core", run),
                       ("idle pump (poll_for 10 ms loop), % of a core",
                        poll)):
        if not seconds or ours is None:
            rows.append(Row(what, target="<= 1%"))
            continue
        wall_ms = seconds * 1000.0
        pct = 100 * ours / wall_ms
        base = None if condvar is None else 100 * condvar / wall_ms
        # CPU times of a few us are below what the ratio can say anything
        # about: only give it when both are at least 0.1 ms.
        ratio = (times(ours / condvar)
                 if condvar is not None and condvar >= 0.1 and ours >= 0.1
                 else "- (baseline ~0)")
        rows.append(Row(what.replace("idle pump", f"idle pump {seconds} s"),
                        percent(pct), None if base is None else
                        percent(base), ratio, "<= 1%", pct <= 1.0,
                        "pthread_cond_wait"))
    return rows


def micros(us):
    """850 us, 1.21 ms."""
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.0f} us"


def http_rows(d):
    """The capstone against nginx under wrk (bench/http_bench.py's results)."""
    res = results(d, "http")
    rows = []
    for setting, wrk in (("c64", "-t1 -c64"), ("c256", "-t2 -c256")):
        ours = (res or {}).get(f"capstone_{setting}")
        base = (res or {}).get(f"nginx_{setting}")
        what = f"HTTP req/s, wrk {wrk}"
        if ours and base:
            r = float(ours["rps"]) / float(base["rps"])
            rows.append(Row(what, f"{float(ours['rps']):,.0f}/s",
                            f"{float(base['rps']):,.0f}/s", times(r),
                            ">= 1x nginx", r >= 1.0, "nginx, 1 worker"))
        else:
            rows.append(Row(what, target=">= 1x nginx"))
        what = f"HTTP p99 latency, wrk {wrk}"
        if ours and base:
            p99, base_p99 = float(ours["p99_us"]), float(base["p99_us"])
            r = p99 / base_p99
            rows.append(Row(what, micros(p99), micros(base_p99),
                            times(r), "<= 1.2x nginx", r <= 1.2,
                            "nginx, 1 worker"))
        else:
            rows.append(Row(what, target="<= 1.2x nginx"))
    return rows


# ── Output ─────────────────────────────────────────────────────────────────

HEADER = ["row", "ours", "baseline (same run)", "ratio", "target",
          "result"]


def machine():
    """'AMD EPYC (family 25, model 17), 2 CPUs': the first CPU's `model
    name`, `cpu family` and `model` in /proc/cpuinfo and its count of
    `processor` entries (as bench/all.sh prints them). The numbers tell
    generations apart where a VM's model name does not."""
    fields, count = {}, 0
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "processor":
                    count += 1
                elif key in ("model name", "cpu family", "model"):
                    # The first CPU's (they are all the same).
                    fields.setdefault(key, " ".join(value.split()))
    except OSError:
        pass
    model = fields.get("model name", "unknown CPU")
    if "cpu family" in fields and "model" in fields:
        model += f" (family {fields['cpu family']}, model {fields['model']})"
    return f"{model}, {count or os.cpu_count()} CPUs"


def modes(d):
    """Compilation modes found in the results and logs."""
    found = set()
    for name in os.listdir(d):
        with open(os.path.join(d, name), encoding="utf-8") as f:
            found.update(re.findall(r"\bmode=(\w+)", f.read()))
    return sorted(found)


def print_text(rows):
    table = [HEADER] + [row.cells() for row in rows]
    widths = [max(len(r[c]) for r in table) for c in range(len(HEADER))]
    for i, r in enumerate(table):
        print("  " + "  ".join(cell.ljust(w) for cell, w in zip(r, widths))
              .rstrip())
        if i == 0:
            print("  " + "  ".join("-" * w for w in widths))


def print_markdown(rows):
    print("| " + " | ".join(HEADER) + " |")
    print("|" + "|".join(" --- " for _ in HEADER) + "|")
    for row in rows:
        cells = [c.replace("|", "\\|") for c in row.cells()]
        cells[-1] = "**MISSED**" if cells[-1] == "MISSED" else cells[-1]
        print("| " + " | ".join(cells) + " |")


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true",
                        help="also print the table in Markdown")
    parser.add_argument("--seconds", type=int, help="length of the run")
    parser.add_argument("--load", action="append", default=[],
                        help="load average (start, end)")
    parser.add_argument("directory")
    args = parser.parse_args(argv)

    d = args.directory
    rows = (switch_rows(d) + sched_rows(d) + live_rows(d) + threads_rows(d)
            + timers_rows(d) + sleepers_rows(d) + idle_rows(d)
            + http_rows(d))
    # Rows for information only are neither met nor missed.
    counted = [r for r in rows if not r.info]
    unresolved = sum(1 for r in counted if r.unresolved and r.met is not None)
    missed = sum(1 for r in counted if r.met is False and not r.unresolved)
    not_run = sum(1 for r in counted if r.met is None)

    about = [machine()]
    if args.load:
        about.append("load average " + " -> ".join(args.load))
    if args.seconds is not None:
        about.append(f"{args.seconds} s")
    print(f"Summary: the course's targets ({'; '.join(about)})")
    print_text(rows)
    print(f"  {len(counted) - missed - not_run - unresolved} met, "
          f"{missed} missed"
          + (f", {not_run} not run" if not_run else "")
          + (f", {unresolved} unresolved (a difference within the noise)"
             if unresolved else "")
          + f", of {len(counted)} targets ({len(rows) - len(counted)} rows "
          "for information). Ratios compare figures of this run; "
          "absolute figures move with the machine's load.")
    found = modes(d)
    if found and found != ["opt"]:
        print(f"  note: built with -c {'/'.join(found)}: the library under "
              "test is not optimised; use -c opt")
    if args.markdown:
        print()
        print(f"Machine: {machine()}.")
        print()
        print_markdown(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
