"""From broker settings to what each gateway needs for its listeners, and back into live objects.

The broker resolves Kafka-named settings once (:func:`gateway_security`, plain data
that travels to every node's gateway actor); each gateway builds its TLS contexts
and per-listener SASL settings from it (:func:`listener_securities`), so certificate
paths are read on the node that serves them.
"""
from __future__ import annotations

import ssl
from typing import Any

from .inter_broker import client_context, inter_broker_listener
from .listeners import Listener, resolve_listeners
from .oauthbearer import MECHANISM as OAUTHBEARER
from .oauthbearer import SETTINGS as OAUTHBEARER_SETTINGS
from .oauthbearer import OAuthBearerValidator
from .session import SASL_MAX_RECEIVE, ListenerSecurity
from .tls import server_context


def gateway_security(settings: Any) -> dict[str, Any]:
    """Serializable listener and security settings for the gateways (raises on inconsistent settings)."""
    listeners = resolve_listeners(settings.get("listeners"), settings.get("advertised.listeners"),
                                  settings.get("listener.security.protocol.map"))
    out = {"listeners": [ln.to_dict() for ln in listeners],
           "inter_broker": inter_broker_listener(listeners, settings),
           "views": {ln.name: settings.listener_view(ln.name) for ln in listeners},
           "sasl_max_receive": settings.get("sasl.server.max.receive.size") or SASL_MAX_RECEIVE,
           "authorizer": {"enabled": bool(settings.get("authorizer.class.name")),
                          "super_users": list(settings.get("super.users") or []),
                          "allow_if_no_acl": bool(settings.get("allow.everyone.if.no.acl.found"))},
           "oauthbearer": {name: settings.get(name) for name in OAUTHBEARER_SETTINGS}}
    listener_securities(out)  # fail now (missing certificate files...) rather than in every gateway
    inter_broker_tls(out)
    return out


def listener_securities(security: dict[str, Any]) -> list[ListenerSecurity]:
    """Each listener's live security; with OAUTHBEARER enabled anywhere, the JWKS is fetched here
    (once for all listeners), so an unreachable provider fails the start, not every login."""
    out = []
    oauth = None
    for d in security["listeners"]:
        listener = Listener.from_dict(d)
        view = security["views"][listener.name]
        tls = server_context(listener.name, view) if listener.tls else None
        mechanisms = tuple(view.get("sasl.enabled.mechanisms") or ()) if listener.sasl else ()
        if listener.sasl and not mechanisms:
            raise ValueError(f"listener {listener.name} uses SASL but sasl.enabled.mechanisms is empty")
        if OAUTHBEARER in mechanisms and oauth is None:
            oauth = OAuthBearerValidator.from_settings(security.get("oauthbearer") or {})
        out.append(ListenerSecurity(listener, tls, mechanisms, int(view.get("connections.max.reauth.ms") or 0),
                                    int(security.get("sasl_max_receive") or SASL_MAX_RECEIVE),
                                    oauth=oauth if OAUTHBEARER in mechanisms else None))
    return out


def inter_broker_tls(security: dict[str, Any]) -> tuple[str, ssl.SSLContext | None]:
    """(inter-broker listener name, the TLS context to connect to it with, None when it is not TLS)."""
    name = security.get("inter_broker") or security["listeners"][0]["name"]
    listener = next(Listener.from_dict(d) for d in security["listeners"] if d["name"] == name)
    return name, client_context(name, security["views"][name]) if listener.tls else None
