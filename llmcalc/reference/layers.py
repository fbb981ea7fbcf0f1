"""The reference model's parts, small to large: norms, positions (RoPE, ALiBi, sinusoidal), the cache step,
attention kernels (SDPA, blocked flash, eager), GQA and MLA attention, the MLP and the routed experts.
Sparse attention variants build on these in sparse.py; model.py assembles them into the decoder.

Shapes: B batch, T new tokens, L keys attended, d model width, H query heads, H_kv key/value heads,
h head dim, f FFN width, E routed experts, k experts per token, V vocabulary. MLA: r_q / r the query /
key-value latent ranks, d_n / d_r / d_v the no-RoPE, RoPE and value head dims.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from llmcalc.model.moe import MoE as MoESpec
from llmcalc.model.norm import Norm as NormSpec
from llmcalc.model.spec import ModelSpec


def _sigmoid_gate(x: Tensor) -> Tensor:
    """x·σ(1.702·x) = silu(1.702·x) / 1.702 (quick_gelu; gpt-oss' gate without its clamps and up + 1):
    one temporary, rewritten in place when no autograd keeps it."""
    t = x * 1.702
    return F.silu(t) / 1.702 if torch.is_grad_enabled() else F.silu(t, inplace=True).div_(1.702)


ACTIVATIONS = {
    "gelu": F.gelu,
    "gelu_tanh": partial(F.gelu, approximate="tanh"),
    "relu": F.relu,
    "relu2": lambda x: F.relu(x).square(),
    "silu": F.silu,
    "swish": F.silu,
    "quick_gelu": _sigmoid_gate,
    "swiglu_oai": _sigmoid_gate,
}
MIN_SCRATCH = 2**20
"""Serving kernels that cannot avoid scratch (masks of a masked attention, a sparse pattern's gathered keys)
run in blocks whose scratch stays within the largest of 1/16 of the residual stream's bytes, 1/128 of the
weights' and this floor, as a flash kernel's tiles stay bounded. It is not in llmcalc's estimate."""
ROPE_BASE = 10_000.0
GPU_PATHS = [False]
"""True while the reference's kernels are counted for a GPU on fake CPU tensors (llmcalc/reference/kernel_count.py):
every tensor then takes the path a CUDA tensor takes."""


def on_gpu(t: Tensor) -> bool:
    """Whether `t` takes the GPU's kernels: a CUDA tensor, or any tensor while GPU_PATHS is set."""
    return t.device.type == "cuda" or GPU_PATHS[0]

Cache = list[tuple[Tensor, Tensor]]
"""Per layer: GQA (K, V) [B, H_kv, n, h] each; MLA (latent [B, n, r], RoPE key [B, n, d_r])."""


@dataclass
class Step:
    """What every layer needs to know about one forward call."""

    start: int  # position of the first new token
    rope: tuple[Tensor, Tensor] | None  # cos, sin [T, 1, rot]
    alibi: Tensor | None  # [H] slopes
    absorbed: bool  # MLA attends in the latent space (a step that extends a cache)
    serving: bool = False  # serving kernels (see Decoder.use_kernels), else counted ones
    scratch: int = MIN_SCRATCH  # bytes one block of a serving kernel may hold (see MIN_SCRATCH)
    relative: Tensor | None = None  # relative positions' biases u and v [2, H, h] when shared across layers
    buckets: Tensor | None = None  # T5's bias table [n_b, H], the first layer's, read by every layer


class RMSNorm(nn.RMSNorm):
    """x / sqrt(mean(x²) + eps) · weight over the last dim (weight n). Without autograd it holds only its
    output and one fp32 statistic per row, as a fused kernel does: torch's composite rms_norm (what runs
    on the CPU and under FakeTensorMode) keeps fp32 copies of x, about six of x's size in all."""

    def forward(self, x: Tensor) -> Tensor:
        if torch.is_grad_enabled():
            return super().forward(x)
        n = x.shape[-1]
        norm = torch.linalg.vector_norm(x, dim=-1, keepdim=True, dtype=torch.float32)  # [.., 1]: sqrt(Σx²)
        scale = norm.square_().div_(n).add_(self.eps).rsqrt_()  # 1 / sqrt(mean(x²) + eps)
        return (x * scale.to(x.dtype)).mul_(self.weight)


def make_norm(norm: NormSpec, n: int) -> nn.Module:
    """RMSNorm (weight n) or LayerNorm (weight n, bias n if norm.bias)."""
    return RMSNorm(n, eps=1e-6) if norm.kind == "rmsnorm" else nn.LayerNorm(n, eps=1e-5, bias=norm.bias)


def rope_tables(pos: Tensor, dim: int, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """cos and sin [T, 1, rot] of the angles pos·θ_i, θ_i = base^(−2i/rot), rot = dim rounded down to even.
    The angles are a broadcast product, not a matmul (FlopCounterMode would count one)."""
    rot = dim - dim % 2
    inv_freq = ROPE_BASE ** (-torch.arange(0, rot, 2, device=pos.device, dtype=torch.float32) / rot)
    angles = pos[:, None].float() * inv_freq  # [T, rot/2]
    angles = torch.cat([angles, angles], -1)[:, None]  # [T, 1, rot]
    return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rope(x: Tensor, rope: tuple[Tensor, Tensor]) -> Tensor:
    """Rotate the first rot features of x [B, T, heads, e] (rotate-half pairing); the rest pass through.

    Inference (no autograd) rotates x in place, as serving kernels do, with one temporary of half the
    rotated features; training builds a new tensor, since autograd keeps x."""
    cos, sin = rope
    rot = cos.shape[-1]
    if not torch.is_grad_enabled():
        half = rot // 2
        x1, x2 = x[..., :half], x[..., half:rot]
        c, s = cos[..., :half], sin[..., :half]  # the tables repeat their halves
        t = x1 * s  # [B, T, heads, rot/2]
        x1.mul_(c).addcmul_(x2, s, value=-1)  # x1·cos − x2·sin
        x2.mul_(c).add_(t)  # x2·cos + x1·sin
        return x
    xr = x[..., :rot]
    half = torch.cat([-xr[..., rot // 2:], xr[..., : rot // 2]], -1)
    return torch.cat([xr * cos + half * sin, x[..., rot:]], -1)


def rope_part(x: Tensor, start: int, rope: tuple[Tensor, Tensor]) -> Tensor:
    """x [B, T, heads, e] with RoPE on its features from `start` on (MLA's q_rope after q_nope): in place
    without autograd, else a new tensor."""
    if not torch.is_grad_enabled():
        apply_rope(x[..., start:], rope)
        return x
    return torch.cat([x[..., :start], apply_rope(x[..., start:], rope)], -1)


def sinusoidal(pos: Tensor, d: int) -> Tensor:
    """[T, d]: sin(p·ω_i) at even features, cos(p·ω_i) at odd ones, ω_i = 10000^(−2i/d)."""
    inv_freq = ROPE_BASE ** (-torch.arange(0, d, 2, device=pos.device, dtype=torch.float32) / d)
    angles = pos[:, None].float() * inv_freq
    return torch.stack([angles.sin(), angles.cos()], -1).flatten(1)[:, :d]


def alibi_slopes(heads: int, device: torch.device) -> Tensor:
    """Press et al.'s slopes [H]: 2^(−8i/p) for i = 1..p (p the largest power of 2 ≤ H), then
    2^(−4(2j − 1)/p) for the remaining heads j = 1..H − p."""
    p = 2 ** math.floor(math.log2(heads))
    i = torch.arange(1, heads + 1, device=device, dtype=torch.float32)
    return torch.where(i <= p, 2 ** (-8 * i / p), 2 ** (-4 * (2 * (i - p) - 1) / p))


def cache_step(cache: Tensor | None, new: Tensor, start: int, window: int | None) -> Tensor:
    """Store `new` [..., T, e] (positions start..start+T−1) in `cache` [..., C, e]; return the keys the
    new tokens attend over, [..., L, e], oldest first and ending at position start+T−1.

    While every position fits (start + T ≤ C) position p lives in slot p and L = start + T. A sliding
    layer's cache of C = window − 1 slots then shifts: the held min(start, C) positions and the new
    ones are returned (L = min(start, C) + T) and their last C are kept, as transformers' sliding
    cache does. No cache: `new` itself.
    """
    if cache is None:
        return new
    T, C = new.shape[-2], cache.shape[-2]
    if start + T <= C:
        cache[..., start : start + T, :] = new
        return cache[..., : start + T, :].to(new.dtype)
    if window is None or C < window - 1:
        raise ValueError(f"the cache holds {C} positions; positions {start}..{start + T - 1} do not fit")
    held = min(start, C)
    if held == 0:  # a prefill longer than the cache: keep its last C positions, attend over `new`
        cache.copy_(new[..., T - C :, :])
        return new
    keys = torch.cat([cache[..., :held, :].to(new.dtype), new], -2)  # positions start−held .. start+T−1
    cache.copy_(keys[..., held + T - C :, :])
    return keys


def ring_step(cache: Tensor, new: Tensor, start: int) -> Tensor:
    """cache_step for serving kernels' sliding caches, kept as a ring: once positions outrun the C slots, position
    p lives in slot p mod C, so a decode step writes one slot (ring_write) instead of shifting the whole window.
    Returns the keys the new tokens attend over, oldest first (a copy only where the ring has wrapped)."""
    T, C = new.shape[-2], cache.shape[-2]
    if start + T <= C:
        return cache_step(cache, new, start, None)
    held = min(start, C)
    old = cache[..., :held, :] if start <= C else cache.roll(-(start % C), -2)  # positions start − held …
    keys = torch.cat([old.to(new.dtype), new], -2) if held else new  # positions start − held … start + T − 1
    cache.copy_(keys[..., -C:, :].roll((start + T - C) % C, -2))  # the last C positions, each in slot p mod C
    return keys


def ring_write(cache: Tensor, new: Tensor, start: int) -> None:
    """Store one new position `start` [..., 1, e] in its ring slot, over the position that leaves the window."""
    cache[..., start % cache.shape[-2], :] = new[..., 0, :]


def attend_held_and_new(q: Tensor, k: Tensor, v: Tensor, k1: Tensor, v1: Tensor, scale: float) -> Tensor:
    """One query per sequence over the held keys k, v [B, H_kv, C, e] (in any order: all visible, no position
    bias) and its own key k1, v1 [B, H_kv, 1, e], without concatenating them: a flash call over the held keys
    returns its output and log-sum-exp, and the new key's score joins them, softmax(s) = e^(s − lse) re-weighted:
    o = (o_held · e^lse + v1 · e^s1) / (e^lse + e^s1). q [B, H, 1, e] → [B, H, 1, e]."""
    g = q.shape[1] // k.shape[1]
    out, lse = _attention_lse(q, k, v, scale)  # [B, H, 1, e], [B, H, 1] (fp32)
    s1 = (q.float() * k1.repeat_interleave(g, 1).float()).sum(-1) * scale  # [B, H, 1]
    top = torch.maximum(lse, s1)
    a, b = (lse - top).exp()[..., None], (s1 - top).exp()[..., None]
    return ((out.float() * a + v1.repeat_interleave(g, 1).float() * b) / (a + b)).to(q.dtype)


def _attention_lse(q: Tensor, k: Tensor, v: Tensor, scale: float) -> tuple[Tensor, Tensor]:
    """Flash attention with no mask, returning the output and the per-query log-sum-exp [B, H, T] (fp32)."""
    if on_gpu(q):
        try:  # the flash kernel takes fewer K/V heads than query heads (GQA) where its build does
            out = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, False, False, scale=scale)
            return out[0], out[1]
        except RuntimeError:
            if k.shape[1] == q.shape[1]:
                raise
    if k.shape[1] != q.shape[1]:
        k, v = (t.repeat_interleave(q.shape[1] // t.shape[1], 1) for t in (k, v))
    if on_gpu(q):
        out = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, False, False, scale=scale)
        return out[0], out[1]
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, scale=scale)
    return out, lse


def attend(q: Tensor, k: Tensor, v: Tensor, *, start: int, window: int | None, scale: float,
           alibi: Tensor | None = None, sinks: Tensor | None = None, serving: bool = False,
           scratch: int = MIN_SCRATCH) -> Tensor:
    """softmax(q·kᵀ·scale + bias)·v per head: q [B, H, T, e], k [B, H_kv, L, e], v [B, H_kv, L, e_v]
    → [B, H, T, e_v], H a multiple of H_kv (GQA: each K/V head serves H/H_kv query heads).

    q holds positions start..start+T−1, k and v the L positions ending at start+T−1. The query at p
    sees keys in (p − window, p]. alibi [H] adds slope·(key − query position). sinks [H] is one extra
    logit per head that takes softmax mass and carries no value (gpt-oss); SDPA has no such input, so
    that case runs eagerly with the same two matmuls. FlopCounterMode counts the full T×L either way.

    Plain causal attention is one SDPA call (a flash kernel: output and log-sum-exp, no scores). Counted
    kernels run a masked one in one piece (eagerly with sinks). Serving kernels run it as flash kernels
    do, in blocks of queries, each over only the keys its queries may see (a sliding window's band),
    with a boolean mask (ALiBi: the bias) of at most `scratch` bytes, sinks applied from the kernel's
    log-sum-exp, into one output laid out [B, T, H, e_v] as flash kernels lay theirs out.
    """
    (B, H, T, _), L = q.shape, k.shape[-2]
    causal = T == 1 or (L == T and (window is None or window >= T))  # T == 1: every held key is visible
    if causal and alibi is None and sinks is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=T > 1, scale=scale, enable_gqa=True)
    end = start + T  # k and v hold positions end − L … end − 1
    if not serving:
        return _eager(q, k, v, start, end, window=window, scale=scale, alibi=alibi, sinks=sinks)
    per_key = 3 + (10 * H if alibi is not None else 0)  # a boolean mask and its conversion; ALiBi's bias
    keys = min(L, 2 * window) if window else L
    block = max(1, min(T, window or T, scratch // (per_key * keys)))
    out = q.new_empty(B, T, H, v.shape[-1]).transpose(1, 2)  # [B, H, T, e_v]
    for i in range(0, T, block):
        t = min(block, T - i)
        first = max(0, start + i - window + 1 - (end - L)) if window else 0  # the band's first key
        last = start + i + t - (end - L)  # keys past the block's last query are masked anyway
        out[:, :, i:i + t] = _flash_block(q[:, :, i:i + t], k[:, :, first:last], v[:, :, first:last],
                                          start + i, end - L + first, window=window, scale=scale, alibi=alibi,
                                          sinks=sinks)
    return out


def by_query_blocks(q: Tensor, width: int, per_query: int, scratch: int, fn) -> Tensor:
    """fn(q_block, i) over blocks of the T queries of q [B, H, T, e] (i: the block's first query), each
    block small enough that its scratch, `per_query` bytes a query, stays within `scratch` bytes (per_query
    0: one block); the blocks' results [B, H, t, width] fill one output [B, H, T, width] laid out [B, T, H, width]."""
    B, H, T, _ = q.shape
    block = max(1, scratch // max(1, per_query))
    if block >= T:
        return fn(q, 0)
    out = q.new_empty(B, T, H, width).transpose(1, 2)
    for i in range(0, T, block):
        out[:, :, i:i + block] = fn(q[:, :, i:i + block], i)
    return out


def _positions(q_start: int, t: int, k_start: int, n: int, window: int | None, device) -> tuple[Tensor, Tensor, Tensor]:
    """Query positions [t, 1], key positions [n] and which keys each query sees [t, n]: causal, in the window."""
    qpos = torch.arange(q_start, q_start + t, device=device)[:, None]
    kpos = torch.arange(k_start, k_start + n, device=device)
    keep = (kpos <= qpos) & (kpos > qpos - window) if window else kpos <= qpos
    return qpos, kpos, keep


def _flash_block(q: Tensor, k: Tensor, v: Tensor, q_start: int, k_start: int, *, window: int | None, scale: float,
                 alibi: Tensor | None, sinks: Tensor | None) -> Tensor:
    """Serving kernels: the queries at positions q_start … over the keys at positions k_start …, one flash call
    with a boolean mask, or ALiBi's bias [1, H, t, n]. Sinks: the flash kernel's output scaled by the mass the
    keys keep beside the sink, 1 / (1 + exp(sink − lse)), from the log-sum-exp [B, H, t] the CPU kernel returns."""
    qpos, kpos, keep = _positions(q_start, q.shape[2], k_start, k.shape[2], window, q.device)
    mask = keep
    if alibi is not None:
        mask = (alibi[:, None, None] * (kpos - qpos)).masked_fill_(~keep, -math.inf).to(q.dtype)[None]
    if sinks is None:
        if on_gpu(q) and k.shape[1] != q.shape[1]:  # CUDA's kernels that take a mask have no GQA:
            # SDPA would fall back to its math kernel (the scores in memory), so the band's K/V are repeated
            k, v = (t.repeat_interleave(q.shape[1] // t.shape[1], dim=1) for t in (k, v))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=True)
    if on_gpu(q):
        return _eager(q, k, v, q_start, k_start + k.shape[2], window=window, scale=scale, alibi=alibi, sinks=sinks)
    if mask.dtype == torch.bool:
        mask = torch.zeros(mask.shape, dtype=q.dtype, device=q.device).masked_fill_(~mask, -math.inf)
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, attn_mask=mask, scale=scale)
    return out.mul_(torch.sigmoid_(lse.sub_(sinks[:, None])).to(out.dtype)[..., None])


def _eager(q: Tensor, k: Tensor, v: Tensor, start: int, end: int, *, window: int | None, scale: float,
           alibi: Tensor | None, sinks: Tensor | None) -> Tensor:
    """Counted kernels: the queries at positions start … over the L keys ending at position end − 1 in one
    piece, SDPA with a float mask, or eagerly with sinks (the sink a column of the scores)."""
    (B, H, T, e), (H_kv, L) = q.shape, k.shape[1:3]
    qpos, kpos, keep = _positions(start, T, end - L, L, window, q.device)
    bias = torch.zeros(T, L, device=q.device).masked_fill(~keep, -math.inf)
    if alibi is not None:
        bias = bias + alibi[:, None, None] * (kpos - qpos)  # [H, T, L]
    bias = bias.to(q.dtype)
    if sinks is None:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=scale, enable_gqa=True)
    g = H // H_kv  # query heads per K/V head, folded into the rows: K and V are never repeated
    rows = (q * scale).unflatten(1, (H_kv, g)).reshape(B, H_kv, g * T, e)  # [B, H_kv, g·T, e]
    # [B, H_kv, g·T, e] @ [B, H_kv, e, L] → [B, H_kv, g·T, L] = [B, H, T, L]; then the sink column
    scores = (rows @ k.transpose(-1, -2)).view(B, H, T, L) + bias
    sink = sinks.view(1, -1, 1, 1).expand(B, H, T, 1)
    p = torch.cat([scores, sink], -1).softmax(-1)[..., :-1]  # softmax in the model's dtype
    # [B, H_kv, g·T, L] @ [B, H_kv, L, e_v] → [B, H_kv, g·T, e_v]
    return (p.reshape(B, H_kv, g * T, L) @ v).view(B, H, T, -1)


def qk_norms(norm: NormSpec, head: int, q_width: int, k_width: int) -> nn.ModuleList | None:
    """q and k norms: `head` one norm of the head dim each, `full` one over all q heads and one over all k heads."""
    dims = {"head": (head, head), "full": (q_width, k_width)}.get(norm.qk_norm)
    return nn.ModuleList(make_norm(norm, n) for n in dims) if dims else None


class GQAttention(nn.Module):
    """Grouped-query attention (MHA, GQA, MQA). Cache: K and V, [B, H_kv, n, h] each."""

    def __init__(self, spec: ModelSpec, window: int | None):
        super().__init__()
        a, d = spec.attention, spec.d_model
        self.window, self.head_dim, self.kv_heads = window, a.head_dim, a.kv_heads
        self.output_gate = getattr(a, "output_gate", False)  # Qwen3-Next: q's projection doubled, a gate per head
        self.q = nn.Linear(d, a.q_width * (2 if self.output_gate else 1), bias=a.qkv_bias)
        self.k = nn.Linear(d, a.kv_width, bias=a.qkv_bias and a.key_bias)
        self.v = nn.Linear(d, a.kv_width, bias=a.qkv_bias)
        self.o = nn.Linear(a.q_width, d, bias=a.o_bias)
        self.sinks = nn.Parameter(torch.empty(a.heads)) if a.sinks else None
        self.qk_norm = spec.norm.qk_norm
        self.qk_norms = qk_norms(spec.norm, a.head_dim, a.q_width, a.kv_width)

    def cache_shapes(self, batch: int, n: int) -> list[tuple[int, ...]]:
        return [(batch, self.kv_heads, n, self.head_dim)] * 2

    def forward(self, x: Tensor, kv: tuple[Tensor, Tensor] | None, step: Step) -> Tensor:
        B, T, _ = x.shape
        gate = None
        if self.output_gate:  # [B, T, d] @ [d, 2·H·h]: each head's query beside its gate
            q, gate = self.q(x).view(B, T, -1, 2 * self.head_dim).chunk(2, -1)
            q, k, v = self.qkv(x, step, q.reshape(B, T, -1))
        else:
            q, k, v = self.qkv(x, step)  # [B, T, heads, h]
        cache_k, cache_v = kv or (None, None)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [B, heads, T, h]
        scale = self.head_dim**-0.5
        if step.serving and cache_k is not None and 0 < cache_k.shape[-2] == (self.window or 0) - 1:
            # a sliding layer's full-window cache, kept as a ring
            if T == 1 and step.start >= cache_k.shape[-2] and step.alibi is None and self.sinks is None:
                out = attend_held_and_new(q, cache_k, cache_v, k, v, scale)  # every held key is in the window
                ring_write(cache_k, k, step.start)
                ring_write(cache_v, v, step.start)
            else:
                k, v = ring_step(cache_k, k, step.start), ring_step(cache_v, v, step.start)  # [B, H_kv, L, h]
                out = attend(q, k, v, start=step.start, window=self.window, scale=scale, alibi=step.alibi,
                             sinks=self.sinks, serving=True, scratch=step.scratch)
        else:
            k = cache_step(cache_k, k, step.start, self.window)  # [B, H_kv, L, h]
            v = cache_step(cache_v, v, step.start, self.window)  # [B, H_kv, L, h]
            out = attend(q, k, v, start=step.start, window=self.window, scale=scale, alibi=step.alibi,
                         sinks=self.sinks, serving=step.serving, scratch=step.scratch)  # [B, H, T, h] as [B, T, H, h]
        del q, k, v  # a cache holds K and V now
        out = out.transpose(1, 2).reshape(B, T, -1)
        if gate is not None:
            out = out * torch.sigmoid(gate.reshape(B, T, -1))
        return self.o(out)  # [B, T, H·h] @ [H·h, d] → [B, T, d]

    def qkv(self, x: Tensor, step: Step, q: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """Projected, normed and rotated q [B, T, H, h], k and v [B, T, H_kv, h] (q given: already projected)."""
        B, T, _ = x.shape
        q = self.q(x) if q is None else q  # [B, T, d] @ [d, H·h] → [B, T, H·h]
        k = self.k(x)  # [B, T, d] @ [d, H_kv·h] → [B, T, H_kv·h]
        v = self.v(x)  # [B, T, d] @ [d, H_kv·h] → [B, T, H_kv·h]
        if self.qk_norm == "full":
            q, k = self.qk_norms[0](q), self.qk_norms[1](k)
        q, k, v = (t.view(B, T, -1, self.head_dim) for t in (q, k, v))  # [B, T, heads, h]
        if self.qk_norm == "head":
            q, k = self.qk_norms[0](q), self.qk_norms[1](k)
        if step.rope:
            q, k = apply_rope(q, step.rope), apply_rope(k, step.rope)
        return q, k, v


class MLAttention(nn.Module):
    """Multi-head latent attention (DeepSeek-V2/V3). Cache: the normed latent [B, n, r] and the rotated
    RoPE key shared by all heads [B, n, d_r], never the decompressed K/V.

    decompress: kv_up re-projects every attended latent to per-head K (no-RoPE part) and V, then plain
    attention with K = [k_nope, k_rope]. absorbed: W_UK (kv_up's K rows) is folded into the query,
    q_lat = q_nope·W_UK per head [B, H, T, r], scores = q_lat·latentᵀ + q_rope·k_ropeᵀ, the latent is
    the value, and the result goes out through W_UV per head.
    """

    def __init__(self, spec: ModelSpec, window: int | None):
        super().__init__()
        a, d = spec.attention, spec.d_model
        self.window, self.a = window, a
        H, qk = a.heads, a.qk_head_dim
        if a.q_lora_rank is None:
            self.q = nn.Linear(d, H * qk, bias=False)
        else:
            self.q_down = nn.Linear(d, a.q_lora_rank, bias=a.bias)
            self.q_norm = RMSNorm(a.q_lora_rank, eps=1e-6)
            self.q_up = nn.Linear(a.q_lora_rank, H * qk, bias=False)
        self.kv_down = nn.Linear(d, a.kv_lora_rank + a.qk_rope_head_dim, bias=a.bias)
        self.kv_norm = RMSNorm(a.kv_lora_rank, eps=1e-6)
        self.kv_up = nn.Linear(a.kv_lora_rank, H * (a.qk_nope_head_dim + a.v_head_dim), bias=False)
        self.o = nn.Linear(H * a.v_head_dim, d, bias=a.bias)
        self.qk_norm = spec.norm.qk_norm
        self.qk_norms = qk_norms(spec.norm, qk, H * qk, H * qk)

    def cache_shapes(self, batch: int, n: int) -> list[tuple[int, ...]]:
        return [(batch, n, self.a.kv_lora_rank), (batch, n, self.a.qk_rope_head_dim)]

    def forward(self, x: Tensor, kv: tuple[Tensor, Tensor] | None, step: Step) -> Tensor:
        a, (B, T, _) = self.a, x.shape
        H, dn, dr, r = a.heads, a.qk_nope_head_dim, a.qk_rope_head_dim, a.kv_lora_rank
        if a.q_lora_rank is None:
            q = self.q(x)  # [B, T, d] @ [d, H·(d_n+d_r)] → [B, T, H·(d_n+d_r)]
        else:
            q = self.q_up(self.q_norm(self.q_down(x)))  # [B, T, d] @ [d, r_q] @ [r_q, H·(d_n+d_r)] → [B, T, H·(d_n+d_r)]
        q = q.view(B, T, H, dn + dr)
        latent, k_rope = self.kv_down(x).split([r, dr], -1)  # [B, T, d] @ [d, r+d_r] → [B, T, r+d_r]
        latent, k_rope = self.kv_norm(latent), k_rope[:, :, None]  # k_rope [B, T, 1, d_r]: one for all heads
        if step.rope:
            q = rope_part(q, dn, step.rope)
            k_rope = apply_rope(k_rope, step.rope)
        cache_latent, cache_rope = kv or (None, None)
        latent = cache_step(cache_latent, latent, step.start, self.window)  # [B, L, r]
        k_rope = cache_step(cache_rope, k_rope[:, :, 0], step.start, self.window)  # [B, L, d_r]
        attn = partial(attend, start=step.start, window=self.window, scale=a.qk_head_dim**-0.5, alibi=step.alibi,
                       serving=step.serving, scratch=step.scratch)
        if step.absorbed:
            one = a.qk_head_dim**-0.5 if step.serving and T == 1 and step.alibi is None else None
            out = self._absorbed(q[..., :dn], q[..., dn:], latent, k_rope, attn, one)
        else:
            out = self._decompressed(q, latent, k_rope, attn, step.serving)
        del q
        return self.o(out)  # [B, T, H·d_v] @ [H·d_v, d] → [B, T, d]

    def _decompressed(self, q, latent, k_rope, attn, serving: bool) -> Tensor:
        """q [B, T, H, d_n+d_r] over the latents [B, L, r] re-projected to per-head K and V. Serving
        kernels (flash) take one head dim for q, k and v: V is zero-padded to d_n + d_r (or q and k to d_v)
        and the output cut back, as serving stacks do; counted kernels keep the head dims (exactly the
        FLOPs of the formulas)."""
        a, (B, T, H, qk), L = self.a, q.shape, latent.shape[1]
        dn, dv = a.qk_nope_head_dim, a.v_head_dim
        kv = self.kv_up(latent).view(B, L, H, dn + dv)  # [B, L, r] @ [r, H·(d_n+d_v)] → [B, L, H, d_n+d_v]
        k = torch.cat([kv[..., :dn], k_rope[:, :, None].expand(B, L, H, a.qk_rope_head_dim)], -1)  # [B, L, H, qk]
        v = kv[..., dn:]  # [B, L, H, d_v]
        del kv
        if self.qk_norm == "head":
            q, k = self.qk_norms[0](q), self.qk_norms[1](k)
        elif self.qk_norm == "full":
            q, k = (n(t.flatten(2)).view(t.shape) for n, t in zip(self.qk_norms, (q, k), strict=True))
        if serving and dv < qk:
            v = F.pad(v, (0, qk - dv))  # [B, L, H, qk]: zero columns, cut from the output
        elif serving and dv > qk:
            q, k = F.pad(q, (0, dv - qk)), F.pad(k, (0, dv - qk))  # zero features add nothing to q·k
        out = attn(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))  # [B, H, T, max(d_v, qk)]
        del q, k, v
        return out[..., :dv].transpose(1, 2).reshape(B, T, -1)  # [B, T, H·d_v]

    def _absorbed(self, q_nope, q_rope, latent, k_rope, attn, one_query_scale: float | None = None) -> Tensor:
        """one_query_scale: a serving decode step (one query, every held key visible, no position bias), whose
        scores take this scale (see _absorbed_step); None: `attn` over the concatenated [latent, k_rope] keys."""
        a, (B, T, H, dn) = self.a, q_nope.shape
        # kv_up's weight [H·(d_n+d_v), r] per head: W_UK [H, d_n, r] makes no-RoPE keys, W_UV [H, d_v, r] values
        w_uk, w_uv = self.kv_up.weight.view(H, dn + a.v_head_dim, -1).split([dn, a.v_head_dim], 1)
        # [H, B·T, d_n] @ [H, d_n, r] → [H, B·T, r]
        q_lat = torch.bmm(q_nope.permute(2, 0, 1, 3).reshape(H, B * T, dn), w_uk)
        if one_query_scale is not None:  # a serving decode step: the cache read in place, no copy
            out = self._absorbed_step(q_lat.view(H, B, -1).transpose(0, 1), q_rope.reshape(B, H, -1), latent,
                                      k_rope, one_query_scale)  # [B, H, r]
            out = out.transpose(0, 1)[:, :, None]  # [H, B, 1, r]
            return torch.bmm(out.reshape(H, B, -1), w_uv.transpose(1, 2)).transpose(0, 1).reshape(B, 1, -1)
        q = torch.cat([q_lat.view(H, B, T, -1).transpose(0, 1), q_rope.transpose(1, 2)], -1)  # [B, H, T, r+d_r]
        keys = torch.cat([latent, k_rope], -1)[:, None]  # [B, 1, L, r+d_r]: one K/V "head" for all H
        out = attn(q, keys, latent[:, None])  # [B, H, T, r]
        # [H, B·T, r] @ [H, r, d_v] → [H, B·T, d_v]
        out = torch.bmm(out.transpose(0, 1).reshape(H, B * T, -1), w_uv.transpose(1, 2))
        return out.view(H, B, T, -1).permute(1, 2, 0, 3).reshape(B, T, -1)

    @staticmethod
    def _absorbed_step(q_lat: Tensor, q_rope: Tensor, latent: Tensor, k_rope: Tensor, scale: float) -> Tensor:
        """One query per sequence (all L keys visible) as serving MLA kernels run it: the H heads' queries are
        the rows of one product with the latents, which are read where the cache holds them (no concatenated
        keys, no copy per head): q_lat [B, H, r], q_rope [B, H, d_r], latent [B, L, r], k_rope [B, L, d_r]
        → [B, H, r]. The same FLOPs as the attention over [latent, k_rope]."""
        scores = torch.baddbmm(q_rope @ k_rope.transpose(1, 2), q_lat, latent.transpose(1, 2))  # [B, H, L]
        p = (scores.float() * scale).softmax(-1).to(latent.dtype)
        return p @ latent  # [B, H, L] @ [B, L, r] → [B, H, r]


def mul(a: Tensor, b: Tensor) -> Tensor:
    """a · b, into a when no autograd keeps it."""
    return a * b if torch.is_grad_enabled() else a.mul_(b)


def add(a: Tensor, b: Tensor) -> Tensor:
    """a + b, into a when no autograd keeps it (the residual stream, updated in place while serving)."""
    return a + b if torch.is_grad_enabled() else a.add_(b)


class XIELU(nn.Module):
    """xIELU (Huang et al. 2024, arXiv:2411.13010; Apertus): two learned scalars, α_p = softplus(a_p) and
    α_n = β + softplus(a_n), with β = 0.5 and ε = −1e-6 fixed: α_p·x² + β·x for x > 0, else
    α_n·(expm1(min(x, ε)) − x) + β·x."""

    BETA, EPS = 0.5, -1e-6

    def __init__(self):
        super().__init__()
        self.a_p = nn.Parameter(torch.zeros(1))  # [1]
        self.a_n = nn.Parameter(torch.zeros(1))  # [1]

    def forward(self, x: Tensor) -> Tensor:
        alpha_p = F.softplus(self.a_p).to(x.dtype)  # [1]
        alpha_n = (self.BETA + F.softplus(self.a_n)).to(x.dtype)  # [1]
        if torch.is_grad_enabled():
            negative = alpha_n * (torch.expm1(x.clamp(max=self.EPS)) - x)
            return torch.where(x > 0, alpha_p * x * x, negative) + self.BETA * x
        # serving: one more f-wide tensor (and a mask), x consumed in place as the other activations do
        positive = x > 0  # [B, T, f] bool
        y = x.clamp(max=self.EPS).expm1_().sub_(x).mul_(alpha_n).add_(x, alpha=self.BETA).masked_fill_(positive, 0)
        x = x.clamp_(min=0)
        y.add_(x, alpha=self.BETA)
        x = x.mul_(alpha_p.sqrt())
        return y.addcmul_(x, x)  # + α_p·x² where x > 0


class MLP(nn.Module):
    """down(act(up(x))), or down(act(gate(x)) · up(x)) when gated. Each intermediate is freed once used:
    at most two f-wide tensors at a time (gate and its activation, then the activation and up), then the
    product and the output. xielu is a module with its own two scalars."""

    def __init__(self, d: int, f: int, *, gated: bool, activation: str, bias: bool):
        super().__init__()
        self.gate = nn.Linear(d, f, bias=bias) if gated else None
        self.up = nn.Linear(d, f, bias=bias)
        self.down = nn.Linear(f, d, bias=bias)
        self.act = XIELU() if activation == "xielu" else ACTIVATIONS[activation]

    def forward(self, x: Tensor) -> Tensor:
        if self.gate is None:
            return self.down(self.act(self.up(x)))  # [B, T, d] @ [d, f] → [B, T, f] @ [f, d] → [B, T, d]
        h = self.act(self.gate(x))  # [B, T, d] @ [d, f] → [B, T, f]
        h = mul(h, self.up(x))  # [B, T, d] @ [d, f] → [B, T, f]
        return self.down(h)  # [B, T, f] @ [f, d] → [B, T, d]


GROUPED_MM = getattr(F, "grouped_mm", None) or torch._grouped_mm
"""One GEMM per group of rows: F.grouped_mm where torch has it, torch._grouped_mm in older releases."""


class Experts(nn.Module):
    """n MLPs stored stacked: gate and up [n, d, f], down [n, f, d], biases [n, f] and [n, d].

    forward(x [R, m, d], idx [R] or None): row r goes through expert idx[r] (None: expert r); the experts'
    matrices are gathered per row, [R, d, f], and applied with one bmm: 2·R·m·d·f FLOPs, as
    FlopCounterMode counts ("counted" kernels). permuted(): the rows sorted by expert and one grouped GEMM
    per matrix, reading each matrix in place, as serving MoE kernels do ("serving" kernels);
    FlopCounterMode does not see it.
    """

    def __init__(self, n: int, d: int, f: int, *, gated: bool, activation: str, bias: bool):
        super().__init__()
        self.n, self.gated, self.act = n, gated, ACTIVATIONS[activation]
        self.lora = None  # LoRA adapters per matrix (llmcalc/reference/lora.py: ExpertsLoRA)
        shapes = ({"gate": (d, f)} if gated else {}) | {"up": (d, f), "down": (f, d)}
        for name, (i, o) in shapes.items():
            setattr(self, name, nn.Parameter(torch.empty(n, i, o)))
            setattr(self, f"{name}_bias", nn.Parameter(torch.empty(n, o)) if bias else None)

    def groupable(self, x: Tensor) -> bool:
        """grouped_mm needs rows of 16-byte multiples, and bf16 on CUDA."""
        widths = self.up.shape[1:]
        return all(w * x.element_size() % 16 == 0 for w in widths) and (
            not on_gpu(x) or x.dtype == torch.bfloat16)

    def _bmm(self, x: Tensor, name: str, idx: Tensor | None) -> Tensor:
        w, b = getattr(self, name), getattr(self, f"{name}_bias")
        out = torch.bmm(x, w if idx is None else w[idx])  # [R, m, d_in] @ [R, d_in, d_out] → [R, m, d_out]
        if self.lora is not None and (delta := self.lora.delta(x, name, idx)) is not None:
            out = out + delta
        return out if b is None else add(out, (b if idx is None else b[idx])[:, None])

    def forward(self, x: Tensor, idx: Tensor | None = None) -> Tensor:
        if not self.gated:
            return self._bmm(self.act(self._bmm(x, "up", idx)), "down", idx)
        h = self.act(self._bmm(x, "gate", idx))
        h = mul(h, self._bmm(x, "up", idx))
        return self._bmm(h, "down", idx)

    def _grouped(self, x: Tensor, name: str, ends: Tensor, expert: Tensor) -> Tensor:
        """x [R, d_in] in expert order (expert e's rows end at ends[e]) @ each expert's matrix → [R, d_out]."""
        out = GROUPED_MM(x, getattr(self, name), offs=ends)
        b = getattr(self, f"{name}_bias")
        return out if b is None else add(out, b[expert])  # the bias of each row's expert, [R, d_out]

    def permuted(self, x: Tensor, idx: Tensor, weights: Tensor, k: int) -> Tensor:
        """Σ over each token's k experts of weight · expert(token): x [N, d], idx and weights [N·k] (token
        n's assignments at n·k … n·k + k − 1) → [N, d]. The N·k rows are permuted by expert (a copy of
        the tokens, freed once gate and up have read it), run as grouped GEMMs, weighted and added back."""
        order = idx.argsort()  # [R]: rows grouped by expert
        expert, rows = idx[order], order // k  # each sorted row's expert and token
        ends = torch.searchsorted(expert, torch.arange(self.n, device=x.device), right=True, out_int32=True)
        xs = x[rows]  # [R, d]: the tokens, permuted by expert
        h = self.act(self._grouped(xs, "gate" if self.gated else "up", ends, expert))  # [R, d] @ [d, f] → [R, f]
        if self.gated:
            h = mul(h, self._grouped(xs, "up", ends, expert))  # [R, d] @ [d, f] → [R, f]
        del xs
        out = mul(self._grouped(h, "down", ends, expert), weights[order, None])  # [R, f] @ [f, d] → [R, d]
        del h
        return x.new_zeros(x.shape).index_add_(0, rows, out)  # back to token order, summed: [N, d]


class MoEFFN(nn.Module):
    """Router d → E, softmax over each token's top_k logits, the routed experts over the T·k (token,
    expert) rows, plus shared experts on every token, scaled by sigmoid(d → 1) if gated.

    Zero experts (LongCat-Flash): the router has E + Z outputs and fills router_top_k slots a token; the routing
    is forced to the spec's share, the top_k best real experts and the router_top_k − top_k best zero experts (a
    zero expert passes the token through, scaled by its weight: element-wise), so the matmuls are the spec's at
    any weights (random weights would send a share that varies with the draw).

    impl "batched_mm" (default): one gathered bmm per matrix, 2·T·k·d·f FLOPs, static shapes: what
    the FLOP counts use. "grouped_mm": rows permuted by expert and one grouped GEMM per matrix, no weight
    copies: what peak memory and timings use (batched_mm where `Experts.groupable` says no).
    """

    def __init__(self, moe: MoESpec, d: int):
        super().__init__()
        mlp = dict(gated=moe.gated, activation=moe.activation, bias=moe.expert_bias)
        self.top_k, self.impl = moe.top_k, "batched_mm"
        self.real, self.zero_slots = moe.experts, moe.routed_slots - moe.top_k
        self.capacity_factor: float | None = None  # None: dropless (the default); see Decoder.drop_overflow
        self.last_dropped: int | None = None  # assignments the last forward dropped (with a capacity factor)
        self.router = nn.Linear(d, moe.router_width, bias=moe.router_bias)
        self.experts = Experts(moe.experts, d, moe.d_ff, **mlp)
        self.shared = Experts(moe.shared_experts, d, moe.shared_d_ff, **mlp) if moe.shared_experts else None
        self.shared_gate = nn.Linear(d, 1, bias=False) if moe.shared_gate else None

    def forward(self, x: Tensor) -> Tensor:
        B, T, d = x.shape
        x = x.reshape(B * T, d)
        N, k = B * T, self.top_k
        logits = self.router(x)  # [N, d] @ [d, E + Z] → [N, E + Z]
        top, idx = logits[:, :self.real].topk(k, -1)  # top_k real experts → [N, k]
        z = self.zero_slots
        if z:  # the best z zero experts join the softmax; each passes its token through
            top = torch.cat([top, logits[:, self.real:].topk(z, -1).values], -1)  # [N, k + z]
        del logits
        weights = top.float().softmax(-1).to(x.dtype)
        del top
        passed = weights[:, k:].sum(-1, keepdim=True) if z else None  # [N, 1]: the zero experts' weights
        weights = weights[:, :k]
        if self.capacity_factor is not None:
            weights = weights * self._within_capacity(idx)  # dropped assignments contribute nothing
        if self.impl == "grouped_mm" and self.experts.groupable(x):
            y = self.experts.permuted(x, idx.flatten(), weights.flatten(), k)  # [N, d]
        else:
            y = self.experts(x[:, None].expand(N, k, d).reshape(N * k, 1, d), idx.flatten())  # [N·k, 1, d]
            y = (y.view(N, k, d) * weights[..., None]).sum(1)  # weighted sum: element-wise, no matmul
        del idx, weights
        if passed is not None:  # the zero experts' outputs: the token, weighted (element-wise; x left as it is)
            y = torch.addcmul(y, x, passed) if torch.is_grad_enabled() else y.addcmul_(x, passed)
        if self.shared is not None:
            s = self.shared(x.expand(self.shared.n, N, d)).sum(0)  # every shared expert on every token
            if self.shared_gate is not None:
                s = mul(s, torch.sigmoid(self.shared_gate(x)))  # [N, d] @ [d, 1] → [N, 1]
            y = add(y, s)
        return y.view(B, T, d)

    def _within_capacity(self, idx: Tensor) -> Tensor:
        """[N, k] mask of the assignments an expert of capacity C = ceil(cf · N · k / E) keeps, in GShard's
        priority (every token's first choice in token order, then the second choices, …; Switch's for
        k = 1): an expert's first C assignments are kept, the rest dropped. Element-wise, no matmul."""
        N, k, E = idx.shape[0], self.top_k, self.experts.n
        cap = math.ceil(Fraction(repr(float(self.capacity_factor))) * N * k / E)
        hot = F.one_hot(idx.T.reshape(-1), E)  # [k·N, E], rank-major: all first choices, then the second, …
        slot = (hot.cumsum(0) * hot).sum(-1) - 1  # [k·N]: how many earlier assignments went to the same expert
        keep = (slot < cap).view(k, N).T  # [N, k]
        self.last_dropped = int((~keep).sum())
        return keep


def materialise(model: nn.Module, dtype: torch.dtype, device: str | torch.device) -> None:
    """Built on the meta device: a fresh tensor per parameter on `device` in `dtype`, norms 1 (weights) and 0
    (biases), the rest N(0, 0.02²), as the reference decoder does."""
    for m in model.modules():
        for name, p in m.named_parameters(recurse=False):
            setattr(m, name, nn.Parameter(torch.empty(p.shape, dtype=dtype, device=device)))
    model.weight_bytes = sum(p.nbytes for p in model.parameters())
    with torch.no_grad():
        for m in model.modules():
            for name, p in m.named_parameters(recurse=False):
                if isinstance(m, nn.RMSNorm | nn.LayerNorm):
                    (nn.init.ones_ if name == "weight" else nn.init.zeros_)(p)
                else:
                    nn.init.normal_(p, std=0.02)
