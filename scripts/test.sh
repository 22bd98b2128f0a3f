#!/usr/bin/env bash
# The README's test command: set up everything the suite needs (in the venv .venv, see
# setup.sh), then run it all with the venv's Python, .venv/bin first on PATH: tests and
# scripts that run python3, logan-ray or ray by name get the venv's, the only ones with
# logan-ray on a stock Debian/Ubuntu machine.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
export PATH="$PWD/.venv/bin:$PATH"
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0   # every Ray listener on 127.0.0.1
export RAY_AUTH_MODE=token                 # keep Ray token auth on (also for attaching processes)
exec .venv/bin/python -m pytest tests "$@"
