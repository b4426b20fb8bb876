"""What keeps a local page to the person it is served for, against other hosts and
other web sites (every page's app is a ``guarded_app``), and where a
generated token goes (``announce_token``).

- **Other hosts.** Off loopback every ``/api/`` call needs ``Authorization: Bearer
  TOKEN`` (``require_token``); a page is never served off loopback without one
  (``check_exposure``). The HTML, JavaScript and CSS stay open: they hold nothing, and
  the page must load to ask for the token.
- **DNS rebinding.** A page on loopback has no token, so a site whose name comes to
  resolve to 127.0.0.1 could read it from the user's own browser: such a server answers
  only requests whose ``Host`` is a loopback name or address (421 otherwise). Off
  loopback the ``Host`` can be any name of the machine, and the token, which a
  rebinding site never has, is the guard.
- **Other sites.** A request that changes state (any method but GET and HEAD) is
  refused when the browser says it comes from another site (``Origin`` not this
  page's, or ``Sec-Fetch-Site: cross-site``) and unless its body is declared
  ``application/json``, which no form of another site can send without a preflight
  that this server never grants.
- **Headers that cost nothing**: a Content-Security-Policy that allows only our own
  files (no inline script or style, no framing), ``X-Content-Type-Options: nosniff``,
  ``Referrer-Policy: no-referrer``, and ``Cache-Control: no-store`` on API answers.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

__all__ = ["MIN_TOKEN_LENGTH", "CONTENT_SECURITY_POLICY", "guarded_app", "require_token", "is_loopback",
           "check_exposure", "announce_token", "write_token_file", "user_token_file"]

#: the shortest ``--token`` taken (a generated one is 32 characters)
MIN_TOKEN_LENGTH = 16
#: the pages load their own script, style and data only, and nobody frames them
CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                           "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
                           "frame-ancestors 'none'")
_SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Middleware = Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]


def is_loopback(host: str) -> bool:
    """Whether ``host`` is an address of this machine only (127.0.0.0/8, ::1, localhost)."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere


def guarded_app(*, host: str, token: str | None, middlewares: Sequence[Middleware] = ()) -> web.Application:
    """An app for a page served on ``host`` with ``token`` (None: none, on loopback
    only): the guards outermost, then ``middlewares``; every answer, errors and
    aiohttp's own 404s included, with the security headers."""
    if token is None and not is_loopback(host):
        raise ValueError(f"a page on {host} needs a token")
    guards: list[Middleware] = [loopback_host_only] if is_loopback(host) else []
    guards.append(same_site_changes_only)
    if token is not None:
        guards.append(require_token(token))
    chain: list[Any] = [*guards, *middlewares]  # aiohttp's own Middleware type is private
    app = web.Application(middlewares=chain)
    app.on_response_prepare.append(_security_headers)
    return app


def _refuse(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


async def _security_headers(request: web.Request, response: web.StreamResponse) -> None:
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    if request.path.startswith("/api/"):
        response.headers["Cache-Control"] = "no-store"


@web.middleware
async def loopback_host_only(request: web.Request, handler: Handler) -> web.StreamResponse:
    name = urlsplit(f"//{request.host}").hostname or ""
    if not is_loopback(name):
        return _refuse(421, f"this page answers to 127.0.0.1 and localhost only, not to {request.host!r}")
    return await handler(request)


@web.middleware
async def same_site_changes_only(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.method in _SAFE_METHODS:
        return await handler(request)
    origin = request.headers.get("Origin")
    if origin is not None and urlsplit(origin).netloc.lower() != request.host.lower():
        return _refuse(403, f"a request from {origin} may not change this page's state")
    if request.headers.get("Sec-Fetch-Site") == "cross-site":
        return _refuse(403, "a request from another site may not change this page's state")
    if request.path.startswith("/api/") and request.content_type != "application/json":
        return _refuse(415, f"the API takes application/json, not {request.content_type or 'no Content-Type'}")
    return await handler(request)


def require_token(token: str) -> Middleware:
    """A middleware that answers 401 to any ``/api/`` request without
    ``Authorization: Bearer TOKEN``."""
    expected = token.encode()

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path.startswith("/api/"):
            scheme, _, given = request.headers.get("Authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not secrets.compare_digest(given.strip().encode(), expected):
                return web.json_response({"error": "this page needs its token (the one its command wrote or "
                                          "was given)"}, status=401, headers={"WWW-Authenticate": "Bearer"})
        return await handler(request)

    return check


def check_exposure(host: str, token: str | None) -> tuple[str | None, bool]:
    """``(token, generated)``: the token the page needs on ``host``. Off loopback a page
    is never open: a token is generated when none is given. ValueError for a token
    too short to guard anything."""
    if token is not None and len(token) < MIN_TOKEN_LENGTH:
        raise ValueError(f"--token must be at least {MIN_TOKEN_LENGTH} characters")
    if token is None and not is_loopback(host):
        return secrets.token_urlsafe(24), True
    return token, False


def write_token_file(path: Path, token: str) -> None:
    """``token`` into ``path``, readable by this user alone (0600 even where the file
    was there before, never through a symbolic link)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchmod(fd, 0o600)
        f.write(token + "\n")


def user_token_file(name: str) -> Path:
    """``$XDG_CONFIG_HOME/tengen/NAME`` (``~/.config/tengen/NAME``): where a command
    without a run directory keeps its token."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "tengen" / name


def announce_token(token: str | None, generated: bool, file: Path, *, terminal: bool | None = None) -> list[str]:
    """The lines to print after the URL about a generated token: on a terminal the
    token itself; elsewhere (a log that keeps it) it goes to ``file`` (0600) and the
    line names the file. Nothing for a token the user gave."""
    if token is None or not generated:
        return []
    if sys.stdout.isatty() if terminal is None else terminal:
        return [f"token: {token}"]
    write_token_file(file, token)
    return [f"token: in {file} (readable by you alone)"]
