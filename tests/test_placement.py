"""Where the run's parts have room (cluster/placement.py), checked by hand: the nodes
are tables of CPUs and GPUs, the clock is the test's. What Ray does with these
decisions is checked on real nodes: tests/test_inference_pool.py (a Ray cluster on one
machine) and tests/test_bed_gpu_runs.py (nodes in network namespaces)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tengen.cluster.fleet import STOP_PAUSE_S, Fleet
from tengen.cluster.placement import (
    ActorState,
    LearnerPlan,
    NodeRoom,
    Room,
    Starting,
    explain,
    explain_text,
    gpu_left,
    learner_gpu_share,
    plan_learner,
    server_gpu_shares,
)
from tengen.cluster.supervision import Supervisor
from tengen.run.config import parse_config


def node(address: str, cpus: float, gpus: float = 0.0, *, free_cpus: float | None = None,
         free_gpus: float | None = None) -> NodeRoom:
    return NodeRoom(address, {"CPU": cpus, "GPU": gpus},
                    {"CPU": cpus if free_cpus is None else free_cpus, "GPU": gpus if free_gpus is None else free_gpus})


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_learner_gets_half_a_lone_gpu_or_a_whole_one():
    assert [learner_gpu_share(n) for n in (0, 1, 2, 8)] == [0.0, 0.5, 1.0, 1.0]


def test_a_nodes_servers_get_what_the_learner_leaves():
    # (GPUs on the node, the learner's share there) -> the servers' shares
    assert server_gpu_shares(1, 0.0) == [1.0]
    assert server_gpu_shares(1, 0.5) == [0.5]  # a lone GPU shared half and half
    assert server_gpu_shares(1, 1.0) == []  # the learner's whole GPU: no server there
    assert server_gpu_shares(2, 1.0) == [1.0]  # one server fewer on the learner's node
    assert server_gpu_shares(2, 0.5) == [1.0, 0.5]
    assert server_gpu_shares(4, 0.0) == [1.0] * 4
    # what one server more (or one restarted) gets: at most a whole GPU
    assert gpu_left(1, 0.5, []) == 0.5
    assert gpu_left(2, 1.0, [1.0]) == 0.0
    assert gpu_left(4, 0.0, [1.0]) == 1.0


def test_a_worker_goes_next_to_its_server_only_while_that_node_has_a_free_cpu():
    # item 12's cluster: the learner holds the GPU node's only CPU
    nodes = {"h": node("head", 2), "g": node("gpu", 1, 1, free_cpus=0, free_gpus=0.5), "c": node("cpu", 1)}
    room = Room(nodes)
    assert room.near("g") is None and room.near("g") is None  # spread instead: no wait on a busy node
    # the AWS template's GPU node: 8 vCPUs, the learner on one, 14 workers for its GPU
    room = Room({"g": node("gpu", 8, 1, free_cpus=7)})
    assert [room.near("g") for _ in range(14)] == ["g"] * 7 + [None] * 7
    # Ray's view lags: what the parts it has not placed yet will take is taken first
    room = Room({"g": node("gpu", 8, 1)}, reserved=[("g", {"CPU": 1.0, "GPU": 0.5}), (None, {"CPU": 1.0})])
    assert room.free("g") == {"CPU": 7.0, "GPU": 0.5}
    assert Room(nodes).near(None) is None and Room(nodes).near("gone") is None


def test_the_learner_is_placed_from_the_gpus_alive_beside_the_servers():
    # a CPU cluster: any node with a CPU
    assert plan_learner({"h": node("head", 2)}, {}) == LearnerPlan(None, 0.0)
    # a lone GPU: half of it, pinned to its node
    assert plan_learner({"h": node("head", 2), "g": node("gpu", 1, 1)}, {}) == LearnerPlan("g", 0.5)
    # two GPU nodes, one with a whole-GPU server: the learner takes the other's GPU
    two = {"a": node("a", 4, 1), "b": node("b", 4, 1, free_gpus=0)}
    assert plan_learner(two, {"b": 1.0}) == LearnerPlan("a", 1.0)
    # of two nodes with room, the one with a free CPU first
    busy = {"a": node("a", 1, 1, free_cpus=0), "b": node("b", 1, 1)}
    assert plan_learner(busy, {}) == LearnerPlan("b", 1.0)
    # two GPUs alive but no whole one left beside the servers: half of one
    halves = {"a": node("a", 4, 1), "b": node("b", 4, 1)}
    assert plan_learner(halves, {"a": 0.5, "b": 1.0}) == LearnerPlan("a", 0.5)
    # item 2 on GPUs: the learner's node (a) is gone, b's server holds the one GPU left:
    # half of it, which the server gives up, never a learner waiting for good
    assert plan_learner({"b": node("b", 4, 1, free_gpus=0)}, {"b": 1.0}) == LearnerPlan("b", 0.5, make_room=True)
    # and the whole cluster's GPU node gone: the learner asks for a CPU only
    assert plan_learner({"h": node("head", 2), "c": node("cpu", 1)}, {"gone": 0.5}) == LearnerPlan(None, 0.0)
    assert LearnerPlan("g", 0.5).ask == {"CPU": 1.0, "GPU": 0.5} and LearnerPlan(None, 0.0).ask == {"CPU": 1.0}


def test_a_part_that_waits_past_the_bound_is_late_and_tried_again_once_per_bound():
    clock, lines = Clock(), []
    starting = Starting(bound_s=120, log=lines.append, clock=clock)
    starting.started("worker w000", "h0", {"CPU": 1.0})
    starting.started("learner", "h1", {"CPU": 1.0, "GPU": 0.0}, node=None)
    starting.started("inference gpu:g:0", "h2", {"GPU": 0.5}, node="g")
    assert [w.part for w in starting.waiting()] == ["learner", "inference gpu:g:0", "worker w000"]
    assert starting.reserved() == [("g", {"GPU": 0.5})]
    assert starting.waiting("learner")[0].asks == {"CPU": 1.0}  # nothing asked of a GPU: not listed
    clock.now += 119
    assert starting.late() == []
    clock.now += 1
    late = starting.late()
    assert [w.part for w in late] == ["learner", "inference gpu:g:0", "worker w000"]
    assert all(starting.retry_due(w) for w in late)
    # a new try of the learner: its wait goes on (the report says since when), the next
    # try is due a bound later
    late[0].said = True
    starting.started("learner", "h3", {"CPU": 1.0})
    learner = starting.get("learner")
    assert learner is not None and learner.tries == 2 and learner.first == 1000.0 and learner.said
    assert learner in starting.late() and not starting.retry_due(learner)
    clock.now += 120
    assert starting.retry_due(learner)
    # it runs: no longer waiting, and the log says so since its wait was said
    clock.now += 10
    assert starting.running("learner") is learner and not starting.waits("learner")
    assert lines == ["learner runs, 250 s after it was first started (2 tries)"]
    starting.running("worker w000")
    assert len(lines) == 1  # a wait never said is not said to end
    starting.forget("inference gpu:g:0")
    assert starting.waiting() == []


def test_the_reason_a_part_waits_names_what_it_asks_for_and_what_is_free():
    clock = Clock()
    starting = Starting(bound_s=120, clock=clock)
    nodes = {"h": node("10.0.0.2", 2, free_cpus=0), "c": node("10.0.0.4", 1, free_cpus=0)}
    starting.started("learner", None, {"CPU": 1.0})
    clock.now += 130
    learner = starting.get("learner")
    assert learner is not None
    report = explain(learner, ActorState("PENDING_CREATION", placed=False), nodes, clock.now)
    assert report == {"part": "learner", "waited_s": 130.0, "tries": 1, "state": "PENDING_CREATION",
                      "asks": {"CPU": 1.0}, "node": None,
                      "free": {"10.0.0.2": {"CPU": 0.0}, "10.0.0.4": {"CPU": 0.0}},
                      "why": "no node alive has {'CPU': 1.0} free: the run's other parts hold them"}
    assert explain_text(report) == (
        "learner has not started in 130 s: Ray says PENDING_CREATION; it asks for {'CPU': 1.0}; "
        "free: 10.0.0.2 CPU 0, 10.0.0.4 CPU 0; no node alive has {'CPU': 1.0} free: the run's other parts hold them")
    # a GPU nobody has: it waits for a node to join
    starting.started("inference gpu:g:0", None, {"GPU": 1.0}, node="g")
    server = starting.get("inference gpu:g:0")
    assert server is not None
    with_gpu = {**nodes, "g": node("10.0.0.3", 1, 1, free_gpus=0.5)}
    assert explain(server, ActorState("PENDING_CREATION", False), with_gpu, clock.now)["why"] == (
        "no node alive there has {'GPU': 1.0} free: the run's other parts hold them")
    assert explain(server, ActorState("PENDING_CREATION", False), nodes, clock.now)["why"] == (
        "the node it is pinned to is gone")
    half = {**nodes, "g": node("10.0.0.3", 1, 0.5)}
    assert "can ever hold" in explain(server, ActorState("PENDING_CREATION", False), half, clock.now)["why"]
    assert explain(server, ActorState("PENDING_CREATION", True), with_gpu, clock.now)["why"] == (
        "Ray placed it: its process is starting")
    assert explain(server, ActorState("DEAD", False), with_gpu, clock.now)["why"] == (
        "its actor died before it ran: the run replaces it")
    assert explain(server, ActorState("ALIVE", True), with_gpu, clock.now)["why"].startswith("it is up")
    # only what Ray found no room for is tried again
    assert [ActorState(state, placed).waits_for_room for state, placed in (
        ("PENDING_CREATION", False), ("PENDING_CREATION", True), ("ALIVE", True), ("DEAD", False),
        ("UNKNOWN", False))] == [True, False, False, False, False]


# -- the fleet makes room for the learner -------------------------------------------------------

CONFIG = parse_config({"game": {"name": "tictactoe"}, "network": {"blocks": 1, "filters": 8},
                       "cluster": {"workers": 3}})


@pytest.fixture
def fleet():
    """A fleet of three running workers (on head, head, cpu) and one that Ray has not
    placed yet, with handles that are not actors (stopping one is a no-op here)."""
    clock, lines = Clock(), []
    starting = Starting(bound_s=120, clock=clock)
    setup = SimpleNamespace(run_id="placement-test", config={}, redis=lambda: ("redis://x", None))
    supervisor = Supervisor(failures=5, window_s=300, log=lines.append)
    fleet = Fleet(CONFIG, setup, supervisor, SimpleNamespace(best_version=0),  # type: ignore[arg-type]
                  starting=starting, log=lines.append, clock=clock)
    fleet.target_workers = 4
    for wid, where in (("w000", "h"), ("w001", "h"), ("w002", "c"), ("w003", None)):
        fleet.workers[wid] = object()
        starting.started(f"worker {wid}", None, {"CPU": 1.0})
        if where is not None:
            starting.running(f"worker {wid}")
            fleet.worker_nodes[wid] = where
    return fleet, clock, lines


def test_while_the_learner_cannot_be_placed_workers_are_stopped_one_at_a_time_for_it(fleet):
    fleet, clock, lines = fleet
    full = {"h": node("10.0.0.2", 2, free_cpus=0), "c": node("10.0.0.4", 1, free_cpus=0)}
    fleet.starting.started("learner", None, {"CPU": 1.0})
    clock.now += 130
    learner = fleet.starting.get("learner")
    fleet.make_room(learner, full)
    # no new worker, the one Ray had not placed stopped (it would take the room first),
    # and the newest running one stopped: its CPU is where the learner fits
    assert fleet.held_for == "learner" and sorted(fleet.workers) == ["w000", "w001"]
    assert fleet.target_workers == 4  # the count the run holds again once the learner runs
    assert lines[-1].startswith("stopped self-play worker w002 on 10.0.0.4 to free a CPU for learner, "
                                "which has waited 130 s for {'CPU': 1.0}")
    fleet.hold_workers()
    assert sorted(fleet.workers) == ["w000", "w001"], "no worker starts while the learner waits"
    # one at a time: Ray gives the freed CPU away within a moment
    fleet.make_room(learner, full)
    assert sorted(fleet.workers) == ["w000", "w001"]
    clock.now += STOP_PAUSE_S
    fleet.make_room(learner, full)
    assert sorted(fleet.workers) == ["w000"] and "w001 on 10.0.0.2" in lines[-1]
    # it runs: the count is held again
    started = []
    fleet.hold_workers = lambda: started.append(True)  # type: ignore[method-assign]
    fleet.make_room(None, full)
    assert fleet.held_for is None and started == [True]
    assert lines[-1] == "learner no longer waits for room: holding 4 self-play workers again"


def test_no_worker_is_stopped_where_its_cpu_would_not_make_room(fleet):
    fleet, clock, lines = fleet
    full = {"h": node("10.0.0.2", 2, free_cpus=0), "c": node("10.0.0.4", 1, free_cpus=0),
            "g": node("10.0.0.3", 1, 1, free_cpus=0, free_gpus=0)}
    # a server pinned to the GPU node waits for GPU: no worker's CPU helps it
    fleet.starting.started("inference gpu:g:0", None, {"GPU": 1.0}, node="g")
    fleet.make_room(fleet.starting.get("inference gpu:g:0"), full)
    assert sorted(fleet.workers) == ["w000", "w001", "w002"]
    assert lines[-1] == ("no running self-play worker's CPU makes room for inference gpu:g:0, which asks for "
                         "{'GPU': 1.0}: none is stopped")
    # a learner pinned to the cpu node: only the worker there is stopped
    fleet.starting.started("learner", None, {"CPU": 1.0}, node="c")
    fleet.make_room(fleet.starting.get("learner"), full)
    assert sorted(fleet.workers) == ["w000", "w001"] and "w002 on 10.0.0.4" in lines[-1]
