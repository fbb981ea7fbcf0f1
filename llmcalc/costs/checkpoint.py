"""Bytes of a checkpoint as it ships (`llmcalc params --bytes`). See docs/formats.md.

checkpoint = Σ components stored in their formats (llmcalc/costs/memory.py: weights_bytes, the same count memory
uses) + the MTP modules the checkpoint holds (their layer in the layers' formats, the 2d → d projection and norms,
and, where it stores them, its own copies of the embedding and the head) + the buffers it saved (RoPE's inv_freq,
fp32, d_rot / 2 per layer, from transformers before 4.31; DeepSeek-V3's router bias, fp32 per routed expert).

The figure is the tensors' bytes: the sum of every stored tensor, as `metadata.total_size` of a safetensors
index counts it; a file's size adds its header (8 bytes and the JSON listing every tensor).
"""

from __future__ import annotations

from llmcalc.costs.params import mtp_parts
from llmcalc.costs.weights import edge_parts, stored_bytes, weights_bytes
from llmcalc.model.formats import WeightFormats
from llmcalc.model.spec import ModelSpec


def checkpoint_bytes(spec: ModelSpec) -> tuple[int, str]:
    """The tensor bytes of the checkpoint `spec` describes (its `checkpoint` formats, else bf16), and how."""
    ckpt = spec.checkpoint
    formats = ckpt.formats if ckpt else WeightFormats()
    total, how = weights_bytes(spec, formats)
    parts, _ = mtp_parts(spec)
    if parts:
        d = spec.d_model
        layer = spec.layer_groups()[-1]
        mats = {f"mtp/layer/attention/{k}": m for k, m in spec.attention.matrices(d).items()}
        mats |= {"mtp/layer/" + spec.ffn_prefix(layer) + k: m for k, m in layer.ffn.matrices(d).items()}
        mats["mtp/projection"] = [(2 * d, d)]
        n = spec.mtp_modules
        mtp = sum(stored_bytes(p // n, mats.get(k, []), formats.of(k), formats.dense) for k, p in parts.items())
        if ckpt and ckpt.mtp_copies:
            edges = edge_parts(spec)
            head = edges["lm_head"] if edges["lm_head"][0] else edges["embedding/token"]
            mtp += stored_bytes(*edges["embedding/token"], formats.of("embedding"), formats.dense)
            mtp += stored_bytes(*head, formats.of("head"), formats.dense)
        total += n * mtp
        how += f"; {n} MTP module(s)" + (" with their own embedding and head" if ckpt and ckpt.mtp_copies else "")
    if ckpt and ckpt.router_buffers:
        moe_layers = sum(g.count for g in spec.layer_groups() if g.ffn.routed_experts) + spec.mtp_modules
        total += moe_layers * spec.ffn.router_width * 4  # a score per expert, zero experts' too (LongCat-Flash)
        how += f"; {moe_layers} fp32 router bias buffers of {spec.ffn.router_width}"
    if ckpt and ckpt.rotary_buffers:
        rot = spec.attention.rope_dim
        total += spec.n_layers * (rot // 2) * 4
        how += f"; {spec.n_layers} fp32 rotary inv_freq buffers of {rot // 2}"
    return total, how
