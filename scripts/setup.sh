#!/usr/bin/env bash
# Idempotent setup for a fresh machine: installs logan-ray (editable) with its
# pinned dependencies; with --test also the real Kafka clients the tests drive
# (Python clients from PyPI, kcat from Debian, kafkajs from npm), Java for Spark
# and headless Chromium for the HTTP console test.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

extras="."
[ "${1:-}" = "--test" ] && extras=".[test]"
"$PY" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore -e "$extras"

if [ "${1:-}" = "--test" ]; then
  need=()
  command -v kcat >/dev/null 2>&1 || need+=(kcat)
  command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
  command -v chromium >/dev/null 2>&1 || need+=(chromium)  # the HTTP console's browser test
  if [ ${#need[@]} -gt 0 ]; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
  if [ -f tests/clients/node/package.json ] && [ ! -d tests/clients/node/node_modules/kafkajs ]; then
    (cd tests/clients/node && npm install --no-audit --no-fund --loglevel=error)
  fi
fi
