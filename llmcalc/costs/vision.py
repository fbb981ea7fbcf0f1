"""What a prompt's images cost: one image through the vision tower and projector, and the image tokens' share of
the prompt. See docs/vision.md.

  flops_per_image = patch embedding + Σ_layers (q, k, v, o, MLP, attention core) + projector   (VisionTower.flops)
  image_tokens    = images × tokens_per_image;   image_share = image_tokens / seq
  image time      = max(flops_per_image / (tp · peak · e_compute), tower weight bytes / (tp · bandwidth · e_memory))
"""

from __future__ import annotations

from llmcalc.costs.kv import nbytes
from llmcalc.model.gpu import GPU
from llmcalc.model.spec import ModelSpec
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
    tp, formats = w.layout.tp, w.formats(spec)
    flops = sum(tower.flops(*w.image_pixels(spec), spec.d_model).values())
    weights = nbytes(sum(tower.params(spec.d_model).values()), formats.dense if formats.quantized else formats.default)
    compute = flops / (tp * gpu.peak(w.compute_dtype) * tm.matmul_efficiency(w.compute_dtype))
    return max(compute, weights / (tp * gpu.bandwidth * tm.memory_efficiency))
