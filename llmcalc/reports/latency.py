"""Typed results: Roofline latency per phase and op (`llmcalc latency`). Counts are ints."""

from llmcalc.reports.base import Placement, Report


class OpRow(Report):
    """One operation of one phase on one GPU (a tensor-parallel rank, summed over the layers of
    every pipeline stage): work, traffic, and its roofline time."""

    phase: str
    op: str
    flops: int
    bytes: int
    intensity: float | None
    """FLOPs per byte moved; None for communication."""
    bound: str
    """compute, memory, or interconnect: whichever term sets the time."""
    time_s: float


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
    compute_s: float
    memory_s: float
    comm_s: float
    time_s: float


class LatencyReport(Placement):
    """Roofline latency of B sequences: prefill S tokens, then generate G tokens.

    Each op takes max(FLOPs / (peak · compute_efficiency), bytes / (bandwidth · memory_efficiency));
    a phase is the sum of its ops and its communication (not overlapped). ttft_s: the prefill
    (it emits the first token). tpot_s: the first decode step (context S); tpot_end_s: the last
    (context S+G−2). The G−1 decode steps sum to decode_s; total_s = ttft_s + decode_s.
    tokens_per_s: generated tokens of all replicas / total_s; tokens_per_s_per_seq: G / total_s.
    """

    batch: int
    seq: int
    gen: int
    compute_dtype: str
    weights_dtype: str
    kv_dtype: str
    peak_flops: float
    bandwidth_bytes_per_s: float
    ridge_point: float
    effective_ridge_point: float
    compute_efficiency: float
    memory_efficiency: float
    comm_efficiency: float
    ttft_s: float
    tpot_s: float
    tpot_end_s: float
    decode_s: float
    total_s: float
    tokens_per_s: float
    tokens_per_s_per_seq: float
    decode_tokens_per_s: float
    """Steady decode throughput at the first step: batch / tpot_s (all replicas)."""
    experts_hit_per_step: float | None
    """Expected distinct routed experts one MoE layer reads per decode step, E·(1 − (1 − k/E)^T)."""
    weights_bytes_per_gpu: int
    kv_bytes_per_gpu: int
    fits: bool
    phases: list[PhaseRow]
    ops: list[OpRow]
    formula: str
    notes: list[str]
