"""How the pages describe a game to web/static/board.js, the one board renderer:
``game_info`` (the board's shape, move texts, coordinates and player names, what
``/api/info`` answers on both pages), ``player_names`` and ``last_point``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tengen.engine.games.base import Game
from tengen.engine.games.go import GTP_COLUMNS, GoGame

__all__ = ["game_info", "player_names", "last_point"]


def player_names(game: Game) -> tuple[str, str]:
    """How the pages name player 0 and player 1: by the colour of their stones."""
    if isinstance(game, GoGame):
        return ("Black", "White")
    return ("Red", "Yellow") if getattr(game, "gravity", False) else ("X", "O")


def game_info(game: Game) -> dict[str, Any]:
    """What a page needs to draw ``game``'s board and name its moves."""
    rows, cols = game.board_shape
    go = isinstance(game, GoGame)
    gravity = bool(getattr(game, "gravity", False))
    return {
        "game": game.name,
        "kind": "go" if go else ("columns" if gravity else "cells"),
        "rows": rows,
        "cols": cols,
        "num_actions": game.num_actions,
        "pass_action": game.pass_action if isinstance(game, GoGame) else None,
        "komi": game.komi if isinstance(game, GoGame) else None,
        "players": list(player_names(game)),
        "moves": [game.action_to_text(a) for a in range(game.num_actions)],
        # Go: GTP's letters without I, rows numbered from the bottom; the m,n,k games
        # name their columns (Connect Four) or cells (tic-tac-toe) by the move text.
        "column_labels": list(GTP_COLUMNS[:cols]) if go else [str(c + 1) for c in range(cols)],
        "row_labels": [str(rows - r) for r in range(rows)] if go else [],
    }


def last_point(before: np.ndarray, after: np.ndarray) -> list[int] | None:
    """[row, col] of the stone a move put down, from the boards (int8 [H, W]) before
    and after it; None for a pass."""
    placed = np.argwhere((before == 0) & (after != 0))
    return [int(placed[0][0]), int(placed[0][1])] if len(placed) else None
