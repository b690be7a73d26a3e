# shellcheck shell=bash
# Shared by the benchmark scripts: starts the simulator and the exporter on free loopback ports,
# makes the simulated upstream slow and flapping, reads memory, stops everything it started.
# Sourced, not run. Every wait and loop here is bounded in count and in time.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN="$ROOT/target/release"

# The routes the exporter calls (docs/upstream.md, first table); the others are never polled.
ROUTES=(delivery_account_get tracemail_dashboard tracemail_daily migration_stats email_account_get)

# What the flapping loop applies, one phase per route at a time, each route shifted by one phase
# so that at any moment the routes misbehave in different ways. API_TIMEOUT (below) is shorter
# than the latency of the first phase, so that phase ends in client timeouts.
PHASES=(
    '{"latency_ms": 1500}'
    '{"error_rate": 1.0, "error_status": 500, "latency_ms": 300}'
    '{"error_rate": 1.0, "error_status": 503}'
    '{"rate_limit_rate": 1.0, "retry_after_secs": 1}'
    '{"malformed_rate": 1.0, "latency_ms": 300}'
    'healthy'
)
PHASE_NAMES=(slow_1500ms error_500 error_503 rate_limited_429 malformed healthy)

API_TIMEOUT=${API_TIMEOUT:-1s}
COLLECTOR_INTERVAL=${COLLECTOR_INTERVAL:-2s}

# Processes started here, stopped by bench_cleanup (by process id only).
BENCH_PIDS=()

bench_die() {
    echo "error: $*" >&2
    exit 1
}

bench_need() {
    local tool=$1 package=$2
    command -v "$tool" >/dev/null 2>&1 ||
        bench_die "$tool is not installed; install it with: sudo apt-get install -y $package"
}

bench_build() {
    if [[ ${BENCH_SKIP_BUILD:-0} == 1 ]]; then
        echo "# BENCH_SKIP_BUILD=1: using the binaries already in $BIN" >&2
    else
        (cd "$ROOT" && cargo build --release --bins) >&2
    fi
    [[ -x $BIN/mailhost_sim && -x $BIN/mailhost_exporter ]] || bench_die "release binaries missing in $BIN"
}

# bench_setup WORKDIR: a random management token shared by the simulator and the exporter, kept
# in files (mode 600) rather than on command lines.
bench_setup() {
    WORK=$1
    umask 077
    SIM_TOKEN="bench-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
    printf 'X-Api-Token: %s\n' "$SIM_TOKEN" >"$WORK/token.header"
}

# Prints the first match of a sed -E expression in a log, waiting at most $3 seconds for it.
bench_wait_log() {
    local file=$1 expr=$2 seconds=$3 i found
    for ((i = 0; i < seconds * 10; i++)); do
        # The simulator logs with colours even into a file: strip them first.
        found=$(sed -E 's/\x1b\[[0-9;]*m//g' "$file" 2>/dev/null | sed -nE "s/$expr/\\1/p" | head -n 1)
        if [[ -n $found ]]; then
            printf '%s\n' "$found"
            return 0
        fi
        sleep 0.1
    done
    return 1
}

# Starts the simulator with the demo fleet and its traffic generator on a free port (port 0,
# read back from its log). Sets SIM_PID and SIM_URL.
bench_start_sim() {
    MAILHOST_SIM_TOKEN=$SIM_TOKEN "$BIN/mailhost_sim" --listen 127.0.0.1:0 --traffic \
        >"$WORK/sim.log" 2>&1 &
    SIM_PID=$!
    BENCH_PIDS+=("$SIM_PID")
    SIM_URL=$(bench_wait_log "$WORK/sim.log" '.*simulated provider listening url=(http:[^ ]*).*' 15) ||
        bench_die "the simulator did not start within 15 s; see $WORK/sim.log"
}

# The exporter's configuration: every collector, every demo target, short intervals, and a
# timeout shorter than the slow phase's latency. The token comes from MAILHOST_API_TOKEN.
bench_write_config() {
    cat >"$WORK/config.yml" <<EOF
api:
  base_url: $SIM_URL
  timeout: $API_TIMEOUT
collectors:
  delivery_account:
    interval: $COLLECTOR_INTERVAL
    accounts: [1001, 1002, 1003, 1004]
  tracemail_dashboard:
    interval: $COLLECTOR_INTERVAL
    timezone: Europe/Rome
    views:
      - account: 1001
      - domain: shop.example
  tracemail_daily:
    interval: $COLLECTOR_INTERVAL
    timezone: Europe/Rome
    accounts: [1001, 1002, 1003, 1004]
  migration:
    interval: $COLLECTOR_INTERVAL
    migrations: [MG00000001, MG00000002, MG00000003]
  mailbox:
    interval: $COLLECTOR_INTERVAL
    mailboxes:
      - {domain: D000000901, mailbox: EA00000001}
      - {domain: D000000901, mailbox: EA00000002}
      - {domain: D000000902, mailbox: EA00000003}
      - {domain: D000000902, mailbox: P000000001}
EOF
    MAILHOST_API_TOKEN=$SIM_TOKEN "$BIN/mailhost_exporter" --config.file="$WORK/config.yml" --config.check \
        >"$WORK/config.check" 2>&1 || bench_die "the generated config is refused: $(cat "$WORK/config.check")"
}

# Starts the exporter on a free port and waits (at most 30 s) for /-/ready to answer 200.
# Sets EXP_PID and EXP_URL.
bench_start_exporter() {
    MAILHOST_API_TOKEN=$SIM_TOKEN "$BIN/mailhost_exporter" --config.file="$WORK/config.yml" \
        --web.listen-address=127.0.0.1:0 >"$WORK/exporter.log" 2>&1 &
    EXP_PID=$!
    BENCH_PIDS+=("$EXP_PID")
    local addr i code
    addr=$(bench_wait_log "$WORK/exporter.log" '.*mailhost_exporter listening.*address=([0-9.:]+).*' 15) ||
        bench_die "the exporter did not start within 15 s; see $WORK/exporter.log"
    EXP_URL="http://$addr"
    for ((i = 0; i < 300; i++)); do
        code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$EXP_URL/-/ready" || true)
        [[ $code == 200 ]] && return 0
        kill -0 "$EXP_PID" 2>/dev/null || bench_die "the exporter exited; see $WORK/exporter.log"
        sleep 0.1
    done
    bench_die "/-/ready did not answer 200 within 30 s; see $WORK/exporter.log"
}

# bench_control METHOD PATH [BODY]: one call to the simulator's /_sim/ control plane; prints the
# HTTP status (000 when the call itself failed).
bench_control() {
    local method=$1 path=$2 body=${3:-}
    local args=(-s -o /dev/null -w '%{http_code}' --max-time 3 -X "$method" -H @"$WORK/token.header")
    if [[ -n $body ]]; then
        args+=(-H 'Content-Type: application/json' --data "$body")
    fi
    curl "${args[@]}" "$SIM_URL$path" || true
}

bench_heal() {
    bench_control DELETE /_sim/faults
}

# bench_flap EVERY_SECONDS MAX_SECONDS LOG: every EVERY seconds, moves each route to its next
# phase, until MAX seconds have passed, the step count is reached or $WORK/flap.stop exists;
# heals every route at the end. Run it in the background.
bench_flap() {
    local every=$1 max=$2 log=$3
    local steps=$(((max + every - 1) / every)) step i phase status start=$SECONDS
    for ((step = 0; step < steps && SECONDS - start < max; step++)); do
        [[ -e $WORK/flap.stop ]] && break
        for i in "${!ROUTES[@]}"; do
            phase=$(((step + i) % ${#PHASES[@]}))
            if [[ ${PHASES[phase]} == healthy ]]; then
                status=$(bench_control DELETE "/_sim/faults/${ROUTES[i]}")
            else
                status=$(bench_control PUT "/_sim/faults/${ROUTES[i]}" "${PHASES[phase]}")
            fi
            printf '%s step=%d route=%s phase=%s status=%s\n' \
                "$(date +%T.%N | cut -c1-12)" "$step" "${ROUTES[i]}" "${PHASE_NAMES[phase]}" "$status" >>"$log"
        done
        sleep "$every"
    done
    printf '%s healed status=%s\n' "$(date +%T.%N | cut -c1-12)" "$(bench_heal)" >>"$log"
}

# bench_stop_flap PID: asks the flapping loop to stop and waits (at most 10 s) for it to heal
# the routes and exit.
bench_stop_flap() {
    local pid=$1 i
    touch "$WORK/flap.stop"
    for ((i = 0; i < 100; i++)); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
}

# bench_status_field PID FIELD: a field of /proc/PID/status in KiB (VmRSS, VmHWM).
bench_status_field() {
    awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status"
}

# Sums a counter over every label set but one label: bench_sum_by FILE METRIC LABEL prints
# "value total" lines, largest first.
bench_sum_by() {
    local file=$1 metric=$2 label=$3
    awk -v m="$metric" -v l="$label" '
        index($0, m "{") == 1 {
            v = $NF; key = "(none)"
            if (match($0, l "=\"[^\"]*\"")) key = substr($0, RSTART + length(l) + 2, RLENGTH - length(l) - 3)
            sum[key] += v
        }
        END { for (k in sum) printf "%s %d\n", k, sum[k] }' "$file" | sort -k2,2nr
}

bench_cleanup() {
    local pid i
    touch "${WORK:-/nonexistent}/flap.stop" 2>/dev/null || true
    for pid in "${BENCH_PIDS[@]}"; do
        # Children first (a background function's sleep or curl), then the process itself.
        pkill -TERM -P "$pid" 2>/dev/null || true
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${BENCH_PIDS[@]}"; do
        for ((i = 0; i < 50; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
}

bench_machine() {
    local model mem
    model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
    mem=$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
    printf '%s CPUs (nproc), %s, %s RAM, %s' "$(nproc)" "${model:-unknown CPU}" "$mem" "$(uname -sr)"
}

bench_revision() {
    local rev
    rev=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
    if [[ -n $(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null) ]]; then
        rev="$rev (+ uncommitted changes in the working tree)"
    fi
    printf '%s' "$rev"
}
