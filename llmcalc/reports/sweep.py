"""Typed results: Figures over a (batch, seq) grid (`llmcalc sweep`). Counts are ints."""

from typing import ClassVar

from llmcalc.reports.base import Report


class SweepRow(Report):
    """One (model, batch, seq) point of a sweep. memory_bytes = weights + KV + activations (inference,
    as `llmcalc memory`); FLOPs as `llmcalc flops`; ttft_s, tpot_s as `llmcalc latency` (None when the
    weights do not fit the GPUs, or no --gpu is given); tokens_per_s = batch / tpot_s."""

    model: str
    batch: int
    seq: int
    kv_bytes: int
    weights_bytes: int
    activation_bytes: int
    memory_bytes: int
    prefill_flops: int
    decode_flops: int
    ttft_s: float | None
    tpot_s: float | None
    tokens_per_s: float | None
    fits: bool | None
    """Per GPU, as `llmcalc fit`; None without --gpu."""


class SweepGrid(Report):
    """The axes of a sweep: every batch × every seq."""

    batch: list[int]
    seq: list[int]


class SweepReport(Report):
    """`llmcalc sweep`: each model over the grid, rows batch-major per model."""

    printed_by: ClassVar[str] = "sweep"

    models: list[str]
    gpu: str | None
    """The GPU of the time and fit columns; None when no --gpu is given."""
    gpus: int
    usable_bytes: int | None
    """One GPU's usable memory, capacity · (1 − reserve), as `llmcalc fit` counts it; None without --gpu."""
    usable_bytes_all: int | None
    """usable_bytes × gpus: what the layout's GPUs hold together, the capacity line `--plot` draws under the
    points' memory_bytes; None without --gpu."""
    grid: SweepGrid
    rows: list[SweepRow]
    formula: str
    notes: list[str]
