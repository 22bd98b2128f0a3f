"""Plain passwords against the SCRAM store, and the cache that spares HTTP a PBKDF2 per request."""
from __future__ import annotations

import asyncio

from logan_ray.security import scram
from logan_ray.security.passwords import PasswordCache, matches


class Store:
    """A stand-in for the router's credential store, counting lookups."""

    def __init__(self) -> None:
        self.creds: dict = {}
        self.version = 0
        self.lookups = 0

    def set(self, user: str, password: str) -> None:
        for m in scram.MECHANISMS:
            self.creds[(user, m)] = scram.new_credential(m, password)
        self.version += 1

    async def lookup(self, user: str, mechanism: str):
        self.lookups += 1
        return self.creds.get((user, mechanism))

    async def get_version(self) -> int:
        return self.version


def test_a_password_matches_only_its_own_credential_and_both_keys_are_compared():
    cred = scram.new_credential("SCRAM-SHA-256", "right")
    assert matches([("SCRAM-SHA-256", cred)], "right")
    assert not matches([("SCRAM-SHA-256", cred)], "wrong")
    assert not matches([], "right")
    forged = dict(cred, server_key=scram.new_credential("SCRAM-SHA-256", "other")["server_key"])
    assert not matches([("SCRAM-SHA-256", forged)], "right")  # a right StoredKey alone is not enough


def test_verified_passwords_are_cached_and_forgotten_when_credentials_change():
    store = Store()
    store.set("alice", "pw")
    cache = PasswordCache(store.lookup, store.get_version, check_s=0)

    async def run():
        assert await cache.verify("alice", "pw")
        first = store.lookups
        for _ in range(20):
            assert await cache.verify("alice", "pw")
        assert store.lookups == first  # no lookup, no PBKDF2 after the first success
        assert not await cache.verify("alice", "nope")  # wrong passwords are checked every time
        assert not await cache.verify("alice", "nope")
        assert store.lookups == first + 4
        store.set("alice", "new")  # the store's version moves: every cached answer goes
        assert not await cache.verify("alice", "pw")
        assert await cache.verify("alice", "new")
        del store.creds[("alice", "SCRAM-SHA-256")], store.creds[("alice", "SCRAM-SHA-512")]
        store.version += 1
        assert not await cache.verify("alice", "new")
    asyncio.run(run())


def test_the_cache_is_bounded():
    store = Store()
    for i in range(10):
        store.set(f"u{i}", "pw")
    cache = PasswordCache(store.lookup, store.get_version, max_entries=4, check_s=60)

    async def run():
        for i in range(10):
            assert await cache.verify(f"u{i}", "pw")
        assert len(cache._entries) == 4
        before = store.lookups
        assert await cache.verify("u9", "pw")  # the newest are kept
        assert store.lookups == before
        assert await cache.verify("u0", "pw")  # the oldest were dropped
        assert store.lookups > before
    asyncio.run(run())
