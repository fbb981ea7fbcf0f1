"""The `llmcalc mfu` command: MFU and HFU of a training run from its measured throughput."""

from __future__ import annotations

from typing import Annotated, Literal, Optional

from llmcalc.cli import groups
from llmcalc.cli.app import command
from llmcalc.cli.options import (
    GPUS,
    PRECISION,
    WORKLOAD,
    AttentionKernelOpt,
    AttentionOpt,
    GPUOpt,
    StepBatchOpt,
    _count_opt,
    _opt,
    _real_opt,
)


@command(rank=160)
def mfu(
    *,
    model: groups.Model,
    batch: StepBatchOpt = 1,
    shape: groups.Batch,
    tokens_per_s: Annotated[Optional[float], _real_opt(
        "--tokens-per-s", help="Measured tokens/s, all GPUs together.", panel=WORKLOAD,
        metavar="TOK/S")] = None,
    step_time: Annotated[Optional[float], _real_opt(
        "--step-time", help="Measured seconds per step (instead of --tokens-per-s).",
        panel=WORKLOAD, metavar="SECONDS")] = None,
    gpus: Annotated[int, _count_opt("--gpus", help="Accelerators the run used, in all.", panel=GPUS)] = 1,
    gpu: GPUOpt = None,
    peak_tflops: Annotated[Optional[float], _real_opt(
        "--peak-tflops", help="One accelerator's dense peak (instead of --gpu).",
        panel=GPUS, metavar="TFLOP/S")] = None,
    compute_dtype: Annotated[Literal["fp32", "tf32", "bf16", "fp16", "fp8"], _opt(
        "--compute-dtype", help="Peak's matmul type: fp32, tf32, bf16, fp16 or fp8.",
        panel=PRECISION, metavar="DTYPE")] = "bf16",
    attention: AttentionOpt = "causal",
    attention_kernel: AttentionKernelOpt = "flash",
    recomputation: groups.Recompute,
    out: groups.Output,
) -> None:
    """MFU and HFU of a training run: its measured throughput times the model's (and the hardware's) FLOPs per
    token, over the peak of every GPU."""
    from llmcalc import api

    report = api.mfu(model.ref(), **shape.values(), **recomputation.values(), tokens_per_s=tokens_per_s,
                     step_time=step_time, gpus=gpus, gpu=gpu, peak_tflops=peak_tflops, compute_dtype=compute_dtype,
                     attention=attention, attention_kernel=attention_kernel)
    out.emit(report, of=mfu)
