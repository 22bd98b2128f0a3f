"""``/docs``: FastAPI's Swagger UI page with its script, stylesheet and icon served by the app.

FastAPI's default page loads Swagger UI from a CDN, so a browser without internet access sees an
empty page. The files come from the ``swagger-ui-bundle-v2`` package (Swagger UI's own dist files
in a wheel, imported as ``swagger_ui_bundle``; version 5, since FastAPI writes OpenAPI 3.1, which
Swagger UI 4 cannot show); only the three the page names are served, by name, so nothing else of
the package's folder is reachable. ReDoc (``/redoc``) is turned off: its script would come from a CDN too.
"""
from __future__ import annotations

import os

from fastapi import APIRouter, HTTPException, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse

router = APIRouter(include_in_schema=False)

#: The Swagger UI files the page uses, with their media types.
ASSETS = {"swagger-ui-bundle.js": "text/javascript", "swagger-ui.css": "text/css", "favicon-32x32.png": "image/png"}


def _dist() -> str:
    from swagger_ui_bundle import swagger_ui_path

    return swagger_ui_path


@router.get("/docs")
def docs(request: Request) -> HTMLResponse:
    # under a prefix (--http HOST:PORT/PREFIX) Serve sets root_path, as FastAPI's own page uses it
    root = request.scope.get("root_path", "").rstrip("/")
    return get_swagger_ui_html(openapi_url=f"{root}{request.app.openapi_url}", title=f"{request.app.title} - docs",
                               swagger_js_url=f"{root}/docs/swagger-ui-bundle.js",
                               swagger_css_url=f"{root}/docs/swagger-ui.css",
                               swagger_favicon_url=f"{root}/docs/favicon-32x32.png")


@router.get("/docs/{name}")
def asset(name: str) -> FileResponse:
    media = ASSETS.get(name)
    if media is None:
        raise HTTPException(404)
    return FileResponse(os.path.join(_dist(), name), media_type=media,
                        headers={"Cache-Control": "public, max-age=86400"})
