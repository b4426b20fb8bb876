"""Riding out an outage of the checkpoint storage and of the run directory's disk
(run/outage.py, run/loop.py): the same budget, backoff and logging as Redis's, a
deadline on every storage call, and a stop that names what was away; on a clock the
tests move (tests/fake_clock.py)."""

from __future__ import annotations

import errno
import threading

import pytest
from fake_clock import FakeClock

from tengen.learner.storage import LocalStorage
from tengen.run.config import parse_config
from tengen.run.loop import TrainingLoop
from tengen.run.model_registry import LocalModelRegistry
from tengen.run.outage import ResilientStorage, StorageUnavailable
from tengen.run.run_dir import RunDir

FULL = OSError(errno.ENOSPC, "No space left on device")


class Flaky:
    """A storage that fails ``failures`` times with ``error``, then works like a dict."""

    url = "flaky://test"

    def __init__(self, failures: int, error: BaseException = FULL):
        self.failures = failures
        self.error = error
        self.objects: dict[str, bytes] = {}

    def _maybe_fail(self) -> None:
        if self.failures:
            self.failures -= 1
            raise self.error

    def read_bytes(self, name):
        self._maybe_fail()
        return self.objects.get(name)

    def write_bytes(self, name, data):
        self._maybe_fail()
        self.objects[name] = data

    def exists(self, name):
        return name in self.objects


def resilient(storage, clock: FakeClock, lines: list[str], **options) -> ResilientStorage:
    return ResilientStorage(lambda: storage, url=storage.url, outage_s=60, log=lines.append, clock=clock,
                            sleep=clock.sleep, **options)


def test_a_storage_outage_is_waited_out_with_a_line_at_each_end():
    clock, lines, storage = FakeClock(), [], Flaky(failures=5)
    resilient(storage, clock, lines).write_bytes("learner.ckpt", b"step 10")
    assert storage.objects == {"learner.ckpt": b"step 10"}
    assert len(clock.sleeps) == 5 and 0 < sum(clock.sleeps) < 60
    assert lines[0].startswith("storage flaky://test: OSError: [Errno 28] No space left on device; retrying")
    assert lines[1].startswith("storage flaky://test: answering again after ")


def test_a_storage_away_past_its_budget_stops_with_its_name_and_how_long():
    clock, lines = FakeClock(), []
    with pytest.raises(StorageUnavailable, match=r"storage flaky://test failed for 60 s \(storage_outage_s is 60\)"):
        resilient(Flaky(failures=10**9), clock, lines).read_bytes("learner.ckpt")
    assert sum(clock.sleeps) == pytest.approx(60)  # the whole budget, and no longer


def test_a_misconfigured_storage_is_not_waited_for():
    clock, lines = FakeClock(), []
    with pytest.raises(PermissionError):
        resilient(Flaky(failures=1, error=PermissionError("no")), clock, lines).write_bytes("x", b"")
    assert clock.sleeps == [] and lines == []


def test_a_local_storage_where_no_folder_can_be_is_not_waited_for(tmp_path):
    """A path under a file (or under /proc) is a mistake in the config, not an outage:
    the learner fails at once and the run's crash loop stops it with the reason."""
    clock, lines = FakeClock(), []
    (tmp_path / "a-file").write_text("")
    storage = ResilientStorage(lambda: LocalStorage(tmp_path / "a-file" / "checkpoints"), url="a-file/checkpoints",
                               outage_s=60, log=lines.append, clock=clock, sleep=clock.sleep)
    with pytest.raises(NotADirectoryError):
        storage.write_bytes("learner.ckpt", b"step 10")
    assert clock.sleeps == [] and lines == []


def test_a_hung_storage_call_is_abandoned_and_the_storage_opened_afresh():
    clock, lines, release = FakeClock(), [], threading.Event()
    opened: list[Flaky] = []

    class Hanging(Flaky):
        def write_bytes(self, name, data):
            if len(opened) == 1:  # the first connection hangs, as an sftp one may
                release.wait(30)
            super().write_bytes(name, data)

    def open_storage() -> Flaky:
        opened.append(Hanging(failures=0))
        return opened[-1]

    storage = ResilientStorage(open_storage, url="hang://test", outage_s=60, call_timeout_s=0.2, log=lines.append,
                               clock=clock, sleep=clock.sleep)
    storage.write_bytes("learner.ckpt", b"step 10")
    release.set()
    assert len(opened) == 2 and opened[1].objects == {"learner.ckpt": b"step 10"}
    assert "TimeoutError: no answer within 0.2 s" in lines[0]


def test_one_try_says_whether_it_wrote_until_the_budget_is_spent():
    clock, lines = FakeClock(), []
    storage = resilient(Flaky(failures=10**9), clock, lines)
    assert storage.try_write("learner.ckpt", b"x") is False and clock.sleeps == []
    clock.advance(61)
    with pytest.raises(StorageUnavailable):
        storage.try_write("learner.ckpt", b"x")


def test_a_full_run_directory_is_an_outage_the_run_goes_through(tmp_path):
    files = RunDir(tmp_path / "run")
    config = parse_config({"game": {"name": "tictactoe"}, "storage_outage_s": 120})
    lines: list[str] = []
    clock = FakeClock()
    loop = TrainingLoop(config, files, LocalModelRegistry("disk"), log=lines.append, clock=clock)

    def full() -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    assert loop.on_disk(full) is False  # the run goes on
    assert any("run directory" in line and "No space left" in line for line in lines)
    clock.advance(100)
    assert loop.on_disk(full) is False and loop.disk.seconds() == pytest.approx(100)
    assert loop.on_disk(lambda: LocalStorage(files.path).write_bytes("status.json", b"{}")) is True
    assert loop.disk.seconds() == 0 and "answering again after 100.0 s" in lines[-1]
    # away past the budget: the run stops, naming the directory
    loop.on_disk(full)
    clock.advance(121)
    with pytest.raises(StorageUnavailable, match="could not be written for 121 s"):
        loop.on_disk(full)
    assert loop.on_disk(full, stop=False) is False  # what a stopping run writes last is tried once
