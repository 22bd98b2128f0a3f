"""The result a test's child process printed: its last line that is a JSON object.

A child that runs Ray prints its result as one JSON line, but Ray's log forwarding
(``(raylet) WARNING: ... worker processes have been started``, actor prints) writes to
the same stdout and may come after it, so "the last line" is not the result.
Stdlib only.
"""
from __future__ import annotations

import json


def child_result(stdout: str, stderr: str = "") -> dict:
    """The last line of ``stdout`` that parses as a JSON object; AssertionError if there is none
    (with the ends of ``stdout`` and ``stderr``: the child crashed before printing it)."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    raise AssertionError(f"the child printed no JSON result; its stdout ends: {stdout[-2000:]!r}; "
                         f"its stderr ends: {stderr[-3000:]}")
