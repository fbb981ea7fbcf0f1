"""Megatron's pipeline layout string (`pipeline_model_parallel_layout`): the model chunks of a pipeline, first to
last, each a run of symbols — E the embedding, t a decoder layer, m an MTP layer, L the loss with the head — and
| ending a chunk. `x*N` repeats a symbol or a parenthesised group N times, so "Et|(tt|)*30mL" is 32 chunks: the
embedding and one layer, 30 chunks of two layers, then the MTP layer and the loss. Chunk i runs on pipeline stage
i mod pp, the (i div pp)-th of its vpp chunks (Megatron's interleaved order).

The text is bounded (MAX_TEXT characters, MAX_DEPTH nested groups) and so is its expansion (MAX_SYMBOLS), each
checked before anything is expanded."""

from typing import NamedTuple

from llmcalc.errors import UserError

MAX_TEXT = 1000
"""Longest layout string read."""
MAX_SYMBOLS = 2**16
"""Most symbols a layout may expand to: 64k, hundreds of times any model's layers and chunks."""
MAX_DEPTH = 8
"""Most nested parentheses."""
SYMBOLS = "EtmL|"
DIGITS = "0123456789"
"""A repeat count's digits: ASCII only (str.isdigit also takes ², which int() refuses, and other scripts' digits)."""


class Chunks(NamedTuple):
    """A layout's model chunks, first to last."""

    layers: tuple[int, ...]
    """Decoder layers (t) in each chunk."""
    mtp: int
    """MTP layers (m) in all."""


def parse_layout(text: str) -> Chunks:
    """The chunks of a layout string; a UserError names `pp_layout` and the fix for anything else: an unknown
    symbol, unbalanced parentheses, a bad repeat, too long an expansion, the embedding anywhere but the first
    chunk's start or the loss anywhere but the last chunk's end."""
    if not isinstance(text, str) or not text.strip():
        raise _bad("give the chunks, e.g. Et|(tt|)*30mL")
    if len(text) > MAX_TEXT:
        raise _bad(f"{len(text):,} characters, more than {MAX_TEXT:,}; use (…)*N for repeated chunks")
    tree, end = _group(text.replace(" ", ""), 0, 0)
    if end != len(text.replace(" ", "")):
        raise _bad(f"unmatched ')' at character {end + 1}")
    _size(tree)
    flat = "".join(_expand(tree))
    chunks = flat.split("|")
    if flat.count("E") != 1 or not chunks[0].startswith("E"):
        raise _bad("the embedding E must open the first chunk, once")
    if flat.count("L") != 1 or not chunks[-1].endswith("L"):
        raise _bad("the loss L must close the last chunk, once")
    return Chunks(tuple(c.count("t") for c in chunks), flat.count("m"))


Node = tuple[object, int]
"""A symbol (str) or a group (list of nodes), with its repeat count."""


def _group(text: str, i: int, depth: int) -> tuple[list[Node], int]:
    """The nodes from position i up to a ')' or the end, and the position where they stop."""
    if depth > MAX_DEPTH:
        raise _bad(f"more than {MAX_DEPTH} nested groups")
    nodes: list[Node] = []
    while i < len(text) and text[i] != ")":
        c = text[i]
        if c == "(":
            inner, i = _group(text, i + 1, depth + 1)
            if i >= len(text):
                raise _bad("a '(' is never closed")
            atom, i = inner, i + 1
        elif c in SYMBOLS:
            atom, i = c, i + 1
        else:
            raise _bad(f"{c!r} at character {i + 1} is not a symbol; use E, t, m, L, |, (…) and *N")
        count = 1
        if i < len(text) and text[i] == "*":
            j = i + 1
            while j < len(text) and text[j] in DIGITS:
                j += 1
            if j == i + 1 or j - i > 7:
                raise _bad(f"'*' at character {i + 1} needs a repeat count of 1 to 999,999")
            count, i = int(text[i + 1:j]), j
            if count < 1:
                raise _bad(f"a repeat of {count} at character {i}; give at least 1")
        nodes.append((atom, count))
    return nodes, i


def _size(nodes: list[Node]) -> int:
    """Symbols the nodes expand to, refused past MAX_SYMBOLS before anything is expanded."""
    total = 0
    for atom, count in nodes:
        total += count * (1 if isinstance(atom, str) else _size(atom))
        if total > MAX_SYMBOLS:
            raise _bad(f"it expands to more than {MAX_SYMBOLS:,} symbols; no pipeline has that many chunks")
    return total


def _expand(nodes: list[Node]) -> list[str]:
    out: list[str] = []
    for atom, count in nodes:
        out += ([atom] if isinstance(atom, str) else _expand(atom)) * count
    return out


def _bad(why: str) -> UserError:
    return UserError(f"`pp_layout`: {why} (Megatron's pipeline layout: E embedding, t layer, m MTP layer, L loss, "
                     "| between chunks)")
