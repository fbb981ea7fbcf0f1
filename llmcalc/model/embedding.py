"""Token embedding, position encoding and LM head.

token embedding V·d; learned positions max_seq_len·d; T5's bucketed relative bias num_buckets·H per stack
(RoPE, ALiBi, sinusoidal and none have no parameters); LM head d·V (+V bias), shared with the token embedding when tied.
See docs/formulas.md#embeddings.
"""

from typing import Literal

from pydantic import model_validator

from llmcalc.model import terms
from llmcalc.model.base import Frozen, NonNegInt, PosInt


class Positions(Frozen):
    """Position encoding. `learned` has a table of max_seq_len × d_model; `t5_buckets` (T5's relative attention
    bias, Raffel et al. 2020, Section 2.1) a table of num_buckets × H scalars in the first layer of a stack, whose
    bias every layer of that stack adds to its scores: the offset j − i of a (query, key) pair falls in one of
    num_buckets buckets (exact for small offsets, logarithmic up to max_distance; a bidirectional stack splits
    them between the two signs); the other kinds have no parameters."""

    kind: Literal["rope", "none", "learned", "sinusoidal", "alibi", "t5_buckets"]
    num_buckets: PosInt | None = None
    """t5_buckets: buckets of relative offsets (T5: 32)."""
    max_distance: PosInt | None = None
    """t5_buckets: the offset from which every larger one shares the last bucket (T5: 128)."""
    offset: NonNegInt = 0
    """learned: rows of the table before position 0's (BART: 2, its positions start after them)."""

    @model_validator(mode="after")
    def _buckets_only_for_t5(self) -> "Positions":
        if (self.kind == "t5_buckets") != (self.num_buckets is not None and self.max_distance is not None):
            raise ValueError("positions: num_buckets and max_distance go with kind t5_buckets, and only with it; "
                             "give both for t5_buckets, neither otherwise")
        if self.offset and self.kind != "learned":
            raise ValueError("positions.offset: only a learned table has rows before position 0; drop offset")
        return self

    def params(self, max_seq_len: int, d_model: int, heads: int) -> int:
        """learned: (S_max + offset)·d; t5_buckets: num_buckets·H (one stack's table); others 0."""
        if self.kind == "t5_buckets":
            return self.num_buckets * heads
        return (max_seq_len + self.offset) * d_model if self.kind == "learned" else 0

    @property
    def rotary(self) -> bool:
        """Whether q and k are rotated (RoPE), which keeps cos and sin tables per position."""
        return self.kind == "rope"

    @property
    def learned(self) -> bool:
        """Whether positions come from a learned table, which has no row past max_seq_len."""
        return self.kind == "learned"

    @property
    def per_pair(self) -> bool:
        """Whether the encoding's work is per (query, key) pair (ALiBi, T5's bias) rather than per token."""
        return self.kind in ("alibi", "t5_buckets")

    @property
    def adds_flops(self) -> bool:
        """Whether the encoding does any element-wise work (every kind but none)."""
        return self.kind != "none"

    @property
    def train_passes(self) -> int:
        """Forward + backward cost of its work in forwards: RoPE 2 (the backward rotates the gradient back);
        additions 1 (their gradient passes through unchanged)."""
        return 2 if self.rotary else 1

    @property
    def flops_formula(self) -> str:
        """The FLOPs formula of this kind, for the FLOPs report."""
        return {"rope": "3 · L · tokens · (H + H_kv) · d_rot (MLA: (H + 1) · d_r)", "alibi": "H · Σ_layers pairs",
                "learned": "d · tokens", "sinusoidal": "d · tokens", "none": "0",
                "t5_buckets": "H · Σ_layers pairs"}[self.kind]

    def explain_symbols(self) -> dict[str, int]:
        """The symbols explain_params writes beyond the spec's: n_b, the buckets of t5_buckets."""
        return {"n_b": self.num_buckets} if self.kind == "t5_buckets" else {}

    def explain_legend(self) -> dict[str, str]:
        """The meaning of explain_symbols."""
        return {"n_b": "relative-position buckets (T5)"} if self.kind == "t5_buckets" else {}

    def explain_params(self) -> str:
        """params as text."""
        if self.kind == "t5_buckets":
            return "n_b · H"
        return (f"(S_max + {self.offset}) · d" if self.offset else "S_max · d") if self.learned else "0"

    def explain_flops(self, tokens: list[str], rotated: str, layers: str = "L", pairs: str = "") -> str:
        """FLOPs of a phase as text, as positions(): RoPE 3 · L · tokens · rotated (the attention's rotated
        elements per token); ALiBi layers · B · pairs · H for one layer kind (`pairs` per sequence); added
        vectors tokens · d."""
        if self.rotary:
            return terms.prod("3", layers, *tokens, rotated)
        if self.per_pair:
            return terms.prod(layers, "B", pairs, "H")
        return terms.prod(*tokens, "d")

    def positions(self, attention, d_model: int) -> dict[str, int]:
        """Element-wise FLOPs of the position encoding, apart from the matmuls (docs/formulas.md#positions):

        layer_token: per new token per layer. RoPE rotates q and k: 3 FLOPs (2 multiplies, 1 add) per
          rotated element, the attention's rope_elements(): (H + H_kv)·d_rot for GQA, d_rot the head dim
          rounded down to even; MLA rotates the RoPE part of each query head and the one shared RoPE key,
          (H + 1)·d_r. cos/sin tables are computed once and not counted.
        layer_pair: per (query, key) pair per layer. ALiBi adds slope·distance to every head's score:
          H adds per pair (the slope·distance products are a precomputed table, not counted); T5's bucketed
          bias likewise adds its looked-up bias to every head's score, H adds per pair.
        token: per new token, once (not per layer). Learned and sinusoidal add a d-vector to the
          embedding: d adds (the sinusoidal table is computed once, not counted).
        none: no FLOPs.
        """
        out = {"layer_token": 0, "layer_pair": 0, "token": 0}
        if self.kind == "rope":
            out["layer_token"] = 3 * attention.rope_elements()
        elif self.per_pair:
            out["layer_pair"] = attention.heads
        elif self.kind in ("learned", "sinusoidal"):
            out["token"] = d_model
        return out


def token_embedding_params(vocab: int, d_model: int) -> int:
    """V·d."""
    return vocab * d_model


def lm_head_params(vocab: int, d_model: int, *, tied: bool, bias: bool) -> int:
    """d·V (+V with a bias); a tied head reuses the embedding matrix and adds only its bias."""
    return (0 if tied else d_model * vocab) + (vocab if bias else 0)
