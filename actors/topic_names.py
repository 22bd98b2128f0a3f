"""Kafka's topic-name rules, enforced before anything touches disk."""
from __future__ import annotations

import re

from logan_ray.common.errors import InvalidTopicError

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")  # used with fullmatch: "$" would let a trailing newline through

#: Topics the broker writes itself (Kafka's ``Topic.INTERNAL_TOPICS``). Clients may read
#: them, but not write, truncate, delete, repartition or reconfigure them.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


def is_internal(name: object) -> bool:
    return name in INTERNAL_TOPICS


def refuse_internal(name: object, action: str) -> None:
    """Raise INVALID_TOPIC_EXCEPTION (17), the code Kafka answers a produce or DeleteRecords
    on an internal topic with, for any client change to one."""
    if name in INTERNAL_TOPICS:
        raise InvalidTopicError(f"Cannot {action} internal topic {name}")


def validate_topic_name(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise InvalidTopicError(f"topic name must be a non-empty string, got {name!r}")
    if name in (".", ".."):
        raise InvalidTopicError(f"topic name cannot be {name!r}")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidTopicError(f"topic name is {len(name)} characters; the limit is {MAX_NAME_LENGTH}")
    if not _LEGAL.fullmatch(name):
        raise InvalidTopicError(f"topic name {name!r} has characters outside [a-zA-Z0-9._-]")
    return name
