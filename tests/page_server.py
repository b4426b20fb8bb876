"""A real ``tengen`` page server for the tests (``tengen play``, ``tengen serve``):
the command started as a person starts it, its URL read from its first line, and a
JSON client over urllib."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: seconds for the server to start (``play`` loads TensorFlow and the model) and print its URL
START_TIMEOUT = 240


class PageServer:
    """``tengen ARGS`` as a child process; ``url`` is what it printed first, with a
    host this machine reaches (0.0.0.0 and :: are every address, 127.0.0.1 among
    them). ``close()`` stops it with SIGTERM and gives its exit status. ``launcher``:
    Python's arguments before the command's (a script that wraps ``tengen.cli.main``)."""

    def __init__(self, *args: str, env: dict[str, str] | None = None, launcher: Sequence[str] = ("-m", "tengen.cli")):
        self._stderr = tempfile.TemporaryFile(mode="w+")
        self.process = subprocess.Popen(
            [sys.executable, *launcher, *args],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=self._stderr, text=True, env=env or os.environ.copy())
        self.printed_url = self.read_line()
        if not self.printed_url:
            self.process.kill()
            raise AssertionError(f"tengen {args[0]} printed no URL within {START_TIMEOUT} s:\n{self.stderr()}")
        self.url = self.printed_url.replace("://0.0.0.0:", "://127.0.0.1:")

    def read_line(self, timeout: float = START_TIMEOUT) -> str:
        """The next line of its stdout ("" when none came within ``timeout``)."""
        assert self.process.stdout is not None
        got: list[str] = []
        reader = threading.Thread(target=lambda: got.append(self.process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        return got[0].strip() if got else ""

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read()

    def close(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=60)
        self._stderr.close()
        return code

    # -- the JSON API ----------------------------------------------------------------------
    def call(self, method: str, path: str, body: dict[str, Any] | None = None, *, timeout: float = 120,
             headers: dict[str, str] | None = None) -> tuple[int, Any]:
        """(status, decoded JSON) of one request; errors are answers too. A request that
        changes state is declared JSON, as the pages send it (an empty body is ``{}``)."""
        changes = method not in ("GET", "HEAD")
        data = json.dumps({} if body is None else body).encode() if changes else None
        request = urllib.request.Request(self.url.rstrip("/") + path, data=data, method=method,
                                         headers={**({"Content-Type": "application/json"} if changes else {}),
                                                  **(headers or {})})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def get(self, path: str, **kwargs: Any) -> tuple[int, Any]:
        return self.call("GET", path, **kwargs)

    def get_text(self, path: str) -> tuple[int, str, dict[str, str]]:
        with urllib.request.urlopen(self.url.rstrip("/") + path, timeout=60) as response:
            return response.status, response.read().decode(), dict(response.headers)
