"""A real logan-ray broker process with every kind of listener, for the security tests.

PLAINTEXT, SSL (client certificates required), SASL_SSL and SASL_PLAINTEXT, each on
its own free port, configured with a Kafka-style properties file; started with
``logan-ray start --foreground`` and stopped with SIGTERM, like an operator would.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

CLI = [sys.executable, "-m", "logan_ray.cli"]


def write_properties(path: str, pki, extra: dict[str, str] | None = None) -> str:
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki.server,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": pki.ca,
        "listener.name.ssl.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        **(extra or {}),
    }
    with open(path, "w") as f:
        f.write("# written by tests/security/secure_broker.py\n")
        for k, v in settings.items():
            f.write(f"{k}={v}\n")
    return path


class SecureBroker:
    def __init__(self, data_dir: str, properties: str, http: str = "off") -> None:
        self.data_dir, self.properties, self.http = data_dir, properties, http
        self.proc: subprocess.Popen | None = None
        self.listeners: dict[str, str] = {}
        self.http_url: str | None = None  # the HTTP API's base URL when ``http`` is not "off"

    def start(self) -> "SecureBroker":
        self.proc = subprocess.Popen([*CLI, "--data-dir", self.data_dir, "start", "--foreground", "--http", self.http,
                                      "--config-file", self.properties],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 180
        lines = []
        kafka = None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline().decode()
            lines.append(line)
            m = re.match(r"\s+listener (\w+): (\S+)", line)
            if m:
                self.listeners[m.group(1)] = m.group(2)
            m = re.match(r"http:\s+(\S+?)/?\s", line)
            if m:
                self.http_url = m.group(1)
            m = re.match(r"kafka:\s+(\S+)", line)
            if m:
                kafka = m.group(1)
            if "is running" in line:
                if not self.listeners and kafka:  # one listener: the CLI prints it as "kafka:" alone
                    self.listeners[self._only_listener()] = kafka
                return self
            if not line and self.proc.poll() is not None:
                break
        self.proc.kill()
        raise AssertionError("broker did not start:\n" + "".join(lines))

    def _only_listener(self) -> str:
        """The name of the one listener of the properties file (``listeners=NAME://host:port``)."""
        with open(self.properties) as f:
            for line in f:
                key, _, value = line.strip().partition("=")
                if key.strip() == "listeners":
                    return value.strip().split("://", 1)[0]
        return "PLAINTEXT"

    def stop(self) -> str:
        if self.proc is None:
            return ""
        self.proc.send_signal(signal.SIGTERM)
        try:
            out = self.proc.communicate(timeout=120)[0].decode()
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out = self.proc.communicate()[0].decode()
        self.proc = None
        return out

    def cli(self, *args: str, stdin: bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run([*CLI, "--data-dir", self.data_dir, *args], input=stdin, capture_output=True,
                              timeout=timeout)

    def add_user(self, name: str, password: str) -> None:
        r = self.cli("users", "set", name, "--password-stdin", stdin=password.encode() + b"\n")
        assert r.returncode == 0, r.stderr.decode()

    def log(self) -> str:
        path = os.path.join(self.data_dir, "broker.log")
        return open(path).read() if os.path.exists(path) else ""
