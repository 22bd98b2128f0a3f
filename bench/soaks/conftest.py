"""The soaks use the suite's helpers and fixtures: tests/tooling on the path, tests/conftest.py's
session fixtures (one embedded Ray, one broker, its gateway) loaded here as they are for tests/."""
from __future__ import annotations

import importlib.util
import os
import sys

TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tests")
sys.path.insert(0, os.path.join(TESTS, "tooling"))

_spec = importlib.util.spec_from_file_location("suite_conftest", os.path.join(TESTS, "conftest.py"))
_suite = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_suite)
globals().update({name: value for name, value in vars(_suite).items() if not name.startswith("__")})
