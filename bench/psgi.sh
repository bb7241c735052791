#!/usr/bin/env bash
# psgi.sh - PSGI apps on pagid's worker pool against Starman and uWSGI's psgi
# plugin, in the same run, with the same number of app processes (PROCS;
# pagid adds one event-loop worker, -w 1): (a) hello throughput with wrk,
# (b) SLOW misbehaving clients held while ordinary requests are timed,
# (c) BLOCKED handlers sleeping BLOCK_S seconds while ordinary requests are
# timed, (d) PSS per app process with preloading (Starman --preload-app).
# Starman and uWSGI run twice: alone, and behind nginx (one nginx worker,
# proxy_pass and uwsgi_pass as they ship), the way they are deployed,
# because alone each app process serves one keep-alive connection at a
# time: with CONNS > PROCS the other clients get nothing at all, which
# wrk's figures do not show (they count the answers that came). Part (a)
# therefore also runs CONNS keep-alive clients for FAIR_S seconds and
# shows how many of them got any answer ("served") and the longest wait
# for a first answer.
# Prints a table and ratios. A tool, not a test: nothing passes or fails.
#
#   bench/psgi.sh                      # uses $PAGID, else ./pagid
#   DURATION=30 PROCS=8 bench/psgi.sh
#   PARTS="hello memory" bench/psgi.sh
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
PAGID=${PAGID:-./pagid}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
CONNS=${CONNS:-50}
PROCS=${PROCS:-4}
SLOW=${SLOW:-120}
HOLD=${HOLD:-3}
BLOCKED=${BLOCKED:-3}
BLOCK_S=${BLOCK_S:-3}
PARTS=${PARTS:-hello slow blocked memory}
FAIR_S=${FAIR_S:-3}
SERVERS=${SERVERS:-pagid starman uwsgi nginx+starman nginx+uwsgi}
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
APP=$here/psgi_app.psgi
WORK=$(mktemp -d)
note() { echo "psgi.sh: $*" >&2; }
die() { note "$*"; exit 1; }
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
command -v wrk >/dev/null || die "needs wrk (Debian: wrk)"
command -v python3 >/dev/null || die "needs python3"
[[ -x $PAGID ]] || PAGID=$(command -v pagid) || die "no pagid binary (PAGID=...)"
# shellcheck disable=SC2206
servers=($SERVERS)
have() {
    case $1 in
    pagid) return 0 ;;
    starman) command -v starman >/dev/null ;;
    uwsgi) command -v uwsgi >/dev/null && uwsgi --plugins psgi --help >/dev/null 2>&1 ;;
    nginx+*) [[ -x $NGINX ]] && have "${1#nginx+}" ;;
    esac
}
for s in "${servers[@]}"; do
    have "$s" || note "$s is not installed (Debian: starman; uwsgi-core uwsgi-plugin-psgi; nginx-light): its rows are skipped"
done

start() { # name port: start the server on port with PROCS app processes
    local name=$1 port=$2 i
    case $name in
    pagid)
        cat >"$WORK/pagid.yaml" <<EOF
listen: [127.0.0.1:$port]
workers: 1
app: {psgi: $APP, worker_pool: {processes: $PROCS, queue_limit: 4096}}
EOF
        launch pagid "$WORK" "$PAGID" -c "$WORK/pagid.yaml" -u "$(id -un)"
        ;;
    starman)
        launch starman "$WORK" starman --workers "$PROCS" --listen "127.0.0.1:$port" \
            --preload-app --disable-proctitle "$APP"
        ;;
    uwsgi)
        launch uwsgi "$WORK" uwsgi --plugins psgi --http11-socket "127.0.0.1:$port" \
            --processes "$PROCS" --psgi "$APP" --master --die-on-term --disable-logging \
            --listen 1024
        ;;
    nginx+*) # the app server on a port of its own, one nginx worker in front
        local app=${name#nginx+} dir=$WORK/$name up pass
        up=$(free_port)
        mkdir -p "$dir"
        if [[ $app == starman ]]; then
            launch "${name}_app" "$dir" starman --workers "$PROCS" --listen "127.0.0.1:$up" \
                --preload-app --disable-proctitle "$APP"
            pass="proxy_pass http://127.0.0.1:$up;"
        else
            launch "${name}_app" "$dir" uwsgi --plugins psgi --socket "127.0.0.1:$up" \
                --processes "$PROCS" --psgi "$APP" --master --die-on-term --disable-logging \
                --listen 1024
            pass="include /etc/nginx/uwsgi_params; uwsgi_pass 127.0.0.1:$up;"
        fi
        cat >"$dir/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log;
worker_rlimit_nofile 16384;
events { worker_connections 8192; }
http {
    access_log off;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$port;
        location / { $pass }
    }
}
EOF
        launch_nginx "$name" "$dir"
        ;;
    esac
    for ((i = 0; i < 200; i++)); do
        curl -sf "http://127.0.0.1:$port/" >/dev/null && return 0
        sleep 0.05
    done
    note "$name did not answer on port $port: $(tail -3 "$WORK/stdout.log")"
    stop_both "$name"
    return 1
}

stop_both() { # name: the server, and the app server behind an nginx
    stop_server "$1"
    stop_server "${1}_app"
}

# A server's processes: "pid args" of its pid and every descendant (and
# those of the app server behind it, for nginx+X).
tree() { # name
    local n
    for n in "$1" "${1}_app"; do
        [[ -n ${PID[$n]:-} ]] && tree_of "${PID[$n]}"
    done
}
tree_of() { # pid
    ps -eo pid=,ppid=,args= | awk -v r="$1" '
        { pid[NR]=$1; ppid[NR]=$2; $1=""; $2=""; args[NR]=$0 }
        END { keep[r]=1; changed=1
              while (changed) { changed=0
                  for (i in pid) if (keep[ppid[i]] && !keep[pid[i]]) { keep[pid[i]]=1; changed=1 } }
              for (i in pid) if (keep[pid[i]]) print pid[i], args[i] }'
}

# The processes that run the app: pagid's pool processes, Starman's and
# uWSGI's workers (the processes whose parent is their master).
app_pids() { # name
    local all master kind=${1#nginx+}
    all=$(tree "$1")
    case $kind in
    pagid) awk '/pagid: pool process/ {print $1}' <<<"$all" ;;
    starman | uwsgi)
        # The master: the one of them whose parent is not one of them.
        master=$(while read -r p _; do
            pp=$(ps -o ppid= -p "$p" | tr -d ' ')
            grep -q "^$pp " <<<"$all" || echo "$p"
        done < <(grep -E "$kind" <<<"$all") | tail -1)
        while read -r p _; do
            [[ $p != "$master" && $(ps -o ppid= -p "$p" | tr -d ' ') == "$master" ]] && echo "$p"
        done < <(grep -E "$kind" <<<"$all")
        ;;
    esac
}

# CPU time (clock ticks) of a server's whole process tree. The comm field
# of /proc/PID/stat may hold spaces (Starman's titles): fields counted after it.
tree_ticks() { # name
    local p t=0 v
    for p in $(tree "$1" | awk '{print $1}'); do
        v=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | awk '{print $12 + $13}')
        t=$((t + ${v:-0}))
    done
    echo "$t"
}

pss_kib() { awk '/^Pss:/ {print $2}' "/proc/$1/smaps_rollup" 2>/dev/null; }

declare -A RPS=() P99=()
results=()
row() { results+=("$(printf "$@")"); printf "$@"; echo; }

for part in $PARTS; do
    case $part in
    hello) row '== (a) PSGI hello, wrk -t2 -c%s -d%ss, %s app processes; served: of %s keep-alive clients, how many got any answer in %ss (first_ms: the longest wait for a first one)' "$CONNS" "$DURATION" "$PROCS" "$CONNS" "$FAIR_S"
        row '%-19s %10s %9s %9s %9s %8s %11s %8s %9s' server req/s p50_ms p99_ms max_ms errors cpu_us/req served first_ms ;;
    slow) row '== (b) %s slow clients held (slowloris heads, trickled uploads, readers that never read 4 MiB), then 20 requests' "$SLOW" ;;
    blocked) row '== (c) %s handlers blocked %ss, %s app processes, 20 requests meanwhile' "$BLOCKED" "$BLOCK_S" "$PROCS" ;;
    memory) row '== (d) PSS per app process (KiB), preloaded, after 2000 requests'
        row '%-19s %6s %10s %10s %10s' server procs pss_avg pss_min pss_max ;;
    *) die "unknown part $part (hello slow blocked memory)" ;;
    esac
    for s in "${servers[@]}"; do
        have "$s" || continue
        port=$(free_port)
        start "$s" "$port" || continue
        case $part in
        hello)
            timeout $((WARMUP + 30)) wrk -t2 -c"$CONNS" -d"${WARMUP}s" "http://127.0.0.1:$port/" >/dev/null 2>&1
            t0=$(tree_ticks "$s")
            out=$(timeout $((DURATION + 30)) wrk -t2 -c"$CONNS" -d"${DURATION}s" --latency "http://127.0.0.1:$port/" 2>&1)
            t1=$(tree_ticks "$s")
            n=$(awk '/requests in/ {print $1}' <<<"$out")
            cpu=$(python3 -c "print('%.0f' % (($t1 - $t0) * 1e6 / $(getconf CLK_TCK) / max(${n:-0}, 1)))")
            echo "$out" >>"$WORK/wrk.raw"
            ms() { awk -v k="$1" '$1 == k { v=$2; if (v ~ /us$/) { sub(/us$/,"",v); v/=1000 } else if (v ~ /ms$/) sub(/ms$/,"",v); else if (v ~ /s$/) { sub(/s$/,"",v); v*=1000 }; printf "%.2f", v }' <<<"$out"; }
            rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
            max=$(awk '$1 == "Latency" && NF >= 4 && !done { done=1; v=$4; if (v ~ /us$/) { sub(/us$/,"",v); v/=1000 } else if (v ~ /ms$/) sub(/ms$/,"",v); else if (v ~ /s$/) { sub(/s$/,"",v); v*=1000 }; printf "%.2f", v }' <<<"$out")
            errs=$(awk '/Socket errors/ { gsub(",",""); n += $4 + $6 + $8 + $10 } /Non-2xx/ { n += $NF } END { print n + 0 }' <<<"$out")
            RPS[$s]=$rps P99[$s]=$(ms 99%)
            read -r served first < <(timeout $((FAIR_S + 60)) python3 "$here/psgi_clients.py" fair "$port" "$CONNS" "$FAIR_S")
            row '%-19s %10s %9s %9s %9s %8s %11s %8s %9s' "$s" "$rps" "$(ms 50%)" "${P99[$s]}" "$max" "$errs" "$cpu" "${served:-?}" "${first:-?}"
            ;;
        slow)
            row '%-19s %s' "$s" "$(timeout $((HOLD + 150)) python3 "$here/psgi_clients.py" slow "$port" "$SLOW" "$HOLD")"
            ;;
        blocked)
            row '%-19s %s' "$s" "$(timeout $((BLOCK_S + 150)) python3 "$here/psgi_clients.py" blocked "$port" "$BLOCKED" "$BLOCK_S")"
            ;;
        memory)
            timeout 60 wrk -t1 -c4 -d2s "http://127.0.0.1:$port/" >/dev/null 2>&1
            mapfile -t pids < <(app_pids "$s")
            if ((${#pids[@]} == 0)); then
                row '%-19s no app process found' "$s"
            else
                for p in "${pids[@]}"; do pss_kib "$p"; done >"$WORK/pss"
                row '%-19s %6s %10s %10s %10s' "$s" "${#pids[@]}" \
                    "$(awk '{ t += $1 } END { printf "%d", t / NR }' "$WORK/pss")" \
                    "$(sort -n "$WORK/pss" | head -1)" "$(sort -n "$WORK/pss" | tail -1)"
                if [[ $s == pagid ]]; then
                    w=$(tree pagid | awk '/pagid: worker/ {print $1; exit}')
                    [[ -n $w ]] && row '%-19s the event-loop worker: %s KiB PSS' "" "$(pss_kib "$w")"
                fi
                if [[ $s == nginx+* ]]; then
                    w=$(tree "$s" | awk '/nginx: worker/ {print $1; exit}')
                    [[ -n $w ]] && row '%-19s the nginx worker: %s KiB PSS' "" "$(pss_kib "$w")"
                fi
            fi
            ;;
        esac
        stop_both "$s"
    done
    if [[ $part == hello ]]; then
        for o in "${servers[@]}"; do
            [[ $o != pagid && -n ${RPS[pagid]:-} && -n ${RPS[$o]:-} ]] || continue
            row '%-19s %10s %9s %9s' "pagid/$o" \
                "$(python3 -c "print('%.2f' % (${RPS[pagid]} / ${RPS[$o]}))")" "" \
                "$(python3 -c "print('%.2f' % (${P99[pagid]} / max(${P99[$o]}, 0.01)))")"
        done
    fi
done
if [[ -n ${RESULTS-bench/results/psgi.txt} ]]; then
    out=${RESULTS-bench/results/psgi.txt}
    mkdir -p "$(dirname "$out")"
    printf '%s\n' "${results[@]}" >"$out"
    [[ -f $WORK/wrk.raw ]] && cp "$WORK/wrk.raw" "${out%.txt}.raw.txt"
    note "table written to $out"
fi
