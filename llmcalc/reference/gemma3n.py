"""Gemma 3n's language model in PyTorch, built from a spec whose stack is `gemma3n` (llmcalc/model/gemma3n.py), as
transformers 5.24's Gemma3nForCausalLM runs it (models/gemma3n/modeling_gemma3n.py); see docs/gemma3n.md.

Shapes: B batch, T new tokens, L keys attended, d model width, H query heads, H_kv key/value heads, h head dim,
f MLP width, V vocabulary, n AltUp streams, r LAuReL rank, p per-layer input width, N layers, V_p per-layer rows.

Every matmul is one `nn.Linear`, `@` or SDPA call with static shapes, so FlopCounterMode sees the products the
formulas count; the activation sparsity of the first MLPs (element-wise, no matmul) is not built.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from llmcalc.model.gemma3n import SHARED_KV
from llmcalc.model.spec import ModelSpec
from llmcalc.reference.layers import (
    ACTIVATIONS,
    MIN_SCRATCH,
    MLP,
    Step,
    apply_rope,
    attend,
    cache_step,
    make_norm,
    materialise,
    rope_tables,
)

Held = dict[int | None, tuple[Tensor, Tensor]]
"""The K and V [B, H_kv, L, h] the last layer of each window (None: full) that projects its own attended over in
this forward: what a layer reading shared K/V attends over."""


class SharedKVAttention(nn.Module):
    """GQA with per-head q and k norms and a v norm without weights, scale 1 (transformers' Gemma3nTextAttention).
    `shared`: the layer projects no K/V and attends over what the last earlier layer of its window did (`held`);
    it holds q, its norm and o, and caches nothing."""

    def __init__(self, spec: ModelSpec, window: int | None, shared: bool):
        super().__init__()
        a, d = spec.attention, spec.d_model
        self.window, self.head_dim, self.kv_heads, self.shared = window, a.head_dim, a.kv_heads, shared
        self.q = nn.Linear(d, a.q_width, bias=a.qkv_bias)
        self.q_norm = make_norm(spec.norm, a.head_dim)
        if not shared:
            self.k = nn.Linear(d, a.kv_width, bias=a.qkv_bias and a.key_bias)
            self.v = nn.Linear(d, a.kv_width, bias=a.qkv_bias)
            self.k_norm = make_norm(spec.norm, a.head_dim)
        self.o = nn.Linear(a.q_width, d, bias=a.o_bias)

    def cache_shapes(self, batch: int, n: int) -> list[tuple[int, ...]]:
        return [] if self.shared else [(batch, self.kv_heads, n, self.head_dim)] * 2

    def forward(self, x: Tensor, kv: tuple[Tensor, ...] | None, step: Step, held: Held) -> Tensor:
        B, T, _ = x.shape
        q = self.q_norm(self.q(x).view(B, T, -1, self.head_dim))  # [B, T, d] @ [d, H·h] → [B, T, H, h]
        if step.rope:
            q = apply_rope(q, step.rope)
        if self.shared:
            k, v = held[self.window]  # [B, H_kv, L, h]: the earlier layer's
        else:
            k = self.k_norm(self.k(x).view(B, T, -1, self.head_dim))  # [B, T, d] @ [d, H_kv·h] → [B, T, H_kv, h]
            v = self.v(x).view(B, T, -1, self.head_dim)  # [B, T, d] @ [d, H_kv·h] → [B, T, H_kv, h]
            v = F.rms_norm(v, (self.head_dim,), eps=1e-6)  # the v norm: no weight
            if step.rope:
                k = apply_rope(k, step.rope)
            cache_k, cache_v = kv or (None, None)
            k = cache_step(cache_k, k.transpose(1, 2), step.start, self.window)  # [B, H_kv, L, h]
            v = cache_step(cache_v, v.transpose(1, 2), step.start, self.window)  # [B, H_kv, L, h]
            held[self.window] = k, v
        out = attend(q.transpose(1, 2), k, v, start=step.start, window=self.window, scale=1.0,
                     serving=step.serving, scratch=step.scratch)  # [B, H, T, h] as [B, T, H, h]
        return self.o(out.transpose(1, 2).reshape(B, T, -1))  # [B, T, H·h] @ [H·h, d] → [B, T, d]


def magnitude_like(x: Tensor, target: Tensor) -> Tensor:
    """x rescaled to the root-mean-square of `target` per token (AltUp's stream projections)."""
    have = x.pow(2).mean(-1, keepdim=True).clamp(min=1e-5).sqrt()
    return x * (target.pow(2).mean(-1, keepdim=True).sqrt() / have)


class Gemma3nLayer(nn.Module):
    """One layer on the n streams [n, B, T, d]: AltUp's prediction, the attention (with LAuReL beside it) and the
    MLP on the active stream (0) with Gemma's four norms, AltUp's correction, the per-layer input gated in."""

    def __init__(self, spec: ModelSpec, window: int | None, shared: bool, d_ff: int):
        super().__init__()
        st, d = spec.stack, spec.d_model
        n, r, p = st.altup_inputs, st.laurel_rank, st.per_layer_width
        self.n, self.d = n, d
        self.attn = SharedKVAttention(spec, window, shared)
        self.ffn = MLP(d, d_ff, gated=spec.ffn.kind == "gated", activation=spec.ffn.activation, bias=False)
        self.norms = nn.ModuleList(make_norm(spec.norm, d) for _ in range(4))  # input, post-attn, pre-MLP, post-MLP
        self.router = nn.Linear(d, n, bias=False)
        self.router_norm = make_norm(spec.norm, d)
        self.predict_coefs = nn.Linear(n, n * n, bias=False)
        self.correct_coefs = nn.Linear(n, n, bias=False)
        self.output_scale = nn.Parameter(torch.empty(d))
        self.laurel_left = nn.Linear(d, r, bias=False)
        self.laurel_right = nn.Linear(r, d, bias=False)
        self.laurel_norm = make_norm(spec.norm, d)
        self.gate = nn.Linear(d, p, bias=False)
        self.projection = nn.Linear(p, d, bias=False)
        self.per_layer_norm = make_norm(spec.norm, d)
        self.act = ACTIVATIONS[spec.ffn.activation]

    def route(self, x: Tensor) -> Tensor:
        """tanh of the router over the normed stream, scaled by 1/d: [B, T, d] @ [d, n] → [B, T, n]."""
        return torch.tanh(self.router(self.router_norm(x) / self.d))

    def forward(self, x: Tensor, per_layer: Tensor, kv, step: Step, held: Held) -> Tensor:
        n, (_, B, T, _) = self.n, x.shape
        coefs = self.predict_coefs(self.route(x[0])).view(B, T, n, n).transpose(-1, -2)  # [B, T, n] @ [n, n²]
        pred = (x.permute(1, 2, 3, 0) @ coefs).permute(3, 0, 1, 2) + x  # [B, T, d, n] @ [B, T, n, n] → [n, B, T, d]
        active = pred[0]
        h = self.norms[0](active)
        laurel = h + self.laurel_norm(self.laurel_right(self.laurel_left(h)))  # [B, T, d] @ [d, r] @ [r, d]
        a = (active + self.norms[1](self.attn(h, kv, step, held)) + laurel) / math.sqrt(2)
        out = a + self.norms[3](self.ffn(self.norms[2](a)))
        scale = self.correct_coefs(self.route(out)) + 1  # [B, T, n] @ [n, n] → [B, T, n]
        corrected = pred + (out - active) * scale.permute(2, 0, 1)[..., None]  # [n, B, T, d]
        g = self.act(self.gate(corrected[0] * self.output_scale)) * per_layer  # [B, T, d] @ [d, p] → [B, T, p]
        g = self.per_layer_norm(self.projection(g))  # [B, T, p] @ [p, d] → [B, T, d]
        return torch.cat([corrected[:1], corrected[1:] + g])


class Gemma3nDecoder(nn.Module):
    """The whole model: the scaled token embedding, the per-layer inputs (the V_p × N·p table plus the embedding
    projected d → N·p and normed over p), AltUp's n − 1 projections into the streams, the layers, the n − 1
    projections back, the streams' mean, the final norm, the (tied) head with its softcap. Built on the meta
    device and materialised one tensor per parameter, as the decoder (llmcalc/reference/model.py)."""

    def __init__(self, spec: ModelSpec, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu"):
        super().__init__()
        st, d, N = spec.stack, spec.d_model, spec.n_layers
        self.spec, self.kernels = spec, "counted"
        with torch.device("meta"):
            self.embed = nn.Embedding(spec.vocab_size, d)
            self.per_layer_embed = nn.Embedding(st.per_layer_vocab, N * st.per_layer_width)
            self.per_layer_projection = nn.Linear(d, N * st.per_layer_width, bias=False)
            self.per_layer_norm = make_norm(spec.norm, st.per_layer_width)
            self.altup_in = nn.ModuleList(nn.Linear(d, d, bias=False) for _ in range(st.altup_inputs - 1))
            self.altup_out = nn.ModuleList(nn.Linear(d, d, bias=False) for _ in range(st.altup_inputs - 1))
            self.layers = nn.ModuleList(Gemma3nLayer(spec, g.window, g.mixer_name == SHARED_KV, g.ffn.d_ff)
                                        for g in (spec.layer_groups(i, i + 1)[0] for i in range(N)))
            self.final_norm = make_norm(spec.norm, d)
            self.lm_head = None if spec.tie_embeddings else nn.Linear(d, spec.vocab_size, bias=False)
        materialise(self, dtype, device)

    def use_kernels(self, kernels: str) -> Gemma3nDecoder:
        """counted or serving, as the decoder's (no routed experts here)."""
        if kernels not in ("counted", "serving"):
            raise ValueError(f"kernels {kernels!r}: use counted or serving")
        self.kernels = kernels
        return self

    def new_cache(self, batch: int, max_tokens: int, dtype: torch.dtype | None = None) -> list[tuple[Tensor, ...]]:
        """K and V for each layer that projects its own (a sliding one min(max_tokens, window − 1) positions);
        nothing for a layer reading shared K/V."""
        w = self.embed.weight
        out = []
        for layer in self.layers:
            n = max_tokens if layer.attn.window is None else min(max_tokens, layer.attn.window - 1)
            out.append(tuple(torch.zeros(s, dtype=dtype or w.dtype, device=w.device)
                             for s in layer.attn.cache_shapes(batch, n)))
        return out

    def forward(self, tokens: Tensor, cache=None, start: int = 0, logits: str = "last",
                mla_decode: str = "absorbed") -> Tensor:
        """Logits [B, 1, V] ("last") or [B, T, V] ("all") for tokens [B, T] at positions start..start+T−1."""
        spec, st = self.spec, self.spec.stack
        B, T = tokens.shape
        N, p = spec.n_layers, st.per_layer_width
        x = self.embed(tokens) * spec.d_model**0.5  # [B, T, d]: a lookup, scaled
        rows = torch.where(tokens < st.per_layer_vocab, tokens, 0)
        table = self.per_layer_embed(rows).view(B, T, N, p) * p**0.5  # [B, T, N, p]: a lookup
        proj = self.per_layer_projection(x).view(B, T, N, p) * spec.d_model**-0.5  # [B, T, d] @ [d, N·p]
        per_layer = (self.per_layer_norm(proj) + table) * 2**-0.5  # [B, T, N, p]
        streams = torch.stack([x, *(magnitude_like(f(x), x) for f in self.altup_in)])  # [n, B, T, d], d @ d each
        pos = torch.arange(start, start + T, device=tokens.device)
        step = Step(start, rope_tables(pos, spec.attention.head_dim, x.dtype), None, False,
                    self.kernels == "serving", max(MIN_SCRATCH, x.nbytes // 16, self.weight_bytes // 128))
        held: Held = {}
        for i, (layer, kv) in enumerate(zip(self.layers, cache or [None] * N, strict=True)):
            streams = layer(streams, per_layer[:, :, i], kv or None, step, held)
        back = [streams[0], *(magnitude_like(f(s), streams[0]) for f, s in zip(self.altup_out, streams[1:],
                                                                                  strict=True))]  # d @ d each
        h = torch.stack(back).mean(0)  # [B, T, d]
        if logits == "last":
            h = h[:, -1:]
        h = self.final_norm(h)
        weight = self.embed.weight if self.lm_head is None else self.lm_head.weight
        out = F.linear(h, weight)  # [B, T', d] @ [d, V] → [B, T', V]
        return torch.tanh(out / 30.0) * 30.0  # the final logit softcap
