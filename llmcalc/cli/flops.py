"""The `llmcalc flops` command: FLOPs of prefill, decode and training."""

from __future__ import annotations

from typing import Annotated

from llmcalc.cli.app import app
from llmcalc.cli.options import (
    COUNTING,
    AttentionKernelOpt,
    AttentionOpt,
    BatchOpt,
    ConfigOpt,
    EncoderSeqOpt,
    FormatOpt,
    HFOpt,
    ImageSizeOpt,
    ImagesOpt,
    LogitsOpt,
    LoraOpt,
    LoraTargetsOpt,
    MLADecodeOpt,
    PresetOpt,
    RecomputeLayersOpt,
    RecomputeOpsOpt,
    RecomputeOpt,
    SeqOpt,
    UnitsOpt,
    _count_opt,
    _opt,
    emit,
    image_fields,
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
    encoder_seq: EncoderSeqOpt = None,
    gen: Annotated[int, _count_opt("--gen", "-g", help="Tokens to generate after the prompt.")] = 1,
    images: ImagesOpt = 0,
    image_size: ImageSizeOpt = None,
    attention: AttentionOpt = "causal",
    logits: LogitsOpt = "last",
    mla_decode: MLADecodeOpt = "absorbed",
    recompute: RecomputeOpt = "none",
    recompute_ops: RecomputeOpsOpt = None,
    recompute_layers: RecomputeLayersOpt = None,
    attention_kernel: AttentionKernelOpt = "flash",
    mtp: Annotated[bool, _opt("--mtp/--no-mtp", help="Include DeepSeek's MTP module.", panel=COUNTING)] = False,
    elementwise: Annotated[bool, _opt(
        "--elementwise/--no-elementwise", help="Add element-wise FLOPs (norms, softmax, …).", panel=COUNTING)] = False,
    embedding_matmul: Annotated[bool, _opt(
        "--embedding-matmul/--no-embedding-matmul", help="Count the embedding as a matmul, 2·V·d per token.",
        panel=COUNTING)] = False,
    lora_rank: LoraOpt = None,
    lora_targets: LoraTargetsOpt = None,
    format: FormatOpt = "table",
    units: UnitsOpt = "both",
) -> None:
    """Model and hardware FLOPs of prefill, one decode step, GEN decode steps and one training step
    (docs/commands/flops.md)."""
    from llmcalc.costs.flops import flops as count_flops
    from llmcalc.workload import Workload

    w = Workload(batch=batch, seq=seq, encoder_seq=encoder_seq, gen=gen, attention_core=attention,
                 logits=logits, mla_decode=mla_decode,
                 recompute=recompute, recompute_ops=parse_recompute_ops(recompute_ops),
                 recompute_layers=recompute_layers,
                 attention_kernel=attention_kernel, mtp=mtp, elementwise=elementwise, embedding_matmul=embedding_matmul,
                 **lora_fields(lora_rank, lora_targets), **image_fields(images, image_size))
    emit(count_flops(load_model(preset, config, hf_config), w), format, units, of=flops)
