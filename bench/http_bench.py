#!/usr/bin/env python3
"""//bench:http: the capstone HTTP server against nginx, under wrk.

    http_bench.py --server PATH [--mode MODE] [--rounds N] [--seconds S]
                  [--nginx PATH] [--wrk PATH]

Starts the capstone (ch05_shutdown/examples/http_server, on a free port)
and nginx (one worker, a configuration of its own written into a temporary
directory: `return 200 "hello\\n"`), both on 127.0.0.1 only. Checks that
each answers GET / with 200 and "hello\\n". Then, for each wrk setting
(-t1 -c64 and -t2 -c256), runs wrk against one server, then the other,
round after round (the first server of a round alternates), so that
whatever else the machine does falls on both alike. For each run it takes:

    req/s          wrk's Requests/sec
    p50, p99       wrk's latency distribution (--latency)
    CPU/request    utime + stime of the server's processes (/proc/PID/stat)
                   over the run, divided by the requests wrk counted
    threads        Threads: of /proc/PID/status, summed over the server's
                   processes (nginx: master and worker)

and prints the medians over the rounds, and the ratios capstone / nginx.
Every run is bounded in time; both servers are stopped on exit, on an
error, on Ctrl-C and on SIGTERM.

If the environment variable BENCH_RESULTS names a file, one line per
(server, setting) is appended to it for bench/summary.py, in the format of
bench/interleave.py (`result name=... unit=... mode=... median=...`, median
in ns of wall time per request), with the other figures as extra fields:

    result name=capstone_c64 unit=request mode=opt median=8123.4 rps=123103
        p50_us=480.0 p99_us=1210.0 cpu_ns=7012.0 threads=2 errors=0

Standard library only.
"""

import argparse
import grp
import os
import pwd
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

# The two wrk settings: (name, threads, connections).
SETTINGS = [("c64", 1, 64), ("c256", 2, 256)]

# The server and its answer; the nginx configuration gives the same body.
BODY = b"hello\n"

NGINX_CONF = """\
# Written by bench/http_bench.py for //bench:http; deleted after the run.
{user}worker_processes 1;
daemon off;
master_process on;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;

events {{
    worker_connections 4096;
}}

http {{
    access_log off;
    keepalive_requests 1000000;
    keepalive_timeout 60s;
    default_type text/plain;
    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;

    server {{
        listen 127.0.0.1:{port};
        location / {{
            return 200 "hello\\n";
        }}
    }}
}}
"""


def fail(message):
    raise SystemExit(f"http: {message}")


def free_port():
    """A port that is free now (the kernel's choice; nginx binds it next)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, proc, seconds=10.0):
    """Until something accepts on 127.0.0.1:port, or the process exits."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def children(pid):
    """The PIDs of pid's child processes (/proc/PID/task/*/children)."""
    out = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(p) for p in f.read().split()]
    except OSError:
        pass
    return out


class Server:
    """A server process under test: its PIDs, port, CPU time and threads."""

    def __init__(self, name, label):
        self.name, self.label = name, label
        self.proc = None
        self.port = None

    def pids(self):
        """The server's process and its children (nginx's worker)."""
        return [self.proc.pid] + children(self.proc.pid)

    def cpu_seconds(self):
        """utime + stime of all the server's processes, in seconds."""
        ticks = os.sysconf("SC_CLK_TCK")
        total = 0
        for pid in self.pids():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    # The command name, in parentheses, may hold spaces:
                    # the fields are counted from after its ")".
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += int(fields[11]) + int(fields[12])  # utime, stime
        return total / ticks

    def threads(self):
        total = 0
        for pid in self.pids():
            try:
                with open(f"/proc/{pid}/status") as f:
                    for line in f:
                        if line.startswith("Threads:"):
                            total += int(line.split()[1])
            except OSError:
                pass
        return total

    def stop(self):
        """SIGTERM, then SIGKILL if it has not gone within 5 s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Capstone(Server):
    def __init__(self, path):
        super().__init__("capstone", "capstone (ch05 http_server)")
        self.path = path

    def start(self, tmp):
        # Port 0: the server binds a free port and prints it. Grace 1000 ms
        # (at the end, nothing is in flight).
        self.log = open(os.path.join(tmp, "capstone.log"), "w+")
        self.proc = subprocess.Popen([self.path, "0", "1000"],
                                     stdout=subprocess.PIPE, stderr=self.log,
                                     text=True)
        line = self.proc.stdout.readline()
        match = re.match(r"listening on port (\d+)", line)
        if not match:
            fail(f"the capstone did not start: {line.strip()!r}")
        self.port = int(match.group(1))
        # Its report at exit goes to the pipe, which holds it (a few hundred
        # bytes) until stop() closes it; nobody reads it.

    def stop(self):
        super().stop()
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()


class Nginx(Server):
    def __init__(self, path):
        super().__init__("nginx", "nginx (1 worker)")
        self.path = path

    def start(self, tmp):
        self.port = free_port()
        prefix = os.path.join(tmp, "nginx")
        os.makedirs(prefix)
        # As root, nginx would run its worker as "nobody", who cannot enter
        # our temporary directory; the current user it is. (Without root,
        # the directive is meaningless and nginx would warn.)
        user = ""
        if os.geteuid() == 0:
            user = (f"user {pwd.getpwuid(os.geteuid()).pw_name} "
                    f"{grp.getgrgid(os.getegid()).gr_name};\n")
        conf = os.path.join(prefix, "nginx.conf")
        with open(conf, "w") as f:
            f.write(NGINX_CONF.format(user=user, tmp=prefix, port=self.port))
        # -p: the prefix (relative paths), -c: our configuration, -e: the
        # error log from the start (else nginx first tries the system's).
        self.proc = subprocess.Popen(
            [self.path, "-p", prefix, "-c", conf, "-e",
             os.path.join(prefix, "error.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not wait_for_port(self.port, self.proc):
            log = os.path.join(prefix, "error.log")
            text = open(log).read() if os.path.exists(log) else ""
            fail(f"nginx did not start on port {self.port}:\n{text}")
        # Its worker: wait until the master has forked it.
        deadline = time.monotonic() + 5
        while not children(self.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)


def check_answer(server):
    """GET / must be a 200 with the body "hello\\n"."""
    url = f"http://127.0.0.1:{server.port}/"
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            status, body = response.status, response.read()
    except OSError as e:
        fail(f"{server.name}: GET / failed: {e}")
    if status != 200 or body != BODY:
        fail(f"{server.name}: GET / answered {status} {body!r}, "
             f"expected 200 {BODY!r}")


UNITS = {"us": 1.0, "ms": 1e3, "s": 1e6}


def to_us(text):
    """'1.23ms' -> 1230.0 (wrk's latency figures)."""
    match = re.fullmatch(r"([\d.]+)(us|ms|s)", text)
    if not match:
        fail(f"cannot read wrk's latency {text!r}")
    return float(match.group(1)) * UNITS[match.group(2)]


def run_wrk(wrk, server, threads, connections, seconds):
    """One wrk run: its figures, and the server's CPU time over it."""
    url = f"http://127.0.0.1:{server.port}/"
    command = [wrk, f"-t{threads}", f"-c{connections}", f"-d{seconds}s",
               "--latency", "--timeout", "2s", url]
    cpu_before = server.cpu_seconds()
    try:
        done = subprocess.run(command, capture_output=True, text=True,
                              timeout=seconds + 30)
    except subprocess.TimeoutExpired:
        fail(f"wrk against {server.name} did not finish in {seconds + 30} s")
    cpu = server.cpu_seconds() - cpu_before
    out = done.stdout
    if done.returncode != 0:
        fail(f"wrk against {server.name} failed:\n{out}{done.stderr}")
    requests = re.search(r"^\s*(\d+) requests in", out, re.MULTILINE)
    rps = re.search(r"^Requests/sec:\s+([\d.]+)", out, re.MULTILINE)
    p50 = re.search(r"^\s+50%\s+(\S+)", out, re.MULTILINE)
    p99 = re.search(r"^\s+99%\s+(\S+)", out, re.MULTILINE)
    if not (requests and rps and p50 and p99):
        fail(f"cannot read wrk's output:\n{out}")
    errors = 0
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if bad:
        errors += int(bad.group(1))
    sockets = re.search(r"Socket errors: connect (\d+), read (\d+), "
                        r"write (\d+), timeout (\d+)", out)
    if sockets:
        errors += sum(int(n) for n in sockets.groups())
    n = int(requests.group(1))
    return {
        "rps": float(rps.group(1)),
        "p50_us": to_us(p50.group(1)),
        "p99_us": to_us(p99.group(1)),
        "cpu_ns": cpu * 1e9 / n if n else float("nan"),
        "threads": server.threads(),
        "errors": errors,
    }


def latency(us):
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.0f} us"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    return "unknown CPU"


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True,
                        help="the capstone's http_server binary")
    parser.add_argument("--mode", default="unknown",
                        help="the capstone's compilation mode")
    parser.add_argument("--nginx", default=None)
    parser.add_argument("--wrk", default=None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5,
                        help="length of one wrk run")
    args = parser.parse_args(argv)

    if not os.access(args.server, os.X_OK):
        fail(f"the capstone is not at {args.server} (build "
             "//ch05_shutdown/examples:http_server)")
    nginx = args.nginx or shutil.which("nginx") or "/usr/sbin/nginx"
    wrk = args.wrk or shutil.which("wrk")
    if not os.path.exists(nginx):
        fail("nginx not found (Debian: apt-get install nginx; tools/bazelw "
             "installs it)")
    if not wrk:
        fail("wrk not found (Debian: apt-get install wrk)")

    servers = [Capstone(args.server), Nginx(nginx)]
    tmp = tempfile.mkdtemp(prefix="bench_http.")

    # SIGTERM (and SIGHUP) end the run like Ctrl-C does: through the
    # finally below, which stops both servers.
    def interrupted(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGHUP, interrupted)

    figures = {(s.name, setting[0]): [] for s in servers for setting in
               SETTINGS}
    try:
        for server in servers:
            server.start(tmp)
            check_answer(server)
        print(f"HTTP: capstone (mode={args.mode}) on port {servers[0].port}, "
              f"nginx on port {servers[1].port}; wrk {args.seconds} s per "
              f"run, {args.rounds} rounds per setting, alternating")
        print(f"  machine: {os.cpu_count()} cores, {cpu_model()}; load "
              f"average {open('/proc/loadavg').read().split()[0]} at start")
        sys.stdout.flush()
        for name, threads, connections in SETTINGS:
            # A short warm-up of each server (connections, caches).
            for server in servers:
                run_wrk(wrk, server, threads, connections, 1)
            for r in range(args.rounds):
                order = servers if r % 2 == 0 else servers[::-1]
                for server in order:
                    result = run_wrk(wrk, server, threads, connections,
                                     args.seconds)
                    figures[(server.name, name)].append(result)
                    print(f"  round {r + 1} -t{threads} -c{connections} "
                          f"{server.name:8} {result['rps']:9.0f} req/s  "
                          f"p50 {latency(result['p50_us']):>8}  "
                          f"p99 {latency(result['p99_us']):>8}  "
                          f"cpu {result['cpu_ns'] / 1000:5.2f} us/req  "
                          f"errors {result['errors']}")
                    sys.stdout.flush()
        # Still alive and still right after the load?
        for server in servers:
            if server.proc.poll() is not None:
                fail(f"{server.name} exited during the run")
            check_answer(server)
    except KeyboardInterrupt:
        print("http: interrupted", file=sys.stderr)
        return 130
    finally:
        for server in servers:
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    print_table(figures, servers, args)
    if os.environ.get("BENCH_RESULTS"):
        with open(os.environ["BENCH_RESULTS"], "a") as out:
            for (server, setting), runs in figures.items():
                m = medians(runs)
                out.write(
                    f"result name={server}_{setting} unit=request "
                    f"mode={args.mode} "
                    f"median={1e9 / m['rps']:.1f} rps={m['rps']:.0f} "
                    f"p50_us={m['p50_us']:.1f} p99_us={m['p99_us']:.1f} "
                    f"cpu_ns={m['cpu_ns']:.1f} threads={m['threads']} "
                    f"errors={m['errors']}\n")
    return 0


def medians(runs):
    m = {key: statistics.median(r[key] for r in runs)
         for key in ("rps", "p50_us", "p99_us", "cpu_ns")}
    m["threads"] = max(r["threads"] for r in runs)
    m["errors"] = sum(r["errors"] for r in runs)
    return m


def print_table(figures, servers, args):
    print()
    print(f"HTTP: wrk against the capstone and nginx, medians of "
          f"{args.rounds} rounds of {args.seconds} s")
    header = ["setting", "server", "req/s", "p50", "p99", "CPU/request",
              "threads", "errors"]
    rows = [header]
    ratios = []
    for name, threads, connections in SETTINGS:
        m = {}
        for server in servers:
            m[server.name] = medians(figures[(server.name, name)])
            f = m[server.name]
            rows.append([f"-t{threads} -c{connections}", server.label,
                         f"{f['rps']:.0f}", latency(f["p50_us"]),
                         latency(f["p99_us"]), f"{f['cpu_ns'] / 1000:.2f} us",
                         str(f["threads"]), str(f["errors"])])
        ours, base = m["capstone"], m["nginx"]
        rps = ours["rps"] / base["rps"]
        p99 = ours["p99_us"] / base["p99_us"]
        cpu = ours["cpu_ns"] / base["cpu_ns"]
        ratios.append(
            f"  -t{threads} -c{connections} capstone / nginx: req/s "
            f"{rps:.2f}x ({'met' if rps >= 1.0 else 'NOT met'}: >= 1.0x), "
            f"p50 {ours['p50_us'] / base['p50_us']:.2f}x, p99 {p99:.2f}x "
            f"({'met' if p99 <= 1.2 else 'NOT met'}: <= 1.2x), "
            f"CPU/request {cpu:.2f}x")
    widths = [max(len(r[c]) for r in rows) for c in range(len(header))]
    for i, r in enumerate(rows):
        cells = [c.ljust(w) if j < 2 else c.rjust(w)
                 for j, (c, w) in enumerate(zip(r, widths))]
        print("  " + "  ".join(cells).rstrip())
        if i == 0:
            print("  " + "  ".join("-" * w for w in widths))
    for line in ratios:
        print(line)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
