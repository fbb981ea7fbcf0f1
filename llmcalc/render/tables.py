"""Rich tables whose every cell is shown whole: building one (`table`, `styled`), measuring the width it
needs, and the narrower forms of a table too wide for the terminal (its value cells broken between their parts,
a lighter box, then stacked). Cells are never cut: numbers never wrap and never leave their unit, text columns
wrap between words only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from llmcalc.render.text import esc

if TYPE_CHECKING:
    from rich.table import Table


def table(title: str, columns: Sequence[str], rows: Sequence[Sequence], text: Sequence[int] = (),
          wrap: Sequence[int] = (), names: Sequence[int] = ()) -> Table:
    """A table titled `title`. Columns listed in `text` are left-aligned text that wraps between words when
    narrow; those in `names` left-aligned and whole (a name such as gptq-int4-g128 is not broken); those in `wrap`
    right-aligned values that, in a table too wide, break into a line per part (see parts: `2.00 GiB ×0.625` as
    `2.00 GiB` over `×0.625`); the first column is left-aligned and whole, the rest right-aligned and whole. str
    cells are escaped (rich Text cells keep their style)."""
    from rich.table import Table

    t = Table(title=esc(title) if title else None, title_justify="left", title_style="bold")
    for i, c in enumerate(columns):
        left = i == 0 or i in text or i in names
        t.add_column(esc(c), justify="left" if left else "right", no_wrap=i not in text,
                     overflow="fold" if i in text else "ellipsis")
    for r in rows:
        t.add_row(*(esc(c) if isinstance(c, str) else c for c in r))
    t.parted = frozenset(wrap)  # the columns `broken` may break
    return t


def parts(cell: str) -> list[str]:
    """A value cell's parts, the places a line may break: its words, a word that starts with a letter kept with
    the one before (a unit with its number: `1.31 GiB`, `(1.31× mean)`)."""
    out: list[str] = []
    for word in cell.split(" "):
        if out and word[:1].isalpha():
            out[-1] += " " + word
        else:
            out.append(word)
    return out


def broken(t: Table) -> Table:
    """A copy of `t` whose value columns (table's `wrap`) show each str cell's parts on lines of their own."""
    import copy

    t = copy.deepcopy(t)
    for i in getattr(t, "parted", ()):
        col = t.columns[i]
        col._cells = ["\n".join(parts(c)) if isinstance(c, str) else c for c in col._cells]
    return t


def styled(text: str, style: str):
    """A cell shown in `style` (e.g. 'bold red')."""
    from rich.text import Text

    return Text(text, style=style)


def _plain(cell) -> str:
    from rich.text import Text

    if isinstance(cell, str) and "[" not in cell:  # no markup to read
        return cell
    return cell.plain if isinstance(cell, Text) else Text.from_markup(str(cell), emoji=False).plain


def min_width(t: Table) -> int:
    """Columns a table needs for every cell to show whole: a whole column's widest cell, a wrapping one's
    longest word, plus the box's borders and padding."""
    from rich.cells import cell_len

    total = 0
    for col in t.columns:
        texts = [_plain(col.header), *map(_plain, col.cells)]
        lines = [x for text in texts for x in text.split("\n")]
        words = lines if col.no_wrap else [w for x in lines for w in x.split()]
        total += max(map(cell_len, words), default=0)
    _, right, _, left = t.padding
    n = len(t.columns)
    total += (left + right) * n - (0 if t.pad_edge else left + right)
    if t.box is not None:
        total += n - 1 + (2 if t.show_edge else 0)
    return total


def compact(t: Table) -> Table:
    """The same table in fewer columns: a rule under the header, a space between columns, no edges."""
    from rich import box

    t.box, t.show_edge, t.padding = box.SIMPLE_HEAD, False, (0, 0)
    return t


def fitted(item, width: int):
    """`item` in the first form whose cells all show whole in `width` columns: as built, its value cells broken
    into their parts, then each of those with the lighter box; None when none fits (a line of text always
    fits: it wraps)."""
    from rich.table import Table

    if not isinstance(item, Table):
        return item
    forms = [item, broken(item)] if getattr(item, "parted", None) else [item]
    for form in forms:
        if min_width(form) <= width:
            return form
    for form in forms:
        if min_width(compact(form)) <= width:
            return form
    return None


def stacked(t: Table) -> list:
    """A table too wide for the terminal as blocks, one per row: its first cell, then `column: value` (a header
    set on two lines, `max\nseqs` or `head-\nroom`, on one: `max seqs`, `headroom`)."""
    heads = [str(c.header).replace("-\n", "").replace("\n/", "/").replace("\n", " ") for c in t.columns]
    cells = [list(c.cells) for c in t.columns]
    out = [f"[bold]{t.title}[/bold]"] if t.title else []
    for i in range(len(cells[0]) if cells else 0):
        out.append(cells[0][i] if heads[0] == "" else f"{heads[0]}: {cells[0][i]}")
        out += [f"  {h}: {c[i]}" for h, c in zip(heads[1:], cells[1:], strict=True) if h or c[i]]
    return out
