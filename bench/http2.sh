#!/usr/bin/env bash
# bench/http2.sh - pagid against nginx over HTTP/2 (h2 by ALPN), side by
# side in one run: the same certificate (a throwaway P-256 CA and server
# certificate), one worker each, the same small body; h2load at -c 100
# -m 10 for requests/s and p99 (from h2load's per-request log), and worker
# memory per idle h2 connection. Prints a table with pagid/nginx ratios; a
# tool for people, it never fails on them.
#
# Usage: bench/http2.sh
# Environment: PAGID, NGINX, DURATION (s, 10), CONNECTIONS (100), STREAMS
#   (-m, 10), THREADS (h2load -t, 2), WARMUP (s, 2), IDLE (idle h2
#   connections for the memory row, 500; 0 = skip), RESULTS (file for the
#   table, "" = don't write).
set -euo pipefail

DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-100}
STREAMS=${STREAMS:-10}
THREADS=${THREADS:-2}
WARMUP=${WARMUP:-2}
IDLE=${IDLE:-500}
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RESULTS=${RESULTS-$BENCH_DIR/results/http2.txt}
BODY="Hello from PAGI"

die() { printf 'bench: %s\n' "$*" >&2; exit 1; }
note() { printf 'bench: %s\n' "$*" >&2; }

for v in DURATION CONNECTIONS STREAMS THREADS WARMUP; do
    [[ ${!v} =~ ^[0-9]+$ && ${!v} -gt 0 ]] || die "$v must be a positive integer"
done
[[ $IDLE =~ ^[0-9]+$ ]] || die "IDLE must be a number"
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
[[ -x $NGINX ]] || die "nginx not found (set NGINX=/path/to/nginx)"
for t in h2load curl openssl python3; do
    command -v "$t" >/dev/null || die "$t not found (h2load: Debian's nghttp2-client)"
done
if [[ -z ${PAGID:-} ]]; then
    if [[ -x ./pagid ]]; then PAGID=$PWD/pagid
    elif [[ -x ./build/pagid ]]; then PAGID=$PWD/build/pagid
    elif command -v pagid >/dev/null; then PAGID=$(command -v pagid)
    else die "no pagid binary: build it, install it, or set PAGID=/path/to/pagid"; fi
fi
[[ -x $PAGID ]] || die "PAGID=$PAGID is not executable"
if ! ulimit -n 65536 2>/dev/null; then
    hard=$(ulimit -Hn)
    [[ $hard == unlimited ]] || ulimit -n "$hard"
fi
(($(ulimit -n) >= IDLE * 2 + 1024)) || die "open-file limit $(ulimit -n) too low for IDLE=$IDLE"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/pagid-h2bench.XXXXXX")
# shellcheck source=bench/lib.sh
. "$BENCH_DIR/lib.sh"

d=$WORK/pki
mkdir -p "$d"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$d/ca.key" -out "$d/ca.pem" -days 2 -subj "/CN=pagid bench CA" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$d/server.key" -out "$d/server.csr" -subj /CN=localhost 2>/dev/null
printf 'basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n' \
    >"$d/server.ext"
openssl x509 -req -in "$d/server.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -set_serial 2 \
    -days 2 -extfile "$d/server.ext" -out "$d/server.pem" 2>/dev/null
CA=$d/ca.pem CERT=$d/server.pem KEY=$d/server.key

start_nginx() { # name port
    local name=$1 port=$2 dir=$WORK/$1
    mkdir -p "$dir/tmp"
    # Debian's nginx 1.22 takes http2 on the listen line ("http2 on;" is 1.25.1+).
    cat >"$dir/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log;
worker_rlimit_nofile $((IDLE * 2 + 4096));
events { worker_connections $((IDLE + 4096)); }
http {
    access_log off;
    keepalive_requests 1000000;
    keepalive_timeout 300s;
    http2_max_requests 1000000;
    http2_max_concurrent_streams 128;
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    server {
        listen 127.0.0.1:$port ssl http2;
        ssl_certificate $CERT;
        ssl_certificate_key $KEY;
        ssl_protocols TLSv1.3;
        location / { default_type text/plain; return 200 "$BODY"; }
    }
}
EOF
    launch_nginx "$name" "$dir"
}

start_pagid() { # name port
    local name=$1 port=$2 dir=$WORK/$1
    mkdir -p "$dir"
    cat >"$dir/pagid.yaml" <<EOF
listen:
  - address: 127.0.0.1:$port
    tls: {cert: $CERT, key: $KEY, protocols: [TLSv1.3]}
app: hello
limits:
  max_connections: $((IDLE + 4096))
timeouts:
  idle: 300s
  keepalive: 300s
EOF
    local user=()
    (($(id -u) == 0)) && user=(-u root)
    launch "$name" "$dir" "$PAGID" -w 1 -c "$dir/pagid.yaml" "${user[@]}"
}

wait_ready() { # name port
    local name=$1 port=$2 i v
    for ((i = 0; i < 100; i++)); do
        kill -0 "${PID[$name]}" 2>/dev/null || die "$name exited during startup"
        if v=$(curl -fsS --http2 --max-time 1 --cacert "$CA" -o /dev/null -w '%{http_version}' \
            --resolve "localhost:$port:127.0.0.1" "https://localhost:$port/" 2>/dev/null); then
            [[ $v == 2 ]] || die "$name answered over HTTP/$v, not 2"
            return 0
        fi
        sleep 0.1
    done
    die "$name did not answer on 127.0.0.1:$port"
}

worker_of() { # name: the worker (the master's only child)
    local i w
    for ((i = 0; i < 100; i++)); do
        w=$(pgrep -P "${PID[$1]}" | head -1 || true)
        [[ -n $w ]] && { echo "$w"; return; }
        sleep 0.1
    done
    die "$1 has no worker process"
}

# "rps p50_ms p99_ms errors responses" from h2load's summary and its log
# (one line per request: start, status, microseconds).
parse_h2load() { # out log
    local rps errs done2xx
    rps=$(awk '/^finished in/ { gsub(/,/, ""); print $4 }' "$1")
    done2xx=$(awk '/^status codes:/ { print $3 }' "$1")
    errs=$(awk '/^requests:/ { gsub(/,/, ""); print $10 + $12 }' "$1")
    sort -n -k3,3 "$2" | awk -v rps="${rps:--}" -v e="${errs:--}" -v ok="${done2xx:--}" '
        { t[NR] = $3 }
        END {
            if (NR == 0) { printf "%s - - %s %s\n", rps, e, ok; exit }
            printf "%s %.2f %.2f %s %s\n", rps, t[int(NR * 0.5) + 1] / 1000,
                   t[int(NR * 0.99) + (NR * 0.99 > int(NR * 0.99))] / 1000, e, ok
        }'
}

idle_memory() { # name port: KiB per idle h2 connection (worker RSS delta / IDLE)
    local pid
    pid=$(worker_of "$1")
    python3 - "$2" "$CA" "$IDLE" "$pid" <<'EOF'
import socket, ssl, sys, time
port, ca, n, pid = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def rss():
    with open("/proc/%d/status" % pid) as f:
        for ln in f:
            if ln.startswith("VmRSS:"):
                return int(ln.split()[1])
ctx = ssl.create_default_context(cafile=ca)
ctx.set_alpn_protocols(["h2"])
# The preface, an empty SETTINGS, and GET / (HPACK static entries) on stream 1.
req = (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
       + b"\x00\x00\x0e\x01\x05\x00\x00\x00\x01" + bytes([0x82, 0x87, 0x84, 0x41, 0x09])
       + b"localhost")
time.sleep(0.5)
before = rss()
socks = []
for i in range(n):
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost")
    s.sendall(req)
    socks.append(s)
for s in socks:
    s.settimeout(5)
    try:
        s.recv(65536)
    except OSError:
        pass
time.sleep(1.0)
after = rss()
print("%.1f" % ((after - before) / n))
for s in socks:
    s.close()
EOF
}

declare -A PORT=() RES=() MEM=()
for name in nginx pagid; do
    PORT[$name]=$(free_port)
    "start_$name" "$name" "${PORT[$name]}"
done
for name in nginx pagid; do wait_ready "$name" "${PORT[$name]}"; done

if ((IDLE > 0)); then
    for name in nginx pagid; do
        note "memory: $IDLE idle h2 connections -> $name"
        MEM[$name]=$(idle_memory "$name" "${PORT[$name]}" 2>"$WORK/mem-$name.err") || MEM[$name]="n/a"
    done
fi

for name in nginx pagid; do
    note "warm-up: $name (${WARMUP}s)"
    timeout -k 5 $((WARMUP + 30)) h2load -t "$THREADS" -c "$CONNECTIONS" -m "$STREAMS" \
        -D "$WARMUP" "https://localhost:${PORT[$name]}/" >/dev/null 2>&1 || true
done
for name in pagid nginx; do
    note "h2load -c $CONNECTIONS -m $STREAMS -> $name (${DURATION}s)"
    timeout -k 5 $((DURATION + 60)) h2load -t "$THREADS" -c "$CONNECTIONS" -m "$STREAMS" \
        -D "$DURATION" --log-file="$WORK/log-$name.txt" "https://localhost:${PORT[$name]}/" \
        >"$WORK/out-$name.txt" 2>&1 || true
    RES[$name]=$(parse_h2load "$WORK/out-$name.txt" "$WORK/log-$name.txt")
    sleep 1
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }'; }
{
    printf 'HTTP/2 (h2, TLS 1.3), one worker each, h2load -c %s -m %s, %ss\n' \
        "$CONNECTIONS" "$STREAMS" "$DURATION"
    printf '%-24s %12s %12s %8s\n' "" nginx pagid "pagid/nginx"
    read -r nr n50 n99 ne nok <<<"${RES[nginx]}"
    read -r pr p50 p99 pe pok <<<"${RES[pagid]}"
    printf '%-24s %12s %12s %8s\n' "requests/s" "$nr" "$pr" "$(ratio "$pr" "$nr")"
    printf '%-24s %12s %12s %8s\n' "p50 ms" "$n50" "$p50" "$(ratio "$p50" "$n50")"
    printf '%-24s %12s %12s %8s\n' "p99 ms" "$n99" "$p99" "$(ratio "$p99" "$n99")"
    printf '%-24s %12s %12s\n' "errors" "$ne" "$pe"
    printf '%-24s %12s %12s\n' "2xx responses" "$nok" "$pok"
    if ((IDLE > 0)); then
        printf '%-24s %12s %12s %8s\n' "KiB per idle h2 conn" "${MEM[nginx]}" "${MEM[pagid]}" \
            "$(ratio "${MEM[pagid]}" "${MEM[nginx]}")"
    fi
} | tee "$WORK/table.txt"
if [[ -n $RESULTS ]]; then
    mkdir -p "$(dirname "$RESULTS")"
    cp "$WORK/table.txt" "$RESULTS"
fi
