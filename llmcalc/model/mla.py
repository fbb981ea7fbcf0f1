"""MLA, DeepSeek's multi-head latent attention (DeepSeek-V2, V3): queries and keys/values through low-rank
latents, the cache one latent and a shared RoPE key per token. Imported when a spec names kind `mla` (or DSA, built
on it; Attention.variant_modules), not with every spec. See docs/formulas.md#attention.
"""

from collections.abc import Callable
from typing import Any, ClassVar, Literal

from llmcalc.model import terms
from llmcalc.model.attention import Attention, linear
from llmcalc.model.base import Parts, PosInt
from llmcalc.model.units import ceil_div


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

    def core_kernel(self, prefill: bool, absorbed: bool) -> str:
        """An absorbed decode step attends over the latent cache with batched products (latent_decode)."""
        return "latent_decode" if absorbed and not prefill else super().core_kernel(prefill, absorbed)

    latent_cache: ClassVar[bool] = True
    reprojected: ClassVar[tuple[str, ...]] = ("kv_up",)

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

    def activation_key(self, seq: int, window: int | None) -> Any:
        """prefill_activation_bytes depends on seq only through reads_fresh_keys."""
        return self.reads_fresh_keys(seq, window)

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

    def rope_elements(self) -> int:
        """Elements RoPE rotates per token: the RoPE part of each query head and the one shared key, (H + 1)·d_r."""
        return (self.heads + 1) * self.qk_rope_head_dim

    def normed_elements(self) -> int:
        """The latents' norms: q_lora_rank (with a query latent) + kv_lora_rank elements per token."""
        return (self.q_lora_rank or 0) + self.kv_lora_rank

    def qk_norm_widths(self) -> tuple[int, int, int]:
        """Widths a QK norm spans: one head (d_n + d_r), all query heads and all key heads (H·(d_n + d_r))."""
        return self.qk_head_dim, self.heads * self.qk_head_dim, self.heads * self.qk_head_dim

    def saved_elements(self, d_model: int) -> int:
        """Elements per token a training layer keeps for the backward pass: the matmuls' inputs (d, the query
        latent r_q, the KV latent r_kv, the o input H·d_v), Q and K (2·H·(d_n + d_r)) and V (H·d_v)."""
        h = self.heads
        return (d_model + (self.q_lora_rank or 0) + self.kv_lora_rank + 2 * h * self.v_head_dim
                + 2 * h * self.qk_head_dim)

    def saved_inputs(self, d_model: int) -> list[tuple[tuple[str, ...], int]]:
        """The layer input (d, read by q or q_down and kv_down), the query latent (r_q), the KV latent (r_kv) and
        the o input (H·d_v: the heads' outputs cut to d_v and laid out per token, a copy only o reads)."""
        first = ("q_down", "kv_down") if self.q_lora_rank else ("q", "kv_down")
        out = [(first, d_model), (("kv_up",), self.kv_lora_rank), (("o",), self.heads * self.v_head_dim)]
        return out + ([(("q_up",), self.q_lora_rank)] if self.q_lora_rank else [])

    tp_whole: ClassVar[tuple[str, ...]] = ("q_down", "q_norm", "kv_down", "kv_norm")
    """The down-projections and the latents' norms, which Megatron-Core builds 'duplicated' on every rank."""

    def tp_saved_elements(self, d_model: int, tp: int) -> int:
        """Q and K (H·(d_n + d_r) each), V and the o input (H·d_v each) split by head over tp; the latents
        r_q and r_kv whole on every rank."""
        return ceil_div(2 * self.heads * (self.qk_head_dim + self.v_head_dim), tp)

    def decode_note(self, mla_decode: str) -> str | None:
        return "MLA decode " + ("absorbed: W_UK folded into the query and W_UV into the output; attention over the "
                                "cached latent" if mla_decode == "absorbed" else
                                "decompressed: kv_up re-projects every cached latent each step")

    def gqa_shape(self) -> dict[str, Any]:
        """The GQA shape compare's swap rule maps this to: H heads of d_h = d_n (DeepSeek's d_h), one kv head
        per head, the o bias."""
        return {"heads": self.heads, "kv_heads": self.heads, "head_dim": self.qk_nope_head_dim, "qkv_bias": False,
                "o_bias": self.bias, "sinks": False}

    def mla_shape(self) -> dict[str, Any] | None:
        return self.model_dump()

    def scaled_fields(self, div: Callable[[int], int]) -> dict[str, Any]:
        """Fields of a narrower copy: heads and the latent ranks divided by `div` (a function), head dims kept."""
        out = self.model_dump()
        out["heads"], out["kv_lora_rank"] = div(self.heads), div(self.kv_lora_rank)
        out["q_lora_rank"] = self.q_lora_rank and div(self.q_lora_rank)
        return out

    # ---- explain terms ----------------------------------------------------------------------------

    def explain_symbols(self, kv_bits: int | None = None) -> dict[str, int]:
        """H, r_q (0 without query compression), r_kv, d_n, d_r, d_v."""
        return {"H": self.heads, "r_q": self.q_lora_rank or 0, "r_kv": self.kv_lora_rank,
                "d_n": self.qk_nope_head_dim, "d_r": self.qk_rope_head_dim, "d_v": self.v_head_dim}

    def explain_parts(self) -> dict[str, tuple[str, str | None]]:
        """Per layer: (parameters, weights one token is multiplied by, or None) of each projection."""
        qk, b = "H · (d_n + d_r)", self.bias
        out = ({"q": (f"d · {qk}", f"d · {qk}")} if self.q_lora_rank is None else
               {"q_down": (terms.linear("d", "r_q", b), "d · r_q"), "q_norm": ("r_q", None),
                "q_up": (f"r_q · {qk}", f"r_q · {qk}")})
        return out | {"kv_down": (terms.linear("d", "(r_kv + d_r)", b), "d · (r_kv + d_r)"), "kv_norm": ("r_kv", None),
                      "kv_up": ("r_kv · H · (d_n + d_v)", "r_kv · H · (d_n + d_v)"),
                      "o": (terms.linear("H · d_v", "d", b), "H · d_v · d")}

    def explain_qk_norm(self) -> tuple[str, str, str]:
        """qk_norm_widths as text."""
        return "(d_n + d_r)", "H · (d_n + d_r)", "H · (d_n + d_r)"

    def explain_kv(self, layers: str, bits: int, sliding: bool) -> str:
        """Bytes of one layer kind's cache: the latent and the RoPE key, layers · (r_kv + d_r) · B · tokens
        kept · bytes (no ×2)."""
        kept = self.explain_cached_tokens(sliding)
        return terms.cached_bytes((layers, "(r_kv + d_r)"), ("(r_kv + d_r)",), layers, kept, bits)

    @property
    def explain_kv_note(self) -> str:
        return "MLA caches the latent and the shared RoPE key, r_kv + d_r elements per token and layer (no ×2)"

    def explain_pair_costs(self, absorbed: bool) -> dict[str, str]:
        """core_per_pair as text."""
        if absorbed:
            return {"core_scores": "2 · H · (r_kv + d_r)", "core_values": "2 · H · r_kv"}
        return {"core_scores": "2 · H · (d_n + d_r)", "core_values": "2 · H · d_v"}

    def explain_absorbed(self) -> dict[str, str]:
        """absorbed_matmuls as text."""
        return {"absorb_q": "H · d_n · r_kv", "absorb_o": "H · r_kv · d_v"}

    def explain_rotated(self) -> str:
        """rope_elements as text."""
        return "(H + 1) · d_r"

    def explain_saved(self) -> str:
        """saved_elements as text."""
        return ("d + r_q" if self.q_lora_rank else "d") + " + r_kv + 2 · H · (d_n + d_r) + 2 · H · d_v"

    def explain_decode_note(self, mla_decode: str) -> str | None:
        return ("MLA decode absorbed: W_UK folded into the query (absorb_q), W_UV into the output (absorb_o)"
                if mla_decode == "absorbed" else "MLA decode decompress: kv_up re-projects every cached latent")

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

