"""A tool the tests cannot fetch is a skip on a user's machine and a failure on CI."""

from __future__ import annotations

import pytest
from unavailable import unavailable


@pytest.mark.parametrize("ci", ["", "0", "false"])
def test_without_ci_a_missing_tool_skips_the_test(monkeypatch, ci):
    monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.skip.Exception, match="no gnugo"):
        unavailable("no gnugo")


@pytest.mark.parametrize("ci", ["1", "true"])
def test_on_ci_a_missing_tool_fails_the_test(monkeypatch, ci):
    monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.fail.Exception, match="no gnugo"):
        unavailable("no gnugo")
