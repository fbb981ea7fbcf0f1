"""The `llmcalc fit` command: what fits on the GPUs, and the smallest layout that holds the model."""

from __future__ import annotations

from typing import Annotated, Optional

from llmcalc.cli import groups
from llmcalc.cli.app import command
from llmcalc.cli.options import (
    ADVANCED,
    EngineKVDtypeOpt,
    GPUOpt,
    GroupOpt,
    _count_opt,
    _real_opt,
)


@command(rank=70, help=(
    "Does it fit: weights, KV cache and workspace per GPU; the largest batch and longest "
    "context; when it does not, the fewest GPUs that hold it."))
def fit(
    *,
    model: groups.Model,
    batch: Annotated[int, _count_opt("--batch", "-b", help="Sequences in all; max_seq is found for this batch.")] = 1,
    seq: Annotated[int, _count_opt("--seq", "-s", help="Tokens per sequence; max_batch is found for "
                                   "it.")] = 4096,
    gpu: GPUOpt = None,
    layout: groups.Layout,
    weights: groups.Weights,
    kv_dtype: EngineKVDtypeOpt = None,
    group_size: GroupOpt = None,
    reserve: Annotated[Optional[float], _real_opt(
        "--reserve", help="Share of GPU memory kept for the runtime (default: 0.1; with --engine, 1 − its GPU "
        "memory utilization).", panel=ADVANCED, metavar="SHARE")] = None,
    prefill_chunk: Annotated[Optional[int], _count_opt(
        "--prefill-chunk", help="Tokens per prefill chunk, sizing the workspace (default: 8192; with --engine, "
        "its max batched tokens).", panel=ADVANCED)] = None,
    timing: groups.EngineTime,
    image: groups.Images,
    out: groups.Output,
) -> None:
    from llmcalc import api

    report = api.fit(model.ref(), gpu, **weights.values(), **layout.values(), **image.values(), **timing.values(),
                     batch=batch, seq=seq, kv_dtype=kv_dtype, group_size=group_size, reserve=reserve,
                     prefill_chunk=prefill_chunk)
    out.emit(report, of=fit)
