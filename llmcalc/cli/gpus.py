"""The `llmcalc gpus` command: the GPU presets."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from llmcalc.cli import groups
from llmcalc.cli.app import command


@command(rank=50)
def gpus(
    *,
    name: Annotated[Optional[str], typer.Argument(help="A GPU preset: show all of its figures.",
                                                  show_default=False, metavar="[NAME]")] = None,
    out: groups.Output,
) -> None:
    """The GPU presets: dense peaks, memory, bandwidth, ridge point, interconnect; or one in full."""
    from llmcalc.inputs.gpus import gpu_names, load_gpu
    from llmcalc.views.gpus import gpu_detail, gpu_row

    if name is not None:
        out.emit(gpu_detail(load_gpu(name)), of=gpus)
        return
    out.emit([gpu_row(load_gpu(n)) for n in gpu_names()], of=gpus)
