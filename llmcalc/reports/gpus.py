"""Typed results: The GPU presets (`llmcalc gpus`). Counts are ints."""

from typing import ClassVar

from llmcalc.reports.base import Report


class GPUFigures(Report):
    """A GPU preset's figures: bytes, bytes/s; the interconnect both directions together."""

    name: str
    description: str
    memory_bytes: int
    bandwidth_bytes_per_s: float
    ridge_point: float
    """bf16 FLOPs per byte at which a kernel turns from memory- to compute-bound: peak / bandwidth."""
    interconnect: str
    interconnect_bytes_per_s: float
    source: str
    price_per_hour: float | None
    """USD per GPU per hour, on-demand cloud rental, from the preset (its comments name the provider and the date);
    None where no public price is known."""


class GPURow(GPUFigures):
    """One GPU preset in `llmcalc gpus`: dense peaks in FLOP/s."""

    printed_by: ClassVar[str] = "gpus"
    printed_as_list: ClassVar[bool] = True

    bf16_flops: float
    fp8_flops: float | None


class GPUReport(GPUFigures):
    """`llmcalc gpus NAME`: one GPU preset in full; peaks are dense (no sparsity), int8 in ops/s."""

    printed_by: ClassVar[str] = "gpus"

    peak_flops: dict[str, float | None]
    """Dense peak FLOP/s per matmul dtype; None where the GPU has no such unit."""
    architecture: str | None
    """Which published kernel figures apply to it (ampere, ada, hopper, blackwell, cdna3); None: unknown."""
    gpus_per_node: int | None
    """GPUs the interconnect joins; None: unknown, every collective crosses the interconnect."""
    interconnect_latency_s: float | None
    """Seconds a small collective over the interconnect takes end to end; None: unknown (0)."""
    network_bytes_per_s: float | None
    """Bytes/s per GPU between nodes, both directions together; None: unknown (collectives beyond a node are costed
    on the interconnect)."""
    network_latency_s: float | None
    """Seconds a small collective spanning nodes takes end to end; None: unknown (0)."""
    notes: str
    spec: dict
    """Every field of the GPU as a GPU file writes it (presets/gpus/NAME.yaml): what `--gpu FILE.yaml` loads."""
