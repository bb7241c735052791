# bench/lib.sh - what the bench scripts share: servers started in their own
# process group and stopped by their own pid (TERM, then KILL of the group),
# a cleanup trap that also stops the running client, and free loopback ports.
# Source it after setting WORK (a temp dir) and defining note().
# shellcheck shell=bash

declare -A PID=()
CLIENT=""   # pid of the running wrk/hey, if any

# ------------------------------------------------------------- lifecycle
stop_server() { # name: TERM by its own pid, then KILL its process group
    local name=$1 pid=${PID[$1]:-} i
    [[ -n $pid ]] || return 0
    unset 'PID[$name]'
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    # Each server runs in its own process group (setsid): this catches
    # workers left behind by a master that did not stop in time.
    kill -KILL -- "-$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

launch() { # name dir command...: run it in its own session (setsid), logs in dir
    local name=$1 dir=$2
    shift 2
    setsid "$@" >"$dir/stdout.log" 2>&1 </dev/null &
    PID[$name]=$!
}

launch_nginx() { # name dir: nginx on dir/nginx.conf, prefix and error log in dir
    launch "$1" "$2" "$NGINX" -p "$2" -c "$2/nginx.conf" -e "$2/error.log"
}

cleanup() {
    local rc=$? name
    trap - EXIT INT TERM
    [[ -z $CLIENT ]] || kill -TERM "$CLIENT" 2>/dev/null || true
    for name in "${!PID[@]}"; do stop_server "$name"; done
    if [[ $rc -ne 0 && -d $WORK ]]; then
        note "failed; logs kept in $WORK"
    else
        rm -rf "$WORK"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
    if command -v python3 >/dev/null; then
        python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
        return
    fi
    local p i
    for ((i = 0; i < 200; i++)); do
        p=$((20000 + RANDOM % 40000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            echo "$p"
            return
        fi
    done
    die "no free loopback port found"
}
