"""The `llmcalc memory` command: inference or training memory."""

from __future__ import annotations

from typing import Annotated, Optional

from llmcalc.cli.app import app
from llmcalc.cli.options import (
    CONVENTIONS,
    TRAINING,
    ConfigOpt,
    FormatOpt,
    GroupOpt,
    HFOpt,
    KVDtypeOpt,
    OptimizerOpt,
    PresetOpt,
    RecomputeOpt,
    SeqOpt,
    UnitsOpt,
    WeightsDtypeOpt,
    WeightsFormatOpt,
    ZeroOpt,
    _count_opt,
    _opt,
    emit,
    load_model,
    weight_formats,
)


@app.command()
def memory(
    preset: PresetOpt = None,
    config: ConfigOpt = None,
    hf_config: HFOpt = None,
    batch: Annotated[int, _count_opt("--batch", "-b", help="Sequences in the batch (training: the global batch, "
                                     "over --dp GPUs).")] = 1,
    seq: SeqOpt = 4096,
    weights_dtype: WeightsDtypeOpt = None,
    weights_format: WeightsFormatOpt = None,
    kv_dtype: KVDtypeOpt = "bf16",
    group_size: GroupOpt = 128,
    flash: Annotated[bool, _opt("--flash/--no-flash", help="Flash attention (no S×S scores).",
                                panel=CONVENTIONS)] = True,
    train: Annotated[bool, _opt("--train/--inference", help="A training step instead of inference.",
                                panel=TRAINING)] = False,
    optimizer: OptimizerOpt = "adamw",
    recompute: RecomputeOpt = "none",
    zero: ZeroOpt = 0,
    dp: Annotated[int, _count_opt("--dp", help="Data-parallel GPUs: each runs batch / dp sequences.",
                                  panel=TRAINING)] = 1,
    micro_batch: Annotated[Optional[int], _count_opt(
        "--micro-batch", help="Sequences one GPU runs at a time (default: batch / dp).", panel=TRAINING)] = None,
    format: FormatOpt = "table",
    units: UnitsOpt = "both",
) -> None:
    """Memory: weights, KV cache, activations (and gradients, optimizer states with --train)."""
    from llmcalc.costs.memory import memory as estimate
    from llmcalc.workload import Layout, Workload

    w = Workload(batch=batch, seq=seq, weights_dtype=weights_dtype, weights_format=weight_formats(weights_format),
                 kv_dtype=kv_dtype, group_size=group_size,
                 train=train, optimizer=optimizer, recompute=recompute, flash=flash, zero=zero,
                 micro_batch=micro_batch, layout=Layout(dp=dp))
    emit(estimate(load_model(preset, config, hf_config), w), format, units, of=memory)
