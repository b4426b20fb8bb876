"""The training loop's decisions, driven by hand with the in-process registry: what
both wirings do with what their parts report."""

import functools
import json

import pytest
from fake_clock import FakeClock

from tengen.engine.network import weights_to_bytes
from tengen.run.config import parse_config
from tengen.run.loop import TrainingLoop, progress_text
from tengen.run.model_registry import LocalModelRegistry, RegistryError
from tengen.run.records import read_evaluations, read_status
from tengen.run.run_dir import RunDir
from tengen.testing.run_files import status_line

CONFIG = parse_config({"game": {"name": "tictactoe"}, "network": {"blocks": 1, "filters": 8},
                       "redis": {"keep_candidates": 3}})


def held(registry: LocalModelRegistry) -> set[int]:
    """The versions whose weights the registry still holds."""
    versions = set()
    for version in registry.candidates():
        try:
            registry.fetch(version)
            versions.add(version)
        except RegistryError:
            pass
    return versions


@pytest.fixture
def loop(tmp_path):
    files = RunDir(tmp_path / "run")
    files.path.mkdir()
    files.create_identity()
    loop = TrainingLoop(CONFIG, files, LocalModelRegistry("loop-test"), log=lambda line: None)
    assert loop.begin(resume=False) == 0
    return loop


def test_weights_stay_bounded_while_a_slow_match_runs(loop):
    registry = loop.registry
    registry.publish(1, b"candidate 1", {})
    loop.learner_reported({"step": 10, "published": [1]})
    assert loop.next_match() == 1  # a match starts; it outlasts eight more candidates
    for version in range(2, 10):
        registry.publish(version, f"candidate {version}".encode(), {})
        loop.learner_reported({"step": 10 * version, "published": [version]})
    # The best (0), the one in the match (1), the newest three: nothing else.
    assert held(registry) == {0, 1, 7, 8, 9}
    loop.gated({"candidate": 1, "best": 0, "decision": "reject", "wins": 0, "draws": 0, "losses": 4, "elo": -400})
    assert held(registry) == {0, 7, 8, 9}
    assert loop.next_match() == 9  # only the newest is worth a match


def test_a_match_cut_off_is_played_again_on_the_newest_candidate(loop):
    registry = loop.registry
    for version in range(1, 3):
        registry.publish(version, f"candidate {version}".encode(), {})
    loop.learner_reported({"step": 20, "published": [1, 2]})
    assert loop.next_match() == 2
    loop.match_cut_off(2)  # the gatekeeper died mid-match: it decided nothing
    assert loop.next_match() == 2 and 2 in held(registry)
    loop.match_cut_off(2)  # and again; meanwhile the learner went on
    for version in range(3, 8):
        registry.publish(version, f"candidate {version}".encode(), {})
        loop.learner_reported({"step": 10 * version, "published": [version]})
    assert loop.next_match() == 7
    assert held(registry) == {0, 5, 6, 7}


def test_a_run_directory_an_older_tengen_wrote_resumes(tmp_path):
    files = RunDir(tmp_path / "run")
    files.path.mkdir()
    first = TrainingLoop(CONFIG, files, LocalModelRegistry("older"), log=lambda line: None)
    first.begin(resume=False)
    ladder = first.registry.ladder()
    # What the tengen before run/records.py left: ladder.json a bare list, status lines
    # without a format, from before the evaluation cache (no cache hits counted).
    files.ladder.write_text(json.dumps(ladder, indent=2))
    line = status_line(7).to_json()
    del line["format"], line["cache_hit_share"], line["totals"]["cache_hits"]
    files.status.write_text(json.dumps(line, indent=2))
    # The in-process registry is gone with its process: the ladder comes back from disk.
    resumed = TrainingLoop(CONFIG, files, LocalModelRegistry("older"), log=lambda line: None)
    assert resumed.begin(resume=True) == 0
    assert resumed.registry.ladder() == ladder
    assert resumed.totals == {**line["totals"], "cache_hits": 0}
    # and its next status line is of this tengen's format, counting on
    resumed.report(workers=1, inference_servers=0, stream_length=0)
    assert json.loads(files.status.read_text())["format"] == 1 and read_status(files).totals == resumed.totals


def test_the_progress_line_says_what_the_learner_waits_for_and_how_long_is_left():
    config = parse_config({"game": {"name": "tictactoe"}, "train": {"min_positions": 5000}, "stop": {"steps": 2000}})
    waiting = status_line(4, loss=None, window=1200, elapsed_s=30.0)
    text = progress_text(waiting, config, minutes=10)
    assert "learner waits for 1,200/5,000 positions (train.min_positions)" in text
    assert "loss" not in text and "step" not in text and text.endswith(" 10 min left")
    training = status_line(400, window=20000, elapsed_s=570.0, loss=2.0)
    text = progress_text(training, config, minutes=10)
    assert "step 1,200/2,000 loss 2.000" in text and "window 20,000/20,000" in text
    assert text.startswith("   570s games 4,000 (2.0/s)") and text.endswith(" 30 s left")
    assert not progress_text(training, config, minutes=None).endswith("left")


# -- strength against fixed references ---------------------------------------------------------
def strength(version: int, value: float) -> dict:
    """A strength result as the evaluator gives it (workers/strength.py)."""
    return {"version": version, "elapsed_s": 12.5, "cpu_s": 6.0,
            "scores": [{"reference": "optimal_moves", "measure": "share", "value": value, "se": 0.02, "n": 256,
                        "skipped": None}]}


def evaluating_loop(tmp_path, clock, **evaluation) -> TrainingLoop:
    files = RunDir(tmp_path / "run")
    files.path.mkdir(parents=True, exist_ok=True)
    files.create_identity()
    config = CONFIG.with_changes({f"evaluation.{key}": value for key, value in evaluation.items()})
    loop = TrainingLoop(config, files, LocalModelRegistry("strength"), log=lambda line: None, clock=clock)
    loop.begin(resume=False)
    return loop


@functools.cache
def weights() -> bytes:
    return weights_to_bytes(CONFIG.network_spec().build(), metadata={})


def promote(loop: TrainingLoop, version: int) -> None:
    loop.registry.publish(version, weights(), {})
    loop.gated({"candidate": version, "best": loop.best_version, "decision": "promote", "wins": 4, "draws": 0,
                "losses": 0, "elo": 400, "elo_low": 100, "elo_high": 700, "llr": None, "by": "threshold", "games": []})


def test_the_newest_best_is_measured_once_the_interval_has_passed_and_no_backlog_is_kept(tmp_path):
    clock = FakeClock()
    loop = evaluating_loop(tmp_path, clock, min_interval_s=300)
    assert loop.next_evaluation() == 0  # the initial network, at the start: the curve's first point
    assert loop.next_evaluation() is None  # one at a time
    promote(loop, 1)
    clock.advance(400)
    assert loop.next_evaluation() is None  # still measuring 000000
    loop.evaluated(strength(0, 0.41))
    assert loop.next_evaluation() == 1  # 400 s since 000000 was asked for: 000001 now
    loop.evaluated(strength(1, 0.55))
    for version in (2, 3, 4):  # three promotions within the interval
        clock.advance(50)
        promote(loop, version)
        assert loop.next_evaluation() is None
    clock.advance(150)  # 300 s since 000001 was asked for
    assert loop.next_evaluation() == 4  # the newest best; 2 and 3 are passed over
    loop.evaluated(strength(4, 0.7))
    clock.advance(10_000)
    assert loop.next_evaluation() is None  # the best has not changed
    assert [line.version for line in read_evaluations(loop.files)] == [0, 1, 4]


def test_an_evaluation_line_says_where_the_run_was_when_it_was_asked_for(tmp_path):
    clock = FakeClock()
    loop = evaluating_loop(tmp_path, clock, min_interval_s=0)
    loop.learner_reported({"step": 120, "published": []})
    loop.worker_reported("w000", "w000.a", {"games": 30, "positions": 300, "evaluations": 0, "cache_hits": 0,
                                            "moves": 300})
    assert loop.next_evaluation() == 0
    loop.learner_reported({"step": 180, "published": []})  # the run goes on while it is measured
    line = loop.evaluated(strength(0, 0.4))
    assert (line.version, line.learner_step, line.games, line.elapsed_s) == (0, 120, 30, 12.5)
    assert read_evaluations(loop.files) == [line]


def test_an_evaluation_cut_off_is_asked_for_again_after_the_interval(tmp_path):
    clock = FakeClock()
    loop = evaluating_loop(tmp_path, clock, min_interval_s=60)
    assert loop.next_evaluation() == 0
    loop.evaluation_cut_off("the evaluator died")
    assert loop.next_evaluation() is None  # not at once: a failing evaluator is not hammered
    clock.advance(60)
    assert loop.next_evaluation() == 0


def test_a_resumed_run_does_not_measure_its_best_again_and_a_disabled_one_never(tmp_path):
    clock = FakeClock()
    loop = evaluating_loop(tmp_path, clock)
    assert loop.next_evaluation() == 0
    loop.evaluated(strength(0, 0.4))
    resumed = TrainingLoop(loop.config, loop.files, LocalModelRegistry("strength"), log=lambda line: None,
                           clock=clock)
    resumed.begin(resume=True)
    clock.advance(10_000)
    assert resumed.next_evaluation() is None and resumed.last_evaluation == read_evaluations(loop.files)[-1]
    off = evaluating_loop(tmp_path / "off", FakeClock(), enabled=False)
    assert off.next_evaluation() is None
