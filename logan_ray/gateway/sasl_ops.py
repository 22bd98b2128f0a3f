"""SaslHandshake, SaslAuthenticate and the SCRAM credential APIs (KIP-152, KIP-368, KIP-554).

The exchange itself is the sans-I/O state machine of logan_ray.security.sasl; this
module moves its tokens in and out of Kafka frames and records the outcome on the
connection's session. A failed login is answered with SASL_AUTHENTICATION_FAILED and
its message, then the connection closes (after connection.failed.authentication.delay.ms),
as Kafka's broker does. Credentials live in the router's durable cluster metadata.
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from logan_ray.protocol import errors as codes
from logan_ray.security import broker_auth, scram
from logan_ray.security.sasl import SaslFailed, server_for

from .broker_identity import BROKER_ID, BROKER_LOGIN
from .cluster import error_code, error_message

if TYPE_CHECKING:
    from .connection import Connection
    from .handler import GatewayContext as Gateway

log = logging.getLogger("logan_ray.gateway")


def _close_after(conn: "Connection") -> None:
    conn.state["close_after_response"] = True


async def sasl_handshake(gw: "Gateway", conn: "Connection", header: Any, body: dict) -> dict:
    session = conn.session
    if body.get("mechanism") == broker_auth.MECHANISM and header.api_version >= 1:
        return _broker_handshake(conn)
    if session is None or not session.needs_sasl:
        return {"error_code": codes.ILLEGAL_SASL_STATE, "mechanisms": []}
    mechanisms = list(session.security.mechanisms)
    if header.api_version == 0:
        # v0 is followed by raw SASL tokens outside Kafka frames (clients before Kafka 1.0): not offered. It is
        # still advertised because librdkafka < 2.1 only attempts SASL when the advertised range starts at 0;
        # such clients then use v1 with SaslAuthenticate.
        _close_after(conn)
        return {"error_code": codes.UNSUPPORTED_VERSION, "mechanisms": mechanisms}
    if session.server is not None:
        _close_after(conn)
        return {"error_code": codes.ILLEGAL_SASL_STATE, "mechanisms": mechanisms}
    mechanism = body["mechanism"]
    if mechanism not in mechanisms:
        log.warning("gateway: %s asked for SASL mechanism %r; enabled: %s", conn.peer, mechanism[:64], mechanisms)
        _close_after(conn)
        return {"error_code": codes.UNSUPPORTED_SASL_MECHANISM, "mechanisms": mechanisms}
    if session.authenticated and mechanism != session.mechanism:  # KIP-368: re-authenticate the same way
        _close_after(conn)
        return {"error_code": codes.ILLEGAL_SASL_STATE, "mechanisms": mechanisms}
    session.mechanism = mechanism
    session.server = server_for(mechanism, session.security.oauth)
    return {"error_code": codes.NONE, "mechanisms": mechanisms}


def _broker_handshake(conn: "Connection") -> dict:
    """A broker's replica fetcher logs in (on any listener: Kafka clients never name this mechanism,
    so what they are answered stays Kafka's); once per connection."""
    session = conn.session
    mechanisms = list(session.security.mechanisms) if session is not None else []
    if conn.state.get(BROKER_ID) is not None or conn.state.get(BROKER_LOGIN) is not None or \
            (session is not None and (session.server is not None or (session.needs_sasl and session.authenticated))):
        _close_after(conn)
        return {"error_code": codes.ILLEGAL_SASL_STATE, "mechanisms": mechanisms}
    conn.state[BROKER_LOGIN] = broker_auth.BrokerAuthServer()
    return {"error_code": codes.NONE, "mechanisms": mechanisms}


async def _broker_authenticate(gw: "Gateway", conn: "Connection", server: Any, token: bytes) -> dict:
    out = {"error_code": codes.NONE, "error_message": None, "auth_bytes": b"", "session_lifetime_ms": 0}
    try:
        out["auth_bytes"] = await server.step(token, gw.cluster.broker_secret.lookup)
    except SaslFailed as e:
        conn.state.pop(BROKER_LOGIN, None)
        log.warning("gateway: failed broker authentication from %s: %s", conn.peer, e)
        session = conn.session
        await asyncio.sleep((session.security.failed_auth_delay_ms if session is not None else 100) / 1000.0)
        out.update(error_code=codes.SASL_AUTHENTICATION_FAILED, error_message=str(e), auth_bytes=b"")
        _close_after(conn)
        return out
    except Exception as e:  # the router is unreachable: no secret to check against
        conn.state.pop(BROKER_LOGIN, None)
        out.update(error_code=codes.SASL_AUTHENTICATION_FAILED, auth_bytes=b"",
                   error_message=f"Authentication failed: broker secret unavailable ({error_message(e)})")
        _close_after(conn)
        return out
    if server.done:
        conn.state.pop(BROKER_LOGIN, None)
        conn.state[BROKER_ID] = server.broker_id
        if conn.session is not None:
            conn.session.authenticated_as(broker_auth.PRINCIPAL)
        conn.max_frame = gw.max_frame_bytes
        log.info("gateway: %s authenticated as broker %d", conn.peer, server.broker_id)
    return out


async def sasl_authenticate(gw: "Gateway", conn: "Connection", header: Any, body: dict) -> dict:
    broker_login = conn.state.get(BROKER_LOGIN)
    if broker_login is not None:
        return await _broker_authenticate(gw, conn, broker_login, bytes(body["auth_bytes"]))
    session = conn.session
    out = {"error_code": codes.NONE, "error_message": None, "auth_bytes": b"", "session_lifetime_ms": 0}
    if session is None or not session.needs_sasl or session.server is None:
        out["error_code"], out["error_message"] = codes.ILLEGAL_SASL_STATE, "SaslAuthenticate before SaslHandshake"
        _close_after(conn)
        return out
    server = session.server

    async def lookup(user: str, mechanism: str) -> dict | None:
        return await gw.cluster.router.scram_credential.remote(user, mechanism)

    try:
        out["auth_bytes"] = await server.step(bytes(body["auth_bytes"]), lookup)
        if server.done:
            principal = f"User:{server.user}"
            if session.authenticated and principal != session.principal:
                raise SaslFailed("Cannot change principals during re-authentication")
            # an OAUTHBEARER token's exp bounds the session (KIP-368), as connections.max.reauth.ms does
            out["session_lifetime_ms"] = session.authenticated_as(principal, getattr(server, "expires_at_ms", None))
            conn.max_frame = gw.max_frame_bytes
            log.info("gateway: %s authenticated as %s with %s", conn.peer, principal, server.mechanism)
    except SaslFailed as e:
        log.warning("gateway: failed SASL %s authentication from %s: %s", server.mechanism, conn.peer, e)
        session.server = None
        await asyncio.sleep(session.security.failed_auth_delay_ms / 1000.0)
        out.update(error_code=codes.SASL_AUTHENTICATION_FAILED, error_message=str(e), auth_bytes=b"")
        _close_after(conn)
    except Exception as e:  # the credential store is unreachable: a retriable failure, not a wrong password
        session.server = None
        out.update(error_code=codes.SASL_AUTHENTICATION_FAILED,
                   error_message=f"Authentication failed: credentials unavailable ({error_message(e)})")
        _close_after(conn)
    return out


# ----------------------------------------------------------- SCRAM credentials
async def describe_user_scram_credentials(gw: "Gateway", conn: "Connection", header: Any, body: dict) -> dict:
    from .authz import authorize_cluster

    denied = await authorize_cluster(gw, conn, "DESCRIBE")
    if denied:
        return {"throttle_time_ms": 0, "error_code": codes.CLUSTER_AUTHORIZATION_FAILED, "error_message": denied,
                "results": []}
    users = body.get("users")
    try:
        # "null/empty to describe all users" (librdkafka sends an empty array)
        results = await gw.cluster.router.describe_scram.remote([u["name"] for u in users] if users else None)
    except Exception as e:
        return {"throttle_time_ms": 0, "error_code": error_code(e), "error_message": error_message(e), "results": []}
    return {"throttle_time_ms": 0, "error_code": codes.NONE, "error_message": None, "results": results}


async def alter_user_scram_credentials(gw: "Gateway", conn: "Connection", header: Any, body: dict) -> dict:
    from .authz import authorize_cluster

    users = [d["name"] for d in body["deletions"]] + [u["name"] for u in body["upsertions"]]
    denied = await authorize_cluster(gw, conn, "ALTER")
    if denied:
        return {"throttle_time_ms": 0, "results": [
            {"user": u, "error_code": codes.CLUSTER_AUTHORIZATION_FAILED, "error_message": denied}
            for u in dict.fromkeys(users)]}
    upserts = []
    for u in body["upsertions"]:
        mech = scram.BY_CODE.get(u["mechanism"])
        cred = None
        if mech is not None and scram.MIN_ITERATIONS <= u["iterations"] <= scram.MAX_ITERATIONS:
            cred = scram.credential_from_salted(mech, bytes(u["salt"]), bytes(u["salted_password"]),
                                                u["iterations"])
        upserts.append({"name": u["name"], "mechanism": u["mechanism"], "iterations": u["iterations"],
                        "credential": cred})
    deletions = [{"name": d["name"], "mechanism": d["mechanism"]} for d in body["deletions"]]
    try:
        results = await gw.cluster.router.alter_scram.remote(deletions, upserts)
    except Exception as e:
        results = [{"user": u, "error_code": error_code(e), "error_message": error_message(e)}
                   for u in dict.fromkeys(users)]
    return {"throttle_time_ms": 0, "results": results}


HANDLERS = {
    17: (0, 1, sasl_handshake),  # v0 answers UNSUPPORTED_VERSION: raw tokens after the handshake are not offered
    36: (0, 2, sasl_authenticate),
    50: (0, 0, describe_user_scram_credentials),
    51: (0, 0, alter_user_scram_credentials),
}
