#!/usr/bin/env python3
"""Run benchmark binaries interleaved round by round; print one table.

    interleave.py [--rounds N] [--round-ms MS] [--processes P] [--raw]
                  [--title TEXT] [--row-header TEXT] [--label NAME=TEXT]...
                  [--rates]
                  [--ratio A/B[<=X|>=X]]... [--rate-ratio A/B[<=X|>=X]]...
                  NAME=BINARY...

Each BINARY is a program built on bench/harness.c. All of them are started
in --lockstep mode, one after the other (each warms up alone, so their
calibrations do not disturb each other). Then, for every round, each binary
in turn runs one round: whatever the machine does meanwhile (another
process, a frequency change) hits every binary alike instead of spoiling
one binary's figures. The starting binary rotates from round to round.

With --processes P (default 1), each binary runs as P processes, and its
rounds go to them in turn. A process keeps one address-space layout for its
whole life (where its stack, heap and code landed), and on some processors
a layout can make the same code a sixth slower in every round (eight
processes of one binary, interleaved: seven at 5.4 to 5.6 ns per switch,
one at 6.45, on an AMD EPYC): with one process per binary, a run draws one
layout, and a ratio of two rows moves with the draw. With P processes, the
median is that of the usual layouts as long as fewer than half of a
binary's processes draw an unusual one.

The table gives, per binary, the median of its rounds and the fastest and
slowest round; each --ratio A/B line gives A's time over B's (so below 1
means A is faster) as the median of the rounds' own ratios: round r of A
over round r of B, the two run within the same sweep of the binaries, so
that a slow minute of the machine divides out instead of landing in one
binary's median and not the other's. (The ratio of the two medians is
printed beside it; the two agree on a quiet machine.) --rates adds a
column of units per second (from the median), and each --rate-ratio A/B
line gives A's rate over B's, paired the same way: the median of round
r of B over round r of A. A ratio may carry a target, as in
--ratio 'wake/condvar<=1.5' or --rate-ratio 'post/queue>=2': its line then
says whether the target is met (a report, never an exit status).
When the binaries report different units (ns per switch, per coroutine,
per thread), the table says each row's unit. --row-header names the first
column (default "back-end"); --raw also prints every line the binaries
printed.

If the environment variable BENCH_RESULTS names a file, one line per binary
is appended to it, in the harness's key=value format, for bench/summary.py
and bench/plots.sh:

    result name=raw_asm unit=switch median=3.48 fastest=3.46 slowest=3.62

and one line per --ratio or --rate-ratio, the paired figure first:

    ratio name=raw_asm/boost of=times paired=0.93 medians=0.95
    ratio name=post/queue of=rates paired=2.71 medians=2.74

Standard library only.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys


def parse_fields(line):
    """'round name=asm ns=5' -> ('round', {'name': 'asm', 'ns': '5'})."""
    kind, *fields = line.split()
    return kind, dict(field.split("=", 1) for field in fields)


class Binary:
    """One benchmark binary: its processes, in lockstep mode."""

    def __init__(self, name, path, round_ms, processes=1):
        self.name = name
        self.raw = []
        self.per_unit = []
        self.procs = []
        self.rounds_run = 0
        for _ in range(processes):
            proc = subprocess.Popen(
                [path, "--lockstep", "--round-ms", str(round_ms)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            self.procs.append(proc)
            _, fields = self.expect(proc, "ready")
        # (From the last process; each calibrates its own round.)
        self.unit = fields["unit"]
        self.mode = fields.get("mode", "unknown")
        self.units_per_round = (int(fields["ops_per_round"])
                                * int(fields["units_per_op"]))

    def expect(self, proc, kind):
        """Reads the next output line, which must be of the given kind."""
        line = proc.stdout.readline()
        if not line:
            sys.exit(f"{self.name}: exited early (status {proc.wait()})")
        self.raw.append(line.rstrip("\n"))
        got, fields = parse_fields(line)
        if got != kind:
            sys.exit(f"{self.name}: expected '{kind}', got: {line.strip()}")
        return got, fields

    def run_round(self):
        """Asks the next process in turn for one round and records its ns
        per unit."""
        proc = self.procs[self.rounds_run % len(self.procs)]
        self.rounds_run += 1
        proc.stdin.write("\n")
        proc.stdin.flush()
        _, fields = self.expect(proc, "round")
        self.per_unit.append(float(fields["ns_per_unit"]))

    def finish(self):
        """Ends the processes; each checks its own counts and says so in
        its exit status."""
        for proc in self.procs:
            proc.stdin.close()
            status = proc.wait()
            if status != 0:
                sys.exit(f"{self.name}: failed its final check "
                         f"(status {status})")

    @property
    def median(self):
        return statistics.median(self.per_unit)


RATIO = re.compile(r"^([^/<>=]+)/([^/<>=]+?)(?:(<=|>=)([0-9.]+))?$")


def parse_ratio(text):
    """'a/b' -> ('a', 'b', None, None); 'a/b<=1.5' -> ('a', 'b', '<=', 1.5)."""
    match = RATIO.match(text)
    if match is None:
        return None
    a, b, op, value = match.groups()
    return a, b, op, float(value) if value is not None else None


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--round-ms", type=int, default=60)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--raw", action="store_true")
    parser.add_argument("--title", default="Benchmark")
    parser.add_argument("--row-header", default="back-end")
    parser.add_argument("--label", action="append", default=[],
                        metavar="NAME=TEXT")
    parser.add_argument("--ratio", action="append", default=[],
                        metavar="A/B")
    parser.add_argument("--rate-ratio", action="append", default=[],
                        metavar="A/B")
    parser.add_argument("--rates", action="store_true")
    parser.add_argument("binaries", nargs="+", metavar="NAME=BINARY")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.round_ms < 1 or args.processes < 1:
        parser.error("--rounds, --round-ms and --processes must be positive")
    for spec in args.binaries + args.label:
        if "=" not in spec:
            parser.error(f"expected NAME=VALUE, got '{spec}'")
    names = [spec.split("=", 1)[0] for spec in args.binaries]
    for option, ratios in (("--ratio", args.ratio),
                           ("--rate-ratio", args.rate_ratio)):
        for ratio in ratios:
            parsed = parse_ratio(ratio)
            if parsed is None or not set(parsed[:2]) <= set(names):
                parser.error(f"{option} {ratio}: expected A/B with two of "
                             f"{names}, optionally followed by <=X or >=X")
    return args


def run_interleaved(binaries, rounds):
    """Round r starts with binary r mod len(binaries), then the next ones."""
    for r in range(rounds):
        for i in range(len(binaries)):
            binaries[(r + i) % len(binaries)].run_round()


def plural(unit):
    return unit + ("es" if unit.endswith(("s", "sh", "ch", "x")) else "s")


def rate(binary):
    """Units per second at the median, e.g. '1.52M items/s'."""
    per_second = 1e9 / binary.median
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if per_second >= scale:
            return f"{per_second / scale:.3g}{suffix} {plural(binary.unit)}/s"
    return f"{per_second:.3g} {plural(binary.unit)}/s"


def paired_ratio(a, b):
    """The median over rounds of a's round r over b's round r (times).
    run_interleaved() runs round r of every binary in one sweep, so each
    pair shared the machine's state of that moment."""
    return statistics.median(x / y for x, y in zip(a.per_unit, b.per_unit))


def ratio_figures(binaries, text, rate=False):
    """(name, paired, medians, op, target) of one --ratio (times: a's
    over b's) or --rate-ratio (rates: a's over b's, so b's time over a's)
    argument."""
    a, b, op, target = parse_ratio(text)
    if rate:
        first, second = binaries[b], binaries[a]
    else:
        first, second = binaries[a], binaries[b]
    return (f"{a}/{b}", paired_ratio(first, second),
            first.median / second.median, op, target)


def ratio_line(name, value, medians, op, target, what=""):
    """One ratio line, with the medians' ratio and the target if any."""
    a, b = name.split("/")
    if value >= 0.1:
        text = f"  {a} / {b}{what}: {value:.2f}x"
        text += f" (medians: {medians:.2f}x)"
    else:  # far below 1: say how many times faster, too
        text = f"  {a} / {b}{what}: {value:.2g}x (1/{1 / value:.0f})"
    if op is not None:
        met = value <= target if op == "<=" else value >= target
        text += f"; target {op} {target:g}: {'met' if met else 'NOT met'}"
    return text


def print_table(args, binaries):
    labels = dict(spec.split("=", 1) for spec in args.label)
    by_name = {b.name: b for b in binaries}
    processes = (f", {args.processes} processes per binary"
                 if args.processes > 1 else "")
    print(f"{args.title}: median of {args.rounds} interleaved rounds "
          f"(each >= {args.round_ms} ms{processes})")
    if len({b.unit for b in binaries}) == 1:
        # One unit: it goes in the header.
        unit = binaries[0].unit
        rows = [(args.row_header, f"median ns/{unit}", "fastest", "slowest",
                 f"{plural(unit)}/round")]
        for b in binaries:
            rows.append((labels.get(b.name, b.name), f"{b.median:.2f}",
                         f"{min(b.per_unit):.2f}", f"{max(b.per_unit):.2f}",
                         str(b.units_per_round)))
    else:
        # Several units: each row says its own.
        rows = [(args.row_header, "ns per", "median", "fastest", "slowest",
                 "per round")]
        for b in binaries:
            rows.append((labels.get(b.name, b.name), b.unit,
                         f"{b.median:.2f}", f"{min(b.per_unit):.2f}",
                         f"{max(b.per_unit):.2f}",
                         f"{b.units_per_round} {plural(b.unit)}"))
    # Text columns (the name, and the unit if any) left, numbers right.
    text_columns = 1 if len(rows[0]) == 5 else 2
    if args.rates:
        rows[0] = rows[0] + ("per second (median)",)
        for i, b in enumerate(binaries, start=1):
            rows[i] = rows[i] + (rate(b),)
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    for row in rows:
        cells = [cell.ljust(w) if c < text_columns else cell.rjust(w)
                 for c, (cell, w) in enumerate(zip(row, widths))]
        print("  " + "  ".join(cells))
    for ratio in args.ratio:
        print(ratio_line(*ratio_figures(by_name, ratio)))
    for ratio in args.rate_ratio:
        print(ratio_line(*ratio_figures(by_name, ratio, rate=True),
                         what=", per second"))
    modes = sorted({b.mode for b in binaries})
    if modes != ["opt"]:
        print(f"  note: built with -c {'/'.join(modes)}, so the library "
              "under test is not optimised; use -c opt for real figures")


def append_results(path, args, binaries):
    """One 'result' line per binary and one 'ratio' line per ratio,
    appended to the file at `path`."""
    by_name = {b.name: b for b in binaries}
    ratios = ([("times",) + ratio_figures(by_name, r) for r in args.ratio]
              + [("rates",) + ratio_figures(by_name, r, rate=True)
                 for r in args.rate_ratio])
    with open(path, "a", encoding="utf-8") as out:
        for b in binaries:
            out.write(f"result name={b.name} unit={b.unit} mode={b.mode} "
                      f"median={b.median:.3f} fastest={min(b.per_unit):.3f} "
                      f"slowest={max(b.per_unit):.3f}\n")
        for of, name, paired, medians, _, _ in ratios:
            out.write(f"ratio name={name} of={of} paired={paired:.4f} "
                      f"medians={medians:.4f}\n")


def main(argv):
    args = parse_args(argv)
    binaries = [Binary(*spec.split("=", 1), args.round_ms, args.processes)
                for spec in args.binaries]
    run_interleaved(binaries, args.rounds)
    for b in binaries:
        b.finish()
    if args.raw:
        for b in binaries:
            print("\n".join(b.raw))
    print_table(args, binaries)
    if os.environ.get("BENCH_RESULTS"):
        append_results(os.environ["BENCH_RESULTS"], args, binaries)


if __name__ == "__main__":
    main(sys.argv[1:])
