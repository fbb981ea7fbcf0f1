"""Does a model fit on GPUs: largest batch at a context, longest context at a batch.
See docs/roofline.md#fit.

Per GPU: usable = capacity · (1 − reserve); budget for the KV cache = usable − weights − the
activation workspace of one prefill chunk (a server prefills long prompts in chunks, as vLLM's
max_num_batched_tokens does). max_batch = dp · ⌊budget / KV(1 sequence of S)⌋; max_seq: the largest S
with KV(batch/dp sequences of S) ≤ budget, found by bisection (KV is non-decreasing in S).
"""

from __future__ import annotations

from pydantic import Field

from .blocks.base import Frozen, PosInt
from .errors import UserError
from .hardware import GPU
from .memory import MemoryOptions, inference_activations
from .parallel import Layout
from .report import FitReport
from .shard import Storage, kv_per_gpu, weights_per_gpu
from .spec import ModelSpec

FORMULA = ("usable = capacity·(1 − reserve); kv budget = usable − weights − activation workspace; "
           "max_batch = dp·⌊budget / KV(1 × S)⌋; max_seq = max S with KV(B/dp × S) ≤ budget")
SEQ_LIMIT = 2**40
"""Bisection ceiling for max_seq; a cache still under budget here never fills (sliding windows)."""


class FitOptions(Frozen):
    storage: Storage = Storage()
    layout: Layout = Layout()
    reserve: float = Field(default=0.10, ge=0, lt=1)
    """Memory kept back for the CUDA context, allocator fragmentation and kernels' workspaces;
    0.10 matches vLLM's default gpu_memory_utilization of 0.9."""
    prefill_chunk: PosInt = 8192
    """Tokens per prefill chunk, which sizes the activation workspace (vLLM: max_num_batched_tokens)."""


def activation_workspace(spec: ModelSpec, o: FitOptions) -> int:
    """Peak activations of one prefill chunk on one GPU (residual stream plus the largest transient)."""
    opts = MemoryOptions(act_dtype=o.storage.act_dtype)
    return inference_activations(spec, 1, o.prefill_chunk, opts)[0]


def require_weights_fit(spec: ModelSpec, gpu: GPU, o: FitOptions) -> int:
    """Per-GPU weight bytes; weights that do not fit in usable memory are a user error naming how
    many GPUs they need."""
    w = weights_per_gpu(spec, o.storage, o.layout)
    usable = int(gpu.memory_bytes * (1 - o.reserve))
    if w > usable:
        total = weights_per_gpu(spec, o.storage, Layout())
        need = -(-total // usable)
        raise UserError(
            f"--gpus: {spec.name} needs {w / 1e9:.1f} GB of {o.storage.weights_dtype} weights per GPU with "
            f"tp={o.layout.tp} pp={o.layout.pp}, more than the {usable / 1e9:.1f} GB usable on one {gpu.name}; "
            f"use at least {need} GPUs (e.g. --gpus {need} --tp ... --pp ...) or a smaller --weights-dtype"
        )
    return w


def fit(spec: ModelSpec, gpu: GPU, batch: int, seq: int, o: FitOptions | None = None) -> FitReport:
    o = o or FitOptions()
    L, s = o.layout, o.storage
    L.check(spec, batch)
    weights = require_weights_fit(spec, gpu, o)
    usable = int(gpu.memory_bytes * (1 - o.reserve))
    act = activation_workspace(spec, o)
    budget = max(0, usable - weights - act)
    per_seq = kv_per_gpu(spec, 1, seq, s, L)
    max_rep = budget // per_seq
    while max_rep and kv_per_gpu(spec, max_rep, seq, s, L) > budget:  # int4 rounding, at most a step
        max_rep -= 1
    rep = batch // L.dp
    seq_memory = _max_seq(spec, rep, budget, s, L)
    capped = spec.max_seq_len if seq_memory is None else min(seq_memory, spec.max_seq_len)
    kv = kv_per_gpu(spec, rep, seq, s, L)
    notes = [f"figures are per GPU; {L.gpus} GPU(s): tp={L.tp} pp={L.pp} dp={L.dp} ep={L.ep}"]
    if seq > spec.max_seq_len:
        notes.append(f"seq {seq:,} exceeds the model's max_seq_len {spec.max_seq_len:,}")
    if seq_memory is None:
        notes.append("every layer has a sliding window: the cache stops growing, so memory sets no length limit")
    return FitReport(
        model=spec.name, gpu=gpu.name, gpus=L.gpus, tp=L.tp, pp=L.pp, dp=L.dp, ep=L.ep,
        weights_dtype=s.weights_dtype, kv_dtype=s.kv_dtype, batch=batch, seq=seq,
        capacity_bytes=gpu.memory_bytes, reserve=o.reserve, usable_bytes=usable, weights_bytes=weights,
        activation_bytes=act, kv_budget_bytes=budget, kv_bytes=kv, total_bytes=weights + act + kv,
        fits=weights + act + kv <= usable, max_batch=max_rep * L.dp, max_seq=capped, max_seq_memory=seq_memory,
        max_seq_limited_by="memory" if seq_memory is not None and seq_memory < spec.max_seq_len else "max_seq_len",
        formula=FORMULA, notes=notes,
    )


def _max_seq(spec: ModelSpec, batch: int, budget: int, s: Storage, L: Layout) -> int | None:
    """Largest S with KV(batch × S) ≤ budget; None when even SEQ_LIMIT tokens fit."""
    if kv_per_gpu(spec, batch, SEQ_LIMIT, s, L) <= budget:
        return None
    lo, hi = 0, SEQ_LIMIT  # KV(lo) ≤ budget < KV(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if kv_per_gpu(spec, batch, mid, s, L) <= budget:
            lo = mid
        else:
            hi = mid
    return lo
