"""Gated DeltaNet of the reference model (docs/deltanet.md): the chunked delta rule for a prompt, one recurrent
step per token after a cache.

Shapes: B batch, T new tokens, d model width, H_k query/key heads of d_k, H_v value heads of d_v (r = H_v/H_k value
heads per key head: q and k are repeated over them), K conv width, Q chunk length, c chunks. Every product the
formulas count is one einsum, bmm or @ call (the UT system's solve is forward substitution, one row at a time, so
FlopCounterMode sees its 2·i·(d_k + d_v) per row i); decays, gates and norms are element-wise.

The recurrence per value head, state S [d_k, d_v], decay g ≤ 0 and write strength β ∈ (0, 1) per token:
    S ← exp(g)·S;  S ← S + kᵀ·(β·(v − k·S));  o = q·S
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from llmcalc.model.spec import ModelSpec
from llmcalc.reference.layers import Step


def unit_norm(x: Tensor) -> Tensor:
    """x / ‖x‖ over the last axis (ε 1e-6 inside the root), as the kernels normalise q and k."""
    return x * torch.rsqrt(x.square().sum(-1, keepdim=True) + 1e-6)


def forward_substitute(lower: Tensor, rhs: Tensor) -> Tensor:
    """X with (I + L)·X = rhs, L strictly lower triangular [..., Q, Q], rhs [..., Q, w]: row i is
    rhs_i − L[i, :i]·X[:i], one [1, i] @ [i, w] product per row (2·i·w FLOPs)."""
    rows = [rhs[..., 0, :]]
    for i in range(1, rhs.shape[-2]):
        done = torch.stack(rows, -2)  # [..., i, w]
        rows.append(rhs[..., i, :] - (lower[..., i:i + 1, :i] @ done)[..., 0, :])
    return torch.stack(rows, -2)


class GatedDeltaNetMixer(nn.Module):
    """Qwen3-Next's linear-attention layer. Parameters as transformers lays them out: in_proj_qkvz groups
    [q, k, v, z] per key head, in_proj_ba [β, a] per key head. Cache per sequence: the state [B, H_v, d_k, d_v]
    (fp32 unless state_dtype is cache) and the conv's last K inputs [B, 2·H_k·d_k + H_v·d_v, K]."""

    def __init__(self, spec: ModelSpec, window: int | None):
        super().__init__()
        a, d = spec.attention, spec.d_model
        self.window, self.a = window, a
        self.in_proj_qkvz = nn.Linear(d, 2 * a.key_width + 2 * a.value_width, bias=False)
        self.in_proj_ba = nn.Linear(d, 2 * a.value_heads, bias=False)
        self.conv_weight = nn.Parameter(torch.empty(a.conv_width, a.conv_kernel))
        self.dt_bias, self.A_log = (nn.Parameter(torch.empty(a.value_heads)) for _ in range(2))
        self.norm_weight = nn.Parameter(torch.empty(a.value_head_dim))  # RMSNorm over d_v, shared by the heads
        self.out_proj = nn.Linear(a.value_width, d, bias=False)

    def cache_shapes(self, batch: int, n: int) -> list[tuple[int, ...]]:
        a = self.a
        return [(batch, a.value_heads, a.key_head_dim, a.value_head_dim), (batch, a.conv_width, a.conv_kernel)]

    def cache_dtypes(self) -> dict[int, torch.dtype]:
        return {0: torch.float32} if self.a.state_dtype == "fp32" else {}

    def forward(self, x: Tensor, kv: tuple[Tensor, Tensor] | None, step: Step) -> Tensor:
        a, B, T = self.a, x.shape[0], x.shape[1]
        Hk, Hv, dk, dv, K = a.key_heads, a.value_heads, a.key_head_dim, a.value_head_dim, a.conv_kernel
        r = Hv // Hk
        q, k, v, z = self.in_proj_qkvz(x).unflatten(-1, (Hk, -1)).split([dk, dk, r * dv, r * dv], -1)  # [B, T, H_k, ·]
        b, g = self.in_proj_ba(x).unflatten(-1, (Hk, -1)).split([r, r], -1)  # [B, T, H_k, r] each
        qkv = torch.cat([t.flatten(2) for t in (q, k, v)], -1).transpose(1, 2)  # [B, 2·H_k·d_k + H_v·d_v, T]
        past = kv[1][..., 1:] if kv is not None and step.start else qkv.new_zeros(B, a.conv_width, K - 1)
        window = torch.cat([past, qkv], -1)  # [B, C, K − 1 + T]
        if kv is not None:
            kv[1].copy_(window[..., -K:])  # the last K inputs
        qkv = torch.einsum("bctk,ck->bct", window.unfold(-1, K, 1), self.conv_weight)  # [B, C, T]: causal conv
        q, k, v = F.silu(qkv).transpose(1, 2).float().split([Hk * dk, Hk * dk, Hv * dv], -1)
        q, k = (unit_norm(t.unflatten(-1, (Hk, dk))).repeat_interleave(r, 2) for t in (q, k))  # [B, T, H_v, d_k]
        q = q * dk**-0.5
        v = v.unflatten(-1, (Hv, dv))  # [B, T, H_v, d_v]
        beta = torch.sigmoid(b.flatten(2).float())  # [B, T, H_v]
        g = -torch.exp(self.A_log.float()) * F.softplus(g.flatten(2).float() + self.dt_bias.float())  # log decay
        if kv is not None and step.start:
            o = self.recurrent(q, k, v, beta, g, kv[0])
        else:
            o, final = self.chunked(q, k, v, beta, g)
            if kv is not None:
                kv[0].copy_(final)
        o = o * torch.rsqrt(o.square().mean(-1, keepdim=True) + 1e-6) * self.norm_weight.float()  # per head
        o = o * F.silu(z.reshape(B, T, Hv, dv).float())  # the output gate
        return self.out_proj(o.flatten(2).to(x.dtype))  # [B, T, H_v·d_v] @ [H_v·d_v, d] → [B, T, d]

    def chunked(self, q: Tensor, k: Tensor, v: Tensor, beta: Tensor, g: Tensor) -> tuple[Tensor, Tensor]:
        """Chunks of Q tokens (the last padded), the WY/UT form: per chunk, u and w solve (I + L)·[w | u] =
        [β·exp(G)·k | β·v] with L[i, j] = β_i·(k_i·k_j)·exp(G_i − G_j) below the diagonal (G the cumulative log
        decay); then chunk by chunk v' = u − w·S, o = (q·exp(G))·S + (q·kᵀ ⊙ decay, causal)·v',
        S ← exp(G_Q)·S + (k·exp(G_Q − G))ᵀ·v'. Returns o [B, T, H_v, d_v] and the final state."""
        B, T, H, dk = k.shape
        dv, Q = v.shape[-1], self.a.chunk_size
        pad = -T % Q

        def chunks(t: Tensor) -> Tensor:  # [B, T, H, ·] → [B, H, c, Q, ·]
            return F.pad(t, (0, 0, 0, 0, 0, pad)).unflatten(1, (-1, Q)).permute(0, 3, 1, 2, 4)

        q, k, v = chunks(q), chunks(k), chunks(v)
        beta, g = (F.pad(t, (0, 0, 0, pad)).unflatten(1, (-1, Q)).permute(0, 3, 1, 2) for t in (beta, g))  # [B,H,c,Q]
        G = torch.cumsum(g, -1)
        causal = torch.ones(Q, Q, dtype=torch.bool, device=q.device).tril()
        decay = torch.exp((G[..., :, None] - G[..., None, :]).masked_fill(~causal, float("-inf")))  # [B, H, c, Q, Q]
        system = (beta[..., None] * (k @ k.transpose(-1, -2)) * decay).tril(-1)  # [B, H, c, Q, Q]: the UT system
        wu = forward_substitute(system, torch.cat([k * (beta * torch.exp(G))[..., None], v * beta[..., None]], -1))
        w, u = wu.split([dk, dv], -1)  # [B, H, c, Q, d_k], [B, H, c, Q, d_v]
        scores = (q @ k.transpose(-1, -2)) * decay  # [B, H, c, Q, Q]: q·kᵀ within the chunk, decayed, causal
        S = q.new_zeros(B, H, dk, dv)
        out = []
        for i in range(q.shape[2]):
            v_new = u[:, :, i] - w[:, :, i] @ S  # [B, H, Q, d_v]: the state read by the keys
            out.append((q[:, :, i] * torch.exp(G[:, :, i])[..., None]) @ S + scores[:, :, i] @ v_new)
            last = G[:, :, i, -1:]  # [B, H, 1]
            S = S * torch.exp(last)[..., None] + (k[:, :, i] * torch.exp(last - G[:, :, i])[..., None]).transpose(
                -1, -2) @ v_new  # [B, H, d_k, Q] @ [B, H, Q, d_v]
        o = torch.stack(out, 2).flatten(2, 3)[:, :, :T]  # [B, H, T, d_v]
        return o.transpose(1, 2), S

    def recurrent(self, q: Tensor, k: Tensor, v: Tensor, beta: Tensor, g: Tensor, state: Tensor) -> Tensor:
        """One step per token: S ← exp(g)·S, then the read k·S, the rank-1 write kᵀ·δ (a bmm) and the read q·S."""
        B, T, H, dk = k.shape
        dv = v.shape[-1]
        S = state.float().reshape(B * H, dk, dv)
        out = []
        for t in range(T):
            qt, kt = q[:, t].reshape(B * H, 1, dk), k[:, t].reshape(B * H, 1, dk)
            S = S * torch.exp(g[:, t]).reshape(B * H, 1, 1)
            read = torch.bmm(kt, S)  # [B·H, 1, d_k] @ [B·H, d_k, d_v]: what the state holds for k
            delta = (v[:, t].reshape(B * H, 1, dv) - read) * beta[:, t].reshape(B * H, 1, 1)  # [B·H, 1, d_v]
            S = S + torch.bmm(kt.transpose(1, 2), delta)  # [B·H, d_k, 1] @ [B·H, 1, d_v]
            out.append(torch.bmm(qt, S).view(B, H, dv))  # [B·H, 1, d_k] @ [B·H, d_k, d_v]
        state.copy_(S.view(B, H, dk, dv))
        return torch.stack(out, 1)  # [B, T, H, d_v]
