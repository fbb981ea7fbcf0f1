"""FLOPs of prefill, decode, generation and a training step. See docs/formulas.md#flops.

A multiply-add is 2 FLOPs. Matmuls: 2 · tokens · weights. Attention core: (query, key) pairs ·
per-pair cost (scores and weighted values). Element-wise work (norms, softmax, activations, RoPE,
biases) is not counted, as in Megatron-LM, PaLM and torch's FlopCounterMode.

  prefill  = Σ_layers [2·B·S·W_layer + pairs(S)·c_pair] + 2·B·n_logits·d·V
  decode   = Σ_layers [2·B·W_layer + B·keys·c_pair] + 2·B·d·V,   keys = min(S+1, window)
  generate = Σ_{t<G} decode(context S+t)
  train    = 3 · forward(B·S tokens, all logits) + recomputed forward work
  LoRA     = 2 · frozen matmuls + 3 · attention core + 3 · adapters' forward (+ recompute)
"""

from __future__ import annotations

from collections import defaultdict
from functools import partial

from llmcalc.costs.lora import adapters
from llmcalc.costs.positions import NOTE as POSITIONS_NOTE
from llmcalc.costs.positions import position_flops
from llmcalc.model.attention import Parts
from llmcalc.model.spec import LayerGroup, ModelSpec
from llmcalc.reports.flops import FlopsReport, FlopsRow
from llmcalc.workload import Workload

FORMULA = ("prefill = Σ_layers[2·B·S·W + B·pairs(S)·c_pair] + 2·B·n_logits·d·V; "
           "decode = Σ_layers[2·B·W + B·min(S+1, window)·c_pair] + 2·B·d·V; generate = Σ_{t<G} decode(S+t); "
           "train = 3·forward(all logits) + recompute")
MAC = 2
"""FLOPs per multiply-add."""
FWD_BWD = 3
"""Forward + backward: the backward pass costs two forwards (gradients for inputs and weights)."""
FROZEN = 2
"""Forward + backward of a frozen weight's matmul whose input gradient flows (LoRA): the input gradient only."""
LORA_FORMULA = ("train (LoRA) = 2·forward(frozen matmuls) + 3·attention core + 3·forward(adapters) + recompute; "
                "adapter forward = 2·tokens·r·(d_in + d_out) per adapted matrix")


def layer_flops(spec: ModelSpec, group: LayerGroup, tokens: int, pairs: int, latents: int,
                absorbed: bool, core: Parts | None = None) -> dict[str, int]:
    """One layer of `group`: `tokens` new tokens, `pairs` (query, key) pairs, `latents` cached latents
    that the attention's `reprojected` projections (MLA: kv_up) re-project (decompress decode; prefill
    passes its new tokens). `core`, when given, is the attention core's FLOPs by component (the block's
    own `core`), used instead of pairs × per-pair cost."""
    attn, d, path = group.mixer, spec.d_model, group.mixer_name
    out = {}
    if attn is not None:
        for name, w in attn.matmuls(d).items():
            n = latents if name in attn.reprojected else tokens
            out[f"{path}/{name}"] = MAC * n * w
        if absorbed:
            out |= {f"{path}/{k}": MAC * tokens * w for k, w in attn.absorbed_matmuls().items()}
        if core is None:
            core = {k: pairs * c for k, c in attn.core_per_pair(absorbed).items()}
        out |= {f"{path}/{k}": c for k, c in core.items()}
    prefix = spec.ffn_prefix(group)
    out |= {prefix + k: MAC * tokens * w for k, w in group.ffn.matmuls(d).items()}
    return out


def forward(spec: ModelSpec, batch: int, *, new: int, core_of, latents_of, absorbed: bool,
            logits: int, mtp: bool) -> dict[str, int]:
    """Whole-model forward FLOPs by component. core_of(mixer, window) gives one sequence's core FLOPs of a
    layer's mixer by component and latents_of(window) its cached latents the attention re-projects."""
    total: dict[str, int] = defaultdict(int)
    tokens = batch * new

    def core(g: LayerGroup) -> Parts:
        return {k: batch * v for k, v in core_of(g.mixer, g.window).items()} if g.mixer is not None else {}

    for g in spec.layer_groups():
        for k, v in layer_flops(spec, g, tokens, 0, batch * latents_of(g.window), absorbed, core(g)).items():
            total[k] += g.count * v
    head = MAC * batch * logits * spec.d_model * spec.vocab_size
    total["lm_head"] += head
    if mtp and spec.mtp_modules:
        last = spec.layer_groups()[-1]
        layer = layer_flops(spec, last, tokens, 0, batch * latents_of(last.window), absorbed, core(last))
        for k, v in layer.items():
            total[f"mtp/{k}"] += spec.mtp_modules * v
        total["mtp/projection"] += spec.mtp_modules * MAC * tokens * 2 * spec.d_model * spec.d_model
        total["mtp/lm_head"] += spec.mtp_modules * head
    return dict(total)


def adapter_forward(spec: ModelSpec, w: Workload) -> dict[str, int]:
    """Forward FLOPs of the LoRA adapters over the B·S tokens of a training step, by component (lora/attention/q,
    lora/ffn/experts): 2 · tokens · used · r · (d_in + d_out) per adapted matrix kind (A, then B)."""
    out: dict[str, int] = defaultdict(int)
    tokens = w.batch * w.seq
    for count, path, a in adapters(spec, w):
        out[f"lora/{path}"] += count * MAC * tokens * a.weights_per_token(w.lora_rank)
    return dict(out)


def flops(spec: ModelSpec, w: Workload) -> FlopsReport:
    """Prefill of `batch` sequences of `seq` tokens, one decode step, `gen` decode steps and a training step,
    by component, under the workload's conventions (attention, logits, mla_decode, recompute, mtp)."""
    attn, batch, seq, gen = spec.attention, w.batch, w.seq, w.gen
    absorbed = attn.latent_cache and w.mla_decode == "absorbed"
    decompress = attn.latent_cache and not absorbed

    def prefill_like(logits: int) -> dict[str, int]:
        return forward(spec, batch, new=seq, core_of=lambda a, win: a.core(seq, 0, win, w.attention_core),
                       latents_of=lambda win: seq, absorbed=False, logits=logits, mtp=w.mtp)

    prefill = prefill_like(seq if w.logits == "all" else 1)
    keys = lambda win: attn.pairs(1, seq, win)  # noqa: E731 - decode attends to (and re-projects) these
    decode = forward(spec, batch, new=1, core_of=lambda a, win: a.core(1, seq, win, "causal", absorbed),
                     latents_of=keys if decompress else lambda win: 0, absorbed=absorbed, logits=1, mtp=w.mtp)
    steps = lambda win: attn.pairs(gen, seq, win)  # noqa: E731
    generate = forward(spec, batch, new=gen, core_of=lambda a, win: a.core(gen, seq, win, "causal", absorbed),
                       latents_of=steps if decompress else lambda win: 0, absorbed=absorbed, logits=gen, mtp=w.mtp)
    fwd = prefill_like(seq)
    passes = partial(_frozen_passes, spec) if w.lora else partial(_passes, spec)
    lora = adapter_forward(spec, w) if w.lora else {}
    train = {k: passes(k) * v + _recomputed(k, v, w.recompute) for k, v in fwd.items()}
    train |= {k: FWD_BWD * v + _recomputed(k, v, w.recompute) for k, v in lora.items()}
    rows = [FlopsRow(component=k, prefill=prefill.get(k, 0), decode=decode.get(k, 0),
                     generate=generate.get(k, 0), train=train[k]) for k in fwd]
    rows += [FlopsRow(component=k, prefill=0, decode=decode[k], generate=generate[k], train=0)
             for k in decode if k not in fwd]
    rows += [FlopsRow(component=k, prefill=0, decode=0, generate=0, train=train[k]) for k in lora]
    p, dcd, t = sum(prefill.values()), sum(decode.values()), sum(train.values())
    return FlopsReport(
        model=spec.name, batch=batch, seq=seq, gen=gen, attention=w.attention_core, logits=w.logits,
        mla_decode=w.mla_decode if attn.latent_cache else "n/a", recompute=w.recompute, mtp=w.mtp,
        prefill_flops=p, decode_flops=dcd, generate_flops=sum(generate.values()), train_flops=t,
        prefill_flops_per_token=p // (batch * seq), decode_flops_per_token=dcd // batch,
        train_flops_per_token=t // (batch * seq), breakdown=rows,
        formula=FORMULA + ("; " + LORA_FORMULA if w.lora else ""),
        lora_rank=w.lora_rank, lora_targets=list(w.lora_targets) if w.lora else [],
        positions=position_flops(spec, batch, seq, gen, w.attention_core),
        notes=_notes(spec, w) + [POSITIONS_NOTE] + ([f"seq + gen exceeds the model's max_seq_len {spec.max_seq_len:,}"]
                                    if seq + gen > spec.max_seq_len else []),
    )


def _passes(spec: ModelSpec, component: str) -> int:
    """Forward + backward passes of a component: FWD_BWD, or what the attention block says for its own
    (DSA's indexer projections: forward + weight gradients only, its input is detached)."""
    if "attention/" not in component:
        return FWD_BWD
    return spec.attention.train_passes(component.rsplit("attention/", 1)[1])


def _frozen_passes(spec: ModelSpec, component: str) -> int:
    """Forward + backward passes of a component under LoRA, every base weight frozen and the input gradient
    flowing through every layer: FROZEN (2) for a weight's matmul, what the attention block says for its own
    (the core keeps its 3: its operands are activations)."""
    if "attention/" not in component:
        return FROZEN
    name = component.rsplit("attention/", 1)[1]
    return spec.attention.frozen_passes(name, name in spec.attention.matmuls(spec.d_model))


def _recomputed(component: str, fwd: int, recompute: str) -> int:
    """Forward work redone in the backward pass: every layer (full) or the attention core (selective)."""
    if recompute == "full":
        return 0 if component.endswith("lm_head") else fwd
    if recompute == "selective":
        return fwd if "/core_" in component else 0
    return 0


def _notes(spec: ModelSpec, w: Workload) -> list[str]:
    notes = [
        f"attention core counted {w.attention_core}: "
        + ("only unmasked (query, key) pairs, S(S+1)/2 per full layer" if w.attention_core == "causal"
           else "the full S×S product per layer, masked or not"),
        f"prefill logits: {w.logits} positions; training always projects all positions",
    ]
    mixers: list = []  # each distinct mixer once, in layer order
    for g in spec.layer_groups():
        if g.mixer is not None and g.mixer not in mixers:
            mixers.append(g.mixer)
    notes += [n for a in mixers for n in (a.pattern_note, a.decode_note(w.mla_decode)) if n]
    if w.lora:
        notes.append(f"train: LoRA rank {w.lora_rank} on {','.join(w.lora_targets)}: frozen weights cost forward + "
                     "input gradient (2×), adapters 3×, the attention core 3×; the input gradient is taken to "
                     "flow through every layer (PEFT's enable_input_require_grads, on under gradient checkpointing "
                     "and prepare_model_for_kbit_training); prefill and decode are the base model's (adapters "
                     "merged)")
    if spec.mtp_modules and not w.mtp:
        notes.append("the MTP module is not counted (use `mtp`)")
    return notes
