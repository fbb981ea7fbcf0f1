"""The `llmcalc presets` command: the model presets."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from llmcalc.cli.app import command
from llmcalc.cli.options import OUTPUT, UnitsOpt, _opt, emit
from llmcalc.render import Format


@command(rank=100)
def presets(
    name: Annotated[Optional[str], typer.Argument(help="A preset: print its full spec, source and derived figures.",
                                                  show_default=False, metavar="[NAME]")] = None,
    format: Annotated[Optional[Format], _opt("--format", "-f", help="Output: table, json, yaml or csv (with NAME: "
                                             "yaml by default).", panel=OUTPUT, metavar="FORMAT")] = None,
    units: UnitsOpt = "both",
) -> None:
    """The presets: layers, width, context, attention and FFN per preset; or one in full."""
    from llmcalc.inputs.presets import load_preset, preset_names
    from llmcalc.views.presets import preset_detail, preset_row

    if name is not None:
        emit(preset_detail(load_preset(name)), format or "yaml", units, of=presets)
        return
    emit([preset_row(load_preset(n)) for n in preset_names()], format or "table", units, of=presets)
