"""``logan-ray transactions list | describe | abort``: Kafka's ``kafka-transactions.sh`` for logan-ray.

``list`` and ``describe`` ask the transaction coordinators (``actors/txn_coordinator.py``) what
ListTransactions and DescribeTransactions answer; through Ray by default, or over the Kafka
protocol with ``--bootstrap-server`` (the gateway serves both APIs; ``list`` asks every broker
and merges, as Kafka's admin client does). ``abort`` ends a *hanging* transaction in one
partition, the one a producer left open and no coordinator will end (its producer id is
unknown to every coordinator, e.g. after ``__transaction_state`` was lost): it writes an ABORT
marker straight to the partition's leader, as the tool's WriteTxnMarkers does, so the last
stable offset moves past it and ``read_committed`` consumers go on. ``--start-offset`` finds
the producer from the transaction's first batch (Kafka reads it from DescribeProducers);
abort works through Ray only, since the gateway does not take WriteTxnMarkers from clients.
"""
from __future__ import annotations

import argparse
import socket
import struct
from datetime import datetime, timezone
from typing import Any

from .cli_common import connect, ray_only
from .group_cli import _table

NOT_FOUND_HINT = ("the coordinator does not know it; check the id with `logan-ray transactions list`")
WIRE_TIMEOUT_S = 15.0


class TransactionsError(ValueError):
    """A refusal the CLI prints as its one error line."""


def add_transactions_parser(sub: Any) -> argparse.ArgumentParser:
    t = sub.add_parser("transactions", help="transactions: list, describe, abort a hanging one (kafka-transactions)")
    tsub = t.add_subparsers(dest="transactions_cmd", required=True)
    tsub.add_parser("list", help="every transactional id with its coordinator, producer id and state")
    x = tsub.add_parser("describe", help="producer id and epoch, state, timeout, start time and partitions")
    x.add_argument("--transactional-id", required=True)
    x = tsub.add_parser("abort", help="abort a hanging transaction in one partition (writes an ABORT marker)")
    x.add_argument("--topic", required=True)
    x.add_argument("--partition", type=int, required=True)
    x.add_argument("--start-offset", type=int, help="the first offset of the open transaction to abort")
    x.add_argument("--producer-id", type=int)
    x.add_argument("--producer-epoch", type=int)
    x.add_argument("--coordinator-epoch", type=int)
    t.set_defaults(func=cmd_transactions)
    return t


# ---------------------------------------------------------------- the coordinators through Ray
class RayTransactions:
    """The coordinators and partition leaders as actors (imported lazily: Ray loads slowly)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def _route(self) -> dict:
        import ray

        from logan_ray.actors.txn_coordinator import TXN_TOPIC

        route = ray.get(self.client.router.route_with_ids.remote([TXN_TOPIC])).get(TXN_TOPIC)
        if route is None:
            raise TransactionsError(f"{TXN_TOPIC} does not exist: is this a logan-ray broker of this version?")
        return route

    def list(self) -> list[dict]:
        import ray

        from logan_ray.actors.names import broker_id
        from logan_ray.actors.txn_coordinator import txn_coordinator_on
        from logan_ray.groups import ownership

        route = self._route()
        nodes = {ownership.leadership(route, p).node_id for p in range(len(route["partitions"]))} - {None}
        out = []
        for node in sorted(nodes):
            got = ray.get(txn_coordinator_on(node).list_transactions.remote([], [], -1))
            out += [{**t, "coordinator": broker_id(node)} for t in got["transaction_states"]]
        return sorted(out, key=lambda t: t["transactional_id"])

    def describe(self, transactional_id: str) -> tuple[dict, Any]:
        import ray

        from logan_ray.actors.names import broker_id
        from logan_ray.actors.txn_coordinator import partition_for_txn, txn_coordinator_on
        from logan_ray.groups import ownership

        route = self._route()
        node = ownership.leadership(route, partition_for_txn(transactional_id, len(route["partitions"]))).node_id
        if node is None:
            raise TransactionsError(f"the coordinator of {transactional_id!r} is offline (its "
                                    "__transaction_state partition has no leader); retry when its node is back")
        return ray.get(txn_coordinator_on(node).describe.remote([transactional_id]))[0], broker_id(node)

    def _leader(self, topic: str, partition: int) -> Any:
        import ray

        try:
            return ray.get(self.client.router.activate.remote(topic, partition))
        except Exception as e:
            raise TransactionsError(f"{topic}-{partition}: {_first_line(e)}") from None

    def first_batch(self, topic: str, partition: int, offset: int) -> tuple[int, int, bool]:
        """(producer id, producer epoch, transactional) of the batch holding ``offset``."""
        import ray

        from logan_ray.storage.batch_header import iter_headers

        data = ray.get(self._leader(topic, partition).fetch_to_log_end.remote(offset, 1 << 16))[0]
        for _, h in iter_headers(data):
            if h.base_offset <= offset < h.next_offset:
                return h.producer_id, h.producer_epoch, h.is_transactional and not h.is_control
        raise TransactionsError(f"no record at offset {offset} of {topic}-{partition}; give the first offset of "
                                "the open transaction (kafka-transactions find-hanging shows it in Kafka)")

    def coordinator_epoch(self) -> int:
        """The newest epoch of any ``__transaction_state`` partition: no marker written so far came from a
        newer coordinator, so the producer state of the partition accepts it."""
        from logan_ray.groups import ownership

        route = self._route()
        return max([ownership.leadership(route, p).epoch for p in range(len(route["partitions"]))] + [0])

    def abort(self, topic: str, partition: int, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> int:
        import ray

        handle = self._leader(topic, partition)
        try:
            return ray.get(handle.write_marker.remote(producer_id, producer_epoch, False, coordinator_epoch))
        except Exception as e:
            raise TransactionsError(f"the partition refused the abort marker: {_first_line(e)}") from None


# ---------------------------------------------------------------- the same over the Kafka protocol
class _Wire:
    """One blocking Kafka connection (logan-ray's own codec): librdkafka has no transaction admin APIs."""

    def __init__(self, host: str, port: int) -> None:
        try:
            self.sock = socket.create_connection((host, port), timeout=WIRE_TIMEOUT_S)
        except OSError as e:
            raise TransactionsError(f"cannot reach {host}:{port}: {e.strerror or e}; check --bootstrap-server") \
                from None
        self.corr = 0

    def call(self, api_key: int, version: int, body: dict) -> dict:
        from logan_ray.protocol import decode_response, encode_request

        self.corr += 1
        self.sock.sendall(encode_request(api_key, version, self.corr, "logan-ray-cli", body))
        size = struct.unpack(">i", self._exactly(4))[0]
        return decode_response(api_key, version, self._exactly(size))[1]

    def _exactly(self, n: int) -> bytes:
        chunks = []
        while n:
            try:
                data = self.sock.recv(min(n, 1 << 20))
            except socket.timeout:
                raise TransactionsError(f"no answer within {WIRE_TIMEOUT_S:.0f} s; check the broker") from None
            if not data:
                raise TransactionsError("the broker closed the connection (is it a Kafka listener without "
                                        "TLS/SASL? this command speaks PLAINTEXT only)")
            chunks.append(data)
            n -= len(data)
        return b"".join(chunks)

    def close(self) -> None:
        self.sock.close()


def _host_port(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    if not host or not port.isdigit():
        raise TransactionsError(f"--bootstrap-server expects HOST:PORT, got {addr!r}")
    return host, int(port)


class WireTransactions:
    """ListTransactions on every broker and DescribeTransactions on the id's coordinator."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = _host_port(bootstrap.split(",")[0])

    def _ask(self, host: str, port: int, api_key: int, version: int, body: dict) -> dict:
        w = _Wire(host, port)
        try:
            return w.call(api_key, version, body)
        finally:
            w.close()

    def list(self) -> list[dict]:
        from logan_ray.protocol import errors as E

        brokers = self._ask(*self.bootstrap, 3, 1, {"topics": []})["brokers"]
        out = []
        for b in brokers:
            got = self._ask(b["host"], b["port"], 66, 0, {"state_filters": [], "producer_id_filters": []})
            if got["error_code"] != E.NONE:
                raise TransactionsError(f"broker {b['node_id']} answered {E.error_name(got['error_code'])}")
            out += [{**t, "coordinator": b["node_id"]} for t in got["transaction_states"]]
        return sorted(out, key=lambda t: t["transactional_id"])

    def describe(self, transactional_id: str) -> tuple[dict, Any]:
        from logan_ray.protocol import errors as E

        found = self._ask(*self.bootstrap, 10, 3, {"key": transactional_id, "key_type": 1})
        if found["error_code"] != E.NONE:
            raise TransactionsError(f"no coordinator for {transactional_id!r}: "
                                    f"{E.error_name(found['error_code'])}; retry in a moment")
        got = self._ask(found["host"], found["port"], 65, 0, {"transactional_ids": [transactional_id]})
        return got["transaction_states"][0], found["node_id"]


# ---------------------------------------------------------------- the command
def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    for line in text.splitlines():  # a Ray error's own message is its last "Error: ..." line
        if "Error:" in line and not line.startswith(" "):
            text = line.split("Error:", 1)[1].strip() or text
    return text.splitlines()[0] if text else type(e).__name__


def _time(ms: int) -> str:
    return "-" if ms < 0 else datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(timespec="milliseconds")


def describe_text(entry: dict, coordinator: Any) -> str:
    from logan_ray.protocol import errors as E

    tid = entry["transactional_id"]
    if entry["error_code"] == E.TRANSACTIONAL_ID_NOT_FOUND:
        raise TransactionsError(f"TRANSACTIONAL_ID_NOT_FOUND: transactional id {tid!r} was not found: {NOT_FOUND_HINT}")
    if entry["error_code"] != E.NONE:
        raise TransactionsError(f"describing {tid!r} failed: {E.error_name(entry['error_code'])}; retry in a moment")
    parts = ",".join(f"{t['topic']}-{p}" for t in entry["topics"] for p in t["partitions"])
    return _table(["COORDINATOR", "TRANSACTIONAL-ID", "PRODUCER-ID", "PRODUCER-EPOCH", "STATE", "TIMEOUT-MS",
                   "START-TIME", "PARTITIONS"],
                  [(coordinator, tid, entry["producer_id"], entry["producer_epoch"], entry["transaction_state"],
                    entry["transaction_timeout_ms"], _time(entry["transaction_start_time_ms"]), parts or None)])


def _abort(txns: RayTransactions, args: argparse.Namespace) -> str:
    by_producer = [args.producer_id, args.producer_epoch, args.coordinator_epoch]
    if args.start_offset is None and None in by_producer:
        raise TransactionsError("abort needs --start-offset, or --producer-id, --producer-epoch and "
                                "--coordinator-epoch (as kafka-transactions abort)")
    if args.start_offset is not None and any(v is not None for v in by_producer[:2]):
        raise TransactionsError("give either --start-offset or --producer-id/--producer-epoch, not both")
    if args.start_offset is not None:
        pid, epoch, transactional = txns.first_batch(args.topic, args.partition, args.start_offset)
        if not transactional:
            raise TransactionsError(f"offset {args.start_offset} of {args.topic}-{args.partition} is not in a "
                                    "transaction; give the first offset of the open transaction")
        coordinator_epoch = args.coordinator_epoch if args.coordinator_epoch is not None else txns.coordinator_epoch()
    else:
        pid, epoch, coordinator_epoch = by_producer
    offset = txns.abort(args.topic, args.partition, pid, epoch, coordinator_epoch)
    return (f"aborted the transaction of producer {pid} (epoch {epoch}) in {args.topic}-{args.partition}: "
            f"ABORT marker at offset {offset}")


def cmd_transactions(args: argparse.Namespace) -> int:
    if args.transactions_cmd == "abort":
        ray_only(args, "transactions abort (a marker written to the partition's leader)")
    if args.bootstrap_server:
        if args.command_config or args.security_protocol or args.sasl_username:
            raise TransactionsError("transactions over --bootstrap-server speaks PLAINTEXT only; "
                                    "leave out the security options or drop --bootstrap-server to go through Ray")
        txns: Any = WireTransactions(args.bootstrap_server)
    else:
        txns = RayTransactions(connect(args))
    if args.transactions_cmd == "list":
        rows = [(t["transactional_id"], t["coordinator"], t["producer_id"], t["transaction_state"])
                for t in txns.list()]
        print(_table(["TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "TRANSACTION-STATE"], rows))
    elif args.transactions_cmd == "describe":
        print(describe_text(*txns.describe(args.transactional_id)))
    else:
        print(_abort(txns, args))
    return 0
