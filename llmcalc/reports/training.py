"""Typed results: the time and FLOPs utilisation of one training step (`llmcalc train`)."""

from typing import ClassVar

from llmcalc.reports.base import Placement


class TrainReport(Placement):
    """One optimizer step: `batch` sequences of `seq` tokens over `gpus` GPUs (tp · pp · dp), each data-parallel
    replica running its batch / dp sequences as micro-batches of `micro_batch` through a 1F1B pipeline, then the
    data-parallel gradient reduction and the optimizer update. The phase parts are seconds of one GPU (the
    busiest pipeline stage's share, stages taken as equal) and sum to step_s."""

    printed_by: ClassVar[str] = "train"

    batch: int
    """Sequences per optimizer step, over every data-parallel replica (the global batch)."""
    seq: int
    micro_batch: int
    """Sequences one replica runs through the pipeline at a time."""
    micro_batches: int
    """Micro-batches per replica per step: batch / (dp · micro_batch)."""
    compute_dtype: str
    attention: str
    """The attention-core FLOPs convention of model_flops and hardware_flops (causal, causal-half or dense); the
    time counts the work a causal kernel does either way."""
    recompute: str
    optimizer: str
    zero: int
    time_model: str
    peak_flops: float
    """The GPU's dense peak FLOP/s at the compute dtype: the denominator of mfu and hfu."""
    step_s: float
    """Seconds of one optimizer step: the sum of the phase parts below."""
    tokens_per_s: float
    """batch · seq / step_s, all GPUs together."""
    tokens_per_s_per_gpu: float
    model_flops: int
    """FLOPs of the step without recomputation (forward + backward, all logits), as `llmcalc flops` counts the
    training step with recompute none: the MFU numerator (6·N·D plus attention)."""
    hardware_flops: int
    """FLOPs of the step as it runs (`llmcalc flops`' train_hardware_flops): the workload's recomputation and a
    flash kernel's backward, which recomputes the attention scores: the HFU numerator."""
    model_tflops_per_gpu: float
    """model_flops / (step_s · gpus), in TFLOP/s: the figure training frameworks print."""
    mfu: float
    """Model FLOPs utilisation: model_flops / (step_s · gpus · peak_flops)."""
    hfu: float
    """Hardware FLOPs utilisation: hardware_flops / (step_s · gpus · peak_flops)."""
    forward_s: float
    """Forward passes of the replica's micro-batches on one stage: m · forward / pp (communication apart)."""
    backward_s: float
    """Backward passes: 2 × the forward's per-op time (input and weight gradients)."""
    recompute_s: float
    """Forward work redone in the backward: every layer (full) or the attention core (selective)."""
    tp_comm_s: float
    """Tensor-parallel all-reduces (2 per layer forward, 2 backward, 2 more per recomputed layer) and expert
    all-to-alls (2 per MoE layer each way), for the m micro-batches on one stage."""
    pp_comm_s: float
    """Pipeline sends: one activation forward and one gradient backward per micro-batch and stage edge."""
    pp_bubble_s: float
    """The 1F1B pipeline's fill and drain: (pp − 1) × the time of one micro-batch on one stage."""
    bubble_fraction: float
    """(pp − 1) / m: the bubble as a share of the work."""
    dp_comm_s: float
    """The exposed part of the data-parallel gradient reduction (ring: 2(dp − 1)/dp of the GPU's gradient bytes),
    beyond what hides under the last micro-batch's backward."""
    dp_comm_total_s: float
    """The whole gradient reduction, hidden or not."""
    optimizer_s: float
    """The optimizer update's memory traffic: read and write params, master weights, gradients and states."""
    overhead_s: float
    """The time model's fixed host cost per step (step_s of the profile); 0 for the roofline."""
    gradient_bytes_per_gpu: int
    """Gradient bytes one GPU reduces per step (its weights' count in the weights dtype)."""
    peak_memory_bytes: int | None = None
    """Bytes of the most-loaded GPU in the step, as `llmcalc memory --train` counts them; None where not checked
    (a study of published runs)."""
    usable_bytes: int | None = None
    """Bytes one GPU may use: capacity · (1 − reserve); the step is refused (or, with --auto, its micro-batch
    lowered) where peak_memory_bytes exceeds it."""
    notes: list[str]
    formula: str
