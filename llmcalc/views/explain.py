"""`llmcalc explain`: the figures of params, kv, flops, memory and latency as formulas, each with its
symbols' values, the substituted arithmetic and the result, and totals checked against the plain
command's own figures (same spec, same workload).

params: per component, one layer's formula × L; kv: per window kind, 2·L·H_kv·h·B·S·bytes (MLA:
L·(r_kv + d_r)·B·S·bytes); flops: 2 · tokens · weights per matmul and pairs · per-pair cost for the
attention core, in prefill, one decode step and a training step; memory: weights, KV, activations
(and gradients, optimizer states); latency: per op max(F / (P·e_c), M / (BW·e_m)) summed per phase.
The terms of each block (its symbols, projections, pairs, cache, core) are its variant's explain_* methods.
"""

from __future__ import annotations

import math
import re
from functools import partial

from llmcalc.errors import UserError
from llmcalc.model.gpu import GPU
from llmcalc.model.spec import DTYPE_BITS, ModelSpec, dtype_bytes
from llmcalc.model.terms import linear, prod
from llmcalc.model.time_model import ROOFLINE, TimeModel
from llmcalc.reports.explain import ExplainReport, ExplainStep, ExplainTotal
from llmcalc.views.formula import (
    checked,
    env_of,
    ffn_groups,
    legend,
    mixer_env,
    mixer_groups,
    per_window,
    step,
    sum_total,
)
from llmcalc.workload import Layout, Workload


def explain(topic: str, spec: ModelSpec, w: Workload = Workload(), gpu: GPU | None = None,
            tm: TimeModel = ROOFLINE) -> ExplainReport:
    """The steps behind `llmcalc TOPIC` for `spec` on the workload (latency: on `gpu` under the time model `tm`),
    with totals checked against that command's own figures."""
    if topic not in TOPICS:
        raise UserError(f"explain: unknown topic {topic!r}; give one of {', '.join(TOPICS)}")
    spec.stack.check_explained()
    if topic == "latency" and gpu is None:
        raise UserError("`gpu`: explain latency needs a GPU; give `gpu` NAME (see `llmcalc gpus`)")
    for field, plain in UNMODELLED.get(topic, {}).items():
        if getattr(w, field) != plain:
            raise UserError(f"`{field}`: explain {topic} works out {field} {plain} only; drop `{field}` "
                            f"(`llmcalc {topic}` counts it)")
    split = next((f for f, v in w.layout.model_dump().items() if v != Layout.model_fields[f].default), None)
    if topic != "latency" and split is not None:
        raise UserError(f"`{split}`: explain {topic} works out the whole model on one GPU; drop `{split}` "
                        f"(`llmcalc {topic}` gives each GPU's share)")
    if topic == "latency" and w.train:
        raise UserError("`train`: explain latency works out inference; drop `train` (`llmcalc train` times a "
                        "training step)")
    if w.optimizer != Workload.model_fields["optimizer"].default and not (w.train and topic == "memory"):
        raise UserError(f"`optimizer`: explain {topic} holds no optimizer state; drop `optimizer`"
                        f"{' or add `train`' if topic == 'memory' else ''}")
    if topic == "latency":
        return _latency(spec, w, gpu, tm)
    return TOPICS[topic](spec, w)


def _report(topic: str, spec: ModelSpec, w: Workload, steps: list[ExplainStep], totals: list[ExplainTotal],
            conventions: dict[str, str], notes: list[str], headline: int = 0, gen: int | None = None) -> ExplainReport:
    used = {re.sub(r"_\d+$", "_i", n) for s in [*steps, *totals] for n in s.symbols}
    head, workload = totals[headline], topic != "params"
    return ExplainReport(
        topic=topic, model=spec.name, batch=w.batch if workload else None, seq=w.seq if workload else None,
        gen=gen, conventions=conventions, steps=steps, totals=totals, total=head.value, check=head.check,
        unit=head.unit, matches=all(t.matches for t in totals),
        legend={n: text for n, text in legend(spec).items() if n in used}, notes=notes)


# ---- params -----------------------------------------------------------------------------------

def _params(spec: ModelSpec, w: Workload) -> ExplainReport:
    from llmcalc.costs.params import params

    r, env, norm, steps = params(spec), env_of(spec) | {"L": spec.n_layers}, spec.norm, []

    def add(component: str, formula: str, at: dict = env, keep: bool = False) -> None:
        s = step(component, formula, at, "params")
        if s.value or keep:
            steps.append(s)

    add("embedding/token", "V · d")
    add("embedding/position", spec.positions.explain_params())
    for path, (mixer, layers) in mixer_groups(spec).items():  # a hybrid's mixers each over their own layers
        for name, (p, _) in mixer.explain_parts().items():
            add(f"{path}/{name}", prod("L", p), mixer_env(spec, mixer, layers))
    for name, p in spec.positions.explain_layer_params().items():
        add(f"attention/{name}", prod("L", p))
    for prefix, (n, ffn) in ffn_groups(spec).items():
        for name, (p, _) in ffn.explain_parts().items():
            add(prefix + name, prod("L", p), env_of(spec, ffn) | {"L": n})
    add("norms/layer", prod("L", "n_norm", norm.explain_params("d")))
    for path, (mixer, layers) in mixer_groups(spec).items():
        if qk := norm.explain_qk(*mixer.explain_qk_norm()):
            name = "norms/qk" if path == "attention" else f"norms/{path}_qk"
            add(name, prod("L", qk), mixer_env(spec, mixer, layers))
    add("norms/final", norm.explain_params("d") if norm.final else "0")
    add("lm_head", ("V" if spec.lm_head_bias else "0") if spec.tie_embeddings else linear("d", "V", spec.lm_head_bias),
        keep=True)
    stack_env = env | spec.stack.explain_symbols(0)
    stack_env |= {"S_src": stack_env["S_src"] or spec.max_seq_len} if "S_src" in stack_env else {}
    for name, formula in spec.stack.explain_params(spec).items():  # an encoder-decoder's encoder, cross-attention
        add(name, formula, stack_env)
    if spec.vision:
        for name, formula in spec.vision.explain_params().items():
            add(name, formula, env | spec.vision.explain_symbols())
    totals = [sum_total("total", steps, "", r.total, "llmcalc params: total")]
    n, ffn = ffn_groups(spec).get("ffn/", (0, spec.ffn))
    if n and (idle := ffn.explain_inactive()):
        at = env_of(spec, ffn) | {"L": n, "N": r.total}
        totals.append(checked(step("active", f"N − {prod('L', idle)}", at, "params"), r.active,
                              "llmcalc params: active"))
    notes = ["each component: one layer's count × the L layers that have it"]
    if spec.tie_embeddings:
        notes.append("tied head: it reuses embedding/token's matrix, counted once there")
    if spec.mtp_modules:
        notes.append("MTP modules are not in the total (see `llmcalc params`)")
    return _report("params", spec, w, steps, totals, {}, notes)


# ---- KV cache ---------------------------------------------------------------------------------

def kv_steps(spec: ModelSpec, batch: int, seq: int, dtype: str, prefix: str) -> list[ExplainStep]:
    """Per mixer and window kind: layers · B · tokens kept · elements per token · bytes (sub-byte: rounded up
    per layer, as the attention's cache_bytes does), as the mixer's explain_kv writes it (a recurrent layer of a
    hybrid: its state per sequence, under its own path)."""
    bits = DTYPE_BITS[dtype]
    steps = []
    for path, (mixer, by_window) in mixer_groups(spec).items():
        env = env_of(spec) | {"B": batch, "S": seq, "bits": bits, "bytes": bits // 8} | mixer.explain_symbols(bits)
        for w, n in by_window.items():
            layers = "L_w" if w else "L"
            formula = mixer.explain_kv(layers, bits, bool(w))
            name = ("sliding" if w else "full") if path == "attention" else path
            steps.append(step(prefix + name, formula, env | {layers: n, "W": w or 0}, "bytes"))
    return steps


def stack_kv_steps(spec: ModelSpec, w: Workload, prefix: str) -> list[ExplainStep]:
    """An encoder-decoder's cross cache (Stack.explain_kv): L · B · S_e positions of K and V; none otherwise."""
    bits, enc = DTYPE_BITS[w.kv_dtype], spec.stack.encoder_length(w.encoder_seq, w.seq)
    env = env_of(spec) | {"L": spec.n_layers, "B": w.batch, "bits": bits, "bytes": bits // 8}
    env |= spec.attention.explain_symbols(bits) | spec.stack.explain_symbols(enc)
    return [step(prefix + name, f, env, "bytes") for name, f in spec.stack.explain_kv(spec, bits).items()]


def _kv(spec: ModelSpec, w: Workload) -> ExplainReport:
    from llmcalc.costs.kv import kv_cache

    r = kv_cache(spec, w)
    steps = kv_steps(spec, w.batch, w.seq, w.kv_dtype, "kv/") + stack_kv_steps(spec, w, "kv/")
    notes = list(dict.fromkeys(m.explain_kv_note for m, _ in mixer_groups(spec).values()))
    if spec.sliding_window:
        notes.append("a sliding-window layer keeps the last W − 1 tokens between steps (the next token makes W keys)")
    return _report("kv", spec, w, steps, [sum_total("total", steps, "kv/", r.total_bytes, "llmcalc kv: total_bytes")],
                   {"kv_dtype": w.kv_dtype}, notes)


# ---- FLOPs ------------------------------------------------------------------------------------

def _flops(spec: ModelSpec, conv: Workload) -> ExplainReport:
    from llmcalc.costs.flops import _passes, flops

    gen, a = conv.gen, spec.attention  # a: the spec's attention, for the position encoding's pairs
    r = flops(spec, conv)
    env = env_of(spec) | {"B": conv.batch, "S": conv.seq, "L": spec.n_layers}
    steps = []
    for phase in ("prefill", "decode", "train"):
        lead = ["3"] if phase == "train" else []  # FWD_BWD: the backward costs two forwards
        tokens = ["B"] if phase == "decode" else ["B", "S"]
        half = conv.attention_core == "causal-half" or (phase == "decode" and conv.step_attention == "causal-half")

        def pairs(sliding: bool, a=a) -> str:
            return a.explain_pairs(phase, "causal" if half else conv.attention_core, sliding)

        def twice_half(sliding: bool, a=a) -> str:
            """causal-half: twice the area under the mask, 2 · causal − diagonal (Attention.half_counts)."""
            return f"2 · ({pairs(sliding, a)}) − ({a.explain_diagonal(phase, sliding)})"

        def core_pairs(L: str, sliding: bool, cost: str, a=a) -> str:
            if half:  # halved and rounded down per sequence and layer, as Attention.core
                return prod(*lead, L, "B", f"(({twice_half(sliding, a)}) · {cost} // 2)")
            return prod(*lead, L, "B", pairs(sliding, a), cost)

        def position_pairs(sliding: bool) -> str:
            return f"({twice_half(sliding)}) / 2" if half else pairs(sliding)

        def add(component: str, formula: str, at: dict = env) -> None:
            steps.append(step(f"{phase}/{component}", formula, at, "FLOPs"))

        for path, (m, layers) in mixer_groups(spec).items():  # a hybrid's mixers each over their own layers
            menv = mixer_env(spec, m, layers) | {"B": conv.batch, "S": conv.seq}
            absorbed = conv.absorbed(m, prefill=phase != "decode")
            for name, (_, w) in m.explain_parts().items():
                if w is None or (name in m.reprojected and absorbed):
                    continue
                if name in m.reprojected and phase == "decode":  # decompress: re-project every cached latent
                    add(f"{path}/{name}", *per_window(
                        spec, lambda L, s, m=m, w=w: prod("2", L, "B", pairs(s, m), w), menv, layers))
                else:
                    passes = [str(m.train_passes(name))] if lead else []
                    add(f"{path}/{name}", prod(*passes, "2", "L", *tokens, w), menv)
            if absorbed:
                for name, w in m.explain_absorbed().items():
                    add(f"{path}/{name}", prod("2", "L", "B", w), menv)
            for name, cost in m.explain_pair_costs(absorbed).items():
                add(f"{path}/{name}", *per_window(spec, lambda L, s, m=m, cost=cost: core_pairs(L, s, cost, m),
                                                  menv, layers))
            for name, term in m.explain_extra_core(phase, "causal-half" if half else conv.attention_core).items():
                passes = [str(m.train_passes(name))] if lead else []
                add(f"{path}/{name}", prod(*passes, "L", "B", term), menv)
        for name, term in spec.positions.explain_layer_matmuls(phase, pairs(False)).items():
            passes = [str(spec.positions.layer_passes(name))] if lead else []
            add(f"attention/{name}", prod(*passes, "L", term))
        for prefix, (n, ffn) in ffn_groups(spec).items():
            for name, (_, w) in ffn.explain_parts().items():
                if w is not None:  # None: parameters no token is multiplied by (xIELU's scalars)
                    add(prefix + name, prod(*lead, "2", "L", *tokens, w), env | env_of(spec, ffn) | {"L": n})
        logits = tokens if phase == "train" or conv.logits == "all" else ["B"]
        add("lm_head", prod(*lead, "2", *logits, "d", "V"))
        stack_env = env | spec.stack.explain_symbols(spec.stack.encoder_length(conv.encoder_seq, conv.seq))
        for name, formula in spec.stack.explain_flops(spec, phase, partial(_passes, spec)).items():
            add(name, formula, stack_env)  # an encoder-decoder's encoder and cross-attention
        if phase != "train" and spec.positions.adds_flops:  # element-wise, apart from the totals above
            steps.append(step(f"positions/{phase}", *_positions(spec, tokens, position_pairs, env), "FLOPs"))
    totals = [sum_total(p, steps, f"{p}/", getattr(r, f"{p}_flops"), f"llmcalc flops: {p}_flops")
              for p in ("prefill", "decode", "train")]
    totals += [sum_total(f"positions/{p}", steps, f"positions/{p}", getattr(r.positions, p),
                         f"llmcalc flops: positions.{p}") for p in ("prefill", "decode")
               if spec.positions.adds_flops and r.positions is not None]
    conventions = {"attention": conv.attention_core, "logits": conv.logits,
                   "mla_decode": conv.mla_decode if a.latent_cache else "n/a", "train": "3 × forward, all logits"}
    notes = ["a multiply-add is 2 FLOPs: a matmul costs 2 · tokens · weights; element-wise work is not counted "
             "in these totals (positions/*: the position encoding's, reported apart)",
             "attention core: (query, key) pairs × per-pair cost; " + {
                 "causal": "causal: query i sees min(i, W) keys, S(S+1)/2 pairs in a full layer",
                 "causal-half": "causal-half: the area under the mask, S²/2 pairs in a full layer (written as "
                                "twice it, 2 · causal − the queries whose own key counts half, halved)",
                 "dense": "dense: the full S × S, masked or not"}[conv.attention_core],
             "decode: one new token per sequence, attending to S + 1 keys (min(S + 1, W) in a sliding layer)"]
    if note := a.explain_decode_note(conv.mla_decode):
        notes.append(note)
    if spec.vision and r.vision is not None:
        totals.append(_image_flops(spec, conv, r.vision.flops_per_image, steps, notes))
    return _report("flops", spec, conv, steps, totals, conventions, notes, gen=gen)


def _image_flops(spec: ModelSpec, w: Workload, check: int, steps: list[ExplainStep], notes: list[str]) -> ExplainTotal:
    """One image through the vision tower and projector (VisionTower.explain_flops), added to `steps`; its total."""
    tower, (height, width) = spec.vision, w.image_pixels(spec)
    env = env_of(spec) | tower.explain_symbols() | tower.explain_image_symbols(height, width, spec.d_model)
    steps += [step(f"image/{k}", f, env, "FLOPs") for k, f in tower.explain_flops().items()]
    notes.append(f"image/*: one {height}×{width} image, apart from the totals above (`llmcalc flops`: vision); "
                 "the encoder's attention is bidirectional, every pair counted")
    return sum_total("image", steps, "image/", check, "llmcalc flops: vision.flops_per_image")


def _positions(spec: ModelSpec, tokens: list[str], pairs, env: dict) -> tuple[str, dict]:
    """Position-encoding FLOPs of a phase (see llmcalc/costs/positions.py): RoPE 3 per rotated q/k element,
    ALiBi H per (query, key) pair, learned / sinusoidal d per token."""
    pos, rotated = spec.positions, spec.attention.explain_rotated()
    if pos.per_pair:
        return per_window(spec, lambda L, s: pos.explain_flops(tokens, rotated, L, pairs(s)), env)
    return pos.explain_flops(tokens, rotated), env


# ---- memory -----------------------------------------------------------------------------------

def _memory(spec: ModelSpec, w: Workload) -> ExplainReport:
    from llmcalc.costs.memory import layer_peak_per_token, memory
    from llmcalc.costs.train_memory import OPTIMIZER_BYTES
    from llmcalc.costs.params import params
    from llmcalc.costs.weights import formats_label, quantized_matrices

    r, counts = memory(spec, w), params(spec)
    formats, a = w.formats(spec), spec.attention
    bits = DTYPE_BITS[formats.default] if not formats.quantized else DTYPE_BITS[formats.dense]
    env = env_of(spec) | {"B": w.batch, "S": w.seq, "N": counts.total, "bits": bits, "bytes": bits // 8,
                          "a": dtype_bytes(w.act_dtype)}
    if formats.quantized:  # the quantised components' matrices in their formats, the rest in the dense dtype
        n_m, m = quantized_matrices(spec, formats)
        env |= {"N_m": n_m, "W_q": m}
        steps = [step("weights", "W_q + bytes · (N − N_m)", env, "bytes")]
    else:
        steps = [step("weights", "N · bytes", env, "bytes")]
    if not w.train:
        steps += kv_steps(spec, w.batch, w.seq, w.kv_dtype, "kv_cache/") + stack_kv_steps(spec, w, "kv_cache/")
        m, what = layer_peak_per_token(spec, w.seq, w)
        rot = a.rope_dim - a.rope_dim % 2 if spec.positions.rotary else 0
        at = env | {"m": m, "d_rot": rot}
        peak = "S · (8 + 2 · a · d_rot) + max(B · S · (2 · a · d + m), a · B · S · d + B · (a · d + (a + 4) · V))"
        if enc := spec.stack.encoder_length(w.encoder_seq, w.seq):  # an encoder-decoder: its encoder's peak too
            at |= spec.stack.explain_symbols(enc) | {"m_e": layer_peak_per_token(spec, enc, w)[0]}
            peak = spec.stack.explain_activations(peak)
        if w.images:  # the tower finishes before the language model's first layer: the larger peak
            tower = spec.vision
            at |= tower.explain_symbols() | tower.explain_image_symbols(*w.image_pixels(spec), spec.d_model)
            at |= {"I": w.images}
            peak = f"max({peak}, B · I · {tower.explain_activations()})"
        steps.append(step("activations", peak, at, "bytes"))
        notes = ["activations: the prefill peak (docs/formulas.md#inference-peak): the residual stream and the "
                 f"normed input (2·a·d per token) plus the largest layer stage, m bytes per token (here the {what}'s), "
                 "or at the head the last positions' logits in the activation dtype and in fp32; plus per position "
                 "its index (int64) and RoPE's cos and sin; flash attention"]
        if w.images:
            notes.append("images: the vision tower encodes the batch's B · I images together before the language "
                         "model runs; its peak (docs/vision.md#memory) and the language model's are not held at once")
    else:
        master = "master + states" if w.weights_dtype != "fp32" else "states"
        at = env | {"master": 4, "states": OPTIMIZER_BYTES[w.optimizer]}
        steps += [step("gradients", "N · bytes", env, "bytes"), step("optimizer", prod("N", master), at, "bytes")]
        for name, (n, mixer, ffn) in _saving_groups(spec).items():
            saved = f"{mixer.explain_saved()} + " if mixer is not None else ""
            kept = prod("a", "B", "S", f"{saved}d + {ffn.explain_saved()} + n_norm · d")
            core = mixer.explain_saved_core() if mixer is not None else "0"
            at = env | env_of(spec, ffn) | (mixer.explain_symbols() if mixer is not None else {}) | {"L": n}
            steps.append(step(name, prod("L", kept if core == "0" else f"{kept} + {core}"), at, "bytes"))
        steps.append(step("activations/logits", "4 · B · S · V", env, "bytes"))
        notes = ["mixed precision: weights and gradients in the weights dtype, an fp32 master copy and the optimizer "
                 "states; no ZeRO sharding", "activations per layer: every matmul's input, Q/K/V, the FFN "
                 "intermediates, the norm inputs, and flash attention's fp32 log-sum-exp (4·B·H·S); no recompute, "
                 "no dropout; + the fp32 logits (4·B·S·V)"]
    conventions = {"mode": r.mode, "weights_dtype": formats_label(spec, formats), "activations": f"{w.act_dtype}, flash attention"}
    conventions |= {"optimizer": w.optimizer} if w.train else {"kv_dtype": w.kv_dtype}
    totals = [sum_total("total", steps, "", r.total_bytes, "llmcalc memory: total_bytes")]
    return _report("memory", spec, w, steps, totals, conventions, notes)


def _saving_groups(spec: ModelSpec) -> dict[str, tuple[int, object, object]]:
    """activations/… row → (layers, mixer, FFN) of the layers that keep the same per token for the backward: the
    MoE layers and an MoE model's dense layers apart (activations/layers, activations/dense_layers); a hybrid's by
    mixer and FFN (activations/mamba+none)."""
    out: dict[str, tuple[int, object, object]] = {}
    for g in spec.layer_groups():
        prefix = spec.ffn_prefix(g)
        if spec.hybrid:
            name = f"activations/{g.mixer_name if g.mixer is not None else 'no_mixer'}+{g.ffn.kind}"
        else:
            name = prefix.replace("ffn/", "activations/") + "layers"
        n = out[name][0] if name in out else 0
        out[name] = (n + g.count, g.mixer, g.ffn)
    return out


# ---- latency ----------------------------------------------------------------------------------

ROOF = "max({F} / ({P} · {e}), {M} / (BW · e_m))"
PARTIAL = "max({c}, {m}) + e_o · min({c}, {m})"


def _op_step(component: str, op, parts: list[tuple[int, tuple]], row_flops: int, env: dict, entry) -> ExplainStep:
    """One op of one phase: the roofline of its summed FLOPs and bytes (the attention core at its own dtype's
    peak P_a; a weight matmul's FLOPs plus r padded rows of R row FLOPs each), and under a partial overlap
    its unhidden share, plus its fixed cost O; when its layer types are bound differently, one term per layer
    type (as `llmcalc latency` sums them). `entry`: one of the op's entries in the step form (its kind)."""
    fixed = " + O" if env["e_o"] or op.overhead_s else ""
    at = env | {"O": op.overhead_s}
    b = "b · " if "b" in env else ""  # the busiest expert-parallel rank's load over the mean's
    if entry.collective:
        return step(component, f"{b}M / (link · e_x)" + fixed, at | {"M": op.bytes}, "s")
    attention = entry.core
    peak, e = ("P_a", "e_a") if attention else ("P", "e_c")
    padded = bool(env["r"] and row_flops) and not attention

    def term(i: str) -> str:
        f = f"({b}F{i} + r · R{i})" if padded else f"{b}F{i}" if not b else f"({b}F{i})"
        if not env["e_o"]:
            return ROOF.format(F=f, M=f"M{i}", P=peak, e=e)
        return PARTIAL.format(c=f"{f} / ({peak} · {e})", m=f"M{i} / (BW · e_m)")

    s = step(component, term("") + fixed, at | {"F": op.flops, "M": op.bytes, "R": row_flops}, "s")
    if len(parts) < 2 or math.isclose(s.value, op.time_s, rel_tol=1e-9):
        return s
    terms = " + ".join(term(f"_{i + 1}") for i, _ in parts)
    per_type = {f"{x}_{i + 1}": cost[j] for i, cost in parts for j, x in enumerate("FMR")}
    return step(component, terms + fixed, at | per_type, "s")


def _latency(spec: ModelSpec, w: Workload, gpu: GPU, tm: TimeModel) -> ExplainReport:
    from llmcalc.costs.latency import latency
    from llmcalc.costs.parallel import collective_link
    from llmcalc.costs.step import step_costs
    from llmcalc.costs.step_time import attention_dtype, busiest_ranks, native_shares

    L, attn = w.layout, attention_dtype(w)
    r = latency(spec, gpu, w, tm)
    busiest = busiest_ranks(spec, w, tm)
    env = {"P": gpu.peak(w.compute_dtype), "P_a": gpu.peak(attn), "BW": gpu.bandwidth,
           "e_c": tm.matmul_efficiency(w.compute_dtype), "e_a": tm.attention_efficiency or tm.matmul_efficiency(attn),
           "e_m": tm.memory_efficiency, "e_x": tm.comm_efficiency, "e_o": tm.overlap, "r": tm.matmul_pad_rows}
    native = {op: {"P": gpu.peak(kind), "e_c": share} for op, (kind, share) in native_shares(spec, gpu, w, tm).items()}
    rep, steps = w.batch // L.dp, []
    for phase, costs, prefix in ((r.phases[0].phase, step_costs(spec, w, rep, w.seq, 0), "prefill/"),
                                 (r.phases[1].phase, step_costs(spec, w, rep, 1, w.seq), "decode/")):
        for op in (x for x in r.ops if x.phase == phase):
            entries = {k: c for k, c in costs.items() if k.name == op.op}
            entry = next(iter(entries))
            parts = [(k.group, c) for k, c in entries.items() if k.group is not None]
            rows = sum(c.row_flops for c in entries.values())
            at = env | {"link": collective_link(op.op, L, gpu).bytes_per_s} if entry.collective else env
            at = at | ({"b": busiest[entry]} if entry in busiest else {}) | native.get(op.op, {})
            steps.append(_op_step(prefix + op.op, op, parts, rows, at, entry))
        if tm.step_s:
            steps.append(step(f"{prefix}host", "t_step", {"t_step": tm.step_s}, "s"))
        if tm.request_s and prefix == "prefill/":
            steps.append(step(f"{prefix}request", "t_req", {"t_req": tm.request_s}, "s"))
        if w.images and prefix == "prefill/":  # the tower encodes each sequence's images before the prompt's step
            steps.append(step(f"{prefix}images", "R · I · t_img", {"R": rep, "I": w.images, "t_img": r.image_s}, "s"))
    ttft = sum_total("ttft", steps, "prefill/", r.ttft_s, "llmcalc latency: ttft_s")
    totals = [ttft, sum_total("tpot", steps, "decode/", r.tpot_s, "llmcalc latency: tpot_s"),
              checked(step("total", "ttft + t_decode", {"ttft": ttft.value, "t_decode": r.decode_s}, "s"),
                      r.total_s, "llmcalc latency: total_s")]
    conventions = {"gpu": gpu.name, "layout": f"tp {L.tp} · pp {L.pp} · dp {L.dp} · ep {L.ep}",
                   "weights_dtype": w.weights_dtype, "kv_dtype": w.kv_dtype, "compute_dtype": w.compute_dtype}
    if attn != w.compute_dtype:
        conventions["attention_dtype"] = attn
    if tm.name != "roofline":
        conventions["time_model"] = tm.name + (f" ({tm.gpu})" if tm.gpu else "")
    if spec.attention.latent_cache:
        conventions["mla_decode"] = w.mla_decode
    notes = ["F and M are each op's FLOPs and bytes on one GPU as `llmcalc latency` counts them (weights read, "
             "activations in and out, the KV cache; tensor-parallel shares rounded up): see docs/roofline.md",
             "prefill/* is the prefill (it emits the first token); decode/* is the first decode step (context S)"]
    if w.images:
        notes.append("prefill/images: the vision tower and projector encode each of the R sequences' I images "
                     "(t_img an image, `llmcalc latency`'s) before the prompt's step")
    if busiest:
        conventions["expert_skew"] = f"{w.routing_skew:g}"
        notes.append("b: the busiest expert-parallel rank's routed tokens over the mean rank's, which the routed "
                     "experts' FLOPs and the all-to-all's bytes are scaled by (docs/moe.md#expert-parallel-load)")
    if tm.fixed_costs:
        notes.append("e_o: the share of the smaller term an op does not overlap; O: its kernels' (or collective "
                     "calls') fixed cost; t_step: the host's cost per step; t_req: its cost per request, before the prefill; r: the rows a weight matmul pays for "
                     "beyond its tokens, R: the FLOPs of one row of the op's matmuls (the time model's profile)")
    return _report("latency", spec, w, steps, totals, conventions, notes, headline=2, gen=w.gen)


TOPICS = {"params": _params, "kv": _kv, "flops": _flops, "memory": _memory, "latency": _latency}
UNMODELLED = {
    "flops": {"recompute": "none", "mtp": False},
    "memory": {"flash": True, "recompute": "none", "dropout": False, "zero": 0, "micro_batch": None},
}
"""Per topic, the workload fields whose other values its worked steps do not write out, with the value they
assume."""
