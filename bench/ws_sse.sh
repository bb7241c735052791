#!/usr/bin/env bash
# bench/ws_sse.sh - the streaming scopes under load, on this machine, in one run:
#  (a) WebSocket echo round trips per second: pagid (-w 1 -a echo) against the
#      npm `ws` package's echo server as the yardstick, same client, ratio;
#  (b) SSE_STREAMS concurrent SSE streams on one pagid worker (echo's
#      ?count=N&interval=1000 ticks): worker RSS before/after (memory per
#      stream) and its CPU use while they tick.
# The client is bench/wsload.c (one epoll loop), built here with cc.
#
# Usage: bench/ws_sse.sh            (see bench/README.md)
# Environment: PAGID, DURATION (s, 10), WS_CONNS (100), WS_SIZE (64),
#   SSE_STREAMS (10000), SSE_SECONDS (10), WARMUP (s, 2), WS_NODE_DIR (a dir
#   whose node_modules has `ws`; default: npm install into a temp dir),
#   PARTS ("ws sse"; choose one with PARTS=ws or PARTS=sse).
set -euo pipefail

DURATION=${DURATION:-10}
WS_CONNS=${WS_CONNS:-100}
WS_SIZE=${WS_SIZE:-64}
SSE_STREAMS=${SSE_STREAMS:-10000}
SSE_SECONDS=${SSE_SECONDS:-10}
WARMUP=${WARMUP:-2}
PARTS=${PARTS:-ws sse}
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

die() { printf 'bench: %s\n' "$*" >&2; exit 1; }
note() { printf 'bench: %s\n' "$*" >&2; }

for v in DURATION WS_CONNS WS_SIZE SSE_STREAMS SSE_SECONDS WARMUP; do
    [[ ${!v} =~ ^[0-9]+$ && ${!v} -gt 0 ]] || die "$v must be a positive integer"
done
((WS_SIZE <= 400)) || die "WS_SIZE must be at most 400"
((SSE_SECONDS >= 3)) || die "SSE_SECONDS must be at least 3"

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
command -v curl >/dev/null || die "curl not found"

# Every stream is one fd in the worker and one in the client (two processes).
need=$((SSE_STREAMS + 1024))
if ! ulimit -n 65536 2>/dev/null; then
    hard=$(ulimit -Hn)
    [[ $hard == unlimited ]] || ulimit -n "$hard"
fi
(($(ulimit -n) >= need)) || die "the open-file limit is $(ulimit -n), $need needed for $SSE_STREAMS streams"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/pagid-wsbench.XXXXXX")
# shellcheck source=bench/lib.sh
. "$BENCH_DIR/lib.sh"

wait_port() { # name port
    local i
    for ((i = 0; i < 100; i++)); do
        kill -0 "${PID[$1]}" 2>/dev/null || { cat "$WORK/$1.log" >&2; die "$1 exited during startup"; }
        (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null && return 0
        sleep 0.1
    done
    die "$1 not listening on 127.0.0.1:$2 within 10 s"
}

start_pagid() { # name port [config]
    local args=(-w 1 -l "127.0.0.1:$2" -a echo)
    [[ -n ${3:-} ]] && args+=(-c "$3")
    setsid "$PAGID" "${args[@]}" >"$WORK/$1.log" 2>&1 </dev/null &
    PID[$1]=$!
    wait_port "$1" "$2"
}

worker_of() { # master pid -> its (single) worker's pid
    local master=$1 kids i
    for ((i = 0; i < 50; i++)); do
        kids=$(cat "/proc/$master/task/$master/children" 2>/dev/null || true)
        [[ -n $kids ]] || kids=$(awk -v p="$master" '$4 == p { print $1 }' /proc/[0-9]*/stat 2>/dev/null || true)
        [[ -n $kids ]] && { echo "${kids%% *}"; return 0; }
        sleep 0.1
    done
    die "no worker process under pid $master"
}

rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

say() { printf '%s\n' "$*" | tee -a "$WORK/summary.txt"; }

WSLOAD=$WORK/wsload
cc -O2 -std=c11 -D_GNU_SOURCE -o "$WSLOAD" "$BENCH_DIR/wsload.c" || die "cannot build wsload"

# ------------------------------------------------------------ (a) WebSocket

ws_result() { # file -> "rate p50 p99 failed"
    awk '/^RESULT ws/ { for (i = 3; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
          print v["rate"], v["p50_ms"], v["p99_ms"], v["failed"] }' "$1"
}

run_ws() { # name port secs -> output file
    timeout $(($3 + 30)) "$WSLOAD" ws 127.0.0.1 "$2" / "$WS_CONNS" "$3" "$WS_SIZE" \
        >"$WORK/$1.ws.out" 2>>"$WORK/$1.ws.err" || true
}

if [[ " $PARTS " == *" ws "* ]]; then
    say "== WebSocket echo: $WS_CONNS connections, sequential round trips of $WS_SIZE-byte text messages, ${DURATION}s"
    p_port=$(free_port)
    start_pagid pagid "$p_port"
    have_node=0
    if command -v node >/dev/null; then
        NODE_DIR=${WS_NODE_DIR:-$WORK/node}
        if [[ ! -d $NODE_DIR/node_modules/ws ]]; then
            mkdir -p "$NODE_DIR"
            (cd "$NODE_DIR" && timeout 300 npm install --no-audit --no-fund --silent ws \
                >"$WORK/npm.log" 2>&1) || note "npm install ws failed (see $WORK/npm.log)"
        fi
        if [[ -d $NODE_DIR/node_modules/ws ]]; then
            cat >"$WORK/ws-echo.js" <<'EOF'
// The yardstick: the npm ws package's echo server, one process like pagid -w 1.
const { WebSocketServer } = require("ws");
const wss = new WebSocketServer({ host: "127.0.0.1", port: +process.argv[2], perMessageDeflate: false });
wss.on("connection", (ws) => ws.on("message", (data, isBinary) => ws.send(data, { binary: isBinary })));
EOF
            n_port=$(free_port)
            NODE_PATH=$NODE_DIR/node_modules setsid node "$WORK/ws-echo.js" "$n_port" \
                >"$WORK/node.log" 2>&1 </dev/null &
            PID[node]=$!
            wait_port node "$n_port"
            have_node=1
        fi
    else
        note "node not found: no yardstick"
    fi
    run_ws pagid-warm "$p_port" "$WARMUP"
    ((have_node)) && run_ws node-warm "$n_port" "$WARMUP"
    # Alternate who goes first, like bench/run.sh.
    if ((have_node)); then
        run_ws node "$n_port" "$DURATION"
    fi
    run_ws pagid "$p_port" "$DURATION"
    read -r p_rate p_p50 p_p99 p_fail <<<"$(ws_result "$WORK/pagid.ws.out")"
    [[ -n ${p_rate:-} ]] || { cat "$WORK"/pagid.ws.* >&2; die "no WebSocket result for pagid"; }
    printf '%-12s %12s %10s %10s %8s\n' server "msgs/s" "p50 ms" "p99 ms" failed | tee -a "$WORK/summary.txt"
    printf '%-12s %12s %10s %10s %8s\n' pagid "$p_rate" "$p_p50" "$p_p99" "$p_fail" | tee -a "$WORK/summary.txt"
    if ((have_node)); then
        read -r n_rate n_p50 n_p99 n_fail <<<"$(ws_result "$WORK/node.ws.out")"
        if [[ -n ${n_rate:-} ]]; then
            printf '%-12s %12s %10s %10s %8s\n' "node ws" "$n_rate" "$n_p50" "$n_p99" "$n_fail" | tee -a "$WORK/summary.txt"
            awk -v a="$p_rate" -v b="$n_rate" -v c="$p_p50" -v d="$n_p50" -v e="$p_p99" -v f="$n_p99" \
                'BEGIN { printf "%-12s %12.2f %10.2f %10.2f %8s\n", "pagid/ws", a / b, (d > 0 ? c / d : 0), (f > 0 ? e / f : 0), "-" }' |
                tee -a "$WORK/summary.txt"
        fi
    fi
    stop_server pagid
    [[ -n ${PID[node]:-} ]] && stop_server node
    say ""
fi

# ------------------------------------------------------------ (b) SSE streams

if [[ " $PARTS " == *" sse "* ]]; then
    say "== SSE: $SSE_STREAMS concurrent streams on one worker, one event per stream per second, ${SSE_SECONDS}s"
    cat >"$WORK/sse.yaml" <<EOF
limits:
  max_connections: $((SSE_STREAMS + 1000))
EOF
    s_port=$(free_port)
    start_pagid sse "$s_port" "$WORK/sse.yaml"
    worker=$(worker_of "${PID[sse]}")
    curl -fsS --max-time 5 -H 'Accept: text/event-stream' "http://127.0.0.1:$s_port/?count=1" >/dev/null ||
        die "pagid does not serve an event stream"
    sleep 0.5
    rss0=$(rss_kb "$worker")
    "$WSLOAD" sse 127.0.0.1 "$s_port" "/?count=1000000&interval=1000" "$SSE_STREAMS" "$SSE_SECONDS" \
        >"$WORK/sse.out" 2>"$WORK/sse.err" &
    CLIENT=$!
    # Wait until every stream is open (the client says so), at most 60 s.
    for ((i = 0; i < 600; i++)); do
        grep -q "open after" "$WORK/sse.err" 2>/dev/null && break
        kill -0 "$CLIENT" 2>/dev/null || break
        sleep 0.1
    done
    grep -q "open after" "$WORK/sse.err" || { cat "$WORK/sse.err" >&2; die "the streams did not all open within 60 s"; }
    sleep 1.5 # let the first ticks go out
    t_a=$(date +%s.%N)
    c_a=$(cpu_ticks "$worker")
    sleep $((SSE_SECONDS - 3))
    t_b=$(date +%s.%N)
    c_b=$(cpu_ticks "$worker")
    rss1=$(rss_kb "$worker")
    wait "$CLIENT" || true
    CLIENT=""
    hz=$(getconf CLK_TCK)
    read -r s_open _ s_rate s_fail <<<"$(awk '/^RESULT sse/ { for (i = 3; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        print v["open"], v["events"], v["rate"], v["failed"] }' "$WORK/sse.out")"
    sed 's/^/  /' "$WORK/sse.err" | tee -a "$WORK/summary.txt"
    awk -v n="$SSE_STREAMS" -v open="$s_open" -v rate="$s_rate" -v fail="$s_fail" \
        -v r0="$rss0" -v r1="$rss1" -v ca="$c_a" -v cb="$c_b" -v ta="$t_a" -v tb="$t_b" -v hz="$hz" 'BEGIN {
        printf "streams open        %d of %d (%s failed)\n", open, n, fail
        printf "events received/s  %d (expected about %d)\n", rate, open
        printf "worker RSS          %.1f MiB idle -> %.1f MiB with the streams\n", r0 / 1024, r1 / 1024
        per = 0
        if (open > 0) per = (r1 - r0) / open
        printf "memory per stream   %.1f KiB\n", per
        printf "worker CPU          %.1f%% of one core while they tick\n", 100 * (cb - ca) / hz / (tb - ta)
    }' | tee -a "$WORK/summary.txt"
    stop_server sse
fi
