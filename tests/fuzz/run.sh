#!/bin/sh
# run.sh - build the libFuzzer harnesses with clang and run one for N seconds.
# Usage: tests/fuzz/run.sh [SECONDS] [extra libFuzzer args]. Not part of make.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
secs=${1:-60}
[ $# -gt 0 ] && shift
out=${FUZZ_OUT:-/tmp/pagid-fuzz}
mkdir -p "$out/corpus"
cp -n "$here"/corpus/http1_parser/* "$out/corpus/" 2>/dev/null || true
clang -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined \
    -fno-sanitize-recover=undefined -I"$top/include" -I"$top/src" \
    "$here/fuzz_http1_parser.c" "$top/src/worker/http1_parser.c" \
    "$top/src/worker/http1_parser_head.c" -lhttp_parser -o "$out/fuzz_http1_parser"
exec "$out/fuzz_http1_parser" -max_total_time="$secs" -max_len=4096 \
    -dict="$here/http1.dict" "$@" "$out/corpus"
