"""Reading a request body: JSON only (415 otherwise), with a bound (413 before anything is parsed)."""
from __future__ import annotations

from fastapi import Request
from pydantic import BaseModel, ValidationError

from logan_ray.protocol import errors as E

from .errors import HttpError


#: Methods whose requests carry a body: every endpoint with one reads JSON (the app's middleware checks).
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def require_json(request: Request) -> None:
    """415 unless the body is declared ``application/json`` (for every POST, PUT and PATCH).

    A web page can make a browser send a cross-origin POST without asking the server first
    only with a "simple" type (``text/plain``, form encodings), carrying any cached Basic
    credentials; a JSON API that reads such bodies takes orders from every site the user opens.
    """
    declared = request.headers.get("content-type")
    media = (declared or "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        raise HttpError(415, E.INVALID_REQUEST,
                        f"the body must be JSON with Content-Type: application/json, not {declared or 'none'}")


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
