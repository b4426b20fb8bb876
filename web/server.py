"""What tengen's local web pages share: aiohttp, the static files, JSON errors, and
starting a server that says where it is.

aiohttp, not Starlette with uvicorn: Ray already brings it (one server library
in the environment, not three), and its ``AppRunner`` gives the bound port of
``--port 0`` and a clean stop without a second process model. A page is a static
HTML file with plain JavaScript and SVG (``web/static/``, no build step) that talks
to a JSON API under ``/api/``.

Every page's app is a ``web.guard.guarded_app`` (its token, DNS rebinding, other
sites, security headers). ``run_app`` binds to 127.0.0.1 unless told otherwise, prints the page's URL as the
first line of stdout (what a script or a test reads to find the port), optionally
opens a browser on it, and serves until Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import webbrowser
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from aiohttp import web

__all__ = ["LOOPBACK", "STATIC", "ApiError", "json_errors", "read_json", "static_page", "add_static", "run_app",
           "url_of"]

LOOPBACK = "127.0.0.1"
#: the pages' HTML, JavaScript and CSS, shipped as package data
STATIC = Path(__file__).resolve().parent / "static"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ApiError(Exception):
    """A request the API refuses: ``status`` and a message for the page to show."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """An ``ApiError`` becomes ``{"error": message}`` with its status."""
    try:
        return await handler(request)
    except ApiError as e:
        return web.json_response({"error": e.message}, status=e.status)


async def read_json(request: web.Request) -> dict[str, Any]:
    """The request's body as a JSON object (an empty body is ``{}``)."""
    raw = await request.read()
    if not raw:
        return {}
    try:
        body = json.loads(raw)
    except ValueError as e:
        raise ApiError(400, f"the body is not JSON: {e}") from None
    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object")
    return body


def static_page(name: str) -> Handler:
    """A handler that answers with ``web/static/NAME``."""
    path = STATIC / name

    async def handler(request: web.Request) -> web.StreamResponse:
        return web.FileResponse(path, headers={"Cache-Control": "no-cache"})

    return handler


def add_static(app: web.Application) -> None:
    """``/static/...``: the shared JavaScript and CSS."""
    app.router.add_static("/static/", STATIC)


def url_of(host: str, port: int) -> str:
    return f"http://{f'[{host}]' if ':' in host else host}:{port}/"


async def _serve(app: web.Application, host: str, port: int, on_ready: Callable[[str], None]) -> None:
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0]  # (host, port[, ...]): the port that --port 0 got
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        on_ready(url_of(host, int(bound[1])))
        await stop.wait()
    finally:
        await runner.cleanup()


def run_app(app: web.Application, *, host: str = LOOPBACK, port: int = 0, open_browser: bool = False,
            after_url: Sequence[str] = (), exposed: str = "anyone who can reach this machine can use the page") -> int:
    """Serve ``app`` until Ctrl-C or SIGTERM; the URL is stdout's first line, then the
    lines ``after_url``; off loopback, stderr says ``exposed`` first, so that whoever
    has read the URL finds the warning written."""

    def ready(url: str) -> None:
        if host != LOOPBACK:
            print(f"serving on {host}: {exposed}", file=sys.stderr, flush=True)
        print(url, flush=True)
        for line in after_url:
            print(line, flush=True)
        if open_browser and not webbrowser.open(url):
            print(f"found no browser to open; open {url} yourself", file=sys.stderr, flush=True)

    try:
        asyncio.run(_serve(app, host, port, ready))
    except OSError as e:  # the port is taken, the host is not this machine's
        print(f"cannot listen on {host}:{port}: {e.strerror or e}", file=sys.stderr)
        return 1
    return 0
