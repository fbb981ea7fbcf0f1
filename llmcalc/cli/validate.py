"""The `llmcalc validate` command: every estimate against the torch reference model."""

from __future__ import annotations

from typing import Annotated, Literal, Optional

import typer

from llmcalc.cli import groups
from llmcalc.cli.app import command
from llmcalc.cli.options import (
    MODEL,
    OUTPUT,
    TRAINING,
    WORKLOAD,
    MLADecodeOpt,
    SeqOpt,
    _count_opt,
    _opt,
)


@command(rank=80)
def validate(
    *,
    preset: Annotated[Optional[list[str]], _opt("--preset", "-p", help="Preset name; repeat for several.",
                                                panel=MODEL, metavar="NAME")] = None,
    model: groups.Model,
    all_presets: Annotated[bool, _opt("--all", help="Every preset, with a progress bar.", panel=MODEL)] = False,
    batch: Annotated[int, _count_opt("--batch", "-b", help="Sequences in the batch.")] = 2,
    seq: SeqOpt = 128,
    device: Annotated[Literal["fake", "cpu", "cuda"], _opt(
        "--device", help="fake (full size, FakeTensorMode), cpu (a scaled real run) or cuda.", panel=WORKLOAD,
        metavar="DEVICE")] = "fake",
    layers: Annotated[Optional[int], _count_opt("--layers", help="Keep the first N layers (real runs).",
                                                panel=MODEL)] = None,
    scale: Annotated[int, _count_opt("--scale", help="Divide every width by this (real runs).", panel=MODEL)] = 1,
    mla_decode: MLADecodeOpt = "absorbed",
    train: Annotated[bool, _opt("--train", help="Check a LoRA training step instead (with --lora): params, FLOPs "
                                "and memory of the adapted model.", panel=TRAINING)] = False,
    lora: groups.Lora,
    detail: Annotated[bool, _opt("--detail", help="With several models: every row, not one line per model.",
                                 panel=OUTPUT)] = False,
    out: groups.Output,
) -> None:
    """Check every estimate against the torch reference model; exit 1 when any row fails."""
    from llmcalc import api
    from llmcalc.inputs.models import ModelRef

    if preset and len(preset) > 1 and not (model.config or model.hf_config or model.hf_model):
        models = [ModelRef(preset=name) for name in preset]
    else:
        models = model.replace(preset=preset[0] if preset else None).ref()
    run = api.prepare_validate(models, all_presets=all_presets, batch=batch, seq=seq, device=device, layers=layers,
                               scale=scale, mla_decode=mla_decode, train=train, **lora.values())
    if run.models > 1 and out.format == "table":
        from rich.progress import Progress

        with Progress(transient=True) as bar:
            task = bar.add_task("validating", total=run.models)
            report = run(lambda name: bar.update(task, advance=1, description=name))
    else:
        report = run()
    out.emit(report, of=validate, **({"detail": True} if detail else {}))
    if not report.ok:
        raise typer.Exit(1)
