"""The `llmcalc train` command: time, throughput and MFU of one training step under a time model."""

from __future__ import annotations

from typing import Annotated, Literal, Optional

from llmcalc.cli import groups
from llmcalc.cli.app import command
from llmcalc.cli.groups import workload
from llmcalc.cli.options import (
    GPUS,
    PRECISION,
    TRAINING,
    AttentionOpt,
    GPUOpt,
    OptimizerOpt,
    RecomputeOpt,
    ReserveOpt,
    StepBatchOpt,
    WeightsDtypeOpt,
    ZeroOpt,
    _count_opt,
    _opt,
    load_gpu_named,
)


@command(rank=150)
def train(
    *,
    model: groups.Model,
    batch: StepBatchOpt = 512,
    shape: groups.Batch,
    micro_batch: Annotated[Optional[int], _count_opt(
        "--micro-batch", help="Sequences per replica at a time (default: batch / dp).",
        panel=TRAINING)] = None,
    gpu: GPUOpt = None,
    gpus: Annotated[Optional[int], _count_opt(
        "--gpus", help="GPUs in all: tp · pp · dp; alone, the data-parallel replicas (dp = gpus / pp, tp 1).",
        panel=GPUS)] = None,
    layout: groups.Layout,
    weights_dtype: WeightsDtypeOpt = "bf16",
    compute_dtype: Annotated[Literal["fp32", "tf32", "bf16", "fp16", "fp8"], _opt(
        "--compute-dtype", help="Matmul type and MFU peak: fp32, tf32, bf16, fp16 or fp8.", panel=PRECISION,
        metavar="DTYPE")] = "bf16",
    recompute: RecomputeOpt = "none",
    optimizer: OptimizerOpt = "adamw",
    zero: ZeroOpt = 0,
    attention: AttentionOpt = "causal",
    timing: groups.TimeModel,
    reserve: ReserveOpt = 0.10,
    auto: Annotated[bool, _opt("--auto", help="If the step does not fit, take the largest micro-batch that does.",
                               panel=TRAINING)] = False,
    out: groups.Output,
) -> None:
    """Time, tokens/s and MFU of one training step under a time model; a step that does not fit is refused
    (docs/commands/train.md)."""
    from llmcalc.costs.training import training_step

    if gpus and layout.tp is None and layout.dp == 1:  # training spreads --gpus over dp replicas unless told
        layout = layout.replace(tp=1, dp=max(1, gpus // layout.pp))
    w = workload(shape, layout, train=True, micro_batch=micro_batch, weights_dtype=weights_dtype,
                 compute_dtype=compute_dtype, recompute=recompute, optimizer=optimizer, zero=zero,
                 attention_core=attention, logits="all", reserve=reserve)
    device = load_gpu_named(gpu, "train")
    tm = timing.load(device)
    out.emit(training_step(model.load(), device, w, tm, auto=auto), of=train)
