"""Start a logan-ray broker, run librdkafka's integration tests against it, stop it.

    python compat/run_librdkafka.py [fast|full|todo|NNNN[:FILTER],NNNN...] [--report-dir DIR] [--no-auto-create]

The broker (embedded Ray, router, group coordinator, one Kafka gateway on a free
loopback port, data in a temporary directory) lives only as long as this
process, so nothing is left behind even when a test hangs or fails. The tests
themselves are built and run by compat/librdkafka.sh; the exit status is the
test-runner's (0 = every selected test passed).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # every Ray listener on 127.0.0.1

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "librdkafka.sh")


def build() -> None:
    """Build librdkafka and its test-runner once (cached outside the clone)."""
    subprocess.run(["bash", SCRIPT, "build"], check=True)


def run_against(bootstrap: str, tests: str, report_dir: str | None = None, timeout: float | None = None) -> int:
    """Run the selected tests against ``bootstrap``; 0 when every one of them passed."""
    env = dict(os.environ, PYTHON=sys.executable)  # compat/kafka's kafka-topics.sh: this Python has confluent-kafka
    if report_dir:
        env["REPORT_DIR"] = os.path.abspath(report_dir)
    return subprocess.run(["bash", SCRIPT, "run", bootstrap, tests], env=env, timeout=timeout).returncode


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("tests", nargs="?", default="fast", help="fast (default), full, todo, or a comma list of test numbers (NNNN:FILTER: only sub-tests whose name contains FILTER)")
    p.add_argument("--report-dir", help="keep librdkafka's JSON test reports here")
    p.add_argument("--num-partitions", type=int, default=4,
                   help="partitions of auto-created topics (librdkafka's test scenarios use 4)")
    p.add_argument("--no-auto-create", action="store_true",
                   help="broker with auto.create.topics.enable=false, tests in librdkafka's `noautocreate` scenario")
    args = p.parse_args(argv)
    if args.no_auto_create:  # the runner's scenario: tests that need auto-creation off run, the others skip
        os.environ["RUNNER_ARGS"] = f"{os.environ.get('RUNNER_ARGS', '')} -s noautocreate".strip()

    build()  # before the broker starts: a first build takes minutes and needs the CPU

    from logan_ray.broker import Broker, BrokerOptions
    from logan_ray.gateway import free_port

    with tempfile.TemporaryDirectory(prefix="logan-ray-librdkafka-") as data_dir:
        broker = Broker(BrokerOptions(data_dir=data_dir, port=free_port(), num_partitions=args.num_partitions,
                                      auto_create_topics=not args.no_auto_create))
        try:
            endpoints = broker.start()
            print(f"logan-ray broker on {endpoints['kafka']} (data in {data_dir})", flush=True)
            return run_against(endpoints["kafka"], args.tests, args.report_dir)
        finally:
            broker.stop()


if __name__ == "__main__":
    sys.exit(main())
