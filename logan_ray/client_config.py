"""Security settings of the CLI's own Kafka connection (``--bootstrap-server``), as Kafka's tools take them.

Kafka's admin tools read a client properties file (``kafka-acls.sh --command-config
admin.properties``) with Java client names; the CLI reads the same file and gives
librdkafka its equivalents, so an operator's existing file works unchanged. The
flags ``--security-protocol``, ``--sasl-mechanism`` and ``--sasl-username`` (password
in ``$LOGAN_RAY_SASL_PASSWORD``, never on the command line) cover the common case
without a file. Pure: parsing only, no connection.
"""
from __future__ import annotations

import re
from typing import Mapping

from .broker_config import read_properties_file

#: where the CLI reads the SASL password given with --sasl-username
PASSWORD_ENV = "LOGAN_RAY_SASL_PASSWORD"

#: Java-only names with no effect on PEM files
_IGNORED = ("ssl.truststore.password", "ssl.keystore.password", "ssl.protocol")
_JAAS_FIELD = re.compile(r'\b(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')


class ClientConfigError(ValueError):
    """A client setting the CLI cannot use; the message names it."""


def _jaas(value: str) -> dict[str, str]:
    """username/password of a PlainLoginModule or ScramLoginModule ``sasl.jaas.config`` line."""
    if "PlainLoginModule" not in value and "ScramLoginModule" not in value:
        raise ClientConfigError("sasl.jaas.config: only PlainLoginModule and ScramLoginModule (username/password) "
                                "are supported")
    fields = {k: re.sub(r"\\(.)", r"\1", v) for k, v in _JAAS_FIELD.findall(value)}
    return {f"sasl.{k}": v for k, v in fields.items()}


def from_java_properties(props: Mapping[str, str]) -> dict[str, str]:
    """librdkafka settings for Kafka (Java) client properties; librdkafka's own names pass through."""
    out: dict[str, str] = {}
    for name, value in props.items():
        if name in _IGNORED:
            continue
        if name in ("ssl.truststore.type", "ssl.keystore.type"):
            if value.strip().upper() != "PEM":
                raise ClientConfigError(f"{name}={value}: the CLI reads PEM files only (convert the store to PEM)")
        elif name == "sasl.jaas.config":
            out.update(_jaas(value))
        elif name == "ssl.truststore.location":
            out["ssl.ca.location"] = value
        elif name == "ssl.keystore.location":  # a PEM keystore holds the key and the certificate chain
            out["ssl.certificate.location"] = value
            out["ssl.key.location"] = value
        elif name == "ssl.endpoint.identification.algorithm":
            out[name] = value.strip() or "none"
        else:
            out[name] = value  # spelled the same in both (security.protocol, sasl.mechanism...) or librdkafka's
    return out


def client_conf(command_config: str | None = None, security_protocol: str | None = None,
                sasl_mechanism: str | None = None, sasl_username: str | None = None,
                env: Mapping[str, str] | None = None) -> dict[str, str]:
    """librdkafka settings from ``--command-config`` and the flags (the flags win)."""
    out = from_java_properties(read_properties_file(command_config, "--command-config")) if command_config else {}
    if security_protocol:
        out["security.protocol"] = security_protocol
    if sasl_mechanism:
        out["sasl.mechanism"] = sasl_mechanism
    if sasl_username:
        password = (env or {}).get(PASSWORD_ENV)
        if not password:
            raise ClientConfigError(f"--sasl-username {sasl_username}: put the password in ${PASSWORD_ENV}")
        out["sasl.username"], out["sasl.password"] = sasl_username, password
        if "security.protocol" not in out:
            out["security.protocol"] = "SASL_PLAINTEXT"
        out.setdefault("sasl.mechanism", "SCRAM-SHA-512")
    return out
