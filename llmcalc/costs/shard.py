"""Per-GPU weights and KV cache under a parallel layout. See docs/roofline.md#memory-per-gpu.

Layer weights: routed experts split over ep GPUs (or tensor-split over tp without ep), every other
layer tensor over tp, layers over pp stages. Token embedding and LM head are vocab-split over tp and
sit on the first and last stage (a tied head is copied to the last stage when pp > 1).
Quantized layer weights as in llmcalc/costs/memory.py; norms, embedding and head stay bf16.
"""

from __future__ import annotations

from llmcalc.costs.kv import kv_bytes
from llmcalc.costs.parallel import kv_shards
from llmcalc.costs.weights import edge_parts, layer_weight_bytes, stored_bytes
from llmcalc.model.embedding import lm_head_params
from llmcalc.model.spec import LayerGroup, ModelSpec
from llmcalc.model.units import ceil_div
from llmcalc.workload import Layout, Workload



def split_of(component: str, layout: Layout) -> int:
    """GPUs one layer's component is split over: ep for routed experts with ep > 1, else tp."""
    return layout.ep if component.endswith("/experts") and layout.ep > 1 else layout.tp


def layer_bytes_per_gpu(spec: ModelSpec, group: LayerGroup, w: Workload) -> dict[str, int]:
    """One layer's stored bytes on one GPU of the workload's layout, by component."""
    stored = layer_weight_bytes(spec, group, w.formats(spec))
    return {k: ceil_div(b, split_of(k, w.layout)) for k, b in stored.items()}


def edge_bytes(spec: ModelSpec, w: Workload) -> tuple[int, int, int]:
    """Bytes of (token + position embedding, final norm + LM head, final norm), all GPUs together. The head
    matrix is counted even when tied: a tied head is the embedding read again (or, under pp, copied)."""
    d, v, formats = spec.d_model, spec.vocab_size, w.formats(spec)
    parts = edge_parts(spec)
    parts["lm_head"] = (lm_head_params(v, d, tied=False, bias=spec.lm_head_bias), [(d, v)])
    stored = {k: stored_bytes(n, m, formats.of(k), formats.dense) for k, (n, m) in parts.items()}
    return (stored["embedding/token"] + stored["embedding/position"], stored["lm_head"] + stored["norms/final"],
            stored["norms/final"])


def stack_weight_bytes(spec: ModelSpec, w: Workload, parts: dict[str, int] | None = None) -> dict[str, int]:
    """Stored bytes of the stack's own parameters beside the layers, embedding and head (an encoder-decoder's encoder
    and embedding norm: Stack.held_params; or `parts` of them), by component, all GPUs together; none for a
    decoder."""
    formats = w.formats(spec)
    parts = spec.stack.held_params(spec) if parts is None else parts
    return {k: stored_bytes(n, [], formats.of(k), formats.dense) for k, n in parts.items()}


def stage_weight_bytes(spec: ModelSpec, w: Workload, stage: int) -> int:
    """Weight bytes one GPU of pipeline stage `stage` holds: its model chunks' layers (Layout.stage_chunks), the
    embedding on the first stage and the head on the last, each split as the layout splits it; the whole model's
    under pp 1 (weights_per_gpu: a tied head is the embedding itself)."""
    layout = w.layout
    if layout.pp == 1:
        return weights_per_gpu(spec, w)
    emb, head, _ = edge_bytes(spec, w)
    emb += sum(stack_weight_bytes(spec, w).values())
    chunks = layout.stage_chunks(spec.n_layers)[stage]
    return (sum(g.count * sum(layer_bytes_per_gpu(spec, g, w).values()) for r in chunks for g in spec.layer_groups(*r))
            + ceil_div(emb * (stage == 0) + head * (stage == layout.pp - 1), layout.tp))


def weights_per_gpu(spec: ModelSpec, w: Workload) -> int:
    """The most weight bytes any GPU of the workload's layout holds: its stage's layers plus the
    embedding/head it keeps (and an encoder-decoder's encoder, beside the embedding); uneven stages (training):
    the stage whose layers and edges weigh most."""
    layout = w.layout
    emb, head, norm = edge_bytes(spec, w)
    emb += sum(stack_weight_bytes(spec, w).values())
    if layout.pp > 1 and not layout.balanced:  # uneven stages (training): the largest stage's, over its chunks
        return max(stage_weight_bytes(spec, w, k) for k in range(layout.pp))
    layers = sum(g.count * sum(layer_bytes_per_gpu(spec, g, w).values()) for g in spec.layer_groups())
    if layout.pp == 1:  # a tied head is the embedding itself: only the final norm is more
        edges = emb + (norm if spec.tie_embeddings else head)
    else:
        edges = max(emb, head)
    return ceil_div(layers, layout.pp) + ceil_div(edges, layout.tp)


def kv_per_gpu(spec: ModelSpec, batch: int, seq: int, w: Workload) -> int:
    """KV bytes on one GPU of the workload's layout for one replica's `batch` sequences of `seq` tokens."""
    return kv_share(spec, kv_bytes(spec, batch, seq, w.kv_dtype), w.layout)


def kv_share(spec: ModelSpec, total: int, layout: Layout) -> int:
    """One GPU's share of `total` KV bytes: ⌈total / kv_split⌉."""
    return ceil_div(total, kv_split(spec, layout))


def kv_split(spec: ModelSpec, layout: Layout) -> int:
    """GPUs one replica's KV cache is split over: the cache's tensor-parallel shards × the stages."""
    return kv_shards(spec, layout) * layout.pp
