"""The training loop's decisions, driven by hand with the in-process registry: what
both wirings do with what their parts report."""

import json

import pytest

from tengen.run.config import parse_config
from tengen.run.loop import TrainingLoop, progress_text
from tengen.run.model_registry import LocalModelRegistry, RegistryError
from tengen.run.records import read_status
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
