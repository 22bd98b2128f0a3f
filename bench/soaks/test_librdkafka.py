"""librdkafka's own integration tests (the fast subset) pass against the session's gateway.

compat/librdkafka.sh builds librdkafka 2.12 and its test-runner once (cached in
~/.cache/logan-ray) and runs the tests marked ``fast`` in compat/librdkafka-tests.txt
over TCP against the gateway; each test is librdkafka's own C/C++ test code, so a
pass means librdkafka sees Kafka's behaviour. The full list runs with
``python compat/run_librdkafka.py full`` (docs/compatibility.md).
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/soaks/ -> the checkout
SCRIPT = os.path.join(ROOT, "compat", "librdkafka.sh")


def _report_module():
    spec = importlib.util.spec_from_file_location("librdkafka_report",
                                                  os.path.join(ROOT, "compat", "librdkafka_report.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _fast_numbers() -> list[str]:
    out = subprocess.run(["bash", SCRIPT, "list", "fast"], capture_output=True, text=True, check=True).stdout
    return sorted({line.split()[0] for line in out.splitlines() if line.strip()})


@pytest.mark.slow
def test_librdkafka_fast_subset_passes_against_the_gateway(client, gateway, tmp_path):
    subprocess.run(["bash", SCRIPT, "build"], check=True, timeout=1800)  # cached after the first time
    expected = _fast_numbers()
    assert len(expected) >= 20
    try:
        proc = subprocess.run(["bash", SCRIPT, "run", gateway, "fast"], capture_output=True, text=True,
                              env={**os.environ, "REPORT_DIR": str(tmp_path), "PYTHON": sys.executable}, timeout=900)
    finally:
        for topic in client.list_topics():  # the runner deletes its topics (-D); free any it left
            if topic.startswith("rdkafkatest_"):
                client.delete_topic(topic)
    report = _report_module()
    outcomes, broken = report.read_reports(str(tmp_path))
    problems = report.verdict(outcomes, broken, expected)
    assert not problems, "\n".join(problems) + "\n" + proc.stdout[-4000:]
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert {o.name[:4] for o in outcomes if o.state == "PASSED"} == set(expected)
