"""An authenticated producer's latency alone and next to 1,000 hostile connections (issue 36, item 2).

Run: python bench/hostile_connections.py [--messages 2000] [--hostile 1000] [--wrong-per-s 200]

One embedded broker with a SASL_PLAINTEXT listener on 127.0.0.1 (PLAIN and
SCRAM-SHA-512, one user at 4,096 iterations). confluent-kafka's producer, logged in
with SCRAM-SHA-512, sends ``--messages`` 100-byte records one at a time (acks=all,
each awaited before the next) and the per-record latency is measured: first alone,
then while a separate process keeps ``--hostile`` connections busy against the same
listener, in four equal groups:

- half-open frames: a header announcing 512 KiB, then nothing (reconnect when closed);
- garbage: random bytes instead of a frame (closed by the gateway; reconnect after 1 s);
- slow handshakes: ApiVersions and SaslHandshake, then one byte of a SaslAuthenticate
  frame per second, never finishing (reconnect when closed);
- wrong passwords: PLAIN logins with a wrong password, ``--wrong-per-s`` a second in all.

Goal: the p99 under attack within 2x of the p99 alone. The attack runs in its own
process so its CPU is not the producer's; on a small machine it still competes for
the same cores, which is part of what is measured. The producer logs in before the
attack: all connections come from 127.0.0.1, so a login during the attack would be
refused once the wrong passwords have used up that address's failed-login budget.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from needs import need  # noqa: E402

PASSWORD = "bench-pw"
HALF_MIB = 512 * 1024


# ---------------------------------------------------------------- the attacker (its own process)


def _frame(api_key: int, version: int, corr: int, body: dict) -> bytes:
    from logan_ray.protocol import encode_request

    return bytes(encode_request(api_key, version, corr, "hostile", body))


async def _drain_until_closed(reader: asyncio.StreamReader) -> None:
    while await reader.read(65536):
        pass


async def _half_open(host: str, port: int, stats: dict) -> None:
    while True:
        try:
            reader, writer = await asyncio.open_connection(host, port)
            stats["opened"] += 1
            writer.write(struct.pack(">i", HALF_MIB))
            await _drain_until_closed(reader)
            writer.close()
        except OSError:
            stats["errors"] += 1
            await asyncio.sleep(1)


async def _garbage(host: str, port: int, stats: dict) -> None:
    while True:
        try:
            reader, writer = await asyncio.open_connection(host, port)
            stats["opened"] += 1
            writer.write(os.urandom(2000))
            await _drain_until_closed(reader)
            writer.close()
        except OSError:
            stats["errors"] += 1
        await asyncio.sleep(1)


async def _slow_handshake(host: str, port: int, stats: dict) -> None:
    auth = _frame(36, 2, 3, {"auth_bytes": b"\0bench\0" + b"x" * 64})
    while True:
        try:
            reader, writer = await asyncio.open_connection(host, port)
            stats["opened"] += 1
            writer.write(_frame(18, 0, 1, {}) + _frame(17, 1, 2, {"mechanism": "PLAIN"}))
            for i in range(len(auth)):
                writer.write(auth[i:i + 1])
                await writer.drain()
                try:
                    if await asyncio.wait_for(reader.read(65536), 1.0) == b"":
                        break
                except asyncio.TimeoutError:
                    pass
            writer.close()
        except OSError:
            stats["errors"] += 1
            await asyncio.sleep(1)


async def _wrong_password(host: str, port: int, stats: dict, tickets: asyncio.Queue) -> None:
    while True:
        await tickets.get()
        try:
            reader, writer = await asyncio.open_connection(host, port)
            stats["opened"] += 1
            writer.write(_frame(17, 1, 1, {"mechanism": "PLAIN"}) +
                         _frame(36, 2, 2, {"auth_bytes": b"\0bench\0wrong-" + os.urandom(4).hex().encode()}))
            got = b""
            while True:
                chunk = await reader.read(65536)
                if not chunk:
                    break
                got += chunk
                if b"too many failed" in got:
                    stats["refused"] += 1
                    break
                if b"Invalid username" in got:
                    stats["wrong"] += 1
                    break
            writer.close()
        except OSError:
            stats["errors"] += 1


async def _attack(host: str, port: int, hostile: int, wrong_per_s: float, seconds: float) -> dict:
    stats = {"opened": 0, "errors": 0, "wrong": 0, "refused": 0}
    tickets: asyncio.Queue = asyncio.Queue(maxsize=int(wrong_per_s) + 1)
    quarter = hostile // 4
    tasks = [asyncio.create_task(fn(host, port, stats)) for fn in (_half_open, _garbage, _slow_handshake)
             for _ in range(quarter)]
    tasks += [asyncio.create_task(_wrong_password(host, port, stats, tickets)) for _ in range(hostile - 3 * quarter)]

    async def tick() -> None:
        while True:
            await asyncio.sleep(1 / wrong_per_s)
            if not tickets.full():
                tickets.put_nowait(None)

    tasks.append(asyncio.create_task(tick()))
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    try:
        await asyncio.wait_for(stop.wait(), seconds)  # until the bench is done (SIGTERM), at most ``seconds``
    except asyncio.TimeoutError:
        pass
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return stats


def attack_main(target: str, hostile: int, wrong_per_s: float, seconds: float) -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    host, port = target.rsplit(":", 1)
    print(json.dumps(asyncio.run(_attack(host, int(port), hostile, wrong_per_s, seconds))), flush=True)


# ---------------------------------------------------------------- the measured producer


def producer(conf: dict, topic: str) -> Any:
    """One logged-in producer, warmed up (connections, metadata, the partition's process)."""
    from confluent_kafka import Producer

    p = Producer({**conf, "linger.ms": 0, "acks": "all"})
    for _ in range(20):
        p.produce(topic, b"warm-up")
    if p.flush(60):
        raise RuntimeError("the producer could not deliver its warm-up records")
    return p


def latencies(p: Any, topic: str, n: int) -> list[float]:
    """Seconds from produce() to the delivery report of each of ``n`` records sent one at a time."""
    value = b"v" * 100
    out = []
    for _ in range(n):
        t = time.perf_counter()
        p.produce(topic, value)
        if p.flush(30):
            raise RuntimeError("a record was not delivered within 30 s")
        out.append(time.perf_counter() - t)
        time.sleep(0.002)
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--hostile", type=int, default=1000)
    ap.add_argument("--wrong-per-s", type=float, default=200.0)
    ap.add_argument("--attack", help=argparse.SUPPRESS)  # HOST:PORT: run as the attacker process
    ap.add_argument("--seconds", type=float, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.attack:
        return attack_main(args.attack, args.hostile, args.wrong_per_s, args.seconds)
    need("logan_ray", "ray", "confluent_kafka")
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    import machine
    from logan_ray._ray import get
    from logan_ray.broker import Broker, BrokerOptions
    from logan_ray.security import scram

    with tempfile.TemporaryDirectory() as d:
        config = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512"}
        broker = Broker(BrokerOptions(data_dir=os.path.join(d, "data"), http="off", config=config))
        ep = broker.start()
        attacker = None
        try:
            get(broker.router.alter_scram.remote([], [{
                "name": "bench", "mechanism": 2, "iterations": 4096,
                "credential": scram.new_credential("SCRAM-SHA-512", PASSWORD)}]))
            target = ep["kafka"].split(",")[0]  # the only listener: SASL_PLAINTEXT
            conf = {"bootstrap.servers": target, "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bench", "sasl.password": PASSWORD}
            topic = f"hostile-{uuid.uuid4().hex[:6]}"
            print(machine.describe())
            print(f"{args.messages:,} records of 100 B one at a time (acks=all), confluent-kafka "
                  f"{__import__('confluent_kafka').__version__}, SCRAM-SHA-512 on SASL_PLAINTEXT {target}")
            # logged in before the attack, as a running application is: a new login from the attacking
            # address would be refused while that address is out of its failed-login budget
            p = producer(conf, topic)
            alone = latencies(p, topic, args.messages)
            attacker = subprocess.Popen([sys.executable, __file__, "--attack", target, "--hostile", str(args.hostile),
                                         "--wrong-per-s", str(args.wrong_per_s), "--seconds", "900"],
                                        stdout=subprocess.PIPE, text=True)
            time.sleep(3)  # the attack ramps up: every hostile connection opened
            t = time.perf_counter()
            attacked = latencies(p, topic, args.messages)
            measured_s = time.perf_counter() - t
            attacker.terminate()
            out, _ = attacker.communicate(timeout=60)
            stats = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
            attacker = None
            print(f"attack: {args.hostile} hostile connections (4 kinds), wrong passwords {args.wrong_per_s:.0f}/s, "
                  f"measured over {measured_s:.1f} s" + (f"; attacker: {stats}" if stats else ""))
            print("| producer | p50 ms | p99 ms | max ms |")
            print("|---|---|---|---|")
            for name, lat in (("alone", alone), ("with hostile connections", attacked)):
                print(f"| {name} | {percentile(lat, .5) * 1e3:.2f} | {percentile(lat, .99) * 1e3:.2f} | "
                      f"{max(lat) * 1e3:.2f} |")
            ratio = percentile(attacked, .99) / percentile(alone, .99)
            print(f"p99 under attack / alone: {ratio:.2f}x (goal: within 2x)")
        finally:
            if attacker is not None:
                attacker.kill()
                attacker.wait()
            broker.stop()


if __name__ == "__main__":
    main()
