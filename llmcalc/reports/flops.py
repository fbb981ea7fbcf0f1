"""Typed results: FLOPs of prefill, decode and training (`llmcalc flops`). Counts are ints."""

from typing import ClassVar

from llmcalc.reports.base import Report
from llmcalc.reports.vision import VisionCost


class FlopsRow(Report):
    """One component's FLOPs in each phase (all layers, whole batch)."""

    component: str
    prefill: int
    decode: int
    generate: int
    train: int
    """Model FLOPs of a training step: forward + backward, nothing redone."""
    train_hardware: int
    """Hardware FLOPs of a training step: what runs, the attention kernel's backward and the recomputed forward
    included."""


class PositionFlops(Report):
    """Element-wise FLOPs of the position encoding, not in the matmul totals (prefill_flops, …).

    RoPE: 3 FLOPs per rotated element of q and k, (H + H_kv)·d_rot per token per layer (MLA: (H + 1)·d_r);
    ALiBi: H adds per (query, key) pair per layer (slope·distance precomputed); learned and sinusoidal:
    d adds per token, once; none: 0. train: forward + backward (RoPE's backward rotates the gradient,
    one more pass; an addition's gradient passes through free), all positions, recompute not counted.
    """

    kind: str
    per_token_per_layer: int
    per_pair_per_layer: int
    per_token: int
    """Per new token, once (not per layer): learned and sinusoidal positions."""
    prefill: int
    decode: int
    generate: int
    train: int
    formula: str


class FlopsReport(Report):
    """FLOPs (a multiply-add counts 2) of prefill, one decode step, G decode steps and a training step.

    prefill: B sequences of S prompt tokens. decode: one new token per sequence with S cached (it
    attends to S+1 keys, or the window). generate: G decode steps at contexts S … S+G−1 (prefill not
    included). train: forward + backward (2× forward) on B·S tokens with all logits, the model FLOPs;
    train_hardware: what runs, the attention kernel's backward (flash recomputes the scores) and the recomputed
    forward work included.
    """

    printed_by: ClassVar[str] = "flops"

    model: str
    batch: int
    seq: int
    gen: int
    attention: str
    logits: str
    mla_decode: str
    recompute: str
    """The recompute policy of train_hardware_flops: none, selective, full, or the custom ops comma-separated."""
    attention_kernel: str = "flash"
    """The attention kernel of train_hardware_flops: flash (the scores recomputed in the backward) or eager."""
    mtp: bool
    prefill_flops: int
    """B sequences of S prompt tokens, whole model."""
    decode_flops: int
    """One decode step: one new token per sequence with S cached."""
    generate_flops: int
    """G decode steps at contexts S … S+G−1 (prefill excluded)."""
    train_flops: int
    """Model FLOPs of one training step on B·S tokens: forward + backward (MFU's numerator), no recompute."""
    train_hardware_flops: int
    """Hardware FLOPs of the same step (HFU's numerator): as the attention kernel runs its backward, plus the
    forward of the recomputed ops."""
    prefill_flops_per_token: int
    decode_flops_per_token: int
    train_flops_per_token: int
    train_hardware_flops_per_token: int
    breakdown: list[FlopsRow]
    lora_rank: int | None = None
    """LoRA rank of the training step (None: full training); its adapters are the lora/ rows."""
    lora_targets: list[str] = []
    """The LoRA targets adapted (empty without LoRA)."""
    positions: PositionFlops | None = None
    """Position-encoding FLOPs (element-wise), reported apart: not in prefill_flops or the breakdown."""
    vision: VisionCost | None = None
    """A vision-language model: one image through the tower and projector, and the images' share of the prompt
    (not in prefill_flops, the language model's); None for a text-only model."""
    formula: str
    notes: list[str]
