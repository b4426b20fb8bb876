"""`tengen games`: a run's finished self-play games, listed or written as files.

While the run lives, the games come from its Redis stream (reached as `tengen
status` reaches it, cluster/run_control.py: no Ray, no TensorFlow); once it has
stopped, or when its Redis does not answer within a few seconds, from the sample
it kept on disk (``games/<id>.game``, cluster/game_sample.py). The single-process
run has no Redis, so its games are always read from disk. Each game is decoded
with the run's own config (cluster/codec.py) and written as SGF (Go) or a plain
line (the others, engine/game_records.py), named by its game id.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tengen.cluster.codec import SampleFormatError, decode_game_meta
from tengen.cluster.config import load_config
from tengen.cluster.keys import version_id
from tengen.cluster.run_control import STATUS_WAIT_S, live_client
from tengen.cluster.run_dir import RunDir, game_file_name
from tengen.engine.game_records import FinishedGame, GameTextError, file_suffix, result_text, write_game

__all__ = ["ExportedGame", "export_games", "read_run_games"]


@dataclass(frozen=True)
class ExportedGame:
    game_id: str
    model: str  # the model version id that played it
    moves: int
    result: str
    text: str  # SGF or the plain line
    path: Path | None  # where it was written (None: only listed)


def read_run_games(run_dir: Path, *, last: int) -> tuple[str, list[bytes]]:
    """``(where, blobs)``: the newest ``last`` games' stream entries, oldest first, and
    where they came from in words."""
    if last < 1:
        raise ValueError("--last must be at least 1")
    files = RunDir(run_dir)
    if not files.holds_run():
        raise FileNotFoundError(f"{run_dir} is not a run directory (no config.yaml)")
    client = live_client(files, wait_s=STATUS_WAIT_S)
    if client is not None:
        from tengen.cluster.redis_client import RedisUnavailable
        from tengen.cluster.stream import SampleStream

        try:
            entries = SampleStream(client, files.run_id(), maxlen=1).newest_entries(count=last)
            return "the live run's stream", [blob for _, blob in reversed(entries)]
        except RedisUnavailable:
            pass  # it went away while we read: the directory's sample stands
    kept = sorted(files.games.glob("*.game"), key=lambda p: (p.stat().st_mtime, p.name))[-last:]
    return f"{files.games}", [p.read_bytes() for p in kept]


def export_games(run_dir: Path, *, last: int, export: Path | None,
                 say: Callable[[str], None] = print) -> list[ExportedGame]:
    """Read the newest ``last`` games of the run and write each into ``export`` (None:
    list them only), saying what was read and written."""
    files = RunDir(run_dir)
    where, blobs = read_run_games(run_dir, last=last)
    game = load_config(files.config).game.make()
    say(f"{len(blobs)} game(s) from {where}")
    out = []
    for i, blob in enumerate(blobs):
        try:
            record, meta = decode_game_meta(blob, planes_shape=game.planes_shape, num_actions=game.num_actions,
                                            game_name=game.name)
            model = version_id(record.model_version)
            finished = FinishedGame.from_record(record, players=(model, model), when=meta.created)
            text = write_game(game, finished)
            result = result_text(game, finished)
        except (SampleFormatError, GameTextError) as e:
            say(f"skipped game {i + 1}: {e}")
            continue
        game_id = record.game_id or f"game-{i:04d}"
        path = None
        if export is not None:
            path = export / game_file_name(game_id, file_suffix(game))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        exported = ExportedGame(game_id, model, record.length, result, text, path)
        out.append(exported)
        say(f"wrote {path} ({record.length} moves, {result}, model {model})" if path else
            f"{game_id}  model {model}  {record.length} moves  {result}")
    return out
