#!/usr/bin/env bash
# The README's run command: set up, then run a local broker (embedded single-node
# Ray bound to 127.0.0.1, data in ~/.logan-ray or $LOGAN_RAY_DATA_DIR) in the
# foreground. Arguments go to `logan-ray start`, e.g. --data-dir DIR or --port N.
# (logan-ray sets Ray's loopback binding and token auth itself: nothing to export.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec "${PYTHON:-python3}" -m logan_ray.cli start --foreground "$@"
