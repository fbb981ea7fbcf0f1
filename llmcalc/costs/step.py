"""The step cost form: what one forward costs each GPU, entry by entry, as exact forms in the point's variables.

Every time-based command evaluates this one form: `latency` at its prefill and decode points, `sweep` compiled
for a grid, a serving engine's step with its mixed parts (llmcalc/costs/engine_step.py), a training step's
forward (llmcalc/costs/training.py). An entry is an `Op` (the layer group it runs in, its name, its kind) and
its `Cost` on one GPU of the layout: FLOPs, bytes moved, and row FLOPs (what one more row of each weight matmul
it launches would cost). Seconds come from a time model (llmcalc/costs/step_time.py), never from here.

  matmul entries   FLOPs 2·tokens·weights (layer_flops) / tp; bytes: the weights read once per forward, each
                   projection's activations in and out; routed experts: the share E·(1 − (1 − k/E)^T) hit
  core entries     the mixer's core FLOPs at the point's counts; bytes: its Q/K/V/O activations and the cache
                   it reads and writes (a prefill writes, a chunk reads what is cached, a decode reads all of it)
  memory entries   the embedding's lookup: T·d·(2 + a) bytes
  collectives      bytes one GPU sends: per call, a tensor all-reduce's 2·(tp − 1)/tp of T·d·a, an expert
                   all-to-all's routed tokens, a pipeline send's T·d·a
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import NamedTuple

from llmcalc.costs.flops import forward_layers, layer_flops
from llmcalc.costs.form import Lin, Whole, value, var
from llmcalc.costs.memory import LOGIT_BYTES
from llmcalc.costs.parallel import COLLECTIVES, allreduce_bytes, alltoall_bytes, mixer_shards
from llmcalc.costs.shard import edge_bytes, layer_bytes_per_gpu, split_of, stack_weight_bytes
from llmcalc.model.attention import Attention
from llmcalc.model.spec import DTYPE_BITS, LayerGroup, ModelSpec, dtype_bytes
from llmcalc.model.units import ceil_div
from llmcalc.workload import Layout, Workload

MATMUL, CORE, MEMORY, COLLECTIVE = "matmul", "core", "memory", "collective"
KINDS = {MATMUL: "compute: weight matmuls, at the matmul peak of the dtype they run in",
         CORE: "compute: a mixer's core (attention scores and values, a recurrent scan), at the attention's peak",
         MEMORY: "memory: data moved without FLOPs (the embedding's lookup, training's element-wise passes)",
         COLLECTIVE: "communication: bytes over the link tier the collective crosses"}
"""What kind of work an entry is, and the rate a time model charges it at."""
ELEMENTWISE = "elementwise"
"""The memory entry of a layer group's element-wise passes (training: llmcalc/costs/elementwise_traffic.py)."""


class Op(NamedTuple):
    """An entry of the form: the layer group it runs in (its index in spec.layer_groups(); None for what runs once
    per forward: the embedding, the head, an encoder, the collectives), its name as the reports show it
    (attention/proj, ffn/experts, lm_head, comm/tp_all_reduce) and its kind (KINDS). Build one with `Op.of`."""

    group: int | None
    name: str
    kind: str

    @classmethod
    def of(cls, group: int | None, name: str) -> Op:
        """The entry `name` of `group`, of the kind its name gives: a collective (parallel.COLLECTIVES), the
        embedding's lookup and the element-wise passes (memory), a mixer's core (…/core, as op_name and
        Stack.time_op name it), else matmuls."""
        kind = (COLLECTIVE if name in COLLECTIVES else MEMORY if name in ("embedding", ELEMENTWISE) else
                CORE if name.endswith("/core") else MATMUL)
        return cls(group, name, kind)

    @property
    def collective(self) -> bool:
        """Bytes over a link, not the GPU's memory."""
        return self.kind == COLLECTIVE

    @property
    def core(self) -> bool:
        """A mixer's core, run at the attention's rate."""
        return self.kind == CORE

    @property
    def memory(self) -> bool:
        """Data moved without FLOPs."""
        return self.kind == MEMORY


class Cost(NamedTuple):
    """An entry's cost on one GPU: FLOPs, bytes moved, and row FLOPs (Σ 2·N·K over the weight matmuls it
    launches: what one more row of each would cost). Ints at a point, exact forms (llmcalc/costs/form.py) in the
    form."""

    flops: Lin | int
    bytes: Lin | int
    row_flops: Lin | int

    def at(self, env: dict[str, int]) -> Cost:
        """The cost at the point `env`."""
        return Cost(*(value(x, env) for x in self))


Form = dict[Op, Cost]
"""A step's entries: one forward's cost per Op on one GPU."""


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


def step_form(spec: ModelSpec, w: Workload, prefill: bool) -> Form:
    """Per-GPU cost of one forward by entry (Op), as exact
    forms (llmcalc/costs/form.py) in the point's variables (step_vars): T tokens and R sequences on one GPU
    and, per layer window, R × each of the attention's counts. A prefill has context 0; a decode step one new
    token per sequence (T = R). latency evaluates these at its points, sweep compiles them for a grid."""
    return parts_form(spec, w, {"prefill" if prefill else "decode": ""})


def parts_form(spec: ModelSpec, w: Workload, parts: dict[str, str]) -> Form:
    """step_form of one forward whose tokens run as several parts (PHASES), each naming its variables with
    its own suffix (T + suffix, R + suffix, counts + suffix); "T" is every token of the forward (the
    experts its tokens hit, the embedding, the collectives). A serving engine's mixed step is
    {"chunk": ":p", "decode": ":d"}: its prefill chunks and decode tokens share the weight reads.

    Row FLOPs are what one more row of each weight matmul the op launches would cost: Σ 2·N·K over its
    matmuls (for routed experts, over the experts its tokens hit); a matmul that several parts run at once
    is launched once. A time model's matmul_pad_rows multiplies them: the rows a matmul pays for beyond its
    M. The attention core has none (it is not a weight matmul)."""
    L, d = w.layout, spec.d_model
    a = dtype_bytes(w.act_dtype)
    bits = DTYPE_BITS[w.kv_dtype]
    everything = var("T")
    groups = spec.layer_groups()
    counts = {tag: _part_counts(spec, phase, tag) for phase, tag in parts.items()}
    flops, rows = _part_flops(spec, w, parts, counts)
    out: dict[Op, list] = defaultdict(lambda: [0, 0, 0])
    for gi, g in enumerate(groups):
        n, routed, attn, path = g.count, g.ffn.routed_experts, g.mixer, g.mixer_name
        shards = mixer_shards(attn, L)
        for comp, f in flops.pop(gi, {}).items():
            out[Op.of(gi, op_name(comp, path))][0] += n * f
        for phase, tag in parts.items():
            prefill = phase in ("prefill", "chunk")
            tokens, batch = var("T" + tag), var("R" + tag)
            mine = counts[tag].get(count_scope(g), {}) if attn is not None else {}
            latents = _latents(w, g, prefill, tokens, mine)
            # an encoder-decoder's cross-attention, each decoder layer's
            for op, cost in spec.stack.layer_time_terms(spec, tokens, var("E" + tag), var("X" + tag),
                                                        phase == "prefill", a, bits).items():
                for i, v in enumerate(cost):
                    out[Op.of(gi, op)][i] += n * v
            io = {f"{path}/{k}": v for k, v in attn.io(d).items()} if attn is not None else {}
            io |= {spec.ffn_prefix(g) + k: v for k, v in g.ffn.io(d).items()}
            for comp, width in io.items():
                moved = latents if attn is not None and comp.split("/", 1)[1] in attn.reprojected else tokens
                out[Op.of(gi, op_name(comp, path))][1] += n * ceil_div(moved * width * a, L.tp)
            if attn is None:
                continue
            if phase == "prefill":  # write the new tokens' cache
                core_io = ceil_div(tokens * (attn.query_io() + attn.key_value_io()) * a, L.tp)
                cache = attn.prefill_cache_bytes(tokens, batch, bits)
            elif phase == "chunk":  # and read what earlier tokens cached: keys = cached + new
                core_io = ceil_div(tokens * (attn.query_io() + attn.key_value_io()) * a, L.tp)
                cache = attn.cache_bytes(mine["keys"], bits)
            else:  # read the cache, write the new token (a recurrent layer: read and write each state)
                core_io = ceil_div(tokens * attn.query_io() * a, L.tp)
                cache = attn.step_cache_bytes(mine, batch, bits)
            out[Op.of(gi, f"{path}/core")][1] += n * (core_io + ceil_div(cache, shards))
        for comp, f in rows.pop(gi, {}).items():
            out[Op.of(gi, op_name(comp, path))][2] += n * f
        unread = spec.stack.unread_weights("prefill" in parts)  # a decode step's unused cross K/V weights
        for comp, b in layer_bytes_per_gpu(spec, g, w).items():
            if comp in unread:
                continue
            if routed and comp.endswith("/experts"):
                b = Lin({Whole(experts_read, "T", b, g.ffn.experts, g.ffn.top_k, L.ep, L.tp): 1})
            out[Op.of(gi, op_name(comp, path))][1] += n * b
    for phase, tag in parts.items():  # an encoder-decoder's encoder (in a prefill)
        terms = spec.stack.time_terms(spec, var("T" + tag), var("R" + tag), var("E" + tag), var("E2" + tag),
                                      var("X" + tag), phase == "prefill", a, bits)
        for op, cost in terms.items():
            for i, v in enumerate(cost):
                out[Op.of(None, op)][i] += v
    # an encoder-decoder's embedding norm, and its encoder's weights in the forward that encodes (read once)
    for comp, b in stack_weight_bytes(spec, w, spec.stack.read_params(spec, "prefill" in parts)).items():
        out[Op.of(None, spec.stack.time_op(comp))][1] += b
    out[Op.of(None, "embedding")][1] += ceil_div(everything * d * (2 + a), L.tp)
    for comp, f in flops.pop(None, {}).items():  # the head (and a pooler's matmuls), as forward_layers has them
        out[Op.of(None, comp)][0] += f
    for comp, f in rows.pop(None, {}).items():
        out[Op.of(None, comp)][2] += f
    out[Op.of(None, "lm_head")][1] += ceil_div(edge_bytes(spec, w)[1] + _logits(w, parts) * (
        d * a + LOGIT_BYTES * spec.vocab_size), L.tp)
    for op, b in _comm_bytes(spec, L, everything, a).items():
        out[Op.of(None, op)][1] += b
    return {op: Cost(*c) for op, c in out.items()}


def _part_counts(spec: ModelSpec, phase: str, tag: str) -> dict[str, dict[str, Lin]]:
    """Each count scope's count variables in one part (count_scopes): the names the phase's counts give at every
    point, each `{name}@{scope}{tag}`."""
    out = {}
    for scope, (attn, window) in count_scopes(spec).items():
        sample = {"prefill": attn.counts(1, 0, window), "chunk": attn.chunk_counts(2, 1, window),
                  "decode": attn.counts(1, 1, window), "verify": attn.counts(2, 1, window)}[phase]
        out[scope] = {k: var(f"{k}@{scope}{tag}") for k in sample}
    return out


def _latents(w: Workload, g: LayerGroup, prefill: bool, tokens: Lin, counts: dict[str, Lin]) -> Lin | int:
    """Rows the attention's re-projected matmuls (MLA's kv_up) run in one part: a prefill its new tokens; a
    decompressed decode every key it attends to; an absorbed one none."""
    if prefill:
        return tokens
    return counts["pairs"] if g.mixer is not None and g.mixer.latent_cache and not w.absorbed(g.mixer, prefill) else 0


def _logits(w: Workload, parts: dict[str, str]) -> Lin:
    """Positions one forward projects to logits: a decode step its new token; a prefill its last position
    (`logits` last) or every one (all); a chunk the last position of each sequence; a verify step every
    position."""
    return sum((var(("T" if phase == "verify" or phase == "prefill" and w.logits == "all" else "R") + tag)
                for phase, tag in parts.items()), Lin())


def _part_flops(spec: ModelSpec, w: Workload, parts: dict[str, str], counts: dict) -> tuple[dict, dict]:
    """(FLOPs, row FLOPs) of the forward's parts on one GPU, from the one assembly of a forward's FLOPs
    (llmcalc/costs/flops.py: forward_layers, the head's included, no MTP module): by layer group index, one layer
    of it, then by component; None for what runs once per forward. FLOPs are each part's over tp (routed experts
    too: balanced over the group). Row FLOPs are one row of each matmul a part launches, launched once when
    several parts run it: for routed experts a row through every expert on the GPU, times the share hit."""
    L, groups = w.layout, spec.layer_groups()
    flops: dict = defaultdict(dict)
    rows: dict = defaultdict(dict)
    for phase, tag in parts.items():
        prefill = phase in ("prefill", "chunk")
        tokens, mine = var("T" + tag), counts[tag]
        part = forward_layers(
            spec, tokens=tokens, logits=_logits(w, {phase: tag}), absorbed=w.absorbed(spec.attention, prefill),
            mtp=False, core_of=lambda g: g.mixer.core_from(mine[count_scope(g)], tokens, w.absorbed(g.mixer, prefill)),
            latents_of=lambda g: _latents(w, g, prefill, tokens, mine.get(count_scope(g), {})),
            pairs_of=lambda g: (mine[count_scope(g)]["pairs"], var(f"D@{count_scope(g)}{tag}")))
        for (gi, comp), f in part.items():
            flops[gi][comp] = flops[gi].get(comp, 0) + ceil_div(f, L.tp)
        # one row of each matmul: the re-projected ones run where latents do
        reprojects = lambda g: _latents(w, g, prefill, 1, {"pairs": 1})  # noqa: E731 - 1 or 0 rows
        one = forward_layers(spec, tokens=1, logits=1, absorbed=w.absorbed(spec.attention, prefill), mtp=False,
                             core_of=lambda g: {}, latents_of=reprojects)
        for (gi, comp), f in one.items():
            g = groups[gi] if gi is not None else None
            if g is not None and g.ffn.routed_experts and comp.endswith("/experts"):
                every = ceil_div(f * g.ffn.experts // g.ffn.top_k, split_of(comp, L))
                f = Lin({Whole(experts_read, "T", every, g.ffn.experts, g.ffn.top_k, L.ep, L.tp): 1})
            else:
                f = ceil_div(f, L.tp)
            seen = rows[gi]
            seen[comp] = f if comp not in seen or isinstance(f, Lin) else max(f, seen[comp])
    return flops, rows


def count_scope(g: LayerGroup) -> str:
    """The scope of a layer group's count variables ({count}@{scope}): its window for the spec's attention
    (as every uniform model has it), its mixer's path and window for another mixer of a hybrid (mamba:None)."""
    return str(g.window) if g.mixer_name == "attention" else f"{g.mixer_name}:{g.window}"


def count_scopes(spec: ModelSpec) -> dict[str, tuple[Attention, int | None]]:
    """Each count scope of the layer groups with a mixer (count_scope), with its mixer and window, in layer order."""
    return {count_scope(g): (g.mixer, g.window) for g in spec.layer_groups() if g.mixer is not None}


def step_vars(spec: ModelSpec, batch: int, new: int, context: int) -> dict[str, int]:
    """The variables of step_form at a point: `batch` sequences on one GPU, `new` tokens each after
    `context` cached ones (T = batch·new, R = batch, and batch × each mixer's count per scope: count_scopes; a
    relative position encoding's D per scope, distances)."""
    env = {"T": batch * new, "R": batch}
    relative = bool(spec.positions.matmul_names)
    for scope, (attn, w) in count_scopes(spec).items():
        env |= {f"{k}@{scope}": batch * v for k, v in attn.counts(new, context, w).items()}
        if relative:
            env[f"D@{scope}"] = distances(attn, new, context, w)
    return env


def distances(attn: Attention, new: int, context: int, window: int | None) -> int:
    """The distances a relative position encoding projects in one forward of a sequence (the variable D of its
    scope, shared by a step's sequences: the most any of them attends over): every key it attends to, the cached
    ones and the new, min(S, W − 1) + n (flops' pairs_of: a prompt's S, a decode step's min(S + 1, W))."""
    return attn.cached_tokens(context, window) + new


def step_costs(spec: ModelSpec, w: Workload, batch: int, new: int, context: int,
               form: Form | None = None) -> Form:
    """Per-GPU cost of one forward over `new` tokens per sequence with `context` tokens
    cached (new > 1 or context 0: a prefill): step_form at the point (`form`: the phase's, built once); an
    encoder-decoder's encoder variables (Stack.encoder_vars) at the workload's encoder length."""
    form = form or step_form(spec, w, new > 1 or context == 0)
    env = step_vars(spec, batch, new, context)
    env |= spec.stack.encoder_vars(batch, new, spec.stack.encoder_length(w.encoder_seq, w.seq))
    return {op: cost.at(env) for op, cost in form.items()}


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


def kernels(spec: ModelSpec, absorbed: bool, prefill: bool = True, norms: bool = True) -> dict[Op, int]:
    """Kernels one forward launches, keyed as step_form's entries: per layer, one per weight matmul
    (each FLOPs component of layer_flops), one for the attention core, one per norm (with the projections;
    `norms` False: none, for an engine that counts its norms' kernels itself); the embedding one, the head one
    plus its norm; a second stack's (Stack.time_kernels: an encoder-decoder's encoder when `prefill`, its
    cross-attention)."""
    out: dict[Op, int] = {Op.of(None, "embedding"): 1, Op.of(None, "lm_head"): 1 + (spec.norm.final and norms)}
    out |= {Op.of(None, op): n for op, n in spec.stack.time_kernels(spec, prefill).items()}
    for gi, g in enumerate(spec.layer_groups()):
        mla = absorbed and g.mixer is not None and g.mixer.latent_cache
        per = Counter(op_name(c, g.mixer_name) for c in layer_flops(spec, g, 1, 1, 1, mla))
        if g.mixer is not None:
            per[f"{g.mixer_name}/core"] = 1
        per[op_name("norms/layer", g.mixer_name)] += spec.norm.per_layer if norms else 0
        per.update(spec.stack.layer_time_kernels(spec, prefill))  # an encoder-decoder's cross-attention
        out |= {Op.of(gi, op): g.count * n for op, n in per.items()}
    return out

