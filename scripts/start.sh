#!/usr/bin/env bash
# The README's run command: set up, then run a local broker (embedded single-node
# Ray bound to 127.0.0.1, data in ~/.logan-ray or $LOGAN_RAY_DATA_DIR) in the foreground.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0   # every Ray listener on 127.0.0.1
export RAY_AUTH_MODE=token                 # keep Ray token auth on (also for attaching processes)
exec "${PYTHON:-python3}" -m logan_ray.cli start --foreground "$@"
