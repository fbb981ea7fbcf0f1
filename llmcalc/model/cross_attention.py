"""Gated cross-attention to image tokens: the layers Llama 3.2 Vision (transformers' `mllama`) places among its
text decoder's self-attention layers (`cross_attention_layers`). See docs/vision.md#llama-32-vision.

Letters: d model width, H query heads, H_kv key/value heads, h head dim, T image tokens one sequence's cross cache
holds (images × max_tiles × (patches + 1): the workload's images, Workload.sized; without them the spec's
image_tokens), S text tokens.

A cross-attention layer's queries are the text tokens; its keys and values are the projected image tokens, computed
once per sequence (prefill) and kept: a fixed cache per sequence, 2·T·H_kv·h elements a layer, whatever the text's
length. Its q and o run on every text token; its k and v on the T image tokens, once; each text token attends to
every image token (no causal mask: T pairs a query). q and k are RMS-normed per head (h each); two tanh gates
(attention, MLP) scale the layer's residual branches (one parameter each).

  params = q d·H·h + k, v d·H_kv·h each + o H·h·d + q/k norms 2·h + 2 gates
  FLOPs  = prefill: 2·S·(d·H·h + H·h·d) + 2·T·2·d·H_kv·h + 2·S·T·H·h·2;  decode: 2·(d·H·h + H·h·d) + 4·T·H·h
  cache  = 2·T·H_kv·h · bytes per layer per sequence
"""

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from llmcalc.model import terms
from llmcalc.model.attention import GQA, FixedState
from llmcalc.model.base import Parts, PosInt


class GatedCrossAttention(FixedState, GQA):
    """Llama 3.2 Vision's cross-attention layer (MllamaTextCrossAttention and its decoder layer's two gates):
    GQA-shaped projections, per-head q and k RMSNorms, keys and values over `image_tokens` image tokens per
    sequence."""

    kind: Literal["cross"] = "cross"
    image_tokens: PosInt
    """Image tokens each sequence's cross cache holds when the workload names no images: max_tiles × (patches + 1)
    for one image (the 11B: 6,404); a workload's `images` N replace it with N × that (ModelSpec.for_images)."""
    image_width: PosInt
    """Width of the image tokens k and v project from: the language model's d (the projector maps to it)."""
    explain_legend: ClassVar[dict[str, str]] = {"T_x": "image tokens a sequence's cross-attention reads"}

    def for_images(self, tokens: int) -> "GatedCrossAttention":
        """This layer reading `tokens` image tokens a sequence (a workload's images × tokens per image)."""
        return type(self).model_validate(self.model_dump() | {"image_tokens": tokens})

    @property
    def label(self) -> str:
        return f"gated cross-attention {self.heads}q/{self.kv_heads}kv × {self.head_dim} over {self.image_tokens:,} " \
               "image tokens"

    @property
    def kind_label(self) -> str:
        return f"cross {self.heads}/{self.kv_heads}"

    def params(self, d_model: int) -> Parts:
        """q, k, v, o (no biases), the q and k norms (h each) and the layer's two gates."""
        return super().params(d_model) | {"qk_norm": 2 * self.head_dim, "gates": 2}

    def matmuls(self, d_model: int) -> Parts:
        """Weights each text token is multiplied by: q and o (k and v run on the image tokens: core_from)."""
        return {"q": d_model * self.q_width, "o": self.q_width * d_model}

    def io(self, d_model: int) -> Parts:
        return {"q": d_model + self.q_width, "o": self.q_width + d_model}

    def pairs(self, new: int, context: int, window: int | None, attention: str = "causal") -> int:
        """Every text query with every image key: new · T (no mask to skip, under every convention)."""
        return new * self.image_tokens

    def diagonal(self, new: int, context: int, window: int | None) -> int:
        """No causal diagonal: causal-half halves nothing."""
        return 0

    def counts(self, new: int, context: int, window: int | None, attention: str = "causal") -> dict[str, int]:
        """pairs: new · T; image_kv: the image tokens projected to k and v, T in a prompt (context 0), none after
        (they are cached); seqs: sequences whose cross cache a step reads."""
        return {"pairs": self.pairs(new, context, window), "image_kv": 0 if context else self.image_tokens,
                "seqs": 1}

    def chunk_counts(self, new: int, context: int, window: int | None) -> dict[str, int]:
        """counts, and keys 1: a prompt chunk reads (or, the first, writes) its sequence's cross cache once,
        cache_bytes(1) of it, whatever the chunk's length."""
        return self.counts(new, context, window) | {"keys": 1}

    def core_from(self, counts: Mapping[str, Any], new: Any, absorbed: bool = False) -> Parts:
        """QKᵀ and AV, 2·H·h a pair each; k and v of the image tokens, 2·image_width·H_kv·h each an image token."""
        p, kv = counts["pairs"], counts["image_kv"]
        out = {k: p * c for k, c in self.core_per_pair(absorbed).items()}
        return out | {"k": 2 * kv * self.image_width * self.kv_width, "v": 2 * kv * self.image_width * self.kv_width}

    def layer_type(self, window: int | None) -> str:
        return "cross (images)"

    def cached_tokens(self, seq: int, window: int | None) -> int:
        """One fixed cache per sequence, whatever the text's length."""
        return 1

    def kv_elements(self) -> int:
        """Elements one sequence's cross cache holds in one layer: 2·T·H_kv·h."""
        return 2 * self.image_tokens * self.kv_width

    def prefill_cache_bytes(self, tokens: Any, batch: Any, bits: int) -> Any:
        """A prompt writes each sequence's image keys and values once."""
        return self.cache_bytes(batch, bits)

    def step_cache_bytes(self, counts: Mapping[str, Any], batch: Any, bits: int) -> Any:
        """A decode step reads every sequence's cross cache (and writes nothing to it)."""
        return self.cache_bytes(counts["seqs"], bits)

    def reads_fresh_keys(self, seq: int, window: int | None) -> bool:
        return False

    def knee(self, window: int | None) -> int | None:
        return None

    def explain_symbols(self, kv_bits: int | None = None) -> dict[str, int]:
        """GQA's, and T_x: the image tokens each sequence's cross-attention reads."""
        return super().explain_symbols(kv_bits) | {"T_x": self.image_tokens}

    def explain_kv(self, layers: str, bits: int, sliding: bool) -> str:
        """Bytes of the cross layers' caches: K and V of each sequence's image tokens, 2 · layers · T_x · H_kv · h ·
        B · bytes (kv_elements), whatever the text's length."""
        return terms.cached_bytes(("2", layers, "T_x", "H_kv", "h"), ("2", "T_x", "H_kv", "h"), layers, "1", bits)

    @property
    def explain_kv_note(self) -> str:
        return "each cross-attention layer caches K and V of its sequence's image tokens: 2 · T_x · H_kv · h elements"

    def explain_cached_tokens(self, sliding: bool) -> str:
        return "1"

    def explain_pairs(self, phase: str, attention: str, sliding: bool) -> str:
        return "S · T_x" if phase != "decode" else "T_x"

    def explain_rotated(self) -> str:
        return "0"
