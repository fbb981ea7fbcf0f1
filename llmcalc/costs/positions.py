"""Element-wise FLOPs of the position encoding, reported apart from the matmul FLOPs (DESIGN.md:
element-wise work is reported separately, so the matmul totals still match Megatron-LM and torch's
FlopCounterMode). See docs/formulas.md#positions.

  RoPE        3 · (H + H_kv) · d_rot per new token per layer   (MLA: 3 · (H + 1) · d_r)
  ALiBi       H per (query, key) pair per layer                 (the attention core's pairs)
  learned,
  sinusoidal  d per new token, once
  train       RoPE: 2 × forward (the backward rotates the gradient back); additions: 1 × forward
              (their gradient passes through unchanged); all positions, recompute not included
"""

from __future__ import annotations

from llmcalc.model.spec import ModelSpec
from llmcalc.reports.flops import PositionFlops


def position_flops(spec: ModelSpec, batch: int, seq: int, gen: int, attention: str = "causal") -> PositionFlops:
    """Prefill (B·S tokens), one decode step at context S, G decode steps, and a training step."""
    per = spec.positions.positions(spec.attention, spec.d_model)
    layers, attn = spec.n_layers, spec.attention

    def per_sequence(new: int, context: int, window: int | None, conv: str) -> int:
        """One sequence's per-pair FLOPs in one layer; causal-half: the doubled count halved, rounded down."""
        if conv == "causal-half":
            return attn.half_counts(new, context, window)["pairs"] * per["layer_pair"] // 2
        return attn.pairs(new, context, window, conv) * per["layer_pair"]

    def forward(new: int, context: int, conv: str) -> int:
        tokens = batch * new
        pairs = sum(g.count * batch * per_sequence(new, context, g.window, conv) for g in spec.layer_groups()) \
            if per["layer_pair"] else 0
        return tokens * (layers * per["layer_token"] + per["token"]) + pairs

    step = "causal-half" if attention == "causal-half" else "causal"
    prefill = forward(seq, 0, attention)
    pos, decodes = spec.positions, spec.stack.decodes  # a stack that does not decode (an encoder): 0
    return PositionFlops(
        kind=pos.kind, per_token_per_layer=per["layer_token"], per_pair_per_layer=per["layer_pair"],
        per_token=per["token"], prefill=prefill, decode=forward(1, seq, step) * decodes,
        generate=forward(gen, seq, step) * decodes, train=pos.train_passes * prefill,
        formula=f"{pos.kind}: {pos.flops_formula}",
    )


NOTE = ("position encoding (element-wise: RoPE rotations, ALiBi biases, added position vectors) is reported "
        "apart under `positions`, not in these matmul totals")
