"""Latency of prefill and decode on GPUs under a time model. See docs/roofline.md.

Per op on one GPU: c = FLOPs / (peak at the op's dtype · efficiency), m = bytes / (bandwidth · memory_eff),
time = max(c, m) + overlap·min(c, m) + kernels·kernel_s (llmcalc/model/time_model.py; the roofline has no
overlap term and no fixed cost). Bytes: the weights the op reads (once per forward), its activations in and
out, and for attention the KV cache (decode reads all of it and writes the new token). An MoE layer reads the
experts its T routed tokens hit: E·(1 − (1 − k/E)^T) expected under uniform routing; under expert parallelism
the routed experts' FLOPs and the all-to-all's bytes are the busiest rank's (llmcalc/costs/expert_balance.py,
at the workload's expert skew). Communication (tensor
all-reduce, expert all-to-all, pipeline sends) takes bytes / (one-way link · comm_eff) + calls·collective_s
and is not overlapped. A step adds step_s; a phase is the sum of its ops; decode sums its G − 1 steps in
closed form. Without CUDA graphs (the workload's enforce_eager) a step lasts at least the host's launches of its
kernels and collectives · launch_s.
"""

from __future__ import annotations

from functools import cache

from llmcalc.costs.capacity import activation_workspace, holds, require_weights_fit, usable_bytes
from llmcalc.costs.parallel import link_note
from llmcalc.costs.shard import kv_per_gpu
from llmcalc.costs.step import Cost, Form, Op, experts_hit, op_name, step_costs, step_form
from llmcalc.costs.step_time import (
    StepTime,
    attention_dtype,
    block_scaled_note,
    busiest_of,
    expert_parallel_note,
    matrix_paths,
    native_types,
)
from llmcalc.costs.vision import image_seconds
from llmcalc.costs.weights import formats_label
from llmcalc.model.gpu import GPU
from llmcalc.model.spec import DTYPE_BITS, ModelSpec
from llmcalc.model.time_model import ROOFLINE, TimeModel, overlap_split
from llmcalc.reports.latency import LatencyReport, OpRow, PhaseRow
from llmcalc.workload import Workload

FORMULA = ("op time = max(FLOPs / (peak·compute_eff), bytes / (bandwidth·memory_eff)); phase = Σ ops + "
           "communication; ttft = prefill; tpot = one decode step (all active weights + the KV cache); "
           "MoE experts read per step = E·(1 − (1 − k/E)^T)")




def sum_max_affine(a: float, b: float, c: float, d: float, n: int) -> float:
    """Σ_{i=0}^{n−1} max(a + b·i, c + d·i), exactly, in O(1)."""
    if n <= 0:
        return 0.0

    def line(p: float, q: float, lo: int, hi: int) -> float:  # Σ_{i=lo}^{hi−1} p + q·i
        return (hi - lo) * p + q * (hi * (hi - 1) - lo * (lo - 1)) / 2 if hi > lo else 0.0

    if b == d:
        return n * max(a, c) + b * n * (n - 1) / 2
    x = (c - a) / (b - d)  # the lines cross at i = x
    k = min(n, max(0, int(x) + 1 if x >= 0 else 0))  # i < k on one side of x, i ≥ k on the other
    first, second = ((c, d), (a, b)) if b > d else ((a, b), (c, d))
    return line(*first, 0, k) + line(*second, k, n)


def latency(spec: ModelSpec, gpu: GPU, w: Workload, tm: TimeModel = ROOFLINE) -> LatencyReport:
    """Time of the workload on its layout of `gpu`s under the time model `tm`: prefill of `seq` tokens (the
    first token), then `gen` − 1 decode steps, per phase and op."""
    spec = w.sized(spec)  # cross-attention layers read the workload's images (Workload.sized)
    L, batch, seq, gen = w.layout, w.batch, w.seq, w.gen
    w.check(spec)
    spec.stack.check_timed("model", L)
    weights = require_weights_fit(spec, gpu, w)
    rep = batch // L.dp
    pre_time, dec_time = (StepTime(spec, gpu, w, tm, prefill) for prefill in (True, False))

    decode_form = step_form(spec, w, prefill=False)

    @cache
    def decode_at(c: int) -> Form:
        return step_costs(spec, w, rep, 1, c, decode_form)

    prefill = step_costs(spec, w, rep, seq, 0)
    last = seq + max(gen - 2, 0)
    phases = [_phase("prefill", 0, rep * seq, prefill, pre_time),
              _phase("decode first", seq, rep, decode_at(seq), dec_time),
              _phase("decode last", last, rep, decode_at(last), dec_time)]
    decode_s = _decode_sum(spec, decode_at, seq, gen - 1, dec_time)
    per_image = image_seconds(spec, gpu, w, tm)
    ttft = phases[0].time_s + (rep * w.images * per_image if w.images else 0.0) + tm.request_s
    total = ttft + decode_s
    kv = kv_per_gpu(spec, rep, seq + gen - 1, w) + spec.stack.cross_cache_bytes(  # and an encoder-decoder's cross
        spec, rep, spec.stack.encoder_length(w.encoder_seq, seq), DTYPE_BITS[w.kv_dtype])
    act = activation_workspace(spec, w)
    fits = holds(weights, act, kv, usable_bytes(gpu, w.reserve))
    hits = next((experts_hit(g.ffn.experts, g.ffn.top_k, rep) for g in spec.layer_groups() if g.ffn.routed_experts),
                None)
    ridge = gpu.peak(w.compute_dtype) / gpu.bandwidth
    timed = zip(phases, (prefill, decode_at(seq), decode_at(last)), (pre_time, dec_time, dec_time))
    return LatencyReport(
        model=spec.name, gpu=gpu.name, gpus=L.gpus, tp=L.tp, pp=L.pp, dp=L.dp, ep=L.ep, batch=batch, seq=seq,
        gen=gen, compute_dtype=w.compute_dtype, attention_dtype=attention_dtype(w),
        weights_dtype=formats_label(spec, w.formats(spec)),
        kv_dtype=w.kv_dtype, time_model=tm.name, peak_flops=gpu.peak(w.compute_dtype),
        bandwidth_bytes_per_s=gpu.bandwidth, ridge_point=ridge, effective_ridge_point=pre_time.flops / pre_time.bytes,
        compute_efficiency=tm.matmul_efficiency(w.compute_dtype), memory_efficiency=tm.memory_efficiency,
        comm_efficiency=tm.comm_efficiency,
        ttft_s=ttft, image_s=per_image, tpot_s=phases[1].time_s, tpot_end_s=phases[2].time_s, decode_s=decode_s,
        total_s=total,
        tokens_per_s=batch * gen / total, tokens_per_s_per_seq=gen / total,
        decode_tokens_per_s=batch / phases[1].time_s,
        experts_hit_per_step=hits, busiest_rank=busiest_of(spec, w, tm),
        expert_skew=w.routing_skew if L.ep > 1 else None, weights_bytes_per_gpu=weights, kv_bytes_per_gpu=kv,
        fits=fits, phases=phases,
        ops=[row for p, costs, time in timed for row in _op_rows(p.phase, costs, time)],
        formula=FORMULA, notes=_notes(spec, gpu, w, tm, fits, dec_time),
    )


def _phase(name: str, context: int, new: int, costs: Form, st: StepTime) -> PhaseRow:
    flops = sum(c.flops for c in costs.values())
    moved = sum(c.bytes for op, c in costs.items() if not op.collective)
    parts = [st.times(k, c) for k, c in costs.items()]
    compute, memory, comm, fixed = (sum(p[i] for p in parts) for i in range(4))
    gpu = sum(st.time(k, c) for k, c in costs.items())
    host = max(0.0, st.host_s - gpu)  # the host's launches beyond the GPU's work (without CUDA graphs)
    return PhaseRow(phase=name, context=context, new_tokens=new, flops=flops, bytes=moved,
                    intensity=flops / moved, bound="host" if host else "compute" if compute >= memory else "memory",
                    compute_s=compute, memory_s=memory, comm_s=comm, overhead_s=fixed + host + st.step_s,
                    time_s=st.bounded(gpu))


def _op_rows(phase: str, costs: Form, st: StepTime) -> list[OpRow]:
    """Ops summed over layer groups; an op's bound is the larger of its summed terms."""
    merged: dict[str, list] = {}
    kinds: dict[str, Op] = {}  # an entry of each op, for its kind
    for op, cost in costs.items():
        row = merged.setdefault(op.name, [0, 0, 0.0, 0.0, 0.0, 0.0, 0.0])
        kinds[op.name] = op
        for i, v in enumerate((cost.flops, cost.bytes, *st.times(op, cost), st.time(op, cost))):
            row[i] += v
    rows = []
    for op, (f, b, c, m, x, o, t) in merged.items():
        comm = kinds[op].collective
        bound = "interconnect" if comm else "compute" if c >= m else "memory"
        rows.append(OpRow(phase=phase, op=op, flops=f, bytes=b, intensity=None if comm else f / b,
                          bound=bound, compute_s=c, memory_s=m, comm_s=x, overhead_s=o, time_s=t))
    return rows


def _decode_sum(spec: ModelSpec, decode_at, seq: int, steps: int, st: StepTime) -> float:
    """Σ of `steps` decode steps at contexts seq … seq+steps−1. Each entry is affine in the
    context until its window fills (keys = min(c + 1, w)) and constant after, so each segment sums
    in closed form from its end points. Without CUDA graphs a step lasts at least the host's launches
    (StepTime.bounded): a step's GPU time does not fall as its context grows, so the steps below that floor
    come first, found by bisection, and cost the floor each. (Chunked attention's does fall a little at each
    chunk boundary, a sawtooth: where the floor cuts a tooth the sum is off by that dip, 4e-4 of it on
    llama4-scout's.)"""
    if steps <= 0:
        return 0.0
    if st.host_s:
        def gpu(i: int) -> float:  # the GPU's seconds of step i (context seq + i)
            return sum(st.time(key, cost) for key, cost in decode_at(seq + i).items())

        lo, hi = 0, steps  # the first step whose GPU time reaches the floor is in [lo, hi]
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if gpu(mid) >= st.host_s else (mid + 1, hi)
        return lo * (st.host_s + st.step_s) + _gpu_decode_sum(spec, decode_at, seq + lo, steps - lo, st)
    return _gpu_decode_sum(spec, decode_at, seq, steps, st)


def _gpu_decode_sum(spec: ModelSpec, decode_at, seq: int, steps: int, st: StepTime) -> float:
    """Σ of `steps` decode steps at contexts seq … seq+steps−1 at the GPU's time each, plus step_s (_decode_sum)."""
    if steps <= 0:
        return 0.0
    end = seq + steps - 1
    groups = spec.layer_groups()
    windows = {i: g.mixer.knee(g.window) for i, g in enumerate(groups) if g.mixer is not None}
    total = steps * st.step_s
    for key in decode_at(seq):
        w = windows.get(key.group)
        mixer = groups[key.group].mixer if key.group is not None else None
        affine_after = mixer is not None and mixer.affine_after_knee  # cost still grows past the knee
        lo_end = end if w is None else min(end, w - 1)  # the growing segment: c ≤ w − 1
        if lo_end >= seq:
            total += _segment(key, decode_at(seq)[key], decode_at(lo_end)[key], lo_end - seq + 1, st)
        if w is not None and end >= max(seq, w) and affine_after:  # a second affine segment
            total += _segment(key, decode_at(max(seq, w))[key], decode_at(end)[key], end - max(seq, w) + 1, st)
        elif w is not None and end >= max(seq, w):  # the capped segment: the same cost every step
            total += (end - max(seq, w) + 1) * st.time(key, decode_at(end)[key])
    return total


def _segment(key: Op, first: Cost, last: Cost, n: int, st: StepTime) -> float:
    """Σ over n steps of an entry whose FLOPs and bytes grow linearly from `first` to `last`: the overlap rule
    split (overlap_split) into a sum of maxima and a plain sum, each in closed form."""
    (c0, m0, x0, o), (c1, m1, x1, _) = st.times(key, first), st.times(key, last)
    step = max(n - 1, 1)
    on_max, on_sum = overlap_split(st.overlap)
    peak = sum_max_affine(c0, (c1 - c0) / step, m0, (m1 - m0) / step, n)
    return on_max * peak + on_sum * n * (c0 + c1 + m0 + m1) / 2 + n * (x0 + x1) / 2 + n * o


def eager_note(st: StepTime, tm: TimeModel) -> str:
    """What a step without CUDA graphs costs the host (StepTime.host_s), or that the time model charges nothing."""
    launches = sum(st.launches.values())
    if not tm.launch_s:
        return (f"no CUDA graphs (`enforce_eager`): the {tm.name} time model states no host time per launch "
                "(launch_s), so the host's launches are not charged")
    return (f"no CUDA graphs (`enforce_eager`): a step lasts at least the host's {launches:,.0f} launches of its "
            f"kernels and collectives × {tm.launch_s * 1e6:.3g} µs = {st.host_s * 1e3:.3g} ms (launch_s); a step "
            "whose GPU work is shorter waits for the host")


def _notes(spec: ModelSpec, gpu: GPU, w: Workload, tm: TimeModel, fits: bool, decode: StepTime) -> list[str]:
    L = w.layout
    notes = [f"figures per GPU ({L.gpus} GPU(s): tp={L.tp} pp={L.pp} dp={L.dp} ep={L.ep}); pipeline stages run "
             "one after another, so a phase sums every stage",
             "prefill emits the first token; the other G − 1 tokens take one decode step each"]
    ops = tuple(op for op, n in (("comm/tp_all_reduce", L.tp), ("comm/ep_all_to_all", L.ep),
                                 ("comm/pp_send", L.pp)) if n > 1)
    notes += [n for n in (link_note(L, gpu, ops),) if n]
    if tm.fixed_costs:
        notes.append(f"time model {tm.name}" + (f" ({tm.gpu}" + (f" under {tm.engine}" if tm.engine else "") + ")"
                                                if tm.gpu else "")
                     + ": overlap, kernel, collective and host costs as in its profile (`time_model`)")
    if tm.request_s:
        notes.append(f"ttft includes the host's {tm.request_s * 1e3:.3g} ms per request (request_s: parsing, chat "
                     "template, tokenising) before the prefill")
    elif not tm.fixed_costs:
        notes.append("not modelled: kernel launch and scheduling overheads, collective latency, compute/communication "
                     "overlap")
    if w.enforce_eager:
        notes.append(eager_note(decode, tm))
    if not fits:
        notes.append("weights + KV cache + workspace exceed the GPUs' usable memory: see `llmcalc fit`")
    notes += [n for n in (spec.stack.time_note(),) if n]
    if spec.attention.latent_cache:
        notes.append(f"MLA decode {w.mla_decode}; the latent cache is held whole by every tensor-parallel rank")
    recurrent: dict[str, int] = {}
    for g in spec.layer_groups():
        if g.mixer is not None and g.mixer.fixed_state:
            recurrent[g.mixer_name] = recurrent.get(g.mixer_name, 0) + g.count
    if recurrent:
        notes.append(", ".join(f"{n} {path}" for path, n in recurrent.items()) + " layers keep one state per "
                     "sequence: a decode step reads and writes it once and costs the same at any context "
                     "(docs/roofline.md#recurrent-layers-and-hybrid-layer-patterns)")
    if spec.ffn.routed_experts:
        notes.append("experts read per step assume uniform routing: E·(1 − (1 − k/E)^T) for T routed tokens")
    if L.ep > 1:
        notes.append(expert_parallel_note(spec, w, tm))
    formats = w.formats(spec)
    native = native_types(spec, gpu, w)
    if native:
        notes.append("compute follows the weights' format: " + ", ".join(f"{op} in {k}" for op, k in native.items())
                     + f", the rest in {w.compute_dtype}")
    if scaled := block_scaled_note(spec, gpu, w, tm):
        notes.append(scaled)
    dequantized = {op_name(p) for p in matrix_paths(spec) if formats.of(p).quantized} - set(native)
    if dequantized and w.compute_dtype in ("bf16", "fp16"):
        notes.append(f"weights ({formats_label(spec, formats)}): {', '.join(sorted(dequantized))} dequantized to "
                     f"{w.compute_dtype} matmuls (weight-only quantization: their bytes are the format's; dequantising is not charged)")
    if attention_dtype(w) != w.compute_dtype:
        notes.append(f"the attention core computes in {attention_dtype(w)} (`attention_dtype`), the matmuls in "
                     f"{w.compute_dtype}")
    return notes

