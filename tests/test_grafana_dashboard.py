"""The shipped monitoring files without a broker: the Grafana dashboard's queries are PromQL that
Prometheus accepts and name only series logan-ray exports, the Prometheus configuration is one
Prometheus loads, and scripts/metrics-setup.sh puts the dashboard where Ray's Grafana provisioning
reads. (tests/actors/test_prometheus_dashboard.py runs the queries against a live broker.)
promtool comes with Debian's prometheus package (scripts/setup.sh --test)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import yaml

from tests.tooling.grafana_dashboard import (
    DASHBOARD, PROMETHEUS_CONFIG, ROOT, exported_series_names, metric_names, panel_queries, substitute,
    template_variables,
)

SAMPLE_VALUES = {"Cluster": ".*", "topic": "events", "group": "readers", "datasource": "Prometheus"}


def test_every_dashboard_query_selects_only_series_logan_ray_exports():
    exported = exported_series_names()
    queries = panel_queries()
    assert len(queries) >= 20
    for q in queries:
        names = metric_names(q.expr)
        assert names, f"panel {q.panel!r} {q.ref} selects no metric: {q.expr}"
        assert names <= exported, f"panel {q.panel!r} {q.ref} names {sorted(names - exported)}, which no code defines"


def test_every_dashboard_query_is_promql_prometheus_accepts(tmp_path):
    """Each query, with Grafana's variables replaced, as a recording rule: promtool parses it as Prometheus does."""
    assert set(SAMPLE_VALUES) == template_variables()
    rules = [{"record": f"panel_{i}", "expr": substitute(q.expr, SAMPLE_VALUES)} for i, q in enumerate(panel_queries())]
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    done = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_dashboard_uses_its_datasource_variable_and_a_stable_uid():
    """Provisioned next to Ray's dashboards: a fixed uid (links and the Ray dashboard find it) and every panel on
    the ``datasource`` variable, so it follows the Prometheus Grafana is given instead of a uid of ours."""
    d = json.loads(DASHBOARD.read_text())
    assert d["uid"] == "loganRayDashboard" and d["title"] == "logan-ray"
    panels = [p for p in d["panels"] if p["type"] != "row"]
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    for p in panels:
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]


def test_the_prometheus_config_scrapes_the_nodes_ray_lists(tmp_path):
    done = subprocess.run(["promtool", "check", "config", str(PROMETHEUS_CONFIG)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    (job,) = yaml.safe_load(PROMETHEUS_CONFIG.read_text())["scrape_configs"]
    assert job["job_name"] == "ray"
    assert job["file_sd_configs"] == [{"files": ["/tmp/ray/prom_metrics_service_discovery.json"]}]


def _ray_provisioning(temp_dir: Path, dashboards: Path) -> None:
    """What Ray's head writes at start: the provider file naming its dashboards folder."""
    provider = temp_dir / "session_latest/metrics/grafana/provisioning/dashboards/default.yml"
    provider.parent.mkdir(parents=True)
    provider.write_text(f"apiVersion: 1\nproviders:\n  - name: Ray\n    folder: Ray\n    type: file\n"
                        f"    options:\n      path: {dashboards}\n")


def test_metrics_setup_installs_the_dashboard_in_the_folder_rays_grafana_provisioning_names(tmp_path):
    dashboards = tmp_path / "session_x" / "metrics" / "grafana" / "dashboards"
    _ray_provisioning(tmp_path / "ray", dashboards)
    done = subprocess.run(["bash", str(ROOT / "scripts/metrics-setup.sh"), "--temp-dir", str(tmp_path / "ray")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    installed = dashboards / "logan_ray_grafana_dashboard.json"
    assert installed.read_bytes() == DASHBOARD.read_bytes()
    assert done.stdout.strip() == f"installed the logan-ray dashboard in {dashboards} (Grafana: Dashboards > Ray > logan-ray)"


def test_metrics_setup_without_a_ray_session_says_so_in_one_line(tmp_path):
    done = subprocess.run(["bash", str(ROOT / "scripts/metrics-setup.sh"), "--temp-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "start Ray (logan-ray start)" in done.stderr, done.stderr
