"""What a request handler may use of the gateway: the contract between the core and its handlers.

The core (:mod:`.server`) imports the handler modules to build its dispatch table;
the handlers type their first argument with :class:`GatewayContext` instead of the
``Gateway`` class, so the dependency points one way (server -> handlers -> this
module) and a handler can be driven by any object with these attributes.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, Callable, Protocol

if TYPE_CHECKING:
    from .cluster import Cluster
    from .connection import Connection
    from .limits import ConnectionQuotas, RequestMemoryPool


class GatewayContext(Protocol):
    """The gateway as its handlers see it."""

    #: routes, partitions, gateways and topic ids of the cluster, as this node knows them
    cluster: Cluster
    #: socket.request.max.bytes, queued.max.request.bytes and the connection quotas (DescribeConfigs shows them)
    max_frame_bytes: int
    pool: RequestMemoryPool
    quotas: ConnectionQuotas
    #: the broker's other Kafka-named settings as DescribeConfigs entries (broker_config.describe_entries)
    broker_configs: list[dict[str, Any]]
    #: the group coordinator actor handle and its node, looked up on first use and forgotten when it fails
    group_coordinator: Any
    group_coordinator_node: str | None
    #: the ACL authorizer (logan_ray.security.authorizer.Authorizer), None when authorizer.class.name is unset
    authorizer: Any
    #: produce and fetch byte-rate quotas (client_quotas.ClientQuotas)
    client_quotas: Any

    def api_versions(self) -> list[dict]:
        """The (api key, min, max) versions this gateway serves, for ApiVersions."""
        ...


#: A request handler: (gateway, connection, request header, decoded body) -> response body, or None when none is owed.
Handler = Callable[[GatewayContext, "Connection", Any, dict], Awaitable["dict | None"]]
#: api key -> (lowest, highest version served, handler): each handler module exports one as ``HANDLERS``.
HandlerTable = dict[int, tuple[int, int, Handler]]
