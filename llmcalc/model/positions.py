"""The position encodings other than RoPE and none (llmcalc/model/embedding.py holds those and the `Positions`
family): ALiBi and T5's bucketed bias (a bias on every head's score), learned and sinusoidal tables added to the
embeddings, and Transformer-XL's relative positions. Imported when a spec names one of their kinds
(Positions.variant_modules), not with every spec. See docs/formulas.md#embeddings and #relative-positions.
"""

from typing import Any, ClassVar, Literal

from llmcalc.model import terms
from llmcalc.model.base import NonNegInt, Parts, PosInt
from llmcalc.model.embedding import Positions


class ScoreBias(Positions):
    """An encoding that adds a bias to every head's score: H adds per (query, key) pair per layer. Not a kind
    itself (no `kind` field): ALiBi and T5's buckets are."""

    per_pair: ClassVar[bool] = True
    flops_formula: ClassVar[str] = "H · Σ_layers pairs"

    def positions(self, attention: Any, d_model: int) -> dict[str, int]:
        return {"layer_token": 0, "layer_pair": attention.heads, "token": 0}

    def explain_flops(self, tokens: list[str], rotated: str, layers: str = "L", pairs: str = "") -> str:
        return terms.prod(layers, "B", pairs, "H")


class Alibi(ScoreBias):
    """ALiBi: slope·distance added to every head's score, H adds per (query, key) pair per layer (the
    slope·distance products are a precomputed table, not counted)."""

    kind: Literal["alibi"] = "alibi"


class Learned(Positions):
    """A learned table of max_seq_len × d, its row added to each token's embedding: d adds per token."""

    kind: Literal["learned"] = "learned"
    offset: NonNegInt = 0
    """Rows of the table before position 0's (BART: 2, its positions start after them)."""
    learned: ClassVar[bool] = True
    flops_formula: ClassVar[str] = "d · tokens"

    def params(self, max_seq_len: int, d_model: int, attention: Any) -> int:
        """(S_max + offset)·d."""
        return (max_seq_len + self.offset) * d_model

    def positions(self, attention: Any, d_model: int) -> dict[str, int]:
        return {"layer_token": 0, "layer_pair": 0, "token": d_model}

    def explain_params(self) -> str:
        return f"(S_max + {self.offset}) · d" if self.offset else "S_max · d"


class Sinusoidal(Positions):
    """Fixed sinusoids added to each token's embedding: d adds per token (the table is computed once)."""

    kind: Literal["sinusoidal"] = "sinusoidal"
    flops_formula: ClassVar[str] = "d · tokens"

    def positions(self, attention: Any, d_model: int) -> dict[str, int]:
        return {"layer_token": 0, "layer_pair": 0, "token": d_model}


class Relative(Positions):
    """Transformer-XL relative positions (Dai et al. 2019, §3.3), as Gopher and Chinchilla use them.

    Score of query i and key j, per head: (q_i + u)·k_j + (q_i + v)·W_r R_{i−j}, R the d-wide sinusoid of the
    distance i − j. Parameters per layer: W_r, d × H·h (the relative keys), and the biases u and v, H·h each;
    `shared_biases`: one u and one v for all layers (Transformer-XL's `untie_r` false, its flag's default) instead
    of one pair per layer (`untie_r` true; XLNet's layers always).

    Matmul FLOPs, in the totals: the projection W_r R of the `distances` a forward attends over, shared by the
    batch (2·distances·d·H·h per layer; its backward computes only W_r's gradient, R is fixed: 2 × forward in
    training), and the position scores (q + v)·W_r R, 2·H·h per (query, key) pair per layer like the content
    scores (3 × forward; recomputed with the core under selective recompute). The relative shift that aligns
    distance i − j with key j moves elements only: no FLOPs. Element-wise, reported apart: the two bias adds,
    2·H·h per token per layer, and AC + BD, H per pair per layer."""

    kind: Literal["relative"] = "relative"
    shared_biases: bool = False
    per_pair: ClassVar[bool] = True
    flops_formula: ClassVar[str] = "L · tokens · 2 · H · h + H · Σ_layers pairs"
    matmul_names: ClassVar[tuple[str, ...]] = ("position_projection", "core_position_scores")
    flops_note: ClassVar[str | None] = (
        "relative positions: each forward projects the distances it attends over (a decode step all S + 1 of "
        "them), as Transformer-XL's code does; an engine that keeps the projected table (S·H·h per layer, shared "
        "by the batch) pays 2·d·H·h per layer per step instead")

    def check_spec(self, spec: Any) -> None:
        if spec.attention.kind != "gqa":
            raise ValueError(f"positions.kind: relative positions are defined for multi-head attention (gqa), not "
                             f"{spec.attention.kind}; use kind gqa or another position kind")
        if spec.sliding_window is not None:
            raise ValueError("positions.kind: relative positions are costed for full-attention layers; drop "
                             "sliding_window or use another position kind")

    def params(self, max_seq_len: int, d_model: int, attention: Any) -> int:
        return 2 * attention.q_width if self.shared_biases else 0

    def layer_params(self, d_model: int, attention: Any) -> Parts:
        width = attention.q_width
        return {"position_projection": d_model * width} | ({} if self.shared_biases else {"position_biases": 2 * width})

    def layer_matmuls(self, d_model: int, attention: Any, pairs: int, distances: int) -> Parts:
        return {"position_projection": 2 * distances * d_model * attention.q_width,
                "core_position_scores": 2 * pairs * attention.q_width}

    def layer_passes(self, name: str, frozen: bool = False) -> int:
        """The projection's input R is fixed: its backward is W_r's gradient alone (2), nothing when W_r is
        frozen (1); the position scores' operands are activations (3)."""
        if name == "position_projection":
            return 1 if frozen else 2
        return 3

    def positions(self, attention: Any, d_model: int) -> dict[str, int]:
        return {"layer_token": 2 * attention.q_width, "layer_pair": attention.heads, "token": 0}

    def explain_params(self) -> str:
        return "2 · H · h" if self.shared_biases else "0"

    def explain_layer_params(self) -> dict[str, str]:
        return {"position_projection": "d · H · h"} | ({} if self.shared_biases else {"position_biases": "2 · H · h"})

    def explain_layer_matmuls(self, phase: str, pairs: str) -> dict[str, str]:
        distances = "(S + 1)" if phase == "decode" else "S"
        return {"position_projection": terms.prod("2", distances, "d", "H", "h"),
                "core_position_scores": terms.prod("2", "B", pairs, "H", "h")}

    def explain_flops(self, tokens: list[str], rotated: str, layers: str = "L", pairs: str = "") -> str:
        return f"{terms.prod('2', layers, *tokens, 'H', 'h')} + {terms.prod(layers, 'B', pairs, 'H')}"


class T5Buckets(ScoreBias):
    """T5's relative attention bias (Raffel et al. 2020, §2.1): a table of num_buckets × H scalars in the first
    layer of a stack, whose bias every layer of that stack adds to its scores. The offset j − i of a (query, key)
    pair falls in one of num_buckets buckets (exact for small offsets, logarithmic up to max_distance; a
    bidirectional stack splits them between the two signs). H adds per (query, key) pair per layer, like ALiBi."""

    kind: Literal["t5_buckets"] = "t5_buckets"
    num_buckets: PosInt
    """Buckets of relative offsets (T5: 32)."""
    max_distance: PosInt
    """The offset from which every larger one shares the last bucket (T5: 128)."""
    explain_legend: ClassVar[dict[str, str]] = {"n_b": "relative-position buckets (T5)"}

    def params(self, max_seq_len: int, d_model: int, attention: Any) -> int:
        """num_buckets·H: one stack's table."""
        return self.num_buckets * attention.heads

    def explain_params(self) -> str:
        return "n_b · H"

    def explain_symbols(self) -> dict[str, int]:
        return {"n_b": self.num_buckets}
