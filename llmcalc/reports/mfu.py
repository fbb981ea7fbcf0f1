"""Typed results: model and hardware FLOPs utilisation of a measured training run (`llmcalc mfu`)."""

from typing import ClassVar

from llmcalc.reports.base import Report


class MfuReport(Report):
    """MFU and HFU of a training run whose throughput was measured (Chowdhery et al. 2022, PaLM, Appendix B):
    achieved FLOP/s over the peak of every GPU, with the model's FLOPs (MFU) or the FLOPs that run (HFU)."""

    printed_by: ClassVar[str] = "mfu"

    model: str
    batch: int
    seq: int
    gpus: int
    gpu: str | None
    """The GPU preset giving the peak; None when the peak was given as a number."""
    compute_dtype: str
    peak_flops_per_gpu: float
    """Dense peak FLOP/s of one GPU at the compute dtype: the denominator, times gpus."""
    tokens_per_s: float
    """Training tokens per second, all GPUs together: measured, or batch · seq / step_s."""
    step_s: float
    """Seconds per step of batch · seq tokens: measured, or batch · seq / tokens_per_s."""
    attention: str
    """The attention-core convention of both FLOPs figures: causal, causal-half or dense."""
    attention_kernel: str
    """The attention kernel of the hardware FLOPs: flash (recomputes the scores in its backward) or eager."""
    recompute: str
    """The recompute policy of the hardware FLOPs: none, selective, full, or the ops comma-separated."""
    model_flops_per_token: int
    """Model FLOPs of one training token (forward + backward, nothing redone; `llmcalc flops`' train_flops /
    (batch · seq), rounded down)."""
    hardware_flops_per_token: int
    """Hardware FLOPs of one training token (what runs; train_hardware_flops / (batch · seq), rounded down)."""
    model_flops_per_step: int
    hardware_flops_per_step: int
    model_tflops_per_gpu: float
    """Achieved model TFLOP/s per GPU: tokens_per_s · model FLOPs per token / gpus / 10^12."""
    mfu: float
    """Model FLOPs utilisation: tokens_per_s · model FLOPs per token / (gpus · peak_flops_per_gpu)."""
    hfu: float
    """Hardware FLOPs utilisation: tokens_per_s · hardware FLOPs per token / (gpus · peak_flops_per_gpu)."""
    convention: str
    """The counting convention of the FLOPs, in words."""
    formula: str
    notes: list[str]
