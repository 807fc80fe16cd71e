#!/usr/bin/env bash
# The core-only install works: `pip install .` without extras (lark and regex
# only) gives a library, elvind, ec and ep that run, and the commands that need
# an extra say which one instead of failing on an ImportError.
#
# Builds .venv-core (kept between runs; rebuilt when pyproject.toml/setup.py
# change), installs the suite from this tree with the core dependencies and the
# test runner only, then:
#   1. elvind on a free loopback port, an ec subscriber and an ep producer;
#   2. tickertape, newswatcher, filewatcher and elvin-pipeline exit 1 with the
#      one-line hint naming their extra;
#   3. the protocol, subscription-language and router tests.
# Run by `make test` beside the full suite (or alone: `make core-check`); about a
# minute with a warm pip cache.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PYTHON=${PYTHON:-python3}
VENV=$ROOT/.venv-core
BIN=$VENV/bin
STAMP=$VENV/.installed
WORK=$(mktemp -d)
ROUTER_PID=""
cleanup() {
    if [ -n "$ROUTER_PID" ]; then kill "$ROUTER_PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

fail() { echo "core-only check: $*" >&2; exit 1; }

# -- the venv: core dependencies + test runner, no extras --------------------------
if [ ! -f "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ] || [ setup.py -nt "$STAMP" ]; then
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    "$BIN/python" -m pip install --quiet --upgrade pip
    "$BIN/python" -m pip install --quiet "pytest>=8" "pytest-asyncio>=0.23" \
        "pytest-timeout>=2.3" "hypothesis>=6.100"
    touch "$STAMP"
fi
# the suite itself with its core dependencies, afresh each run (pip rebuilds a
# local directory every time; not editable, so that the packaging is checked too)
"$BIN/python" -m pip install --quiet .
rm -rf build   # setuptools' in-tree staging copy: stale duplicates of the sources
for heavy in PySide6 qasync pyspark pyarrow pandas matplotlib watchdog feedparser; do
    if (cd "$WORK" && "$BIN/python" -c "import $heavy" 2>/dev/null); then
        fail "$heavy is installed in the core-only venv: it must be an extra"
    fi
done

# -- elvind, ec, ep ------------------------------------------------------------------
PORT=$("$BIN/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL="elvin://127.0.0.1:$PORT"
(cd "$WORK" && exec "$BIN/elvind" --listen "$URL" --no-discovery >"$WORK/elvind.log" 2>&1) &
ROUTER_PID=$!
for _ in $(seq 100); do
    if "$BIN/python" -c "import socket; socket.create_connection(('127.0.0.1', $PORT), 1)" 2>/dev/null; then
        break
    fi
    kill -0 "$ROUTER_PID" 2>/dev/null || fail "elvind exited: $(cat "$WORK/elvind.log")"
    sleep 0.1
done
# ec prints the notifications it gets; ep sends until the subscriber has one
(cd "$WORK" && exec timeout 20 "$BIN/ec" -e "$URL" 'require(CoreCheck)' >"$WORK/ec.out" 2>"$WORK/ec.err") &
EC_PID=$!
for _ in $(seq 100); do
    printf 'CoreCheck: 1\nMessage: "core only"\n---\n' | (cd "$WORK" && "$BIN/ep" -e "$URL") \
        || fail "ep failed"
    if grep -q 'core only' "$WORK/ec.out"; then break; fi
    sleep 0.1
done
kill "$EC_PID" 2>/dev/null || true
grep -q 'core only' "$WORK/ec.out" || fail "ec got nothing from ep: $(cat "$WORK/ec.err")"
echo "core-only check: elvind, ec and ep work without extras"

# -- commands that need an extra say which ----------------------------------------------
expect_hint() {   # extra command [args...]
    local extra=$1 status=0
    shift
    (cd "$WORK" && "$BIN/$1" "${@:2}" >"$WORK/out" 2>"$WORK/err") || status=$?
    [ "$status" -eq 1 ] || fail "$* without [$extra] exited $status, not 1: $(cat "$WORK/err")"
    [ "$(wc -l <"$WORK/err")" -eq 1 ] || fail "$* without [$extra] said more than one line: $(cat "$WORK/err")"
    grep -q "pip install 'elvin-suite\[$extra\]'" "$WORK/err" || fail "$*: no hint for [$extra]: $(cat "$WORK/err")"
    echo "  $1: $(cat "$WORK/err")"
}
expect_hint gui tickertape --help
expect_hint gui biff
expect_hint gui elvin-console
expect_hint apps newswatcher
expect_hint apps filewatcher
expect_hint pipeline elvin-pipeline report
expect_hint pipeline elvind --no-discovery --listen "elvin://127.0.0.1:0" --archive "$WORK/archive"
expect_hint pipeline elvin-archive -e "$URL" 'require(x)' "$WORK/archive"

# -- the protocol, language and router tests -------------------------------------------
# From this tree, with only the core's dependencies importable. Left to the full
# suite: the archive tests (they need [pipeline]), the property-based and scale
# tests (minutes, and nothing extra-specific in them).
cd "$ROOT"
# (The same tests run again in the full suite: here they prove that the core
# alone is enough, so the quicker ones of each kind are chosen.)
tests=(tests/unit/test_protocol_*.py)
for name in errors eval explain parse patterns; do
    tests+=("tests/unit/test_subscription_$name.py")
done
tests+=(tests/unit/test_router_*.py)
for name in cli keys quench session subscriptions; do
    tests+=("tests/integration/test_router_$name.py")
done
tests+=(tests/integration/test_ec_ep.py)
# its own temporary directory: the full suite may be running beside it
ELVIN_DISCOVERY=off timeout 600 "$BIN/python" -m pytest -q -p no:cacheprovider \
    --basetemp "$WORK/pytest" -o addopts="" "${tests[@]}"
