#!/usr/bin/env bash
# The README's test command: set up everything the suite needs, then run it all.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0   # every Ray listener on 127.0.0.1
export RAY_AUTH_MODE=token                 # keep Ray token auth on (also for attaching processes)
exec "${PYTHON:-python3}" -m pytest tests "$@"
