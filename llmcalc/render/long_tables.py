"""Printing a long table: rich lays out every cell of a table on its own (1–3 ms a row: a sweep of 10,000 points took
half a minute), so a table of LONG_ROWS rows or more whose columns all show their cells whole has its body rows
laid out here, line by line, in the same characters; its title, borders and header are still rich's (a table
of the same columns and widths with no rows), so the output is the one rich prints, styles included
(tests/test_render_text.py compares the two).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

LONG_ROWS = 100
"""Rows from which a table's body is laid out here; a shorter one is left to rich whole."""


def print_long(console: Console, t) -> bool:
    """Print the table `t` as rich would, its body rows laid out here; False, with nothing printed, where it is not
    a rich Table, is shorter than LONG_ROWS rows or is of a kind this does not lay out (a column that wraps or is
    centred, a footer, lines between rows, a header hidden, padding collapsed or off the edges, a row or column
    style, a width set)."""
    from rich.segment import Segment, Segments
    from rich.table import Table

    if (not isinstance(t, Table) or t.row_count < LONG_ROWS or _tabs(t) or not t.show_header or t.show_footer
            or t.show_lines or t.leading or t.collapse_padding or not t.pad_edge or t.row_styles or t.box is None
            or any(not c.no_wrap or c.style or c.width is not None or c.min_width or c.max_width
                   or c.justify not in ("left", "right") for c in t.columns)):
        return False
    cells = [[_lines(console, c) for c in col.cells] for col in t.columns]
    heads = [_lines(console, col.header) for col in t.columns]
    widths = [max(w for _, w in _all_lines(heads[i], cells[i])) for i in range(len(t.columns))]
    _, right, _, left = t.padding
    if sum(widths) + (left + right) * len(widths) + t._extra_width > console.width:
        return False  # rich would narrow the columns
    head = Table(title=t.title, title_justify=t.title_justify, title_style=t.title_style, box=t.box,
                 show_edge=t.show_edge, padding=t.padding, safe_box=t.safe_box, style=t.style,
                 border_style=t.border_style, header_style=t.header_style)
    for col, width in zip(t.columns, widths, strict=True):
        head.add_column(col.header, justify=col.justify, no_wrap=True, width=width, header_style=col.header_style)
    lines = console.render_lines(head, console.options, pad=False)
    box = t.box.substitute(console.options, safe=t.safe_box if t.safe_box is not None else console.safe_box)
    bottom = 1 if t.show_edge else 0  # the table without rows ends in its bottom edge, where it has edges
    console.print(Segments([s for line in lines[:len(lines) - bottom] for s in (*line, Segment.line())]))
    console.print(Segments(_body(console, cells, widths, t, box)))
    if bottom:
        console.print(Segments([*lines[-1], Segment.line()]))
    return True


def _tabs(t: Table) -> bool:
    """Whether a str cell holds a tab, which rich expands to its tab stops (left to rich)."""
    return any("\t" in c for col in t.columns for c in (col.header, *col.cells) if isinstance(c, str))


def _lines(console: Console, cell) -> list[tuple]:
    """A cell's lines, each with its width in terminal cells: str where a line is plain text (a str cell without
    markup), rich Text where it has a style (a Text cell, or a str read as markup: an escaped one as written)."""
    from rich.cells import cell_len
    from rich.text import Text

    if isinstance(cell, str) and "[" not in cell:
        return [(x, len(x) if x.isascii() else cell_len(x)) for x in cell.split("\n")]
    text = console.render_str(cell, highlight=False, emoji=False) if isinstance(cell, str) else cell
    return [(x, x.cell_len) for x in text.split("\n", allow_blank=True)] or [(Text(""), 0)]


def _all_lines(head: list[tuple], cells: list[list[tuple]]):
    yield from head
    for lines in cells:
        yield from lines


def _body(console: Console, cells: list[list[list[tuple]]], widths: list[int], t: Table, box) -> list:
    """The body rows' lines as rich Segments: each cell's lines aligned in its column's width and padding,
    top-aligned, between the box's verticals (the last row's, the foot's); a line with a styled cell rendered as
    rich renders it (a line's own style covers the spaces that align it, as rich pads it)."""
    from rich.segment import Segment
    from rich.text import Span, Text

    _, right, _, left = t.padding
    pad_l, pad_r = " " * left, " " * right
    rights = [col.justify == "right" for col in t.columns]
    out: list[Segment] = []
    rows, n = len(cells[0]), len(cells)
    for r in range(rows):
        last = r == rows - 1
        edge_l, edge_r, divider = ((box.foot_left, box.foot_right, box.foot_vertical) if last else
                                   (box.mid_left, box.mid_right, box.mid_vertical))
        row = [cells[i][r] for i in range(n)]
        for k in range(max(map(len, row))):
            pieces = [edge_l] if t.show_edge else []
            spans: list[Span] = []
            at = len(edge_l) if t.show_edge else 0
            for i in range(n):
                line, w = row[i][k] if k < len(row[i]) else ("", 0)
                gap = " " * (widths[i] - w)
                if not isinstance(line, str):
                    if line.style:
                        spans.append(Span(at + left, at + left + len(gap) + len(line.plain), line.style))
                    shift = at + left + (len(gap) if rights[i] else 0)
                    spans.extend(Span(shift + x.start, shift + x.end, x.style) for x in line.spans)
                    line = line.plain
                piece = pad_l + (gap + line if rights[i] else line + gap) + pad_r + (divider if i < n - 1 else "")
                pieces.append(piece)
                at += len(piece)
            if t.show_edge:
                pieces.append(edge_r)
            text = "".join(pieces)
            out.extend(Text(text, spans=spans, end="").render(console) if spans else [Segment(text)])
            out.append(Segment.line())
    return out
