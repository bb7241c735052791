#!/usr/bin/env bash
# bench/soak.sh - long-run stability: memory and fds stay flat under a
# million mixed requests, and valgrind finds no leak.
#
# Usage: bench/soak.sh [PAGID]     (default: ./pagid, or PAGID=...)
# Environment:
#   TOTAL        requests for the -w 2 run (1000000)
#   MAX_SECONDS  stop the -w 2 run after this long, whatever TOTAL says (600)
#   WARMUP       requests before the RSS baseline is taken (20000)
#   PROCS        client processes (4)
#   VG_TOTAL     requests for the valgrind run (20000; 0 skips it)
#   VG_SECONDS   cap for the valgrind run (600)
#
# Phase 1: pagid -w 2 -a echo; bench/soak_client.py sends WARMUP requests,
#   then each worker's RSS and fd count are taken, then the rest; after the
#   clients are gone, RSS and fds again. Pass: every answer was right, RSS
#   grew by less than 1 MiB per worker after warm-up, fds are back to the
#   warm baseline.
# Phase 2: pagid -w 0 under valgrind memcheck, VG_TOTAL requests, SIGTERM;
#   pass: "definitely lost: 0 bytes", no errors.
# Prints the figures and "soak: PASS" or "soak: FAIL"; exit 1 on failure.
set -uo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PAGID=${1:-${PAGID:-./pagid}}
TOTAL=${TOTAL:-1000000}
MAX_SECONDS=${MAX_SECONDS:-600}
WARMUP=${WARMUP:-20000}
PROCS=${PROCS:-4}
VG_TOTAL=${VG_TOTAL:-20000}
VG_SECONDS=${VG_SECONDS:-600}
CLIENT="$BENCH_DIR/soak_client.py"

die() { printf 'soak: %s\n' "$*" >&2; exit 2; }
[[ -x $PAGID ]] || die "no pagid binary at $PAGID (give its path or set PAGID)"
PAGID=$(cd "$(dirname "$PAGID")" && pwd)/$(basename "$PAGID")
command -v python3 >/dev/null || die "python3 not found"

# connections of the client processes plus the server's
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

WORK=$(mktemp -d "${TMPDIR:-/tmp}/pagid-soak.XXXXXX")
SRV=""
cleanup() {
    if [[ -n $SRV ]] && kill -0 "$SRV" 2>/dev/null; then
        kill -TERM "$SRV" 2>/dev/null
        for _ in $(seq 50); do kill -0 "$SRV" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$SRV" 2>/dev/null
    fi
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
wait_port() { # wait_port PORT PID SECONDS
    local i
    for ((i = 0; i < $3 * 10; i++)); do
        kill -0 "$2" 2>/dev/null || return 1
        python3 -c "import socket,sys; socket.create_connection(('127.0.0.1',$1),timeout=1).close()" \
            2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}
children() { # PIDs whose parent is $1
    local d
    for d in /proc/[0-9]*; do
        [[ -r $d/stat ]] || continue
        read -r -a st <"$d/stat" 2>/dev/null || continue
        # field 4 is the ppid (comm has no spaces for pagid)
        [[ ${st[3]:-} == "$1" ]] && echo "${d#/proc/}"
    done | sort -n
}
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null; }
nfds() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }

CONFIG="$WORK/pagid.yaml"
cat >"$CONFIG" <<'EOF'
limits:
  max_body_size: 2m
  max_connections: 10000
error_log:
  level: warn
EOF

FAIL=0
fail() { printf 'soak: FAIL: %s\n' "$*"; FAIL=1; }

# ------------------------------------------------------------------ phase 1
PORT=$(free_port)
"$PAGID" -w 2 -l "127.0.0.1:$PORT" -a echo -c "$CONFIG" >"$WORK/pagid.log" 2>&1 &
SRV=$!
wait_port "$PORT" "$SRV" 15 || { cat "$WORK/pagid.log"; die "pagid did not start"; }
sleep 0.5
mapfile -t WORKERS < <(children "$SRV")
((${#WORKERS[@]} == 2)) || die "expected 2 workers, found ${#WORKERS[*]}"
echo "soak: pagid $PAGID -w 2 (master $SRV, workers ${WORKERS[*]}), port $PORT"
declare -A FD0 RSS_W FD_W RSS_E FD_E
for w in "${WORKERS[@]}"; do FD0[$w]=$(nfds "$w"); done

echo "soak: warm-up: $WARMUP requests"
python3 "$CLIENT" "$PORT" "$WARMUP" --procs "$PROCS" --seed 1 | tail -n 1 \
    || fail "errors during warm-up"
sleep 1
for w in "${WORKERS[@]}"; do RSS_W[$w]=$(rss_kib "$w"); FD_W[$w]=$(nfds "$w"); done

REST=$((TOTAL > WARMUP ? TOTAL - WARMUP : 0))
echo "soak: main run: $REST requests (at most ${MAX_SECONDS}s)"
T0=$SECONDS
python3 "$CLIENT" "$PORT" "$REST" --procs "$PROCS" --seconds "$MAX_SECONDS" --seed 2 \
    | tee "$WORK/client.log" | sed 's/^/    /'
CLIENT_RC=${PIPESTATUS[0]}
((CLIENT_RC == 0)) || fail "the client saw wrong answers or errors"
DONE=$(sed -n 's/^soak-client: done \([0-9]*\) requests.*/\1/p' "$WORK/client.log")
sleep 2 # the last connections close
for w in "${WORKERS[@]}"; do RSS_E[$w]=$(rss_kib "$w"); FD_E[$w]=$(nfds "$w"); done
kill -0 "$SRV" 2>/dev/null || fail "pagid died"
mapfile -t NOW < <(children "$SRV")
[[ "${NOW[*]}" == "${WORKERS[*]}" ]] || fail "workers changed: ${WORKERS[*]} -> ${NOW[*]} (a crash?)"

echo "soak: requests: $((WARMUP + ${DONE:-0})) in total ($WARMUP warm-up + ${DONE:-0}) of $TOTAL asked, $((SECONDS - T0))s main run"
for w in "${WORKERS[@]}"; do
    grow=$((${RSS_E[$w]:-0} - ${RSS_W[$w]:-0}))
    printf 'soak: worker %s: RSS %s KiB after warm-up, %s KiB at the end (%+d KiB); fds %s idle, %s after warm-up, %s at the end\n' \
        "$w" "${RSS_W[$w]}" "${RSS_E[$w]}" "$grow" "${FD0[$w]}" "${FD_W[$w]}" "${FD_E[$w]}"
    ((grow < 1024)) || fail "worker $w RSS grew by $grow KiB (limit 1024)"
    ((${FD_E[$w]:-999} <= ${FD0[$w]:-0})) || fail "worker $w holds ${FD_E[$w]} fds, ${FD0[$w]} when idle"
done
if grep -E 'crashed|AddressSanitizer|runtime error|SIGSEGV' "$WORK/pagid.log" >/dev/null; then
    fail "crash report in the pagid log ($WORK/pagid.log)"
fi
cleanup
SRV=""

# ------------------------------------------------------------------ phase 2
if ((VG_TOTAL > 0)); then
    if ! command -v valgrind >/dev/null; then
        fail "valgrind not found (apt-get install valgrind), or set VG_TOTAL=0"
    else
        PORT=$(free_port)
        VGLOG="$WORK/valgrind.log"
        echo "soak: valgrind memcheck: pagid -w 0, $VG_TOTAL requests"
        valgrind --leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite \
            --track-fds=no --log-file="$VGLOG" \
            "$PAGID" -w 0 -l "127.0.0.1:$PORT" -a echo -c "$CONFIG" >"$WORK/pagid-vg.log" 2>&1 &
        SRV=$!
        if wait_port "$PORT" "$SRV" 60; then
            python3 "$CLIENT" "$PORT" "$VG_TOTAL" --procs 2 --seconds "$VG_SECONDS" --seed 3 \
                | tail -n 1 | sed 's/^/    /'
            ((PIPESTATUS[0] == 0)) || fail "the client saw errors under valgrind"
            kill -TERM "$SRV"
            for _ in $(seq 300); do kill -0 "$SRV" 2>/dev/null || break; sleep 0.1; done
            wait "$SRV" 2>/dev/null
            SRV=""
            def=$(sed -n 's/.*definitely lost: \([0-9,]*\) bytes.*/\1/p' "$VGLOG" | tr -d , | tail -n 1)
            ind=$(sed -n 's/.*indirectly lost: \([0-9,]*\) bytes.*/\1/p' "$VGLOG" | tr -d , | tail -n 1)
            errs=$(sed -n 's/.*ERROR SUMMARY: \([0-9]*\) errors.*/\1/p' "$VGLOG" | tail -n 1)
            if grep -q 'All heap blocks were freed' "$VGLOG"; then def=0; ind=0; fi
            echo "soak: valgrind: definitely lost: ${def:-?} bytes, indirectly lost: ${ind:-?} bytes, ${errs:-?} errors (log $VGLOG)"
            grep -E 'in use at exit|total heap usage' "$VGLOG" | sed 's/^==[0-9]*== */    /'
            [[ ${def:-x} == 0 ]] || fail "valgrind: definitely lost ${def:-?} bytes"
            [[ ${errs:-x} == 0 ]] || fail "valgrind: ${errs:-?} errors"
        else
            cat "$WORK/pagid-vg.log"
            fail "pagid did not start under valgrind"
        fi
    fi
fi

if ((FAIL)); then
    echo "soak: FAIL (logs in $WORK)"
    exit 1
fi
echo "soak: PASS"
rm -rf "$WORK"
