"""The time of one step on a named engine from its engine profile (llmcalc/model/engine_profile.py): the step form's
ops (llmcalc/costs/step.py step_costs), each on the kernel class that runs it, plus the kernels the engine
launches beyond them, counted from the engine itself (EngineKernels). See docs/roofline.md#the-reference-engine.

  weight matmuls    per op: max(c, m) + overlap·min(c, m) + matmuls · fixed_s   (class matmul; routed experts:
                    grouped_matmul, pad rows per active expert)
  mixer core        its class (Attention.core_kernel): prefill attention c = (FLOPs + pad · FLOPs of one more key
                    per query) / (peak · e); a decode step's attention, MLA's latent step (unaligned when the keys
                    are not a multiple of 8) and a scan's step m = bytes / (bandwidth · e); a scan's prefill c
  engine's own      Σ over elementwise, strided, scatter and reduction kernels: count · fixed_s + bytes / (bw · e)
  step              eager (a prefill): max(GPU Σ + launches · eager_kernel_s, calls · call_s), the larger named
                    as the bound; replayed from a CUDA graph (a decode step): GPU Σ + replay_s
"""

from __future__ import annotations

from dataclasses import dataclass

from llmcalc.costs.step import count_scope, kernels, step_costs, step_vars
from llmcalc.model.engine_profile import EngineKernels, EngineProfile, KernelCurve
from llmcalc.model.gpu import GPU
from llmcalc.model.spec import ModelSpec
from llmcalc.model.time_model import overlapped
from llmcalc.workload import Workload

ALIGN = 8
"""Keys per sequence a latent decode step's batched products need a multiple of to take cuBLAS's aligned kernels."""


@dataclass(frozen=True)
class EngineStep:
    """One step's time on an engine: the total, its GPU and host parts, which bounds it, and the seconds of each
    op (summed over layer groups) and of the engine's own kernels."""

    seconds: float
    gpu_s: float
    host_s: float | None  # an eager step's host time; None: replayed from a graph
    bound: str  # gpu or host
    ops: dict[str, float]
    own_s: float


def curve_seconds(c: KernelCurve, flops: float, pad_flops: float, nbytes: float, calls: float, peak: float,
                  bandwidth: float) -> float:
    """A kernel class's seconds for work of `flops` (+ pad · `pad_flops`) and `nbytes` in `calls` calls."""
    m = nbytes / (bandwidth * c.memory_efficiency)
    if c.compute_efficiency is None:
        return m + calls * c.fixed_s
    return overlapped((flops + c.pad * pad_flops) / (peak * c.compute_efficiency), m, c.overlap) + calls * c.fixed_s


def engine_step(spec: ModelSpec, gpu: GPU, w: Workload, profile: EngineProfile, counted: EngineKernels, batch: int,
                new: int, context: int, graph: bool | None = None) -> EngineStep:
    """Seconds of one forward of `batch` sequences of `new` tokens after `context` cached ones on the engine of
    `profile`, its own kernels `counted` at that point; `graph`: replayed from a CUDA graph (default: a decode
    step is, a prefill runs eagerly)."""
    prefill = new > 1 or context == 0
    graph = not prefill if graph is None else graph
    absorbed = w.absorbed(spec.attention, prefill)
    costs = step_costs(spec, w, batch, new, context)
    launches = kernels(spec, absorbed, prefill, norms=False)
    env = step_vars(spec, batch, new, context)
    groups = spec.layer_groups()
    peak, bandwidth = gpu.peak(w.compute_dtype), gpu.bandwidth
    ops: dict[str, float] = {}
    for key, (flops, nbytes, rows) in costs.items():
        op = key.name
        group = groups[key.group] if key.group is not None else None
        calls = launches.get(key, 0)
        if key.core and group is not None and group.mixer is not None:
            kind = group.mixer.core_kernel(prefill, absorbed)
            if kind == "latent_decode" and (context + new) % ALIGN:
                kind = "latent_decode_unaligned"
            c = profile.curve(kind)
            pairs = env.get(f"pairs@{count_scope(group)}", 0)
            key_flops = flops * env["T"] / pairs if pairs else 0  # one more key for every query
            t = curve_seconds(c, flops, key_flops, nbytes, calls, peak, bandwidth)
        elif op.endswith("/experts") and group is not None and group.ffn.routed_experts:
            calls = group.count * len(group.ffn.matrices(spec.d_model)["experts"]) // group.ffn.experts
            t = curve_seconds(profile.curve("grouped_matmul"), flops, rows, nbytes, calls, peak, bandwidth)
        elif key.memory:
            t = curve_seconds(profile.curve("elementwise"), 0, 0, nbytes, 0, peak, bandwidth)
        else:
            t = curve_seconds(profile.curve("matmul"), flops, rows, nbytes, calls, peak, bandwidth)
        ops[op] = ops.get(op, 0.0) + t
    own = sum(curve_seconds(profile.curve(k), 0, 0, b, n, peak, bandwidth) for k, (n, b) in counted.own().items())
    gpu_s = sum(ops.values()) + own
    if graph:
        return EngineStep(gpu_s + profile.host.replay_s, gpu_s, None, "gpu", ops, own)
    gpu_s += counted.launches * profile.host.eager_kernel_s
    host_s = counted.calls * profile.host.call_s
    return EngineStep(max(gpu_s, host_s), gpu_s, host_s, "host" if host_s > gpu_s else "gpu", ops, own)

