"""``tengen play``: a local page where a person plays the trained model.

One model per server, loaded once (``cluster.checkpoint.load_player``); any number
of games (``web.session.PlaySession``), each with its own id. The model's search
runs on one worker thread (the model and its search trees serve one search at a
time), so the page, and other games, stay answered while it thinks.

The JSON API (all answers are JSON; a refusal is ``{"error": message}``):

- ``GET /api/info``: the game (name, board shape, move texts, coordinates, player
  names, komi) and the search limits and defaults;
- ``POST /api/games`` ``{"person": 0|1}``: a new game, the person playing first
  (0) or second (1); answers its view (``PlaySession.view``);
- ``GET /api/games/ID``: the view, with ``thinking`` while the model searches;
- ``POST /api/games/ID/play`` ``{"action": A}``: the person's move (Go's pass is
  the action H * W); 422 with the reason when the rules refuse it;
- ``POST /api/games/ID/reply`` ``{"simulations": N}`` or ``{"seconds": S}``: the
  model searches and plays;
- ``POST /api/games/ID/undo``, ``POST /api/games/ID/resign``;
- ``GET /api/games/ID/sgf``: a Go game as an SGF file.

Bound to 127.0.0.1 unless ``--host`` says otherwise; off loopback every ``/api/``
call needs the token (``--token``, or one generated: written to the user's
``~/.config/tengen/play-token``, or printed on a terminal), which the page asks for;
web/guard.py says what else guards it. At most ``MAX_SEARCHES`` searches wait or run
at once, ``MAX_SEARCHES_PER_CLIENT`` of one address: past them a search is a 429.
"""

from __future__ import annotations

import asyncio
import secrets
from collections import Counter, OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aiohttp import web

from tengen.engine.games.base import Game, IllegalMove
from tengen.engine.games.go import GoGame
from tengen.play.score import Score, ScoreBelief
from tengen.play.search_player import Analysis, SearchPlayer
from tengen.web.board_view import game_info
from tengen.web.guard import announce_token, check_exposure, guarded_app, user_token_file
from tengen.web.server import LOOPBACK, ApiError, add_static, json_errors, read_json, run_app, static_page
from tengen.web.session import NotYourTurn, PlaySession

__all__ = ["PlayServer", "MAX_VISITS", "MAX_SECONDS", "MAX_SEARCHES", "MAX_SEARCHES_PER_CLIENT", "run_play"]

#: the most visits one move may search (its tree is allocated for them), also the
#: cap of a search by seconds
MAX_VISITS = 10_000
#: the longest search by time the page may ask for
MAX_SECONDS = 60.0
#: games kept in memory; the oldest idle one goes first
MAX_GAMES = 64
#: searches waiting or running at once, from all clients and from one (an address):
#: past them a search is refused (429) rather than queued behind minutes of others
MAX_SEARCHES = 8
MAX_SEARCHES_PER_CLIENT = 2
#: where a generated token goes (when stdout is no terminal), in the user's config directory
TOKEN_FILE = "play-token"


class PlayServer:
    """The page and its API over one ``SearchPlayer``; ``app()`` is the aiohttp app.

    ``simulations``: the page's default visits per move; ``checkpoint``: what the
    page names as the model; ``host``: where it is served; ``token``: what every API
    call must carry (None: nothing, on loopback only); ``score``: the model's score
    head (play/score.py), whose belief about each position it moves in the page shows
    (None: no head)."""

    def __init__(self, game: Game, player: SearchPlayer, *, simulations: int, checkpoint: str,
                 application: tuple[str, str], host: str = LOOPBACK, token: str | None = None,
                 score: Score | None = None):
        if not 1 <= simulations <= MAX_VISITS:
            raise ValueError(f"simulations must be in 1..{MAX_VISITS}, not {simulations}")
        self.game = game
        self.player = player
        self.simulations = simulations
        self.checkpoint = checkpoint
        self.application = application
        self.score = score
        self._games: OrderedDict[str, PlaySession] = OrderedDict()
        self._busy: set[str] = set()  # games whose model is searching or scoring
        self._search = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tengen-search")
        self._searches: Counter[str] = Counter()  # searches waiting or running, by client address
        self.host, self.token = host, token

    def app(self) -> web.Application:
        app = guarded_app(host=self.host, token=self.token, middlewares=[json_errors])
        app.router.add_get("/", static_page("play.html"))
        app.router.add_get("/api/info", self._info)
        app.router.add_post("/api/games", self._new_game)
        app.router.add_get("/api/games/{id}", self._view)
        app.router.add_post("/api/games/{id}/play", self._play)
        app.router.add_post("/api/games/{id}/reply", self._reply)
        app.router.add_post("/api/games/{id}/undo", self._undo)
        app.router.add_post("/api/games/{id}/resign", self._resign)
        app.router.add_get("/api/games/{id}/sgf", self._sgf)
        add_static(app)
        app.on_cleanup.append(self._shut_down)
        return app

    async def _shut_down(self, app: web.Application) -> None:
        self._search.shutdown(wait=False, cancel_futures=True)

    # -- handlers ------------------------------------------------------------------------
    async def _info(self, request: web.Request) -> web.Response:
        return web.json_response({
            **game_info(self.game),
            "checkpoint": self.checkpoint,
            "simulations": self.simulations,
            "max_visits": MAX_VISITS,
            "max_seconds": MAX_SECONDS,
        })

    async def _new_game(self, request: web.Request) -> web.Response:
        body = await read_json(request)
        person = body.get("person", 0)
        if person not in (0, 1) or isinstance(person, bool):
            raise ApiError(400, f"person must be 0 (play first) or 1 (play second), not {person!r}")
        session = PlaySession(self.game, person=person, session_id=secrets.token_hex(6))
        self._games[session.id] = session
        idle = [key for key in self._games if key not in self._busy]
        for key in idle[: max(0, len(self._games) - MAX_GAMES)]:
            del self._games[key]
        return self._answer(session)

    async def _view(self, request: web.Request) -> web.Response:
        return self._answer(self._session(request))

    async def _play(self, request: web.Request) -> web.Response:
        session = self._idle_session(request)
        body = await read_json(request)
        action = body.get("action")
        if not isinstance(action, int) or isinstance(action, bool):
            raise ApiError(400, f"action must be an integer move, not {action!r}")
        try:
            session.play(action)
        except (IllegalMove, NotYourTurn) as e:
            raise ApiError(422, str(e)) from None
        await self._score(session)
        return self._answer(session)

    async def _reply(self, request: web.Request) -> web.Response:
        session = self._idle_session(request)
        limits = self._limits(await read_json(request))
        if not session.model_to_move:
            raise ApiError(422, "the game is over" if session.over else "it is your move")
        client = request.remote or "?"
        if self._searches[client] >= MAX_SEARCHES_PER_CLIENT:
            raise ApiError(429, f"{MAX_SEARCHES_PER_CLIENT} of your searches are already waiting or running: "
                                "wait for one to finish")
        if self._searches.total() >= MAX_SEARCHES:
            raise ApiError(429, f"the model has {MAX_SEARCHES} searches waiting or running: try again shortly")
        state, history = session.position()
        score = self.score

        def search() -> tuple[Analysis, ScoreBelief | None]:
            return (self.player.search(self.game, state, history, **limits),
                    None if score is None else score(state, history))

        self._busy.add(session.id)
        self._searches[client] += 1
        try:
            analysis, belief = await asyncio.get_running_loop().run_in_executor(self._search, search)
            session.play_model(analysis, belief)
        except (ValueError, RuntimeError, MemoryError) as e:  # the page shows why, the server goes on
            raise ApiError(500, f"the model's search failed: {e}") from None
        finally:
            self._busy.discard(session.id)
            self._searches[client] -= 1
            if not self._searches[client]:
                del self._searches[client]
        await self._score(session)
        return self._answer(session)

    async def _undo(self, request: web.Request) -> web.Response:
        session = self._idle_session(request)
        try:
            session.undo()
        except NotYourTurn as e:
            raise ApiError(422, str(e)) from None
        return self._answer(session)

    async def _resign(self, request: web.Request) -> web.Response:
        session = self._idle_session(request)
        try:
            session.resign()
        except NotYourTurn as e:
            raise ApiError(422, str(e)) from None
        return self._answer(session)

    async def _sgf(self, request: web.Request) -> web.Response:
        session = self._idle_session(request)
        await self._score(session)
        try:
            text = session.sgf(application=self.application)
        except NotYourTurn as e:
            raise ApiError(422, str(e)) from None
        return web.Response(text=text, content_type="application/x-go-sgf", headers={
            "Content-Disposition": f'attachment; filename="tengen-{self.game.name}-{session.id}.sgf"'})

    # -- helpers -------------------------------------------------------------------------
    def _session(self, request: web.Request) -> PlaySession:
        session = self._games.get(request.match_info["id"])
        if session is None:
            raise ApiError(404, "no such game here (the server may have restarted): start a new game")
        return session

    def _idle_session(self, request: web.Request) -> PlaySession:
        session = self._session(request)
        if session.id in self._busy:
            raise ApiError(409, "wait: the model is thinking")
        return session

    def _limits(self, body: dict[str, Any]) -> dict[str, Any]:
        """``search`` keywords from ``{"simulations": N}`` or ``{"seconds": S}``."""
        if "seconds" in body:
            seconds = body["seconds"]
            if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 0 < seconds <= MAX_SECONDS:
                raise ApiError(400, f"seconds must be a number in (0, {MAX_SECONDS:g}], not {seconds!r}")
            return {"seconds": float(seconds), "max_visits": MAX_VISITS}
        visits = body.get("simulations", self.simulations)
        if isinstance(visits, bool) or not isinstance(visits, int) or not 1 <= visits <= MAX_VISITS:
            raise ApiError(400, f"simulations must be an integer in 1..{MAX_VISITS}, not {visits!r}")
        return {"max_visits": visits}

    async def _score(self, session: PlaySession) -> None:
        """Score a finished game off the event loop (Go's dead-stone playouts)."""
        if not session.over:
            return
        self._busy.add(session.id)
        try:
            await asyncio.to_thread(session.result)
        finally:
            self._busy.discard(session.id)

    def _answer(self, session: PlaySession) -> web.Response:
        return web.json_response({**session.view(), "thinking": session.id in self._busy})


def run_play(checkpoint: str, config: str | None, *, simulations: int | None, host: str, port: int,
             token: str | None, open_browser: bool) -> int:
    """Load the checkpoint once, then serve the page (``tengen play``)."""
    from tengen import __version__
    from tengen.run.checkpoint import load_player

    token, generated = check_exposure(host, token)
    loaded, game, player = load_player(checkpoint, config, 1, warm_up=True)
    # The search's compiled kernels load (or, the first time on a machine, compile)
    # now rather than in the first move a person waits for.
    player.search(game, game.initial_state(), max_visits=2 * loaded.mcts.leaves_per_round)
    # The default of the page is the search the model was trained with.
    default = simulations if simulations is not None else min(loaded.mcts.simulations, MAX_VISITS)
    score = None
    head = getattr(player.evaluate, "score", None) if loaded.network.score else None
    if head is not None and isinstance(game, GoGame):
        from tengen.play.score import NetworkScore

        score = NetworkScore(game, head)
    server = PlayServer(game, player, simulations=default, checkpoint=checkpoint,
                        application=("tengen", __version__), host=host, token=token, score=score)
    return run_app(server.app(), host=host, port=port, open_browser=open_browser,
                   after_url=announce_token(token, generated, user_token_file(TOKEN_FILE)),
                   exposed="anyone who can reach this machine and has the token can play the model")
