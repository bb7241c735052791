#!/bin/sh
# run_all.sh PAGID_BINARY [-k NAME...]: the attack battery (HTTP/2 static
# data path, PSGI worker pool, HTTP/1.1 request path, request and response
# fields) against one binary.
# One PASS/FAIL line per attack; exit status 1 on any failure.
set -e
[ -x "$1" ] || { echo "usage: $0 PAGID_BINARY [-k NAME...]" >&2; exit 2; }
/usr/bin/python3 -c 'import h2' 2>/dev/null || { echo "needs python3-h2 (apt-get install python3-h2)" >&2; exit 2; }
if nm -D "$1" 2>/dev/null | grep -q __asan_init || nm "$1" 2>/dev/null | grep -q __asan_init; then
  : "${ATTACK_SLOW:=3}"; export ATTACK_SLOW; export ATTACK_SANITIZED=1
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
fi
exec /usr/bin/python3 "$(dirname "$0")/battery.py" "$@"
