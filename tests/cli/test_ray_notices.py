"""Ray's worker-pool notice is logged (to broker.log in a broker), not printed on the user's terminal."""
from __future__ import annotations

import logging

import ray._private.worker as ray_worker

from logan_ray import ray_notices

POOL = ("WARNING: 8 PYTHON worker processes have been started on node: abc with address: 127.0.0.1, "
        "which is 4x the maximum expected startup concurrency (2).")


def test_the_worker_pool_notice_is_logged_and_other_notices_still_print(capsys, caplog, monkeypatch):
    # only this test's choice of notices (a CLI command run in this process earlier diverts them all)
    monkeypatch.setattr(ray_notices, "_selectors", [])
    ray_notices.divert()
    with caplog.at_level(logging.INFO, logger="logan_ray.ray"):
        ray_worker.print_to_stdstream({"pid": "raylet", "lines": [POOL, "A worker died."], "is_err": False},
                                      ignore_prefix=False)
    printed = capsys.readouterr()
    assert "worker processes have been started" not in printed.out + printed.err
    assert "A worker died." in printed.out
    assert [r.getMessage() for r in caplog.records] == [f"ray: {POOL}"]
