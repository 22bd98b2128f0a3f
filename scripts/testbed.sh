#!/usr/bin/env bash
# The multi-host test bed by hand (root): hosts are Linux namespaces on a bridge, each with its
# own IP (10.213.0.11, .12, ...), data dir, /tmp, home and sshd. See tests/tooling/netns_hosts.py.
#   scripts/testbed.sh up 3          build 3 hosts (prints their IPs, data dirs and the ssh key)
#   ssh -i /var/tmp/logan-ray-testbed/id_ed25519 root@10.213.0.11
#   scripts/testbed.sh exec h2 CMD   run a command inside host h2 (no ssh)
#   scripts/testbed.sh kill h2       SIGKILL every process of h2; `boot h2` starts it again
#   scripts/testbed.sh down          remove everything (also what a crashed run left: `cleanup`)
# Sessions on the hosts find this clone's venv (.venv/bin: its python3, logan-ray and ray, see
# scripts/setup.sh) first on PATH and the clone on PYTHONPATH; $PYTHON names another interpreter.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-$top/.venv/bin/python}
[ -x "$PY" ] || command -v "$PY" >/dev/null || { echo "testbed.sh: no $PY: run scripts/setup.sh --test first" >&2; exit 1; }
bin=$(dirname "$("$PY" -c 'import sys; print(sys.executable)')")
if [ "${1:-}" = up ]; then
  set -- "$@" --env "PATH=$bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" --env "PYTHONPATH=$top"
fi
exec "$PY" "$top/tests/tooling/netns_hosts.py" "$@"
