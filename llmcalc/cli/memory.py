"""The `llmcalc memory` command: inference or training memory."""

from __future__ import annotations

from typing import Annotated, Literal, Optional

from llmcalc.cli import groups
from llmcalc.cli.app import command
from llmcalc.cli.options import (
    ADVANCED,
    TRAINING,
    EncoderSeqOpt,
    GroupOpt,
    KVDtypeOpt,
    ZeroOpt,
    _count_opt,
    _opt,
)

LAYOUT = "Training layout"


class TrainingLayout(groups.Group):
    """memory's layout: the parallel degrees a training step's memory per GPU depends on, each its own option
    (no --gpus)."""

    dp: Annotated[int, _count_opt("--dp", help="Data-parallel GPUs.", panel=LAYOUT)] = 1
    tp: Annotated[int, _count_opt("--tp", help="Tensor-parallel GPUs.", panel=LAYOUT)] = 1
    pp: Annotated[int, _count_opt("--pp", help="Pipeline stages (1F1B).", panel=LAYOUT)] = 1
    ep: Annotated[int, _count_opt("--ep", help="Expert-parallel GPUs.", panel=LAYOUT)] = 1
    cp: Annotated[int, _count_opt("--cp", help="Context-parallel GPUs.", panel=LAYOUT)] = 1
    sp: Annotated[bool, _opt("--sp/--no-sp", help="Sequence parallelism over --tp.", panel=LAYOUT)] = False
    vpp: Annotated[int, _count_opt("--vpp", help="Virtual stages per pipeline GPU (interleaved).",
                                   panel=ADVANCED)] = 1
    first_stage_layers: Annotated[Optional[int], _count_opt(
        "--first-stage-layers", help="First pipeline stage's layers.", panel=ADVANCED)] = None
    last_stage_layers: Annotated[Optional[int], _count_opt(
        "--last-stage-layers", help="Last pipeline stage's layers.", panel=ADVANCED)] = None
    embedding_in_split: Annotated[bool, _opt(
        "--embedding-in-split", help="Embedding as a split layer.", panel=ADVANCED)] = False
    loss_in_split: Annotated[bool, _opt(
        "--loss-in-split", help="Loss as a layer in the split.", panel=ADVANCED)] = False
    pp_layout: Annotated[Optional[str], _opt(
        "--pp-layout", help="Megatron pipeline layout string.",
        panel=ADVANCED, metavar="LAYOUT")] = None


@command(rank=40)
def memory(
    *,
    model: groups.Model,
    batch: Annotated[int, _count_opt("--batch", "-b", help="Sequences (training: the global batch).")] = 1,
    shape: groups.Batch,
    encoder_seq: EncoderSeqOpt = None,
    weights: groups.Weights,
    kv_dtype: KVDtypeOpt = "bf16",
    group_size: GroupOpt = None,
    flash: Annotated[bool, _opt("--flash/--no-flash", help="Flash attention: no S×S scores.",
                                panel=ADVANCED)] = True,
    train: Annotated[bool, _opt("--train/--inference", help="A training step instead of inference.",
                                panel=TRAINING)] = False,
    optimizer: Annotated[Optional[Literal["adamw", "adamw-8bit", "sgd"]], _opt(
        "--optimizer", help="adamw (default), adamw-8bit or sgd.", panel=TRAINING,
        metavar="NAME")] = None,
    recompute: Annotated[Optional[Literal["none", "selective", "full"]], _opt(
        "--recompute", help="Recompute: none (default), selective or full.",
        panel=TRAINING, metavar="MODE")] = None,
    zero: ZeroOpt = 0,
    micro_batch: Annotated[Optional[int], _count_opt(
        "--micro-batch", help="Sequences per GPU at a time (default: batch / dp).", panel=TRAINING)] = None,
    lora: groups.Lora,
    qlora: Annotated[bool, _opt("--qlora", help="With --lora: a 4-bit nf4-dq base.", panel=TRAINING)] = False,
    layout: TrainingLayout,
    dropout: Annotated[bool, _opt("--dropout/--no-dropout", help="Keep dropout masks (1 byte each).",
                                  panel=ADVANCED)] = False,
    fusion: Annotated[Literal["fused", "eager"], _opt(
        "--fusion", help="Training's element-wise passes: fused or eager.", panel=ADVANCED,
        metavar="MODE")] = "fused",
    grad_dtype: Annotated[Optional[Literal["fp32", "bf16", "fp16"]], _opt(
        "--grad-dtype", help="Gradients' type (default: the weights').", panel=ADVANCED, metavar="DTYPE")] = None,
    prefill_chunk: Annotated[Optional[int], _count_opt(
        "--prefill-chunk", help="Inference: N-token prefill chunks (default: one).",
        panel=ADVANCED)] = None,
    image: groups.Images,
    out: groups.Output,
) -> None:
    """Weights, KV cache, activations and training states (docs/commands/memory.md)."""
    from llmcalc import api

    report = api.memory(model.ref(), **shape.values(), **weights.values(), **layout.values(), **lora.values(),
                        **image.values(), encoder_seq=encoder_seq, kv_dtype=kv_dtype, group_size=group_size,
                        train=train, optimizer=optimizer, recompute=recompute, flash=flash, zero=zero, dropout=dropout,
                        grad_dtype=grad_dtype, micro_batch=micro_batch, qlora=qlora, fusion=fusion,
                        prefill_chunk=prefill_chunk)
    out.emit(report, of=memory)
