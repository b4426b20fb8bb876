"""A Go Text Protocol (version 2) engine over ``GoGame``, for GUIs, referees and
servers (GoGui, Sabaki, Lizzie, gogui-twogtp, KGS's kgsGtp, gtp2ogs).

``GtpEngine.handle(line)`` takes one line from a controller and returns the whole
reply (``=`` or ``?``, the command id echoed when given, the result, and the blank
line that ends every reply), or None for a line the protocol says to skip (empty or
comment only). ``run(stdin, stdout)`` is the loop a console script needs; it also
streams analysis while it keeps reading commands.

Rules are those of ``GoGame`` (simple ko or positional superko, suicide illegal),
with what GTP adds:

- **No game end.** GTP has none, so a move that is legal on the board is accepted
  after two passes or past the rules' move cap (the game is reopened; past the cap,
  superko looks back only to the cap). ``undo`` takes back any move or handicap.
- **Scoring.** ``final_status_list dead|alive|seki`` comes from an ownership
  estimate (``play.ownership``: light random playouts, or a network's ownership
  head through ``NetworkOwnership``, which ``tengen gtp --checkpoint`` passes when
  its network has one; kata-analyze's ``ownership`` reads the same), and
  ``final_score`` is area scoring with the stones it calls dead taken off, as GNU
  Go's Chinese rules count: Tromp-Taylor on the board as it is when none are dead.
  ``scoring="tromp-taylor"`` calls every stone alive and scores the board as it is.
  Both commands read the same deterministic estimate, so they agree.
- **Moves.** With a ``player`` (a ``SearchPlayer`` with a model) ``genmove``
  searches, within the clock's budget when one is set (``play.gtp.clock``), and
  answers ``resign`` once the root winrate has stayed below ``resign_threshold`` for
  ``resign_moves`` of its moves. Without one it plays a random legal move that fills
  none of its own single-point eyes and lies on a point the estimate does not call
  settled, and passes when no such move is left. With or without one, the
  opponent's pass is answered from the count before any search (a server such as
  online-go.com scores the game itself once both pass): ``pass`` when the count after
  its own pass is a win, ``resign`` at once when the count is lost and the
  estimate expects the game lost too (unless ``resign_threshold`` is None), else the
  move chosen as always. ``kgs-genmove_cleanup`` plays on until the opponent's dead
  stones are captured (it never passes while any are left and a move is), preferring
  their liberties.
- **Analysis.** ``lz-analyze`` and ``kata-analyze`` (``[color] [interval] [key
  value]...``; keys ``interval``, ``maxmoves``, ``minmoves``, ``ownership``,
  ``allow``/``avoid``, the last three accepted and ignored but ``ownership``) answer
  ``=`` and then stream one ``info move ... visits ... winrate ... prior ... lcb ...
  order ... pv ...`` line per interval (centiseconds) until the next input line,
  which ends the reply with its blank line; ``lz-genmove_analyze`` and
  ``kata-genmove_analyze`` stream while they search and end with ``play VERTEX``.
  Leela Zero's dialect gives winrate, prior and lcb as integers in 0..10000,
  KataGo's as floats in [0, 1] (and ``ownership`` with ``ownership true``, for the
  player to move). Without a model the search is rollout MCTS (uniform priors, one
  light playout per leaf). ``handle`` answers an analysis command at once, with the
  final statistics of a search to its visit limit (what a transcript can check).
- **Records and setup.** ``loadsgf FILE [N]`` replays a record up to just before
  move N; ``printsgf [FILE]`` writes the game (play.sgf, with sgfmill);
  ``fixed_handicap``, ``place_free_handicap`` and ``set_free_handicap`` put black
  stones on an empty board (GNU Go's fixed points).

The package is a small dispatcher plus a handler per concern, all reading and
changing one ``Session``:

- ``dispatcher``: ``GtpEngine``, the command table, preprocessing, replies, the run
  loop and its background analysis; the protocol's own commands.
- ``commands``: what the dispatcher and the handlers agree on (``Command``,
  ``Stream``, ``GtpError``, the argument readers).
- ``session``: the state the handlers share (the record, rules, player, clocks,
  ownership estimate).
- ``board``: size, komi, clear_board, play, genmove, undo, showboard, rendb_dump.
- ``moves``: how a move is chosen (search, random, resign, the answer to the
  opponent's pass, cleanup), for every genmove.
- ``count``: the count both scoring and that answer read (dead stones from the
  estimate, area with them off).
- ``clock``: the time systems, both clocks, the move budget, and time_settings,
  kgs-time_settings, time_left.
- ``scoring``: final_score, final_status_list, kgs-genmove_cleanup.
- ``records``: loadsgf, printsgf and the handicap commands.
- ``analysis``: lz-/kata-analyze, lz-/kata-genmove_analyze, stop.
"""

from tengen.play.gtp.commands import ENGINE_NAME, PROTOCOL_VERSION
from tengen.play.gtp.dispatcher import GtpEngine, decode_line, preprocess, run
from tengen.play.gtp.records import handicap_points
from tengen.play.gtp.scoring import SCORING
from tengen.play.gtp.session import Player

__all__ = ["GtpEngine", "Player", "ENGINE_NAME", "PROTOCOL_VERSION", "SCORING", "run", "handicap_points", "preprocess",
           "decode_line"]
