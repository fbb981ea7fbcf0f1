"""Typed results. Estimators return these; renderers only read them. Counts are ints."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Report(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class ParamRow(Report):
    """One component summed over all layers: `params` stored, `active` used by one token."""

    component: str
    params: int
    active: int
    percent: float
    """params as % of the model total (MTP rows: of the main model's total)."""


class LayerTypeRow(Report):
    """Layers sharing one shape, with the parameters of one such layer."""

    layer_type: str
    layers: int
    params_per_layer: int
    active_per_layer: int


class ParamsReport(Report):
    """Parameter counts of a model.

    total: every parameter of the main model (tied matrices once; MTP modules excluded).
    active: parameters one token's forward uses = total − the routed experts it skips
    (the input embedding table included). active_excluding_embedding: active minus the token
    and learned-position tables (Kaplan et al.'s N).
    """

    model: str
    total: int
    active: int
    active_excluding_embedding: int
    embedding: int
    mtp: int
    breakdown: list[ParamRow]
    mtp_breakdown: list[ParamRow]
    layer_types: list[LayerTypeRow]
    formula: str
    notes: list[str]


class PresetRow(Report):
    """One preset in `llmcalc presets`."""

    name: str
    total: int
    active: int
    attention: str
    ffn: str
    source: str | None


class KVLayerRow(Report):
    """KV cache of the layers of one type: per layer and for all of them."""

    layer_type: str
    layers: int
    tokens_cached: int
    """Tokens each sequence keeps in this layer: the context, or window − 1 if smaller."""
    elements_per_token: int
    bytes_per_layer: int
    bytes: int


class KVReport(Report):
    """KV cache for `batch` sequences of `seq` tokens.

    total_bytes = Σ_layer types layers · batch · tokens_cached · elements_per_token · bytes/element,
    tokens_cached = min(seq, window − 1) for a sliding-window layer.
    bytes_per_token: one token of one sequence across all layers, before any window is full.
    """

    model: str
    batch: int
    seq: int
    kv_dtype: str
    total_bytes: int
    bytes_per_token: int
    per_layer: list[KVLayerRow]
    formula: str
    notes: list[str]


class FlopsRow(Report):
    """One component's FLOPs in each phase (all layers, whole batch)."""

    component: str
    prefill: int
    decode: int
    generate: int
    train: int


class FlopsReport(Report):
    """FLOPs (a multiply-add counts 2) of prefill, one decode step, G decode steps and a training step.

    prefill: B sequences of S prompt tokens. decode: one new token per sequence with S cached (it
    attends to S+1 keys, or the window). generate: G decode steps at contexts S … S+G−1 (prefill not
    included). train: forward + backward (2× forward) on B·S tokens with all logits, plus the
    recomputed forward work.
    """

    model: str
    batch: int
    seq: int
    gen: int
    attention: str
    logits: str
    mla_decode: str
    recompute: str
    mtp: bool
    prefill_flops: int
    decode_flops: int
    generate_flops: int
    train_flops: int
    prefill_flops_per_token: int
    decode_flops_per_token: int
    train_flops_per_token: int
    breakdown: list[FlopsRow]
    formula: str
    notes: list[str]


class MemoryRow(Report):
    component: str
    bytes: int
    note: str


class MemoryReport(Report):
    """Memory for inference (weights + KV cache + activations) or a training step (+ gradients and
    optimizer states), per GPU of a data-parallel group when ZeRO shards them."""

    model: str
    mode: str
    batch: int
    seq: int
    weights_bytes: int
    kv_cache_bytes: int
    activation_bytes: int
    gradient_bytes: int
    optimizer_bytes: int
    total_bytes: int
    dominant: str
    breakdown: list[MemoryRow]
    formula: str
    notes: list[str]
