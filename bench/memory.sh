#!/usr/bin/env bash
# bench/memory.sh - memory per held connection, pagid against nginx, one run.
# For each state (fresh, idle keep-alive, idle after an 8 KB header, SSE
# stream, slowloris head, WebSocket with and without deflate) a fresh server
# (one worker) is started, N connections are brought into that state and held
# by bench/memory_client.py, and the worker's RSS growth is divided by N.
#
# Usage: bench/memory.sh            (see bench/README.md)
# Environment: PAGID (binary), NGINX, N (connections per row, 2000).
set -euo pipefail

N=${N:-2000}
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

die() { printf 'bench: %s\n' "$*" >&2; exit 1; }
note() { printf 'bench: %s\n' "$*" >&2; }

[[ $N =~ ^[0-9]+$ && $N -gt 0 ]] || die "N must be a positive integer"
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
[[ -x $NGINX ]] || die "nginx not found (set NGINX=/path/to/nginx)"
command -v python3 >/dev/null || die "python3 not found"
command -v curl >/dev/null || die "curl not found"
if [[ -z ${PAGID:-} ]]; then
    if [[ -x ./pagid ]]; then PAGID=$PWD/pagid
    elif command -v pagid >/dev/null; then PAGID=$(command -v pagid)
    else die "no pagid binary: set PAGID=/path/to/pagid"; fi
fi
[[ -x $PAGID ]] || die "PAGID=$PAGID is not executable"

# N held sockets on each side of the loopback, plus slack.
if ! ulimit -n $((N * 2 + 1024)) 2>/dev/null; then
    hard=$(ulimit -Hn)
    [[ $hard == unlimited ]] || ulimit -n "$hard"
    (($(ulimit -n) >= N + 256)) || die "open-file limit $(ulimit -n) is too low for N=$N"
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/pagid-membench.XXXXXX")
# shellcheck source=bench/lib.sh
. "$BENCH_DIR/lib.sh"

# nginx as bench/run.sh configures it, plus a slow long response for the
# stream row (nginx has no SSE of its own: a 1 MB file at 64 bytes/s).
start_nginx() { # name port
    local name=$1 port=$2 dir=$WORK/$1
    mkdir -p "$dir/tmp" "$dir/www"
    head -c 1048576 /dev/zero | tr '\0' 'x' >"$dir/www/stream"
    # nginx's workers run as nobody: let them read the file.
    chmod a+rx "$WORK" "$dir" "$dir/www" && chmod a+r "$dir/www/stream"
    cat >"$dir/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log;
worker_rlimit_nofile $((N * 2 + 1024));
events { worker_connections $((N + 1024)); }
http {
    access_log off;
    keepalive_requests 1000000;
    keepalive_timeout 300s;
    client_header_timeout 300s;
    large_client_header_buffers 4 16k;
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    sendfile on;
    server {
        listen 127.0.0.1:$port;
        location / { default_type text/plain; return 200 "Hello from PAGI"; }
        location /stream { root $dir/www; default_type text/event-stream; limit_rate 64; }
    }
}
EOF
    launch_nginx "$name" "$dir"
}

# The echo app: small answers, a WebSocket echo, SSE streams with an interval.
# Timeouts long enough that nothing is closed while measuring.
start_pagid() { # name port
    local name=$1 port=$2 dir=$WORK/$1
    mkdir -p "$dir"
    cat >"$dir/pagid.yaml" <<EOF
limits:
  max_connections: $((N + 1024))
timeouts:
  idle: 300s
  keepalive: 300s
  header: 300s
  ws_idle: 300s
EOF
    launch "$name" "$dir" "$PAGID" -w 1 -l "127.0.0.1:$port" -a echo -c "$dir/pagid.yaml"
}

worker_of() { # name: the worker (the master's child)
    local i w
    for ((i = 0; i < 100; i++)); do
        w=$(pgrep -P "${PID[$1]}" | head -1 || true)
        [[ -n $w ]] && { echo "$w"; return; }
        sleep 0.1
    done
    die "$1 has no worker process"
}

wait_up() { # name port
    local i
    for ((i = 0; i < 100; i++)); do
        curl -fsS --max-time 1 -o /dev/null "http://127.0.0.1:$2/" 2>/dev/null && return 0
        kill -0 "${PID[$1]}" 2>/dev/null || { cat "$WORK/$1"/*.log >&2 || true; die "$1 exited"; }
        sleep 0.1
    done
    die "$1 not answering on port $2"
}

measure() { # server mode: prints bytes per connection, or n/a (why)
    local name=$1 mode=$2 port out sse
    port=$(free_port)
    "start_$name" "$name" "$port"
    wait_up "$name" "$port"
    if [[ $name == pagid ]]; then sse='/?count=1000000&interval=1000'; else sse=/stream; fi
    out=$(python3 "$BENCH_DIR/memory_client.py" --port "$port" --pid "$(worker_of "$name")" \
        --mode "$mode" --count "$N" --sse-path "$sse" 2>&1) || true
    stop_server "$name"
    echo "${out%%$'\n'*}"
}

# ROWS="ws sse" measures only those rows.
read -r -a ROWS <<<"${ROWS:-fresh idle idle8k sse slowloris ws wsdeflate}"
declare -A LABEL=([fresh]="fresh connection (no request)" [idle]="idle keep-alive (small request)"
    [idle8k]="idle after an 8 KB header" [sse]="SSE stream (1 event/s)"
    [slowloris]="slowloris head (30 KB, unfinished)" [ws]="WebSocket (after one echo)"
    [wsdeflate]="WebSocket + permessage-deflate")
declare -A RES=()
for mode in "${ROWS[@]}"; do
    note "measuring $mode ..."
    RES[pagid.$mode]=$(measure pagid "$mode")
    if [[ $mode == ws || $mode == wsdeflate ]]; then
        RES[nginx.$mode]="n/a"
    else
        RES[nginx.$mode]=$(measure nginx "$mode")
    fi
done

printf 'memory per held connection (worker RSS growth / N), N=%d, %s\n' "$N" \
    "$(date -u '+%Y-%m-%d %H:%M UTC')"
printf 'pagid: %s (-w 1 -a echo)\nnginx: %s\n' "$PAGID" "$("$NGINX" -v 2>&1 | head -1)"
printf 'nginx stream row: a static file at limit_rate 64 (nginx has no SSE)\n\n'
printf '%-38s %12s %12s %8s\n' state 'pagid B' 'nginx B' ratio
for mode in "${ROWS[@]}"; do
    p=${RES[pagid.$mode]} n=${RES[nginx.$mode]}
    ratio="-"
    if [[ $p =~ ^-?[0-9]+$ && $n =~ ^-?[0-9]+$ ]] && ((n > 0)); then
        ratio=$(awk -v a="$p" -v b="$n" 'BEGIN { printf "%.2f", a / b }')
    fi
    printf '%-38s %12s %12s %8s\n' "${LABEL[$mode]}" "$p" "$n" "$ratio"
done
