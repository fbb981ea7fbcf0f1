"""FLOPs of prefill, decode, generation and a training step. See docs/formulas.md#flops.

A multiply-add is 2 FLOPs. Matmuls: 2 · tokens · weights. Attention core: (query, key) pairs ·
per-pair cost (scores and weighted values). Element-wise work (norms, softmax, activations, RoPE,
biases) is not counted, as in Megatron-LM, PaLM and torch's FlopCounterMode, unless asked for (`elementwise`,
`embedding_matmul`: llmcalc/costs/elementwise.py adds its rows). A position encoding's own matmuls
(Transformer-XL relative: the projection of the distances, the position scores per pair) are in the
totals under attention/ (docs/formulas.md#relative-positions).

  prefill  = Σ_layers [2·B·S·W_layer + pairs(S)·c_pair] + 2·B·n_logits·d·V
  decode   = Σ_layers [2·B·W_layer + B·keys·c_pair] + 2·B·d·V,   keys = min(S+1, window)
  generate = Σ_{t<G} decode(context S+t)
  train    = 3 · forward(B·S tokens, all logits)                       (model FLOPs)
  LoRA     = 2 · frozen matmuls + 3 · attention core + 3 · adapters' forward
  hardware = train with the core's backward as its kernel runs it (flash: scores 4×, values 3× forward;
             eager: 3×) + the forward of every recomputed op (docs/formulas.md#hardware-flops)
  encoder  = prefill only: pairs(S) = S² (bidirectional), no logits, + 2·B·d² for a pooler; no decode
             (llmcalc/model/encoders.py, docs/encoders.md)
  encoder-decoder: prefill + encode(S_e) + cross K/V (once) + cross(S queries × S_e keys); decode + cross(1 × S_e)
             (EncoderDecoder.encoder_flops, docs/encoder-decoder.md#flops)
"""

from __future__ import annotations

from collections import defaultdict
from functools import partial
from typing import Any

from llmcalc.costs.elementwise import elementwise_flops
from llmcalc.costs.lora import adapters
from llmcalc.costs.positions import NOTE as POSITIONS_NOTE
from llmcalc.costs.positions import position_flops
from llmcalc.costs.vision import vision_cost
from llmcalc.errors import UserError
from llmcalc.model.attention import Parts
from llmcalc.model.spec import LayerGroup, ModelSpec
from llmcalc.model.units import MAC
from llmcalc.reports.flops import FlopsReport, FlopsRow
from llmcalc.workload import Workload

FORMULA = ("prefill = Σ_layers[2·B·S·W + B·pairs(S)·c_pair] + 2·B·n_logits·d·V; "
           "decode = Σ_layers[2·B·W + B·min(S+1, window)·c_pair] + 2·B·d·V; generate = Σ_{t<G} decode(S+t); "
           "train = 3·forward(all logits); train_hardware = train + flash's score recompute + recomputed ops")
ATTENTION_CONVENTIONS = {
    "causal": "only unmasked (query, key) pairs, S(S+1)/2 per full layer",
    "causal-half": "the area under the causal mask, S²/2 pairs per full layer (Megatron-LM, FlashAttention's "
                   "benchmarks); decode and generate likewise, S + ½ keys per step",
    "dense": "the full S×S product per layer, masked or not",
}
"""What each attention-core convention counts, as the notes say it."""
FWD_BWD = 3
"""Forward + backward: the backward pass costs two forwards (gradients for inputs and weights)."""
FROZEN = 2
"""Forward + backward of a frozen weight's matmul whose input gradient flows (LoRA): the input gradient only."""
LORA_FORMULA = ("train (LoRA) = 2·forward(frozen matmuls) + 3·attention core + 3·forward(adapters); "
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
        absorbed = absorbed and attn.latent_cache  # a hybrid's other mixers have no absorbed decode
        if absorbed:
            out |= {f"{path}/{k}": MAC * tokens * w for k, w in attn.absorbed_matmuls().items()}
        if core is None:
            core = {k: pairs * c for k, c in attn.core_per_pair(absorbed).items()}
        out |= {f"{path}/{k}": c for k, c in core.items()}
    prefix = spec.ffn_prefix(group)
    out |= {prefix + k: MAC * tokens * w for k, w in group.ffn.matmuls(d).items()}
    out |= {k: MAC * tokens * w for k, w in spec.stack.layer_matmuls(spec).items()}  # Gemma 3n's AltUp, LAuReL
    return out


def forward_layers(spec: ModelSpec, *, tokens, logits, core_of, latents_of, absorbed: bool, mtp: bool,
                   sequences=0, pairs_of=None, layers: int | None = None) -> dict[tuple[int | None, str], Any]:
    """A forward's FLOPs, all its sequences together, by (layer group index, component) for ONE layer of each
    group, and by (None, component) for what runs once per forward: the LM head over `logits` positions, a
    pooler's matmuls once per sequence (`sequences`), the MTP modules (`mtp`, when every layer runs) after the
    last layer. The one assembly of a forward's FLOPs: `flops` sums it over the layers at its points, the step
    cost form (llmcalc/costs/step.py) writes it over the point's variables.

    `tokens`: the new tokens; core_of(g): the core FLOPs of group g's mixer by component; latents_of(g): the
    cached latents its attention re-projects (decompressed MLA decode; a prefill its new tokens); pairs_of(g):
    its (query, key) pairs and the distances a relative position encoding projects, for the encoding's
    layer_matmuls (None: not counted). `layers`: the first `layers` layers only (the head's included). Ints or
    exact forms (llmcalc/costs/form.py) alike."""
    out: dict[tuple[int | None, str], Any] = {}
    groups = spec.layer_groups()

    def layer(g: LayerGroup) -> dict[str, Any]:
        core = core_of(g) if g.mixer is not None else {}
        if g.mixer is not None and pairs_of is not None and spec.positions.matmul_names:
            pairs, distances = pairs_of(g)
            core = core | spec.positions.layer_matmuls(spec.d_model, g.mixer, pairs, distances)
        return layer_flops(spec, g, tokens, 0, latents_of(g), absorbed, core)

    for gi, g in enumerate(spec.layer_groups(0, layers)):
        out |= {(gi, k): v for k, v in layer(g).items()}
    head = MAC * logits * spec.d_model * spec.vocab_size
    out[(None, "lm_head")] = head
    for k, weights in spec.stack.head_matmuls(spec.d_model).items():  # once per sequence (an encoder's pooler)
        out[(None, k)] = MAC * sequences * weights
    for k, weights in spec.stack.token_matmuls(spec).items():  # every token (Gemma 3n's per-layer projection)
        out[(None, k)] = MAC * tokens * weights
    if mtp and spec.mtp_modules and (layers is None or layers >= spec.n_layers):
        n = spec.mtp_modules
        out |= {(None, f"mtp/{k}"): n * v for k, v in layer(groups[-1]).items()}
        out[(None, "mtp/projection")] = n * MAC * tokens * 2 * spec.d_model * spec.d_model
        out[(None, "mtp/lm_head")] = n * head
    return out


def forward(spec: ModelSpec, batch: int, *, new: int, core_of, latents_of, absorbed: bool,
            logits: int, mtp: bool, pairs_of=None, layers: int | None = None) -> dict[str, int]:
    """Whole-model forward FLOPs of `batch` sequences of `new` new tokens each, by component (forward_layers
    summed over each group's layers). core_of(mixer, window), latents_of(window) and pairs_of(window) are one
    sequence's (pairs shared by the batch: a relative encoding projects each distance once)."""
    def pairs(g: LayerGroup):
        p, distances = pairs_of(g.window)
        return batch * p, distances

    groups = spec.layer_groups(0, layers)  # forward_layers' groups: of the first `layers` layers
    total: dict[str, int] = defaultdict(int)
    per_layer = forward_layers(
        spec, tokens=batch * new, logits=batch * logits, sequences=batch, absorbed=absorbed, mtp=mtp, layers=layers,
        core_of=lambda g: {k: batch * v for k, v in core_of(g.mixer, g.window).items()},
        latents_of=lambda g: batch * latents_of(g.window), pairs_of=pairs if pairs_of is not None else None)
    for (gi, k), v in per_layer.items():
        total[k] += v * (groups[gi].count if gi is not None else 1)
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
    by component, under the workload's conventions (attention, logits, mla_decode, mtp); the training step's
    hardware FLOPs under its attention_kernel and recompute policy (recompute, recompute_ops)."""
    spec = w.sized(spec)  # cross-attention layers read the workload's images (Workload.sized)
    attn, batch, seq, gen, stack = spec.attention, w.batch, w.seq, w.gen, spec.stack
    stack.check_sized("FLOPs")
    absorbed = w.absorbed(attn, prefill=False)
    decompress = attn.latent_cache and not absorbed

    def forward_of(logits: int, layers: int | None = None) -> dict[str, int]:
        return forward(spec, batch, new=seq, core_of=lambda a, win: stack.prefill_core(a, seq, win, w.attention_core),
                       latents_of=lambda win: seq, absorbed=False, logits=stack.prefill_logits(logits), mtp=w.mtp,
                       pairs_of=lambda win: (attn.pairs(seq, 0, win, w.attention_core), seq), layers=layers)

    enc_seq = stack.encoder_length(w.encoder_seq, seq)

    def prefill_like(logits: int, layers: int | None = None) -> dict[str, int]:
        out = forward_of(logits, layers)
        for k, v in stack.encoder_flops(spec, batch, seq, enc_seq, encode=True).items():  # an encoder-decoder's
            out[k] = out.get(k, 0) + v
        return out

    prefill = prefill_like(seq if w.logits == "all" else 1)
    keys = lambda win: attn.pairs(1, seq, win)  # noqa: E731 - decode attends to (and re-projects) these
    decode = forward(spec, batch, new=1, core_of=lambda a, win: a.core(1, seq, win, w.step_attention, absorbed),
                     latents_of=keys if decompress else lambda win: 0, absorbed=absorbed, logits=1, mtp=w.mtp,
                     pairs_of=lambda win: (keys(win), keys(win)))  # one query: a distance per key
    steps = lambda win: attn.pairs(gen, seq, win)  # noqa: E731
    generate = forward(spec, batch, new=gen, core_of=lambda a, win: a.core(gen, seq, win, w.step_attention, absorbed),
                       latents_of=steps if decompress else lambda win: 0, absorbed=absorbed, logits=gen, mtp=w.mtp,
                       pairs_of=lambda win: (steps(win), steps(win)))  # Σ over the steps of each step's keys
    for phase, new in ((decode, 1), (generate, gen)):  # the cross-attention of each new token, nothing re-encoded
        for k, v in stack.encoder_flops(spec, batch, new, enc_seq, encode=False).items():
            phase[k] = phase.get(k, 0) + v
    fwd = prefill_like(seq)
    if w.elementwise or w.embedding_matmul:
        extra = partial(elementwise_flops, spec, batch, elementwise=w.elementwise, embedding=w.embedding_matmul)
        step = w.step_attention
        for phase, (new, context, conv) in ((prefill, (seq, 0, w.attention_core)), (fwd, (seq, 0, w.attention_core)),
                                            (decode, (1, seq, step)), (generate, (gen, seq, step))):
            phase.update(extra(new, context, conv))
    if not stack.decodes:
        decode, generate = {}, {}
    passes = partial(_frozen_passes, spec) if w.lora else partial(_passes, spec)
    lora = adapter_forward(spec, w) if w.lora else {}
    model_passes = {k: passes(k) for k in fwd} | {k: FWD_BWD for k in lora}
    train = {k: model_passes[k] * v for k, v in (fwd | lora).items()}
    if w.recompute_layers is not None and w.recompute_layers > spec.n_layers:
        raise UserError(f"`recompute_layers`: {w.recompute_layers} is more than the model's {spec.n_layers} layers; "
                        f"give at most {spec.n_layers}")
    redone = fwd | lora if w.recompute_layers is None else prefill_like(seq, w.recompute_layers)
    hardware = {k: _hardware_passes(spec, k, w.attention_kernel, model_passes[k]) * v
                + (redone.get(k, 0) if _recompute_op(spec, k) in w.recomputed else 0)
                for k, v in (fwd | lora).items()}
    rows = [FlopsRow(component=k, prefill=prefill.get(k, 0), decode=decode.get(k, 0),
                     generate=generate.get(k, 0), train=train[k], train_hardware=hardware[k])
            for k in fwd if fwd[k] or stack.lm_head]
    rows += [FlopsRow(component=k, prefill=0, decode=decode[k], generate=generate[k], train=0, train_hardware=0)
             for k in decode if k not in fwd]
    rows += [FlopsRow(component=k, prefill=0, decode=0, generate=0, train=train[k], train_hardware=hardware[k])
             for k in lora]
    p, dcd, t, hw = sum(prefill.values()), sum(decode.values()), sum(train.values()), sum(hardware.values())
    return FlopsReport(
        model=spec.name, batch=batch, seq=seq, gen=gen, attention=w.attention_core,
        logits=w.logits if stack.lm_head else "none",
        mla_decode=w.mla_decode if attn.latent_cache else "n/a", recompute=w.recompute_label,
        attention_kernel=w.attention_kernel, mtp=w.mtp,
        prefill_flops=p, decode_flops=dcd, generate_flops=sum(generate.values()), train_flops=t,
        train_hardware_flops=hw, prefill_flops_per_token=p // (batch * seq), decode_flops_per_token=dcd // batch,
        train_flops_per_token=t // (batch * seq), train_hardware_flops_per_token=hw // (batch * seq), breakdown=rows,
        formula=FORMULA + ("; " + LORA_FORMULA if w.lora else ""),
        lora_rank=w.lora_rank, lora_targets=list(w.lora_targets) if w.lora else [],
        positions=position_flops(spec, batch, seq, gen, w.attention_core),
        vision=vision_cost(spec, w, p),
        notes=_notes(spec, w) + [ELEMENTWISE_NOTE if w.elementwise else POSITIONS_NOTE]
        + _length_note(spec, seq + gen * stack.decodes)
        + [n for n in (stack.encoder_flops_note(),) if n] + ([f"encoder: {enc_seq:,} tokens per sequence"
                                                              f" (`encoder_seq`)"] if enc_seq else []),
    )


ELEMENTWISE_NOTE = ("element-wise FLOPs counted (`elementwise`) as the elementwise/ rows, in the totals: norms per "
                    "element (RMSNorm 4, LayerNorm 6, +1 bias), softmax 3·H per (query, key) pair, activations per "
                    "element (SiLU 4, GELU 5, tanh-GELU 9, ReLU 1; gated +1), residual adds 2·d per layer, positions "
                    "as under `positions`; train 3× forward for each; docs/formulas.md#element-wise-flops")


def _passes(spec: ModelSpec, component: str) -> int:
    """Forward + backward passes of a component: FWD_BWD, or what the attention block says for its own
    (DSA's indexer projections: forward + weight gradients only, its input is detached), or the stack for its own
    (Whisper's first audio convolution: its input needs no gradient)."""
    if (own := spec.stack.train_passes(component)) is not None:
        return own
    path = component.removeprefix("mtp/")  # an MTP module's parts are its layer's (mtp/lm_head: the head's)
    block, name = path.split("/", 1) if "/" in path else ("", path)
    if block in spec.mixers:  # a hybrid's other mixer (Gated DeltaNet's first read and final update)
        return spec.mixers[block].train_passes(name)
    if "attention/" not in component:
        return FWD_BWD
    name = component.rsplit("attention/", 1)[1]
    if name in spec.positions.matmul_names:
        return spec.positions.layer_passes(name)
    return spec.attention.train_passes(name)


def _frozen_passes(spec: ModelSpec, component: str) -> int:
    """Forward + backward passes of a component under LoRA, every base weight frozen and the input gradient
    flowing through every layer: FROZEN (2) for a weight's matmul, what the attention block says for its own
    (the core keeps its 3: its operands are activations)."""
    if "attention/" not in component:
        return FROZEN
    name = component.rsplit("attention/", 1)[1]
    if name in spec.positions.matmul_names:
        return spec.positions.layer_passes(name, frozen=True)
    return spec.attention.frozen_passes(name, name in spec.attention.matmuls(spec.d_model))


def _recompute_op(spec: ModelSpec, component: str) -> str | None:
    """The recompute op (llmcalc/workload.py RECOMPUTE_OPS) a component belongs to, MTP's and adapters' as the
    op they sit in; the LM heads belong to none (never recomputed)."""
    path = component.removeprefix("lora/").removeprefix("mtp/")
    if path.startswith("attention/"):
        return spec.attention.recompute_op(path.removeprefix("attention/"), spec.d_model)
    if path.startswith("ffn/"):
        return "ffn"
    return "qkv" if path == "projection" else None


def _hardware_passes(spec: ModelSpec, component: str, kernel: str, model: int) -> int:
    """Forward + backward work of a component in forwards as it runs: the attention core's as its kernel runs
    it (Attention.kernel_passes), every other component's (a position encoding's matmuls included) as in the
    model FLOPs (`model`)."""
    path = component.removeprefix("mtp/")
    if not path.startswith("attention/"):
        return model
    name = path.removeprefix("attention/")
    if name in spec.attention.matmuls(spec.d_model) or name in spec.positions.matmul_names:
        return model
    return spec.attention.kernel_passes(name, kernel)


def _length_note(spec: ModelSpec, length: int) -> list[str]:
    """A note when the sequence (prompt and generated tokens) is longer than the model's max_seq_len."""
    what = "seq + gen" if spec.stack.decodes else "seq"
    return [f"{what} exceeds the model's max_seq_len {spec.max_seq_len:,}"] if length > spec.max_seq_len else []


def _notes(spec: ModelSpec, w: Workload) -> list[str]:
    if note := spec.stack.flops_note():
        return [note] + ([n for n in (spec.attention.pattern_note,) if n])
    notes = [
        f"attention core counted {w.attention_core}: " + ATTENTION_CONVENTIONS[w.attention_core],
        f"prefill logits: {w.logits} positions; training always projects all positions",
        f"train: model FLOPs (forward + backward, nothing redone); train_hardware: what runs, the {w.attention_kernel}"
        " attention kernel's backward (" + ("flash recomputes the scores: 2.5 × the core's forward" if
                                            w.attention_kernel == "flash" else "eager: 2 × the core's forward")
        + ") and the forward of the recomputed ops (" + (", ".join(sorted(w.recomputed)) or "none")
        + (f", in the first {w.recompute_layers} of {spec.n_layers} layers" if w.recompute_layers else "") + ")",
    ]
    mixers: list = []  # each distinct mixer once, in layer order
    for g in spec.layer_groups():
        if g.mixer is not None and g.mixer not in mixers:
            mixers.append(g.mixer)
    notes += [n for a in mixers for n in (a.pattern_note, a.decode_note(w.mla_decode)) if n]
    notes += [spec.positions.flops_note] if spec.positions.flops_note else []
    if w.lora:
        notes.append(f"train: LoRA rank {w.lora_rank} on {','.join(w.lora_targets)}: frozen weights cost forward + "
                     "input gradient (2×), adapters 3×, the attention core 3×; the input gradient is taken to "
                     "flow through every layer (PEFT's enable_input_require_grads, on under gradient checkpointing "
                     "and prepare_model_for_kbit_training); prefill and decode are the base model's (adapters "
                     "merged)")
    if w.embedding_matmul:
        notes.append("the input embedding counted as a one-hot matmul (`embedding_matmul`): 2·V·d per token, the "
                     "embedding row")
    if spec.mtp_modules and not w.mtp:
        notes.append("the MTP module is not counted (use `mtp`)")
    return notes
