"""Latency of prefill and decode on GPUs under a time model. See docs/roofline.md.

Per op on one GPU: c = FLOPs / (peak at the op's dtype · efficiency), m = bytes / (bandwidth · memory_eff),
time = max(c, m) + overlap·min(c, m) + kernels·kernel_s (llmcalc/model/time_model.py; the roofline has no
overlap term and no fixed cost). Bytes: the weights the op reads (once per forward), its activations in and
out, and for attention the KV cache (decode reads all of it and writes the new token). An MoE layer reads the
experts its T routed tokens hit: E·(1 − (1 − k/E)^T) expected under uniform routing. Communication (tensor
all-reduce, expert all-to-all, pipeline sends) takes bytes / (one-way link · comm_eff) + calls·collective_s
and is not overlapped. A step adds step_s; a phase is the sum of its ops; decode sums its G − 1 steps in
closed form.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from functools import cache

from llmcalc.costs.capacity import (
    activation_workspace,
    holds,
    require_weights_fit,
    usable_bytes,
)
from llmcalc.costs.flops import MAC, layer_flops
from llmcalc.costs.form import Lin, Whole, value, var
from llmcalc.costs.memory import LOGIT_BYTES
from llmcalc.costs.parallel import (
    allreduce_bytes,
    alltoall_bytes,
    collective_link,
    link_note,
    mixer_shards,
)
from llmcalc.costs.shard import (
    ceil_div,
    edge_bytes,
    kv_per_gpu,
    layer_bytes_per_gpu,
    split_of,
    stack_weight_bytes,
)
from llmcalc.costs.vision import image_seconds
from llmcalc.costs.weights import formats_label
from llmcalc.model.attention import Attention
from llmcalc.model.gpu import GPU
from llmcalc.model.spec import DTYPE_BITS, LayerGroup, ModelSpec
from llmcalc.model.time_model import ROOFLINE, TimeModel
from llmcalc.reports.latency import LatencyReport, OpRow, PhaseRow
from llmcalc.workload import Layout, Workload

FORMULA = ("op time = max(FLOPs / (peak·compute_eff), bytes / (bandwidth·memory_eff)); phase = Σ ops + "
           "communication; ttft = prefill; tpot = one decode step (all active weights + the KV cache); "
           "MoE experts read per step = E·(1 − (1 − k/E)^T)")
Cost = list  # [flops, bytes, row flops] of one (layer group, op) entry on one GPU (step_form)


def experts_hit(experts: int, top_k: int, tokens: float) -> float:
    """Expected distinct experts `tokens` tokens choose, each picking top_k of `experts` uniformly:
    E·(1 − (1 − k/E)^T)."""
    return experts * (1 - (1 - top_k / experts) ** tokens)


def op_name(component: str, mixer: str = "attention") -> str:
    """The op a FLOPs or parameter component of a layer whose mixer is reported under `mixer` belongs to: a
    mixer's core (its core_* components and attention sinks) or its projections (the layer's norms with them),
    the FFN's parts. A hybrid's other mixers are ops of their own (mamba/core, mamba/proj)."""
    head, _, tail = component.partition("/")
    if head not in ("ffn", "norms"):  # a mixer's component path: attention/…, or a hybrid's mamba/…
        return f"{head}/core" if tail.startswith("core") or tail == "sinks" else f"{head}/proj"
    if head == "norms":
        return f"{mixer}/proj"
    if component.startswith("ffn/dense_"):
        return "ffn/dense_layers"
    tail = component.removeprefix("ffn/")
    return {"router": "ffn/router", "experts": "ffn/experts"}.get(
        tail, "ffn/shared" if tail.startswith("shared") else "ffn")


PHASES = ("prefill", "chunk", "decode", "verify")
"""What a part of a forward runs: a prefill (context 0, as `latency`'s first token), a chunk (a prefill of new
tokens after cached ones: it reads that cache, as a chunked prefill or a prefix-cache hit does), a decode step
(one new token per sequence) or a verify step (speculative decoding: a decode step of 1 + k tokens per
sequence, each projected to logits)."""


def step_form(spec: ModelSpec, w: Workload, prefill: bool) -> dict[tuple, Cost]:
    """Per-GPU [FLOPs, bytes, row FLOPs] of one forward, keyed by (layer group index or None, op), as exact
    forms (llmcalc/costs/form.py) in the point's variables (step_vars): T tokens and R sequences on one GPU
    and, per layer window, R × each of the attention's counts. A prefill has context 0; a decode step one new
    token per sequence (T = R). latency evaluates these at its points, sweep compiles them for a grid."""
    return parts_form(spec, w, {"prefill" if prefill else "decode": ""})


def parts_form(spec: ModelSpec, w: Workload, parts: dict[str, str]) -> dict[tuple, Cost]:
    """step_form of one forward whose tokens run as several parts (PHASES), each naming its variables with
    its own suffix (T + suffix, R + suffix, counts + suffix); "T" is every token of the forward (the
    experts its tokens hit, the embedding, the collectives). A serving engine's mixed step is
    {"chunk": ":p", "decode": ":d"}: its prefill chunks and decode tokens share the weight reads.

    Row FLOPs are what one more row of each weight matmul the op launches would cost: Σ 2·N·K over its
    matmuls (for routed experts, over the experts its tokens hit); a matmul that several parts run at once
    is launched once. A time model's matmul_pad_rows multiplies them: the rows a matmul pays for beyond its
    M. The attention core has none (it is not a weight matmul)."""
    L, d = w.layout, spec.d_model
    a = DTYPE_BITS[w.act_dtype] // 8
    bits = DTYPE_BITS[w.kv_dtype]
    everything = var("T")
    out: dict[tuple, Cost] = defaultdict(lambda: [0, 0, 0])
    for gi, g in enumerate(spec.layer_groups()):
        n, routed, attn, path = g.count, g.ffn.routed_experts, g.mixer, g.mixer_name
        shards = mixer_shards(attn, L)
        rows: dict[str, Lin | int] = {}  # one row of each matmul a part launches, by component (launched once)
        for phase, tag in parts.items():
            prefill = phase in ("prefill", "chunk")
            absorbed = attn is not None and attn.latent_cache and not prefill and w.mla_decode == "absorbed"
            tokens, batch = var("T" + tag), var("R" + tag)
            counts, core, latents = {}, {}, tokens if prefill else 0
            if attn is not None:  # a layer without a mixer (Nemotron-H's MLP layers) runs its FFN alone
                # the names a phase's counts give at every point
                sample = {"prefill": attn.counts(1, 0, g.window), "chunk": attn.chunk_counts(2, 1, g.window),
                          "decode": attn.counts(1, 1, g.window), "verify": attn.counts(2, 1, g.window)}[phase]
                counts = {k: var(f"{k}@{count_scope(g)}{tag}") for k in sample}
                core = attn.core_from(counts, tokens, absorbed)
                # a prefill re-projects its new tokens; a decompressed decode every key it attends to
                if not prefill and attn.latent_cache and not absorbed:
                    latents = counts["pairs"]
            for comp, f in layer_flops(spec, g, tokens, 0, latents, absorbed, core).items():
                out[(gi, op_name(comp, path))][0] += n * ceil_div(f, L.tp)  # experts too: balanced over the group
            reprojects = int(prefill or attn is not None and attn.latent_cache and not absorbed)  # rows `latents` run
            for comp, f in layer_flops(spec, g, 1, 0, reprojects, absorbed, {}).items():  # one row of each matmul
                if routed and comp.endswith("/experts"):  # a row through every expert on the GPU, times the share hit
                    every = ceil_div(f * g.ffn.experts // g.ffn.top_k, split_of(comp, L))
                    f = Lin({Whole(experts_read, "T", every, g.ffn.experts, g.ffn.top_k, L.ep, L.tp): 1})
                else:
                    f = ceil_div(f, L.tp)
                rows[comp] = f if comp not in rows or isinstance(f, Lin) else max(f, rows[comp])
            # an encoder-decoder's cross-attention, each decoder layer's
            for op, cost in spec.stack.layer_time_terms(spec, tokens, var("E" + tag), var("X" + tag),
                                                        phase == "prefill", a, bits).items():
                for i, v in enumerate(cost):
                    out[(gi, op)][i] += n * v
            io = {f"{path}/{k}": v for k, v in attn.io(d).items()} if attn is not None else {}
            io |= {spec.ffn_prefix(g) + k: v for k, v in g.ffn.io(d).items()}
            for comp, width in io.items():
                moved = latents if attn is not None and comp.split("/", 1)[1] in attn.reprojected else tokens
                out[(gi, op_name(comp, path))][1] += n * ceil_div(moved * width * a, L.tp)
            if attn is None:
                continue
            if phase == "prefill":  # write the new tokens' cache
                core_io = ceil_div(tokens * (attn.query_io() + attn.key_value_io()) * a, L.tp)
                cache = attn.prefill_cache_bytes(tokens, batch, bits)
            elif phase == "chunk":  # and read what earlier tokens cached: keys = cached + new
                core_io = ceil_div(tokens * (attn.query_io() + attn.key_value_io()) * a, L.tp)
                cache = attn.cache_bytes(counts["keys"], bits)
            else:  # read the cache, write the new token (a recurrent layer: read and write each state)
                core_io = ceil_div(tokens * attn.query_io() * a, L.tp)
                cache = attn.step_cache_bytes(counts, batch, bits)
            out[(gi, f"{path}/core")][1] += n * (core_io + ceil_div(cache, shards))
        for comp, f in rows.items():
            out[(gi, op_name(comp, path))][2] += n * f
        unread = spec.stack.unread_weights("prefill" in parts)  # a decode step's unused cross K/V weights
        for comp, b in layer_bytes_per_gpu(spec, g, w).items():
            if comp in unread:
                continue
            if routed and comp.endswith("/experts"):
                b = Lin({Whole(experts_read, "T", b, g.ffn.experts, g.ffn.top_k, L.ep, L.tp): 1})
            out[(gi, op_name(comp, path))][1] += n * b
    for phase, tag in parts.items():  # an encoder-decoder's encoder (in a prefill)
        terms = spec.stack.time_terms(spec, var("T" + tag), var("R" + tag), var("E" + tag), var("E2" + tag),
                                      var("X" + tag), phase == "prefill", a, bits)
        for op, cost in terms.items():
            for i, v in enumerate(cost):
                out[(None, op)][i] += v
    # an encoder-decoder's embedding norm, and its encoder's weights in the forward that encodes (read once)
    for comp, b in stack_weight_bytes(spec, w, spec.stack.read_params(spec, "prefill" in parts)).items():
        out[(None, spec.stack.time_op(comp))][1] += b
    head = edge_bytes(spec, w)[1]
    # a decode step projects its new token; a prefill its last position (`logits` last) or every one (all); a
    # chunk the last position of each sequence; a verify step every position
    logits = sum((var(("T" if phase == "verify" or phase == "prefill" and w.logits == "all" else "R") + tag)
                  for phase, tag in parts.items()), Lin())
    out[(None, "embedding")][1] += ceil_div(everything * d * (2 + a), L.tp)
    out[(None, "lm_head")][0] += ceil_div(MAC * logits * d * spec.vocab_size, L.tp)
    out[(None, "lm_head")][2] += ceil_div(MAC * d * spec.vocab_size, L.tp)
    out[(None, "lm_head")][1] += ceil_div(head + logits * (d * a + LOGIT_BYTES * spec.vocab_size), L.tp)
    for op, b in _comm_bytes(spec, L, everything, a).items():
        out[(None, op)][1] += b
    return dict(out)


def count_scope(g: LayerGroup) -> str:
    """The scope of a layer group's count variables ({count}@{scope}): its window for the spec's attention
    (as every uniform model has it), its mixer's path and window for another mixer of a hybrid (mamba:None)."""
    return str(g.window) if g.mixer_name == "attention" else f"{g.mixer_name}:{g.window}"


def count_scopes(spec: ModelSpec) -> dict[str, tuple[Attention, int | None]]:
    """Each count scope of the layer groups with a mixer (count_scope), with its mixer and window, in layer order."""
    return {count_scope(g): (g.mixer, g.window) for g in spec.layer_groups() if g.mixer is not None}


def step_vars(spec: ModelSpec, batch: int, new: int, context: int) -> dict[str, int]:
    """The variables of step_form at a point: `batch` sequences on one GPU, `new` tokens each after
    `context` cached ones (T = batch·new, R = batch, and batch × each mixer's count per scope: count_scopes)."""
    env = {"T": batch * new, "R": batch}
    for scope, (attn, w) in count_scopes(spec).items():
        env |= {f"{k}@{scope}": batch * v for k, v in attn.counts(new, context, w).items()}
    return env


def step_costs(spec: ModelSpec, w: Workload, batch: int, new: int, context: int,
               form: dict[tuple, Cost] | None = None) -> dict[tuple, Cost]:
    """Per-GPU [FLOPs, bytes, row FLOPs] of one forward over `new` tokens per sequence with `context` tokens
    cached (new > 1 or context 0: a prefill): step_form at the point (`form`: the phase's, built once); an
    encoder-decoder's encoder variables (Stack.encoder_vars) at the workload's encoder length."""
    form = form or step_form(spec, w, new > 1 or context == 0)
    env = step_vars(spec, batch, new, context)
    env |= spec.stack.encoder_vars(batch, new, spec.stack.encoder_length(w.encoder_seq, w.seq))
    return {k: [value(c, env) for c in cost] for k, cost in form.items()}


def experts_read(tokens: int, b: int, experts: int, top_k: int, ep: int, tp: int) -> int:
    """Bytes of routed experts one forward of `tokens` tokens on one GPU reads: ⌊b·hit⌋ for `b` bytes of a
    layer's experts on the GPU, hit the share its tokens choose. Without ep all T tokens meet every
    (tensor-split) expert; with ep the GPU's E/ep experts see the tokens of its ep group, T·ep/tp."""
    group_tokens = tokens if ep == 1 else tokens * ep / tp
    return int(b * experts_hit(experts, top_k, group_tokens) / experts)


def alltoall_read(tokens: int, L: Layout, top_k: int, width: int) -> int:
    """Bytes one GPU sends in one expert-parallel all-to-all of a forward of `tokens` tokens on it."""
    return alltoall_bytes(L, tokens * L.ep // L.tp or 1, top_k, width)


def collectives(spec: ModelSpec, L: Layout) -> dict[str, int]:
    """Collective calls one GPU makes per forward, by op: two all-reduces per layer (after attention and
    after the FFN); two all-to-alls per MoE layer (dispatch and combine); a send per stage edge."""
    out = {}
    if L.tp > 1:
        out["comm/tp_all_reduce"] = 2 * spec.n_layers
    if L.ep > 1:
        out["comm/ep_all_to_all"] = 2 * sum(g.count for g in spec.layer_groups() if g.ffn.routed_experts)
    if L.pp > 1:
        out["comm/pp_send"] = L.pp - 1
    return out


def _comm_bytes(spec: ModelSpec, L: Layout, tokens: int, a: int) -> dict[str, int]:
    """Bytes one GPU sends per forward: each collective call (collectives) times the bytes of one."""
    hidden = tokens * spec.d_model * a

    def per_call(op: str) -> Lin | int:
        if op == "comm/ep_all_to_all":
            return Lin({Whole(alltoall_read, "T", L, spec.ffn.top_k, spec.d_model * a): 1})
        return allreduce_bytes(L, hidden) if op == "comm/tp_all_reduce" else hidden

    return {op: calls * per_call(op) for op, calls in collectives(spec, L).items()}


def kernels(spec: ModelSpec, absorbed: bool, prefill: bool = True, norms: bool = True) -> dict[tuple, int]:
    """Kernels one forward launches, keyed as step_form's entries: per layer, one per weight matmul
    (each FLOPs component of layer_flops), one for the attention core, one per norm (with the projections;
    `norms` False: none, for an engine that counts its norms' kernels itself); the embedding one, the head one
    plus its norm; a second stack's (Stack.time_kernels: an encoder-decoder's encoder when `prefill`, its
    cross-attention)."""
    out: dict[tuple, int] = {(None, "embedding"): 1, (None, "lm_head"): 1 + (spec.norm.final and norms)}
    out |= {(None, op): n for op, n in spec.stack.time_kernels(spec, prefill).items()}
    for gi, g in enumerate(spec.layer_groups()):
        mla = absorbed and g.mixer is not None and g.mixer.latent_cache
        per = Counter(op_name(c, g.mixer_name) for c in layer_flops(spec, g, 1, 1, 1, mla))
        if g.mixer is not None:
            per[f"{g.mixer_name}/core"] = 1
        per[op_name("norms/layer", g.mixer_name)] += spec.norm.per_layer if norms else 0
        per.update(spec.stack.layer_time_kernels(spec, prefill))  # an encoder-decoder's cross-attention
        out |= {(gi, op): g.count * n for op, n in per.items()}
    return out


def attention_dtype(w: Workload) -> str:
    """The dtype the attention core computes in: `attention_dtype`, else the compute dtype, but bf16 when
    that is fp8 or int8 (serving stacks run attention in bf16 over fp8 weights and caches)."""
    return w.attention_dtype or ("bf16" if w.compute_dtype in ("fp8", "int8", "fp4") else w.compute_dtype)


def native_types(spec: ModelSpec, gpu: GPU, w: Workload) -> dict[str, str]:
    """op → the matmul type its weights' format runs in natively on `gpu` (fp8 formats on fp8 tensor cores, MXFP4
    and NVFP4 on fp4 ones), for the ops whose every component shares one such type; none unless the workload
    lets compute follow the format (Workload.native_compute). Elsewhere the compute dtype: a format the GPU has
    no unit for is dequantised into it (weight-only), its bytes still the format's."""
    if not w.native_compute(spec):
        return {}
    formats, kinds = w.formats(spec), {}
    for path in matrix_paths(spec):
        kind = formats.of(path).compute
        kinds.setdefault(op_name(path), set()).add(kind if kind and getattr(gpu.peak_tflops, kind) else None)
    return {op: k.pop() for op, k in kinds.items() if len(k) == 1 and None not in k}


def matrix_paths(spec: ModelSpec) -> list[str]:
    """The component paths of every layer matrix (attention/q, ffn/experts, ffn/dense_up, ...)."""
    d = spec.d_model
    paths = [f"{g.mixer_name}/{k}" for g in spec.layer_groups() if g.mixer is not None for k in g.mixer.matrices(d)]
    paths += [spec.ffn_prefix(g) + k for g in spec.layer_groups() for k in g.ffn.matrices(d)]
    return list(dict.fromkeys(paths))


def native_rates(spec: ModelSpec, gpu: GPU, w: Workload, tm: TimeModel) -> dict[str, float]:
    """op → FLOP/s of the ops that run in their format's native type (native_types)."""
    return {op: gpu.peak(k) * tm.matmul_efficiency(k) for op, k in native_types(spec, gpu, w).items()}


class StepTime:
    """Seconds of a step's entries on one GPU under a time model (llmcalc/model/time_model.py): per op
    max(c, m) + overlap·min(c, m) + its kernels' fixed cost, c its FLOPs plus matmul_pad_rows × its row FLOPs
    at the peak of the dtype it runs in (the attention core: attention_dtype) and m its bytes at the bandwidth;
    communication bytes over the link tier the collective crosses (collective_link) plus each call's
    latency (collective_s, and the network's extra latency beyond a node); step_s per forward."""

    def __init__(self, spec: ModelSpec, gpu: GPU, w: Workload, tm: TimeModel, prefill: bool):
        attn = attention_dtype(w)
        self.flops = gpu.peak(w.compute_dtype) * tm.matmul_efficiency(w.compute_dtype)
        self.attention = gpu.peak(attn) * (tm.attention_efficiency or tm.matmul_efficiency(attn))
        self.bytes = gpu.bandwidth * tm.memory_efficiency
        self.native = native_rates(spec, gpu, w, tm)
        self.tm, self.overlap, self.step_s, self.pad = tm, tm.overlap, tm.step_s, tm.matmul_pad_rows
        absorbed = spec.attention.latent_cache and not prefill and w.mla_decode == "absorbed"
        self.fixed = {k: n * tm.kernel_s for k, n in kernels(spec, absorbed, prefill).items()}
        self.links: dict[str, float] = {}  # comm op → one-way bytes/s it reaches on the tier it crosses
        node = gpu.link(1)
        for op, n in collectives(spec, w.layout).items():
            tier = collective_link(op, w.layout, gpu)
            self.links[op] = tier.bytes_per_s * tm.comm_efficiency
            # a call pays the profile's collective_s (measured within a node) plus the slower tier's extra latency
            extra = max(0.0, tier.latency_s - node.latency_s) if tm.fixed_costs else 0.0
            self.fixed[(None, op)] = n * (tm.collective_s + extra)

    def link(self, op: str) -> float:
        """One-way bytes/s a communication op reaches: its tier's bandwidth · comm_efficiency."""
        return self.links[op]

    def rate(self, op: str) -> float:
        """FLOP/s of an op: a mixer core's (attention/core, a hybrid's mamba/core) at the attention's, or the
        matmuls'."""
        return self.attention if op.endswith("/core") else self.native.get(op, self.flops)

    def times(self, key: tuple, cost: Cost) -> tuple[float, float, float, float]:
        """(compute, memory, communication, fixed) seconds of one entry."""
        fixed = self.fixed.get(key, 0.0)
        if key[1].startswith("comm/"):
            return 0.0, 0.0, cost[1] / self.links[key[1]], fixed
        return (cost[0] + self.pad * cost[2]) / self.rate(key[1]), cost[1] / self.bytes, 0.0, fixed

    def time(self, key: tuple, cost: Cost) -> float:
        c, m, x, o = self.times(key, cost)
        return self.tm.overlapped(c, m) + x + o


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
    def decode_at(c: int) -> dict[tuple, Cost]:
        return step_costs(spec, w, rep, 1, c, decode_form)

    prefill = step_costs(spec, w, rep, seq, 0)
    last = seq + max(gen - 2, 0)
    phases = [_phase("prefill", 0, rep * seq, prefill, pre_time),
              _phase("decode first", seq, rep, decode_at(seq), dec_time),
              _phase("decode last", last, rep, decode_at(last), dec_time)]
    decode_s = _decode_sum(spec, decode_at, seq, gen - 1, dec_time)
    per_image = image_seconds(spec, gpu, w, tm)
    ttft = phases[0].time_s + (rep * w.images * per_image if w.images else 0.0)
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
        gen=gen, compute_dtype=w.compute_dtype, attention_dtype=attention_dtype(w), weights_dtype=formats_label(spec, w.formats(spec)),
        kv_dtype=w.kv_dtype, time_model=tm.name, peak_flops=gpu.peak(w.compute_dtype),
        bandwidth_bytes_per_s=gpu.bandwidth, ridge_point=ridge, effective_ridge_point=pre_time.flops / pre_time.bytes,
        compute_efficiency=tm.matmul_efficiency(w.compute_dtype), memory_efficiency=tm.memory_efficiency,
        comm_efficiency=tm.comm_efficiency,
        ttft_s=ttft, image_s=per_image, tpot_s=phases[1].time_s, tpot_end_s=phases[2].time_s, decode_s=decode_s,
        total_s=total,
        tokens_per_s=batch * gen / total, tokens_per_s_per_seq=gen / total,
        decode_tokens_per_s=batch / phases[1].time_s,
        experts_hit_per_step=hits, weights_bytes_per_gpu=weights, kv_bytes_per_gpu=kv, fits=fits, phases=phases,
        ops=[row for p, costs, time in timed for row in _op_rows(p.phase, costs, time)],
        formula=FORMULA, notes=_notes(spec, gpu, w, tm, fits),
    )


def _phase(name: str, context: int, new: int, costs: dict[tuple, Cost], st: StepTime) -> PhaseRow:
    flops = sum(c[0] for c in costs.values())
    moved = sum(c[1] for k, c in costs.items() if not k[1].startswith("comm/"))
    parts = [st.times(k, c) for k, c in costs.items()]
    compute, memory, comm, fixed = (sum(p[i] for p in parts) for i in range(4))
    return PhaseRow(phase=name, context=context, new_tokens=new, flops=flops, bytes=moved,
                    intensity=flops / moved, bound="compute" if compute >= memory else "memory",
                    compute_s=compute, memory_s=memory, comm_s=comm, overhead_s=fixed + st.step_s,
                    time_s=sum(st.time(k, c) for k, c in costs.items()) + st.step_s)


def _op_rows(phase: str, costs: dict[tuple, Cost], st: StepTime) -> list[OpRow]:
    """Ops summed over layer groups; an op's bound is the larger of its summed terms."""
    merged: dict[str, list] = {}
    for key, cost in costs.items():
        row = merged.setdefault(key[1], [0, 0, 0.0, 0.0, 0.0, 0.0, 0.0])
        for i, v in enumerate((*cost[:2], *st.times(key, cost), st.time(key, cost))):
            row[i] += v
    rows = []
    for op, (f, b, c, m, x, o, t) in merged.items():
        comm = op.startswith("comm/")
        bound = "interconnect" if comm else "compute" if c >= m else "memory"
        rows.append(OpRow(phase=phase, op=op, flops=f, bytes=b, intensity=None if comm else f / b,
                          bound=bound, compute_s=c, memory_s=m, comm_s=x, overhead_s=o, time_s=t))
    return rows


def _decode_sum(spec: ModelSpec, decode_at, seq: int, steps: int, st: StepTime) -> float:
    """Σ of `steps` decode steps at contexts seq … seq+steps−1. Each entry is affine in the
    context until its window fills (keys = min(c + 1, w)) and constant after, so each segment sums
    in closed form from its end points."""
    if steps <= 0:
        return 0.0
    end = seq + steps - 1
    groups = spec.layer_groups()
    windows = {i: g.mixer.knee(g.window) for i, g in enumerate(groups) if g.mixer is not None}
    total = steps * st.step_s
    for key in decode_at(seq):
        w = windows.get(key[0])
        mixer = groups[key[0]].mixer if key[0] is not None else None
        affine_after = mixer is not None and mixer.affine_after_knee  # cost still grows past the knee
        lo_end = end if w is None else min(end, w - 1)  # the growing segment: c ≤ w − 1
        if lo_end >= seq:
            total += _segment(key, decode_at(seq)[key], decode_at(lo_end)[key], lo_end - seq + 1, st)
        if w is not None and end >= max(seq, w) and affine_after:  # a second affine segment
            total += _segment(key, decode_at(max(seq, w))[key], decode_at(end)[key], end - max(seq, w) + 1, st)
        elif w is not None and end >= max(seq, w):  # the capped segment: the same cost every step
            total += (end - max(seq, w) + 1) * st.time(key, decode_at(end)[key])
    return total


def _segment(key: tuple, first: Cost, last: Cost, n: int, st: StepTime) -> float:
    """Σ over n steps of an entry whose FLOPs and bytes grow linearly from `first` to `last`:
    max + overlap·min = (1 − overlap)·max + overlap·(c + m), each part summed in closed form."""
    (c0, m0, x0, o), (c1, m1, x1, _) = st.times(key, first), st.times(key, last)
    step = max(n - 1, 1)
    k = st.overlap
    peak = sum_max_affine(c0, (c1 - c0) / step, m0, (m1 - m0) / step, n)
    return (1 - k) * peak + k * n * (c0 + c1 + m0 + m1) / 2 + n * (x0 + x1) / 2 + n * o


def _notes(spec: ModelSpec, gpu: GPU, w: Workload, tm: TimeModel, fits: bool) -> list[str]:
    L = w.layout
    notes = [f"figures per GPU ({L.gpus} GPU(s): tp={L.tp} pp={L.pp} dp={L.dp} ep={L.ep}); pipeline stages run "
             "one after another, so a phase sums every stage",
             "prefill emits the first token; the other G − 1 tokens take one decode step each"]
    ops = tuple(op for op, n in (("comm/tp_all_reduce", L.tp), ("comm/ep_all_to_all", L.ep),
                                 ("comm/pp_send", L.pp)) if n > 1)
    notes += [n for n in (link_note(L, gpu, ops),) if n]
    if tm.fixed_costs:
        notes.append(f"time model {tm.name}" + (f" ({tm.gpu})" if tm.gpu else "") + ": overlap, kernel, collective "
                     "and host costs as in its profile (`time_model`)")
    else:
        notes.append("not modelled: kernel launch and scheduling overheads, collective latency, compute/communication "
                     "overlap")
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
    formats = w.formats(spec)
    native = native_types(spec, gpu, w)
    if native:
        notes.append("compute follows the weights' format: " + ", ".join(f"{op} in {k}" for op, k in native.items())
                     + f", the rest in {w.compute_dtype}")
    dequantized = {op_name(p) for p in matrix_paths(spec) if formats.of(p).quantized} - set(native)
    if dequantized and w.compute_dtype in ("bf16", "fp16"):
        notes.append(f"weights ({formats_label(spec, formats)}): {', '.join(sorted(dequantized))} dequantized to "
                     f"{w.compute_dtype} matmuls (weight-only quantization: their bytes are the format's; dequantising is not charged)")
    if attention_dtype(w) != w.compute_dtype:
        notes.append(f"the attention core computes in {attention_dtype(w)} (`attention_dtype`), the matmuls in "
                     f"{w.compute_dtype}")
    return notes
