"""The one harness of the benchmarks in bench/: every script here imports it for the jobs they
share, and none does them on its own.

- builds the release binaries (once per script, or once for all with `python3 bench/harness.py
  build`), and finds them in `$CARGO_TARGET_DIR/release` or `target/release`;
- keeps one run's work directory (mode 700), management token and token files (mode 600),
  writes the exporter's configs there, and picks free loopback ports;
- starts `mailhost_sim`, `mailhost_exporter` and any other server (nginx, bare_axum) on
  loopback, waits for a log line or `/-/ready`, and stops every process it started when the run
  ends, also on Ctrl-C, SIGTERM or an error (TERM, then KILL after 10 s, by process id only);
- turns the simulated upstream slow and flapping in the background (`Flapper`);
- plain HTTP calls, the simulator's control plane, sums and values read from an exposition;
- samples a process's memory, threads, descriptors and CPU from /proc;
- runs wrk and hyperfine bounded in time, and prints results (`Report`, `machine`, `revision`).

Every wait and loop here is bounded in count and in time; everything listens on 127.0.0.1.
The Rust tests have their own helper (tests/helpers.rs): it cannot share this Python code.
"""

import datetime
import json
import os
import re
import resource
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import zlib
from http.client import HTTPException

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, os.environ.get("CARGO_TARGET_DIR") or "target", "release")
FIRST_EXTRA = 100_001  # the first account id `mailhost_sim --extra-accounts` adds
STOP_SECONDS = 10  # how long a process has to exit after TERM before it is killed

# The routes the exporter calls (docs/upstream.md, first table); the others are never polled.
ROUTES = ["delivery_account_get", "tracemail_dashboard", "tracemail_daily", "migration_stats",
          "email_account_get"]
# What the flapping loop applies, one phase per route at a time, each route shifted by one phase
# so that at any moment the routes misbehave in different ways. The demo config's api.timeout
# (1 s by default) is shorter than the latency of the first phase, so that phase ends in client
# timeouts. None is no fault.
PHASES = [
    ("slow_1500ms", {"latency_ms": 1500}),
    ("error_500", {"error_rate": 1.0, "error_status": 500, "latency_ms": 300}),
    ("error_503", {"error_rate": 1.0, "error_status": 503}),
    ("rate_limited_429", {"rate_limit_rate": 1.0, "retry_after_secs": 1}),
    ("malformed", {"malformed_rate": 1.0, "latency_ms": 300}),
    ("healthy", None),
]


# --- Messages and options -------------------------------------------------------------------

def die(message):
    """Ends the run with `error: message` (what was started is stopped on the way out)."""
    sys.exit(f"error: {message}")


def note(message):
    """A progress line on standard error, `# ` first, apart from the figures on standard out."""
    print(f"# {message}", file=sys.stderr, flush=True)


def need(tool, package):
    if shutil.which(tool) is None:
        die(f"{tool} is not installed; install it with: sudo apt-get install -y {package}")


def env_int(name, default):
    """An integer option from the environment."""
    text = os.environ.get(name, str(default))
    if not re.fullmatch(r"[0-9]+", text):
        die(f"{name} must be a whole number, not {text!r}")
    return int(text)


def env_seconds(name, default):
    """A duration option from the environment in whole seconds, like `30s`: (text, seconds)."""
    text = os.environ.get(name, default)
    m = re.fullmatch(r"([0-9]+)s", text)
    if not m:
        die(f"{name} must be whole seconds, like 30s")
    return text, int(m.group(1))


def main(run):
    """Runs a benchmark's `run()`: SIGTERM ends it as Ctrl-C does, by unwinding through the
    `Bench` that stops what it started; exit status 130 (Ctrl-C) or 143 (SIGTERM)."""
    def terminated(signum, frame):
        raise SystemExit(143)
    signal.signal(signal.SIGTERM, terminated)
    try:
        run()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)


# --- Building --------------------------------------------------------------------------------

def build(run, examples=(), check=("mailhost_sim", "mailhost_exporter")):
    """Builds the release binaries (and `examples`) when `run`, then checks that the binaries
    named in `check` are there."""
    if run:
        need("cargo", "cargo (or rustup)")
        cmd = ["cargo", "build", "--release", "--locked", "--bins"]
        for example in examples:
            cmd += ["--example", example]
        note(" ".join(cmd))
        if subprocess.run(cmd, cwd=ROOT, stdout=sys.stderr).returncode != 0:
            die("the release build failed")
    else:
        note(f"using the release binaries already in {BIN}")
    paths = [os.path.join(BIN, name) for name in check]
    paths += [os.path.join(BIN, "examples", name) for name in examples]
    missing = [p for p in paths if not os.access(p, os.X_OK)]
    if missing:
        die(f"release binaries missing: {', '.join(missing)}; build them with "
            f"`python3 bench/harness.py build` (or cargo build --release --bins)")


def parse_args(parser):
    """The options of a script configured by flags, plus `--build`: builds the release binaries
    first when given, else checks that they are there."""
    parser.add_argument("--build", action="store_true",
                        help="build the release binaries first (cargo build --release --bins)")
    args = parser.parse_args()
    build(args.build)
    return args


# --- HTTP ------------------------------------------------------------------------------------

def request(method, url, token=None, body=None, headers=None):
    """One request to make: `token` goes in the simulator's management header, `body` is JSON."""
    req = urllib.request.Request(url, method=method, data=body, headers=headers or {})
    if token:
        req.add_header("X-Api-Token", token)
    if body is not None:
        req.add_header("Content-Type", "application/json")
    return req


def http(method, url, token=None, body=None, timeout=10, headers=None):
    """The body of one request, as text; raises on a failed call or a status other than 2xx."""
    with urllib.request.urlopen(request(method, url, token, body, headers), timeout=timeout) as r:
        return r.read().decode()


def get(url, timeout=5, headers=None):
    """The raw body of a GET answered 2xx, or None if the call failed or was refused."""
    try:
        with urllib.request.urlopen(request("GET", url, headers=headers), timeout=timeout) as r:
            return r.read()
    except (OSError, HTTPException):
        return None


def status(url, timeout=5, method="GET", token=None, body=None, headers=None):
    """The HTTP status of one request (its body read and dropped), None if the call failed."""
    try:
        with urllib.request.urlopen(request(method, url, token, body, headers),
                                    timeout=timeout) as r:
            r.read()
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except (OSError, HTTPException):
        return None


def http_gzip(url, timeout=30):
    """The raw body of a GET that asks for gzip, as the scrapers of a large fleet do."""
    with urllib.request.urlopen(request("GET", url, headers={"Accept-Encoding": "gzip"}),
                                timeout=timeout) as r:
        return r.read()


def first_member(gz, limit=1 << 20):
    """The text of the first gzip member of `gz` (the health section of a gzipped /metrics)."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    return d.decompress(gz[:limit]).decode(errors="replace")


def free_port():
    """A loopback port free right now (for servers that cannot listen on port 0 and say so)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- Reading an exposition -------------------------------------------------------------------

def count(body, prefix):
    """How many lines of `body` start with `prefix`."""
    return sum(1 for line in body.splitlines() if line.startswith(prefix))


def value(body, series):
    """The value of one series (name and labels exactly as exposed), None if absent."""
    for line in body.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


def series(body, name):
    """Every series of a metric with labels: {name{labels}: value}."""
    out = {}
    for line in body.splitlines():
        if line.startswith(name + "{"):
            labels, _, v = line.rpartition(" ")
            out[labels] = float(v)
    return out


def sum_by(body, metric, label):
    """A counter summed over every label set but one label: {label value: whole total}, the
    series without that label under `(none)`."""
    sums = {}
    for line in body.splitlines():
        if line.startswith(metric + "{"):
            m = re.search(label + r'="([^"]*)"', line)
            key = m.group(1) if m else "(none)"
            sums[key] = sums.get(key, 0.0) + float(line.split()[-1])
    return {k: int(v) for k, v in sums.items()}


def total(body, metric):
    """A counter summed over every label set."""
    return sum(sum_by(body, metric, "__none__").values())


# --- /proc -----------------------------------------------------------------------------------

def status_kib(pid, field):
    """A memory figure of a process in KiB (`VmRSS`, `VmHWM`), 0 if absent."""
    return proc_status(pid, field)


def threads(pid):
    """The number of threads of a process."""
    return proc_status(pid, "Threads")


def proc_status(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def descriptors(pid):
    """The number of open descriptors of a process."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def cpu_seconds(pid):
    """User + system CPU of a process so far, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Peaks(threading.Thread):
    """The most threads and open descriptors of a process, sampled every `every` seconds until
    stopped or the process is gone."""

    def __init__(self, pid, every=0.1):
        super().__init__(daemon=True)
        self.pid, self.every = pid, every
        self.threads = self.fds = 0
        self.stopping = threading.Event()

    def run(self):
        while not self.stopping.is_set():
            try:
                self.threads = max(self.threads, threads(self.pid))
                self.fds = max(self.fds, descriptors(self.pid))
            except OSError:
                return
            self.stopping.wait(self.every)

    def stop(self):
        self.stopping.set()
        self.join(5)


# --- The machine, the revision, the results --------------------------------------------------

def now_utc():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def loadavg():
    """The load average over 1, 5 and 15 minutes, as /proc/loadavg writes it."""
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def machine():
    """CPUs, CPU model, memory and kernel in one line."""
    model = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(": ", 1)[1].strip()
                break
    mem = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal"):
                mem = int(line.split()[1])
    u = os.uname()
    return (f"{len(os.sched_getaffinity(0))} CPUs (nproc), {model}, {mem / 1048576:.1f} GiB RAM, "
            f"{u.sysname} {u.release}")


def revision():
    """The short commit, and whether tracked files differ from it."""
    def git(*args):
        r = subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else None
    rev = git("rev-parse", "--short", "HEAD") or "unknown"
    if git("status", "--porcelain", "--untracked-files=no"):
        rev += " (+ uncommitted changes in the working tree)"
    return rev


class Report:
    """Prints the lines of a report and keeps them in a file of the work directory."""

    def __init__(self, path):
        self.path = path
        open(path, "w").close()

    def __call__(self, line=""):
        print(line, flush=True)
        with open(self.path, "a") as f:
            f.write(line + "\n")


def run_tool(cmd, timeout, capture=True):
    """Runs a load tool (wrk, hyperfine) for at most `timeout` seconds: its output as text when
    `capture`, else shown on standard error. A failure or a timeout ends the run."""
    try:
        r = subprocess.run(cmd, timeout=timeout, text=True, stderr=subprocess.STDOUT,
                           stdout=subprocess.PIPE if capture else sys.stderr)
    except subprocess.TimeoutExpired:
        die(f"{cmd[0]} did not finish within {timeout} s")
    if r.returncode != 0:
        tail = "\n".join((r.stdout or "").splitlines()[-5:])
        die(f"{cmd[0]} failed (status {r.returncode}): {tail}")
    return r.stdout


# --- Configs ---------------------------------------------------------------------------------

def ids(accounts):
    return ", ".join(str(i) for i in accounts)


def schedule(seconds):
    """A collector's interval, its deadline at 90 % of it and `max_age` at 3 intervals."""
    return {"interval": f"{seconds}s", "deadline": f"{seconds * 9 // 10}s",
            "max_age": f"{seconds * 3}s"}


def fields(indent, **values):
    """YAML lines `key: value` of the values given (None and 0 left out)."""
    return [f"{indent}{key}: {value}" for key, value in values.items() if value]


def delivery_config(sim_url, *, interval, token_file=None, accounts=(), tenants=(),
                    timeout="10s", concurrency=None, cooldown=None, deadline=None, max_age=None):
    """The exporter's config polling Delivery accounts: with one token (`token_file`,
    `accounts`) and/or `tenants`, a list of (name, token file, accounts)."""
    out = ["api:", *fields("  ", base_url=sim_url, token_file=token_file, timeout=timeout,
                           concurrency=concurrency, circuit_breaker_cooldown=cooldown),
           "collectors:", "  delivery_account:",
           *fields("    ", interval=interval, deadline=deadline, max_age=max_age)]
    if accounts:
        out.append(f"    accounts: [{ids(accounts)}]")
    if tenants:
        out.append("tenants:")
    for name, path, own in tenants:
        out += [f"  - name: {name}", f"    token_file: {path}", "    collectors:",
                "      delivery_account:", f"        accounts: [{ids(own)}]"]
    return "\n".join(out) + "\n"


def demo_config(sim_url, token_file, timeout, interval, concurrency=None):
    """The exporter's config against the demo fleet: every collector, every demo target, one
    interval, and `api.timeout` (shorter than the flapping's slow phase by default)."""
    head = "\n".join(["api:", *fields("  ", base_url=sim_url, token_file=token_file,
                                        timeout=timeout, concurrency=concurrency)]) + "\n"
    accounts = "accounts: [1001, 1002, 1003, 1004]"
    return head + f"""collectors:
  delivery_account:
    interval: {interval}
    {accounts}
  tracemail_dashboard:
    interval: {interval}
    timezone: Europe/Rome
    views:
      - account: 1001
      - domain: shop.example
  tracemail_daily:
    interval: {interval}
    timezone: Europe/Rome
    {accounts}
  migration:
    interval: {interval}
    migrations: [MG00000001, MG00000002, MG00000003]
  mailbox:
    interval: {interval}
    mailboxes:
      - {{domain: D000000901, mailbox: EA00000001}}
      - {{domain: D000000901, mailbox: EA00000002}}
      - {{domain: D000000902, mailbox: EA00000003}}
      - {{domain: D000000902, mailbox: P000000001}}
"""


# --- Processes -------------------------------------------------------------------------------

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def wait_until(what, probe, seconds, every=0.1, proc=None, log=None):
    """The first true value of `probe()`, tried every `every` seconds for at most `seconds`;
    the run ends if it never comes or `proc` exits meanwhile (`log` is named then)."""
    deadline = time.monotonic() + seconds
    see = f"; see {log}" if log else ""
    while True:
        found = probe()
        if found:
            return found
        if proc is not None and proc.poll() is not None:
            die(f"{os.path.basename(proc.args[0])} exited (status {proc.returncode}) while "
                f"waiting for {what}{see}")
        if time.monotonic() >= deadline:
            die(f"{what}: not within {seconds} s{see}")
        time.sleep(every)


def wait_log(path, pattern, seconds, proc=None):
    """The first group of `pattern` in the log at `path` (colours stripped), once it appears."""
    def probe():
        with open(path, encoding="utf-8", errors="replace") as f:
            m = re.search(pattern, ANSI.sub("", f.read()))
        return m and m.group(1)
    return wait_until(f"{pattern!r} in the log", probe, seconds, proc=proc, log=path)


class Server:
    """A server started by `Bench`: its process, its URL, its log (and `Peaks` when asked)."""

    def __init__(self, proc, url, log, peaks=None):
        self.proc, self.url, self.log, self.peaks = proc, url, log, peaks

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc.poll() is None


class Bench:
    """One benchmark run: a work directory, a management token, the processes and background
    threads it started. Use it with `with`: leaving the block, by an error, Ctrl-C or SIGTERM
    too, stops every thread and every process it started."""

    def __init__(self, prefix, work=None):
        os.umask(0o077)
        self.work = work or tempfile.mkdtemp(prefix=prefix)
        os.makedirs(self.work, exist_ok=True)
        self.token = "bench-" + secrets.token_hex(12)
        self.procs = []
        self.threads = []
        self.sim_url = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def path(self, *parts):
        """A path in the work directory; its parent directories are made."""
        path = os.path.join(self.work, *parts)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return path

    def dir(self, *parts):
        """A directory in the work directory, made if missing."""
        path = os.path.join(self.work, *parts)
        os.makedirs(path, exist_ok=True)
        return path

    def write(self, name, text):
        path = self.path(name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def token_file(self, name="token", token=None):
        """A file (mode 600) holding the token, rather than a command line or the environment."""
        return self.write(name, token or self.token)

    def tenant_tokens(self, n, under=""):
        """(name, token file) of the simulator's `--extra-tenants` tokens, `<token>-t0` on."""
        return [(f"t{t}", self.token_file(os.path.join(under, f"token-t{t}"), f"{self.token}-t{t}"))
                for t in range(n)]

    def spawn(self, cmd, log, env=None, **popen):
        """Starts a process, its standard output and error into the file `log`."""
        with open(log, "wb") as out:
            proc = subprocess.Popen([str(c) for c in cmd], stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})},
                                    **popen)
        self.procs.append(proc)
        return proc

    def start_sim(self, accounts=0, tenants=0, traffic=False, patience=15, log="sim.log"):
        """`mailhost_sim` on a loopback port (port 0, read back from its log) with `accounts`
        extra Delivery accounts (ids 100001 on), split among `tenants` more tokens when asked,
        and demo traffic when `traffic`. Returns its URL, also kept as `sim_url`."""
        cmd = [os.path.join(BIN, "mailhost_sim"), "--listen", "127.0.0.1:0"]
        if traffic:
            cmd.append("--traffic")
        if accounts:
            cmd += ["--extra-accounts", accounts]
        if tenants:
            cmd += ["--extra-tenants", tenants]
        log = self.path(log)
        proc = self.spawn(cmd, log, env={"MAILHOST_SIM_TOKEN": self.token,
                                         "RUST_LOG": "warn,mailhost_sim=info", "NO_COLOR": "1"})
        self.sim_url = wait_log(log, r"simulated provider listening.*?url=(http://[0-9.:]+)",
                                patience, proc)
        return self.sim_url

    def start_demo(self, api_timeout, interval, concurrency=None):
        """For the scripts configured by the environment: builds unless BENCH_SKIP_BUILD=1,
        starts the simulator (demo fleet and traffic) and the exporter on the demo config
        (checked first), and returns the exporter once `/-/ready` answers 200."""
        build(os.environ.get("BENCH_SKIP_BUILD") != "1")
        sim = self.start_sim(traffic=True)
        config = self.write("config.yml", demo_config(sim, self.token_file(), api_timeout,
                                                      interval, concurrency))
        self.check_config(config)
        exporter = self.start_exporter(config)
        self.wait_ready(exporter)
        note(f"simulator {sim}, exporter {exporter.url}, work directory {self.work}")
        return exporter

    def check_config(self, config, binary=None):
        """The exporter's `--config.check` of a config: the run ends if it is refused."""
        r = subprocess.run([binary or os.path.join(BIN, "mailhost_exporter"),
                            f"--config.file={config}", "--config.check"],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            die(f"the generated config is refused: {r.stdout}{r.stderr}")

    def start_exporter(self, config=None, extra=(), binary=None, log="exporter.log",
                       patience=15, fd_limit=None, env=None, peaks=False):
        """`mailhost_exporter` with `config` (or `--demo` without) on a loopback port, read back
        from its log; with `fd_limit`, under that open-file limit (soft and hard); with
        `peaks`, its threads and descriptors sampled from its start on (`Server.peaks`)."""
        cmd = [binary or os.path.join(BIN, "mailhost_exporter"), "--web.listen-address=127.0.0.1:0"]
        cmd += [f"--config.file={config}"] if config else ["--demo"]
        def limit():
            resource.setrlimit(resource.RLIMIT_NOFILE, (fd_limit, fd_limit))
        log = self.path(log)
        proc = self.spawn([*cmd, *extra], log, env=env, preexec_fn=limit if fd_limit else None)
        sampler = self.background(Peaks(proc.pid)) if peaks else None
        pattern = (r"mailhost_exporter listening.*?address=([0-9.:]+)" if config else
                   r'open this URL.*?url="?http://([0-9.:]+)')
        return Server(proc, "http://" + wait_log(log, pattern, patience, proc), log, sampler)

    def wait_ready(self, server, seconds=30):
        """Waits until the server's `/-/ready` answers 200; returns the seconds it took."""
        t0 = time.monotonic()
        wait_until("/-/ready answering 200", lambda: status(f"{server.url}/-/ready", 1) == 200,
                   seconds, proc=server.proc, log=server.log)
        return time.monotonic() - t0

    def control(self, method, path, spec=None):
        """One call to the simulator's `/_sim/` control plane: its HTTP status, 0 on failure."""
        body = None if spec is None else json.dumps(spec).encode()
        return status(self.sim_url + path, 3, method, self.token, body) or 0

    def fault(self, route, spec, method="PUT"):
        """Sets (PUT) or adds beside those in force (POST) a fault on a route of the simulator;
        the run ends if it is refused."""
        code = self.control(method, f"/_sim/faults/{route}", spec)
        if code != 200:
            die(f"setting {json.dumps(spec)} on {route} answered {code:03d}")

    def heal(self):
        """Removes every fault of every route."""
        return self.control("DELETE", "/_sim/faults")

    def flap(self, every, max_seconds, log):
        """Starts a `Flapper` in the background; it stops with the run at the latest."""
        return self.background(Flapper(self, every, max_seconds, log))

    def background(self, thread):
        """Starts a thread with a `stop()`; the run stops it when it ends."""
        self.threads.append(thread)
        thread.start()
        return thread

    def stop(self, *procs):
        """Stops these processes (all it started when none is named): TERM, then KILL those
        still there after 10 s, by process id only."""
        procs = list(procs or self.procs)
        for p in procs:
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + STOP_SECONDS
        for p in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    print(f"warning: process {p.pid} survived KILL", file=sys.stderr)
            if p in self.procs:
                self.procs.remove(p)

    def close(self):
        """Stops every thread, then every process, this run started; Ctrl-C and SIGTERM wait
        for it (it is bounded)."""
        main_thread = threading.current_thread() is threading.main_thread()
        saved = {}
        if main_thread:
            for sig in (signal.SIGINT, signal.SIGTERM):
                saved[sig] = signal.signal(sig, signal.SIG_IGN)
        try:
            for thread in self.threads:
                thread.stop()
            self.stop()
        finally:
            for sig, handler in saved.items():
                signal.signal(sig, handler)


class Flapper(threading.Thread):
    """Every `every` seconds, moves each polled route to its next phase of `PHASES`, until
    `max_seconds` have passed, the step count is reached or it is stopped; then heals every
    route. One line per change in `log`: time, step, route, phase, status of the call."""

    def __init__(self, bench, every, max_seconds, log):
        super().__init__(daemon=True)
        self.bench, self.every, self.max_seconds, self.log = bench, every, max_seconds, log
        self.stopping = threading.Event()

    @staticmethod
    def clock():
        return datetime.datetime.now().strftime("%H:%M:%S.%f")[:12]

    def run(self):
        steps = -(-self.max_seconds // self.every)
        start = time.monotonic()
        with open(self.log, "a") as f:
            step = 0
            while (step < steps and time.monotonic() - start < self.max_seconds
                   and not self.stopping.is_set()):
                for i, route in enumerate(ROUTES):
                    name, spec = PHASES[(step + i) % len(PHASES)]
                    path = f"/_sim/faults/{route}"
                    code = (self.bench.control("DELETE", path) if spec is None else
                            self.bench.control("PUT", path, spec))
                    f.write(f"{self.clock()} step={step} route={route} phase={name} "
                            f"status={code:03d}\n")
                    f.flush()
                step += 1
                self.stopping.wait(self.every)
            f.write(f"{self.clock()} healed status={self.bench.heal():03d}\n")

    def stop(self, seconds=10):
        """Asks the loop to stop and waits (at most `seconds`) for it to heal and end."""
        self.stopping.set()
        self.join(seconds)


if __name__ == "__main__":
    if sys.argv[1:] != ["build"]:
        sys.exit("usage: python3 bench/harness.py build   (the release binaries, bare_axum and "
                 "minimal_client, once, for the scripts run then with BENCH_SKIP_BUILD=1 or "
                 "without --build)")
    build(True, examples=("bare_axum", "minimal_client"))
