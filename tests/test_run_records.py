"""A run directory's records (run/records.py): the status line, the gating line and the
ladder read back as the loop wrote them; the files older tengens wrote still read;
a newer format, a damaged record and tengen 0.1.0's ladder refused, naming the file;
a line cut short by a crash skipped."""

from __future__ import annotations

import dataclasses
import json
import os
import re

import pytest

from tengen.engine.gating import GatingSummary
from tengen.engine.interfaces import LadderEntry
from tengen.run.model_registry import LocalModelRegistry
from tengen.run.records import (
    EVALUATION_FORMAT,
    GATING_FORMAT,
    LADDER_FORMAT,
    STATUS_FORMAT,
    UNRECORDED,
    EvaluationLine,
    GatingLine,
    Ladder,
    RecordError,
    StatusLine,
    append_evaluation,
    append_gating,
    parse_line,
    read_evaluations,
    read_gating_history,
    read_ladder,
    read_status,
    read_status_history,
    write_ladder,
    write_status,
)
from tengen.run.run_dir import RunDir
from tengen.testing.run_files import status_line

#: a gating match's verdict as the gatekeeper gives it
PROMOTED: GatingSummary = {"candidate": 4, "best": 3, "decision": "promote", "wins": 25, "draws": 3, "losses": 12,
                           "elo": 109.4, "elo_low": 11.2, "elo_high": 215.0, "llr": 2.96, "by": "sprt"}
REJECTED: GatingSummary = {**PROMOTED, "candidate": 5, "best": 4, "decision": "reject", "wins": 10, "losses": 27,
                           "elo": -150.3, "elo_low": -260.0, "elo_high": -48.1, "llr": -2.95}


@pytest.fixture
def files(tmp_path) -> RunDir:
    files = RunDir(tmp_path / "run")
    files.path.mkdir()
    return files


# -- what the loop writes reads back ----------------------------------------------------------
def test_a_status_line_reads_back_as_the_loop_wrote_it(files):
    first = status_line(1)
    last = status_line(2, last_gating=PROMOTED, final=True,
                       wiring={"mode": "single-process", "workers": 1, "inference_servers": 0, "stream_length": 40,
                               "reuse": 3.2})
    write_status(files, first)
    write_status(files, last)
    assert read_status(files) == last
    # the history's lines leave out each worker's game count and each part's state, which
    # only the newest line is read for
    assert read_status_history(files) == [dataclasses.replace(line, reported_games={}) for line in (first, last)]
    # On disk, one flat JSON object with its format; what the wiring did not give is not there.
    written = json.loads(files.status.read_text())
    assert written["format"] == STATUS_FORMAT == 1
    assert written["mode"] == "single-process" and written["learner_step"] == 6 and "mean_batch" not in written


def test_a_gating_line_is_the_time_and_the_verdict(files):
    append_gating(files, GatingLine(time=1_800_000_100.0, summary=PROMOTED))
    append_gating(files, GatingLine(time=1_800_000_400.0, summary=REJECTED))
    lines = read_gating_history(files)
    assert [(line.time, line.summary) for line in lines] == [(1_800_000_100.0, PROMOTED), (1_800_000_400.0, REJECTED)]
    assert json.loads(files.gating_history.read_text().splitlines()[0]) == {"format": GATING_FORMAT,
                                                                            "time": 1_800_000_100.0, **PROMOTED}
    # the verdict is engine/gating.py's GatingSummary, every key of it and no other
    assert set(lines[0].summary) == GatingSummary.__required_keys__


#: a strength evaluation of Go as the evaluator gives it: GNU Go was not installed
EVALUATED = EvaluationLine(
    time=1_800_000_500.0, version=4, elapsed_s=41.5, cpu_s=20.3, learner_step=1200, games=3400,
    scores=[{"reference": "vs_mcts400", "measure": "score", "value": 0.625, "se": 0.0765, "n": 40, "skipped": None},
            {"reference": "vs_gnugo1", "measure": "score", "value": None, "se": None, "n": 0,
             "skipped": "GNU Go is not installed (no gnugo on the PATH)"}])


def test_an_evaluation_line_reads_back_with_every_reference_and_its_standard_error(files):
    later = dataclasses.replace(EVALUATED, time=1_800_000_900.0, version=6, scores=EVALUATED.scores[:1])
    append_evaluation(files, EVALUATED)
    append_evaluation(files, later)
    assert read_evaluations(files) == [EVALUATED, later]
    written = json.loads(files.evaluations.read_text().splitlines()[0])
    assert written["format"] == EVALUATION_FORMAT == 1 and written["id"] == "000004"
    assert EVALUATED.score("vs_mcts400")["se"] == 0.0765 and later.score("vs_gnugo1") is None


def test_a_damaged_evaluation_line_is_refused_naming_the_file(files):
    good = EVALUATED.to_json()
    for damaged, words in [({**good, "id": "000005"}, "not its version's"),
                           ({**good, "scores": [{**good["scores"][0], "se": "small"}]}, "'se' must be a number"),
                           ({**good, "scores": [{**good["scores"][1], "skipped": None}]}, "not both nor neither"),
                           ({k: v for k, v in good.items() if k != "format"}, "has a format"),
                           ({**good, "format": 2}, "newer than this tengen reads")]:
        files.evaluations.write_text(json.dumps(damaged) + "\n")
        with pytest.raises(RecordError, match=re.escape(str(files.evaluations))) as refused:
            read_evaluations(files)
        assert words in str(refused.value)


def test_ladder_json_is_the_registrys_ladder(files):
    registry = LocalModelRegistry("records")
    for version in (0, 4):
        registry.publish(version, f"weights {version}".encode(), {"step": 0, "game": "tictactoe"})
    registry.promote(0, elo=0.0, result={"initial": True}, at=1_800_000_000.0)
    registry.promote(4, elo=109.4, result=PROMOTED)
    write_ladder(files, Ladder(tuple(registry.ladder())))
    ladder = read_ladder(files)
    assert ladder.entries == tuple(registry.ladder()) and ladder.versions == [0, 4]
    assert ladder.entries[1]["result"] == PROMOTED and ladder.entries[1]["id"] == "000004"
    assert json.loads(files.ladder.read_text())["format"] == LADDER_FORMAT == 1
    # an entry is engine/interfaces.py's LadderEntry, every key of it and no other
    assert all(set(entry) == LadderEntry.__required_keys__ for entry in ladder.entries)


# -- what older tengens wrote -----------------------------------------------------------------
#: status.json as the first Ray runs wrote it (cluster/driver.py, 2026-11-30): no time,
#: no totals, a gating result that does not say what decided it
FIRST_STATUS = {
    "elapsed_s": 30.2, "games": 48, "games_per_s": 1.59, "positions_per_s": 40.1, "evaluations_per_s": 1203,
    "mean_batch": 24.0, "learner_step": 12, "loss": 2.871, "window": 1200, "window_capacity": 20000,
    "best": "000001", "promotions": 1,
    "last_gating": {"candidate": 1, "best": 0, "decision": "promote", "wins": 7, "draws": 1, "losses": 2,
                    "elo": 147.2, "elo_low": -60.1, "elo_high": 354.5, "llr": None},
    "workers": 2, "stream_length": 48, "bad_entries": 0,
}
#: a line of status.jsonl as the loop wrote it before the evaluation cache (run by
#: --single-process, 2026-12-02): totals without cache hits, no format
LOOP_LINE = {
    "time": 1_796_000_000.0, "elapsed_s": 65.3, "games": 410,
    "totals": {"games": 410, "positions": 3810, "evaluations": 98000, "moves": 3950},
    "games_per_s": 6.1, "moves_per_s": 58.9, "positions_per_s": 56.8, "evaluations_per_s": 1460,
    "learner_step": 220, "loss": 2.113, "losses": {"loss": 2.113, "policy_loss": 1.52, "value_loss": 0.593},
    "window": 3810, "window_capacity": 5000, "best": "000002", "promotions": 2, "last_gating": None,
    "bad_entries": 0, "duplicate_games": 0, "error": None, "final": True, "reported_games": {"sp.1f2e3d": 410},
    "mode": "single-process", "workers": 1, "inference_servers": 0, "stream_length": 410, "reuse": 3.7,
}
#: ladder.json before it had a format: the registry's list, a result without ``by``
OLD_LADDER = [
    {"version": 0, "id": "000000", "sha256": "9f" * 32, "elo": 0.0, "result": {"initial": True},
     "time": 1_795_000_000.0},
    {"version": 1, "id": "000001", "sha256": "4a" * 32, "elo": 147.2, "result": FIRST_STATUS["last_gating"],
     "time": 1_795_000_020.0},
]
#: a line of gating.jsonl before it had a format
OLD_GATING = {"time": 1_796_000_010.0, **REJECTED}


def test_the_files_an_older_tengen_wrote_still_read(files):
    files.status.write_text(json.dumps(FIRST_STATUS, indent=2))
    os.utime(files.status, (1_795_000_030.0, 1_795_000_030.0))
    first = read_status(files)
    assert first.time == 1_795_000_030.0  # the file's: it was written whole at each report
    assert first.totals == {"games": 48, "positions": 0, "evaluations": 0, "cache_hits": 0, "moves": 0}
    assert first.last_gating is not None and first.last_gating["by"] == UNRECORDED
    assert first.wiring == {"mean_batch": 24.0, "workers": 2, "stream_length": 48}
    assert not first.final and first.error is None and first.reported_games == {}

    files.status_history.write_text(json.dumps(LOOP_LINE) + "\n")
    [line] = read_status_history(files)
    assert line.totals == {**LOOP_LINE["totals"], "cache_hits": 0} and line.cache_hit_share == 0.0
    assert line.final and line.wiring["mode"] == "single-process" and line.wiring["reuse"] == 3.7

    files.ladder.write_text(json.dumps(OLD_LADDER, indent=2))
    ladder = read_ladder(files)
    assert ladder.versions == [0, 1] and ladder.entries[1]["result"] == {**FIRST_STATUS["last_gating"],
                                                                         "by": UNRECORDED}
    files.gating_history.write_text(json.dumps(OLD_GATING) + "\n")
    assert read_gating_history(files) == [GatingLine(time=1_796_000_010.0, summary=REJECTED)]

    # What was read is written in this format, and reads back the same.
    write_status(files, first)
    write_ladder(files, ladder)
    assert read_status(files) == first and read_ladder(files) == ladder
    assert json.loads(files.ladder.read_text())["format"] == LADDER_FORMAT


def test_the_ladder_of_tengen_0_1_0s_single_process_run_is_refused_by_name(files):
    files.ladder.write_text(json.dumps([{"version": "000000", "elo": 0.0, "step": 0},
                                        {"version": "000001", "step": 200, "elo": 35.0, "wins": 6, "draws": 1,
                                         "losses": 3}]))
    with pytest.raises(RecordError, match=re.escape(f"{files.ladder} is the ladder of tengen 0.1.0's "
                                                    "single-process run")):
        read_ladder(files)


# -- what is refused ------------------------------------------------------------------------------
def test_a_newer_format_is_refused_naming_the_file(files):
    files.status.write_text(json.dumps({**status_line(1).to_json(), "format": 2}))
    with pytest.raises(RecordError, match=re.escape(f"{files.status}: a status line of format 2, newer than this "
                                                    "tengen reads (format 1 at most)")):
        read_status(files)
    files.gating_history.write_text(json.dumps({**GatingLine(time=1.0, summary=PROMOTED).to_json(), "format": 2})
                                    + "\n")
    with pytest.raises(RecordError, match=re.escape(f"{files.gating_history}, line 1: a gating line of format 2")):
        read_gating_history(files)
    files.ladder.write_text(json.dumps({"format": 2, "entries": [], "champions": []}))
    with pytest.raises(RecordError, match=re.escape(f"{files.ladder}: a ladder of format 2")):
        read_ladder(files)


def test_a_record_with_a_field_missing_mistyped_or_unknown_is_refused(files):
    good = status_line(1).to_json()
    refused = [
        ({k: v for k, v in good.items() if k != "learner_step"}, "a status line of format 1 lacks 'learner_step'"),
        ({**good, "games": "12"}, "a status line's 'games' must be an integer, not '12'"),
        ({**good, "best": 3}, "a status line's 'best' must be a model version id (000042), not 3"),
        ({**good, "speed": 3.0}, "'speed' is no field of a status line of format 1"),
        ({**good, "totals": {"games": 10}}, "a status line's totals are games, positions, evaluations, cache_hits, "
                                            "moves, not games"),
        ({**good, "last_gating": {**PROMOTED, "wins": None}},
         "last_gating: a gating result's 'wins' must be an integer, not None"),
        ({**good, "workers": "16"}, "a status line's 'workers' must be an integer, not '16'"),
        ([good], "a status line is a JSON object, not a list"),
    ]
    for data, message in refused:
        files.status.write_text(json.dumps(data))
        with pytest.raises(RecordError, match=re.escape(f"{files.status}: {message}")):
            read_status(files)
    files.status.write_text('{"time": 1800000')
    with pytest.raises(RecordError, match=re.escape(f"{files.status} is not JSON")):
        read_status(files)  # status.json is written whole: a cut one is damage, not a write in progress
    entry = {"version": 4, "id": "000003", "sha256": "4a" * 32, "elo": 10.0, "result": PROMOTED, "time": 1.0}
    files.ladder.write_text(json.dumps({"format": 1, "entries": [entry]}))
    with pytest.raises(RecordError, match=re.escape(f"{files.ladder}, entry 0: a ladder entry's id '000003' is "
                                                    "not its version's (000004)")):
        read_ladder(files)


def test_a_line_cut_short_by_a_crash_is_skipped_and_the_rest_read(files):
    lines = [json.dumps(status_line(i).to_json()) for i in range(5)]
    # The run crashed in the middle of line 1; resumed, it appended line 2 right after
    # the cut, then line 3; now it is writing line 4.
    files.status_history.write_text(lines[0] + "\n" + lines[1][:80] + lines[2] + "\n" + lines[3] + "\n" + lines[4][:50])
    assert read_status_history(files) == [status_line(0), status_line(3)]
    assert parse_line(b'{"candidate": 99, "wi', GatingLine, "gating.jsonl") is None
    assert parse_line(lines[3].encode(), StatusLine, "status.jsonl") == status_line(3)
