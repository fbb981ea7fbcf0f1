"""What a parallel layout (llmcalc/workload.py: Layout) costs in traffic and cache split. See docs/roofline.md.

gpus = tp · pp · dp (· cp in training). Tensor parallel (tp) splits every layer's heads and FFN width; pipeline
parallel (pp) splits the layers into stages; data parallel (dp) runs replicas on batch/dp
sequences each; expert parallel (ep) spreads whole routed experts over ep GPUs of the tp·dp group
(without ep, experts are tensor-split like a dense FFN). Parameter counts never depend on this.
Ranks are numbered tp fastest, then cp, then dp, then pp; a collective's group picks the link tier it crosses
(collective_link; llmcalc/model/gpu.py: the interconnect within a node, the network beyond).

KV per GPU: GQA splits kv heads over tp (a kv head is replicated when tp > kv_heads); MLA's
latent has no head axis, so every tensor-parallel rank holds all of it (the attention's cache_heads).
"""

from __future__ import annotations

from llmcalc.model.attention import Attention
from llmcalc.model.gpu import GPU, Link
from llmcalc.model.spec import ModelSpec
from llmcalc.workload import Layout


def kv_shards(spec: ModelSpec, layout: Layout) -> int:
    """Tensor-parallel ranks the KV cache is split over: min(tp, kv_heads) for GQA, 1 for MLA (no head
    axis)."""
    return mixer_shards(spec.attention, layout)


def mixer_shards(attn: Attention | None, layout: Layout) -> int:
    """Tensor-parallel ranks one mixer's cache (or state) splits over: min(tp, its cache heads); 1 without a head
    axis (MLA's latent) or without a mixer."""
    heads = attn.cache_heads if attn is not None else None
    return 1 if heads is None else min(layout.tp, heads)


def allreduce_bytes(layout: Layout, message: int) -> int:
    """Bytes one GPU sends (and receives) in a ring all-reduce of `message` bytes over tp."""
    return 2 * (layout.tp - 1) * message // layout.tp


def alltoall_bytes(layout: Layout, tokens: int, top_k: int, width_bytes: int) -> int:
    """Bytes one GPU sends in one expert-parallel all-to-all: its 1/ep share of the tokens,
    each copied to top_k experts, (ep − 1)/ep of which live on other GPUs."""
    return tokens * top_k * width_bytes * (layout.ep - 1) // (layout.ep * layout.ep)


def collective_link(op: str, layout: Layout, gpu: GPU) -> Link:
    """The link one GPU's share of a collective of `op` runs at. Ranks are numbered tp fastest, then cp, then
    dp, then pp (Megatron's order): a tensor-parallel all-reduce is a group of tp consecutive GPUs, an expert
    all-to-all of ep, a context-parallel ring of cp GPUs tp apart (span tp·cp), a data-parallel gradient
    reduction of dp·cp GPUs tp apart (span tp·cp·dp; with cp 1, dp GPUs), and a pipeline send goes between the
    two adjacent stages' tp·cp·dp GPUs each. Within a node it crosses the interconnect; beyond one,
    the network (GPU.link). A ring all-reduce that crosses nodes runs one ring per member of its group in
    each node, each through that GPU's own NIC (NCCL's rings over a multi-rail node), so it reaches c × the
    network bandwidth for c members per node, at most the interconnect's; an all-to-all and a send go through
    the GPU's own NIC."""
    tp, cp, dp = layout.tp, layout.cp, layout.dp
    group, stride = {"comm/tp_all_reduce": (tp, 1), "comm/ep_all_to_all": (layout.ep, 1),
                     "comm/cp_send": (cp, tp),
                     "comm/pp_send": (2 * tp * cp * dp, 1)}.get(op, (dp * cp, tp))
    node, tier = gpu.link(1), gpu.link(group * stride)
    if tier == node or not op.endswith("all_reduce"):
        return tier
    members = min(group, max(1, (gpu.gpus_per_node or 1) // stride))
    return Link(bytes_per_s=min(node.bytes_per_s, members * tier.bytes_per_s), latency_s=tier.latency_s)


COLLECTIVES = {"comm/tp_all_reduce": "tensor-parallel all-reduce", "comm/ep_all_to_all": "expert all-to-all",
               "comm/pp_send": "pipeline send", "comm/dp_all_reduce": "data-parallel all-reduce",
               "comm/cp_send": "context-parallel ring send"}
"""The collectives a layout runs, by op name, as a note names them."""


def link_note(layout: Layout, gpu: GPU, ops: tuple[str, ...]) -> str | None:
    """Which link tier each of the layout's collectives `ops` crosses, where one crosses nodes (the interconnect
    joins gpus_per_node GPUs): each with its bytes/s one way, and the fix where a tensor-parallel group spans
    nodes; None when every collective stays within a node."""
    node = gpu.link(1)
    tiers = {op: collective_link(op, layout, gpu) for op in ops}
    if all(t == node for t in tiers.values()):
        return None
    said = "; ".join(f"{COLLECTIVES[op]} over {'the network' if t != node else gpu.interconnect} "
                     f"({t.bytes_per_s / 1e9:,.0f} GB/s each way)" for op, t in tiers.items())
    text = (f"{said}: {gpu.gpus_per_node} {gpu.name} per node over {gpu.interconnect} "
            f"({node.bytes_per_s / 1e9:,.0f} GB/s each way), the network beyond")
    if layout.tp > (gpu.gpus_per_node or layout.tp):
        text += f"; tensor parallelism over {layout.tp} GPUs crosses nodes: keep `tp` ≤ {gpu.gpus_per_node} and " \
                "split across nodes with `pp` or `ep`"
    return text

