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

A training step (engine_training_step) is three eager parts, each with its own counted kernels: the forward (the
prefill's ops with every position's logits, the loss); its backward, each op's gradients `backward_passes` × its
forward's work on the same class (a weight matmul's input and weight gradients: 2×), the attention core's on
attention_backward (flash's 2.5 × the forward's FLOPs), a memory op's left to the counted kernels (the
embedding's gradient), its host not modelled (the autograd engine dispatches from its own thread: the GPU's
time, a lower bound); and the optimizer's update, its counted kernels alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmcalc.costs.step import count_scope, kernels, step_costs, step_vars
from llmcalc.costs.training import backward_passes
from llmcalc.model.engine_profile import EngineKernels, EngineProfile, KernelCurve, TrainingKernels
from llmcalc.model.gpu import GPU
from llmcalc.model.spec import ModelSpec
from llmcalc.model.time_model import overlapped
from llmcalc.workload import Workload

ALIGN = 8
"""Keys per sequence a latent decode step's batched products need a multiple of to take cuBLAS's aligned kernels."""


BACKWARD_CLASS = {"attention_prefill": "attention_backward"}
"""The kernel class of a mixer core's backward where it is not its forward's (a recurrent scan's gradients run
products of the forward's kind)."""


@dataclass(frozen=True)
class EngineStep:
    """One step's time on an engine: the total, its GPU and host parts, which bounds it, and the seconds of each
    op (summed over layer groups) and of the engine's own kernels."""

    seconds: float
    gpu_s: float
    host_s: float | None  # an eager step's host time; None: replayed from a graph, or a host not modelled
    bound: str  # gpu or host
    ops: dict[str, float]
    own_s: float


@dataclass(frozen=True)
class EngineTraining:
    """One training step on an engine: the total and its parts, each an eager step."""

    seconds: float
    forward: EngineStep
    backward: EngineStep
    optimizer: EngineStep


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
    ops = _ops_seconds(spec, gpu, w, profile, batch, new, context, None)
    return _step(ops, gpu, w, profile, counted, not prefill if graph is None else graph, profile.host.call_s)


def engine_training_step(spec: ModelSpec, gpu: GPU, w: Workload, profile: EngineProfile, counted: TrainingKernels,
                         batch: int, seq: int) -> EngineTraining:
    """Seconds of one training step of `batch` sequences of `seq` tokens on one GPU of the engine of `profile`,
    its own kernels `counted` in each part: the forward (every position's logits), its backward and the optimizer's
    update, each eager."""
    w = w.model_copy(update={"logits": "all", "train": True})
    call_s = profile.host.call_s
    forward = _step(_ops_seconds(spec, gpu, w, profile, batch, seq, 0, None), gpu, w, profile, counted.forward,
                    False, call_s)
    back = _ops_seconds(spec, gpu, w, profile, batch, seq, 0, backward_passes(spec, w))
    backward = _step(back, gpu, w, profile, counted.backward, False, None)
    optimizer = _step({}, gpu, w, profile, counted.optimizer, False, call_s)
    return EngineTraining(forward.seconds + backward.seconds + optimizer.seconds, forward, backward, optimizer)


def _ops_seconds(spec: ModelSpec, gpu: GPU, w: Workload, profile: EngineProfile, batch: int, new: int, context: int,
                 backward: dict[str, float] | None) -> dict[str, float]:
    """Seconds of each of the step form's ops (summed over layer groups) in a forward on the engine, each on the
    kernel class that runs it; with `backward` (op → its backward's work in forwards, training.backward_passes):
    the ops' backward instead, a matmul's gradients `backward` × its forward's work on its class, the core's on
    BACKWARD_CLASS's class of its forward's, and nothing for a memory op (the engine's own kernels, counted)."""
    prefill = new > 1 or context == 0
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
        k = 1.0 if backward is None else backward.get(op, 2.0)  # the work, in forwards
        if key.core and group is not None and group.mixer is not None:
            kind = group.mixer.core_kernel(prefill, absorbed)
            if kind == "latent_decode" and (context + new) % ALIGN:
                kind = "latent_decode_unaligned"
            if backward is not None:
                kind = BACKWARD_CLASS.get(kind, kind)
            pairs = env.get(f"pairs@{count_scope(group)}", 0)
            pad = flops * env["T"] / pairs if pairs else 0  # one more key for every query
            t = curve_seconds(profile.curve(kind), k * flops, k * pad, k * nbytes, calls, peak, bandwidth)
        elif op.endswith("/experts") and group is not None and group.ffn.routed_experts:
            calls = group.count * len(group.ffn.matrices(spec.d_model)["experts"]) // group.ffn.experts
            t = curve_seconds(profile.curve("grouped_matmul"), k * flops, k * rows, k * nbytes, k * calls, peak,
                              bandwidth)
        elif key.memory:
            if backward is not None:
                continue
            t = curve_seconds(profile.curve("elementwise"), 0, 0, nbytes, 0, peak, bandwidth)
        else:
            t = curve_seconds(profile.curve("matmul"), k * flops, k * rows, k * nbytes, k * calls, peak, bandwidth)
        ops[op] = ops.get(op, 0.0) + t
    return ops


def _step(ops: dict[str, float], gpu: GPU, w: Workload, profile: EngineProfile, counted: EngineKernels,
          graph: bool, call_s: float | None) -> EngineStep:
    """A step of the step form's ops' seconds `ops` and the engine's own kernels `counted`: replayed from a CUDA
    graph, or eager (the host's dispatch, `call_s` an aten call, may outlast the kernels; None: a host not
    modelled, the GPU's time)."""
    peak, bandwidth = gpu.peak(w.compute_dtype), gpu.bandwidth
    own = sum(curve_seconds(profile.curve(k), 0, 0, b, n, peak, bandwidth) for k, (n, b) in counted.own().items())
    gpu_s = sum(ops.values()) + own
    if graph:
        return EngineStep(gpu_s + profile.host.replay_s, gpu_s, None, "gpu", ops, own)
    gpu_s += counted.launches * profile.host.eager_kernel_s
    if call_s is None:
        return EngineStep(gpu_s, gpu_s, None, "gpu", ops, own)
    host_s = counted.calls * call_s
    return EngineStep(max(gpu_s, host_s), gpu_s, host_s, "host" if host_s > gpu_s else "gpu", ops, own)
