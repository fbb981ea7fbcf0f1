"""Lightning attention of the reference model (docs/lightning.md): MiniMax-01's linear attention with a fixed decay
per head, the blocked form for a prompt, one recurrent step per token after a cache.

Shapes: B batch, T new tokens, d model width, H heads of h, Q block length, n a block's length (the last block is
short: no padding). Every product the formulas count is one matmul; decays, the activation, the norm and the gate
are element-wise.

Per head, with slope λ > 0 and state S [h, h]:   S ← exp(−λ)·S + kᵀ·v;   o = q·S
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from llmcalc.model.spec import ModelSpec
from llmcalc.reference.layers import Step


def slopes(heads: int, layer: int, layers: int, device: torch.device) -> Tensor:
    """λ per head [H]: (2^(−8/H))^(i+1) for head i, scaled by 1 − layer/(layers − 1) (+ 1e-5 each, as
    transformers' MiniMaxLightningAttention.get_slope_rate): the decay weakens with depth."""
    base = 1 / (2 ** (8 / heads))
    exponent = torch.arange(heads, device=device, dtype=torch.float32) + 1
    return base**exponent * (1 - layer / (layers - 1 + 1e-5) + 1e-5)


class LightningMixer(nn.Module):
    """Parameters as transformers lays them out: qkv_proj [d → 3·H·h] grouped [q, k, v] per head, output_gate,
    norm (one RMSNorm over H·h), out_proj. The slopes depend on the layer's depth (`layer` of `layers`; the
    reference builds every mixer as layer 0 of 2, as no count depends on them). Cache per sequence: the state
    [B, H, h, h] in the cache's dtype."""

    def __init__(self, spec: ModelSpec, window: int | None):
        super().__init__()
        a, d = spec.attention, spec.d_model
        self.window, self.a = window, a
        self.act = {"silu": F.silu, "gelu": F.gelu, "relu": F.relu}.get(spec.ffn.activation, F.silu)
        self.qkv_proj = nn.Linear(d, 3 * a.width, bias=False)
        self.output_gate = nn.Linear(d, a.width, bias=False)
        self.norm_weight = nn.Parameter(torch.empty(a.width))  # RMSNorm over H·h
        self.out_proj = nn.Linear(a.width, d, bias=False)
        self.layer, self.layers = 0, 2

    def cache_shapes(self, batch: int, n: int) -> list[tuple[int, ...]]:
        return [(batch, self.a.heads, self.a.head_dim, self.a.head_dim)]

    def forward(self, x: Tensor, kv: tuple[Tensor, ...] | None, step: Step) -> Tensor:
        a, B, T = self.a, x.shape[0], x.shape[1]
        H, h = a.heads, a.head_dim
        qkv = self.act(self.qkv_proj(x)).view(B, T, H, 3 * h).transpose(1, 2)  # [B, H, T, 3h]
        q, k, v = qkv.split(h, -1)  # [B, H, T, h] each
        lam = slopes(H, self.layer, self.layers, x.device).view(H, 1, 1)  # [H, 1, 1]
        if kv is not None and step.start:
            o, S = self.recurrent(q, k, v, lam, kv[0])
        else:
            o, S = self.blocked(q, k, v, lam)
        if kv is not None:
            kv[0].copy_(S)
        o = o.transpose(1, 2).reshape(B, T, a.width)  # [B, T, H·h]
        o = (o.float() * torch.rsqrt(o.float().square().mean(-1, keepdim=True) + 1e-6)).to(o.dtype) * self.norm_weight
        o = torch.sigmoid(self.output_gate(x)) * o
        return self.out_proj(o)  # [B, T, H·h] @ [H·h, d]

    def blocked(self, q: Tensor, k: Tensor, v: Tensor, lam: Tensor) -> tuple[Tensor, Tensor]:
        """Blocks of Q tokens (the last one short): o = (q·kᵀ ⊙ D)·v + (q ⊙ exp(−λ·i))·S, then
        S ← exp(−λ·n)·S + (k ⊙ exp(−λ·(Q − i)))ᵀ·v, D[i, j] = exp(−λ·(i − j)) for j ≤ i, else 0."""
        B, H, T, h = q.shape
        Q = self.a.chunk_size
        pos = torch.arange(1, Q + 1, device=q.device, dtype=torch.float32)  # [Q]
        q_decay = torch.exp(-lam * pos[:, None]).to(q.dtype)  # [H, Q, 1]
        k_decay = torch.exp(-lam * (Q - pos[:, None])).to(q.dtype)  # [H, Q, 1]
        gap = pos[:, None] - pos[None, :]  # [Q, Q]
        diag = torch.exp(torch.where(gap >= 0, -lam * gap, float("-inf"))).to(q.dtype)  # [H, Q, Q]
        S = q.new_zeros(B, H, h, h)
        out = []
        for s in range(0, T, Q):
            n = min(Q, T - s)
            qb, kb, vb = q[:, :, s:s + n], k[:, :, s:s + n], v[:, :, s:s + n]  # [B, H, n, h]
            scores = qb @ kb.transpose(-1, -2)  # [B, H, n, h] @ [B, H, h, n] → [B, H, n, n]
            intra = (scores * diag[:, :n, :n]) @ vb  # [B, H, n, n] @ [B, H, n, h]
            inter = (qb * q_decay[:, :n]) @ S  # [B, H, n, h] @ [B, H, h, h]
            out.append(intra + inter)
            S = S * torch.exp(-lam * n).to(q.dtype) + (kb * k_decay[:, Q - n:]).transpose(-1, -2) @ vb  # [B,H,h,h]
        return torch.cat(out, 2), S  # [B, H, T, h]

    def recurrent(self, q: Tensor, k: Tensor, v: Tensor, lam: Tensor, state: Tensor) -> tuple[Tensor, Tensor]:
        """One step per token: S ← exp(−λ)·S + kᵀ·v (a [h, 1] @ [1, h] product), o = q·S."""
        S = state.to(q.dtype)
        ratio = torch.exp(-lam).to(q.dtype)  # [H, 1, 1]
        out = []
        for t in range(q.shape[2]):
            S = ratio * S + k[:, :, t:t + 1].transpose(-1, -2) @ v[:, :, t:t + 1]  # [B, H, h, 1] @ [B, H, 1, h]
            out.append(q[:, :, t:t + 1] @ S)  # [B, H, 1, h] @ [B, H, h, h]
        return torch.cat(out, 2), S
