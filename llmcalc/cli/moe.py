"""The `llmcalc moe` command: MoE routing, capacity and dropped tokens."""

from __future__ import annotations

from typing import Annotated, Optional

from llmcalc.cli import groups
from llmcalc.cli.app import command
from llmcalc.cli.options import (
    CONVENTIONS,
    ExpertSkewOpt,
    _real_opt,
)


@command(rank=140, help=(
    "MoE routing: expert capacity, expected dropped tokens (uniform random routing), router "
    "FLOPs, and expert FLOPs dropless vs padded to capacity, for prefill (B·S tokens) and one decode step (B); "
    "the busiest expert-parallel rank at a traffic skew."))
def moe(
    *,
    model: groups.Model,
    shape: groups.Batch,
    capacity_factor: Annotated[Optional[float], _real_opt(
        "--capacity-factor", help="Expert capacity C = ceil(cf · tokens · top_k / experts); default: the spec's "
        "capacity_factor, else dropless.", panel=CONVENTIONS, metavar="CF")] = None,
    expert_skew: ExpertSkewOpt = None,
    out: groups.Output,
) -> None:
    from llmcalc import api

    out.emit(api.moe(model.ref(), **shape.values(), capacity_factor=capacity_factor, expert_skew=expert_skew), of=moe)
