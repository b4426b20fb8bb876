"""The run page's status history (web/status_history.py): a run of days writes
hundreds of megabytes of status lines; the page gets at most MAX_POINTS small points
when it opens, then only the lines appended since, and never half a line."""

from __future__ import annotations

import json
import re

import pytest

from tengen.run.records import RecordError
from tengen.testing.run_files import status_line
from tengen.web.status_history import MAX_POINTS, POINT_FIELDS, read_history


def write_lines(path, lines) -> None:
    """Status lines appended as TrainingLoop.report appends them."""
    with open(path, "a", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(line.to_json()) + "\n")


@pytest.fixture(scope="module")
def long_run(tmp_path_factory):
    """Three days of a line every 5 s would be 52k lines; 6000 lines of the same kind
    (about 28 MB) are enough to need sampling."""
    path = tmp_path_factory.mktemp("history") / "status.jsonl"
    write_lines(path, (status_line(i) for i in range(6000)))
    return path


def test_a_big_history_goes_out_as_at_most_max_points_small_points(long_run):
    size = long_run.stat().st_size
    assert size > 25e6
    history = read_history(long_run)
    answer = json.dumps(history.to_json())
    assert len(answer) < 500_000, "a first request must not send megabytes"
    times = [p["time"] for p in history.points]
    assert MAX_POINTS * 0.9 <= len(times) <= MAX_POINTS
    assert times[0] == status_line(0).time and times[-1] == status_line(5999).time
    assert times == sorted(times) and len(set(times)) == len(times)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert max(gaps) <= 3 * (times[-1] - times[0]) / len(gaps), "the sample is spread over the whole run"
    assert set(history.points[0]) <= set(POINT_FIELDS) and "reported_games" not in history.points[0]
    assert history.latest is not None and history.latest["learner_step"] == 3 * 5999
    assert "reported_games" not in history.latest
    assert history.next == size and not history.reset and not history.more


def test_later_polls_get_only_the_lines_appended_and_never_half_a_line(tmp_path):
    path = tmp_path / "status.jsonl"
    write_lines(path, (status_line(i) for i in range(10)))
    first = read_history(path)
    assert [p["learner_step"] for p in first.points] == [3 * i for i in range(10)]  # small: every line
    assert read_history(path, after=first.next).points == []
    write_lines(path, [status_line(10)])
    half = json.dumps(status_line(11).to_json()) + "\n"
    with open(path, "a", encoding="utf-8") as f:
        f.write(half[:100])  # the run is writing its next line
    later = read_history(path, after=first.next)
    assert [p["learner_step"] for p in later.points] == [30]
    assert later.latest is not None and later.latest["learner_step"] == 30
    assert later.next == path.stat().st_size - 100  # before the half line
    with open(path, "a", encoding="utf-8") as f:
        f.write(half[100:])
    last = read_history(path, after=later.next)
    assert [p["learner_step"] for p in last.points] == [33] and last.next == path.stat().st_size


def test_a_small_history_is_thinned_with_its_newest_line_kept(tmp_path):
    path = tmp_path / "status.jsonl"
    write_lines(path, (status_line(i) for i in range(101)))
    history = read_history(path, max_points=10)
    steps = [p["learner_step"] for p in history.points]
    assert len(steps) <= 10 and steps[-1] == 300 and steps == sorted(steps)


def test_the_sampled_and_the_whole_reading_agree_on_the_ends(tmp_path):
    path = tmp_path / "status.jsonl"
    write_lines(path, (status_line(i) for i in range(400)))
    whole = read_history(path, max_points=50)
    sampled = read_history(path, max_points=50, read_all_bytes=1000)
    for h in (whole, sampled):
        assert h.points[0]["time"] == status_line(0).time and h.points[-1]["time"] == status_line(399).time
        assert 40 <= len(h.points) <= 50 and h.next == path.stat().st_size
    assert whole.latest == sampled.latest


def test_a_replaced_file_or_a_missing_one_starts_afresh(tmp_path):
    path = tmp_path / "status.jsonl"
    missing = read_history(path)
    assert missing.points == [] and missing.next == 0 and missing.latest is None
    write_lines(path, (status_line(i) for i in range(3)))
    history = read_history(path, after=10**9)  # an offset of another, longer file
    assert history.reset and len(history.points) == 3


def test_a_line_cut_by_a_crash_is_skipped(tmp_path):
    path = tmp_path / "status.jsonl"
    write_lines(path, [status_line(0)])
    with open(path, "a", encoding="utf-8") as f:
        f.write('{"time": 18000' + "\n")
    write_lines(path, [status_line(2)])
    assert [p["learner_step"] for p in read_history(path).points] == [0, 6]


def test_a_line_of_a_newer_tengen_is_refused_not_skipped(tmp_path):
    path = tmp_path / "status.jsonl"
    write_lines(path, [status_line(0)])
    offset = path.stat().st_size
    with open(path, "a", encoding="utf-8") as f:  # the run was resumed by a newer tengen
        f.write(json.dumps({**status_line(1).to_json(), "format": 2}) + "\n")
    for after in (None, offset):
        with pytest.raises(RecordError, match=re.escape(f"{path}, the line at byte {offset}: a status line of "
                                                        "format 2, newer than this tengen reads")):
            read_history(path, after=after)


def test_bad_requests_are_refused(tmp_path):
    with pytest.raises(ValueError, match="after must be an offset"):
        read_history(tmp_path / "status.jsonl", after=-1)
    with pytest.raises(ValueError, match="max_points"):
        read_history(tmp_path / "status.jsonl", max_points=1)
