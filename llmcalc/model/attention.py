"""Attention: the `Attention` base every variant derives from, and the GQA family.

GQA covers MHA (kv_heads = heads) and MQA (kv_heads = 1); MLA, DeepSeek's multi-head latent attention, is in
llmcalc/model/mla.py. Each family lists its projections by name so reports can break them down, and states its
`llmcalc explain` terms. See docs/formulas.md#attention.
"""

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Literal

from pydantic import model_validator

from llmcalc.model import terms
from llmcalc.model.base import Parts, PosInt, Variant
from llmcalc.model.lora import Adaptable
from llmcalc.model.units import ceil_div, packed_bytes

LORA_TARGETS_OF = {"q": ("q",), "k": ("k",), "v": ("v",), "o": ("o",), "q_down": ("q",), "q_up": ("q",),
                   "kv_down": ("k", "v"), "kv_up": ("k", "v")}
"""The LoRA targets that adapt each attention projection (llmcalc/model/lora.py); other matrices (DSA's indexer,
Linformer's sequence projections) are never adapted."""


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


FLASH_PASSES = {"core_scores": 4, "core_values": 3}
"""Forward + backward of the core's two matmul kinds under a flash kernel, in forwards (Attention.kernel_passes)."""


class Attention(Variant):
    """Which keys a query sees, what that costs, and how `llmcalc explain` writes it: the one place a layer's
    attention lives. Subclassing registers a new `kind` (llmcalc/model/base.py).

    Every estimator (params, kv, flops, memory, latency, sweep, compare, explain) asks these methods and
    attributes; a variant overrides what differs. Defaults: query i (1-based) sees min(i, W) keys, W the
    layer's window (None: all earlier tokens); a layer caches min(S, W − 1) tokens per sequence. A variant
    also gives: `heads`, `label`, `kind_label`, params, matmuls, matrices, io, query_io, key_value_io,
    kv_elements, kv_formula, core_per_pair, softmax_per_pair, normed_elements, rope_dim, rope_elements, qk_norm_widths, saved_elements,
    prefill_activation_bytes (with its activation_key), gqa_shape, scaled_fields and the explain terms
    explain_symbols, explain_parts, explain_qk_norm, explain_kv, explain_kv_note, explain_pair_costs,
    explain_rotated, explain_saved.
    """

    kinds: ClassVar[dict[str, type[Variant]]] = {}
    variant_modules: ClassVar[dict[str, str]] = {
        "gqa": "llmcalc.model.attention", "mla": "llmcalc.model.mla",
        "chunked": "llmcalc.model.chunked_attention",
        "cross": "llmcalc.model.cross_attention",
        "mamba2": "llmcalc.model.state_space", "mamba": "llmcalc.model.state_space",
        "parallel": "llmcalc.model.state_space",
        "gated_deltanet": "llmcalc.model.deltanet", "lightning": "llmcalc.model.lightning",
        "short_conv": "llmcalc.model.short_conv", "gemma3n": "llmcalc.model.gemma3n",
        "longformer": "llmcalc.model.sparse_attention", "linformer": "llmcalc.model.sparse_attention",
        "reformer": "llmcalc.model.sparse_attention", "dsa": "llmcalc.model.sparse_attention",
    }
    """Each kind's module, imported when a spec names the kind (Variant)."""
    affine_after_knee: ClassVar[bool] = False
    """Whether a decode step's cost still grows linearly in the context past the knee (llmcalc/costs/latency.py)."""
    latent_cache: ClassVar[bool] = False
    """Whether the cache holds a latent that decode attends to either absorbed or decompressed (MLA): the
    mla_decode convention applies, and the variant gives absorbed_matmuls and explain_absorbed."""
    head_dim_default: ClassVar[bool] = False
    """Whether a spec that leaves `head_dim` out gets d_model / heads (attention over the model's width, as
    transformers defaults it; not a recurrent mixer's heads, which split its own inner width)."""
    reprojected: ClassVar[tuple[str, ...]] = ()
    """Projections a decompressed decode step applies to every cached latent it attends to (MLA: kv_up)."""
    def core_kernel(self, prefill: bool, absorbed: bool) -> str:
        """The kernel class an engine runs this mixer's core on (llmcalc/model/engine_profile.py KERNEL_CLASSES):
        attention over a prompt, or a decode step's over its cache."""
        return "attention_prefill" if prefill else "attention_decode"

    own_key_pattern: ClassVar[bool] = False
    """Whether the variant sets which keys each query sees itself, so sliding-window layers do not apply."""
    fixed_state: ClassVar[bool] = False
    """Whether the layer keeps a fixed-size state per sequence (a recurrent mixer) rather than entries per token."""
    query_key_pairs: ClassVar[bool] = True
    """Whether the core scores (query, key) pairs under a mask that causal-half halves; a recurrent state has none."""
    reference_activations: ClassVar[str | None] = None
    """Why the reference module's activations differ from the ones the memory model counts (validate then leaves
    the peak-memory row out with this note), or None when they are the same."""

    def for_images(self, tokens: int) -> "Attention":
        """This mixer when each sequence brings `tokens` image tokens to cross-attention layers: itself (only a
        cross-attention layer reads them: llmcalc/model/cross_attention.py)."""
        return self

    def reading_shared_kv(self) -> "Attention":
        """This mixer in a layer that reads an earlier layer's K/V instead of projecting its own (Gemma 3n's last
        num_kv_shared_layers layers: llmcalc/model/gemma3n.py); a kind that has no such form is refused."""
        raise ValueError(f"attention.kind: {self.kind} layers cannot read an earlier layer's K/V; use kind gemma3n "
                         "or share no layers")

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

    def normed_elements(self) -> int:
        """Elements per token the attention's own norms normalise, besides the QK norms (MLA: its latents); 0."""
        return 0

    def repeated_kv_elements(self) -> int:
        """Elements per token eager PyTorch's copy of the keys and values to every query head reads and writes
        (Llama's reference code: repeat_kv before the attention kernel); 0: none is copied."""
        return 0

    def eager_saved_elements(self) -> int:
        """Elements per token an eager layer keeps for its backward beyond a fused one (the copied keys and values
        the attention kernel keeps); 0."""
        return 0

    def softmax_per_pair(self) -> int:
        """Element-wise FLOPs of the softmax per (query, key) pair: 3 per head (exp, sum, divide; Hoffmann et al.
        2022, Appendix F: 3·H per score)."""
        return 3 * self.heads

    def dense_pairs(self, seq: int, window: int | None) -> int:
        """Pairs a masked dense kernel computes in a prefill of `seq` tokens: S×S."""
        return seq * seq

    def diagonal(self, new: int, context: int, window: int | None) -> int:
        """Queries among `new` after `context` whose keys the window does not cap yet (query i ≤ W): those whose
        own key sits on the causal mask's diagonal, counted as half a pair under causal-half.
        min(c + n, W) − min(c, W), or n without a cap."""
        w = self.keys_window(window)
        return new if w is None else min(context + new, w) - min(context, w)

    def half_counts(self, new: int, context: int, window: int | None) -> dict[str, int]:
        """Twice the counts under causal-half (docs/formulas.md#causal-half): the area under the causal mask
        rather than its squares, so a full-layer prefill has S²/2 pairs. pairs: 2 · causal − diagonal (each
        uncapped query's own key counts half); the other counts doubled. Doubled so they stay whole numbers."""
        out = {k: 2 * v for k, v in self.counts(new, context, window).items()}
        out["pairs"] -= self.diagonal(new, context, window)
        return out

    def counts(self, new: int, context: int, window: int | None, attention: str = "causal") -> dict[str, int]:
        """What one sequence's attention costs are linear in, at a point: `new` queries after `context` cached
        tokens. pairs: (query, key) pairs; keys (a decode step, context > 0): the cached tokens it reads and
        the one it writes. core_from and step_cache_bytes take these summed over sequences, so a cost is
        exact coefficients × counts (llmcalc/costs/form.py); a variant names the same counts at every
        point of a phase."""
        out = {"pairs": self.pairs(new, context, window, attention)}
        if context:
            out["keys"] = self.cached_tokens(context, window) + new
        return out

    def chunk_counts(self, new: int, context: int, window: int | None) -> dict[str, int]:
        """counts of a prefill chunk: `new` queries after `context` cached tokens (causal), with keys present
        even at context 0: the cached tokens it reads and the new ones it writes (cache_bytes of them is the
        chunk's cache traffic)."""
        out = self.counts(new, context, window)
        out.setdefault("keys", new)  # context 0: nothing cached to read
        return out

    def core(self, new: int, context: int, window: int | None, attention: str = "causal",
             absorbed: bool = False) -> Parts:
        """Attention-core FLOPs of one sequence by component (core_from of its counts). causal-half: core_from of
        the doubled half_counts and 2·new, halved and rounded down per component (exact when the per-pair cost is
        even, as every matmul's is). A mixer with no (query, key) pairs (a recurrent state) has no mask to halve:
        its causal core (its counts need not be linear in the tokens: a chunked scan's first chunk is apart)."""
        if attention == "causal-half":
            if self.query_key_pairs:
                return {k: v // 2 for k, v in self.core_from(self.half_counts(new, context, window), 2 * new,
                                                             absorbed).items()}
            attention = "causal"
        return self.core_from(self.counts(new, context, window, attention), new, absorbed)

    def core_from(self, counts: Mapping[str, Any], new: Any, absorbed: bool = False) -> Parts:
        """Attention-core FLOPs by component from the counts and the new tokens (of one sequence or summed
        over many): pairs × per-pair cost."""
        p = counts["pairs"]
        return {k: p * c for k, c in self.core_per_pair(absorbed).items()}

    def cached_tokens(self, seq: int, window: int | None) -> int:
        """Tokens one sequence keeps in one layer's cache after `seq` tokens: min(S, W − 1), or S."""
        w = self.keys_window(window)
        return seq if not w or seq < w else w - 1  # min(S, W − 1), without a builtin call (sweep's hot path)

    def cache_bytes(self, tokens: int, bits: int) -> int:
        """Bytes of `tokens` cached tokens (of one layer, or token-layers) at `bits` per element, rounded up."""
        return packed_bytes(tokens * self.kv_elements(), bits)

    def layer_cache_bytes(self, batch: int, kept: int, bits: int) -> int:
        """Bytes one layer keeps for `batch` sequences that each keep `kept` tokens (cached_tokens)."""
        return self.held_bytes(batch * kept, batch, bits)

    def held_bytes(self, tokens: Any, seqs: Any, bits: int) -> Any:
        """Bytes one layer keeps for `seqs` sequences holding `tokens` cached tokens in all (a fixed state: one a
        sequence): cache_bytes of the tokens (a mixer with two caches, Parallel, sums its parts'). Ints or exact
        forms alike (sweep writes it over a grid's variables)."""
        return self.cache_bytes(tokens, bits)

    def token_cache_bytes(self, layers: int, bits: int) -> int:
        """Of `layers` layers' cache, the bytes each new token adds: cache_bytes(layers), 0 for a fixed state."""
        return 0 if self.fixed_state else self.cache_bytes(layers, bits)

    def sequence_cache_bytes(self, layers: int, bits: int) -> int:
        """Of `layers` layers' cache, the bytes each sequence holds whatever its length: a fixed state's."""
        return self.cache_bytes(layers, bits) if self.fixed_state else 0

    def prefill_cache_bytes(self, tokens: Any, batch: Any, bits: int) -> Any:
        """Bytes a prefill of `tokens` new tokens over `batch` sequences writes to the cache: every new token's."""
        return self.cache_bytes(tokens, bits)

    def step_cache_bytes(self, counts: Mapping[str, Any], batch: Any, bits: int) -> Any:
        """Bytes one decode step of `batch` sequences reads from and writes to the cache, from their summed
        counts: every cached key and the new one."""
        return self.cache_bytes(counts["keys"], bits)

    def reads_fresh_keys(self, seq: int, window: int | None) -> bool:
        """Whether a prefill of `seq` tokens attends over its freshly projected keys and values rather than
        over the cache: when the cache keeps fewer tokens than the prompt (a sliding window shorter than
        it), so both stay alive through the attention."""
        return self.cached_tokens(seq, window) < seq

    def activation_key(self, seq: int, window: int | None) -> Any:
        """What prefill_activation_bytes depends on `seq` through, so that a sweep computes it once per value:
        `seq` itself here. A class that defines prefill_activation_bytes may define a coarser key beside it;
        one that redefines the bytes but not the key gets `seq` back (__pydantic_init_subclass__)."""
        return seq

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if "prefill_activation_bytes" in cls.__dict__ and "activation_key" not in cls.__dict__:
            cls.activation_key = Attention.activation_key

    def train_passes(self, name: str) -> int:
        """Forward + backward cost of component `name` in forwards: 3 (the backward costs two)."""
        return 3

    def kernel_passes(self, name: str, kernel: str) -> int:
        """Forward + backward work of component `name` in forwards as the attention kernel runs it (hardware FLOPs).
        flash recomputes the scores in its backward (FlashAttention; torch's FlopCounterMode counts its SDPA
        backward so): core_scores 4 (forward, QKᵀ again, dQ = dS·K, dK = dSᵀ·Q), core_values 3 (forward,
        dV = Pᵀ·dO, dP = dO·Vᵀ), 3.5 × the core's forward when the two are equal; eager keeps train_passes."""
        if kernel == "flash" and name in FLASH_PASSES:
            return FLASH_PASSES[name]
        return self.train_passes(name)

    def recompute_op(self, name: str, d_model: int) -> str:
        """The recompute op (llmcalc/workload.py RECOMPUTE_OPS) component `name` belongs to: `attention_out` for the
        output projection o, `qkv` for every other projection of the layer's input, `attention` for the core."""
        if name == "o":
            return "attention_out"
        return "qkv" if name in self.matmuls(d_model) else "attention"

    def frozen_passes(self, name: str, projection: bool) -> int:
        """Forward + backward cost of component `name` in forwards when every weight is frozen and the input
        gradient flows through it (LoRA): a `projection` drops its weight gradient (train_passes − 1: 2), the
        core keeps train_passes (its operands are activations)."""
        return self.train_passes(name) - (1 if projection else 0)

    def adaptable(self, d_model: int) -> list[Adaptable]:
        """The projections a LoRA adapter can go on, with the targets that adapt each (LORA_TARGETS_OF)."""
        return [Adaptable(name, LORA_TARGETS_OF[name], d_in, d_out)
                for name, shapes in self.matrices(d_model).items() if name in LORA_TARGETS_OF
                for d_in, d_out in shapes]

    def saved_inputs(self, d_model: int) -> list[tuple[tuple[str, ...], int]]:
        """The projections' inputs that saved_elements counts, per token, each with the projections that read it
        (a frozen projection does not keep its input: only an adapter on it does)."""
        return []

    def lora_saved_elements(self, d_model: int, targets: frozenset[str]) -> int:
        """Elements per token a LoRA training layer keeps for the backward pass, the adapters' own r-wide
        intermediates aside: saved_elements less every projection input that no adapted projection reads."""
        adapted = {a.component for a in self.adaptable(d_model) if a.adapted(targets)}
        unread = sum(n for readers, n in self.saved_inputs(d_model) if adapted.isdisjoint(readers))
        return self.saved_elements(d_model) - unread

    def unfused_score_elements(self, seq: int, window: int | None) -> int:
        """Elements per token an attention without flash holds beside its output in a prefill of `seq` tokens:
        its scores (and probabilities, the caller's 2×) over the keys each query sees, H·min(S, W)."""
        w = self.keys_window(window)
        return self.heads * (min(seq, w) if w else seq)

    def saved_core_bytes(self, batch: int, seq: int, window: int | None, tp: int, act: int, flash: bool,
                         dropout: bool) -> int:
        """Bytes the core keeps for its backward on one of `tp` ranks (Korthikanti et al. 2022, §4.1): with flash
        attention the fp32 log-sum-exp per query and head, 4·B·⌈H/tp⌉·S; without it the softmax output over the
        S×S scores per head, and with dropout its mask (1 byte) and output: B·⌈H/tp⌉·S²·(a (+ 1 + a))."""
        heads = ceil_div(self.heads, tp)
        if flash:
            return 4 * batch * heads * seq
        return batch * heads * seq * seq * (act + (1 + act if dropout else 0))

    def explain_saved_core(self) -> str:
        """saved_core_bytes as text, under explain's flash attention: the fp32 log-sum-exp, 4 · B · H · S."""
        return "4 · B · H · S"

    def knee(self, window: int | None) -> int | None:
        """Context from which a decode step's cost stops growing linearly as before (None: never)."""
        return self.keys_window(window)

    @property
    def cache_heads(self) -> int | None:
        """Heads the cache splits over under tensor parallelism (None: it has no head axis, every rank holds
        all of it)."""
        return None

    tp_whole: ClassVar[tuple[str, ...]] = ()
    """Components (params() keys) every tensor-parallel rank holds whole: none here."""

    def tp_shards(self, component: str, tp: int) -> int:
        """Tensor-parallel ranks the parameters of `component` (a params() key) are split over in training
        (Megatron's column/row-parallel layers): tp, or 1 for the tp_whole ones."""
        return 1 if component in self.tp_whole else tp

    def tp_saved_elements(self, d_model: int, tp: int) -> int:
        """Of saved_elements, the elements per token one of `tp` tensor-parallel ranks keeps of the tensors it
        splits by head: all but the layer's input (d), which every rank holds whole (sequence parallelism
        splits that one over the sequence instead)."""
        return ceil_div(self.saved_elements(d_model) - d_model, tp)

    def layer_type(self, window: int | None) -> str:
        """A layer kind's name in the KV report: full, or sliding W."""
        return f"sliding {window}" if window else "full"

    @property
    def kv_note(self) -> str | None:
        """What the cache keeps, for the KV report, where it differs from K and V of every token (None)."""
        return None

    @property
    def pattern_note(self) -> str | None:
        """The variant's own pair rule, for the FLOPs report (None: the default)."""
        return None

    def decode_note(self, mla_decode: str) -> str | None:
        """How a decode step attends under the mla_decode convention, for the FLOPs report (None: one way)."""
        return None

    def check_spec(self, spec: Any) -> None:
        """Raise ValueError (naming the field and the fix) when this attention does not fit the rest of
        `spec` (a ModelSpec): a variant with its own key pattern refuses sliding-window layers."""
        if self.own_key_pattern and "sliding" in spec.layer_pattern:
            raise ValueError(f"layer_pattern: {self.kind} attention sets its own key pattern; use only full layers "
                             "and drop sliding_window")

    def mla_shape(self) -> dict[str, Any] | None:
        """Its fields when this is latent attention, which compare's MLA swap keeps (None: not latent)."""
        return None

    # ---- explain terms: formula text over explain_symbols (llmcalc/model/terms.py) -------------------

    def explain_cached_tokens(self, sliding: bool) -> str:
        """Tokens one sequence keeps per layer, as cached_tokens: min(S, W − 1) in a sliding layer, else S."""
        return "min(S, W − 1)" if sliding else "S"

    def explain_pairs(self, phase: str, attention: str, sliding: bool) -> str:
        """(query, key) pairs of one sequence in `phase` (prefill, decode, train), as pairs()."""
        if phase == "decode":
            return "min(S + 1, W)" if sliding else "S + 1"
        if attention == "dense":
            return "S · S"
        return "min(S, W) · (min(S, W) + 1) // 2 + (S − min(S, W)) · W" if sliding else "S · (S + 1) // 2"

    def explain_diagonal(self, phase: str, sliding: bool) -> str:
        """Queries whose own key causal-half counts as half a pair, as diagonal()."""
        if phase == "decode":
            return "min(S + 1, W) − min(S, W)" if sliding else "1"
        return "min(S, W)" if sliding else "S"

    def explain_extra_core(self, phase: str, attention: str) -> dict[str, str]:
        """Core components beyond the scores and values, per layer and sequence (as core())."""
        return {}

    def explain_decode_note(self, mla_decode: str) -> str | None:
        """decode_note for `llmcalc explain flops` (None: one way)."""
        return None


class FixedState:
    """What a mixer with a fixed state per sequence and no positions answers alike (the recurrent mixers, gated
    cross-attention; listed first among a variant's bases): one matrix per projection shape (`_shapes`), no fresh
    keys read from a per-token cache, no rotary positions, no q/k norms of the spec's."""

    own_key_pattern: ClassVar[bool] = True
    fixed_state: ClassVar[bool] = True

    def matrices(self, d_model: int) -> dict[str, list[tuple[int, int]]]:
        return {name: [shape] for name, shape in self._shapes(d_model).items()}

    def key_value_io(self) -> int:
        """No cached keys are read per token: 0."""
        return 0

    @property
    def rope_dim(self) -> int:
        return 0

    def rope_elements(self) -> int:
        return 0

    def repeated_kv_elements(self) -> int:
        return 0

    def eager_saved_elements(self) -> int:
        return 0

    def qk_norm_widths(self) -> tuple[int, int, int]:
        return 0, 0, 0


class GQA(Attention):
    """Grouped-query attention: `heads` query heads share `kv_heads` key/value heads.

    q: d·H·h, k and v: d·H_kv·h each, o: H·h·d (biases add the output width);
    sinks: one learned logit per head (gpt-oss).
    """

    kind: Literal["gqa"] = "gqa"
    head_dim_default: ClassVar[bool] = True
    heads: PosInt
    kv_heads: PosInt
    head_dim: PosInt
    qkv_bias: bool = False
    key_bias: bool = True
    """With qkv_bias, whether k has its bias too (Whisper: q and v are biased, k is not)."""
    o_bias: bool = False
    sinks: bool = False
    output_gate: bool = False
    """Qwen3-Next's gated attention: q's projection also gives a per-channel gate on the output (H·h more)."""

    @model_validator(mode="after")
    def _groups_divide(self) -> "GQA":
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
        q = self.q_width * (2 if self.output_gate else 1)
        return {"q": (d_model, q), "k": (d_model, self.kv_width), "v": (d_model, self.kv_width),
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

    def activation_key(self, seq: int, window: int | None) -> Any:
        """prefill_activation_bytes depends on seq only through reads_fresh_keys."""
        return self.reads_fresh_keys(seq, window)

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

    def rope_elements(self) -> int:
        """Elements RoPE rotates per token: every query and key head's, (H + H_kv)·d_rot, d_rot the head dim
        rounded down to even."""
        return (self.heads + self.kv_heads) * (self.head_dim - self.head_dim % 2)

    def qk_norm_widths(self) -> tuple[int, int, int]:
        """Widths a QK norm spans: one head (h), all query heads (H·h), all key heads (H_kv·h)."""
        return self.head_dim, self.q_width, self.kv_width

    def repeated_kv_elements(self) -> int:
        """K and V each read at H_kv heads and written at H (Llama's repeat_kv), 2·(H_kv + H)·h; 0 when every
        query head has its own key head (MHA)."""
        return 2 * (self.kv_width + self.q_width) if self.kv_heads < self.heads else 0

    def eager_saved_elements(self) -> int:
        """The attention kernel keeps the copied K and V at every query head, 2·(H − H_kv)·h more than the H_kv
        heads a fused layer keeps."""
        return 2 * (self.q_width - self.kv_width)

    def saved_elements(self, d_model: int) -> int:
        """Elements per token a training layer keeps for the backward pass: the q/k/v input (d), the o input
        and Q (H·h each), K and V (2·H_kv·h)."""
        return d_model + 2 * self.q_width + 2 * self.kv_width

    def saved_inputs(self, d_model: int) -> list[tuple[tuple[str, ...], int]]:
        """The q/k/v input (d). The o input (H·h) stays kept either way: it is the attention's output, which a
        flash kernel keeps for its own backward."""
        return [(("q", "k", "v"), d_model)]

    def tp_shards(self, component: str, tp: int) -> int:
        """k and v split by kv head: over min(tp, H_kv) ranks (a kv head is copied when tp exceeds H_kv);
        the rest over tp."""
        return min(tp, self.kv_heads) if component in ("k", "v") else tp

    def tp_saved_elements(self, d_model: int, tp: int) -> int:
        """Q and the o input (H·h each) split over tp, K and V (H_kv·h each) over min(tp, H_kv)."""
        return ceil_div(2 * self.q_width, tp) + 2 * self.kv_width // min(tp, self.kv_heads)

    @property
    def cache_heads(self) -> int | None:
        """K and V split over tensor-parallel ranks by kv head."""
        return self.kv_heads

    def gqa_shape(self) -> dict[str, Any]:
        """The GQA shape compare's swap rule keeps (heads, kv heads, head dim, biases, sinks)."""
        return self.model_dump(include={"heads", "kv_heads", "head_dim", "qkv_bias", "o_bias", "sinks"})

    def scaled_fields(self, div: Callable[[int], int]) -> dict[str, Any]:
        """Fields of a narrower copy: heads divided by `div` (a function), kv heads too (1 when that does not
        divide the heads), head dim kept."""
        out = self.model_dump()
        out["heads"] = div(self.heads)
        kv = div(self.kv_heads)
        out["kv_heads"] = kv if out["heads"] % kv == 0 else 1
        return out

    # ---- explain terms ----------------------------------------------------------------------------

    def explain_symbols(self, kv_bits: int | None = None) -> dict[str, int]:
        """H, H_kv, h (kv_bits: the cache's bits per element, for a variant caching some at other widths)."""
        return {"H": self.heads, "H_kv": self.kv_heads, "h": self.head_dim}

    def explain_parts(self) -> dict[str, tuple[str, str | None]]:
        """Per layer: (parameters, weights one token is multiplied by, or None) of each projection."""
        shapes = {"q": ("d", "2 · H · h" if self.output_gate else "H · h", self.qkv_bias),
                  "k": ("d", "H_kv · h", self.qkv_bias and self.key_bias),
                  "v": ("d", "H_kv · h", self.qkv_bias), "o": ("H · h", "d", self.o_bias)}
        out = {k: (terms.linear(i, o, b), f"{i} · {o}") for k, (i, o, b) in shapes.items()}
        return out | ({"sinks": ("H", None)} if self.sinks else {})

    def explain_qk_norm(self) -> tuple[str, str, str]:
        """qk_norm_widths as text."""
        return "h", "H · h", "H_kv · h"

    def explain_kv(self, layers: str, bits: int, sliding: bool) -> str:
        """Bytes of one layer kind's cache (`layers`: L, or L_w for sliding ones): K and V of every kv head,
        2 · layers · H_kv · h · B · tokens kept · bytes."""
        kept = self.explain_cached_tokens(sliding)
        return terms.cached_bytes(("2", layers, "H_kv", "h"), ("2", "H_kv", "h"), layers, kept, bits)

    @property
    def explain_kv_note(self) -> str:
        return "each layer caches K and V: 2 · H_kv · h elements per token"

    def explain_pair_costs(self, absorbed: bool) -> dict[str, str]:
        """core_per_pair as text."""
        return {"core_scores": "2 · H · h", "core_values": "2 · H · h"}

    def explain_rotated(self) -> str:
        """rope_elements as text."""
        return "(H + H_kv) · 2 · (h // 2)"

    def explain_saved(self) -> str:
        """saved_elements as text."""
        return "d + 2 · H · h + 2 · H_kv · h"

    def params(self, d_model: int) -> Parts:
        parts = {
            "q": linear(d_model, self.q_width * (2 if self.output_gate else 1), self.qkv_bias),
            "k": linear(d_model, self.kv_width, self.qkv_bias and self.key_bias),
            "v": linear(d_model, self.kv_width, self.qkv_bias),
            "o": linear(self.q_width, d_model, self.o_bias),
        }
        if self.sinks:
            parts["sinks"] = self.heads
        return parts
