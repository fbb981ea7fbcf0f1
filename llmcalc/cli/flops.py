"""The `llmcalc flops` command: FLOPs of prefill, decode and training."""

from __future__ import annotations

from typing import Annotated

from llmcalc.cli import groups
from llmcalc.cli.app import command
from llmcalc.cli.options import (
    COUNTING,
    AttentionKernelOpt,
    AttentionOpt,
    EncoderSeqOpt,
    LogitsOpt,
    MLADecodeOpt,
    _count_opt,
    _opt,
)


@command(rank=30)
def flops(
    *,
    model: groups.Model,
    shape: groups.Batch,
    encoder_seq: EncoderSeqOpt = None,
    gen: Annotated[int, _count_opt("--gen", "-g", help="Tokens to generate after the prompt.")] = 1,
    image: groups.Images,
    attention: AttentionOpt = "causal",
    logits: LogitsOpt = "last",
    mla_decode: MLADecodeOpt = "absorbed",
    recomputation: groups.Recompute,
    attention_kernel: AttentionKernelOpt = "flash",
    mtp: Annotated[bool, _opt("--mtp/--no-mtp", help="Include DeepSeek's MTP module.", panel=COUNTING)] = False,
    elementwise: Annotated[bool, _opt(
        "--elementwise/--no-elementwise", help="Add element-wise FLOPs (norms, softmax, …).", panel=COUNTING)] = False,
    embedding_matmul: Annotated[bool, _opt(
        "--embedding-matmul/--no-embedding-matmul", help="Count the embedding as a matmul, 2·V·d per token.",
        panel=COUNTING)] = False,
    lora: groups.Lora,
    out: groups.Output,
) -> None:
    """Model and hardware FLOPs of prefill, one decode step, GEN decode steps and one training step
    (docs/commands/flops.md)."""
    from llmcalc import api

    report = api.flops(model.ref(), **shape.values(), **recomputation.values(), **lora.values(), **image.values(),
                       encoder_seq=encoder_seq, gen=gen, attention=attention, logits=logits, mla_decode=mla_decode,
                       attention_kernel=attention_kernel, mtp=mtp, elementwise=elementwise,
                       embedding_matmul=embedding_matmul)
    out.emit(report, of=flops)
