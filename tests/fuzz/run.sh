#!/bin/sh
# run.sh - build pagid's libFuzzer harnesses with clang and run each one.
#
# Usage: tests/fuzz/run.sh [SECONDS] [HARNESS...]
#   SECONDS   how long each harness runs (default 60; dev.sh's smoke run uses 10)
#   HARNESS   http1_parser config ws_frame ws_deflate utf8 static tls h2 (default: all)
# Environment:
#   FUZZ_OUT  work dir (default /tmp/pagid-fuzz): binaries, the growing corpus
#             of each harness (NAME/corpus, kept between runs), logs, and the
#             reproducer of any crash (NAME/crash-*, leak-*, timeout-*)
#   FUZZ_ARGS extra libFuzzer arguments, e.g. "-jobs=2" or "-only_ascii=1"
#   CC        clang (must support -fsanitize=fuzzer)
#
# Each harness is built with ASan+UBSan (+ LeakSanitizer) and started on the
# seed corpus in tests/fuzz/corpus/NAME/ plus the work corpus. Prints one line
# per harness:  "fuzz NAME: PASS|FAIL|SKIP  runs N, cov C, ft F, corpus K"
# and ends with "fuzz: N passed, M failed"; exit 1 when any failed.
# Replay a reproducer: $FUZZ_OUT/fuzz_NAME FILE
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
secs=${1:-60}
[ $# -gt 0 ] && shift
out=${FUZZ_OUT:-/tmp/pagid-fuzz}
CC=${CC:-clang}
case $secs in '' | *[!0-9]*) echo "run.sh: SECONDS must be a number" >&2; exit 2 ;; esac
mkdir -p "$out" || exit 1

all="http1_parser config ws_frame ws_deflate utf8 static tls h2"
names=${*:-$all}

# sources NAME: the files a harness is built from (relative to the top dir; ?FILE
# = only if it exists), then -l flags
sources() {
    case $1 in
        http1_parser) echo "src/worker/http1/http1_parser.c src/worker/http1/http1_parser_feed.c src/worker/http1/http1_parser_head.c src/worker/http1/h1_arena.c -lhttp_parser" ;;
        # every config*.c: the loader is split across files and may be split further
        config) echo "$(cd "$top" && echo src/common/config*.c) src/common/buf.c src/common/strtab.c src/common/ydoc.c ?src/common/access_format.c ?src/common/redis_url.c ?src/common/origin.c -lyaml" ;;
        ws_frame) echo "src/worker/ws/ws_frame.c src/worker/ws/utf8.c" ;;
        ws_deflate) echo "src/worker/ws/ws_deflate.c src/common/buf.c -lz" ;;
        utf8) echo "src/worker/ws/utf8.c" ;;
        static) echo "src/worker/apps/static_path.c src/worker/apps/static_http.c" ;;
        # tls_conn on a context built from a config, as pagid builds it
        tls) echo "src/worker/core/tls_conn.c src/worker/core/tls_info.c src/common/tls_server.c src/common/tls_tickets.c src/common/tls_ocsp.c tests/unit/tls_test_cert.c $(cd "$top" && echo src/common/config*.c) src/common/buf.c src/common/strtab.c src/common/ydoc.c ?src/common/access_format.c ?src/common/redis_url.c ?src/common/origin.c -lyaml -lssl -lcrypto" ;;
        # the HTTP/2 input path: nghttp2's framing and HPACK into h2_request.c
        h2) echo "src/worker/http2/h2_request.c src/common/buf.c src/worker/http1/http1_parser.c src/worker/http1/http1_parser_feed.c src/worker/http1/http1_parser_head.c src/worker/http1/h1_arena.c -lhttp_parser -lnghttp2" ;;
        *) return 1 ;;
    esac
}
maxlen() {
    case $1 in
        http1_parser | config) echo 4096 ;;
        h2) echo 16384 ;;
        *) echo 8192 ;;
    esac
}

if ! command -v "$CC" >/dev/null 2>&1; then
    echo "run.sh: $CC not found (apt-get install clang libclang-rt-14-dev)" >&2
    exit 2
fi

pass=0
fail=0
for name in $names; do
    srcs=$(sources "$name") || { echo "run.sh: unknown harness $name" >&2; exit 2; }
    files="$here/fuzz_$name.c"
    libs=""
    missing=""
    for s in $srcs; do
        case $s in
            -l*) libs="$libs $s" ;;
            \?*) [ -f "$top/${s#?}" ] && files="$files $top/${s#?}" ;;
            *) [ -f "$top/$s" ] || missing="$missing $s"; files="$files $top/$s" ;;
        esac
    done
    if [ -n "$missing" ] || [ ! -f "$here/fuzz_$name.c" ]; then
        echo "fuzz $name: SKIP  (not in this tree:$missing)"
        continue
    fi
    dir="$out/$name"
    mkdir -p "$dir/corpus"
    bin="$out/fuzz_$name"
    # shellcheck disable=SC2086
    if ! "$CC" -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined \
        -fno-sanitize-recover=undefined -I"$top/include" -I"$top/src" \
        $files $libs -o "$bin" >"$dir/build.log" 2>&1; then
        echo "fuzz $name: FAIL  (build: see $dir/build.log)"
        sed 's/^/    /' "$dir/build.log" | tail -n 20
        fail=$((fail + 1))
        continue
    fi
    dict=""
    [ -f "$here/$name.dict" ] && dict="-dict=$here/$name.dict"
    seeds="$here/corpus/$name"
    [ -d "$seeds" ] || seeds=""
    # shellcheck disable=SC2086
    (cd "$dir" && ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
        "$bin" -max_total_time="$secs" -max_len="$(maxlen "$name")" -timeout=20 \
        -rss_limit_mb=2048 -print_final_stats=1 $dict ${FUZZ_ARGS:-} \
        "$dir/corpus" $seeds) >"$dir/log" 2>&1
    rc=$?
    runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$dir/log" | tail -n 1)
    [ -n "$runs" ] || runs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$dir/log" | tail -n 1)
    last=$(grep -E '^#[0-9]+' "$dir/log" | grep -E 'cov: [0-9]+' | tail -n 1)
    cov=$(printf '%s' "$last" | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
    ft=$(printf '%s' "$last" | sed -n 's/.*ft: \([0-9]*\).*/\1/p')
    ncorp=$(find "$dir/corpus" -type f | wc -l)
    stats="runs ${runs:-?}, cov ${cov:-?}, ft ${ft:-?}, corpus $ncorp"
    if [ "$rc" -eq 0 ]; then
        echo "fuzz $name: PASS  $stats"
        pass=$((pass + 1))
    else
        echo "fuzz $name: FAIL  (exit $rc) $stats; log $dir/log"
        grep -E 'ERROR|SUMMARY|Test unit written|runtime error|^#0|^    #[0-9] ' "$dir/log" \
            | head -n 20 | sed 's/^/    /'
        fail=$((fail + 1))
    fi
done
echo "fuzz: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
