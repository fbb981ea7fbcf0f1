"""Counts as users write them (every count option: 4096, 32k, 1M) and the grids of `llmcalc sweep`:
"1,8,64", "1k..128k" (doubling), "1k..8k:1k" (linear step).

A value is a positive integer with an optional suffix k (×1024) or m (×1024²). A range a..b runs
a, 2a, 4a, … up to b; a..b:step runs a, a + step, … up to b. Items are comma-separated; the
result is sorted, without repeats.
"""

from __future__ import annotations

from llmcalc.errors import UserError
from llmcalc.model.base import AMOUNT_MAX, MAX_SIZE

MAX_POINTS = 10_000
"""Most (batch, seq) points one sweep evaluates."""
SUFFIX = {"k": 1024, "m": 1024**2}


def parse_number(text: str) -> float:
    """A number as float() reads it (0.5, 1e-3, inf, nan), in ASCII and without the underscores Python allows
    between digits: as every count here, `١` or `1_000` is no number; anything else is a ValueError."""
    t = text.strip()
    if not t.isascii() or "_" in t:
        raise ValueError(f"{text!r} is not a number in plain digits")
    return float(t)


def parse_count(text: str) -> int:
    """'32k' → 32768, '1M' → 1048576: a positive whole number with an optional k or m suffix (either case);
    anything else is a ValueError saying what to write."""
    t = text.strip().lower()
    scale = SUFFIX.get(t[-1:], 1)
    digits = t[:-1] if scale > 1 else t
    if not (digits.isascii() and digits.isdigit()):
        raise ValueError(f"{text!r} is not a whole number; give e.g. 4096, 4k or 1m (k = 1024)")
    if len(digits) > 15:
        raise ValueError(f"{text[:20]!r}… is too large; give a smaller number, at most {MAX_SIZE:,}")
    value = int(digits) * scale
    if value > MAX_SIZE:
        raise ValueError(f"{text!r} is more than {MAX_SIZE:,}, beyond any real workload; give a smaller number")
    return value


def parse_value(text: str, field: str) -> int:
    """A grid value: parse_count's, and > 0; anything else is a UserError naming `field`."""
    try:
        value = parse_count(text)
    except ValueError as e:
        raise UserError(f"`{field}`: {e}") from None
    if value <= 0:
        raise UserError(f"`{field}`: {text!r} must be > 0; give a positive whole number such as 1 or 1k")
    return value


def parse_grid(text: str, field: str) -> list[int]:
    """The sorted values of a grid spec such as '1,8,64', '1k..128k' or '1k..8k:1k' for `field` (batch, seq)."""
    values: set[int] = set()
    for item in text.split(","):
        if ".." not in item:
            values.add(parse_value(item, field))
            continue
        start_text, _, rest = item.partition("..")
        end_text, colon, step_text = rest.partition(":")
        start, end = parse_value(start_text, field), parse_value(end_text, field)
        if end < start:
            raise UserError(f"`{field}`: range {item!r} ends below its start; write it low..high, e.g. 1k..128k")
        if colon:
            step = parse_value(step_text, field)
            count = (end - start) // step + 1
        else:
            step, count = 0, (end // start).bit_length()  # start·2^i ≤ end for i < count
        if len(values) + count > MAX_POINTS:
            raise UserError(f"`{field}`: {item!r} has {count:,} values, more than {MAX_POINTS:,}; use a larger step")
        values.update(start + i * step if step else start << i for i in range(count))
    return sorted(values)


MAX_ROWS = 4 * MAX_POINTS
"""Most rows one sweep reports: models × attention variants × points (a table of more takes minutes)."""


def check_rows(series: int, points: int) -> None:
    """At most MAX_ROWS rows: `series` models or variants over `points` (batch, seq) points each."""
    if series * points > MAX_ROWS:
        raise UserError(f"`preset`/`attention`: {series} series × {points:,} points is {series * points:,} rows, "
                        f"more than {MAX_ROWS:,}; sweep fewer models or variants, or a coarser grid")


def check_size(batches: list[int], seqs: list[int]) -> None:
    """At most MAX_POINTS (batch, seq) points."""
    if len(batches) * len(seqs) > MAX_POINTS:
        raise UserError(f"`seq`/`batch`: {len(batches):,} batches × {len(seqs):,} lengths is more than "
                        f"{MAX_POINTS:,} points; give fewer values or a larger step")


AMOUNT_SUFFIX = {"k": 10**3, "m": 10**6, "b": 10**9, "t": 10**12}
"""Decimal multipliers of a model size, token count or FLOP budget as papers print them (70B, 1.4T)."""


def parse_amount(text: str) -> float:
    """'70B' → 7e10, '1.4T' → 1.4e12, '5.76e23' → 5.76e23: a positive number, with an optional decimal suffix
    K, M, B or T (10^3 … 10^12, either case) or an exponent; anything else is a ValueError saying what to write."""
    t = text.strip()
    scale = AMOUNT_SUFFIX.get(t[-1:].lower(), 1)
    try:
        value = parse_number(t[:-1] if scale > 1 else t) * scale
    except ValueError:
        raise ValueError(f"{text!r} is not a number; give e.g. 1e21, 70B or 1.4T (decimal K, M, B, T)") from None
    if not (value > 0 and value < AMOUNT_MAX):
        raise ValueError(f"{text!r} is not a positive amount below {AMOUNT_MAX:g}; give e.g. 1e21, 70B or 1.4T")
    return value
