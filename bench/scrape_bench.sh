#!/usr/bin/env bash
# Throughput of /metrics against the same bytes served by nginx (sendfile, gzip_static) and by a
# bare axum handler, in interleaved rounds of `wrk -t2 -c32`, at two fleet sizes; then the
# exporter's peak memory (VmHWM) at 10,000 accounts under 32 concurrent scrapes.
#
# Usage: bench/scrape_bench.sh     (needs cargo, curl, wrk, nginx, gzip, python3)
# Environment: SIZES ("1000 2200": extra Delivery accounts per size), ROUNDS (3), DURATION (10s),
#   MEMORY_ACCOUNTS (10000; 0 skips the memory part), EXPORTER (binary to measure), BENCH_SKIP_BUILD,
#   BENCH_WORK.
# Loopback only; every process started here is stopped on exit, by its process id.
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SIZES=${SIZES:-"1000 2200"}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
MEMORY_ACCOUNTS=${MEMORY_ACCOUNTS:-10000}
FIRST_EXTRA=100001
# Another exporter binary (for a before/after comparison), else this tree's release build.
EXPORTER=${EXPORTER:-$BIN/mailhost_exporter}

bench_need curl curl
bench_need wrk wrk
bench_need nginx nginx
bench_need gzip gzip
bench_need python3 python3
bench_need cargo "cargo (or rustup)"

WORK=${BENCH_WORK:-$(mktemp -d /tmp/mailhost-scrape-bench.XXXXXX)}
mkdir -p "$WORK"
trap bench_cleanup EXIT
trap 'exit 130' INT TERM

if [[ ${BENCH_SKIP_BUILD:-0} != 1 ]]; then
    (cd "$ROOT" && cargo build --release --locked --bins --example bare_axum) >&2
fi
BARE="$ROOT/target/release/examples/bare_axum"
[[ -x $BARE && -x $EXPORTER && -x $BIN/mailhost_sim ]] || bench_die "release binaries missing"
bench_setup "$WORK"

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# stop_pid PID: TERM, then at most 5 s, then KILL; only that process.
stop_pid() {
    local pid=$1 i
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

# start_fleet EXTRA DIR: the simulator with EXTRA more accounts, and the exporter polling just
# those (once an hour: the body stays put while it is measured). Waits until every account is
# on /metrics (at most 300 s). Sets SIM_PID, EXP_PID, EXP_URL.
start_fleet() {
    local extra=$1 dir=$2 i ids n
    mkdir -p "$dir"
    MAILHOST_SIM_TOKEN=$SIM_TOKEN "$BIN/mailhost_sim" --listen 127.0.0.1:0 --extra-accounts "$extra" \
        >"$dir/sim.log" 2>&1 &
    SIM_PID=$!
    BENCH_PIDS+=("$SIM_PID")
    SIM_URL=$(bench_wait_log "$dir/sim.log" '.*simulated provider listening url=(http:[^ ]*).*' 30) ||
        bench_die "the simulator did not start; see $dir/sim.log"
    ids=$(seq -s ', ' "$FIRST_EXTRA" $((FIRST_EXTRA + extra - 1)))
    cat >"$dir/config.yml" <<CONF
api:
  base_url: $SIM_URL
  timeout: 10s
  concurrency: 64
collectors:
  delivery_account:
    interval: 1h
    deadline: 10m
    accounts: [$ids]
CONF
    MAILHOST_API_TOKEN=$SIM_TOKEN "$EXPORTER" --config.file="$dir/config.yml" \
        --web.listen-address=127.0.0.1:0 >"$dir/exporter.log" 2>&1 &
    EXP_PID=$!
    BENCH_PIDS+=("$EXP_PID")
    local addr
    addr=$(bench_wait_log "$dir/exporter.log" '.*mailhost_exporter listening.*address=([0-9.:]+).*' 30) ||
        bench_die "the exporter did not start; see $dir/exporter.log"
    EXP_URL="http://$addr"
    for ((i = 0; i < 600; i++)); do
        n=$(curl -sf --max-time 10 "$EXP_URL/metrics" | grep -c '^mailhost_delivery_remaining_messages{' || true)
        [[ $n -ge $extra ]] && return 0
        kill -0 "$EXP_PID" 2>/dev/null || bench_die "the exporter exited; see $dir/exporter.log"
        sleep 0.5
    done
    bench_die "not every account reported within 300 s; see $dir/exporter.log"
}

# wrk_rps NAME URL [HEADER]: one wrk run; prints requests/s, or fails on any error or non-2xx.
wrk_rps() {
    local name=$1 url=$2 header=${3:-} out
    local args=(-t2 -c32 -d"$DURATION" --timeout 10s)
    [[ -n $header ]] && args+=(-H "$header")
    out=$(timeout 120 wrk "${args[@]}" "$url")
    printf '%s\n' "$out" >>"$WORK/wrk.$name.log"
    if grep -qE 'Non-2xx|Socket errors' <<<"$out"; then
        echo "warning: $name had errors: $(grep -E 'Non-2xx|Socket errors' <<<"$out")" >&2
    fi
    awk '/^Requests\/sec:/ { print $2 }' <<<"$out"
}

median() {
    sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

echo "# work directory $WORK; wrk -t2 -c32 -d$DURATION; $ROUNDS interleaved rounds; $(nproc) cores" >&2
printf '%-8s %-7s %-10s %-10s %-24s %10s   %s\n' series accounts body gz_body target "median_rps" "rounds"
for extra in $SIZES; do
    dir="$WORK/size-$extra"
    start_fleet "$extra" "$dir"
    # The same bytes the exporter serves, for nginx and bare axum (self-metrics included).
    curl -sf --max-time 30 "$EXP_URL/metrics" -o "$dir/www/metrics" --create-dirs
    gzip -6 -k -f "$dir/www/metrics"
    # nginx's workers may run as another user (nobody, when started by root): let them read the
    # bodies, nothing else (the token file stays mode 600).
    chmod 711 "$WORK" "$dir"
    chmod 755 "$dir/www"
    chmod 644 "$dir/www/metrics" "$dir/www/metrics.gz"
    series=$(grep -vc '^#' "$dir/www/metrics")
    body=$(stat -c %s "$dir/www/metrics")
    gzbody=$(stat -c %s "$dir/www/metrics.gz")

    nginx_port=$(free_port)
    mkdir -p "$dir/nginx"
    cat >"$dir/nginx/nginx.conf" <<CONF
worker_processes 1;
pid $dir/nginx/nginx.pid;
error_log $dir/nginx/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $dir/nginx/tmp;
    proxy_temp_path $dir/nginx/tmp;
    fastcgi_temp_path $dir/nginx/tmp;
    uwsgi_temp_path $dir/nginx/tmp;
    scgi_temp_path $dir/nginx/tmp;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    default_type text/plain;
    server {
        listen 127.0.0.1:$nginx_port;
        root $dir/www;
        gzip_static on;
    }
}
CONF
    nginx -p "$dir/nginx" -c "$dir/nginx/nginx.conf" -g 'daemon off;' 2>"$dir/nginx/stderr" &
    nginx_pid=$!
    BENCH_PIDS+=("$nginx_pid")
    bare_port=$(free_port)
    "$BARE" "$dir/www/metrics" "$bare_port" 2>"$dir/bare.log" &
    bare_pid=$!
    BENCH_PIDS+=("$bare_pid")
    for ((i = 0; i <= 100; i++)); do
        curl -sf -o /dev/null --max-time 1 "http://127.0.0.1:$nginx_port/metrics" &&
            curl -sf -o /dev/null --max-time 1 "http://127.0.0.1:$bare_port/metrics" && break
        [[ $i == 100 ]] && bench_die "nginx or bare_axum did not answer within 10 s; see $dir"
        sleep 0.1
    done
    # nginx really answers gzip from the .gz file.
    curl -sf -H 'Accept-Encoding: gzip' -D - -o /dev/null "http://127.0.0.1:$nginx_port/metrics" |
        grep -qi '^content-encoding: gzip' || bench_die "nginx does not serve metrics.gz"

    names=(exporter_plain exporter_gzip nginx_sendfile nginx_gzip_static bare_axum_plain)
    urls=("$EXP_URL/metrics" "$EXP_URL/metrics" "http://127.0.0.1:$nginx_port/metrics"
        "http://127.0.0.1:$nginx_port/metrics" "http://127.0.0.1:$bare_port/metrics")
    headers=("" "Accept-Encoding: gzip" "" "Accept-Encoding: gzip" "")
    declare -A results=()
    for ((round = 1; round <= ROUNDS; round++)); do
        for i in "${!names[@]}"; do
            rps=$(wrk_rps "${names[i]}.$extra" "${urls[i]}" "${headers[i]}")
            results[${names[i]}]+="$rps "
            echo "# size $extra round $round ${names[i]}: $rps req/s" >&2
        done
    done
    declare -A med=()
    for name in "${names[@]}"; do
        # shellcheck disable=SC2086
        med[$name]=$(printf '%s\n' ${results[$name]} | median)
        printf '%-8s %-7s %-10s %-10s %-24s %10s   %s\n' "$series" "$extra" "$body" "$gzbody" "$name" "${med[$name]}" "${results[$name]}"
    done
    awk -v p="${med[exporter_plain]}" -v b="${med[bare_axum_plain]}" -v n="${med[nginx_sendfile]}" \
        -v g="${med[exporter_gzip]}" -v s="${med[nginx_gzip_static]}" 'BEGIN {
        printf "ratios: plain/bare_axum %.2f (target >= 0.90), plain/nginx_sendfile %.2f (>= 0.85), gzip/nginx_gzip_static %.2f (>= 0.50)\n", p / b, p / n, g / s }'
    unset results med
    for pid in "$bare_pid" "$nginx_pid" "$EXP_PID" "$SIM_PID"; do stop_pid "$pid"; done
done

if [[ $MEMORY_ACCOUNTS -gt 0 ]]; then
    dir="$WORK/memory-$MEMORY_ACCOUNTS"
    start_fleet "$MEMORY_ACCOUNTS" "$dir"
    body=$(curl -sf --max-time 30 "$EXP_URL/metrics" | wc -c)
    printf 'memory at %s accounts (body %s bytes): VmRSS before %s KiB, VmHWM before %s KiB\n' \
        "$MEMORY_ACCOUNTS" "$body" "$(bench_status_field "$EXP_PID" VmRSS)" "$(bench_status_field "$EXP_PID" VmHWM)"
    for header in "" "Accept-Encoding: gzip"; do
        DURATION=5s wrk_rps "memory" "$EXP_URL/metrics" "$header" >/dev/null
        printf 'after 5 s of wrk -t2 -c32 %s: VmRSS %s KiB, VmHWM %s KiB (target <= 204800)\n' \
            "${header:-plain}" "$(bench_status_field "$EXP_PID" VmRSS)" "$(bench_status_field "$EXP_PID" VmHWM)"
    done
    stop_pid "$EXP_PID"
    stop_pid "$SIM_PID"
fi
