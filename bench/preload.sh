#!/usr/bin/env bash
# bench/preload.sh - what preloading saves: the same Perl app (a large module
# set, bench/preload_app.pl) served by 4 workers with preload on (a zygote
# compiles it once, workers fork from it) and off (each worker compiles it),
# in one run. For each, after some requests, the PSS of every pagid process
# from /proc/PID/smaps_rollup: per worker, the zygote, the master, the total.
#
# Usage: bench/preload.sh            (see bench/README.md)
# Environment: PAGID (binary), WORKERS (4), REQUESTS (per run, 400).
set -euo pipefail

WORKERS=${WORKERS:-4}
REQUESTS=${REQUESTS:-400}
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
APP_SRC=$BENCH_DIR/preload_app.pl

die() { printf 'bench: %s\n' "$*" >&2; exit 1; }
note() { printf 'bench: %s\n' "$*" >&2; }

[[ $WORKERS =~ ^[0-9]+$ && $WORKERS -gt 0 ]] || die "WORKERS must be a positive integer"
command -v curl >/dev/null || die "curl not found"
command -v python3 >/dev/null || die "python3 not found"
if [[ -z ${PAGID:-} ]]; then
    if [[ -x ./pagid ]]; then PAGID=$PWD/pagid
    elif command -v pagid >/dev/null; then PAGID=$(command -v pagid)
    else die "no pagid binary: set PAGID=/path/to/pagid"; fi
fi
[[ -x $PAGID ]] || die "PAGID=$PAGID is not executable"
perl -e 'use Moose; use DateTime; use DBI; use Template; use Future::AsyncAwait' 2>/dev/null ||
    die "needs libmoose-perl libdatetime-perl libdbi-perl libtemplate-perl (see bench/README.md)"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/pagid-preload.XXXXXX")
# shellcheck source=bench/lib.sh
. "$BENCH_DIR/lib.sh"
# Workers run as nobody when this runs as root: let them read the app.
cp "$APP_SRC" "$WORK/app.pl"
chmod a+rx "$WORK" && chmod a+r "$WORK/app.pl"

pss_kb() { # pid: Pss in kB from smaps_rollup
    awk '/^Pss:/ {print $2; exit}' "/proc/$1/smaps_rollup" 2>/dev/null || echo 0
}
children() { # pid: its children's pids
    local p
    for p in /proc/[0-9]*; do
        [[ $(awk '{print $4}' "$p/stat" 2>/dev/null) == "$1" ]] && echo "${p#/proc/}"
    done
    return 0
}
title() { tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null; }

declare -A RESULT=()
measure() { # name preload-flag
    local name=$1 flag=$2 port dir=$WORK/$1 i t0 t1
    port=$(free_port)
    mkdir -p "$dir"
    t0=$(date +%s.%N)
    launch "$name" "$dir" "$PAGID" -w "$WORKERS" -l "127.0.0.1:$port" -a "$WORK/app.pl" "$flag"
    for ((i = 0; i < 600; i++)); do
        grep -q "all workers ready" "$dir/stdout.log" 2>/dev/null && break
        kill -0 "${PID[$name]}" 2>/dev/null || die "$name: pagid exited: $(tail -5 "$dir/stdout.log")"
        sleep 0.1
    done
    grep -q "all workers ready" "$dir/stdout.log" || die "$name: workers not ready in 60 s"
    t1=$(date +%s.%N)
    # Requests over many connections, so every worker serves some.
    python3 - "$port" "$REQUESTS" <<'PY'
import socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
for batch in range(0, n, 20):
    conns = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(20)]
    for c in conns:
        c.sendall(b"GET / HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n")
    for c in conns:
        data = b""
        while True:
            d = c.recv(65536)
            if not d:
                break
            data += d
        assert data.startswith(b"HTTP/1.1 200"), data[:100]
        c.close()
PY
    sleep 0.5
    local master=${PID[$name]} workers=() zygote="" w sum=0 min=0 max=0 n=0
    # setsid makes the launched process the master itself.
    for w in $(children "$master"); do
        case $(title "$w") in
        "pagid: zygote"*) zygote=$w ;;
        "pagid: worker"*) workers+=("$w") ;;
        esac
    done
    ((${#workers[@]} == WORKERS)) || die "$name: found ${#workers[@]} workers"
    local per=""
    for w in "${workers[@]}"; do
        local k
        k=$(pss_kb "$w")
        per+=" $((k / 1024))"
        sum=$((sum + k)); n=$((n + 1))
        ((min == 0 || k < min)) && min=$k
        ((k > max)) && max=$k
    done
    local zk=0 mk
    [[ -n $zygote ]] && zk=$(pss_kb "$zygote")
    mk=$(pss_kb "$master")
    RESULT[$name]=$(printf '%-8s %6.1f %6.1f %6.1f %8.1f %7.1f %7.1f %8.1f %6.1f' "$name" \
        "$(echo "$sum / $n / 1024" | bc -l)" "$(echo "$min / 1024" | bc -l)" \
        "$(echo "$max / 1024" | bc -l)" "$(echo "$sum / 1024" | bc -l)" \
        "$(echo "$zk / 1024" | bc -l)" "$(echo "$mk / 1024" | bc -l)" \
        "$(echo "($sum + $zk + $mk) / 1024" | bc -l)" "$(echo "$t1 - $t0" | bc -l)")
    note "$name: worker PSS (MB):$per; zygote $((zk / 1024)) MB"
    stop_server "$name"
}

command -v bc >/dev/null || die "bc not found"
note "pagid $PAGID, $WORKERS workers, $REQUESTS requests per run, app $APP_SRC"
measure preload --preload
measure off --no-preload
printf '\nPSS in MB (from /proc/PID/smaps_rollup), %d workers, after %d requests\n' "$WORKERS" "$REQUESTS"
printf '%-8s %6s %6s %6s %8s %7s %7s %8s %6s\n' mode worker min max workers zygote master total ready_s
printf '%s\n' "${RESULT[preload]}" "${RESULT[off]}"
