"""The `llmcalc schema` command: the JSON Schema of each command's output."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from llmcalc.cli.app import command
from llmcalc.errors import UserError


@command(rank=210)
def schema(
    command: Annotated[Optional[str], typer.Argument(help="A command name; all of them when left out.",
                                                     show_default=False, metavar="[COMMAND]")] = None,
) -> None:
    """The JSON Schema of each command's JSON output (Pydantic models, see docs/schemas.md)."""
    from llmcalc.render.formats import strict_json
    from llmcalc.reports.schema import COMMAND_REPORTS, command_schema

    if command is None or command not in COMMAND_REPORTS:
        from llmcalc.cli import commands

        printing = [c for c in commands() if c in COMMAND_REPORTS]  # as `llmcalc --help` lists them
        if command is not None:
            raise UserError(f"schema: unknown command {command!r}; give one of {', '.join(printing)}")
    out = command_schema(command) if command else {c: command_schema(c) for c in printing}
    sys.stdout.write(strict_json(out, ascii=True))
