"""Reference modules of the sparse attention variants (llmcalc/model/sparse_attention.py): Longformer,
Linformer, Reformer, DSA.

Shapes as in model.py: B batch, T new tokens, L keys held, H query heads, H_kv key/value heads, h head
dim, w window, g global tokens, K key slots per query. DSA: r_q / r the query / key-value latent ranks,
d_n / d_r / d_v the no-RoPE, RoPE and value head dims, H_I / d_I the indexer's heads and head dim.

Sparse work is done sparsely, so torch's FlopCounterMode counts exactly what the formulas count: each
query gathers its K key slots (an index, no FLOPs) and the scores and the weighted sum are matmuls over
those K, never a masked T×L. When every query's slots cover all L held keys (a short prefill, a decode
step before the pattern bites) the plain masked attention over the L keys is the same work.
"""

from __future__ import annotations

import math
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from llmcalc.model.spec import ModelSpec
from llmcalc.reference.layers import (
    GQAttention,
    MLAttention,
    Step,
    apply_rope,
    attend,
    by_query_blocks,
    cache_step,
    rope_part,
)

CACHE_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16, "fp8": torch.float8_e4m3fn}


def global_window_cache(cache: Tensor | None, new: Tensor, start: int, g: int) -> tuple[Tensor, Tensor]:
    """Store `new` [..., T, e] (positions start..start+T−1) in a Longformer cache [..., C, e] that keeps
    the g global positions and the last C − g = w − 1 others; return the keys the new tokens attend
    over [..., L, e] and their positions [L], oldest first.

    While every position fits, position p lives in slot p. After that slots 0..g−1 hold positions
    0..g−1 and slots g..C−1 the last C − g positions before `start`, oldest first."""
    T = new.shape[-2]
    if cache is None:
        return new, torch.arange(start, start + T, device=new.device)
    C = cache.shape[-2]
    if start + T <= C:
        cache[..., start : start + T, :] = new
        return cache[..., : start + T, :].to(new.dtype), torch.arange(start + T, device=new.device)
    rolling = C - g
    dev = new.device
    held_pos = (torch.arange(start, device=dev) if start <= C else
                torch.cat([torch.arange(g, device=dev), torch.arange(start - rolling, start, device=dev)]))
    held = held_pos.numel()
    if held == 0:  # a prefill longer than the cache: attend over `new` itself
        keys, kpos = new, torch.arange(T, device=dev)
    else:
        keys = torch.cat([cache[..., :held, :].to(new.dtype), new], -2)  # positions held_pos, then start..start+T−1
        kpos = torch.cat([held_pos, torch.arange(start, start + T, device=dev)])
    kept = [keys[..., :g, :]] + ([keys[..., keys.shape[-2] - rolling :, :]] if rolling else [])
    cache.copy_(torch.cat(kept, -2))  # the globals and the last w − 1 positions
    return keys, kpos


class LongformerAttention(GQAttention):
    """Longformer-style GQA, causal: the query at position p sees keys in (p − w, p] and the g global
    positions 0..g−1 (global queries, p < g, see everything before them). Cache: K and V of the globals
    and of the last w − 1 positions, min(n, w + g − 1) slots [B, H_kv, ·, h] each."""

    def __init__(self, spec: ModelSpec, window: int | None):
        super().__init__(spec, None)
        a = spec.attention
        self.w, self.g = a.window, a.global_tokens
        self.window = a.span  # new_cache keeps min(n, w + g − 1) positions

    def forward(self, x: Tensor, kv: tuple[Tensor, Tensor] | None, step: Step) -> Tensor:
        if step.alibi is not None or self.sinks is not None:
            raise ValueError("the Longformer reference supports no ALiBi and no sinks; use rope, learned or none")
        B, T, _ = x.shape
        q, k, v = self.qkv(x, step)  # [B, T, heads, h]
        cache_k, cache_v = kv or (None, None)
        k, kpos = global_window_cache(cache_k, k.transpose(1, 2), step.start, self.g)  # [B, H_kv, L, h], [L]
        v, _ = global_window_cache(cache_v, v.transpose(1, 2), step.start, self.g)  # [B, H_kv, L, h]
        q = q.transpose(1, 2)  # [B, H, T, h]
        (H, h), (H_kv, L) = q.shape[1::2], k.shape[1:3]
        qpos = torch.arange(step.start, step.start + T, device=x.device)
        if step.serving and step.start == 0 and T > 1:
            out = self._banded(q, k, v)
        elif L <= self.window or T == 1 or step.start > 0:  # every query computes all L keys
            masked = partial(self._masked, k=k, v=v, qpos=qpos, kpos=kpos)
            out = by_query_blocks(q, h, L * 8 if step.serving else 0, step.scratch, masked)  # the block's mask
        else:  # the gathered K and V of every slot, and a few scores each
            slots = self.g + self.w
            per_query = B * slots * (2 * H_kv * h * q.element_size() + 16 * H) if step.serving else 0
            out = by_query_blocks(q, h, per_query, step.scratch, partial(self._gathered, k=k, v=v, qpos=qpos))
        del q, k, v
        return self.o(out.transpose(1, 2).reshape(B, T, -1))  # [B, T, H·h] @ [H·h, d] → [B, T, d]

    def _banded(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        """Serving kernels, a prefill from position 0 (key index = position): blocks of w queries, each one
        flash call over the globals below its band and the band itself (at most g + 2w keys), with a
        boolean mask; q [B, H, T, h] → [B, H, T, h] laid out [B, T, H, h]."""
        (B, H, T, h), w, g = q.shape, self.w, self.g
        out = q.new_empty(B, T, H, h).transpose(1, 2)
        for p0 in range(0, T, w):
            p1, b0 = min(T, p0 + w), max(0, p0 - w + 1)
            glob = min(g, b0)  # globals below the band
            kpos = torch.cat([torch.arange(glob, device=q.device), torch.arange(b0, p1, device=q.device)])
            ks, vs = (torch.cat([t[:, :, :glob], t[:, :, b0:p1]], 2) for t in (k, v))  # [B, H_kv, n, h]
            qpos = torch.arange(p0, p1, device=q.device)[:, None]
            keep = (kpos <= qpos) & ((kpos > qpos - w) | (kpos < g))  # [t, n]
            out[:, :, p0:p1] = F.scaled_dot_product_attention(q[:, :, p0:p1], ks, vs, attn_mask=keep,
                                                              scale=self.head_dim**-0.5, enable_gqa=True)
        return out

    def _masked(self, q: Tensor, i: int, *, k: Tensor, v: Tensor, qpos: Tensor, kpos: Tensor) -> Tensor:
        """The queries q [B, H, t, h] from the i-th of the step over every held key (positions kpos), masked to
        the pattern: one SDPA call with a boolean mask [t, L]."""
        p = qpos[i:i + q.shape[2], None]
        keep = (kpos <= p) & ((kpos > p - self.w) | (kpos < self.g))  # [t, L]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=keep, scale=self.head_dim**-0.5,
                                              enable_gqa=True)  # [B, H, t, h]

    def _gathered(self, q: Tensor, i: int, *, k: Tensor, v: Tensor, qpos: Tensor) -> Tensor:
        """A prefill from position 0 (key index = position), queries q [B, H, t, h] from the i-th (positions
        qpos[i:]): K = g + w slots per query, the globals below its window and the window itself; slots
        outside the sequence or inside the window are masked."""
        qpos = qpos[i:i + q.shape[2]]
        (B, H, T, h), H_kv, w, g = q.shape, k.shape[1], self.w, self.g
        dev = q.device
        glob = torch.arange(g, device=dev).expand(T, g)  # [T, g]
        win = qpos[:, None] - w + 1 + torch.arange(w, device=dev)  # [T, w]: positions p − w + 1 .. p
        valid = torch.cat([glob <= qpos[:, None] - w, win >= 0], 1)  # [T, K]
        idx = torch.cat([glob, win], 1).clamp(min=0)  # [T, K]
        kg, vg = k[:, :, idx], v[:, :, idx]  # [B, H_kv, T, K, h]: an index, no FLOPs
        qg = (q * h**-0.5).view(B, H_kv, H // H_kv, T, 1, h)  # [B, H_kv, G, T, 1, h]
        # [B, H_kv, G, T, 1, h] @ [B, H_kv, 1, T, h, K] → [B, H_kv, G, T, 1, K]
        scores = (qg @ kg[:, :, None].transpose(-1, -2)).masked_fill(~valid[:, None], -math.inf)
        out = scores.softmax(-1) @ vg[:, :, None]  # [B, H_kv, G, T, 1, K] @ [B, H_kv, 1, T, K, h] → [.., 1, h]
        return out.reshape(B, H, T, h)


class LinformerAttention(GQAttention):
    """Linformer GQA: K' = E·K and V' = F·V, k rows [B, H_kv, k, h] each, E and F [k, n] over positions.

    Each call adds its tokens' columns of E and F times their K and V to the cached rows (a prefill: the
    whole prompt; a decode step: a rank-1 update) and its queries attend to all k rows, unmasked: the
    prompt is bidirectional, as in the paper. Cache: the k rows of K' and V'."""

    def __init__(self, spec: ModelSpec, window: int | None):
        super().__init__(spec, None)
        a = spec.attention
        self.proj_len, self.max_len = a.proj_len, a.max_len
        self.seq_proj_e = nn.Parameter(torch.empty(a.proj_len, a.max_len))
        self.seq_proj_f = nn.Parameter(torch.empty(a.proj_len, a.max_len)) if a.sharing == "headwise" else None

    def cache_shapes(self, batch: int, n: int) -> list[tuple[int, ...]]:
        return [(batch, self.kv_heads, self.proj_len, self.head_dim)] * 2

    def forward(self, x: Tensor, kv: tuple[Tensor, Tensor] | None, step: Step) -> Tensor:
        if step.alibi is not None or self.sinks is not None:
            raise ValueError("the Linformer reference supports no ALiBi and no sinks; use rope, learned or none")
        B, T, _ = x.shape
        if step.start + T > self.max_len:
            raise ValueError(f"positions up to {step.start + T - 1}: Linformer's E and F span {self.max_len}")
        q, k, v = self.qkv(x, step)  # [B, T, heads, h]
        cols = slice(step.start, step.start + T)
        e = self.seq_proj_e[:, cols]  # [k, T]
        f = e if self.seq_proj_f is None else self.seq_proj_f[:, cols]  # [k, T]
        k = e @ k.transpose(1, 2)  # [k, T] @ [B, H_kv, T, h] → [B, H_kv, k, h]
        v = f @ v.transpose(1, 2)  # [k, T] @ [B, H_kv, T, h] → [B, H_kv, k, h]
        if kv is not None:  # the rows so far plus this call's: element-wise, no matmul
            cache_k, cache_v = kv
            k, v = k + cache_k.to(k.dtype), v + cache_v.to(v.dtype)
            cache_k.copy_(k)
            cache_v.copy_(v)
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k, v, scale=self.head_dim**-0.5,
                                             enable_gqa=True)  # [B, H, T, h] over [B, H_kv, k, h] → [B, H, T, h]
        return self.o(out.transpose(1, 2).reshape(B, T, -1))  # [B, T, H·h] @ [H·h, d] → [B, T, d]


class ReformerAttention(GQAttention):
    """Reformer LSH attention, shared QK: keys are the normalized queries (no k projection).

    Per round r of n_hashes, fixed random rotations R_r [h, b/2] (drawn from a seeded generator, not
    parameters; they must stay fixed for a cache to make sense) give bucket = argmax([xR; −xR]). A
    prefill of T > 2c tokens sorts each head's tokens by (bucket, position), cuts them into chunks of c,
    and each query gathers the 2c slots of its chunk and the previous one (wrapping around, as trax
    does) — an index, no FLOPs — masking later positions; T ≤ 2c attends to all T. A decode step
    attends, per round, to the min(L, 2c) cached keys just before it in that round's order. Rounds are
    combined by their log-sum-exp (element-wise). Cache: keys [B, H, n, h], values [B, H, n, h], buckets
    [B, H, n, n_hashes] (uint8). Self-attention is not excluded (Reformer masks a query's own key unless
    alone; the cost is the same)."""

    def __init__(self, spec: ModelSpec, window: int | None):
        super().__init__(spec, None)
        a = spec.attention
        self.n_hashes, self.n_buckets, self.chunk = a.n_hashes, a.n_buckets, a.chunk_len
        del self.k  # shared QK
        self.seed = 0

    def cache_shapes(self, batch: int, n: int) -> list[tuple[int, ...]]:
        return [(batch, self.kv_heads, n, self.head_dim)] * 2 + [(batch, self.kv_heads, n, self.n_hashes)]

    def cache_dtypes(self) -> dict[int, torch.dtype]:
        return {2: torch.uint8}

    def buckets(self, x: Tensor) -> Tensor:
        """[B, H, T, h] → bucket ids [B, H, T, n_hashes]: one matmul for every round."""
        h, n, half = x.shape[-1], self.n_hashes, self.n_buckets // 2
        g = torch.Generator(device=x.device).manual_seed(self.seed)
        rot = torch.randn(h, n * half, generator=g, device=x.device).to(x.dtype)  # [h, n·b/2]: not learned
        r = (x @ rot).unflatten(-1, (n, half))  # [B, H, T, h] @ [h, n·b/2] → [B, H, T, n, b/2]
        hi, lo = r.max(-1), r.min(-1)  # argmax([r; −r]) without building it: the larger of max r and −min r
        return torch.where(hi.values >= -lo.values, hi.indices, lo.indices + half)  # [B, H, T, n]

    def forward(self, x: Tensor, kv: tuple[Tensor, ...] | None, step: Step) -> Tensor:
        if step.alibi is not None or self.sinks is not None:
            raise ValueError("the Reformer reference supports no ALiBi and no sinks; use rope, learned or none")
        B, T, _ = x.shape
        q = self.q(x)  # [B, T, d] @ [d, H·h] → [B, T, H·h]: queries and keys alike
        v = self.v(x)  # [B, T, d] @ [d, H·h] → [B, T, H·h]
        if self.qk_norm == "full":
            q = self.qk_norms[0](q)
        q, v = (t.view(B, T, -1, self.head_dim) for t in (q, v))  # [B, T, H, h]
        if self.qk_norm == "head":
            q = self.qk_norms[0](q)
        if step.rope:
            q = apply_rope(q, step.rope)
        q, v = q.transpose(1, 2), v.transpose(1, 2)  # [B, H, T, h]
        k = q / q.norm(dim=-1, keepdim=True)  # shared QK: the key is the unit-length query
        bk = self.buckets(q)  # [B, H, T, n]
        cache_k, cache_v, cache_b = kv or (None, None, None)
        k = cache_step(cache_k, k, step.start, None)  # [B, H, L, h]
        v = cache_step(cache_v, v, step.start, None)  # [B, H, L, h]
        bk = cache_step(cache_b, bk.to(torch.uint8), step.start, None).long()  # [B, H, L, n]
        L = k.shape[2]
        qpos = torch.arange(step.start, step.start + T, device=x.device)
        scale = self.head_dim**-0.5
        if L <= 2 * self.chunk:  # every round's slots are all L held keys: the same attention n times
            keep = torch.arange(L, device=x.device) <= qpos[:, None]  # [T, L]
            out = sum(F.scaled_dot_product_attention(q, k, v, attn_mask=keep, scale=scale)  # [B, H, T, h]
                      for _ in range(self.n_hashes)) / self.n_hashes  # equal rounds, equal weights
            return self.o(out.transpose(1, 2).reshape(B, T, -1))  # [B, T, H·h] @ [H·h, d] → [B, T, d]
        order = self._order(bk, L)  # [B, H, n, L]: keys sorted by (bucket, position) per round
        del bk
        if step.serving and T == L:
            out = self._chunked(q, k, v, order, scale, step.scratch)  # [B, H, T, h]
            del q, k, v, order
            return self.o(out.transpose(1, 2).reshape(B, T, -1))  # [B, T, H·h] @ [H·h, d] → [B, T, d]
        rank = order.argsort(-1)  # [B, H, n, L]: each key's place in its round's order
        per_query = B * q.shape[1] * self.n_hashes * 2 * self.chunk * (2 * self.head_dim * q.element_size() + 32) \
            if step.serving else 0
        rounds = partial(self._rounds, k=k, v=v, order=order, rank=rank, qpos=qpos, prefill=T == L)
        out = by_query_blocks(q * scale, self.head_dim, per_query, step.scratch, rounds)
        del q, k, v, order, rank, rounds
        return self.o(out.transpose(1, 2).reshape(B, T, -1))  # [B, T, H·h] @ [H·h, d] → [B, T, d]

    def _chunked(self, q: Tensor, k: Tensor, v: Tensor, order: Tensor, scale: float, scratch: int) -> Tensor:
        """Serving kernels, a prefill from position 0 (key index = position): per round, the sorted places cut
        into chunks of c, each chunk's queries over its own and the previous chunk's 2c keys (wrapping around),
        gathered a block of chunks at a time; each round's output merged into one output by its log-sum-exp,
        as it comes (the same weights as _rounds). q [B, H, L, h] → [B, H, L, h]."""
        (B, H, L, h), n, c = q.shape, self.n_hashes, self.chunk
        chunks, dev = -(-L // c), q.device
        out = torch.zeros_like(q)  # Σ_rounds output · exp(lse_round − lse_all)
        lse_all = torch.full((B, H, L), -math.inf, device=dev)
        per_chunk = B * H * c * (2 * c * 12 + 8 * h * q.element_size())  # scores, gathered rows
        step = max(1, scratch // per_chunk)
        for r in range(n):
            for j0 in range(0, chunks, step):
                j = torch.arange(j0, min(chunks, j0 + step), device=dev)[:, None]  # [nb, 1]
                places = (j * c + torch.arange(c, device=dev)).clamp(max=L - 1)  # [nb, c]; the last may repeat
                real = min(L, (j0 + j.shape[0]) * c) - j0 * c  # places in this block
                qi = order[:, :, r, places]  # [B, H, nb, c]: the queries' positions
                ki = order[:, :, r, (j * c - c + torch.arange(2 * c, device=dev)) % L]  # [B, H, nb, 2c]
                qs = q.gather(2, qi.flatten(2)[..., None].expand(-1, -1, -1, h)).view(*qi.shape, h)
                ks, vs = (t.gather(2, ki.flatten(2)[..., None].expand(-1, -1, -1, h)).view(*ki.shape, h)
                          for t in (k, v))  # [B, H, nb, 2c, h]
                # [B, H, nb, c, h] @ [B, H, nb, h, 2c] → [B, H, nb, c, 2c]; causal by position
                scores = (qs @ ks.transpose(-1, -2)).mul_(scale).masked_fill_(ki[..., None, :] > qi[..., None], -math.inf)
                lse = scores.logsumexp(-1)  # [B, H, nb, c]
                o = (scores - lse[..., None]).exp_() @ vs  # [B, H, nb, c, h]
                pos, lse, o = qi.flatten(2)[..., :real], lse.flatten(2)[..., :real], o.flatten(2, 3)[..., :real, :]
                old = lse_all.gather(2, pos)
                new = torch.logaddexp(old, lse)
                rows = pos[..., None].expand(-1, -1, -1, h)
                merged = out.gather(2, rows) * (old - new).exp()[..., None] + o * (lse - new).exp()[..., None]
                out.scatter_(2, rows, merged.to(out.dtype))
                lse_all.scatter_(2, pos, new)
        return out

    def _order(self, bk: Tensor, L: int) -> Tensor:
        """Per head and round, key indices sorted by (bucket, position): [B, H, n, L]."""
        key = bk.transpose(2, 3) * L + torch.arange(L, device=bk.device)  # [B, H, n, L]
        return key.argsort(-1)

    def _rounds(self, q: Tensor, i: int, *, k: Tensor, v: Tensor, order: Tensor, rank: Tensor, qpos: Tensor,
                prefill: bool) -> Tensor:
        """The queries q [B, H, t, h] (scaled) from the i-th (positions qpos[i:]), each round over its K = 2c
        slots: a prefill's query at sorted place s takes places c·⌊s/c⌋ − c … c·⌊s/c⌋ + c − 1 (its chunk and
        the previous one, wrapping around); a decode or cached-chunk step's query the 2c places just before
        it, itself included. Rounds are combined by their log-sum-exp."""
        qpos = qpos[i:i + q.shape[2]]
        (B, H, _, _), L, K = q.shape, order.shape[-1], 2 * self.chunk
        at = rank[..., qpos]  # [B, H, n, t]: the queries' places
        first = at // self.chunk * self.chunk - self.chunk if prefill else at - K + 1
        idx = (first[..., None] + torch.arange(K, device=q.device)) % L  # [B, H, n, t, K]
        slots = order.gather(-1, idx.flatten(-2)).view(*idx.shape)  # key indices = positions
        rows = torch.arange(B, device=q.device)[:, None, None, None, None]
        heads = torch.arange(H, device=q.device)[None, :, None, None, None]
        kg, vg = k[rows, heads, slots], v[rows, heads, slots]  # [B, H, n, t, K, h]: an index, no FLOPs
        valid = slots <= qpos[:, None]  # causal
        # [B, H, 1, t, 1, h] @ [B, H, n, t, h, K] → [B, H, n, t, 1, K]
        scores = (q[:, :, None, :, None] @ kg.transpose(-1, -2)).masked_fill(~valid[..., None, :], -math.inf)
        lse = scores.logsumexp(-1, keepdim=True)  # [B, H, n, t, 1, 1]
        out = (scores - lse).exp() @ vg  # [B, H, n, t, 1, K] @ [B, H, n, t, K, h] → [B, H, n, t, 1, h]
        return (out * lse.softmax(2)).sum(2)[..., 0, :]  # rounds weighted by their mass: [B, H, t, h]


class DSAttention(MLAttention):
    """DeepSeek Sparse Attention: MLA over the top-k keys a lightning indexer picks.

    Indexer: q_I = index_q(query latent) [B, T, H_I, d_I], k_I = LayerNorm(index_k(x)) [B, T, d_I] (one
    key for all its heads, cached), w_I = index_w(x) [B, T, H_I]; RoPE on the first d_r features of both.
    Score(t, s) = Σ_h w_I[t, h] · ReLU(q_I[t, h] · k_I[s]), causal; MLA attends to the min(k, L) best.
    Cache: latent [B, n, r], RoPE key [B, n, d_r], indexer key [B, n, d_I] (index_cache_dtype).
    """

    def __init__(self, spec: ModelSpec, window: int | None):
        super().__init__(spec, window)
        a, d = spec.attention, spec.d_model
        self.index_q = nn.Linear(a.q_lora_rank, a.index_heads * a.index_head_dim, bias=False)
        self.index_k = nn.Linear(d, a.index_head_dim, bias=False)
        self.index_k_norm = nn.LayerNorm(a.index_head_dim, eps=1e-6)
        self.index_w = nn.Linear(d, a.index_heads, bias=False)
        if a.index_cache_dtype not in (None, *CACHE_DTYPES):
            raise ValueError(f"index_cache_dtype {a.index_cache_dtype}: the reference stores {', '.join(CACHE_DTYPES)}")
        if spec.norm.qk_norm != "none":
            raise ValueError("the DSA reference applies no qk_norm; set norm.qk_norm none")

    def cache_shapes(self, batch: int, n: int) -> list[tuple[int, ...]]:
        return super().cache_shapes(batch, n) + [(batch, n, self.a.index_head_dim)]

    def cache_dtypes(self) -> dict[int, torch.dtype]:
        """Cache tensors stored in another dtype than the rest: the indexer key when set."""
        dt = self.a.index_cache_dtype
        return {2: CACHE_DTYPES[dt]} if dt else {}

    def forward(self, x: Tensor, kv: tuple[Tensor, ...] | None, step: Step) -> Tensor:
        a, (B, T, _) = self.a, x.shape
        H, dn, dr, r = a.heads, a.qk_nope_head_dim, a.qk_rope_head_dim, a.kv_lora_rank
        qr = self.q_norm(self.q_down(x))  # [B, T, d] @ [d, r_q] → [B, T, r_q]
        q = self.q_up(qr).view(B, T, H, dn + dr)  # [B, T, r_q] @ [r_q, H·(d_n+d_r)] → [B, T, H, d_n+d_r]
        latent, k_rope = self.kv_down(x).split([r, dr], -1)  # [B, T, d] @ [d, r+d_r] → [B, T, r+d_r]
        latent, k_rope = self.kv_norm(latent), k_rope[:, :, None]
        xi, qri = x.detach(), qr.detach()  # the indexer trains on its own loss, its input detached
        iq = self.index_q(qri).view(B, T, a.index_heads, -1)  # [B, T, r_q] @ [r_q, H_I·d_I] → [B, T, H_I, d_I]
        del qr, qri
        ik = self.index_k_norm(self.index_k(xi))[:, :, None]  # [B, T, d] @ [d, d_I] → [B, T, 1, d_I]
        iw = self.index_w(xi)  # [B, T, d] @ [d, H_I] → [B, T, H_I]
        if step.rope:
            q, k_rope = rope_part(q, dn, step.rope), apply_rope(k_rope, step.rope)
            iq, ik = apply_rope(iq, step.rope), apply_rope(ik, step.rope)
        cache_latent, cache_rope, cache_index = kv or (None, None, None)
        latent = cache_step(cache_latent, latent, step.start, None)  # [B, L, r]
        k_rope = cache_step(cache_rope, k_rope[:, :, 0], step.start, None)  # [B, L, d_r]
        ik = cache_step(cache_index, ik[:, :, 0], step.start, None)  # [B, L, d_I]
        L = latent.shape[1]
        attn = lambda q_, k_, v_: attend(q_, k_, v_, start=step.start, window=None,  # noqa: E731
                                         scale=a.qk_head_dim**-0.5, alibi=step.alibi)
        if step.serving:  # handed over in lists, so that _serving frees each as soon as it is done with it
            work, index = [q], [iq, ik, iw]
            del q, iq, ik, iw
            return self.o(self._serving(work, latent, k_rope, index, step.start, step.scratch, attn))  # [B, T, d]
        q_nope, q_rope = q.split([dn, dr], -1)
        # indexer scores: [B, T·H_I, d_I] @ [B, d_I, L] → [B, T·H_I, L]; then the weighted head sum
        logits = torch.bmm(iq.reshape(B, T * a.index_heads, -1), ik.transpose(1, 2)).view(B, T, a.index_heads, L)
        score = (iw[:, :, None] @ logits.relu()).squeeze(2)  # [B, T, 1, H_I] @ [B, T, H_I, L] → [B, T, L]
        # the indexer's own loss (a KL term in the release) stands in as 0·Σscore: autograd then runs the
        # indexer's backward matmuls and nothing else; element-wise, so no FLOPs of its own
        aux = (0 * score.sum()).to(x.dtype) if torch.is_grad_enabled() else 0
        if L <= a.index_topk:  # every held key is selected: plain MLA
            out = (self._absorbed(q_nope, q_rope, latent, k_rope, attn) if step.absorbed else
                   self._decompressed(q, latent, k_rope, attn, step.serving))
            return self.o(out) + aux  # [B, T, H·d_v] @ [H·d_v, d] → [B, T, d]
        qpos = torch.arange(step.start, step.start + T, device=x.device)
        causal = torch.arange(L, device=x.device) <= qpos[:, None]  # [T, L] (L = start + T: no window)
        top, idx = score.masked_fill(~causal, -math.inf).topk(a.index_topk, -1)  # [B, T, K]
        valid = top.isfinite()[:, :, None]  # [B, T, 1, K]: slots past the query's position are masked
        rows = torch.arange(B, device=x.device)[:, None, None]
        out = (self._sparse_absorbed if step.absorbed else self._sparse_decompressed)(
            q_nope, q_rope, latent, k_rope, rows, idx, valid)
        return self.o(out) + aux  # [B, T, H·d_v] @ [H·d_v, d] → [B, T, d]

    def _serving(self, work: list[Tensor], latent, k_rope, index: list[Tensor], start: int, scratch: int,
                 attn) -> Tensor:
        """What serving kernels hold: the indexer's scores in blocks of queries, keeping each query's top-k
        key indices (int32); then plain MLA when every held key is selected, else attention in the latent
        space (W_UK folded into the query, W_UV on the way out) over each query's selected latents, in
        blocks. work [q [B, T, H, d_n+d_r]], index [q_I, k_I, w_I] (emptied) → [B, T, H·d_v]."""
        (q,), (iq, ik, iw) = work, index
        work.clear(), index.clear()
        a, (B, T, H, _), L = self.a, q.shape, latent.shape[1]
        H_I, K = a.index_heads, a.index_topk
        qpos = torch.arange(start, start + T, device=q.device)
        keys = torch.empty(B, T, K, dtype=torch.int32, device=q.device) if L > K else None
        step = max(1, scratch // (B * L * (H_I + 2) * 4))  # a block's indexer logits and scores
        for i in range(0, T, step):
            t = min(step, T - i)
            # [B, t·H_I, d_I] @ [B, d_I, L] → [B, t, H_I, L]; the weighted head sum → [B, t, L]
            logits = torch.bmm(iq[:, i:i + t].reshape(B, t * H_I, -1), ik.transpose(1, 2)).view(B, t, H_I, L)
            score = (iw[:, i:i + t, None] @ logits.relu_()).squeeze(2)
            del logits
            if keys is not None:
                causal = torch.arange(L, device=q.device) <= qpos[i:i + t, None]  # [t, L]
                keys[:, i:i + t] = score.masked_fill_(~causal, -math.inf).topk(K, -1).indices
        del iq, ik, iw
        if keys is None:
            return self._decompressed(q, latent, k_rope, attn, True)
        dn, dv, r = a.qk_nope_head_dim, a.v_head_dim, a.kv_lora_rank
        w_uk, w_uv = self.kv_up.weight.view(H, dn + dv, -1).split([dn, dv], 1)  # [H, d_n, r], [H, d_v, r]
        out = q.new_empty(B, T, H * dv)
        width = (r + a.qk_rope_head_dim) * q.element_size()
        step = max(1, scratch // (B * (K * width + 3 * H * K * 4 + 2 * H * width)))
        rows = torch.arange(B, device=q.device)[:, None, None]
        for i in range(0, T, step):
            t = min(step, T - i)
            qb, idx = q[:, i:i + t], keys[:, i:i + t].long()  # [B, t, H, d_n+d_r], [B, t, K]
            # [H, B·t, d_n] @ [H, d_n, r] → [H, B·t, r]: the query in the latent space
            q_lat = torch.bmm(qb[..., :dn].permute(2, 0, 1, 3).reshape(H, B * t, dn), w_uk)
            q_lat = q_lat.view(H, B, t, r).permute(1, 2, 0, 3)  # [B, t, H, r]
            lat, rope = latent[rows, idx], k_rope[rows, idx]  # [B, t, K, r], [B, t, K, d_r]
            # [B, t, H, r] @ [B, t, r, K] + [B, t, H, d_r] @ [B, t, d_r, K] → [B, t, H, K]
            scores = (q_lat @ lat.transpose(-1, -2) + qb[..., dn:] @ rope.transpose(-1, -2)) * a.qk_head_dim**-0.5
            scores.masked_fill_(~(idx <= qpos[i:i + t, None])[:, :, None], -math.inf)  # slots past the query
            o_lat = scores.softmax(-1) @ lat  # [B, t, H, K] @ [B, t, K, r] → [B, t, H, r]
            # [H, B·t, r] @ [H, r, d_v] → [H, B·t, d_v]
            o = torch.bmm(o_lat.permute(2, 0, 1, 3).reshape(H, B * t, r), w_uv.transpose(1, 2))
            out[:, i:i + t] = o.view(H, B, t, dv).permute(1, 2, 0, 3).reshape(B, t, H * dv)
        return out

    def _sparse_decompressed(self, q_nope, q_rope, latent, k_rope, rows, idx, valid) -> Tensor:
        """A decode step (T = 1) re-projects only its K selected latents; a prefill re-projects all L
        latents once, then each query gathers its K keys and values."""
        a, (B, T, H, _) = self.a, q_nope.shape
        dn, dr, dv = a.qk_nope_head_dim, a.qk_rope_head_dim, a.v_head_dim
        if T == 1:
            kv = self.kv_up(latent[rows, idx])  # [B, 1, K, r] @ [r, H·(d_n+d_v)] → [B, 1, K, H·(d_n+d_v)]
            rope = k_rope[rows, idx]  # [B, 1, K, d_r]
        else:
            kv = self.kv_up(latent)[rows, idx]  # [B, L, r] @ [r, H·(d_n+d_v)], gathered → [B, T, K, H·(d_n+d_v)]
            rope = k_rope[rows, idx]  # [B, T, K, d_r]
        K = idx.shape[-1]
        k_nope, v = kv.view(B, T, K, H, dn + dv).split([dn, dv], -1)  # [B, T, K, H, ·]
        k = torch.cat([k_nope, rope[:, :, :, None].expand(B, T, K, H, dr)], -1)  # [B, T, K, H, d_n+d_r]
        q = torch.cat([q_nope, q_rope], -1)[:, :, :, None] * a.qk_head_dim**-0.5  # [B, T, H, 1, d_n+d_r]
        # [B, T, H, 1, d_n+d_r] @ [B, T, H, d_n+d_r, K] → [B, T, H, 1, K]
        scores = (q @ k.permute(0, 1, 3, 4, 2)).masked_fill(~valid[:, :, :, None], -math.inf)
        out = scores.softmax(-1) @ v.transpose(2, 3)  # [B, T, H, 1, K] @ [B, T, H, K, d_v] → [B, T, H, 1, d_v]
        return out.reshape(B, T, H * dv)

    def _sparse_absorbed(self, q_nope, q_rope, latent, k_rope, rows, idx, valid) -> Tensor:
        """W_UK folded into the query, attention over the K selected latents, W_UV on the way out."""
        a, (B, T, H, dn) = self.a, q_nope.shape
        w_uk, w_uv = self.kv_up.weight.view(H, dn + a.v_head_dim, -1).split([dn, a.v_head_dim], 1)
        # [H, B·T, d_n] @ [H, d_n, r] → [H, B·T, r]
        q_lat = torch.bmm(q_nope.permute(2, 0, 1, 3).reshape(H, B * T, dn), w_uk)
        q = torch.cat([q_lat.view(H, B, T, -1).permute(1, 2, 0, 3), q_rope], -1)  # [B, T, H, r+d_r]
        q = q * a.qk_head_dim**-0.5
        lat = latent[rows, idx]  # [B, T, K, r]
        keys = torch.cat([lat, k_rope[rows, idx]], -1)  # [B, T, K, r+d_r]
        scores = (q @ keys.transpose(-1, -2)).masked_fill(~valid, -math.inf)  # [B, T, H, r+d_r] @ [B, T, r+d_r, K]
        out = scores.softmax(-1) @ lat  # [B, T, H, K] @ [B, T, K, r] → [B, T, H, r]
        # [H, B·T, r] @ [H, r, d_v] → [H, B·T, d_v]
        out = torch.bmm(out.permute(2, 0, 1, 3).reshape(H, B * T, -1), w_uv.transpose(1, 2))
        return out.view(H, B, T, -1).permute(1, 2, 0, 3).reshape(B, T, -1)
