#!/usr/bin/env bash
# dev.sh - the two commands of pagid's README, for a fresh Debian 12 (as root):
#
#   ./dev.sh run    install what is missing, build in build/, run build/pagid
#                   in the foreground (127.0.0.1:8080, the default app)
#   ./dev.sh test [-k PATTERN]... [-j N]
#                   install, build with -Werror, run the unit tests (Check);
#                   build the .deb once (build-debs/, handed to the tests that
#                   check the package as PAGID_DEBS); the integration tests;
#                   the system test (the .deb under a real systemd in a
#                   container, tests/system) while build-asan/ builds and
#                   the attack battery (tests/attack) runs on build/pagid; the
#                   unit and integration tests again with ASan+UBSan in
#                   build-asan/ (the packaging test is skipped there: it
#                   checks the package, not the binary); then each libFuzzer
#                   harness for FUZZ_SECONDS (10) when clang is there. Ends
#                   with the wall time of each stage and "N passed, M failed";
#                   exit 1 on failure.
#                   -k PATTERN: a focused run: both integration passes run only
#                   the tests whose name contains a PATTERN (run.py -k); the
#                   unit tests still run (they are quick); no .deb is built
#                   beforehand (the packaging test, if chosen, builds its own);
#                   the system test, the attack battery and the fuzzers are
#                   skipped.
#                   PAGID_DEBS=DIR: take the .debs there instead of building.
#                   -j N (or TEST_JOBS=N): integration tests run at once
#                   (run.py -j; its default is 3 per CPU; serial-marked tests
#                   always run alone). JOBS (2) is make's -j.
#   ./dev.sh system the system test alone (SYSTEM_TEST=0 skips it in "test").
#
# CI (.ci/run) calls "./dev.sh test" with no stdin.
set -uo pipefail

cd "$(dirname "$0")" || exit 1
ROOT=$(pwd)
JOBS=${JOBS:-2}

PACKAGES=(build-essential autoconf automake libtool pkg-config libev-dev
          libhttp-parser-dev libyaml-dev libsystemd-dev zlib1g-dev nettle-dev libssl-dev openssl libhiredis-dev libnghttp2-dev nghttp2-client python3-h2 redis-server check curl python3
          python3-websockets python3-redis python3-cryptography nginx-light wrk hey chromium chromium-driver sslscan
          clang libclang-rt-14-dev systemd
          libperl-dev libfuture-perl libfuture-asyncawait-perl libfuture-io-perl
          libio-async-perl libanyevent-perl libnet-async-http-perl libplack-perl libdancer2-perl libmojolicious-perl libcatalyst-perl
          dpkg-dev debhelper fakeroot lintian mandoc debootstrap systemd-container)

say() { printf '==> %s\n' "$*"; }
die() { printf 'dev.sh: %s\n' "$*" >&2; exit 1; }

install_packages() {
    if ! command -v dpkg-query >/dev/null 2>&1; then
        say "not a Debian system: skipping package installation"
        return 0
    fi
    local missing=() p
    for p in "${PACKAGES[@]}"; do
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
            missing+=("$p")
        fi
    done
    ((${#missing[@]} == 0)) && return 0
    say "installing: ${missing[*]}"
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || die "need root (or sudo) to install: ${missing[*]}"
        sudo=(sudo)
    fi
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -q || die "apt-get update failed"
    "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null \
        || die "apt-get install failed"
}

bootstrap() {
    say "autoreconf -fi"
    autoreconf -fi >/dev/null || die "autoreconf failed"
}

# build DIR [configure options...]: configure (when the options changed or
# nothing is configured yet) and make.
build() {
    local dir=$1
    shift
    mkdir -p "$dir" || return 1
    local flags="$*"
    if [ ! -f "$dir/Makefile" ] || [ "$(cat "$dir/.dev-configure-flags" 2>/dev/null)" != "$flags" ]; then
        say "configure $flags (in $dir/)"
        [ -f "$dir/Makefile" ] && make -C "$dir" clean >/dev/null 2>&1
        (cd "$dir" && ../configure -q "$@") || {
            echo "configure failed: see $dir/config.log" >&2
            return 1
        }
        printf '%s' "$flags" >"$dir/.dev-configure-flags"
    fi
    say "make -j$JOBS (in $dir/)"
    make -C "$dir" -j"$JOBS" >"$dir/.dev-make.log" 2>&1 || {
        tail -n 60 "$dir/.dev-make.log"
        return 1
    }
}

# ---------------------------------------------------------------- results

TOTAL_PASS=0
TOTAL_FAIL=0
SUMMARY=()

STAGES=()

# timed NAME SECONDS: note a stage's wall time for the summary.
timed() { STAGES+=("$(printf '%-26s %5ds' "$1:" "$2")"); }

record() { # record SUITE PASSED FAILED [note]
    TOTAL_PASS=$((TOTAL_PASS + $2))
    TOTAL_FAIL=$((TOTAL_FAIL + $3))
    SUMMARY+=("$(printf '%-26s %4d passed, %d failed%s' "$1:" "$2" "$3" "${4:+  ($4)}")")
}

# Count Check results from the automake test logs in DIR: each suite's log has
# "NN%: Checks: X, Failures: Y, Errors: Z"; a suite without that line (it
# crashed or did not run) counts from its .trs result.
count_unit() {
    local dir=$1 pass=0 fail=0 trs log line checks failures errors res
    while IFS= read -r trs; do
        log=${trs%.trs}.log
        line=$(grep -Eo '[0-9]+%: Checks: [0-9]+, Failures: [0-9]+, Errors: [0-9]+' "$log" 2>/dev/null | tail -n 1)
        res=$(sed -n 's/^:test-result: //p' "$trs" | head -n 1)
        if [ -n "$line" ]; then
            checks=$(sed -E 's/.*Checks: ([0-9]+).*/\1/' <<<"$line")
            failures=$(sed -E 's/.*Failures: ([0-9]+).*/\1/' <<<"$line")
            errors=$(sed -E 's/.*Errors: ([0-9]+).*/\1/' <<<"$line")
            pass=$((pass + checks - failures - errors))
            fail=$((fail + failures + errors))
            # a suite that reported all checks fine but still failed (leak, crash at exit)
            if [ "$failures" -eq 0 ] && [ "$errors" -eq 0 ] && [ "$res" != PASS ] && [ "$res" != SKIP ]; then
                fail=$((fail + 1))
                echo "    $(basename "${trs%.trs}"): $res after all checks passed (see $log)" >&2
            fi
        else
            case $res in
                PASS | XFAIL) pass=$((pass + 1)) ;;
                SKIP) ;;
                *) fail=$((fail + 1)) ;;
            esac
        fi
    done < <(find "$dir/tests" -name '*.trs' 2>/dev/null | sort)
    echo "$pass $fail"
}

run_unit() { # run_unit DIR LABEL
    local dir=$1 label=$2 n
    find "$dir" -name '*.trs' -delete 2>/dev/null
    say "unit tests: make check (in $dir/)"
    make -C "$dir" -j"$JOBS" check >"$dir/.dev-check.log" 2>&1
    local rc=$?
    grep -E '^(PASS|FAIL|ERROR|XPASS|SKIP):' "$dir/.dev-check.log" | sed 's/^/    /'
    read -r p f < <(count_unit "$dir")
    n=$(find "$dir/tests" -name '*.trs' 2>/dev/null | wc -l)
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        # make check itself failed (a test did not build, ...)
        tail -n 40 "$dir/.dev-check.log"
        f=1
    fi
    if [ "$f" -gt 0 ] && [ -f "$dir/test-suite.log" ]; then
        sed -n '1,200p' "$dir/test-suite.log" | grep -vE '^(=+|-+)$' | tail -n 60
    fi
    echo "    unit ($label): $p passed, $f failed ($n suites)"
    record "unit ($label)" "$p" "$f"
}

run_integration() { # run_integration BINARY LABEL
    local bin=$1 label=$2 out p f args=()
    ((${#TEST_JOBS_ARGS[@]})) && args+=("${TEST_JOBS_ARGS[@]}")
    ((${#PATTERNS[@]})) && args+=("${PATTERNS[@]}")
    say "integration tests against $bin${args[*]:+ (${args[*]})}"
    out=$(mktemp)
    python3 "$ROOT/tests/integration/run.py" "$bin" ${args[@]+"${args[@]}"} 2>&1 | tee "$out"
    line=$(grep -E '^integration: [0-9]+ passed, [0-9]+ failed$' "$out" | tail -n 1)
    skips=$(grep -Eo '^integration: [0-9]+ skipped' "$out" | grep -Eo '[0-9]+' | tail -n 1)
    rm -f "$out"
    if [ -z "$line" ]; then
        record "integration ($label)" 0 1 "runner did not finish"
        return
    fi
    p=$(sed -E 's/^integration: ([0-9]+) passed.*/\1/' <<<"$line")
    f=$(sed -E 's/.* ([0-9]+) failed$/\1/' <<<"$line")
    record "integration ($label)" "$p" "$f" "${skips:+$skips skipped}"
}

# The .deb files of this tree, built once into build-debs/ (tests/system/run.py
# --build-debs) for the packaging test and the system test: PAGID_DEBS.
build_debs() {
    local dir=$ROOT/build-debs
    say "debs: dpkg-buildpackage (into build-debs/)"
    if python3 "$ROOT/tests/system/run.py" --build-debs "$dir" >"$ROOT/.dev-debs.log" 2>&1; then
        tail -n 1 "$ROOT/.dev-debs.log" | sed 's/^/    /'
        export PAGID_DEBS=$dir
    else
        # the tests build their own then, and report what fails
        tail -n 40 "$ROOT/.dev-debs.log"
        say "debs: not built; the packaging and system tests build their own"
        unset PAGID_DEBS
    fi
}

# The libFuzzer harnesses (tests/fuzz), FUZZ_SECONDS (10) each; one test per harness.
run_fuzz() {
    local out p f line secs=${FUZZ_SECONDS:-10}
    if ! command -v clang >/dev/null 2>&1; then
        say "fuzz: no clang, skipping"
        return
    fi
    say "fuzz smoke: tests/fuzz/run.sh $secs (work dir build-fuzz/)"
    out=$(mktemp)
    FUZZ_OUT="$ROOT/build-fuzz" "$ROOT/tests/fuzz/run.sh" "$secs" 2>&1 | tee "$out"
    p=$(grep -cE '^fuzz [a-z0-9_]+: PASS' "$out")
    f=$(grep -cE '^fuzz [a-z0-9_]+: FAIL' "$out")
    line=$(grep -E '^fuzz: [0-9]+ passed, [0-9]+ failed$' "$out" | tail -n 1)
    rm -f "$out"
    if [ -z "$line" ]; then
        record "fuzz (smoke)" "$p" $((f + 1)) "run.sh did not finish"
        return
    fi
    record "fuzz (smoke)" "$p" "$f"
}

# tests/attack: the hostile battery (h2 data path, worker pool, HTTP/1.1
# smuggling and timeouts) against one binary; one test per attack.
run_attack() {
    local bin=$1 out p f line
    say "attack battery: tests/attack/run_all.sh $bin"
    out=$(mktemp)
    "$ROOT/tests/attack/run_all.sh" "$bin" 2>&1 | tee "$out"
    p=$(grep -cE '^PASS ' "$out")
    f=$(grep -cE '^FAIL ' "$out")
    line=$(grep -E '^battery: [0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1)
    rm -f "$out"
    if [ -z "$line" ]; then
        record "attack battery" "$p" $((f + 1)) "run_all.sh did not finish"
        return
    fi
    record "attack battery" "$p" "$f"
}

# tests/system/run.py: builds the .deb (or takes PAGID_DEBS), boots Debian 12
# with systemd in a container and checks the package as operators use it; one
# test per check. run_system prints as it goes; start_system runs it in the
# background into a log and finish_system prints that log and counts it.
run_system() {
    say "system test: the package under systemd (tests/system/run.py)"
    local out
    out=$(mktemp)
    system_cmd 2>&1 | tee "$out"
    count_system "$out"
    rm -f "$out"
}

system_cmd() {
    if [ -n "${PAGID_DEBS:-}" ]; then
        python3 "$ROOT/tests/system/run.py" --debs "$PAGID_DEBS"
    else
        python3 "$ROOT/tests/system/run.py"
    fi
}

count_system() {
    local line p f
    line=$(grep -E '^system: [0-9]+ passed, [0-9]+ failed$' "$1" | tail -n 1)
    if [ -z "$line" ]; then
        record "system (package)" 0 1 "run.py did not finish"
        return
    fi
    p=$(sed -E 's/^system: ([0-9]+) passed.*/\1/' <<<"$line")
    f=$(sed -E 's/.* ([0-9]+) failed$/\1/' <<<"$line")
    record "system (package)" "$p" "$f"
}

SYSTEM_PID=
SYSTEM_LOG=
start_system() {
    SYSTEM_LOG=$(mktemp)
    say "system test: started in the background (its output follows when it ends)"
    (
        t=$SECONDS
        system_cmd >"$SYSTEM_LOG" 2>&1 </dev/null
        echo "$((SECONDS - t))" >"$SYSTEM_LOG.secs"
    ) &
    SYSTEM_PID=$!
}

finish_system() {
    [ -n "$SYSTEM_PID" ] || return 0
    wait "$SYSTEM_PID"
    SYSTEM_PID=
    say "system test: the package under systemd (tests/system/run.py)"
    cat "$SYSTEM_LOG"
    count_system "$SYSTEM_LOG"
    timed system "$(cat "$SYSTEM_LOG.secs" 2>/dev/null || echo 0)"
    rm -f "$SYSTEM_LOG" "$SYSTEM_LOG.secs"
}

cmd_system() {
    install_packages
    run_system
    echo "$TOTAL_PASS passed, $TOTAL_FAIL failed"
    [ "$TOTAL_FAIL" -eq 0 ]
}

cmd_run() {
    install_packages
    bootstrap
    build build || die "build failed"
    say "exec build/pagid (Ctrl-C to stop)"
    exec build/pagid
}

PATTERNS=()
TEST_JOBS_ARGS=()

build_werror() {
    bootstrap
    build build --enable-werror
}

# stage NAME COMMAND...: run a stage in the foreground, noting its wall time.
stage() {
    local name=$1 t=$SECONDS rc
    shift
    "$@"
    rc=$?
    timed "$name" $((SECONDS - t))
    return $rc
}

cmd_test() {
    local t0=$SECONDS
    while (($#)); do
        case $1 in
            -k) (($# >= 2)) || die "-k needs a pattern"; PATTERNS+=(-k "$2"); shift 2 ;;
            -k*) PATTERNS+=(-k "${1#-k}"); shift ;;
            -j) (($# >= 2)) || die "-j needs a number"; TEST_JOBS=$2; shift 2 ;;
            -j*) TEST_JOBS=${1#-j}; shift ;;
            *) die "test: unknown option $1 (usage: $0 test [-k PATTERN]... [-j N])" ;;
        esac
    done
    if [ -n "${TEST_JOBS:-}" ]; then
        [[ $TEST_JOBS =~ ^[1-9][0-9]*$ ]] || die "-j wants a positive number, not '$TEST_JOBS'"
        TEST_JOBS_ARGS=(-j "$TEST_JOBS")
    fi
    local focused=
    ((${#PATTERNS[@]})) && focused=1

    local t=$SECONDS
    install_packages
    timed setup $((SECONDS - t))

    local werror_ok=
    if stage build build_werror; then
        werror_ok=1
        stage unit run_unit build werror
    else
        record "build (werror)" 0 1
    fi
    # The .deb, once for the packaging test and the system test.
    if [ -n "${PAGID_DEBS:-}" ]; then
        say "debs: taken from PAGID_DEBS=$PAGID_DEBS"
    elif [ -z "$focused" ]; then
        stage debs build_debs
    fi
    if [ -n "$werror_ok" ]; then
        stage integration run_integration build/pagid werror
    fi

    # The system test mostly waits on its container: it runs beside the
    # ASan build (its output is printed when it ends, before the ASan tests).
    local system=
    if [ -n "$focused" ]; then
        say "system test skipped (-k)"
    elif [ "${SYSTEM_TEST:-1}" != 0 ]; then
        system=1
        start_system
    else
        say "system test skipped (SYSTEM_TEST=0)"
    fi

    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    local asan_ok=
    stage "asan build" build build-asan --enable-sanitizers && asan_ok=1
    # The battery (plain build) also runs while the system test waits on its container.
    if [ -n "$werror_ok" ] && [ -z "$focused" ]; then
        stage attack run_attack build/pagid
    fi
    [ -n "$system" ] && finish_system
    if [ -n "$asan_ok" ]; then
        stage "asan unit" run_unit build-asan asan
        stage "asan integration" run_integration build-asan/pagid asan
    else
        record "build (asan)" 0 1
    fi

    if [ -n "$focused" ]; then
        say "fuzz skipped (-k)"
    else
        stage fuzz run_fuzz
    fi

    echo
    say "summary ($((SECONDS - t0))s)"
    local s
    for s in "${SUMMARY[@]}"; do echo "    $s"; done
    say "wall time of each stage (the system test runs beside the asan build and the attack battery)"
    for s in "${STAGES[@]}"; do echo "    $s"; done
    printf '    %-26s %5ds\n' "total:" $((SECONDS - t0))
    echo "$TOTAL_PASS passed, $TOTAL_FAIL failed"
    [ "$TOTAL_FAIL" -eq 0 ]
}

case ${1:-} in
    run) cmd_run ;;
    test) shift; cmd_test "$@" ;;
    system) cmd_system ;;
    *)
        echo "usage: $0 run | test [-k PATTERN]... [-j N] | system" >&2
        exit 2
        ;;
esac
