"""Shared pieces of the Python benchmarks: waiting on a log line, plain HTTP calls, and a
process's memory as /proc reports it. Every wait is bounded."""

import re
import sys
import time
import urllib.request


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


def status_kib(pid, field):
    """A memory figure of a process in KiB (`VmRSS`, `VmHWM`), 0 if absent."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0
