"""The distributed run end to end: real local Ray, real embedded Redis, a tiny net.

Tic-tac-toe with gating rule ``none`` (every candidate is promoted), so that within
a minute or two samples reach Redis, the learner trains and publishes, candidates
are gated and promoted, the inference server serves the new version and new samples
carry it.
"""

import json
import threading
import time

import pytest
import ray
import yaml

from tengen.cluster.driver import ClusterRun
from tengen.cluster.redis_server import EmbeddedRedis
from tengen.cluster.registry import ModelRegistry
from tengen.cluster.stream import SampleStream
from tengen.engine.games import make_game
from tengen.run import records
from tengen.run.codec import game_decoder
from tengen.run.config import parse_config, stream_maxlen
from tengen.run.run_dir import RunDir
from tengen.run_control import read_status, request_workers

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]  # Ray starts, a run promotes, a learner is killed

TINY_TICTACTOE = {
    "game": {"name": "tictactoe"},
    "network": {"blocks": 1, "filters": 8},
    "mcts": {"simulations": 16, "leaves_per_round": 4},
    "selfplay": {"temperature_moves": 9},
    "train": {"batch_size": 32, "min_positions": 64, "candidate_every": 25, "replay_window": 5000},
    "gating": {"rule": "none"},
    "cluster": {"workers": 1, "games_per_worker": 16, "worker_chunk_seconds": 1.0, "batch_timeout_ms": 2.0},
    "stop": {"promotions": 3, "minutes": 4},
}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """Runs the driver in a thread and, once it reports, asks it (as `tengen scale`
    would) for a second worker."""
    run_dir = tmp_path_factory.mktemp("cluster") / "ttt-e2e"
    lines: list[str] = []
    result: dict = {}
    run = ClusterRun(parse_config(TINY_TICTACTOE), run_dir, log=lines.append)
    thread = threading.Thread(target=lambda: result.update(run.run()))
    thread.start()
    deadline = time.monotonic() + 240  # the first games wait for kernel compilation, slower on a loaded machine
    live: dict = {}
    while thread.is_alive() and time.monotonic() < deadline:
        if (run_dir / "config.yaml").exists():
            live = read_status(run_dir)
            if live.get("workers_alive") and "driver" in live.get("components", {}):
                break
        time.sleep(0.5)
    request_workers(run_dir, 2)
    # Kill the learner once it has published: the driver must start a new one that
    # resumes from the checkpoint and the stream, and the run must go on promoting.
    while thread.is_alive() and not (run_dir / "learner" / "learner.ckpt").exists():
        time.sleep(0.2)
    ray.kill(run.learner)
    thread.join(timeout=300)
    assert not thread.is_alive()
    return run_dir, result, lines, live


def test_a_run_promotes_and_leaves_its_directory(finished_run):
    run_dir, summary, lines, _ = finished_run
    assert summary["promotions"] >= 3, "\n".join(lines)
    assert summary["steps"] >= 50 and summary["games"] > 0
    for name in ["config.yaml", "log.txt", "status.json", "ladder.json", "best/model.safetensors", "best/config.yaml"]:
        assert (run_dir / name).exists(), name
    ladder = records.read_ladder(RunDir(run_dir)).versions
    # Version 0 is the initial net; the gatekeeper always takes the newest candidate.
    assert ladder[0] == 0 and len(ladder) >= 4 and ladder == sorted(set(ladder))
    assert any(f"promoted {ladder[-1]:06d}" in line for line in lines)
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["gating"]["rule"] == "none"


def test_samples_in_redis_carry_the_promoted_versions(finished_run):
    run_dir, summary, _, _ = finished_run
    # The embedded server kept its AOF in the run directory: start it again and look.
    connection = json.loads((run_dir / "redis" / "connection.json").read_text())
    with EmbeddedRedis(data_dir=run_dir / "redis", password=connection["password"]) as server:
        client = server.client()
        run_id = RunDir(run_dir).run_id()
        stream = SampleStream(client, run_id, maxlen=10_000)
        records = stream.replay(game_decoder(make_game("tictactoe")))
        assert stream.bad_entries == 0 and len(records) == stream.length() > 0
        versions = {r.model_version for r in records}
        registry = ModelRegistry(client, run_id)
        # Games played after a promotion say so, and every version a game names is one
        # that was promoted (the stream holds the newest games: at hundreds of games a
        # second those of version 0 may be trimmed by then).
        promoted = {entry["version"] for entry in registry.ladder()}
        assert max(versions) >= 1 and versions <= promoted, (versions, promoted)
        assert registry.best_version() == int(summary["best"])
        # Only the best, the newest redis.keep_candidates (3) and the one in a match keep
        # their weights in Redis; every promoted model is in the run directory's models/.
        versions = registry.candidates()
        with_weights = {v for v in versions if client.hexists(registry.keys.model(v), "blob")}
        assert registry.best_version() in with_weights and versions[-1] in with_weights
        assert len(with_weights - {registry.best_version()}) <= 3 + 1, (versions, with_weights)
        for entry in registry.ladder():
            assert (run_dir / "models" / f"{entry['version']:06d}.safetensors").exists()


def test_the_run_measured_its_best_models_strength(finished_run):
    """The evaluator actor measured the initial best at the start (the interval holds
    the next ones back): evaluations.jsonl names promoted versions only, each reference
    with its standard error, and the log says so."""
    run_dir, _, lines, _ = finished_run
    files = RunDir(run_dir)
    evaluations = records.read_evaluations(files)
    promoted = set(records.read_ladder(files).versions)
    assert evaluations and {line.version for line in evaluations} <= promoted, "\n".join(lines)
    first = evaluations[0]
    assert first.version == 0 and {s["reference"] for s in first.scores} == {"optimal_moves", "vs_perfect"}
    assert all(0 <= s["value"] <= 1 and s["se"] >= 0 for s in first.scores)
    assert any(line.startswith("strength of 000000: optimal_moves") for line in lines)


def test_the_learner_left_a_checkpoint(finished_run):
    run_dir = finished_run[0]
    assert (run_dir / "learner" / "learner.ckpt").stat().st_size > 0


def test_status_reads_the_live_run_and_the_finished_one(finished_run):
    run_dir, summary, lines, live = finished_run
    assert live["live"] and live["best_version"] is not None and "driver" in live["components"]
    assert live["workers_alive"] == ["w000"], live["components"].keys()
    after = read_status(run_dir)
    assert not after["live"] and after["last_report"]["best"] and after["ladder"][0]["version"] == 0
    # which redis-server the run's own Redis was: in its log and its status
    server = EmbeddedRedis(data_dir=run_dir / "redis").binary.describe()
    assert live["redis_server"] == after["redis_server"] == server
    assert f" ({server}), ray local; " in lines[0], lines[0]


def test_a_lost_learner_is_replaced_and_resumes(finished_run):
    run_dir, summary, lines, _ = finished_run
    assert any("learner lost" in line for line in lines), "\n".join(lines)
    ladder = records.read_ladder(RunDir(run_dir)).versions
    assert ladder == sorted(set(ladder))  # no version promoted twice, none reused


def test_scale_adds_a_worker_to_the_running_run(finished_run):
    lines = finished_run[2]
    assert any("scaled to 2 self-play workers" in line for line in lines), "\n".join(lines)


def test_resume_continues_the_finished_run(finished_run):
    """Last in this file: it extends the run the tests above read."""
    run_dir, summary, _, _ = finished_run
    files = RunDir(run_dir)
    ladder = records.read_ladder(files).entries
    games_in_stream = records.read_status(files).wiring["stream_length"]
    lines: list[str] = []
    config = parse_config({**TINY_TICTACTOE, "stop": {"promotions": 1, "minutes": 3}})
    resumed = ClusterRun(config, run_dir, resume=True, log=lines.append).run()
    assert any("resumed" in line for line in lines[:1]), lines[:1]
    # The learner went on from its checkpoint, the registry from the AOF: the ladder
    # grows past the old best, with no version promoted twice.
    assert resumed["promotions"] == 1 and resumed["steps"] > summary["steps"], "\n".join(lines)
    after = records.read_ladder(files).entries
    assert after[:len(ladder)] == ladder and after[-1]["version"] > ladder[-1]["version"]
    # The stream survived the stop: the learner rebuilt its window from it at once. Once
    # the stream is at its cap, Redis's MAXLEN ~ trims whole nodes, so a full stream may
    # shrink a little, never below the cap.
    kept = min(games_in_stream, stream_maxlen(config))
    assert records.read_status(files).wiring["stream_length"] >= kept
