#!/usr/bin/env bash
# bench/tls.sh - pagid against nginx over TLS, side by side, in one run: the
# same certificate (a throwaway P-256 CA and server certificate), the same
# pinned cipher, one worker each; keep-alive and new-handshake requests/s with
# p99 (wrk, hey), and worker memory per idle TLS connection. Prints a table
# with pagid/nginx ratios; it is a tool for people and never fails on them.
#
# Usage: bench/tls.sh            (see bench/README.md)
# Environment: PAGID, NGINX, DURATION (s, 10), CONNECTIONS (keep-alive, 500),
#   CLOSE_CONNECTIONS (new handshakes, 50), THREADS (wrk, 2), WARMUP (s, 2),
#   PROTO (1.3 or 1.2), IDLE (idle TLS connections for the memory row, 1000; 0 = skip),
#   ROWS (which throughput rows: "keepalive close heyclose"), INSTR (1 = also
#   count instructions per response under callgrind), INSTR_SECONDS (10),
#   RESULTS (file for the table, "" = don't write).
set -euo pipefail

DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-500}
CLOSE_CONNECTIONS=${CLOSE_CONNECTIONS:-50}
THREADS=${THREADS:-2}
WARMUP=${WARMUP:-2}
IDLE=${IDLE:-1000}
PROTO=${PROTO:-1.3}
INSTR=${INSTR:-0}
INSTR_SECONDS=${INSTR_SECONDS:-10}
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RESULTS=${RESULTS-$BENCH_DIR/results/tls.txt}
BODY="Hello from PAGI"

die() { printf 'bench: %s\n' "$*" >&2; exit 1; }
note() { printf 'bench: %s\n' "$*" >&2; }

for v in DURATION CONNECTIONS CLOSE_CONNECTIONS THREADS WARMUP; do
    [[ ${!v} =~ ^[0-9]+$ && ${!v} -gt 0 ]] || die "$v must be a positive integer"
done
[[ $IDLE =~ ^[0-9]+$ ]] || die "IDLE must be a number"
# The one cipher both servers are held to, per protocol version.
case $PROTO in
1.3) CIPHER=TLS_AES_128_GCM_SHA256 PROTO_NAME=TLSv1.3 ;;
1.2) CIPHER=ECDHE-ECDSA-AES128-GCM-SHA256 PROTO_NAME=TLSv1.2 ;;
*) die "PROTO must be 1.3 or 1.2" ;;
esac

NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
[[ -x $NGINX ]] || die "nginx not found (set NGINX=/path/to/nginx)"
for t in wrk hey curl openssl python3; do
    command -v "$t" >/dev/null || die "$t not found"
done
if [[ -z ${PAGID:-} ]]; then
    if [[ -x ./pagid ]]; then PAGID=$PWD/pagid
    elif command -v pagid >/dev/null; then PAGID=$(command -v pagid)
    else die "no pagid binary: build it (./pagid), install it, or set PAGID=/path/to/pagid"; fi
fi
[[ -x $PAGID ]] || die "PAGID=$PAGID is not executable"

if ! ulimit -n 65536 2>/dev/null; then
    hard=$(ulimit -Hn)
    [[ $hard == unlimited ]] || ulimit -n "$hard"
    note "could not raise the open-file limit to 65536; using $(ulimit -n)"
fi
(($(ulimit -n) >= IDLE * 2 + 1024)) || die "open-file limit $(ulimit -n) too low for IDLE=$IDLE"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/pagid-tlsbench.XXXXXX")
# shellcheck source=bench/lib.sh
. "$BENCH_DIR/lib.sh"

# ------------------------------------------------------------ certificate
# One CA and one server certificate (P-256, SAN localhost and 127.0.0.1)
# that both servers present.
pki() {
    local d=$WORK/pki
    mkdir -p "$d"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -keyout "$d/ca.key" -out "$d/ca.pem" -days 2 -subj "/CN=pagid bench CA" \
        -addext basicConstraints=critical,CA:TRUE \
        -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -keyout "$d/server.key" -out "$d/server.csr" -subj /CN=localhost 2>/dev/null
    printf 'basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n' \
        >"$d/server.ext"
    openssl x509 -req -in "$d/server.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -set_serial 2 \
        -days 2 -extfile "$d/server.ext" -out "$d/server.pem" 2>/dev/null
    CA=$d/ca.pem CERT=$d/server.pem KEY=$d/server.key
}
pki

# The cipher is pinned on both sides. Clients (wrk, openssl s_client, the
# memory client) read an OpenSSL config offering only CIPHER at PROTO, so
# whichever server they talk to can only agree on it; pagid reads the same
# config (its TLS 1.3 suites are OpenSSL's defaults, which this replaces);
# nginx gets the equivalent directives. hey (Go) ignores OpenSSL's config:
# for it the servers' pins decide. Each server's answer is checked below.
cat >"$WORK/openssl.cnf" <<EOF
openssl_conf = pagid_bench
[pagid_bench]
ssl_conf = pagid_bench_ssl
[pagid_bench_ssl]
system_default = pagid_bench_default
[pagid_bench_default]
MinProtocol = $PROTO_NAME
MaxProtocol = $PROTO_NAME
Ciphersuites = TLS_AES_128_GCM_SHA256
CipherString = ECDHE-ECDSA-AES128-GCM-SHA256
Groups = P-256
EOF
export OPENSSL_CONF=$WORK/openssl.cnf

# With a third argument the server runs as one process under callgrind
# (nginx: master_process off; pagid: -w 0), for the instruction counts.
start_nginx() { # name port [callgrind]
    local name=$1 port=$2 dir=$WORK/$1 master=on
    [[ -n ${3:-} ]] && master=off
    mkdir -p "$dir/tmp"
    cat >"$dir/nginx.conf" <<EOF
master_process $master;
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
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    server {
        listen 127.0.0.1:$port ssl;
        ssl_certificate $CERT;
        ssl_certificate_key $KEY;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_ciphers ECDHE-ECDSA-AES128-GCM-SHA256;
        ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256;
        ssl_ecdh_curve prime256v1;
        ssl_prefer_server_ciphers on;
        location / { default_type text/plain; return 200 "$BODY"; }
    }
}
EOF
    if [[ -n ${3:-} ]]; then
        launch "$name" "$dir" valgrind -q --tool=callgrind "--callgrind-out-file=$WORK/cg.$name.%p" "$NGINX" -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log"
    else
        launch_nginx "$name" "$dir"
    fi
}

start_pagid() { # name port [callgrind]
    local name=$1 port=$2 dir=$WORK/$1
    mkdir -p "$dir"
    cat >"$dir/pagid.yaml" <<EOF
listen:
  - address: 127.0.0.1:$port
    tls: {cert: $CERT, key: $KEY}
app: hello
limits:
  max_connections: $((IDLE + 4096))
timeouts:
  idle: 300s
  keepalive: 300s
EOF
    local user=()
    (($(id -u) == 0)) && user=(-u root)
    if [[ -n ${3:-} ]]; then
        launch "$name" "$dir" valgrind -q --tool=callgrind "--callgrind-out-file=$WORK/cg.$name.%p" "$PAGID" -w 0 -c "$dir/pagid.yaml" "${user[@]}"
    else
        launch "$name" "$dir" "$PAGID" -w 1 -c "$dir/pagid.yaml" "${user[@]}"
    fi
}

wait_ready() { # name port [tries]: up to 10 s (tries/10) for a 200 with the expected body
    local name=$1 port=$2 i body
    for ((i = 0; i < ${3:-100}; i++)); do
        if ! kill -0 "${PID[$name]}" 2>/dev/null; then
            cat "$WORK/$name"/*.log >&2 2>/dev/null || true
            die "$name exited during startup"
        fi
        if body=$(curl -fsS --max-time 1 --cacert "$CA" "https://localhost:$port/" \
            --resolve "localhost:$port:127.0.0.1" 2>/dev/null); then
            [[ $body == "$BODY" ]] ||
                note "$name answers '$body', not '$BODY': not the same work as the other side"
            return 0
        fi
        sleep 0.1
    done
    die "$name did not answer on 127.0.0.1:$port within $((${3:-100} / 10)) s"
}

negotiated() { # port: "PROTOCOL CIPHER" that openssl s_client agreed on
    openssl s_client -connect "127.0.0.1:$1" -servername localhost -CAfile "$CA" \
        -verify_return_error </dev/null 2>/dev/null |
        awk '/^New, / { p = $2; c = $NF } END { print p, c }' | tr -d ,
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

# ---------------------------------------------------------------- parsing
# Both print one line: "rps p50_ms p99_ms max_ms errors responses", "-" = missing.
parse_wrk() {
    awk '
    function ms(v) {
        if (v ~ /us$/) return v / 1000
        if (v ~ /ms$/) return v + 0
        if (v ~ /m$/)  return v * 60000
        if (v ~ /s$/)  return v * 1000
        return "-"
    }
    BEGIN { rps = p50 = p99 = max = count = "-"; errs = 0; seen = 0 }
    /^ +Latency +[0-9.]+[a-z]+ / { max = ms($4) }
    /^ +50% +[0-9.]/ { p50 = ms($2) }
    /^ +99% +[0-9.]/ { p99 = ms($2) }
    /^Requests\/sec:/ { rps = $2 + 0; seen = 1 }
    /Socket errors:/ { gsub(/,/, ""); errs += $4 + $6 + $8 + $10 }
    /Non-2xx or 3xx responses:/ { errs += $NF }
    / requests in / { count = $1 + 0 }
    END {
        if (!seen) errs = "-"
        printf "%s %s %s %s %s %s\n", rps, p50, p99, max, errs, count
    }' "$1"
}

parse_hey() { # responses received / time (hey's own figure counts failures)
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
        printf "%s %s %s %s %s %s\n", rps, p50, p99, max, errs, resp
    }' "$1"
}

# ---------------------------------------------------------------- running
declare -A PORT=() RES=() NEG=() MEM=() CPU=()
read -r -a ROWS <<<"${ROWS:-keepalive close heyclose}"
declare -A ROWLABEL=([keepalive]="wrk keep-alive" [close]="wrk Connection: close"
    [heyclose]="hey -disable-keepalive")

cpu_ticks() { # pid: user + system clock ticks so far
    awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"
}

run_row() { # row name
    local row=$1 name=$2 url out limit worker t0 t1
    url="https://localhost:${PORT[$name]}/"
    out=$WORK/$row-$name.txt
    limit=$((DURATION + 60))
    kill -0 "${PID[$name]}" 2>/dev/null || die "$name is no longer running"
    note "$row -> $name (${DURATION}s)"
    worker=$(worker_of "$name")
    t0=$(cpu_ticks "$worker")
    case $row in
    keepalive) timeout -k 5 "$limit" wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" \
                   --latency "$url" >"$out" 2>&1 & ;;
    close) timeout -k 5 "$limit" wrk -t"$THREADS" -c"$CLOSE_CONNECTIONS" -d"${DURATION}s" \
               --latency -H 'Connection: close' "$url" >"$out" 2>&1 & ;;
    heyclose) timeout -k 5 "$limit" hey -z "${DURATION}s" -c "$CLOSE_CONNECTIONS" \
                  -disable-keepalive "$url" >"$out" 2>&1 & ;;
    esac
    CLIENT=$!
    wait "$CLIENT" || true
    CLIENT=""
    t1=$(cpu_ticks "$worker")
    if [[ $row == heyclose ]]; then RES[$row.$name]=$(parse_hey "$out")
    else RES[$row.$name]=$(parse_wrk "$out"); fi
    # The worker's CPU time per response: steadier than req/s on a shared
    # machine, where the clients and other work take CPU from the server.
    CPU[$row.$name]=$(awk -v t=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" -v n="${RES[$row.$name]##* }" \
        'BEGIN { if (n + 0 > 0) printf "%.0f", t * 1e6 / hz / n; else print "-" }')
    { printf '==== %s %s\n' "$row" "$name"; cat "$out"; } >>"$WORK/raw.txt"
    sleep 1
}

# localhost must be 127.0.0.1 for the clients (SNI and certificate name).
getent hosts localhost | grep -q '127\.0\.0\.1' ||
    die "localhost does not resolve to 127.0.0.1 here"

for name in nginx pagid; do
    PORT[$name]=$(free_port)
    "start_$name" "$name" "${PORT[$name]}"
done
for name in nginx pagid; do
    wait_ready "$name" "${PORT[$name]}"
    NEG[$name]=$(negotiated "${PORT[$name]}")
    note "$name: ${NEG[$name]}"
done
[[ ${NEG[nginx]} == "$PROTO_NAME $CIPHER" && ${NEG[pagid]} == "$PROTO_NAME $CIPHER" ]] ||
    die "not the same cipher: nginx '${NEG[nginx]}', pagid '${NEG[pagid]}' (expected $PROTO_NAME $CIPHER)"

# Memory first, on fresh workers: IDLE connections, one request each, held.
for name in nginx pagid; do
    ((IDLE > 0)) || break
    note "memory: $IDLE idle TLS connections -> $name"
    MEM[$name]=$(python3 "$BENCH_DIR/memory_client.py" --port "${PORT[$name]}" \
        --pid "$(worker_of "$name")" --mode idle --count "$IDLE" --tls "$CA" --verbose \
        2>"$WORK/mem-$name.err") || MEM[$name]="n/a"
    MEM[$name.rss]=$(awk '/^rss before/ { printf "%.1f %.1f", $3 / 1048576, $5 / 1048576 }' \
        "$WORK/mem-$name.err")
    [[ ${MEM[$name]} =~ ^-?[0-9]+$ ]] || note "$name memory: ${MEM[$name]} $(cat "$WORK/mem-$name.err")"
done

for name in nginx pagid; do
    note "warm-up: $name (${WARMUP}s)"
    timeout -k 5 $((WARMUP + 30)) wrk -t"$THREADS" -c"$CONNECTIONS" -d"${WARMUP}s" \
        "https://localhost:${PORT[$name]}/" >/dev/null 2>&1 || true
done

# Alternate which server goes first from one row to the next.
i=0
for row in "${ROWS[@]}"; do
    if ((i % 2)); then order=(pagid nginx); else order=(nginx pagid); fi
    for name in "${order[@]}"; do run_row "$row" "$name"; done
    i=$((i + 1))
done

# ------------------------------------------------- instructions (INSTR=1)
# Each server alone under callgrind, one process: the instructions it runs
# per response do not depend on what else the machine is doing, unlike req/s.
declare -A INS=()
INSTR_ROWS=(keepalive close)

dumps() { ls "$WORK/cg.$1".* 2>/dev/null | wc -l; }

instr_since_last() { # name: dump callgrind's counts; prints the instructions since the last dump
    local name=$1 n i f
    n=$(dumps "$name")
    callgrind_control -d "${PID[$name]}" >/dev/null 2>&1 || die "callgrind_control -d failed for $name"
    for ((i = 0; i < 300; i++)); do
        (($(dumps "$name") > n)) && break
        sleep 0.1
    done
    f=$(ls -t "$WORK/cg.$name".* | head -1)
    awk '/^summary:/ { print $2 }' "$f"
}

instr_part() {
    local name cg port row out n ins
    for name in nginx pagid; do
        cg=$name-cg
        port=$(free_port)
        note "callgrind: $name (one process, ${INSTR_SECONDS}s per row)"
        "start_$name" "$cg" "$port" callgrind
        wait_ready "$cg" "$port" 600
        timeout 60 wrk -t1 -c4 -d2s "https://localhost:$port/" >/dev/null 2>&1 || true
        instr_since_last "$cg" >/dev/null # start-up and warm-up
        for row in "${INSTR_ROWS[@]}"; do
            out=$WORK/instr-$row-$name.txt
            case $row in
            keepalive) timeout 120 wrk -t1 -c10 -d"${INSTR_SECONDS}s" "https://localhost:$port/" >"$out" 2>&1 || true ;;
            close) timeout 120 wrk -t1 -c4 -d"${INSTR_SECONDS}s" -H 'Connection: close' \
                       "https://localhost:$port/" >"$out" 2>&1 || true ;;
            esac
            ins=$(instr_since_last "$cg")
            n=$(awk '/ requests in / { print $1 }' "$out")
            INS[$row.$name]=$(awk -v i="$ins" -v n="${n:-0}" 'BEGIN { if (n > 0) printf "%.0f", i / n; else print "-" }')
            INS[$row.$name.n]=${n:--}
        done
        stop_server "$cg"
    done
}
if ((INSTR)); then
    command -v valgrind >/dev/null && command -v callgrind_control >/dev/null ||
        die "INSTR=1 needs valgrind (apt-get install valgrind)"
    instr_part
fi

# ------------------------------------------------------------------ report
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        if (a == "-" || b == "-" || b + 0 == 0) print "-"; else printf "%.2f\n", a / b }'
}
num() {
    awk -v v="$1" -v d="$2" 'BEGIN { if (v == "-") print "-"; else printf "%.*f\n", d, v }'
}

report() {
    local row name rps p50 p99 max errs cnt n p
    printf 'pagid vs nginx over TLS, one run on %s (%s CPUs), %s\n' "$(uname -n)" "$(nproc)" \
        "$(date -u '+%Y-%m-%d %H:%M UTC')"
    printf 'nginx: %s\npagid: %s\n' "$("$NGINX" -v 2>&1 | head -1)" "$("$PAGID" --version 2>&1 | head -1)"
    printf 'both: 1 worker, loopback, P-256 certificate, %s %s (checked on each)\n' "$PROTO_NAME" "$CIPHER"
    printf 'keep-alive: wrk -t%s -c%s -d%ss --latency | new handshakes: -c %s, wrk -H "Connection: close", hey -disable-keepalive\n' \
        "$THREADS" "$CONNECTIONS" "$DURATION" "$CLOSE_CONNECTIONS"
    printf 'ratios are pagid/nginx: req/s above 1 = pagid faster; latency and cpu below 1 = pagid lower\n'
    printf 'cpu us/req: the worker process'"'"'s user+system CPU time over the run / responses\n\n'
    printf '%-24s %-12s %10s %9s %9s %9s %7s %10s\n' measurement server 'req/s' 'p50 ms' 'p99 ms' \
        'max ms' errors 'cpu us/req' 
    for row in "${ROWS[@]}"; do
        for name in nginx pagid; do
            read -r rps p50 p99 max errs cnt <<<"${RES[$row.$name]}"
            printf '%-24s %-12s %10s %9s %9s %9s %7s %10s\n' "${ROWLABEL[$row]}" "$name" \
                "$(num "$rps" 0)" "$(num "$p50" 2)" "$(num "$p99" 2)" "$(num "$max" 2)" "$errs" \
                "${CPU[$row.$name]}"
        done
        read -r -a n <<<"${RES[$row.nginx]}"
        read -r -a p <<<"${RES[$row.pagid]}"
        printf '%-24s %-12s %10s %9s %9s %9s %7s %10s\n\n' "${ROWLABEL[$row]}" 'pagid/nginx' \
            "$(ratio "${p[0]}" "${n[0]}")" "$(ratio "${p[1]}" "${n[1]}")" \
            "$(ratio "${p[2]}" "${n[2]}")" "$(ratio "${p[3]}" "${n[3]}")" '-' \
            "$(ratio "${CPU[$row.pagid]}" "${CPU[$row.nginx]}")"
    done
    if ((IDLE > 0)); then
        printf 'memory per idle TLS connection (%d held, one request each, worker VmRSS growth / %d)\n' \
            "$IDLE" "$IDLE"
        printf '%-12s %14s %14s %12s\n' server 'RSS before MiB' 'RSS after MiB' 'bytes/conn'
        for name in nginx pagid; do
            read -r b a <<<"${MEM[$name.rss]:-- -}"
            printf '%-12s %14s %14s %12s\n' "$name" "${b:--}" "${a:--}" "${MEM[$name]}"
        done
        if [[ ${MEM[pagid]} =~ ^[0-9]+$ && ${MEM[nginx]} =~ ^[0-9]+$ ]]; then
            printf '%-12s %14s %14s %12s\n' pagid/nginx '' '' "$(ratio "${MEM[pagid]}" "${MEM[nginx]}")"
        fi
    fi
    if ((INSTR)); then
        printf '\ninstructions per response (callgrind, one process each, wrk -t1 for %ss: -c10 keep-alive, -c4 Connection: close)\n' "$INSTR_SECONDS"
        printf '%-24s %12s %12s %8s %16s\n' measurement 'nginx' 'pagid' ratio 'responses n/p'
        for row in "${INSTR_ROWS[@]}"; do
            printf '%-24s %12s %12s %8s %16s\n' "${ROWLABEL[$row]}" "${INS[$row.nginx]}" "${INS[$row.pagid]}" \
                "$(ratio "${INS[$row.pagid]}" "${INS[$row.nginx]}")" "${INS[$row.nginx.n]}/${INS[$row.pagid.n]}"
        done
    fi
    printf '\nOne run on a shared machine: compare ratios, not absolute figures; they are\n'
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
