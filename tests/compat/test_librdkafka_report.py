"""The compatibility verdict: every expected test ran and passed, and no runner crashed."""
from __future__ import annotations

import importlib.util
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location("librdkafka_report_ut", os.path.join(ROOT, "compat", "librdkafka_report.py"))
report = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = report
_spec.loader.exec_module(report)


def write(path, states: dict[str, str]) -> None:
    tests = {"<MAIN>": {"name": "<MAIN>", "state": "PASSED", "duration": 1.0}}
    tests.update({n: {"name": n, "state": s, "duration": 0.5} for n, s in states.items()})
    path.write_text(json.dumps({"id": "x", "tests": tests}))


def test_all_expected_tests_passed_is_a_pass(tmp_path):
    write(tmp_path / "all.json", {"0001_multiobj": "PASSED", "0045_a": "PASSED", "0045_b": "PASSED",
                                  "0099_x": "SKIPPED"})
    outcomes, broken = report.read_reports(str(tmp_path))
    assert report.verdict(outcomes, broken, ["0001", "0045"]) == []


def test_a_failed_function_a_skipped_test_and_a_crashed_runner_each_fail_the_run(tmp_path):
    write(tmp_path / "all.json", {"0001_multiobj": "PASSED", "0045_a": "FAILED", "0099_x": "SKIPPED"})
    (tmp_path / "0081-1.json").write_text('{"tests": {"0081_admin": {"na')  # runner aborted mid-write
    outcomes, broken = report.read_reports(str(tmp_path))
    problems = report.verdict(outcomes, broken, ["0001", "0045", "0099"])
    assert any("0045_a FAILED" in p for p in problems)
    assert any("0099 did not run" in p for p in problems)
    assert any("0081-1.json" in p for p in problems)
    assert report.main([str(tmp_path), "--expect", "0001"]) == 1
