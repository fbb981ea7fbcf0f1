"""Typed results: Parameter counts (`llmcalc params`). Counts are ints."""

from typing import ClassVar, Literal

from llmcalc.reports.base import Report


class ParamRow(Report):
    """One component summed over all layers: `params` stored, `active` used by one token."""

    component: str
    params: int
    """Parameters stored, all layers."""
    active: int
    """Parameters one token uses, all layers."""
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

    printed_by: ClassVar[str] = "params"

    model: str
    total: int
    """Every parameter of the main model; tied matrices once, MTP modules excluded; language + vision."""
    language: int = 0
    """The language model's parameters (all of total for a text-only model)."""
    vision: int = 0
    """A vision-language model's image encoder and projector (0: text only)."""
    active: int
    """Parameters one token's forward uses: total − the routed experts it skips."""
    active_excluding_embedding: int
    """active − token and learned-position tables (Kaplan et al.'s N)."""
    embedding: int
    """Token (and learned position) embedding parameters."""
    mtp: int
    """DeepSeek-V3 multi-token-prediction parameters, not in total."""
    breakdown: list[ParamRow]
    """One row per component path (embedding/…, attention/…, ffn/…, norms/…, lm_head), all layers."""
    mtp_breakdown: list[ParamRow]
    vision_breakdown: list[ParamRow] = []
    """The vision tower (vision/…) and projector (projector/…) rows, in total; empty for a text-only model."""
    layer_types: list[LayerTypeRow]
    """Layers grouped by shape, with the parameters of one layer of each."""
    checkpoint_bytes: int | None = None
    """`--bytes`: the tensor bytes of the checkpoint as it ships, in its formats (docs/formats.md); None otherwise."""
    checkpoint_formats: str | None = None
    """`--bytes`: the formats and stored buffers checkpoint_bytes counts."""
    hub_total_size_bytes: int | None = None
    """`--bytes`, when the model's folder or Hub repository holds a model.safetensors.index.json: its
    metadata.total_size, the tensors' bytes as published, beside checkpoint_bytes as a cross-check; None otherwise."""
    model_import: Literal["exact", "best-effort"] = "exact"
    """How the model was read: `exact`, or `best-effort` (a Hugging Face model_type read as a llama-style decoder
    with --hf-generic: `assumed` lists what was assumed)."""
    assumed: list[str] = []
    """A best-effort import's assumptions, one each; empty for an exact import."""
    formula: str
    notes: list[str]
