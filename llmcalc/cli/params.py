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
    from llmcalc.costs.params import params as count_params

    spec = model.load()
    report = count_params(spec)
    if bytes:
        from llmcalc.costs.checkpoint import checkpoint_bytes

        size, how = checkpoint_bytes(spec)
        published = spec.checkpoint.index_total_size if spec.checkpoint is not None else None
        report = report.model_copy(update={"checkpoint_bytes": size, "checkpoint_formats": how,
                                           "hub_total_size_bytes": published})
    if spec.best_effort is not None:
        report = report.model_copy(update={"model_import": "best-effort", "assumed": spec.best_effort})
    out.emit(report, of=params)
