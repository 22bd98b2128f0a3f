"""Broker settings by Kafka's names: ``--config NAME=VALUE`` and ``--config-file server.properties``.

Operators who run Kafka already have a ``server.properties``; the settings logan-ray
understands are read from it under the same names, with Kafka's types and defaults,
and anything else is refused by name (a typo must not silently run an open broker).
Parsing is apart from use: :func:`parse_properties` reads the file format,
:func:`resolve` validates names and values into :class:`BrokerSettings`, which the
broker hands to the router (topic defaults), the gateways (listeners, limits,
security) and the authorizer.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from logan_ray.storage.config import BROKER_TOPIC_SYNONYMS as TOPIC_SYNONYMS
from logan_ray.storage.config import TopicConfig

INT_MAX = 2147483647
LONG_MAX = 9223372036854775807

#: Kafka's authorizer class names that turn logan-ray's ACL authorizer on.
AUTHORIZER_CLASSES = ("kafka.security.authorizer.AclAuthorizer",
                      "org.apache.kafka.metadata.authorizer.StandardAuthorizer", "logan_ray")


class BrokerConfigError(ValueError):
    """A broker setting is unknown or has a bad value; the message names it."""


def _bool(name: str, v: str) -> bool:
    low = v.strip().lower()
    if low not in ("true", "false"):
        raise BrokerConfigError(f"broker setting {name}={v!r}: expected true or false")
    return low == "true"


def _int_range(low: int, high: int) -> Callable[[str, str], int]:
    def parse(name: str, v: str) -> int:
        try:
            n = int(v.strip())
        except ValueError:
            raise BrokerConfigError(f"broker setting {name}={v!r}: expected a whole number") from None
        if not low <= n <= high:
            raise BrokerConfigError(f"broker setting {name}={v!r}: must be in [{low}, {high}]")
        return n
    return parse


def _string(name: str, v: str) -> str:
    return v.strip()


def _choice(*choices: str, upper: bool = False) -> Callable[[str, str], str]:
    def parse(name: str, v: str) -> str:
        s = v.strip().upper() if upper else v.strip().lower()
        if s not in choices:
            raise BrokerConfigError(f"broker setting {name}={v!r}: expected one of {', '.join(choices)}")
        return s
    return parse


def _pem_only(name: str, v: str) -> str:
    s = v.strip().upper()
    if s != "PEM":
        raise BrokerConfigError(f"broker setting {name}={v!r}: logan-ray reads PEM files only (set PEM)")
    return s


def _protocols(name: str, v: str) -> list[str]:
    items = [p.strip() for p in v.split(",") if p.strip()]
    bad = [p for p in items if p not in ("TLSv1.2", "TLSv1.3")]
    if bad or not items:
        raise BrokerConfigError(f"broker setting {name}={v!r}: only TLSv1.2 and TLSv1.3 are offered")
    return items


def _list(name: str, v: str) -> list[str]:
    return [p.strip() for p in v.split(",") if p.strip()]


def _mechanisms(name: str, v: str) -> list[str]:
    from logan_ray.security.sasl import MECHANISMS

    items = [p.strip().upper() for p in v.split(",") if p.strip()]
    bad = [m for m in items if m not in MECHANISMS]
    if bad:
        raise BrokerConfigError(f"broker setting {name}={v!r}: unsupported SASL mechanism(s) {', '.join(bad)} "
                                f"(logan-ray offers {', '.join(MECHANISMS)})")
    return items


def _authorizer(name: str, v: str) -> str:
    s = v.strip()
    if s and s not in AUTHORIZER_CLASSES:
        raise BrokerConfigError(f"broker setting {name}={v!r}: unknown authorizer (use one of "
                                f"{', '.join(AUTHORIZER_CLASSES)}, or empty for none)")
    return s


def _principals(name: str, v: str) -> list[str]:
    out = []
    for p in v.split(";"):
        p = p.strip()
        if not p:
            continue
        if ":" not in p:
            raise BrokerConfigError(f"broker setting {name}={v!r}: {p!r} is not TYPE:NAME (e.g. User:admin)")
        out.append(p)
    return out


def _mapping_rules(name: str, v: str) -> str:
    if v.strip() != "DEFAULT":
        raise BrokerConfigError(f"broker setting {name}={v!r}: only DEFAULT is supported")
    return "DEFAULT"


def _reject_log_dirs(name: str, v: str) -> str:
    dirs = [d for d in v.split(",") if d.strip()]
    if len(dirs) != 1:
        raise BrokerConfigError(f"broker setting {name}={v!r}: logan-ray keeps one data dir per broker")
    return dirs[0].strip()


class _Setting:
    __slots__ = ("parse", "default", "doc")

    def __init__(self, parse: Callable[[str, str], Any], default: str | None, doc: str) -> None:
        self.parse, self.default, self.doc = parse, default, doc


_DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"

#: Settings that may also be given per listener as ``listener.name.<listener>.<setting>``.
PER_LISTENER = ("ssl.keystore.location", "ssl.keystore.type", "ssl.key.password", "ssl.keystore.password",
                "ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.password", "ssl.client.auth",
                "ssl.enabled.protocols", "ssl.cipher.suites", "sasl.enabled.mechanisms",
                "connections.max.reauth.ms", "ssl.principal.mapping.rules", "ssl.endpoint.identification.algorithm")

_SETTINGS: dict[str, _Setting] = {
    # the broker
    "auto.create.topics.enable": _Setting(_bool, "true", "create a topic when a client first names it"),
    "num.partitions": _Setting(_int_range(1, INT_MAX), "1", "partitions of auto-created topics"),
    "default.replication.factor": _Setting(_int_range(1, 32767), "1",
                                           "replicas of topics created without a replication factor"),
    "replica.lag.time.max.ms": _Setting(_int_range(1, LONG_MAX), "30000",
                                        "a follower not caught up with its leader this long leaves the ISR"),
    "offsets.topic.replication.factor": _Setting(_int_range(1, 32767), "3",
                                                 "replicas of __consumer_offsets when the broker creates it "
                                                 "(at most the alive nodes)"),
    # broker sessions (KRaft's names; shorter defaults than Kafka's 2000/9000 for a failover <= 5 s)
    "broker.heartbeat.interval.ms": _Setting(_int_range(1, INT_MAX), "500",
                                             "how often each node's gateway heartbeats the router (the controller)"),
    "broker.session.timeout.ms": _Setting(_int_range(2, INT_MAX), "3000",
                                          "a node without a heartbeat this long is fenced and its leaders "
                                          "replaced; its gateway stops acknowledging produce earlier, after "
                                          "this minus broker.heartbeat.interval.ms"),
    "auto.leader.rebalance.enable": _Setting(_bool, "true", "move leadership back to preferred replicas when "
                                             "a node's leader imbalance is too high"),
    "leader.imbalance.check.interval.seconds": _Setting(_int_range(1, LONG_MAX), "300",
                                                        "how often the leader imbalance is checked"),
    "leader.imbalance.per.broker.percentage": _Setting(_int_range(0, INT_MAX), "10",
                                                       "share of a node's preferred partitions led elsewhere "
                                                       "above which they move back"),
    "log.dirs": _Setting(_reject_log_dirs, None, "the data dir (one; same as --data-dir)"),
    "log.dir": _Setting(_reject_log_dirs, None, "the data dir (one; same as --data-dir)"),
    # idempotent producers (Kafka's TransactionLogConfig; the expiration is also dynamic, cluster-wide)
    "producer.id.expiration.ms": _Setting(_int_range(1, INT_MAX), "86400000",
                                          "an idempotent producer idle this long is forgotten by each partition"),
    "producer.id.expiration.check.interval.ms": _Setting(_int_range(1, INT_MAX), "600000",
                                                         "how often partitions look for expired producers"),
    # logan-ray's own: partitions cost a process only while in use (docs/architecture.md, "Partition lifecycle")
    "partition.idle.ms": _Setting(_int_range(1, LONG_MAX), "300000",
                                  "a partition with no traffic this long closes its log and its process exits"),
    "max.active.partitions": _Setting(_int_range(-1, INT_MAX), "-1",
                                      "active partitions per node before the least recently used hibernates "
                                      "(-1: half the node's Ray memory at 64 MiB each, at least 64)"),
    # socket server
    "listeners": _Setting(_string, "PLAINTEXT://127.0.0.1:9092", "NAME://HOST:PORT,... the gateways listen on"),
    "advertised.listeners": _Setting(_string, None, "NAME://HOST:PORT,... told to clients (default: listeners)"),
    "listener.security.protocol.map": _Setting(_string, _DEFAULT_PROTOCOL_MAP, "listener name -> security protocol"),
    "socket.request.max.bytes": _Setting(_int_range(1, INT_MAX), str(100 * 1024 * 1024), "largest request"),
    "queued.max.request.bytes": _Setting(_int_range(-1, LONG_MAX), str(128 << 20), "request bytes in flight"),
    "max.connections": _Setting(_int_range(0, INT_MAX), str(INT_MAX), "connections per gateway"),
    "max.connections.per.ip": _Setting(_int_range(0, INT_MAX), str(INT_MAX), "connections per client address"),
    "max.connections.per.ip.overrides": _Setting(_string, "", "host:count,... exceptions to the above"),
    "connections.max.reauth.ms": _Setting(_int_range(0, LONG_MAX), "0", "SASL session lifetime (KIP-368)"),
    "connections.max.idle.ms": _Setting(_int_range(-1, LONG_MAX), "600000",
                                        "a connection with no request in flight and no traffic this long is "
                                        "closed (-1: never)"),
    # logan-ray's own pre-authentication bounds (docs/security.md, "Before login")
    "connections.max.unauthenticated.ms": _Setting(_int_range(-1, LONG_MAX), "10000",
                                                   "a SASL listener's connection not logged in this long after "
                                                   "it was accepted is closed (-1: never)"),
    "max.failed.authentications.per.ip": _Setting(_int_range(-1, INT_MAX), "100",
                                                  "failed logins from one address within the window below, after "
                                                  "which its logins fail at once (-1: no limit)"),
    "failed.authentications.per.ip.window.ms": _Setting(_int_range(1, LONG_MAX), "60000",
                                                        "window of max.failed.authentications.per.ip"),
    # client quotas (docs/security.md, "Quotas"): the windows rates are measured over
    "quota.window.num": _Setting(_int_range(1, INT_MAX), "11", "samples a client's byte rate is measured over"),
    "quota.window.size.seconds": _Setting(_int_range(1, INT_MAX), "1", "length of each sample"),
    # TLS
    "ssl.keystore.type": _Setting(_pem_only, "PEM", "PEM: ssl.keystore.location holds key and certificate chain"),
    "ssl.keystore.location": _Setting(_string, None, "PEM file with the private key and certificate chain"),
    "ssl.keystore.password": _Setting(_string, None, "accepted for Kafka compatibility; unused with PEM"),
    "ssl.key.password": _Setting(_string, None, "password of an encrypted private key"),
    "ssl.truststore.type": _Setting(_pem_only, "PEM", "PEM"),
    "ssl.truststore.location": _Setting(_string, None, "PEM file of CA certificates for client certificates"),
    "ssl.truststore.password": _Setting(_string, None, "accepted for Kafka compatibility; unused with PEM"),
    "ssl.client.auth": _Setting(_choice("required", "requested", "none"), "none", "client certificates"),
    "ssl.enabled.protocols": _Setting(_protocols, "TLSv1.2,TLSv1.3", "TLS versions offered"),
    "ssl.protocol": _Setting(_choice("tls", "tlsv1.2", "tlsv1.3"), "TLSv1.3", "accepted; see ssl.enabled.protocols"),
    "ssl.cipher.suites": _Setting(_list, "", "OpenSSL cipher list for TLS 1.2 (default: OpenSSL's)"),
    "ssl.endpoint.identification.algorithm": _Setting(_string, "https", "check another broker's host name in its "
                                                                        "certificate (empty: do not)"),
    "ssl.principal.mapping.rules": _Setting(_mapping_rules, "DEFAULT", "principal from the certificate subject"),
    # SASL
    "sasl.enabled.mechanisms": _Setting(_mechanisms, "SCRAM-SHA-256,SCRAM-SHA-512",
                                        "PLAIN, SCRAM-SHA-256/512, OAUTHBEARER"),
    "sasl.server.max.receive.size": _Setting(_int_range(1, INT_MAX), "524288", "largest frame before login"),
    # SASL/OAUTHBEARER token validation (KIP-768; security/oauthbearer.py)
    "sasl.oauthbearer.jwks.endpoint.url": _Setting(_string, None, "the OAuth provider's JWKS: http(s):// or file: "
                                                                  "URL (required with OAUTHBEARER)"),
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": _Setting(_int_range(1, LONG_MAX), "3600000",
                                                          "how often an http(s) JWKS is fetched again"),
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": _Setting(_int_range(0, LONG_MAX), "100",
                                                                "least wait between JWKS fetches for unknown kids"),
    "sasl.oauthbearer.expected.issuer": _Setting(_string, None, "a token's iss must be this (when set)"),
    "sasl.oauthbearer.expected.audience": _Setting(_list, None, "a token's aud must name one of these (when set)"),
    "sasl.oauthbearer.sub.claim.name": _Setting(_string, "sub", "the claim naming the principal (User:<claim>)"),
    "sasl.oauthbearer.scope.claim.name": _Setting(_string, "scope", "the claim holding the token's scopes"),
    "sasl.oauthbearer.clock.skew.seconds": _Setting(_int_range(0, INT_MAX), "30",
                                                    "tolerated clock difference for exp, nbf and iat"),
    # how brokers reach each other (security/inter_broker.py)
    "inter.broker.listener.name": _Setting(_string, None, "the listener brokers replicate over"),
    "security.inter.broker.protocol": _Setting(_choice("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL", upper=True),
                                               "PLAINTEXT", "the inter-broker listener by its security protocol"),
    "sasl.mechanism.inter.broker.protocol": _Setting(_string, "GSSAPI", "accepted; brokers log in to each other "
                                                                        "with LOGAN-RAY-BROKER on any listener"),
    # authorization
    "authorizer.class.name": _Setting(_authorizer, "", "an ACL authorizer when set"),
    "super.users": _Setting(_principals, "", "User:a;User:b may do everything"),
    "allow.everyone.if.no.acl.found": _Setting(_bool, "false", "resources without ACLs are open to all"),
}

#: DescribeConfigs' config_type ids of Kafka's ConfigDef types (DescribeConfigsResponse.ConfigType).
UNKNOWN, BOOLEAN, STRING, INT, LONG, LIST, PASSWORD = 0, 1, 2, 3, 5, 7, 9
#: DescribeConfigs' config sources of a static broker setting.
STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 5
#: Kafka's ConfigDef type of each setting above. ``super.users`` and ``allow.everyone.if.no.acl.found``
#: are the authorizer's own, not KafkaConfig's: Kafka cannot type them, so it reports them (only when
#: given) as sensitive, without a value (KafkaConfig.maybeSensitive).
KAFKA_TYPES: dict[str, int | None] = {
    "auto.create.topics.enable": BOOLEAN, "num.partitions": INT, "default.replication.factor": INT,
    "replica.lag.time.max.ms": LONG, "offsets.topic.replication.factor": INT, "broker.heartbeat.interval.ms": INT, "broker.session.timeout.ms": INT,
    "auto.leader.rebalance.enable": BOOLEAN, "leader.imbalance.check.interval.seconds": LONG,
    "leader.imbalance.per.broker.percentage": INT, "log.dirs": STRING, "log.dir": STRING,
    "listeners": STRING, "advertised.listeners": STRING, "listener.security.protocol.map": STRING,
    "socket.request.max.bytes": INT, "queued.max.request.bytes": LONG, "max.connections": INT,
    "max.connections.per.ip": INT, "max.connections.per.ip.overrides": STRING, "connections.max.reauth.ms": LONG,
    "connections.max.idle.ms": LONG, "connections.max.unauthenticated.ms": LONG,  # the second is logan-ray's own
    "max.failed.authentications.per.ip": INT, "failed.authentications.per.ip.window.ms": LONG,  # logan-ray's own
    "quota.window.num": INT, "quota.window.size.seconds": INT,
    "ssl.keystore.type": STRING, "ssl.keystore.location": STRING, "ssl.keystore.password": PASSWORD,
    "ssl.key.password": PASSWORD, "ssl.truststore.type": STRING, "ssl.truststore.location": STRING,
    "ssl.truststore.password": PASSWORD, "ssl.client.auth": STRING, "ssl.enabled.protocols": LIST,
    "ssl.protocol": STRING, "ssl.cipher.suites": LIST, "ssl.endpoint.identification.algorithm": STRING,
    "ssl.principal.mapping.rules": STRING, "sasl.enabled.mechanisms": LIST, "sasl.server.max.receive.size": INT,
    "inter.broker.listener.name": STRING, "security.inter.broker.protocol": STRING,
    "sasl.mechanism.inter.broker.protocol": STRING,
    "sasl.oauthbearer.jwks.endpoint.url": STRING, "sasl.oauthbearer.jwks.endpoint.refresh.ms": LONG,
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": LONG, "sasl.oauthbearer.expected.issuer": STRING,
    "sasl.oauthbearer.expected.audience": LIST, "sasl.oauthbearer.sub.claim.name": STRING,
    "sasl.oauthbearer.scope.claim.name": STRING, "sasl.oauthbearer.clock.skew.seconds": INT,
    "authorizer.class.name": STRING, "super.users": None, "allow.everyone.if.no.acl.found": None,
    "producer.id.expiration.ms": INT, "producer.id.expiration.check.interval.ms": INT,
    "partition.idle.ms": LONG, "max.active.partitions": INT,  # logan-ray's own (partition hibernation)
}

#: Coarser units Kafka also accepts for some of them (used only when the finer one is absent).
_COARSE = {"log.retention.minutes": ("log.retention.ms", 60_000), "log.retention.hours": ("log.retention.ms", 3_600_000),
           "log.roll.hours": ("log.roll.ms", 3_600_000)}
_LISTENER_PREFIX = re.compile(r"listener\.name\.([a-z0-9_]+)\.(.+)")  # fullmatch, never "$"


def known_names() -> list[str]:
    return sorted([*_SETTINGS, *TOPIC_SYNONYMS, *_COARSE])


@dataclass
class BrokerSettings:
    """Validated broker settings; ``values`` has every given or defaulted name -> parsed value."""

    values: dict[str, Any]
    given: dict[str, str]
    topic_defaults: dict[str, str] = field(default_factory=dict)
    per_listener: dict[str, dict[str, Any]] = field(default_factory=dict)

    def get(self, name: str) -> Any:
        return self.values.get(name)

    def for_listener(self, listener: str, name: str) -> Any:
        """``listener.name.<listener>.<name>`` if given, else the broker-wide ``name``."""
        own = self.per_listener.get(listener.lower(), {})
        return own[name] if name in own else self.values.get(name)

    def listener_view(self, listener: str) -> dict[str, Any]:
        """Every per-listener setting as it applies to ``listener`` (what a gateway needs)."""
        return {name: self.for_listener(listener, name) for name in PER_LISTENER}


def resolve(given: Mapping[str, str]) -> BrokerSettings:
    """Validate Kafka-named settings; unknown names are a :class:`BrokerConfigError` naming all of them."""
    unknown = []
    for name in given:
        m = _LISTENER_PREFIX.fullmatch(name)
        if m:
            if m.group(2) not in PER_LISTENER:
                unknown.append(name)
        elif name not in _SETTINGS and name not in TOPIC_SYNONYMS and name not in _COARSE:
            unknown.append(name)
    if unknown:
        raise BrokerConfigError(f"unknown broker setting{'s' if len(unknown) > 1 else ''} "
                                f"{', '.join(sorted(unknown))} (see docs/security.md for the names logan-ray knows)")
    values: dict[str, Any] = {}
    per_listener: dict[str, dict[str, Any]] = {}
    for name, spec in _SETTINGS.items():
        raw = given.get(name, spec.default)
        values[name] = None if raw is None else spec.parse(name, str(raw))
    for name, raw in given.items():
        m = _LISTENER_PREFIX.fullmatch(name)
        if m:
            per_listener.setdefault(m.group(1), {})[m.group(2)] = _SETTINGS[m.group(2)].parse(name, str(raw))
    topic: dict[str, str] = {}
    for coarse, (fine, factor) in _COARSE.items():
        if coarse in given and fine not in given:
            try:
                topic[TOPIC_SYNONYMS[fine]] = str(int(given[coarse]) * factor)
            except ValueError:
                raise BrokerConfigError(f"broker setting {coarse}={given[coarse]!r}: expected a whole number") from None
    for name, topic_name in TOPIC_SYNONYMS.items():
        if name in given:
            topic[topic_name] = str(given[name]).strip()
    try:
        TopicConfig.from_dict(topic)
    except Exception as e:  # name the broker setting, not the topic synonym
        raise BrokerConfigError(f"broker topic default: {e}") from None
    return BrokerSettings(values, dict(given), topic, per_listener)


def parse_properties(text: str, source: str = "properties") -> dict[str, str]:
    """Java ``.properties`` format as Kafka reads it: ``#``/``!`` comments, ``=``, ``:`` or blank as
    separator, a trailing backslash continues the line, backslash escapes."""
    out: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip()
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip()
            i += 1
        if _continues(line):
            line = line[:-1]
        key, value = _split(line)
        if not key:
            raise BrokerConfigError(f"{source}: line {i} has no setting name: {line!r}")
        out[key] = value
    return out


def _continues(line: str) -> bool:
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(s: str) -> str:
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            nxt = s[i + 1]
            if nxt == "u" and i + 6 <= len(s):
                try:
                    out.append(chr(int(s[i + 2:i + 6], 16)))
                    i += 6
                    continue
                except ValueError:
                    pass
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=: \t\f":
            break
        i += 1
    key = line[:i]
    rest = line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":") and (i == len(line) or line[i] not in "=:"):
        rest = rest[1:].lstrip(" \t\f")
    elif i < len(line) and line[i] in "=:":
        rest = line[i + 1:].lstrip(" \t\f")
    return _unescape(key), _unescape(rest)


def read_properties_file(path: str, option: str = "--config-file") -> dict[str, str]:
    try:
        with open(path, encoding="utf-8") as f:
            return parse_properties(f.read(), path)
    except OSError as e:
        raise BrokerConfigError(f"cannot read {option} {path}: {e.strerror or e}") from None


def parse_assignments(items: Iterable[str]) -> dict[str, str]:
    """``--config NAME=VALUE`` items (later ones win)."""
    out: dict[str, str] = {}
    for item in items:
        if "=" not in item:
            raise BrokerConfigError(f"--config expects NAME=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _shown(kafka_type: int | None, raw: str | None, parsed: Any) -> str | None:
    if raw is None:
        return None
    if kafka_type == LIST:
        return ",".join(parsed)
    if kafka_type == BOOLEAN:
        return str(parsed).lower()
    if kafka_type in (INT, LONG):
        return str(parsed)
    return raw.strip()


def describe_entries(settings: BrokerSettings, skip: Iterable[str] = (),
                     given: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """DescribeConfigs entries of the broker resource for the settings above, as Kafka's ConfigHelper
    makes them: every KafkaConfig setting (the authorizer's own only when given), source
    STATIC_BROKER_CONFIG when given and DEFAULT_CONFIG otherwise, and passwords (and settings Kafka
    cannot type) sensitive with a null value; ``listener.name.<l>.<setting>`` overrides as given.
    ``given`` adds settings the broker took from its own flags (--host/--port). All are read-only:
    broker settings are fixed at start."""
    given = {**settings.given, **(given or {})}
    skipped = set(skip)
    out = []

    def entry(name: str, kafka_type: int | None, raw: str | None, parsed: Any, doc: str) -> dict[str, Any]:
        sensitive = kafka_type is None or kafka_type == PASSWORD
        return {"name": name, "value": None if sensitive else _shown(kafka_type, raw, parsed),
                "read_only": True, "is_default": name not in given,
                "config_source": STATIC_BROKER_CONFIG if name in given else DEFAULT_CONFIG,
                "is_sensitive": sensitive, "synonyms": [], "config_type": kafka_type or UNKNOWN,
                "documentation": doc}

    for name, spec in _SETTINGS.items():
        kafka_type = KAFKA_TYPES.get(name)
        if name in skipped or (kafka_type is None and name not in given):
            continue
        raw = given.get(name, spec.default)
        parsed = None if raw is None else spec.parse(name, raw)
        out.append(entry(name, kafka_type, raw, parsed, spec.doc))
    for name in sorted(given):
        m = _LISTENER_PREFIX.fullmatch(name)
        if m and name not in skipped:
            base = m.group(2)
            parsed = settings.per_listener.get(m.group(1), {}).get(base)
            out.append(entry(name, KAFKA_TYPES.get(base), given[name], parsed, _SETTINGS[base].doc))
    return out
