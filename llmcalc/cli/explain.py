"""The `llmcalc explain` command: a command's figures worked out."""

from __future__ import annotations

from typing import Annotated, Literal, Optional

import typer

from llmcalc.cli import groups
from llmcalc.cli.app import command
from llmcalc.cli.options import (
    TRAINING,
    AttentionOpt,
    KVDtypeOpt,
    LogitsOpt,
    MLADecodeOpt,
    _count_opt,
    _opt,
)



@command(rank=120, help=(
    "A command's figures worked out: formula, symbols, arithmetic, result, checked against the "
    "command; exit 1 if a total does not match."))
def explain(
    *,
    topic: Annotated[Optional[str], typer.Argument(
        help="The command whose figures to work out: params, kv, flops, memory or latency.", show_default=False,
        metavar="TOPIC")] = None,
    model: groups.Model,
    shape: groups.Batch,
    gen: Annotated[Optional[int], _count_opt(
        "--gen", "-g", help="Generated tokens (default: 1 for flops, 256 for latency).")] = None,
    kv_dtype: KVDtypeOpt = "bf16",
    weights: groups.Weights,
    attention: AttentionOpt = "causal",
    logits: LogitsOpt = "last",
    mla_decode: MLADecodeOpt = "absorbed",
    train: Annotated[bool, _opt("--train/--inference", help="memory: a training step.", panel=TRAINING)] = False,
    optimizer: Annotated[Literal["adamw", "adamw-8bit", "sgd"], _opt(
        "--optimizer", help="memory --train: adamw, adamw-8bit or sgd.", panel=TRAINING,
        metavar="NAME")] = "adamw",
    gpu: Annotated[Optional[str], _opt("--gpu", help="latency: GPU preset or GPU YAML file (required).",
                                       panel="GPUs and layout", metavar="NAME")] = None,
    timing: groups.EngineTime,
    layout: groups.Layout,
    image: groups.Images,
    out: groups.Output,
) -> None:
    from llmcalc import api

    report = api.explain(topic, model.ref(), **shape.values(), **weights.values(), **layout.values(),
                         **image.values(), **timing.values(), gen=gen, kv_dtype=kv_dtype, attention=attention,
                         logits=logits, mla_decode=mla_decode, train=train, optimizer=optimizer, gpu=gpu)
    out.emit(report, of=explain)
    if not report.matches:
        raise typer.Exit(1)
