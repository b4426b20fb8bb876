"""What a finished match is for people and files: its summary from the first
player's side (wins, draws, losses, the score, and the Elo difference with its 95%
interval, ``engine.gating.estimate_elo``), the summary's lines, a line per game, and
each game as a record file (``record_file``: SGF for Go, one line of text for the
other games). ``tengen match`` (tengen/match_command.py) writes them.
"""

from __future__ import annotations

import re
import time

from tengen.engine.games.base import Game
from tengen.engine.games.go import GoGame
from tengen.engine.gating import estimate_elo
from tengen.play.game_records import FinishedGame, utc_date, write_game
from tengen.play.match import PlayedGame, result_text
from tengen.play.sgf import GoRecord, Move, write_sgf

__all__ = ["CONFIDENCE", "RULES", "game_line", "match_summary", "record_file", "summary_lines"]

RULES = "Tromp-Taylor"  # SGF's RU: area scoring of the final board, see play/match.py
CONFIDENCE = 0.95


def record_file(game: Game, played: PlayedGame, labels: dict[str, str] | None = None) -> tuple[str, str]:
    """(file name, text) of one finished game: an SGF file for Go (play/sgf.py:
    a match's game may go on after two passes for a cleanup phase, which a replay
    by the rules would refuse, so its record is built from the moves as played),
    else the plain line of play/game_records.py, one game a line of ``games.txt``.
    The one place a match's game becomes a record. ``labels``: what the record calls
    a player (a model by its version id and checkpoint) instead of its name."""
    black, white = ((labels or {}).get(name, name) for name in (played.black, played.white))
    now = time.time()  # the game has just finished: its date, as the plain line's
    if isinstance(game, GoGame):
        record = GoRecord(size=game.size, komi=game.komi,
                          events=tuple(Move(i % 2, a) for i, a in enumerate(played.moves)),
                          result=result_text(played), rules=RULES, players=(black, white),
                          application=("tengen", _version()), date=utc_date(now))
        return f"game-{played.index + 1:04d}.sgf", write_sgf(record)
    loser = None if played.outcome == 0 else (1 if played.outcome > 0 else 0)
    finished = FinishedGame(moves=played.moves, players=(_plain_name(black), _plain_name(white)),
                            when=now, resigned_by=loser if played.end == "resignation" else None,
                            forfeit_by=loser if played.end == "forfeit" else None)
    return "games.txt", write_game(game, finished)


def _plain_name(name: str) -> str:
    """A player's name as a plain line holds it: no spaces (a path may have some)."""
    return re.sub(r"[\s=]+", "_", name)


def _plain_result(played: PlayedGame) -> str:
    """The first mover's result as chess writes it (the games that are not Go)."""
    return {1.0: "1-0", -1.0: "0-1"}.get(played.outcome, "1/2-1/2")


def _version() -> str:
    from tengen import __version__

    return __version__


def game_line(played: PlayedGame, *, done: tuple[int, int] | None = None,
              tally: tuple[str, tuple[int, int, int], str] | None = None) -> str:
    """One finished game as ``tengen match`` reports it: ``done``, how many games of how
    many have finished (games in parallel finish out of order), and after it ``tally``,
    the running score ``(first, (W, D, L), second)``."""
    line = (f"[{done[0]}/{done[1]}] " if done is not None else "")
    line += (f"game {played.index + 1}: {played.black} (black) vs {played.white} (white): "
            f"{result_text(played) if played.end != 'finished' else _plain_result(played)} after "
            f"{len(played.moves)} moves ({played.end}")
    if played.cleanup_start is not None:
        line += f", {len(played.moves) - played.cleanup_start} in the cleanup"
    line += ")"
    for engine, score in played.engine_scores:
        line += f"; {engine} counts {score}"
    if played.reason:
        line += f"; {played.reason}"
    if tally is not None:
        first, (wins, draws, losses), second = tally
        line += f" | so far {first} {wins}-{draws}-{losses} {second} (W-D-L)"
    return line


def match_summary(game: Game, names: tuple[str, str], played: list[PlayedGame], where: dict[int, str], *,
                  simulations: dict[str, int], slots: int) -> dict:
    """The match's summary (what ``tengen match --json`` prints and ``summary.json`` holds)."""
    wins = sum(g.first_result > 0 for g in played)
    draws = sum(g.first_result == 0 for g in played)
    losses = sum(g.first_result < 0 for g in played)
    elo = estimate_elo(wins, draws, losses, confidence=CONFIDENCE)
    per_game = []
    for g in played:
        engine_scores = dict(g.engine_scores)
        ours = result_text(g)
        per_game.append({
            "index": g.index, "black": g.black, "white": g.white, "result": ours,
            "winner": g.black if g.outcome > 0 else g.white if g.outcome < 0 else None,
            "end": g.end, "moves": len(g.moves),
            "cleanup_moves": None if g.cleanup_start is None else len(g.moves) - g.cleanup_start,
            "score": g.score, "engine_scores": engine_scores,
            "scores_disagree": any(s != ours for s in engine_scores.values()),
            "forfeit_reason": g.reason, "file": where.get(g.index),
        })
    return {
        "a": names[0], "b": names[1], "game": game.name,
        "komi": game.komi if isinstance(game, GoGame) else None,
        "rules": RULES if isinstance(game, GoGame) else None,
        "simulations": simulations, "parallel": slots,
        "games": len(played), "wins": wins, "draws": draws, "losses": losses, "score": elo.score,
        "elo": elo.elo, "elo_low": elo.low, "elo_high": elo.high, "confidence": CONFIDENCE,
        "forfeits": sum(g.end == "forfeit" for g in played),
        "game_results": per_game,
    }


def summary_lines(summary: dict) -> list[str]:
    """The summary as people read it."""
    lines = [f"{summary['a']} vs {summary['b']}: {summary['games']} games of {summary['game']}: "
             f"W-D-L {summary['wins']}-{summary['draws']}-{summary['losses']} for {summary['a']}, "
             f"score {summary['score']:.3f}",
             # + 0.0: no "-0" for an even match
             f"Elo difference {summary['elo'] + 0.0:+.0f} ({summary['confidence']:.0%} interval "
             f"{summary['elo_low'] + 0.0:+.0f} .. {summary['elo_high'] + 0.0:+.0f})"]
    if summary["forfeits"]:
        lines.append(f"{summary['forfeits']} game(s) lost by forfeit (an engine failed; reasons above)")
    disagreements = sum(g["scores_disagree"] for g in summary["game_results"])
    if disagreements:
        lines.append(f"{disagreements} game(s) where a GTP engine's final_score differs from the Tromp-Taylor count")
    return lines
