"""What a hostile client or a careless neighbour on the machine must not get (issue 36).

Mostly without Ray: the ACL guard and the handlers run against a stand-in cluster,
the gateway core on real sockets in this process, the storage engine on a temporary
folder. Each test names the hole it keeps shut.
"""
from __future__ import annotations

import asyncio
import logging
import os
import socket
import stat
import time
from contextlib import contextmanager
from types import SimpleNamespace

import pytest

from logan_ray.gateway import authz, meta
from logan_ray.protocol import decode_request, encode_request
from logan_ray.protocol import errors as codes
from logan_ray.security import acl
from logan_ray.security.acl import ALLOW, DENY, LITERAL, PREFIXED, Binding, Decider
from tests.tooling.served_gateway import closed_by_peer, served_gateway

NODE = "0123456789abcdef"
ANON = "User:ANONYMOUS"


def grant(name: str, op: int, *, rtype: int = acl.TOPIC, pattern: int = LITERAL, principal: str = ANON,
          permission: int = ALLOW, host: str = "*") -> Binding:
    return Binding(rtype, name, pattern, principal, host, op, permission)


class FakeAuthorizer:
    def __init__(self, bindings: list[Binding], super_users=()) -> None:
        self._decider = Decider(bindings, super_users)

    async def decider(self, fresh: bool = False) -> Decider:
        return self._decider


class FakeCluster:
    """Topics by name; ``refresh`` creates the missing ones only when asked to auto-create."""

    cluster_id = "hostile"
    broker_id = 1

    def __init__(self, topics=()) -> None:
        self.topics = set(topics)
        self.created: list[str] = []

    async def gateways(self) -> dict:
        return {NODE: ("127.0.0.1", 9092)}

    async def topic_names(self, ids) -> dict:
        return {}

    def topic_id(self, name: str):
        import uuid

        return uuid.uuid5(uuid.NAMESPACE_DNS, name)

    async def refresh(self, names, auto_create: bool = False) -> dict:
        out = {}
        for n in names or sorted(self.topics):
            if n not in self.topics and auto_create:
                self.topics.add(n)
                self.created.append(n)
            out[n] = [SimpleNamespace(replicas=[NODE], isr=[NODE], node_id=NODE, offline=False, leader_epoch=0)] \
                if n in self.topics else None
        return out


def request(api_key: int, version: int, body: dict):
    """The request as the gateway sees it: encoded by a client, decoded by the gateway's codec."""
    return decode_request(memoryview(bytes(encode_request(api_key, version, 1, "hostile", body)))[4:])


def run_guarded(gw, handler, header, body, peer=("127.0.0.1", 5555)) -> dict:
    """What Gateway._run does with an authorizer: guard, handler, fix-up."""
    conn = SimpleNamespace(session=None, peer=peer)

    async def go():
        response, post = await authz.guard(gw, conn, header, body)
        if response is not None and post is None:
            return response
        response = await handler(gw, conn, header, body)
        return post(response) if post is not None else response
    return asyncio.run(go())


# ---------------------------------------------------------------- 1. Metadata v0-v3 auto-creation


@pytest.mark.parametrize("version", [0, 1, 3, 4])
def test_metadata_of_every_version_creates_no_topic_for_a_principal_without_create(version):
    cluster = FakeCluster()
    gw = SimpleNamespace(cluster=cluster, authorizer=FakeAuthorizer([grant("*", acl.DESCRIBE)]))
    header, body = request(3, version, {"topics": [{"name": "planted"}]})
    resp = run_guarded(gw, meta.metadata, header, body)
    assert cluster.created == []
    (topic,) = resp["topics"]
    assert topic["error_code"] == codes.UNKNOWN_TOPIC_OR_PARTITION  # may describe, may not create


def test_metadata_v1_of_a_principal_that_may_not_describe_gets_topic_authorization_failed():
    cluster = FakeCluster()
    gw = SimpleNamespace(cluster=cluster, authorizer=FakeAuthorizer([grant("other", acl.READ)]))
    header, body = request(3, 1, {"topics": [{"name": "planted"}]})
    resp = run_guarded(gw, meta.metadata, header, body)
    assert cluster.created == []
    assert resp["topics"][0]["error_code"] == codes.TOPIC_AUTHORIZATION_FAILED


def test_metadata_v1_still_auto_creates_for_a_principal_with_create():
    cluster = FakeCluster()
    gw = SimpleNamespace(cluster=cluster, authorizer=FakeAuthorizer(
        [grant("*", acl.DESCRIBE), grant("auto-", acl.CREATE, pattern=PREFIXED)]))
    header, body = request(3, 1, {"topics": [{"name": "auto-made"}]})
    resp = run_guarded(gw, meta.metadata, header, body)
    assert cluster.created == ["auto-made"] and resp["topics"][0]["error_code"] == codes.NONE


# ---------------------------------------------------------------- 6. DENY rules in "any resource" checks


@pytest.mark.parametrize("deny", [
    grant("orders-", acl.WRITE, pattern=PREFIXED, permission=DENY),   # the same prefix
    grant("ord", acl.WRITE, pattern=PREFIXED, permission=DENY),       # a shorter prefix covering it
    grant("orders-", acl.ALL, pattern=PREFIXED, permission=DENY),     # ALL covers WRITE
    grant("*", acl.WRITE, permission=DENY),                           # the wildcard
])
def test_a_deny_of_any_pattern_type_covering_every_grant_wins_over_it_in_any_allowed(deny):
    allow = grant("orders-", acl.WRITE, pattern=PREFIXED)
    assert Decider([allow]).any_allowed(ANON, "10.0.0.1", acl.WRITE, acl.TOPIC)
    assert not Decider([allow, deny]).any_allowed(ANON, "10.0.0.1", acl.WRITE, acl.TOPIC)


def test_any_allowed_keeps_grants_a_deny_does_not_cover():
    d = Decider([grant("orders-", acl.WRITE, pattern=PREFIXED), grant("orders-eu", acl.WRITE, permission=DENY),
                 grant("audit", acl.WRITE), grant("audit", acl.WRITE, permission=DENY, host="10.9.9.9")])
    assert d.any_allowed(ANON, "10.0.0.1", acl.WRITE, acl.TOPIC)  # orders-us is still writable
    only_literal = Decider([grant("audit", acl.WRITE), grant("aud", acl.WRITE, pattern=PREFIXED, permission=DENY)])
    assert not only_literal.any_allowed(ANON, "10.0.0.1", acl.WRITE, acl.TOPIC)


def test_init_producer_id_is_refused_to_a_principal_denied_writing_by_a_prefixed_rule():
    gw = SimpleNamespace(cluster=FakeCluster(), authorizer=FakeAuthorizer([
        grant("orders-", acl.WRITE, pattern=PREFIXED),
        grant("orders-", acl.WRITE, pattern=PREFIXED, permission=DENY)]))
    header, body = request(22, 4, {"transactional_id": None, "transaction_timeout_ms": 60000,
                                   "producer_id": -1, "producer_epoch": -1})

    async def never(*_):
        raise AssertionError("the handler must not run")
    resp = run_guarded(gw, never, header, body)
    assert resp["error_code"] == codes.CLUSTER_AUTHORIZATION_FAILED and resp["producer_id"] == -1


# ---------------------------------------------------------------- 5. OffsetDelete checks each topic


def test_offset_delete_needs_read_on_each_topic_besides_delete_on_the_group():
    gw = SimpleNamespace(cluster=FakeCluster(), authorizer=FakeAuthorizer([
        grant("team-a", acl.DELETE, rtype=acl.GROUP), grant("mine", acl.READ)]))
    header, body = request(47, 0, {"group_id": "team-a", "topics": [
        {"name": "mine", "partitions": [{"partition_index": 0}]},
        {"name": "theirs", "partitions": [{"partition_index": 0}, {"partition_index": 1}]}]})
    asked = []

    async def handler(gw, conn, header, body):
        asked.extend(t["name"] for t in body["topics"])
        return {"error_code": 0, "throttle_time_ms": 0, "topics": [
            {"name": t["name"], "partitions": [{"partition_index": p["partition_index"], "error_code": 0}
                                               for p in t["partitions"]]} for t in body["topics"]]}
    resp = run_guarded(gw, handler, header, body)
    assert asked == ["mine"]  # the coordinator never hears of the topic the principal may not read
    by_name = {t["name"]: t["partitions"] for t in resp["topics"]}
    assert [p["error_code"] for p in by_name["mine"]] == [codes.NONE]
    assert [p["error_code"] for p in by_name["theirs"]] == [codes.TOPIC_AUTHORIZATION_FAILED] * 2


def test_offset_delete_without_delete_on_the_group_is_refused_whole():
    gw = SimpleNamespace(cluster=FakeCluster(), authorizer=FakeAuthorizer([grant("mine", acl.READ)]))
    header, body = request(47, 0, {"group_id": "team-a", "topics": [
        {"name": "mine", "partitions": [{"partition_index": 0}]}]})

    async def never(*_):
        raise AssertionError("the handler must not run")
    assert run_guarded(gw, never, header, body)["error_code"] == codes.GROUP_AUTHORIZATION_FAILED


# ---------------------------------------------------------------- 4. nothing of a bad frame is logged


def test_a_malformed_login_frame_is_logged_without_its_bytes(caplog):
    password = b"hunter2-Sup3rSecret"
    frame = bytes(encode_request(36, 2, 9, "hostile", {"auth_bytes": b"\0mallory\0" + password}))
    # one byte short of its body, with the size prefix fixed up: it decodes no further than the token
    broken = (len(frame) - 5).to_bytes(4, "big") + frame[4:-1]
    caplog.set_level(logging.DEBUG, logger="logan_ray")
    with served_gateway() as (gw, port), socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(broken)
        assert closed_by_peer(sock)
        deadline = time.monotonic() + 5
        while gw.closed_bad_frames == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert gw.closed_bad_frames == 1
    logged = "\n".join(r.getMessage() for r in caplog.records)
    for shape in (password, password.hex().encode(), password[:8].hex().encode()):
        assert shape.decode() not in logged
    assert "malformed request" in logged and "api key 36 v2" in logged  # what may be told of it


# ---------------------------------------------------------------- 2. IPv4 clients of a dual-stack listener


def _dual_stack() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::", 0))
        return True
    except OSError:
        return False


needs_dual_stack = pytest.mark.skipif(not _dual_stack(), reason="no IPv6 on this machine")


def test_client_host_gives_ipv4_mapped_addresses_in_their_plain_form():
    from logan_ray.security.client_host import client_host

    assert client_host("::ffff:10.0.0.5") == "10.0.0.5"
    assert client_host("::FFFF:0a00:0005") == "10.0.0.5"
    assert client_host("10.0.0.5") == "10.0.0.5"
    assert client_host("2001:db8::5") == "2001:db8::5"
    assert client_host("not-an-address") == "not-an-address"


@needs_dual_stack
def test_an_ipv4_client_of_a_dual_stack_listener_meets_the_connection_limit_of_its_ipv4_address():
    with served_gateway("::", max_connections_per_ip_overrides="127.0.0.1:0") as (gw, port), \
            socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        assert closed_by_peer(sock)
        assert gw.quotas.rejected == 1


@needs_dual_stack
def test_an_ipv4_client_of_a_dual_stack_listener_is_matched_by_acls_on_its_ipv4_address():
    from logan_ray.security.authorizer import who

    with served_gateway("::") as (gw, port), socket.create_connection(("127.0.0.1", port), timeout=10):
        deadline = time.monotonic() + 5
        while not gw.connections and time.monotonic() < deadline:
            time.sleep(0.02)
        (conn,) = list(gw.connections)
        assert who(conn) == (ANON, "127.0.0.1")
    # and a DENY naming the IPv4 address wins over the wildcard grant for such a client
    gw = SimpleNamespace(cluster=FakeCluster(["audit"]), authorizer=FakeAuthorizer([
        grant("*", acl.DESCRIBE), grant("audit", acl.DESCRIBE, permission=DENY, host="10.0.0.5")]))
    header, body = request(3, 9, {"topics": [{"name": "audit"}], "allow_auto_topic_creation": False})
    resp = run_guarded(gw, meta.metadata, header, body, peer=("::ffff:10.0.0.5", 4444, 0, 0))
    assert resp["topics"][0]["error_code"] == codes.TOPIC_AUTHORIZATION_FAILED


# ---------------------------------------------------------------- 3. names that end in a newline


def test_a_topic_name_ending_in_a_newline_is_invalid():
    from logan_ray.actors.topic_names import validate_topic_name
    from logan_ray.errors import InvalidTopicError

    assert validate_topic_name("orders") == "orders"
    for bad in ("orders\n", "orders\n\n", "\norders", "ord\ners"):
        with pytest.raises(InvalidTopicError):
            validate_topic_name(bad)


def test_metadata_naming_a_topic_with_a_trailing_newline_creates_nothing():
    cluster = FakeCluster()
    gw = SimpleNamespace(cluster=cluster, authorizer=FakeAuthorizer([grant("*", acl.ALL)]))
    header, body = request(3, 1, {"topics": [{"name": "planted\n"}]})
    resp = run_guarded(gw, meta.metadata, header, body)
    assert cluster.created == [] and resp["topics"][0]["error_code"] == codes.INVALID_TOPIC_EXCEPTION


def test_a_listener_setting_name_ending_in_a_newline_is_unknown():
    from logan_ray.broker_config import BrokerConfigError, resolve

    resolve({"listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN"})
    with pytest.raises(BrokerConfigError):
        resolve({"listener.name.sasl_ssl.sasl.enabled.mechanisms\n": "PLAIN"})


# ---------------------------------------------------------------- 7. files other users of the machine cannot read


@contextmanager
def open_umask(mask: int = 0o022):
    """The usual shell umask, under which files come out world-readable unless created private."""
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def _open_to_others(root: str) -> list[str]:
    """Every file or folder under ``root`` (itself included) that a group or other user may use."""
    found = []
    for folder, dirs, files in os.walk(root):
        for path in [folder] + [os.path.join(folder, f) for f in files]:
            if stat.S_IMODE(os.lstat(path).st_mode) & 0o077:
                found.append(f"{os.path.relpath(path, root)} {oct(stat.S_IMODE(os.lstat(path).st_mode))}")
    return found


def test_a_partition_log_creates_its_folder_0700_and_every_file_0600(tmp_path):
    from logan_ray.storage.cleaner_checkpoint import CleanerCheckpoint, write_checkpoint
    from logan_ray.storage.config import TopicConfig
    from logan_ray.storage.dir_lock import DataDirLock
    from logan_ray.storage.log import PartitionLog
    from logan_ray.storage.partition_dir import write_topic_id
    from logan_ray.storage.record_builder import build_batch

    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    part = str(data / "orders-0")
    with open_umask():
        DataDirLock(str(data)).acquire().release()
        write_topic_id(part, "5f7c6f2a-3c1e-4c59-9d55-0d2a1b3c4d5e")
        log = PartitionLog(part, TopicConfig.from_dict({}))
        for i in range(3):
            log.append(build_batch([b"secret-%d" % i], None, timestamps=1000), leader_epoch=0)
            log.roll()
        log.flush()
        write_checkpoint(part, CleanerCheckpoint(), durable=True)
        write_checkpoint(part, CleanerCheckpoint(), durable=False)
        log.close()  # producer snapshot, clean-shutdown marker, checkpoints
    names = set(os.listdir(part))
    assert any(n.endswith(".log") for n in names) and any(n.endswith(".snapshot") for n in names)
    assert _open_to_others(str(data)) == []


def test_the_data_dir_is_closed_at_start_also_when_an_older_version_left_it_open(tmp_path):
    from logan_ray.storage.file_modes import close_dir

    old = tmp_path / "old-data"
    old.mkdir(mode=0o755)
    os.chmod(old, 0o755)
    close_dir(str(old))
    new = tmp_path / "new" / "data"
    with open_umask():
        close_dir(str(new))
    assert stat.S_IMODE(os.stat(old).st_mode) == 0o700 and stat.S_IMODE(os.stat(new).st_mode) == 0o700


def test_the_runtime_file_and_its_per_user_copy_are_0600(tmp_path, monkeypatch):
    from logan_ray import runtime_file

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    with open_umask():
        runtime_file.publish({"pid": os.getpid(), "data_dir": str(data), "ray_address": "127.0.0.1:6379"})
    for path in (runtime_file.data_dir_path(str(data)), runtime_file.user_path()):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, path
    assert _open_to_others(str(tmp_path / "state" / "logan-ray")) == []


def test_the_ray_token_ray_writes_is_closed_to_other_users(tmp_path, monkeypatch):
    from ray._private.authentication.authentication_token_setup import generate_and_save_token

    from logan_ray.ray_token import protect_token, token_path

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    with open_umask():
        protect_token()  # what init_ray does before ray.init, which may write a new token ...
        generate_and_save_token()  # ... as Ray 2.60 does it: open(path, "w") under the umask
        assert stat.S_IMODE(os.stat(os.path.dirname(token_path())).st_mode) == 0o700  # closed from the start
        protect_token()  # ... and after it
    assert token_path() == str(tmp_path / ".ray" / "auth_token")
    assert _open_to_others(str(tmp_path / ".ray")) == []


def test_an_existing_ray_token_left_readable_is_tightened(tmp_path, monkeypatch):
    from logan_ray.ray_token import protect_token

    token = tmp_path / "elsewhere" / "token"
    token.parent.mkdir()
    token.write_text("t0ken")
    os.chmod(token, 0o644)
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(token))
    protect_token()
    assert stat.S_IMODE(os.stat(token).st_mode) == 0o600
