"""`tengen analysis`, KataGo's JSON analysis protocol, driven as KaTrain drives it: a
real process, queries written a line at a time, results read as they come (out of
order), with a tiny untrained 9x9 model that has an ownership head and with rollouts.
KataGo's docs/Analysis_Engine.md is the reference for every field checked."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from play_server import write_checkpoint

from tengen.engine.games.go import GoGame

ROOT = Path(__file__).resolve().parent.parent
#: what a KataGo result's fields are (docs/Analysis_Engine.md)
MOVE_INFO = {"move": str, "visits": int, "winrate": float, "prior": float, "lcb": float, "utility": float,
             "utilityLcb": float, "order": int, "pv": list, "scoreLead": float, "scoreMean": float}
ROOT_INFO = {"visits": int, "winrate": float, "utility": float, "scoreLead": float}


class Engine:
    """``tengen analysis ARGS`` as a client runs it: a reader thread queues every line."""

    def __init__(self, *args: str):
        self.process = subprocess.Popen([sys.executable, "-m", "tengen.cli", "analysis", *args], cwd=ROOT,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(json.loads(line))

    def send(self, query: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(query) + "\n")
        self.process.stdin.flush()

    def until_final(self, query_id: str, turns: int = 1, timeout: float = 300) -> list[dict[str, Any]]:
        """Every line for ``query_id`` until ``turns`` final results came (others are kept)."""
        got, finals, kept = [], 0, []
        while finals < turns:
            line = self.lines.get(timeout=timeout)
            if line.get("id") != query_id:
                kept.append(line)
                continue
            got.append(line)
            finals += "turnNumber" in line and not line.get("isDuringSearch", False)
            if "error" in line:
                break
        for line in kept:
            self.lines.put(line)
        return got

    def close(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.process.wait(timeout=300)


def typed(obj: dict[str, Any], types: dict[str, type]) -> bool:
    return all(isinstance(obj[k], t) and not isinstance(obj[k], bool) for k, t in types.items())


@pytest.fixture(scope="module")
def model_engine(tmp_path_factory):
    checkpoint = write_checkpoint(tmp_path_factory.mktemp("go9") / "best", {"name": "go", "size": 9, "komi": 7.5},
                                  simulations=16, network={"ownership": True})
    engine = Engine("--checkpoint", str(checkpoint), "--visits", "32", "--threads", "2")
    yield engine
    assert engine.close() == 0


def query(query_id: str, moves: list[list[str]], **more: Any) -> dict[str, Any]:
    return {"id": query_id, "moves": moves, "rules": "chinese", "komi": 7.5, "boardXSize": 9, "boardYSize": 9,
            **more}


def test_a_game_analysed_turn_by_turn_as_katrain_asks(model_engine):
    moves = [["B", "E5"], ["W", "C3"], ["B", "G7"]]
    model_engine.send(query("game", moves, analyzeTurns=[0, 1, 2, 3], maxVisits=24, includeOwnership=True,
                            includeMovesOwnership=True, includePolicy=True, includePVVisits=True,
                            overrideSettings={"reportAnalysisWinratesAs": "BLACK"}))
    results = model_engine.until_final("game", turns=4)
    assert sorted(r["turnNumber"] for r in results) == [0, 1, 2, 3]
    for result in results:
        assert result["isDuringSearch"] is False and typed(result["rootInfo"], ROOT_INFO)
        assert result["rootInfo"]["visits"] >= 24
        infos = result["moveInfos"]
        assert [m["order"] for m in infos] == list(range(len(infos))) and all(typed(m, MOVE_INFO) for m in infos)
        assert sum(m["visits"] for m in infos) >= 23 and infos[0]["pv"][0] == infos[0]["move"]
        assert all(len(m["pvVisits"]) == len(m["pv"]) and len(m["ownership"]) == 81 for m in infos)
        assert len(result["ownership"]) == 81 and all(-1 <= v <= 1 for v in result["ownership"])
        policy = result["policy"]
        assert len(policy) == 82 and sum(p for p in policy if p > 0) == pytest.approx(1, abs=1e-4)
        # a point taken is an illegal move: -1 in the policy
        game = GoGame(size=9)
        for _, vertex in moves[: result["turnNumber"]]:
            assert policy[game.text_to_action(vertex)] == -1
        # without a score head the score is the ownership's area count less komi, from
        # Black's side, with no spread
        lead = sum(result["ownership"]) - 7.5
        assert result["rootInfo"]["scoreLead"] == pytest.approx(lead, abs=1e-3)
        assert "scoreStdev" not in result["rootInfo"]


def test_a_model_with_the_score_head_reports_its_mean_and_spread(tmp_path):
    # the run's play searches by the score utility; analysis's shared evaluator answers no
    # score, so its searchers search without it, and still report the head's score
    checkpoint = write_checkpoint(tmp_path / "best", {"name": "go", "size": 9, "komi": 7.5}, simulations=16,
                                  network={"ownership": True, "score": True}, mcts={"score_utility": 0.1})
    engine = Engine("--checkpoint", str(checkpoint), "--visits", "16")
    try:
        moves = [["B", "E5"]]
        engine.send(query("black", moves, analyzeTurns=[1], includeOwnership=True,
                          overrideSettings={"reportAnalysisWinratesAs": "BLACK"}))
        engine.send(query("white", moves, analyzeTurns=[1], includeOwnership=True,
                          overrideSettings={"reportAnalysisWinratesAs": "WHITE"}))
        [black], [white] = engine.until_final("black"), engine.until_final("white")
    finally:
        assert engine.close() == 0
    for result in (black, white):
        assert typed(result["rootInfo"], {**ROOT_INFO, "scoreStdev": float})
        assert all(typed(m, {**MOVE_INFO, "scoreStdev": float}) for m in result["moveInfos"])
        # the head's spread is at least half a point
        assert all(m["scoreStdev"] >= 0.5 for m in [result["rootInfo"], *result["moveInfos"]])
    # the same estimate of the same position, from either side
    assert white["rootInfo"]["scoreLead"] == pytest.approx(-black["rootInfo"]["scoreLead"], abs=1e-6)
    assert white["rootInfo"]["scoreStdev"] == black["rootInfo"]["scoreStdev"]
    # the head's, not the ownership's count (an untrained head and count agree on no such number)
    assert black["rootInfo"]["scoreLead"] != pytest.approx(sum(black["ownership"]) - 7.5, abs=1e-3)


def test_avoid_and_allow_moves_keep_the_search_where_katrain_asks(model_engine):
    # KaTrain's "play in this region": Black may only play E5 or D4 at the root;
    # White may not answer at C3 or G7 for two plies
    avoided = {"C3", "G7"}
    model_engine.send(query("region", [], maxVisits=40, includePVVisits=True,
                            allowMoves=[{"player": "B", "moves": ["E5", "D4"], "untilDepth": 1}],
                            avoidMoves=[{"player": "W", "moves": sorted(avoided), "untilDepth": 2}]))
    (result,) = model_engine.until_final("region")  # one line: no warning
    assert {m["move"] for m in result["moveInfos"]} <= {"E5", "D4"} and result["rootInfo"]["visits"] >= 40
    replies = {m["pv"][1] for m in result["moveInfos"] if len(m["pv"]) > 1}
    assert replies and not replies & avoided
    # with the raw policy (one visit) the listed moves obey the same rules
    model_engine.send(query("raw", [], maxVisits=1, allowMoves=[{"player": "B", "moves": ["A1"], "untilDepth": 1}]))
    (raw,) = model_engine.until_final("raw")
    assert [m["move"] for m in raw["moveInfos"]] == ["A1"]


def test_errors_warnings_and_actions_as_katago_writes_them(model_engine):
    model_engine.send(query("bad-move", [["B", "E5"], ["W", "E5"]]))
    (error,) = model_engine.until_final("bad-move")
    assert error["field"] == "moves" and error["error"].startswith("Illegal move 2: W E5")
    model_engine.send({**query("big", []), "boardXSize": 19, "boardYSize": 19})
    (error,) = model_engine.until_final("big")
    assert error == {"error": "the model plays 9x9, not 19x19", "field": "boardXSize", "id": "big"}
    model_engine.send({**query("jp", [["B", "C3"]]), "rules": "japanese", "maxVisits": 8,
                       "overrideSettings": {"cpuctExploration": 2}})
    lines = model_engine.until_final("jp")
    warned = {line["field"] for line in lines if "warning" in line}
    assert warned == {"rules", "overrideSettings"} and lines[-1]["turnNumber"] == 1
    for action in ("query_version", "clear_cache", "query_models"):
        model_engine.send({"id": f"a-{action}", "action": action})
        reply = model_engine.lines.get(timeout=60)
        assert reply["id"] == f"a-{action}" and reply["action"] == action
    model_engine.send({"id": "x", "action": "dance"})
    assert model_engine.lines.get(timeout=60) == {"error": "unknown action 'dance'", "field": "action", "id": "x"}


def test_a_position_set_up_with_initial_stones_and_player_as_katrain_sends_a_loaded_sgf(model_engine):
    # KaTrain sends an SGF's setup stones (AB/AW) as initialStones, its PL as initialPlayer
    model_engine.send({**query("setup", [], initialStones=[["B", "D4"], ["W", "E5"], ["B", "F6"]],
                               initialPlayer="W", includeOwnership=True,
                               overrideSettings={"wideRootNoise": 0.04, "reportAnalysisWinratesAs": "BLACK"}),
                       "maxVisits": 16})
    lines = model_engine.until_final("setup")
    assert not [line for line in lines if "warning" in line]  # every setting applied
    final = lines[-1]
    assert final["turnNumber"] == 0 and final["rootInfo"]["currentPlayer"] == "W"
    assert not {"D4", "E5", "F6"} & {m["move"] for m in final["moveInfos"]}  # the stones are on the board
    model_engine.send({**query("pass-setup", [], initialStones=[["B", "pass"]])})
    (error,) = model_engine.until_final("pass-setup")
    assert error["field"] == "initialStones"


def test_a_query_terminated_reports_once_and_a_queued_one_says_no_results(tmp_path):
    engine = Engine("--game", "go9", "--visits", "50", "--threads", "1")  # rollouts: no model
    try:
        engine.send(query("long", [], maxVisits=1_000_000, reportDuringSearchEvery=0.2))  # searched 50,000
        engine.send(query("queued", [["B", "E5"]], analyzeTurns=[0, 1]))
        warned = engine.lines.get(timeout=120)
        assert warned["field"] == "maxVisits" and "searching 50000" in warned["warning"]
        first = engine.lines.get(timeout=120)  # a report during the long search
        assert first["id"] == "long" and first["isDuringSearch"] is True
        engine.send({"id": "t1", "action": "terminate", "terminateId": "queued"})
        engine.send({"id": "t2", "action": "terminate_all"})
        lines = []
        while not any(line.get("id") == "long" and line.get("isDuringSearch") is False for line in lines):
            lines.append(engine.lines.get(timeout=120))
        lines += [engine.lines.get(timeout=120) for _ in range(4 - sum("action" in line or "noResults" in line
                                                                        for line in lines))]
        finals = [line for line in lines if line.get("isDuringSearch") is False]
        assert {line["id"] for line in lines if line.get("action")} == {"t1", "t2"}
        no_results = sorted((f["id"], f["turnNumber"]) for f in finals if f.get("noResults"))
        assert no_results == [("queued", 0), ("queued", 1)]
        (long_final,) = [f for f in finals if f["id"] == "long"]
        assert long_final["rootInfo"]["visits"] < 50_000 and long_final["moveInfos"]
    finally:
        assert engine.close() == 0


def test_closing_stdin_finishes_the_queued_work_then_exits():
    done = subprocess.run([sys.executable, "-m", "tengen.cli", "analysis", "--visits", "20", "--threads", "1"],
                          input="\n".join(json.dumps(query(f"q{i}", [["B", "E5"]] * (i % 2))) for i in range(4)),
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert sorted(r["id"] for r in results) == ["q0", "q1", "q2", "q3"]
    assert all(r["isDuringSearch"] is False and r["moveInfos"] for r in results)


QUERY_FIELDS = st.fixed_dictionaries({}, optional={
    "id": st.one_of(st.text(max_size=5), st.integers()),
    "moves": st.lists(st.tuples(st.sampled_from(["B", "W", "X"]), st.sampled_from(["E5", "A1", "Z9", "pass", ""]))
                      .map(list), max_size=3),
    "rules": st.one_of(st.sampled_from(["chinese", "japanese", "tromp-taylor"]), st.integers(), st.none()),
    "komi": st.one_of(st.floats(allow_nan=False), st.integers(-200, 200)),
    "boardXSize": st.sampled_from([9, 19, 0, "9"]), "boardYSize": st.sampled_from([9, 19]),
    "analyzeTurns": st.lists(st.integers(-1, 4), max_size=3),
    "maxVisits": st.one_of(st.integers(-5, 30), st.floats()),
    "includeOwnership": st.one_of(st.booleans(), st.integers()),
    "overrideSettings": st.dictionaries(st.sampled_from(["maxTime", "reportAnalysisWinratesAs", "x"]),
                                        st.one_of(st.integers(-1, 2), st.sampled_from(["BLACK", "WHITE", "Q"]))),
})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(QUERY_FIELDS)
def test_any_query_gets_results_of_the_documented_types_or_an_error(engine_for_fuzz, fields):
    engine = engine_for_fuzz
    query_id = f"f{next(COUNTER)}"
    engine.send({**fields, "id": query_id} if isinstance(fields.get("id"), str) or "id" not in fields
                else fields)
    if not isinstance(fields.get("id", ""), str):
        line = engine.lines.get(timeout=120)
        assert line == {"error": "id is required and must be a string", "field": "id"}
        return
    for line in engine.until_final(query_id, turns=len(set(fields.get("analyzeTurns") or [0]))):
        assert set(line) <= {"id", "error", "field", "warning", "isDuringSearch", "turnNumber", "moveInfos",
                             "rootInfo", "ownership", "policy", "noResults"}
        if "moveInfos" in line:
            assert typed(line["rootInfo"], {"visits": int, "winrate": float})
            assert all(typed(m, {"move": str, "visits": int, "winrate": float, "order": int, "pv": list})
                       for m in line["moveInfos"])


COUNTER = iter(range(10**9))


@pytest.fixture(scope="module")
def engine_for_fuzz():
    engine = Engine("--visits", "4", "--threads", "2")
    yield engine
    assert engine.close() == 0


def test_waiting_queries_run_highest_priority_first():
    from tengen.engine.mcts import SearchSettings, uniform_evaluator
    from tengen.play.analysis_engine import AnalysisEngine
    from tengen.play.search_player import SearchPlayer

    inside, go_on = threading.Event(), threading.Event()
    uniform = uniform_evaluator(82)

    def held_first(planes):  # the first query's search waits in the network until the others are queued
        inside.set()
        assert go_on.wait(60)
        return uniform(planes)

    lines: list[str] = []
    engine = AnalysisEngine(make_player=lambda: SearchPlayer(held_first, search=SearchSettings(simulations=4)),
                            sizes=[9], ownership_for=lambda game: None, default_visits=4, write=lines.append,
                            version="test", model_name="uniform")
    engine.handle_line(json.dumps(query("first", [])))
    assert inside.wait(60)
    for name, priority in (("low", -5), ("none", None), ("high", 5)):
        engine.handle_line(json.dumps({**query(name, []), **({} if priority is None else {"priority": priority})}))
    go_on.set()
    engine.close()
    finished = [json.loads(line)["id"] for line in lines if not json.loads(line).get("isDuringSearch", True)]
    assert finished == ["first", "high", "none", "low"]
