#!/usr/bin/env bash
# bench/zerocopy.sh - an 8 MiB response from memory, copied (pagi_send) against
# handed over (pagi_send_buf), with nginx serving an 8 MiB file beside them.
# For each row a fresh server (one worker): the worker's RSS while COUNT
# clients with a small receive window hold their response queued (growth per
# response, and the peak), then throughput with wrk (CONNS connections).
# The app is tests/integration/apps/zcapp.c (its blob: SIZE bytes built at
# create), compiled here with cc.
#
# Usage: bench/zerocopy.sh            (see bench/README.md)
# Environment: PAGID, NGINX, SIZE (8388608), COUNT (4), CONNS (4),
#   DURATION (s, 5), CC (cc).
set -euo pipefail

SIZE=${SIZE:-8388608}
COUNT=${COUNT:-4}
CONNS=${CONNS:-4}
DURATION=${DURATION:-5}
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$BENCH_DIR/.." && pwd)

die() { printf 'bench: %s\n' "$*" >&2; exit 1; }
note() { printf 'bench: %s\n' "$*" >&2; }

for v in SIZE COUNT CONNS DURATION; do
    [[ ${!v} =~ ^[0-9]+$ && ${!v} -gt 0 ]] || die "$v must be a positive integer"
done
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
[[ -x $NGINX ]] || die "nginx not found (set NGINX=/path/to/nginx)"
for t in python3 curl wrk "${CC:-cc}"; do
    command -v "$t" >/dev/null || die "$t not found"
done
if [[ -z ${PAGID:-} ]]; then
    if [[ -x ./pagid ]]; then PAGID=$PWD/pagid
    elif command -v pagid >/dev/null; then PAGID=$(command -v pagid)
    else die "no pagid binary: set PAGID=/path/to/pagid"; fi
fi
[[ -x $PAGID ]] || die "PAGID=$PAGID is not executable"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/pagid-zcbench.XXXXXX")
# shellcheck source=bench/lib.sh
. "$BENCH_DIR/lib.sh"

"${CC:-cc}" -std=c11 -O2 -shared -fPIC -I "$REPO/include" -o "$WORK/zcapp.so" \
    "$REPO/tests/integration/apps/zcapp.c" || die "zcapp.c does not build"
# Started as root, pagid's workers run as nobody: let them load the module.
chmod a+rx "$WORK" "$WORK/zcapp.so"

start_nginx() { # name port: the same bytes as a static file, sendfile on
    local name=$1 port=$2 dir=$WORK/$1
    mkdir -p "$dir/tmp" "$dir/www"
    head -c "$SIZE" /dev/urandom >"$dir/www/big"
    chmod a+rx "$WORK" "$dir" "$dir/www" && chmod a+r "$dir/www/big"
    cat >"$dir/nginx.conf" <<EOF2
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    sendfile on;
    server {
        listen 127.0.0.1:$port;
        location / { root $dir/www; default_type application/octet-stream; }
    }
}
EOF2
    launch_nginx "$name" "$dir"
}

start_pagid() { # name port
    local name=$1 port=$2 dir=$WORK/$1
    mkdir -p "$dir"
    printf 'timeouts:\n  write: 300s\n  idle: 300s\n' >"$dir/pagid.yaml"
    launch "$name" "$dir" "$PAGID" -w 1 -l "127.0.0.1:$port" -a "$WORK/zcapp.so:$SIZE" \
        -c "$dir/pagid.yaml"
}

worker_of() { # name: the worker (the master's child); nginx's too
    local i w
    for ((i = 0; i < 100; i++)); do
        w=$(pgrep -P "${PID[$1]}" | head -1 || true)
        [[ -n $w ]] && { echo "$w"; return; }
        sleep 0.1
    done
    die "$1 has no worker process"
}

wait_up() { # name port path
    local i
    for ((i = 0; i < 100; i++)); do
        curl -fsS --max-time 2 -o /dev/null "http://127.0.0.1:$2$3" 2>/dev/null && return 0
        kill -0 "${PID[$1]}" 2>/dev/null || { cat "$WORK/$1"/*.log >&2 || true; die "$1 exited"; }
        sleep 0.1
    done
    die "$1 not answering on port $2"
}

# row -> server and path
declare -A SERVER=([copy]=pagid [buf]=pagid [nginx]=nginx)
declare -A URLPATH=([copy]="/body?mode=copy" [buf]="/body?mode=buf" [nginx]=/big)
declare -A LABEL=([copy]="pagid pagi_send (copied)" [buf]="pagid pagi_send_buf (handed over)"
    [nginx]="nginx static file (sendfile)")
declare -A MEM=() RPS=() MBS=()

measure() { # row
    local row=$1 name=${SERVER[$1]} port out w
    port=$(free_port)
    "start_$name" "$name" "$port"
    wait_up "$name" "$port" "${URLPATH[$row]/\/body?/\/body?size=1&}"
    w=$(worker_of "$name")
    MEM[$row]=$(python3 "$BENCH_DIR/zerocopy_client.py" --port "$port" --pid "$w" \
        --path "${URLPATH[$row]}" --count "$COUNT") || die "$row: memory client failed"
    # warm-up, discarded: the first requests fault in pages and the allocator's heap
    timeout 30 wrk -t2 -c"$CONNS" -d1s "http://127.0.0.1:$port${URLPATH[$row]}" >/dev/null 2>&1 || true
    out=$(timeout $((DURATION + 30)) wrk -t2 -c"$CONNS" -d"${DURATION}s" \
        "http://127.0.0.1:$port${URLPATH[$row]}" 2>&1) || die "$row: wrk failed: $out"
    printf '%s\n' "$out" >"$WORK/$row.wrk"
    RPS[$row]=$(awk '/^Requests\/sec:/ { print $2 }' <<<"$out")
    MBS[$row]=$(awk '/^Transfer\/sec:/ { v = $2; u = substr(v, length(v) - 1); v += 0;
        if (u == "GB") v *= 1024; else if (u == "KB") v /= 1024; printf "%.0f", v }' <<<"$out")
    stop_server "$name"
}

for row in copy buf nginx; do
    note "measuring $row ..."
    measure "$row"
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
kib_mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }

printf 'an %d-byte response, %d queued to slow readers, then wrk -c%d -d%ds; %s\n' \
    "$SIZE" "$COUNT" "$CONNS" "$DURATION" "$(date -u '+%Y-%m-%d %H:%M UTC')"
printf 'pagid: %s (-w 1, tests/integration/apps/zcapp.c)\nnginx: %s\n\n' "$PAGID" \
    "$("$NGINX" -v 2>&1 | head -1)"
printf '%-36s %9s %9s %9s %12s %9s %9s\n' row 'RSS0 MiB' 'held MiB' 'peak MiB' \
    'MiB/queued' 'req/s' 'MB/s'
for row in copy buf nginx; do
    read -r before held peak per <<<"${MEM[$row]}"
    printf '%-36s %9s %9s %9s %12s %9s %9s\n' "${LABEL[$row]}" "$(kib_mib "$before")" \
        "$(kib_mib "$held")" "$(kib_mib "$peak")" "$(kib_mib "$per")" "${RPS[$row]}" "${MBS[$row]}"
done
read -r _ hc pc perc <<<"${MEM[copy]}"
read -r _ hb pb perb <<<"${MEM[buf]}"
printf '\nhanded over / copied: held RSS %s, peak RSS %s, req/s %s\n' "$(ratio "$hb" "$hc")" \
    "$(ratio "$pb" "$pc")" "$(ratio "${RPS[buf]}" "${RPS[copy]}")"
printf 'handed over / nginx: req/s %s\n' "$(ratio "${RPS[buf]}" "${RPS[nginx]}")"
