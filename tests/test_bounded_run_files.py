"""A run of days keeps its run directory bounded: status.jsonl thinned past its bound
with the whole run still in it, log.txt rotated, models/ thinned while ladder.json
keeps every promotion (a resumed single-process run rebuilds its ladder all the same)."""

from __future__ import annotations

import json

from tengen.engine.network import weights_to_bytes
from tengen.run.config import parse_config
from tengen.run.loop import TrainingLoop
from tengen.run.model_registry import LocalModelRegistry
from tengen.run.records import read_ladder, read_status, read_status_history, write_status
from tengen.run.run_dir import RunDir
from tengen.run.run_log import RunLog
from tengen.testing.run_files import status_line


def test_the_status_history_stays_within_its_bound_and_keeps_the_whole_run(tmp_path):
    files = RunDir(tmp_path)
    files.path.mkdir(exist_ok=True)
    bound = 20_000
    for i in range(400):  # 400 reports of a 200-worker run
        write_status(files, status_line(i), history_bytes=bound)
    assert files.status_history.stat().st_size <= bound + 2_000  # one line past it at most
    history = read_status_history(files)
    assert history[0].elapsed_s == 0.0 and history[-1].elapsed_s == 5.0 * 399  # first and newest kept
    assert len(history) < 400
    # the history's lines leave out what only the newest is read for: status.json keeps it
    assert all(line.reported_games == {} and "components" not in line.wiring for line in history)
    assert len(read_status(files).reported_games) == 200


def test_the_log_is_rotated_and_its_oldest_files_dropped(tmp_path):
    files = RunDir(tmp_path)
    log = RunLog(files, max_bytes=1_000, keep=2)
    for i in range(310):  # 51 bytes a line: log.txt is rotated every 20 lines
        log.write(f"line {i:04d} " + "x" * 40)
    log.close()
    assert {p.name for p in tmp_path.iterdir()} == {"log.txt", "log.1.txt", "log.2.txt"}
    assert files.old_log(1).stat().st_size <= 1_100 and "line 0309" in files.log.read_text()
    # the newest old file holds the lines just before log.txt's
    first = int(files.log.read_text().split()[1])
    assert f"line {first - 1:04d}" in files.old_log(1).read_text()


def test_models_are_thinned_and_the_ladder_keeps_every_promotion(tmp_path):
    config = parse_config({"game": {"name": "tictactoe"}, "network": {"blocks": 1, "filters": 4},
                           "run": {"keep_models": 3, "keep_model_every": 4}})
    files = RunDir(tmp_path / "run")
    files.path.mkdir()
    registry = LocalModelRegistry("thin")
    loop = TrainingLoop(config, files, registry, log=lambda line: None)
    loop.begin(resume=False)
    net = config.network_spec().build()
    for version in range(1, 11):  # ten promotions
        registry.publish(version, weights_to_bytes(net, metadata={"version": version}), {})
        registry.promote(version, elo=float(version), result={"initial": True})
        loop.best_version = version
        loop.save_best()
    kept = sorted(int(p.stem) for p in files.models.glob("*.safetensors"))
    assert kept == [0, 4, 8, 9, 10]  # the newest three, and every fourth before them
    assert [e["version"] for e in read_ladder(files).entries] == list(range(11))

    # A resumed single-process run rebuilds its registry from models/ and the ladder:
    # the thinned models stay on the ladder.
    again = TrainingLoop(config, files, LocalModelRegistry("thin"), log=lambda line: None)
    assert again.begin(resume=True) == 10
    again.save_best()
    entries = read_ladder(files).entries
    assert [e["version"] for e in entries] == list(range(11))
    assert json.loads(files.ladder.read_text())["entries"][5]["elo"] == 5.0
