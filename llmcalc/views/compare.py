"""Side-by-side costs: one model with its attention swapped, or several models on one workload.

Attention swap rule (`llmcalc compare gqa mla`): keep the base's query heads H and head dim d_h
(H·d_h fixed); MHA caches H kv heads, GQA n_g (--groups, else the base's when it is grouped, else
8 or the largest divisor of H below it), MQA one; MLA uses DeepSeek-V2's ratios d_c = 4·d_h and
d_r = d_h/2 with d_nope = d_v = d_h and no query compression unless given; SWA keeps the base's
attention and makes every layer a sliding window. Everything else of the base is kept.
KV elements per token (DeepSeek-V2, Table 1): MHA 2·n_h·d_h·l, GQA 2·n_g·d_h·l, MQA 2·d_h·l,
MLA (d_c + d_r)·l.
"""

from __future__ import annotations

from pydantic import model_validator

from llmcalc.costs.flops import flops
from llmcalc.costs.kv import kv_cache, mixer_layers
from llmcalc.costs.memory import memory
from llmcalc.costs.params import params
from llmcalc.errors import Unread, UserError
from llmcalc.model.base import Frozen
from llmcalc.model.gpu import GPU
from llmcalc.model.spec import ModelSpec
from llmcalc.model.time_model import ROOFLINE, TimeModel
from llmcalc.reports.compare import CompareReport, CompareRow
from llmcalc.workload import Layout, Whole, Workload, require_sizes

VARIANTS = ("mha", "gqa", "mqa", "mla", "swa", "longformer", "linformer", "reformer", "dsa", "mamba2", "gdn")
"""Attention families `compare` can swap in; mha is always computed as the reference."""
RULE = ("same model, attention swapped: H and d_h kept; GQA n_g kv heads; MQA 1; MLA d_c = 4·d_h, "
        "d_r = d_h/2, d_nope = d_v = d_h; SWA: every layer a sliding window; longformer, linformer, reformer, "
        "dsa, mamba2, gdn: docs/compare.md")
FORMULA = ("KV elements/token: MHA 2·n_h·d_h·l, GQA 2·n_g·d_h·l, MQA 2·d_h·l, MLA (d_c + d_r)·l; "
           "KV cache = B·min(S, window − 1)·elements·bytes; decode bytes = weights read + KV read and written")


REFORMER_HASHES, REFORMER_CHUNK = 4, 64
"""Reformer's swap: 4 hash rounds (the paper's usual setting) and chunks of 64 (its bucket size)."""


class SwapRule(Frozen):
    """The knobs of the attention swap rule (the module's docstring); None: the rule's default."""

    groups: Whole | None = None
    """GQA kv heads."""
    kv_lora_rank: Whole | None = None
    """MLA latent d_c (default 4·d_h)."""
    rope_dim: Whole | None = None
    """MLA decoupled RoPE dim d_r (default d_h/2)."""
    q_lora_rank: Whole | None = None
    """MLA query latent (default: none)."""
    window: Whole = 4096
    """SWA and Longformer window in tokens."""
    global_tokens: Whole = 64
    """Longformer global tokens (the first positions)."""
    topk: Whole = 2048
    """DSA keys each query attends to."""
    proj_len: Whole = 256
    """Linformer projected length k."""
    state_size: Whole = 128
    """Mamba-2 state size N (Mamba-2's and Codestral Mamba's 128)."""

    @model_validator(mode="after")
    def _sizes(self) -> SwapRule:
        require_sizes(**{k: v for k, v in self if k != "global_tokens"})
        if self.global_tokens < 0:
            raise UserError(f"`global_tokens`: must be ≥ 0 (got {self.global_tokens}); give 0 or more")
        return self


READ_BY = {"groups": ("gqa",), "kv_lora_rank": ("mla", "dsa"), "rope_dim": ("mla", "dsa"),
           "q_lora_rank": ("mla", "dsa"), "window": ("swa", "longformer"), "global_tokens": ("longformer",),
           "topk": ("dsa",), "proj_len": ("linformer",), "state_size": ("mamba2",)}
"""The variants that read each SwapRule field (attention_variant)."""


def check_read(rule: SwapRule, variants: list[str]) -> None:
    """Refuse a field of `rule` given (set, not defaulted) that none of `variants` reads: it would change nothing."""
    for field in sorted(rule.model_fields_set):
        if not set(READ_BY[field]) & set(variants):
            raise Unread(field, f"`{field}`: no variant compared reads it ({', '.join(variants)}); add "
                            f"{' or '.join(READ_BY[field])}, or leave it out")


def default_groups(spec: ModelSpec, o: SwapRule) -> int:
    """GQA kv heads: `groups`; else the base's when grouped (1 < H_kv < H); else the largest
    divisor of H that is at most 8 (Llama-2-70B and Llama-3 use 8)."""
    h, kv = spec.attention.heads, spec.attention.gqa_shape()["kv_heads"]
    if o.groups is not None:
        if h % o.groups:
            raise UserError(f"`groups`: {o.groups} does not divide the {h} heads; use a divisor of {h}")
        return o.groups
    if 1 < kv < h:
        return kv
    return max(g for g in range(1, min(8, h) + 1) if h % g == 0)


def attention_variant(spec: ModelSpec, variant: str, o: SwapRule = SwapRule()) -> ModelSpec:
    """`spec` with its attention swapped for `variant` under the rule above (validated anew): the base's GQA
    shape (its gqa_shape: H, d_h, biases) in every GQA-based variant, its own fields for MLA when it is latent."""
    a, base = spec.attention, spec.attention.gqa_shape()
    h, dh = base["heads"], base["head_dim"]
    plain = {k: base[k] for k in ("heads", "head_dim", "qkv_bias", "o_bias")}  # no sinks, kv heads set below
    data = spec.model_dump()
    if variant in ("mha", "gqa", "mqa"):
        kv = {"mha": h, "mqa": 1, "gqa": default_groups(spec, o)}[variant]
        data["attention"] = {"kind": "gqa", "kv_heads": kv} | plain
    elif variant == "mla":
        if (latent := a.mla_shape()) is not None and not (o.kv_lora_rank or o.rope_dim or o.q_lora_rank):
            data["attention"] = latent
        else:
            rope = o.rope_dim or dh // 2
            if not rope:
                raise UserError(f"`rope_dim`: d_h/2 is 0 for head dim {dh}; give `rope_dim`")
            data["attention"] = {"kind": "mla", "heads": h, "q_lora_rank": o.q_lora_rank,
                                 "kv_lora_rank": o.kv_lora_rank or 4 * dh, "qk_nope_head_dim": dh,
                                 "qk_rope_head_dim": rope, "v_head_dim": dh}
    elif variant == "swa":
        _every_layer(data, spec, o.window)
    elif variant in ("longformer", "linformer"):
        data["attention"] = base | ({"kind": "longformer", "window": o.window, "global_tokens": o.global_tokens}
                                    if variant == "longformer" else
                                    {"kind": "linformer", "proj_len": o.proj_len, "max_len": spec.max_seq_len})
        _every_layer(data, spec, None)
    elif variant == "reformer":
        buckets = min(256, max(2, spec.max_seq_len // REFORMER_CHUNK // 2 * 2))
        data["attention"] = plain | {"kind": "reformer", "kv_heads": h, "n_hashes": REFORMER_HASHES,
                                     "n_buckets": buckets, "chunk_len": REFORMER_CHUNK}
        _every_layer(data, spec, None)
    elif variant == "dsa":
        mla = attention_variant(spec, "mla", o).attention.model_dump(exclude={"kind"})
        mla["q_lora_rank"] = mla["q_lora_rank"] or 12 * dh  # DeepSeek-V3: 1536 = 12·128
        for key in ("index_heads", "index_head_dim", "index_topk", "index_cache_dtype"):
            mla.pop(key, None)
        data["attention"] = mla | {"kind": "dsa", "index_heads": max(1, h // 2),
                                   "index_head_dim": max(dh, mla["qk_rope_head_dim"]), "index_topk": o.topk}
        _every_layer(data, spec, None)
    elif variant in ("mamba2", "gdn"):  # H heads of d_h; the base's kv heads share B and C (Mamba-2) or q and k
        kv = base["kv_heads"]
        data["attention"] = ({"kind": "mamba2", "heads": h, "head_dim": dh, "state_size": o.state_size,
                              "groups": kv, "conv_kernel": 4, "chunk_size": 256} if variant == "mamba2" else
                             {"kind": "gated_deltanet", "key_heads": kv, "value_heads": h, "key_head_dim": dh,
                              "value_head_dim": dh, "conv_kernel": 4})
        _every_layer(data, spec, None)
    else:
        raise UserError(f"`attention`: unknown variant {variant!r}; use any of {', '.join(VARIANTS)}")
    data["name"] = f"{spec.name} [{variant}]"
    from llmcalc.inputs.presets import spec_from_data

    return spec_from_data(data, f"compare {variant} (from {spec.name})")  # out-of-bounds sizes: a UserError


def _every_layer(data: dict, spec: ModelSpec, window: int | None) -> None:
    """Make every attention layer sliding over `window` tokens, or full (None): a uniform model's layer_pattern,
    a hybrid's attention slots (its Mamba-2 or DeltaNet layers kept as they are)."""
    if spec.hybrid:
        data["hybrid_pattern"] = [slot | {"mixer": "sliding" if window else "attention"}
                                  if slot["mixer"] in ("attention", "sliding") else slot
                                  for slot in data["hybrid_pattern"]]
    else:
        data["layer_pattern"] = ["sliding" if window else "full"]
    data["sliding_window"] = window


def _row(spec: ModelSpec, name: str, w: Workload, gpu: GPU | None, tm: TimeModel, reference: dict | None,
         notes: list[str], refused: list[UserError]) -> CompareRow:
    """Every figure of one model on the workload, the whole model's but the latency rows (on the workload's
    layout); ratios to `reference` (a row's dump). A model whose weights do not fit on one GPU gets no
    latency (fits false) and a note; one the layout does not divide too, its refusal kept in `refused`."""
    from llmcalc.costs.latency import latency
    from llmcalc.costs.step import step_costs

    whole = w.model_copy(update={"layout": Layout()})
    p = params(spec)
    kv = kv_cache(spec, w)
    fl = flops(spec, w)
    decode, longer = (step_costs(spec, whole, w.batch, 1, c) for c in (w.seq, w.seq + 1))
    mixers: dict[str, tuple] = {}  # mixer path → (mixer, layers): a hybrid's attention and recurrent layers apart
    for (path, _), (m, n) in mixer_layers(spec).items():
        mixers[path] = (m, mixers[path][1] + n if path in mixers else n)
    formula = " + ".join("{0}·l = {1}·{2}".format(*m.kv_formula(), n) for m, n in mixers.values())
    elements = sum(n * m.kv_elements() for m, n in mixers.values() if not m.fixed_state)
    fields = dict(
        name=name, model=spec.name, attention=" + ".join(m.label for m, _ in mixers.values()), ffn=spec.ffn.label,
        layers=f"{spec.n_layers}" + (f" (sliding {spec.sliding_window})" if spec.sliding_window else "")
        + (" (" + ", ".join(f"{n} {path}" for path, (_, n) in mixers.items()) + ")" if spec.hybrid else ""),
        attention_params=sum(r.params for r in p.breakdown if r.component.startswith("attention/")),
        total_params=p.total, active_params=p.active,
        kv_formula=formula, kv_elements_per_token=elements, kv_bytes_per_token=kv.bytes_per_token,
        state_bytes_per_sequence=kv.state_bytes_per_sequence,
        kv_cache_bytes=kv.total_bytes, prefill_flops=fl.prefill_flops, decode_flops=fl.decode_flops,
        decode_bytes=_moved(decode), decode_flops_per_context=_computed(longer) - _computed(decode),
        decode_bytes_per_context=_moved(longer) - _moved(decode),
        memory_bytes=memory(spec, whole).total_bytes,
    )
    if gpu is not None:
        try:
            w.layout.check(spec, w.batch)
        except UserError as e:
            refused.append(e)
        try:
            lat = latency(spec, gpu, w, tm)
            fields |= dict(ttft_s=lat.ttft_s, tpot_s=lat.tpot_s, tokens_per_s=lat.tokens_per_s, fits=lat.fits)
        except UserError as e:
            fields["fits"] = False
            L = w.layout
            notes.append(f"{name}: no latency on {L.gpus} × {gpu.name} (tp {L.tp}, pp {L.pp}, dp {L.dp}, ep {L.ep}): "
                         f"{str(e).partition(': ')[2]}")
    ref = reference or fields
    ratios = {k: v / ref[k] for k, v in fields.items()
              if isinstance(v, (int, float)) and not isinstance(v, bool) and ref.get(k)}
    return CompareRow(**fields, ratios=ratios)


def _moved(costs: dict) -> int:
    """Bytes of a step's entries on one GPU, communication aside."""
    return sum(c.bytes for op, c in costs.items() if not op.collective)


def _computed(costs: dict) -> int:
    """FLOPs of a step's entries."""
    return sum(c[0] for c in costs.values())


def _report(mode: str, rows: list[CompareRow], base: str | None, w: Workload, gpu: GPU | None,
            rule: str, notes: list[str]) -> CompareReport:
    return CompareReport(
        mode=mode, base=base, reference=rows[0].name, batch=w.batch, seq=w.seq, gen=w.gen,
        weights_dtype=w.weights_dtype, kv_dtype=w.kv_dtype, gpu=gpu.name if gpu else None, rule=rule,
        conventions={"attention": w.attention_core, "logits": w.logits, "mla_decode": w.mla_decode,
                     "decode": f"one step with {w.seq:,} tokens cached"},
        rows=rows, formula=FORMULA, notes=notes + _layout_note(w.layout, gpu),
    )


def _layout_note(L: Layout, gpu: GPU | None) -> list[str]:
    if gpu is None:
        return []
    return [f"latency rows on {L.gpus} × {gpu.name} (tp {L.tp}, pp {L.pp}, dp {L.dp}, ep {L.ep}), as `llmcalc "
            "latency`; every other row is the whole model"]


def _variant_notes(spec: ModelSpec, o: SwapRule) -> dict[str, str]:
    """What each swapped-in variant is, with the options that shape it."""
    return {
        "gqa": f"GQA uses {default_groups(spec, o)} kv heads" + ("" if o.groups else " (set `groups`)"),
        "swa": f"SWA: every layer attends to the last {o.window:,} tokens (set `window`); its KV per token holds "
               "until the window fills, its cache stops growing after",
        "longformer": f"Longformer: each query sees its last {o.window:,} tokens (`window`) and the first "
                      f"{o.global_tokens:,} (`global_tokens`); its cache keeps window − 1 + global tokens",
        "linformer": f"Linformer: K and V projected to {o.proj_len:,} rows (`proj_len`) over {spec.max_seq_len:,} "
                     "positions; the prompt is bidirectional, decode updates the rows; its cache is the rows",
        "reformer": f"Reformer: shared-QK LSH attention, {REFORMER_HASHES} hash rounds, chunks of {REFORMER_CHUNK}: "
                    f"each query computes min(S, {2 * REFORMER_CHUNK}) keys per round; the cache keeps every token",
        "dsa": f"DSA: MLA over the top {o.topk:,} keys (`topk`) a lightning indexer of H/2 heads picks; the indexer "
               "scores every earlier key and caches its own d_h-wide key per token",
        "mamba2": f"Mamba-2: H heads of d_h, state {o.state_size} (`state_size`), the base's kv heads as groups of B "
                  "and C, conv 4, chunks of 256; its cache is one state per sequence (state_bytes_per_sequence, "
                  "the SSM part in fp32; nothing per token), and a decode step costs the same at any context "
                  "(decode_*_per_context 0)",
        "gdn": "Gated DeltaNet: H value heads and the base's kv heads as query/key heads, all of d_h, conv 4, chunks "
               "of 64; its cache is one state per sequence (state_bytes_per_sequence; nothing per token), and a "
               "decode step costs the same at any context (decode_*_per_context 0)",
    }


def compare_attention(spec: ModelSpec, variants: list[str], w: Workload, rule: SwapRule = SwapRule(),
                      gpu: GPU | None = None, tm: TimeModel = ROOFLINE) -> CompareReport:
    """`spec` under each attention variant (swapped by `rule`) on the workload, MHA first as the reference
    for every ratio; latency rows on `gpu` under the time model `tm`. A variant the model's other parts refuse
    (relative positions under MLA) is left out with a note."""
    spec.stack.check_decoding("model")
    twice = next((v for i, v in enumerate(variants) if v in variants[:i]), None)
    if twice is not None:  # as a model given twice is
        raise UserError(f"`attention`: the variant {twice!r} is given twice; give each variant once")
    wanted = ["mha"] + [v for v in variants if v != "mha"]
    check_read(rule, wanted)
    specs, notes = {"mha": attention_variant(spec, "mha", rule)}, []
    for v in wanted[1:]:
        try:
            specs[v] = attention_variant(spec, v, rule)
        except UserError as e:
            refusal = str(e).partition(": ")[2]
            if not refusal.startswith("positions."):  # a bad rule or variant stays an error
                raise
            notes.append(f"{v}: left out: {refusal}")
    refused: list[UserError] = []
    ref = _row(specs["mha"], "mha", w, gpu, tm, None, notes, refused)
    rows = [ref] + [_row(s, v, w, gpu, tm, ref.model_dump(), notes, refused) for v, s in specs.items() if v != "mha"]
    _some_divided(rows, refused)
    explained = _variant_notes(spec, rule)
    notes += [explained[v] for v in wanted if v in explained]
    if "mha" not in variants:
        notes.append("MHA is shown as the reference for the ratios")
    if spec.hybrid:
        kept = {g.mixer_name: 0 for g in spec.layer_groups() if g.mixer_name != "attention"}
        for g in spec.layer_groups():
            if g.mixer_name in kept:
                kept[g.mixer_name] += g.count
        swapped = spec.n_layers - sum(kept.values()) - sum(g.count for g in spec.layer_groups() if g.mixer is None)
        notes.append(f"hybrid base: the swap replaces the mixer of its {swapped} attention layers; "
                     + ", ".join(f"its {n} {path} layers" for path, n in kept.items()) + " stay as they are")
    return _report("attention", rows, spec.name, w, gpu, RULE, notes)


def compare_models(specs: list[ModelSpec], w: Workload, gpu: GPU | None = None,
                   tm: TimeModel = ROOFLINE) -> CompareReport:
    """Several models on one workload; ratios to the first; latency rows on `gpu` under the time model `tm`."""
    names = [s.name for s in specs]
    twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if twice is not None:
        raise UserError(f"compare: the model {twice!r} is given twice (`preset`, `config`, `hf_config` and `hf_model` "
                        "each name a model here); give each model once")
    for spec in specs:
        try:
            spec.stack.check_decoding("model")
        except UserError as e:  # which of the models it is
            raise UserError(f"compare {spec.name}: {e}") from None
    notes: list[str] = []
    refused: list[UserError] = []
    ref = _row(specs[0], specs[0].name, w, gpu, tm, None, notes, refused)
    rows = [ref] + [_row(s, s.name, w, gpu, tm, ref.model_dump(), notes, refused) for s in specs[1:]]
    _some_divided(rows, refused)
    return _report("models", rows, None, w, gpu, f"ratios to {specs[0].name}", notes)


def _some_divided(rows: list[CompareRow], refused: list[UserError]) -> None:
    """A layout that divides none of the rows' models is the user's to fix: its first refusal (one that divides
    some is a note on each of the others)."""
    if refused and len(refused) == len(rows):
        raise refused[0]

