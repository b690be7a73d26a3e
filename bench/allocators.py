#!/usr/bin/env python3
"""The binary's memory allocator, measured: the exporter built three ways (glibc's allocator with
`--no-default-features`, jemalloc, the default, and mimalloc with `--no-default-features
--features mimalloc`), each run through the same workloads in turn, on loopback, release builds.

Per allocator it reports:

- fleet, 10 tenants: `bench/fleet.py --accounts 100000 --tenants 10 --concurrency 8
  --latency-ms 1` (issue 30's case, 100,000 accounts over 10 tenants, answers in 1 ms): the first
  refresh and the exporter's VmHWM;
- fleet, one token: the same 100,000 accounts through one token (`--concurrency 64`);
- glibc only, also with `MALLOC_ARENA_MAX=2` (what the container image used to set);
- scrape throughput: `wrk -t2 -c32` for `--seconds` on `/metrics` of 2,200 accounts, plain and
  with `Accept-Encoding: gzip`, requests per second.

    python3 bench/allocators.py [--build] [--seconds 5] [--only mimalloc,system]
        [--jemalloc-conf dirty_decay_ms:10000,muzzy_decay_ms:0 ...]

`--jemalloc-conf CONF` (repeatable) adds a row of the jemalloc binary run with
`_RJEM_MALLOC_CONF=CONF`, which jemalloc reads after the options built into the binary: the
built-in ones against others, on the same binary.

`--build` builds the three binaries into target/allocators/ first (three release builds of the
exporter crate); without it they must be there. Everything it starts is stopped at the end;
every wait is bounded.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import time

import harness as h

OUT = os.path.join(h.ROOT, "target", "allocators")
VARIANTS = {
    "system": ["--no-default-features"],
    "jemalloc": [],
    "mimalloc": ["--no-default-features", "--features", "mimalloc"],
}
FIRST = h.FIRST_EXTRA


def build():
    os.makedirs(OUT, exist_ok=True)
    for name, flags in VARIANTS.items():
        h.note(f"building the exporter with {name}")
        subprocess.run(["cargo", "build", "--release", "--locked", "--bin", "mailhost_exporter",
                        *flags], cwd=h.ROOT, check=True, timeout=1800)
        shutil.copy2(os.path.join(h.BIN, "mailhost_exporter"), os.path.join(OUT, name))
    # The release build of the default features is left in place for the other benchmarks.


def fleet(binary, tenants, env=None):
    """One bench/fleet.py run; returns (first run seconds, VmHWM MiB)."""
    cmd = [sys.executable, os.path.join(h.ROOT, "bench", "fleet.py"), "--accounts", "100000",
           "--latency-ms", "1", "--binary", binary, "--patience", "600"]
    cmd += ["--tenants", "10", "--concurrency", "8"] if tenants else ["--concurrency", "64"]
    if env:
        cmd = ["env", *[f"{k}={v}" for k, v in env.items()], *cmd]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        h.die(f"fleet.py failed for {binary}:\n{r.stdout}\n{r.stderr}")
    run = float(re.search(r"first run: ([\d.]+) s", r.stdout).group(1))
    hwm = float(re.search(r"VmHWM ([\d.]+) MiB", r.stdout).group(1))
    return run, hwm


def wrk(url, seconds, gzip):
    cmd = ["wrk", "-t2", "-c32", f"-d{seconds}s"]
    if gzip:
        cmd += ["-H", "Accept-Encoding: gzip"]
    r = subprocess.run([*cmd, url], capture_output=True, text=True, timeout=seconds + 60)
    m = re.search(r"Requests/sec:\s+([\d.]+)", r.stdout)
    if not m:
        h.die(f"wrk gave no figure:\n{r.stdout}\n{r.stderr}")
    return float(m.group(1))


def throughput(binary, seconds, env=None):
    """Requests per second on /metrics of 2,200 accounts, plain and gzip."""
    n = 2200
    saved = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        return _throughput(binary, seconds, n)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _throughput(binary, seconds, n):
    with h.Bench("mailhost-allocators-") as b:
        b.start_sim(n, patience=120)
        config = b.write("config.yml", h.delivery_config(
            b.sim_url, token_file=b.token_file(), accounts=range(FIRST, FIRST + n),
            timeout="10s", **h.schedule(60)))
        server = b.start_exporter(config, patience=60, binary=binary)
        h.wait_until("every account on /metrics",
                     lambda: h.count(h.http("GET", f"{server.url}/metrics", timeout=30),
                                     "mailhost_delivery_remaining_messages{") >= n,
                     120, every=0.5, proc=server.proc, log=server.log)
        plain = wrk(f"{server.url}/metrics", seconds, gzip=False)
        gz = wrk(f"{server.url}/metrics", seconds, gzip=True)
        hwm = h.status_kib(server.pid, "VmHWM") / 1024
        b.stop(server.proc)
    return plain, gz, hwm


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", action="store_true", help="build the three binaries first")
    ap.add_argument("--seconds", type=int, default=5, help="seconds of each wrk run")
    ap.add_argument("--only", default=",".join(VARIANTS), help="comma-separated allocators")
    ap.add_argument("--jemalloc-conf", action="append", default=[],
                    help="a row more: the jemalloc binary with _RJEM_MALLOC_CONF set to this")
    args = ap.parse_args()
    h.need("wrk", "wrk")
    if args.build:
        build()
    h.build(False)  # the simulator's release binary
    names = [n for n in args.only.split(",") if n]
    for name in names:
        if not os.path.exists(os.path.join(OUT, name)):
            h.die(f"no {OUT}/{name}: run with --build")
    print(f"revision {h.revision()}, {h.now_utc()}, {h.machine()}, load {h.loadavg()}")
    print("| allocator | 10 tenants: first run | 10 tenants: VmHWM | one token: first run "
          "| one token: VmHWM | /metrics plain (req/s) | /metrics gzip (req/s) "
          "| VmHWM under the scrapes |")
    print("|---|---|---|---|---|---|---|---|")
    rows = [(n, None) for n in names]
    if "system" in names:
        rows.insert(names.index("system") + 1, ("system", {"MALLOC_ARENA_MAX": "2"}))
    if args.jemalloc_conf and not os.path.exists(os.path.join(OUT, "jemalloc")):
        h.die(f"no {OUT}/jemalloc: run with --build")
    rows += [("jemalloc", {"_RJEM_MALLOC_CONF": c}) for c in args.jemalloc_conf]
    for name, env in rows:
        binary = os.path.join(OUT, name)
        t_run, t_hwm = fleet(binary, True, env)
        o_run, o_hwm = fleet(binary, False, env)
        label = name + "".join(f" with {k}={v}" for k, v in (env or {}).items())
        if env and "MALLOC_ARENA_MAX" in env:
            print(f"| {label} | {t_run:.1f} s | {t_hwm:.0f} MiB | {o_run:.1f} s | {o_hwm:.0f} MiB "
                  f"| | | |", flush=True)
            continue
        plain, gz, s_hwm = throughput(binary, args.seconds, env)
        print(f"| {label} | {t_run:.1f} s | {t_hwm:.0f} MiB | {o_run:.1f} s | {o_hwm:.0f} MiB "
              f"| {plain:,.0f} | {gz:,.0f} | {s_hwm:.0f} MiB |", flush=True)
    print(f"load at the end {h.loadavg()}")


if __name__ == "__main__":
    h.main(main)
