"""Attention: the `Attention` base every variant derives from, and the GQA and MLA families.

GQA covers MHA (kv_heads = heads) and MQA (kv_heads = 1). MLA is DeepSeek's multi-head latent
attention. Each family lists its projections by name so reports can break them down.
See docs/formulas.md#attention.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import model_validator

from llmcalc.model.base import Parts, PosInt, Variant


def linear(n_in: int, n_out: int, bias: bool) -> int:
    """A dense projection n_in → n_out: n_in·n_out weights, plus n_out with a bias."""
    return n_in * n_out + (n_out if bias else 0)


def sum_min(a: int, b: int, window: int | None) -> int:
    """Σ_{n=a}^{b} min(n, window) (window None: no cap), for 1 ≤ a; 0 when b < a."""
    if b < a:
        return 0
    if window is None or b <= window:
        return (a + b) * (b - a + 1) // 2
    if a > window:
        return (b - a + 1) * window
    return (a + window) * (window - a + 1) // 2 + (b - window) * window


class Attention(Variant):
    """Which keys a query sees, and what that costs: the one place a layer's attention pattern lives.
    Subclassing registers a new `kind` (llmcalc/model/base.py).

    Every estimator (flops, latency, sweep, kv, memory, explain) asks these methods; a new attention
    variant overrides them. Defaults: query i (1-based) sees min(i, W) keys, W the layer's window
    (None: all earlier tokens); a layer caches min(S, W − 1) tokens per sequence.
    """

    kinds: ClassVar[dict[str, type[Variant]]] = {}
    sweep_fast: ClassVar[bool] = True
    """Whether llmcalc/views/sweep.py's closed form (cost = per-pair cost × windowed pairs) holds."""

    def keys_window(self, window: int | None) -> int | None:
        """The most keys one query sees in a layer whose window is `window` (None: no cap)."""
        return window

    def pairs(self, new: int, context: int, window: int | None, attention: str = "causal") -> int:
        """(query, key) pairs of one sequence: `new` queries after `context` cached tokens. causal: query
        i sees min(i, W) keys, the exact unmasked count; dense (a prefill, context 0): the full new × new
        a masked dense kernel computes."""
        if attention == "dense" and context == 0:
            return self.dense_pairs(new, self.keys_window(window))
        return sum_min(context + 1, context + new, self.keys_window(window))

    def dense_pairs(self, seq: int, window: int | None) -> int:
        """Pairs a masked dense kernel computes in a prefill of `seq` tokens: S×S."""
        return seq * seq

    def core(self, new: int, context: int, window: int | None, attention: str = "causal",
             absorbed: bool = False) -> Parts:
        """Attention-core FLOPs of one sequence by component: pairs × per-pair cost."""
        p = self.pairs(new, context, window, attention)
        return {k: p * c for k, c in self.core_per_pair(absorbed).items()}

    def cached_tokens(self, seq: int, window: int | None) -> int:
        """Tokens one sequence keeps in one layer's cache after `seq` tokens: min(S, W − 1), or S."""
        w = self.keys_window(window)
        return min(seq, w - 1) if w else seq

    def cache_bytes(self, tokens: int, bits: int) -> int:
        """Bytes of `tokens` cached tokens (of one layer, or token-layers) at `bits` per element, rounded up."""
        return -(-tokens * self.kv_elements() * bits // 8)

    def step_cache_bytes(self, batch: int, keys: int, bits: int) -> int:
        """Bytes one decode step reads from and writes to the cache of `keys` tokens per sequence."""
        return self.cache_bytes(batch * keys, bits)

    def reads_fresh_keys(self, seq: int, window: int | None) -> bool:
        """Whether a prefill of `seq` tokens attends over its freshly projected keys and values rather than
        over the cache: when the cache keeps fewer tokens than the prompt (a sliding window shorter than
        it), so both stay alive through the attention."""
        return self.cached_tokens(seq, window) < seq

    def extra_saved_elements(self) -> int:
        """Elements per token a training layer keeps besides its projections' inputs and Q/K/V (0)."""
        return 0

    def train_passes(self, name: str) -> int:
        """Forward + backward cost of component `name` in forwards: 3 (the backward costs two)."""
        return 3

    def knee(self, window: int | None) -> int | None:
        """Context from which a decode step's cost stops growing linearly as before (None: never)."""
        return self.keys_window(window)


class GQA(Attention):
    """Grouped-query attention: `heads` query heads share `kv_heads` key/value heads.

    q: d·H·h, k and v: d·H_kv·h each, o: H·h·d (biases add the output width);
    sinks: one learned logit per head (gpt-oss).
    """

    kind: Literal["gqa"] = "gqa"
    heads: PosInt
    kv_heads: PosInt
    head_dim: PosInt
    qkv_bias: bool = False
    o_bias: bool = False
    sinks: bool = False

    @model_validator(mode="after")
    def _groups_divide(self) -> GQA:
        if self.heads % self.kv_heads:
            raise ValueError(
                f"attention.kv_heads: heads ({self.heads}) must be a multiple of kv_heads "
                f"({self.kv_heads}); set kv_heads to a divisor of heads"
            )
        return self

    @property
    def q_width(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_width(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def label(self) -> str:
        kind = "MHA" if self.kv_heads == self.heads else "MQA" if self.kv_heads == 1 else "GQA"
        return f"{kind} {self.heads}q/{self.kv_heads}kv × {self.head_dim}"

    @property
    def kind_label(self) -> str:
        """The family in a few characters: MHA 32h, GQA 32/8, MQA 71h."""
        if self.kv_heads == self.heads:
            return f"MHA {self.heads}h"
        return f"MQA {self.heads}h" if self.kv_heads == 1 else f"GQA {self.heads}/{self.kv_heads}"

    def matmuls(self, d_model: int) -> Parts:
        """Weights each new token is multiplied by (2 FLOPs per weight per token)."""
        return {name: d_in * d_out for name, (d_in, d_out) in self._shapes(d_model).items()}

    def io(self, d_model: int) -> Parts:
        """Elements each projection reads and writes per token (input + output width)."""
        return {name: d_in + d_out for name, (d_in, d_out) in self._shapes(d_model).items()}

    def _shapes(self, d_model: int) -> dict[str, tuple[int, int]]:
        return {"q": (d_model, self.q_width), "k": (d_model, self.kv_width), "v": (d_model, self.kv_width),
                "o": (self.q_width, d_model)}

    def matrices(self, d_model: int) -> dict[str, list[tuple[int, int]]]:
        """Weight matrices (d_in, d_out) of each component: what a weight-only quantizer packs (biases,
        norms and sinks stay in 16 bits)."""
        return {name: [shape] for name, shape in self._shapes(d_model).items()}

    def query_io(self) -> int:
        """Elements the attention core reads and writes per query besides keys/values: Q and O, 2·H·h."""
        return 2 * self.q_width

    def key_value_io(self) -> int:
        """Elements of fresh K and V the core reads per new token (prefill): 2·H_kv·h."""
        return 2 * self.kv_width

    def kv_elements(self) -> int:
        """Cached elements per token per layer: K and V of every kv head, 2·H_kv·h."""
        return 2 * self.kv_width

    @property
    def rope_dim(self) -> int:
        """Features RoPE rotates in each query and key head: the head dim."""
        return self.head_dim

    def prefill_activation_bytes(self, d_model: int, seq: int, window: int | None, act: int, rope: bool,
                                 qk_norm: str) -> int:
        """Bytes per token this layer's attention holds at its peak in a prefill of `seq` tokens, beyond the
        residual stream and the normed input (docs/formulas.md#inference-peak), with flash kernels. The
        largest of: Q, K, V (q = H·h, kv = H_kv·h wide) and the normed Q and K beside them (qk_norm); Q,
        K, V and half of Q's rotated features (RoPE in place); Q, the output and the log-sum-exp (4 bytes a
        head), K and V too when the prompt outruns the cache; the output and the projection's, d."""
        q, kv = self.q_width, self.kv_width
        proj = q + 2 * kv
        stages = [act * proj, act * (q + d_model)]
        if qk_norm != "none":
            stages.append(act * (proj + q + kv))
        if rope:
            stages.append(act * (proj + self.heads * (self.rope_dim // 2)))
        fresh = 2 * kv if self.reads_fresh_keys(seq, window) else 0
        stages.append(act * (2 * q + fresh) + 4 * self.heads)
        return max(stages)

    def kv_formula(self) -> tuple[str, str]:
        """Cached elements per token per layer as DeepSeek-V2's Table 1 writes them, and with numbers."""
        if self.kv_heads == self.heads:
            return "2·n_h·d_h", f"2·{self.heads}·{self.head_dim}"
        if self.kv_heads == 1:
            return "2·d_h", f"2·{self.head_dim}"
        return "2·n_g·d_h", f"2·{self.kv_heads}·{self.head_dim}"

    def core_per_pair(self, absorbed: bool = False) -> Parts:
        """FLOPs per (query, key) pair: scores q·k 2·H·h, weighted sum of values 2·H·h."""
        return {"core_scores": 2 * self.q_width, "core_values": 2 * self.q_width}

    def params(self, d_model: int) -> Parts:
        parts = {
            "q": linear(d_model, self.q_width, self.qkv_bias),
            "k": linear(d_model, self.kv_width, self.qkv_bias),
            "v": linear(d_model, self.kv_width, self.qkv_bias),
            "o": linear(self.q_width, d_model, self.o_bias),
        }
        if self.sinks:
            parts["sinks"] = self.heads
        return parts


class MLA(Attention):
    """Multi-head latent attention (DeepSeek-V2/V3).

    Queries: d → q_lora_rank (norm) → H·(d_nope + d_rope), or d → H·(d_nope + d_rope) directly
    when q_lora_rank is null. Keys/values: d → kv_lora_rank + d_rope (the cached latent and the
    shared RoPE key), norm over the latent, latent → H·(d_nope + d_v). Output H·d_v → d.
    `bias` adds biases on q_down, kv_down and o, as transformers' attention_bias does.
    """

    kind: Literal["mla"] = "mla"
    heads: PosInt
    q_lora_rank: PosInt | None
    kv_lora_rank: PosInt
    qk_nope_head_dim: PosInt
    qk_rope_head_dim: PosInt
    v_head_dim: PosInt
    bias: bool = False

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    @property
    def label(self) -> str:
        return f"MLA {self.heads}h, latent {self.kv_lora_rank}+{self.qk_rope_head_dim}"

    @property
    def kind_label(self) -> str:
        """The family in a few characters: MLA 128h."""
        return f"{self.kind.upper()} {self.heads}h"

    def _shapes(self, d_model: int) -> dict[str, tuple[int, int]]:
        h, r = self.heads, self.kv_lora_rank
        q = ({"q": (d_model, h * self.qk_head_dim)} if self.q_lora_rank is None else
             {"q_down": (d_model, self.q_lora_rank), "q_up": (self.q_lora_rank, h * self.qk_head_dim)})
        return q | {"kv_down": (d_model, r + self.qk_rope_head_dim),
                    "kv_up": (r, h * (self.qk_nope_head_dim + self.v_head_dim)),
                    "o": (h * self.v_head_dim, d_model)}

    def matrices(self, d_model: int) -> dict[str, list[tuple[int, int]]]:
        """Weight matrices (d_in, d_out) of each component: what a weight-only quantizer packs (biases
        and the latent norms stay in 16 bits)."""
        return {name: [shape] for name, shape in self._shapes(d_model).items()}

    def matmuls(self, d_model: int) -> Parts:
        """Weights each new token is multiplied by; kv_up is also applied to cached latents when
        decoding without absorption (see llmcalc/costs/flops.py)."""
        return {name: d_in * d_out for name, (d_in, d_out) in self._shapes(d_model).items()}

    def io(self, d_model: int) -> Parts:
        """Elements each projection reads and writes per token (input + output width)."""
        return {name: d_in + d_out for name, (d_in, d_out) in self._shapes(d_model).items()}

    def query_io(self) -> int:
        """Elements the attention core reads and writes per query besides keys/values: Q and O,
        H·(d_n + d_r) + H·d_v."""
        return self.heads * (self.qk_head_dim + self.v_head_dim)

    def key_value_io(self) -> int:
        """Elements of decompressed K and V the core reads per new token (prefill): H·(d_n + d_r + d_v)."""
        return self.heads * (self.qk_head_dim + self.v_head_dim)

    def absorbed_matmuls(self) -> Parts:
        """Absorbed decode, per new token: q_nope·W_UK per head (d_n → r_kv) and the latent output
        through W_UV per head (r_kv → d_v), replacing kv_up on the cache."""
        h = self.heads
        return {"absorb_q": h * self.qk_nope_head_dim * self.kv_lora_rank,
                "absorb_o": h * self.kv_lora_rank * self.v_head_dim}

    def kv_elements(self) -> int:
        """Cached elements per token per layer: the latent and the shared RoPE key, r_kv + d_r."""
        return self.kv_lora_rank + self.qk_rope_head_dim

    @property
    def rope_dim(self) -> int:
        """Features RoPE rotates in each query head and the shared key: d_r."""
        return self.qk_rope_head_dim

    def prefill_activation_bytes(self, d_model: int, seq: int, window: int | None, act: int, rope: bool,
                                 qk_norm: str) -> int:
        """Bytes per token this layer's attention holds at its peak in a prefill of `seq` tokens, beyond the
        residual stream and the normed input (docs/formulas.md#inference-peak), decompressed, with flash
        kernels, which take one head dim e = max(d_n + d_r, d_v) for Q, K and V (the narrower zero-padded).
        Widths per token: Q = H·(d_n + d_r), the re-projected K/V = H·(d_n + d_v), K = H·(d_n + d_r).
        The largest of: the query latent and Q; Q, the KV latent and its normed copy, and half of Q's
        rotated features; Q, K/V, K and the padded operand; Q, K, V, the output (H·e) and the log-sum-exp;
        Q, the output and its d_v-wide copy; that copy and the projection's output, d."""
        h, qk, dv = self.heads, self.qk_head_dim, self.v_head_dim
        e = max(qk, dv)
        q = k = h * qk
        kv, pad, out = h * (self.qk_nope_head_dim + dv), h * e, h * e
        r, latent = self.kv_lora_rank, self.kv_lora_rank + self.qk_rope_head_dim
        fresh = r + latent if self.reads_fresh_keys(seq, window) else 0  # the normed latent, the down projection
        if dv < qk:  # V padded; K/V freed once K and V are built
            build, sdpa = q + fresh + kv + k + pad, q + fresh + k + pad + out
        elif dv > qk:  # Q and K padded; V a view of K/V
            build, sdpa = q + fresh + kv + k + 2 * pad, q + fresh + kv + 2 * pad + out
        else:
            build, sdpa = q + fresh + kv + k, q + fresh + kv + k + out
        stages = [2 * (self.q_lora_rank or 0), (self.q_lora_rank or 0) + q, build,
                  q + latent + r + (h * (self.rope_dim // 2) if rope else 0), q + out + h * dv, h * dv + d_model]
        if qk_norm != "none":
            stages.append(build + q + k)  # the normed Q and K beside the raw ones
        return max(act * sdpa + 4 * h, act * max(stages))

    def kv_formula(self) -> tuple[str, str]:
        """Cached elements per token per layer as DeepSeek-V2's Table 1 writes them, and with numbers."""
        return "(d_c + d_r)", f"({self.kv_lora_rank} + {self.qk_rope_head_dim})"

    def core_per_pair(self, absorbed: bool = False) -> Parts:
        """FLOPs per (query, key) pair. Decompressed: 2·H·(d_n + d_r) and 2·H·d_v. Absorbed (in the
        latent space): 2·H·(r_kv + d_r) and 2·H·r_kv."""
        h = self.heads
        if absorbed:
            return {"core_scores": 2 * h * (self.kv_lora_rank + self.qk_rope_head_dim),
                    "core_values": 2 * h * self.kv_lora_rank}
        return {"core_scores": 2 * h * self.qk_head_dim, "core_values": 2 * h * self.v_head_dim}

    def params(self, d_model: int) -> Parts:
        h, b = self.heads, self.bias
        if self.q_lora_rank is None:
            parts = {"q": linear(d_model, h * self.qk_head_dim, False)}
        else:
            parts = {
                "q_down": linear(d_model, self.q_lora_rank, b),
                "q_norm": self.q_lora_rank,
                "q_up": linear(self.q_lora_rank, h * self.qk_head_dim, False),
            }
        parts |= {
            "kv_down": linear(d_model, self.kv_lora_rank + self.qk_rope_head_dim, b),
            "kv_norm": self.kv_lora_rank,
            "kv_up": linear(self.kv_lora_rank, h * (self.qk_nope_head_dim + self.v_head_dim), False),
            "o": linear(h * self.v_head_dim, d_model, b),
        }
        return parts

