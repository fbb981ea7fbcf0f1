"""Chunked attention: GQA heads whose queries see only the keys of their own aligned chunk (Llama 4).

A query at position p (0-based) sees the keys p − (p mod C) … p: the sequence is cut into aligned chunks of C
tokens from position 0, and attention is causal inside each chunk only. transformers builds the mask with
`create_chunked_causal_mask` (masking_utils.py: (kv − pad) // C == (q − pad) // C, within the causal mask) and
keeps the layer's cache in a `DynamicSlidingWindowLayer` of window C (cache_utils.py LAYER_CLASS_MAP
"chunked_attention": "sliding and chunked are the same in how they should behave, only the mask differs"): the
last min(S, C − 1) tokens, though a query past a chunk boundary reads fewer of them (transformers 5.24).

Imported when a spec names the kind (Attention.variant_modules).
"""

from typing import ClassVar, Literal

from llmcalc.model.attention import GQA
from llmcalc.model.base import PosInt


def chunk_prefix_pairs(n: int, chunk: int) -> int:
    """Σ_{p=0}^{n−1} (p mod C + 1): the keys the first n queries see, C = chunk. Each whole chunk gives
    C·(C + 1)/2, the partial one r·(r + 1)/2."""
    whole, rest = divmod(n, chunk)
    return whole * chunk * (chunk + 1) // 2 + rest * (rest + 1) // 2


class ChunkedGQA(GQA):
    """GQA heads attending within aligned chunks of `chunk` tokens (Llama 4's `attention_chunk_size`).

    Parameters: GQA's (the chunking holds no weights). Pairs of `new` queries after `context` tokens (causal):
    Σ over their positions p of (p mod C + 1). dense (a masked dense kernel, as torch's SDPA with transformers'
    mask): every new query against every key from the first one's chunk start, S × S for a prefill. Cache:
    min(S, C − 1) tokens per layer, as transformers keeps them.
    """

    kind: Literal["chunked"] = "chunked"
    chunk: PosInt
    """Tokens per aligned chunk (C): a query sees the earlier keys of its own chunk and itself."""

    own_key_pattern: ClassVar[bool] = True
    affine_after_knee: ClassVar[bool] = True
    """Past the first chunk a decode step reads C keys (min(c, C − 1) cached and its own) but attends to c mod C + 1
    of them, a sawtooth: sweep evaluates each point exactly; latency's sum over the generated tokens interpolates
    between the steps at the knee and at the last token (the reads exact, the core's pairs approximate)."""
    explain_legend: ClassVar[dict[str, str]] = {"C": "attention chunk (tokens; a query sees its own aligned chunk)"}

    @property
    def label(self) -> str:
        return f"{super().label}, chunks of {self.chunk}"

    @property
    def kind_label(self) -> str:
        return f"chunked {super().kind_label.split(' ', 1)[1]}"  # chunked 40/8, chunked 32h

    def keys_window(self, window: int | None) -> int | None:
        """The most keys one query sees (the last of a chunk): C; the cache keeps C − 1 (cached_tokens)."""
        return self.chunk

    def pairs(self, new: int, context: int, window: int | None, attention: str = "causal") -> int:
        """causal: Σ_{p=c}^{c+n−1} (p mod C + 1). dense: what a masked dense kernel computes, every new query
        against every key from the first one's chunk start, n · (c + n − C·⌊c / C⌋): S × S for a prefill (as
        transformers' SDPA over its chunked mask), and for a decode step its own chunk's keys, as causal."""
        if attention == "dense":
            return new * (context + new - self.chunk * (context // self.chunk))
        return chunk_prefix_pairs(context + new, self.chunk) - chunk_prefix_pairs(context, self.chunk)

    def dense_pairs(self, seq: int, window: int | None) -> int:
        return seq * seq

    def diagonal(self, new: int, context: int, window: int | None) -> int:
        """Every query's own key is on the mask's diagonal (each chunk is a causal triangle of its own): new."""
        return new

    def layer_type(self, window: int | None) -> str:
        return f"chunked {self.chunk}"

    @property
    def kv_note(self) -> str:
        return (f"chunked attention ({self.chunk}-token chunks): each such layer keeps the last min(S, C − 1) tokens, "
                "as transformers' sliding-window cache layer does")

    @property
    def pattern_note(self) -> str:
        return (f"chunked attention: query p sees the p mod {self.chunk} + 1 keys of its own aligned chunk; "
                "dense counts S × S in a prefill")

    def explain_symbols(self, kv_bits: int | None = None) -> dict[str, int]:
        return super().explain_symbols(kv_bits) | {"C": self.chunk}

    def explain_cached_tokens(self, sliding: bool) -> str:
        return "min(S, C − 1)"

    def explain_pairs(self, phase: str, attention: str, sliding: bool) -> str:
        if phase == "decode":
            return "S − C · (S // C) + 1"  # S mod C + 1
        if attention == "dense":
            return "S · S"
        rest = "(S − C · (S // C))"  # S mod C
        return f"(S // C) · C · (C + 1) // 2 + {rest} · ({rest} + 1) // 2"

    def explain_diagonal(self, phase: str, sliding: bool) -> str:
        return "1" if phase == "decode" else "S"
