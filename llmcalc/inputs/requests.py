"""Request mixes for `llmcalc serve`: length distributions written on the command line, and traces of
(arrival, prompt, output) rows in CSV or JSONL.

Lengths: `512` (constant), `uniform:128,1024` (integers, both ends included), `normal:512,128` (mean, standard
deviation; rounded and clipped to at least 1). A trace has one request per row with the fields arrival (seconds
from the start), prompt and output (tokens); CSV with a header row, or JSON Lines.
"""

from __future__ import annotations

import csv
import json
import random
from dataclasses import dataclass
from pathlib import Path

from llmcalc.errors import UserError

KINDS = ("constant", "uniform", "normal")
FIELDS = ("arrival", "prompt", "output")


@dataclass(frozen=True)
class Lengths:
    """A distribution of token counts: constant a; uniform over a..b; normal with mean a and deviation b."""

    kind: str
    a: float
    b: float = 0.0

    def draw(self, rng: random.Random) -> int:
        """One length (at least 1)."""
        if self.kind == "constant":
            return int(self.a)
        if self.kind == "uniform":
            return rng.randint(int(self.a), int(self.b))
        return max(1, round(rng.gauss(self.a, self.b)))

    @property
    def mean(self) -> float:
        """The mean length (normal: before clipping)."""
        return (self.a + self.b) / 2 if self.kind == "uniform" else self.a

    @property
    def most(self) -> int:
        """The longest length drawn in practice (normal: mean + 4 deviations)."""
        return int(self.a) if self.kind == "constant" else int(self.b) if self.kind == "uniform" else \
            max(1, round(self.a + 4 * self.b))

    def __str__(self) -> str:
        return {"constant": f"{int(self.a)}", "uniform": f"uniform {int(self.a)}..{int(self.b)}",
                "normal": f"normal({self.a:g}, {self.b:g})"}[self.kind]


def parse_lengths(text: str, field: str) -> Lengths:
    """`512`, `uniform:LO,HI` or `normal:MEAN,STD` as a Lengths; a bad one is a UserError naming `field`."""
    fix = "write e.g. 512, uniform:128,1024 or normal:512,128"
    kind, _, rest = text.strip().partition(":")
    try:
        if not rest:
            n = int(kind)
            if n < 1:
                raise ValueError
            return Lengths("constant", n)
        lo, hi = (float(x) for x in rest.split(","))
    except ValueError:
        raise UserError(f"`{field}`: {text!r} is not a length or distribution; {fix}") from None
    if kind == "uniform" and lo.is_integer() and hi.is_integer() and 1 <= lo <= hi:
        return Lengths("uniform", lo, hi)
    if kind == "normal" and lo >= 1 and hi >= 0:
        return Lengths("normal", lo, hi)
    raise UserError(f"`{field}`: {text!r}: {kind!r} needs LO,HI with 1 ≤ LO ≤ HI (uniform) or MEAN ≥ 1, STD ≥ 0 "
                    f"(normal); {fix}")


def load_trace(path: Path) -> list[tuple[float, int, int]]:
    """(arrival, prompt, output) rows of a CSV (with a header) or JSONL trace, sorted by arrival."""
    if not path.is_file():
        raise UserError(f"`trace`: {path} is not a file; give a CSV or JSONL of arrival,prompt,output rows")
    rows = []
    with path.open(newline="") as f:
        if path.suffix.lower() in (".jsonl", ".json", ".ndjson"):
            records = []
            for i, line in enumerate(f, 1):
                if line.strip():
                    try:
                        records.append((i, json.loads(line)))
                    except json.JSONDecodeError as e:
                        raise UserError(f"`trace`: {path} line {i} is not JSON ({e.msg}); write one object per "
                                        "line with arrival, prompt and output") from None
        else:
            records = list(enumerate(csv.DictReader(f), 2))
        for i, rec in records:
            rows.append(_row(rec, path, i))
    if not rows:
        raise UserError(f"`trace`: {path} has no requests; add rows of arrival,prompt,output")
    return sorted(rows)


def _row(rec: object, path: Path, line: int) -> tuple[float, int, int]:
    """One trace row's (arrival, prompt, output), checked."""
    where = f"`trace`: {path} line {line}"
    if not isinstance(rec, dict):
        raise UserError(f"{where} is not an object; give arrival, prompt and output")
    missing = [k for k in FIELDS if rec.get(k) in (None, "")]
    if missing:
        raise UserError(f"{where} lacks {', '.join(missing)}; every row needs arrival (s), prompt and output (tokens)")
    try:
        arrival, prompt, output = float(rec["arrival"]), int(rec["prompt"]), int(rec["output"])
    except (TypeError, ValueError):
        raise UserError(f"{where}: arrival must be a number of seconds, prompt and output whole token counts") \
            from None
    if arrival < 0 or prompt < 1 or output < 1:
        raise UserError(f"{where}: arrival must be ≥ 0 and prompt, output ≥ 1 (got {arrival:g}, {prompt}, {output})")
    return arrival, prompt, output
