"""Typed results: Memory of inference or a training step (`llmcalc memory`). Counts are ints."""

from llmcalc.reports.base import Report


class MemoryRow(Report):
    component: str
    bytes: int
    note: str


class MemoryReport(Report):
    """Memory for inference (weights + KV cache + activations) or a training step (+ gradients and
    optimizer states), per GPU of a data-parallel group when ZeRO shards them; a training step's
    activations are one micro-batch's, on one GPU."""

    model: str
    mode: str
    batch: int
    """Sequences in all: the global batch (training: over the dp data-parallel GPUs)."""
    seq: int
    dp: int
    """Data-parallel GPUs (training)."""
    per_gpu_batch: int
    """Sequences one GPU runs per step: batch / dp."""
    micro_batch: int
    """Sequences whose activations one GPU holds at once (training: per micro-batch)."""
    weights_bytes: int
    kv_cache_bytes: int
    activation_bytes: int
    gradient_bytes: int
    optimizer_bytes: int
    trainable_params: int = 0
    """Parameters the training step updates: every one (full training), the LoRA adapters' (LoRA), 0 (inference)."""
    adapter_bytes: int = 0
    """LoRA adapter weights, in the dense dtype (0 without LoRA); weights_bytes is then the frozen base alone."""
    lora_rank: int | None = None
    """LoRA rank (None: full training or inference)."""
    lora_targets: list[str] = []
    """The LoRA targets adapted (empty without LoRA)."""
    total_bytes: int
    """Sum of the breakdown rows, bytes (per GPU under ZeRO)."""
    dominant: str
    """The largest component."""
    breakdown: list[MemoryRow]
    formula: str
    notes: list[str]
