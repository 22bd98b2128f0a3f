#!/usr/bin/env bash
# librdkafka's own integration tests as a compatibility suite for logan-ray.
#
#   compat/librdkafka.sh build                 fetch + build librdkafka and its test-runner (cached)
#   compat/librdkafka.sh run HOST:PORT [LIST]  run tests against an existing Kafka-protocol broker
#
# LIST is `fast` (default), `full`, `todo` (prepared entries not yet verified), or a comma list such as 0001,0012,0081:DeleteRecords
# (NNNN:FILTER runs only the sub-tests whose name contains FILTER). The lists live in
# compat/librdkafka-tests.txt. librdkafka's source (tests included) ships in the npm package
# node-rdkafka under deps/librdkafka; it is built once into
# ${LOGAN_RAY_CACHE:-~/.cache/logan-ray}/librdkafka-<node-rdkafka version> and reused.
# To start a logan-ray broker, run the tests and stop it, use compat/run_librdkafka.py.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
NODE_RDKAFKA_VERSION=${NODE_RDKAFKA_VERSION:-3.6.1}   # bundles librdkafka 2.12.0
cache=${LOGAN_RAY_CACHE:-$HOME/.cache/logan-ray}/librdkafka-$NODE_RDKAFKA_VERSION
src=$cache/package/deps/librdkafka
runner=$src/tests/test-runner
# Debian packages the build needs (rapidjson-dev: test 0053 checks the statistics JSON against its schema).
BUILD_DEPS="gcc g++ make pkg-config zlib1g-dev libzstd-dev rapidjson-dev"
# Plain TCP only (SSL/SASL/OIDC are out of scope); zlib, zstd, snappy and lz4 (builtin) for the compression tests.
CONFIGURE_ARGS="--no-download --disable-ssl --disable-gssapi --disable-curl --disable-lz4-ext --enable-zlib --enable-zstd"
# The build is reused only when it was made with this recipe.
RECIPE="$CONFIGURE_ARGS | $BUILD_DEPS"

install_build_deps() {
  # Debian packages the build needs; installed only when something is missing.
  local need=()
  for p in $BUILD_DEPS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
  done
  command -v npm >/dev/null 2>&1 || need+=(npm)
  if [ ${#need[@]} -gt 0 ]; then
    local SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
}

built() {
  [ -x "$runner" ] && [ "$(cat "$cache/.built" 2>/dev/null)" = "$RECIPE" ]
}

build() (
  # A subshell: the lock and the directory change end with the build.
  if built; then return 0; fi
  install_build_deps
  mkdir -p "$cache"
  local lock="$cache.lock"
  exec 9>"$lock"
  flock 9                                  # two builders never share one tree
  if built; then return 0; fi
  rm -rf "$cache/package" "$cache"/node-rdkafka-*.tgz
  (cd "$cache" && npm pack "node-rdkafka@$NODE_RDKAFKA_VERSION" --loglevel=error >/dev/null)
  tar -xzf "$cache/node-rdkafka-$NODE_RDKAFKA_VERSION.tgz" -C "$cache"
  cd "$src"
  # shellcheck disable=SC2086
  ./configure $CONFIGURE_ARGS >"$cache/configure.log" 2>&1 \
    || { tail -30 "$cache/configure.log" >&2; exit 1; }
  make -j"${JOBS:-2}" libs >"$cache/build.log" 2>&1 || { tail -30 "$cache/build.log" >&2; exit 1; }
  make -j"${JOBS:-2}" -C tests test-runner >>"$cache/build.log" 2>&1 || { tail -30 "$cache/build.log" >&2; exit 1; }
  echo "$RECIPE" >"$cache/.built"
)

selection() {
  # Lines "NNNN SUBTESTS" to run: `fast` / `full` from compat/librdkafka-tests.txt
  # (columns: number, list, sub-test filter or *, description), else a comma list (all sub-tests).
  case "$1" in
    fast) awk '!/^#/ && $2=="fast" {print $1, $3}' "$here/librdkafka-tests.txt" ;;
    full) awk '!/^#/ && ($2=="fast" || $2=="full") {print $1, $3}' "$here/librdkafka-tests.txt" ;;
    todo) awk '!/^#/ && $2=="todo" {print $1, $3}' "$here/librdkafka-tests.txt" ;;
    *) tr ',' '\n' <<<"$1" | awk -F: 'NF {print $1, ($2 == "" ? "*" : $2)}' ;;
  esac
}

run_runner() {
  # One test-runner invocation: $1 = TESTS, $2 = SUBTESTS filter or *, $3 = report file.
  local subtests=$2; [ "$subtests" = "*" ] && subtests=""
  # KAFKA_PATH/BROKERS: tests that shell out to kafka-topics.sh get compat/kafka's stand-in.
  # TEST_KAFKA_VERSION gates tests by broker version: logan-ray behaves as Kafka 4.0 does (record
  # batches only, no message format v0/v1), so the tests skip what Kafka 4.0 removed.
  # -L: skip local (broker-less, mock cluster) tests. No -E: the socket-emulation (sockem) tests
  # wrap the client's own sockets (delays, refused connects) and run against any broker.
  # -D: delete each test's topics after it (every partition is a process). No -Q: quick mode
  # skips most sub-tests, which would make a pass mean little.
  (cd "$work/tests" && KAFKA_PATH="$here/kafka" BROKERS="$bootstrap" TESTS="$1" SUBTESTS="$subtests" \
      TEST_KAFKA_VERSION="${TEST_KAFKA_VERSION:-4.0.0}" TEST_MODE=bare TEST_REPORT="$3" \
      RDKAFKA_TEST_CONF="$work/test.conf" TEST_LEVEL="${TEST_LEVEL:-2}" \
      LD_LIBRARY_PATH="$src/src:$src/src-cpp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      "$runner" -p"${PARALLEL:-1}" -L -D ${RUNNER_ARGS:-}) || true
}

run() {
  bootstrap=$1
  local sel; sel=$(selection "${2:-fast}")
  [ -n "$sel" ] || { echo "no tests selected by '${2:-fast}'" >&2; exit 2; }
  build
  work=$(mktemp -d "${TMPDIR:-/tmp}/librdkafka-compat.XXXXXX")
  local reports=${REPORT_DIR:-$work/reports}
  mkdir -p "$reports" "$work/tests"
  ln -s "$src/src" "$work/src"   # tests read ../src/statistics_schema.json
  cat >"$work/test.conf" <<CONF
bootstrap.servers=$bootstrap
# Every partition is a Ray actor process today: give topic creation room on a loaded 2-core machine.
test.timeout.multiplier=${TEST_TIMEOUT_MULTIPLIER:-2}
CONF
  # Tests without a sub-test filter run in one invocation; each filtered entry gets its own.
  local whole; whole=$(awk '$2=="*" {print $1}' <<<"$sel" | sort -u | paste -sd, -)
  [ -n "$whole" ] && run_runner "$whole" "*" "$reports/all.json"
  local n=0 num filter
  while read -r num filter; do
    [ "$filter" = "*" ] && continue
    n=$((n + 1)); run_runner "$num" "$filter" "$reports/$num-$n.json"
  done <<<"$sel"
  local status=0
  "${PYTHON:-python3}" "$here/librdkafka_report.py" "$reports" --expect "$(awk '{print $1}' <<<"$sel" | sort -u | paste -sd, -)" \
    || status=$?
  rm -rf "$work"
  return $status
}

case "${1:-}" in
  build) build ;;
  run) shift; [ $# -ge 1 ] || { echo "usage: $0 run HOST:PORT [fast|full|NNNN,...]" >&2; exit 2; }; run "$@" ;;
  list) selection "${2:-fast}" ;;
  *) echo "usage: $0 build | run HOST:PORT [fast|full|NNNN,...] | list [fast|full]" >&2; exit 2 ;;
esac
