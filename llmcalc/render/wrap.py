"""Wrapping lines of text so that no line breaks inside what must stay on one line: a number and its unit
("1.31 GiB"), an option's `[default: 1]` in a help page. Rich breaks lines at every kind of space, the no-break
space included, so the spaces kept are swapped for a stand-in character while rich wraps the text, and back in
each line it makes. Imported only where a table or a help page is printed (it imports rich)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from rich.text import Lines, Text

STAND_IN = "\ue000"
"""A private-use character, one cell wide, that stands for a kept space while rich wraps the text."""
UNIT_SPACE = re.compile(r"(?<=\d) (?=(?:[KMGTPE]i?B|[KMGTPE]?B/s|[KMGTPE]?FLOP(?:/s|s)?|[KMBTPE]|bytes|ms|µs|ns|s|"
                        r"min|h|days)(?![\w/]))")
"""The space between a number and its unit: 1.31 GiB, 6.74 B, 2.00 TB/s, 5.10 ms, 9,397,903,360 bytes."""


class Kept(Text):
    """A rich Text wrapped as rich wraps text, except that no line breaks at the spaces `keep` lists (offsets
    into its plain text); its narrowest width is its longest run of words so joined. Inside a table cell it
    wraps itself; `console.print` joins the Texts it is given into a plain one, so print its `wrap` instead."""

    def __init__(self, *args, keep: Iterable[int] = (), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.keep = tuple(keep)

    @classmethod
    def of(cls, text: Text, keep: Iterable[int]) -> Kept:
        """`text` (its style, spans, justification) with the spaces at `keep` kept."""
        kept = cls(text.plain, style=text.style, justify=text.justify, overflow=text.overflow, no_wrap=text.no_wrap,
                   end=text.end, tab_size=text.tab_size, keep=keep)
        kept.spans = list(text.spans)
        return kept

    def _joined(self) -> Text:
        chars = list(self.plain)
        for i in self.keep:
            if chars[i] == " ":
                chars[i] = STAND_IN
        joined = self.copy()
        joined.plain = "".join(chars)
        return joined

    def wrap(self, console, width: int, **kwargs) -> Lines:
        lines = self._joined().wrap(console, width, **kwargs)
        for line in lines:
            line.plain = line.plain.replace(STAND_IN, " ")
        return lines

    def __rich_measure__(self, console, options):
        return self._joined().__rich_measure__(console, options)


def units_kept(text: Text) -> Kept:
    """`text` wrapped without separating any number from its unit (UNIT_SPACE)."""
    return Kept.of(text, (m.start() for m in UNIT_SPACE.finditer(text.plain)))


def joined(parts: list[Text]) -> Kept:
    """`parts` as one paragraph, a space between each two, that breaks between them or inside the first, never
    inside a later one (an option's help, then its `[default: …]`)."""
    keep, at = [], len(parts[0].plain) + 1 if parts else 0
    for part in parts[1:]:
        keep += [at + i for i, c in enumerate(part.plain) if c == " "]
        at += len(part.plain) + 1
    return Kept.of(Text(" ").join(parts), keep)
