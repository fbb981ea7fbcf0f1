"""Gated cross-attention to image tokens (Llama 3.2 Vision's cross-attention layers, transformers' mllama): the
reference module of llmcalc/model/cross_attention.py (docs/vision.md#llama-32-vision).

Shapes: B batch, S text tokens, T image tokens a sequence reads, W their width (the language model's d, after the
projector), H query heads, H_kv key/value heads, h head dim, d model width.

The decoder is built without the vision tower (validate measures the tower on its own), so the layer reads a
stand-in for the projector's output: a fixed [B, T, W] tensor made in the prefill, varying with token and feature
(a sine of both indices: element-wise, no FLOPs, one T × W tensor in the model's dtype), which a training step
differentiates as it would the projector's output.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from llmcalc.model.spec import ModelSpec
from llmcalc.reference.layers import Step, make_norm


class GatedCrossAttentionMixer(nn.Module):
    """q from the text, k and v from the image tokens (computed once, at the prompt, and cached), q and k
    RMS-normed per head, no positions, no mask; the output scaled by tanh(attention gate). The layer's second
    gate, tanh(MLP gate), scales its FFN branch (`ffn_scale`, read by the reference Layer). Cache: the image
    tokens' K and V, [B, H_kv, T, h] each, whatever the text's length."""

    def __init__(self, spec: ModelSpec, window: int | None):
        super().__init__()
        a, d = spec.attention, spec.d_model
        self.window, self.heads, self.kv_heads, self.head_dim = window, a.heads, a.kv_heads, a.head_dim
        self.image_tokens, self.image_width = a.image_tokens, a.image_width
        self.q = nn.Linear(d, a.q_width, bias=False)
        self.k = nn.Linear(a.image_width, a.kv_width, bias=False)
        self.v = nn.Linear(a.image_width, a.kv_width, bias=False)
        self.o = nn.Linear(a.q_width, d, bias=False)
        self.q_norm, self.k_norm = make_norm(spec.norm, a.head_dim), make_norm(spec.norm, a.head_dim)
        self.gates = nn.Parameter(torch.empty(2))  # [attention gate, MLP gate]

    def cache_shapes(self, batch: int, n: int) -> list[tuple[int, ...]]:
        return [(batch, self.kv_heads, self.image_tokens, self.head_dim)] * 2

    def image_states(self, batch: int, like: Tensor) -> Tensor:
        """The stand-in for the projector's output, [B, T, W] (see the module docstring)."""
        token = torch.arange(self.image_tokens, device=like.device, dtype=like.dtype)[:, None] * 1e-2  # [T, 1]
        feature = torch.arange(self.image_width, device=like.device, dtype=like.dtype) * 1e-3  # [W]
        states = (token + feature).sin_()[None].expand(batch, -1, -1)  # [B, T, W], one [T, W] tensor
        return states.requires_grad_() if torch.is_grad_enabled() else states

    def image_keys(self, batch: int, like: Tensor) -> tuple[Tensor, Tensor]:
        """K and V of the image tokens, [B, H_kv, T, h] each (k normed per head)."""
        img = self.image_states(batch, like)
        k = self.k_norm(self.k(img).view(batch, self.image_tokens, self.kv_heads, -1))  # [B, T, W] @ [W, H_kv·h]
        v = self.v(img).view(batch, self.image_tokens, self.kv_heads, -1)  # [B, T, W] @ [W, H_kv·h]
        return k.transpose(1, 2), v.transpose(1, 2)

    def forward(self, x: Tensor, kv: tuple[Tensor, Tensor] | None, step: Step) -> Tensor:
        B, S, _ = x.shape
        q = self.q_norm(self.q(x).view(B, S, self.heads, -1)).transpose(1, 2)  # [B, S, d] @ [d, H·h] → [B, H, S, h]
        if kv is not None and step.start > 0:  # a later step reads the cached image keys
            k, v = kv
        else:  # the prompt projects the image tokens, once
            k, v = self.image_keys(B, x)
            if kv is not None:
                kv[0].copy_(k)
                kv[1].copy_(v)
        # every text token over every image token: [B, H, S, h] · [B, H_kv, T, h] → [B, H, S, h]
        out = F.scaled_dot_product_attention(q, k.to(q.dtype), v.to(q.dtype), enable_gqa=True)
        del q, k, v
        out = self.o(out.transpose(1, 2).reshape(B, S, -1))  # [B, S, H·h] @ [H·h, d] → [B, S, d]
        return out * torch.tanh(self.gates[0]).to(out.dtype)

    def ffn_scale(self) -> Tensor:
        """tanh(MLP gate): the factor of this layer's FFN branch."""
        return torch.tanh(self.gates[1])
