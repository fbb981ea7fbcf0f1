"""How help pages are laid out, fitted to 80 columns: typer's rich help, changed where it wastes lines and columns.

- An option's `[default: …]` ends its description, never split over two lines, instead of taking a line of its
  own (typer sets the two side by side only where both fit on one line).
- A column of an options table that is empty in every row (no short names, no `--no-…` forms, no metavars) takes
  no space; typer gives each its padding.
- The Advanced panel, the options rarely changed, comes last.

Installed only when help is shown: a run that prints no help never imports typer's rich formatter."""

from __future__ import annotations


def help_layout() -> None:
    """Change typer's help formatter as the module says (once)."""
    from rich.table import Table
    from rich.text import Text
    from typer import rich_utils

    from llmcalc.cli.options import ADVANCED
    from llmcalc.render.wrap import joined as one_paragraph

    if getattr(rich_utils.rich_format_help, "llmcalc", False):
        return
    get_help, format_help = rich_utils._get_parameter_help, rich_utils.rich_format_help

    def described(**kw):
        parts = get_help(**kw)
        items = getattr(parts, "renderables", None)
        if items and all(isinstance(x, Text) for x in items):
            return one_paragraph(items)
        return parts

    def advanced_last(*, obj, **kw):
        params = getattr(obj, "params", None)
        if not params:
            return format_help(obj=obj, **kw)
        obj.params = sorted(params, key=lambda p: getattr(p, "rich_help_panel", None) == ADVANCED)
        try:
            return format_help(obj=obj, **kw)
        finally:
            obj.params = params

    class NoEmptyColumns(Table):
        """A table that leaves out the columns empty in every row when it is measured or drawn."""

        def _drop_empty(self) -> None:
            kept = [c for c in self.columns if any(not _blank(x) for x in c._cells)]
            if kept and len(kept) < len(self.columns):
                for i, c in enumerate(kept):
                    c._index = i
                self.columns = kept

        def __rich_measure__(self, console, options):
            self._drop_empty()
            return super().__rich_measure__(console, options)

        def __rich_console__(self, console, options):
            self._drop_empty()
            return super().__rich_console__(console, options)

    advanced_last.llmcalc = True
    rich_utils._get_parameter_help, rich_utils.rich_format_help = described, advanced_last
    rich_utils.Table = NoEmptyColumns


def _blank(cell) -> bool:
    """Whether a table cell shows nothing: an empty string or an empty rich Text."""
    from rich.text import Text

    return cell == "" or (isinstance(cell, Text) and not cell.plain)
