"""The GTP engine, whole for now: the package's docstring (``tengen.play.gtp``) says
what it speaks."""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TextIO

import numpy as np

from tengen.engine.games import go_kernels as K
from tengen.engine.games.base import IllegalMove
from tengen.engine.games.go import GoGame
from tengen.play.gtp.clock import Clock, parse_kgs_time_settings, parse_time_settings
from tengen.play.ownership import SETTLED, Ownership, PlayoutOwnership, area_without_dead, stone_status
from tengen.play.search_player import Analysis, SearchPlayer
from tengen.play.sgf import GoRecord, Move, Setup, SgfError, load_sgf, write_sgf

__all__ = ["GtpEngine", "Player", "ENGINE_NAME", "PROTOCOL_VERSION", "SCORING", "run", "handicap_points"]

ENGINE_NAME = "tengen"
PROTOCOL_VERSION = 2
MIN_SIZE, MAX_SIZE = 5, K.MAX_SIZE
#: "area": dead stones (by the estimate) off, then Tromp-Taylor; "tromp-taylor": the board as it is
SCORING = ("area", "tromp-taylor")

_COLORS = {"b": 0, "black": 0, "w": 1, "white": 1}
_STATUSES = ("alive", "dead", "seki")


class Player(Protocol):
    """What ``genmove`` and analysis need from a searcher (``play.search_player.SearchPlayer``)."""

    @property
    def uses_model(self) -> bool: ...

    #: the komi the model was trained with (None: no model, or any)
    komi: float | None

    def why_not(self, game: GoGame) -> str | None: ...

    def search(self, game: GoGame, state: np.ndarray, history: Sequence[np.ndarray] = (), *,
               max_visits: int | None = None, seconds: float | None = None, stop: threading.Event | None = None,
               on_snapshot: Callable[[Analysis], None] | None = None,
               interval: float | None = None) -> Analysis: ...


class GtpError(Exception):
    """A command failed; the message is the text after '?'."""


def _version() -> str:
    from tengen import __version__  # the one place it is read from the installed package

    return __version__


def preprocess(line: str) -> str:
    """GTP 2 section 3.1: drop control characters except tab and newline, cut the
    '#' comment, turn tabs into spaces, strip the ends."""
    line = "".join(ch for ch in line if ch in "\t\n" or (ord(ch) >= 32 and ord(ch) != 127))
    line = line.split("#", 1)[0]
    return line.replace("\t", " ").strip()


# -- handicap points ---------------------------------------------------------------------
def handicap_points(size: int, stones: int) -> list[int] | None:
    """GNU Go's fixed handicap points (GTP 2, section 4.1.1) as actions, top to
    bottom: on the 3-3 points below 13x13, the 4-4 points from 13x13; up to 9 stones
    on odd boards from 9x9, 4 on 7x7 and even boards; None when not available."""
    if size < 7 or stones < 2:
        return None
    if stones > (9 if size % 2 and size >= 9 else 4):
        return None
    edge = 2 if size < 13 else 3
    low, mid, high = edge, size // 2, size - 1 - edge  # rows/columns from the top-left
    corners = [(high, low), (low, high), (low, low), (high, high)]  # D4 Q16 D16 Q4 order
    chosen = corners[: min(stones, 4)]
    if stones >= 6:
        chosen += [(mid, low), (mid, high)]
    if stones >= 8:
        chosen += [(high, mid), (low, mid)]
    if stones % 2 and stones >= 5:
        chosen.append((mid, mid))
    return sorted(r * size + c for r, c in chosen)


def _free_handicap_points(size: int, stones: int) -> list[int]:
    """The fixed points while they last, then each next point as far as possible
    (Manhattan distance) from those placed, off the first two lines when it can."""
    fixed_max = 9 if size % 2 and size >= 9 else 4
    chosen = list(handicap_points(size, min(stones, fixed_max)) or [])
    while len(chosen) < stones:
        best, best_key = -1, None
        for a in range(size * size):
            if a in chosen:
                continue
            r, c = divmod(a, size)
            spread = min((abs(r - q // size) + abs(c - q % size) for q in chosen), default=size * 2)
            key = (min(r, size - 1 - r, c, size - 1 - c) >= 2, spread, -a)
            if best_key is None or key > best_key:
                best, best_key = a, key
        chosen.append(best)
    return sorted(chosen)


# -- the session's game ------------------------------------------------------------------
def _reopened(game: GoGame, state: np.ndarray) -> np.ndarray:
    """A copy of ``state`` on which a move can be played: a finished game goes on
    (after two passes; past the move cap the position starts a fresh move count)."""
    s = state.copy()
    end = int(s[K.END])
    if end == K.ENDED_BY_MOVE_CAP:
        fresh = game.state_from_board(game.board(s), game.to_play(s))
        for field in (K.KO, K.PASSES, K.LAST, K.PRISONERS, K.PRISONERS + 1):
            fresh[field] = s[field]
        s = fresh
    s[K.END] = K.ONGOING
    return s


class _Record:
    """The game as GTP built it: setup and move events, and the state after each."""

    def __init__(self, game: GoGame):
        self.game = game
        self.clear()

    def clear(self) -> None:
        self.events: list[Setup | Move] = []
        self.states = [self.game.initial_state()]
        self.handicap = 0

    @property
    def state(self) -> np.ndarray:
        return self.states[-1]

    def history(self) -> list[np.ndarray]:
        """Earlier states, oldest first (for the encoder)."""
        return self.states[:-1]

    @property
    def moves_played(self) -> int:
        return sum(isinstance(e, Move) for e in self.events)

    def board_is_empty(self) -> bool:
        return not self.game.board(self.state).any()

    def probe(self, color: int) -> np.ndarray:
        """The current position reopened, with ``color`` to move (a move out of turn:
        the skipped player neither passed nor played, so the ko point and the run of
        passes start over)."""
        s = _reopened(self.game, self.state)
        if color != self.game.to_play(s):
            s[K.TO_PLAY] = color
            s[K.KO] = K.NO_POINT
            s[K.PASSES] = 0
        return s

    def play(self, color: int, action: int) -> None:
        s = self.probe(color)
        self.game.play(s, action)  # raises IllegalMove
        self.events.append(Move(color, int(action)))
        self.states.append(s)

    def setup(self, black: Sequence[int] = (), white: Sequence[int] = (), empty: Sequence[int] = (),
              to_play: int | None = None) -> None:
        """Put stones on (and take them off) the board; raises ValueError for a
        position with a group without liberties."""
        board = self.game.board(self.state).reshape(-1).copy()
        board[list(empty)] = 0
        board[list(black)] = 1
        board[list(white)] = 2
        mover = self.game.to_play(self.state) if to_play is None else to_play
        s = self.game.state_from_board(board.reshape(self.game.board_shape), mover)
        s[K.PRISONERS : K.PRISONERS + 2] = self.state[K.PRISONERS : K.PRISONERS + 2]
        self.events.append(Setup(tuple(sorted(black)), tuple(sorted(white)), tuple(sorted(empty))))
        self.states.append(s)

    def undo(self) -> bool:
        if not self.events:
            return False
        event = self.events.pop()
        self.states.pop()
        if isinstance(event, Setup) and not self.events:
            self.handicap = 0
        return True


# -- analysis options --------------------------------------------------------------------
@dataclass(frozen=True)
class _AnalyzeRequest:
    dialect: str  # "lz" or "kata"
    color: int
    interval: float  # seconds; 0: no info lines
    max_moves: int | None
    ownership: bool


@dataclass
class _Stream:
    """A reply that streams: its '=' line at once, then lines from ``produce(write,
    stop, live)``, then the blank line. ``background``: runs until the next input
    line (analysis); otherwise the command runs to its end (genmove_analyze)."""

    cmd_id: str
    produce: Callable[[Callable[[str], None], threading.Event | None, bool], None]
    background: bool


class GtpEngine:
    """One GTP session: a game record, its rules, clocks and the command table.

    Keyword-only: ``size`` (5..19), ``komi``, ``superko``, ``seed`` (random moves),
    ``player`` (a model's search; None: random moves, rollout MCTS for analysis),
    ``ownership`` (a factory ``game -> Ownership``; default light playouts),
    ``scoring`` (one of SCORING), ``resign_threshold`` (a winrate, None: never
    resign) and ``resign_moves``, ``lag`` (seconds kept back per timed move),
    ``simulations`` (the visit limit of rollout search for genmove_analyze without
    a model), ``analysis_visits`` (the visit limit of analysis), ``history_length``
    and ``max_moves`` (the rules' and the model's), ``warn`` (where warnings go;
    default stderr).
    """

    def __init__(
        self,
        *,
        size: int = 19,
        komi: float = 7.5,
        superko: bool = False,
        seed: int | None = None,
        player: Player | None = None,
        ownership: Callable[[GoGame], Ownership] | None = None,
        scoring: str = "area",
        resign_threshold: float | None = 0.05,
        resign_moves: int = 3,
        lag: float = 0.5,
        simulations: int = 400,
        analysis_visits: int = 10_000,
        history_length: int = 8,
        max_moves: int | None = None,
        warn: Callable[[str], None] | None = None,
    ):
        if scoring not in SCORING:
            raise ValueError(f"scoring must be one of {SCORING}, not {scoring!r}")
        if resign_moves < 1:
            raise ValueError("resign_moves must be at least 1")
        self._superko = superko
        self._history_length = history_length
        self._max_moves = max_moves
        self._rng = np.random.default_rng(seed)
        self._seed = 0 if seed is None else seed
        self.player = player
        self._ownership_factory = ownership or (lambda game: PlayoutOwnership(game))
        self.scoring = scoring
        self.resign_threshold = resign_threshold
        self.resign_moves = resign_moves
        self.simulations = simulations
        self.analysis_visits = analysis_visits
        self._warn = warn or (lambda text: print(f"tengen gtp: {text}", file=sys.stderr, flush=True))
        self._quit = False
        self.clock = Clock(lag=lag)
        self._low_value = [0, 0]  # consecutive own moves below the resign threshold
        self._rollout: SearchPlayer | None = None
        self._warned_komi: float | None = None
        game = self._make_game(size, komi)
        if player is not None and (why := player.why_not(game)):
            raise ValueError(why)
        self._set_game(game)
        self._check_komi(komi)
        self._commands: dict[str, Callable[[list[str]], str]] = {
            "protocol_version": self._protocol_version,
            "name": self._name,
            "version": self._version,
            "known_command": self._known_command,
            "list_commands": self._list_commands,
            "quit": self._quit_command,
            "boardsize": self._boardsize,
            "clear_board": self._clear_board,
            "komi": self._komi,
            "play": self._play,
            "genmove": self._genmove,
            "reg_genmove": self._reg_genmove,
            "kgs-genmove_cleanup": self._genmove_cleanup,
            "undo": self._undo,
            "showboard": self._showboard,
            "final_score": self._final_score,
            "final_status_list": self._final_status_list,
            "time_settings": self._time_settings,
            "kgs-time_settings": self._kgs_time_settings,
            "time_left": self._time_left,
            "fixed_handicap": self._fixed_handicap,
            "place_free_handicap": self._place_free_handicap,
            "set_free_handicap": self._set_free_handicap,
            "loadsgf": self._loadsgf,
            "printsgf": self._printsgf,
            "stop": self._stop,
            "rendb_dump": self._rendb_dump,
        }
        self._streams: dict[str, Callable[[str, list[str]], _Stream]] = {
            "lz-analyze": lambda i, a: self._analyze(i, a, "lz"),
            "kata-analyze": lambda i, a: self._analyze(i, a, "kata"),
            "lz-genmove_analyze": lambda i, a: self._genmove_analyze(i, a, "lz"),
            "kata-genmove_analyze": lambda i, a: self._genmove_analyze(i, a, "kata"),
        }

    # -- public surface --------------------------------------------------------------
    @property
    def quit(self) -> bool:
        """True once ``quit`` was received (its reply has been returned)."""
        return self._quit

    @property
    def game(self) -> GoGame:
        return self.record.game

    @property
    def state(self) -> np.ndarray:
        """The current position."""
        return self.record.state

    @property
    def commands(self) -> list[str]:
        return [*self._commands, *self._streams]

    def handle(self, line: str) -> str | None:
        """The full reply to one input line (ending in a blank line), or None when the
        line is empty or only a comment. Never raises for bad input."""
        outcome = self._execute(line)
        if not isinstance(outcome, _Stream):
            return outcome
        lines: list[str] = []
        try:
            outcome.produce(lines.append, None, False)
        except Exception as e:  # the '=' is out: say what went wrong in the reply
            lines.append(f"error {type(e).__name__}: {e}\n")
        return f"={outcome.cmd_id}\n{''.join(lines)}\n"

    def run(self, stdin: TextIO, stdout: TextIO) -> None:
        """Answer lines from ``stdin`` on ``stdout`` (flushed after each reply) until
        ``quit`` or the end of input; an analysis streams from a thread until the next
        input line arrives."""
        lock = threading.Lock()

        def write(text: str) -> None:
            with lock:
                stdout.write(text)
                stdout.flush()

        background: tuple[threading.Thread, threading.Event] | None = None

        def finish_background() -> None:
            nonlocal background
            if background is not None:
                thread, stop = background
                stop.set()
                thread.join()
                write("\n")
                background = None

        for line in stdin:
            finish_background()  # any line, even an empty one, ends a running analysis
            outcome = self._execute(line)
            if outcome is None:
                continue
            if isinstance(outcome, str):
                write(outcome)
            elif outcome.background:
                write(f"={outcome.cmd_id}\n")
                stop = threading.Event()
                thread = threading.Thread(target=self._produce_safely, args=(outcome, write, stop), daemon=True)
                background = (thread, stop)
                thread.start()
            else:
                write(f"={outcome.cmd_id}\n")
                self._produce_safely(outcome, write, None)
                write("\n")
            if self._quit:
                break
        finish_background()

    # -- dispatch ----------------------------------------------------------------------
    def _execute(self, line: str) -> str | _Stream | None:
        text = preprocess(line)
        if not text:
            return None
        words = text.split()
        cmd_id = ""
        if words[0].isdigit():
            cmd_id = words.pop(0)
        if not words:
            return _reply(False, cmd_id, "unknown command")
        name, args = words[0], words[1:]
        try:
            if name in self._streams:
                return self._streams[name](cmd_id, args)
            command = self._commands.get(name)
            if command is None:
                return _reply(False, cmd_id, "unknown command")
            return _reply(True, cmd_id, command(args))
        except GtpError as e:
            return _reply(False, cmd_id, str(e))
        except Exception as e:  # a controller must never lose the engine
            return _reply(False, cmd_id, f"internal error: {type(e).__name__}: {e}")

    def _produce_safely(self, stream: _Stream, write: Callable[[str], None], stop: threading.Event | None) -> None:
        try:
            stream.produce(write, stop, True)
        except Exception as e:  # the '=' is out: report on stderr, end the reply normally
            self._warn(f"analysis failed: {type(e).__name__}: {e}")

    # -- games ---------------------------------------------------------------------------
    def _make_game(self, size: int, komi: float) -> GoGame:
        return GoGame(size=size, komi=komi, superko=self._superko, max_moves=self._max_moves,
                      history_length=self._history_length)

    def _set_game(self, game: GoGame) -> None:
        """A new board (size or rules changed): empty record, fresh estimator."""
        self.record = _Record(game)
        self._ownership = self._ownership_factory(game)
        self._ownership_cache: dict[bytes, np.ndarray] = {}
        self._new_game()

    def _new_game(self) -> None:
        self.clock.reset()
        self._low_value = [0, 0]

    def _with_komi(self, komi: float) -> None:
        """Komi lives in the rules object, not in the states: same positions, new
        rules, record and undo kept."""
        game = self._make_game(self.game.size, komi)
        record = self.record
        record.game = game
        self._ownership = self._ownership_factory(game)
        self._ownership_cache = {}

    def _check_komi(self, komi: float) -> None:
        trained = None if self.player is None else self.player.komi
        if trained is not None and komi != trained and self._warned_komi != komi:
            self._warned_komi = komi
            self._warn(f"komi {komi:g} differs from the komi the model was trained with ({trained:g}); "
                       f"scores use {komi:g}, the model's values assume {trained:g}")

    # -- protocol and administration -------------------------------------------------
    def _protocol_version(self, args: list[str]) -> str:
        return str(PROTOCOL_VERSION)

    def _name(self, args: list[str]) -> str:
        return ENGINE_NAME

    def _version(self, args: list[str]) -> str:
        return _version()

    def _known_command(self, args: list[str]) -> str:
        _expect(args, 1)
        return "true" if args[0] in self._commands or args[0] in self._streams else "false"

    def _list_commands(self, args: list[str]) -> str:
        return "\n".join(self.commands)

    def _quit_command(self, args: list[str]) -> str:
        self._quit = True
        return ""

    def _stop(self, args: list[str]) -> str:
        return ""  # a running analysis already stopped when this line arrived

    # -- setup -------------------------------------------------------------------------
    def _boardsize(self, args: list[str]) -> str:
        _expect(args, 1)
        try:
            size = int(args[0])
        except ValueError:
            raise GtpError("syntax error") from None
        if not MIN_SIZE <= size <= MAX_SIZE:
            raise GtpError("unacceptable size")
        game = self._make_game(size, self.game.komi)
        if self.player is not None and (why := self.player.why_not(game)):
            raise GtpError(f"unacceptable size: {why}")
        self._set_game(game)
        return ""

    def _clear_board(self, args: list[str]) -> str:
        self.record.clear()
        self._new_game()
        return ""

    def _komi(self, args: list[str]) -> str:
        _expect(args, 1)
        try:
            komi = float(args[0])
        except ValueError:
            raise GtpError("syntax error") from None
        if not math.isfinite(komi):
            raise GtpError("syntax error")
        if komi * 2 != int(komi * 2):
            # Area scoring counts whole points; GoGame keeps komi in half points.
            raise GtpError("komi must be a multiple of 0.5")
        self._with_komi(komi)
        self._check_komi(komi)
        return ""

    def _fixed_handicap(self, args: list[str]) -> str:
        stones = self._handicap_count(args)
        points = handicap_points(self.game.size, stones)
        if points is None:
            raise GtpError("invalid handicap")
        return self._place_handicap(points)

    def _place_free_handicap(self, args: list[str]) -> str:
        stones = self._handicap_count(args)
        if stones >= self.game.size * self.game.size:
            raise GtpError("invalid handicap")
        return self._place_handicap(_free_handicap_points(self.game.size, stones))

    def _set_free_handicap(self, args: list[str]) -> str:
        if len(args) < 2:
            raise GtpError("bad vertex list")
        if not self.record.board_is_empty():
            raise GtpError("board not empty")
        try:
            points = [self.game.text_to_action(v) for v in args]
        except ValueError:
            raise GtpError("bad vertex list") from None
        if self.game.pass_action in points or len(set(points)) != len(points) or \
                len(points) >= self.game.size * self.game.size:
            raise GtpError("bad vertex list")
        self._place_handicap(points)
        return ""

    def _handicap_count(self, args: list[str]) -> int:
        _expect(args, 1)
        try:
            stones = int(args[0])
        except ValueError:
            raise GtpError("syntax error") from None
        if not self.record.board_is_empty():
            raise GtpError("board not empty")
        if stones < 2:
            raise GtpError("invalid handicap")
        return stones

    def _place_handicap(self, points: list[int]) -> str:
        self.record.setup(black=points, to_play=1)
        self.record.handicap = len(points)
        return " ".join(self.game.action_to_text(a) for a in sorted(points))

    # -- moves -------------------------------------------------------------------------
    def _play(self, args: list[str]) -> str:
        _expect(args, 2)
        color = _color(args[0])
        try:
            action = self.game.text_to_action(args[1])
        except ValueError:
            raise GtpError("syntax error") from None
        try:
            self.record.play(color, action)
        except IllegalMove:
            raise GtpError("illegal move") from None
        return ""

    def _genmove(self, args: list[str]) -> str:
        _expect(args, 1)
        return self._generate(_color(args[0]))

    def _genmove_cleanup(self, args: list[str]) -> str:
        _expect(args, 1)
        return self._generate(_color(args[0]), cleanup=True)

    def _reg_genmove(self, args: list[str]) -> str:
        _expect(args, 1)
        return self._generate(_color(args[0]), commit=False)

    def _generate(self, color: int, *, cleanup: bool = False, commit: bool = True,
                  report: Callable[[Analysis], None] | None = None, interval: float | None = None,
                  analyze: bool = False) -> str:
        """Choose (and unless ``commit`` is False, play) ``color``'s move; the vertex,
        'pass' or 'resign'. ``analyze``: search even without a model (rollouts), as
        the genmove_analyze commands do; ``report`` gets snapshots every
        ``interval`` seconds and the final one."""
        start = time.perf_counter()
        game, probe = self.game, self.record.probe(color)
        seconds = self.clock.budget(color, board_size=game.size, moves_played=self.record.moves_played)
        player = self.player or (self._rollout_player() if analyze else None)
        value = None
        if player is None:
            action = self._random_move(probe, color, cleanup=cleanup)
        else:
            analysis = player.search(game, probe, self.record.history(), seconds=seconds,
                                     max_visits=None if self.player is not None else self.simulations,
                                     on_snapshot=report, interval=interval)
            if report is not None:
                report(analysis)
            action = game.pass_action if analysis.best is None else analysis.best
            value = analysis.value if player.uses_model else None
            if cleanup:
                action = self._cleanup_override(probe, color, action)
        resign = False
        if value is not None and self.resign_threshold is not None and not cleanup:
            low = (value + 1) / 2 < self.resign_threshold
            self._low_value[color] = self._low_value[color] + 1 if low else 0
            resign = self._low_value[color] >= self.resign_moves
        if commit and not resign:
            try:
                self.record.play(color, action)
            except IllegalMove as e:
                raise GtpError(f"the search chose an illegal move: {e}") from None
        if commit:
            self.clock.spend(color, time.perf_counter() - start)
        return "resign" if resign else game.action_to_text(action)

    def _rollout_player(self) -> SearchPlayer:
        if self._rollout is None:
            self._rollout = SearchPlayer(None, simulations=self.simulations, seed=self._seed)
        return self._rollout

    def _random_move(self, state: np.ndarray, color: int, *, cleanup: bool) -> int:
        """A uniform legal move that fills none of ``color``'s own eyes and lies on a
        point the estimate does not call settled, else pass. In cleanup, the
        liberties of the opponent's dead stones first, and no pass while any are
        left and a move is."""
        game = self.game
        legal = game.legal_mask(state)
        legal[game.pass_action] = False
        candidates = [int(a) for a in np.flatnonzero(legal) if not game.is_own_eye(state, int(a), color)]
        if not candidates:
            return game.pass_action
        own = self._estimate(state)
        if cleanup:
            dead_liberties = self._dead_liberties(state, own, 1 - color)
            if dead_liberties is not None:
                targets = [a for a in candidates if a in dead_liberties] or candidates
                return targets[int(self._rng.integers(len(targets)))]
        useful = [a for a in candidates if abs(float(own[a])) < SETTLED]
        if not useful:
            return game.pass_action
        return useful[int(self._rng.integers(len(useful)))]

    def _cleanup_override(self, state: np.ndarray, color: int, action: int) -> int:
        """A search's pass in cleanup becomes a move on a liberty of the opponent's
        dead stones while any are left."""
        game = self.game
        if action != game.pass_action:
            return action
        liberties = self._dead_liberties(state, self._estimate(state), 1 - color)
        if not liberties:
            return action
        legal = game.legal_mask(state)
        targets = sorted(a for a in liberties if legal[a] and not game.is_own_eye(state, a, color))
        return targets[int(self._rng.integers(len(targets)))] if targets else action

    def _dead_liberties(self, state: np.ndarray, own: np.ndarray, color: int) -> set[int] | None:
        """The liberties of ``color``'s dead groups, or None when none is dead."""
        dead = [s.group for s in stone_status(self.game, state, own) if s.status == "dead" and s.group.color == color]
        if not dead:
            return None
        return {a for g in dead for a in g.liberties}

    def _undo(self, args: list[str]) -> str:
        if not self.record.undo():
            raise GtpError("cannot undo")
        return ""

    # -- time --------------------------------------------------------------------------
    def _time_settings(self, args: list[str]) -> str:
        _expect(args, 3)
        try:
            main, period, stones = float(args[0]), float(args[1]), int(args[2])
            settings = parse_time_settings(main, period, stones)
        except ValueError:
            raise GtpError("syntax error") from None
        self.clock.reset(settings)
        return ""

    def _kgs_time_settings(self, args: list[str]) -> str:
        try:
            settings = parse_kgs_time_settings(args)
        except ValueError:
            raise GtpError("syntax error") from None
        self.clock.reset(settings)
        return ""

    def _time_left(self, args: list[str]) -> str:
        _expect(args, 3)
        color = _color(args[0])
        try:
            seconds, stones = float(args[1]), int(args[2])
        except ValueError:
            raise GtpError("syntax error") from None
        if seconds < 0 or stones < 0:
            raise GtpError("syntax error")
        self.clock.time_left(color, seconds, stones)
        return ""

    # -- scoring -------------------------------------------------------------------------
    def _estimate(self, state: np.ndarray) -> np.ndarray:
        """The ownership estimate of a position (cached: the same position always
        gets the same answer)."""
        key = state[: K.HEADER + self.game.params[K.P_POINTS]].tobytes()
        own = self._ownership_cache.get(key)
        if own is None:
            if len(self._ownership_cache) > 64:
                self._ownership_cache.clear()
            own = np.asarray(self._ownership(state, self.record.history()), dtype=np.float32)
            self._ownership_cache[key] = own
        return own

    def _status(self) -> dict[str, list]:
        game, state = self.game, self.record.state
        groups: dict[str, list] = {status: [] for status in _STATUSES}
        if self.scoring == "tromp-taylor":
            groups["alive"] = game.groups(state)
            return groups
        probe = _reopened(game, state)
        for s in stone_status(game, probe, self._estimate(probe)):
            groups[s.status].append(s.group)
        return groups

    def _final_score(self, args: list[str]) -> str:
        game = self.game
        dead = [a for g in self._status()["dead"] for a in g.stones]
        score = area_without_dead(game, self.record.state, dead) - game.komi
        if score == 0:
            return "0"
        return f"{'B' if score > 0 else 'W'}+{abs(score):g}"

    def _final_status_list(self, args: list[str]) -> str:
        _expect(args, 1)
        status = args[0].lower()
        if status not in _STATUSES:
            raise GtpError("syntax error")
        # One group per line, as GNU Go answers.
        return "\n".join(" ".join(self.game.action_to_text(a) for a in g.stones) for g in self._status()[status])

    # -- records -------------------------------------------------------------------------
    def _loadsgf(self, args: list[str]) -> str:
        if len(args) not in (1, 2):
            raise GtpError("syntax error")
        try:
            until = int(args[1]) if len(args) == 2 else None
        except ValueError:
            raise GtpError("syntax error") from None
        try:
            sgf = load_sgf(args[0])
        except SgfError as e:
            raise GtpError(f"cannot load file: {e}") from None
        game = self._make_game(sgf.size, sgf.komi)
        if self.player is not None and (why := self.player.why_not(game)):
            raise GtpError(f"cannot load file: {why}")
        before = (self.record, self._ownership, self._ownership_cache)
        self._set_game(game)
        try:
            self._replay(sgf, until)
        except GtpError:
            self.record, self._ownership, self._ownership_cache = before
            raise
        self._check_komi(sgf.komi)
        return ""

    def _replay(self, sgf: GoRecord, until: int | None) -> None:
        record, played = self.record, 0
        for event in sgf.events:
            if isinstance(event, Move):
                played += 1
                if until is not None and played >= until:
                    break
                try:
                    record.play(event.color, event.action)
                except IllegalMove as e:
                    raise GtpError(f"cannot load file: move {played} is illegal ({e})") from None
            else:
                try:
                    record.setup(event.black, event.white, event.empty,
                                 to_play=sgf.to_play if not record.events else None)
                except ValueError as e:
                    raise GtpError(f"cannot load file: {e}") from None
        if sgf.handicap and record.events and isinstance(record.events[0], Setup):
            record.handicap = sgf.handicap

    def _printsgf(self, args: list[str]) -> str:
        if len(args) > 1:
            raise GtpError("syntax error")
        game, record = self.game, self.record
        result = None
        if game.is_terminal(record.state) and game.end_reason(record.state) == "two passes":
            score = self._final_score([])
            result = "Draw" if score == "0" else score
        # Setup stones (a handicap) without a move after them do not say whose turn it
        # is; PL does (write_sgf writes it only then). Without it readers guess, and
        # differently (Sabaki gives white the move after HA, sgfmill's users black).
        to_play = game.to_play(record.state) if record.events else None
        text = write_sgf(GoRecord(
            size=game.size, komi=game.komi, events=tuple(record.events), to_play=to_play, handicap=record.handicap,
            result=result, rules="Tromp-Taylor" if self.scoring == "tromp-taylor" else "Chinese",
            application=(ENGINE_NAME, _version()),
        ))
        if args:
            try:
                with open(args[0], "w", encoding="utf-8") as f:
                    f.write(text)
            except OSError as e:
                raise GtpError(f"cannot write file: {e.strerror}") from None
            return ""
        # A reply may not hold an empty line (it would end the reply early).
        return "\n".join(line for line in text.splitlines() if line.strip())

    # -- analysis ------------------------------------------------------------------------
    def _analyze_request(self, args: list[str], dialect: str) -> _AnalyzeRequest:
        words = list(args)
        color = self.game.to_play(self.record.state)
        if words and words[0].lower() in _COLORS:
            color = _COLORS[words.pop(0).lower()]
        interval = 0.0
        if words and _is_number(words[0]):
            interval = float(words.pop(0)) / 100
        max_moves, ownership = None, False
        while words:
            key = words.pop(0)
            if key in ("allow", "avoid"):
                if len(words) < 3:
                    raise GtpError("syntax error")
                del words[:3]  # accepted, not applied
                continue
            if not words:
                raise GtpError("syntax error")
            value = words.pop(0)
            if key == "interval" and _is_number(value):
                interval = float(value) / 100
            elif key == "maxmoves" and value.isdigit():
                max_moves = int(value)
            elif key == "minmoves" and value.isdigit():
                pass  # accepted: only visited moves are reported
            elif key == "ownership" and value in ("true", "false"):
                ownership = value == "true"
            else:
                raise GtpError(f"syntax error: unknown analysis option {key} {value}")
        if interval < 0:
            raise GtpError("syntax error")
        return _AnalyzeRequest(dialect, color, interval, max_moves, ownership and dialect == "kata")

    def _analyze(self, cmd_id: str, args: list[str], dialect: str) -> _Stream:
        request = self._analyze_request(args, dialect)
        probe = self.record.probe(request.color)
        history = self.record.history()
        player = self.player or self._rollout_player()
        owner = self._owner_text(probe, request)

        def produce(write: Callable[[str], None], stop: threading.Event | None, live: bool) -> None:
            def report(analysis: Analysis) -> None:
                if request.interval > 0 and analysis.moves:
                    write(self._info_line(analysis, request, owner) + "\n")

            if not live and request.interval <= 0:
                return  # nothing would be printed: no search
            final = player.search(self.game, probe, history, max_visits=self.analysis_visits, stop=stop,
                                  on_snapshot=report if live else None,
                                  interval=request.interval if live and request.interval > 0 else None)
            report(final)

        return _Stream(cmd_id, produce, background=True)

    def _genmove_analyze(self, cmd_id: str, args: list[str], dialect: str) -> _Stream:
        request = self._analyze_request(args, dialect)
        owner = self._owner_text(self.record.probe(request.color), request)

        def produce(write: Callable[[str], None], stop: threading.Event | None, live: bool) -> None:
            def report(analysis: Analysis) -> None:
                if request.interval > 0 and analysis.moves:
                    write(self._info_line(analysis, request, owner) + "\n")

            snapshots: list[Analysis] = []
            move = self._generate(request.color, analyze=True, report=report if live else snapshots.append,
                                  interval=request.interval if live and request.interval > 0 else None)
            if snapshots:
                report(snapshots[-1])
            write(f"play {move}\n")

        return _Stream(cmd_id, produce, background=False)

    def _owner_text(self, probe: np.ndarray, request: _AnalyzeRequest) -> str | None:
        if not request.ownership:
            return None
        own = self._estimate(probe) * (1.0 if request.color == 0 else -1.0)
        return " ".join(f"{v:.6f}" for v in own)

    def _info_line(self, analysis: Analysis, request: _AnalyzeRequest, owner: str | None) -> str:
        game = self.game
        moves = analysis.moves if request.max_moves is None else analysis.moves[: request.max_moves]
        parts = []
        for order, m in enumerate(moves):
            pv = " ".join(game.action_to_text(a) for a in m.pv)
            vertex = game.action_to_text(m.action)
            if request.dialect == "lz":
                parts.append(f"info move {vertex} visits {m.visits} winrate {round(m.winrate * 10000)} "
                             f"prior {round(m.prior * 10000)} lcb {round(m.lcb * 10000)} order {order} pv {pv}")
            else:
                parts.append(f"info move {vertex} visits {m.visits} utility {2 * m.winrate - 1:.6f} "
                             f"winrate {m.winrate:.6f} prior {m.prior:.6f} lcb {m.lcb:.6f} "
                             f"utilityLcb {2 * m.lcb - 1:.6f} order {order} pv {pv}")
        line = " ".join(parts)
        if owner is not None:
            line += " ownership " + owner
        return line

    # -- queries -----------------------------------------------------------------------
    def _showboard(self, args: list[str]) -> str:
        return "\n" + self.game.render(self.record.state)

    def _rendb_dump(self, args: list[str]) -> str:
        text = self.game.rens_to_json(self.record.state)
        # A reply may not hold an empty line (it would end the reply early).
        return "\n".join(line for line in text.splitlines() if line.strip())


def run(engine: GtpEngine, stdin: TextIO, stdout: TextIO) -> None:
    """``engine.run(stdin, stdout)`` as a function."""
    engine.run(stdin, stdout)


def _reply(ok: bool, cmd_id: str, result: str) -> str:
    head = ("=" if ok else "?") + cmd_id
    if result and not result.startswith("\n"):
        head += " "
    return f"{head}{result}\n\n"


def _expect(args: list[str], count: int) -> None:
    if len(args) != count:
        raise GtpError("syntax error")


def _color(word: str) -> int:
    color = _COLORS.get(word.lower())
    if color is None:
        raise GtpError("syntax error")
    return color


def _is_number(word: str) -> bool:
    try:
        return math.isfinite(float(word))
    except ValueError:
        return False
