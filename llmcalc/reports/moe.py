"""Typed results: MoE routing, capacity and dropped tokens (`llmcalc moe`). Counts are ints."""

from typing import ClassVar

from llmcalc.reports.base import Report


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


class MoEParallelRow(Report):
    """Expert parallelism over `ep` ranks at the report's expert skew (docs/moe.md#expert-parallel-load)."""

    ep: int
    experts_per_rank: int
    busiest_rank: float
    """The busiest rank's routed tokens over the mean rank's: what each MoE layer waits for."""


class MoEReport(Report):
    """`llmcalc moe`: expert capacity, expected dropped tokens, router and expert FLOPs of a MoE model.

    capacity_factor: the --capacity-factor option, else the spec's, else None (dropless);
    capacity_source says which. expert_weights: W_e, the matmul weights of one routed expert.
    """

    printed_by: ClassVar[str] = "moe"

    model: str
    batch: int
    seq: int
    capacity_factor: float | None
    capacity_source: str
    d_model: int
    d_ff: int
    expert_weights: int
    rows: list[MoEPhaseRow]
    expert_skew: float
    """The traffic's skew of expert popularity the expert-parallel rows are at (a coefficient of variation)."""
    expert_parallel: list[MoEParallelRow]
    """Each power-of-two ep that divides the experts, up to 256: the busiest rank at expert_skew."""
    formula: str
    notes: list[str]
