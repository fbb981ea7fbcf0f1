"""Typed results. Estimators return these; renderers only read them. Counts are ints."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Report(BaseModel):
    """Base of every report: frozen; a field's docstring becomes its description in the JSON Schema."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True, use_attribute_docstrings=True)


class ParamRow(Report):
    """One component summed over all layers: `params` stored, `active` used by one token."""

    component: str
    params: int
    """Parameters stored, all layers."""
    active: int
    """Parameters one token uses, all layers."""
    percent: float
    """params as % of the model total (MTP rows: of the main model's total)."""


class LayerTypeRow(Report):
    """Layers sharing one shape, with the parameters of one such layer."""

    layer_type: str
    layers: int
    params_per_layer: int
    active_per_layer: int


class ParamsReport(Report):
    """Parameter counts of a model.

    total: every parameter of the main model (tied matrices once; MTP modules excluded).
    active: parameters one token's forward uses = total − the routed experts it skips
    (the input embedding table included). active_excluding_embedding: active minus the token
    and learned-position tables (Kaplan et al.'s N).
    """

    model: str
    total: int
    """Every parameter of the main model; tied matrices once, MTP modules excluded."""
    active: int
    """Parameters one token's forward uses: total − the routed experts it skips."""
    active_excluding_embedding: int
    """active − token and learned-position tables (Kaplan et al.'s N)."""
    embedding: int
    """Token (and learned position) embedding parameters."""
    mtp: int
    """DeepSeek-V3 multi-token-prediction parameters, not in total."""
    breakdown: list[ParamRow]
    """One row per component path (embedding/…, attention/…, ffn/…, norms/…, lm_head), all layers."""
    mtp_breakdown: list[ParamRow]
    layer_types: list[LayerTypeRow]
    """Layers grouped by shape, with the parameters of one layer of each."""
    formula: str
    notes: list[str]


class PresetRow(Report):
    """One preset in `llmcalc presets`."""

    name: str
    layers: int
    d_model: int
    max_seq_len: int
    attention: str
    ffn: str
    attention_kind: str
    """The attention family in a few characters (MHA 32h, GQA 32/8, MLA 128h)."""
    ffn_kind: str
    """The FFN family in a few characters (SwiGLU, MLP, MoE 8/2: experts / top-k, +1 shared)."""
    sliding_window: int | None
    """Tokens a sliding-window layer attends to; None when no layer slides."""
    total: int
    active: int
    source: str | None


class PresetReport(Report):
    """`llmcalc presets NAME`: a preset's spec as written, its source, and figures derived from it."""

    name: str
    source: str | None
    total: int
    """Parameters, as `llmcalc params` counts them."""
    active: int
    """Parameters one token uses."""
    kv_bytes_per_token: int
    """KV cache bytes of one token of one sequence over all layers, in bf16."""
    kv_elements_per_token: int
    """KV cache elements of one token over all layers."""
    spec: dict
    """Every field of the spec (docs/spec.md), as a preset file writes it."""


class KVLayerRow(Report):
    """KV cache of the layers of one type: per layer and for all of them."""

    layer_type: str
    layers: int
    tokens_cached: int
    """Tokens each sequence keeps in this layer: the context, or window − 1 if smaller."""
    elements_per_token: int
    bytes_per_layer: int
    bytes: int


class KVReport(Report):
    """KV cache for `batch` sequences of `seq` tokens.

    total_bytes = Σ_layer types layers · batch · tokens_cached · elements_per_token · bytes/element,
    tokens_cached = min(seq, window − 1) for a sliding-window layer.
    bytes_per_token: one token of one sequence across all layers, before any window is full.
    """

    model: str
    batch: int
    seq: int
    kv_dtype: str
    total_bytes: int
    """Bytes of the whole cache: all layers, all sequences."""
    bytes_per_token: int
    """Bytes of one token of one sequence across all layers."""
    per_layer: list[KVLayerRow]
    formula: str
    notes: list[str]


class FlopsRow(Report):
    """One component's FLOPs in each phase (all layers, whole batch)."""

    component: str
    prefill: int
    decode: int
    generate: int
    train: int


class PositionFlops(Report):
    """Element-wise FLOPs of the position encoding, not in the matmul totals (prefill_flops, …).

    RoPE: 3 FLOPs per rotated element of q and k, (H + H_kv)·d_rot per token per layer (MLA: (H + 1)·d_r);
    ALiBi: H adds per (query, key) pair per layer (slope·distance precomputed); learned and sinusoidal:
    d adds per token, once; none: 0. train: forward + backward (RoPE's backward rotates the gradient,
    one more pass; an addition's gradient passes through free), all positions, recompute not counted.
    """

    kind: str
    per_token_per_layer: int
    per_pair_per_layer: int
    per_token: int
    """Per new token, once (not per layer): learned and sinusoidal positions."""
    prefill: int
    decode: int
    generate: int
    train: int
    formula: str


class FlopsReport(Report):
    """FLOPs (a multiply-add counts 2) of prefill, one decode step, G decode steps and a training step.

    prefill: B sequences of S prompt tokens. decode: one new token per sequence with S cached (it
    attends to S+1 keys, or the window). generate: G decode steps at contexts S … S+G−1 (prefill not
    included). train: forward + backward (2× forward) on B·S tokens with all logits, plus the
    recomputed forward work.
    """

    model: str
    batch: int
    seq: int
    gen: int
    attention: str
    logits: str
    mla_decode: str
    recompute: str
    mtp: bool
    prefill_flops: int
    """B sequences of S prompt tokens, whole model."""
    decode_flops: int
    """One decode step: one new token per sequence with S cached."""
    generate_flops: int
    """G decode steps at contexts S … S+G−1 (prefill excluded)."""
    train_flops: int
    """One training step on B·S tokens: forward + backward (+ recompute)."""
    prefill_flops_per_token: int
    decode_flops_per_token: int
    train_flops_per_token: int
    breakdown: list[FlopsRow]
    positions: PositionFlops | None = None
    """Position-encoding FLOPs (element-wise), reported apart: not in prefill_flops or the breakdown."""
    formula: str
    notes: list[str]


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
    total_bytes: int
    """Sum of the breakdown rows, bytes (per GPU under ZeRO)."""
    dominant: str
    """The largest component."""
    breakdown: list[MemoryRow]
    formula: str
    notes: list[str]


class GPUFigures(Report):
    """A GPU preset's figures: bytes, bytes/s; the interconnect both directions together."""

    name: str
    description: str
    memory_bytes: int
    bandwidth_bytes_per_s: float
    ridge_point: float
    """bf16 FLOPs per byte at which a kernel turns from memory- to compute-bound: peak / bandwidth."""
    interconnect: str
    interconnect_bytes_per_s: float
    source: str


class GPURow(GPUFigures):
    """One GPU preset in `llmcalc gpus`: dense peaks in FLOP/s."""

    bf16_flops: float
    fp8_flops: float | None


class GPUReport(GPUFigures):
    """`llmcalc gpus NAME`: one GPU preset in full; peaks are dense (no sparsity), int8 in ops/s."""

    peak_flops: dict[str, float | None]
    """Dense peak FLOP/s per matmul dtype; None where the GPU has no such unit."""
    notes: str


class OpRow(Report):
    """One operation of one phase on one GPU (a tensor-parallel rank, summed over the layers of
    every pipeline stage): work, traffic, and its roofline time."""

    phase: str
    op: str
    flops: int
    bytes: int
    intensity: float | None
    """FLOPs per byte moved; None for communication."""
    bound: str
    """compute, memory, or interconnect: whichever term sets the time."""
    time_s: float


class PhaseRow(Report):
    """A phase on one GPU: prefill, the first decode step, the last decode step."""

    phase: str
    context: int
    """Tokens in the cache before the phase (0 for prefill)."""
    new_tokens: int
    """Tokens processed in the phase, whole replica batch."""
    flops: int
    bytes: int
    intensity: float
    bound: str
    compute_s: float
    memory_s: float
    comm_s: float
    time_s: float


class Placement(Report):
    """A model on `gpus` GPUs of one kind, laid out as tp · pp · dp (ep within tp · dp)."""

    model: str
    gpu: str
    gpus: int
    tp: int
    pp: int
    dp: int
    ep: int


class LatencyReport(Placement):
    """Roofline latency of B sequences: prefill S tokens, then generate G tokens.

    Each op takes max(FLOPs / (peak · compute_efficiency), bytes / (bandwidth · memory_efficiency));
    a phase is the sum of its ops and its communication (not overlapped). ttft_s: the prefill
    (it emits the first token). tpot_s: the first decode step (context S); tpot_end_s: the last
    (context S+G−2). The G−1 decode steps sum to decode_s; total_s = ttft_s + decode_s.
    tokens_per_s: generated tokens of all replicas / total_s; tokens_per_s_per_seq: G / total_s.
    """

    batch: int
    seq: int
    gen: int
    compute_dtype: str
    weights_dtype: str
    kv_dtype: str
    peak_flops: float
    bandwidth_bytes_per_s: float
    ridge_point: float
    effective_ridge_point: float
    compute_efficiency: float
    memory_efficiency: float
    comm_efficiency: float
    ttft_s: float
    tpot_s: float
    tpot_end_s: float
    decode_s: float
    total_s: float
    tokens_per_s: float
    tokens_per_s_per_seq: float
    decode_tokens_per_s: float
    """Steady decode throughput at the first step: batch / tpot_s (all replicas)."""
    experts_hit_per_step: float | None
    """Expected distinct routed experts one MoE layer reads per decode step, E·(1 − (1 − k/E)^T)."""
    weights_bytes_per_gpu: int
    kv_bytes_per_gpu: int
    fits: bool
    phases: list[PhaseRow]
    ops: list[OpRow]
    formula: str
    notes: list[str]


class FitLayout(Report):
    """A layout: gpus = tp · pp · dp, experts over ep of them."""

    gpus: int
    tp: int
    pp: int
    dp: int
    ep: int


class FitReport(Placement):
    """Whether a model and workload fit in the GPUs' memory, per GPU.

    usable = capacity · (1 − reserve); kv budget = usable − weights − activation workspace.
    max_batch: most sequences of `seq` tokens the budget holds (all replicas). max_seq: longest
    context for `batch` sequences, capped at the model's max_seq_len (max_seq_memory: uncapped,
    None when sliding-window layers make the cache stop growing).
    """

    weights_dtype: str
    kv_dtype: str
    batch: int
    seq: int
    capacity_bytes: int
    reserve: float
    usable_bytes: int
    weights_bytes: int
    activation_bytes: int
    kv_budget_bytes: int
    kv_bytes: int
    """KV cache of `batch` × `seq` on one GPU."""
    total_bytes: int
    """weights + activation workspace + kv_bytes on one GPU."""
    fits: bool
    max_batch: int
    max_seq: int
    max_seq_memory: int | None
    max_seq_limited_by: str
    smallest_fit: FitLayout | None = None
    """When it does not fit: the fewest GPUs of this kind that hold the workload (dp and ep kept), None
    when it fits or no layout of up to 4,096 GPUs does."""
    formula: str
    notes: list[str]


class ValidationRow(Report):
    """One quantity: the closed-form estimate, the reference model's measurement, and the verdict.
    rel_error = |measured − estimate| / measured; ok when it is within tolerance."""

    model: str
    quantity: str
    convention: str
    estimate: int | float
    """Counts and bytes are exact ints; times are seconds."""
    measured: int | float
    rel_error: float
    tolerance: float
    ok: bool


class ValidationReport(Report):
    """`llmcalc validate`: estimates against the torch reference model's measurements."""

    device: str
    gpu: str | None
    models: list[str]
    """The models measured, as built (a scaled copy names its layers and width divisor)."""
    batch: int
    seq: int
    ok: bool
    rows: list[ValidationRow]
    notes: list[str]
