"""`llmcalc explain`: the figures of params, kv, flops, memory and latency as formulas, each with its
symbols' values, the substituted arithmetic and the result, and totals checked against the plain
command's own figures (same spec, same workload).

params: per component, one layer's formula × L; kv: per window kind, 2·L·H_kv·h·B·S·bytes (MLA:
L·(r_kv + d_r)·B·S·bytes); flops: 2 · tokens · weights per matmul and pairs · per-pair cost for the
attention core, in prefill, one decode step and a training step; memory: weights, KV, activations
(and gradients, optimizer states); latency: per op max(F / (P·e_c), M / (BW·e_m)) summed per phase.
"""

from __future__ import annotations

import math
import re

from llmcalc.costs.flops import Conventions
from llmcalc.costs.parallel import Layout
from llmcalc.errors import UserError
from llmcalc.model.attention import MLA
from llmcalc.model.base import Frozen, PosInt
from llmcalc.model.ffn import Dense, Gated, MoE
from llmcalc.model.gpu import GPU
from llmcalc.model.spec import DTYPE_BITS, ModelSpec
from llmcalc.reports.explain import ExplainReport, ExplainStep, ExplainTotal
from llmcalc.views import sparse_formula
from llmcalc.views.formula import (
    LEGEND,
    attention_parts,
    checked,
    env_of,
    ffn_groups,
    ffn_parts,
    linear,
    mlp_formula,
    per_window,
    prod,
    step,
    sum_total,
    windows,
)


class ExplainOptions(Frozen):
    """Workload and conventions; gen None takes the command's default (flops 1, latency 256)."""

    batch: PosInt = 1
    seq: PosInt = 4096
    gen: PosInt | None = None
    kv_dtype: str = "bf16"
    weights_dtype: str = "bf16"
    conventions: Conventions = Conventions()
    train: bool = False
    optimizer: str = "adamw"
    gpu: GPU | None = None
    layout: Layout = Layout()


def explain(topic: str, spec: ModelSpec, o: ExplainOptions | None = None) -> ExplainReport:
    """The steps behind `llmcalc TOPIC` for `spec` under `o`, with totals checked against it."""
    o = o or ExplainOptions()
    if topic not in TOPICS:
        raise UserError(f"explain: unknown topic {topic!r}; give one of {', '.join(TOPICS)}")
    if topic == "latency" and o.gpu is None:
        raise UserError("--gpu: explain latency needs a GPU; give --gpu NAME (see `llmcalc gpus`)")
    return TOPICS[topic](spec, o)


def _report(topic: str, spec: ModelSpec, o: ExplainOptions, steps: list[ExplainStep], totals: list[ExplainTotal],
            conventions: dict[str, str], notes: list[str], headline: int = 0, gen: int | None = None) -> ExplainReport:
    used = {re.sub(r"_\d+$", "_i", n) for s in [*steps, *totals] for n in s.symbols}
    head, workload = totals[headline], topic != "params"
    return ExplainReport(
        topic=topic, model=spec.name, batch=o.batch if workload else None, seq=o.seq if workload else None,
        gen=gen, conventions=conventions, steps=steps, totals=totals, total=head.value, check=head.check,
        unit=head.unit, matches=all(t.matches for t in totals),
        legend={n: text for n, text in LEGEND.items() if n in used}, notes=notes)


# ---- params -----------------------------------------------------------------------------------

def _params(spec: ModelSpec, o: ExplainOptions) -> ExplainReport:
    from llmcalc.costs.params import params

    r, env, norm, steps = params(spec), env_of(spec) | {"L": spec.n_layers}, spec.norm, []

    def add(component: str, formula: str, at: dict = env, keep: bool = False) -> None:
        s = step(component, formula, at, "params")
        if s.value or keep:
            steps.append(s)

    add("embedding/token", "V · d")
    add("embedding/position", "S_max · d" if spec.positions.kind == "learned" else "0")
    for name, (p, _) in attention_parts(spec.attention).items():
        add(f"attention/{name}", prod("L", p))
    for prefix, (n, ffn) in ffn_groups(spec).items():
        for name, (p, _) in ffn_parts(ffn).items():
            add(prefix + name, prod("L", p), env_of(spec, ffn) | {"L": n})
    twice = (lambda x: prod("2", x)) if norm.bias else (lambda x: x)  # noqa: E731 - LayerNorm bias: 2n
    add("norms/layer", prod("L", "n_norm", twice("d")))
    qk = "(d_n + d_r)" if isinstance(spec.attention, MLA) else "h"
    if norm.qk_norm == "head":
        add("norms/qk", prod("L", "2", twice(qk)))
    elif norm.qk_norm == "full":
        k_width = f"H · {qk}" if isinstance(spec.attention, MLA) else "H_kv · h"
        add("norms/qk", prod("L", twice(f"H · {qk} + {k_width}")))
    add("norms/final", twice("d") if norm.final else "0")
    add("lm_head", ("V" if spec.lm_head_bias else "0") if spec.tie_embeddings else linear("d", "V", spec.lm_head_bias),
        keep=True)
    totals = [sum_total("total", steps, "", r.total, "llmcalc params: total")]
    moe = ffn_groups(spec).get("ffn/")
    if moe and isinstance(moe[1], MoE):
        ffn = moe[1]
        idle = prod("L", "E − k", mlp_formula("f", ffn.gated, ffn.expert_bias))
        at = env_of(spec, ffn) | {"L": moe[0], "N": r.total}
        totals.append(checked(step("active", f"N − {idle}", at, "params"), r.active, "llmcalc params: active"))
    notes = ["each component: one layer's count × the L layers that have it"]
    if spec.tie_embeddings:
        notes.append("tied head: it reuses embedding/token's matrix, counted once there")
    if spec.mtp_modules:
        notes.append("MTP modules are not in the total (see `llmcalc params`)")
    return _report("params", spec, o, steps, totals, {}, notes)


# ---- KV cache ---------------------------------------------------------------------------------

def kv_steps(spec: ModelSpec, batch: int, seq: int, dtype: str, prefix: str) -> list[ExplainStep]:
    """Per window kind: layers · B · tokens kept · elements per token · bytes (sub-byte: rounded up
    per layer, as kv.py's nbytes does)."""
    bits, gqa = DTYPE_BITS[dtype], not isinstance(spec.attention, MLA)
    env = env_of(spec) | {"B": batch, "S": seq, "bits": bits, "bytes": bits // 8}
    steps = []
    env |= sparse_formula.env(spec.attention, bits)
    for w, n in windows(spec).items():
        layers, kept = ("L_w", "min(S, W − 1)") if w else ("L", "S")
        at = env | {layers: n, "W": w or 0}
        if custom := sparse_formula.kv(spec.attention, layers, bits):
            formula = custom
        elif bits % 8 == 0:
            formula = prod(*(("2", layers, "H_kv", "h") if gqa else (layers, "(r_kv + d_r)")), "B", kept, "bytes")
        else:
            elements = ("2", "H_kv", "h") if gqa else ("(r_kv + d_r)",)
            formula = prod(layers, f"({prod(*elements, 'B', kept, 'bits')} + 7) // 8")
        steps.append(step(prefix + ("sliding" if w else "full"), formula, at, "bytes"))
    return steps


def _kv(spec: ModelSpec, o: ExplainOptions) -> ExplainReport:
    from llmcalc.costs.kv import kv_cache

    r = kv_cache(spec, o.batch, o.seq, o.kv_dtype)
    steps = kv_steps(spec, o.batch, o.seq, o.kv_dtype, "kv/")
    notes = ["MLA caches the latent and the shared RoPE key, r_kv + d_r elements per token and layer (no ×2)"
             if isinstance(spec.attention, MLA) else "each layer caches K and V: 2 · H_kv · h elements per token"]
    if spec.sliding_window:
        notes.append("a sliding-window layer keeps the last W − 1 tokens between steps (the next token makes W keys)")
    return _report("kv", spec, o, steps, [sum_total("total", steps, "kv/", r.total_bytes, "llmcalc kv: total_bytes")],
                   {"kv_dtype": o.kv_dtype}, notes)


# ---- FLOPs ------------------------------------------------------------------------------------

def _flops(spec: ModelSpec, o: ExplainOptions) -> ExplainReport:
    from llmcalc.costs.flops import flops

    c, gen, a = o.conventions, o.gen or 1, spec.attention
    conv = Conventions(attention=c.attention, logits=c.logits, mla_decode=c.mla_decode)
    r = flops(spec, o.batch, o.seq, gen, conv)
    mla = isinstance(a, MLA)
    env = env_of(spec) | {"B": o.batch, "S": o.seq, "L": spec.n_layers}
    steps = []
    for phase in ("prefill", "decode", "train"):
        lead = ["3"] if phase == "train" else []  # FWD_BWD: the backward costs two forwards
        tokens = ["B"] if phase == "decode" else ["B", "S"]
        absorbed = phase == "decode" and mla and conv.mla_decode == "absorbed"

        def pairs(sliding: bool) -> str:
            if custom := sparse_formula.pairs(a, phase, conv.attention):
                return custom
            if phase == "decode":
                return "min(S + 1, W)" if sliding else "S + 1"
            if conv.attention == "dense":
                return "S · S"
            return "min(S, W) · (min(S, W) + 1) // 2 + (S − min(S, W)) · W" if sliding else "S · (S + 1) // 2"

        def add(component: str, formula: str, at: dict = env) -> None:
            steps.append(step(f"{phase}/{component}", formula, at, "FLOPs"))

        for name, (_, w) in attention_parts(a).items():
            if w is None or (name == "kv_up" and absorbed):
                continue
            if name == "kv_up" and phase == "decode":  # decompress: re-project every cached latent
                add("attention/kv_up", *per_window(spec, lambda L, s: prod("2", L, "B", pairs(s), w), env))
            else:
                passes = [sparse_formula.train_lead(a, name)] if lead else []
                add(f"attention/{name}", prod(*passes, "2", "L", *tokens, w))
        if absorbed:
            add("attention/absorb_q", "2 · L · B · H · d_n · r_kv")
            add("attention/absorb_o", "2 · L · B · H · r_kv · d_v")
        per_pair = ({"core_scores": "2 · H · (r_kv + d_r)", "core_values": "2 · H · r_kv"} if absorbed else
                    {"core_scores": "2 · H · (d_n + d_r)", "core_values": "2 · H · d_v"} if mla else
                    {"core_scores": "2 · H · h", "core_values": "2 · H · h"})
        for name, cost in per_pair.items():
            add(f"attention/{name}", *per_window(spec, lambda L, s: prod(*lead, L, "B", pairs(s), cost), env))
        for name, term in sparse_formula.extra_core(a, phase, conv.attention).items():
            passes = [sparse_formula.train_lead(a, name)] if lead else []
            add(f"attention/{name}", prod(*passes, "L", "B", term))
        for prefix, (n, ffn) in ffn_groups(spec).items():
            for name, (_, w) in ffn_parts(ffn).items():
                add(prefix + name, prod(*lead, "2", "L", *tokens, w), env | env_of(spec, ffn) | {"L": n})
        logits = tokens if phase == "train" or conv.logits == "all" else ["B"]
        add("lm_head", prod(*lead, "2", *logits, "d", "V"))
        if phase != "train" and spec.positions.kind != "none":  # element-wise, apart from the totals above
            steps.append(step(f"positions/{phase}", *_positions(spec, tokens, pairs, env), "FLOPs"))
    totals = [sum_total(p, steps, f"{p}/", getattr(r, f"{p}_flops"), f"llmcalc flops: {p}_flops")
              for p in ("prefill", "decode", "train")]
    totals += [sum_total(f"positions/{p}", steps, f"positions/{p}", getattr(r.positions, p),
                         f"llmcalc flops: positions.{p}") for p in ("prefill", "decode")
               if spec.positions.kind != "none" and r.positions is not None]
    conventions = {"attention": conv.attention, "logits": conv.logits, "mla_decode": conv.mla_decode if mla else "n/a",
                   "train": "3 × forward, all logits"}
    notes = ["a multiply-add is 2 FLOPs: a matmul costs 2 · tokens · weights; element-wise work is not counted "
             "in these totals (positions/*: the position encoding's, reported apart)",
             "attention core: (query, key) pairs × per-pair cost; " + (
                 "causal: query i sees min(i, W) keys, S(S+1)/2 pairs in a full layer" if conv.attention == "causal"
                 else "dense: the full S × S, masked or not"),
             "decode: one new token per sequence, attending to S + 1 keys (min(S + 1, W) in a sliding layer)"]
    if mla:
        notes.append("MLA decode absorbed: W_UK folded into the query (absorb_q), W_UV into the output (absorb_o)"
                     if conv.mla_decode == "absorbed" else
                     "MLA decode decompress: kv_up re-projects every cached latent")
    return _report("flops", spec, o, steps, totals, conventions, notes, gen=gen)


def _positions(spec: ModelSpec, tokens: list[str], pairs, env: dict) -> tuple[str, dict]:
    """Position-encoding FLOPs of a phase (see llmcalc/costs/positions.py): RoPE 3 per rotated q/k element,
    ALiBi H per (query, key) pair, learned / sinusoidal d per token."""
    kind = spec.positions.kind
    if kind == "rope":
        rotated = sparse_formula.rotated(spec.attention) or (
            "(H + 1) · d_r" if isinstance(spec.attention, MLA) else "(H + H_kv) · 2 · (h // 2)")
        return prod("3", "L", *tokens, rotated), env
    if kind == "alibi":
        return per_window(spec, lambda L, s: prod(L, "B", pairs(s), "H"), env)
    return prod(*tokens, "d"), env


# ---- memory -----------------------------------------------------------------------------------

def _saved(ffn) -> str:
    """Elements one training layer's FFN keeps per token for the backward pass."""
    if isinstance(ffn, (Dense, Gated)):
        return "3 · f" if isinstance(ffn, Gated) else "2 · f"
    per = 3 if ffn.gated else 2
    return (f"{per} · (k · f + n_s · f_s) + E" if ffn.shared_experts else f"{per} · k · f + E")


def _memory(spec: ModelSpec, o: ExplainOptions) -> ExplainReport:
    from llmcalc.costs.memory import (
        OPTIMIZER_BYTES,
        QUANTIZED,
        MemoryOptions,
        layer_peak_per_token,
        memory,
        packed_matrices,
    )
    from llmcalc.costs.params import params

    mo = MemoryOptions(weights_dtype=o.weights_dtype, kv_dtype=o.kv_dtype, train=o.train, optimizer=o.optimizer)
    r, counts = memory(spec, o.batch, o.seq, mo), params(spec)
    bits, a = DTYPE_BITS[o.weights_dtype], spec.attention
    env = env_of(spec) | {"B": o.batch, "S": o.seq, "N": counts.total, "bits": bits, "bytes": bits // 8,
                          "a": DTYPE_BITS[mo.act_dtype] // 8, "g": mo.group_size}
    if o.weights_dtype in QUANTIZED:  # layer matrices packed (int4: + an fp16 scale per g inputs), the rest bf16
        n_m, p_m, scales = packed_matrices(spec, o.weights_dtype, mo.group_size)
        env |= {"N_m": n_m, "P_m": p_m, "G_s": scales}
        steps = [step("weights", "P_m + 2 · G_s + 2 · (N − N_m)", env, "bytes")]
    else:
        steps = [step("weights", "N · bytes", env, "bytes")]
    mla = isinstance(a, MLA)
    if not o.train:
        steps += kv_steps(spec, o.batch, o.seq, o.kv_dtype, "kv_cache/")
        m, what = layer_peak_per_token(spec, o.seq, mo)
        rot = a.rope_dim - a.rope_dim % 2 if spec.positions.kind == "rope" else 0
        at = env | {"m": m, "d_rot": rot}
        peak = "S · (8 + 2 · a · d_rot) + max(B · S · (2 · a · d + m), a · B · S · d + B · (a · d + (a + 4) · V))"
        steps.append(step("activations", peak, at, "bytes"))
        notes = ["activations: the prefill peak (docs/formulas.md#inference-peak): the residual stream and the "
                 f"normed input (2·a·d per token) plus the largest layer stage, m bytes per token (here the {what}'s), "
                 "or at the head the last positions' logits in the activation dtype and in fp32; plus per position "
                 "its index (int64) and RoPE's cos and sin; flash attention"]
    else:
        master = "master + states" if o.weights_dtype != "fp32" else "states"
        at = env | {"master": 4, "states": OPTIMIZER_BYTES[o.optimizer]}
        steps += [step("gradients", "N · bytes", env, "bytes"), step("optimizer", prod("N", master), at, "bytes")]
        w_attn = (("d + r_q" if a.q_lora_rank else "d") + " + r_kv + 2 · H · (d_n + d_r) + 2 · H · d_v" if mla
                  else "d + 2 · H · h + 2 · H_kv · h") + sparse_formula.saved(a)
        for prefix, (n, ffn) in ffn_groups(spec).items():
            kept = prod("a", "B", "S", f"{w_attn} + d + {_saved(ffn)} + n_norm · d")
            name = prefix.replace("ffn/", "activations/") + "layers"
            at = env | env_of(spec, ffn) | {"L": n}
            steps.append(step(name, prod("L", f"{kept} + 4 · B · H · S"), at, "bytes"))
        steps.append(step("activations/logits", "4 · B · S · V", env, "bytes"))
        notes = ["mixed precision: weights and gradients in the weights dtype, an fp32 master copy and the optimizer "
                 "states; no ZeRO sharding", "activations per layer: every matmul's input, Q/K/V, the FFN "
                 "intermediates, the norm inputs, and flash attention's fp32 log-sum-exp (4·B·H·S); no recompute, "
                 "no dropout; + the fp32 logits (4·B·S·V)"]
    conventions = {"mode": r.mode, "weights_dtype": o.weights_dtype, "activations": f"{mo.act_dtype}, flash attention"}
    conventions |= {"optimizer": o.optimizer} if o.train else {"kv_dtype": o.kv_dtype}
    totals = [sum_total("total", steps, "", r.total_bytes, "llmcalc memory: total_bytes")]
    return _report("memory", spec, o, steps, totals, conventions, notes)


# ---- latency ----------------------------------------------------------------------------------

ROOF = "max({F} / (P · e_c), {M} / (BW · e_m))"


def _op_step(component: str, op, parts: list[tuple[int, list]], env: dict) -> ExplainStep:
    """One op of one phase: the roofline of its summed FLOPs and bytes; when its layer types are
    bound differently, one roofline term per layer type (as `llmcalc latency` sums them)."""
    if op.op.startswith("comm/"):
        return step(component, "M / (link · e_x)", env | {"M": op.bytes}, "s")
    s = step(component, ROOF.format(F="F", M="M"), env | {"F": op.flops, "M": op.bytes}, "s")
    if len(parts) < 2 or math.isclose(s.value, op.time_s, rel_tol=1e-9):
        return s
    terms = " + ".join(ROOF.format(F=f"F_{i + 1}", M=f"M_{i + 1}") for i, _ in parts)
    per_type = {f"{x}_{i + 1}": cost[j] for i, cost in parts for j, x in enumerate("FM")}
    return step(component, terms, env | per_type, "s")


def _latency(spec: ModelSpec, o: ExplainOptions) -> ExplainReport:
    from llmcalc.costs.latency import LatencyOptions, latency, step_costs
    from llmcalc.costs.shard import Storage

    gen, gpu, L = o.gen or 256, o.gpu, o.layout
    lo = LatencyOptions(storage=Storage(weights_dtype=o.weights_dtype, kv_dtype=o.kv_dtype), layout=L,
                        mla_decode=o.conventions.mla_decode)
    r = latency(spec, gpu, o.batch, o.seq, gen, lo)
    env = {"P": gpu.peak(lo.compute_dtype), "BW": gpu.bandwidth, "link": gpu.link_one_way,
           "e_c": lo.compute_efficiency, "e_m": lo.memory_efficiency, "e_x": lo.comm_efficiency}
    rep, steps = o.batch // L.dp, []
    for phase, costs, prefix in ((r.phases[0].phase, step_costs(spec, lo, rep, o.seq, 0), "prefill/"),
                                 (r.phases[1].phase, step_costs(spec, lo, rep, 1, o.seq), "decode/")):
        for op in (x for x in r.ops if x.phase == phase):
            parts = [(k[0], c) for k, c in costs.items() if k[1] == op.op and k[0] is not None]
            steps.append(_op_step(prefix + op.op, op, parts, env))
    ttft = sum_total("ttft", steps, "prefill/", r.ttft_s, "llmcalc latency: ttft_s")
    totals = [ttft, sum_total("tpot", steps, "decode/", r.tpot_s, "llmcalc latency: tpot_s"),
              checked(step("total", "ttft + t_decode", {"ttft": ttft.value, "t_decode": r.decode_s}, "s"),
                      r.total_s, "llmcalc latency: total_s")]
    conventions = {"gpu": gpu.name, "layout": f"tp {L.tp} · pp {L.pp} · dp {L.dp} · ep {L.ep}",
                   "weights_dtype": o.weights_dtype, "kv_dtype": o.kv_dtype, "compute_dtype": lo.compute_dtype}
    if isinstance(spec.attention, MLA):
        conventions["mla_decode"] = lo.mla_decode
    notes = ["F and M are each op's FLOPs and bytes on one GPU as `llmcalc latency` counts them (weights read, "
             "activations in and out, the KV cache; tensor-parallel shares rounded up): see docs/roofline.md",
             "prefill/* is the prefill (it emits the first token); decode/* is the first decode step (context S)"]
    return _report("latency", spec, o, steps, totals, conventions, notes, headline=2, gen=gen)


TOPICS = {"params": _params, "kv": _kv, "flops": _flops, "memory": _memory, "latency": _latency}
