"""A readable PyTorch decoder built from any `ModelSpec`: the model llmcalc's formulas are measured against.

Shapes: B batch, T new tokens, L keys attended, d model width, H query heads, H_kv key/value heads,
h head dim, f FFN width, E routed experts, k experts per token, V vocabulary. MLA: r_q / r the query /
key-value latent ranks, d_n / d_r / d_v the no-RoPE, RoPE and value head dims.

Every matmul is one `nn.Linear`, `torch.bmm`, `@` or `scaled_dot_product_attention` call with static shapes,
so the model builds and runs under FakeTensorMode (full size, no memory) and torch's FlopCounterMode
sees exactly the products the formulas count. Values are random (`reset_parameters`): the model is
for costs and cache correctness, not for loading checkpoints.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from llmcalc.errors import UserError
from llmcalc.model.spec import ModelSpec
from llmcalc.reference.buckets import BucketAttention
from llmcalc.reference.chunked import ChunkedAttention
from llmcalc.reference.cross_attention import GatedCrossAttentionMixer
from llmcalc.reference.deltanet import GatedDeltaNetMixer
from llmcalc.reference.lightning import LightningMixer
from llmcalc.reference.layers import (
    MIN_SCRATCH,
    MLP,
    Cache,
    GQAttention,
    MLAttention,
    MoEFFN,
    Step,
    add,
    alibi_slopes,
    make_norm,
    rope_tables,
    sinusoidal,
)
from llmcalc.reference.relative import RelativeAttention
from llmcalc.reference.short_conv import ShortConvMixer
from llmcalc.reference.sparse import (
    DSAttention,
    LinformerAttention,
    LongformerAttention,
    ReformerAttention,
)
from llmcalc.reference.state_space import Mamba2Mixer, MambaMixer, ParallelMixer


class Layer(nn.Module):
    """One block. Norms by spec.norm.per_layer: 0 none; 1 parallel (Falcon: x + attn(n(x)) + ffn(n(x)); a layer
    without an FFN, Mamba-2's: x + mixer(n(x)); without a mixer, Nemotron-H's MLP layers: x + ffn(n(x)));
    2 pre-norm (x + attn(n₀(x)), then x + ffn(n₁(x))); 3 adds n₂ on the attention output; 4 also n₃ on
    the FFN output (Gemma-2/3). OLMo-2's post-only placement has the same parameters and FLOPs as 2. A mixer with
    `ffn_scale` (gated cross-attention's MLP gate) scales the FFN branch by it.
    `first`: the stack's first layer, which holds T5's bias table (t5_buckets). `mixer`: a hybrid layer's own
    mixer (spec.attention by default; None: a layer without one)."""

    def __init__(self, spec: ModelSpec, window: int | None, ffn, first: bool = False, mixer=...):
        super().__init__()
        if spec.norm.per_layer > 4:
            raise ValueError(f"norm.per_layer {spec.norm.per_layer}: the reference block places at most 4 norms")
        kind = spec.positions.kind
        if mixer is None:
            self.attn = None
        elif mixer is not ... and mixer is not spec.attention:  # a hybrid's mixer: built as that spec's attention
            self.attn = attention_module(mixer.kind)(spec.model_copy(update={"attention": mixer}), window)
        elif kind == "relative":
            self.attn = RelativeAttention(spec, window)
        elif kind == "t5_buckets":
            self.attn = BucketAttention(spec, window, table=first)
        else:
            self.attn = attention_module(spec.attention.kind)(spec, window)
        self.ffn = None if not ffn.params(spec.d_model) else MoEFFN(ffn, spec.d_model) if ffn.routed_experts else MLP(
            spec.d_model, ffn.d_ff, gated=ffn.kind == "gated", activation=ffn.activation, bias=ffn.bias)
        self.norms = nn.ModuleList(make_norm(spec.norm, spec.d_model) for _ in range(spec.norm.per_layer))

    def forward(self, x: Tensor, kv: tuple[Tensor, Tensor] | None, step: Step) -> Tensor:
        n = self.norms
        if len(n) == 1:
            h = n[0](x)
            if self.attn is None:
                return x if self.ffn is None else add(x, self.ffn(h))
            a = self.attn(h, kv, step)  # held while the FFN runs on the same input h (Falcon's parallel block)
            return add(x, a) if self.ffn is None else add(add(x, a), self.ffn(h))

        def norm(i: int, t: Tensor) -> Tensor:
            return n[i](t) if i < len(n) else t

        if self.attn is not None:
            x = add(x, norm(2, self.attn(norm(0, x), kv, step)))
        if self.ffn is None:
            return x
        f = norm(3, self.ffn(norm(1, x)))
        scale = getattr(self.attn, "ffn_scale", None)  # gated cross-attention's MLP gate
        return add(x, f if scale is None else f * scale().to(f.dtype))


def attention_module(kind: str) -> type[nn.Module]:
    """The reference module of an attention kind (sparse variants: llmcalc/reference/sparse.py)."""

    return {"gqa": GQAttention, "mla": MLAttention, "longformer": LongformerAttention, "chunked": ChunkedAttention,
            "linformer": LinformerAttention, "reformer": ReformerAttention, "dsa": DSAttention,
            "mamba2": Mamba2Mixer, "mamba": MambaMixer, "parallel": ParallelMixer,
            "gated_deltanet": GatedDeltaNetMixer, "cross": GatedCrossAttentionMixer, "short_conv": ShortConvMixer,
            "lightning": LightningMixer}[kind]


def layer_shape(spec: ModelSpec, i: int):
    """Layer i's attention window (None: full) and FFN spec, as spec.layer_groups() counts them."""
    if spec.hybrid:
        group = spec.layer_groups(i, i + 1)[0]
        return group.window, group.ffn
    window = spec.sliding_window if spec.layer_pattern[i % len(spec.layer_pattern)] == "sliding" else None
    dense = i < spec.ffn.leading_dense_layers
    return window, spec.ffn.dense_ffn() if dense else spec.ffn


def layer_mixer(spec: ModelSpec, i: int):
    """Layer i's mixer: its hybrid_pattern slot's (None: none), else spec.attention."""
    return spec.layer_groups(i, i + 1)[0].mixer if spec.hybrid else spec.attention


def check_built(spec: ModelSpec) -> None:
    """Refuse, in one line, a spec whose stack adds parts this decoder does not build: Gemma 3n's AltUp streams,
    LAuReL, per-layer inputs and layers reading an earlier layer's K/V (llmcalc/model/gemma3n.py), which
    llmcalc/reference/gemma3n.py builds."""
    if spec.stack.kv_reading_layers or spec.stack.layer_matmuls(spec) or spec.stack.token_matmuls(spec):
        raise UserError(f"`model`: this reference decoder does not build a {spec.stack.kind} stack's own parts "
                        "(AltUp, LAuReL, per-layer inputs, shared K/V), which validate measures on its own module "
                        "(llmcalc/reference/gemma3n.py); leave out LoRA, calibrate and the kernel counts")


class Decoder(nn.Module):
    """The decoder of `spec`: embedding (+ learned or sinusoidal positions), n_layers blocks, final norm,
    LM head (tied: the embedding matrix, plus `lm_head_bias` if any). MTP modules are not built.

    Built on the meta device, then each parameter is allocated on `device` in `dtype` and initialised
    with one call per tensor, so a full-size model builds quickly under FakeTensorMode.
    """

    def __init__(self, spec: ModelSpec, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu"):
        super().__init__()
        check_built(spec)
        self.spec, self.kernels = spec, "counted"
        d, V = spec.d_model, spec.vocab_size
        with torch.device("meta"):
            self.embed = nn.Embedding(spec.embedding_rows, d)  # [V + extra rows, d]
            self.pos_embed = nn.Embedding(spec.max_seq_len, d) if spec.positions.kind == "learned" else None
            shared = getattr(spec.positions, "shared_biases", False)  # relative positions' u and v, all layers
            a = spec.attention
            self.pos_biases = nn.Parameter(torch.empty(2, a.heads, a.head_dim)) if shared else None  # [2, H, h]
            self.layers = nn.ModuleList(Layer(spec, *layer_shape(spec, i), first=i == 0, mixer=layer_mixer(spec, i))
                                        for i in range(spec.n_layers))
            self.final_norm = make_norm(spec.norm, d) if spec.norm.final else None
            tied = spec.tie_embeddings
            self.lm_head = None if tied else nn.Linear(d, V, bias=spec.lm_head_bias)
            self.lm_head_bias = nn.Parameter(torch.empty(V)) if tied and spec.lm_head_bias else None
        for m in self.modules():  # materialise: one fresh tensor per parameter (no two share one)
            for name, p in m.named_parameters(recurse=False):
                setattr(m, name, nn.Parameter(torch.empty(p.shape, dtype=dtype, device=device)))
        self.weight_bytes = sum(p.nbytes for p in self.parameters())
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self, std: float = 0.02) -> None:
        """Norm weights 1 and norm biases 0; every other parameter N(0, std²), one call per tensor."""
        for m in self.modules():
            for name, p in m.named_parameters(recurse=False):
                if isinstance(m, nn.RMSNorm | nn.LayerNorm):
                    (nn.init.ones_ if name == "weight" else nn.init.zeros_)(p)
                else:
                    nn.init.normal_(p, std=std)

    def use_kernels(self, kernels: str) -> Decoder:
        """"counted" (the default): every product is a matmul FlopCounterMode sees, exactly the FLOPs of the
        formulas (routed experts as gathered bmm, MLA values at d_v). "serving": the kernels a serving
        stack runs, for peak memory and time (routed experts as grouped GEMMs over tokens permuted by
        expert, MLA values padded to the query/key head dim so a flash kernel takes them)."""
        if kernels not in ("counted", "serving"):
            raise ValueError(f"kernels {kernels!r}: use counted or serving")
        self.kernels = kernels
        for m in self.modules():
            if isinstance(m, MoEFFN):
                m.impl = "grouped_mm" if kernels == "serving" else "batched_mm"
        return self

    def drop_overflow(self, capacity_factor: float | None) -> Decoder:
        """Give every routed MoE layer an expert capacity ceil(cf · tokens · k / E) per forward call and
        drop the assignments beyond it (Switch, GShard); None: dropless again (the default). Each MoEFFN's
        `last_dropped` then counts the assignments its last forward dropped."""
        for m in self.modules():
            if isinstance(m, MoEFFN):
                m.capacity_factor, m.last_dropped = capacity_factor, None
        return self

    def new_cache(self, batch: int, max_tokens: int, dtype: torch.dtype | None = None) -> Cache:
        """Zeroed cache tensors per layer (see `Cache`) for positions 0..max_tokens−1; a sliding layer
        holds min(max_tokens, window − 1) positions. dtype: the weights' by default."""
        w = self.embed.weight
        out = []
        for layer in self.layers:
            if layer.attn is None:  # a layer without a mixer keeps nothing
                out.append(())
                continue
            window = layer.attn.window
            n = max_tokens if window is None else min(max_tokens, window - 1)
            own = layer.attn.cache_dtypes() if hasattr(layer.attn, "cache_dtypes") else {}  # e.g. DSA's fp8 keys
            out.append(tuple(torch.zeros(s, dtype=own.get(i, dtype or w.dtype), device=w.device)
                             for i, s in enumerate(layer.attn.cache_shapes(batch, n))))
        return out

    def forward(self, tokens: Tensor, cache: Cache | None = None, start: int = 0, logits: str = "last",
                mla_decode: str = "absorbed") -> Tensor:
        """Logits [B, 1, V] ("last") or [B, T, V] ("all") for tokens [B, T] at positions start..start+T−1.

        With a cache the new tokens' keys are written to it and attend to the positions it holds;
        without one they attend only to each other. mla_decode: how MLA attends in a step that extends
        a cache (start > 0), "absorbed" or "decompress"; a prefill from position 0 always decompresses.
        """
        spec, a = self.spec, self.spec.attention
        if logits not in ("last", "all") or mla_decode not in ("absorbed", "decompress"):
            raise ValueError(f"logits {logits!r} / mla_decode {mla_decode!r}: use last|all and absorbed|decompress")
        absorbed = a.kind in ("mla", "dsa") and mla_decode == "absorbed" and start > 0
        if absorbed and spec.norm.qk_norm != "none":
            raise ValueError("absorbed MLA never forms per-head keys, so it cannot apply qk_norm; use decompress")
        B, T = tokens.shape
        kind = spec.positions.kind
        if kind == "learned" and start + T > spec.max_seq_len:
            raise ValueError(f"positions up to {start + T - 1}: the learned table has {spec.max_seq_len}")
        pos = torch.arange(start, start + T, device=tokens.device)
        x = self.embed(tokens)  # [B, T, d]: a lookup, no FLOPs
        if kind == "learned":
            x = x + self.pos_embed(pos)
        elif kind == "sinusoidal":
            x = x + sinusoidal(pos, spec.d_model).to(x.dtype)
        rope_dim = a.qk_rope_head_dim if a.kind in ("mla", "dsa") else a.head_dim
        step = Step(start, rope_tables(pos, rope_dim, x.dtype) if kind == "rope" else None,
                    alibi_slopes(a.heads, x.device) if kind == "alibi" else None, absorbed, self.kernels == "serving",
                    max(MIN_SCRATCH, x.nbytes // 16, self.weight_bytes // 128), self.pos_biases,
                    self.layers[0].attn.relative_attention_bias.weight if kind == "t5_buckets" else None)
        for layer, kv in zip(self.layers, cache or [None] * len(self.layers), strict=True):
            x = layer(x, kv, step)
        if logits == "last":
            x = x[:, -1:]
        if self.final_norm is not None:
            x = self.final_norm(x)
        if self.lm_head is None:
            return F.linear(x, self.embed.weight, self.lm_head_bias)  # [B, T', d] @ [d, V] → [B, T', V]
        return self.lm_head(x)  # [B, T', d] @ [d, V] → [B, T', V]
