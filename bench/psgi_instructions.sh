#!/usr/bin/env bash
# psgi_instructions.sh - instructions per PSGI hello request through the
# worker pool, counted by callgrind (deterministic, unlike req/s or CPU time
# on a shared machine): the event-loop worker and the pool processes apart.
# Two runs under valgrind (SMALL and LARGE requests); their difference over
# LARGE - SMALL requests cancels start-up and shutdown. A tool, not a test.
#
#   PAGID=build/pagid bench/psgi_instructions.sh
#   SMALL=200 LARGE=4200 PROCS=2 bench/psgi_instructions.sh
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
PAGID=$(realpath "${PAGID:-./pagid}")
SMALL=${SMALL:-200}
LARGE=${LARGE:-4200}
PROCS=${PROCS:-2}
CONNS=${CONNS:-20}
WORK=$(mktemp -d)
note() { echo "psgi_instructions.sh: $*" >&2; }
die() { note "$*"; exit 1; }
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
for t in valgrind callgrind_annotate h2load curl; do
    command -v $t >/dev/null || die "needs $t (Debian: valgrind, nghttp2-client, curl)"
done
[[ -x $PAGID ]] || die "no pagid binary (PAGID=...)"

ir_of() { callgrind_annotate "$1" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'; }

run() { # n: prints "worker_ir pool_ir" of a run serving n requests
    local n=$1 dir=$WORK/run-$1 port i w p pool=0
    mkdir -p "$dir"
    port=$(free_port)
    cat >"$dir/pagid.yaml" <<EOF2
listen: [127.0.0.1:$port]
workers: 1
user: $(id -un)
timeouts: {heartbeat: 600s}
app: {psgi: $here/psgi_app.psgi, worker_pool: {processes: $PROCS, queue_limit: 4096}}
EOF2
    launch "run$n" "$dir" valgrind --tool=callgrind --trace-children=yes \
        --callgrind-out-file="$dir/cg.%p" "$PAGID" -c "$dir/pagid.yaml"
    for ((i = 0; i < 400; i++)); do
        grep -q 'all workers ready' "$dir/stdout.log" 2>/dev/null && break
        sleep 0.25
    done
    h2load --h1 -n "$n" -c "$CONNS" "http://127.0.0.1:$port/" | grep -q "$n succeeded" ||
        note "not every request succeeded in the run of $n"
    stop_server "run$n"
    w=$(grep -o 'worker 1 started (pid [0-9]*' "$dir/stdout.log" | grep -o '[0-9]*$' | head -1)
    for p in $(grep -o 'pool process [0-9]* started (pid [0-9]*' "$dir/stdout.log" | grep -o '[0-9]*$'); do
        pool=$((pool + $(ir_of "$dir/cg.$p")))
    done
    echo "$(ir_of "$dir/cg.$w") $pool"
}

read -r w1 p1 < <(run "$SMALL")
read -r w2 p2 < <(run "$LARGE")
n=$((LARGE - SMALL))
printf 'instructions per request (%d requests, %d pool processes):\n' "$n" "$PROCS"
printf '  worker          %8d\n  pool processes  %8d\n  total           %8d\n' \
    $(((w2 - w1) / n)) $(((p2 - p1) / n)) $(((w2 - w1 + p2 - p1) / n))
