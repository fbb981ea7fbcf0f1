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

FIELDS = ("arrival", "prompt", "output")


class Lengths:
    """A distribution of token counts: `draw` one from a seeded generator; `mean` is its mean."""

    def draw(self, rng: random.Random) -> int:
        raise NotImplementedError

    @property
    def mean(self) -> float:
        raise NotImplementedError


@dataclass(frozen=True)
class Constant(Lengths):
    """Always n."""

    n: int

    def draw(self, rng: random.Random) -> int:
        return self.n

    @property
    def mean(self) -> float:
        return self.n

    def __str__(self) -> str:
        return str(self.n)


@dataclass(frozen=True)
class Uniform(Lengths):
    """Integers lo..hi, both included, equally likely."""

    lo: int
    hi: int

    def draw(self, rng: random.Random) -> int:
        return rng.randint(self.lo, self.hi)

    @property
    def mean(self) -> float:
        return (self.lo + self.hi) / 2

    def __str__(self) -> str:
        return f"uniform {self.lo}..{self.hi}"


@dataclass(frozen=True)
class Normal(Lengths):
    """round(N(mean, std)), at least 1."""

    mu: float
    sigma: float

    def draw(self, rng: random.Random) -> int:
        return max(1, round(rng.gauss(self.mu, self.sigma)))

    @property
    def mean(self) -> float:
        """The mean before clipping at 1."""
        return self.mu

    def __str__(self) -> str:
        return f"normal({self.mu:g}, {self.sigma:g})"


def parse_lengths(text: str, field: str) -> Lengths:
    """`512`, `uniform:LO,HI` or `normal:MEAN,STD` as a Lengths; a bad one is a UserError naming `field`."""
    fix = "write e.g. 512, uniform:128,1024 or normal:512,128"
    kind, _, rest = text.strip().partition(":")
    try:
        if not rest:
            n = int(kind)
            if n < 1:
                raise ValueError
            return Constant(n)
        lo, hi = (float(x) for x in rest.split(","))
    except ValueError:
        raise UserError(f"`{field}`: {text!r} is not a length or distribution; {fix}") from None
    if kind == "uniform" and lo.is_integer() and hi.is_integer() and 1 <= lo <= hi:
        return Uniform(int(lo), int(hi))
    if kind == "normal" and lo >= 1 and hi >= 0:
        return Normal(lo, hi)
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
