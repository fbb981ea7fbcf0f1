"""Typed results: the time and FLOPs utilisation of one training step (`llmcalc train`)."""

from typing import ClassVar

from llmcalc.reports.base import Placement


class TrainReport(Placement):
    """One optimizer step: `batch` sequences of `seq` tokens over `gpus` GPUs (tp · cp · pp · dp), each data-parallel
    replica running its batch / dp sequences as micro-batches of `micro_batch` through a 1F1B pipeline
    (interleaved with vpp > 1), then the gradient reduction and the optimizer update. The phase parts are seconds
    of one GPU (the stages taken as equal on an even split, else the slowest stage's) and sum to step_s."""

    printed_by: ClassVar[str] = "train"

    cp: int = 1
    """Context-parallel GPUs: each sequence split over cp GPUs (ring attention)."""
    vpp: int = 1
    """Virtual pipeline stages per pipeline GPU (interleaved 1F1B at 2 or more)."""
    stage_layers: list[int]
    """Layers of each pipeline stage, first to last."""
    slowest_stage: int | None = None
    """The stage whose time sets the pipeline's slot (uneven stages); None on an even split, whose stages are
    taken as equal."""
    lora_rank: int | None = None
    """LoRA adapters' rank, the base frozen; None: full training."""
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
    engine: str | None = None
    """The engine whose measured kernel classes time the step (`reference`: the bundled PyTorch model, its engine
    profile); None: the time model's training stack, fused kernels."""
    attention_kernel: str | None = None
    """The attention kernel whose published figures time the attention core (presets/kernels/attention.yaml:
    cudnn, fa2, fa3); None: the time model's own figures."""
    fusion: str = "fused"
    """The element-wise passes: fused (one kernel each) or eager (each PyTorch op a kernel)."""
    peak_flops: float
    """The GPU's dense peak FLOP/s at the compute dtype: the denominator of mfu and hfu."""
    step_s: float
    """Seconds of one optimizer step: the sum of the phase parts below."""
    step_s_range: list[float] | None = None
    """With --interval: [low, high], the range a measured figure fell in on published runs (docs/intervals.md);
    None without it, or where no band exists."""
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
    all-to-alls (2 per MoE layer each way), for the m micro-batches on one stage: all of them, or what runs beyond
    the layers' compute where the time model hides them (the roofline)."""
    cp_comm_s: float = 0.0
    """Context parallelism's K/V ring exchange beyond what hides under the attention core, for the m micro-batches
    on one stage; 0 at cp 1."""
    pp_comm_s: float
    """Pipeline sends: one activation forward and one gradient backward per micro-batch and stage edge (vpp per
    pipeline GPU when interleaved), the part not hidden: all of them on the plain schedule, what runs beyond the
    slot's compute beside it when interleaved."""
    pp_bubble_s: float
    """The pipeline's fill and drain: (pp − 1) / vpp × the time of one micro-batch on the (slowest) stage."""
    bubble_fraction: float
    """(pp − 1) / (m · vpp): the bubble as a share of the work (Narayanan et al. 2021)."""
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
    """Gradient bytes one GPU reduces per step (its weights' count in the weights dtype; LoRA: the adapters')."""
    cp_comm_bytes_per_gpu: int = 0
    """Bytes one GPU of the (slowest) stage sends round the context-parallel ring per step: (cp − 1) K/V blocks per
    attention layer forward, 2·(cp − 1) backward (K, V and their gradients), and again where the core is
    recomputed; 0 at cp 1."""
    peak_memory_bytes: int | None = None
    """Bytes of the most-loaded GPU in the step, as `llmcalc memory --train` counts them; None where not checked
    (a study of published runs)."""
    usable_bytes: int | None = None
    """Bytes one GPU may use: capacity · (1 − reserve); the step is refused (or, with --auto, its micro-batch
    lowered) where peak_memory_bytes exceeds it."""
    notes: list[str]
    formula: str
