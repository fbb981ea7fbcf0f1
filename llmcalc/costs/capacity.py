"""What one GPU holds: its usable memory, the activation workspace a server keeps, and the smallest layout
whose GPUs hold a model's weights (and a workload's KV cache). See docs/roofline.md#fit.

Per GPU: usable = capacity · (1 − reserve); a workload holds when weights + the activation workspace of one
prefill chunk + its KV cache ≤ usable (a server prefills long prompts in chunks, as vLLM's
max_num_batched_tokens does).
"""

from __future__ import annotations

from typing import NamedTuple

from llmcalc.costs.memory import inference_activations
from llmcalc.costs.shard import kv_per_gpu
from llmcalc.costs.shard import weights_per_gpu as layer_weights_per_gpu
from llmcalc.costs.weights import formats_label
from llmcalc.errors import UserError
from llmcalc.model.engine import Settings
from llmcalc.model.gpu import GPU
from llmcalc.model.spec import ModelSpec
from llmcalc.model.units import ceil_div
from llmcalc.workload import Layout, Workload

NODE = 8
"""GPUs per server where the GPU's spec does not say (`gpus_per_node`): tensor parallelism is tried within
one first, as it needs the fastest links."""
MAX_SEARCH = 4096
"""Most GPUs (tp · pp) the search for the smallest layout tries."""


def usable_bytes(gpu: GPU, reserve: float) -> int:
    """Bytes of one GPU a workload may use: capacity · (1 − reserve), rounded down."""
    return int(gpu.memory_bytes * (1 - reserve))


def holds(weights: int, workspace: int, kv: int, usable: int) -> bool:
    """Whether one GPU holds its weights, the activation workspace and its KV cache."""
    return weights + workspace + kv <= usable


def weights_per_gpu(spec: ModelSpec, w: Workload) -> int:
    """The most weight bytes a serving GPU holds (costs/shard.py), with a vision tower and projector split over
    the tp GPUs of the first stage beside the embedding (costs/vision.py)."""
    from llmcalc.costs.vision import tower_weight_bytes

    return layer_weights_per_gpu(spec, w) + ceil_div(tower_weight_bytes(spec, w), w.layout.tp)


def activation_workspace(spec: ModelSpec, w: Workload) -> int:
    """Peak activations of one prefill chunk (`prefill_chunk` tokens) on one GPU (residual stream plus the
    largest transient), or, when larger, the vision tower's peak encoding one sequence's images (costs/vision.py)."""
    from llmcalc.costs.vision import tower_activation_bytes

    return max(inference_activations(spec, 1, w.prefill_chunk, w)[0], tower_activation_bytes(spec, w, 1))


def smallest_layout(spec: ModelSpec, gpu: GPU, batch: int, seq: int, w: Workload,
                    weights_only: bool = False) -> Layout | None:
    """The fewest GPUs on which `batch` sequences of `seq` tokens fit (weights_only: on which the weights
    fit): tp · pp of them per replica, dp and ep as given (ep dropped where it no longer divides), every
    layout one the model allows (tp divides the heads and FFN widths, pp the layers). For each count,
    the largest tp within one server (gpus_per_node, else NODE) is tried first. None: none up to MAX_SEARCH GPUs."""
    usable = usable_bytes(gpu, w.reserve)
    dp, act = w.layout.dp, activation_workspace(spec, w)
    node = gpu.gpus_per_node or NODE
    for n in range(1, MAX_SEARCH + 1):
        splits = [t for t in range(n, 0, -1) if n % t == 0]
        for tp in sorted(splits, key=lambda t: t > node):  # largest tp within a server first
            for ep in dict.fromkeys((w.layout.ep, 1)):
                layout = Layout(tp=tp, pp=n // tp, dp=dp, ep=ep)
                try:
                    layout.check(spec, batch if batch % dp == 0 else dp)
                except UserError:
                    continue
                on = w.model_copy(update={"layout": layout})
                kv = 0 if weights_only else kv_per_gpu(spec, batch // dp, seq, on)
                if holds(weights_per_gpu(spec, on), 0 if weights_only else act, kv, usable):
                    return layout
    return None


def layout_hint(layout: Layout | None) -> str:
    """`layout` as the fields to set (tp, and pp, dp, ep where not 1), marked as fields (llmcalc/errors.py)."""
    if layout is None:
        return f"no layout of up to {MAX_SEARCH:,} GPUs holds it"
    fields = f"`tp` {layout.tp}" + (f" `pp` {layout.pp}" if layout.pp > 1 else "") + (
        f" `dp` {layout.dp}" if layout.dp > 1 else "") + (f" `ep` {layout.ep}" if layout.ep > 1 else "")
    return f"{fields} ({layout.gpus} GPU{'s' if layout.gpus > 1 else ''})"


def require_weights_fit(spec: ModelSpec, gpu: GPU, w: Workload) -> int:
    """Per-GPU weight bytes; weights that do not fit in usable memory are a user error naming the smallest
    layout that holds them."""
    weights = weights_per_gpu(spec, w)
    usable = usable_bytes(gpu, w.reserve)
    if weights > usable:
        hint = layout_hint(smallest_layout(spec, gpu, w.layout.dp, 1, w, weights_only=True))
        raise UserError(
            f"`gpus`: {spec.name} needs {weights / 1e9:.1f} GB of weights per GPU "
            f"({formats_label(spec, w.formats(spec))}) with tp={w.layout.tp} pp={w.layout.pp}, more than the {usable / 1e9:.1f} GB usable on one {gpu.name}; "
            f"the fewest GPUs that hold them: {hint}; or a smaller `weights_dtype`"
        )
    return weights


class EnginePool(NamedTuple):
    """A serving engine's KV pool on one GPU of a layout (engine_pool)."""

    workload: Workload
    """The workload with the engine's reserve (1 − gpu_memory_utilization) and prefill chunk (max_batched_tokens)."""
    free: int
    """Bytes per GPU left for the KV cache once weights (and the workspace it profiles) are held; may be ≤ 0."""
    budget: int
    """Bytes of it each virtual engine of a pipeline holds: free // pp."""
    block_bytes: int
    """Bytes one KV block (block_size tokens of one sequence) takes on one GPU."""
    tokens: int
    """Tokens the pool holds per engine, as the engine logs it: ⌊budget / block_bytes⌋ · block_size."""


def engine_pool(spec: ModelSpec, gpu: GPU, w: Workload, engine: Settings, check: bool = True) -> EnginePool:
    """The KV pool `engine` sizes on `gpu` for the workload's layout, by its own rules (serving_kv_budget: its
    memory utilisation of the total or of the free memory, with or without the activation workspace of one
    max_batched_tokens chunk), in whole blocks. Refuses weights that do not fit (`check` False: a pool ≤ 0)."""
    w = w.model_copy(update={"reserve": engine.reserve, "prefill_chunk": engine.max_batched_tokens})
    e = engine.engine
    try:
        free, budget = serving_kv_budget(spec, gpu, w, e.memory_of == "free", e.profiles_activations, check)
    except UserError as refused:  # weights a larger share would hold: say whose share it was, and where it is set
        if weights_per_gpu(spec, w) > gpu.memory_bytes:
            raise
        raise UserError(f"{refused}; or a larger `gpu_memory_utilization` ({e.label} takes "
                        f"{engine.gpu_memory_utilization:.3g} of each GPU's memory)") from None
    block = kv_per_gpu(spec, 1, engine.block_size, w)
    return EnginePool(w, free, budget, block, budget // block * engine.block_size if block and budget > 0 else 0)


def serving_kv_budget(spec: ModelSpec, gpu: GPU, w: Workload, of_free: bool = False,
                      workspace: bool = True, check: bool = True) -> tuple[int, int]:
    """(free, budget): the bytes per GPU a serving engine leaves for its KV cache once its weights and activation
    workspace are held, and the share of it each virtual engine of a pipeline holds (free // pp). The engine takes
    1 − reserve of the GPU's memory, weights inside it (usable_bytes), or with `of_free` 1 − reserve of what the
    weights and the workspace leave (TensorRT-LLM's free_gpu_memory_fraction); without `workspace` its reserve
    already holds the activations (SGLang's mem_fraction_static). Refuses weights that do not fit
    (require_weights_fit; `check` False: free ≤ 0 instead); free may be ≤ 0 when the workspace does not fit."""
    weights = require_weights_fit(spec, gpu, w) if check else weights_per_gpu(spec, w)
    held = weights + (activation_workspace(spec, w) if workspace else 0)
    if of_free:
        free = int((gpu.memory_bytes - held) * (1 - w.reserve))
    else:
        free = usable_bytes(gpu, w.reserve) - held
    return free, free // w.layout.pp
