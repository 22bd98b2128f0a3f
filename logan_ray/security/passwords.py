"""Checking a user's plain password against the SCRAM store, and remembering recent answers.

SASL/PLAIN logins and the HTTP API's Basic authentication both receive a password
in clear; the store only holds SCRAM credentials (salt, StoredKey, ServerKey,
iterations), so each check costs one PBKDF2 per mechanism (milliseconds). A
login happens once per Kafka connection, but HTTP sends the password with every
request: :class:`PasswordCache` remembers successful checks for a short time, in a
bounded table, and forgets all of them as soon as any credential changes (the
router's ``scram_version``), so a changed or deleted password stops working at once.

The PBKDF2 never runs on the caller's event loop (:func:`matches_off_loop`): one
check costs up to two 16,384-iteration PBKDF2s, and on the gateway's loop every
other client would wait for it. It runs on a small pool of its own, so a flood of
logins queues there instead of filling the loop's default executor, which storage
work shares; hashlib releases the GIL while it hashes.
"""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Awaitable, Callable

from . import scram

Lookup = Callable[[str, str], Awaitable["dict[str, Any] | None"]]
#: Stronger first: a user with both credentials is checked against SCRAM-SHA-512 first.
ORDER = ("SCRAM-SHA-512", "SCRAM-SHA-256")
#: Threads hashing passwords: two, so checks overlap on a multi-core node but never take every core.
HASH_THREADS = 2
_hashers: ThreadPoolExecutor | None = None


async def stored_credentials(lookup: Lookup, user: str) -> list[tuple[str, dict[str, Any]]]:
    """The user's SCRAM credentials as (mechanism, credential), strongest first; empty for an unknown user."""
    out = []
    for mechanism in ORDER:
        cred = await lookup(user, mechanism)
        if cred is not None:
            out.append((mechanism, cred))
    return out


def matches(credentials: list[tuple[str, dict[str, Any]]], password: str) -> bool:
    """Does ``password`` produce any of these credentials? (CPU-bound: PBKDF2 per credential tried)."""
    return any(scram.check_password(mechanism, cred, password) for mechanism, cred in credentials)


async def matches_off_loop(credentials: list[tuple[str, dict[str, Any]]], password: str) -> bool:
    """:func:`matches` on the password-hashing threads, so the calling event loop keeps serving."""
    global _hashers
    if not credentials:
        return False
    if _hashers is None:
        _hashers = ThreadPoolExecutor(HASH_THREADS, thread_name_prefix="pbkdf2")
    return await asyncio.get_running_loop().run_in_executor(_hashers, matches, credentials, password)


class PasswordCache:
    """Recently verified (user, password) pairs, bounded and invalidated with the credential store.

    Entries are keyed by the user and an HMAC of the password under a key made at
    start (no password is kept, and the keyed digests are useless elsewhere); they
    live ``ttl_s`` at most, and every entry is dropped when the store's version
    (asked at most every ``check_s``) moves. Failures are never cached.
    """

    def __init__(self, lookup: Lookup, version: Callable[[], Awaitable[int]], max_entries: int = 1024,
                 ttl_s: float = 60.0, check_s: float = 1.0) -> None:
        self._lookup, self._version = lookup, version
        self.max_entries, self.ttl_s, self.check_s = max_entries, ttl_s, check_s
        self._key = os.urandom(32)
        self._entries: OrderedDict[tuple[str, bytes], float] = OrderedDict()
        self._seen_version: int | None = None
        self._checked = 0.0
        self._lock = asyncio.Lock()
        self.hits = self.misses = 0

    async def _fresh(self) -> None:
        if time.monotonic() - self._checked <= self.check_s:
            return
        async with self._lock:
            if time.monotonic() - self._checked <= self.check_s:
                return
            version = await self._version()
            if version != self._seen_version:
                self._entries.clear()
                self._seen_version = version
            self._checked = time.monotonic()

    async def verify(self, user: str, password: str) -> bool:
        """True when ``password`` is the user's (from the cache when verified recently)."""
        await self._fresh()
        key = (user, hmac.new(self._key, password.encode("utf-8"), hashlib.sha256).digest())
        seen = self._entries.get(key)
        now = time.monotonic()
        if seen is not None and now - seen < self.ttl_s:
            self._entries.move_to_end(key)
            self.hits += 1
            return True
        self.misses += 1
        version = self._seen_version
        creds = await stored_credentials(self._lookup, user)
        if not creds or not await matches_off_loop(creds, password):
            return False
        if version == self._seen_version:  # not verified against credentials that changed meanwhile
            self._entries[key] = now
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return True

    def invalidate(self) -> None:
        """Forget every verified password now (e.g. after this process changed a credential)."""
        self._entries.clear()
        self._checked = 0.0
