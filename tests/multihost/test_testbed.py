"""The test bed itself: namespace hosts behave like separate machines, and leave nothing behind."""
from __future__ import annotations

import os
import subprocess

from netns_hosts import BRIDGE, INIT_MARK, PREFIX, TestBed, cleanup


def _ssh(bed: TestBed, host, cmd: str, key: str | None = None) -> subprocess.CompletedProcess:
    opts = bed.ssh_options() if key is None else [o if o != bed.key else key for o in bed.ssh_options()]
    return subprocess.run(["ssh", *opts, f"root@{host.ip}", cmd], capture_output=True, text=True, timeout=60)


def test_hosts_have_their_own_address_disk_and_sshd_and_listen_only_on_the_bridge(make_bed, tmp_path):
    bed = make_bed(2)
    h1, h2 = bed.hosts
    for h in bed.hosts:
        out = _ssh(bed, h, f"hostname; echo $HOME; echo {h.name} > {bed.data_path}/owner; ls {bed.data_path}")
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == [h.name, h.home, "owner"]
        # only loopback and the bridge cable, with the host's own address
        links = bed.run(h, "ip -o -4 addr show").stdout
        assert sorted(line.split()[1] for line in links.splitlines()) == ["eth0", "lo"]
        assert f"inet {h.ip}/24" in links
        assert bed.listeners(h) == [(h.ip, 22)]  # sshd on the bridge address only
    for h in bed.hosts:  # each host wrote into its own data dir, at the same path
        with open(os.path.join(h.data_dir, "owner")) as f:
            assert f.read().strip() == h.name
    assert not os.path.exists(os.path.join(bed.data_path, "owner"))  # nothing landed in the root namespace
    # hosts reach each other over the bridge; the root namespace listens on none of their addresses
    assert _ssh(bed, h1, f"python3 -c 'import socket; socket.create_connection((\"{h2.ip}\", 22), 2)'").returncode == 0
    root_listeners = subprocess.run(["ss", "-Hltn"], capture_output=True, text=True).stdout
    assert "10.213.0." not in root_listeners
    # key login only: another key is refused
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    refused = _ssh(bed, h1, "true", key=str(other))
    assert refused.returncode == 255 and "Permission denied" in refused.stderr


def test_a_killed_host_loses_every_process_and_boots_again_with_its_disk(make_bed):
    bed = make_bed(2)
    h1, h2 = bed.hosts
    for h in bed.hosts:
        assert _ssh(bed, h, f"setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo kept > {bed.data_path}/f").returncode == 0
    before = h1.pids()
    assert len(before) >= 3  # init, sshd, sleep
    bed.kill_host(h1)
    assert h1.pids() == [] and h1.init_pid is None
    assert not any(os.path.exists(f"/proc/{p}") for p in before)
    assert _ssh(bed, h2, "pgrep -x sleep").returncode == 0  # the other host did not notice
    bed.start_host(h1)
    out = _ssh(bed, h1, f"cat {bed.data_path}/f; pgrep -x sleep || echo no-sleep")
    assert out.stdout.split() == ["kept", "no-sleep"]


def test_cleanup_removes_what_a_crashed_run_left(make_bed):
    bed = make_bed(2)
    assert _ssh(bed, bed.hosts[0], "setsid sleep 1000 </dev/null >/dev/null 2>&1 &").returncode == 0
    pids = [p for h in bed.hosts for p in h.pids()]
    # as if the test process had died here: a fresh cleanup (no TestBed object) finds it all by name
    removed = cleanup(bed.base)
    assert any(r.startswith("netns") for r in removed)
    assert not any(os.path.exists(f"/proc/{p}") for p in pids)  # gone, and reaped: no zombie either
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"{PREFIX}-" not in netns
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    assert BRIDGE not in links and f"{PREFIX}-" not in links
    assert not os.path.exists(bed.base)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert INIT_MARK not in ps.replace("ps -eo args", "")
    with open("/proc/self/mountinfo") as f:
        assert bed.base not in f.read()
