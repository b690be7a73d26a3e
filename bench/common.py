"""Shared pieces of the Python benchmarks: starting the simulator and stopping what was started,
waiting on a log line, plain HTTP calls, and a process's memory as /proc reports it. Every wait
is bounded."""

import os
import re
import subprocess
import sys
import time
import urllib.request
import zlib


def wait_log(path, pattern, seconds):
    """The first group of `pattern` in the file at `path`, once it appears; exits after `seconds`."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        with open(path, encoding="utf-8", errors="replace") as f:
            m = re.search(pattern, f.read())
        if m:
            return m.group(1)
        time.sleep(0.1)
    sys.exit(f"gave up waiting for {pattern!r} in {path}")


def http(method, url, token=None, body=None, timeout=10):
    """The body of one request, as text; `token` goes in the simulator's management header."""
    req = urllib.request.Request(url, method=method, data=body)
    if token:
        req.add_header("X-Api-Token", token)
    if body is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read().decode()


def http_gzip(url, timeout=30):
    """The raw body of a GET that asks for gzip, as the scrapers of a large fleet do."""
    req = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read()


def first_member(gz, limit=1 << 20):
    """The text of the first gzip member of `gz` (the health section of a gzipped /metrics)."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    return d.decompress(gz[:limit]).decode(errors="replace")


def status_kib(pid, field):
    """A memory figure of a process in KiB (`VmRSS`, `VmHWM`), 0 if absent."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def start_sim(bin_dir, work, token, accounts, procs, patience=120, tenants=0):
    """Starts `mailhost_sim` with `accounts` extra Delivery accounts (ids 100001 upwards) on a
    loopback port, split among `tenants` more tokens (`<token>-t0` and on) when asked, appends it
    to `procs`, and returns its URL once it listens."""
    log = os.path.join(work, "sim.log")
    procs.append(subprocess.Popen(
        [os.path.join(bin_dir, "mailhost_sim"), "--listen", "127.0.0.1:0",
         "--extra-accounts", str(accounts), "--extra-tenants", str(tenants)],
        env={**os.environ, "MAILHOST_SIM_TOKEN": token, "RUST_LOG": "warn,mailhost_sim=info",
             "NO_COLOR": "1"},
        stdout=subprocess.DEVNULL, stderr=open(log, "w")))
    return wait_log(log, r"url=(http://[0-9.:]+)", patience)


def start_exporter(bin_dir, config, log, procs, extra=()):
    """Starts `mailhost_exporter` with `config` on a loopback port, its standard error into the
    file `log`, appends it to `procs` and returns the process (not waiting for it to listen)."""
    proc = subprocess.Popen(
        [os.path.join(bin_dir, "mailhost_exporter"), f"--config.file={config}",
         "--web.listen-address=127.0.0.1:0", *extra],
        stdout=subprocess.DEVNULL, stderr=open(log, "w"))
    procs.append(proc)
    return proc


def stop(procs):
    """Stops every process started, politely first, then for good after 10 s."""
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
