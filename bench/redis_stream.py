"""Positions per second through the sample path, on loopback with the embedded Redis:

    encode_game -> XADD (MAXLEN ~) -> XREADGROUP -> decode_game -> ReplayWindow.add -> XACK

for Connect Four (about 36 recorded positions a game) and 19x19 Go (about 250). The
records are synthesised with numpy: random 0/1 planes, visit-count policies (a
multinomial draw of the search's simulations over Dirichlet priors, so as sparse as
real search targets), +-1 values. One process runs every stage in turn, so the figure
is the sum of all the stages' costs (in a run, workers encode in their own processes
and Redis has its own), with the server configured as a run's (AOF on).

    python bench/redis_stream.py [--seconds 4] [--batch 16] [--read-count 64]

Ends with one ``RATIO`` line per game (the form of README.md's Benchmarks); the targets
are the loopback rates that one XADD per game should reach.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np

from tengen.cluster.redis_server import EmbeddedRedis
from tengen.cluster.stream import SampleStream
from tengen.engine.games import make_game
from tengen.engine.selfplay import GameRecord
from tengen.learner.replay import ReplayWindow
from tengen.run.codec import encode_game, game_decoder

#: game -> (positions per game, simulations per move, loopback target in positions/s)
CASES = {
    "connect4": (36, 200, 100_000),
    "go19": (250, 800, 30_000),
}


def synthetic_games(game, *, positions: int, simulations: int, count: int, seed: int) -> list[GameRecord]:
    """``count`` valid records of ``positions`` positions each (see the module docstring)."""
    rng = np.random.default_rng(seed)
    records = []
    for _ in range(count):
        planes = rng.integers(0, 2, size=(positions, *game.planes_shape), dtype=np.uint8)
        priors = rng.dirichlet(np.full(game.num_actions, 0.3), size=positions)
        visits = rng.multinomial(simulations, priors)
        policy = (visits / simulations).astype(np.float32)
        outcome = float(rng.choice([-1.0, 1.0]))
        value = np.where(np.arange(positions) % 2 == 0, outcome, -outcome).astype(np.float32)
        moves = rng.integers(0, game.num_actions, size=positions + 4, dtype=np.int32)
        records.append(GameRecord(game=game.name, planes=planes, policy=policy, value=value, moves=moves,
                                  outcome=outcome, model_version=1))
    return records


def measure(server: EmbeddedRedis, name: str, *, seconds: float, batch: int, read_count: int) -> dict:
    positions, simulations, _ = CASES[name]
    game = make_game("go", size=19) if name == "go19" else make_game(name)
    records = synthetic_games(game, positions=positions, simulations=simulations, count=8, seed=0)
    decode = game_decoder(game)
    client = server.client()
    client.flushdb()
    stream = SampleStream(client, f"bench-{name}", maxlen=20_000 // positions + 64)
    stream.ensure_group("learner")
    window = ReplayWindow(capacity=20_000, planes_shape=game.planes_shape, num_actions=game.num_actions)
    times = dict.fromkeys(("encode", "xadd", "read_decode", "window_add", "ack"), 0.0)
    moved = games = blob_bytes = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        blobs = [encode_game(records[(games + i) % len(records)], worker_id="bench") for i in range(read_count)]
        t1 = time.perf_counter()
        for i in range(0, read_count, batch):
            stream.add_many(blobs[i:i + batch])
        t2 = time.perf_counter()
        entries = stream.read("learner", "bench", count=read_count, block_ms=0, decode=decode)
        t3 = time.perf_counter()
        for _, record in entries:
            window.add(record.planes, record.policy, record.value)
            moved += len(record.value)
        t4 = time.perf_counter()
        stream.ack("learner", [entry_id for entry_id, _ in entries])
        t5 = time.perf_counter()
        for key, dt in zip(times, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4), strict=True):
            times[key] += dt
        games += len(entries)
        blob_bytes += sum(map(len, blobs))
    elapsed = time.perf_counter() - start
    assert stream.bad_entries == 0, list(stream.last_errors)
    client.close()
    return {
        "positions_per_s": moved / elapsed,
        "games": games,
        "bytes_per_game": blob_bytes / max(games, 1),
        "raw_bytes_per_game": records[0].planes.nbytes + records[0].policy.nbytes + records[0].value.nbytes,
        "us_per_position": {k: 1e6 * v / max(moved, 1) for k, v in times.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=4.0, help="measuring time per game")
    parser.add_argument("--batch", type=int, default=16, help="games per XADD pipeline (a producer's batch)")
    parser.add_argument("--read-count", type=int, default=64, help="games per XREADGROUP (the learner's read)")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="tengen-bench-redis-") as data_dir, \
            EmbeddedRedis(data_dir=data_dir) as server:
        for name in CASES:
            results[name] = r = measure(server, name, seconds=args.seconds, batch=args.batch,
                                            read_count=args.read_count)
            stages = ", ".join(f"{k} {v:.2f}" for k, v in r["us_per_position"].items())
            print(f"{name}: {r['positions_per_s']:,.0f} positions/s over {r['games']} games; "
                  f"{r['bytes_per_game'] / 1024:.1f} KiB per game on the wire "
                  f"({r['raw_bytes_per_game'] / 1024:.1f} KiB as uint8/float32 arrays); "
                  f"microseconds per position: {stages}")
    for name, (_, _, target) in CASES.items():
        print(f"RATIO {name}_stream_positions_per_s {results[name]['positions_per_s']:.0f} "
              f"vs loopback target {target}")


if __name__ == "__main__":
    main()
