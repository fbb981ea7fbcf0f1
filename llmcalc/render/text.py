"""Numbers, bytes and times as table text, the escaping of what users and presets write, and whether a stream can
write that text."""

from __future__ import annotations

from functools import cache


def writes_unicode(stream) -> bool:
    """Whether `stream`'s encoding can write the ×, Σ and ≈ of the text here (a stream without one, such as a
    StringIO, can)."""
    try:
        "\u03a3\u00d7\u2248".encode(getattr(stream, "encoding", None) or "utf-8")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


@cache
def _escape():
    from rich.markup import escape

    return escape


CONTROLS = {c: f"\\x{c:02x}" for c in [*range(0x20), *range(0x7f, 0xa0)] if chr(c) not in "\n\t"}
"""Control characters (C0, DEL, C1; a line break and a tab kept) → their escapes as text: a name a file gives
with ESC in it is shown as \\x1b, never sent to the terminal as a colour, a title or a cursor move."""


def esc(text: object) -> str:
    """`text` safe inside rich markup and on a terminal: a name such as 'llama2-7b [mha]' is shown, not read as a
    tag, and its control characters as escapes (CONTROLS)."""
    plain = str(text).translate(CONTROLS)
    if "[" not in plain and not plain.endswith("\\"):  # nothing rich's escape would change (a long table's cells)
        return plain
    return _escape()(plain)


class Verbatim(str):
    """A line (rich markup, its text escaped) printed as it is, never wrapped or cropped: a shell command to paste,
    whose long words a wrap would break. The terminal folds it for the eye; a copy or a pipe gets it whole."""


def weights_words(label: str) -> str:
    """A weight-formats label (`fp8; embedding, head, norms bf16`) inside a sentence: 'fp8 weights (embedding,
    head, norms bf16)', the components kept in other formats in parentheses, not read as part of the sentence."""
    default, _, rest = label.partition("; ")
    return f"{default} weights ({rest})" if rest else f"{default} weights"


def short(n: int | float, unit: str = "") -> str:
    """6738415616 → '6.74 B' (SI prefixes for counts: K, M, B, T, P, E); from 10^21 on, '1.2e+89'."""
    if abs(n) >= 10**21:
        return f"{n:.3g} {unit}".rstrip()
    for div, suffix in ((10**18, "E"), (10**15, "P"), (10**12, "T"), (10**9, "B"), (10**6, "M"), (10**3, "K")):
        if abs(n) >= div:
            return f"{n / div:,.2f} {suffix}{unit}"
    return f"{n:,} {unit}".rstrip()


def number(x: float, digits: int = 3) -> str:
    """A measured or expected quantity: '1,234' from 100 up, else `digits` significant digits; a positive
    value too small to show in them is '≈0' (never 5.22e-147)."""
    if x >= 100:
        return f"{x:,.0f}"
    if 0 < abs(x) < 10 ** -(digits + 3):
        return "≈0"
    return f"{x:.{digits}g}"


def nbytes_text(n: int, units: str) -> str:
    """1099511627776 → '1,099,511,627,776 bytes (1.10 TB, 1.00 TiB)': decimal and binary, labelled, or only
    one of them as `units` says (both, si, iec)."""
    for si, iec, exp in (("TB", "TiB", 4), ("GB", "GiB", 3), ("MB", "MiB", 2), ("KB", "KiB", 1)):
        if n >= 1000**exp:
            both = [f"{n / 1000**exp:,.2f} {si}", f"{n / 1024**exp:,.2f} {iec}"]
            return f"{n:,} bytes ({', '.join(both) if units == 'both' else both[units == 'iec']})"
    return f"{n:,} bytes"


def size(n: int, units: str) -> str:
    """Compact size for a table cell: '34.36 GB' (decimal) or, under --units iec, '32.00 GiB'."""
    parts = nbytes_text(n, "both").partition("(")[2].rstrip(")").split(", ")
    return parts[units == "iec"] if parts[0] else f"{n} bytes"


def sizes(n: int, units: str) -> list[str]:
    """Table cells for a byte count: [GB, GiB], or one of them under --units si|iec."""
    return [size(n, "si"), size(n, "iec")] if units == "both" else [size(n, units)]


def size_heads(units: str, label: str = "") -> list[str]:
    """Column heads matching sizes(): '<label> (GB)', '<label> (GiB)' (or one)."""
    names = {"both": ["GB", "GiB"], "si": ["GB"], "iec": ["GiB"]}[units]
    return [f"{label} ({u})" if label else u for u in names]


def seconds(t: float) -> str:
    """0.0051 → '5.10 ms'; 1676.8 → '27.95 min'; 162895.5 → '45.25 h'; from two days on, days (from a
    million days on, '4.74e+294 days')."""
    if t >= 86400e6:
        return f"{t / 86400:.3g} days"
    for above, div, unit in ((172800, 86400, "days"), (7200, 3600, "h"), (120, 60, "min"), (1, 1, "s"),
                             (1e-3, 1e-3, "ms"), (1e-6, 1e-6, "µs")):
        if t >= above:
            return f"{t / div:,.2f} {unit}"
    return f"{t * 1e9:.2f} ns"
