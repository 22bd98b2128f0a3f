"""A multi-host test bed on one machine: each "host" is a set of Linux namespaces.

Why namespaces: Ray's ``cluster_utils.Cluster`` runs every node with one IP, one
network stack and one disk, so it cannot show that gateways bind and advertise
per-host addresses, that each host keeps its own partition files, or that
``ray up`` can launch a cluster. Here every host gets

- its own network namespace (``lrtb-<name>``) on the bridge ``lrtb0`` with one IP
  of 10.213.0.0/24 (the root namespace is 10.213.0.1), loopback up, no route
  elsewhere: whatever it listens on is reachable only over the bridge or loopback;
- its own PID, mount and UTS namespaces, held by a small init process (pid 1
  there): killing that process kills every process of the host at once (a host
  loss), and ``ray stop`` on one host sees only that host's processes;
- its own disk, as bind mounts in its mount namespace: ``DATA_PATH`` (the same path
  on every host, as on real machines; logan-ray's data dir), ``/tmp`` (Ray's
  session files), ``/run``, ``/etc/hosts`` (every host's name), and a home
  directory for root (``/etc/passwd`` is replaced in the host); the rest of the
  file system, Python included, is shared: "logan-ray is installed on every host" (a clone
  under /tmp is bound back into the host's own /tmp);
- its own sshd listening only on its bridge IP, root login with the bed's
  generated key only; sessions get ``env`` (PATH, PYTHONPATH) set by sshd.

Everything lives under ``BASE`` (default /var/tmp/logan-ray-testbed). ``cleanup()``
removes a bed, also the leftovers of a crashed earlier run (found by name), so a
test fixture calls it in ``finally`` and again before building. Root only.
Stdlib only: the file is also the hosts' init program (``python3 netns_hosts.py _init``)
and the command line of scripts/testbed.sh.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field

PREFIX = "lrtb"
BRIDGE = f"{PREFIX}0"
SUBNET = "10.213.0"
BRIDGE_IP = f"{SUBNET}.1"
BASE = os.environ.get("LOGAN_RAY_TESTBED_DIR", "/var/tmp/logan-ray-testbed")
INIT_MARK = "logan-ray-testbed-init"  # in every init's command line, so cleanup finds stray ones
SSHD = "/usr/sbin/sshd"


def _run(*cmd: str, check: bool = True, quiet: bool = False) -> subprocess.CompletedProcess:
    out = subprocess.run(cmd, capture_output=True, text=True)
    if check and out.returncode != 0:
        raise RuntimeError(f"{shlex.join(cmd)} failed ({out.returncode}): {out.stderr.strip()}")
    return out


@dataclass
class Host:
    name: str
    index: int
    base: str

    @property
    def ip(self) -> str:
        return f"{SUBNET}.{10 + self.index}"

    @property
    def netns(self) -> str:
        return f"{PREFIX}-{self.name}"

    @property
    def veth(self) -> str:  # the root namespace's end of the host's cable
        return f"{PREFIX}-{self.name}"[:15]

    @property
    def dir(self) -> str:
        return os.path.join(self.base, "hosts", self.name)

    @property
    def data_dir(self) -> str:
        """The host's private disk for logan-ray, as seen from the root namespace."""
        return os.path.join(self.dir, "data")

    @property
    def home(self) -> str:
        return os.path.join(self.dir, "home")

    @property
    def init_pid(self) -> int | None:
        """The root-namespace pid of the host's init (pid 1 inside), None when the host is down."""
        try:
            with open(os.path.join(self.dir, "init.pid")) as f:
                pid = int(f.read())
        except (OSError, ValueError):
            return None
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if INIT_MARK.encode() not in f.read():
                    return None
        except OSError:
            return None
        return pid

    def pids(self) -> list[int]:
        """Every process in the host's network namespace (its init included)."""
        out = _run("ip", "netns", "pids", self.netns, check=False)
        return [int(p) for p in out.stdout.split()]


@dataclass
class TestBed:
    """N hosts on a bridge. ``up()`` builds them, ``down()`` removes everything (see ``cleanup``)."""

    __test__ = False  # not a pytest test class

    n: int = 3
    base: str = BASE
    data_path: str = ""  # where each host sees its private data dir; default <base>/node-data
    env: dict[str, str] = field(default_factory=dict)  # set in every ssh session (PATH, PYTHONPATH...)
    hosts: list[Host] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.data_path = self.data_path or os.path.join(self.base, "node-data")
        self.hosts = [Host(f"h{i}", i, self.base) for i in range(1, self.n + 1)]

    @property
    def key(self) -> str:
        """The private key that logs in as root on every host."""
        return os.path.join(self.base, "id_ed25519")

    def host(self, name_or_ip: str) -> Host:
        return next(h for h in self.hosts if name_or_ip in (h.name, h.ip, h.netns))

    # ------------------------------------------------------------ building
    def up(self, timeout: float = 30.0) -> "TestBed":
        if os.geteuid() != 0:
            raise PermissionError("the multi-host test bed needs root (network namespaces, mounts)")
        cleanup(self.base)
        os.makedirs(self.data_path, exist_ok=True)
        os.makedirs(os.path.join(self.base, "hosts"), exist_ok=True)
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "logan-ray-testbed", "-f", self.key)
        _run("ip", "link", "add", BRIDGE, "type", "bridge")
        _run("ip", "addr", "add", f"{BRIDGE_IP}/24", "dev", BRIDGE)
        _run("ip", "link", "set", BRIDGE, "up")
        for h in self.hosts:
            self._make_host(h)
        for h in self.hosts:
            self.start_host(h, timeout=timeout)
        return self

    def _make_host(self, h: Host) -> None:
        for sub in ("data", "tmp", "run", "home/.ssh", "ssh"):
            os.makedirs(os.path.join(h.dir, sub), exist_ok=True)
        os.chmod(os.path.join(h.dir, "tmp"), 0o1777)
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", os.path.join(h.dir, "ssh", "host_key"))
        shutil.copy(self.key + ".pub", os.path.join(h.home, ".ssh", "authorized_keys"))
        with open("/etc/passwd") as f:
            lines = f.read().splitlines()
        with open(os.path.join(h.dir, "passwd"), "w") as f:
            for line in lines:
                parts = line.split(":")
                if parts[0] == "root":
                    parts[5] = h.home
                f.write(":".join(parts) + "\n")
        with open(os.path.join(h.dir, "hosts"), "w") as f:  # each host resolves its own name, and the others'
            f.write("127.0.0.1 localhost\n" + "".join(f"{o.ip} {o.name}\n" for o in self.hosts))
        env = " ".join(f"{k}={v}" for k, v in self.env.items())
        exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in self.env.items())
        for rc in (".profile", ".bashrc"):  # login shells (ray up's `bash --login`) reset PATH from /etc/profile
            with open(os.path.join(h.home, rc), "w") as f:
                f.write(exports)
        with open(os.path.join(h.dir, "ssh", "sshd_config"), "w") as f:
            f.write(f"""ListenAddress {h.ip}
Port 22
HostKey {os.path.join(h.dir, "ssh", "host_key")}
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile none
MaxStartups 100
MaxSessions 100
AcceptEnv LANG LC_*
Subsystem sftp internal-sftp
{"SetEnv " + env if env else ""}
""")
        _run("ip", "netns", "add", h.netns)
        _run("ip", "link", "add", h.veth, "type", "veth", "peer", "name", "eth0", "netns", h.netns)
        _run("ip", "link", "set", h.veth, "master", BRIDGE, "up")
        _run("ip", "-n", h.netns, "link", "set", "lo", "up")
        _run("ip", "-n", h.netns, "addr", "add", f"{h.ip}/24", "dev", "eth0")
        _run("ip", "-n", h.netns, "link", "set", "eth0", "up")

    def start_host(self, h: Host, timeout: float = 30.0) -> None:
        """Boot the host: its init (new PID/mount/UTS namespaces, private mounts) and its sshd."""
        if h.init_pid is not None:
            return
        log = open(os.path.join(h.dir, "init.log"), "ab")
        proc = subprocess.Popen(
            ["ip", "netns", "exec", h.netns, "unshare", "--mount", "--uts", "--pid", "--fork", "--mount-proc",
             "--propagation", "private", "--", sys.executable, os.path.abspath(__file__), "_init", INIT_MARK,
             h.dir, self.data_path, h.name],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"host {h.name} did not boot: see {os.path.join(h.dir, 'init.log')}")
            if h.init_pid is None:
                children = _children(proc.pid)
                if children:  # unshare's child is pid 1 of the new PID namespace
                    with open(os.path.join(h.dir, "init.pid"), "w") as f:
                        f.write(str(children[0]))
            elif _port_open(h.ip, 22):
                return
            time.sleep(0.05)
        raise TimeoutError(f"host {h.name}: sshd not listening on {h.ip}:22 within {timeout} s")

    # --------------------------------------------------------------- using
    def nsenter(self, h: Host | str) -> list[str]:
        """Command prefix that runs a command inside the host (all its namespaces)."""
        h = self.host(h) if isinstance(h, str) else h
        pid = h.init_pid
        if pid is None:
            raise RuntimeError(f"host {h.name} is down")
        return ["nsenter", "--target", str(pid), "--net", "--mount", "--uts", "--pid", "--"]

    def exec_env(self, h: Host) -> dict[str, str]:
        """The environment an ssh session on ``h`` gets (for commands run with ``nsenter``)."""
        env = {"HOME": h.home, "USER": "root", "LOGNAME": "root", "SHELL": "/bin/sh",
               "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
        env.update(self.env)
        return env

    def run(self, h: Host | str, cmd: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
        """Run a shell command on a host as an ssh session would (its env), without ssh."""
        h = self.host(h) if isinstance(h, str) else h
        out = subprocess.run(self.nsenter(h) + ["/bin/sh", "-c", cmd], env=self.exec_env(h), capture_output=True,
                             text=True, timeout=timeout, cwd="/")
        if check and out.returncode != 0:
            raise RuntimeError(f"on {h.name}: {cmd!r} failed ({out.returncode}):\n{out.stdout[-2000:]}\n"
                               f"{out.stderr[-3000:]}")
        return out

    def ssh(self, h: Host | str, cmd: str, timeout: float = 120) -> subprocess.CompletedProcess:
        h = self.host(h) if isinstance(h, str) else h
        return subprocess.run(["ssh", *self.ssh_options(), f"root@{h.ip}", cmd], capture_output=True, text=True,
                              timeout=timeout)

    def ssh_options(self) -> list[str]:
        return ["-i", self.key, "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                "-o", "LogLevel=ERROR", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5"]

    def listeners(self, h: Host | str) -> list[tuple[str, int]]:
        """(address, port) of every listening TCP socket in the host's network namespace."""
        h = self.host(h) if isinstance(h, str) else h
        out = _run("ip", "netns", "exec", h.netns, "ss", "-Hltn")
        result = []
        for line in out.stdout.splitlines():
            local = line.split()[3]
            addr, port = local.rsplit(":", 1)
            result.append((addr.strip("[]"), int(port)))
        return result

    def kill_host(self, h: Host | str) -> None:
        """Host loss: SIGKILL every process of the host at once (its PID namespace's init)."""
        h = self.host(h) if isinstance(h, str) else h
        pids, pid = h.pids(), h.init_pid
        if pid is not None:
            os.kill(pid, signal.SIGKILL)  # the kernel kills every process of the PID namespace with it
        _wait_gone(pids, 30)

    def link(self, h: Host | str, up: bool) -> None:
        """Cut (or restore) the host's cable: its processes live on, unreachable."""
        h = self.host(h) if isinstance(h, str) else h
        _run("ip", "link", "set", h.veth, "up" if up else "down")

    def down(self) -> None:
        cleanup(self.base)

    def __enter__(self) -> "TestBed":
        try:
            return self.up()
        except BaseException:
            self.down()
            raise

    def __exit__(self, *exc) -> None:
        self.down()

    def describe(self) -> dict:
        return {"base": self.base, "key": self.key, "data_path": self.data_path, "bridge": BRIDGE,
                "hosts": [{"name": h.name, "ip": h.ip, "netns": h.netns, "data_dir": h.data_dir,
                           "home": h.home, "init_pid": h.init_pid} for h in self.hosts]}


def _port_open(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=0.5).close()
        return True
    except OSError:
        return False


def _wait_gone(pids: list[int], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while pids and time.monotonic() < deadline:
        pids = [p for p in pids if not _gone(p)]
        if pids:
            time.sleep(0.05)


def _gone(pid: int) -> bool:
    """Exited; our own children (a host's unshare) are reaped here, others' zombies count as gone."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return True
    except ChildProcessError:
        pass
    return not os.path.exists(f"/proc/{pid}") or _zombie(pid)


def _ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def cleanup(base: str = BASE) -> list[str]:
    """Remove every trace of a bed (this run's or a crashed earlier one's); returns what it removed.

    Order matters: processes first (they hold the namespaces and mounts), then the
    network namespaces, links, stray mounts and files.
    """
    removed = []
    namespaces = [line.split()[0] for line in _run("ip", "netns", "list", check=False).stdout.splitlines()
                  if line.split() and line.split()[0].startswith(f"{PREFIX}-")]
    victims = set()
    for ns in namespaces:
        victims.update(int(p) for p in _run("ip", "netns", "pids", ns, check=False).stdout.split())
    for pid_dir in os.listdir("/proc"):
        if pid_dir.isdigit():
            try:
                with open(f"/proc/{pid_dir}/cmdline", "rb") as f:
                    if INIT_MARK.encode() in f.read():
                        victims.add(int(pid_dir))
            except OSError:
                pass
    victims.discard(os.getpid())
    # Children before parents: a host's init dies before the unshare that waits for it, which then
    # reaps it (a parent killed first would hand its child, a zombie, to the machine's init).
    inner = {p for p in victims if _ppid(p) in victims}
    for wave in (inner, victims - inner):
        for pid in wave:
            try:
                os.kill(pid, signal.SIGKILL)
                removed.append(f"process {pid}")
            except ProcessLookupError:
                pass
        _wait_gone(sorted(wave), 30)
    for ns in namespaces:
        _run("ip", "netns", "del", ns, check=False)
        removed.append(f"netns {ns}")
    links = _run("ip", "-o", "link", "show", check=False).stdout.splitlines()
    for line in links:
        name = line.split(":")[1].strip().split("@")[0]
        if name.startswith(PREFIX):
            _run("ip", "link", "del", name, check=False)
            removed.append(f"link {name}")
    real = os.path.realpath(base)
    with open("/proc/self/mountinfo") as f:
        mounts = [line.split()[4] for line in f]
    for mnt in sorted((m for m in mounts if m == real or m.startswith(real + "/")), key=len, reverse=True):
        _run("umount", "-l", mnt, check=False)
        removed.append(f"mount {mnt}")
    if os.path.isdir(base):
        shutil.rmtree(base, ignore_errors=True)
        removed.append(f"dir {base}")
    return removed


# ------------------------------------------------------------------- host init
def _init(host_dir: str, data_path: str, name: str) -> None:
    """Pid 1 of a host: private mounts, hostname, sshd; reaps orphans; dies with everything in it."""
    def bind(src: str, dst: str) -> None:
        _run("mount", "--bind", src, dst)

    bind(os.path.join(host_dir, "data"), data_path)
    # The software is on every host, as installed alike on real machines: a clone under /tmp
    # (``mktemp -d``) would be hidden by the host's own /tmp, so it is bound back into it.
    software = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    shared = [software] if software.startswith("/tmp/") else []
    staged = []
    for i, path in enumerate(shared):
        stage = os.path.join(host_dir, f"shared-{i}")
        os.makedirs(stage, exist_ok=True)
        bind(path, stage)
        staged.append((stage, path))
    bind(os.path.join(host_dir, "tmp"), "/tmp")
    for stage, path in staged:
        os.makedirs(path, exist_ok=True)  # in the host's own /tmp
        bind(stage, path)
    bind(os.path.join(host_dir, "passwd"), "/etc/passwd")
    bind(os.path.join(host_dir, "hosts"), "/etc/hosts")
    _run("mount", "-t", "tmpfs", "-o", "mode=755,size=64m", "tmpfs", "/run")
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    socket.sethostname(name)

    def stop(*_: object) -> None:
        os.kill(-1, signal.SIGKILL)  # every other process of this PID namespace
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    subprocess.Popen([SSHD, "-D", "-e", "-f", os.path.join(host_dir, "ssh", "sshd_config")], cwd="/",
                     stdout=open(os.path.join(host_dir, "sshd.log"), "ab"), stderr=subprocess.STDOUT)
    while True:
        try:
            os.wait()  # orphans (daemonized Ray processes) are reparented to us: reap them
        except ChildProcessError:
            time.sleep(1)


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


# ------------------------------------------------------------------ command line
def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_init":
        _init(*argv[2:5])
        return 0
    p = argparse.ArgumentParser(prog="testbed", description="multi-host test bed of Linux namespaces (root)")
    p.add_argument("--base", default=BASE, help=f"where the bed keeps its files (default {BASE})")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("up", help="build N hosts (removes any earlier bed first)")
    s.add_argument("n", type=int, nargs="?", default=3)
    s.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="set in every ssh session")
    sub.add_parser("down", help="remove the bed: processes, namespaces, bridge, mounts, files")
    sub.add_parser("cleanup", help="same as down; also what a crashed earlier run left")
    sub.add_parser("status", help="hosts, IPs, and whether each is up (JSON)")
    s = sub.add_parser("exec", help="run a command inside a host")
    s.add_argument("host")
    s.add_argument("command", nargs=argparse.REMAINDER)
    s = sub.add_parser("kill", help="SIGKILL every process of a host")
    s.add_argument("host")
    s = sub.add_parser("boot", help="start a killed host again")
    s.add_argument("host")
    args = p.parse_args(argv)
    if args.cmd in ("down", "cleanup"):
        for what in cleanup(args.base):
            print("removed", what)
        return 0
    state = os.path.join(args.base, "bed.json")
    if args.cmd == "up":
        env = dict(item.split("=", 1) for item in args.env)
        bed = TestBed(args.n, args.base, env=env).up()
        with open(state, "w") as f:
            json.dump({"n": args.n, "env": env}, f)
        print(json.dumps(bed.describe(), indent=1))
        return 0
    try:
        with open(state) as f:
            saved = json.load(f)
    except OSError:
        print("testbed: no bed is up (run `up` first)", file=sys.stderr)
        return 1
    bed = TestBed(saved["n"], args.base, env=saved["env"])
    if args.cmd == "status":
        print(json.dumps(bed.describe(), indent=1))
    elif args.cmd == "exec":
        h = bed.host(args.host)
        os.execvpe(bed.nsenter(h)[0], bed.nsenter(h) + (args.command or ["/bin/bash"]), bed.exec_env(h))
    elif args.cmd == "kill":
        bed.kill_host(bed.host(args.host))
    elif args.cmd == "boot":
        bed.start_host(bed.host(args.host))
    return 0


if __name__ == "__main__":
    sys.exit(main())
