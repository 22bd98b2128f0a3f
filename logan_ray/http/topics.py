"""Katar's topic resource: GET/POST /topic, GET/PUT/PATCH/DELETE /topic/{name}.

Differences from Katar, chosen for what HTTP users expect: creating an existing
topic answers 409 TOPIC_ALREADY_EXISTS unless ``?if_exists=rename`` asks for
Katar's ``name__0`` behaviour; partitions can only grow (as in Kafka).

With an authorizer, each route checks what Kafka checks for the same work: the list
shows topics the principal may DESCRIBE; GET needs DESCRIBE (the configuration only
with DESCRIBE_CONFIGS, else null); POST needs CREATE on the cluster or the topic; PUT
and PATCH ALTER_CONFIGS (and ALTER to add partitions); DELETE needs DELETE.
"""
from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request, Response

from logan_ray.errors import TopicExistsError
from logan_ray.protocol import errors as E
from logan_ray.security import acl

from .access import OPEN, Access, access
from .backend import current
from .errors import HttpError
from .body import parse, read_body
from .models import TopicCreate, TopicDescription, TopicList, TopicPatch, TopicReplace

router = APIRouter(tags=["topics"])


def _backend(request: Request):
    return current()


def _config(config: dict[str, Any]) -> dict[str, Any]:
    """JSON true/false as Kafka writes them ("true"/"false")."""
    return {k: (str(v).lower() if isinstance(v, bool) else v) for k, v in config.items()}


def describe(backend, name: str, who: Access = OPEN) -> dict[str, Any]:
    """The topic's partitions and offsets; its configuration only when ``who`` may DESCRIBE_CONFIGS it."""
    client = backend.client
    d = client.describe_topic(name)
    offsets = client.partition_offsets(name)
    configs = who.may(acl.DESCRIBE_CONFIGS, acl.TOPIC, name)
    return {
        "name": d["name"], "topic_id": d["topic_id"],
        "partitions": [{"partition": p["partition"], "node_id": p["node_id"],
                        "log_start_offset": offsets[p["partition"]][0], "log_end_offset": offsets[p["partition"]][1]}
                       for p in d["partitions"]],
        "config": client.topic_config(name) if configs else None,
        "overrides": d["config"] if configs else None,
    }


@router.get("/topic", response_model=TopicList, summary="List topic names")
def list_topics(request: Request) -> dict[str, Any]:
    who = access(request)
    return {"topics": [t for t in _backend(request).client.list_topics()
                       if not t.startswith("__") and who.may(acl.DESCRIBE, acl.TOPIC, t)]}


@router.get("/topic/{name}", response_model=TopicDescription, summary="A topic's configuration and partitions")
def get_topic(name: str, request: Request) -> dict[str, Any]:
    who = access(request)
    who.require(acl.DESCRIBE, acl.TOPIC, name)
    return describe(_backend(request), name, who)


@router.post("/topic", status_code=201, response_model=TopicDescription, summary="Create a topic",
             responses={409: {"description": "the topic exists (TOPIC_ALREADY_EXISTS)"}})
async def create_topic(request: Request, response: Response,
                       if_exists: Literal["error", "rename"] = "error") -> dict[str, Any]:
    """409 when the name is taken; ``?if_exists=rename`` creates ``name__0``, ``name__1``, ... instead (Katar)."""
    backend = _backend(request)
    req = parse(TopicCreate, await read_body(request, backend.max_body_bytes))
    from starlette.concurrency import run_in_threadpool

    return await run_in_threadpool(_create, backend, req, if_exists, response, access(request))


def _create(backend, req: TopicCreate, if_exists: str, response: Response, who: Access) -> dict[str, Any]:
    name, n = req.name, 0
    while True:
        if not who.may_create_topic(name):
            raise HttpError(403, E.TOPIC_AUTHORIZATION_FAILED,
                            f"{who.principal} is not authorized to CREATE topic {name!r} (needs CREATE on the "
                            "cluster or the topic)")
        try:
            backend.client.create_topic(name, req.partitions, _config(req.config))
            break
        except TopicExistsError:
            if if_exists != "rename":
                raise
            name, n = f"{req.name}__{n}", n + 1
    response.headers["Location"] = f"topic/{name}"
    return describe(backend, name, who)


@router.put("/topic/{name}", response_model=TopicDescription, summary="Replace a topic's configuration")
def replace_topic(name: str, body: TopicReplace, request: Request) -> dict[str, Any]:
    """Every setting not in the body returns to its default (Katar's PUT)."""
    backend, who = _backend(request), access(request)
    who.require(acl.ALTER_CONFIGS, acl.TOPIC, name)
    _may_grow(backend, who, name, body.partitions)
    backend.client.alter_topic(name, _config(body.config), incremental=False)
    _grow(backend, name, body.partitions)
    return describe(backend, name, who)


@router.patch("/topic/{name}", response_model=TopicDescription, summary="Change some of a topic's settings")
def patch_topic(name: str, body: TopicPatch, request: Request) -> dict[str, Any]:
    """Only the named settings change; ``null`` returns a setting to its default."""
    backend, who = _backend(request), access(request)
    if body.config or body.partitions is None:
        who.require(acl.ALTER_CONFIGS, acl.TOPIC, name)
    _may_grow(backend, who, name, body.partitions)
    if body.config:
        backend.client.alter_topic(name, _config(body.config), incremental=True)
    _grow(backend, name, body.partitions)
    return describe(backend, name, who)


def _may_grow(backend, who: Access, name: str, partitions: int | None) -> None:
    """Adding partitions is Kafka's CreatePartitions: ALTER on the topic (checked before anything changes)."""
    if partitions is None or who.may(acl.ALTER, acl.TOPIC, name):
        return
    who.require(acl.DESCRIBE, acl.TOPIC, name)  # never tell a stranger how many partitions a topic has
    if partitions != len(backend.client.describe_topic(name)["partitions"]):
        who.require(acl.ALTER, acl.TOPIC, name)


def _grow(backend, name: str, partitions: int | None) -> None:
    if partitions is not None and partitions != len(backend.client.describe_topic(name)["partitions"]):
        backend.client.add_partitions(name, partitions)
        backend.forget(name)


@router.delete("/topic/{name}", status_code=204, summary="Delete a topic and all its data")
def delete_topic(name: str, request: Request) -> Response:
    access(request).require(acl.DELETE, acl.TOPIC, name)
    backend = _backend(request)
    backend.client.delete_topic(name)
    backend.forget(name)
    return Response(status_code=204)
