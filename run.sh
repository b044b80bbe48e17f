#!/usr/bin/env bash
# One entry point for people and CI; each command first installs what is
# missing (Debian packages, then the pinned Python environment).
#   ./run.sh serve [server.py options]   install, then serve on :1717
#   ./run.sh test [pytest options]       install, then run every test
#   ./run.sh test --fast [options]       the fast lane only (under a minute)
#   ./run.sh bench [bench.py options]    install, then run the benchmark
#   ./run.sh soak --engine E [--minutes M]  install, then soak one engine
#   ./run.sh setup [--pythons 3.12,3.13] only install (and more interpreters)
#   ./run.sh new-site DIR --engine E     a new project serving one engine
set -euo pipefail
# new-site's DIR is the caller's: a relative one is taken from here.
CALLED_FROM=$PWD
cd "$(dirname "$0")"

SERVE_PACKAGES="tarantool postgresql redis-server python3-venv libuv1"
TEST_PACKAGES="$SERVE_PACKAGES wrk nginx-light chromium fonts-dejavu-core valgrind procps"
VENV=.venv
OHA_VERSION=1.16.0      # bench.py --latency's load generator, from crates.io
LEGACY_VENV=.venv37

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

install_packages() {
    local missing=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' \
            || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return
    say "installing Debian packages: ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

# The first CPython 3.10+ found: pyenv's 3.11, python3.11, then python3.
main_python() {
    local c
    for c in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.11*/bin/python3 \
             "$(command -v python3.11 || true)" "$(command -v python3 || true)"; do
        [ -x "$c" ] && "$c" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
            && { echo "$c"; return; }
    done
    echo "no CPython 3.10 or newer found: apt-get install python3" >&2
    exit 1
}

# A CPython 3.7 for the legacy stack (japronto, aiotarantool), or nothing.
legacy_python() {
    local c
    for c in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.7*/bin/python3.7 \
             "$(command -v python3.7 || true)"; do
        [ -x "$c" ] && "$c" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 7))' \
            2>/dev/null && { echo "$c"; return; }
    done
    return 0
}

# make_venv DIR PYTHON REQUIREMENTS: (re)install only when the pins changed.
make_venv() {
    local dir=$1 python=$2 requirements=$3 stamp
    stamp="$(sha256sum "$requirements" | cut -c1-16)-$("$python" -V 2>&1 | tr -d ' ')"
    [ -f "$dir/.installed" ] && [ "$(cat "$dir/.installed")" = "$stamp" ] && return
    say "creating $dir with $("$python" -V 2>&1) from $requirements"
    rm -rf "$dir"
    "$python" -m venv "$dir"
    # Pins marked "# no-deps" go in after the rest, alone (requirements.txt).
    local pip=("$dir/bin/python" -m pip install -q --disable-pip-version-check)
    "${pip[@]}" -r <(grep -v '# no-deps' "$requirements")
    if grep -q '# no-deps' "$requirements"; then
        "${pip[@]}" --no-deps $(sed -n 's/ *# no-deps.*//p' "$requirements")
    fi
    echo "$stamp" > "$dir/.installed"
}

setup() {
    install_packages $1
    make_venv "$VENV" "$(main_python)" requirements.txt
    local legacy
    legacy=$(legacy_python)
    if [ -n "$legacy" ]; then
        install_packages gcc    # japronto and msgpack build from source
        make_venv "$LEGACY_VENV" "$legacy" requirements-legacy.txt
    else
        say "no CPython 3.7 found: skipping $LEGACY_VENV (japronto, aiotarantool); pyenv install 3.7.16, then ./run.sh setup"
    fi
}

# oha, pinned, built by cargo into ~/.cargo/bin; without Rust 1.88+ a
# message says what to do, and everything but bench.py --latency works.
install_oha() {
    local bin="${CARGO_HOME:-$HOME/.cargo}/bin" c cargo rustc
    for c in "$bin/oha" "$(command -v oha || true)"; do
        [ -x "$c" ] && [ "$("$c" --version 2>/dev/null)" = "oha $OHA_VERSION" ] && return
    done
    cargo=$(command -v cargo || echo "$bin/cargo")
    rustc=$(command -v rustc || echo "$bin/rustc")
    if [ ! -x "$cargo" ] || ! "$rustc" -V 2>/dev/null \
            | awk '{split($2, v, "."); exit !(v[1] > 1 || v[2] >= 88)}'; then
        say "oha $OHA_VERSION not installed: it needs cargo with Rust 1.88 or newer (Debian's cargo is older; use rustup, see install.md); bench.py --latency and its tests need it"
        return 0
    fi
    say "building oha $OHA_VERSION with cargo install --locked (a few minutes, once)"
    "$cargo" install --locked --quiet "oha@$OHA_VERSION"
}

# loadgen/ (bench.py --latency --pages mix), built from its Cargo.lock;
# cargo fetches the pinned crates once, then builds offline.
install_loadgen() {
    local cargo
    cargo=$(command -v cargo || echo "${CARGO_HOME:-$HOME/.cargo}/bin/cargo")
    if [ ! -x "$cargo" ]; then
        say "loadgen not built: it needs cargo (rustup, see install.md); bench.py --latency --pages mix and tests/test_mixed.py need it"
        return 0
    fi
    (cd loadgen && { "$cargo" build --release --locked --offline --quiet 2>/dev/null \
        || "$cargo" build --release --locked --quiet; }) \
        || say "loadgen did not build (see the cargo output above); bench.py --latency --pages mix needs it"
}

# The main suite, then the tests that run inside the legacy interpreter.
# --fast: the fast lane (unit tests, and the contract on memtx Tarantool
# and Redis), and of the legacy lane only its unit tests (its collection
# imports every module on 3.7); the rest of the options go to pytest.
# A whole run (no arguments) takes the modules that mostly wait (timeouts,
# restarts, replication) in a side lane beside the main suite: a second
# pytest, with a database set and ports of its own. The instruction check
# (the checkout's var/, as a main-lane test) goes beside the legacy lane:
# valgrind's counts do not change with the load.
side=""
check=""
WAITING=(test_edge test_supervision test_workers test_replicas
         test_local_databases test_postgres_standby test_durability
         test_pythons)
run_tests() {
    local status=0 fast=0 arg main=(--durations=15) legacy=(-m legacy)
    local rest=() log="test-artifacts/side-lane.log" waiting=()
    for arg in "$@"; do
        if [ "$arg" = --fast ]; then fast=1; else rest+=("$arg"); fi
    done
    if [ $fast = 1 ]; then
        main=(-m fast)
        legacy=(-m 'legacy and unit')
    fi
    if [ $# -eq 0 ]; then
        mkdir -p test-artifacts
        for arg in "${WAITING[@]}"; do
            waiting+=("tests/$arg.py")
            main+=("--ignore=tests/$arg.py")
        done
        say "side lane: ${WAITING[*]}; its report comes at the end ($log)"
        # Its SIGINT not ignored, as a job's is; each lane picks its ports
        # from its own half.
        STICKERS_PORT_SHARE=2/2 env --default-signal=INT "$VENV/bin/python" \
            -m pytest -p no:cacheprovider --durations=5 "${waiting[@]}" \
            > "$log" 2>&1 &
        side=$!
        trap 'for job in $side $check; do stop_tree "$job"; done' EXIT
        export STICKERS_PORT_SHARE=1/2
    fi
    "$VENV/bin/python" -m pytest "${main[@]}" ${rest[@]+"${rest[@]}"} || status=$?
    [ $status = 2 ] && return 2     # interrupted (^C): the side lane goes too
    if [ $# -eq 0 ]; then
        check_instructions > test-artifacts/instructions.log 2>&1 &
        check=$!
    fi
    if [ -x "$LEGACY_VENV/bin/python" ]; then
        say "legacy tests in $LEGACY_VENV ($("$LEGACY_VENV/bin/python" -V 2>&1))"
        "$LEGACY_VENV/bin/python" -m pytest -q "${legacy[@]}" || status=$?
    else
        say "legacy tests skipped: no $LEGACY_VENV (needs CPython 3.7)"
    fi
    if [ -n "$side" ]; then
        say "side lane: ${WAITING[*]}"
        wait "$side" || status=1
        side=""
        cat "$log"
    fi
    if [ -n "$check" ]; then
        wait "$check" || status=1
        check=""
        cat test-artifacts/instructions.log
    fi
    return $status
}

# A process and all it started (the side lane when the run is interrupted:
# its pytest, the servers of its tests and their databases).
stop_tree() {
    local child
    for child in $(pgrep -P "$1"); do stop_tree "$child"; done
    kill -TERM "$1" 2>/dev/null || true
}

# The instruction counts per request against their committed baseline.
check_instructions() {
    if ! command -v valgrind >/dev/null; then
        say "instruction check skipped: no valgrind"
        return 0
    fi
    say "instructions per request against bench/instructions-baseline.json"
    "$VENV/bin/python" -m bench.instructions --check
}

command=${1:-help}
[ $# -gt 0 ] && shift
case "$command" in
    setup)
        setup "$TEST_PACKAGES"
        install_oha
        install_loadgen
        case "${1:-}" in
            "") ;;
            --pythons) "$VENV/bin/python" -m bench.pythons "${2:?--pythons 3.12,3.13}" ;;
            *) echo "run.sh setup: unknown option $1 (--pythons V,...)" >&2; exit 2 ;;
        esac ;;
    serve)
        setup "$SERVE_PACKAGES"
        [[ " $* " == *" -e "* || " $* " == *" --engine"* || " $* " == *" --list "* ]] \
            || set -- -e aiohttp-tarantool-one-uvloop "$@"
        exec "$VENV/bin/python" server.py "$@" ;;
    test)
        setup "$TEST_PACKAGES"
        install_oha
        install_loadgen
        status=0
        run_tests "$@" || status=$?
        exit $status ;;
    bench)
        setup "$TEST_PACKAGES"
        install_oha
        install_loadgen
        exec "$VENV/bin/python" bench.py "$@" ;;
    new-site)
        setup "$SERVE_PACKAGES"
        exec "$VENV/bin/python" -m newsite --called-from "$CALLED_FROM" "$@" ;;
    soak)
        setup "$TEST_PACKAGES"
        exec "$VENV/bin/python" -m bench.soak "$@" ;;
    *)
        sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
        [ "$command" = help ] || exit 2 ;;
esac
