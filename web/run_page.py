"""``tengen serve --run-dir DIR``: a read-only page of a running or finished run.

The page (web/static/run.html, run.js, with plot.js's SVG plots and board.js's
boards) polls this JSON API every few seconds; every answer is JSON, a refusal is
``{"error": message}`` (500 with run/records.py's message, which names the file,
for a record of the run this tengen does not read: a newer format, or damaged):

- ``GET /api/info``: the run's id and directory, its game (``board_view.game_info``)
  and the config's main settings;
- ``GET /api/status[?after=OFFSET]``: the status lines as points for the plots, the
  newest line whole, and the offset to ask from next (web/status_history.py): the
  first call gets the whole run thinned to at most ``MAX_POINTS`` points, later ones
  only the lines appended since;
- ``GET /api/ladder[?known=N]``: ladder.json's promotions from the N-th on;
- ``GET /api/gating``: the newest gating results, rejections too (gating.jsonl);
- ``GET /api/strength[?known=N]``: the strength evaluations (evaluations.jsonl: each
  reference's score and standard error) from the N-th on;
- ``GET /api/games``: the newest self-play games, from the live run's Redis stream
  or the run directory's sample (``source``, ``note``), and the kept gating games;
- ``GET /api/game?key=KEY``: one of them to replay: the board after every move and
  each move's recorded search value and visits (web/replay.py).

A gating result (``/api/gating``, a ladder entry's ``result``, the newest status line's
``last_gating``) carries ``candidate_id`` and ``best_id``, its versions as ids
(``000042``), beside their numbers: the page shows the ids as sent.

Bound to 127.0.0.1 unless ``--host`` says otherwise; off loopback every ``/api/``
call needs ``Authorization: Bearer TOKEN`` (``--token``, or one generated and
written to the run directory's ``serve-token``, or printed on a terminal), which the
page asks for; web/guard.py says what else guards it. The run is read on one thread
(``web.run_view.RunView`` keeps its Redis client and what it decoded), so the
event loop never waits on a file or on Redis.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from aiohttp import web

from tengen.run.records import RecordError
from tengen.web.guard import announce_token, check_exposure, guarded_app
from tengen.web.run_view import RunView, UnknownGame
from tengen.web.server import LOOPBACK, ApiError, add_static, json_errors, run_app, static_page
from tengen.web.status_history import MAX_POINTS

__all__ = ["RunPage", "TOKEN_FILE", "run_serve"]

#: where in the run directory a generated token goes (when stdout is no terminal)
TOKEN_FILE = "serve-token"
T = TypeVar("T")


class RunPage:
    """The page and its API over one ``RunView``; ``app()`` is the aiohttp app.
    ``host``: where it is served; ``token``: what every API call must carry (None:
    nothing, on loopback only)."""

    def __init__(self, view: RunView, *, host: str = LOOPBACK, token: str | None = None):
        self.view = view
        self.host = host
        self.token = token
        self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tengen-run-reader")

    def app(self) -> web.Application:
        app = guarded_app(host=self.host, token=self.token, middlewares=[json_errors])
        app.router.add_get("/", static_page("run.html"))
        app.router.add_get("/api/info", self._info)
        app.router.add_get("/api/status", self._status)
        app.router.add_get("/api/ladder", self._ladder)
        app.router.add_get("/api/gating", self._gating)
        app.router.add_get("/api/strength", self._strength)
        app.router.add_get("/api/games", self._games)
        app.router.add_get("/api/game", self._game)
        add_static(app)
        app.on_cleanup.append(self._shut_down)
        return app

    async def _shut_down(self, app: web.Application) -> None:
        self._reader.shutdown(wait=False, cancel_futures=True)

    async def _read(self, call: Callable[[], T]) -> T:
        try:
            return await asyncio.get_running_loop().run_in_executor(self._reader, call)
        except RecordError as e:
            raise ApiError(500, str(e)) from None

    async def _info(self, request: web.Request) -> web.Response:
        return web.json_response(self.view.info())

    async def _status(self, request: web.Request) -> web.Response:
        after = _offset(request, "after")
        history = await self._read(lambda: self.view.history(after=after, max_points=MAX_POINTS))
        return web.json_response(history.to_json())

    async def _ladder(self, request: web.Request) -> web.Response:
        known = _offset(request, "known") or 0
        return web.json_response(await self._read(lambda: self.view.ladder(known=known)))

    async def _strength(self, request: web.Request) -> web.Response:
        known = _offset(request, "known") or 0
        return web.json_response(await self._read(lambda: self.view.strength(known=known)))

    async def _gating(self, request: web.Request) -> web.Response:
        return web.json_response(await self._read(self.view.gating))

    async def _games(self, request: web.Request) -> web.Response:
        return web.json_response(await self._read(self.view.games))

    async def _game(self, request: web.Request) -> web.Response:
        key = request.query.get("key", "")
        try:
            return web.json_response(await self._read(lambda: self.view.replay(key)))
        except UnknownGame as e:
            raise ApiError(404, str(e)) from None


def _offset(request: web.Request, name: str) -> int | None:
    """An optional integer >= 0 from the query string."""
    text = request.query.get(name)
    if text is None:
        return None
    if not text.isdigit():
        raise ApiError(400, f"{name} must be an integer >= 0, not {text!r}")
    return int(text)


def run_serve(run_dir: str, *, host: str, port: int, token: str | None, open_browser: bool) -> int:
    """Serve the page of the run in ``run_dir`` (``tengen serve``)."""
    token, generated = check_exposure(host, token)
    page = RunPage(RunView(Path(run_dir)), host=host, token=token)
    return run_app(page.app(), host=host, port=port, open_browser=open_browser,
                   after_url=announce_token(token, generated, Path(run_dir) / TOKEN_FILE),
                   exposed="anyone who can reach this machine and has the token can read the run")
