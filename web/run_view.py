"""A run as the run page reads it: its directory (run/run_dir.py names every
file, run/records.py reads the status lines, the gating lines and the ladder) and,
while it goes, its Redis stream. Read-only: nothing here writes. A record this
tengen does not read (a newer format, or damaged) raises ``RecordError``, naming
the file.

- ``info()``: the run's id, its game (``board_view.game_info``) and the config's
  main settings;
- ``history(after)``: the status lines as points (web/status_history.py);
- ``ladder(known)``: ladder.json's promotions from the ``known``-th on (the ladder
  only grows, so a poll sends what is new);
- ``gating()``: the newest gating matches from gating.jsonl, rejections too;
- ``games()``: the newest self-play games and the kept gating matches' games, each
  with a ``key`` to replay it by (``replay(key)``).

A gating result (in ``gating()``, on a ladder entry, as a status line's
``last_gating``) goes out with ``candidate_id`` and ``best_id`` beside its version
numbers: the ids as ``run.run_dir.version_id`` spells them (``000042``), which the
page shows as sent.

The newest self-play games come from the run's Redis stream when its Redis answers
within ``redis_wait_s`` (reached as ``tengen status`` and ``tengen games`` reach it,
cluster/live_run.py), else from the sample in ``games/``: a finished run, a
single-process run (no Redis) or a Redis that is away all read from the directory,
and ``games()`` says which and why. A Redis that did not answer is tried again
after ``redis_retry_s``, so a poll never waits on it twice in a row. A game listed
from the stream stays replayable after the stream has moved past it (the page
replays what it listed): the last ``KEEP_GAMES`` games read are held in memory.

Not thread-safe: the page's server calls it from one thread.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tengen.cluster.live_run import live_client
from tengen.cluster.redis_client import RedisLike, RedisUnavailable
from tengen.cluster.stream import SampleStream
from tengen.play.game_records import FinishedGame, GameTextError, file_suffix
from tengen.play.sgf import SgfError
from tengen.run.codec import SampleFormatError
from tengen.run.config import load_config
from tengen.run.game_sample import ENTRY_SUFFIX
from tengen.run.records import GatingLine, parse_line, read_evaluations, read_ladder
from tengen.run.run_dir import RunDir, version_id
from tengen.web.board_view import game_info
from tengen.web.replay import entry_game, file_game, replay, summary
from tengen.web.status_history import MAX_POINTS, History, read_history

__all__ = ["RunView", "UnknownGame", "GAMES_SHOWN", "GATING_MATCHES_SHOWN", "GATING_RESULTS_SHOWN",
           "GATING_GAMES_SHOWN", "REDIS_WAIT_S", "REDIS_RETRY_S", "KEEP_GAMES"]

#: the newest self-play games listed
GAMES_SHOWN = 20
#: how long a poll waits for the run's Redis before it reads the directory
REDIS_WAIT_S = 1.5
#: after Redis did not answer, how long the directory is read without asking it again
REDIS_RETRY_S = 10.0
#: games held in memory to replay (those listed from the stream, and the latest asked for)
KEEP_GAMES = 256
#: the newest gating results listed (from gating.jsonl)
GATING_RESULTS_SHOWN = 10
#: the newest gating matches whose games are listed, and the most games listed of each
GATING_MATCHES_SHOWN = 3
GATING_GAMES_SHOWN = 20
#: keys: ``selfplay/<file stem>`` (games/<stem>.game), ``selfplay/stream-<entry id>``
#: (a game read from the stream) and ``gating/<candidate>-<best>/<number>``
_SELFPLAY = "selfplay/"
_GATING = "gating/"
_MATCH = re.compile(r"\d{6}-\d{6}")
_STEM = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


class UnknownGame(LookupError):
    """No game has that key here (any more)."""


class RunView:
    def __init__(self, run_dir: str | Path, *, redis_wait_s: float = REDIS_WAIT_S,
                 redis_retry_s: float = REDIS_RETRY_S, games_shown: int = GAMES_SHOWN,
                 clock: Callable[[], float] = time.monotonic):
        self.files = RunDir(run_dir)
        if not self.files.holds_run():
            raise FileNotFoundError(f"{run_dir} is not a run directory (no config.yaml)")
        self.config = load_config(self.files.config)
        self.game = self.config.game.make()
        self.run_id = self.files.run_id()
        self.redis_wait_s = redis_wait_s
        self.redis_retry_s = redis_retry_s
        self.games_shown = games_shown
        self._clock = clock
        self._client: RedisLike | None = None
        self._next_try = float("-inf")
        #: what can be replayed, by key, the least recently listed or replayed first
        self._games: OrderedDict[str, _Held] = OrderedDict()

    # -- the run -----------------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        c = self.config
        return {
            "run_id": self.run_id,
            "run_dir": str(self.files.path),
            **game_info(self.game),
            "config": {
                "network": f"{c.network.blocks} blocks x {c.network.filters} filters",
                "simulations": c.mcts.simulations,
                "search": c.mcts.search,
                "gating": c.gating.rule,
                "gating_games": c.gating.games if c.gating.rule == "threshold" else c.gating.max_games,
                "replay_window": c.train.replay_window,
                "keep_game_every": c.run.keep_game_every,
                "redis": "external" if c.redis.url else "embedded" if self.files.connection.exists() else "none",
            },
        }

    def history(self, *, after: int | None = None, max_points: int = MAX_POINTS) -> History:
        history = read_history(self.files.status_history, after=after, max_points=max_points)
        latest = history.latest
        if latest is None or latest["last_gating"] is None:
            return history
        return dataclasses.replace(history, latest={**latest, "last_gating": _with_ids(latest["last_gating"])})

    def ladder(self, *, known: int = 0) -> dict[str, Any]:
        """The promotions from the ``known``-th on; all of them, with ``reset``, when the
        ladder is shorter than ``known`` (another run's)."""
        if known < 0:
            raise ValueError(f"known must be >= 0, not {known}")
        try:
            entries = read_ladder(self.files).entries  # written atomically: never half of it
        except FileNotFoundError:
            entries = ()
        reset = known > len(entries)
        start = 0 if reset else known
        sent = [{**e, "result": _with_ids(e["result"])} for e in entries[start:]]
        return {"entries": sent, "start": start, "count": len(entries), "reset": reset}

    def strength(self, *, known: int = 0) -> dict[str, Any]:
        """The strength evaluations (evaluations.jsonl) from the ``known``-th on; all of
        them, with ``reset``, when the file holds fewer than ``known`` (another run's).
        A line every few minutes: the whole file is read."""
        if known < 0:
            raise ValueError(f"known must be >= 0, not {known}")
        try:
            lines = read_evaluations(self.files)
        except FileNotFoundError:
            lines = []
        reset = known > len(lines)
        start = 0 if reset else known
        return {"evaluations": [line.to_json() for line in lines[start:]], "start": start, "count": len(lines),
                "reset": reset}

    def gating(self, *, count: int = GATING_RESULTS_SHOWN) -> dict[str, Any]:
        """The newest ``count`` gating results, newest first (a line cut short by a write
        in progress, or by a crash, is skipped)."""
        try:
            with open(self.files.gating_history, "rb") as f:
                size = f.seek(0, 2)
                # a result line is a few hundred bytes: the tail holds the newest ones
                start = max(0, size - 2048 * max(count, 1))
                f.seek(start)
                lines = f.read().split(b"\n")
        except FileNotFoundError:
            return {"matches": []}
        if start > 0:
            lines = lines[1:]  # begins mid-line
        matches = []
        for line in reversed(lines):
            match = parse_line(line, GatingLine, f"{self.files.gating_history}, near its end")
            if match is not None:
                matches.append(_with_ids(match.to_json()))
            if len(matches) == count:
                break
        return {"matches": matches}

    # -- games ---------------------------------------------------------------------------
    def games(self) -> dict[str, Any]:
        """The newest self-play games (from the stream or the directory, ``source``
        and ``note`` say which and why) and the newest kept gating matches' games."""
        listed, source, note = self._stream_games()
        if listed is None:
            listed = self._directory_games()
        return {"source": source, "note": note, "selfplay": listed, "gating": self._gating_games()}

    def replay(self, key: str) -> dict[str, Any]:
        """The replay of a listed game (web/replay.py); UnknownGame when there is none."""
        held = self._games.get(key)
        if held is None:
            held = self._read_file(key, self._path_of(key))
        self._games.move_to_end(key)
        return {"key": key, **replay(self.game, held.game)}

    def _stream_games(self) -> tuple[list[dict[str, Any]] | None, str, str]:
        """The newest games from the live stream, or None (and why not)."""
        if not self.files.connection.exists() and not self.config.redis.url:
            return None, "directory", "a single-process run has no Redis: games from the run directory's sample"
        if self._client is None and self._clock() >= self._next_try:
            self._client = live_client(self.files, wait_s=self.redis_wait_s)
            if self._client is None:
                self._next_try = self._clock() + self.redis_retry_s
        away = ("the run's Redis does not answer (the run has stopped, or Redis is away): games from the run "
                "directory's sample")
        if self._client is None:
            return None, "directory", away
        try:
            entries = SampleStream(self._client, self.run_id, maxlen=1).newest_entries(count=self.games_shown)
        except (RedisUnavailable, OSError):
            self._client = None
            self._next_try = self._clock() + self.redis_retry_s
            return None, "directory", away
        listed = []
        for entry_id, blob in entries:
            key = f"{_SELFPLAY}stream-{entry_id.decode()}"
            held = self._games.get(key)
            if held is None:
                try:
                    finished, game_id, _ = entry_game(self.game, blob)
                    held = _Held(None, finished, {"id": game_id, **summary(self.game, finished)})
                except (SampleFormatError, GameTextError):
                    continue  # the learner counts bad entries; the page just skips them
            self._hold(key, held)
            listed.append({"key": key, **held.shown})
        return listed, "stream", "the live run's Redis stream: its newest games"

    def _directory_games(self) -> list[dict[str, Any]]:
        kept = sorted(self.files.games.glob(f"*{ENTRY_SUFFIX}"), key=_newest_first)[: self.games_shown]
        listed = []
        for path in kept:
            key = _SELFPLAY + path.stem
            try:
                held = self._read_file(key, path)
            except UnknownGame:
                continue  # pruned meanwhile, or not a game of this run
            listed.append({"key": key, **held.shown})
        return listed

    def _gating_games(self) -> list[dict[str, Any]]:
        root = self.files.gating_matches
        if not root.is_dir():
            return []
        suffix = file_suffix(self.game)
        matches = sorted((p for p in root.iterdir() if p.is_dir() and _MATCH.fullmatch(p.name)),
                         key=_newest_first)[:GATING_MATCHES_SHOWN]
        listed = []
        for match in matches:
            candidate, best = match.name.split("-")
            for path in sorted(match.glob(f"[0-9][0-9][0-9][0-9]{suffix}"))[:GATING_GAMES_SHOWN]:
                key = f"{_GATING}{match.name}/{path.stem}"
                try:
                    held = self._read_file(key, path)
                except UnknownGame:
                    continue
                listed.append({"key": key, "candidate": candidate, "best": best, **held.shown})
        return listed

    def _path_of(self, key: str) -> Path:
        """The file of a game of the run directory by its key (never a path outside games/)."""
        if key.startswith(_GATING):
            match, _, number = key[len(_GATING):].partition("/")
            if _MATCH.fullmatch(match) and re.fullmatch(r"\d{4}", number):
                return self.files.gating_matches / match / f"{number}{file_suffix(self.game)}"
        elif key.startswith(_SELFPLAY):
            stem = key[len(_SELFPLAY):]
            if _STEM.fullmatch(stem):
                return self.files.games / f"{stem}{ENTRY_SUFFIX}"
        raise UnknownGame(f"{key!r} is not a game key of the run page")

    def _read_file(self, key: str, path: Path) -> _Held:
        """The game in ``path``, decoded once while the file stays as it was."""
        try:
            stat = path.stat()
            stamp = (stat.st_mtime_ns, stat.st_size)
            held = self._games.get(key)
            if held is None or held.stamp != stamp:
                if path.suffix == ENTRY_SUFFIX:
                    finished, game_id, _ = entry_game(self.game, path.read_bytes())
                else:
                    finished, game_id = file_game(self.game, path.read_text(encoding="utf-8")), None
                held = _Held(stamp, finished, {"id": game_id, **summary(self.game, finished)})
        except (OSError, UnicodeDecodeError, SampleFormatError, GameTextError, SgfError):
            raise UnknownGame(f"no game {key!r} in this run (the run directory keeps only its newest games)") from None
        self._hold(key, held)
        return held

    def _hold(self, key: str, held: _Held) -> None:
        self._games[key] = held
        self._games.move_to_end(key)
        while len(self._games) > KEEP_GAMES:
            self._games.popitem(last=False)


@dataclass(frozen=True)
class _Held:
    """A game read once: its file's (mtime_ns, size) (None: from the stream), the
    game, and what the list shows of it."""

    stamp: tuple[int, int] | None
    game: FinishedGame
    shown: dict[str, Any]


def _with_ids(result: Mapping[str, Any]) -> dict[str, Any]:
    """A gating result with ``candidate_id`` and ``best_id`` beside its version numbers
    (the initial network's mark on the ladder has none, and gets none)."""
    ids = {f"{name}_id": version_id(result[name]) for name in ("candidate", "best") if name in result}
    return {**result, **ids}


def _newest_first(path: Path) -> tuple[float, str]:
    try:
        return (-path.stat().st_mtime, path.name)
    except OSError:
        return (0.0, path.name)
