"""LFM2's gated short convolution in the reference model (llmcalc/model/short_conv.py): y = C ⊙ conv(B ⊙ x).

Shapes: B batch, T new tokens, d model width (the conv's channels), K conv taps. The conv is one einsum over the
K-wide windows of its input (what FlopCounterMode counts, 2·d·K per output token); the gates are element-wise.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from llmcalc.model.spec import ModelSpec
from llmcalc.reference.layers import Step


class ShortConvMixer(nn.Module):
    """Parameters as transformers lays them out: in_proj d → 3·d split [B, C, x], a depthwise conv [d, K], out_proj;
    biases on all three with `bias`. Cache per sequence: the conv's last K inputs [B, d, K]."""

    def __init__(self, spec: ModelSpec, window: int | None):
        super().__init__()
        a, d = spec.attention, spec.d_model
        self.window, self.a = window, a
        self.in_proj = nn.Linear(d, 3 * a.width, bias=a.bias)
        self.conv_weight = nn.Parameter(torch.empty(a.width, a.conv_kernel))
        self.conv_bias = nn.Parameter(torch.empty(a.width)) if a.bias else None
        self.out_proj = nn.Linear(a.width, d, bias=a.bias)

    def cache_shapes(self, batch: int, n: int) -> list[tuple[int, ...]]:
        return [(batch, self.a.width, self.a.conv_kernel)]

    def forward(self, x: Tensor, kv: tuple[Tensor, ...] | None, step: Step) -> Tensor:
        a, B = self.a, x.shape[0]
        K = a.conv_kernel
        b, c, xs = self.in_proj(x).chunk(3, -1)  # [B, T, d] @ [d, 3d] → B, C, x [B, T, d]
        bx = (b * xs).transpose(1, 2)  # [B, d, T]
        past = kv[0][..., 1:] if kv is not None and step.start else bx.new_zeros(B, a.width, K - 1)
        window = torch.cat([past, bx], -1)  # [B, d, K − 1 + T]
        if kv is not None:
            kv[0].copy_(window[..., -K:])  # the last K inputs
        # depthwise causal conv: [B, d, T, K] windows · [d, K] taps → [B, d, T]
        y = torch.einsum("bctk,ck->bct", window.unfold(-1, K, 1), self.conv_weight)
        if self.conv_bias is not None:
            y = y + self.conv_bias[:, None]
        return self.out_proj(c * y.transpose(1, 2))  # [B, T, d] @ [d, d]
