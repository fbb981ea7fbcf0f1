"""Token embedding, position encodings and LM head.

token embedding V·d; LM head d·V (+V bias), shared with the token embedding when tied. Each position
encoding is one class (a `Positions` kind): learned positions max_seq_len·d; Transformer-XL relative
positions d·H·h per layer (W_r) plus the 2·H·h biases u and v (per layer, or once when shared); T5's
bucketed relative bias num_buckets·H per stack; RoPE, ALiBi, sinusoidal and none have no parameters.
RoPE and none are here; the others are in llmcalc/model/positions.py, imported when a spec names one.
See docs/formulas.md#embeddings and #relative-positions.
"""

from typing import Any, ClassVar, Literal

from llmcalc.model import terms
from llmcalc.model.base import Parts, Variant


class Positions(Variant):
    """A position encoding: what it adds to the model's parameters and FLOPs, and how `explain` writes it.
    Subclassing registers a new `kind` (llmcalc/model/base.py); the defaults are an encoding with no
    parameters and no work.

    Asked by the costs: params (model-level), layer_params, layer_matmuls (matmul FLOPs per layer, in the
    totals) with layer_passes, positions (element-wise FLOPs, reported apart) with train_passes, and the
    flags rotary, learned, per_pair, adds_flops; by explain: explain_params, explain_layer_params,
    explain_layer_matmuls, explain_flops."""

    kinds: ClassVar[dict[str, type[Variant]]] = {}
    variant_modules: ClassVar[dict[str, str]] = {
        "none": "llmcalc.model.embedding", "rope": "llmcalc.model.embedding", "alibi": "llmcalc.model.positions",
        "learned": "llmcalc.model.positions", "sinusoidal": "llmcalc.model.positions",
        "relative": "llmcalc.model.positions", "t5_buckets": "llmcalc.model.positions"}
    """Each kind's module, imported when a spec names the kind (Variant)."""
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


def token_embedding_params(vocab: int, d_model: int) -> int:
    """V·d."""
    return vocab * d_model


def lm_head_params(vocab: int, d_model: int, *, tied: bool, bias: bool) -> int:
    """d·V (+V with a bias); a tied head reuses the embedding matrix and adds only its bias."""
    return (0 if tied else d_model * vocab) + (vocab if bias else 0)
