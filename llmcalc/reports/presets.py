"""Typed results: The presets (`llmcalc presets`): one row each, or one in full. Counts are ints."""

from typing import ClassVar

from llmcalc.reports.base import Report


class PresetRow(Report):
    """One preset in `llmcalc presets`."""

    printed_by: ClassVar[str] = "presets"
    printed_as_list: ClassVar[bool] = True

    name: str
    layers: int
    d_model: int
    max_seq_len: int
    attention: str
    ffn: str
    attention_kind: str
    """The layers' mixers in a few characters (MHA 32h, GQA 32/8, MLA 128h; a hybrid's joined by +: Mamba-2 + GQA
    32/8), with the stack's role and a vision tower marked: (enc), (enc-dec), (vision)."""
    ffn_kind: str
    """The FFN family in a few characters (SwiGLU, MLP, MoE 8/2: experts / top-k, +1 shared)."""
    sliding_window: int | None
    """Tokens a sliding-window layer attends to; None when no layer slides."""
    total: int
    active: int
    source: str | None


class PresetReport(Report):
    """`llmcalc presets NAME`: a preset's spec as written, its source, and figures derived from it."""

    printed_by: ClassVar[str] = "presets"

    name: str
    source: str | None
    total: int
    """Parameters, as `llmcalc params` counts them."""
    active: int
    """Parameters one token uses."""
    kv_bytes_per_token: int | None
    """KV cache bytes of one token of one sequence over all layers, in bf16 (0 for an encoder; null where the
    cache is not modelled: an encoder-decoder)."""
    kv_elements_per_token: int | None
    """KV cache elements of one token over all layers (0 for an encoder; null where not modelled)."""
    spec: dict
    """Every field of the spec (docs/spec.md), as a preset file writes it."""
