"""Typed results of the views that build on the estimators: compare, explain and sweep."""

from __future__ import annotations

from .report import Report


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
    """KV elements per token, all layers, as DeepSeek-V2's Table 1 writes them, with numbers."""
    kv_elements_per_token: int
    kv_bytes_per_token: int
    kv_cache_bytes: int
    prefill_flops: int
    decode_flops: int
    decode_bytes: int
    """Bytes one decode step moves: active weights read, activations, the KV cache read and written."""
    memory_bytes: int
    """Inference memory: weights + KV cache + prefill activation peak."""
    ttft_s: float | None = None
    tpot_s: float | None = None
    tokens_per_s: float | None = None
    fits: bool | None = None
    ratios: dict[str, float]


class CompareReport(Report):
    """`llmcalc compare`: attention variants of one model (mode attention) or several models."""

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


class ExplainStep(Report):
    """One figure worked out: `value` = `formula` evaluated over `symbols` (the text `substituted`).

    component: the plain command's path (`attention/q`, `kv/full`, `prefill/attention/core_scores`).
    value: an int count (params, bytes, FLOPs) or seconds (float, unit "s").
    """

    component: str
    formula: str
    symbols: dict[str, int | float]
    substituted: str
    value: int | float
    unit: str


class ExplainTotal(ExplainStep):
    """A total over steps, with the plain command's own figure for it: `source` names the command
    and field (`llmcalc kv: total_bytes`); matches: exact for counts, within 1e-9 for seconds."""

    check: int | float
    source: str
    matches: bool


class ExplainReport(Report):
    """`llmcalc explain TOPIC`: the steps behind a command's figures and its totals checked against it.

    total, check and unit: the headline total (params total, kv and memory total_bytes, flops
    prefill_flops, latency total_s); matches: every total agrees with its plain figure.
    conventions: the counting conventions and settings used; legend: each symbol's meaning.
    """

    topic: str
    model: str
    batch: int | None
    seq: int | None
    gen: int | None
    conventions: dict[str, str]
    steps: list[ExplainStep]
    totals: list[ExplainTotal]
    total: int | float
    check: int | float
    unit: str
    matches: bool
    legend: dict[str, str]
    notes: list[str]


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

    models: list[str]
    gpu: str | None
    """The GPU of the time and fit columns; None when no --gpu is given."""
    gpus: int
    grid: SweepGrid
    rows: list[SweepRow]
    formula: str
    notes: list[str]


class MoEPhaseRow(Report):
    """The MoE layers in one phase: prefill routes T = B·S tokens per layer, decode T = B (one step).

    Routing assumption: each token picks top_k distinct experts uniformly at random, independently
    across tokens, so one expert's load X ~ Binomial(T, k/E). Per-layer figures unless named `_all_layers`
    or FLOPs (FLOPs are summed over the MoE layers, as `llmcalc flops` reports them).
    """

    phase: str
    layers: int
    """MoE layers in the model (dense layers of an MoE model are not counted)."""
    experts: int
    top_k: int
    shared_experts: int
    tokens: int
    """T: tokens routed per MoE layer in this phase."""
    assignments: int
    """T · top_k (token, expert) assignments per MoE layer."""
    capacity: int | None
    """C = ceil(capacity_factor · T · top_k / experts) per expert; None: dropless."""
    expected_tokens_per_expert: float
    """E[X] = T · top_k / experts."""
    load_std: float
    """Standard deviation of one expert's load, sqrt(T · p · (1 − p)), p = top_k / experts."""
    expected_busiest_load: float
    """E[max over experts of X] (loads taken as independent): what a dropless layer waits for."""
    busiest_to_mean: float
    """expected_busiest_load / expected_tokens_per_expert: the load imbalance."""
    expected_dropped: float
    """Expected dropped assignments per MoE layer, experts · E[max(0, X − C)]; 0 when dropless."""
    dropped_fraction: float
    """expected_dropped / assignments."""
    expected_dropped_all_layers: float
    padding_fraction: float | None
    """Share of the E · C padded rows that hold no assignment, 1 − (assignments − dropped) / (E · C)."""
    exact: bool
    """True: the binomial sums are exact; False: the normal approximation (very large T)."""
    router_flops_per_layer: int
    """2 · T · d_model · experts."""
    router_flops: int
    """All MoE layers: equals `llmcalc flops`' ffn/router row for this phase."""
    expert_flops_dropless: int
    """2 · T · top_k · W_e over the MoE layers: `llmcalc flops`' ffn/experts row."""
    expert_flops_padded: int | None
    """2 · experts · C · W_e over the MoE layers: what a capacity-padded implementation computes."""
    expert_flops_processed: float
    """2 · (assignments − expected_dropped) · W_e over the MoE layers: the useful part of the padded work."""


class MoEReport(Report):
    """`llmcalc moe`: expert capacity, expected dropped tokens, router and expert FLOPs of a MoE model.

    capacity_factor: the --capacity-factor option, else the spec's, else None (dropless);
    capacity_source says which. expert_weights: W_e, the matmul weights of one routed expert.
    """

    model: str
    batch: int
    seq: int
    capacity_factor: float | None
    capacity_source: str
    d_model: int
    d_ff: int
    expert_weights: int
    rows: list[MoEPhaseRow]
    formula: str
    notes: list[str]
