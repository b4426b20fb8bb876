"""Where the run's parts have room (cluster/placement.py), checked by hand: the nodes
are tables of CPUs and GPUs, the clock is the test's. What Ray does with these
decisions is checked on real nodes (tests/test_cluster_bed.py: nodes in network
namespaces)."""

from __future__ import annotations

from tengen.cluster.placement import ActorState, NodeRoom, Room, Starting, explain, explain_text


def node(address: str, cpus: float, gpus: float = 0.0, *, free_cpus: float | None = None,
         free_gpus: float | None = None) -> NodeRoom:
    return NodeRoom(address, {"CPU": cpus, "GPU": gpus},
                    {"CPU": cpus if free_cpus is None else free_cpus, "GPU": gpus if free_gpus is None else free_gpus})


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_worker_goes_next_to_its_server_only_while_that_node_has_a_free_cpu():
    # item 12's cluster: the learner holds the GPU node's only CPU
    nodes = {"h": node("head", 2), "g": node("gpu", 1, 1, free_cpus=0, free_gpus=0.5), "c": node("cpu", 1)}
    room = Room(nodes)
    assert room.near("g") is None and room.near("g") is None  # spread instead: no wait on a busy node
    # the AWS template's GPU node: 8 vCPUs, the learner on one, 14 workers for its GPU
    room = Room({"g": node("gpu", 8, 1, free_cpus=7)})
    assert [room.near("g") for _ in range(14)] == ["g"] * 7 + [None] * 7
    assert Room(nodes).near(None) is None and Room(nodes).near("gone") is None


def test_a_part_that_waits_past_the_bound_is_late_and_tried_again_once_per_bound():
    clock, lines = Clock(), []
    starting = Starting(bound_s=120, log=lines.append, clock=clock)
    starting.started("worker w000", "h0", {"CPU": 1.0})
    starting.started("learner", "h1", {"CPU": 1.0, "GPU": 0.0}, node=None)
    starting.started("inference gpu:g:0", "h2", {"GPU": 0.5}, node="g")
    assert [w.part for w in starting.waiting()] == ["learner", "inference gpu:g:0", "worker w000"]
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
    # only what Ray found no room for is tried again
    assert [ActorState(state, placed).waits_for_room for state, placed in (
        ("PENDING_CREATION", False), ("PENDING_CREATION", True), ("ALIVE", True), ("DEAD", False),
        ("UNKNOWN", False))] == [True, False, False, False, False]
