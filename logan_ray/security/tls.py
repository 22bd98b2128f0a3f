"""TLS for a listener: the server context from Kafka's ``ssl.*`` settings, the principal of a client certificate.

PEM only (``ssl.keystore.type=PEM``): ``ssl.keystore.location`` is one file holding
the private key and the certificate chain, ``ssl.truststore.location`` the CA
certificates that client certificates must chain to. TLS 1.2 is the floor whatever
``ssl.enabled.protocols`` says; renegotiation is off.
"""
from __future__ import annotations

import ssl
from typing import Any, Mapping

ANONYMOUS = "User:ANONYMOUS"

_CLIENT_AUTH = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


class TlsConfigError(ValueError):
    """The listener's ssl.* settings cannot make a TLS server (missing or unreadable files)."""


def server_context(listener: str, view: Mapping[str, Any]) -> ssl.SSLContext:
    """An SSLContext for ``listener`` from its ``ssl.*`` settings (see BrokerSettings.listener_view)."""
    keystore = view.get("ssl.keystore.location")
    if not keystore:
        raise TlsConfigError(f"listener {listener} uses TLS but ssl.keystore.location is not set "
                             "(a PEM file with the private key and certificate chain)")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = sorted(_VERSIONS[v] for v in (view.get("ssl.enabled.protocols") or ["TLSv1.2", "TLSv1.3"]))
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    ctx.options |= getattr(ssl, "OP_NO_RENEGOTIATION", 0)
    try:
        ctx.load_cert_chain(keystore, password=view.get("ssl.key.password") or None)
    except (OSError, ssl.SSLError) as e:
        raise TlsConfigError(f"listener {listener}: cannot load ssl.keystore.location {keystore}: {e}") from None
    auth = view.get("ssl.client.auth") or "none"
    ctx.verify_mode = _CLIENT_AUTH[auth]
    truststore = view.get("ssl.truststore.location")
    if auth != "none":
        if not truststore:
            raise TlsConfigError(f"listener {listener}: ssl.client.auth={auth} needs ssl.truststore.location "
                                 "(PEM file of the CA certificates client certificates are signed by)")
        try:
            ctx.load_verify_locations(truststore)
        except (OSError, ssl.SSLError) as e:
            raise TlsConfigError(f"listener {listener}: cannot load ssl.truststore.location {truststore}: {e}") \
                from None
    ciphers = view.get("ssl.cipher.suites")
    if ciphers:
        try:
            ctx.set_ciphers(":".join(ciphers))
        except ssl.SSLError as e:
            raise TlsConfigError(f"listener {listener}: ssl.cipher.suites: {e}") from None
    return ctx


# RFC 2253 attribute keywords, as Java's X500Principal.getName() prints them (Kafka's default principal).
_KEYWORDS = {"commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
             "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
             "domainComponent": "DC", "userId": "UID"}


def _escape(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (i == 0 and ch in "# ") or (i == len(value) - 1 and ch == " "):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def principal_from_cert(cert: Mapping[str, Any] | None) -> str:
    """Kafka's DEFAULT mapping: ``User:`` + the subject as an RFC 2253 name (``User:CN=alice,O=Org``);
    ANONYMOUS without a (verified) client certificate."""
    subject = (cert or {}).get("subject")
    if not subject:
        return ANONYMOUS
    rdns = []
    for rdn in reversed(subject):  # RFC 2253 lists the most specific RDN first
        rdns.append("+".join(f"{_KEYWORDS.get(k, k)}={_escape(v)}" for k, v in rdn))
    return "User:" + ",".join(rdns)
