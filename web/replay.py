"""A finished game as the run page replays it: the board after every move, and per
move what the search recorded when it chose it.

A self-play game comes as its stream entry (run/codec.py, the one game format:
a run's Redis stream, or ``games/<id>.game`` in the run directory); a gating game as
the file the run kept (play/game_records.py: a plain line, or SGF for Go), which
has no search values. Either way the moves are replayed with the game's rules here,
so the page never needs them, and the result is the rules' (``result_text``).

``replay(...)`` is the JSON: ``boards[i]`` is the position after ``i`` moves, one
string of ``H * W`` digits row by row from the top (``0`` empty, ``1`` player 0's
stone, ``2`` player 1's), compact even for 400 moves of Go 19x19; ``moves[i]`` is
the i-th move with its mover, text, the point it put a stone on, and, when recorded,
``value`` (the search's root value Q(root) from the mover's view, in [-1, 1]),
``visits`` (N(root)) and ``full`` (a full search, or a cheap one under playout-cap
randomisation).
"""

from __future__ import annotations

from typing import Any

from tengen.engine.games.base import Game
from tengen.engine.games.go import GoGame
from tengen.play.game_records import FinishedGame, read_plain, result_text
from tengen.play.sgf import Move, read_sgf
from tengen.run.codec import decode_game_meta
from tengen.run.run_dir import version_id
from tengen.web.board_view import last_point

__all__ = ["replay", "entry_game", "file_game", "summary"]


def entry_game(game: Game, blob: bytes) -> tuple[FinishedGame, str | None, float]:
    """``(game, game id, created)`` from a stream entry; SampleFormatError when it is
    not one of ``game``'s."""
    record, meta = decode_game_meta(blob, planes_shape=game.planes_shape, num_actions=game.num_actions,
                                    game_name=game.name)
    model = version_id(record.model_version)
    return FinishedGame.from_record(record, players=(model, model), when=meta.created), record.game_id, meta.created


def file_game(game: Game, text: str) -> FinishedGame:
    """A kept game file's game: a plain line, or SGF for Go (GameTextError, SgfError
    say what is wrong)."""
    if isinstance(game, GoGame):
        record = read_sgf(text)
        moves = tuple(e.action for e in record.events if isinstance(e, Move))
        result = record.result or ""
        loser = {"B": 1, "W": 0}.get(result[:1])
        return FinishedGame(moves=moves, players=record.players,
                            resigned_by=loser if result[1:] == "+R" else None,
                            forfeit_by=loser if result[1:] == "+F" else None)
    finished, _ = read_plain(text.strip(), game)
    return finished


def summary(game: Game, finished: FinishedGame) -> dict[str, Any]:
    """What the list of games shows of one."""
    return {"players": list(finished.players), "moves": len(finished.moves), "result": result_text(game, finished),
            "end": finished.end, "when": finished.when, "has_search": finished.has_search}


def replay(game: Game, finished: FinishedGame) -> dict[str, Any]:
    """The boards after each move and each move's record (see the module docstring);
    GameTextError when the moves are not a finished game of ``game``."""
    head = summary(game, finished)
    state = game.initial_state()
    board = game.board(state)
    boards = ["".join(map(str, board.ravel().tolist()))]
    moves = []
    for i, action in enumerate(finished.moves):
        mover = game.to_play(state)
        game.play(state, int(action))  # legal: summary's result_text has replayed them
        after = game.board(state)
        move: dict[str, Any] = {"player": mover, "action": int(action), "text": game.action_to_text(int(action)),
                                "point": last_point(board, after)}
        if finished.search_value is not None and finished.search_visits and finished.full_search:
            move.update(value=round(finished.search_value[i], 4), visits=finished.search_visits[i],
                        full=finished.full_search[i])
        moves.append(move)
        boards.append("".join(map(str, after.ravel().tolist())))
        board = after
    return {**head, "boards": boards, "move_list": moves}
