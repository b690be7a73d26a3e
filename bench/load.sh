#!/usr/bin/env bash
# Load benchmark of /metrics while the upstream is slow and flapping.
#
# Starts mailhost_sim (demo fleet, traffic generator) and mailhost_exporter (every collector on a
# short interval, API timeout shorter than the injected latency) on free loopback ports, then:
#   1. a baseline: wrk against /metrics with a healthy upstream;
#   2. the load: the same wrk run while a background loop turns every polled route, every
#      FLAP_EVERY seconds, through latency past the timeout, 500, 503, 429 with Retry-After,
#      malformed bodies and no fault;
# and prints a Markdown report: machine, revision, commands, throughput, latency percentiles,
# non-2xx responses, socket errors, resident memory, and the exporter's own failure counters.
#
# Usage: bench/load.sh            (from anywhere; needs cargo, curl, wrk)
# Environment: DURATION (30s), THREADS (2), CONNECTIONS (64), FLAP_EVERY (2), BASELINE (1 = run
# the healthy baseline first, 0 = skip it), BENCH_SKIP_BUILD (1 = use existing release binaries),
# BENCH_WORK (directory for logs and raw outputs; default a new one under /tmp).
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DURATION=${DURATION:-30s}
THREADS=${THREADS:-2}
CONNECTIONS=${CONNECTIONS:-64}
FLAP_EVERY=${FLAP_EVERY:-2}
BASELINE=${BASELINE:-1}

[[ $DURATION =~ ^([0-9]+)s$ ]] || bench_die "DURATION must be whole seconds, like 30s"
duration_s=${BASH_REMATCH[1]}
# The flapping starts a little before the load and may outlive it by a few steps, never more.
flap_max=$((duration_s + 10))

bench_need curl curl
bench_need wrk wrk
bench_need cargo "cargo (or rustup)"

WORK=${BENCH_WORK:-$(mktemp -d /tmp/mailhost-bench.XXXXXX)}
mkdir -p "$WORK"
trap bench_cleanup EXIT
trap 'exit 130' INT TERM

bench_build
bench_setup "$WORK"
bench_start_sim
bench_write_config
bench_start_exporter
echo "# simulator $SIM_URL, exporter $EXP_URL, work directory $WORK" >&2

lua="$ROOT/bench/wrk_report.lua"
wrk_cmd=(wrk "-t$THREADS" "-c$CONNECTIONS" "-d$DURATION" --latency -s "$lua" "$EXP_URL/metrics")
# The command as a reader would type it from the repository root.
wrk_shown="wrk -t$THREADS -c$CONNECTIONS -d$DURATION --latency -s bench/wrk_report.lua $EXP_URL/metrics"

# Scrape once: a sanity check of the body, and the counters before any fault.
curl -sf --max-time 5 "$EXP_URL/metrics" >"$WORK/metrics.before" || bench_die "/metrics failed before the load"
body_bytes=$(wc -c <"$WORK/metrics.before")
body_lines=$(grep -vc '^#' "$WORK/metrics.before" || true)
rss_ready=$(bench_status_field "$EXP_PID" VmRSS)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)

if [[ $BASELINE == 1 ]]; then
    echo "# baseline: ${wrk_cmd[*]} (healthy upstream)" >&2
    "${wrk_cmd[@]}" >"$WORK/wrk.baseline.txt" 2>&1 || bench_die "wrk failed: $(tail -n 5 "$WORK/wrk.baseline.txt")"
    curl -sf --max-time 5 "$EXP_URL/metrics" >"$WORK/metrics.after_baseline" || true
fi

# The upstream turns slow and flapping for the whole load.
rm -f "$WORK/flap.stop" "$WORK/flap.log"
bench_flap "$FLAP_EVERY" "$flap_max" "$WORK/flap.log" &
flap_pid=$!
BENCH_PIDS+=("$flap_pid")
# Two flapping steps before measuring, so every route is already misbehaving.
sleep $((2 * FLAP_EVERY))

rss_before=$(bench_status_field "$EXP_PID" VmRSS)
echo "# load: ${wrk_cmd[*]} (upstream slow and flapping)" >&2
"${wrk_cmd[@]}" >"$WORK/wrk.load.txt" 2>&1 || bench_die "wrk failed: $(tail -n 5 "$WORK/wrk.load.txt")"
rss_after=$(bench_status_field "$EXP_PID" VmRSS)
rss_peak=$(bench_status_field "$EXP_PID" VmHWM)
curl -sf --max-time 5 "$EXP_URL/metrics" >"$WORK/metrics.after" || bench_die "/metrics failed after the load"

# Stop the flapping (bounded: it notices the stop file within one step) and heal the upstream.
bench_stop_flap "$flap_pid"
heal_status=$(bench_heal)
fault_changes=$(grep -c ' step=' "$WORK/flap.log" || true)
fault_refused=$(grep ' step=' "$WORK/flap.log" | grep -vcE 'status=(200|204)$' || true)
flap_steps=$(awk '/ step=/ { sub("step=", "", $2); if ($2 + 1 > n) n = $2 + 1 } END { print n + 0 }' "$WORK/flap.log")

# After healing, how long until every collector succeeds again: at most 90 s, because a circuit
# breaker opened by the faults stays open for its cool-down (api.circuit_breaker_cooldown, 60 s
# by default) before a probe may close it.
circuit_open=$(grep -E '^mailhost_api_circuit_open\{' "$WORK/metrics.after" | awk '$NF + 0 > 0 { n++ } END { print n + 0 }')
recovered="not within 90 s"
for ((i = 0; i < 180; i++)); do
    if curl -sf --max-time 2 "$EXP_URL/metrics" >"$WORK/metrics.healed" &&
        grep -q '^mailhost_collector_success' "$WORK/metrics.healed" &&
        ! grep -E '^mailhost_collector_success\{' "$WORK/metrics.healed" | grep -qvE ' 1(\.0)?$'; then
        recovered="$((i / 2)).$((i % 2 * 5)) s"
        break
    fi
    sleep 0.5
done
rss_end=$(bench_status_field "$EXP_PID" VmRSS)

# Figures from the Lua report: "bench <key> <value>".
fig() {
    awk -v k="$2" '$1 == "bench" && $2 == k { print $3; found = 1 } END { if (!found) print "?" }' "$1"
}
ms() {
    awk -v us="$1" 'BEGIN { if (us == "?") print "?"; else printf "%.2f ms", us / 1000 }'
}
rps() {
    awk -v r="$(fig "$1" requests)" -v d="$(fig "$1" duration_us)" 'BEGIN { printf "%.0f", r / (d / 1e6) }'
}
# wrk's own "Non-2xx or 3xx responses" line, or 0 when it prints none.
wrk_non2xx() {
    awk '/Non-2xx or 3xx responses/ { print $NF; found = 1 } END { if (!found) print 0 }' "$1"
}
statuses() {
    awk '$1 == "bench" && $2 ~ /^status_/ { sub("status_", "", $2); printf "%s%s: %s", sep, $2, $3; sep = ", " }' "$1"
}
row() {
    local f=$1 label=$2
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$label" \
        "$(rps "$f")" "$(ms "$(fig "$f" latency_p50_us)")" "$(ms "$(fig "$f" latency_p75_us)")" \
        "$(ms "$(fig "$f" latency_p90_us)")" "$(ms "$(fig "$f" latency_p99_us)")" \
        "$(ms "$(fig "$f" latency_max_us)")" "$(fig "$f" requests)" "$(fig "$f" non_2xx)" \
        "$(wrk_non2xx "$f")" \
        "connect $(fig "$f" errors_connect), read $(fig "$f" errors_read), write $(fig "$f" errors_write), timeout $(fig "$f" errors_timeout)" \
        "$(statuses "$f")"
}
counter_delta() {
    # Failures by reason over the load: after minus before.
    join -a1 -e0 -o '0,1.2,2.2' <(bench_sum_by "$WORK/metrics.after" mailhost_api_request_failures_total reason | sort) \
        <(bench_sum_by "$WORK/metrics.before" mailhost_api_request_failures_total reason | sort) |
        awk '{ printf "| %s | %d | %d |\n", $1, $2, $2 - $3 }' | sort -t'|' -k3,3nr
}
total() {
    bench_sum_by "$1" "$2" __none__ | awk '{ s += $2 } END { print s + 0 }'
}

report() {
    echo "## Load benchmark: /metrics under a slow and flapping upstream"
    echo
    echo "- Date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "- Machine: $(bench_machine)"
    echo "- Revision: $(bench_revision)"
    echo "- Load average (1, 5, 15 min) at the start: $load_start; at the end: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine skews the figures)"
    echo "- wrk: $(wrk -v 2>&1 | head -n 1 | awk '{ print $1, $2 }')"
    echo "- Command: \`$wrk_shown\` (the port is picked at random; run by \`bench/load.sh\`)"
    echo "- Exporter: every collector, interval $COLLECTOR_INTERVAL, \`api.timeout\` $API_TIMEOUT; /metrics body $body_bytes bytes, $body_lines samples (text format, no gzip: wrk sends no Accept-Encoding)"
    echo "- Upstream during the load: every ${FLAP_EVERY} s ($flap_steps steps, $fault_changes fault changes, $fault_refused refused) each polled route moves to its next phase of: ${PHASE_NAMES[*]}"
    echo
    echo "| Run | Requests/s | p50 | p75 | p90 | p99 | Max | Requests | Non-2xx | wrk \"Non-2xx or 3xx\" | Socket errors | Statuses |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
    if [[ $BASELINE == 1 ]]; then
        row "$WORK/wrk.baseline.txt" "baseline, healthy upstream"
    fi
    row "$WORK/wrk.load.txt" "load, slow and flapping upstream"
    echo
    echo "Resident memory of the exporter (VmRSS, KiB): ready $rss_ready, before the load $rss_before, after the load $rss_after, peak (VmHWM) $rss_peak, after recovery $rss_end."
    echo
    echo "Upstream calls during the faulted load (\`mailhost_api_requests_total\`): $(($(total "$WORK/metrics.after" mailhost_api_requests_total) - $(total "$WORK/metrics.before" mailhost_api_requests_total))), retries (\`mailhost_api_retries_total\`): $(($(total "$WORK/metrics.after" mailhost_api_retries_total) - $(total "$WORK/metrics.before" mailhost_api_retries_total)))."
    echo
    echo "| \`mailhost_api_request_failures_total\` reason | after the load | during the load |"
    echo "|---|---|---|"
    counter_delta
    echo
    echo "Circuits open at the end of the load (\`mailhost_api_circuit_open\` > 0): $circuit_open endpoint(s)."
    echo "Faults healed (status $heal_status); every collector successful again after: $recovered."
}

report | tee "$WORK/report.md"
echo >&2
echo "# raw outputs and logs: $WORK (wrk.*.txt, flap.log, metrics.*, *.log)" >&2
