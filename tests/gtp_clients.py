"""How GTP clients that cannot run here parse what an engine answers, restated from
reading their source (not copied):

- Sabaki (SabakiHQ/Sabaki, src/modules/enginesyncer.js and analysis.js): an
  analysis line is cut at ``ownership`` (the floats after it, used only when there
  are width * height of them, times +1 for black's analysis and -1 for white's),
  the rest split on ``info``; in each part the trailing run of vertices is the PV
  (cut at the first ``pass``), the token before it (``pv``) dropped and the tokens
  before that read as key/value pairs; moves that are not a board vertex are
  skipped; ``winrate`` is a float in [0, 1] for kata-* commands and an integer in
  0..10000 for the others.
- Lizzie (featurecat/lizzie, Leelaz.java and MoveData.java): a line starting with
  ``info`` loses those five characters and is split on `` info ``; each part is
  split on single spaces and read as key/value pairs up to ``pv``, whose tokens run
  to the end; ``visits``, ``winrate``, ``prior`` and ``lcb`` go through
  ``Integer.parseInt`` (Leela Zero's format: any other number fails the parse).
"""

from __future__ import annotations

import re

_VERTEX = r"(?:pass|[A-Za-z]\d+)"
_PV_AT_END = re.compile(rf"{_VERTEX}(?:\s+{_VERTEX})*$")


def sabaki_parse_analysis(line: str, *, size: int, kata: bool = True,
                          sign: int = 1) -> tuple[list[dict], list[float] | None]:
    """(variations, ownership) as Sabaki reads one analysis line."""
    ownership = None
    owner = re.search(r"ownership\s+(.+)", line)
    if owner:
        raw = [sign * float(x) for x in owner.group(1).split()]
        line = line[: owner.start()]
        if len(raw) == size * size:
            ownership = raw
    variations = []
    for part in re.split(r"\s*info\s+", line)[1:]:
        part = part.strip()
        pv_match = _PV_AT_END.search(part)
        if pv_match is None:
            continue
        pv = pv_match.group(0).split()
        if "pass" in pv:
            pv = pv[: pv.index("pass")]
        tokens = part[: pv_match.start()].split()[:-1]
        fields = dict(zip(tokens[0::2], tokens[1::2], strict=False))
        move = fields.get("move")
        if move is None or "winrate" not in fields or not re.fullmatch(r"[A-Za-z]\d+", move):
            continue
        winrate = float(fields["winrate"]) * 100 if kata else int(fields["winrate"]) / 100
        variations.append({"move": move, "visits": int(fields["visits"]), "winrate": winrate,
                           "order": int(fields["order"]), "pv": pv, "fields": fields})
    return variations, ownership


def lizzie_parse_info(line: str) -> list[dict]:
    """The moves Lizzie reads from one Leela Zero style ``info`` line; raises
    ValueError where Java's Integer.parseInt would throw."""
    assert line.startswith("info")
    moves = []
    for part in line[5:].split(" info "):
        if not part.strip():
            continue
        data = part.strip().split(" ")
        move: dict = {}
        i = 0
        while i < len(data):
            key = data[i]
            if key == "pv":
                move["variation"] = data[i + 1 :]
                break
            i += 1
            value = data[i]
            if key == "move":
                move["coordinate"] = value
            elif key == "visits":
                move["playouts"] = _java_int(value)
            elif key in ("winrate", "lcb"):
                move[key] = _java_int(value) / 100.0
            elif key == "prior":
                move["policy"] = _java_int(value) / 100.0
            i += 1
        moves.append(move)
    return moves


def _java_int(text: str) -> int:
    if not re.fullmatch(r"[+-]?\d+", text):
        raise ValueError(f"Integer.parseInt({text!r}) throws")
    return int(text)
