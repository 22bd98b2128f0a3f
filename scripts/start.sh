#!/usr/bin/env bash
# The README's run command: set up (the venv .venv, see setup.sh), then run a local
# broker (embedded single-node Ray bound to 127.0.0.1, data in ~/.logan-ray or
# $LOGAN_RAY_DATA_DIR) in the foreground with the venv's Python. Arguments go to
# `logan-ray start`, e.g. --data-dir DIR or --port N.
# (logan-ray sets Ray's loopback binding and token auth itself: nothing to export.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"   # whatever the broker runs by name is the venv's
exec .venv/bin/python -m logan_ray.cli start --foreground "$@"
