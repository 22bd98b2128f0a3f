#!/usr/bin/env bash
# The soaks (bench/soaks/): whole fault scenarios on multi-node Ray clusters under continuous load,
# and librdkafka's own test subset, too slow for the suite's time budget (docs/benchmarks.md,
# "Soaks"). Same setup and environment as scripts/test.sh; pytest arguments pass through, and
# without a path among them it runs every soak: `./scripts/soak.sh -x`, `./scripts/soak.sh bench/soaks/X.py -s`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
bash compat/librdkafka.sh build   # librdkafka's test-runner (Debian -dev packages, npm; cached)
export PATH="$PWD/.venv/bin:$PATH"
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0   # every Ray listener on 127.0.0.1
export RAY_AUTH_MODE=token                 # keep Ray token auth on
paths=()
for a in "$@"; do [[ $a == bench/* ]] && paths+=("$a"); done
[[ ${#paths[@]} -gt 0 ]] || set -- bench/soaks "$@"
exec .venv/bin/python -m pytest "$@"
