"""Typed results: KV cache bytes (`llmcalc kv`). Counts are ints."""

from typing import ClassVar

from llmcalc.reports.base import Report


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

    printed_by: ClassVar[str] = "kv"

    model: str
    batch: int
    seq: int
    kv_dtype: str
    total_bytes: int
    """Bytes of the whole cache: all layers, all sequences."""
    bytes_per_token: int
    """Bytes of one token of one sequence across all layers (the layers that keep entries per token)."""
    state_bytes_per_sequence: int = 0
    """Bytes of one sequence's fixed state across the recurrent layers (Mamba-2, Gated DeltaNet), whatever its
    length; 0 for a model without them."""
    encoder_seq: int | None = None
    """An encoder-decoder's encoder positions per sequence (S_e), which its cross-attention cache holds; None for a
    model without an encoder."""
    cross_bytes_per_sequence: int = 0
    """Bytes of one sequence's cross-attention cache across the decoder layers (K and V of the encoder's S_e
    positions, computed once from the encoder output), whatever the decoder's length; part of total_bytes; 0 for a
    model without cross-attention."""
    image_tokens: int = 0
    """A vision-language model's image tokens per sequence (`images` × tokens per image), part of seq."""
    image_bytes: int = 0
    """Of total_bytes, what the image tokens hold, the images first in the prompt: all of their entries in a
    full-attention layer, those still within the window in a sliding one."""
    per_layer: list[KVLayerRow]
    formula: str
    notes: list[str]
