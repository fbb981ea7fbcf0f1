"""LFM2's gated short convolution (Liquid AI's LFM2; transformers' Lfm2ShortConv): a mixer with no attention and no
recurrence, only a depthwise causal convolution of K taps between two input-dependent gates. It keeps the conv's
last K inputs per sequence, so it answers as a fixed-state mixer does (llmcalc/model/state_space.py). See
docs/mamba.md#lfm2-model_type-lfm2.
"""

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from llmcalc.model.attention import linear
from llmcalc.model.base import Parts, PosInt
from llmcalc.model.state_space import RecurrentMixer
from llmcalc.model.units import ceil_div


class ShortConv(RecurrentMixer):
    """Letters: d model width (the conv's channels, `width`), K conv width.

    in_proj d → 3·d (the gates B and C and the input x), y = C ⊙ conv(B ⊙ x), a depthwise causal conv of K taps
    over d channels (d·K weights, + d with a bias), out_proj d → d; `bias` puts biases on in_proj, the conv and
    out_proj alike (LFM2's conv_bias). State per sequence: the conv's last K inputs, d·K (transformers' cache keeps K
    columns, the newest included)."""

    kind: Literal["short_conv"] = "short_conv"
    width: PosInt
    """Channels of the conv: the model's width d (in_proj splits 3·d into B, C and x)."""
    conv_kernel: PosInt
    bias: bool = False
    chunk_size: PosInt = 1
    """No scan: every token is one conv output."""

    explain_legend: ClassVar[dict[str, str]] = {"K": "short conv width"}
    reference_activations: ClassVar[str | None] = None
    """The reference's conv holds what the memory model counts (no scan intermediates)."""

    @property
    def heads(self) -> int:
        """Each of the d channels convolves alone: d single-channel heads."""
        return self.width

    @property
    def head_dim(self) -> int:
        return 1

    @property
    def label(self) -> str:
        return f"gated short conv {self.width}, {self.conv_kernel} taps"

    @property
    def kind_label(self) -> str:
        return f"ShortConv {self.conv_kernel}"

    def check_spec(self, spec: Any) -> None:
        """The conv's channels are the model's width (and no sliding-window layers: it has no keys)."""
        super().check_spec(spec)
        if self.width != spec.d_model:
            raise ValueError(f"short_conv.width: {self.width} is not d_model {spec.d_model}; give d_model")

    def _shapes(self, d_model: int) -> dict[str, tuple[int, int]]:
        return {"in_proj": (d_model, 3 * self.width), "out_proj": (self.width, d_model)}

    def params(self, d_model: int) -> Parts:
        """in_proj d·3d, conv d·K, out_proj d·d; with `bias` + 3d, + d and + d."""
        return {"in_proj": linear(d_model, 3 * self.width, self.bias),
                "conv": self.width * self.conv_kernel + (self.width if self.bias else 0),
                "out_proj": linear(self.width, d_model, self.bias)}

    def query_io(self) -> int:
        """Elements the conv reads and writes per token besides its state: B ⊙ x in, C and y."""
        return 3 * self.width

    def counts(self, new: int, context: int, window: int | None, attention: str = "causal") -> dict[str, int]:
        """tokens: the conv's outputs; after a context each new token is one step (steps). seqs: sequences whose
        state is read and written; keys: states read and written."""
        if context:
            return {"steps": new, "tokens": new, "seqs": 1, "keys": 1 + new}
        return self.chunk_counts(new, context, window)

    def chunk_counts(self, new: int, context: int, window: int | None) -> dict[str, int]:
        """A prompt chunk convolves its tokens after the state the earlier chunks left."""
        return {"tokens": new, "seqs": 1, "keys": 2}

    def kv_elements(self) -> int:
        """Elements one layer keeps per sequence (not per token): the conv's last K inputs, d·K."""
        return self.width * self.conv_kernel

    def cache_bytes(self, tokens: int, bits: int) -> int:
        """Bytes of `tokens` states (sequences × layers): d·K at `bits`, rounded up."""
        return ceil_div(tokens * self.width * self.conv_kernel * bits, 8)

    def kv_formula(self) -> tuple[str, str]:
        return "d·K per sequence", f"{self.width}·{self.conv_kernel}"

    def core_from(self, counts: Mapping[str, Any], new: Any, absorbed: bool = False) -> Parts:
        """FLOPs by component, a multiply-add 2: the conv, 2·d·K per output token (prompt or step alike). The
        gates B ⊙ x and C ⊙ y are element-wise, not counted."""
        return {"core_conv": 2 * self.width * self.conv_kernel * counts["tokens"]}

    def train_passes(self, name: str) -> int:
        return 3

    def saved_elements(self, d_model: int) -> int:
        """Elements per token kept for the backward pass: the input d, in_proj's output 3·d, B ⊙ x and the conv's
        output (d each) and C ⊙ y (d)."""
        return d_model + 6 * self.width

    def prefill_activation_bytes(self, d_model: int, seq: int, window: int | None, act: int, rope: bool,
                                 qk_norm: str) -> int:
        """Bytes per token at the mixer's peak in a prefill: in_proj's output 3·d beside B ⊙ x and the conv's
        output."""
        return act * 5 * self.width

    def layer_type(self, window: int | None) -> str:
        return "short conv"

    @property
    def kv_note(self) -> str:
        return ("gated short conv: each layer keeps the conv's last K inputs (d·K) per sequence, whatever the "
                "length; tokens_cached 1 and elements_per_token are per sequence")

    @property
    def pattern_note(self) -> str:
        return "gated short conv: no (query, key) pairs; each token one conv output of K taps"

    def scaled_fields(self, div: Any) -> dict[str, Any]:
        """Fields of a narrower copy: the width divided by `div`, as d_model is."""
        return self.model_dump() | {"width": div(self.width)}

    # ---- explain terms ----------------------------------------------------------------------------

    def explain_symbols(self, kv_bits: int | None = None) -> dict[str, int]:
        return {"K": self.conv_kernel}

    def explain_parts(self) -> dict[str, tuple[str, str | None]]:
        b = " + 3 · d" if self.bias else ""
        return {"in_proj": (f"d · 3 · d{b}", "d · 3 · d"),
                "conv": ("d · K" + (" + d" if self.bias else ""), None),
                "out_proj": ("d · d" + (" + d" if self.bias else ""), "d · d")}

    def explain_kv(self, layers: str, bits: int, sliding: bool) -> str:
        return f"{layers} · ((B · d · K · {bits} + 7) // 8)"

    @property
    def explain_kv_note(self) -> str:
        return "each short-conv layer keeps the conv's last K inputs per sequence, whatever the length"

    def explain_extra_core(self, phase: str, attention: str) -> dict[str, str]:
        return {"core_conv": "2 · d · K" if phase == "decode" else "2 · d · K · S"}

    def explain_saved(self) -> str:
        return "7 · d"
