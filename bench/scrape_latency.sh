#!/usr/bin/env bash
# Timing of single scrapes with hyperfine, healthy upstream and then slow and flapping upstream,
# in the three forms a scraper asks for: classic text, OpenMetrics (what Prometheus asks for), and
# gzip. Each timing includes starting curl, so compare the rows with one another rather than
# reading them as the exporter's own latency (bench/load.sh measures that with wrk).
#
# Usage: bench/scrape_latency.sh      (needs cargo, curl, hyperfine)
# Environment: RUNS (300 per command), FLAP_EVERY (2), BENCH_SKIP_BUILD, BENCH_WORK (see load.sh).
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUNS=${RUNS:-300}
FLAP_EVERY=${FLAP_EVERY:-2}

bench_need curl curl
bench_need hyperfine hyperfine
bench_need cargo "cargo (or rustup)"

WORK=${BENCH_WORK:-$(mktemp -d /tmp/mailhost-scrape.XXXXXX)}
mkdir -p "$WORK"
trap bench_cleanup EXIT
trap 'exit 130' INT TERM

bench_build
bench_setup "$WORK"
bench_start_sim
bench_write_config
bench_start_exporter
echo "# simulator $SIM_URL, exporter $EXP_URL, work directory $WORK" >&2

url="$EXP_URL/metrics"
commands=(
    "curl -sf -o /dev/null $url"
    "curl -sf -o /dev/null -H 'Accept: application/openmetrics-text;version=1.0.0' $url"
    "curl -sf -o /dev/null -H 'Accept-Encoding: gzip' $url"
)
names=(text openmetrics gzip)

time_scrapes() {
    local label=$1
    local args=(-N --warmup 20 --runs "$RUNS" --style none --export-markdown "$WORK/hyperfine.$label.md")
    local i
    for i in "${!commands[@]}"; do
        args+=(--command-name "${names[i]} ($label)" "${commands[i]}")
    done
    # Bounded: RUNS scrapes per command; --time-unit keeps the columns comparable.
    timeout 300 hyperfine --time-unit millisecond "${args[@]}" >&2
}

time_scrapes healthy

rm -f "$WORK/flap.stop" "$WORK/flap.log"
bench_flap "$FLAP_EVERY" 240 "$WORK/flap.log" &
flap_pid=$!
BENCH_PIDS+=("$flap_pid")
sleep $((2 * FLAP_EVERY))
time_scrapes flapping
bench_stop_flap "$flap_pid"

echo "## Single scrapes with hyperfine ($RUNS runs each, curl start-up included)"
echo
echo "- Date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "- Machine: $(bench_machine)"
echo "- Revision: $(bench_revision)"
echo "- Load average (1, 5, 15 min): $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- $(hyperfine --version)"
echo
cat "$WORK/hyperfine.healthy.md"
tail -n +3 "$WORK/hyperfine.flapping.md"
