"""Token embedding, position encodings and LM head.

token embedding V·d; LM head d·V (+V bias), shared with the token embedding when tied. Each position
encoding is one class (a `Positions` kind): learned positions max_seq_len·d; Transformer-XL relative
positions d·H·h per layer (W_r) plus the 2·H·h biases u and v (per layer, or once when shared); T5's
bucketed relative bias num_buckets·H per stack; RoPE, ALiBi, sinusoidal and none have no parameters.
See docs/formulas.md#embeddings and #relative-positions.
"""

from typing import Any, ClassVar, Literal

from llmcalc.model import terms
from llmcalc.model.base import NonNegInt, Parts, PosInt, Variant


class Positions(Variant):
    """A position encoding: what it adds to the model's parameters and FLOPs, and how `explain` writes it.
    Subclassing registers a new `kind` (llmcalc/model/base.py); the defaults are an encoding with no
    parameters and no work.

    Asked by the costs: params (model-level), layer_params, layer_matmuls (matmul FLOPs per layer, in the
    totals) with layer_passes, positions (element-wise FLOPs, reported apart) with train_passes, and the
    flags rotary, learned, per_pair, adds_flops; by explain: explain_params, explain_layer_params,
    explain_layer_matmuls, explain_flops."""

    kinds: ClassVar[dict[str, type[Variant]]] = {}
    rotary: ClassVar[bool] = False
    """Whether q and k are rotated (RoPE), which keeps cos and sin tables per position."""
    learned: ClassVar[bool] = False
    """Whether positions come from a learned table, which has no row past max_seq_len."""
    per_pair: ClassVar[bool] = False
    """Whether the encoding's element-wise work is per (query, key) pair rather than per token."""
    adds_flops: ClassVar[bool] = True
    """Whether the encoding does any element-wise work."""
    train_passes: ClassVar[int] = 1
    """Forward + backward cost of its element-wise work in forwards: additions 1 (their gradient passes through
    unchanged)."""
    flops_formula: ClassVar[str] = "0"
    """The element-wise FLOPs formula of this kind, for the FLOPs report."""
    matmul_names: ClassVar[tuple[str, ...]] = ()
    """The names layer_matmuls gives its FLOPs under."""
    flops_note: ClassVar[str | None] = None
    """What the FLOPs report should say about the encoding's matmuls (None: nothing)."""

    def check_spec(self, spec: Any) -> None:
        """Refuse a spec this encoding cannot be costed for (ValueError naming the field and the fix)."""

    def params(self, max_seq_len: int, d_model: int, attention: Any) -> int:
        """Parameters held once for the whole model: none."""
        return 0

    def layer_params(self, d_model: int, attention: Any) -> Parts:
        """Parameters each layer adds, by name (attention/<name> in the breakdown): none."""
        return {}

    def layer_matmuls(self, d_model: int, attention: Any, pairs: int, distances: int) -> Parts:
        """Matmul FLOPs of one layer of one forward, by name (attention/<name>): `pairs` (query, key) pairs of
        the whole batch, `distances` relative distances the forward projects (shared by the batch): none."""
        return {}

    def layer_passes(self, name: str, frozen: bool = False) -> int:
        """Forward + backward cost of layer_matmuls' `name` in forwards: 3 (the backward costs two); `frozen`:
        every weight frozen, the input gradient flowing (LoRA)."""
        return 3

    def positions(self, attention: Any, d_model: int) -> dict[str, int]:
        """Element-wise FLOPs apart from the matmuls (docs/formulas.md#positions): layer_token per new token
        per layer, layer_pair per (query, key) pair per layer, token per new token once: none."""
        return {"layer_token": 0, "layer_pair": 0, "token": 0}

    def explain_params(self) -> str:
        """Model-level params as text."""
        return "0"

    def explain_layer_params(self) -> dict[str, str]:
        """layer_params as text, one layer's."""
        return {}

    def explain_layer_matmuls(self, phase: str, pairs: str) -> dict[str, str]:
        """layer_matmuls of one layer of `phase` (prefill, decode, train's forward) as text, `pairs` the
        pairs of one sequence."""
        return {}

    def explain_symbols(self) -> dict[str, int]:
        """The symbols explain_params writes beyond the spec's: none."""
        return {}

    def explain_flops(self, tokens: list[str], rotated: str, layers: str = "L", pairs: str = "") -> str:
        """Element-wise FLOPs of a phase as text: tokens · d for an added vector."""
        return terms.prod(*tokens, "d")


class NoPositions(Positions):
    """No position encoding (NoPE): nothing to count."""

    kind: Literal["none"] = "none"
    adds_flops: ClassVar[bool] = False

    def explain_flops(self, tokens: list[str], rotated: str, layers: str = "L", pairs: str = "") -> str:
        return "0"


class Rope(Positions):
    """Rotary embeddings: q and k rotated, 3 FLOPs (2 multiplies, 1 add) per rotated element, the attention's
    rope_elements() per token per layer ((H + H_kv)·d_rot for GQA, d_rot the head dim rounded down to even; MLA
    (H + 1)·d_r). cos/sin tables are computed once and not counted. Train 2 × forward (the backward rotates
    the gradient back)."""

    kind: Literal["rope"] = "rope"
    rotary: ClassVar[bool] = True
    train_passes: ClassVar[int] = 2
    flops_formula: ClassVar[str] = "3 · L · tokens · (H + H_kv) · d_rot (MLA: (H + 1) · d_r)"

    def positions(self, attention: Any, d_model: int) -> dict[str, int]:
        return {"layer_token": 3 * attention.rope_elements(), "layer_pair": 0, "token": 0}

    def explain_flops(self, tokens: list[str], rotated: str, layers: str = "L", pairs: str = "") -> str:
        return terms.prod("3", layers, *tokens, rotated)


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


def token_embedding_params(vocab: int, d_model: int) -> int:
    """V·d."""
    return vocab * d_model


def lm_head_params(vocab: int, d_model: int, *, tied: bool, bias: bool) -> int:
    """d·V (+V with a bias); a tied head reuses the embedding matrix and adds only its bias."""
    return (0 if tied else d_model * vocab) + (vocab if bias else 0)
