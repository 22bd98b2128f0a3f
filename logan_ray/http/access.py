"""Who is asking and what they may do: the Kafka ACL check each HTTP endpoint makes.

One :class:`Access` per request, made by the authentication middleware (logan_ray.http.auth)
from the principal and a snapshot of the gateway authorizer's decisions; routes ask it
for the operation Kafka would check for the same work (see docs/security.md, "HTTP API"):
a denial is 403 with TOPIC/GROUP/CLUSTER_AUTHORIZATION_FAILED, as Kafka answers.
Without an authorizer every authenticated principal may do everything, as in Kafka.
"""
from __future__ import annotations

from typing import Any, Awaitable, Callable

from fastapi import Request

from logan_ray.protocol import errors as E
from logan_ray.security import acl
from logan_ray.security.tls import ANONYMOUS

from .errors import HttpError

_NAMES = {v: k.upper() for k, v in acl.OPERATIONS.items()}
_DENIED = {acl.TOPIC: E.TOPIC_AUTHORIZATION_FAILED, acl.GROUP: E.GROUP_AUTHORIZATION_FAILED,
           acl.CLUSTER: E.CLUSTER_AUTHORIZATION_FAILED}
_KIND = {acl.TOPIC: "topic", acl.GROUP: "group", acl.CLUSTER: "cluster"}


class Access:
    def __init__(self, principal: str = ANONYMOUS, host: str = "", decider: Any = None,
                 renew: Callable[[], Awaitable["Access | None"]] | None = None) -> None:
        self.principal, self.host, self.decider = principal, host, decider
        self._renew = renew

    async def renewed(self) -> "Access | None":
        """This request's rights now (credentials re-checked, fresh ACLs); None once they are gone.

        For responses that outlive a moment (the live stream): a changed password or a
        removed ACL ends them too, within about a second."""
        return self if self._renew is None else await self._renew()

    def may(self, operation: int, resource_type: int, name: str) -> bool:
        return self.decider is None or self.decider.allowed(self.principal, self.host, operation, resource_type, name)

    def require(self, operation: int, resource_type: int, name: str) -> None:
        """403 with Kafka's *_AUTHORIZATION_FAILED unless the principal may do ``operation`` on the resource."""
        if not self.may(operation, resource_type, name):
            what = "the cluster" if resource_type == acl.CLUSTER else f"{_KIND[resource_type]} {name!r}"
            raise HttpError(403, _DENIED[resource_type],
                            f"{self.principal} is not authorized to {_NAMES[operation]} {what}")

    def may_create_topic(self, name: str) -> bool:
        """CreateTopics: CREATE on the cluster or on the topic."""
        return self.may(acl.CREATE, acl.CLUSTER, acl.CLUSTER_NAME) or self.may(acl.CREATE, acl.TOPIC, name)


#: Everything allowed: the HTTP API of a broker without listener security.
OPEN = Access()


def access(request: Request) -> Access:
    """The request's Access (set by the middleware when security is on; OPEN otherwise)."""
    found = request.scope.get("state", {}).get("logan_access")
    if found is not None:
        return found
    from .backend import _current

    if _current is not None and _current.security is not None and _current.security.active:
        # never open by accident: a request that reached a route without the middleware's verdict
        raise HttpError(401, E.SASL_AUTHENTICATION_FAILED, "Authentication required")
    return OPEN
