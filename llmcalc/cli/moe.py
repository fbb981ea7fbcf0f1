"""The `llmcalc moe` command: MoE routing, capacity and dropped tokens."""

from __future__ import annotations

from typing import Annotated, Optional

from llmcalc.cli.app import app
from llmcalc.cli.options import (
    CONVENTIONS,
    BatchOpt,
    ConfigOpt,
    FormatOpt,
    HFOpt,
    PresetOpt,
    SeqOpt,
    UnitsOpt,
    _opt,
    emit,
    load_model,
)


@app.command(help=(
    "MoE routing: expert capacity, expected dropped tokens (uniform random routing), router "
    "FLOPs, and expert FLOPs dropless vs padded to capacity, for prefill (B·S tokens) and one decode step (B)."))
def moe(
    preset: PresetOpt = None,
    config: ConfigOpt = None,
    hf_config: HFOpt = None,
    batch: BatchOpt = 1,
    seq: SeqOpt = 4096,
    capacity_factor: Annotated[Optional[float], _opt(
        "--capacity-factor", help="Expert capacity C = ceil(cf · tokens · top_k / experts); default: the spec's "
        "capacity_factor, else dropless.", panel=CONVENTIONS, metavar="CF")] = None,
    format: FormatOpt = "table",
    units: UnitsOpt = "both",
) -> None:
    from llmcalc.costs.moe import moe_report
    from llmcalc.workload import Workload

    w = Workload(batch=batch, seq=seq)
    emit(moe_report(load_model(preset, config, hf_config), w, capacity_factor), format, units, of=moe)
