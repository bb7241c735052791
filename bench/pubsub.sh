#!/usr/bin/env bash
# bench/pubsub.sh - publish/subscribe fan-out on this machine, in one run:
# RATE messages/s published to SUBS WebSocket subscribers of one channel,
# spread over 2 server processes, for DURATION seconds; delivered messages/s
# and publish-to-receive latency (p50/p99/max, the send time is in the
# message), side by side:
#   local     pagid -w 2 -a pubsub, one subscription per client (master broker)
#   group     the same with ?policy=drop: one pagi_easy group per worker fed
#             from the channel (one subscription per worker, shared buffer)
#   redis     pagid -w 2 with `pubsub: {backend: redis, url: ...}` (skipped
#             with a line saying why when redis-server is missing or this
#             pagid does not accept that config)
#   app       the way apps do it today: bench/pubsub_redis_app.py, 2 Python
#             asyncio processes (websockets + redis-py's asyncio pub/sub)
#             sharing the port, each talking to Redis itself
# The client is bench/psload.c (C, one process, an epoll loop per CPU, built here
# with cc): Python could not read 100,000 messages/s. Ratios are against the
# app row. A tool for people: it prints figures and never fails on them.
#
# Usage: bench/pubsub.sh            (see bench/README.md)
# Environment: PAGID, SUBS (1000), RATE (100), DURATION (s, 10), SIZE (bytes,
#   64), ROWS ("local group redis app"), REDIS_SERVER (redis-server in PATH),
#   PYTHON (/usr/bin/python3: Debian's, with python3-websockets and
#   python3-redis), RESULTS (file for the table, "" = don't write).
set -euo pipefail

SUBS=${SUBS:-1000}
RATE=${RATE:-100}
DURATION=${DURATION:-10}
SIZE=${SIZE:-64}
ROWS=${ROWS:-local group redis app}
PYTHON=${PYTHON:-/usr/bin/python3}
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RESULTS=${RESULTS-$BENCH_DIR/results/pubsub.txt}

die() { printf 'bench: %s\n' "$*" >&2; exit 1; }
note() { printf 'bench: %s\n' "$*" >&2; }

for v in SUBS RATE DURATION SIZE; do
    [[ ${!v} =~ ^[0-9]+$ && ${!v} -gt 0 ]] || die "$v must be a positive integer"
done
((SIZE >= 40 && SIZE <= 4096)) || die "SIZE must be 40 to 4096"

if [[ -n ${PAGID:-} ]]; then
    [[ -x $PAGID ]] || die "PAGID=$PAGID is not executable"
elif [[ -x ./pagid ]]; then
    PAGID=$PWD/pagid
elif command -v pagid >/dev/null; then
    PAGID=$(command -v pagid)
else
    die "no pagid binary: build it (./pagid), install it, or set PAGID=/path/to/pagid"
fi
command -v cc >/dev/null || die "cc not found"
REDIS_SERVER=${REDIS_SERVER:-$(command -v redis-server || true)}

need=$((SUBS * 2 + 1024))
if ! ulimit -n 65536 2>/dev/null; then
    hard=$(ulimit -Hn)
    [[ $hard == unlimited ]] || ulimit -n "$hard"
fi
(($(ulimit -n) >= need)) || die "the open-file limit is $(ulimit -n), $need needed for $SUBS subscribers"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/pagid-psbench.XXXXXX")
# shellcheck source=bench/lib.sh
. "$BENCH_DIR/lib.sh"

PSLOAD=$WORK/psload
cc -O2 -std=c11 -D_GNU_SOURCE -pthread -o "$PSLOAD" "$BENCH_DIR/psload.c" || die "cannot build psload"

wait_port() { # name port
    local i
    for ((i = 0; i < 100; i++)); do
        kill -0 "${PID[$1]}" 2>/dev/null || { cat "$WORK/$1/stdout.log" >&2; die "$1 exited during startup"; }
        (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null && return 0
        sleep 0.1
    done
    die "$1 not listening on 127.0.0.1:$2 within 10 s"
}

# CPU seconds (user + system) of every process in a server's process group
# (each server runs in its own session: master and workers, or the app's two).
group_cpu() {
    local hz p t=0
    hz=$(getconf CLK_TCK)
    for p in $(pgrep -g "$1" || true); do
        t=$((t + $(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$p/stat" 2>/dev/null || echo 0)))
    done
    awk -v t="$t" -v hz="$hz" 'BEGIN { printf "%.2f\n", t / hz }'
}

start_pagid() { # name port [extra yaml]
    local name=$1 port=$2 dir=$WORK/$1 user=()
    mkdir -p "$dir"
    cat >"$dir/pagid.yaml" <<EOF
limits:
  max_connections: $((SUBS + 1024))
${3:-}
EOF
    (($(id -u) == 0)) && user=(-u root)
    launch "$name" "$dir" "$PAGID" -w 2 -l "127.0.0.1:$port" -a pubsub -c "$dir/pagid.yaml" "${user[@]}"
    wait_port "$name" "$port"
}

start_redis() {
    local dir=$WORK/redis
    mkdir -p "$dir"
    REDIS_PORT=$(free_port)
    launch redis "$dir" "$REDIS_SERVER" --port "$REDIS_PORT" --bind 127.0.0.1 --save "" \
        --appendonly no --dir "$dir" --daemonize no
    wait_port redis "$REDIS_PORT"
}

declare -A RES=() WHY=() CPU=()
declare -A LABEL=([local]="pagid local" [group]="pagid group" [redis]="pagid redis" [app]="py+redis app")

measure() { # row port path: psload against it, the server's CPU time around it
    local row=$1 port=$2 path=$3 c0 c1
    note "$row: $SUBS subscribers, $RATE msgs/s, ${DURATION}s"
    c0=$(group_cpu "${PID[$row]}")
    timeout $((DURATION + 120)) "$PSLOAD" 127.0.0.1 "$port" "$path" "$SUBS" "$RATE" "$DURATION" \
        "$SIZE" >"$WORK/$row.out" 2>"$WORK/$row.err" &
    CLIENT=$!
    wait "$CLIENT" || true
    CLIENT=""
    c1=$(group_cpu "${PID[$row]}")
    RES[$row]=$(grep '^subs=' "$WORK/$row.out" || true)
    if [[ -z ${RES[$row]} ]]; then
        WHY[$row]="no result: $(tr '\n' ' ' <"$WORK/$row.err")"
        return
    fi
    CPU[$row]=$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.2f", b - a }')
    { printf '==== %s\n' "$row"; cat "$WORK/$row.out" "$WORK/$row.err"; } >>"$WORK/raw.txt"
}

for row in $ROWS; do
    case $row in
    local | group)
        port=$(free_port)
        start_pagid "$row" "$port"
        path=/bench
        [[ $row == group ]] && path="/bench?policy=drop"
        measure "$row" "$port" "$path"
        stop_server "$row"
        ;;
    redis)
        if [[ -z $REDIS_SERVER ]]; then
            WHY[$row]="skipped: no redis-server (Debian: redis-server)"
            continue
        fi
        [[ -n ${REDIS_PORT:-} ]] || start_redis
        port=$(free_port)
        conf="pubsub:
  backend: redis
  url: redis://127.0.0.1:$REDIS_PORT/0"
        mkdir -p "$WORK/redis-check"
        printf '%s\n' "$conf" >"$WORK/redis-check/pagid.yaml"
        if ! "$PAGID" -t -l "127.0.0.1:$port" -a pubsub -c "$WORK/redis-check/pagid.yaml" \
            >"$WORK/redis-check/out" 2>&1; then
            WHY[$row]="skipped: this pagid does not accept 'pubsub: {backend: redis}': $(grep -m1 -v '^$' "$WORK/redis-check/out" || true)"
            continue
        fi
        start_pagid "$row" "$port" "$conf"
        measure "$row" "$port" /bench
        stop_server "$row"
        ;;
    app)
        if [[ -z $REDIS_SERVER ]]; then
            WHY[$row]="skipped: no redis-server (Debian: redis-server)"
            continue
        fi
        if ! "$PYTHON" -c 'import websockets, redis.asyncio' 2>/dev/null; then
            WHY[$row]="skipped: $PYTHON lacks websockets or redis.asyncio (Debian: python3-websockets python3-redis)"
            continue
        fi
        [[ -n ${REDIS_PORT:-} ]] || start_redis
        port=$(free_port)
        mkdir -p "$WORK/app"
        launch app "$WORK/app" "$PYTHON" "$BENCH_DIR/pubsub_redis_app.py" "$port" \
            "redis://127.0.0.1:$REDIS_PORT/0" 2
        wait_port app "$port"
        sleep 1 # the second process binds its port a moment later
        measure app "$port" /bench
        stop_server app
        ;;
    *) die "unknown row '$row' (local group redis app)" ;;
    esac
done
[[ -n ${PID[redis]:-} ]] && stop_server redis

# ------------------------------------------------------------------ report
field() { # result key
    awk -v k="$2" '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) print kv[2] } }' <<<"$1"
}
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "-"; else printf "%.2f\n", a / b }'
}

report() {
    local row r
    printf 'publish/subscribe fan-out, one run on %s (%s CPUs), %s\n' "$(uname -n)" "$(nproc)" \
        "$(date -u '+%Y-%m-%d %H:%M UTC')"
    printf 'pagid: %s\n' "$("$PAGID" --version 2>&1 | head -1)"
    [[ -n $REDIS_SERVER ]] && printf 'redis: %s\n' "$("$REDIS_SERVER" --version | head -1)"
    printf '%s subscribers, %s msgs/s of %s bytes for %ss, 2 server processes, client: bench/psload.c\n\n' \
        "$SUBS" "$RATE" "$SIZE" "$DURATION"
    printf '%-14s %12s %10s %8s %9s %9s %9s %8s %8s  %s\n' row "delivered/s" expected lost "p50 ms" \
        "p99 ms" "max ms" "cpu s" "client" "subs per process"
    for row in $ROWS; do
        r=${RES[$row]:-}
        if [[ -z $r ]]; then
            printf '%-14s %s\n' "${LABEL[$row]}" "${WHY[$row]:-no result}"
            continue
        fi
        printf '%-14s %12s %10s %8s %9s %9s %9s %8s %8s  %s\n' "${LABEL[$row]}" \
            "$(field "$r" msgs_per_s)" "$(field "$r" expected)" "$(field "$r" lost)" \
            "$(field "$r" p50_ms)" "$(field "$r" p99_ms)" "$(field "$r" max_ms)" "${CPU[$row]}" \
            "$(field "$r" client_cpu_s)" "$(field "$r" workers)"
    done
    if [[ -n ${RES[app]:-} ]]; then
        printf '\nratios to the app row (delivered/s above 1 = more, p99 and cpu below 1 = better):\n'
        for row in $ROWS; do
            [[ $row != app && -n ${RES[$row]:-} ]] || continue
            printf '%-14s %12s %10s %8s %9s %9s %9s %8s\n' "${LABEL[$row]}/app" \
                "$(ratio "$(field "${RES[$row]}" msgs_per_s)" "$(field "${RES[app]}" msgs_per_s)")" - - \
                "$(ratio "$(field "${RES[$row]}" p50_ms)" "$(field "${RES[app]}" p50_ms)")" \
                "$(ratio "$(field "${RES[$row]}" p99_ms)" "$(field "${RES[app]}" p99_ms)")" - \
                "$(ratio "${CPU[$row]}" "${CPU[app]}")"
        done
    fi
}

report | tee "$WORK/report.txt"
if [[ -n $RESULTS ]]; then
    mkdir -p "$(dirname "$RESULTS")"
    cp "$WORK/report.txt" "$RESULTS"
    [[ -f $WORK/raw.txt ]] && cp "$WORK/raw.txt" "${RESULTS%.txt}.raw.txt"
    note "table written to $RESULTS"
fi
