"""The offsets board: an active partition's log end, read by its node's gateway without a call."""
from __future__ import annotations

import os

from logan_ray.actors.channel import sweep_stale_sockets
from logan_ray.actors.offsets_board import BoardReader, BoardWriter, board_path


def test_a_reader_sees_each_publication_and_nothing_once_it_is_unusable_or_retired(tmp_path):
    path = board_path(str(tmp_path / "abc-123.sock"))
    assert path.endswith("abc-123.board")
    writer = BoardWriter(path)
    reader = BoardReader.open(path)
    assert reader is not None
    assert reader.read() is None  # nothing published yet: not usable
    writer.publish(10, 2, 5, True)
    assert reader.read() == (10, 2, 5)
    writer.publish(11, 2, 5, True)
    assert reader.read() == (11, 2, 5)
    writer.publish(11, 2, 5, False)  # e.g. it hibernates, or gained a follower: ask the actor
    assert reader.read() is None
    writer.publish(12, 3, 6, True)
    assert reader.read() == (12, 3, 6)
    writer.retire()
    assert reader.read() is None  # the mapping outlives the file, and says: do not use me
    assert not os.path.exists(path)
    assert BoardReader.open(path) is None


def test_a_board_being_written_is_not_read(tmp_path):
    path = str(tmp_path / "x-1.board")
    writer = BoardWriter(path)
    writer.publish(7, 0, 1, True)
    reader = BoardReader.open(path)
    writer._map[0:8] = (writer._seq + 1).to_bytes(8, "little")  # an odd count: a write under way
    assert reader.read() is None


def test_a_new_board_at_the_same_path_does_not_change_an_old_readers_view(tmp_path):
    """A restarted actor makes a new file (rename): the old reader keeps the old, retired one."""
    path = str(tmp_path / "x-1.board")
    old = BoardWriter(path)
    old.publish(5, 0, 1, True)
    reader = BoardReader.open(path)
    new = BoardWriter(path)
    new.publish(3, 0, 2, True)
    assert reader.read() == (5, 0, 1)
    assert BoardReader.open(path).read() == (3, 0, 2)


def test_boards_of_killed_processes_are_swept_with_their_sockets(tmp_path):
    dead = 2**22 + 12345  # above pid_max's default: no such process
    for name in (f"d-{dead}.sock", f"d-{dead}.board", f"d-{dead}.board.tmp", f"l-{os.getpid()}.board"):
        (tmp_path / name).write_bytes(b"")
    assert sweep_stale_sockets(str(tmp_path)) == 3
    assert sorted(os.listdir(tmp_path)) == [f"l-{os.getpid()}.board"]
