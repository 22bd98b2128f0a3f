"""The shipped deployment files start a broker clients must log in to: SASL_SSL, ACLs, a super user.

Each file's broker start command is parsed by logan-ray's own command-line parser and
resolved as ``logan-ray start`` resolves it (Kafka-named settings, listener security
with real certificate files standing in for the operator's, the HTTP API's exposure
check), without starting anything; the admin password is set from the operator's file,
and the secrets reach every node. (tests/multihost/test_ray_up.py runs cluster.yaml with
``ray up`` on a PLAINTEXT test bed: it swaps the listener settings, see its launcher_copy.)
"""
from __future__ import annotations

import os
import re
import shlex
import sys

import pytest
import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "security"))
from certs import make_pki  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FILES = ["cluster.yaml", "deploy/aws.yaml", "deploy/kuberay.yaml"]


def load(name: str) -> dict:
    with open(os.path.join(REPO, name)) as f:
        return yaml.safe_load(f)


def head_commands(name: str) -> list[str]:
    """The shell commands the head runs after Ray is up (one string per command)."""
    config = load(name)
    if "head_start_ray_commands" in config:
        return config["head_start_ray_commands"]
    head = config["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    script = head["lifecycle"]["postStart"]["exec"]["command"][-1]
    return [c.strip() for c in re.split(r";|&&", script)]


def logan_ray_command(commands: list[str], sub: str) -> list[str]:
    """The argv after ``logan-ray`` of the one command running ``logan-ray <sub>``."""
    found = [c for c in commands if re.search(rf"\blogan-ray {sub}\b", c) and "stop" not in c.split()[:3]]
    assert len(found) == 1, found
    words = shlex.split(found[0].split("<")[0])
    return words[words.index("logan-ray") + 1:]


def secrets_dir(name: str) -> str:
    """Where the file's broker start command reads the broker's key (``$HOME`` as the shell leaves it)."""
    argv = logan_ray_command(head_commands(name), "start")
    keystore = [a.split("=", 1)[1] for a in argv if a.startswith("ssl.keystore.location=")]
    assert len(keystore) == 1, argv
    return os.path.dirname(keystore[0])


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(str(tmp_path_factory.mktemp("deploy-pki")))


def resolve_start(name: str, pki) -> tuple:
    """The broker options and gateway security the file's start command gives, with the test CA's files."""
    from logan_ray.broker import BrokerOptions
    from logan_ray.broker_cli import _broker_config
    from logan_ray.cli import build_parser
    from logan_ray.security.config import gateway_security

    argv = logan_ray_command(head_commands(name), "start")
    files = {"broker.pem": pki.server, "ca.pem": pki.ca}
    argv = [re.sub(r"=\S*/(broker\.pem|ca\.pem)$", lambda m: "=" + files[m.group(1)], a) for a in argv]
    args = build_parser().parse_args(argv)
    assert args.cmd == "start" and args.address == "auto"
    opts = BrokerOptions(config=_broker_config(args), http=args.http, http_insecure=args.http_insecure)
    if args.host or args.port:
        opts.host, opts.port = args.host or opts.host, args.port or opts.port
    settings = opts.resolve()
    return opts, settings, gateway_security(settings)


@pytest.mark.parametrize("name", FILES)
def test_every_listener_of_a_shipped_file_is_sasl_ssl_with_acls_and_a_super_user(name, pki):
    from logan_ray.http.security import http_security

    opts, settings, security = resolve_start(name, pki)
    assert [(ln["protocol"], ln["port"]) for ln in security["listeners"]] == [("SASL_SSL", 9092)]
    assert security["authorizer"] == {"enabled": True, "super_users": ["User:admin"], "allow_if_no_acl": False}
    view = security["views"]["SASL_SSL"]
    assert set(view["sasl.enabled.mechanisms"]) >= {"SCRAM-SHA-256", "SCRAM-SHA-512"}
    assert view["ssl.truststore.location"] == pki.ca  # followers check their leaders' certificates
    http = http_security(security)
    assert http.authenticate and http.authorizer and http.tls  # the HTTP API: Basic login, ACLs, HTTPS
    assert opts.check_http_exposure(opts.http_settings()) is None


@pytest.mark.parametrize("name", FILES)
def test_the_super_users_password_comes_from_the_operators_file_next_to_the_certificates(name):
    commands = head_commands(name)
    argv = logan_ray_command(commands, "users set")
    assert argv[:3] == ["users", "set", "admin"] and "--password-stdin" in argv
    command = next(c for c in commands if "users set" in c)
    assert re.search(r"<\s*(\S+)$", command).group(1).replace("~", "$HOME") == secrets_dir(name) + "/admin.password"
    start = next(i for i, c in enumerate(commands) if re.search(r"\blogan-ray start\b", c))
    assert commands.index(command) > start  # the broker must be up to take it


@pytest.mark.parametrize("name", FILES)
def test_the_secrets_reach_every_node(name):
    config = load(name)
    where = secrets_dir(name)
    if "file_mounts" in config:  # launcher: copied to every host, head and workers
        assert config["file_mounts"]["~/logan-ray-secrets"] == "~/logan-ray-secrets"
        assert where == "$HOME/logan-ray-secrets"
        return
    spec = config["spec"]
    pods = [spec["headGroupSpec"]["template"]["spec"]] + [g["template"]["spec"] for g in spec["workerGroupSpecs"]]
    for pod in pods:
        secret = [v for v in pod["volumes"] if "secret" in v]
        assert len(secret) == 1 and secret[0]["secret"]["secretName"] == "logan-ray-broker-secrets"
        mounts = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == secret[0]["name"]]
        assert mounts == [{"name": secret[0]["name"], "mountPath": where, "readOnly": True}]
