"""The `llmcalc sweep` command: figures over a grid of batch sizes and context lengths."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

from llmcalc.cli import groups
from llmcalc.cli.app import command
from llmcalc.cli.options import (
    CONVENTIONS,
    COUNT_HELP,
    MODEL,
    OUTPUT,
    WORKLOAD,
    EngineKVDtypeOpt,
    GroupOpt,
    OptionalGPUOpt,
    PlotForceOpt,
    _opt,
)
from llmcalc.errors import UserError

GRID_HELP = "a list (1,8,64), a range a..b doubling from a (1k..128k) or a..b:step stepping linearly (1k..8k:1k); " \
    + COUNT_HELP


@command(rank=130)
def sweep(
    *,
    preset: Annotated[Optional[list[str]], _opt(
        "--preset", "-p", help="Preset name; repeat for several models.", panel=MODEL, metavar="NAME")] = None,
    model: groups.Model,
    seq: Annotated[str, _opt("--seq", "-s", help=f"Context lengths: {GRID_HELP}.", panel=WORKLOAD,
                             metavar="GRID")] = "1k..128k",
    batch: Annotated[str, _opt("--batch", "-b", help="Batch sizes (in all), written as --seq.", panel=WORKLOAD,
                               metavar="GRID")] = "1",
    gpu: OptionalGPUOpt = None,
    layout: groups.Layout,
    timing: groups.EngineTime,
    weights: groups.Weights,
    kv_dtype: EngineKVDtypeOpt = None,
    group_size: GroupOpt = None,
    attention: Annotated[Optional[str], _opt(
        "--attention", help="Attention variants of each model as separate series, e.g. mha,gqa,mla (the swap "
        "rule of `llmcalc compare`).", panel=CONVENTIONS, metavar="LIST")] = None,
    plot: Annotated[Optional[Path], _opt("--plot", help="Also plot memory and time per token to a .png or .svg "
                                         "file.",
                                         panel=OUTPUT, metavar="FILE")] = None,
    force: PlotForceOpt = False,
    bars: Annotated[bool, _opt("--bars", help="Table view: a bar of memory per point.", panel=OUTPUT)] = False,
    out: groups.Output,
) -> None:
    """KV cache, memory, FLOPs and (with --gpu) time and fit over a grid of batch sizes × context lengths."""
    from llmcalc import api
    from llmcalc.inputs.models import ModelRef

    if plot is not None:
        from llmcalc.render.plot import check_target, plot_sweep

        check_target(plot)
    if bars and out.format != "table":
        raise UserError(f"--bars draws the table view's bars; --format {out.format} has none, so leave --bars out")
    models = [ModelRef(preset=p) for p in preset or []]
    models += [ModelRef(config=model.config)] if model.config else []
    models += [ModelRef(hf_config=model.hf_config, hf_generic=model.hf_generic)] if model.hf_config else []
    models += [ModelRef(hf_model=model.hf_model, hf_generic=model.hf_generic)] if model.hf_model else []
    if model.hf_generic and not (model.hf_config or model.hf_model):
        raise UserError("`hf_generic`: it reads a Hugging Face config; give `hf_config` PATH or `hf_model` ORG/NAME")
    work = api.prepare_sweep(models, seq=seq, batch=batch, gpu=gpu, **layout.values(), **timing.values(),
                             **weights.values(), kv_dtype=kv_dtype, group_size=group_size, attention=attention)
    from llmcalc.cli.files import check_outputs, written

    check_outputs(force, plot=plot)  # after the inputs' errors, before the work
    report = work()
    if plot is not None:
        with written(plot) as tmp:
            plot_sweep(report, tmp, out.units)
        sys.stderr.write(f"plot: wrote {plot}\n")
    out.emit(report, bars=bars, of=sweep)
