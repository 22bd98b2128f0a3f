"""The gateway core gives its request handlers everything the handler contract promises.

Handlers see the gateway only through ``GatewayContext`` (logan_ray/gateway/handler.py),
so nothing checks at import time that ``Gateway`` still has what they use; this does.
"""
from __future__ import annotations

import ast
from pathlib import Path

import logan_ray.gateway as gateway_pkg
from logan_ray.gateway.handler import GatewayContext
from logan_ray.gateway.server import Gateway

HANDLER_MODULES = ("admin", "fetch", "groups", "leaders", "meta", "produce", "sasl_ops", "acl_api", "authz")


def _promised() -> set[str]:
    names = set(GatewayContext.__annotations__)
    names |= {n for n, v in vars(GatewayContext).items() if callable(v) and not n.startswith("_")}
    return names


def test_gateway_has_every_attribute_and_method_its_handlers_are_promised():
    gw = Gateway(None, "0123456789abcdef")
    try:
        promised = _promised()
        assert {"cluster", "api_versions", "group_coordinator", "group_coordinator_node"} <= promised
        missing = sorted(n for n in promised if not hasattr(gw, n))
        assert not missing, f"Gateway lacks what handlers may use: {missing}"
        assert gw.group_coordinator is None and gw.group_coordinator_node is None  # looked up on first use
        served = {v["api_key"] for v in gw.api_versions()}
        assert {0, 1, 3, 18} <= served  # Produce, Fetch, Metadata, ApiVersions: every handler module is in the table
    finally:
        gw.close()


def test_handlers_use_only_what_the_contract_promises():
    """Read from the source: every ``gw.<name>`` in a handler module is promised by GatewayContext."""
    promised = _promised()
    folder = Path(gateway_pkg.__file__).parent
    used: dict[str, set[str]] = {}
    for name in HANDLER_MODULES:
        tree = ast.parse((folder / f"{name}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "gw":
                used.setdefault(node.attr, set()).add(name)
    assert "cluster" in used  # the handlers were read
    unpromised = {attr: sorted(mods) for attr, mods in used.items() if attr not in promised}
    assert not unpromised, f"handlers use gateway attributes GatewayContext does not declare: {unpromised}"
