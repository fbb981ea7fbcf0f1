"""Typed results: Memory of inference or a training step (`llmcalc memory`). Counts are ints."""

from typing import ClassVar

from llmcalc.reports.base import Report


class MemoryRow(Report):
    component: str
    bytes: int
    note: str


class MemoryReport(Report):
    """Memory for inference (weights + KV cache + activations, the whole model) or a training step (+ gradients
    and optimizer states) on the most-loaded GPU of the layout: its pipeline stage's share of the model split
    over tp / ep, ZeRO's shards over dp · cp, and the activations of the micro-batches its stage holds in flight
    (without a pipeline: one micro-batch's)."""

    printed_by: ClassVar[str] = "memory"

    model: str
    mode: str
    batch: int
    """Sequences in all: the global batch (training: over the dp data-parallel GPUs)."""
    seq: int
    dp: int
    """Data-parallel GPUs (training)."""
    per_gpu_batch: int
    """Sequences one GPU runs per step: batch / dp."""
    micro_batch: int
    """Sequences whose activations one GPU holds at once (training: per micro-batch)."""
    weights_bytes: int
    kv_cache_bytes: int
    activation_bytes: int
    gradient_bytes: int
    optimizer_bytes: int
    trainable_params: int = 0
    """Parameters the training step updates: every one (full training), the LoRA adapters' (LoRA), 0 (inference)."""
    adapter_bytes: int = 0
    """LoRA adapter weights, in the dense dtype (0 without LoRA); weights_bytes is then the frozen base alone."""
    lora_rank: int | None = None
    """LoRA rank (None: full training or inference)."""
    lora_targets: list[str] = []
    """The LoRA targets adapted (empty without LoRA)."""
    total_bytes: int
    """Sum of the breakdown rows, bytes (training: of the most-loaded GPU)."""
    dominant: str
    """The largest component."""
    breakdown: list[MemoryRow]
    formula: str
    notes: list[str]
    tp: int = 1
    """Training: tensor-parallel GPUs."""
    pp: int = 1
    """Training: pipeline stages."""
    cp: int = 1
    """Training: context-parallel GPUs (each holds seq / cp tokens of every sequence)."""
    ep: int = 1
    """Training: expert-parallel GPUs."""
    sp: bool = False
    """Training: sequence parallelism (over the tp GPUs)."""
    vpp: int = 1
    """Training: virtual stages per pipeline GPU (1: the 1F1B schedule; more: interleaved)."""
    images: int = 0
    """Images per sequence (a vision-language model); their image tokens are part of seq."""
    vision_activation_bytes: int = 0
    """The vision tower's activation peak over batch × images images encoded together (docs/vision.md#memory);
    activation_bytes is the larger of it and the language model's prefill peak."""
    image_kv_bytes: int = 0
    """Of kv_cache_bytes, what the image tokens hold."""
    grad_dtype: str | None = None
    """Training: the gradients' type."""
    micro_batches: int = 1
    """Training: micro-batches each GPU runs per step, per_gpu_batch / micro_batch."""
    stage: int = 0
    """Training: the pipeline stage (0 = first) of the most-loaded GPU, whose figures these are."""
    stage_layers: int = 0
    """Training: transformer layers that stage holds (all its model chunks)."""
    stage_params: int = 0
    """Training: parameters on that GPU (its layers' shares, its embedding or head), before ZeRO."""
    in_flight: int = 0
    """Training: forward passes of one micro-batch through one of its model chunks whose activations the stage
    holds at its peak (1F1B: micro-batches; interleaved: chunk passes)."""
    activation_bytes_per_layer: int = 0
    """Training: bytes the stage's largest layer keeps for the backward, per micro-batch on that GPU (Korthikanti
    et al. 2022, Table 2, under the recompute mode)."""
    stage_totals: list[int] = []
    """Training: total_bytes of one GPU of each pipeline stage, first to last."""

