"""Sparse attention variants: each one class with its closed-form costs, built on GQA or MLA.

`Longformer`: a sliding window of `window` tokens plus `global_tokens` global positions (the first g),
causal decoder form (docs/attention-longformer.md). `Linformer`: keys and values projected along the
sequence to k rows (docs/attention-linformer.md). `Reformer`: LSH attention within hashed chunks, shared QK
(docs/attention-reformer.md). `DSA`: DeepSeek Sparse Attention (DeepSeek-V3.2-Exp),
MLA over the top-k keys a lightning indexer selects (docs/attention-dsa.md).

Each overrides what differs from `Attention` (llmcalc/model/attention.py): which keys a query sees,
what the core costs per component, what the cache keeps, and the `llmcalc explain` terms that say so.
Imported when a spec names one of these kinds (Attention.variant_modules), not with every spec.
"""

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import model_validator

from llmcalc.model.attention import GQA, Parts, linear, sum_min
from llmcalc.model.base import NonNegInt, PosInt
from llmcalc.model.mla import MLA
from llmcalc.model.units import ceil_div, packed_bytes

CacheDtype = Literal["fp32", "bf16", "fp16", "fp8", "int8"]
_BITS = {"fp32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8}


def capped_pairs(cap: str, phase: str, attention: str) -> str:
    """Explain text: pairs of one sequence when a query sees at most `cap` keys (a symbol or a sum of them):
    a decode step min(S + 1, cap); a dense prefill S · min(S, cap); a causal one Σ_i min(i, cap)."""
    x = f"({cap})" if " " in cap else cap
    if phase == "decode":
        return f"min(S + 1, {cap})"
    if attention == "dense":
        return f"S · min(S, {cap})"
    return f"min(S, {x}) · (min(S, {x}) + 1) // 2 + (S − min(S, {x})) · {x}"


def capped_diagonal(cap: str, phase: str) -> str:
    """Explain text: queries whose own key causal-half counts half when a query sees at most `cap` keys."""
    return f"min(S + 1, {cap}) − min(S, {cap})" if phase == "decode" else f"min(S, {cap})"


class Longformer(GQA):
    """GQA heads with Longformer's pattern in causal decoder form (Beltagy et al. 2020, arXiv:2004.05150).

    Query at position i (1-based) sees its sliding window, the `window` tokens i − w + 1 … i, plus the
    `global_tokens` first positions 1 … g. Global tokens attend to everything: in a causal decoder that
    is every earlier token (a global query at i ≤ g sees 1 … i). Keys per query: min(i, w + g). The cache
    keeps the g global tokens and the last w − 1: min(S, w + g − 1) tokens per layer.
    dense convention (a banded/gathered kernel): every query computes min(S, w + g) key slots.
    """

    kind: Literal["longformer"] = "longformer"
    window: PosInt
    global_tokens: NonNegInt

    own_key_pattern: ClassVar[bool] = True
    explain_legend: ClassVar[dict[str, str]] = {
        "W_l": "Longformer sliding window (tokens)", "N_g": "Longformer global tokens (the first positions)"}

    @property
    def label(self) -> str:
        return (f"Longformer {self.heads}q/{self.kv_heads}kv × {self.head_dim}, window {self.window} + "
                f"{self.global_tokens} global")

    @property
    def kind_label(self) -> str:
        return f"Longformer {self.heads}h"

    @property
    def span(self) -> int:
        """w + g: the most keys one query sees."""
        return self.window + self.global_tokens

    def keys_window(self, window: int | None) -> int | None:
        return self.span

    def dense_pairs(self, seq: int, window: int | None) -> int:
        return seq * min(seq, self.span)

    def layer_type(self, window: int | None) -> str:
        return f"longformer {self.window}+{self.global_tokens}"

    @property
    def kv_note(self) -> str:
        return (f"Longformer: each layer keeps the {self.global_tokens} global tokens and the last {self.window - 1}: "
                "min(S, w + g − 1) tokens")

    @property
    def pattern_note(self) -> str:
        return (f"Longformer: query i sees min(i, w + g) keys (window {self.window} + {self.global_tokens} global); "
                "dense counts w + g slots per query; see docs/attention-longformer.md")

    def explain_symbols(self, kv_bits: int | None = None) -> dict[str, int]:
        return super().explain_symbols(kv_bits) | {"W_l": self.window, "N_g": self.global_tokens}

    def explain_cached_tokens(self, sliding: bool) -> str:
        return "min(S, W_l + N_g − 1)"

    def explain_pairs(self, phase: str, attention: str, sliding: bool) -> str:
        return capped_pairs("W_l + N_g", phase, attention)

    def explain_diagonal(self, phase: str, sliding: bool) -> str:
        return capped_diagonal("W_l + N_g", phase)


class Linformer(GQA):
    """GQA heads whose keys and values are projected along the sequence to `proj_len` rows (Wang et al. 2020,
    "Linformer: Self-Attention with Linear Complexity", arXiv:2006.04768).

    E and F are proj_len × max_len matrices per layer, shared by all heads (the paper's headwise sharing);
    `sharing: key_value` uses one matrix for both (E = F). K' = E·K, V' = F·V: k rows of H_kv·h each.
    Convention (docs/attention-linformer.md): a forward call's queries attend to the k rows projected from
    every token so far — the prompt is bidirectional, as in the paper; each decode step adds its own
    column of E (and F) to the cached rows (a rank-1 update, 2·k·H_kv·h FLOPs for K and for V) and
    attends to the k rows. The cache is the k projected rows, whatever the length.
    """

    kind: Literal["linformer"] = "linformer"
    proj_len: PosInt
    max_len: PosInt
    sharing: Literal["headwise", "key_value"] = "headwise"

    own_key_pattern: ClassVar[bool] = True
    explain_legend: ClassVar[dict[str, str]] = {
        "k_L": "Linformer projected length (rows of K' and V')", "n_L": "Linformer max length (columns of E and F)"}

    @property
    def label(self) -> str:
        return f"Linformer {self.heads}q/{self.kv_heads}kv × {self.head_dim}, k {self.proj_len} of {self.max_len}"

    @property
    def kind_label(self) -> str:
        return f"Linformer {self.heads}h"

    def matrices(self, d_model: int) -> dict[str, list[tuple[int, int]]]:
        """GQA's, and E (and F): proj_len × max_len, applied along the sequence."""
        out = super().matrices(d_model) | {"seq_proj_e": [(self.max_len, self.proj_len)]}
        return out | ({"seq_proj_f": [(self.max_len, self.proj_len)]} if self.sharing == "headwise" else {})

    def params(self, d_model: int) -> Parts:
        out = super().params(d_model) | {"seq_proj_e": self.proj_len * self.max_len}
        if self.sharing == "headwise":
            out["seq_proj_f"] = self.proj_len * self.max_len
        return out

    def keys_window(self, window: int | None) -> int | None:
        return self.proj_len

    def pairs(self, new: int, context: int, window: int | None, attention: str = "causal") -> int:
        """Every query sees the k projected rows, masked by nothing: the same under every convention."""
        return new * self.proj_len

    def diagonal(self, new: int, context: int, window: int | None) -> int:
        """No causal mask over the projected rows: no pair counts half."""
        return 0

    def explain_diagonal(self, phase: str, sliding: bool) -> str:
        return "0"

    def core_from(self, counts: Mapping[str, Any], new: Any, absorbed: bool = False) -> Parts:
        out = super().core_from(counts, new, absorbed)
        proj = 2 * self.proj_len * new * self.kv_width  # E's columns of the new tokens times their K (F: V)
        return out | {"seq_proj_k": proj, "seq_proj_v": proj}

    def cached_tokens(self, seq: int, window: int | None) -> int:
        """The k projected rows, whatever the length."""
        return self.proj_len

    def step_cache_bytes(self, counts: Mapping[str, Any], batch: Any, bits: int) -> Any:
        """A decode step reads the k rows and writes them back updated."""
        return 2 * self.cache_bytes(batch * self.proj_len, bits)

    def reads_fresh_keys(self, seq: int, window: int | None) -> bool:
        """Attention reads the k projected rows, never the fresh keys."""
        return False

    def prefill_activation_bytes(self, d_model: int, seq: int, window: int | None, act: int, rope: bool,
                                 qk_norm: str) -> int:
        """GQA's stages, the projection E·K also holding a contiguous copy of K (H_kv·h), and per sequence
        the k projected rows of K and V (2·k·H_kv·h, spread over its tokens)."""
        rows = ceil_div(2 * self.proj_len * self.kv_width, seq)
        return max(super().prefill_activation_bytes(d_model, seq, window, act, rope, qk_norm),
                   act * (self.q_width + 3 * self.kv_width + rows))

    def knee(self, window: int | None) -> int | None:
        return None

    def frozen_passes(self, name: str, projection: bool) -> int:
        """E and F are weights: frozen, their products keep K's and V's gradient only (2)."""
        return 2 if name.startswith("seq_proj_") else super().frozen_passes(name, projection)

    def layer_type(self, window: int | None) -> str:
        return f"linformer k={self.proj_len}"

    @property
    def kv_note(self) -> str:
        return f"Linformer: each layer keeps the {self.proj_len} projected rows of K and V, whatever the length"

    @property
    def pattern_note(self) -> str:
        return (f"Linformer: every query sees the {self.proj_len} projected rows (unmasked, both conventions); the "
                "prompt is bidirectional, decode updates the rows; see docs/attention-linformer.md")

    def check_spec(self, spec: Any) -> None:
        """E and F span the model's longest sequence; no sliding-window layers."""
        if self.max_len != spec.max_seq_len:
            raise ValueError(
                f"attention.max_len: {self.max_len} differs from max_seq_len ({spec.max_seq_len}); "
                "Linformer's E and F span the longest sequence: set them equal"
            )
        super().check_spec(spec)

    def explain_symbols(self, kv_bits: int | None = None) -> dict[str, int]:
        return super().explain_symbols(kv_bits) | {"k_L": self.proj_len, "n_L": self.max_len}

    def explain_parts(self) -> dict[str, tuple[str, str | None]]:
        """GQA's, and E (and F): k_L · n_L each, applied along the sequence (no weights per token)."""
        out = super().explain_parts() | {"seq_proj_e": ("k_L · n_L", None)}
        return out | ({"seq_proj_f": ("k_L · n_L", None)} if self.sharing == "headwise" else {})

    def explain_cached_tokens(self, sliding: bool) -> str:
        return "k_L"

    def explain_pairs(self, phase: str, attention: str, sliding: bool) -> str:
        return "k_L" if phase == "decode" else "S · k_L"

    def explain_extra_core(self, phase: str, attention: str) -> dict[str, str]:
        rows = "2 · k_L · H_kv · h" if phase == "decode" else "2 · k_L · S · H_kv · h"
        return {"seq_proj_k": rows, "seq_proj_v": rows}


class Reformer(GQA):
    """Reformer's LSH attention with shared QK (Kitaev, Kaiser, Levskaya 2020, "Reformer: The Efficient
    Transformer", arXiv:2001.04451).

    Queries and keys share one projection (no k matrix; keys are the normalized queries), so kv_heads =
    heads. Each of `n_hashes` rounds hashes every query/key with a random rotation R (h × n_buckets/2,
    not learned): bucket = argmax([xR; −xR]), 2·h·(b/2) = h·b FLOPs per token, head and round. Sorted by
    (bucket, position) and cut into chunks of `chunk_len` c, a query attends to its chunk and the previous
    one: min(S, 2c) keys per round, every slot computed (which of them a causal mask hides depends on the
    hashes: both conventions count the computed slots). Decode: the new token is hashed and attends, per
    round, to the min(S + 1, 2c) cached keys just before it in that round's order. The cache keeps each
    token's key and value (2·H·h elements) and its bucket per round and head (one byte each).
    """

    kind: Literal["reformer"] = "reformer"
    n_hashes: PosInt
    n_buckets: PosInt
    chunk_len: PosInt

    affine_after_knee: ClassVar[bool] = True
    own_key_pattern: ClassVar[bool] = True
    explain_legend: ClassVar[dict[str, str]] = {
        "n_h": "Reformer hash rounds", "n_b": "Reformer buckets per round", "c_R": "Reformer chunk length"}

    @model_validator(mode="after")
    def _shared_qk(self) -> "Reformer":
        if self.kv_heads != self.heads:
            raise ValueError(f"attention.kv_heads: Reformer shares queries and keys, so kv_heads ({self.kv_heads}) "
                             f"must equal heads ({self.heads}); set kv_heads to {self.heads}")
        if self.n_buckets % 2 or not 2 <= self.n_buckets <= 256:
            raise ValueError(f"attention.n_buckets: {self.n_buckets} must be even and in 2..256 (a random rotation "
                             "gives n_buckets/2 directions, a bucket id is one byte); use e.g. 64")
        return self

    @property
    def label(self) -> str:
        return (f"Reformer LSH {self.heads}h × {self.head_dim}, {self.n_hashes} hashes × {self.n_buckets} buckets, "
                f"chunk {self.chunk_len}")

    @property
    def kind_label(self) -> str:
        return f"Reformer {self.heads}h"

    def _shapes(self, d_model: int) -> dict[str, tuple[int, int]]:
        shapes = super()._shapes(d_model)
        del shapes["k"]  # shared QK: the keys are the (normalized) queries
        return shapes

    def params(self, d_model: int) -> Parts:
        parts = super().params(d_model)
        del parts["k"]
        return parts

    def rope_elements(self) -> int:
        """RoPE rotates the shared query/key once per head: H·d_rot."""
        return self.heads * (self.head_dim - self.head_dim % 2)

    def keys_window(self, window: int | None) -> int | None:
        return 2 * self.chunk_len

    def pairs(self, new: int, context: int, window: int | None, attention: str = "causal") -> int:
        """Every round: a prefill computes min(S, 2c) key slots per query; a decode step min(context + 1, 2c)."""
        span = 2 * self.chunk_len
        if context == 0:
            return self.n_hashes * new * min(new, span)
        return self.n_hashes * sum_min(context + 1, context + new, span)

    def diagonal(self, new: int, context: int, window: int | None) -> int:
        """Every key slot of a round is computed, masked or not: no pair counts half."""
        return 0

    def explain_diagonal(self, phase: str, sliding: bool) -> str:
        return "0"

    def core_from(self, counts: Mapping[str, Any], new: Any, absorbed: bool = False) -> Parts:
        out = super().core_from(counts, new, absorbed)
        return out | {"lsh_hash": new * self.n_hashes * self.heads * self.head_dim * self.n_buckets}

    def prefill_activation_bytes(self, d_model: int, seq: int, window: int | None, act: int, rope: bool,
                                 qk_norm: str) -> int:
        """Bytes per token at the peak of a prefill (docs/formulas.md#inference-peak), the chunked kernel: the
        larger of hashing (Q and V, the unit keys, and Q laid out for the rotation with its H·n·b/2 rotated
        values, or those and per round and head the largest value and its index of both signs) and sorting (Q, the bucket
        ids, their sort keys, and the sort's values and indices, int64, H·n each); beside Q, RoPE's half of
        Q's rotated features; attention (Q, the output and its log-sum-exp, and the sorted order)."""
        q, h, n = self.q_width, self.heads, self.n_hashes
        rotated = h * n * self.n_buckets // 2
        hashing = max(act * (4 * q + rotated), act * (3 * q + rotated) + h * n * (2 * act + 16))
        stages = [hashing, act * q + 32 * h * n, act * (2 * q) + 4 * h + 8 * h * n, act * (q + d_model)]
        if rope:
            stages.append(act * (2 * q + h * (self.rope_dim // 2)))
        return max(stages)

    def train_passes(self, name: str) -> int:
        """Hashing takes an argmax, so no gradient flows through it: 1 × forward; the rest 3."""
        return 1 if name == "lsh_hash" else 3

    def cached_tokens(self, seq: int, window: int | None) -> int:
        """Every token stays cached: any of them can share a later query's bucket."""
        return seq

    def cache_bytes(self, tokens: int, bits: int) -> int:
        """Keys and values at `bits`, plus one byte per token, head and round for the bucket id."""
        return packed_bytes(tokens * self.kv_elements(), bits) + tokens * self.heads * self.n_hashes

    def knee(self, window: int | None) -> int | None:
        return 2 * self.chunk_len

    def layer_type(self, window: int | None) -> str:
        return f"reformer {self.n_hashes}×{self.n_buckets}, chunk {self.chunk_len}"

    @property
    def kv_note(self) -> str:
        return (f"Reformer: every token's shared-QK key and value, plus a one-byte bucket id per head and round "
                f"({self.heads} × {self.n_hashes} bytes per token and layer)")

    @property
    def pattern_note(self) -> str:
        return (f"Reformer: every computed slot counted, min(S, 2c) keys per query in each of {self.n_hashes} rounds "
                "(both conventions); hashing apart (lsh_hash); see docs/attention-reformer.md")

    def explain_symbols(self, kv_bits: int | None = None) -> dict[str, int]:
        return super().explain_symbols(kv_bits) | {"n_h": self.n_hashes, "n_b": self.n_buckets, "c_R": self.chunk_len}

    def explain_parts(self) -> dict[str, tuple[str, str | None]]:
        """GQA's without k (shared QK)."""
        parts = super().explain_parts()
        del parts["k"]
        return parts

    def explain_kv(self, layers: str, bits: int, sliding: bool) -> str:
        """Every token's key and value, rounded up per layer, and its bucket ids (a byte per head and round)."""
        return f"{layers} · ((2 · H_kv · h · B · S · bits + 7) // 8 + B · S · H · n_h)"

    def explain_pairs(self, phase: str, attention: str, sliding: bool) -> str:
        return "n_h · min(S + 1, 2 · c_R)" if phase == "decode" else "n_h · S · min(S, 2 · c_R)"

    def explain_extra_core(self, phase: str, attention: str) -> dict[str, str]:
        """Hashing: h × n_b/2 rotations, 2 FLOPs each, per head, round and new token."""
        return {"lsh_hash": ("" if phase == "decode" else "S · ") + "n_h · H · h · n_b"}

    def explain_rotated(self) -> str:
        return "H · 2 · (h // 2)"


class DSA(MLA):
    """DeepSeek Sparse Attention (DeepSeek-V3.2-Exp): MLA attending to the top-k keys of a lightning indexer.

    Indexer per layer: q from the query latent, r_q → H_I·d_I (index_q); one key shared by its heads,
    d → d_I (index_k) then a LayerNorm (weight and bias, 2·d_I); per-head weights d → H_I (index_w).
    Score of query t for key s: Σ_h w_h · ReLU(q_h · k_s) — 2·H_I·d_I FLOPs for the dot products and
    2·H_I for the weighted head sum per (query, key) pair, over every earlier key (causal i keys).
    MLA then attends to the top-k: min(i, k) keys per query (dense convention: min(S, k) slots each).
    Cache per token and layer: MLA's latent and RoPE key (r_kv + d_r, in the kv dtype) and the
    indexer key (d_I, in index_cache_dtype, default the kv dtype; the release stores it in fp8).
    """

    kind: Literal["dsa"] = "dsa"
    index_heads: PosInt
    index_head_dim: PosInt
    index_topk: PosInt = 2048
    index_cache_dtype: CacheDtype | None = None

    affine_after_knee: ClassVar[bool] = True
    own_key_pattern: ClassVar[bool] = True
    explain_legend: ClassVar[dict[str, str]] = {
        "H_I": "DSA indexer heads", "d_I": "DSA indexer head dim (its cached key)", "k_I": "DSA top-k keys per query",
        "bits_I": "bits per element of the DSA indexer key cache"}

    @model_validator(mode="after")
    def _indexer(self) -> "DSA":
        if self.q_lora_rank is None:
            raise ValueError("attention.q_lora_rank: DSA's indexer reads the query latent; set q_lora_rank "
                             "(DeepSeek-V3.2-Exp: 1536)")
        if self.index_head_dim < self.qk_rope_head_dim:
            raise ValueError(f"attention.index_head_dim: {self.index_head_dim} is below qk_rope_head_dim "
                             f"({self.qk_rope_head_dim}), whose RoPE it carries; raise it (DeepSeek-V3.2-Exp: 128)")
        return self

    @property
    def label(self) -> str:
        return (f"DSA {self.heads}h, latent {self.kv_lora_rank}+{self.qk_rope_head_dim}, indexer "
                f"{self.index_heads}×{self.index_head_dim}, top-{self.index_topk}")

    def _shapes(self, d_model: int) -> dict[str, tuple[int, int]]:
        return super()._shapes(d_model) | {"index_q": (self.q_lora_rank, self.index_heads * self.index_head_dim),
                                           "index_k": (d_model, self.index_head_dim),
                                           "index_w": (d_model, self.index_heads)}

    def params(self, d_model: int) -> Parts:
        return super().params(d_model) | {
            "index_q": linear(self.q_lora_rank, self.index_heads * self.index_head_dim, False),
            "index_k": linear(d_model, self.index_head_dim, False),
            "index_k_norm": 2 * self.index_head_dim,
            "index_w": linear(d_model, self.index_heads, False),
        }

    def rope_elements(self) -> int:
        """Elements RoPE rotates per token: MLA's (H + 1)·d_r and the indexer's (H_I + 1)·d_r."""
        return (self.heads + 1 + self.index_heads + 1) * self.qk_rope_head_dim

    def kv_elements(self) -> int:
        """Cached elements per token per layer: latent, RoPE key and the indexer key, r_kv + d_r + d_I."""
        return self.kv_lora_rank + self.qk_rope_head_dim + self.index_head_dim

    def kv_formula(self) -> tuple[str, str]:
        return "(d_c + d_r + d_I)", f"({self.kv_lora_rank} + {self.qk_rope_head_dim} + {self.index_head_dim})"

    def cache_bytes(self, tokens: int, bits: int) -> int:
        index_bits = _BITS[self.index_cache_dtype] if self.index_cache_dtype else bits
        return (packed_bytes(tokens * (self.kv_lora_rank + self.qk_rope_head_dim), bits)
                + packed_bytes(tokens * self.index_head_dim, index_bits))

    tp_whole: ClassVar[tuple[str, ...]] = MLA.tp_whole + ("index_q", "index_k", "index_k_norm", "index_w")
    """MLA's, and the indexer (one small head set every rank runs whole)."""

    def saved_elements(self, d_model: int) -> int:
        """MLA's, and what the indexer keeps for the backward pass per token: its q, k and head weights."""
        indexer = self.index_heads * self.index_head_dim + self.index_head_dim + self.index_heads
        return super().saved_elements(d_model) + indexer

    def saved_inputs(self, d_model: int) -> list[tuple[tuple[str, ...], int]]:
        """MLA's, and the indexer's q, k and head weights, which nothing reads once the indexer is frozen (its
        input is detached)."""
        indexer = self.index_heads * self.index_head_dim + self.index_head_dim + self.index_heads
        return super().saved_inputs(d_model) + [((), indexer)]

    def frozen_passes(self, name: str, projection: bool) -> int:
        """The indexer frozen, its input detached: its projections and its scoring run forward only (1)."""
        return 1 if name.startswith("index_") else super().frozen_passes(name, projection)

    def keys_window(self, window: int | None) -> int | None:
        return min(self.index_topk, window) if window else self.index_topk

    def dense_pairs(self, seq: int, window: int | None) -> int:
        return seq * min(seq, self.keys_window(window))

    def cached_tokens(self, seq: int, window: int | None) -> int:
        """Every token stays cached: the indexer scores them all."""
        return min(seq, window - 1) if window else seq

    def index_pairs(self, new: int, context: int, window: int | None, attention: str = "causal") -> int:
        """(query, key) pairs the indexer scores: every earlier key (causal), S×S in a dense prefill."""
        if attention == "dense" and context == 0:
            return new * new
        return sum_min(context + 1, context + new, window)

    def index_per_pair(self) -> Parts:
        return {"index_scores": 2 * self.index_heads * self.index_head_dim, "index_weights": 2 * self.index_heads}

    def half_counts(self, new: int, context: int, window: int | None) -> dict[str, int]:
        """MLA's, and the indexer's scored pairs likewise: 2 · causal − its own diagonal (window-capped only)."""
        out = super().half_counts(new, context, window)
        out["index_pairs"] -= new if window is None else min(context + new, window) - min(context, window)
        return out

    def counts(self, new: int, context: int, window: int | None, attention: str = "causal") -> dict[str, int]:
        """MLA's, the indexer's scored pairs, and in a decode step the latents it selects: min(keys, top-k)."""
        out = super().counts(new, context, window, attention)
        out["index_pairs"] = self.index_pairs(new, context, window, attention)
        if context:
            out["chosen"] = min(out["keys"], self.index_topk)
        return out

    def core_from(self, counts: Mapping[str, Any], new: Any, absorbed: bool = False) -> Parts:
        out = super().core_from(counts, new, absorbed)
        p = counts["index_pairs"]
        return out | {k: p * c for k, c in self.index_per_pair().items()}

    def step_cache_bytes(self, counts: Mapping[str, Any], batch: Any, bits: int) -> Any:
        """Bytes one decode step reads from (and writes to) the cache: every indexer key, the selected top-k
        latents."""
        index_bits = _BITS[self.index_cache_dtype] if self.index_cache_dtype else bits
        return (packed_bytes(counts["chosen"] * (self.kv_lora_rank + self.qk_rope_head_dim), bits)
                + packed_bytes(counts["keys"] * self.index_head_dim, index_bits))

    def prefill_activation_bytes(self, d_model: int, seq: int, window: int | None, act: int, rope: bool,
                                 qk_norm: str) -> int:
        """Bytes per token at the peak of a prefill (docs/formulas.md#inference-peak), serving kernels: the
        projections (the query latent, Q, the indexer's q, k, its LayerNorm and head weights, the KV latent
        and its normed copy) and RoPE's half of Q's rotated features; the indexer beside Q (its q, k and
        head weights, k in the activation dtype, and each query's top-k key indices, int32, when the
        context exceeds top-k); then MLA's stages when every key is selected, else Q, the top-k indices
        and the output (H·d_v) (attention in the latent space); the output and the projection's, d."""
        h, dv, hi, di = self.heads, self.v_head_dim, self.index_heads, self.index_head_dim
        q, iq = h * self.qk_head_dim, hi * di
        latent = self.kv_lora_rank + self.qk_rope_head_dim
        proj = q + iq + latent + self.kv_lora_rank + 2 * di + hi
        stages = [act * (self.q_lora_rank + q + iq), act * proj, act * (h * dv + d_model)]
        if rope:
            stages.append(act * (proj + h * (self.rope_dim // 2)))
        topk = 4 * self.index_topk if seq > self.index_topk else 0
        stages.append(act * (q + iq + hi + di) + topk)
        if topk:
            stages.append(act * (q + h * dv) + topk)
        else:
            stages.append(super().prefill_activation_bytes(d_model, seq, window, act, rope, qk_norm))
        return max(stages)

    def activation_key(self, seq: int, window: int | None) -> Any:
        """prefill_activation_bytes depends on seq through MLA's key and whether it exceeds top-k."""
        return super().activation_key(seq, window), seq > self.index_topk

    def train_passes(self, name: str) -> int:
        """The indexer trains on its own loss with its input detached (DeepSeek-V3.2-Exp, sec. 2.1): its
        projections cost forward + weight gradients (2); its scoring, both operands trained, 3."""
        return 2 if name in ("index_q", "index_k", "index_w") else 3

    def knee(self, window: int | None) -> int | None:
        return self.keys_window(window)

    def layer_type(self, window: int | None) -> str:
        return f"dsa top-{self.index_topk}" + (f", sliding {window}" if window else "")

    @property
    def kv_note(self) -> str:
        dtype = self.index_cache_dtype or "the kv dtype"
        return (f"DSA: MLA's latent and RoPE key (r_kv + d_r) plus the indexer key (d_I = {self.index_head_dim}, "
                f"in {dtype}) per token and layer")

    @property
    def pattern_note(self) -> str:
        return (f"DSA: the indexer scores every earlier key (index_*), MLA attends to min(i, {self.index_topk}) "
                "selected keys; see docs/attention-dsa.md")

    def explain_symbols(self, kv_bits: int | None = None) -> dict[str, int]:
        """MLA's, H_I, d_I, k_I, and with kv_bits the indexer cache's bits_I."""
        out = super().explain_symbols(kv_bits) | {"H_I": self.index_heads, "d_I": self.index_head_dim,
                                                  "k_I": self.index_topk}
        if kv_bits is not None:
            out["bits_I"] = _BITS[self.index_cache_dtype] if self.index_cache_dtype else kv_bits
        return out

    def explain_parts(self) -> dict[str, tuple[str, str | None]]:
        """MLA's, and the indexer's projections and key norm."""
        return super().explain_parts() | {
            "index_q": ("r_q · H_I · d_I", "r_q · H_I · d_I"), "index_k": ("d · d_I", "d · d_I"),
            "index_k_norm": ("2 · d_I", None), "index_w": ("d · H_I", "d · H_I")}

    def explain_kv(self, layers: str, bits: int, sliding: bool) -> str:
        """The latent and RoPE key at the kv bits, the indexer key at bits_I, each rounded up per layer."""
        return f"{layers} · (((r_kv + d_r) · B · S · bits + 7) // 8 + (d_I · B · S · bits_I + 7) // 8)"

    def explain_pairs(self, phase: str, attention: str, sliding: bool) -> str:
        return capped_pairs("k_I", phase, attention)

    def explain_diagonal(self, phase: str, sliding: bool) -> str:
        return capped_diagonal("k_I", phase)

    def explain_extra_core(self, phase: str, attention: str) -> dict[str, str]:
        """The indexer scores every earlier key: 2·H_I·d_I per pair for the scores, 2·H_I for the head sum."""
        if attention == "causal-half":  # twice the area under the mask, halved per sequence
            twice = "2 · S + 1" if phase == "decode" else "S · S"
            return {"index_scores": f"(({twice}) · 2 · H_I · d_I // 2)", "index_weights": f"(({twice}) · 2 · H_I // 2)"}
        every = "S + 1" if phase == "decode" else "S · S" if attention == "dense" else "S · (S + 1) // 2"
        return {"index_scores": f"({every}) · 2 · H_I · d_I", "index_weights": f"({every}) · 2 · H_I"}

    def explain_rotated(self) -> str:
        return "(H + 1 + H_I + 1) · d_r"

    def explain_saved(self) -> str:
        return super().explain_saved() + " + H_I · d_I + d_I + H_I"
