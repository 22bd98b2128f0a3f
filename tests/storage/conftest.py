"""Fixtures shared by the storage tests."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tooling"))
from volatile_fs import VolatileMount  # noqa: E402


@pytest.fixture
def volatile(tmp_path):
    """A FUSE mount that forgets every write not fsynced when it is 'powered off' (a real lost-write fault)."""
    m = VolatileMount(str(tmp_path / "backing"), str(tmp_path / "mnt"))
    m.mount()
    try:
        yield m
    finally:
        m.unmount()
