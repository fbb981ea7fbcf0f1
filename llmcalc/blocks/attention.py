"""Attention families and their closed-form parameter counts.

GQA covers MHA (kv_heads = heads) and MQA (kv_heads = 1). MLA is DeepSeek's multi-head latent
attention. Each family lists its projections by name so reports can break them down.
See docs/formulas.md#attention.
"""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator

from .base import Frozen, Parts, PosInt


def linear(n_in: int, n_out: int, bias: bool) -> int:
    """A dense projection n_in → n_out: n_in·n_out weights, plus n_out with a bias."""
    return n_in * n_out + (n_out if bias else 0)


class GQA(Frozen):
    """Grouped-query attention: `heads` query heads share `kv_heads` key/value heads.

    q: d·H·h, k and v: d·H_kv·h each, o: H·h·d (biases add the output width);
    sinks: one learned logit per head (gpt-oss).
    """

    kind: Literal["gqa"] = "gqa"
    heads: PosInt
    kv_heads: PosInt
    head_dim: PosInt
    qkv_bias: bool = False
    o_bias: bool = False
    sinks: bool = False

    @model_validator(mode="after")
    def _groups_divide(self) -> GQA:
        if self.heads % self.kv_heads:
            raise ValueError(
                f"attention.kv_heads: heads ({self.heads}) must be a multiple of kv_heads "
                f"({self.kv_heads}); set kv_heads to a divisor of heads"
            )
        return self

    @property
    def q_width(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_width(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def label(self) -> str:
        kind = "MHA" if self.kv_heads == self.heads else "MQA" if self.kv_heads == 1 else "GQA"
        return f"{kind} {self.heads}q/{self.kv_heads}kv × {self.head_dim}"

    def params(self, d_model: int) -> Parts:
        parts = {
            "q": linear(d_model, self.q_width, self.qkv_bias),
            "k": linear(d_model, self.kv_width, self.qkv_bias),
            "v": linear(d_model, self.kv_width, self.qkv_bias),
            "o": linear(self.q_width, d_model, self.o_bias),
        }
        if self.sinks:
            parts["sinks"] = self.heads
        return parts


class MLA(Frozen):
    """Multi-head latent attention (DeepSeek-V2/V3).

    Queries: d → q_lora_rank (norm) → H·(d_nope + d_rope), or d → H·(d_nope + d_rope) directly
    when q_lora_rank is null. Keys/values: d → kv_lora_rank + d_rope (the cached latent and the
    shared RoPE key), norm over the latent, latent → H·(d_nope + d_v). Output H·d_v → d.
    `bias` adds biases on q_down, kv_down and o, as transformers' attention_bias does.
    """

    kind: Literal["mla"] = "mla"
    heads: PosInt
    q_lora_rank: PosInt | None
    kv_lora_rank: PosInt
    qk_nope_head_dim: PosInt
    qk_rope_head_dim: PosInt
    v_head_dim: PosInt
    bias: bool = False

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    @property
    def label(self) -> str:
        return f"MLA {self.heads}h, latent {self.kv_lora_rank}+{self.qk_rope_head_dim}"

    def params(self, d_model: int) -> Parts:
        h, b = self.heads, self.bias
        if self.q_lora_rank is None:
            parts = {"q": linear(d_model, h * self.qk_head_dim, False)}
        else:
            parts = {
                "q_down": linear(d_model, self.q_lora_rank, b),
                "q_norm": self.q_lora_rank,
                "q_up": linear(self.q_lora_rank, h * self.qk_head_dim, False),
            }
        parts |= {
            "kv_down": linear(d_model, self.kv_lora_rank + self.qk_rope_head_dim, b),
            "kv_norm": self.kv_lora_rank,
            "kv_up": linear(self.kv_lora_rank, h * (self.qk_nope_head_dim + self.v_head_dim), False),
            "o": linear(h * self.v_head_dim, d_model, b),
        }
        return parts


Attention = GQA | MLA
