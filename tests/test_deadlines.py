"""The deadlines on the calls the driver waits for (cluster/deadlines.py): each from
its part's own cadence and the outages the part may sit out, and a call past its
deadline handed to its owner as hung, once. On a clock the test moves; the real
hangs (a process stopped with SIGSTOP in a real run) are tests/test_chaos.py's."""

from __future__ import annotations

import pytest
from fake_clock import FakeClock

from tengen.cluster.deadlines import Deadlines, Hung, learner_deadline_s, match_deadline_s, worker_deadline_s
from tengen.run.config import parse_config

SETTINGS = {"game": {"name": "tictactoe"}, "redis": {"outage_s": 900},
            "cluster": {"worker_chunk_seconds": 2, "hang_grace_s": 120, "evaluation_timeout_s": 120,
                        "match_deadline_s": 3600}}
CONFIG = parse_config(SETTINGS)


def test_each_deadline_is_its_calls_length_and_the_outages_its_part_may_sit_out():
    # a chunk, a leaf's wait for a server that stopped answering, Redis away, the grace
    assert worker_deadline_s(CONFIG) == 2 + 120 + 900 + 120
    # a learner step: Redis away; with a storage of its own, that storage away and a hung call too
    assert learner_deadline_s(CONFIG, 1.0) == 1 + 900 + 120
    with_storage = parse_config({**SETTINGS, "storage": "/tmp/checkpoints", "storage_outage_s": 600})
    assert learner_deadline_s(with_storage, 1.0) == 1 + 900 + 600 + 120 + 120
    # a match: the first one's bound, later 3x the longest so far when that is more
    assert match_deadline_s(CONFIG, 0) == 3600 + 900 + 120
    assert match_deadline_s(CONFIG, 2000) == 6000 + 900 + 120


class Owner:
    """What a part's owner does with a hung call: remembers it."""

    def __init__(self):
        self.hung: list[tuple[object, Hung]] = []

    def on_hung(self, ref, error):
        self.hung.append((ref, error))


def test_a_call_past_its_deadline_is_handed_to_its_owner_once():
    clock, owner = FakeClock(), Owner()
    deadlines = Deadlines(clock=clock, ready=lambda refs: set())
    deadlines.sent("learner", "step-7", "step", 60, owner.on_hung)
    clock.advance(59)
    deadlines.check()
    assert owner.hung == []
    clock.advance(2)
    deadlines.check()
    ((ref, error),) = owner.hung
    assert ref == "step-7" and str(error) == "no answer to step in 61 s (its deadline is 60 s)"
    deadlines.check()
    assert len(owner.hung) == 1, "said once: the owner replaces the part"


def test_a_call_that_came_back_late_but_before_the_check_is_not_hung():
    clock, owner = FakeClock(), Owner()
    deadlines = Deadlines(clock=clock, ready=lambda refs: set(refs))
    deadlines.sent("worker w000", "chunk-3", "run_for", 10, owner.on_hung)
    clock.advance(11)
    deadlines.check()
    assert owner.hung == [] and deadlines.overdue() == []


def test_a_new_call_replaces_the_last_and_a_part_gone_is_forgotten():
    clock, owner = FakeClock(), Owner()
    deadlines = Deadlines(clock=clock, ready=lambda refs: set())
    deadlines.sent("worker w000", "chunk-1", "run_for", 10, owner.on_hung)
    clock.advance(8)
    deadlines.sent("worker w000", "chunk-2", "run_for", 10, owner.on_hung)  # chunk-1 came back
    deadlines.sent("worker w001", "chunk-9", "run_for", 10, owner.on_hung)
    deadlines.forget("worker w001")  # scaled away
    clock.advance(8)
    deadlines.check()
    assert owner.hung == []
    clock.advance(3)
    deadlines.check()
    assert [ref for ref, _ in owner.hung] == ["chunk-2"]


def test_a_part_that_still_starts_is_the_placements_not_a_hang():
    clock, owner, starting = FakeClock(), Owner(), {"learner"}
    deadlines = Deadlines(exempt=lambda part: part in starting, clock=clock, ready=lambda refs: set())
    deadlines.sent("learner", "step-0", "step", 60, owner.on_hung)
    clock.advance(600)  # Ray has not placed it, or its constructor still runs
    deadlines.check()
    assert owner.hung == []
    starting.clear()  # it runs (a part's first answer is what says so: here, by hand)
    deadlines.check()
    assert [ref for ref, _ in owner.hung] == ["step-0"]


@pytest.mark.parametrize("key", ["hang_grace_s", "match_deadline_s", "evaluation_timeout_s"])
def test_a_deadline_of_zero_is_refused(key):
    with pytest.raises(ValueError, match=key):
        parse_config({"game": {"name": "tictactoe"}, "cluster": {key: 0}})
