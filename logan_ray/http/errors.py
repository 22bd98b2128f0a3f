"""Errors as JSON: an HTTP status plus the Kafka error code and name a Kafka client would see.

Every body is ``{"error_code": int, "error_name": str, "message": str}`` (plus
``detail`` for validation errors). The status follows what an HTTP user expects;
the code follows Kafka (logan_ray.errors and the protocol's error table).
"""
from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from logan_ray import errors as L
from logan_ray.protocol import errors as E

# Most specific first: the first class an error is an instance of decides the status.
_STATUS: list[tuple[type, int]] = [
    (L.UnknownTopicError, 404),
    (L.UnknownPartitionError, 404),
    (L.GroupIdNotFoundError, 404),
    (L.TopicExistsError, 409),
    (L.NonEmptyGroupError, 409),
    (L.RecordTooLargeError, 413),
    (L.OffsetOutOfRangeError, 416),
    (L.InvalidTopicError, 400),
    (L.InvalidConfigError, 400),
    (L.InvalidPartitionsError, 400),
    (L.InvalidReplicationFactorError, 400),
    (L.InvalidRecordError, 400),
    (L.InvalidTimestampError, 400),
    (L.CorruptRecordError, 400),
    (L.SerializationError, 400),
    (L.RequestTimedOutError, 504),
    (L.NotRunningError, 503),
    (L.LogClosedError, 503),
]


#: The challenge of every 401 (RFC 7617): browsers then ask for a user name and password.
CHALLENGE = 'Basic realm="logan-ray", charset="UTF-8"'


class HttpError(Exception):
    """An HTTP-level refusal (bad JSON, bad base64, oversized body) with its Kafka code."""

    def __init__(self, status: int, code: int, message: str, detail: Any = None) -> None:
        super().__init__(message)
        self.status, self.code, self.detail = status, code, detail


def status_for(exc: BaseException) -> int:
    for cls, status in _STATUS:
        if isinstance(exc, cls):
            return status
    return 500


def error_body(code: int, message: str, detail: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {"error_code": code, "error_name": E.error_name(code), "message": message}
    if detail is not None:
        body["detail"] = detail
    return body


def error_response(exc: BaseException) -> JSONResponse:
    if isinstance(exc, HttpError):
        headers = {"WWW-Authenticate": CHALLENGE} if exc.status == 401 else None
        return JSONResponse(error_body(exc.code, str(exc), exc.detail), status_code=exc.status, headers=headers)
    code = getattr(exc, "code", E.UNKNOWN_SERVER_ERROR)
    if not isinstance(code, int) or code == 0:
        code = E.UNKNOWN_SERVER_ERROR
    return JSONResponse(error_body(code, str(exc) or type(exc).__name__), status_code=status_for(exc))


def unwrap(exc: BaseException) -> BaseException:
    """The logan-ray error inside a Ray task error, or ``exc`` itself."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, L.LoganError) else exc
