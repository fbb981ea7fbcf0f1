"""The `llmcalc validate` command: every estimate against the torch reference model."""

from __future__ import annotations

from typing import Annotated, Literal, Optional

import typer

from llmcalc.cli import groups
from llmcalc.cli.app import command
from llmcalc.cli.groups import workload
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
from llmcalc.errors import UserError


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
    from llmcalc.views.validate import (
        check_measurable,
        check_real_run,
        require_device,
        scaled_copy,
    )
    from llmcalc.views.validate import validate as run
    from llmcalc.workload import require_sizes

    require_sizes(batch=batch, seq=seq, scale=scale, layers=layers)
    adapters = None
    if train or lora.lora_rank is not None:
        if not train:
            raise UserError("--lora: LoRA adapters are trained; add --train")
        if lora.lora_rank is None:
            raise UserError("--train: validate's training step is a LoRA one (full training's FLOPs are in the "
                            "default rows); add --lora RANK")
        adapters = workload(lora, train=True)
    if all_presets:
        from llmcalc.inputs.presets import load_preset, preset_names

        specs = [load_preset(n) for n in preset_names()]
    elif preset and len(preset) > 1 and not (model.config or model.hf_config or model.hf_model):
        from llmcalc.inputs.presets import load_preset

        specs = [load_preset(n) for n in preset]
    else:
        specs = [model.replace(preset=preset[0] if preset else None).load()]
    if layers or scale > 1:
        specs = [scaled_copy(s, layers, scale) for s in specs]
    for s in specs:
        check_measurable(s, batch, seq)
    require_device(device)  # only now, so bad input is named before a missing torch
    if device != "fake":
        for s in specs:
            check_real_run(s, batch, seq, device)
    if len(specs) > 1 and out.format == "table":
        from rich.progress import Progress

        with Progress(transient=True) as bar:
            task = bar.add_task("validating", total=len(specs))

            def step(spec):
                bar.update(task, advance=1, description=spec.name)

            report = run(specs, batch, seq, device, mla_decode, progress=step, lora=adapters)
    else:
        report = run(specs, batch, seq, device, mla_decode, lora=adapters)
    out.emit(report, of=validate, **({"detail": True} if detail else {}))
    if not report.ok:
        raise typer.Exit(1)
