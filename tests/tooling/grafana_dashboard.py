"""The shipped Grafana dashboard's queries as Prometheus runs them, and the metric names logan-ray exports.

Both tests of the dashboard read it here: the file checks (tests/test_grafana_dashboard.py) and the run
against a live broker and Debian's Prometheus (tests/actors/test_prometheus_dashboard.py). Grafana
replaces its template variables (``$topic``, ``${datasource}``, ``$__rate_interval``) before a query
reaches Prometheus, so the tests do the same with values of their choosing.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "logan-ray-dashboard.json"
PROMETHEUS_CONFIG = ROOT / "deploy" / "prometheus" / "prometheus.yml"
#: Ray's metrics agent puts its namespace before every application metric's name.
RAY_PREFIX = "ray_"
#: Grafana's own variables, with the values a 1 s scrape interval makes sensible.
GRAFANA_BUILTINS = {"__rate_interval": "30s", "__interval": "5s", "__range": "5m"}

_VARIABLE = re.compile(r"\$(?:\{(\w+)(?::\w+)?\}|(\w+))")
_SELECTOR = re.compile(r"([A-Za-z_:][\w:]*)\s*\{")
#: metrics.Counter("logan_ray_x", ...), and the partition gauges' table ("logan_ray_x": (doc, field))
_DEFINED = re.compile(r'metrics\.(Counter|Gauge|Histogram)\(\s*"(logan_ray_\w+)"|^\s*"(logan_ray_\w+)":\s*\(', re.M)
_SOURCES = ("actors", "logan_ray")


@dataclass(frozen=True)
class PanelQuery:
    panel: str
    ref: str
    expr: str


def dashboard(path: Path = DASHBOARD) -> dict:
    return json.loads(path.read_text())


def panel_queries(path: Path = DASHBOARD) -> list[PanelQuery]:
    """Every query of every panel (rows' nested panels included), in the file's order."""
    out: list[PanelQuery] = []

    def walk(panels: list[dict]) -> None:
        for p in panels:
            out.extend(PanelQuery(p["title"], t["refId"], t["expr"]) for t in p.get("targets", []))
            walk(p.get("panels", []))

    walk(dashboard(path)["panels"])
    return out


def template_variables(path: Path = DASHBOARD) -> set[str]:
    return {v["name"] for v in dashboard(path)["templating"]["list"]}


def substitute(expr: str, values: dict[str, str]) -> str:
    """``expr`` with every ``$name`` / ``${name}`` replaced as Grafana would; an unknown one is a ValueError."""
    known = {**GRAFANA_BUILTINS, **values}

    def one(m: re.Match) -> str:
        name = m.group(1) or m.group(2)
        if name not in known:
            raise ValueError(f"query uses ${name}, which is neither a dashboard variable nor Grafana's: {expr}")
        return known[name]

    return _VARIABLE.sub(one, expr)


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects (every selector of the dashboard carries braces)."""
    return set(_SELECTOR.findall(expr)) - {"by", "without", "on", "ignoring", "group_left", "group_right"}


def exported_series_names(root: Path = ROOT) -> set[str]:
    """The series names logan-ray's metrics have on a Ray node's Prometheus endpoint, from the source:
    a counter ``x`` is ``ray_x_total``, a histogram ``ray_x_bucket``/``_sum``/``_count``, a gauge ``ray_x``."""
    names: set[str] = set()
    for folder in _SOURCES:
        for path in (root / folder).rglob("*.py"):
            for kind, name, gauge in _DEFINED.findall(path.read_text()):
                base = RAY_PREFIX + (name or gauge)
                if kind == "Counter":
                    names.add(base + "_total")
                elif kind == "Histogram":
                    names.update(base + s for s in ("_bucket", "_sum", "_count"))
                else:
                    names.add(base)
    return names
