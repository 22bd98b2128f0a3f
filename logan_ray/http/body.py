"""Reading a request body with a bound: oversized bodies get 413 before anything is parsed."""
from __future__ import annotations

from fastapi import Request
from pydantic import BaseModel, ValidationError

from logan_ray.protocol import errors as E

from .errors import HttpError


async def read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise HttpError(413, E.MESSAGE_TOO_LARGE, f"request body of {declared} bytes exceeds the limit of {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HttpError(413, E.MESSAGE_TOO_LARGE, f"request body exceeds the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def parse(model: type[BaseModel], body: bytes) -> BaseModel:
    """Malformed JSON -> 400; well-formed JSON of the wrong shape or types -> 422 (both INVALID_REQUEST)."""
    try:
        return model.model_validate_json(body)
    except ValidationError as e:
        errors = e.errors(include_url=False, include_context=False, include_input=False)
        if any(err["type"] == "json_invalid" for err in errors):
            raise HttpError(400, E.INVALID_REQUEST, f"the body is not valid JSON: {errors[0]['msg']}") from None
        raise HttpError(422, E.INVALID_REQUEST, "the body does not match the expected shape", errors) from None


def documented_body(model: type[BaseModel]) -> dict:
    """``openapi_extra`` naming ``model`` as the required JSON body of an endpoint that reads it itself.

    Endpoints read their body with :func:`read_body` (bounded) and :func:`parse`
    instead of a FastAPI body parameter, so the API docs learn its shape here.
    """
    return {"requestBody": {"required": True, "content": {"application/json": {
        "schema": model.model_json_schema(ref_template="#/components/schemas/{model}")}}}}
