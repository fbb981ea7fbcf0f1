"""Does a model fit on GPUs: largest batch at a context, longest context at a batch, and how fast it runs
there. See docs/roofline.md#fit.

Per GPU (llmcalc/costs/capacity.py): usable = capacity · (1 − reserve); budget for the KV cache = usable −
weights − the activation workspace of one prefill chunk. Under a serving engine (capacity.engine_pool) the
budget is the engine's pool, sized by its own rules: reserve = 1 − its gpu_memory_utilization, the workspace of
a max_batched_tokens chunk where it profiles one (none where its reserve already holds the activations), and its
share taken of the total memory or of what weights and workspace leave; usable = weights + workspace + budget.
max_batch = dp · ⌊budget / KV(1 sequence of S)⌋;
max_seq: the largest S with KV(batch/dp sequences of S) ≤ budget, found by bisection (KV is non-decreasing
in S). Time (llmcalc/costs/latency.py, under the time model): the workload's first token and decode step
where it fits, and the decode throughput max_batch / tpot(max_batch) at S, the most this layout serves.
"""

from __future__ import annotations

from llmcalc.costs.capacity import (
    activation_workspace,
    engine_pool,
    holds,
    layout_hint,
    smallest_layout,
    usable_bytes,
    weights_per_gpu,
)
from llmcalc.costs.latency import latency
from llmcalc.costs.shard import kv_per_gpu
from llmcalc.costs.weights import formats_label
from llmcalc.model.engine import Settings
from llmcalc.model.gpu import GPU
from llmcalc.model.spec import ModelSpec
from llmcalc.model.time_model import ROOFLINE, TimeModel
from llmcalc.reports.fit import FitLayout, FitReport
from llmcalc.workload import Workload

FORMULA = ("usable = capacity·(1 − reserve); kv budget = usable − weights − activation workspace; "
           "max_batch = dp·⌊budget / KV(1 × S)⌋; max_seq = max S with KV(B/dp × S) ≤ budget; "
           "max_batch_tokens_per_s = max_batch / tpot(max_batch, S)")
SEQ_LIMIT = 2**40
"""Bisection ceiling for max_seq; a cache still under budget here never fills (sliding windows)."""


def fit(spec: ModelSpec, gpu: GPU, w: Workload, tm: TimeModel = ROOFLINE, engine: Settings | None = None) -> FitReport:
    """Whether the workload's `batch` × `seq` fits on its layout, the largest batch and longest context that
    do, and when it does not fit, the smallest layout that holds it (a workload that does not fit is a
    result); the time of the workload where it fits and the decode throughput at max_batch, under `tm`.
    With `engine`, the KV budget is that engine's pool (capacity.engine_pool), its reserve and prefill chunk."""
    spec = w.sized(spec)  # cross-attention layers read the workload's images (Workload.sized)
    L, batch, seq = w.layout, w.batch, w.seq
    w.check(spec)
    spec.stack.check_decoding("model")
    pool = None
    if engine is not None:
        pool = engine_pool(spec, gpu, w, engine, check=False)
        w = pool.workload
    weights = weights_per_gpu(spec, w)
    act = activation_workspace(spec, w) if engine is None or engine.engine.profiles_activations else 0
    usable = usable_bytes(gpu, w.reserve) if pool is None else weights + act + pool.free
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
    timed = latency(spec, gpu, w.model_copy(update={"gen": 2}), tm) if fits else None
    at_max = latency(spec, gpu, w.model_copy(update={"batch": max_rep * L.dp, "gen": 2}), tm) if max_rep else None
    notes.append(f"time under the {tm.name} time model (`llmcalc latency`): ttft is the prefill of `batch` × `seq`, "
                 "tpot one decode step at context `seq`; max_batch_tokens_per_s = max_batch / its tpot")
    if engine is not None:
        e = engine.engine
        notes.append(f"KV budget as {e.label} {e.version} sizes its pool: {engine.gpu_memory_utilization:g} of the "
                     f"GPU's {'free memory (after weights and workspace)' if e.memory_of == 'free' else 'memory'}, "
                     + ("less the weights and the activation workspace of one "
                        f"{engine.max_batched_tokens:,}-token chunk" if e.profiles_activations else
                        "less the weights (its reserve holds the activations)")
                     + f"; {engine.block_size}-token blocks (`reserve`, `prefill_chunk` and `engine` change it)")
    return FitReport(
        model=spec.name, gpu=gpu.name, gpus=L.gpus, tp=L.tp, pp=L.pp, dp=L.dp, ep=L.ep,
        weights_dtype=formats_label(spec, w.formats(spec)), kv_dtype=w.kv_dtype, batch=batch, seq=seq,
        capacity_bytes=gpu.memory_bytes, reserve=w.reserve, usable_bytes=usable, weights_bytes=weights,
        activation_bytes=act, kv_budget_bytes=budget, kv_bytes=kv, total_bytes=weights + act + kv,
        fits=fits, max_batch=max_rep * L.dp, max_seq=capped, max_seq_memory=seq_memory,
        max_seq_limited_by="memory" if seq_memory is not None and seq_memory < spec.max_seq_len else "max_seq_len",
        smallest_fit=None if smallest is None else FitLayout(gpus=smallest.gpus, tp=smallest.tp, pp=smallest.pp,
                                                             dp=smallest.dp, ep=smallest.ep),
        engine=engine and engine.engine.name, kv_pool_tokens=pool and pool.tokens,
        kv_log=pool and engine.kv_log(pool.tokens),
        time_model=tm.name, ttft_s=timed and timed.ttft_s, tpot_s=timed and timed.tpot_s,
        decode_tokens_per_s=timed and timed.decode_tokens_per_s,
        max_batch_tokens_per_s=at_max and at_max.decode_tokens_per_s, formula=FORMULA, notes=notes,
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
