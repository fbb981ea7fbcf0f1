"""What a prompt's images cost: one image through the vision tower and projector, and the image tokens' share of
the prompt. See docs/vision.md.

  flops_per_image = patch embedding + Σ_layers (q, k, v, o, MLP, attention core) + projector   (VisionTower.flops)
  image_tokens    = images × tokens_per_image;   image_share = image_tokens / seq
  image time      = max(flops_per_image / (tp · peak · e_compute), tower weight bytes / (tp · bandwidth · e_memory))
  tower peak      = B · images · a · (N·P + max(n·7·d, n·(3·d + (2|3)·f), projector))   (VisionTower.activation_bytes)
"""

from __future__ import annotations

from llmcalc.costs.kv import nbytes
from llmcalc.costs.weights import tower_params
from llmcalc.model.gpu import GPU
from llmcalc.model.spec import ModelSpec, dtype_bytes
from llmcalc.model.time_model import TimeModel
from llmcalc.reports.vision import VisionCost, VisionRow
from llmcalc.workload import Workload

FORMULA = ("per image = 2·n_p·C·t·p²·d + Σ_layers[2·n·4d² + 2·n·(2|3)·d·f + 4·pairs·d] + 2·tokens·W_projector; "
           "pairs = n² (full) or Σ_windows n_w² (window); image_share = images·tokens_per_image / seq")


def vision_cost(spec: ModelSpec, w: Workload, prefill_flops: int) -> VisionCost | None:
    """The images' cost for `spec`'s vision tower under `w` (None: a text-only model); `prefill_flops` is the
    language model's prefill of the batch, to which the images' encoding is added."""
    w.check_images(spec)
    tower = spec.vision
    if tower is None:
        return None
    height, width = w.image_pixels(spec)
    grid_h, grid_w = tower.grid(height, width)
    per_image = tower.flops(height, width, spec.d_model)
    total = sum(per_image.values())
    image_tokens = w.image_tokens(spec) if w.images else 0
    flops = w.batch * w.images * total
    return VisionCost(
        images=w.images, image_height=height, image_width=width, grid_height=grid_h, grid_width=grid_w,
        encoder_tokens=tower.sequence(height, width), tokens_per_image=tower.tokens(height, width),
        image_tokens=image_tokens, image_share=image_tokens / w.seq, flops_per_image=total, flops=flops,
        prefill_flops_with_images=prefill_flops + flops,
        breakdown=[VisionRow(component=k, flops_per_image=v) for k, v in per_image.items()], formula=FORMULA)


def image_seconds(spec: ModelSpec, gpu: GPU, w: Workload, tm: TimeModel) -> float | None:
    """Seconds to run one image through the vision tower and projector on the workload's tensor-parallel group
    (None: a text-only model): the larger of its matmul FLOPs over tp GPUs at the time model's matmul efficiency
    and its weights (plain format, or the dense dtype under quantised formats, as memory stores them) read once
    over the same GPUs' bandwidth at the memory efficiency. Element-wise work and fixed costs are not counted."""
    tower = spec.vision
    if tower is None:
        return None
    tp = w.layout.tp
    flops = sum(tower.flops(*w.image_pixels(spec), spec.d_model).values())
    weights = tower_weight_bytes(spec, w)
    compute = flops / (tp * gpu.peak(w.compute_dtype) * tm.matmul_efficiency(w.compute_dtype))
    return max(compute, weights / (tp * gpu.bandwidth * tm.memory_efficiency))


def tower_activation_bytes(spec: ModelSpec, w: Workload, sequences: int) -> int:
    """Bytes the vision tower holds at its peak (weights apart) encoding the images of `sequences` sequences as
    one batch: sequences · images · VisionTower.activation_bytes, in the activation dtype (0: no images). The
    tower runs before the language model's layers, and its transients are freed before they start (the image
    tokens it leaves are part of the prompt's residual stream, which the language model's peak counts)."""
    w.check_images(spec)
    if not w.images or spec.vision is None:
        return 0
    per_image = spec.vision.activation_bytes(*w.image_pixels(spec), spec.d_model, dtype_bytes(w.act_dtype))
    return sequences * w.images * per_image


def tower_weight_bytes(spec: ModelSpec, w: Workload) -> int:
    """Bytes of the vision tower and projector stored as memory stores them (costs/weights.py): the plain format,
    or the dense dtype when the language model is quantised (0: a text-only model)."""
    if spec.vision is None:
        return 0
    formats = w.formats(spec)
    dtype = formats.dense if formats.quantized else formats.default
    return nbytes(tower_params(spec), dtype)
