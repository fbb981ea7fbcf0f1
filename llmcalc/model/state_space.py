"""State-space mixers: Mamba-2 (SSD) and Mamba-1 (the selective scan), layers that keep a fixed-size recurrent
state instead of a KV cache.

A recurrent mixer answers what the code asks of an attention (`Attention`): its parameters and matmuls,
what one sequence's core costs, what it keeps between steps, its roofline inputs and its explain terms. Its
"cache" is one state per sequence, whatever the length: `cached_tokens` is 1 and `kv_elements` is the
state's elements per sequence. See docs/mamba.md.
"""

import re
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, model_validator

from llmcalc.errors import UserError
from llmcalc.model.attention import GQA, Attention, FixedState, linear
from llmcalc.model.base import Parts, PosInt
from llmcalc.model.units import ceil_div


class RecurrentMixer(FixedState, Attention):
    """A mixer that keeps a fixed-size state per sequence instead of a KV cache (Mamba-2, Gated DeltaNet): a
    prompt runs a chunked scan over chunks of `chunk_size` (the last padded), each decode token one recurrent
    step. A subclass gives its fields (`chunk_size` among them), `_shapes` (its projections, (d_in, d_out)),
    params, kv_elements, cache_bytes, core_from and its labels and explain terms."""

    query_key_pairs: ClassVar[bool] = False

    def core_kernel(self, prefill: bool, absorbed: bool) -> str:
        """A recurrent mixer's core is its scan over a prompt, or one step of its recurrence."""
        return "scan_prefill" if prefill else "scan_decode"

    reference_activations: ClassVar[str | None] = (
        "the reference's scan materialises its intermediate decays and states in fp32, which the memory model, "
        "a fused kernel's activations, does not count")

    def matmuls(self, d_model: int) -> Parts:
        """Weights each new token is multiplied by: in_proj and out_proj."""
        return {name: d_in * d_out for name, (d_in, d_out) in self._shapes(d_model).items()}

    def io(self, d_model: int) -> Parts:
        return {name: d_in + d_out for name, (d_in, d_out) in self._shapes(d_model).items()}

    def pairs(self, new: int, context: int, window: int | None, attention: str = "causal") -> int:
        """No (query, key) pairs: the intra-chunk (position, position) pairs are counted by `counts`."""
        return 0

    def counts(self, new: int, context: int, window: int | None, attention: str = "causal") -> dict[str, int]:
        """A forward call from an empty state (context 0: a prompt) runs the chunked scan over
        c = ⌈new / Q⌉ chunks padded to Q tokens: chunk_pairs c·Q² (position pairs within chunks),
        chunk_tokens c·Q, chunk_links (c + 1)² (the chunk-to-chunk state pass); tokens: the conv's outputs.
        After a context each new token is one recurrent step (steps). seqs: sequences whose state is read
        and written; keys: states read and written (the state kept is keys − 1, as for a cache). The same
        under both attention conventions (the scan has no masked half to skip)."""
        if context:
            return {"steps": new, "tokens": new, "seqs": 1, "keys": 1 + new}
        return self.chunk_counts(new, context, window)

    def chunk_counts(self, new: int, context: int, window: int | None) -> dict[str, int]:
        """A prompt chunk runs the chunked scan from the state the earlier chunks left."""
        c = ceil_div(new, self.chunk_size)
        q = self.chunk_size
        return {"chunk_pairs": c * q * q, "chunk_tokens": c * q, "chunk_links": (c + 1) * (c + 1),
                "tokens": new, "seqs": 1, "keys": 2}

    def core_per_pair(self, absorbed: bool = False) -> Parts:
        """No per-pair cost: the scan's cost is `core_from` of its counts."""
        return {}

    def cached_tokens(self, seq: int, window: int | None) -> int:
        """One state per sequence, whatever the length."""
        return 1

    def prefill_cache_bytes(self, tokens: Any, batch: Any, bits: int) -> Any:
        """A prompt writes each sequence's final state once."""
        return self.cache_bytes(batch, bits)

    def step_cache_bytes(self, counts: Mapping[str, Any], batch: Any, bits: int) -> Any:
        """A step reads every sequence's state and writes it back."""
        return 2 * self.cache_bytes(counts["seqs"], bits)

    def reads_fresh_keys(self, seq: int, window: int | None) -> bool:
        return False

    def knee(self, window: int | None) -> int | None:
        """A decode step costs the same at every context."""
        return None

    def gqa_shape(self) -> dict[str, Any]:
        raise UserError("`attention`: a recurrent layer has no GQA shape to keep; compare a GQA or MLA model")

    def explain_qk_norm(self) -> tuple[str, str, str]:
        return "0", "0", "0"

    def explain_cached_tokens(self, sliding: bool) -> str:
        return "1"

    def explain_pairs(self, phase: str, attention: str, sliding: bool) -> str:
        return "0"

    def explain_pair_costs(self, absorbed: bool) -> dict[str, str]:
        return {}

    def explain_rotated(self) -> str:
        return "0"

    # ---- added for the time model, memory and explain of hybrids (docs/mamba.md#time) -----------------------

    def unfused_score_elements(self, seq: int, window: int | None) -> int:
        """No attention scores over the keys: the scan's intra-chunk products are prefill_activation_bytes' own."""
        return 0

    def saved_core_bytes(self, batch: int, seq: int, window: int | None, tp: int, act: int, flash: bool,
                         dropout: bool) -> int:
        """Nothing per head beyond saved_elements: the chunked scan's backward (mamba_ssm's, FLA's) recomputes its
        intra-chunk products and chunk states from the saved inputs, flash or not."""
        return 0

    def explain_saved_core(self) -> str:
        return "0"

    @property
    def cache_heads(self) -> int | None:
        """The state splits with the heads under tensor parallelism (each rank runs its heads' scan and keeps
        their states, as Megatron's Mamba layer splits heads and groups over tp)."""
        return self.heads


class Mamba2(RecurrentMixer):
    """Mamba-2's SSD mixer (Dao & Gu 2024, "Transformers are SSMs", arXiv:2405.21060; transformers'
    Mamba2Mixer). Letters: d model width, I = H·P inner width, H heads of P channels, G groups of B and C,
    N state size, K conv width, Q chunk length.

    in_proj d → 2·I + 2·G·N + H (z, x, B, C, dt), a depthwise causal conv of width K over x, B, C
    ((I + 2·G·N)·K weights, + I + 2·G·N biases), dt_bias, A_log and D (H each), a gated RMSNorm over I,
    out_proj I → d. State per sequence: H·P·N (ssm) + (I + 2·G·N)·K (conv inputs kept).
    """

    kind: Literal["mamba2"] = "mamba2"
    heads: PosInt
    head_dim: PosInt
    state_size: PosInt
    groups: PosInt
    conv_kernel: PosInt
    chunk_size: PosInt
    bias: bool = False
    conv_bias: bool = True
    gate_norm: bool = True
    """The gated RMSNorm over I before out_proj (Falcon-H1's mamba_rms_norm false: y · silu(z), no weights)."""
    state_dtype: Literal["fp32", "cache"] = "fp32"
    """The SSM state's dtype: fp32 (transformers' torch path and mamba_ssm's scan keep it in fp32 whatever the
    weights) or the cache's (`kv_dtype`); the conv state is always in the cache's."""

    explain_legend: ClassVar[dict[str, str]] = {
        "P": "Mamba-2 head channels", "N": "SSM state size", "G": "Mamba-2 groups of B and C",
        "K": "causal conv width", "Q": "SSD chunk length", "c": "SSD chunks, ⌈S / Q⌉"}

    @model_validator(mode="after")
    def _groups_divide(self) -> "Mamba2":
        if self.heads % self.groups:
            raise ValueError(f"attention.groups: {self.groups} does not divide the {self.heads} heads; "
                             "use a divisor of heads")
        return self

    @property
    def inner(self) -> int:
        """I = H·P: the width the scan runs over."""
        return self.heads * self.head_dim

    @property
    def conv_width(self) -> int:
        """Channels the causal conv mixes: x, B and C, I + 2·G·N."""
        return self.inner + 2 * self.groups * self.state_size

    @property
    def label(self) -> str:
        return (f"Mamba-2 {self.heads}h × {self.head_dim}, state {self.state_size}, {self.groups} groups, "
                f"conv {self.conv_kernel}")

    @property
    def kind_label(self) -> str:
        return f"Mamba-2 {self.heads}h"

    def _shapes(self, d_model: int) -> dict[str, tuple[int, int]]:
        return {"in_proj": (d_model, self.inner + self.conv_width + self.heads), "out_proj": (self.inner, d_model)}

    def params(self, d_model: int) -> Parts:
        """in_proj d·(2·I + 2·G·N + H), conv (I + 2·G·N)·K (+ I + 2·G·N), A_log, D and dt_bias H each,
        the gated norm I, out_proj I·d (biases add their output widths)."""
        (d, proj), (i, _) = self._shapes(d_model).values()
        return {"in_proj": linear(d, proj, self.bias),
                "conv": self.conv_width * self.conv_kernel + (self.conv_width if self.conv_bias else 0),
                "ssm": 3 * self.heads, "gate_norm": self.inner if self.gate_norm else 0,
                "out_proj": linear(i, d_model, self.bias)}

    def query_io(self) -> int:
        """Elements the scan reads and writes per token besides its state: x, B, C, dt in, y out."""
        return 2 * self.inner + 2 * self.groups * self.state_size + self.heads

    def kv_elements(self) -> int:
        """Elements one layer keeps per sequence (not per token): the SSM state H·P·N and the conv's last
        K inputs of x, B, C, (I + 2·G·N)·K."""
        return self.inner * self.state_size + self.conv_width * self.conv_kernel

    def cache_bytes(self, tokens: int, bits: int) -> int:
        """Bytes of `tokens` states (sequences × layers): H·P·N at the state's bits (fp32: 32) and
        (I + 2·G·N)·K at `bits`, rounded up."""
        state_bits = 32 if self.state_dtype == "fp32" else bits
        return ceil_div(tokens * (self.inner * self.state_size * state_bits + self.conv_width * self.conv_kernel * bits), 8)

    def kv_formula(self) -> tuple[str, str]:
        return ("H·P·N + (I + 2·G·N)·K per sequence",
                f"{self.heads}·{self.head_dim}·{self.state_size} + {self.conv_width}·{self.conv_kernel}")

    # ---- the scan's cost: counts it is linear in ------------------------------------------------------

    def core_from(self, counts: Mapping[str, Any], new: Any, absorbed: bool = False) -> Parts:
        """FLOPs by component, a multiply-add 2 (docs/mamba.md#flops). Chunked scan (SSD, the paper's
        Listing 1): scores C·Bᵀ 2·H·N per chunk pair, values 2·H·P per chunk pair, chunk states and the
        state output 2·H·P·N per padded token each, the state pass 2·H·P·N per chunk link. Recurrent step:
        state update h ← exp(dt·A)·h + dt·x⊗B and output y = C·h, 2·H·P·N each. conv: 2·(I + 2·G·N)·K per
        token. B and C are applied per head (repeated over a group's heads, as the torch reference does)."""
        hpn = self.inner * self.state_size
        out = {"core_conv": 2 * self.conv_width * self.conv_kernel * counts["tokens"]}
        if "steps" in counts:
            steps = counts["steps"]
            return out | {"core_state_update": 2 * hpn * steps, "core_state_output": 2 * hpn * steps}
        pairs, tokens = counts["chunk_pairs"], counts["chunk_tokens"]
        return out | {"core_scores": 2 * self.heads * self.state_size * pairs, "core_values": 2 * self.inner * pairs,
                      "core_chunk_states": 2 * hpn * tokens, "core_state_pass": 2 * hpn * counts["chunk_links"],
                      "core_state_output": 2 * hpn * tokens}

    def saved_elements(self, d_model: int) -> int:
        """Elements per token a training layer keeps for the backward pass: its input d, in_proj's output
        (2·I + 2·G·N + H), the conv's output (I + 2·G·N), the scan's output and the gated norm's output (I
        each)."""
        return d_model + (self.inner + self.conv_width + self.heads) + self.conv_width + 2 * self.inner

    def prefill_activation_bytes(self, d_model: int, seq: int, window: int | None, act: int, rope: bool,
                                 qk_norm: str) -> int:
        """Bytes per token at the mixer's peak in a prefill: in_proj's output (2·I + 2·G·N + H) beside the
        conv's output (I + 2·G·N), then z beside the scan's output (2·I), per head and chunk position the
        intra-chunk scores (H·Q, in fp32 4 bytes)."""
        proj = self.inner + self.conv_width + self.heads
        return max(act * (proj + self.conv_width), act * 2 * self.inner + 4 * self.heads * self.chunk_size)

    def layer_type(self, window: int | None) -> str:
        return "mamba-2"

    @property
    def kv_note(self) -> str:
        return ("Mamba-2: each layer keeps one SSM state (H·P·N" + (", fp32" if self.state_dtype == "fp32" else "")
                + ") and one conv state ((I + 2·G·N)·K) per sequence, whatever the length; tokens_cached 1 and "
                "elements_per_token are per sequence")

    @property
    def pattern_note(self) -> str:
        return (f"Mamba-2: a prompt runs the chunked SSD scan (chunks of {self.chunk_size}, padded), each decode "
                "token one recurrent step; the same under both attention conventions; see docs/mamba.md")

    def scaled_fields(self, div: Any) -> dict[str, Any]:
        """Fields of a narrower copy: heads and groups divided by `div` (groups 1 when that does not divide)."""
        out = self.model_dump()
        out["heads"] = div(self.heads)
        g = div(self.groups)
        out["groups"] = g if out["heads"] % g == 0 else 1
        return out

    # ---- explain terms ----------------------------------------------------------------------------

    def explain_symbols(self, kv_bits: int | None = None) -> dict[str, int]:
        return {"H": self.heads, "P": self.head_dim, "N": self.state_size, "G": self.groups,
                "K": self.conv_kernel, "Q": self.chunk_size}

    def explain_parts(self) -> dict[str, tuple[str, str | None]]:
        proj = "2 · H · P + 2 · G · N + H"
        conv = "(H · P + 2 · G · N) · K" + (" + H · P + 2 · G · N" if self.conv_bias else "")
        return {"in_proj": (f"d · ({proj})" + (f" + {proj}" if self.bias else ""), f"d · ({proj})"),
                "conv": (conv, None), "ssm": ("3 · H", None), "gate_norm": ("H · P" if self.gate_norm else "0", None),
                "out_proj": ("H · P · d" + (" + d" if self.bias else ""), "H · P · d")}

    def explain_kv(self, layers: str, bits: int, sliding: bool) -> str:
        """Bytes of the layers' states, as cache_bytes: layers · B · (H · P · N · 4 + (H · P + 2 · G · N) · K ·
        bytes) with an fp32 state."""
        ssm = "H · P · N · 32" if self.state_dtype == "fp32" else f"H · P · N · {bits}"
        return f"{layers} · ((B · ({ssm} + (H · P + 2 · G · N) · K · {bits}) + 7) // 8)"

    @property
    def explain_kv_note(self) -> str:
        return "each Mamba-2 layer keeps one SSM state and one conv state per sequence, whatever the length"

    def explain_extra_core(self, phase: str, attention: str) -> dict[str, str]:
        conv = "2 · (H · P + 2 · G · N) · K"
        if phase == "decode":
            return {"core_conv": conv, "core_state_update": "2 · H · P · N", "core_state_output": "2 · H · P · N"}
        chunks = "((S + Q − 1) // Q)"
        return {"core_conv": f"{conv} · S", "core_scores": f"2 · H · N · {chunks} · Q · Q",
                "core_values": f"2 · H · P · {chunks} · Q · Q", "core_chunk_states": f"2 · H · P · N · {chunks} · Q",
                "core_state_pass": f"2 · H · P · N · ({chunks} + 1) · ({chunks} + 1)",
                "core_state_output": f"2 · H · P · N · {chunks} · Q"}

    def explain_saved(self) -> str:
        return "d + 5 · H · P + 4 · G · N + H"


class Mamba(RecurrentMixer):
    """Mamba-1's selective-scan mixer (Gu & Dao 2023, "Mamba: Linear-Time Sequence Modeling with Selective State
    Spaces", arXiv:2312.00752; transformers' MambaMixer, FalconMambaMixer, JambaMambaMixer). Letters: d model
    width, I inner width (expand·d), N state size per channel, R the rank of Δ's projection (dt_rank), K conv
    width.

    in_proj d → 2·I (x and the gate z), a depthwise causal conv of width K over x (I·K weights, + I biases),
    x_proj I → R + 2·N (Δ's low-rank input, B, C; no bias), dt_proj R → I (+ I bias), A_log I·N, D I,
    out_proj I → d; `dt_norms`: RMSNorms over Δ's R and over B and C (N each), with weights (Jamba: R + 2·N;
    Falcon-Mamba's are weightless buffers, no parameters). State per sequence: I·N (ssm, fp32 by default) +
    I·K (the conv's last K inputs, as transformers' cache keeps them).

    FLOPs convention (docs/mamba.md#mamba-1): the matmuls (in_proj, x_proj, dt_proj, out_proj), the conv and the
    scan's output y = C·h (2·I·N per token, a batched matmul) are counted; the recurrence itself,
    h ← exp(Δ·A) ⊙ h + (Δ·B) ⊙ x (about 5·I·N element-wise FLOPs per token: Δ·A, exp, Δ·B, ·x, the update's
    multiply-add), is element-wise work and not counted, as norms and activations are not. That is what torch's
    FlopCounterMode sees of transformers' pure-torch scan. A prompt and a decode step cost the same per token.
    """

    kind: Literal["mamba"] = "mamba"
    inner: PosInt
    state_size: PosInt
    conv_kernel: PosInt
    dt_rank: PosInt
    bias: bool = False
    conv_bias: bool = True
    dt_norms: bool = False
    """RMSNorms with weights over Δ's low-rank input (R) and over B and C (N each), as Jamba's mixer has."""
    state_dtype: Literal["fp32", "cache"] = "fp32"
    """The SSM state's dtype: fp32 (transformers' scan keeps it so whatever the weights) or the cache's."""
    chunk_size: PosInt = 1
    """The scan is sequential: one token at a time (no chunks)."""

    explain_legend: ClassVar[dict[str, str]] = {
        "I": "Mamba inner width", "N": "SSM state size per channel", "R": "Δ projection rank (dt_rank)",
        "K": "causal conv width"}

    @property
    def heads(self) -> int:
        """Each of the I channels runs its own recurrence: I single-channel heads."""
        return self.inner

    @property
    def head_dim(self) -> int:
        return 1

    @property
    def label(self) -> str:
        return f"Mamba inner {self.inner}, state {self.state_size}, dt rank {self.dt_rank}, conv {self.conv_kernel}"

    @property
    def kind_label(self) -> str:
        return f"Mamba {self.inner}"

    def _shapes(self, d_model: int) -> dict[str, tuple[int, int]]:
        i = self.inner
        return {"in_proj": (d_model, 2 * i), "x_proj": (i, self.dt_rank + 2 * self.state_size),
                "dt_proj": (self.dt_rank, i), "out_proj": (i, d_model)}

    def params(self, d_model: int) -> Parts:
        """in_proj d·2·I (+ 2·I), conv I·K (+ I), x_proj I·(R + 2·N), dt_proj R·I + I, A_log I·N and D I (ssm),
        out_proj I·d (+ d), dt_norms R + 2·N (biases where `bias`, `conv_bias`)."""
        i, n = self.inner, self.state_size
        out = {"in_proj": linear(d_model, 2 * i, self.bias),
               "conv": i * self.conv_kernel + (i if self.conv_bias else 0),
               "x_proj": i * (self.dt_rank + 2 * n), "dt_proj": linear(self.dt_rank, i, True),
               "ssm": i * n + i, "out_proj": linear(i, d_model, self.bias)}
        return out | ({"dt_norms": self.dt_rank + 2 * n} if self.dt_norms else {})

    def query_io(self) -> int:
        """Elements the scan reads and writes per token besides its state: x, Δ, z (I each), B, C (N each) in,
        y (I) out."""
        return 4 * self.inner + 2 * self.state_size

    def kv_elements(self) -> int:
        """Elements one layer keeps per sequence: the SSM state I·N and the conv's last K inputs I·K."""
        return self.inner * (self.state_size + self.conv_kernel)

    def cache_bytes(self, tokens: int, bits: int) -> int:
        """Bytes of `tokens` states (sequences × layers): I·N at the state's bits (fp32: 32), I·K at `bits`."""
        state_bits = 32 if self.state_dtype == "fp32" else bits
        return ceil_div(tokens * self.inner * (self.state_size * state_bits + self.conv_kernel * bits), 8)

    def kv_formula(self) -> tuple[str, str]:
        return "I·N + I·K per sequence", f"{self.inner}·{self.state_size} + {self.inner}·{self.conv_kernel}"

    def chunk_counts(self, new: int, context: int, window: int | None) -> dict[str, int]:
        """A prompt runs the recurrence token by token from a zero state: one step per token."""
        return {"steps": new, "tokens": new, "seqs": 1, "keys": 2}

    def core_from(self, counts: Mapping[str, Any], new: Any, absorbed: bool = False) -> Parts:
        """FLOPs by component, a multiply-add 2 (docs/mamba.md#mamba-1): conv 2·I·K per token, the scan's
        output y = C·h 2·I·N per step (prompt tokens and decode steps alike); the element-wise recurrence is not
        counted (the class docstring)."""
        return {"core_conv": 2 * self.inner * self.conv_kernel * counts["tokens"],
                "core_state_output": 2 * self.inner * self.state_size * counts["steps"]}

    def saved_elements(self, d_model: int) -> int:
        """Elements per token a training layer keeps for the backward pass: its input d, in_proj's output 2·I,
        the conv's output I, x_proj's output R + 2·N, Δ I and the scan's output I."""
        return d_model + 5 * self.inner + self.dt_rank + 2 * self.state_size

    def prefill_activation_bytes(self, d_model: int, seq: int, window: int | None, act: int, rope: bool,
                                 qk_norm: str) -> int:
        """Bytes per token at the mixer's peak in a prefill: in_proj's output 2·I beside the conv's output I,
        then z and x beside Δ, B and C in fp32 (4·(I + 2·N))."""
        return max(act * 3 * self.inner, act * 2 * self.inner + 4 * (self.inner + 2 * self.state_size))

    def layer_type(self, window: int | None) -> str:
        return "mamba"

    @property
    def kv_note(self) -> str:
        return ("Mamba: each layer keeps one SSM state (I·N" + (", fp32" if self.state_dtype == "fp32" else "")
                + ") and one conv state (I·K) per sequence, whatever the length; tokens_cached 1 and "
                "elements_per_token are per sequence")

    @property
    def pattern_note(self) -> str:
        return ("Mamba: the selective scan runs token by token (prompt and decode alike); counted: its output C·h "
                "(2·I·N per token) and the conv, not the element-wise recurrence; see docs/mamba.md")

    def scaled_fields(self, div: Any) -> dict[str, Any]:
        """Fields of a narrower copy: the inner width divided by `div`."""
        return self.model_dump() | {"inner": div(self.inner)}

    # ---- explain terms ----------------------------------------------------------------------------

    def explain_symbols(self, kv_bits: int | None = None) -> dict[str, int]:
        return {"I": self.inner, "N": self.state_size, "R": self.dt_rank, "K": self.conv_kernel}

    def explain_parts(self) -> dict[str, tuple[str, str | None]]:
        out = {"in_proj": ("d · 2 · I" + (" + 2 · I" if self.bias else ""), "d · 2 · I"),
               "conv": ("I · K" + (" + I" if self.conv_bias else ""), None),
               "x_proj": ("I · (R + 2 · N)", "I · (R + 2 · N)"), "dt_proj": ("R · I + I", "R · I"),
               "ssm": ("I · N + I", None), "out_proj": ("I · d" + (" + d" if self.bias else ""), "I · d")}
        return out | ({"dt_norms": ("R + 2 · N", None)} if self.dt_norms else {})

    def explain_kv(self, layers: str, bits: int, sliding: bool) -> str:
        """Bytes of the layers' states, as cache_bytes."""
        ssm = "N · 32" if self.state_dtype == "fp32" else f"N · {bits}"
        return f"{layers} · ((B · I · ({ssm} + K · {bits}) + 7) // 8)"

    @property
    def explain_kv_note(self) -> str:
        return "each Mamba layer keeps one SSM state and one conv state per sequence, whatever the length"

    def explain_extra_core(self, phase: str, attention: str) -> dict[str, str]:
        tokens = "" if phase == "decode" else " · S"
        return {"core_conv": f"2 · I · K{tokens}", "core_state_output": f"2 · I · N{tokens}"}

    def explain_saved(self) -> str:
        return "d + 5 · I + R + 2 · N"


class Parallel(Attention):
    """Two mixers on the same normed input, their outputs summed (Falcon-H1: attention and a Mamba-2 mixer side
    by side in every layer, Zuo et al. 2025, arXiv:2507.22448; transformers' FalconH1DecoderLayer). It answers
    for both: parameters, matmuls and core FLOPs are the parts' under `attention/` and `mamba/` (so a layer's
    path reads parallel/attention/q, parallel/mamba/in_proj); its cache is the attention's K and V of every
    token kept (per token) plus the Mamba's fixed state (per sequence). Scalar multipliers (Falcon-H1's µP
    factors) have no parameters and no matmuls."""

    kind: Literal["parallel"] = "parallel"
    attention: GQA
    mamba: Annotated[Mamba2 | Mamba, Field(discriminator="kind")]
    reference_activations: ClassVar[str | None] = RecurrentMixer.reference_activations
    explain_legend: ClassVar[dict[str, str]] = Mamba2.explain_legend | Mamba.explain_legend | {
        "H_m": "the Mamba part's heads (H: the attention's)"}

    def _parts(self) -> dict[str, Attention]:
        return {"attention": self.attention, "mamba": self.mamba}

    @staticmethod
    def _split(counts: Mapping[str, Any], name: str) -> dict[str, Any]:
        return {k.split(".", 1)[1]: v for k, v in counts.items() if k.startswith(name + ".")}

    def _merged(self, of: Any) -> Parts:
        return {f"{n}/{k}": v for n, part in self._parts().items() for k, v in of(part).items()}

    @property
    def heads(self) -> int:
        return self.attention.heads

    @property
    def head_dim(self) -> int:
        return self.attention.head_dim

    @property
    def label(self) -> str:
        return f"{self.attention.label} ∥ {self.mamba.label}"

    @property
    def kind_label(self) -> str:
        return f"{self.attention.kind_label} ∥ {self.mamba.kind_label}"

    def params(self, d_model: int) -> Parts:
        """Both mixers' parameters, by part."""
        return self._merged(lambda p: p.params(d_model))

    def matmuls(self, d_model: int) -> Parts:
        return self._merged(lambda p: p.matmuls(d_model))

    def io(self, d_model: int) -> Parts:
        return self._merged(lambda p: p.io(d_model))

    def matrices(self, d_model: int) -> dict[str, list[tuple[int, int]]]:
        return {f"{n}/{k}": v for n, part in self._parts().items() for k, v in part.matrices(d_model).items()}

    def query_io(self) -> int:
        return self.attention.query_io() + self.mamba.query_io()

    def key_value_io(self) -> int:
        return self.attention.key_value_io()

    def kv_elements(self) -> int:
        """Elements each token adds to the cache: the attention's K and V (the Mamba's state is per sequence)."""
        return self.attention.kv_elements()

    def cache_bytes(self, tokens: int, bits: int) -> int:
        """Bytes of `tokens` cached tokens' K and V (layer_cache_bytes adds the Mamba's state per sequence)."""
        return self.attention.cache_bytes(tokens, bits)

    def held_bytes(self, tokens: Any, seqs: Any, bits: int) -> Any:
        """The attention's K and V of every token kept plus one Mamba state per sequence."""
        return self.attention.cache_bytes(tokens, bits) + self.mamba.cache_bytes(seqs, bits)

    def token_cache_bytes(self, layers: int, bits: int) -> int:
        return self.attention.cache_bytes(layers, bits)

    def sequence_cache_bytes(self, layers: int, bits: int) -> int:
        return self.mamba.cache_bytes(layers, bits)

    def kv_formula(self) -> tuple[str, str]:
        (a, a_num), (m, m_num) = self.attention.kv_formula(), self.mamba.kv_formula()
        return f"{a} per token + {m}", f"{a_num} per token + {m_num} per sequence"

    def cached_tokens(self, seq: int, window: int | None) -> int:
        return self.attention.cached_tokens(seq, window)

    def pairs(self, new: int, context: int, window: int | None, attention: str = "causal") -> int:
        return self.attention.pairs(new, context, window, attention)

    def counts(self, new: int, context: int, window: int | None, attention: str = "causal") -> dict[str, int]:
        """Each part's counts under `attention.` and `mamba.`; keys: the attention's cached keys read and written."""
        out = {f"{n}.{k}": v for n, p in self._parts().items() for k, v in p.counts(new, context, window,
                                                                                   attention).items()}
        return out | ({"keys": out["attention.keys"]} if "attention.keys" in out else {})

    def chunk_counts(self, new: int, context: int, window: int | None) -> dict[str, int]:
        out = {f"{n}.{k}": v for n, p in self._parts().items() for k, v in p.chunk_counts(new, context, window).items()}
        return out | {"keys": out["attention.keys"]}

    def core(self, new: int, context: int, window: int | None, attention: str = "causal",
             absorbed: bool = False) -> Parts:
        """Both parts' core FLOPs of one sequence, by part."""
        return self._merged(lambda p: p.core(new, context, window, attention, absorbed))

    def core_from(self, counts: Mapping[str, Any], new: Any, absorbed: bool = False) -> Parts:
        return {f"{n}/{k}": v for n, p in self._parts().items()
                for k, v in p.core_from(self._split(counts, n), new, absorbed).items()}

    def core_per_pair(self, absorbed: bool = False) -> Parts:
        return {f"attention/{k}": v for k, v in self.attention.core_per_pair(absorbed).items()}

    def prefill_cache_bytes(self, tokens: Any, batch: Any, bits: int) -> Any:
        return self.attention.prefill_cache_bytes(tokens, batch, bits) + self.mamba.prefill_cache_bytes(
            tokens, batch, bits)

    def step_cache_bytes(self, counts: Mapping[str, Any], batch: Any, bits: int) -> Any:
        return sum(p.step_cache_bytes(self._split(counts, n), batch, bits) for n, p in self._parts().items())

    def kernel_passes(self, name: str, kernel: str) -> int:
        part, _, rest = name.partition("/")
        return self._parts()[part].kernel_passes(rest, kernel) if part in self._parts() else self.train_passes(name)

    @property
    def rope_dim(self) -> int:
        return self.attention.rope_dim

    def rope_elements(self) -> int:
        return self.attention.rope_elements()

    def qk_norm_widths(self) -> tuple[int, int, int]:
        return self.attention.qk_norm_widths()

    def saved_elements(self, d_model: int) -> int:
        """Both parts' saved elements, their shared input d once."""
        return self.attention.saved_elements(d_model) + self.mamba.saved_elements(d_model) - d_model

    def prefill_activation_bytes(self, d_model: int, seq: int, window: int | None, act: int, rope: bool,
                                 qk_norm: str) -> int:
        """The attention's peak with the Mamba's output d kept beside it, or the Mamba's peak: the larger."""
        return max(self.attention.prefill_activation_bytes(d_model, seq, window, act, rope, qk_norm) + act * d_model,
                   self.mamba.prefill_activation_bytes(d_model, seq, window, act, rope, qk_norm))

    def knee(self, window: int | None) -> int | None:
        return self.attention.knee(window)

    def gqa_shape(self) -> dict[str, Any]:
        return self.attention.gqa_shape()

    def layer_type(self, window: int | None) -> str:
        return f"{self.attention.layer_type(window)} ∥ {self.mamba.layer_type(window)}"

    @property
    def kv_note(self) -> str:
        return ("parallel attention ∥ Mamba: each layer keeps the attention's K and V of every token "
                "(bytes_per_token) and one Mamba state per sequence (state_bytes_per_sequence); tokens_cached and "
                "elements_per_token are the attention's")

    @property
    def pattern_note(self) -> str:
        return "parallel: every layer runs attention and a Mamba mixer side by side; " + self.mamba.pattern_note

    def scaled_fields(self, div: Any) -> dict[str, Any]:
        return self.model_dump() | {"attention": self.attention.scaled_fields(div),
                                    "mamba": self.mamba.scaled_fields(div)}

    # ---- explain terms ----------------------------------------------------------------------------

    def _m(self, text: str) -> str:
        """A Mamba part's formula with each symbol the attention part also names (H: heads) renamed, H_m."""
        mine = self.attention.explain_symbols()
        for k in self.mamba.explain_symbols():
            if k in mine:
                text = re.sub(rf"(?<!\w){re.escape(k)}(?!\w)", f"{k}_m", text)
        return text

    def explain_symbols(self, kv_bits: int | None = None) -> dict[str, int]:
        mine = self.attention.explain_symbols(kv_bits)
        return mine | {f"{k}_m" if k in mine else k: v for k, v in self.mamba.explain_symbols(kv_bits).items()}

    def explain_parts(self) -> dict[str, tuple[str, str | None]]:
        out = {f"attention/{k}": v for k, v in self.attention.explain_parts().items()}
        return out | {f"mamba/{k}": (self._m(p), w if w is None else self._m(w))
                      for k, (p, w) in self.mamba.explain_parts().items()}

    def explain_kv(self, layers: str, bits: int, sliding: bool) -> str:
        return (f"{self.attention.explain_kv(layers, bits, sliding)} + "
                f"{self._m(self.mamba.explain_kv(layers, bits, sliding))}")

    @property
    def explain_kv_note(self) -> str:
        return "each parallel layer keeps its attention's K and V per token and its Mamba's state per sequence"

    def explain_extra_core(self, phase: str, attention: str) -> dict[str, str]:
        return {f"mamba/{k}": self._m(v) for k, v in self.mamba.explain_extra_core(phase, attention).items()}

    def explain_pair_costs(self, absorbed: bool) -> dict[str, str]:
        """The attention part's, under its path (the Mamba has no pairs)."""
        return {f"attention/{k}": v for k, v in self.attention.explain_pair_costs(absorbed).items()}

    def explain_qk_norm(self) -> tuple[str, str, str]:
        return self.attention.explain_qk_norm()

    def explain_rotated(self) -> str:
        return self.attention.explain_rotated()

    def explain_saved(self) -> str:
        return f"{self.attention.explain_saved()} + {self._m(self.mamba.explain_saved())} − d"
