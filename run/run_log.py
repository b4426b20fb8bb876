"""The run's log (``log.txt``), bounded: a run of days writes a line every few seconds.

``RunLog.write(line)`` appends a line. Past ``max_bytes`` the file is rotated, as
logrotate would: ``log.txt`` becomes ``log.1.txt``, ``log.1.txt`` ``log.2.txt``, and so
on up to ``keep`` old files, the oldest dropped (run/run_dir.py names them). A write
the disk refuses (full) is dropped, not raised: the line went to the terminal too, and
the training loop reports the disk as away (run/loop.py ``on_disk``).
"""

from __future__ import annotations

import contextlib
import os
from typing import TextIO

from tengen.run.run_dir import RunDir

__all__ = ["RunLog"]


class RunLog:
    def __init__(self, files: RunDir, *, max_bytes: int, keep: int):
        self.files = files
        self.max_bytes = max_bytes
        self.keep = keep
        self._file: TextIO | None = None
        self._open()

    def _open(self) -> None:
        try:
            self._file = open(self.files.log, "a", encoding="utf-8")  # noqa: SIM115
        except OSError:
            self._file = None  # tried again at the next line

    def write(self, line: str) -> None:
        if self._file is None:
            self._open()
            if self._file is None:
                return
        try:
            self._file.write(line + "\n")
            self._file.flush()
            if self._file.tell() > self.max_bytes:
                self._rotate()
        except OSError:
            pass  # a full disk: the line still went to the terminal

    def _rotate(self) -> None:
        assert self._file is not None
        self._file.close()
        self.files.old_log(self.keep).unlink(missing_ok=True)
        for n in range(self.keep - 1, 0, -1):
            with contextlib.suppress(FileNotFoundError):
                os.replace(self.files.old_log(n), self.files.old_log(n + 1))
        os.replace(self.files.log, self.files.old_log(1))
        self._open()

    def close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None
