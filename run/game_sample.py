"""The sample of finished games a run keeps on disk, for a finished run to show.

``GameSample.scan(stream)`` looks at the stream entries added since its last scan
(newest first, at most ``SCAN`` of them) and keeps the self-play games whose number
within their worker incarnation (the ``17`` of game id ``w003.1f2e:17``) is a
multiple of ``run.keep_game_every``: each as its stream entry, the one game format
(``games/<id>.game``, run/codec.py, so a viewer can replay it with its search
values), and as SGF or a plain line (``games/<id>.sgf`` / ``.txt``,
play/game_records.py). Nothing is written twice: a game whose entry file is there
is skipped, and ``games/scanned.json`` holds the creation time of the newest entry
looked at, so that a resumed run's first scan skips what an earlier session saw,
even the games it kept and has since pruned (the stream's entry ids do not outlive
the single-process run's in-process stream; creation times do). Past
``run.keep_games_max`` the oldest games go. Both wirings call it from their status
pass with their own stream (Redis or in-process), so the workers need not know.

``write_match`` keeps one gating match's finished games, each as SGF or a plain line
with the candidate and the best as the players and the match's date, in
``games/gating/<cand>-<best>/``; only the newest ``run.keep_gating_matches`` matches
stay.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from tengen.engine.games.base import Game
from tengen.play.game_records import FinishedGame, GameTextError, file_suffix, write_game
from tengen.run.codec import SampleFormatError, decode_game_meta, entry_identity
from tengen.run.run_dir import RunDir, version_id

if TYPE_CHECKING:  # the gatekeeper's module loads TensorFlow, which the run page must not
    from tengen.workers.gatekeeper import GatingResult

__all__ = ["GameSample", "NewestEntries", "ENTRY_SUFFIX", "SCAN", "game_number"]

#: a kept game's stream entry
ENTRY_SUFFIX = ".game"
#: the most stream entries one scan reads (a sample may skip games in a burst)
SCAN = 1024


class NewestEntries(Protocol):
    def newest_entries(self, *, count: int, after: bytes | None = None) -> list[tuple[bytes, bytes]]: ...


def game_number(game_id: str | None) -> int | None:
    """The game's number within its worker incarnation (``w003.1f2e:17`` -> 17), None
    for an id without one (a version 1 entry, a game no worker named)."""
    if not game_id or ":" not in game_id:
        return None
    try:
        return int(game_id.rsplit(":", 1)[1])
    except ValueError:
        return None


class GameSample:
    def __init__(self, files: RunDir, game: Game, *, every: int, keep: int, matches: int,
                 log: Callable[[str], None] = print):
        self.files = files
        self.game = game
        self.every = every
        self.keep = keep
        self.matches = matches
        self.log = log
        self._after: bytes | None = None  # the newest entry this process looked at
        #: the creation time of the newest entry looked at, this session or an earlier one
        self._newest = self._read_scanned()
        self._first_scan = True  # after it, the entry ids say what is new
        self.kept = 0  # games written by this process

    def scan(self, stream: NewestEntries) -> list[Path]:
        """Keep the chosen games among the entries added since the last scan; returns
        the files written (entries first, each with its SGF or plain line)."""
        if self.every < 1:
            return []
        entries = stream.newest_entries(count=SCAN, after=self._after)
        if not entries:
            return []
        self._after = entries[0][0]
        written: list[Path] = []
        before = self._newest if self._first_scan else float("-inf")
        for _, blob in reversed(entries):
            try:
                game_id, created = entry_identity(blob, planes_shape=self.game.planes_shape,
                                                  num_actions=self.game.num_actions)
            except SampleFormatError:
                continue  # the learner counts bad entries; a sample just skips them
            self._newest = max(self._newest, created)
            if created > before:
                written.extend(self._keep(blob, game_id))
        self._first_scan = False
        self.files.write(self.files.games_scanned, json.dumps({"created": self._newest}).encode())
        if written:
            self._prune()
        return written

    def _read_scanned(self) -> float:
        try:
            return float(json.loads(self.files.games_scanned.read_text())["created"])
        except (OSError, ValueError, KeyError, TypeError):
            return 0.0

    def _keep(self, blob: bytes, game_id: str | None) -> list[Path]:
        game = self.game
        number = game_number(game_id)
        if game_id is None or number is None or number % self.every:
            return []
        entry = self.files.game_file(game_id, ENTRY_SUFFIX)
        if entry.exists():
            return []
        try:
            record, meta = decode_game_meta(blob, planes_shape=game.planes_shape, num_actions=game.num_actions,
                                            game_name=game.name)
            player = version_id(record.model_version)
            text = write_game(game, FinishedGame.from_record(record, players=(player, player), when=meta.created))
        except (SampleFormatError, GameTextError) as e:
            self.log(f"game {game_id} not kept: {e}")
            return []
        readable = self.files.game_file(game_id, file_suffix(game))
        self.files.write(readable, text.encode())
        self.files.write(entry, blob)  # last: its presence says the game is kept whole
        self.kept += 1
        return [entry, readable]

    def _prune(self) -> None:
        kept = sorted(self.files.games.glob(f"*{ENTRY_SUFFIX}"), key=lambda p: (p.stat().st_mtime, p.name))
        for entry in kept[: max(0, len(kept) - self.keep)]:
            for suffix in (ENTRY_SUFFIX, ".sgf", ".txt"):
                entry.with_suffix(suffix).unlink(missing_ok=True)

    def write_match(self, result: GatingResult) -> Path | None:
        """Keep a gating result's games (its ``games`` list, from workers/gatekeeper.py);
        returns their folder (None: none kept)."""
        games = result.get("games") or []
        if self.matches < 1 or not games:
            return None
        candidate, best = int(result["candidate"]), int(result["best"])
        folder = self.files.gating_games(candidate, best)
        names = (version_id(candidate), version_id(best))
        suffix = file_suffix(self.game)
        when = time.time()  # the match's end; its games carry no times of their own
        for i, played in enumerate(games):
            players = names if played["candidate_black"] else names[::-1]
            try:
                text = write_game(self.game, FinishedGame(moves=tuple(played["moves"]), players=players, when=when))
            except GameTextError as e:
                self.log(f"gating game {i} of {names[0]} vs {names[1]} not kept: {e}")
                continue
            self.files.write(folder / f"{i:04d}{suffix}", text.encode())
        matches = sorted((p for p in folder.parent.iterdir() if p.is_dir()), key=lambda p: (p.stat().st_mtime, p.name))
        for old in matches[: max(0, len(matches) - self.matches)]:
            shutil.rmtree(old, ignore_errors=True)
        return folder
