"""Transformer-XL relative attention (Dai et al. 2019, §3.3; Gopher, Chinchilla), the reference of the `relative`
position kind (llmcalc/model/positions.py).

Per head, query i and key j score (q_i + u)·k_j + (q_i + v)·W_r R_{i−j}, scaled by 1/√h; R is the d-wide
sinusoid of the distance i − j, W_r projects it to H heads of h (the relative keys). Shapes: B batch, T new
tokens, L keys attended (the last T of them new), H heads, h head dim, d model width.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from llmcalc.model.spec import ModelSpec
from llmcalc.reference.layers import GQAttention, Step, _positions, cache_step, sinusoidal


class RelativeAttention(GQAttention):
    """Multi-head attention with relative positions. Parameters beyond q, k, v, o: W_r (d × H·h) and, unless the
    spec shares them across layers (then the decoder holds them and passes them in `step.relative`), the
    biases u and v, [2, H, h]. Cache: K and V, as GQA's."""

    def __init__(self, spec: ModelSpec, window: int | None):
        super().__init__(spec, window)
        a, d = spec.attention, spec.d_model
        self.heads, self.d_model = a.heads, d
        self.r = nn.Linear(d, a.q_width, bias=False)  # W_r
        self.biases = None if spec.positions.shared_biases else nn.Parameter(torch.empty(2, a.heads, a.head_dim))

    def forward(self, x: Tensor, kv: tuple[Tensor, Tensor] | None, step: Step) -> Tensor:
        B, T, _ = x.shape
        H, h = self.heads, self.head_dim
        q, k, v = self.qkv(x, step)  # [B, T, H, h], [B, T, H_kv, h] ×2
        cache_k, cache_v = kv or (None, None)
        k = cache_step(cache_k, k.transpose(1, 2), step.start, self.window)  # [B, H_kv, L, h]
        v = cache_step(cache_v, v.transpose(1, 2), step.start, self.window)  # [B, H_kv, L, h]
        L = k.shape[-2]
        u, bias_v = self.biases if self.biases is not None else step.relative  # [H, h] each
        # the distances 0 … L−1 the queries see: their sinusoids, projected once for the whole batch
        r = sinusoidal(torch.arange(L, device=x.device), self.d_model).to(x.dtype)  # [L, d]
        r = self.r(r).view(L, H, h)  # [L, d] @ [d, H·h] → [L, H·h] → [L, H, h]
        # position scores against every distance: [B, H, T, h] @ [H, h, L] → [B, H, T, L] (column m: distance m)
        by_distance = (q + bias_v).transpose(1, 2) @ r.permute(1, 2, 0)
        # relative shift: query i (position start + i) and key j (position start + T − L + j) are i + L − T − j
        # apart; a gather moves the scores into key order (no arithmetic); masked keys read distance 0
        qpos, kpos, keep = _positions(step.start, T, step.start + T - L, L, self.window, x.device)
        distance = (qpos - kpos).clamp(min=0).expand(B, H, T, L)  # [B, H, T, L]
        scale = h**-0.5
        mask = (by_distance.gather(-1, distance) * scale).masked_fill(~keep, -math.inf).to(q.dtype)
        # content scores and values in one SDPA: softmax((q + u)·kᵀ·scale + mask) · v → [B, H, T, h]
        out = F.scaled_dot_product_attention((q + u).transpose(1, 2), k, v, attn_mask=mask, scale=scale,
                                             enable_gqa=True)
        return self.o(out.transpose(1, 2).reshape(B, T, -1))  # [B, T, H·h] @ [H·h, d] → [B, T, d]
