#!/usr/bin/env bash
# bench/run.sh - pagid against nginx on this machine, side by side, in one run.
# Both serve the same 15-byte "Hello from PAGI"; each is measured with wrk and
# hey (servers alternating), and a table with pagid/nginx ratios is printed.
#
# Usage: bench/run.sh            (see bench/README.md)
# Environment: PAGID (pagid binary; "nginx" = self-test with a second nginx),
#   NGINX, DURATION (s, 10), CONNECTIONS (500), THREADS (wrk, 2), WARMUP (s, 2),
#   ROUNDS (1), RESULTS (file for the table, "" = don't write).
set -euo pipefail

DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-500}
THREADS=${THREADS:-2}
WARMUP=${WARMUP:-2}
ROUNDS=${ROUNDS:-1}
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RESULTS=${RESULTS-$BENCH_DIR/results/latest.txt}
BODY="Hello from PAGI"

die() { printf 'bench: %s\n' "$*" >&2; exit 1; }
note() { printf 'bench: %s\n' "$*" >&2; }

for v in DURATION CONNECTIONS THREADS WARMUP ROUNDS; do
    [[ ${!v} =~ ^[0-9]+$ && ${!v} -gt 0 ]] || die "$v must be a positive integer"
done

# ------------------------------------------------------------------ tools
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
[[ -x $NGINX ]] || die "nginx not found (set NGINX=/path/to/nginx)"
command -v wrk >/dev/null || die "wrk not found (apt-get install wrk)"
command -v hey >/dev/null || die "hey not found (apt-get install hey)"
command -v curl >/dev/null || die "curl not found"

SELFTEST=0
if [[ -n ${PAGID:-} ]]; then
    if [[ $PAGID == nginx ]]; then
        SELFTEST=1
    else
        [[ -x $PAGID ]] || die "PAGID=$PAGID is not executable"
    fi
elif [[ -x ./pagid ]]; then
    PAGID=$PWD/pagid
elif command -v pagid >/dev/null; then
    PAGID=$(command -v pagid)
else
    die "no pagid binary: build it (./pagid), install it, or set PAGID=/path/to/pagid"
fi

# 500 connections per server plus the clients' own sockets.
if ! ulimit -n 65536 2>/dev/null; then
    hard=$(ulimit -Hn)
    [[ $hard == unlimited ]] || ulimit -n "$hard"
    note "could not raise the open-file limit to 65536; using $(ulimit -n)"
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/pagid-bench.XXXXXX")
# shellcheck source=bench/lib.sh
. "$BENCH_DIR/lib.sh"

start_nginx() { # name port
    local name=$1 port=$2 dir=$WORK/$1
    mkdir -p "$dir/tmp"
    cat >"$dir/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    server {
        listen 127.0.0.1:$port;
        location / { default_type text/plain; return 200 "$BODY"; }
    }
}
EOF
    launch_nginx "$name" "$dir"
}

start_pagid() { # name port
    local name=$1 port=$2 dir=$WORK/$1
    mkdir -p "$dir"
    launch "$name" "$dir" "$PAGID" -w 1 -l "127.0.0.1:$port" -a hello
}

wait_ready() { # name port: up to 10 s for a 200 with the expected body
    local name=$1 port=$2 i body
    for ((i = 0; i < 100; i++)); do
        if ! kill -0 "${PID[$name]}" 2>/dev/null; then
            cat "$WORK/$name"/*.log >&2 2>/dev/null || true
            die "$name exited during startup"
        fi
        if body=$(curl -fsS --max-time 1 "http://127.0.0.1:$port/" 2>/dev/null); then
            [[ $body == "$BODY" ]] ||
                note "$name answers '$body', not '$BODY': not the same work as the other side"
            return 0
        fi
        sleep 0.1
    done
    die "$name did not answer on 127.0.0.1:$port within 10 s"
}

# ---------------------------------------------------------------- parsing
# Both parsers print one line: "rps p50_ms p99_ms max_ms errors", "-" = missing.

# wrk: Requests/sec counts completed responses; errors = socket errors
# (connect, read, write, timeout) + "Non-2xx or 3xx responses".
parse_wrk() {
    awk '
    function ms(v) {
        if (v ~ /us$/) return v / 1000
        if (v ~ /ms$/) return v + 0
        if (v ~ /m$/)  return v * 60000
        if (v ~ /h$/)  return v * 3600000
        if (v ~ /s$/)  return v * 1000
        return "-"
    }
    BEGIN { rps = p50 = p99 = max = "-"; errs = 0; seen = 0 }
    /^ +Latency +[0-9.]+[a-z]+ / { max = ms($4) }
    /^ +50% +[0-9.]/ { p50 = ms($2) }
    /^ +99% +[0-9.]/ { p99 = ms($2) }
    /^Requests\/sec:/ { rps = $2 + 0; seen = 1 }
    /Socket errors:/ { gsub(/,/, ""); errs += $4 + $6 + $8 + $10 }
    /Non-2xx or 3xx responses:/ { errs += $NF }
    END {
        if (!seen) errs = "-"
        printf "%s %s %s %s %s\n", rps, p50, p99, max, errs
    }' "$1"
}

# hey: its own Requests/sec counts failed requests too, so rps is recomputed
# as responses received / total time; errors = "Error distribution" counts +
# responses whose status is not 2xx.
parse_hey() {
    awk '
    BEGIN { total = 0; resp = 0; errs = 0; p50 = p99 = max = "-"; sec = "" }
    /^ +Total:/ { total = $2 + 0 }
    /^ +Slowest:/ { max = $2 * 1000 }
    /^ +50% in / { p50 = $3 * 1000 }
    /^ +99% in / { p99 = $3 * 1000 }
    /^Status code distribution:/ { sec = "status"; next }
    /^Error distribution:/ { sec = "error"; next }
    /^ +\[[0-9]+\]/ {
        n = $1; gsub(/[][]/, "", n)
        if (sec == "status") { resp += $2; if (n !~ /^2/) errs += $2 }
        else if (sec == "error") errs += n
    }
    END {
        if (total > 0) { rps = resp / total } else { rps = "-"; errs = "-" }
        printf "%s %s %s %s %s\n", rps, p50, p99, max, errs
    }' "$1"
}

# ---------------------------------------------------------------- running
declare -A PORT=() RES=()

run_tool() { # tool name round
    local tool=$1 name=$2 round=$3 url out limit
    url="http://127.0.0.1:${PORT[$name]}/"
    out=$WORK/$tool-$name-$round.txt
    limit=$((DURATION + 60))
    kill -0 "${PID[$name]}" 2>/dev/null || die "$name is no longer running"
    note "round $round: $tool -> $name (${DURATION}s)"
    # In the background and waited for, so that a signal is handled at once.
    case $tool in
    wrk) timeout -k 5 "$limit" wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" \
             --latency "$url" >"$out" 2>&1 & ;;
    hey) timeout -k 5 "$limit" hey -z "${DURATION}s" -c "$CONNECTIONS" \
             "$url" >"$out" 2>&1 & ;;
    esac
    CLIENT=$!
    wait "$CLIENT" || true
    CLIENT=""
    RES[$tool.$name.$round]=$("parse_$tool" "$out")
    [[ -n $RESULTS ]] && { printf '==== %s %s round %s\n' "$tool" "$name" "$round"; cat "$out"; } >>"$WORK/raw.txt"
    sleep 1
}

version_of() {
    case $1 in
    nginx) "$NGINX" -v 2>&1 | head -1 ;;
    pagid) if ((SELFTEST)); then echo "self-test: a second nginx"; else
               "$PAGID" --version 2>&1 | head -1 || true; fi ;;
    esac
}

for name in nginx pagid; do
    PORT[$name]=$(free_port)
    if [[ $name == nginx ]] || ((SELFTEST)); then
        start_nginx "$name" "${PORT[$name]}"
    else
        start_pagid "$name" "${PORT[$name]}"
    fi
done
for name in nginx pagid; do wait_ready "$name" "${PORT[$name]}"; done

for name in nginx pagid; do
    note "warm-up: $name (${WARMUP}s)"
    timeout -k 5 $((WARMUP + 30)) wrk -t"$THREADS" -c"$CONNECTIONS" -d"${WARMUP}s" \
        "http://127.0.0.1:${PORT[$name]}/" >/dev/null 2>&1 || true
done

# Alternate the order so neither server always runs first (or second).
for ((r = 1; r <= ROUNDS; r++)); do
    t=0
    for tool in wrk hey; do
        if (((r + t) % 2)); then order=(pagid nginx); else order=(nginx pagid); fi
        for name in "${order[@]}"; do run_tool "$tool" "$name" "$r"; done
        t=$((t + 1))
    done
done

# ------------------------------------------------------------------ report
ratio() { # a b -> a/b with 2 decimals, or "-"
    awk -v a="$1" -v b="$2" 'BEGIN {
        if (a == "-" || b == "-" || b + 0 == 0) print "-"; else printf "%.2f\n", a / b }'
}
num() { # value decimals
    awk -v v="$1" -v d="$2" 'BEGIN { if (v == "-") print "-"; else printf "%.*f\n", d, v }'
}

report() {
    local r tool name rps p50 p99 max errs n p
    printf 'pagid vs nginx, one run on %s (%s CPUs), %s\n' "$(uname -n)" "$(nproc)" "$(date -u '+%Y-%m-%d %H:%M UTC')"
    printf 'nginx: %s\npagid: %s\n' "$(version_of nginx)" "$(version_of pagid)"
    printf 'wrk -t%s -c%s -d%ss --latency | hey -z %ss -c %s | both servers: 1 worker, loopback\n' \
        "$THREADS" "$CONNECTIONS" "$DURATION" "$DURATION" "$CONNECTIONS"
    printf 'ratios are pagid/nginx: req/s above 1 = pagid faster; latency below 1 = pagid lower\n\n'
    printf '%-5s %-6s %-12s %12s %10s %10s %10s %8s\n' tool round server 'req/s' 'p50 ms' 'p99 ms' 'max ms' errors
    for ((r = 1; r <= ROUNDS; r++)); do
        for tool in wrk hey; do
            for name in nginx pagid; do
                read -r rps p50 p99 max errs <<<"${RES[$tool.$name.$r]}"
                printf '%-5s %-6s %-12s %12s %10s %10s %10s %8s\n' "$tool" "$r" "$name" \
                    "$(num "$rps" 0)" "$(num "$p50" 2)" "$(num "$p99" 2)" "$(num "$max" 2)" "$errs"
            done
            read -r -a n <<<"${RES[$tool.nginx.$r]}"
            read -r -a p <<<"${RES[$tool.pagid.$r]}"
            printf '%-5s %-6s %-12s %12s %10s %10s %10s %8s\n\n' "$tool" "$r" 'pagid/nginx' \
                "$(ratio "${p[0]}" "${n[0]}")" "$(ratio "${p[1]}" "${n[1]}")" \
                "$(ratio "${p[2]}" "${n[2]}")" "$(ratio "${p[3]}" "${n[3]}")" '-'
        done
    done
    printf 'One run on a shared machine: compare ratios, not absolute figures; they are\n'
    printf 'observations, never assertions.\n'
}

table=$(report)
printf '%s\n' "$table"
if [[ -n $RESULTS ]]; then
    mkdir -p "$(dirname "$RESULTS")"
    printf '%s\n' "$table" >"$RESULTS"
    cp "$WORK/raw.txt" "${RESULTS%.txt}.raw.txt"
    note "table written to $RESULTS (raw tool output: ${RESULTS%.txt}.raw.txt)"
fi
