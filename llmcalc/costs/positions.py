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

from llmcalc.model.attention import sum_min
from llmcalc.model.spec import ModelSpec
from llmcalc.reports.flops import PositionFlops


def _pairs(spec: ModelSpec, new: int, context: int, window: int | None, attention: str) -> int:
    """(query, key) pairs of one sequence, by the attention block's own rule where it has one."""
    rule = getattr(spec.attention, "pairs", None)
    if rule is not None:
        return rule(new, context, window, attention)
    if attention == "dense" and context == 0:
        return new * new
    return sum_min(context + 1, context + new, window)


def position_flops(spec: ModelSpec, batch: int, seq: int, gen: int, attention: str = "causal") -> PositionFlops:
    """Prefill (B·S tokens), one decode step at context S, G decode steps, and a training step."""
    per = spec.positions.positions(spec.attention, spec.d_model)
    layers = spec.n_layers

    def forward(new: int, context: int, conv: str) -> int:
        tokens = batch * new
        pairs = sum(g.count * batch * _pairs(spec, new, context, g.window, conv) for g in spec.layer_groups()) \
            if per["layer_pair"] else 0
        return tokens * (layers * per["layer_token"] + per["token"]) + pairs * per["layer_pair"]

    prefill = forward(seq, 0, attention)
    kind = spec.positions.kind
    return PositionFlops(
        kind=kind, per_token_per_layer=per["layer_token"], per_pair_per_layer=per["layer_pair"],
        per_token=per["token"], prefill=prefill, decode=forward(1, seq, "causal"),
        generate=forward(gen, seq, "causal"), train=(2 if kind == "rope" else 1) * prefill,
        formula=f"{kind}: " + {"rope": "3 · L · tokens · (H + H_kv) · d_rot (MLA: (H + 1) · d_r)",
                 "alibi": "H · Σ_layers pairs", "learned": "d · tokens", "sinusoidal": "d · tokens",
                 "none": "0"}.get(kind, "0"),
    )


NOTE = ("position encoding (element-wise: RoPE rotations, ALiBi biases, added position vectors) is reported "
        "apart under `positions`, not in these matmul totals")
