"""Lightning attention: MiniMax-01's linear attention with a fixed exponential decay per head (MiniMax et al. 2025,
"MiniMax-01: Scaling Foundation Models with Lightning Attention", arXiv:2501.08313; transformers 5.24's
MiniMaxLightningAttention in models/minimax/modeling_minimax.py). It keeps one d_h × d_h state per head and
sequence instead of a KV cache, as Gated DeltaNet does (llmcalc/model/deltanet.py). See docs/lightning.md.
"""

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from llmcalc.model.base import Parts, PosInt
from llmcalc.model.state_space import RecurrentMixer
from llmcalc.model.units import ceil_div


class LightningAttention(RecurrentMixer):
    """Letters: d model width, H heads of d_h (transformers: num_attention_heads and head_dim, the same as the
    softmax layers' query heads), Q block length (block_size), S tokens.

    qkv_proj d → 3·H·d_h (no bias, then the activation), output_gate d → H·d_h (no bias, a sigmoid), one RMSNorm
    over the whole H·d_h output (H·d_h weights), out_proj H·d_h → d. The decay per head is a fixed slope (a buffer,
    no parameter). State per sequence: H·d_h·d_h in the cache's dtype (transformers allocates it in the values'
    dtype).
    """

    kind: Literal["lightning"] = "lightning"
    heads: PosInt
    head_dim: PosInt
    chunk_size: PosInt = 256
    """Q: the block length of the prompt's blocked form (MiniMaxConfig.block_size)."""

    explain_legend: ClassVar[dict[str, str]] = {"H_l": "lightning heads", "d_h": "lightning head dim",
                                                "Q": "lightning block length"}

    @property
    def width(self) -> int:
        """H·d_h: the width of q, k, v, the gate and the output."""
        return self.heads * self.head_dim

    @property
    def label(self) -> str:
        return f"lightning attention {self.heads}h × {self.head_dim}, blocks of {self.chunk_size}"

    @property
    def kind_label(self) -> str:
        return f"Lightning {self.heads}h"

    def _shapes(self, d_model: int) -> dict[str, tuple[int, int]]:
        return {"qkv_proj": (d_model, 3 * self.width), "output_gate": (d_model, self.width),
                "out_proj": (self.width, d_model)}

    def params(self, d_model: int) -> Parts:
        """qkv_proj d·3·H·d_h, output_gate d·H·d_h, out_proj H·d_h·d (no biases), the output norm H·d_h."""
        out = {name: d_in * d_out for name, (d_in, d_out) in self._shapes(d_model).items()}
        return out | {"gate_norm": self.width}

    def normed_elements(self) -> int:
        """The output RMSNorm normalises H·d_h elements per token."""
        return self.width

    def query_io(self) -> int:
        """Elements the core reads and writes per token besides its state: q, k, v in, the output out."""
        return 4 * self.width

    def kv_elements(self) -> int:
        """Elements one layer keeps per sequence: the state H·d_h·d_h."""
        return self.heads * self.head_dim * self.head_dim

    def cache_bytes(self, tokens: int, bits: int) -> int:
        """Bytes of `tokens` states (sequences × layers) at `bits`, rounded up."""
        return ceil_div(tokens * self.kv_elements() * bits, 8)

    def kv_formula(self) -> tuple[str, str]:
        return "H·d_h·d_h per sequence", f"{self.heads}·{self.head_dim}·{self.head_dim}"

    def chunk_counts(self, new: int, context: int, window: int | None) -> dict[str, int]:
        """The blocked form over `new` tokens in blocks of Q, the last one short (transformers does not pad):
        block_pairs Σ n_b² (n_b the block's length), first the first block's length, last the last block's."""
        q = self.chunk_size
        full, rest = divmod(new, q)
        last = rest or q
        return {"block_pairs": full * q * q + rest * rest, "block_tokens": new, "first": min(new, q),
                "last": last if new else 0, "tokens": new, "seqs": 1, "keys": 2}

    def core_from(self, counts: Mapping[str, Any], new: Any, absorbed: bool = False) -> Parts:
        """FLOPs by component, a multiply-add 2 (docs/lightning.md#flops), as transformers computes them.
        Blocked form (a prompt from an empty state): per head and block of n_b tokens, q·kᵀ and the decayed scores
        times v, 2·d_h·n_b² each (the full square: the causal decay is a mask applied element-wise), the state
        read by the decayed queries and kᵀ·v into the state, 2·d_h² per token each (the first block reads the
        zero state too; the last block's update is the state handed on). Recurrent step: kᵀ·v into the state
        and the read by q, 2·d_h² each."""
        h, dh = self.heads, self.head_dim
        one = 2 * h * dh * dh
        if "steps" in counts:
            steps = counts["steps"]
            return {"core_state_update": one * steps, "core_state_output": one * steps}
        pairs, tokens, first, last = counts["block_pairs"], counts["block_tokens"], counts["first"], counts["last"]
        return {"core_scores": 2 * h * dh * pairs, "core_values": 2 * h * dh * pairs,
                "core_state_read": one * (tokens - first), "core_first_read": one * first,
                "core_state_update": one * (tokens - last), "core_final_update": one * last}

    def train_passes(self, name: str) -> int:
        """Forward + backward in forwards: 3, except the first block's read of the zero state, 2 (only the
        queries' gradient), and the last block's update, 1 (the state handed on gets no gradient)."""
        return {"core_first_read": 2, "core_final_update": 1}.get(name, 3)

    def saved_elements(self, d_model: int) -> int:
        """Elements per token kept for the backward pass: the input d, q, k, v (3·H·d_h), the gate's, the core's
        and the norm's outputs (H·d_h each)."""
        return d_model + 6 * self.width

    def prefill_activation_bytes(self, d_model: int, seq: int, window: int | None, act: int, rope: bool,
                                 qk_norm: str) -> int:
        """Bytes per token at the mixer's peak in a prefill: q, k, v and the gate beside one block's scores
        (H·Q per token)."""
        return act * (4 * self.width + self.heads * min(seq, self.chunk_size))

    def layer_type(self, window: int | None) -> str:
        return "lightning attention"

    @property
    def kv_note(self) -> str:
        return ("lightning attention: each layer keeps one state (H·d_h·d_h, in the cache's dtype) per sequence, "
                "whatever the length")

    @property
    def pattern_note(self) -> str:
        return (f"lightning attention: a prompt runs the blocked form (blocks of {self.chunk_size}, the last one "
                "short), each decode token one recurrent step; see docs/lightning.md")

    def scaled_fields(self, div: Any) -> dict[str, Any]:
        """Fields of a narrower copy: the heads divided by `div`."""
        return self.model_dump() | {"heads": div(self.heads)}

    # ---- explain terms ----------------------------------------------------------------------------

    def explain_symbols(self, kv_bits: int | None = None) -> dict[str, int]:
        return {"H_l": self.heads, "d_h": self.head_dim, "Q": self.chunk_size}

    def explain_parts(self) -> dict[str, tuple[str, str | None]]:
        return {"qkv_proj": ("d · 3 · H_l · d_h", "d · 3 · H_l · d_h"),
                "output_gate": ("d · H_l · d_h", "d · H_l · d_h"), "out_proj": ("H_l · d_h · d", "H_l · d_h · d"),
                "gate_norm": ("H_l · d_h", None)}

    def explain_kv(self, layers: str, bits: int, sliding: bool) -> str:
        """Bytes of the layers' states, as cache_bytes."""
        return f"{layers} · ((B · H_l · d_h · d_h · {bits} + 7) // 8)"

    @property
    def explain_kv_note(self) -> str:
        return "each lightning-attention layer keeps one state per sequence, whatever the length"

    def explain_extra_core(self, phase: str, attention: str) -> dict[str, str]:
        one = "2 · H_l · d_h · d_h"
        if phase == "decode":
            return {"core_state_update": one, "core_state_output": one}
        rest = "(S − (S // Q) · Q)"
        pairs = f"((S // Q) · Q · Q + {rest} · {rest})"
        first = "min(S, Q)"
        last = "(S − ((S + Q − 1) // Q − 1) · Q)"
        return {"core_scores": f"2 · H_l · d_h · {pairs}", "core_values": f"2 · H_l · d_h · {pairs}",
                "core_state_read": f"{one} · (S − {first})", "core_first_read": f"{one} · {first}",
                "core_state_update": f"{one} · (S − {last})", "core_final_update": f"{one} · {last}"}

    def explain_saved(self) -> str:
        return "d + 6 · H_l · d_h"
