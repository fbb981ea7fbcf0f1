"""Token embedding, position encoding and LM head.

token embedding V·d; learned positions max_seq_len·d (RoPE, ALiBi, sinusoidal and none have no
parameters); LM head d·V (+V bias), shared with the token embedding when tied.
See docs/formulas.md#embeddings.
"""

from typing import Literal

from llmcalc.model import terms
from llmcalc.model.base import Frozen


class Positions(Frozen):
    """Position encoding. Only `learned` has parameters: a table of max_seq_len × d_model."""

    kind: Literal["rope", "none", "learned", "sinusoidal", "alibi"]

    def params(self, max_seq_len: int, d_model: int) -> int:
        return max_seq_len * d_model if self.kind == "learned" else 0

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
        """Whether the encoding's work is per (query, key) pair (ALiBi) rather than per token."""
        return self.kind == "alibi"

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
                "learned": "d · tokens", "sinusoidal": "d · tokens", "none": "0"}[self.kind]

    def explain_params(self) -> str:
        """params as text."""
        return "S_max · d" if self.learned else "0"

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
          H adds per pair (the slope·distance products are a precomputed table, not counted).
        token: per new token, once (not per layer). Learned and sinusoidal add a d-vector to the
          embedding: d adds (the sinusoidal table is computed once, not counted).
        none: no FLOPs.
        """
        out = {"layer_token": 0, "layer_pair": 0, "token": 0}
        if self.kind == "rope":
            out["layer_token"] = 3 * attention.rope_elements()
        elif self.kind == "alibi":
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
