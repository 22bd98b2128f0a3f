"""A gateway core served on real sockets inside the test process (no Ray), for wire-level tests of what
needs no partition: logins, limits, refusals."""
from __future__ import annotations

import asyncio
import socket
import threading
from contextlib import contextmanager
from typing import Any, Awaitable, Callable, Iterator

NODE = "0123456789abcdef"


@contextmanager
def gateway_thread(start: Callable[[], Awaitable[tuple[Any, Any]]]
                   ) -> Iterator[tuple[Any, Any, asyncio.AbstractEventLoop]]:
    """Run ``start`` (it makes a gateway and its listeners, returning (gateway, what to yield)) on an
    event loop of its own thread; yields (gateway, that value, the loop). Afterwards the gateway is
    closed, its tasks cancelled and the thread ended."""
    loop = asyncio.new_event_loop()
    box: dict = {}
    ready = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            box["gw"], box["value"] = loop.run_until_complete(start())
        finally:
            ready.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    ready.wait(10)
    try:
        yield box["gw"], box["value"], loop
    finally:
        async def shutdown() -> None:
            box["gw"].close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        asyncio.run_coroutine_threadsafe(shutdown(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


@contextmanager
def served_gateway(host: str = "127.0.0.1", router: Any = None, security: Any = None,
                   **limits) -> Iterator[tuple[Any, int]]:
    """A gateway core listening on ``host`` (no Ray: a stand-in ``router`` where one is needed;
    ``security``: the listener's ListenerSecurity, plain PLAINTEXT without); yields (gateway, port)."""
    from logan_ray.gateway.server import Gateway

    async def start() -> tuple[Any, int]:
        gw = Gateway(router, NODE, **limits)
        return gw, gw.listen(host, 0, security=security)[1]

    with gateway_thread(start) as (gw, port, _loop):
        yield gw, port


def closed_by_peer(sock: socket.socket, timeout: float = 10) -> bool:
    """The gateway closed ``sock`` within ``timeout`` (what it sent before is passed over)."""
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
    except socket.timeout:
        return False
    except ConnectionError:
        pass
    return True
