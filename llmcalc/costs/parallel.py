"""Parallel layouts: how weights, KV cache, work and traffic split over GPUs. See docs/roofline.md.

gpus = tp · pp · dp. Tensor parallel (tp) splits every layer's heads and FFN width; pipeline
parallel (pp) splits the layers into stages; data parallel (dp) runs replicas on batch/dp
sequences each; expert parallel (ep) spreads whole routed experts over ep GPUs of the tp·dp group
(without ep, experts are tensor-split like a dense FFN). Parameter counts never depend on this.

KV per GPU: GQA splits kv heads over tp (a kv head is replicated when tp > kv_heads); MLA's
latent has no head axis, so every tensor-parallel rank holds all of it (the attention's cache_heads).
"""

from __future__ import annotations

from llmcalc.errors import UserError
from llmcalc.model.base import Frozen, PosInt
from llmcalc.model.spec import ModelSpec

RING = "ring all-reduce moves 2·(tp − 1)/tp of the message per GPU each way"


class Layout(Frozen):
    tp: PosInt = 1
    pp: PosInt = 1
    dp: PosInt = 1
    ep: PosInt = 1

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    def check(self, spec: ModelSpec, batch: int) -> None:
        """The layout must divide the model: heads and FFN width by tp, layers by pp, experts by ep."""
        attn, tp = spec.attention, self.tp
        if (tp * self.dp) % self.ep:
            raise UserError(f"`ep`: {self.ep} must divide tp · dp = {tp * self.dp}; use a divisor of it")
        if attn.heads % tp:
            raise UserError(f"`tp`: {tp} does not divide the {attn.heads} attention heads; use a divisor of {attn.heads}")
        kv_heads = attn.cache_heads
        if kv_heads and kv_heads % tp and tp % kv_heads:
            raise UserError(f"`tp`: {tp} and the {kv_heads} kv heads do not divide one another; "
                            f"use a divisor or multiple of {kv_heads}")
        for g in spec.layer_groups():
            width = g.ffn.tp_width(self.ep)
            if width and width % tp:
                raise UserError(f"`tp`: {tp} does not divide the FFN width {width}; use a divisor of it")
        if spec.n_layers % self.pp:
            raise UserError(f"`pp`: {self.pp} does not divide the {spec.n_layers} layers; use a divisor of {spec.n_layers}")
        if self.ep > 1:
            experts = spec.ffn.routed_experts
            if not experts:
                raise UserError(f"`ep`: {spec.name} has no experts; drop `ep`")
            if experts % self.ep:
                raise UserError(f"`ep`: {self.ep} does not divide the {experts} experts; use a divisor")
        if batch % self.dp:
            raise UserError(f"`batch`: {batch} sequences do not split over `dp` {self.dp}; use a multiple of {self.dp}")

    def kv_shards(self, spec: ModelSpec) -> int:
        """Tensor-parallel ranks the KV cache is split over: min(tp, kv_heads) for GQA, 1 for MLA (no head
        axis)."""
        heads = spec.attention.cache_heads
        return 1 if heads is None else min(self.tp, heads)

    def allreduce_bytes(self, message: int) -> int:
        """Bytes one GPU sends (and receives) in a ring all-reduce of `message` bytes over tp."""
        return 2 * (self.tp - 1) * message // self.tp

    def alltoall_bytes(self, tokens: int, top_k: int, width_bytes: int) -> int:
        """Bytes one GPU sends in one expert-parallel all-to-all: its 1/ep share of the tokens,
        each copied to top_k experts, (ep − 1)/ep of which live on other GPUs."""
        return tokens * top_k * width_bytes * (self.ep - 1) // (self.ep * self.ep)
