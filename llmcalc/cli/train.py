"""The `llmcalc train` command: time, throughput and MFU of one training step under a time model."""

from __future__ import annotations

from typing import Annotated, Literal, Optional

from llmcalc.cli import groups
from llmcalc.cli.app import command
from llmcalc.cli.options import (
    ADVANCED,
    GPUS,
    PRECISION,
    TRAINING,
    AttentionOpt,
    DPOpt,
    EPOpt,
    GPUOpt,
    GPUsOpt,
    IntervalOpt,
    OptimizerOpt,
    PPOpt,
    RecomputeOpt,
    ReserveOpt,
    StepBatchOpt,
    TPOpt,
    WeightsDtypeOpt,
    ZeroOpt,
    _count_opt,
    _opt,
)


class TrainLayout(groups.Group):
    """train's layout: the parallel degrees, and what a training step adds to them (context parallel, interleaved
    and uneven pipeline stages)."""

    gpus: GPUsOpt = None
    tp: TPOpt = None
    pp: PPOpt = 1
    dp: DPOpt = 1
    ep: EPOpt = 1
    cp: Annotated[int, _count_opt("--cp", help="Context-parallel GPUs.", panel=GPUS)] = 1
    sp: Annotated[bool, _opt("--sp", help="Sequence parallelism over --tp.", panel=GPUS)] = False
    tp_comm_overlap: Annotated[bool, _opt(
        "--tp-comm-overlap", help="tp communication beside the GEMMs (with --sp).", panel=GPUS)] = False
    vpp: Annotated[int, _count_opt("--vpp", help="Virtual stages per pipeline GPU.", panel=GPUS)] = 1
    first_stage_layers: Annotated[Optional[int], _count_opt(
        "--first-stage-layers", help="First pipeline stage's layers.", panel=GPUS)] = None
    last_stage_layers: Annotated[Optional[int], _count_opt(
        "--last-stage-layers", help="Last pipeline stage's layers.", panel=GPUS)] = None
    embedding_in_split: Annotated[bool, _opt(
        "--embedding-in-split", help="Embedding as a layer in the split.", panel=GPUS)] = False
    loss_in_split: Annotated[bool, _opt(
        "--loss-in-split", help="Loss as a layer in the split.", panel=GPUS)] = False
    pp_layout: Annotated[Optional[str], _opt(
        "--pp-layout", help="Megatron pipeline layout string.",
        panel=GPUS, metavar="LAYOUT")] = None


@command(rank=150)
def train(
    *,
    model: groups.Model,
    batch: StepBatchOpt = 512,
    shape: groups.Batch,
    micro_batch: Annotated[Optional[int], _count_opt(
        "--micro-batch", help="Sequences per micro-batch (default batch/dp).",
        panel=TRAINING)] = None,
    gpu: GPUOpt = None,
    gpus: Annotated[Optional[int], _count_opt(
        "--gpus", help="GPUs in all: tp · cp · pp · dp; alone, the data-parallel replicas (tp 1).",
        panel=GPUS)] = None,
    layout: TrainLayout,
    lora: groups.Lora,
    qlora: Annotated[bool, _opt("--qlora", help="With --lora: a 4-bit nf4-dq base.", panel=TRAINING)] = False,
    weights_dtype: WeightsDtypeOpt = None,
    compute_dtype: Annotated[Literal["fp32", "tf32", "bf16", "fp16", "fp8", "fp4"], _opt(
        "--compute-dtype", help="Matmul type and MFU peak: fp32, tf32, bf16, fp16, fp8 or fp4.", panel=PRECISION,
        metavar="DTYPE")] = "bf16",
    recompute: RecomputeOpt = "none",
    optimizer: OptimizerOpt = "adamw",
    zero: ZeroOpt = 0,
    attention: AttentionOpt = "causal",
    attention_impl: Annotated[str, _opt(
        "--attention-impl", help="Attention kernel: cudnn, fa2, fa3 or profile (the time model's).",
        panel=TRAINING, metavar="KERNEL")] = "cudnn",
    fusion: Annotated[Literal["fused", "eager"], _opt(
        "--fusion", help="Element-wise passes: fused or eager.",
        panel=TRAINING, metavar="MODE")] = "fused",
    timing: groups.TimeModel,
    reserve: ReserveOpt = 0.10,
    auto: Annotated[bool, _opt("--auto", help="If the step does not fit, take the largest micro-batch that does.",
                               panel=TRAINING)] = False,
    interval: IntervalOpt = False,
    engine: Annotated[Optional[str], _opt(
        "--engine", help="reference: the PyTorch reference's own step.", panel=ADVANCED, metavar="NAME")] = None,
    out: groups.Output,
) -> None:
    """Time, tokens/s and MFU of one training step under a time model; a step that does not fit is refused
    (docs/commands/train.md)."""
    from llmcalc import api

    report = api.train(model.ref(), gpu, **shape.values(), **layout.values(), **lora.values(), **timing.values(),
                       micro_batch=micro_batch, qlora=qlora, weights_dtype=weights_dtype, compute_dtype=compute_dtype,
                       recompute=recompute, optimizer=optimizer, zero=zero, attention=attention, reserve=reserve,
                       attention_impl=attention_impl, fusion=fusion,
                       auto=auto, interval=interval, engine=engine)
    out.emit(report, of=train)
