"""What the GTP dispatcher and its handlers agree on: a command's shape (``Command``:
its arguments in, the text of an '=' reply or a ``Stream`` out), how a command fails
(``GtpError``: its message follows the '?'), the readers of arguments that every
handler uses, and the name the engine gives.

A module of its own so that the dispatcher and the handlers import it, and not each
other.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["ENGINE_NAME", "PROTOCOL_VERSION", "COLORS", "Command", "GtpError", "Stream", "color", "engine_version",
           "expect", "is_number", "one_number"]

ENGINE_NAME = "tengen"
PROTOCOL_VERSION = 2
#: the colours GTP spells, as players (0: black, 1: white)
COLORS = {"b": 0, "black": 0, "w": 1, "white": 1}


class GtpError(Exception):
    """A command failed; the message is the text after '?'."""


#: ``produce(write, stop, live)``: writes a streaming reply's lines; ``stop`` (None in
#: ``handle``) is set when the next input line arrives; ``live``: the loop streams
#: (False: ``handle``, which wants only the final lines)
Produce = Callable[[Callable[[str], None], threading.Event | None, bool], None]


@dataclass(frozen=True)
class Stream:
    """A reply that streams: its '=' line at once, then the lines of ``produce``, then
    the blank line. ``background``: runs until the next input line (analysis);
    otherwise the command runs to its end (genmove_analyze)."""

    produce: Produce
    background: bool


#: a command: its arguments (the words after its name) in; out the text of its '='
#: reply, or a Stream; raises GtpError for a '?' reply
Command = Callable[[list[str]], str | Stream]


def engine_version() -> str:
    from tengen import __version__  # the one place it is read from the installed package

    return __version__


def expect(args: list[str], count: int) -> None:
    """A syntax error unless there are ``count`` arguments."""
    if len(args) != count:
        raise GtpError("syntax error")


def color(word: str) -> int:
    """The player a colour names; a syntax error for anything else."""
    player = COLORS.get(word.lower())
    if player is None:
        raise GtpError("syntax error")
    return player


_Number = TypeVar("_Number", int, float)


def one_number(args: list[str], kind: type[_Number]) -> _Number:
    """The one argument as a ``kind`` (int or float); a syntax error for another
    count of arguments or a word that is not one."""
    expect(args, 1)
    try:
        return kind(args[0])
    except ValueError:
        raise GtpError("syntax error") from None


def is_number(word: str) -> bool:
    try:
        return math.isfinite(float(word))
    except ValueError:
        return False
