"""The memory traffic of a layer's element-wise passes: the kernels between the matmuls that read a tensor and write
one of the same size (docs/roofline.md#training-step-time, item 1). `train` times them; inference's calibrated
profiles were fitted with them inside their efficiencies and its step form leaves them out.

Per token and layer, forward, at the activations' `act` bytes, under the workload's `fusion`:

  pass         fused (one kernel a pass: Megatron,          eager (each PyTorch op a kernel, as Llama's
               Transformer Engine, torch.compile,           reference code writes them: Meta's llama,
               serving engines)                             torchtitan, Hugging Face)
  norms        2·act per normalised element                 RMSNorm in fp32: 4·act + 28 (Norm.traffic_bytes)
  residual     RESIDUAL_ADDS · 3·d·act                      the same
  activation   gated 3·d_ff, plain 2·d_ff (·act); MoE:      gated 5·d_ff: the activation and the product
               each of its top_k and shared experts', and   apart (FFN.elementwise_elements)
               the routing's copies 2·(slots + 1)·d
  rotation     2·act per rotated q and k element            2·act + 16: fp32 (ROTATION_FP32_BYTES)
  K/V repeat   none (the attention kernel reads H_kv heads) 2·(H_kv + H)·h·act (Attention.repeated_kv_elements)

The normalised elements: the residual stream's per_layer norms of d, the QK norms, MLA's latents. Over tp, the
activation, the rotation and the repeat split as the heads and d_ff do; the norms and the residual adds run on
every tp GPU's whole stream unless sequence parallelism splits it (`sp`). Kernels: fused, the norms' are counted
with the projections (step.kernels); here one per residual add, one for the activation, one for the rotation, two
for an MoE layer's permutation and its inverse; eager adds RMSNorm's seven more per norm, the product's, the
rotation's three per tensor and the repeat's two. Eager, as counted from its ops, moves 3.2 × the fused bytes on
Llama 3 8B (610,304 against 188,416 a token and layer). Not counted: dropout, the casts of fp8 training, the loss's
softmax, a recurrent mixer's own gates and convolutions. What eager keeps for the backward is memory
(llmcalc/costs/train_memory.py).
"""

from __future__ import annotations

from llmcalc.costs.elementwise import RESIDUAL_ADDS
from llmcalc.costs.step import ELEMENTWISE, Cost, Op
from llmcalc.model.spec import LayerGroup, ModelSpec, dtype_bytes
from llmcalc.model.units import ceil_div
from llmcalc.workload import Workload


ROTATION_FP32_BYTES = 16
"""Eager RoPE in fp32 (Meta's llama and torchtitan rotate q and k as complex numbers) moves, per rotated element,
beyond the 2·act of one fused pass: the cast up writes 4 and the cast back reads 4, the complex product reads 4
and writes 4 (its table of angles, shared by every head, not counted). Hugging Face's rotate-half in the
activations' type, x·cos + rotate_half(x)·sin in five kernels, moves 10·act: the same 20 bytes at bf16."""
ROTATION_KERNELS = 3
"""Eager RoPE's kernels per rotated tensor (q, k): the cast up, the complex product, the cast back."""


def layer_traffic(spec: ModelSpec, g: LayerGroup, tp: int, sp: bool, act: int,
                  eager: bool = False) -> tuple[int, int]:
    """(bytes read and written per token, kernels) of one layer of the layer group `g` on one of `tp` GPUs,
    activations of `act` bytes, the passes fused or eager (the table above)."""
    d, mixer = spec.d_model, g.mixer
    _, q, k = mixer.qk_norm_widths() if mixer is not None else (0, 0, 0)
    own = mixer.normed_elements() if mixer is not None else 0
    rope = mixer.rope_elements() if mixer is not None and spec.positions.rotary else 0
    repeat = mixer.repeated_kv_elements() * act if mixer is not None and eager else 0
    norm = spec.norm
    stream = norm.normed_elements(d, q, k, own) * norm.traffic_bytes(act, eager) + RESIDUAL_ADDS * 3 * d * act
    rotated = rope * (2 * act + ROTATION_FP32_BYTES if eager else 2 * act)
    ffn = g.ffn.elementwise_elements(d, eager) * act
    nbytes = ceil_div(stream, tp if sp else 1) + ceil_div(ffn + rotated + repeat, tp)
    kernels = (RESIDUAL_ADDS + g.ffn.elementwise_kernels(eager) + (rope > 0) * (2 * ROTATION_KERNELS if eager else 1)
               + (2 if repeat else 0) + norm.kernels(q, own, eager))
    return nbytes, kernels


def elementwise_costs(spec: ModelSpec, w: Workload, tokens: int) -> tuple[dict[Op, Cost], dict[Op, int]]:
    """Each layer group's element-wise passes in one forward of `tokens` tokens on one GPU, as memory entries of
    the step form (Op `elementwise` of the group: no FLOPs, their bytes), and each entry's kernels."""
    L, a = w.layout, dtype_bytes(w.act_dtype)
    costs, kernels = {}, {}
    for gi, g in enumerate(spec.layer_groups()):
        nbytes, n = layer_traffic(spec, g, L.tp, L.sp, a, w.fusion == "eager")
        op = Op.of(gi, ELEMENTWISE)
        costs[op] = Cost(0, g.count * tokens * nbytes, 0)
        kernels[op] = g.count * n
    return costs, kernels
