"""`ray up cluster.yaml` end to end on three namespace hosts (Redis for Ray's GCS on a fourth), a network cut,
the loss and return of one host, then the loss of the head with its disk (issue 33).

The test fills a copy of the top-level cluster.yaml with the bed's hosts and key and runs
the Ray cluster launcher for real: ssh, file_mounts (this clone and the Ray token) over
rsync, Ray head and workers each bound to its own host's address with token auth, and
logan-ray on the head giving every node a gateway on its own IP. Kafka clients then
work from the root namespace (confluent-kafka follows Metadata to the host that leads
each partition) and from inside the hosts (a consumer group with a member on each host).
What the copy changes, and why: setup_commands only checks the install (the hosts share
this machine's file system, where logan-ray is installed; the real command would run
scripts/setup.sh), one PLAINTEXT listener on each host's address (`--host node-ip --port 9092`)
instead of the file's SASL_SSL one and no admin user (the bed has no certificates; the file's
listener security is checked by tests/multihost/test_deploy_security.py), no secrets mount,
the data dir is the bed's per-host disk, no HTTP console (seconds of
Ray Serve start-up), a small object store, and faster failure detection (Ray's health
checks, the raylets' wait for a gone head) so the test fits its time budget.
The network cut of a replicated partition's leader host (issue 17's fault tests) runs on this
same cluster, between the consumer group and the host loss: tests/multihost/network_cut.py.
The head's loss comes last: the head host is SIGKILLed, its data dir and /tmp wiped, and after its
boot its start commands run again (``lose_the_head``); every acknowledged record of the network cut's
RF 3 topic must be read back and no folder of the other hosts removed. An acks=all writer runs through
the head's loss; each partition's longest write gap is printed (docs/benchmarks.md) and its history
checked (tests/tooling/history_checks.py).
"""
from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid

import pytest
import yaml
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from history_checks import check_history
from netns_hosts import INIT_MARK, TestBed
from network_cut import LEASE_S, SESSION_S, cut_a_leader

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.slow

TOPIC = "spread"
PARTITIONS = 6
RECORDS = 20_000  # spread over six partitions; 100,000 took minutes of acks=all in a loaded full run
PORT = 9092
# Added before every start command of the copy: failure detection in seconds, not a minute.
# Ray's health check: a host is dead after 10 missed checks a second apart. With 3, a host of the
# loaded bed (load average in the hundreds during a full suite run) was once declared dead while it
# served: its raylet and gateway went and nothing started them again (a full run in stop 30).
FAST = ("export RAY_health_check_initial_delay_ms=1000 RAY_health_check_period_ms=1000 "
        "RAY_health_check_failure_threshold=10 AUTOSCALER_HEARTBEAT_TIMEOUT_S=3600; ")
REDIS_PASSWORD = uuid.uuid4().hex  # the bed's Redis (GCS fault tolerance), on a host of its own


def launcher_copy(bed: TestBed, path: str) -> dict:
    """cluster.yaml with the bed's hosts, key and data dir (see the module docstring for the rest): Ray on
    every host but the last, which runs Redis (``start_redis``)."""
    with open(os.path.join(REPO, "cluster.yaml")) as f:
        cfg = yaml.safe_load(f)
    head, *workers = bed.hosts[:-1]
    redis = bed.hosts[-1]
    cfg["cluster_name"] = f"lrtb-{uuid.uuid4().hex[:8]}"
    cfg["provider"].update(head_ip=head.ip, worker_ips=[w.ip for w in workers])
    cfg["auth"]["ssh_private_key"] = bed.key
    cfg["file_mounts"]["~/logan-ray"] = REPO
    cfg["file_mounts"].pop("~/logan-ray-secrets", None)
    cfg["setup_commands"] = ["python3 -c 'import logan_ray, ray'"]

    def adapt(cmd: str) -> str:
        cmd = cmd.replace("/var/lib/logan-ray", bed.data_path).replace("logan-ray start", "logan-ray start --http off")
        cmd = re.sub(r"( --config (listeners|ssl\.[\w.]+|authorizer\.class\.name|super\.users)=\S+)+",
                     " --host node-ip --port 9092", cmd)
        cmd = re.sub(r"(?<![\w-])ray start", "ray start --object-store-memory=150000000", cmd)
        cmd = cmd.replace("192.168.0.13:", f"{redis.ip}:").replace("$(cat ~/logan-ray-secrets/redis.password)",
                                                                    REDIS_PASSWORD)
        return FAST + cmd

    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        cfg[key] = [adapt(c) for c in cfg[key] if "logan-ray users set" not in c]
    with open(path, "w") as f:
        yaml.safe_dump(cfg, f)
    return cfg


def launcher(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "RAY_ADDRESS")}
    out = subprocess.run(["ray", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"ray {' '.join(args)}:\n{out.stdout[-4000:]}\n{out.stderr[-4000:]}"
    return out


def wait_for(what: str, check, timeout: float, interval: float = 1.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except Exception as e:  # noqa: BLE001 - a cluster coming up answers with errors for a while
            last = e
        else:
            if last:
                return last
        time.sleep(interval)
    raise AssertionError(f"not {what} within {timeout} s (last: {last!r})")


def ray_status(gcs: str, token: str | None) -> subprocess.CompletedProcess:
    """`ray status` from the root namespace with this machine's token (None) or another one."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "RAY_ADDRESS")}
    env["RAY_AUTH_MODE"] = "token"
    if token is not None:
        env["RAY_AUTH_TOKEN"] = token
    try:
        return subprocess.run(["ray", "status", "--address", gcs], env=env, capture_output=True, text=True,
                              timeout=30)
    except subprocess.TimeoutExpired as e:  # refused and retrying: not let in either
        return subprocess.CompletedProcess(e.cmd, 124, e.stdout or "", e.stderr or "")


def metadata(bootstrap: str):
    return AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)


def leaders(bed: TestBed, bootstrap: str) -> dict[int, str | None]:
    """{partition: name of the host whose gateway leads it, or None when LEADER_NOT_AVAILABLE}."""
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(TOPIC, timeout=10)
    out = {}
    for p, pm in md.topics[TOPIC].partitions.items():
        if pm.error is not None and pm.error.code() == KafkaError.LEADER_NOT_AVAILABLE:
            out[p] = None
        else:
            assert pm.error is None, pm.error
            out[p] = bed.host(md.brokers[pm.leader].host).name
    return out


def produce(bootstrap: str, records: list[tuple[bytes, bytes, int | None]], topic: str = TOPIC
            ) -> dict[tuple[int, int], tuple]:
    """Produce (key, value, partition or None) with acks=all; {(partition, offset): (key, value)} acknowledged."""
    acked, errors = {}, []

    def report(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            acked[(msg.partition(), msg.offset())] = (msg.key(), msg.value())

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20, "enable.idempotence": True})
    for key, value, partition in records:
        while True:
            try:
                if partition is None:
                    p.produce(topic, value, key, on_delivery=report)
                else:
                    p.produce(topic, value, key, partition=partition, on_delivery=report)
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    # slow is not stuck: at the bed's load average (~300) tens of thousands of acks=all records can take minutes,
    # so this fails only when no acknowledgement came for 120 s
    left, progress_at = len(p), time.monotonic()
    while left:
        now_left = p.flush(10)
        if now_left < left:
            progress_at = time.monotonic()
        assert time.monotonic() - progress_at < 120, f"{now_left} records unacknowledged, none acknowledged for 120 s"
        left = now_left
    assert errors == []
    return acked


def bed_logs(bed: TestBed, lines: int = 15) -> str:
    """What the hosts' Ray sessions logged about trouble (the bed and its logs go with the test): the
    load, and per host the last error lines of its logan-ray actors and raylet, for a failure's message."""
    states: dict[str, int] = {}
    names: dict[str, int] = {}  # threads by program: which one there are hundreds of, if any
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as f:
                head, tail = f.read().rsplit(")", 1)
        except (OSError, ValueError):
            continue
        fields, name = tail.split(), head.split("(", 1)[-1]
        states[fields[0]] = states.get(fields[0], 0) + 1
        names[name] = names.get(name, 0) + int(fields[17])  # its threads: the load average counts those
    states["most"] = sorted(names.items(), key=lambda kv: -kv[1])[:8]  # type: ignore[assignment]
    with open("/proc/meminfo") as f:
        memory = {k: v.strip() for k, v in (line.split(":", 1) for line in f) if k in ("Dirty", "Writeback", "MemAvailable")}
    out = [f"load average: {os.getloadavg()}; processes by state: {states}; {memory}"]
    for h in bed.hosts:
        # not session_latest: that symlink names the host's /tmp, which is another folder from here
        sessions = sorted(glob.glob(os.path.join(h.dir, "tmp", "ray", "session_2*")))
        logs = os.path.join(sessions[-1] if sessions else os.path.join(h.dir, "tmp", "ray", "none"), "logs")
        found = []
        for path in sorted(glob.glob(os.path.join(logs, "worker-*.err")) + glob.glob(os.path.join(logs, "raylet.out"))):
            try:
                with open(path, errors="replace") as f:
                    text = f.read().splitlines()
            except OSError:
                continue
            bad = [line for line in text if re.search(r"Error|Traceback|timed out|WARNING|fenced|offline", line)]
            if bad:
                found.append(f"  {os.path.basename(path)}: " + " | ".join(b[:200] for b in bad[-lines:]))
        out.append(f"{h.name}: {len(found)} logs with trouble\n" + "\n".join(found[-8:]))
    return "\n".join(out)


def read_all(bootstrap: str, ends: dict[int, int], topic: str = TOPIC) -> dict[tuple[int, int], tuple]:
    """Every record of every partition up to ``ends``, read from offset 0."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in ends])
    got, deadline = {}, time.monotonic() + 120
    while sum(1 for k in got) < sum(ends.values()) and time.monotonic() < deadline:
        for m in c.consume(10000, timeout=1):
            assert m.error() is None, m.error()
            got[(m.partition(), m.offset())] = (m.key(), m.value())
    c.close()
    return got


MEMBER = textwrap.dedent("""
    import json, os, sys
    from confluent_kafka import Consumer
    bootstrap, group, topic, out, stop = sys.argv[1:6]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": True, "auto.commit.interval.ms": 300})
    c.subscribe([topic])
    seen, errors = [], []
    while not os.path.exists(stop):
        for m in c.consume(5000, timeout=0.3):
            if m.error() is not None:
                errors.append(str(m.error()))
            else:
                seen.append([m.partition(), m.offset(), m.key().decode(), m.value().decode()])
    c.close()
    with open(out, "w") as f:
        json.dump({"records": seen, "errors": errors}, f)
""")


def group_offsets(bootstrap: str, group: str) -> dict[int, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    return {tp.partition: tp.offset for tp in fut.result(10).topic_partitions if tp.topic == TOPIC}


def start_redis(bed: TestBed, h) -> None:
    """Debian's redis-server on a host of its own, as docs/deploy.md sets it up: a password, and every
    write on its disk before it is answered (``appendfsync always``)."""
    out = bed.run(h, f"redis-server --bind {h.ip} --port 6379 --requirepass {REDIS_PASSWORD} --appendonly yes "
                     f"--appendfsync always --dir {bed.data_path} --daemonize yes", timeout=30)
    assert out.returncode == 0, out.stderr
    wait_for("Redis to listen", lambda: (h.ip, 6379) in bed.listeners(h), 15, 0.2)


class SteadyWriter:
    """An idempotent acks=all producer writing to every partition of a topic in turn at a steady rate, in a
    thread, from before a fault until after it: when each record was acknowledged, to measure the write gap."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float = 60.0) -> None:
        self.acked: dict[tuple[int, int], tuple] = {}
        self.acked_at: dict[int, list[float]] = {p: [] for p in range(partitions)}
        self.errors: list[str] = []
        self._args, self._stop, self._abandoned = (bootstrap, topic, partitions, rate), threading.Event(), \
            threading.Event()
        #: partition -> [(monotonic time, leader's address or None)] each time Metadata named another leader
        self.leaders: dict[int, list[tuple[float, str | None]]] = {p: [] for p in range(partitions)}
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self._watch = threading.Thread(target=self._watch_leaders, daemon=True)
        self._watch.start()

    def _watch_leaders(self) -> None:
        """What the clients are told: the leader Metadata names for each partition, twice a second."""
        bootstrap, topic, _partitions, _rate = self._args
        admin = AdminClient({"bootstrap.servers": bootstrap})
        while not self._stop.is_set():
            try:
                md = admin.list_topics(topic, timeout=2)
                for p, pm in md.topics[topic].partitions.items():
                    b = md.brokers.get(pm.leader)
                    leader = b.host if b is not None and pm.error is None else None
                    if not self.leaders[p] or self.leaders[p][-1][1] != leader:
                        self.leaders[p].append((time.monotonic(), leader))
            except Exception:  # no answer now: ask again
                pass
            self._stop.wait(0.5)

    def _run(self) -> None:
        bootstrap, topic, partitions, rate = self._args
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "enable.idempotence": True,
                      "socket.timeout.ms": 4000, "message.timeout.ms": 600_000})

        def report(err, msg):
            if err is not None:
                self.errors.append(str(err))
            else:
                self.acked[(msg.partition(), msg.offset())] = (msg.key(), msg.value())
                self.acked_at[msg.partition()].append(time.monotonic())

        i, start = 0, time.monotonic()
        while not self._stop.is_set():
            part = i % partitions
            try:
                p.produce(topic, b"steady-%d" % i, b"s%d" % part, partition=part, on_delivery=report)
                i += 1
            except BufferError:
                pass
            p.poll(max(0.0, start + i / rate - time.monotonic()))
        while len(p) and p.flush(1) and not self._abandoned.is_set():
            pass  # every record sent gets its answer (message.timeout.ms bounds it)
        p.purge()

    def stop(self) -> None:
        """Stop sending and wait for the answer to every record sent."""
        self._stop.set()
        self._thread.join(660)
        self._watch.join(10)

    def abandon(self) -> None:
        """Stop at once (the test failed): the bed is about to go away."""
        self._abandoned.set()
        self.stop()

    def longest_gap(self, partition: int, since: float, until: float) -> float:
        """The longest time without an acknowledgement on ``partition`` between ``since`` and ``until``."""
        times = [since] + [t for t in self.acked_at[partition] if since < t < until] + [until]
        return max(b - a for a, b in zip(times, times[1:]))


def lose_the_head(bed: TestBed, cfg: dict, head, rf3: str, tmp_path) -> dict:
    """Issue 33: SIGKILL every process of the head host, wipe its disk (data dir and /tmp), boot it again and
    start the head as docs/deploy.md says. Ray's GCS comes back from Redis, the workers waited for it, the
    router restarts from the metadata in the GCS's store. What was seen, for the test to check."""
    h2, h3 = [h for h in bed.hosts[:-1] if h is not head]
    bootstrap = f"{h2.ip}:{PORT}"
    out: dict = {}
    out["acked"] = produce(bootstrap, [(b"h%d" % i, b"before-head-%d" % i, None) for i in range(3000)], topic=rf3)
    out["folders"] = {h.name: sorted(os.listdir(h.data_dir)) for h in (h2, h3)}
    md = metadata(bootstrap)
    out["leaders_before"] = {p: bed.host(md.brokers[pm.leader].host).name for p, pm in md.topics[rf3].partitions.items()}
    writer = SteadyWriter(bootstrap, rf3, len(out["leaders_before"]))  # writes through the head's loss
    try:
        return _lose_the_head(bed, cfg, head, rf3, writer, out)
    except BaseException:
        writer.abandon()
        raise


def _lose_the_head(bed: TestBed, cfg: dict, head, rf3: str, writer: SteadyWriter, out: dict) -> dict:
    h2, h3 = [h for h in bed.hosts[:-1] if h is not head]
    bootstrap = f"{h2.ip}:{PORT}"
    time.sleep(3)
    bed.kill_host(head)
    t_kill = time.monotonic()
    for sub in (head.data_dir, os.path.join(head.dir, "tmp")):  # its disk is lost
        shutil.rmtree(sub)
        os.makedirs(sub)
    os.chmod(os.path.join(head.dir, "tmp"), 0o1777)
    time.sleep(5)  # the machine reboots; the workers wait for their GCS meanwhile
    bed.start_host(head)
    t_boot = time.monotonic()
    for cmd in cfg["head_start_ray_commands"]:
        # docs/deploy.md: the same start, without the launcher's autoscaler (its state went with the disk:
        # it would start the living workers again)
        done = bed.ssh(head, cmd.replace(" --autoscaling-config=~/ray_bootstrap_config.yaml", ""), timeout=240)
        if done.returncode != 0:
            log_file = os.path.join(head.data_dir, "broker.log")
            broker_log = open(log_file).read()[-4000:] if os.path.exists(log_file) else "(no broker.log)"
            raise AssertionError(f"{cmd}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}\nbroker.log: {broker_log}\n"
                                 f"{bed_logs(bed)}")
    out["head_start_s"] = time.monotonic() - t_boot

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: a dropped client fails its futures

    def admin_works() -> bool:
        name = f"after-head-{uuid.uuid4().hex[:6]}"
        admin.create_topics([NewTopic(name, 1)])[name].result(10)
        return True

    try:
        wait_for("CreateTopics after the head's return", admin_works, 120, 1)
    except AssertionError as e:
        status = bed.run(head, "RAY_AUTH_MODE=token ray status; RAY_AUTH_MODE=token logan-ray status", timeout=60,
                         check=False)
        raise AssertionError(f"{e}\n{status.stdout[-3000:]}\n{status.stderr[-2000:]}\n{bed_logs(bed)}") from None
    out["admin_s"] = time.monotonic() - t_boot
    out["outage_s"] = t_boot - t_kill
    md = wait_for(f"every partition of {rf3} led", lambda: (m := metadata(bootstrap)) and rf3 in m.topics and all(
        pm.error is None and pm.leader >= 0 for pm in m.topics[rf3].partitions.values()) and m, 120)
    out["partitions"] = len(md.topics[rf3].partitions)
    out["brokers"] = sorted(f"{b.host}:{b.port}" for b in md.brokers.values())
    out["leaders"] = {p: md.brokers[pm.leader].host for p, pm in md.topics[rf3].partitions.items()}
    out["after"] = produce(bootstrap, [(b"a%d" % i, b"after-head-%d" % i, None) for i in range(300)], topic=rf3)
    t_end = time.monotonic()
    writer.stop()
    out["steady"], out["steady_errors"] = writer.acked, writer.errors[:3]
    # the longest time without an acknowledgement per partition, from the kill until writes were back everywhere
    out["gaps"] = {p: round(writer.longest_gap(p, t_kill, t_end), 1) for p in out["leaders_before"]}
    out["first_ack_after_kill"] = {p: round(min((t for t in writer.acked_at[p] if t > t_kill), default=t_end) - t_kill,
                                            1) for p in out["leaders_before"]}
    # when Metadata named another leader, from the kill (the head's partitions: their election)
    names = {h.ip: h.name for h in bed.hosts}
    out["leader_changes"] = {p: [(round(t - t_kill, 1), names.get(ip, ip))
                                 for t, ip in writer.leaders[p] if t > t_kill] for p in out["leaders_before"]}
    out["head_boot_s"] = round(t_boot - t_kill, 1)
    ends: dict[int, int] = {}
    for p, off in list(out["acked"]) + list(out["after"]) + list(out["steady"]):
        ends[p] = max(ends.get(p, 0), off + 1)
    out["read"] = read_all(bootstrap, ends, topic=rf3)
    out["folders_after"] = {h.name: sorted(os.listdir(h.data_dir)) for h in (h2, h3)}
    return out


def command_lines(h) -> list[str]:
    """The command line of every process of a host."""
    out = []
    for pid in h.pids():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                out.append(f.read().replace(b"\0", b" ").decode(errors="replace").strip())
        except OSError:
            continue
    return out


def bed_processes(bed: TestBed) -> dict[str, list[str]]:
    """What runs on each host besides its init and sshd."""
    out = {}
    for h in bed.hosts:
        out[h.name] = [cmd[:120] for cmd in command_lines(h)
                       if cmd and INIT_MARK not in cmd and not cmd.startswith("sshd: /usr/sbin/sshd")]
    return out


def check_network_cut(r: dict) -> None:
    """What network_cut.cut_a_leader saw (times in seconds from the cut)."""
    summary = {k: v for k, v in r.items() if k not in ("acked", "read", "hws")}
    # a follower of the ISR leads in a higher epoch, while the cut lasted, longer than the session
    assert r["elected"] is not None, summary
    elected_s, new_host, epoch = r["elected"]
    assert new_host != r["host"] and epoch > r["epoch_before"], summary
    assert r["after"]["node_id"] in r["before"]["isr"] and r["after"]["node_id"] != r["before"]["node_id"], summary
    assert r["after"]["leader_epoch"] > r["before"]["leader_epoch"], summary
    assert r["cut_s"] > SESSION_S, summary
    assert r["unavailable_s"] is not None and r["unavailable_s"] < 20, summary
    # the cut leader, produced to from its own host: acks=1 is taken while its lease runs (the records
    # its followers never got: its log diverges), never once a new leader may exist; acks=all never
    one, every = r["probe"]["one"], r["probe"]["all"]
    assert every and all(code != 0 for _s, _a, code, _o, _v in every), summary
    assert any(code == 0 for _s, _a, code, _o, _v in one), summary
    assert all(sent < LEASE_S for sent, _a, code, _o, _v in one if code == 0), summary
    late = [code for sent, _a, code, _o, _v in one if sent >= LEASE_S]
    assert late and set(late) == {6}, summary  # NOT_LEADER_OR_FOLLOWER once the lease may have ended
    # back: the same Ray node follows in the folder it led in, cut back to the new leader's log (the
    # acks=1 records are gone), caught up (its segment files are the new leader's, byte for byte), in the ISR
    assert r["after_ok"] and r["cut_node_alive_in_ray"], summary
    assert r["follower"]["directory"] == r["follower_dir"], summary
    assert r["same_bytes"] == [True] and not r["zombie_bytes_left"], summary
    # the clients: every acknowledged record read back once at its offset, the high watermark never back
    assert r["errors"] == [] and r["unflushed"] == 0 and r["read_errors"] == [], summary
    assert len(r["acked"]) > 100, summary
    assert check_history(r["acked"], r["read"]) == [], summary
    assert not any(v.startswith("zombie") for _o, v in r["read"]), summary
    assert r["hws"] == sorted(r["hws"]), summary
    ones = [a for _s, a, code, _o, _v in one if code == 0]
    print(f"\nnetwork cut of {r['host']}, leader of partition {r['partition']} (epoch {r['epoch_before']}): "
          f"{len(ones)} acks=1 produce on the host itself acknowledged until {max(ones):.2f} s, then "
          f"{len(late)} refused; {len(every)} acks=all there never (codes {sorted({c for _s, _a, c, _o, _v in every})}); "
          f"{r['elected'][1]} elected in epoch {r['elected'][2]} at {elected_s:.1f} s; first acks=all record "
          f"acknowledged {r['unavailable_s']:.1f} s after the cut; link back at {r['back_at_s']:.1f} s, in the ISR "
          f"again at {r['rejoined_s']:.1f} s; {len(r['acked'])} acknowledged, {len(r['read'])} read, "
          f"high watermarks seen {r['hws'][0] if r['hws'] else None}..{r['hws'][-1] if r['hws'] else None}",
          file=sys.stderr)


def test_ray_up_serves_kafka_from_every_host_and_survives_a_host_loss(make_bed, tmp_path):
    subprocess.run(["ray", "get-auth-token", "--generate"], capture_output=True, check=True)  # the token to share
    bed = make_bed(4)
    h1, h2, h3, h4 = bed.hosts
    hosts = [h1, h2, h3]  # Ray's; h4 runs Redis for the GCS
    start_redis(bed, h4)
    config = str(tmp_path / "cluster.yaml")
    cfg = launcher_copy(bed, config)
    # what the launcher leaves on this machine: the local provider's state, its config cache
    state_files = [f"/tmp/ray/cluster-{cfg['cluster_name']}.state", f"/tmp/ray/cluster-{cfg['cluster_name']}.lock"]
    caches_before = set(glob.glob(os.path.join(tempfile.gettempdir(), "ray-config-*")))
    bootstrap = f"{h1.ip}:{PORT}"
    try:
        # the suite's earlier tests can leave gigabytes of dirty pages: written back during this test's
        # acks=all produce, every fsync waited behind them (a full run once saw load 386 and no ack in 120 s)
        os.sync()
        t0 = time.monotonic()
        launcher("up", "-y", "--no-config-cache", config)
        # every host's gateway is a broker in Metadata, at its own address
        brokers = wait_for("three gateways", lambda: (b := metadata(bootstrap).brokers) and len(b) == 3 and b, 180)
        assert sorted((b.host, b.port) for b in brokers.values()) == [(h.ip, PORT) for h in hosts]
        up_s = time.monotonic() - t0
        for h in hosts:  # Ray and the gateway bind the host's address, never another
            addrs = {a for a, _ in bed.listeners(h)}
            assert addrs <= {h.ip, "127.0.0.1", "*", "0.0.0.0", f"::ffff:{h.ip}", "::ffff:127.0.0.1"}, addrs
            assert (h.ip, PORT) in bed.listeners(h)
            # Ray starts its workers (router, gateways, partitions) with this Python, which imports this clone
            raylets = [c for c in command_lines(h) if "/raylet " in c.split("--", 1)[0] + " "]
            assert raylets and all(f"--python_worker_command={sys.executable} " in c for c in raylets), raylets

        # Ray token auth is on across the cluster: the shared token opens it, another one does not
        gcs = f"{h1.ip}:6379"
        assert ray_status(gcs, token=None).returncode == 0
        refused = ray_status(gcs, token="0" * 32)
        assert refused.returncode != 0

        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS)])[TOPIC].result(60)
        lead = wait_for("leaders for every partition", lambda: (l := leaders(bed, bootstrap)) and all(l.values()) and l, 60)
        assert sorted(lead.values()) == ["h1", "h1", "h2", "h2", "h3", "h3"]  # spread over the three hosts

        records = [(b"k%d" % i, b"v%d" % i, None) for i in range(RECORDS)]
        try:
            acked = produce(bootstrap, records)
        except AssertionError as e:  # once in a full run: no acknowledgement at all (stop 42); keep the why
            raise AssertionError(f"{e}\n{bed_logs(bed)}") from None
        assert len(acked) == RECORDS
        ends = {p: 0 for p in range(PARTITIONS)}
        for p, _off in acked:
            ends[p] += 1
        assert all(ends.values())
        assert all(acked[(p, o)] for p in ends for o in range(ends[p]))  # offsets 0..end-1, none skipped
        for p, owner in lead.items():  # each partition's files are on its leader's disk only
            for h in hosts:
                assert os.path.isdir(os.path.join(h.data_dir, f"{TOPIC}-{p}")) == (h.name == owner), (p, h.name)

        # a consumer group with one member on each host reads everything back
        script = tmp_path / "member.py"
        script.write_text(MEMBER)
        stop = tmp_path / "stop"
        members = [subprocess.Popen(["ip", "netns", "exec", h.netns, sys.executable, str(script), bootstrap,
                                     "group-of-3", TOPIC, str(tmp_path / f"{h.name}.json"), str(stop)])
                   for h in hosts]
        try:
            wait_for("the group to commit every offset", lambda: group_offsets(bootstrap, "group-of-3") == ends, 150, 2)
        finally:
            stop.touch()
            for m in members:
                m.wait(60)
        consumed = {}
        for h in hosts:
            with open(tmp_path / f"{h.name}.json") as f:
                result = json.load(f)
            assert result["records"], f"member on {h.name} got nothing"
            for p, off, key, value in result["records"]:
                consumed[(p, off)] = (key.encode(), value.encode())
        assert consumed == acked

        status = launcher("exec", config, "logan-ray status").stdout
        rows = [[c.strip() for c in line.split("│")] for line in status.splitlines() if f" {TOPIC} " in line]
        assert len(rows) == PARTITIONS, status
        assert {int(r[2]): int(r[5]) for r in rows} == ends

        # ---- a network cut of a replicated partition's leader host (tests/multihost/network_cut.py)
        cut = cut_a_leader(bed, tmp_path, PORT)
        check_network_cut(cut)

        # ---- host loss: every process of h3 SIGKILLed
        lost = sorted(p for p, owner in lead.items() if owner == "h3")
        bed.kill_host(h3)
        t_loss = time.monotonic()
        gone = wait_for("h3's partitions to be LEADER_NOT_AVAILABLE",
                        lambda: (l := leaders(bed, bootstrap)) and sorted(p for p, o in l.items() if o is None) == lost
                        and l, 60)
        assert all(gone[p] == lead[p] for p in lead if p not in lost)  # the others did not move
        # gateways cache the broker list for 2 s: h3's leaves Metadata as soon as that runs out
        wait_for("h3's gateway to leave Metadata", lambda: len(metadata(bootstrap).brokers) == 2, 15)
        detect_s = time.monotonic() - t_loss
        more = [(b"m%d" % i, b"during-%d-%d" % (p, i), p) for p in lead if p not in lost for i in range(500)]
        during = produce(bootstrap, more)  # the other hosts keep serving
        assert sorted(during) == sorted((p, ends[p] + i) for p in lead if p not in lost for i in range(500))
        acked.update(during)
        for p in lead:
            if p not in lost:
                ends[p] += 500

        # ---- h3 comes back (the machine boots, its Ray worker starts as the launcher starts it)
        bed.start_host(h3)
        start = " && ".join(cfg["worker_start_ray_commands"])
        out = bed.ssh(h3, f"export RAY_HEAD_IP={h1.ip}; {start}", timeout=120)
        assert out.returncode == 0, out.stderr[-3000:]
        back = wait_for("h3's partitions to be served again",
                        lambda: (l := leaders(bed, bootstrap)) and all(l.values()) and l, 90)
        assert back == lead  # the same partitions on the same host: its files
        return_s = time.monotonic() - t_loss
        wait_for("the returned node's gateway in Metadata", lambda: len(metadata(bootstrap).brokers) == 3, 15)
        after = produce(bootstrap, [(b"a%d" % i, b"after-%d-%d" % (p, i), p) for p in lost for i in range(10)])
        assert sorted(after) == sorted((p, ends[p] + i) for p in lost for i in range(10))  # no offset reused
        acked.update(after)
        for p in lost:
            ends[p] += 10
        assert read_all(bootstrap, ends) == acked  # nothing lost, on any host

        # ---- the head host lost with its disk, booted again (issue 33): nothing acknowledged is lost
        from network_cut import TOPIC as RF3

        head = lose_the_head(bed, cfg, h1, RF3, tmp_path)
        summary = {k: v for k, v in head.items() if k not in ("acked", "after", "read", "steady")}
        assert len(head["acked"]) == 3000 and len(head["after"]) == 300, summary
        assert head["steady"], summary  # the steady writer's records acknowledged across the head's loss count too
        lost_records = [k for k, v in {**head["acked"], **head["after"], **head["steady"]}.items()
                        if head["read"].get(k) != v]
        assert lost_records == [], (len(lost_records), sorted(lost_records)[:3], sorted(lost_records)[-3:],
                                    sorted(k for k in head["read"] if k[0] == sorted(lost_records)[0][0])[-3:], summary)
        everything = {**head["acked"], **head["after"], **head["steady"]}
        for part in head["leaders_before"]:  # the Jepsen-style check: once each, at its offset, no gap
            history = check_history([[o, v[1]] for (q, o), v in sorted(everything.items()) if q == part],
                                    [[o, v[1]] for (q, o), v in sorted(head["read"].items()) if q == part])
            assert history == [], (part, history[:5], summary)
        for name, before in head["folders"].items():  # no partition folder removed on the hosts that lived
            assert set(before) <= set(head["folders_after"][name]), (name, summary)

        # docs/deploy.md's way down: a clean broker stop, `ray down` (the head), `ray stop` on each
        # worker (with the local provider `ray down` runs `ray stop` on the head only)
        launcher("exec", config, "logan-ray stop")
        launcher("down", "-y", config)
        for w in (h2, h3):
            out = bed.ssh(w, "ray stop")
            assert out.returncode == 0, out.stderr
        bed.run(h4, f"redis-cli -h {h4.ip} -a {REDIS_PASSWORD} --no-auth-warning shutdown nosave", check=False)
        left = {}

        def nothing_left() -> bool:
            left.update(bed_processes(bed))
            return not any(left.values())

        try:
            wait_for("nothing left running on the hosts", nothing_left, 60, 2)
        except AssertionError:
            raise AssertionError(f"left running after ray down: {left}") from None
        print(f"\nray up -> 3 gateways: {up_s:.0f} s; network cut of {cut['host']} (leader of "
              f"{cut['partition']}) for {cut['cut_s']:.1f} s: new leader after {cut['elected'][0]:.1f} s, "
              f"first acks=all produce after {cut['unavailable_s']:.1f} s, back in the ISR "
              f"{cut['rejoined_s'] - cut['back_at_s']:.1f} s after the link returned, scenario {cut['total_s']:.0f} s; "
              f"host loss seen after {detect_s:.0f} s; back after {return_s:.0f} s; head lost with its disk for "
              f"{head['outage_s']:.0f} s: head started {head['head_start_s']:.0f} s after its boot, CreateTopics "
              f"answered {head['admin_s']:.0f} s after its boot, {len(head['acked'])} + {len(head['after'])} + "
              f"{len(head['steady'])} (written throughout) records of {RF3} all read back; longest write gap per "
              f"partition (leader before): " + ", ".join(f"{p} ({head['leaders_before'][p]}) {g} s"
                                                         for p, g in sorted(head["gaps"].items()))
              + f"; leaders named after the kill (s, host): {head['leader_changes']}", file=sys.stderr)
    finally:
        state_files += set(glob.glob(os.path.join(tempfile.gettempdir(), "ray-config-*"))) - caches_before
        for path in state_files:
            if os.path.exists(path):
                os.unlink(path)
