"""What a test does when a tool it fetches for itself (Debian's packages, npm's) cannot
be had: on a user's machine without network it is skipped, with the reason; on CI (the
``CI`` variable set, as ``.ci/run`` and GitHub Actions do) it fails, so that a broken
download never turns every real-client and GNU Go check into a quiet skip."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def unavailable(reason: str) -> NoReturn:
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail(f"{reason} (CI is set: the tests' own set-up must provide it)", pytrace=False)
    pytest.skip(reason)
