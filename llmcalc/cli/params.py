"""The `llmcalc params` command: parameter counts."""

from __future__ import annotations

from llmcalc.cli.app import app
from llmcalc.cli.options import (
    ConfigOpt,
    FormatOpt,
    HFOpt,
    PresetOpt,
    UnitsOpt,
    emit,
    load_model,
)


@app.command()
def params(
    preset: PresetOpt = None,
    config: ConfigOpt = None,
    hf_config: HFOpt = None,
    format: FormatOpt = "table",
    units: UnitsOpt = "both",
) -> None:
    """Parameters: total, active per token, per component and per layer type."""
    from llmcalc.costs.params import params as count_params

    emit(count_params(load_model(preset, config, hf_config)), format, units, of=params)
