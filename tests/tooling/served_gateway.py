"""A gateway core served on real sockets inside the test process (no Ray), for wire-level tests of what
needs no partition: logins, limits, refusals."""
from __future__ import annotations

import asyncio
import socket
import threading
from contextlib import contextmanager
from typing import Any, Iterator

NODE = "0123456789abcdef"


@contextmanager
def served_gateway(host: str = "127.0.0.1", router: Any = None, security: Any = None,
                   **limits) -> Iterator[tuple[Any, int]]:
    """A gateway core on its own loop and thread, listening on ``host`` (no Ray: a stand-in ``router`` where
    one is needed; ``security``: the listener's ListenerSecurity, plain PLAINTEXT without)."""
    from logan_ray.gateway.server import Gateway

    loop = asyncio.new_event_loop()
    box: dict = {}
    ready = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)

        async def start() -> None:
            box["gw"] = Gateway(router, NODE, **limits)
            box["port"] = box["gw"].listen(host, 0, security=security)[1]
        try:
            loop.run_until_complete(start())
        finally:
            ready.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    ready.wait(10)
    try:
        yield box["gw"], box["port"]
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
