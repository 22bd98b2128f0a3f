"""The FastAPI app and the Ray Serve deployment that serves it.

One replica (``num_cpus=0``, like every logan-ray actor) attaches to the broker
already running on the cluster; Serve's proxy listens on the configured host and
port. Many long-polls and streams wait at once, so the replica takes many
concurrent requests.
"""
from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from logan_ray.errors import LoganError
from logan_ray.protocol import errors as E

from . import console, docs, publish, subscribe, topics
from .body import BODY_METHODS, require_json
from .errors import HttpError, error_body, error_response, unwrap
from .models import ErrorBody

DESCRIPTION = """Katar's HTTP API over logan-ray: topics, publish, stateless reads and a live stream.
Errors are JSON with an HTTP status and the Kafka error code and name."""


def build_app() -> FastAPI:
    app = FastAPI(title="logan-ray HTTP API", description=DESCRIPTION, version="1",
                  responses={"4XX": {"model": ErrorBody}, "5XX": {"model": ErrorBody}},
                  docs_url=None, redoc_url=None)  # logan_ray.http.docs serves /docs without a CDN
    for module in (topics, publish, subscribe, console, docs):
        app.include_router(module.router)

    @app.exception_handler(HttpError)
    async def _http_error(request: Request, exc: HttpError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(LoganError)
    async def _logan_error(request: Request, exc: LoganError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{k: v for k, v in e.items() if k in ("type", "loc", "msg")} for e in exc.errors()]
        if any(e["type"] == "json_invalid" for e in errors):
            return JSONResponse(error_body(E.INVALID_REQUEST, "the body is not valid JSON", errors), status_code=400)
        return JSONResponse(error_body(E.INVALID_REQUEST, "the request does not match the expected shape", errors),
                            status_code=422)

    @app.exception_handler(Exception)
    async def _other(request: Request, exc: Exception) -> JSONResponse:
        return error_response(unwrap(exc))

    @app.middleware("http")
    async def _limit_body(request: Request, call_next):
        if request.method in BODY_METHODS:
            try:
                require_json(request)  # 415 before anything else: a browser sends text/plain cross-origin
            except HttpError as e:
                return error_response(e)
        declared = request.headers.get("content-length")
        from .backend import _current

        limit = _current.max_body_bytes if _current is not None else None
        if limit is not None and declared is not None and declared.isdigit() and int(declared) > limit:
            return error_response(HttpError(413, E.MESSAGE_TOO_LARGE,
                                            f"request body of {declared} bytes exceeds the limit of {limit} bytes"))
        return await call_next(request)

    from .auth import AuthMiddleware
    from .guard import GuardMiddleware

    app.add_middleware(AuthMiddleware)
    # added last: outermost, so a rebound Host or a foreign Origin gets no password check either
    app.add_middleware(GuardMiddleware)
    return app


app = build_app()
