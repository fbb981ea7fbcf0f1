"""State-space mixers of the reference model: Mamba-2's SSD layer, Mamba-1's selective scan and a parallel pair of
mixers (Falcon-H1) (docs/mamba.md).

Shapes: B batch, T new tokens, d model width, H heads of P channels (I = H·P), G groups of B/C, N state size,
K conv width, Q chunk length, c chunks. Every product the formulas count is one einsum or bmm call, so
FlopCounterMode sees exactly those; the decays (exp, cumsum) and gates are element-wise.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from llmcalc.model.spec import ModelSpec
from llmcalc.reference.layers import GQAttention, Step


def segment_sum(a: Tensor) -> Tensor:
    """[..., n] → [..., n, n]: out[i, j] = a[j+1] + … + a[i] for j ≤ i, −inf above the diagonal (log decays)."""
    n = a.shape[-1]
    cum = torch.cumsum(a, -1)
    out = cum[..., :, None] - cum[..., None, :]
    return out.masked_fill(~torch.ones(n, n, dtype=torch.bool, device=a.device).tril(), float("-inf"))


class GatedRMSNorm(nn.Module):
    """RMSNorm over each group of I/G channels of y · silu(z) (Mamba-2's norm before out_proj): weight I."""

    def __init__(self, width: int, groups: int):
        super().__init__()
        self.weight, self.groups = nn.Parameter(torch.empty(width)), groups

    def forward(self, y: Tensor, z: Tensor) -> Tensor:
        g = (y * F.silu(z)).unflatten(-1, (self.groups, -1))  # [B, T, G, I/G]
        g = g * torch.rsqrt(g.float().square().mean(-1, keepdim=True) + 1e-6).to(g.dtype)
        return g.flatten(-2) * self.weight


class Mamba2Mixer(nn.Module):
    """Mamba-2 (SSD). Cache per sequence: the SSM state [B, H, P, N] (fp32 unless state_dtype is cache) and the
    conv's last K inputs [B, I + 2·G·N, K]. A call from position 0 runs the chunked scan (the SSD paper's
    Listing 1); a call after a cache steps the recurrence token by token."""

    def __init__(self, spec: ModelSpec, window: int | None):
        super().__init__()
        a, d = spec.attention, spec.d_model
        self.window, self.a = window, a
        self.in_proj = nn.Linear(d, a.inner + a.conv_width + a.heads, bias=a.bias)
        self.conv_weight = nn.Parameter(torch.empty(a.conv_width, a.conv_kernel))
        self.conv_bias = nn.Parameter(torch.empty(a.conv_width)) if a.conv_bias else None
        self.A_log, self.D, self.dt_bias = (nn.Parameter(torch.empty(a.heads)) for _ in range(3))
        self.norm = GatedRMSNorm(a.inner, a.groups) if a.gate_norm else None  # else y · silu(z) (Falcon-H1)
        self.out_proj = nn.Linear(a.inner, d, bias=a.bias)

    def cache_shapes(self, batch: int, n: int) -> list[tuple[int, ...]]:
        a = self.a
        return [(batch, a.heads, a.head_dim, a.state_size), (batch, a.conv_width, a.conv_kernel)]

    def cache_dtypes(self) -> dict[int, torch.dtype]:
        return {0: torch.float32} if self.a.state_dtype == "fp32" else {}

    def forward(self, x: Tensor, kv: tuple[Tensor, Tensor] | None, step: Step) -> Tensor:
        a, B = self.a, x.shape[0]
        H, P, N, G, K = a.heads, a.head_dim, a.state_size, a.groups, a.conv_kernel
        z, xbc, dt = self.in_proj(x).split([a.inner, a.conv_width, H], -1)  # [B, T, d] @ [d, 2I + 2GN + H]
        xbc = xbc.transpose(1, 2)  # [B, I + 2GN, T]
        past = kv[1][..., 1:] if kv is not None and step.start else xbc.new_zeros(B, a.conv_width, K - 1)
        window = torch.cat([past, xbc], -1)  # [B, I + 2GN, K − 1 + T]
        if kv is not None:
            kv[1].copy_(window[..., -K:])  # the last K inputs
        # the depthwise causal conv as one product per channel (FlopCounterMode's grouped-conv backward formula
        # ignores the groups): [B, C, T, K] windows · [C, K] taps → [B, C, T]
        xbc = torch.einsum("bctk,ck->bct", window.unfold(-1, K, 1), self.conv_weight)
        if self.conv_bias is not None:
            xbc = xbc + self.conv_bias[:, None]
        xs, b, c = F.silu(xbc).transpose(1, 2).split([a.inner, G * N, G * N], -1)
        dt = F.softplus(dt + self.dt_bias).float()  # [B, T, H]
        A = -torch.exp(self.A_log.float())  # [H]
        xs = xs.float().unflatten(-1, (H, P))  # [B, T, H, P]
        b, c = (t.float().unflatten(-1, (G, N)).repeat_interleave(H // G, 2) for t in (b, c))  # [B, T, H, N]
        if kv is not None and step.start:
            y = self.recurrent(xs, dt, A, b, c, kv[0])
        else:
            y, final = self.chunked(xs, dt, A, b, c)
            if kv is not None:
                kv[0].copy_(final)
        y = y + xs * self.D.float()[:, None]  # the D skip
        y = y.flatten(2).to(x.dtype)
        y = self.norm(y, z) if self.norm is not None else y * F.silu(z)
        return self.out_proj(y)  # [B, T, I] @ [I, d] → [B, T, d]

    def chunked(self, xs: Tensor, dt: Tensor, A: Tensor, b: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
        """The scan over c = ⌈T/Q⌉ chunks of Q tokens (the last padded): y [B, T, H, P] and the final state."""
        Bt, T, H, P = xs.shape
        Q = self.a.chunk_size
        pad = -T % Q
        xdt = F.pad(xs * dt[..., None], (0, 0, 0, 0, 0, pad)).unflatten(1, (-1, Q))  # [B, c, Q, H, P]
        b, c = (F.pad(t, (0, 0, 0, 0, 0, pad)).unflatten(1, (-1, Q)) for t in (b, c))  # [B, c, Q, H, N]
        adt = F.pad(A * dt, (0, 0, 0, pad)).unflatten(1, (-1, Q)).permute(0, 3, 1, 2)  # [B, H, c, Q]
        cum = torch.cumsum(adt, -1)
        decay = torch.exp(segment_sum(adt))  # [B, H, c, Q, Q]
        scores = torch.einsum("bclhn,bcshn->bchls", c, b)  # [B, c, H, Q, Q]: C·Bᵀ per chunk and head
        y = torch.einsum("bchls,bcshp->bclhp", scores * decay.transpose(1, 2), xdt)  # [B, c, Q, H, P]
        to_end = torch.exp(cum[..., -1:] - cum)  # [B, H, c, Q]
        states = torch.einsum("bclhn,bclhp->bchpn", b * to_end.permute(0, 2, 3, 1)[..., None], xdt)  # [B,c,H,P,N]
        states = torch.cat([torch.zeros_like(states[:, :1]), states], 1)  # [B, c + 1, H, P, N]
        links = torch.exp(segment_sum(F.pad(cum[..., -1], (1, 0))))  # [B, H, c + 1, c + 1]
        states = torch.einsum("bhzc,bchpn->bzhpn", links, states)  # [B, c + 1, H, P, N]: each chunk's start
        out = torch.einsum("bclhn,bchpn->bclhp", c, states[:, :-1])  # [B, c, Q, H, P]
        y = y + out * torch.exp(cum).permute(0, 2, 3, 1)[..., None]
        return y.flatten(1, 2)[:, :T], states[:, -1]

    def recurrent(self, xs: Tensor, dt: Tensor, A: Tensor, b: Tensor, c: Tensor, state: Tensor) -> Tensor:
        """One recurrent step per token: h ← exp(dt·A)·h + (dt·x)ᵀ·B (a rank-1 bmm), y = h·C."""
        Bt, T, H, P = xs.shape
        N = b.shape[-1]
        h = state.float()  # [B, H, P, N]
        ys = []
        for t in range(T):
            xdt = (xs[:, t] * dt[:, t, :, None]).reshape(Bt * H, P, 1)  # [B·H, P, 1]
            update = torch.bmm(xdt, b[:, t].reshape(Bt * H, 1, N)).view(Bt, H, P, N)  # [B·H, P, 1] @ [1, N]
            h = h * torch.exp(dt[:, t] * A)[..., None, None] + update
            ys.append(torch.bmm(h.view(Bt * H, P, N), c[:, t].reshape(Bt * H, N, 1)).view(Bt, H, P))  # h·C
        state.copy_(h)
        return torch.stack(ys, 1)  # [B, T, H, P]


class MambaMixer(nn.Module):
    """Mamba-1 (the selective scan; docs/mamba.md#mamba-1). Letters: I inner width, N state size per channel,
    R Δ's rank, K conv width. Cache per sequence: the SSM state [B, I, N] (fp32 unless state_dtype is cache) and
    the conv's last K inputs [B, I, K]. Prompt and decode run the same recurrence, one token at a time; the
    output C·h is one bmm per token (what FlopCounterMode counts of the scan), the update is element-wise."""

    def __init__(self, spec: ModelSpec, window: int | None):
        super().__init__()
        a, d = spec.attention, spec.d_model
        self.window, self.a = window, a
        self.in_proj = nn.Linear(d, 2 * a.inner, bias=a.bias)  # x and the gate z
        self.conv_weight = nn.Parameter(torch.empty(a.inner, a.conv_kernel))
        self.conv_bias = nn.Parameter(torch.empty(a.inner)) if a.conv_bias else None
        self.x_proj = nn.Linear(a.inner, a.dt_rank + 2 * a.state_size, bias=False)  # Δ's input, B, C
        self.dt_proj = nn.Linear(a.dt_rank, a.inner, bias=True)
        self.A_log = nn.Parameter(torch.empty(a.inner, a.state_size))
        self.D = nn.Parameter(torch.empty(a.inner))
        # Jamba's norms over Δ's input, B and C (weights R, N, N)
        self.dt_norms = nn.ModuleList(nn.RMSNorm(w, eps=1e-6) for w in (a.dt_rank, a.state_size, a.state_size)) \
            if a.dt_norms else None
        self.out_proj = nn.Linear(a.inner, d, bias=a.bias)

    def cache_shapes(self, batch: int, n: int) -> list[tuple[int, ...]]:
        a = self.a
        return [(batch, a.inner, a.state_size), (batch, a.inner, a.conv_kernel)]

    def cache_dtypes(self) -> dict[int, torch.dtype]:
        return {0: torch.float32} if self.a.state_dtype == "fp32" else {}

    def forward(self, x: Tensor, kv: tuple[Tensor, Tensor] | None, step: Step) -> Tensor:
        a, B, T = self.a, x.shape[0], x.shape[1]
        K, N, R = a.conv_kernel, a.state_size, a.dt_rank
        xs, z = self.in_proj(x).chunk(2, -1)  # [B, T, d] @ [d, 2I] → x, z [B, T, I]
        xs = xs.transpose(1, 2)  # [B, I, T]
        past = kv[1][..., 1:] if kv is not None and step.start else xs.new_zeros(B, a.inner, K - 1)
        window = torch.cat([past, xs], -1)  # [B, I, K − 1 + T]
        if kv is not None:
            kv[1].copy_(window[..., -K:])  # the last K inputs
        # depthwise causal conv: [B, I, T, K] windows · [I, K] taps → [B, I, T]
        xs = torch.einsum("bctk,ck->bct", window.unfold(-1, K, 1), self.conv_weight)
        if self.conv_bias is not None:
            xs = xs + self.conv_bias[:, None]
        xs = F.silu(xs).transpose(1, 2)  # [B, T, I]
        dt, b, c = self.x_proj(xs).split([R, N, N], -1)  # [B, T, I] @ [I, R + 2N]
        if self.dt_norms is not None:
            dt, b, c = (norm(t) for norm, t in zip(self.dt_norms, (dt, b, c), strict=True))
        dt = F.softplus(self.dt_proj(dt).float())  # [B, T, R] @ [R, I] (+ bias) → Δ [B, T, I]
        A = -torch.exp(self.A_log.float())  # [I, N]
        h = kv[0].float() if kv is not None and step.start else x.new_zeros(B, a.inner, N, dtype=torch.float32)
        u, b, c = xs.float(), b.float(), c.float()
        ys = []
        for t in range(T):  # h ← exp(Δ·A) ⊙ h + (Δ·x) ⊗ B, element-wise; y = h·C, one bmm
            h = torch.exp(dt[:, t, :, None] * A) * h + (dt[:, t] * u[:, t])[..., None] * b[:, t, None, :]
            ys.append(torch.bmm(h, c[:, t, :, None])[..., 0])  # [B, I, N] @ [B, N, 1] → [B, I]
        if kv is not None:
            kv[0].copy_(h)
        y = torch.stack(ys, 1) + u * self.D.float()  # [B, T, I], the D skip
        y = (y * F.silu(z.float())).to(x.dtype)
        return self.out_proj(y)  # [B, T, I] @ [I, d] → [B, T, d]


class ParallelMixer(nn.Module):
    """Two mixers on the same input, their outputs summed (Falcon-H1: attention ∥ Mamba-2). The cache is the
    attention's tensors followed by the Mamba's. Falcon-H1's scalar multipliers are left out (no parameters, no
    matmuls)."""

    def __init__(self, spec: ModelSpec, window: int | None):
        super().__init__()
        p = spec.attention
        self.window = window
        self.attention = GQAttention(spec.model_copy(update={"attention": p.attention}), window)
        mamba = {"mamba2": Mamba2Mixer, "mamba": MambaMixer}[p.mamba.kind]  # the two a parallel mixer takes
        self.mamba = mamba(spec.model_copy(update={"attention": p.mamba}), None)
        self.split = len(self.attention.cache_shapes(1, 1))

    def cache_shapes(self, batch: int, n: int) -> list[tuple[int, ...]]:
        return self.attention.cache_shapes(batch, n) + self.mamba.cache_shapes(batch, n)

    def cache_dtypes(self) -> dict[int, torch.dtype]:
        own = getattr(self.attention, "cache_dtypes", dict)()
        return own | {self.split + i: t for i, t in self.mamba.cache_dtypes().items()}

    def forward(self, x: Tensor, kv: tuple[Tensor, ...] | None, step: Step) -> Tensor:
        a_kv, m_kv = (None, None) if kv is None else (kv[:self.split], kv[self.split:])
        return self.attention(x, a_kv, step) + self.mamba(x, m_kv, step)
