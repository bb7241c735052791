#!/usr/bin/env bash
# perl.sh - the Perl host against the reference server PAGI::Server and
# pagid's C hello, all in the same run, each with wrk -t2 -c500 --latency on
# the spec's hello app (tests/integration/perl/hello.pl: http.response.start
# then http.response.body). Two sets: one process each (pagid -w 1, the
# reference's single-process default), then N workers each (pagid's default,
# one per core, and the reference's --workers N). Prints req/s, p50/p99,
# errors, and the pagid-Perl/PAGI::Server and Perl/C ratios. A tool, not a test.
#
#   bench/perl.sh                 # uses $PAGID, else ./pagid
#   DURATION=30 bench/perl.sh
#   PAGI_SERVER_DIR=/path/to/PAGI-Server PAGI_DIR=/path/to/pagi bench/perl.sh
#   SETS=1 bench/perl.sh          # only the one-process set
#   PIN=1 SETS=1 bench/perl.sh    # one-process set: servers on CPU 0, wrk on CPU 1
#                                 # (less noise on a 2-CPU machine; same for all three)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
PAGID=${PAGID:-./pagid}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-3}
CONNS=${CONNS:-500}
APP=${APP:-$here/../tests/integration/perl/hello.pl}
PAGI_SERVER_DIR=${PAGI_SERVER_DIR:-/work/ext/PAGI-Server}
PAGI_DIR=${PAGI_DIR:-$(dirname "$PAGI_SERVER_DIR")/pagi}
NWORKERS=${NWORKERS:-$(nproc)}
SETS=${SETS:-1 N}
PIN=${PIN:-0}
APP=$(cd "$(dirname "$APP")" && pwd)/$(basename "$APP")
WORK=$(mktemp -d)
note() { echo "perl.sh: $*" >&2; }
die() { note "$*"; exit 1; }
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

ref=()
if [[ -f $PAGI_SERVER_DIR/bin/pagi-server && -d $PAGI_DIR/lib ]]; then
    ref=(perl -I"$PAGI_SERVER_DIR/lib" -I"$PAGI_DIR/lib" "$PAGI_SERVER_DIR/bin/pagi-server"
        --no-access-log -q -E production)
else
    note "PAGI::Server not found (PAGI_SERVER_DIR=$PAGI_SERVER_DIR, PAGI_DIR=$PAGI_DIR): its rows are skipped"
fi

declare -A RPS=()
run_one() { # label port command...: start it, warm up, measure, stop
    local label=$1 port=$2 out i
    shift 2
    launch "$label" "$WORK" "$@"
    for ((i = 0; i < 200; i++)); do
        curl -sf "http://127.0.0.1:$port/" >/dev/null && break
        sleep 0.05
    done
    if ((i == 200)); then
        note "$label did not answer on port $port (log: $(tail -3 "$WORK/stdout.log"))"
        stop_server "$label"
        return
    fi
    timeout $((WARMUP + 30)) "${cli_pin[@]}" wrk -t2 -c"$CONNS" -d"${WARMUP}s" "http://127.0.0.1:$port/" >/dev/null 2>&1
    out=$(timeout $((DURATION + 30)) "${cli_pin[@]}" wrk -t2 -c"$CONNS" -d"${DURATION}s" --latency "http://127.0.0.1:$port/" 2>&1)
    local rps p50 p99 errs
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
    p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
    errs=$(awk '/Socket errors/ {print} /Non-2xx/ {print}' <<<"$out" | tr '\n' ' ')
    printf '%-22s %10s req/s  p50 %-9s p99 %-9s errors: %s\n' \
        "$label" "$rps" "$p50" "$p99" "${errs:-none}"
    stop_server "$label"
    RPS[$label]=$rps
}

ratio() { # label a b
    if [[ -n ${RPS[$2]:-} && -n ${RPS[$3]:-} ]]; then
        python3 -c "print('%-22s %10.2f' % ('$1', ${RPS[$2]} / ${RPS[$3]}))"
    fi
}

for set in $SETS; do
    srv_pin=() cli_pin=()
    if [[ $set == 1 ]]; then
        pw=(-w 1) rw=() tag=1proc
        if [[ $PIN == 1 ]] && (($(nproc) >= 2)); then
            srv_pin=(taskset -c 0) cli_pin=(taskset -c 1)
            tag=1proc-pinned
        fi
    else
        pw=() rw=(--workers "$NWORKERS") tag=${NWORKERS}w
    fi
    echo "== $tag: pagid ${pw[*]:-(default: one worker per core)}, PAGI::Server ${rw[*]:-(single process)}"
    port=$(free_port)
    run_one "pagid-perl/$tag" "$port" "${srv_pin[@]}" "$PAGID" "${pw[@]}" -l "127.0.0.1:$port" -a "$APP"
    if ((${#ref[@]})); then
        port=$(free_port)
        run_one "pagi-server/$tag" "$port" "${srv_pin[@]}" "${ref[@]}" "${rw[@]}" --port "$port" "$APP"
    fi
    port=$(free_port)
    run_one "pagid-c/$tag" "$port" "${srv_pin[@]}" "$PAGID" "${pw[@]}" -l "127.0.0.1:$port" -a hello
    ratio "pagid-perl/pagi-server" "pagid-perl/$tag" "pagi-server/$tag"
    ratio "perl/C" "pagid-perl/$tag" "pagid-c/$tag"
done
