#!/usr/bin/env bash
# Memory of the exporter against hostile but valid answers (release binaries, loopback only).
#
#   1. tiny objects: every polled route answers ~4 MB (TINY_BYTES) of tiny objects `{"a":1}`
#      next to its real records, with api.concurrency 8 and 16 targets (8 single-record calls
#      at once); prints the exporter's peak (VmHWM) and current (VmRSS) resident memory;
#   2. changing keys: every polled route answers fresh random keys with unreadable values on
#      every request (KEYS_COUNT per object), for KEYS_SECONDS; prints VmRSS at the start and
#      every SAMPLE_EVERY seconds, and the number of parse-problem warn lines in the log.
#
# Usage: bench/hostile_bodies.sh     (from anywhere; needs cargo and curl)
# Environment: TINY_SECONDS (30), TINY_BYTES (4000000), KEYS_SECONDS (300), KEYS_COUNT (20),
# SAMPLE_EVERY (30), BENCH_SKIP_BUILD (1 = use existing release binaries), BENCH_WORK.
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TINY_SECONDS=${TINY_SECONDS:-30}
TINY_BYTES=${TINY_BYTES:-4000000}
KEYS_SECONDS=${KEYS_SECONDS:-300}
KEYS_COUNT=${KEYS_COUNT:-20}
SAMPLE_EVERY=${SAMPLE_EVERY:-30}
API_TIMEOUT=${API_TIMEOUT:-5s}
COLLECTOR_INTERVAL=${COLLECTOR_INTERVAL:-2s}

bench_need curl curl
bench_need cargo "cargo (or rustup)"

WORK=${BENCH_WORK:-$(mktemp -d /tmp/mailhost-hostile.XXXXXX)}
mkdir -p "$WORK"
trap bench_cleanup EXIT
trap 'exit 130' INT TERM

bench_build
bench_setup "$WORK"
bench_start_sim
bench_write_config
# Eight calls at once: the four accounts and the four mailboxes answer one record each.
sed -i "s|^  timeout: .*|  timeout: $API_TIMEOUT\n  concurrency: 8|" "$WORK/config.yml"
bench_start_exporter
echo "# simulator $SIM_URL, exporter $EXP_URL, work directory $WORK" >&2

set_all() {
    local route status
    for route in "${ROUTES[@]}"; do
        status=$(bench_control PUT "/_sim/faults/$route" "$1")
        [[ $status == 200 ]] || bench_die "setting $1 on $route answered $status"
    done
}

echo "## Hostile bodies: $(bench_machine), revision $(bench_revision)"
echo
echo "### 1. Tiny objects: $TINY_BYTES bytes per answer, concurrency 8, $TINY_SECONDS s"
rss_before=$(bench_status_field "$EXP_PID" VmRSS)
set_all "{\"body\": {\"tiny_objects\": {\"bytes\": $TINY_BYTES}}}"
for ((i = 0; i < TINY_SECONDS; i++)); do
    kill -0 "$EXP_PID" 2>/dev/null || bench_die "the exporter exited; see $WORK/exporter.log"
    sleep 1
done
curl -sf --max-time 5 "$EXP_URL/metrics" >"$WORK/metrics.tiny" || bench_die "/metrics failed"
echo "- VmRSS before: $rss_before KiB; after: $(bench_status_field "$EXP_PID" VmRSS) KiB; peak VmHWM: $(bench_status_field "$EXP_PID" VmHWM) KiB"
echo "- requests answered 200, by endpoint:"
grep '^mailhost_api_requests_total{.*code="200"}' "$WORK/metrics.tiny" | sed 's/^/    /'
echo "- decode failures, by endpoint:"
grep '^mailhost_api_request_failures_total{.*reason="decode"}' "$WORK/metrics.tiny" | sed 's/^/    /'
bench_heal >/dev/null

echo
echo "### 2. Changing keys: $KEYS_COUNT fresh keys per object and answer, $KEYS_SECONDS s"
set_all "{\"body\": {\"changing_keys\": {\"count\": $KEYS_COUNT}}}"
sleep 5
start_rss=$(bench_status_field "$EXP_PID" VmRSS)
echo "- t=5s VmRSS $start_rss KiB"
for ((t = SAMPLE_EVERY; t <= KEYS_SECONDS; t += SAMPLE_EVERY)); do
    sleep "$SAMPLE_EVERY"
    kill -0 "$EXP_PID" 2>/dev/null || bench_die "the exporter exited; see $WORK/exporter.log"
    echo "- t=$((t + 5))s VmRSS $(bench_status_field "$EXP_PID" VmRSS) KiB"
done
curl -sf --max-time 5 "$EXP_URL/metrics" >"$WORK/metrics.keys" || bench_die "/metrics failed"
echo "- parse problems counted:"
grep '^mailhost_parse_problems_total' "$WORK/metrics.keys" | sed 's/^/    /'
echo "- warn lines for parse problems: $(grep -c 'unexpected shape in upstream answer; value skipped (logged once per path)' "$WORK/exporter.log" || true); suppression lines: $(grep -c 'no longer logged at warn level' "$WORK/exporter.log" || true)"
echo "- peak VmHWM over the whole run: $(bench_status_field "$EXP_PID" VmHWM) KiB"
bench_heal >/dev/null
