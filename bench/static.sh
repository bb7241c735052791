#!/usr/bin/env bash
# bench/static.sh - pagid's static app against h2o's file.dir and nginx,
# side by side in one run: the same directory, one worker (thread) each,
# files of 15 B, 64 KiB and 1 MiB, over HTTP/1.1 (wrk) and h2 over TLS 1.3
# (h2load -m 10). nginx runs as it ships (sendfile on, no open_file_cache);
# h2o 2.2 keeps its filecache (cleared every loop turn). Prints requests/s
# per row with pagid/h2o and pagid/nginx ratios; a tool for people, it never
# fails on them.
#
# Usage: bench/static.sh
# Environment: PAGID, NGINX, H2O, DURATION (s, 8), CONNECTIONS (100),
#   STREAMS (-m, 10), THREADS (client threads, 2), WARMUP (s, 2),
#   RESULTS (file for the table, "" = don't write).
set -euo pipefail

DURATION=${DURATION:-8}
CONNECTIONS=${CONNECTIONS:-100}
STREAMS=${STREAMS:-10}
THREADS=${THREADS:-2}
WARMUP=${WARMUP:-2}
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RESULTS=${RESULTS-$BENCH_DIR/results/static.txt}

die() { printf 'bench: %s\n' "$*" >&2; exit 1; }
note() { printf 'bench: %s\n' "$*" >&2; }

for v in DURATION CONNECTIONS STREAMS THREADS WARMUP; do
    [[ ${!v} =~ ^[0-9]+$ && ${!v} -gt 0 ]] || die "$v must be a positive integer"
done
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
H2O=${H2O:-$(command -v h2o || echo /usr/bin/h2o)}
[[ -x $NGINX ]] || die "nginx not found (Debian: nginx-light; or set NGINX=)"
[[ -x $H2O ]] || die "h2o not found (Debian: h2o; or set H2O=)"
for t in wrk h2load curl openssl; do
    command -v "$t" >/dev/null || die "$t not found (h2load: Debian's nghttp2-client)"
done
if [[ -z ${PAGID:-} ]]; then
    if [[ -x ./build/pagid ]]; then PAGID=$PWD/build/pagid
    elif command -v pagid >/dev/null; then PAGID=$(command -v pagid)
    else die "no pagid binary: build it, install it, or set PAGID=/path/to/pagid"; fi
fi
[[ -x $PAGID ]] || die "PAGID=$PAGID is not executable"
ulimit -n 65536 2>/dev/null || true

WORK=$(mktemp -d "${TMPDIR:-/tmp}/pagid-staticbench.XXXXXX")
# shellcheck source=bench/lib.sh
. "$BENCH_DIR/lib.sh"

WWW=$WORK/www
mkdir -p "$WWW"
chmod 755 "$WORK" # h2o started as root serves as nobody
printf 'Hello from PAGI' >"$WWW/15b.txt"
head -c 65536 /dev/urandom >"$WWW/64k.bin"
head -c 1048576 /dev/urandom >"$WWW/1m.bin"
FILES=(15b.txt 64k.bin 1m.bin)

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

start_nginx() { # name plain_port tls_port
    local name=$1 dir=$WORK/$1
    mkdir -p "$dir/tmp"
    cat >"$dir/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log;
worker_rlimit_nofile 16384;
events { worker_connections 8192; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
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
        listen 127.0.0.1:$2;
        listen 127.0.0.1:$3 ssl http2;
        ssl_certificate $CERT;
        ssl_certificate_key $KEY;
        ssl_protocols TLSv1.3;
        root $WWW;
    }
}
EOF
    launch_nginx "$name" "$dir"
}

start_h2o() { # name plain_port tls_port
    local name=$1 dir=$WORK/$1
    mkdir -p "$dir"
    cat >"$dir/h2o.conf" <<EOF
num-threads: 1
max-connections: 8192
http2-idle-timeout: 300
http1-request-timeout: 300
listen:
  host: 127.0.0.1
  port: $2
listen:
  host: 127.0.0.1
  port: $3
  ssl:
    certificate-file: $CERT
    key-file: $KEY
    minimum-version: TLSv1.2
hosts:
  default:
    paths:
      /:
        file.dir: $WWW
EOF
    launch "$name" "$dir" "$H2O" -c "$dir/h2o.conf"
}

start_pagid() { # name plain_port tls_port
    local name=$1 dir=$WORK/$1
    mkdir -p "$dir"
    cat >"$dir/pagid.yaml" <<EOF
listen:
  - 127.0.0.1:$2
  - address: 127.0.0.1:$3
    tls: {cert: $CERT, key: $KEY, protocols: [TLSv1.3]}
app: static:$WWW
limits:
  max_connections: 8192
timeouts:
  idle: 300s
  keepalive: 300s
EOF
    local user=()
    (($(id -u) == 0)) && user=(-u root)
    launch "$name" "$dir" "$PAGID" -w 1 -c "$dir/pagid.yaml" "${user[@]}"
}

wait_ready() { # name plain_port tls_port
    local name=$1 i
    for ((i = 0; i < 100; i++)); do
        kill -0 "${PID[$name]}" 2>/dev/null || die "$name exited during startup (logs: $WORK/$name)"
        if curl -fsS --max-time 1 -o /dev/null "http://127.0.0.1:$2/15b.txt" 2>/dev/null &&
            [[ $(curl -fsS --http2 --max-time 1 --cacert "$CA" -o /dev/null -w '%{http_version}' \
                --resolve "localhost:$3:127.0.0.1" "https://localhost:$3/15b.txt" 2>/dev/null) == 2 ]]; then
            return 0
        fi
        sleep 0.1
    done
    curl -sS --http2 --max-time 2 --cacert "$CA" -o /dev/null --resolve "localhost:$3:127.0.0.1" \
        "https://localhost:$3/15b.txt" >&2 || true
    die "$name did not serve on 127.0.0.1:$2 and h2 on :$3"
}

h1_rps() { # port file
    timeout -k 5 $((DURATION + 60)) wrk -t "$THREADS" -c "$CONNECTIONS" -d "${DURATION}s" --latency "http://127.0.0.1:$1/$2" \
        2>/dev/null | awk '/^Requests\/sec:/ { printf "%d", $2 }'
}

h2_rps() { # port file
    timeout -k 5 $((DURATION + 60)) h2load -t "$THREADS" -c "$CONNECTIONS" -m "$STREAMS" -D "$DURATION" \
        "https://localhost:$1/$2" 2>/dev/null |
        awk '/^finished in/ { gsub(/,/, ""); printf "%d", $4 }'
}

SERVERS=(pagid h2o nginx)
declare -A PLAIN=() TLSP=() RES=()
for name in "${SERVERS[@]}"; do
    PLAIN[$name]=$(free_port)
    TLSP[$name]=$(free_port)
    "start_$name" "$name" "${PLAIN[$name]}" "${TLSP[$name]}"
done
for name in "${SERVERS[@]}"; do wait_ready "$name" "${PLAIN[$name]}" "${TLSP[$name]}"; done
for name in "${SERVERS[@]}"; do
    cmp -s <(curl -fsS "http://127.0.0.1:${PLAIN[$name]}/1m.bin") "$WWW/1m.bin" ||
        die "$name does not serve 1m.bin intact"
    note "warm-up: $name (${WARMUP}s)"
    timeout -k 5 $((WARMUP + 30)) wrk -t1 -c10 -d "${WARMUP}s" \
        "http://127.0.0.1:${PLAIN[$name]}/15b.txt" >/dev/null 2>&1 || true
done

for f in "${FILES[@]}"; do
    for proto in h1 h2; do
        for name in "${SERVERS[@]}"; do
            note "$proto $f -> $name (${DURATION}s)"
            if [[ $proto == h1 ]]; then
                RES[$proto.$f.$name]=$(h1_rps "${PLAIN[$name]}" "$f" || echo 0)
            else
                RES[$proto.$f.$name]=$(h2_rps "${TLSP[$name]}" "$f" || echo 0)
            fi
            sleep 1
        done
    done
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }'; }
{
    printf 'static files, one worker each; HTTP/1.1: wrk -t%s -c%s; h2: h2load -c%s -m%s (TLS 1.3); %ss a row\n' \
        "$THREADS" "$CONNECTIONS" "$CONNECTIONS" "$STREAMS" "$DURATION"
    printf '%-16s %10s %10s %10s %10s %12s\n' "requests/s" pagid h2o nginx "pagid/h2o" "pagid/nginx"
    for f in "${FILES[@]}"; do
        for proto in h1 h2; do
            p=${RES[$proto.$f.pagid]} h=${RES[$proto.$f.h2o]} n=${RES[$proto.$f.nginx]}
            printf '%-16s %10s %10s %10s %10s %12s\n' "$proto $f" "$p" "$h" "$n" \
                "$(ratio "$p" "$h")" "$(ratio "$p" "$n")"
        done
    done
} | tee "$WORK/table.txt"
if [[ -n $RESULTS ]]; then
    mkdir -p "$(dirname "$RESULTS")"
    cp "$WORK/table.txt" "$RESULTS"
fi
