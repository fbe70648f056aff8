"""The API's documentation pages, `/docs` (Swagger UI) and `/redoc` (ReDoc), offline.

FastAPI's own pages load Swagger UI and ReDoc from a CDN: without internet they are
blank, and their inline script needs a policy that allows any inline script. These
pages load the assets the `fastapi-offline` distribution ships (Swagger UI and ReDoc,
bundled, MIT) from this server, start them with a script of ours served from here
too, and carry a Content-Security-Policy that allows nothing from anywhere else.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

from verifier.service.api.errors import error

ASSETS = "/docs/assets"
# What each page may load: scripts, styles, fonts and data from this server only.
# ReDoc draws its pages with styles it writes at run time (styled-components), which a
# policy can only allow as inline styles; scripts stay this server's only, there too.
_BASE_CSP = (
    "default-src 'none'; script-src 'self'; img-src 'self' data:; font-src 'self'; "
    "connect-src 'self'; worker-src 'self' blob:; form-action 'none'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
SWAGGER_CSP = _BASE_CSP + "; style-src 'self'"
REDOC_CSP = _BASE_CSP + "; style-src 'self' 'unsafe-inline'"
_HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}

# Swagger UI started on our document; no validator badge (it would call a public
# validator with the document's URL), deep links to each operation.
_SWAGGER_INIT = b"""window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  validatorUrl: null,
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout"
});
"""

_SHIPPED = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "redoc.standalone.js": "text/javascript",
    "favicon.png": "image/png",
}

_SWAGGER_PAGE = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>verifier API · Swagger UI</title>
<link rel="stylesheet" href="{ASSETS}/swagger-ui.css">
<link rel="icon" href="{ASSETS}/favicon.png">
</head>
<body>
<div id="swagger-ui"></div>
<script src="{ASSETS}/swagger-ui-bundle.js"></script>
<script src="{ASSETS}/swagger-init.js"></script>
</body>
</html>
"""

_REDOC_PAGE = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>verifier API · ReDoc</title>
<link rel="icon" href="{ASSETS}/favicon.png">
</head>
<body>
<redoc spec-url="/openapi.json" hide-download-button></redoc>
<script src="{ASSETS}/redoc.standalone.js"></script>
</body>
</html>
"""

router = APIRouter(include_in_schema=False)


# The one address ReDoc's bundle loads by itself (the logo of its footer): our icon instead.
_REDOC_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"


@cache
def _asset(name: str) -> bytes:
    """An asset's bytes, read once: the distribution's, or our start script."""
    if name == "swagger-init.js":
        return _SWAGGER_INIT
    data = resources.files("fastapi_offline").joinpath("static", name).read_bytes()
    if name == "redoc.standalone.js":
        data = data.replace(_REDOC_LOGO, f"{ASSETS}/favicon.png".encode())
    return data


@router.get("/docs")
async def swagger() -> HTMLResponse:
    """Swagger UI on the API's document, from this server's assets only."""
    return HTMLResponse(_SWAGGER_PAGE, headers={**_HEADERS, "Content-Security-Policy": SWAGGER_CSP})


@router.get("/redoc")
async def redoc() -> HTMLResponse:
    """ReDoc on the API's document, from this server's assets only."""
    return HTMLResponse(_REDOC_PAGE, headers={**_HEADERS, "Content-Security-Policy": REDOC_CSP})


@router.get(ASSETS + "/{name}")
async def asset(name: str) -> Response:
    """Swagger UI's and ReDoc's files, and the script that starts Swagger UI."""
    media = "text/javascript" if name == "swagger-init.js" else _SHIPPED.get(name)
    if media is None:
        return error(404, "not_found", f"no asset {name!r}", "name", headers=_HEADERS)
    headers = {**_HEADERS, "Cache-Control": "public, max-age=86400"}
    return Response(_asset(name), media_type=media, headers=headers)
