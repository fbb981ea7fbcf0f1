"""The `llmcalc explain` command: a command's figures worked out."""

from __future__ import annotations

from typing import Annotated, Literal, Optional

import typer

from llmcalc.cli.app import app
from llmcalc.cli.options import (
    TRAINING,
    AttentionOpt,
    BatchOpt,
    CalibrationOpt,
    ConfigOpt,
    DPOpt,
    EPOpt,
    FormatOpt,
    GPUsOpt,
    HFOpt,
    ImageSizeOpt,
    ImagesOpt,
    KVDtypeOpt,
    LogitsOpt,
    MLADecodeOpt,
    PPOpt,
    PresetOpt,
    SeqOpt,
    TimeModelOpt,
    TPOpt,
    UnitsOpt,
    WeightsDtypeOpt,
    WeightsFormatOpt,
    _count_opt,
    _opt,
    emit,
    image_fields,
    load_gpu_named,
    load_model,
    weight_formats,
)
from llmcalc.errors import UserError

TOPICS = ("params", "kv", "flops", "memory", "latency")
DEFAULT_GEN = {"flops": 1, "latency": 256}
"""--gen when not given: the default of the command the topic explains."""


@app.command(help=(
    "A command's figures worked out: formula, symbols, arithmetic, result, checked against the "
    "command; exit 1 if a total does not match."))
def explain(
    topic: Annotated[Optional[str], typer.Argument(
        help="The command whose figures to work out: params, kv, flops, memory or latency.", show_default=False,
        metavar="TOPIC")] = None,
    preset: PresetOpt = None,
    config: ConfigOpt = None,
    hf_config: HFOpt = None,
    batch: BatchOpt = 1,
    seq: SeqOpt = 4096,
    gen: Annotated[Optional[int], _count_opt(
        "--gen", "-g", help="Generated tokens (default: 1 for flops, 256 for latency).")] = None,
    kv_dtype: KVDtypeOpt = "bf16",
    weights_dtype: WeightsDtypeOpt = None,
    weights_format: WeightsFormatOpt = None,
    attention: AttentionOpt = "causal",
    logits: LogitsOpt = "last",
    mla_decode: MLADecodeOpt = "absorbed",
    train: Annotated[bool, _opt("--train/--inference", help="memory: a training step.", panel=TRAINING)] = False,
    optimizer: Annotated[Literal["adamw", "adamw-8bit", "sgd"], _opt(
        "--optimizer", help="memory --train: adamw, adamw-8bit or sgd.", panel=TRAINING,
        metavar="NAME")] = "adamw",
    gpu: Annotated[Optional[str], _opt("--gpu", help="latency: GPU preset or GPU YAML file (required).",
                                       panel="GPUs and layout", metavar="NAME")] = None,
    time_model: TimeModelOpt = None,
    calibration: CalibrationOpt = None,
    gpus: GPUsOpt = None,
    tp: TPOpt = None,
    pp: PPOpt = 1,
    dp: DPOpt = 1,
    ep: EPOpt = 1,
    images: ImagesOpt = 0,
    image_size: ImageSizeOpt = None,
    format: FormatOpt = "table",
    units: UnitsOpt = "both",
) -> None:
    from llmcalc.inputs.time_models import load_time_model
    from llmcalc.model.time_model import ROOFLINE
    from llmcalc.views.explain import explain as work_out
    from llmcalc.workload import Layout, Workload

    if topic not in TOPICS:
        got = "no topic" if topic is None else f"unknown topic {topic!r}"
        raise UserError(f"explain: {got}; give one of {', '.join(TOPICS)}, e.g. llmcalc explain kv -p llama2-7b")
    w = Workload(batch=batch, seq=seq, gen=gen if gen is not None else DEFAULT_GEN.get(topic, 1), kv_dtype=kv_dtype,
                 weights_dtype=weights_dtype, weights_format=weight_formats(weights_format),
                 attention_core=attention, logits=logits, mla_decode=mla_decode,
                 train=train, optimizer=optimizer, layout=Layout.of(gpus, tp, pp, dp, ep),
                 **image_fields(images, image_size))
    device = load_gpu_named(gpu)
    tm = load_time_model(time_model, device, calibration) if device else ROOFLINE  # no GPU: no time
    report = work_out(topic, load_model(preset, config, hf_config), w, device, tm)
    emit(report, format, units, of=explain)
    if not report.matches:
        raise typer.Exit(1)
