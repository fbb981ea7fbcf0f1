"""Does a model fit on GPUs: largest batch at a context, longest context at a batch.
See docs/roofline.md#fit.

Per GPU: usable = capacity · (1 − reserve); budget for the KV cache = usable − weights − the
activation workspace of one prefill chunk (a server prefills long prompts in chunks, as vLLM's
max_num_batched_tokens does). max_batch = dp · ⌊budget / KV(1 sequence of S)⌋; max_seq: the largest S
with KV(batch/dp sequences of S) ≤ budget, found by bisection (KV is non-decreasing in S).
"""

from __future__ import annotations

from llmcalc.costs.memory import inference_activations
from llmcalc.costs.shard import kv_per_gpu, weights_per_gpu
from llmcalc.errors import UserError
from llmcalc.model.gpu import GPU
from llmcalc.model.spec import ModelSpec
from llmcalc.reports.fit import FitLayout, FitReport
from llmcalc.workload import Layout, Workload

FORMULA = ("usable = capacity·(1 − reserve); kv budget = usable − weights − activation workspace; "
           "max_batch = dp·⌊budget / KV(1 × S)⌋; max_seq = max S with KV(B/dp × S) ≤ budget")
SEQ_LIMIT = 2**40
"""Bisection ceiling for max_seq; a cache still under budget here never fills (sliding windows)."""


def usable_bytes(gpu: GPU, reserve: float) -> int:
    """Bytes of one GPU a workload may use: capacity · (1 − reserve), rounded down."""
    return int(gpu.memory_bytes * (1 - reserve))


def holds(weights: int, workspace: int, kv: int, usable: int) -> bool:
    """Whether one GPU holds its weights, the activation workspace and its KV cache."""
    return weights + workspace + kv <= usable


def activation_workspace(spec: ModelSpec, w: Workload) -> int:
    """Peak activations of one prefill chunk (`prefill_chunk` tokens) on one GPU (residual stream plus the
    largest transient)."""
    return inference_activations(spec, 1, w.prefill_chunk, w)[0]


NODE = 8
"""GPUs per server on every preset GPU's common platforms (HGX, MI300X OAM): tensor parallelism is tried
within one first, as it needs the fastest links."""
MAX_SEARCH = 4096
"""Most GPUs (tp · pp) the search for the smallest layout tries."""


def smallest_layout(spec: ModelSpec, gpu: GPU, batch: int, seq: int, w: Workload,
                    weights_only: bool = False) -> Layout | None:
    """The fewest GPUs on which `batch` sequences of `seq` tokens fit (weights_only: on which the weights
    fit): tp · pp of them per replica, dp and ep as given (ep dropped where it no longer divides), every
    layout one the model allows (tp divides the heads and FFN widths, pp the layers). For each count,
    the largest tp within one server (NODE) is tried first. None: none up to MAX_SEARCH GPUs."""
    usable = usable_bytes(gpu, w.reserve)
    dp, act = w.layout.dp, activation_workspace(spec, w)
    for n in range(1, MAX_SEARCH + 1):
        splits = [t for t in range(n, 0, -1) if n % t == 0]
        for tp in sorted(splits, key=lambda t: t > NODE):  # largest tp within a server first
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
            f"`gpus`: {spec.name} needs {weights / 1e9:.1f} GB of {w.weights_dtype} weights per GPU with "
            f"tp={w.layout.tp} pp={w.layout.pp}, more than the {usable / 1e9:.1f} GB usable on one {gpu.name}; "
            f"the fewest GPUs that hold them: {hint}; or a smaller `weights_dtype`"
        )
    return weights


def fit(spec: ModelSpec, gpu: GPU, w: Workload) -> FitReport:
    """Whether the workload's `batch` × `seq` fits on its layout, the largest batch and longest context that
    do, and when it does not fit, the smallest layout that holds it (a workload that does not fit is a
    result)."""
    L, batch, seq = w.layout, w.batch, w.seq
    w.check(spec)
    weights = weights_per_gpu(spec, w)
    usable = usable_bytes(gpu, w.reserve)
    act = activation_workspace(spec, w)
    budget = max(0, usable - weights - act)
    per_seq = kv_per_gpu(spec, 1, seq, w)
    max_rep = budget // per_seq
    while max_rep and kv_per_gpu(spec, max_rep, seq, w) > budget:  # int4 rounding, at most a step
        max_rep -= 1
    rep = batch // L.dp
    seq_memory = _max_seq(spec, rep, budget, w) if budget else 0
    capped = spec.max_seq_len if seq_memory is None else min(seq_memory, spec.max_seq_len)
    kv = kv_per_gpu(spec, rep, seq, w)
    fits = holds(weights, act, kv, usable)
    notes = [f"figures are per GPU; {L.gpus} GPU(s): tp={L.tp} pp={L.pp} dp={L.dp} ep={L.ep}"]
    smallest = None
    if not fits:
        smallest = smallest_layout(spec, gpu, batch, seq, w)
        what = "the weights alone exceed" if weights > usable else "weights + workspace + KV cache exceed"
        notes.append(f"{what} the usable memory; the fewest {gpu.name} GPUs that hold this workload: "
                     + layout_hint(smallest))
    if seq > spec.max_seq_len:
        notes.append(f"seq {seq:,} exceeds the model's max_seq_len {spec.max_seq_len:,}")
    if seq_memory is None:
        notes.append("every layer has a sliding window: the cache stops growing, so memory sets no length limit")
    return FitReport(
        model=spec.name, gpu=gpu.name, gpus=L.gpus, tp=L.tp, pp=L.pp, dp=L.dp, ep=L.ep,
        weights_dtype=w.weights_dtype, kv_dtype=w.kv_dtype, batch=batch, seq=seq,
        capacity_bytes=gpu.memory_bytes, reserve=w.reserve, usable_bytes=usable, weights_bytes=weights,
        activation_bytes=act, kv_budget_bytes=budget, kv_bytes=kv, total_bytes=weights + act + kv,
        fits=fits, max_batch=max_rep * L.dp, max_seq=capped, max_seq_memory=seq_memory,
        max_seq_limited_by="memory" if seq_memory is not None and seq_memory < spec.max_seq_len else "max_seq_len",
        smallest_fit=None if smallest is None else FitLayout(gpus=smallest.gpus, tp=smallest.tp, pp=smallest.pp,
                                                             dp=smallest.dp, ep=smallest.ep),
        formula=FORMULA, notes=notes,
    )


def _max_seq(spec: ModelSpec, batch: int, budget: int, w: Workload) -> int | None:
    """Largest S with KV(batch × S) ≤ budget; None when even SEQ_LIMIT tokens fit."""
    if kv_per_gpu(spec, batch, SEQ_LIMIT, w) <= budget:
        return None
    lo, hi = 0, SEQ_LIMIT  # KV(lo) ≤ budget < KV(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if kv_per_gpu(spec, batch, mid, w) <= budget:
            lo = mid
        else:
            hi = mid
    return lo
