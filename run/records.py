"""The records a run keeps in its directory, each with a format version: the status
line, the gating line, the ladder and the evaluation line. The training loop (run/loop.py) writes them
through this module, and whatever reads them reads them through it: ``tengen status``
(tengen/run_control.py), ``tengen serve`` (web/), the benchmarks, testing/ and the
tests. run/run_dir.py names the files; this module says what they hold.

    status.json    StatusLine  format 1  the last status line, one JSON object (indented)
    status.jsonl   StatusLine  format 1  every status line, one JSON object a line
    gating.jsonl   GatingLine  format 1  every gating match: {"format", "time", **GatingSummary}, a line each
    ladder.json    Ladder      format 1  {"format": 1, "entries": [LadderEntry, ...]}, every promotion
    evaluations.jsonl  EvaluationLine  format 1  every strength evaluation of a best model, a line each

A record of format 1 holds its fields and no others, each of its type. Format 0 is
what tengen wrote before its records had a version (no ``format`` key); its files
still read, as they were (a key no reader knows is passed over):

- a status line: the keys the first cluster run wrote (``elapsed_s``, ``games``, the
  rates, ``learner_step``, ``loss``, ``window``, ``best``, ``promotions``,
  ``last_gating``, ``bad_entries``) are needed; those added later read as nothing
  happened (``totals`` from ``games``, no cache hits, no ``losses``, not ``final``,
  ...), and a status.json from before the lines had a ``time`` takes its file's
  modification time, which is when it was written (status.jsonl came with ``time``);
- a gating line: the keys of format 1;
- ladder.json: a bare list of the entries; a gating result from before the ladder
  recorded what decided it says ``"by": "unrecorded"`` (``UNRECORDED``);
- the ladder.json of tengen 0.1.0's single-process run (versions as strings, no
  sha256) is refused by name, as ``--resume`` refuses its directory.

An evaluation line came with format 1 and has no format 0. A format newer than this
module's is refused, naming the file; so is a record of a format it knows with a
field missing, mistyped or unknown (``RecordError``, a ``RunDirError``). A line of a
``.jsonl`` file that is not JSON at all is skipped, not refused: it is the one a
crash cut short, or the one the run is writing now.

The status and gating lines are frozen dataclasses: the loop alone makes them, and
readers take them as values; they become plain JSON only at the edges
(``to_json``: the files, the run page's API, the status board). A ladder entry is a
TypedDict, ``engine.interfaces.LadderEntry``, because it is the model registry's own
value: the registry's interface carries it, only the engine may hold that interface,
and the entry is the same JSON in Redis and in ladder.json; how it is made
(``ladder_entry``) and read back (``ladder_entry_from_json``, which both registries use
for what Redis returns) is here. Entries in Redis carry no format of their own: they
read as format 0 does, which covers every entry a tengen has written. What a wiring
adds to a status line (``WiringStatus``) is a TypedDict too: the wirings pass it to
``TrainingLoop.report`` as keywords.

Writing is cheap, since a status line goes out every 5 s for days: ``to_json``
builds one dict and checks nothing; reading checks every field. This module imports
neither the engine nor numpy (``tengen status`` reads a directory without them).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Literal, TypedDict, TypeVar, cast

from tengen.run.run_dir import RunDir, RunDirError, version_id

if TYPE_CHECKING:
    from tengen.engine.gating import GatingSummary
    from tengen.engine.interfaces import LadderEntry, PromotionResult
    from tengen.workers.strength import ReferenceScore

__all__ = ["STATUS_FORMAT", "GATING_FORMAT", "LADDER_FORMAT", "EVALUATION_FORMAT", "EvaluationLine",
           "append_evaluation", "read_evaluations", "scores_text", "UNRECORDED", "RecordError", "Total", "TOTALS",
           "WiringStatus", "StatusLine", "GatingLine", "Ladder", "ladder_entry", "ladder_entry_from_json",
           "parse_line", "write_status", "thin_history", "append_gating", "write_ladder", "read_status",
           "read_status_history", "read_gating_history", "read_ladder"]

#: the formats this module writes, and the newest each reader takes
STATUS_FORMAT = 1
GATING_FORMAT = 1
LADDER_FORMAT = 1
EVALUATION_FORMAT = 1
#: what decided a gating result read from before the ladder recorded it
UNRECORDED = "unrecorded"

#: one of the run's totals: a counter every self-play worker reports (``WorkerStats``)
Total = Literal["games", "positions", "evaluations", "cache_hits", "moves"]
#: the run's totals (kept by the run: a lost worker's games stay counted)
TOTALS: tuple[Total, ...] = ("games", "positions", "evaluations", "cache_hits", "moves")


class RecordError(RunDirError):
    """A record of a run directory this tengen does not read: the message names the
    file (and the line) and what is wrong with it."""


# -- checking a field ----------------------------------------------------------------------
@dataclass(frozen=True)
class _Check:
    """What a field's value must be, in words (for the error) and as a test."""

    words: str
    test: Callable[[Any], bool]


def _typed(words: str, *types: type) -> _Check:
    """A value of one of ``types`` exactly (a bool is no integer here)."""
    return _Check(words, lambda v: type(v) in types)


def _object(words: str, *types: type) -> _Check:
    """An object whose values are of ``types`` (checked in C: a line holds hundreds)."""
    allowed = set(types)
    return _Check(f"an object whose values are {words}",
                  lambda v: type(v) is dict and set(map(type, v.values())) <= allowed)


def _or_null(check: _Check) -> _Check:
    return _Check(f"{check.words} or null", lambda v: v is None or check.test(v))


_INT = _typed("an integer", int)
_VERSION = _Check("a model version (an integer >= 0)", lambda v: type(v) is int and v >= 0)
_NUMBER = _typed("a number", int, float)
_STR = _typed("a string", str)
_BOOL = _typed("true or false", bool)
_VERSION_ID = _Check("a model version id (000042)", lambda v: type(v) is str and bool(re.fullmatch(r"\d{6,}", v)))
_DECISION = _Check('"promote" or "reject"', lambda v: v in ("promote", "reject"))
_ANY_OBJECT = _typed("an object", dict)
_LIST_OF_OBJECTS = _Check("a list of objects", lambda v: type(v) is list and all(type(x) is dict for x in v))

#: a field's type as annotated below -> its check (the fields are checked by their annotation)
_BY_TYPE: dict[str, _Check] = {
    "int": _INT, "float": _NUMBER, "str": _STR, "bool": _BOOL,
    "float | None": _or_null(_NUMBER), "str | None": _or_null(_STR), "int | None": _or_null(_INT),
    "dict[str, int]": _object("integers", int), "dict[str, float]": _object("numbers", int, float),
    "dict[Total, int]": _object("integers", int), "dict[str, dict[str, Any]]": _object("objects", dict),
    "list[dict[str, Any]]": _LIST_OF_OBJECTS,
    "GatingSummary | None": _or_null(_ANY_OBJECT),  # and then read as one (_summary)
}
#: the fields whose annotation says less than what they hold
_STATUS_SPECIAL = {"best": _VERSION_ID}

#: no default: the field must be there
_NEEDED: Any = object()


def _kind(value: object) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number")


class _Fields:
    """One JSON object read as (part of) a record of ``version``: each field taken once
    and checked; in format 0 a missing field with an ``old`` value reads as that.
    ``where`` and ``what`` name the file (and line) and the record in errors."""

    def __init__(self, data: object, where: str, what: str, version: int):
        if not isinstance(data, dict):
            raise RecordError(f"{where}: {what} is a JSON object, not {_kind(data)}")
        self.data, self.where, self.what, self.version = data, where, what, version
        self.taken: set[str] = set()

    @classmethod
    def record(cls, data: object, where: str, what: str, newest: int) -> _Fields:
        """A whole record, its format its ``format`` (0: none given), refused past ``newest``."""
        version = data.get("format", 0) if isinstance(data, dict) else 0
        if type(version) is not int or version < 0:
            raise RecordError(f"{where}: {what}'s format must be a version number, not {version!r}")
        if version > newest:
            raise RecordError(f"{where}: {what} of format {version}, newer than this tengen reads (format {newest} "
                              "at most): read it with the tengen that wrote it, or a newer one")
        f = cls(data, where, what, version)
        f.taken.add("format")
        return f

    def take(self, key: str, check: _Check, old: Any = _NEEDED) -> Any:
        self.taken.add(key)
        if key not in self.data:
            if self.version == 0 and old is not _NEEDED:
                return old
            raise RecordError(f"{self.where}: {self.what} of format {self.version} lacks {key!r}")
        value = self.data[key]
        if not check.test(value):
            shown = repr(value)
            raise RecordError(f"{self.where}: {self.what}'s {key!r} must be {check.words}, not "
                              f"{shown if len(shown) <= 60 else shown[:57] + '...'}")
        return value

    def done(self) -> None:
        """A record of format 1 on holds its fields and no others (format 0's writers
        added keys as they went, and dropped none)."""
        extra = sorted(set(self.data) - self.taken)
        if self.version > 0 and extra:
            raise RecordError(f"{self.where}: {', '.join(map(repr, extra))} is no field of {self.what} of "
                              f"format {self.version}")


def _summary(value: object, where: str, version: int) -> GatingSummary:
    """A gating match's verdict (``engine.gating.GatingSummary``), inside a record of ``version``."""
    f = _Fields(value, where, "a gating result", version)  # of its record's format, none of its own
    summary = {"candidate": f.take("candidate", _VERSION), "best": f.take("best", _VERSION),
               "decision": f.take("decision", _DECISION), "wins": f.take("wins", _INT),
               "draws": f.take("draws", _INT), "losses": f.take("losses", _INT), "elo": f.take("elo", _NUMBER),
               "elo_low": f.take("elo_low", _NUMBER), "elo_high": f.take("elo_high", _NUMBER),
               "llr": f.take("llr", _or_null(_NUMBER)), "by": f.take("by", _STR, old=UNRECORDED)}
    f.done()
    return cast("GatingSummary", summary)


# -- the status line --------------------------------------------------------------------------
class WiringStatus(TypedDict, total=False):
    """What a wiring adds to the loop's status line (``TrainingLoop.report``'s
    keywords): both give ``workers``, ``inference_servers`` and ``stream_length``; the
    Ray run (cluster/driver.py) its servers' mean batch, the workers asked for and
    Redis's state and its parts' restarts; the single-process run its ``mode``, the
    learner's reuse, and its model's mean batch and busy share. A key the wiring does
    not give is absent from the line."""

    mode: str  # "single-process"; absent: the Ray run
    workers: int
    inference_servers: int
    stream_length: int | None  # None: the run's Redis did not answer
    mean_batch: float
    target_workers: int
    workers_starting: int  # started, not yet running (Ray has not placed them, or they start)
    inference_servers_starting: int
    not_started: list[dict[str, Any]]  # each part waiting past cluster.start_timeout_s, with the reason
    held_for: str | None  # the part no worker starts for while it waits for room
    redis_outage_s: float
    redis_memory: dict[str, int]  # bytes by part (cluster/status_board.py's memory_by_part)
    components: dict[str, dict[str, Any]]  # restarts and last errors by part (cluster/supervision.py)
    reuse: float  # samples drawn per position added
    #: the share of the interval's wall time self-play's model spent in its compiled call
    #: (the single-process run, where self-play calls the model itself)
    model_busy: float
    #: seconds self-play's model has spent in its compiled call since the run (or its
    #: resumption) started: the busy share over any span of lines, which a rounded
    #: per-interval share loses when the calls are short (a tiny net on a slow machine)
    model_s: float


@dataclass(frozen=True)
class StatusLine:
    """One status line: rates over the interval since the line before, totals since
    the run's start, the learner's and the gating's newest state, and what the wiring
    adds. A line read from an older file is of this format, filled in as the module
    docstring says."""

    time: float  # when it was written, seconds since the epoch
    elapsed_s: float  # since the run (or its resumption) started
    games: int  # totals["games"]
    totals: dict[Total, int]  # since the run's start (a resumed run counts on)
    games_per_s: float
    moves_per_s: float
    positions_per_s: float
    evaluations_per_s: float
    cache_hit_share: float  # the share of the leaves the workers' evaluation caches answered
    learner_step: int
    loss: float | None  # the learner's total loss at its last step (None before it trained)
    losses: dict[str, float]  # the loss by part, and the learning rate
    window: int  # positions in the replay window
    window_capacity: int
    best: str  # the best model's version id (000042)
    promotions: int  # since the run (or its resumption) started
    last_gating: GatingSummary | None
    bad_entries: int  # stream entries the learner could not decode
    duplicate_games: int  # games the learner got twice and dropped
    #: games the stream trimmed (MAXLEN) before the learner read them: acknowledged to
    #: their workers and never trained on (the learner was down longer than the stream holds)
    trimmed_unread: int
    disk_outage_s: float  # how long the run directory's disk has been failing (0: it writes)
    error: str | None  # why the run stopped early (a crash loop, Redis away too long)
    final: bool  # the run's last line: a reader tells a finished run from a silent one by it
    reported_games: dict[str, int]  # games each worker incarnation said it finished, the newest 200
    wiring: WiringStatus = field(default_factory=lambda: WiringStatus())

    def to_json(self) -> dict[str, Any]:
        """The line as written: its fields and the wiring's keys side by side."""
        data: dict[str, Any] = {"format": STATUS_FORMAT}
        for name in _STATUS_CHECKS:
            data[name] = getattr(self, name)
        data.update(self.wiring)
        return data

    def for_history(self) -> StatusLine:
        """The line as status.jsonl keeps it: without what only the newest line is read
        for (each part's restarts and errors, each worker's game count)."""
        wiring = cast(WiringStatus, {key: value for key, value in self.wiring.items() if key != "components"})
        return replace(self, reported_games={}, wiring=wiring)

    @classmethod
    def from_json(cls, data: object, where: str, *, written: float | None = None) -> StatusLine:
        """The line in ``data`` (a status line as read from JSON); ``where`` names it in
        errors; ``written``: when the file was written, the time of a format-0 line
        from before lines had one."""
        f = _Fields.record(data, where, "a status line", STATUS_FORMAT)
        old = _STATUS_OLD if written is None else {**_STATUS_OLD, "time": round(written, 1)}
        values = {name: f.take(name, check, old.get(name, _NEEDED)) for name, check in _STATUS_CHECKS.items()}
        values["totals"] = _totals(values["totals"], values["games"], f)
        if values["last_gating"] is not None:
            values["last_gating"] = _summary(values["last_gating"], f"{where}: last_gating", f.version)
        wiring = {key: f.take(key, check) for key, check in _WIRING_CHECKS.items() if key in f.data}
        f.done()
        return cls(**values, wiring=cast(WiringStatus, wiring))


#: each field's check, by its type as annotated above (a type without a check fails here, at import)
_STATUS_CHECKS = {f.name: _STATUS_SPECIAL.get(f.name) or _BY_TYPE[str(f.type)]
                  for f in fields(StatusLine) if f.name != "wiring"}
_WIRING_CHECKS = {key: _BY_TYPE[str(getattr(kind, "__forward_arg__", kind))]
                  for key, kind in WiringStatus.__annotations__.items()}
#: what a format-0 line lacking these reads as (they came after the first cluster run's line;
#: ``totals`` is then filled from ``games``, and ``time`` is the file's, ``from_json``'s ``written``)
_STATUS_OLD: dict[str, Any] = {"totals": {}, "moves_per_s": 0.0, "cache_hit_share": 0.0, "losses": {},
                               "duplicate_games": 0, "trimmed_unread": 0, "disk_outage_s": 0.0,
                               "error": None, "final": False, "reported_games": {}}


def _totals(totals: dict[str, int], games: int, f: _Fields) -> dict[Total, int]:
    """Every total, each once; in format 0 one it lacks is 0 (``games``: the line's)."""
    if set(totals) - set(TOTALS) or (f.version > 0 and set(totals) != set(TOTALS)):
        raise RecordError(f"{f.where}: a status line's totals are {', '.join(TOTALS)}, not {', '.join(totals)}")
    return {key: totals.get(key, games if key == "games" else 0) for key in TOTALS}


# -- the gating line ----------------------------------------------------------------------------
@dataclass(frozen=True)
class GatingLine:
    """One gating match's result as gating.jsonl keeps it, promoted or not: when it
    was decided, and its verdict (the ladder keeps the promotions only)."""

    time: float  # seconds since the epoch
    summary: GatingSummary

    def to_json(self) -> dict[str, Any]:
        return {"format": GATING_FORMAT, "time": self.time, **self.summary}

    @classmethod
    def from_json(cls, data: object, where: str) -> GatingLine:
        f = _Fields.record(data, where, "a gating line", GATING_FORMAT)
        at = f.take("time", _NUMBER)
        rest = {key: value for key, value in f.data.items() if key not in f.taken}  # the summary's, checked there
        return cls(time=at, summary=_summary(rest, where, f.version))


# -- the evaluation line ------------------------------------------------------------------------
_MEASURE = _Check('"share" or "score"', lambda v: v in ("share", "score"))


def _reference_score(value: object, where: str, version: int) -> ReferenceScore:
    """One reference's result (workers/strength.py's ``ReferenceScore``), inside an evaluation line."""
    f = _Fields(value, where, "a reference's score", version)
    score = {"reference": f.take("reference", _STR), "measure": f.take("measure", _MEASURE),
             "value": f.take("value", _or_null(_NUMBER)), "se": f.take("se", _or_null(_NUMBER)),
             "n": f.take("n", _INT), "skipped": f.take("skipped", _or_null(_STR))}
    f.done()
    if (score["value"] is None) != (score["skipped"] is not None):
        raise RecordError(f"{where}: a reference's score has a value or says why it was skipped, not both nor "
                          "neither")
    return cast("ReferenceScore", score)


@dataclass(frozen=True)
class EvaluationLine:
    """One strength evaluation as evaluations.jsonl keeps it: the best model's
    ``version`` measured against the game's fixed references (workers/strength.py),
    when it was recorded, how long it took (wall and the evaluator's CPU), where the
    run was when it was asked for (the learner's step, the self-play games), and each
    reference's score with its standard error."""

    time: float  # when the result was recorded, seconds since the epoch
    version: int
    elapsed_s: float  # the evaluation's wall time
    cpu_s: float  # the evaluator's CPU time
    learner_step: int  # the learner's step when the evaluation was asked for
    games: int  # self-play games then
    scores: list[ReferenceScore]

    def to_json(self) -> dict[str, Any]:
        return {"format": EVALUATION_FORMAT, "time": self.time, "version": self.version,
                "id": version_id(self.version), "elapsed_s": self.elapsed_s, "cpu_s": self.cpu_s,
                "learner_step": self.learner_step, "games": self.games, "scores": list(self.scores)}

    @classmethod
    def from_json(cls, data: object, where: str) -> EvaluationLine:
        f = _Fields.record(data, where, "an evaluation line", EVALUATION_FORMAT)
        if f.version == 0:
            raise RecordError(f"{where}: an evaluation line has a format (evaluations came with format 1)")
        version = f.take("version", _VERSION)
        if f.take("id", _VERSION_ID) != version_id(version):
            raise RecordError(f"{where}: an evaluation line's id is not its version's ({version_id(version)})")
        values = {"time": f.take("time", _NUMBER), "version": version, "elapsed_s": f.take("elapsed_s", _NUMBER),
                  "cpu_s": f.take("cpu_s", _NUMBER), "learner_step": f.take("learner_step", _INT),
                  "games": f.take("games", _INT)}
        scores = f.take("scores", _LIST_OF_OBJECTS)
        f.done()
        return cls(**values, scores=[_reference_score(s, f"{where}: scores[{i}]", f.version)
                                     for i, s in enumerate(scores)])

    def text(self) -> str:
        """The line for a person: ``000004 at step 1,200: vs_mcts400 0.625 ± 0.077, ...``."""
        return f"{version_id(self.version)} at step {self.learner_step:,}: {scores_text(self.scores)}"

    def score(self, reference: str) -> ReferenceScore | None:
        """The score of ``reference``, None when this line has none."""
        return next((s for s in self.scores if s["reference"] == reference), None)


def scores_text(scores: list[ReferenceScore]) -> str:
    """References' scores in one line: ``vs_mcts400 0.625 ± 0.077, vs_gnugo1 skipped (...)``."""
    return ", ".join(f"{s['reference']} {s['value']:.3f} ± {s['se']:.3f}"
                     if s["value"] is not None and s["se"] is not None else f"{s['reference']} skipped ({s['skipped']})"
                     for s in scores)


# -- the ladder ---------------------------------------------------------------------------------
def ladder_entry(version: int, sha256: str, elo: float | None, result: PromotionResult,
                 at: float | None) -> LadderEntry:
    """A promotion as the ladder keeps it (both registries, and ladder.json); ``at``:
    when it was promoted (None: now)."""
    return {"version": int(version), "id": version_id(version), "sha256": sha256,
            "elo": None if elo is None else float(elo), "result": result,
            "time": time.time() if at is None else float(at)}


def ladder_entry_from_json(data: object, where: str, *, version: int = 0) -> LadderEntry:
    """A ladder entry read back, checked (from Redis or a ladder file of ``version``;
    Redis's entries are read as format 0, which every entry written so far is)."""
    f = _Fields(data, where, "a ladder entry", version)  # of its ladder's format, none of its own
    number = f.take("version", _VERSION)
    entry_id = f.take("id", _STR)
    if entry_id != version_id(number):
        raise RecordError(f"{where}: a ladder entry's id {entry_id!r} is not its version's ({version_id(number)})")
    sha256 = f.take("sha256", _STR)
    elo = f.take("elo", _or_null(_NUMBER))
    result = f.take("result", _ANY_OBJECT)
    promoted_at = f.take("time", _NUMBER)
    f.done()
    initial = result == {"initial": True}
    return {"version": number, "id": entry_id, "sha256": sha256, "elo": elo, "time": promoted_at,
            "result": result if initial else _summary(result, f"{where}: result", version)}


@dataclass(frozen=True)
class Ladder:
    """Every promotion of a run, oldest first: the registry's ladder as ladder.json
    keeps it (the first entry is the initial network, 000000)."""

    entries: tuple[LadderEntry, ...]

    def to_json(self) -> dict[str, Any]:
        return {"format": LADDER_FORMAT, "entries": list(self.entries)}

    @classmethod
    def from_json(cls, data: object, where: str) -> Ladder:
        if isinstance(data, list):  # format 0: the registry's list as it was
            if any(isinstance(e, dict) and isinstance(e.get("version"), str) for e in data):
                raise RecordError(f"{where} is the ladder of tengen 0.1.0's single-process run (versions as "
                                  "strings, no sha256), which this tengen does not read: start a new run (its "
                                  "best/ model still loads with --checkpoint)")
            return cls(tuple(ladder_entry_from_json(e, f"{where}, entry {i}") for i, e in enumerate(data)))
        f = _Fields.record(data, where, "a ladder", LADDER_FORMAT)
        entries = f.take("entries", _Check("a list", lambda v: isinstance(v, list)))
        f.done()
        return cls(tuple(ladder_entry_from_json(e, f"{where}, entry {i}", version=f.version)
                         for i, e in enumerate(entries)))

    @property
    def versions(self) -> list[int]:
        return [entry["version"] for entry in self.entries]


# -- the files ------------------------------------------------------------------------------------
Line = TypeVar("Line", StatusLine, GatingLine, EvaluationLine)


def parse_line(raw: bytes, record: type[Line], where: str) -> Line | None:
    """One line of status.jsonl, gating.jsonl or evaluations.jsonl as ``record``; None for a blank line or
    one that is not JSON (cut short by a crash, or being written)."""
    if not raw.strip():
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return record.from_json(data, where)


def _read_lines(path: os.PathLike, record: type[Line]) -> list[Line]:
    lines = []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            line = parse_line(raw, record, f"{path}, line {number}")
            if line is not None:
                lines.append(line)
    return lines


def _read_json(path: os.PathLike) -> tuple[object, float]:
    """A whole JSON file and when it was written (FileNotFoundError: none yet)."""
    with open(path, "rb") as f:
        raw, written = f.read(), os.fstat(f.fileno()).st_mtime
    try:
        return json.loads(raw), written
    except ValueError as e:
        raise RecordError(f"{path} is not JSON: {e}") from None


def _append(path: os.PathLike, data: dict[str, Any]) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(data) + "\n")


def write_status(files: RunDir, line: StatusLine, *, history_bytes: int | None = None) -> None:
    """status.json (rewritten whole, atomically) and a line appended to status.jsonl.

    The history's line leaves out what only the newest line is read for (each part's
    restarts and errors, ``components``; each worker's game count, ``reported_games``),
    kilobytes a line at 64 workers, every 5 s for days. Past ``history_bytes`` the file
    is thinned (``thin_history``): the whole run stays in it, the older half at half the
    resolution each time, so it stays within the bound however long the run."""
    files.write(files.status, json.dumps(line.to_json(), indent=2).encode())
    _append(files.status_history, line.for_history().to_json())
    if history_bytes is not None and files.status_history.stat().st_size > history_bytes:
        thin_history(files)


def thin_history(files: RunDir) -> None:
    """status.jsonl with every other line of its older half dropped (the first and the
    newest half kept whole), rewritten atomically: what a long run's plots need, at the
    resolution the run page shows anyway (it samples a big history, web/status_history.py)."""
    lines = files.status_history.read_bytes().splitlines(keepends=True)
    half = len(lines) // 2
    kept = [line for i, line in enumerate(lines[:half]) if i % 2 == 0] + lines[half:]
    files.write(files.status_history, b"".join(kept))


def append_gating(files: RunDir, line: GatingLine) -> None:
    _append(files.gating_history, line.to_json())


def append_evaluation(files: RunDir, line: EvaluationLine) -> None:
    _append(files.evaluations, line.to_json())


def write_ladder(files: RunDir, ladder: Ladder) -> None:
    files.write(files.ladder, json.dumps(ladder.to_json(), indent=2).encode())


def read_status(files: RunDir) -> StatusLine:
    """status.json's line (FileNotFoundError: the run has written none yet)."""
    data, written = _read_json(files.status)
    return StatusLine.from_json(data, str(files.status), written=written)


def read_status_history(files: RunDir) -> list[StatusLine]:
    """status.jsonl's lines, oldest first (FileNotFoundError: none yet)."""
    return _read_lines(files.status_history, StatusLine)


def read_gating_history(files: RunDir) -> list[GatingLine]:
    """gating.jsonl's lines, oldest first (FileNotFoundError: no match decided yet)."""
    return _read_lines(files.gating_history, GatingLine)


def read_evaluations(files: RunDir) -> list[EvaluationLine]:
    """evaluations.jsonl's lines, oldest first (FileNotFoundError: no evaluation finished yet)."""
    return _read_lines(files.evaluations, EvaluationLine)


def read_ladder(files: RunDir) -> Ladder:
    """ladder.json (FileNotFoundError: the run has not saved its first model yet)."""
    data, _ = _read_json(files.ladder)
    return Ladder.from_json(data, str(files.ladder))

