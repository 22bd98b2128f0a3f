"""The fake clock the group state machine's tests drive time with."""
from __future__ import annotations

import pytest
from group_driver import Clock


@pytest.fixture
def clock():
    return Clock()
