"""The page's web application (Starlette): the page and its scripts, styles and vendored libraries from the
package, and three JSON routes the page calls, answered by the `Page` it is given (the command line's commands:
llmcalc/cli/page.py):

- GET  /api/schema  — every view's command: help, arguments, options (Page.schema);
- POST /api/answer  — a question (a command line, a pasted file; Page.question reads it) → the report or the
  command line's one-line error (Page.answer);
- GET  /api/health  — {"ok": true}, for whoever started the server to wait on.

A malformed request gets a 4xx and {"error": one line}; a request body over MAX_REQUEST_BYTES is refused before
it is read whole. The page's Content-Security-Policy allows only this server: no script, style, font or request
reaches another host. Nothing is written to disk (a Hub id is fetched into huggingface_hub's own cache)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from llmcalc.errors import clip
from llmcalc.ui.questions import MAX_REQUEST_BYTES, BadQuestion, Question

STATIC = Path(__file__).resolve().parent / "static"
POLICY = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
          "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
"""The page's Content-Security-Policy: everything from this server, nothing from elsewhere."""
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
"""Addresses of this machine only: `ui --host` any other warns that the network can use the page."""
LOCAL_NAMES = ("127.0.0.1", "localhost", "[::1]")
"""Host names a request to a local server may be addressed to."""


def _json(data, status: int = 200) -> Response:
    from llmcalc.render.formats import strict_json

    return Response(strict_json(data, indent=None), status_code=status, media_type="application/json")


class Page(Protocol):
    """What answers the page: the views' schema, a request's body read into a Question (BadQuestion if the page
    would not send it), and a Question's answer (a dict with `code`, `command_line`, then `report`, or `error` and
    `field`)."""

    def schema(self) -> dict[str, Any]: ...

    def question(self, body: Any) -> Question: ...

    def answer(self, q: Question) -> dict[str, Any]: ...


async def index(request: Request) -> Response:
    return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})


async def schema(request: Request) -> Response:
    return _json(request.app.state.page.schema())


async def health(request: Request) -> Response:
    return _json({"ok": True})


async def answer_route(request: Request) -> Response:
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":  # its media type
        return _json({"error": "send the question as JSON (Content-Type: application/json)"}, 415)
    declared = request.headers.get("content-length")
    if declared is not None and not (declared.isascii() and declared.isdigit() and int(declared) <= MAX_REQUEST_BYTES):
        return _json({"error": f"request over {MAX_REQUEST_BYTES:,} bytes; paste a config.json or spec of at most "
                               "1 MiB"}, 413)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_REQUEST_BYTES:
            return _json({"error": f"request over {MAX_REQUEST_BYTES:,} bytes"}, 413)
    try:
        data = json.loads(body.decode("utf-8"), parse_constant=_refuse_constant, object_pairs_hook=_keys_once)
        q = request.app.state.page.question(data)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return _json({"error": "the request body is not valid UTF-8 JSON"}, 400)
    except (BadQuestion, ValueError) as e:
        return _json({"error": str(e)}, 400)
    from starlette.concurrency import run_in_threadpool

    result = await run_in_threadpool(request.app.state.page.answer, q)
    return _json(result)  # bad input is an answer too: the command line's one line, beside its field


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not JSON; give finite numbers")


def _keys_once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object of the question, refused where it gives a key twice (json would keep the last)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"{clip(key)!r} is given twice in one object; give each key once")
        out[key] = value
    return out


async def _http_error(request: Request, e: Exception) -> Response:
    status = getattr(e, "status_code", 500)
    detail = getattr(e, "detail", None) or "error"
    return _json({"error": " ".join(str(detail).split())}, status)


async def _server_error(request: Request, e: Exception) -> Response:
    return _json({"error": f"internal error ({type(e).__name__}); the server's log has the details"}, 500)


def _policy(local: bool):
    """Middleware: on a local address, a request addressed to another host name is refused (a page of another site
    cannot reach the server through DNS rebinding); every response carries the page's policy headers."""

    async def dispatch(request: Request, call_next):
        host = request.headers.get("host", "").rsplit(":", 1)[0] if "]" not in request.headers.get("host", "") \
            else request.headers["host"].split("]")[0] + "]"
        if local and host not in LOCAL_NAMES:
            return _json({"error": f"host {clip(host, 60)!r} refused: the page answers requests to 127.0.0.1 or "
                                   "localhost"}, 400)
        return _headed(await call_next(request))

    return dispatch


def _headed(response: Response) -> Response:
    response.headers["Content-Security-Policy"] = POLICY
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


def create_app(page: Page, host: str = "127.0.0.1") -> Starlette:
    """The application answered by `page`; bound to a local `host`, it answers only requests addressed to a local
    name."""
    from starlette.middleware.base import BaseHTTPMiddleware

    middleware = [Middleware(BaseHTTPMiddleware, dispatch=_policy(host in LOCAL_HOSTS))]
    routes = [Route("/", index), Route("/api/schema", schema), Route("/api/health", health),
              Route("/api/answer", answer_route, methods=["POST"]),
              Mount("/static", StaticFiles(directory=STATIC), name="static")]
    app = Starlette(routes=routes, middleware=middleware,
                    exception_handlers={HTTPException: _http_error, 500: _server_error})
    app.state.page = page
    return app
