"""A run directory's identity and files: unique run ids, older directories kept as
they were, private files private from their first byte, files that a full disk leaves
as they were, and a new run refused on a Redis that already holds its id."""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess

import pytest
from unavailable import unavailable

from tengen.cluster.driver import ClusterRun
from tengen.cluster.registry import ModelRegistry
from tengen.run.config import load_config, parse_config
from tengen.run.run_dir import RunDir, RunDirError


def test_two_runs_with_the_same_name_get_different_ids(tmp_path):
    # `runs/c4` on two machines sharing one Redis used to be one run.
    a, b = RunDir(tmp_path / "one" / "c4"), RunDir(tmp_path / "two" / "c4")
    id_a, id_b = a.create_identity(), b.create_identity()
    assert id_a != id_b and id_a.startswith("c4-") and id_b.startswith("c4-")
    assert a.create_identity() == a.run_id() == id_a  # written once
    assert json.loads(a.identity.read_text()) == {"format": 1, "run_id": id_a}


def test_a_run_from_before_run_json_keeps_its_name_as_its_id(tmp_path):
    old = RunDir(tmp_path / "ttt e2e")
    old.path.mkdir()
    old.config.write_text("game: {name: tictactoe}\n")
    assert old.run_id() == "ttt_e2e"
    assert old.create_identity() == "ttt_e2e"  # its Redis keys are under that name


def test_an_unknown_identity_is_refused(tmp_path):
    run = RunDir(tmp_path)
    run.identity.write_text(json.dumps({"format": 99, "run_id": "x"}))
    with pytest.raises(RunDirError, match="format 1"):
        run.run_id()


def test_new_runs_need_an_empty_directory_and_resume_a_full_one(tmp_path):
    run = RunDir(tmp_path / "run")
    run.check(resume=False)
    with pytest.raises(RunDirError, match="holds no run to resume"):
        run.check(resume=True)
    run.path.mkdir()
    run.config.write_text("game: {name: tictactoe}\n")
    run.check(resume=True)
    with pytest.raises(RunDirError, match="already holds a run: pass --resume"):
        run.check(resume=False)


def test_private_files_are_never_readable_by_others(tmp_path):
    run = RunDir(tmp_path)
    old_umask = os.umask(0)  # even with a permissive umask
    try:
        run.write_private(run.connection, b'{"password": "p"}')
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(run.connection.stat().st_mode) == 0o600
    assert [p.name for p in run.redis.iterdir()] == ["connection.json"]  # no temp file left


def test_a_full_disk_leaves_the_runs_config_as_it_was_and_resume_reads_it(tmp_path):
    # config.yaml is written again at every start: an ENOSPC once left it empty, and
    # --resume could not read it. On a real, tiny filesystem (a tmpfs, as root).
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)],
                                           capture_output=True).returncode != 0:
        unavailable("mounting a tmpfs needs root")
    try:
        run = RunDir(disk / "run")
        run.create_identity()
        run.write(run.config, load_config("tictactoe").to_yaml().encode())
        with open(disk / "filler", "wb", buffering=0) as filler:
            with pytest.raises(OSError) as full:
                while True:
                    filler.write(b"x" * 4096)
        assert full.value.errno == errno.ENOSPC
        with pytest.raises(OSError) as refused:
            run.write(run.config, load_config("connect4").to_yaml().encode())
        assert refused.value.errno == errno.ENOSPC
        assert load_config(run.config).game.name == "tictactoe"
        assert sorted(p.name for p in run.path.iterdir()) == ["config.yaml", "run.json"]  # no temp file left
        (disk / "filler").unlink()
        run.write(run.config, load_config("connect4").to_yaml().encode())
        assert load_config(run.config).game.name == "connect4"
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def test_a_new_run_is_refused_on_a_redis_that_holds_its_id(tmp_path, redis_server, redis_client, monkeypatch):
    run_dir = RunDir(tmp_path / "c4")
    run_id = run_dir.create_identity()  # as if copied from another machine's run
    ModelRegistry(redis_client, run_id).publish(0, b"someone else's weights", {})
    monkeypatch.setenv("TENGEN_REDIS_PASSWORD", redis_server.password)
    run = ClusterRun(parse_config({"game": {"name": "tictactoe"}}), run_dir.path, redis_url=redis_server.url,
                     log=lambda line: None)
    with pytest.raises(RunDirError, match=f"already holds a run with id '{run_id}'"):
        run.run()
    # The run's Redis came as an argument (the CLI's --redis): the run's config names it,
    # so that --resume finds the same server; but a refused run writes no config, which
    # --resume would take for a run
    assert run.config.redis.url == redis_server.url and not run_dir.config.exists()
    assert ModelRegistry(redis_client, run_id).fetch(0)[0] == b"someone else's weights"
