"""The `llmcalc latency` command: time per phase and op under a time model (calibrated, or the roofline)."""

from __future__ import annotations

from typing import Annotated, Literal, Optional

from llmcalc.cli import groups
from llmcalc.cli.app import command
from llmcalc.cli.options import (
    ADVANCED,
    PRECISION,
    EncoderSeqOpt,
    EngineKVDtypeOpt,
    EnforceEagerOpt,
    ExpertSkewOpt,
    GPUOpt,
    GroupOpt,
    IntervalOpt,
    MLADecodeOpt,
    ReserveOpt,
    _count_opt,
    _opt,
    _real_opt,
)


@command(rank=60)
def latency(
    *,
    model: groups.Model,
    shape: groups.Batch,
    encoder_seq: EncoderSeqOpt = None,
    gen: Annotated[int, _count_opt("--gen", "-g", help="Tokens to generate (the first by prefill).")] = 256,
    image: groups.Images,
    gpu: GPUOpt = None,
    layout: groups.Layout,
    weights: groups.Weights,
    kv_dtype: EngineKVDtypeOpt = None,
    group_size: GroupOpt = None,
    compute_dtype: Annotated[Optional[Literal["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4"]], _opt(
        "--compute-dtype", help="Matmul type: fp32, tf32, bf16, fp16, fp8, int8 or fp4 (default: bf16, or the "
        "formats' own).", panel=PRECISION, metavar="DTYPE")] = None,
    attention_dtype: Annotated[Optional[Literal["fp32", "bf16", "fp16", "fp8"]], _opt(
        "--attention-dtype", help="Attention-core type (default: the matmuls', bf16 under fp8/int8).", panel=ADVANCED,
        metavar="DTYPE")] = None,
    timing: groups.EngineTime,
    compute_efficiency: Annotated[Optional[float], _real_opt(
        "--compute-efficiency", help="Share of peak FLOP/s reached (default: the time model's).",
        panel=ADVANCED, metavar="SHARE")] = None,
    memory_efficiency: Annotated[Optional[float], _real_opt(
        "--memory-efficiency", help="Share of memory bandwidth reached (default: the time model's).",
        panel=ADVANCED, metavar="SHARE")] = None,
    comm_efficiency: Annotated[Optional[float], _real_opt(
        "--comm-efficiency", help="Share of link bandwidth reached (default: the time model's).",
        panel=ADVANCED, metavar="SHARE")] = None,
    mla_decode: MLADecodeOpt = "absorbed",
    expert_skew: ExpertSkewOpt = None,
    enforce_eager: EnforceEagerOpt = False,
    reserve: ReserveOpt = 0.10,
    interval: IntervalOpt = False,
    out: groups.Output,
) -> None:
    """Time to first token, time per output token and tokens/s, per phase and op (docs/commands/latency.md)."""
    from llmcalc import api

    report = api.latency(model.ref(), gpu, **shape.values(), **weights.values(), **layout.values(), **image.values(),
                         **timing.values(), encoder_seq=encoder_seq, gen=gen, kv_dtype=kv_dtype,
                         group_size=group_size, compute_dtype=compute_dtype, attention_dtype=attention_dtype,
                         compute_efficiency=compute_efficiency, memory_efficiency=memory_efficiency,
                         comm_efficiency=comm_efficiency, mla_decode=mla_decode, expert_skew=expert_skew,
                         enforce_eager=enforce_eager, reserve=reserve, interval=interval)
    out.emit(report, of=latency)
