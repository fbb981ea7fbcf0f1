"""What a parallel layout (llmcalc/workload.py: Layout) costs in traffic and cache split. See docs/roofline.md.

gpus = tp · pp · dp. Tensor parallel (tp) splits every layer's heads and FFN width; pipeline
parallel (pp) splits the layers into stages; data parallel (dp) runs replicas on batch/dp
sequences each; expert parallel (ep) spreads whole routed experts over ep GPUs of the tp·dp group
(without ep, experts are tensor-split like a dense FFN). Parameter counts never depend on this.

KV per GPU: GQA splits kv heads over tp (a kv head is replicated when tp > kv_heads); MLA's
latent has no head axis, so every tensor-parallel rank holds all of it (the attention's cache_heads).
"""

from __future__ import annotations

from llmcalc.model.spec import ModelSpec
from llmcalc.workload import Layout


def kv_shards(spec: ModelSpec, layout: Layout) -> int:
    """Tensor-parallel ranks the KV cache is split over: min(tp, kv_heads) for GQA, 1 for MLA (no head
    axis)."""
    heads = spec.attention.cache_heads
    return 1 if heads is None else min(layout.tp, heads)


def allreduce_bytes(layout: Layout, message: int) -> int:
    """Bytes one GPU sends (and receives) in a ring all-reduce of `message` bytes over tp."""
    return 2 * (layout.tp - 1) * message // layout.tp


def alltoall_bytes(layout: Layout, tokens: int, top_k: int, width_bytes: int) -> int:
    """Bytes one GPU sends in one expert-parallel all-to-all: its 1/ep share of the tokens,
    each copied to top_k experts, (ep − 1)/ep of which live on other GPUs."""
    return tokens * top_k * width_bytes * (layout.ep - 1) // (layout.ep * layout.ep)
