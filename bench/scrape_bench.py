#!/usr/bin/env python3
"""Throughput of /metrics against the same bytes served by nginx (sendfile, gzip_static) and by a
bare axum handler, in interleaved rounds of `wrk -t2 -c32`, at two fleet sizes; then the
exporter's peak memory (VmHWM) at 10,000 accounts under 32 concurrent scrapes.

Usage: python3 bench/scrape_bench.py     (needs cargo, wrk, nginx, gzip)
Environment: SIZES ("1000 2200": extra Delivery accounts per size), ROUNDS (3), DURATION (10s),
  MEMORY_ACCOUNTS (10000; 0 skips the memory part), EXPORTER (binary to measure), BENCH_SKIP_BUILD,
  BENCH_WORK.
Loopback only; every process started here is stopped on exit, by its process id.
"""

import os
import re
import subprocess
import sys
import urllib.request

import harness as h

BARE = os.path.join(h.BIN, "examples", "bare_axum")
NGINX_CONF = """worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {d}/tmp;
    proxy_temp_path {d}/tmp;
    fastcgi_temp_path {d}/tmp;
    uwsgi_temp_path {d}/tmp;
    scgi_temp_path {d}/tmp;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    default_type text/plain;
    server {{
        listen 127.0.0.1:{port};
        root {www};
        gzip_static on;
    }}
}}
"""
ROW = "{:<8} {:<7} {:<10} {:<10} {:<24} {:>10}   {}"


def start_fleet(b, extra, name, exporter_bin):
    """The simulator with `extra` more accounts, and the exporter polling just those (once an
    hour: the body stays put while it is measured). Waits until every account is on /metrics
    (at most 300 s). Returns (simulator process, exporter)."""
    b.start_sim(accounts=extra, patience=30, log=f"{name}/sim.log")
    sim = b.procs[-1]
    config = b.write(f"{name}/config.yml", h.delivery_config(
        b.sim_url, timeout="10s", concurrency=64, interval="1h", deadline="10m",
        accounts=range(h.FIRST_EXTRA, h.FIRST_EXTRA + extra)))
    # The token from the environment, as every version of the exporter reads it (EXPORTER may
    # be an older build).
    exporter = b.start_exporter(config, binary=exporter_bin, log=f"{name}/exporter.log",
                                patience=30, env={"MAILHOST_API_TOKEN": b.token})

    def every_account():
        body = h.get(f"{exporter.url}/metrics", timeout=10) or b""
        return h.count(body.decode(errors="replace"),
                       "mailhost_delivery_remaining_messages{") >= extra
    h.wait_until("every account on /metrics", every_account, 300, every=0.5,
                 proc=exporter.proc, log=exporter.log)
    return sim, exporter


def wrk_rps(b, name, url, duration, header=None):
    """One wrk run: its requests/s as wrk prints it; warns of any error or non-2xx."""
    args = ["wrk", "-t2", "-c32", f"-d{duration}", "--timeout", "10s"]
    if header:
        args += ["-H", header]
    out = h.run_tool([*args, url], 120)
    with open(b.path(f"wrk.{name}.log"), "a") as f:
        f.write(out)
    errors = [line for line in out.splitlines() if re.search("Non-2xx|Socket errors", line)]
    if errors:
        print(f"warning: {name} had errors: {' '.join(errors)}", file=sys.stderr)
    return next((line.split()[1] for line in out.splitlines() if line.startswith("Requests/sec:")),
                "")


def median(values):
    """The middle value as wrk printed it, or the mean of the two middle ones."""
    v = sorted(values, key=float)
    n = len(v)
    return v[n // 2] if n % 2 else f"{(float(v[n // 2 - 1]) + float(v[n // 2])) / 2:.2f}"


def compare(b, extra, duration, rounds, exporter_bin):
    """One size: the exporter, nginx and bare_axum serving the same body, in interleaved rounds."""
    name = f"size-{extra}"
    d = b.dir(name)
    sim, exporter = start_fleet(b, extra, name, exporter_bin)
    # The same bytes the exporter serves, for nginx and bare axum (self-metrics included).
    body = h.get(f"{exporter.url}/metrics", timeout=30)
    if body is None:
        h.die("/metrics failed")
    www = b.path(name, "www", "metrics")
    with open(www, "wb") as f:
        f.write(body)
    subprocess.run(["gzip", "-6", "-k", "-f", www], check=True)
    # nginx's workers may run as another user (nobody, when started by root): let them read the
    # bodies, nothing else (the token file stays mode 600).
    os.chmod(b.work, 0o711)
    os.chmod(d, 0o711)
    os.chmod(os.path.dirname(www), 0o755)
    for path in (www, www + ".gz"):
        os.chmod(path, 0o644)
    series = sum(1 for line in body.decode(errors="replace").splitlines()
                 if not line.startswith("#"))
    size, gz_size = os.path.getsize(www), os.path.getsize(www + ".gz")

    nginx_port, bare_port = h.free_port(), h.free_port()
    ngx = b.dir(name, "nginx")
    conf = b.write(f"{name}/nginx/nginx.conf",
                   NGINX_CONF.format(d=ngx, port=nginx_port, www=os.path.dirname(www)))
    nginx = b.spawn(["nginx", "-p", ngx, "-c", conf, "-g", "daemon off;"],
                    os.path.join(ngx, "stderr"))
    bare = b.spawn([BARE, www, bare_port], os.path.join(d, "bare.log"))
    nginx_url = f"http://127.0.0.1:{nginx_port}/metrics"
    bare_url = f"http://127.0.0.1:{bare_port}/metrics"
    h.wait_until("nginx and bare_axum answering",
                 lambda: h.status(nginx_url, 1) == 200 and h.status(bare_url, 1) == 200, 10,
                 log=d)
    # nginx really answers gzip from the .gz file.
    req = urllib.request.Request(nginx_url, headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(req, timeout=10) as r:
        if (r.headers.get("Content-Encoding") or "").lower() != "gzip":
            h.die("nginx does not serve metrics.gz")

    targets = [("exporter_plain", f"{exporter.url}/metrics", None),
               ("exporter_gzip", f"{exporter.url}/metrics", "Accept-Encoding: gzip"),
               ("nginx_sendfile", nginx_url, None),
               ("nginx_gzip_static", nginx_url, "Accept-Encoding: gzip"),
               ("bare_axum_plain", bare_url, None)]
    results = {t[0]: [] for t in targets}
    for round_ in range(1, rounds + 1):
        for target, url, header in targets:
            rps = wrk_rps(b, f"{target}.{extra}", url, duration, header)
            results[target].append(rps)
            h.note(f"size {extra} round {round_} {target}: {rps} req/s")
    med = {}
    for target, values in results.items():
        med[target] = median(values)
        print(ROW.format(series, extra, size, gz_size, target, med[target],
                         "".join(f"{v} " for v in values)), flush=True)
    m = {k: float(v) for k, v in med.items()}
    print(f"ratios: plain/bare_axum {m['exporter_plain'] / m['bare_axum_plain']:.2f} "
          f"(target >= 0.90), plain/nginx_sendfile {m['exporter_plain'] / m['nginx_sendfile']:.2f} "
          f"(>= 0.85), gzip/nginx_gzip_static "
          f"{m['exporter_gzip'] / m['nginx_gzip_static']:.2f} (>= 0.50)", flush=True)
    b.stop(bare, nginx, exporter.proc, sim)


def memory(b, accounts, exporter_bin):
    """The exporter's memory at `accounts` accounts, before and after 5 s of 32 concurrent plain
    scrapes, then gzip ones."""
    sim, exporter = start_fleet(b, accounts, f"memory-{accounts}", exporter_bin)
    body = h.get(f"{exporter.url}/metrics", timeout=30) or b""

    def kib(field):
        return h.status_kib(exporter.pid, field)
    print(f"memory at {accounts} accounts (body {len(body)} bytes): VmRSS before {kib('VmRSS')} "
          f"KiB, VmHWM before {kib('VmHWM')} KiB", flush=True)
    for header in (None, "Accept-Encoding: gzip"):
        wrk_rps(b, "memory", f"{exporter.url}/metrics", "5s", header)
        print(f"after 5 s of wrk -t2 -c32 {header or 'plain'}: VmRSS {kib('VmRSS')} KiB, "
              f"VmHWM {kib('VmHWM')} KiB (target <= 204800)", flush=True)
    b.stop(exporter.proc, sim)


def run():
    sizes = [int(s) for s in os.environ.get("SIZES", "1000 2200").split()]
    rounds = h.env_int("ROUNDS", 3)
    duration, _ = h.env_seconds("DURATION", "10s")
    memory_accounts = h.env_int("MEMORY_ACCOUNTS", 10000)
    # Another exporter binary (for a before/after comparison), else this tree's release build.
    exporter_bin = os.environ.get("EXPORTER") or os.path.join(h.BIN, "mailhost_exporter")
    for tool, package in (("wrk", "wrk"), ("nginx", "nginx"), ("gzip", "gzip")):
        h.need(tool, package)

    with h.Bench("mailhost-scrape-bench.", os.environ.get("BENCH_WORK")) as b:
        h.build(os.environ.get("BENCH_SKIP_BUILD") != "1", examples=("bare_axum",),
                check=("mailhost_sim",))
        if not os.access(exporter_bin, os.X_OK):
            h.die(f"no exporter binary at {exporter_bin}")
        h.note(f"work directory {b.work}; wrk -t2 -c32 -d{duration}; {rounds} interleaved "
               f"rounds; {len(os.sched_getaffinity(0))} cores")
        print(ROW.format("series", "accounts", "body", "gz_body", "target", "median_rps",
                         "rounds"), flush=True)
        for extra in sizes:
            compare(b, extra, duration, rounds, exporter_bin)
        if memory_accounts > 0:
            memory(b, memory_accounts, exporter_bin)


if __name__ == "__main__":
    h.main(run)
