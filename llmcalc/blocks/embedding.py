"""Token embedding, position encoding and LM head.

token embedding V·d; learned positions max_seq_len·d (RoPE, ALiBi, sinusoidal and none have no
parameters); LM head d·V (+V bias), shared with the token embedding when tied.
See docs/formulas.md#embeddings.
"""

from __future__ import annotations

from typing import Literal

from .base import Frozen


class Positions(Frozen):
    """Position encoding. Only `learned` has parameters: a table of max_seq_len × d_model."""

    kind: Literal["rope", "none", "learned", "sinusoidal", "alibi"]

    def params(self, max_seq_len: int, d_model: int) -> int:
        return max_seq_len * d_model if self.kind == "learned" else 0


def token_embedding_params(vocab: int, d_model: int) -> int:
    """V·d."""
    return vocab * d_model


def lm_head_params(vocab: int, d_model: int, *, tied: bool, bias: bool) -> int:
    """d·V (+V with a bias); a tied head reuses the embedding matrix and adds only its bias."""
    return (0 if tied else d_model * vocab) + (vocab if bias else 0)
