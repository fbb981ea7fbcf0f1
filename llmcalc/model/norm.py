"""Normalisation layers: RMSNorm (weight) and LayerNorm (weight, optional bias).

Parameters of one norm over a vector of n: n for RMSNorm or bias-free LayerNorm, 2n with bias.
See docs/formulas.md#norms.
"""

from typing import Literal

from pydantic import model_validator

from llmcalc.model import terms
from llmcalc.model.base import Frozen, NonNegInt

FP32_BYTES = 4
"""Bytes of an fp32 element: eager RMSNorm computes in fp32."""


class Norm(Frozen):
    """How the model normalises.

    kind: rmsnorm or layernorm; bias: LayerNorm with a bias (RMSNorm has none).
    per_layer: norms on the residual stream in one block (2 pre-norm; 1 for Falcon-7B's parallel
    block; 4 for Gemma-2/3's pre+post norms). final: a norm before the LM head.
    qk_norm: none; head (one norm of head_dim shared across heads, each of q and k: Qwen3, Gemma-3);
    full (a norm over all q heads and one over all k heads: OLMo-2).
    """

    kind: Literal["rmsnorm", "layernorm"]
    bias: bool = False
    per_layer: NonNegInt = 2
    final: bool = True
    qk_norm: Literal["none", "head", "full"] = "none"

    @model_validator(mode="after")
    def _bias_needs_layernorm(self) -> "Norm":
        if self.bias and self.kind == "rmsnorm":
            raise ValueError("norm.bias: RMSNorm has no bias; set bias: false or kind: layernorm")
        return self

    @property
    def parallel(self) -> bool:
        """One norm per layer: attention and FFN read the same normed input side by side (Falcon)."""
        return self.per_layer == 1

    def params(self, n: int) -> int:
        """Parameters of one norm over n features: n, or 2n with a bias."""
        return 2 * n if self.bias else n

    def qk_params(self, head: int, q: int, k: int) -> int:
        """Parameters of one layer's QK norms, given the widths the attention's q and k have: one head's
        (head), all query heads' (q), all key heads' (k). head: one norm of a head's width for q and one
        for k; full: one over q and one over k; none: 0. k 0: no key to norm (a layer reading an earlier layer's
        keys, Gemma 3n's), q's norm only."""
        if self.qk_norm == "head":
            return self.params(head) * (2 if k else 1)
        return self.params(q) + self.params(k) if self.qk_norm == "full" else 0

    @property
    def flops_per_element(self) -> int:
        """Element-wise FLOPs of one norm per element normalised: RMSNorm 4 (square, sum, scale by 1/rms, gain);
        LayerNorm 6 (sum for the mean, subtract it, square, sum, scale by 1/σ, gain), 7 with a bias. The few
        per-vector scalars (÷n, + ε, rsqrt) are not counted."""
        return 4 if self.kind == "rmsnorm" else 6 + self.bias

    def layer_flops(self, d_model: int, q: int, k: int, own: int = 0) -> int:
        """Element-wise FLOPs of one layer's norms per token: per_layer norms of d_model, the QK norms over the q
        and k elements (q = H·h, k = H_kv·h: a per-head norm covers every head) and the attention's `own` normed
        elements (MLA's latents)."""
        return self.flops_per_element * self.normed_elements(d_model, q, k, own)

    def normed_elements(self, d_model: int, q: int, k: int, own: int = 0) -> int:
        """Elements per token one layer's norms normalise: per_layer norms of d_model, the QK norms over the q and
        k elements, the attention's `own` (MLA's latents)."""
        return self.per_layer * d_model + (q + k if self.qk_norm != "none" else 0) + own

    def traffic_bytes(self, act: int, eager: bool = False) -> int:
        """Bytes a norm moves per element it normalises, activations of `act` bytes. Fused: one kernel reading
        its input and writing its output, 2·act. Eager, as Llama's reference code writes RMSNorm (Meta's llama,
        torchtitan, Hugging Face's LlamaRMSNorm), each op a kernel: the input cast to fp32 (act read, 4
        written), squared (4, 4), averaged (4 read), scaled by the row's 1/rms (4, 4), cast back (4, act) and
        multiplied by the gain (act, act), 4·act + 28; the per-row mean, + eps and rsqrt are not counted.
        LayerNorm is one native kernel in eager PyTorch too: 2·act."""
        return 4 * act + 7 * FP32_BYTES if eager and self.kind == "rmsnorm" else 2 * act

    def eager_saved_bytes(self) -> int:
        """Bytes an eager norm keeps for its backward per element it normalises beyond a fused norm's input: eager
        RMSNorm keeps its fp32 copy of the input (for the square and the scale) and the scaled result (for the
        gain's gradient) instead of the input, FP32_BYTES more; LayerNorm's native kernel keeps what a fused one
        does, 0."""
        return FP32_BYTES if self.kind == "rmsnorm" else 0

    def kernels(self, q: int, own: int = 0, eager: bool = False) -> int:
        """Kernels one layer's norms launch beyond the one each fused norm is counted as (with the projections
        it feeds): 0 fused; eager, RMSNorm's eight (the six passes above, + eps and rsqrt on the rows) less
        that one, per norm: the per_layer norms, the QK norms (one for q, one for k) and an attention's own
        (MLA's latents, counted as one). LayerNorm: 0."""
        if not eager or self.kind != "rmsnorm":
            return 0
        return 7 * (self.per_layer + 2 * (self.qk_norm != "none" and q > 0) + (own > 0))

    def explain_params(self, n: str) -> str:
        """params as text, over n features."""
        return terms.prod("2", n) if self.bias else n

    def explain_qk(self, head: str, q: str, k: str) -> str | None:
        """qk_params as text (None: no QK norm)."""
        if self.qk_norm == "head":
            return self.explain_params(head) if k == "0" else terms.prod("2", self.explain_params(head))
        return self.explain_params(f"{q} + {k}") if self.qk_norm == "full" else None
