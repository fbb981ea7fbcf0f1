"""The `llmcalc flops` command: FLOPs of prefill, decode and training."""

from __future__ import annotations

from typing import Annotated

from llmcalc.cli.app import app
from llmcalc.cli.options import (
    CONVENTIONS,
    AttentionKernelOpt,
    AttentionOpt,
    BatchOpt,
    ConfigOpt,
    FormatOpt,
    HFOpt,
    LogitsOpt,
    LoraOpt,
    LoraTargetsOpt,
    MLADecodeOpt,
    PresetOpt,
    RecomputeOpsOpt,
    RecomputeOpt,
    SeqOpt,
    UnitsOpt,
    _count_opt,
    _opt,
    emit,
    load_model,
    lora_fields,
    parse_recompute_ops,
)


@app.command()
def flops(
    preset: PresetOpt = None,
    config: ConfigOpt = None,
    hf_config: HFOpt = None,
    batch: BatchOpt = 1,
    seq: SeqOpt = 4096,
    gen: Annotated[int, _count_opt("--gen", "-g", help="Tokens to generate after the prompt.")] = 1,
    attention: AttentionOpt = "causal",
    logits: LogitsOpt = "last",
    mla_decode: MLADecodeOpt = "absorbed",
    recompute: RecomputeOpt = "none",
    recompute_ops: RecomputeOpsOpt = None,
    attention_kernel: AttentionKernelOpt = "flash",
    mtp: Annotated[bool, _opt("--mtp/--no-mtp", help="Include DeepSeek's MTP module.", panel=CONVENTIONS)] = False,
    lora_rank: LoraOpt = None,
    lora_targets: LoraTargetsOpt = None,
    format: FormatOpt = "table",
    units: UnitsOpt = "both",
) -> None:
    """FLOPs of prefill, one decode step, GEN decode steps and one training step (model FLOPs, and the hardware
    FLOPs of what runs: the attention kernel's backward and the recomputed ops)."""
    from llmcalc.costs.flops import flops as count_flops
    from llmcalc.workload import Workload

    w = Workload(batch=batch, seq=seq, gen=gen, attention_core=attention, logits=logits, mla_decode=mla_decode,
                 recompute=recompute, recompute_ops=parse_recompute_ops(recompute_ops),
                 attention_kernel=attention_kernel, mtp=mtp, **lora_fields(lora_rank, lora_targets))
    emit(count_flops(load_model(preset, config, hf_config), w), format, units, of=flops)
