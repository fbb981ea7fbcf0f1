"""Printing a report for people: its type's renderer (report_tables.py) returns lines and tables, fitted to
the console here, text as written (no highlighting, no `:name:` emoji codes). A table that does not fit with both
GB and GiB columns is rendered again with GB only; a table that still does not fit is stacked, one block per row
with a line per column. Lines of text wrap between words, a number never parted from its unit (render/wrap.py);
a Verbatim line (a shell command) is printed whole.
"""

from __future__ import annotations

from llmcalc.render.long_tables import print_long
from llmcalc.render.report_tables import renderer
from llmcalc.render.tables import fitted, stacked
from llmcalc.render.text import Verbatim


def print_report(report, units: str, console=None, **view) -> None:
    """Render `report` with its type's renderer and print it fitted to `console` (a rich Console; the
    terminal's where None; see the module)."""
    from rich.console import Console

    from llmcalc.render.wrap import units_kept

    console = console or Console(highlight=False, emoji=False)
    render = renderer(report)
    items = render(report, units, **view)
    if units == "both" and any(fitted(x, console.width) is None for x in items):
        items = render(report, "si", **view) + [f"[dim]note: GiB columns left out to fit {console.width} columns "
                                                "(--units iec shows GiB; the JSON has exact bytes)[/dim]"]
    for item in items:
        form = fitted(item, console.width)
        for x in ([form] if form is not None else stacked(item)):
            if isinstance(x, Verbatim):
                console.print(x, soft_wrap=True)
                continue
            if isinstance(x, str):
                x = units_kept(console.render_str(x)).wrap(console, console.width)
            elif print_long(console, x):
                continue
            console.print(x)
