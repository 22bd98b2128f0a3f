"""Ray Data tests: Ray Data's progress bars stay off (they flood the test output)."""
from __future__ import annotations

import pytest
import ray


@pytest.fixture(scope="module", autouse=True)
def quiet_ray_data():
    ctx = ray.data.DataContext.get_current()
    old = ctx.enable_progress_bars
    ctx.enable_progress_bars = False
    yield
    ctx.enable_progress_bars = old
