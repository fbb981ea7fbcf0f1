"""The memory traffic of a layer's element-wise passes: the kernels between the matmuls that read a tensor and write
one of the same size (docs/roofline.md#training-step-time, item 1). `train` times them; inference's calibrated
profiles were fitted with them inside their efficiencies and its step form leaves them out.

Per token and layer, forward, each pass one kernel reading its inputs and writing its output once (the least any
framework moves: Megatron's and the serving engines' fused kernels do just this; eager PyTorch's composite ops move
more):

  norms        Norm.traffic_elements        2 × the normalised elements (the residual stream's per_layer norms of
                                            d, the QK norms, MLA's latents)
  residual     RESIDUAL_ADDS · 3·d          the attention's and the FFN's outputs added to the stream: 2 read, 1
                                            written
  activation   FFN.elementwise_elements     gated: gate and up read, d_ff written (3·d_ff); plain 2·d_ff; MoE: each
                                            of its top_k experts' and the shared experts', and the routing's copies
                                            2·(slots + 1)·d
  rotation     2 · rope_elements            RoPE reads and writes the rotated q and k elements

at the activation width. Over tp, the activation and the rotation split as the heads and d_ff do; the norms and
the residual adds run on every tp GPU's whole stream unless sequence parallelism splits it (`sp`). Kernels: the
norms' are counted with the projections (step.kernels); here one per residual add, one for the activation, one for
the rotation, two for an MoE layer's permutation and its inverse. Not counted: dropout, the casts of fp8 training,
the loss's softmax, a recurrent mixer's own gates and convolutions.
"""

from __future__ import annotations

from llmcalc.costs.elementwise import RESIDUAL_ADDS
from llmcalc.costs.step import ELEMENTWISE, Cost, Op
from llmcalc.model.spec import LayerGroup, ModelSpec, dtype_bytes
from llmcalc.model.units import ceil_div
from llmcalc.workload import Workload

def layer_elements(spec: ModelSpec, g: LayerGroup, tp: int, sp: bool) -> tuple[int, int]:
    """(elements read and written per token, kernels) of one layer of the layer group `g` on one of `tp` GPUs."""
    d, mixer = spec.d_model, g.mixer
    _, q, k = mixer.qk_norm_widths() if mixer is not None else (0, 0, 0)
    own = mixer.normed_elements() if mixer is not None else 0
    rotated = 2 * mixer.rope_elements() if mixer is not None and spec.positions.rotary else 0
    stream = spec.norm.traffic_elements(d, q, k, own) + RESIDUAL_ADDS * 3 * d
    ffn = g.ffn.elementwise_elements(d)
    elements = ceil_div(stream, tp if sp else 1) + ceil_div(ffn + rotated, tp)
    kernels = RESIDUAL_ADDS + (ffn > 0) + (rotated > 0) + 2 * (g.ffn.routed_experts > 0)
    return elements, kernels


def elementwise_costs(spec: ModelSpec, w: Workload, tokens: int) -> tuple[dict[Op, Cost], dict[Op, int]]:
    """Each layer group's element-wise passes in one forward of `tokens` tokens on one GPU, as memory entries of
    the step form (Op `elementwise` of the group: no FLOPs, their bytes), and each entry's kernels."""
    L, a = w.layout, dtype_bytes(w.act_dtype)
    costs, kernels = {}, {}
    for gi, g in enumerate(spec.layer_groups()):
        elements, n = layer_elements(spec, g, L.tp, L.sp)
        op = Op.of(gi, ELEMENTWISE)
        costs[op] = Cost(0, g.count * tokens * elements * a, 0)
        kernels[op] = g.count * n
    return costs, kernels
