"""The `llmcalc params` command: parameter counts."""

from __future__ import annotations

from typing import Annotated

from llmcalc.cli import groups
from llmcalc.cli.app import command
from llmcalc.cli.options import (
    OUTPUT,
    _opt,
)


@command(rank=10)
def params(
    *,
    model: groups.Model,
    bytes: Annotated[bool, _opt("--bytes", help="Add checkpoint_bytes: the checkpoint's tensor bytes as it ships "
                                "(its formats, scales, zero points, stored buffers; docs/formats.md).",
                                panel=OUTPUT)] = False,
    out: groups.Output,
) -> None:
    """Parameters: total, active per token, per component and per layer type."""
    from llmcalc import api

    out.emit(api.params(model.ref(), bytes=bytes), of=params)
