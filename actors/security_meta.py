"""The router's durable security metadata: SCRAM credentials, ACLs and client quotas.

Kept in the router's cluster metadata file (written atomically, like topics) so
they survive broker restarts and reach every gateway. Only what the gateways
compute is stored: a SCRAM credential is (salt, StoredKey, ServerKey, iterations),
never a password; an ACL is Kafka's binding (resource type, name, pattern type,
principal, host, operation, permission) as a list of plain values; a client quota is
an entity (``[[type, name or None], ...]``) and its ``{key: value}``. Validating, matching,
authorizing and throttling live with the gateway (logan_ray.security.acl, .quota);
here is only storage.
"""
from __future__ import annotations

import secrets
from typing import Any

# Kafka error codes and SCRAM mechanism codes (kept here: actors sit below the protocol package)
UNSUPPORTED_SASL_MECHANISM = 33
RESOURCE_NOT_FOUND = 91
DUPLICATE_RESOURCE = 92
UNACCEPTABLE_CREDENTIAL = 93
SCRAM_MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384


class SecurityMetadata:
    """Mixed into RouterActor: uses its ``_meta``, ``_save`` and ``_lock``."""

    _meta: dict[str, Any]

    def _scram(self) -> dict[str, dict[str, Any]]:
        return self._meta.setdefault("scram", {})

    def _acl_list(self) -> list[list[Any]]:
        return self._meta.setdefault("acls", [])

    # ------------------------------------------------------------ SCRAM
    async def scram_credential(self, user: str, mechanism: str) -> dict[str, Any] | None:
        return self._scram().get(user, {}).get(mechanism)

    async def scram_version(self) -> int:
        """Grows with every change of any SCRAM credential (durable, so it never goes back after a restart)."""
        return self._meta.get("scram_version", 0)

    async def describe_scram(self, users: list[str] | None) -> list[dict[str, Any]]:
        """DescribeUserScramCredentials results: every user with credentials when ``users`` is None."""
        store = self._scram()
        names = sorted(store) if users is None else users
        out = []
        for name in dict.fromkeys(names):
            if users is not None and users.count(name) > 1:
                out.append({"user": name, "error_code": DUPLICATE_RESOURCE,
                            "error_message": "Cannot describe SCRAM credentials for the same user twice in a "
                                             "single request", "credential_infos": []})
                continue
            creds = store.get(name)
            if not creds:
                out.append({"user": name, "error_code": RESOURCE_NOT_FOUND,
                            "error_message": f"Attempt to describe a user credential that does not exist: {name}",
                            "credential_infos": []})
                continue
            infos = [{"mechanism": code, "iterations": creds[mech]["iterations"]}
                     for code, mech in sorted(SCRAM_MECHANISMS.items()) if mech in creds]
            out.append({"user": name, "error_code": 0, "error_message": None, "credential_infos": infos})
        return out

    async def alter_scram(self, deletions: list[dict[str, Any]], upsertions: list[dict[str, Any]]) -> list[dict]:
        """AlterUserScramCredentials: each upsertion carries a computed ``credential`` (or None when invalid).

        One result per user, as Kafka answers; a user with any bad entry changes nothing.
        """
        errors: dict[str, tuple[int, str]] = {}
        seen: dict[tuple[str, int], int] = {}
        users = [d["name"] for d in deletions] + [u["name"] for u in upsertions]
        for entry in [*deletions, *upsertions]:
            key = (entry["name"], entry["mechanism"])
            seen[key] = seen.get(key, 0) + 1
        store = self._scram()

        def entry_error(name: str, code: int) -> tuple[int, str] | None:
            """What Kafka refuses in any entry, deletion or upsertion, in its order of checks."""
            if not name:
                return UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
            if code not in SCRAM_MECHANISMS:
                return UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism {code}"
            if seen[(name, code)] > 1:
                return DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"
            return None

        for d in deletions:
            name, code = d["name"], d["mechanism"]
            problem = entry_error(name, code)
            if problem is None and SCRAM_MECHANISMS[code] not in store.get(name, {}):
                problem = RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
            if problem is not None:
                errors.setdefault(name, problem)
        for u in upsertions:
            name, code = u["name"], u["mechanism"]
            problem = entry_error(name, code)
            if problem is None and (not MIN_ITERATIONS <= u["iterations"] <= MAX_ITERATIONS
                                    or u.get("credential") is None):
                problem = UNACCEPTABLE_CREDENTIAL, f"Iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}"
            if problem is not None:
                errors.setdefault(name, problem)
        async with self._lock:  # type: ignore[attr-defined]
            changed = False
            for d in deletions:
                if d["name"] not in errors:
                    creds = store.get(d["name"], {})
                    creds.pop(SCRAM_MECHANISMS[d["mechanism"]], None)
                    if not creds:
                        store.pop(d["name"], None)
                    changed = True
            for u in upsertions:
                if u["name"] not in errors:
                    store.setdefault(u["name"], {})[SCRAM_MECHANISMS[u["mechanism"]]] = dict(u["credential"])
                    changed = True
            if changed:
                # lets password caches (the HTTP API's) drop what they verified against older credentials
                self._meta["scram_version"] = self._meta.get("scram_version", 0) + 1
                self._save()  # type: ignore[attr-defined]
        return [{"user": name, "error_code": errors.get(name, (0, None))[0],
                 "error_message": errors.get(name, (0, None))[1]} for name in dict.fromkeys(users)]

    # -------------------------------------------------------------- ACLs
    async def acls(self) -> tuple[int, list[list[Any]]]:
        """(version, bindings); the version grows with every change so gateways refresh cheaply."""
        return self._meta.get("acl_version", 0), [list(b) for b in self._acl_list()]

    async def acl_version(self) -> int:
        return self._meta.get("acl_version", 0)

    async def add_acls(self, bindings: list[list[Any]]) -> int:
        """Add bindings (already validated); duplicates are kept once. Returns the new version."""
        async with self._lock:  # type: ignore[attr-defined]
            current = self._acl_list()
            for b in bindings:
                if list(b) not in current:
                    current.append(list(b))
            self._meta["acl_version"] = self._meta.get("acl_version", 0) + 1
            self._save()  # type: ignore[attr-defined]
            return self._meta["acl_version"]

    async def remove_acls(self, bindings: list[list[Any]]) -> list[list[Any]]:
        """Remove exactly these bindings; returns those that existed."""
        async with self._lock:  # type: ignore[attr-defined]
            current = self._acl_list()
            removed = [list(b) for b in bindings if list(b) in current]
            if removed:
                self._meta["acls"] = [b for b in current if b not in removed]
                self._meta["acl_version"] = self._meta.get("acl_version", 0) + 1
                self._save()  # type: ignore[attr-defined]
            return removed

    # ------------------------------------------------------ client quotas
    async def quotas(self) -> tuple[int, list[list[Any]]]:
        """(version, [[entity, values], ...]); the version grows with every change, as the ACLs' does."""
        return self._meta.get("quota_version", 0), [[e, dict(v)] for e, v in self._meta.get("quotas", [])]

    async def quota_version(self) -> int:
        return self._meta.get("quota_version", 0)

    async def alter_quotas(self, changes: list[list[Any]]) -> int:
        """Apply [[entity, {key: value, or None to remove}], ...] (already validated) at once; an entity
        left with no values is forgotten. Returns the new version."""
        async with self._lock:  # type: ignore[attr-defined]
            stored = {_entity_key(e): [e, dict(v)] for e, v in self._meta.get("quotas", [])}
            for e, ops in changes:
                entry = stored.setdefault(_entity_key(e), [[list(p) for p in e], {}])
                for key, value in ops.items():
                    if value is None:
                        entry[1].pop(key, None)
                    else:
                        entry[1][key] = value
            self._meta["quotas"] = [entry for entry in stored.values() if entry[1]]
            self._meta["quota_version"] = self._meta.get("quota_version", 0) + 1
            self._save()  # type: ignore[attr-defined]
            return self._meta["quota_version"]

    # ------------------------------------------------------- broker secret
    def _ensure_broker_secret(self) -> bool:
        """Make the cluster's broker secret once (True when made: the caller saves the metadata
        before anyone is given it, so it never changes under a gateway that cached it)."""
        if self._meta.get("broker_secret"):
            return False
        self._meta["broker_secret"] = secrets.token_hex(32)
        return True

    async def broker_secret(self) -> str:
        """What brokers prove to each other that they know (logan_ray.security.broker_auth): only
        reachable over Ray, whose token authenticates the caller; never sent on a Kafka listener."""
        return self._meta["broker_secret"]

    # ---------------------------------------------------------- listeners
    async def register_listeners(self, node_id: str, endpoints: dict[str, tuple[str, int]]) -> None:
        """A gateway's advertised address on each of its listeners (Metadata answers per listener)."""
        self.__dict__.setdefault("_listener_endpoints", {})[node_id] = dict(endpoints)
        self._remember_endpoint("listener_endpoints", node_id,
                                {name: [ep[0], int(ep[1])] for name, ep in endpoints.items()})

    async def listener_gateways(self, listener: str) -> dict[str, tuple[str, int]]:
        """{node id: (host, port)} of the alive gateways on ``listener``."""
        alive = getattr(self, "_alive", {})
        eps = self.__dict__.get("_listener_endpoints", {})
        return {node: tuple(e[listener]) for node, e in eps.items() if listener in e and node in alive}


def _entity_key(entity: list[Any]) -> tuple:
    return tuple(sorted((t, n) for t, n in entity))
