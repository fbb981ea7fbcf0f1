"""Request mixes for `llmcalc serve`: length distributions written on the command line, and traces of
(arrival, prompt, output) rows in CSV or JSONL.

Lengths: `512` (constant), `uniform:128,1024` (integers, both ends included), `normal:512,128` (mean, standard
deviation; rounded and clipped to 1 … MAX_SIZE). A trace has one request per row with the fields arrival (seconds
from the start), prompt and output (tokens); CSV with a header row, or JSON Lines, in UTF-8 (a byte-order mark, as
Excel writes, is skipped). Every number is checked where it is read: finite, in range, token counts whole.
"""

from __future__ import annotations

import csv
import json
import math
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from llmcalc.errors import UserError, clip
from llmcalc.inputs.files import json_loads
from llmcalc.inputs.grid import parse_count, parse_number
from llmcalc.model.base import MAX_SIZE

FIELDS = ("arrival", "prompt", "output")
MAX_REQUESTS = 100_000
"""Most requests one simulation runs (`llmcalc serve -n`, `plan -n`): some hundred MB at most; their tokens and
steps are bounded too (llmcalc/views/serve.py MAX_OUTPUT_TOKENS, MAX_STEPS), so a run stays within a minute or
two; a trace is read no further than its first MAX_REQUESTS rows."""
MAX_ARRIVAL_S = 1e9
"""Latest arrival, in seconds from the start (~32 years): a clock past it no longer resolves a step's time."""
MAX_TRACE_BYTES = 1 << 28
"""Largest trace file read (256 MiB: MAX_REQUESTS rows of ~2 KB each)."""
MAX_FIELD_CHARS = 1 << 20
"""Longest CSV field or JSONL line of a trace (1 Mi characters)."""


class Lengths:
    """A distribution of token counts: `draw` one from a seeded generator; `mean` is its mean."""

    def draw(self, rng: random.Random) -> int:
        raise NotImplementedError

    @property
    def mean(self) -> float:
        raise NotImplementedError

    @property
    def bound(self) -> int:
        """A length no draw exceeds (normal: the mean plus 4 standard deviations, which fewer than 1 in 30,000
        draws exceed)."""
        raise NotImplementedError

    @property
    def constant(self) -> int | None:
        """The one length every draw gives, or None for a distribution."""
        return None


@dataclass(frozen=True)
class Constant(Lengths):
    """Always n."""

    n: int

    def draw(self, rng: random.Random) -> int:
        return self.n

    @property
    def mean(self) -> float:
        return self.n

    @property
    def bound(self) -> int:
        return self.n

    @property
    def constant(self) -> int | None:
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

    @property
    def bound(self) -> int:
        return self.hi

    def __str__(self) -> str:
        return f"uniform {self.lo}..{self.hi}"


@dataclass(frozen=True)
class Normal(Lengths):
    """round(N(mean, std)), clipped to 1 … MAX_SIZE."""

    mu: float
    sigma: float

    def draw(self, rng: random.Random) -> int:
        return min(MAX_SIZE, max(1, round(rng.gauss(self.mu, self.sigma))))

    @property
    def mean(self) -> float:
        """The mean before clipping at 1."""
        return self.mu

    @property
    def bound(self) -> int:
        return min(MAX_SIZE, math.ceil(self.mu + 4 * self.sigma))

    def __str__(self) -> str:
        return f"normal({self.mu:g}, {self.sigma:g})"


def check_requests(n: int) -> None:
    """A simulation's request count must be 1 … MAX_REQUESTS."""
    if not 0 < n <= MAX_REQUESTS:
        raise UserError(f"`requests`: {n:,} is not 1 to {MAX_REQUESTS:,}; give a positive number of requests, at "
                        f"most {MAX_REQUESTS:,}")


def parse_lengths(text: str, field: str) -> Lengths:
    """`512`, `uniform:LO,HI` or `normal:MEAN,STD` as a Lengths; a bad one is a UserError naming `field`. Every
    number must be finite and at most MAX_SIZE, in plain ASCII digits; a whole one may take the k or m suffix of
    every count (4k = 4,096)."""
    fix = "write e.g. 512, 4k, uniform:128,1024 or normal:512,128"
    kind, _, rest = text.strip().partition(":")
    try:
        if not rest:
            n = parse_count(kind)
            if not 1 <= n <= MAX_SIZE:
                raise ValueError
            return Constant(n)
        lo, hi = (_length_number(x) for x in rest.split(","))
    except ValueError:
        raise UserError(f"`{field}`: {text!r} is not a length from 1 to {MAX_SIZE:,} or a distribution; {fix}") \
            from None
    if kind == "uniform" and lo.is_integer() and hi.is_integer() and 1 <= lo <= hi <= MAX_SIZE:
        return Uniform(int(lo), int(hi))
    if kind == "normal" and 1 <= lo <= MAX_SIZE and 0 <= hi <= MAX_SIZE:
        return Normal(lo, hi)
    raise UserError(f"`{field}`: {text!r}: {kind!r} needs LO,HI with 1 ≤ LO ≤ HI (uniform) or MEAN ≥ 1, "
                    f"STD ≥ 0 (normal), each finite and at most {MAX_SIZE:,}; {fix}")


def _length_number(text: str) -> float:
    """A distribution's parameter: a count (parse_count: 512, 4k), else a number (parse_number: 0.5, 1e3)."""
    try:
        return float(parse_count(text))
    except ValueError:
        return parse_number(text)


def load_trace(path: Path, limit: int = MAX_REQUESTS) -> list[tuple[float, int, int]]:
    """The first `limit` (arrival, prompt, output) rows of a CSV (with a header) or JSONL trace, sorted by
    arrival. The file is streamed: no row past the limit is read, and no line or field past MAX_FIELD_CHARS."""
    from llmcalc.inputs.files import check_size

    check_requests(limit)
    kind = "a CSV or JSONL file of arrival,prompt,output rows"
    try:
        folder = path.is_dir()
    except OSError:  # a name too long: reading it says so
        folder = False
    if folder:  # an empty --trace '' reaches here as '.'
        raise UserError(f"`trace`: {str(path)!r} is a folder or an empty name; give {kind}")
    check_size(path, "`trace`", MAX_TRACE_BYTES, kind)
    try:
        with path.open(encoding="utf-8-sig", newline="") as f:
            jsonl = path.suffix.lower() in (".jsonl", ".json", ".ndjson")
            records = _json_records(f, path) if jsonl else _csv_records(f, path)
            rows = [_row(rec, path, i, text=not jsonl) for i, rec in islice(records, limit)]
    except FileNotFoundError:
        raise UserError(f"`trace`: {path}: no such file; give {kind}") from None
    except UnicodeDecodeError:
        raise UserError(f"`trace`: {path} is not UTF-8 text; save it as UTF-8 ({kind})") from None
    except OSError as e:
        raise UserError(f"`trace`: {path}: cannot read it ({e.__class__.__name__}); give {kind}") from None
    if not rows:
        raise UserError(f"`trace`: {path} has no requests; add rows of arrival,prompt,output")
    return sorted(rows)


def _lines(f, path: Path) -> Iterator[str]:
    """The file's lines, each at most MAX_FIELD_CHARS characters (a longer one is a UserError naming it: a CSV line
    of millions of empty fields would otherwise be held as a list of them)."""
    for i, line in enumerate(iter(lambda: f.readline(MAX_FIELD_CHARS + 1), ""), 1):
        if len(line) > MAX_FIELD_CHARS:
            raise UserError(f"`trace`: {path} line {i} is longer than {MAX_FIELD_CHARS:,} characters; write one "
                            "short row per line")
        yield line


def _csv_records(f, path: Path) -> Iterator[tuple[str, object]]:
    """(where, row as a dict) of a CSV with a header, `where` naming the row's line, or its first and last where a
    quoted field spans lines; blank lines are skipped; a malformed line is a UserError."""
    csv.field_size_limit(MAX_FIELD_CHARS)
    reader = csv.reader(_lines(f, path))
    try:
        header = next(reader, [])
    except csv.Error as e:
        raise UserError(f"`trace`: {path} line 1 is not CSV ({e}); write arrival,prompt,output rows under a "
                        "header") from None
    twice = [k for k in FIELDS if header.count(k) > 1]
    missing = [k for k in FIELDS if k not in header]
    if twice or missing:
        why = f"names {', '.join(twice)} twice" if twice else f"lacks {', '.join(missing)}"
        raise UserError(f"`trace`: {path} header (line 1) {why}; give one column each of arrival, prompt and output, "
                        "comma-separated")
    while True:
        first = reader.line_num + 1
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            raise UserError(f"`trace`: {path} {_lines_from(first, reader.line_num)} is not CSV ({e}); write "
                            "arrival,prompt,output rows under a header") from None
        if cells:  # a blank line has none
            yield _lines_from(first, reader.line_num), dict(zip(header, cells))


def _lines_from(first: int, last: int) -> str:
    """`line 7`, or `lines 7-9` for a row spanning them."""
    return f"line {last}" if first >= last else f"lines {first}-{last}"


def _json_records(f, path: Path) -> Iterator[tuple[str, object]]:
    """(where, value) of a JSON Lines file, blank lines skipped; NaN, Infinity and a bad line are UserErrors."""
    def constant(name: str):
        raise ValueError(f"{name} is not a number")

    for i, line in enumerate(_lines(f, path), 1):
        if line.strip():
            try:
                yield f"line {i}", json_loads(line, constant)
            except ValueError as e:
                why = e.msg if isinstance(e, json.JSONDecodeError) else clip(str(e), 60)
                raise UserError(f"`trace`: {path} line {i} is not JSON ({why}); write one object per line with "
                                "arrival, prompt and output") from None


def _row(rec: object, path: Path, line: str, text: bool) -> tuple[float, int, int]:
    """One trace row's (arrival, prompt, output), checked: arrival finite seconds 0 … MAX_ARRIVAL_S, prompt and
    output whole token counts 1 … MAX_SIZE (a CSV cell as text (`text`), a JSON value as a number, never a
    string; a bool or a fraction is refused, never truncated)."""
    where = f"`trace`: {path} {line}"
    if not isinstance(rec, dict):
        raise UserError(f"{where} is not an object; give arrival, prompt and output")
    missing = [k for k in FIELDS if rec.get(k) in (None, "")]
    if missing:
        raise UserError(f"{where} lacks {', '.join(missing)}; every row needs arrival (s), prompt and output (tokens)")
    try:
        arrival, prompt, output = (_seconds(rec["arrival"], text), _tokens(rec["prompt"], text),
                                    _tokens(rec["output"], text))
    except (TypeError, ValueError, OverflowError):
        got = ", ".join(clip(repr(rec[k]), 24) for k in FIELDS)
        raise UserError(f"{where}: arrival must be a number of seconds, prompt and output whole token counts"
                        f"{'' if text else ' (JSON numbers, never strings; prompt and output without a fraction)'}"
                        f" (got {got})") from None
    if not 0 <= arrival <= MAX_ARRIVAL_S:
        raise UserError(f"{where}: arrival {arrival:g} is not 0 to {MAX_ARRIVAL_S:g}; give finite seconds from the "
                        "start")
    for name, n in (("prompt", prompt), ("output", output)):
        if not 1 <= n <= MAX_SIZE:
            raise UserError(f"{where}: {name} {clip(str(n), 20)} is not 1 to {MAX_SIZE:,}; give a whole token count")
    return arrival, prompt, output


_DECIMAL = re.compile(r"\s*[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\s*$", re.ASCII)
"""A CSV cell of seconds: ASCII decimal digits, a point and an exponent only (float() would also take 1_0.5,
nan and Arabic-Indic digits)."""


def _seconds(value: object, text: bool) -> float:
    """A time read from a trace: CSV text (`text`) of a plain decimal, or a JSON number (a bool is refused);
    range checks are _row's."""
    if isinstance(value, bool) or not isinstance(value, str if text else (int, float)):
        raise TypeError(value)
    if text and not _DECIMAL.match(value):
        raise ValueError(value)
    return float(value) + 0.0  # -0 is 0


def _tokens(value: object, text: bool) -> int:
    """A token count read from a trace: CSV text (`text`) of digits (parse_count's: 512, 4k) or a JSON integer;
    a fraction, a bool, a JSON string or anything else is refused."""
    from llmcalc.inputs.grid import parse_count

    if text:
        return parse_count(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(value)
    return value
