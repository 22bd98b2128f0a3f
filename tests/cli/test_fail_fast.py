"""Without a reachable broker every command says so in one line and exits 1 within seconds.

Run as a new user would: ``env -i`` with only PATH and a new HOME, so nothing
from the test session (Ray variables, a running runtime) helps or hides a hang.
As many commands run at once as there are cores, to keep this quick; each is timed from its own start.
"""
from __future__ import annotations

import concurrent.futures
import json
import os
import socket
import subprocess
import sys
import time

from tests.cli.test_readme import minimal_env

LIMIT_S = 10.0


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the socket is


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def run_all(env: dict[str, str], commands: dict[str, list[str]]) -> dict[str, tuple[int, str, str, float]]:
    """{name: (exit code, stdout, stderr, seconds from its own start)} for CLI invocations, as many at once as
    there are cores: each is timed as a user's lone command would be. All eight at once on two cores timed
    the queue for the CPU instead (11.6 s for a command that alone takes about 2 s, in a full suite run)."""
    def one(argv: list[str]) -> tuple[int, str, str, float]:
        started = time.monotonic()
        p = subprocess.run([sys.executable, "-m", "logan_ray.cli", *argv], env=env, stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=60)
        return p.returncode, p.stdout.decode(), p.stderr.decode(), time.monotonic() - started

    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        futures = {name: pool.submit(one, argv) for name, argv in commands.items()}
        return {name: f.result() for name, f in futures.items()}


def assert_one_line_failure(result: tuple[int, str, str, float], *needles: str) -> None:
    code, stdout, stderr, seconds = result
    assert code == 1, result
    assert seconds < LIMIT_S, result
    assert stdout == "", result
    assert stderr.count("\n") == 1 and stderr.startswith("logan-ray: error: "), result  # no Ray log lines
    for needle in needles:
        assert needle in stderr, result


def test_every_command_without_a_broker_fails_fast_with_one_line(tmp_path):
    env = minimal_env(str(tmp_path))
    results = run_all(env, {
        "topic list": ["topic", "list"],
        "produce": ["produce", "events"],
        "consume": ["consume", "events", "--from-beginning"],
        "status": ["status"],
        "groups": ["groups", "list"],
        "stop": ["stop"],
        "data dir": ["topic", "list", "--data-dir", str(tmp_path / "elsewhere")],
    })
    home = str(tmp_path)
    for name, result in results.items():
        if name == "data dir":
            assert_one_line_failure(result, f"no logan-ray broker found at {tmp_path / 'elsewhere' / 'broker.json'}",
                                    "./scripts/start.sh")
        else:
            assert_one_line_failure(result, "no logan-ray broker found at "
                                    f"{home}/.local/state/logan-ray/broker.json or {home}/.logan-ray/broker.json",
                                    "start one with ./scripts/start.sh or `logan-ray start`")


def test_stale_runtime_files_are_reported_and_ignored(tmp_path):
    env = minimal_env(str(tmp_path))
    user_file = tmp_path / ".local" / "state" / "logan-ray" / "broker.json"
    user_file.parent.mkdir(parents=True)
    pid = dead_pid()
    user_file.write_text(json.dumps({"pid": pid, "data_dir": str(tmp_path / "d"), "ray_address": "127.0.0.1:1"}))
    # LOGAN_RAY_DATA_DIR points elsewhere: only that data dir is looked at, the user file is not trusted.
    data_dir = tmp_path / "env-data"
    data_dir.mkdir()
    (data_dir / "broker.json").write_text(json.dumps({"pid": pid, "ray_address": "127.0.0.1:1"}))
    results = run_all(env, {"user": ["topic", "list"]})
    results.update(run_all({**env, "LOGAN_RAY_DATA_DIR": str(data_dir)}, {"env": ["status"]}))
    assert_one_line_failure(results["user"], f"ignored stale {user_file} (pid {pid} is gone)")
    assert_one_line_failure(results["env"], f"no logan-ray broker found at {data_dir / 'broker.json'}; "
                                            f"ignored stale {data_dir / 'broker.json'} (pid {pid} is gone)")


def test_unreachable_addresses_fail_fast(tmp_path):
    env = minimal_env(str(tmp_path))
    ray_port, kafka_port = closed_port(), closed_port()
    # A live pid (this test) whose runtime file names a Ray address where nothing listens.
    data_dir = tmp_path / "d"
    data_dir.mkdir()
    (data_dir / "broker.json").write_text(json.dumps({"pid": os.getpid(), "ray_address": f"127.0.0.1:{ray_port}"}))
    results = run_all(env, {
        "runtime file": ["--data-dir", str(data_dir), "topic", "list"],
        "address": ["groups", "list", "--address", f"127.0.0.1:{ray_port}"],
        **{f"kafka {cmd[0]}": [*cmd, "--bootstrap-server", f"127.0.0.1:{kafka_port}"] for cmd in
           (["topic", "list"], ["produce", "events"], ["consume", "events"], ["groups", "list"], ["status"])},
    })
    assert_one_line_failure(results["runtime file"], f"cannot reach Ray at 127.0.0.1:{ray_port}")
    assert_one_line_failure(results["address"], f"cannot reach Ray at 127.0.0.1:{ray_port}")
    for name, result in results.items():
        if name.startswith("kafka"):
            assert_one_line_failure(result, f"no Kafka broker answered at 127.0.0.1:{kafka_port}",
                                    "check --bootstrap-server")


def test_leadership_commands_fail_fast_with_one_line(tmp_path):
    """``node drain|undrain`` and ``leaders elect``: no broker, the Kafka protocol asked for (they work through
    Ray only), or a partition without its topic: one line, exit 1, within seconds."""
    env = minimal_env(str(tmp_path))
    ray_port = closed_port()
    results = run_all(env, {
        "drain": ["node", "drain", "0"],
        "undrain": ["node", "undrain", "0"],
        "elect": ["leaders", "elect"],
        "drain address": ["node", "drain", "0", "--address", f"127.0.0.1:{ray_port}"],
        "elect address": ["leaders", "elect", "--unclean", "--address", f"127.0.0.1:{ray_port}"],
        "drain kafka": ["node", "drain", "0", "--bootstrap-server", "127.0.0.1:9"],
        "elect kafka": ["leaders", "elect", "--bootstrap-server", "127.0.0.1:9"],
        "elect partition": ["leaders", "elect", "--partition", "0"],
    })
    home = str(tmp_path)
    for name in ("drain", "undrain", "elect"):
        assert_one_line_failure(results[name], f"no logan-ray broker found at {home}/.local/state/logan-ray/broker.json",
                                "start one with ./scripts/start.sh or `logan-ray start`")
    for name in ("drain address", "elect address"):
        assert_one_line_failure(results[name], f"cannot reach Ray at 127.0.0.1:{ray_port}")
    assert_one_line_failure(results["drain kafka"], "node drain works through Ray, not the Kafka protocol",
                            "drop --bootstrap-server")
    assert_one_line_failure(results["elect kafka"], "leaders elect works through Ray, not the Kafka protocol")
    assert_one_line_failure(results["elect partition"], "--partition needs --topic")
