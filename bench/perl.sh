#!/usr/bin/env bash
# perl.sh - the Perl host against pagid's C hello in the same run: one worker
# each (pagid -w 1), wrk -t2 -c500 --latency, the spec's hello app
# (tests/integration/perl/hello.pl: http.response.start then http.response.body).
# Prints req/s, p50/p99, errors and the Perl/C ratio. A tool, not a test.
#
#   bench/perl.sh                 # uses $PAGID, else ./pagid
#   DURATION=30 bench/perl.sh
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
PAGID=${PAGID:-./pagid}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-3}
CONNS=${CONNS:-500}
APP=${APP:-$here/../tests/integration/perl/hello.pl}
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; }
trap cleanup EXIT INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

run_one() { # name app
    local name=$1 app=$2 port out
    port=$(free_port)
    "$PAGID" -w 1 -l "127.0.0.1:$port" -a "$app" >/dev/null 2>&1 &
    local pid=$!
    pids+=("$pid")
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/" >/dev/null && break; sleep 0.05; done
    timeout $((WARMUP + 30)) wrk -t2 -c"$CONNS" -d"${WARMUP}s" "http://127.0.0.1:$port/" >/dev/null 2>&1
    out=$(timeout $((DURATION + 30)) wrk -t2 -c"$CONNS" -d"${DURATION}s" --latency "http://127.0.0.1:$port/" 2>&1)
    local rps p50 p99 errs rss
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
    p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
    errs=$(awk '/Socket errors/ {print} /Non-2xx/ {print}' <<<"$out" | tr '\n' ' ')
    rss=$(ps -o rss= --ppid "$pid" | head -1)
    printf '%-10s %12s req/s  p50 %-9s p99 %-9s worker RSS %s KiB  errors: %s\n' \
        "$name" "$rps" "$p50" "$p99" "$rss" "${errs:-none}"
    kill "$pid"; wait "$pid" 2>/dev/null
    eval "RPS_$name=$rps"
}

run_one perl "$APP"
run_one c hello
python3 -c "print('perl/C ratio: %.2f' % ($RPS_perl / $RPS_c))"
