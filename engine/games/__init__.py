"""The games: one ``Game`` interface (base.py) over the m,n,k family and Go.

``make_game(name, **rules)`` builds one by name, the way configs name them.
"""

from __future__ import annotations

from tengen.engine.games.base import Game, IllegalMove
from tengen.engine.games.go import GoGame
from tengen.engine.games.mnk import MNKGame, connect4, gomoku, tictactoe

__all__ = ["Game", "IllegalMove", "GoGame", "MNKGame", "make_game", "GAME_NAMES"]

GAME_NAMES = ("tictactoe", "connect4", "gomoku", "go")


def make_game(name: str, **rules) -> Game:
    """``make_game("go", size=9, komi=7.5)``, ``make_game("connect4")``, ...

    Raises ValueError naming the game or the rule it does not know.
    """
    if name == "go":
        return GoGame(**rules)
    if name == "gomoku":
        return gomoku(**rules)
    makers = {"tictactoe": tictactoe, "connect4": connect4}
    if name not in makers:
        raise ValueError(f"unknown game {name!r}; known: {', '.join(GAME_NAMES)}")
    if rules:
        raise ValueError(f"{name} takes no rule options, got {', '.join(sorted(rules))}")
    return makers[name]()
