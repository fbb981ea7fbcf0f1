"""Typed results: Attention variants or models side by side (`llmcalc compare`). Counts are ints."""

from typing import ClassVar

from llmcalc.reports.base import Report


class CompareRow(Report):
    """One model (or attention variant) on the workload. Bytes and counts are ints; `ratios` holds
    each numeric field divided by the reference row's (MHA, or the first model)."""

    name: str
    model: str
    attention: str
    ffn: str
    layers: str
    attention_params: int
    total_params: int
    active_params: int
    kv_formula: str
    """KV elements per token, all layers, as DeepSeek-V2's Table 1 writes them, with numbers (a recurrent
    layer's: its state per sequence); a hybrid's per mixer, joined by +."""
    kv_elements_per_token: int
    """Elements the cache grows by per token, all layers that cache tokens (a recurrent layer's state does not
    grow: state_bytes_per_sequence)."""
    kv_bytes_per_token: int
    """Bytes the cache grows by per token (as `llmcalc kv` bytes_per_token)."""
    state_bytes_per_sequence: int = 0
    """Bytes each sequence holds whatever its length: the recurrent layers' states (Mamba-2, Gated DeltaNet; as
    `llmcalc kv` state_bytes_per_sequence); 0 for attention."""
    kv_cache_bytes: int
    prefill_flops: int
    decode_flops: int
    decode_bytes: int
    """Bytes one decode step moves: active weights read, activations, the KV cache read and written."""
    decode_flops_per_context: int = 0
    """FLOPs one decode step (the batch) adds per token of context at seq: decode(seq + 1) − decode(seq); 0 for
    a recurrent layer, whose step costs the same at any context, and past a sliding window."""
    decode_bytes_per_context: int = 0
    """Bytes one decode step (the batch) adds per token of context at seq (the KV read per cached token)."""
    memory_bytes: int
    """Inference memory: weights + KV cache + prefill activation peak."""
    ttft_s: float | None = None
    tpot_s: float | None = None
    tokens_per_s: float | None = None
    fits: bool | None = None
    ratios: dict[str, float]


class CompareReport(Report):
    """`llmcalc compare`: attention variants of one model (mode attention) or several models."""

    printed_by: ClassVar[str] = "compare"

    mode: str
    base: str | None
    reference: str
    batch: int
    seq: int
    gen: int
    weights_dtype: str
    kv_dtype: str
    gpu: str | None
    rule: str
    conventions: dict[str, str]
    rows: list[CompareRow]
    formula: str
    notes: list[str]
