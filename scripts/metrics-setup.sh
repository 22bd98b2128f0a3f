#!/usr/bin/env bash
# Installs logan-ray's Grafana dashboard (deploy/grafana/logan-ray-dashboard.json) where Ray's own
# Grafana provisioning reads dashboards, so it shows in Grafana's "Ray" folder next to Ray's.
#
#   scripts/metrics-setup.sh [--temp-dir DIR]
#
# Run it on the Ray head (where Grafana runs with Ray's configuration, `grafana-server --config
# <Ray temp dir>/session_latest/metrics/grafana/grafana.ini`) after Ray started there. Ray writes
# the folder's location into its provisioning file (.../provisioning/dashboards/default.yml) and
# recreates the folder at every start of its head, so run this again after Ray restarts; Grafana
# picks the file up within seconds, no restart needed. DIR is Ray's temp dir (`ray start
# --temp-dir`), by default Ray's: $RAY_TMPDIR/ray, else $TMPDIR/ray, else /tmp/ray.
# docs/deploy.md, "Monitoring", says the rest (Prometheus, a Grafana of your own).
set -euo pipefail
dashboard=$(cd "$(dirname "$0")/.." && pwd)/deploy/grafana/logan-ray-dashboard.json
temp_dir=${RAY_TMPDIR:-${TMPDIR:-/tmp}}/ray
while [ $# -gt 0 ]; do
  case "$1" in
    --temp-dir) [ $# -ge 2 ] || { echo "metrics-setup: --temp-dir needs a directory" >&2; exit 2; }
                temp_dir=$2; shift 2 ;;
    *) echo "metrics-setup: unknown option $1 (expected --temp-dir DIR)" >&2; exit 2 ;;
  esac
done

provider=$temp_dir/session_latest/metrics/grafana/provisioning/dashboards/default.yml
if [ ! -f "$provider" ]; then
  echo "metrics-setup: no Ray Grafana provisioning at $provider: start Ray (logan-ray start) on this machine first, or name Ray's temp dir with --temp-dir" >&2
  exit 1
fi
folder=$(sed -n 's/^[[:space:]]*path:[[:space:]]*//p' "$provider" | head -n 1)
if [ -z "$folder" ]; then
  echo "metrics-setup: $provider names no dashboards folder (path:); is it Ray's?" >&2
  exit 1
fi
mkdir -p "$folder"
install -m 0644 "$dashboard" "$folder/logan_ray_grafana_dashboard.json"  # named like Ray's *_grafana_dashboard.json
echo "installed the logan-ray dashboard in $folder (Grafana: Dashboards > Ray > logan-ray)"
