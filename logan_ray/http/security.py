"""What the Kafka gateway's security means for the HTTP API: the same users, the same ACLs, the same certificate.

Derived from the gateways' listener settings (logan_ray.security.config.gateway_security),
so there is nothing separate to configure and nothing to forget:

- authentication is on as soon as any Kafka listener authenticates its clients
  (``SASL_*``, or ``SSL`` with ``ssl.client.auth=required``): every HTTP request then
  needs HTTP Basic credentials of a SCRAM user (the users SASL/PLAIN and SCRAM log in as);
- with ``authorizer.class.name`` set, every endpoint checks the Kafka ACL operation it
  needs, for the principal ``User:<name>`` (``User:ANONYMOUS`` without authentication);
- with any TLS listener, the API is served over HTTPS with that listener's keystore.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class HttpSecurity:
    authenticate: bool = False
    authorizer: bool = False
    super_users: tuple[str, ...] = ()
    allow_if_no_acl: bool = False
    tls_keystore: str | None = None  # one PEM file: private key and certificate chain (Kafka's PEM keystore)
    tls_key_password: str | None = field(default=None, repr=False)

    @property
    def tls(self) -> bool:
        return self.tls_keystore is not None

    @property
    def active(self) -> bool:
        return self.authenticate or self.authorizer


def http_security(gateway_security: dict[str, Any] | None) -> HttpSecurity | None:
    """The HTTP API's security from the gateways' (None: no listener security configured at all)."""
    if gateway_security is None:
        return None
    listeners = gateway_security["listeners"]
    views = gateway_security["views"]
    authenticate, keystore, password = False, None, None
    for ln in listeners:
        view = views[ln["name"]]
        tls, sasl = ln["protocol"] in ("SSL", "SASL_SSL"), ln["protocol"].startswith("SASL_")
        if sasl or (tls and (view.get("ssl.client.auth") or "none") == "required"):
            authenticate = True
        if tls and keystore is None:
            keystore, password = view.get("ssl.keystore.location"), view.get("ssl.key.password") or None
    auth = gateway_security.get("authorizer") or {}
    return HttpSecurity(authenticate=authenticate, authorizer=bool(auth.get("enabled")),
                        super_users=tuple(auth.get("super_users") or ()),
                        allow_if_no_acl=bool(auth.get("allow_if_no_acl")),
                        tls_keystore=keystore, tls_key_password=password)
