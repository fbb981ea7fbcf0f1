"""Gated DeltaNet: linear attention with a gated delta-rule state (Yang, Kautz, Hatamizadeh 2024, "Gated Delta
Networks: Improving Mamba2 with Delta Rule", arXiv:2412.06464; transformers' Qwen3NextGatedDeltaNet). It keeps a
fixed-size state per sequence, as Mamba-2 does (llmcalc/model/state_space.py). See docs/deltanet.md.
"""

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import model_validator

from llmcalc.model.base import Parts, PosInt
from llmcalc.model.state_space import RecurrentMixer
from llmcalc.model.units import ceil_div


class GatedDeltaNet(RecurrentMixer):
    """Letters: d model width, H_k query/key heads of d_k, H_v value heads of d_v (H_v a multiple of H_k: a
    query/key head serves H_v/H_k value heads), K conv width, Q chunk length.

    in_proj_qkvz d → 2·H_k·d_k + 2·H_v·d_v (q, k, v and the output gate z), in_proj_ba d → 2·H_v (β and the
    decay's dt), a depthwise causal conv over q, k, v ((2·H_k·d_k + H_v·d_v)·K, no bias), dt_bias and A_log
    (H_v each), a gated RMSNorm of d_v shared by the heads, out_proj H_v·d_v → d. State per sequence:
    H_v·d_k·d_v (fp32 by default) + (2·H_k·d_k + H_v·d_v)·K.
    """

    kind: Literal["gated_deltanet"] = "gated_deltanet"
    key_heads: PosInt
    value_heads: PosInt
    key_head_dim: PosInt
    value_head_dim: PosInt
    conv_kernel: PosInt
    chunk_size: PosInt = 64
    state_dtype: Literal["fp32", "cache"] = "fp32"
    """The recurrent state's dtype: fp32 (the torch path and FLA's kernels keep it so) or the cache's."""

    explain_legend: ClassVar[dict[str, str]] = {
        "H_k": "DeltaNet query/key heads", "H_v": "DeltaNet value heads", "d_k": "DeltaNet key head dim",
        "d_v": "DeltaNet value head dim", "K": "causal conv width", "Q": "chunk length"}

    @model_validator(mode="after")
    def _heads_divide(self) -> "GatedDeltaNet":
        if self.value_heads % self.key_heads:
            raise ValueError(f"attention.key_heads: {self.key_heads} does not divide the {self.value_heads} value "
                             "heads; use a divisor of value_heads")
        return self

    @property
    def heads(self) -> int:
        """H_v: the heads the state and the output have."""
        return self.value_heads

    @property
    def head_dim(self) -> int:
        return self.value_head_dim

    @property
    def key_width(self) -> int:
        return self.key_heads * self.key_head_dim

    @property
    def value_width(self) -> int:
        return self.value_heads * self.value_head_dim

    @property
    def conv_width(self) -> int:
        """Channels the causal conv mixes: q, k and v, 2·H_k·d_k + H_v·d_v."""
        return 2 * self.key_width + self.value_width

    @property
    def label(self) -> str:
        return (f"Gated DeltaNet {self.key_heads}qk/{self.value_heads}v × {self.key_head_dim}/{self.value_head_dim}, "
                f"conv {self.conv_kernel}")

    @property
    def kind_label(self) -> str:
        return f"GDN {self.value_heads}h"

    def _shapes(self, d_model: int) -> dict[str, tuple[int, int]]:
        return {"in_proj_qkvz": (d_model, 2 * self.key_width + 2 * self.value_width),
                "in_proj_ba": (d_model, 2 * self.value_heads), "out_proj": (self.value_width, d_model)}

    def params(self, d_model: int) -> Parts:
        """in_proj_qkvz d·(2·H_k·d_k + 2·H_v·d_v), in_proj_ba d·2·H_v, conv (2·H_k·d_k + H_v·d_v)·K, dt_bias and
        A_log H_v each, the gated norm d_v, out_proj H_v·d_v·d (no biases)."""
        out = {name: d_in * d_out for name, (d_in, d_out) in self._shapes(d_model).items()}
        return out | {"conv": self.conv_width * self.conv_kernel, "gates": 2 * self.value_heads,
                      "gate_norm": self.value_head_dim}

    def query_io(self) -> int:
        """Elements the scan reads and writes per token besides its state: q, k, v, β, g in, the output out."""
        return 2 * self.key_width + 2 * self.value_width + 2 * self.value_heads

    def kv_elements(self) -> int:
        """Elements one layer keeps per sequence: the state H_v·d_k·d_v and the conv's last K inputs."""
        return self.value_heads * self.key_head_dim * self.value_head_dim + self.conv_width * self.conv_kernel

    def cache_bytes(self, tokens: int, bits: int) -> int:
        """Bytes of `tokens` states (sequences × layers): the state at its bits (fp32: 32), the conv's at `bits`."""
        state_bits = 32 if self.state_dtype == "fp32" else bits
        state = self.value_heads * self.key_head_dim * self.value_head_dim
        return ceil_div(tokens * (state * state_bits + self.conv_width * self.conv_kernel * bits), 8)

    def kv_formula(self) -> tuple[str, str]:
        return ("H_v·d_k·d_v + (2·H_k·d_k + H_v·d_v)·K per sequence",
                f"{self.value_heads}·{self.key_head_dim}·{self.value_head_dim} + {self.conv_width}·{self.conv_kernel}")

    def core_from(self, counts: Mapping[str, Any], new: Any, absorbed: bool = False) -> Parts:
        """FLOPs by component, a multiply-add 2 (docs/deltanet.md#flops), per value head (query/key heads
        repeated over their value heads, as the torch path does). Chunked (WY/UT form): scores q·kᵀ and the
        UT system (β·k)·kᵀ 2·d_k per chunk pair each, the triangular solves for v and the decayed keys d_v + d_k
        per chunk pair below the diagonal (Q·(Q − 1)/2 per chunk), the intra-chunk output 2·d_v per chunk pair,
        and per padded token the state read by the keys and by the queries and the state update, 2·d_k·d_v
        each. Recurrent step: the state read by k, its rank-1 update and the read by q, 2·d_k·d_v each. conv:
        2·(2·H_k·d_k + H_v·d_v)·K per token."""
        h, dk, dv = self.value_heads, self.key_head_dim, self.value_head_dim
        out = {"core_conv": 2 * self.conv_width * self.conv_kernel * counts["tokens"]}
        if "steps" in counts:
            steps = counts["steps"]
            return out | {"core_state_read": 2 * h * dk * dv * steps, "core_state_update": 2 * h * dk * dv * steps,
                          "core_state_output": 2 * h * dk * dv * steps}
        pairs, tokens, q = counts["chunk_pairs"], counts["chunk_tokens"], self.chunk_size
        below = (pairs - tokens) // 2  # Q·(Q − 1)/2 per chunk: the strictly lower triangle
        return out | {"core_scores": 2 * h * dk * pairs, "core_ut_system": 2 * h * dk * pairs,
                      "core_ut_solve": 2 * h * (dk + dv) * below, "core_values": 2 * h * dv * pairs,
                      "core_state_read": 4 * h * dk * dv * (tokens - q), "core_first_read": 4 * h * dk * dv * q,
                      "core_state_update": 2 * h * dk * dv * (tokens - q), "core_final_update": 2 * h * dk * dv * q}

    def train_passes(self, name: str) -> int:
        """Forward + backward cost of component `name` in forwards: 3, except the first chunk's reads of the
        state, 2 (a training step starts from a zero state that needs no gradient: only the gradient of the keys
        and queries that read it), and the last chunk's state update, 1 (its result is only the state handed on,
        which a training step does not use, so no backward runs through it)."""
        return {"core_first_read": 2, "core_final_update": 1}.get(name, 3)

    def saved_elements(self, d_model: int) -> int:
        """Elements per token kept for the backward pass: the input d, both projections' outputs, the conv's
        output, the scan's output and the gated norm's output."""
        proj = 2 * self.key_width + 2 * self.value_width + 2 * self.value_heads
        return d_model + proj + self.conv_width + 2 * self.value_width

    def prefill_activation_bytes(self, d_model: int, seq: int, window: int | None, act: int, rope: bool,
                                 qk_norm: str) -> int:
        """Bytes per token at the mixer's peak in a prefill: the projections' outputs beside the conv's output,
        then per head and chunk position the chunk's scores and UT system (2·H_v·Q in fp32) beside q, k, v in
        fp32."""
        proj = 2 * self.key_width + 2 * self.value_width + 2 * self.value_heads
        scan = 4 * (2 * self.value_heads * self.chunk_size + 2 * self.value_heads * self.key_head_dim
                    + self.value_width)
        return max(act * (proj + self.conv_width), scan)

    def layer_type(self, window: int | None) -> str:
        return "gated deltanet"

    @property
    def kv_note(self) -> str:
        return ("Gated DeltaNet: each layer keeps one state (H_v·d_k·d_v" + (", fp32" if self.state_dtype == "fp32"
                else "") + ") and one conv state ((2·H_k·d_k + H_v·d_v)·K) per sequence, whatever the length")

    @property
    def pattern_note(self) -> str:
        return (f"Gated DeltaNet: a prompt runs the chunked delta rule (chunks of {self.chunk_size}, padded), each "
                "decode token one recurrent step; see docs/deltanet.md")

    def scaled_fields(self, div: Any) -> dict[str, Any]:
        """Fields of a narrower copy: value heads divided by `div`, key heads too (1 when that does not divide)."""
        out = self.model_dump()
        out["value_heads"] = div(self.value_heads)
        k = div(self.key_heads)
        out["key_heads"] = k if out["value_heads"] % k == 0 else 1
        return out

    # ---- explain terms ----------------------------------------------------------------------------

    def explain_symbols(self, kv_bits: int | None = None) -> dict[str, int]:
        return {"H_k": self.key_heads, "H_v": self.value_heads, "d_k": self.key_head_dim,
                "d_v": self.value_head_dim, "K": self.conv_kernel, "Q": self.chunk_size}

    def explain_parts(self) -> dict[str, tuple[str, str | None]]:
        qkvz = "d · (2 · H_k · d_k + 2 · H_v · d_v)"
        return {"in_proj_qkvz": (qkvz, qkvz), "in_proj_ba": ("d · 2 · H_v", "d · 2 · H_v"),
                "out_proj": ("H_v · d_v · d", "H_v · d_v · d"), "conv": ("(2 · H_k · d_k + H_v · d_v) · K", None),
                "gates": ("2 · H_v", None), "gate_norm": ("d_v", None)}

    def explain_kv(self, layers: str, bits: int, sliding: bool) -> str:
        """Bytes of the layers' states, as cache_bytes."""
        state = "H_v · d_k · d_v · " + ("32" if self.state_dtype == "fp32" else str(bits))
        return f"{layers} · ((B · ({state} + (2 · H_k · d_k + H_v · d_v) · K · {bits}) + 7) // 8)"

    @property
    def explain_kv_note(self) -> str:
        return "each Gated DeltaNet layer keeps one state and one conv state per sequence, whatever the length"

    def explain_extra_core(self, phase: str, attention: str) -> dict[str, str]:
        conv = "2 · (2 · H_k · d_k + H_v · d_v) · K"
        if phase == "decode":
            one = "2 · H_v · d_k · d_v"
            return {"core_conv": conv, "core_state_read": one, "core_state_update": one, "core_state_output": one}
        c = "((S + Q − 1) // Q)"
        return {"core_conv": f"{conv} · S", "core_scores": f"2 · H_v · d_k · {c} · Q · Q",
                "core_ut_system": f"2 · H_v · d_k · {c} · Q · Q",
                "core_ut_solve": f"2 · H_v · (d_k + d_v) · {c} · Q · (Q − 1) // 2",
                "core_values": f"2 · H_v · d_v · {c} · Q · Q",
                "core_state_read": f"4 · H_v · d_k · d_v · ({c} − 1) · Q", "core_first_read": "4 · H_v · d_k · d_v · Q",
                "core_state_update": f"2 · H_v · d_k · d_v · ({c} − 1) · Q",
                "core_final_update": "2 · H_v · d_k · d_v · Q"}

    def explain_saved(self) -> str:
        return "d + 4 · H_k · d_k + 5 · H_v · d_v + 2 · H_v"
