"""Reference module of chunked attention (llmcalc/model/chunked_attention.py): GQA whose query at position p
sees the keys of its own aligned chunk of C tokens, p − (p mod C) … p (Llama 4's attention_chunk_size).

The cache keeps K and V of the last min(n, C − 1) positions, as transformers' DynamicSlidingWindowLayer does for a
chunked layer; a step attends with a boolean mask over the keys from its first query's chunk start (a masked
dense kernel: FlopCounterMode counts the full T × L, the `dense` convention: S × S for a prefill, the chunk's own
keys for a decode step).
"""

import torch
import torch.nn.functional as F
from torch import Tensor

from llmcalc.model.spec import ModelSpec
from llmcalc.reference.layers import GQAttention, Step, cache_step

# Legend: B batch, T new tokens, L keys held + new, H query heads, H_kv key/value heads, h head dim, C chunk.


def chunk_mask(start: int, T: int, L: int, chunk: int, device: torch.device) -> Tensor:
    """[T, L] True where the query at start + i may see the key at position start + T − L + j: at or before it and
    in the same aligned chunk."""
    qpos = torch.arange(start, start + T, device=device)[:, None]  # [T, 1]
    kpos = torch.arange(start + T - L, start + T, device=device)[None, :]  # [1, L]
    return (kpos <= qpos) & (kpos // chunk == qpos // chunk)


class ChunkedAttention(GQAttention):
    """GQA within aligned chunks of C tokens. Cache: K and V, [B, H_kv, min(n, C − 1), h] each."""

    def __init__(self, spec: ModelSpec, window: int | None):
        super().__init__(spec, None)
        self.chunk = spec.attention.chunk
        self.window = self.chunk  # new_cache keeps min(n, C − 1) positions, as a window of C would

    def forward(self, x: Tensor, kv: tuple[Tensor, Tensor] | None, step: Step) -> Tensor:
        if step.alibi is not None or self.sinks is not None:
            raise ValueError("the chunked-attention reference supports no ALiBi and no sinks; use rope or none")
        B, T, _ = x.shape
        q, k, v = self.qkv(x, step)  # [B, T, heads, h]
        cache_k, cache_v = kv or (None, None)
        k = cache_step(cache_k, k.transpose(1, 2), step.start, self.chunk)  # [B, H_kv, L, h]
        v = cache_step(cache_v, v.transpose(1, 2), step.start, self.chunk)  # [B, H_kv, L, h]
        first = self.chunk * (step.start // self.chunk)  # the first query's chunk start
        held = k.shape[-2] - (step.start + T - first)  # keys before it: none of the queries sees them
        k, v = k[:, :, held:], v[:, :, held:]  # [B, H_kv, L, h], L = start + T − first
        q = q.transpose(1, 2)  # [B, H, T, h]
        keep = chunk_mask(step.start, T, k.shape[-2], self.chunk, x.device)  # [T, L]
        # [B, H, T, h] @ [B, H_kv, h, L] → [B, H, T, L], masked; @ [B, H_kv, L, h] → [B, H, T, h]
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, scale=self.head_dim**-0.5, enable_gqa=True)
        del q, k, v
        return self.o(out.transpose(1, 2).reshape(B, T, -1))  # [B, T, H·h] @ [H·h, d] → [B, T, d]
