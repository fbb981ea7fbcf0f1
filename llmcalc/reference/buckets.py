"""T5's bucketed relative attention bias (Raffel et al. 2020, §2.1), the reference of the `t5_buckets` position kind
(llmcalc/model/positions.py), in a decoder: causal, so only keys at or before the query are bucketed.

Per head n, query i and key j score q_i·k_j·scale + table[bucket(j − i), n]: the table [n_b, H] is a parameter of
the first layer, and every layer adds the bias read from it, as T5's stacks do. The bias is a lookup and an add:
no matmul, so the FLOPs are GQA's. T5 folds 1/√h into its query's initialisation; this module scales by it as
the other reference attentions do, which changes no FLOP.

Shapes: B batch, T new tokens, L keys attended (the last T of them new), H heads, H_kv key/value heads, h head dim,
n_b buckets.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from llmcalc.model.spec import ModelSpec
from llmcalc.reference.layers import GQAttention, Step, _positions, cache_step


def relative_bucket(offset: Tensor, num_buckets: int, max_distance: int, bidirectional: bool = False) -> Tensor:
    """The bucket [same shape] of each offset j − i (key position minus query position), in 0 … num_buckets − 1.

    Causal (a decoder): a key after the query cannot be seen; n = max(i − j, 0) and all num_buckets buckets go to
    n. Bidirectional (an encoder): half the buckets per sign, offsets after the query in the upper half, n = |j − i|.
    Then the first half of a side's buckets hold n = 0, 1, … one by one, and the rest grow logarithmically from
    there up to max_distance; every larger n shares the last bucket (Mesh TensorFlow's, as T5 computes it)."""
    side, bucket = num_buckets, torch.zeros_like(offset)
    if bidirectional:
        side //= 2
        bucket = (offset > 0).long() * side
        n = offset.abs()
    else:
        n = (-offset).clamp(min=0)
    exact = side // 2  # buckets of one offset each
    # log-spaced: exact + ⌊log(n / exact) / log(max_distance / exact) · (side − exact)⌋, in fp32 as T5's
    ratio = n.clamp(min=exact).float() / exact  # ≥ 1 where it is used (n ≥ exact)
    far = exact + (torch.log(ratio) / math.log(max_distance / exact) * (side - exact)).long()
    return bucket + torch.where(n < exact, n, far.clamp(max=side - 1))


class BucketAttention(GQAttention):
    """Multi-head attention with T5's bucketed bias. The first layer's holds the table, `relative_attention_bias`
    [n_b, H] (T5's name), and the decoder passes it to every layer in `step.buckets`. Cache: K and V, as GQA's;
    the bias adds none (it is recomputed from positions every step)."""

    def __init__(self, spec: ModelSpec, window: int | None, table: bool = False):
        a, p = spec.attention, spec.positions
        if a.kind != "gqa" or a.sinks:
            raise ValueError("positions.kind t5_buckets: the reference model adds T5's bias to multi-head attention "
                             "(gqa) without sinks; drop sinks or use another position kind")
        super().__init__(spec, window)
        self.heads, self.num_buckets, self.max_distance = a.heads, p.num_buckets, p.max_distance
        self.relative_attention_bias = nn.Embedding(p.num_buckets, a.heads) if table else None  # [n_b, H]

    def bias(self, table: Tensor, q_start: int, T: int, L: int, dtype: torch.dtype) -> Tensor:
        """[1, H, T, L]: table[bucket(j − i)] for the T queries from q_start and the L keys ending with them,
        −∞ where the key is masked (after the query, or out of the window)."""
        qpos, kpos, keep = _positions(q_start, T, q_start + T - L, L, self.window, table.device)  # [T, 1], [L], [T, L]
        buckets = relative_bucket(kpos - qpos, self.num_buckets, self.max_distance)  # [T, L]
        bias = F.embedding(buckets, table.to(dtype)).permute(2, 0, 1)  # [T, L, H] → [H, T, L]: a lookup, no FLOPs
        return bias.masked_fill_(~keep, -math.inf)[None]  # [1, H, T, L]

    def forward(self, x: Tensor, kv: tuple[Tensor, Tensor] | None, step: Step) -> Tensor:
        B, T, _ = x.shape
        q, k, v = self.qkv(x, step)  # [B, T, H, h], [B, T, H_kv, h] ×2
        cache_k, cache_v = kv or (None, None)
        k = cache_step(cache_k, k.transpose(1, 2), step.start, self.window)  # [B, H_kv, L, h]
        v = cache_step(cache_v, v.transpose(1, 2), step.start, self.window)  # [B, H_kv, L, h]
        mask = self.bias(step.buckets, step.start, T, k.shape[-2], q.dtype)  # [1, H, T, L]
        # softmax(q·kᵀ·scale + bias) · v: [B, H, T, h] @ [B, H_kv, h, L] → [B, H, T, L] @ [B, H_kv, L, h] → [B, H, T, h]
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k, v, attn_mask=mask, scale=self.head_dim**-0.5,
                                             enable_gqa=True)
        del q, k, v  # a cache holds K and V now
        return self.o(out.transpose(1, 2).reshape(B, T, -1))  # [B, T, H·h] @ [H·h, d] → [B, T, d]
