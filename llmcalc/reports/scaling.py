"""Typed results: compute-optimal model size and training tokens (`llmcalc scale`). Counts are ints."""

from typing import ClassVar

from llmcalc.reports.base import Report


class ScaleRow(Report):
    """One scaling law's compute-optimal point for the given budget, size or token count, with C = 6·N·D."""

    method: str
    """chinchilla-1, chinchilla-2, chinchilla-3 (Hoffmann et al. 2022, approaches 1-3) or kaplan (Kaplan et al.
    2020)."""
    params: int
    """N: the compute-optimal parameter count (Chinchilla counts every parameter, embeddings included; Kaplan's
    law is for non-embedding parameters)."""
    tokens: int
    """D: the compute-optimal training tokens, C / (6·N)."""
    flops: int
    """C: the training FLOPs, 6·N·D (a multiply-add counted as 2; forward 2·N·D, backward 4·N·D)."""
    tokens_per_param: float
    """D / N."""
    exponent: float
    """a in N_opt ∝ C^a for this law; tokens grow as C^(1 − a)."""
    loss: float
    """Chinchilla's approach-3 fit L(N, D) = E + A/N^α + B/D^β at this row's N and D (nats per token on
    MassiveText; a comparison between rows, not a prediction for other data)."""
    gpu_hours: float | None
    """C / (peak FLOP/s · mfu) / 3600: GPU-hours of training; None without a GPU."""
    days: float | None
    """gpu_hours / gpus / 24: wall-clock days on `gpus` GPUs; None without a GPU."""
    cost_usd: float | None
    """gpu_hours · price per GPU-hour; None without a GPU or a price."""


class ScaleReport(Report):
    """Compute-optimal parameters, tokens and training FLOPs from one of them, under each scaling law asked for,
    and the training time and cost on a GPU at a stated model FLOPs utilisation."""

    printed_by: ClassVar[str] = "scale"

    given: str
    """What was given: flops (a compute budget), params (a model size) or tokens (a token count)."""
    value: int
    """The given budget, size or count."""
    rows: list[ScaleRow]
    gpu: str | None
    gpus: int | None
    """GPUs training together (time = GPU-hours / gpus)."""
    compute_dtype: str | None
    """The matmul type whose dense peak sets the time."""
    peak_flops: float | None
    """The GPU's dense peak FLOP/s at compute_dtype."""
    mfu: float | None
    """Model FLOPs utilisation the time assumes: achieved FLOP/s / peak."""
    mfu_source: str | None
    """Where mfu comes from: given, a calibration profile's dense-matmul efficiency, or the roofline's."""
    price_per_hour: float | None
    """USD per GPU-hour of the cost: given, or the GPU preset's on-demand price."""
    formula: str
    notes: list[str]
