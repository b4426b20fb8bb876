"""``tengen analysis``: KataGo's JSON analysis engine (play/analysis_engine.py) on
stdin/stdout, over a checkpoint's model, or with rollout MCTS when none is given (a
board to try a client on). KaTrain starts it as its engine:
``tengen analysis --checkpoint runs/go9/best`` in its "KataGo command" setting."""

from __future__ import annotations

import dataclasses
import sys
from typing import IO

from tengen.engine.games.go import GoGame
from tengen.engine.mcts import SearchSettings
from tengen.engine.mcts.shared_evaluator import SharedEvaluator
from tengen.play.analysis_engine import AnalysisEngine
from tengen.play.ownership import PlayoutOwnership
from tengen.play.search_player import SearchPlayer
from tengen.run.wording import counted

__all__ = ["serve_analysis"]


def serve_analysis(*, checkpoint: str | None, config: str | None, size: int, visits: int, threads: int,
                   stdin: IO[bytes], stdout: IO[str]) -> int:
    """Answer queries from ``stdin`` on ``stdout`` until stdin closes (the queued
    work finished first)."""
    from tengen import __version__

    if checkpoint is not None:
        from tengen.run.checkpoint import load_player

        loaded, game, player = load_player(checkpoint, config, visits, warm_up=True)
        if not isinstance(game, GoGame):
            raise ValueError(f"the checkpoint plays {game.name}, not Go")
        head = getattr(player.evaluate, "ownership", None) if loaded.network.ownership else None
        score_head = getattr(player.evaluate, "score", None) if loaded.network.score else None
        sizes = [game.size]
        name = str(checkpoint)
        assert player.evaluate is not None
        # the searcher threads' calls that wait on the network go to it as one batch
        shared = SharedEvaluator(player.evaluate)
        # the shared evaluator answers policy and value only: the searchers search
        # without the score utility (mcts.score_utility), and report the head's score
        searched = dataclasses.replace(player.settings, score_utility=0.0)

        def make_player() -> SearchPlayer:
            return SearchPlayer(shared, search=searched, simulations=visits, seed=loaded.seed,
                                size=game.size, history_length=game.history_length, komi=game.komi,
                                features=game.features)
    else:
        head, score_head, sizes, name = None, None, [size], f"rollouts ({size}x{size}, no model)"

        def make_player() -> SearchPlayer:
            return SearchPlayer(None, search=SearchSettings(simulations=visits), simulations=visits)

    def ownership_for(game: GoGame):
        from tengen.play.ownership import NetworkOwnership

        return NetworkOwnership(game, head) if head is not None else PlayoutOwnership(game)

    def score_for(game: GoGame):
        from tengen.play.score import NetworkScore

        assert score_head is not None
        return NetworkScore(game, score_head)

    def write(line: str) -> None:
        stdout.write(line + "\n")
        stdout.flush()

    engine = AnalysisEngine(make_player=make_player, sizes=sizes, ownership_for=ownership_for,
                            default_visits=visits, write=write, version=__version__, model_name=name, threads=threads,
                            score_for=score_for if score_head is not None else None)
    print(f"tengen analysis: ready ({name}, {counted(threads, 'search thread')})", file=sys.stderr,
          flush=True)
    for raw in stdin:
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            write('{"error":"the line is not UTF-8"}')
            continue
        engine.handle_line(line)
    engine.close()
    return 0
