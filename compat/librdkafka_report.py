"""Merge the JSON reports of librdkafka's test-runner and decide pass or fail.

    python compat/librdkafka_report.py REPORT_DIR --expect 0001,0012,...

Every expected test number must have run (a number may cover several test
functions, e.g. 0045_*) and none of its functions may have failed or still be
running; a runner that crashed before writing its report counts as a failure.
Prints one line per test function and exits 0 only when all of that holds.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass


@dataclass
class Outcome:
    name: str
    state: str  # PASSED, FAILED, RUNNING, SKIPPED, NOT_STARTED
    duration: float
    report: str


def read_reports(directory: str) -> tuple[list[Outcome], list[str]]:
    """Every non-skipped test function of every report, and the reports that could not be read."""
    outcomes, broken = [], []
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".json"):
            continue
        path = os.path.join(directory, name)
        try:
            with open(path) as f:
                report = json.load(f)
        except (OSError, ValueError):
            broken.append(name)
            continue
        for test in report.get("tests", {}).values():
            if test["name"] == "<MAIN>" or test["state"] in ("SKIPPED", "NOT_STARTED"):
                continue
            outcomes.append(Outcome(test["name"], test["state"], float(test.get("duration", 0)), name))
    return outcomes, broken


def verdict(outcomes: list[Outcome], broken: list[str], expected: list[str]) -> list[str]:
    """The problems that make the run a failure (empty when it passed)."""
    problems = [f"report {b} is missing or truncated (the test-runner crashed?)" for b in broken]
    problems += [f"{o.name} {o.state} (report {o.report})" for o in outcomes if o.state != "PASSED"]
    ran = {o.name[:4] for o in outcomes}
    problems += [f"{num} did not run" for num in expected if num not in ran]
    return problems


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("directory")
    p.add_argument("--expect", default="", help="comma list of test numbers that must have run")
    args = p.parse_args(argv)
    outcomes, broken = read_reports(args.directory)
    for o in outcomes:
        print(f"{o.name:<48} {o.state:<8} {o.duration:8.1f}s  ({o.report})")
    problems = verdict(outcomes, broken, [n for n in args.expect.split(",") if n])
    for line in problems:
        print(f"FAILED: {line}")
    passed = sum(o.state == "PASSED" for o in outcomes)
    print(f"librdkafka compatibility: {passed}/{len(outcomes)} test functions passed"
          + ("" if not problems else f", {len(problems)} problem(s)"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
