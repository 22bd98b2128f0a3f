"""One connection from this broker to another broker's gateway, as a broker.

The replica fetcher's transport: it connects to the other gateway on the inter-broker
listener (``inter.broker.listener.name``, else the one of
``security.inter.broker.protocol``, else the first), speaks TLS when that listener
does (the leader's certificate checked against the listener's truststore), and proves
with the LOGAN-RAY-BROKER login that it is this broker; the leader proves the same back,
so a follower never truncates or appends on the word of something that is not a broker
of its cluster. Requests go one at a time (a fetcher never pipelines).
"""
from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass
from typing import Any

from logan_ray.protocol import decode_response, encode_request
from logan_ray.security import broker_auth
from logan_ray.security.sasl import SaslFailed

SASL_HANDSHAKE_VERSION = 1  # v1: SaslAuthenticate frames follow (v0's raw tokens are not served)
SASL_AUTHENTICATE_VERSION = 2
MAX_RESPONSE_BYTES = 64 << 20  # above replica.fetch.response.max.bytes (10 MiB) with headroom


@dataclass(frozen=True)
class InterBrokerListener:
    """Where and how brokers reach each other. ``name`` None: the first listener (the router's plain
    gateway list); ``tls`` None: no TLS (its ``check_hostname`` says whether the leader's name is checked)."""

    name: str | None = None
    tls: ssl.SSLContext | None = None


class BrokerLink:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str) -> None:
        self._reader, self._writer = reader, writer
        self._client_id = client_id
        self._corr = 0

    @classmethod
    async def open(cls, endpoint: tuple[str, int], broker_id: int, secret: str, listener: InterBrokerListener,
                   client_id: str) -> "BrokerLink":
        host, port = endpoint
        if listener.tls is not None:
            reader, writer = await asyncio.open_connection(host, port, ssl=listener.tls, server_hostname=host)
        else:
            reader, writer = await asyncio.open_connection(host, port)
        link = cls(reader, writer, client_id)
        try:
            await link._login(broker_id, secret)
        except BaseException:
            link.close()
            raise
        return link

    async def _login(self, broker_id: int, secret: str) -> None:
        hs = await self.call(17, SASL_HANDSHAKE_VERSION, {"mechanism": broker_auth.MECHANISM})
        if hs["error_code"]:
            raise SaslFailed(f"the other broker refused the {broker_auth.MECHANISM} login "
                             f"(error {hs['error_code']}): is it of this cluster and version?")
        client = broker_auth.BrokerAuthClient(secret, broker_id)
        nonce = await self._authenticate(client.first())
        client.verify(await self._authenticate(client.final(nonce)))

    async def _authenticate(self, token: bytes) -> bytes:
        body = await self.call(36, SASL_AUTHENTICATE_VERSION, {"auth_bytes": token})
        if body["error_code"]:
            raise SaslFailed(f"broker login failed: {body.get('error_message') or body['error_code']}")
        return bytes(body["auth_bytes"])

    async def call(self, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
        self._corr += 1
        self._writer.write(encode_request(api_key, version, self._corr, self._client_id, body))
        await self._writer.drain()
        size = int.from_bytes(await self._reader.readexactly(4), "big")
        if not 0 < size <= MAX_RESPONSE_BYTES:
            raise ConnectionError(f"response of {size} bytes from the other broker")
        got, answer = decode_response(api_key, version, await self._reader.readexactly(size))
        if got != self._corr:
            raise ConnectionError(f"correlation id {got}, expected {self._corr}")
        return answer

    def close(self) -> None:
        self._writer.close()
