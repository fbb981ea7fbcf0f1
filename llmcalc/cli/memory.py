"""The `llmcalc memory` command: inference or training memory."""

from __future__ import annotations

from typing import Annotated, Literal, Optional

from llmcalc.cli.app import app
from llmcalc.cli.options import (
    CONVENTIONS,
    GPUS,
    TRAINING,
    ConfigOpt,
    EncoderSeqOpt,
    FormatOpt,
    GroupOpt,
    HFOpt,
    ImageSizeOpt,
    ImagesOpt,
    KVDtypeOpt,
    LoraOpt,
    LoraTargetsOpt,
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
    image_fields,
    load_model,
    lora_fields,
    weight_formats,
)
from llmcalc.errors import UserError


@app.command()
def memory(
    preset: PresetOpt = None,
    config: ConfigOpt = None,
    hf_config: HFOpt = None,
    batch: Annotated[int, _count_opt("--batch", "-b", help="Sequences in the batch (training: the global batch, "
                                     "over --dp GPUs).")] = 1,
    seq: SeqOpt = 4096,
    encoder_seq: EncoderSeqOpt = None,
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
    lora_rank: LoraOpt = None,
    lora_targets: LoraTargetsOpt = None,
    qlora: Annotated[bool, _opt("--qlora", help="With --lora: QLoRA, the base in NF4 with double quantisation "
                                "(nf4-dq), embedding, head and norms bf16, computing in bf16.",
                                panel=TRAINING)] = False,
    tp: Annotated[int, _count_opt("--tp", help="Training: tensor-parallel GPUs.", panel=GPUS)] = 1,
    pp: Annotated[int, _count_opt("--pp", help="Training: pipeline stages (1F1B).", panel=GPUS)] = 1,
    ep: Annotated[int, _count_opt("--ep", help="Training: expert-parallel GPUs (whole experts over ep).",
                                  panel=GPUS)] = 1,
    cp: Annotated[int, _count_opt("--cp", help="Training: context-parallel GPUs (seq / cp tokens each).",
                                  panel=GPUS)] = 1,
    sp: Annotated[bool, _opt("--sp/--no-sp", help="Training: sequence parallelism over the --tp GPUs.",
                             panel=GPUS)] = False,
    vpp: Annotated[int, _count_opt("--vpp", help="Training: virtual stages per pipeline GPU (interleaved "
                                   "schedule; 1: 1F1B).", panel=GPUS)] = 1,
    dropout: Annotated[bool, _opt("--dropout/--no-dropout", help="Training: keep dropout masks (1 byte each).",
                                  panel=TRAINING)] = False,
    grad_dtype: Annotated[Optional[Literal["fp32", "bf16", "fp16"]], _opt(
        "--grad-dtype", help="Training: gradients' type (default: the weights'; fp32: Megatron's main gradients).",
        panel=TRAINING, metavar="DTYPE")] = None,
    prefill_chunk: Annotated[Optional[int], _count_opt(
        "--prefill-chunk", help="Inference: size the activations of a server that prefills N tokens at a time "
        "(vLLM's max_num_batched_tokens; fit's default 8192) instead of one prefill of the whole batch.",
        panel=CONVENTIONS)] = None,
    images: ImagesOpt = 0,
    image_size: ImageSizeOpt = None,
    format: FormatOpt = "table",
    units: UnitsOpt = "both",
) -> None:
    """Memory: weights, KV cache, activations (and gradients, optimizer states with --train: on the most-loaded GPU
    of a --tp/--pp/--cp/--ep/--dp layout)."""
    from llmcalc.costs.memory import memory as estimate
    from llmcalc.workload import Layout, Workload

    if qlora:
        if lora_rank is None:
            raise UserError("--qlora: QLoRA trains LoRA adapters on the 4-bit base; add --lora RANK")
        if weights_format or weights_dtype:
            raise UserError("--qlora: it sets the base format itself (nf4-dq, embedding and head bf16); drop "
                            "--weights-format and --weights-dtype, or drop --qlora")
        from llmcalc.model.lora import QLORA_FORMATS

        weights_format = QLORA_FORMATS
    w = Workload(batch=batch, seq=seq, encoder_seq=encoder_seq, weights_dtype=weights_dtype,
                 weights_format=weight_formats(weights_format),
                 kv_dtype=kv_dtype, group_size=group_size,
                 train=train, optimizer=optimizer, recompute=recompute, flash=flash, zero=zero, dropout=dropout,
                 grad_dtype=grad_dtype, micro_batch=micro_batch,
                 layout=Layout(tp=tp, pp=pp, dp=dp, ep=ep, cp=cp, sp=sp, vpp=vpp),
                 **lora_fields(lora_rank, lora_targets), **image_fields(images, image_size),
                 **({"prefill_chunk": prefill_chunk} if prefill_chunk else {}))
    if prefill_chunk and train:
        raise UserError("--prefill-chunk sizes a server's prefill; a training step keeps every layer's activations: "
                        "drop --prefill-chunk or --train")
    emit(estimate(load_model(preset, config, hf_config), w, chunked=prefill_chunk is not None), format, units,
         of=memory)
