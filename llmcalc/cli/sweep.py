"""The `llmcalc sweep` command: figures over a grid of batch sizes and context lengths."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

from llmcalc.cli import groups
from llmcalc.cli.app import command
from llmcalc.cli.groups import workload
from llmcalc.cli.options import (
    CONVENTIONS,
    COUNT_HELP,
    MODEL,
    OUTPUT,
    WORKLOAD,
    GroupOpt,
    KVDtypeOpt,
    OptionalGPUOpt,
    PlotForceOpt,
    _opt,
    load_gpu_named,
    load_model,
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
    kv_dtype: KVDtypeOpt = "bf16",
    group_size: GroupOpt = 128,
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
    from llmcalc.inputs.grid import check_rows, check_size, parse_grid
    from llmcalc.views.sweep import sweep as run

    seqs, batches = parse_grid(seq, "seq"), parse_grid(batch, "batch")
    check_size(batches, seqs)
    if plot is not None:
        from llmcalc.render.plot import check_target, plot_sweep

        check_target(plot)
    sources = [(p, None, None, None) for p in preset or []]
    sources += [(None, model.config, None, None)] if model.config else []
    sources += [(None, None, model.hf_config, None)] if model.hf_config else []
    sources += [(None, None, None, model.hf_model)] if model.hf_model else []
    if not sources:
        raise UserError("give a model: --preset NAME (repeat for several), --config FILE.yaml, --hf-config PATH or "
                        "--hf-model ORG/NAME")
    if model.hf_generic and not (model.hf_config or model.hf_model):
        raise UserError("--hf-generic: it reads a Hugging Face config; give --hf-config PATH or --hf-model ORG/NAME")
    w = workload(weights, layout, kv_dtype=kv_dtype, group_size=group_size)
    specs = [load_model(*s, hf_generic=model.hf_generic) for s in sources]
    if attention is not None:
        from llmcalc.views.compare import attention_variant

        variants = [v.strip() for v in attention.split(",") if v.strip()]
        if not variants:
            raise UserError("--attention: no variant given; list some of mha, gqa, mqa, mla, swa")
        specs = [attention_variant(s, v) for s in specs for v in dict.fromkeys(variants)]
    check_rows(len(specs), len(batches) * len(seqs))
    device = load_gpu_named(gpu)
    tm = timing.load(device)  # no GPU: no time
    from llmcalc.cli.files import check_outputs, written

    check_outputs(force, plot=plot)  # after the inputs' errors, before the work
    report = run(specs, device, batches, seqs, w, tm)
    if plot is not None:
        with written(plot) as tmp:
            plot_sweep(report, tmp, out.units)
        sys.stderr.write(f"plot: wrote {plot}\n")
    out.emit(report, bars=bars, of=sweep)
