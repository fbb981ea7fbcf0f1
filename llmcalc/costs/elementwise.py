"""Element-wise FLOPs and the embedding as a matmul, counted in `llmcalc flops` on request (`elementwise`,
`embedding_matmul`); off by default, so the matmul totals match Megatron-LM, PaLM and FlopCounterMode. See
docs/formulas.md#element-wise-flops.

Per forward, for t new tokens (whole batch) and P (query, key) pairs per layer, each variant answering its own:

  norm        Σ_layers t · norm.layer_flops (per element: RMSNorm 4, LayerNorm 6, +1 bias; the residual stream's,
              the QK norms', MLA's latents') + t · d · final norm
  softmax     Σ_layers P · attention.softmax_per_pair  (3·H per pair: exp, sum, divide)
  activation  Σ_layers t · ffn.activation_flops        (per element of d_ff; gated +1; MoE router softmax 3·E)
  residual    layers · t · 2 · d                       (the attention's and the FFN's outputs added to the stream)
  positions   llmcalc/costs/positions.py               (RoPE 3 per rotated element, ALiBi H per pair, added d)
  embedding   2 · t · V · d                            (a one-hot row times the V × d table; Kaplan, Chinchilla)

Training counts each of them forward + backward = 3 × forward (FWD_BWD, as Hoffmann et al. 2022, Appendix F and
Kaplan et al. 2020 do for every term). Not counted: dropout, bias adds, the loss's softmax over the vocabulary,
the MoE top-k selection, the MTP module's element-wise work.
"""

from __future__ import annotations

from functools import partial

from llmcalc.costs.positions import position_flops
from llmcalc.model.spec import ModelSpec
from llmcalc.model.units import MAC

RESIDUAL_ADDS = 2
"""Residual additions per layer: the attention's output and the FFN's (a parallel block adds both in two adds)."""


def elementwise_flops(spec: ModelSpec, batch: int, new: int, context: int, attention: str, *, elementwise: bool,
                      embedding: bool) -> dict[str, int]:
    """One forward's element-wise FLOPs by component (elementwise/norm, …/softmax, …/activation, …/residual,
    …/positions) and, with `embedding`, the input embedding as a matmul: `batch` sequences of `new` tokens
    after `context` cached ones, the attention core counted `attention` (causal or dense)."""
    out: dict[str, int] = {}
    d, tokens = spec.d_model, batch * new
    if embedding:
        out["embedding"] = MAC * tokens * spec.vocab_size * d
    if not elementwise:
        return out
    attn, groups = spec.attention, spec.layer_groups()
    _, q, k = attn.qk_norm_widths()
    out["elementwise/norm"] = (spec.n_layers * tokens * spec.norm.layer_flops(d, q, k, attn.normed_elements())
                               + (tokens * d * spec.norm.flops_per_element if spec.norm.final else 0))
    pairs = (partial(spec.stack.prefill_pairs, attn, new, convention=attention) if not context
             else lambda window: attn.pairs(new, context, window, attention))
    out["elementwise/softmax"] = sum(g.count * batch * pairs(g.window) for g in groups) * attn.softmax_per_pair()
    out["elementwise/activation"] = sum(g.count * tokens * g.ffn.activation_flops(d) for g in groups)
    out["elementwise/residual"] = spec.n_layers * tokens * RESIDUAL_ADDS * d
    if spec.positions.adds_flops:  # a prefill (no context), or `new` decode steps after `context` tokens
        out["elementwise/positions"] = (position_flops(spec, batch, new, 0, attention).prefill if not context
                                        else position_flops(spec, batch, context, new).generate)
    return out
