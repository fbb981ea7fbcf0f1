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
