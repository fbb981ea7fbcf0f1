"""Typed results: latency per phase and op under a time model (`llmcalc latency`). Counts are ints."""

from typing import ClassVar

from llmcalc.reports.base import Placement, Report


class OpRow(Report):
    """One operation of one phase on one GPU (a tensor-parallel rank, summed over the layers of
    every pipeline stage): work, traffic, and its time with each term."""

    phase: str
    op: str
    flops: int
    bytes: int
    intensity: float | None
    """FLOPs per byte moved; None for communication."""
    bound: str
    """compute, memory, or interconnect: whichever term sets the time."""
    compute_s: float
    """FLOPs / (peak at the op's dtype · efficiency)."""
    memory_s: float
    """Bytes / (bandwidth · memory efficiency)."""
    comm_s: float
    """Bytes / (one-way link · comm efficiency), for communication."""
    overhead_s: float
    """Fixed costs: the op's kernels (or collective calls) × their cost in the time model; 0 in the roofline."""
    time_s: float
    """max(compute_s, memory_s) + overlap · min(compute_s, memory_s) + comm_s + overhead_s."""


class PhaseRow(Report):
    """A phase on one GPU: prefill, the first decode step, the last decode step."""

    phase: str
    context: int
    """Tokens in the cache before the phase (0 for prefill)."""
    new_tokens: int
    """Tokens processed in the phase, whole replica batch."""
    flops: int
    bytes: int
    intensity: float
    bound: str
    """compute or memory, whichever its ops' larger sum is; host where, without CUDA graphs, launching its kernels
    takes the host longer than the GPU's work."""
    compute_s: float
    memory_s: float
    comm_s: float
    overhead_s: float
    """Fixed costs of its ops, the host's launches beyond the GPU's work (without CUDA graphs) and the step's host
    cost; 0 in the roofline."""
    time_s: float


class LatencyReport(Placement):
    """Latency of B sequences: prefill S tokens, then generate G tokens, under a time model.

    Each op takes max(FLOPs / (peak · compute_efficiency), bytes / (bandwidth · memory_efficiency)), plus, in a
    calibrated model, the part of the smaller term it does not overlap and its kernels' fixed cost; a phase is the
    sum of its ops, its communication (not overlapped) and the step's host cost. ttft_s: the prefill
    (it emits the first token). tpot_s: the first decode step (context S); tpot_end_s: the last
    (context S+G−2). The G−1 decode steps sum to decode_s; total_s = ttft_s + decode_s.
    tokens_per_s: generated tokens of all replicas / total_s; tokens_per_s_per_seq: G / total_s.
    """

    printed_by: ClassVar[str] = "latency"

    batch: int
    seq: int
    gen: int
    compute_dtype: str
    attention_dtype: str
    """The dtype the attention core computes in (bf16 under fp8 matmuls unless set)."""
    weights_dtype: str
    kv_dtype: str
    time_model: str
    """roofline (the physical bound: no fixed costs, perfect overlap) or calibrated (a GPU's profile)."""
    peak_flops: float
    bandwidth_bytes_per_s: float
    ridge_point: float
    effective_ridge_point: float
    compute_efficiency: float
    memory_efficiency: float
    comm_efficiency: float
    ttft_s: float
    image_s: float | None = None
    """A vision-language model: seconds to encode one image (tower + projector) on the tensor-parallel group; the
    prefill's ttft_s includes batch / dp × images of them (None: a text-only model)."""
    tpot_s: float
    tpot_end_s: float
    decode_s: float
    total_s: float
    tokens_per_s: float
    tokens_per_s_per_seq: float
    decode_tokens_per_s: float
    """Steady decode throughput at the first step: batch / tpot_s (all replicas)."""
    ttft_s_range: list[float] | None = None
    """With --interval: [low, high], the range a measured figure fell in on published runs (docs/intervals.md);
    None without it, or where no band exists."""
    tpot_s_range: list[float] | None = None
    tokens_per_s_range: list[float] | None = None
    experts_hit_per_step: float | None
    """Expected distinct routed experts one MoE layer reads per decode step, E·(1 − (1 − k/E)^T)."""
    busiest_rank: float | None = None
    """Expert parallelism: the busiest rank's routed tokens over the mean rank's, which the routed experts' FLOPs
    and the all-to-all's bytes are timed at (docs/moe.md#expert-parallel-load; the most of any MoE layer group);
    None without expert parallelism, 1.0 under uniform routing or the roofline."""
    expert_skew: float | None = None
    """Expert parallelism: the traffic's skew it was computed at (the workload's expert_skew); None without it."""
    weights_bytes_per_gpu: int
    kv_bytes_per_gpu: int
    fits: bool
    phases: list[PhaseRow]
    ops: list[OpRow]
    formula: str
    notes: list[str]
