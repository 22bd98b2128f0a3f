"""An activation hands the starting actor the router's answer (config, leader epoch) at creation, and the
actor uses it only when its folder is as the router expected: a restart by Ray, which replays the
creation arguments, must ask the router again. Pure: folders only, no Ray."""
from __future__ import annotations

import os

from logan_ray.actors.partition import given_opening
from logan_ray.storage.leader_epochs import CHECKPOINT_FILE, EpochEntry, format_checkpoint
from logan_ray.storage.recovery import CLEAN_SHUTDOWN_FILE

FIRST = {"leader_epoch": 0, "expect": {"clean": None, "max_log_epoch": -1, "no_segments": True}}
WAKE = {"leader_epoch": 3, "expect": {"clean": True, "max_log_epoch": 3}}


def _touch(path: str, data: bytes = b"") -> None:
    with open(path, "wb") as f:
        f.write(data)


def test_a_first_start_uses_the_answer_only_in_a_folder_no_actor_opened(tmp_path):
    folder = str(tmp_path / "t-0")
    os.makedirs(folder)
    assert given_opening(FIRST, folder) is FIRST
    assert given_opening(FIRST, str(tmp_path / "not-created-yet")) is FIRST
    _touch(os.path.join(folder, "00000000000000000000.log"))  # the first start opened it; this is a restart
    assert given_opening(FIRST, folder) is None
    assert given_opening(None, folder) is None


def test_a_wake_uses_the_answer_only_after_a_clean_close_with_no_newer_epoch(tmp_path):
    folder = str(tmp_path / "t-0")
    os.makedirs(folder)
    _touch(os.path.join(folder, "00000000000000000000.log"))
    _touch(os.path.join(folder, CHECKPOINT_FILE), format_checkpoint([EpochEntry(3, 0)]))
    assert given_opening(WAKE, folder) is None  # no clean-shutdown marker: a crash, or the woken actor restarting
    _touch(os.path.join(folder, CLEAN_SHUTDOWN_FILE))
    assert given_opening(WAKE, folder) is WAKE
    _touch(os.path.join(folder, CHECKPOINT_FILE), format_checkpoint([EpochEntry(3, 0), EpochEntry(4, 10)]))
    assert given_opening(WAKE, folder) is None  # the files hold a newer epoch than the router's: it must bump
