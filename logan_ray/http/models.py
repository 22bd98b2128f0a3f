"""Request and response shapes of the HTTP API (they also make the OpenAPI description at /docs).

Records in publish bodies are TypedDicts, not models: a 10,000-record body is
validated in pydantic's Rust core without building a Python object per record.
"""
from __future__ import annotations

from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import NotRequired, TypedDict

ConfigValue = Union[str, int, float, bool]
Encoding = Literal["utf8", "base64"]
Acks = Literal[0, 1, -1, "all"]
Position = Literal["earliest", "latest"]


class TopicCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="topic name (Kafka's rules: [a-zA-Z0-9._-], at most 249 characters)")
    partitions: int = Field(1, description="number of partitions")
    config: dict[str, ConfigValue] = Field(default_factory=dict,
                                           description="Kafka topic configs, e.g. retention.ms, cleanup.policy")


class TopicReplace(BaseModel):
    """PUT: the complete configuration; every setting not named returns to its default."""

    model_config = ConfigDict(extra="forbid")
    config: dict[str, ConfigValue] = Field(default_factory=dict)
    partitions: Optional[int] = Field(None, description="grow to this many partitions (Kafka never shrinks a topic)")


class TopicPatch(BaseModel):
    """PATCH: only the settings named change; a null value returns that setting to its default."""

    model_config = ConfigDict(extra="forbid")
    config: dict[str, Optional[ConfigValue]] = Field(default_factory=dict)
    partitions: Optional[int] = Field(None, description="grow to this many partitions (Kafka never shrinks a topic)")


class PartitionInfo(BaseModel):
    partition: int
    node_id: str
    log_start_offset: int
    log_end_offset: int


class TopicDescription(BaseModel):
    name: str
    topic_id: str
    partitions: list[PartitionInfo]
    config: Optional[dict[str, str]] = Field(description="effective configuration (defaults included); null when "
                                                         "the principal may not DESCRIBE_CONFIGS the topic")
    overrides: Optional[dict[str, str]] = Field(description="the settings that differ from the broker defaults "
                                                            "(null like config)")


class TopicList(BaseModel):
    topics: list[str]


class PublishRecord(TypedDict):
    """``value``: a string (UTF-8, or base64 with ``encoding: base64``), null, or any other JSON
    (stored as its compact JSON text). ``headers``: {name: value} or [[name, value], ...]."""

    value: NotRequired[Any]
    key: NotRequired[Optional[str]]
    headers: NotRequired[Union[dict[str, Optional[str]], list[tuple[str, Optional[str]]], None]]
    partition: NotRequired[Optional[int]]
    timestamp: NotRequired[Optional[int]]


class PublishRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    topic: str
    records: list[PublishRecord] = Field(min_length=1, description="one or many records, kept in this order per partition")
    encoding: Encoding = Field("utf8", description="how key, value and header values are written in this body")
    acks: Acks = Field("all", description="0: no wait (offsets -1); 1 or all/-1: after the append (one copy: the same)")


class PublishedRecord(BaseModel):
    partition: int
    offset: int
    timestamp: int


class PublishResponse(BaseModel):
    topic: str
    records: list[PublishedRecord]


class SubscribeRequest(BaseModel):
    """A stateless read ("dumb broker"): the client keeps its position and sends it with each read.

    Give one of ``offset``, ``timestamp`` (first record at or after this time, in ms) or
    ``position``; the default is ``earliest``.
    """

    model_config = ConfigDict(extra="forbid")
    topic: str
    partition: int = 0
    offset: Optional[int] = Field(None, ge=0)
    timestamp: Optional[int] = None
    position: Optional[Position] = None
    max_records: int = Field(10_000, ge=1, le=1_000_000)
    max_bytes: int = Field(1 << 20, ge=1, le=64 << 20)
    timeout_ms: int = Field(0, ge=0, le=60_000, description="long-poll: wait up to this long for a first record")
    encoding: Encoding = "utf8"


class Record(BaseModel):
    offset: int
    timestamp: int
    key: Optional[str]
    value: Optional[str]
    headers: list[tuple[str, Optional[str]]]


class SubscribeResponse(BaseModel):
    topic: str
    partition: int
    records: list[Record]
    next_offset: int = Field(description="send this as `offset` in the next read")
    high_watermark: int
    log_start_offset: int


class ErrorBody(BaseModel):
    error_code: int = Field(description="Kafka protocol error code")
    error_name: str = Field(description="Kafka protocol error name, e.g. UNKNOWN_TOPIC_OR_PARTITION")
    message: str
    detail: Any = None
