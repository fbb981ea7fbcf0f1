"""One optimizer step on the reference engine (`llmcalc train --engine reference`): the bundled PyTorch model trained
on one GPU as llmcalc/reference/measure.py train_run runs it (bf16 weights and gradients, AdamW on fp32 master
weights, every position's logits and the cross-entropy loss in fp32), timed by the engine's kernel classes on that
GPU (llmcalc/costs/engine_time.py engine_training_step):

  step = forward + backward + update      each an eager step of the engine: the step form's ops on their kernel
                                          classes plus the engine's own kernels, counted from the reference itself
                                          (llmcalc/reference/kernel_count.py count_training); the forward bounded by
                                          its host's dispatch, the backward's host not modelled (its GPU time)
  MFU  = model FLOPs / (step · peak)      as `train` counts them (flops.py train_flops)

The layout is one GPU and one micro-batch per step (the reference accumulates no gradients); the memory check is
`llmcalc memory --train`'s. See docs/roofline.md#the-reference-engine and docs/validation.md for the steps an H200
and an H100 measured.
"""

from __future__ import annotations

from typing import Callable

from llmcalc.costs.capacity import usable_bytes
from llmcalc.costs.engine_time import EngineTraining, engine_training_step
from llmcalc.costs.flops import flops
from llmcalc.costs.shard import weights_per_gpu
from llmcalc.costs.train_memory import training_memory
from llmcalc.costs.training import largest_micro_batch, memory_note, peak_memory
from llmcalc.errors import UserError
from llmcalc.model.engine_profile import EngineProfile, TrainingKernels
from llmcalc.model.gpu import GPU
from llmcalc.model.spec import ModelSpec
from llmcalc.reports.training import TrainReport
from llmcalc.workload import Workload

FORMULA = ("step = F + B + U, each an eager step on the engine's kernel classes: F the forward (all logits, the loss), "
           "B its backward (2 × each weight matmul, the attention core on its backward class), U the AdamW update; "
           "MFU = model FLOPs / (step · peak)")
TRAINS = {"recompute": "none", "optimizer": "adamw", "zero": 0, "compute_dtype": "bf16", "weights_dtype": "bf16"}
"""What the reference trains with (reference/measure.py train_run): the workload fields it has no other value for."""


def engine_training(spec: ModelSpec, gpu: GPU, w: Workload, profile: EngineProfile,
                    count: Callable[[int, int], TrainingKernels]) -> TrainReport:
    """One optimizer step of `w` (its batch one micro-batch) on one `gpu` of the engine of `profile`, its kernels
    counted by `count(batch, seq)` (kernel_count.count_training, which needs torch); a one-line refusal for what the
    engine does not train (a parallel layout, LoRA, recomputation, another optimizer or type) or a step that does not
    fit the GPU."""
    w = w.model_copy(update={"train": True, "fusion": "eager"})
    w.check(spec)
    _check(w)
    spec.stack.check_modelled("training time")
    held, usable = _fits(spec, gpu, w)
    counted = count(w.batch, w.seq)
    step = engine_training_step(spec, gpu, w, profile, counted, w.batch, w.seq)
    tokens, peak = w.batch * w.seq, gpu.peak(w.compute_dtype)
    total = flops(spec, w.model_copy(update={"gen": 1}))
    return TrainReport(
        model=spec.name, gpu=gpu.name, gpus=1, tp=1, pp=1, dp=1, ep=1, stage_layers=[spec.n_layers], batch=w.batch,
        seq=w.seq, micro_batch=w.batch, micro_batches=1, compute_dtype=w.compute_dtype, attention=w.attention_core,
        recompute=w.recompute, optimizer=w.optimizer, zero=0, time_model=f"{profile.name} engine profile",
        engine="reference", fusion="eager", peak_flops=peak, step_s=step.seconds, tokens_per_s=tokens / step.seconds,
        tokens_per_s_per_gpu=tokens / step.seconds, model_flops=total.train_flops,
        hardware_flops=total.train_hardware_flops, model_tflops_per_gpu=total.train_flops / step.seconds / 1e12,
        mfu=total.train_flops / (step.seconds * peak), hfu=total.train_hardware_flops / (step.seconds * peak),
        forward_s=step.forward.seconds, backward_s=step.backward.seconds, recompute_s=0.0, tp_comm_s=0.0,
        pp_comm_s=0.0, pp_bubble_s=0.0, bubble_fraction=0.0, dp_comm_s=0.0, dp_comm_total_s=0.0,
        optimizer_s=step.optimizer.seconds, overhead_s=0.0, gradient_bytes_per_gpu=weights_per_gpu(spec, w),
        peak_memory_bytes=held, usable_bytes=usable, formula=FORMULA, notes=_notes(step, profile, held, usable, gpu),
    )


def _check(w: Workload) -> None:
    """The reference engine's one GPU, one micro-batch and its own training recipe; else a refusal naming the field."""
    L = w.layout
    for field in ("tp", "pp", "dp", "ep", "cp"):
        if getattr(L, field) != 1:
            raise UserError(f"`{field}`: the reference engine trains on one GPU (no parallel layout); leave out "
                            f"`{field}` and `gpus`, or leave out `engine` for the time model's parallel step")
    if w.lora:
        raise UserError("`lora_rank`: the reference engine trains every weight (AdamW); leave out `lora_rank`, or "
                        "leave out `engine` for the time model's LoRA step")
    for field, value in TRAINS.items():
        if getattr(w, field) != value:
            raise UserError(f"`{field}`: the reference engine trains with {field} {value}; give that, or leave out "
                            f"`engine` for the time model's step with {field} {getattr(w, field)}")
    if w.micro_batch not in (None, w.batch):
        raise UserError(f"`micro_batch`: the reference engine runs its batch as one micro-batch (no gradient "
                        f"accumulation); leave out `micro_batch`, or give `batch` {w.micro_batch}")


def _fits(spec: ModelSpec, gpu: GPU, w: Workload) -> tuple[int, int]:
    """The step's peak bytes and the GPU's usable bytes (as `llmcalc memory --train` counts them); a refusal naming
    the largest batch that fits where the step does not."""
    usable = usable_bytes(gpu, w.reserve)
    training_memory(spec, w)
    peak = peak_memory(spec, w)
    if peak <= usable:
        return peak, usable
    found = largest_micro_batch(spec, w, usable)
    fix = f"give `batch` {found[0]} ({found[1] / 1e9:,.1f} GB)" if found else "no batch fits: take a smaller model"
    raise UserError(f"`batch`: the step needs {peak / 1e9:,.1f} GB on the GPU (as the memory command counts a "
                    f"training step), over the {usable / 1e9:,.1f} GB usable on one {gpu.name} ({w.reserve:.0%} "
                    f"reserve); {fix}")


def _notes(step: EngineTraining, profile: EngineProfile, held: int, usable: int, gpu: GPU) -> list[str]:
    on = profile.measured_on
    measured = ", ".join(x for x in (on.get("device_name"), on.get("torch") and f"torch {on['torch']}",
                                       on.get("date")) if x)
    notes = [f"time: the reference engine's kernel classes on {gpu.name} (measured on {measured}; "
             "docs/roofline.md#the-reference-engine), the reference's own kernels counted under torch",
             "each part runs eagerly; the backward's host is not modelled (its GPU time, a lower bound where the "
             "autograd engine's dispatch is the slower)", memory_note(held, usable, gpu)]
    if step.forward.bound == "host":
        notes.append(f"the forward is host-bound: {step.forward.host_s * 1e3:,.2f} ms of dispatch over "
                     f"{step.forward.gpu_s * 1e3:,.2f} ms on the GPU")
    return notes
